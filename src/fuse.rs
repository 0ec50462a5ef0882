//! The FUSE adapter: translates kernel requests into namespace lookups and item
//! reads, and errors into errno — in [`errno`], the one place that does.
//!
//! Besides the dataset tree the mount has one control directory,
//! `/.packfs`, whose `stats` file shows the read path's counters. It is
//! found by name but not listed, so `find`, `cp -r`, `tar` and `diff -r`
//! see exactly the dataset.

use std::ffi::OsStr;
use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Waker};
use std::time::{Duration, SystemTime};

use fuser::{
    BsdFileFlags, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation,
    INodeNo, InitFlags, KernelConfig, LockOwner, OpenAccMode, OpenFlags, RenameFlags, ReplyAttr,
    ReplyCreate, ReplyData, ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyOpen,
    ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow, WriteFlags,
};
use tracing::{debug, warn};

use crate::format::CONTROL_DIR;
use crate::namespace::{Attr, Content, Ino, Kind, Namespace, NsError, ROOT_INO};
use crate::reader::{ItemReader, ReadError};
use crate::write::{WriteError, Writer};

/// Everything is immutable for the life of a mount, so the kernel may cache
/// names and attributes for as long as it likes.
const TTL: Duration = Duration::from_secs(24 * 3600);
/// Reported `st_blksize`: tools like `cp` size their reads from it.
const BLKSIZE: u32 = 128 * 1024;
/// Requests the kernel may have outstanding at once (fuser's default is 16).
const MAX_BACKGROUND: u16 = 64;
/// Largest read-ahead the kernel may do on its own (it caps this further).
const MAX_READAHEAD: u32 = 1 << 20;
/// Inode numbers of the control directory and its stats file: above every
/// inode of the namespace.
const CONTROL_INO: u64 = 1 << 40;
const STATS_INO: u64 = CONTROL_INO + 1;
const STATS_FILE: &str = "stats";

/// Why a request failed, before it becomes an errno.
enum FsError {
    NotFound,
    NotADirectory,
    IsADirectory,
    ReadOnly,
    Unsupported,
    Namespace(NsError),
    Read(ReadError),
    Write(WriteError),
    /// A spool file could not be read (logged where it happened).
    SpoolRead,
    /// Flags the mount does not implement (`RENAME_NOREPLACE`/`EXCHANGE`).
    UnsupportedFlags,
}

impl From<WriteError> for FsError {
    fn from(e: WriteError) -> Self {
        match e {
            WriteError::Namespace(e) => FsError::Namespace(e),
            e => FsError::Write(e),
        }
    }
}

impl From<NsError> for FsError {
    fn from(e: NsError) -> Self {
        FsError::Namespace(e)
    }
}

/// The one mapping from errors to errno.
fn errno(e: &FsError) -> Errno {
    match e {
        FsError::NotFound => Errno::ENOENT,
        FsError::NotADirectory => Errno::ENOTDIR,
        FsError::IsADirectory => Errno::EISDIR,
        FsError::ReadOnly => Errno::EROFS,
        // ENOSYS makes the kernel stop asking (xattrs: `ls -l` asks per file).
        FsError::Unsupported => Errno::ENOSYS,
        FsError::Namespace(e) => match e {
            NsError::NotFound => Errno::ENOENT,
            NsError::NotADirectory => Errno::ENOTDIR,
            NsError::IsADirectory => Errno::EISDIR,
            NsError::Exists => Errno::EEXIST,
            NsError::NotEmpty => Errno::ENOTEMPTY,
            NsError::NameTooLong => Errno::ENAMETOOLONG,
            NsError::InvalidName(_) => Errno::EINVAL,
            NsError::NotPermitted(_) => Errno::EPERM,
            NsError::ReadOnly => Errno::EROFS,
            // `mv` answers EXDEV by copying and deleting.
            NsError::CrossModality => Errno::EXDEV,
        },
        FsError::Write(e) => match e {
            WriteError::Namespace(_) => unreachable!("converted to FsError::Namespace"),
            WriteError::BadHandle => Errno::EBADF,
            WriteError::SpoolFile { source, .. } | WriteError::Spool { source, .. }
                if source.kind() == std::io::ErrorKind::StorageFull =>
            {
                Errno::ENOSPC
            }
            WriteError::SpoolFull { .. } => Errno::ENOSPC,
            // Every other write failure keeps the data in the spool and
            // tells the writer it is not stored.
            _ => Errno::EIO,
        },
        FsError::SpoolRead => Errno::EIO,
        FsError::UnsupportedFlags => Errno::EINVAL,
        // Data that cannot be produced exactly is an I/O error, never zeros.
        FsError::Read(ReadError::Map(_) | ReadError::Execute(_)) => Errno::EIO,
    }
}

