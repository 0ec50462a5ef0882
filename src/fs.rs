//! The filesystem core: every operation a mount answers, on inode numbers,
//! names and byte ranges, with no kernel types. [`crate::fuse`] only
//! translates kernel requests into these calls and [`FsError`]s into errno,
//! so everything a mount decides (which node an inode is, what the control
//! files show, whether a read comes from the store or the spool, how
//! `setattr` changes a file) is here, and tests drive it without
//! `/dev/fuse`.
//!
//! Besides the dataset's tree the mount has one control directory,
//! `/.packfs`, whose `stats` file shows the read path's counters. It is
//! found by name but not listed, so `find`, `cp -r`, `tar` and `diff -r`
//! see exactly the dataset.

use std::time::SystemTime;

use bytes::Bytes;
use thiserror::Error;
use tracing::warn;

use crate::format::CONTROL_DIR;
use crate::namespace::{Attr, Content, Ino, Kind, Namespace, NsError, ROOT_INO};
use crate::reader::{ItemReader, ReadError};
use crate::write::{WriteError, Writer};

/// Inode numbers of the control directory and its stats file: above every
/// inode of the namespace.
pub const CONTROL_INO: Ino = 1 << 40;
const STATS_INO: Ino = CONTROL_INO + 1;
const STATS_FILE: &str = "stats";
/// The handle of an open control file: it needs no state.
const CONTROL_FH: u64 = 0;
/// A read that finds its spool version committed (and deleted) under it
/// looks the file up again this many times.
const SPOOL_RACE_RETRIES: usize = 3;

/// Why an operation failed, before the FUSE layer makes it an errno.
#[derive(Debug, Error)]
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

/// Who owns every node of the mount.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Owner {
    pub uid: u32,
    pub gid: u32,
}

/// What `stat` shows of a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stat {
    pub attr: Attr,
    pub owner: Owner,
    /// The node changes without going through the mount (the stats file):
    /// the kernel must not cache its attributes.
    pub volatile: bool,
}

/// How an open file is served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Opened {
    /// No handle: reads need no per-open state. Only a read-only mount
    /// answers this, as an error the kernel remembers (it then stops
    /// sending OPEN and RELEASE at all, two round trips fewer per file).
    Stateless,
    /// A handle. With `direct_io` the kernel keeps no pages of the file
    /// (its bytes change behind the mount's back); otherwise it keeps them
    /// across opens (every change goes through this mount).
    Handle { fh: u64, direct_io: bool },
}

/// Changes `setattr` asks for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SetAttr {
    pub perm: Option<u16>,
    pub size: Option<u64>,
    pub mtime: Option<SystemTime>,
}

/// `rename(2)` flags.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RenameFlags {
    pub noreplace: bool,
    pub exchange: bool,
    pub whiteout: bool,
}

/// What `statfs` reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FsStats {
    pub block_size: u32,
    pub blocks: u64,
    pub files: u64,
    pub name_max: u32,
}

/// What an inode number names.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Node {
    Ns(Ino),
    Control,
    Stats,
}

impl Node {
    fn of(ino: Ino) -> Node {
        match ino {
            CONTROL_INO => Node::Control,
            STATS_INO => Node::Stats,
            n => Node::Ns(n),
        }
    }
}

/// A mounted snapshot: its namespace, its reads and, on a read-write
/// mount, its writer.
pub struct Fs {
    ns: std::sync::Arc<Namespace>,
    writer: Option<std::sync::Arc<Writer>>,
    reader: ItemReader,
    owner: Owner,
}

impl Fs {
    /// Serves `ns`, reading item bytes through `reader`; with `writer`,
    /// changes are accepted. Every node is owned by `owner`.
    pub fn new(
        ns: std::sync::Arc<Namespace>,
        writer: Option<std::sync::Arc<Writer>>,
        reader: ItemReader,
        owner: Owner,
    ) -> Self {
        Fs {
            ns,
            writer,
            reader,
            owner,
        }
    }

    /// Whether the mount accepts changes.
    pub fn is_writable(&self) -> bool {
        self.writer.is_some()
    }

