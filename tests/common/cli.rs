//! Running the `packfs` binary under test.

use std::path::Path;
use std::process::{Command, Output};

use super::process::run_ok;

/// The `packfs` binary cargo built for these tests.
pub const PACKFS: &str = env!("CARGO_BIN_EXE_packfs");

/// `packfs ARGS`.
pub fn packfs(args: &[&str]) -> Output {
    packfs_with_env(&[], args)
}

/// `packfs ARGS` with `env` added to its environment.
pub fn packfs_with_env(env: &[(&str, String)], args: &[&str]) -> Output {
    Command::new(PACKFS)
        .args(args)
        .envs(env.iter().map(|(key, value)| (key, value)))
        .output()
        .expect("run packfs")
}

/// Runs packfs with `args`; panics with its output if it fails.
pub fn packfs_ok(args: &[&str]) -> Output {
    run_ok(PACKFS, args)
}

/// `packfs import SRC DATASET --no-progress EXTRA…`.
pub fn import(src: &Path, dataset: &Path, extra: &[&str]) {
    let mut args = vec![
        "import",
        src.to_str().unwrap(),
        dataset.to_str().unwrap(),
        "--no-progress",
    ];
    args.extend_from_slice(extra);
    packfs_ok(&args);
}

/// Fails unless `out` is of a command that failed with every one of
/// `needles` in its stderr.
pub fn failed_with(out: &Output, needles: &[&str]) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "should have failed: {stderr}");
    for needle in needles {
        assert!(stderr.contains(needle), "{needle:?} not in: {stderr}");
    }
}
