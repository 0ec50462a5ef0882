//! What the spool holds: only versions no commit holds yet. Files written
//! through several descriptors closed in turn (a shell's block redirect,
//! two appenders) leave no version behind once committed; a clean unmount
//! leaves no data file; the next mount finds nothing to recover.

use std::time::Duration;

use packfs_fs::write::WriteOptions;

use crate::common::bench::Bench;
use crate::common::core::Core;

fn bench() -> Bench {
    Bench::new(&[("t/m/old", b"stored".to_vec())])
}

/// Files in the spool's `data/` holding bytes, and their bytes (empty files
/// are made ahead of need and recycled, and hold no version).
fn versions(bench: &Bench) -> (usize, u64) {
    let data = std::fs::read_dir(bench.spool.join("data")).unwrap();
    data.map(|e| e.unwrap().metadata().unwrap().len())
        .filter(|&len| len > 0)
        .fold((0, 0), |(n, b), len| (n + 1, b + len))
}

/// A read-write mount that commits only when asked.
fn mount(bench: &Bench) -> Core {
    bench.mount_with(
        2,
        WriteOptions::default().idle_flush(Duration::from_secs(3600)),
    )
}

fn commit(core: &Core) {
    core.block_on(core.fs().fsync(None)).unwrap();
}

/// A clean unmount, then what is left: no version in the spool, nothing in
/// `lost+found` after the next mount, and `path` committed as `bytes`.
fn assert_clean_after_unmount(bench: &Bench, core: Core, path: &str, bytes: &[u8]) {
    core.unmount();
    assert_eq!(
        versions(bench),
        (0, 0),
        "versions left after a clean unmount"
    );
    bench.mount().unmount();
    assert_eq!(
        bench.lost_and_found(),
        Vec::new(),
        "recovered after a clean unmount"
    );
    assert_eq!(bench.committed(path).as_deref(), Some(bytes));
}

/// Appends `line` to the file (`text` so far) through `fh`, then closes a
/// descriptor of it (FLUSH).
fn append_and_close(core: &Core, fh: u64, text: &mut Vec<u8>, line: &str) {
    core.block_on(core.fs().write(fh, text.len() as u64, line.as_bytes()))
        .unwrap();
    text.extend_from_slice(line.as_bytes());
    core.fs().flush(fh).unwrap();
}

/// `{ echo; echo; …; } > f`: the shell's descriptor stays open while each
/// command writes through a duplicate and closes it (a FLUSH each), and
/// commits happen in between.
#[test]
fn descriptors_closed_in_turn_leave_no_version_behind() {
    let bench = bench();
    let core = mount(&bench);
    let fh = core.create_open("t/m", "log", b"");
    // The shell's own descriptor, duplicated onto standard output.
    core.fs().flush(fh).unwrap();
    let mut text = Vec::new();
    for i in 0..30 {
        append_and_close(&core, fh, &mut text, &format!("line {i}\n"));
        if i % 3 == 0 {
            commit(&core);
        }
    }
    core.fs().release(fh);
    commit(&core);
    assert_clean_after_unmount(&bench, core, "t/m/log", &text);
}

/// Two processes appending to one file with `>>`, each opening, writing
/// and closing in turn while the other's descriptor stays open.
#[test]
fn two_appenders_leave_no_version_behind() {
    let bench = bench();
    let core = mount(&bench);
    let first = core.create_open("t/m", "log", b"");
    let mut text = Vec::new();
    let ino = core.path("t/m/log").unwrap();
    for i in 0..20 {
        let fh = core.open(ino, true);
        for (who, fh) in [("a", first), ("b", fh)] {
            append_and_close(&core, fh, &mut text, &format!("{who} {i}\n"));
        }
        core.fs().release(fh);
        if i % 4 == 0 {
            commit(&core);
        }
    }
    core.close(first);
    commit(&core);
    assert_clean_after_unmount(&bench, core, "t/m/log", &text);
}

/// A write session that ends with the bytes its file already had (written
/// after a close, frozen by an fsync, released without another close, as
/// an mmap's writeback does): a crash after it moves nothing to
/// `lost+found` and the file keeps its committed bytes.
#[test]
fn a_session_that_ended_unchanged_is_not_recovered_as_never_closed() {
    let bench = bench();
    let core = mount(&bench);
    let fh = core.create_open("t/m", "f", b"first");
    core.fs().flush(fh).unwrap(); // close(2): complete as "first"
    core.block_on(core.fs().write(fh, 0, b"FIRST")).unwrap();
    let f = core.path("t/m/f").unwrap();
    core.block_on(core.fs().fsync(Some(f))).unwrap(); // committed as "FIRST"
    core.fs().release(fh); // the last writer, without another close
    core.crash();
    let core = mount(&bench);
    core.unmount();
    assert_eq!(bench.lost_and_found(), Vec::<(String, Vec<u8>)>::new());
    assert_eq!(bench.committed("t/m/f").unwrap(), b"FIRST");
}
