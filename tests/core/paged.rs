//! Paged Tracks through the library: what a commit stores (counted), and
//! datasets whose Tracks are single objects read and committed onto.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use futures::TryStreamExt;
use object_store::path::Path;
use object_store::ObjectStore;
use packfs_core::cache::CacheOptions;
use packfs_core::reader::Reader;
use packfs_core::verify::verify;
use packfs_format::{Manifest, ObjectId, TrackRoot};
use packfs_fs::mount::MountOptions;
use packfs_fs::write::WriteOptions;

use crate::common::bench::Bench;
use crate::common::Rng;

/// `dirs` directories of `per_dir` small files each, below `t/m`: paths
/// and bytes.
fn small_files(dirs: usize, per_dir: usize) -> Vec<(String, Vec<u8>)> {
    let mut rng = Rng::new(7);
    (0..dirs * per_dir)
        .map(|i| {
            let name = format!("t/m/d{:02}/f{:03}", i / per_dir, i % per_dir);
            (name, rng.bytes(10 + i % 50))
        })
        .collect()
}

/// A dataset of [`small_files`].
fn many_small_files(dirs: usize, per_dir: usize) -> Bench {
    let files = small_files(dirs, per_dir);
    let refs: Vec<(&str, Vec<u8>)> = files.iter().map(|(p, b)| (p.as_str(), b.clone())).collect();
    Bench::new(&refs)
}

/// A mount of paged Tracks is ready once it read the ref, the Manifest and
/// the Track's root with its index pages: no name page. A cold `stat` of a
/// file reads at most 3 objects (here its directory's row and its own, on
/// two name pages). With an index bound far below the index, pages are
/// dropped and read again, and every file still lists and reads right.
#[test]
fn a_mount_reads_the_pages_it_is_asked_for_under_its_bound() {
    let bench = many_small_files(12, 50);
    let index = index_pages(&bench, "main");
    let pages = stored(&bench, "pages").len() as u64;
    let gets = || bench.faults.metadata_gets.load(Ordering::SeqCst);
    let bound = 8 << 10;
    let options = MountOptions::default()
        .read_only(true)
        .index_cache_bytes(bound);
    let before = gets();
    let core = bench.mount_options(&options);
    let mount_gets = gets() - before;
    assert!(
        mount_gets <= index + 3,
        "{mount_gets} GETs to mount ({index} index pages, {pages} pages)"
    );
    for path in ["t/m/d03/f007", "t/m/d09/f042", "t/m/d11/f049"] {
        let before = gets();
        let ino = core.path(path).unwrap();
        core.fs().getattr(ino).unwrap();
        let cold = gets() - before;
        assert!(
            (1..=3).contains(&cold),
            "{cold} GETs for a cold stat of {path}"
        );
    }

    let before = gets();
    let listing = core.listing().unwrap();
    let files = small_files(12, 50);
    for (path, bytes) in &files {
        let stat = listing
            .get(path)
            .unwrap_or_else(|| panic!("{path} not listed"));
        assert_eq!(stat.attr.size, bytes.len() as u64, "{path}");
        assert_eq!(&core.read_all(stat.attr.ino), bytes, "{path}");
    }
    assert_eq!(
        listing.len(),
        files.len() + 12 + 2,
        "files, d00..d11, t, t/m"
    );
    let walk = gets() - before;
    assert!(
        walk > pages,
        "{walk} metadata GETs for the walk: some of the {pages} pages should be read again"
    );
    let held = core.fs().namespace().tree().index_bytes();
    assert!(
        held as u64 <= bound,
        "{held} bytes of pages held, bound {bound}"
    );
}

/// The objects under `_packfs/<dir>/`, with their sizes.
fn stored(bench: &Bench, dir: &str) -> BTreeMap<String, u64> {
    let prefix = Path::from(format!("_packfs/{dir}"));
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let listed: Vec<_> = bench
            .memory
            .list(Some(&prefix))
            .try_collect()
            .await
            .unwrap();
        listed
            .into_iter()
            .map(|m| (m.location.to_string(), m.size))
            .collect()
    })
}

