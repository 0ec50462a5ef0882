//! Kernel passthrough from whole-file copies, through the kernel: an item
//! read whole once is served by passthrough after a remount with the same
//! cache directory, and every case without it falls back to the daemon,
//! with the right bytes either way. Needs root (CAP_SYS_ADMIN) and Linux
//! >= 6.9, like passthrough itself.

mod common;

use std::path::Path;
use std::time::Duration;

use common::*;

const BIG: usize = 3 << 20;
const SMALL: usize = 100_000;

/// A dataset holding `t/m/big` and `t/m/small`.
fn dataset(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let (src, dataset) = (dir.join("src"), dir.join("dataset"));
    let mut rng = Rng::new(11);
    write_file(&src.join("t/m/big"), &rng.bytes(BIG));
    write_file(&src.join("t/m/small"), &rng.bytes(SMALL));
    import(&src, &dataset, &[]);
    (src, dataset)
}

/// Counter `name` of the mount's `.packfs/stats`.
fn counter(mnt: &Mounted, name: &str) -> u64 {
    let stats = std::fs::read_to_string(mnt.path.join(".packfs/stats")).unwrap();
    stats
        .lines()
        .find_map(|l| {
            let mut words = l.split_whitespace();
            (words.next() == Some(name)).then(|| words.next().unwrap().parse().unwrap())
        })
        .unwrap_or_else(|| panic!("no {name} in {stats}"))
}

/// Reads `rel` through the mount and checks it against the source.
fn read_right(mnt: &Mounted, src: &Path, rel: &str) {
    let read = std::fs::read(mnt.path.join(rel)).unwrap();
    assert!(
        read == std::fs::read(src.join(rel)).unwrap(),
        "{rel} differs"
    );
}

/// Mounts, reads both files whole, waits for the copy of the big one.
fn read_whole_once(dataset: &Path, mnt: &Path, src: &Path, args: &[&str]) {
    let mounted = Mounted::new(dataset, mnt, args);
    read_right(&mounted, src, "t/m/big");
    read_right(&mounted, src, "t/m/small");
    wait_until("the whole-file copy", Duration::from_secs(10), || {
        counter(&mounted, "whole_copies") == 1
    });
}

fn require_root() {
    require_fuse();
    // SAFETY: geteuid cannot fail.
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "passthrough tests need root (CAP_SYS_ADMIN)"
    );
}

#[test]
fn an_item_read_whole_is_served_by_passthrough_after_a_remount() {
    require_root();
    let tmp = tempfile::tempdir().unwrap();
    let (src, dataset) = dataset(tmp.path());
    let cache = tmp.path().join("cache");
    let args = ["--cache-dir", cache.to_str().unwrap()];
    let mnt_dir = tmp.path().join("mnt");
    read_whole_once(&dataset, &mnt_dir, &src, &args);

    let mnt = Mounted::new(&dataset, &mnt_dir, &args);
    read_right(&mnt, &src, "t/m/big");
    assert_eq!(counter(&mnt, "opens_passthrough"), 1);
    assert_eq!(counter(&mnt, "opens_daemon"), 0);
    // Below the size threshold: no copy, the daemon serves it.
    read_right(&mnt, &src, "t/m/small");
    assert_eq!(counter(&mnt, "opens_daemon"), 1);
    // Two opens at once share the copy; a partial read at an offset too.
    let (a, b) = (
        std::fs::File::open(mnt.path.join("t/m/big")).unwrap(),
        std::fs::File::open(mnt.path.join("t/m/big")).unwrap(),
    );
    let mut buf = vec![0u8; 4096];
    std::os::unix::fs::FileExt::read_exact_at(&b, &mut buf, 1_000_000).unwrap();
    assert_eq!(
        buf,
        std::fs::read(src.join("t/m/big")).unwrap()[1_000_000..1_004_096]
    );
    drop((a, b));
    assert_eq!(counter(&mnt, "opens_passthrough"), 3);
    assert_eq!(counter(&mnt, "gets"), 0, "passthrough reads fetch nothing");
}

#[test]
fn without_passthrough_the_daemon_serves_every_open() {
    require_root();
    let tmp = tempfile::tempdir().unwrap();
    let (src, dataset) = dataset(tmp.path());
    let cache = tmp.path().join("cache");
    let mnt_dir = tmp.path().join("mnt");
    read_whole_once(
        &dataset,
        &mnt_dir,
        &src,
        &["--cache-dir", cache.to_str().unwrap()],
    );

    // A read-write mount never uses passthrough (a writer could not join).
    let spool = tmp.path().join("spool");
    let rw = Mounted::writable(
        &dataset,
        &mnt_dir,
        &spool,
        &["--cache-dir", cache.to_str().unwrap()],
    );
    read_right(&rw, &src, "t/m/big");
    assert_eq!(counter(&rw, "opens_passthrough"), 0);
    assert_eq!(counter(&rw, "opens_daemon"), 1);
    drop(rw);

    // Turned off: the read-only mount keeps its open-free mode.
    let off = Mounted::new(
        &dataset,
        &mnt_dir,
        &["--cache-dir", cache.to_str().unwrap(), "--no-passthrough"],
    );
    read_right(&off, &src, "t/m/big");
    assert_eq!(counter(&off, "opens_passthrough"), 0);
    drop(off);

    // No cache directory: no copies, no passthrough.
    let plain = Mounted::new(&dataset, &mnt_dir, &[]);
    read_right(&plain, &src, "t/m/big");
    read_right(&plain, &src, "t/m/big");
    assert_eq!(counter(&plain, "opens_passthrough"), 0);
    assert_eq!(counter(&plain, "whole_copies"), 0);
}

#[test]
fn a_damaged_copy_is_never_served() {
    require_root();
    let tmp = tempfile::tempdir().unwrap();
    let (src, dataset) = dataset(tmp.path());
    let cache = tmp.path().join("cache");
    let args = ["--cache-dir", cache.to_str().unwrap()];
    let mnt_dir = tmp.path().join("mnt");
    read_whole_once(&dataset, &mnt_dir, &src, &args);

    let whole = cache.join("whole");
    let copy = std::fs::read_dir(&whole)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_none())
        .unwrap();
    let mut bytes = std::fs::read(&copy).unwrap();
    bytes[BIG / 2] ^= 1;
    std::fs::remove_file(&copy).unwrap();
    std::fs::write(&copy, bytes).unwrap();

    let mnt = Mounted::new(&dataset, &mnt_dir, &args);
    read_right(&mnt, &src, "t/m/big");
    assert_eq!(counter(&mnt, "opens_passthrough"), 0);
    assert_eq!(counter(&mnt, "opens_daemon"), 1);
    // The read served by the daemon makes a sound copy again.
    wait_until("a new copy", Duration::from_secs(10), || {
        counter(&mnt, "whole_copies") == 1
    });
    // Once the daemon has seen the last close (RELEASE comes after it).
    wait_until("a passthrough open", Duration::from_secs(10), || {
        read_right(&mnt, &src, "t/m/big");
        counter(&mnt, "opens_passthrough") >= 1
    });
}
