//! Refs move by compare-and-swap: when several committers race from the same
//! parent, exactly one wins and every other one gets a `RefConflict` naming
//! the winner. Checked on both ref mechanisms: a local directory
//! (flock + rename) and an object store with conditional puts (in-memory).

use std::sync::{Arc, Barrier};

use object_store::memory::InMemory;
use object_store::path::Path;
use packfs_core::dataset::{Dataset, DatasetError, TrackUpdate};
use packfs_core::store::{Store, StoreError};
use packfs_format::ObjectId;

const ROUNDS: usize = 50;
const RACERS: usize = 8;
const REF: &str = "main";

/// Which store a test runs on. The temp dir must outlive the dataset.
enum Backend {
    Local,
    Memory,
}

fn open(backend: Backend) -> (Option<tempfile::TempDir>, Dataset) {
    match backend {
        Backend::Local => {
            let dir = tempfile::tempdir().unwrap();
            let ds = Dataset::open(dir.path().to_str().unwrap(), true).unwrap();
            (Some(dir), ds)
        }
        Backend::Memory => {
            let store =
                Store::from_object_store(Arc::new(InMemory::new()), Path::default(), "memory");
            (None, Dataset::from_store(store))
        }
    }
}

/// What each commit writes. Empty track lists keep this file independent
/// of the Track API; every racer's `writer` string differs, so every racer
/// still writes its own, distinct Manifest.
fn no_tracks() -> Vec<TrackUpdate> {
    Vec::new()
}

/// Checks one round of a race from `parent`: exactly one winner, every
/// loser a `RefConflict` whose `actual` is the winner, and the ref at the
/// winner afterwards. Returns the winner.
fn check_round(
    what: &str,
    round: usize,
    parent: Option<ObjectId>,
    results: Vec<Result<ObjectId, StoreError>>,
    ref_now: Option<ObjectId>,
) -> ObjectId {
    let winners: Vec<ObjectId> = results
        .iter()
        .filter_map(|r| r.as_ref().ok())
        .copied()
        .collect();
    assert_eq!(
        winners.len(),
        1,
        "{what} round {round}: expected exactly one winner, got {results:?}"
    );
    let winner = winners[0];
    for r in &results {
        match r {
            Ok(_) => {}
            Err(StoreError::RefConflict {
                name,
                expected,
                actual,
            }) => {
                assert_eq!(name, REF, "{what} round {round}");
                assert_eq!(*expected, parent, "{what} round {round}: loser's expected");
                assert_eq!(
                    *actual,
                    Some(winner),
                    "{what} round {round}: loser's actual must be the winner"
                );
            }
            Err(e) => panic!("{what} round {round}: loser failed with a non-conflict error: {e}"),
        }
    }
    assert_eq!(
        ref_now,
        Some(winner),
        "{what} round {round}: ref must hold the winner"
    );
    winner
}

/// Turns a commit result into a store-level result; any other dataset
/// error fails the test.
fn store_result(r: Result<ObjectId, DatasetError>) -> Result<ObjectId, StoreError> {
    match r {
        Ok(id) => Ok(id),
        Err(DatasetError::Store(e)) => Err(e),
        Err(e) => panic!("commit failed with a non-store error: {e}"),
    }
}

/// Racing `Dataset::commit` from tokio tasks on the multi-thread runtime.
async fn commit_race_tasks(backend: Backend, what: &str) {
    let (_dir, ds) = open(backend);
    let mut parent = ds.commit(REF, None, no_tracks(), "init").await.unwrap();
    for round in 0..ROUNDS {
        let barrier = Arc::new(tokio::sync::Barrier::new(RACERS));
        let tasks: Vec<_> = (0..RACERS)
            .map(|i| {
                let (ds, barrier) = (ds.clone(), barrier.clone());
                tokio::spawn(async move {
                    let tag = format!("r{round}-t{i}");
                    let tracks = no_tracks();
                    barrier.wait().await;
                    ds.commit(REF, Some(parent), tracks, &tag).await
                })
            })
            .collect();
        let mut results = Vec::new();
        for t in tasks {
            results.push(store_result(t.await.unwrap()));
        }
        let now = ds.store().read_ref(REF).await.unwrap();
        let winner = check_round(what, round, Some(parent), results, now);
        // The winner's Manifest is complete and chains to the parent.
        let m = ds.manifest(&winner, "test").await.unwrap();
        assert_eq!(m.parents, vec![parent], "{what} round {round}");
        parent = winner;
    }
    let history = ds.history(REF, usize::MAX).await.unwrap().manifests;
    assert_eq!(
        history.len(),
        ROUNDS + 1,
        "{what}: one Manifest per round + init"
    );
}

