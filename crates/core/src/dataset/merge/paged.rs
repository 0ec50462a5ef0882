//! The union merge of paged Tracks at the cost of what the sides changed.
//!
//! A side's changes since the common ancestor are on the name and pack
//! pages it does not share with the ancestor: only those are read (and
//! the index pages listing them). The merge starts from the first changed
//! side's Track and takes each later side in turn: the side's changes
//! are weighed against the merged Track so far, whose rows they name are
//! looked up, and stored as an edit of it ([`Dataset::merge_edit`]). So a
//! merge holds one side's changes at a time, and reads and writes the
//! pages they fall in. The rules are the whole-Track merge's
//! (`super::TrackMerge`): a change wins over a removal, a name two sides
//! changed keeps the earlier side's item and the later one's goes under a
//! conflict name.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use packfs_format::{
    name_order, read_pack_page, Attrs, ObjectId, PackRecord, Placement, TrackDir, TrackEdit,
    TrackItem, TrackRoot,
};

use super::super::edit::{pack_pages_of, packs_of};
use super::super::{shared_ids, Dataset, DatasetError, TrackObject};
use super::{conflict_names, version};

/// What one side changed since the common ancestor.
pub(super) struct Delta {
    /// Items whose version differs: the ancestor's and the side's
    /// (`None`: not there).
    items: BTreeMap<String, (Option<TrackItem>, Option<TrackItem>)>,
    /// Directories listed otherwise: the ancestor's attributes and the
    /// side's (`None`: not listed).
    dirs: BTreeMap<String, (Option<Attrs>, Option<Attrs>)>,
    /// Records of the packs the side has and the ancestor has not.
    new_packs: HashMap<ObjectId, PackRecord>,
}

/// Rows of a Track: items and directories by name, and pack records.
#[derive(Default)]
pub(super) struct Rows {
    pub(super) items: HashMap<String, TrackItem>,
    pub(super) dirs: HashMap<String, Attrs>,
    packs: HashMap<ObjectId, PackRecord>,
}

impl Dataset {
    /// What the Track `side` changed since the Track `base`, reading the
    /// pages they do not share; `None` when either is a single object
    /// (the whole-Track merge takes those).
    pub(super) async fn delta(
        &self,
        base: &ObjectId,
        side: &ObjectId,
        referrer: &str,
    ) -> Result<Option<Delta>, DatasetError> {
        let TrackObject::Paged(mut a) = self.track_object_unindexed(base, referrer).await? else {
            return Ok(None);
        };
        let TrackObject::Paged(mut b) = self.track_object_unindexed(side, referrer).await? else {
            return Ok(None);
        };
        let index = shared_ids(a.index.iter().map(|p| p.id), b.index.iter().map(|p| p.id));
        self.list_unshared(&mut a, &index, referrer).await?;
        self.list_unshared(&mut b, &index, referrer).await?;
        let names = shared_ids(a.pages.iter().map(|p| p.id), b.pages.iter().map(|p| p.id));
        let packs = shared_ids(
            a.pack_pages.iter().map(|p| p.id),
            b.pack_pages.iter().map(|p| p.id),
        );
        let before = self.unshared_rows(base, a, &names, &packs).await?;
        let after = self.unshared_rows(side, b, &names, &packs).await?;
        Ok(Some(Delta::between(before, after)))
    }

