//! `packfs gc`: deletes the objects no ref reaches.

use std::io::Write;
use std::time::Duration;

use clap::Args;
use packfs_core::dataset::Dataset;
use packfs_core::store::StoreConfig;
use packfs_core::units::parse_duration;

use super::CliResult;
use crate::progress::Bar;

#[derive(Args, Debug)]
pub(crate) struct GcArgs {
    /// Dataset location.
    pub dataset: String,
    /// Only list what would be deleted.
    #[arg(long)]
    pub dry_run: bool,
    /// Keep unreachable objects younger than this (a writer may not have
    /// moved its ref yet): e.g. 24h, 3h; at least 2h.
    #[arg(long, default_value = "24h", value_parser = parse_duration)]
    pub grace: Duration,
}

/// Deletes (or with `--dry-run` lists) the unreachable objects older than
/// the grace, one line each on stdout, and sums up on stderr.
pub(super) async fn run(args: GcArgs, config: &StoreConfig) -> CliResult {
    let (dry_run, grace) = (args.dry_run, args.grace);
    packfs_core::gc::check_grace(grace)?;
    let dataset = Dataset::open_with(&args.dataset, false, config)?;
    let progress = Bar::new("gc", true);
    let report = packfs_core::gc::gc_with(&dataset, grace, dry_run, &progress).await?;
    let verb = if dry_run { "would delete" } else { "deleted" };
    let mut out = std::io::stdout().lock();
    for (path, size) in &report.unreachable {
        writeln!(out, "{verb} {path} ({size} bytes)")?;
    }
    let bytes: u64 = report.unreachable.iter().map(|(_, s)| s).sum();
    eprintln!(
        "{} refs, {} manifests and {} objects reachable; {verb} {} unreachable objects ({bytes} bytes); \
         kept {} younger than {:?}",
        report.refs,
        report.manifests_kept,
        report.objects_kept,
        report.unreachable.len(),
        report.too_young,
        grace
    );
    if report.spared > 0 {
        eprintln!(
            "kept {} objects a writer reused or committed while gc ran",
            report.spared
        );
    }
    Ok(())
}
