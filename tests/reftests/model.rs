//! The reference model: the mount as `docs/SEMANTICS.md` describes it,
//! plain data in memory. [`Model::apply`] is what an operation should do
//! and answer; [`Model::committed`] and [`remounted`] what a commit, a
//! crash and a remount keep.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use packfs_fs::namespace::Ino;

use crate::errno::E;
use crate::operations::{Data, Op, H, S};

/// The dataset every case starts from: two modalities of one timeline.
pub const STORED: &[(&str, Data)] = &[
    ("t/m/a", Data { fill: 1, len: 120 }),
    ("t/m/b", Data { fill: 2, len: 40 }),
    ("t/m/c/a", Data { fill: 3, len: 60 }),
    ("t/n/a", Data { fill: 4, len: 80 }),
];
const FILE_MODE: u16 = 0o644;
const DIR_MODE: u16 = 0o755;
/// Names a timeline or modality cannot have (`EINVAL`).
const RESERVED: &[&str] = &["_packfs", ".packfs"];
pub const CONTROL: &str = ".packfs";
/// Where items live: `/<timeline>/<modality>/…`.
const ITEM_DEPTH: usize = 3;

pub type FileId = usize;

#[derive(Clone, Debug)]
pub struct MFile {
    pub bytes: Vec<u8>,
    pub perm: u16,
    /// `None`: changed at a time the model does not know.
    pub mtime: Option<SystemTime>,
    /// While open for writing: the last complete version (`None` for a file
    /// never closed), what a commit or a crash keeps.
    pub complete: Option<Vec<u8>>,
    /// Written since the last close of a descriptor: a crash moves these
    /// bytes to `lost+found`.
    pub dirty: bool,
    /// The inode the core showed for it (checked to stay the same).
    pub ino: Option<Ino>,
}

#[derive(Clone, Debug)]
pub struct MDir {
    pub perm: u16,
    pub mtime: Option<SystemTime>,
    /// In the mounted snapshot, at or below a modality: until the mount
    /// changes it, it may show `nlink` 1 (docs/SEMANTICS.md).
    pub stored: bool,
}

#[derive(Clone, Debug)]
pub enum Entry {
    Dir(MDir),
    File(FileId),
}

#[derive(Clone, Debug)]
pub struct MHandle {
    pub fh: u64,
    pub ino: Ino,
    pub file: FileId,
    pub write: bool,
}

/// What a path names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Node {
    Root,
    Control,
    Stats,
    Dir,
    File(FileId),
}

impl Node {
    fn is_dir(self) -> bool {
        matches!(self, Node::Root | Node::Control | Node::Dir)
    }
}

/// The mount as `docs/SEMANTICS.md` describes it.
#[derive(Clone, Debug, Default)]
pub struct Model {
    /// Every file and directory by path (the root is implicit).
    pub entries: BTreeMap<String, Entry>,
    /// Files by identity: a name, an open handle, or both.
    pub files: BTreeMap<FileId, MFile>,
    pub next_file: FileId,
    pub handles: Vec<MHandle>,
}

pub fn parent_of(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(parent, _)| parent)
}

pub fn name_of(path: &str) -> &str {
    path.rsplit_once('/').map_or(path, |(_, name)| name)
}

pub fn depth(path: &str) -> usize {
    match path {
        "" => 0,
        p => p.split('/').count(),
    }
}

/// `path` itself or below it.
pub fn within(path: &str, dir: &str) -> bool {
    path == dir || path.strip_prefix(dir).is_some_and(|r| r.starts_with('/'))
}

/// The modality directory `dir` is or is below (`None` above one).
fn modality_of(dir: &str) -> Option<String> {
    let parts: Vec<&str> = dir.split('/').collect();
    (depth(dir) >= 2).then(|| parts[..2].join("/"))
}

pub fn mtime(secs: u32) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(u64::from(secs))
}

/// `got` against `want`, briefly: lengths and the first difference.
pub fn diff(got: &[u8], want: &[u8]) -> String {
    let at = got.iter().zip(want).position(|(g, w)| g != w);
    let at = at.unwrap_or(got.len().min(want.len()));
    let around = |b: &[u8]| format!("{:?}", &b[at.min(b.len())..(at + 8).min(b.len())]);
    format!(
        "{} bytes where the model has {}; from offset {at}: {} where the model has {}",
        got.len(),
        want.len(),
        around(got),
        around(want)
    )
}

