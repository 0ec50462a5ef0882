//! Later epochs: a training loader reads the same files again after a
//! remount. On a default and on a `--read-only` mount, each with a new
//! `--cache-dir`: the read tree's big item read whole, the mount unmounted
//! and mounted again on the same cache directory (nothing else dropped),
//! and the item read again. The re-read is set against the same file on
//! the plain disk with a warm page cache. The remount's `/.packfs/stats`
//! counters that mention passthrough (which serves such re-reads from a
//! whole-file copy) are printed, whichever exist.

use std::fs;

use crate::cli::Config;
use crate::data::{path_str, ReadTree};
use crate::mounts::{Daemon, Mounted};
use crate::readers::sequential;
use crate::table::{mb, met, print_table, ratio, row, show_ratio, Bar, Row};
use crate::{median_by, progress, Bench, Result};

/// One kind of mount: the first read and the re-read after the remount.
struct Epoch {
    label: &'static str,
    first_mb: f64,
    reread_mb: f64,
    /// `/.packfs/stats` of the remount after the re-read (last round).
    stats: Option<String>,
}

/// Medians of every kind of mount.
pub(crate) struct Epochs {
    /// The big item on the plain disk, page cache warm.
    plain_mb: f64,
    mounts: Vec<Epoch>,
}

pub(crate) fn measure(bench: &Bench, tree: &ReadTree) -> Result<Epochs> {
    let (config, bin, files) = (&bench.config, bench.bin.as_path(), &tree.files);
    let mnt = bench.mountpoint("mnt-epochs")?;
    let kinds: [(&'static str, &[&str]); 2] =
        [("default mount", &[]), ("--read-only", &["--read-only"])];
    let mut plain = Vec::new();
    let mut rounds: Vec<Vec<Epoch>> = kinds.iter().map(|_| Vec::new()).collect();
    for round in 1..=config.runs {
        progress(format!(
            "later epochs (round {round} of {}): the big item on the plain disk, warm",
            config.runs
        ));
        sequential(&tree.src, files)?;
        plain.push(sequential(&tree.src, files)?);
        for ((label, flags), epochs) in kinds.iter().zip(&mut rounds) {
            progress(format!(
                "later epochs (round {round} of {}): {label} with --cache-dir: read, remount, re-read",
                config.runs
            ));
            let cache = bench
                .work()
                .join(format!("epoch-cache-{round}-{}", epochs.len()));
            let mut args = flags.to_vec();
            args.extend(["--cache-dir", path_str(&cache)?]);
            let daemon = Daemon::mount_with(bin, &tree.dataset, &mnt, &args)?;
            let first_mb = sequential(&mnt, files)?;
            daemon.unmount_and_wait()?;
            let daemon = Daemon::mount_with(bin, &tree.dataset, &mnt, &args)?;
            let reread_mb = sequential(&mnt, files)?;
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

fn rows(config: &Config, epochs: &Epochs) -> Vec<Row> {
    epochs
        .mounts
        .iter()
        .map(|e| {
            let vs_plain = ratio(e.reread_mb, Some(epochs.plain_mb));
            row(
                format!(
                    "{} MiB item re-read after a remount on the same --cache-dir: {}",
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

pub(crate) fn print(config: &Config, epochs: &Epochs) {
    print_table(
        "Later epochs: re-reads after a remount on the same --cache-dir",
        &rows(config, epochs),
    );
    println!(
        "The mount's page cache is new after the remount; nothing else is dropped; medians of \
         {} round(s), a new --cache-dir each round.",
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
                "{}: no counter named *passthrough* in /.packfs/stats of the remount.",
                e.label
            ),
            false => println!(
                "{}: passthrough counters of the remount after the re-read: {}.",
                e.label,
                found.join(", ")
            ),
        }
    }
    if let Some(last) = epochs.mounts.last() {
        if let Some(stats) = &last.stats {
            println!(
                "\n`/.packfs/stats` of the last remount ({}) after the re-read:\n\n```\n{stats}```",
                last.label
            );
        }
    }
}
