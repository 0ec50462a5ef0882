//! The FUSE adapter: translates kernel requests into calls of the
//! filesystem core ([`crate::fs`]) and its errors into the errno the core
//! chose ([`crate::fs::FsError::errno`]). It decides nothing about files.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::future::Future;
use std::path::Path;
use std::sync::{Arc, Weak};
use std::task::{Context, Waker};
use std::time::{Duration, SystemTime};

use fuser::{
    BackingId, BsdFileFlags, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags,
    Generation, INodeNo, InitFlags, KernelConfig, LockOwner, OpenAccMode, OpenFlags, RenameFlags,
    ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyEntry,
    ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow, WriteFlags,
};
use packfs_core::kind::Kind;
use packfs_format::Special;
use parking_lot::Mutex;
use tracing::debug;

use crate::fs::{self, Fs, FsError, Opened, SetAttr, Stat};

/// Attributes and names of stable nodes of a read-write mount may be
/// cached this long: every change goes through the mount.
const TTL: Duration = Duration::from_secs(24 * 3600);
/// The same on a read-only mount, whose snapshot never changes: for ever.
/// The largest timeout, which libfuse also sends for an infinite one; the
/// kernel caps it at its longest jiffies offset.
const TTL_IMMUTABLE: Duration = Duration::from_secs(u64::MAX);
/// Reported `st_blksize`: tools like `cp` size their reads from it.
const BLKSIZE: u32 = 128 * 1024;
/// Requests the kernel may have outstanding at once (fuser's default is 16).
const MAX_BACKGROUND: u16 = 64;
/// Largest read-ahead the kernel may do on its own (it caps this further).
const MAX_READAHEAD: u32 = 1 << 20;
/// Filesystems stacked under passthrough files: 2 lets the copies live on
/// overlayfs (container roots), at the price of no overlayfs over a mount.
const MAX_STACK_DEPTH: u32 = 2;

