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

use parking_lot::RwLock;

use crate::namespace::SpoolFile;

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
    pub fn is_unchanged(self) -> bool {
        matches!(self, Said::Unchanged | Said::Synced)
    }
}

impl Session {
    pub fn new(spool: SpoolFile, file: Arc<File>, said: Said) -> Session {
        Session {
            spool,
            file,
            said: RwLock::new(said),
        }
    }

    /// The live version's length, from its open descriptor (`fstat`: no
    /// path lookup in the path of a close).
    pub fn len(&self) -> u64 {
        self.file.metadata().map_or(0, |m| m.len())
    }
}
