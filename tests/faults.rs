//! A store that fails: transient GET and PUT failures are retried and the
//! bytes stay exact; a PUT whose answer is lost is no failure; an object
//! that keeps failing gives EIO for its items only, promptly.

mod common;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use object_store::memory::InMemory;
use object_store::path::Path as ObjectPath;
use packfs::dataset::Dataset;
use packfs::import::{import, ImportOptions};
use packfs::mount::{self, MountOptions};
use packfs::store::faults::{Faults, FaultyStore};
use packfs::store::Store;

/// A dataset on an in-memory store behind `faults`.
fn faulty_dataset(faults: &Arc<Faults>) -> Dataset {
    let store = FaultyStore::new(Arc::new(InMemory::new()), faults.clone());
    Dataset::from_store(Store::from_object_store(
        Arc::new(store),
        ObjectPath::default(),
        "memory://faulty",
    ))
}

/// 60 small files in packs of 10 and one chunked 3 MB file.
fn source(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let mut rng = Rng::new(17);
    let mut files = Vec::new();
    for i in 0..60 {
        let len = 1 + rng.below(30_000) as usize;
        files.push((format!("t/m/f{i:02}"), rng.bytes(len)));
    }
    files.push(("t/big/blob".into(), rng.bytes(3_000_000)));
    for (rel, bytes) in &files {
        write_file(&dir.join(rel), bytes);
    }
    files
}

/// `dataset` mounted read-only in this process on `dir/mnt`.
fn mount_read_only(
    dataset: Dataset,
    dir: &std::path::Path,
) -> (std::path::PathBuf, mount::MountHandle) {
    let mnt = dir.join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    let options = MountOptions {
        read_only: true,
        ..MountOptions::default()
    };
    let handle = mount::spawn(dataset, &mnt, &options).unwrap();
    (mnt, handle)
}

fn import_options() -> ImportOptions {
    ImportOptions {
        pack_items: 10,
        chunk_bytes: 1 << 20,
        progress: false,
        ..ImportOptions::default()
    }
}

#[test]
fn transient_failures_are_retried_and_every_byte_is_exact() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let files = source(&tmp.path().join("src"));
    let faults = Arc::new(Faults::default());
    // Every third GET fails; PUTs fail now and then, and some are stored
    // with their answer lost.
    faults.fail_every_nth_get.store(3, Ordering::SeqCst);
    faults.fail_next_puts.store(3, Ordering::SeqCst);
    faults.lie_about_puts_of.lock().extend([
        "_packfs/manifests".to_string(),
        "_packfs/refs".into(),
        "t/m/0".into(),
    ]);
    let dataset = faulty_dataset(&faults);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime
        .block_on(import(&dataset, &tmp.path().join("src"), &import_options()))
        .expect("import through transient failures");
    let report = runtime
        .block_on(packfs::verify::verify(&dataset, "main"))
        .unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);

    let (mnt, handle) = mount_read_only(dataset, tmp.path());
    for (rel, bytes) in &files {
        assert!(std::fs::read(mnt.join(rel)).unwrap() == *bytes, "{rel}");
    }
    handle.unmount().unwrap();
    assert!(
        faults.gets.load(Ordering::SeqCst) > 20,
        "the faults were exercised"
    );
}

#[test]
fn an_object_that_keeps_failing_is_eio_for_its_items_only_and_promptly() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let files = source(&tmp.path().join("src"));
    let faults = Arc::new(Faults::default());
    let dataset = faulty_dataset(&faults);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime
        .block_on(import(&dataset, &tmp.path().join("src"), &import_options()))
        .unwrap();
    // Find the pack holding f00 and make every GET of it fail.
    let tree =
        packfs::tree::Tree::build(runtime.block_on(dataset.snapshot("main")).unwrap()).unwrap();
    let pack = match &tree.resolve_file("t/m/f00").unwrap().source {
        packfs::dataset::ItemSource::Packed { pack, .. } => pack.to_string(),
        other => panic!("f00 should be packed: {other:?}"),
    };
    faults.fail_gets_of.lock().push(pack.clone());

    let (mnt, handle) = mount_read_only(dataset, tmp.path());
    let start = Instant::now();
    let err = std::fs::read(mnt.join("t/m/f00")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EIO));
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "EIO took {:?}",
        start.elapsed()
    );
    // Items of other packs still read (f10 is in the second pack of ten).
    for (rel, bytes) in files.iter().filter(|(r, _)| r.as_str() >= "t/m/f10") {
        assert!(std::fs::read(mnt.join(rel)).unwrap() == *bytes, "{rel}");
    }
    handle.unmount().unwrap();
}

/// A commit that fails at any step of its order (packs, Tracks, Manifest,
/// ref) leaves the ref on a complete Manifest, reports EIO to fsync, keeps
/// the data, and lands once the store works again.
#[test]
fn a_commit_failing_at_each_step_leaves_a_valid_ref_and_lands_later() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    write_file(&src.join("t/m/seed"), b"seed");
    let faults = Arc::new(Faults::default());
    let dataset = faulty_dataset(&faults);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime
        .block_on(import(&dataset, &src, &import_options()))
        .unwrap();

    let mnt = tmp.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let options = MountOptions {
        write: packfs::write::WriteOptions {
            spool_dir: Some(tmp.path().join("spool")),
            idle_flush: Duration::from_secs(3600),
            ..Default::default()
        },
        ..MountOptions::default()
    };
    let handle = mount::spawn(dataset.clone(), &mnt, &options).unwrap();
    let steps = [
        "t/m/0/",
        "_packfs/tracks",
        "_packfs/manifests",
        "_packfs/refs",
    ];
    for (i, step) in steps.iter().enumerate() {
        let before = runtime.block_on(dataset.resolve("main")).unwrap();
        faults.fail_puts_of.lock().push(step.to_string());
        let path = mnt.join(format!("t/m/file{i}"));
        let file = std::fs::File::create(&path).unwrap();
        std::io::Write::write_all(
            &mut &file,
            format!("written before step {step} failed").as_bytes(),
        )
        .unwrap();
        let err = file.sync_all().unwrap_err();
        assert_eq!(
            err.raw_os_error(),
            Some(libc::EIO),
            "fsync with {step} failing"
        );
        // The ref did not move, and what it names is complete.
        assert_eq!(
            runtime.block_on(dataset.resolve("main")).unwrap(),
            before,
            "{step}"
        );
        let report = runtime
            .block_on(packfs::verify::verify(&dataset, "main"))
            .unwrap();
        assert!(report.problems.is_empty(), "{step}: {:?}", report.problems);
        // The file is still there for the writer, and commits once PUTs work.
        faults.fail_puts_of.lock().clear();
        file.sync_all().unwrap();
        assert_ne!(
            runtime.block_on(dataset.resolve("main")).unwrap(),
            before,
            "{step}"
        );
    }
    handle.unmount().unwrap();
    let report = runtime
        .block_on(packfs::verify::verify(&dataset, "main"))
        .unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    let (mnt, handle) = mount_read_only(dataset, &tmp.path().join("again"));
    for (i, step) in steps.iter().enumerate() {
        let got = std::fs::read_to_string(mnt.join(format!("t/m/file{i}"))).unwrap();
        assert_eq!(got, format!("written before step {step} failed"));
    }
    handle.unmount().unwrap();
}
