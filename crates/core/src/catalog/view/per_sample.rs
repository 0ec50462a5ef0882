//! The per-sample view: `/<timeline>/<key>/<member>`, one directory per
//! sample holding every modality's file of it (`/train/cat/0001/0001.jpg`
//! and `/train/cat/0001/0001.txt`), for loaders that take a directory per
//! example. A member's bytes are its item's: the same map as in the
//! dataset's own tree.
//!
//! Nothing is read at mount. The first look into a timeline plans it: one
//! pass over its samples, page by page, keeps the directories their keys
//! are in (a key's directory holds a run of samples, as samples are in
//! the order of their keys' directories) and a cursor every few samples,
//! not the samples. A sample directory is found by a binary search of its
//! directory's run; a directory is listed by streaming its run, and kept
//! listed for the directories listed lately.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::num::NonZeroUsize;
use std::ops::Range;
use std::sync::{Arc, OnceLock};
use std::time::SystemTime;

use parking_lot::Mutex;

use super::catalog_error;
use super::samples::{Sample, Samples, Timeline};
use crate::catalog::{Catalog, CatalogError, Entry};
use crate::extents::Extents;
use crate::kind::Kind;
use crate::tree::{Tree, TreeError};
use packfs_format::{time_of_ns, Attrs};

/// Directory listings kept: `ls -R`, `find` and a loader walk a few
/// directories at a time.
const LISTINGS: NonZeroUsize = NonZeroUsize::new(8).expect("not zero");

/// A node of the view, as its id says (ids need no plan): bits 46.. the
/// kind, 32..46 the timeline (of at most 16,384), below that the
/// directory, sample or item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Node {
    Root,
    /// Directory `d` of timeline `t` (0: the timeline's own).
    Dir {
        t: usize,
        d: u32,
    },
    /// The directory of sample `n` of timeline `t`.
    Sample {
        t: usize,
        n: u32,
    },
    /// A member file: the item's.
    File(u32),
}

const KIND: u32 = 46;
const TIMELINE: u32 = 32;
const _: () = assert!(KIND + 2 <= crate::catalog::ID_BITS);

impl Node {
    fn id(self) -> u64 {
        let (kind, t, value) = match self {
            Node::Root => return 0,
            Node::Dir { t, d } => (1, t, d),
            Node::Sample { t, n } => (2, t, n),
            Node::File(item) => (3, 0, item),
        };
        (kind << KIND) | ((t as u64) << TIMELINE) | u64::from(value)
    }

    fn of(id: u64) -> Option<Node> {
        let t = ((id >> TIMELINE) & ((1 << (KIND - TIMELINE)) - 1)) as usize;
        let value = id as u32;
        Some(match id >> KIND {
            0 if id == 0 => Node::Root,
            1 => Node::Dir { t, d: value },
            2 => Node::Sample { t, n: value },
            3 => Node::File(value),
            _ => return None,
        })
    }
}

/// A directory keys are in, or one above such.
struct Dir {
    /// Its last segment (`""` for the timeline's own).
    name: Box<str>,
    parent: u32,
    /// Its subdirectories, by name.
    subdirs: Vec<u32>,
    /// The samples whose keys are directly in it.
    samples: Range<u64>,
    /// The sample whose key is this directory's path, if any (`a/b` for
    /// `a/b/`): its members are files here. Found when first needed.
    own: OnceLock<Option<u64>>,
}

/// Where a timeline's samples and directories are.
struct Plan {
    samples: Samples,
    dirs: Vec<Dir>,
    /// Each directory holding samples, by its run's first sample.
    runs: Vec<(u64, u32)>,
}

/// A directory's entries, by name, or why it cannot be shown.
type Listing = Result<Arc<Vec<(u64, Box<str>)>>, String>;

/// The sample directories of a snapshot.
pub(crate) struct PerSampleCatalog {
    tree: Arc<Tree>,
    timelines: Vec<Timeline<Plan>>,
    listings: Mutex<lru::LruCache<u64, Listing>>,
    mtime: SystemTime,
}

