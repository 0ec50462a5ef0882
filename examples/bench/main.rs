//! The read-path benchmark of issue 3: real FUSE mounts of data built here,
//! measured against references on the same files in the same run.
//!
//!     cargo run --release --example bench [-- [--quick] [--skip-1m] [--only-tiledb] [--only-views] [--only-writes] [--only-engine] [--only-scale [--scale-items N,N…] [--no-import]] [--runs N]]
//!
//! It writes a source tree into a temporary directory (one big item of
//! 512 MiB and 5,000 items of 16–64 KiB; `--quick`: 128 MiB and 1,000),
//! imports it with `packfs::import` into a local directory dataset, and
//! measures, with Rust threads reading in 1 MiB `read` calls into a reused
//! buffer and checking every byte count:
//!
//! 1. a sequential read of the big item, first pass and second pass (MB/s);
//! 2. a scan of the small items in directory order, 1 reader and 8 readers
//!    (each reader a contiguous slice of the listing; the listing is timed);
//! 3. the 1-reader scan again, mounted in-process over an `InMemory` store
//!    that waits 20 ms before every GET, with prefetch on and off (prefetch
//!    off times only the first 500 files, 100 with `--quick`);
//! 4. 20,000 random 4 KiB `pread`s in the big item, and a 1,000,000-item
//!    dataset (100,000 with `--quick`, skipped with `--skip-1m`) built
//!    directly with the library: mount time, `find | wc -l` time,
//!    `ls -lR` time (on a fresh mount) and the daemon's memory;
//! 5. `cp -r` and `tar -x` (of a tar made once) of 20,000 files of
//!    1–16 KiB (2,000 with `--quick`) into a read-write mount against the
//!    same into a plain directory and into the write ceiling
//!    (`write_ceiling.rs`: a FUSE filesystem in this process that keeps
//!    the files in RAM and does nothing else, with the requests per file
//!    it served), the time the daemon then takes to commit
//!    at unmount, and the objects it stored (checked with `diff -r` on a
//!    read-only remount); medians of the rounds, each into fresh
//!    directories and fresh mounts. Alone with `--only-writes`.
//!
//! Then the measurements of issue 11 ("Read performance II"), in a second
//! table:
//!
//! 11.1, 11.2 (cold: each figure on a fresh mount after `sync; echo 3 >
//! /proc/sys/vm/drop_caches`, so root only; skipped, saying so, otherwise)
//! on a tree of its own (20,000 items of 16–64 KiB and a 256 MiB item;
//! `--quick`: 2,000 and 64 MiB): 5,000 of the items (500) in a shuffled
//! order of fixed seed read by one reader, with the bytes the mount fetched
//! from its store (`bytes_fetched` of `/.packfs/stats`) against the bytes
//! delivered; 1 MiB reads of the big item; the first 5,000 items in name
//! order with 1 and 8 readers (each reader takes the next file of the list,
//! like `xargs -n1 -P8`); `ls -lR`. Measured on the plain directory,
//! `squashfuse_ll` over an uncompressed squashfs image of the tree
//! (`mksquashfs TREE IMG -noI -noD -noF -noX`; the column is left out,
//! saying how to install it, when squashfuse or squashfs-tools is missing),
//! fuse-ceiling (RAM: the FUSE limit, not a cold read) and `packfs mount
//! --read-only`.
//!
//! 11.3: measurements 1 and 2 also run on a default mount (`packfs mount`
//! without flags, read-write), set against fuse-ceiling beside
//! `--read-only`.
//!
//! 11.4 (later epochs): with `--cache-dir`, on a default and a
//! `--read-only` mount, the big item read whole, the mount unmounted and
//! mounted again on the same cache directory, and the item read again,
//! against the same file on the plain disk with a warm page cache. The
//! `/.packfs/stats` counters whose names mention passthrough are printed,
//! whichever exist.
//!
//! Then issue 13's TileDB rows (`array.rs`; alone with `--only-tiledb`) and
//! issue 14's WebDataset-view rows (`views.rs`; alone with
//! `--only-views`): 5,000 samples read as files and as the view's tar
//! shards, in key order and shuffled, from the local store and from one
//! that waits 20 ms per GET.
//!
//! The same measurements run against two references: the source directory
//! itself (*direct disk*, page cache warm: everything is read once first)
//! and `fuse-ceiling` (`../shared/tools/fuse-ceiling`, a FUSE filesystem
//! that serves the tree from RAM and does nothing else: the limit of the
//! kernel's FUSE path here); the second pass of 1. is also set against a
//! copy of the big item in tmpfs, whose page cache, like FUSE's on this
//! kernel, holds 4 KiB pages (ext4's holds large folios). packfs runs as the real `packfs mount` daemon;
//! every FUSE measurement except a second pass gets a fresh mount, so a
//! first pass starts with empty kernel and packfs caches. Measurements 1, 2
//! and the random reads (and, separately, 3) run in rounds (`--runs`, default 3, 1 with
//! `--quick`), each round measuring the disk, fuse-ceiling and packfs in
//! turn so that load on the machine hits them alike; the table shows
//! medians.
//!
//! Reading the output: three Markdown tables on stdout, one row per figure.
//! *packfs* is the measured figure, *References* the same measurement on
//! the references, *Ratio* packfs divided by a reference (above 1× packfs is
//! faster), *Target* the bar of issue 3 (first table) or 11 (second table;
//! the third, issue 12's DataBundle rows in `bundle.rs`, has none) and
//! *Met* whether this run reached it. MB is 10^6 bytes. On this shared
//! 2-core machine figures vary by ±30% between runs, so compare within one
//! run. Below each table come `/.packfs/stats` counters (of the last local
//! mount of the first table; of the last remount of 11.4). Progress goes
//! to stderr.
//!
//! Last come issue 14's engine rows (`engine.rs`, in process, a few
//! seconds; `--only-engine` runs just them): direct write of a shard-like
//! read against the staging path it replaced, in time and in bytes
//! written per MiB read.
//!
//! Then issue 15's scale rows (`scale.rs`; alone with `--only-scale`):
//! mounts of 1M, 3M and 10M tiny items (mount ready, `find | wc -l`,
//! VmHWM, `ls -lR` at 1M) and `packfs import` of 1M small files against
//! `tar -cf` of the same tree.

mod array;
mod bundle;
mod engine;
mod scale;
mod views;
mod write_ceiling;

use std::collections::HashMap;
use std::ffi::OsString;
use std::fmt;
use std::fs::{self, File};
use std::io::{Read, Seek};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::{Arc, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use bytes::Bytes;
use object_store::memory::InMemory;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt};
use packfs::cache::CacheOptions;
use packfs::dataset::{writer_string, Dataset, TrackContent, TrackUpdate};
use packfs::format::{FragmentEntry, ObjectId, Placement, Track, TrackItem};
use packfs::import::{import, ImportOptions};
use packfs::mount::{self, MountOptions};
use packfs::store::faults::{Faults, FaultyStore};
use packfs::store::Store;
use tokio::runtime::Runtime;

type Error = Box<dyn std::error::Error + Send + Sync>;
type Result<T> = std::result::Result<T, Error>;

/// Size of every `read` call of the readers.
const READ_SIZE: usize = 1 << 20;
/// Timeline and modalities of the generated tree: `bench/big/…`, `bench/small/…`.
const TIMELINE: &str = "bench";
const BIG_ITEM: &str = "bench/big/big.bin";
const SMALL_DIR: &str = "bench/small";
const SMALL_MIN: u64 = 16 << 10;
const SMALL_MAX: u64 = 64 << 10;
const SCAN_READERS: usize = 8;
const PREADS: usize = 20_000;
const PREAD_SIZE: usize = 4096;
/// Added before every GET of the store in measurement 3.
const GET_LATENCY: Duration = Duration::from_millis(20);
/// The many-item dataset: modality, directories and items per pack.
const TINY_MODALITY: &str = "tiny";
const TINY_DIRS: usize = 1000;
const TINY_PER_PACK: usize = 50_000;
/// Threads fuse-ceiling serves with (its README's calibration).
const CEILING_THREADS: &str = "4";
/// How long fuse-ceiling may take to load the tree and mount.
const CEILING_START_TIMEOUT: Duration = Duration::from_secs(120);
/// How long `packfs mount` may take to return.
const MOUNT_TIMEOUT: Duration = Duration::from_secs(120);
/// How long an unmounted daemon may take to exit.
const EXIT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a read-write daemon may take to commit at unmount.
const COMMIT_TIMEOUT: Duration = Duration::from_secs(300);
/// Measurement 5: files of 1–16 KiB copied into a read-write mount.
const WRITE_MIN: u64 = 1 << 10;
const WRITE_MAX: u64 = 16 << 10;

static START: OnceLock<Instant> = OnceLock::new();

