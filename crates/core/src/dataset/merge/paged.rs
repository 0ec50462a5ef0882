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
use super::super::{shared_ids, Dataset, DatasetError};
use super::{conflict_names, version};

/// What one side changed since the common ancestor.
pub(super) struct Delta {
    /// Items it added, removed or replaced, by name (bytewise).
    items: Vec<Change>,
    /// Directories listed otherwise: the name, the ancestor's attributes
    /// and the side's (`None`: not listed).
    dirs: Vec<(String, Option<Attrs>, Option<Attrs>)>,
    /// Records of the packs the side has and the ancestor has not.
    new_packs: HashMap<ObjectId, PackRecord>,
}

/// One item a side changed.
enum Change {
    Added(TrackItem),
    Removed(TrackItem),
    /// Another version: the ancestor's, and the side's.
    Replaced(Box<TrackItem>, TrackItem),
}

impl Change {
    fn name(&self) -> &str {
        match self {
            Change::Added(i) | Change::Removed(i) | Change::Replaced(_, i) => &i.name,
        }
    }
}

/// Items and directories of a Track looked up by name.
#[derive(Default)]
pub(super) struct Rows {
    pub(super) items: HashMap<String, TrackItem>,
    pub(super) dirs: HashMap<String, Attrs>,
}

impl Dataset {
    /// What the paged Track `side` changed since the paged Track `base`,
    /// each given with its root as fetched (index pages not read),
    /// reading the pages they do not share.
    pub(super) async fn delta(
        &self,
        (base, mut a): (&ObjectId, TrackRoot),
        (side, mut b): (&ObjectId, TrackRoot),
        referrer: &str,
    ) -> Result<Delta, DatasetError> {
        let index = shared_ids(a.index.iter().map(|p| p.id), b.index.iter().map(|p| p.id));
        self.list_unshared(&mut a, &index, referrer).await?;
        self.list_unshared(&mut b, &index, referrer).await?;
        let names = shared_ids(a.pages.iter().map(|p| p.id), b.pages.iter().map(|p| p.id));
        let packs = shared_ids(
            a.pack_pages.iter().map(|p| p.id),
            b.pack_pages.iter().map(|p| p.id),
        );
        let before = self.unshared_pages(base, &a, &names, &packs).await?;
        let after = self.unshared_pages(side, &b, &names, &packs).await?;
        let layout = self.store().layout().clone();
        let what = move |id: &ObjectId| format!("page {}", layout.page(id));
        let diff = move || Delta::between((&a, before), (&b, after), &what);
        tokio::task::spawn_blocking(diff)
            .await
            .expect("page decode panicked")
    }

    /// The bytes of the name and pack pages of the Track `id` (its root
    /// `root`, listed) not in `names` and `packs`.
    async fn unshared_pages(
        &self,
        id: &ObjectId,
        root: &TrackRoot,
        names: &HashSet<ObjectId>,
        packs: &HashSet<ObjectId>,
    ) -> Result<Unshared, DatasetError> {
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
        let ids = name_pages.iter().map(|&j| root.pages[j].id).collect();
        let name_bytes = self.pages(ids, &referrer).await?;
        let pack_bytes = self.pages(pack_pages.clone(), &referrer).await?;
        Ok(Unshared {
            names: name_pages.into_iter().zip(name_bytes).collect(),
            packs: pack_pages.into_iter().zip(pack_bytes).collect(),
        })
    }
}

/// Pages of a Track that another does not share: name pages by their
/// index in the root, pack pages by id.
struct Unshared {
    names: Vec<(usize, bytes::Bytes)>,
    packs: Vec<(ObjectId, bytes::Bytes)>,
}

impl Delta {
    /// The changes from the Track `before` to the Track `after`, each a
    /// root and the pages it does not share with the other: a row on a
    /// page both share is on it, the same, in both. The side's pages are
    /// decoded one at a time, so only the changes are held.
    fn between(
        (base, before): (&TrackRoot, Unshared),
        (side, after): (&TrackRoot, Unshared),
        what: &dyn Fn(&ObjectId) -> String,
    ) -> Result<Delta, DatasetError> {
        let mut items: HashMap<String, TrackItem> = HashMap::new();
        let mut dirs: HashMap<String, Attrs> = HashMap::new();
        for (j, bytes) in &before.names {
            let page = base.name_page(*j, bytes, &what(&base.pages[*j].id))?;
            items.extend(page.items.into_iter().map(|i| (i.name.clone(), i)));
            dirs.extend(page.dirs.into_iter().map(|d| (d.name, d.attrs)));
        }
        let mut delta = Delta {
            items: Vec::new(),
            dirs: Vec::new(),
            new_packs: HashMap::new(),
        };
        for (j, bytes) in &after.names {
            let page = side.name_page(*j, bytes, &what(&side.pages[*j].id))?;
            for item in page.items {
                match items.remove(&item.name) {
                    None => delta.items.push(Change::Added(item)),
                    Some(old) if version(&old) == version(&item) => {}
                    Some(old) => delta.items.push(Change::Replaced(Box::new(old), item)),
                }
            }
            for d in page.dirs {
                let old = dirs.remove(&d.name);
                if old != Some(d.attrs) {
                    delta.dirs.push((d.name, old, Some(d.attrs)));
                }
            }
        }
        delta.items.extend(items.into_values().map(Change::Removed));
        delta.items.sort_unstable_by(|a, b| a.name().cmp(b.name()));
        delta
            .dirs
            .extend(dirs.into_iter().map(|(n, a)| (n, Some(a), None)));
        delta.dirs.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let mut recorded = HashSet::new();
        for (id, bytes) in &before.packs {
            recorded.extend(
                read_pack_page(bytes, &what(id))?
                    .into_iter()
                    .map(|r| r.address),
            );
        }
        for (id, bytes) in &after.packs {
            let records = read_pack_page(bytes, &what(id))?;
            let new = records
                .into_iter()
                .filter(|r| !recorded.contains(&r.address));
            delta.new_packs.extend(new.map(|r| (r.address, r)));
        }
        Ok(delta)
    }
}

