//! The spool: a private local directory holding the bytes of files written
//! through the mount until a flush has packed and committed them.
//!
//! Layout: `data/<n>` holds one version of one file; `journal` lists the
//! changes not committed yet (see `journal.rs`); `lock` is held (`flock`)
//! by the one mount using the directory. Files a dead mount left that the
//! journal does not name (files it never closed) are moved to
//! `lost+found/<unix time>/` and reported, never deleted.

use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use tracing::warn;

/// How long opening waits for another mount to release the spool (a
/// mount of the same place that was just unmounted may still be committing).
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

use super::WriteError;
use crate::namespace::SpoolFile;

/// A spool directory in use by this mount.
#[derive(Debug)]
pub struct Spool {
    dir: PathBuf,
    data: PathBuf,
    next: std::sync::Arc<AtomicU64>,
    /// Bytes of all files in `data/` (kept as they grow and go).
    used: AtomicU64,
    /// Empty files created ahead of need by a background thread: creating
    /// a file costs about a millisecond on ext4, which would otherwise sit
    /// in the path of every `create` through the mount.
    ready: std::sync::Arc<parking_lot::Mutex<Vec<(SpoolFile, File)>>>,
    /// Files numbered from here on were made by this mount.
    first_own: u64,
    refill: std::sync::mpsc::SyncSender<()>,
    /// The creator thread, stopped and joined on drop: files numbered by
    /// a spool that is gone must not appear under the next one.
    creator: Option<(
        std::thread::JoinHandle<()>,
        std::sync::Arc<std::sync::atomic::AtomicBool>,
    )>,
    /// Held for the spool's lifetime: the flock is released on close.
    _lock: File,
}

impl Spool {
    /// Opens (creating it 0700) the spool at `dir` for this mount alone.
    pub fn open(dir: &Path) -> Result<Spool, WriteError> {
        let io = |op: &'static str| {
            let dir = dir.to_path_buf();
            move |source| WriteError::Spool { op, dir, source }
        };
        let lock = crate::private_dir::lock(dir, LOCK_WAIT)
            .map_err(io("lock"))?
            .ok_or_else(|| WriteError::SpoolInUse {
                dir: dir.to_path_buf(),
            })?;
        let data = dir.join("data");
        fs::DirBuilder::new()
            .mode(0o700)
            .create(&data)
            .or_else(|e| match e.kind() {
                std::io::ErrorKind::AlreadyExists => Ok(()),
                _ => Err(e),
            })
            .map_err(io("create"))?;
        // Numbers continue after those of files a dead mount left.
        let (mut next, mut used) = (0, 0);
        for entry in fs::read_dir(&data).map_err(io("list"))? {
            let entry = entry.map_err(io("list"))?;
            used += entry.metadata().map_or(0, |m| m.len());
            if let Some(n) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u64>().ok())
            {
                next = next.max(n + 1);
            }
        }
        let first_own = next;
        let next = std::sync::Arc::new(AtomicU64::new(next));
        let ready = std::sync::Arc::new(parking_lot::Mutex::new(Vec::new()));
        let (refill, wanted) = std::sync::mpsc::sync_channel(1);
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let thread = {
            let (data, next, ready, stop) =
                (data.clone(), next.clone(), ready.clone(), stop.clone());
            std::thread::Builder::new()
                .name("packfs-spool".into())
                .spawn(move || {
                    while wanted.recv().is_ok() {
                        while !stop.load(Ordering::SeqCst) && ready.lock().len() < READY_FILES {
                            match create(&data, &next) {
                                Ok(f) => ready.lock().push(f),
                                Err(_) => break, // new_file reports errors itself
                            }
                        }
                        if stop.load(Ordering::SeqCst) {
                            return;
                        }
                    }
                })
                .map_err(io("start the file creator of"))?
        };
        let _ = refill.try_send(());
        Ok(Spool {
            dir: dir.to_path_buf(),
            data,
            next,
            used: AtomicU64::new(used),
            ready,
            first_own,
            refill,
            creator: Some((thread, stop)),
            _lock: lock,
        })
    }

    /// The journal of this spool.
    pub fn journal_path(&self) -> PathBuf {
        self.dir.join("journal")
    }

    /// The spool file called `name` (as the journal names it).
    pub fn named(&self, name: &str) -> SpoolFile {
        SpoolFile {
            path: self.data.join(name),
        }
    }

    /// An error about this spool.
    pub fn error(&self, op: &'static str) -> impl FnOnce(std::io::Error) -> WriteError + '_ {
        move |source| WriteError::Spool {
            op,
            dir: self.dir.clone(),
            source,
        }
    }

    /// Moves files nothing refers to (a dead mount's unfinished writes) to
    /// `lost+found/<unix time>/`, each under the path `names` gives it (the
    /// journal's `Open` records) or else its number, and reports them:
    /// never deleted.
    pub fn quarantine_leftovers(
        &self,
        names: &std::collections::HashMap<String, String>,
    ) -> std::io::Result<()> {
        let mut leftovers = Vec::new();
        for entry in fs::read_dir(&self.data)? {
            let entry = entry?;
            let path = entry.path();
            let number = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u64>().ok());
            if number.is_some_and(|n| n >= self.first_own) {
                continue; // made by this mount
            }
            // Empty files hold nothing: files created ahead and never used.
            if entry.metadata()?.len() == 0 {
                fs::remove_file(&path)?;
                continue;
            }
            leftovers.push(path);
        }
        if leftovers.is_empty() {
            return Ok(());
        }
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        // A directory of its own (an earlier recovery in the same second
        // may have left files whose paths would be in the way).
        let found = self.dir.join("lost+found");
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&found)?;
        let (mut lost, mut n) = (found.join(stamp.to_string()), 1);
        while let Err(e) = fs::DirBuilder::new().mode(0o700).create(&lost) {
            if e.kind() != std::io::ErrorKind::AlreadyExists {
                return Err(e);
            }
            n += 1;
            lost = found.join(format!("{stamp}-{n}"));
        }
        let mut leftovers: Vec<(PathBuf, PathBuf)> = leftovers
            .into_iter()
            .map(|file| {
                let number = file.file_name().expect("a directory entry has a name");
                let to = match names.get(&*number.to_string_lossy()) {
                    Some(path) => lost.join(path),
                    None => lost.join(number),
                };
                (file, to)
            })
            .collect();
        // Deepest first: a file is never in the way of a directory a later
        // one needs (`a` of a file unlinked while open, `a/b` of another).
        leftovers.sort_by_key(|(_, to)| std::cmp::Reverse(to.components().count()));
        let count = leftovers.len();
        for (file, mut to) in leftovers {
            let number = file.file_name().expect("a directory entry has a name");
            if to.exists() {
                // Opened twice before the crash: keep both.
                to.as_mut_os_string().push(".");
                to.as_mut_os_string().push(number);
            }
            if let Some(dir) = to.parent() {
                fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(dir)?;
            }
            fs::rename(file, to)?;
        }
        warn!(
            "spool {}: {} file(s) of an earlier mount were never closed; \
             moved to {} for you to inspect",
            self.dir.display(),
            count,
            lost.display()
        );
        Ok(())
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A new empty spool file, open for reading and writing.
    pub fn new_file(&self) -> std::io::Result<(SpoolFile, File)> {
        let ready = self.ready.lock().pop();
        let _ = self.refill.try_send(());
        match ready {
            Some(f) => Ok(f),
            None => create(&self.data, &self.next),
        }
    }

    /// Deletes spool files no version of any file uses any more.
    pub fn remove(&self, files: &[SpoolFile]) {
        for f in files {
            let len = fs::metadata(&f.path).map_or(0, |m| m.len());
            match fs::remove_file(&f.path) {
                Ok(()) => {
                    self.used.fetch_sub(len.min(self.used()), Ordering::Relaxed);
                }
                Err(e) => warn!("removing spool file {}: {e}", f.path.display()),
            }
        }
    }

    /// Bytes in the spool's files.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    /// Accounts for a file growing by `grown` or shrinking by `shrunk` bytes.
    pub fn resized(&self, grown: u64, shrunk: u64) {
        self.used.fetch_add(grown, Ordering::Relaxed);
        self.used
            .fetch_sub(shrunk.min(self.used()), Ordering::Relaxed);
    }
}

