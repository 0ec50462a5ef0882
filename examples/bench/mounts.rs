//! The filesystems measured: the plain directory, FUSE filesystems served
//! by a foreground process, and `packfs mount` daemons; each unmounted
//! when dropped, whatever happened.

use std::fs;
use std::io::{Read, Seek};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::data::path_str;
use crate::{progress, Result};

/// How long `packfs mount` may take to return.
const MOUNT_TIMEOUT: Duration = Duration::from_secs(120);
/// How long an unmounted daemon may take to exit.
const EXIT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a read-write daemon may take to commit at unmount.
const COMMIT_TIMEOUT: Duration = Duration::from_secs(300);

/// A `cargo` command (the one running this example, if any).
pub(crate) fn cargo() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

/// `release/packfs` next to this example's directory, rebuilt when it is
/// missing or older than this example (the library may have changed).
pub(crate) fn packfs_binary() -> Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let bin = exe
        .parent()
        .and_then(Path::parent)
        .ok_or("cannot locate the target directory")?
        .join("packfs");
    let modified = |p: &Path| fs::metadata(p).and_then(|m| m.modified()).ok();
    if modified(&bin).is_none_or(|b| modified(&exe).is_some_and(|e| b < e)) {
        progress("building the packfs binary (cargo build --release --bin packfs)");
        let status = cargo()
            .args(["build", "--release", "--bin", "packfs", "--manifest-path"])
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"))
            .status()?;
        if !status.success() {
            if !bin.exists() {
                return Err(format!("building the packfs binary failed ({status})").into());
            }
            progress("WARNING: rebuilding packfs failed; using the existing binary");
        }
    }
    Ok(bin)
}

/// A filesystem root being measured; dropping it unmounts.
pub(crate) trait Mounted {
    fn root(&self) -> &Path;
    /// Peak resident memory of the serving process, in KiB.
    fn peak_kib(&self) -> Option<u64> {
        None
    }
    /// The `/.packfs/stats` counters.
    fn stats(&self) -> Option<String> {
        None
    }
}

/// A plain directory.
pub(crate) struct Disk(pub PathBuf);

impl Mounted for Disk {
    fn root(&self) -> &Path {
        &self.0
    }
}

/// A FUSE filesystem served by a foreground process (fuse-ceiling,
/// squashfuse_ll); unmounted, then killed if it lingers, on drop.
pub(crate) struct FuseProcess {
    child: Child,
    mnt: PathBuf,
}

impl FuseProcess {
    /// Starts `command` (which serves `mnt` in the foreground) and waits
    /// until `mnt` shows up in the mount table.
    pub(crate) fn start(
        name: &str,
        mut command: Command,
        mnt: &Path,
        timeout: Duration,
    ) -> Result<FuseProcess> {
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .map_err(|e| format!("start {name}: {e}"))?;
        let mut process = FuseProcess {
            child,
            mnt: mnt.to_path_buf(),
        };
        let mut exited = None;
        let mounted = poll(timeout, || {
            exited = process.child.try_wait().ok().flatten();
            exited.is_some() || is_mounted(mnt).unwrap_or(false)
        });
        if let Some(status) = exited {
            return Err(format!("{name} exited before mounting ({status})").into());
        }
        if !mounted {
            return Err(format!("{name} did not mount within {timeout:?}").into());
        }
        Ok(process)
    }
}

impl Mounted for FuseProcess {
    fn root(&self) -> &Path {
        &self.mnt
    }
}

