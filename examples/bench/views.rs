//! Views: the WebDataset view. A dataset of samples (an `image` of
//! 16–64 KiB and a `caption` of ~100 B each) is read three ways on a
//! fresh mount each time, 1 reader: as files, sample by sample (image,
//! then caption: what a loader over files does); as the view's tar shards
//! in key order; and as shards of a seeded global shuffle. Once from the
//! local directory store, once from a store that waits 20 ms per GET.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

use object_store::path::Path as ObjectPath;
use packfs_core::catalog::view::NamedView;
use packfs_core::dataset::Dataset;
use packfs_core::store::Store;
use packfs_fs::mount::{self, MountOptions};

use crate::cli::Config;
use crate::data::{delayed_store, import_tree, Rng, GET_LATENCY, SMALL_MAX, SMALL_MIN};
use crate::mounts::{counter, Daemon, Mounted};
use crate::readers::{read_checked, Scan, READ_SIZE};
use crate::table::{mb, met, print_table, row, show_ratio, thousands, Bar};
use crate::{median_by, progress, Bench, Result};

/// Samples in the benchmark dataset (`--quick`: a fifth).
const SAMPLES: usize = 5_000;
/// Shard size of the view.
const SHARD_SPEC: &str = "webdataset:bytes=64MiB";
const SHUFFLED_SPEC: &str = "webdataset:bytes=64MiB,shuffle=1";

/// One pass: its scan, and the GETs the mount issued.
#[derive(Clone, Copy)]
struct Pass {
    scan: Scan,
    gets: u64,
}

/// What [`measure`] measured, per store: files, shards, shuffled.
pub(crate) struct ViewsBench {
    local: [Vec<Pass>; 3],
    delayed: [Vec<Pass>; 3],
}

const KINDS: [&str; 3] = ["items as files", "shards", "shuffled shards"];

/// The sample files, by key: (image, caption) sizes.
type Samples = Vec<(String, u64, u64)>;

fn write_samples(src: &Path, count: usize) -> Result<Samples> {
    let mut rng = Rng(0x14);
    let mut out = Vec::with_capacity(count);
    let (images, captions) = (src.join("train/image"), src.join("train/caption"));
    fs::create_dir_all(&images)?;
    fs::create_dir_all(&captions)?;
    for i in 0..count {
        let key = format!("{i:06}");
        let image = SMALL_MIN + rng.next() % (SMALL_MAX - SMALL_MIN);
        let caption = 64 + rng.next() % 96;
        for (dir, ext, len) in [(&images, "jpg", image), (&captions, "txt", caption)] {
            let mut bytes = vec![0; len as usize];
            rng.fill(&mut bytes);
            fs::write(dir.join(format!("{key}.{ext}")), bytes)?;
        }
        out.push((key, image, caption));
    }
    Ok(out)
}

/// Reads every sample's image then caption from the mount at `root`.
fn scan_files(root: &Path, samples: &Samples) -> Result<Scan> {
    let start = Instant::now();
    let mut buf = vec![0u8; READ_SIZE];
    let mut bytes = 0;
    for (key, image, caption) in samples {
        read_checked(
            &root.join(format!("train/image/{key}.jpg")),
            *image,
            &mut buf,
        )?;
        read_checked(
            &root.join(format!("train/caption/{key}.txt")),
            *caption,
            &mut buf,
        )?;
        bytes += image + caption;
    }
    Ok(Scan {
        files: samples.len() * 2,
        bytes,
        secs: start.elapsed().as_secs_f64(),
    })
}

/// Lists `root/train` and reads each shard front to back; the shards'
/// members must add up to `items` bytes.
fn scan_shards(root: &Path, items: u64) -> Result<Scan> {
    let start = Instant::now();
    let dir = root.join("train");
    let mut shards: Vec<PathBuf> = fs::read_dir(&dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<std::io::Result<_>>()?;
    shards.sort();
    let mut buf = vec![0u8; READ_SIZE];
    let mut bytes = 0;
    for shard in &shards {
        let len = fs::metadata(shard)?.len();
        read_checked(shard, len, &mut buf)?;
        bytes += len;
    }
    if bytes < items {
        return Err(format!(
            "shards of {} hold {bytes} bytes, less than the items' {items}",
            dir.display()
        )
        .into());
    }
    Ok(Scan {
        files: shards.len(),
        bytes,
        secs: start.elapsed().as_secs_f64(),
    })
}

/// GETs so far, from the mount's `.packfs/stats`.
fn gets(root: &Path) -> Result<u64> {
    let stats = fs::read_to_string(root.join(".packfs/stats"))?;
    Ok(counter(&stats, "gets").ok_or("no gets in .packfs/stats")?)
}

/// Pass `kind` (an index of [`KINDS`]) over the mount at `root`.
fn pass(kind: usize, root: &Path, samples: &Samples, items: u64) -> Result<Pass> {
    let scan = match kind {
        0 => scan_files(root, samples)?,
        _ => scan_shards(root, items)?,
    };
    Ok(Pass {
        scan,
        gets: gets(root)?,
    })
}

fn view_args(kind: usize) -> Vec<&'static str> {
    match kind {
        0 => vec![],
        1 => vec!["--view", SHARD_SPEC],
        _ => vec!["--view", SHUFFLED_SPEC],
    }
}

