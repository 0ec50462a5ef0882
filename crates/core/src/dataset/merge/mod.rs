//! Union merge of diverged Manifests (`docs/SEMANTICS.md`, "Branches and
//! merge").
//!
//! Given the Manifest a ref points at (*ours*) and one or more other tips
//! (*theirs*), the merge finds their lowest common ancestor and, per
//! (timeline, modality), applies every side's changes since that ancestor to
//! ours: items added, replaced or removed. Fragments are independent, so no
//! byte is merged; only Track entries move (but for a pack two sides cut
//! differently, whose later side's items are copied apart: `apart_from`).
//! The result is one Manifest whose parents are ours followed by theirs,
//! in order. Paged Tracks merge from the pages each side changed
//! (`paged.rs`); single-object Tracks, and the few cases `paged.rs` leaves,
//! merge whole here (`TrackMerge`).
//!
//! Choices of packfs's own (also in `docs/SEMANTICS.md`):
//! - A name changed on two sides to different entries is a *conflict*: ours
//!   (or the earlier branch) keeps the name, the later side's item stays
//!   under `<stem>.conflict-<short manifest id>[.<ext>]`, logged as a
//!   warning and recorded in the merge Manifest (`packfs log` shows it).
//! - A change wins over a removal: an item removed on one side and replaced
//!   on another is kept, with the replacement.
//! - A (timeline, modality) that exists on one side only is a new Track, not
//!   a schema divergence: it is kept. Only Fragment tracks merge; any other
//!   kind refuses the merge.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};

use packfs_format::{
    Attrs, FragmentEntry, Manifest, ObjectId, Placement, Track, TrackDir, TrackItem,
    TRACK_KIND_FRAGMENT,
};
use tracing::{info, warn};

use super::{Cuts, Dataset, DatasetError, TrackContent, TrackObject, TrackUpdate};
use crate::store::StoreError;

mod paged;

/// Manifests visited per tip while looking for the common ancestor: a
/// bound on the walk, so a deep history is refused, not walked for ever.
const MAX_ANCESTORS: usize = 1000;

/// What a merge found to do.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum MergePlan {
    /// Every other tip is already an ancestor of ours.
    UpToDate,
    /// Ours is an ancestor of the single other tip: move the ref there.
    FastForward(ObjectId),
    /// A new Manifest is needed, with these parents (ours first).
    Union { parents: Vec<ObjectId> },
}

/// A name both sides changed, and where the later side's item went.
pub use packfs_format::MergeConflict as Conflict;

/// Tracks of the merged Manifest and the conflicts met building them.
pub(crate) struct MergedTracks {
    pub tracks: Vec<TrackUpdate>,
    pub conflicts: Vec<Conflict>,
}

impl Dataset {
    /// Every Manifest reachable from `tip` through all parents, nearest
    /// first (breadth-first), `tip` included. Refuses histories deeper than
    /// [`MAX_ANCESTORS`] rather than walking them forever.
    async fn ancestors(&self, tip: ObjectId, cuts: &Cuts) -> Result<Vec<ObjectId>, DatasetError> {
        let mut order = Vec::new();
        let mut seen = HashSet::new();
        let mut queue = VecDeque::from([tip]);
        while let Some(id) = queue.pop_front() {
            if !seen.insert(id) {
                continue;
            }
            if order.len() == MAX_ANCESTORS {
                return Err(DatasetError::Merge(format!(
                    "the history of manifest {tip} is deeper than {MAX_ANCESTORS} manifests; \
                     no common ancestor was found within that bound"
                )));
            }
            order.push(id);
            let manifest = self.manifest(&id, &format!("the history of {tip}")).await?;
            queue.extend(cuts.parents(&id, &manifest));
        }
        Ok(order)
    }

