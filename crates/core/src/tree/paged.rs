//! A tree over paged Tracks that loads what it is asked for: ready once
//! the Manifest and the Tracks' roots are read, whatever the item count;
//! a lookup, a `stat` or a listing reads the name pages that hold its
//! names, through a cache of pages under a bound of bytes
//! (`docs/ARCHITECTURE.md`, The tree).
//!
//! Node ids stay the same for the life of the tree without a table of the
//! items: a file's is its item's index, which the root's per-page item
//! counts give (page `j` holds the items from the sum of the counts
//! before it); a directory gets one the first time it is met, kept.

use std::collections::HashMap;
use std::future::Future;
use std::num::NonZeroUsize;
use std::sync::Arc;

use packfs_format::{
    Attrs, FormatError, Manifest, ObjectId, PackLengths, Special, TrackEntry, TrackRoot,
};
use parking_lot::{Mutex, RwLock};

use super::node::{
    id_is_file, join, leaf, parent_path, Child, Look, Node, NodeId, NodeKind, TrackSpan, TreeError,
    TreeItem, FILE, MAX_ITEMS, ROOT,
};
use super::pages::{Page, PageCache, Row};
use crate::dataset::{Dataset, DatasetError, ItemData, ItemSource};

/// One paged Track of the tree.
struct Track {
    entry: TrackEntry,
    root: Arc<TrackRoot>,
    /// The tree's index of each name page's first item, and after the
    /// last page the index after its last item.
    firsts: Vec<u32>,
}

/// The root and the timeline directories: known from the Manifest.
struct FixedDir {
    name: String,
    parent: NodeId,
    /// Sorted by name.
    children: Vec<(String, NodeId)>,
}

/// A directory of a Track, met in a lookup, a listing or a file's path.
struct MetDir {
    track: u32,
    /// Below the modality directory (`""` is the modality directory).
    path: Box<str>,
    parent: NodeId,
    /// What its row records, once read.
    attrs: Option<Attrs>,
}

#[derive(Default)]
struct Dirs {
    dirs: Vec<MetDir>,
    /// Per Track, its directories' ids by path.
    by_path: Vec<HashMap<Box<str>, NodeId>>,
}

pub(super) struct Paged {
    dataset: Dataset,
    runtime: tokio::runtime::Handle,
    tracks: Vec<Track>,
    fixed: Vec<FixedDir>,
    /// Track directories are ids `fixed.len()..`.
    dirs: RwLock<Dirs>,
    pages: Arc<PageCache>,
    /// Pack pages' lengths by (Track, pack page), the most recently used.
    packs: Mutex<lru::LruCache<(u32, u32), Arc<PackLengths>>>,
}

/// Pack pages whose lengths a tree keeps (a pack page records up to 4,096
/// packs, ~300 KB of lengths).
const PACK_PAGES_KEPT: NonZeroUsize = NonZeroUsize::new(64).unwrap();

/// What [`Paged::open`] makes of a Manifest.
pub(super) struct Opened {
    pub(super) tree: Paged,
    pub(super) spans: Vec<TrackSpan>,
    pub(super) total_bytes: u64,
}

/// A position in a directory listing: (page, row) of the next entry, one
/// more (0 is the start).
fn position(cookie: u64) -> Option<(usize, usize)> {
    let at = cookie.checked_sub(1)?;
    Some(((at >> 32) as usize, (at & u64::from(u32::MAX)) as usize))
}

fn cookie(page: usize, row: usize) -> u64 {
    ((page as u64) << 32 | row as u64) + 1
}

