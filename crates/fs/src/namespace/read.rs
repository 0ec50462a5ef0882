//! The read side of the namespace: lookups, attributes, listings and
//! paths, answered by the overlay where it knows a node and by the tree
//! elsewhere.

use std::time::SystemTime;

use packfs_core::kind::Kind;
use packfs_core::tree::{Look, NodeKind};
use packfs_format::{ns_of_time, time_of_ns, Attrs, Special};

use super::overlay::Overlay;
use super::{tree_ino, Attr, Content, Ino, Namespace, NsError, NAME_MAX, ROOT_INO};

impl Namespace {
    /// The child `name` of directory `parent`.
    pub fn lookup(&self, parent: Ino, name: &[u8]) -> Result<Ino, NsError> {
        if name.len() > NAME_MAX {
            return Err(NsError::NameTooLong);
        }
        let overlay = self.overlay.as_ref().map(|o| o.read());
        if let Some(o) = &overlay {
            if let Some(dir) = o.dirs.get(&parent) {
                let name = std::str::from_utf8(name).map_err(|_| NsError::NotFound)?;
                return dir.children.get(name).ok_or(NsError::NotFound);
            }
            if o.files.contains_key(&parent) {
                return Err(NsError::NotADirectory);
            }
        }
        let (id, node) = self.tree_node(parent)?;
        match node.kind {
            NodeKind::Dir => self
                .tree
                .lookup(id, name)?
                .map(tree_ino)
                .ok_or(NsError::NotFound),
            NodeKind::File(_) => Err(NsError::NotADirectory),
        }
    }

    /// The attributes of `ino`.
    pub fn attr(&self, ino: Ino) -> Result<Attr, NsError> {
        match &self.overlay {
            Some(o) => self.attr_in(&o.read(), ino),
            None => self.tree_attr(ino),
        }
    }

    pub(super) fn attr_in(&self, o: &Overlay, ino: Ino) -> Result<Attr, NsError> {
        if let Some(f) = o.files.get(&ino) {
            return Ok(Attr {
                ino,
                kind: Kind::File,
                size: f.size,
                mtime: f.mtime,
                atime: f.atime,
                ctime: f.ctime,
                perm: self.modes.shown_file(f.perm, f.special),
                nlink: f.nlink(),
                special: f.special,
            });
        }
        if let Some(d) = o.dirs.get(&ino) {
            return Ok(Attr {
                ino,
                kind: Kind::Dir,
                size: 0,
                mtime: d.mtime,
                atime: d.atime,
                ctime: d.ctime,
                perm: self.modes.shown(Kind::Dir, d.perm),
                // A removed directory has no name and no `.` (as POSIX has it).
                nlink: if d.removed { 0 } else { 2 + d.subdirs },
                special: None,
            });
        }
        self.tree_attr(ino)
    }

    /// Mode and mtime of a stored node: as its writer recorded them, else
    /// the mount's mode for its kind and the Manifest's time.
    pub(super) fn stored_look(&self, attrs: Attrs, kind: Kind) -> (u16, SystemTime) {
        let default = match kind {
            Kind::Dir => self.modes.dir,
            Kind::File => self.modes.file,
        };
        let mtime = attrs.mtime_ns.map_or(self.base_mtime, time_of_ns);
        (attrs.mode.unwrap_or(default), mtime)
    }

    pub(super) fn tree_attr(&self, ino: Ino) -> Result<Attr, NsError> {
        let (id, node) = self.tree_node(ino)?;
        let look = match node.kind {
            NodeKind::Dir => Look::Dir {
                attrs: self.tree.dir_attrs(id)?,
                subdirs: self.tree.subdirs(id),
            },
            NodeKind::File(item) => self.tree.item(item)?.look(),
        };
        Ok(self.stored_attr(ino, look))
    }

    /// What `stat` shows of stored node `ino` whose Track records `look`.
    fn stored_attr(&self, ino: Ino, look: Look) -> Attr {
        match look {
            Look::Dir { attrs, subdirs } => {
                let (perm, mtime) = self.stored_look(attrs, Kind::Dir);
                Attr {
                    ino,
                    kind: Kind::Dir,
                    size: 0,
                    mtime,
                    atime: mtime,
                    ctime: mtime,
                    perm: self.modes.shown(Kind::Dir, perm),
                    // Unknown without reading the directory's entries: 1,
                    // which `find` and `fts` take as "count them yourself".
                    nlink: subdirs.map_or(1, |n| 2 + n),
                    special: None,
                }
            }
            Look::File {
                size,
                attrs,
                special,
            } => {
                let (perm, mtime) = self.stored_look(attrs, Kind::File);
                Attr {
                    ino,
                    kind: Kind::File,
                    size,
                    mtime,
                    atime: mtime,
                    ctime: mtime,
                    perm: self.modes.shown_file(perm, special),
                    nlink: 1,
                    special,
                }
            }
        }
    }