    /// The rows of the Track `id` (its root `root`, listed) on the name
    /// and pack pages not in `names` and `packs`.
    async fn unshared_rows(
        &self,
        id: &ObjectId,
        root: TrackRoot,
        names: &HashSet<ObjectId>,
        packs: &HashSet<ObjectId>,
    ) -> Result<Rows, DatasetError> {
        let referrer = format!("track {}", self.store().layout().track(id));
        let name_pages: Vec<usize> = (0..root.pages.len())
            .filter(|&j| !names.contains(&root.pages[j].id))
            .collect();
        let pack_pages: Vec<ObjectId> = root
            .pack_pages
            .iter()
            .map(|p| p.id)
            .filter(|p| !packs.contains(p))
            .collect();
        let name_bytes = self
            .pages(
                name_pages.iter().map(|&j| root.pages[j].id).collect(),
                &referrer,
            )
            .await?;
        let pack_bytes = self.pages(pack_pages.clone(), &referrer).await?;
        let layout = self.store().layout().clone();
        let decode = move || -> Result<Rows, DatasetError> {
            let mut rows = Rows::default();
            for (&j, bytes) in name_pages.iter().zip(&name_bytes) {
                let what = format!("page {}", layout.page(&root.pages[j].id));
                rows.add(root.name_page(j, bytes, &what)?);
            }
            for (id, bytes) in pack_pages.iter().zip(&pack_bytes) {
                let what = format!("page {}", layout.page(id));
                let records = read_pack_page(bytes, &what)?;
                rows.packs
                    .extend(records.into_iter().map(|r| (r.address, r)));
            }
            Ok(rows)
        };
        tokio::task::spawn_blocking(decode)
            .await
            .expect("page decode panicked")
    }
}

impl Rows {
    fn add(&mut self, page: packfs_format::NamePage) {
        self.items
            .extend(page.items.into_iter().map(|i| (i.name.clone(), i)));
        self.dirs
            .extend(page.dirs.into_iter().map(|d| (d.name, d.attrs)));
    }
}

impl Delta {
    /// The changes from `before` to `after`, the rows of two Tracks on
    /// the pages they do not share: a row on a page both share is on it,
    /// the same, in both.
    fn between(mut before: Rows, after: Rows) -> Delta {
        let mut items = BTreeMap::new();
        for (name, item) in after.items {
            let base = before.items.remove(&name);
            if base.as_ref().map(version) != Some(version(&item)) {
                items.insert(name, (base, Some(item)));
            }
        }
        items.extend(before.items.into_iter().map(|(n, i)| (n, (Some(i), None))));
        let mut dirs = BTreeMap::new();
        for (name, attrs) in after.dirs {
            let base = before.dirs.remove(&name);
            if base != Some(attrs) {
                dirs.insert(name, (base, Some(attrs)));
            }
        }
        dirs.extend(before.dirs.into_iter().map(|(n, a)| (n, (Some(a), None))));
        let new_packs = after
            .packs
            .into_iter()
            .filter(|(address, _)| !before.packs.contains_key(address))
            .collect();
        Delta {
            items,
            dirs,
            new_packs,
        }
    }
}

/// One side's changes weighed against the merged Track so far.
#[derive(Default)]
struct SideEdit {
    /// Items it gives (replacing those of their names), by name.
    items: BTreeMap<String, TrackItem>,
    removed: BTreeSet<String>,
    dirs: BTreeMap<String, Attrs>,
    /// Directories it removes if nothing is left below them.
    unlisted: Vec<String>,
}

