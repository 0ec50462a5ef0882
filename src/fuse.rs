//! The FUSE adapter: translates kernel requests into tree lookups and item
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
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, Generation, INodeNo, InitFlags,
    KernelConfig, LockOwner, OpenAccMode, OpenFlags, ReplyAttr, ReplyData, ReplyDirectory,
    ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyXattr, Request,
};
use tracing::{debug, warn};

use crate::format::CONTROL_DIR;
use crate::reader::{ItemReader, ReadError};
use crate::tree::{NodeId, NodeKind, Tree};

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
/// tree inode (tree nodes are `u32` indices + 1).
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
    Read(ReadError),
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
        // Data that cannot be produced exactly is an I/O error, never zeros.
        FsError::Read(ReadError::Map(_) | ReadError::Execute(_)) => Errno::EIO,
    }
}

/// What an inode number names.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Node {
    Tree(NodeId),
    Control,
    Stats,
}

impl Node {
    fn from_ino(ino: INodeNo) -> Result<Node, FsError> {
        match ino.0 {
            CONTROL_INO => Ok(Node::Control),
            STATS_INO => Ok(Node::Stats),
            // FUSE's root inode is 1: tree inodes are node indices + 1.
            n => NodeId::try_from(n.wrapping_sub(1))
                .map(Node::Tree)
                .map_err(|_| FsError::NotFound),
        }
    }

    fn ino(self) -> INodeNo {
        INodeNo(match self {
            Node::Tree(id) => u64::from(id) + 1,
            Node::Control => CONTROL_INO,
            Node::Stats => STATS_INO,
        })
    }
}

/// A mounted snapshot.
pub struct PackFs {
    tree: Arc<Tree>,
    reader: ItemReader,
    runtime: tokio::runtime::Handle,
    uid: u32,
    gid: u32,
    mtime: SystemTime,
}

impl PackFs {
    /// Serves `tree`, reading item bytes through `reader` on `runtime`.
    /// Files and directories are owned by `uid`/`gid`.
    pub fn new(
        tree: Tree,
        reader: ItemReader,
        runtime: tokio::runtime::Handle,
        uid: u32,
        gid: u32,
    ) -> Self {
        let mtime = UNIX_EPOCH + Duration::from_nanos(tree.ts_unix_ns());
        PackFs {
            tree: Arc::new(tree),
            reader,
            runtime,
            uid,
            gid,
            mtime,
        }
    }

    fn tree_kind(&self, id: NodeId) -> Result<&NodeKind, FsError> {
        self.tree.node(id).map(|n| &n.kind).ok_or(FsError::NotFound)
    }

    fn is_dir(&self, node: Node) -> Result<bool, FsError> {
        Ok(match node {
            Node::Tree(id) => matches!(self.tree_kind(id)?, NodeKind::Dir(_)),
            Node::Control => true,
            Node::Stats => false,
        })
    }

