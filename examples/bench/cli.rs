//! The command line (`--help` explains every scenario and what it is set
//! against) and the sizes of a run.

use clap::{Parser, ValueEnum};

/// The packfs benchmark: real mounts of data built here, each figure set
/// against references measured on the same files in the same run.
///
/// References: the disk (the source directory, warm page cache); tmpfs (a
/// page cache of 4 KiB pages, like FUSE's); fuse-ceiling (a FUSE
/// filesystem serving the tree from RAM and doing nothing else, built from
/// ../shared/tools/fuse-ceiling: the FUSE speed limit of the machine);
/// squashfuse_ll over an uncompressed squashfs image of the same tree
/// (Debian packages squashfuse and squashfs-tools); the write ceiling (the
/// same as fuse-ceiling for writes, mounted in this process); TileDB itself
/// (the Python `tiledb` package in .ci-venv-tiledb, or
/// PACKFS_TILEDB_PYTHON); `tar -cf`. A missing reference is reported and
/// its column left out; the rest is measured.
#[derive(Parser)]
#[command(
    name = "bench",
    verbatim_doc_comment,
    after_help = "Examples:\n  \
      cargo run --release --example bench -- --quick\n  \
      cargo run --release --example bench -- --only cold,writes --runs 5\n  \
      cargo run --release --example bench -- --only scale --scale-items 1000000,10000000 --no-import\n\n\
      Run as root for the cold scenario. Results, and what limits them: docs/PERFORMANCE.md."
)]
pub(crate) struct Args {
    /// Smaller data and one round.
    #[arg(long)]
    quick: bool,
    /// Rounds of the measurements that run in rounds; medians are shown
    /// [default: 3, or 1 with --quick].
    #[arg(long, value_name = "N", value_parser = positive)]
    runs: Option<usize>,
    /// The scenarios to run, comma-separated [default: all of them].
    #[arg(long, value_name = "SCENARIO,…", value_delimiter = ',')]
    only: Vec<Scenario>,
    /// Leave out the 1,000,000-item dataset: the many-items scenario and
    /// the bundles' 1M-file rows.
    #[arg(long = "skip-1m")]
    skip_1m: bool,
    /// scale: the item counts of the mount rows [default: 1000000,3000000,10000000;
    /// with --quick 100000,300000,1000000].
    #[arg(long, value_name = "N,…", value_delimiter = ',', value_parser = positive)]
    scale_items: Vec<usize>,
    /// scale: leave out `packfs import` of small files (as many as the
    /// first item count) against `tar -cf`.
    #[arg(long)]
    no_import: bool,
    /// scale: one-file commits made through a read-write mount at each
    /// item count (fsync time, index bytes written, store growth, diff).
    #[arg(long, value_name = "N", default_value_t = 10)]
    scale_commits: usize,
    /// scale: branches merged into main at each item count, each adding
    /// --scale-merge-items items (0: no merge).
    #[arg(long, value_name = "N", default_value_t = 8)]
    scale_merge_branches: usize,
    /// scale: items each merged branch adds [default: 1000000; with
    /// --quick 100000].
    #[arg(long, value_name = "N", value_parser = positive)]
    scale_merge_items: Option<usize>,
}

/// A number above 0.
fn positive(s: &str) -> Result<usize, String> {
    match s.parse() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("{s:?} is not a positive number")),
    }
}

/// What the bench can measure, in the order it runs and prints them.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Scenario {
    /// Warm reads on --read-only mounts: a 512 MiB item read twice
    /// (against the disk, fuse-ceiling and tmpfs), scans of 5,000 small
    /// items with 1 and 8 readers and 20,000 random 4 KiB preads (against
    /// the disk and fuse-ceiling), the daemons' peak memory; the 1-reader
    /// scan over a store that waits 20 ms per GET, prefetch on against off.
    Warm,
    /// First passes on a default (read-write) mount, measured in the warm
    /// rounds, against fuse-ceiling beside --read-only.
    DefaultMount,
    /// Later epochs: the big item re-read after a remount on the same
    /// --cache-dir, default and --read-only mounts, against the plain file
    /// with a warm page cache.
    Epochs,
    /// Cold reads (root: drop_caches before every figure): shuffled and
    /// sorted scans, bytes fetched per byte delivered, a 256 MiB item,
    /// `ls -lR`; against the plain directory, squashfuse_ll and
    /// fuse-ceiling.
    Cold,
    /// `cp -r` and `tar -x` of 20,000 small files into a read-write mount
    /// against a plain directory and the write ceiling; the commit at
    /// unmount; the objects stored.
    Writes,
    /// A 1,000,000-item dataset: mount time, `find`, `ls -lR`, the daemon's
    /// memory, against fixed targets.
    ManyItems,
    /// A DataBundle against a packfs dataset of the same compressible tree:
    /// write time, size, scans, preads; 1M files bundled against the
    /// many-items dataset.
    Bundles,
    /// A TileDB array's cells scanned through packfs against TileDB reading
    /// them in Python.
    Arrays,
    /// In process: direct write of a shard-like read against the staging
    /// path, in time and bytes written.
    Engine,
    /// WebDataset shards against the same items as files, and shuffled
    /// shards against key order; local store and 20 ms per GET.
    Views,
    /// Mounts of 1M, 3M and 10M items (mount time, `find`, memory, `ls -lR`)
    /// and `packfs import` of 1M files against `tar -cf` (~12 min, ~10 GB of
    /// disk).
    Scale,
}