/// `bytes`, briefly.
pub fn short(bytes: &[u8]) -> String {
    format!("{} bytes {:?}…", bytes.len(), &bytes[..bytes.len().min(8)])
}

fn slice(bytes: &[u8], offset: usize, len: usize) -> Vec<u8> {
    let start = offset.min(bytes.len());
    bytes[start..(start + len).min(bytes.len())].to_vec()
}

/// What a successful operation gives back besides changing the model.
#[derive(Debug, PartialEq)]
pub enum Out {
    Nothing,
    /// Bytes read (`None`: not predictable, the stats file).
    Bytes(Option<Vec<u8>>),
    /// A handle opened on this file.
    Opened {
        file: FileId,
        write: bool,
    },
}

impl Model {
    pub fn initial() -> Model {
        let mut model = Model::default();
        for (path, data) in STORED {
            model.add_file(path, data.bytes(), FILE_MODE);
        }
        remounted(&model)
    }

    /// Adds the file and any missing parent directories.
    fn add_file(&mut self, path: &str, bytes: Vec<u8>, perm: u16) -> FileId {
        let mut dir = parent_of(path);
        while !dir.is_empty() {
            let meta = MDir {
                perm: DIR_MODE,
                mtime: None,
                stored: false,
            };
            self.entries
                .entry(dir.to_string())
                .or_insert(Entry::Dir(meta));
            dir = parent_of(dir);
        }
        let id = self.next_file;
        self.next_file += 1;
        self.files.insert(
            id,
            MFile {
                bytes,
                perm,
                mtime: None,
                complete: None,
                dirty: false,
                ino: None,
            },
        );
        self.entries.insert(path.to_string(), Entry::File(id));
        id
    }

    /// What `path` names, or the error of walking to it.
    fn node(&self, path: &str) -> Result<Node, E> {
        let mut at = Node::Root;
        let mut walked = String::new();
        for name in path.split('/').filter(|n| !n.is_empty()) {
            at = match at {
                Node::Root if name == CONTROL => Node::Control,
                Node::Control if name == "stats" => Node::Stats,
                Node::Control => return Err(E::NoEnt),
                Node::Stats | Node::File(_) => return Err(E::NotDir),
                Node::Root | Node::Dir => {
                    if !walked.is_empty() {
                        walked.push('/');
                    }
                    walked.push_str(name);
                    match self.entries.get(&walked) {
                        Some(Entry::Dir(_)) => Node::Dir,
                        Some(Entry::File(id)) => Node::File(*id),
                        None => return Err(E::NoEnt),
                    }
                }
            };
        }
        Ok(at)
    }

    /// The directory `path` names: walking errors, or `ENOTDIR`.
    fn dir(&self, path: &str) -> Result<Node, E> {
        match self.node(path)? {
            n if n.is_dir() => Ok(n),
            _ => Err(E::NotDir),
        }
    }

    /// The entry named `path` in its parent directory, which must exist:
    /// `None` if there is none.
    fn entry(&self, path: &str) -> Result<(Node, Option<Node>), E> {
        let parent = self.dir(parent_of(path))?;
        match self.node(path) {
            Ok(n) => Ok((parent, Some(n))),
            Err(E::NoEnt) => Ok((parent, None)),
            Err(e) => Err(e),
        }
    }

    pub fn file(&mut self, id: FileId) -> &mut MFile {
        self.files.get_mut(&id).expect("model file exists")
    }

    fn writers(&self, id: FileId) -> usize {
        self.handles
            .iter()
            .filter(|h| h.file == id && h.write)
            .count()
    }

    fn dir_meta(&mut self, path: &str) -> Option<&mut MDir> {
        match self.entries.get_mut(path) {
            Some(Entry::Dir(d)) => Some(d),
            _ => None,
        }
    }

    /// An entry of directory `dir` was added or removed.
    fn touch_dir(&mut self, dir: &str) {
        if let Some(d) = self.dir_meta(dir) {
            d.mtime = None;
        }
    }

    fn has_children(&self, dir: &str) -> bool {
        self.entries.keys().any(|k| parent_of(k) == dir)
    }

    /// Whether there is a file at `path` or below it.
    fn holds_files(&self, path: &str) -> bool {
        self.entries
            .iter()
            .any(|(k, e)| within(k, path) && matches!(e, Entry::File(_)))
    }

