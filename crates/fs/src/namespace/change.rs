//! Changes made through a read-write mount: the POSIX operations on the
//! overlay (create, mkdir, unlink, rmdir, rename, attributes), each under
//! the overlay's write lock as one [`Change`].

use std::time::SystemTime;

use packfs_core::kind::Kind;
use packfs_core::tree::NodeKind;
use packfs_format::{validate_item_name, validate_segment, Special};

use super::overlay::{Children, DirNode, FileNode, Overlay, Vacated};
use super::{
    join, tree_id, tree_ino, Attr, Content, Ino, Namespace, NsError, SpoolFile, MODALITY_DEPTH,
    NAME_MAX, ROOT_INO,
};

impl Namespace {
    /// Calls `f` with the overlay for a change, or fails on a read-only mount.
    fn change<T>(
        &self,
        f: impl FnOnce(&mut Change<'_>) -> Result<T, NsError>,
    ) -> Result<T, NsError> {
        let overlay = self.overlay.as_ref().ok_or(NsError::ReadOnly)?;
        let mut o = overlay.write();
        f(&mut Change {
            ns: self,
            overlay: &mut o,
        })
    }

    /// Updates file `ino` through `f` (size, content, times, mode, open
    /// counts), adding it to the overlay first if it is a tree file. With
    /// `changes_content`, its modality is marked for the next flush.
    pub(super) fn update_file<T>(
        &self,
        ino: Ino,
        changes_content: bool,
        f: impl FnOnce(&mut FileNode) -> T,
    ) -> Result<T, NsError> {
        self.change(|c| {
            c.ensure_file(ino)?;
            let file = c.overlay.files.get_mut(&ino).expect("just ensured");
            let out = f(file);
            if changes_content {
                let modality = file.modality;
                c.overlay.dirty.insert(modality);
                c.overlay.touched.insert(ino);
                c.overlay.changes += 1;
            }
            Ok(out)
        })
    }

    /// Creates an empty file `name` in `parent` whose bytes will be in
    /// `spool`, open for writing by one handle.
    pub fn create(
        &self,
        parent: Ino,
        name: &[u8],
        spool: SpoolFile,
        perm: u16,
    ) -> Result<Attr, NsError> {
        self.change(|c| {
            let name = c.new_name(parent, name)?;
            let modality = c.modality_of(parent)?.ok_or(NsError::NotPermitted(
                "files live in /<timeline>/<modality>/ and below",
            ))?;
            let ino = c.alloc();
            let now = SystemTime::now();
            c.overlay.files.insert(
                ino,
                FileNode {
                    content: Content::Spool(spool),
                    size: 0,
                    mtime: now,
                    atime: now,
                    ctime: now,
                    perm,
                    generation: 0,
                    writers: 1,
                    origin: None,
                    modality,
                    link: Some((parent, name.clone())),
                    others: Vec::new(),
                    stored: false,
                    special: None,
                },
            );
            c.insert(parent, name, ino, now)?;
            c.ns.attr_in(c.overlay, ino)
        })
    }

    /// Creates `name` in `parent`, a closed file that is not a regular one
    /// (`symlink`, `mknod`) whose bytes (a link's target) are the spool
    /// file `spool` of `size` bytes.
    pub fn make_special(
        &self,
        parent: Ino,
        name: &[u8],
        (spool, size): (SpoolFile, u64),
        perm: u16,
        special: Special,
    ) -> Result<Attr, NsError> {
        let ino = self.create(parent, name, spool, perm)?.ino;
        self.update_file(ino, true, |f| {
            f.writers = 0;
            f.size = size;
            f.special = Some(special);
        })?;
        self.attr(ino)
    }

    /// Creates directory `name` in `parent`.
    pub fn mkdir(&self, parent: Ino, name: &[u8], perm: u16) -> Result<Attr, NsError> {
        self.change(|c| {
            let name = c.new_name(parent, name)?;
            let ino = c.alloc();
            let now = SystemTime::now();
            c.overlay.dirs.insert(
                ino,
                DirNode {
                    parent,
                    name: name.clone(),
                    children: Children::default(),
                    subdirs: 0,
                    mtime: now,
                    atime: now,
                    ctime: now,
                    perm,
                    removed: false,
                },
            );
            c.insert(parent, name, ino, now)?;
            // A new modality is a new (empty) Track; a deeper directory is
            // recorded in its modality's Track.
            c.touch(ino)?;
            c.ns.attr_in(c.overlay, ino)
        })
    }

    /// Removes file `name` from `parent` (`unlink`); returns its inode.
    pub fn unlink(&self, parent: Ino, name: &[u8]) -> Result<Ino, NsError> {
        self.change(|c| {
            let ino = c.child(parent, name)?;
            if c.kind(ino)? == Kind::Dir {
                return Err(NsError::IsADirectory);
            }
            c.remove(parent, name)?;
            c.drop_name(ino, parent, name);
            c.touch(parent)?;
            Ok(ino)
        })
    }

    /// Gives file `ino` the name `name` in `parent` too (`link`): one
    /// file, whose bytes and attributes both names show. Returns its
    /// attributes.
    pub fn link(&self, ino: Ino, parent: Ino, name: &[u8]) -> Result<Attr, NsError> {
        self.change(|c| {
            if c.kind(ino)? == Kind::Dir {
                return Err(NsError::NotPermitted("directories have one name"));
            }
            let name = c.new_name(parent, name)?;
            c.ensure_file(ino)?;
            // Items keep their modality: their objects are stored under it.
            if c.modality_of(parent)? != Some(c.overlay.files[&ino].modality) {
                return Err(NsError::CrossModality);
            }
            let now = SystemTime::now();
            let file = c.overlay.files.get_mut(&ino).expect("just ensured");
            if file.link.is_none() {
                return Err(NsError::NotFound); // unlinked: no name to add to
            }
            file.others.push((parent, name.clone()));
            file.ctime = now;
            c.insert(parent, name, ino, now)?;
            c.overlay.touched.insert(ino);
            c.touch(parent)?;
            c.ns.attr_in(c.overlay, ino)
        })
    }

    /// Removes the empty directory `name` from `parent` (`rmdir`).
    pub fn rmdir(&self, parent: Ino, name: &[u8]) -> Result<(), NsError> {
        self.change(|c| {
            let ino = c.child(parent, name)?;
            if c.kind(ino)? != Kind::Dir {
                return Err(NsError::NotADirectory);
            }
            if c.has_children(ino)? {
                return Err(NsError::NotEmpty);
            }
            c.remove(parent, name)?;
            c.remove_dir(ino)?;
            c.touch(parent)?;
            Ok(())
        })
    }

    /// Moves `name` of `parent` to `new_name` of `new_parent`, replacing a
    /// file there, or an empty directory by a directory (`rename`).
    /// Returns the inode it replaced, if any.
    pub fn rename(
        &self,
        parent: Ino,
        name: &[u8],
        new_parent: Ino,
        new_name: &[u8],
    ) -> Result<Option<Ino>, NsError> {
        self.change(|c| {
            let ino = c.child(parent, name)?;
            let kind = c.kind(ino)?;
            let target_name = c.checked_name(new_parent, new_name)?;
            c.materialize(new_parent)?;
            let new_depth = c.depth(new_parent)? + 1;
            if kind == Kind::File && new_depth <= MODALITY_DEPTH {
                return Err(NsError::NotPermitted(
                    "files live in /<timeline>/<modality>/ and below",
                ));
            }
            // Items keep their modality: their objects are stored under it.
            // A timeline or modality directory holding items cannot be
            // renamed in place either.
            let (from, to) = (c.modality_of(parent)?, c.modality_of(new_parent)?);
            let moves_items = kind == Kind::File || c.min_file_depth(ino, 0)? != usize::MAX;
            if moves_items && (from.is_none() || from != to) {
                return Err(NsError::CrossModality);
            }
            if kind == Kind::Dir {
                // Into itself or below it: the tree would lose a cycle.
                let mut at = new_parent;
                while at != ROOT_INO {
                    if at == ino {
                        return Err(NsError::InvalidName(
                            "a directory cannot move into itself".into(),
                        ));
                    }
                    at = c.parent(at)?;
                }
                if new_depth < MODALITY_DEPTH && c.min_file_depth(ino, new_depth)? <= MODALITY_DEPTH
                {
                    return Err(NsError::NotPermitted(
                        "the move would put files above /<timeline>/<modality>/",
                    ));
                }
            }
            let replaced = c.overlay.dirs[&new_parent].children.get(&target_name);
            if let Some(old) = replaced {
                if old == ino {
                    return Ok(None); // same entry: nothing to do
                }
                match (kind, c.kind(old)?) {
                    (Kind::File, Kind::Dir) => return Err(NsError::IsADirectory),
                    (Kind::Dir, Kind::File) => return Err(NsError::NotADirectory),
                    (Kind::Dir, Kind::Dir) if c.has_children(old)? => {
                        return Err(NsError::NotEmpty)
                    }
                    _ => {}
                }
            }
            let now = SystemTime::now();
            c.remove(parent, name)?;
            if replaced.is_some() {
                c.remove(new_parent, target_name.as_bytes())?;
            }
            match kind {
                Kind::Dir => {
                    c.materialize(ino)?;
                    let dir = c.overlay.dirs.get_mut(&ino).expect("materialized");
                    dir.parent = new_parent;
                    dir.name = target_name.clone();
                    dir.ctime = now;
                    c.overlay.moved.insert(ino);
                }
                Kind::File => {
                    c.ensure_file(ino)?;
                    let file = c.overlay.files.get_mut(&ino).expect("just ensured");
                    let from = std::str::from_utf8(name).map_err(|_| NsError::NotFound)?;
                    file.rename((parent, from), (new_parent, target_name.clone()));
                    file.ctime = now;
                }
            }
            if let Some(old) = replaced {
                match kind {
                    Kind::Dir => c.remove_dir(old)?,
                    Kind::File => c.drop_name(old, new_parent, target_name.as_bytes()),
                }
            }
            c.insert(new_parent, target_name, ino, now)?;
            c.touch(parent)?;
            c.touch(new_parent)?;
            Ok(replaced)
        })
    }

    /// Makes `name` in `parent` a closed file whose complete version is the
    /// spool file `spool` of `size` bytes, creating it or replacing its
    /// content (crash recovery replays the journal through this).
    pub fn put_file(
        &self,
        parent: Ino,
        name: &[u8],
        (spool, size): (SpoolFile, u64),
        special: Option<Special>,
    ) -> Result<Ino, NsError> {
        let ino = match self.lookup(parent, name) {
            Ok(ino) => ino,
            Err(NsError::NotFound) => {
                let ino = self.create(parent, name, spool.clone(), 0o644)?.ino;
                self.update_file(ino, true, |f| {
                    f.writers = 0;
                    f.size = size;
                    f.special = special;
                })?;
                return Ok(ino);
            }
            Err(e) => return Err(e),
        };
        self.update_file(ino, true, |f| {
            f.content = Content::Spool(spool);
            f.size = size;
            f.generation += 1;
            f.mtime = SystemTime::now();
            f.ctime = f.mtime;
            f.special = special;
        })?;
        Ok(ino)
    }

    /// Sets the mode and/or mtime of file or directory `ino`; the change is
    /// committed with its modality.
    pub(crate) fn set_attrs(
        &self,
        ino: Ino,
        perm: Option<u16>,
        mtime: Option<SystemTime>,
    ) -> Result<(), NsError> {
        match self.attr(ino)?.kind {
            Kind::Dir => self.update_dir(ino, perm, mtime),
            Kind::File => self.update_file(ino, true, |f| {
                f.perm = perm.unwrap_or(f.perm);
                f.mtime = mtime.unwrap_or(f.mtime);
                f.ctime = SystemTime::now();
            }),
        }
    }

    /// Sets the access time of `ino` (`utimensat`): kept while mounted,
    /// never stored, so it changes nothing to commit.
    pub(crate) fn set_atime(&self, ino: Ino, atime: SystemTime) -> Result<(), NsError> {
        match self.attr(ino)?.kind {
            Kind::Dir => self.change(|c| {
                c.materialize(ino)?;
                let dir = c.overlay.dirs.get_mut(&ino).expect("materialized");
                dir.atime = atime;
                dir.ctime = SystemTime::now();
                Ok(())
            }),
            Kind::File => self.update_file(ino, false, |f| {
                f.atime = atime;
                f.ctime = SystemTime::now();
            }),
        }
    }

    /// Sets the mode and/or mtime of directory `ino`.
    fn update_dir(
        &self,
        ino: Ino,
        perm: Option<u16>,
        mtime: Option<SystemTime>,
    ) -> Result<(), NsError> {
        self.change(|c| {
            c.materialize(ino)?;
            let dir = c.overlay.dirs.get_mut(&ino).expect("materialized");
            if let Some(p) = perm {
                dir.perm = p;
            }
            if let Some(t) = mtime {
                dir.mtime = t;
            }
            dir.ctime = SystemTime::now();
            c.touch(ino)
        })
    }
}

/// One change to the overlay, under its write lock.
pub(super) struct Change<'a> {
    pub(super) ns: &'a Namespace,
    pub(super) overlay: &'a mut Overlay,
}
impl Change<'_> {
    /// Marks the modality holding directory `dir` (if any) changed.
    pub(super) fn touch(&mut self, dir: Ino) -> Result<(), NsError> {
        if let Some(m) = self.modality_of(dir)? {
            self.overlay.dirty.insert(m);
        }
        self.overlay.touched.insert(dir);
        self.overlay.changes += 1;
        Ok(())
    }

    /// The modality directory that `dir` is or is below, and the path of
    /// `dir` below it (`""` for the modality directory); `None` above the
    /// modalities, or if `dir` is no longer linked into the tree.
    pub(super) fn location(&self, dir: Ino) -> Result<Option<(Ino, String)>, NsError> {
        let chain = self.ancestry(dir)?;
        let Some(m) = chain.len().checked_sub(MODALITY_DEPTH + 1) else {
            return Ok(None);
        };
        let mut names = Vec::with_capacity(chain.len());
        for pair in chain.windows(2) {
            let (child, parent) = (pair[0], pair[1]);
            let name = self.name_of(child)?;
            if self.named_child(parent, &name)? != Some(child) {
                return Ok(None);
            }
            names.push(name);
        }
        names.truncate(m);
        names.reverse();
        Ok(Some((chain[m], names.join("/"))))
    }

    /// The name of directory `dir` in its parent.
    fn name_of(&self, dir: Ino) -> Result<String, NsError> {
        if let Some(d) = self.overlay.dirs.get(&dir) {
            return Ok(d.name.to_string());
        }
        Ok(self.ns.tree_node(dir)?.1.name)
    }

    /// The entry `name` of directory `dir`, without copying it into the
    /// overlay.
    fn named_child(&self, dir: Ino, name: &str) -> Result<Option<Ino>, NsError> {
        if let Some(d) = self.overlay.dirs.get(&dir) {
            return Ok(d.children.get(name));
        }
        let (id, _) = self.ns.tree_node(dir)?;
        Ok(self.ns.tree.lookup(id, name.as_bytes())?.map(tree_ino))
    }

    /// The modality directory that `dir` is or is below (`None` above).
    pub(super) fn modality_of(&self, dir: Ino) -> Result<Option<Ino>, NsError> {
        let chain = self.ancestry(dir)?;
        Ok(chain
            .len()
            .checked_sub(MODALITY_DEPTH + 1)
            .map(|i| chain[i]))
    }

    /// `dir` and the directories above it: `[dir, …, modality, timeline,
    /// root]`.
    fn ancestry(&self, dir: Ino) -> Result<Vec<Ino>, NsError> {
        let mut chain = vec![dir];
        let mut at = dir;
        while at != ROOT_INO {
            at = self.parent(at)?;
            chain.push(at);
        }
        Ok(chain)
    }

    /// Forgets empty directory `ino`, unlinked from its parent: a
    /// directory of the tree stays as a tombstone (see [`DirNode::removed`]).
    pub(super) fn remove_dir(&mut self, ino: Ino) -> Result<(), NsError> {
        if tree_id(ino).is_none() {
            self.overlay.dirs.remove(&ino);
            return Ok(());
        }
        self.materialize(ino)?;
        let dir = self.overlay.dirs.get_mut(&ino).expect("materialized");
        dir.children = Children::default();
        dir.subdirs = 0;
        dir.removed = true;
        Ok(())
    }

    /// File `ino` loses its name `name` of directory `dir` (unlinked or
    /// replaced): it goes once it has no name left and nothing uses it.
    pub(super) fn drop_name(&mut self, ino: Ino, dir: Ino, name: &[u8]) {
        let (Some(f), Ok(name)) = (self.overlay.files.get_mut(&ino), std::str::from_utf8(name))
        else {
            return;
        };
        f.drop_name(dir, name);
        f.ctime = SystemTime::now();
    }

    /// Adds tree file `ino` to the overlay (unchanged) unless it is there.
    pub(super) fn ensure_file(&mut self, ino: Ino) -> Result<(), NsError> {
        if self.overlay.files.contains_key(&ino) {
            return Ok(());
        }
        let (_, node) = self.ns.tree_node(ino)?;
        let NodeKind::File(item) = node.kind else {
            return Err(NsError::IsADirectory);
        };
        let parent = tree_ino(node.parent);
        let modality = self
            .modality_of(parent)?
            .expect("tree files are below a modality");
        let stored = self.ns.tree.item(item)?;
        let (perm, mtime) = self.ns.stored_look(stored.attrs(), Kind::File);
        self.overlay.files.insert(
            ino,
            FileNode {
                content: Content::Base(item),
                size: stored.size(),
                mtime,
                atime: mtime,
                ctime: mtime,
                perm,
                generation: 0,
                writers: 0,
                origin: None,
                modality,
                // A tree file that was moved is in the overlay already.
                link: Some((parent, node.name.into())),
                others: Vec::new(),
                stored: true,
                special: stored.special(),
            },
        );
        Ok(())
    }

    pub(super) fn alloc(&mut self) -> Ino {
        let ino = self.overlay.next_ino;
        self.overlay.next_ino += 1;
        ino
    }

    /// `name` if it may be an entry of directory `parent`: timelines and
    /// modalities follow the segment rules (no reserved names), names below
    /// a modality the item-name rules.
    pub(super) fn checked_name(&self, parent: Ino, name: &[u8]) -> Result<Box<str>, NsError> {
        if name.len() > NAME_MAX {
            return Err(NsError::NameTooLong);
        }
        let name = std::str::from_utf8(name)
            .map_err(|_| NsError::InvalidName("names must be UTF-8".into()))?;
        let checked = if self.depth(parent)? < MODALITY_DEPTH {
            validate_segment(name, "name")
        } else if name.contains('/') {
            return Err(NsError::InvalidName("names cannot contain '/'".into()));
        } else {
            validate_item_name(name, "name")
        };
        checked.map_err(|e| NsError::InvalidName(e.to_string()))?;
        Ok(name.into())
    }

    /// A valid name not yet used in `parent`.
    pub(super) fn new_name(&mut self, parent: Ino, name: &[u8]) -> Result<Box<str>, NsError> {
        let name = self.checked_name(parent, name)?;
        self.materialize(parent)?;
        if self.overlay.dirs[&parent].children.contains_key(&name) {
            return Err(NsError::Exists);
        }
        Ok(name)
    }

    pub(super) fn kind(&self, ino: Ino) -> Result<Kind, NsError> {
        if self.overlay.files.contains_key(&ino) {
            return Ok(Kind::File);
        }
        if self.overlay.dirs.contains_key(&ino) {
            return Ok(Kind::Dir);
        }
        match self.ns.tree_node(ino)?.1.kind {
            NodeKind::Dir => Ok(Kind::Dir),
            NodeKind::File(_) => Ok(Kind::File),
        }
    }

    pub(super) fn child(&mut self, parent: Ino, name: &[u8]) -> Result<Ino, NsError> {
        if name.len() > NAME_MAX {
            return Err(NsError::NameTooLong);
        }
        self.materialize(parent)?;
        let name = std::str::from_utf8(name).map_err(|_| NsError::NotFound)?;
        self.overlay.dirs[&parent]
            .children
            .get(name)
            .ok_or(NsError::NotFound)
    }

    pub(super) fn parent(&self, ino: Ino) -> Result<Ino, NsError> {
        if let Some(d) = self.overlay.dirs.get(&ino) {
            return Ok(d.parent);
        }
        Ok(tree_ino(self.ns.tree_node(ino)?.1.parent))
    }

    /// 0 for the root, 1 for a timeline, 2 for a modality, …
    pub(super) fn depth(&self, dir: Ino) -> Result<usize, NsError> {
        let mut depth = 0;
        let mut at = dir;
        while at != ROOT_INO {
            at = self.parent(at)?;
            depth += 1;
        }
        Ok(depth)
    }

    /// The smallest depth of a file below directory `dir` if `dir` were at
    /// `depth` (`usize::MAX` without files).
    pub(super) fn min_file_depth(&self, dir: Ino, depth: usize) -> Result<usize, NsError> {
        let mut min = usize::MAX;
        let mut pending = vec![(dir, depth)];
        while let Some((d, depth)) = pending.pop() {
            for (ino, kind) in self.children(d)? {
                match kind {
                    Kind::File => min = min.min(depth + 1),
                    Kind::Dir => pending.push((ino, depth + 1)),
                }
            }
        }
        Ok(min)
    }

    pub(super) fn children(&self, dir: Ino) -> Result<Vec<(Ino, Kind)>, NsError> {
        let named = self.named_children(dir)?;
        Ok(named
            .into_iter()
            .map(|(_, ino, kind)| (ino, kind))
            .collect())
    }

    pub(super) fn has_children(&self, dir: Ino) -> Result<bool, NsError> {
        if let Some(d) = self.overlay.dirs.get(&dir) {
            return Ok(!d.children.is_empty());
        }
        let (id, node) = self.ns.tree_node(dir)?;
        if node.kind != NodeKind::Dir {
            return Err(NsError::NotADirectory);
        }
        let mut any = false;
        self.ns.tree.children(id, 0, |_| {
            any = true;
            true
        })?;
        Ok(any)
    }

    /// Copies tree directory `dir`'s children into the overlay (once);
    /// `NotFound` if `dir` was removed.
    pub(super) fn materialize(&mut self, dir: Ino) -> Result<(), NsError> {
        if let Some(d) = self.overlay.dirs.get(&dir) {
            return match d.removed {
                true => Err(NsError::NotFound),
                false => Ok(()),
            };
        }
        if self.overlay.files.contains_key(&dir) {
            return Err(NsError::NotADirectory);
        }
        let (id, node) = self.ns.tree_node(dir)?;
        if node.kind != NodeKind::Dir {
            return Err(NsError::NotADirectory);
        }
        let tree = &self.ns.tree;
        let (perm, mtime) = self.ns.stored_look(tree.dir_attrs(id)?, Kind::Dir);
        let mut children = Children::default();
        let mut subdirs = 0;
        tree.children(id, 0, |c| {
            subdirs += u32::from(tree.is_dir(c.id));
            children.insert(c.name.into(), tree_ino(c.id));
            false
        })?;
        self.overlay.dirs.insert(
            dir,
            DirNode {
                parent: tree_ino(node.parent),
                name: node.name.into(),
                children,
                subdirs,
                mtime,
                atime: mtime,
                ctime: mtime,
                perm,
                removed: false,
            },
        );
        Ok(())
    }

    pub(super) fn insert(
        &mut self,
        parent: Ino,
        name: Box<str>,
        ino: Ino,
        now: SystemTime,
    ) -> Result<(), NsError> {
        self.materialize(parent)?;
        let is_dir = self.kind(ino)? == Kind::Dir;
        let dir = self.overlay.dirs.get_mut(&parent).expect("materialized");
        dir.children.insert(name, ino);
        dir.subdirs += u32::from(is_dir);
        dir.mtime = now;
        dir.ctime = now;
        // The entry's row is new, and its directory's mtime changed.
        self.overlay.touched.extend([parent, ino]);
        Ok(())
    }

    pub(super) fn remove(&mut self, parent: Ino, name: &[u8]) -> Result<(), NsError> {
        self.materialize(parent)?;
        let name = std::str::from_utf8(name).map_err(|_| NsError::NotFound)?;
        let ino = self.overlay.dirs[&parent]
            .children
            .get(name)
            .ok_or(NsError::NotFound)?;
        let is_dir = self.kind(ino)? == Kind::Dir;
        if let Some((modality, at)) = self.location(parent)? {
            self.overlay.vacated.push(Vacated {
                modality,
                path: join(&at, name),
                dir: is_dir,
            });
        }
        let dir = self.overlay.dirs.get_mut(&parent).expect("materialized");
        dir.children.remove(name);
        dir.subdirs -= u32::from(is_dir);
        dir.mtime = SystemTime::now();
        dir.ctime = dir.mtime;
        self.overlay.touched.insert(parent);
        Ok(())
    }
}