/// A one-file commit into a Track of many pages stores that file's pack,
/// the pages on its path (its name page, its pack's pack page) and a new
/// root, Manifest and ref: nothing that grows with the Track.
#[test]
fn a_one_file_commit_stores_only_the_pages_on_its_path() {
    let bench = many_small_files(12, 50);
    let before = stored(&bench, "pages");
    let before_bytes: u64 = before.values().sum();
    assert!(before.len() >= 100, "{} pages", before.len());
    let options = WriteOptions::default().idle_flush(std::time::Duration::from_secs(3600));
    let core = bench.mount_with(2, options);
    let (puts, data_puts) = (
        bench.faults.puts.load(Ordering::SeqCst),
        bench.faults.data_puts.load(Ordering::SeqCst),
    );
    // GETs of a commit of one new file `name` in `dir`, through `fsync`.
    let commit_one = |dir: &str, name: &str, bytes: &[u8]| {
        let fh = core.create_open(dir, name, bytes);
        let ino = core.path(&format!("{dir}/{name}")).unwrap();
        // Listings read the next name page ahead in the background: let
        // those land before counting the commit's own.
        let gets = settled(&bench.faults.gets);
        core.block_on(core.fs().fsync(Some(ino))).unwrap();
        let commit_gets = bench.faults.gets.load(Ordering::SeqCst) - gets;
        core.close(fh);
        commit_gets
    };
    let commit_gets = commit_one("t/m/d05", "new", b"one new file");
    let data = bench.faults.data_puts.load(Ordering::SeqCst) - data_puts;
    let metadata = bench.faults.puts.load(Ordering::SeqCst) - puts - data;
    let after = stored(&bench, "pages");

    // The next commit starts from the root the last one stored: no index
    // page is read again, only the pages the file falls in, the ref and
    // Manifests (12 here, against 31 index pages).
    let next_gets = commit_one("t/m/d07", "new", b"another new file");
    core.unmount();

    // At most the Track's root and index pages (the mount listed them
    // already, so it reads none again), the name and pack pages the file
    // falls in (a neighbour when a cut moves), the ref and Manifests: not
    // the Track's other pages.
    let index = index_pages(&bench, "main");
    assert!(
        commit_gets <= index + 12,
        "{commit_gets} GETs for a one-file commit ({index} index pages, {} pages)",
        before.len()
    );
    assert!(
        next_gets <= 16,
        "{next_gets} GETs for the next one-file commit ({index} index pages)"
    );
    let new: Vec<(&String, &u64)> = after
        .iter()
        .filter(|(p, _)| !before.contains_key(*p))
        .collect();
    let new_bytes: u64 = new.iter().map(|(_, &n)| n).sum();
    assert_eq!(data, 1, "the new file's pack");
    assert!(
        (1..=4).contains(&new.len()),
        "{} new pages of {}: {new:?}",
        new.len(),
        before.len()
    );
    assert!(
        new_bytes * 20 < before_bytes,
        "{new_bytes} bytes of pages written for one file, against {before_bytes} in all"
    );
    assert_eq!(
        metadata,
        new.len() as u64 + 3,
        "the new pages, then the root, the Manifest and the ref"
    );
    assert_eq!(
        bench.committed("t/m/d05/new").as_deref(),
        Some(&b"one new file"[..])
    );
    let report = core_verify(&bench);
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(report.items, 12 * 50 + 2);
}

/// The value of `counter` once it stopped moving for a few milliseconds.
fn settled(counter: &std::sync::atomic::AtomicU64) -> u64 {
    let mut last = counter.load(Ordering::SeqCst);
    loop {
        std::thread::sleep(std::time::Duration::from_millis(20));
        let now = counter.load(Ordering::SeqCst);
        if now == last {
            return now;
        }
        last = now;
    }
}

