//! Reference-model tests of the filesystem core, without the kernel:
//! random sequences of operations over a small universe of names run both
//! on a mount's [`Fs`] core (an in-memory store, a real spool) and on a
//! plain in-memory model of what `docs/SEMANTICS.md` promises, and the two
//! are compared after every step: listings, lookups, attributes, bytes and
//! errors. Crashes (all state dropped, the spool remounted) and clean
//! remounts are among the operations. Failures proptest finds are kept
//! below as named regression tests.
//!
//! The harness stands in for the kernel where the kernel answers without
//! asking the filesystem (path walks, `EEXIST` on create and mkdir of a
//! name it found, `rename` of an entry onto itself, kind mismatches of
//! rename, unlink and rmdir), so errors are those a program would see.

#[path = "../common/mod.rs"]
mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::core::{Bench, Core};
use packfs::fs::{FsError, Opened, SetAttr, Stat};
use packfs::namespace::{Ino, Kind, NsError, ROOT_INO};
use packfs::write::WriteOptions;
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;

// ---------------------------------------------------------------------------
// Operations

/// What an operation names: a path, or (so that most operations meet
/// something) a node of the mount as it is when the operation runs, which
/// the runner turns into its path first.
#[derive(Clone, PartialEq, Eq)]
enum S {
    /// This `/`-separated path below the root.
    P(String),
    /// The n-th (modulo their number) file or directory, in path order.
    Any(u8),
    /// The n-th file.
    File(u8),
    /// The n-th directory (not the root).
    Dir(u8),
    /// The n-th empty directory.
    Empty(u8),
    /// This name in the n-th directory, the root first.
    In(u8, &'static str),
}

impl fmt::Debug for S {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            S::P(path) => write!(f, "p({path:?})"),
            S::Any(i) => write!(f, "Any({i})"),
            S::File(i) => write!(f, "File({i})"),
            S::Dir(i) => write!(f, "Dir({i})"),
            S::Empty(i) => write!(f, "Empty({i})"),
            S::In(i, name) => write!(f, "In({i}, {name:?})"),
        }
    }
}

fn p(path: &str) -> S {
    S::P(path.to_string())
}

impl S {
    /// The path, once the runner made it one.
    fn path(&self) -> &str {
        match self {
            S::P(path) => path,
            other => unreachable!("{other:?} is resolved before it is used"),
        }
    }
}

/// `len` bytes counting up from `fill`: distinct, and short to print.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Data {
    fill: u8,
    len: u8,
}

impl fmt::Debug for Data {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "data({}, {})", self.fill, self.len)
    }
}

fn data(fill: u8, len: u8) -> Data {
    Data { fill, len }
}

impl Data {
    fn bytes(self) -> Vec<u8> {
        (0..self.len).map(|i| self.fill.wrapping_add(i)).collect()
    }
}

/// Which of the open handles an operation picks (modulo their number).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct H(u8);

/// One step. Handle operations pick among the handles open at that moment
/// (write handles only where writing needs one) and do nothing if there
/// is none.
#[derive(Clone, Debug)]
enum Op {
    /// `open(O_CREAT | O_EXCL)`, write, and close unless `keep_open`.
    Create {
        path: S,
        data: Data,
        perm: u16,
        keep_open: bool,
    },
    /// Open for writing, write at `offset`, close.
    Write {
        path: S,
        offset: u16,
        data: Data,
    },
    /// Open for writing (`O_TRUNC` with `truncate`), kept open.
    OpenWrite {
        path: S,
        truncate: bool,
    },
    /// Open for reading, kept open.
    OpenRead {
        path: S,
    },
    HandleWrite {
        h: H,
        offset: u16,
        data: Data,
    },
    HandleRead {
        h: H,
        offset: u16,
        len: u16,
    },
    /// `ftruncate`.
    HandleTruncate {
        h: H,
        size: u16,
    },
    /// `close` of one descriptor while a duplicate stays open (FLUSH only).
    HandleFlush {
        h: H,
    },
    /// The last `close` (FLUSH, then RELEASE).
    HandleClose {
        h: H,
    },
    /// `truncate(2)` by path.
    Truncate {
        path: S,
        size: u16,
    },
    Rename {
        from: S,
        to: S,
    },
    Unlink {
        path: S,
    },
    Mkdir {
        path: S,
        perm: u16,
    },
    Rmdir {
        path: S,
    },
    Chmod {
        path: S,
        perm: u16,
    },
    /// `utimens` of the mtime to this many seconds after the epoch.
    Utimens {
        path: S,
        secs: u32,
    },
    /// `fsync` of a file, `fsyncdir` of a directory.
    Fsync {
        path: S,
    },
    Read {
        path: S,
        offset: u16,
        len: u16,
    },
    ReadAll {
        path: S,
    },
    /// Open, read and close `/.packfs/stats`.
    Stats,
    /// `fsyncdir` of the root: everything is committed. Then the store's
    /// ref must hold what the model says a commit holds.
    Commit,
    /// The process dies; the next mount recovers the spool.
    Crash,
    /// Every handle closed, unmount, mount again.
    Remount,
}

