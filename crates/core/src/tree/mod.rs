//! The directory tree of a snapshot: `/<timeline>/<modality>/<name…>`.
//!
//! A tree holds its items one of two ways, behind one interface:
//!
//! - **loaded** ([`Tree::build`], `loaded.rs`): built whole from a loaded
//!   [`Snapshot`], every item's row in memory. Commands that read every
//!   item anyway use it, and so does a mount of Tracks stored as single
//!   objects.
//! - **paged** ([`Tree::open`], `paged.rs`): the Manifest and its Tracks'
//!   roots, and the name pages a caller asks for, held under a bound of
//!   bytes (`pages.rs`): a mount of paged Tracks is ready at once and
//!   holds what it was asked for, not the dataset.
//!
//! Answers that need a page can fail ([`TreeError::Index`]: a page that
//! cannot be read or is damaged), and then for the nodes on that page only.

mod loaded;
mod node;
mod paged;
mod pages;

use std::sync::Arc;

use packfs_format::{Attrs, ObjectId};

use futures::{StreamExt, TryStreamExt};

use crate::dataset::{Dataset, ItemData, Snapshot, TrackObject, METADATA_CONCURRENCY};
use loaded::Loaded;
use node::{id_is_file, FILE};
pub use node::{Child, Look, Node, NodeId, NodeKind, TrackSpan, TreeError, TreeItem};
use paged::Paged;

/// The whole namespace of one snapshot.
pub struct Tree {
    items: Items,
    tracks: Vec<TrackSpan>,
    manifest_id: ObjectId,
    ts_unix_ns: u64,
    total_bytes: u64,
}

enum Items {
    Loaded(Loaded),
    Paged(Box<Paged>),
}

/// How much of a paged Track's index a tree holds at most, unless told.
pub const DEFAULT_INDEX_BYTES: u64 = 64 << 20;

impl Tree {
    pub const ROOT: NodeId = node::ROOT;

    /// A tree of nothing but its root (a mount whose root is a catalog).
    pub fn empty() -> Tree {
        let manifest = packfs_format::Manifest {
            parents: Vec::new(),
            timelines: Vec::new(),
            tracks: Vec::new(),
            ts_unix_ns: 0,
            writer: String::new(),
        };
        let snapshot = Snapshot {
            manifest_id: packfs_format::ObjectId::of(&manifest.encode()),
            manifest,
            tracks: Vec::new(),
        };
        Tree::build(snapshot).expect("an empty snapshot has no name clashes")
    }

    /// Builds the tree of a loaded snapshot; a name used twice in one
    /// directory (two items, or an item and a directory) is an error
    /// naming the path.
    pub fn build(snapshot: Snapshot) -> Result<Tree, TreeError> {
        let (manifest_id, ts_unix_ns) = (snapshot.manifest_id, snapshot.manifest.ts_unix_ns);
        let built = Loaded::build(snapshot)?;
        Ok(Tree {
            items: Items::Loaded(built.tree),
            tracks: built.spans,
            manifest_id,
            ts_unix_ns,
            total_bytes: built.total_bytes,
        })
    }