fn progress(message: impl fmt::Display) {
    let elapsed = START.get_or_init(Instant::now).elapsed().as_secs_f64();
    eprintln!("[bench {elapsed:7.1}s] {message}");
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Everything mounted is unmounted before this returns, error or not.
fn run() -> Result<()> {
    let config = Config::from_args()?;
    progress(format!("{} run", config.mode()));
    if config.only_engine {
        let engine = engine::engine_bench(&Runtime::new()?)?;
        progress("done");
        engine::print_issue14(&engine);
        return Ok(());
    }
    let packfs_bin = packfs_binary()?;
    let ceiling_bin = fuse_ceiling_binary();
    let work = tempfile::Builder::new().prefix("packfs-bench-").tempdir()?;
    let mountpoint = |name: &str| -> Result<PathBuf> {
        let path = work.path().join(name);
        fs::create_dir(&path)?;
        Ok(path)
    };
    let writes = || -> Result<Writes> {
        let (mnt, ceiling) = (mountpoint("mnt-write")?, mountpoint("mnt-write-ceiling")?);
        write_bench(&packfs_bin, work.path(), &mnt, &ceiling, &config)
    };
    if config.only_writes {
        let writes = writes()?;
        progress("done");
        print_writes(&config, &writes);
        return Ok(());
    }
    if config.only_tiledb {
        let arrays = array::array_bench(&config, &packfs_bin, work.path(), &mountpoint)?;
        progress("done");
        array::print_issue13(&config, arrays.as_ref());
        return Ok(());
    }
    let runtime = Runtime::new()?;
    if config.only_scale {
        let scale = scale::scale_bench(&config, &runtime, &packfs_bin, work.path(), &mountpoint)?;
        progress("done");
        scale::print_issue15(&scale);
        return Ok(());
    }
    if config.only_views {
        let views = views::views_bench(&config, &runtime, &packfs_bin, work.path(), &mountpoint)?;
        progress("done");
        views::print_issue14(&config, &views);
        return Ok(());
    }

    let src = work.path().join("src");
    let files = generate_tree(&src, &config)?;
    let dataset_dir = work.path().join("dataset");
    runtime.block_on(import_tree(&src, &dataset_dir))?;

    progress("direct disk: reading everything once to warm the page cache");
    warm_page_cache(&src, &files)?;
    let (ceiling_mnt, packfs_mnt) = (mountpoint("mnt-ceiling")?, mountpoint("mnt-packfs")?);
    let default_mnt = mountpoint("mnt-default")?;
    let src = src.as_path();
    let small_pages = small_page_copy(src);
    let comparison = compare(
        &config,
        &files,
        small_pages.as_ref().map(|dir| dir.path()),
        || Ok(Disk(src.to_path_buf())),
        ceiling_bin
            .as_ref()
            .map(|bin| move || FuseProcess::ceiling(bin, src, &ceiling_mnt))
            .map_err(Clone::clone),
        || Daemon::mount(&packfs_bin, &dataset_dir, &packfs_mnt),
        || Daemon::mount_with(&packfs_bin, &dataset_dir, &default_mnt, &[]),
    )?;
    let latency = latency_scans(
        &runtime,
        &dataset_dir,
        &mountpoint("mnt-latency")?,
        &files,
        &config,
    )?;
    let epochs = later_epochs(
        &packfs_bin,
        src,
        &dataset_dir,
        work.path(),
        &mountpoint("mnt-epochs")?,
        &files,
        &config,
    )?;
    let cold = cold_comparison(
        &config,
        &runtime,
        work.path(),
        &packfs_bin,
        ceiling_bin.as_ref().ok().map(PathBuf::as_path),
        &mountpoint,
    )?;
    let writes = writes()?;
    let many = match config.skip_1m {
        true => None,
        false => Some(many_items(
            &runtime,
            &packfs_bin,
            &work.path().join("dataset-many"),
            &mountpoint("mnt-many")?,
            config.tiny_items,
        )?),
    };
    let bundles = bundle::bundle_bench(&config, &packfs_bin, work.path(), &mountpoint)?;
    let arrays = array::array_bench(&config, &packfs_bin, work.path(), &mountpoint)?;
    let engine = engine::engine_bench(&runtime)?;
    let views = views::views_bench(&config, &runtime, &packfs_bin, work.path(), &mountpoint)?;
    let scale = scale::scale_bench(&config, &runtime, &packfs_bin, work.path(), &mountpoint)?;
    progress("done");
    print_report(&config, &comparison, &latency, &writes, many.as_ref());
    print_issue11(&config, &comparison, &cold, &epochs);
    bundle::print_issue12(&config, &bundles, many.as_ref());
    array::print_issue13(&config, arrays.as_ref());
    engine::print_issue14(&engine);
    views::print_issue14(&config, &views);
    scale::print_issue15(&scale);
    Ok(())
}

// ---------------------------------------------------------------- setup --

/// Sizes of this run (`--quick` shrinks them).
struct Config {
    quick: bool,
    skip_1m: bool,
    /// Run issue 13's rows only (the TileDB array).
    only_tiledb: bool,
    /// Run issue 14's rows only (the WebDataset view).
    only_views: bool,
    /// Run measurement 5's rows only (writes).
    only_writes: bool,
    /// Run issue 14's engine rows only (in process, seconds).
    only_engine: bool,
    /// Run issue 15's scale rows only (1M–10M items, import of 1M files).
    only_scale: bool,
    /// `--scale-items N,N…`: the item counts of issue 15's mount rows
    /// (default 1M, 3M, 10M); `--no-import` leaves out its import row.
    scale_items: Option<Vec<usize>>,
    no_import: bool,
    /// Rounds of measurements 1, 2 and the random reads; medians are shown.
    runs: usize,
    big_bytes: u64,
    small_files: usize,
    /// Files timed in the prefetch-off scan of measurement 3.
    off_files: usize,
    tiny_items: usize,
    /// Files copied into the read-write mount in measurement 5.
    write_files: usize,
    /// Issue 11's cold tree: small files, how many of them a cold scan
    /// reads, and the size of its big item.
    pool_files: usize,
    sample_files: usize,
    cold_big_bytes: u64,
}

impl Config {
    fn from_args() -> Result<Config> {
        let usage =
            "usage: cargo run --release --example bench [-- [--quick] [--skip-1m] [--only-tiledb] [--only-views] [--only-writes] [--only-engine] [--only-scale [--scale-items N,N…] [--no-import]] [--runs N]]";
        let (mut quick, mut skip_1m, mut only_tiledb, mut runs) = (false, false, false, None);
        let mut only_views = false;
        let mut only_writes = false;
        let mut only_engine = false;
        let mut only_scale = false;
        let mut scale_items = None;
        let mut no_import = false;
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--quick" => quick = true,
                "--skip-1m" => skip_1m = true,
                "--only-tiledb" => only_tiledb = true,
                "--only-views" => only_views = true,
                "--only-writes" => only_writes = true,
                "--only-engine" => only_engine = true,
                "--only-scale" => only_scale = true,
                "--no-import" => no_import = true,
                "--scale-items" => {
                    let counts: Option<Vec<usize>> = args.next().and_then(|list| {
                        list.split(',')
                            .map(|n| n.parse().ok().filter(|&n| n > 0))
                            .collect()
                    });
                    let counts = counts.filter(|c| !c.is_empty());
                    scale_items =
                        Some(counts.ok_or(format!("--scale-items needs counts N,N…\n{usage}"))?);
                }
                "--runs" => {
                    let n = args.next().and_then(|n| n.parse().ok()).filter(|&n| n > 0);
                    runs = Some(n.ok_or(format!("--runs needs a positive number\n{usage}"))?);
                }
                _ => return Err(format!("unknown argument {arg:?}\n{usage}").into()),
            }
        }
        let (big_bytes, small_files, off_files, tiny_items, write_files, default_runs) = match quick
        {
            false => (512 << 20, 5_000, 500, 1_000_000, 20_000, 3),
            true => (128 << 20, 1_000, 100, 100_000, 2_000, 1),
        };
        let (pool_files, sample_files, cold_big_bytes) = match quick {
            false => (20_000, 5_000, 256 << 20),
            true => (2_000, 500, 64 << 20),
        };
        Ok(Config {
            quick,
            skip_1m,
            only_tiledb,
            only_views,
            only_writes,
            only_engine,
            only_scale,
            scale_items,
            no_import,
            runs: runs.unwrap_or(default_runs),
            big_bytes,
            small_files,
            off_files,
            tiny_items,
            write_files,
            pool_files,
            sample_files,
            cold_big_bytes,
        })
    }

    fn mode(&self) -> &'static str {
        if self.quick {
            "quick (--quick)"
        } else {
            "full"
        }
    }
}

/// A `cargo` command (the one running this example, if any).
fn cargo() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

/// `target/release/packfs` next to this example's directory, rebuilt when
/// it is missing or older than this example (the library may have changed).
fn packfs_binary() -> Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let bin = exe
        .parent()
        .and_then(Path::parent)
        .ok_or("cannot locate the target directory")?
        .join("packfs");
    let modified = |p: &Path| fs::metadata(p).and_then(|m| m.modified()).ok();
    if modified(&bin).is_none_or(|b| modified(&exe).is_some_and(|e| b < e)) {
        progress("building the packfs binary (cargo build --release --bin packfs)");
        let status = cargo()
            .args(["build", "--release", "--bin", "packfs", "--manifest-path"])
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"))
            .status()?;
        if !status.success() {
            if !bin.exists() {
                return Err(format!("building the packfs binary failed ({status})").into());
            }
            progress("WARNING: rebuilding packfs failed; using the existing binary");
        }
    }
    Ok(bin)
}

/// Builds fuse-ceiling if `../shared/tools/fuse-ceiling` exists; `Err` says
/// why its column is missing.
fn fuse_ceiling_binary() -> std::result::Result<PathBuf, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = root.join("../shared/tools/fuse-ceiling/Cargo.toml");
    if !manifest.exists() {
        return Err(format!("{} does not exist", manifest.display()));
    }
    let target = root.join("target/fuse-ceiling");
    progress(format!("building fuse-ceiling into {}", target.display()));
    let status = cargo()
        .args(["build", "--release", "--manifest-path"])
        .arg(&manifest)
        .arg("--target-dir")
        .arg(&target)
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !status.success() {
        return Err(format!("building fuse-ceiling failed ({status})"));
    }
    Ok(target.join("release/fuse-ceiling"))
}

/// The generated items and their sizes, for checking every read.
struct Files {
    big_len: u64,
    small: HashMap<OsString, u64>,
}

/// xorshift64: incompressible, distinct bytes for every file (content
/// addressing would merge identical chunks).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            chunk.copy_from_slice(&self.next().to_le_bytes()[..chunk.len()]);
        }
    }
}

fn generate_tree(root: &Path, config: &Config) -> Result<Files> {
    progress(format!(
        "writing {} small items and a {} MiB item under {}",
        thousands(config.small_files),
        config.big_bytes >> 20,
        root.display()
    ));
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let small = write_small_items(&root.join(SMALL_DIR), config.small_files, &mut rng)?;
    write_big_item(&root.join(BIG_ITEM), config.big_bytes, &mut rng)?;
    Ok(Files {
        big_len: config.big_bytes,
        small: small.into_iter().collect(),
    })
}

/// `count` items of `SMALL_MIN`–`SMALL_MAX` bytes, `dir/item-NNNNN.bin`;
/// their names and sizes in name order.
fn write_small_items(dir: &Path, count: usize, rng: &mut Rng) -> Result<Vec<(OsString, u64)>> {
    fs::create_dir_all(dir)?;
    let mut items = Vec::with_capacity(count);
    let mut buf = vec![0u8; SMALL_MAX as usize];
    for i in 0..count {
        let len = SMALL_MIN + rng.next() % (SMALL_MAX - SMALL_MIN + 1);
        let name = OsString::from(format!("item-{i:05}.bin"));
        rng.fill(&mut buf[..len as usize]);
        fs::write(dir.join(&name), &buf[..len as usize])?;
        items.push((name, len));
    }
    Ok(items)
}

/// A file of `bytes` (a multiple of `READ_SIZE`) at `path`.
fn write_big_item(path: &Path, bytes: u64, rng: &mut Rng) -> Result<()> {
    fs::create_dir_all(path.parent().expect("has a parent"))?;
    let mut file = File::create(path)?;
    let mut buf = vec![0u8; READ_SIZE];
    for _ in 0..bytes / READ_SIZE as u64 {
        rng.fill(&mut buf);
        std::io::Write::write_all(&mut file, &buf)?;
    }
    Ok(())
}

async fn import_tree(src: &Path, dataset_dir: &Path) -> Result<()> {
    progress(format!("importing into {}", dataset_dir.display()));
    let dataset = Dataset::open(path_str(dataset_dir)?, true)?;
    let mut options = ImportOptions::default();
    options.pack.progress = false;
    let report = import(&dataset, src, &options).await?;
    progress(format!(
        "imported {} items into {} objects",
        report.items,
        report.objects_written + report.objects_reused
    ));
    Ok(())
}

fn warm_page_cache(root: &Path, files: &Files) -> Result<()> {
    let mut buf = vec![0u8; READ_SIZE];
    read_checked(&root.join(BIG_ITEM), files.big_len, &mut buf)?;
    for (name, &len) in &files.small {
        read_checked(&root.join(SMALL_DIR).join(name), len, &mut buf)?;
    }
    Ok(())
}

fn path_str(path: &Path) -> Result<&str> {
    path.to_str()
        .ok_or_else(|| format!("{} is not UTF-8", path.display()).into())
}

// ----------------------------------------------------------- the readers --

/// Reads a whole file in `READ_SIZE` calls and checks its length.
fn read_checked(path: &Path, expected: u64, buf: &mut [u8]) -> Result<()> {
    let fail = |e| format!("read {}: {e}", path.display());
    let mut file = File::open(path).map_err(fail)?;
    let mut total = 0u64;
    loop {
        match file.read(buf).map_err(fail)? {
            0 => break,
            n => total += n as u64,
        }
    }
    if total != expected {
        return Err(format!(
            "{}: read {total} bytes, expected {expected}",
            path.display()
        )
        .into());
    }
    Ok(())
}

/// The big item copied into tmpfs (`/dev/shm`). On kernel 6.18 tmpfs, like
/// FUSE, caches a file in 4 KiB pages, while ext4 uses large folios: a
/// second pass there is the best any FUSE file's page cache can do here,
/// whatever the daemon. `Err` says why there is no copy.
fn small_page_copy(src: &Path) -> std::result::Result<tempfile::TempDir, String> {
    let copy = || -> Result<tempfile::TempDir> {
        let dir = tempfile::Builder::new()
            .prefix("packfs-bench-")
            .tempdir_in("/dev/shm")?;
        let dest = dir.path().join(BIG_ITEM);
        fs::create_dir_all(dest.parent().expect("BIG_ITEM has a directory"))?;
        fs::copy(src.join(BIG_ITEM), &dest)?;
        Ok(dir)
    };
    copy().map_err(|e| format!("no tmpfs copy of the big item: {e}"))
}

/// MB/s of one front-to-back read of the big item.
fn sequential(root: &Path, files: &Files) -> Result<f64> {
    let mut buf = vec![0u8; READ_SIZE];
    let start = Instant::now();
    read_checked(&root.join(BIG_ITEM), files.big_len, &mut buf)?;
    Ok(files.big_len as f64 / start.elapsed().as_secs_f64() / 1e6)
}

/// What a scan read, and how long it took.
#[derive(Clone, Copy)]
struct Scan {
    files: usize,
    bytes: u64,
    secs: f64,
}

impl Scan {
    fn files_per_sec(&self) -> f64 {
        self.files as f64 / self.secs
    }

    fn mb_per_sec(&self) -> f64 {
        self.bytes as f64 / self.secs / 1e6
    }
}

