//! The mounted namespace: the snapshot's [`Tree`] and, on a read-write
//! mount, an overlay of the changes made through the mount.
//!
//! Inodes: a tree node `n` is inode `n + 1` (FUSE's root is 1), for the
//! whole life of the mount, whatever happens to its name; nodes created
//! through the mount get inodes from [`FIRST_NEW_INO`] up. The overlay is
//! copy-on-write by directory: the first change inside a tree directory
//! copies its child list into the overlay, which from then on answers for
//! that directory; untouched directories are served by the tree, so a
//! read-only mount (no overlay at all) pays nothing for this module.
//!
//! This module is pure bookkeeping: no FUSE types and no I/O. File bytes
//! are described by [`Content`]; the write spool owns the files behind it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use parking_lot::RwLock;
use thiserror::Error;

use packfs_core::dataset::Item;
use packfs_core::kind::Kind;
use packfs_core::tree::{NodeId, NodeKind, Tree};
use packfs_format::{ns_of_time, time_of_ns, Attrs, FragmentEntry, TrackDir};
use packfs_format::{validate_item_name, validate_segment};

/// An inode number.
pub type Ino = u64;
/// The root directory's inode.
pub const ROOT_INO: Ino = 1;
/// The first inode handed to a node created through the mount.
pub const FIRST_NEW_INO: Ino = 1 << 32;
/// Longest name of one directory entry (`NAME_MAX`).
const NAME_MAX: usize = 255;
/// Directory depth of a modality (`/<timeline>/<modality>`): items live
/// below it.
const MODALITY_DEPTH: usize = 2;

/// Why a namespace operation failed. The FUSE layer maps these to errno.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum NsError {
    #[error("no such file or directory")]
    NotFound,
    #[error("not a directory")]
    NotADirectory,
    #[error("is a directory")]
    IsADirectory,
    #[error("file exists")]
    Exists,
    #[error("directory not empty")]
    NotEmpty,
    #[error("name longer than 255 bytes")]
    NameTooLong,
    #[error("invalid name: {0}")]
    InvalidName(String),
    /// The dataset cannot represent this: a file outside a modality
    /// directory, a directory moved into itself, a reserved name.
    #[error("not permitted: {0}")]
    NotPermitted(&'static str),
    #[error("read-only mount")]
    ReadOnly,
    /// Items cannot change modality in place (their objects live under it):
    /// `mv` answers this by copying.
    #[error("cannot move between modalities in place")]
    CrossModality,
}

/// What `stat` shows of a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attr {
    pub ino: Ino,
    pub kind: Kind,
    pub size: u64,
    pub mtime: SystemTime,
    /// Permission bits (`0o644`, …).
    pub perm: u16,
    /// Links: 2 plus its subdirectories for a directory, 1 for a file, 0 for
    /// an unlinked open file.
    pub nlink: u32,
}

/// A spool file holding a written file's bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpoolFile {
    pub path: PathBuf,
}

impl SpoolFile {
    /// Its name in the spool (what the journal records).
    pub fn file_name(&self) -> Option<String> {
        Some(self.path.file_name()?.to_string_lossy().into_owned())
    }
}

/// An item this mount committed: how to read it, and its Track entry.
#[derive(Debug)]
pub struct CommittedItem {
    pub item: Item,
    pub entry: FragmentEntry,
}

/// Where a file's bytes are.
#[derive(Clone, Debug)]
pub enum Content {
    /// An item of the mounted snapshot: index into the tree's items.
    Base(u32),
    /// An item committed by this mount.
    Committed(Arc<CommittedItem>),
    /// Written through the mount, not committed yet.
    Spool(SpoolFile),
}

/// A file the overlay knows: created, written or re-attributed through the
/// mount.
#[derive(Clone, Debug)]
pub struct FileNode {
    pub content: Content,
    pub size: u64,
    pub mtime: SystemTime,
    pub perm: u16,
    /// Bumped on every change of the bytes, so a flush can tell whether
    /// what it uploaded is still current.
    pub generation: u64,
    /// Handles open for writing. While there are any, `content` is a spool
    /// file being written and `origin` is the last complete version.
    pub writers: u32,
    /// The complete version a write session started from (`None` for a
    /// file created by it): what a flush commits while the file is open.
    pub origin: Option<Content>,
    /// The modality directory the file belongs to (files never leave it).
    pub modality: Ino,
    /// Its directory and name; `None` once unlinked or replaced.
    pub link: Option<(Ino, Box<str>)>,
    /// Some version of it is committed (it is not new since the last commit).
    pub stored: bool,
}

#[derive(Clone, Debug)]
struct DirNode {
    parent: Ino,
    name: Box<str>,
    children: Children,
    /// How many children are directories (a directory's link count is
    /// 2 plus this: its name, its `.`, and each child's `..`).
    subdirs: u32,
    mtime: SystemTime,
    perm: u16,
}

/// A directory's entries, with listing cookies that stay valid while it
/// changes: each entry takes the next number when added, so a listing
/// resumed at a cookie (`rm -rf` unlinks between readdir calls) returns
/// every entry that was there all along exactly once.
#[derive(Clone, Debug, Default)]
struct Children {
    by_name: BTreeMap<Box<str>, (Ino, u64)>,
    by_number: BTreeMap<u64, Box<str>>,
    next: u64,
}

/// Cookies of `.` and `..`; entries follow.
const FIRST_ENTRY_COOKIE: u64 = 3;

impl Children {
    fn get(&self, name: &str) -> Option<Ino> {
        self.by_name.get(name).map(|(ino, _)| *ino)
    }

    fn contains_key(&self, name: &str) -> bool {
        self.by_name.contains_key(name)
    }

    fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// Adds `name` (replacing an entry of that name, which is then a new one).
    fn insert(&mut self, name: Box<str>, ino: Ino) {
        self.remove(&name);
        let number = self.next;
        self.next += 1;
        self.by_number.insert(number, name.clone());
        self.by_name.insert(name, (ino, number));
    }

    fn remove(&mut self, name: &str) -> Option<Ino> {
        let (ino, number) = self.by_name.remove(name)?;
        self.by_number.remove(&number);
        Some(ino)
    }

    /// Entries by name.
    fn iter(&self) -> impl Iterator<Item = (&str, Ino)> {
        self.by_name.iter().map(|(n, (ino, _))| (&**n, *ino))
    }

    /// Entries whose cookie is above `offset`, in cookie order, each with
    /// its cookie.
    fn listing_after(&self, offset: u64) -> impl Iterator<Item = (u64, &str, Ino)> {
        let from = offset.saturating_sub(FIRST_ENTRY_COOKIE - 1);
        self.by_number
            .range(from..)
            .map(|(number, name)| (number + FIRST_ENTRY_COOKIE, &**name, self.by_name[name].0))
    }
}

/// Changes made through a read-write mount.
#[derive(Debug)]
struct Overlay {
    dirs: foldhash::HashMap<Ino, DirNode>,
    files: foldhash::HashMap<Ino, FileNode>,
    next_ino: Ino,
    /// Modality directories whose items changed since the last export.
    dirty: foldhash::HashSet<Ino>,
    /// Counts every change, so a flush knows whether anything happened.
    changes: u64,
}

/// A file of a modality, as a flush sees it.
#[derive(Clone, Debug)]
pub struct ExportedFile {
    pub ino: Ino,
    /// Path below the modality directory.
    pub name: String,
    pub content: Content,
    /// `u64::MAX` for a spool version kept while the file is open (the
    /// namespace tracks only the open version's size).
    pub size: u64,
    pub generation: u64,
    /// Some version of it is committed ([`FileNode::stored`]): leaving a
    /// file that is not out of a commit loses nothing (a partial flush may
    /// wait for a fuller pack).
    pub stored: bool,
    /// Its mode and mtime, to record.
    pub attrs: Attrs,
}