/// The index pages of the Track of `t/m` at `revision`.
fn index_pages(bench: &Bench, revision: &str) -> u64 {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let dataset = &bench.dataset;
        let resolved = dataset
            .resolve_revision(&revision.parse().unwrap())
            .await
            .unwrap();
        let manifest = dataset.manifest(&resolved.id, revision).await.unwrap();
        let track = manifest.tracks.iter().find(|t| t.modality == "m").unwrap();
        let store = dataset.store();
        let bytes = store
            .get(&store.layout().track(&track.track))
            .await
            .unwrap();
        TrackRoot::decode(&bytes, "root").unwrap().index.len() as u64
    })
}

fn core_verify(bench: &Bench) -> packfs_core::verify::VerifyReport {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime
        .block_on(verify(&bench.dataset, "main"))
        .expect("verify runs")
}

/// Commits `files` (names below `t/m/d03`, bytes) through a read-write
/// mount of `bench`, one commit each.
fn commit_each(bench: &Bench, files: &[(&str, &[u8])]) {
    let core = bench.mount();
    for (name, bytes) in files {
        let fh = core.create_open("t/m/d03", name, bytes);
        core.close(fh);
        core.block_on(core.fs().fsync(None)).unwrap();
    }
    core.unmount();
}

/// gc walks a history of many one-file commits onto a Track of many
/// pages by its pages: each page once, however many Tracks name it, so
/// what it reads grows with what the commits changed, not with the Track
/// times the commits.
#[test]
fn gc_reads_each_page_of_a_history_once() {
    let bench = many_small_files(12, 50);
    commit_each(
        &bench,
        &[("a", b"first"), ("b", b"second"), ("c", b"third")],
    );
    let count = |dir: &str| stored(&bench, dir).len() as u64;
    let (pages, tracks, manifests) = (count("pages"), count("tracks"), count("manifests"));
    assert!(pages >= 100, "{pages} pages");

    let gets = || bench.faults.metadata_gets.load(Ordering::SeqCst);
    let before = gets();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let report = runtime
        .block_on(packfs_core::gc::gc(
            &bench.dataset,
            std::time::Duration::ZERO,
            true,
        ))
        .unwrap();
    let read = gets() - before;
    assert!(report.unreachable.is_empty(), "{:?}", report.unreachable);
    assert_eq!(report.manifests_kept as u64, manifests);
    // Every page, root and Manifest once, and the ref.
    assert!(
        read <= pages + tracks + manifests + 1,
        "gc read {read} objects: {pages} pages, {tracks} roots, {manifests} Manifests"
    );
}

/// gc plans to delete what a lost commit stored (its Manifest, root,
/// pages and pack), then a writer commits a Manifest naming that very
/// Track (its pages and root reused, not stored again), then gc deletes:
/// only the lost Manifest goes, and the dataset verifies.
#[test]
fn pages_a_commit_reuses_between_gc_plan_and_delete_survive() {
    let bench = many_small_files(12, 50);
    let dataset = &bench.dataset;
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let base = runtime.block_on(dataset.resolve("main")).unwrap();
    commit_each(&bench, &[("lost", b"committed, then the ref moved back")]);
    let store = dataset.store();
    let layout = store.layout().clone();
    runtime.block_on(async {
        let lost = dataset.resolve("main").await.unwrap();
        store.update_ref("main", Some(lost), base).await.unwrap();

        let plan = packfs_core::gc::plan(dataset, std::time::Duration::ZERO)
            .await
            .unwrap();
        let planned: Vec<String> = plan
            .report()
            .unreachable
            .iter()
            .map(|(p, _)| p.to_string())
            .collect();
        assert!(
            planned.iter().any(|p| p.starts_with("_packfs/pages/")),
            "{planned:?}"
        );
        assert!(planned.contains(&layout.manifest(&lost).to_string()));

        let mut manifest: Manifest = dataset.manifest(&lost, "lost").await.unwrap();
        manifest.writer = "another writer".into();
        let bytes = manifest.encode();
        let reusing = ObjectId::of(&bytes);
        let path = layout.manifest(&reusing);
        store.put_immutable(&path, bytes.into()).await.unwrap();
        store.update_ref("main", Some(base), reusing).await.unwrap();

        let report = plan.delete().await.unwrap();
        let deleted: Vec<String> = report
            .unreachable
            .iter()
            .map(|(p, _)| p.to_string())
            .collect();
        assert_eq!(deleted, [layout.manifest(&lost).to_string()]);
        assert_eq!(report.spared, planned.len() - 1);
        let verified = verify(dataset, "main").await.unwrap();
        assert!(verified.problems.is_empty(), "{:?}", verified.problems);
    });
    assert_eq!(
        bench.committed("t/m/d03/lost").as_deref(),
        Some(&b"committed, then the ref moved back"[..])
    );
}