    /// The namespace served.
    pub fn namespace(&self) -> &Namespace {
        &self.ns
    }

    fn writer(&self) -> Result<&Writer, FsError> {
        self.writer
            .as_deref()
            .ok_or(FsError::Namespace(NsError::ReadOnly))
    }

    /// The writer, for a change of the entries `(directory, name)`: the
    /// control directory and its files are read-only, like their
    /// attributes (without this the namespace, which does not know them,
    /// would answer `ENOENT` for what `lookup` finds).
    fn writer_for(&self, entries: &[(Ino, &[u8])]) -> Result<&Writer, FsError> {
        let control = |&(dir, name): &(Ino, &[u8])| {
            !matches!(Node::of(dir), Node::Ns(_))
                || (dir == ROOT_INO && name == CONTROL_DIR.as_bytes())
        };
        if entries.iter().any(control) {
            return Err(NsError::ReadOnly.into());
        }
        self.writer()
    }

    fn stat_of(&self, attr: Attr, volatile: bool) -> Stat {
        Stat {
            attr,
            owner: self.owner,
            volatile,
        }
    }

    /// The attributes of `ino`.
    pub fn getattr(&self, ino: Ino) -> Result<Stat, FsError> {
        Ok(match Node::of(ino) {
            Node::Ns(ino) => self.stat_of(self.ns.attr(ino)?, false),
            Node::Control => self.stat_of(
                Attr {
                    ino: CONTROL_INO,
                    kind: Kind::Dir,
                    size: 0,
                    mtime: self.ns.attr(ROOT_INO)?.mtime,
                    perm: 0o555,
                    nlink: 2,
                },
                false,
            ),
            // A new mtime on every getattr makes the kernel drop pages it
            // cached of an earlier rendering (FUSE_AUTO_INVAL_DATA).
            Node::Stats => self.stat_of(
                Attr {
                    ino: STATS_INO,
                    kind: Kind::File,
                    size: self.stats_text().len() as u64,
                    mtime: SystemTime::now(),
                    perm: 0o444,
                    nlink: 1,
                },
                true,
            ),
        })
    }

    fn stats_text(&self) -> String {
        self.reader.stats().render()
    }

    /// The child `name` of directory `parent`.
    pub fn lookup(&self, parent: Ino, name: &[u8]) -> Result<Stat, FsError> {
        let node = match Node::of(parent) {
            Node::Ns(ROOT_INO) if name == CONTROL_DIR.as_bytes() => CONTROL_INO,
            Node::Ns(ino) => self.ns.lookup(ino, name)?,
            Node::Control if name == STATS_FILE.as_bytes() => STATS_INO,
            Node::Control => return Err(NsError::NotFound.into()),
            Node::Stats => return Err(NsError::NotADirectory.into()),
        };
        self.getattr(node)
    }

    /// Feeds the entries of directory `ino` from cookie `offset` to `add`,
    /// with the cookie of the next entry, until `add` reports a full buffer.
    pub fn readdir(
        &self,
        ino: Ino,
        offset: u64,
        mut add: impl FnMut(&str, &Stat, u64) -> bool,
    ) -> Result<(), FsError> {
        match Node::of(ino) {
            Node::Ns(ino) => Ok(self.ns.list(ino, offset, |name, attr, cookie| {
                add(name, &self.stat_of(attr, false), cookie)
            })?),
            Node::Control => {
                let entries = [
                    (CONTROL_INO, "."),
                    (ROOT_INO, ".."),
                    (STATS_INO, STATS_FILE),
                ];
                let start = usize::try_from(offset).unwrap_or(usize::MAX);
                for (i, (ino, name)) in entries.into_iter().enumerate().skip(start) {
                    if add(name, &self.getattr(ino)?, i as u64 + 1) {
                        break;
                    }
                }
                Ok(())
            }
            Node::Stats => Err(NsError::NotADirectory.into()),
        }
    }