/// A name: mostly item names, sometimes one a timeline or modality
/// cannot have, or the stats file's.
fn name_strategy() -> impl Strategy<Value = &'static str> {
    prop_oneof![
        4 => Just("a"),
        4 => Just("b"),
        4 => Just("c"),
        1 => Just("_packfs"),
        1 => Just(".packfs"),
        1 => Just("stats"),
    ]
}

/// A path of the universe: timelines `t` and `u`, modalities `m` and `n`,
/// items `a`, `b`, `c` one or two deep, and reserved names.
fn path_strategy() -> impl Strategy<Value = S> {
    let timeline = prop_oneof![
        12 => Just("t"),
        3 => Just("u"),
        1 => Just(".packfs"),
        1 => Just("_packfs"),
    ];
    let modality = prop_oneof![
        8 => Just("m"),
        5 => Just("n"),
        1 => Just("stats"),
        1 => Just("_packfs"),
    ];
    let item = || prop_oneof![Just("a"), Just("b"), Just("c")];
    (timeline, modality, item(), item(), 0..10u8).prop_map(|(t, m, i, j, depth)| {
        S::P(match depth {
            0 => t.to_string(),
            1 => format!("{t}/{m}"),
            2..=6 => format!("{t}/{m}/{i}"),
            _ => format!("{t}/{m}/{i}/{j}"),
        })
    })
}

/// Something that may exist: mostly a node of the mount.
fn existing() -> impl Strategy<Value = S> {
    prop_oneof![
        3 => any::<u8>().prop_map(S::Any),
        3 => any::<u8>().prop_map(S::File),
        2 => path_strategy(),
    ]
}

/// Something that may be a directory: mostly one of the mount.
fn existing_dir() -> impl Strategy<Value = S> {
    prop_oneof![
        3 => any::<u8>().prop_map(S::Dir),
        3 => any::<u8>().prop_map(S::Empty),
        2 => any::<u8>().prop_map(S::Any),
        1 => path_strategy(),
    ]
}

/// Somewhere a new entry may go: mostly a name in a directory of the mount.
fn fresh() -> impl Strategy<Value = S> {
    prop_oneof![
        5 => (any::<u8>(), name_strategy()).prop_map(|(i, name)| S::In(i, name)),
        2 => path_strategy(),
    ]
}

fn data_strategy() -> impl Strategy<Value = Data> {
    (any::<u8>(), 0..40u8).prop_map(|(fill, len)| Data { fill, len })
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let perm = || prop_oneof![Just(0o644u16), Just(0o600), Just(0o755), Just(0o700)];
    let h = || any::<u8>().prop_map(H);
    let target = || prop_oneof![3 => fresh(), 2 => any::<u8>().prop_map(S::Any)];
    prop_oneof![
        6 => (fresh(), data_strategy(), perm(), any::<bool>()).prop_map(
            |(path, data, perm, keep_open)| Op::Create { path, data, perm, keep_open }
        ),
        4 => (existing(), 0..160u16, data_strategy())
            .prop_map(|(path, offset, data)| Op::Write { path, offset, data }),
        3 => (existing(), any::<bool>())
            .prop_map(|(path, truncate)| Op::OpenWrite { path, truncate }),
        2 => existing().prop_map(|path| Op::OpenRead { path }),
        5 => (h(), 0..160u16, data_strategy())
            .prop_map(|(h, offset, data)| Op::HandleWrite { h, offset, data }),
        2 => (h(), 0..160u16, 0..100u16)
            .prop_map(|(h, offset, len)| Op::HandleRead { h, offset, len }),
        1 => (h(), 0..160u16).prop_map(|(h, size)| Op::HandleTruncate { h, size }),
        2 => h().prop_map(|h| Op::HandleFlush { h }),
        3 => h().prop_map(|h| Op::HandleClose { h }),
        2 => (existing(), 0..160u16).prop_map(|(path, size)| Op::Truncate { path, size }),
        6 => (existing(), target()).prop_map(|(from, to)| Op::Rename { from, to }),
        3 => (existing_dir(), target()).prop_map(|(from, to)| Op::Rename { from, to }),
        3 => existing().prop_map(|path| Op::Unlink { path }),
        4 => (fresh(), perm()).prop_map(|(path, perm)| Op::Mkdir { path, perm }),
        3 => existing_dir().prop_map(|path| Op::Rmdir { path }),
        1 => (existing(), perm()).prop_map(|(path, perm)| Op::Chmod { path, perm }),
        1 => (existing(), 1..3u32)
            .prop_map(|(path, secs)| Op::Utimens { path, secs: secs * 1_000_000 }),
        2 => existing().prop_map(|path| Op::Fsync { path }),
        2 => (existing(), 0..160u16, 0..100u16)
            .prop_map(|(path, offset, len)| Op::Read { path, offset, len }),
        2 => existing().prop_map(|path| Op::ReadAll { path }),
        1 => Just(Op::Stats),
        2 => Just(Op::Commit),
        2 => Just(Op::Crash),
        2 => Just(Op::Remount),
    ]
}

// ---------------------------------------------------------------------------
// Errors, as a program sees them

/// An error number, from [`FsError`] as `fuse.rs` maps it.
#[derive(Clone, Debug, PartialEq, Eq)]
enum E {
    NoEnt,
    Exist,
    NotEmpty,
    IsDir,
    NotDir,
    XDev,
    Perm,
    Inval,
    RoFs,
    /// Anything else: never expected.
    Other(String),
}

