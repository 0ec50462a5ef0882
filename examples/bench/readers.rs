//! The timed readers: Rust threads reading whole files in 1 MiB `read`
//! calls into a reused buffer and checking every byte count, random
//! `pread`s, and the commands (`find`, `ls -lR`) run over a mount.

use std::collections::HashMap;
use std::ffi::OsString;
use std::fs::{self, File};
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use crate::data::{Files, Rng, BIG_ITEM, SMALL_DIR};
use crate::Result;

/// Size of every `read` call of the readers.
pub(crate) const READ_SIZE: usize = 1 << 20;
/// Readers of the many-reader scans.
pub(crate) const SCAN_READERS: usize = 8;
/// The random reads: how many, and of what size.
pub(crate) const PREADS: usize = 20_000;
const PREAD_SIZE: usize = 4096;

/// Reads a whole file in `READ_SIZE` calls and checks its length.
pub(crate) fn read_checked(path: &Path, expected: u64, buf: &mut [u8]) -> Result<()> {
    let fail = |e| format!("read {}: {e}", path.display());
    let mut file = File::open(path).map_err(fail)?;
    let mut total = 0u64;
    loop {
        match file.read(buf).map_err(fail)? {
            0 => break,
            n => total += n as u64,
        }
    }
    if total != expected {
        return Err(format!(
            "{}: read {total} bytes, expected {expected}",
            path.display()
        )
        .into());
    }
    Ok(())
}

/// MB/s of one front-to-back read of the big item.
pub(crate) fn sequential(root: &Path, files: &Files) -> Result<f64> {
    let mut buf = vec![0u8; READ_SIZE];
    let start = Instant::now();
    read_checked(&root.join(BIG_ITEM), files.big_len, &mut buf)?;
    Ok(files.big_len as f64 / start.elapsed().as_secs_f64() / 1e6)
}

/// What a scan read, and how long it took.
#[derive(Clone, Copy)]
pub(crate) struct Scan {
    pub files: usize,
    pub bytes: u64,
    pub secs: f64,
}

impl Scan {
    pub(crate) fn files_per_sec(&self) -> f64 {
        self.files as f64 / self.secs
    }

    pub(crate) fn mb_per_sec(&self) -> f64 {
        self.bytes as f64 / self.secs / 1e6
    }
}

/// Lists `root/SMALL_DIR` and reads its files in listing order (the first
/// `limit` of them), split into `readers` contiguous slices read by one
/// thread each. The listing is part of the time.
pub(crate) fn scan(
    root: &Path,
    files: &Files,
    readers: usize,
    limit: Option<usize>,
) -> Result<Scan> {
    scan_dir(&root.join(SMALL_DIR), &files.small, readers, limit)
}

/// [`scan`] of the files of `dir`, which must be exactly `expected`
/// (names and sizes).
pub(crate) fn scan_dir(
    dir: &Path,
    expected: &HashMap<OsString, u64>,
    readers: usize,
    limit: Option<usize>,
) -> Result<Scan> {
    let start = Instant::now();
    let mut names = Vec::with_capacity(expected.len());
    for entry in fs::read_dir(dir)? {
        names.push(entry?.file_name());
    }
    if names.len() != expected.len() {
        return Err(format!(
            "{} lists {} files, expected {}",
            dir.display(),
            names.len(),
            expected.len()
        )
        .into());
    }
    names.truncate(limit.unwrap_or(names.len()));
    let work = names
        .iter()
        .map(|name| match expected.get(name) {
            Some(&len) => Ok((dir.join(name), len)),
            None => Err(format!("unexpected file {:?} in {}", name, dir.display()).into()),
        })
        .collect::<Result<Vec<_>>>()?;
    let per_reader = work.len().div_ceil(readers).max(1);
    let bytes = thread::scope(|s| {
        let readers: Vec<_> = work
            .chunks(per_reader)
            .map(|slice| s.spawn(move || read_slice(slice)))
            .collect();
        readers
            .into_iter()
            .map(|r| r.join().expect("reader thread panicked"))
            .sum::<Result<u64>>()
    })?;
    Ok(Scan {
        files: work.len(),
        bytes,
        secs: start.elapsed().as_secs_f64(),
    })
}

