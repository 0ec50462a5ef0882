//! A write session: the spool file every handle open for writing on one
//! file writes (its *live* version), and what the spool's journal last said
//! about that file.
//!
//! A close journals the live version as complete without copying it (most
//! files are closed once and never written again). Should it change after
//! all (another descriptor writes on), it is first *frozen*: a copy becomes
//! the complete version and is journaled, so the journal never names bytes
//! that are still changing. The rules of the states are on [`Said`].

use std::fs::File;
use std::sync::Arc;

use packfs_core::blocking::spawn;
use parking_lot::RwLock;

use super::changes::{open_record, put_record};
use super::copy::{copy_file, CopyFrom};
use super::journal::Record;
use super::{WriteError, Writer};
use crate::namespace::{Content, Edit, Ino, SpoolFile};

/// The live version of a file open for writing.
pub(super) struct Session {
    pub spool: SpoolFile,
    pub file: Arc<File>,
    /// Writes hold it shared while they change the live file; changes of
    /// what the journal says hold it exclusively, so no write lands in a
    /// version between the journal calling it complete and its copy.
    pub said: RwLock<Said>,
}

/// What the journal last said about a session's live version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Said {
    /// `Open`: it is being written. Writes go ahead; a close journals it
    /// as complete (→ `Complete`).
    Writing,
    /// `Put` at a close, nothing written since: it is the complete
    /// version. Before it changes, or a flush commits it, it is frozen
    /// into a copy that becomes the complete version (→ `Unchanged`).
    Complete,
    /// Its bytes are those of the complete version the file node keeps as
    /// `origin` (the version the session started from, or a frozen copy),
    /// and the journal names that one. Its next change journals it `Open`
    /// first (→ `Writing`); a last close without one keeps `origin`.
    Unchanged,
    /// Like `Unchanged` (an `fsync` froze it), but written since its last
    /// close: its `Open` stands, so a crash moves it to `lost+found`. A
    /// close makes it `Unchanged`; its next change needs no record.
    Synced,
}

impl Said {
    /// Whether the live version's bytes are those of `origin`.
    pub(crate) fn is_unchanged(self) -> bool {
        matches!(self, Said::Unchanged | Said::Synced)
    }
}

impl Session {
    pub(super) fn new(spool: SpoolFile, file: Arc<File>, said: Said) -> Session {
        Session {
            spool,
            file,
            said: RwLock::new(said),
        }
    }

    /// The live version's length, from its open descriptor (`fstat`: no
    /// path lookup in the path of a close).
    pub(super) fn len(&self) -> u64 {
        self.file.metadata().map_or(0, |m| m.len())
    }
}

impl Writer {
    /// Starts a write session on `ino` with a copy of its bytes `from`
    /// (`None`: empty, for `O_TRUNC`), and counts its first writer.
    pub(super) async fn new_session(
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
        self.ns.start_session(ino, spool, truncate)?;
        self.sessions.lock().insert(ino, session.clone());
        Ok(session)
    }

    /// The write session of `ino`, which has writers.
    pub(super) fn session_of(&self, ino: Ino) -> Result<Arc<Session>, WriteError> {
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

    /// Changes the live version of `ino` through `apply`, as `edit` says,
    /// once the journal says the live version is being written (see
    /// [`Said`]).
    pub(super) async fn change(
        &self,
        ino: Ino,
        session: &Session,
        mut apply: impl FnMut(&File) -> std::io::Result<()>,
        edit: Edit,
    ) -> Result<(), WriteError> {
        loop {
            if let Some(changed) = self.change_now(ino, session, &mut apply, edit) {
                return changed;
            }
            self.reopen(ino, session).await?;
        }
    }

    /// [`Writer::change`] if the journal says the live version is being
    /// written already; `None` (nothing done) if it must be reopened first.
    pub(super) fn change_now(
        &self,
        ino: Ino,
        session: &Session,
        apply: &mut impl FnMut(&File) -> std::io::Result<()>,
        edit: Edit,
    ) -> Option<Result<(), WriteError>> {
        let said = session.said.read();
        if *said != Said::Writing {
            return None;
        }
        let applied = apply(&session.file).map_err(WriteError::file(&session.spool.path));
        Some(applied.and_then(|()| Ok(self.ns.edit(ino, edit)?)))
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
    pub(super) async fn freeze(&self, ino: Ino, session: &Session) -> Result<(), WriteError> {
        if session.said.read().is_unchanged() {
            return Ok(());
        }
        // Unchanged during the copy: the live version is the copy's twin.
        let generation = self.ns.generation(ino);
        let (copy, to) = self.new_spool_file()?;
        let from = self.spool.open_pinned(&session.spool);
        let to = Arc::try_unwrap(to).expect("a new spool file has one owner");
        let copied = spawn(copy_file(from, session.spool.path.clone(), to)).await;
        let bytes = match copied {
            Ok(bytes) => bytes,
            Err(e) => {
                self.spool.remove(&[copy]);
                // The session ended meanwhile (its version committed and
                // deleted, maybe before the session left the map of
                // sessions): nothing open is left to freeze.
                return match self.ns.is_live(ino, &session.spool) {
                    true => Err(e),
                    false => Ok(()),
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
                    .freeze_into(ino, &session.spool, copy.clone(), generation),
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
    pub(super) async fn freeze_complete_versions(&self) -> Result<(), WriteError> {
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
    pub(super) fn session_records(&self) -> Vec<Record> {
        self.sessions()
            .into_iter()
            .filter_map(|(ino, session)| match *session.said.read() {
                Said::Writing | Said::Synced => open_record(&self.ns, ino, &session.spool),
                Said::Complete => put_record(&self.ns, ino, &session.spool, session.len()),
                Said::Unchanged => None,
            })
            .collect()
    }
}
