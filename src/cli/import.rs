//! `packfs import`: a directory tree or a DataBundle packed into a dataset.

use clap::Args;
use packfs_core::dataset::Dataset;
use packfs_core::import::{import_files, prepare_source, ImportOptions};
use packfs_core::packer::PackOptions;
use packfs_core::store::StoreConfig;
use packfs_core::units::parse_size;

use super::CliResult;
use crate::progress::Bar;

#[derive(Args, Debug)]
pub(crate) struct ImportArgs {
    /// Source directory, or DataBundle (a directory or an object-store URL).
    pub src: String,
    /// Dataset location (created if it is a missing local directory).
    pub dataset: String,
    /// Import SRC/<modality>/… under this timeline.
    #[arg(long)]
    pub timeline: Option<String>,
    /// Most items per pack.
    #[arg(long, default_value_t = PackOptions::default().pack_items)]
    pub pack_items: usize,
    /// Most bytes per pack (e.g. 64MiB).
    #[arg(long, default_value = "64MiB", value_parser = parse_size)]
    pub pack_bytes: u64,
    /// Files larger than this are split into chunks of this size.
    #[arg(long, default_value = "64MiB", value_parser = parse_size)]
    pub chunk_bytes: u64,
    /// Ref to commit to.
    #[arg(long = "ref", default_value = "main")]
    pub ref_name: String,
    /// Uploads in flight at once.
    #[arg(long, default_value_t = PackOptions::default().concurrency)]
    pub concurrency: usize,
    /// Never draw a progress bar.
    #[arg(long)]
    pub no_progress: bool,
}

/// Imports SRC into the dataset (created if it is a missing local
/// directory) and says on stderr what was committed.
pub(super) async fn run(args: ImportArgs, config: &StoreConfig) -> CliResult {
    let options = ImportOptions::default()
        .timeline(args.timeline)
        .ref_name(args.ref_name)
        .pack(
            PackOptions::default()
                .pack_items(args.pack_items)
                .pack_bytes(args.pack_bytes)
                .chunk_bytes(args.chunk_bytes)
                .concurrency(args.concurrency),
        );
    // Check the source before creating a dataset directory for it.
    let index_dir = packfs_fs::mount::bundle_index_dir(None);
    let prepared = prepare_source(&args.src, &options, config, &index_dir).await?;
    let dataset = Dataset::open_with(&args.dataset, true, config)?;
    dataset.store().ensure_atomic_refs().await?;
    let progress = Bar::new("import", !args.no_progress);
    let report = import_files(&dataset, prepared, &options, &progress).await?;
    let outcome = match report.manifest {
        Some(id) => format!("committed manifest {} to ref {}", id, options.ref_name),
        None => format!(
            "ref {} already holds exactly this; nothing committed",
            options.ref_name
        ),
    };
    eprintln!(
        "imported {} files ({} bytes): {} objects written, {} already present; {outcome}",
        report.items, report.bytes, report.objects_written, report.objects_reused
    );
    Ok(())
}
