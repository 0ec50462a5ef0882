//! `packfs expire` through the library, on a local directory dataset:
//! what it keeps (each ref's newest Manifests, where refs part for a
//! merge, the Manifests mounts hold by their leases), what every walk of
//! history does at a cut (log, `REV~N`, merges, gc), and what gc then
//! deletes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use packfs_core::dataset::{Dataset, DatasetError, RevisionError, TrackContent, TrackUpdate};
use packfs_core::expire::{expire, KeepRules};
use packfs_core::gc::gc;
use packfs_core::verify::verify;
use packfs_format::{Attrs, FragmentEntry, ObjectId, Placement, Track, TrackItem};

use crate::common::run_ok;

/// A dataset in a new directory, and the runtime to drive it.
struct Local {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
    dataset: Dataset,
    runtime: tokio::runtime::Runtime,
}

impl Local {
    fn new() -> Local {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("ds");
        Local {
            dataset: Dataset::open(dir.to_str().unwrap(), true).unwrap(),
            dir,
            _tmp: tmp,
            runtime: tokio::runtime::Runtime::new().unwrap(),
        }
    }

    fn block_on<T>(&self, f: impl std::future::Future<Output = T>) -> T {
        self.runtime.block_on(f)
    }

    /// Commits `files` (names in `t/m` → bytes, each its own object) as
    /// the whole Track of `t/m` onto ref `name`'s Manifest (a new ref from
    /// `from` when given): the new Manifest.
    fn commit(&self, name: &str, from: Option<ObjectId>, files: &[(&str, &str)]) -> ObjectId {
        self.block_on(async {
            let ds = &self.dataset;
            let store = ds.store();
            let parent = match from {
                Some(id) => Some(id),
                None => store.read_ref(name).await.unwrap(),
            };
            let mut items = Vec::new();
            for (t, (file, bytes)) in files.iter().enumerate() {
                let address = ObjectId::of(bytes.as_bytes());
                let path = store.layout().data_object("t", "m", &address);
                store
                    .put_immutable(&path, bytes.as_bytes().to_vec().into())
                    .await
                    .unwrap();
                items.push(TrackItem {
                    name: file.to_string(),
                    media_type: "application/octet-stream".into(),
                    attrs: Attrs::default(),
                    entry: FragmentEntry {
                        t_start: t as i64,
                        t_end: t as i64 + 1,
                        byte_size: bytes.len() as u64,
                        address,
                        placement: Placement::Whole,
                    },
                });
            }
            let track = TrackUpdate {
                timeline: "t".into(),
                modality: "m".into(),
                content: TrackContent::New(Track::new(items, Vec::new(), "test").unwrap()),
            };
            let expected = store.read_ref(name).await.unwrap();
            let id = ds
                .write_manifest(parent.into_iter().collect(), vec![track], "test")
                .await
                .unwrap()
                .0;
            store.update_ref(name, expected, id).await.unwrap();
            id
        })
    }

    /// `t/m`'s files at `revision`: name → bytes.
    fn files(&self, revision: &str) -> BTreeMap<String, String> {
        let files = packfs_core::Files::open(self.dir.to_str().unwrap())
            .unwrap()
            .at(revision)
            .unwrap();
        files
            .list("t/m")
            .unwrap()
            .into_iter()
            .map(|e| {
                let path = format!("t/m/{}", e.name);
                let bytes = files.open(&path).unwrap().read_all().unwrap();
                (e.name, String::from_utf8(bytes.to_vec()).unwrap())
            })
            .collect()
    }

    fn expire(&self, last: usize) -> packfs_core::expire::ExpireReport {
        let rules = KeepRules {
            last,
            within: Duration::ZERO,
        };
        self.block_on(expire(&self.dataset, rules, false)).unwrap()
    }

    /// gc with no grace: what it deleted.
    fn gc(&self) -> Vec<String> {
        let report = self
            .block_on(gc(&self.dataset, Duration::ZERO, false))
            .unwrap();
        report
            .unreachable
            .iter()
            .map(|(p, _)| p.to_string())
            .collect()
    }

    fn exists(&self, rel: &str) -> bool {
        self.dir.join(rel).exists()
    }

    fn manifest_path(&self, id: &ObjectId) -> String {
        self.dataset.store().layout().manifest(id).to_string()
    }
}

fn data(id: &str) -> String {
    format!("t/m/0/{}", ObjectId::of(id.as_bytes()).to_hex())
}

