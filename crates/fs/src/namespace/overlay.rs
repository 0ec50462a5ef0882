//! The overlay of a read-write mount: the files and directories changed
//! through it, copied from the tree on their first change.

use std::collections::BTreeMap;
use std::time::SystemTime;

use packfs_format::Special;

use super::writers::Edit;
use super::{Content, Ino, SpoolFile};

/// A file the overlay knows: created, written or re-attributed through the
/// mount.
#[derive(Clone, Debug)]
pub(super) struct FileNode {
    pub(super) content: Content,
    pub(super) size: u64,
    pub(super) mtime: SystemTime,
    /// Access and status-change times: kept for the mount's life, never
    /// stored (a stored node shows its mtime for both).
    pub(super) atime: SystemTime,
    pub(super) ctime: SystemTime,
    pub(super) perm: u16,
    /// Bumped on every change of the bytes, so a flush can tell whether
    /// what it uploaded is still current.
    pub(super) generation: u64,
    /// Handles open for writing. While there are any, `content` is a spool
    /// file being written and `origin` is the last complete version.
    pub(super) writers: u32,
    /// The complete version a write session started from (`None` for a
    /// file created by it): what a flush commits while the file is open.
    pub(super) origin: Option<Content>,
    /// The modality directory the file belongs to (files never leave it).
    pub(super) modality: Ino,
    /// Its directory and name; `None` once unlinked or replaced.
    pub(super) link: Option<(Ino, Box<str>)>,
    /// Its other names (hard links made through the mount), each a
    /// directory and a name.
    pub(super) others: Vec<(Ino, Box<str>)>,
    /// Some version of it is committed (it is not new since the last commit).
    pub(super) stored: bool,
    /// What it is if not a regular file: its bytes are a link's target.
    pub(super) special: Option<Special>,
}

#[derive(Clone, Debug)]
pub(super) struct DirNode {
    pub(super) parent: Ino,
    pub(super) name: Box<str>,
    pub(super) children: Children,
    /// How many children are directories (a directory's link count is
    /// 2 plus this: its name, its `.`, and each child's `..`).
    pub(super) subdirs: u32,
    pub(super) mtime: SystemTime,
    pub(super) atime: SystemTime,
    pub(super) ctime: SystemTime,
    pub(super) perm: u16,
    /// Removed (`rmdir`, or replaced by a rename): nothing can be created
    /// in it. A directory of the tree stays as such a tombstone, empty, so
    /// that its inode, which a process may still hold, is never filled
    /// again from the tree with the entries it had before.
    pub(super) removed: bool,
}

/// A directory's entries, with listing cookies that stay valid while it
/// changes: each entry takes the next number when added, so a listing
/// resumed at a cookie (`rm -rf` unlinks between readdir calls) returns
/// every entry that was there all along exactly once.
#[derive(Clone, Debug, Default)]
pub(super) struct Children {
    by_name: BTreeMap<Box<str>, (Ino, u64)>,
    by_number: BTreeMap<u64, Box<str>>,
    next: u64,
}

/// Cookies of `.` and `..`; entries follow.
const FIRST_ENTRY_COOKIE: u64 = 3;

impl Children {
    pub(super) fn get(&self, name: &str) -> Option<Ino> {
        self.by_name.get(name).map(|(ino, _)| *ino)
    }

    pub(super) fn contains_key(&self, name: &str) -> bool {
        self.by_name.contains_key(name)
    }

    pub(super) fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// Adds `name` (replacing an entry of that name, which is then a new one).
    pub(super) fn insert(&mut self, name: Box<str>, ino: Ino) {
        self.remove(&name);
        let number = self.next;
        self.next += 1;
        self.by_number.insert(number, name.clone());
        self.by_name.insert(name, (ino, number));
    }

    pub(super) fn remove(&mut self, name: &str) -> Option<Ino> {
        let (ino, number) = self.by_name.remove(name)?;
        self.by_number.remove(&number);
        Some(ino)
    }

