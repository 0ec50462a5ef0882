//! `packfs import`: packs a directory tree, or the tree of a DataBundle,
//! into a dataset.
//!
//! The source is checked completely before anything is written
//! ([`Prepared`]), counting each Track's files without keeping them. Then
//! each Track's files are read again in the Track's order, packed and
//! uploaded by the [`crate::packer`] (which reads their bytes through the
//! source's [`FileReader`]) and the Track is written as they come
//! (`track_writer`); finally one commit writes the Manifest and moves the
//! ref (`commit`).

mod bundle;
mod commit;
mod scan;
mod source;
mod track_writer;
mod walk;

use std::path::{Path, PathBuf};

use packfs_format::bundle::INDEX_PATH;
use packfs_format::{FormatError, ObjectId};
use thiserror::Error;

use crate::bundle::BundleError;
use crate::dataset::{Dataset, DatasetError};
use crate::location::LocationKind;
pub use crate::packer::{media_type, SourceFile};
use crate::packer::{FileReader, LocalFiles, PackError, PackOptions};
use crate::progress::{Progress, Quiet, Unit};
use crate::store::{Store, StoreConfig};
use commit::{commit, Parent};
use source::TrackSource;
use track_writer::{write_track, Counts, WrittenTrack};

crate::options! {
/// Settings of an import. `Default` gives the documented defaults.
#[derive(Clone, Debug)]
pub struct ImportOptions {
    /// Import `SRC/<modality>/…` under this timeline instead of reading the
    /// timeline from the first directory level.
    pub timeline: Option<String>,
    /// The ref to commit to.
    pub ref_name: String,
    /// How files are packed and uploaded.
    pub pack: PackOptions,
}
}

impl Default for ImportOptions {
    fn default() -> Self {
        ImportOptions {
            timeline: None,
            ref_name: "main".into(),
            pack: PackOptions::default(),
        }
    }
}

/// What an import did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImportReport {
    pub items: usize,
    pub bytes: u64,
    /// Data objects (packs, chunks, ItemManifests) uploaded.
    pub objects_written: usize,
    /// Data objects already present (content addressing made them free).
    pub objects_reused: usize,
    /// The new Manifest, or `None` when the dataset already held exactly this.
    pub manifest: Option<ObjectId>,
}

