//! The POSIX suite pjdfstest (selection and runner in `tests/pjdfstest/`)
//! against a read-write mount. The pass count is asserted, so a regression
//! fails; `.ci/run` installs pjdfstest.

use std::process::Command;

use crate::common::*;

/// Tests of the selection that pass on packfs: all of them.
const EXPECTED_PASSES: usize = 71;
const KNOWN_FAILURES: &[&str] = &[];

#[test]
fn pjdfstest_selection_passes_on_a_read_write_mount() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    write_file(&src.join("t/m/seed"), b"seed");
    let dataset = tmp.path().join("ds");
    import(&src, &dataset, &[]);
    let m = Mounted::writable_in(tmp.path(), &dataset, &[]);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/pjdfstest/run.sh");
    let out = Command::new("bash")
        .arg(script)
        .arg(m.path.join("t/m"))
        .output()
        .expect("run tests/pjdfstest/run.sh");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "run.sh could not run (is pjdfstest installed? see tests/pjdfstest/README.md):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let failed: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("FAILED-TEST "))
        .collect();
    let summary = stdout
        .lines()
        .rfind(|l| l.starts_with("PASSED "))
        .unwrap_or_else(|| panic!("no summary line in:\n{stdout}"));
    let passed: usize = summary.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert_eq!(
        (passed, failed.as_slice()),
        (EXPECTED_PASSES, KNOWN_FAILURES),
        "pjdfstest: {summary}\n{stdout}"
    );
    m.unmount();
    packfs_ok(&["verify", dataset.to_str().unwrap()]);
}