impl Scenario {
    /// Whether it mounts anything (and so needs the packfs binary).
    pub(crate) fn mounts(self) -> bool {
        self != Scenario::Engine
    }
}

/// The choices and sizes of this run (`--quick` shrinks them).
pub(crate) struct Config {
    pub quick: bool,
    /// The chosen scenarios, in [`Scenario`] order.
    pub scenarios: Vec<Scenario>,
    pub skip_1m: bool,
    /// The scale scenario's item counts, when given.
    pub scale_items: Option<Vec<usize>>,
    pub no_import: bool,
    /// One-file commits at each scale count (0: none).
    pub scale_commits: usize,
    /// Branches merged at each scale count (0: none), and the items each
    /// adds.
    pub scale_merge_branches: usize,
    pub scale_merge_items: usize,
    /// Rounds of the measurements that run in rounds.
    pub runs: usize,
    /// The read tree: its big item and its small items.
    pub big_bytes: u64,
    pub small_files: usize,
    /// Files timed in the prefetch-off scan.
    pub off_files: usize,
    /// Items of the many-items dataset.
    pub tiny_items: usize,
    /// Files copied into the read-write mount by the writes scenario.
    pub write_files: usize,
    /// The cold tree: small files, how many of them a cold scan reads, and
    /// the size of its big item (also the bundles' big item).
    pub pool_files: usize,
    pub sample_files: usize,
    pub cold_big_bytes: u64,
}

impl Config {
    pub(crate) fn new(args: Args) -> Config {
        let scenarios = Scenario::value_variants()
            .iter()
            .copied()
            .filter(|s| args.only.is_empty() || args.only.contains(s))
            .collect();
        let (big_bytes, small_files, off_files, tiny_items, write_files, default_runs) =
            match args.quick {
                false => (512 << 20, 5_000, 500, 1_000_000, 20_000, 3),
                true => (128 << 20, 1_000, 100, 100_000, 2_000, 1),
            };
        let (pool_files, sample_files, cold_big_bytes) = match args.quick {
            false => (20_000, 5_000, 256 << 20),
            true => (2_000, 500, 64 << 20),
        };
        Config {
            quick: args.quick,
            scenarios,
            skip_1m: args.skip_1m,
            scale_items: (!args.scale_items.is_empty()).then_some(args.scale_items),
            no_import: args.no_import,
            scale_commits: args.scale_commits,
            scale_merge_branches: args.scale_merge_branches,
            scale_merge_items: args.scale_merge_items.unwrap_or(match args.quick {
                false => 1_000_000,
                true => 100_000,
            }),
            runs: args.runs.unwrap_or(default_runs),
            big_bytes,
            small_files,
            off_files,
            tiny_items,
            write_files,
            pool_files,
            sample_files,
            cold_big_bytes,
        }
    }

    pub(crate) fn wants(&self, scenario: Scenario) -> bool {
        self.scenarios.contains(&scenario)
    }

    pub(crate) fn mode(&self) -> &'static str {
        if self.quick {
            "quick (--quick)"
        } else {
            "full"
        }
    }

    /// The chosen scenarios as `--only` spells them.
    pub(crate) fn scenario_names(&self) -> String {
        let names: Vec<String> = self
            .scenarios
            .iter()
            .filter_map(|s| s.to_possible_value())
            .map(|v| v.get_name().to_string())
            .collect();
        names.join(",")
    }
}
