//! Prefetch against latency: the warm scenario's 1-reader scan of the
//! small items, mounted in this process over the dataset copied into a
//! store that waits 20 ms before every GET, with prefetch on (all files)
//! and off (only the first `config.off_files` are timed: each costs a
//! round trip), in rounds of their own. Set against each other and
//! against the warm 1-reader scan on the local store.

use object_store::path::Path as ObjectPath;
use packfs_core::cache::CacheOptions;
use packfs_core::dataset::Dataset;
use packfs_core::store::Store;
use packfs_fs::mount::{self, MountOptions};

use crate::cli::Config;
use crate::data::{delayed_store, ReadTree, GET_LATENCY};
use crate::readers::{scan, Scan};
use crate::table::{met, plain_row, rate, ratio, row, show_ratio, show_scan, thousands, Bar, Row};
use crate::{median_by, progress, Bench, Result};

/// The 1-reader scans through the delayed store (medians).
pub(crate) struct Delayed {
    on: Scan,
    off: Scan,
}

pub(crate) fn measure(bench: &Bench, tree: &ReadTree) -> Result<Delayed> {
    let (config, files) = (&bench.config, &tree.files);
    let mnt = bench.mountpoint("mnt-latency")?;
    let delayed = delayed_store(&bench.runtime, &tree.dataset)?;
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
        let options = MountOptions::default()
            .cache(CacheOptions::default().prefetch(prefetch))
            .read_only(true);
        let handle = mount::spawn(Dataset::from_store(store), &mnt, &options)?;
        let result = scan(&mnt, files, 1, limit)?;
        handle.unmount()?;
        Ok(result)
    };
    let (mut on, mut off) = (Vec::new(), Vec::new());
    for _ in 0..config.runs {
        on.push(run(true, None)?);
        off.push(run(false, Some(config.off_files))?);
    }
    Ok(Delayed {
        on: *median_by(&on, Scan::files_per_sec),
        off: *median_by(&off, Scan::files_per_sec),
    })
}

/// The rows, `no_latency` being the warm `--read-only` 1-reader scan.
pub(crate) fn rows(config: &Config, delayed: &Delayed, no_latency: &Scan) -> Vec<Row> {
    let store = format!("{} ms per GET", GET_LATENCY.as_millis());
    let on = delayed.on.files_per_sec();
    let speedup = ratio(on, Some(delayed.off.files_per_sec()));
    let vs_fast = ratio(on, Some(no_latency.files_per_sec()));
    vec![
        plain_row(
            format!(
                "scan, {store}, prefetch off, 1 reader (only the first {} files timed)",
                thousands(config.off_files)
            ),
            show_scan(&delayed.off),
        ),
        row(
            format!(
                "scan, {store}, prefetch on, 1 reader (all {} files)",
                thousands(config.small_files)
            ),
            show_scan(&delayed.on),
            format!("prefetch off {} files/s", rate(delayed.off.files_per_sec())),
            show_ratio(speedup, "prefetch off"),
            "≥ 20× prefetch off",
            met(speedup, Bar::AtLeast(20.0)),
        ),
        row(
            format!("scan, {store}, prefetch on, vs the no-latency 1-reader scan"),
            format!("{} files/s", rate(on)),
            format!(
                "no latency (1 reader, local store) {} files/s",
                rate(no_latency.files_per_sec())
            ),
            show_ratio(vs_fast, "no latency"),
            "≥ 0.5× no latency",
            met(vs_fast, Bar::AtLeast(0.5)),
        ),
    ]
}