    /// Decides how to merge `theirs` into `ours`, and the common ancestor
    /// of all of them (`None` for unrelated histories).
    pub(crate) async fn plan_merge(
        &self,
        ours: ObjectId,
        theirs: &[ObjectId],
    ) -> Result<(MergePlan, Option<ObjectId>), DatasetError> {
        let cuts = self.cuts().await?;
        let our_ancestors = self.ancestors(ours, &cuts).await?;
        let ours_set: HashSet<ObjectId> = our_ancestors.iter().copied().collect();
        let mut pending: Vec<ObjectId> = Vec::new();
        let mut their_sets = Vec::new();
        for &tip in theirs {
            if ours_set.contains(&tip) || pending.contains(&tip) {
                continue; // already merged, or named twice
            }
            let ancestors = self.ancestors(tip, &cuts).await?;
            their_sets.push(ancestors.iter().copied().collect::<HashSet<_>>());
            pending.push(tip);
        }
        if pending.is_empty() {
            return Ok((MergePlan::UpToDate, Some(ours)));
        }
        if let [tip] = pending[..] {
            if their_sets[0].contains(&ours) {
                return Ok((MergePlan::FastForward(tip), Some(ours)));
            }
        }
        let lca = our_ancestors
            .into_iter()
            .find(|id| their_sets.iter().all(|set| set.contains(id)));
        let mut parents = vec![ours];
        parents.extend(pending);
        Ok((MergePlan::Union { parents }, lca))
    }

    /// The Tracks of the union of `parents` (ours first) since `base`.
    pub(crate) async fn merge_tracks(
        &self,
        parents: &[ObjectId],
        base: Option<ObjectId>,
    ) -> Result<MergedTracks, DatasetError> {
        let mut manifests = Vec::with_capacity(parents.len());
        for id in parents {
            manifests.push(self.manifest(id, "a merge").await?);
        }
        let base_manifest = match base {
            Some(id) => Some(self.manifest(&id, "a merge (common ancestor)").await?),
            None => None,
        };
        for (id, m) in parents.iter().zip(&manifests) {
            refuse_other_kinds(*id, m)?;
        }
        if let (Some(id), Some(m)) = (base, &base_manifest) {
            refuse_other_kinds(id, m)?;
        }
        let track_of = |m: &Manifest| -> BTreeMap<(String, String), ObjectId> {
            m.tracks
                .iter()
                .map(|t| ((t.timeline.clone(), t.modality.clone()), t.track))
                .collect()
        };
        let base_tracks = base_manifest.as_ref().map(track_of).unwrap_or_default();
        let sides: Vec<_> = manifests.iter().map(track_of).collect();
        let keys: BTreeSet<(String, String)> =
            sides.iter().flat_map(|s| s.keys().cloned()).collect();

        let mut tracks = Vec::new();
        let mut conflicts = Vec::new();
        for key in keys {
            let base_id = base_tracks.get(&key).copied();
            // Sides that changed this Track since the base.
            let changed: Vec<usize> = (0..sides.len())
                .filter(|&i| sides[i].get(&key).copied() != base_id)
                .collect();
            let content = match changed[..] {
                // Unchanged everywhere, or changed on one side only.
                [] => base_id.map(TrackContent::Existing),
                [i] => sides[i].get(&key).copied().map(TrackContent::Existing),
                _ => {
                    let (timeline, modality) = &key;
                    let at = (timeline.as_str(), modality.as_str());
                    let changed_sides: Vec<(Option<ObjectId>, ObjectId)> = changed
                        .iter()
                        .map(|&i| (sides[i].get(&key).copied(), parents[i]))
                        .collect();
                    if let Some((id, found)) = self.merge_pages(at, base_id, &changed_sides).await?
                    {
                        for (manifest, name, renamed_to) in found {
                            conflicts.push(conflict(at, name, renamed_to, &manifest));
                        }
                        tracks.push(TrackUpdate {
                            timeline: key.0,
                            modality: key.1,
                            content: TrackContent::Existing(id),
                        });
                        continue;
                    }
                    let what = format!("track {timeline}/{modality}");
                    let base_track = match base_id {
                        Some(id) => Some(self.track(&id, "a merge (common ancestor)").await?),
                        None => None,
                    };
                    let mut merged = TrackMerge::new(base_track.as_ref());
                    for &i in &changed {
                        let track = match sides[i].get(&key) {
                            Some(id) => {
                                let side = self.track(id, "a merge").await?;
                                let at = (timeline.as_str(), modality.as_str());
                                Some(self.apart_from(at, &merged.entries, side, &what).await?)
                            }
                            None => None,
                        };
                        for (name, renamed_to) in merged.apply(track.as_ref(), &parents[i]) {
                            conflicts.push(conflict(at, name, renamed_to, &parents[i]));
                        }
                    }
                    Some(TrackContent::New(merged.finish(&what)?))
                }
            };
            if let Some(content) = content {
                tracks.push(TrackUpdate {
                    timeline: key.0,
                    modality: key.1,
                    content,
                });
            }
        }
        Ok(MergedTracks { tracks, conflicts })
    }
}

