//! A dataset as the source of a bundle: its tree at a ref, or the subtree
//! below a path of it, with files read through packfs's reader in pack
//! order.

use std::io::Read;
use std::path::{Path, PathBuf};

use packfs_format::bundle::FileAttributes;
use packfs_format::Attrs;

use super::walk::Entry;
use super::CreateError;
use crate::cache::CacheOptions;
use crate::dataset::{Dataset, ItemData, Revision};
use crate::reader::Reader;
use crate::source_tree::SourceIoError;
use crate::store::{Store, StoreConfig};
use crate::tree::{NodeId, NodeKind, Tree, TreeError};

/// A dataset's tree, or the subtree below a directory of it, at one ref.
pub struct DatasetTree {
    /// The dataset's location, for messages.
    location: String,
    tree: Tree,
    /// The subtree's root, and its path in the dataset (`""` is its root).
    base: NodeId,
    base_path: String,
    reader: Reader,
    /// The runtime the reader's futures run on: shard writers are plain
    /// threads.
    runtime: tokio::runtime::Handle,
}

impl DatasetTree {
    /// The dataset `src` names at `revision`, if it names one: `src` is a
    /// dataset's location, or a location inside one followed by a path of
    /// its tree (`DATASET/train/image`), found by looking for refs at
    /// `src` and then at each of its parents. A local directory that is a
    /// dataset, or inside one, is thus read as the dataset.
    pub(super) async fn find(
        src: &str,
        revision: &Revision,
        config: &StoreConfig,
    ) -> Result<Option<DatasetTree>, CreateError> {
        for (location, path) in candidates(src)? {
            let is_local = Store::local_path(&location)?.is_some();
            // A local directory without `_packfs/refs` is no dataset: no
            // store needs opening to tell.
            if is_local && !Path::new(&location).join("_packfs/refs").is_dir() {
                continue;
            }
            let store = Store::open(&location, false, config)?;
            if !is_local && store.ref_names().await?.is_empty() {
                continue;
            }
            return Self::at(store, revision, &path).await.map(Some);
        }
        Ok(None)
    }

    /// The subtree below `path` of the dataset at `store`, at `revision`.
    async fn at(store: Store, revision: &Revision, path: &str) -> Result<DatasetTree, CreateError> {
        let location = store.location().to_owned();
        let dataset = Dataset::from_store(store.clone());
        let resolved = dataset.resolve_revision(revision).await?;
        let snapshot = dataset
            .snapshot_at(resolved.id, &resolved.describe())
            .await?;
        let tree = Tree::build(snapshot)?;
        let in_dataset = |source| CreateError::DatasetPath {
            location: location.clone(),
            revision: revision.to_string(),
            source,
        };
        let base = tree.resolve(path).map_err(in_dataset)?;
        if !tree.is_dir(base) {
            return Err(in_dataset(crate::tree::TreeError::NotADirectory {
                path: format!("/{path}"),
            }));
        }
        Ok(DatasetTree {
            location,
            tree,
            base,
            base_path: path.trim_matches('/').to_owned(),
            reader: Reader::new(store, CacheOptions::default(), None),
            runtime: tokio::runtime::Handle::current(),
        })
    }

    /// Every directory and file below the subtree's root: the directories,
    /// then the files in the dataset's item order, which is the order of
    /// their packs, so each shard writer reads its packs front to back.
    pub(super) fn entries(&self) -> Result<Vec<Entry>, TreeError> {
        let look = |attrs: Attrs, mode: u16| FileAttributes {
            mtime_ns: attrs.mtime_ns.unwrap_or(self.tree.ts_unix_ns() as i64),
            mode: u32::from(attrs.mode.unwrap_or(mode)),
        };
        let mut dirs = Vec::new();
        let mut files = Vec::new();
        let mut stack = vec![(self.base, String::new())];
        while let Some((dir, rel)) = stack.pop() {
            for (child, name) in self.tree.list(dir)? {
                let Some(node) = self.tree.node(child)? else {
                    continue;
                };
                let mut entry = Entry {
                    dir: rel.clone(),
                    path: self.display(&join(&rel, &name)),
                    name,
                    file_size: None,
                    attributes: look(self.tree.dir_attrs(child)?, Attrs::DEFAULT_DIR_MODE),
                };
                match node.kind {
                    NodeKind::Dir => {
                        stack.push((child, join(&rel, &entry.name)));
                        dirs.push(entry);
                    }
                    NodeKind::File(item) => {
                        let item_at = self.tree.item(item)?;
                        entry.file_size = Some(item_at.size());
                        entry.attributes = look(item_at.attrs(), Attrs::DEFAULT_FILE_MODE);
                        files.push((item, entry));
                    }
                }
            }
        }
        files.sort_by_key(|(item, _)| *item);
        dirs.extend(files.into_iter().map(|(_, entry)| entry));
        Ok(dirs)
    }

