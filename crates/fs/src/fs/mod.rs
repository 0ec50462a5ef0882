//! The filesystem core: every operation a mount answers, on inode numbers,
//! names and byte ranges, with no kernel types. The FUSE adapter only
//! translates kernel requests into these calls and [`FsError`]s into errno,
//! so everything a mount decides (which node an inode is, what the control
//! files show, whether a read comes from the store or the spool, how
//! `setattr` changes a file) is here, and tests drive it without
//! `/dev/fuse`.
//!
//! Besides the dataset's tree (the [`Namespace`], writable) the root has
//! read-only [`Catalog`]s attached at names: `/.packfs`, the control
//! directory, is the first ([`packfs_core::catalog::control`]). They are found by
//! name but not listed, so `find`, `cp -r`, `tar` and `diff -r` see exactly
//! the dataset.

mod error;
mod opened;
pub mod passthrough;
mod whole_reads;

use std::sync::Arc;
use std::time::SystemTime;

use packfs_core::cache::Stats;
use packfs_core::catalog::control::{self, Control, Daemon};
use packfs_core::catalog::Catalog;
use packfs_core::dataset::LeaseHolder;
use packfs_core::extents::Extents;
use packfs_core::kind::Kind;
use packfs_core::reader::{ReadBytes, Reader};
use packfs_core::tree::Tree;
use packfs_format::{ObjectId, Special, SYMLINK_MAX};
use tracing::warn;

use crate::namespace::{Attr, Content, Ino, Namespace, NsError, ROOT_INO};
use crate::write::{WriteError, Writer};
pub use error::FsError;
pub use opened::Opened;
use passthrough::Passthrough;
use whole_reads::WholeReads;

/// How long an unmount waits for the store to delete the mount's lease.
const LEASE_RELEASE_TIME: std::time::Duration = std::time::Duration::from_secs(5);

/// Inodes of attached catalogs start here, one span of ids each: above
/// every inode of the namespace.
const CATALOG_INOS: Ino = 1 << 40;
const CATALOG_SPAN: Ino = 1 << packfs_core::catalog::ID_BITS;
/// The handle of an open catalog file: reads need no state.
const CATALOG_FH: u64 = 0;
/// A read that finds its spool version committed (and deleted) under it
/// looks the file up again this many times.
const SPOOL_RACE_RETRIES: usize = 3;

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

/// Changes `setattr` asks for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SetAttr {
    pub perm: Option<u16>,
    pub size: Option<u64>,
    pub mtime: Option<SystemTime>,
    /// Kept while mounted, never stored.
    pub atime: Option<SystemTime>,
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
pub(crate) struct FsStats {
    pub block_size: u32,
    pub blocks: u64,
    pub files: u64,
    pub name_max: u32,
}

/// What an inode number names.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Node {
    Ns(Ino),
    /// Entry `id` of attached catalog `index`.
    Catalog(usize, u64),
}

/// A catalog attached at `name` in the root.
struct Attached {
    name: Box<str>,
    catalog: Arc<dyn Catalog>,
}

/// A mounted snapshot: its namespace, the catalogs attached to it, its
/// reads and, on a read-write mount, its writer.
pub struct Fs {
    ns: Arc<Namespace>,
    attached: Vec<Attached>,
    writer: Option<Arc<Writer>>,
    reader: Reader,
    owner: Owner,
    /// Read-only mounts with whole-file copies.
    passthrough: Option<Passthrough>,
    /// The attached catalog that is the mount's root ([`Fs::of_catalog`]).
    root_catalog: Option<usize>,
    /// Handles of catalog files checked when read whole
    /// ([`Fs::checking_whole_reads`]).
    whole_reads: Option<WholeReads>,
    /// The lease on the Manifest served ([`Fs::with_lease`]).
    lease: Option<(LeaseHolder, ObjectId)>,
}

impl Fs {
    /// Serves `ns`, reading file bytes through `reader`; with `writer`,
    /// changes are accepted. Every node is owned by `owner`. The control
    /// catalog is attached at `/.packfs`; without `writer` it names the
    /// Manifest served (`/.packfs/manifest`).
    pub fn new(
        ns: Arc<Namespace>,
        writer: Option<Arc<Writer>>,
        reader: Reader,
        owner: Owner,
    ) -> Self {
        // A read-write mount serves its own changes over the Manifest it
        // started from: no one Manifest to name.
        let manifest = writer.is_none().then(|| ns.tree().manifest_id());
        Self::with_control(ns, writer, reader, owner, manifest)
    }

