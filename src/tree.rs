//! The directory tree of a snapshot: `/<timeline>/<modality>/<name…>`,
//! built once at mount and served from memory.

use thiserror::Error;

use crate::dataset::{Item, Snapshot};
use crate::format::{Attrs, ObjectId};

/// Index of a node; the root is [`Tree::ROOT`].
pub type NodeId = u32;

/// Errors finding a path in the tree.
#[derive(Debug, Error)]
pub enum TreeError {
    #[error("{path}: no such file or directory")]
    NotFound { path: String },
    #[error("{path}: not a directory")]
    NotADirectory { path: String },
    #[error("{path}: is a directory")]
    IsADirectory { path: String },
    #[error("{path}: {detail}")]
    Conflict { path: String, detail: &'static str },
    #[error("the dataset has more than {} files and directories", u32::MAX)]
    TooLarge,
}

/// A file or directory.
#[derive(Debug)]
pub struct Node {
    pub name: Box<str>,
    pub parent: NodeId,
    pub kind: NodeKind,
}

#[derive(Debug)]
pub enum NodeKind {
    /// Children sorted by name (byte order), so listings are stable and
    /// lookups are binary searches.
    Dir(Vec<NodeId>),
    /// Index into [`Tree::items`].
    File(u32),
}

/// The Track a run of [`Tree::items`] came from.
#[derive(Clone, Debug)]
pub struct TrackSpan {
    /// Index of the Track's first item in [`Tree::items`].
    pub first_item: u32,
    pub timeline: String,
    pub modality: String,
    pub track: ObjectId,
}

/// The whole namespace of one snapshot.
#[derive(Debug)]
pub struct Tree {
    nodes: Vec<Node>,
    /// Attributes recorded for directories (few have any).
    dir_attrs: foldhash::HashMap<NodeId, Attrs>,
    items: Vec<Item>,
    tracks: Vec<TrackSpan>,
    manifest_id: ObjectId,
    ts_unix_ns: u64,
    total_bytes: u64,
}

impl Tree {
    pub const ROOT: NodeId = 0;

    /// A tree of nothing but its root (a mount whose root is a catalog).
    pub fn empty() -> Tree {
        let manifest = crate::format::Manifest {
            parents: Vec::new(),
            timelines: Vec::new(),
            tracks: Vec::new(),
            ts_unix_ns: 0,
            writer: String::new(),
        };
        let snapshot = Snapshot {
            manifest_id: crate::format::ObjectId::of(&manifest.encode()),
            manifest,
            tracks: Vec::new(),
        };
        Tree::build(snapshot).expect("an empty snapshot has no name clashes")
    }

    /// Builds the tree; a name used both as a file and as a directory is an
    /// error naming the path.
    pub fn build(snapshot: Snapshot) -> Result<Tree, TreeError> {
        let mut b = Builder {
            nodes: vec![Node {
                name: "".into(),
                parent: Self::ROOT,
                kind: NodeKind::Dir(Vec::new()),
            }],
            dirs: foldhash::HashMap::default(),
            dir_attrs: foldhash::HashMap::default(),
        };
        for timeline in &snapshot.manifest.timelines {
            b.dir(Self::ROOT, timeline)?;
        }
        let mut items = Vec::new();
        let mut tracks = Vec::with_capacity(snapshot.tracks.len());
        for track in snapshot.tracks {
            let timeline = b.dir(Self::ROOT, &track.timeline)?;
            let modality = b.dir(timeline, &track.modality)?;
            tracks.push(TrackSpan {
                first_item: u32::try_from(items.len()).map_err(|_| TreeError::TooLarge)?,
                timeline: track.timeline.clone(),
                modality: track.modality.clone(),
                track: track.track_id,
            });
            let mut dir_attrs = Vec::new();
            for dir in &track.dirs {
                let mut at = modality;
                for part in dir.name.split('/').filter(|p| !p.is_empty()) {
                    at = b.dir(at, part)?;
                }
                if dir.attrs != Attrs::default() {
                    dir_attrs.push((at, dir.attrs));
                }
            }
            b.dir_attrs.extend(dir_attrs);
            let first = items.len();
            for (k, item) in track.items.iter().enumerate() {
                let index = u32::try_from(first + k).map_err(|_| TreeError::TooLarge)?;
                let (dirs, file) = item.name.rsplit_once('/').unwrap_or(("", &item.name));
                let mut dir = modality;
                for part in dirs.split('/').filter(|p| !p.is_empty()) {
                    dir = b.dir(dir, part)?;
                }
                b.add(dir, file, NodeKind::File(index))?;
            }
            // Moved, not copied, when it is the first Track (a copy of a
            // million items is 100 MB more at the peak of a mount).
            if items.is_empty() {
                items = track.items;
            } else {
                items.append(&mut { track.items });
            }
        }
        let dir_attrs = std::mem::take(&mut b.dir_attrs);
        let nodes = b.finish()?;
        Ok(Tree {
            dir_attrs,
            total_bytes: items.iter().map(|i| i.size).sum(),
            nodes,
            items,
            tracks,
            manifest_id: snapshot.manifest_id,
            ts_unix_ns: snapshot.manifest.ts_unix_ns,
        })
    }

