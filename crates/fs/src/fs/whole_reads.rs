//! Handles of a mount whose catalog files are checked when read whole
//! (a DataBundle's, against the index's CRC32C): each handle keeps a
//! running checksum while its reads run front to back from offset 0.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use packfs_core::catalog::{ChecksumError, WholeRead};
use parking_lot::Mutex;

use crate::namespace::Ino;

/// The open handles and the check each one keeps.
#[derive(Default)]
pub(super) struct WholeReads {
    /// The last handle given out (handle 0 is a handle without a check).
    last: AtomicU64,
    open: Mutex<HashMap<u64, WholeRead>>,
    /// The files found to disagree, with the check that found it: a later
    /// handle inherits it, since the kernel may serve the start of the
    /// file from its cache and ask only for the end.
    damaged: Mutex<HashMap<Ino, WholeRead>>,
}

impl WholeReads {
    /// A new handle of file `ino` that checks its reads with `check`.
    pub(super) fn open(&self, ino: Ino, check: WholeRead) -> u64 {
        let check = self.damaged.lock().get(&ino).cloned().unwrap_or(check);
        let fh = self.last.fetch_add(1, Ordering::Relaxed) + 1;
        self.open.lock().insert(fh, check);
        fh
    }

    /// Takes `bytes` of file `ino`, read through handle `fh` at `offset`:
    /// an error if they end a whole read whose checksum disagrees. A
    /// handle's check ends when the file matched or a read came out of
    /// order; one that disagreed stays, so the kernel's retries fail too.
    pub(super) fn read(
        &self,
        ino: Ino,
        fh: u64,
        offset: u64,
        bytes: &[u8],
    ) -> Result<(), ChecksumError> {
        let mut open = self.open.lock();
        let Some(check) = open.get_mut(&fh) else {
            return Ok(());
        };
        let checking = check.feed(offset, bytes);
        if check.is_damaged() {
            self.damaged
                .lock()
                .entry(ino)
                .or_insert_with(|| check.clone());
        }
        if !checking? {
            open.remove(&fh);
        }
        Ok(())
    }

    /// The last close of handle `fh`.
    pub(super) fn release(&self, fh: u64) {
        self.open.lock().remove(&fh);
    }
}