    /// Forgets files that have neither a name nor a handle.
    fn collect(&mut self) {
        let named: BTreeSet<FileId> = self
            .entries
            .values()
            .filter_map(|e| match e {
                Entry::File(id) => Some(*id),
                Entry::Dir(_) => None,
            })
            .collect();
        let open: BTreeSet<FileId> = self.handles.iter().map(|h| h.file).collect();
        self.files
            .retain(|id, _| named.contains(id) || open.contains(id));
    }

    /// The handle `h` picks among those open (write handles only with
    /// `write`).
    pub fn pick(&self, h: &H, write: bool) -> Option<usize> {
        let candidates: Vec<usize> = (0..self.handles.len())
            .filter(|&i| !write || self.handles[i].write)
            .collect();
        (!candidates.is_empty()).then(|| candidates[h.0 as usize % candidates.len()])
    }

    /// The first writer's open starts a write session: the version it
    /// starts from is the file's complete one until a close.
    fn open_for_writing(&mut self, id: FileId, truncate: bool) {
        if self.writers(id) == 0 {
            let f = self.file(id);
            f.complete = Some(f.bytes.clone());
            f.dirty = false;
        }
        if truncate {
            self.set_size(id, 0);
            // An emptied file is a version of its own, unfinished.
            self.file(id).dirty = true;
        }
    }

    /// Bytes changed by a write or truncate.
    fn changed(&mut self, id: FileId) {
        let writing = self.writers(id) > 0;
        let f = self.file(id);
        f.mtime = None;
        f.dirty |= writing;
    }

    /// Writes `data` at `offset`; a hole reads as zeros. Writing nothing
    /// changes nothing (and is not even sent).
    pub fn write(&mut self, id: FileId, offset: u16, data: Data) {
        if data.len == 0 {
            return;
        }
        let (offset, data) = (offset as usize, data.bytes());
        let bytes = &mut self.file(id).bytes;
        if bytes.len() < offset + data.len() {
            bytes.resize(offset + data.len(), 0);
        }
        bytes[offset..offset + data.len()].copy_from_slice(&data);
        self.changed(id);
    }

    fn set_size(&mut self, id: FileId, size: usize) {
        self.file(id).bytes.resize(size, 0);
        self.changed(id);
    }

    /// A descriptor open for writing on the file is closed: its bytes are
    /// its complete version.
    pub fn closed(&mut self, id: FileId) {
        let f = self.file(id);
        f.complete = Some(f.bytes.clone());
        f.dirty = false;
    }

    /// The path `s` names now.
    fn resolve(&self, s: &S) -> S {
        let pick = |paths: Vec<&str>, i: u8, default: &str| {
            let path = match paths.is_empty() {
                true => default,
                false => paths[i as usize % paths.len()],
            };
            S::P(path.to_string())
        };
        let paths = |files: bool, dirs: bool| {
            self.entries
                .iter()
                .filter(move |(_, e)| match e {
                    Entry::File(_) => files,
                    Entry::Dir(_) => dirs,
                })
                .map(|(k, _)| k.as_str())
        };
        match s {
            S::P(_) => s.clone(),
            S::Any(i) => pick(paths(true, true).collect(), *i, "t"),
            S::File(i) => pick(paths(true, false).collect(), *i, "t/m/a"),
            S::Dir(i) => pick(paths(false, true).collect(), *i, "t"),
            S::Empty(i) => {
                let empty = paths(false, true).filter(|d| !self.has_children(d));
                pick(empty.collect(), *i, "t")
            }
            S::In(i, name) => {
                let dirs: Vec<&str> = std::iter::once("").chain(paths(false, true)).collect();
                match dirs[*i as usize % dirs.len()] {
                    "" => S::P(name.to_string()),
                    dir => S::P(format!("{dir}/{name}")),
                }
            }
        }
    }

