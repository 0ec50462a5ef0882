//! A Track changed by an edit ([`Dataset::edit_track`]): the name and
//! pack pages the change falls in are read, re-cut and stored with a new
//! root; every other page is the old Track's, neither read nor written.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use bytes::Bytes;
use packfs_format::{
    pages_to_edit, read_pack_page, EditError, FormatError, FragmentEntry, NamePage, ObjectId,
    PackRecord, PagedTrack, Placement, Survey, Track, TrackEdit, TrackItem, TrackRoot,
};

use super::twins::twin_packs;
use super::{Dataset, DatasetError, Separated, TrackObject};

/// A Track stored by [`Dataset::edit_track`].
#[derive(Debug)]
pub struct EditedTrack {
    pub id: ObjectId,
    /// The fresh items as the Track holds them: numbered, and stored apart
    /// where their pack is one the Track holds.
    pub fresh: Vec<TrackItem>,
    /// Fresh items the Track held already (the same name, media type,
    /// attributes and bytes), as it holds them: left out of `fresh`.
    pub unchanged: Vec<TrackItem>,
    /// The `t_start` of the first fresh item: they are numbered from it in
    /// name order.
    pub first: i64,
    /// What storing apart did.
    pub separated: Separated,
}

/// Page refs the cached roots may list in all: about 25 MB, the root of
/// one billion-item Track.
const CACHED_REFS: usize = 256 << 10;
/// Roots cached at most (an import of many small modalities stores many).
const CACHED_ROOTS: usize = 64;

/// Roots recently stored or read, their name pages listed, by id (roots
/// are immutable), within [`CACHED_REFS`] and [`CACHED_ROOTS`].
#[derive(Debug, Default)]
pub(crate) struct RootCache {
    roots: Vec<(ObjectId, Arc<TrackRoot>)>,
}

impl RootCache {
    fn get(&mut self, id: &ObjectId) -> Option<Arc<TrackRoot>> {
        let at = self.roots.iter().position(|(r, _)| r == id)?;
        let entry = self.roots.remove(at);
        let root = entry.1.clone();
        self.roots.push(entry);
        Some(root)
    }

    pub(crate) fn insert(&mut self, id: ObjectId, root: Arc<TrackRoot>) {
        self.roots.retain(|(r, _)| *r != id);
        self.roots.push((id, root));
        let refs = |roots: &[(ObjectId, Arc<TrackRoot>)]| -> usize {
            roots.iter().map(|(_, r)| r.pages.len()).sum()
        };
        while self.roots.len() > CACHED_ROOTS || refs(&self.roots) > CACHED_REFS {
            self.roots.remove(0);
        }
    }
}

/// A Track object read by [`Dataset::listed`].
enum Listed {
    Paged(Arc<TrackRoot>),
    Single(Track),
}

/// A Track being edited: its root (index read) and the pages read so far.
struct Edited {
    root: Arc<TrackRoot>,
    pages: HashMap<ObjectId, Bytes>,
    /// Pages of a single-object Track cut in memory: not stored yet.
    unstored: Vec<(ObjectId, Vec<u8>)>,
    /// Packs the fresh items are known to cut as the Track does, if it
    /// holds them: not checked for twins.
    same_cut: HashSet<ObjectId>,
}

impl Dataset {
    /// The items `names` of the Track `id` that `referrer` names, reading
    /// only the name pages that hold them; a name it lacks is left out.
    pub async fn track_items(
        &self,
        id: &ObjectId,
        names: &[&str],
        referrer: &str,
    ) -> Result<HashMap<String, TrackItem>, DatasetError> {
        let wanted: HashSet<&str> = names.iter().copied().collect();
        let on = |root: &TrackRoot| names.iter().filter_map(|n| root.page_of(n)).collect();
        let keep = |i: &TrackItem| wanted.contains(i.name.as_str());
        let items = self.items_where(id, referrer, on, keep).await?;
        Ok(items.into_iter().map(|i| (i.name.clone(), i)).collect())
    }

