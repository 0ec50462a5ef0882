//! A tree built whole from a loaded [`Snapshot`]: every item's table in
//! memory, every directory's children sorted once. What commands that read
//! a whole snapshot (`verify`, `bundle create`, [`crate::Files`]) and mounts
//! of Tracks stored as single objects use.

use std::sync::Arc;

use packfs_format::{Attrs, Special};

use super::node::{
    id_is_file, leaf, Child, Look, Node, NodeId, NodeKind, TrackSpan, TreeError, TreeItem, FILE,
    ROOT,
};
use crate::dataset::{ItemData, ItemTable, Snapshot, SnapshotTrack};

/// A directory of the tree.
#[derive(Debug)]
struct Dir {
    name: Box<str>,
    parent: NodeId,
    /// Its children: `Loaded::children[start..end]`.
    children: (u32, u32),
}

/// The whole namespace of one snapshot, in memory.
#[derive(Debug)]
pub(super) struct Loaded {
    dirs: Vec<Dir>,
    /// The children of every directory, each directory's together.
    children: Vec<NodeId>,
    /// The directory of each item.
    file_parents: Vec<NodeId>,
    /// Attributes recorded for directories (few have any).
    dir_attrs: foldhash::HashMap<NodeId, Attrs>,
    /// Each Track's first item and its items.
    tables: Vec<(u32, Arc<ItemTable>)>,
}

/// What [`Loaded::build`] makes of a snapshot.
pub(super) struct Built {
    pub(super) tree: Loaded,
    pub(super) spans: Vec<TrackSpan>,
    pub(super) total_bytes: u64,
}

impl Loaded {
    /// Builds the tree; a name used twice in one directory (two items, or
    /// an item and a directory) is an error naming the path.
    pub(super) fn build(snapshot: Snapshot) -> Result<Built, TreeError> {
        let mut b = Builder {
            dirs: vec![BuildDir {
                name: "".into(),
                parent: ROOT,
                children: Vec::new(),
            }],
            dir_index: foldhash::HashMap::default(),
            dir_attrs: foldhash::HashMap::default(),
            file_parents: Vec::new(),
        };
        for timeline in &snapshot.manifest.timelines {
            b.dir(ROOT, timeline)?;
        }
        let mut firsts = Vec::with_capacity(snapshot.tracks.len());
        for track in &snapshot.tracks {
            let timeline = b.dir(ROOT, &track.timeline)?;
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
        let mut spans = Vec::with_capacity(snapshot.tracks.len());
        let mut tables = Vec::with_capacity(snapshot.tracks.len());
        let mut total_bytes = 0;
        for (track, first) in snapshot.tracks.into_iter().zip(firsts) {
            total_bytes += track.items.iter().map(|i| i.size()).sum::<u64>();
            spans.push(TrackSpan {
                first_item: first as u32,
                len: track.items.len() as u32,
                timeline: track.timeline,
                modality: track.modality,
                track: track.track_id,
            });
            tables.push((first as u32, Arc::new(track.items)));
        }
        let tree = Loaded {
            dirs,
            children,
            file_parents,
            dir_attrs,
            tables,
        };
        Ok(Built {
            tree,
            spans,
            total_bytes,
        })
    }

    /// Node `id`, if there is one.
    pub(super) fn node(&self, id: NodeId) -> Option<Node> {
        if id_is_file(id) {
            let item = id & !FILE;
            let parent = *self.file_parents.get(item as usize)?;
            return Some(Node {
                name: leaf(self.name_of(id)).to_string(),
                parent,
                kind: NodeKind::File(item),
            });
        }
        let d = self.dirs.get(id as usize)?;
        Some(Node {
            name: d.name.to_string(),
            parent: d.parent,
            kind: NodeKind::Dir,
        })
    }

    /// The children of directory `id` (none for a file or no node).
    fn children_of(&self, id: NodeId) -> &[NodeId] {
        match self.dirs.get(id as usize).filter(|_| !id_is_file(id)) {
            Some(d) => &self.children[d.children.0 as usize..d.children.1 as usize],
            None => &[],
        }
    }

    /// The child `name` of directory `dir`.
    pub(super) fn lookup(&self, dir: NodeId, name: &[u8]) -> Option<NodeId> {
        let children = self.children_of(dir);
        children
            .binary_search_by(|&c| self.leaf_of(c).as_bytes().cmp(name))
            .ok()
            .map(|i| children[i])
    }

    /// Feeds the children of `dir` to `visit` from position `from` (0 is
    /// the first), each with the position after it, until `visit` says
    /// stop.
    pub(super) fn children(
        &self,
        dir: NodeId,
        from: u64,
        mut visit: impl FnMut(Child<'_>) -> bool,
    ) {
        let children = self.children_of(dir);
        let start = usize::try_from(from).unwrap_or(usize::MAX);
        for (i, &c) in children.iter().enumerate().skip(start) {
            let look = match id_is_file(c) {
                true => {
                    let item = self.item(c & !FILE);
                    Look::File {
                        size: item.size(),
                        attrs: item.attrs(),
                        special: Special::of_media_type(item.media_type()),
                    }
                }
                false => Look::Dir {
                    attrs: self.dir_attrs(c),
                    subdirs: Some(self.subdirs(c)),
                },
            };
            let child = Child {
                id: c,
                name: self.leaf_of(c),
                next: i as u64 + 1,
                look,
            };
            if visit(child) {
                return;
            }
        }
    }

    /// How many of directory `dir`'s children are directories.
    pub(super) fn subdirs(&self, dir: NodeId) -> u32 {
        let children = self.children_of(dir);
        children.iter().filter(|&&c| !id_is_file(c)).count() as u32
    }

    /// The last component of node `id`'s name; `id` exists.
    fn leaf_of(&self, id: NodeId) -> &str {
        match id_is_file(id) {
            false => &self.dirs[id as usize].name,
            true => leaf(self.name_of(id)),
        }
    }

    /// The item name of file `id`, which exists.
    fn name_of(&self, id: NodeId) -> &str {
        let index = id & !FILE;
        let (first, table) = self.table_of(index);
        table.get((index - first) as usize).name()
    }

    fn table_of(&self, index: u32) -> &(u32, Arc<ItemTable>) {
        let i = self.tables.partition_point(|(first, _)| *first <= index);
        &self.tables[i - 1]
    }

    /// Item `index`; panics if there is none.
    pub(super) fn item(&self, index: u32) -> TreeItem {
        let (first, table) = self.table_of(index);
        TreeItem::new(table.clone(), (index - first) as usize)
    }

    /// What reading item `index` needs; panics if there is none.
    pub(super) fn item_data(&self, index: u32) -> ItemData {
        let (first, table) = self.table_of(index);
        table.get((index - first) as usize).data()
    }

    /// The attributes recorded for directory `id` (none for most).
    pub(super) fn dir_attrs(&self, id: NodeId) -> Attrs {
        self.dir_attrs.get(&id).copied().unwrap_or_default()
    }

    pub(super) fn is_dir(&self, id: NodeId) -> bool {
        !id_is_file(id) && (id as usize) < self.dirs.len()
    }

    pub(super) fn node_count(&self) -> usize {
        self.dirs.len() + self.file_parents.len()
    }
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
        while id != ROOT {
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