    /// The tree of Manifest `id` (which `referrer` names) of `dataset`:
    /// paged when every Track is, reading only the Manifest and the
    /// Tracks' roots (with their index pages) now, and holding at most
    /// `index_bytes` of name pages later; else loaded whole.
    ///
    /// A paged tree's answers read pages on the runtime it was opened on,
    /// waiting for them: call them from threads outside it (a FUSE
    /// thread), or from tasks of a multi-threaded runtime, never from a
    /// current-thread runtime's.
    pub async fn open(
        dataset: &Dataset,
        id: ObjectId,
        referrer: &str,
        index_bytes: u64,
    ) -> Result<Tree, TreeError> {
        let manifest = dataset.readable_manifest(&id, referrer).await?;
        let referrer = format!("manifest {id}");
        let objects: Vec<TrackObject> = futures::stream::iter(&manifest.tracks)
            .map(|entry| dataset.track_object(&entry.track, &referrer))
            .buffered(METADATA_CONCURRENCY)
            .try_collect()
            .await?;
        let mut roots = Vec::with_capacity(objects.len());
        for object in objects {
            match object {
                TrackObject::Paged(root) => roots.push(Arc::new(root)),
                TrackObject::Single(_) => {
                    let snapshot = dataset.snapshot_at(id, &referrer).await?;
                    return Tree::build(snapshot);
                }
            }
        }
        // Its next commit edits these Tracks: the listed roots spare it
        // reading their index pages again.
        for (entry, root) in manifest.tracks.iter().zip(&roots) {
            dataset.keep_root(entry.track, root.clone());
        }
        let bytes = usize::try_from(index_bytes).unwrap_or(usize::MAX);
        let opened = Paged::open(dataset.clone(), &manifest, roots, bytes)?;
        Ok(Tree {
            items: Items::Paged(Box::new(opened.tree)),
            tracks: opened.spans,
            manifest_id: id,
            ts_unix_ns: manifest.ts_unix_ns,
            total_bytes: opened.total_bytes,
        })
    }

    /// Whether `id` is a directory (from the id alone: no page is read).
    pub fn is_dir(&self, id: NodeId) -> bool {
        match &self.items {
            Items::Loaded(l) => l.is_dir(id),
            Items::Paged(p) => p.is_dir(id),
        }
    }

    /// Node `id`, if there is one.
    pub fn node(&self, id: NodeId) -> Result<Option<Node>, TreeError> {
        match &self.items {
            Items::Loaded(l) => Ok(l.node(id)),
            Items::Paged(p) => p.node(id),
        }
    }

    /// The child `name` of directory `dir`.
    pub fn lookup(&self, dir: NodeId, name: &[u8]) -> Result<Option<NodeId>, TreeError> {
        match &self.items {
            Items::Loaded(l) => Ok(l.lookup(dir, name)),
            Items::Paged(p) => p.lookup(dir, name),
        }
    }

