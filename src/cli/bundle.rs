//! `packfs bundle create`: a new DataBundle of a directory tree or of a
//! dataset.

use std::path::PathBuf;
use std::sync::Arc;

use clap::{Args, Subcommand};
use packfs_core::bundle_create::{create, BundleSource, CreateOptions};
use packfs_core::dataset::Revision;
use packfs_core::store::StoreConfig;
use packfs_core::units::parse_size;
use packfs_format::bundle::Compression;

use super::CliResult;
use crate::progress::Bar;

#[derive(Subcommand, Debug)]
pub(crate) enum BundleCommand {
    /// Write a new DataBundle of a directory tree or of a dataset.
    ///
    /// Files are concatenated into shards written in parallel, compressed
    /// in records; the index is written last, so a bundle whose writing
    /// failed is never read. Of a directory, symbolic links to files are
    /// followed; links to directories, special files and names that are
    /// not UTF-8 are refused. Of a dataset (SRC is a dataset, or a dataset
    /// followed by a directory of its tree: DATASET/train/image), the tree
    /// at --ref below that directory is bundled, with the modes and mtimes
    /// a read-write mount shows. A local directory that is a dataset, or
    /// inside one, is read as the dataset, not as a directory.
    Create(BundleCreateArgs),
}

#[derive(Args, Debug)]
pub(crate) struct BundleCreateArgs {
    /// Source: a directory, or a dataset location, optionally followed by
    /// a directory of its tree (DATASET/train, s3://bucket/ds/train/image).
    pub src: String,
    /// Where the bundle goes: a directory (created if missing) or an
    /// object-store URL (s3://bucket/prefix, …). It must hold no bundle
    /// index or shards yet.
    pub bundle: String,
    /// How records are compressed.
    #[arg(long, default_value = "zstd", value_parser = ["zstd", "gzip", "none"])]
    pub compression: String,
    /// Compression level [default: zstd 3, gzip 6].
    #[arg(long, allow_negative_numbers = true)]
    pub level: Option<i32>,
    /// Most uncompressed bytes of one record (e.g. 256KiB, 1MiB).
    #[arg(long, default_value = "256KiB", value_parser = parse_size)]
    pub record_size: u64,
    /// Records start at multiples of this in a shard (a power of two).
    #[arg(long, default_value = "4096", value_parser = parse_size)]
    pub block_size: u64,
    /// Number of shards, written in parallel [default: the number of
    /// CPUs, at most 8]; never more than the number of files.
    #[arg(long)]
    pub shards: Option<u32>,
    /// Where a bundle for an object store is put together before it is
    /// uploaded (it needs room for the whole bundle) [default: the
    /// system's temporary directory].
    #[arg(long)]
    pub staging_dir: Option<PathBuf>,
    /// What to read when SRC is a dataset: a ref, a Manifest id or a
    /// unique prefix of at least 8 of its hex digits, optionally followed
    /// by ~N (N Manifests back along first parents).
    #[arg(long = "ref", default_value = "main", value_name = "REVISION")]
    pub revision: Revision,
    /// Never draw a progress bar.
    #[arg(long)]
    pub no_progress: bool,
}

impl BundleCommand {
    /// Runs the `packfs bundle` subcommand.
    pub(crate) async fn run(self, config: &StoreConfig) -> CliResult {
        match self {
            BundleCommand::Create(args) => run_create(args, config).await,
        }
    }
}

/// Writes the bundle and sums up on stderr what it holds.
async fn run_create(args: BundleCreateArgs, config: &StoreConfig) -> CliResult {
    let started = std::time::Instant::now();
    let options = CreateOptions::default()
        .compression(Compression::from_name(&args.compression)?)
        .level(args.level)
        .record_size(args.record_size)
        .block_size(args.block_size)
        .shards(args.shards)
        .staging_dir(args.staging_dir);
    let source = BundleSource::open(&args.src, &args.revision, config).await?;
    let progress = Arc::new(Bar::new("bundle create", !args.no_progress));
    let report = create(source, &args.bundle, &options, config, progress).await?;
    eprintln!(
        "created bundle {}: {} files and {} directories, {} bytes in, {} bytes stored in {} \
         shards and the index (ratio {:.2}), in {:.1}s",
        args.bundle,
        report.files,
        report.dirs,
        report.bytes_in,
        report.bytes_stored,
        report.shards,
        report.bytes_in as f64 / report.bytes_stored.max(1) as f64,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