/// A dataset written before Tracks were paged (each Track one object)
/// mounts and reads unchanged; a commit onto it writes the paged form,
/// and every file, old and new, reads back.
#[test]
fn a_single_object_track_reads_and_a_commit_onto_it_pages_it() {
    let bench = many_small_files(3, 20);
    let expected = bench.mount_read_only().files().unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    // The same Manifest, its Tracks rewritten as single objects.
    runtime.block_on(async {
        let dataset = &bench.dataset;
        let store = dataset.store();
        let id = dataset.resolve("main").await.unwrap();
        let mut manifest: Manifest = dataset.manifest(&id, "main").await.unwrap();
        for t in &mut manifest.tracks {
            let single = dataset.track(&t.track, "main").await.unwrap().encode();
            t.track = ObjectId::of(&single);
            store
                .put_immutable(&store.layout().track(&t.track), single.into())
                .await
                .unwrap();
        }
        manifest.parents = vec![id];
        let bytes = manifest.encode();
        let new = ObjectId::of(&bytes);
        store
            .put_immutable(&store.layout().manifest(&new), bytes.into())
            .await
            .unwrap();
        store.update_ref("main", Some(id), new).await.unwrap();
        let track = dataset.track(&manifest.tracks[0].track, "t").await.unwrap();
        assert_eq!(track.items().len(), 60);
    });
    let pages_before = stored(&bench, "pages");
    assert_eq!(bench.mount_read_only().files().unwrap(), expected);

    let core = bench.mount();
    let fh = core.create_open("t/m/d01", "added", b"added to a single-object track");
    core.close(fh);
    core.block_on(core.fs().fsync(None)).unwrap();
    core.unmount();
    let mut expected = expected;
    expected.insert(
        "t/m/d01/added".into(),
        b"added to a single-object track".to_vec(),
    );
    assert_eq!(bench.mount_read_only().files().unwrap(), expected);
    let new_pages = stored(&bench, "pages").len() - pages_before.len();
    assert!(new_pages > 0, "the commit wrote the paged form");
    let report = core_verify(&bench);
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}