impl Paged {
    /// The tree of `manifest`, whose Tracks are the paged `roots` (in the
    /// Manifest's order, name pages listed), holding at most
    /// `index_bytes` of name pages.
    pub(super) fn open(
        dataset: Dataset,
        manifest: &Manifest,
        roots: Vec<Arc<TrackRoot>>,
        index_bytes: usize,
    ) -> Result<Opened, TreeError> {
        let mut fixed = vec![FixedDir {
            name: String::new(),
            parent: ROOT,
            children: Vec::new(),
        }];
        let mut timelines: Vec<&str> = manifest.timelines.iter().map(String::as_str).collect();
        timelines.extend(manifest.tracks.iter().map(|t| t.timeline.as_str()));
        timelines.sort_unstable();
        timelines.dedup();
        for name in &timelines {
            let id = fixed.len() as NodeId;
            fixed[0].children.push((name.to_string(), id));
            fixed.push(FixedDir {
                name: name.to_string(),
                parent: ROOT,
                children: Vec::new(),
            });
        }
        let mut tracks = Vec::with_capacity(roots.len());
        let mut spans = Vec::with_capacity(roots.len());
        let mut dirs = Dirs::default();
        let (mut next, mut total_bytes) = (0u64, 0u64);
        for (t, (entry, root)) in manifest.tracks.iter().zip(roots).enumerate() {
            let first = next;
            let mut firsts = Vec::with_capacity(root.pages.len() + 1);
            for page in &root.pages {
                firsts.push(next as u32);
                next += page.items;
                if next > MAX_ITEMS {
                    return Err(TreeError::TooLarge);
                }
            }
            firsts.push(next as u32);
            total_bytes += root.bytes;
            let timeline = 1 + timelines.binary_search(&entry.timeline.as_str()).unwrap();
            let dir = (fixed.len() + dirs.dirs.len()) as NodeId;
            let parent = &mut fixed[timeline].children;
            if parent.iter().any(|(name, _)| *name == entry.modality) {
                return Err(TreeError::Conflict {
                    path: format!("/{}/{}", entry.timeline, entry.modality),
                    detail: "the Manifest lists two Tracks for it",
                });
            }
            parent.push((entry.modality.clone(), dir));
            dirs.dirs.push(MetDir {
                track: t as u32,
                path: "".into(),
                parent: timeline as NodeId,
                attrs: None,
            });
            dirs.by_path.push(HashMap::from([(Box::from(""), dir)]));
            spans.push(TrackSpan {
                first_item: first as u32,
                len: (next - first) as u32,
                timeline: entry.timeline.clone(),
                modality: entry.modality.clone(),
                track: entry.track,
            });
            tracks.push(Track {
                entry: entry.clone(),
                root,
                firsts,
            });
        }
        for dir in &mut fixed {
            dir.children.sort_unstable();
        }
        let tree = Paged {
            dataset,
            runtime: tokio::runtime::Handle::current(),
            tracks,
            fixed,
            dirs: RwLock::new(dirs),
            pages: Arc::new(PageCache::new(index_bytes)),
            packs: Mutex::new(lru::LruCache::new(PACK_PAGES_KEPT)),
        };
        Ok(Opened {
            tree,
            spans,
            total_bytes,
        })
    }

    /// Runs `future` to its end from a synchronous call.
    fn wait<T>(&self, future: impl Future<Output = T>) -> T {
        crate::blocking::wait(&self.runtime, future)
    }

    /// Name page `j` of Track `t`, read unless it is held.
    fn page(&self, t: usize, j: usize) -> Result<Arc<Page>, TreeError> {
        let key = (t as u32, j as u32);
        if let Some(page) = self.pages.get(key) {
            return Ok(page);
        }
        let track = &self.tracks[t];
        let loaded = self.wait(self.dataset.name_page_table(&track.root, j, &track.entry));
        let (table, dirs) = loaded?;
        Ok(self.pages.insert(key, Page::new(table, dirs)))
    }

    /// Reads name page `j` of Track `t` in the background unless it is
    /// held or coming: a listing whose run goes on past a page will ask
    /// for the next one (`find`, `ls -lR`), and should find it decoded.
    fn read_ahead(&self, t: usize, j: usize) {
        let key = (t as u32, j as u32);
        let track = &self.tracks[t];
        if j >= track.root.pages.len() || !self.pages.claim(key) {
            return;
        }
        let (dataset, pages) = (self.dataset.clone(), self.pages.clone());
        let (root, entry) = (track.root.clone(), track.entry.clone());
        let runtime = self.runtime.clone();
        // Decoding takes a millisecond or two: off the runtime's workers.
        self.runtime.spawn_blocking(move || {
            // A page that fails is left to the listing, which reports it.
            if let Ok((table, dirs)) = runtime.block_on(dataset.name_page_table(&root, j, &entry)) {
                pages.insert(key, Page::new(table, dirs));
            }
            pages.arrived(key);
        });
    }

