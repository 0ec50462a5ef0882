//! Writes: `cp -r` of 20,000 files of 1–16 KiB (2,000 with `--quick`),
//! and `tar -x` of a tar made once of the same files, into a plain
//! directory of the same disk, into the write ceiling (`write_ceiling.rs`:
//! a FUSE filesystem in this process that keeps the files in RAM and does
//! nothing else, with the requests per file it served) and into a fresh
//! modality of a read-write mount, in rounds, each into fresh directories
//! and fresh mounts; then the time the daemon takes to commit at unmount,
//! and the objects it stored (checked with `diff -r` on a read-only
//! remount).

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use packfs_fs::mount;

use crate::data::{path_str, write_random_file, Rng};
use crate::mounts::Daemon;
use crate::table::{
    self, met, plain_row, print_table, ratio, row, show_ratio, thousands, Bar, Row,
};
use crate::write_ceiling;
use crate::{median_by, progress, Bench, Result};

/// Sizes of the files copied.
const WRITE_MIN: u64 = 1 << 10;
const WRITE_MAX: u64 = 16 << 10;

/// `cp -r` and `tar -x` of many small files into a read-write mount and
/// into a plain directory, and what the mount then stored; medians of
/// `config.runs` rounds, each round copying into fresh directories.
pub(crate) struct Writes {
    files: usize,
    bytes: u64,
    cp: WriteWay,
    tar: WriteWay,
    /// Objects the first round's `cp -r` commit added to the store
    /// (packs, Tracks, Manifests).
    puts: usize,
    packs: usize,
    rounds: usize,
}

/// One way of writing the files (`cp -r`, `tar -x`): medians of the rounds.
struct WriteWay {
    plain_secs: f64,
    /// Into the write ceiling (`write_ceiling.rs`): FUSE and nothing else.
    ceiling_secs: f64,
    mount_secs: f64,
    /// From `fusermount3 -u` until the daemon exited: the final commit.
    commit_secs: f64,
    /// The requests the write ceiling served per file, by kind, and how
    /// many of them the writer waited for (the first round's).
    requests: String,
    synchronous: f64,
}

impl WriteWay {
    fn median(rounds: &[WriteWay]) -> WriteWay {
        WriteWay {
            plain_secs: median_by(rounds, |w| w.plain_secs).plain_secs,
            ceiling_secs: median_by(rounds, |w| w.ceiling_secs).ceiling_secs,
            mount_secs: median_by(rounds, |w| w.mount_secs).mount_secs,
            commit_secs: median_by(rounds, |w| w.commit_secs).commit_secs,
            requests: rounds[0].requests.clone(),
            synchronous: rounds[0].synchronous,
        }
    }
}

/// Runs `command`, timed; an error if it fails.
fn timed(command: &mut Command, what: &str) -> Result<f64> {
    let start = Instant::now();
    let status = command.status()?;
    if !status.success() {
        return Err(format!("{what} failed ({status})").into());
    }
    Ok(start.elapsed().as_secs_f64())
}

pub(crate) fn measure(bench: &Bench) -> Result<Writes> {
    let (config, bin, work) = (&bench.config, bench.bin.as_path(), bench.work());
    let (mnt, ceiling_mnt) = (
        bench.mountpoint("mnt-write")?,
        bench.mountpoint("mnt-write-ceiling")?,
    );
    let (mnt, ceiling_mnt) = (mnt.as_path(), ceiling_mnt.as_path());
    let n = config.write_files;
    progress(format!(
        "writing {} files of 1–16 KiB to copy",
        thousands(n)
    ));
    let src = work.join("write-src");
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let mut buf = vec![0u8; WRITE_MAX as usize];
    let mut bytes = 0;
    for i in 0..n {
        let dir = src.join(format!("d{:02}", i % 20));
        fs::create_dir_all(&dir)?;
        let path = dir.join(format!("f{i:05}.bin"));
        bytes += write_random_file(&path, WRITE_MIN..=WRITE_MAX, &mut rng, &mut buf)?;
    }
    let tarball = work.join("write-src.tar");
    timed(
        Command::new("tar")
            .arg("-cf")
            .arg(&tarball)
            .arg("-C")
            .arg(&src)
            .arg("."),
        "tar -c of the write source",
    )?;
    let cp = |to: &Path| {
        timed(
            Command::new("cp")
                .arg("-r")
                .arg(format!("{}/.", src.display()))
                .arg(to),
            &format!("cp -r into {}", to.display()),
        )
    };
    let untar = |to: &Path| {
        timed(
            Command::new("tar")
                .arg("-xf")
                .arg(&tarball)
                .arg("-C")
                .arg(to),
            &format!("tar -x into {}", to.display()),
        )
    };

    let dataset = work.join("write-dataset");
    let seed = work.join("write-seed");
    fs::create_dir_all(seed.join("w/seed"))?;
    fs::write(seed.join("w/seed/readme"), b"seed")?;
    let status = Command::new(bin)
        .args(["import", "--no-progress"])
        .arg(&seed)
        .arg(&dataset)
        .stderr(Stdio::null())
        .status()?;
    if !status.success() {
        return Err("importing the write benchmark's seed failed".into());
    }
    let spool = work.join("write-spool");
    let spool_arg = path_str(&spool)?;
    // The ceiling serves with as many threads as a read-write mount does.
    let threads = mount::READ_WRITE_THREADS;
    // Into a plain directory, a fresh write ceiling, then a fresh modality
    // of the mount; the mount is unmounted (and commits) after each.
    let round = |name: &str, write: &dyn Fn(&Path) -> Result<f64>| -> Result<WriteWay> {
        progress(format!("{name} into a plain directory"));
        let plain = work.join(format!("write-plain-{name}"));
        fs::create_dir(&plain)?;
        let plain_secs = write(&plain)?;
        progress(format!("{name} into the write ceiling (FUSE, RAM)"));
        let ceiling = write_ceiling::Mounted::mount(ceiling_mnt, threads)?;
        let target = ceiling_mnt.join(name);
        fs::create_dir(&target)?;
        let ceiling_secs = write(&target)?;
        let requests = ceiling.counts.per_file(n);
        let synchronous = ceiling.counts.synchronous_per_file(n);
        drop(ceiling);
        progress(format!("{name} into a read-write packfs mount"));
        let daemon = Daemon::mount_with(bin, &dataset, mnt, &["--spool-dir", spool_arg])?;
        let target = mnt.join("w").join(name);
        fs::create_dir(&target)?;
        let mount_secs = write(&target)?;
        let commit_secs = daemon.unmount_and_wait()?.as_secs_f64();
        Ok(WriteWay {
            plain_secs,
            ceiling_secs,
            mount_secs,
            commit_secs,
            requests,
            synchronous,
        })
    };
    let (mut cps, mut tars) = (Vec::new(), Vec::new());
    let (mut puts, mut packs) = (0, 0);
    for r in 0..config.runs {
        let before = count_files(&dataset)?;
        cps.push(round(&format!("cp{r}"), &cp)?);
        if r == 0 {
            puts = count_files(&dataset)? - before;
            packs = fs::read_dir(dataset.join("w/cp0/0"))?.count();
        }
        tars.push(round(&format!("tar{r}"), &untar)?);
    }

    progress("checking the copies on a read-only remount");
    let daemon = Daemon::mount(bin, &dataset, mnt)?;
    for name in ["cp0", "tar0"] {
        let status = Command::new("diff")
            .arg("-r")
            .arg(&src)
            .arg(mnt.join("w").join(name))
            .stdout(Stdio::null())
            .status()?;
        if !status.success() {
            return Err(format!("the files written into w/{name} differ after a remount").into());
        }
    }
    drop(daemon);
    Ok(Writes {
        files: n,
        bytes,
        cp: WriteWay::median(&cps),
        tar: WriteWay::median(&tars),
        puts,
        packs,
        rounds: config.runs,
    })
}

