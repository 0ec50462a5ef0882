//! Scale: mounts of 1M, 3M and 10M tiny items (`--quick`: 100k, 300k,
//! 1M; `--scale-items` chooses) — mount ready, `find | wc -l`, the
//! daemon's VmHWM, and `ls -lR` at the first count — and `packfs import`
//! of as many small files as the first count (left out with `--no-import`)
//! against `tar -cf` of the same tree on the same disk, with the peak RSS
//! of each; then the import's peak RSS on trees of hard links of each
//! count up to 10M.
//!
//! At each count, `--scale-commits` one-file commits through a read-write
//! mount (`fsync` of a new file): the time `fsync` takes, the bytes of
//! index (Track roots, pages, Manifests) each writes, the store's growth
//! over all of them, and `packfs diff` of the last two revisions. Then
//! `--scale-merge-branches` branches (8), each adding
//! `--scale-merge-items` items (1M) under a directory of its own, as a
//! sharded ingest's workers do, merged into `main` by `packfs merge`,
//! and `packfs gc --dry-run` over the whole history (its time and peak
//! RSS).
//!
//! At each count, on fresh mounts: `ls -l` of one directory (a
//! thousandth of the items: 100,000 entries at 100M), and `stat` of 10,000
//! random paths with the daemon's VmHWM after them; and a mount with
//! three views (WebDataset in sample order and shuffled in shards of
//! 10,000 samples, and per-sample directories): `ls -l` of each (which
//! plans it), a read of the first shuffled shard, and the VmHWM after.
//!
//! Mounts of the first count run `--runs` rounds (medians shown); the
//! others and the import run once (each takes minutes).

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::data::{
    build_branch, build_many, tiny_paths, write_random_file, Rng, TIMELINE, TINY_DIRS,
    TINY_MODALITY,
};
use crate::mounts::Daemon;
use crate::readers::{time_ls_lr, timed_find};
use crate::table::{met, mib, print_table, row, secs, show_ratio, thousands, Bar};
use crate::{progress, Bench, Result};

/// Items per directory level of the import tree.
const IMPORT_DIRS: usize = 1000;
/// Sizes of the import tree's files.
const IMPORT_MIN: u64 = 100;
const IMPORT_MAX: u64 = 1000;
/// Files of the largest tree of hard links imported.
const LINKED_IMPORT_MAX: usize = 10_000_000;
/// Distinct files the trees of hard links link to.
const LINKED_TARGETS: usize = 1000;
/// Peak RSS of an import of any number of files (KiB): what is in
/// flight and a batch, never a record per file.
const IMPORT_PEAK_KIB: u64 = 128 << 10;

/// One item count's figures (medians over its rounds).
struct ScaleRow {
    items: usize,
    rounds: usize,
    mount: Duration,
    find: Duration,
    /// VmHWM of the daemon once the mount is ready (KiB).
    mount_hwm_kib: u64,
    /// VmHWM of the daemon after `find` (KiB).
    find_hwm_kib: u64,
    /// `ls -lR` on a fresh mount and VmHWM after it; smallest count only.
    ls: Option<(Duration, u64)>,
    cold: ColdRow,
    commits: Option<CommitRow>,
    merge: Option<MergeRow>,
    /// `packfs gc --dry-run` of the whole history, once the commits and
    /// the merge are in it: seconds and peak RSS (KiB).
    gc: (f64, u64),
    views: ViewRow,
}

/// A mount with three views: WebDataset in sample order and shuffled, and
/// per-sample directories.
struct ViewRow {
    /// Mount ready, with the views.
    mount: Duration,
    /// `ls -l` of the timeline of each view (its plan) and the shards.
    key_ls: Duration,
    key_shards: usize,
    shuffled_ls: Duration,
    shuffled_shards: usize,
    /// `ls -l` of a directory of the per-sample view (which plans it), and
    /// the sample directories it lists.
    samples_ls: Duration,
    sample_dirs: usize,
    /// VmHWM of the daemon once all three are planned (KiB).
    plan_hwm_kib: u64,
    /// Reading the first shuffled shard whole, and its bytes.
    shard_read: Duration,
    shard_bytes: u64,
    /// VmHWM of the daemon after all of it (KiB).
    hwm_kib: u64,
}

/// The views' mount's block cache: each tiny item of a shuffled shard
/// fetches a block of its own, and the default cache (512 MiB) would be
/// what the VmHWM shows.
const VIEW_CACHE: &str = "64MiB";

/// Samples a shard of the shuffled view holds.
const SHUFFLED_SHARD_SAMPLES: usize = 10_000;