/// Lists `root/SMALL_DIR` and reads its files in listing order (the first
/// `limit` of them), split into `readers` contiguous slices read by one
/// thread each. The listing is part of the time.
fn scan(root: &Path, files: &Files, readers: usize, limit: Option<usize>) -> Result<Scan> {
    scan_dir(&root.join(SMALL_DIR), &files.small, readers, limit)
}

/// [`scan`] of the files of `dir`, which must be exactly `expected`
/// (names and sizes).
fn scan_dir(
    dir: &Path,
    expected: &HashMap<OsString, u64>,
    readers: usize,
    limit: Option<usize>,
) -> Result<Scan> {
    let start = Instant::now();
    let mut names = Vec::with_capacity(expected.len());
    for entry in fs::read_dir(dir)? {
        names.push(entry?.file_name());
    }
    if names.len() != expected.len() {
        return Err(format!(
            "{} lists {} files, expected {}",
            dir.display(),
            names.len(),
            expected.len()
        )
        .into());
    }
    names.truncate(limit.unwrap_or(names.len()));
    let work = names
        .iter()
        .map(|name| match expected.get(name) {
            Some(&len) => Ok((dir.join(name), len)),
            None => Err(format!("unexpected file {:?} in {}", name, dir.display()).into()),
        })
        .collect::<Result<Vec<_>>>()?;
    let per_reader = work.len().div_ceil(readers).max(1);
    let bytes = thread::scope(|s| {
        let readers: Vec<_> = work
            .chunks(per_reader)
            .map(|slice| s.spawn(move || read_slice(slice)))
            .collect();
        readers
            .into_iter()
            .map(|r| r.join().expect("reader thread panicked"))
            .sum::<Result<u64>>()
    })?;
    Ok(Scan {
        files: work.len(),
        bytes,
        secs: start.elapsed().as_secs_f64(),
    })
}

fn read_slice(slice: &[(PathBuf, u64)]) -> Result<u64> {
    let mut buf = vec![0u8; READ_SIZE];
    for (path, len) in slice {
        read_checked(path, *len, &mut buf)?;
    }
    Ok(slice.iter().map(|(_, len)| len).sum())
}

/// Rate and latency of random reads.
#[derive(Clone, Copy)]
struct Preads {
    per_sec: f64,
    p50: Duration,
    p99: Duration,
}

/// `PREADS` reads of `PREAD_SIZE` bytes at random aligned offsets of the
/// big item (the same offsets on every filesystem).
fn random_preads(root: &Path, files: &Files) -> Result<Preads> {
    let path = root.join(BIG_ITEM);
    let file = File::open(&path)?;
    let blocks = files.big_len / PREAD_SIZE as u64;
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let mut buf = [0u8; PREAD_SIZE];
    let mut latencies = Vec::with_capacity(PREADS);
    let start = Instant::now();
    for _ in 0..PREADS {
        let offset = rng.next() % blocks * PREAD_SIZE as u64;
        let t = Instant::now();
        let n = file.read_at(&mut buf, offset)?;
        latencies.push(t.elapsed());
        if n != PREAD_SIZE {
            return Err(format!("{}: pread at {offset} returned {n} bytes", path.display()).into());
        }
    }
    let secs = start.elapsed().as_secs_f64();
    latencies.sort_unstable();
    Ok(Preads {
        per_sec: PREADS as f64 / secs,
        p50: latencies[PREADS / 2],
        p99: latencies[PREADS * 99 / 100],
    })
}

// ---------------------------------------------------------------- mounts --

/// A filesystem root being measured; dropping it unmounts.
trait Mounted {
    fn root(&self) -> &Path;
    /// Peak resident memory of the serving process, in KiB.
    fn peak_kib(&self) -> Option<u64> {
        None
    }
    /// The `/.packfs/stats` counters.
    fn stats(&self) -> Option<String> {
        None
    }
}

/// The source directory itself.
struct Disk(PathBuf);

impl Mounted for Disk {
    fn root(&self) -> &Path {
        &self.0
    }
}

/// A FUSE filesystem served by a foreground process (fuse-ceiling,
/// squashfuse_ll); unmounted, then killed if it lingers, on drop.
struct FuseProcess {
    child: Child,
    mnt: PathBuf,
}

impl FuseProcess {
    /// Starts `command` (which serves `mnt` in the foreground) and waits
    /// until `mnt` shows up in the mount table.
    fn start(
        name: &str,
        mut command: Command,
        mnt: &Path,
        timeout: Duration,
    ) -> Result<FuseProcess> {
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .map_err(|e| format!("start {name}: {e}"))?;
        let mut process = FuseProcess {
            child,
            mnt: mnt.to_path_buf(),
        };
        let mut exited = None;
        let mounted = poll(timeout, || {
            exited = process.child.try_wait().ok().flatten();
            exited.is_some() || is_mounted(mnt).unwrap_or(false)
        });
        if let Some(status) = exited {
            return Err(format!("{name} exited before mounting ({status})").into());
        }
        if !mounted {
            return Err(format!("{name} did not mount within {timeout:?}").into());
        }
        Ok(process)
    }

    /// fuse-ceiling serving the tree `src` from RAM.
    fn ceiling(bin: &Path, src: &Path, mnt: &Path) -> Result<FuseProcess> {
        let mut command = Command::new(bin);
        command.arg(src).arg(mnt).env("N_THREADS", CEILING_THREADS);
        Self::start("fuse-ceiling", command, mnt, CEILING_START_TIMEOUT)
    }

    /// `squashfuse_ll -f IMAGE MNT`.
    fn squashfuse(bin: &Path, image: &Path, mnt: &Path) -> Result<FuseProcess> {
        let mut command = Command::new(bin);
        command.arg("-f").arg(image).arg(mnt);
        Self::start("squashfuse_ll", command, mnt, SQUASHFUSE_START_TIMEOUT)
    }
}

impl Mounted for FuseProcess {
    fn root(&self) -> &Path {
        &self.mnt
    }
}

impl Drop for FuseProcess {
    fn drop(&mut self) {
        if is_mounted(&self.mnt).unwrap_or(true) {
            unmount(&self.mnt);
        }
        if !poll(EXIT_TIMEOUT, || !matches!(self.child.try_wait(), Ok(None))) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A `packfs mount` daemon; unmounted on drop.
struct Daemon {
    mnt: PathBuf,
    pid: Option<u32>,
    /// Wall time of the `packfs mount` command (it returns once mounted).
    mount_time: Duration,
}

impl Daemon {
    /// Runs `packfs mount` (which returns once the mount is ready) and
    /// finds the daemon it left behind. On any failure, including a mount
    /// that hangs past `MOUNT_TIMEOUT`, whatever was started is ended.
    /// Read-only: the mode a training loader should use (no open or
    /// release round trip per file).
    fn mount(bin: &Path, dataset: &Path, mnt: &Path) -> Result<Daemon> {
        Self::mount_with(bin, dataset, mnt, &["--read-only"])
    }

    fn mount_with(bin: &Path, dataset: &Path, mnt: &Path, args: &[&str]) -> Result<Daemon> {
        let mut log = tempfile::tempfile()?;
        let start = Instant::now();
        let mut command = Command::new(bin)
            .arg("mount")
            .args(args)
            .arg(dataset)
            .arg(mnt)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log.try_clone()?)
            .spawn()?;
        let mut status = None;
        poll(MOUNT_TIMEOUT, || {
            status = command.try_wait().ok().flatten();
            status.is_some()
        });
        let mount_time = start.elapsed();
        if status.is_none() {
            let _ = command.kill();
            let _ = command.wait();
        }
        // Only the daemon is left now; the guard ends it whatever happens.
        let daemon = Daemon {
            mnt: mnt.to_path_buf(),
            pid: daemon_pid(mnt),
            mount_time,
        };
        match status {
            Some(s) if s.success() => {}
            Some(s) => {
                let mut message = String::new();
                log.rewind()?;
                log.read_to_string(&mut message)?;
                return Err(format!("packfs mount failed ({s}): {}", message.trim()).into());
            }
            None => {
                return Err(format!("packfs mount did not return within {MOUNT_TIMEOUT:?}").into())
            }
        }
        if daemon.pid.is_none() {
            return Err("cannot find the packfs daemon in /proc".into());
        }
        Ok(daemon)
    }

    /// Unmounts and waits for the daemon to exit (a read-write daemon
    /// commits what it spooled first); returns how long that took.
    fn unmount_and_wait(self) -> Result<Duration> {
        let start = Instant::now();
        unmount(&self.mnt);
        let pid = self.pid.ok_or("no daemon pid")?;
        if !poll(COMMIT_TIMEOUT, || !is_alive(pid)) {
            return Err(
                format!("daemon {pid} still running {COMMIT_TIMEOUT:?} after unmount").into(),
            );
        }
        Ok(start.elapsed())
    }

    /// (VmRSS, VmHWM) of the daemon, in KiB.
    fn memory_kib(&self) -> Result<(u64, u64)> {
        let pid = self.pid.ok_or("no daemon pid")?;
        let read = |field| proc_status_kib(pid, field).ok_or(format!("no {field} for pid {pid}"));
        Ok((read("VmRSS")?, read("VmHWM")?))
    }
}

impl Mounted for Daemon {
    fn root(&self) -> &Path {
        &self.mnt
    }

    fn peak_kib(&self) -> Option<u64> {
        self.memory_kib().ok().map(|(_, hwm)| hwm)
    }

    fn stats(&self) -> Option<String> {
        fs::read_to_string(self.mnt.join(".packfs/stats")).ok()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if is_mounted(&self.mnt).unwrap_or(true) {
            unmount(&self.mnt);
        }
        if let Some(pid) = self.pid {
            if !poll(EXIT_TIMEOUT, || !is_alive(pid)) {
                progress(format!(
                    "WARNING: packfs daemon {pid} did not exit; killing it"
                ));
                let _ = Command::new("kill")
                    .arg("-KILL")
                    .arg(pid.to_string())
                    .status();
            }
        }
    }
}

/// Calls `done` every 20 ms until it returns true (then true) or `timeout`
/// has passed (then false).
fn poll(timeout: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if done() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(20));
    }
}

fn unmount(mnt: &Path) {
    let ok = |args: &str| {
        Command::new("fusermount3")
            .arg(args)
            .arg(mnt)
            .status()
            .is_ok_and(|s| s.success())
    };
    if !ok("-u") && !ok("-uz") {
        progress(format!("WARNING: could not unmount {}", mnt.display()));
    }
}

fn is_mounted(mnt: &Path) -> Result<bool> {
    let target = path_str(mnt)?.replace(' ', "\\040");
    Ok(fs::read_to_string("/proc/self/mounts")?
        .lines()
        .any(|line| line.split(' ').nth(1) == Some(target.as_str())))
}

/// The `packfs mount … MNT` process serving `mnt`.
fn daemon_pid(mnt: &Path) -> Option<u32> {
    let mnt = mnt.as_os_str().as_bytes();
    fs::read_dir("/proc").ok()?.flatten().find_map(|entry| {
        let pid = entry.file_name().to_str()?.parse().ok()?;
        let cmdline = fs::read(entry.path().join("cmdline")).ok()?;
        let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
        let is_daemon = args.first()?.ends_with(b"packfs")
            && args.get(1) == Some(&&b"mount"[..])
            && args.contains(&mnt);
        is_daemon.then_some(pid)
    })
}

fn proc_status_kib(pid: u32, field: &str) -> Option<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|line| {
        let value = line.strip_prefix(field)?.strip_prefix(':')?;
        value.trim().strip_suffix("kB")?.trim().parse().ok()
    })
}

/// Running, not a zombie waiting for its reaper.
fn is_alive(pid: u32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/status")).is_ok_and(|status| {
        status
            .lines()
            .find_map(|l| l.strip_prefix("State:"))
            .is_some_and(|state| !state.trim_start().starts_with('Z'))
    })
}

// ---------------------------------------------- measurements 1, 2 and 4a --

/// Figures of one filesystem for measurements 1, 2 and the random reads.
struct Figures {
    big_first: f64,
    big_second: f64,
    scan1: Scan,
    scan8: Scan,
    preads: Preads,
    /// Largest peak RSS of the serving process over all mounts.
    peak_kib: Option<u64>,
    /// Counters of the last mount.
    stats: Option<String>,
}

