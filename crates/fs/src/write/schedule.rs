//! When flushes run: pack thresholds of closed files, `fsync`, a full
//! spool, idleness and unmount; and who waits for them.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tracing::warn;

use super::{WriteError, Writer};
use crate::namespace::Ino;

/// Outcome of the last flush, by request number.
#[derive(Clone, Debug, Default)]
pub(super) struct FlushStatus {
    /// Every request up to this number is covered.
    done: u64,
    error: Option<Arc<WriteError>>,
}

impl Writer {
    /// File `ino` was closed with changes: due at the next flush, which
    /// starts once the closed files waiting reach `pack_items` or
    /// `pack_bytes`.
    pub(super) fn closed_file_due(&self, ino: Ino) {
        let size = self.ns.attr(ino).map_or(0, |a| a.size);
        let mut pending = self.pending.lock();
        pending.0 += 1;
        pending.1 += size;
        if pending.0 >= self.options.pack_items || pending.1 >= self.options.pack_bytes {
            *pending = (0, 0);
            self.wake.notify_one();
        }
    }

    /// `fsync` of file `ino`: its bytes as they are now, even while it is
    /// open for writing, are committed with everything else before this
    /// returns.
    pub(crate) async fn sync_file(&self, ino: Ino) -> Result<(), WriteError> {
        let session = self.sessions.lock().get(&ino).cloned();
        if let Some(session) = session {
            let _one_at_a_time = self.opening.lock(ino).await;
            self.freeze(ino, &session).await?;
        }
        self.sync().await
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
    pub(crate) async fn run_flusher(self: Arc<Self>) {
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
    /// `shutdown_timeout`. Whatever it leaves (a timeout, a
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
}