    fn with_control(
        ns: Arc<Namespace>,
        writer: Option<Arc<Writer>>,
        reader: Reader,
        owner: Owner,
        manifest: Option<ObjectId>,
    ) -> Self {
        let daemon = Daemon {
            pid: std::process::id(),
            spool: writer.as_ref().map(|w| w.spool_dir().to_path_buf()),
        };
        let control = Control::new(
            reader.stats().clone(),
            ns.attr(ROOT_INO)
                .map_or(SystemTime::UNIX_EPOCH, |a| a.mtime),
            &daemon,
            manifest,
        );
        Fs {
            ns,
            attached: vec![Attached {
                name: control::NAME.into(),
                catalog: Arc::new(control),
            }],
            writer,
            reader,
            owner,
            passthrough: None,
            root_catalog: None,
            whole_reads: None,
            lease: None,
        }
    }

    /// Serves `catalog` as the whole (read-only) mount: its root is the
    /// mount's root, with the control catalog attached at `/.packfs`
    /// (naming `manifest` if the catalog shows one: a view of a dataset).
    pub(crate) fn of_catalog(
        catalog: Arc<dyn Catalog>,
        reader: Reader,
        owner: Owner,
        manifest: Option<ObjectId>,
    ) -> Self {
        let ns = Arc::new(Namespace::new(Tree::empty(), false));
        let mut fs = Fs::with_control(ns, None, reader, owner, manifest);
        fs.attached.push(Attached {
            name: "".into(),
            catalog,
        });
        fs.root_catalog = Some(fs.attached.len() - 1);
        fs
    }

    /// Holds `lease` on `served`, the Manifest a read-only mount serves
    /// (a writing mount's is its writer's base): renewed by
    /// [`Fs::renew_lease`], released at [`Fs::shutdown`].
    pub(crate) fn with_lease(mut self, lease: LeaseHolder, served: ObjectId) -> Self {
        self.lease = Some((lease, served));
        self
    }

    /// Renews the lease, naming the Manifest the mount serves or commits
    /// onto now; a failure is logged (the lease stays fresh for days).
    pub async fn renew_lease(&self) {
        let Some((holder, served)) = &self.lease else {
            return;
        };
        let manifest = match &self.writer {
            Some(writer) => writer.base().await,
            None => *served,
        };
        if let Err(e) = holder.renew(manifest).await {
            lease_failed(self.writer.is_some(), manifest, &e);
        }
    }

    /// Attaches `catalog` at `name` in the root: found by name, not listed
    /// (a mount's named views, `.NAME=SPEC`).
    pub(crate) fn attach(mut self, name: &str, catalog: Arc<dyn Catalog>) -> Self {
        self.attached.push(Attached {
            name: name.into(),
            catalog,
        });
        self
    }

    /// Checks each read-only handle of a catalog file that records a
    /// checksum ([`Catalog::whole_read`]): a read that ends a pass over
    /// the whole file from offset 0 fails if the checksum disagrees. Every
    /// open then gets a handle: a stateless answer would end opens for the
    /// whole mount.
    pub(crate) fn checking_whole_reads(mut self) -> Self {
        self.whole_reads = Some(WholeReads::default());
        self
    }

    /// Serves reads of items with whole-file copies by passthrough once
    /// [`Self::enable_passthrough`] is called. Read-only mounts only.
    pub(crate) fn with_passthrough(mut self, passthrough: Passthrough) -> Self {
        debug_assert!(self.writer.is_none(), "passthrough on a read-write mount");
        self.passthrough = Some(passthrough);
        self
    }

    /// Whether the mount would serve reads by passthrough if the kernel
    /// allows it.
    pub(crate) fn wants_passthrough(&self) -> bool {
        self.passthrough.is_some()
    }

    /// The kernel granted passthrough at init; returns whether it is on.
    pub(crate) fn enable_passthrough(&self) -> bool {
        self.passthrough.as_ref().is_some_and(|p| p.enable())
    }

