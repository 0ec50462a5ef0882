//! Changes of names and attributes through a read-write mount, each
//! journaled with the change (a change and its record are atomic with
//! respect to a flush's snapshot of the journal).

use std::time::SystemTime;

use packfs_core::kind::Kind;
use std::os::unix::fs::FileExt;

use packfs_format::{ns_of_time, Special};
use tracing::warn;

use super::journal::Record;
use super::{WriteError, Writer};
use crate::namespace::{Attr, Ino, Namespace, SpoolFile};

impl Writer {
    /// Journals `record`; a failure is logged (the change itself stands,
    /// but would not survive a crash before the next commit) and marked,
    /// so that recovery keeps every spool file the journal does not name.
    pub(super) fn journal(&self, record: Record) {
        if let Err(e) = self.journal.append(&record) {
            warn!("journal of spool {}: {e}", self.spool.dir().display());
            self.spool.mark_journal_gap();
        }
    }

    /// Journals that file `ino` is being written in spool file `spool`: if
    /// the mount dies before it is closed, the next mount moves that file
    /// to `lost+found` under this path.
    pub(super) fn journal_open(&self, ino: Ino, spool: &SpoolFile) {
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

    /// `symlink` (`bytes` the target) or `mknod` (no bytes): a closed file
    /// that is not a regular one, journaled, due at the next flush.
    pub fn make_special(
        &self,
        parent: Ino,
        name: &[u8],
        perm: u16,
        special: Special,
        bytes: &[u8],
    ) -> Result<Attr, WriteError> {
        let (spool, file) = self.new_spool_file()?;
        let written = file.write_all_at(bytes, 0);
        // Counted as the spool holds it, so that removing it evens out.
        self.spool
            .resized(file.metadata().map_or(0, |m| m.len()), 0);
        if let Err(e) = written {
            self.spool.remove(std::slice::from_ref(&spool));
            return Err(WriteError::file(&spool.path)(e));
        }
        let attr = {
            let _change = self.journal.changing();
            let made = self.ns.make_special(
                parent,
                name,
                (spool.clone(), bytes.len() as u64),
                perm,
                special,
            );
            let attr = match made {
                Ok(attr) => attr,
                Err(e) => {
                    self.spool.remove(&[spool]);
                    return Err(e.into());
                }
            };
            if let Some(record) = put_record(&self.ns, attr.ino, &spool, bytes.len() as u64) {
                self.journal(record);
            }
            attr
        };
        self.closed_file_due(attr.ino);
        Ok(attr)
    }

    /// `link`: file `ino` gets the name `name` in `parent` too, journaled.
    pub fn link(&self, ino: Ino, parent: Ino, name: &[u8]) -> Result<Attr, WriteError> {
        let _change = self.journal.changing();
        let from = self
            .ns
            .file_path(ino)?
            .ok_or(crate::namespace::NsError::NotFound)?;
        let attr = self.ns.link(ino, parent, name)?;
        self.journal(Record::Link {
            from,
            to: self.entry_path(parent, name)?,
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

    /// Sets the mode and/or mtime of `ino` (`chmod`, `utimens`), journaled;
    /// both are committed with the file or directory.
    pub(crate) fn set_times_and_mode(
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
}

/// The journal record that file `ino` is complete as spool file `spool`
/// of `size` bytes (`None` once it has no name).
pub(super) fn put_record(ns: &Namespace, ino: Ino, spool: &SpoolFile, size: u64) -> Option<Record> {
    let (Ok(Some(path)), Some(file)) = (ns.file_path(ino), spool.file_name()) else {
        return None;
    };
    let (attrs, special) = ns.file_record(ino).unwrap_or_default();
    Some(Record::Put {
        path,
        file,
        size,
        attrs,
        special,
    })
}

/// The journal record that file `ino` is being written in spool file
/// `spool` (`None` once it has no name).
pub(super) fn open_record(ns: &Namespace, ino: Ino, spool: &SpoolFile) -> Option<Record> {
    let (Ok(Some(path)), Some(file)) = (ns.file_path(ino), spool.file_name()) else {
        return None;
    };
    Some(Record::Open { path, file })
}
