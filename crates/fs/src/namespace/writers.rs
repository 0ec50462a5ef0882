//! The namespace's side of a write session. A file open for writing has a
//! live version (the spool file its handles write) and, while it has
//! writers, the complete version the session started from or froze
//! (`origin`): what a flush commits meanwhile. The write path changes a
//! file node only through these methods.

use super::{Content, Ino, Namespace, NsError, SpoolFile};

/// What a write-open found.
#[derive(Debug)]
pub enum Joined<T> {
    /// The file has writers: this one joined their session.
    Session,
    /// No writer had it open: the caller starts the session, from what it
    /// made of the file's content.
    First(T),
}

/// A change of a live version's bytes.
#[derive(Clone, Copy, Debug)]
pub enum Edit {
    /// Bytes written up to offset `end`.
    WrittenTo(u64),
    /// Truncated or extended to this size.
    Resized(u64),
}

impl Namespace {
    /// A write-open of `ino`: if it has writers, joins their session
    /// (counted); else returns what `first` makes of its content. `first`
    /// runs under the overlay's lock, so a spool version it opens cannot be
    /// committed and deleted before.
    pub(crate) fn join_writers<T>(
        &self,
        ino: Ino,
        first: impl FnOnce(&Content) -> T,
    ) -> Result<Joined<T>, NsError> {
        self.update_file(ino, false, |f| match f.writers {
            0 => Joined::First(first(&f.content)),
            _ => {
                f.writers += 1;
                Joined::Session
            }
        })
    }

    /// Uncounts a writer that joined a session it then could not use.
    pub(crate) fn cancel_join(&self, ino: Ino) -> Result<(), NsError> {
        self.update_file(ino, false, |f| f.writers -= 1)
    }

    /// Starts the write session of `ino`, whose live version is `live`:
    /// its first writer is counted and its content so far becomes the
    /// session's complete version. With `truncate` the live version starts
    /// empty, a change of the file.
    pub(crate) fn start_session(
        &self,
        ino: Ino,
        live: SpoolFile,
        truncate: bool,
    ) -> Result<(), NsError> {
        self.update_file(ino, truncate, |f| {
            f.writers += 1;
            // Its content now, not what the opener copied: a flush may
            // have committed that version meanwhile (the same bytes, as an
            // item).
            f.origin = Some(std::mem::replace(&mut f.content, Content::Spool(live)));
            if truncate {
                f.edit(Edit::Resized(0));
            }
        })
    }

    /// The live version of `ino` changed as `edit` says.
    pub fn edit(&self, ino: Ino, edit: Edit) -> Result<(), NsError> {
        self.update_file(ino, true, |f| f.edit(edit))
    }

    /// The generation of `ino`'s bytes (bumped on every change), if the
    /// overlay knows the file.
    pub(crate) fn generation(&self, ino: Ino) -> Option<u64> {
        let overlay = self.overlay.as_ref()?.read();
        overlay.files.get(&ino).map(|f| f.generation)
    }

    /// Makes spool file `copy` the complete version of `ino`, if its live
    /// version is still `live` (its session goes on). Returns the complete
    /// version replaced, and whether the bytes are those of `generation`
    /// (the copy is the live version's twin); `None` if nothing changed.
    pub(crate) fn freeze_into(
        &self,
        ino: Ino,
        live: &SpoolFile,
        copy: SpoolFile,
        generation: Option<u64>,
    ) -> Option<(Option<Content>, bool)> {
        self.update_file(ino, true, |f| {
            let twin = Some(f.generation) == generation;
            f.is_live(live)
                .then(|| (f.origin.replace(Content::Spool(copy)), twin))
        })
        .ok()
        .flatten()
    }

    /// Whether `live` is still the live version of `ino`. Once its session
    /// ended (its last writer left) it is the file's content, which a flush
    /// may commit and delete at any time.
    pub(crate) fn is_live(&self, ino: Ino, live: &SpoolFile) -> bool {
        let Some(overlay) = &self.overlay else {
            return false;
        };
        let overlay = overlay.read();
        overlay.files.get(&ino).is_some_and(|f| f.is_live(live))
    }

    /// A writer of `ino` is done. `changed`: its session's live version
    /// differs from the complete version (a change of the file). `None`
    /// while other writers remain; when the last leaves, the session ends
    /// and the version no longer needed is returned: the complete one if
    /// the live version changed (it becomes the file's content), else the
    /// live one (the complete version stays).
    pub(crate) fn leave_writers(
        &self,
        ino: Ino,
        changed: bool,
    ) -> Result<Option<Option<Content>>, NsError> {
        self.update_file(ino, changed, |f| {
            f.writers -= 1;
            if f.writers > 0 {
                return None;
            }
            Some(match (changed, f.origin.take()) {
                (false, Some(origin)) => Some(std::mem::replace(&mut f.content, origin)),
                (_, origin) => origin,
            })
        })
    }
}
