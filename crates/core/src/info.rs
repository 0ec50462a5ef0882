//! `packfs info`: what a dataset holds at a revision — per timeline and
//! modality its items and bytes, how they are stored (packed, whole,
//! chunked), its packs and how much of each is still referenced, and how
//! deep its history is.

use std::collections::HashMap;
use std::sync::Arc;

use object_store::path::Path;
use serde::Serialize;

use crate::dataset::{Dataset, DatasetError, ItemSource, Resolved, SnapshotTrack};

/// The summary of one revision of a dataset.
#[derive(Debug, Serialize)]
pub struct Info {
    /// Where the dataset is.
    pub location: String,
    /// The revision asked for, and the Manifest it names.
    pub revision: String,
    pub manifest: String,
    /// When the Manifest was written (RFC 3339) and by what.
    pub created: String,
    pub writer: String,
    /// Manifests along first parents, this one included.
    pub history_depth: usize,
    pub tracks: Vec<TrackInfo>,
    pub totals: Counts,
}

/// One (timeline, modality).
#[derive(Debug, Serialize)]
pub struct TrackInfo {
    pub timeline: String,
    pub modality: String,
    pub track: String,
    #[serde(flatten)]
    pub counts: Counts,
}

/// Items, bytes and storage of a Track, or of all of them.
#[derive(Debug, Default, Serialize)]
pub struct Counts {
    pub items: u64,
    pub bytes: u64,
    /// Items stored in packs, as whole objects, and in chunks.
    pub packed_items: u64,
    pub whole_items: u64,
    pub chunked_items: u64,
    /// Chunk objects of the chunked items.
    pub chunks: u64,
    /// Distinct packs the items are in, and their total length.
    pub packs: u64,
    pub pack_bytes: u64,
    /// Smallest and largest pack.
    pub pack_min: u64,
    pub pack_max: u64,
    /// Bytes of the packs that packed items use.
    pub pack_used: u64,
    /// `pack_used` over `pack_bytes`: below 1, packs hold
    /// bytes of items since replaced or removed (gc cannot free a pack
    /// any item still uses).
    pub pack_fill: f64,
}

impl Counts {
    fn of(track: &SnapshotTrack) -> Counts {
        let mut counts = Counts::default();
        // Pack path → (length, bytes of items in it).
        let mut packs: HashMap<Arc<Path>, (u64, u64)> = HashMap::new();
        for item in track.items.iter() {
            counts.items += 1;
            counts.bytes += item.size();
            match item.source() {
                ItemSource::Packed { pack, pack_len, .. } => {
                    counts.packed_items += 1;
                    packs.entry(pack).or_insert((pack_len, 0)).1 += item.size();
                }
                ItemSource::Whole { .. } => counts.whole_items += 1,
                ItemSource::Chunked { chunks } => {
                    counts.chunked_items += 1;
                    counts.chunks += chunks.len() as u64;
                }
            }
        }
        counts.packs = packs.len() as u64;
        counts.pack_bytes = packs.values().map(|(len, _)| len).sum();
        counts.pack_min = packs.values().map(|(len, _)| *len).min().unwrap_or(0);
        counts.pack_max = packs.values().map(|(len, _)| *len).max().unwrap_or(0);
        counts.pack_used = packs.values().map(|(_, used)| used).sum();
        counts.pack_fill = fill(counts.pack_used, counts.pack_bytes);
        counts
    }

    fn add(&mut self, other: &Counts) {
        self.pack_min = match (self.packs, other.packs) {
            (0, _) => other.pack_min,
            (_, 0) => self.pack_min,
            _ => self.pack_min.min(other.pack_min),
        };
        self.items += other.items;
        self.bytes += other.bytes;
        self.packed_items += other.packed_items;
        self.whole_items += other.whole_items;
        self.chunked_items += other.chunked_items;
        self.chunks += other.chunks;
        self.packs += other.packs;
        self.pack_bytes += other.pack_bytes;
        self.pack_max = self.pack_max.max(other.pack_max);
        self.pack_used += other.pack_used;
        self.pack_fill = fill(self.pack_used, self.pack_bytes);
    }
}

fn fill(used: u64, total: u64) -> f64 {
    match total {
        0 => 1.0,
        total => used as f64 / total as f64,
    }
}

/// The summary of `resolved` in `dataset`: its Manifest and Tracks are
/// loaded, and its history walked along first parents.
pub async fn info(dataset: &Dataset, resolved: &Resolved) -> Result<Info, DatasetError> {
    let snapshot = dataset
        .snapshot_at(resolved.id, &resolved.describe())
        .await?;
    let history_depth = dataset
        .history(&resolved.id.to_string(), usize::MAX)
        .await?
        .manifests
        .len();
    let mut totals = Counts::default();
    let tracks = snapshot
        .tracks
        .iter()
        .map(|track| {
            let counts = Counts::of(track);
            totals.add(&counts);
            TrackInfo {
                timeline: track.timeline.clone(),
                modality: track.modality.clone(),
                track: track.track_id.to_string(),
                counts,
            }
        })
        .collect();
    let created = chrono::DateTime::from_timestamp_nanos(snapshot.manifest.ts_unix_ns as i64);
    Ok(Info {
        location: dataset.store().location().to_string(),
        revision: resolved.revision.to_string(),
        manifest: resolved.id.to_string(),
        created: created.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        writer: snapshot.manifest.writer.clone(),
        history_depth,
        tracks,
        totals,
    })
}
