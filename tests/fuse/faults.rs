//! A store that fails: transient GET and PUT failures are retried and the
//! bytes stay exact; a PUT whose answer is lost is no failure; an object
//! that keeps failing gives EIO for its items only, promptly.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use object_store::memory::InMemory;
use object_store::path::Path as ObjectPath;
use packfs_core::dataset::Dataset;
use packfs_core::import::{import, ImportOptions};
use packfs_core::store::faults::{Faults, FaultyStore};
use packfs_core::store::{Store, StoreOptions};
use packfs_fs::mount::{self, MountOptions};

use crate::common::*;

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

/// The files of [`source`] imported into a dataset behind `faults`, and a
/// runtime to drive it.
fn imported(
    dir: &std::path::Path,
    faults: &Arc<Faults>,
) -> (Vec<(String, Vec<u8>)>, Dataset, tokio::runtime::Runtime) {
    let files = source(&dir.join("src"));
    let dataset = faulty_dataset(faults);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime
        .block_on(import(&dataset, &dir.join("src"), &import_options()))
        .expect("import");
    (files, dataset, runtime)
}

/// `dataset` mounted read-only in this process on `dir/mnt`.
fn mount_read_only(
    dataset: Dataset,
    dir: &std::path::Path,
) -> (std::path::PathBuf, mount::MountHandle) {
    let mnt = dir.join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    let options = MountOptions::default().read_only(true);
    let handle = mount::spawn(dataset, &mnt, &options).unwrap();
    (mnt, handle)
}

fn import_options() -> ImportOptions {
    ImportOptions::default().pack(
        packfs_core::packer::PackOptions::default()
            .pack_items(10)
            .chunk_bytes(1 << 20),
    )
}

#[test]
fn transient_failures_are_retried_and_every_byte_is_exact() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
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
    let (files, dataset, runtime) = imported(tmp.path(), &faults);
    assert_verifies(&runtime, &dataset);

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
    let faults = Arc::new(Faults::default());
    let (files, dataset, runtime) = imported(tmp.path(), &faults);
    // Find the pack holding f00 and make every GET of it fail.
    let tree = packfs_core::tree::Tree::build(runtime.block_on(dataset.snapshot("main")).unwrap())
        .unwrap();
    let pack = match &tree.file_data("t/m/f00").unwrap().source {
        packfs_core::dataset::ItemSource::Packed { pack, .. } => pack.to_string(),
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

/// `packfs verify` of main finds no problem.
fn assert_verifies(runtime: &tokio::runtime::Runtime, dataset: &Dataset) {
    let report = runtime
        .block_on(packfs_core::verify::verify(dataset, "main"))
        .unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}

/// A read-write mount, in this process, of a one-item dataset on an
/// in-memory store behind `faults`; it commits only when asked (fsync).
struct Writable {
    faults: Arc<Faults>,
    dataset: Dataset,
    runtime: tokio::runtime::Runtime,
    mnt: std::path::PathBuf,
    handle: mount::MountHandle,
}

fn writable_faulty_mount(dir: &std::path::Path) -> Writable {
    let src = dir.join("src");
    write_file(&src.join("t/m/seed"), b"seed");
    let faults = Arc::new(Faults::default());
    let dataset = faulty_dataset(&faults);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime
        .block_on(import(&dataset, &src, &import_options()))
        .unwrap();
    let mnt = dir.join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let options = MountOptions::default().write(
        packfs_fs::write::WriteOptions::default()
            .spool_dir(Some(dir.join("spool")))
            .idle_flush(Duration::from_secs(3600)),
    );
    let handle = mount::spawn(dataset.clone(), &mnt, &options).unwrap();
    Writable {
        faults,
        dataset,
        runtime,
        mnt,
        handle,
    }
}

/// A commit that fails at any step of its order (packs, Tracks, Manifest,
/// ref) leaves the ref on a complete Manifest, reports EIO to fsync, keeps
/// the data, and lands once the store works again.
#[test]
fn a_commit_failing_at_each_step_leaves_a_valid_ref_and_lands_later() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let Writable {
        faults,
        dataset,
        runtime,
        mnt,
        handle,
    } = writable_faulty_mount(tmp.path());
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
            .block_on(packfs_core::verify::verify(&dataset, "main"))
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
    assert_verifies(&runtime, &dataset);
    let (mnt, handle) = mount_read_only(dataset, &tmp.path().join("again"));
    for (i, step) in steps.iter().enumerate() {
        let got = std::fs::read_to_string(mnt.join(format!("t/m/file{i}"))).unwrap();
        assert_eq!(got, format!("written before step {step} failed"));
    }
    handle.unmount().unwrap();
}

