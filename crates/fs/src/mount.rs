//! `packfs mount`: load a snapshot, mount it, serve until unmounted.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use fuser::{Config, MountOption, SessionACL, SessionUnmounter};
use packfs_core::array::Array;
use packfs_core::bundle::Bundle;
use packfs_core::cache::whole::{WholeCache, WholeError, WholeOptions};
use packfs_core::cache::{CacheOptions, DiskCache, DiskCacheError};
use packfs_core::catalog::array::ArrayCatalog;
use packfs_core::catalog::bundle::BundleCatalog;
use packfs_core::catalog::view::{self, NamedView, ViewSpec};
use packfs_core::catalog::Catalog;
use packfs_core::dataset::{Dataset, DatasetError, Revision, LEASE_RENEWAL};
use packfs_core::location::LocationKind;
use packfs_core::reader::Reader;
use packfs_core::store::{Store, StoreConfig};
use packfs_core::tree::{Tree, TreeError};
use packfs_format::ObjectId;
use sd_notify::NotifyState;
use thiserror::Error;
use tokio::signal::unix::{signal, SignalKind};
use tracing::{debug, info, warn};

use crate::exporter::{self, Live, MetricsError};
use crate::fs::passthrough::Passthrough;
use crate::fs::{lease_failed, Fs, Owner};
use crate::fuse::PackFs;
use crate::mountpoint::{self, Refusal};
use crate::namespace::{Modes, Namespace};
use crate::utab::UtabEntry;
use crate::write::{default_dir as default_spool_dir, recover, WriteError, WriteOptions, Writer};

/// Threads reading kernel requests on a read-write mount by default. One:
/// a serial writer (`cp -r`, `tar -x`) waits for every request, and each
/// hand-over to another idle thread is a wake-up on another core (1.5×
/// faster `cp -r` with one thread than with four on 2 cores,
/// docs/PERFORMANCE.md), while reads that wait for the store are answered
/// from the runtime and do not hold the thread.
pub const READ_WRITE_THREADS: usize = 1;

/// Threads reading kernel requests on a read-only mount by default: its
/// readers are parallel loaders.
pub(crate) const READ_ONLY_THREADS: usize = 4;

packfs_core::options! {
/// Settings of a mount.
#[derive(Clone, Debug)]
pub struct MountOptions {
    /// How to reach the store (kept in memory across the daemon's fork).
    pub store: StoreConfig,
    /// What to mount: a ref (read-write unless `read_only`), or any other
    /// [`Revision`], which names one Manifest and is mounted read-only.
    pub revision: Revision,
    /// Threads reading kernel requests; `None`: [`READ_WRITE_THREADS`] on
    /// a read-write mount, `READ_ONLY_THREADS` on a read-only one.
    pub threads: Option<usize>,
    /// Let other users access the mount (kernel permission checks on).
    pub allow_other: bool,
    /// Owner of every file and directory; `None`: the mounting user.
    pub uid: Option<u32>,
    /// Group of every file and directory; `None`: the mounting user's.
    pub gid: Option<u32>,
    /// Permission bits every file shows; `None`: the mode its writer
    /// recorded, else 0644 (0444 read-only).
    pub file_mode: Option<u16>,
    /// Permission bits every directory shows; `None`: the recorded mode,
    /// else 0755 (0555 read-only).
    pub dir_mode: Option<u16>,
    /// Block cache and read-ahead.
    pub cache: CacheOptions,
    /// Persistent block cache directory, kept across mounts.
    pub cache_dir: Option<PathBuf>,
    /// Most bytes kept in `cache_dir`.
    pub cache_dir_bytes: u64,
    /// Most bytes of a paged dataset's index (name pages) held in memory.
    pub index_cache_bytes: u64,
    /// On a read-only mount with `cache_dir`: keep whole-file copies of
    /// items read whole and serve later opens of them by kernel
    /// passthrough.
    pub passthrough: bool,
    /// Bounds of the whole-file copies.
    pub whole: WholeOptions,
    /// Refuse every change (EROFS) and serve reads in the kernel's
    /// no-open mode (fewer round trips per file).
    pub read_only: bool,
    /// Mount on a directory that holds entries (hidden while mounted).
    pub allow_non_empty: bool,
    /// Spool and flush settings of a read-write mount.
    pub write: WriteOptions,
    /// A TileDB array: show it as a read at this time (milliseconds since
    /// the epoch); `None`: the latest.
    pub array_at: Option<u64>,
    /// A TileDB array: file name extension per var-sized attribute.
    pub array_extensions: std::collections::HashMap<String, String>,
    /// Views of the dataset: at most one the mount's root (which makes
    /// the mount read-only), others at hidden names in the root.
    pub views: Vec<NamedView>,
    /// Serve Prometheus metrics at `http://ADDR/metrics`.
    pub metrics_addr: Option<std::net::SocketAddr>,
}
}

