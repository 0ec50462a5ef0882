//! Bundles: a DataBundle (`packfs bundle create`, zstd) against a packfs
//! dataset of the same compressible tree, in the same run: how long each
//! takes to write and how big it is, first-pass scans of the small files,
//! random 4 KiB reads in the big file, and mount time and `find` of 1M
//! tiny files bundled, against the many-items dataset.

use std::collections::HashMap;
use std::ffi::OsString;
use std::fs::{self, File};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::cli::Config;
use crate::data::{Files, Rng, BIG_ITEM, SMALL_DIR, SMALL_MAX, SMALL_MIN, TINY_DIRS};
use crate::many_items::ManyItems;
use crate::mounts::{Daemon, Mounted};
use crate::readers::{
    random_preads, scan, timed_find, Preads, Scan, PREADS, READ_SIZE, SCAN_READERS,
};
use crate::table::{
    gb, plain_row, print_table, readers_label, row, secs, show_preads, show_ratio, show_scan,
    thousands,
};
use crate::{median_by, progress, Bench, Result};

/// Figures of one side (dataset or bundle).
#[derive(Default)]
struct Side {
    write_secs: f64,
    stored_bytes: u64,
    scans1: Vec<Scan>,
    scans8: Vec<Scan>,
    preads: Vec<Preads>,
}

/// What [`measure`] measured.
pub(crate) struct BundleBench {
    source_bytes: u64,
    dataset: Side,
    bundle: Side,
    many: Option<ManyBundle>,
}

/// The 1M tiny files as a bundle.
struct ManyBundle {
    files: usize,
    create_secs: f64,
    mount_time: Duration,
    find_time: Duration,
}

/// Writes a compressible tree shaped like the read tree (so the same
/// scans and reads run on it), imports it and bundles it, then measures
/// both mounts in `config.runs` rounds, each on fresh mounts.
pub(crate) fn measure(bench: &Bench) -> Result<BundleBench> {
    let (config, bin, work) = (&bench.config, bench.bin.as_path(), bench.work());
    let src = work.join("bundle-src");
    let files = compressible_tree(&src, config)?;
    let source_bytes = files.big_len + files.small.values().sum::<u64>();
    let (dataset_dir, bundle_dir) = (work.join("bundle-dataset"), work.join("bundle"));
    let mut dataset = Side::default();
    let mut bundle = Side::default();
    progress("bundles: packfs import of the compressible tree");
    dataset.write_secs = timed_packfs(bin, &["import", "--no-progress"], &src, &dataset_dir)?;
    dataset.stored_bytes = tree_bytes(&dataset_dir)?;
    progress("bundles: packfs bundle create (zstd) of the same tree");
    bundle.write_secs = timed_packfs(
        bin,
        &["bundle", "create", "--no-progress"],
        &src,
        &bundle_dir,
    )?;
    bundle.stored_bytes = tree_bytes(&bundle_dir)?;
    let (ds_mnt, b_mnt) = (
        bench.mountpoint("mnt-b-dataset")?,
        bench.mountpoint("mnt-bundle")?,
    );
    for round in 1..=config.runs {
        progress(format!(
            "bundles (round {round} of {}): scans and preads",
            config.runs
        ));
        for (side, location, mnt) in [
            (&mut dataset, &dataset_dir, &ds_mnt),
            (&mut bundle, &bundle_dir, &b_mnt),
        ] {
            let fresh = || Daemon::mount(bin, location, mnt);
            let daemon = fresh()?;
            side.scans1.push(scan(daemon.root(), &files, 1, None)?);
            drop(daemon);
            let daemon = fresh()?;
            side.scans8
                .push(scan(daemon.root(), &files, SCAN_READERS, None)?);
            drop(daemon);
            let daemon = fresh()?;
            side.preads.push(random_preads(daemon.root(), &files)?);
        }
    }
    let many = match config.skip_1m {
        true => None,
        false => Some(many_bundle(
            bin,
            work,
            &bench.mountpoint("mnt-many-bundle")?,
            config.tiny_items,
        )?),
    };
    Ok(BundleBench {
        source_bytes,
        dataset,
        bundle,
        many,
    })
}

