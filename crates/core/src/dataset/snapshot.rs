//! A loaded version of the dataset: every item with its exact size and the
//! objects and byte ranges that hold its bytes.

use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use packfs_format::{Manifest, ObjectId, Track, TrackDir, TrackEntry};

use super::item::ChunkRef;
use super::items::ItemTable;
use super::{check_content, Dataset, DatasetError, METADATA_CONCURRENCY};

/// The items of one (timeline, modality).
#[derive(Clone, Debug)]
pub struct SnapshotTrack {
    pub timeline: String,
    pub modality: String,
    pub track_id: ObjectId,
    /// The Track object, for messages (`track <path>`).
    pub what: String,
    pub items: ItemTable,
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
    /// Loads the Track `entry` names straight into an [`ItemTable`] (no
    /// `Track` is built: a mount of millions of items holds only the table),
    /// with the ItemManifests of its chunked items.
    pub(super) async fn load(
        dataset: &Dataset,
        entry: &TrackEntry,
        referrer: &str,
    ) -> Result<Self, DatasetError> {
        let layout = dataset.store().layout().clone();
        let path = layout.track(&entry.track);
        let what = format!("track {path}");
        let bytes = dataset
            .fetch(&path, "track", &entry.track, referrer)
            .await?;
        let (id, timeline, modality) =
            (entry.track, entry.timeline.clone(), entry.modality.clone());
        let described = what.clone();
        // Tracks can be hundreds of MB: hash and decode off the async
        // threads, and drop the bytes as soon as they are decoded.
        let (mut items, dirs) = tokio::task::spawn_blocking(move || {
            check_content(&path, &id, &bytes)?;
            let data_path = |id: &ObjectId| layout.data_object(&timeline, &modality, id);
            Ok::<_, DatasetError>(ItemTable::decode(&bytes, &described, data_path)?)
        })
        .await
        .expect("track decode panicked")?;
        load_item_manifests(dataset, entry, &mut items).await?;
        Ok(SnapshotTrack {
            timeline: entry.timeline.clone(),
            modality: entry.modality.clone(),
            track_id: entry.track,
            what,
            items,
            dirs,
        })
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
        let mut items = ItemTable::of_track(&track, data_path);
        items.retain(keep);
        load_item_manifests(dataset, entry, &mut items).await?;
        Ok(SnapshotTrack {
            timeline: entry.timeline.clone(),
            modality: entry.modality.clone(),
            track_id: entry.track,
            what: format!("track {}", layout.track(&entry.track)),
            items,
            dirs: track.dirs().to_vec(),
        })
    }
}

/// Fetches the ItemManifest of every chunked item of `items`, checking
/// that its chunks add up to the size the entry declares.
async fn load_item_manifests(
    dataset: &Dataset,
    entry: &TrackEntry,
    items: &mut ItemTable,
) -> Result<(), DatasetError> {
    let layout = dataset.store().layout();
    let referrer = format!("track {}", layout.track(&entry.track));
    let loaded: Vec<(ObjectId, Arc<[ChunkRef]>)> = futures::stream::iter(items.chunked())
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
        .await?;
    for (id, chunks) in loaded {
        items.set_chunks(&id, chunks);
    }
    Ok(())
}