/// Six versions of one file: expire keeping two leaves the history at
/// two, `log` says it was cut, `main~2` is refused naming why, and gc
/// deletes the four older Manifests and the bytes only they named.
#[test]
fn expire_keeps_the_newest_and_gc_deletes_what_only_older_manifests_named() {
    let local = Local::new();
    let versions: Vec<String> = (0..6).map(|v| format!("version {v}")).collect();
    let ids: Vec<ObjectId> = versions
        .iter()
        .map(|v| local.commit("main", None, &[("f", v), ("same", "kept all along")]))
        .collect();

    let report = local.expire(2);
    assert_eq!((report.manifests, report.kept), (6, 2));
    let expired: Vec<ObjectId> = report.expired.iter().map(|(id, _)| *id).collect();
    assert_eq!(expired, [ids[3], ids[2], ids[1], ids[0]], "newest first");
    assert_eq!(report.cut_links, 1);
    let history = local.block_on(local.dataset.history("main", 100)).unwrap();
    let kept: Vec<ObjectId> = history.manifests.iter().map(|(id, _)| *id).collect();
    assert_eq!(kept, [ids[5], ids[4]]);
    assert!(history.expired);
    let back = local.block_on(local.dataset.resolve_revision(&"main~2".parse().unwrap()));
    assert!(
        matches!(
            back,
            Err(DatasetError::Revision(RevisionError::Expired { .. }))
        ),
        "{back:?}"
    );

    let deleted = local.gc();
    for id in &ids[..4] {
        assert!(deleted.contains(&local.manifest_path(id)), "{deleted:?}");
    }
    for v in &versions[..4] {
        assert!(!local.exists(&data(v)), "{v} is still stored");
    }
    for v in &versions[4..] {
        assert!(local.exists(&data(v)));
    }
    assert!(local.exists(&data("kept all along")));
    assert_eq!(local.files("main")["f"], "version 5");
    assert_eq!(local.files("main~1")["f"], "version 4");
    let verified = local.block_on(verify(&local.dataset, "main")).unwrap();
    assert!(verified.problems.is_empty(), "{:?}", verified.problems);

    // Expiring again changes nothing, and gc finds nothing more.
    let again = local.expire(2);
    assert_eq!((again.manifests, again.kept, again.record), (2, 2, None));
    assert!(local.gc().is_empty());
}

/// A branch made from an old Manifest: expire keeping one Manifest a ref
/// still keeps where the branch parts from main and what lies between,
/// so a merge afterwards finds its common ancestor and merges as it would
/// have before (no conflict, both sides' changes).
#[test]
fn a_branch_keeps_the_history_a_merge_needs() {
    let local = Local::new();
    local.commit("main", None, &[("a", "a0")]);
    let fork = local.commit("main", None, &[("a", "a1")]);
    local.commit("b", Some(fork), &[("a", "a1"), ("from-b", "b1")]);
    local.commit("b", None, &[("a", "a1"), ("from-b", "b2")]);
    for v in ["a2", "a3", "a4"] {
        local.commit("main", None, &[("a", v)]);
    }

    let report = local.expire(1);
    // All but main's first Manifest: the fork, main's three since, the
    // branch's two.
    assert_eq!((report.manifests, report.kept), (7, 6));
    local.gc();

    let merged = local
        .block_on(local.dataset.merge_refs("main", &["b".to_string()], "test"))
        .unwrap();
    assert!(merged.conflicts.is_empty(), "{:?}", merged.conflicts);
    let files = local.files("main");
    assert_eq!(files["a"], "a4", "main's change since the fork");
    assert_eq!(files["from-b"], "b2", "the branch's");
}

/// Leases: a writing mount's Manifest keeps the history from it to its
/// ref (its next commit merges from there), a read-only mount's keeps
/// itself; gc keeps what either reaches. Released, they keep nothing;
/// one not renewed for a week is deleted by expire.
#[test]
fn leases_keep_what_mounts_hold() {
    let local = Local::new();
    let ids: Vec<ObjectId> = (0..6)
        .map(|v| local.commit("main", None, &[("f", &format!("v{v}"))]))
        .collect();
    let ds = &local.dataset;
    let writing = local
        .block_on(ds.take_lease("writer", "main", ids[2], true))
        .unwrap();
    let reading = local
        .block_on(ds.take_lease("reader", &ids[1].to_hex(), ids[1], false))
        .unwrap();

    let report = local.expire(1);
    assert_eq!(report.leases, 2);
    // ids[2..6] (from the writer's to main), and ids[1] alone.
    assert_eq!((report.manifests, report.kept), (6, 5));
    local.gc();
    assert!(!local.exists(&data("v0")));
    assert_eq!(local.files(&ids[1].to_hex())["f"], "v1");
    assert_eq!(local.files(&ids[2].to_hex())["f"], "v2");

    local.block_on(writing.release()).unwrap();
    let report = local.expire(1);
    assert_eq!(
        (report.leases, report.kept),
        (1, 2),
        "main's and the reader's"
    );
    local.gc();
    for v in ["v2", "v3", "v4"] {
        assert!(!local.exists(&data(v)), "{v}");
    }
    assert_eq!(local.files(&ids[1].to_hex())["f"], "v1");
    let verified = local.block_on(verify(ds, &ids[1].to_hex())).unwrap();
    assert!(verified.problems.is_empty(), "{:?}", verified.problems);

    // A reader that died a week ago holds nothing any more.
    drop(reading);
    let lease = local.dir.join("_packfs/leases/reader");
    age(&lease, "8 days ago");
    let report = local.expire(1);
    assert_eq!((report.leases, report.kept), (0, 1));
    assert_eq!(report.stale_leases.len(), 1);
    assert!(!lease.exists());
    local.gc();
    assert!(!local.exists(&data("v1")));
    assert_eq!(local.files("main")["f"], "v5");
}

fn age(path: &Path, ago: &str) {
    run_ok("touch", &["-d", ago, path.to_str().unwrap()]);
}