/// `packfs diff` of two revisions of a many-page Track fetches the pages
/// that differ, not the Track: a handful of GETs for one file. Items it
/// must read to tell (same size, stored elsewhere) find their packs'
/// lengths on the pack pages.
#[test]
fn a_diff_fetches_only_the_pages_that_differ() {
    let bench = many_small_files(12, 50);
    let pages = stored(&bench, "pages").len();
    let core = bench.mount();
    let fh = core.create_open("t/m/d05", "new", b"one new file");
    core.close(fh);
    core.block_on(core.fs().fsync(None)).unwrap();
    // Same size, other bytes; then the same bytes again.
    let f = core.path("t/m/d03/f010").unwrap();
    let old = core.read_all(f);
    let mut other = old.clone();
    other[0] ^= 0xff;
    for bytes in [&other, &other] {
        let fh = core.open(f, true);
        core.block_on(core.fs().write(fh, 0, bytes)).unwrap();
        core.close(fh);
        core.block_on(core.fs().fsync(None)).unwrap();
    }
    core.unmount();

    let runtime = tokio::runtime::Runtime::new().unwrap();
    let diff = |from: &str, to: &str| {
        let gets = bench.faults.gets.load(Ordering::SeqCst);
        let report = runtime.block_on(async {
            let dataset = &bench.dataset;
            let from = dataset.resolve_revision(&from.parse().unwrap()).await?;
            let to = dataset.resolve_revision(&to.parse().unwrap()).await?;
            let reader = Reader::new(dataset.store().clone(), CacheOptions::default(), None);
            packfs_core::diff::diff(dataset, &from, &to, &reader)
                .await
                .map_err(|e| packfs_core::dataset::DatasetError::Merge(e.to_string()))
        });
        let report = report.unwrap();
        let got: Vec<String> = report
            .differences
            .iter()
            .map(|d| format!("{} {}", d.change.marker(), d.path))
            .collect();
        (got, bench.faults.gets.load(Ordering::SeqCst) - gets)
    };
    // Three commits: the new file, the changed bytes, the same bytes again.
    let (added, gets) = diff("main~3", "main~2");
    assert_eq!(added, ["+ /t/m/d05/new"]);
    // The refs and the Manifests along the history (6), the two Manifests
    // compared, their Tracks' roots, and the index pages and name pages
    // that differ (one to three of each a side): none of the others.
    let index = index_pages(&bench, "main~3") + index_pages(&bench, "main~2");
    assert!(
        index > 12,
        "the Tracks list their pages through index pages"
    );
    assert!(
        gets <= 22,
        "{gets} GETs for a one-file diff of {pages} pages ({index} index pages)"
    );
    let (modified, _) = diff("main~2", "main~1");
    assert_eq!(modified, ["M /t/m/d03/f010"]);
    // Read on both sides and found equal: only its mtime moved.
    let (rewritten, _) = diff("main~1", "main");
    assert_eq!(rewritten, ["T /t/m/d03/f010"]);
    let (both, _) = diff("main~3", "main");
    assert_eq!(both, ["M /t/m/d03/f010", "+ /t/m/d05/new"]);
}

/// Every node of a mount: its kind, permission bits, size and a file's
/// bytes, then its mtime.
type Shown = BTreeMap<String, (String, std::time::SystemTime)>;

fn tree_of(core: &crate::common::core::Core) -> Shown {
    core.listing()
        .unwrap()
        .into_iter()
        .map(|(path, stat)| {
            let a = stat.attr;
            let bytes = (a.kind == packfs_core::kind::Kind::File).then(|| core.read_all(a.ino));
            let shape = format!("{:?} {:o} {} {bytes:?}", a.kind, a.perm, a.size);
            (path, (shape, a.mtime))
        })
        .collect()
}

/// The nodes `a` and `b` show differently. A node that records no mtime
/// shows its Manifest's time, as the timeline directory `t` does: that
/// time on both sides is the same.
fn differences<'a>(a: &'a Shown, b: &'a Shown) -> Vec<(&'a String, Option<&'a String>)> {
    let (ta, tb) = (a["t"].1, b["t"].1);
    let same = |x: &(String, std::time::SystemTime), y: &(String, std::time::SystemTime)| {
        x.0 == y.0 && (x.1 == y.1 || (x.1 == ta && y.1 == tb))
    };
    a.keys()
        .chain(b.keys())
        .filter(|k| match (a.get(*k), b.get(*k)) {
            (Some(x), Some(y)) => !same(x, y),
            _ => true,
        })
        .map(|k| (k, a.get(k).or(b.get(k)).map(|v| &v.0)))
        .collect()
}

