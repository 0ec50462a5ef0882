//! `packfs gc`: deletes objects no ref can reach.
//!
//! Reachable: every Manifest in the history of every ref (all parents), the
//! Tracks they list, and every data object those Tracks name — packs and
//! whole objects of live and retired entries, ItemManifests and their
//! chunks. History is kept whole, so what gc frees is what no history
//! names: the uploads of imports or flushes that never committed, and
//! objects of branches whose ref is gone. An unreachable object younger
//! than the grace period is kept: a writer may have uploaded it and not
//! moved its ref yet.

use std::collections::{HashSet, VecDeque};
use std::time::Duration;

use object_store::path::Path;
use thiserror::Error;

use crate::dataset::{Dataset, DatasetError};
use crate::format::{ObjectId, Placement};
use crate::store::{ObjectKind, StoreError};

/// Why gc stopped before deleting anything.
#[derive(Debug, Error)]
pub enum GcError {
    #[error(transparent)]
    Dataset(#[from] DatasetError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What gc found (and, unless a dry run, deleted).
#[derive(Debug, Default)]
pub struct GcReport {
    pub refs: usize,
    pub manifests_kept: usize,
    pub objects_kept: usize,
    /// Unreachable objects old enough to go: deleted unless a dry run.
    pub unreachable: Vec<(Path, u64)>,
    /// Unreachable objects kept for being younger than the grace period.
    pub too_young: usize,
}

/// Finds what no ref reaches and, unless `dry_run`, deletes what is older
/// than `grace`. Any missing or undecodable Manifest, Track or ItemManifest
/// in the history stops gc before it deletes anything.
pub async fn gc(dataset: &Dataset, grace: Duration, dry_run: bool) -> Result<GcReport, GcError> {
    let store = dataset.store();
    let layout = store.layout();
    let mut report = GcReport::default();
    let refs = store.ref_names().await?;
    report.refs = refs.len();

    // Manifests: everything reachable from every ref.
    let mut manifests = HashSet::new();
    let mut queue: VecDeque<(ObjectId, String)> = VecDeque::new();
    for name in &refs {
        if let Some(id) = store.read_ref(name).await? {
            queue.push_back((id, format!("ref {name:?}")));
        }
    }
    let mut tracks = HashSet::new();
    let mut keep: HashSet<Path> = HashSet::new();
    while let Some((id, referrer)) = queue.pop_front() {
        if !manifests.insert(id) {
            continue;
        }
        let manifest = dataset.manifest(&id, &referrer).await?;
        keep.insert(layout.manifest(&id));
        for t in &manifest.tracks {
            if tracks.insert(t.track) {
                keep.insert(layout.track(&t.track));
                let track = dataset.track(&t.track, &format!("manifest {id}")).await?;
                let entries = track
                    .items()
                    .iter()
                    .map(|i| &i.entry)
                    .chain(track.retired());
                for e in entries {
                    keep.insert(layout.data_object(&t.timeline, &t.modality, &e.address));
                    if e.placement == Placement::Chunked {
                        let im = dataset
                            .item_manifest(
                                &t.timeline,
                                &t.modality,
                                &e.address,
                                &format!("track {}", t.track),
                            )
                            .await?;
                        for c in &im.chunks {
                            keep.insert(layout.data_object(&t.timeline, &t.modality, &c.address));
                        }
                    }
                }
            }
        }
        for parent in manifest.parents {
            queue.push_back((parent, format!("manifest {id}")));
        }
    }
    report.manifests_kept = manifests.len();

    let now = chrono::Utc::now();
    let grace = chrono::Duration::from_std(grace).unwrap_or(chrono::Duration::MAX);
    for meta in store.list_all().await? {
        if layout.classify(&meta.location) == ObjectKind::Other {
            continue; // refs, locks, foreign files: never gc's to delete
        }
        if keep.contains(&meta.location) {
            report.objects_kept += 1;
        } else if now - meta.last_modified < grace {
            report.too_young += 1;
        } else {
            report.unreachable.push((meta.location, meta.size));
        }
    }
    report.unreachable.sort();
    if !dry_run {
        for (path, _) in &report.unreachable {
            store.delete(path).await?;
        }
    }
    Ok(report)
}