/// Writes and imports the samples, then in `config.runs` rounds each pass
/// on a fresh mount of the local store and of a 20 ms-per-GET store.
pub(crate) fn measure(bench: &Bench) -> Result<ViewsBench> {
    let (config, bin, work) = (&bench.config, bench.bin.as_path(), bench.work());
    let count = if config.quick { SAMPLES / 5 } else { SAMPLES };
    progress(format!(
        "views: writing {} samples (image + caption)",
        thousands(count)
    ));
    let src = work.join("views-src");
    let samples = write_samples(&src, count)?;
    let items: u64 = samples.iter().map(|(_, i, c)| i + c).sum();
    let dataset = work.join("views-dataset");
    bench.runtime.block_on(import_tree(&src, &dataset))?;
    let delayed = delayed_store(&bench.runtime, &dataset)?;
    let mnt = bench.mountpoint("mnt-views")?;
    let mut measured = ViewsBench {
        local: Default::default(),
        delayed: Default::default(),
    };
    for round in 1..=config.runs {
        for (kind, name) in KINDS.iter().enumerate() {
            progress(format!(
                "views (round {round} of {}): {name}, local store",
                config.runs
            ));
            let mut args = vec!["--read-only"];
            args.extend(view_args(kind));
            let daemon = Daemon::mount_with(bin, &dataset, &mnt, &args)?;
            measured.local[kind].push(pass(kind, daemon.root(), &samples, items)?);
            drop(daemon);

            progress(format!(
                "views (round {round} of {}): {name}, {GET_LATENCY:?} per GET",
                config.runs
            ));
            let store = Store::from_object_store(
                delayed.clone(),
                ObjectPath::default(),
                "memory://bench-views",
            );
            let views = view_args(kind)
                .get(1)
                .map(|spec| spec.parse::<NamedView>())
                .transpose()?;
            let options = MountOptions::default()
                .read_only(true)
                .views(views.into_iter().collect());
            let handle = mount::spawn(Dataset::from_store(store), &mnt, &options)?;
            let result = pass(kind, &mnt, &samples, items);
            handle.unmount()?;
            measured.delayed[kind].push(result?);
        }
    }
    Ok(measured)
}

pub(crate) fn print(config: &Config, b: &ViewsBench) {
    let mut rows = Vec::new();
    for (store, passes) in [("local store", &b.local), ("20 ms per GET", &b.delayed)] {
        let median = |kind: usize| *median_by(&passes[kind], |p| p.scan.mb_per_sec());
        let (files, shards, shuffled) = (median(0), median(1), median(2));
        let show = |p: &Pass| {
            format!(
                "{} ({} GETs)",
                mb(p.scan.mb_per_sec()),
                thousands(p.gets as usize)
            )
        };
        rows.push(row(
            format!("1st pass, shards in key order, {store}"),
            show(&shards),
            format!("items as files {}", show(&files)),
            show_ratio(
                Some(shards.scan.mb_per_sec() / files.scan.mb_per_sec()),
                "files",
            ),
            "—",
            "—".into(),
        ));
        let ratio = shuffled.scan.mb_per_sec() / shards.scan.mb_per_sec();
        let target = store != "local store";
        rows.push(row(
            format!("1st pass, shuffled shards (shuffle=1), {store}"),
            show(&shuffled),
            format!("shards in key order {}", mb(shards.scan.mb_per_sec())),
            show_ratio(Some(ratio), "key order"),
            if target { "≥ 0.7×" } else { "—" },
            match target {
                true => met(Some(ratio), Bar::AtLeast(0.7)),
                false => "—".into(),
            },
        ));
    }
    print_table("Views: WebDataset shards synthesized from the packs", &rows);
    println!(
        "Medians of {} rounds, 1 reader, each pass on a fresh mount (empty block cache). \
         Files: every sample's `image` (16–64 KiB) then its `caption` (~100 B), by key. \
         Shards: `--view {SHARD_SPEC}` (and `,shuffle=1`), each shard read front to back in \
         1 MiB reads; MB/s counts the shard bytes (tar headers and padding included). The \
         20 ms store is the dataset copied into memory behind a store that waits before every GET.",
        config.runs
    );
}