/// What an inode number names.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Node {
    Ns(Ino),
    Control,
    Stats,
}

impl Node {
    fn from_ino(ino: INodeNo) -> Result<Node, FsError> {
        match ino.0 {
            CONTROL_INO => Ok(Node::Control),
            STATS_INO => Ok(Node::Stats),
            n => Ok(Node::Ns(n)),
        }
    }
}

/// A mounted snapshot.
pub struct PackFs {
    ns: Arc<Namespace>,
    /// The write side, on a read-write mount.
    writer: Option<Arc<Writer>>,
    reader: ItemReader,
    runtime: tokio::runtime::Handle,
    uid: u32,
    gid: u32,
}

impl PackFs {
    /// Serves `ns`, reading item bytes through `reader` on `runtime`.
    /// Files and directories are owned by `uid`/`gid`.
    pub fn new(
        ns: Arc<Namespace>,
        writer: Option<Arc<Writer>>,
        reader: ItemReader,
        runtime: tokio::runtime::Handle,
        uid: u32,
        gid: u32,
    ) -> Self {
        PackFs {
            ns,
            writer,
            reader,
            runtime,
            uid,
            gid,
        }
    }

    fn is_dir(&self, node: Node) -> Result<bool, FsError> {
        Ok(match node {
            Node::Ns(ino) => self.ns.attr(ino)?.kind == Kind::Dir,
            Node::Control => true,
            Node::Stats => false,
        })
    }

    fn attr(&self, node: Node) -> Result<FileAttr, FsError> {
        let attr = match node {
            Node::Ns(ino) => self.ns.attr(ino)?,
            Node::Control => Attr {
                ino: CONTROL_INO,
                kind: Kind::Dir,
                size: 0,
                mtime: self.ns.attr(ROOT_INO)?.mtime,
                perm: 0o555,
                nlink: 2,
            },
            // Fixed-width text; a new mtime on every getattr makes the kernel
            // drop its cached pages (FUSE_AUTO_INVAL_DATA).
            Node::Stats => Attr {
                ino: STATS_INO,
                kind: Kind::File,
                size: self.reader.stats().render().len() as u64,
                mtime: SystemTime::now(),
                perm: 0o444,
                nlink: 1,
            },
        };
        Ok(self.file_attr(&attr))
    }

    fn file_attr(&self, attr: &Attr) -> FileAttr {
        file_attr(attr, self.uid, self.gid)
    }

    /// The write side, or EROFS on a read-only mount.
    fn writer(&self) -> Result<&Writer, WriteError> {
        self.writer
            .as_deref()
            .ok_or(WriteError::Namespace(NsError::ReadOnly))
    }

    /// Answers `reply` once everything written so far (and file `ino` as
    /// it is now) is committed.
    fn sync(&self, ino: Option<Ino>, reply: ReplyEmpty) {
        let Some(writer) = self.writer.clone() else {
            return reply.ok(); // nothing is ever pending
        };
        self.runtime.spawn(async move {
            let synced = match ino {
                Some(ino) => writer.sync_file(ino).await,
                None => writer.sync().await,
            };
            match synced {
                Ok(()) => reply.ok(),
                Err(e) => {
                    warn!("fsync: {e}");
                    reply.error(errno(&e.into()))
                }
            }
        });
    }
}

/// Answers an operation that returns nothing but success or an error.
fn reply_empty(reply: ReplyEmpty, result: Result<(), WriteError>) {
    match result {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(errno(&e.into())),
    }
}

/// The kernel's view of `attr`, owned by `uid`/`gid`.
fn file_attr(attr: &Attr, uid: u32, gid: u32) -> FileAttr {
    {
        let kind = match attr.kind {
            Kind::Dir => FileType::Directory,
            Kind::File => FileType::RegularFile,
        };
        FileAttr {
            ino: INodeNo(attr.ino),
            size: attr.size,
            blocks: attr.size.div_ceil(512),
            atime: attr.mtime,
            mtime: attr.mtime,
            ctime: attr.mtime,
            crtime: attr.mtime,
            kind,
            perm: attr.perm,
            nlink: attr.nlink,
            uid,
            gid,
            rdev: 0,
            blksize: BLKSIZE,
            flags: 0,
        }
    }
}