/// Runs measurements 1, 2 and the random reads, each first pass on a
/// mount of its own from `fresh`.
fn measure<M: Mounted>(
    label: &str,
    files: &Files,
    mut fresh: impl FnMut() -> Result<M>,
) -> Result<Figures> {
    let mut peak_kib = None;
    progress(format!(
        "{label}: sequential read of the big item, two passes"
    ));
    let m = fresh()?;
    let big_first = sequential(m.root(), files)?;
    let big_second = sequential(m.root(), files)?;
    peak_kib = peak_kib.max(m.peak_kib());
    drop(m);
    let mut scan_fresh = |readers: usize| -> Result<Scan> {
        progress(format!(
            "{label}: scan of the small items, {}",
            readers_label(readers)
        ));
        let m = fresh()?;
        let result = scan(m.root(), files, readers, None)?;
        peak_kib = peak_kib.max(m.peak_kib());
        Ok(result)
    };
    let scan1 = scan_fresh(1)?;
    let scan8 = scan_fresh(SCAN_READERS)?;
    progress(format!(
        "{label}: {} random {PREAD_SIZE}-byte preads",
        thousands(PREADS)
    ));
    let m = fresh()?;
    let preads = random_preads(m.root(), files)?;
    peak_kib = peak_kib.max(m.peak_kib());
    Ok(Figures {
        big_first,
        big_second,
        scan1,
        scan8,
        preads,
        peak_kib,
        stats: m.stats(),
    })
}

/// Medians of every system under test.
struct Comparison {
    disk: Figures,
    /// Second pass over the big item in tmpfs; `Err` says why it is missing.
    small_pages: std::result::Result<f64, String>,
    /// `Err` says why the fuse-ceiling column is missing.
    ceiling: std::result::Result<Figures, String>,
    /// `packfs mount --read-only`.
    packfs: Figures,
    /// `packfs mount` without flags: a read-write mount (issue 11 §3).
    packfs_default: Figures,
}

/// Measures every system in `config.runs` rounds, one system after the
/// other within a round, so load changes on the machine hit all of them.
fn compare<D: Mounted, C: Mounted, P: Mounted>(
    config: &Config,
    files: &Files,
    small_pages: std::result::Result<&Path, &String>,
    disk: impl Fn() -> Result<D>,
    ceiling: std::result::Result<impl Fn() -> Result<C>, String>,
    packfs: impl Fn() -> Result<P>,
    packfs_default: impl Fn() -> Result<P>,
) -> Result<Comparison> {
    let mut disk_rounds = Vec::new();
    let mut small_page_rounds = Vec::new();
    let mut ceiling_rounds = ceiling.as_ref().map(|_| Vec::new()).map_err(Clone::clone);
    let mut packfs_rounds = Vec::new();
    let mut default_rounds = Vec::new();
    for round in 1..=config.runs {
        let tag = |name: &str| format!("{name} (round {round} of {})", config.runs);
        disk_rounds.push(measure(&tag("direct disk"), files, &disk)?);
        if let Ok(dir) = small_pages {
            progress(tag("tmpfs: sequential read of the big item, two passes"));
            sequential(dir, files)?;
            small_page_rounds.push(sequential(dir, files)?);
        }
        if let (Ok(mount), Ok(rounds)) = (&ceiling, &mut ceiling_rounds) {
            match measure(&tag("fuse-ceiling"), files, mount) {
                Ok(figures) => rounds.push(figures),
                Err(e) => ceiling_rounds = Err(format!("fuse-ceiling failed: {e}")),
            }
        }
        packfs_rounds.push(measure(&tag("packfs --read-only"), files, &packfs)?);
        default_rounds.push(measure(
            &tag("packfs default (read-write) mount"),
            files,
            &packfs_default,
        )?);
    }
    Ok(Comparison {
        disk: Figures::median(&disk_rounds),
        small_pages: small_pages
            .map(|_| *median_by(&small_page_rounds, |x| *x))
            .map_err(Clone::clone),
        ceiling: ceiling_rounds.map(|rounds| Figures::median(&rounds)),
        packfs: Figures::median(&packfs_rounds),
        packfs_default: Figures::median(&default_rounds),
    })
}

impl Figures {
    /// The median of each figure over `rounds` (a scan or a series of
    /// preads is taken whole); the largest peak memory; the stats of the
    /// last round.
    fn median(rounds: &[Figures]) -> Figures {
        Figures {
            big_first: median_by(rounds, |f| f.big_first).big_first,
            big_second: median_by(rounds, |f| f.big_second).big_second,
            scan1: median_by(rounds, |f| f.scan1.files_per_sec()).scan1,
            scan8: median_by(rounds, |f| f.scan8.files_per_sec()).scan8,
            preads: median_by(rounds, |f| f.preads.per_sec).preads,
            peak_kib: rounds.iter().filter_map(|f| f.peak_kib).max(),
            stats: rounds.last().and_then(|f| f.stats.clone()),
        }
    }
}

/// The middle element by `key` (the upper one of an even count).
fn median_by<T>(items: &[T], key: impl Fn(&T) -> f64) -> &T {
    let mut sorted: Vec<&T> = items.iter().collect();
    sorted.sort_by(|a, b| key(a).total_cmp(&key(b)));
    sorted[sorted.len() / 2]
}

// --------------------------------------------------------- measurement 3 --

/// Measurement 3: the 1-reader scan through a delayed store, prefetch on
/// (all files) and off (the first `config.off_files`).
struct Latency {
    on: Scan,
    off: Scan,
}

fn latency_scans(
    runtime: &Runtime,
    dataset_dir: &Path,
    mnt: &Path,
    files: &Files,
    config: &Config,
) -> Result<Latency> {
    progress(format!(
        "copying the dataset into an InMemory store ({:?} per GET)",
        GET_LATENCY
    ));
    let memory = Arc::new(InMemory::new());
    runtime.block_on(copy_into(dataset_dir, memory.as_ref()))?;
    let delayed: Arc<dyn ObjectStore> = Arc::new(FaultyStore::new(
        memory,
        Arc::new(Faults {
            get_delay: GET_LATENCY,
            ..Faults::default()
        }),
    ));
    let run = |prefetch: bool, limit: Option<usize>| -> Result<Scan> {
        progress(format!(
            "delayed store, prefetch {}: scan of {} small items, 1 reader",
            if prefetch { "on" } else { "off" },
            thousands(limit.unwrap_or(files.small.len()))
        ));
        let store = Store::from_object_store(
            delayed.clone(),
            ObjectPath::default(),
            "memory://bench-delayed",
        );
        let options = MountOptions {
            cache: CacheOptions {
                prefetch,
                ..CacheOptions::default()
            },
            read_only: true,
            ..MountOptions::default()
        };
        let handle = mount::spawn(Dataset::from_store(store), mnt, &options)?;
        let result = scan(mnt, files, 1, limit)?;
        handle.unmount()?;
        Ok(result)
    };
    let (mut on, mut off) = (Vec::new(), Vec::new());
    for _ in 0..config.runs {
        on.push(run(true, None)?);
        off.push(run(false, Some(config.off_files))?);
    }
    Ok(Latency {
        on: *median_by(&on, Scan::files_per_sec),
        off: *median_by(&off, Scan::files_per_sec),
    })
}

/// Puts every file under `dir` into `store` at its relative path.
async fn copy_into(dir: &Path, store: &dyn ObjectStore) -> Result<()> {
    let mut pending = vec![dir.to_path_buf()];
    while let Some(path) = pending.pop() {
        if path.is_dir() {
            for entry in fs::read_dir(&path)? {
                pending.push(entry?.path());
            }
            continue;
        }
        let relative = path_str(path.strip_prefix(dir)?)?;
        let location = ObjectPath::parse(relative)?;
        store
            .put(&location, Bytes::from(fs::read(&path)?).into())
            .await?;
    }
    Ok(())
}

// -------------------------------------------------------- measurement 4b --

/// The many-item dataset: mount, `find`, `ls -lR` and daemon memory.
struct ManyItems {
    items: usize,
    mount_time: Duration,
    find_time: Duration,
    find_lines: usize,
    ls_time: Duration,
    rss_kib: u64,
    hwm_kib: u64,
}

fn many_items(
    runtime: &Runtime,
    bin: &Path,
    dataset_dir: &Path,
    mnt: &Path,
    items: usize,
) -> Result<ManyItems> {
    progress(format!(
        "building a dataset of {} tiny items",
        thousands(items)
    ));
    runtime.block_on(build_many(dataset_dir, items))?;
    progress("mounting it and running find");
    let daemon = Daemon::mount(bin, dataset_dir, mnt)?;
    let start = Instant::now();
    let find_lines = count_find_lines(mnt)?;
    let find_time = start.elapsed();
    // The mountpoint, the timeline and modality directories, the
    // subdirectories and the items.
    let expected = 3 + TINY_DIRS.min(items) + items;
    if find_lines != expected {
        return Err(format!("find listed {find_lines} paths, expected {expected}").into());
    }
    let mount_time = daemon.mount_time;
    drop(daemon);
    progress("fresh mount, running ls -lR");
    let daemon = Daemon::mount(bin, dataset_dir, mnt)?;
    let ls_time = time_ls_lr(mnt)?;
    let (rss_kib, hwm_kib) = daemon.memory_kib()?;
    Ok(ManyItems {
        items,
        mount_time,
        find_time,
        find_lines,
        ls_time,
        rss_kib,
        hwm_kib,
    })
}

// ------------------------------------------------------ measurement 5 --

/// `cp -r` and `tar -x` of many small files into a read-write mount and
/// into a plain directory, and what the mount then stored; medians of
/// `config.runs` rounds, each round copying into fresh directories.
struct Writes {
    files: usize,
    bytes: u64,
    cp: WriteWay,
    tar: WriteWay,
    /// Objects the first round's `cp -r` commit added to the store
    /// (packs, Tracks, Manifests).
    puts: usize,
    packs: usize,
    rounds: usize,
}

/// One way of writing the files (`cp -r`, `tar -x`): medians of the rounds.
struct WriteWay {
    plain_secs: f64,
    /// Into the write ceiling (`write_ceiling.rs`): FUSE and nothing else.
    ceiling_secs: f64,
    mount_secs: f64,
    /// From `fusermount3 -u` until the daemon exited: the final commit.
    commit_secs: f64,
    /// The requests the write ceiling served per file, by kind, and how
    /// many of them the writer waited for (the first round's).
    requests: String,
    synchronous: f64,
}

impl WriteWay {
    fn median(rounds: &[WriteWay]) -> WriteWay {
        WriteWay {
            plain_secs: median_by(rounds, |w| w.plain_secs).plain_secs,
            ceiling_secs: median_by(rounds, |w| w.ceiling_secs).ceiling_secs,
            mount_secs: median_by(rounds, |w| w.mount_secs).mount_secs,
            commit_secs: median_by(rounds, |w| w.commit_secs).commit_secs,
            requests: rounds[0].requests.clone(),
            synchronous: rounds[0].synchronous,
        }
    }
}

/// Runs `command`, timed; an error if it fails.
fn timed(command: &mut Command, what: &str) -> Result<f64> {
    let start = Instant::now();
    let status = command.status()?;
    if !status.success() {
        return Err(format!("{what} failed ({status})").into());
    }
    Ok(start.elapsed().as_secs_f64())
}

