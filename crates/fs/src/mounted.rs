//! A live mount seen from outside its daemon: `packfs sync` commits what
//! it holds, `packfs umount` (and umount(8) through its helper) commits,
//! unmounts and returns only once the daemon has finished. The kernel
//! returns from umount(2) before a FUSE daemon has done anything, so an
//! unmount that means "committed" must be driven from here.

use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::Duration;

use packfs_core::catalog::control::{self, Daemon};

use crate::mountpoint::{self, MountEntry};

/// Why a mount could not be committed or unmounted.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MountedError {
    #[error("{}: nothing is mounted there", .0.display())]
    NotMounted(PathBuf),
    #[error("{}: not a packfs mount (a {fs_type} mount of {device})", path.display())]
    NotPackfs {
        path: PathBuf,
        fs_type: String,
        device: String,
    },
    #[error(
        "{}: committing failed ({source}); the files stay in the mount's spool and \
         the mount stays; its log says why",
        path.display()
    )]
    Commit {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{}: busy (a file is open in it, or a process works in it); everything \
         written so far is committed; close them and unmount again, or unmount \
         lazily (-l)",
        .0.display()
    )]
    Busy(PathBuf),
    #[error("{}: cannot unmount: {detail}", path.display())]
    Unmount { path: PathBuf, detail: String },
    #[error(
        "{}: unmounted, but {changes} change(s) stay in the spool {}: mount the \
         dataset again with `--spool-dir {}` to commit them",
        path.display(), spool.display(), spool.display()
    )]
    Left {
        path: PathBuf,
        spool: PathBuf,
        changes: usize,
    },
}

/// A packfs mount in this process's mount namespace.
#[derive(Debug)]
pub struct Mounted {
    path: PathBuf,
    /// What `/.packfs/daemon` says; `None` if the daemon is gone (the
    /// kernel answers ENOTCONN).
    daemon: Option<Daemon>,
}

impl Mounted {
    /// The packfs mount at `path` (its mountpoint, not a directory in it).
    pub fn find(path: &Path) -> Result<Mounted, MountedError> {
        // A dead mount cannot be resolved through: its own path is kept.
        let path = path
            .canonicalize()
            .or_else(|_| std::path::absolute(path))
            .unwrap_or_else(|_| path.to_path_buf());
        let table = mountpoint::mounts();
        let entry = table
            .iter()
            .rev()
            .find(|m| m.mount_point == path)
            .ok_or_else(|| MountedError::NotMounted(path.clone()))?;
        if !is_packfs(entry) {
            return Err(MountedError::NotPackfs {
                path,
                fs_type: entry.fs_type.clone(),
                device: entry.source.clone(),
            });
        }
        let daemon = read_daemon(&path)?;
        Ok(Mounted { path, daemon })
    }

    /// The mountpoint.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The serving process, unless it is gone.
    pub fn daemon(&self) -> Option<&Daemon> {
        self.daemon.as_ref()
    }

    /// Whether the mount takes writes (it has a spool).
    pub fn is_writable(&self) -> bool {
        self.daemon.as_ref().is_some_and(|d| d.spool.is_some())
    }

    /// Commits everything written into the mount so far: an `fsync` of its
    /// root, which a read-write mount answers once all is committed.
    pub fn sync(&self) -> Result<(), MountedError> {
        if !self.is_writable() {
            return Ok(());
        }
        let commit = |source| MountedError::Commit {
            path: self.path.clone(),
            source,
        };
        std::fs::File::open(&self.path)
            .and_then(|root| root.sync_all())
            .map_err(commit)
    }

    /// Commits, unmounts and waits for the daemon to finish its last
    /// commit and exit; `lazy` detaches a busy mount instead (its daemon
    /// ends once the last file in it is closed: not waited for).
    /// `waiting` is called once if the daemon takes long.
    pub fn unmount(self, lazy: bool, waiting: impl FnOnce(u32)) -> Result<(), MountedError> {
        self.sync()?;
        // Held before the unmount: the process it names cannot be
        // mistaken for a later one with its pid.
        let exit = self.daemon.as_ref().and_then(|d| pidfd(d.pid));
        detach(&self.path, lazy)?;
        if lazy {
            return Ok(());
        }
        if let Some(exit) = exit {
            wait_for_exit(&exit, || {
                waiting(self.daemon.as_ref().map_or(0, |d| d.pid));
            });
        }
        let Some(spool) = self.daemon.and_then(|d| d.spool) else {
            return Ok(());
        };
        match crate::write::uncommitted(&spool) {
            Ok(0) => Ok(()),
            Ok(changes) => Err(MountedError::Left {
                path: self.path,
                spool,
                changes,
            }),
            // Another user's spool: the daemon's log tells.
            Err(_) => Ok(()),
        }
    }
}

/// Whether `entry` is a packfs mount: its type, or for mounts made before
/// the type was set, its source.
fn is_packfs(entry: &MountEntry) -> bool {
    entry.fs_type == "fuse.packfs"
        || (entry.fs_type == "fuse" && entry.source.starts_with("packfs:"))
}

/// `/.packfs/daemon` of the mount at `path`; `None` if its daemon is gone.
fn read_daemon(path: &Path) -> Result<Option<Daemon>, MountedError> {
    let file = path.join(control::NAME).join("daemon");
    let mut text = String::new();
    match std::fs::File::open(&file).and_then(|mut f| f.read_to_string(&mut text)) {
        Ok(_) => Daemon::from_text(&text)
            .map(Some)
            .ok_or_else(|| MountedError::Unmount {
                path: path.to_path_buf(),
                detail: format!("{} does not name a process: {text:?}", file.display()),
            }),
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOTCONN | libc::ECONNABORTED)) => Ok(None),
        Err(e) => Err(MountedError::Unmount {
            path: path.to_path_buf(),
            detail: format!("{}: {e}", file.display()),
        }),
    }
}

/// A descriptor that becomes readable when process `pid` exits; `None` if
/// the process is not in this pid namespace or already gone.
fn pidfd(pid: u32) -> Option<OwnedFd> {
    let pid = libc::pid_t::try_from(pid).ok()?;
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    let fd = i32::try_from(fd).ok().filter(|&fd| fd >= 0)?;
    // SAFETY: the descriptor was just returned to this process alone.
    Some(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Waits until the process behind `exit` has ended; `slow` runs once if
/// that takes more than a moment.
fn wait_for_exit(exit: &OwnedFd, slow: impl FnOnce()) {
    use std::os::fd::AsRawFd;
    let mut slow = Some(slow);
    let mut waited = Duration::ZERO;
    let step = Duration::from_millis(500);
    loop {
        let mut poll = libc::pollfd {
            fd: exit.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let ready = unsafe { libc::poll(&mut poll, 1, step.as_millis() as libc::c_int) };
        match ready {
            0 => {} // still running
            n if n > 0 => return,
            _ if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted => {
                continue
            }
            _ => return, // cannot wait on it: never hang
        }
        waited += step;
        if waited >= Duration::from_secs(2) {
            if let Some(slow) = slow.take() {
                slow();
            }
        }
    }
}

/// Unmounts `path` (see [`mountpoint::unmount`]).
fn detach(path: &Path, lazy: bool) -> Result<(), MountedError> {
    mountpoint::unmount(path, lazy).map_err(|e| match e.raw_os_error() {
        Some(libc::EBUSY) => MountedError::Busy(path.to_path_buf()),
        _ => MountedError::Unmount {
            path: path.to_path_buf(),
            detail: e.to_string(),
        },
    })
}
