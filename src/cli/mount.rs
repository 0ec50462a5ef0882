//! `packfs mount`: its options, and running it in the foreground or
//! detached from the terminal the way mount tools are (the command returns
//! once the filesystem is mounted, and a daemon serves it).

use std::cell::Cell;
use std::path::{Path, PathBuf};

use clap::Args;
use packfs_core::cache::whole::WholeOptions;
use packfs_core::cache::CacheOptions;
use packfs_core::catalog::view::NamedView;
use packfs_core::dataset::Revision;
use packfs_core::store::StoreConfig;
use packfs_core::units::parse_size;
use packfs_fs::mount::{absolute_location, check_mountpoint, mount, MountOptions};
use packfs_fs::write::WriteOptions;
use tracing::warn;

use super::{error_text, CliResult};
use crate::daemon;

#[derive(Args, Debug)]
pub(crate) struct MountArgs {
    /// Dataset or DataBundle location.
    pub dataset: String,
    /// Existing empty directory to mount on (see --allow-non-empty).
    pub mountpoint: PathBuf,
    /// What to mount: a ref (branch), read-write unless --read-only; or,
    /// always read-only and immutable, a Manifest id, a unique prefix of
    /// at least 8 of its hex digits, or REVISION~N (N Manifests back along
    /// first parents, e.g. main~1). A name that is both a ref and a prefix
    /// is the ref.
    #[arg(long = "ref", default_value = "main", value_name = "REVISION")]
    pub revision: Revision,
    /// Stay in the foreground; unmount cleanly on SIGINT/SIGTERM.
    #[arg(short, long)]
    pub foreground: bool,
    /// Threads reading FUSE requests [default: 1 on a read-write mount,
    /// 4 on a read-only one].
    #[arg(long)]
    pub threads: Option<usize>,
    /// Let other users access the mount, under the kernel's checks of the
    /// mode bits [default: on when root mounts, as with a disk root mounts;
    /// other users need user_allow_other in /etc/fuse.conf].
    #[arg(long, conflicts_with = "owner_only")]
    pub allow_other: bool,
    /// Let no one but the mounting user access the mount (FUSE's own
    /// default), also when root mounts.
    #[arg(long)]
    pub owner_only: bool,
    /// Owner of every file and directory [default: the mounting user]. When
    /// other users may access the mount, this user may write; others read
    /// what the mode bits allow.
    #[arg(long)]
    pub uid: Option<u32>,
    /// Group of every file and directory [default: the mounting user's].
    #[arg(long)]
    pub gid: Option<u32>,
    /// Permission bits every file shows, in octal, whatever mode was stored
    /// with it (the stored modes are kept) [default: the stored mode, else
    /// 0644, or 0444 with --read-only].
    #[arg(long, value_name = "OCTAL", value_parser = parse_mode)]
    pub file_mode: Option<u16>,
    /// Permission bits every directory shows, in octal [default: the stored
    /// mode, else 0755, or 0555 with --read-only].
    #[arg(long, value_name = "OCTAL", value_parser = parse_mode)]
    pub dir_mode: Option<u16>,
    /// Log file of the daemonized mount (warnings and errors; more with
    /// -v) [default: ~/.local/state/packfs/log/<id of dataset, ref and
    /// mountpoint>.log, printed when the mount starts].
    #[arg(long)]
    pub log_file: Option<PathBuf>,
    /// Memory for cached object blocks (e.g. 512MiB, 2GiB).
    #[arg(long, default_value = "512MiB", value_parser = parse_size)]
    pub cache_bytes: u64,
    /// Do not read ahead on sequential reads (every read waits for its own GET).
    #[arg(long)]
    pub no_prefetch: bool,
    /// Also keep fetched blocks in this directory (created 0700), verified
    /// on read and kept across mounts. One mount per directory.
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,
    /// Most bytes of blocks kept in --cache-dir.
    #[arg(long, default_value = "10GiB", value_parser = parse_size)]
    pub cache_dir_bytes: u64,
    /// Memory for the dataset's index: the pages of names, sizes and
    /// attributes that lookups, `stat` and listings read as they need them
    /// (least recently used go first). The mount holds this, not the
    /// dataset's item count: ~60 bytes an item held.
    #[arg(long, default_value = "64MiB", value_parser = parse_size)]
    pub index_cache_bytes: u64,
    /// With --read-only and --cache-dir, items read whole once get a
    /// whole-file copy in --cache-dir, and later opens of them (this mount
    /// or a later one) are served by kernel passthrough, at local-disk
    /// speed without the daemon (Linux >= 6.9, CAP_SYS_ADMIN; otherwise
    /// reads go through the daemon). Every open then costs a round trip to
    /// the daemon; this option turns passthrough off and keeps the
    /// open-free mode of --read-only.
    #[arg(long)]
    pub no_passthrough: bool,
    /// Most bytes of whole-file copies kept in --cache-dir, besides
    /// --cache-dir-bytes of blocks; least recently used go first.
    #[arg(long, default_value = "10GiB", value_parser = parse_size)]
    pub whole_copy_bytes: u64,
    /// Items smaller than this get no whole-file copy: the daemon serves
    /// small files faster than passthrough.
    #[arg(long, default_value = "1MiB", value_parser = parse_size)]
    pub whole_copy_min: u64,
    /// Refuse every change (EROFS). Reads are faster: the kernel then
    /// needs no open/close round trip per file. Use it for training loaders.
    #[arg(long)]
    pub read_only: bool,
    /// Mount on a directory that is not empty; what it holds is hidden
    /// until the mount goes (without this, a non-empty mountpoint is refused).
    #[arg(long)]
    pub allow_non_empty: bool,
    /// Where written files wait until they are packed and committed
    /// (created 0700; default: ~/.local/state/packfs/spool/<id of dataset,
    /// ref and mountpoint>). One mount per directory.
    #[arg(long)]
    pub spool_dir: Option<PathBuf>,
    /// Pack and commit written files once this many are closed…
    #[arg(long, default_value_t = WriteOptions::default().pack_items)]
    pub pack_items: usize,
    /// …or once they hold this many bytes (also the largest pack).
    #[arg(long, default_value = "64MiB", value_parser = parse_size)]
    pub pack_bytes: u64,
    /// Most bytes written files may hold in the spool; writes beyond wait
    /// for commits to free room, then fail with ENOSPC.
    #[arg(long, default_value = "10GiB", value_parser = parse_size)]
    pub spool_bytes: u64,
    /// Commit after this many seconds without a change.
    #[arg(long, value_name = "SECONDS", default_value_t = WriteOptions::default().idle_flush.as_secs_f64())]
    pub idle_flush: f64,
    /// At unmount or SIGTERM, give the last commit this many seconds; what
    /// is not committed by then stays in the spool for the next mount.
    #[arg(long, value_name = "SECONDS", default_value_t = WriteOptions::default().shutdown_timeout.as_secs_f64())]
    pub shutdown_timeout: f64,
    /// TileDB arrays: show the array as of this time, in milliseconds
    /// since the epoch (fragments written up to it) [default: the latest].
    #[arg(long, value_name = "TIMESTAMP_MS")]
    pub at: Option<u64>,
    /// TileDB arrays: give the cell files of a var-sized attribute an
    /// extension, e.g. `--ext image=jpg` (repeatable).
    #[arg(long, value_name = "ATTRIBUTE=EXT", value_parser = parse_extension)]
    pub ext: Vec<(String, String)>,
    /// Show the dataset in a loader's layout, synthesized from the packs
    /// (nothing is copied). `webdataset[:samples=N|bytes=SIZE][,shuffle=SEED]`:
    /// `/<timeline>/shard-000000.tar`, tar shards of samples (items sharing
    /// a key across modalities; default bytes=1GiB, key order; a seed
    /// gives a fixed global shuffle). `samples`: `/<timeline>/<key>/<file>`,
    /// a directory per sample. `SPEC` makes the view the whole mount
    /// (read-only); `.NAME=SPEC` adds it at MOUNTPOINT/.NAME beside the
    /// dataset, showing the snapshot the mount started from (repeatable).
    #[arg(long, value_name = "[.NAME=]SPEC")]
    pub view: Vec<NamedView>,
    /// Serve Prometheus metrics at http://HOST:PORT/metrics: the counters
    /// of .packfs/stats, store request latency per operation, cache bytes
    /// and hit ratio, read-ahead in flight, spool bytes, pending and
    /// committed files, commit latency, errors by kind.
    #[arg(long, value_name = "HOST:PORT")]
    pub metrics_addr: Option<std::net::SocketAddr>,
}