    /// The name pages of the paged Track `id` that may hold items
    /// numbered from `first` on (`t_start ≥ first`): the items an edit
    /// added, which it numbered after every item it kept (a page ref's
    /// `t_end` is its items' largest). Read one at a time with
    /// [`Dataset::items_numbered_from`], they are never all in memory.
    pub(crate) async fn pages_numbered_from(
        &self,
        id: &ObjectId,
        first: i64,
        referrer: &str,
    ) -> Result<(Arc<TrackRoot>, Vec<usize>), DatasetError> {
        let root = self.listed_root(id, referrer).await?;
        let pages = (0..root.pages.len())
            .filter(|&j| root.pages[j].t_end.is_none_or(|t| t > first))
            .collect();
        Ok((root, pages))
    }

    /// The items numbered from `first` on of name page `page` of the
    /// paged Track `id`, whose root is `root`.
    pub(crate) async fn items_numbered_from(
        &self,
        id: &ObjectId,
        root: &TrackRoot,
        page: usize,
        first: i64,
    ) -> Result<Vec<TrackItem>, DatasetError> {
        let pages = self.name_pages(id, root, vec![page]).await?;
        let items = pages.into_iter().flat_map(|p| p.items);
        Ok(items.filter(|i| i.entry.t_start >= first).collect())
    }

    /// The items of the Track `id` that `keep` takes: of a paged Track,
    /// from the name pages `on` gives (those that may hold them), of a
    /// single object from all of it.
    async fn items_where(
        &self,
        id: &ObjectId,
        referrer: &str,
        on: impl FnOnce(&TrackRoot) -> Vec<usize>,
        keep: impl Fn(&TrackItem) -> bool,
    ) -> Result<Vec<TrackItem>, DatasetError> {
        let root = match self.listed(id, referrer).await? {
            Listed::Paged(root) => root,
            Listed::Single(track) => {
                let (items, ..) = track.into_parts();
                return Ok(items.into_iter().filter(|i| keep(i)).collect());
            }
        };
        let pages = self.name_pages(id, &root, on(&root)).await?;
        let items = pages.into_iter().flat_map(|p| p.items);
        Ok(items.filter(|i| keep(i)).collect())
    }

    /// Name pages `on` (indexes, in any order, repeats allowed) of the
    /// paged Track `id`, its root `root` listed: read and decoded, in
    /// page order.
    pub(super) async fn name_pages(
        &self,
        id: &ObjectId,
        root: &TrackRoot,
        mut on: Vec<usize>,
    ) -> Result<Vec<NamePage>, DatasetError> {
        on.sort_unstable();
        on.dedup();
        let referrer = format!("track {}", self.store().layout().track(id));
        let ids = on.iter().map(|&j| root.pages[j].id).collect();
        let bytes = self.pages(ids, &referrer).await?;
        let mut pages = Vec::with_capacity(on.len());
        for (&j, bytes) in on.iter().zip(&bytes) {
            let what = format!("page {}", self.store().layout().page(&root.pages[j].id));
            pages.push(root.name_page(j, bytes, &what)?);
        }
        Ok(pages)
    }

    /// Stores the Track `id` of `timeline`/`modality` changed by `edit`,
    /// and with the `fresh` items (just uploaded) added, numbered in name
    /// order after the largest `t_end` of the items it keeps. A fresh item
    /// equal to the item of its name but for the number leaves that item
    /// as it is, so storing the same files again changes nothing. A fresh item
    /// packed in a pack the Track holds already is stored apart first
    /// ([`Dataset::separate_twin_packs`] says why). A single-object Track
    /// becomes a paged one.
    pub async fn edit_track(
        &self,
        timeline: &str,
        modality: &str,
        id: &ObjectId,
        edit: TrackEdit,
        fresh: Vec<TrackItem>,
    ) -> Result<EditedTrack, DatasetError> {
        let at = (timeline, modality);
        self.edit_track_with(at, id, edit, fresh, &HashSet::new())
            .await
    }