impl MountOptions {
    /// The view shown as the whole mount, if any.
    fn root_view(&self) -> Option<&ViewSpec> {
        self.views
            .iter()
            .find(|v| v.name.is_none())
            .map(|v| &v.spec)
    }

    /// Whether the mount refuses every change.
    fn is_read_only(&self) -> bool {
        self.read_only || self.root_view().is_some()
    }
}

impl Default for MountOptions {
    fn default() -> Self {
        MountOptions {
            store: StoreConfig::default(),
            revision: Revision::default(),
            threads: None,
            allow_other: false,
            uid: None,
            gid: None,
            file_mode: None,
            dir_mode: None,
            cache: CacheOptions::default(),
            cache_dir: None,
            cache_dir_bytes: 10 << 30,
            index_cache_bytes: packfs_core::tree::DEFAULT_INDEX_BYTES,
            passthrough: true,
            whole: WholeOptions::default(),
            read_only: false,
            allow_non_empty: false,
            write: WriteOptions::default(),
            array_at: None,
            array_extensions: Default::default(),
            views: Vec::new(),
            metrics_addr: None,
        }
    }
}

/// Errors of mounting.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum MountError {
    /// The kernel would not mount on `path`.
    #[error("mountpoint {path}: {detail}")]
    Mountpoint { path: PathBuf, detail: String },
    /// The mountpoint cannot take the mount: checked before anything is
    /// mounted or locked.
    #[error("mountpoint {}: {}", path.display(), refusal.explain(path))]
    #[non_exhaustive]
    Refused { path: PathBuf, refusal: Refusal },
    #[error("{0}")]
    Dataset(#[from] DatasetError),
    #[error("dataset tree: {0}")]
    Tree(#[from] TreeError),
    #[error("{0}")]
    DiskCache(#[from] DiskCacheError),
    #[error("{0}")]
    Whole(#[from] WholeError),
    #[error("{0}")]
    Write(#[from] WriteError),
    #[error("{0}")]
    Bundle(#[from] packfs_core::bundle::BundleError),
    #[error("{0}")]
    Array(#[from] packfs_core::array::ArrayError),
    /// A view of [`MountOptions::views`] that cannot be shown.
    #[error("loader view: {0}")]
    View(String),
    /// The metrics endpoint cannot listen.
    #[error("{0}")]
    Metrics(#[from] MetricsError),
    #[error("{op}: {source}")]
    Io {
        op: &'static str,
        #[source]
        source: std::io::Error,
    },
}

/// Mounts the dataset at `location` on `mountpoint` and serves it on this
/// thread until it is unmounted (`umount`, `fusermount3 -u`, SIGINT or
/// SIGTERM). `on_ready` runs once the mount is live (a caller that
/// daemonized lets its parent return then).
pub fn mount(
    location: &str,
    mountpoint: &Path,
    options: &MountOptions,
    on_ready: impl FnOnce(),
) -> Result<(), MountError> {
    let mountpoint = check_mountpoint(mountpoint, options)?;
    serve(&absolute_location(location), &mountpoint, options, on_ready)
}

/// Serves until unmounted; `on_ready` runs once the mount is live.
fn serve(
    location: &str,
    mountpoint: &Path,
    options: &MountOptions,
    on_ready: impl FnOnce(),
) -> Result<(), MountError> {
    let runtime = runtime()?;
    let dataset = Dataset::open_with(location, false, &options.store)?;
    let (mut sigint, mut sigterm) = runtime.block_on(async {
        let io = |source| MountError::Io {
            op: "signals",
            source,
        };
        Ok::<_, MountError>((
            signal(SignalKind::interrupt()).map_err(io)?,
            signal(SignalKind::terminate()).map_err(io)?,
        ))
    })?;
    let mut session = open_session(&dataset, mountpoint, options, &runtime)?;
    let utab = UtabEntry::add(&fsname(&dataset), mountpoint).unwrap_or_else(|e| {
        warn!("cannot tell umount(8) to commit before unmounting (/run/mount/utab: {e})");
        None
    });
    on_ready();
    info!("mounted {location} at {}", mountpoint.display());

    // systemd (Type=notify): ready once the mount answers a request, which
    // the session loop below starts serving. statfs, not stat: it caches
    // nothing in the kernel, so a daemon killed later leaves a mount that
    // every caller sees as dead at once.
    let target = mountpoint.to_path_buf();
    let status = format!("serving {location} at {}", mountpoint.display());
    runtime.spawn_blocking(move || match mountpoint::statfs(&target) {
        Ok(_) => notify_systemd(&[NotifyState::Ready, NotifyState::Status(&status)]),
        Err(e) => warn!("the mount at {} does not answer: {e}", target.display()),
    });

    let mut unmounter = session.unmount_callable();
    let target = mountpoint.to_path_buf();
    runtime.spawn(async move {
        tokio::select! {
            _ = sigint.recv() => {}
            _ = sigterm.recv() => {}
        }
        notify_systemd(&[NotifyState::Stopping, NotifyState::Status("unmounting")]);
        info!("signal received: unmounting {}", target.display());
        if let Err(e) = unmounter.unmount() {
            warn!("unmount {}: {e}; detaching lazily", target.display());
            if let Err(e) = mountpoint::unmount(&target, true) {
                warn!("unmount {}: {e}", target.display());
            }
        }
    });
    let result = session.run();
    if let Some(Err(e)) = utab.map(UtabEntry::remove) {
        warn!("/run/mount/utab: {e}");
    }
    notify_systemd(&[NotifyState::Stopping, NotifyState::Status("unmounted")]);
    info!("unmounted {}", mountpoint.display());
    result.map_err(|source| MountError::Io {
        op: "serve FUSE requests",
        source,
    })
}

/// Tells systemd `states` if it started this process as a `Type=notify`
/// service (`NOTIFY_SOCKET` set; otherwise nothing happens). With
/// `MAINPID`, so a daemonized mount is the service's main process.
fn notify_systemd(states: &[NotifyState]) {
    let pid = std::process::id();
    let states: Vec<NotifyState> = [NotifyState::MainPid(pid)]
        .into_iter()
        .chain(states.iter().cloned())
        .collect();
    if let Err(e) = sd_notify::notify(false, &states) {
        warn!("telling systemd the mount's state: {e}");
    }
}

/// A mount served by threads of this process (see [`spawn`]).
pub struct MountHandle {
    unmounter: SessionUnmounter,
    session: Option<std::thread::JoinHandle<std::io::Result<()>>>,
    /// Runs the reads; dropped only after the session has ended.
    runtime: Option<tokio::runtime::Runtime>,
}

/// Mounts `dataset` on `mountpoint` in this process and returns once the
/// mount is live. For embedding and benchmarks; any store works, including
/// wrapped ones. Unmounts when the handle is dropped.
pub fn spawn(
    dataset: Dataset,
    mountpoint: &Path,
    options: &MountOptions,
) -> Result<MountHandle, MountError> {
    let mountpoint = check_mountpoint(mountpoint, options)?;
    let runtime = runtime()?;
    let mut session = open_session(&dataset, &mountpoint, options, &runtime)?;
    let unmounter = session.unmount_callable();
    let thread = std::thread::Builder::new()
        .name("packfs-session".into())
        .spawn(move || session.run())
        .map_err(|source| MountError::Io {
            op: "spawn session",
            source,
        })?;
    Ok(MountHandle {
        unmounter,
        session: Some(thread),
        runtime: Some(runtime),
    })
}

impl MountHandle {
    /// Unmounts and waits for the session to end.
    pub fn unmount(mut self) -> Result<(), MountError> {
        self.finish()
    }

    fn finish(&mut self) -> Result<(), MountError> {
        let Some(thread) = self.session.take() else {
            return Ok(());
        };
        let io = |op| move |source| MountError::Io { op, source };
        self.unmounter.unmount().map_err(io("unmount"))?;
        let result = thread.join().expect("FUSE session thread panicked");
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
        result.map_err(io("serve FUSE requests"))
    }
}

impl Drop for MountHandle {
    fn drop(&mut self) {
        if let Err(e) = self.finish() {
            warn!("{e}");
        }
    }
}

fn runtime() -> Result<tokio::runtime::Runtime, MountError> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|source| MountError::Io {
            op: "start runtime",
            source,
        })
}

/// Loads the snapshot, builds the tree and mounts it.
fn open_session(
    dataset: &Dataset,
    mountpoint: &Path,
    options: &MountOptions,
    runtime: &tokio::runtime::Runtime,
) -> Result<fuser::Session<PackFs>, MountError> {
    let store = dataset.store();
    let kind = runtime.block_on(LocationKind::of(store))?;
    if kind != LocationKind::Dataset && !options.views.is_empty() {
        return Err(MountError::View(format!(
            "{} is a {}; views show the items of a packfs dataset",
            store.location(),
            kind.describe()
        )));
    }
    let fs = match kind {
        LocationKind::Bundle => open_bundle_fs(store, options, runtime.handle())?,
        LocationKind::Array => open_array_fs(store, options, runtime.handle())?,
        _ => {
            let spool_dir = options.write.spool_dir.clone().unwrap_or_else(|| {
                default_spool_dir(store.location(), &options.revision.to_string(), mountpoint)
            });
            open_fs(dataset, &spool_dir, options, runtime.handle())?
        }
    };
    let read_only = !fs.is_writable();
    if let Some(addr) = options.metrics_addr {
        runtime
            .block_on(exporter::serve(addr, Live::of(&fs)))
            .map_err(MountError::Metrics)?;
    }
    let fs = PackFs::new(fs, runtime.handle().clone());
    let mut config = Config::default();
    config.mount_options = vec![
        MountOption::FSName(fsname(dataset)),
        // As a kernel option, not fuser's `Subtype`: fuser's own mount(2)
        // (as root) drops that one, and the mount shows as plain `fuse`,
        // which umount(8) and `df -T` cannot tell from other FUSE mounts.
        MountOption::CUSTOM("subtype=packfs".into()),
        MountOption::NoDev,
        MountOption::NoSuid,
        // Reads never change a file's atime (only `utimensat` does): say so.
        MountOption::NoAtime,
    ];
    if read_only {
        config.mount_options.push(MountOption::RO);
    }
    if options.allow_other {
        config.mount_options.push(MountOption::DefaultPermissions);
        config.acl = SessionACL::All;
    }
    let threads = options.threads.unwrap_or(match read_only {
        true => READ_ONLY_THREADS,
        false => READ_WRITE_THREADS,
    });
    config.n_threads = Some(threads.max(1));
    config.clone_fd = true;
    let session =
        fuser::Session::new(fs, mountpoint, &config).map_err(|source| MountError::Mountpoint {
            path: mountpoint.to_path_buf(),
            detail: format!("cannot mount: {source}"),
        })?;
    raise_readahead(mountpoint);
    Ok(session)
}

/// The source a mount of `dataset` shows in the table of mounts.
fn fsname(dataset: &Dataset) -> String {
    format!("packfs:{}", dataset.store().location()).replace([',', ' ', '\t', '\n'], "_")
}

/// The filesystem core of a mount of `dataset`, without the kernel: the
/// snapshot loaded, what a mount that died left in the spool at
/// `spool_dir` committed first (read-write mounts), and the flusher
/// running on `runtime`. [`spawn`] and `packfs mount` serve it through
/// FUSE; tests drive it directly.
pub fn open_fs(
    dataset: &Dataset,
    spool_dir: &Path,
    options: &MountOptions,
    runtime: &tokio::runtime::Handle,
) -> Result<Arc<Fs>, MountError> {
    let disk = match &options.cache_dir {
        Some(dir) => Some(DiskCache::open(dir, options.cache_dir_bytes)?),
        None => None,
    };
    let reader = Reader::new(dataset.store().clone(), options.cache.clone(), disk);
    // The tree, and the ref commits go to (`None`: a read-only mount).
    let index_bytes = options.index_cache_bytes;
    let (tree, commit_to) = runtime.block_on(async {
        let may_write = !options.is_read_only() && options.revision.may_be_ref();
        if may_write {
            // A writer must be able to move the ref safely before it
            // accepts anything; probing first also names a store that
            // cannot be used (no bucket, no credentials) as such.
            dataset
                .store()
                .ensure_atomic_refs()
                .await
                .map_err(DatasetError::from)?;
        }
        let resolved = dataset.resolve_revision(&options.revision).await?;
        // Only a ref takes commits: any other revision names one Manifest
        // for good, so its mount is read-only.
        let ref_name = match (may_write, resolved.ref_name.clone()) {
            (true, Some(name)) => name,
            _ => {
                let referrer = resolved.describe();
                let tree = Tree::open(dataset, resolved.id, &referrer, index_bytes).await?;
                return Ok::<_, MountError>((tree, None));
            }
        };
        // What a mount that died left in this spool is committed first,
        // so the ref is read again after it.
        recover(
            dataset,
            &ref_name,
            reader.clone(),
            spool_dir,
            &options.write,
        )
        .await?;
        release_left_lease(dataset, spool_dir).await;
        let id = dataset.resolve(&ref_name).await?;
        let referrer = format!("ref {ref_name:?}");
        let tree = Tree::open(dataset, id, &referrer, index_bytes).await?;
        Ok((tree, Some(ref_name)))
    })?;
    let writable = commit_to.is_some();
    info!(
        "loaded manifest {} ({} nodes, {} bytes)",
        tree.manifest_id(),
        tree.node_count(),
        tree.total_bytes()
    );
    let owner = owner(options);
    let tree = Arc::new(tree);
    let views = open_views(&tree, options)?;
    if let Some(root) = options.root_view() {
        let served = tree.manifest_id();
        let catalog = view::open(tree, root);
        let fs = Fs::of_catalog(catalog, reader, owner, Some(served));
        let fs = views
            .into_iter()
            .fold(fs, |fs, (name, c)| fs.attach(name, c));
        return Ok(leased(fs, dataset, &served.to_hex(), served, None, runtime));
    }
    let defaults = Modes::default_for(writable);
    let modes = Modes {
        file: options.file_mode.unwrap_or(defaults.file),
        dir: options.dir_mode.unwrap_or(defaults.dir),
        force_file: options.file_mode.is_some(),
        force_dir: options.dir_mode.is_some(),
    };
    let served = tree.manifest_id();
    let reference = commit_to.clone().unwrap_or_else(|| served.to_hex());
    let ns = Arc::new(Namespace::new(tree, writable).with_modes(modes));
    let writer = match commit_to {
        None => None,
        Some(ref_name) => {
            let writer = Writer::new(
                ns.clone(),
                dataset.clone(),
                &ref_name,
                reader.clone(),
                spool_dir,
                options.write.clone(),
            )?;
            runtime.spawn(writer.clone().run_flusher());
            Some(writer)
        }
    };
    let fs = views.into_iter().fold(
        Fs::new(ns, writer, reader.clone(), owner),
        |fs, (name, c)| fs.attach(name, c),
    );
    let fs = match (&options.cache_dir, options.passthrough && !writable) {
        (Some(dir), true) => {
            let whole = WholeCache::open(dir, options.whole.clone(), reader.stats().clone())?;
            fs.with_passthrough(Passthrough::new(whole, reader.stats().clone()))
        }
        _ => fs,
    };
    let spool = writable.then_some(spool_dir);
    Ok(leased(fs, dataset, &reference, served, spool, runtime))
}

/// The file of a spool naming the lease of the mount writing into it.
const LEASE_FILE: &str = "lease";

/// Deletes the lease a mount that died left, named in the spool it wrote
/// into, once what it left there is committed: its Manifest need not be
/// kept any more, where the lease would have kept it for days.
async fn release_left_lease(dataset: &Dataset, spool_dir: &Path) {
    let Ok(name) = std::fs::read_to_string(spool_dir.join(LEASE_FILE)) else {
        return;
    };
    let path = dataset.store().layout().lease(name.trim());
    if let Err(e) = dataset.store().delete(&path).await {
        debug!("deleting the lease {path} of an earlier mount: {e}");
    }
}

/// `fs` holding a lease on the Manifest it serves, as `reference` (the
/// ref a writing mount commits to, else the Manifest's id; `spool` is a
/// writing mount's), renewed every
/// [`LEASE_RENEWAL`] while `fs` lives: `packfs expire` and gc keep that
/// Manifest meanwhile. A store that refuses the lease (read-only
/// credentials) only costs that protection, logged; one that does not
/// answer delays the mount by [`LEASE_FIRST_PUT`] at most.
fn leased(
    fs: Fs,
    dataset: &Dataset,
    reference: &str,
    served: ObjectId,
    spool: Option<&Path>,
    runtime: &tokio::runtime::Handle,
) -> Arc<Fs> {
    let (name, writes) = (lease_name(), spool.is_some());
    // A writing mount names its lease in its spool, for the mount that
    // recovers the spool if this one dies.
    if let Some(Err(e)) = spool.map(|dir| std::fs::write(dir.join(LEASE_FILE), &name)) {
        warn!("recording this mount's lease in its spool: {e}");
    }
    let holder = dataset.lease(&name, reference, writes);
    // The time-out is made inside the runtime: it needs its timer.
    let first = runtime
        .block_on(async { tokio::time::timeout(LEASE_FIRST_PUT, holder.renew(served)).await });
    match first {
        Ok(Ok(())) => {}
        Ok(Err(e)) => lease_failed(writes, served, &e),
        Err(_) => lease_failed(writes, served, &"the store did not answer in time"),
    }
    let fs = Arc::new(fs.with_lease(holder, served));
    let mounted = Arc::downgrade(&fs);
    runtime.spawn(async move {
        let start = tokio::time::Instant::now() + LEASE_RENEWAL;
        let mut renewal = tokio::time::interval_at(start, LEASE_RENEWAL);
        loop {
            renewal.tick().await;
            let Some(fs) = mounted.upgrade() else { break };
            fs.renew_lease().await;
        }
    });
    fs
}

/// How long a mount waits for its first lease to be stored.
const LEASE_FIRST_PUT: std::time::Duration = std::time::Duration::from_secs(5);

/// A name for this process's lease, unique among mounts: host, process and
/// the time it was taken.
fn lease_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let host: String = host
        .trim()
        .chars()
        .map(
            |c| match c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                true => c,
                false => '_',
            },
        )
        .collect();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    let pid = std::process::id();
    let unique = ObjectId::of(format!("{host} {pid} {now}").as_bytes()).short();
    format!(
        "{}-{pid}-{unique}",
        if host.is_empty() { "host" } else { &host }
    )
}

/// A named view's catalog and the name it is attached at.
type AttachedView<'a> = (&'a str, Arc<dyn Catalog>);

/// The catalogs of the named views in `options` (`.NAME=SPEC`), with
/// their names; a name the dataset's root already has is refused.
fn open_views<'a>(
    tree: &Arc<Tree>,
    options: &'a MountOptions,
) -> Result<Vec<AttachedView<'a>>, MountError> {
    if options.views.iter().filter(|v| v.name.is_none()).count() > 1 {
        return Err(MountError::View(
            "only one view can be the whole mount; give the others a name (.NAME=SPEC)".into(),
        ));
    }
    let mut out: Vec<(&str, _)> = Vec::new();
    for named in &options.views {
        let Some(name) = named.name.as_deref() else {
            continue;
        };
        if tree.lookup(Tree::ROOT, name.as_bytes())?.is_some()
            || out.iter().any(|(n, _)| *n == name)
        {
            return Err(MountError::View(format!(
                "{name} is already a name in the mount's root; choose another"
            )));
        }
        let catalog = view::open(tree.clone(), &named.spec);
        info!("view {} at /{name}", named.spec);
        out.push((name, catalog));
    }
    Ok(out)
}