/// A modality directory at flush time; `files` and `dirs` only if it changed.
#[derive(Clone, Debug)]
pub struct ExportedModality {
    pub ino: Ino,
    pub timeline: String,
    pub modality: String,
    pub files: Option<Vec<ExportedFile>>,
    /// The directories to record: the modality directory itself (`""`)
    /// and those below it that are empty or have attributes.
    pub dirs: Vec<TrackDir>,
}

/// What a flush commits.
#[derive(Debug)]
pub struct Export {
    pub modalities: Vec<ExportedModality>,
    /// The modalities marked changed, to mark again if the flush fails.
    pub dirty: Vec<Ino>,
    /// The change counter this export covers.
    pub changes: u64,
}

/// The tree plus, when writable, the overlay.
pub struct Namespace {
    tree: Arc<Tree>,
    overlay: Option<RwLock<Overlay>>,
    /// Time of the mounted Manifest: the mtime of untouched nodes.
    base_mtime: SystemTime,
    /// Permission bits of stored files and directories (until a chmod).
    modes: Modes,
    /// Read handles open per file (see [`Namespace::add_reader`]).
    readers: parking_lot::Mutex<foldhash::HashMap<Ino, u32>>,
}

/// Permission bits the mount shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Modes {
    /// Of files whose writer recorded no mode…
    pub file: u16,
    /// …and of such directories.
    pub dir: u16,
    /// Show `file` for every file, whatever mode it has (`--file-mode`):
    /// presentation only, the recorded modes stay as they are.
    pub force_file: bool,
    /// Show `dir` for every directory (`--dir-mode`).
    pub force_dir: bool,
}

impl Modes {
    /// `0644`/`0755` on a writable mount, `0444`/`0555` on a read-only one,
    /// where nothing else was recorded.
    pub fn default_for(writable: bool) -> Modes {
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

    /// What a node of `kind` whose mode is `perm` shows.
    fn shown(&self, kind: Kind, perm: u16) -> u16 {
        match kind {
            Kind::File if self.force_file => self.file,
            Kind::Dir if self.force_dir => self.dir,
            _ => perm,
        }
    }
}

fn tree_ino(id: NodeId) -> Ino {
    Ino::from(id) + 1
}

impl Namespace {
    /// A namespace over `tree`; with `writable`, changes are accepted.
    pub fn new(tree: impl Into<Arc<Tree>>, writable: bool) -> Self {
        let tree = tree.into();
        let base_mtime = UNIX_EPOCH + Duration::from_nanos(tree.ts_unix_ns());
        Namespace {
            tree,
            overlay: writable.then(|| {
                RwLock::new(Overlay {
                    dirs: Default::default(),
                    files: Default::default(),
                    next_ino: FIRST_NEW_INO,
                    dirty: Default::default(),
                    changes: 0,
                })
            }),
            base_mtime,
            modes: Modes::default_for(writable),
            readers: Default::default(),
        }
    }

    /// The same namespace showing stored nodes with `modes`.
    pub fn with_modes(mut self, modes: Modes) -> Self {
        self.modes = modes;
        self
    }

    pub fn tree(&self) -> &Arc<Tree> {
        &self.tree
    }

    pub fn is_writable(&self) -> bool {
        self.overlay.is_some()
    }

    /// The tree node behind `ino`, if it is one.
    fn tree_node(&self, ino: Ino) -> Option<(NodeId, packfs_core::tree::Node<'_>)> {
        if ino >= FIRST_NEW_INO || ino == 0 {
            return None;
        }
        let id = NodeId::try_from(ino - 1).ok()?;
        self.tree.node(id).map(|n| (id, n))
    }

    /// The child `name` of directory `parent`.
    pub fn lookup(&self, parent: Ino, name: &[u8]) -> Result<Ino, NsError> {
        if name.len() > NAME_MAX {
            return Err(NsError::NameTooLong);
        }
        let overlay = self.overlay.as_ref().map(|o| o.read());
        if let Some(o) = &overlay {
            if let Some(dir) = o.dirs.get(&parent) {
                let name = std::str::from_utf8(name).map_err(|_| NsError::NotFound)?;
                return dir.children.get(name).ok_or(NsError::NotFound);
            }
            if o.files.contains_key(&parent) {
                return Err(NsError::NotADirectory);
            }
        }
        match self.tree_node(parent) {
            Some((id, node)) => match node.kind {
                NodeKind::Dir(_) => self
                    .tree
                    .lookup(id, name)
                    .map(tree_ino)
                    .ok_or(NsError::NotFound),
                NodeKind::File(_) => Err(NsError::NotADirectory),
            },
            None => Err(NsError::NotFound),
        }
    }

    /// The attributes of `ino`.
    pub fn attr(&self, ino: Ino) -> Result<Attr, NsError> {
        match &self.overlay {
            Some(o) => self.attr_in(&o.read(), ino),
            None => self.tree_attr(ino),
        }
    }

    fn attr_in(&self, o: &Overlay, ino: Ino) -> Result<Attr, NsError> {
        if let Some(f) = o.files.get(&ino) {
            return Ok(Attr {
                ino,
                kind: Kind::File,
                size: f.size,
                mtime: f.mtime,
                perm: self.modes.shown(Kind::File, f.perm),
                nlink: u32::from(f.link.is_some()),
            });
        }
        if let Some(d) = o.dirs.get(&ino) {
            return Ok(Attr {
                ino,
                kind: Kind::Dir,
                size: 0,
                mtime: d.mtime,
                perm: self.modes.shown(Kind::Dir, d.perm),
                nlink: 2 + d.subdirs,
            });
        }
        self.tree_attr(ino)
    }

    /// How many of a tree directory's children are directories.
    fn tree_subdirs(&self, children: &[packfs_core::tree::NodeId]) -> u32 {
        children.iter().filter(|&&c| self.tree.is_dir(c)).count() as u32
    }

    /// Mode and mtime of a stored node: as its writer recorded them, else
    /// the mount's mode for its kind and the Manifest's time.
    fn stored_look(&self, attrs: Attrs, kind: Kind) -> (u16, SystemTime) {
        let default = match kind {
            Kind::Dir => self.modes.dir,
            Kind::File => self.modes.file,
        };
        let mtime = attrs.mtime_ns.map_or(self.base_mtime, time_of_ns);
        (attrs.mode.unwrap_or(default), mtime)
    }

    fn tree_attr(&self, ino: Ino) -> Result<Attr, NsError> {
        let (id, node) = self.tree_node(ino).ok_or(NsError::NotFound)?;
        Ok(match node.kind {
            NodeKind::Dir(children) => {
                let (perm, mtime) = self.stored_look(self.tree.dir_attrs(id), Kind::Dir);
                Attr {
                    ino,
                    kind: Kind::Dir,
                    size: 0,
                    mtime,
                    perm: self.modes.shown(Kind::Dir, perm),
                    nlink: 2 + self.tree_subdirs(children),
                }
            }
            NodeKind::File(item) => {
                let item = self.tree.item(item);
                let (perm, mtime) = self.stored_look(item.attrs(), Kind::File);
                Attr {
                    ino,
                    kind: Kind::File,
                    size: item.size(),
                    mtime,
                    perm: self.modes.shown(Kind::File, perm),
                    nlink: 1,
                }
            }
        })
    }

