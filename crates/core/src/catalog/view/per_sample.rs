//! The per-sample view: `/<timeline>/<key>/<member>`, one directory per
//! sample holding every modality's file of it (`/train/cat/0001/0001.jpg`
//! and `/train/cat/0001/0001.txt`), for loaders that take a directory per
//! example. A member's bytes are its item's: the same map as in the
//! dataset's own tree.

use std::borrow::Cow;
use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;
use std::time::SystemTime;

use super::{catalog_error, samples, ViewError};
use crate::catalog::{Catalog, CatalogError, Entry};
use crate::extents::Extents;
use crate::kind::Kind;
use crate::tree::Tree;
use packfs_format::{time_of_ns, Attrs};

#[derive(Debug)]
enum Node {
    /// Children ids, sorted by name.
    Dir(Vec<u32>),
    /// Index of the item in the [`Tree`].
    File(u32),
}

/// The sample directories of a snapshot; ids index its nodes, 0 the root.
pub(crate) struct PerSampleCatalog {
    tree: Arc<Tree>,
    names: Vec<Box<str>>,
    parents: Vec<u32>,
    nodes: Vec<Node>,
    mtime: SystemTime,
}

/// Two samples' paths cannot both be shown: one's member file has the
/// name another needs as a directory.
#[derive(Debug, thiserror::Error)]
#[error("the samples view cannot show /{path}: it is a member file of one sample and a directory of another")]
pub struct PathConflict {
    path: String,
}

impl PerSampleCatalog {
    /// The sample directories of `tree`.
    pub(crate) fn new(tree: Arc<Tree>) -> Result<Self, ViewError> {
        let mut c = PerSampleCatalog {
            names: vec!["".into()],
            parents: vec![0],
            nodes: vec![Node::Dir(Vec::new())],
            mtime: time_of_ns(tree.ts_unix_ns() as i64),
            tree: Arc::clone(&tree),
        };
        let mut dirs: HashMap<(u32, Box<str>), u32> = HashMap::new();
        for timeline in samples(&tree)? {
            let top = c.dir(&mut dirs, 0, &timeline.timeline)?;
            for (key, members) in &timeline.samples {
                let sample = key
                    .split('/')
                    .filter(|p| !p.is_empty())
                    .try_fold(top, |dir, part| c.dir(&mut dirs, dir, part))?;
                for member in &timeline.members[members.start as usize..members.end as usize] {
                    let base = member.path.rsplit('/').next().unwrap_or(&member.path);
                    if dirs.contains_key(&(sample, base.into())) {
                        return Err(c.conflict(sample, base).into());
                    }
                    c.add(sample, base, Node::File(member.item));
                }
            }
        }
        for i in 0..c.nodes.len() {
            if let Node::Dir(children) = &mut c.nodes[i] {
                let mut children = std::mem::take(children);
                let names = &c.names;
                children.sort_unstable_by(|a, b| names[*a as usize].cmp(&names[*b as usize]));
                if let Some(pair) = children
                    .windows(2)
                    .find(|w| names[w[0] as usize] == names[w[1] as usize])
                {
                    return Err(c
                        .conflict(i as u32, &c.names[pair[0] as usize].clone())
                        .into());
                }
                c.nodes[i] = Node::Dir(children);
            }
        }
        Ok(c)
    }

    fn add(&mut self, parent: u32, name: &str, node: Node) -> u32 {
        let id = self.nodes.len() as u32;
        self.names.push(name.into());
        self.parents.push(parent);
        self.nodes.push(node);
        if let Node::Dir(children) = &mut self.nodes[parent as usize] {
            children.push(id);
        }
        id
    }

