//! Trees of files: writing one, listing one.

use std::path::{Path, PathBuf};

/// Writes a file, creating its parent directories.
pub fn write_file(path: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
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