    /// Whether opens may still be answered with [`Opened::Backing`].
    pub(crate) fn passthrough_on(&self) -> bool {
        self.passthrough.as_ref().is_some_and(|p| p.is_on())
    }

    /// The kernel refused the backing file of handle `fh` (`error`;
    /// `None`: passthrough went off since the open was answered): the
    /// handle is served by the daemon instead, and so are later opens.
    pub(crate) fn passthrough_refused(&self, fh: u64, error: Option<&std::io::Error>) -> Opened {
        match &self.passthrough {
            Some(p) => p.refused(fh, error),
            None => Opened::Handle {
                fh,
                direct_io: false,
                flush: false,
            },
        }
    }

    fn node(&self, ino: Ino) -> Node {
        if let (ROOT_INO, Some(index)) = (ino, self.root_catalog) {
            return Node::Catalog(index, 0);
        }
        if ino < CATALOG_INOS {
            return Node::Ns(ino);
        }
        let (index, id) = (
            (ino - CATALOG_INOS) / CATALOG_SPAN,
            (ino - CATALOG_INOS) % CATALOG_SPAN,
        );
        match usize::try_from(index) {
            Ok(index) if index < self.attached.len() => Node::Catalog(index, id),
            _ => Node::Ns(ino), // no such inode: the namespace says so
        }
    }

    fn catalog_ino(&self, index: usize, id: u64) -> Ino {
        if id == 0 && self.root_catalog == Some(index) {
            return ROOT_INO;
        }
        CATALOG_INOS + index as u64 * CATALOG_SPAN + id
    }

    /// The writer, for a change of the entries `(directory, name)`: entries
    /// of attached catalogs, and the names they are attached at, are
    /// read-only (without this the namespace, which does not know them,
    /// would answer `ENOENT` for what `lookup` finds).
    fn writer_for(&self, entries: &[(Ino, &[u8])]) -> Result<&Writer, FsError> {
        let attached = |&(dir, name): &(Ino, &[u8])| match self.node(dir) {
            Node::Catalog(..) => true,
            Node::Ns(dir) => {
                dir == ROOT_INO && self.attached.iter().any(|a| a.name.as_bytes() == name)
            }
        };
        if entries.iter().any(attached) {
            return Err(NsError::ReadOnly.into());
        }
        self.writer()
    }

    /// `ino` if it is the namespace's; entries of catalogs cannot change.
    fn changeable(&self, ino: Ino) -> Result<Ino, FsError> {
        match self.node(ino) {
            Node::Ns(ino) => Ok(ino),
            Node::Catalog(..) => Err(NsError::ReadOnly.into()),
        }
    }

    /// Where this mount's file bytes are read (its block cache, counters).
    pub fn reader(&self) -> &Reader {
        &self.reader
    }

    /// The writer of a read-write mount.
    pub(crate) fn shared_writer(&self) -> Option<&Arc<Writer>> {
        self.writer.as_ref()
    }