/// The filesystem core of a mount of the DataBundle at `store`'s
/// location: read-only, its tree queried from the index on demand. A
/// remote bundle's index is downloaded to [`bundle_index_dir`].
pub(crate) fn open_bundle_fs(
    store: &Store,
    options: &MountOptions,
    runtime: &tokio::runtime::Handle,
) -> Result<Arc<Fs>, MountError> {
    let index_dir = bundle_index_dir(options.cache_dir.as_deref());
    let bundle = runtime.block_on(Bundle::open(store, &index_dir))?;
    info!(
        "bundle {}: {} shards, {} compression",
        store.location(),
        bundle.index().config().shard_count,
        bundle.index().compression().name()
    );
    let disk = match &options.cache_dir {
        Some(dir) => Some(DiskCache::open(dir, options.cache_dir_bytes)?),
        None => None,
    };
    let reader = Reader::new(store.clone(), options.cache.clone(), disk);
    let catalog = BundleCatalog::new(Arc::new(bundle), std::time::SystemTime::now());
    let fs = Fs::of_catalog(Arc::new(catalog), reader, owner(options), None);
    Ok(Arc::new(fs.checking_whole_reads()))
}

/// The filesystem core of a mount of the TileDB array at `store`'s
/// location: read-only, as a read at `options.array_at` sees it.
pub(crate) fn open_array_fs(
    store: &Store,
    options: &MountOptions,
    runtime: &tokio::runtime::Handle,
) -> Result<Arc<Fs>, MountError> {
    let array = runtime.block_on(Array::open(store, options.array_at))?;
    info!(
        "TileDB array {}: {} fragments, {} attributes",
        store.location(),
        array.fragments().len(),
        array.schema().attributes.len()
    );
    let disk = match &options.cache_dir {
        Some(dir) => Some(DiskCache::open(dir, options.cache_dir_bytes)?),
        None => None,
    };
    let reader = Reader::new(store.clone(), options.cache.clone(), disk);
    let catalog = ArrayCatalog::new(
        Arc::new(array),
        reader.cache().clone(),
        runtime.clone(),
        &options.array_extensions,
    )?;
    Ok(Arc::new(Fs::of_catalog(
        Arc::new(catalog),
        reader,
        owner(options),
        None,
    )))
}

