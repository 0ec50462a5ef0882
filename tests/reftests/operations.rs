//! The operations a case is made of, and what they name.

use std::fmt;

/// What an operation names: a path, or (so that most operations meet
/// something) a node of the mount as it is when the operation runs, which
/// the runner turns into its path first.
#[derive(Clone, PartialEq, Eq)]
pub enum S {
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

pub fn p(path: &str) -> S {
    S::P(path.to_string())
}

impl S {
    /// The path, once the runner made it one.
    pub fn path(&self) -> &str {
        match self {
            S::P(path) => path,
            other => unreachable!("{other:?} is resolved before it is used"),
        }
    }
}

/// `len` bytes counting up from `fill`: distinct, and short to print.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Data {
    pub fill: u8,
    pub len: u8,
}

impl fmt::Debug for Data {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "data({}, {})", self.fill, self.len)
    }
}

pub fn data(fill: u8, len: u8) -> Data {
    Data { fill, len }
}

impl Data {
    pub fn bytes(self) -> Vec<u8> {
        (0..self.len).map(|i| self.fill.wrapping_add(i)).collect()
    }
}

/// Which of the open handles an operation picks (modulo their number).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct H(pub u8);

/// One step. Handle operations pick among the handles open at that moment
/// (write handles only where writing needs one) and do nothing if there
/// is none.
#[derive(Clone, Debug)]
pub enum Op {
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