    /// `op` with the paths it names now.
    pub fn concrete(&self, op: &Op) -> Op {
        let mut op = op.clone();
        match &mut op {
            Op::Create { path, .. }
            | Op::Write { path, .. }
            | Op::OpenWrite { path, .. }
            | Op::OpenRead { path }
            | Op::Truncate { path, .. }
            | Op::Unlink { path }
            | Op::Mkdir { path, .. }
            | Op::Rmdir { path }
            | Op::Chmod { path, .. }
            | Op::Utimens { path, .. }
            | Op::Fsync { path }
            | Op::Read { path, .. }
            | Op::ReadAll { path } => *path = self.resolve(path),
            Op::Rename { from, to } => {
                *from = self.resolve(from);
                *to = self.resolve(to);
            }
            Op::HandleWrite { .. }
            | Op::HandleRead { .. }
            | Op::HandleTruncate { .. }
            | Op::HandleFlush { .. }
            | Op::HandleClose { .. }
            | Op::Stats
            | Op::Commit
            | Op::Crash
            | Op::Remount => {}
        }
        op
    }

    /// Applies `op` (not `Commit`, `Crash` or `Remount`), or answers the
    /// error the mount must give and leaves the model as it was.
    pub fn apply(&mut self, op: &Op) -> Result<Out, E> {
        match op {
            Op::Create {
                path,
                data,
                perm,
                keep_open,
            } => {
                let path = path.path();
                let (parent, existing) = self.entry(path)?;
                if existing.is_some() {
                    return Err(E::Exist);
                }
                self.check_new_name(parent, path)?;
                if depth(path) < ITEM_DEPTH {
                    return Err(E::Perm);
                }
                let id = self.add_file(path, data.bytes(), *perm);
                self.touch_dir(parent_of(path));
                match keep_open {
                    true => {
                        self.file(id).dirty = true; // never closed
                        Ok(Out::Opened {
                            file: id,
                            write: true,
                        })
                    }
                    false => Ok(Out::Nothing),
                }
            }
            Op::Write { path, offset, data } => {
                let id = self.writable(path.path())?;
                self.open_for_writing(id, false);
                self.write(id, *offset, *data);
                // Closing it: complete unless other writers go on.
                self.closed(id);
                Ok(Out::Nothing)
            }
            Op::OpenWrite { path, truncate } => {
                let id = self.writable(path.path())?;
                self.open_for_writing(id, *truncate);
                Ok(Out::Opened {
                    file: id,
                    write: true,
                })
            }
            Op::OpenRead { path } => match self.node(path.path())? {
                n if n.is_dir() => Err(E::IsDir),
                Node::File(id) => Ok(Out::Opened {
                    file: id,
                    write: false,
                }),
                _ => Ok(Out::Nothing), // the stats file: opened and closed at once
            },
            Op::HandleWrite { h, offset, data } => {
                let Some(i) = self.pick(h, true) else {
                    return Ok(Out::Nothing);
                };
                self.write(self.handles[i].file, *offset, *data);
                Ok(Out::Nothing)
            }
            Op::HandleRead { h, offset, len } => {
                let Some(i) = self.pick(h, false) else {
                    return Ok(Out::Nothing);
                };
                let f = &self.files[&self.handles[i].file];
                Ok(Out::Bytes(Some(slice(
                    &f.bytes,
                    *offset as usize,
                    *len as usize,
                ))))
            }
            Op::HandleTruncate { h, size } => {
                let Some(i) = self.pick(h, true) else {
                    return Ok(Out::Nothing);
                };
                self.set_size(self.handles[i].file, *size as usize);
                Ok(Out::Nothing)
            }
            Op::HandleFlush { h } => {
                let Some(i) = self.pick(h, false) else {
                    return Ok(Out::Nothing);
                };
                if self.handles[i].write {
                    self.closed(self.handles[i].file);
                }
                Ok(Out::Nothing)
            }
            Op::HandleClose { h } => {
                let Some(i) = self.pick(h, false) else {
                    return Ok(Out::Nothing);
                };
                let handle = self.handles.remove(i);
                if handle.write {
                    self.closed(handle.file);
                }
                self.collect();
                Ok(Out::Nothing)
            }
            Op::Truncate { path, size } => {
                let id = self.writable(path.path())?;
                // A write session of its own unless one is open already.
                self.open_for_writing(id, false);
                self.set_size(id, *size as usize);
                if self.writers(id) == 0 {
                    self.closed(id);
                }
                Ok(Out::Nothing)
            }
            Op::Rename { from, to } => self.rename(from.path(), to.path()).map(|()| Out::Nothing),
            Op::Unlink { path } => {
                let path = path.path();
                let (parent, node) = self.entry(path)?;
                match node {
                    None => return Err(E::NoEnt),
                    Some(n) if n.is_dir() => return Err(E::IsDir),
                    Some(_) if parent == Node::Control => return Err(E::RoFs),
                    Some(_) => {}
                }
                self.entries.remove(path);
                self.touch_dir(parent_of(path));
                self.collect();
                Ok(Out::Nothing)
            }
            Op::Mkdir { path, perm } => {
                let path = path.path();
                let (parent, existing) = self.entry(path)?;
                if existing.is_some() {
                    return Err(E::Exist);
                }
                self.check_new_name(parent, path)?;
                let meta = MDir {
                    perm: *perm,
                    mtime: None,
                    stored: false,
                };
                self.entries.insert(path.to_string(), Entry::Dir(meta));
                self.touch_dir(parent_of(path));
                Ok(Out::Nothing)
            }
            Op::Rmdir { path } => {
                let path = path.path();
                let (parent, node) = self.entry(path)?;
                match node {
                    None => return Err(E::NoEnt),
                    Some(n) if !n.is_dir() => return Err(E::NotDir),
                    Some(Node::Control) => return Err(E::RoFs),
                    Some(_) if parent == Node::Control => return Err(E::RoFs),
                    Some(_) if self.has_children(path) => return Err(E::NotEmpty),
                    Some(_) => {}
                }
                self.entries.remove(path);
                self.touch_dir(parent_of(path));
                Ok(Out::Nothing)
            }
            Op::Chmod { path, perm } => self.set_attr(path.path(), |perm_of, _| *perm_of = *perm),
            Op::Utimens { path, secs } => {
                self.set_attr(path.path(), |_, mtime_of| *mtime_of = Some(mtime(*secs)))
            }
            Op::Fsync { path } => {
                if let Node::File(id) = self.node(path.path())? {
                    if self.writers(id) > 0 {
                        // Committed as it is now, open or not.
                        let f = self.file(id);
                        f.complete = Some(f.bytes.clone());
                    }
                }
                Ok(Out::Nothing)
            }
            Op::Read { path, offset, len } => Ok(Out::Bytes(
                self.readable(path.path())?
                    .map(|b| slice(&b, *offset as usize, *len as usize)),
            )),
            Op::ReadAll { path } => Ok(Out::Bytes(self.readable(path.path())?)),
            Op::Stats => Ok(Out::Nothing),
            Op::Commit | Op::Crash | Op::Remount => unreachable!("the runner does these"),
        }
    }

