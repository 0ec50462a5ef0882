//! The default mount: `packfs mount` without flags is read-write, so every
//! open and close of a file is a round trip to the daemon that a
//! `--read-only` mount skips. Its first passes (the scans with 1 and 8
//! readers, the big item) are measured in the warm scenario's rounds
//! (`warm.rs`) and set here against fuse-ceiling, beside `--read-only`.

use crate::cli::Config;
use crate::readers::{Scan, SCAN_READERS};
use crate::table::{mb, met, print_table, rate, ratio, row, show_ratio, thousands, Bar, Row};
use crate::warm::{Comparison, Figures};

/// A row of the default mount and `--read-only` against fuse-ceiling;
/// `bar` is the default mount's minimum ratio.
fn default_mount_row(
    comparison: &Comparison,
    measurement: String,
    figure: impl Fn(&Figures) -> (f64, String),
    bar: Option<f64>,
) -> Row {
    let ceiling = comparison.ceiling.as_ref().ok().map(&figure);
    let (default, default_shown) = figure(&comparison.packfs_default);
    let (read_only, read_only_shown) = figure(&comparison.packfs);
    let vs_default = ratio(default, ceiling.as_ref().map(|c| c.0));
    let vs_read_only = ratio(read_only, ceiling.as_ref().map(|c| c.0));
    let (target, met) = match bar {
        Some(bar) => (
            format!("≥ {bar}× ceiling (default)"),
            met(vs_default, Bar::AtLeast(bar)),
        ),
        None => ("—".into(), "—".into()),
    };
    row(
        measurement,
        format!("default {default_shown}"),
        format!(
            "ceiling {} · --read-only {read_only_shown}",
            ceiling.map_or_else(|| "n/a".into(), |c| c.1)
        ),
        format!(
            "default {} · --read-only {}",
            show_ratio(vs_default, "ceiling"),
            show_ratio(vs_read_only, "ceiling")
        ),
        &target,
        met,
    )
}

pub(crate) fn print(config: &Config, comparison: &Comparison) {
    let small = format!("{} items of 16–64 KiB", thousands(config.small_files));
    let scan = |s: Scan| {
        (
            s.files_per_sec(),
            format!("{} files/s", rate(s.files_per_sec())),
        )
    };
    let rows = [
        default_mount_row(
            comparison,
            format!("1st pass over {small}, 1 reader: default mount"),
            |f| scan(f.scan1),
            Some(0.85),
        ),
        default_mount_row(
            comparison,
            format!("1st pass over {small}, {SCAN_READERS} readers: default mount"),
            |f| scan(f.scan8),
            Some(0.7),
        ),
        default_mount_row(
            comparison,
            format!(
                "1st pass over the {} MiB item: default mount",
                config.big_bytes >> 20
            ),
            |f| (f.big_first, mb(f.big_first)),
            None,
        ),
    ];
    print_table(
        "Default (read-write) mount: first passes against fuse-ceiling, beside --read-only",
        &rows,
    );
    println!(
        "The warm reads' first passes, measured in the same {} round(s); default = `packfs \
         mount` without flags (read-write).",
        config.runs
    );
}