/// Two samples' paths cannot both be shown: one's member file has the
/// name another needs as a directory.
#[derive(Debug, thiserror::Error)]
#[error("the samples view cannot show /{path}: it is a member file of one sample and a directory of another")]
pub struct PathConflict {
    path: String,
}

impl From<PathConflict> for CatalogError {
    fn from(e: PathConflict) -> Self {
        CatalogError(e.to_string())
    }
}

/// The part of `key` after its last `/`.
fn leaf(key: &str) -> &str {
    key.rsplit_once('/').map_or(key, |(_, leaf)| leaf)
}

/// The part of `key` before its last `/` (`""` for a key at the top).
fn dir_of(key: &str) -> &str {
    key.rsplit_once('/').map_or("", |(dir, _)| dir)
}

/// The base name of a member path.
fn base(path: &str) -> &str {
    leaf(path)
}

impl PerSampleCatalog {
    /// The sample directories of `tree`; nothing is read until a timeline
    /// is looked into.
    pub(crate) fn new(tree: Arc<Tree>) -> Self {
        PerSampleCatalog {
            mtime: time_of_ns(tree.ts_unix_ns() as i64),
            timelines: Timeline::all(&tree),
            tree,
            listings: Mutex::new(lru::LruCache::new(LISTINGS)),
        }
    }

    fn plan(&self, t: usize) -> Result<&Plan, CatalogError> {
        let timeline = self
            .timelines
            .get(t)
            .ok_or_else(|| CatalogError(format!("the samples view has no timeline number {t}")))?;
        timeline.plan(|name| plan(&self.tree, name))
    }

    /// Sample `n` of timeline `t`.
    fn sample(&self, t: usize, n: u64) -> Result<Option<Sample>, CatalogError> {
        let mut found = None;
        self.plan(t)?
            .samples
            .range(&self.tree, n..n + 1, &mut |_, s| {
                found = Some(s);
                Ok(())
            })
            .map_err(catalog_error)?;
        Ok(found)
    }

    /// The sample of directory `dir`'s run whose key's last segment is
    /// `name`, by binary search (each probe a walk from a cursor).
    fn sample_named(&self, t: usize, dir: &Dir, name: &str) -> Result<Option<u64>, CatalogError> {
        let (mut low, mut high) = (dir.samples.start, dir.samples.end);
        while low < high {
            let mid = low + (high - low) / 2;
            let Some(sample) = self.sample(t, mid)? else {
                return Ok(None);
            };
            match leaf(&sample.key).cmp(name) {
                std::cmp::Ordering::Equal => return Ok(Some(mid)),
                std::cmp::Ordering::Less => low = mid + 1,
                std::cmp::Ordering::Greater => high = mid,
            }
        }
        Ok(None)
    }

    /// The sample whose key is directory `d`'s path.
    fn own(&self, t: usize, d: u32) -> Result<Option<u64>, CatalogError> {
        let plan = self.plan(t)?;
        let dir = &plan.dirs[d as usize];
        if let Some(own) = dir.own.get() {
            return Ok(*own);
        }
        let own = match d {
            0 => None,
            _ => self.sample_named(t, &plan.dirs[dir.parent as usize], &dir.name)?,
        };
        Ok(*dir.own.get_or_init(|| own))
    }

    /// The entries of directory `node`, by name; cached.
    fn listing(&self, node: Node) -> Listing {
        let id = node.id();
        if let Some(listing) = self.listings.lock().get(&id) {
            return listing.clone();
        }
        let listing = self.list(node).map(Arc::new).map_err(|e| e.0);
        if let Err(e) = &listing {
            tracing::error!("{e}");
        }
        self.listings.lock().put(id, listing.clone());
        listing
    }

