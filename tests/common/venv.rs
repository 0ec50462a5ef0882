//! Programs `.ci/run` installs into Python virtual environments in the
//! repository: moto's S3 server, and the Pythons whose packages check
//! packfs.

use std::path::PathBuf;

/// A program tests need: the path in environment variable `var`, else
/// `default` in the repository (where `.ci/run` installs it). Fails the
/// test, never skips it, if the program is missing.
pub fn required_program(var: &str, default: &str, needed_for: &str) -> PathBuf {
    let path = std::env::var_os(var)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(default));
    assert!(
        path.exists(),
        "{} is missing: {needed_for} (`bash .ci/run` installs it, or set {var})",
        path.display()
    );
    path
}
