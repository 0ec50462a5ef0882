//! The filesystem core driven directly, without the kernel: the same
//! operations FUSE requests become, on a dataset in memory, with crashes
//! simulated by dropping a mount's state and remounting its spool.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use bytes::Bytes;
use packfs_core::cache::ObjectRef;
use packfs_core::dataset::ItemSource;
use packfs_core::extents::{Extents, Source};
use packfs_core::kind::Kind;
use packfs_core::reader::Reader;
use packfs_format::engine::{ByteRangeMap, SourceIndex};
use packfs_fs::fs::{FsError, Opened, SetAttr};
use packfs_fs::namespace::{NsError, ROOT_INO};
use packfs_fs::write::WriteOptions;

use crate::common::bench::Bench;
use crate::common::Rng;

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
    let Opened::Handle { fh, direct_io, .. } = opened else {
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
        core.block_on(core.fs().read(ino, 0, 0, 4096, &mut Vec::new()))
            .unwrap();
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
                    let mut buf = Vec::new();
                    while !stop.load(Ordering::Relaxed) {
                        let bytes = handle
                            .block_on(fs.read(ino, 0, 0, 20_000, &mut buf))
                            .unwrap();
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
        .faults
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
        .faults
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
    bench.faults.slow_gets("/m/", Duration::from_secs(2));
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
        WriteOptions::default()
            .spool_bytes(64 << 10)
            .pack_items(1000)
            .idle_flush(Duration::from_secs(3600)),
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

/// Closes of a handle open for reading need no word to the core (nothing
/// to journal): the kernel is told not to send FLUSH for them.
#[test]
fn only_handles_open_for_writing_hear_of_their_closes() {
    let bench = small_dataset();
    let core = bench.mount();
    let a = core.path("t/m/f00").unwrap();
    for write in [false, true] {
        let opened = core.block_on(core.fs().open(a, write, false)).unwrap();
        let Opened::Handle { fh, flush, .. } = opened else {
            panic!("opened as {opened:?}")
        };
        assert_eq!(flush, write);
        core.close(fh);
    }
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

/// A close journals the spool file as it is; a copy is made only when a
/// descriptor still open writes after it. A version committed by an
/// `fsync` and then closed unchanged, and a file opened for writing and
/// closed unwritten, are not uploaded again.
#[test]
fn closing_copies_nothing_and_an_unchanged_version_is_not_uploaded_again() {
    let bench = small_dataset();
    // No idle flush: it would commit (and delete) spool files meanwhile.
    let options = WriteOptions::default().idle_flush(Duration::from_secs(3600));
    let core = bench.mount_with(2, options);
    let puts = || bench.faults.data_puts.load(Ordering::SeqCst);
    // Empty files are made ahead of need; versions hold bytes.
    let spool_files = || {
        let data = std::fs::read_dir(bench.spool.join("data")).unwrap();
        data.filter(|e| e.as_ref().unwrap().metadata().unwrap().len() > 0)
            .count()
    };
    let fh = core.create_open("t/m", "new", b"first");
    let ino = core.path("t/m/new").unwrap();
    core.block_on(core.fs().fsync(Some(ino))).unwrap();
    let after_fsync = puts();
    core.close(fh);
    core.block_on(core.fs().fsync(None)).unwrap();
    assert_eq!(puts(), after_fsync, "closed unchanged after its fsync");

    let fh = core.open(core.path("t/m/f01").unwrap(), true);
    core.close(fh);
    core.block_on(core.fs().fsync(None)).unwrap();
    assert_eq!(puts(), after_fsync, "opened for writing, closed unwritten");

    // Two descriptors: a close, then writes through the other one.
    let fh = core.open(ino, true);
    core.block_on(core.fs().write(fh, 0, b"second")).unwrap();
    let before_close = spool_files();
    core.fs().flush(fh).unwrap();
    assert_eq!(spool_files(), before_close, "a close copies nothing");
    core.block_on(core.fs().write(fh, 6, b", third")).unwrap();
    assert_eq!(spool_files(), before_close + 1, "frozen before it changed");
    core.crash();
    bench.mount().unmount();
    assert_eq!(bench.committed("t/m/new").unwrap(), b"second");
    assert!(bench
        .lost_and_found()
        .contains(&("t/m/new".to_string(), b"second, third".to_vec())));
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

#[test]
fn modes_times_and_empty_directories_survive_a_crash() {
    let bench = small_dataset();
    let core = bench.mount();
    let m = core.path("t/m").unwrap();
    core.fs().mkdir(m, b"empty", 0o700).unwrap();
    let long_ago = UNIX_EPOCH + Duration::from_nanos(1_000_000_000_123_456_789);
    let stored = core.path("t/m/f01").unwrap();
    let set = SetAttr {
        perm: Some(0o640),
        mtime: Some(long_ago),
        ..SetAttr::default()
    };
    core.block_on(core.fs().setattr(stored, None, set)).unwrap();
    let fh = core.create_open("t/m", "private", b"p");
    core.block_on(
        core.fs()
            .setattr(core.path("t/m/private").unwrap(), Some(fh), set),
    )
    .unwrap();
    core.close(fh);
    core.crash();
    bench.mount().unmount(); // recovers and commits
    let view = bench.mount_read_only();
    let attr = |p: &str| view.fs().getattr(view.path(p).unwrap()).unwrap().attr;
    assert_eq!(attr("t/m/empty").kind, Kind::Dir);
    assert_eq!(attr("t/m/empty").perm, 0o700);
    for file in ["t/m/f01", "t/m/private"] {
        assert_eq!(
            (attr(file).perm, attr(file).mtime),
            (0o640, long_ago),
            "{file}"
        );
    }
    // Untouched stored files show the read-only defaults.
    assert_eq!(attr("t/m/f02").perm, 0o444);
}

#[test]
fn the_control_catalog_is_found_by_name_listed_alone_and_read_only() {
    let bench = small_dataset();
    let core = bench.mount();
    let fs = core.fs();
    let mut root = Vec::new();
    fs.readdir(ROOT_INO, 0, |name, _, _| {
        root.push(name.to_string());
        false
    })
    .unwrap();
    assert_eq!(root, [".", "..", "t"], ".packfs is never listed");
    let control = core.path(".packfs").unwrap();
    let mut listed = Vec::new();
    fs.readdir(control, 0, |name, stat, _| {
        listed.push((name.to_string(), stat.attr.ino));
        false
    })
    .unwrap();
    let stats = core.path(".packfs/stats").unwrap();
    let daemon = core.path(".packfs/daemon").unwrap();
    assert_eq!(
        listed,
        [
            (".".to_string(), control),
            ("..".to_string(), ROOT_INO),
            ("stats".to_string(), stats),
            ("daemon".to_string(), daemon)
        ]
    );
    // `daemon` names the serving process and the spool, for `packfs umount`.
    let text = String::from_utf8(core.read_all(daemon)).unwrap();
    let said = packfs_core::catalog::control::Daemon::from_text(&text).unwrap();
    assert_eq!(said.pid, std::process::id(), "{text}");
    assert_eq!(said.spool.as_deref(), Some(bench.spool.as_path()), "{text}");
    // Read through the same reader as any file: its bytes as `stat` says.
    let text = core.read_all(stats);
    assert_eq!(text.len() as u64, fs.getattr(stats).unwrap().attr.size);
    assert!(fs.getattr(stats).unwrap().volatile);
    let refused = |e: FsError| matches!(e, FsError::Namespace(NsError::ReadOnly));
    assert!(refused(fs.mkdir(control, b"x", 0o755).unwrap_err()));
    assert!(refused(fs.create(control, b"x", 0o644).unwrap_err()));
    assert!(refused(fs.unlink(control, b"stats").unwrap_err()));
    // The name it is attached at cannot be removed or replaced either.
    assert!(refused(fs.rmdir(ROOT_INO, b".packfs").unwrap_err()));
    let rename = fs.rename((ROOT_INO, b"t"), (ROOT_INO, b".packfs"), Default::default());
    assert!(refused(rename.unwrap_err()));
    let chmod = SetAttr {
        perm: Some(0o777),
        ..SetAttr::default()
    };
    assert!(refused(
        core.block_on(fs.setattr(stats, None, chmod)).unwrap_err()
    ));
    assert!(refused(
        core.block_on(fs.open(stats, true, false)).unwrap_err()
    ));
}

/// A directory of the dataset that is removed while a process still holds
/// it (its working directory, a `lookup` done before) stays empty: its
/// stored entries never come back through it. They did: a rename out of
/// it moved a file removed before, whose pack had been dropped from the
/// Track since, and every later commit failed ("gap: bytes … belong to no
/// entry").
#[test]
fn a_removed_directory_of_the_dataset_stays_empty() {
    let bench = Bench::new(&[("t/m/s/a", b"stored".to_vec()), ("t/m/x", b"x".to_vec())]);
    let core = bench.mount();
    let fs = core.fs();
    let m = core.path("t/m").unwrap();
    let s = core.path("t/m/s").unwrap();
    fs.unlink(s, b"a").unwrap();
    fs.rmdir(m, b"s").unwrap();
    let gone = |e: FsError| matches!(e, FsError::Namespace(NsError::NotFound));
    assert!(gone(fs.lookup(s, b"a").unwrap_err()), "a lookup in it");
    let moved = fs.rename((s, b"a"), (m, b"b"), Default::default());
    assert!(gone(moved.unwrap_err()), "a rename out of it");
    assert!(gone(fs.create(s, b"new", 0o644).unwrap_err()), "a create");
    assert!(gone(fs.mkdir(s, b"sub", 0o755).unwrap_err()), "a mkdir");
    let mut listed = Vec::new();
    fs.readdir(s, 0, |name, _, _| {
        listed.push(name.to_string());
        false
    })
    .unwrap();
    assert!(!listed.contains(&"a".to_string()), "listed: {listed:?}");
    assert_eq!(fs.getattr(s).unwrap().attr.nlink, 0);
    core.block_on(fs.fsync(None)).unwrap();
    core.unmount();
    assert_eq!(bench.committed("t/m/b"), None);
    assert_eq!(bench.committed("t/m/s/a"), None);
    assert_eq!(bench.committed("t/m/x").unwrap(), b"x");
}

/// The read model views and bundles build on: one file's bytes from a
/// store object, memory and PAD in any order, in one read through the cache.
#[test]
fn extents_mix_store_ranges_memory_and_pad() {
    let bench = small_dataset();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let snapshot = runtime.block_on(bench.dataset.snapshot("main")).unwrap();
    let tree = packfs_core::tree::Tree::build(snapshot).unwrap();
    let item = tree.file_data("t/m/f03").unwrap();
    let ItemSource::Packed {
        pack,
        offset,
        pack_len,
    } = &item.source
    else {
        panic!("small items are packed")
    };
    let object = Source::Object(ObjectRef {
        path: pack.clone(),
        len: *pack_len,
        drop_behind: false,
        then: None,
    });
    // [header][item bytes 100..300][8 zeros][item bytes 0..50]
    let header = Bytes::from_static(b"HEADER");
    let mut map = ByteRangeMap::new(6 + 200 + 8 + 50);
    map.push_data(6, 200, SourceIndex(0), offset + 100)
        .push_data(0, 6, SourceIndex(1), 0)
        .push_data(214, 50, SourceIndex(0), *offset)
        .push_pad(206, 8);
    let extents = Extents {
        map,
        sources: vec![object, Source::Memory(header)],
    };
    let reader = Reader::new(bench.dataset.store().clone(), Default::default(), None);
    let got = runtime.block_on(reader.read(extents)).unwrap();
    let whole = runtime
        .block_on(reader.read_item(&item, 0, item.size))
        .unwrap();
    let mut want = b"HEADER".to_vec();
    want.extend_from_slice(&whole[100..300]);
    want.extend_from_slice(&[0; 8]);
    want.extend_from_slice(&whole[..50]);
    assert_eq!(&got[..], &want[..]);
}

/// ctime moves with every change of a node (chmod, rename, a write) and
/// atime is what `utimensat` set, for as long as the mount lasts; a new
/// mount shows the stored mtime for both.
#[test]
fn ctime_follows_changes_and_atime_is_kept_while_mounted() {
    let bench = small_dataset();
    let core = bench.mount();
    let fs = core.fs();
    let f = core.path("t/m/f00").unwrap();
    let stat = |ino| fs.getattr(ino).unwrap().attr;
    let stored = stat(f);
    assert_eq!((stored.atime, stored.ctime), (stored.mtime, stored.mtime));
    let chmod = SetAttr {
        perm: Some(0o600),
        ..SetAttr::default()
    };
    core.block_on(fs.setattr(f, None, chmod)).unwrap();
    let after_chmod = stat(f);
    assert!(after_chmod.ctime > stored.ctime, "chmod changes ctime");
    assert_eq!(after_chmod.mtime, stored.mtime, "not mtime");
    let m = core.path("t/m").unwrap();
    fs.rename((m, b"f00"), (m, b"moved"), Default::default())
        .unwrap();
    assert!(stat(f).ctime > after_chmod.ctime, "rename changes ctime");
    let long_ago = UNIX_EPOCH + Duration::from_secs(1_000_000);
    let touch_a = SetAttr {
        atime: Some(long_ago),
        ..SetAttr::default()
    };
    core.block_on(fs.setattr(f, None, touch_a)).unwrap();
    assert_eq!(stat(f).atime, long_ago);
    assert_eq!(stat(f).mtime, stored.mtime, "touch -a leaves mtime");
    let d = fs.mkdir(m, b"d", 0o755).unwrap().attr;
    core.block_on(fs.setattr(d.ino, None, touch_a)).unwrap();
    assert_eq!(stat(d.ino).atime, long_ago);
    core.unmount();
    let view = bench.mount_read_only();
    let moved = view
        .fs()
        .getattr(view.path("t/m/moved").unwrap())
        .unwrap()
        .attr;
    assert_eq!((moved.atime, moved.ctime), (moved.mtime, moved.mtime));
}