    fn list(&self, node: Node) -> Result<Vec<(u64, Box<str>)>, CatalogError> {
        let mut entries: Vec<(u64, Box<str>)> = Vec::new();
        let (t, own) = match node {
            Node::Root => {
                return Ok((0..self.timelines.len())
                    .map(|t| {
                        (
                            Node::Dir { t, d: 0 }.id(),
                            self.timelines[t].name.as_str().into(),
                        )
                    })
                    .collect())
            }
            Node::File(_) => return Ok(entries),
            Node::Sample { t, n } => (t, Some(u64::from(n))),
            Node::Dir { t, d } => {
                let plan = self.plan(t)?;
                let dir = &plan.dirs[d as usize];
                for &s in &dir.subdirs {
                    let name = plan.dirs[s as usize].name.clone();
                    entries.push((Node::Dir { t, d: s }.id(), name));
                }
                let subdirs = entries.len();
                plan.samples
                    .range(&self.tree, dir.samples.clone(), &mut |n, sample| {
                        let name = leaf(&sample.key);
                        // A sample whose directory is also a directory of
                        // keys is that directory.
                        let is_subdir = entries[..subdirs]
                            .binary_search_by(|(_, s)| (**s).cmp(name))
                            .is_ok();
                        if !is_subdir {
                            entries.push((Node::Sample { t, n: n as u32 }.id(), name.into()));
                        }
                        Ok(())
                    })
                    .map_err(catalog_error)?;
                (t, self.own(t, d)?)
            }
        };
        if let Some(n) = own {
            let sample = self.sample(t, n)?.ok_or_else(|| {
                CatalogError(format!("the samples view has no sample number {n}"))
            })?;
            for member in &sample.members {
                entries.push((Node::File(member.item).id(), base(&member.path).into()));
            }
        }
        entries.sort_unstable_by(|a, b| a.1.cmp(&b.1));
        if let Some(pair) = entries.windows(2).find(|w| w[0].1 == w[1].1) {
            return Err(self.conflict(node, &pair[0].1)?.into());
        }
        Ok(entries)
    }

    /// The conflict of `name` in directory `node`, naming its path.
    fn conflict(&self, node: Node, name: &str) -> Result<PathConflict, CatalogError> {
        let mut parts = vec![name.to_string()];
        let (t, mut d) = match node {
            Node::Dir { t, d } => (t, d),
            Node::Sample { t, n } => {
                let key = self.sample(t, u64::from(n))?.map(|s| s.key);
                let key = key.as_deref().unwrap_or("?");
                let path = format!("{}/{key}/{name}", self.timelines[t].name);
                return Ok(PathConflict { path });
            }
            Node::Root | Node::File(_) => return Ok(PathConflict { path: name.into() }),
        };
        let plan = self.plan(t)?;
        while d != 0 {
            parts.push(plan.dirs[d as usize].name.to_string());
            d = plan.dirs[d as usize].parent;
        }
        parts.push(self.timelines[t].name.clone());
        parts.reverse();
        Ok(PathConflict {
            path: parts.join("/"),
        })
    }

    fn dir_entry(&self) -> Entry {
        super::dir_entry(self.mtime)
    }
}

/// The plan of `timeline`: its samples, and the directories their keys
/// are in, each with its run of samples.
fn plan(tree: &Tree, timeline: &str) -> Result<Plan, TreeError> {
    // Runs of samples by key directory: (directory, first sample).
    let mut runs: Vec<(Box<str>, u64)> = Vec::new();
    let samples = Samples::scan(tree, timeline, &mut |n, sample| {
        if n == 0 {
            runs.clear();
        }
        let dir = dir_of(&sample.key);
        if runs.last().is_none_or(|(last, _)| **last != *dir) {
            runs.push((dir.into(), n));
        }
        Ok(())
    })?;
    let count = samples.len();
    // Every run's directory and those above it, by path.
    let mut paths: BTreeMap<&str, Range<u64>> = BTreeMap::new();
    paths.insert("", 0..0);
    for (i, (dir, first)) in runs.iter().enumerate() {
        let end = runs.get(i + 1).map_or(count, |r| r.1);
        paths.insert(dir, *first..end);
        let mut above = &**dir;
        while !above.is_empty() {
            above = dir_of(above);
            paths.entry(above).or_insert(0..0);
        }
    }
    let index: BTreeMap<&str, u32> = paths.keys().zip(0..).map(|(p, i)| (*p, i)).collect();
    let mut dirs: Vec<Dir> = paths
        .iter()
        .map(|(path, samples)| Dir {
            name: leaf(path).into(),
            parent: match path.is_empty() {
                true => 0,
                false => index[dir_of(path)],
            },
            subdirs: Vec::new(),
            samples: samples.clone(),
            own: OnceLock::new(),
        })
        .collect();
    for d in 1..dirs.len() {
        let parent = dirs[d].parent as usize;
        dirs[parent].subdirs.push(d as u32);
    }
    // Paths in byte order list a directory's subdirectories by name but
    // for a name with a byte below `/` (`a-b` sorts before `a/c`).
    for d in 0..dirs.len() {
        let mut subdirs = std::mem::take(&mut dirs[d].subdirs);
        subdirs.sort_unstable_by(|&a, &b| dirs[a as usize].name.cmp(&dirs[b as usize].name));
        dirs[d].subdirs = subdirs;
    }
    let runs = runs
        .iter()
        .map(|(dir, first)| (*first, index[&**dir]))
        .collect();
    Ok(Plan {
        samples,
        dirs,
        runs,
    })
}

