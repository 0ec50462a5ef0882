//! The union merge over paged Tracks: it reads the pages the branches
//! changed, not the Tracks (counted), and gives what the same merge over
//! single-object Tracks gives, over random branches (removals, changes,
//! additions in new packs with ranges removed from them, names two
//! branches changed, directories chmod'ed and emptied).

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use object_store::memory::InMemory;
use packfs_core::dataset::{Dataset, TrackContent, TrackUpdate};
use packfs_core::store::faults::{Faults, FaultyStore};
use packfs_core::store::Store;
use packfs_format::{
    Attrs, FragmentEntry, Manifest, ObjectId, PageShape, Placement, Track, TrackDir, TrackItem,
};

use crate::common::Rng;

/// A dataset in memory, its Tracks cut in pages of 4 rows under index
/// pages of 4 pages, and the store's counters.
fn dataset() -> (Dataset, Arc<Faults>) {
    let faults = Arc::new(Faults::default());
    let store = FaultyStore::new(Arc::new(InMemory::new()), faults.clone());
    let store = Store::from_object_store(Arc::new(store), Default::default(), "memory://merge");
    let shape = PageShape::with_rows(4).with_index_pages(4);
    (Dataset::from_store(store).with_page_shape(shape), faults)
}

/// An item of its own object.
fn whole(name: &str, content: &str, t: i64) -> TrackItem {
    item(
        name,
        FragmentEntry {
            t_start: t,
            t_end: t + 1,
            byte_size: 1 + content.len() as u64,
            address: ObjectId::of(content.as_bytes()),
            placement: Placement::Whole,
        },
    )
}

fn item(name: &str, entry: FragmentEntry) -> TrackItem {
    TrackItem {
        name: name.into(),
        media_type: "application/octet-stream".into(),
        attrs: Attrs::default(),
        entry,
    }
}

/// `names` packed one after another in pack `pack`, numbered from `t`;
/// the entries of those `gone` says are retired, not items.
fn packed(
    names: &[String],
    pack: &str,
    t: i64,
    gone: impl Fn(usize) -> bool,
) -> (Vec<TrackItem>, Vec<FragmentEntry>) {
    let (mut items, mut retired) = (Vec::new(), Vec::new());
    let mut offset = 0;
    for (i, name) in names.iter().enumerate() {
        let entry = FragmentEntry {
            t_start: t + i as i64,
            t_end: t + i as i64 + 1,
            byte_size: 3 + i as u64,
            address: ObjectId::of(pack.as_bytes()),
            placement: Placement::Packed { offset },
        };
        offset += entry.byte_size;
        match gone(i) {
            true => retired.push(entry),
            false => items.push(item(name, entry)),
        }
    }
    (items, retired)
}

fn dir(name: &str, mode: u16) -> TrackDir {
    TrackDir {
        name: name.into(),
        attrs: Attrs {
            mode: Some(mode),
            mtime_ns: None,
        },
    }
}

/// The ancestor: `dirs` directories of `per_dir` items, in packs of 3,
/// and two directories with a mode.
fn base(dirs: usize, per_dir: usize) -> Track {
    let names: Vec<String> = (0..dirs * per_dir)
        .map(|i| format!("d{}/f{:03}", i / per_dir, i % per_dir))
        .collect();
    let (mut items, mut retired) = (Vec::new(), Vec::new());
    for (k, chunk) in names.chunks(3).enumerate() {
        let (i, r) = packed(chunk, &format!("base pack {k}"), 3 * k as i64, |_| false);
        items.extend(i);
        retired.extend(r);
    }
    Track::new(items, retired, "base")
        .unwrap()
        .with_dirs(vec![dir("d0", 0o700), dir("d1", 0o750)], "base")
        .unwrap()
}

