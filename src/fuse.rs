//! The FUSE adapter: translates kernel requests into tree lookups and item
//! reads, and errors into errno — in [`errno`], the one place that does.

use std::ffi::OsStr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, InitFlags,
    KernelConfig, LockOwner, OpenAccMode, OpenFlags, ReplyAttr, ReplyData, ReplyDirectory,
    ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyXattr, Request,
};
use tracing::{debug, warn};

use crate::reader::{ItemReader, ReadError};
use crate::tree::{NodeId, NodeKind, Tree};

/// Everything is immutable for the life of a mount, so the kernel may cache
/// names and attributes for as long as it likes.
const TTL: Duration = Duration::from_secs(24 * 3600);
/// Reported `st_blksize`: tools like `cp` size their reads from it.
const BLKSIZE: u32 = 128 * 1024;
/// Requests the kernel may have outstanding at once (fuser's default is 16).
const MAX_BACKGROUND: u16 = 64;

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
        FsError::Read(ReadError::LengthMismatch { .. } | ReadError::Store(_)) => Errno::EIO,
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

    fn node_id(ino: INodeNo) -> NodeId {
        // Inode numbers are node indices + 1: FUSE's root inode is 1.
        (ino.0 - 1) as NodeId
    }

    fn ino(node: NodeId) -> INodeNo {
        INodeNo(u64::from(node) + 1)
    }

    fn attr(&self, node: NodeId) -> Result<FileAttr, FsError> {
        let n = self.tree.node(node).ok_or(FsError::NotFound)?;
        let (kind, perm, size, nlink) = match &n.kind {
            NodeKind::Dir(_) => (FileType::Directory, 0o555, 0, 2),
            NodeKind::File(item) => (FileType::RegularFile, 0o444, self.tree.item(*item).size, 1),
        };
        Ok(FileAttr {
            ino: Self::ino(node),
            size,
            blocks: size.div_ceil(512),
            atime: self.mtime,
            mtime: self.mtime,
            ctime: self.mtime,
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

    fn lookup_node(&self, parent: INodeNo, name: &OsStr) -> Result<NodeId, FsError> {
        let parent = Self::node_id(parent);
        match self.tree.node(parent).map(|n| &n.kind) {
            Some(NodeKind::Dir(_)) => {}
            Some(NodeKind::File(_)) => return Err(FsError::NotADirectory),
            None => return Err(FsError::NotFound),
        }
        self.tree
            .lookup(parent, name.as_encoded_bytes())
            .ok_or(FsError::NotFound)
    }

    /// Directory entries from cookie `offset`: `.`, `..`, then children.
    /// Entry `i` carries cookie `i + 1`, so resuming is O(1) at any size.
    fn dir_entries(
        &self,
        ino: INodeNo,
        offset: u64,
    ) -> Result<impl Iterator<Item = (u64, NodeId, &str)> + '_, FsError> {
        let node = Self::node_id(ino);
        let n = self.tree.node(node).ok_or(FsError::NotFound)?;
        let NodeKind::Dir(children) = &n.kind else {
            return Err(FsError::NotADirectory);
        };
        let offset = usize::try_from(offset).unwrap_or(usize::MAX);
        let dots = [(node, "."), (n.parent, "..")]
            .into_iter()
            .enumerate()
            .skip(offset)
            .map(|(i, (id, name))| (i as u64 + 1, id, name));
        let start = offset.saturating_sub(2).min(children.len());
        let rest = children[start..]
            .iter()
            .enumerate()
            .map(move |(i, &child)| {
                let name = &*self.tree.node(child).expect("child exists").name;
                ((start + i + 3) as u64, child, name)
            });
        Ok(dots.chain(rest))
    }

    fn file_type(&self, node: NodeId) -> FileType {
        match self.tree.node(node).map(|n| &n.kind) {
            Some(NodeKind::File(_)) => FileType::RegularFile,
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
        ] {
            if config.add_capabilities(flag).is_err() {
                debug!("kernel does not offer {flag:?}");
            }
        }
        let _ = config.set_max_background(MAX_BACKGROUND);
        let _ = config.set_max_readahead(1 << 20);
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        match self.lookup_node(parent, name).and_then(|n| self.attr(n)) {
            Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.attr(Self::node_id(ino)) {
            Ok(attr) => reply.attr(&TTL, &attr),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let result = match self.tree.node(Self::node_id(ino)).map(|n| &n.kind) {
            None => Err(FsError::NotFound),
            Some(NodeKind::Dir(_)) => Err(FsError::IsADirectory),
            Some(NodeKind::File(_)) if flags.acc_mode() != OpenAccMode::O_RDONLY => {
                Err(FsError::ReadOnly)
            }
            Some(NodeKind::File(_)) => Ok(()),
        };
        match result {
            // Items never change while mounted: keep the page cache across opens.
            Ok(()) => reply.opened(FileHandle(0), FopenFlags::FOPEN_KEEP_CACHE),
            Err(e) => reply.error(errno(&e)),
        }
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
        let item = match self.tree.node(Self::node_id(ino)).map(|n| &n.kind) {
            Some(NodeKind::File(item)) => *item,
            Some(NodeKind::Dir(_)) => return reply.error(errno(&FsError::IsADirectory)),
            None => return reply.error(errno(&FsError::NotFound)),
        };
        let (tree, reader) = (self.tree.clone(), self.reader.clone());
        // The loop thread goes back to the kernel at once; the reply is sent
        // from the runtime when the bytes arrive.
        self.runtime.spawn(async move {
            let item = tree.item(item);
            match reader.read(item, offset, u64::from(size)).await {
                Ok(bytes) => reply.data(&bytes),
                Err(e) => {
                    warn!("read {}/{} at {offset}: {e}", item.name, item.size);
                    reply.error(errno(&FsError::Read(e)));
                }
            }
        });
    }

    /// Nothing is buffered for writing, so close has nothing to flush.
    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.tree.node(Self::node_id(ino)).map(|n| &n.kind) {
            Some(NodeKind::Dir(_)) => reply.opened(FileHandle(0), FopenFlags::FOPEN_CACHE_DIR),
            Some(NodeKind::File(_)) => reply.error(errno(&FsError::NotADirectory)),
            None => reply.error(errno(&FsError::NotFound)),
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
        match self.dir_entries(ino, offset) {
            Ok(entries) => {
                for (cookie, node, name) in entries {
                    if reply.add(Self::ino(node), cookie, self.file_type(node), name) {
                        break;
                    }
                }
                reply.ok();
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn readdirplus(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectoryPlus,
    ) {
        match self.dir_entries(ino, offset) {
            Ok(entries) => {
                for (cookie, node, name) in entries {
                    let Ok(attr) = self.attr(node) else { continue };
                    if reply.add(Self::ino(node), cookie, name, &TTL, &attr, Generation(0)) {
                        break;
                    }
                }
                reply.ok();
            }
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
