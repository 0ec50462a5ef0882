//! The filesystem core driven directly, without the kernel: the same
//! operations FUSE requests become, on a dataset in memory, with crashes
//! simulated by dropping a mount's state and remounting its spool.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::core::Bench;
use common::Rng;
use packfs::fs::Opened;
use packfs::write::WriteOptions;

fn small_dataset() -> Bench {
    let mut rng = Rng::new(1);
    let mut files: Vec<(String, Vec<u8>)> = (0..12)
        .map(|i| (format!("t/m/f{i:02}"), rng.bytes(1000 + i * 100)))
        .collect();
    files.push(("t/n/other".to_string(), rng.bytes(5000)));
    let refs: Vec<(&str, Vec<u8>)> = files.iter().map(|(p, b)| (p.as_str(), b.clone())).collect();
    Bench::new(&refs)
}

#[test]
fn the_stats_file_opens_a_handle_and_writes_after_it_still_commit() {
    let bench = small_dataset();
    let core = bench.mount();
    let stats = core.path(".packfs/stats").unwrap();
    // A handle (never the stateless answer, which would switch the
    // kernel's no-open mode on for every later open), read fresh each time.
    let opened = core.block_on(core.fs().open(stats, false, false)).unwrap();
    let Opened::Handle { fh, direct_io } = opened else {
        panic!("the stats file opened stateless on a read-write mount")
    };
    assert!(direct_io);
    let text = String::from_utf8(core.read_all(stats)).unwrap();
    assert!(text.contains("gets"), "{text}");
    core.close(fh);
    let a = core.path("t/m/f00").unwrap();
    let fh = core.open(a, true);
    core.block_on(core.fs().write(fh, 1000, b"appended"))
        .unwrap();
    core.close(fh);
    let fh = core.create_open("t/m", "c.txt", b"Z\n");
    core.close(fh);
    core.unmount();
    assert_eq!(bench.committed("t/m/c.txt").unwrap(), b"Z\n");
    assert_eq!(&bench.committed("t/m/f00").unwrap()[1000..], b"appended");
}

#[test]
fn reading_stored_files_leaves_the_overlay_empty() {
    let bench = small_dataset();
    let core = bench.mount();
    for i in 0..12 {
        let ino = core.path(&format!("t/m/f{i:02}")).unwrap();
        let fh = core.open(ino, false);
        core.block_on(core.fs().read(ino, 0, 4096)).unwrap();
        core.close(fh);
    }
    assert_eq!(core.fs().namespace().overlay_files(), 0);
}

#[test]
fn a_read_racing_the_commit_of_its_spool_version_never_fails() {
    let bench = small_dataset();
    let core = bench.mount();
    let fs = core.fs().clone();
    let content: Vec<u8> = (0..20_000u32).map(|i| i as u8).collect();
    for round in 0..40 {
        let name = format!("race{round}");
        let fh = core.create_open("t/m", &name, &content);
        core.close(fh);
        let ino = core.path(&format!("t/m/{name}")).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let (fs, stop) = (fs.clone(), stop.clone());
                let handle = core.runtime().handle().clone();
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        let bytes = handle.block_on(fs.read(ino, 0, 20_000)).unwrap();
                        assert_eq!(bytes.len(), 20_000);
                    }
                })
            })
            .collect();
        core.block_on(fs.fsync(None)).unwrap();
        stop.store(true, Ordering::Relaxed);
        for r in readers {
            r.join()
                .expect("a read failed while its file was committed");
        }
    }
}

#[test]
fn a_panicking_commit_fails_fsync_and_the_next_one_commits() {
    let bench = small_dataset();
    let core = bench.mount();
    let fh = core.create_open("t/m", "new", b"kept");
    core.close(fh);
    bench
        .control
        .panic_on_data_puts
        .store(true, Ordering::SeqCst);
    let synced = core.block_on(async {
        tokio::time::timeout(Duration::from_secs(30), core.fs().fsync(None)).await
    });
    let err = synced
        .expect("fsync hung after the flusher panicked")
        .unwrap_err();
    assert!(err.to_string().contains("panicked"), "{err}");
    bench
        .control
        .panic_on_data_puts
        .store(false, Ordering::SeqCst);
    core.block_on(core.fs().fsync(None)).unwrap();
    core.crash();
    assert_eq!(bench.committed("t/m/new").unwrap(), b"kept");
}