/// A flush commits the rows changed since the last one as an edit of the
/// Track: directories moved (their subtrees with them), moved back and
/// forth, moved into new directories, removed; files moved across
/// directories, removed, re-attributed, rewritten inside a moved
/// directory. What the mount showed is what a new mount shows, after
/// each of several commits, and the dataset verifies.
#[test]
fn commits_of_moves_and_removals_edit_the_track_to_what_the_mount_shows() {
    use packfs_fs::fs::{RenameFlags, SetAttr};
    let bench = many_small_files(12, 50);
    let core = bench.mount();
    let (shown, shown_2) = {
        let fs = core.fs().clone();
        let ino = |path: &str| core.path(path).unwrap();
        let rename = |from: &str, to: &str| {
            let (fd, fname) = from.rsplit_once('/').unwrap();
            let (td, tname) = to.rsplit_once('/').unwrap();
            fs.rename(
                (ino(fd), fname.as_bytes()),
                (ino(td), tname.as_bytes()),
                RenameFlags::default(),
            )
            .unwrap();
        };
        let commit =
            |core: &crate::common::core::Core| core.block_on(core.fs().fsync(None)).unwrap();

        // Round 1: moves of whole directories and files, a removal, attributes.
        rename("t/m/d03", "t/m/d99");
        fs.mkdir(ino("t/m/d04"), b"sub", 0o750).unwrap();
        rename("t/m/d05", "t/m/d04/sub/d05");
        rename("t/m/d06/f001", "t/m/d07/f001x");
        fs.unlink(ino("t/m/d06"), b"f002").unwrap();
        rename("t/m/d09", "t/m/tmp");
        rename("t/m/tmp", "t/m/d09b");
        rename("t/m/d10", "t/m/away");
        rename("t/m/away", "t/m/d10");
        let mode = |perm| SetAttr {
            perm: Some(perm),
            ..SetAttr::default()
        };
        core.block_on(fs.setattr(ino("t/m/d08"), None, mode(0o700)))
            .unwrap();
        core.block_on(fs.setattr(ino("t/m/d08/f003"), None, mode(0o600)))
            .unwrap();
        fs.mkdir(ino("t/m"), b"empty", 0o755).unwrap();
        commit(&core);
        let shown = tree_of(&core);
        assert!(shown.contains_key("t/m/d99/f049") && !shown.contains_key("t/m/d03"));
        assert!(shown.contains_key("t/m/d04/sub/d05/f000"));

        // Round 2: inside what moved, and the empty directory goes.
        let fh = core.open(ino("t/m/d99/f000"), true);
        core.block_on(fs.write(fh, 0, b"rewritten")).unwrap();
        core.close(fh);
        fs.rmdir(ino("t/m"), b"empty").unwrap();
        rename("t/m/d04/sub", "t/m/d11/sub");
        fs.unlink(ino("t/m/d11/sub/d05"), b"f010").unwrap();
        commit(&core);
        (shown, tree_of(&core))
    };
    core.unmount();

    let again = bench.mount();
    let remounted = tree_of(&again);
    again.unmount();
    let differ = differences(&shown_2, &remounted);
    assert!(differ.is_empty(), "a new mount shows otherwise: {differ:?}");
    assert!(shown_2.contains_key("t/m/d11/sub/d05/f000"));
    assert!(!shown_2.contains_key("t/m/d11/sub/d05/f010"));
    assert!(!shown_2.contains_key("t/m/empty"));
    assert_ne!(shown, shown_2);
    let report = core_verify(&bench);
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(report.items, 12 * 50 - 2);
}

