//! The command line: the parser, the options every command shares, and one
//! module per command holding its arguments and what it runs.

mod branch;
mod bundle;
mod cat;
mod completions;
mod contents;
mod diff;
mod error_text;
mod expire;
mod gc;
mod import;
mod info;
mod install_helper;
mod log;
mod ls;
mod man;
mod merge;
mod mount;
mod sync;
mod umount;
mod verify;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use packfs_core::dataset::Revision;
use packfs_core::store::faults::Faults;
use packfs_core::store::{StoreConfig, StoreOptions, UNSAFE_REFS_ENV};
use packfs_core::units::parse_duration;

pub(crate) use error_text::error_text;

/// What a command returns.
type CliResult<T = ()> = Result<T, Box<dyn std::error::Error>>;

/// Mount packed datasets in object storage as ordinary files.
///
/// A dataset lives in a local directory (the default) or under an object
/// store URL (s3://bucket/prefix, gs://…, az://…). Its files are packed
/// many-to-an-object; packfs serves them as /<timeline>/<modality>/<name>.
#[derive(Parser, Debug)]
#[command(name = "packfs", version, propagate_version = true)]
pub(crate) struct Cli {
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
pub(crate) struct StoreArgs {
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
    /// (see crates/core/src/store/faults.rs).
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
    pub(crate) fn config(&self) -> StoreConfig {
        let defaults = StoreOptions::default();
        StoreConfig::default()
            .options(
                defaults
                    .timeout(self.timeout.unwrap_or(defaults.timeout))
                    .connect_timeout(self.connect_timeout.unwrap_or(defaults.connect_timeout))
                    .retry_deadline(self.retry_deadline.unwrap_or(defaults.retry_deadline)),
            )
            .endpoint(self.endpoint.clone())
            .region(self.region.clone())
            .path_style(self.path_style)
            .allow_http(self.allow_http)
            .unsafe_refs(std::env::var(UNSAFE_REFS_ENV).is_ok_and(|v| v == "1"))
            .faults(self.inject_faults.clone())
    }
}

#[derive(Subcommand, Debug)]
pub(crate) enum Command {
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
    Import(import::ImportArgs),
    /// Mount a dataset or a DataBundle (returns once mounted; see
    /// --foreground).
    ///
    /// Files written into the mount are spooled locally, packed and
    /// committed to the ref on fsync, after 2 s without changes, when
    /// --pack-items/--pack-bytes are reached, and at unmount. `packfs
    /// sync MOUNTPOINT` commits at once; `packfs umount MOUNTPOINT` (or
    /// `umount MOUNTPOINT` as root after `packfs install-helper`) returns
    /// once everything is committed. `fusermount3 -u` returns at once and
    /// the daemon commits after.
    ///
    /// A DataBundle (recognised by its index, `index/bundle.sqlite`) is
    /// mounted read-only as the tree it holds; its index is queried on
    /// demand, and a remote bundle's index is downloaded once into
    /// <cache-dir>/bundle-index (or packfs's state directory).
    Mount(Box<mount::MountArgs>),
    /// Commit everything written into a read-write mount so far, and keep
    /// it mounted.
    ///
    /// Exit 0 once it is in the dataset; 1 if the commit failed (the
    /// mount's log says why; the files stay in its spool and are retried).
    /// The same as an `fsync` of the mount's root directory. (`sync -f`
    /// does not reach a FUSE daemon.)
    Sync(sync::SyncArgs),
    /// Unmount a mount once everything written into it is committed, and
    /// wait for its daemon to exit.
    ///
    /// Commits first (as `packfs sync`), then unmounts (umount(2) as root,
    /// `fusermount3 -u` as the user who mounted), then waits for the
    /// daemon's last commit. Exit 0: everything written is in the dataset.
    /// Exit 1: the commit failed (still mounted), the mount is busy
    /// (still mounted, everything so far committed), or changes stayed in
    /// the spool (named, with how to commit them). After `packfs
    /// install-helper`, `umount MOUNTPOINT` as root does the same.
    Umount(umount::UmountArgs),
    /// List a directory of the dataset (or show one file).
    Ls(ls::LsArgs),
    /// Write a file of the dataset to stdout.
    Cat(cat::CatArgs),
    /// Summarize a dataset: per timeline and modality its items and bytes,
    /// packed, whole and chunked items, packs and how full they are, and
    /// how deep its history is. A table, or JSON with --json.
    Info(info::InfoArgs),
    /// Show the Manifest history of a revision (--ref), newest first.
    Log(log::LogArgs),
    /// Check every object and invariant of a revision (--ref); exit 1 on
    /// any problem.
    ///
    /// For a DataBundle: the rules docs/DATABUNDLE.md lists under
    /// "Checking a bundle" (shard headers, padding included; no shard file
    /// past shard_count; index keys of the format's kinds only; records:
    /// where they are stored, the stream they cover, one zstd frame or
    /// gzip member each decoding to its length; entries: names and
    /// parents) and every file's CRC32C, one line a problem, naming the
    /// broken rule.
    Verify(verify::VerifyArgs),
    /// List the items added, removed and changed from revision FROM to TO.
    ///
    /// One line per item, sorted by path: a marker, a tab and
    /// /<timeline>/<modality>/<name>. Markers: + added, - removed, M other
    /// bytes, T same bytes but another mode or mtime. A path holding a
    /// control character, '"' or '\' is printed in double quotes with C
    /// escapes. A summary goes to stderr. Items whose Track entries cannot
    /// tell (same size, stored elsewhere) are read on both sides and
    /// compared. Exits 0 whether or not the revisions differ.
    Diff(diff::DiffArgs),
    /// Cut the history down to what you keep, so `packfs gc` can delete
    /// what only older Manifests named.
    ///
    /// Kept: each ref's newest --keep-last Manifests and every Manifest
    /// younger than --keep-within (at least 1h), what merges between refs
    /// need (where their histories part, and what lies between), and the
    /// Manifests running mounts hold (their leases; a mount that died holds
    /// its Manifest for 7 days, for its spool). Nothing is rewritten: an
    /// expiry record under _packfs/expiry/ lists the parent links cut, and
    /// log, REV~N, merges and gc stop there.
    Expire(expire::ExpireArgs),
    /// Delete objects no ref reaches (uploads that never committed, objects
    /// of deleted branches, what only expired Manifests named). Every
    /// Manifest a ref or a running mount can reach, and all it names,
    /// stays.
    Gc(gc::GcArgs),
    /// Create a branch: a new ref at the Manifest of another.
    ///
    /// Import into it (`packfs import --ref NAME`) and bring it back with
    /// `packfs merge`.
    Branch(branch::BranchArgs),
    /// Merge branches into a ref: one Manifest with all of them as parents.
    ///
    /// Per (timeline, modality), the items each branch added, replaced or
    /// removed since the common ancestor are applied together (union
    /// merge). A name changed on two sides keeps the version of --into (or
    /// the earlier branch); the other is kept as NAME.conflict-<id>.EXT and
    /// listed. A branch already merged is skipped; a single branch ahead of
    /// --into is a fast-forward. Branch refs are left in place.
    Merge(merge::MergeArgs),
    /// DataBundles: a directory of shard files and a SQLite index, on a
    /// local disk or under an object-store prefix (docs/DATABUNDLE.md).
    Bundle {
        #[command(subcommand)]
        command: bundle::BundleCommand,
    },
    /// Print a shell completion script, generated from this command line.
    ///
    /// bash: `packfs completions bash > /etc/bash_completion.d/packfs`;
    /// zsh: into a directory of `$fpath` as `_packfs`; fish: into
    /// `~/.config/fish/completions/packfs.fish`.
    Completions(completions::CompletionsArgs),
    /// Let mount(8) mount datasets: `mount -t fuse.packfs DATASET DIR -o
    /// OPTIONS` and `/etc/fstab` lines of type `fuse.packfs`; and let
    /// umount(8) unmount them once committed.
    ///
    /// Links DIR/mount.fuse.packfs and DIR/umount.fuse.packfs to this
    /// binary. mount(8) runs the first with `-o` options, each a `packfs
    /// mount` flag (`ref=main`, `cache_dir=/var/cache/packfs`,
    /// `allow_other`, `ro`; `_netdev`, `nofail`, `x-systemd.*` are ignored
    /// as mount(8) expects); umount(8) runs the second, which is `packfs
    /// umount`.
    InstallHelper(install_helper::InstallHelperArgs),
    /// Print the manual page (roff), generated from this command line.
    ///
    /// `packfs man > /usr/local/share/man/man1/packfs.1`; with `--dir D`,
    /// also one page per subcommand (`packfs-mount.1`, …) into D.
    Man(man::ManArgs),
}

impl Command {
    /// Whether the command detaches from the terminal (a mount without
    /// `--foreground`), so its log must not be coloured.
    pub(crate) fn daemonizes(&self) -> bool {
        matches!(self, Command::Mount(args) if !args.foreground)
    }

