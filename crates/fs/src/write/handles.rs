//! Open file handles: create, open (a write-open starts or joins a write
//! session), write, resize, close, and reads of spool versions.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use tracing::warn;

use super::changes::put_record;
use super::copy::copy_from;
use super::journal::Record;
use super::session::{Said, Session};
use super::{WriteError, Writer};
use crate::namespace::{Attr, Content, Edit, Ino, Joined, SpoolFile};

/// An open file handle.
pub(super) struct Handle {
    ino: Ino,
    /// The write session, for a handle open for writing.
    session: Option<Arc<Session>>,
}

impl Writer {
    fn add_handle(&self, handle: Handle) -> u64 {
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        self.handles.lock().insert(fh, handle);
        fh
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
            let joined = self.ns.join_writers(ino, |content| match truncate {
                true => Ok(None),
                false => copy_from(&self.spool, &tree, content).map(Some),
            });
            let first = matches!(joined, Ok(Joined::First(_)));
            let session = match joined {
                Ok(Joined::Session) => self.session_of(ino).inspect_err(|_| {
                    let _ = self.ns.cancel_join(ino);
                }),
                Ok(Joined::First(Ok(from))) => self.new_session(ino, from).await,
                Ok(Joined::First(Err(e))) => Err(e),
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
            let emptied = self.change(ino, &session, |file| file.set_len(0), Edit::Resized(0));
            if let Err(e) = emptied.await {
                self.release(fh);
                return Err(e);
            }
        }
        Ok(fh)
    }

    fn writable(&self, fh: u64) -> Result<(Ino, Arc<Session>), WriteError> {
        let handles = self.handles.lock();
        let h = handles.get(&fh).ok_or(WriteError::BadHandle)?;
        Ok((h.ino, h.session.clone().ok_or(WriteError::BadHandle)?))
    }

    /// Writes `data` at `offset` through handle `fh`. It must run to its
    /// end: dropped while pending, it may leave a version it was copying
    /// in the spool, unused ([`Writer::try_write`] needs no waiting).
    pub async fn write(&self, fh: u64, offset: u64, data: &[u8]) -> Result<(), WriteError> {
        let (ino, session) = self.writable(fh)?;
        let end = offset + data.len() as u64;
        let grown = end.saturating_sub(self.ns.attr(ino)?.size);
        self.make_room(grown).await?;
        let write = |file: &File| file.write_all_at(data, offset);
        self.change(ino, &session, write, Edit::WrittenTo(end))
            .await?;
        self.spool.resized(grown, 0);
        Ok(())
    }

    /// [`Writer::write`] if it needs no waiting: the spool has room and the
    /// file's live version is being written (most writes). `None`: nothing
    /// was done, and [`Writer::write`] must do it.
    pub fn try_write(&self, fh: u64, offset: u64, data: &[u8]) -> Option<Result<(), WriteError>> {
        let (ino, session) = match self.writable(fh) {
            Ok(writable) => writable,
            Err(e) => return Some(Err(e)),
        };
        let end = offset + data.len() as u64;
        let grown = match self.ns.attr(ino) {
            Ok(attr) => end.saturating_sub(attr.size),
            Err(e) => return Some(Err(e.into())),
        };
        if !self.has_room(grown) {
            return None;
        }
        let mut write = |file: &File| file.write_all_at(data, offset);
        let written = self.change_now(ino, &session, &mut write, Edit::WrittenTo(end))?;
        if written.is_ok() {
            self.spool.resized(grown, 0);
        }
        Some(written)
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
            self.change(ino, &session, resize, Edit::Resized(size))
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
            let ended = self.ns.leave_writers(h.ino, changed);
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
            // A session that ended unchanged leaves nothing to recover:
            // its live version goes, and recovery must not take it for a
            // file never closed.
            if ended.is_some() && !changed {
                if let Some(file) = session.spool.file_name() {
                    self.journal(Record::Ended { file });
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
        if changed {
            self.closed_file_due(h.ino);
        }
    }

    /// The spool file of a version being read, for [`Content::Spool`].
    pub(crate) fn read_spool(
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
