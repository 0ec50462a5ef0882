//! The directory tree of a snapshot: `/<timeline>/<modality>/<name…>`,
//! built once at mount and served from memory.

use packfs_format::{Attrs, ObjectId};
use thiserror::Error;

use crate::dataset::{ItemRef, ItemTable, Snapshot, SnapshotTrack};

/// Index of a node; the root is [`Tree::ROOT`].
pub type NodeId = u32;

/// Errors finding a path in the tree.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum TreeError {
    #[error("{path}: no such file or directory")]
    NotFound { path: String },
    #[error("{path}: not a directory")]
    NotADirectory { path: String },
    #[error("{path}: is a directory")]
    IsADirectory { path: String },
    #[error("{path}: {detail}")]
    Conflict { path: String, detail: &'static str },
    #[error("invalid name {name:?} in {what}: duplicate name")]
    Duplicate { what: String, name: String },
    #[error("the dataset has more than {} files or directories", FILE - 2)]
    TooLarge,
}

/// A file or directory, as [`Tree::node`] hands it out.
#[derive(Clone, Copy, Debug)]
pub struct Node<'a> {
    pub name: &'a str,
    pub parent: NodeId,
    pub kind: NodeKind<'a>,
}

#[derive(Clone, Copy, Debug)]
pub enum NodeKind<'a> {
    /// Children sorted by name (byte order), so listings are stable and
    /// lookups are binary searches.
    Dir(&'a [NodeId]),
    /// Index of the item, for [`Tree::item`].
    File(u32),
}

/// A file's node id is its item index with this bit set; directories are
/// numbered from the root, 0. Files need no node of their own: their name
/// is the last component of the item's name, and their parent is one
/// `NodeId` a file ([`Tree::file_parents`]).
const FILE: NodeId = 1 << 31;

/// A directory of the tree.
#[derive(Debug)]
struct Dir {
    name: Box<str>,
    parent: NodeId,
    /// Its children: `Tree::children[start..end]`.
    children: (u32, u32),
}

/// The Track a run of the tree's items came from, and those items.
#[derive(Clone, Debug)]
pub struct TrackSpan {
    /// Index of the Track's first item among all the tree's items.
    pub first_item: u32,
    pub timeline: String,
    pub modality: String,
    pub track: ObjectId,
    pub items: ItemTable,
}

/// The whole namespace of one snapshot.
#[derive(Debug)]
pub struct Tree {
    dirs: Vec<Dir>,
    /// The children of every directory, each directory's together.
    children: Vec<NodeId>,
    /// The directory of each item.
    file_parents: Vec<NodeId>,
    /// Attributes recorded for directories (few have any).
    dir_attrs: foldhash::HashMap<NodeId, Attrs>,
    tracks: Vec<TrackSpan>,
    manifest_id: ObjectId,
    ts_unix_ns: u64,
    total_bytes: u64,
}

impl Tree {
    pub const ROOT: NodeId = 0;

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

    /// Builds the tree; a name used twice in one directory (two items, or
    /// an item and a directory) is an error naming the path.
    pub fn build(snapshot: Snapshot) -> Result<Tree, TreeError> {
        let mut b = Builder {
            dirs: vec![BuildDir {
                name: "".into(),
                parent: Self::ROOT,
                children: Vec::new(),
            }],
            dir_index: foldhash::HashMap::default(),
            dir_attrs: foldhash::HashMap::default(),
            file_parents: Vec::new(),
        };
        for timeline in &snapshot.manifest.timelines {
            b.dir(Self::ROOT, timeline)?;
        }
        let mut firsts = Vec::with_capacity(snapshot.tracks.len());
        for track in &snapshot.tracks {
            let timeline = b.dir(Self::ROOT, &track.timeline)?;
            let modality = b.dir(timeline, &track.modality)?;
            let first = b.file_parents.len();
            firsts.push(first);
            for dir in &track.dirs {
                let at = b.dirs_of(modality, &dir.name)?;
                if dir.attrs != Attrs::default() {
                    b.dir_attrs.insert(at, dir.attrs);
                }
            }
            // Items of one directory usually come together: the last
            // directory is found again without walking its path.
            let mut last: Option<(&str, NodeId)> = None;
            for (k, item) in track.items.iter().enumerate() {
                let index = u32::try_from(first + k)
                    .ok()
                    .filter(|&i| i < FILE - 1)
                    .ok_or(TreeError::TooLarge)?;
                let name = item.name();
                let (dirs, leaf) = name.rsplit_once('/').unwrap_or(("", name));
                let dir = match last {
                    Some((path, dir)) if path == dirs => dir,
                    _ => {
                        let dir = b.dirs_of(modality, dirs)?;
                        last = Some((dirs, dir));
                        dir
                    }
                };
                b.file_parents.push(dir);
                b.dirs[dir as usize].children.push((leaf, FILE | index));
            }
        }
        let (dirs, children) = b.finish(&snapshot.tracks, &firsts)?;
        // The builder borrows the items' names: done with it before the
        // tables move into the tree.
        let Builder {
            file_parents,
            dir_attrs,
            ..
        } = b;
        let tracks: Vec<TrackSpan> = snapshot
            .tracks
            .into_iter()
            .zip(firsts)
            .map(|(track, first)| TrackSpan {
                first_item: first as u32,
                timeline: track.timeline,
                modality: track.modality,
                track: track.track_id,
                items: track.items,
            })
            .collect();
        let total_bytes = tracks
            .iter()
            .flat_map(|t| t.items.iter())
            .map(|i| i.size())
            .sum();
        Ok(Tree {
            dirs,
            children,
            file_parents,
            dir_attrs,
            total_bytes,
            tracks,
            manifest_id: snapshot.manifest_id,
            ts_unix_ns: snapshot.manifest.ts_unix_ns,
        })
    }

