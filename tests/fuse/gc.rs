//! `packfs gc`: unreachable objects old enough go, everything any ref's
//! history reaches stays, and a dry run deletes nothing.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use bytes::Bytes;
use object_store::path::Path as ObjectPath;
use packfs_core::dataset::{Dataset, TrackContent, TrackUpdate};
use packfs_core::gc::gc;
use packfs_core::verify::verify;
use packfs_format::{FragmentEntry, ObjectId, Placement, Track, TrackItem};

use crate::common::*;

/// Writes an object nobody references at `rel` below the dataset, dated
/// `age` ago (`touch -d`).
fn orphan(dataset: &Path, rel: &str, age: &str) -> PathBuf {
    let path = dataset.join(rel);
    write_file(&path, b"an upload that never committed");
    run_ok("touch", &["-d", age, path.to_str().unwrap()]);
    path
}

/// `path` relative to the dataset, as gc names objects.
fn rel_of(dataset: &Path, path: &Path) -> String {
    path.strip_prefix(dataset)
        .unwrap()
        .to_str()
        .unwrap()
        .to_string()
}

#[test]
fn gc_deletes_old_unreachable_objects_and_keeps_all_history() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    let mut rng = Rng::new(5);
    for i in 0..20 {
        write_file(&src.join(format!("t/m/{i}")), &rng.bytes(5000));
    }
    let dataset = tmp.path().join("ds");
    import(&src, &dataset, &["--pack-items", "5"]);
    // History: a second Manifest in which items are replaced and removed.
    let m = Mounted::writable_in(tmp.path(), &dataset, &[]);
    std::fs::write(m.path.join("t/m/0"), b"replaced").unwrap();
    std::fs::remove_file(m.path.join("t/m/1")).unwrap();
    m.unmount();
    let ds = dataset.to_str().unwrap();
    let before = walk(&dataset).1.len();

    let hex = |n: u8| format!("{n:02x}").repeat(32);
    let old = [
        orphan(&dataset, &format!("t/m/0/{}", hex(1)), "2 days ago"),
        orphan(
            &dataset,
            &format!("_packfs/manifests/{}", hex(2)),
            "2 days ago",
        ),
        orphan(
            &dataset,
            &format!("_packfs/tracks/{}", hex(3)),
            "2 days ago",
        ),
    ];
    let young = orphan(&dataset, &format!("t/m/0/{}", hex(4)), "now");

    let out = packfs_ok(&["gc", ds, "--dry-run"]);
    let listed = String::from_utf8_lossy(&out.stdout);
    for path in &old {
        let name = path.file_name().unwrap().to_str().unwrap();
        assert!(
            listed.contains(&format!("would delete {}", rel_of(&dataset, path))),
            "{name}: {listed}"
        );
        assert!(path.exists(), "a dry run deleted {path:?}");
    }
    assert!(
        !listed.contains(young.file_name().unwrap().to_str().unwrap()),
        "{listed}"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("kept 1 younger"));

    packfs_ok(&["gc", ds]);
    for path in &old {
        assert!(!path.exists(), "{path:?} survived gc");
    }
    assert!(
        young.exists(),
        "gc deleted an object within the grace period"
    );
    assert_eq!(
        walk(&dataset).1.len(),
        before + 1,
        "gc deleted a reachable object"
    );
    packfs_ok(&["verify", ds]);
    // The history still reads (log opens every Manifest along it).
    let log = String::from_utf8(packfs_ok(&["log", ds]).stdout).unwrap();
    assert_eq!(log.matches("manifest ").count(), 2, "{log}");
    let m = Mounted::new(&dataset, &tmp.path().join("mnt"), &[]);
    assert_eq!(std::fs::read(m.path.join("t/m/0")).unwrap(), b"replaced");
    m.unmount();

    // A grace shorter than writers may take to commit what they reused
    // is refused, unless overridden.
    let out = Command::new(PACKFS)
        .args(["gc", ds, "--grace", "1h"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("too short") && err.contains("PACKFS_UNSAFE_GRACE"),
        "{err}"
    );
    assert!(young.exists());
    let out = Command::new(PACKFS)
        .args(["gc", ds, "--grace", "0s"])
        .env(packfs_core::gc::UNSAFE_GRACE_ENV, "1")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(!young.exists());
}

/// Sets the modification time of `path` (what a local store reports as an
/// object's last-modified) to `age` ago (`touch -d`).
fn age(path: &Path, age: &str) {
    run_ok("touch", &["-d", age, path.to_str().unwrap()]);
}