    /// `opendir`: listings need no handle, so a directory opens
    /// [`Opened::Stateless`] (the kernel's no-opendir mode, in which it
    /// also caches listings).
    pub fn opendir(&self, ino: Ino) -> Result<Opened, FsError> {
        match self.getattr(ino)?.attr.kind {
            Kind::Dir => Ok(Opened::Stateless),
            Kind::File => Err(NsError::NotADirectory.into()),
        }
    }

    /// Opens file `ino`. A read-only mount answers [`Opened::Stateless`]
    /// for every file. A read-write mount opens a handle for every file,
    /// control files included: a stateless answer there would switch the
    /// kernel's no-open mode on for the whole mount, and later opens for
    /// writing would never reach the writer.
    pub async fn open(&self, ino: Ino, write: bool, truncate: bool) -> Result<Opened, FsError> {
        if self.getattr(ino)?.attr.kind == Kind::Dir {
            return Err(NsError::IsADirectory.into());
        }
        let Some(writer) = &self.writer else {
            return match write {
                true => Err(NsError::ReadOnly.into()),
                false => Ok(Opened::Stateless),
            };
        };
        match Node::of(ino) {
            Node::Ns(ino) => {
                let fh = writer.open(ino, write, truncate).await?;
                Ok(Opened::Handle {
                    fh,
                    direct_io: false,
                })
            }
            _ if write => Err(NsError::ReadOnly.into()),
            _ => Ok(Opened::Handle {
                fh: CONTROL_FH,
                direct_io: true,
            }),
        }
    }

    /// Creates file `name` in `parent` with `perm`, open for writing.
    pub fn create(&self, parent: Ino, name: &[u8], perm: u16) -> Result<(Stat, u64), FsError> {
        let (attr, fh) = self
            .writer_for(&[(parent, name)])?
            .create(parent, name, perm)?;
        Ok((self.stat_of(attr, false), fh))
    }

    /// Up to `size` bytes of file `ino` from `offset` (fewer only at its end).
    pub async fn read(&self, ino: Ino, offset: u64, size: u32) -> Result<Bytes, FsError> {
        let ino = match Node::of(ino) {
            Node::Ns(ino) => ino,
            Node::Stats => {
                let text = Bytes::from(self.stats_text());
                let start = text
                    .len()
                    .min(usize::try_from(offset).unwrap_or(usize::MAX));
                let end = text.len().min(start + size as usize);
                return Ok(text.slice(start..end));
            }
            Node::Control => return Err(NsError::IsADirectory.into()),
        };
        let mut attempt = 0;
        loop {
            let item = match self.ns.content(ino)? {
                Content::Base(index) => self.ns.tree().item(index).clone(),
                Content::Committed(c) => c.item.clone(),
                Content::Spool(spool) => match Writer::read_spool(&spool, offset, size) {
                    Ok(bytes) => return Ok(bytes.into()),
                    // Committed and deleted since the lookup: the file
                    // now reads from its item.
                    Err(e)
                        if e.kind() == std::io::ErrorKind::NotFound
                            && attempt < SPOOL_RACE_RETRIES =>
                    {
                        attempt += 1;
                        continue;
                    }
                    Err(source) => {
                        let e = FsError::SpoolRead {
                            path: spool.path,
                            source,
                        };
                        warn!("{e}");
                        return Err(e);
                    }
                },
            };
            return match self.reader.read(&item, offset, u64::from(size)).await {
                Ok(bytes) => Ok(bytes),
                Err(e) => {
                    warn!("read {} at {offset}: {e}", item.name);
                    Err(e.into())
                }
            };
        }
    }

    /// Writes `data` at `offset` through handle `fh`; returns the bytes
    /// written. Until it first returns `Ready` it has changed nothing (it
    /// only waits for spool room), so a caller may drop it while pending.
    pub async fn write(&self, fh: u64, offset: u64, data: &[u8]) -> Result<u32, FsError> {
        let writer = self.writer()?;
        match writer.write(fh, offset, data).await {
            Ok(()) => Ok(data.len() as u32),
            Err(e) => {
                if matches!(e, WriteError::SpoolFull { .. }) {
                    warn!("{e}");
                }
                Err(e.into())
            }
        }
    }