    /// The file `path` names, for writing.
    fn writable(&self, path: &str) -> Result<FileId, E> {
        match self.node(path)? {
            Node::File(id) => Ok(id),
            Node::Stats => Err(E::RoFs),
            _ => Err(E::IsDir),
        }
    }

    /// The bytes of the file `path` names (`None`: the stats file).
    fn readable(&self, path: &str) -> Result<Option<Vec<u8>>, E> {
        match self.node(path)? {
            Node::File(id) => Ok(Some(self.files[&id].bytes.clone())),
            Node::Stats => Ok(None),
            _ => Err(E::IsDir),
        }
    }

    /// The checks of a new entry at `path` in directory `parent` that the
    /// filesystem makes (the kernel has found no entry there).
    fn check_new_name(&self, parent: Node, path: &str) -> Result<(), E> {
        if parent == Node::Control {
            return Err(E::RoFs);
        }
        if depth(path) < ITEM_DEPTH && RESERVED.contains(&name_of(path)) {
            return Err(E::Inval);
        }
        Ok(())
    }

    /// chmod or utimens: `set` changes the mode and mtime of the node.
    fn set_attr(
        &mut self,
        path: &str,
        set: impl FnOnce(&mut u16, &mut Option<SystemTime>),
    ) -> Result<Out, E> {
        match self.node(path)? {
            Node::Control | Node::Stats => return Err(E::RoFs),
            Node::Root => unreachable!("no operation names the root"),
            Node::Dir => {
                let d = self.dir_meta(path).expect("a directory");
                set(&mut d.perm, &mut d.mtime);
            }
            Node::File(id) => {
                let f = self.file(id);
                set(&mut f.perm, &mut f.mtime);
            }
        }
        Ok(Out::Nothing)
    }

