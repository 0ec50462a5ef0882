//! What every tree packfs serves (a snapshot's, a mount's overlay, a
//! catalog's) says a node is.

/// File or directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Dir,
    File,
}