/// Lookups on fresh mounts.
struct ColdRow {
    /// Entries of the directory listed.
    entries: usize,
    /// `ls -l` of it.
    ls: Duration,
    /// `stat` of [`RANDOM_STATS`] random paths, and VmHWM after (KiB).
    stats: Duration,
    stats_hwm_kib: u64,
}

/// `find`'s rate on the whole-Track mount at 10M items, in items a second:
/// what a paged mount's `find` is held to at the largest count.
const FIND_RATE: f64 = 2.05e6;

/// Random paths a cold-lookup round stats.
const RANDOM_STATS: usize = 10_000;

/// One-file commits through a read-write mount.
struct CommitRow {
    commits: usize,
    /// Median time of `fsync` of a new file (its commit).
    fsync: Duration,
    /// Median bytes of index objects one commit stored.
    index_bytes: u64,
    /// Growth of the whole store over all the commits.
    growth: u64,
    /// `packfs diff` of the last two revisions.
    diff: Duration,
}

/// One round: mount time, find time, VmHWM after find, `ls -lR` with the
/// VmHWM after it, and VmHWM once mounted.
type Pass = (Duration, Duration, u64, Option<(Duration, u64)>, u64);

/// `packfs import` against `tar -cf` of the same tree.
struct ImportRow {
    files: usize,
    import_secs: f64,
    import_kib: u64,
    tar_secs: f64,
    tar_kib: u64,
}

/// `packfs import` of a tree of hard links.
struct LinkedImport {
    files: usize,
    secs: f64,
    peak_kib: u64,
}

/// `packfs merge` of branches that each added items.
struct MergeRow {
    branches: usize,
    /// Items each branch added.
    items: usize,
    secs: f64,
    peak_kib: u64,
    /// Bytes of index objects (Track roots, pages, Manifests) it wrote.
    index_bytes: u64,
}

/// What [`measure`] measured: a row per item count, and the import.
pub(crate) struct ScaleBench {
    rows: Vec<ScaleRow>,
    import: Option<ImportRow>,
    linked: Vec<LinkedImport>,
}

