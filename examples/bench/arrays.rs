//! Arrays: a sparse TileDB array of 5,000 `image` blobs (4–40 KiB),
//! written by the Python `tiledb` package, scanned through a packfs mount
//! (every cell file read once, on a fresh mount) against TileDB reading
//! the same cells in Python: one query for all of them, and one query per
//! cell in id order, as a loader indexing samples reads. Without the
//! package (`.ci-venv-tiledb`, which `.ci/run` makes, or
//! `PACKFS_TILEDB_PYTHON`) the scenario says so and measures nothing.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::cli::Config;
use crate::data::path_str;
use crate::mounts::{Daemon, Mounted};
use crate::readers::{scan_dir, Scan, SCAN_READERS};
use crate::table::{
    mb, plain_row, print_table, readers_label, row, show_ratio, show_scan, thousands,
};
use crate::{median_by, progress, Bench, Result};

/// Cells in the benchmark array.
const CELLS: usize = 5_000;

/// TileDB's own first pass, as `tests/tiledb_arrays.py bench` prints it.
struct TileDbPass {
    bytes: u64,
    all_secs: f64,
    per_sample_secs: f64,
}

/// What [`measure`] measured.
pub(crate) struct ArrayBench {
    scans1: Vec<Scan>,
    scans8: Vec<Scan>,
    tiledb: Vec<TileDbPass>,
    mount_secs: Vec<f64>,
}

/// The Python with `tiledb` (`.ci/run` makes the venv), or why not.
fn python() -> std::result::Result<PathBuf, String> {
    let path = std::env::var_os("PACKFS_TILEDB_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci-venv-tiledb/bin/python")
        });
    match path.exists() {
        true => Ok(path),
        false => Err(format!(
            "{} is missing (`bash .ci/run` makes it, or set PACKFS_TILEDB_PYTHON)",
            path.display()
        )),
    }
}

/// `python tests/tiledb_arrays.py ARGS`'s standard output.
fn tiledb(python: &Path, args: &[&str]) -> Result<String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tiledb_arrays.py");
    let out = Command::new(python).arg(script).args(args).output()?;
    if !out.status.success() {
        return Err(format!(
            "tiledb_arrays.py {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )
        .into());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The number after `"key": ` in one line of JSON.
fn json_number(json: &str, key: &str) -> Result<f64> {
    let at = json
        .find(&format!("\"{key}\": "))
        .ok_or_else(|| format!("no {key} in {json}"))?;
    let rest = &json[at + key.len() + 4..];
    let end = rest.find([',', '}']).unwrap_or(rest.len());
    Ok(rest[..end].trim().parse()?)
}

/// Writes the array, then in `config.runs` rounds: a fresh mount scanned
/// by 1 reader, a fresh mount scanned by 8, and TileDB's pass. `None`
/// (with the reason printed) without the `tiledb` package.
pub(crate) fn measure(bench: &Bench) -> Result<Option<ArrayBench>> {
    let (config, bin, work) = (&bench.config, bench.bin.as_path(), bench.work());
    let python = match python() {
        Ok(python) => python,
        Err(why) => {
            progress(format!("arrays: skipped: {why}"));
            return Ok(None);
        }
    };
    let array = work.join("tiledb-array");
    progress(format!(
        "arrays: writing a TileDB array of {} image cells",
        thousands(CELLS)
    ));
    tiledb(
        &python,
        &["write", &format!("many:{CELLS}"), path_str(&array)?],
    )?;
    // The cells' names and sizes, from TileDB (read before any timing).
    let sizes = tiledb(&python, &["sizes", path_str(&array)?])?;
    let expected: HashMap<OsString, u64> = sizes
        .lines()
        .map(|line| {
            let (name, size) = line.split_once(' ').ok_or("bad sizes line")?;
            Ok((OsString::from(name), size.parse()?))
        })
        .collect::<Result<_>>()?;
    let mnt = bench.mountpoint("mnt-tiledb")?;
    let mut bench = ArrayBench {
        scans1: Vec::new(),
        scans8: Vec::new(),
        tiledb: Vec::new(),
        mount_secs: Vec::new(),
    };
    for round in 1..=config.runs {
        progress(format!(
            "arrays (round {round} of {}): first passes over the image cells",
            config.runs
        ));
        for readers in [1, SCAN_READERS] {
            let start = Instant::now();
            let daemon = Daemon::mount(bin, &array, &mnt)?;
            bench.mount_secs.push(start.elapsed().as_secs_f64());
            let scan = scan_dir(&daemon.root().join("image"), &expected, readers, None)?;
            match readers {
                1 => bench.scans1.push(scan),
                _ => bench.scans8.push(scan),
            }
        }
        let json = tiledb(&python, &["bench", path_str(&array)?])?;
        bench.tiledb.push(TileDbPass {
            bytes: json_number(&json, "bytes")? as u64,
            all_secs: json_number(&json, "all_secs")?,
            per_sample_secs: json_number(&json, "per_sample_secs")?,
        });
    }
    Ok(Some(bench))
}

/// The table; `None` when the Python `tiledb` package is missing.
pub(crate) fn print(config: &Config, bench: Option<&ArrayBench>) {
    let title = "Arrays: a TileDB array through packfs against TileDB itself";
    let Some(b) = bench else {
        let skipped = plain_row(
            "TileDB array scans".into(),
            "skipped: the Python `tiledb` package is missing (see the progress lines)".into(),
        );
        return print_table(title, &[skipped]);
    };
    let t = median_by(&b.tiledb, |t| t.all_secs);
    let all = t.all_secs;
    let per_sample = median_by(&b.tiledb, |t| t.per_sample_secs).per_sample_secs;
    let mb_per_s = |secs: f64| mb(t.bytes as f64 / secs / 1e6);
    let mut rows = Vec::new();
    for (readers, scans) in [(1, &b.scans1), (SCAN_READERS, &b.scans8)] {
        let s = median_by(scans, Scan::files_per_sec);
        rows.push(row(
            format!(
                "1st pass over {} `image` cells (4–40 KiB), {}",
                thousands(s.files),
                readers_label(readers)
            ),
            show_scan(s),
            format!(
                "TileDB one query {} · per cell {}",
                mb_per_s(all),
                mb_per_s(per_sample)
            ),
            format!(
                "{} · {}",
                show_ratio(Some(all / s.secs), "one query"),
                show_ratio(Some(per_sample / s.secs), "per cell")
            ),
            "—",
            "—".into(),
        ));
    }
    let mount = median_by(&b.mount_secs, |s| *s);
    rows.push(plain_row(
        "mount ready (`packfs mount` returns)".into(),
        format!("{mount:.2} s"),
    ));
    print_table(title, &rows);
    println!(
        "Medians of {} rounds. Each packfs pass is on a fresh mount (empty block cache) and \
         includes listing `image/`; TileDB's is a fresh process's first open, timed inside \
         Python. The array's files are in the page cache for both. \"One query\" reads every \
         cell in one `A.query(attrs=[\"image\"])[:]`; \"per cell\" reads them one query per id, \
         as a loader indexing samples does.",
        config.runs
    );
}
