//! The bench of the core tests: a [`Fixture`] on an in-memory store with
//! [`Faults`] a test switches on, and conveniences over a [`Core`]: paths,
//! whole reads, handles, what a commit or a crash kept.

use std::collections::BTreeMap;
use std::ops::Deref;
use std::sync::Arc;

use object_store::memory::InMemory;
use packfs_core::kind::Kind;
use packfs_core::store::faults::{Faults, FaultyStore};
use packfs_fs::fs::{FsError, Opened};
use packfs_fs::namespace::{Ino, ROOT_INO};
use packfs_fs::write::WriteOptions;

use super::core::{Core, Fixture};
use super::files::walk;

/// A [`Fixture`] on a store with faults, and the switches of its faults.
pub struct Bench {
    fixture: Fixture,
    pub faults: Arc<Faults>,
    /// The store under the faults, to list what is stored.
    pub memory: Arc<InMemory>,
}

impl Deref for Bench {
    type Target = Fixture;

    fn deref(&self) -> &Fixture {
        &self.fixture
    }
}

impl Bench {
    /// A dataset holding `files` (`t/<modality>/<name>` → bytes).
    pub fn new(files: &[(&str, Vec<u8>)]) -> Bench {
        let faults = Arc::new(Faults::default());
        let memory = Arc::new(InMemory::new());
        let store = FaultyStore::new(memory.clone(), faults.clone());
        Bench {
            fixture: Fixture::new(Arc::new(store), files),
            faults,
            memory,
        }
    }

    pub fn mount(&self) -> Core {
        self.mount_with(2, WriteOptions::default())
    }

    /// The bytes of `path` in the committed dataset (`None`: absent).
    pub fn committed(&self, path: &str) -> Option<Vec<u8>> {
        let core = self.mount_read_only();
        let ino = core.path(path).ok()?;
        Some(core.read_all(ino))
    }

    /// Files the spool's `lost+found` holds, by path below the
    /// `lost+found/<time>/` directory.
    pub fn lost_and_found(&self) -> Vec<(String, Vec<u8>)> {
        let mut found = Vec::new();
        let Ok(stamps) = std::fs::read_dir(self.spool.join("lost+found")) else {
            return found;
        };
        for stamp in stamps {
            let stamp = stamp.unwrap().path();
            let (_, files) = walk(&stamp);
            for f in files {
                let bytes = std::fs::read(stamp.join(&f)).unwrap();
                found.push((f.to_string_lossy().into_owned(), bytes));
            }
        }
        found
    }
}

impl Core {
    pub fn path(&self, path: &str) -> Result<Ino, FsError> {
        path.split('/')
            .filter(|c| !c.is_empty())
            .try_fold(ROOT_INO, |dir, name| {
                Ok(self.fs().lookup(dir, name.as_bytes())?.attr.ino)
            })
    }

    pub fn read_all(&self, ino: Ino) -> Vec<u8> {
        let size = self.fs().getattr(ino).unwrap().attr.size;
        let mut buf = Vec::new();
        self.block_on(self.fs().read(ino, 0, 0, size as u32 + 1, &mut buf))
            .unwrap()
            .to_vec()
    }

    /// Every file the listings show, with its bytes.
    pub fn files(&self) -> Result<BTreeMap<String, Vec<u8>>, String> {
        let mut out = BTreeMap::new();
        for (path, stat) in self.listing()? {
            if stat.attr.kind == Kind::File {
                out.insert(path, self.read_all(stat.attr.ino));
            }
        }
        Ok(out)
    }

    /// Opens `ino` and returns its handle.
    pub fn open(&self, ino: Ino, write: bool) -> u64 {
        match self.block_on(self.fs().open(ino, write, false)).unwrap() {
            Opened::Handle { fh, .. } => fh,
            Opened::Stateless | Opened::Backing { .. } => {
                panic!("a read-write mount opens handles served by the daemon")
            }
        }
    }

    /// Creates `dir/name` holding `bytes`, left open; returns the handle.
    pub fn create_open(&self, dir: &str, name: &str, bytes: &[u8]) -> u64 {
        let parent = self.path(dir).unwrap();
        let (_, fh) = self.fs().create(parent, name.as_bytes(), 0o644).unwrap();
        self.block_on(self.fs().write(fh, 0, bytes)).unwrap();
        fh
    }

    /// `close(2)` of the only descriptor of `fh`: FLUSH, then RELEASE.
    pub fn close(&self, fh: u64) {
        self.fs().flush(fh).unwrap();
        self.fs().release(fh);
    }
}