    /// Whether the mount accepts changes.
    pub(crate) fn is_writable(&self) -> bool {
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

    fn stat_of(&self, attr: Attr, volatile: bool) -> Stat {
        Stat {
            attr,
            owner: self.owner,
            volatile,
        }
    }

    /// The attributes of `ino`.
    pub fn getattr(&self, ino: Ino) -> Result<Stat, FsError> {
        match self.node(ino) {
            Node::Ns(ino) => Ok(self.stat_of(self.ns.attr(ino)?, false)),
            Node::Catalog(index, id) => {
                let e = self.attached[index]
                    .catalog
                    .entry(id)?
                    .ok_or(NsError::NotFound)?;
                let attr = Attr {
                    ino,
                    kind: e.kind,
                    size: e.size,
                    mtime: e.mtime,
                    atime: e.mtime,
                    ctime: e.mtime,
                    perm: e.perm,
                    // Catalog directories do not count their subdirectories.
                    nlink: if e.kind == Kind::Dir { 2 } else { 1 },
                    special: None,
                };
                Ok(self.stat_of(attr, e.volatile))
            }
        }
    }

    /// The child `name` of directory `parent`.
    pub fn lookup(&self, parent: Ino, name: &[u8]) -> Result<Stat, FsError> {
        // Catalogs attached at names in the root come first.
        let named = (parent == ROOT_INO)
            .then(|| {
                let at = |a: &Attached| !a.name.is_empty() && a.name.as_bytes() == name;
                self.attached.iter().position(at)
            })
            .flatten();
        let found = match (named, self.node(parent)) {
            (Some(index), _) => self.catalog_ino(index, 0),
            (None, Node::Ns(ino)) => self.ns.lookup(ino, name)?,
            (None, Node::Catalog(index, dir)) => {
                let catalog = &self.attached[index].catalog;
                match catalog.entry(dir)?.map(|e| e.kind) {
                    Some(Kind::Dir) => {}
                    Some(Kind::File) => return Err(NsError::NotADirectory.into()),
                    None => return Err(NsError::NotFound.into()),
                }
                let id = catalog.lookup(dir, name)?.ok_or(NsError::NotFound)?;
                self.catalog_ino(index, id)
            }
        };
        self.getattr(found)
    }

    /// Feeds the entries of directory `ino` from cookie `offset` to `add`,
    /// with the cookie of the next entry, until `add` reports a full buffer.
    pub fn readdir(
        &self,
        ino: Ino,
        offset: u64,
        mut add: impl FnMut(&str, &Stat, u64) -> bool,
    ) -> Result<(), FsError> {
        let (index, dir) = match self.node(ino) {
            Node::Ns(ino) => {
                return Ok(self.ns.list(ino, offset, |name, attr, cookie| {
                    add(name, &self.stat_of(attr, false), cookie)
                })?)
            }
            Node::Catalog(index, dir) => (index, dir),
        };
        if self.getattr(ino)?.attr.kind != Kind::Dir {
            return Err(NsError::NotADirectory.into());
        }
        let catalog = &self.attached[index].catalog;
        let parent = catalog
            .parent(dir)
            .map_or(ROOT_INO, |p| self.catalog_ino(index, p));
        // Entry i (`.`, `..`, then the children) carries cookie i + 1.
        let mut i = usize::try_from(offset).unwrap_or(usize::MAX);
        loop {
            let (entry, name) = match i {
                0 => (ino, ".".into()),
                1 => (parent, "..".into()),
                i => match catalog.child(dir, i - 2) {
                    Some((id, name)) => (self.catalog_ino(index, id), name),
                    None => return Ok(()),
                },
            };
            i += 1;
            let stat = match self.getattr(entry) {
                Ok(stat) => stat,
                // A damaged entry is still listed (its name is known), as a
                // file: a listing passes only its inode and kind, and its
                // own `stat` and reads fail with EIO.
                Err(FsError::Catalog(_)) => {
                    let attr = Attr {
                        ino: entry,
                        kind: Kind::File,
                        size: 0,
                        mtime: SystemTime::UNIX_EPOCH,
                        atime: SystemTime::UNIX_EPOCH,
                        ctime: SystemTime::UNIX_EPOCH,
                        perm: 0,
                        nlink: 1,
                        special: None,
                    };
                    self.stat_of(attr, true)
                }
                Err(e) => return Err(e),
            };
            if add(&name, &stat, i as u64) {
                return Ok(());
            }
        }
    }

    /// `opendir`: listings need no handle, so a directory opens
    /// [`Opened::Stateless`] (the kernel's no-opendir mode, in which it
    /// also caches listings).
    pub(crate) fn opendir(&self, ino: Ino) -> Result<Opened, FsError> {
        match self.getattr(ino)?.attr.kind {
            Kind::Dir => Ok(Opened::Stateless),
            Kind::File => Err(NsError::NotADirectory.into()),
        }
    }

    /// Opens file `ino`. A read-only mount with passthrough on answers
    /// [`Opened::Backing`] for an item with a whole-file copy and a handle
    /// for every other file; otherwise see `Fs::open_daemon`.
    pub async fn open(&self, ino: Ino, write: bool, truncate: bool) -> Result<Opened, FsError> {
        let passthrough = self.passthrough.as_ref().filter(|p| p.is_on());
        let (Some(passthrough), false) = (passthrough, write) else {
            let opened = self.open_daemon(ino, write, truncate).await?;
            if let (Opened::Handle { .. }, Node::Ns(_)) = (&opened, self.node(ino)) {
                Stats::add(&self.reader.stats().opens_daemon, 1);
            }
            return Ok(opened);
        };
        let stat = self.getattr(ino)?;
        if stat.attr.kind == Kind::Dir {
            return Err(NsError::IsADirectory.into());
        }
        let Node::Ns(ino) = self.node(ino) else {
            return Ok(Opened::Handle {
                fh: CATALOG_FH,
                direct_io: stat.volatile,
                flush: false,
            });
        };
        let item = match self.ns.content(ino)? {
            Content::Base(index) => Some(self.ns.tree().item_data(index).map_err(NsError::from)?),
            Content::Committed(c) => Some(c.item.data()),
            Content::Spool(_) => None,
        };
        Ok(passthrough.open(ino, item.as_ref()).await)
    }

    /// Opens file `ino` for reads served by the daemon. A read-only mount
    /// answers [`Opened::Stateless`] for every file. A read-write mount
    /// opens a handle for every file, control files included: a stateless
    /// answer there would switch the kernel's no-open mode on for the
    /// whole mount, and later opens for writing would never reach the
    /// writer.
    async fn open_daemon(&self, ino: Ino, write: bool, truncate: bool) -> Result<Opened, FsError> {
        let stat = self.getattr(ino)?;
        if stat.attr.kind == Kind::Dir {
            return Err(NsError::IsADirectory.into());
        }
        let Some(writer) = &self.writer else {
            if write {
                return Err(NsError::ReadOnly.into());
            }
            let Some(whole_reads) = &self.whole_reads else {
                return Ok(Opened::Stateless);
            };
            let check = match self.node(ino) {
                Node::Catalog(index, id) => self.attached[index].catalog.whole_read(id)?,
                Node::Ns(_) => None,
            };
            return Ok(Opened::Handle {
                fh: check.map_or(CATALOG_FH, |check| whole_reads.open(ino, check)),
                direct_io: stat.volatile,
                flush: false,
            });
        };
        match self.node(ino) {
            Node::Ns(ino) => {
                let fh = writer.open(ino, write, truncate).await?;
                Ok(Opened::Handle {
                    fh,
                    direct_io: false,
                    flush: write,
                })
            }
            Node::Catalog(..) if write => Err(NsError::ReadOnly.into()),
            Node::Catalog(..) => Ok(Opened::Handle {
                fh: CATALOG_FH,
                direct_io: stat.volatile,
                flush: false,
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

    /// Up to `size` bytes of file `ino` from `offset` (fewer only at its
    /// end), read through handle `fh`: shared from where they are held, or
    /// written into `buf` ([`Reader::read_into`]: grown if short, whatever
    /// it held overwritten, so one buffer serves read after read).
    pub async fn read<'b>(
        &self,
        ino: Ino,
        fh: u64,
        offset: u64,
        size: u32,
        buf: &'b mut Vec<u8>,
    ) -> Result<ReadBytes<'b>, FsError> {
        let range = offset..offset.saturating_add(u64::from(size));
        let ino = match self.node(ino) {
            Node::Ns(ino) => ino,
            Node::Catalog(index, id) => {
                let entry = self.getattr(ino)?.attr;
                if entry.kind == Kind::Dir {
                    return Err(NsError::IsADirectory.into());
                }
                let range = range.start.min(entry.size)..range.end.min(entry.size);
                let catalog = &self.attached[index].catalog;
                let extents = catalog
                    .extents(id, range.clone())?
                    .ok_or(NsError::NotFound)?;
                self.reader.follow(ino, range, entry.size, |ahead| {
                    catalog.extents(id, ahead).ok().flatten()
                });
                let bytes = self.reader.read_into(extents, buf).await?;
                if let Some(whole_reads) = &self.whole_reads {
                    whole_reads
                        .read(ino, fh, offset.min(entry.size), &bytes)
                        .map_err(|e| {
                            warn!("{e}");
                            FsError::from(e)
                        })?;
                }
                return Ok(bytes);
            }
        };
        let mut attempt = 0;
        loop {
            let item = match self.ns.content(ino)? {
                Content::Base(index) => self.ns.tree().item_data(index).map_err(NsError::from)?,
                Content::Committed(c) => c.item.data(),
                Content::Spool(spool) => match self.writer()?.read_spool(&spool, offset, size) {
                    Ok(bytes) => return Ok(ReadBytes::Shared(bytes.into())),
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
            let extents = Extents::of_item(&item, range.clone());
            return match self.reader.read_into(extents, buf).await {
                Ok(bytes) => {
                    if let Some(passthrough) = &self.passthrough {
                        passthrough.served(&item, offset, &bytes).await;
                    }
                    Ok(bytes)
                }
                Err(e) => {
                    warn!("read of inode {ino} at {offset}: {e}");
                    Err(e.into())
                }
            };
        }
    }

    /// Writes `data` at `offset` through handle `fh`; returns the bytes
    /// written. Run it to its end: dropped while pending, it may leave an
    /// unused copy in the spool ([`Fs::try_write`] needs no waiting).
    pub async fn write(&self, fh: u64, offset: u64, data: &[u8]) -> Result<u32, FsError> {
        let writer = self.writer()?;
        written(writer.write(fh, offset, data).await, data)
    }

    /// [`Fs::write`] done at once if it needs no waiting (most writes);
    /// `None`: nothing was done, call [`Fs::write`].
    pub fn try_write(&self, fh: u64, offset: u64, data: &[u8]) -> Option<Result<u32, FsError>> {
        let writer = match self.writer() {
            Ok(writer) => writer,
            Err(e) => return Some(Err(e)),
        };
        Some(written(writer.try_write(fh, offset, data)?, data))
    }

    /// `close(2)` of a descriptor of handle `fh` (FLUSH): what was written
    /// through it is journaled before `close` returns, so a crash right
    /// after keeps it. Read-only mounts answer `Unsupported` and the
    /// kernel stops asking.
    pub fn flush(&self, fh: u64) -> Result<(), FsError> {
        let writer = self.writer.as_ref().ok_or(FsError::Unsupported)?;
        if fh != CATALOG_FH {
            writer.closed(fh);
        }
        Ok(())
    }

    /// The last close of handle `fh`.
    pub fn release(&self, fh: u64) {
        if let (Some(writer), false) = (&self.writer, fh == CATALOG_FH) {
            writer.release(fh);
        }
        if let Some(passthrough) = &self.passthrough {
            passthrough.release(fh);
        }
        if let Some(whole_reads) = &self.whole_reads {
            whole_reads.release(fh);
        }
    }

    /// Returns once file `ino` as it is now, and everything else written
    /// so far, is committed (`None`: everything, for `fsyncdir`).
    pub async fn fsync(&self, ino: Option<Ino>) -> Result<(), FsError> {
        let Some(writer) = &self.writer else {
            return Ok(()); // nothing is ever pending
        };
        let synced = match ino.map(|ino| self.node(ino)) {
            Some(Node::Ns(ino)) => writer.sync_file(ino).await,
            Some(Node::Catalog(..)) => Ok(()),
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
        let ino = self.changeable(ino)?;
        let writer = self.writer()?;
        if let Some(size) = set.size {
            writer.set_size(ino, fh, size).await?;
        }
        if set.perm.is_some() || set.mtime.is_some() {
            writer.set_times_and_mode(ino, set.perm, set.mtime)?;
        }
        if let Some(atime) = set.atime {
            self.ns.set_atime(ino, atime)?;
        }
        Ok(self.stat_of(self.ns.attr(ino)?, false))
    }

    /// `symlink`: `name` in `parent`, a symbolic link to `target` (stored
    /// as written, never followed by packfs).
    pub fn symlink(&self, parent: Ino, name: &[u8], target: &[u8]) -> Result<Stat, FsError> {
        if target.is_empty() {
            return Err(NsError::NotFound.into());
        }
        if target.len() as u64 > SYMLINK_MAX {
            return Err(NsError::NameTooLong.into());
        }
        let attr = self.writer_for(&[(parent, name)])?.make_special(
            parent,
            name,
            0o777,
            Special::Symlink,
            target,
        )?;
        Ok(self.stat_of(attr, false))
    }

    /// The target of symbolic link `ino`.
    pub async fn readlink(&self, ino: Ino) -> Result<Vec<u8>, FsError> {
        let attr = self.getattr(ino)?.attr;
        if attr.special != Some(Special::Symlink) {
            return Err(NsError::Invalid("not a symbolic link").into());
        }
        let size = u32::try_from(attr.size.min(SYMLINK_MAX)).unwrap_or(u32::MAX);
        let mut buf = Vec::new();
        // Without a handle: a dataset item has no whole-read check.
        let bytes = self.read(ino, CATALOG_FH, 0, size, &mut buf).await?;
        Ok(bytes.to_vec())
    }

    /// `mknod`: a FIFO, a socket or a device node (its type, mode and
    /// device number kept; a device node's bytes cannot be read through
    /// the mount, which is `nodev`), or an empty regular file.
    pub fn mknod(&self, parent: Ino, name: &[u8], mode: u32, rdev: u64) -> Result<Stat, FsError> {
        let perm = (mode & 0o7777) as u16;
        match Special::of_mode(mode, rdev) {
            Some(special) => {
                let attr = self
                    .writer_for(&[(parent, name)])?
                    .make_special(parent, name, perm, special, b"")?;
                Ok(self.stat_of(attr, false))
            }
            None if matches!(mode & libc::S_IFMT, 0 | libc::S_IFREG) => {
                let (stat, fh) = self.create(parent, name, perm)?;
                let closed = self.flush(fh);
                self.release(fh);
                closed.map(|()| stat)
            }
            None => Err(NsError::Invalid("mknod makes files, FIFOs, sockets and devices").into()),
        }
    }

    pub fn mkdir(&self, parent: Ino, name: &[u8], perm: u16) -> Result<Stat, FsError> {
        let attr = self
            .writer_for(&[(parent, name)])?
            .mkdir(parent, name, perm)?;
        Ok(self.stat_of(attr, false))
    }

    /// `link`: file `ino` gets the name `name` in `parent` too. Both names
    /// are one file while mounted; each is committed as an item of its own
    /// (see docs/SEMANTICS.md).
    pub fn link(&self, ino: Ino, parent: Ino, name: &[u8]) -> Result<Stat, FsError> {
        let ino = self.changeable(ino)?;
        let attr = self
            .writer_for(&[(parent, name)])?
            .link(ino, parent, name)?;
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
    pub(crate) fn getxattr(&self) -> Result<Vec<u8>, FsError> {
        Err(FsError::Unsupported)
    }

    pub(crate) fn statfs(&self) -> FsStats {
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
        // After the last commit: what is left in the spool (a commit that
        // failed) keeps the lease until it lapses, for the next mount. A
        // store that does not answer does not hold the unmount: the lease
        // then lapses too.
        let left = self.writer.as_ref().is_some_and(|w| w.has_changes());
        if let Some((holder, _)) = self.lease.as_ref().filter(|_| !left) {
            let why = match tokio::time::timeout(LEASE_RELEASE_TIME, holder.release()).await {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(e.to_string()),
                Err(_) => Some(format!("no answer within {LEASE_RELEASE_TIME:?}")),
            };
            if let Some(why) = why {
                let lapse = packfs_core::dataset::LEASE_TTL;
                let left = format!("releasing this mount's lease: {why}; it lapses in {lapse:?}");
                // A read-only mount on read-only credentials never had one.
                match self.writer.is_some() {
                    true => warn!("{left}"),
                    false => tracing::info!("{left}"),
                }
            }
        }
        if let Some(passthrough) = &self.passthrough {
            passthrough.finish().await;
        }
    }
}

/// Logs that the lease on `manifest` could not be written: a warning for a
/// mount that writes, else only with `-v` (read-only credentials are
/// common and cost only the lease's protection).
pub(crate) fn lease_failed(writes: bool, manifest: ObjectId, error: &dyn std::fmt::Display) {
    let why = format!(
        "cannot write this mount's lease on manifest {} ({error}): `packfs expire` may let gc \
         delete it while mounted",
        manifest.short()
    );
    match writes {
        true => warn!("{why}"),
        false => tracing::info!("{why}"),
    }
}

/// The answer to a write of `data`: its length, or the error (a full spool
/// also logged, as the writer may not show it).
fn written(result: Result<(), WriteError>, data: &[u8]) -> Result<u32, FsError> {
    match result {
        Ok(()) => Ok(data.len() as u32),
        Err(e) => {
            if matches!(e, WriteError::SpoolFull { .. }) {
                warn!("{e}");
            }
            Err(e.into())
        }
    }
}