/// Where copies of remote bundles' indexes are kept: `<cache-dir>/bundle-index`,
/// or without a cache directory `bundle-index` in packfs's state directory.
pub fn bundle_index_dir(cache_dir: Option<&Path>) -> PathBuf {
    match cache_dir {
        Some(dir) => dir.join("bundle-index"),
        None => crate::write::state_dir().join("bundle-index"),
    }
}

/// Who owns every node: the options' `uid`/`gid`, else the mounting user.
fn owner(options: &MountOptions) -> Owner {
    // SAFETY: getuid/getgid cannot fail.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    Owner {
        uid: options.uid.unwrap_or(uid),
        gid: options.gid.unwrap_or(gid),
    }
}

/// Kernel read-ahead for the mount, in KiB. The kernel's default of 128 KiB
/// splits sequential reads into small requests; a larger window lets one
/// reader keep several 1 MiB requests in flight.
const READ_AHEAD_KB: u32 = 4096;

/// Raises the mount's read-ahead (`/sys/class/bdi/<dev>/read_ahead_kb`).
/// Needs root; elsewhere the kernel default stays, which only costs speed.
/// The device number comes from mountinfo: stat'ing the mountpoint here
/// would wait on this very filesystem, which is not serving yet.
fn raise_readahead(mountpoint: &Path) {
    let Some(mount) = mountpoint::mounts()
        .into_iter()
        .rev()
        .find(|m| m.mount_point == mountpoint)
    else {
        return;
    };
    let knob = format!("/sys/class/bdi/{}/read_ahead_kb", mount.device);
    match std::fs::write(&knob, READ_AHEAD_KB.to_string()) {
        Ok(()) => debug!("{knob} = {READ_AHEAD_KB}"),
        Err(e) => debug!("cannot raise read-ahead ({knob}): {e}"),
    }
}

/// The mountpoint's canonical path, if it can take a mount now (see
/// `mountpoint::check`).
pub fn check_mountpoint(path: &Path, options: &MountOptions) -> Result<PathBuf, MountError> {
    mountpoint::check(path, options.allow_non_empty)
        .map_err(|(path, refusal)| MountError::Refused { path, refusal })
}

/// A local dataset path made absolute: it keys the default spool
/// directory, and a daemon leaves the working directory.
pub fn absolute_location(location: &str) -> String {
    if location.contains("://") {
        return location.to_string();
    }
    std::path::absolute(location).map_or_else(|_| location.to_string(), |p| p.display().to_string())
}