    fn attr(&self, node: Node) -> Result<FileAttr, FsError> {
        let (kind, perm, size, nlink) = match node {
            Node::Tree(id) => match self.tree_kind(id)? {
                NodeKind::Dir(_) => (FileType::Directory, 0o555, 0, 2),
                NodeKind::File(item) => {
                    (FileType::RegularFile, 0o444, self.tree.item(*item).size, 1)
                }
            },
            Node::Control => (FileType::Directory, 0o555, 0, 2),
            // Fixed-width text; a new mtime on every getattr makes the kernel
            // drop its cached pages (FUSE_AUTO_INVAL_DATA).
            Node::Stats => (
                FileType::RegularFile,
                0o444,
                self.reader.stats().render().len() as u64,
                1,
            ),
        };
        let mtime = if node == Node::Stats {
            SystemTime::now()
        } else {
            self.mtime
        };
        Ok(FileAttr {
            ino: node.ino(),
            size,
            blocks: size.div_ceil(512),
            atime: mtime,
            mtime,
            ctime: mtime,
            crtime: self.mtime,
            kind,
            perm,
            nlink,
            uid: self.uid,
            gid: self.gid,
            rdev: 0,
            blksize: BLKSIZE,
            flags: 0,
        })
    }

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
            Node::Tree(Tree::ROOT) if name == CONTROL_DIR.as_bytes() => Ok(Node::Control),
            Node::Tree(id) => match self.tree_kind(id)? {
                NodeKind::Dir(_) => self
                    .tree
                    .lookup(id, name)
                    .map(Node::Tree)
                    .ok_or(FsError::NotFound),
                NodeKind::File(_) => Err(FsError::NotADirectory),
            },
            Node::Control if name == STATS_FILE.as_bytes() => Ok(Node::Stats),
            Node::Control => Err(FsError::NotFound),
            Node::Stats => Err(FsError::NotADirectory),
        }
    }

    /// Entry `i` of directory `dir`: `.`, `..`, then the children. Entry `i`
    /// carries cookie `i + 1`, so resuming a listing is O(1) at any size.
    fn entry(&self, dir: Node, i: usize) -> Option<(Node, &str)> {
        match dir {
            Node::Tree(id) => {
                let node = self.tree.node(id)?;
                let NodeKind::Dir(children) = &node.kind else {
                    return None;
                };
                match i {
                    0 => Some((dir, ".")),
                    1 => Some((Node::Tree(node.parent), "..")),
                    i if i - 2 < children.len() => {
                        let child = children[i - 2];
                        Some((Node::Tree(child), &*self.tree.node(child)?.name))
                    }
                    _ => None,
                }
            }
            Node::Control => [
                (dir, "."),
                (Node::Tree(Tree::ROOT), ".."),
                (Node::Stats, STATS_FILE),
            ]
            .get(i)
            .copied(),
            Node::Stats => None,
        }
    }

    /// Feeds the entries of directory `ino` from cookie `offset` to `add`,
    /// with the cookie of the next entry, until `add` reports a full buffer.
    fn list(
        &self,
        ino: INodeNo,
        offset: u64,
        mut add: impl FnMut(Node, u64, &str) -> bool,
    ) -> Result<(), FsError> {
        let dir = self.dir(ino)?;
        let mut i = usize::try_from(offset).unwrap_or(usize::MAX);
        while let Some((node, name)) = self.entry(dir, i) {
            i += 1;
            if add(node, i as u64, name) {
                break;
            }
        }
        Ok(())
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

    fn file_type(&self, node: Node) -> FileType {
        match self.is_dir(node) {
            Ok(false) => FileType::RegularFile,
            _ => FileType::Directory,
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
        let _ = config.set_max_background(MAX_BACKGROUND);
        let _ = config.set_max_readahead(MAX_READAHEAD);
        Ok(())
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

    /// Answered with ENOSYS: the kernel then stops sending OPEN and RELEASE
    /// for every file (its no-open mode) and keeps each file's page cache
    /// across opens, as `FOPEN_KEEP_CACHE` would — two round trips fewer
    /// per small file. Writes never get here: the mount is read-only.
    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let refusal = match Node::from_ino(ino).and_then(|node| self.is_dir(node)) {
            Err(e) => e,
            Ok(true) => FsError::IsADirectory,
            Ok(false) if flags.acc_mode() != OpenAccMode::O_RDONLY => FsError::ReadOnly,
            Ok(false) => FsError::Unsupported,
        };
        reply.error(errno(&refusal));
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
        let item = match Node::from_ino(ino) {
            Ok(Node::Tree(id)) => match self.tree_kind(id) {
                Ok(NodeKind::File(item)) => *item,
                Ok(NodeKind::Dir(_)) => return reply.error(errno(&FsError::IsADirectory)),
                Err(e) => return reply.error(errno(&e)),
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
        let (tree, reader) = (self.tree.clone(), self.reader.clone());
        let mut task = Box::pin(async move {
            let item = tree.item(item);
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

    /// Nothing is buffered for writing, so close has nothing to flush;
    /// ENOSYS makes the kernel stop sending FLUSH on every close.
    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.error(errno(&FsError::Unsupported));
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
        let listed = self.list(ino, offset, |node, cookie, name| {
            reply.add(node.ino(), cookie, self.file_type(node), name)
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
        let listed = self.list(ino, offset, |node, cookie, name| match self.attr(node) {
            Ok(attr) => reply.add(
                node.ino(),
                cookie,
                name,
                &Self::ttl(node),
                &attr,
                Generation(0),
            ),
            Err(_) => false,
        });
        match listed {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let block = 4096u64;
        reply.statfs(
            self.tree.total_bytes().div_ceil(block),
            0,
            0,
            self.tree.node_count() as u64,
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
