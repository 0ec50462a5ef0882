//! FUSE mounts made by the `packfs` binary, and what they show.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::cli::packfs_ok;
use super::process::run_ok;

/// Fails loudly (never skips) when this machine cannot run FUSE tests.
pub fn require_fuse() {
    assert!(
        Path::new("/dev/fuse").exists(),
        "/dev/fuse is missing: FUSE integration tests cannot run (install fuse3, load the fuse module)"
    );
}

/// Whether `path` is a mount point right now.
pub fn is_mounted(path: &Path) -> bool {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    let target = path.to_str().unwrap().replace(' ', "\\040");
    mounts
        .lines()
        .any(|l| l.split(' ').nth(1) == Some(target.as_str()))
}

pub fn wait_until(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A mounted dataset; unmounted on drop even if the test panics.
pub struct Mounted {
    pub path: PathBuf,
    /// The daemon serving it.
    pub pid: Option<u32>,
}

impl Mounted {
    /// `packfs mount --read-only` in its default (daemonizing) mode:
    /// returns when ready.
    pub fn new(dataset: &Path, mountpoint: &Path, extra: &[&str]) -> Mounted {
        let mut args = vec!["--read-only"];
        args.extend_from_slice(extra);
        Self::mount(dataset, mountpoint, &args)
    }

    /// A read-write mount spooling in `spool`.
    pub fn writable(dataset: &Path, mountpoint: &Path, spool: &Path, extra: &[&str]) -> Mounted {
        let mut args = vec!["--spool-dir", spool.to_str().unwrap()];
        args.extend_from_slice(extra);
        Self::mount(dataset, mountpoint, &args)
    }

    /// A read-write mount on `dir/mnt`, spooling in `dir/spool`.
    pub fn writable_in(dir: &Path, dataset: &Path, extra: &[&str]) -> Mounted {
        Self::writable(dataset, &dir.join("mnt"), &dir.join("spool"), extra)
    }

    fn mount(dataset: &Path, mountpoint: &Path, extra: &[&str]) -> Mounted {
        Self::mount_by(dataset.to_str().unwrap(), mountpoint, extra, |args| {
            packfs_ok(args);
        })
    }

    /// `packfs mount DATASET MOUNTPOINT EXTRA…` run by `run`; the mount once
    /// it is live.
    pub fn mount_by(
        dataset: &str,
        mountpoint: &Path,
        extra: &[&str],
        run: impl FnOnce(&[&str]),
    ) -> Mounted {
        std::fs::create_dir_all(mountpoint).unwrap();
        let mut args = vec!["mount", dataset, mountpoint.to_str().unwrap()];
        args.extend_from_slice(extra);
        run(&args);
        let path = mountpoint.canonicalize().unwrap();
        assert!(
            is_mounted(&path),
            "packfs mount returned but {path:?} is not mounted"
        );
        let pid = daemon_pid(&path);
        Mounted { path, pid }
    }

    /// Unmounts and waits for the daemon to exit (a read-write daemon
    /// commits what is still spooled first).
    pub fn unmount(&self) {
        if is_mounted(&self.path) {
            let status = Command::new("fusermount3")
                .arg("-u")
                .arg(&self.path)
                .status()
                .unwrap();
            if !status.success() {
                let _ = Command::new("umount").arg("-l").arg(&self.path).status();
            }
        }
        wait_until("unmount", Duration::from_secs(10), || {
            !is_mounted(&self.path)
        });
        if let Some(pid) = self.pid {
            wait_until("the daemon to exit", Duration::from_secs(60), || {
                !Path::new(&format!("/proc/{pid}")).exists()
            });
        }
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        self.unmount();
    }
}

/// The `packfs mount` daemon serving `mnt`.
pub fn daemon_pid(mnt: &Path) -> Option<u32> {
    use std::os::unix::ffi::OsStrExt;
    let mnt = mnt.as_os_str().as_bytes();
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .find_map(|entry| {
            let pid = entry.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
            let is_daemon = args.first()?.ends_with(b"packfs")
                && args.get(1) == Some(&&b"mount"[..])
                && args.iter().any(|a| {
                    Path::new(std::ffi::OsStr::from_bytes(a))
                        .canonicalize()
                        .ok()
                        .as_deref()
                        == Some(Path::new(std::ffi::OsStr::from_bytes(mnt)))
                });
            is_daemon.then_some(pid)
        })
}

/// `diff -r a b` must find no difference.
pub fn diff_r(a: &Path, b: &Path) {
    run_ok("diff", &["-r", a.to_str().unwrap(), b.to_str().unwrap()]);
}

/// A counter of a mount's `.packfs/stats`.
pub fn stat_counter(mnt: &Path, name: &str) -> u64 {
    let stats = std::fs::read_to_string(mnt.join(".packfs/stats")).unwrap();
    let line = stats
        .lines()
        .find(|l| l.starts_with(&format!("{name} ")))
        .unwrap_or_else(|| panic!("no {name} in {stats}"));
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}