    pub fn rename(&mut self, from: &str, to: &str) -> Result<(), E> {
        let (from_parent, source) = self.entry(from)?;
        let (to_parent, target) = self.entry(to)?;
        let source = source.ok_or(E::NoEnt)?;
        // What the kernel answers itself.
        if from == to {
            return Ok(());
        }
        if source.is_dir() && within(to, from) {
            return Err(E::Inval);
        }
        if target.is_some() && within(from, to) {
            return Err(E::NotEmpty);
        }
        match (source.is_dir(), target.map(Node::is_dir)) {
            (true, Some(false)) => return Err(E::NotDir),
            (false, Some(true)) => return Err(E::IsDir),
            _ => {}
        }
        // What the filesystem answers.
        let control = [from_parent, to_parent, source].contains(&Node::Control);
        if control || target == Some(Node::Control) {
            return Err(E::RoFs);
        }
        self.check_new_name(to_parent, to)?;
        if !source.is_dir() && depth(to) < ITEM_DEPTH {
            return Err(E::Perm);
        }
        // Items stay in their modality; so do timelines and modalities
        // holding items.
        let (from_m, to_m) = (modality_of(parent_of(from)), modality_of(parent_of(to)));
        if self.holds_files(from) && (from_m.is_none() || from_m != to_m) {
            return Err(E::XDev);
        }
        if target == Some(Node::Dir) && self.has_children(to) {
            return Err(E::NotEmpty);
        }
        // Done: the entry and everything below it move.
        self.entries.remove(to);
        let moved: Vec<String> = self
            .entries
            .keys()
            .filter(|k| within(k, from))
            .cloned()
            .collect();
        for old in moved {
            let entry = self.entries.remove(&old).expect("listed");
            let new = format!("{to}{}", &old[from.len()..]);
            self.entries.insert(new, entry);
        }
        self.touch_dir(parent_of(from));
        self.touch_dir(parent_of(to));
        self.collect();
        Ok(())
    }

    /// Files open for writing keep their last complete version (or are
    /// absent without one); returns, for a crash, the unfinished bytes the
    /// spool's `lost+found` must hold, by path.
    pub fn settle_open_files(&mut self) -> Vec<(String, Vec<u8>)> {
        let mut lost = Vec::new();
        let named: Vec<(String, FileId)> = self
            .entries
            .iter()
            .filter_map(|(k, e)| match e {
                Entry::File(id) => Some((k.clone(), *id)),
                Entry::Dir(_) => None,
            })
            .collect();
        for (path, id) in named {
            if self.writers(id) == 0 {
                continue;
            }
            let f = self.file(id);
            if f.dirty && !f.bytes.is_empty() {
                lost.push((path.clone(), f.bytes.clone()));
            }
            match f.complete.clone() {
                Some(bytes) => f.bytes = bytes,
                None => {
                    self.entries.remove(&path);
                }
            }
        }
        self.handles.clear();
        self.collect();
        lost
    }

    /// What the store holds after a commit of this state.
    pub fn committed(&self) -> Model {
        let mut model = self.clone();
        model.settle_open_files();
        remounted(&model)
    }
}

/// What the store keeps of `model`'s committed state: everything below
/// the timelines — files with their bytes, modes and mtimes, directories
/// (empty ones too) with theirs, every modality (docs/SEMANTICS.md). Not
/// stored: timelines without modalities, and the modes and mtimes of the
/// root and the timelines (a new mount shows the defaults).
fn survives_remount(model: &Model) -> Model {
    let mut out = model.clone();
    out.entries.retain(|k, _| match depth(k) {
        1 => model.entries.keys().any(|c| depth(c) == 2 && within(c, k)),
        _ => true,
    });
    for (k, entry) in out.entries.iter_mut() {
        match (entry, depth(k)) {
            (Entry::Dir(d), 1) => {
                *d = MDir {
                    perm: DIR_MODE,
                    mtime: None,
                    stored: false,
                }
            }
            (Entry::Dir(d), _) => d.stored = true,
            _ => {}
        }
    }
    out
}

/// A new mount of the store holding `model`'s committed state: what the
/// store keeps, no handles, new inodes, every file stored and untouched.
pub fn remounted(model: &Model) -> Model {
    let mut out = survives_remount(model);
    out.handles.clear();
    out.collect();
    for f in out.files.values_mut() {
        f.ino = None;
    }
    out
}
