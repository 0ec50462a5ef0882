//! The rules every command that reads a local source tree shares (import,
//! bundle create): which entries are read (`list_dir`), that the root is
//! a directory (`check_root`), and how problems are reported
//! (`problems_report`).

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use packfs_format::Special;
use thiserror::Error;

/// How many source problems are listed before the rest are summarized.
const MAX_REPORTED: usize = 20;

/// A source directory or entry that could not be listed or examined.
#[derive(Debug, Error)]
#[error("{op} {path}: {source}")]
#[non_exhaustive]
pub struct SourceIoError {
    pub op: &'static str,
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

/// What a listing makes of a symbolic link and of files that are no
/// regular ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Links {
    /// A link to a file is read as that file; a link to a directory, and
    /// anything but regular files and directories, is a problem.
    Follow,
    /// Links are entries of their own (their target as written, followed
    /// never), and so are FIFOs, sockets and device nodes.
    Keep,
}

/// An entry of a source directory that packfs reads: a directory (never
/// a symbolic link), a regular file (with [`Links::Follow`], a link to
/// one: `meta` is the target's), or with [`Links::Keep`] a link, FIFO,
/// socket or device node (`special`; `meta` is its own).
pub(crate) struct SourceEntry {
    pub name: String,
    pub path: PathBuf,
    pub meta: fs::Metadata,
    pub special: Option<Special>,
    /// With [`Links::Keep`], a regular file of several names (hard
    /// links): its device and inode, the same for each name.
    pub hard_link: Option<(u64, u64)>,
}

/// The entries of `dir` packfs reads, in no particular order. Entries it
/// refuses are described, with their paths, in `problems`: names that are
/// not UTF-8 and, with [`Links::Follow`], symbolic links to directories
/// (not followed: they could loop) and anything but regular files and
/// directories.
pub(crate) fn list_dir(
    dir: &Path,
    links: Links,
    problems: &mut Vec<String>,
) -> Result<Vec<SourceEntry>, SourceIoError> {
    let listing = |source| SourceIoError {
        op: "list",
        path: dir.to_path_buf(),
        source,
    };
    let mut listed = Vec::new();
    for entry in fs::read_dir(dir).map_err(listing)? {
        let entry = entry.map_err(listing)?;
        let path = entry.path();
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            problems.push(format!("{}: file name is not valid UTF-8", path.display()));
            continue;
        };
        let is_link = entry.file_type().is_ok_and(|t| t.is_symlink());
        // Anything but a followed link is examined relative to its
        // directory: no lookup of the whole path per file (~3% of an
        // import's CPU).
        let meta = match is_link && links == Links::Follow {
            true => fs::metadata(&path),
            false => entry.metadata(),
        };
        let meta = meta.map_err(|source| SourceIoError {
            op: "stat",
            path: path.clone(),
            source,
        })?;
        let special = match links {
            Links::Keep => special_of(&meta),
            Links::Follow => None,
        };
        let hard_link = (links == Links::Keep && meta.is_file() && meta.nlink() > 1)
            .then(|| (meta.dev(), meta.ino()));
        if meta.is_dir() && is_link {
            problems.push(format!(
                "{}: symbolic link to a directory is not followed",
                path.display()
            ));
        } else if meta.is_dir() || meta.is_file() || special.is_some() {
            listed.push(SourceEntry {
                name,
                path,
                meta,
                special,
                hard_link,
            });
        } else {
            problems.push(format!(
                "{}: not a regular file or directory",
                path.display()
            ));
        }
    }
    Ok(listed)
}

/// What a file of type `meta` (not followed) is if no regular file or
/// directory.
fn special_of(meta: &fs::Metadata) -> Option<Special> {
    match meta.file_type().is_symlink() {
        true => Some(Special::Symlink),
        false => Special::of_mode(meta.mode(), meta.rdev()),
    }
}

/// Fails unless `src`, the root of a source tree, is a directory.
pub(crate) fn check_root(src: &Path) -> Result<(), SourceIoError> {
    let fail = |source| SourceIoError {
        op: "read source",
        path: src.to_path_buf(),
        source,
    };
    match fs::metadata(src) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(fail(std::io::ErrorKind::NotADirectory.into())),
        Err(source) => Err(fail(source)),
    }
}

/// What to tell the user of `problems` found in a source tree (`None`
/// when there are none): the first few, how many more, and that nothing
/// was written.
pub(crate) fn problems_report(mut problems: Vec<String>) -> Option<Vec<String>> {
    if problems.is_empty() {
        return None;
    }
    let total = problems.len();
    problems.truncate(MAX_REPORTED);
    if total > MAX_REPORTED {
        problems.push(format!("… and {} more problems", total - MAX_REPORTED));
    }
    problems.push("nothing was written".into());
    Some(problems)
}