impl Dataset {
    /// The merged Track `merged` (paged) with the changes `delta` of the
    /// side of Manifest `manifest` taken in, stored; and the conflicts as
    /// (name, where the side's item went). `None` when a pack the changes
    /// bring back takes the whole Tracks ([`Dataset::records_packs`]).
    pub(super) async fn merge_side(
        &self,
        at: (&str, &str),
        merged: &ObjectId,
        delta: Delta,
        manifest: &ObjectId,
    ) -> Result<Option<(ObjectId, Vec<(String, String)>)>, DatasetError> {
        let Delta {
            items,
            dirs,
            new_packs,
        } = delta;
        let names: Vec<&str> = items
            .keys()
            .chain(dirs.keys())
            .map(String::as_str)
            .collect();
        let current = self.track_rows(merged, &names, "a merge").await?;
        let mut side = SideEdit::default();
        let mut clashes = Vec::new();
        for (name, (base, theirs)) in items {
            let now = current.items.get(&name);
            match theirs {
                // Removed on this side: gone unless another side changed it.
                None => {
                    if now.is_some() && now.map(version) == base.as_ref().map(version) {
                        side.removed.insert(name);
                    }
                }
                Some(item) => match now {
                    Some(c) if version(c) == version(&item) => {}
                    Some(c) if Some(version(c)) != base.as_ref().map(version) => clashes.push(item),
                    // Untouched by earlier sides, or removed there: a
                    // change wins over a removal.
                    _ => {
                        side.items.insert(name, item);
                    }
                },
            }
        }
        for (name, (base, theirs)) in dirs {
            match theirs {
                None if current.dirs.get(&name).copied() == base => side.unlisted.push(name),
                None => {}
                Some(attrs) => {
                    side.dirs.insert(name, attrs);
                }
            }
        }
        let mut conflicts = Vec::new();
        for mut item in clashes {
            let renamed = self.free_name(merged, &side, &item.name, manifest).await?;
            conflicts.push((std::mem::replace(&mut item.name, renamed.clone()), renamed));
            side.items.insert(item.name.clone(), item);
        }
        // Deepest first: a directory's subdirectories are settled before it.
        let mut unlisted = std::mem::take(&mut side.unlisted);
        unlisted.sort_by_key(|d| std::cmp::Reverse(d.matches('/').count()));
        for dir in unlisted {
            if self.has_rows_below(merged, &dir, &side).await? {
                // Listed, recording nothing, while anything is below it.
                side.dirs.insert(dir, Attrs::default());
            } else {
                side.removed.insert(dir);
            }
        }
        let (edit, fresh) = side.into_edit(&new_packs);
        if !self.records_packs(merged, &edit.items[..fresh]).await? {
            return Ok(None);
        }
        let (id, _) = self.merge_edit(at, merged, edit, fresh).await?;
        Ok(Some((id, conflicts)))
    }

    /// Whether the paged Track `id` records every pack `items` are packed
    /// in. An item of a pack the ancestor had, which the merged Track
    /// lost (every item of it removed on one side, one changed on
    /// another), brings back a pack whose other ranges only the whole
    /// Tracks tell.
    async fn records_packs(
        &self,
        id: &ObjectId,
        items: &[TrackItem],
    ) -> Result<bool, DatasetError> {
        let root = self.listed_root(id, "a merge").await?;
        let packs = packs_of(items);
        let referrer = format!("track {}", self.store().layout().track(id));
        let ids = pack_pages_of(&root, &packs);
        let mut recorded = HashSet::new();
        for (page, bytes) in ids.iter().zip(self.pages(ids.clone(), &referrer).await?) {
            let what = format!("page {}", self.store().layout().page(page));
            recorded.extend(
                read_pack_page(&bytes, &what)?
                    .into_iter()
                    .map(|r| r.address),
            );
        }
        Ok(packs.iter().all(|p| recorded.contains(p)))
    }

    /// The items and directories `names` of the paged Track `id`, reading
    /// the name pages that hold them.
    pub(super) async fn track_rows(
        &self,
        id: &ObjectId,
        names: &[&str],
        referrer: &str,
    ) -> Result<Rows, DatasetError> {
        let root = self.listed_root(id, referrer).await?;
        let mut on: Vec<usize> = names.iter().filter_map(|n| root.page_of(n)).collect();
        on.sort_unstable();
        on.dedup();
        let wanted: HashSet<&str> = names.iter().copied().collect();
        let mut rows = Rows::default();
        for page in self.name_pages(id, &root, &on).await? {
            rows.items.extend(
                page.items
                    .into_iter()
                    .filter(|i| wanted.contains(i.name.as_str()))
                    .map(|i| (i.name.clone(), i)),
            );
            rows.dirs.extend(
                page.dirs
                    .into_iter()
                    .filter(|d| wanted.contains(d.name.as_str()))
                    .map(|d| (d.name, d.attrs)),
            );
        }
        Ok(rows)
    }