impl Drop for FuseProcess {
    fn drop(&mut self) {
        if is_mounted(&self.mnt).unwrap_or(true) {
            unmount(&self.mnt);
        }
        if !poll(EXIT_TIMEOUT, || !matches!(self.child.try_wait(), Ok(None))) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A `packfs mount` daemon; unmounted on drop.
pub(crate) struct Daemon {
    mnt: PathBuf,
    pid: Option<u32>,
    /// Wall time of the `packfs mount` command (it returns once mounted).
    pub mount_time: Duration,
}

impl Daemon {
    /// Runs `packfs mount` (which returns once the mount is ready) and
    /// finds the daemon it left behind. On any failure, including a mount
    /// that hangs past `MOUNT_TIMEOUT`, whatever was started is ended.
    /// Read-only: the mode a training loader should use (no open or
    /// release round trip per file).
    pub(crate) fn mount(bin: &Path, dataset: &Path, mnt: &Path) -> Result<Daemon> {
        Self::mount_with(bin, dataset, mnt, &["--read-only"])
    }

    pub(crate) fn mount_with(
        bin: &Path,
        dataset: &Path,
        mnt: &Path,
        args: &[&str],
    ) -> Result<Daemon> {
        let mut log = tempfile::tempfile()?;
        let start = Instant::now();
        let mut command = Command::new(bin)
            .arg("mount")
            .args(args)
            .arg(dataset)
            .arg(mnt)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log.try_clone()?)
            .spawn()?;
        let mut status = None;
        poll(MOUNT_TIMEOUT, || {
            status = command.try_wait().ok().flatten();
            status.is_some()
        });
        let mount_time = start.elapsed();
        if status.is_none() {
            let _ = command.kill();
            let _ = command.wait();
        }
        // Only the daemon is left now; the guard ends it whatever happens.
        let daemon = Daemon {
            mnt: mnt.to_path_buf(),
            pid: daemon_pid(mnt),
            mount_time,
        };
        match status {
            Some(s) if s.success() => {}
            Some(s) => {
                let mut message = String::new();
                log.rewind()?;
                log.read_to_string(&mut message)?;
                return Err(format!("packfs mount failed ({s}): {}", message.trim()).into());
            }
            None => {
                return Err(format!("packfs mount did not return within {MOUNT_TIMEOUT:?}").into())
            }
        }
        if daemon.pid.is_none() {
            return Err("cannot find the packfs daemon in /proc".into());
        }
        Ok(daemon)
    }

    /// Unmounts and waits for the daemon to exit (a read-write daemon
    /// commits what it spooled first); returns how long that took.
    pub(crate) fn unmount_and_wait(self) -> Result<Duration> {
        let start = Instant::now();
        unmount(&self.mnt);
        let pid = self.pid.ok_or("no daemon pid")?;
        if !poll(COMMIT_TIMEOUT, || !is_alive(pid)) {
            return Err(
                format!("daemon {pid} still running {COMMIT_TIMEOUT:?} after unmount").into(),
            );
        }
        Ok(start.elapsed())
    }

    /// (VmRSS, VmHWM) of the daemon, in KiB.
    pub(crate) fn memory_kib(&self) -> Result<(u64, u64)> {
        let pid = self.pid.ok_or("no daemon pid")?;
        let read = |field| proc_status_kib(pid, field).ok_or(format!("no {field} for pid {pid}"));
        Ok((read("VmRSS")?, read("VmHWM")?))
    }
}

impl Mounted for Daemon {
    fn root(&self) -> &Path {
        &self.mnt
    }

    fn peak_kib(&self) -> Option<u64> {
        self.memory_kib().ok().map(|(_, hwm)| hwm)
    }

    fn stats(&self) -> Option<String> {
        fs::read_to_string(self.mnt.join(".packfs/stats")).ok()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if is_mounted(&self.mnt).unwrap_or(true) {
            unmount(&self.mnt);
        }
        if let Some(pid) = self.pid {
            if !poll(EXIT_TIMEOUT, || !is_alive(pid)) {
                progress(format!(
                    "WARNING: packfs daemon {pid} did not exit; killing it"
                ));
                let _ = Command::new("kill")
                    .arg("-KILL")
                    .arg(pid.to_string())
                    .status();
            }
        }
    }
}

/// The value of counter `name` in `/.packfs/stats` text (`name value`
/// lines), if there is one.
pub(crate) fn counter(stats: &str, name: &str) -> Option<u64> {
    stats.lines().find_map(|line| {
        let mut words = line.split_whitespace();
        (words.next() == Some(name)).then(|| words.next()?.parse().ok())?
    })
}

/// Calls `done` every 20 ms until it returns true (then true) or `timeout`
/// has passed (then false).
fn poll(timeout: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if done() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(20));
    }
}

fn unmount(mnt: &Path) {
    let ok = |args: &str| {
        Command::new("fusermount3")
            .arg(args)
            .arg(mnt)
            .status()
            .is_ok_and(|s| s.success())
    };
    if !ok("-u") && !ok("-uz") {
        progress(format!("WARNING: could not unmount {}", mnt.display()));
    }
}

fn is_mounted(mnt: &Path) -> Result<bool> {
    let target = path_str(mnt)?.replace(' ', "\\040");
    Ok(fs::read_to_string("/proc/self/mounts")?
        .lines()
        .any(|line| line.split(' ').nth(1) == Some(target.as_str())))
}

/// The `packfs mount … MNT` process serving `mnt`.
fn daemon_pid(mnt: &Path) -> Option<u32> {
    let mnt = mnt.as_os_str().as_bytes();
    fs::read_dir("/proc").ok()?.flatten().find_map(|entry| {
        let pid = entry.file_name().to_str()?.parse().ok()?;
        let cmdline = fs::read(entry.path().join("cmdline")).ok()?;
        let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
        let is_daemon = args.first()?.ends_with(b"packfs")
            && args.get(1) == Some(&&b"mount"[..])
            && args.contains(&mnt);
        is_daemon.then_some(pid)
    })
}

fn proc_status_kib(pid: u32, field: &str) -> Option<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|line| {
        let value = line.strip_prefix(field)?.strip_prefix(':')?;
        value.trim().strip_suffix("kB")?.trim().parse().ok()
    })
}

/// Running, not a zombie waiting for its reaper.
fn is_alive(pid: u32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/status")).is_ok_and(|status| {
        status
            .lines()
            .find_map(|l| l.strip_prefix("State:"))
            .is_some_and(|state| !state.trim_start().starts_with('Z'))
    })
}
