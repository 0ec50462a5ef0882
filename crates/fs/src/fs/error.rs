//! Why an operation of the filesystem core failed, and the errno each
//! failure is answered with.

use packfs_core::catalog::{CatalogError, ChecksumError};
use packfs_core::reader::ReadError;
use thiserror::Error;

use crate::namespace::NsError;
use crate::write::WriteError;

/// Why an operation failed, before the FUSE layer makes it an errno.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum FsError {
    #[error(transparent)]
    Namespace(#[from] NsError),
    /// Not something this filesystem implements (xattrs; open and opendir
    /// on a read-only mount, which the kernel then stops sending).
    #[error("not implemented")]
    Unsupported,
    /// Rename flags the mount does not implement (`RENAME_EXCHANGE`, …).
    #[error("unsupported rename flags")]
    UnsupportedFlags,
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error(transparent)]
    Write(WriteError),
    /// A catalog's metadata of the entry is damaged.
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// A file read whole from offset 0 disagrees with its checksum.
    #[error(transparent)]
    Checksum(#[from] ChecksumError),
    #[error("reading spool file {}: {source}", path.display())]
    SpoolRead {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl From<WriteError> for FsError {
    fn from(e: WriteError) -> Self {
        match e {
            WriteError::Namespace(e) => FsError::Namespace(e),
            e => FsError::Write(e),
        }
    }
}

impl FsError {
    /// The errno a mount answers with: the one mapping from errors to
    /// errno.
    pub fn errno(&self) -> libc::c_int {
        match self {
            // ENOSYS makes the kernel stop asking (open/opendir/flush on a
            // read-only mount, xattrs that `ls -l` asks for per file).
            FsError::Unsupported => libc::ENOSYS,
            FsError::UnsupportedFlags => libc::EINVAL,
            FsError::Namespace(e) => match e {
                NsError::NotFound => libc::ENOENT,
                NsError::NotADirectory => libc::ENOTDIR,
                NsError::IsADirectory => libc::EISDIR,
                NsError::Exists => libc::EEXIST,
                NsError::NotEmpty => libc::ENOTEMPTY,
                NsError::NameTooLong => libc::ENAMETOOLONG,
                NsError::InvalidName(_) | NsError::Invalid(_) => libc::EINVAL,
                NsError::NotPermitted(_) => libc::EPERM,
                NsError::ReadOnly => libc::EROFS,
                // `mv` answers EXDEV by copying and deleting.
                NsError::CrossModality => libc::EXDEV,
                // A damaged or unreadable index page: the nodes it holds.
                NsError::Index(_) => libc::EIO,
            },
            FsError::Write(e) => match e {
                WriteError::BadHandle => libc::EBADF,
                WriteError::SpoolFile { source, .. } | WriteError::Spool { source, .. }
                    if source.kind() == std::io::ErrorKind::StorageFull =>
                {
                    libc::ENOSPC
                }
                WriteError::SpoolFull { .. } => libc::ENOSPC,
                // Every other write failure keeps the data in the spool and
                // tells the writer it is not stored.
                _ => libc::EIO,
            },
            FsError::SpoolRead { .. } | FsError::Catalog(_) => libc::EIO,
            // Bytes that disagree with their checksum are damaged data.
            FsError::Checksum(_) => libc::EIO,
            // Data that cannot be produced exactly is an I/O error, never zeros.
            FsError::Read(_) => libc::EIO,
        }
    }
}
