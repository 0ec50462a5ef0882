//! Command-line interface: argument parsing and the small commands that
//! print things (`ls`, `cat`, `log`, `verify`); `import`, `mount` and
//! `bundle create` hand off to their modules.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::progress::Bar;
use clap::{Args, Parser, Subcommand};
use indicatif::HumanBytes;
use packfs_core::array::Array;
use packfs_core::bundle::Bundle;
use packfs_core::bundle_create::{create, BundleSource, CreateOptions};
use packfs_core::cache::whole::WholeOptions;
use packfs_core::cache::CacheOptions;
use packfs_core::catalog::array::ArrayCatalog;
use packfs_core::catalog::bundle::BundleCatalog;
use packfs_core::catalog::view::{NamedView, ViewSpec};
use packfs_core::catalog::Catalog;
use packfs_core::dataset::{writer_string, Conflict, Dataset, MergeOutcome, Revision};
use packfs_core::import::{import_files, prepare_source, ImportOptions};
use packfs_core::kind::Kind;
use packfs_core::location::LocationKind;
use packfs_core::packer::PackOptions;
use packfs_core::reader::Reader;
use packfs_core::store::faults::Faults;
use packfs_core::store::{Store, StoreConfig, StoreOptions, UNSAFE_REFS_ENV};
use packfs_core::tree::{NodeKind, Tree};
use packfs_core::units::{parse_duration, parse_size};
use packfs_format::bundle::Compression;
use packfs_fs::mount::MountOptions;
use packfs_fs::write::WriteOptions;

