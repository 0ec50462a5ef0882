//! A loaded version of the dataset: every item with its exact size and the
//! objects and byte ranges that hold its bytes.

use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use packfs_format::{Manifest, ObjectId, PackLengths, TrackDir, TrackEntry, TrackItem};

use super::item::ChunkRef;
use super::items::ItemTable;
use super::paged::TrackObject;
use super::{Dataset, DatasetError, METADATA_CONCURRENCY};

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
    /// The pages of the Track, when it is paged.
    pub pages: Vec<ObjectId>,
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
        let what = format!("track {}", layout.track(&entry.track));
        let object = dataset.track_object(&entry.track, referrer).await?;
        let (timeline, modality) = (entry.timeline.clone(), entry.modality.clone());
        let described = what.clone();
        let (mut items, dirs, pages) = match object {
            // Tracks can be hundreds of MB: decoded off the async threads,
            // and their bytes dropped as soon as they are.
            TrackObject::Single(bytes) => {
                let decoded = tokio::task::spawn_blocking(move || {
                    let data_path = |id: &ObjectId| layout.data_object(&timeline, &modality, id);
                    ItemTable::decode(&bytes, &described, data_path)
                });
                let (items, dirs) = decoded.await.expect("track decode panicked")?;
                (items, dirs, Vec::new())
            }
            // Each page is decoded as it arrives and dropped: the peak is
            // the table, not the table and the whole encoded Track.
            TrackObject::Paged(root) => {
                let pages: Vec<ObjectId> = root.page_ids().collect();
                // Name pages then pack pages (index pages came with the root).
                let names = root.pages.iter().map(|p| p.id);
                let wanted = names.chain(root.pack_pages.iter().map(|p| p.id)).collect();
                let (to, mut from) = tokio::sync::mpsc::channel(METADATA_CONCURRENCY);
                let decoded = tokio::task::spawn_blocking(move || {
                    let data_path = |id: &ObjectId| layout.data_object(&timeline, &modality, id);
                    let page_what = |id: &ObjectId| format!("page {}", layout.page(id));
                    let next = || from.blocking_recv();
                    ItemTable::decode_paged(&root, next, &described, page_what, data_path)
                });
                let referrer = what.clone();
                let sent = dataset.send_pages(wanted, &referrer, to).await;
                let decoded = decoded.await.expect("track decode panicked");
                // A page that could not be fetched is the error, not the
                // decoder's missing page.
                sent?;
                let (items, dirs) = decoded?;
                (items, dirs, pages)
            }
        };
        load_item_manifests(dataset, entry, &mut items).await?;
        Ok(SnapshotTrack {
            timeline: entry.timeline.clone(),
            modality: entry.modality.clone(),
            track_id: entry.track,
            what,
            items,
            dirs,
            pages,
        })
    }

    /// A table of `items`, some of the Track `entry` names (whose packs
    /// have the lengths `lengths`), with their ItemManifests.
    pub(crate) async fn load_items(
        dataset: &Dataset,
        entry: &TrackEntry,
        items: &[&TrackItem],
        lengths: &PackLengths,
    ) -> Result<Self, DatasetError> {
        let layout = dataset.store().layout();
        let what = format!("track {}", layout.track(&entry.track));
        let data_path = |id: &ObjectId| layout.data_object(&entry.timeline, &entry.modality, id);
        let mut table = ItemTable::of_items(items.iter().copied(), lengths, &what, data_path)?;
        load_item_manifests(dataset, entry, &mut table).await?;
        Ok(SnapshotTrack {
            timeline: entry.timeline.clone(),
            modality: entry.modality.clone(),
            track_id: entry.track,
            what,
            items: table,
            dirs: Vec::new(),
            pages: Vec::new(),
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
    let loaded: Vec<(ObjectId, Arc<[ChunkRef]>)> = futures::stream::iter(items.chunked())
        .map(|(id, expected)| async move {
            let chunks = dataset.item_chunks(entry, &id, expected).await?;
            Ok::<_, DatasetError>((id, chunks))
        })
        .buffer_unordered(METADATA_CONCURRENCY)
        .try_collect()
        .await?;
    for (id, chunks) in loaded {
        items.set_chunks(&id, chunks);
    }
    Ok(())
}

impl Dataset {
    /// The chunks of the ItemManifest `id` of the Track `entry` names,
    /// refused unless they add up to `expected`, the size its entries
    /// declare.
    pub(crate) async fn item_chunks(
        &self,
        entry: &TrackEntry,
        id: &ObjectId,
        expected: u64,
    ) -> Result<Arc<[ChunkRef]>, DatasetError> {
        let layout = self.store().layout();
        let referrer = format!("track {}", layout.track(&entry.track));
        let manifest = self
            .item_manifest(&entry.timeline, &entry.modality, id, &referrer)
            .await?;
        let actual = manifest.total_size();
        if actual != expected {
            return Err(DatasetError::ChunkedSize {
                path: layout
                    .data_object(&entry.timeline, &entry.modality, id)
                    .to_string(),
                expected,
                actual,
            });
        }
        Ok(manifest
            .chunks
            .iter()
            .map(|c| ChunkRef {
                object: Arc::new(layout.data_object(&entry.timeline, &entry.modality, &c.address)),
                size: c.size,
            })
            .collect())
    }
}