/// A body cut short (a connection dropped mid-transfer) is never handed up
/// as data: with retries it reads exactly; with no time to retry it is
/// EIO, never wrong bytes.
#[test]
fn short_bodies_are_retried_and_never_served_as_data() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let faults = Arc::new(Faults::default());
    faults.truncate_every_nth_get.store(3, Ordering::SeqCst);
    let (files, dataset, runtime) = imported(tmp.path(), &faults);
    assert_verifies(&runtime, &dataset);
    let (mnt, handle) = mount_read_only(dataset.clone(), tmp.path());
    for (rel, bytes) in &files {
        assert!(std::fs::read(mnt.join(rel)).unwrap() == *bytes, "{rel}");
    }
    handle.unmount().unwrap();

    // No retries: every read is exact or EIO, and some are EIO.
    let impatient = StoreOptions::default().retry_deadline(Duration::ZERO);
    let dataset = Dataset::from_store(dataset.store().clone().with_options(impatient));
    faults.truncate_every_nth_get.store(0, Ordering::SeqCst);
    let (mnt, handle) = mount_read_only(dataset, &tmp.path().join("again"));
    faults.truncate_every_nth_get.store(2, Ordering::SeqCst);
    let mut failed = 0;
    for (rel, bytes) in &files {
        match std::fs::read(mnt.join(rel)) {
            Ok(got) => assert!(got == *bytes, "{rel}: wrong bytes served"),
            Err(e) => {
                assert_eq!(e.raw_os_error(), Some(libc::EIO), "{rel}");
                failed += 1;
            }
        }
    }
    handle.unmount().unwrap();
    assert!(failed > 0, "the short bodies were exercised");
}

/// Ref updates that lose the compare-and-swap (another writer "won") are
/// retried as merges; when they keep losing, fsync reports EIO in bounded
/// time and the data lands once the ref can move.
#[test]
fn a_lost_ref_compare_and_swap_is_merged_or_reported() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let Writable {
        faults,
        dataset,
        runtime,
        mnt,
        handle,
    } = writable_faulty_mount(tmp.path());

    faults.lose_next_cas.store(3, Ordering::SeqCst);
    let before = runtime.block_on(dataset.resolve("main")).unwrap();
    let file = std::fs::File::create(mnt.join("t/m/after-lost-races")).unwrap();
    std::io::Write::write_all(&mut &file, b"landed").unwrap();
    file.sync_all().expect("fsync after three lost races");
    drop(file);
    assert_eq!(faults.lose_next_cas.load(Ordering::SeqCst), 0);
    assert_ne!(runtime.block_on(dataset.resolve("main")).unwrap(), before);

    faults.lose_next_cas.store(u64::MAX, Ordering::SeqCst);
    let before = runtime.block_on(dataset.resolve("main")).unwrap();
    let file = std::fs::File::create(mnt.join("t/m/always-losing")).unwrap();
    std::io::Write::write_all(&mut &file, b"kept").unwrap();
    let start = Instant::now();
    let err = file.sync_all().unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EIO));
    assert!(
        start.elapsed() < Duration::from_secs(30),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(runtime.block_on(dataset.resolve("main")).unwrap(), before);
    faults.lose_next_cas.store(0, Ordering::SeqCst);
    file.sync_all().unwrap();
    drop(file);
    handle.unmount().unwrap();

    assert_verifies(&runtime, &dataset);
    let (mnt, handle) = mount_read_only(dataset, &tmp.path().join("again"));
    assert_eq!(
        std::fs::read(mnt.join("t/m/after-lost-races")).unwrap(),
        b"landed"
    );
    assert_eq!(
        std::fs::read(mnt.join("t/m/always-losing")).unwrap(),
        b"kept"
    );
    handle.unmount().unwrap();
}

/// Objects over the multipart threshold go up in parts; a failed or
/// answer-lost completion is retried, and the bytes read back exact.
#[test]
fn large_objects_upload_in_parts_through_failures() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let files = source(&tmp.path().join("src"));
    let faults = Arc::new(Faults::default());
    faults.fail_next_puts.store(2, Ordering::SeqCst);
    faults.lie_about_puts_of.lock().push("t/big/".into());
    let parts = StoreOptions::default()
        .multipart_threshold(256 << 10)
        .part_bytes(64 << 10);
    let store = Store::from_object_store(
        Arc::new(FaultyStore::new(Arc::new(InMemory::new()), faults.clone())),
        ObjectPath::default(),
        "memory://parts",
    )
    .with_options(parts);
    let dataset = Dataset::from_store(store);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime
        .block_on(import(&dataset, &tmp.path().join("src"), &import_options()))
        .unwrap();
    // The three 1 MiB chunks of t/big/blob went up in parts, one of them
    // more than once.
    assert!(faults.multipart_puts.load(Ordering::SeqCst) >= 3);
    let (mnt, handle) = mount_read_only(dataset, tmp.path());
    for (rel, bytes) in &files {
        assert!(std::fs::read(mnt.join(rel)).unwrap() == *bytes, "{rel}");
    }
    handle.unmount().unwrap();
    assert_eq!(faults.fail_next_puts.load(Ordering::SeqCst), 0);
}