impl Dataset {
    /// The union merge of one Track from paged Tracks, reading the pages
    /// each changed side does not share with the common ancestor `base`:
    /// `sides` are the changed sides' Tracks (`None`: removed there) with
    /// their Manifests, ours first. Gives the stored Track and the
    /// conflicts as (Manifest, name, where its item went); `None` when a
    /// Track is a single object or missing on a side, when there is no
    /// ancestor, or when a side brings back a pack the merged Track lost:
    /// the whole-Track merge takes those.
    async fn merge_pages(
        &self,
        at: (&str, &str),
        base: Option<ObjectId>,
        sides: &[(Option<ObjectId>, ObjectId)],
    ) -> Result<Option<MergedPages>, DatasetError> {
        let Some(base) = base else {
            return Ok(None);
        };
        let mut tracks = Vec::with_capacity(sides.len());
        for (track, _) in sides {
            let Some(track) = track else {
                return Ok(None);
            };
            tracks.push(*track);
        }
        // Every root, fetched once: any single object leaves the merge to
        // whole Tracks before anything is stored.
        let mut roots = Vec::with_capacity(tracks.len() + 1);
        for track in [&base].into_iter().chain(&tracks) {
            match self.track_object_unindexed(track, "a merge").await? {
                TrackObject::Paged(root) => roots.push(root),
                TrackObject::Single(_) => return Ok(None),
            }
        }
        let base_root = roots.remove(0);
        let mut merged = tracks[0];
        let mut found = Vec::new();
        let later = tracks.iter().zip(roots).zip(sides).skip(1);
        for ((track, root), (_, manifest)) in later {
            let delta = self
                .delta((&base, base_root.clone()), (track, root), "a merge")
                .await?;
            let Some((next, conflicts)) = self.merge_side(at, &merged, delta, manifest).await?
            else {
                return Ok(None);
            };
            merged = next;
            found.extend(conflicts.into_iter().map(|(n, r)| (*manifest, n, r)));
        }
        Ok(Some((merged, found)))
    }

    /// `side` as a Track merge can take it beside the `entries` it holds
    /// so far, which tile each of their packs: a pack that a side holds
    /// cut another way (the same bytes packed from other files) cannot be
    /// in one Track. The side's items in such a pack are
    /// stored apart ([`Dataset::separate_twin_packs`]), and its retired
    /// entries of a pack `entries` tile are dropped unless they are the
    /// same ranges (those entries keep the pack whole). A side that cuts
    /// no pack another way is returned as it is.
    async fn apart_from(
        &self,
        (timeline, modality): (&str, &str),
        entries: &[FragmentEntry],
        side: Track,
        what: &str,
    ) -> Result<Track, DatasetError> {
        let mut cuts: HashMap<ObjectId, HashSet<(u64, u64)>> = HashMap::new();
        for e in entries {
            if let Placement::Packed { offset } = e.placement {
                cuts.entry(e.address)
                    .or_default()
                    .insert((offset, e.byte_size));
            }
        }
        let cut_otherwise = |e: &FragmentEntry| match e.placement {
            Placement::Packed { offset } => cuts
                .get(&e.address)
                .is_some_and(|cut| !cut.contains(&(offset, e.byte_size))),
            _ => false,
        };
        let live = side.items().iter().map(|i| &i.entry);
        if !live.chain(side.retired()).any(cut_otherwise) {
            return Ok(side);
        }
        let dirs = side.dirs().to_vec();
        let (mut items, mut retired) = side.remove_items(|_| false);
        retired.retain(|e| !cut_otherwise(e));
        self.separate_twin_packs(timeline, modality, entries, &mut items)
            .await?;
        Ok(Track::new(items, retired, what)?.with_dirs(dirs, what)?)
    }
}