#[test]
fn a_write_open_waits_only_for_the_copy_of_its_own_file() {
    let bench = small_dataset();
    let core = bench.mount();
    let (slow, quick) = (
        core.path("t/m/f00").unwrap(),
        core.path("t/n/other").unwrap(),
    );
    // Reads of modality m's pack now take 2 s.
    bench.control.slow_gets("/m/", Duration::from_secs(2));
    let fs = core.fs().clone();
    let copying = core
        .runtime()
        .spawn(async move { fs.open(slow, true, false).await });
    std::thread::sleep(Duration::from_millis(200));
    let opened = core.block_on(async {
        tokio::time::timeout(Duration::from_secs(1), core.fs().open(quick, true, false)).await
    });
    assert!(
        !copying.is_finished(),
        "the slow copy ended before the check"
    );
    opened
        .expect("a write-open waited for another file's copy")
        .unwrap();
    core.block_on(copying).unwrap().unwrap();
}

#[test]
fn a_write_waiting_for_spool_room_lets_the_flusher_free_it() {
    let bench = small_dataset();
    // One worker: a wait that blocked its thread would starve the flusher.
    let core = bench.mount_with(
        1,
        WriteOptions {
            spool_bytes: 64 << 10,
            pack_items: 1000,
            idle_flush: Duration::from_secs(3600),
            ..WriteOptions::default()
        },
    );
    for i in 0..6 {
        let fh = core.create_open("t/m", &format!("fill{i}"), &[7u8; 10 << 10]);
        core.close(fh);
    }
    let parent = core.path("t/m").unwrap();
    let fs = core.fs().clone();
    let written = core.block_on(core.runtime().spawn(async move {
        let (_, fh) = fs.create(parent, b"more", 0o644).unwrap();
        let written = fs.write(fh, 0, &[8u8; 10 << 10]).await;
        fs.flush(fh).unwrap();
        fs.release(fh);
        written
    }));
    assert_eq!(written.unwrap().unwrap(), 10 << 10);
    core.unmount();
    assert_eq!(bench.committed("t/m/more").unwrap(), vec![8u8; 10 << 10]);
}

#[test]
fn a_closed_file_survives_a_crash_before_its_release() {
    let bench = small_dataset();
    let core = bench.mount();
    let fh = core.create_open("t/m", "closed", b"closed, not released");
    // close(2) returned (FLUSH answered); the kernel's RELEASE never came.
    core.fs().flush(fh).unwrap();
    core.crash();
    bench.mount().unmount();
    assert_eq!(
        bench.committed("t/m/closed").unwrap(),
        b"closed, not released"
    );
}

#[test]
fn a_file_never_closed_is_kept_in_lost_found_under_its_path() {
    let bench = small_dataset();
    let core = bench.mount();
    let _fh = core.create_open("t/m", "unfinished", b"half of it");
    let d = core
        .fs()
        .mkdir(core.path("t/m").unwrap(), b"sub", 0o755)
        .unwrap();
    let (_, fh2) = core.fs().create(d.attr.ino, b"deep", 0o644).unwrap();
    core.block_on(core.fs().write(fh2, 0, b"deeper")).unwrap();
    core.crash();
    bench.mount().unmount();
    assert_eq!(bench.committed("t/m/unfinished"), None);
    let mut found = bench.lost_and_found();
    found.sort();
    assert_eq!(
        found,
        [
            ("t/m/sub/deep".to_string(), b"deeper".to_vec()),
            ("t/m/unfinished".to_string(), b"half of it".to_vec()),
        ]
    );
}
