//! The control catalog, attached at `/.packfs`: the `stats` file, the read
//! path's counters rendered at every read, and on a read-only dataset
//! mount the `manifest` file, the id of the Manifest it serves.

use std::borrow::Cow;
use std::ops::Range;
use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;
use packfs_format::ObjectId;

use super::{Catalog, CatalogError, Entry};
use crate::cache::Stats;
use crate::extents::Extents;
use crate::kind::Kind;

/// The name it is attached at in the mount's root.
pub const NAME: &str = packfs_format::CONTROL_DIR;
const STATS: u64 = 1;
const STATS_NAME: &str = "stats";
const MANIFEST: u64 = 2;
const MANIFEST_NAME: &str = "manifest";

/// `/.packfs`: found by name, never listed, so `find`, `cp -r`, `tar` and
/// `diff -r` see exactly the dataset.
pub struct Control {
    stats: Arc<Stats>,
    /// The mtime of the directory (the mount's root's).
    mtime: SystemTime,
    /// The `manifest` file's bytes (the id and a newline), on a mount that
    /// serves one Manifest for its whole life.
    manifest: Option<Bytes>,
}

impl Control {
    /// The control directory of a mount whose root has `mtime`; with
    /// `manifest`, the mount serves that Manifest and nothing else.
    pub fn new(stats: Arc<Stats>, mtime: SystemTime, manifest: Option<ObjectId>) -> Self {
        Control {
            stats,
            mtime,
            manifest: manifest.map(|id| Bytes::from(format!("{id}\n"))),
        }
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
            MANIFEST => self.manifest.as_ref().map(|text| Entry {
                kind: Kind::File,
                size: text.len() as u64,
                perm: 0o444,
                mtime: self.mtime,
                volatile: false,
            }),
            _ => None,
        })
    }

    fn lookup(&self, dir: u64, name: &[u8]) -> Result<Option<u64>, CatalogError> {
        Ok(match name {
            _ if dir != 0 => None,
            n if n == STATS_NAME.as_bytes() => Some(STATS),
            n if n == MANIFEST_NAME.as_bytes() => self.manifest.as_ref().map(|_| MANIFEST),
            _ => None,
        })
    }

    fn child(&self, dir: u64, index: usize) -> Option<(u64, Cow<'_, str>)> {
        match (dir, index) {
            (0, 0) => Some((STATS, Cow::Borrowed(STATS_NAME))),
            (0, 1) => self
                .manifest
                .as_ref()
                .map(|_| (MANIFEST, Cow::Borrowed(MANIFEST_NAME))),
            _ => None,
        }
    }

    fn parent(&self, _dir: u64) -> Option<u64> {
        None
    }

    fn extents(&self, id: u64, range: Range<u64>) -> Result<Option<Extents>, CatalogError> {
        Ok(match id {
            STATS => Some(Extents::of_memory(self.stats_text(), range)),
            MANIFEST => self
                .manifest
                .clone()
                .map(|text| Extents::of_memory(text, range)),
            _ => None,
        })
    }
}
