//! `packfs expire`: cuts the history down to what is kept, for `packfs gc`
//! to delete the rest.

use std::io::Write;
use std::time::Duration;

use clap::Args;
use packfs_core::dataset::Dataset;
use packfs_core::expire::{check_keep_within, expire_with, KeepRules};
use packfs_core::store::StoreConfig;
use packfs_core::units::parse_duration;

use super::CliResult;
use crate::progress::Bar;

#[derive(Args, Debug)]
#[command(group = clap::ArgGroup::new("keep").required(true).multiple(true))]
pub(crate) struct ExpireArgs {
    /// Dataset location.
    pub dataset: String,
    /// Keep each ref's newest N Manifests (along first parents).
    #[arg(long, value_name = "N", group = "keep", value_parser = clap::value_parser!(u64).range(1..))]
    pub keep_last: Option<u64>,
    /// Keep every Manifest younger than this: e.g. 7d, 12h; at least 1h.
    #[arg(long, value_name = "DURATION", group = "keep", value_parser = parse_duration)]
    pub keep_within: Option<Duration>,
    /// Only say what would be expired.
    #[arg(long)]
    pub dry_run: bool,
}

/// Expires the history beyond what `args` keep: one line per Manifest
/// expired on stdout, newest first, and a summary on stderr.
pub(super) async fn run(args: ExpireArgs, config: &StoreConfig) -> CliResult {
    let minimum = packfs_core::expire::MIN_KEEP_WITHIN;
    let rules = KeepRules {
        last: args.keep_last.unwrap_or(1) as usize,
        within: args.keep_within.unwrap_or(minimum),
    };
    check_keep_within(rules.within)?;
    let dataset = Dataset::open_with(&args.dataset, false, config)?;
    let progress = Bar::new("expire", true);
    let report = expire_with(&dataset, rules, args.dry_run, &progress).await?;
    let verb = if args.dry_run {
        "would expire"
    } else {
        "expired"
    };
    let mut out = std::io::stdout().lock();
    for (id, ts) in &report.expired {
        let date = chrono::DateTime::from_timestamp_nanos(*ts as i64);
        let date = date.format("%Y-%m-%d %H:%M:%S UTC");
        writeln!(out, "{verb} manifest {id} ({date})")?;
    }
    eprintln!(
        "{} refs and {} mounts' leases: kept {} of {} manifests; {verb} {} \
         ({} parent links cut){}",
        report.refs,
        report.leases,
        report.kept,
        report.manifests,
        report.expired.len(),
        report.cut_links,
        match report.expired.len() {
            0 => String::new(),
            _ if args.dry_run => String::new(),
            _ => "; `packfs gc` deletes what only they named".to_string(),
        }
    );
    if !report.stale_leases.is_empty() {
        let verb = if args.dry_run {
            "would delete"
        } else {
            "deleted"
        };
        eprintln!(
            "{verb} {} leases of mounts not renewed for {:?}: {}",
            report.stale_leases.len(),
            packfs_core::dataset::LEASE_TTL,
            report
                .stale_leases
                .iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(())
}