    /// Feeds the children of directory `dir` (sorted by name, bytewise) to
    /// `visit`, from position `from` (0 is the first child), each with its
    /// name, what `stat` shows of it and the position after it, until
    /// `visit` returns true. A listing resumed from a position given out
    /// continues where it stopped, at any size.
    pub fn children(
        &self,
        dir: NodeId,
        from: u64,
        visit: impl FnMut(Child<'_>) -> bool,
    ) -> Result<(), TreeError> {
        match &self.items {
            Items::Loaded(l) => {
                l.children(dir, from, visit);
                Ok(())
            }
            Items::Paged(p) => p.children(dir, from, visit),
        }
    }

    /// The children of directory `dir`, with their names.
    pub fn list(&self, dir: NodeId) -> Result<Vec<(NodeId, String)>, TreeError> {
        let mut out = Vec::new();
        self.children(dir, 0, |c| {
            out.push((c.id, c.name.to_string()));
            false
        })?;
        Ok(out)
    }

    /// How many subdirectories directory `dir` has, when the tree knows
    /// without reading pages: a loaded tree always; a paged one for the
    /// root and the timelines, not for the directories of a Track.
    pub fn subdirs(&self, dir: NodeId) -> Option<u32> {
        match &self.items {
            Items::Loaded(l) => Some(l.subdirs(dir)),
            Items::Paged(p) => p.subdirs(dir),
        }
    }

    /// Item `index` (of all Tracks, in order).
    pub fn item(&self, index: u32) -> Result<TreeItem, TreeError> {
        self.item_of(index, false)
    }

    /// Item `index`, for a pass over items in order (which goes on with
    /// [`TreeItem::next_on_page`]): one that starts a page has the next
    /// page read ahead.
    pub fn item_in_pass(&self, index: u32) -> Result<TreeItem, TreeError> {
        self.item_of(index, true)
    }

    fn item_of(&self, index: u32, in_pass: bool) -> Result<TreeItem, TreeError> {
        match &self.items {
            Items::Loaded(l) => Ok(l.item(index)),
            Items::Paged(p) => p.item(index, in_pass)?.ok_or_else(|| self.no_item(index)),
        }
    }

    /// What reading item `index` needs.
    pub fn item_data(&self, index: u32) -> Result<ItemData, TreeError> {
        match &self.items {
            Items::Loaded(l) => Ok(l.item_data(index)),
            Items::Paged(p) => p.item_data(index)?.ok_or_else(|| self.no_item(index)),
        }
    }

    fn no_item(&self, index: u32) -> TreeError {
        TreeError::NotFound {
            path: format!("item {index} of manifest {}", self.manifest_id),
        }
    }

    /// The attributes recorded for directory `id` (none for most).
    pub fn dir_attrs(&self, id: NodeId) -> Result<Attrs, TreeError> {
        match &self.items {
            Items::Loaded(l) => Ok(l.dir_attrs(id)),
            Items::Paged(p) => p.dir_attrs(id),
        }
    }

    /// Resolves a `/`-separated path from the root (empty or `/` is the root).
    pub fn resolve(&self, path: &str) -> Result<NodeId, TreeError> {
        let mut node = Self::ROOT;
        let mut walked = String::new();
        for part in path.split('/').filter(|p| !p.is_empty() && *p != ".") {
            walked.push('/');
            walked.push_str(part);
            if id_is_file(node) {
                return Err(TreeError::NotADirectory { path: walked });
            }
            node = self
                .lookup(node, part.as_bytes())?
                .ok_or_else(|| TreeError::NotFound {
                    path: walked.clone(),
                })?;
        }
        Ok(node)
    }

    /// The item index of the file at `path`; an error if it is missing or
    /// a directory.
    pub fn resolve_file(&self, path: &str) -> Result<u32, TreeError> {
        let id = self.resolve(path)?;
        match id_is_file(id) {
            true => Ok(id & !FILE),
            false => Err(TreeError::IsADirectory {
                path: path.to_string(),
            }),
        }
    }

    /// What reading the file at `path` needs.
    pub fn file_data(&self, path: &str) -> Result<ItemData, TreeError> {
        self.item_data(self.resolve_file(path)?)
    }

    /// The Tracks of the snapshot, in item order.
    pub fn tracks(&self) -> &[TrackSpan] {
        &self.tracks
    }

    /// The Track item `index` belongs to.
    pub fn track_of(&self, index: u32) -> &TrackSpan {
        let i = self.tracks.partition_point(|t| t.first_item <= index);
        &self.tracks[i - 1]
    }

    /// Items of the snapshot, of all Tracks.
    pub fn item_count(&self) -> u32 {
        self.tracks.last().map_or(0, |t| t.first_item + t.len)
    }

    /// Files and directories; of a paged tree, its items and the
    /// directories it has met.
    pub fn node_count(&self) -> usize {
        match &self.items {
            Items::Loaded(l) => l.node_count(),
            Items::Paged(p) => p.node_count(),
        }
    }

    /// Bytes of name pages a paged tree holds now.
    pub fn index_bytes(&self) -> usize {
        match &self.items {
            Items::Loaded(_) => 0,
            Items::Paged(p) => p.index_bytes(),
        }
    }

    pub fn total_bytes(&self) -> u64 {
        self.total_bytes
    }

    pub fn manifest_id(&self) -> ObjectId {
        self.manifest_id
    }

    /// Creation time of the Manifest: the mtime of every node.
    pub fn ts_unix_ns(&self) -> u64 {
        self.ts_unix_ns
    }
}

impl std::fmt::Debug for Tree {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tree")
            .field("manifest_id", &self.manifest_id)
            .field("items", &self.item_count())
            .field("paged", &matches!(self.items, Items::Paged(_)))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::dataset::{Item, ItemSource, SnapshotTrack};
    use packfs_format::Manifest;

