//! The packfs benchmark: real mounts of data built here, each measurement
//! set against references on the same files in the same run.
//!
//!     cargo run --release --example bench                     # every scenario, 3 rounds
//!     cargo run --release --example bench -- --quick          # smaller data, 1 round
//!     cargo run --release --example bench -- --only cold,writes
//!     cargo run --release --example bench -- --help           # the scenarios and options
//!
//! It builds its data in a temporary directory, imports it into local
//! directory datasets and mounts them with the `packfs` binary (the daemon,
//! so its memory can be read; rebuilt when older than this example). Each
//! scenario is a module named for what it measures:
//!
//! - `warm` ([`warm`], [`prefetch`]): a sequential read of a 512 MiB item
//!   (first and second pass), scans of 5,000 items of 16–64 KiB with 1 and
//!   8 readers, 20,000 random 4 KiB preads, the daemons' peak memory, all
//!   on `--read-only` mounts against the disk (warm page cache),
//!   fuse-ceiling and (second pass) tmpfs; and the 1-reader scan mounted in
//!   this process over a store that waits 20 ms per GET, prefetch on and
//!   off.
//! - `default-mount` ([`default_mount`]): the same first passes on a
//!   default (read-write) mount, in the same rounds, against fuse-ceiling
//!   beside `--read-only`.
//! - `epochs` ([`epochs`]): the big item re-read after a remount on the
//!   same `--cache-dir` (default and `--read-only` mounts) against the
//!   plain file with a warm page cache.
//! - `cold` ([`cold`], root only): a tree of its own read after
//!   `drop_caches`: a shuffled and a sorted scan, the bytes fetched per
//!   byte delivered, a 256 MiB item, `ls -lR`; against the plain
//!   directory, `squashfuse_ll` over a squashfs image and fuse-ceiling.
//! - `writes` ([`writes`]): `cp -r` and `tar -x` of 20,000 small files into
//!   a read-write mount against a plain directory and the write ceiling
//!   ([`write_ceiling`]), the commit at unmount, the objects stored.
//! - `many-items` ([`many_items`]): a 1,000,000-item dataset: mount time,
//!   `find`, `ls -lR`, the daemon's memory.
//! - `bundles` ([`bundles`]): a DataBundle against a dataset of the same
//!   compressible tree.
//! - `arrays` ([`arrays`]): a TileDB array scanned through packfs against
//!   the Python `tiledb` package reading the same cells.
//! - `engine` ([`engine`], in process): direct write of a shard-like read
//!   against the staging path it replaced.
//! - `views` ([`views`]): WebDataset shards against the same items as
//!   files, shuffled against key order.
//! - `scale` ([`scale`]): mounts of 1M, 3M and 10M items, and `packfs
//!   import` of 1M files against `tar -cf`.
//!
//! What they share: the command line and the sizes of a run ([`cli`]),
//! the mounts and daemons ([`mounts`]), the references built or found here
//! (fuse-ceiling, squashfuse_ll, tmpfs: [`references`]), the generated
//! data ([`data`]), the timed readers ([`readers`]) and the tables
//! ([`table`]).
//!
//! Reading the output: one Markdown table per scenario on stdout, one row
//! per figure. *packfs* is the measured figure, *References* the same
//! measurement on the references, *Ratio* packfs divided by a reference
//! (above 1× packfs is faster), *Target* the bar set for it and *Met*
//! whether this run reached it. MB is 10^6 bytes. On this shared 2-core
//! machine figures vary by ±30% between runs, so compare within one run.
//! Progress goes to stderr. Results and what limits them are in
//! `docs/PERFORMANCE.md`.

mod arrays;
mod bundles;
mod cli;
mod cold;
mod data;
mod default_mount;
mod engine;
mod epochs;
mod many_items;
mod mounts;
mod prefetch;
mod readers;
mod references;
mod scale;
mod table;
mod views;
mod warm;
mod write_ceiling;
mod writes;

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::OnceLock;
use std::time::Instant;

use clap::Parser;
use tokio::runtime::Runtime;

use cli::{Config, Scenario};

type Error = Box<dyn std::error::Error + Send + Sync>;
type Result<T> = std::result::Result<T, Error>;

static START: OnceLock<Instant> = OnceLock::new();

/// A progress line on stderr, with the seconds since the start.
fn progress(message: impl fmt::Display) {
    let elapsed = START.get_or_init(Instant::now).elapsed().as_secs_f64();
    eprintln!("[bench {elapsed:7.1}s] {message}");
}

/// The middle element by `key` (the upper one of an even count).
fn median_by<T>(items: &[T], key: impl Fn(&T) -> f64) -> &T {
    let mut sorted: Vec<&T> = items.iter().collect();
    sorted.sort_by(|a, b| key(a).total_cmp(&key(b)));
    sorted[sorted.len() / 2]
}

