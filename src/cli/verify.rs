//! `packfs verify`: every object and invariant of a dataset's revision, a
//! DataBundle or a TileDB array, checked.

use std::fmt::Display;
use std::io::Write;

use clap::Args;
use packfs_core::array::Array;
use packfs_core::cache::CacheOptions;
use packfs_core::dataset::Dataset;
use packfs_core::location::LocationKind;
use packfs_core::reader::Reader;
use packfs_core::store::{Store, StoreConfig};

use super::{CliResult, DatasetAt};
use crate::progress::Bar;

#[derive(Args, Debug)]
pub(crate) struct VerifyArgs {
    #[command(flatten)]
    pub at: DatasetAt,
}

/// Prints each problem and a verdict on stdout; returns whether the
/// location passed.
pub(super) async fn run(args: VerifyArgs, config: &StoreConfig) -> CliResult<bool> {
    let at = args.at;
    let dataset = Dataset::open_with(&at.dataset, false, config)?;
    match LocationKind::of(dataset.store()).await? {
        LocationKind::Bundle => return verify_bundle(dataset.store()).await,
        LocationKind::Array => return verify_array(dataset.store(), at.at).await,
        _ => {}
    }
    let progress = Bar::new("verifying objects", true);
    let revision = at.revision.to_string();
    let report = packfs_core::verify::verify_with(&dataset, &revision, &progress).await?;
    let manifest = report.manifest.map(|m| m.to_hex()).unwrap_or_default();
    verdict(
        &format!("ref {} manifest {manifest}", at.revision),
        &report.problems,
        format!(
            "{} items, {} objects, {} bytes verified",
            report.items, report.objects, report.bytes
        ),
    )
}

/// `packfs verify` of a DataBundle.
async fn verify_bundle(store: &Store) -> CliResult<bool> {
    let reader = Reader::new(store.clone(), CacheOptions::default(), None);
    let index_dir = packfs_fs::mount::bundle_index_dir(None);
    let report = packfs_core::verify::bundle::verify(store, &index_dir, reader).await?;
    verdict(
        &format!("bundle {}", store.location()),
        &report.problems,
        format!(
            "{} files, {} directories, {} records, {} bytes verified",
            report.files, report.directories, report.records, report.bytes
        ),
    )
}

/// `packfs verify` of a TileDB array (as of `at`, milliseconds).
async fn verify_array(store: &Store, at: Option<u64>) -> CliResult<bool> {
    let array = Array::open(store, at).await?;
    let reader = Reader::new(store.clone(), CacheOptions::default(), None);
    let report = packfs_core::verify::array::verify(&array, reader.cache()).await;
    verdict(
        &format!("TileDB array {}", store.location()),
        &report.problems,
        format!(
            "{} fragments, {} tiles, {} bytes verified",
            report.fragments, report.tiles, report.bytes
        ),
    )
}

/// Prints each of `problems`, then the verdict on `what` (with `summary`,
/// what was checked, if it passed); returns whether it passed.
fn verdict(what: &str, problems: &[impl Display], summary: String) -> CliResult<bool> {
    let mut out = std::io::stdout().lock();
    for p in problems {
        writeln!(out, "FAIL {p}")?;
    }
    match problems.len() {
        0 => writeln!(out, "OK {what}: {summary}")?,
        1 => writeln!(out, "1 problem in {what}")?,
        n => writeln!(out, "{n} problems in {what}")?,
    }
    Ok(problems.is_empty())
}