/// Errors of an import. Source problems name the file.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ImportError {
    #[error("{}", .0.join("\n"))]
    Source(Vec<String>),
    /// A problem the check before the import did not find: the source
    /// changed since.
    #[error("{0} (the source changed while it was imported); nothing was committed")]
    Changed(String),
    #[error("{op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Pack(#[from] PackError),
    #[error("invalid option: {0}")]
    Option(#[from] OptionError),
    #[error("{0}")]
    Format(#[from] FormatError),
    #[error("{0}")]
    Dataset(#[from] DatasetError),
    /// The source is a bundle that could not be opened.
    #[error("{0}")]
    Bundle(#[from] BundleError),
    /// SRC is an object-store location that holds no bundle.
    #[error("{location} holds no DataBundle (no {INDEX_PATH}): import reads a local directory or a bundle")]
    NotABundle { location: String },
}

/// An import option out of range, named by its field of [`PackOptions`].
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum OptionError {
    #[error("pack_items must be at least 1")]
    NoPackItems,
    #[error("pack_bytes and chunk_bytes must be at least 1")]
    NoBytes,
    /// Pack offsets are 32-bit.
    #[error("pack_bytes must be at most 4 GiB - 1 (pack offsets are 32-bit)")]
    PackBytesTooLarge,
    #[error("concurrency and memory budget must be at least 1")]
    NoConcurrency,
}

/// The files of a source, checked, and how to read them.
pub struct Prepared {
    tracks: Vec<TrackSource>,
    reader: Box<dyn FileReader>,
}

/// Imports `src` into `dataset` and commits to `options.ref_name`.
///
/// Items of an imported (timeline, modality) are added to its Track; an item
/// with the name of an existing one replaces it. Tracks not touched by the
/// import are kept as they are.
pub async fn import(
    dataset: &Dataset,
    src: &Path,
    options: &ImportOptions,
) -> Result<ImportReport, ImportError> {
    let prepared = prepare(src, options)?;
    import_files(dataset, prepared, options, &Quiet).await
}

/// Checks `options` and the directory `src`: everything that can be
/// wrong with an import before it writes anything.
pub(crate) fn prepare(src: &Path, options: &ImportOptions) -> Result<Prepared, ImportError> {
    check_options(options)?;
    Ok(Prepared {
        tracks: scan::scan(src, options.timeline.as_deref())?,
        reader: Box::new(LocalFiles),
    })
}

/// Like `prepare`, for a source that is a local directory or a
/// DataBundle (a local one, or one on any store [`Store::open`] reaches),
/// told apart by the bundle's index. A bundle's tree, read from its index,
/// is mapped onto timelines and modalities as a directory's is; the index
/// of a bundle on an object store is downloaded into `index_dir` (as
/// [`Bundle::open`](crate::bundle::Bundle::open) does).
pub async fn prepare_source(
    src: &str,
    options: &ImportOptions,
    config: &StoreConfig,
    index_dir: &Path,
) -> Result<Prepared, ImportError> {
    let local = Store::local_path(src).map_err(BundleError::from)?;
    let store = match Store::open(src, false, config) {
        Ok(store) => Some(store),
        // A local path that cannot be opened is no bundle: the directory
        // scan says what is wrong with it.
        Err(_) if local.is_some() => None,
        Err(e) => return Err(BundleError::from(e).into()),
    };
    if let Some(store) = store {
        if LocationKind::of(&store).await? == LocationKind::Bundle {
            check_options(options)?;
            return bundle::prepare(&store, index_dir, options.timeline.as_deref()).await;
        }
    }
    match local {
        Some(dir) => prepare(&dir, options),
        None => Err(ImportError::NotABundle {
            location: src.to_owned(),
        }),
    }
}

/// Uploads and commits files returned by `prepare` or [`prepare_source`],
/// reporting bytes read to `progress`.
///
/// The Manifest the ref names is read first; each Track is then written
/// as its files are packed: a new one page by page, an existing one
/// edited in batches. What is held is what is in flight (within the
/// packer's memory budget) and a batch, whatever the number of files.
pub async fn import_files(
    dataset: &Dataset,
    prepared: Prepared,
    options: &ImportOptions,
    progress: &dyn Progress,
) -> Result<ImportReport, ImportError> {
    let Prepared { mut tracks, reader } = prepared;
    let bytes = tracks.iter().map(|t| t.bytes).sum();
    let parent = Parent::read(dataset, &options.ref_name).await?;
    let mut counts = Counts::default();
    progress.begin("importing", Unit::Bytes, Some(bytes));
    let written = write_tracks(
        dataset,
        &mut tracks,
        &*reader,
        &parent,
        options,
        progress,
        &mut counts,
    )
    .await;
    progress.end();
    let written = written?;
    drop(reader);
    let manifest = commit(dataset, &options.ref_name, parent, written, &mut counts).await?;
    Ok(ImportReport {
        items: counts.items as usize,
        bytes: counts.bytes,
        objects_written: counts.written + counts.separated.written,
        objects_reused: counts.reused + counts.separated.reused,
        manifest,
    })
}

/// Writes each Track of `tracks` onto its Track in `parent`.
async fn write_tracks(
    dataset: &Dataset,
    tracks: &mut [TrackSource],
    reader: &dyn FileReader,
    parent: &Parent,
    options: &ImportOptions,
    progress: &dyn Progress,
    counts: &mut Counts,
) -> Result<Vec<WrittenTrack>, ImportError> {
    let mut written = Vec::with_capacity(tracks.len());
    for track in tracks {
        let base = parent.track(&track.key);
        let pack = &options.pack;
        written.push(write_track(dataset, reader, track, base, pack, progress, counts).await?);
    }
    Ok(written)
}

fn check_options(options: &ImportOptions) -> Result<(), ImportError> {
    let o = &options.pack;
    let fail = |e: OptionError| Err(ImportError::Option(e));
    if o.pack_items == 0 {
        return fail(OptionError::NoPackItems);
    }
    if o.pack_bytes == 0 || o.chunk_bytes == 0 {
        return fail(OptionError::NoBytes);
    }
    if o.pack_bytes > u64::from(u32::MAX) {
        return fail(OptionError::PackBytesTooLarge);
    }
    if o.concurrency == 0 || o.memory_bytes == 0 {
        return fail(OptionError::NoConcurrency);
    }
    packfs_format::validate_ref_name(&options.ref_name)?;
    Ok(())
}
