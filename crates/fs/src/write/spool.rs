//! The spool: a private local directory holding the bytes of files written
//! through the mount until a flush has packed and committed them.
//!
//! Layout: `data/<n>` holds one version of one file; `journal` lists the
//! changes not committed yet (see `journal.rs`); `lock` is held (`flock`)
//! by the one mount using the directory. Files a dead mount left that the
//! journal does not name (files it never closed) are moved to
//! `lost+found/<unix time>/` and reported, never deleted.
//!
//! Spool files are recycled, not deleted: a file no version uses any more
//! is renamed away from its name (`<n>.free`), emptied and renamed to a
//! new number for a later file. Creating and deleting files is what costs
//! on ext4 (about a millisecond per create, and without a journal every
//! new inode is checked against recent deletions), a rename does not. A
//! file's name is never used for other bytes: its old name is gone before
//! it is emptied, as after a deletion. Every open of a spool file by name
//! goes through [`Spool::open_pinned`], and a file open that way is deleted
//! instead of recycled, so no descriptor ever sees a recycled file's new
//! bytes. Empty files (made ahead or recycled, never used) stay in the
//! spool at unmount, and the next mount takes them for its new files once
//! its journal names nothing.

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

/// The journal's file name in a spool directory.
pub(super) const JOURNAL: &str = "journal";
/// Made in the spool directory when a change could not be journaled: the
/// journal may then not name every version written, and files it does not
/// name are kept in `lost+found` instead of deleted.
const JOURNAL_GAP: &str = "journal-gap";

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
    /// Recycled files, empty, under new numbers, not open.
    free: std::sync::Arc<parking_lot::Mutex<Vec<SpoolFile>>>,
    /// Spool files open by name (for reading or copying), with how many
    /// times: recycling skips them (see [`Spool::open_pinned`]).
    pins: Pins,
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
        let lock = packfs_core::private_dir::lock(dir, LOCK_WAIT)
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
        let free = std::sync::Arc::new(parking_lot::Mutex::new(Vec::<SpoolFile>::new()));
        let (refill, wanted) = std::sync::mpsc::sync_channel(1);
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let thread = {
            let (data, next, ready, free, stop) = (
                data.clone(),
                next.clone(),
                ready.clone(),
                free.clone(),
                stop.clone(),
            );
            std::thread::Builder::new()
                .name("packfs-spool".into())
                .spawn(move || {
                    while wanted.recv().is_ok() {
                        while !stop.load(Ordering::SeqCst) && ready.lock().len() < READY_FILES {
                            let recycled = free.lock().pop();
                            match take(recycled, &data, &next) {
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
            free,
            pins: Pins::default(),
            refill,
            creator: Some((thread, stop)),
            _lock: lock,
        })
    }

    /// The journal of this spool.
    pub(crate) fn journal_path(&self) -> PathBuf {
        self.dir.join(JOURNAL)
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

    /// Records that a change could not be journaled (see `JOURNAL_GAP`).
    pub(crate) fn mark_journal_gap(&self) {
        if let Err(e) = fs::write(self.dir.join(JOURNAL_GAP), b"") {
            warn!("spool {}: {e}", self.dir.display());
        }
    }

    /// Once the journal holds nothing to replay: moves the files of a dead
    /// mount's unfinished writes (`names`: the journal's `Open` records
    /// with no `Put` after them) to `lost+found/<unix time>/` under their
    /// paths, and reports them. Every other file still holding bytes is a
    /// version already committed or replaced (the journal names each
    /// version before a byte is written to it, and a commit drops its
    /// records before it deletes its files), and is deleted, unless a
    /// change could not be journaled: then it is kept in `lost+found`
    /// under its number.
    pub(crate) fn quarantine_leftovers(
        &self,
        names: &std::collections::HashMap<String, String>,
    ) -> std::io::Result<()> {
        let gap = self.dir.join(JOURNAL_GAP);
        let keep_unnamed = gap.exists();
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
            // Being recycled: no version used it any more.
            if entry.file_name().to_string_lossy().ends_with(FREE) {
                fs::remove_file(&path)?;
                continue;
            }
            // Empty files hold nothing: files created ahead or recycled
            // and never used. Taken for new files (the journal names
            // nothing now: everything it named is committed or found
            // below), which saves creating them.
            if entry.metadata()?.len() == 0 {
                let mut free = self.free.lock();
                match free.len() < FREE_FILES && number.is_some() {
                    true => free.push(SpoolFile { path }),
                    false => fs::remove_file(&path)?,
                }
                continue;
            }
            let named = number.is_some_and(|n| names.contains_key(&n.to_string()));
            if named || keep_unnamed {
                leftovers.push(path);
            } else {
                tracing::debug!("{}: committed or replaced; deleted", path.display());
                fs::remove_file(&path)?;
            }
        }
        if keep_unnamed {
            fs::remove_file(&gap)?;
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
    pub(crate) fn new_file(&self) -> std::io::Result<(SpoolFile, File)> {
        let (ready, left) = {
            let mut ready = self.ready.lock();
            (ready.pop(), ready.len())
        };
        // The creator is woken once per half a pool, not per file: each
        // wake-up is a context switch in the path of a `create`.
        if left <= REFILL_AT {
            let _ = self.refill.try_send(());
        }
        match ready {
            Some(f) => Ok(f),
            None => take(self.free.lock().pop(), &self.data, &self.next),
        }
    }

    /// Opens spool file `file` for reading. While the returned file is
    /// open, `file` is deleted rather than recycled when no version uses
    /// it any more: its descriptor never sees another file's bytes.
    pub(crate) fn open_pinned(&self, file: &SpoolFile) -> std::io::Result<PinnedFile> {
        let mut pins = self.pins.0.lock();
        // Under the lock: a recycling that has not renamed the file yet
        // waits for this open, and after the rename the name is gone.
        let opened = File::open(&file.path)?;
        *pins.entry(file.path.clone()).or_default() += 1;
        Ok(PinnedFile {
            file: opened,
            path: file.path.clone(),
            pins: self.pins.clone(),
        })
    }

    /// Recycles (or deletes) spool files no version of any file uses any
    /// more: see the module's documentation.
    pub fn remove(&self, files: &[SpoolFile]) {
        for f in files {
            let len = fs::metadata(&f.path).map_or(0, |m| m.len());
            match self.recycle(f) {
                Ok(()) => {
                    self.used.fetch_sub(len.min(self.used()), Ordering::Relaxed);
                }
                Err(e) => warn!("removing spool file {}: {e}", f.path.display()),
            }
        }
    }

    fn recycle(&self, f: &SpoolFile) -> std::io::Result<()> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let freed = self.data.join(format!("{n}{FREE}"));
        {
            let pins = self.pins.0.lock();
            if pins.contains_key(&f.path) || self.free.lock().len() >= FREE_FILES {
                return fs::remove_file(&f.path);
            }
            // Its name goes first, as in a deletion: nobody opens it again.
            fs::rename(&f.path, &freed)?;
        }
        OpenOptions::new().write(true).truncate(true).open(&freed)?;
        let path = self.data.join(n.to_string());
        fs::rename(&freed, &path)?;
        self.free.lock().push(SpoolFile { path });
        Ok(())
    }

    /// Bytes in the spool's files.
    pub(crate) fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    /// Accounts for a file growing by `grown` or shrinking by `shrunk` bytes.
    pub(crate) fn resized(&self, grown: u64, shrunk: u64) {
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
        // Files created ahead or recycled and never used stay: empty, they
        // are the next mount's first new files (see `quarantine_leftovers`).
    }
}

/// Empty files the background creator keeps ready.
const READY_FILES: usize = 64;

/// The creator refills the ready files once this few are left.
const REFILL_AT: usize = READY_FILES / 2;

/// Recycled files kept for reuse at most (empty files: an inode each).
const FREE_FILES: usize = 4096;

/// The name ending of a file being recycled.
const FREE: &str = ".free";

/// Spool files open by name, with their open count.
#[derive(Debug, Default, Clone)]
struct Pins(std::sync::Arc<parking_lot::Mutex<std::collections::HashMap<PathBuf, usize>>>);

/// A spool file open for reading; see `open_pinned`.
#[derive(Debug)]
pub struct PinnedFile {
    file: File,
    path: PathBuf,
    pins: Pins,
}

impl std::ops::Deref for PinnedFile {
    type Target = File;
    fn deref(&self) -> &File {
        &self.file
    }
}

impl Drop for PinnedFile {
    fn drop(&mut self) {
        let mut pins = self.pins.0.lock();
        if let Some(count) = pins.get_mut(&self.path) {
            *count -= 1;
            if *count == 0 {
                pins.remove(&self.path);
            }
        }
    }
}

/// A recycled file (opened for reading and writing) if there is one,
/// else a new one.
fn take(
    recycled: Option<SpoolFile>,
    data: &Path,
    next: &AtomicU64,
) -> std::io::Result<(SpoolFile, File)> {
    match recycled {
        Some(f) => {
            let file = OpenOptions::new().read(true).write(true).open(&f.path)?;
            Ok((f, file))
        }
        None => create(data, next),
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::unix::fs::FileExt;

    /// `spool` without its creator thread and its files made ahead, so
    /// the next new file is a recycled one if there is one.
    fn quiet(spool: &mut Spool) {
        if let Some((thread, stop)) = spool.creator.take() {
            stop.store(true, Ordering::SeqCst);
            let _ = spool.refill.try_send(());
            thread.join().unwrap();
        }
        spool.ready.lock().clear();
    }

    /// A quiet spool in `dir` and a file in it holding "old bytes".
    fn written(dir: &Path) -> (Spool, SpoolFile) {
        let mut spool = Spool::open(dir).unwrap();
        quiet(&mut spool);
        let (old, file) = spool.new_file().unwrap();
        file.write_all_at(b"old bytes", 0).unwrap();
        (spool, old)
    }

    fn read_all(mut f: &File) -> Vec<u8> {
        let mut bytes = Vec::new();
        f.read_to_end(&mut bytes).unwrap();
        bytes
    }

    /// A file written, then removed: its name is gone, and the next new
    /// file is it, emptied, under a new name.
    #[test]
    fn a_removed_file_is_recycled_under_a_new_name() {
        let dir = tempfile::tempdir().unwrap();
        let (spool, old) = written(dir.path());
        let inode = |p: &Path| std::os::unix::fs::MetadataExt::ino(&fs::metadata(p).unwrap());
        let old_inode = inode(&old.path);
        spool.remove(std::slice::from_ref(&old));
        assert!(!old.path.exists(), "the old name is gone");
        assert!(matches!(
            spool.open_pinned(&old).map_err(|e| e.kind()),
            Err(std::io::ErrorKind::NotFound)
        ));
        let (new, file) = spool.new_file().unwrap();
        assert_ne!(new.path, old.path, "never the old name");
        assert_eq!(inode(&new.path), old_inode, "the same file, recycled");
        assert!(read_all(&file).is_empty(), "emptied");
        drop(spool);
    }

    /// A file open by name (a reader, a copy) when it is removed is
    /// deleted, not recycled: the reader keeps seeing its bytes, never a
    /// new file's.
    #[test]
    fn a_file_open_by_a_reader_is_never_recycled() {
        let dir = tempfile::tempdir().unwrap();
        let (spool, old) = written(dir.path());
        let reader = spool.open_pinned(&old).unwrap();
        spool.remove(std::slice::from_ref(&old));
        assert!(!old.path.exists());
        assert!(spool.free.lock().is_empty(), "deleted, not recycled");
        for _ in 0..8 {
            let (_, f) = spool.new_file().unwrap();
            f.write_all_at(b"NEW BYTES", 0).unwrap();
        }
        let mut buf = [0u8; 9];
        reader.read_exact_at(&mut buf, 0).unwrap();
        assert_eq!(&buf, b"old bytes");
        drop(reader);
        assert!(spool.pins.0.lock().is_empty(), "unpinned on close");
        // Once closed, files are recycled again.
        let (other, _) = spool.new_file().unwrap();
        spool.remove(std::slice::from_ref(&other));
        assert_eq!(spool.free.lock().len(), 1);
    }

    /// A crash in the middle of a recycling leaves a `.free` file (bytes no
    /// version uses) or an empty numbered one: the next mount deletes the
    /// first, takes the second (and the files made ahead) for new files,
    /// and reports nothing in lost+found.
    #[test]
    fn a_recycling_cut_short_leaves_nothing_for_lost_and_found() {
        let dir = tempfile::tempdir().unwrap();
        {
            let spool = Spool::open(dir.path()).unwrap();
            let (f, file) = spool.new_file().unwrap();
            file.write_all_at(b"committed", 0).unwrap();
            fs::rename(&f.path, dir.path().join("data/123.free")).unwrap();
            fs::write(dir.path().join("data/124"), b"").unwrap();
        }
        let mut spool = Spool::open(dir.path()).unwrap();
        quiet(&mut spool);
        spool.quarantine_leftovers(&Default::default()).unwrap();
        assert!(!dir.path().join("lost+found").exists());
        assert!(!dir.path().join("data/123.free").exists());
        let adopted = dir.path().join("data/124");
        assert!(spool.free.lock().iter().any(|f| f.path == adopted));
        while !spool.free.lock().is_empty() {
            let (_, file) = spool.new_file().unwrap();
            assert!(read_all(&file).is_empty());
        }
    }

    /// A file holding bytes that the journal does not name is a version
    /// committed or replaced: deleted, unless a change could not be
    /// journaled, which keeps it in lost+found under its number.
    #[test]
    fn files_the_journal_does_not_name_are_deleted_unless_it_has_a_gap() {
        for gap in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            fs::create_dir_all(dir.path().join("data")).unwrap();
            fs::write(dir.path().join("data/7"), b"committed").unwrap();
            fs::write(dir.path().join("data/8"), b"never closed").unwrap();
            let mut spool = Spool::open(dir.path()).unwrap();
            quiet(&mut spool);
            if gap {
                spool.mark_journal_gap();
            }
            let names = std::collections::HashMap::from([("8".to_string(), "t/m/f".to_string())]);
            spool.quarantine_leftovers(&names).unwrap();
            let found: Vec<PathBuf> = fs::read_dir(dir.path().join("lost+found"))
                .unwrap()
                .flat_map(|stamp| walk(&stamp.unwrap().path()))
                .collect();
            let mut kept: Vec<String> = found
                .iter()
                .map(|p| String::from_utf8(fs::read(p).unwrap()).unwrap())
                .collect();
            kept.sort();
            let want = match gap {
                false => vec!["never closed"],
                true => vec!["committed", "never closed"],
            };
            assert_eq!(kept, want, "gap: {gap}");
            assert!(!dir.path().join("data/7").exists());
            assert!(!dir.path().join(JOURNAL_GAP).exists());
        }
    }

    /// The files below `dir`.
    fn walk(dir: &Path) -> Vec<PathBuf> {
        let mut files = Vec::new();
        for entry in fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            match path.is_dir() {
                true => files.extend(walk(&path)),
                false => files.push(path),
            }
        }
        files
    }
}
