//! `/run/mount/utab`, libmount's own table of mounts: an entry there is
//! what makes umount(8) run `/sbin/umount.fuse.packfs` for a mount.
//!
//! umount(8) takes a mount's type from statfs(2) unless libmount knows
//! more of the mount: for a FUSE mount that is plain `fuse`, so it calls
//! umount(2) itself and returns before the daemon has committed anything.
//! With an entry in utab it reads the type from mountinfo instead,
//! `fuse.packfs`, and runs the helper, which commits first (`packfs
//! umount`). Entries are written as libmount writes them (under an
//! exclusive `flock` of `utab.lock`, replaced whole by a rename), and only
//! by root, whose mounts umount(8) unmounts.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use crate::mountpoint;

const DIR: &str = "/run/mount";

/// A mount's line in utab, removed by [`UtabEntry::remove`].
#[derive(Debug)]
pub(crate) struct UtabEntry {
    dir: PathBuf,
    target: PathBuf,
}

impl UtabEntry {
    /// Adds the line of the mount of `source` at `target` (canonical), if
    /// this process is root and libmount keeps a utab here.
    pub(crate) fn add(source: &str, target: &Path) -> std::io::Result<Option<UtabEntry>> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 || !Path::new(DIR).is_dir() {
            return Ok(None);
        }
        Self::add_in(Path::new(DIR), source, target).map(Some)
    }

    /// Adds the line to the utab in `dir`, and drops the lines of packfs
    /// mounts that are gone (a daemon killed before it could remove its
    /// own).
    fn add_in(dir: &Path, source: &str, target: &Path) -> std::io::Result<UtabEntry> {
        let entry = UtabEntry {
            dir: dir.to_path_buf(),
            target: target.to_path_buf(),
        };
        let line = format!(
            "SRC={} TARGET={} ROOT=/ OPTS=x-packfs\n",
            mangle(source),
            entry.mangled_target()
        );
        let mounted: Vec<String> = mountpoint::mounts()
            .iter()
            .map(|m| format!("TARGET={}", mangle(&m.mount_point.to_string_lossy())))
            .collect();
        let gone = |line: &str| {
            line.contains(" OPTS=x-packfs")
                && !line
                    .split(' ')
                    .any(|field| mounted.iter().any(|m| m == field))
        };
        entry.rewrite(|lines| {
            lines.retain(|l| !entry.is_ours(l) && !gone(l));
            lines.push(line);
        })?;
        Ok(entry)
    }

    /// Removes the line (umount(8) may have removed it already).
    pub(crate) fn remove(self) -> std::io::Result<()> {
        self.rewrite(|lines| lines.retain(|l| !self.is_ours(l)))
    }

    fn mangled_target(&self) -> String {
        mangle(&self.target.to_string_lossy())
    }

    fn is_ours(&self, line: &str) -> bool {
        let target = format!("TARGET={}", self.mangled_target());
        line.split(' ').any(|field| field == target)
    }

    /// Rewrites utab through `change` of its lines, holding libmount's lock.
    fn rewrite(&self, change: impl FnOnce(&mut Vec<String>)) -> std::io::Result<()> {
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(self.dir.join("utab.lock"))?;
        // SAFETY: flock on a descriptor this function owns; released when
        // `lock` is closed.
        if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let path = self.dir.join("utab");
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(e),
        };
        let mut lines: Vec<String> = text.lines().map(|l| format!("{l}\n")).collect();
        change(&mut lines);
        let changed = lines.concat();
        if changed == text {
            return Ok(());
        }
        let tmp = self.dir.join(format!("utab.packfs.{}", std::process::id()));
        let mut file = File::create(&tmp)?;
        file.write_all(changed.as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&tmp, &path)
    }
}

/// libmount's escaping of a utab field: space, tab, newline and backslash
/// as octal.
fn mangle(field: &str) -> String {
    let mut out = String::with_capacity(field.len());
    for c in field.chars() {
        match c {
            ' ' | '\t' | '\n' | '\\' => out.push_str(&format!("\\{:03o}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_added_once_and_removed_leaving_the_others_but_the_dead() {
        let dir = tempfile::tempdir().unwrap();
        let other = "SRC=/dev/sdb1 TARGET=/media/usb ROOT=/ OPTS=uhelper=udisks2\n";
        // The line of a packfs mount whose daemon died: dropped.
        let dead = "SRC=packfs:/old TARGET=/nowhere/mounted ROOT=/ OPTS=x-packfs\n";
        std::fs::write(dir.path().join("utab"), format!("{other}{dead}")).unwrap();
        let target = Path::new("/mnt/my data");
        UtabEntry::add_in(dir.path(), "packfs:/data/ds", target).unwrap();
        let entry = UtabEntry::add_in(dir.path(), "packfs:/data/ds", target).unwrap();
        let text = std::fs::read_to_string(dir.path().join("utab")).unwrap();
        assert_eq!(
            text,
            format!("{other}SRC=packfs:/data/ds TARGET=/mnt/my\\040data ROOT=/ OPTS=x-packfs\n")
        );
        entry.remove().unwrap();
        let text = std::fs::read_to_string(dir.path().join("utab")).unwrap();
        assert_eq!(text, other);
    }
}
