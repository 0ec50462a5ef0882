//! The read references built or found here: fuse-ceiling (a FUSE
//! filesystem that serves a tree from RAM and does nothing else: the FUSE
//! speed limit of the machine), `squashfuse_ll` over a squashfs image,
//! and a tmpfs copy (a page cache of 4 KiB pages, like FUSE's). Each is
//! `Err` with the reason when it cannot be had, and its column is left
//! out. The write ceiling is `write_ceiling.rs`.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::data::BIG_ITEM;
use crate::mounts::{cargo, FuseProcess};
use crate::{progress, Result};

/// Threads fuse-ceiling serves with (its README's calibration).
pub(crate) const CEILING_THREADS: &str = "4";
/// How long fuse-ceiling may take to load the tree and mount.
const CEILING_START_TIMEOUT: Duration = Duration::from_secs(120);
/// How long squashfuse_ll may take to mount.
const SQUASHFUSE_START_TIMEOUT: Duration = Duration::from_secs(60);

/// Builds fuse-ceiling if `../shared/tools/fuse-ceiling` exists; `Err` says
/// why its column is missing.
pub(crate) fn fuse_ceiling_binary() -> std::result::Result<PathBuf, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = root.join("../shared/tools/fuse-ceiling/Cargo.toml");
    if !manifest.exists() {
        return Err(format!("{} does not exist", manifest.display()));
    }
    let target = root.join("target/fuse-ceiling");
    progress(format!("building fuse-ceiling into {}", target.display()));
    let status = cargo()
        .args(["build", "--release", "--manifest-path"])
        .arg(&manifest)
        .arg("--target-dir")
        .arg(&target)
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !status.success() {
        return Err(format!("building fuse-ceiling failed ({status})"));
    }
    Ok(target.join("release/fuse-ceiling"))
}

impl FuseProcess {
    /// fuse-ceiling serving the tree `src` from RAM.
    pub(crate) fn ceiling(bin: &Path, src: &Path, mnt: &Path) -> Result<FuseProcess> {
        let mut command = Command::new(bin);
        command.arg(src).arg(mnt).env("N_THREADS", CEILING_THREADS);
        Self::start("fuse-ceiling", command, mnt, CEILING_START_TIMEOUT)
    }

    /// `squashfuse_ll -f IMAGE MNT`.
    pub(crate) fn squashfuse(bin: &Path, image: &Path, mnt: &Path) -> Result<FuseProcess> {
        let mut command = Command::new(bin);
        command.arg("-f").arg(image).arg(mnt);
        Self::start("squashfuse_ll", command, mnt, SQUASHFUSE_START_TIMEOUT)
    }
}

/// `name` on `$PATH` (or in /usr/sbin, /sbin, where Debian may put it).
fn find_tool(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/sbin".into()])
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// `mksquashfs TREE IMAGE -noI -noD -noF -noX` (nothing compressed) and the
/// `squashfuse_ll` binary; `Err` says why the squashfuse_ll column is
/// missing and how to get it.
pub(crate) fn squash_image(tree: &Path, image: &Path) -> std::result::Result<PathBuf, String> {
    let install = "install the Debian packages squashfuse and squashfs-tools \
                   (apt-get install -y squashfuse squashfs-tools)";
    let squashfuse = find_tool("squashfuse_ll")
        .ok_or_else(|| format!("squashfuse_ll is not installed: {install}"))?;
    let mksquashfs =
        find_tool("mksquashfs").ok_or_else(|| format!("mksquashfs is not installed: {install}"))?;
    progress(format!(
        "mksquashfs of {} into {}",
        tree.display(),
        image.display()
    ));
    let status = Command::new(mksquashfs)
        .arg(tree)
        .arg(image)
        .args(["-noI", "-noD", "-noF", "-noX", "-no-progress"])
        .stdout(Stdio::null())
        .status()
        .map_err(|e| format!("cannot run mksquashfs: {e}"))?;
    if !status.success() {
        return Err(format!("mksquashfs failed ({status})"));
    }
    Ok(squashfuse)
}

/// The big item copied into tmpfs (`/dev/shm`). On kernel 6.18 tmpfs, like
/// FUSE, caches a file in 4 KiB pages, while ext4 uses large folios: a
/// second pass there is the best any FUSE file's page cache can do here,
/// whatever the daemon. `Err` says why there is no copy.
pub(crate) fn small_page_copy(src: &Path) -> std::result::Result<tempfile::TempDir, String> {
    let copy = || -> Result<tempfile::TempDir> {
        let dir = tempfile::Builder::new()
            .prefix("packfs-bench-")
            .tempdir_in("/dev/shm")?;
        let dest = dir.path().join(BIG_ITEM);
        fs::create_dir_all(dest.parent().expect("BIG_ITEM has a directory"))?;
        fs::copy(src.join(BIG_ITEM), &dest)?;
        Ok(dir)
    };
    copy().map_err(|e| format!("no tmpfs copy of the big item: {e}"))
}
