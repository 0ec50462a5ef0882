//! The report: a header for the run, then one Markdown table per scenario
//! with the same six columns, and the formats of its figures.

use std::fs;
use std::thread;
use std::time::Duration;

use crate::cli::Config;
use crate::readers::{Preads, Scan};

/// A table row: the six cells of [`HEADER`].
pub(crate) type Row = [String; 6];

/// The columns of every table.
const HEADER: [&str; 6] = [
    "Measurement",
    "packfs",
    "References (same files, same run)",
    "Ratio",
    "Target",
    "Met",
];

pub(crate) fn row(
    measurement: String,
    packfs: String,
    references: String,
    ratio: String,
    target: &str,
    met: String,
) -> Row {
    [measurement, packfs, references, ratio, target.into(), met]
}

/// A row of a figure with no reference and no target.
pub(crate) fn plain_row(measurement: String, packfs: String) -> Row {
    let blank = || "—".to_string();
    row(measurement, packfs, blank(), blank(), "—", blank())
}

/// The run's header: its size, the machine, and how an idle CPU waits.
pub(crate) fn print_header(config: &Config) {
    println!(
        "# packfs benchmark: {} run of {}, {} round(s), {} cores, load average at the end {}, {}",
        config.mode(),
        config.scenario_names(),
        config.runs,
        thread::available_parallelism().map_or(0, |n| n.get()),
        load_average(),
        cpu_idle()
    );
}

/// `## title`, then the table.
pub(crate) fn print_table(title: &str, rows: &[Row]) {
    println!("\n## {title}\n");
    let width = |i: usize| {
        rows.iter()
            .map(|r| r[i].chars().count())
            .chain([HEADER[i].chars().count(), 3])
            .max()
            .unwrap_or(3)
    };
    let widths: Vec<usize> = (0..6).map(width).collect();
    let line = |cells: Vec<String>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, &w)| format!("{c}{}", " ".repeat(w - c.chars().count())))
            .collect();
        println!("| {} |", padded.join(" | "));
    };
    line(HEADER.iter().map(|h| h.to_string()).collect());
    line(widths.iter().map(|&w| "-".repeat(w)).collect());
    for r in rows {
        line(r.to_vec());
    }
    println!();
}

/// A target's bar on a ratio or a figure.
#[derive(Clone, Copy)]
pub(crate) enum Bar {
    AtLeast(f64),
    AtMost(f64),
}

/// Whether `value` reached `bar`: `yes`, `**NO**`, or `n/a` without a value.
pub(crate) fn met(value: Option<f64>, bar: Bar) -> String {
    let ok = match (value, bar) {
        (None, _) => return "n/a".into(),
        (Some(v), Bar::AtLeast(b)) => v >= b,
        (Some(v), Bar::AtMost(b)) => v <= b,
    };
    if ok { "yes" } else { "**NO**" }.into()
}

pub(crate) fn ratio(value: f64, reference: Option<f64>) -> Option<f64> {
    reference.map(|r| value / r)
}

pub(crate) fn show_ratio(value: Option<f64>, what: &str) -> String {
    value.map_or_else(|| format!("n/a {what}"), |v| format!("{v:.2}× {what}"))
}

pub(crate) fn mb(x: f64) -> String {
    format!("{x:.0} MB/s")
}

pub(crate) fn rate(x: f64) -> String {
    if x >= 1000.0 {
        format!("{:.1}k", x / 1000.0)
    } else {
        format!("{x:.1}")
    }
}

pub(crate) fn show_scan(s: &Scan) -> String {
    format!(
        "{} files/s, {}",
        rate(s.files_per_sec()),
        mb(s.mb_per_sec())
    )
}

pub(crate) fn show_preads(p: &Preads) -> String {
    format!(
        "{} reads/s, p50 {} µs, p99 {} µs",
        rate(p.per_sec),
        p.p50.as_micros(),
        p.p99.as_micros()
    )
}

pub(crate) fn readers_label(readers: usize) -> String {
    match readers {
        1 => "1 reader".into(),
        n => format!("{n} readers"),
    }
}

pub(crate) fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

pub(crate) fn mib(kib: u64) -> String {
    format!("{} MiB", kib / 1024)
}

pub(crate) fn gb(bytes: u64) -> String {
    format!("{:.3} GB", bytes as f64 / 1e9)
}

pub(crate) fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The 1-minute load average, as `/proc/loadavg` says it.
fn load_average() -> String {
    fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split(' ').next().map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

/// How an idle CPU waits here, which sets what a FUSE round trip costs on
/// an otherwise idle machine: a vCPU that halts at once (a `haltpoll`
/// guest with `guest_halt_poll_ns` 0) must be woken through the host for
/// every request and reply, several times the cost of waking a polling one
/// (docs/PERFORMANCE.md, "Writes").
fn cpu_idle() -> String {
    let read = |path: &str| fs::read_to_string(path).ok().map(|s| s.trim().to_string());
    match read("/sys/devices/system/cpu/cpuidle/current_driver") {
        Some(driver) if driver == "haltpoll" => {
            let poll = read("/sys/module/haltpoll/parameters/guest_halt_poll_ns")
                .unwrap_or_else(|| "?".into());
            format!("cpuidle haltpoll, guest_halt_poll_ns {poll}")
        }
        Some(driver) => format!("cpuidle {driver}"),
        None => "cpuidle unknown".into(),
    }
}