    /// [`Dataset::edit_track`] of the Track `id` of (timeline, modality)
    /// `at`, where the packs `same_cut`, if the Track holds them, are cut
    /// as the fresh items cut them: they are not checked for twins (an
    /// import adding its files in batches knows its earlier batches' packs
    /// so, and the check would read the whole Track).
    pub(crate) async fn edit_track_with(
        &self,
        at: (&str, &str),
        id: &ObjectId,
        mut edit: TrackEdit,
        mut fresh: Vec<TrackItem>,
        same_cut: &HashSet<ObjectId>,
    ) -> Result<EditedTrack, DatasetError> {
        let referrer = "the Track a commit changes";
        let mut edited = self.edited(id, referrer).await?;
        edited.same_cut.clone_from(same_cut);
        let stored = edit.items.len();
        fresh.sort_unstable_by(|a, b| a.name.cmp(&b.name));
        let unchanged = self
            .drop_unchanged(&mut edited, id, &edit, &mut fresh)
            .await?;
        edit.items.extend(fresh);
        // Fresh names replace the items of theirs: counted before numbering.
        let survey = self.survey(&mut edited, id, &edit).await?;
        let first = survey.kept_t_end.unwrap_or(0);
        for (t, item) in (first..).zip(&mut edit.items[stored..]) {
            item.entry.t_start = t;
            item.entry.t_end = t + 1;
        }
        let separated = self
            .separate(at, id, &mut edited, &survey, &mut edit, stored)
            .await?;
        let fresh = edit.items[stored..].to_vec();
        let id = self.store_edit(id, edited, edit).await?;
        Ok(EditedTrack {
            id,
            fresh,
            unchanged,
            first,
            separated,
        })
    }

    /// Drops from `fresh` (sorted by name) each item the Track `id`, read
    /// into `edited`, holds already and `edit` keeps: the same name, media
    /// type, attributes and bytes (entry but for its numbers). Gives the
    /// Track's items for those dropped. Reads the pages holding their
    /// names, which the edit reads anyway.
    async fn drop_unchanged(
        &self,
        edited: &mut Edited,
        id: &ObjectId,
        edit: &TrackEdit,
        fresh: &mut Vec<TrackItem>,
    ) -> Result<Vec<TrackItem>, DatasetError> {
        let root = edited.root.clone();
        let mut on: Vec<usize> = fresh.iter().filter_map(|i| root.page_of(&i.name)).collect();
        on.sort_unstable();
        on.dedup();
        let ids = on.iter().map(|&j| root.pages[j].id).collect();
        self.read_into(edited, id, ids).await?;
        let mut held: HashMap<String, TrackItem> = HashMap::new();
        let wanted: HashSet<&str> = fresh.iter().map(|i| i.name.as_str()).collect();
        for j in on {
            let page = &root.pages[j];
            let what = format!("page {}", self.store().layout().page(&page.id));
            let items = root.name_page(j, &edited.pages[&page.id], &what)?.items;
            let items = items
                .into_iter()
                .filter(|i| wanted.contains(i.name.as_str()));
            held.extend(items.map(|i| (i.name.clone(), i)));
        }
        drop(wanted);
        // An item the edit removes must be added again, or its bytes would
        // belong to no entry of its pack.
        let removed: HashSet<&str> = edit.removed.iter().map(String::as_str).collect();
        let mut unchanged = Vec::new();
        fresh.retain(|new| {
            let Some(old) = held.get(&new.name) else {
                return true;
            };
            let (a, b) = (&old.entry, &new.entry);
            let same = (a.byte_size, a.address, a.placement)
                == (b.byte_size, b.address, b.placement)
                && old.attrs == new.attrs
                && old.media_type == new.media_type
                && !removed.contains(new.name.as_str())
                && !edit.clears(&new.name);
            if same {
                unchanged.push(old.clone());
            }
            !same
        });
        Ok(unchanged)
    }