impl PackFs {
    fn ttl(node: Node) -> Duration {
        if node == Node::Stats {
            Duration::ZERO
        } else {
            TTL
        }
    }

    fn lookup_node(&self, parent: Node, name: &OsStr) -> Result<Node, FsError> {
        let name = name.as_encoded_bytes();
        match parent {
            Node::Ns(ROOT_INO) if name == CONTROL_DIR.as_bytes() => Ok(Node::Control),
            Node::Ns(ino) => Ok(Node::Ns(self.ns.lookup(ino, name)?)),
            Node::Control if name == STATS_FILE.as_bytes() => Ok(Node::Stats),
            Node::Control => Err(FsError::NotFound),
            Node::Stats => Err(FsError::NotADirectory),
        }
    }

    /// Feeds the entries of directory `ino` from cookie `offset` to `add`,
    /// with the cookie of the next entry, until `add` reports a full buffer.
    fn list(
        &self,
        ino: INodeNo,
        offset: u64,
        mut add: impl FnMut(&FileAttr, u64, &str) -> bool,
    ) -> Result<(), FsError> {
        match Node::from_ino(ino)? {
            Node::Ns(ino) => Ok(self.ns.list(ino, offset, |name, attr, cookie| {
                add(&self.file_attr(&attr), cookie, name)
            })?),
            Node::Control => {
                let entries = [
                    (Node::Control, "."),
                    (Node::Ns(ROOT_INO), ".."),
                    (Node::Stats, STATS_FILE),
                ];
                let start = usize::try_from(offset).unwrap_or(usize::MAX);
                for (i, (node, name)) in entries.into_iter().enumerate().skip(start) {
                    if add(&self.attr(node)?, i as u64 + 1, name) {
                        break;
                    }
                }
                Ok(())
            }
            Node::Stats => Err(FsError::NotADirectory),
        }
    }

    /// Checks that `ino` is a directory and returns it.
    fn dir(&self, ino: INodeNo) -> Result<Node, FsError> {
        let node = Node::from_ino(ino)?;
        if self.is_dir(node)? {
            Ok(node)
        } else {
            Err(FsError::NotADirectory)
        }
    }
}

