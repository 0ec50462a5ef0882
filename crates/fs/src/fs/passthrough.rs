//! Kernel passthrough on a read-only mount: which opens the kernel serves
//! from a whole-file copy ([`packfs_core::cache::whole`]) without the daemon.
//!
//! The kernel keeps one mode per inode while any file of it is open: every
//! open of an inode open for passthrough must be a passthrough open of the
//! same backing file, and no passthrough open may join daemon-served ones
//! (it fails the `open(2)` with EIO otherwise). So opens are counted per
//! inode here, and an open follows the mode of those still open. The
//! kernel drops its own count before it sends RELEASE, so these counts
//! are never lower than the kernel's.
//!
//! Only read-only mounts use it: on a read-write mount a later open for
//! writing of an inode open for passthrough would fail. Once passthrough
//! is on, every open gets a handle (the mount leaves the kernel's no-open
//! mode); if the kernel refuses a backing file, passthrough goes off for
//! the mount and opens return to that mode.

use std::collections::HashMap;
use std::fs::File;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use packfs_core::cache::whole::{WholeCache, WholeKey};
use packfs_core::cache::Stats;
use packfs_core::dataset::{ItemData, ItemSource};
use packfs_core::reader::ReadBytes;
use parking_lot::Mutex;
use tracing::{info, warn};

use super::opened::Opened;
use crate::namespace::Ino;

/// `CAP_SYS_ADMIN`'s bit in the capability sets: the kernel registers
/// backing files only for it.
const CAP_SYS_ADMIN: u32 = 21;

/// The passthrough state of a read-only mount with whole-file copies.
pub(crate) struct Passthrough {
    whole: WholeCache,
    stats: Arc<Stats>,
    /// The kernel granted passthrough at init and has refused no backing
    /// file since.
    on: AtomicBool,
    opens: Mutex<Opens>,
}

#[derive(Default)]
struct Opens {
    next_fh: u64,
    /// Open handle → its inode and whether it is a passthrough open.
    handles: HashMap<u64, (Ino, bool)>,
    inodes: HashMap<Ino, InodeOpens>,
}

/// The open files of one inode.
#[derive(Default)]
struct InodeOpens {
    daemon: usize,
    passthrough: usize,
    /// The copy the passthrough opens use; later ones must use it too.
    backing: Option<Arc<File>>,
}

impl Passthrough {
    /// Passthrough from the copies in `whole`, off until [`Self::enable`].
    pub(crate) fn new(whole: WholeCache, stats: Arc<Stats>) -> Self {
        Passthrough {
            whole,
            stats,
            on: AtomicBool::new(false),
            // Handle 0 is the catalogs'.
            opens: Mutex::new(Opens {
                next_fh: 1,
                ..Opens::default()
            }),
        }
    }

    /// At unmount: finishes the whole-file copies under way.
    pub(crate) async fn finish(&self) {
        self.whole.finish().await;
    }

    /// The kernel granted passthrough: it is used if this process may
    /// register backing files. Returns whether it is on.
    pub(crate) fn enable(&self) -> bool {
        if !has_cap_sys_admin() {
            info!("passthrough needs CAP_SYS_ADMIN; reads stay with the daemon");
            return false;
        }
        self.on.store(true, Ordering::Relaxed);
        true
    }

