//! The spool's room: new spool files, the room a write needs (flushes free
//! what they commit), and spool files no version uses any more.

use std::fs::File;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::{WriteError, Writer};
use crate::namespace::{Ino, SpoolFile};

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

impl Writer {
    /// A new empty spool file.
    pub(super) fn new_spool_file(&self) -> Result<(SpoolFile, Arc<File>), WriteError> {
        let (spool, file) = self
            .spool
            .new_file()
            .map_err(self.spool.error("create a file in"))?;
        Ok((spool, Arc::new(file)))
    }

    /// Whether the spool has room for `bytes` more within its limit.
    pub(super) fn has_room(&self, bytes: u64) -> bool {
        self.spool.used() + bytes <= self.options.spool_bytes
    }

    /// Waits until the spool has room for `bytes` more: flushes free what
    /// they commit. Gives up with `SpoolFull` when no flush can help (no
    /// closed file waits) or none has after a while.
    pub(super) async fn make_room(&self, bytes: u64) -> Result<(), WriteError> {
        const PATIENCE: Duration = Duration::from_secs(60);
        // A flush that just committed frees its files a moment later:
        // "nothing left to commit" must hold this long before it counts.
        const SETTLE: Duration = Duration::from_secs(1);
        let start = std::time::Instant::now();
        let mut nothing_to_commit_since = None;
        while !self.has_room(bytes) {
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
                    limit: self.options.spool_bytes,
                });
            }
            self.want_full.store(true, Ordering::SeqCst);
            self.wake.notify_one();
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    }

    /// Frees the spool files of `ino` once it has neither a name nor an
    /// open handle (after unlink, or a rename that replaced it).
    pub(crate) fn forget_if_unused(&self, ino: Ino) {
        self.retire(self.ns.release_if_unused(ino));
    }

    /// Spool files no version uses any more. A flush running now may still
    /// be uploading them, so they are deleted when no flush runs (see
    /// [`Writer::delete_retired`]).
    pub(super) fn retire(&self, files: Vec<SpoolFile>) {
        if !files.is_empty() {
            self.retired.lock().extend(files);
        }
    }

    /// Deletes the retired spool files; the flusher calls it between flushes.
    pub(super) fn delete_retired(&self) {
        let files = std::mem::take(&mut *self.retired.lock());
        self.spool.remove(&files);
    }

    /// The spool's bytes and the files not committed yet, now.
    pub(crate) fn spool_state(&self) -> SpoolState {
        let (pending_items, pending_bytes) = self.ns.uncommitted();
        SpoolState {
            spool_bytes: self.spool.used(),
            pending_items,
            pending_bytes,
        }
    }
}