/// Files committed, then removed with their directory and written again
/// with the same bytes, mode and mtime (`cp -p`, `tar -x`) in one commit:
/// the commit packs them as the first did (the same pack, content
/// addressed), so each is equal to the item the Track holds. The new
/// Track must hold them, not drop them as unchanged while the edit clears
/// their rows. The same for a file unlinked and created again beside one
/// rewritten.
#[test]
fn files_removed_and_written_again_the_same_in_one_commit_are_kept() {
    use packfs_fs::fs::SetAttr;
    let bench = many_small_files(1, 2);
    let core = bench.mount();
    let fs = core.fs().clone();
    let commit = |core: &crate::common::core::Core| core.block_on(core.fs().fsync(None)).unwrap();
    let committed = || bench.mount_read_only().files().unwrap();
    let mtime = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
    let write = |dir: &str, names: &[&str]| {
        for name in names {
            let bytes = format!("bytes of {name}");
            let fh = core.create_open(&format!("t/m/{dir}"), name, bytes.as_bytes());
            core.close(fh);
            let ino = core.path(&format!("t/m/{dir}/{name}")).unwrap();
            let set = SetAttr {
                mtime: Some(mtime),
                ..SetAttr::default()
            };
            core.block_on(fs.setattr(ino, None, set)).unwrap();
        }
    };
    fs.mkdir(core.path("t/m").unwrap(), b"s", 0o755).unwrap();
    write("s", &["a", "b"]);
    commit(&core);
    let first = committed();
    assert_eq!(first["t/m/s/a"], b"bytes of a");

    for name in ["a", "b"] {
        fs.unlink(core.path("t/m/s").unwrap(), name.as_bytes())
            .unwrap();
    }
    fs.rmdir(core.path("t/m").unwrap(), b"s").unwrap();
    fs.mkdir(core.path("t/m").unwrap(), b"s", 0o755).unwrap();
    write("s", &["a", "b"]);
    commit(&core);
    assert_eq!(committed(), first);

    fs.unlink(core.path("t/m/s").unwrap(), b"a").unwrap();
    fs.unlink(core.path("t/m/s").unwrap(), b"b").unwrap();
    write("s", &["a", "b"]);
    commit(&core);
    assert_eq!(committed(), first);
    assert_eq!(core.files().unwrap(), first);
    core.unmount();
    assert_eq!(committed(), first);
    let report = core_verify(&bench);
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}

/// An operation on the directories and files below `t/m`, by index into
/// the mount's current directories or files (modulo their count).
#[derive(Clone, Debug)]
enum Op {
    Mkdir(u8, u8),
    MoveDir(u8, u8, u8),
    MoveFile(u8, u8, u8),
    Unlink(u8),
    Rmdir(u8),
    Create(u8, u8),
    Chmod(u8),
    Commit,
}

/// Names an operation gives: a few, so that they meet.
const NAMES: [&str; 4] = ["a", "b", "d01", "f000"];

fn op() -> impl proptest::strategy::Strategy<Value = Op> {
    use proptest::prelude::*;
    let n = || any::<u8>();
    prop_oneof![
        2 => (n(), n()).prop_map(|(d, x)| Op::Mkdir(d, x)),
        4 => (n(), n(), n()).prop_map(|(d, p, x)| Op::MoveDir(d, p, x)),
        3 => (n(), n(), n()).prop_map(|(f, d, x)| Op::MoveFile(f, d, x)),
        2 => n().prop_map(Op::Unlink),
        2 => n().prop_map(Op::Rmdir),
        2 => (n(), n()).prop_map(|(d, x)| Op::Create(d, x)),
        1 => n().prop_map(Op::Chmod),
        2 => Just(Op::Commit),
    ]
}