impl From<FsError> for E {
    fn from(e: FsError) -> E {
        match e {
            FsError::Namespace(ns) => match ns {
                NsError::NotFound => E::NoEnt,
                NsError::Exists => E::Exist,
                NsError::NotEmpty => E::NotEmpty,
                NsError::IsADirectory => E::IsDir,
                NsError::NotADirectory => E::NotDir,
                NsError::CrossModality => E::XDev,
                NsError::NotPermitted(_) => E::Perm,
                NsError::InvalidName(_) => E::Inval,
                NsError::ReadOnly => E::RoFs,
                other => E::Other(other.to_string()),
            },
            other => E::Other(other.to_string()),
        }
    }
}

// ---------------------------------------------------------------------------
// The model

/// The dataset every case starts from: two modalities of one timeline.
const STORED: &[(&str, Data)] = &[
    ("t/m/a", Data { fill: 1, len: 120 }),
    ("t/m/b", Data { fill: 2, len: 40 }),
    ("t/m/c/a", Data { fill: 3, len: 60 }),
    ("t/n/a", Data { fill: 4, len: 80 }),
];
const FILE_MODE: u16 = 0o644;
const DIR_MODE: u16 = 0o755;
/// Names a timeline or modality cannot have (`EINVAL`).
const RESERVED: &[&str] = &["_packfs", ".packfs"];
const CONTROL: &str = ".packfs";
/// Where items live: `/<timeline>/<modality>/…`.
const ITEM_DEPTH: usize = 3;

type FileId = usize;

#[derive(Clone, Debug)]
struct MFile {
    bytes: Vec<u8>,
    perm: u16,
    /// `None`: changed at a time the model does not know.
    mtime: Option<SystemTime>,
    /// While open for writing: the last complete version (`None` for a file
    /// never closed), what a commit or a crash keeps.
    complete: Option<Vec<u8>>,
    /// Written since the last close of a descriptor: a crash moves these
    /// bytes to `lost+found`.
    dirty: bool,
    /// The inode the core showed for it (checked to stay the same).
    ino: Option<Ino>,
}

#[derive(Clone, Debug)]
struct MDir {
    perm: u16,
    mtime: Option<SystemTime>,
}

#[derive(Clone, Debug)]
enum Entry {
    Dir(MDir),
    File(FileId),
}

#[derive(Clone, Debug)]
struct MHandle {
    fh: u64,
    ino: Ino,
    file: FileId,
    write: bool,
}

/// What a path names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Node {
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
struct Model {
    /// Every file and directory by path (the root is implicit).
    entries: BTreeMap<String, Entry>,
    /// Files by identity: a name, an open handle, or both.
    files: BTreeMap<FileId, MFile>,
    next_file: FileId,
    handles: Vec<MHandle>,
}

fn parent_of(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(parent, _)| parent)
}

fn name_of(path: &str) -> &str {
    path.rsplit_once('/').map_or(path, |(_, name)| name)
}

fn depth(path: &str) -> usize {
    match path {
        "" => 0,
        p => p.split('/').count(),
    }
}

/// `path` itself or below it.
fn within(path: &str, dir: &str) -> bool {
    path == dir || path.strip_prefix(dir).is_some_and(|r| r.starts_with('/'))
}

/// The modality directory `dir` is or is below (`None` above one).
fn modality_of(dir: &str) -> Option<String> {
    let parts: Vec<&str> = dir.split('/').collect();
    (depth(dir) >= 2).then(|| parts[..2].join("/"))
}

fn mtime(secs: u32) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(u64::from(secs))
}

