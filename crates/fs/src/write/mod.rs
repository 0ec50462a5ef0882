//! Writes through a read-write mount: the spool, open handles, and the
//! flusher that packs closed files and commits them.
//!
//! A file written through the mount lives in a spool file until a flush:
//! closed files are packed into new pack objects (the import's packer), the
//! changed modalities get new Tracks, and a Manifest is committed in the
//! order of `docs/FORMAT.md`. If another writer moved the ref meanwhile,
//! the commit is union-merged onto it (`dataset::merge`). A flush runs when
//! closed files reach `pack_items`/`pack_bytes`, on `fsync`, after
//! `idle_flush` without changes, and at unmount. The rules users see are in
//! `docs/SEMANTICS.md`.

mod flush;
mod journal;
mod recover;
mod session;
mod spool;

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use parking_lot::Mutex;
use thiserror::Error;
use tokio::sync::{watch, Notify};
use tracing::{info, warn};

use crate::namespace::{Attr, Content, Ino, Namespace, NsError, SpoolFile};
use journal::{Journal, Record};
use packfs_core::dataset::{Dataset, DatasetError};
use packfs_core::kind::Kind;
use packfs_core::packer::PackError;
use packfs_core::reader::{ReadError, Reader};
use packfs_format::ns_of_time;
pub use recover::recover;
use session::{Said, Session};
pub use spool::{default_dir, state_dir, PinnedFile, Spool};

/// Settings of a read-write mount. `Default` gives the documented defaults.
#[derive(Clone, Debug)]
pub struct WriteOptions {
    /// Spool directory of a mount; `None`: [`default_dir`] of the mount.
    pub spool_dir: Option<PathBuf>,
    /// A flush starts once this many closed files wait…
    pub pack_items: usize,
    /// …or this many bytes of them.
    pub pack_bytes: u64,
    /// Written files larger than this are stored in chunks of this size.
    pub chunk_bytes: u64,
    /// A flush starts after this long without a change.
    pub idle_flush: Duration,
    /// Most bytes the spool may hold; a write that would pass it waits for
    /// flushes to free space, and gets ENOSPC if none comes.
    pub spool_bytes: u64,
    /// How long the last commit at unmount (or SIGTERM) may take. What has
    /// not been committed by then stays journaled in the spool, and the
    /// next mount of the dataset with this spool commits it.
    pub shutdown_timeout: Duration,
}

impl Default for WriteOptions {
    fn default() -> Self {
        WriteOptions {
            spool_dir: None,
            pack_items: 1024,
            pack_bytes: 64 << 20,
            chunk_bytes: 64 << 20,
            idle_flush: Duration::from_secs(2),
            spool_bytes: 10 << 30,
            // Below systemd's default stop timeout (and our unit's 60 s).
            shutdown_timeout: Duration::from_secs(45),
        }
    }
}