    pub fn node(&self, id: NodeId) -> Option<&Node> {
        self.nodes.get(id as usize)
    }

    /// Items of the snapshot, of all Tracks.
    pub fn item_count(&self) -> u32 {
        self.items.len() as u32
    }

    pub fn item(&self, index: u32) -> &Item {
        &self.items[index as usize]
    }

    /// The attributes recorded for directory `id` (none for most).
    pub fn dir_attrs(&self, id: NodeId) -> Attrs {
        self.dir_attrs.get(&id).copied().unwrap_or_default()
    }

    /// The child `name` of directory `dir`.
    pub fn lookup(&self, dir: NodeId, name: &[u8]) -> Option<NodeId> {
        let NodeKind::Dir(children) = &self.node(dir)?.kind else {
            return None;
        };
        children
            .binary_search_by(|c| self.nodes[*c as usize].name.as_bytes().cmp(name))
            .ok()
            .map(|i| children[i])
    }

    /// Resolves a `/`-separated path from the root (empty or `/` is the root).
    pub fn resolve(&self, path: &str) -> Result<NodeId, TreeError> {
        let mut node = Self::ROOT;
        let mut walked = String::new();
        for part in path.split('/').filter(|p| !p.is_empty() && *p != ".") {
            walked.push('/');
            walked.push_str(part);
            if matches!(self.nodes[node as usize].kind, NodeKind::File(_)) {
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
    pub fn resolve_file(&self, path: &str) -> Result<&Item, TreeError> {
        match self.nodes[self.resolve(path)? as usize].kind {
            NodeKind::File(item) => Ok(self.item(item)),
            NodeKind::Dir(_) => Err(TreeError::IsADirectory {
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
        self.nodes.len()
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

struct Builder {
    nodes: Vec<Node>,
    /// Directories by parent and name; files need no index because Track
    /// names are unique, and a file meeting a directory of the same name is
    /// found when the children are sorted.
    dirs: foldhash::HashMap<NodeId, foldhash::HashMap<Box<str>, NodeId>>,
    dir_attrs: foldhash::HashMap<NodeId, Attrs>,
}

impl Builder {
    fn path(nodes: &[Node], mut id: NodeId) -> String {
        let mut parts = Vec::new();
        while id != Tree::ROOT {
            parts.push(&*nodes[id as usize].name);
            id = nodes[id as usize].parent;
        }
        parts.reverse();
        format!("/{}", parts.join("/"))
    }

    fn add(&mut self, parent: NodeId, name: &str, kind: NodeKind) -> Result<NodeId, TreeError> {
        let id = NodeId::try_from(self.nodes.len()).map_err(|_| TreeError::TooLarge)?;
        self.nodes.push(Node {
            name: name.into(),
            parent,
            kind,
        });
        if let NodeKind::Dir(children) = &mut self.nodes[parent as usize].kind {
            children.push(id);
        }
        Ok(id)
    }

    fn dir(&mut self, parent: NodeId, name: &str) -> Result<NodeId, TreeError> {
        if let Some(&id) = self.dirs.get(&parent).and_then(|d| d.get(name)) {
            return Ok(id);
        }
        let id = self.add(parent, name, NodeKind::Dir(Vec::new()))?;
        self.dirs.entry(parent).or_default().insert(name.into(), id);
        Ok(id)
    }

    /// Sorts every directory's children by name and refuses a name used
    /// twice in one directory (a file and a directory).
    fn finish(mut self) -> Result<Vec<Node>, TreeError> {
        for i in 0..self.nodes.len() {
            let NodeKind::Dir(children) = &mut self.nodes[i].kind else {
                continue;
            };
            let mut children = std::mem::take(children);
            let nodes = &self.nodes;
            children.sort_unstable_by(|a, b| nodes[*a as usize].name.cmp(&nodes[*b as usize].name));
            if let Some(pair) = children
                .windows(2)
                .find(|w| nodes[w[0] as usize].name == nodes[w[1] as usize].name)
            {
                let dir = pair
                    .iter()
                    .find(|c| matches!(nodes[**c as usize].kind, NodeKind::Dir(_)))
                    .unwrap_or(&pair[0]);
                return Err(TreeError::Conflict {
                    path: Self::path(nodes, *dir),
                    detail:
                        "is a file in the dataset but another item's name uses it as a directory",
                });
            }
            self.nodes[i].kind = NodeKind::Dir(children);
        }
        Ok(self.nodes)
    }
}
