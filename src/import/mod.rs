//! `packfs import`: packs a directory tree into a dataset.
//!
//! The source is scanned and checked completely before anything is written,
//! then data objects are uploaded by the [`crate::packer`], and finally
//! one commit writes the Tracks, the Manifest and moves the ref.

mod scan;

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use thiserror::Error;
use tracing::info;

use crate::dataset::{
    writer_string, Dataset, DatasetError, TrackContent, TrackUpdate, MAX_COMMIT_ATTEMPTS,
};
use crate::format::{FormatError, ObjectId, Track, TrackItem};
pub use crate::packer::{media_type, SourceFile};
use crate::packer::{upload, LocalFiles, PackError, PackOptions};
use crate::store::StoreError;
pub use scan::{check_root, list_dir, problems_report, SourceEntry, SourceIoError};

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

impl Default for ImportOptions {
    fn default() -> Self {
        ImportOptions {
            timeline: None,
            ref_name: "main".into(),
            pack: PackOptions {
                progress: true,
                ..PackOptions::default()
            },
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
    #[error(transparent)]
    Pack(#[from] PackError),
    #[error("invalid option: {0}")]
    Option(String),
    #[error(transparent)]
    Format(#[from] FormatError),
    #[error(transparent)]
    Dataset(#[from] DatasetError),
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
    let files = prepare(src, options)?;
    import_files(dataset, &files, options).await
}

/// Checks `options` and scans `src`: everything that can be wrong with an
/// import before it writes anything.
pub fn prepare(src: &Path, options: &ImportOptions) -> Result<Vec<SourceFile>, ImportError> {
    check_options(options)?;
    scan::scan(src, options.timeline.as_deref())
}

/// Uploads and commits files returned by [`prepare`].
pub async fn import_files(
    dataset: &Dataset,
    files: &[SourceFile],
    options: &ImportOptions,
) -> Result<ImportReport, ImportError> {
    let uploaded = upload(dataset, files, &LocalFiles, &options.pack).await?;

    let mut groups: BTreeMap<(String, String), Vec<TrackItem>> = BTreeMap::new();
    for (file, entry) in files.iter().zip(uploaded.entries) {
        groups
            .entry((file.timeline.clone(), file.modality.clone()))
            .or_default()
            .push(TrackItem {
                name: file.name.clone(),
                media_type: media_type(&file.name).into(),
                entry,
                attrs: Default::default(),
            });
    }
    // Another writer may move the ref between our read and our CAS; the
    // data is uploaded already, so rebase the Tracks onto its Manifest.
    let mut attempt = 1;
    let manifest = loop {
        match commit_onto_ref(dataset, groups.clone(), &options.ref_name).await {
            Err(DatasetError::Store(StoreError::RefConflict { .. }))
                if attempt < MAX_COMMIT_ATTEMPTS =>
            {
                info!(
                    "ref {} moved during import; rebasing (attempt {attempt})",
                    options.ref_name
                );
                attempt += 1;
            }
            result => break result?,
        }
    };
    Ok(ImportReport {
        items: files.len(),
        bytes: files.iter().map(|f| f.size).sum(),
        objects_written: uploaded.written,
        objects_reused: uploaded.reused,
        manifest,
    })
}

/// Adds `groups` to the Tracks of the Manifest `ref_name` points at and
/// commits; `None` when that changes nothing.
async fn commit_onto_ref(
    dataset: &Dataset,
    groups: BTreeMap<(String, String), Vec<TrackItem>>,
    ref_name: &str,
) -> Result<Option<ObjectId>, DatasetError> {
    let parent = dataset.store().read_ref(ref_name).await?;
    let base = match parent {
        Some(id) => Some(dataset.manifest(&id, &format!("ref {ref_name:?}")).await?),
        None => None,
    };
    let mut updates: BTreeMap<(String, String), TrackContent> = BTreeMap::new();
    for t in base.iter().flat_map(|b| &b.tracks) {
        updates.insert(
            (t.timeline.clone(), t.modality.clone()),
            TrackContent::Existing(t.track),
        );
    }
    let mut changed = base.is_none();
    for ((timeline, modality), new_items) in groups {
        let existing = match updates.get(&(timeline.clone(), modality.clone())) {
            Some(TrackContent::Existing(id)) => Some(*id),
            _ => None,
        };
        let old = match existing {
            Some(id) => dataset.track(&id, "the parent manifest").await?,
            None => Track::new(Vec::new(), Vec::new(), "empty track")?,
        };
        let track = merge_items(old, new_items, &format!("track {timeline}/{modality}"))?;
        changed |= existing != Some(ObjectId::of(&track.encode()));
        updates.insert((timeline, modality), TrackContent::New(track));
    }
    if !changed {
        return Ok(None);
    }
    let tracks = updates
        .into_iter()
        .map(|((timeline, modality), content)| TrackUpdate {
            timeline,
            modality,
            content,
        })
        .collect();
    let writer = writer_string("import");
    Ok(Some(
        dataset.commit(ref_name, parent, tracks, &writer).await?,
    ))
}

fn check_options(options: &ImportOptions) -> Result<(), ImportError> {
    let o = &options.pack;
    let fail = |m: &str| Err(ImportError::Option(m.to_string()));
    if o.pack_items == 0 {
        return fail("--pack-items must be at least 1");
    }
    if o.pack_bytes == 0 || o.chunk_bytes == 0 {
        return fail("--pack-bytes and --chunk-bytes must be at least 1");
    }
    if o.pack_bytes > u64::from(u32::MAX) {
        return fail("--pack-bytes must be at most 4 GiB - 1 (pack offsets are 32-bit)");
    }
    if o.concurrency == 0 || o.memory_bytes == 0 {
        return fail("concurrency and memory budget must be at least 1");
    }
    crate::format::validate_ref_name(&options.ref_name)?;
    Ok(())
}

/// The Track after an import: existing items not replaced keep their place
/// and `t_start`; new items follow in name order, numbered from the end of
/// the kept ones.
fn merge_items(old: Track, new: Vec<TrackItem>, what: &str) -> Result<Track, FormatError> {
    let replaced: HashSet<String> = new.iter().map(|i| i.name.clone()).collect();
    let dirs = old.dirs().to_vec();
    let (mut items, retired) = old.remove_items(|i| replaced.contains(&i.name));
    let first = items.iter().map(|i| i.entry.t_end).max().unwrap_or(0);
    for (t, mut item) in (first..).zip(new) {
        item.entry.t_start = t;
        item.entry.t_end = t + 1;
        items.push(item);
    }
    Track::new(items, retired, what)?.with_dirs(dirs, what)
}