impl Catalog for PerSampleCatalog {
    fn entry(&self, id: u64) -> Result<Option<Entry>, CatalogError> {
        let Some(node) = Node::of(id) else {
            return Ok(None);
        };
        Ok(match node {
            Node::Root => Some(self.dir_entry()),
            // A timeline's directory needs no plan: it is there even when
            // its index cannot be read.
            Node::Dir { t, d: 0 } => (t < self.timelines.len()).then(|| self.dir_entry()),
            Node::Dir { t, d } => (t < self.timelines.len()
                && (d as usize) < self.plan(t)?.dirs.len())
            .then(|| self.dir_entry()),
            Node::Sample { t, n } => (t < self.timelines.len()
                && u64::from(n) < self.plan(t)?.samples.len())
            .then(|| self.dir_entry()),
            Node::File(item) => {
                if item >= self.tree.item_count() {
                    return Ok(None);
                }
                let item = self.tree.item(item).map_err(catalog_error)?;
                Some(Entry {
                    kind: Kind::File,
                    size: item.size(),
                    perm: item.attrs().mode.unwrap_or(Attrs::DEFAULT_FILE_MODE) & !0o222,
                    mtime: item.attrs().mtime_ns.map_or(self.mtime, time_of_ns),
                    volatile: false,
                })
            }
        })
    }

    fn lookup(&self, dir: u64, name: &[u8]) -> Result<Option<u64>, CatalogError> {
        let (Some(node), Ok(name)) = (Node::of(dir), std::str::from_utf8(name)) else {
            return Ok(None);
        };
        let (t, found, own) = match node {
            Node::Root => {
                let t = self.timelines.iter().position(|t| t.name == name);
                return Ok(t.map(|t| Node::Dir { t, d: 0 }.id()));
            }
            Node::File(_) => return Ok(None),
            Node::Sample { t, n } => (t, None, Some(u64::from(n))),
            Node::Dir { t, d } => {
                let plan = self.plan(t)?;
                let Some(dir) = plan.dirs.get(d as usize) else {
                    return Ok(None);
                };
                let subdir = dir
                    .subdirs
                    .binary_search_by(|&s| (*plan.dirs[s as usize].name).cmp(name))
                    .ok()
                    .map(|i| Node::Dir {
                        t,
                        d: dir.subdirs[i],
                    });
                let found = match subdir {
                    Some(subdir) => Some(subdir),
                    None => self
                        .sample_named(t, dir, name)?
                        .map(|n| Node::Sample { t, n: n as u32 }),
                };
                (t, found, self.own(t, d)?)
            }
        };
        // A member file of the directory's own sample.
        let member = match own {
            Some(n) => self.sample(t, n)?.and_then(|sample| {
                let member = sample.members.iter().find(|m| base(&m.path) == name)?;
                Some(Node::File(member.item))
            }),
            None => None,
        };
        match (found, member) {
            (Some(_), Some(_)) => Err(self.conflict(node, name)?.into()),
            (found, member) => Ok(found.or(member).map(Node::id)),
        }
    }

    fn child(&self, dir: u64, index: usize) -> Option<(u64, Cow<'_, str>)> {
        let listing = self.listing(Node::of(dir)?).ok()?;
        let (id, name) = listing.get(index)?;
        Some((*id, Cow::Owned(name.to_string())))
    }

