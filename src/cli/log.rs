//! `packfs log`: the Manifest history of a revision.

use std::io::Write;

use clap::Args;
use packfs_core::dataset::Dataset;
use packfs_core::store::StoreConfig;

use super::merge::conflict_line;
use super::{CliResult, DatasetAt};

#[derive(Args, Debug)]
pub(crate) struct LogArgs {
    #[command(flatten)]
    pub at: DatasetAt,
    /// Show at most this many Manifests.
    #[arg(short = 'n', long, default_value_t = 20)]
    pub max_count: usize,
}

/// Prints the Manifests of `args`' revision, newest first, along first
/// parents.
pub(super) async fn run(args: LogArgs, config: &StoreConfig) -> CliResult {
    let LogArgs { at, max_count } = args;
    let dataset = Dataset::open_with(&at.dataset, false, config)?;
    let mut out = std::io::stdout().lock();
    let history = dataset.history(&at.revision.to_string(), max_count).await?;
    for (id, m) in &history.manifests {
        let id = *id;
        let date = chrono::DateTime::from_timestamp_nanos(m.ts_unix_ns as i64);
        writeln!(out, "manifest {id}")?;
        if m.parents.len() > 1 {
            let parents: Vec<String> = m.parents.iter().map(|p| p.short()).collect();
            writeln!(out, "Merge:   {}", parents.join(" "))?;
        }
        writeln!(out, "Date:    {}", date.format("%Y-%m-%d %H:%M:%S%.3f UTC"))?;
        writeln!(out, "Writer:  {}", m.writer)?;
        for t in &m.tracks {
            writeln!(
                out,
                "Track:   {}/{} {}",
                t.timeline,
                t.modality,
                t.track.short()
            )?;
        }
        if m.parents.len() > 1 {
            for c in dataset.conflicts_of(&id).await? {
                writeln!(out, "Conflict: {}", conflict_line(&c))?;
            }
        }
        writeln!(out)?;
    }
    if history.expired {
        writeln!(
            out,
            "(the history before this was expired by packfs expire)"
        )?;
    }
    Ok(())
}
