//! Where a file's bytes are: a stored item, one this mount committed, or
//! a spool file of the write path.

use std::path::PathBuf;
use std::sync::Arc;

use packfs_core::dataset::Item;
use packfs_format::FragmentEntry;

/// A spool file holding a written file's bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpoolFile {
    pub path: PathBuf,
}

impl SpoolFile {
    /// Its name in the spool (what the journal records).
    pub fn file_name(&self) -> Option<String> {
        Some(self.path.file_name()?.to_string_lossy().into_owned())
    }
}

/// An item this mount committed: how to read it, and its Track entry.
#[derive(Debug)]
pub struct CommittedItem {
    pub item: Item,
    pub entry: FragmentEntry,
}

/// Where a file's bytes are.
#[derive(Clone, Debug)]
pub enum Content {
    /// An item of the mounted snapshot: index into the tree's items.
    Base(u32),
    /// An item committed by this mount.
    Committed(Arc<CommittedItem>),
    /// Written through the mount, not committed yet.
    Spool(SpoolFile),
}