    fn parent(&self, dir: u64) -> Option<u64> {
        match Node::of(dir)? {
            Node::Root | Node::File(_) => None,
            Node::Dir { t: _, d: 0 } => Some(0),
            Node::Dir { t, d } => {
                let parent = self.plan(t).ok()?.dirs.get(d as usize)?.parent;
                Some(Node::Dir { t, d: parent }.id())
            }
            Node::Sample { t, n } => {
                let runs = &self.plan(t).ok()?.runs;
                let run = runs.partition_point(|&(first, _)| first <= u64::from(n));
                let d = runs.get(run.checked_sub(1)?)?.1;
                Some(Node::Dir { t, d }.id())
            }
        }
    }

    fn extents(&self, id: u64, range: Range<u64>) -> Result<Option<Extents>, CatalogError> {
        match Node::of(id) {
            Some(Node::File(item)) if item < self.tree.item_count() => {
                let item = self.tree.item_data(item).map_err(catalog_error)?;
                Ok(Some(Extents::of_item(&item, range)))
            }
            _ => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::view::tests::{files, items, read, tree_and_reader, tree_and_store_of};

    #[tokio::test]
    async fn every_item_is_a_file_of_its_sample_directory() {
        let (tree, reader) = tree_and_reader().await;
        let catalog = PerSampleCatalog::new(tree);
        let mut shown = std::collections::HashMap::new();
        for (path, id) in files(&catalog, 0, "") {
            let size = catalog.entry(id).unwrap().unwrap().size;
            shown.insert(path, read(&catalog, &reader, id, 0..size).await);
        }
        let mut expected = std::collections::HashMap::new();
        for (timeline, modality, name, bytes) in items() {
            let key = &name[..crate::catalog::view::samples::key_len(&name)];
            let base = name.rsplit('/').next().unwrap();
            let base = match modality {
                "thumb" => base.replace(".jpg", ".thumb.jpg"),
                _ => base.to_string(),
            };
            expected.insert(format!("/{timeline}/{key}/{base}"), bytes);
        }
        assert_eq!(shown, expected);
    }

    /// The view of items `names` of modality `image` of timeline `t`.
    async fn catalog_of(names: &[&str]) -> PerSampleCatalog {
        let items = names
            .iter()
            .map(|n| ("t", "image", n.to_string(), n.as_bytes().to_vec()))
            .collect();
        let (tree, _) = tree_and_store_of(items).await;
        PerSampleCatalog::new(tree)
    }

    /// Sample `x`'s directory is also the directory of key `x/y`: one
    /// directory holds both (`/t/x/x.jpg` and `/t/x/y/y.jpg`).
    #[tokio::test]
    async fn a_sample_directory_that_holds_keys_is_one_directory() {
        let catalog = catalog_of(&["x.jpg", "x/y.jpg", "x/z/w.jpg"]).await;
        let paths: Vec<String> = files(&catalog, 0, "").into_iter().map(|(p, _)| p).collect();
        assert_eq!(paths, ["/t/x/x.jpg", "/t/x/y/y.jpg", "/t/x/z/w/w.jpg"]);
    }

    /// Sample `x` has the member `x.seg.png`; the key `x/x.seg.png/y`
    /// needs it as a directory. That directory cannot be shown, and says
    /// why; the rest of the view can.
    #[tokio::test]
    async fn a_member_file_that_another_sample_needs_as_a_directory_is_refused() {
        let catalog = catalog_of(&["x.seg.png", "x/x.seg.png/y.jpg", "z.jpg"]).await;
        let t = catalog.lookup(0, b"t").unwrap().unwrap();
        let x = catalog.lookup(t, b"x").unwrap().unwrap();
        let e = catalog.lookup(x, b"x.seg.png").unwrap_err();
        assert_eq!(e.to_string(), "the samples view cannot show /t/x/x.seg.png: it is a member file of one sample and a directory of another");
        assert!(catalog.child(x, 0).is_none(), "the directory lists nothing");
        let z = catalog.lookup(t, b"z").unwrap().unwrap();
        assert!(catalog.lookup(z, b"z.jpg").unwrap().is_some());
    }
}