    /// Name pages `on` of the paged Track `id` (its root, listed), decoded.
    async fn name_pages(
        &self,
        id: &ObjectId,
        root: &TrackRoot,
        on: &[usize],
    ) -> Result<Vec<packfs_format::NamePage>, DatasetError> {
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

    /// The first of the conflict names for `name` that neither the merged
    /// Track `merged` nor the side's edit so far holds.
    async fn free_name(
        &self,
        merged: &ObjectId,
        side: &SideEdit,
        name: &str,
        manifest: &ObjectId,
    ) -> Result<String, DatasetError> {
        for candidate in conflict_names(name, manifest) {
            if side.items.contains_key(&candidate) {
                continue;
            }
            let found = self.track_rows(merged, &[&candidate], "a merge").await?;
            if !found.items.contains_key(&candidate) || side.removed.contains(&candidate) {
                return Ok(candidate);
            }
        }
        unreachable!("conflict names do not end")
    }

    /// Whether the merged Track `merged`, edited by `side`, has a row below
    /// directory `dir`: a row whose parent it is (every directory with
    /// something below it is listed).
    async fn has_rows_below(
        &self,
        merged: &ObjectId,
        dir: &str,
        side: &SideEdit,
    ) -> Result<bool, DatasetError> {
        let prefix = format!("{dir}/");
        let child = |name: &str| name.strip_prefix(&prefix).is_some_and(|r| !r.contains('/'));
        let given = side.items.keys().chain(side.dirs.keys());
        if given.into_iter().any(|n| child(n)) {
            return Ok(true);
        }
        // The rows whose parent is `dir` are one run, from where `dir/`
        // (parent `dir`, an empty last segment) would be.
        let root = self.listed_root(merged, "a merge").await?;
        let mut j = root.page_of(&prefix).unwrap_or(0);
        while j < root.pages.len() {
            let page = self.name_pages(merged, &root, &[j]).await?.remove(0);
            let names = page.items.iter().map(|i| i.name.as_str());
            let names = names.chain(page.dirs.iter().map(|d| d.name.as_str()));
            let mut past = false;
            for name in names {
                if child(name) && !side.removed.contains(name) {
                    return Ok(true);
                }
                past |= name_order(name, &prefix).is_gt() && !child(name);
            }
            if past {
                return Ok(false);
            }
            j += 1;
        }
        Ok(false)
    }
}

impl SideEdit {
    /// The edit of the merged Track, and where its items from packs their
    /// side made start (stored apart where the Track holds such a pack
    /// cut another way); `new_packs` gives those packs' retired ranges.
    fn into_edit(self, new_packs: &HashMap<ObjectId, PackRecord>) -> (TrackEdit, usize) {
        let mut edit = TrackEdit {
            removed: self.removed.into_iter().collect(),
            ..TrackEdit::default()
        };
        let mut implied = BTreeSet::new();
        let (mut kept, mut fresh) = (Vec::new(), Vec::new());
        let mut retired = HashSet::new();
        for item in self.items.into_values() {
            let mut dir = item.name.as_str();
            while let Some((parent, _)) = dir.rsplit_once('/') {
                implied.insert(parent.to_string());
                dir = parent;
            }
            let made = matches!(item.entry.placement, Placement::Packed { .. })
                .then(|| new_packs.get(&item.entry.address))
                .flatten();
            match made {
                Some(record) => {
                    if retired.insert(record.address) {
                        edit.retired.extend(record.retired.iter().cloned());
                    }
                    fresh.push(item);
                }
                None => kept.push(item),
            }
        }
        edit.dirs = self
            .dirs
            .into_iter()
            .map(|(name, attrs)| TrackDir { name, attrs })
            .collect();
        let listed: HashSet<&str> = edit.dirs.iter().map(|d| d.name.as_str()).collect();
        edit.implied = implied
            .into_iter()
            .filter(|d| !listed.contains(d.as_str()))
            .collect();
        let at = kept.len();
        edit.items = kept;
        edit.items.extend(fresh);
        (edit, at)
    }
}
