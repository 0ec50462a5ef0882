//! Helpers shared by the FUSE integration tests: generating source trees,
//! running the packfs binary, and mounts that unmount when dropped.

#![allow(dead_code)]

pub mod core;
pub mod s3;
pub mod store;

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

pub const PACKFS: &str = env!("CARGO_BIN_EXE_packfs");

/// The permission bits of `path`.
pub fn mode_of(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

/// Runs packfs with `args`; panics with its output if it fails.
pub fn packfs_ok(args: &[&str]) -> Output {
    run_ok(PACKFS, args)
}

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

/// `diff -r a b` must find no difference.
pub fn diff_r(a: &Path, b: &Path) {
    run_ok("diff", &["-r", a.to_str().unwrap(), b.to_str().unwrap()]);
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

pub fn packfs(args: &[&str]) -> Output {
    Command::new(PACKFS)
        .args(args)
        .output()
        .expect("run packfs")
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

/// A small deterministic PRNG (xorshift64*) so generated trees are stable.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.max(1))
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        let mut v = Vec::with_capacity(len + 8);
        while v.len() < len {
            v.extend_from_slice(&self.next().to_le_bytes());
        }
        v.truncate(len);
        v
    }
}

/// Writes a file, creating its parent directories.
pub fn write_file(path: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

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

/// Fails loudly (never skips) when this machine cannot run FUSE tests.
pub fn require_fuse() {
    assert!(
        Path::new("/dev/fuse").exists(),
        "/dev/fuse is missing: FUSE integration tests cannot run (install fuse3, load the fuse module)"
    );
}

/// A port on 127.0.0.1 nothing listens on right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
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

/// Where a test's dataset lives: a local directory, or a prefix of a fresh
/// bucket on the test S3 server. Suites that take a `Home` run on both.
pub enum Home {
    Local(PathBuf),
    S3 {
        s3: &'static s3::S3,
        bucket: String,
        url: String,
    },
}

impl Home {
    /// A dataset in `dir/ds`.
    pub fn local(dir: &Path) -> Home {
        Home::Local(dir.join("ds"))
    }

    /// A dataset at `s3://<new bucket>/ds`.
    pub fn s3() -> Home {
        let s3 = s3::S3::get();
        let bucket = s3.bucket();
        let url = format!("s3://{bucket}/ds");
        Home::S3 { s3, bucket, url }
    }

    /// The location packfs is given.
    pub fn location(&self) -> &str {
        match self {
            Home::Local(dir) => dir.to_str().unwrap(),
            Home::S3 { url, .. } => url,
        }
    }

    /// `packfs ARGS`, with the S3 environment where needed.
    pub fn packfs(&self, args: &[&str]) -> Output {
        match self {
            Home::Local(_) => packfs(args),
            Home::S3 { s3, .. } => s3.packfs(args),
        }
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

    /// The text `packfs log` prints.
    pub fn log(&self) -> String {
        String::from_utf8(self.packfs_ok(&["log", self.location()]).stdout).unwrap()
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

    /// How many data objects (packs, whole items, chunks) modality
    /// `<timeline>/<modality>` has in the store.
    pub fn data_objects(&self, timeline: &str, modality: &str) -> usize {
        match self {
            Home::Local(dir) => std::fs::read_dir(dir.join(timeline).join(modality).join("0"))
                .map_or(0, |d| d.count()),
            Home::S3 { s3, bucket, .. } => {
                use futures::TryStreamExt;
                use object_store::ObjectStore;
                let client = s3.client(bucket);
                let prefix = object_store::path::Path::from(format!("ds/{timeline}/{modality}/0"));
                let runtime = tokio::runtime::Runtime::new().unwrap();
                let listed: Vec<_> = runtime
                    .block_on(client.list(Some(&prefix)).try_collect())
                    .unwrap();
                listed.len()
            }
        }
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

    /// A mount of the dataset at `url` on the test S3 server.
    pub fn on_s3(s3: &s3::S3, url: &str, mountpoint: &Path, extra: &[&str]) -> Mounted {
        Self::mount_by(url, mountpoint, extra, |args| {
            s3.packfs_ok(args);
        })
    }

    fn mount_by(
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

impl Drop for Mounted {
    fn drop(&mut self) {
        self.unmount();
    }
}

/// Every directory (relative, with its sorted entry names) and every file
/// (relative path) below `root`.
pub fn walk(root: &Path) -> (Vec<(PathBuf, Vec<String>)>, Vec<PathBuf>) {
    let mut dirs = Vec::new();
    let mut files = Vec::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(root.join(&rel)).unwrap() {
            let entry = entry.unwrap();
            let name = entry.file_name().into_string().unwrap();
            let child = rel.join(&name);
            if entry.file_type().unwrap().is_dir() {
                stack.push(child);
            } else {
                files.push(child);
            }
            names.push(name);
        }
        names.sort();
        dirs.push((rel, names));
    }
    dirs.sort();
    files.sort();
    (dirs, files)
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

/// What std::fs shows of a directory or file.
#[derive(Debug, PartialEq)]
pub struct FsNode {
    pub mode: u32,
    /// 0 for directories.
    pub size: u64,
    /// Seconds and nanoseconds; 0 for directories.
    pub mtime: (i64, i64),
    /// `None` for directories.
    pub bytes: Option<Vec<u8>>,
}

/// Every directory and file under `root`, by relative path (directories
/// with their mode only).
pub fn fs_snapshot(root: &Path) -> BTreeMap<String, FsNode> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let rel = path.strip_prefix(root).unwrap().display().to_string();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let node = match meta.is_dir() {
                true => FsNode {
                    mode: meta.mode() & 0o7777,
                    size: 0,
                    mtime: (0, 0),
                    bytes: None,
                },
                false => FsNode {
                    mode: meta.mode() & 0o7777,
                    size: meta.len(),
                    mtime: (meta.mtime(), meta.mtime_nsec()),
                    bytes: Some(std::fs::read(&path).unwrap()),
                },
            };
            if meta.is_dir() {
                stack.push(path);
            }
            out.insert(rel, node);
        }
    }
    out
}
