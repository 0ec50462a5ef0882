//! Where a mount may go: checks of the mountpoint before anything is
//! mounted or locked, and the kernel's table of mounts
//! (`/proc/self/mountinfo`).

use std::path::{Path, PathBuf};

/// One line of `/proc/self/mountinfo`.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct MountEntry {
    /// `major:minor` of the mounted filesystem.
    pub(crate) device: String,
    pub(crate) mount_point: PathBuf,
    /// e.g. `fuse.packfs`, `ext4`.
    pub(crate) fs_type: String,
    /// e.g. `packfs:/data/ds`.
    pub(crate) source: String,
}

impl MountEntry {
    fn is_fuse(&self) -> bool {
        self.fs_type == "fuse" || self.fs_type == "fuseblk" || self.fs_type.starts_with("fuse.")
    }
}

/// The mounts of this process's namespace, in mount order (a later entry
/// for a path covers an earlier one); empty if the table cannot be read.
pub(crate) fn mounts() -> Vec<MountEntry> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .map(|text| parse_mountinfo(&text))
        .unwrap_or_default()
}

/// Fields: `id parent major:minor root mountpoint options [tags…] - type
/// source super-options`; whitespace and backslashes in paths are octal
/// escapes (`\040`).
fn parse_mountinfo(text: &str) -> Vec<MountEntry> {
    text.lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let left: Vec<&str> = left.split(' ').collect();
            let mut right = right.split(' ');
            Some(MountEntry {
                device: left.get(2)?.to_string(),
                mount_point: PathBuf::from(unescape(left.get(4)?)),
                fs_type: right.next()?.to_string(),
                source: unescape(right.next()?),
            })
        })
        .collect()
}