    /// Whether the command runs to an end (an import, a merge, `gc`…),
    /// not a daemon serving reads.
    pub(crate) fn is_batch(&self) -> bool {
        !matches!(self, Command::Mount(_))
    }

    /// Runs the command with the store settings `store`. `Ok(false)`: it
    /// ran and found problems (`verify`).
    pub(crate) fn run(self, store: StoreConfig) -> CliResult<bool> {
        let done = |()| true;
        match self {
            // Mounting may fork, so it runs before any runtime thread exists.
            Command::Mount(args) => mount::run(&args, store).map(done),
            Command::Completions(args) => completions::run(args).map(done),
            Command::InstallHelper(args) => install_helper::run(&args).map(done),
            Command::Sync(args) => sync::run(&args).map(done),
            Command::Umount(args) => umount::run(&args).map(done),
            Command::Man(args) => man::run(args).map(done),
            Command::Import(args) => block_on(import::run(args, &store)).map(done),
            Command::Ls(args) => block_on(ls::run(args, &store)).map(done),
            Command::Cat(args) => block_on(cat::run(args, &store)).map(done),
            Command::Info(args) => block_on(info::run(args, &store)).map(done),
            Command::Log(args) => block_on(log::run(args, &store)).map(done),
            Command::Verify(args) => block_on(verify::run(args, &store)),
            Command::Diff(args) => block_on(diff::run(args, &store)).map(done),
            Command::Expire(args) => block_on(expire::run(args, &store)).map(done),
            Command::Gc(args) => block_on(gc::run(args, &store)).map(done),
            Command::Branch(args) => block_on(branch::run(args, &store)).map(done),
            Command::Merge(args) => block_on(merge::run(args, &store)).map(done),
            Command::Bundle { command } => block_on(command.run(&store)).map(done),
        }
    }
}

/// Runs `command` to its end on a new runtime.
fn block_on<T>(command: impl Future<Output = CliResult<T>>) -> CliResult<T> {
    tokio::runtime::Runtime::new()?.block_on(command)
}

/// Where a command reads: a location and a revision of it.
#[derive(Args, Debug)]
pub(crate) struct DatasetAt {
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