    /// Whether `id` names a fixed directory, and which.
    fn fixed(&self, id: NodeId) -> Option<&FixedDir> {
        self.fixed.get(id as usize)
    }

    /// The Track directory `id`: its Track and path.
    fn track_dir(&self, id: NodeId) -> Option<(usize, Box<str>)> {
        let k = (id as usize).checked_sub(self.fixed.len())?;
        let dirs = self.dirs.read();
        let d = dirs.dirs.get(k)?;
        Some((d.track as usize, d.path.clone()))
    }

    /// The id of directory `path` of Track `t`, given one the first time
    /// (with its parents'); `attrs` when its row is at hand.
    fn dir_id(&self, t: usize, path: &str, attrs: Option<Attrs>) -> NodeId {
        let known = {
            let dirs = self.dirs.read();
            let id = dirs.by_path[t].get(path).copied();
            id.map(|id| {
                (
                    id,
                    dirs.dirs[id as usize - self.fixed.len()].attrs.is_none(),
                )
            })
        };
        if let Some((id, unread)) = known {
            if unread && attrs.is_some() {
                self.set_attrs(id, attrs);
            }
            return id;
        }
        let parent = self.dir_id(t, parent_path(path), None);
        let mut dirs = self.dirs.write();
        if let Some(&id) = dirs.by_path[t].get(path) {
            return id;
        }
        let id = (self.fixed.len() + dirs.dirs.len()) as NodeId;
        dirs.dirs.push(MetDir {
            track: t as u32,
            path: path.into(),
            parent,
            attrs,
        });
        dirs.by_path[t].insert(path.into(), id);
        id
    }

    fn set_attrs(&self, id: NodeId, attrs: Option<Attrs>) {
        let k = id as usize - self.fixed.len();
        let mut dirs = self.dirs.write();
        if dirs.dirs[k].attrs.is_none() {
            dirs.dirs[k].attrs = attrs;
        }
    }

    /// The Track, page and row of item `index`.
    fn locate(&self, index: u32) -> Option<(usize, usize, usize)> {
        let t = self
            .tracks
            .partition_point(|t| t.firsts[0] <= index)
            .checked_sub(1)?;
        let firsts = &self.tracks[t].firsts;
        if index >= *firsts.last()? {
            return None;
        }
        let j = firsts.partition_point(|&f| f <= index) - 1;
        Some((t, j, (index - firsts[j]) as usize))
    }

    /// Item `index`; with `in_pass`, asked by a pass over items in order,
    /// which enters each page at its first row: the next page is then
    /// decoded while this one is read.
    pub(super) fn item(&self, index: u32, in_pass: bool) -> Result<Option<TreeItem>, TreeError> {
        let Some((t, j, r)) = self.locate(index) else {
            return Ok(None);
        };
        let page = self.page(t, j)?;
        if in_pass && r == 0 {
            self.read_ahead(t, j + 1);
        }
        Ok(Some(TreeItem::new(page.table().clone(), r)))
    }

    /// What reading item `index` needs: its pack's length, from the pack
    /// page recording it, or its chunks, from its ItemManifest (each read
    /// once and kept).
    pub(super) fn item_data(&self, index: u32) -> Result<Option<ItemData>, TreeError> {
        let Some((t, j, r)) = self.locate(index) else {
            return Ok(None);
        };
        let page = self.page(t, j)?;
        let row = page.table().get(r);
        let mut data = row.data();
        match &mut data.source {
            ItemSource::Whole { .. } => {}
            ItemSource::Packed { pack_len, .. } => {
                *pack_len = self.pack_len(t, &row.object_id())?
            }
            ItemSource::Chunked { chunks } => {
                let id = row.object_id();
                *chunks = match page.chunks(&id) {
                    Some(known) => known,
                    None => {
                        let entry = &self.tracks[t].entry;
                        let read = self.wait(self.dataset.item_chunks(entry, &id, data.size))?;
                        page.keep_chunks(id, read.clone());
                        read
                    }
                };
            }
        }
        Ok(Some(data))
    }