    /// Whether `id` is a directory (from the id alone: no name is found).
    pub fn is_dir(&self, id: NodeId) -> bool {
        !id_is_file(id) && (id as usize) < self.dirs.len()
    }

    /// Node `id`, if there is one.
    pub fn node(&self, id: NodeId) -> Option<Node<'_>> {
        if id & FILE != 0 {
            let item = id & !FILE;
            let parent = *self.file_parents.get(item as usize)?;
            let name = self.item(item).name();
            return Some(Node {
                name: leaf(name),
                parent,
                kind: NodeKind::File(item),
            });
        }
        let d = self.dirs.get(id as usize)?;
        Some(Node {
            name: &d.name,
            parent: d.parent,
            kind: NodeKind::Dir(&self.children[d.children.0 as usize..d.children.1 as usize]),
        })
    }

    /// Items of the snapshot, of all Tracks.
    pub(crate) fn item_count(&self) -> u32 {
        self.file_parents.len() as u32
    }

    /// Item `index` (of all Tracks, in order); panics if there is none.
    pub fn item(&self, index: u32) -> ItemRef<'_> {
        let track = self.track_of(index);
        track.items.get((index - track.first_item) as usize)
    }

    /// The attributes recorded for directory `id` (none for most).
    pub fn dir_attrs(&self, id: NodeId) -> Attrs {
        self.dir_attrs.get(&id).copied().unwrap_or_default()
    }

    /// The child `name` of directory `dir`.
    pub fn lookup(&self, dir: NodeId, name: &[u8]) -> Option<NodeId> {
        let NodeKind::Dir(children) = self.node(dir)?.kind else {
            return None;
        };
        children
            .binary_search_by(|&c| self.name_of(c).as_bytes().cmp(name))
            .ok()
            .map(|i| children[i])
    }

    /// The name of node `id`, which exists.
    fn name_of(&self, id: NodeId) -> &str {
        match id & FILE {
            0 => &self.dirs[id as usize].name,
            _ => leaf(self.item(id & !FILE).name()),
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
                .lookup(node, part.as_bytes())
                .ok_or_else(|| TreeError::NotFound {
                    path: walked.clone(),
                })?;
        }
        Ok(node)
    }

    /// The item at `path`; an error if it is missing or a directory.
    pub fn resolve_file(&self, path: &str) -> Result<ItemRef<'_>, TreeError> {
        let id = self.resolve(path)?;
        match id_is_file(id) {
            true => Ok(self.item(id & !FILE)),
            false => Err(TreeError::IsADirectory {
                path: path.to_string(),
            }),
        }
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

    pub fn node_count(&self) -> usize {
        self.dirs.len() + self.file_parents.len()
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

fn id_is_file(id: NodeId) -> bool {
    id & FILE != 0
}

/// The last component of a `/`-separated name.
fn leaf(name: &str) -> &str {
    name.rsplit_once('/').map_or(name, |(_, leaf)| leaf)
}

/// A directory while the tree is built.
struct BuildDir<'a> {
    name: Box<str>,
    parent: NodeId,
    /// Children with their names: a file's is borrowed from its item,
    /// found while the items are walked in order (looking them up later,
    /// directory by directory, is a cache miss per item); a directory's is
    /// empty until [`Builder::finish`] fills it in.
    children: Vec<(&'a str, NodeId)>,
}

struct Builder<'a> {
    dirs: Vec<BuildDir<'a>>,
    /// Directories by parent and name; files need no index: a repeated
    /// name is found when the children are sorted.
    dir_index: foldhash::HashMap<NodeId, foldhash::HashMap<Box<str>, NodeId>>,
    dir_attrs: foldhash::HashMap<NodeId, Attrs>,
    file_parents: Vec<NodeId>,
}