/// `ATTRIBUTE=EXT` of `--ext`.
fn parse_extension(arg: &str) -> Result<(String, String), String> {
    match arg.split_once('=') {
        Some((attribute, ext))
            if !attribute.is_empty() && !ext.is_empty() && !ext.contains('/') =>
        {
            Ok((
                attribute.to_string(),
                ext.trim_start_matches('.').to_string(),
            ))
        }
        _ => Err(format!("{arg:?}: expected ATTRIBUTE=EXT, e.g. image=jpg")),
    }
}

impl MountArgs {
    /// Whether users other than the mounting one may access the mount:
    /// when asked, and by default when root mounts (a mount made by root
    /// for a system's users, by mount(8), systemd or a container runtime,
    /// is useless to them otherwise; the kernel still checks the modes).
    fn lets_others_in(&self) -> bool {
        // SAFETY: geteuid has no preconditions.
        self.allow_other || (!self.owner_only && unsafe { libc::geteuid() } == 0)
    }

    /// The library's settings of the mount these arguments ask for, with
    /// the store settings `store`.
    pub(crate) fn options(&self, store: StoreConfig) -> MountOptions {
        MountOptions::default()
            .store(store)
            .revision(self.revision.clone())
            .threads(self.threads)
            .allow_other(self.lets_others_in())
            .uid(self.uid)
            .gid(self.gid)
            .file_mode(self.file_mode)
            .dir_mode(self.dir_mode)
            .cache(
                CacheOptions::default()
                    .cache_bytes(self.cache_bytes)
                    .prefetch(!self.no_prefetch),
            )
            .cache_dir(self.cache_dir.clone())
            .cache_dir_bytes(self.cache_dir_bytes)
            .index_cache_bytes(self.index_cache_bytes)
            .passthrough(!self.no_passthrough)
            .whole(
                WholeOptions::default()
                    .max_bytes(self.whole_copy_bytes)
                    .min_size(self.whole_copy_min),
            )
            .read_only(self.read_only)
            .allow_non_empty(self.allow_non_empty)
            .views(self.view.clone())
            .metrics_addr(self.metrics_addr)
            .write(
                WriteOptions::default()
                    .spool_dir(self.spool_dir.clone())
                    .pack_items(self.pack_items)
                    .pack_bytes(self.pack_bytes)
                    .idle_flush(std::time::Duration::from_secs_f64(
                        self.idle_flush.max(0.01),
                    ))
                    .spool_bytes(self.spool_bytes)
                    .shutdown_timeout(std::time::Duration::from_secs_f64(
                        self.shutdown_timeout.max(0.0),
                    )),
            )
            .array_at(self.at)
            .array_extensions(self.ext.iter().cloned().collect())
    }
}

/// Parses permission bits in octal (`0640`, `755`).
fn parse_mode(s: &str) -> Result<u16, String> {
    u16::from_str_radix(s, 8)
        .ok()
        .filter(|&m| m <= 0o777)
        .ok_or_else(|| format!("{s:?} is not a mode: give octal permission bits such as 0644"))
}

/// Mounts as `args` say. Call before any other thread is started:
/// daemonizing forks.
pub(super) fn run(args: &MountArgs, store: StoreConfig) -> CliResult {
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
    let cache_dir = absolute(&options.cache_dir, "--cache-dir")?;
    let spool_dir = absolute(&options.write.spool_dir, "--spool-dir")?;
    let write = options.write.clone().spool_dir(spool_dir);
    let options = options.cache_dir(cache_dir).write(write);
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
            readiness.fail(&error_text(&e));
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

#[cfg(test)]
mod tests {
    #[test]
    fn modes() {
        use super::parse_mode;
        assert_eq!(parse_mode("0640"), Ok(0o640));
        assert_eq!(parse_mode("755"), Ok(0o755));
        assert!(parse_mode("0800").is_err());
        assert!(parse_mode("4755").is_err());
        assert!(parse_mode("rw-r--r--").is_err());
    }
}
