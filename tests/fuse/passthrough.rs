//! Kernel passthrough from whole-file copies, through the kernel: an item
//! read whole once is served by passthrough after a remount with the same
//! cache directory, and every case without it falls back to the daemon,
//! with the right bytes either way. Needs root (CAP_SYS_ADMIN) and Linux
//! >= 6.9, like passthrough itself.

use std::path::PathBuf;
use std::time::Duration;

use crate::common::*;

const BIG: usize = 3 << 20;
const SMALL: usize = 100_000;

/// A dataset holding `t/m/big` and `t/m/small`, both read whole once by a
/// read-only mount with a cache directory (since unmounted).
struct Copied {
    _tmp: tempfile::TempDir,
    src: PathBuf,
    dataset: PathBuf,
    cache: PathBuf,
    mnt: PathBuf,
}

impl Copied {
    fn new() -> Self {
        require_fuse();
        // SAFETY: geteuid cannot fail.
        assert_eq!(
            unsafe { libc::geteuid() },
            0,
            "passthrough tests need root (CAP_SYS_ADMIN)"
        );
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let mut rng = Rng::new(11);
        let src = dir.join("src");
        write_file(&src.join("t/m/big"), &rng.bytes(BIG));
        write_file(&src.join("t/m/small"), &rng.bytes(SMALL));
        let copied = Copied {
            dataset: dir.join("dataset"),
            cache: dir.join("cache"),
            mnt: dir.join("mnt"),
            src,
            _tmp: tmp,
        };
        import(&copied.src, &copied.dataset, &[]);
        let mounted = copied.mount(&[]);
        copied.read_right(&mounted, "t/m/big");
        copied.read_right(&mounted, "t/m/small");
        wait_until("the whole-file copy", Duration::from_secs(10), || {
            counter(&mounted, "whole_copies") == 1
        });
        drop(mounted);
        copied
    }

    /// A read-only mount with the cache directory and `extra` options.
    fn mount(&self, extra: &[&str]) -> Mounted {
        let mut args = vec!["--cache-dir", self.cache.to_str().unwrap()];
        args.extend_from_slice(extra);
        Mounted::new(&self.dataset, &self.mnt, &args)
    }

    /// Reads `rel` through `mnt` and checks it against the source.
    fn read_right(&self, mnt: &Mounted, rel: &str) {
        let read = std::fs::read(mnt.path.join(rel)).unwrap();
        assert!(
            read == std::fs::read(self.src.join(rel)).unwrap(),
            "{rel} differs"
        );
    }
}

/// Counter `name` of the mount's `.packfs/stats`.
fn counter(mnt: &Mounted, name: &str) -> u64 {
    stat_counter(&mnt.path, name)
}

#[test]
fn an_item_read_whole_is_served_by_passthrough_after_a_remount() {
    let c = Copied::new();
    let mnt = c.mount(&[]);
    c.read_right(&mnt, "t/m/big");
    assert_eq!(counter(&mnt, "opens_passthrough"), 1);
    assert_eq!(counter(&mnt, "opens_daemon"), 0);
    assert_eq!(counter(&mnt, "gets"), 0, "passthrough reads fetch nothing");
    // Below the size threshold: no copy, the daemon serves it (from the
    // store, or the block tier if its write-behind got there in time).
    c.read_right(&mnt, "t/m/small");
    assert_eq!(counter(&mnt, "opens_daemon"), 1);
    let gets = counter(&mnt, "gets");
    // Two opens at once share the copy; a partial read at an offset too.
    let (a, b) = (
        std::fs::File::open(mnt.path.join("t/m/big")).unwrap(),
        std::fs::File::open(mnt.path.join("t/m/big")).unwrap(),
    );
    let mut buf = vec![0u8; 4096];
    std::os::unix::fs::FileExt::read_exact_at(&b, &mut buf, 1_000_000).unwrap();
    assert_eq!(
        buf,
        std::fs::read(c.src.join("t/m/big")).unwrap()[1_000_000..1_004_096]
    );
    drop((a, b));
    assert_eq!(counter(&mnt, "opens_passthrough"), 3);
    assert_eq!(
        counter(&mnt, "gets"),
        gets,
        "passthrough reads fetch nothing"
    );
}

#[test]
fn without_passthrough_the_daemon_serves_every_open() {
    let c = Copied::new();
    // A read-write mount never uses passthrough (a writer could not join).
    let spool = c.cache.with_file_name("spool");
    let cache = ["--cache-dir", c.cache.to_str().unwrap()];
    let rw = Mounted::writable(&c.dataset, &c.mnt, &spool, &cache);
    c.read_right(&rw, "t/m/big");
    assert_eq!(counter(&rw, "opens_passthrough"), 0);
    assert_eq!(counter(&rw, "opens_daemon"), 1);
    drop(rw);

    // Turned off: the read-only mount keeps its open-free mode.
    let off = c.mount(&["--no-passthrough"]);
    c.read_right(&off, "t/m/big");
    assert_eq!(counter(&off, "opens_passthrough"), 0);
    drop(off);

    // No cache directory: no copies, no passthrough.
    let plain = Mounted::new(&c.dataset, &c.mnt, &[]);
    c.read_right(&plain, "t/m/big");
    c.read_right(&plain, "t/m/big");
    assert_eq!(counter(&plain, "opens_passthrough"), 0);
    assert_eq!(counter(&plain, "whole_copies"), 0);
}

#[test]
fn a_damaged_copy_is_never_served() {
    let c = Copied::new();
    let copy = std::fs::read_dir(c.cache.join("whole"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_none())
        .unwrap();
    let mut bytes = std::fs::read(&copy).unwrap();
    bytes[BIG / 2] ^= 1;
    std::fs::remove_file(&copy).unwrap();
    std::fs::write(&copy, bytes).unwrap();

    let mnt = c.mount(&[]);
    c.read_right(&mnt, "t/m/big");
    assert_eq!(counter(&mnt, "opens_passthrough"), 0);
    assert_eq!(counter(&mnt, "opens_daemon"), 1);
    // The read served by the daemon makes a sound copy again.
    wait_until("a new copy", Duration::from_secs(10), || {
        counter(&mnt, "whole_copies") == 1
    });
    // Once the daemon has seen the last close (RELEASE comes after it).
    wait_until("a passthrough open", Duration::from_secs(10), || {
        c.read_right(&mnt, "t/m/big");
        counter(&mnt, "opens_passthrough") >= 1
    });
}