    /// Stores the Track `id` of `timeline`/`modality` changed by `edit`, a
    /// union merge's changes: its items keep their numbers, and those
    /// from `fresh` on are packed in packs their branch made, which are
    /// stored apart where the Track holds the same pack cut another way.
    pub(crate) async fn merge_edit(
        &self,
        at: (&str, &str),
        id: &ObjectId,
        mut edit: TrackEdit,
        fresh: usize,
    ) -> Result<(ObjectId, Separated), DatasetError> {
        let mut edited = self.edited(id, "the Track a merge changes").await?;
        let survey = self.survey(&mut edited, id, &edit).await?;
        let separated = self
            .separate(at, id, &mut edited, &survey, &mut edit, fresh)
            .await?;
        Ok((self.store_edit(id, edited, edit).await?, separated))
    }

    /// Stores apart the items of `edit` from `fresh` on that are packed in
    /// a pack the Track `id` (read into `edited`, `survey`ed) holds cut
    /// another way.
    async fn separate(
        &self,
        (timeline, modality): (&str, &str),
        id: &ObjectId,
        edited: &mut Edited,
        survey: &Survey,
        edit: &mut TrackEdit,
        fresh: usize,
    ) -> Result<Separated, DatasetError> {
        let mut recorded = self
            .recorded_packs(edited, id, &edit.items[fresh..])
            .await?;
        recorded.retain(|r| !edited.same_cut.contains(&r.address));
        let twins = self
            .twins(id, recorded, &survey.dropped, &edit.items[fresh..])
            .await?;
        self.store_apart(timeline, modality, twins, &mut edit.items[fresh..])
            .await
    }

    /// Stores `edit` of the Track `id`, read into `edited`: the pages it
    /// changes, then the root; gives the new Track's id.
    async fn store_edit(
        &self,
        id: &ObjectId,
        mut edited: Edited,
        edit: TrackEdit,
    ) -> Result<ObjectId, DatasetError> {
        let mut paged = self.apply(&mut edited, id, Arc::new(edit)).await?;
        paged.pages.extend(edited.unstored);
        self.put_paged(paged, &HashSet::new()).await
    }

    /// The Track `id` ready to edit: a paged one's root, or a single
    /// object cut into pages in memory.
    async fn edited(&self, id: &ObjectId, referrer: &str) -> Result<Edited, DatasetError> {
        let (root, pages, unstored) = match self.listed(id, referrer).await? {
            Listed::Paged(root) => (root, HashMap::new(), Vec::new()),
            Listed::Single(track) => {
                let (_, paged) = self.encode_track(track).await;
                let PagedTrack { listed, pages, .. } = paged;
                let by_id = pages
                    .iter()
                    .map(|(id, bytes)| (*id, Bytes::from(bytes.clone())))
                    .collect();
                (Arc::new(listed), by_id, pages)
            }
        };
        Ok(Edited {
            root,
            pages,
            unstored,
            same_cut: HashSet::new(),
        })
    }

    /// The Track object `id` that `referrer` names, as an edit or a lookup
    /// by name reads it: a paged root with its name pages listed (kept for
    /// the next time, as [`Dataset::put_paged`] keeps the roots it
    /// stores), or a single object decoded.
    async fn listed(&self, id: &ObjectId, referrer: &str) -> Result<Listed, DatasetError> {
        if let Some(root) = self.roots.lock().get(id) {
            return Ok(Listed::Paged(root));
        }
        match self.track_object(id, referrer).await? {
            TrackObject::Paged(root) => {
                let root = Arc::new(root);
                self.roots.lock().insert(*id, root.clone());
                Ok(Listed::Paged(root))
            }
            TrackObject::Single(bytes) => Ok(Listed::Single(self.decode_single(id, bytes).await?)),
        }
    }

    /// The root of the paged Track `id` that `referrer` names, its name
    /// pages listed; an error naming it if it is a single object.
    pub(super) async fn listed_root(
        &self,
        id: &ObjectId,
        referrer: &str,
    ) -> Result<Arc<TrackRoot>, DatasetError> {
        match self.listed(id, referrer).await? {
            Listed::Paged(root) => Ok(root),
            Listed::Single(_) => {
                let what = format!("track {}", self.store().layout().track(id));
                Err(FormatError::shape(what, "a paged Track was expected").into())
            }
        }
    }

