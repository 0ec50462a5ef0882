//! `packfs mount`: in the foreground, or detached from the terminal the
//! way mount tools are (the command returns once the filesystem is mounted,
//! and a daemon serves it).

use std::cell::Cell;
use std::path::{Path, PathBuf};

use packfs_core::store::StoreConfig;
use packfs_fs::mount::{absolute_location, check_mountpoint, mount, MountOptions};
use packfs_fs::write::WriteOptions;
use tracing::warn;

use crate::cli::MountArgs;
use crate::daemon;

/// Mounts as `args` say. Call before any other thread is started:
/// daemonizing forks.
pub fn run(args: &MountArgs, store: StoreConfig) -> Result<(), Box<dyn std::error::Error>> {
    let options = args.options(store);
    if args.foreground {
        return Ok(mount(&args.dataset, &args.mountpoint, &options, || {})?);
    }
    // Mistakes are told on the terminal, before detaching.
    let mountpoint = check_mountpoint(&args.mountpoint, &options)?;
    let location = absolute_location(&args.dataset);
    // The daemon leaves the working directory: make paths absolute first.
    let absolute = |path: &Option<PathBuf>, flag: &str| {
        path.as_deref()
            .map(std::path::absolute)
            .transpose()
            .map_err(|e| format!("resolve {flag}: {e}"))
    };
    let log_file = match absolute(&args.log_file, "--log-file")? {
        Some(path) => Some(path),
        None => default_log_file(&location, &options.revision.to_string(), &mountpoint),
    };
    let options = MountOptions {
        cache_dir: absolute(&options.cache_dir, "--cache-dir")?,
        write: WriteOptions {
            spool_dir: absolute(&options.write.spool_dir, "--spool-dir")?,
            ..options.write.clone()
        },
        ..options
    };
    let note = log_file
        .as_ref()
        .map(|path| format!("logging to {}", path.display()));
    let readiness = Cell::new(Some(
        daemon::detach(note).map_err(|e| format!("daemonize: {e}"))?,
    ));
    let result = mount(&location, &mountpoint, &options, || {
        if let Some(readiness) = readiness.take() {
            if let Err(e) = readiness.ready(log_file.as_deref()) {
                warn!("could not detach from the terminal: {e}");
            }
        }
    });
    match (result, readiness.take()) {
        (Err(e), Some(readiness)) => {
            // The parent waits for the verdict and prints it.
            readiness.fail(&e.to_string());
            std::process::exit(1);
        }
        (result, _) => Ok(result?),
    }
}

/// The log of a daemonized mount without `--log-file`:
/// `<state>/packfs/log/<key>.log`, beside the default spools
/// (`<state>/packfs/spool/<key>`, same state directory and key), created
/// 0700. `None` (logs dropped) if it cannot be created.
fn default_log_file(location: &str, ref_name: &str, mountpoint: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let spool = packfs_fs::write::default_dir(location, ref_name, mountpoint);
    let key = spool.file_name()?.to_string_lossy();
    let dir = spool.parent()?.parent()?.join("log");
    match std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
    {
        Ok(()) => Some(dir.join(format!("{key}.log"))),
        Err(e) => {
            warn!(
                "cannot create {}: {e}; the mount's log is dropped",
                dir.display()
            );
            None
        }
    }
}
