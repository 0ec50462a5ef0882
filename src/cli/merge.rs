//! `packfs merge`: branches merged into a ref.

use std::io::Write;

use clap::Args;
use packfs_core::dataset::{writer_string, Conflict, Dataset, MergeOutcome, Revision};
use packfs_core::store::StoreConfig;

use super::CliResult;

#[derive(Args, Debug)]
pub(crate) struct MergeArgs {
    /// Dataset location.
    pub dataset: String,
    /// The ref to merge into.
    #[arg(long, default_value = "main")]
    pub into: String,
    /// Refs to merge (or Manifests: ids, prefixes, REVISION~N).
    #[arg(required = true, value_name = "BRANCH")]
    pub branches: Vec<Revision>,
}

/// Merges, lists the conflicts on stdout and the outcome on stderr.
pub(super) async fn run(args: MergeArgs, config: &StoreConfig) -> CliResult {
    let dataset = Dataset::open_with(&args.dataset, false, config)?;
    dataset.store().ensure_atomic_refs().await?;
    let names: Vec<String> = args.branches.iter().map(Revision::to_string).collect();
    let writer = writer_string(&format!("merge {}", names.join(" ")));
    let report = dataset.merge_refs(&args.into, &names, &writer).await?;
    let mut out = std::io::stdout().lock();
    for c in &report.conflicts {
        writeln!(out, "conflict {}", conflict_line(c))?;
    }
    let what = match report.outcome {
        MergeOutcome::UpToDate => "already up to date".to_string(),
        MergeOutcome::FastForward => "fast-forwarded".to_string(),
        MergeOutcome::Merged { parents } => format!("merged ({parents} parents)"),
    };
    let n = report.conflicts.len();
    eprintln!(
        "ref {} {what}: manifest {}{}",
        args.into,
        report.manifest,
        match n {
            0 => String::new(),
            1 => ", 1 conflict".into(),
            n => format!(", {n} conflicts"),
        }
    );
    Ok(())
}

/// What `merge` and `log` say of a merge conflict.
pub(super) fn conflict_line(c: &Conflict) -> String {
    let dir = format!("{}/{}", c.timeline, c.modality);
    format!(
        "{dir}/{}: the merged-in version is kept as {dir}/{}",
        c.name, c.renamed_to
    )
}
