//! The whole POSIX suite pjdfstest 0.2.2 (398 tests, configuration in
//! `tests/pjdfstest/`) on a default read-write mount (made by root, so
//! other users get in under the kernel's permission checks) and on one
//! with `--owner-only`. How many pass and exactly which fail are asserted, so
//! a regression fails, and so does a fix until the lists here say so.
//! `.ci/run` installs pjdfstest.

use std::collections::BTreeSet;
use std::process::Command;

use crate::common::*;

/// tmpfs passes 382 of the 398 with this configuration (16 are skipped
/// everywhere: remounts, a second filesystem, BSD features).
const DEFAULT_PASSES: usize = 377;
const OWNER_ONLY_PASSES: usize = 360;

/// Every node belongs to the mount's owner (`--uid`/`--gid`), not to the
/// user who made it, and group membership is not checked.
const ONE_OWNER: &[&str] = &[
    "chmod::clear_isgid_bit",
    "mkdir::uid_gid_eq_euid_egid",
    "mkfifo::uid_gid_eq_euid_egid",
    "mknod::uid_gid_eq_euid_egid",
    "open::uid_gid_eq_euid_egid",
];

/// With `--owner-only`, FUSE refuses every user but the one who mounted:
/// tests that switch user get EACCES.
const OTHER_USERS_REFUSED: &[&str] = &[
    "ftruncate::affected_create_flags_only",
    "posix_fallocate::affected_only_create_flags",
    "rename::unchanged_ctime_failed::block",
    "rename::unchanged_ctime_failed::char",
    "rename::unchanged_ctime_failed::dir",
    "rename::unchanged_ctime_failed::fifo",
    "rename::unchanged_ctime_failed::regular",
    "rename::unchanged_ctime_failed::socket",
    "rename::unchanged_ctime_failed::symlink",
    "rename::write_access_required_subdir",
    "unlink::unchanged_ctime_failed::block",
    "unlink::unchanged_ctime_failed::char",
    "unlink::unchanged_ctime_failed::fifo",
    "unlink::unchanged_ctime_failed::regular",
    "unlink::unchanged_ctime_failed::socket",
    "utimensat::nobody",
    "utimensat::write_perm",
];

/// Passes or fails by a race in the kernel: `open(O_RDONLY | O_TRUNC)` of
/// a program being started from the mount must answer ETXTBSY, but with
/// atomic O_TRUNC the kernel drops the file's pages when the daemon answers
/// the open, before it checks, and the program, still loading, crashes;
/// then nothing runs it any more and the open succeeds.
const RACY: &[&str] = &["open::etxtbsy"];

/// Runs the suite in modality `t/m` of a read-write mount made with
/// `extra`; returns how many passed and the names of those that failed.
fn run_suite(extra: &[&str]) -> (usize, BTreeSet<String>) {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    write_file(&src.join("t/m/seed"), b"seed");
    let dataset = tmp.path().join("ds");
    import(&src, &dataset, &[]);
    let m = Mounted::writable_in(tmp.path(), &dataset, extra);
    let config = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/pjdfstest/pjdfstest.toml"
    );
    let out = Command::new("pjdfstest")
        .args(["-c", config, "-p"])
        .arg(m.path.join("t/m"))
        .env("NO_COLOR", "1")
        .output()
        .expect("run pjdfstest (`bash .ci/run` installs it; see tests/pjdfstest/README.md)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let summary = stdout
        .lines()
        .rfind(|l| l.starts_with("Summary: "))
        .unwrap_or_else(|| {
            panic!(
                "pjdfstest printed no summary:\n{stdout}\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    let count = |what: &str| -> usize {
        let at = summary.find(what).unwrap_or_else(|| panic!("{summary}"));
        let before = summary[..at].trim_end();
        before.rsplit([' ', ',']).next().unwrap().parse().unwrap()
    };
    let mut failed: BTreeSet<String> = stdout
        .lines()
        .filter(|l| l.trim_end().ends_with("FAILED"))
        .map(|l| l.split_whitespace().next().unwrap().to_string())
        .collect();
    // A racy test counts as passed either way.
    let racy_failures = RACY.iter().filter(|n| failed.remove(**n)).count();
    m.unmount();
    packfs_ok(&["verify", dataset.to_str().unwrap()]);
    (count(" passed") + racy_failures, failed)
}

/// Runs the suite with `extra` and checks that `passes` pass and that
/// exactly the tests of `lists` fail.
fn check(extra: &[&str], passes: usize, lists: &[&[&str]]) {
    require_fuse();
    let (passed, failed) = run_suite(extra);
    let want: BTreeSet<String> = lists
        .iter()
        .flat_map(|l| l.iter())
        .map(|n| n.to_string())
        .collect();
    assert_eq!(
        (passed, &failed),
        (passes, &want),
        "newly failing: {:?}; newly passing: {:?}",
        failed.difference(&want).collect::<Vec<_>>(),
        want.difference(&failed).collect::<Vec<_>>()
    );
}

#[test]
fn pjdfstest_on_a_default_read_write_mount() {
    check(&[], DEFAULT_PASSES, &[ONE_OWNER]);
}

#[test]
fn pjdfstest_on_a_mount_with_owner_only() {
    check(
        &["--owner-only"],
        OWNER_ONLY_PASSES,
        &[ONE_OWNER, OTHER_USERS_REFUSED],
    );
}