    /// Feeds the entries of directory `dir` from cookie `offset` to `add`
    /// (`.`, `..`, then the children by name), each with the cookie of the
    /// entry after it, until `add` reports a full buffer.
    pub fn list(
        &self,
        dir: Ino,
        offset: u64,
        mut add: impl FnMut(&str, Attr, u64) -> bool,
    ) -> Result<(), NsError> {
        let overlay = self.overlay.as_ref().map(|o| o.read());
        let attr = |ino| match &overlay {
            Some(o) => self.attr_in(o, ino),
            None => self.tree_attr(ino),
        };
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        if let Some(d) = overlay.as_ref().and_then(|o| o.dirs.get(&dir)) {
            let dots = [(1, ".", dir), (2, "..", d.parent)];
            let dots = dots.into_iter().filter(|(cookie, _, _)| *cookie > offset);
            for (cookie, name, ino) in dots.chain(d.children.listing_after(offset)) {
                if add(name, attr(ino)?, cookie) {
                    break;
                }
            }
            return Ok(());
        }
        if overlay.as_ref().is_some_and(|o| o.files.contains_key(&dir)) {
            return Err(NsError::NotADirectory);
        }
        let (_, node) = self.tree_node(dir).ok_or(NsError::NotFound)?;
        let NodeKind::Dir(children) = node.kind else {
            return Err(NsError::NotADirectory);
        };
        // Entry i carries cookie i + 1, so resuming is O(1) at any size.
        let mut i = start;
        loop {
            let (name, ino) = match i {
                0 => (".", dir),
                1 => ("..", tree_ino(node.parent)),
                i => match children.get(i - 2) {
                    Some(&c) => (self.tree.node(c).expect("child exists").name, tree_ino(c)),
                    None => return Ok(()),
                },
            };
            i += 1;
            if add(name, attr(ino)?, i as u64) {
                return Ok(());
            }
        }
    }

    /// Where the bytes of file `ino` are.
    pub fn content(&self, ino: Ino) -> Result<Content, NsError> {
        if let Some(o) = &self.overlay {
            let o = o.read();
            if let Some(f) = o.files.get(&ino) {
                return Ok(f.content.clone());
            }
            if o.dirs.contains_key(&ino) {
                return Err(NsError::IsADirectory);
            }
        }
        match self.tree_node(ino) {
            Some((_, node)) => match node.kind {
                NodeKind::File(item) => Ok(Content::Base(item)),
                NodeKind::Dir(_) => Err(NsError::IsADirectory),
            },
            None => Err(NsError::NotFound),
        }
    }