/// Bytes that compress about 2:1 with zstd, like much real data: each
/// 64-byte span is random or a repeat of the span before.
fn fill_compressible(rng: &mut Rng, buf: &mut [u8]) {
    rng.fill(buf);
    for i in (64..buf.len()).step_by(64) {
        if rng.next() % 2 == 0 {
            let end = (i + 64).min(buf.len());
            buf.copy_within(i - 64..end - 64, i);
        }
    }
}

fn compressible_tree(root: &Path, config: &Config) -> Result<Files> {
    progress(format!(
        "bundles: writing {} compressible small items and a {} MiB one under {}",
        thousands(config.small_files),
        config.cold_big_bytes >> 20,
        root.display()
    ));
    let mut rng = Rng(0xD1B5_4A32_D192_ED03);
    let dir = root.join(SMALL_DIR);
    fs::create_dir_all(&dir)?;
    let mut small = HashMap::new();
    let mut buf = vec![0u8; SMALL_MAX as usize];
    for i in 0..config.small_files {
        let len = SMALL_MIN + rng.next() % (SMALL_MAX - SMALL_MIN + 1);
        let name = OsString::from(format!("item-{i:05}.bin"));
        fill_compressible(&mut rng, &mut buf[..len as usize]);
        fs::write(dir.join(&name), &buf[..len as usize])?;
        small.insert(name, len);
    }
    let big = root.join(BIG_ITEM);
    fs::create_dir_all(big.parent().expect("has a parent"))?;
    let mut file = File::create(&big)?;
    let mut buf = vec![0u8; READ_SIZE];
    for _ in 0..config.cold_big_bytes / READ_SIZE as u64 {
        fill_compressible(&mut rng, &mut buf);
        std::io::Write::write_all(&mut file, &buf)?;
    }
    Ok(Files {
        big_len: config.cold_big_bytes,
        small,
    })
}

/// Runs `packfs ARGS SRC DEST` and returns its wall time in seconds.
fn timed_packfs(bin: &Path, args: &[&str], src: &Path, dest: &Path) -> Result<f64> {
    let start = Instant::now();
    let out = Command::new(bin).args(args).arg(src).arg(dest).output()?;
    if !out.status.success() {
        return Err(format!(
            "packfs {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )
        .into());
    }
    Ok(start.elapsed().as_secs_f64())
}

/// Bytes of every file under `dir` (what the store holds).
fn tree_bytes(dir: &Path) -> Result<u64> {
    let mut total = 0;
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let meta = entry.metadata()?;
        total += match meta.is_dir() {
            true => tree_bytes(&entry.path())?,
            false => meta.len(),
        };
    }
    Ok(total)
}

/// `items` tiny files (as in the many-items dataset, in
/// `TINY_DIRS` directories) bundled, mounted, and listed with `find`.
fn many_bundle(bin: &Path, work: &Path, mnt: &Path, items: usize) -> Result<ManyBundle> {
    progress(format!("bundles: writing {} tiny files", thousands(items)));
    let src = work.join("many-bundle-src");
    for d in 0..TINY_DIRS.min(items) {
        fs::create_dir_all(src.join(format!("d{d:04}")))?;
    }
    for i in 0..items {
        let bytes = format!("tiny item {i}\n").repeat(1 + i % 4);
        let path = src.join(format!("d{:04}/item-{i:06}.jpg", i % TINY_DIRS));
        fs::write(path, bytes)?;
    }
    progress("bundles: bundling them");
    let bundle = work.join("many-bundle");
    let create_secs = timed_packfs(bin, &["bundle", "create", "--no-progress"], &src, &bundle)?;
    fs::remove_dir_all(&src)?;
    progress("bundles: mounting the bundle and running find");
    let daemon = Daemon::mount(bin, &bundle, mnt)?;
    // The mountpoint, the directories and the files.
    let find_time = timed_find(mnt, 1 + TINY_DIRS.min(items) + items)?;
    Ok(ManyBundle {
        files: items,
        create_secs,
        mount_time: daemon.mount_time,
        find_time,
    })
}

fn median_scan(scans: &[Scan]) -> Scan {
    *median_by(scans, Scan::files_per_sec)
}

fn median_preads(preads: &[Preads]) -> Preads {
    *median_by(preads, |p| p.per_sec)
}

