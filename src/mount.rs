//! `packfs mount`: load a snapshot, mount it, serve until unmounted.

use std::path::{Path, PathBuf};

use fuser::{Config, MountOption, SessionACL};
use thiserror::Error;
use tokio::signal::unix::{signal, SignalKind};
use tracing::{info, warn};

use crate::daemon::{self, Readiness};
use crate::dataset::{Dataset, DatasetError};
use crate::fuse::PackFs;
use crate::reader::ItemReader;
use crate::tree::{Tree, TreeError};

/// Settings of a mount.
#[derive(Clone, Debug)]
pub struct MountOptions {
    pub ref_name: String,
    /// Stay attached to the terminal instead of daemonizing.
    pub foreground: bool,
    /// Threads reading kernel requests.
    pub threads: usize,
    /// Let other users access the mount (kernel permission checks on).
    pub allow_other: bool,
    /// Where a daemonized mount writes its log.
    pub log_file: Option<PathBuf>,
}

impl Default for MountOptions {
    fn default() -> Self {
        MountOptions {
            ref_name: "main".into(),
            foreground: false,
            threads: 4,
            allow_other: false,
            log_file: None,
        }
    }
}

/// Errors of mounting.
#[derive(Debug, Error)]
pub enum MountError {
    #[error("mountpoint {path}: {detail}")]
    Mountpoint { path: PathBuf, detail: String },
    #[error(transparent)]
    Dataset(#[from] DatasetError),
    #[error("dataset tree: {0}")]
    Tree(#[from] TreeError),
    #[error("{op}: {source}")]
    Io {
        op: &'static str,
        #[source]
        source: std::io::Error,
    },
}

/// Mounts the dataset at `location` on `mountpoint` and serves it until it is
/// unmounted (`umount`, `fusermount3 -u`, SIGINT or SIGTERM). Unless
/// `options.foreground`, the calling process returns (exits) as soon as the
/// mount is ready and a detached daemon serves it.
///
/// Call before any other thread is started: daemonizing forks.
pub fn mount(location: &str, mountpoint: &Path, options: &MountOptions) -> Result<(), MountError> {
    let mountpoint = check_mountpoint(mountpoint)?;
    let location = absolute_location(location);
    let readiness = if options.foreground {
        None
    } else {
        Some(daemon::detach().map_err(|source| MountError::Io {
            op: "daemonize",
            source,
        })?)
    };
    match serve(&location, &mountpoint, options, readiness) {
        Ok(()) => Ok(()),
        Err((err, Some(readiness))) => {
            readiness.fail(&err.to_string());
            std::process::exit(1);
        }
        Err((err, None)) => Err(err),
    }
}

type ServeError = (MountError, Option<Readiness>);

fn serve(
    location: &str,
    mountpoint: &Path,
    options: &MountOptions,
    readiness: Option<Readiness>,
) -> Result<(), ServeError> {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(source) => {
            return Err((
                MountError::Io {
                    op: "start runtime",
                    source,
                },
                readiness,
            ))
        }
    };
    let loaded = runtime.block_on(async {
        let dataset = Dataset::open(location, false)?;
        let snapshot = dataset.snapshot(&options.ref_name).await?;
        let tree = Tree::build(snapshot)?;
        let signals = (
            signal(SignalKind::interrupt()).map_err(|source| MountError::Io {
                op: "signals",
                source,
            })?,
            signal(SignalKind::terminate()).map_err(|source| MountError::Io {
                op: "signals",
                source,
            })?,
        );
        Ok::<_, MountError>((dataset, tree, signals))
    });
    let (dataset, tree, (mut sigint, mut sigterm)) = match loaded {
        Ok(v) => v,
        Err(e) => return Err((e, readiness)),
    };
    info!(
        "loaded manifest {} ({} nodes, {} bytes)",
        tree.manifest_id(),
        tree.node_count(),
        tree.total_bytes()
    );
    // SAFETY: getuid/getgid cannot fail.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let fs = PackFs::new(
        tree,
        ItemReader::new(dataset.store().clone()),
        runtime.handle().clone(),
        uid,
        gid,
    );
    let mut config = Config::default();
    config.mount_options = vec![
        MountOption::FSName(format!(
            "packfs:{}",
            location.replace([',', ' ', '\t', '\n'], "_")
        )),
        MountOption::Subtype("packfs".into()),
        MountOption::RO,
        MountOption::NoDev,
        MountOption::NoSuid,
    ];
    if options.allow_other {
        config.mount_options.push(MountOption::DefaultPermissions);
        config.acl = SessionACL::All;
    }
    config.n_threads = Some(options.threads.max(1));
    config.clone_fd = true;
    let mut session = match fuser::Session::new(fs, mountpoint, &config) {
        Ok(s) => s,
        Err(source) => {
            let err = MountError::Mountpoint {
                path: mountpoint.to_path_buf(),
                detail: format!("cannot mount: {source}"),
            };
            return Err((err, readiness));
        }
    };
    if let Some(readiness) = readiness {
        if let Err(source) = readiness.ready(options.log_file.as_deref()) {
            warn!("could not detach from the terminal: {source}");
        }
    }
    info!("mounted {location} at {}", mountpoint.display());

    let mut unmounter = session.unmount_callable();
    let target = mountpoint.to_path_buf();
    runtime.spawn(async move {
        tokio::select! {
            _ = sigint.recv() => {}
            _ = sigterm.recv() => {}
        }
        info!("signal received: unmounting {}", target.display());
        if let Err(e) = unmounter.unmount() {
            warn!("unmount {}: {e}; detaching lazily", target.display());
            lazy_unmount(&target);
        }
    });
    let result = session.run();
    info!("unmounted {}", mountpoint.display());
    result.map_err(|source| {
        (
            MountError::Io {
                op: "serve FUSE requests",
                source,
            },
            None,
        )
    })
}

/// Detaches a busy mount so it disappears once its last file is closed.
fn lazy_unmount(path: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c_path) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return;
    };
    // SAFETY: umount2 with a valid NUL-terminated path.
    if unsafe { libc::umount2(c_path.as_ptr(), libc::MNT_DETACH) } != 0 {
        let _ = std::process::Command::new("fusermount3")
            .arg("-uz")
            .arg(path)
            .status();
    }
}

fn check_mountpoint(path: &Path) -> Result<PathBuf, MountError> {
    let fail = |detail: String| MountError::Mountpoint {
        path: path.to_path_buf(),
        detail,
    };
    let canonical = path.canonicalize().map_err(|e| {
        if e.raw_os_error() == Some(libc::ENOTCONN) {
            fail(
                "a dead FUSE mount is still attached here; run `fusermount3 -u` on it first".into(),
            )
        } else {
            fail(e.to_string())
        }
    })?;
    if !canonical.is_dir() {
        return Err(fail("not a directory".into()));
    }
    Ok(canonical)
}

/// Local dataset paths are made absolute before the daemon leaves the
/// working directory.
fn absolute_location(location: &str) -> String {
    if location.contains("://") {
        return location.to_string();
    }
    std::path::absolute(location).map_or_else(|_| location.to_string(), |p| p.display().to_string())
}