    /// The length pack `pack` of Track `t` must have: what the pack page
    /// recording it says.
    fn pack_len(&self, t: usize, pack: &ObjectId) -> Result<u64, TreeError> {
        let track = &self.tracks[t];
        let unrecorded = || {
            let what = format!(
                "track {}",
                self.dataset.store().layout().track(&track.entry.track)
            );
            let detail = "no length is recorded for it".into();
            let e = FormatError::Pack {
                what,
                pack: pack.to_hex(),
                detail,
            };
            TreeError::from(DatasetError::from(e))
        };
        let j = track.root.pack_page_of(pack).ok_or_else(unrecorded)?;
        let key = (t as u32, j as u32);
        let known = self.packs.lock().get(&key).cloned();
        let lengths = match known {
            Some(lengths) => lengths,
            None => {
                let read = self.wait(self.dataset.pack_page_lengths(&track.root, j, &track.entry));
                let lengths = Arc::new(read?);
                self.packs.lock().put(key, lengths.clone());
                lengths
            }
        };
        lengths.get(pack).copied().ok_or_else(unrecorded)
    }

    pub(super) fn node(&self, id: NodeId) -> Result<Option<Node>, TreeError> {
        if id_is_file(id) {
            let index = id & !FILE;
            let Some((t, j, r)) = self.locate(index) else {
                return Ok(None);
            };
            let page = self.page(t, j)?;
            let name = page.table().get(r).name();
            return Ok(Some(Node {
                name: leaf(name).to_string(),
                parent: self.dir_id(t, parent_path(name), None),
                kind: NodeKind::File(index),
            }));
        }
        if let Some(d) = self.fixed(id) {
            return Ok(Some(Node {
                name: d.name.clone(),
                parent: d.parent,
                kind: NodeKind::Dir,
            }));
        }
        let k = id as usize - self.fixed.len();
        let dirs = self.dirs.read();
        Ok(dirs.dirs.get(k).map(|d| Node {
            name: match d.path.is_empty() {
                true => self.tracks[d.track as usize].entry.modality.clone(),
                false => leaf(&d.path).to_string(),
            },
            parent: d.parent,
            kind: NodeKind::Dir,
        }))
    }

    /// The subdirectories of a fixed directory (all its children).
    pub(super) fn subdirs(&self, dir: NodeId) -> Option<u32> {
        self.fixed(dir).map(|d| d.children.len() as u32)
    }

    pub(super) fn is_dir(&self, id: NodeId) -> bool {
        !id_is_file(id) && (id as usize) < self.fixed.len() + self.dirs.read().dirs.len()
    }

    /// The child `name` of directory `dir`.
    pub(super) fn lookup(&self, dir: NodeId, name: &[u8]) -> Result<Option<NodeId>, TreeError> {
        if let Some(d) = self.fixed(dir) {
            let found = d
                .children
                .binary_search_by(|(n, _)| n.as_bytes().cmp(name))
                .ok();
            return Ok(found.map(|i| d.children[i].1));
        }
        let Some((t, path)) = self.track_dir(dir) else {
            return Ok(None);
        };
        let Ok(name) = std::str::from_utf8(name) else {
            return Ok(None);
        };
        if name.is_empty() || name.contains('/') {
            return Ok(None);
        }
        let full = join(&path, name);
        let Some(j) = self.tracks[t].root.page_of(&full) else {
            return Ok(None);
        };
        let page = self.page(t, j)?;
        let table = page.table().clone();
        let at = page.seek(&table, &full);
        let mut found = None;
        for r in at..page.len() {
            let (row, row_name) = page.row(&table, r);
            if row_name != full {
                break;
            }
            if found.is_some() {
                return Err(TreeError::Conflict {
                    path: format!("{}/{full}", self.tracks[t].entry.modality),
                    detail: "the Track lists it both as a file and as a directory",
                });
            }
            found = Some(match row {
                Row::Item(row) => FILE | (self.tracks[t].firsts[j] + row),
                Row::Dir(d) => self.dir_id(t, &full, Some(d.attrs)),
            });
        }
        Ok(found)
    }

