//! The rules every command that reads a local source tree shares (import,
//! bundle create): which entries are read (`list_dir`), that the root is
//! a directory (`check_root`), and how problems are reported
//! (`problems_report`).

use std::fs;
use std::path::{Path, PathBuf};

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

/// An entry of a source directory that packfs reads: a directory (never
/// a symbolic link) or a regular file (a symbolic link to one is followed:
/// `meta` is the target's).
pub(crate) struct SourceEntry {
    pub name: String,
    pub path: PathBuf,
    pub meta: fs::Metadata,
}

/// The entries of `dir` packfs reads, in no particular order. Entries it
/// refuses are described, with their paths, in `problems`: names that are
/// not UTF-8, symbolic links to directories (not followed: they could
/// loop), and anything but regular files and directories.
pub(crate) fn list_dir(
    dir: &Path,
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
        // Anything but a link is examined relative to its directory: no
        // lookup of the whole path per file (~3% of an import's CPU).
        let meta = match is_link {
            true => fs::metadata(&path),
            false => entry.metadata(),
        };
        let meta = meta.map_err(|source| SourceIoError {
            op: "stat",
            path: path.clone(),
            source,
        })?;
        if meta.is_dir() && is_link {
            problems.push(format!(
                "{}: symbolic link to a directory is not followed",
                path.display()
            ));
        } else if meta.is_dir() || meta.is_file() {
            listed.push(SourceEntry { name, path, meta });
        } else {
            problems.push(format!(
                "{}: not a regular file or directory",
                path.display()
            ));
        }
    }
    Ok(listed)
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