impl Filesystem for PackFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        for flag in [
            InitFlags::FUSE_PARALLEL_DIROPS,
            InitFlags::FUSE_DO_READDIRPLUS,
            InitFlags::FUSE_READDIRPLUS_AUTO,
            InitFlags::FUSE_AUTO_INVAL_DATA,
        ] {
            if config.add_capabilities(flag).is_err() {
                debug!("kernel does not offer {flag:?}");
            }
        }
        // With O_TRUNC in OPEN itself, an overwrite needs no copy of the old bytes.
        if self.writer.is_some()
            && config
                .add_capabilities(InitFlags::FUSE_ATOMIC_O_TRUNC)
                .is_err()
        {
            debug!("kernel does not offer FUSE_ATOMIC_O_TRUNC");
        }
        let _ = config.set_max_background(MAX_BACKGROUND);
        let _ = config.set_max_readahead(MAX_READAHEAD);
        Ok(())
    }

    /// At unmount: commit what is still spooled, so nothing written is left
    /// behind uncommitted by a clean unmount.
    fn destroy(&mut self) {
        if let Some(writer) = &self.writer {
            let writer = writer.clone();
            self.runtime
                .block_on(async move { writer.shutdown().await });
        }
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let found = Node::from_ino(parent)
            .and_then(|p| self.lookup_node(p, name))
            .and_then(|n| Ok((n, self.attr(n)?)));
        match found {
            Ok((node, attr)) => reply.entry(&Self::ttl(node), &attr, Generation(0)),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match Node::from_ino(ino).and_then(|n| Ok((n, self.attr(n)?))) {
            Ok((node, attr)) => reply.attr(&Self::ttl(node), &attr),
            Err(e) => reply.error(errno(&e)),
        }
    }

    /// Read-only mounts answer ENOSYS: the kernel then stops sending OPEN
    /// and RELEASE for every file (its no-open mode) and keeps each file's
    /// page cache across opens, as `FOPEN_KEEP_CACHE` would — two round
    /// trips fewer per small file. Read-write mounts open handles (a write
    /// handle gets a spool version of the file) with `FOPEN_KEEP_CACHE`:
    /// every change goes through this mount, so the kernel's pages stay true.
    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let file = match Node::from_ino(ino).and_then(|node| Ok((node, self.is_dir(node)?))) {
            Err(e) => return reply.error(errno(&e)),
            Ok((_, true)) => return reply.error(errno(&FsError::IsADirectory)),
            Ok((node, false)) => node,
        };
        let write = flags.acc_mode() != OpenAccMode::O_RDONLY;
        let (Some(writer), Node::Ns(ino)) = (&self.writer, file) else {
            let refusal = if write {
                FsError::ReadOnly
            } else {
                FsError::Unsupported
            };
            return reply.error(errno(&refusal));
        };
        let truncate = flags.0 & libc::O_TRUNC != 0;
        let writer = writer.clone();
        self.runtime.spawn(async move {
            match writer.open(ino, write, truncate).await {
                Ok(fh) => reply.opened(FileHandle(fh), FopenFlags::FOPEN_KEEP_CACHE),
                Err(e) => reply.error(errno(&e.into())),
            }
        });
    }

    fn create(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        let Some(writer) = &self.writer else {
            return reply.error(errno(&FsError::ReadOnly));
        };
        let perm = (mode & !umask & 0o7777) as u16;
        match writer.create(parent.0, name.as_encoded_bytes(), perm) {
            Ok((attr, fh)) => reply.created(
                &TTL,
                &self.file_attr(&attr),
                Generation(0),
                FileHandle(fh),
                FopenFlags::FOPEN_KEEP_CACHE,
            ),
            Err(e) => reply.error(errno(&e.into())),
        }
    }

    fn write(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let Some(writer) = &self.writer else {
            return reply.error(errno(&FsError::ReadOnly));
        };
        match writer.write(fh.0, offset, data) {
            Ok(_) => reply.written(data.len() as u32),
            Err(e) => {
                if matches!(e, WriteError::SpoolFull { .. }) {
                    warn!("{e}");
                }
                reply.error(errno(&e.into()))
            }
        }
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        if let Some(writer) = &self.writer {
            writer.release(fh.0);
        }
        reply.ok();
    }

    /// Returns once the file as it is now, and everything else written so
    /// far, is committed.
    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.sync(Some(ino.0), reply);
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.sync(None, reply);
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let node = match Node::from_ino(ino) {
            Ok(Node::Ns(ino)) => ino,
            Ok(_) => return reply.error(errno(&FsError::ReadOnly)),
            Err(e) => return reply.error(errno(&e)),
        };
        let Some(writer) = self.writer.clone() else {
            return reply.error(errno(&FsError::ReadOnly));
        };
        let ns = self.ns.clone();
        let perm = mode.map(|m| (m & 0o7777) as u16);
        let mtime = mtime.map(|t| match t {
            TimeOrNow::SpecificTime(t) => t,
            TimeOrNow::Now => SystemTime::now(),
        });
        let (uid, gid) = (self.uid, self.gid);
        self.runtime.spawn(async move {
            let result = async {
                if let Some(size) = size {
                    writer.set_size(node, fh.map(|f| f.0), size).await?;
                }
                match ns.attr(node)?.kind {
                    Kind::Dir => ns.update_dir(node, perm, mtime)?,
                    Kind::File if perm.is_some() || mtime.is_some() => {
                        ns.update_file(node, false, |f| {
                            f.perm = perm.unwrap_or(f.perm);
                            f.mtime = mtime.unwrap_or(f.mtime);
                        })?;
                    }
                    Kind::File => {}
                }
                Ok::<_, WriteError>(ns.attr(node)?)
            }
            .await;
            match result {
                Ok(attr) => reply.attr(&TTL, &file_attr(&attr, uid, gid)),
                Err(e) => reply.error(errno(&e.into())),
            }
        });
    }

    /// Only regular files and directories exist in a dataset.
    fn mknod(
        &self,
        _req: &Request,
        _parent: INodeNo,
        _name: &OsStr,
        _mode: u32,
        _umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        reply.error(errno(&FsError::Namespace(NsError::NotPermitted(
            "only regular files and directories",
        ))));
    }

    fn mkdir(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let perm = (mode & !umask & 0o7777) as u16;
        let made = self
            .writer()
            .and_then(|w| w.mkdir(parent.0, name.as_encoded_bytes(), perm));
        match made {
            Ok(attr) => reply.entry(&TTL, &self.file_attr(&attr), Generation(0)),
            Err(e) => reply.error(errno(&e.into())),
        }
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let name = name.as_encoded_bytes();
        reply_empty(reply, self.writer().and_then(|w| w.unlink(parent.0, name)));
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let name = name.as_encoded_bytes();
        reply_empty(reply, self.writer().and_then(|w| w.rmdir(parent.0, name)));
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        if !flags.is_empty() {
            return reply.error(errno(&FsError::UnsupportedFlags));
        }
        let from = (parent.0, name.as_encoded_bytes());
        let to = (newparent.0, newname.as_encoded_bytes());
        reply_empty(reply, self.writer().and_then(|w| w.rename(from, to)));
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let content = match Node::from_ino(ino) {
            Ok(Node::Ns(ino)) => match self.ns.content(ino) {
                Ok(content) => content,
                Err(e) => return reply.error(errno(&e.into())),
            },
            Ok(Node::Stats) => {
                let text = self.reader.stats().render();
                let start = text.len().min(offset as usize);
                let end = text.len().min(start + size as usize);
                return reply.data(&text.as_bytes()[start..end]);
            }
            Ok(Node::Control) => return reply.error(errno(&FsError::IsADirectory)),
            Err(e) => return reply.error(errno(&e)),
        };
        let (ns, reader) = (self.ns.clone(), self.reader.clone());
        let mut task = Box::pin(async move {
            let item = match &content {
                Content::Base(index) => ns.tree().item(*index),
                Content::Committed(c) => &c.item,
                Content::Spool(spool) => {
                    return match Writer::read_spool(spool, offset, size) {
                        Ok(bytes) => reply.data(&bytes),
                        Err(e) => {
                            warn!("reading spool file {}: {e}", spool.path.display());
                            reply.error(errno(&FsError::SpoolRead))
                        }
                    };
                }
            };
            match reader.read(item, offset, u64::from(size)).await {
                Ok(bytes) => reply.data(&bytes),
                Err(e) => {
                    warn!("read {} at {offset}: {e}", item.name);
                    reply.error(errno(&FsError::Read(e)));
                }
            }
        });
        // A read served by the cache completes on its first poll and is
        // answered right here on the loop thread; a read that must wait for
        // a GET continues on the runtime, freeing the loop thread at once.
        let _runtime = self.runtime.enter();
        let mut cx = Context::from_waker(Waker::noop());
        if task.as_mut().poll(&mut cx).is_pending() {
            self.runtime.spawn(task);
        }
    }

    /// Nothing is buffered in the daemon (writes reach the spool as they
    /// come), so close has nothing to flush: read-only mounts answer ENOSYS
    /// so the kernel stops sending FLUSH; read-write mounts say OK.
    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        match self.writer {
            Some(_) => reply.ok(),
            None => reply.error(errno(&FsError::Unsupported)),
        }
    }

    /// ENOSYS, as for `open`: the kernel's no-opendir mode caches listings.
    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let refusal = match self.dir(ino) {
            Err(e) => e,
            Ok(_) => FsError::Unsupported,
        };
        reply.error(errno(&refusal));
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let listed = self.list(ino, offset, |attr, cookie, name| {
            reply.add(attr.ino, cookie, attr.kind, name)
        });
        match listed {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    /// Like `readdir`, with attributes: the kernel then needs no `lookup`
    /// per entry (`ls -l`, `find`, loaders opening every file).
    fn readdirplus(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectoryPlus,
    ) {
        let listed = self.list(ino, offset, |attr, cookie, name| {
            let ttl = if attr.ino == INodeNo(STATS_INO) {
                Duration::ZERO
            } else {
                TTL
            };
            reply.add(attr.ino, cookie, name, &ttl, attr, Generation(0))
        });
        match listed {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let block = 4096u64;
        reply.statfs(
            self.ns.tree().total_bytes().div_ceil(block),
            0,
            0,
            self.ns.tree().node_count() as u64,
            0,
            block as u32,
            255,
            block as u32,
        );
    }

    fn getxattr(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _name: &OsStr,
        _size: u32,
        reply: ReplyXattr,
    ) {
        reply.error(errno(&FsError::Unsupported));
    }

    fn listxattr(&self, _req: &Request, _ino: INodeNo, _size: u32, reply: ReplyXattr) {
        reply.error(errno(&FsError::Unsupported));
    }
}
