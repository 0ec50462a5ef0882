//! One async lock per inode, so write-opens of one file run one at a time
//! while other files go on.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::namespace::Ino;

/// One async lock per inode, made on demand and dropped with its last user.
#[derive(Default)]
pub(super) struct InodeLocks {
    locks: Mutex<HashMap<Ino, Arc<tokio::sync::Mutex<()>>>>,
}

/// Holds the lock of one inode.
pub(super) struct InodeGuard<'a> {
    locks: &'a InodeLocks,
    ino: Ino,
    _guard: tokio::sync::OwnedMutexGuard<()>,
}

impl InodeLocks {
    pub(super) async fn lock(&self, ino: Ino) -> InodeGuard<'_> {
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