fn read_slice(slice: &[(PathBuf, u64)]) -> Result<u64> {
    let mut buf = vec![0u8; READ_SIZE];
    for (path, len) in slice {
        read_checked(path, *len, &mut buf)?;
    }
    Ok(slice.iter().map(|(_, len)| len).sum())
}

/// Reads `files` (path, expected length) whole with `readers` threads that
/// each take the next file of the list as they finish one (`xargs -n1
/// -P`); with one reader, `xargs cat` in list order.
pub(crate) fn read_list(files: &[(PathBuf, u64)], readers: usize) -> Result<Scan> {
    let next = AtomicUsize::new(0);
    let start = Instant::now();
    let bytes = thread::scope(|s| {
        let threads: Vec<_> = (0..readers)
            .map(|_| {
                s.spawn(|| -> Result<u64> {
                    let mut buf = vec![0u8; READ_SIZE];
                    let mut bytes = 0;
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some((path, len)) = files.get(i) else {
                            return Ok(bytes);
                        };
                        read_checked(path, *len, &mut buf)?;
                        bytes += len;
                    }
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|t| t.join().expect("reader thread panicked"))
            .sum::<Result<u64>>()
    })?;
    Ok(Scan {
        files: files.len(),
        bytes,
        secs: start.elapsed().as_secs_f64(),
    })
}

/// Rate and latency of random reads.
#[derive(Clone, Copy)]
pub(crate) struct Preads {
    pub per_sec: f64,
    pub p50: Duration,
    pub p99: Duration,
}

/// `PREADS` reads of `PREAD_SIZE` bytes at random aligned offsets of the
/// big item (the same offsets on every filesystem).
pub(crate) fn random_preads(root: &Path, files: &Files) -> Result<Preads> {
    let path = root.join(BIG_ITEM);
    let file = File::open(&path)?;
    let blocks = files.big_len / PREAD_SIZE as u64;
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let mut buf = [0u8; PREAD_SIZE];
    let mut latencies = Vec::with_capacity(PREADS);
    let start = Instant::now();
    for _ in 0..PREADS {
        let offset = rng.next() % blocks * PREAD_SIZE as u64;
        let t = Instant::now();
        let n = file.read_at(&mut buf, offset)?;
        latencies.push(t.elapsed());
        if n != PREAD_SIZE {
            return Err(format!("{}: pread at {offset} returned {n} bytes", path.display()).into());
        }
    }
    let secs = start.elapsed().as_secs_f64();
    latencies.sort_unstable();
    Ok(Preads {
        per_sec: PREADS as f64 / secs,
        p50: latencies[PREADS / 2],
        p99: latencies[PREADS * 99 / 100],
    })
}

/// How long `ls -lR DIR > /dev/null` takes.
pub(crate) fn time_ls_lr(dir: &Path) -> Result<Duration> {
    let start = Instant::now();
    let status = Command::new("ls")
        .arg("-lR")
        .arg(dir)
        .stdout(Stdio::null())
        .status()?;
    if !status.success() {
        return Err(format!("ls -lR {} failed ({status})", dir.display()).into());
    }
    Ok(start.elapsed())
}

/// How long `find MNT | wc -l` takes; an error unless it counts
/// `expected` lines.
pub(crate) fn timed_find(mnt: &Path, expected: usize) -> Result<Duration> {
    let start = Instant::now();
    let lines = count_find_lines(mnt)?;
    let time = start.elapsed();
    if lines != expected {
        return Err(format!(
            "find {} listed {lines} paths, expected {expected}",
            mnt.display()
        )
        .into());
    }
    Ok(time)
}

/// `find MNT | wc -l`.
fn count_find_lines(mnt: &Path) -> Result<usize> {
    let mut child = Command::new("find")
        .arg(mnt)
        .stdout(Stdio::piped())
        .spawn()?;
    let mut out = child.stdout.take().expect("piped");
    let (mut lines, mut buf) = (0, vec![0u8; 1 << 16]);
    loop {
        match out.read(&mut buf)? {
            0 => break,
            n => lines += buf[..n].iter().filter(|&&b| b == b'\n').count(),
        }
    }
    let status = child.wait()?;
    if !status.success() {
        return Err(format!("find failed ({status})").into());
    }
    Ok(lines)
}
