//! The write ceiling of the writes scenario: a FUSE filesystem that keeps what
//! is written to it in RAM and does nothing else (no spool, no journal, no
//! commit), mounted in this process with the same `fuser` settings as a
//! read-write packfs mount. `cp -r` and `tar -x` into it cost only the
//! kernel's FUSE round trips, so its files/s are the limit FUSE sets on
//! writes on this machine, as `../shared/tools/fuse-ceiling` is for reads.
//! It also counts the requests the kernel sends, so the table can say how
//! many round trips a file costs.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use fuser::{
    BackgroundSession, BsdFileFlags, Config, Errno, FileAttr, FileHandle, FileType, Filesystem,
    FopenFlags, Generation, INodeNo, InitFlags, KernelConfig, LockOwner, MountOption, OpenFlags,
    ReplyAttr, ReplyCreate, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyWrite, Request, TimeOrNow,
    WriteFlags,
};
use parking_lot::Mutex;

/// A read-write packfs mount's attribute timeout (`src/fuse.rs`).
const TTL: Duration = Duration::from_secs(24 * 3600);
/// A read-write packfs mount's `max_background` (`src/fuse.rs`).
const MAX_BACKGROUND: u16 = 64;

struct Node {
    parent: u64,
    attr: FileAttr,
    data: Vec<u8>,
    children: Vec<(OsString, u64)>,
}

/// Requests served, by kind: what a file costs in round trips.
#[derive(Default)]
pub(crate) struct Counts {
    lookup: AtomicU64,
    create: AtomicU64,
    mkdir: AtomicU64,
    write: AtomicU64,
    flush: AtomicU64,
    release: AtomicU64,
    setattr: AtomicU64,
    getattr: AtomicU64,
    other: AtomicU64,
}

impl Counts {
    /// `kind n, …` per file of `files`, for the kinds sent at least once
    /// per 100 files; rarer ones (`mkdir` of the directories) as totals.
    pub(crate) fn per_file(&self, files: usize) -> String {
        let kinds = [
            ("lookup", &self.lookup),
            ("create", &self.create),
            ("write", &self.write),
            ("setattr", &self.setattr),
            ("flush", &self.flush),
            ("release", &self.release),
            ("getattr", &self.getattr),
            ("mkdir", &self.mkdir),
            ("other", &self.other),
        ];
        let shown: Vec<String> = kinds
            .iter()
            .map(|(name, n)| (name, n.load(Ordering::Relaxed)))
            .filter(|&(_, n)| n > 0)
            .map(|(name, n)| match n as f64 / files as f64 {
                per_file if per_file >= 0.01 => format!("{name} {per_file:.2}"),
                _ => format!("{name} {n} in all"),
            })
            .collect();
        shown.join(", ")
    }

    /// Requests per file the writer waits for: all but RELEASE, which the
    /// kernel sends after `close` has returned.
    pub(crate) fn synchronous_per_file(&self, files: usize) -> f64 {
        let all = [
            &self.lookup,
            &self.create,
            &self.mkdir,
            &self.write,
            &self.flush,
            &self.setattr,
            &self.getattr,
            &self.other,
        ];
        let n: u64 = all.iter().map(|n| n.load(Ordering::Relaxed)).sum();
        n as f64 / files as f64
    }
}

fn count(n: &AtomicU64) {
    n.fetch_add(1, Ordering::Relaxed);
}

struct Tree {
    /// Inode n is `nodes[n - 1]`; the root is inode 1.
    nodes: Vec<Node>,
    names: HashMap<(u64, OsString), u64>,
}

impl Tree {
    fn node(&mut self, ino: INodeNo) -> Result<&mut Node, Errno> {
        let index = ino.0.checked_sub(1).ok_or(Errno::ENOENT)? as usize;
        self.nodes.get_mut(index).ok_or(Errno::ENOENT)
    }

    fn add(
        &mut self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        kind: FileType,
        perm: u16,
    ) -> Result<FileAttr, Errno> {
        let key = (parent.0, name.to_os_string());
        if self.names.contains_key(&key) {
            return Err(Errno::EEXIST);
        }
        let ino = self.nodes.len() as u64 + 1;
        let attr = attr(ino, kind, perm, req.uid(), req.gid());
        self.node(parent)?.children.push((key.1.clone(), ino));
        self.names.insert(key, ino);
        self.nodes.push(Node {
            parent: parent.0,
            attr,
            data: Vec::new(),
            children: Vec::new(),
        });
        Ok(attr)
    }
}

