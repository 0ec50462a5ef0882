//! Warm reads: first passes on fresh mounts (empty kernel and packfs
//! caches) of the read tree, its data warm in the page cache of the disk
//! below: a sequential read of the big item (a first and a second pass),
//! scans of the small items with 1 and 8 readers (each reader a
//! contiguous slice of the listing; the listing is timed), random
//! `pread`s in the big item, and the daemons' peak memory. Measured on
//! the disk (the source directory), fuse-ceiling, `packfs mount
//! --read-only` and a default (read-write) mount, in rounds, each round
//! measuring them in turn so that load on the machine hits them alike;
//! the second pass also against a tmpfs copy of the big item. The default
//! mount's rows are `default_mount.rs`'s table.

use std::path::Path;

use packfs_core::cache::CacheOptions;

use crate::cli::Config;
use crate::data::{Files, ReadTree, BIG_ITEM, SMALL_DIR};
use crate::mounts::{Daemon, Disk, FuseProcess, Mounted};
use crate::prefetch::{self, Delayed};
use crate::readers::{
    random_preads, read_checked, scan, sequential, Preads, Scan, PREADS, READ_SIZE, SCAN_READERS,
};
use crate::references::{small_page_copy, CEILING_THREADS};
use crate::table::{
    mb, met, mib, print_table, ratio, readers_label, row, show_preads, show_ratio, show_scan,
    thousands, Bar, Row,
};
use crate::{median_by, progress, Bench, Result};