/// What [`Dataset::merge_refs`] did.
#[derive(Debug)]
pub struct MergeReport {
    /// The Manifest the ref now points at.
    pub manifest: ObjectId,
    pub outcome: MergeOutcome,
    pub conflicts: Vec<Conflict>,
}

/// How a merge moved the ref.
#[derive(Debug, PartialEq, Eq)]
pub enum MergeOutcome {
    UpToDate,
    FastForward,
    /// A new Manifest with this many parents.
    Merged {
        parents: usize,
    },
}

impl Dataset {
    /// Merges the Manifests `branches` name (refs, or any [`super::Revision`])
    /// into the ref `into` and moves it by compare-and-swap; retried from
    /// the start if `into` moves meanwhile. Branch refs are left where they
    /// are.
    pub async fn merge_refs(
        &self,
        into: &str,
        branches: &[String],
        writer: &str,
    ) -> Result<MergeReport, DatasetError> {
        let mut tips = Vec::with_capacity(branches.len());
        for branch in branches {
            tips.push(self.resolve_revision(&branch.parse()?).await?.id);
        }
        let mut attempt = 1;
        loop {
            let ours = self.resolve(into).await?;
            let result = self.merge_into(into, ours, &tips, writer).await;
            match result {
                Err(DatasetError::Store(StoreError::RefConflict { .. }))
                    if attempt < super::MAX_COMMIT_ATTEMPTS =>
                {
                    info!("ref {into} moved during the merge; merging again (attempt {attempt})");
                    attempt += 1;
                }
                result => return result,
            }
        }
    }

    /// Merges `theirs` into `ours`, the current Manifest of `into`.
    pub async fn merge_into(
        &self,
        into: &str,
        ours: ObjectId,
        theirs: &[ObjectId],
        writer: &str,
    ) -> Result<MergeReport, DatasetError> {
        let (plan, base) = self.plan_merge(ours, theirs).await?;
        let (manifest, outcome, conflicts) = match plan {
            MergePlan::UpToDate => (ours, MergeOutcome::UpToDate, Vec::new()),
            MergePlan::FastForward(tip) => {
                self.store.update_ref(into, Some(ours), tip).await?;
                (tip, MergeOutcome::FastForward, Vec::new())
            }
            MergePlan::Union { parents } => {
                let merged = self.merge_tracks(&parents, base).await?;
                let n = parents.len();
                let commit = super::Commit {
                    parents,
                    tracks: merged.tracks,
                    conflicts: &merged.conflicts,
                    writer,
                };
                let id = self.commit_manifest(into, Some(ours), commit).await?;
                (id, MergeOutcome::Merged { parents: n }, merged.conflicts)
            }
        };
        Ok(MergeReport {
            manifest,
            outcome,
            conflicts,
        })
    }

    /// The conflicts the merge Manifest `id` records (none for other
    /// Manifests, and for merges made before packfs recorded them).
    pub async fn conflicts_of(&self, id: &ObjectId) -> Result<Vec<Conflict>, DatasetError> {
        let path = self.store.layout().manifest(id);
        let bytes = self.fetch(&path, "manifest", id, "packfs log").await?;
        let what = format!("manifest {path}");
        Ok(Manifest::decode_with_conflicts(&bytes, &what)?.1)
    }