    /// Keeps `root`, the root of the Track `id` with its name pages
    /// listed, for the next edit of it (a reader that listed them anyway).
    pub(crate) fn keep_root(&self, id: ObjectId, root: Arc<TrackRoot>) {
        self.roots.lock().insert(id, root);
    }

    /// Reads the pages `ids` an edit asks for into `edited`: one it has
    /// read already would be asked for again and again.
    async fn read_new(
        &self,
        edited: &mut Edited,
        id: &ObjectId,
        ids: Vec<ObjectId>,
    ) -> Result<(), DatasetError> {
        if ids.iter().all(|p| edited.pages.contains_key(p)) {
            let what = format!("track {}", self.store().layout().track(id));
            let detail = "editing it asked again for pages it had read";
            return Err(FormatError::shape(what, detail).into());
        }
        self.read_into(edited, id, ids).await
    }

    /// Reads the pages `ids` into `edited` (those it lacks).
    async fn read_into(
        &self,
        edited: &mut Edited,
        id: &ObjectId,
        mut ids: Vec<ObjectId>,
    ) -> Result<(), DatasetError> {
        ids.retain(|p| !edited.pages.contains_key(p));
        ids.sort_unstable();
        ids.dedup();
        let referrer = format!("track {}", self.store().layout().track(id));
        let pages = self.pages(ids.clone(), &referrer).await?;
        edited.pages.extend(ids.into_iter().zip(pages));
        Ok(())
    }

    /// What the Track keeps and drops through `edit`, reading the pages
    /// that takes.
    async fn survey(
        &self,
        edited: &mut Edited,
        id: &ObjectId,
        edit: &TrackEdit,
    ) -> Result<Survey, DatasetError> {
        let first = pages_to_edit(&edited.root, edit);
        self.read_into(edited, id, first).await?;
        let layout = self.store().layout().clone();
        let page_what = |p: &ObjectId| format!("page {}", layout.page(p));
        loop {
            let root = edited.root.clone();
            let pages = &edited.pages;
            match root.survey(edit, &|p| pages.get(p).map(|b| &b[..]), &page_what) {
                Ok(survey) => return Ok(survey),
                Err(EditError::Format(e)) => return Err(e.into()),
                Err(EditError::Need(ids)) => self.read_new(edited, id, ids).await?,
            }
        }
    }

    /// The records of the packs of `fresh` items that the Track records
    /// already.
    async fn recorded_packs(
        &self,
        edited: &mut Edited,
        id: &ObjectId,
        fresh: &[TrackItem],
    ) -> Result<Vec<PackRecord>, DatasetError> {
        let packs = packs_of(fresh);
        let ids = pack_pages_of(&edited.root, &packs);
        self.read_into(edited, id, ids.clone()).await?;
        let mut recorded = Vec::new();
        for page in ids {
            let what = format!("page {}", self.store().layout().page(&page));
            for r in read_pack_page(&edited.pages[&page], &what)? {
                if packs.contains(&r.address) {
                    recorded.push(r);
                }
            }
        }
        Ok(recorded)
    }

    /// The packs of `fresh` items that the Track holds already cut
    /// another way (see [`Dataset::separate_twin_packs`]), each with its
    /// length. A pack's cut is its retired entries and its live ones:
    /// known when the edit drops every live one (`dropped`: a re-import
    /// of the same names), else read from the whole Track.
    async fn twins(
        &self,
        id: &ObjectId,
        recorded: Vec<PackRecord>,
        dropped: &[FragmentEntry],
        fresh: &[TrackItem],
    ) -> Result<HashMap<ObjectId, Option<u64>>, DatasetError> {
        let mut existing: Vec<FragmentEntry> = Vec::new();
        let mut unknown = HashSet::new();
        for r in recorded {
            let live: Vec<&FragmentEntry> = dropped
                .iter()
                .filter(|e| {
                    e.address == r.address && matches!(e.placement, Placement::Packed { .. })
                })
                .collect();
            match live.len() as u64 == r.live {
                true => existing.extend(live.into_iter().cloned().chain(r.retired)),
                false => {
                    unknown.insert(r.address);
                }
            }
        }
        if !unknown.is_empty() {
            let track = self.track(id, "the Track a commit changes").await?;
            let entries = track
                .items()
                .iter()
                .map(|i| &i.entry)
                .chain(track.retired());
            existing.extend(entries.filter(|e| unknown.contains(&e.address)).cloned());
        }
        Ok(twin_packs(&existing, fresh))
    }