    /// Calls `f` with the overlay for a change, or fails on a read-only mount.
    fn change<T>(
        &self,
        f: impl FnOnce(&mut Change<'_>) -> Result<T, NsError>,
    ) -> Result<T, NsError> {
        let overlay = self.overlay.as_ref().ok_or(NsError::ReadOnly)?;
        let mut o = overlay.write();
        f(&mut Change {
            ns: self,
            overlay: &mut o,
        })
    }

    /// Creates an empty file `name` in `parent` whose bytes will be in
    /// `spool`, open for writing by one handle.
    pub fn create(
        &self,
        parent: Ino,
        name: &[u8],
        spool: SpoolFile,
        perm: u16,
    ) -> Result<Attr, NsError> {
        self.change(|c| {
            let name = c.new_name(parent, name)?;
            let modality = c.modality_of(parent)?.ok_or(NsError::NotPermitted(
                "files live in /<timeline>/<modality>/ and below",
            ))?;
            let ino = c.alloc();
            let now = SystemTime::now();
            c.overlay.files.insert(
                ino,
                FileNode {
                    content: Content::Spool(spool),
                    size: 0,
                    mtime: now,
                    perm,
                    generation: 0,
                    writers: 1,
                    origin: None,
                    modality,
                    link: Some((parent, name.clone())),
                    stored: false,
                },
            );
            c.insert(parent, name, ino, now)?;
            c.ns.attr_in(c.overlay, ino)
        })
    }

    /// Creates directory `name` in `parent`.
    pub fn mkdir(&self, parent: Ino, name: &[u8], perm: u16) -> Result<Attr, NsError> {
        self.change(|c| {
            let name = c.new_name(parent, name)?;
            let ino = c.alloc();
            let now = SystemTime::now();
            c.overlay.dirs.insert(
                ino,
                DirNode {
                    parent,
                    name: name.clone(),
                    children: Children::default(),
                    subdirs: 0,
                    mtime: now,
                    perm,
                },
            );
            c.insert(parent, name, ino, now)?;
            // A new modality is a new (empty) Track; a deeper directory is
            // recorded in its modality's Track.
            c.touch(ino)?;
            c.ns.attr_in(c.overlay, ino)
        })
    }

    /// Removes file `name` from `parent` (`unlink`); returns its inode.
    pub fn unlink(&self, parent: Ino, name: &[u8]) -> Result<Ino, NsError> {
        self.change(|c| {
            let ino = c.child(parent, name)?;
            if c.kind(ino)? == Kind::Dir {
                return Err(NsError::IsADirectory);
            }
            c.remove(parent, name)?;
            c.unlinked(ino);
            c.touch(parent)?;
            Ok(ino)
        })
    }

    /// Removes the empty directory `name` from `parent` (`rmdir`).
    pub fn rmdir(&self, parent: Ino, name: &[u8]) -> Result<(), NsError> {
        self.change(|c| {
            let ino = c.child(parent, name)?;
            if c.kind(ino)? != Kind::Dir {
                return Err(NsError::NotADirectory);
            }
            if c.has_children(ino)? {
                return Err(NsError::NotEmpty);
            }
            c.remove(parent, name)?;
            c.overlay.dirs.remove(&ino);
            c.touch(parent)?;
            Ok(())
        })
    }

    /// Moves `name` of `parent` to `new_name` of `new_parent`, replacing a
    /// file there, or an empty directory by a directory (`rename`).
    /// Returns the inode it replaced, if any.
    pub fn rename(
        &self,
        parent: Ino,
        name: &[u8],
        new_parent: Ino,
        new_name: &[u8],
    ) -> Result<Option<Ino>, NsError> {
        self.change(|c| {
            let ino = c.child(parent, name)?;
            let kind = c.kind(ino)?;
            let target_name = c.checked_name(new_parent, new_name)?;
            c.materialize(new_parent)?;
            let new_depth = c.depth(new_parent)? + 1;
            if kind == Kind::File && new_depth <= MODALITY_DEPTH {
                return Err(NsError::NotPermitted(
                    "files live in /<timeline>/<modality>/ and below",
                ));
            }
            // Items keep their modality: their objects are stored under it.
            // A timeline or modality directory holding items cannot be
            // renamed in place either.
            let (from, to) = (c.modality_of(parent)?, c.modality_of(new_parent)?);
            let moves_items = kind == Kind::File || c.min_file_depth(ino, 0)? != usize::MAX;
            if moves_items && (from.is_none() || from != to) {
                return Err(NsError::CrossModality);
            }
            if kind == Kind::Dir {
                // Into itself or below it: the tree would lose a cycle.
                let mut at = new_parent;
                while at != ROOT_INO {
                    if at == ino {
                        return Err(NsError::InvalidName(
                            "a directory cannot move into itself".into(),
                        ));
                    }
                    at = c.parent(at)?;
                }
                if new_depth < MODALITY_DEPTH && c.min_file_depth(ino, new_depth)? <= MODALITY_DEPTH
                {
                    return Err(NsError::NotPermitted(
                        "the move would put files above /<timeline>/<modality>/",
                    ));
                }
            }
            let replaced = c.overlay.dirs[&new_parent].children.get(&target_name);
            if let Some(old) = replaced {
                if old == ino {
                    return Ok(None); // same entry: nothing to do
                }
                match (kind, c.kind(old)?) {
                    (Kind::File, Kind::Dir) => return Err(NsError::IsADirectory),
                    (Kind::Dir, Kind::File) => return Err(NsError::NotADirectory),
                    (Kind::Dir, Kind::Dir) if c.has_children(old)? => {
                        return Err(NsError::NotEmpty)
                    }
                    _ => {}
                }
            }
            let now = SystemTime::now();
            c.remove(parent, name)?;
            if replaced.is_some() {
                c.remove(new_parent, target_name.as_bytes())?;
            }
            match kind {
                Kind::Dir => {
                    c.materialize(ino)?;
                    let dir = c.overlay.dirs.get_mut(&ino).expect("materialized");
                    dir.parent = new_parent;
                    dir.name = target_name.clone();
                }
                Kind::File => {
                    c.ensure_file(ino)?;
                    let file = c.overlay.files.get_mut(&ino).expect("just ensured");
                    file.link = Some((new_parent, target_name.clone()));
                }
            }
            c.insert(new_parent, target_name, ino, now)?;
            if let Some(old) = replaced {
                c.overlay.dirs.remove(&old);
                c.unlinked(old);
            }
            c.touch(parent)?;
            c.touch(new_parent)?;
            Ok(replaced)
        })
    }

    /// Updates file `ino` through `f` (size, content, times, mode, open
    /// counts), adding it to the overlay first if it is a tree file. With
    /// `changes_content`, its modality is marked for the next flush.
    pub fn update_file<T>(
        &self,
        ino: Ino,
        changes_content: bool,
        f: impl FnOnce(&mut FileNode) -> T,
    ) -> Result<T, NsError> {
        self.change(|c| {
            c.ensure_file(ino)?;
            let file = c.overlay.files.get_mut(&ino).expect("just ensured");
            let out = f(file);
            if changes_content {
                let modality = file.modality;
                c.overlay.dirty.insert(modality);
                c.overlay.changes += 1;
            }
            Ok(out)
        })
    }

    /// Updates file `ino` through `f` if the overlay knows it. Files it
    /// does not know (stored files never changed) cost only a read lock.
    pub fn update_existing_file<T>(
        &self,
        ino: Ino,
        f: impl FnOnce(&mut FileNode) -> T,
    ) -> Option<T> {
        let overlay = self.overlay.as_ref()?;
        if !overlay.read().files.contains_key(&ino) {
            return None;
        }
        overlay.write().files.get_mut(&ino).map(f)
    }

    /// The mode and mtime of file `ino` as they are to be recorded, if the
    /// overlay knows it.
    pub fn file_attrs(&self, ino: Ino) -> Option<Attrs> {
        let o = self.overlay.as_ref()?.read();
        o.files.get(&ino).map(|f| Attrs {
            mode: Some(f.perm),
            mtime_ns: Some(ns_of_time(f.mtime)),
        })
    }

    /// Files with a name whose bytes are written and not committed yet,
    /// and those bytes.
    pub fn uncommitted(&self) -> (usize, u64) {
        let Some(o) = &self.overlay else {
            return (0, 0);
        };
        let o = o.read();
        o.files
            .values()
            .filter(|f| f.link.is_some() && matches!(f.content, Content::Spool(_)))
            .fold((0, 0), |(n, bytes), f| (n + 1, bytes + f.size))
    }

    /// How many files the overlay holds (changed, created or open ones).
    pub fn overlay_files(&self) -> usize {
        self.overlay.as_ref().map_or(0, |o| o.read().files.len())
    }

    /// Counts a handle reading `ino`: a file with readers keeps its bytes
    /// when it loses its name. Kept apart from the overlay, so reading a
    /// stored file neither copies it there nor takes the overlay's lock.
    pub fn add_reader(&self, ino: Ino) {
        *self.readers.lock().entry(ino).or_default() += 1;
    }

    /// Uncounts a handle reading `ino`.
    pub fn remove_reader(&self, ino: Ino) {
        let mut readers = self.readers.lock();
        if let Some(n) = readers.get_mut(&ino) {
            *n -= 1;
            if *n == 0 {
                readers.remove(&ino);
            }
        }
    }

    fn is_read(&self, ino: Ino) -> bool {
        self.readers.lock().contains_key(&ino)
    }

    /// Forgets file `ino` if it has no name and no open handle; returns
    /// the spool files that held its bytes, now unused.
    pub fn release_if_unused(&self, ino: Ino) -> Vec<SpoolFile> {
        let Some(overlay) = &self.overlay else {
            return Vec::new();
        };
        // Most calls are closes of files that keep their name: a shared
        // lock tells, so readers closing files do not queue for the
        // exclusive one.
        if overlay
            .read()
            .files
            .get(&ino)
            .is_none_or(|f| f.link.is_some())
        {
            return Vec::new();
        }
        let mut o = overlay.write();
        match o.files.get(&ino) {
            Some(f) if f.link.is_none() && f.writers == 0 && !self.is_read(ino) => {
                let f = o.files.remove(&ino).expect("present");
                spool_files(&f)
            }
            _ => Vec::new(),
        }
    }

    /// What a flush commits: every modality directory, with the files of
    /// those changed since the last export. Files open for writing appear
    /// as their last complete version, or not at all if they have none.
    pub fn export(&self, known: &std::collections::HashSet<Ino>) -> Result<Export, NsError> {
        let overlay = self.overlay.as_ref().ok_or(NsError::ReadOnly)?;
        let mut o = overlay.write();
        let dirty: Vec<Ino> = o.dirty.drain().collect();
        let changes = o.changes;
        let c = Change {
            ns: self,
            overlay: &mut o,
        };
        let mut modalities = Vec::new();
        for (timeline, t_ino, t_kind) in c.named_children(ROOT_INO)? {
            if t_kind != Kind::Dir {
                continue;
            }
            for (modality, m_ino, m_kind) in c.named_children(t_ino)? {
                if m_kind != Kind::Dir {
                    continue;
                }
                // Unknown modalities (new, or without a committed Track) are
                // exported whole as well.
                let (files, dirs) = match dirty.contains(&m_ino) || !known.contains(&m_ino) {
                    true => {
                        let (files, dirs) = c.contents_below(m_ino)?;
                        (Some(files), dirs)
                    }
                    false => (None, Vec::new()),
                };
                modalities.push(ExportedModality {
                    ino: m_ino,
                    timeline: timeline.clone(),
                    modality,
                    files,
                    dirs,
                });
            }
        }
        Ok(Export {
            modalities,
            dirty,
            changes,
        })
    }

    /// Marks modalities changed again (their flush failed).
    pub fn restore_dirty(&self, dirty: &[Ino]) {
        if let Some(o) = &self.overlay {
            o.write().dirty.extend(dirty.iter().copied());
        }
    }

    /// The change counter: equal across two calls means nothing changed.
    pub fn changes(&self) -> u64 {
        self.overlay.as_ref().map_or(0, |o| o.read().changes)
    }

    /// Counts a change that marks no modality (a new timeline, say).
    pub fn count_change(&self) {
        if let Some(o) = &self.overlay {
            o.write().changes += 1;
        }
    }

    /// After a commit: files whose uploaded spool version (`generation`)
    /// is still theirs now read from the committed item. Returns the spool
    /// files no longer needed.
    pub fn mark_committed(
        &self,
        done: Vec<(Ino, SpoolFile, u64, Arc<CommittedItem>)>,
    ) -> Vec<SpoolFile> {
        let Some(overlay) = &self.overlay else {
            return Vec::new();
        };
        let mut o = overlay.write();
        let mut unused = Vec::new();
        for (ino, spool, generation, committed) in done {
            let Some(f) = o.files.get_mut(&ino) else {
                continue;
            };
            let is_it = |c: &Content| matches!(c, Content::Spool(s) if *s == spool);
            if f.writers == 0 && f.generation == generation && is_it(&f.content) {
                f.content = Content::Committed(committed);
                f.stored = true;
                unused.push(spool);
            } else if f.origin.as_ref().is_some_and(is_it) {
                f.origin = Some(Content::Committed(committed));
                f.stored = true;
                unused.push(spool);
            }
        }
        unused
    }

    /// The path of file `ino` from the root, if it still has a name.
    pub fn file_path(&self, ino: Ino) -> Result<Option<String>, NsError> {
        let link = match self
            .overlay
            .as_ref()
            .and_then(|o| o.read().files.get(&ino).map(|f| f.link.clone()))
        {
            Some(link) => link,
            None => {
                let (_, node) = self.tree_node(ino).ok_or(NsError::NotFound)?;
                Some((tree_ino(node.parent), node.name.into()))
            }
        };
        let Some((parent, name)) = link else {
            return Ok(None);
        };
        let mut parts = self.dir_path(parent)?;
        parts.push(name.to_string());
        Ok(Some(parts.join("/")))
    }

    /// Makes `name` in `parent` a closed file whose complete version is the
    /// spool file `spool` of `size` bytes, creating it or replacing its
    /// content (crash recovery replays the journal through this).
    pub fn put_file(
        &self,
        parent: Ino,
        name: &[u8],
        spool: SpoolFile,
        size: u64,
    ) -> Result<Ino, NsError> {
        let ino = match self.lookup(parent, name) {
            Ok(ino) => ino,
            Err(NsError::NotFound) => {
                let ino = self.create(parent, name, spool.clone(), 0o644)?.ino;
                self.update_file(ino, true, |f| {
                    f.writers = 0;
                    f.size = size;
                })?;
                return Ok(ino);
            }
            Err(e) => return Err(e),
        };
        self.update_file(ino, true, |f| {
            f.content = Content::Spool(spool);
            f.size = size;
            f.generation += 1;
            f.mtime = SystemTime::now();
        })?;
        Ok(ino)
    }

    /// Sets the mode and/or mtime of file or directory `ino`; the change is
    /// committed with its modality.
    pub fn set_attrs(
        &self,
        ino: Ino,
        perm: Option<u16>,
        mtime: Option<SystemTime>,
    ) -> Result<(), NsError> {
        match self.attr(ino)?.kind {
            Kind::Dir => self.update_dir(ino, perm, mtime),
            Kind::File => self.update_file(ino, true, |f| {
                f.perm = perm.unwrap_or(f.perm);
                f.mtime = mtime.unwrap_or(f.mtime);
            }),
        }
    }

    /// Sets the mode and/or mtime of directory `ino`.
    fn update_dir(
        &self,
        ino: Ino,
        perm: Option<u16>,
        mtime: Option<SystemTime>,
    ) -> Result<(), NsError> {
        self.change(|c| {
            c.materialize(ino)?;
            let dir = c.overlay.dirs.get_mut(&ino).expect("materialized");
            if let Some(p) = perm {
                dir.perm = p;
            }
            if let Some(t) = mtime {
                dir.mtime = t;
            }
            c.touch(ino)
        })
    }

    /// The path of directory `ino` from the root, as names.
    pub fn dir_path(&self, ino: Ino) -> Result<Vec<String>, NsError> {
        let overlay = self.overlay.as_ref().map(|o| o.read());
        let mut parts = Vec::new();
        let mut at = ino;
        while at != ROOT_INO {
            if let Some(d) = overlay.as_ref().and_then(|o| o.dirs.get(&at)) {
                parts.push(d.name.to_string());
                at = d.parent;
                continue;
            }
            let (_, node) = self.tree_node(at).ok_or(NsError::NotFound)?;
            parts.push(node.name.to_string());
            at = tree_ino(node.parent);
        }
        parts.reverse();
        Ok(parts)
    }
}

/// One change to the overlay, under its write lock.
struct Change<'a> {
    ns: &'a Namespace,
    overlay: &'a mut Overlay,
}

impl Change<'_> {
    /// Marks the modality holding directory `dir` (if any) changed.
    fn touch(&mut self, dir: Ino) -> Result<(), NsError> {
        if let Some(m) = self.modality_of(dir)? {
            self.overlay.dirty.insert(m);
        }
        self.overlay.changes += 1;
        Ok(())
    }