    /// Creates the ref `name` at the Manifest `from` names (a ref, or any
    /// [`super::Revision`]); an error if `name` exists already.
    pub async fn create_branch(&self, name: &str, from: &str) -> Result<ObjectId, DatasetError> {
        packfs_format::validate_ref_name(name)?;
        let id = self.resolve_revision(&from.parse()?).await?.id;
        match self.store.update_ref(name, None, id).await {
            Err(StoreError::RefConflict { .. }) => Err(DatasetError::Merge(format!(
                "ref {name:?} already exists in dataset {}",
                self.store.location()
            ))),
            r => Ok(r.map(|()| id)?),
        }
    }
}

/// A Track merged from pages: its id, and the conflicts met as
/// (Manifest, name, where its item went).
type MergedPages = (ObjectId, Vec<(ObjectId, String, String)>);

/// A conflict in the Track `at`, logged: `name` changed on two sides, the
/// item of Manifest `manifest` kept as `renamed_to`.
fn conflict(
    (timeline, modality): (&str, &str),
    name: String,
    renamed_to: String,
    manifest: &ObjectId,
) -> Conflict {
    warn!(
        "merge conflict in {timeline}/{modality}: {name:?} was changed on both sides; \
         the version of manifest {} is kept as {renamed_to:?}",
        manifest.short()
    );
    Conflict {
        timeline: timeline.to_string(),
        modality: modality.to_string(),
        name,
        renamed_to,
    }
}

fn refuse_other_kinds(id: ObjectId, manifest: &Manifest) -> Result<(), DatasetError> {
    match manifest
        .tracks
        .iter()
        .find(|t| t.kind != TRACK_KIND_FRAGMENT)
    {
        Some(t) => Err(DatasetError::UnsupportedTrackKind {
            id,
            timeline: t.timeline.clone(),
            modality: t.modality.clone(),
            kind: t.kind.clone(),
        }),
        None => Ok(()),
    }
}

/// A three-way merge of one Track, one side at a time.
struct TrackMerge {
    /// What each item of the base is: its entry and attributes.
    base: HashMap<String, (FragmentEntry, Attrs)>,
    /// Directories the base records, and the merged ones so far.
    base_dirs: HashMap<String, Attrs>,
    dirs: BTreeMap<String, Attrs>,
    /// The merged items so far, by name; the first side starts it.
    items: BTreeMap<String, TrackItem>,
    /// Every entry seen, for the packs' sake: `Track::new` keeps one of each
    /// still needed as a retired entry.
    entries: Vec<FragmentEntry>,
}

impl TrackMerge {
    fn new(base: Option<&Track>) -> Self {
        let items = base.map(Track::items).unwrap_or_default();
        let base_dirs: HashMap<String, Attrs> = base
            .map(Track::dirs)
            .unwrap_or_default()
            .iter()
            .map(|d| (d.name.clone(), d.attrs))
            .collect();
        TrackMerge {
            base: items.iter().map(|i| (i.name.clone(), version(i))).collect(),
            dirs: base_dirs.iter().map(|(n, a)| (n.clone(), *a)).collect(),
            base_dirs,
            items: items.iter().map(|i| (i.name.clone(), i.clone())).collect(),
            entries: items
                .iter()
                .map(|i| i.entry.clone())
                .chain(base.map(Track::retired).unwrap_or_default().iter().cloned())
                .collect(),
        }
    }