fn attr(ino: u64, kind: FileType, perm: u16, uid: u32, gid: u32) -> FileAttr {
    let now = SystemTime::now();
    FileAttr {
        ino: INodeNo(ino),
        size: 0,
        blocks: 0,
        atime: now,
        mtime: now,
        ctime: now,
        crtime: now,
        kind,
        perm,
        nlink: if kind == FileType::Directory { 2 } else { 1 },
        uid,
        gid,
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

/// The filesystem: a tree in RAM behind one lock.
pub(crate) struct WriteCeiling {
    tree: Mutex<Tree>,
    counts: std::sync::Arc<Counts>,
}

fn reply_entry(reply: ReplyEntry, found: Result<FileAttr, Errno>) {
    match found {
        Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
        Err(e) => reply.error(e),
    }
}

impl WriteCeiling {
    /// A new node `name` in `parent`, owned by the caller.
    fn make(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        kind: FileType,
        mode: u32,
    ) -> Result<FileAttr, Errno> {
        let perm = (mode & 0o7777) as u16;
        self.tree.lock().add(req, parent, name, kind, perm)
    }
}

impl Filesystem for WriteCeiling {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        // What a read-write packfs mount asks for (`src/fuse.rs`).
        for flag in [
            InitFlags::FUSE_PARALLEL_DIROPS,
            InitFlags::FUSE_DO_READDIRPLUS,
            InitFlags::FUSE_READDIRPLUS_AUTO,
            InitFlags::FUSE_AUTO_INVAL_DATA,
            InitFlags::FUSE_ATOMIC_O_TRUNC,
        ] {
            let _ = config.add_capabilities(flag);
        }
        let _ = config.set_max_background(MAX_BACKGROUND);
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        count(&self.counts.lookup);
        let mut tree = self.tree.lock();
        let found = match tree.names.get(&(parent.0, name.to_os_string())).copied() {
            Some(ino) => tree.node(INodeNo(ino)).map(|n| n.attr),
            None => Err(Errno::ENOENT),
        };
        reply_entry(reply, found);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        count(&self.counts.getattr);
        match self.tree.lock().node(ino) {
            Ok(n) => reply.attr(&TTL, &n.attr),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        count(&self.counts.setattr);
        let mut tree = self.tree.lock();
        let n = match tree.node(ino) {
            Ok(n) => n,
            Err(e) => return reply.error(e),
        };
        if let Some(mode) = mode {
            n.attr.perm = (mode & 0o7777) as u16;
        }
        n.attr.uid = uid.unwrap_or(n.attr.uid);
        n.attr.gid = gid.unwrap_or(n.attr.gid);
        if let Some(size) = size {
            n.data.resize(size as usize, 0);
            n.attr.size = size;
        }
        match mtime {
            Some(TimeOrNow::SpecificTime(t)) => n.attr.mtime = t,
            Some(TimeOrNow::Now) => n.attr.mtime = SystemTime::now(),
            None => {}
        }
        reply.attr(&TTL, &n.attr);
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        count(&self.counts.other);
        reply_entry(
            reply,
            self.make(req, parent, name, FileType::RegularFile, mode & !umask),
        );
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        count(&self.counts.mkdir);
        reply_entry(
            reply,
            self.make(req, parent, name, FileType::Directory, mode & !umask),
        );
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        count(&self.counts.create);
        match self.make(req, parent, name, FileType::RegularFile, mode & !umask) {
            // Handles carry nothing: every write names its inode.
            Ok(attr) => reply.created(
                &TTL,
                &attr,
                Generation(0),
                FileHandle(0),
                FopenFlags::FOPEN_KEEP_CACHE,
            ),
            Err(e) => reply.error(e),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        count(&self.counts.write);
        let mut tree = self.tree.lock();
        let n = match tree.node(ino) {
            Ok(n) => n,
            Err(e) => return reply.error(e),
        };
        let end = offset as usize + data.len();
        if n.data.len() < end {
            n.data.resize(end, 0);
        }
        n.data[offset as usize..end].copy_from_slice(data);
        n.attr.size = n.data.len() as u64;
        n.attr.blocks = n.attr.size.div_ceil(512);
        n.attr.mtime = SystemTime::now();
        reply.written(data.len() as u32);
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        count(&self.counts.flush);
        reply.ok();
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        count(&self.counts.release);
        reply.ok();
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        count(&self.counts.other);
        let mut tree = self.tree.lock();
        let (parent, children) = match tree.node(ino) {
            Ok(n) => (n.parent, n.children.clone()),
            Err(e) => return reply.error(e),
        };
        let dots = [(ino.0, OsString::from(".")), (parent, OsString::from(".."))];
        let entries = dots
            .into_iter()
            .chain(children.into_iter().map(|(s, i)| (i, s)));
        // The cookie of an entry is its position + 1, so 0 is the start.
        for (k, (child, name)) in entries.enumerate().skip(offset as usize) {
            let kind = tree.nodes[child as usize - 1].attr.kind;
            if reply.add(INodeNo(child), k as u64 + 1, kind, &name) {
                break;
            }
        }
        reply.ok();
    }
}

/// A mounted [`WriteCeiling`]; unmounted (and its RAM freed) on drop.
pub(crate) struct Mounted {
    session: Option<BackgroundSession>,
    /// Requests served so far.
    pub counts: std::sync::Arc<Counts>,
}

impl Mounted {
    /// Mounts an empty write ceiling on `mnt`, served by `threads` threads
    /// reading their own clone of the FUSE device (as `packfs mount`
    /// serves).
    pub(crate) fn mount(mnt: &Path, threads: usize) -> std::io::Result<Mounted> {
        let counts = std::sync::Arc::new(Counts::default());
        // The root belongs to whoever owns the mountpoint: this process.
        let owner = std::fs::metadata(mnt)?;
        let root = attr(1, FileType::Directory, 0o755, owner.uid(), owner.gid());
        let fs = WriteCeiling {
            tree: Mutex::new(Tree {
                nodes: vec![Node {
                    parent: 1,
                    attr: root,
                    data: Vec::new(),
                    children: Vec::new(),
                }],
                names: HashMap::new(),
            }),
            counts: counts.clone(),
        };
        let mut config = Config::default();
        config
            .mount_options
            .extend([MountOption::RW, MountOption::FSName("write-ceiling".into())]);
        config.n_threads = Some(threads.max(1));
        config.clone_fd = true;
        let session = fuser::spawn_mount(fs, mnt, &config)?;
        Ok(Mounted {
            session: Some(session),
            counts,
        })
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if let Some(session) = self.session.take() {
            // fuser 0.18's drop does not wait for the session's end.
            let _ = session.umount_and_join();
        }
    }
}