/// A branch of `base`, changed at random: items removed and changed,
/// items added in packs of its own (some with a range removed), a name
/// other branches also add, a directory chmod'ed, one emptied.
fn branch(base: &Track, side: usize, rng: &mut Rng, dirs: usize) -> Track {
    let t0 = 1_000_000 * (side as i64 + 1);
    let gone_dir = format!("d{}/", rng.below(dirs as u64));
    let mut items = Vec::new();
    let mut removed = Vec::new();
    for (i, it) in base.items().iter().enumerate() {
        let roll = rng.below(20);
        if it.name.starts_with(&gone_dir) && side == 1 || roll == 0 {
            removed.push(it.name.clone());
        } else if roll == 1 {
            items.push(whole(
                &it.name,
                &format!("{side} changed {i}"),
                t0 + i as i64,
            ));
        } else if roll == 2 {
            let mut chmod = it.clone();
            chmod.attrs.mode = Some(0o600);
            items.push(chmod);
        } else {
            items.push(it.clone());
        }
    }
    // A removed item's range stays in its pack, retired.
    let mut retired = base.retired().to_vec();
    for name in &removed {
        let it = base.items().iter().find(|i| &i.name == name).unwrap();
        if matches!(it.entry.placement, Placement::Packed { .. }) {
            retired.push(it.entry.clone());
        }
    }
    // A changed item's old range too, unless it is only chmod'ed.
    for it in base.items() {
        let now = items.iter().find(|i: &&TrackItem| i.name == it.name);
        if now.is_some_and(|now| now.entry != it.entry) {
            retired.push(it.entry.clone());
        }
    }
    let new_dir = format!("new{}", rng.below(3));
    let names: Vec<String> = (0..1 + rng.below(6))
        .map(|i| format!("{new_dir}/s{side}-{i}"))
        .collect();
    let cut = rng.below(names.len() as u64 + 1) as usize;
    let (added, gone) = packed(&names, &format!("branch {side} pack"), t0 + 500_000, |i| {
        i == cut && names.len() > 1
    });
    items.extend(added);
    retired.extend(gone);
    // A name every branch adds, each with its own bytes.
    items.push(whole(
        "shared/clash",
        &format!("clash {side}"),
        t0 + 900_000,
    ));
    let mut dirs = base.dirs().to_vec();
    if rng.below(2) == 0 {
        dirs.retain(|d| d.name != "d0");
        dirs.push(dir("d0", 0o711 + side as u16));
    }
    Track::new(items, retired, "branch")
        .unwrap()
        .with_dirs(dirs, "branch")
        .unwrap()
}

/// What a merged Track holds, conflict names told by branch number, not
/// by Manifest id: items, directories and the length of every pack.
type Shown = (
    BTreeMap<String, (FragmentEntry, Attrs)>,
    Vec<TrackDir>,
    BTreeMap<ObjectId, Option<u64>>,
);

fn shown(track: &Track, tags: &[String]) -> Shown {
    let rename = |name: &str| {
        let mut name = name.to_string();
        for (k, tag) in tags.iter().enumerate() {
            name = name.replace(tag, &format!("branch{k}"));
        }
        name
    };
    let items = track
        .items()
        .iter()
        .map(|i| (rename(&i.name), (i.entry.clone(), i.attrs)))
        .collect();
    let packs = track
        .items()
        .iter()
        .map(|i| (i.entry.address, track.pack_len(&i.entry.address)))
        .collect();
    (items, track.dirs().to_vec(), packs)
}

/// Commits `track` as the only Track of a Manifest with `parents`, its
/// Track paged or a single object, and points `ref_name` at it.
async fn commit(
    dataset: &Dataset,
    ref_name: &str,
    parents: Vec<ObjectId>,
    track: &Track,
    single: bool,
) -> ObjectId {
    let update = TrackUpdate {
        timeline: "t".into(),
        modality: "m".into(),
        content: TrackContent::New(track.clone()),
    };
    let (id, mut manifest) = dataset
        .write_manifest(parents, vec![update], "test")
        .await
        .unwrap();
    let id = match single {
        false => id,
        true => {
            let store = dataset.store();
            let bytes = track.encode();
            manifest.tracks[0].track = ObjectId::of(&bytes);
            let path = store.layout().track(&manifest.tracks[0].track);
            store.put_immutable(&path, bytes.into()).await.unwrap();
            let bytes = Manifest::encode(&manifest);
            let id = ObjectId::of(&bytes);
            let path = store.layout().manifest(&id);
            store.put_immutable(&path, bytes.into()).await.unwrap();
            id
        }
    };
    dataset
        .store()
        .update_ref(ref_name, None, id)
        .await
        .unwrap();
    id
}