    /// Whether opens may be answered by passthrough.
    pub(crate) fn is_on(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    /// Opens inode `ino` for reading; `item` holds its bytes (`None`: a
    /// file not stored as an item). Passthrough if the item has a copy and
    /// no daemon-served open of the inode remains, else a daemon handle.
    pub(crate) async fn open(&self, ino: Ino, item: Option<&ItemData>) -> Opened {
        let item = item.filter(|i| i.size >= self.whole.min_size());
        let copy = match item {
            Some(item) if self.is_on() => self.whole.open_copy(key(item), item.size).await,
            _ => None,
        };
        let mut opens = self.opens.lock();
        let fh = opens.next_fh;
        opens.next_fh += 1;
        let inode = opens.inodes.entry(ino).or_default();
        let backing = match (&inode.backing, copy) {
            (Some(file), _) => Some(file.clone()),
            (None, Some(copy)) if inode.daemon == 0 => Some(Arc::new(copy)),
            (None, _) => None,
        };
        match backing {
            Some(file) => {
                inode.passthrough += 1;
                inode.backing = Some(file.clone());
                opens.handles.insert(fh, (ino, true));
                Stats::add(&self.stats.opens_passthrough, 1);
                Opened::Backing { fh, file }
            }
            None => {
                inode.daemon += 1;
                opens.handles.insert(fh, (ino, false));
                Stats::add(&self.stats.opens_daemon, 1);
                Opened::Handle {
                    fh,
                    direct_io: false,
                    flush: false,
                }
            }
        }
    }

    /// The kernel refused the backing file of passthrough handle `fh`
    /// (`error`; `None`: passthrough went off since it was chosen):
    /// passthrough goes off for the mount and `fh` becomes a daemon handle.
    pub(crate) fn refused(&self, fh: u64, error: Option<&std::io::Error>) -> Opened {
        if let Some(e) = error {
            if self.on.swap(false, Ordering::Relaxed) {
                warn!("the kernel refused a passthrough file ({e}); reads stay with the daemon");
            }
        }
        let mut opens = self.opens.lock();
        if let Some((ino, passthrough)) = opens.handles.get_mut(&fh) {
            let ino = *ino;
            if std::mem::take(passthrough) {
                let inode = opens.inodes.entry(ino).or_default();
                inode.passthrough -= 1;
                inode.daemon += 1;
                if inode.passthrough == 0 {
                    inode.backing = None;
                }
                self.stats.opens_passthrough.fetch_sub(1, Ordering::Relaxed);
                Stats::add(&self.stats.opens_daemon, 1);
            }
        }
        Opened::Handle {
            fh,
            direct_io: false,
            flush: false,
        }
    }

    /// The last close of handle `fh` (unknown handles are ignored).
    pub(crate) fn release(&self, fh: u64) {
        let mut opens = self.opens.lock();
        let Some((ino, passthrough)) = opens.handles.remove(&fh) else {
            return;
        };
        let inode = opens.inodes.entry(ino).or_default();
        match passthrough {
            true => inode.passthrough -= 1,
            false => inode.daemon -= 1,
        }
        if inode.passthrough == 0 {
            inode.backing = None;
            if inode.daemon == 0 {
                opens.inodes.remove(&ino);
            }
        }
    }

    /// Bytes `offset..` of `item` as a read served them: fed to its copy
    /// (waiting briefly when its writer is behind). Bytes written into a
    /// reply buffer are copied, only here, where the copy keeps them.
    pub(crate) async fn served(&self, item: &ItemData, offset: u64, bytes: &ReadBytes<'_>) {
        if self.is_on() && item.size >= self.whole.min_size() {
            let bytes = bytes.to_bytes();
            self.whole
                .served(key(item), item.size, offset, &bytes)
                .await;
        }
    }
}

/// The identity of an item's bytes: where they are stored. Objects are
/// immutable, so the same place always holds the same bytes.
fn key(item: &ItemData) -> WholeKey {
    let mut h = blake3::Hasher::new();
    let mut field = |bytes: &[u8]| {
        h.update(&(bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    };
    field(&item.size.to_le_bytes());
    match &item.source {
        ItemSource::Whole { object } => {
            field(b"whole");
            field(AsRef::<str>::as_ref(&**object).as_bytes());
        }
        ItemSource::Packed {
            pack,
            offset,
            pack_len,
        } => {
            field(b"packed");
            field(AsRef::<str>::as_ref(&**pack).as_bytes());
            field(&offset.to_le_bytes());
            field(&pack_len.to_le_bytes());
        }
        ItemSource::Chunked { chunks } => {
            field(b"chunked");
            for chunk in chunks.iter() {
                field(AsRef::<str>::as_ref(&*chunk.object).as_bytes());
                field(&chunk.size.to_le_bytes());
            }
        }
    }
    WholeKey(*h.finalize().as_bytes())
}

/// Whether this process holds `CAP_SYS_ADMIN` (from `/proc/self/status`).
fn has_cap_sys_admin() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .is_some_and(|caps| caps & (1 << CAP_SYS_ADMIN) != 0)
}
