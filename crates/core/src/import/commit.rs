//! The commit that ends an import, and its rebase when another writer
//! moved the ref while the import ran.

use std::collections::BTreeMap;

use packfs_format::{Manifest, ObjectId};
use tracing::info;

use super::track_writer::{empty_track, Counts, EditTrack, WrittenTrack};
use super::ImportError;
use crate::dataset::{
    writer_string, Dataset, DatasetError, TrackContent, TrackUpdate, MAX_COMMIT_ATTEMPTS,
};
use crate::store::StoreError;

/// The ref an import commits to, as it read it.
pub(super) struct Parent {
    pub(super) id: Option<ObjectId>,
    pub(super) manifest: Option<Manifest>,
}

impl Parent {
    pub(super) async fn read(dataset: &Dataset, ref_name: &str) -> Result<Parent, DatasetError> {
        let id = dataset.store().read_ref(ref_name).await?;
        let manifest = match id {
            Some(id) => Some(dataset.manifest(&id, &format!("ref {ref_name:?}")).await?),
            None => None,
        };
        Ok(Parent { id, manifest })
    }

    /// Its Track of (`timeline`, `modality`).
    pub(super) fn track(&self, (timeline, modality): &(String, String)) -> Option<ObjectId> {
        let tracks = self.manifest.iter().flat_map(|m| &m.tracks);
        let mut found = tracks.filter(|t| &t.timeline == timeline && &t.modality == modality);
        found.next().map(|t| t.track)
    }
}

/// Commits the Tracks `written`, built on `parent`, to `ref_name`; `None`
/// when that changes nothing. When another writer moved the ref, each
/// Track it changed gets the import's new items again and the commit is
/// tried again on the ref as it is then; a Track it did not change is
/// committed as it was stored.
pub(super) async fn commit(
    dataset: &Dataset,
    ref_name: &str,
    mut parent: Parent,
    mut written: Vec<WrittenTrack>,
    counts: &mut Counts,
) -> Result<Option<ObjectId>, ImportError> {
    let mut attempt = 1;
    loop {
        let changed = written.iter().any(|w| Some(w.track) != w.base);
        if parent.manifest.is_some() && !changed {
            return Ok(None);
        }
        let mut tracks: BTreeMap<(String, String), ObjectId> = BTreeMap::new();
        for t in parent.manifest.iter().flat_map(|m| &m.tracks) {
            tracks.insert((t.timeline.clone(), t.modality.clone()), t.track);
        }
        for w in &written {
            tracks.insert((*w.key).clone(), w.track);
        }
        let updates = tracks
            .into_iter()
            .map(|((timeline, modality), id)| TrackUpdate {
                timeline,
                modality,
                content: TrackContent::Existing(id),
            })
            .collect();
        let writer = writer_string("import");
        match dataset.commit(ref_name, parent.id, updates, &writer).await {
            Ok(id) => return Ok(Some(id)),
            Err(DatasetError::Store(StoreError::RefConflict { .. }))
                if attempt < MAX_COMMIT_ATTEMPTS =>
            {
                info!("ref {ref_name} moved during import; rebasing (attempt {attempt})");
                parent = Parent::read(dataset, ref_name).await?;
                for w in &mut written {
                    rebase(dataset, w, parent.track(&w.key), counts).await?;
                }
                attempt += 1;
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// Makes `w` a Track built on `onto`: as it is if `onto` is the Track it
/// was built on; else `onto` with the import's new items added again,
/// read back from the pages of `w` that hold them (they are not kept for
/// a rebase that rarely happens), a page at a time.
async fn rebase(
    dataset: &Dataset,
    w: &mut WrittenTrack,
    onto: Option<ObjectId>,
    counts: &mut Counts,
) -> Result<(), ImportError> {
    if onto == w.base {
        return Ok(());
    }
    let base = match onto {
        Some(id) => id,
        None => empty_track(dataset).await?,
    };
    let mut edit = EditTrack::new(dataset, base);
    let referrer = "the import's own commit";
    let (root, pages) = dataset
        .pages_numbered_from(&w.track, w.first, referrer)
        .await?;
    let new = w.first..w.first.saturating_add(w.new as i64);
    for page in pages {
        let items = dataset
            .items_numbered_from(&w.track, &root, page, w.first)
            .await?;
        for mut item in items.into_iter().filter(|i| new.contains(&i.entry.t_start)) {
            item.entry.t_start = 0;
            item.entry.t_end = 0;
            edit.item(dataset, &w.key, item).await?;
        }
    }
    edit.flush(dataset, &w.key).await?;
    if edit.items_in != w.new {
        let detail = format!(
            "track {}: the import's lost commit holds {} of its {} new items",
            w.track, edit.items_in, w.new
        );
        return Err(DatasetError::Merge(detail).into());
    }
    counts.separated += edit.separated;
    *w = WrittenTrack {
        key: w.key.clone(),
        base: onto,
        track: edit.id,
        first: edit.first.unwrap_or(0),
        new: edit.new,
    };
    Ok(())
}