pub(crate) fn measure(bench: &Bench) -> Result<ScaleBench> {
    let (config, bin, work) = (&bench.config, bench.bin.as_path(), bench.work());
    let counts = match (&config.scale_items, config.quick) {
        (Some(counts), _) => counts.clone(),
        (None, false) => vec![1_000_000, 3_000_000, 10_000_000],
        (None, true) => vec![100_000, 300_000, 1_000_000],
    };
    let mnt = bench.mountpoint("mnt-scale")?;
    let mut rows = Vec::new();
    for (k, &n) in counts.iter().enumerate() {
        let dataset = work.join(format!("dataset-scale-{n}"));
        progress(format!(
            "scale: building a dataset of {} items",
            thousands(n)
        ));
        bench.runtime.block_on(build_many(&dataset, n))?;
        let rounds = if k == 0 { config.runs } else { 1 };
        let mut passes = Vec::new();
        for round in 0..rounds {
            progress(format!(
                "scale: {} items, round {}: mount, find",
                thousands(n),
                round + 1
            ));
            let daemon = Daemon::mount(bin, &dataset, &mnt)?;
            let (_, mounted_hwm) = daemon.memory_kib()?;
            let find = timed_find(&mnt, tiny_paths(n))?;
            let (_, hwm) = daemon.memory_kib()?;
            let mount = daemon.mount_time;
            drop(daemon);
            progress(format!(
                "scale: mount {:.2} s (VmHWM {}), find {:.2} s, VmHWM {}",
                mount.as_secs_f64(),
                mib(mounted_hwm),
                find.as_secs_f64(),
                mib(hwm)
            ));
            let ls = match k {
                0 => {
                    let daemon = Daemon::mount(bin, &dataset, &mnt)?;
                    let ls = time_ls_lr(&mnt)?;
                    let (_, hwm) = daemon.memory_kib()?;
                    progress(format!(
                        "scale: ls -lR {:.2} s, VmHWM {}",
                        ls.as_secs_f64(),
                        mib(hwm)
                    ));
                    Some((ls, hwm))
                }
                _ => None,
            };
            passes.push((mount, find, hwm, ls, mounted_hwm));
        }
        let cold = cold_lookups(bin, &dataset, &mnt, n)?;
        let views = views(bin, &dataset, &mnt, n)?;
        let commits = match config.scale_commits {
            0 => None,
            k => Some(commits(bin, &dataset, &mnt, n, k)?),
        };
        let merge = match config.scale_merge_branches {
            0 => None,
            b => Some(merges(bench, &dataset, n, b, config.scale_merge_items)?),
        };
        progress(format!("scale: {} items: gc --dry-run", thousands(n)));
        let gc_args = [
            bin.as_os_str(),
            "gc".as_ref(),
            "--dry-run".as_ref(),
            dataset.as_os_str(),
        ];
        let gc = timed_peak(work, "packfs gc --dry-run", &gc_args)?;
        let median = |f: &dyn Fn(&Pass) -> f64| {
            let mut v: Vec<f64> = passes.iter().map(f).collect();
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        rows.push(ScaleRow {
            items: n,
            rounds,
            mount: Duration::from_secs_f64(median(&|p| p.0.as_secs_f64())),
            find: Duration::from_secs_f64(median(&|p| p.1.as_secs_f64())),
            mount_hwm_kib: median(&|p| p.4 as f64) as u64,
            find_hwm_kib: median(&|p| p.2 as f64) as u64,
            ls: passes[0].3.map(|_| {
                (
                    Duration::from_secs_f64(median(&|p| p.3.map_or(0.0, |l| l.0.as_secs_f64()))),
                    median(&|p| p.3.map_or(0.0, |l| l.1 as f64)) as u64,
                )
            }),
            cold,
            commits,
            merge,
            gc,
            views,
        });
        fs::remove_dir_all(&dataset)?;
    }
    let (import, linked) = match config.no_import {
        true => (None, Vec::new()),
        false => (
            Some(import_vs_tar(bin, work, counts[0])?),
            linked_imports(bin, work, &counts)?,
        ),
    };
    Ok(ScaleBench {
        rows,
        import,
        linked,
    })
}

/// On fresh mounts of the dataset of `n` items: `ls -l` of its first
/// directory, then `stat` of [`RANDOM_STATS`] random items.
fn cold_lookups(bin: &Path, dataset: &Path, mnt: &Path, n: usize) -> Result<ColdRow> {
    let dir = mnt.join(TIMELINE).join(TINY_MODALITY).join("d0000");
    let entries = n.div_ceil(TINY_DIRS);
    let daemon = Daemon::mount(bin, dataset, mnt)?;
    let (ls, listed) = timed_ls_l(&dir)?;
    if listed != entries {
        return Err(format!(
            "ls -l {} listed {listed}, expected {entries}",
            dir.display()
        )
        .into());
    }
    drop(daemon);
    let daemon = Daemon::mount(bin, dataset, mnt)?;
    let mut rng = Rng(0x5eed);
    let paths: Vec<PathBuf> = (0..RANDOM_STATS)
        .map(|_| {
            let i = (rng.next() % n as u64) as usize;
            let name = format!("d{:04}/item-{i:06}.jpg", i % TINY_DIRS);
            mnt.join(TIMELINE).join(TINY_MODALITY).join(name)
        })
        .collect();
    let start = Instant::now();
    for path in &paths {
        fs::metadata(path)?;
    }
    let stats = start.elapsed();
    let (_, stats_hwm_kib) = daemon.memory_kib()?;
    drop(daemon);
    progress(format!(
        "scale: ls -l of {} entries {:.3} s; stat of {RANDOM_STATS} random paths {:.3} s, VmHWM {}",
        thousands(entries),
        ls.as_secs_f64(),
        stats.as_secs_f64(),
        mib(stats_hwm_kib)
    ));
    Ok(ColdRow {
        entries,
        ls,
        stats,
        stats_hwm_kib,
    })
}

/// `ls -l DIR`: how long it took, and the entries it listed.
fn timed_ls_l(dir: &Path) -> Result<(Duration, usize)> {
    let start = Instant::now();
    let out = Command::new("ls").arg("-l").arg(dir).output()?;
    let took = start.elapsed();
    if !out.status.success() {
        return Err(format!("ls -l {} failed ({})", dir.display(), out.status).into());
    }
    // A total line, then one line an entry.
    let listed = out.stdout.iter().filter(|&&b| b == b'\n').count() - 1;
    Ok((took, listed))
}

/// On a fresh mount with a WebDataset view in sample order, a shuffled
/// one and the per-sample view: `ls -l` of each (which plans it), a read
/// of the first shuffled shard, and the daemon's VmHWM after.
fn views(bin: &Path, dataset: &Path, mnt: &Path, n: usize) -> Result<ViewRow> {
    let shuffled = format!(".shuffled=webdataset:samples={SHUFFLED_SHARD_SAMPLES},shuffle=1");
    let daemon = Daemon::mount_with(
        bin,
        dataset,
        mnt,
        &[
            "--read-only",
            "--cache-bytes",
            VIEW_CACHE,
            "--view",
            ".wds=webdataset",
            "--view",
            &shuffled,
            "--view",
            ".samples=samples",
        ],
    )?;
    let (key_ls, key_shards) = timed_ls_l(&mnt.join(".wds").join(TIMELINE))?;
    let (shuffled_ls, shuffled_shards) = timed_ls_l(&mnt.join(".shuffled").join(TIMELINE))?;
    if shuffled_shards != n.div_ceil(SHUFFLED_SHARD_SAMPLES) {
        return Err(
            format!("the shuffled view has {shuffled_shards} shards of {n} samples").into(),
        );
    }
    let samples_dir = mnt.join(".samples").join(TIMELINE).join("d0000");
    let (samples_ls, sample_dirs) = timed_ls_l(&samples_dir)?;
    if sample_dirs != n.div_ceil(TINY_DIRS) {
        return Err(format!("{} lists {sample_dirs} samples", samples_dir.display()).into());
    }
    let (_, plan_hwm_kib) = daemon.memory_kib()?;
    let shard = mnt
        .join(".shuffled")
        .join(TIMELINE)
        .join("shard-000000.tar");
    let start = Instant::now();
    let shard_bytes = fs::read(&shard)?.len() as u64;
    let shard_read = start.elapsed();
    if shard_bytes != fs::metadata(&shard)?.len() {
        return Err(format!("{} read short", shard.display()).into());
    }
    let (_, hwm_kib) = daemon.memory_kib()?;
    let row = ViewRow {
        mount: daemon.mount_time,
        key_ls,
        key_shards,
        shuffled_ls,
        shuffled_shards,
        samples_ls,
        sample_dirs,
        plan_hwm_kib,
        shard_read,
        shard_bytes,
        hwm_kib,
    };
    drop(daemon);
    progress(format!(
        "scale: views: mount {:.2} s; ls -l {:.2} s ({key_shards} shards), shuffled {:.2} s ({shuffled_shards} shards), per-sample {:.2} s ({sample_dirs} samples), VmHWM {}; first shuffled shard {} in {:.2} s; VmHWM {}",
        row.mount.as_secs_f64(),
        key_ls.as_secs_f64(),
        shuffled_ls.as_secs_f64(),
        samples_ls.as_secs_f64(),
        mib(plan_hwm_kib),
        bytes(shard_bytes),
        shard_read.as_secs_f64(),
        mib(hwm_kib)
    ));
    Ok(row)
}

/// `k` one-file commits into the dataset of `n` items through a read-write
/// mount, then `packfs diff` of the last two revisions.
fn commits(bin: &Path, dataset: &Path, mnt: &Path, n: usize, k: usize) -> Result<CommitRow> {
    progress(format!(
        "scale: {} items: {k} one-file commits through a read-write mount",
        thousands(n)
    ));
    let store_before = tree_bytes(dataset)?;
    let daemon = Daemon::mount_with(bin, dataset, mnt, &[])?;
    let dir = mnt.join(TIMELINE).join(TINY_MODALITY);
    let (mut fsyncs, mut index) = (Vec::new(), Vec::new());
    for i in 0..k {
        let before = index_objects(dataset)?;
        let start = Instant::now();
        let mut file = fs::File::create(dir.join(format!("commit-{i:03}.txt")))?;
        file.write_all(b"one new file\n")?;
        file.sync_all()?;
        fsyncs.push(start.elapsed());
        let written: u64 = index_objects(dataset)?
            .into_iter()
            .filter(|(name, _)| !before.contains_key(name))
            .map(|(_, len)| len)
            .sum();
        index.push(written);
    }
    daemon.unmount_and_wait()?;
    let growth = tree_bytes(dataset)?.saturating_sub(store_before);
    let start = Instant::now();
    let out = Command::new(bin)
        .args([
            "diff".as_ref(),
            dataset.as_os_str(),
            "main~1".as_ref(),
            "main".as_ref(),
        ])
        .output()?;
    let diff = start.elapsed();
    let listed = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() || listed.lines().count() != 1 {
        return Err(format!(
            "packfs diff of one commit listed {listed:?} ({})",
            out.status
        )
        .into());
    }
    fsyncs.sort();
    index.sort();
    let row = CommitRow {
        commits: k,
        fsync: fsyncs[k / 2],
        index_bytes: index[k / 2],
        growth,
        diff,
    };
    progress(format!(
        "scale: fsync {:.3} s, {} of index a commit, store +{} after {k}, diff {:.2} s",
        row.fsync.as_secs_f64(),
        bytes(row.index_bytes),
        bytes(row.growth),
        row.diff.as_secs_f64()
    ));
    Ok(row)
}

/// The index objects of the dataset at `dir` (Track roots, pages,
/// Manifests), by path, with their sizes.
fn index_objects(dir: &Path) -> Result<HashMap<PathBuf, u64>> {
    let mut out = HashMap::new();
    for kind in ["tracks", "pages", "manifests"] {
        let Ok(entries) = fs::read_dir(dir.join("_packfs").join(kind)) else {
            continue;
        };
        for e in entries {
            let e = e?;
            out.insert(e.path(), e.metadata()?.len());
        }
    }
    Ok(out)
}

/// Bytes of every file below `dir`.
fn tree_bytes(dir: &Path) -> Result<u64> {
    let mut total = 0;
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for e in fs::read_dir(&d)? {
            let e = e?;
            let meta = e.metadata()?;
            match meta.is_dir() {
                true => pending.push(e.path()),
                false => total += meta.len(),
            }
        }
    }
    Ok(total)
}