    /// Applies one side's changes since the base (`None`: the side has no
    /// such Track). Returns the conflicts as (name, where the side's item went).
    fn apply(&mut self, side: Option<&Track>, manifest: &ObjectId) -> Vec<(String, String)> {
        let empty = [];
        let side_items = side.map_or(&empty[..], Track::items);
        self.entries
            .extend(side.map(Track::retired).unwrap_or_default().iter().cloned());
        self.entries
            .extend(side_items.iter().map(|i| i.entry.clone()));
        let present: HashSet<&str> = side_items.iter().map(|i| i.name.as_str()).collect();
        // Removed on this side: drop it unless another side changed it.
        let removed: Vec<String> = self
            .base
            .keys()
            .filter(|name| !present.contains(name.as_str()))
            .cloned()
            .collect();
        for name in removed {
            if self.items.get(&name).map(version).as_ref() == self.base.get(&name) {
                self.items.remove(&name);
            }
        }
        self.apply_dirs(side);
        let mut conflicts = Vec::new();
        for item in side_items {
            let base = self.base.get(&item.name);
            if base == Some(&version(item)) {
                continue; // unchanged on this side
            }
            match self.items.get(&item.name) {
                Some(current) if version(current) == version(item) => {}
                // Untouched by earlier sides: this side's version.
                Some(current) if Some(&version(current)) == base => {
                    self.items.insert(item.name.clone(), item.clone());
                }
                None => {
                    self.items.insert(item.name.clone(), item.clone());
                }
                Some(_) => {
                    let renamed = self.free_name(&item.name, manifest);
                    let mut moved = item.clone();
                    moved.name = renamed.clone();
                    self.items.insert(renamed.clone(), moved);
                    conflicts.push((item.name.clone(), renamed));
                }
            }
        }
        conflicts
    }

    /// Applies one side's directory changes since the base: a directory
    /// it removed goes unless an earlier side changed it; one it added or
    /// changed takes its attributes.
    fn apply_dirs(&mut self, side: Option<&Track>) {
        let side_dirs: HashMap<&str, Attrs> = side
            .map(Track::dirs)
            .unwrap_or_default()
            .iter()
            .map(|d| (d.name.as_str(), d.attrs))
            .collect();
        for (name, attrs) in &self.base_dirs {
            if !side_dirs.contains_key(name.as_str()) && self.dirs.get(name) == Some(attrs) {
                self.dirs.remove(name);
            }
        }
        for (name, attrs) in side_dirs {
            if self.base_dirs.get(name) != Some(&attrs) {
                self.dirs.insert(name.to_string(), attrs);
            }
        }
    }

    /// The first of [`conflict_names`] not taken yet.
    fn free_name(&self, name: &str, manifest: &ObjectId) -> String {
        conflict_names(name, manifest)
            .find(|candidate| !self.items.contains_key(candidate))
            .expect("some suffix is free")
    }

    /// The merged Track: items in `t_start` order (the order of a union of
    /// Fragment tracks), ties by name.
    fn finish(self, what: &str) -> Result<Track, packfs_format::FormatError> {
        let mut items: Vec<TrackItem> = self.items.into_values().collect();
        items.sort_by(|a, b| (a.entry.t_start, &a.name).cmp(&(b.entry.t_start, &b.name)));
        let dirs = self
            .dirs
            .into_iter()
            .map(|(name, attrs)| TrackDir { name, attrs });
        Track::new(items, self.entries, what)?.with_dirs(dirs.collect(), what)
    }
}

/// The names a later side's item may take when `name` was changed on two
/// sides: `<stem>.conflict-<id>[-n][.<ext>]`, in the name's last path
/// segment, `id` the short id of the later side's Manifest; the first one
/// not taken is the one.
fn conflict_names(name: &str, manifest: &ObjectId) -> impl Iterator<Item = String> {
    let (dir, file) = match name.rsplit_once('/') {
        Some((dir, file)) => (format!("{dir}/"), file),
        None => (String::new(), name),
    };
    let (stem, ext) = match file.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() => (stem.to_string(), format!(".{ext}")),
        _ => (file.to_string(), String::new()),
    };
    let tag = manifest.short();
    (1..).map(move |n| match n {
        1 => format!("{dir}{stem}.conflict-{tag}{ext}"),
        n => format!("{dir}{stem}.conflict-{tag}-{n}{ext}"),
    })
}

