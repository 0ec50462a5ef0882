//! Datasets: refs → Manifests → Tracks → items, and the commit that moves a
//! ref to a new Manifest.
//!
//! The durability rule of the whole project lives in [`Dataset::commit`]:
//! data objects (packs, chunks, ItemManifests) are written by the caller
//! first, then Track objects, then the Manifest, and only then does the ref
//! move. A crash at any point leaves the ref at a complete Manifest.

mod cuts;
mod edit;
mod item;
mod items;
mod lease;
mod merge;
mod page_table;
mod paged;
mod revision;
mod snapshot;
#[cfg(test)]
mod testing;
mod twins;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;
use packfs_format::{
    FormatError, ItemManifest, Manifest, ObjectId, PageShape, Track, TrackEntry,
    TRACK_KIND_FRAGMENT,
};
use thiserror::Error;

use crate::store::{Store, StoreConfig, StoreError};
pub use cuts::Cuts;
pub use edit::EditedTrack;
use edit::RootCache;
pub use item::{ChunkRef, Item, ItemData, ItemSource};
pub use items::{ItemRef, ItemTable};
pub use lease::{LeaseHolder, StoredLease, LEASE_RENEWAL, LEASE_TTL};
pub use merge::{Conflict, MergeOutcome, MergeReport};
pub(crate) use paged::{shared_ids, TrackObject, TrackPart};
use parking_lot::Mutex;
pub use revision::{Resolved, Revision, RevisionError};
pub use snapshot::{Snapshot, SnapshotTrack};
pub use twins::Separated;

/// Commits retried after losing a ref race to another writer.
pub const MAX_COMMIT_ATTEMPTS: usize = 10;

/// How many metadata objects are fetched at once when loading a snapshot.
pub(crate) const METADATA_CONCURRENCY: usize = 32;

/// Errors of the dataset layer.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum DatasetError {
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("{0}")]
    Format(#[from] FormatError),
    #[error("ref {name:?} does not exist in dataset {location} (create it with `packfs import`)")]
    RefNotFound { name: String, location: String },
    /// A revision that names no Manifest.
    #[error("{0}")]
    Revision(#[from] RevisionError),
    #[error("{referrer} names {what} {id}, but object {path} does not exist")]
    Missing {
        referrer: String,
        what: &'static str,
        id: ObjectId,
        path: String,
    },
    /// A content-addressed object whose bytes hash to something else than
    /// the id it was fetched by (and is named by).
    #[error("object {path} is damaged: its content hashes to {actual}, not to its id {expected}")]
    Damaged {
        path: String,
        expected: ObjectId,
        actual: ObjectId,
    },
    /// A data object read whose length is not the one its entries give.
    #[error(
        "object {path} is {actual} bytes long, but the dataset's entries say it must be {expected}"
    )]
    Length {
        path: String,
        expected: u64,
        actual: u64,
    },
    #[error("{path}: ItemManifest chunks add up to {actual} bytes but the entry says {expected}")]
    ChunkedSize {
        path: String,
        expected: u64,
        actual: u64,
    },
    /// A merge or branch operation that cannot be done as asked.
    #[error("{0}")]
    Merge(String),
    #[error(
        "manifest {id} is not a fragment dataset: track {timeline}/{modality} has kind {kind:?}"
    )]
    UnsupportedTrackKind {
        id: ObjectId,
        timeline: String,
        modality: String,
        kind: String,
    },
}

/// Manifests along first parents ([`Dataset::history`]).
#[derive(Debug, Default)]
pub struct History {
    /// Newest first.
    pub manifests: Vec<(ObjectId, Manifest)>,
    /// The history goes on past the last one, but `packfs expire` cut it
    /// there.
    pub expired: bool,
}

/// A Track to include in a new Manifest: unchanged from the parent, or new.
pub enum TrackContent {
    Existing(ObjectId),
    New(Track),
}

/// One (timeline, modality) of a Manifest being committed.
pub struct TrackUpdate {
    pub timeline: String,
    pub modality: String,
    pub content: TrackContent,
}

/// What a new Manifest holds: its parents, its Tracks, the conflicts a
/// merge resolved (recorded in it), and who wrote it.
struct Commit<'a> {
    parents: Vec<ObjectId>,
    tracks: Vec<TrackUpdate>,
    conflicts: &'a [Conflict],
    writer: &'a str,
}