impl<'a> Builder<'a> {
    /// The path of directory `id`.
    fn path(&self, mut id: NodeId) -> String {
        let mut parts = Vec::new();
        while id != Tree::ROOT {
            parts.push(&*self.dirs[id as usize].name);
            id = self.dirs[id as usize].parent;
        }
        parts.reverse();
        format!("/{}", parts.join("/"))
    }

    fn dir(&mut self, parent: NodeId, name: &str) -> Result<NodeId, TreeError> {
        if let Some(&id) = self.dir_index.get(&parent).and_then(|d| d.get(name)) {
            return Ok(id);
        }
        let id = NodeId::try_from(self.dirs.len())
            .ok()
            .filter(|&id| id < FILE)
            .ok_or(TreeError::TooLarge)?;
        self.dirs.push(BuildDir {
            name: name.into(),
            parent,
            children: Vec::new(),
        });
        self.dirs[parent as usize].children.push(("", id));
        self.dir_index
            .entry(parent)
            .or_default()
            .insert(name.into(), id);
        Ok(id)
    }

    /// The directory `path` (`/`-separated, maybe empty) below `at`.
    fn dirs_of(&mut self, mut at: NodeId, path: &str) -> Result<NodeId, TreeError> {
        for part in path.split('/').filter(|p| !p.is_empty()) {
            at = self.dir(at, part)?;
        }
        Ok(at)
    }

    /// Sorts every directory's children by name into one array, and
    /// refuses a name used twice in one directory: two items (a Track
    /// naming one twice) or a file and a directory. `firsts` is the index
    /// of each Track's first item.
    fn finish(
        &mut self,
        tracks: &[SnapshotTrack],
        firsts: &[usize],
    ) -> Result<(Vec<Dir>, Vec<NodeId>), TreeError> {
        let total = self.dirs.iter().map(|d| d.children.len()).sum();
        let mut all = Vec::with_capacity(total);
        let mut dirs = Vec::with_capacity(self.dirs.len());
        for i in 0..self.dirs.len() {
            let mut named = std::mem::take(&mut self.dirs[i].children);
            for (name, c) in named.iter_mut().filter(|(_, c)| !id_is_file(*c)) {
                *name = &self.dirs[*c as usize].name;
            }
            named.sort_unstable_by(|a, b| a.0.cmp(b.0));
            if let Some(pair) = named.windows(2).find(|w| w[0].0 == w[1].0) {
                let (a, b) = (pair[0].1, pair[1].1);
                if id_is_file(a) && id_is_file(b) {
                    let item = (a & !FILE) as usize;
                    let t = firsts.partition_point(|&first| first <= item) - 1;
                    return Err(TreeError::Duplicate {
                        what: tracks[t].what.clone(),
                        name: tracks[t].items.get(item - firsts[t]).name().to_string(),
                    });
                }
                let dir = if id_is_file(a) { b } else { a };
                return Err(TreeError::Conflict {
                    path: self.path(dir),
                    detail:
                        "is a file in the dataset but another item's name uses it as a directory",
                });
            }
            let start = all.len() as u32;
            all.extend(named.iter().map(|(_, c)| *c));
            dirs.push(Dir {
                // Copied: later directories' errors name their paths.
                name: self.dirs[i].name.clone(),
                parent: self.dirs[i].parent,
                children: (start, all.len() as u32),
            });
        }
        Ok((dirs, all))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::dataset::{Item, ItemSource};
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

    fn names(tree: &Tree, dir: NodeId) -> Vec<&str> {
        let NodeKind::Dir(children) = tree.node(dir).unwrap().kind else {
            panic!("not a directory")
        };
        children
            .iter()
            .map(|&c| tree.node(c).unwrap().name)
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
            let node = tree.node(id).unwrap();
            assert!(
                matches!(node.kind, NodeKind::File(item) if item == i as u32),
                "{path}"
            );
            assert_eq!(node.name, name.rsplit('/').next().unwrap());
            assert_eq!(tree.item(i as u32).name(), *name);
            assert_eq!(tree.resolve_file(&path).unwrap().name(), *name);
            let parent = tree.node(node.parent).unwrap();
            assert_eq!(tree.lookup(node.parent, node.name.as_bytes()), Some(id));
            assert!(matches!(parent.kind, NodeKind::Dir(c) if c.contains(&id)));
        }
        assert!(tree.lookup(t, b"nope").is_none());
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