    /// Runs the edit, reading the pages it asks for until it has them all
    /// (the survey read those its names fall in).
    async fn apply(
        &self,
        edited: &mut Edited,
        id: &ObjectId,
        edit: Arc<TrackEdit>,
    ) -> Result<PagedTrack, DatasetError> {
        let layout = self.store().layout().clone();
        let what = format!("track {}", layout.track(id));
        let shape = self.page_shape;
        loop {
            let (root, edit, pages) = (edited.root.clone(), edit.clone(), edited.pages.clone());
            let (named, layout) = (what.clone(), layout.clone());
            let run = tokio::task::spawn_blocking(move || {
                let page_what = |id: &ObjectId| format!("page {}", layout.page(id));
                root.edit(
                    &edit,
                    &shape,
                    &|id| pages.get(id).map(|b| &b[..]),
                    &named,
                    &page_what,
                )
            });
            match run.await.expect("track edit panicked") {
                Ok(paged) => return Ok(paged),
                Err(EditError::Format(e)) => return Err(e.into()),
                Err(EditError::Need(ids)) => self.read_new(edited, id, ids).await?,
            }
        }
    }
}

/// The packs `items` are packed in.
pub(super) fn packs_of(items: &[TrackItem]) -> HashSet<ObjectId> {
    items
        .iter()
        .filter(|i| matches!(i.entry.placement, Placement::Packed { .. }))
        .map(|i| i.entry.address)
        .collect()
}

/// The pack pages of `root` that would record `packs`.
pub(super) fn pack_pages_of(root: &TrackRoot, packs: &HashSet<ObjectId>) -> Vec<ObjectId> {
    let mut on: Vec<usize> = packs.iter().filter_map(|a| root.pack_page_of(a)).collect();
    on.sort_unstable();
    on.dedup();
    on.iter().map(|&j| root.pack_pages[j].id).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use packfs_format::PageRef;

    fn root(refs: usize) -> Arc<TrackRoot> {
        let page = |i: usize| PageRef {
            first: format!("{i:08}"),
            id: ObjectId::of(&i.to_le_bytes()),
            items: 1,
            bytes: 1,
            t_end: Some(1),
        };
        Arc::new(TrackRoot {
            pages: (0..refs).map(page).collect(),
            ..TrackRoot::default()
        })
    }

    #[test]
    fn the_root_cache_keeps_the_latest_roots_within_its_bounds() {
        let mut cache = RootCache::default();
        let id = |i: u64| ObjectId::of(&i.to_le_bytes());
        for i in 0..100 {
            cache.insert(id(i), root(1));
        }
        assert_eq!(cache.roots.len(), CACHED_ROOTS);
        assert!(cache.get(&id(0)).is_none(), "the oldest went first");
        assert!(cache.get(&id(99)).is_some());
        // A root listing more than the bound is not kept, nor are those it
        // pushed out.
        cache.insert(id(1000), root(CACHED_REFS + 1));
        assert!(cache.get(&id(1000)).is_none());
        cache.insert(id(1001), root(CACHED_REFS / 2));
        cache.insert(id(1002), root(CACHED_REFS / 2));
        assert!(cache.get(&id(1001)).is_some() && cache.get(&id(1002)).is_some());
        cache.insert(id(1003), root(1));
        assert!(cache.get(&id(1001)).is_none(), "over the refs bound");
    }
}
