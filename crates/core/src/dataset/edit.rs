//! A Track changed by an edit ([`Dataset::edit_track`]): the name and
//! pack pages the change falls in are read, re-cut and stored with a new
//! root; every other page is the old Track's, neither read nor written.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use bytes::Bytes;
use packfs_format::{
    pages_to_edit, read_pack_page, EditError, FormatError, ObjectId, PagedTrack, Placement,
    TrackEdit, TrackItem, TrackRoot,
};

use super::{Dataset, DatasetError, TrackObject};

/// A Track being edited: its root (index read) and the pages read so far.
struct Edited {
    root: Arc<TrackRoot>,
    pages: HashMap<ObjectId, Bytes>,
    /// Pages of a single-object Track cut in memory: not stored yet.
    unstored: Vec<(ObjectId, Vec<u8>)>,
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
        let root = match self.track_object(id, referrer).await? {
            TrackObject::Paged(root) => root,
            TrackObject::Single(_) => {
                let (items, ..) = self.track(id, referrer).await?.into_parts();
                return Ok(items
                    .into_iter()
                    .filter(|i| wanted.contains(i.name.as_str()))
                    .map(|i| (i.name.clone(), i))
                    .collect());
            }
        };
        let mut on: Vec<usize> = names.iter().filter_map(|n| root.page_of(n)).collect();
        on.sort_unstable();
        on.dedup();
        let referrer = format!("track {}", self.store().layout().track(id));
        let ids = on.iter().map(|&j| root.pages[j].id).collect();
        let pages = self.pages(ids, &referrer).await?;
        let mut found = HashMap::with_capacity(names.len());
        for (&j, bytes) in on.iter().zip(&pages) {
            let what = format!("page {}", self.store().layout().page(&root.pages[j].id));
            for item in root.name_page(j, bytes, &what)?.items {
                if wanted.contains(item.name.as_str()) {
                    found.insert(item.name.clone(), item);
                }
            }
        }
        Ok(found)
    }

    /// Stores the Track `id` of `timeline`/`modality` changed by `edit`,
    /// and with the `fresh` items (just uploaded) added, numbered in name
    /// order after its items; returns the new Track's id and the fresh
    /// items as it holds them. A fresh item packed in a pack the Track
    /// holds already is stored apart first ([`Dataset::separate_twin_packs`]
    /// says why). A single-object Track becomes a paged one.
    pub async fn edit_track(
        &self,
        timeline: &str,
        modality: &str,
        id: &ObjectId,
        mut edit: TrackEdit,
        mut fresh: Vec<TrackItem>,
    ) -> Result<(ObjectId, Vec<TrackItem>), DatasetError> {
        let referrer = "the Track a commit changes";
        let mut edited = self.edited(id, referrer).await?;
        let t = self.t_end(&mut edited, id).await?.unwrap_or(0);
        fresh.sort_unstable_by(|a, b| a.name.cmp(&b.name));
        for (t, item) in (t..).zip(&mut fresh) {
            item.entry.t_start = t;
            item.entry.t_end = t + 1;
        }
        let twins = self.recorded_packs(&mut edited, id, &fresh).await?;
        self.store_apart(timeline, modality, twins, &mut fresh)
            .await?;
        edit.items.extend(fresh.iter().cloned());
        let mut paged = self.apply(&mut edited, id, Arc::new(edit)).await?;
        paged.pages.extend(edited.unstored);
        let new = self.put_paged(paged, &HashSet::new()).await?;
        Ok((new, fresh))
    }

    /// The Track `id` ready to edit: a paged one's root, or a single
    /// object cut into pages in memory.
    async fn edited(&self, id: &ObjectId, referrer: &str) -> Result<Edited, DatasetError> {
        let root = match self.track_object(id, referrer).await? {
            TrackObject::Paged(root) => root,
            TrackObject::Single(_) => {
                let track = self.track(id, referrer).await?;
                let (_, paged) = self.encode_track(track).await;
                let PagedTrack { root, pages, .. } = paged;
                let mut root = TrackRoot::decode(&root, "a Track cut in memory")?;
                let by_id: HashMap<ObjectId, Bytes> = pages
                    .iter()
                    .map(|(id, bytes)| (*id, Bytes::from(bytes.clone())))
                    .collect();
                if root.needs_index() {
                    let index: Vec<&[u8]> = root.index.iter().map(|i| &by_id[&i.id][..]).collect();
                    root.fill_index(index, |id| format!("page {id}"))?;
                }
                return Ok(Edited {
                    root: Arc::new(root),
                    pages: by_id,
                    unstored: pages,
                });
            }
        };
        Ok(Edited {
            root: Arc::new(root),
            pages: HashMap::new(),
            unstored: Vec::new(),
        })
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

    /// The largest `t_end` of the Track's items: what its page refs say,
    /// and for a page whose ref does not, what its items say.
    async fn t_end(&self, edited: &mut Edited, id: &ObjectId) -> Result<Option<i64>, DatasetError> {
        let root = edited.root.clone();
        let silent: Vec<usize> = (0..root.pages.len())
            .filter(|&j| root.pages[j].items > 0 && root.pages[j].t_end.is_none())
            .collect();
        let ids = silent.iter().map(|&j| root.pages[j].id).collect();
        self.read_into(edited, id, ids).await?;
        let mut t = root.pages.iter().filter_map(|p| p.t_end).max();
        for j in silent {
            let page = &root.pages[j];
            let what = format!("page {}", self.store().layout().page(&page.id));
            let items = root.name_page(j, &edited.pages[&page.id], &what)?.items;
            t = t.max(items.iter().map(|i| i.entry.t_end).max());
        }
        Ok(t)
    }

    /// The packs of `fresh` items that the Track records already, with
    /// their lengths.
    async fn recorded_packs(
        &self,
        edited: &mut Edited,
        id: &ObjectId,
        fresh: &[TrackItem],
    ) -> Result<HashMap<ObjectId, Option<u64>>, DatasetError> {
        let root = edited.root.clone();
        let packs: HashSet<ObjectId> = fresh
            .iter()
            .filter(|i| matches!(i.entry.placement, Placement::Packed { .. }))
            .map(|i| i.entry.address)
            .collect();
        let mut on: Vec<usize> = packs.iter().filter_map(|a| root.pack_page_of(a)).collect();
        on.sort_unstable();
        on.dedup();
        let ids: Vec<ObjectId> = on.iter().map(|&j| root.pack_pages[j].id).collect();
        self.read_into(edited, id, ids.clone()).await?;
        let mut twins = HashMap::new();
        for page in ids {
            let what = format!("page {}", self.store().layout().page(&page));
            for r in read_pack_page(&edited.pages[&page], &what)? {
                if packs.contains(&r.address) {
                    twins.insert(r.address, Some(r.length));
                }
            }
        }
        Ok(twins)
    }

    /// Runs the edit, reading the pages it asks for until it has them all.
    async fn apply(
        &self,
        edited: &mut Edited,
        id: &ObjectId,
        edit: Arc<TrackEdit>,
    ) -> Result<PagedTrack, DatasetError> {
        let first = pages_to_edit(&edited.root, &edit);
        self.read_into(edited, id, first).await?;
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
                Err(EditError::Need(ids)) => {
                    if ids.iter().all(|p| edited.pages.contains_key(p)) {
                        let detail = "editing it asked again for pages it had read";
                        return Err(FormatError::shape(&what, detail).into());
                    }
                    self.read_into(edited, id, ids).await?;
                }
            }
        }
    }
}