/// `n` bytes in B, KiB or MiB.
fn bytes(n: u64) -> String {
    match n {
        n if n < 1 << 10 => format!("{n} B"),
        n if n < 1 << 20 => format!("{:.1} KiB", n as f64 / 1024.0),
        n => format!("{:.1} MiB", n as f64 / (1 << 20) as f64),
    }
}

/// Writes `files` files of 100–1000 bytes as `SRC/train/files/dNNN/…`,
/// then times `tar -cf` and `packfs import` of it, each under
/// `/usr/bin/time` for its peak RSS.
fn import_vs_tar(bin: &Path, work: &Path, files: usize) -> Result<ImportRow> {
    progress(format!(
        "scale: writing {} files of {IMPORT_MIN}–{IMPORT_MAX} bytes to import",
        thousands(files)
    ));
    let src = work.join("import-src");
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut buf = vec![0u8; IMPORT_MAX as usize];
    for i in 0..files {
        let dir = src
            .join("train/files")
            .join(format!("d{:03}", i % IMPORT_DIRS));
        if i < IMPORT_DIRS {
            fs::create_dir_all(&dir)?;
        }
        let path = dir.join(format!("f{i:07}.bin"));
        write_random_file(&path, IMPORT_MIN..=IMPORT_MAX, &mut rng, &mut buf)?;
    }
    // Both read the tree from a warm page cache and write to the same disk.
    let timed = |what: &str, args: &[&OsStr]| timed_peak(work, what, args);
    progress("scale: tar -cf of the tree");
    let tar = work.join("import-src.tar");
    let (tar_secs, tar_kib) = timed(
        "tar -cf",
        &[
            "tar".as_ref(),
            "-cf".as_ref(),
            tar.as_os_str(),
            "-C".as_ref(),
            src.as_os_str(),
            ".".as_ref(),
        ],
    )?;
    fs::remove_file(&tar)?;
    progress("scale: packfs import of the tree");
    let (import_secs, import_kib) = timed_import(bin, work, "packfs import", &src)?;
    Ok(ImportRow {
        files,
        import_secs,
        import_kib,
        tar_secs,
        tar_kib,
    })
}

