//! The spool of a read-write mount through the kernel: files written the
//! ways shells and programs write them (a block redirect of many commands,
//! two appenders, mmap) leave no version in the spool once committed, a
//! clean unmount leaves no data file, and the next mount recovers nothing
//! and warns about nothing.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::common::{require_fuse, wait_until, write_file, Home, Mounted};

/// Files in the spool's `data/` that hold bytes (empty ones are made ahead
/// of need and hold no version).
fn versions(spool: &Path) -> usize {
    let Ok(data) = std::fs::read_dir(spool.join("data")) else {
        return 0;
    };
    data.filter(|e| e.as_ref().unwrap().metadata().unwrap().len() > 0)
        .count()
}

struct Setup {
    _tmp: tempfile::TempDir,
    home: Home,
    mnt: PathBuf,
    spool: PathBuf,
    log: PathBuf,
}

impl Setup {
    fn new() -> Setup {
        require_fuse();
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("src");
        write_file(&src.join("t/m/stored"), b"stored bytes");
        let home = Home::local(tmp.path());
        home.import(&src, &[]);
        Setup {
            mnt: tmp.path().join("mnt"),
            spool: tmp.path().join("spool"),
            log: tmp.path().join("mount.log"),
            home,
            _tmp: tmp,
        }
    }

    fn mount(&self) -> Mounted {
        let log = self.log.to_str().unwrap();
        self.home
            .mount_rw(&self.mnt, &self.spool, &["--log-file", log])
    }

    fn sh(&self, script: &str) {
        let status = Command::new("sh")
            .arg("-c")
            .arg(script)
            .env("F", self.mnt.join("t/m/f"))
            .status()
            .unwrap();
        assert!(status.success(), "sh -c {script:?}");
    }

    /// After `write` made `t/m/f` in a mount: once committed (an fsync),
    /// the spool keeps no version; after a clean unmount none either; the
    /// next mount finds the file as written, moves nothing to `lost+found`
    /// and logs no warning.
    fn check(&self, write: impl FnOnce(&Setup) -> Vec<u8>) {
        let m = self.mount();
        let written = write(self);
        std::fs::File::open(m.path.join("t/m/f"))
            .unwrap()
            .sync_all()
            .unwrap();
        // The last RELEASE follows the last close asynchronously.
        wait_until(
            "the spool to hold no version",
            Duration::from_secs(20),
            || versions(&self.spool) == 0,
        );
        m.unmount();
        assert_eq!(versions(&self.spool), 0, "versions after a clean unmount");
        let left = packfs_fs::write::uncommitted(&self.spool).unwrap();
        assert_eq!(left, 0, "journal records after a clean unmount");
        let _ = std::fs::remove_file(&self.log);
        let m = self.mount();
        assert_eq!(std::fs::read(m.path.join("t/m/f")).unwrap(), written);
        m.unmount();
        assert!(!self.spool.join("lost+found").exists(), "recovered files");
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        assert!(!log.contains("WARN"), "the next mount warned: {log}");
        self.home.verify();
    }
}

/// `{ cmd; cmd; …; } > f`: the shell keeps its descriptor open while each
/// command writes through a duplicate and closes it.
#[test]
fn a_block_redirect_of_many_commands_leaves_no_version() {
    Setup::new().check(|s| {
        s.sh(r#"{ for i in $(seq 1 60); do /bin/echo line$i; done; } > "$F""#);
        (1..=60)
            .map(|i| format!("line{i}\n"))
            .collect::<String>()
            .into()
    });
}

/// Two processes appending with `>>` at once, many times.
#[test]
fn two_appenders_leave_no_version() {
    Setup::new().check(|s| {
        s.sh(
            r#"for i in $(seq 1 40); do /bin/echo a$i >> "$F" & /bin/echo b$i >> "$F"; wait; done"#,
        );
        let f = std::fs::read(s.mnt.join("t/m/f")).unwrap();
        let mut lines: Vec<&[u8]> = f.split(|&b| b == b'\n').filter(|l| !l.is_empty()).collect();
        lines.sort();
        let mut expected: Vec<String> = (1..=40)
            .flat_map(|i| [format!("a{i}"), format!("b{i}")])
            .collect();
        expected.sort();
        let expected: Vec<&[u8]> = expected.iter().map(|l| l.as_bytes()).collect();
        assert_eq!(lines, expected, "every appended line once");
        f
    });
}

/// A file written through a shared mapping, msync'ed page by page, its
/// descriptor closed while the mapping is still written.
#[test]
fn mmap_writes_leave_no_version() {
    Setup::new().check(|s| {
        let path = s.mnt.join("t/m/f");
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        const PAGES: usize = 16;
        file.set_len((PAGES * 4096) as u64).unwrap();
        let mut expected = vec![0u8; PAGES * 4096];
        // SAFETY: a fresh shared mapping of a file of that length, used
        // only here and unmapped below.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                expected.len(),
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                std::os::fd::AsRawFd::as_raw_fd(&file),
                0,
            )
        };
        assert_ne!(map, libc::MAP_FAILED);
        drop(file);
        for page in 0..PAGES {
            let mark = format!("page {page}");
            let at = page * 4096;
            expected[at..at + mark.len()].copy_from_slice(mark.as_bytes());
            // SAFETY: inside the mapping; msync of the whole mapping.
            unsafe {
                let dst = (map as *mut u8).add(at);
                std::ptr::copy_nonoverlapping(mark.as_ptr(), dst, mark.len());
                assert_eq!(libc::msync(map, expected.len(), libc::MS_SYNC), 0);
            }
        }
        // SAFETY: the mapping made above, not used after.
        assert_eq!(unsafe { libc::munmap(map, expected.len()) }, 0);
        expected
    });
}

/// An mmap'd file written again after its descriptor is closed, and
/// written back once more after the mapping is flushed: its write session
/// ends without a change, and the journal keeps nothing of it.
#[test]
fn a_write_session_that_ends_unchanged_leaves_no_journal_record() {
    Setup::new().check(|s| {
        let path = s.mnt.join("t/m/f");
        std::fs::write(&path, vec![0u8; 8192]).unwrap();
        let script = format!(
            "import mmap, os\n\
             fd = os.open({path:?}, os.O_RDWR)\n\
             m = mmap.mmap(fd, 8192)\n\
             m[0:5] = b'hello'\n\
             m.flush()\n\
             m[200:205] = b'again'\n\
             m.close()\n\
             os.close(fd)\n"
        );
        let ran = std::process::Command::new("python3")
            .args(["-c", &script])
            .status()
            .unwrap();
        assert!(ran.success());
        let mut expected = vec![0u8; 8192];
        expected[0..5].copy_from_slice(b"hello");
        expected[200..205].copy_from_slice(b"again");
        expected
    });
}