/// Why a write-side operation failed.
#[derive(Debug, Error)]
pub enum WriteError {
    #[error(transparent)]
    Namespace(#[from] NsError),
    #[error("spool {op} {}: {source}", dir.display())]
    Spool {
        op: &'static str,
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("spool {} is in use by another packfs mount", dir.display())]
    SpoolInUse { dir: PathBuf },
    #[error("spool file {}: {source}", path.display())]
    SpoolFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("no such open file handle")]
    BadHandle,
    #[error(
        "spool {} is full ({used} of {limit} bytes) and flushing frees no room; \
         raise the spool limit or close files so they can be committed",
        dir.display()
    )]
    SpoolFull { dir: PathBuf, used: u64, limit: u64 },
    #[error(
        "spool {} holds changes of an earlier mount that are not committed yet; \
         mount with this spool again to commit them",
        dir.display()
    )]
    Unrecovered { dir: PathBuf },
    #[error("reading the old bytes of a file to change it: {0}")]
    CopyUp(#[from] ReadError),
    #[error("uploading written files: {0}")]
    Upload(#[from] PackError),
    #[error("committing written files: {0}")]
    Commit(#[from] DatasetError),
    #[error("the dataset tree of the spool journal's base: {0}")]
    Tree(#[from] packfs_core::tree::TreeError),
    /// A bug: the commit panicked. Nothing was lost: the changes stay in
    /// the spool and the next flush tries again.
    #[error("the commit panicked ({0}); the data stays in the spool for the next attempt")]
    Panicked(String),
    /// A flush this request waited for failed.
    #[error("the flush failed: {0}; the data stays in the spool for the next attempt")]
    Flush(#[source] Arc<WriteError>),
    /// The mount ended before the flush this request waited for.
    #[error("the mount is shutting down; what was written stays in the spool for the next mount")]
    ShuttingDown,
}

impl WriteError {
    fn file(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> WriteError + '_ {
        move |source| WriteError::SpoolFile {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// An open file handle.
struct Handle {
    ino: Ino,
    /// The write session, for a handle open for writing.
    session: Option<Arc<Session>>,
}

/// Outcome of the last flush, by request number.
#[derive(Clone, Debug, Default)]
struct FlushStatus {
    /// Every request up to this number is covered.
    done: u64,
    error: Option<Arc<WriteError>>,
}

/// What a read-write mount holds locally (metrics).
#[derive(Clone, Copy, Debug)]
pub struct SpoolState {
    /// Bytes of all files in the spool.
    pub spool_bytes: u64,
    /// Files written through the mount and not committed yet (open ones
    /// too), and their bytes.
    pub pending_items: usize,
    pub pending_bytes: u64,
}

/// The write side of a read-write mount.
pub struct Writer {
    ns: Arc<Namespace>,
    reader: Reader,
    spool: Spool,
    handles: Mutex<HashMap<u64, Handle>>,
    /// The write session of every file open for writing.
    sessions: Mutex<HashMap<Ino, Arc<Session>>>,
    next_fh: AtomicU64,
    /// Write-opens of one file run one at a time: the first writer copies
    /// its old bytes into the spool before anyone writes. Other files go on.
    opening: InodeLocks,
    /// Closed files and bytes waiting for a flush.
    pending: Mutex<(usize, u64)>,
    journal: Arc<Journal>,
    /// Spool files no version uses any more, deleted between flushes
    /// (see [`Writer::retire`]).
    retired: Mutex<Vec<SpoolFile>>,
    flusher: flush::Flusher,
    wake: Notify,
    /// The next flush must commit everything (set by a full spool).
    want_full: std::sync::atomic::AtomicBool,
    requested: AtomicU64,
    status: watch::Sender<FlushStatus>,
    options: WriteOptions,
}

impl Writer {
    /// The write side for `ns`, committing to `ref_name` of `dataset`,
    /// spooling in `spool_dir` (`options.spool_dir` is not consulted). The
    /// spool's journal must hold nothing uncommitted: run [`recover`] first.
    /// Spool files nothing refers to are moved to `lost+found`.
    pub fn new(
        ns: Arc<Namespace>,
        dataset: Dataset,
        ref_name: &str,
        reader: Reader,
        spool_dir: &std::path::Path,
        options: WriteOptions,
    ) -> Result<Arc<Writer>, WriteError> {
        let spool = Spool::open(spool_dir)?;
        let pending =
            journal::read(&spool.journal_path()).map_err(spool.error("read the journal of"))?;
        if pending.iter().any(|r| !matches!(r, Record::Base(_))) {
            return Err(WriteError::Unrecovered {
                dir: spool.dir().to_path_buf(),
            });
        }
        spool
            .quarantine_leftovers(&HashMap::new())
            .map_err(spool.error("move leftovers of"))?;
        let journal = Journal::create(&spool.journal_path(), ns.tree().manifest_id())
            .map_err(spool.error("start the journal of"))?;
        info!("spool {}", spool.dir().display());
        Ok(Self::build(
            ns, dataset, ref_name, reader, spool, journal, options,
        ))
    }

    fn build(
        ns: Arc<Namespace>,
        dataset: Dataset,
        ref_name: &str,
        reader: Reader,
        spool: Spool,
        journal: Journal,
        options: WriteOptions,
    ) -> Arc<Writer> {
        let journal = Arc::new(journal);
        let flusher = flush::Flusher::new(ns.clone(), dataset, ref_name, journal.clone(), &options);
        Arc::new(Writer {
            ns,
            reader,
            spool,
            handles: Mutex::new(HashMap::new()),
            sessions: Mutex::new(HashMap::new()),
            next_fh: AtomicU64::new(1),
            opening: InodeLocks::default(),
            pending: Mutex::new((0, 0)),
            journal,
            retired: Mutex::new(Vec::new()),
            flusher,
            wake: Notify::new(),
            want_full: std::sync::atomic::AtomicBool::new(false),
            requested: AtomicU64::new(0),
            status: watch::Sender::new(FlushStatus::default()),
            options,
        })
    }

    /// Journals `record`; a failure is logged (the change itself stands,
    /// but would not survive a crash before the next commit).
    fn journal(&self, record: Record) {
        if let Err(e) = self.journal.append(&record) {
            warn!("journal of spool {}: {e}", self.spool.dir().display());
        }
    }

    /// Journals that file `ino` is being written in spool file `spool`: if
    /// the mount dies before it is closed, the next mount moves that file
    /// to `lost+found` under this path.
    fn journal_open(&self, ino: Ino, spool: &SpoolFile) {
        if let Some(record) = open_record(&self.ns, ino, spool) {
            self.journal(record);
        }
    }

    /// The path of entry `name` of directory `parent`.
    fn entry_path(&self, parent: Ino, name: &[u8]) -> Result<String, WriteError> {
        let mut parts = self.ns.dir_path(parent)?;
        parts.push(String::from_utf8_lossy(name).into_owned());
        Ok(parts.join("/"))
    }

    /// `mkdir`, journaled.
    pub fn mkdir(&self, parent: Ino, name: &[u8], perm: u16) -> Result<Attr, WriteError> {
        let _change = self.journal.changing();
        let attr = self.ns.mkdir(parent, name, perm)?;
        self.journal(Record::Mkdir {
            path: self.entry_path(parent, name)?,
            mode: Some(perm),
        });
        Ok(attr)
    }

    /// `rmdir`, journaled.
    pub fn rmdir(&self, parent: Ino, name: &[u8]) -> Result<(), WriteError> {
        let _change = self.journal.changing();
        self.ns.rmdir(parent, name)?;
        self.journal(Record::Rmdir {
            path: self.entry_path(parent, name)?,
        });
        Ok(())
    }

    /// `unlink`, journaled; frees the file's spool once nothing uses it.
    pub fn unlink(&self, parent: Ino, name: &[u8]) -> Result<(), WriteError> {
        let ino = {
            let _change = self.journal.changing();
            let ino = self.ns.unlink(parent, name)?;
            self.journal(Record::Unlink {
                path: self.entry_path(parent, name)?,
            });
            ino
        };
        self.forget_if_unused(ino);
        Ok(())
    }

    /// `rename`, journaled; frees a replaced file's spool once unused.
    pub fn rename(&self, from: (Ino, &[u8]), to: (Ino, &[u8])) -> Result<(), WriteError> {
        let record = Record::Rename {
            from: self.entry_path(from.0, from.1)?,
            to: self.entry_path(to.0, to.1)?,
        };
        let replaced = {
            let _change = self.journal.changing();
            let replaced = self.ns.rename(from.0, from.1, to.0, to.1)?;
            self.journal(record);
            replaced
        };
        if let Some(replaced) = replaced {
            self.forget_if_unused(replaced);
        }
        Ok(())
    }

    fn add_handle(&self, handle: Handle) -> u64 {
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        self.handles.lock().insert(fh, handle);
        fh
    }

    /// A new empty spool file.
    fn new_spool_file(&self) -> Result<(SpoolFile, Arc<File>), WriteError> {
        let (spool, file) = self
            .spool
            .new_file()
            .map_err(self.spool.error("create a file in"))?;
        Ok((spool, Arc::new(file)))
    }

    /// Creates `name` in `parent`, open for writing; returns it and the handle.
    pub fn create(&self, parent: Ino, name: &[u8], perm: u16) -> Result<(Attr, u64), WriteError> {
        let (spool, file) = self.new_spool_file()?;
        let _change = self.journal.changing();
        let session = Arc::new(Session::new(spool.clone(), file, Said::Writing));
        // The session is in place before anyone can find the new node: a
        // writer that opens it at once (under another name after a rename,
        // say) joins this session instead of finding none.
        let mut sessions = self.sessions.lock();
        let attr = match self.ns.create(parent, name, spool.clone(), perm) {
            Ok(attr) => attr,
            Err(e) => {
                drop(sessions);
                self.spool.remove(&[spool]);
                return Err(e.into());
            }
        };
        sessions.insert(attr.ino, session.clone());
        drop(sessions);
        self.journal_open(attr.ino, &spool);
        let fh = self.add_handle(Handle {
            ino: attr.ino,
            session: Some(session),
        });
        Ok((attr, fh))
    }

    /// Opens `ino`; for writing, the first writer starts a write session
    /// (a spool file holding a copy of its bytes, or empty with
    /// `truncate`), which later writers join.
    pub async fn open(&self, ino: Ino, write: bool, truncate: bool) -> Result<u64, WriteError> {
        if !write {
            self.ns.add_reader(ino);
            return Ok(self.add_handle(Handle { ino, session: None }));
        }
        let (first, session) = {
            let _one_at_a_time = self.opening.lock(ino).await;
            // A first writer counts only once its session is in place:
            // until then the file is closed, and a flush commits it as it
            // is. Counted as a reader meanwhile, it keeps its node (and
            // bytes) should it lose its name.
            self.ns.add_reader(ino);
            // A spool version is opened right here: a flush that commits
            // it may delete it before the copy starts.
            let tree = self.ns.tree().clone();
            let joined = self.ns.update_file(ino, false, |f| match f.writers {
                0 if truncate => Some(Ok(None)),
                0 => Some(copy_from(&self.spool, &tree, &f.content).map(Some)),
                _ => {
                    f.writers += 1;
                    None
                }
            });
            let first = matches!(joined, Ok(Some(_)));
            let session = match joined {
                Ok(None) => self.session_of(ino).inspect_err(|_| {
                    let _ = self.ns.update_file(ino, false, |f| f.writers -= 1);
                }),
                Ok(Some(Ok(from))) => self.new_session(ino, from).await,
                Ok(Some(Err(e))) => Err(e),
                Err(e) => Err(e.into()),
            };
            self.ns.remove_reader(ino);
            match session {
                Ok(session) => (first, session),
                Err(e) => {
                    self.retire(self.ns.release_if_unused(ino));
                    return Err(e);
                }
            }
        };
        let fh = self.add_handle(Handle {
            ino,
            session: Some(session.clone()),
        });
        if truncate && !first {
            let emptied = self.change(
                ino,
                &session,
                |file| file.set_len(0),
                |f| {
                    f.size = 0;
                    f.generation += 1;
                    f.mtime = SystemTime::now();
                },
            );
            if let Err(e) = emptied.await {
                self.release(fh);
                return Err(e);
            }
        }
        Ok(fh)
    }

    /// Starts a write session on `ino` with a copy of its bytes `from`
    /// (`None`: empty, for `O_TRUNC`), and counts its first writer.
    async fn new_session(
        &self,
        ino: Ino,
        from: Option<CopyFrom>,
    ) -> Result<Arc<Session>, WriteError> {
        let truncate = from.is_none();
        let (spool, file) = self.new_spool_file()?;
        if let Some(from) = from {
            if let Err(e) = self.copy_up(from, &spool, &file).await {
                self.spool.remove(&[spool]);
                return Err(e);
            }
        }
        // A copy is the complete version it came from until it changes:
        // nothing to journal before then.
        let said = match truncate {
            true => Said::Writing,
            false => Said::Unchanged,
        };
        let session = Arc::new(Session::new(spool.clone(), file, said));
        let _change = self.journal.changing();
        if truncate {
            self.journal_open(ino, &spool);
        }
        self.ns.update_file(ino, truncate, |f| {
            f.writers += 1;
            // Its content now, not `old`: a flush may have committed that
            // version meanwhile (the same bytes, as an item).
            f.origin = Some(std::mem::replace(&mut f.content, Content::Spool(spool)));
            if truncate {
                f.size = 0;
                f.generation += 1;
                f.mtime = SystemTime::now();
            }
        })?;
        self.sessions.lock().insert(ino, session.clone());
        Ok(session)
    }

    /// The write session of `ino`, which has writers.
    fn session_of(&self, ino: Ino) -> Result<Arc<Session>, WriteError> {
        self.sessions
            .lock()
            .get(&ino)
            .cloned()
            .ok_or(WriteError::BadHandle)
    }

    /// Every write session, by inode.
    fn sessions(&self) -> Vec<(Ino, Arc<Session>)> {
        let sessions = self.sessions.lock();
        sessions.iter().map(|(i, s)| (*i, s.clone())).collect()
    }

    /// Changes the live version of `ino` through `apply` and its node
    /// through `update`, once the journal says the live version is being
    /// written (see [`Said`]).
    async fn change(
        &self,
        ino: Ino,
        session: &Session,
        mut apply: impl FnMut(&File) -> std::io::Result<()>,
        update: impl FnOnce(&mut crate::namespace::FileNode),
    ) -> Result<(), WriteError> {
        loop {
            {
                let said = session.said.read();
                if *said == Said::Writing {
                    apply(&session.file).map_err(WriteError::file(&session.spool.path))?;
                    self.ns.update_file(ino, true, update)?;
                    return Ok(());
                }
            }
            self.reopen(ino, session).await?;
        }
    }

    /// Makes the journal say that the live version of `ino` is being
    /// written again: frozen first if the journal calls it complete.
    async fn reopen(&self, ino: Ino, session: &Session) -> Result<(), WriteError> {
        let _one_at_a_time = self.opening.lock(ino).await;
        let complete = *session.said.read() == Said::Complete;
        if complete {
            self.freeze(ino, session).await?;
        }
        let _change = self.journal.changing();
        let mut said = session.said.write();
        match *said {
            Said::Unchanged => self.journal_open(ino, &session.spool),
            Said::Synced => {} // its `Open` stands
            Said::Writing | Said::Complete => return Ok(()),
        }
        *said = Said::Writing;
        Ok(())
    }

    /// Makes the live version's bytes as they are now the complete version
    /// of `ino`: a copy of them becomes its `origin` and is journaled, so
    /// the live version may change again. Nothing to do if `origin` holds
    /// them already. The caller holds the inode's `opening` lock.
    async fn freeze(&self, ino: Ino, session: &Session) -> Result<(), WriteError> {
        if session.said.read().is_unchanged() {
            return Ok(());
        }
        // Unchanged during the copy: the live version is the copy's twin.
        let generation = self.ns.update_existing_file(ino, |f| f.generation);
        let (copy, to) = self.new_spool_file()?;
        let from = self.spool.open_pinned(&session.spool);
        let to = Arc::try_unwrap(to).expect("a new spool file has one owner");
        let copied = blocking(copy_file(from, session.spool.path.clone(), to)).await;
        let bytes = match copied {
            Ok(bytes) => bytes,
            Err(e) => {
                self.spool.remove(&[copy]);
                // The session ended meanwhile (its version committed and
                // deleted): nothing open is left to freeze.
                let current = self.sessions.lock().get(&ino).cloned();
                return match current {
                    Some(s) if std::ptr::eq(&*s, session) => Err(e),
                    _ => Ok(()),
                };
            }
        };
        self.spool.resized(bytes, 0);
        let replaced = {
            let _change = self.journal.changing();
            let mut said = session.said.write();
            let replaced = match *said {
                Said::Unchanged | Said::Synced => None,
                _ => self
                    .ns
                    .update_file(ino, true, |f| {
                        let live = f.writers > 0
                            && matches!(&f.content, Content::Spool(s) if *s == session.spool);
                        let twin = Some(f.generation) == generation;
                        live.then(|| (f.origin.replace(Content::Spool(copy.clone())), twin))
                    })
                    .ok()
                    .flatten(),
            };
            if let Some((_, twin)) = replaced {
                if let Some(record) = put_record(&self.ns, ino, &copy, bytes) {
                    self.journal(record);
                }
                match (twin, *said) {
                    (true, Said::Writing) => *said = Said::Synced,
                    (true, _) => *said = Said::Unchanged,
                    // A write raced the copy (it began before the close).
                    (false, Said::Complete) => {
                        self.journal_open(ino, &session.spool);
                        *said = Said::Writing;
                    }
                    (false, _) => {}
                }
            }
            replaced.map(|(old, _)| old)
        };
        match replaced {
            Some(Some(Content::Spool(old))) => self.retire(vec![old]),
            Some(_) => {}
            None => self.spool.remove(&[copy]),
        }
        Ok(())
    }

    /// Freezes every live version the journal calls complete, so a flush
    /// commits those bytes (and not the version before their close).
    async fn freeze_complete_versions(&self) -> Result<(), WriteError> {
        for (ino, session) in self.sessions() {
            if *session.said.read() == Said::Complete {
                let _one_at_a_time = self.opening.lock(ino).await;
                self.freeze(ino, &session).await?;
            }
        }
        Ok(())
    }

    /// Journal records that keep what the journal says about files open
    /// for writing across a compaction (none of it is committed).
    fn session_records(&self) -> Vec<Record> {
        self.sessions()
            .into_iter()
            .filter_map(|(ino, session)| match *session.said.read() {
                Said::Writing | Said::Synced => open_record(&self.ns, ino, &session.spool),
                Said::Complete => put_record(&self.ns, ino, &session.spool, session.len()),
                Said::Unchanged => None,
            })
            .collect()
    }

    /// Copies the bytes of version `old` into spool file `to` (open as
    /// `file`): a spool version by the kernel (`copy_file_range`), a
    /// stored item through the cache. File I/O runs on blocking threads.
    async fn copy_up(
        &self,
        from: CopyFrom,
        to: &SpoolFile,
        file: &Arc<File>,
    ) -> Result<(), WriteError> {
        const STEP: u64 = 8 << 20;
        let item = match from {
            CopyFrom::Spool(old, path) => {
                let file = file.clone();
                let copied = blocking(move || {
                    std::io::copy(&mut &*old, &mut file.as_ref()).map_err(WriteError::file(&path))
                })
                .await?;
                self.spool.resized(copied, 0);
                return Ok(());
            }
            CopyFrom::Item(item) => item,
        };
        let mut offset = 0;
        while offset < item.size {
            let bytes = self.reader.read_item(&item, offset, STEP).await?;
            let (file, path, len) = (file.clone(), to.path.clone(), bytes.len() as u64);
            blocking(move || {
                file.write_all_at(&bytes, offset)
                    .map_err(WriteError::file(&path))
            })
            .await?;
            offset += len;
        }
        self.spool.resized(item.size, 0);
        Ok(())
    }

    fn writable(&self, fh: u64) -> Result<(Ino, Arc<Session>), WriteError> {
        let handles = self.handles.lock();
        let h = handles.get(&fh).ok_or(WriteError::BadHandle)?;
        Ok((h.ino, h.session.clone().ok_or(WriteError::BadHandle)?))
    }

    /// Writes `data` at `offset` through handle `fh`. Dropped while
    /// pending, it has written nothing (at worst a frozen copy it made is
    /// the file's complete version, or an unused one waits in the spool
    /// for the next mount's clean-up).
    pub async fn write(&self, fh: u64, offset: u64, data: &[u8]) -> Result<(), WriteError> {
        let (ino, session) = self.writable(fh)?;
        let end = offset + data.len() as u64;
        let grown = end.saturating_sub(self.ns.attr(ino)?.size);
        self.make_room(grown).await?;
        let write = |file: &File| file.write_all_at(data, offset);
        self.change(ino, &session, write, |f| {
            f.size = f.size.max(end);
            f.generation += 1;
            f.mtime = SystemTime::now();
        })
        .await?;
        self.spool.resized(grown, 0);
        Ok(())
    }

    /// Waits until the spool has room for `bytes` more: flushes free what
    /// they commit. Gives up with `SpoolFull` when no flush can help (no
    /// closed file waits) or none has after a while.
    async fn make_room(&self, bytes: u64) -> Result<(), WriteError> {
        const PATIENCE: Duration = Duration::from_secs(60);
        // A flush that just committed frees its files a moment later:
        // "nothing left to commit" must hold this long before it counts.
        const SETTLE: Duration = Duration::from_secs(1);
        let limit = self.options.spool_bytes;
        let start = std::time::Instant::now();
        let mut nothing_to_commit_since = None;
        while self.spool.used() + bytes > limit {
            let now = std::time::Instant::now();
            let stuck = match self.flusher.has_changes() {
                true => {
                    nothing_to_commit_since = None;
                    false
                }
                false => now - *nothing_to_commit_since.get_or_insert(now) >= SETTLE,
            };
            if stuck || now - start >= PATIENCE {
                return Err(WriteError::SpoolFull {
                    dir: self.spool.dir().to_path_buf(),
                    used: self.spool.used(),
                    limit,
                });
            }
            self.want_full.store(true, Ordering::SeqCst);
            self.wake.notify_one();
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    }

    /// Sets the size of file `ino` (through `fh` if given).
    pub async fn set_size(&self, ino: Ino, fh: Option<u64>, size: u64) -> Result<(), WriteError> {
        let writable = fh.and_then(|fh| self.writable(fh).ok());
        let (session, own_handle) = match writable {
            Some((_, session)) => (session, None),
            None => {
                let fh = self.open(ino, true, size == 0).await?;
                (self.writable(fh)?.1, Some(fh))
            }
        };
        let resized = async {
            let old = self.ns.attr(ino)?.size;
            self.make_room(size.saturating_sub(old)).await?;
            let resize = |file: &File| file.set_len(size);
            self.change(ino, &session, resize, |f| {
                f.size = size;
                f.generation += 1;
                f.mtime = SystemTime::now();
            })
            .await?;
            self.spool
                .resized(size.saturating_sub(old), old.saturating_sub(size));
            Ok(())
        };
        let result = resized.await;
        if let Some(fh) = own_handle {
            self.release(fh);
        }
        result
    }

    /// A descriptor of handle `fh` was closed (FLUSH, which `close(2)`
    /// waits for): the version written through it is journaled as
    /// complete, so it survives a crash before the last close (RELEASE,
    /// which the kernel sends after `close` has returned).
    pub fn closed(&self, fh: u64) {
        let (ino, session) = match self.handles.lock().get(&fh) {
            Some(Handle {
                ino,
                session: Some(session),
            }) => (*ino, session.clone()),
            _ => return,
        };
        let _change = self.journal.changing();
        let mut said = session.said.write();
        match *said {
            Said::Writing => {
                // None: unlinked meanwhile, nothing to keep.
                if let Some(record) = put_record(&self.ns, ino, &session.spool, session.len()) {
                    self.journal(record);
                    *said = Said::Complete;
                }
            }
            // Complete as its synced copy, which the journal names.
            Said::Synced => *said = Said::Unchanged,
            Said::Complete | Said::Unchanged => {}
        }
    }

    /// Closes handle `fh`. The last writer's close ends the write session:
    /// its version becomes the file's, due at the next flush.
    pub fn release(&self, fh: u64) {
        let Some(h) = self.handles.lock().remove(&fh) else {
            return;
        };
        let Some(session) = h.session else {
            // A reader changes nothing: a stored file it read stays out of
            // the overlay.
            self.ns.remove_reader(h.ino);
            self.retire(self.ns.release_if_unused(h.ino));
            return;
        };
        let (ended, changed) = {
            let _change = self.journal.changing();
            let said = session.said.write();
            // A session that changed nothing since its complete version
            // (`origin`, which it keeps) leaves nothing to commit.
            let changed = !said.is_unchanged();
            let ended = self.ns.update_file(h.ino, changed, |f| {
                f.writers -= 1;
                if f.writers > 0 {
                    return None;
                }
                // The version no longer needed: `origin`, unless the live
                // version is a copy of it (nothing changed since).
                Some(match (*said, f.origin.take()) {
                    (Said::Unchanged | Said::Synced, Some(origin)) => {
                        Some(std::mem::replace(&mut f.content, origin))
                    }
                    (_, origin) => origin,
                })
            });
            let ended = match ended {
                Ok(ended) => ended,
                Err(e) => {
                    warn!("closing inode {}: {e}", h.ino);
                    return;
                }
            };
            // Journaled before the old version goes: a crash in between
            // leaves a record pointing at the new one.
            if ended.is_some() && *said == Said::Writing {
                if let Some(record) = put_record(&self.ns, h.ino, &session.spool, session.len()) {
                    self.journal(record);
                }
            }
            (ended, changed)
        };
        let Some(superseded) = ended else {
            return;
        };
        {
            let mut sessions = self.sessions.lock();
            // A new session may have started since the count reached zero.
            if sessions
                .get(&h.ino)
                .is_some_and(|s| Arc::ptr_eq(s, &session))
            {
                sessions.remove(&h.ino);
            }
        }
        if let Some(Content::Spool(old)) = superseded {
            self.retire(vec![old]);
        }
        self.retire(self.ns.release_if_unused(h.ino));
        if !changed {
            return;
        }
        let size = self.ns.attr(h.ino).map_or(0, |a| a.size);
        let mut pending = self.pending.lock();
        pending.0 += 1;
        pending.1 += size;
        if pending.0 >= self.options.pack_items || pending.1 >= self.options.pack_bytes {
            *pending = (0, 0);
            self.wake.notify_one();
        }
    }

    /// Frees the spool files of `ino` once it has neither a name nor an
    /// open handle (after unlink, or a rename that replaced it).
    pub fn forget_if_unused(&self, ino: Ino) {
        self.retire(self.ns.release_if_unused(ino));
    }

    /// Spool files no version uses any more. A flush running now may still
    /// be uploading them, so they are deleted when no flush runs (see
    /// [`Writer::delete_retired`]).
    fn retire(&self, files: Vec<SpoolFile>) {
        if !files.is_empty() {
            self.retired.lock().extend(files);
        }
    }

    /// Deletes the retired spool files; the flusher calls it between flushes.
    fn delete_retired(&self) {
        let files = std::mem::take(&mut *self.retired.lock());
        self.spool.remove(&files);
    }

    /// Sets the mode and/or mtime of `ino` (`chmod`, `utimens`), journaled;
    /// both are committed with the file or directory.
    pub fn set_times_and_mode(
        &self,
        ino: Ino,
        perm: Option<u16>,
        mtime: Option<SystemTime>,
    ) -> Result<(), WriteError> {
        self.ns.set_attrs(ino, perm, mtime)?;
        let path = match self.ns.attr(ino)?.kind {
            Kind::Dir => Some(self.ns.dir_path(ino)?.join("/")),
            Kind::File => self.ns.file_path(ino)?,
        };
        if let Some(path) = path {
            self.journal(Record::SetAttr {
                path,
                mode: perm,
                mtime_ns: mtime.map(ns_of_time),
            });
        }
        Ok(())
    }

    /// `fsync` of file `ino`: its bytes as they are now, even while it is
    /// open for writing, are committed with everything else before this
    /// returns.
    pub async fn sync_file(&self, ino: Ino) -> Result<(), WriteError> {
        let session = self.sessions.lock().get(&ino).cloned();
        if let Some(session) = session {
            let _one_at_a_time = self.opening.lock(ino).await;
            self.freeze(ino, &session).await?;
        }
        self.sync().await
    }

    /// The spool's bytes and the files not committed yet, now.
    pub fn spool_state(&self) -> SpoolState {
        let (pending_items, pending_bytes) = self.ns.uncommitted();
        SpoolState {
            spool_bytes: self.spool.used(),
            pending_items,
            pending_bytes,
        }
    }

    /// Flushes everything changed so far and waits until it is committed.
    pub async fn sync(&self) -> Result<(), WriteError> {
        let ticket = self.requested.fetch_add(1, Ordering::SeqCst) + 1;
        self.wake.notify_one();
        let mut status = self.status.subscribe();
        let status = status
            .wait_for(|s| s.done >= ticket)
            .await
            .map_err(|_| WriteError::ShuttingDown)?;
        match &status.error {
            Some(e) => Err(WriteError::Flush(e.clone())),
            None => Ok(()),
        }
    }

    /// The flusher: waits for a reason to flush, flushes, reports. Runs
    /// until the writer is dropped.
    pub async fn run_flusher(self: Arc<Self>) {
        let mut backoff = Duration::from_millis(200);
        loop {
            let woken = tokio::time::timeout(self.options.idle_flush, self.wake.notified()).await;
            let ticket = self.requested.load(Ordering::SeqCst);
            let idle = woken.is_err();
            if idle && !self.flusher.has_changes() && ticket == self.status.borrow().done {
                self.delete_retired();
                continue;
            }
            // Only a flush for pack thresholds may leave a partial pack for
            // later; fsync, a full spool and idleness want everything.
            let full = idle
                || ticket > self.status.borrow().done
                || self.want_full.swap(false, Ordering::SeqCst);
            let result = self.flush_some(full).await.map_err(Arc::new);
            if let Err(e) = &result {
                warn!("flush failed (retrying in {backoff:?}): {e}");
            }
            let failed = result.is_err();
            self.status.send_replace(FlushStatus {
                done: ticket,
                error: result.err(),
            });
            if failed {
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(30));
                self.wake.notify_one();
            } else {
                backoff = Duration::from_millis(200);
            }
        }
    }

    /// One flush: commits every change so far (see `flush.rs`).
    pub async fn flush(&self) -> Result<(), WriteError> {
        self.flush_some(true).await
    }

    /// The last commit, at unmount: bounded by
    /// [`WriteOptions::shutdown_timeout`]. Whatever it leaves (a timeout, a
    /// store that is down) stays in the spool with its journal.
    pub async fn shutdown(&self) {
        let left = |why: String| {
            warn!(
                "{why}; written files stay in the spool {} and the next mount of this dataset \
                 with that spool commits them",
                self.spool.dir().display()
            )
        };
        match tokio::time::timeout(self.options.shutdown_timeout, self.flush()).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => left(format!("the final commit failed: {e}")),
            Err(_) => left(format!(
                "the final commit did not finish within the shutdown timeout ({:?})",
                self.options.shutdown_timeout
            )),
        }
    }

    async fn flush_some(&self, full: bool) -> Result<(), WriteError> {
        self.freeze_complete_versions().await?;
        let result = self.flusher.flush(full, || self.session_records()).await;
        self.delete_retired();
        self.spool.remove(&result?);
        Ok(())
    }

    /// The spool file of a version being read, for [`Content::Spool`].
    pub fn read_spool(
        &self,
        spool: &SpoolFile,
        offset: u64,
        size: u32,
    ) -> std::io::Result<Vec<u8>> {
        let file = self.spool.open_pinned(spool)?;
        let mut buf = vec![0u8; size as usize];
        let mut filled = 0;
        while filled < buf.len() {
            match file.read_at(&mut buf[filled..], offset + filled as u64)? {
                0 => break,
                n => filled += n,
            }
        }
        buf.truncate(filled);
        Ok(buf)
    }
}

/// The journal record that file `ino` is complete as spool file `spool`
/// of `size` bytes (`None` once it has no name).
fn put_record(ns: &Namespace, ino: Ino, spool: &SpoolFile, size: u64) -> Option<Record> {
    let (Ok(Some(path)), Some(file)) = (ns.file_path(ino), spool.file_name()) else {
        return None;
    };
    Some(Record::Put {
        path,
        file,
        size,
        attrs: ns.file_attrs(ino).unwrap_or_default(),
    })
}

/// The journal record that file `ino` is being written in spool file
/// `spool` (`None` once it has no name).
fn open_record(ns: &Namespace, ino: Ino, spool: &SpoolFile) -> Option<Record> {
    let (Ok(Some(path)), Some(file)) = (ns.file_path(ino), spool.file_name()) else {
        return None;
    };
    Some(Record::Open { path, file })
}

/// The bytes a write session copies.
enum CopyFrom {
    /// A spool version, opened (it may be deleted while it is copied).
    Spool(PinnedFile, PathBuf),
    Item(packfs_core::dataset::ItemData),
}

/// Where the bytes of `content` are to be copied from.
fn copy_from(
    spool: &Spool,
    tree: &packfs_core::tree::Tree,
    content: &Content,
) -> Result<CopyFrom, WriteError> {
    Ok(match content {
        Content::Spool(s) => {
            let file = spool.open_pinned(s).map_err(WriteError::file(&s.path))?;
            CopyFrom::Spool(file, s.path.clone())
        }
        Content::Base(i) => CopyFrom::Item(tree.item(*i).data()),
        Content::Committed(c) => CopyFrom::Item(c.item.data()),
    })
}

/// Runs blocking file I/O on tokio's blocking threads, off the async ones.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, WriteError> + Send + 'static,
) -> Result<T, WriteError> {
    tokio::task::spawn_blocking(work)
        .await
        .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))
}

/// Copies spool file `from` (open pinned) into `to` (`copy_file_range`: a
/// reflink or an in-kernel copy); returns the bytes copied.
fn copy_file(
    from: Result<PinnedFile, std::io::Error>,
    from_path: std::path::PathBuf,
    to: File,
) -> impl FnOnce() -> Result<u64, WriteError> {
    move || {
        let from = from.map_err(WriteError::file(&from_path))?;
        std::io::copy(&mut &*from, &mut &to).map_err(WriteError::file(&from_path))
    }
}

/// One async lock per inode, made on demand and dropped with its last user.
#[derive(Default)]
struct InodeLocks {
    locks: Mutex<HashMap<Ino, Arc<tokio::sync::Mutex<()>>>>,
}

/// Holds the lock of one inode.
struct InodeGuard<'a> {
    locks: &'a InodeLocks,
    ino: Ino,
    _guard: tokio::sync::OwnedMutexGuard<()>,
}

impl InodeLocks {
    async fn lock(&self, ino: Ino) -> InodeGuard<'_> {
        let lock = self.locks.lock().entry(ino).or_default().clone();
        InodeGuard {
            locks: self,
            ino,
            _guard: lock.lock_owned().await,
        }
    }
}

impl Drop for InodeGuard<'_> {
    fn drop(&mut self) {
        let mut locks = self.locks.locks.lock();
        // Only the map and this guard's lock left: nobody waits.
        if locks
            .get(&self.ino)
            .is_some_and(|l| Arc::strong_count(l) == 2)
        {
            locks.remove(&self.ino);
        }
    }
}