    /// The modality directory that `dir` is or is below (`None` above).
    fn modality_of(&self, dir: Ino) -> Result<Option<Ino>, NsError> {
        let mut chain = vec![dir];
        while *chain.last().expect("non-empty") != ROOT_INO {
            let up = self.parent(*chain.last().expect("non-empty"))?;
            chain.push(up);
        }
        // chain ends [.., modality, timeline, root]
        Ok(chain
            .len()
            .checked_sub(MODALITY_DEPTH + 1)
            .map(|i| chain[i]))
    }

    fn unlinked(&mut self, ino: Ino) {
        if let Some(f) = self.overlay.files.get_mut(&ino) {
            f.link = None;
        }
    }

    /// Adds tree file `ino` to the overlay (unchanged) unless it is there.
    fn ensure_file(&mut self, ino: Ino) -> Result<(), NsError> {
        if self.overlay.files.contains_key(&ino) {
            return Ok(());
        }
        let (_, node) = self.ns.tree_node(ino).ok_or(NsError::NotFound)?;
        let NodeKind::File(item) = node.kind else {
            return Err(NsError::IsADirectory);
        };
        let parent = tree_ino(node.parent);
        let modality = self
            .modality_of(parent)?
            .expect("tree files are below a modality");
        let (perm, mtime) = self
            .ns
            .stored_look(self.ns.tree.item(item).attrs(), Kind::File);
        self.overlay.files.insert(
            ino,
            FileNode {
                content: Content::Base(item),
                size: self.ns.tree.item(item).size(),
                mtime,
                perm,
                generation: 0,
                writers: 0,
                origin: None,
                modality,
                // A tree file that was moved is in the overlay already.
                link: Some((parent, node.name.into())),
                stored: true,
            },
        );
        Ok(())
    }

    /// The children of `dir` with names and kinds.
    fn named_children(&self, dir: Ino) -> Result<Vec<(String, Ino, Kind)>, NsError> {
        if let Some(d) = self.overlay.dirs.get(&dir) {
            return d
                .children
                .iter()
                .map(|(n, i)| Ok((n.to_string(), i, self.kind(i)?)))
                .collect();
        }
        let (_, node) = self.ns.tree_node(dir).ok_or(NsError::NotFound)?;
        let NodeKind::Dir(children) = node.kind else {
            return Err(NsError::NotADirectory);
        };
        children
            .iter()
            .map(|&c| {
                let ino = tree_ino(c);
                let name = self.ns.tree.node(c).expect("child exists").name.to_string();
                Ok((name, ino, self.kind(ino)?))
            })
            .collect()
    }