thread_local! {
    /// The buffer reads that take several runs are written into and
    /// replied from, taken by one read at a time. Reused, so such a read
    /// allocates and zeroes nothing: the engine writes every byte it
    /// replies with (PAD included), whatever the buffer held.
    static REPLY_BUFFER: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// The kernel's errno for `e` (chosen by [`FsError::errno`]).
fn errno(e: &FsError) -> Errno {
    // A catalog's damaged entry is said here, once per answer, naming it.
    if let FsError::Catalog(e) = e {
        tracing::error!("{e}");
    }
    Errno::from_i32(e.errno())
}

/// The kernel's view of `stat`.
fn file_attr(stat: &Stat) -> FileAttr {
    let attr = &stat.attr;
    FileAttr {
        ino: INodeNo(attr.ino),
        size: attr.size,
        blocks: attr.size.div_ceil(512),
        atime: attr.atime,
        mtime: attr.mtime,
        ctime: attr.ctime,
        crtime: attr.mtime,
        kind: match (attr.kind, attr.special) {
            (Kind::Dir, _) => FileType::Directory,
            (Kind::File, None) => FileType::RegularFile,
            (Kind::File, Some(Special::Symlink)) => FileType::Symlink,
            (Kind::File, Some(Special::Fifo)) => FileType::NamedPipe,
            (Kind::File, Some(Special::Socket)) => FileType::Socket,
            (Kind::File, Some(Special::CharDevice(_))) => FileType::CharDevice,
            (Kind::File, Some(Special::BlockDevice(_))) => FileType::BlockDevice,
        },
        perm: attr.perm,
        nlink: attr.nlink,
        uid: stat.owner.uid,
        gid: stat.owner.gid,
        // The kernel's stat field is 32 bits wide (its own encoding).
        rdev: attr.special.map_or(0, |s| s.rdev() as u32),
        blksize: BLKSIZE,
        flags: 0,
    }
}

/// How long the kernel may cache `stat` and its name: `stable` unless the
/// node is volatile.
fn ttl(stat: &Stat, stable: Duration) -> Duration {
    if stat.volatile {
        Duration::ZERO
    } else {
        stable
    }
}

fn perm(mode: u32, umask: u32) -> u16 {
    (mode & !umask & 0o7777) as u16
}

/// The kernel side of a mount: [`Fs`], the runtime its waits run on, and
/// the backing files registered for passthrough.
pub(crate) struct PackFs {
    fs: Arc<Fs>,
    runtime: tokio::runtime::Handle,
    backings: Arc<Mutex<Backings>>,
    /// How long stable nodes may be cached ([`TTL`], [`TTL_IMMUTABLE`]).
    ttl: Duration,
}

/// Registered backing files. The kernel wants the same one for every open
/// of an inode while any is open; one is unregistered when the last
/// handle using it is released.
#[derive(Default)]
struct Backings {
    by_handle: HashMap<u64, Arc<BackingId>>,
    by_inode: HashMap<u64, Weak<BackingId>>,
}

impl PackFs {
    /// The adapter of `fs`, whose waits run on `runtime`.
    pub(crate) fn new(fs: Arc<Fs>, runtime: tokio::runtime::Handle) -> Self {
        let ttl = match fs.is_writable() {
            true => TTL,
            false => TTL_IMMUTABLE,
        };
        PackFs {
            fs,
            runtime,
            backings: Arc::default(),
            ttl,
        }
    }

    /// Runs `task` to its end: answered right here on the loop thread if
    /// it completes on its first poll (a read served by the cache, or by a
    /// local file read inline: see [`packfs_core::blocking`]), else continued on
    /// the runtime, freeing the loop thread at once.
    fn run(&self, task: impl Future<Output = ()> + Send + 'static) {
        let mut task = Box::pin(task);
        let _runtime = self.runtime.enter();
        let first = packfs_core::blocking::allow(|| {
            task.as_mut().poll(&mut Context::from_waker(Waker::noop()))
        });
        if first.is_pending() {
            self.runtime.spawn(task);
        }
    }
}

/// The kernel's flags for a handle the daemon serves (see [`Opened::Handle`]).
fn open_flags(direct_io: bool, flush: bool) -> FopenFlags {
    let cache = match direct_io {
        true => FopenFlags::FOPEN_DIRECT_IO,
        false => FopenFlags::FOPEN_KEEP_CACHE,
    };
    match flush {
        true => cache,
        false => cache | FopenFlags::FOPEN_NOFLUSH,
    }
}

fn reply_empty(reply: ReplyEmpty, result: Result<(), FsError>) {
    match result {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(errno(&e)),
    }
}

fn reply_entry(reply: ReplyEntry, stable: Duration, result: Result<Stat, FsError>) {
    match result {
        Ok(stat) => reply.entry(&ttl(&stat, stable), &file_attr(&stat), Generation(0)),
        Err(e) => reply.error(errno(&e)),
    }
}

fn reply_attr(reply: ReplyAttr, stable: Duration, result: Result<Stat, FsError>) {
    match result {
        Ok(stat) => reply.attr(&ttl(&stat, stable), &file_attr(&stat)),
        Err(e) => reply.error(errno(&e)),
    }
}

fn time(t: TimeOrNow) -> SystemTime {
    match t {
        TimeOrNow::SpecificTime(t) => t,
        TimeOrNow::Now => SystemTime::now(),
    }
}

impl Filesystem for PackFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        let mut wanted = vec![
            InitFlags::FUSE_PARALLEL_DIROPS,
            InitFlags::FUSE_DO_READDIRPLUS,
            InitFlags::FUSE_READDIRPLUS_AUTO,
            InitFlags::FUSE_AUTO_INVAL_DATA,
        ];
        // With O_TRUNC in OPEN itself, an overwrite needs no copy of the old bytes.
        if self.fs.is_writable() {
            wanted.push(InitFlags::FUSE_ATOMIC_O_TRUNC);
        }
        for flag in wanted {
            if config.add_capabilities(flag).is_err() {
                debug!("kernel does not offer {flag:?}");
            }
        }
        let _ = config.set_max_background(MAX_BACKGROUND);
        let _ = config.set_max_readahead(MAX_READAHEAD);
        if self.fs.wants_passthrough() {
            let granted = config.add_capabilities(InitFlags::FUSE_PASSTHROUGH).is_ok()
                && config.set_max_stack_depth(MAX_STACK_DEPTH).is_ok();
            match granted && self.fs.enable_passthrough() {
                true => debug!("passthrough on"),
                false => debug!("passthrough off"),
            }
        }
        Ok(())
    }

    fn destroy(&mut self) {
        let fs = self.fs.clone();
        self.runtime.block_on(async move { fs.shutdown().await });
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let found = self.fs.lookup(parent.0, name.as_encoded_bytes());
        reply_entry(reply, self.ttl, found);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        reply_attr(reply, self.ttl, self.fs.getattr(ino.0));
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let truncate = flags.0 & libc::O_TRUNC != 0;
        // `O_RDONLY | O_TRUNC` truncates too (Linux does), and with atomic
        // O_TRUNC the kernel has already dropped the file's cached pages
        // and size: the open must empty it, as a write would.
        let write = flags.acc_mode() != OpenAccMode::O_RDONLY || truncate;
        let (fs, backings) = (self.fs.clone(), self.backings.clone());
        self.run(async move {
            let opened = match fs.open(ino.0, write, truncate).await {
                Ok(Opened::Backing { fh, file }) => {
                    let mut backings = backings.lock();
                    let id = match backings.by_inode.get(&ino.0).and_then(Weak::upgrade) {
                        Some(id) => Ok(id),
                        None if fs.passthrough_on() => {
                            reply.open_backing(&*file).map(Arc::new).map_err(Some)
                        }
                        None => Err(None),
                    };
                    match id {
                        Ok(id) => {
                            backings.by_inode.insert(ino.0, Arc::downgrade(&id));
                            backings.by_handle.insert(fh, id.clone());
                            drop(backings);
                            return reply.opened_passthrough(
                                FileHandle(fh),
                                FopenFlags::empty(),
                                &id,
                            );
                        }
                        Err(e) => Ok(fs.passthrough_refused(fh, e.as_ref())),
                    }
                }
                opened => opened,
            };
            match opened {
                Ok(Opened::Handle {
                    fh,
                    direct_io,
                    flush,
                }) => reply.opened(FileHandle(fh), open_flags(direct_io, flush)),
                Ok(Opened::Stateless) => reply.error(errno(&FsError::Unsupported)),
                // A backing file the kernel did not take: the daemon serves
                // the handle's reads (`passthrough_refused` answers this).
                Ok(Opened::Backing { fh, .. }) => {
                    reply.opened(FileHandle(fh), open_flags(false, false))
                }
                Err(e) => reply.error(errno(&e)),
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
        match self
            .fs
            .create(parent.0, name.as_encoded_bytes(), perm(mode, umask))
        {
            Ok((stat, fh)) => reply.created(
                &ttl(&stat, self.ttl),
                &file_attr(&stat),
                Generation(0),
                FileHandle(fh),
                FopenFlags::FOPEN_KEEP_CACHE,
            ),
            Err(e) => reply.error(errno(&e)),
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
        // Most writes are done at once; one that must wait (for spool room,
        // or a copy of a version closed meanwhile) runs to its end on the
        // runtime with a copy of the data.
        let answer = self.fs.try_write(fh.0, offset, data);
        let answer_with = |reply: ReplyWrite, result: Result<u32, FsError>| match result {
            Ok(n) => reply.written(n),
            Err(e) => reply.error(errno(&e)),
        };
        match answer {
            Some(result) => answer_with(reply, result),
            None => {
                let (fs, data) = (self.fs.clone(), data.to_vec());
                self.runtime.spawn(async move {
                    answer_with(reply, fs.write(fh.0, offset, &data).await);
                });
            }
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        reply_empty(reply, self.fs.flush(fh.0));
    }

    fn release(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        let backing = self.backings.lock().by_handle.remove(&fh.0);
        if let Some(backing) = backing {
            let mut backings = self.backings.lock();
            drop(backing); // unregistered here if it was the last
            if backings
                .by_inode
                .get(&ino.0)
                .is_some_and(|id| id.strong_count() == 0)
            {
                backings.by_inode.remove(&ino.0);
            }
        }
        self.fs.release(fh.0);
        reply.ok();
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let fs = self.fs.clone();
        self.run(async move { reply_empty(reply, fs.fsync(Some(ino.0)).await) });
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let fs = self.fs.clone();
        self.run(async move { reply_empty(reply, fs.fsync(None).await) });
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let set = SetAttr {
            perm: mode.map(|m| (m & 0o7777) as u16),
            size,
            mtime: mtime.map(time),
            atime: atime.map(time),
        };
        let (fs, ttl) = (self.fs.clone(), self.ttl);
        self.run(
            async move { reply_attr(reply, ttl, fs.setattr(ino.0, fh.map(|f| f.0), set).await) },
        );
    }

    fn mknod(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        let mode = (mode & libc::S_IFMT) | u32::from(perm(mode, umask));
        let made = self
            .fs
            .mknod(parent.0, name.as_encoded_bytes(), mode, u64::from(rdev));
        reply_entry(reply, self.ttl, made);
    }

    fn symlink(
        &self,
        _req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let made = self.fs.symlink(
            parent.0,
            link_name.as_encoded_bytes(),
            target.as_os_str().as_encoded_bytes(),
        );
        reply_entry(reply, self.ttl, made);
    }

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let made = self.fs.link(ino.0, newparent.0, newname.as_encoded_bytes());
        reply_entry(reply, self.ttl, made);
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        let fs = self.fs.clone();
        self.run(async move {
            match fs.readlink(ino.0).await {
                Ok(target) => reply.data(&target),
                Err(e) => reply.error(errno(&e)),
            }
        });
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
        let made = self
            .fs
            .mkdir(parent.0, name.as_encoded_bytes(), perm(mode, umask));
        reply_entry(reply, self.ttl, made);
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        reply_empty(reply, self.fs.unlink(parent.0, name.as_encoded_bytes()));
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        reply_empty(reply, self.fs.rmdir(parent.0, name.as_encoded_bytes()));
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
        let flags = fs::RenameFlags {
            noreplace: flags.contains(RenameFlags::RENAME_NOREPLACE),
            exchange: flags.contains(RenameFlags::RENAME_EXCHANGE),
            whiteout: flags.contains(RenameFlags::RENAME_WHITEOUT),
        };
        let from = (parent.0, name.as_encoded_bytes());
        let to = (newparent.0, newname.as_encoded_bytes());
        reply_empty(reply, self.fs.rename(from, to, flags));
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let fs = self.fs.clone();
        self.run(async move {
            let mut buf = REPLY_BUFFER.take();
            match fs.read(ino.0, fh.0, offset, size, &mut buf).await {
                Ok(bytes) => reply.data(&bytes),
                Err(e) => reply.error(errno(&e)),
            }
            REPLY_BUFFER.set(buf);
        });
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.fs.opendir(ino.0) {
            Ok(Opened::Stateless) => reply.error(errno(&FsError::Unsupported)),
            Ok(Opened::Handle { fh, .. } | Opened::Backing { fh, .. }) => {
                reply.opened(FileHandle(fh), FopenFlags::empty())
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let listed = self.fs.readdir(ino.0, offset, |name, stat, cookie| {
            let kind = file_attr(stat).kind;
            reply.add(INodeNo(stat.attr.ino), cookie, kind, name)
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
        let listed = self.fs.readdir(ino.0, offset, |name, stat, cookie| {
            let attr = file_attr(stat);
            reply.add(
                attr.ino,
                cookie,
                name,
                &ttl(stat, self.ttl),
                &attr,
                Generation(0),
            )
        });
        match listed {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let s = self.fs.statfs();
        reply.statfs(
            s.blocks,
            0,
            0,
            s.files,
            0,
            s.block_size,
            s.name_max,
            s.block_size,
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
        match self.fs.getxattr() {
            Ok(value) => reply.data(&value),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn listxattr(&self, _req: &Request, _ino: INodeNo, _size: u32, reply: ReplyXattr) {
        match self.fs.getxattr() {
            Ok(value) => reply.data(&value),
            Err(e) => reply.error(errno(&e)),
        }
    }
}
