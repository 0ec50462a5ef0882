//! Soak: 16 readers and 4 writers on one read-write mount for a while.
//! Every byte read matches, nothing written is lost, the daemon's memory
//! stays within its bounds and it leaks no file descriptors.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::*;

const RUN_FOR: Duration = Duration::from_secs(15);
const READERS: usize = 16;
const WRITERS: usize = 4;

fn proc_status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with(field)).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

#[test]
fn readers_and_writers_together_keep_every_byte_and_no_leak() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    let mut rng = Rng::new(99);
    let mut originals = Vec::new();
    for i in 0..300 {
        let len = 1 + rng.below(64 << 10) as usize;
        originals.push((format!("t/m/r{i:03}"), rng.bytes(len)));
    }
    originals.push(("t/big/blob".into(), rng.bytes(20 << 20)));
    for (rel, bytes) in &originals {
        write_file(&src.join(rel), bytes);
    }
    let dataset = tmp.path().join("ds");
    import(&src, &dataset, &["--pack-items", "50"]);
    let args = ["--pack-items", "50", "--idle-flush", "1"];
    let m = Mounted::writable_in(tmp.path(), &dataset, &args);
    let pid = m.pid.expect("daemon pid");
    let root = m.path.clone();
    // Warm up so the fd baseline includes the spool's ready files.
    std::fs::write(root.join("t/m/warmup"), b"w").unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let fds_before = open_fds(pid);

    let originals = Arc::new(originals);
    let written: Arc<Mutex<HashMap<String, Vec<u8>>>> = Arc::default();
    let deadline = Instant::now() + RUN_FOR;
    let mut threads = Vec::new();
    for r in 0..READERS {
        let (originals, root) = (originals.clone(), root.clone());
        threads.push(std::thread::spawn(move || {
            let mut rng = Rng::new(1000 + r as u64);
            let mut reads = 0u64;
            while Instant::now() < deadline {
                let (rel, bytes) = &originals[rng.below(originals.len() as u64) as usize];
                let got = std::fs::read(root.join(rel)).unwrap();
                assert!(got == *bytes, "reader {r}: {rel} differs");
                reads += 1;
            }
            reads
        }));
    }
    for w in 0..WRITERS {
        let (written, root) = (written.clone(), root.clone());
        threads.push(std::thread::spawn(move || {
            let mut rng = Rng::new(2000 + w as u64);
            let dir = root.join(format!("t/m/w{w}"));
            std::fs::create_dir(&dir).unwrap();
            let mut n = 0u64;
            while Instant::now() < deadline {
                // Mostly new files, sometimes an overwrite, now and then fsync.
                let i = if n > 0 && rng.below(4) == 0 {
                    rng.below(n)
                } else {
                    n
                };
                let rel = format!("t/m/w{w}/{i}");
                let len = 1 + rng.below(100_000) as usize;
                let bytes = rng.bytes(len);
                let file = std::fs::File::create(root.join(&rel)).unwrap();
                std::io::Write::write_all(&mut &file, &bytes).unwrap();
                if rng.below(20) == 0 {
                    file.sync_all().unwrap();
                }
                drop(file);
                written.lock().unwrap().insert(rel, bytes);
                n = n.max(i + 1);
            }
            n
        }));
    }
    let counts: Vec<u64> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let (rss_kib, hwm_kib) = (proc_status_kib(pid, "VmRSS"), proc_status_kib(pid, "VmHWM"));
    std::thread::sleep(Duration::from_secs(2)); // let handles close and flushes settle
    let fds_after = open_fds(pid);
    eprintln!(
        "reads {:?} writes {:?}; daemon VmRSS {rss_kib} KiB, VmHWM {hwm_kib} KiB; fds {fds_before} -> {fds_after}",
        &counts[..READERS],
        &counts[READERS..]
    );
    assert!(counts[..READERS].iter().all(|&n| n > 0) && counts[READERS..].iter().all(|&n| n > 0));
    // Bounds: 512 MiB cache + 256 MiB read-ahead, plus metadata.
    assert!(hwm_kib < 1024 * 1024, "daemon peaked at {hwm_kib} KiB");
    assert!(
        fds_after <= fds_before + 8,
        "fds {fds_before} -> {fds_after}"
    );
    m.unmount();

    let m = Mounted::new(&dataset, &tmp.path().join("mnt"), &[]);
    for (rel, bytes) in written.lock().unwrap().iter() {
        assert!(
            std::fs::read(m.path.join(rel)).unwrap() == *bytes,
            "{rel} lost or wrong"
        );
    }
    for (rel, bytes) in originals.iter() {
        assert!(std::fs::read(m.path.join(rel)).unwrap() == *bytes, "{rel}");
    }
    m.unmount();
    packfs_ok(&["verify", dataset.to_str().unwrap()]);
}
