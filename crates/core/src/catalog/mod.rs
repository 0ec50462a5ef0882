//! Catalogs: what a mount shows besides the dataset's own tree.
//!
//! A [`Catalog`] is a read-only tree of entries whose files' bytes are
//! [`Extents`], read by [`crate::reader::Reader`] like dataset items,
//! through the same engine, block cache and read-ahead; the filesystem
//! core attaches catalogs at names in the root (`/.packfs` is one:
//! [`control`]). `docs/ARCHITECTURE.md` says where new layouts plug in.

pub mod array;
pub mod bundle;
pub mod control;
pub mod view;
pub mod whole_read;

use std::borrow::Cow;
use std::ops::Range;
use std::time::SystemTime;

use crate::extents::Extents;
use crate::kind::Kind;
pub use whole_read::{ChecksumError, WholeRead};

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
#[non_exhaustive]
pub struct CatalogError(pub String);

/// Catalog ids are below `2^ID_BITS`.
pub const ID_BITS: u32 = 48;

/// A read-only tree of entries. Ids are the catalog's own, below
/// `2^`[`ID_BITS`]; 0 is its root directory. The core gives each attached
/// catalog a range of inodes.
pub trait Catalog: Send + Sync {
    /// Entry `id`, if there is one.
    fn entry(&self, id: u64) -> Result<Option<Entry>, CatalogError>;

    /// The child `name` of directory `dir`.
    fn lookup(&self, dir: u64, name: &[u8]) -> Result<Option<u64>, CatalogError>;

    /// The `index`-th child of directory `dir` (in a fixed order) and its
    /// name; `None` past the last.
    fn child(&self, dir: u64, index: usize) -> Option<(u64, Cow<'_, str>)>;

    /// What is wrong with the entries of directory `dir` that
    /// [`Catalog::child`] does not list because their names cannot be
    /// known (a damaged key), one error each; none by default.
    fn unlisted(&self, _dir: u64) -> Vec<CatalogError> {
        Vec::new()
    }

    /// The directory holding directory `dir` (`None` for the root: its
    /// parent is outside the catalog).
    fn parent(&self, dir: u64) -> Option<u64>;

    /// Bytes `range` of file `id` (within its size).
    fn extents(&self, id: u64, range: Range<u64>) -> Result<Option<Extents>, CatalogError>;

    /// The check of a whole read of file `id`, if the catalog records a
    /// checksum of its bytes.
    fn whole_read(&self, _id: u64) -> Result<Option<WholeRead>, CatalogError> {
        Ok(None)
    }
}