    /// Feeds the children of `dir` from position `from` to `visit`, each
    /// with the position after it, until `visit` says stop. The children
    /// of a Track directory are one run of rows in name order, from the
    /// page its first child's name would be on.
    pub(super) fn children(
        &self,
        dir: NodeId,
        from: u64,
        mut visit: impl FnMut(Child<'_>) -> bool,
    ) -> Result<(), TreeError> {
        if let Some(d) = self.fixed(dir) {
            let start = usize::try_from(from).unwrap_or(usize::MAX);
            for (i, (name, id)) in d.children.iter().enumerate().skip(start) {
                let child = Child {
                    id: *id,
                    name,
                    next: i as u64 + 1,
                    look: Look::Dir {
                        attrs: self.dir_attrs(*id)?,
                        subdirs: self.subdirs(*id),
                    },
                };
                if visit(child) {
                    break;
                }
            }
            return Ok(());
        }
        let Some((t, path)) = self.track_dir(dir) else {
            return Ok(());
        };
        let track = &self.tracks[t];
        // The name of a child that would sort first: (path, "").
        let start = match path.is_empty() {
            true => String::new(),
            false => format!("{path}/"),
        };
        let (mut j, mut r, mut seek) = match position(from) {
            Some((j, r)) => (j, r, false),
            None => (track.root.page_of(&start).unwrap_or(0), 0, true),
        };
        while j < track.root.pages.len() {
            let page = self.page(t, j)?;
            let table = page.table().clone();
            if seek {
                r = page.seek(&table, &start);
                seek = false;
            }
            let last = page.len().checked_sub(1).map(|r| page.row(&table, r).1);
            if last.is_some_and(|name| !name.is_empty() && parent_path(name) == &*path) {
                self.read_ahead(t, j + 1);
            }
            while r < page.len() {
                let (row, name) = page.row(&table, r);
                r += 1;
                if name.is_empty() {
                    continue; // the modality directory itself
                }
                if parent_path(name) != &*path {
                    return Ok(());
                }
                let (id, look) = match row {
                    Row::Item(row) => {
                        let item = table.get(row as usize);
                        let look = Look::File {
                            size: item.size(),
                            attrs: item.attrs(),
                            special: Special::of_media_type(item.media_type()),
                        };
                        (FILE | (track.firsts[j] + row), look)
                    }
                    Row::Dir(d) => {
                        let look = Look::Dir {
                            attrs: d.attrs,
                            subdirs: None,
                        };
                        (self.dir_id(t, name, Some(d.attrs)), look)
                    }
                };
                let child = Child {
                    id,
                    name: leaf(name),
                    next: cookie(j, r),
                    look,
                };
                if visit(child) {
                    return Ok(());
                }
            }
            (j, r) = (j + 1, 0);
        }
        Ok(())
    }

    /// What directory `id`'s row records.
    pub(super) fn dir_attrs(&self, id: NodeId) -> Result<Attrs, TreeError> {
        let Some((t, path)) = self.track_dir(id) else {
            return Ok(Attrs::default());
        };
        let k = id as usize - self.fixed.len();
        if let Some(attrs) = self.dirs.read().dirs[k].attrs {
            return Ok(attrs);
        }
        let mut attrs = Attrs::default();
        if let Some(j) = self.tracks[t].root.page_of(&path) {
            let page = self.page(t, j)?;
            let table = page.table().clone();
            let at = page.seek(&table, &path);
            for r in at..page.len() {
                match page.row(&table, r) {
                    (Row::Dir(d), name) if name == &*path => attrs = d.attrs,
                    (_, name) if name == &*path => continue,
                    _ => break,
                }
            }
        }
        self.set_attrs(id, Some(attrs));
        Ok(attrs)
    }

    /// Directories met so far and items.
    pub(super) fn node_count(&self) -> usize {
        let items = self.tracks.iter().map(|t| t.root.items).sum::<u64>();
        self.fixed.len() + self.dirs.read().dirs.len() + items as usize
    }

    /// Bytes of name pages held now.
    pub(super) fn index_bytes(&self) -> usize {
        self.pages.bytes()
    }
}