    /// Every file below modality directory `dir`, as a flush commits it.
    /// Every file below modality directory `dir`, as a flush commits it,
    /// and the directories to record (see [`ExportedModality::dirs`]).
    fn contents_below(&self, dir: Ino) -> Result<(Vec<ExportedFile>, Vec<TrackDir>), NsError> {
        let (mut files, mut dirs) = (Vec::new(), Vec::new());
        let mut pending = vec![(dir, String::new())];
        while let Some((d, path)) = pending.pop() {
            let children = self.named_children(d)?;
            let attrs = self.dir_attrs(d)?;
            if path.is_empty() || children.is_empty() || attrs != Attrs::default() {
                dirs.push(TrackDir {
                    name: path.clone(),
                    attrs,
                });
            }
            let prefix = if path.is_empty() { path } else { path + "/" };
            for (name, ino, kind) in children {
                let path = format!("{prefix}{name}");
                if kind == Kind::Dir {
                    pending.push((ino, path));
                    continue;
                }
                let recorded = |f: &FileNode| Attrs {
                    mode: Some(f.perm),
                    mtime_ns: Some(ns_of_time(f.mtime)),
                };
                let (content, size, generation, stored, attrs) = match self.overlay.files.get(&ino)
                {
                    Some(f) if f.writers > 0 => match &f.origin {
                        Some(origin) => {
                            let size = self.size_of(origin);
                            (origin.clone(), size, 0, f.stored, recorded(f))
                        }
                        None => continue, // never complete yet
                    },
                    Some(f) => (
                        f.content.clone(),
                        f.size,
                        f.generation,
                        f.stored,
                        recorded(f),
                    ),
                    None => match self.ns.tree_node(ino).map(|(_, n)| n.kind) {
                        Some(NodeKind::File(index)) => {
                            let item = self.ns.tree.item(index);
                            (Content::Base(index), item.size(), 0, true, item.attrs())
                        }
                        _ => return Err(NsError::NotFound),
                    },
                };
                files.push(ExportedFile {
                    ino,
                    name: path,
                    content,
                    size,
                    generation,
                    stored,
                    attrs,
                });
            }
        }
        Ok((files, dirs))
    }

    /// The attributes to record for directory `dir`: what a change set
    /// (the overlay), else what its Track recorded.
    fn dir_attrs(&self, dir: Ino) -> Result<Attrs, NsError> {
        if let Some(d) = self.overlay.dirs.get(&dir) {
            return Ok(Attrs {
                mode: Some(d.perm),
                mtime_ns: Some(ns_of_time(d.mtime)),
            });
        }
        let (id, _) = self.ns.tree_node(dir).ok_or(NsError::NotFound)?;
        Ok(self.ns.tree.dir_attrs(id))
    }

    /// The size of a complete version (spool versions record none here:
    /// the flush stats the file).
    fn size_of(&self, content: &Content) -> u64 {
        match content {
            Content::Base(i) => self.ns.tree.item(*i).size(),
            Content::Committed(c) => c.item.size,
            Content::Spool(_) => u64::MAX,
        }
    }

    fn alloc(&mut self) -> Ino {
        let ino = self.overlay.next_ino;
        self.overlay.next_ino += 1;
        ino
    }

    /// `name` if it may be an entry of directory `parent`: timelines and
    /// modalities follow the segment rules (no reserved names), names below
    /// a modality the item-name rules.
    fn checked_name(&self, parent: Ino, name: &[u8]) -> Result<Box<str>, NsError> {
        if name.len() > NAME_MAX {
            return Err(NsError::NameTooLong);
        }
        let name = std::str::from_utf8(name)
            .map_err(|_| NsError::InvalidName("names must be UTF-8".into()))?;
        let checked = if self.depth(parent)? < MODALITY_DEPTH {
            validate_segment(name, "name")
        } else if name.contains('/') {
            return Err(NsError::InvalidName("names cannot contain '/'".into()));
        } else {
            validate_item_name(name, "name")
        };
        checked.map_err(|e| NsError::InvalidName(e.to_string()))?;
        Ok(name.into())
    }

    /// A valid name not yet used in `parent`.
    fn new_name(&mut self, parent: Ino, name: &[u8]) -> Result<Box<str>, NsError> {
        let name = self.checked_name(parent, name)?;
        self.materialize(parent)?;
        if self.overlay.dirs[&parent].children.contains_key(&name) {
            return Err(NsError::Exists);
        }
        Ok(name)
    }

    fn kind(&self, ino: Ino) -> Result<Kind, NsError> {
        if self.overlay.files.contains_key(&ino) {
            return Ok(Kind::File);
        }
        if self.overlay.dirs.contains_key(&ino) {
            return Ok(Kind::Dir);
        }
        match self.ns.tree_node(ino).ok_or(NsError::NotFound)?.1.kind {
            NodeKind::Dir(_) => Ok(Kind::Dir),
            NodeKind::File(_) => Ok(Kind::File),
        }
    }

    fn child(&mut self, parent: Ino, name: &[u8]) -> Result<Ino, NsError> {
        if name.len() > NAME_MAX {
            return Err(NsError::NameTooLong);
        }
        self.materialize(parent)?;
        let name = std::str::from_utf8(name).map_err(|_| NsError::NotFound)?;
        self.overlay.dirs[&parent]
            .children
            .get(name)
            .ok_or(NsError::NotFound)
    }

    fn parent(&self, ino: Ino) -> Result<Ino, NsError> {
        if let Some(d) = self.overlay.dirs.get(&ino) {
            return Ok(d.parent);
        }
        let (_, node) = self.ns.tree_node(ino).ok_or(NsError::NotFound)?;
        Ok(tree_ino(node.parent))
    }

    /// 0 for the root, 1 for a timeline, 2 for a modality, …
    fn depth(&self, dir: Ino) -> Result<usize, NsError> {
        let mut depth = 0;
        let mut at = dir;
        while at != ROOT_INO {
            at = self.parent(at)?;
            depth += 1;
        }
        Ok(depth)
    }

    /// The smallest depth of a file below directory `dir` if `dir` were at
    /// `depth` (`usize::MAX` without files).
    fn min_file_depth(&self, dir: Ino, depth: usize) -> Result<usize, NsError> {
        let mut min = usize::MAX;
        let mut pending = vec![(dir, depth)];
        while let Some((d, depth)) = pending.pop() {
            for (ino, kind) in self.children(d)? {
                match kind {
                    Kind::File => min = min.min(depth + 1),
                    Kind::Dir => pending.push((ino, depth + 1)),
                }
            }
        }
        Ok(min)
    }

    fn children(&self, dir: Ino) -> Result<Vec<(Ino, Kind)>, NsError> {
        if let Some(d) = self.overlay.dirs.get(&dir) {
            return d
                .children
                .iter()
                .map(|(_, i)| Ok((i, self.kind(i)?)))
                .collect();
        }
        let (_, node) = self.ns.tree_node(dir).ok_or(NsError::NotFound)?;
        match node.kind {
            NodeKind::Dir(children) => children
                .iter()
                .map(|&c| Ok((tree_ino(c), self.kind(tree_ino(c))?)))
                .collect(),
            NodeKind::File(_) => Err(NsError::NotADirectory),
        }
    }

    fn has_children(&self, dir: Ino) -> Result<bool, NsError> {
        if let Some(d) = self.overlay.dirs.get(&dir) {
            return Ok(!d.children.is_empty());
        }
        let (_, node) = self.ns.tree_node(dir).ok_or(NsError::NotFound)?;
        match node.kind {
            NodeKind::Dir(children) => Ok(!children.is_empty()),
            NodeKind::File(_) => Err(NsError::NotADirectory),
        }
    }

