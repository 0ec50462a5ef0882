//! Catalogs: what a mount shows besides the dataset's own tree, and the
//! one description of file bytes every mounted file uses.
//!
//! A file's bytes are [`Extents`]: a [`ByteRangeMap`] from the file's bytes
//! to [`Source`]s (a range of a store object, bytes held in memory) with
//! explicit PAD. Dataset items ([`dataset::item_extents`]) and catalog
//! files alike are read by [`crate::reader::Reader`], through the same
//! engine, block cache and read-ahead. A [`Catalog`] is a read-only tree of
//! entries whose files are described that way; the filesystem core
//! attaches catalogs at names in the root (`/.packfs` is one: [`control`]).
//! `docs/ARCHITECTURE.md` says where new layouts plug in.

pub mod array;
pub mod bundle;
pub mod control;
pub mod dataset;
pub mod view;

use std::borrow::Cow;
use std::ops::Range;
use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;

use crate::cache::{ObjectRef, RecordRef};
use crate::engine::ByteRangeMap;

/// File or directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Dir,
    File,
}

/// Where bytes of a file come from. One file may mix kinds.
#[derive(Clone, Debug)]
pub enum Source {
    /// A store object, read through the shared block cache.
    Object(ObjectRef),
    /// Bytes held in memory (generated text, headers).
    Memory(Bytes),
    /// A compressed record, decoded once and cached decoded.
    Record(Arc<RecordRef>),
}

/// Bytes `range` of a file: `map` (destination offset 0 is `range.start`)
/// over `sources`, which its segments name by index.
#[derive(Clone, Debug)]
pub struct Extents {
    pub map: ByteRangeMap,
    pub sources: Vec<Source>,
}

impl Extents {
    /// `len` bytes of one in-memory buffer from `offset` (clamped to it).
    pub fn of_memory(bytes: Bytes, range: Range<u64>) -> Extents {
        let len = bytes.len() as u64;
        let (start, end) = (range.start.min(len), range.end.min(len));
        let mut map = ByteRangeMap::new(end - start);
        map.push_data(0, end - start, crate::engine::SourceIndex(0), start);
        Extents {
            map,
            sources: vec![Source::Memory(bytes)],
        }
    }
}

impl Extents {
    /// Adds `other`'s bytes at `dest_offset` of these (within this map's
    /// length), its sources after these.
    pub fn splice(&mut self, dest_offset: u64, other: Extents) {
        self.map.splice(dest_offset, other.map, self.sources.len());
        self.sources.extend(other.sources);
    }
}

/// What `stat` shows of a catalog entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    pub kind: Kind,
    pub size: u64,
    pub perm: u16,
    pub mtime: SystemTime,
    /// Its bytes change without a write through the mount: the kernel may
    /// cache neither its attributes nor its pages.
    pub volatile: bool,
}

/// A catalog's metadata of an entry could not be read (a damaged index
/// value): the entry cannot be served, and only it (`EIO`).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct CatalogError(pub String);

/// A read-only tree of entries. Ids are the catalog's own; 0 is its root
/// directory. The core gives each attached catalog a range of inodes.
pub trait Catalog: Send + Sync {
    /// Entry `id`, if there is one.
    fn entry(&self, id: u64) -> Result<Option<Entry>, CatalogError>;

    /// The child `name` of directory `dir`.
    fn lookup(&self, dir: u64, name: &[u8]) -> Result<Option<u64>, CatalogError>;

    /// The `index`-th child of directory `dir` (in a fixed order) and its
    /// name; `None` past the last.
    fn child(&self, dir: u64, index: usize) -> Option<(u64, Cow<'_, str>)>;

    /// The directory holding directory `dir` (`None` for the root: its
    /// parent is outside the catalog).
    fn parent(&self, dir: u64) -> Option<u64>;

    /// Bytes `range` of file `id` (within its size).
    fn extents(&self, id: u64, range: Range<u64>) -> Result<Option<Extents>, CatalogError>;
}