/// A dataset on a store.
#[derive(Clone, Debug)]
pub struct Dataset {
    store: Store,
    /// How the Tracks this handle writes are cut into pages.
    page_shape: PageShape,
    /// The roots of the Tracks this handle stored or read for an edit
    /// last, their name pages listed: the next edit of one (a mount's
    /// next flush) or lookup by name starts there.
    roots: Arc<Mutex<RootCache>>,
}

impl Dataset {
    /// Opens the dataset at `location` with the default store settings
    /// (see [`Store::open`]).
    pub fn open(location: &str, create: bool) -> Result<Self, DatasetError> {
        Self::open_with(location, create, &StoreConfig::default())
    }

    /// Opens the dataset at `location` with the store settings `config`.
    pub fn open_with(
        location: &str,
        create: bool,
        config: &StoreConfig,
    ) -> Result<Self, DatasetError> {
        Ok(Dataset::from_store(Store::open(location, create, config)?))
    }

    pub fn from_store(store: Store) -> Self {
        Dataset {
            store,
            page_shape: PageShape::DEFAULT,
            roots: Arc::default(),
        }
    }

    /// How it cuts the Tracks it writes into pages.
    pub(crate) fn page_shape(&self) -> PageShape {
        self.page_shape
    }

    /// The same dataset, writing Tracks cut into pages as `shape` says
    /// (readers accept any cut; small pages exercise page boundaries).
    pub fn with_page_shape(mut self, shape: PageShape) -> Self {
        self.page_shape = shape;
        self
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The Manifest `ref_name` points at; an error if the ref does not exist.
    pub async fn resolve(&self, ref_name: &str) -> Result<ObjectId, DatasetError> {
        self.store
            .read_ref(ref_name)
            .await?
            .ok_or_else(|| DatasetError::RefNotFound {
                name: ref_name.to_string(),
                location: self.store.location().to_string(),
            })
    }

    /// Fetches an object that `referrer` names, turning "not found" into an
    /// error that says who pointed at it.
    async fn fetch(
        &self,
        path: &Path,
        what: &'static str,
        id: &ObjectId,
        referrer: &str,
    ) -> Result<Bytes, DatasetError> {
        self.store.get(path).await.map_err(|e| match e {
            StoreError::NotFound { path } => DatasetError::Missing {
                referrer: referrer.to_string(),
                what,
                id: *id,
                path,
            },
            e => e.into(),
        })
    }

    /// Manifests, Tracks and ItemManifests are checked against their id
    /// before they are decoded, so a damaged one is reported as damaged
    /// (not as whatever its changed bytes happen to decode to), and one
    /// damaged into another valid object is never served.
    pub async fn manifest(&self, id: &ObjectId, referrer: &str) -> Result<Manifest, DatasetError> {
        let path = self.store.layout().manifest(id);
        let bytes = self.fetch(&path, "manifest", id, referrer).await?;
        check_content(&path, id, &bytes)?;
        Ok(Manifest::decode(&bytes, &format!("manifest {path}"))?)
    }

    pub async fn item_manifest(
        &self,
        timeline: &str,
        modality: &str,
        id: &ObjectId,
        referrer: &str,
    ) -> Result<ItemManifest, DatasetError> {
        let path = self.store.layout().data_object(timeline, modality, id);
        let bytes = self.fetch(&path, "ItemManifest", id, referrer).await?;
        check_content(&path, id, &bytes)?;
        Ok(ItemManifest::decode(
            &bytes,
            &format!("ItemManifest {path}"),
        )?)
    }

    /// Loads the Manifest `revision` names (a ref, a Manifest id or prefix,
    /// `~N` back: see [`Revision`]), all its Tracks and the ItemManifests
    /// of chunked items: everything a mount needs, so opening and reading
    /// files costs no further metadata round trip.
    pub async fn snapshot(&self, revision: &str) -> Result<Snapshot, DatasetError> {
        let resolved = self.resolve_revision(&revision.parse()?).await?;
        self.snapshot_at(resolved.id, &resolved.describe()).await
    }

    /// Like [`Dataset::snapshot`], for a given Manifest.
    pub async fn snapshot_at(
        &self,
        id: ObjectId,
        referrer: &str,
    ) -> Result<Snapshot, DatasetError> {
        let manifest = self.readable_manifest(&id, referrer).await?;
        let referrer = format!("manifest {id}");
        let tracks = futures::stream::iter(&manifest.tracks)
            .map(|entry| SnapshotTrack::load(self, entry, &referrer))
            .buffered(METADATA_CONCURRENCY)
            .try_collect()
            .await?;
        Ok(Snapshot {
            manifest_id: id,
            manifest,
            tracks,
        })
    }

    /// The Manifest `id`, refused unless every Track it lists is of a
    /// kind this version reads.
    pub(crate) async fn readable_manifest(
        &self,
        id: &ObjectId,
        referrer: &str,
    ) -> Result<Manifest, DatasetError> {
        let manifest = self.manifest(id, referrer).await?;
        if let Some(t) = manifest
            .tracks
            .iter()
            .find(|t| t.kind != TRACK_KIND_FRAGMENT)
        {
            return Err(DatasetError::UnsupportedTrackKind {
                id: *id,
                timeline: t.timeline.clone(),
                modality: t.modality.clone(),
                kind: t.kind.clone(),
            });
        }
        Ok(manifest)
    }

    /// Manifests reachable from `revision` along first parents, newest
    /// first, up to `limit` or to a link `packfs expire` cut (then
    /// `expired` is true).
    pub async fn history(&self, revision: &str, limit: usize) -> Result<History, DatasetError> {
        let resolved = self.resolve_revision(&revision.parse()?).await?;
        let cuts = self.cuts().await?;
        let mut next = Some(resolved.id);
        let mut referrer = resolved.describe();
        let mut history = History::default();
        while let Some(id) = next.filter(|_| history.manifests.len() < limit) {
            let manifest = self.manifest(&id, &referrer).await?;
            next = manifest.parents.first().copied();
            if next.is_some_and(|parent| cuts.is_cut(&id, &parent)) {
                (next, history.expired) = (None, true);
            }
            referrer = format!("manifest {id}");
            history.manifests.push((id, manifest));
        }
        Ok(history)
    }

    /// Commits a new Manifest with `tracks` and moves `ref_name` from
    /// `parent` to it by compare-and-swap.
    ///
    /// The caller must already have written every data object the new Tracks
    /// address. Here the Tracks are written, then the Manifest, then the ref:
    /// each step only after the previous one is durable, so the ref never
    /// names anything missing. A concurrent commit makes this fail with
    /// [`StoreError::RefConflict`] and leaves the ref untouched.
    pub async fn commit(
        &self,
        ref_name: &str,
        parent: Option<ObjectId>,
        tracks: Vec<TrackUpdate>,
        writer: &str,
    ) -> Result<ObjectId, DatasetError> {
        let parents = parent.into_iter().collect();
        self.commit_with_parents(ref_name, parent, parents, tracks, writer)
            .await
    }

    /// Like [`Dataset::commit`] for a Manifest with any `parents` (a
    /// merge); the ref must still point at `expected`.
    pub(crate) async fn commit_with_parents(
        &self,
        ref_name: &str,
        expected: Option<ObjectId>,
        parents: Vec<ObjectId>,
        tracks: Vec<TrackUpdate>,
        writer: &str,
    ) -> Result<ObjectId, DatasetError> {
        let commit = Commit {
            parents,
            tracks,
            conflicts: &[],
            writer,
        };
        self.commit_manifest(ref_name, expected, commit).await
    }

    /// Writes the Manifest of `commit` and moves `ref_name` from
    /// `expected` to it.
    async fn commit_manifest(
        &self,
        ref_name: &str,
        expected: Option<ObjectId>,
        commit: Commit<'_>,
    ) -> Result<ObjectId, DatasetError> {
        let (id, _) = self.write_commit(commit).await?;
        self.store.update_ref(ref_name, expected, id).await?;
        Ok(id)
    }

    /// Writes the new Tracks of `tracks`, then a Manifest listing them with
    /// `parents`, each durable before the next; moves no ref. Returns the
    /// Manifest's id and the Manifest.
    pub async fn write_manifest(
        &self,
        parents: Vec<ObjectId>,
        tracks: Vec<TrackUpdate>,
        writer: &str,
    ) -> Result<(ObjectId, Manifest), DatasetError> {
        let commit = Commit {
            parents,
            tracks,
            conflicts: &[],
            writer,
        };
        self.write_commit(commit).await
    }

    /// [`Dataset::write_manifest`] of a `commit`.
    async fn write_commit(&self, commit: Commit<'_>) -> Result<(ObjectId, Manifest), DatasetError> {
        let Commit {
            parents,
            tracks,
            conflicts,
            writer,
        } = commit;
        let mut entries = Vec::with_capacity(tracks.len());
        let replaced = self.replaced_tracks(&parents, &tracks).await?;
        for update in tracks {
            let track = match update.content {
                TrackContent::Existing(id) => id,
                TrackContent::New(track) => {
                    let key = (update.timeline.clone(), update.modality.clone());
                    let parent_track = replaced.get(&key).copied();
                    let stored = self
                        .pages_of(parent_track, "the parent of the commit")
                        .await?;
                    self.put_track(track, &stored).await?
                }
            };
            entries.push(TrackEntry {
                timeline: update.timeline,
                modality: update.modality,
                kind: TRACK_KIND_FRAGMENT.to_string(),
                track,
            });
        }
        entries.sort_by(|a, b| (&a.timeline, &a.modality).cmp(&(&b.timeline, &b.modality)));
        let mut timelines: Vec<String> = entries.iter().map(|e| e.timeline.clone()).collect();
        timelines.dedup();
        let manifest = Manifest {
            parents,
            timelines,
            tracks: entries,
            ts_unix_ns: now_unix_ns(),
            writer: writer.to_string(),
        };
        let bytes = Bytes::from(manifest.encode_with_conflicts(conflicts));
        let id = ObjectId::of(&bytes);
        self.store
            .put_immutable(&self.store.layout().manifest(&id), bytes)
            .await?;
        Ok((id, manifest))
    }
}

impl Dataset {
    /// The Tracks the first parent's Manifest holds for each (timeline,
    /// modality) that `tracks` writes anew: their pages are stored already
    /// and, named by the Manifest the commit's compare-and-swap expects,
    /// safe from gc. (A merge's other parents are branches, whose pages are
    /// stored like any object: looked at first, and refreshed if old.)
    async fn replaced_tracks(
        &self,
        parents: &[ObjectId],
        tracks: &[TrackUpdate],
    ) -> Result<HashMap<(String, String), ObjectId>, DatasetError> {
        let is_new = |u: &TrackUpdate| matches!(u.content, TrackContent::New(_));
        let Some(parent) = parents.first().filter(|_| tracks.iter().any(is_new)) else {
            return Ok(HashMap::new());
        };
        let manifest = self.manifest(parent, "the parent of the commit").await?;
        let replaced = manifest.tracks.into_iter().filter(|t| {
            let same = |u: &TrackUpdate| u.timeline == t.timeline && u.modality == t.modality;
            tracks.iter().any(|u| is_new(u) && same(u))
        });
        Ok(replaced
            .map(|t| ((t.timeline, t.modality), t.track))
            .collect())
    }
}

/// Fails with [`DatasetError::Damaged`] unless `bytes`, fetched from `path`
/// by `id`, hash to `id`.
pub(crate) fn check_content(path: &Path, id: &ObjectId, bytes: &[u8]) -> Result<(), DatasetError> {
    check_hash(path, id, ObjectId::of(bytes))
}

/// Fails with [`DatasetError::Damaged`] unless `actual`, the hash of the
/// object at `path`, is `expected`, the id it is named by.
pub(crate) fn check_hash(
    path: &Path,
    expected: &ObjectId,
    actual: ObjectId,
) -> Result<(), DatasetError> {
    if actual == *expected {
        return Ok(());
    }
    Err(DatasetError::Damaged {
        path: path.to_string(),
        expected: *expected,
        actual,
    })
}

fn now_unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// The `writer` string packfs records in Manifests.
pub fn writer_string(command: &str) -> String {
    format!("packfs/{} {command}", env!("CARGO_PKG_VERSION"))
}