    /// Copies tree directory `dir`'s children into the overlay (once).
    fn materialize(&mut self, dir: Ino) -> Result<(), NsError> {
        if self.overlay.dirs.contains_key(&dir) {
            return Ok(());
        }
        if self.overlay.files.contains_key(&dir) {
            return Err(NsError::NotADirectory);
        }
        let (id, node) = self.ns.tree_node(dir).ok_or(NsError::NotFound)?;
        let NodeKind::Dir(tree_children) = node.kind else {
            return Err(NsError::NotADirectory);
        };
        let tree = &self.ns.tree;
        let (perm, mtime) = self.ns.stored_look(tree.dir_attrs(id), Kind::Dir);
        let mut entries = Children::default();
        for &c in tree_children {
            entries.insert(tree.node(c).expect("child exists").name.into(), tree_ino(c));
        }
        let children = entries;
        let subdirs = self.ns.tree_subdirs(tree_children);
        self.overlay.dirs.insert(
            dir,
            DirNode {
                parent: tree_ino(node.parent),
                name: node.name.into(),
                children,
                subdirs,
                mtime,
                perm,
            },
        );
        Ok(())
    }

    fn insert(
        &mut self,
        parent: Ino,
        name: Box<str>,
        ino: Ino,
        now: SystemTime,
    ) -> Result<(), NsError> {
        self.materialize(parent)?;
        let is_dir = self.kind(ino)? == Kind::Dir;
        let dir = self.overlay.dirs.get_mut(&parent).expect("materialized");
        dir.children.insert(name, ino);
        dir.subdirs += u32::from(is_dir);
        dir.mtime = now;
        Ok(())
    }

    fn remove(&mut self, parent: Ino, name: &[u8]) -> Result<(), NsError> {
        self.materialize(parent)?;
        let name = std::str::from_utf8(name).map_err(|_| NsError::NotFound)?;
        let ino = self.overlay.dirs[&parent]
            .children
            .get(name)
            .ok_or(NsError::NotFound)?;
        let is_dir = self.kind(ino)? == Kind::Dir;
        let dir = self.overlay.dirs.get_mut(&parent).expect("materialized");
        dir.children.remove(name);
        dir.subdirs -= u32::from(is_dir);
        dir.mtime = SystemTime::now();
        Ok(())
    }
}