/// Figures of one filesystem.
pub(crate) struct Figures {
    pub big_first: f64,
    pub big_second: f64,
    pub scan1: Scan,
    pub scan8: Scan,
    pub preads: Preads,
    /// Largest peak RSS of the serving process over all mounts.
    pub peak_kib: Option<u64>,
    /// Counters of the last mount.
    pub stats: Option<String>,
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

/// Medians of every system under test.
pub(crate) struct Comparison {
    disk: Figures,
    /// Second pass over the big item in tmpfs; `Err` says why it is missing.
    small_pages: std::result::Result<f64, String>,
    /// `Err` says why the fuse-ceiling column is missing.
    pub ceiling: std::result::Result<Figures, String>,
    /// `packfs mount --read-only`.
    pub packfs: Figures,
    /// `packfs mount` without flags: a read-write mount.
    pub packfs_default: Figures,
}

/// Reads the whole tree once, so that the disk's figures are warm.
fn warm_page_cache(root: &Path, files: &Files) -> Result<()> {
    progress("direct disk: reading everything once to warm the page cache");
    let mut buf = vec![0u8; READ_SIZE];
    read_checked(&root.join(BIG_ITEM), files.big_len, &mut buf)?;
    for (name, &len) in &files.small {
        read_checked(&root.join(SMALL_DIR).join(name), len, &mut buf)?;
    }
    Ok(())
}

/// Measures the disk, tmpfs, fuse-ceiling, `--read-only` and the default
/// mount in `config.runs` rounds, one after the other within a round.
pub(crate) fn compare(bench: &Bench, tree: &ReadTree) -> Result<Comparison> {
    // Built (if it must be) before the page cache is warmed, not after.
    let ceiling_bin = bench.ceiling();
    warm_page_cache(&tree.src, &tree.files)?;
    let (ceiling_mnt, packfs_mnt) = (
        bench.mountpoint("mnt-ceiling")?,
        bench.mountpoint("mnt-packfs")?,
    );
    let default_mnt = bench.mountpoint("mnt-default")?;
    let (src, files, bin) = (tree.src.as_path(), &tree.files, bench.bin.as_path());
    let small_pages = small_page_copy(src);
    let small_pages = small_pages.as_ref().map(|dir| dir.path());
    let ceiling = ceiling_bin
        .map(|ceiling| move || FuseProcess::ceiling(ceiling, src, &ceiling_mnt))
        .map_err(Clone::clone);
    let packfs = || Daemon::mount(bin, &tree.dataset, &packfs_mnt);
    let packfs_default = || Daemon::mount_with(bin, &tree.dataset, &default_mnt, &[]);

    let config = &bench.config;
    let mut disk_rounds = Vec::new();
    let mut small_page_rounds = Vec::new();
    let mut ceiling_rounds = ceiling.as_ref().map(|_| Vec::new()).map_err(Clone::clone);
    let mut packfs_rounds = Vec::new();
    let mut default_rounds = Vec::new();
    for round in 1..=config.runs {
        let tag = |name: &str| format!("{name} (round {round} of {})", config.runs);
        disk_rounds.push(measure(&tag("direct disk"), files, || {
            Ok(Disk(src.to_path_buf()))
        })?);
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
        packfs_rounds.push(measure(&tag("packfs --read-only"), files, packfs)?);
        default_rounds.push(measure(
            &tag("packfs default (read-write) mount"),
            files,
            packfs_default,
        )?);
    }
    Ok(Comparison {
        disk: Figures::median(&disk_rounds),
        small_pages: small_pages
            .map(|_| *median_by(&small_page_rounds, |x| *x))
            .map_err(|e| e.to_string()),
        ceiling: ceiling_rounds.map(|rounds| Figures::median(&rounds)),
        packfs: Figures::median(&packfs_rounds),
        packfs_default: Figures::median(&default_rounds),
    })
}

/// One round on one filesystem: the sequential passes, both scans and the
/// random reads, each first pass on a mount of its own from `fresh`.
fn measure<M: Mounted>(
    label: &str,
    files: &Files,
    fresh: impl Fn() -> Result<M>,
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
        "{label}: {} random 4 KiB preads",
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

/// The sequential and scan rows.
fn compared_rows(config: &Config, comparison: &Comparison) -> Vec<Row> {
    let big = format!("{} MiB item", config.big_bytes >> 20);
    let small = format!("{} items of 16–64 KiB", thousands(config.small_files));
    let scan_figure = |s: Scan| (s.files_per_sec(), show_scan(&s));
    vec![
        compared_row(
            comparison,
            format!("sequential read, {big}, 1st pass"),
            |f| (f.big_first, mb(f.big_first)),
            Some((Reference::Ceiling, 0.8)),
        ),
        compared_row(
            comparison,
            format!("sequential read, {big}, 2nd pass (page cache)"),
            |f| (f.big_second, mb(f.big_second)),
            Some((Reference::Disk, 0.8)),
        ),
        small_page_row(comparison, &big),
        compared_row(
            comparison,
            format!("scan of {small}, 1 reader, 1st pass"),
            |f| scan_figure(f.scan1),
            Some((Reference::Ceiling, 0.85)),
        ),
        compared_row(
            comparison,
            format!("scan of {small}, {SCAN_READERS} readers, 1st pass"),
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
        format!("sequential read, {big}, 2nd pass, vs a page cache of 4 KiB pages"),
        mb(packfs),
        reference,
        show_ratio(vs, "tmpfs"),
        "—",
        "—".into(),
    )
}

/// The `--read-only` daemons' peak memory against the cache + prefetch
/// bound.
fn memory_row(packfs: &Figures) -> Row {
    let bound = CacheOptions::default();
    let bound_kib = (bound.cache_bytes + bound.prefetch_memory) >> 10;
    row(
        "memory: peak RSS (VmHWM) of the --read-only daemons of the sequential reads, scans and preads"
            .into(),
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

/// The warm reads' table, with the delayed-store rows.
pub(crate) fn print(config: &Config, comparison: &Comparison, delayed: &Delayed) {
    let mut rows = compared_rows(config, comparison);
    rows.extend(prefetch::rows(config, delayed, &comparison.packfs.scan1));
    rows.push(compared_row(
        comparison,
        format!(
            "{} random 4 KiB preads in the {} MiB item, 1st pass",
            thousands(PREADS),
            config.big_bytes >> 20
        ),
        |f| (f.preads.per_sec, show_preads(&f.preads)),
        None,
    ));
    rows.push(memory_row(&comparison.packfs));
    print_table(
        "Warm reads: packfs --read-only against the disk and fuse-ceiling",
        &rows,
    );
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
        "Sequential reads, scans and preads: medians of {} round(s), each round measuring disk, \
         ceiling and packfs in turn. The rows at 20 ms per GET: medians of as many rounds of \
         their own. Expect ±30% between runs on this shared machine.",
        config.runs
    );
    if let Some(stats) = &comparison.packfs.stats {
        println!(
            "\n`/.packfs/stats` of the last --read-only mount (the random preads):\n\n```\n{stats}```"
        );
    }
}