/// Mount packed datasets in object storage as ordinary files.
///
/// A dataset lives in a local directory (the default) or under an object
/// store URL (s3://bucket/prefix, gs://…, az://…). Its files are packed
/// many-to-an-object; packfs serves them as /<timeline>/<modality>/<name>.
#[derive(Parser, Debug)]
#[command(name = "packfs", version, propagate_version = true)]
pub struct Cli {
    /// More log output (-v info, -vv debug); RUST_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    #[command(flatten)]
    pub store: StoreArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// How to reach the store: settings for S3-compatible servers (MinIO,
/// Ceph RGW, …) and time-outs. Credentials and everything else come from
/// the usual `AWS_*` (`GOOGLE_*`, `AZURE_*`) environment variables and are
/// never printed.
#[derive(Args, Debug)]
pub struct StoreArgs {
    /// S3 endpoint URL, e.g. http://127.0.0.1:9000 (AWS_ENDPOINT).
    #[arg(long, global = true, value_name = "URL")]
    pub endpoint: Option<String>,
    /// S3 region (AWS_REGION).
    #[arg(long, global = true)]
    pub region: Option<String>,
    /// Address buckets as <endpoint>/<bucket> instead of <bucket>.<endpoint>
    /// (most S3-compatible servers want this).
    #[arg(long, global = true)]
    pub path_style: bool,
    /// Allow plain http:// endpoints.
    #[arg(long, global = true)]
    pub allow_http: bool,
    /// Time-out of one request to the store, body included [default: 30s].
    #[arg(long, global = true, value_name = "DURATION", value_parser = parse_duration)]
    pub timeout: Option<Duration>,
    /// Time-out for connecting to the store [default: 5s].
    #[arg(long, global = true, value_name = "DURATION", value_parser = parse_duration)]
    pub connect_timeout: Option<Duration>,
    /// Transient failures (network errors, 5xx, short bodies) are retried
    /// with backoff until this long after the first attempt; then the
    /// error is final (EIO in a mount) [default: 30s].
    #[arg(long, global = true, value_name = "DURATION", value_parser = parse_duration)]
    pub retry_deadline: Option<Duration>,
    /// Diagnostics: inject store faults, e.g. get-fail-every=5,get-delay=20ms
    /// (see src/store/faults.rs).
    #[arg(long, global = true, hide = true, value_name = "SPEC", value_parser = faults_arg)]
    pub inject_faults: Option<Arc<Faults>>,
}

/// Parses an `--inject-faults` spec, so a typo is a usage error.
fn faults_arg(spec: &str) -> Result<Arc<Faults>, String> {
    Faults::parse(spec).map(Arc::new)
}

impl StoreArgs {
    /// The store settings of every command: these options, and the
    /// `PACKFS_UNSAFE_REFS=1` switch of the environment.
    pub fn config(&self) -> StoreConfig {
        let defaults = StoreOptions::default();
        StoreConfig {
            options: StoreOptions {
                timeout: self.timeout.unwrap_or(defaults.timeout),
                connect_timeout: self.connect_timeout.unwrap_or(defaults.connect_timeout),
                retry_deadline: self.retry_deadline.unwrap_or(defaults.retry_deadline),
                ..defaults
            },
            endpoint: self.endpoint.clone(),
            region: self.region.clone(),
            path_style: self.path_style,
            allow_http: self.allow_http,
            unsafe_refs: std::env::var(UNSAFE_REFS_ENV).is_ok_and(|v| v == "1"),
            faults: self.inject_faults.clone(),
        }
    }
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Pack a directory tree, or a DataBundle's tree, into a dataset and
    /// commit it.
    ///
    /// SRC is laid out as SRC/<timeline>/<modality>/<path…> (or, with
    /// --timeline, SRC/<modality>/<path…>). Small files are concatenated
    /// into packs; large files are split into chunks. Items are added to
    /// their modality; an item with an existing name replaces it. A
    /// DataBundle (a directory or object-store URL with a bundle index) is
    /// read the same way: its files' bytes are checked against the index's
    /// CRC32C while they are imported, and its files' modes and mtimes are
    /// kept.
    Import(ImportArgs),
    /// Mount a dataset or a DataBundle (returns once mounted; see
    /// --foreground).
    ///
    /// Files written into the mount are spooled locally, packed and
    /// committed to the ref on fsync, after 2 s without changes, when
    /// --pack-items/--pack-bytes are reached, and at unmount. Unmount with
    /// `umount MOUNTPOINT` or `fusermount3 -u MOUNTPOINT`.
    ///
    /// A DataBundle (recognised by its index, `index/bundle.sqlite`) is
    /// mounted read-only as the tree it holds; its index is queried on
    /// demand, and a remote bundle's index is downloaded once into
    /// <cache-dir>/bundle-index (or packfs's state directory).
    Mount(MountArgs),
    /// List a directory of the dataset (or show one file).
    Ls {
        #[command(flatten)]
        at: DatasetAt,
        /// Path inside the dataset, e.g. train/image.
        #[arg(default_value = "/")]
        path: String,
        /// Show size and media type.
        #[arg(short, long)]
        long: bool,
        /// List the dataset as a loader view shows it (`webdataset…` or
        /// `samples`, as `mount --view`): e.g. its shards and their sizes.
        #[arg(long, value_name = "SPEC")]
        view: Option<ViewSpec>,
    },
    /// Write a file of the dataset to stdout.
    Cat {
        #[command(flatten)]
        at: DatasetAt,
        /// Path inside the dataset, e.g. train/image/cat/001.jpg.
        path: String,
        /// Read the path in a loader view (as `mount --view`), e.g.
        /// `--view webdataset train/shard-000000.tar`.
        #[arg(long, value_name = "SPEC")]
        view: Option<ViewSpec>,
    },
    /// Summarize a dataset: per timeline and modality its items and bytes,
    /// packed, whole and chunked items, packs and how full they are, and
    /// how deep its history is. A table, or JSON with --json.
    Info {
        #[command(flatten)]
        at: DatasetAt,
        /// Print JSON (for scripts) instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Show the Manifest history of a revision (--ref), newest first.
    Log {
        #[command(flatten)]
        at: DatasetAt,
        /// Show at most this many Manifests.
        #[arg(short = 'n', long, default_value_t = 20)]
        max_count: usize,
    },
    /// Check every object and invariant of a revision (--ref); exit 1 on
    /// any problem.
    ///
    /// For a DataBundle: every shard header, every record (it decodes to
    /// its length) and every file's CRC32C, each problem named.
    Verify {
        #[command(flatten)]
        at: DatasetAt,
    },
    /// List the items added, removed and changed from revision FROM to TO.
    ///
    /// One line per item, sorted by path: a marker, a tab and
    /// /<timeline>/<modality>/<name>. Markers: + added, - removed, M other
    /// bytes, T same bytes but another mode or mtime. A path holding a
    /// control character, '"' or '\' is printed in double quotes with C
    /// escapes. A summary goes to stderr. Items whose Track entries cannot
    /// tell (same size, stored elsewhere) are read on both sides and
    /// compared. Exits 0 whether or not the revisions differ.
    Diff {
        /// Dataset location.
        dataset: String,
        /// The revision compared from: a ref, a Manifest id or a unique
        /// prefix of at least 8 of its hex digits, optionally followed by
        /// ~N (N Manifests back along first parents).
        from: Revision,
        /// The revision compared to (same syntax).
        to: Revision,
        /// Separate marker and path with NUL and end each entry with NUL,
        /// paths unquoted (for xargs -0).
        #[arg(short = 'z')]
        nul: bool,
    },
    /// Delete objects no ref reaches (uploads that never committed, objects
    /// of deleted branches). History is kept: every Manifest any ref can
    /// reach, and all it names, stays.
    Gc {
        /// Dataset location.
        dataset: String,
        /// Only list what would be deleted.
        #[arg(long)]
        dry_run: bool,
        /// Keep unreachable objects younger than this (a writer may not have
        /// moved its ref yet): e.g. 24h, 3h; at least 2h.
        #[arg(long, default_value = "24h", value_parser = parse_duration)]
        grace: Duration,
    },
    /// Create a branch: a new ref at the Manifest of another.
    ///
    /// Import into it (`packfs import --ref NAME`) and bring it back with
    /// `packfs merge`.
    Branch {
        /// Dataset location.
        dataset: String,
        /// Name of the new ref.
        name: String,
        /// Where the branch starts: a ref, a Manifest id or prefix, or
        /// REVISION~N.
        #[arg(long, default_value = "main", value_name = "REVISION")]
        from: Revision,
    },
    /// Merge branches into a ref: one Manifest with all of them as parents.
    ///
    /// Per (timeline, modality), the items each branch added, replaced or
    /// removed since the common ancestor are applied together (union
    /// merge). A name changed on two sides keeps the version of --into (or
    /// the earlier branch); the other is kept as NAME.conflict-<id>.EXT and
    /// listed. A branch already merged is skipped; a single branch ahead of
    /// --into is a fast-forward. Branch refs are left in place.
    Merge {
        /// Dataset location.
        dataset: String,
        /// The ref to merge into.
        #[arg(long, default_value = "main")]
        into: String,
        /// Refs to merge (or Manifests: ids, prefixes, REVISION~N).
        #[arg(required = true, value_name = "BRANCH")]
        branches: Vec<Revision>,
    },
    /// DataBundles: a directory of shard files and a SQLite index, on a
    /// local disk or under an object-store prefix (docs/DATABUNDLE.md).
    Bundle {
        #[command(subcommand)]
        command: BundleCommand,
    },
    /// Print a shell completion script, generated from this command line.
    ///
    /// bash: `packfs completions bash > /etc/bash_completion.d/packfs`;
    /// zsh: into a directory of `$fpath` as `_packfs`; fish: into
    /// `~/.config/fish/completions/packfs.fish`.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Let mount(8) mount datasets: `mount -t fuse.packfs DATASET DIR -o
    /// OPTIONS` and `/etc/fstab` lines of type `fuse.packfs`.
    ///
    /// Links DIR/mount.fuse.packfs to this binary. mount(8) runs it with
    /// `-o` options, each a `packfs mount` flag (`ref=main`,
    /// `cache_dir=/var/cache/packfs`, `allow_other`, `ro`; `_netdev`,
    /// `nofail`, `x-systemd.*` are ignored as mount(8) expects).
    InstallHelper {
        /// Where mount(8) looks for helpers.
        #[arg(long, default_value = "/sbin")]
        dir: PathBuf,
    },
    /// Print the manual page (roff), generated from this command line.
    ///
    /// `packfs man > /usr/local/share/man/man1/packfs.1`; with `--dir D`,
    /// also one page per subcommand (`packfs-mount.1`, …) into D.
    Man {
        /// Write `packfs.1` and a page per subcommand into this directory
        /// instead of printing `packfs.1`.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
}

#[derive(Subcommand, Debug)]
pub enum BundleCommand {
    /// Write a new DataBundle of a directory tree or of a dataset.
    ///
    /// Files are concatenated into shards written in parallel, compressed
    /// in records; the index is written last, so a bundle whose writing
    /// failed is never read. Of a directory, symbolic links to files are
    /// followed; links to directories, special files and names that are
    /// not UTF-8 are refused. Of a dataset (SRC is a dataset, or a dataset
    /// followed by a directory of its tree: DATASET/train/image), the tree
    /// at --ref below that directory is bundled, with the modes and mtimes
    /// a read-write mount shows. A local directory that is a dataset, or
    /// inside one, is read as the dataset, not as a directory.
    Create(BundleCreateArgs),
}

#[derive(Args, Debug)]
pub struct BundleCreateArgs {
    /// Source: a directory, or a dataset location, optionally followed by
    /// a directory of its tree (DATASET/train, s3://bucket/ds/train/image).
    pub src: String,
    /// Where the bundle goes: a directory (created if missing) or an
    /// object-store URL (s3://bucket/prefix, …). It must hold no bundle
    /// index or shards yet.
    pub bundle: String,
    /// How records are compressed.
    #[arg(long, default_value = "zstd", value_parser = ["zstd", "gzip", "none"])]
    pub compression: String,
    /// Compression level [default: zstd 3, gzip 6].
    #[arg(long, allow_negative_numbers = true)]
    pub level: Option<i32>,
    /// Most uncompressed bytes of one record (e.g. 256KiB, 1MiB).
    #[arg(long, default_value = "256KiB", value_parser = parse_size)]
    pub record_size: u64,
    /// Records start at multiples of this in a shard (a power of two).
    #[arg(long, default_value = "4096", value_parser = parse_size)]
    pub block_size: u64,
    /// Number of shards, written in parallel [default: the number of
    /// CPUs, at most 8]; never more than the number of files.
    #[arg(long)]
    pub shards: Option<u32>,
    /// Where a bundle for an object store is put together before it is
    /// uploaded (it needs room for the whole bundle) [default: the
    /// system's temporary directory].
    #[arg(long)]
    pub staging_dir: Option<PathBuf>,
    /// What to read when SRC is a dataset: a ref, a Manifest id or a
    /// unique prefix of at least 8 of its hex digits, optionally followed
    /// by ~N (N Manifests back along first parents).
    #[arg(long = "ref", default_value = "main", value_name = "REVISION")]
    pub revision: Revision,
    /// Never draw a progress bar.
    #[arg(long)]
    pub no_progress: bool,
}

#[derive(Args, Debug)]
pub struct DatasetAt {
    /// Dataset location: a directory, file://, s3://, gs://, az:// or memory:// URL.
    pub dataset: String,
    /// What to read: a ref (branch), a Manifest id or a unique prefix of at
    /// least 8 of its hex digits, optionally followed by ~N (N Manifests
    /// back along first parents, e.g. main~1). A name that is both a ref
    /// and a prefix is the ref.
    #[arg(long = "ref", default_value = "main", value_name = "REVISION")]
    pub revision: Revision,
    /// TileDB arrays: read the array as of this time, in milliseconds
    /// since the epoch [default: the latest].
    #[arg(long, value_name = "TIMESTAMP_MS")]
    pub at: Option<u64>,
}

#[derive(Args, Debug)]
pub struct ImportArgs {
    /// Source directory, or DataBundle (a directory or an object-store URL).
    pub src: String,
    /// Dataset location (created if it is a missing local directory).
    pub dataset: String,
    /// Import SRC/<modality>/… under this timeline.
    #[arg(long)]
    pub timeline: Option<String>,
    /// Most items per pack.
    #[arg(long, default_value_t = PackOptions::default().pack_items)]
    pub pack_items: usize,
    /// Most bytes per pack (e.g. 64MiB).
    #[arg(long, default_value = "64MiB", value_parser = parse_size)]
    pub pack_bytes: u64,
    /// Files larger than this are split into chunks of this size.
    #[arg(long, default_value = "64MiB", value_parser = parse_size)]
    pub chunk_bytes: u64,
    /// Ref to commit to.
    #[arg(long = "ref", default_value = "main")]
    pub ref_name: String,
    /// Uploads in flight at once.
    #[arg(long, default_value_t = PackOptions::default().concurrency)]
    pub concurrency: usize,
    /// Never draw a progress bar.
    #[arg(long)]
    pub no_progress: bool,
}

#[derive(Args, Debug)]
pub struct MountArgs {
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
    /// Let other users access the mount (enables kernel permission checks;
    /// non-root users need user_allow_other in /etc/fuse.conf).
    #[arg(long)]
    pub allow_other: bool,
    /// Owner of every file and directory [default: the mounting user]. With
    /// --allow-other, this user may write; others read only.
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
    pub fn options(&self, store: StoreConfig) -> MountOptions {
        MountOptions {
            store,
            revision: self.revision.clone(),
            threads: self.threads,
            allow_other: self.allow_other,
            uid: self.uid,
            gid: self.gid,
            file_mode: self.file_mode,
            dir_mode: self.dir_mode,
            cache: CacheOptions {
                cache_bytes: self.cache_bytes,
                prefetch: !self.no_prefetch,
                ..CacheOptions::default()
            },
            cache_dir: self.cache_dir.clone(),
            cache_dir_bytes: self.cache_dir_bytes,
            passthrough: !self.no_passthrough,
            whole: WholeOptions {
                max_bytes: self.whole_copy_bytes,
                min_size: self.whole_copy_min,
            },
            read_only: self.read_only,
            allow_non_empty: self.allow_non_empty,
            views: self.view.clone(),
            metrics_addr: self.metrics_addr,
            write: WriteOptions {
                spool_dir: self.spool_dir.clone(),
                pack_items: self.pack_items,
                pack_bytes: self.pack_bytes,
                idle_flush: std::time::Duration::from_secs_f64(self.idle_flush.max(0.01)),
                spool_bytes: self.spool_bytes,
                shutdown_timeout: std::time::Duration::from_secs_f64(
                    self.shutdown_timeout.max(0.0),
                ),
                ..WriteOptions::default()
            },
            array_at: self.at,
            array_extensions: self.ext.iter().cloned().collect(),
        }
    }
}

/// Parses permission bits in octal (`0640`, `755`).
fn parse_mode(s: &str) -> Result<u16, String> {
    u16::from_str_radix(s, 8)
        .ok()
        .filter(|&m| m <= 0o777)
        .ok_or_else(|| format!("{s:?} is not a mode: give octal permission bits such as 0644"))
}

type CliResult = Result<(), Box<dyn std::error::Error>>;

/// `packfs completions SHELL`.
pub fn run_completions(shell: clap_complete::Shell) -> CliResult {
    let mut command = <Cli as clap::CommandFactory>::command();
    clap_complete::generate(shell, &mut command, "packfs", &mut std::io::stdout());
    Ok(())
}

/// `packfs install-helper [--dir DIR]`: `DIR/mount.fuse.packfs`, a link
/// to this binary (replacing an older one).
pub fn run_install_helper(dir: &Path) -> CliResult {
    let exe = std::env::current_exe()?.canonicalize()?;
    let link = dir.join("mount.fuse.packfs");
    match std::fs::symlink_metadata(&link) {
        Ok(meta) if meta.file_type().is_symlink() => std::fs::remove_file(&link)?,
        Ok(_) => {
            return Err(format!(
                "{} exists and is not a link; remove it first",
                link.display()
            )
            .into())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("{}: {e}", link.display()).into()),
    }
    std::os::unix::fs::symlink(&exe, &link)
        .map_err(|e| format!("linking {} to {}: {e}", link.display(), exe.display()))?;
    println!("{} -> {}", link.display(), exe.display());
    println!("mount -t fuse.packfs DATASET DIR -o ref=main,… and fstab lines of type fuse.packfs now mount with packfs");
    Ok(())
}

/// `packfs man [--dir DIR]`.
pub fn run_man(dir: Option<PathBuf>) -> CliResult {
    let command = <Cli as clap::CommandFactory>::command();
    let Some(dir) = dir else {
        clap_mangen::Man::new(command).render(&mut std::io::stdout())?;
        return Ok(());
    };
    std::fs::create_dir_all(&dir)?;
    clap_mangen::generate_to(command, &dir)?;
    Ok(())
}

pub async fn run_import(args: ImportArgs, config: &StoreConfig) -> CliResult {
    let options = ImportOptions {
        timeline: args.timeline,
        ref_name: args.ref_name,
        pack: PackOptions {
            pack_items: args.pack_items,
            pack_bytes: args.pack_bytes,
            chunk_bytes: args.chunk_bytes,
            concurrency: args.concurrency,
            ..PackOptions::default()
        },
    };
    // Check the source before creating a dataset directory for it.
    let index_dir = packfs_fs::mount::bundle_index_dir(None);
    let prepared = prepare_source(&args.src, &options, config, &index_dir).await?;
    let dataset = Dataset::open_with(&args.dataset, true, config)?;
    dataset.store().ensure_atomic_refs().await?;
    let progress = Bar::new("import", !args.no_progress);
    let report = import_files(&dataset, prepared, &options, &progress).await?;
    let outcome = match report.manifest {
        Some(id) => format!("committed manifest {} to ref {}", id, options.ref_name),
        None => format!(
            "ref {} already holds exactly this; nothing committed",
            options.ref_name
        ),
    };
    eprintln!(
        "imported {} files ({} bytes): {} objects written, {} already present; {outcome}",
        report.items, report.bytes, report.objects_written, report.objects_reused
    );
    Ok(())
}

pub async fn run_bundle_create(args: BundleCreateArgs, config: &StoreConfig) -> CliResult {
    let started = std::time::Instant::now();
    let options = CreateOptions {
        compression: Compression::from_name(&args.compression)?,
        level: args.level,
        record_size: args.record_size,
        block_size: args.block_size,
        shards: args.shards,
        staging_dir: args.staging_dir,
    };
    let source = BundleSource::open(&args.src, &args.revision, config).await?;
    let progress = Arc::new(Bar::new("bundle create", !args.no_progress));
    let report = create(source, &args.bundle, &options, config, progress).await?;
    eprintln!(
        "created bundle {}: {} files and {} directories, {} bytes in, {} bytes stored in {} \
         shards and the index (ratio {:.2}), in {:.1}s",
        args.bundle,
        report.files,
        report.dirs,
        report.bytes_in,
        report.bytes_stored,
        report.shards,
        report.bytes_in as f64 / report.bytes_stored.max(1) as f64,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

async fn load_tree(
    at: &DatasetAt,
    config: &StoreConfig,
) -> Result<(Dataset, Tree), Box<dyn std::error::Error>> {
    let dataset = Dataset::open_with(&at.dataset, false, config)?;
    let resolved = dataset.resolve_revision(&at.revision).await?;
    let snapshot = dataset
        .snapshot_at(resolved.id, &resolved.describe())
        .await?;
    Ok((dataset, Tree::build(snapshot)?))
}

/// The tree of a DataBundle or TileDB array at `at`'s location, with a
/// reader for its files; `None` for a dataset.
async fn open_catalog(
    at: &DatasetAt,
    config: &StoreConfig,
) -> Result<Option<(Arc<dyn Catalog>, Reader)>, Box<dyn std::error::Error>> {
    let dataset = Dataset::open_with(&at.dataset, false, config)?;
    let store = dataset.store();
    let reader = Reader::new(store.clone(), CacheOptions::default(), None);
    // A probe that fails leaves the location to the dataset path, whose
    // errors name the ref it could not read and say why.
    match LocationKind::of(store)
        .await
        .unwrap_or(LocationKind::Dataset)
    {
        LocationKind::Bundle => {
            let index_dir = packfs_fs::mount::bundle_index_dir(None);
            let bundle = Bundle::open(store, &index_dir).await?;
            let catalog = BundleCatalog::new(Arc::new(bundle), std::time::SystemTime::now());
            Ok(Some((Arc::new(catalog), reader)))
        }
        LocationKind::Array => {
            let array = Array::open(store, at.at).await?;
            let runtime = tokio::runtime::Handle::current();
            let catalog = ArrayCatalog::new(
                Arc::new(array),
                reader.cache().clone(),
                runtime,
                &Default::default(),
            )?;
            Ok(Some((Arc::new(catalog), reader)))
        }
        _ => Ok(None),
    }
}

/// View `spec` of the dataset `at` names, and a reader of its store.
async fn open_view(
    at: &DatasetAt,
    spec: Option<&ViewSpec>,
    config: &StoreConfig,
) -> Result<Option<(Arc<dyn Catalog>, Reader)>, Box<dyn std::error::Error>> {
    let Some(spec) = spec else {
        return Ok(None);
    };
    let (dataset, tree) = load_tree(at, config).await?;
    let catalog = packfs_core::catalog::view::open(Arc::new(tree), spec)?;
    let reader = Reader::new(dataset.store().clone(), CacheOptions::default(), None);
    Ok(Some((catalog, reader)))
}

/// The catalog id of `path` (`/`-separated, from its root).
fn resolve_in(catalog: &dyn Catalog, path: &str) -> Result<u64, Box<dyn std::error::Error>> {
    let mut id = 0;
    for name in path.split('/').filter(|n| !n.is_empty()) {
        id = catalog
            .lookup(id, name.as_bytes())?
            .ok_or_else(|| format!("{path}: no such file or directory"))?;
    }
    Ok(id)
}

/// `packfs ls` of a bundle's or array's tree.
fn ls_catalog(catalog: &dyn Catalog, path: &str, long: bool) -> CliResult {
    let id = resolve_in(catalog, path)?;
    let entry = catalog
        .entry(id)?
        .ok_or_else(|| format!("{path}: no such file or directory"))?;
    let mut out = std::io::stdout().lock();
    let mut show = |id: u64, name: &str| -> CliResult {
        let entry = catalog
            .entry(id)?
            .ok_or_else(|| format!("{name}: vanished"))?;
        match (entry.kind, long) {
            (Kind::Dir, false) => writeln!(out, "{name}/")?,
            (Kind::Dir, true) => writeln!(out, "{:>14}  {name}/", "-")?,
            (Kind::File, false) => writeln!(out, "{name}")?,
            (Kind::File, true) => writeln!(out, "{:>14}  {name}", entry.size)?,
        }
        Ok(())
    };
    if entry.kind == Kind::File {
        return show(id, path.rsplit('/').next().unwrap_or(path));
    }
    let mut index = 0;
    while let Some((child, name)) = catalog.child(id, index) {
        show(child, &name)?;
        index += 1;
    }
    Ok(())
}

/// `packfs cat` of a bundle's or array's file.
async fn cat_catalog(catalog: &dyn Catalog, reader: &Reader, path: &str) -> CliResult {
    const STEP: u64 = 8 << 20;
    let id = resolve_in(catalog, path)?;
    let entry = catalog
        .entry(id)?
        .ok_or_else(|| format!("{path}: no such file or directory"))?;
    if entry.kind == Kind::Dir {
        return Err(format!("{path}: is a directory").into());
    }
    let mut out = std::io::stdout().lock();
    let mut offset = 0;
    while offset < entry.size {
        let range = offset..entry.size.min(offset + STEP);
        let extents = catalog
            .extents(id, range.clone())?
            .ok_or_else(|| format!("{path}: vanished"))?;
        let bytes = reader.read(extents).await?;
        match out.write_all(&bytes) {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
            r => r?,
        }
        offset = range.end;
    }
    out.flush()?;
    Ok(())
}

pub async fn run_ls(
    at: DatasetAt,
    path: String,
    long: bool,
    view: Option<ViewSpec>,
    config: &StoreConfig,
) -> CliResult {
    if let Some((catalog, _)) = open_view(&at, view.as_ref(), config).await? {
        return ls_catalog(&*catalog, &path, long);
    }
    if let Some((catalog, _)) = open_catalog(&at, config).await? {
        return ls_catalog(&*catalog, &path, long);
    }
    let (_, tree) = load_tree(&at, config).await?;
    let node = tree.resolve(&path)?;
    let mut out = std::io::stdout().lock();
    let mut show = |id| {
        let n = tree.node(id).expect("resolved node exists");
        match (n.kind, long) {
            (NodeKind::Dir(_), false) => writeln!(out, "{}/", n.name),
            (NodeKind::Dir(_), true) => {
                writeln!(out, "{:>14}  {:<26}  {}/", "-", "directory", n.name)
            }
            (NodeKind::File(_), false) => writeln!(out, "{}", n.name),
            (NodeKind::File(i), true) => {
                let item = tree.item(i);
                writeln!(
                    out,
                    "{:>14}  {:<26}  {}",
                    item.size(),
                    item.media_type(),
                    n.name
                )
            }
        }
    };
    match tree.node(node).expect("resolved node exists").kind {
        NodeKind::Dir(children) => children.iter().try_for_each(|c| show(*c))?,
        NodeKind::File(_) => show(node)?,
    }
    Ok(())
}

pub async fn run_cat(
    at: DatasetAt,
    path: String,
    view: Option<ViewSpec>,
    config: &StoreConfig,
) -> CliResult {
    const STEP: u64 = 8 << 20;
    if let Some((catalog, reader)) = open_view(&at, view.as_ref(), config).await? {
        return cat_catalog(&*catalog, &reader, &path).await;
    }
    if let Some((catalog, reader)) = open_catalog(&at, config).await? {
        return cat_catalog(&*catalog, &reader, &path).await;
    }
    let (dataset, tree) = load_tree(&at, config).await?;
    let item = tree.resolve_file(&path)?.data();
    let reader = Reader::new(dataset.store().clone(), CacheOptions::default(), None);
    let mut out = std::io::stdout().lock();
    let mut offset = 0;
    while offset < item.size {
        let bytes = reader.read_item(&item, offset, STEP).await?;
        match out.write_all(&bytes) {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
            r => r?,
        }
        offset += bytes.len() as u64;
    }
    out.flush()?;
    Ok(())
}

pub async fn run_info(at: DatasetAt, json: bool, config: &StoreConfig) -> CliResult {
    let dataset = Dataset::open_with(&at.dataset, false, config)?;
    let resolved = dataset.resolve_revision(&at.revision).await?;
    let info = packfs_core::info::info(&dataset, &resolved).await?;
    let mut out = std::io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(&mut out, &info)?;
        writeln!(out)?;
        return Ok(());
    }
    writeln!(out, "dataset   {}", info.location)?;
    writeln!(
        out,
        "revision  {} = manifest {} ({}, {})",
        info.revision, info.manifest, info.created, info.writer
    )?;
    let depth = info.history_depth;
    let plural = if depth == 1 { "" } else { "s" };
    writeln!(
        out,
        "history   {depth} Manifest{plural} along first parents"
    )?;
    writeln!(out)?;
    let header = [
        "TIMELINE",
        "MODALITY",
        "ITEMS",
        "BYTES",
        "PACKED",
        "WHOLE",
        "CHUNKED",
        "PACKS",
        "PACK SIZES",
        "FILL",
    ];
    let row = |timeline: &str, modality: &str, c: &packfs_core::info::Counts| -> [String; 10] {
        let sizes = match c.packs {
            0 => "-".to_string(),
            _ => format!("{}–{}", HumanBytes(c.pack_min), HumanBytes(c.pack_max)),
        };
        [
            timeline.to_string(),
            modality.to_string(),
            c.items.to_string(),
            HumanBytes(c.bytes).to_string(),
            c.packed_items.to_string(),
            c.whole_items.to_string(),
            match c.chunked_items {
                0 => "0".to_string(),
                n => format!("{n} ({} chunks)", c.chunks),
            },
            c.packs.to_string(),
            sizes,
            format!("{:.0}%", c.pack_fill * 100.0),
        ]
    };
    let mut rows: Vec<[String; 10]> = vec![header.map(String::from)];
    rows.extend(
        info.tracks
            .iter()
            .map(|t| row(&t.timeline, &t.modality, &t.counts)),
    );
    rows.push(row("total", "", &info.totals));
    let widths: Vec<usize> = (0..10)
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    for r in &rows {
        let cells: Vec<String> = r
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(i, (cell, w))| match i {
                0 | 1 => format!("{cell:<w$}"),
                _ => format!("{cell:>w$}"),
            })
            .collect();
        writeln!(out, "{}", cells.join("  ").trim_end())?;
    }
    Ok(())
}

pub async fn run_log(at: DatasetAt, max_count: usize, config: &StoreConfig) -> CliResult {
    let dataset = Dataset::open_with(&at.dataset, false, config)?;
    let mut out = std::io::stdout().lock();
    for (id, m) in dataset.history(&at.revision.to_string(), max_count).await? {
        let date = chrono::DateTime::from_timestamp_nanos(m.ts_unix_ns as i64);
        writeln!(out, "manifest {id}")?;
        if m.parents.len() > 1 {
            let parents: Vec<String> = m.parents.iter().map(|p| p.short()).collect();
            writeln!(out, "Merge:   {}", parents.join(" "))?;
        }
        writeln!(out, "Date:    {}", date.format("%Y-%m-%d %H:%M:%S%.3f UTC"))?;
        writeln!(out, "Writer:  {}", m.writer)?;
        for t in &m.tracks {
            writeln!(
                out,
                "Track:   {}/{} {}",
                t.timeline,
                t.modality,
                t.track.short()
            )?;
        }
        if m.parents.len() > 1 {
            for c in dataset.conflicts_of(&id).await? {
                writeln!(out, "Conflict: {}", conflict_line(&c))?;
            }
        }
        writeln!(out)?;
    }
    Ok(())
}

pub async fn run_gc(
    dataset: String,
    dry_run: bool,
    grace: Duration,
    config: &StoreConfig,
) -> CliResult {
    packfs_core::gc::check_grace(grace)?;
    let dataset = Dataset::open_with(&dataset, false, config)?;
    let progress = Bar::new("gc", true);
    let report = packfs_core::gc::gc_with(&dataset, grace, dry_run, &progress).await?;
    let verb = if dry_run { "would delete" } else { "deleted" };
    let mut out = std::io::stdout().lock();
    for (path, size) in &report.unreachable {
        writeln!(out, "{verb} {path} ({size} bytes)")?;
    }
    let bytes: u64 = report.unreachable.iter().map(|(_, s)| s).sum();
    eprintln!(
        "{} refs, {} manifests and {} objects reachable; {verb} {} unreachable objects ({bytes} bytes); \
         kept {} younger than {:?}",
        report.refs,
        report.manifests_kept,
        report.objects_kept,
        report.unreachable.len(),
        report.too_young,
        grace
    );
    if report.spared > 0 {
        eprintln!(
            "kept {} objects a writer reused or committed while gc ran",
            report.spared
        );
    }
    Ok(())
}

pub async fn run_diff(
    dataset: String,
    from: Revision,
    to: Revision,
    nul: bool,
    config: &StoreConfig,
) -> CliResult {
    use packfs_core::diff::{quote_path, Change};
    let dataset = Dataset::open_with(&dataset, false, config)?;
    let from = dataset.resolve_revision(&from).await?;
    let to = dataset.resolve_revision(&to).await?;
    let reader = Reader::new(dataset.store().clone(), CacheOptions::default(), None);
    let report = packfs_core::diff::diff(&dataset, &from, &to, &reader).await?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let written = report.differences.iter().try_for_each(|d| match nul {
        true => write!(out, "{}\0{}\0", d.change.marker(), d.path),
        false => writeln!(out, "{}\t{}", d.change.marker(), quote_path(&d.path)),
    });
    match written.and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
        r => r?,
    }
    let sides = format!(
        "from {} ({}) to {} ({})",
        from.revision,
        from.id.short(),
        to.revision,
        to.id.short()
    );
    match report.differences.is_empty() {
        true => eprintln!("{sides}: no differences"),
        false => eprintln!(
            "{sides}: {} added, {} removed, {} modified, {} touched (mode or mtime only)",
            report.count(Change::Added),
            report.count(Change::Removed),
            report.count(Change::Modified),
            report.count(Change::Touched),
        ),
    }
    match report.items_read {
        0 => {}
        1 => eprintln!(
            "1 item of the same size stored apart was read and compared ({} bytes read)",
            report.bytes_read
        ),
        n => eprintln!(
            "{n} items of the same size stored apart were read and compared ({} bytes read)",
            report.bytes_read
        ),
    }
    Ok(())
}

pub async fn run_branch(
    dataset: String,
    name: String,
    from: Revision,
    config: &StoreConfig,
) -> CliResult {
    let dataset = Dataset::open_with(&dataset, false, config)?;
    let id = dataset.create_branch(&name, &from.to_string()).await?;
    eprintln!("created ref {name} at manifest {id} (from {from})");
    Ok(())
}

pub async fn run_merge(
    dataset: String,
    into: String,
    branches: Vec<Revision>,
    config: &StoreConfig,
) -> CliResult {
    let dataset = Dataset::open_with(&dataset, false, config)?;
    dataset.store().ensure_atomic_refs().await?;
    let names: Vec<String> = branches.iter().map(Revision::to_string).collect();
    let writer = writer_string(&format!("merge {}", names.join(" ")));
    let report = dataset.merge_refs(&into, &names, &writer).await?;
    for c in &report.conflicts {
        println!("conflict {}", conflict_line(c));
    }
    let what = match report.outcome {
        MergeOutcome::UpToDate => "already up to date".to_string(),
        MergeOutcome::FastForward => "fast-forwarded".to_string(),
        MergeOutcome::Merged { parents } => format!("merged ({parents} parents)"),
    };
    let n = report.conflicts.len();
    eprintln!(
        "ref {into} {what}: manifest {}{}",
        report.manifest,
        match n {
            0 => String::new(),
            1 => ", 1 conflict".into(),
            n => format!(", {n} conflicts"),
        }
    );
    Ok(())
}

/// What `merge` and `log` say of a merge conflict.
fn conflict_line(c: &Conflict) -> String {
    let dir = format!("{}/{}", c.timeline, c.modality);
    format!(
        "{dir}/{}: the merged-in version is kept as {dir}/{}",
        c.name, c.renamed_to
    )
}

/// Returns whether the dataset passed.
pub async fn run_verify(
    at: DatasetAt,
    config: &StoreConfig,
) -> Result<bool, Box<dyn std::error::Error>> {
    let dataset = Dataset::open_with(&at.dataset, false, config)?;
    match LocationKind::of(dataset.store()).await? {
        LocationKind::Bundle => return verify_bundle(dataset.store()).await,
        LocationKind::Array => return verify_array(dataset.store(), at.at).await,
        _ => {}
    }
    let progress = Bar::new("verifying objects", true);
    let revision = at.revision.to_string();
    let report = packfs_core::verify::verify_with(&dataset, &revision, &progress).await?;
    for p in &report.problems {
        println!("FAIL {p}");
    }
    let manifest = report.manifest.map(|m| m.to_hex()).unwrap_or_default();
    if report.problems.is_empty() {
        println!(
            "OK ref {} manifest {manifest}: {} items, {} objects, {} bytes verified",
            at.revision, report.items, report.objects, report.bytes
        );
    } else {
        let n = report.problems.len();
        let noun = if n == 1 { "problem" } else { "problems" };
        println!("{n} {noun} in ref {} manifest {manifest}", at.revision);
    }
    Ok(report.problems.is_empty())
}

/// `packfs verify` of a DataBundle.
async fn verify_bundle(store: &Store) -> Result<bool, Box<dyn std::error::Error>> {
    let reader = Reader::new(store.clone(), CacheOptions::default(), None);
    let index_dir = packfs_fs::mount::bundle_index_dir(None);
    let report = packfs_core::verify::bundle::verify(store, &index_dir, reader).await?;
    for p in &report.problems {
        println!("FAIL {p}");
    }
    let location = store.location();
    match report.problems.len() {
        0 => println!(
            "OK bundle {location}: {} files, {} directories, {} records, {} bytes verified",
            report.files, report.directories, report.records, report.bytes
        ),
        1 => println!("1 problem in bundle {location}"),
        n => println!("{n} problems in bundle {location}"),
    }
    Ok(report.problems.is_empty())
}

/// `packfs verify` of a TileDB array (as of `at`, milliseconds).
async fn verify_array(store: &Store, at: Option<u64>) -> Result<bool, Box<dyn std::error::Error>> {
    let array = packfs_core::array::Array::open(store, at).await?;
    let reader = Reader::new(store.clone(), CacheOptions::default(), None);
    let report = packfs_core::verify::array::verify(&array, reader.cache()).await;
    for p in &report.problems {
        println!("FAIL {p}");
    }
    let location = store.location();
    match report.problems.len() {
        0 => println!(
            "OK TileDB array {location}: {} fragments, {} tiles, {} bytes verified",
            report.fragments, report.tiles, report.bytes
        ),
        1 => println!("1 problem in TileDB array {location}"),
        n => println!("{n} problems in TileDB array {location}"),
    }
    Ok(report.problems.is_empty())
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
