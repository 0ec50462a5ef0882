//! [`Walk`]: the rows of a modality directory in the order of its Track
//! ([`packfs_format::name_order`]). Directories are listed in the bytewise
//! order of their names below the modality directory and each one's
//! entries by name, so each directory's rows are one run, as in the Track,
//! and a walk holds one directory's listing and the names of the
//! directories still to list, never a name per file.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::path::PathBuf;

use packfs_format::{validate_item_name, Special};

use crate::source_tree::{list_dir, Links, SourceIoError};

/// A row of a walk.
pub(super) enum Walked {
    /// A directory, by its name below the modality directory (`""` is
    /// that one).
    Dir(String),
    /// A file, its size when listed; `special` if it is no regular file
    /// (a symbolic link, kept as one, is as long as its target).
    File {
        name: String,
        path: PathBuf,
        size: u64,
        special: Option<Special>,
        /// A file of several names: its device and inode.
        hard_link: Option<(u64, u64)>,
    },
    /// An entry that cannot be imported: its path and why.
    Problem(String),
}

pub(super) struct Walk {
    /// The modality directory.
    base: PathBuf,
    /// Directories to list, by name: the least comes next.
    pending: BinaryHeap<Reverse<String>>,
    /// Rows of the directory listed last not handed out yet.
    rows: VecDeque<Walked>,
}

impl Walk {
    /// A walk of the modality directory `base`.
    pub(super) fn new(base: PathBuf) -> Self {
        Walk {
            base,
            pending: BinaryHeap::from([Reverse(String::new())]),
            rows: VecDeque::from([Walked::Dir(String::new())]),
        }
    }

    fn list(&mut self, dir: &str) -> Result<(), SourceIoError> {
        let path = match dir {
            "" => self.base.clone(),
            _ => self.base.join(dir),
        };
        let mut problems = Vec::new();
        let mut entries = list_dir(&path, Links::Keep, &mut problems)?;
        self.rows.extend(problems.into_iter().map(Walked::Problem));
        entries.sort_unstable_by(|a, b| a.name.cmp(&b.name));
        for entry in entries {
            let name = match dir {
                "" => entry.name,
                _ => format!("{dir}/{}", entry.name),
            };
            if let Err(e) = validate_item_name(&name, "item") {
                let problem = format!("{}: {e}", entry.path.display());
                self.rows.push_back(Walked::Problem(problem));
            } else if entry.meta.is_dir() {
                self.pending.push(Reverse(name.clone()));
                self.rows.push_back(Walked::Dir(name));
            } else {
                self.rows.push_back(Walked::File {
                    name,
                    path: entry.path,
                    size: entry.meta.len(),
                    special: entry.special,
                    hard_link: entry.hard_link,
                });
            }
        }
        Ok(())
    }
}

impl Iterator for Walk {
    type Item = Result<Walked, SourceIoError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(row) = self.rows.pop_front() {
                return Some(Ok(row));
            }
            let Reverse(dir) = self.pending.pop()?;
            if let Err(e) = self.list(&dir) {
                self.pending.clear();
                return Some(Err(e));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_come_in_the_order_of_the_track() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path();
        // `a-b` sorts between `a` and `a/…` bytewise, and a directory's
        // rows come before its subdirectories' however they are named.
        for path in ["a/x", "a/y/z", "a-b", "b", "a/0/deep/f", "empty/"] {
            let path = base.join(path);
            match path.to_str().unwrap().ends_with('/') {
                true => std::fs::create_dir_all(&path).unwrap(),
                false => {
                    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                    std::fs::write(&path, b"").unwrap();
                }
            }
        }
        let rows: Vec<String> = Walk::new(base.to_path_buf())
            .map(|row| match row.unwrap() {
                Walked::Dir(name) => format!("{name}/"),
                Walked::File { name, .. } => name,
                Walked::Problem(p) => panic!("{p}"),
            })
            .collect();
        assert_eq!(
            rows,
            [
                "/",
                "a/",
                "a-b",
                "b",
                "empty/",
                "a/0/",
                "a/x",
                "a/y/",
                "a/0/deep/",
                "a/0/deep/f",
                "a/y/z"
            ]
        );
        let mut sorted = rows.clone();
        let name = |r: &String| r.trim_end_matches('/').to_string();
        sorted.sort_by(|a, b| packfs_format::name_order(&name(a), &name(b)));
        assert_eq!(rows, sorted);
    }
}