/// `got` against `want`, briefly: lengths and the first difference.
fn diff(got: &[u8], want: &[u8]) -> String {
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
fn short(bytes: &[u8]) -> String {
    format!("{} bytes {:?}…", bytes.len(), &bytes[..bytes.len().min(8)])
}

fn slice(bytes: &[u8], offset: usize, len: usize) -> Vec<u8> {
    let start = offset.min(bytes.len());
    bytes[start..(start + len).min(bytes.len())].to_vec()
}

/// What a successful operation gives back besides changing the model.
#[derive(Debug, PartialEq)]
enum Out {
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
    fn initial() -> Model {
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

    fn file(&mut self, id: FileId) -> &mut MFile {
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
    fn pick(&self, h: &H, write: bool) -> Option<usize> {
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
    fn write(&mut self, id: FileId, offset: u16, data: Data) {
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
    fn closed(&mut self, id: FileId) {
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
    fn concrete(&self, op: &Op) -> Op {
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
    fn apply(&mut self, op: &Op) -> Result<Out, E> {
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

    fn rename(&mut self, from: &str, to: &str) -> Result<(), E> {
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
    fn settle_open_files(&mut self) -> Vec<(String, Vec<u8>)> {
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
    fn committed(&self) -> Model {
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
        if let (Entry::Dir(d), 1) = (entry, depth(k)) {
            *d = MDir {
                perm: DIR_MODE,
                mtime: None,
            };
        }
    }
    out
}

/// A new mount of the store holding `model`'s committed state: what the
/// store keeps, no handles, new inodes, every file stored and untouched.
fn remounted(model: &Model) -> Model {
    let mut out = survives_remount(model);
    out.handles.clear();
    out.collect();
    for f in out.files.values_mut() {
        f.ino = None;
    }
    out
}

// ---------------------------------------------------------------------------
// The core, driven as the kernel would

/// The write options of the mounts under test: flushes only when asked.
fn write_options() -> WriteOptions {
    WriteOptions {
        idle_flush: Duration::from_secs(3600),
        ..WriteOptions::default()
    }
}

fn mount(bench: &Bench) -> Core {
    bench.mount_with(1, write_options())
}

/// The node at `path`.
fn resolve(core: &Core, path: &str) -> Result<Stat, E> {
    let fs = core.fs();
    let mut stat = fs.getattr(ROOT_INO)?;
    for name in path.split('/').filter(|n| !n.is_empty()) {
        stat = fs.lookup(stat.attr.ino, name.as_bytes())?;
    }
    Ok(stat)
}

/// The directory holding `path`, and the entry `path` names in it.
fn resolve_entry<'a>(core: &Core, path: &'a str) -> Result<(Ino, &'a [u8], Option<Stat>), E> {
    let parent = resolve(core, parent_of(path))?;
    if parent.attr.kind != Kind::Dir {
        return Err(E::NotDir);
    }
    let name = name_of(path).as_bytes();
    match core.fs().lookup(parent.attr.ino, name) {
        Ok(stat) => Ok((parent.attr.ino, name, Some(stat))),
        Err(e) => match E::from(e) {
            E::NoEnt => Ok((parent.attr.ino, name, None)),
            e => Err(e),
        },
    }
}

/// A file to open: the kernel opens no directory for writing.
fn resolve_file(core: &Core, path: &str) -> Result<Ino, E> {
    match resolve(core, path)? {
        s if s.attr.kind == Kind::Dir => Err(E::IsDir),
        s => Ok(s.attr.ino),
    }
}

fn handle(opened: Opened) -> u64 {
    match opened {
        Opened::Handle { fh, .. } => fh,
        Opened::Stateless | Opened::Backing { .. } => {
            panic!("a read-write mount opened a file without a daemon handle")
        }
    }
}

/// A handle opened by an operation.
struct NewHandle {
    fh: u64,
    ino: Ino,
}

fn close(core: &Core, fh: u64) -> Result<(), E> {
    core.fs().flush(fh)?;
    core.fs().release(fh);
    Ok(())
}

fn write_all(core: &Core, fh: u64, offset: u64, data: Data) -> Result<(), E> {
    if data.len > 0 {
        let written = core.block_on(core.fs().write(fh, offset, &data.bytes()))?;
        assert_eq!(written, u32::from(data.len));
    }
    Ok(())
}

/// Reads up to `len` bytes of `ino` at `offset`.
fn read(core: &Core, ino: Ino, offset: u64, len: u32) -> Result<Vec<u8>, E> {
    Ok(core
        .block_on(core.fs().read(ino, offset, len, &mut Vec::new()))?
        .to_vec())
}

/// Runs `op` on the core; `model` (as before the operation) names the
/// handles. Returns bytes read and a handle opened, if any.
fn run_on_core(
    core: &Core,
    model: &Model,
    op: &Op,
) -> Result<(Option<Vec<u8>>, Option<NewHandle>), E> {
    let fs = core.fs();
    let picked = |h: &H, write: bool| model.pick(h, write).map(|i| &model.handles[i]);
    let mut bytes = None;
    let mut opened = None;
    match op {
        Op::Create {
            path,
            data,
            perm,
            keep_open,
        } => {
            let (parent, name, existing) = resolve_entry(core, path.path())?;
            if existing.is_some() {
                return Err(E::Exist); // O_EXCL: the kernel found it
            }
            let (stat, fh) = fs.create(parent, name, *perm)?;
            write_all(core, fh, 0, *data)?;
            match keep_open {
                true => {
                    opened = Some(NewHandle {
                        fh,
                        ino: stat.attr.ino,
                    })
                }
                false => close(core, fh)?,
            }
        }
        Op::Write { path, offset, data } => {
            let ino = resolve_file(core, path.path())?;
            let fh = handle(core.block_on(fs.open(ino, true, false))?);
            write_all(core, fh, u64::from(*offset), *data)?;
            close(core, fh)?;
        }
        Op::OpenWrite { path, truncate } => {
            let ino = resolve_file(core, path.path())?;
            let fh = handle(core.block_on(fs.open(ino, true, *truncate))?);
            opened = Some(NewHandle { fh, ino });
        }
        Op::OpenRead { path } => {
            let stat = resolve(core, path.path())?;
            let fh = handle(core.block_on(fs.open(stat.attr.ino, false, false))?);
            match stat.volatile {
                true => close(core, fh)?, // the stats file
                false => {
                    opened = Some(NewHandle {
                        fh,
                        ino: stat.attr.ino,
                    })
                }
            }
        }
        Op::HandleWrite { h, offset, data } => {
            if let Some(h) = picked(h, true) {
                write_all(core, h.fh, u64::from(*offset), *data)?;
            }
        }
        Op::HandleRead { h, offset, len } => {
            if let Some(h) = picked(h, false) {
                bytes = Some(read(core, h.ino, u64::from(*offset), u32::from(*len))?);
            }
        }
        Op::HandleTruncate { h, size } => {
            if let Some(h) = picked(h, true) {
                let set = SetAttr {
                    size: Some(u64::from(*size)),
                    ..SetAttr::default()
                };
                core.block_on(fs.setattr(h.ino, Some(h.fh), set))?;
            }
        }
        Op::HandleFlush { h } => {
            if let Some(h) = picked(h, false) {
                fs.flush(h.fh)?;
            }
        }
        Op::HandleClose { h } => {
            if let Some(h) = picked(h, false) {
                close(core, h.fh)?;
            }
        }
        Op::Truncate { path, size } => {
            let ino = resolve_file(core, path.path())?;
            let set = SetAttr {
                size: Some(u64::from(*size)),
                ..SetAttr::default()
            };
            core.block_on(fs.setattr(ino, None, set))?;
        }
        Op::Rename { from, to } => {
            let (from_dir, from_name, source) = resolve_entry(core, from.path())?;
            let (to_dir, to_name, target) = resolve_entry(core, to.path())?;
            let source = source.ok_or(E::NoEnt)?;
            // The kernel's own checks, made before it asks the filesystem.
            let is_dir = |s: &Stat| s.attr.kind == Kind::Dir;
            if target.is_some_and(|t| t.attr.ino == source.attr.ino) {
                return Ok((None, None));
            }
            if is_dir(&source) && within(to.path(), from.path()) {
                return Err(E::Inval);
            }
            if target.is_some() && within(from.path(), to.path()) {
                return Err(E::NotEmpty);
            }
            match (is_dir(&source), target.as_ref().map(is_dir)) {
                (true, Some(false)) => return Err(E::NotDir),
                (false, Some(true)) => return Err(E::IsDir),
                _ => {}
            }
            fs.rename((from_dir, from_name), (to_dir, to_name), Default::default())?;
        }
        Op::Unlink { path } => {
            let (parent, name, node) = resolve_entry(core, path.path())?;
            match node {
                None => return Err(E::NoEnt),
                Some(s) if s.attr.kind == Kind::Dir => return Err(E::IsDir),
                Some(_) => fs.unlink(parent, name)?,
            }
        }
        Op::Mkdir { path, perm } => {
            let (parent, name, existing) = resolve_entry(core, path.path())?;
            if existing.is_some() {
                return Err(E::Exist);
            }
            fs.mkdir(parent, name, *perm)?;
        }
        Op::Rmdir { path } => {
            let (parent, name, node) = resolve_entry(core, path.path())?;
            match node {
                None => return Err(E::NoEnt),
                Some(s) if s.attr.kind != Kind::Dir => return Err(E::NotDir),
                Some(_) => fs.rmdir(parent, name)?,
            }
        }
        Op::Chmod { path, perm } => {
            let ino = resolve(core, path.path())?.attr.ino;
            let set = SetAttr {
                perm: Some(*perm),
                ..SetAttr::default()
            };
            core.block_on(fs.setattr(ino, None, set))?;
        }
        Op::Utimens { path, secs } => {
            let ino = resolve(core, path.path())?.attr.ino;
            let set = SetAttr {
                mtime: Some(mtime(*secs)),
                ..SetAttr::default()
            };
            core.block_on(fs.setattr(ino, None, set))?;
        }
        Op::Fsync { path } => {
            let stat = resolve(core, path.path())?;
            let ino = (stat.attr.kind == Kind::File).then_some(stat.attr.ino);
            core.block_on(fs.fsync(ino))?;
        }
        Op::Read { path, offset, len } => {
            let ino = resolve_file(core, path.path())?;
            bytes = Some(read(core, ino, u64::from(*offset), u32::from(*len))?);
        }
        Op::ReadAll { path } => {
            let ino = resolve_file(core, path.path())?;
            let size = fs.getattr(ino)?.attr.size;
            bytes = Some(read(core, ino, 0, size as u32 + 1)?);
        }
        Op::Stats => {
            let stats = resolve(core, ".packfs/stats")?;
            let opened = core.block_on(fs.open(stats.attr.ino, false, false))?;
            assert!(
                matches!(
                    opened,
                    Opened::Handle {
                        direct_io: true,
                        ..
                    }
                ),
                "the stats file opened as {opened:?}"
            );
            let text = read(core, stats.attr.ino, 0, 1 << 16)?;
            let text = String::from_utf8(text).expect("the stats file is text");
            assert!(text.contains("gets"), "stats: {text}");
            close(core, handle(opened))?;
        }
        Op::Commit | Op::Crash | Op::Remount => unreachable!("the runner does these"),
    }
    Ok((bytes, opened))
}

/// Runs `op` on the model and on the core and compares what they answer;
/// on success the model takes the change.
fn step(core: &Core, model: &mut Model, op: &Op) -> Result<(), String> {
    let mut next = model.clone();
    let expected = next.apply(op);
    let actual = run_on_core(core, model, op);
    match (expected, actual) {
        (Err(e), Err(a)) if e == a => Ok(()),
        (Ok(out), Ok((bytes, new_handle))) => {
            match (&out, &bytes) {
                (Out::Bytes(Some(want)), Some(got)) if want != got => {
                    return Err(format!("read {}", diff(got, want)));
                }
                (Out::Bytes(_), None) => {
                    return Err("the core read nothing".to_string());
                }
                _ => {}
            }
            match (out, new_handle) {
                (Out::Opened { file, write }, Some(NewHandle { fh, ino })) => {
                    next.handles.push(MHandle {
                        fh,
                        ino,
                        file,
                        write,
                    });
                    let known = next.file(file).ino.get_or_insert(ino);
                    if *known != ino {
                        return Err(format!("opened inode {ino}, the file's is {known}"));
                    }
                }
                (Out::Opened { .. }, None) | (_, Some(_)) => {
                    return Err("the core and the model disagree on a new handle".into());
                }
                _ => {}
            }
            *model = next;
            Ok(())
        }
        (expected, actual) => Err(format!(
            "the model says {:?}, the core {:?}",
            expected.map(|_| ()),
            actual.map(|_| ())
        )),
    }
}

// ---------------------------------------------------------------------------
// Comparing the whole mount

/// Compares the core with the model: the listings, each node's lookup,
/// kind and size and the files' bytes, and with `attrs` the modes, known
/// mtimes, link counts and inodes; then what open handles read.
fn compare(core: &Core, model: &mut Model, attrs: bool) -> Result<(), String> {
    let listed = core.listing()?;
    let real: BTreeMap<&str, Kind> = listed
        .iter()
        .map(|(k, s)| (k.as_str(), s.attr.kind))
        .collect();
    let expected: BTreeMap<&str, Kind> = model
        .entries
        .iter()
        .map(|(k, e)| {
            let kind = match e {
                Entry::Dir(_) => Kind::Dir,
                Entry::File(_) => Kind::File,
            };
            (k.as_str(), kind)
        })
        .collect();
    if real != expected {
        return Err(format!("the mount lists {real:?}, the model {expected:?}"));
    }
    let mut inos = BTreeSet::new();
    for (path, listed_stat) in &listed {
        let stat = resolve(core, path).map_err(|e| format!("lookup {path}: {e:?}"))?;
        let attr = stat.attr;
        if attr.ino != listed_stat.attr.ino || !inos.insert(attr.ino) {
            return Err(format!(
                "{path}: inode {} (listed {})",
                attr.ino, listed_stat.attr.ino
            ));
        }
        match &model.entries[path] {
            Entry::Dir(d) => {
                let subdirs = model
                    .entries
                    .iter()
                    .filter(|(k, e)| parent_of(k) == path && matches!(e, Entry::Dir(_)))
                    .count();
                let want = (d.perm, d.mtime.unwrap_or(attr.mtime), 2 + subdirs as u32);
                let got = (attr.perm, attr.mtime, attr.nlink);
                if attrs && want != got {
                    return Err(format!(
                        "{path}: (mode, mtime, nlink) {got:?}, the model {want:?}"
                    ));
                }
            }
            Entry::File(id) => {
                let f = model.files.get_mut(id).expect("named file exists");
                let bytes = read(core, attr.ino, 0, attr.size as u32 + 1)
                    .map_err(|e| format!("read {path}: {e:?}"))?;
                if attr.size != f.bytes.len() as u64 || bytes != f.bytes {
                    return Err(format!(
                        "{path}: size {}, {}",
                        attr.size,
                        diff(&bytes, &f.bytes)
                    ));
                }
                if attrs {
                    let want = (
                        f.perm,
                        f.mtime.unwrap_or(attr.mtime),
                        1,
                        *f.ino.get_or_insert(attr.ino),
                    );
                    let got = (attr.perm, attr.mtime, attr.nlink, attr.ino);
                    if want != got {
                        return Err(format!(
                            "{path}: (mode, mtime, nlink, inode) {got:?}, the model {want:?}"
                        ));
                    }
                }
            }
        }
    }
    // The control directory is found but never listed.
    let control = resolve(core, CONTROL).map_err(|e| format!("lookup .packfs: {e:?}"))?;
    if control.attr.kind != Kind::Dir {
        return Err(".packfs is not a directory".into());
    }
    for h in &model.handles {
        let f = &model.files[&h.file];
        let size = core
            .fs()
            .getattr(h.ino)
            .map(|s| s.attr.size)
            .map_err(E::from);
        let bytes = read(core, h.ino, 0, f.bytes.len() as u32 + 1);
        if size != Ok(f.bytes.len() as u64) || bytes.as_ref() != Ok(&f.bytes) {
            return Err(format!(
                "handle {} (inode {}) shows size {size:?}, {}",
                h.fh,
                h.ino,
                match &bytes {
                    Ok(b) => diff(b, &f.bytes),
                    Err(e) => format!("{e:?}"),
                }
            ));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Running a sequence

/// Files below the spool's `lost+found`, by path below it.
fn lost_and_found(bench: &Bench) -> BTreeMap<String, Vec<u8>> {
    let root = bench.spool.join("lost+found");
    let mut out = BTreeMap::new();
    let mut pending = vec![root.clone()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else {
                let rel = path
                    .strip_prefix(&root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                out.insert(rel, std::fs::read(&path).unwrap());
            }
        }
    }
    out
}

/// The new entries of `lost+found` must hold each of `expected`'s
/// unfinished files under its path (below a `<time>/` directory, with a
/// `.<n>` suffix if that name was taken).
fn check_lost_and_found(
    before: &BTreeMap<String, Vec<u8>>,
    after: &BTreeMap<String, Vec<u8>>,
    expected: &[(String, Vec<u8>)],
) -> Result<(), String> {
    let new: Vec<(&str, &Vec<u8>)> = after
        .iter()
        .filter(|(k, _)| !before.contains_key(*k))
        .map(|(k, v)| (k.split_once('/').map_or(k.as_str(), |(_, rest)| rest), v))
        .collect();
    for (path, bytes) in expected {
        let named = |found: &str| {
            found == path
                || found
                    .strip_prefix(path.as_str())
                    .and_then(|r| r.strip_prefix('.'))
                    .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        };
        if !new.iter().any(|(found, b)| named(found) && *b == bytes) {
            return Err(format!(
                "lost+found lacks {path} with {}; new entries: {:?}",
                short(bytes),
                new.iter().map(|(p, b)| (p, short(b))).collect::<Vec<_>>()
            ));
        }
    }
    Ok(())
}

/// The committed dataset (a read-only mount of the ref) must be `model`.
fn compare_committed(bench: &Bench, model: &Model) -> Result<(), String> {
    let core = bench.mount_read_only();
    let mut committed = model.clone();
    compare(&core, &mut committed, false).map_err(|e| format!("the committed dataset: {e}"))
}

/// Runs `ops` from the stored dataset on a fresh store, comparing the core
/// with the model after each (`REFTESTS_TRACE=1` prints them as they
/// run, with their paths); at the end every handle is closed and a
/// remount must show what the model keeps.
fn run(ops: &[Op]) -> Result<(), String> {
    let files: Vec<(&str, Vec<u8>)> = STORED.iter().map(|(p, d)| (*p, d.bytes())).collect();
    let bench = Bench::new(&files);
    let mut core = mount(&bench);
    let mut model = Model::initial();
    compare(&core, &mut model, true).map_err(|e| format!("at the start: {e}"))?;
    let ops = ops.iter().chain([&Op::Remount]);
    for (i, op) in ops.enumerate() {
        let op = &model.concrete(op);
        let context = |e: String| format!("op {i} {op:?}: {e}");
        if std::env::var_os("REFTESTS_TRACE").is_some() {
            eprintln!("{i}: {op:?}");
        }
        match op {
            Op::Commit => {
                core.block_on(core.fs().fsync(None))
                    .map_err(|e| context(format!("fsync: {e}")))?;
                compare_committed(&bench, &model.committed()).map_err(context)?;
            }
            Op::Crash => {
                let before = lost_and_found(&bench);
                let lost = model.settle_open_files();
                model = remounted(&model);
                core.crash();
                core = mount(&bench);
                compare(&core, &mut model, true).map_err(context)?;
                check_lost_and_found(&before, &lost_and_found(&bench), &lost).map_err(context)?;
            }
            Op::Remount => {
                while !model.handles.is_empty() {
                    let close = Op::HandleClose { h: H(0) };
                    step(&core, &mut model, &close).map_err(context)?;
                }
                core.unmount();
                model = remounted(&model);
                core = mount(&bench);
            }
            op => step(&core, &mut model, op).map_err(context)?,
        }
        compare(&core, &mut model, true).map_err(context)?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 128,
        max_shrink_iters: 4096,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "proptest-regressions/reftests.txt",
        ))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn the_core_behaves_like_the_model(ops in proptest::collection::vec(op_strategy(), 1..30)) {
        if let Err(e) = run(&ops) {
            return Err(TestCaseError::fail(e));
        }
    }
}

// ---------------------------------------------------------------------------
// Regressions: sequences proptest found, minimized.

#[test]
fn a_commit_a_crash_and_the_stats_file_keep_the_stored_dataset() {
    run(&[Op::Commit, Op::Crash, Op::Stats]).unwrap();
}

#[test]
fn a_close_while_another_descriptor_writes_is_the_version_a_commit_keeps() {
    run(&[
        Op::OpenWrite {
            path: p("t/m/a"),
            truncate: true,
        },
        Op::HandleFlush { h: H(0) },
        Op::Commit,
    ])
    .unwrap();
}

#[test]
fn a_close_while_another_descriptor_writes_is_the_version_a_crash_keeps() {
    run(&[
        Op::OpenWrite {
            path: p("t/m/a"),
            truncate: false,
        },
        Op::HandleWrite {
            h: H(0),
            offset: 0,
            data: data(9, 4),
        },
        Op::HandleFlush { h: H(0) },
        Op::HandleWrite {
            h: H(0),
            offset: 200,
            data: data(7, 3),
        },
        Op::Crash,
    ])
    .unwrap();
}

#[test]
fn a_write_after_a_commit_of_an_open_file_is_not_kept_by_a_crash() {
    run(&[
        Op::OpenWrite {
            path: p("t/m/a"),
            truncate: false,
        },
        Op::Create {
            path: p("t/m/x"),
            data: data(5, 3),
            perm: 0o644,
            keep_open: false,
        },
        Op::Commit,
        Op::HandleWrite {
            h: H(0),
            offset: 0,
            data: data(0, 1),
        },
        Op::Crash,
    ])
    .unwrap();
}

/// Found by proptest: an `fsync` committed a file still open and written,
/// and the compaction after that commit dropped the journal's record that
/// it was being written, so a crash left its unfinished bytes in
/// `lost+found` under a number instead of its path.
#[test]
fn a_file_written_and_synced_but_not_closed_is_in_lost_found_after_a_crash() {
    run(&[
        Op::OpenWrite {
            path: p("t/m/b"),
            truncate: false,
        },
        Op::HandleWrite {
            h: H(0),
            offset: 0,
            data: data(0, 1),
        },
        Op::Fsync { path: p("t/m/b") },
        Op::Crash,
    ])
    .unwrap();
}

#[test]
fn a_read_handle_of_an_unlinked_file_reads_its_last_bytes() {
    run(&[
        Op::OpenRead { path: p("t/m/b") },
        Op::Truncate {
            path: p("t/m/b"),
            size: 0,
        },
        Op::Unlink { path: p("t/m/b") },
    ])
    .unwrap();
}

/// Found first: changes in `/.packfs` answered `ENOENT` for a directory
/// `lookup` finds (fixed in `Fs::writer_for`: `EROFS`, like its setattr).
#[test]
fn changes_in_the_control_directory_are_refused_as_read_only() {
    run(&[
        Op::Create {
            path: p(".packfs/m"),
            data: data(0, 0),
            perm: 0o644,
            keep_open: false,
        },
        Op::Mkdir {
            path: p(".packfs/m"),
            perm: 0o755,
        },
        Op::Unlink {
            path: p(".packfs/stats"),
        },
        Op::Rmdir { path: p(".packfs") },
        Op::Rename {
            from: p(".packfs"),
            to: p("t/x"),
        },
        Op::Rename {
            from: p(".packfs/stats"),
            to: p("t/m/x"),
        },
        Op::Mkdir {
            path: p("t/x"),
            perm: 0o755,
        },
        Op::Rename {
            from: p("t/x"),
            to: p(".packfs"),
        },
        Op::Truncate {
            path: p(".packfs/stats"),
            size: 0,
        },
        Op::Chmod {
            path: p(".packfs"),
            perm: 0o777,
        },
    ])
    .unwrap();
}

#[test]
fn a_file_closed_in_a_directory_empty_at_the_last_commit_survives_a_crash() {
    run(&[
        Op::Unlink { path: p("t/m/c/a") },
        Op::Commit,
        Op::Create {
            path: p("t/m/c/a"),
            data: data(5, 3),
            perm: 0o644,
            keep_open: false,
        },
        Op::Crash,
    ])
    .unwrap();
}

#[test]
fn a_rename_into_a_directory_empty_at_the_last_commit_survives_a_crash() {
    run(&[
        Op::Mkdir {
            path: p("t/m/e"),
            perm: 0o755,
        },
        Op::Commit,
        Op::Rename {
            from: p("t/m/a"),
            to: p("t/m/e/a"),
        },
        Op::Crash,
    ])
    .unwrap();
}

#[test]
fn a_file_replaced_by_one_never_closed_stays_gone_after_a_crash() {
    run(&[
        Op::Create {
            path: p("t/m/x"),
            data: data(1, 3),
            perm: 0o644,
            keep_open: true,
        },
        Op::Rename {
            from: p("t/m/x"),
            to: p("t/m/a"),
        },
        Op::Crash,
    ])
    .unwrap();
}

/// A file left open at `t/m/x`, `between`, a directory of that name with
/// a file left open in it, and a crash: `lost+found` needs `t/m/x` both as
/// a file and as a directory.
fn lost_found_paths_that_would_collide(between: Op) -> Vec<Op> {
    let open_file = |path: &str, fill| Op::Create {
        path: p(path),
        data: data(fill, 5),
        perm: 0o644,
        keep_open: true,
    };
    let mkdir = Op::Mkdir {
        path: p("t/m/x"),
        perm: 0o755,
    };
    vec![
        open_file("t/m/x", 1),
        between,
        mkdir,
        open_file("t/m/x/a", 2),
        Op::Crash,
    ]
}

/// Found by proptest: a crash left `lost+found/<time>/t/m/x` a file; a
/// second one in the same second needed `lost+found/<time>/t/m/x/a`, so
/// recovery failed and no mount of the spool could start (fixed in
/// `Spool::quarantine_leftovers`: a directory per recovery).
#[test]
fn two_crashes_in_one_second_leave_lost_found_paths_that_would_collide() {
    run(&lost_found_paths_that_would_collide(Op::Crash)).unwrap();
}

/// The same within one crash: a file unlinked while open keeps its path
/// for `lost+found`, and a directory took that name (fixed by placing
/// deeper paths first; it failed only in some listing orders).
#[test]
fn a_crash_leaves_lost_found_paths_that_would_collide() {
    let unlink = Op::Unlink { path: p("t/m/x") };
    run(&lost_found_paths_that_would_collide(unlink)).unwrap();
}