/// What an item is, for telling whether a side changed it: its bytes
/// (entry) and its attributes.
fn version(item: &TrackItem) -> (FragmentEntry, Attrs) {
    (item.entry.clone(), item.attrs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use packfs_format::Placement;

    fn item(name: &str, content: u8, t: i64) -> TrackItem {
        TrackItem {
            name: name.into(),
            media_type: "application/octet-stream".into(),
            attrs: Default::default(),
            entry: FragmentEntry {
                t_start: t,
                t_end: t + 1,
                byte_size: 1,
                address: ObjectId::of(&[content]),
                placement: Placement::Whole,
            },
        }
    }

    fn track(items: Vec<TrackItem>) -> Track {
        Track::new(items, Vec::new(), "test").unwrap()
    }

    fn names_and_content(t: &Track) -> Vec<(String, ObjectId)> {
        let mut v: Vec<_> = t
            .items()
            .iter()
            .map(|i| (i.name.clone(), i.entry.address))
            .collect();
        v.sort();
        v
    }

    fn id(n: u8) -> ObjectId {
        ObjectId::of(&[0xee, n])
    }

    #[test]
    fn a_chmod_and_a_new_directory_on_one_side_survive_the_merge() {
        let dir = |name: &str, mode| TrackDir {
            name: name.into(),
            attrs: Attrs {
                mode,
                mtime_ns: None,
            },
        };
        let base = track(vec![item("a", 1, 0), item("b", 2, 1)])
            .with_dirs(vec![dir("gone", None), dir("kept", None)], "base")
            .unwrap();
        // Ours chmods a and removes the directory "gone"; theirs adds c
        // and an empty directory.
        let mut a = item("a", 1, 0);
        a.attrs.mode = Some(0o600);
        let ours = track(vec![a, item("b", 2, 1)])
            .with_dirs(vec![dir("kept", None)], "ours")
            .unwrap();
        let theirs = track(vec![item("a", 1, 0), item("b", 2, 1), item("c", 3, 2)])
            .with_dirs(
                vec![
                    dir("gone", None),
                    dir("kept", None),
                    dir("new", Some(0o700)),
                ],
                "theirs",
            )
            .unwrap();
        let mut m = TrackMerge::new(Some(&base));
        assert!(m.apply(Some(&ours), &id(0)).is_empty());
        assert!(m.apply(Some(&theirs), &id(1)).is_empty());
        let merged = m.finish("test").unwrap();
        let a = merged.items().iter().find(|i| i.name == "a").unwrap();
        assert_eq!(a.attrs.mode, Some(0o600));
        assert_eq!(merged.items().len(), 3);
        let dirs: Vec<_> = merged.dirs().iter().map(|d| d.name.as_str()).collect();
        assert_eq!(dirs, ["kept", "new"]);
    }

    #[test]
    fn three_way_union_applies_each_sides_changes() {
        let base = track(vec![item("a", 1, 0), item("b", 2, 1), item("c", 3, 2)]);
        // Ours removes b and adds d; theirs replaces c and adds e.
        let ours = track(vec![item("a", 1, 0), item("c", 3, 2), item("d", 4, 3)]);
        let theirs = track(vec![
            item("a", 1, 0),
            item("b", 2, 1),
            item("c", 9, 3),
            item("e", 5, 4),
        ]);
        let mut m = TrackMerge::new(Some(&base));
        assert!(m.apply(Some(&ours), &id(0)).is_empty());
        assert!(m.apply(Some(&theirs), &id(1)).is_empty());
        let merged = m.finish("test").unwrap();
        let expect = track(vec![
            item("a", 1, 0),
            item("c", 9, 3),
            item("d", 4, 3),
            item("e", 5, 4),
        ]);
        assert_eq!(names_and_content(&merged), names_and_content(&expect));
        let t: Vec<i64> = merged.items().iter().map(|i| i.entry.t_start).collect();
        assert!(
            t.windows(2).all(|w| w[0] <= w[1]),
            "sorted by t_start: {t:?}"
        );
    }

    #[test]
    fn a_name_changed_on_two_sides_keeps_both_and_ours_wins() {
        let base = track(vec![item("x/cat.jpg", 1, 0)]);
        let ours = track(vec![item("x/cat.jpg", 2, 1)]);
        let theirs = track(vec![item("x/cat.jpg", 3, 1), item("noext", 7, 2)]);
        let later = track(vec![item("x/cat.jpg", 4, 1), item("noext", 8, 2)]);
        let mut m = TrackMerge::new(Some(&base));
        m.apply(Some(&ours), &id(0));
        let c1 = m.apply(Some(&theirs), &id(1));
        let c2 = m.apply(Some(&later), &id(2));
        let tag = |n: u8| id(n).short();
        assert_eq!(
            c1,
            vec![(
                "x/cat.jpg".to_string(),
                format!("x/cat.conflict-{}.jpg", tag(1))
            )]
        );
        assert_eq!(c2.len(), 2);
        assert!(c2.contains(&("noext".to_string(), format!("noext.conflict-{}", tag(2)))));
        let merged = m.finish("test").unwrap();
        let get = |name: &str| {
            merged
                .items()
                .iter()
                .find(|i| i.name == name)
                .map(|i| i.entry.address)
        };
        assert_eq!(get("x/cat.jpg"), Some(ObjectId::of(&[2])));
        assert_eq!(
            get(&format!("x/cat.conflict-{}.jpg", tag(1))),
            Some(ObjectId::of(&[3]))
        );
        assert_eq!(
            get(&format!("x/cat.conflict-{}.jpg", tag(2))),
            Some(ObjectId::of(&[4]))
        );
        assert_eq!(get("noext"), Some(ObjectId::of(&[7])));
    }

    #[test]
    fn a_change_wins_over_a_removal_in_either_order() {
        let base = track(vec![item("a", 1, 0), item("b", 2, 1)]);
        let removes = track(vec![item("b", 2, 1)]);
        let changes = track(vec![item("a", 5, 2), item("b", 2, 1)]);
        for order in [[&removes, &changes], [&changes, &removes]] {
            let mut m = TrackMerge::new(Some(&base));
            for (i, side) in order.into_iter().enumerate() {
                assert!(m.apply(Some(side), &id(i as u8)).is_empty());
            }
            let merged = m.finish("test").unwrap();
            assert_eq!(
                names_and_content(&merged),
                vec![
                    ("a".to_string(), ObjectId::of(&[5])),
                    ("b".to_string(), ObjectId::of(&[2]))
                ]
            );
        }
    }

    #[test]
    fn removed_packed_items_stay_as_retired_entries_while_their_pack_lives() {
        let pack = ObjectId::of(b"pack");
        let packed = |name: &str, offset: u64, t: i64| TrackItem {
            name: name.into(),
            media_type: "application/octet-stream".into(),
            attrs: Default::default(),
            entry: FragmentEntry {
                t_start: t,
                t_end: t + 1,
                byte_size: 10,
                address: pack,
                placement: Placement::Packed { offset },
            },
        };
        let base = track(vec![packed("p0", 0, 0), packed("p1", 10, 1)]);
        let ours = track(vec![
            packed("p0", 0, 0),
            packed("p1", 10, 1),
            item("n", 1, 2),
        ]);
        let (kept, retired) = base.clone().remove_items(|i| i.name == "p1");
        let theirs = Track::new(kept, retired, "theirs").unwrap();
        let mut m = TrackMerge::new(Some(&base));
        m.apply(Some(&ours), &id(0));
        m.apply(Some(&theirs), &id(1));
        let merged = m.finish("test").unwrap();
        assert_eq!(merged.items().len(), 2);
        assert_eq!(merged.retired().len(), 1);
        assert_eq!(merged.pack_len(&pack), Some(20));
    }
}