/// Runs `f(i)` on `n` OS threads released together by a barrier; each
/// thread has its own current-thread runtime.
fn race_threads<T, F, Fut>(n: usize, f: F) -> Vec<T>
where
    T: Send,
    F: Fn(usize) -> Fut + Sync,
    Fut: std::future::Future<Output = T>,
{
    let barrier = Barrier::new(n);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .map(|i| {
                let (barrier, f) = (&barrier, &f);
                s.spawn(move || {
                    let rt = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .unwrap();
                    let fut = f(i);
                    barrier.wait();
                    rt.block_on(fut)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

fn block_on<T>(fut: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(fut)
}

/// Racing `Dataset::commit` from separate OS threads.
fn commit_race_threads(backend: Backend, what: &str, racers: usize) {
    let (_dir, ds) = open(backend);
    let mut parent = block_on(ds.commit(REF, None, vec![], "init")).unwrap();
    for round in 0..ROUNDS {
        let results = race_threads(racers, |i| {
            let ds = ds.clone();
            async move {
                let tag = format!("r{round}-t{i}");
                store_result(ds.commit(REF, Some(parent), no_tracks(), &tag).await)
            }
        });
        let now = block_on(ds.store().read_ref(REF)).unwrap();
        parent = check_round(what, round, Some(parent), results, now);
    }
}

/// Racing the primitive, `Store::update_ref`, from OS threads: first the
/// creation of fresh refs (expected `None`), then updates of one ref.
fn update_ref_race(backend: Backend, what: &str) {
    let (_dir, ds) = open(backend);
    let store = ds.store().clone();
    let id = |round: usize, i: usize| ObjectId::of(format!("{round}/{i}").as_bytes());

    // Creation races, each on a new ref (the first round uses REF itself).
    for round in 0..ROUNDS {
        let name = if round == 0 {
            REF.to_string()
        } else {
            format!("create-{round}")
        };
        let results = race_threads(RACERS, |i| {
            let (store, name) = (store.clone(), name.clone());
            async move {
                store
                    .update_ref(&name, None, id(round, i))
                    .await
                    .map(|()| id(round, i))
            }
        });
        let now = block_on(store.read_ref(&name)).unwrap();
        if round == 0 {
            check_round(what, round, None, results, now);
        } else {
            // check_round asserts the ref name is REF; check the rest here.
            let winners: Vec<_> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
            assert_eq!(winners.len(), 1, "{what} create {name}: {results:?}");
            let winner = *winners[0];
            for r in &results {
                match r {
                    Ok(_) => {}
                    Err(StoreError::RefConflict {
                        name: n,
                        expected: None,
                        actual,
                    }) if *n == name => {
                        assert_eq!(*actual, Some(winner), "{what} create {name}")
                    }
                    Err(e) => panic!("{what} create {name}: unexpected error {e}"),
                }
            }
            assert_eq!(now, Some(winner), "{what} create {name}");
        }
    }

    // Update races on REF.
    let mut current = block_on(store.read_ref(REF)).unwrap().unwrap();
    for round in 0..ROUNDS * 4 {
        let results = race_threads(RACERS, |i| {
            let store = store.clone();
            let new = id(ROUNDS + round, i);
            async move {
                store
                    .update_ref(REF, Some(current), new)
                    .await
                    .map(|()| new)
            }
        });
        let now = block_on(store.read_ref(REF)).unwrap();
        current = check_round(what, round, Some(current), results, now);
    }
}

/// Creating an existing ref, a stale expected value, and expecting a value
/// of a ref that does not exist all conflict and leave refs unchanged.
async fn conflicts_leave_ref_unchanged(backend: Backend, what: &str) {
    let (_dir, ds) = open(backend);
    let first = ds.commit(REF, None, no_tracks(), "first").await.unwrap();
    let second = ds
        .commit(REF, Some(first), no_tracks(), "second")
        .await
        .unwrap();
    assert_eq!(ds.resolve(REF).await.unwrap(), second);

    // Creating a ref that already exists.
    let err = ds
        .commit(REF, None, no_tracks(), "create again")
        .await
        .unwrap_err();
    match &err {
        DatasetError::Store(StoreError::RefConflict {
            name,
            expected,
            actual,
        }) => {
            assert_eq!(name, REF, "{what}");
            assert_eq!(*expected, None, "{what}");
            assert_eq!(*actual, Some(second), "{what}");
        }
        e => panic!("{what}: creating an existing ref: expected RefConflict, got {e}"),
    }
    let msg = err.to_string();
    assert!(
        msg.contains("\"main\"") && msg.contains("no manifest") && msg.contains(&second.to_hex()),
        "{what}: {msg}"
    );
    assert_eq!(ds.resolve(REF).await.unwrap(), second, "{what}");

    // A stale expected value (the grandparent).
    let err = ds
        .commit(REF, Some(first), no_tracks(), "stale")
        .await
        .unwrap_err();
    match &err {
        DatasetError::Store(StoreError::RefConflict {
            name,
            expected,
            actual,
        }) => {
            assert_eq!(name, REF, "{what}");
            assert_eq!(*expected, Some(first), "{what}");
            assert_eq!(*actual, Some(second), "{what}");
        }
        e => panic!("{what}: stale expected: expected RefConflict, got {e}"),
    }
    assert_eq!(ds.resolve(REF).await.unwrap(), second, "{what}");

    // The same through the primitive, with an id that was never a value.
    let bogus = ObjectId::of(b"never was the ref");
    let err = ds
        .store()
        .update_ref(REF, Some(bogus), ObjectId::of(b"x"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::RefConflict { expected: Some(e), actual: Some(a), .. }
            if e == bogus && a == second),
        "{what}: {err}"
    );
    assert_eq!(ds.resolve(REF).await.unwrap(), second, "{what}");

    // Expecting a value of a ref that does not exist: conflict, not created.
    let err = ds
        .store()
        .update_ref("other", Some(first), second)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::RefConflict { name, expected: Some(e), actual: None }
            if name == "other" && *e == first),
        "{what}: {err}"
    );
    assert_eq!(ds.store().read_ref("other").await.unwrap(), None, "{what}");

    // An invalid ref name is refused before anything is touched.
    assert!(ds.store().update_ref("../main", None, first).await.is_err());
    assert_eq!(ds.resolve(REF).await.unwrap(), second, "{what}");

    // A correct expected value still works after all the conflicts.
    let third = ds
        .commit(REF, Some(second), no_tracks(), "third")
        .await
        .unwrap();
    assert_eq!(ds.resolve(REF).await.unwrap(), third, "{what}");
    let log: Vec<ObjectId> = ds
        .history(REF, 10)
        .await
        .unwrap()
        .manifests
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    assert_eq!(log, vec![third, second, first], "{what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn local_commit_race_tasks() {
    commit_race_tasks(Backend::Local, "local").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn memory_commit_race_tasks() {
    commit_race_tasks(Backend::Memory, "memory").await;
}

#[test]
fn local_commit_race_two_threads() {
    commit_race_threads(Backend::Local, "local", 2);
}

#[test]
fn memory_commit_race_two_threads() {
    commit_race_threads(Backend::Memory, "memory", 2);
}

#[test]
fn local_commit_race_many_threads() {
    commit_race_threads(Backend::Local, "local", RACERS);
}

#[test]
fn memory_commit_race_many_threads() {
    commit_race_threads(Backend::Memory, "memory", RACERS);
}

#[test]
fn local_update_ref_race() {
    update_ref_race(Backend::Local, "local");
}

#[test]
fn memory_update_ref_race() {
    update_ref_race(Backend::Memory, "memory");
}

#[tokio::test(flavor = "multi_thread")]
async fn local_conflicts_leave_ref_unchanged() {
    conflicts_leave_ref_unchanged(Backend::Local, "local").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn memory_conflicts_leave_ref_unchanged() {
    conflicts_leave_ref_unchanged(Backend::Memory, "memory").await;
}

/// A store that accepts conditional puts but overwrites anyway (as garage
/// 2.5 and s3rver do) must be refused before any ref moves, with an error
/// that says why and how to override.
#[test]
fn a_store_whose_conditional_puts_are_not_atomic_is_refused() {
    use packfs_core::store::faults::{Faults, FaultyStore};
    let faults = Faults::default();
    faults
        .ignore_conditions
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let faulty = FaultyStore::new(Arc::new(InMemory::new()), Arc::new(faults));
    let ds = Dataset::from_store(Store::from_object_store(
        Arc::new(faulty),
        Path::default(),
        "s3://ignores-conditions",
    ));
    let err = block_on(ds.commit(REF, None, no_tracks(), "test")).unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(err, DatasetError::Store(StoreError::NoAtomicRefs { .. })),
        "{text}"
    );
    assert!(
        text.contains("If-None-Match") && text.contains("PACKFS_UNSAFE_REFS=1"),
        "{text}"
    );
    assert_eq!(
        block_on(ds.store().read_ref(REF)).unwrap(),
        None,
        "no ref moved"
    );

    // A store that honours them passes the same probe.
    let (_dir, ds) = open(Backend::Memory);
    block_on(ds.commit(REF, None, no_tracks(), "test")).unwrap();
}
