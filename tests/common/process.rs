//! Running programs that must succeed.

use std::process::{Command, Output};

/// Runs `cmd` with `args`; panics with its output if it fails.
pub fn run_ok(cmd: &str, args: &[&str]) -> Output {
    let out = Command::new(cmd).args(args).output().expect("run command");
    succeeded(&format!("{cmd} {args:?}"), out)
}

/// `out` if its command succeeded; otherwise panics showing it.
pub fn succeeded(what: &str, out: Output) -> Output {
    assert!(
        out.status.success(),
        "{what} failed: {}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}
