//! A loaded version of the dataset: every item with its exact size and the
//! objects and byte ranges that hold its bytes.

use std::collections::HashMap;
use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;

use super::{Dataset, DatasetError, METADATA_CONCURRENCY};
use crate::format::{Attrs, Manifest, ObjectId, Placement, Track, TrackDir, TrackEntry};

/// One chunk object of a chunked item.
#[derive(Clone, Debug)]
pub struct ChunkRef {
    pub object: Arc<Path>,
    pub size: u64,
}

/// Where an item's bytes are.
#[derive(Clone, Debug)]
pub enum ItemSource {
    /// The whole object is the item.
    Whole { object: Arc<Path> },
    /// `[offset, offset + size)` of a pack whose length must be `pack_len`.
    Packed {
        pack: Arc<Path>,
        offset: u64,
        pack_len: u64,
    },
    /// The concatenation of chunk objects.
    Chunked { chunks: Arc<[ChunkRef]> },
}

/// One item of a loaded Track.
#[derive(Clone, Debug)]
pub struct Item {
    /// Path below the modality directory.
    pub name: String,
    pub size: u64,
    pub media_type: Arc<str>,
    pub source: ItemSource,
    /// Mode and mtime its writer recorded.
    pub attrs: Attrs,
}

/// The items of one (timeline, modality).
#[derive(Clone, Debug)]
pub struct SnapshotTrack {
    pub timeline: String,
    pub modality: String,
    pub track_id: ObjectId,
    pub items: Vec<Item>,
    /// Directories the Track records (empty ones, and attributes).
    pub dirs: Vec<TrackDir>,
}

/// A Manifest with all its Tracks loaded.
#[derive(Clone, Debug)]
pub struct Snapshot {
    pub manifest_id: ObjectId,
    pub manifest: Manifest,
    pub tracks: Vec<SnapshotTrack>,
}

impl SnapshotTrack {
    pub(super) async fn load(
        dataset: &Dataset,
        entry: &TrackEntry,
        track: Track,
    ) -> Result<Self, DatasetError> {
        Self::load_only(dataset, entry, track, |_| true).await
    }

    /// The items of `track` whose names `keep` accepts (and only their
    /// ItemManifests are fetched).
    pub(crate) async fn load_only(
        dataset: &Dataset,
        entry: &TrackEntry,
        track: Track,
        keep: impl Fn(&str) -> bool,
    ) -> Result<Self, DatasetError> {
        let layout = dataset.store().layout();
        let data_path = |id: &ObjectId| layout.data_object(&entry.timeline, &entry.modality, id);
        let chunked = load_item_manifests(dataset, entry, &track, &keep).await?;
        // Entries of one pack share one path allocation. foldhash: this is
        // looked up once an item, and SipHash of an id showed in profiles.
        let mut paths: foldhash::HashMap<ObjectId, Arc<Path>> = Default::default();
        let mut path_of = |id: &ObjectId| {
            paths
                .entry(*id)
                .or_insert_with(|| Arc::new(data_path(id)))
                .clone()
        };
        let (items, pack_lens, dirs) = track.into_parts();
        let items = map_shrinking(items, |it| {
            if !keep(&it.name) {
                return None;
            }
            let e = it.entry;
            let source = match e.placement {
                Placement::Whole => ItemSource::Whole {
                    object: path_of(&e.address),
                },
                Placement::Packed { offset } => ItemSource::Packed {
                    pack: path_of(&e.address),
                    offset,
                    pack_len: pack_lens[&e.address],
                },
                Placement::Chunked => ItemSource::Chunked {
                    chunks: chunked[&e.address].clone(),
                },
            };
            Some(Item {
                name: it.name,
                size: e.byte_size,
                media_type: it.media_type,
                source,
                attrs: it.attrs,
            })
        });
        Ok(SnapshotTrack {
            timeline: entry.timeline.clone(),
            modality: entry.modality.clone(),
            track_id: entry.track,
            items,
            dirs,
        })
    }
}

/// `v` mapped through `f` (dropping the `None`s), in order. It is consumed
/// from the back and shrunk every eighth, so the memory of what was
/// converted is given back as the result grows: converting a million Track
/// items does not hold both vectors whole at once.
pub(crate) fn map_shrinking<T, U>(mut v: Vec<T>, mut f: impl FnMut(T) -> Option<U>) -> Vec<U> {
    let step = (v.len() / 8).max(1 << 14);
    let mut out = Vec::with_capacity(v.len());
    while let Some(x) = v.pop() {
        out.extend(f(x));
        if v.len() % step == 0 {
            v.shrink_to_fit();
        }
    }
    out.reverse();
    out
}

/// Fetches the ItemManifest of every chunked item `keep` accepts, checking
/// that its chunks add up to the size the entry declares.
async fn load_item_manifests(
    dataset: &Dataset,
    entry: &TrackEntry,
    track: &Track,
    keep: &impl Fn(&str) -> bool,
) -> Result<HashMap<ObjectId, Arc<[ChunkRef]>>, DatasetError> {
    let layout = dataset.store().layout();
    let referrer = format!("track {}", layout.track(&entry.track));
    let mut wanted: Vec<(ObjectId, u64)> = track
        .items()
        .iter()
        .filter(|it| it.entry.placement == Placement::Chunked && keep(&it.name))
        .map(|it| (it.entry.address, it.entry.byte_size))
        .collect();
    wanted.sort_unstable();
    wanted.dedup();
    futures::stream::iter(wanted)
        .map(|(id, expected)| {
            let referrer = &referrer;
            async move {
                let manifest = dataset
                    .item_manifest(&entry.timeline, &entry.modality, &id, referrer)
                    .await?;
                let actual = manifest.total_size();
                if actual != expected {
                    return Err(DatasetError::ChunkedSize {
                        path: layout
                            .data_object(&entry.timeline, &entry.modality, &id)
                            .to_string(),
                        expected,
                        actual,
                    });
                }
                let chunks = manifest
                    .chunks
                    .iter()
                    .map(|c| ChunkRef {
                        object: Arc::new(layout.data_object(
                            &entry.timeline,
                            &entry.modality,
                            &c.address,
                        )),
                        size: c.size,
                    })
                    .collect();
                Ok((id, chunks))
            }
        })
        .buffer_unordered(METADATA_CONCURRENCY)
        .try_collect()
        .await
}

#[cfg(test)]
mod tests {
    use super::map_shrinking;

    #[test]
    fn map_shrinking_keeps_order_and_filters() {
        for n in [0usize, 1, 7, 1 << 14, (1 << 14) + 3, 200_000] {
            let v: Vec<usize> = (0..n).collect();
            let out = map_shrinking(v, |x| (x % 3 != 0).then(|| x * 2));
            let want: Vec<usize> = (0..n).filter(|x| x % 3 != 0).map(|x| x * 2).collect();
            assert_eq!(out, want, "n = {n}");
        }
    }
}
