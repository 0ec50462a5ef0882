//! Cold reads: what a first epoch pays when nothing is cached anywhere.
//! A tree of its own (20,000 items of 16–64 KiB and a 256 MiB item;
//! `--quick`: 2,000 and 64 MiB), imported into its own dataset and packed
//! into an uncompressed squashfs image (`mksquashfs TREE IMG -noI -noD
//! -noF -noX`). Each figure is taken on a fresh mount after
//! `sync; echo 3 > /proc/sys/vm/drop_caches` (so root only; skipped,
//! saying so, otherwise):
//!
//! - 5,000 of the items (500) in a shuffled order of fixed seed, one reader
//!   (`xargs cat`), with the bytes the mount fetched from its store
//!   (`bytes_fetched` of `/.packfs/stats`) against the bytes delivered;
//! - 1 MiB reads of the big item (`dd bs=1M`);
//! - the first 5,000 items in name order with 1 and 8 readers (each reader
//!   takes the next file of the list, like `xargs -n1 -P8`);
//! - `ls -lR` of the tree.
//!
//! Measured on the plain directory, `squashfuse_ll` over the image (the
//! column is left out, saying how to install it, when squashfuse or
//! squashfs-tools is missing), fuse-ceiling (RAM: the FUSE limit, not a
//! cold read) and `packfs mount --read-only`, in rounds.

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::cli::Config;
use crate::data::{import_tree, write_big_item, write_small_items, Rng};
use crate::mounts::{counter, Daemon, Disk, FuseProcess, Mounted};
use crate::readers::{read_checked, read_list, time_ls_lr, Scan, READ_SIZE, SCAN_READERS};
use crate::references::squash_image;
use crate::table::{
    gb, mb, met, plain_row, print_table, rate, ratio, readers_label, row, show_ratio, thousands,
    Bar, Row,
};
use crate::{median_by, progress, Bench, Result};

/// The cold tree: `cold/pool/item-NNNNN.bin` (small items) and
/// `cold/big/big.bin`.
const POOL_DIR: &str = "cold/pool";
const COLD_BIG: &str = "cold/big/big.bin";
/// Seed of the shuffled order of the cold scan (the same on every system).
const SHUFFLE_SEED: u64 = 0x5DEE_CE66_D1CE_4E5B;
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

/// A fresh mount of one system.
type FreshMount<'a> = Box<dyn Fn() -> Result<Box<dyn Mounted>> + 'a>;

