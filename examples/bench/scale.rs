//! Scale: mounts of 1M, 3M and 10M tiny items (`--quick`: 100k, 300k,
//! 1M; `--scale-items` chooses) — mount ready, `find | wc -l`, the
//! daemon's VmHWM, and `ls -lR` at the first count — and `packfs import`
//! of as many small files as the first count (left out with `--no-import`)
//! against `tar -cf` of the same tree on the same disk, with the peak RSS
//! of each.
//!
//! Mounts of the first count run `--runs` rounds (medians shown); the
//! others and the import run once (each takes minutes).

use std::ffi::OsStr;
use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::data::{build_many, tiny_paths, write_random_file, Rng};
use crate::mounts::Daemon;
use crate::readers::{time_ls_lr, timed_find};
use crate::table::{met, mib, print_table, row, secs, show_ratio, thousands, Bar};
use crate::{progress, Bench, Result};

/// Items per directory level of the import tree.
const IMPORT_DIRS: usize = 1000;
/// Sizes of the import tree's files.
const IMPORT_MIN: u64 = 100;
const IMPORT_MAX: u64 = 1000;

/// One item count's figures (medians over its rounds).
struct ScaleRow {
    items: usize,
    rounds: usize,
    mount: Duration,
    find: Duration,
    /// VmHWM of the daemon after `find` (KiB).
    find_hwm_kib: u64,
    /// `ls -lR` on a fresh mount and VmHWM after it; smallest count only.
    ls: Option<(Duration, u64)>,
}

/// One round: mount time, find time, VmHWM after find, and `ls -lR` with
/// the VmHWM after it.
type Pass = (Duration, Duration, u64, Option<(Duration, u64)>);

/// `packfs import` against `tar -cf` of the same tree.
struct ImportRow {
    files: usize,
    import_secs: f64,
    import_kib: u64,
    tar_secs: f64,
    tar_kib: u64,
}

/// What [`measure`] measured: a row per item count, and the import.
pub(crate) struct ScaleBench {
    rows: Vec<ScaleRow>,
    import: Option<ImportRow>,
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
            let find = timed_find(&mnt, tiny_paths(n))?;
            let (_, hwm) = daemon.memory_kib()?;
            let mount = daemon.mount_time;
            drop(daemon);
            progress(format!(
                "scale: mount {:.2} s, find {:.2} s, VmHWM {}",
                mount.as_secs_f64(),
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
            passes.push((mount, find, hwm, ls));
        }
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
            find_hwm_kib: median(&|p| p.2 as f64) as u64,
            ls: passes[0].3.map(|_| {
                (
                    Duration::from_secs_f64(median(&|p| p.3.map_or(0.0, |l| l.0.as_secs_f64()))),
                    median(&|p| p.3.map_or(0.0, |l| l.1 as f64)) as u64,
                )
            }),
        });
        fs::remove_dir_all(&dataset)?;
    }
    let import = match config.no_import {
        true => None,
        false => Some(import_vs_tar(bin, work, counts[0])?),
    };
    Ok(ScaleBench { rows, import })
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
    let timed = |what: &str, args: &[&OsStr]| -> Result<(f64, u64)> {
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
    };
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
    let dataset = work.join("dataset-import");
    let (import_secs, import_kib) = timed(
        "packfs import",
        &[
            bin.as_os_str(),
            "import".as_ref(),
            "--no-progress".as_ref(),
            src.as_os_str(),
            dataset.as_os_str(),
        ],
    )?;
    fs::remove_dir_all(&dataset)?;
    fs::remove_dir_all(&src)?;
    Ok(ImportRow {
        files,
        import_secs,
        import_kib,
        tar_secs,
        tar_kib,
    })
}

pub(crate) fn print(b: &ScaleBench) {
    let title = "Scale: millions of items in one mount, import of many files";
    let blank = || "—".to_string();
    let mut rows = Vec::new();
    let largest = b.rows.iter().map(|r| r.items).max().unwrap_or(0);
    for r in &b.rows {
        let n = thousands(r.items);
        let at_target = r.items == largest;
        let per_item = r.find_hwm_kib as f64 * 1024.0 / r.items as f64;
        rows.push(row(
            format!("{n} items: mount ready ({} rounds)", r.rounds),
            secs(r.mount),
            blank(),
            blank(),
            if at_target { "≤ 10 s" } else { "—" },
            match at_target {
                true => met(Some(r.mount.as_secs_f64()), Bar::AtMost(10.0)),
                false => blank(),
            },
        ));
        rows.push(row(
            format!("{n} items: `find MNT | wc -l` (checked)"),
            secs(r.find),
            blank(),
            blank(),
            if at_target { "≤ 60 s" } else { "—" },
            match at_target {
                true => met(Some(r.find.as_secs_f64()), Bar::AtMost(60.0)),
                false => blank(),
            },
        ));
        rows.push(row(
            format!("{n} items: daemon VmHWM after find"),
            format!("{} ({per_item:.0} B/item)", mib(r.find_hwm_kib)),
            blank(),
            blank(),
            if at_target { "≤ 1.5 GiB" } else { "—" },
            match at_target {
                true => met(
                    Some(r.find_hwm_kib as f64),
                    Bar::AtMost(1.5 * 1024.0 * 1024.0),
                ),
                false => blank(),
            },
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
    print_table(title, &rows);
    println!(
        "Peak memory of the import per file: {:.0} B.",
        i.import_kib as f64 * 1024.0 / i.files as f64
    );
}
