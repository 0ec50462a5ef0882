//! The mounted namespace: the snapshot's [`Tree`] and, on a read-write
//! mount, an overlay of the changes made through the mount.
//!
//! Inodes: a tree node `n` is inode `n + 1` (FUSE's root is 1), for the
//! whole life of the mount, whatever happens to its name; nodes created
//! through the mount get inodes from `FIRST_NEW_INO` up. The overlay is
//! copy-on-write by directory: the first change inside a tree directory
//! copies its child list into the overlay, which from then on answers for
//! that directory; untouched directories are served by the tree, so a
//! read-only mount (no overlay at all) pays nothing for this module.
//!
//! This module is pure bookkeeping: no FUSE types and no I/O. File bytes
//! are described by [`Content`]; the write spool owns the files behind it.
//!
//! - this file: the namespace, its inodes and errors;
//! - `read.rs`: lookups, attributes, listings, paths;
//! - `overlay.rs`: the overlay's nodes; `change.rs`: the POSIX changes
//!   made to it (create, mkdir, unlink, rmdir, rename, attributes);
//! - `writers.rs`: the namespace's side of a write session (a file open
//!   for writing, its live and complete versions);
//! - `lifetime.rs`: when a file without a name can be forgotten and its
//!   spool files freed;
//! - `export.rs`: what a flush commits, and what it committed;
//! - [`Modes`]: the permission bits the mount shows.

mod change;
mod content;
mod export;
mod lifetime;
mod modes;
mod overlay;
mod read;
mod writers;

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use packfs_core::kind::Kind;
use packfs_core::tree::{Node, NodeId, Tree, TreeError};
use packfs_format::Special;
use parking_lot::RwLock;
use thiserror::Error;

pub use content::{CommittedItem, Content, SpoolFile};
pub use export::{EditScope, Export, ExportedFile, ExportedModality, Taken};
pub use modes::Modes;
use overlay::Overlay;
pub use overlay::Vacated;
pub use writers::{Edit, Joined};

/// An inode number.
pub type Ino = u64;
/// The root directory's inode.
pub const ROOT_INO: Ino = 1;
/// The first inode handed to a node created through the mount.
pub(crate) const FIRST_NEW_INO: Ino = 1 << 32;
/// Longest name of one directory entry (`NAME_MAX`).
const NAME_MAX: usize = 255;
/// Directory depth of a modality (`/<timeline>/<modality>`): items live
/// below it.
const MODALITY_DEPTH: usize = 2;

/// Why a namespace operation failed. The FUSE layer maps these to errno.
#[derive(Debug, Error, PartialEq, Eq)]
#[non_exhaustive]
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
    /// A request that does not apply to the node (`readlink` of a file
    /// that is no symbolic link, `mknod` of an unknown type).
    #[error("invalid argument: {0}")]
    Invalid(&'static str),
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
    /// The page of the dataset's index that holds the node cannot be read
    /// or is damaged (the message names it).
    #[error("{0}")]
    Index(String),
}

impl From<TreeError> for NsError {
    fn from(e: TreeError) -> Self {
        match e {
            TreeError::NotFound { .. } => NsError::NotFound,
            e => {
                tracing::error!("{e}");
                NsError::Index(e.to_string())
            }
        }
    }
}

/// What `stat` shows of a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attr {
    pub ino: Ino,
    pub kind: Kind,
    pub size: u64,
    pub mtime: SystemTime,
    /// Kept while mounted (`utimensat`); a stored node's is its mtime.
    pub atime: SystemTime,
    /// The last change of the node or its bytes while mounted; a stored
    /// node's is its mtime.
    pub ctime: SystemTime,
    /// Permission bits (`0o644`, …).
    pub perm: u16,
    /// Links: 2 plus its subdirectories for a directory, 1 for a file, 0 for
    /// an unlinked open file.
    pub nlink: u32,
    /// What a file is if not a regular one.
    pub special: Option<Special>,
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

fn tree_ino(id: NodeId) -> Ino {
    Ino::from(id) + 1
}

/// The tree node id of `ino`, if it is a tree node's inode.
fn tree_id(ino: Ino) -> Option<NodeId> {
    match ino {
        0 => None,
        ino if ino >= FIRST_NEW_INO => None,
        ino => NodeId::try_from(ino - 1).ok(),
    }
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
                    touched: Default::default(),
                    moved: Default::default(),
                    vacated: Vec::new(),
                    changes: 0,
                })
            }),
            base_mtime,
            modes: Modes::default_for(writable),
            readers: Default::default(),
        }
    }

    /// The same namespace showing stored nodes with `modes`.
    pub(crate) fn with_modes(mut self, modes: Modes) -> Self {
        self.modes = modes;
        self
    }

    pub fn tree(&self) -> &Arc<Tree> {
        &self.tree
    }

    /// The tree node behind `ino` (`NotFound` if it is none).
    fn tree_node(&self, ino: Ino) -> Result<(NodeId, Node), NsError> {
        let id = tree_id(ino).ok_or(NsError::NotFound)?;
        let node = self.tree.node(id)?.ok_or(NsError::NotFound)?;
        Ok((id, node))
    }
}

/// `name` in directory `dir`, a path below a modality (`""` for the
/// modality directory itself).
fn join(dir: &str, name: &str) -> String {
    match dir.is_empty() {
        true => name.to_string(),
        false => format!("{dir}/{name}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use packfs_core::dataset::{Item, ItemSource, Snapshot, SnapshotTrack};
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
            pages: Vec::new(),
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
