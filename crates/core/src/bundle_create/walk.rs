//! The source tree of a bundle: every directory and file below SRC, in
//! the order their bytes go into the shards.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use packfs_format::bundle::FileAttributes;

use super::CreateError;
use crate::source_tree::{check_root, list_dir, problems_report, Links, SourceIoError};

/// A directory or file below SRC (SRC itself has no entry).
pub(super) struct Entry {
    /// The parent directory below SRC, `/`-separated, without leading or
    /// trailing `/`; `""` is SRC.
    pub dir: String,
    pub name: String,
    /// Where its bytes are: a local file, or for a dataset's entry the
    /// name messages give it.
    pub path: PathBuf,
    /// A file's size when listed; `None` for a directory.
    pub file_size: Option<u64>,
    pub attributes: FileAttributes,
}

/// Every entry below `src`, depth first: in each directory its files in
/// byte order of names, then each subdirectory (its entry, then what it
/// holds) in byte order of names. A directory's files are thus adjacent
/// in the shards, so reading a directory's files reads one stretch of a
/// shard. Fails with every entry that cannot be bundled (the rules of
/// `packfs import`: names must be UTF-8, links to files are followed,
/// links to directories and special files are refused).
pub(super) fn scan(src: &Path) -> Result<Vec<Entry>, CreateError> {
    check_root(src)?;
    let mut entries = Vec::new();
    let mut problems = Vec::new();
    walk(src, "", &mut entries, &mut problems)?;
    match problems_report(problems) {
        Some(report) => Err(CreateError::Source(report)),
        None => Ok(entries),
    }
}

fn walk(
    dir: &Path,
    rel: &str,
    entries: &mut Vec<Entry>,
    problems: &mut Vec<String>,
) -> Result<(), SourceIoError> {
    let mut listed = list_dir(dir, Links::Follow, problems)?;
    listed.sort_by(|a, b| (a.meta.is_dir(), &a.name).cmp(&(b.meta.is_dir(), &b.name)));
    for e in listed {
        let is_dir = e.meta.is_dir();
        entries.push(Entry {
            dir: rel.to_owned(),
            name: e.name.clone(),
            path: e.path.clone(),
            file_size: (!is_dir).then_some(e.meta.len()),
            attributes: FileAttributes {
                mtime_ns: e
                    .meta
                    .mtime()
                    .saturating_mul(1_000_000_000)
                    .saturating_add(e.meta.mtime_nsec()),
                mode: e.meta.mode() & 0o7777,
            },
        });
        if is_dir {
            let child = match rel {
                "" => e.name,
                _ => format!("{rel}/{}", e.name),
            };
            walk(&e.path, &child, entries, problems)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_come_before_subdirectories_in_byte_order() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        for dir in ["b", "a/z", "a/y", "é"] {
            std::fs::create_dir_all(root.join(dir)).unwrap();
        }
        for file in ["a/z/1", "a/f", "a/E", "top", "é/x"] {
            std::fs::write(root.join(file), file).unwrap();
        }
        let order: Vec<String> = scan(root)
            .unwrap()
            .iter()
            .map(|e| match e.dir.as_str() {
                "" => e.name.clone(),
                dir => format!("{dir}/{}", e.name),
            })
            .collect();
        assert_eq!(
            order,
            ["top", "a", "a/E", "a/f", "a/y", "a/z", "a/z/1", "b", "é", "é/x"]
        );
    }

    #[test]
    fn links_to_directories_and_special_files_are_refused_by_path() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        std::fs::create_dir(root.join("d")).unwrap();
        std::fs::write(root.join("f"), b"x").unwrap();
        std::os::unix::fs::symlink(root.join("d"), root.join("to-dir")).unwrap();
        std::os::unix::fs::symlink(root.join("f"), root.join("to-file")).unwrap();
        let fifo = std::ffi::CString::new(root.join("fifo").to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        let Err(CreateError::Source(problems)) = scan(root) else {
            panic!("scan accepted a link to a directory and a FIFO");
        };
        let text = problems.join("\n");
        assert!(
            text.contains("to-dir: symbolic link to a directory"),
            "{text}"
        );
        assert!(text.contains("fifo: not a regular file"), "{text}");
        assert!(!text.contains("to-file"), "{text}");
    }
}