/// Undoes the kernel's `\ooo` escapes of mountinfo fields.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes.get(i + 1..i + 4).and_then(|d| {
            let d = std::str::from_utf8(d).ok()?;
            u8::from_str_radix(d, 8).ok()
        });
        match (bytes[i], octal) {
            (b'\\', Some(byte)) => {
                out.push(byte);
                i += 4;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Why a directory cannot take a mount.
#[derive(Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refusal {
    /// A FUSE filesystem is mounted and served here already.
    Mounted {
        source: String,
        fs_type: String,
    },
    /// A FUSE filesystem whose daemon is gone is still attached (ENOTCONN).
    DeadMount,
    NotADirectory,
    /// Entries would be hidden by the mount (accepted where a non-empty
    /// mountpoint is allowed).
    NotEmpty {
        example: String,
    },
    Io(String),
}

impl Refusal {
    /// The message, for the mountpoint `path`.
    pub fn explain(&self, path: &Path) -> String {
        let path = path.display();
        match self {
            Refusal::Mounted { source, fs_type } => format!(
                "is already a mount point ({source}, {fs_type}); unmount it first with \
                 `fusermount3 -u {path}`"
            ),
            Refusal::DeadMount => format!(
                "a dead FUSE mount is still attached here (its daemon is gone); run \
                 `fusermount3 -u {path}` on it first"
            ),
            Refusal::NotADirectory => "not a directory".into(),
            Refusal::NotEmpty { example } => format!(
                "is not empty (it holds {example:?}, …), and the mount would hide what it \
                 holds; use an empty directory, or allow a non-empty mountpoint"
            ),
            Refusal::Io(detail) => detail.clone(),
        }
    }
}

/// The canonical path of a directory that can take a mount now, checked
/// before anything is mounted or locked: no FUSE filesystem live or dead
/// on it, a directory, and empty unless `allow_non_empty`.
pub(crate) fn check(path: &Path, allow_non_empty: bool) -> Result<PathBuf, (PathBuf, Refusal)> {
    let io = |path: &Path, e: std::io::Error| {
        let refusal = match is_dead(&e) {
            true => Refusal::DeadMount,
            false => Refusal::Io(e.to_string()),
        };
        (path.to_path_buf(), refusal)
    };
    // By the path as given first: resolving it may already stat a mount.
    let absolute = std::path::absolute(path).map_err(|e| io(path, e))?;
    let table = mounts();
    fuse_mount_at(&table, &absolute)?;
    let canonical = absolute.canonicalize().map_err(|e| io(&absolute, e))?;
    fuse_mount_at(&table, &canonical)?;
    let fail = |refusal| (canonical.clone(), refusal);
    let meta = std::fs::metadata(&canonical).map_err(|e| io(&canonical, e))?;
    if !meta.is_dir() {
        return Err(fail(Refusal::NotADirectory));
    }
    if !allow_non_empty {
        let mut entries = std::fs::read_dir(&canonical).map_err(|e| io(&canonical, e))?;
        if let Some(entry) = entries.next() {
            let entry = entry.map_err(|e| io(&canonical, e))?;
            let example = entry.file_name().to_string_lossy().into_owned();
            return Err(fail(Refusal::NotEmpty { example }));
        }
    }
    Ok(canonical)
}

/// Fails if a FUSE filesystem is mounted at `path`: live, or dead (its
/// daemon gone, so the kernel answers ENOTCONN).
fn fuse_mount_at(table: &[MountEntry], path: &Path) -> Result<(), (PathBuf, Refusal)> {
    let Some(mount) = table.iter().rev().find(|m| m.mount_point == path) else {
        return Ok(());
    };
    if !mount.is_fuse() {
        return Ok(());
    }
    let refusal = match statfs(path) {
        Err(e) if is_dead(&e) => Refusal::DeadMount,
        _ => Refusal::Mounted {
            source: mount.source.clone(),
            fs_type: mount.fs_type.clone(),
        },
    };
    Err((path.to_path_buf(), refusal))
}

/// `statfs(2)` of `path`: a request a FUSE mount's daemon always answers
/// itself (the kernel caches attributes, never statfs), so it tells a
/// live mount from a dead one whatever `stat` would find in the cache.
pub(crate) fn statfs(path: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(path.as_os_str().as_bytes())?;
    let mut buf = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `path` is NUL-terminated; statvfs writes `buf` only.
    match unsafe { libc::statvfs(path.as_ptr(), buf.as_mut_ptr()) } {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

/// Unmounts `path`: umount(2) where this process may (root), else
/// `fusermount3 -u`, which lets the user who mounted it. `lazy` detaches
/// it while files in it are open. A busy mount is `EBUSY` either way.
pub(crate) fn unmount(path: &Path, lazy: bool) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes())?;
    let flags = if lazy { libc::MNT_DETACH } else { 0 };
    // SAFETY: umount2 with a NUL-terminated path.
    if unsafe { libc::umount2(c_path.as_ptr(), flags) } == 0 {
        return Ok(());
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() != Some(libc::EPERM) {
        return Err(e);
    }
    let out = std::process::Command::new("fusermount3")
        .arg(if lazy { "-uz" } else { "-u" })
        .arg(path)
        .output()
        .map_err(|e| {
            std::io::Error::other(format!(
                "umount(2) is not permitted and fusermount3 cannot run: {e}"
            ))
        })?;
    let said = String::from_utf8_lossy(&out.stderr);
    match out.status.success() {
        true => Ok(()),
        false if said.contains("busy") => Err(std::io::Error::from_raw_os_error(libc::EBUSY)),
        false => Err(std::io::Error::other(format!(
            "fusermount3: {}",
            said.trim()
        ))),
    }
}

/// Whether `e` is what a FUSE mount whose daemon is gone answers:
/// ENOTCONN, or ECONNABORTED while the kernel is still aborting it.
fn is_dead(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOTCONN | libc::ECONNABORTED))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_lines_parse_with_escapes_and_optional_fields() {
        let text = "\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
97 22 0:52 / /mnt/a\\040b rw,nosuid,nodev shared:50 master:3 - fuse.packfs packfs:/data/ds rw,user_id=0
bad line without separator
";
        let mounts = parse_mountinfo(text);
        assert_eq!(mounts.len(), 2);
        assert_eq!(
            mounts[1],
            MountEntry {
                device: "0:52".into(),
                mount_point: PathBuf::from("/mnt/a b"),
                fs_type: "fuse.packfs".into(),
                source: "packfs:/data/ds".into(),
            }
        );
        assert!(mounts[1].is_fuse() && !mounts[0].is_fuse());
        assert_eq!(unescape("a\\134b\\011"), "a\\b\t");
    }

    #[test]
    fn a_non_empty_directory_is_refused_unless_allowed() {
        let dir = tempfile::tempdir().unwrap();
        assert!(check(dir.path(), false).is_ok());
        std::fs::write(dir.path().join("kept"), b"x").unwrap();
        let (_, refusal) = check(dir.path(), false).unwrap_err();
        assert_eq!(
            refusal,
            Refusal::NotEmpty {
                example: "kept".into()
            }
        );
        assert!(refusal
            .explain(dir.path())
            .ends_with("use an empty directory, or allow a non-empty mountpoint"));
        assert!(check(dir.path(), true).is_ok());
        let file = dir.path().join("kept");
        assert_eq!(check(&file, true).unwrap_err().1, Refusal::NotADirectory);
    }
}