/// For each count up to [`LINKED_IMPORT_MAX`], `packfs import` of a tree
/// of that many hard links to [`LINKED_TARGETS`] files of
/// {IMPORT_MIN}–{IMPORT_MAX} B, 1,000 a directory: 10M files in a few
/// hundred MB of directory entries rather than 40 GB of blocks. Its peak
/// RSS says whether an import's memory grows with its file count.
fn linked_imports(bin: &Path, work: &Path, counts: &[usize]) -> Result<Vec<LinkedImport>> {
    let targets = work.join("link-targets");
    fs::create_dir_all(&targets)?;
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let mut buf = vec![0u8; IMPORT_MAX as usize];
    for t in 0..LINKED_TARGETS {
        let path = targets.join(format!("t{t:04}"));
        write_random_file(&path, IMPORT_MIN..=IMPORT_MAX, &mut rng, &mut buf)?;
    }
    let mut rows = Vec::new();
    for &files in counts.iter().filter(|&&n| n <= LINKED_IMPORT_MAX) {
        progress(format!(
            "scale: linking {} files to import",
            thousands(files)
        ));
        let src = work.join("import-links");
        for i in 0..files {
            let dir = src.join("train/files").join(format!("d{:05}", i / 1000));
            if i % 1000 == 0 {
                fs::create_dir_all(&dir)?;
            }
            let target = targets.join(format!("t{:04}", i * 7919 % LINKED_TARGETS));
            fs::hard_link(target, dir.join(format!("f{i:09}.bin")))?;
        }
        let (secs, peak_kib) = timed_import(bin, work, "packfs import of the links", &src)?;
        rows.push(LinkedImport {
            files,
            secs,
            peak_kib,
        });
    }
    fs::remove_dir_all(&targets)?;
    Ok(rows)
}