/// Merges `branches` of `base` into `main`, every Track paged or every
/// one a single object: what the merged Track shows, and the conflicts.
async fn merge(base: &Track, branches: &[Track], single: bool) -> (Shown, usize) {
    let (dataset, _) = dataset();
    let root = commit(&dataset, "main", Vec::new(), base, single).await;
    let mut names = Vec::new();
    let mut tags = Vec::new();
    for (k, b) in branches.iter().enumerate() {
        let id = commit(&dataset, &format!("b{k}"), vec![root], b, single).await;
        names.push(format!("b{k}"));
        tags.push(id.short());
    }
    let report = dataset.merge_refs("main", &names, "test").await.unwrap();
    let manifest = dataset.manifest(&report.manifest, "merged").await.unwrap();
    let id = manifest.tracks[0].track;
    let track = dataset.track(&id, "merged").await.unwrap();
    // The pages the merge's edit stored are those of the merged Track
    // encoded whole: every directory listed, every cut where it falls.
    let shape = PageShape::with_rows(4).with_index_pages(4);
    assert_eq!(
        track.encode_paged(&shape).id,
        id,
        "the merged Track's pages"
    );
    (shown(&track, &tags), report.conflicts.len())
}

/// Over random branches, the merge of paged Tracks gives what the merge
/// of the same Tracks as single objects gives.
#[test]
fn a_merge_of_paged_tracks_equals_the_whole_track_merge() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    for seed in 1..=40u64 {
        let mut rng = Rng::new(seed);
        let dirs = 4;
        let base = base(dirs, 2 + rng.below(12) as usize);
        let sides = 2 + rng.below(3) as usize;
        let branches: Vec<Track> = (0..sides)
            .map(|k| branch(&base, k, &mut rng, dirs))
            .collect();
        let (paged, paged_conflicts) = runtime.block_on(merge(&base, &branches, false));
        let (whole, whole_conflicts) = runtime.block_on(merge(&base, &branches, true));
        assert_eq!(paged.0, whole.0, "seed {seed}: items");
        assert_eq!(paged.1, whole.1, "seed {seed}: directories");
        assert_eq!(paged.2, whole.2, "seed {seed}: pack lengths");
        assert_eq!(paged_conflicts, whole_conflicts, "seed {seed}: conflicts");
        assert!(paged_conflicts >= sides - 1, "seed {seed}: the shared name");
    }
}

/// A merge of branches that each added a few items to a Track of many
/// pages reads the pages the branches changed, not the Track's: fewer
/// GETs than an eighth of its pages, and about as many for a Track four
/// times as large; the merged Track holds every item.
#[test]
fn a_merge_reads_the_pages_the_branches_changed() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let small = runtime.block_on(merge_four_branches(40));
    let large = runtime.block_on(merge_four_branches(160));
    assert!(
        large < 2 * small,
        "{small} GETs to merge into a Track of 40 directories, {large} into one of 160"
    );
}

/// Merges 4 branches, each adding 3 items, into a Track of `dirs`
/// directories of 50 items: the metadata GETs it took.
async fn merge_four_branches(dirs: usize) -> u64 {
    {
        let (dataset, faults) = dataset();
        let base = base(dirs, 50);
        let root = commit(&dataset, "main", Vec::new(), &base, false).await;
        let mut names = Vec::new();
        for k in 0..4 {
            let mut items = base.items().to_vec();
            let added: Vec<String> = (0..3).map(|i| format!("d{}/new-{k}-{i}", 7 * k)).collect();
            let (added, _) = packed(&added, &format!("pack of branch {k}"), 10_000, |_| false);
            items.extend(added);
            let track = Track::new(items, Vec::new(), "branch").unwrap();
            let track = track.with_dirs(base.dirs().to_vec(), "branch").unwrap();
            commit(&dataset, &format!("b{k}"), vec![root], &track, false).await;
            names.push(format!("b{k}"));
        }
        let pages = base.encode_paged(&PageShape::with_rows(4).with_index_pages(4));
        let before = faults.metadata_gets.load(Ordering::SeqCst);
        let report = dataset.merge_refs("main", &names, "test").await.unwrap();
        let gets = faults.metadata_gets.load(Ordering::SeqCst) - before;
        assert!(
            gets < pages.pages.len() as u64 / 8,
            "{gets} GETs to merge into a Track of {} pages",
            pages.pages.len()
        );
        let manifest = dataset.manifest(&report.manifest, "merged").await.unwrap();
        let merged = dataset
            .track(&manifest.tracks[0].track, "merged")
            .await
            .unwrap();
        assert_eq!(merged.items().len(), dirs * 50 + 4 * 3);
        assert!(report.conflicts.is_empty());
        gets
    }
}
