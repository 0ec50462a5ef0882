//! A dataset's files, read from code without a mount: the one-line way in
//! for an embedder.
//!
//! ```no_run
//! use packfs_core::Files;
//!
//! # fn main() -> Result<(), packfs_core::FilesError> {
//! let bytes = Files::open("s3://bucket/dataset")?
//!     .at("main")?
//!     .open("train/image/00001.jpg")?
//!     .read(0..4096)?;
//! # Ok(())
//! # }
//! ```
//!
//! These calls block: they run the reads on a small runtime of their own,
//! so they must not be made from inside an async runtime (that is an error,
//! [`FilesError::InAsyncContext`]). Async code uses the types underneath
//! directly: [`Dataset`], [`Tree`] and [`Reader`]. Reads go through the same
//! byte-range engine, block cache and read-ahead as a mount's.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use thiserror::Error;

use crate::cache::CacheOptions;
use crate::dataset::{Dataset, DatasetError, ItemData};
use crate::kind::Kind;
use crate::reader::{ReadError, Reader};
use crate::store::StoreConfig;
use crate::tree::{Look, Tree, TreeError};

/// Why a dataset's files could not be read.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum FilesError {
    /// The dataset, or the version asked for, could not be opened.
    #[error(transparent)]
    Dataset(#[from] DatasetError),
    /// A path that is not in the version, or not what was asked for.
    #[error(transparent)]
    Path(#[from] TreeError),
    /// The bytes could not be read.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// The runtime the reads run on could not start.
    #[error("starting the runtime that reads run on: {0}")]
    Runtime(#[source] std::io::Error),
    /// Called from inside an async runtime, where a blocking call would
    /// stall it: use `Dataset`, `Tree` and `Reader` there.
    #[error("packfs_core::Files blocks: call it outside an async runtime, or use Dataset, Tree and Reader from async code")]
    InAsyncContext,
}

/// A dataset location, opened for reading its files.
pub struct Files {
    dataset: Dataset,
    runtime: Arc<tokio::runtime::Runtime>,
}

impl Files {
    /// Opens the dataset at `location` (a directory, a `file://` URL or an
    /// object-store URL such as `s3://bucket/prefix`), configured from the
    /// usual environment variables of its store.
    pub fn open(location: &str) -> Result<Files, FilesError> {
        Files::open_with(location, &StoreConfig::default())
    }

    /// [`Files::open`] with the store configured by `config`.
    pub fn open_with(location: &str, config: &StoreConfig) -> Result<Files, FilesError> {
        if tokio::runtime::Handle::try_current().is_ok() {
            return Err(FilesError::InAsyncContext);
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("packfs-files")
            .enable_all()
            .build()
            .map_err(FilesError::Runtime)?;
        let dataset = {
            // Opening a store may start its HTTP client, which wants a runtime.
            let _entered = runtime.enter();
            Dataset::open_with(location, false, config)?
        };
        Ok(Files {
            dataset,
            runtime: Arc::new(runtime),
        })
    }

    /// The version `revision` names: a ref (`main`), a Manifest id or a
    /// unique prefix of one, or `REV~N`.
    pub fn at(&self, revision: &str) -> Result<Version, FilesError> {
        let snapshot = self.runtime.block_on(self.dataset.snapshot(revision))?;
        let tree = Tree::build(snapshot)?;
        let reader = {
            let _entered = self.runtime.enter();
            Reader::new(self.dataset.store().clone(), CacheOptions::default(), None)
        };
        Ok(Version {
            tree: Arc::new(tree),
            reader,
            runtime: self.runtime.clone(),
        })
    }
}

/// One version of a dataset: its `/<timeline>/<modality>/<name…>` tree,
/// fixed for as long as it is held.
pub struct Version {
    tree: Arc<Tree>,
    reader: Reader,
    runtime: Arc<tokio::runtime::Runtime>,
}

/// An entry of a directory.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct DirEntry {
    pub name: String,
    pub kind: Kind,
    /// Bytes of a file (0 for a directory).
    pub size: u64,
}

impl Version {
    /// The file at `path` (`timeline/modality/name`, no leading `/`).
    pub fn open(&self, path: &str) -> Result<File, FilesError> {
        let item = self.tree.item_data(self.tree.resolve_file(path)?)?;
        Ok(File {
            item,
            reader: self.reader.clone(),
            runtime: self.runtime.clone(),
        })
    }

    /// The entries of directory `path` (`""` for the root), by name.
    pub fn list(&self, path: &str) -> Result<Vec<DirEntry>, FilesError> {
        let dir = self.tree.resolve(path)?;
        if !self.tree.is_dir(dir) {
            return Err(TreeError::NotADirectory {
                path: path.to_string(),
            }
            .into());
        }
        let mut entries = Vec::new();
        self.tree.children(dir, 0, |c| {
            let (kind, size) = match c.look {
                Look::File { size, .. } => (Kind::File, size),
                Look::Dir { .. } => (Kind::Dir, 0),
            };
            let name = c.name.to_string();
            entries.push(DirEntry { name, kind, size });
            false
        })?;
        Ok(entries)
    }
}

/// A file of a version.
pub struct File {
    item: ItemData,
    reader: Reader,
    runtime: Arc<tokio::runtime::Runtime>,
}

impl File {
    /// Its size in bytes.
    pub fn size(&self) -> u64 {
        self.item.size
    }

    /// Bytes `range` of it (cut at its end).
    pub fn read(&self, range: Range<u64>) -> Result<Bytes, FilesError> {
        let len = range.end.saturating_sub(range.start);
        let read = self.reader.read_item(&self.item, range.start, len);
        Ok(self.runtime.block_on(read)?)
    }

    /// All of it.
    pub fn read_all(&self) -> Result<Bytes, FilesError> {
        self.read(0..self.item.size)
    }
}