/// Commits, as the first commit of `main`, a Track whose one item `item`
/// is the whole object `address`, without writing that object.
async fn commit_item(dataset: &Dataset, address: ObjectId, size: usize) {
    let item = TrackItem {
        name: "item".to_string(),
        media_type: "application/octet-stream".into(),
        attrs: Default::default(),
        entry: FragmentEntry {
            t_start: 0,
            t_end: 1,
            byte_size: size as u64,
            address,
            placement: Placement::Whole,
        },
    };
    let track = TrackUpdate {
        timeline: "t".into(),
        modality: "m".into(),
        content: TrackContent::New(Track::new(vec![item], Vec::new(), "test track").unwrap()),
    };
    dataset
        .commit("main", None, vec![track], "test")
        .await
        .unwrap();
    let verified = verify(dataset, "main").await.unwrap();
    assert!(verified.problems.is_empty(), "{:?}", verified.problems);
}

/// Runs `test` on a new local dataset in a directory (also passed) that
/// lives as long as the returned guard.
fn on_new_dataset<F>(test: impl FnOnce(Dataset, PathBuf) -> F) -> tempfile::TempDir
where
    F: std::future::Future<Output = ()>,
{
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ds");
    let dataset = Dataset::open(dir.to_str().unwrap(), true).unwrap();
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(test(dataset, dir));
    tmp
}

/// An object no ref reaches, last modified 3 hours ago (an abandoned
/// upload): returns its id, bytes and path.
async fn old_orphan(
    dataset: &Dataset,
    dir: &Path,
    bytes: &'static [u8],
) -> (ObjectId, Bytes, ObjectPath) {
    let store = dataset.store();
    let id = ObjectId::of(bytes);
    let object = store.layout().data_object("t", "m", &id);
    let bytes = Bytes::from_static(bytes);
    store.put_immutable(&object, bytes.clone()).await.unwrap();
    age(&dir.join(object.as_ref()), "3 hours ago");
    (id, bytes, object)
}

/// A grace the orphans' age is past.
const GRACE: Duration = Duration::from_secs(2 * 3600);

const ITEM: &[u8] = b"uploaded, never committed, then written again";

/// A writer's dedupe hit on an old unreachable object (an abandoned
/// upload), with a whole gc running between the dedupe and the writer's
/// commit: the object must still be there for the commit.
#[test]
fn a_deduped_old_object_survives_a_gc_before_the_commit() {
    let tmp = on_new_dataset(|dataset, dir| async move {
        let (id, bytes, object) = old_orphan(&dataset, &dir, ITEM).await;
        // The writer builds the same bytes: they are already stored.
        dataset
            .store()
            .put_immutable(&object, bytes.clone())
            .await
            .unwrap();
        let report = gc(&dataset, GRACE, false).await.unwrap();
        commit_item(&dataset, id, bytes.len()).await;
        assert!(report.unreachable.is_empty(), "{report:?}");
    });
    let ds = tmp.path().join("ds");
    let cat = packfs_ok(&["cat", ds.to_str().unwrap(), "t/m/item"]);
    assert_eq!(cat.stdout, ITEM);
}

/// gc chooses its victims, then a commit naming one of them lands (its
/// writer reused the object without refreshing it: it was young enough
/// then), then gc deletes: that victim survives, the other goes.
#[test]
fn a_commit_between_gc_plan_and_delete_keeps_its_objects() {
    on_new_dataset(|dataset, dir| async move {
        let (id, bytes, _) = old_orphan(&dataset, &dir, b"chosen by gc, then committed").await;
        let (_, _, other) = old_orphan(&dataset, &dir, b"chosen by gc, nobody wants it").await;

        let plan = packfs_core::gc::plan(&dataset, GRACE).await.unwrap();
        assert_eq!(plan.report().unreachable.len(), 2, "{:?}", plan.report());
        commit_item(&dataset, id, bytes.len()).await;
        let report = plan.delete().await.unwrap();

        assert_eq!(report.spared, 1, "{report:?}");
        assert_eq!(report.unreachable, [(other, 29)], "{report:?}");
        let verified = verify(&dataset, "main").await.unwrap();
        assert!(verified.problems.is_empty(), "{:?}", verified.problems);
    });
}

/// gc chooses its victims, then a writer reuses one (a dedupe hit, which
/// refreshes an old object), then gc deletes, then the writer commits: the
/// victim survives, because gc reads its age again just before deleting.
#[test]
fn a_victim_reused_between_gc_plan_and_delete_survives() {
    on_new_dataset(|dataset, dir| async move {
        let (id, bytes, object) = old_orphan(&dataset, &dir, b"chosen by gc, then reused").await;

        let plan = packfs_core::gc::plan(&dataset, GRACE).await.unwrap();
        assert_eq!(plan.report().unreachable.len(), 1, "{:?}", plan.report());
        dataset
            .store()
            .put_immutable(&object, bytes.clone())
            .await
            .unwrap();
        let report = plan.delete().await.unwrap();
        assert_eq!((report.spared, report.unreachable.len()), (1, 0));
        commit_item(&dataset, id, bytes.len()).await;
    });
}