/// `packfs import` of `src` into a new dataset under `work`, under
/// `/usr/bin/time` ([`timed_peak`]); then deletes both.
fn timed_import(bin: &Path, work: &Path, what: &str, src: &Path) -> Result<(f64, u64)> {
    let dataset = work.join("dataset-import");
    let args = [
        bin.as_os_str(),
        "import".as_ref(),
        "--no-progress".as_ref(),
        src.as_os_str(),
        dataset.as_os_str(),
    ];
    let timed = timed_peak(work, what, &args)?;
    fs::remove_dir_all(&dataset)?;
    fs::remove_dir_all(src)?;
    Ok(timed)
}

/// Runs `args` under `/usr/bin/time`: its seconds and peak RSS in KiB.
fn timed_peak(work: &Path, what: &str, args: &[&OsStr]) -> Result<(f64, u64)> {
    let report = work.join("time-report");
    let start = Instant::now();
    let status = Command::new("/usr/bin/time")
        .arg("-f")
        .arg("%M")
        .arg("-o")
        .arg(&report)
        .args(args)
        .stdout(Stdio::null())
        .status()?;
    let secs = start.elapsed().as_secs_f64();
    if !status.success() {
        return Err(format!("{what} failed ({status})").into());
    }
    let kib = fs::read_to_string(&report)?
        .lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .ok_or("no peak RSS from /usr/bin/time")?;
    progress(format!("scale: {what} {secs:.2} s, peak RSS {}", mib(kib)));
    Ok((secs, kib))
}

/// Builds `branches` branches of the dataset at `dataset` (`n` items),
/// each adding `items` items, then times `packfs merge --into main` of
/// them all, checking the merged Track holds every item.
fn merges(
    bench: &Bench,
    dataset: &Path,
    n: usize,
    branches: usize,
    items: usize,
) -> Result<MergeRow> {
    progress(format!(
        "scale: {} items: {branches} branches of {} new items each",
        thousands(n),
        thousands(items)
    ));
    for b in 0..branches {
        bench.runtime.block_on(build_branch(dataset, b, items))?;
    }
    let count = |dataset: &Path| -> Result<Option<u64>> {
        let out = Command::new(&bench.bin)
            .args(["info".as_ref(), dataset.as_os_str(), "--json".as_ref()])
            .output()?;
        let info: serde_json::Value = serde_json::from_slice(&out.stdout)?;
        Ok(info["totals"]["items"].as_u64())
    };
    let want = count(dataset)?.map(|n| n + (branches * items) as u64);
    let before = index_objects(dataset)?;
    let names: Vec<String> = (0..branches).map(|b| format!("b{b}")).collect();
    let mut args: Vec<&OsStr> = vec![
        bench.bin.as_os_str(),
        "merge".as_ref(),
        dataset.as_os_str(),
        "--into".as_ref(),
        "main".as_ref(),
    ];
    args.extend(names.iter().map(OsStr::new));
    let (secs, peak_kib) = timed_peak(bench.work(), "packfs merge", &args)?;
    let index_bytes = index_objects(dataset)?
        .into_iter()
        .filter(|(name, _)| !before.contains_key(name))
        .map(|(_, len)| len)
        .sum();
    let merged = count(dataset)?;
    if merged.is_none() || merged != want {
        return Err(format!("the merge holds {merged:?} items, not {want:?}").into());
    }
    progress(format!(
        "scale: merge {secs:.2} s, peak RSS {}, {} of index written",
        mib(peak_kib),
        bytes(index_bytes)
    ));
    Ok(MergeRow {
        branches,
        items,
        secs,
        peak_kib,
        index_bytes,
    })
}

