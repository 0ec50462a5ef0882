//! `packfs diff`: the items that differ between two revisions.

use std::io::Write;

use clap::Args;
use packfs_core::cache::CacheOptions;
use packfs_core::dataset::{Dataset, Revision};
use packfs_core::diff::{quote_path, Change};
use packfs_core::reader::Reader;
use packfs_core::store::StoreConfig;

use super::CliResult;

#[derive(Args, Debug)]
pub(crate) struct DiffArgs {
    /// Dataset location.
    pub dataset: String,
    /// The revision compared from: a ref, a Manifest id or a unique
    /// prefix of at least 8 of its hex digits, optionally followed by
    /// ~N (N Manifests back along first parents).
    pub from: Revision,
    /// The revision compared to (same syntax).
    pub to: Revision,
    /// Separate marker and path with NUL and end each entry with NUL,
    /// paths unquoted (for xargs -0).
    #[arg(short = 'z')]
    pub nul: bool,
}

/// Prints one line per item that differs on stdout, and a summary on
/// stderr.
pub(super) async fn run(args: DiffArgs, config: &StoreConfig) -> CliResult {
    let dataset = Dataset::open_with(&args.dataset, false, config)?;
    let from = dataset.resolve_revision(&args.from).await?;
    let to = dataset.resolve_revision(&args.to).await?;
    let reader = Reader::new(dataset.store().clone(), CacheOptions::default(), None);
    let report = packfs_core::diff::diff(&dataset, &from, &to, &reader).await?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let written = report.differences.iter().try_for_each(|d| match args.nul {
        true => write!(out, "{}\0{}\0", d.change.marker(), d.path),
        false => writeln!(out, "{}\t{}", d.change.marker(), quote_path(&d.path)),
    });
    match written.and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
        r => r?,
    }
    let sides = format!(
        "from {} ({}) to {} ({})",
        from.revision,
        from.id.short(),
        to.revision,
        to.id.short()
    );
    match report.differences.is_empty() {
        true => eprintln!("{sides}: no differences"),
        false => eprintln!(
            "{sides}: {} added, {} removed, {} modified, {} touched (mode or mtime only)",
            report.count(Change::Added),
            report.count(Change::Removed),
            report.count(Change::Modified),
            report.count(Change::Touched),
        ),
    }
    match report.items_read {
        0 => {}
        1 => eprintln!(
            "1 item of the same size stored apart was read and compared ({} bytes read)",
            report.bytes_read
        ),
        n => eprintln!(
            "{n} items of the same size stored apart were read and compared ({} bytes read)",
            report.bytes_read
        ),
    }
    Ok(())
}
