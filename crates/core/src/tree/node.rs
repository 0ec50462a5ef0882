//! What a [`super::Tree`] hands out, whichever way it holds the items:
//! node ids, nodes, items, and its errors.

use std::sync::Arc;

use packfs_format::{Attrs, ObjectId, Special};
use thiserror::Error;

use crate::dataset::{DatasetError, ItemTable};

/// Index of a node; the root is [`ROOT`].
pub type NodeId = u32;

/// The root directory's node.
pub(super) const ROOT: NodeId = 0;

/// A file's node id is its item index with this bit set: files need no
/// node of their own, so a tree of a billion items holds no table of them.
/// Directories are numbered from the root, 0.
pub(super) const FILE: NodeId = 1 << 31;

/// Most items a tree holds: file ids must leave [`FILE`] clear.
pub(super) const MAX_ITEMS: u64 = (FILE - 2) as u64;

/// Errors finding a path in the tree, or reading the index pages behind it.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum TreeError {
    #[error("{path}: no such file or directory")]
    NotFound { path: String },
    #[error("{path}: not a directory")]
    NotADirectory { path: String },
    #[error("{path}: is a directory")]
    IsADirectory { path: String },
    #[error("{path}: {detail}")]
    Conflict { path: String, detail: &'static str },
    #[error("invalid name {name:?} in {what}: duplicate name")]
    Duplicate { what: String, name: String },
    #[error("the dataset has more than {MAX_ITEMS} files or directories")]
    TooLarge,
    /// A page of a Track's index could not be read or is damaged: the
    /// nodes it holds cannot be served, and only those.
    #[error(transparent)]
    Index(Box<DatasetError>),
}

impl From<DatasetError> for TreeError {
    fn from(e: DatasetError) -> Self {
        TreeError::Index(Box::new(e))
    }
}

/// A file or directory, as [`super::Tree::node`] hands it out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    pub name: String,
    pub parent: NodeId,
    pub kind: NodeKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeKind {
    Dir,
    /// Index of the item, for [`super::Tree::item`].
    File(u32),
}

/// A child of a directory as [`super::Tree::children`] hands it out: what
/// a listing shows of it, read from the row that lists it.
#[derive(Clone, Copy, Debug)]
pub struct Child<'a> {
    pub id: NodeId,
    pub name: &'a str,
    /// Where a listing resumes after it (never 0).
    pub next: u64,
    pub look: Look,
}

/// What `stat` shows of a node, as its Track records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Look {
    /// A directory: its recorded mode and mtime, and its subdirectories
    /// when the tree knows them without reading pages.
    Dir { attrs: Attrs, subdirs: Option<u32> },
    File {
        size: u64,
        attrs: Attrs,
        /// What it is if not a regular file (its media type says).
        special: Option<Special>,
    },
}

/// The Track a run of the tree's items came from.
#[derive(Clone, Debug)]
pub struct TrackSpan {
    /// Index of the Track's first item among all the tree's items.
    pub first_item: u32,
    /// Its items: the tree's items `first_item..first_item + len`.
    pub len: u32,
    pub timeline: String,
    pub modality: String,
    pub track: ObjectId,
}

/// An item of the tree: what `stat` shows of it. What reading it needs is
/// [`super::Tree::item_data`].
#[derive(Clone)]
pub struct TreeItem {
    table: Arc<ItemTable>,
    row: usize,
}

impl TreeItem {
    pub(super) fn new(table: Arc<ItemTable>, row: usize) -> Self {
        TreeItem { table, row }
    }

    /// Path below the modality directory.
    pub fn name(&self) -> &str {
        self.table.get(self.row).name()
    }

    pub fn size(&self) -> u64 {
        self.table.get(self.row).size()
    }

    pub fn media_type(&self) -> &Arc<str> {
        self.table.get(self.row).media_type()
    }

    /// Mode and mtime its writer recorded.
    pub fn attrs(&self) -> Attrs {
        self.table.get(self.row).attrs()
    }

    /// What it is if not a regular file.
    pub fn special(&self) -> Option<Special> {
        Special::of_media_type(self.media_type())
    }

    /// What a listing shows of it.
    pub fn look(&self) -> Look {
        Look::File {
            size: self.size(),
            attrs: self.attrs(),
            special: self.special(),
        }
    }

    /// The next item of its Track if the same page holds it: a pass over
    /// items in order finds each page once.
    pub fn next_on_page(&self) -> Option<TreeItem> {
        (self.row + 1 < self.table.len()).then(|| TreeItem::new(self.table.clone(), self.row + 1))
    }
}

impl std::fmt::Debug for TreeItem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.table.get(self.row).fmt(f)
    }
}

pub(super) fn id_is_file(id: NodeId) -> bool {
    id & FILE != 0
}

/// The last component of a `/`-separated name.
pub(super) fn leaf(name: &str) -> &str {
    name.rsplit_once('/').map_or(name, |(_, leaf)| leaf)
}

/// The directory part of a `/`-separated name (`""` for a top name).
pub(super) fn parent_path(name: &str) -> &str {
    name.rsplit_once('/').map_or("", |(dir, _)| dir)
}

/// `name` in directory `dir`, a path below a modality (`""` for the
/// modality directory itself).
pub(super) fn join(dir: &str, name: &str) -> String {
    match dir.is_empty() {
        true => name.to_string(),
        false => format!("{dir}/{name}"),
    }
}
