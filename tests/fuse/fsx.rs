//! fsx, the file-system exerciser (the Rust port, installed by `.ci/run`):
//! a seeded random sequence of writes, reads checked against its own model,
//! mmap reads and writes, truncates, close and reopen, fsync, fdatasync,
//! posix_fallocate, copy_file_range and sendfile on one file of a default
//! read-write mount. The file ends equal to the same run's on a local disk,
//! and is the same after a remount.

use std::path::Path;
use std::process::Command;

use crate::common::*;
use crate::seeded_dataset;

/// Operations of the run in `.ci/run`; `PACKFS_FSX_OPS` sets more (the
/// full 100,000 of a soak run).
const OPS: u64 = 10_000;
const SEED: &str = "42";

/// Every operation packfs supports, weighted as fsx's defaults with the
/// optional ones turned on (hole punching answers EOPNOTSUPP: off).
const CONFIG: &str = "\
flen = 262144
[weights]
close_open = 2
read = 10
write = 10
mapread = 10
mapwrite = 10
invalidate = 1
truncate = 2
fsync = 1
fdatasync = 1
posix_fallocate = 1
sendfile = 1
posix_fadvise = 1
copy_file_range = 2
";

/// Runs fsx on `file`, keeping its artifacts in `artifacts`.
fn fsx(config: &Path, artifacts: &Path, file: &Path, ops: u64) {
    std::fs::create_dir_all(artifacts).unwrap();
    let out = Command::new("fsx")
        .args(["-N", &ops.to_string(), "-S", SEED, "-f"])
        .arg(config)
        .arg("-P")
        .arg(artifacts)
        .arg(file)
        .output()
        .expect("run fsx (`bash .ci/run` installs it: cargo install fsx --version 0.3.2)");
    succeeded(&format!("fsx on {}", file.display()), out);
}

#[test]
fn fsx_ends_with_the_bytes_a_local_disk_has_and_keeps_them_across_a_remount() {
    require_fuse();
    let ops = std::env::var("PACKFS_FSX_OPS").map_or(OPS, |n| n.parse().unwrap());
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("fsx.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let ds = seeded_dataset(dir.path());

    let local = dir.path().join("local/fsx.file");
    std::fs::create_dir_all(local.parent().unwrap()).unwrap();
    fsx(&config, &dir.path().join("local-artifacts"), &local, ops);
    let want = std::fs::read(&local).unwrap();

    let m = Mounted::writable_in(dir.path(), &ds, &[]);
    let file = m.path.join("t/m/fsx.file");
    fsx(&config, &dir.path().join("artifacts"), &file, ops);
    assert!(
        std::fs::read(&file).unwrap() == want,
        "the mount's file differs from the local disk's"
    );
    m.unmount();
    let m = Mounted::writable_in(dir.path(), &ds, &[]);
    assert!(
        std::fs::read(&file).unwrap() == want,
        "the file differs after a remount"
    );
    m.unmount();
    packfs_ok(&["verify", ds.to_str().unwrap()]);
}