fn write_bench(
    bin: &Path,
    work: &Path,
    mnt: &Path,
    ceiling_mnt: &Path,
    config: &Config,
) -> Result<Writes> {
    let n = config.write_files;
    progress(format!(
        "writing {} files of 1–16 KiB to copy",
        thousands(n)
    ));
    let src = work.join("write-src");
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let mut buf = vec![0u8; WRITE_MAX as usize];
    let mut bytes = 0;
    for i in 0..n {
        let len = (WRITE_MIN + rng.next() % (WRITE_MAX - WRITE_MIN + 1)) as usize;
        rng.fill(&mut buf[..len]);
        let dir = src.join(format!("d{:02}", i % 20));
        fs::create_dir_all(&dir)?;
        fs::write(dir.join(format!("f{i:05}.bin")), &buf[..len])?;
        bytes += len as u64;
    }
    let tarball = work.join("write-src.tar");
    timed(
        Command::new("tar")
            .arg("-cf")
            .arg(&tarball)
            .arg("-C")
            .arg(&src)
            .arg("."),
        "tar -c of the write source",
    )?;
    let cp = |to: &Path| {
        timed(
            Command::new("cp")
                .arg("-r")
                .arg(format!("{}/.", src.display()))
                .arg(to),
            &format!("cp -r into {}", to.display()),
        )
    };
    let untar = |to: &Path| {
        timed(
            Command::new("tar")
                .arg("-xf")
                .arg(&tarball)
                .arg("-C")
                .arg(to),
            &format!("tar -x into {}", to.display()),
        )
    };

    let dataset = work.join("write-dataset");
    let seed = work.join("write-seed");
    fs::create_dir_all(seed.join("w/seed"))?;
    fs::write(seed.join("w/seed/readme"), b"seed")?;
    let status = Command::new(bin)
        .args(["import", "--no-progress"])
        .arg(&seed)
        .arg(&dataset)
        .stderr(Stdio::null())
        .status()?;
    if !status.success() {
        return Err("importing the write benchmark's seed failed".into());
    }
    let spool = work.join("write-spool");
    let spool_arg = path_str(&spool)?;
    // The ceiling serves with as many threads as a read-write mount does.
    let threads = mount::READ_WRITE_THREADS;
    // Into a plain directory, a fresh write ceiling, then a fresh modality
    // of the mount; the mount is unmounted (and commits) after each.
    let round = |name: &str, write: &dyn Fn(&Path) -> Result<f64>| -> Result<WriteWay> {
        progress(format!("{name} into a plain directory"));
        let plain = work.join(format!("write-plain-{name}"));
        fs::create_dir(&plain)?;
        let plain_secs = write(&plain)?;
        progress(format!("{name} into the write ceiling (FUSE, RAM)"));
        let ceiling = write_ceiling::Mounted::mount(ceiling_mnt, threads)?;
        let target = ceiling_mnt.join(name);
        fs::create_dir(&target)?;
        let ceiling_secs = write(&target)?;
        let requests = ceiling.counts.per_file(n);
        let synchronous = ceiling.counts.synchronous_per_file(n);
        drop(ceiling);
        progress(format!("{name} into a read-write packfs mount"));
        let daemon = Daemon::mount_with(bin, &dataset, mnt, &["--spool-dir", spool_arg])?;
        let target = mnt.join("w").join(name);
        fs::create_dir(&target)?;
        let mount_secs = write(&target)?;
        let commit_secs = daemon.unmount_and_wait()?.as_secs_f64();
        Ok(WriteWay {
            plain_secs,
            ceiling_secs,
            mount_secs,
            commit_secs,
            requests,
            synchronous,
        })
    };
    let (mut cps, mut tars) = (Vec::new(), Vec::new());
    let (mut puts, mut packs) = (0, 0);
    for r in 0..config.runs {
        let before = count_files(&dataset)?;
        cps.push(round(&format!("cp{r}"), &cp)?);
        if r == 0 {
            puts = count_files(&dataset)? - before;
            packs = fs::read_dir(dataset.join("w/cp0/0"))?.count();
        }
        tars.push(round(&format!("tar{r}"), &untar)?);
    }

    progress("checking the copies on a read-only remount");
    let daemon = Daemon::mount(bin, &dataset, mnt)?;
    for name in ["cp0", "tar0"] {
        let status = Command::new("diff")
            .arg("-r")
            .arg(&src)
            .arg(mnt.join("w").join(name))
            .stdout(Stdio::null())
            .status()?;
        if !status.success() {
            return Err(format!("the files written into w/{name} differ after a remount").into());
        }
    }
    drop(daemon);
    Ok(Writes {
        files: n,
        bytes,
        cp: WriteWay::median(&cps),
        tar: WriteWay::median(&tars),
        puts,
        packs,
        rounds: config.runs,
    })
}

/// Regular files below `dir`.
fn count_files(dir: &Path) -> Result<usize> {
    let mut count = 0;
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for entry in fs::read_dir(&d)? {
            let entry = entry?;
            if entry.file_type()?.is_dir() {
                pending.push(entry.path());
            } else {
                count += 1;
            }
        }
    }
    Ok(count)
}

fn write_rows(w: &Writes) -> Vec<Row> {
    let n = thousands(w.files);
    let rate = |secs: f64| w.files as f64 / secs;
    let mb = |secs: f64| w.bytes as f64 / secs / 1e6;
    let way = |what: &str, way: &WriteWay| {
        let vs_plain = ratio(rate(way.mount_secs), Some(rate(way.plain_secs)));
        let ceiling_vs_plain = rate(way.ceiling_secs) / rate(way.plain_secs);
        [
            row(
                format!("5. {what} of {n} files of 1–16 KiB into a read-write mount"),
                format!(
                    "{} files/s, {:.0} MB/s",
                    self::rate(rate(way.mount_secs)),
                    mb(way.mount_secs)
                ),
                format!(
                    "plain directory {} files/s, {:.0} MB/s; write ceiling {} files/s",
                    self::rate(rate(way.plain_secs)),
                    mb(way.plain_secs),
                    self::rate(rate(way.ceiling_secs)),
                ),
                format!(
                    "{}; {:.2}× ceiling",
                    show_ratio(vs_plain, "plain"),
                    way.ceiling_secs / way.mount_secs
                ),
                "≥ 0.5× plain",
                met(vs_plain, Bar::AtLeast(0.5)),
            ),
            row(
                format!("5. {what} into the write ceiling (FUSE, RAM, nothing else)"),
                "—".into(),
                format!(
                    "{:.1} requests per file waited for ({})",
                    way.synchronous, way.requests
                ),
                format!("ceiling {ceiling_vs_plain:.2}× plain"),
                "—",
                "—".into(),
            ),
            row(
                format!(
                    "5. then unmount after {what}: pack, upload, commit (until the daemon exits)"
                ),
                format!("{:.2} s", way.commit_secs),
                "—".into(),
                "—".into(),
                "—",
                "—".into(),
            ),
        ]
    };
    let mut rows = Vec::new();
    rows.extend(way("cp -r", &w.cp));
    rows.extend(way("tar -x", &w.tar));
    rows.push(row(
        format!("5. objects PUT for the {n} files of `cp -r` (default --pack-items 1024)"),
        format!("{} ({} packs)", w.puts, w.packs),
        format!("{n} with one object per file"),
        format!("{:.4}× one per file", w.puts as f64 / w.files as f64),
        "—",
        "—".into(),
    ));
    rows
}

/// The 1-minute load average, as `/proc/loadavg` says it.
fn load_average() -> String {
    fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split(' ').next().map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

/// How an idle CPU waits here, which sets what a FUSE round trip costs on
/// an otherwise idle machine: a vCPU that halts at once (a `haltpoll`
/// guest with `guest_halt_poll_ns` 0) must be woken through the host for
/// every request and reply, several times the cost of waking a polling one
/// (docs/PERFORMANCE.md, "Writes").
fn cpu_idle() -> String {
    let read = |path: &str| fs::read_to_string(path).ok().map(|s| s.trim().to_string());
    match read("/sys/devices/system/cpu/cpuidle/current_driver") {
        Some(driver) if driver == "haltpoll" => {
            let poll = read("/sys/module/haltpoll/parameters/guest_halt_poll_ns")
                .unwrap_or_else(|| "?".into());
            format!("cpuidle haltpoll, guest_halt_poll_ns {poll}")
        }
        Some(driver) => format!("cpuidle {driver}"),
        None => "cpuidle unknown".into(),
    }
}

/// The table of measurement 5 alone (`--only-writes`).
fn print_writes(config: &Config, writes: &Writes) {
    println!(
        "## packfs write benchmark (measurement 5): {} run, medians of {} round(s), {} cores, \
         load average at the end {}, {}\n",
        config.mode(),
        writes.rounds,
        thread::available_parallelism().map_or(0, |n| n.get()),
        load_average(),
        cpu_idle()
    );
    print_table(&write_rows(writes));
}

/// How long `ls -lR MNT > /dev/null` takes.
fn time_ls_lr(mnt: &Path) -> Result<Duration> {
    let start = Instant::now();
    let status = Command::new("ls")
        .arg("-lR")
        .arg(mnt)
        .stdout(Stdio::null())
        .status()?;
    if !status.success() {
        return Err(format!("ls -lR failed ({status})").into());
    }
    Ok(start.elapsed())
}

/// `find MNT | wc -l`.
fn count_find_lines(mnt: &Path) -> Result<usize> {
    let mut child = Command::new("find")
        .arg(mnt)
        .stdout(Stdio::piped())
        .spawn()?;
    let mut out = child.stdout.take().expect("piped");
    let (mut lines, mut buf) = (0, vec![0u8; 1 << 16]);
    loop {
        match out.read(&mut buf)? {
            0 => break,
            n => lines += buf[..n].iter().filter(|&&b| b == b'\n').count(),
        }
    }
    let status = child.wait()?;
    if !status.success() {
        return Err(format!("find failed ({status})").into());
    }
    Ok(lines)
}

/// Writes `items` tiny items into packs of `TINY_PER_PACK` and commits one
/// Track naming them `dNNNN/item-NNNNNN.jpg` over `TINY_DIRS` directories.
async fn build_many(dataset_dir: &Path, items: usize) -> Result<()> {
    let dataset = Dataset::open(path_str(dataset_dir)?, true)?;
    let store = dataset.store();
    let media_type: Arc<str> = "image/jpeg".into();
    let mut track_items = Vec::with_capacity(items);
    for first in (0..items).step_by(TINY_PER_PACK) {
        let mut pack = Vec::new();
        let mut entries = Vec::with_capacity(TINY_PER_PACK);
        for i in first..items.min(first + TINY_PER_PACK) {
            let bytes = format!("tiny item {i}\n").repeat(1 + i % 4);
            entries.push((i, pack.len() as u64, bytes.len() as u64));
            pack.extend_from_slice(bytes.as_bytes());
        }
        let address = ObjectId::of(&pack);
        let location = store
            .layout()
            .data_object(TIMELINE, TINY_MODALITY, &address);
        store.put_immutable(&location, Bytes::from(pack)).await?;
        track_items.extend(entries.into_iter().map(|(i, offset, byte_size)| TrackItem {
            name: format!("d{:04}/item-{i:06}.jpg", i % TINY_DIRS),
            media_type: media_type.clone(),
            attrs: Default::default(),
            entry: FragmentEntry {
                t_start: i as i64,
                t_end: i as i64 + 1,
                byte_size,
                address,
                placement: Placement::Packed { offset },
            },
        }));
    }
    let track = Track::new(track_items, Vec::new(), "many-item bench track")?;
    let update = TrackUpdate {
        timeline: TIMELINE.into(),
        modality: TINY_MODALITY.into(),
        content: TrackContent::New(track),
    };
    dataset
        .commit("main", None, vec![update], &writer_string("bench"))
        .await?;
    Ok(())
}

// ------------------------------------------------------------- issue 11 --

/// Issue 11's cold tree, a dataset and a squashfs image of its own:
/// `cold/pool/item-NNNNN.bin` (small items) and `cold/big/big.bin`.
const POOL_DIR: &str = "cold/pool";
const COLD_BIG: &str = "cold/big/big.bin";
/// Seed of the shuffled order of the cold scan (the same on every system).
const SHUFFLE_SEED: u64 = 0x5DEE_CE66_D1CE_4E5B;
/// How long squashfuse_ll may take to mount.
const SQUASHFUSE_START_TIMEOUT: Duration = Duration::from_secs(60);
/// The counter of bytes a packfs mount read from its store.
const FETCHED_COUNTER: &str = "bytes_fetched";

/// The generated cold tree: small items in name order, and the big item.
struct ColdFiles {
    pool: Vec<(OsString, u64)>,
    big_len: u64,
}

fn generate_cold_tree(root: &Path, config: &Config) -> Result<ColdFiles> {
    progress(format!(
        "writing the cold tree: {} small items and a {} MiB item under {}",
        thousands(config.pool_files),
        config.cold_big_bytes >> 20,
        root.display()
    ));
    let mut rng = Rng(0xD1B5_4A32_D192_ED03);
    let pool = write_small_items(&root.join(POOL_DIR), config.pool_files, &mut rng)?;
    write_big_item(&root.join(COLD_BIG), config.cold_big_bytes, &mut rng)?;
    Ok(ColdFiles {
        pool,
        big_len: config.cold_big_bytes,
    })
}

/// `name` on `$PATH` (or in /usr/sbin, /sbin, where Debian may put it).
fn find_tool(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/sbin".into()])
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// `mksquashfs TREE IMAGE -noI -noD -noF -noX` (nothing compressed) and the
/// `squashfuse_ll` binary; `Err` says why the squashfuse_ll column is
/// missing and how to get it.
fn squash_image(tree: &Path, image: &Path) -> std::result::Result<PathBuf, String> {
    let install = "install the Debian packages squashfuse and squashfs-tools \
                   (apt-get install -y squashfuse squashfs-tools)";
    let squashfuse = find_tool("squashfuse_ll")
        .ok_or_else(|| format!("squashfuse_ll is not installed: {install}"))?;
    let mksquashfs =
        find_tool("mksquashfs").ok_or_else(|| format!("mksquashfs is not installed: {install}"))?;
    progress(format!(
        "mksquashfs of the cold tree into {}",
        image.display()
    ));
    let status = Command::new(mksquashfs)
        .arg(tree)
        .arg(image)
        .args(["-noI", "-noD", "-noF", "-noX", "-no-progress"])
        .stdout(Stdio::null())
        .status()
        .map_err(|e| format!("cannot run mksquashfs: {e}"))?;
    if !status.success() {
        return Err(format!("mksquashfs failed ({status})"));
    }
    Ok(squashfuse)
}

/// Whether this process may drop the page cache (root only); `Err` says
/// why the cold rows are skipped.
fn check_drop_caches() -> std::result::Result<(), String> {
    let euid = fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let uids = status.lines().find_map(|l| l.strip_prefix("Uid:"))?;
            uids.split_whitespace().nth(1)?.parse::<u32>().ok()
        });
    if euid != Some(0) {
        return Err("not running as root, and a cold measurement needs \
                    `echo 3 > /proc/sys/vm/drop_caches`: run the bench as root"
            .into());
    }
    drop_caches().map_err(|e| format!("cannot drop the page cache: {e}"))
}

