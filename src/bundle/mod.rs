//! DataBundles (`docs/DATABUNDLE.md`): a directory of `shard-%08d` files
//! and an `index/` database, on a local disk or under a store prefix.
//! The codecs are in [`crate::format::bundle`]; this module reads and
//! writes bundles.

pub mod index;

use std::path::PathBuf;

use thiserror::Error;

use crate::format::FormatError;
use crate::store::StoreError;

/// Why a bundle could not be read or written. Each names the file or
/// object and what is wrong with it.
#[derive(Debug, Error)]
pub enum BundleError {
    /// The index database could not be opened or queried, or is not a
    /// bundle's.
    #[error("bundle index {}: {detail}", path.display())]
    Index { path: PathBuf, detail: String },
    /// A key or value of the index, a shard header or a record does not
    /// decode.
    #[error(transparent)]
    Format(#[from] FormatError),
    /// A local file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}
