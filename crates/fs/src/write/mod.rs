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
//!
//! - this file: the [`Writer`] and how it starts;
//! - `handles.rs`: open handles (create, open, write, resize, close);
//! - `session.rs`: write sessions, the live version of a file open for
//!   writing, and what the journal says of it;
//! - `changes.rs`: changes of names and attributes, journaled;
//! - `copy.rs`: copying a file's old bytes into the spool (copy-up);
//! - `space.rs`: the spool's room, new files and files no longer used;
//! - `schedule.rs`: when flushes run, and who waits for them;
//! - `flush.rs`: one flush (pack, upload, commit); `journal.rs` and
//!   `recover.rs`: crash recovery; `spool.rs`: the spool directory.
mod changes;
mod copy;
mod error;
mod flush;
mod handles;
mod journal;
mod locks;
mod options;
mod recover;
mod schedule;
mod session;
mod space;
mod spool;

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use packfs_core::dataset::Dataset;
use packfs_core::reader::Reader;
use parking_lot::Mutex;
use tokio::sync::{watch, Notify};
use tracing::info;

use crate::namespace::{Ino, Namespace, SpoolFile};
pub use error::WriteError;
use handles::Handle;
use journal::{Journal, Record};
use locks::InodeLocks;
pub use options::WriteOptions;
pub use recover::recover;
use schedule::FlushStatus;
use session::Session;
pub use space::SpoolState;
pub use spool::{default_dir, state_dir, PinnedFile, Spool};

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

    /// The spool directory.
    /// The Manifest the next commit goes onto (and merges from, if the
    /// ref moved): this mount's last commit, or the one it mounted.
    pub async fn base(&self) -> packfs_format::ObjectId {
        self.flusher.base().await
    }

    /// Whether anything changed since the last commit.
    pub fn has_changes(&self) -> bool {
        self.flusher.has_changes()
    }

    pub fn spool_dir(&self) -> &std::path::Path {
        self.spool.dir()
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
}

/// How many changes the journal of the spool at `spool_dir` holds that no
/// commit has taken yet: 0 after a clean unmount, else what the next mount
/// with that spool commits.
pub fn uncommitted(spool_dir: &std::path::Path) -> std::io::Result<usize> {
    let records = journal::read(&spool_dir.join(spool::JOURNAL))?;
    Ok(records
        .iter()
        .filter(|r| !matches!(r, Record::Base(_)))
        .count())
}
