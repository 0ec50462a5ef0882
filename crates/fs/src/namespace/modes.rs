//! The permission bits a mount shows.

use packfs_core::kind::Kind;
use packfs_format::{Attrs, Special};

/// Permission bits the mount shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Modes {
    /// Of files whose writer recorded no mode…
    pub file: u16,
    /// …and of such directories.
    pub dir: u16,
    /// Show `file` for every file, whatever mode it has:
    /// presentation only, the recorded modes stay as they are.
    pub force_file: bool,
    /// Show `dir` for every directory, whatever mode it has.
    pub force_dir: bool,
}

impl Modes {
    /// `0644`/`0755` on a writable mount, `0444`/`0555` on a read-only one,
    /// where nothing else was recorded.
    pub(crate) fn default_for(writable: bool) -> Modes {
        let (file, dir) = match writable {
            true => (Attrs::DEFAULT_FILE_MODE, Attrs::DEFAULT_DIR_MODE),
            false => (0o444, 0o555),
        };
        Modes {
            file,
            dir,
            force_file: false,
            force_dir: false,
        }
    }

    /// What a file whose mode is `perm` shows: a symbolic link always
    /// `0777`, as on Linux (its own mode means nothing there).
    pub(super) fn shown_file(&self, perm: u16, special: Option<Special>) -> u16 {
        match special {
            Some(Special::Symlink) => 0o777,
            _ => self.shown(Kind::File, perm),
        }
    }

    /// What a node of `kind` whose mode is `perm` shows.
    pub(super) fn shown(&self, kind: Kind, perm: u16) -> u16 {
        match kind {
            Kind::File if self.force_file => self.file,
            Kind::Dir if self.force_dir => self.dir,
            _ => perm,
        }
    }
}