/// One round of the cold rows on one system.
fn measure_round(
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
    let ls_secs = time_ls_lr(m.root())?.as_secs_f64();
    Ok(ColdFigures {
        shuffled: shuffled_scan,
        fetched,
        big_mb,
        sorted1,
        sorted8,
        ls_secs,
    })
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

/// The cold comparison, or why it was skipped.
pub(crate) struct Cold(std::result::Result<ColdComparison, String>);

/// Builds the cold tree, its dataset and its squashfs image and measures
/// the plain directory, squashfuse_ll, fuse-ceiling and `packfs
/// --read-only` cold, in rounds.
pub(crate) fn measure(bench: &Bench) -> Result<Cold> {
    if let Err(reason) = check_drop_caches() {
        progress(format!("cold rows skipped: {reason}"));
        return Ok(Cold(Err(reason)));
    }
    let config = &bench.config;
    let tree = bench.work().join("cold-src");
    let cold = generate_cold_tree(&tree, config)?;
    let dataset = bench.work().join("dataset-cold");
    bench.runtime.block_on(import_tree(&tree, &dataset))?;
    let image = bench.work().join("cold.squashfs");
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
    let squash_mnt = bench.mountpoint("mnt-cold-squashfuse")?;
    let squash: std::result::Result<FreshMount, String> = squashfuse.map(|bin| {
        let (image, mnt) = (image.clone(), squash_mnt.clone());
        Box::new(move || {
            Ok(Box::new(FuseProcess::squashfuse(&bin, &image, &mnt)?) as Box<dyn Mounted>)
        }) as FreshMount
    });
    let ceiling_mnt = bench.mountpoint("mnt-cold-ceiling")?;
    let ceiling: std::result::Result<FreshMount, String> = match bench.ceiling() {
        Ok(bin) => Ok(Box::new(move || {
            Ok(Box::new(FuseProcess::ceiling(bin, tree_ref, &ceiling_mnt)?) as Box<dyn Mounted>)
        })),
        Err(reason) => Err(reason.clone()),
    };
    let packfs_mnt = bench.mountpoint("mnt-cold-packfs")?;
    let packfs: FreshMount = Box::new(|| {
        Ok(Box::new(Daemon::mount(&bench.bin, &dataset, &packfs_mnt)?) as Box<dyn Mounted>)
    });

    let (mut plain_rounds, mut packfs_rounds) = (Vec::new(), Vec::new());
    let mut squash_rounds = squash.as_ref().map(|_| Vec::new()).map_err(Clone::clone);
    let mut ceiling_rounds = ceiling.as_ref().map(|_| Vec::new()).map_err(Clone::clone);
    for round in 1..=config.runs {
        let tag = |name: &str| format!("{name} (cold round {round} of {})", config.runs);
        plain_rounds.push(measure_round(
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
                match measure_round(&tag(name), &cold, config, &shuffled, mount) {
                    Ok(figures) => list.push(figures),
                    Err(e) => *rounds = Err(format!("{name} failed: {e}")),
                }
            }
        }
        packfs_rounds.push(measure_round(
            &tag("packfs --read-only"),
            &cold,
            config,
            &shuffled,
            &packfs,
        )?);
    }
    Ok(Cold(Ok(ColdComparison {
        pool_files: cold.pool.len(),
        plain: ColdFigures::median(&plain_rounds),
        squashfuse: squash_rounds.map(|r| ColdFigures::median(&r)),
        ceiling: ceiling_rounds.map(|r| ColdFigures::median(&r)),
        packfs: ColdFigures::median(&packfs_rounds),
    })))
}

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

fn rows(config: &Config, cold: &ColdComparison) -> Vec<Row> {
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
                "{n} of {} items of 16–64 KiB in shuffled order, cold, 1 reader",
                thousands(cold.pool_files)
            ),
            |f| scan(f.shuffled),
            &[(ColdRef::Squashfuse, 1.0)],
        ),
        row(
            "the shuffled scan: bytes fetched from the store / bytes delivered".into(),
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
            format!("the first {n} items in name order, cold, 1 reader"),
            |f| scan(f.sorted1),
            &[],
        ),
        cold_row(
            cold,
            format!(
                "the first {n} items in name order, cold, {SCAN_READERS} readers (xargs -P{SCAN_READERS})"
            ),
            |f| scan(f.sorted8),
            &[],
        ),
        cold_row(
            cold,
            format!(
                "1 MiB reads of a {} MiB item, cold",
                config.cold_big_bytes >> 20
            ),
            |f| (f.big_mb, mb(f.big_mb)),
            &[(ColdRef::Squashfuse, 1.0), (ColdRef::Plain, 0.6)],
        ),
        cold_row(
            cold,
            "`ls -lR` of the cold tree, cold (ratios of speed: 1 / time)".into(),
            |f| (1.0 / f.ls_secs, format!("{:.2} s", f.ls_secs)),
            &[],
        ),
    ]
}

pub(crate) fn print(config: &Config, cold: &Cold) {
    let title = "Cold reads: after drop_caches, against the plain directory, squashfuse_ll and fuse-ceiling";
    let cold = match &cold.0 {
        Ok(cold) => cold,
        Err(reason) => {
            let skipped = plain_row("cold reads".into(), format!("skipped: {reason}"));
            return print_table(title, &[skipped]);
        }
    };
    print_table(title, &rows(config, cold));
    println!(
        "packfs --read-only; each figure on a fresh mount after \
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
        println!("fuse-ceiling column missing: {reason}.");
    }
}
