//! The control catalog, attached at `/.packfs`: the `stats` file, the read
//! path's counters rendered at every read; `daemon`, the process serving
//! the mount (for `packfs umount` and `packfs sync`); and on a read-only
//! dataset mount the `manifest` file, the id of the Manifest it serves.

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
const MANIFEST_NAME: &str = "manifest";
const DAEMON_NAME: &str = "daemon";

/// `/.packfs`: found by name, never listed, so `find`, `cp -r`, `tar` and
/// `diff -r` see exactly the dataset.
pub struct Control {
    stats: Arc<Stats>,
    /// The mtime of the directory (the mount's root's).
    mtime: SystemTime,
    /// The files whose bytes never change, after `stats`: file `i` has id
    /// `STATS + 1 + i`.
    fixed: Vec<(&'static str, Bytes)>,
}

/// The serving process, as `/.packfs/daemon` tells it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Daemon {
    /// Its process id (in its own pid namespace).
    pub pid: u32,
    /// The spool of a read-write mount.
    pub spool: Option<std::path::PathBuf>,
}

impl Daemon {
    /// The file's text: a `pid N` line, and a `spool DIR` line on a
    /// read-write mount.
    pub fn to_text(&self) -> String {
        let mut text = format!("pid {}\n", self.pid);
        if let Some(spool) = &self.spool {
            text += &format!("spool {}\n", spool.display());
        }
        text
    }

    /// Reads [`Daemon::to_text`]'s text back; `None` if it is not one.
    pub fn from_text(text: &str) -> Option<Daemon> {
        let mut pid = None;
        let mut spool = None;
        for line in text.lines() {
            match line.split_once(' ')? {
                ("pid", n) => pid = Some(n.parse().ok()?),
                ("spool", dir) => spool = Some(dir.into()),
                _ => {}
            }
        }
        Some(Daemon { pid: pid?, spool })
    }
}

impl Control {
    /// The control directory of a mount whose root has `mtime`, served by
    /// `daemon`; with `manifest`, the mount serves that Manifest and
    /// nothing else.
    pub fn new(
        stats: Arc<Stats>,
        mtime: SystemTime,
        daemon: &Daemon,
        manifest: Option<ObjectId>,
    ) -> Self {
        let mut fixed = vec![(DAEMON_NAME, Bytes::from(daemon.to_text()))];
        if let Some(id) = manifest {
            fixed.push((MANIFEST_NAME, Bytes::from(format!("{id}\n"))));
        }
        Control {
            stats,
            mtime,
            fixed,
        }
    }

    fn stats_text(&self) -> Bytes {
        Bytes::from(self.stats.render())
    }

    /// Fixed file `id`'s bytes.
    fn fixed(&self, id: u64) -> Option<&Bytes> {
        let i = usize::try_from(id.checked_sub(STATS + 1)?).ok()?;
        self.fixed.get(i).map(|(_, bytes)| bytes)
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
            _ => self.fixed(id).map(|text| Entry {
                kind: Kind::File,
                size: text.len() as u64,
                perm: 0o444,
                mtime: self.mtime,
                volatile: false,
            }),
        })
    }

    fn lookup(&self, dir: u64, name: &[u8]) -> Result<Option<u64>, CatalogError> {
        Ok(match name {
            _ if dir != 0 => None,
            n if n == STATS_NAME.as_bytes() => Some(STATS),
            _ => (self.fixed.iter().position(|(n, _)| n.as_bytes() == name))
                .map(|i| STATS + 1 + i as u64),
        })
    }

    fn child(&self, dir: u64, index: usize) -> Option<(u64, Cow<'_, str>)> {
        match (dir, index) {
            (0, 0) => Some((STATS, Cow::Borrowed(STATS_NAME))),
            (0, i) => self
                .fixed
                .get(i - 1)
                .map(|(name, _)| (STATS + i as u64, Cow::Borrowed(*name))),
            _ => None,
        }
    }

    fn parent(&self, _dir: u64) -> Option<u64> {
        None
    }

    fn extents(&self, id: u64, range: Range<u64>) -> Result<Option<Extents>, CatalogError> {
        Ok(match id {
            STATS => Some(Extents::of_memory(self.stats_text(), range)),
            _ => self
                .fixed(id)
                .map(|text| Extents::of_memory(text.clone(), range)),
        })
    }
}