    /// The directory `name` in `parent`, added if new.
    fn dir(
        &mut self,
        dirs: &mut HashMap<(u32, Box<str>), u32>,
        parent: u32,
        name: &str,
    ) -> Result<u32, PathConflict> {
        if let Some(&id) = dirs.get(&(parent, name.into())) {
            return Ok(id);
        }
        let is_file = |c: &Self, id: u32| matches!(c.nodes[id as usize], Node::File(_));
        if let Node::Dir(children) = &self.nodes[parent as usize] {
            if children
                .iter()
                .any(|&c| is_file(self, c) && &*self.names[c as usize] == name)
            {
                return Err(self.conflict(parent, name));
            }
        }
        let id = self.add(parent, name, Node::Dir(Vec::new()));
        dirs.insert((parent, name.into()), id);
        Ok(id)
    }

    fn conflict(&self, dir: u32, name: &str) -> PathConflict {
        let mut parts = vec![name.to_string()];
        let mut at = dir;
        while at != 0 {
            parts.push(self.names[at as usize].to_string());
            at = self.parents[at as usize];
        }
        parts.reverse();
        PathConflict {
            path: parts.join("/"),
        }
    }
}

impl Catalog for PerSampleCatalog {
    fn entry(&self, id: u64) -> Result<Option<Entry>, CatalogError> {
        let Some(node) = self.nodes.get(id as usize) else {
            return Ok(None);
        };
        Ok(Some(match node {
            Node::Dir(_) => Entry {
                kind: Kind::Dir,
                size: 0,
                perm: 0o555,
                mtime: self.mtime,
                volatile: false,
            },
            Node::File(item) => {
                let item = self.tree.item(*item).map_err(catalog_error)?;
                Entry {
                    kind: Kind::File,
                    size: item.size(),
                    perm: item.attrs().mode.unwrap_or(Attrs::DEFAULT_FILE_MODE) & !0o222,
                    mtime: item.attrs().mtime_ns.map_or(self.mtime, time_of_ns),
                    volatile: false,
                }
            }
        }))
    }

    fn lookup(&self, dir: u64, name: &[u8]) -> Result<Option<u64>, CatalogError> {
        let Some(Node::Dir(children)) = self.nodes.get(dir as usize) else {
            return Ok(None);
        };
        let found = children.binary_search_by(|&c| self.names[c as usize].as_bytes().cmp(name));
        Ok(found.ok().map(|i| u64::from(children[i])))
    }

    fn child(&self, dir: u64, index: usize) -> Option<(u64, Cow<'_, str>)> {
        let Some(Node::Dir(children)) = self.nodes.get(dir as usize) else {
            return None;
        };
        let &id = children.get(index)?;
        Some((u64::from(id), Cow::Borrowed(&self.names[id as usize])))
    }

    fn parent(&self, dir: u64) -> Option<u64> {
        let parent = self.parents.get(usize::try_from(dir).ok()?)?;
        (dir != 0).then_some(u64::from(*parent))
    }

    fn extents(&self, id: u64, range: Range<u64>) -> Result<Option<Extents>, CatalogError> {
        match self.nodes.get(id as usize) {
            Some(Node::File(item)) => {
                let item = self.tree.item_data(*item).map_err(catalog_error)?;
                Ok(Some(Extents::of_item(&item, range)))
            }
            _ => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::view::tests::{files, items, read, tree_and_reader};

    #[tokio::test]
    async fn every_item_is_a_file_of_its_sample_directory() {
        let (tree, reader) = tree_and_reader().await;
        let catalog = PerSampleCatalog::new(tree).unwrap();
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

    #[tokio::test]
    async fn a_member_file_that_another_sample_needs_as_a_directory_is_refused() {
        let (tree, _) = tree_and_reader().await;
        // `x.seg.png` is in sample `x`; a sample `x/x.seg.png/...` would
        // need it as a directory. Built by hand: the fixture has none.
        let catalog = PerSampleCatalog::new(tree).unwrap();
        let x = catalog.lookup(1, b"x").unwrap().unwrap();
        let mut dirs = HashMap::new();
        let mut c = catalog;
        let e = c.dir(&mut dirs, x as u32, "x.seg.png").unwrap_err();
        assert_eq!(e.to_string(), "the samples view cannot show /train/x/x.seg.png: it is a member file of one sample and a directory of another");
    }
}