/// The table; `many` is the many-items dataset the 1M-file bundle is set
/// against.
pub(crate) fn print(config: &Config, b: &BundleBench, many: Option<&ManyItems>) {
    let (d, z) = (&b.dataset, &b.bundle);
    let mut rows = vec![
        row(
            "write the compressible tree: `bundle create` (zstd) vs `import`".into(),
            format!(
                "{:.2} s, {} MB/s",
                z.write_secs,
                mb_s(b.source_bytes, z.write_secs)
            ),
            format!(
                "import {:.2} s, {} MB/s",
                d.write_secs,
                mb_s(b.source_bytes, d.write_secs)
            ),
            show_ratio(Some(d.write_secs / z.write_secs), "import's speed"),
            "—",
            "—".into(),
        ),
        row(
            "bytes stored (source: the tree's file bytes)".into(),
            format!("bundle {}", gb(z.stored_bytes)),
            format!(
                "dataset {} · source {}",
                gb(d.stored_bytes),
                gb(b.source_bytes)
            ),
            format!(
                "{:.2}× dataset · {:.2}× source",
                z.stored_bytes as f64 / d.stored_bytes as f64,
                z.stored_bytes as f64 / b.source_bytes as f64
            ),
            "—",
            "—".into(),
        ),
    ];
    for (readers, zs, ds) in [
        (1, &z.scans1, &d.scans1),
        (SCAN_READERS, &z.scans8, &d.scans8),
    ] {
        let (zs, ds) = (median_scan(zs), median_scan(ds));
        rows.push(row(
            format!(
                "1st pass over {} items of 16–64 KiB, {}",
                thousands(zs.files),
                readers_label(readers)
            ),
            show_scan(&zs),
            format!("dataset {}", show_scan(&ds)),
            show_ratio(Some(zs.files_per_sec() / ds.files_per_sec()), "dataset"),
            "—",
            "—".into(),
        ));
    }
    let (zp, dp) = (median_preads(&z.preads), median_preads(&d.preads));
    rows.push(row(
        format!(
            "{} random 4 KiB preads in the {} MiB item, 1st pass",
            thousands(PREADS),
            config.cold_big_bytes >> 20
        ),
        show_preads(&zp),
        format!("dataset {}", show_preads(&dp)),
        show_ratio(Some(zp.per_sec / dp.per_sec), "dataset"),
        "—",
        "—".into(),
    ));
    if let Some(m) = &b.many {
        let reference = many.map_or("dataset: not measured".into(), |d| {
            format!("dataset {}", secs(d.mount_time))
        });
        rows.push(row(
            format!(
                "{} tiny files: mount ready (`packfs mount` returns)",
                thousands(m.files)
            ),
            secs(m.mount_time),
            reference,
            show_ratio(
                many.map(|d| d.mount_time.as_secs_f64() / m.mount_time.as_secs_f64()),
                "dataset's speed",
            ),
            "—",
            "—".into(),
        ));
        rows.push(row(
            format!("{} tiny files: `find MNT | wc -l`", thousands(m.files)),
            secs(m.find_time),
            many.map_or("dataset: not measured".into(), |d| {
                format!("dataset {}", secs(d.find_time))
            }),
            show_ratio(
                many.map(|d| d.find_time.as_secs_f64() / m.find_time.as_secs_f64()),
                "dataset's speed",
            ),
            "—",
            "—".into(),
        ));
        rows.push(plain_row(
            format!("{} tiny files: `packfs bundle create`", thousands(m.files)),
            format!("{:.1} s", m.create_secs),
        ));
    }
    print_table("Bundles: a DataBundle against a packfs dataset", &rows);
    println!(
        "Both mounts --read-only, each figure on a fresh mount; the tree compresses about 2:1 \
         (each 64-byte span random or a repeat of the one before); bundle: `packfs bundle create` \
         defaults (zstd level 3, 256 KiB records); medians of {} round(s). Ratios above 1 favour \
         the bundle. The 1M-item dataset is the many-items scenario's (built by the bench, not imported).",
        config.runs
    );
}

fn mb_s(bytes: u64, secs: f64) -> String {
    format!("{:.0}", bytes as f64 / secs / 1e6)
}
