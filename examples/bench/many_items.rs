//! Many items: a dataset of 1,000,000 tiny items (100,000 with `--quick`;
//! left out with `--skip-1m`) built directly with the library, one Track
//! over 1,000 directories, mounted `--read-only`: the time until `packfs
//! mount` returns, `find MNT | wc -l` (its line count checked), `ls -lR`
//! on a fresh mount, and the daemon's memory after it. One run each,
//! against fixed targets. The bundles scenario sets its 1M-file bundle
//! against these figures.

use std::time::Duration;

use crate::cli::Config;
use crate::data::{build_many, tiny_paths};
use crate::mounts::Daemon;
use crate::readers::{time_ls_lr, timed_find};
use crate::table::{met, mib, plain_row, print_table, row, secs, thousands, Bar, Row};
use crate::{progress, Bench, Result};

/// The many-item dataset: mount, `find`, `ls -lR` and daemon memory.
pub(crate) struct ManyItems {
    items: usize,
    pub mount_time: Duration,
    pub find_time: Duration,
    find_lines: usize,
    ls_time: Duration,
    rss_kib: u64,
    hwm_kib: u64,
}

pub(crate) fn measure(bench: &Bench) -> Result<ManyItems> {
    let (bin, items) = (bench.bin.as_path(), bench.config.tiny_items);
    let dataset_dir = bench.work().join("dataset-many");
    let mnt = bench.mountpoint("mnt-many")?;
    progress(format!(
        "building a dataset of {} tiny items",
        thousands(items)
    ));
    bench.runtime.block_on(build_many(&dataset_dir, items))?;
    progress("mounting it and running find");
    let daemon = Daemon::mount(bin, &dataset_dir, &mnt)?;
    let find_lines = tiny_paths(items);
    let find_time = timed_find(&mnt, find_lines)?;
    let mount_time = daemon.mount_time;
    drop(daemon);
    progress("fresh mount, running ls -lR");
    let daemon = Daemon::mount(bin, &dataset_dir, &mnt)?;
    let ls_time = time_ls_lr(&mnt)?;
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

fn rows(config: &Config, many: Option<&ManyItems>) -> Vec<Row> {
    let Some(m) = many else {
        return vec![plain_row(
            format!(
                "{} items: mount, find, ls -lR, RSS",
                thousands(config.tiny_items)
            ),
            "skipped (--skip-1m)".into(),
        )];
    };
    let n = thousands(m.items);
    let blank = || "—".to_string();
    vec![
        row(
            format!("{n} items: mount ready (`packfs mount` returns)"),
            secs(m.mount_time),
            blank(),
            blank(),
            "≤ 3 s",
            met(Some(m.mount_time.as_secs_f64()), Bar::AtMost(3.0)),
        ),
        row(
            format!(
                "{n} items: `find MNT | wc -l` ({} lines, checked)",
                thousands(m.find_lines)
            ),
            secs(m.find_time),
            blank(),
            blank(),
            "≤ 10 s",
            met(Some(m.find_time.as_secs_f64()), Bar::AtMost(10.0)),
        ),
        plain_row(
            format!("{n} items: `ls -lR MNT > /dev/null` (fresh mount)"),
            secs(m.ls_time),
        ),
        row(
            format!("{n} items: daemon VmRSS / VmHWM after ls -lR"),
            format!("{} / {}", mib(m.rss_kib), mib(m.hwm_kib)),
            blank(),
            blank(),
            "≤ 400 MiB (VmHWM)",
            met(Some(m.hwm_kib as f64), Bar::AtMost(400.0 * 1024.0)),
        ),
    ]
}

/// The table; `None` when `--skip-1m` left the dataset out.
pub(crate) fn print(config: &Config, many: Option<&ManyItems>) {
    print_table("Many items in one mount", &rows(config, many));
    println!("One run each; the dataset is built with the library, not imported.");
}