/// One side's changes weighed against the merged Track so far.
#[derive(Default)]
struct SideEdit {
    /// Items it gives (replacing those of their names), and those of them
    /// packed in packs the side made.
    kept: Vec<TrackItem>,
    fresh: Vec<TrackItem>,
    /// Names it gives that a conflict name could take.
    given_conflict_names: HashSet<String>,
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
        let names = items.iter().map(Change::name);
        let names: Vec<&str> = names.chain(dirs.iter().map(|d| d.0.as_str())).collect();
        let current = self.track_rows(merged, &names, "a merge").await?;
        drop(names);
        let mut side = SideEdit::default();
        let mut clashes = Vec::new();
        for change in items {
            let now = current.items.get(change.name());
            let (base, theirs) = match change {
                Change::Added(item) => (None, Some(item)),
                Change::Removed(item) => (Some(item), None),
                Change::Replaced(base, item) => (Some(*base), Some(item)),
            };
            let base = base.as_ref().map(version);
            match theirs {
                // Removed on this side: gone unless another side changed it.
                None => {
                    if let Some(now) = now.filter(|now| Some(version(now)) == base) {
                        side.removed.insert(now.name.clone());
                    }
                }
                Some(item) => match now {
                    Some(c) if version(c) == version(&item) => {}
                    Some(c) if Some(version(c)) != base => clashes.push(item),
                    // Untouched by earlier sides, or removed there: a
                    // change wins over a removal.
                    _ => side.give(item, &new_packs),
                },
            }
        }
        for (name, base, theirs) in dirs {
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
            side.give(item, &new_packs);
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
        let on: Vec<usize> = names.iter().filter_map(|n| root.page_of(n)).collect();
        let wanted: HashSet<&str> = names.iter().copied().collect();
        let mut rows = Rows::default();
        for page in self.name_pages(id, &root, on).await? {
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
            if side.given_conflict_names.contains(&candidate) {
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
        // Anything the side gives below it lists the directories between.
        let items = side.kept.iter().chain(&side.fresh).map(|i| &i.name);
        if items
            .chain(side.dirs.keys())
            .any(|n| n.starts_with(&prefix))
        {
            return Ok(true);
        }
        // The rows whose parent is `dir` are one run, from where `dir/`
        // (parent `dir`, an empty last segment) would be.
        let root = self.listed_root(merged, "a merge").await?;
        let mut j = root.page_of(&prefix).unwrap_or(0);
        while j < root.pages.len() {
            let page = self.name_pages(merged, &root, vec![j]).await?.remove(0);
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
    /// Gives `item`: among the fresh ones if it is packed in a pack the
    /// side made (`new_packs`).
    fn give(&mut self, item: TrackItem, new_packs: &HashMap<ObjectId, PackRecord>) {
        if item.name.contains(".conflict-") {
            self.given_conflict_names.insert(item.name.clone());
        }
        let made = matches!(item.entry.placement, Placement::Packed { .. })
            && new_packs.contains_key(&item.entry.address);
        match made {
            true => self.fresh.push(item),
            false => self.kept.push(item),
        }
    }

    /// The edit of the merged Track, and where its items from packs their
    /// side made start (stored apart where the Track holds such a pack
    /// cut another way); `new_packs` gives those packs' retired ranges.
    fn into_edit(self, new_packs: &HashMap<ObjectId, PackRecord>) -> (TrackEdit, usize) {
        let mut implied: BTreeSet<String> = BTreeSet::new();
        for item in self.kept.iter().chain(&self.fresh) {
            let mut dir = item.name.as_str();
            while let Some((parent, _)) = dir.rsplit_once('/') {
                if !implied.contains(parent) {
                    implied.insert(parent.to_string());
                }
                dir = parent;
            }
        }
        let packs: HashSet<ObjectId> = self.fresh.iter().map(|i| i.entry.address).collect();
        let retired = packs.iter().filter_map(|p| new_packs.get(p));
        let retired = retired.flat_map(|r| r.retired.iter().cloned()).collect();
        let dirs: Vec<TrackDir> = self
            .dirs
            .into_iter()
            .map(|(name, attrs)| TrackDir { name, attrs })
            .collect();
        let listed: HashSet<&str> = dirs.iter().map(|d| d.name.as_str()).collect();
        let implied = implied
            .into_iter()
            .filter(|d| !listed.contains(d.as_str()))
            .collect();
        let at = self.kept.len();
        let mut items = self.kept;
        items.extend(self.fresh);
        let edit = TrackEdit {
            removed: self.removed.into_iter().collect(),
            items,
            dirs,
            implied,
            retired,
            ..TrackEdit::default()
        };
        (edit, at)
    }
}
