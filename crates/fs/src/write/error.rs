//! Why a write-side operation failed.

use std::path::PathBuf;
use std::sync::Arc;

use packfs_core::dataset::DatasetError;
use packfs_core::packer::PackError;
use packfs_core::reader::ReadError;
use thiserror::Error;

use crate::namespace::NsError;

/// Why a write-side operation failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum WriteError {
    #[error(transparent)]
    Namespace(#[from] NsError),
    #[error("spool {op} {}: {source}", dir.display())]
    Spool {
        op: &'static str,
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("spool {} is in use by another packfs mount", dir.display())]
    SpoolInUse { dir: PathBuf },
    #[error("spool file {}: {source}", path.display())]
    SpoolFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("no such open file handle")]
    BadHandle,
    #[error(
        "spool {} is full ({used} of {limit} bytes) and flushing frees no room; \
         raise the spool limit or close files so they can be committed",
        dir.display()
    )]
    SpoolFull { dir: PathBuf, used: u64, limit: u64 },
    #[error(
        "spool {} holds changes of an earlier mount that are not committed yet; \
         mount with this spool again to commit them",
        dir.display()
    )]
    Unrecovered { dir: PathBuf },
    #[error("reading the old bytes of a file to change it: {0}")]
    CopyUp(#[from] ReadError),
    #[error("uploading written files: {0}")]
    Upload(#[from] PackError),
    #[error("committing written files: {0}")]
    Commit(#[from] DatasetError),
    #[error("the dataset tree of the spool journal's base: {0}")]
    Tree(#[from] packfs_core::tree::TreeError),
    /// A bug: the commit panicked. Nothing was lost: the changes stay in
    /// the spool and the next flush tries again.
    #[error("the commit panicked ({0}); the data stays in the spool for the next attempt")]
    Panicked(String),
    /// A flush this request waited for failed.
    #[error("the flush failed: {0}; the data stays in the spool for the next attempt")]
    Flush(#[source] Arc<WriteError>),
    /// The mount ended before the flush this request waited for.
    #[error("the mount is shutting down; what was written stays in the spool for the next mount")]
    ShuttingDown,
}

impl WriteError {
    pub(super) fn file(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> WriteError + '_ {
        move |source| WriteError::SpoolFile {
            path: path.to_path_buf(),
            source,
        }
    }
}
