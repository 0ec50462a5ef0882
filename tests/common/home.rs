//! Where a suite's dataset lives: a local directory, or (`Home::s3`, in
//! `s3_home.rs`) a prefix of a fresh bucket on the test S3 server. Suites
//! that take a `Home` run on both.

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use super::cli::packfs_with_env;
use super::mount::{wait_until, Mounted};
use super::process::succeeded;

/// A dataset's location and what packfs needs to reach it.
pub struct Home {
    /// The location packfs is given: a directory or a URL.
    location: String,
    /// Added to packfs's environment (the S3 settings, for a bucket).
    env: Vec<(&'static str, String)>,
}

impl Home {
    /// The dataset at `location`, which packfs reaches with `env`.
    pub fn new(location: String, env: Vec<(&'static str, String)>) -> Home {
        Home { location, env }
    }

    /// A dataset in `dir/ds`.
    pub fn local(dir: &Path) -> Home {
        Home::new(dir.join("ds").to_str().unwrap().to_string(), Vec::new())
    }

    /// The location packfs is given.
    pub fn location(&self) -> &str {
        &self.location
    }

    /// `packfs ARGS`, with the S3 environment where needed.
    pub fn packfs(&self, args: &[&str]) -> Output {
        packfs_with_env(&self.env, args)
    }

    /// Like [`Home::packfs`]; panics with the output if it fails.
    pub fn packfs_ok(&self, args: &[&str]) -> Output {
        succeeded(&format!("packfs {args:?}"), self.packfs(args))
    }

    /// `packfs import SRC <home> --no-progress EXTRA…`.
    pub fn import(&self, src: &Path, extra: &[&str]) {
        let mut args = vec![
            "import",
            src.to_str().unwrap(),
            self.location(),
            "--no-progress",
        ];
        args.extend_from_slice(extra);
        self.packfs_ok(&args);
    }

    /// `packfs verify` must pass.
    pub fn verify(&self) {
        self.packfs_ok(&["verify", self.location()]);
    }

    /// A read-only mount.
    pub fn mount(&self, mountpoint: &Path, extra: &[&str]) -> Mounted {
        let mut args = vec!["--read-only"];
        args.extend_from_slice(extra);
        Mounted::mount_by(self.location(), mountpoint, &args, |a| {
            self.packfs_ok(a);
        })
    }

    /// A read-write mount spooling in `spool`.
    pub fn mount_rw(&self, mountpoint: &Path, spool: &Path, extra: &[&str]) -> Mounted {
        let mut args = vec!["--spool-dir", spool.to_str().unwrap()];
        args.extend_from_slice(extra);
        Mounted::mount_by(self.location(), mountpoint, &args, |a| {
            self.packfs_ok(a);
        })
    }
}

// Here, not in mount.rs: the client tests include mount.rs and crash no
// mount, and every helper a test binary includes must be used by it.
impl Mounted {
    /// Kills the daemon with SIGKILL, as a crash would, and waits for it
    /// to be gone; the dead mount stays until [`Mounted::unmount`].
    pub fn kill(&self) {
        let pid = self.pid.expect("daemon pid");
        // SAFETY: killing the daemon this test started.
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        wait_until("the daemon to die", Duration::from_secs(10), || {
            !Path::new(&format!("/proc/{pid}")).exists()
        });
    }
}