/// Runs `ops` on a read-write mount of a Track of many small pages,
/// committing where they say and at the end; then a new mount must show
/// what the first one showed.
fn run_ops(ops: &[Op]) -> Result<(), String> {
    use packfs_core::kind::Kind;
    use packfs_fs::fs::{RenameFlags, SetAttr};
    let bench = many_small_files(4, 6);
    let core = bench.mount();
    let shown = {
        let fs = core.fs().clone();
        let pick = |kind: Kind, i: u8| -> Option<String> {
            let listing = core.listing().ok()?;
            let found: Vec<String> = listing
                .into_iter()
                .filter(|(p, s)| {
                    s.attr.kind == kind
                        && p.starts_with("t/m")
                        && (kind == Kind::File || p.len() >= 3)
                })
                .map(|(p, _)| p)
                .collect();
            (!found.is_empty()).then(|| found[i as usize % found.len()].clone())
        };
        let name = |x: u8| NAMES[x as usize % NAMES.len()].as_bytes();
        let split = |path: &str| {
            let (dir, leaf) = path.rsplit_once('/').expect("below t/m");
            (core.path(dir).ok(), leaf.to_string())
        };
        for op in ops {
            // Refusals (a name taken, a directory not empty, into itself)
            // are part of the game: only what succeeded must be kept.
            match *op {
                Op::Mkdir(d, x) => {
                    if let Some(dir) = pick(Kind::Dir, d) {
                        let _ = fs.mkdir(core.path(&dir).unwrap(), name(x), 0o750);
                    }
                }
                Op::MoveDir(d, p, x) => {
                    if let (Some(from), Some(to)) = (pick(Kind::Dir, d), pick(Kind::Dir, p)) {
                        if from != "t/m" {
                            let (parent, leaf) = split(&from);
                            let to = core.path(&to).unwrap();
                            let _ = fs.rename(
                                (parent.unwrap(), leaf.as_bytes()),
                                (to, name(x)),
                                RenameFlags::default(),
                            );
                        }
                    }
                }
                Op::MoveFile(f, d, x) => {
                    if let (Some(from), Some(to)) = (pick(Kind::File, f), pick(Kind::Dir, d)) {
                        let (parent, leaf) = split(&from);
                        let to = core.path(&to).unwrap();
                        let _ = fs.rename(
                            (parent.unwrap(), leaf.as_bytes()),
                            (to, name(x)),
                            RenameFlags::default(),
                        );
                    }
                }
                Op::Unlink(f) => {
                    if let Some(file) = pick(Kind::File, f) {
                        let (parent, leaf) = split(&file);
                        let _ = fs.unlink(parent.unwrap(), leaf.as_bytes());
                    }
                }
                Op::Rmdir(d) => {
                    if let Some(dir) = pick(Kind::Dir, d).filter(|d| d != "t/m") {
                        let (parent, leaf) = split(&dir);
                        let _ = fs.rmdir(parent.unwrap(), leaf.as_bytes());
                    }
                }
                Op::Create(d, x) => {
                    if let Some(dir) = pick(Kind::Dir, d) {
                        let parent = core.path(&dir).unwrap();
                        if let Ok((_, fh)) = fs.create(parent, name(x), 0o644) {
                            core.block_on(fs.write(fh, 0, format!("made in {dir}").as_bytes()))
                                .unwrap();
                            core.close(fh);
                        }
                    }
                }
                Op::Chmod(i) => {
                    let kind = if i % 2 == 0 { Kind::File } else { Kind::Dir };
                    if let Some(path) = pick(kind, i / 2) {
                        let set = SetAttr {
                            perm: Some(0o700 | u16::from(i % 8)),
                            ..SetAttr::default()
                        };
                        let _ = core.block_on(fs.setattr(core.path(&path).unwrap(), None, set));
                    }
                }
                Op::Commit => core
                    .block_on(fs.fsync(None))
                    .map_err(|e| format!("commit: {e}"))?,
            }
        }
        core.block_on(fs.fsync(None))
            .map_err(|e| format!("commit: {e}"))?;
        tree_of(&core)
    };
    core.unmount();
    let again = bench.mount();
    let remounted = tree_of(&again);
    again.unmount();
    let differ = differences(&shown, &remounted);
    if !differ.is_empty() {
        return Err(format!("a new mount shows otherwise: {differ:?}"));
    }
    let report = core_verify(&bench);
    match report.problems.is_empty() {
        true => Ok(()),
        false => Err(format!("verify: {:?}", report.problems)),
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig {
        cases: 48,
        failure_persistence: None,
        ..proptest::prelude::ProptestConfig::default()
    })]

    /// Whatever is created, moved, removed and re-attributed between
    /// commits, the edits committed give a new mount what the mount
    /// showed, and the dataset verifies.
    #[test]
    fn commits_after_any_operations_give_a_new_mount_what_the_mount_showed(
        ops in proptest::collection::vec(op(), 1..24)
    ) {
        if let Err(e) = run_ops(&ops) {
            return Err(proptest::test_runner::TestCaseError::fail(e));
        }
    }
}