impl Drop for Spool {
    fn drop(&mut self) {
        if let Some((thread, stop)) = self.creator.take() {
            stop.store(true, Ordering::SeqCst);
            let _ = self.refill.try_send(()); // wake it if it waits
            let _ = thread.join();
        }
        // Created ahead and never used: empty, nothing to keep.
        for (file, _) in self.ready.lock().drain(..) {
            let _ = fs::remove_file(&file.path);
        }
    }
}

/// Empty files the background creator keeps ready.
const READY_FILES: usize = 64;

/// Creates the next numbered file in `data`.
fn create(data: &Path, next: &AtomicU64) -> std::io::Result<(SpoolFile, File)> {
    let n = next.fetch_add(1, Ordering::Relaxed);
    let path = data.join(n.to_string());
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)?;
    Ok((SpoolFile { path }, file))
}

/// The default spool of a mount: under `$XDG_STATE_HOME` (or
/// `~/.local/state`), one directory per (location, ref, mountpoint), so a
/// remount at the same place finds what a crashed mount left.
pub fn default_dir(location: &str, ref_name: &str, mountpoint: &Path) -> PathBuf {
    let key = format!("{location}\0{ref_name}\0{}", mountpoint.display());
    let key = blake3::hash(key.as_bytes()).to_hex();
    state_dir().join("spool").join(&key[..16])
}

/// packfs's directory under `$XDG_STATE_HOME` (or `~/.local/state`;
/// without a home, `/var/lib` for root and the temp directory for others).
pub fn state_dir() -> PathBuf {
    std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))
        .unwrap_or_else(|| {
            // No home: root run by mount(8) or an init system keeps its
            // spool where a reboot does not wipe it (/tmp may be tmpfs).
            // SAFETY: geteuid cannot fail.
            match unsafe { libc::geteuid() } {
                0 => PathBuf::from("/var/lib"),
                _ => std::env::temp_dir(),
            }
        })
        .join("packfs")
}