    fn snapshot(tracks: &[(&str, &[&str])]) -> Snapshot {
        let tracks = tracks
            .iter()
            .map(|(modality, names)| SnapshotTrack {
                timeline: "t".into(),
                modality: modality.to_string(),
                track_id: ObjectId::of(modality.as_bytes()),
                what: format!("track {modality}"),
                items: names
                    .iter()
                    .map(|name| Item {
                        name: name.to_string(),
                        size: name.len() as u64,
                        media_type: "a/b".into(),
                        source: ItemSource::Whole {
                            object: Arc::new(object_store::path::Path::from(*name)),
                        },
                        attrs: Attrs::default(),
                    })
                    .collect(),
                dirs: Vec::new(),
                pages: Vec::new(),
            })
            .collect();
        Snapshot {
            manifest_id: ObjectId::of(b"m"),
            manifest: Manifest {
                parents: vec![],
                timelines: vec!["t".into(), "empty".into()],
                tracks: vec![],
                ts_unix_ns: 0,
                writer: "test".into(),
            },
            tracks,
        }
    }

    fn names(tree: &Tree, dir: NodeId) -> Vec<String> {
        tree.list(dir)
            .unwrap()
            .into_iter()
            .map(|(_, n)| n)
            .collect()
    }

    /// Items of two Tracks, directories interleaved as the items come:
    /// every file is found by path, with its own item, parent and name,
    /// and every directory lists its children sorted.
    #[test]
    fn files_are_items_below_sorted_directories() {
        let a: &[&str] = &["d2/z", "d1/b", "d2/a", "top", "d1/sub/x", "d1/a"];
        let tree = Tree::build(snapshot(&[("m", a), ("n", &["only"])])).unwrap();
        assert_eq!(names(&tree, Tree::ROOT), ["empty", "t"]);
        let t = tree.resolve("t").unwrap();
        assert_eq!(names(&tree, t), ["m", "n"]);
        assert_eq!(
            names(&tree, tree.resolve("t/m").unwrap()),
            ["d1", "d2", "top"]
        );
        assert_eq!(
            names(&tree, tree.resolve("t/m/d1").unwrap()),
            ["a", "b", "sub"]
        );
        for (i, name) in a.iter().chain(&["only"]).enumerate() {
            let modality = if i < a.len() { "m" } else { "n" };
            let path = format!("t/{modality}/{name}");
            let id = tree.resolve(&path).unwrap();
            let node = tree.node(id).unwrap().unwrap();
            assert!(
                matches!(node.kind, NodeKind::File(item) if item == i as u32),
                "{path}"
            );
            assert_eq!(node.name, name.rsplit('/').next().unwrap());
            assert_eq!(tree.item(i as u32).unwrap().name(), *name);
            assert_eq!(tree.resolve_file(&path).unwrap(), i as u32);
            let parent = tree.node(node.parent).unwrap().unwrap();
            let found = tree.lookup(node.parent, node.name.as_bytes()).unwrap();
            assert_eq!(found, Some(id));
            assert_eq!(parent.kind, NodeKind::Dir);
            let siblings = tree.list(node.parent).unwrap();
            assert!(siblings.iter().any(|(c, _)| *c == id));
        }
        assert!(tree.lookup(t, b"nope").unwrap().is_none());
        assert!(matches!(
            tree.resolve("t/m/top/x"),
            Err(TreeError::NotADirectory { .. })
        ));
        assert!(matches!(
            tree.resolve_file("t/m/d1"),
            Err(TreeError::IsADirectory { .. })
        ));
        assert_eq!(tree.item_count(), 7);
        assert_eq!(
            tree.node_count(),
            7 + 8,
            "7 files; root, t, empty, m, n, d1, d2, sub"
        );
        let sizes: u64 = a.iter().chain(&["only"]).map(|n| n.len() as u64).sum();
        assert_eq!(tree.total_bytes(), sizes);
        assert_eq!(tree.track_of(6).modality, "n");
    }

    #[test]
    fn a_name_used_twice_in_a_directory_is_refused() {
        let e = Tree::build(snapshot(&[("m", &["d/a", "b", "d/a"])])).unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid name \"d/a\" in track m: duplicate name"
        );
        let e = Tree::build(snapshot(&[("m", &["d/a", "d", "c"])])).unwrap_err();
        assert!(
            matches!(&e, TreeError::Conflict { path, .. } if path == "/t/m/d"),
            "{e}"
        );
    }
}