    /// Entries by name.
    pub(super) fn iter(&self) -> impl Iterator<Item = (&str, Ino)> {
        self.by_name.iter().map(|(n, (ino, _))| (&**n, *ino))
    }

    /// Entries whose cookie is above `offset`, in cookie order, each with
    /// its cookie.
    pub(super) fn listing_after(&self, offset: u64) -> impl Iterator<Item = (u64, &str, Ino)> {
        let from = offset.saturating_sub(FIRST_ENTRY_COOKIE - 1);
        self.by_number
            .range(from..)
            .map(|(number, name)| (number + FIRST_ENTRY_COOKIE, &**name, self.by_name[name].0))
    }
}

/// Changes made through a read-write mount.
#[derive(Debug)]
pub(super) struct Overlay {
    pub(super) dirs: foldhash::HashMap<Ino, DirNode>,
    pub(super) files: foldhash::HashMap<Ino, FileNode>,
    pub(super) next_ino: Ino,
    /// Modality directories whose items changed since the last export.
    pub(super) dirty: foldhash::HashSet<Ino>,
    /// Files and directories changed since the last export (created,
    /// moved, written, re-attributed, or a directory whose entries
    /// changed): a flush records their rows again.
    pub(super) touched: foldhash::HashSet<Ino>,
    /// Directories moved since the last export: a flush records every
    /// row below them again too.
    pub(super) moved: foldhash::HashSet<Ino>,
    /// Paths removed since the last export (unlinked, removed, moved
    /// away, replaced).
    pub(super) vacated: Vec<Vacated>,
    /// Counts every change, so a flush knows whether anything happened.
    pub(super) changes: u64,
}

/// A path removed from a modality since the last export: its row goes,
/// and for a directory every row below it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Vacated {
    pub modality: Ino,
    /// Below the modality directory.
    pub path: String,
    pub dir: bool,
}

/// The spool files a file node holds.
pub(super) fn spool_files(f: &FileNode) -> Vec<SpoolFile> {
    [Some(&f.content), f.origin.as_ref()]
        .into_iter()
        .flatten()
        .filter_map(|c| match c {
            Content::Spool(s) => Some(s.clone()),
            _ => None,
        })
        .collect()
}

impl FileNode {
    /// Its names: `link`, then the others.
    pub(super) fn names(&self) -> impl Iterator<Item = &(Ino, Box<str>)> {
        self.link.iter().chain(&self.others)
    }

    /// How many names it has.
    pub(super) fn nlink(&self) -> u32 {
        u32::from(self.link.is_some()) + self.others.len() as u32
    }

    /// Drops its name `name` of directory `dir`: the next name, if any,
    /// becomes its `link`.
    pub(super) fn drop_name(&mut self, dir: Ino, name: &str) {
        if self
            .link
            .as_ref()
            .is_some_and(|(d, n)| *d == dir && **n == *name)
        {
            self.link = match self.others.is_empty() {
                true => None,
                false => Some(self.others.remove(0)),
            };
        } else {
            self.others.retain(|(d, n)| !(*d == dir && **n == *name));
        }
    }

    /// Its name `from` (a directory and a name) is now `to`.
    pub(super) fn rename(&mut self, from: (Ino, &str), to: (Ino, Box<str>)) {
        let is_from = |(d, n): &(Ino, Box<str>)| *d == from.0 && **n == *from.1;
        match self.others.iter().position(is_from) {
            Some(i) if !self.link.as_ref().is_some_and(is_from) => self.others[i] = to,
            _ => self.link = Some(to),
        }
    }

    /// Its bytes changed as `edit` says.
    pub(super) fn edit(&mut self, edit: Edit) {
        self.size = match edit {
            Edit::WrittenTo(end) => self.size.max(end),
            Edit::Resized(size) => size,
        };
        self.generation += 1;
        self.mtime = SystemTime::now();
        self.ctime = self.mtime;
    }

    /// Whether `live` is its live version: it has writers, and they write
    /// that spool file.
    pub(super) fn is_live(&self, live: &SpoolFile) -> bool {
        self.writers > 0 && matches!(&self.content, Content::Spool(s) if s == live)
    }
}