fn main() -> ExitCode {
    match run(Config::new(cli::Args::parse())) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench: {e}");
            ExitCode::FAILURE
        }
    }
}

/// What every mounting scenario works with: the sizes of the run, the
/// runtime, the `packfs` binary and the temporary directory (deleted on
/// drop, after everything mounted in it is unmounted).
struct Bench {
    config: Config,
    runtime: Runtime,
    bin: PathBuf,
    /// fuse-ceiling, built on first use; `Err` says why it is missing.
    ceiling: OnceLock<std::result::Result<PathBuf, String>>,
    work: tempfile::TempDir,
}

impl Bench {
    /// The temporary directory.
    fn work(&self) -> &Path {
        self.work.path()
    }

    /// A new empty directory `name` in the temporary directory.
    fn mountpoint(&self, name: &str) -> Result<PathBuf> {
        let path = self.work().join(name);
        fs::create_dir(&path)?;
        Ok(path)
    }

    /// The fuse-ceiling binary, or why there is none.
    fn ceiling(&self) -> std::result::Result<&Path, &String> {
        self.ceiling
            .get_or_init(references::fuse_ceiling_binary)
            .as_deref()
    }
}

/// `Some(measure())` when `wanted`.
fn when<T>(wanted: bool, measure: impl FnOnce() -> Result<T>) -> Result<Option<T>> {
    wanted.then(measure).transpose()
}

/// Runs the chosen scenarios in the order of [`Scenario`], then prints
/// their tables in the same order. A scenario also runs the measurements
/// it is set against (the default mount is measured in the warm rounds,
/// the bundles' 1M-file rows against the many-items dataset); only the
/// chosen scenarios' tables are printed.
fn run(config: Config) -> Result<()> {
    progress(format!(
        "{} run: {}",
        config.mode(),
        config.scenario_names()
    ));
    let runtime = Runtime::new()?;
    if !config.scenarios.iter().any(|s| s.mounts()) {
        let engine = engine::measure(&runtime)?;
        progress("done");
        table::print_header(&config);
        engine::print(&engine);
        return Ok(());
    }
    let bench = Bench {
        bin: mounts::packfs_binary()?,
        ceiling: OnceLock::new(),
        work: tempfile::Builder::new().prefix("packfs-bench-").tempdir()?,
        config,
        runtime,
    };
    let b = &bench;
    let want = |s| b.config.wants(s);
    use Scenario::*;
    let tree = when(want(Warm) || want(DefaultMount) || want(Epochs), || {
        data::ReadTree::build(b)
    })?;
    let (compared, delayed, epochs) = match &tree {
        Some(tree) => (
            when(want(Warm) || want(DefaultMount), || warm::compare(b, tree))?,
            when(want(Warm), || prefetch::measure(b, tree))?,
            when(want(Epochs), || epochs::measure(b, tree))?,
        ),
        None => (None, None, None),
    };
    let cold = when(want(Cold), || cold::measure(b))?;
    let writes = when(want(Writes), || writes::measure(b))?;
    let many = when(
        (want(ManyItems) || want(Bundles)) && !b.config.skip_1m,
        || many_items::measure(b),
    )?;
    let bundles = when(want(Bundles), || bundles::measure(b))?;
    let arrays = when(want(Arrays), || arrays::measure(b))?;
    let engine = when(want(Engine), || engine::measure(&b.runtime))?;
    let views = when(want(Views), || views::measure(b))?;
    let scale = when(want(Scale), || scale::measure(b))?;
    progress("done");

    let config = &b.config;
    table::print_header(config);
    if let (true, Some(compared), Some(delayed)) = (want(Warm), &compared, &delayed) {
        warm::print(config, compared, delayed);
    }
    if let (true, Some(compared)) = (want(DefaultMount), &compared) {
        default_mount::print(config, compared);
    }
    if let Some(epochs) = &epochs {
        epochs::print(config, epochs);
    }
    if let Some(cold) = &cold {
        cold::print(config, cold);
    }
    if let Some(writes) = &writes {
        writes::print(writes);
    }
    if want(ManyItems) {
        many_items::print(config, many.as_ref());
    }
    if let Some(bundles) = &bundles {
        bundles::print(config, bundles, many.as_ref());
    }
    if want(Arrays) {
        arrays::print(config, arrays.flatten().as_ref());
    }
    if let Some(engine) = &engine {
        engine::print(engine);
    }
    if let Some(views) = &views {
        views::print(config, views);
    }
    if let Some(scale) = &scale {
        scale::print(scale);
    }
    Ok(())
}
