//! Errors as a program sees them: the error number the FUSE adapter
//! answers for an [`FsError`], as `fuse.rs` maps it (copied here by hand).

use packfs::fs::FsError;
use packfs::namespace::NsError;

/// An error number, from [`FsError`] as `fuse.rs` maps it.
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
        match e {
            FsError::Namespace(ns) => match ns {
                NsError::NotFound => E::NoEnt,
                NsError::Exists => E::Exist,
                NsError::NotEmpty => E::NotEmpty,
                NsError::IsADirectory => E::IsDir,
                NsError::NotADirectory => E::NotDir,
                NsError::CrossModality => E::XDev,
                NsError::NotPermitted(_) => E::Perm,
                NsError::InvalidName(_) => E::Inval,
                NsError::ReadOnly => E::RoFs,
                other => E::Other(other.to_string()),
            },
            other => E::Other(other.to_string()),
        }
    }
}
