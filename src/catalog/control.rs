//! The control catalog, attached at `/.packfs`: the `stats` file, the read
//! path's counters rendered at every read.

use std::borrow::Cow;
use std::ops::Range;
use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;

use super::{Catalog, CatalogError, Entry, Extents, Kind};
use crate::cache::Stats;

/// The name it is attached at in the mount's root.
pub const NAME: &str = crate::format::CONTROL_DIR;
const STATS: u64 = 1;
const STATS_NAME: &str = "stats";

/// `/.packfs`: found by name, never listed, so `find`, `cp -r`, `tar` and
/// `diff -r` see exactly the dataset.
pub struct Control {
    stats: Arc<Stats>,
    /// The mtime of the directory (the mount's root's).
    mtime: SystemTime,
}

impl Control {
    pub fn new(stats: Arc<Stats>, mtime: SystemTime) -> Self {
        Control { stats, mtime }
    }

    fn stats_text(&self) -> Bytes {
        Bytes::from(self.stats.render())
    }
}

impl Catalog for Control {
    fn entry(&self, id: u64) -> Result<Option<Entry>, CatalogError> {
        Ok(match id {
            0 => Some(Entry {
                kind: Kind::Dir,
                size: 0,
                perm: 0o555,
                mtime: self.mtime,
                volatile: false,
            }),
            // A new mtime at every getattr makes the kernel drop pages it
            // cached of an earlier rendering (FUSE_AUTO_INVAL_DATA).
            STATS => Some(Entry {
                kind: Kind::File,
                size: self.stats_text().len() as u64,
                perm: 0o444,
                mtime: SystemTime::now(),
                volatile: true,
            }),
            _ => None,
        })
    }

    fn lookup(&self, dir: u64, name: &[u8]) -> Result<Option<u64>, CatalogError> {
        Ok((dir == 0 && name == STATS_NAME.as_bytes()).then_some(STATS))
    }

    fn child(&self, dir: u64, index: usize) -> Option<(u64, Cow<'_, str>)> {
        (dir == 0 && index == 0).then_some((STATS, Cow::Borrowed(STATS_NAME)))
    }

    fn parent(&self, _dir: u64) -> Option<u64> {
        None
    }

    fn extents(&self, id: u64, range: Range<u64>) -> Result<Option<Extents>, CatalogError> {
        Ok((id == STATS).then(|| Extents::of_memory(self.stats_text(), range)))
    }
}
