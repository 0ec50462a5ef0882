//! What std::fs shows of a tree: modes, sizes, times and bytes.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

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
