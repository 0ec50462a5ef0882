//! Errors as a program sees them: the error number a mount answers for an
//! [`FsError`], as the core chooses it ([`FsError::errno`], which the FUSE
//! adapter replies with).

use packfs_fs::fs::FsError;

/// An error number, from [`FsError::errno`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum E {
    NoEnt,
    Exist,
    NotEmpty,
    IsDir,
    NotDir,
    XDev,
    Perm,
    Inval,
    RoFs,
    /// Anything else: never expected.
    Other(String),
}

impl From<FsError> for E {
    fn from(e: FsError) -> E {
        match e.errno() {
            libc::ENOENT => E::NoEnt,
            libc::EEXIST => E::Exist,
            libc::ENOTEMPTY => E::NotEmpty,
            libc::EISDIR => E::IsDir,
            libc::ENOTDIR => E::NotDir,
            libc::EXDEV => E::XDev,
            libc::EPERM => E::Perm,
            libc::EINVAL => E::Inval,
            libc::EROFS => E::RoFs,
            errno => E::Other(format!("errno {errno}: {e}")),
        }
    }
}
