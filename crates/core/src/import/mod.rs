//! `packfs import`: packs a directory tree, or the tree of a DataBundle,
//! into a dataset.
//!
//! The source is scanned and checked completely before anything is written
//! ([`Prepared`]), then data objects are uploaded by the [`crate::packer`],
//! which reads the files' bytes through the source's
//! [`FileReader`], and finally one commit writes the Tracks, the
//! Manifest and moves the ref.

mod bundle;
mod listing;
mod scan;

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use packfs_format::bundle::INDEX_PATH;
use packfs_format::{FormatError, ObjectId, Track, TrackEdit, TrackItem};
use thiserror::Error;
use tracing::info;

use crate::bundle::BundleError;
use crate::dataset::{
    writer_string, Dataset, DatasetError, Separated, TrackContent, TrackObject, TrackUpdate,
    MAX_COMMIT_ATTEMPTS,
};
use crate::location::LocationKind;
pub use crate::packer::{media_type, SourceFile};
use crate::packer::{upload, FileReader, LocalFiles, PackError, PackOptions, SourceFiles};
use crate::progress::{Progress, Quiet};
use crate::store::{Store, StoreConfig, StoreError};
use listing::NewItems;

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
    files: listing::Listing,
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

/// Checks `options` and scans the directory `src`: everything that can be
/// wrong with an import before it writes anything.
pub(crate) fn prepare(src: &Path, options: &ImportOptions) -> Result<Prepared, ImportError> {
    check_options(options)?;
    Ok(Prepared {
        files: scan::scan(src, options.timeline.as_deref())?,
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
/// Past the scan each file is held once, as the item its Track will hold,
/// and one Track at a time is built, encoded and stored, so the peak is
/// about the largest new Track's items and its encoding.
pub async fn import_files(
    dataset: &Dataset,
    prepared: Prepared,
    options: &ImportOptions,
    progress: &dyn Progress,
) -> Result<ImportReport, ImportError> {
    let Prepared { files, reader } = prepared;
    let (items, bytes) = (files.count(), files.bytes());
    let uploaded = upload(dataset, &files, &*reader, &options.pack, progress).await?;
    drop(reader);
    let mut groups = files.into_tracks(uploaded.entries);
    // Another writer may move the ref between our read and our CAS; the
    // data is uploaded already, so rebase the Tracks onto its Manifest.
    let mut attempt = 1;
    let mut separated = Separated::default();
    let manifest = loop {
        match commit_onto_ref(dataset, groups, &options.ref_name, &mut separated).await {
            Err(CommitError {
                error: DatasetError::Store(StoreError::RefConflict { .. }),
                written: Some(written),
            }) if attempt < MAX_COMMIT_ATTEMPTS => {
                info!(
                    "ref {} moved during import; rebasing (attempt {attempt})",
                    options.ref_name
                );
                groups = reread(dataset, written).await?;
                attempt += 1;
            }
            result => break result.map_err(|e| e.error)?,
        }
    };
    Ok(ImportReport {
        items,
        bytes,
        objects_written: uploaded.written + separated.written,
        objects_reused: uploaded.reused + separated.reused,
        manifest,
    })
}

/// A Track stored by a commit that then lost its compare-and-swap: its
/// last `new` items are the imported ones.
struct WrittenTrack {
    timeline: String,
    modality: String,
    track: ObjectId,
    /// The new items are those numbered `first..first + new` (by
    /// `t_start`): [`merge_items`] numbers them after the old ones.
    first: i64,
    new: usize,
}

/// Why [`commit_onto_ref`] failed, with the Tracks it had stored by then
/// (`None` if it failed before storing all of them).
struct CommitError {
    error: DatasetError,
    written: Option<Vec<WrittenTrack>>,
}

impl From<DatasetError> for CommitError {
    fn from(error: DatasetError) -> Self {
        CommitError {
            error,
            written: None,
        }
    }
}

/// The imported items again, read back from the Tracks a lost commit
/// stored (the pages holding them): the items are not kept twice for a
/// rebase that rarely happens.
async fn reread(
    dataset: &Dataset,
    written: Vec<WrittenTrack>,
) -> Result<Vec<NewItems>, DatasetError> {
    let mut groups = Vec::with_capacity(written.len());
    for w in written {
        let items = dataset
            .items_numbered_from(&w.track, w.first, "the import's own commit")
            .await?;
        let new = w.first..w.first.saturating_add(w.new as i64);
        let mut items: Vec<TrackItem> = items
            .into_iter()
            .filter(|i| new.contains(&i.entry.t_start))
            .collect();
        if items.len() != w.new {
            return Err(DatasetError::Merge(format!(
                "track {}: the import's lost commit holds {} of its {} new items",
                w.track,
                items.len(),
                w.new
            )));
        }
        items.sort_unstable_by_key(|i| i.entry.t_start);
        groups.push(NewItems {
            timeline: w.timeline,
            modality: w.modality,
            items,
        });
    }
    Ok(groups)
}

/// Adds `groups` to the Tracks of the Manifest `ref_name` points at and
/// commits; `None` when that changes nothing. Each new Track is built,
/// encoded and stored before the next is built. New items packed in a
/// pack the Track holds cut another way are stored apart first
/// ([`Dataset::separate_twin_packs`]); what that stored is added to
/// `separated`.
async fn commit_onto_ref(
    dataset: &Dataset,
    groups: Vec<NewItems>,
    ref_name: &str,
    separated: &mut Separated,
) -> Result<Option<ObjectId>, CommitError> {
    let parent = dataset
        .store()
        .read_ref(ref_name)
        .await
        .map_err(DatasetError::from)?;
    let base = match parent {
        Some(id) => Some(dataset.manifest(&id, &format!("ref {ref_name:?}")).await?),
        None => None,
    };
    let mut tracks: BTreeMap<(String, String), ObjectId> = BTreeMap::new();
    for t in base.iter().flat_map(|b| &b.tracks) {
        tracks.insert((t.timeline.clone(), t.modality.clone()), t.track);
    }
    let mut changed = base.is_none();
    let mut written = Vec::with_capacity(groups.len());
    for mut group in groups {
        let key = (group.timeline, group.modality);
        let existing = tracks.get(&key).copied();
        let new = group.items.len();
        // A paged Track is edited: its pages the new names fall in are
        // read and written, no others.
        if let Some(id) = existing {
            // The root alone tells: its index pages are the edit's to read.
            let object = dataset
                .track_object_unindexed(&id, "the parent manifest")
                .await?;
            if matches!(object, TrackObject::Paged(_)) {
                let edit = TrackEdit {
                    implied: ancestors(&group.items),
                    ..TrackEdit::default()
                };
                let edited = dataset
                    .edit_track(&key.0, &key.1, &id, edit, group.items)
                    .await?;
                separated.items += edited.separated.items;
                separated.written += edited.separated.written;
                separated.reused += edited.separated.reused;
                changed |= edited.id != id;
                tracks.insert(key.clone(), edited.id);
                written.push(WrittenTrack {
                    timeline: key.0,
                    modality: key.1,
                    track: edited.id,
                    first: edited.first,
                    new,
                });
                continue;
            }
        }
        // A new modality, or a Track stored as a single object (written
        // before Tracks were paged): built whole.
        let (old, stored) = match existing {
            Some(id) => {
                let (track, pages) = dataset.track_with_pages(&id, "the parent manifest").await?;
                (track, pages.into_iter().collect())
            }
            None => (
                Track::new(Vec::new(), Vec::new(), "empty track").map_err(DatasetError::from)?,
                HashSet::new(),
            ),
        };
        let existing_entries = old.items().iter().map(|i| &i.entry);
        let apart = dataset
            .separate_twin_packs(
                &key.0,
                &key.1,
                existing_entries.chain(old.retired()),
                &mut group.items,
            )
            .await?;
        separated.items += apart.items;
        separated.written += apart.written;
        separated.reused += apart.reused;
        let what = format!("track {}/{}", key.0, key.1);
        let (merged, first) = merge_items(old, group.items, &what).map_err(DatasetError::from)?;
        let (merged, paged) = dataset.encode_track(merged).await;
        // A Track stored as a single object (no pages) holds the same items
        // when it has the id of their single-object encoding.
        let unchanged = existing == Some(paged.id)
            || (existing.is_some()
                && stored.is_empty()
                && existing == Some(ObjectId::of(&merged.encode())));
        drop(merged);
        let id = match unchanged {
            true => existing.expect("unchanged from an existing Track"),
            false => {
                changed = true;
                dataset.put_paged(paged, &stored).await?
            }
        };
        tracks.insert(key.clone(), id);
        written.push(WrittenTrack {
            timeline: key.0,
            modality: key.1,
            track: id,
            first,
            new,
        });
    }
    if !changed {
        return Ok(None);
    }
    let tracks = tracks
        .into_iter()
        .map(|((timeline, modality), id)| TrackUpdate {
            timeline,
            modality,
            content: TrackContent::Existing(id),
        })
        .collect();
    let writer = writer_string("import");
    match dataset.commit(ref_name, parent, tracks, &writer).await {
        Ok(id) => Ok(Some(id)),
        Err(error) => Err(CommitError {
            error,
            written: Some(written),
        }),
    }
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

/// The directories above `items`, each once, but the modality directory.
fn ancestors(items: &[TrackItem]) -> Vec<String> {
    let mut dirs = HashSet::new();
    for item in items {
        let mut name = item.name.as_str();
        while let Some((parent, _)) = name.rsplit_once('/') {
            if !dirs.insert(parent) {
                break;
            }
            name = parent;
        }
    }
    dirs.into_iter().map(str::to_string).collect()
}

/// The Track after an import, and the `t_start` of its first new item:
/// existing items not replaced keep their `t_start`; new items follow in
/// name order, numbered from the end of the kept ones.
fn merge_items(
    old: Track,
    mut new: Vec<TrackItem>,
    what: &str,
) -> Result<(Track, i64), FormatError> {
    let dirs = old.dirs().to_vec();
    // No set of the new names when there is nothing they could replace.
    let replaced: HashSet<&str> = match old.items().is_empty() {
        true => HashSet::new(),
        false => new.iter().map(|i| i.name.as_str()).collect(),
    };
    let (mut items, retired) = old.remove_items(|i| replaced.contains(i.name.as_str()));
    drop(replaced);
    let first = items.iter().map(|i| i.entry.t_end).max().unwrap_or(0);
    for (t, item) in (first..).zip(&mut new) {
        item.entry.t_start = t;
        item.entry.t_end = t + 1;
    }
    // A first import's items are the new ones: taken as they are, not copied.
    if items.is_empty() {
        items = new;
    } else {
        items.reserve_exact(new.len());
        items.append(&mut new);
    }
    let track = Track::new(items, retired, what)?.with_dirs(dirs, what)?;
    Ok((track, first))
}
