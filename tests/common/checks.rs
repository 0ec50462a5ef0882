//! Checks the suites that write datasets through packfs make: the modes
//! a mount shows, commands that must end in time.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// The permission bits of `path`.
pub fn mode_of(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

/// Runs `command` with stdout discarded; returns whether it succeeded and
/// its stderr. Killed, and the test failed, if it runs past `limit`: a
/// hang is a failure, not a stuck test.
pub fn run_within(command: &mut Command, limit: Duration) -> (bool, String) {
    let mut child = command
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("{command:?} ran past {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.success(), stderr)
}