/// The spool files a file node holds.
fn spool_files(f: &FileNode) -> Vec<SpoolFile> {
    [Some(&f.content), f.origin.as_ref()]
        .into_iter()
        .flatten()
        .filter_map(|c| match c {
            Content::Spool(s) => Some(s.clone()),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use packfs_core::dataset::{ItemSource, Snapshot, SnapshotTrack};
    use packfs_format::{Manifest, ObjectId};

    /// `/t/m/{a, b, sub/c}` and `/t/n/d`.
    fn tree() -> Tree {
        let item = |name: &str, size| Item {
            name: name.into(),
            size,
            media_type: "application/octet-stream".into(),
            source: ItemSource::Whole {
                object: Arc::new(object_store::path::Path::from("x")),
            },
            attrs: Default::default(),
        };
        let track = |modality: &str, items: Vec<packfs_core::dataset::Item>| SnapshotTrack {
            timeline: "t".into(),
            modality: modality.into(),
            track_id: ObjectId::of(modality.as_bytes()),
            what: format!("track {modality}"),
            items: items.into_iter().collect(),
            dirs: Vec::new(),
        };
        Tree::build(Snapshot {
            manifest_id: ObjectId::of(b"m"),
            manifest: Manifest {
                parents: vec![],
                timelines: vec!["t".into()],
                tracks: vec![],
                ts_unix_ns: 1_000_000_000,
                writer: "test".into(),
            },
            tracks: vec![
                track("m", vec![item("a", 1), item("b", 2), item("sub/c", 3)]),
                track("n", vec![item("d", 4)]),
            ],
        })
        .unwrap()
    }

    fn path(ns: &Namespace, p: &str) -> Result<Ino, NsError> {
        p.split('/')
            .filter(|s| !s.is_empty())
            .try_fold(ROOT_INO, |dir, name| ns.lookup(dir, name.as_bytes()))
    }

    fn names(ns: &Namespace, p: &str) -> Vec<String> {
        let mut out = Vec::new();
        ns.list(path(ns, p).unwrap(), 2, |name, _, _| {
            out.push(name.to_string());
            false
        })
        .unwrap();
        out
    }

    fn spool(n: u32) -> SpoolFile {
        SpoolFile {
            path: format!("/spool/{n}").into(),
        }
    }

    #[test]
    fn a_read_only_namespace_serves_the_tree_and_refuses_changes() {
        let ns = Namespace::new(tree(), false);
        assert_eq!(names(&ns, "t/m"), ["a", "b", "sub"]);
        let b = path(&ns, "t/m/b").unwrap();
        assert_eq!(ns.attr(b).unwrap().size, 2);
        assert_eq!(ns.attr(b).unwrap().perm, 0o444);
        assert!(matches!(ns.content(b), Ok(Content::Base(_))));
        let m = path(&ns, "t/m").unwrap();
        assert_eq!(ns.create(m, b"x", spool(1), 0o644), Err(NsError::ReadOnly));
        assert_eq!(ns.unlink(m, b"a"), Err(NsError::ReadOnly));
        assert_eq!(ns.lookup(b, b"x"), Err(NsError::NotADirectory));
        assert_eq!(
            ns.dir_path(path(&ns, "t/m/sub").unwrap()).unwrap(),
            ["t", "m", "sub"]
        );
    }

    #[test]
    fn files_are_created_only_below_a_modality_and_names_are_checked() {
        let ns = Namespace::new(tree(), true);
        let (t, m) = (path(&ns, "t").unwrap(), path(&ns, "t/m").unwrap());
        let x = ns.create(m, b"x", spool(1), 0o644).unwrap();
        assert_eq!(x.ino, FIRST_NEW_INO);
        assert_eq!((x.kind, x.size), (Kind::File, 0));
        assert_eq!(path(&ns, "t/m/x").unwrap(), x.ino);
        assert_eq!(names(&ns, "t/m"), ["a", "b", "sub", "x"]);
        assert_eq!(ns.attr(path(&ns, "t/m").unwrap()).unwrap().perm, 0o755);
        assert!(matches!(
            ns.create(t, b"y", spool(2), 0o644),
            Err(NsError::NotPermitted(_))
        ));
        assert!(matches!(
            ns.create(ROOT_INO, b"y", spool(2), 0o644),
            Err(NsError::NotPermitted(_))
        ));
        assert_eq!(ns.create(m, b"a", spool(2), 0o644), Err(NsError::Exists));
        assert_eq!(
            ns.create(m, &[b'n'; 256], spool(2), 0o644),
            Err(NsError::NameTooLong)
        );
        assert!(matches!(
            ns.create(m, b"..", spool(2), 0o644),
            Err(NsError::InvalidName(_))
        ));
        assert!(matches!(
            ns.mkdir(ROOT_INO, b".packfs", 0o755),
            Err(NsError::InvalidName(_))
        ));
        assert!(matches!(
            ns.mkdir(ROOT_INO, b"_packfs", 0o755),
            Err(NsError::InvalidName(_))
        ));
        ns.create(m, b".packfs", spool(4), 0o644).unwrap();
        // New timeline and modality, then a file in it.
        let t2 = ns.mkdir(ROOT_INO, b"t2", 0o755).unwrap().ino;
        let m2 = ns.mkdir(t2, b"m2", 0o755).unwrap().ino;
        ns.create(m2, b"f", spool(3), 0o600).unwrap();
        assert_eq!(names(&ns, "/"), ["t", "t2"]);
        assert_eq!(ns.dir_path(m2).unwrap(), ["t2", "m2"]);
    }

    #[test]
    fn unlink_and_rmdir_follow_posix() {
        let ns = Namespace::new(tree(), true);
        let m = path(&ns, "t/m").unwrap();
        let a = path(&ns, "t/m/a").unwrap();
        assert_eq!(ns.unlink(m, b"a"), Ok(a));
        assert_eq!(path(&ns, "t/m/a"), Err(NsError::NotFound));
        assert_eq!(ns.unlink(m, b"a"), Err(NsError::NotFound));
        assert_eq!(ns.unlink(m, b"sub"), Err(NsError::IsADirectory));
        assert_eq!(ns.rmdir(m, b"b"), Err(NsError::NotADirectory));
        assert_eq!(ns.rmdir(m, b"sub"), Err(NsError::NotEmpty));
        ns.unlink(path(&ns, "t/m/sub").unwrap(), b"c").unwrap();
        ns.rmdir(m, b"sub").unwrap();
        assert_eq!(names(&ns, "t/m"), ["b"]);
        // The unlinked file's inode still answers (open handles use it).
        assert_eq!(ns.attr(a).unwrap().size, 1);
    }

    #[test]
    fn rename_moves_files_and_directories_and_refuses_the_impossible() {
        let ns = Namespace::new(tree(), true);
        let (m, n) = (path(&ns, "t/m").unwrap(), path(&ns, "t/n").unwrap());
        let (a, b) = (path(&ns, "t/m/a").unwrap(), path(&ns, "t/m/b").unwrap());
        // Over an existing file: the target is replaced.
        assert_eq!(ns.rename(m, b"a", m, b"b"), Ok(Some(b)));
        assert_eq!(path(&ns, "t/m/b"), Ok(a));
        assert_eq!(ns.rename(m, b"b", m, b"sub"), Err(NsError::IsADirectory));
        // Items stay in their modality (their objects live under it).
        assert_eq!(ns.rename(m, b"b", n, b"b"), Err(NsError::CrossModality));
        assert_eq!(ns.rename(m, b"sub", n, b"sub"), Err(NsError::CrossModality));
        assert_eq!(
            ns.rename(
                path(&ns, "t").unwrap(),
                b"m",
                path(&ns, "t").unwrap(),
                b"m2"
            ),
            Err(NsError::CrossModality)
        );
        // A tree directory moves with its children.
        let deeper = ns.mkdir(m, b"deeper", 0o755).unwrap().ino;
        let sub = path(&ns, "t/m/sub").unwrap();
        let c = path(&ns, "t/m/sub/c").unwrap();
        ns.rename(m, b"sub", deeper, b"moved").unwrap();
        assert_eq!(path(&ns, "t/m/deeper/moved/c"), Ok(c));
        assert_eq!(path(&ns, "t/m/sub"), Err(NsError::NotFound));
        assert_eq!(ns.dir_path(sub).unwrap(), ["t", "m", "deeper", "moved"]);
        assert_eq!(
            ns.rename(m, b"deeper", sub, b"loop"),
            Err(NsError::InvalidName(
                "a directory cannot move into itself".into()
            ))
        );
        // Onto a file, a non-empty directory, and an empty one.
        let e = ns.mkdir(m, b"empty", 0o755).unwrap().ino;
        assert_eq!(
            ns.rename(deeper, b"moved", m, b"b"),
            Err(NsError::NotADirectory)
        );
        assert_eq!(ns.rename(m, b"empty", m, b"deeper"), Err(NsError::NotEmpty));
        assert_eq!(ns.rename(deeper, b"moved", m, b"empty"), Ok(Some(e)));
        assert!(path(&ns, "t/m/empty/c").is_ok());
        // Files stay below a modality; empty directories move freely.
        assert!(matches!(
            ns.rename(m, b"b", path(&ns, "t").unwrap(), b"b"),
            Err(NsError::NotPermitted(_))
        ));
        ns.rename(m, b"deeper", ROOT_INO, b"t3").unwrap();
        assert_eq!(names(&ns, "/"), ["t", "t3"]);
    }

    #[test]
    fn a_directorys_link_count_is_two_plus_its_subdirectories() {
        let ns = Namespace::new(tree(), true);
        let nlink = |p: &str| ns.attr(path(&ns, p).unwrap()).unwrap().nlink;
        let m = path(&ns, "t/m").unwrap();
        assert_eq!((nlink("t"), nlink("t/m"), nlink("t/m/sub")), (4, 3, 2));
        ns.mkdir(m, b"d1", 0o755).unwrap();
        let d2 = ns.mkdir(m, b"d2", 0o755).unwrap().ino;
        assert_eq!(nlink("t/m"), 5);
        // A directory moving down one level: its old parent loses a link,
        // its new parent gains one.
        ns.rename(m, b"d1", d2, b"d1").unwrap();
        assert_eq!((nlink("t/m"), nlink("t/m/d2")), (4, 3));
        // Over an empty directory: one goes, one comes.
        ns.mkdir(m, b"empty", 0o755).unwrap();
        ns.rename(d2, b"d1", m, b"empty").unwrap();
        assert_eq!((nlink("t/m"), nlink("t/m/d2")), (5, 2));
        // Files do not count; rmdir does.
        ns.create(m, b"f", spool(1), 0o644).unwrap();
        ns.rmdir(m, b"d2").unwrap();
        assert_eq!((nlink("t/m"), nlink("t")), (4, 4));
        ns.rename(m, b"empty", path(&ns, "t/n").unwrap(), b"moved")
            .unwrap();
        assert_eq!((nlink("t/m"), nlink("t/n")), (3, 3));
    }

    #[test]
    fn a_listing_resumed_after_unlinks_returns_every_other_entry_once() {
        let ns = Namespace::new(tree(), true);
        let m = path(&ns, "t/m").unwrap();
        for i in 0..100 {
            ns.create(m, format!("f{i:03}").as_bytes(), spool(i), 0o644)
                .unwrap();
        }
        // Read in batches of 10, unlinking each batch before the next call,
        // as `rm -rf` does.
        let (mut seen, mut offset) = (Vec::new(), 0);
        loop {
            let mut batch = Vec::new();
            ns.list(m, offset, |name, _, cookie| {
                batch.push((name.to_string(), cookie));
                batch.len() == 10
            })
            .unwrap();
            let Some(&(_, last)) = batch.last() else {
                break;
            };
            offset = last;
            for (name, _) in &batch {
                if name != "." && name != ".." && name != "sub" {
                    ns.unlink(m, name.as_bytes()).unwrap();
                }
                seen.push(name.clone());
            }
        }
        let mut expected = vec![
            ".".to_string(),
            "..".into(),
            "a".into(),
            "b".into(),
            "sub".into(),
        ];
        expected.extend((0..100).map(|i| format!("f{i:03}")));
        seen.sort();
        expected.sort();
        assert_eq!(seen, expected);
        assert_eq!(names(&ns, "t/m"), ["sub"]);
    }

    #[test]
    fn changing_a_tree_file_keeps_its_inode_and_content() {
        let ns = Namespace::new(tree(), true);
        let b = path(&ns, "t/m/b").unwrap();
        ns.update_file(b, false, |f| {
            assert!(matches!(f.content, Content::Base(_)));
            f.perm = 0o600;
        })
        .unwrap();
        let attr = ns.attr(b).unwrap();
        assert_eq!((attr.perm, attr.size), (0o600, 2));
        assert!(matches!(ns.content(b), Ok(Content::Base(_))));
        assert_eq!(
            ns.update_file(path(&ns, "t/m/sub").unwrap(), false, |_| ()),
            Err(NsError::IsADirectory)
        );
    }
}