/// `sync; echo 3 > /proc/sys/vm/drop_caches`.
fn drop_caches() -> Result<()> {
    Command::new("sync").status()?;
    fs::write("/proc/sys/vm/drop_caches", "3")?;
    Ok(())
}

/// Reads `files` (path, expected length) whole with `readers` threads that
/// each take the next file of the list as they finish one (`xargs -n1
/// -P`); with one reader, `xargs cat` in list order.
fn read_list(files: &[(PathBuf, u64)], readers: usize) -> Result<Scan> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let start = Instant::now();
    let bytes = thread::scope(|s| {
        let threads: Vec<_> = (0..readers)
            .map(|_| {
                s.spawn(|| -> Result<u64> {
                    let mut buf = vec![0u8; READ_SIZE];
                    let mut bytes = 0;
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some((path, len)) = files.get(i) else {
                            return Ok(bytes);
                        };
                        read_checked(path, *len, &mut buf)?;
                        bytes += len;
                    }
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|t| t.join().expect("reader thread panicked"))
            .sum::<Result<u64>>()
    })?;
    Ok(Scan {
        files: files.len(),
        bytes,
        secs: start.elapsed().as_secs_f64(),
    })
}

/// The value of counter `name` in `/.packfs/stats` text (`name value`
/// lines), if there is one.
fn counter(stats: &str, name: &str) -> Option<u64> {
    stats.lines().find_map(|line| {
        let mut words = line.split_whitespace();
        (words.next() == Some(name)).then(|| words.next()?.parse().ok())?
    })
}

/// `name value` of every counter whose name mentions passthrough.
fn passthrough_counters(stats: &str) -> Vec<String> {
    stats
        .lines()
        .filter(|line| {
            line.split_whitespace()
                .next()
                .is_some_and(|name| name.to_ascii_lowercase().contains("passthrough"))
        })
        .map(|line| line.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

/// Cold figures of one system (each on a fresh mount after dropping the
/// page cache).
#[derive(Clone, Copy)]
struct ColdFigures {
    shuffled: Scan,
    /// Bytes the mount fetched from its store during the shuffled scan
    /// (packfs only, when it has the counter).
    fetched: Option<u64>,
    big_mb: f64,
    sorted1: Scan,
    sorted8: Scan,
    ls_secs: f64,
}

type FreshMount<'a> = Box<dyn Fn() -> Result<Box<dyn Mounted>> + 'a>;

/// One round of the cold rows on one system.
fn measure_cold(
    label: &str,
    cold: &ColdFiles,
    config: &Config,
    shuffled: &[usize],
    mount: &FreshMount,
) -> Result<ColdFigures> {
    let fresh_cold = || -> Result<Box<dyn Mounted>> {
        let m = mount()?;
        drop_caches()?;
        Ok(m)
    };
    let list = |root: &Path, indices: &mut dyn Iterator<Item = usize>| -> Vec<(PathBuf, u64)> {
        let dir = root.join(POOL_DIR);
        indices
            .map(|i| (dir.join(&cold.pool[i].0), cold.pool[i].1))
            .collect()
    };
    let n = thousands(shuffled.len());
    progress(format!("{label}: cold, {n} small items in shuffled order"));
    let m = fresh_cold()?;
    let files = list(m.root(), &mut shuffled.iter().copied());
    let before = m.stats();
    let shuffled_scan = read_list(&files, 1)?;
    let after = m.stats();
    let fetched = match (before, after) {
        (Some(b), Some(a)) => counter(&a, FETCHED_COUNTER)
            .zip(counter(&b, FETCHED_COUNTER))
            .map(|(a, b)| a.saturating_sub(b)),
        _ => None,
    };
    drop(m);

    progress(format!("{label}: cold, 1 MiB reads of the big item"));
    let m = fresh_cold()?;
    let mut buf = vec![0u8; READ_SIZE];
    let start = Instant::now();
    read_checked(&m.root().join(COLD_BIG), cold.big_len, &mut buf)?;
    let big_mb = cold.big_len as f64 / start.elapsed().as_secs_f64() / 1e6;
    drop(m);

    let sorted = |readers: usize| -> Result<Scan> {
        progress(format!(
            "{label}: cold, {n} small items in name order, {}",
            readers_label(readers)
        ));
        let m = fresh_cold()?;
        read_list(&list(m.root(), &mut (0..config.sample_files)), readers)
    };
    let sorted1 = sorted(1)?;
    let sorted8 = sorted(SCAN_READERS)?;

    progress(format!("{label}: cold, ls -lR"));
    let m = fresh_cold()?;
    let start = Instant::now();
    let status = Command::new("ls")
        .arg("-lR")
        .arg(m.root())
        .stdout(Stdio::null())
        .status()?;
    let ls_secs = start.elapsed().as_secs_f64();
    if !status.success() {
        return Err(format!("ls -lR {} failed ({status})", m.root().display()).into());
    }
    Ok(ColdFigures {
        shuffled: shuffled_scan,
        fetched,
        big_mb,
        sorted1,
        sorted8,
        ls_secs,
    })
}

impl ColdFigures {
    fn median(rounds: &[ColdFigures]) -> ColdFigures {
        let fetched: Vec<u64> = rounds.iter().filter_map(|f| f.fetched).collect();
        ColdFigures {
            shuffled: median_by(rounds, |f| f.shuffled.files_per_sec()).shuffled,
            fetched: (!fetched.is_empty()).then(|| *median_by(&fetched, |&x| x as f64)),
            big_mb: median_by(rounds, |f| f.big_mb).big_mb,
            sorted1: median_by(rounds, |f| f.sorted1.files_per_sec()).sorted1,
            sorted8: median_by(rounds, |f| f.sorted8.files_per_sec()).sorted8,
            ls_secs: median_by(rounds, |f| f.ls_secs).ls_secs,
        }
    }
}

/// Medians of the cold rows. `Err` on a reference says why its column is
/// missing.
struct ColdComparison {
    pool_files: usize,
    plain: ColdFigures,
    squashfuse: std::result::Result<ColdFigures, String>,
    ceiling: std::result::Result<ColdFigures, String>,
    packfs: ColdFigures,
}

/// Issue 11 §1 and §2: builds the cold tree, its dataset and its squashfs
/// image and measures plain directory, squashfuse_ll, fuse-ceiling and
/// `packfs --read-only` cold, in rounds. `Ok(Err(reason))`: skipped.
fn cold_comparison(
    config: &Config,
    runtime: &Runtime,
    work: &Path,
    packfs_bin: &Path,
    ceiling_bin: Option<&Path>,
    mountpoint: &dyn Fn(&str) -> Result<PathBuf>,
) -> Result<std::result::Result<ColdComparison, String>> {
    if let Err(reason) = check_drop_caches() {
        progress(format!("cold rows skipped: {reason}"));
        return Ok(Err(reason));
    }
    let tree = work.join("cold-src");
    let cold = generate_cold_tree(&tree, config)?;
    let dataset = work.join("dataset-cold");
    runtime.block_on(import_tree(&tree, &dataset))?;
    let image = work.join("cold.squashfs");
    let squashfuse = squash_image(&tree, &image);
    if let Err(reason) = &squashfuse {
        progress(format!("squashfuse_ll column missing: {reason}"));
    }

    let mut shuffled: Vec<usize> = (0..cold.pool.len()).collect();
    let mut rng = Rng(SHUFFLE_SEED);
    for i in (1..shuffled.len()).rev() {
        shuffled.swap(i, (rng.next() % (i as u64 + 1)) as usize);
    }
    shuffled.truncate(config.sample_files);

    let tree_ref = tree.as_path();
    let plain: FreshMount =
        Box::new(move || Ok(Box::new(Disk(tree_ref.to_path_buf())) as Box<dyn Mounted>));
    let squash_mnt = mountpoint("mnt-cold-squashfuse")?;
    let squash: std::result::Result<FreshMount, String> = squashfuse.map(|bin| {
        let (image, mnt) = (image.clone(), squash_mnt.clone());
        Box::new(move || {
            Ok(Box::new(FuseProcess::squashfuse(&bin, &image, &mnt)?) as Box<dyn Mounted>)
        }) as FreshMount
    });
    let ceiling_mnt = mountpoint("mnt-cold-ceiling")?;
    let ceiling: std::result::Result<FreshMount, String> = match ceiling_bin {
        Some(bin) => Ok(Box::new(move || {
            Ok(Box::new(FuseProcess::ceiling(bin, tree_ref, &ceiling_mnt)?) as Box<dyn Mounted>)
        })),
        None => Err("fuse-ceiling is not available (see the table above)".into()),
    };
    let packfs_mnt = mountpoint("mnt-cold-packfs")?;
    let packfs: FreshMount = Box::new(|| {
        Ok(Box::new(Daemon::mount(packfs_bin, &dataset, &packfs_mnt)?) as Box<dyn Mounted>)
    });

    let (mut plain_rounds, mut packfs_rounds) = (Vec::new(), Vec::new());
    let mut squash_rounds = squash.as_ref().map(|_| Vec::new()).map_err(Clone::clone);
    let mut ceiling_rounds = ceiling.as_ref().map(|_| Vec::new()).map_err(Clone::clone);
    for round in 1..=config.runs {
        let tag = |name: &str| format!("{name} (cold round {round} of {})", config.runs);
        plain_rounds.push(measure_cold(
            &tag("plain dir"),
            &cold,
            config,
            &shuffled,
            &plain,
        )?);
        for (name, mount, rounds) in [
            ("squashfuse_ll", &squash, &mut squash_rounds),
            ("fuse-ceiling", &ceiling, &mut ceiling_rounds),
        ] {
            if let (Ok(mount), Ok(list)) = (mount, &mut *rounds) {
                match measure_cold(&tag(name), &cold, config, &shuffled, mount) {
                    Ok(figures) => list.push(figures),
                    Err(e) => *rounds = Err(format!("{name} failed: {e}")),
                }
            }
        }
        packfs_rounds.push(measure_cold(
            &tag("packfs --read-only"),
            &cold,
            config,
            &shuffled,
            &packfs,
        )?);
    }
    Ok(Ok(ColdComparison {
        pool_files: cold.pool.len(),
        plain: ColdFigures::median(&plain_rounds),
        squashfuse: squash_rounds.map(|r| ColdFigures::median(&r)),
        ceiling: ceiling_rounds.map(|r| ColdFigures::median(&r)),
        packfs: ColdFigures::median(&packfs_rounds),
    }))
}

/// Issue 11 §4 on one kind of mount: the big item read whole once with
/// `--cache-dir`, then again after a remount on the same cache directory.
struct Epoch {
    label: &'static str,
    first_mb: f64,
    reread_mb: f64,
    /// `/.packfs/stats` of the remount after the re-read (last round).
    stats: Option<String>,
}

struct Epochs {
    /// The big item on the plain disk, page cache warm.
    plain_mb: f64,
    mounts: Vec<Epoch>,
}

fn later_epochs(
    bin: &Path,
    src: &Path,
    dataset: &Path,
    work: &Path,
    mnt: &Path,
    files: &Files,
    config: &Config,
) -> Result<Epochs> {
    let kinds: [(&'static str, &[&str]); 2] =
        [("default mount", &[]), ("--read-only", &["--read-only"])];
    let mut plain = Vec::new();
    let mut rounds: Vec<Vec<Epoch>> = kinds.iter().map(|_| Vec::new()).collect();
    for round in 1..=config.runs {
        progress(format!(
            "later epochs (round {round} of {}): the big item on the plain disk, warm",
            config.runs
        ));
        sequential(src, files)?;
        plain.push(sequential(src, files)?);
        for ((label, flags), epochs) in kinds.iter().zip(&mut rounds) {
            progress(format!(
                "later epochs (round {round} of {}): {label} with --cache-dir: read, remount, re-read",
                config.runs
            ));
            let cache = work.join(format!("epoch-cache-{round}-{}", epochs.len()));
            let mut args = flags.to_vec();
            args.extend(["--cache-dir", path_str(&cache)?]);
            let daemon = Daemon::mount_with(bin, dataset, mnt, &args)?;
            let first_mb = sequential(mnt, files)?;
            daemon.unmount_and_wait()?;
            let daemon = Daemon::mount_with(bin, dataset, mnt, &args)?;
            let reread_mb = sequential(mnt, files)?;
            let stats = daemon.stats();
            daemon.unmount_and_wait()?;
            fs::remove_dir_all(&cache)?;
            epochs.push(Epoch {
                label,
                first_mb,
                reread_mb,
                stats,
            });
        }
    }
    Ok(Epochs {
        plain_mb: *median_by(&plain, |x| *x),
        mounts: rounds
            .iter()
            .map(|r| {
                let last = r.last().expect("at least one round");
                Epoch {
                    label: last.label,
                    first_mb: median_by(r, |e| e.first_mb).first_mb,
                    reread_mb: median_by(r, |e| e.reread_mb).reread_mb,
                    stats: last.stats.clone(),
                }
            })
            .collect(),
    })
}

// ---------------------------------------------------------------- report --

/// A bar of issue 3 on a ratio or a figure.
#[derive(Clone, Copy)]
enum Bar {
    AtLeast(f64),
    AtMost(f64),
}

fn met(value: Option<f64>, bar: Bar) -> String {
    let ok = match (value, bar) {
        (None, _) => return "n/a".into(),
        (Some(v), Bar::AtLeast(b)) => v >= b,
        (Some(v), Bar::AtMost(b)) => v <= b,
    };
    if ok { "yes" } else { "**NO**" }.into()
}

fn ratio(value: f64, reference: Option<f64>) -> Option<f64> {
    reference.map(|r| value / r)
}

fn show_ratio(value: Option<f64>, what: &str) -> String {
    value.map_or_else(|| format!("n/a {what}"), |v| format!("{v:.2}× {what}"))
}

fn mb(x: f64) -> String {
    format!("{x:.0} MB/s")
}

fn rate(x: f64) -> String {
    if x >= 1000.0 {
        format!("{:.1}k", x / 1000.0)
    } else {
        format!("{x:.1}")
    }
}

fn show_scan(s: &Scan) -> String {
    format!(
        "{} files/s, {}",
        rate(s.files_per_sec()),
        mb(s.mb_per_sec())
    )
}

fn show_preads(p: &Preads) -> String {
    format!(
        "{} reads/s, p50 {} µs, p99 {} µs",
        rate(p.per_sec),
        p.p50.as_micros(),
        p.p99.as_micros()
    )
}

fn readers_label(readers: usize) -> String {
    match readers {
        1 => "1 reader".into(),
        n => format!("{n} readers"),
    }
}

fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

fn mib(kib: u64) -> String {
    format!("{} MiB", kib / 1024)
}

fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

type Row = [String; 6];

fn row(
    measurement: String,
    packfs: String,
    references: String,
    ratio: String,
    target: &str,
    met: String,
) -> Row {
    [measurement, packfs, references, ratio, target.into(), met]
}

/// The reference a target is set against.
#[derive(Clone, Copy)]
enum Reference {
    Ceiling,
    Disk,
}

/// A row of one figure measured on packfs, fuse-ceiling and the disk:
/// `figure` gives the number ratios divide and how it is shown; `target`
/// is a minimum ratio against one reference.
fn compared_row(
    comparison: &Comparison,
    measurement: String,
    figure: impl Fn(&Figures) -> (f64, String),
    target: Option<(Reference, f64)>,
) -> Row {
    let ceiling = comparison.ceiling.as_ref().ok().map(&figure);
    let (disk, (packfs, packfs_shown)) = (figure(&comparison.disk), figure(&comparison.packfs));
    let vs_ceiling = ratio(packfs, ceiling.as_ref().map(|c| c.0));
    let vs_disk = ratio(packfs, Some(disk.0));
    let (target, met) = match target {
        Some((Reference::Ceiling, bar)) => (
            format!("≥ {bar}× ceiling"),
            met(vs_ceiling, Bar::AtLeast(bar)),
        ),
        Some((Reference::Disk, bar)) => (format!("≥ {bar}× disk"), met(vs_disk, Bar::AtLeast(bar))),
        None => ("—".into(), "—".into()),
    };
    row(
        measurement,
        packfs_shown,
        format!(
            "ceiling {} · disk {}",
            ceiling.map_or_else(|| "n/a".into(), |c| c.1),
            disk.1
        ),
        format!(
            "{} · {}",
            show_ratio(vs_ceiling, "ceiling"),
            show_ratio(vs_disk, "disk")
        ),
        &target,
        met,
    )
}

/// Rows of measurements 1 and 2.
fn compared_rows(config: &Config, comparison: &Comparison) -> Vec<Row> {
    let big = format!("{} MiB item", config.big_bytes >> 20);
    let small = format!("{} items of 16–64 KiB", thousands(config.small_files));
    let scan_figure = |s: Scan| (s.files_per_sec(), show_scan(&s));
    vec![
        compared_row(
            comparison,
            format!("1. sequential read, {big}, 1st pass"),
            |f| (f.big_first, mb(f.big_first)),
            Some((Reference::Ceiling, 0.8)),
        ),
        compared_row(
            comparison,
            format!("1. sequential read, {big}, 2nd pass (page cache)"),
            |f| (f.big_second, mb(f.big_second)),
            Some((Reference::Disk, 0.8)),
        ),
        small_page_row(comparison, &big),
        compared_row(
            comparison,
            format!("2. scan of {small}, 1 reader, 1st pass"),
            |f| scan_figure(f.scan1),
            Some((Reference::Ceiling, 0.85)),
        ),
        compared_row(
            comparison,
            format!("2. scan of {small}, {SCAN_READERS} readers, 1st pass"),
            |f| scan_figure(f.scan8),
            Some((Reference::Ceiling, 0.7)),
        ),
    ]
}

/// The second pass against tmpfs, a page cache of 4 KiB pages like FUSE's.
fn small_page_row(comparison: &Comparison, big: &str) -> Row {
    let packfs = comparison.packfs.big_second;
    let (reference, vs) = match &comparison.small_pages {
        Ok(tmpfs) => (format!("tmpfs {}", mb(*tmpfs)), ratio(packfs, Some(*tmpfs))),
        Err(reason) => (reason.clone(), None),
    };
    row(
        format!("1. sequential read, {big}, 2nd pass, vs a page cache of 4 KiB pages"),
        mb(packfs),
        reference,
        show_ratio(vs, "tmpfs"),
        "—",
        "—".into(),
    )
}

/// Rows of measurement 3.
fn latency_rows(config: &Config, latency: &Latency, no_latency: &Scan) -> Vec<Row> {
    let delayed = format!("{} ms per GET", GET_LATENCY.as_millis());
    let on = latency.on.files_per_sec();
    let speedup = ratio(on, Some(latency.off.files_per_sec()));
    let vs_fast = ratio(on, Some(no_latency.files_per_sec()));
    vec![
        row(
            format!(
                "3. scan, {delayed}, prefetch off, 1 reader (only the first {} files timed)",
                thousands(config.off_files)
            ),
            show_scan(&latency.off),
            "—".into(),
            "—".into(),
            "—",
            "—".into(),
        ),
        row(
            format!(
                "3. scan, {delayed}, prefetch on, 1 reader (all {} files)",
                thousands(config.small_files)
            ),
            show_scan(&latency.on),
            format!("prefetch off {} files/s", rate(latency.off.files_per_sec())),
            show_ratio(speedup, "prefetch off"),
            "≥ 20× prefetch off",
            met(speedup, Bar::AtLeast(20.0)),
        ),
        row(
            format!("3. scan, {delayed}, prefetch on, vs the no-latency scan of 2."),
            format!("{} files/s", rate(on)),
            format!(
                "no latency (2., 1 reader) {} files/s",
                rate(no_latency.files_per_sec())
            ),
            show_ratio(vs_fast, "no latency"),
            "≥ 0.5× no latency",
            met(vs_fast, Bar::AtLeast(0.5)),
        ),
    ]
}

/// The local daemons' peak memory against the cache + prefetch bound.
fn memory_row(packfs: &Figures) -> Row {
    let bound = CacheOptions::default();
    let bound_kib = (bound.cache_bytes + bound.prefetch_memory) >> 10;
    row(
        "memory: peak RSS (VmHWM) of the packfs daemons of 1., 2. and 4.".into(),
        packfs.peak_kib.map_or_else(|| "n/a".into(), mib),
        format!(
            "bound: cache {} + prefetch {}",
            mib(bound.cache_bytes >> 10),
            mib(bound.prefetch_memory >> 10)
        ),
        "—".into(),
        &format!("≤ {}", mib(bound_kib)),
        met(
            packfs.peak_kib.map(|k| k as f64),
            Bar::AtMost(bound_kib as f64),
        ),
    )
}

fn print_report(
    config: &Config,
    comparison: &Comparison,
    latency: &Latency,
    writes: &Writes,
    many: Option<&ManyItems>,
) {
    let mut rows = compared_rows(config, comparison);
    rows.extend(latency_rows(config, latency, &comparison.packfs.scan1));
    rows.push(compared_row(
        comparison,
        format!(
            "4. {} random 4 KiB preads in the {} MiB item, 1st pass",
            thousands(PREADS),
            config.big_bytes >> 20
        ),
        |f| (f.preads.per_sec, show_preads(&f.preads)),
        None,
    ));
    rows.extend(many_rows(config, many));
    rows.extend(write_rows(writes));
    rows.push(memory_row(&comparison.packfs));

    println!(
        "## packfs benchmark: {} run, {} round(s), {} cores, load average at the end {}, {}\n",
        config.mode(),
        config.runs,
        thread::available_parallelism().map_or(0, |n| n.get()),
        load_average(),
        cpu_idle()
    );
    print_table(&rows);
    println!();
    match &comparison.ceiling {
        Ok(_) => {
            println!("fuse-ceiling: N_THREADS={CEILING_THREADS}, a fresh mount for each 1st pass.")
        }
        Err(reason) => println!("fuse-ceiling column missing: {reason}."),
    }
    println!(
        "Direct disk: the source directory with a warm page cache. MB = 10^6 bytes. \
         Scans include listing the directory."
    );
    println!(
        "Rows 1., 2. and the preads: medians of {} round(s), each round measuring disk, \
         ceiling and packfs in turn. Rows 3.: medians of as many rounds of their own. \
         The many-item rows: one run each. \
         Expect ±30% between runs on this shared machine.",
        config.runs
    );
    if let Some(stats) = &comparison.packfs.stats {
        println!(
            "\n`/.packfs/stats` of the last local mount (the random preads of 4.):\n\n```\n{stats}```"
        );
    }
}

fn many_rows(config: &Config, many: Option<&ManyItems>) -> Vec<Row> {
    let Some(m) = many else {
        return vec![row(
            format!(
                "4. {} items: mount, find, ls -lR, RSS",
                thousands(config.tiny_items)
            ),
            "skipped (--skip-1m)".into(),
            "—".into(),
            "—".into(),
            "—",
            "—".into(),
        )];
    };
    let n = thousands(m.items);
    let blank = || "—".to_string();
    vec![
        row(
            format!("4. {n} items: mount ready (`packfs mount` returns)"),
            secs(m.mount_time),
            blank(),
            blank(),
            "≤ 3 s",
            met(Some(m.mount_time.as_secs_f64()), Bar::AtMost(3.0)),
        ),
        row(
            format!(
                "4. {n} items: `find MNT | wc -l` ({} lines, checked)",
                thousands(m.find_lines)
            ),
            secs(m.find_time),
            blank(),
            blank(),
            "≤ 10 s",
            met(Some(m.find_time.as_secs_f64()), Bar::AtMost(10.0)),
        ),
        row(
            format!("4. {n} items: `ls -lR MNT > /dev/null` (fresh mount)"),
            secs(m.ls_time),
            blank(),
            blank(),
            "—",
            blank(),
        ),
        row(
            format!("4. {n} items: daemon VmRSS / VmHWM after ls -lR"),
            format!("{} / {}", mib(m.rss_kib), mib(m.hwm_kib)),
            blank(),
            blank(),
            "≤ 400 MiB (VmHWM)",
            met(Some(m.hwm_kib as f64), Bar::AtMost(400.0 * 1024.0)),
        ),
    ]
}

/// The columns of both tables.
const HEADER: [&str; 6] = [
    "Measurement",
    "packfs",
    "References (same files, same run)",
    "Ratio",
    "Target",
    "Met",
];

/// A Markdown table with columns padded to line up in a terminal.
fn print_table(rows: &[Row]) {
    let header = HEADER;
    let width = |i: usize| {
        rows.iter()
            .map(|r| r[i].chars().count())
            .chain([header[i].chars().count(), 3])
            .max()
            .unwrap_or(3)
    };
    let widths: Vec<usize> = (0..6).map(width).collect();
    let line = |cells: Vec<String>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, &w)| format!("{c}{}", " ".repeat(w - c.chars().count())))
            .collect();
        println!("| {} |", padded.join(" | "));
    };
    line(header.iter().map(|h| h.to_string()).collect());
    line(widths.iter().map(|&w| "-".repeat(w)).collect());
    for r in rows {
        line(r.to_vec());
    }
}

// ------------------------------------------------------- report, issue 11 --

/// A reference of the cold rows.
#[derive(Clone, Copy)]
enum ColdRef {
    Plain,
    Squashfuse,
    Ceiling,
}

impl ColdRef {
    fn name(self) -> &'static str {
        match self {
            ColdRef::Plain => "plain",
            ColdRef::Squashfuse => "squashfuse_ll",
            ColdRef::Ceiling => "ceiling",
        }
    }

    fn figures(self, cold: &ColdComparison) -> Option<&ColdFigures> {
        match self {
            ColdRef::Plain => Some(&cold.plain),
            ColdRef::Squashfuse => cold.squashfuse.as_ref().ok(),
            ColdRef::Ceiling => cold.ceiling.as_ref().ok(),
        }
    }
}

/// A cold row: packfs against the plain directory, squashfuse_ll and
/// fuse-ceiling; `targets` are minimum ratios against some of them.
fn cold_row(
    cold: &ColdComparison,
    measurement: String,
    figure: impl Fn(&ColdFigures) -> (f64, String),
    targets: &[(ColdRef, f64)],
) -> Row {
    let refs = [ColdRef::Plain, ColdRef::Squashfuse, ColdRef::Ceiling];
    let (packfs, packfs_shown) = figure(&cold.packfs);
    let shown = |r: ColdRef| r.figures(cold).map(&figure);
    let vs = |r: ColdRef| ratio(packfs, shown(r).map(|f| f.0));
    let references = refs
        .iter()
        .map(|&r| format!("{} {}", r.name(), shown(r).map_or("n/a".into(), |f| f.1)))
        .collect::<Vec<_>>()
        .join(" · ");
    let ratios = refs
        .iter()
        .map(|&r| show_ratio(vs(r), r.name()))
        .collect::<Vec<_>>()
        .join(" · ");
    let (target, met) = match targets {
        [] => ("—".into(), "—".into()),
        _ => (
            targets
                .iter()
                .map(|&(r, bar)| format!("≥ {bar:.1}× {}", r.name()))
                .collect::<Vec<_>>()
                .join(" · "),
            targets
                .iter()
                .map(|&(r, bar)| met(vs(r), Bar::AtLeast(bar)))
                .collect::<Vec<_>>()
                .join(" · "),
        ),
    };
    row(measurement, packfs_shown, references, ratios, &target, met)
}

fn gb(bytes: u64) -> String {
    format!("{:.3} GB", bytes as f64 / 1e9)
}

fn cold_rows(config: &Config, cold: &std::result::Result<ColdComparison, String>) -> Vec<Row> {
    let cold = match cold {
        Ok(cold) => cold,
        Err(reason) => {
            return vec![row(
                "11.1, 11.2, cold rows".into(),
                format!("skipped: {reason}"),
                "—".into(),
                "—".into(),
                "—",
                "—".into(),
            )]
        }
    };
    let n = thousands(config.sample_files);
    let scan = |s: Scan| {
        (
            s.files_per_sec(),
            format!("{} files/s", rate(s.files_per_sec())),
        )
    };
    let delivered = cold.packfs.shuffled.bytes;
    let amplification = cold.packfs.fetched.map(|f| f as f64 / delivered as f64);
    vec![
        cold_row(
            cold,
            format!(
                "11.1 {n} of {} items of 16–64 KiB in shuffled order, cold, 1 reader",
                thousands(cold.pool_files)
            ),
            |f| scan(f.shuffled),
            &[(ColdRef::Squashfuse, 1.0)],
        ),
        row(
            "11.1 the shuffled scan: bytes fetched from the store / bytes delivered".into(),
            match cold.packfs.fetched {
                Some(f) => format!("{} / {}", gb(f), gb(delivered)),
                None => format!("no `{FETCHED_COUNTER}` counter in /.packfs/stats"),
            },
            "—".into(),
            show_ratio(amplification, "delivered"),
            "≤ 1.5× delivered",
            met(amplification, Bar::AtMost(1.5)),
        ),
        cold_row(
            cold,
            format!(
                "11.1 the first {n} items in name order, cold, 1 reader"
            ),
            |f| scan(f.sorted1),
            &[],
        ),
        cold_row(
            cold,
            format!(
                "11.1 the first {n} items in name order, cold, {SCAN_READERS} readers (xargs -P{SCAN_READERS})"
            ),
            |f| scan(f.sorted8),
            &[],
        ),
        cold_row(
            cold,
            format!(
                "11.2 1 MiB reads of a {} MiB item, cold",
                config.cold_big_bytes >> 20
            ),
            |f| (f.big_mb, mb(f.big_mb)),
            &[(ColdRef::Squashfuse, 1.0), (ColdRef::Plain, 0.6)],
        ),
        cold_row(
            cold,
            "11. `ls -lR` of the cold tree, cold (ratios of speed: 1 / time)".into(),
            |f| (1.0 / f.ls_secs, format!("{:.2} s", f.ls_secs)),
            &[],
        ),
    ]
}

/// An issue 11 §3 row: the default mount and `--read-only` against
/// fuse-ceiling; `bar` is the default mount's minimum ratio.
fn default_mount_row(
    comparison: &Comparison,
    measurement: String,
    figure: impl Fn(&Figures) -> (f64, String),
    bar: Option<f64>,
) -> Row {
    let ceiling = comparison.ceiling.as_ref().ok().map(&figure);
    let (default, default_shown) = figure(&comparison.packfs_default);
    let (read_only, read_only_shown) = figure(&comparison.packfs);
    let vs_default = ratio(default, ceiling.as_ref().map(|c| c.0));
    let vs_read_only = ratio(read_only, ceiling.as_ref().map(|c| c.0));
    let (target, met) = match bar {
        Some(bar) => (
            format!("≥ {bar}× ceiling (default)"),
            met(vs_default, Bar::AtLeast(bar)),
        ),
        None => ("—".into(), "—".into()),
    };
    row(
        measurement,
        format!("default {default_shown}"),
        format!(
            "ceiling {} · --read-only {read_only_shown}",
            ceiling.map_or_else(|| "n/a".into(), |c| c.1)
        ),
        format!(
            "default {} · --read-only {}",
            show_ratio(vs_default, "ceiling"),
            show_ratio(vs_read_only, "ceiling")
        ),
        &target,
        met,
    )
}

fn default_mount_rows(config: &Config, comparison: &Comparison) -> Vec<Row> {
    let small = format!("{} items of 16–64 KiB", thousands(config.small_files));
    let scan = |s: Scan| {
        (
            s.files_per_sec(),
            format!("{} files/s", rate(s.files_per_sec())),
        )
    };
    vec![
        default_mount_row(
            comparison,
            format!("11.3 1st pass over {small}, 1 reader: default mount"),
            |f| scan(f.scan1),
            Some(0.85),
        ),
        default_mount_row(
            comparison,
            format!("11.3 1st pass over {small}, {SCAN_READERS} readers: default mount"),
            |f| scan(f.scan8),
            Some(0.7),
        ),
        default_mount_row(
            comparison,
            format!(
                "11.3 1st pass over the {} MiB item: default mount",
                config.big_bytes >> 20
            ),
            |f| (f.big_first, mb(f.big_first)),
            None,
        ),
    ]
}

fn epoch_rows(config: &Config, epochs: &Epochs) -> Vec<Row> {
    epochs
        .mounts
        .iter()
        .map(|e| {
            let vs_plain = ratio(e.reread_mb, Some(epochs.plain_mb));
            row(
                format!(
                    "11.4 {} MiB item re-read after a remount on the same --cache-dir: {}",
                    config.big_bytes >> 20,
                    e.label
                ),
                format!("{} (first read {})", mb(e.reread_mb), mb(e.first_mb)),
                format!("plain disk, warm {}", mb(epochs.plain_mb)),
                show_ratio(vs_plain, "plain"),
                "≥ 0.9× plain",
                met(vs_plain, Bar::AtLeast(0.9)),
            )
        })
        .collect()
}

fn print_issue11(
    config: &Config,
    comparison: &Comparison,
    cold: &std::result::Result<ColdComparison, String>,
    epochs: &Epochs,
) {
    let mut rows = cold_rows(config, cold);
    rows.extend(default_mount_rows(config, comparison));
    rows.extend(epoch_rows(config, epochs));
    println!("\n## Issue 11: read performance II\n");
    print_table(&rows);
    println!();
    if let Ok(cold) = cold {
        println!(
            "11.1, 11.2: packfs --read-only; each figure on a fresh mount after \
             `echo 3 > /proc/sys/vm/drop_caches` (fuse-ceiling serves from RAM: its \
             figures are the FUSE limit, not a cold read), medians of {} round(s). \
             Readers take the next file of the list as they finish one; no listing is timed.",
            config.runs
        );
        if let Err(reason) = &cold.squashfuse {
            println!("squashfuse_ll column missing: {reason}.");
        } else {
            println!(
                "squashfuse_ll: `mksquashfs TREE IMG -noI -noD -noF -noX`, `squashfuse_ll -f IMG MNT`."
            );
        }
        if let Err(reason) = &cold.ceiling {
            println!("fuse-ceiling column of the cold rows missing: {reason}.");
        }
    }
    println!(
        "11.3: the figures of rows 1. and 2.; default = `packfs mount` without flags \
         (read-write). 11.4: the mount's page cache is new after the remount; nothing \
         else is dropped; medians of {} round(s), a new --cache-dir each round.",
        config.runs
    );
    for e in &epochs.mounts {
        let found = e
            .stats
            .as_deref()
            .map(passthrough_counters)
            .unwrap_or_default();
        match found.is_empty() {
            true => println!(
                "11.4 {}: no counter named *passthrough* in /.packfs/stats of the remount.",
                e.label
            ),
            false => println!(
                "11.4 {}: passthrough counters of the remount after the re-read: {}.",
                e.label,
                found.join(", ")
            ),
        }
    }
    if let Some(stats) = epochs.mounts.last().and_then(|e| e.stats.as_ref()) {
        println!(
            "\n`/.packfs/stats` of the last 11.4 remount ({}) after the re-read:\n\n```\n{stats}```",
            epochs.mounts.last().expect("checked").label
        );
    }
}