    /// `close(2)` of a descriptor of handle `fh` (FLUSH): what was written
    /// through it is journaled before `close` returns, so a crash right
    /// after keeps it. Read-only mounts answer `Unsupported` and the
    /// kernel stops asking.
    pub fn flush(&self, fh: u64) -> Result<(), FsError> {
        let writer = self.writer.as_ref().ok_or(FsError::Unsupported)?;
        if fh != CONTROL_FH {
            writer.closed(fh);
        }
        Ok(())
    }

    /// The last close of handle `fh`.
    pub fn release(&self, fh: u64) {
        if let (Some(writer), false) = (&self.writer, fh == CONTROL_FH) {
            writer.release(fh);
        }
    }

    /// Returns once file `ino` as it is now, and everything else written
    /// so far, is committed (`None`: everything, for `fsyncdir`).
    pub async fn fsync(&self, ino: Option<Ino>) -> Result<(), FsError> {
        let Some(writer) = &self.writer else {
            return Ok(()); // nothing is ever pending
        };
        let synced = match ino.map(Node::of) {
            Some(Node::Ns(ino)) => writer.sync_file(ino).await,
            Some(_) => Ok(()),
            None => writer.sync().await,
        };
        synced.map_err(|e| {
            warn!("fsync: {e}");
            e.into()
        })
    }

    /// Changes size, mode and/or mtime of `ino` (through handle `fh` if
    /// the kernel names one).
    pub async fn setattr(&self, ino: Ino, fh: Option<u64>, set: SetAttr) -> Result<Stat, FsError> {
        let Node::Ns(ino) = Node::of(ino) else {
            return Err(NsError::ReadOnly.into());
        };
        let writer = self.writer()?;
        if let Some(size) = set.size {
            writer.set_size(ino, fh, size).await?;
        }
        if set.perm.is_some() || set.mtime.is_some() {
            writer.set_times_and_mode(ino, set.perm, set.mtime)?;
        }
        Ok(self.stat_of(self.ns.attr(ino)?, false))
    }

    /// Only regular files and directories exist in a dataset.
    pub fn mknod(&self) -> Result<Stat, FsError> {
        Err(NsError::NotPermitted("only regular files and directories").into())
    }

    pub fn mkdir(&self, parent: Ino, name: &[u8], perm: u16) -> Result<Stat, FsError> {
        let attr = self
            .writer_for(&[(parent, name)])?
            .mkdir(parent, name, perm)?;
        Ok(self.stat_of(attr, false))
    }

    pub fn unlink(&self, parent: Ino, name: &[u8]) -> Result<(), FsError> {
        Ok(self.writer_for(&[(parent, name)])?.unlink(parent, name)?)
    }

    pub fn rmdir(&self, parent: Ino, name: &[u8]) -> Result<(), FsError> {
        Ok(self.writer_for(&[(parent, name)])?.rmdir(parent, name)?)
    }

    pub fn rename(
        &self,
        from: (Ino, &[u8]),
        to: (Ino, &[u8]),
        flags: RenameFlags,
    ) -> Result<(), FsError> {
        if flags != RenameFlags::default() {
            return Err(FsError::UnsupportedFlags);
        }
        Ok(self.writer_for(&[from, to])?.rename(from, to)?)
    }

    /// Extended attributes are not stored.
    pub fn getxattr(&self) -> Result<Vec<u8>, FsError> {
        Err(FsError::Unsupported)
    }

    pub fn statfs(&self) -> FsStats {
        let block_size = 4096u32;
        let tree = self.ns.tree();
        FsStats {
            block_size,
            blocks: tree.total_bytes().div_ceil(u64::from(block_size)),
            files: tree.node_count() as u64,
            name_max: 255,
        }
    }

    /// At unmount: commits what is still spooled (bounded by the shutdown
    /// time-out), so a clean unmount leaves nothing behind uncommitted.
    pub async fn shutdown(&self) {
        if let Some(writer) = &self.writer {
            writer.shutdown().await;
        }
    }
}