pub(crate) fn print(b: &ScaleBench) {
    let title = "Scale: millions of items in one mount, import of many files";
    let blank = || "—".to_string();
    // A figure with no target and no reference.
    let untargeted = |what: String, value: String| row(what, value, blank(), blank(), "—", blank());
    let mut rows = Vec::new();
    let largest = b.rows.iter().map(|r| r.items).max().unwrap_or(0);
    for r in &b.rows {
        let n = thousands(r.items);
        // The targets of whole-Track mounts at 10M items; those of paged
        // mounts at every count, and the `find` rate at the largest.
        let at_10m = r.items == 10_000_000;
        let at_largest = r.items == largest;
        let find_rate = r.items as f64 / r.find.as_secs_f64();
        let per_item = r.find_hwm_kib as f64 * 1024.0 / r.items as f64;
        rows.push(row(
            format!("{n} items: mount ready ({} rounds)", r.rounds),
            secs(r.mount),
            blank(),
            blank(),
            "≤ 1 s",
            met(Some(r.mount.as_secs_f64()), Bar::AtMost(1.0)),
        ));
        rows.push(row(
            format!("{n} items: daemon VmHWM once mounted"),
            format!(
                "{} ({:.0} B/item)",
                mib(r.mount_hwm_kib),
                r.mount_hwm_kib as f64 * 1024.0 / r.items as f64
            ),
            blank(),
            blank(),
            "≤ 64 MiB",
            met(Some(r.mount_hwm_kib as f64), Bar::AtMost(64.0 * 1024.0)),
        ));
        let (find_target, find_met) = match (at_10m, at_largest) {
            (true, _) => ("≤ 60 s", met(Some(r.find.as_secs_f64()), Bar::AtMost(60.0))),
            // The whole-Track mount's rate at 10M.
            (false, true) => (
                "≥ 2.05M items/s",
                met(Some(find_rate), Bar::AtLeast(FIND_RATE)),
            ),
            (false, false) => ("—", blank()),
        };
        rows.push(row(
            format!("{n} items: `find MNT | wc -l` (checked)"),
            format!("{} ({:.2}M items/s)", secs(r.find), find_rate / 1e6),
            blank(),
            blank(),
            find_target,
            find_met,
        ));
        rows.push(row(
            format!("{n} items: daemon VmHWM after find"),
            format!("{} ({per_item:.0} B/item)", mib(r.find_hwm_kib)),
            blank(),
            blank(),
            if at_10m { "≤ 1.5 GiB" } else { "—" },
            match at_10m {
                true => met(
                    Some(r.find_hwm_kib as f64),
                    Bar::AtMost(1.5 * 1024.0 * 1024.0),
                ),
                false => blank(),
            },
        ));
        let c = &r.cold;
        rows.push(row(
            format!(
                "{n} items: `ls -l` of a cold directory of {} entries",
                thousands(c.entries)
            ),
            secs(c.ls),
            blank(),
            blank(),
            "≤ 0.5 s",
            met(Some(c.ls.as_secs_f64()), Bar::AtMost(0.5)),
        ));
        rows.push(row(
            format!(
                "{n} items: `stat` of {RANDOM_STATS} random paths on a fresh mount (VmHWM after)"
            ),
            format!("{} ({})", secs(c.stats), mib(c.stats_hwm_kib)),
            blank(),
            blank(),
            "≤ 256 MiB",
            met(Some(c.stats_hwm_kib as f64), Bar::AtMost(256.0 * 1024.0)),
        ));
        let v = &r.views;
        rows.push(row(
            format!("{n} items: mount ready with three views"),
            secs(v.mount),
            format!("without: {}", secs(r.mount)),
            blank(),
            "the same",
            blank(),
        ));
        rows.push(untargeted(
            format!(
                "{n} items: `ls -l` of a view's timeline (plans it): sample order, {} shards",
                v.key_shards
            ),
            secs(v.key_ls),
        ));
        rows.push(untargeted(
            format!(
                "{n} items: the same, shuffled, {} shards of {} samples",
                v.shuffled_shards,
                thousands(SHUFFLED_SHARD_SAMPLES)
            ),
            secs(v.shuffled_ls),
        ));
        rows.push(untargeted(
            format!(
                "{n} items: `ls -l` of a per-sample view's directory of {} samples (plans it)",
                thousands(v.sample_dirs)
            ),
            secs(v.samples_ls),
        ));
        rows.push(row(
            format!("{n} items: daemon VmHWM once the three views are planned"),
            mib(v.plan_hwm_kib),
            blank(),
            blank(),
            "≤ 256 MiB",
            met(Some(v.plan_hwm_kib as f64), Bar::AtMost(256.0 * 1024.0)),
        ));
        rows.push(untargeted(
            format!("{n} items: read of the first shuffled shard (VmHWM after; block cache {VIEW_CACHE})"),
            format!(
                "{}, {} ({})",
                bytes(v.shard_bytes),
                secs(v.shard_read),
                mib(v.hwm_kib)
            ),
        ));
        if let Some(c) = &r.commits {
            rows.push(row(
                format!(
                    "{n} items: `fsync` of one new file in a read-write mount (median of {})",
                    c.commits
                ),
                secs(c.fsync),
                blank(),
                blank(),
                "≤ 0.3 s",
                met(Some(c.fsync.as_secs_f64()), Bar::AtMost(0.3)),
            ));
            rows.push(row(
                format!("{n} items: index bytes one such commit writes (median)"),
                bytes(c.index_bytes),
                blank(),
                blank(),
                "≤ 1 MiB",
                met(Some(c.index_bytes as f64), Bar::AtMost((1 << 20) as f64)),
            ));
            rows.push(row(
                format!(
                    "{n} items: store growth after {} one-file commits",
                    c.commits
                ),
                bytes(c.growth),
                blank(),
                blank(),
                "≤ 1 MiB a commit",
                met(
                    Some(c.growth as f64 / c.commits as f64),
                    Bar::AtMost((1 << 20) as f64),
                ),
            ));
            rows.push(row(
                format!("{n} items: `packfs diff` of two revisions one file apart"),
                secs(c.diff),
                blank(),
                blank(),
                "≤ 1 s",
                met(Some(c.diff.as_secs_f64()), Bar::AtMost(1.0)),
            ));
        }
        if let Some(m) = &r.merge {
            let added = m.branches * m.items;
            rows.push(row(
                format!(
                    "{n} items: `packfs merge` of {} branches adding {} items each (peak RSS, index written)",
                    m.branches,
                    thousands(m.items)
                ),
                format!(
                    "{:.2} s, {:.2} µs per added item ({}, {})",
                    m.secs,
                    m.secs * 1e6 / added as f64,
                    mib(m.peak_kib),
                    bytes(m.index_bytes)
                ),
                blank(),
                blank(),
                "with what was added, not with N",
                blank(),
            ));
        }
        let (gc_secs, gc_kib) = r.gc;
        rows.push(untargeted(
            format!(
                "{n} items: `packfs gc --dry-run` of the history ({} Manifests; peak RSS)",
                r.commits.as_ref().map_or(1, |c| c.commits + 1)
                    + r.merge.as_ref().map_or(0, |m| m.branches + 1)
            ),
            format!("{gc_secs:.2} s ({})", mib(gc_kib)),
        ));
        if let Some((ls, hwm)) = r.ls {
            rows.push(row(
                format!("{n} items: `ls -lR MNT` (fresh mount; VmHWM after)"),
                format!("{} ({})", secs(ls), mib(hwm)),
                blank(),
                blank(),
                "≤ 10 s",
                met(Some(ls.as_secs_f64()), Bar::AtMost(10.0)),
            ));
        }
    }
    let Some(i) = &b.import else {
        return print_table(title, &rows);
    };
    let ratio = i.tar_secs / i.import_secs;
    rows.push(row(
        format!(
            "`packfs import` of {} files of {IMPORT_MIN}–{IMPORT_MAX} B (peak RSS)",
            thousands(i.files)
        ),
        format!(
            "{:.1} s, {:.0} items/s ({})",
            i.import_secs,
            i.files as f64 / i.import_secs,
            mib(i.import_kib)
        ),
        format!(
            "`tar -cf` {:.1} s, {:.0} items/s ({})",
            i.tar_secs,
            i.files as f64 / i.tar_secs,
            mib(i.tar_kib)
        ),
        show_ratio(Some(ratio), "tar"),
        "≥ 1.0×",
        met(Some(ratio), Bar::AtLeast(1.0)),
    ));
    let smallest = b.linked.first().map(|l| l.peak_kib as f64);
    let peak_target = format!("≤ {} at any count", mib(IMPORT_PEAK_KIB));
    for l in &b.linked {
        rows.push(row(
            format!(
                "`packfs import` of {} hard links to {} files (peak RSS)",
                thousands(l.files),
                thousands(LINKED_TARGETS)
            ),
            format!(
                "{:.1} s, {:.0} items/s ({})",
                l.secs,
                l.files as f64 / l.secs,
                mib(l.peak_kib)
            ),
            blank(),
            smallest.map_or_else(blank, |s| {
                format!("{:.2}× the peak at the smallest", l.peak_kib as f64 / s)
            }),
            &peak_target,
            met(Some(l.peak_kib as f64), Bar::AtMost(IMPORT_PEAK_KIB as f64)),
        ));
    }
    print_table(title, &rows);
    println!(
        "Peak memory of the import per file: {:.0} B.",
        i.import_kib as f64 * 1024.0 / i.files as f64
    );
}