    /// A reader of the bytes of file `entry` (one of [`Self::entries`]).
    pub(super) fn open_file(&self, entry: &Entry) -> Result<ItemReader<'_>, SourceIoError> {
        let path = join(&self.base_path, &join(&entry.dir, &entry.name));
        let item = self
            .tree
            .resolve_file(&path)
            .and_then(|item| self.tree.item_data(item))
            .map_err(|e| SourceIoError {
                op: "read",
                path: entry.path.clone(),
                source: std::io::Error::other(e),
            })?;
        Ok(ItemReader {
            dataset: self,
            item,
            at: 0,
        })
    }

    /// How messages name the file or directory at `rel` below the root.
    fn display(&self, rel: &str) -> PathBuf {
        PathBuf::from(format!("{}/{}", self.location, join(&self.base_path, rel)))
    }
}

/// Reads an item front to back through the dataset's reader.
pub(super) struct ItemReader<'a> {
    dataset: &'a DatasetTree,
    item: ItemData,
    at: u64,
}

impl Read for ItemReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let len = (buf.len() as u64).min(self.item.size - self.at);
        if len == 0 {
            return Ok(0);
        }
        let read = self.dataset.reader.read_item(&self.item, self.at, len);
        let bytes = self
            .dataset
            .runtime
            .block_on(read)
            .map_err(std::io::Error::other)?;
        buf[..bytes.len()].copy_from_slice(&bytes);
        self.at += bytes.len() as u64;
        Ok(bytes.len())
    }
}

/// `dir/name`, or `name` in the root.
fn join(dir: &str, name: &str) -> String {
    match dir {
        "" => name.to_owned(),
        dir => format!("{dir}/{name}"),
    }
}

/// The (location, path below it) pairs `src` may name a dataset as, the
/// longest location first: `src` itself, then each parent.
fn candidates(src: &str) -> Result<Vec<(String, String)>, CreateError> {
    let mut pairs = Vec::new();
    match Store::local_path(src)? {
        Some(dir) => {
            let dir = std::path::absolute(&dir).map_err(|source| CreateError::Io {
                path: dir.clone(),
                source,
            })?;
            for parent in dir.ancestors() {
                let (Some(location), Ok(below)) = (parent.to_str(), dir.strip_prefix(parent))
                else {
                    continue;
                };
                let below = below.to_str().unwrap_or_default().to_owned();
                pairs.push((location.to_owned(), below));
            }
        }
        None => {
            // `scheme://bucket/a/b`: the bucket and each prefix of the path.
            let (scheme, rest) = src.split_once("://").expect("not a local path");
            let parts: Vec<&str> = rest.split('/').filter(|p| !p.is_empty()).collect();
            for keep in (1..=parts.len()).rev() {
                let location = format!("{scheme}://{}", parts[..keep].join("/"));
                pairs.push((location, parts[keep..].join("/")));
            }
        }
    }
    Ok(pairs)
}

#[cfg(test)]
mod tests {
    use super::candidates;

    #[test]
    fn a_source_names_a_dataset_at_itself_or_any_parent() {
        let got = candidates("s3://bucket/a/ds/train/image").unwrap();
        let want = [
            ("s3://bucket/a/ds/train/image", ""),
            ("s3://bucket/a/ds/train", "image"),
            ("s3://bucket/a/ds", "train/image"),
            ("s3://bucket/a", "ds/train/image"),
            ("s3://bucket", "a/ds/train/image"),
        ];
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(l, p)| (l.to_string(), p.to_string()))
            .collect();
        assert_eq!(got, want);
        let local = candidates("/tmp/ds/train").unwrap();
        assert_eq!(local[0], ("/tmp/ds/train".into(), "".into()));
        assert_eq!(local[1], ("/tmp/ds".into(), "train".into()));
        assert_eq!(local.last().unwrap(), &("/".into(), "tmp/ds/train".into()));
    }
}