    /// Feeds the entries of directory `dir` from cookie `offset` to `add`
    /// (`.`, `..`, then the children by name), each with the cookie of the
    /// entry after it, until `add` reports a full buffer.
    pub fn list(
        &self,
        dir: Ino,
        offset: u64,
        mut add: impl FnMut(&str, Attr, u64) -> bool,
    ) -> Result<(), NsError> {
        let overlay = self.overlay.as_ref().map(|o| o.read());
        let attr = |ino| match &overlay {
            Some(o) => self.attr_in(o, ino),
            None => self.tree_attr(ino),
        };
        if let Some(d) = overlay.as_ref().and_then(|o| o.dirs.get(&dir)) {
            let dots = [(1, ".", dir), (2, "..", d.parent)];
            let dots = dots.into_iter().filter(|(cookie, _, _)| *cookie > offset);
            for (cookie, name, ino) in dots.chain(d.children.listing_after(offset)) {
                if add(name, attr(ino)?, cookie) {
                    break;
                }
            }
            return Ok(());
        }
        if overlay.as_ref().is_some_and(|o| o.files.contains_key(&dir)) {
            return Err(NsError::NotADirectory);
        }
        let (id, node) = self.tree_node(dir)?;
        if node.kind != NodeKind::Dir {
            return Err(NsError::NotADirectory);
        }
        // `.` carries cookie 1, `..` 2, and a child the tree's position
        // after it plus 2, so resuming costs the same at any size.
        let dots = [(1, ".", dir), (2, "..", tree_ino(node.parent))];
        for (cookie, name, ino) in dots.into_iter().filter(|(c, ..)| *c > offset) {
            if add(name, attr(ino)?, cookie) {
                return Ok(());
            }
        }
        // Shown as their rows record them, but those a change reached.
        let mut failed = None;
        self.tree.children(id, offset.saturating_sub(2), |c| {
            let ino = tree_ino(c.id);
            let shown = match &overlay {
                Some(o) if o.files.contains_key(&ino) || o.dirs.contains_key(&ino) => {
                    self.attr_in(o, ino)
                }
                _ => Ok(self.stored_attr(ino, c.look)),
            };
            match shown {
                Ok(a) => add(c.name, a, c.next + 2),
                Err(e) => {
                    failed = Some(e);
                    true
                }
            }
        })?;
        failed.map_or(Ok(()), Err)
    }

    /// Where the bytes of file `ino` are.
    pub fn content(&self, ino: Ino) -> Result<Content, NsError> {
        if let Some(o) = &self.overlay {
            let o = o.read();
            if let Some(f) = o.files.get(&ino) {
                return Ok(f.content.clone());
            }
            if o.dirs.contains_key(&ino) {
                return Err(NsError::IsADirectory);
            }
        }
        match self.tree_node(ino)?.1.kind {
            NodeKind::File(item) => Ok(Content::Base(item)),
            NodeKind::Dir => Err(NsError::IsADirectory),
        }
    }

    /// The mode and mtime of file `ino` as they are to be recorded, and
    /// what it is if not a regular file, if the overlay knows it.
    pub(crate) fn file_record(&self, ino: Ino) -> Option<(Attrs, Option<Special>)> {
        let o = self.overlay.as_ref()?.read();
        o.files.get(&ino).map(|f| {
            let attrs = Attrs {
                mode: Some(f.perm),
                mtime_ns: Some(ns_of_time(f.mtime)),
            };
            (attrs, f.special)
        })
    }

    /// The path of file `ino` from the root, if it still has a name.
    pub(crate) fn file_path(&self, ino: Ino) -> Result<Option<String>, NsError> {
        let link = match self
            .overlay
            .as_ref()
            .and_then(|o| o.read().files.get(&ino).map(|f| f.link.clone()))
        {
            Some(link) => link,
            None => {
                let (_, node) = self.tree_node(ino)?;
                Some((tree_ino(node.parent), node.name.into()))
            }
        };
        let Some((parent, name)) = link else {
            return Ok(None);
        };
        let mut parts = self.dir_path(parent)?;
        parts.push(name.to_string());
        Ok(Some(parts.join("/")))
    }

    /// The path of directory `ino` from the root, as names.
    pub fn dir_path(&self, ino: Ino) -> Result<Vec<String>, NsError> {
        let overlay = self.overlay.as_ref().map(|o| o.read());
        let mut parts = Vec::new();
        let mut at = ino;
        while at != ROOT_INO {
            if let Some(d) = overlay.as_ref().and_then(|o| o.dirs.get(&at)) {
                parts.push(d.name.to_string());
                at = d.parent;
                continue;
            }
            let (_, node) = self.tree_node(at)?;
            parts.push(node.name);
            at = tree_ino(node.parent);
        }
        parts.reverse();
        Ok(parts)
    }
}
