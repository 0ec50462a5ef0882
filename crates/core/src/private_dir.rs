//! A private local directory (mode 0700) that one process uses at a time,
//! guarded by an exclusive `flock` on its `lock` file. The persistent block
//! cache and the write spool are such directories.

use std::fs::{self, File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;
use std::time::{Duration, Instant};

/// Creates `dir` (0700, with parents) if needed and takes its lock, waiting
/// up to `wait` for another process to release it (a mount that was just
/// unmounted may still be finishing). `Ok(None)`: still held by another.
/// The lock lasts as long as the returned file is open.
pub fn lock(dir: &Path, wait: Duration) -> std::io::Result<Option<File>> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(dir.join("lock"))?;
    let deadline = Instant::now() + wait;
    // SAFETY: flock on a descriptor we own; no memory is passed.
    while unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        if Instant::now() >= deadline {
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(Some(lock))
}