/// The daemon's hidden `--inject-faults` diagnostic: failing and short
/// GETs and failing PUTs under a real `packfs mount`, and still every byte
/// read and written exact.
#[test]
fn the_daemon_reads_and_writes_exactly_through_injected_faults() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    source(&src);
    let home = Home::local(tmp.path());
    home.import(&src, &["--pack-items", "10", "--chunk-bytes", "1MiB"]);
    let spec = "get-fail-every=3,get-truncate-every=5,get-delay=1ms";
    let m = home.mount(&tmp.path().join("mnt"), &["--inject-faults", spec]);
    diff_r(&src.join("t"), &m.path.join("t"));
    m.unmount();
    // The faults are real: GETs of one modality's objects that always fail
    // are EIO there, while the other modality reads.
    let args = [
        "--inject-faults",
        "get-fail=t/m/0/",
        "--retry-deadline",
        "0",
    ];
    let m = home.mount(&tmp.path().join("mnt"), &args);
    let err = std::fs::read(m.path.join("t/m/f00")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EIO));
    assert_eq!(
        std::fs::read(m.path.join("t/big/blob")).unwrap(),
        std::fs::read(src.join("t/big/blob")).unwrap()
    );
    m.unmount();
    // Writes: every third PUT fails; all is committed all the same.
    let spec = "put-fail-every=3,get-fail-every=4";
    let spool = tmp.path().join("spool");
    let m = home.mount_rw(&tmp.path().join("mnt"), &spool, &["--inject-faults", spec]);
    let more = tmp.path().join("more");
    let mut rng = Rng::new(8);
    for i in 0..40 {
        let len = rng.below(20_000) as usize;
        write_file(&more.join(format!("f{i}")), &rng.bytes(len));
    }
    std::fs::create_dir(m.path.join("t/m/more")).unwrap();
    run_ok(
        "cp",
        &[
            "-r",
            &format!("{}/.", more.display()),
            m.path.join("t/m/more").to_str().unwrap(),
        ],
    );
    m.unmount();
    let m = home.mount(&tmp.path().join("mnt"), &[]);
    diff_r(&more, &m.path.join("t/m/more"));
    m.unmount();
    home.verify();
    // A bad spec is a usage error naming the fault.
    let out = home.packfs(&["--inject-faults", "get-explode=1", "ls", home.location()]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("get-explode"), "{stderr}");
}

/// Faults and store settings reach the store only as configuration: the
/// hidden `--inject-faults` option (above) or a test's `StoreConfig`.
/// packfs's own environment variables of earlier versions do nothing.
#[test]
fn packfs_environment_variables_configure_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    write_file(&src.join("t/m/a"), b"exact");
    let home = Home::local(tmp.path());
    home.import(&src, &[]);
    let out = std::process::Command::new(PACKFS)
        .args(["cat", home.location(), "t/m/a"])
        .env("PACKFS_FAULTS", "get-fail=t/m/,get-fail=_packfs")
        .env("PACKFS_RETRY_DEADLINE", "soon")
        .env("PACKFS_TIMEOUT", "never")
        .output()
        .unwrap();
    let out = succeeded("packfs cat with PACKFS_* set", out);
    assert_eq!(out.stdout, b"exact");
}

/// gc lists and deletes through failing LISTs (and a failing DELETE would
/// be retried the same way): the stray object goes, the dataset stays whole.
#[test]
fn gc_lists_through_transient_failures() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let faults = Arc::new(Faults::default());
    let (files, dataset, runtime) = imported(tmp.path(), &faults);
    let stray =
        dataset
            .store()
            .layout()
            .data_object("t", "m", &packfs_format::ObjectId::of(b"stray"));
    runtime
        .block_on(dataset.store().put_immutable(&stray, "stray".into()))
        .unwrap();
    faults.fail_next_lists.store(2, Ordering::SeqCst);
    let report = runtime
        .block_on(packfs_core::gc::gc(&dataset, Duration::ZERO, false))
        .expect("gc through failing lists");
    assert_eq!(faults.fail_next_lists.load(Ordering::SeqCst), 0);
    assert_eq!(report.unreachable.len(), 1, "{report:?}");
    assert_eq!(report.unreachable[0].0, stray);
    assert_eq!(
        runtime.block_on(dataset.store().size(&stray)).unwrap(),
        None
    );
    assert_verifies(&runtime, &dataset);
    let (mnt, handle) = mount_read_only(dataset, tmp.path());
    for (rel, bytes) in &files {
        assert!(std::fs::read(mnt.join(rel)).unwrap() == *bytes, "{rel}");
    }
    handle.unmount().unwrap();
}