/// Regular files below `dir`.
fn count_files(dir: &Path) -> Result<usize> {
    let mut count = 0;
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for entry in fs::read_dir(&d)? {
            let entry = entry?;
            if entry.file_type()?.is_dir() {
                pending.push(entry.path());
            } else {
                count += 1;
            }
        }
    }
    Ok(count)
}

fn rows(w: &Writes) -> Vec<Row> {
    let n = thousands(w.files);
    let rate = |secs: f64| w.files as f64 / secs;
    let mb = |secs: f64| w.bytes as f64 / secs / 1e6;
    let way = |what: &str, way: &WriteWay| {
        let vs_plain = ratio(rate(way.mount_secs), Some(rate(way.plain_secs)));
        let ceiling_vs_plain = rate(way.ceiling_secs) / rate(way.plain_secs);
        [
            row(
                format!("{what} of {n} files of 1–16 KiB into a read-write mount"),
                format!(
                    "{} files/s, {:.0} MB/s",
                    table::rate(rate(way.mount_secs)),
                    mb(way.mount_secs)
                ),
                format!(
                    "plain directory {} files/s, {:.0} MB/s; write ceiling {} files/s",
                    table::rate(rate(way.plain_secs)),
                    mb(way.plain_secs),
                    table::rate(rate(way.ceiling_secs)),
                ),
                format!(
                    "{}; {:.2}× ceiling",
                    show_ratio(vs_plain, "plain"),
                    way.ceiling_secs / way.mount_secs
                ),
                "≥ 0.5× plain",
                met(vs_plain, Bar::AtLeast(0.5)),
            ),
            row(
                format!("{what} into the write ceiling (FUSE, RAM, nothing else)"),
                "—".into(),
                format!(
                    "{:.1} requests per file waited for ({})",
                    way.synchronous, way.requests
                ),
                format!("ceiling {ceiling_vs_plain:.2}× plain"),
                "—",
                "—".into(),
            ),
            plain_row(
                format!("then unmount after {what}: pack, upload, commit (until the daemon exits)"),
                format!("{:.2} s", way.commit_secs),
            ),
        ]
    };
    let mut rows = Vec::new();
    rows.extend(way("cp -r", &w.cp));
    rows.extend(way("tar -x", &w.tar));
    rows.push(row(
        format!("objects PUT for the {n} files of `cp -r` (default --pack-items 1024)"),
        format!("{} ({} packs)", w.puts, w.packs),
        format!("{n} with one object per file"),
        format!("{:.4}× one per file", w.puts as f64 / w.files as f64),
        "—",
        "—".into(),
    ));
    rows
}

pub(crate) fn print(writes: &Writes) {
    print_table(
        "Writes: cp -r and tar -x into a read-write mount",
        &rows(writes),
    );
    println!(
        "Medians of {} round(s), each into a fresh plain directory, a fresh write ceiling \
         (serving with as many threads as a read-write mount) and a fresh read-write mount; \
         the copies checked with `diff -r` on a read-only remount.",
        writes.rounds
    );
}
