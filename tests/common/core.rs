//! The filesystem core driven directly, without the kernel: a dataset in
//! an in-memory [`TestStore`], mounts of it as [`Fs`] cores on their own
//! runtimes, and crashes simulated by dropping a mount's state and
//! remounting its spool.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;

use packfs_core::dataset::Dataset;
use packfs_core::import::ImportOptions;
use packfs_core::kind::Kind;
use packfs_core::store::Store;
use packfs_fs::fs::{Fs, FsError, Opened, Stat};
use packfs_fs::mount::{open_fs, MountOptions};
use packfs_fs::namespace::{Ino, ROOT_INO};
use packfs_fs::write::WriteOptions;

use super::store::{TestStore, TestStoreControl};
use super::write_file;

/// A dataset in a [`TestStore`] and the spool its mounts use.
pub struct Bench {
    pub dataset: Dataset,
    pub control: Arc<TestStoreControl>,
    pub spool: PathBuf,
    _tmp: tempfile::TempDir,
}

impl Bench {
    /// A dataset holding `files` (`t/<modality>/<name>` → bytes).
    pub fn new(files: &[(&str, Vec<u8>)]) -> Bench {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("src");
        for (path, bytes) in files {
            write_file(&src.join(path), bytes);
        }
        let (store, control) = TestStore::in_memory();
        let dataset = Dataset::from_store(Store::from_object_store(
            Arc::new(store),
            Default::default(),
            "memory://core-test",
        ));
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime
            .block_on(packfs_core::import::import(
                &dataset,
                &src,
                &ImportOptions {
                    pack: packfs_core::packer::PackOptions {
                        pack_items: 4,
                        ..Default::default()
                    },
                    ..ImportOptions::default()
                },
            ))
            .unwrap();
        Bench {
            dataset,
            control,
            spool: tmp.path().join("spool"),
            _tmp: tmp,
        }
    }

    /// A read-write mount of it on a runtime of `workers` threads.
    pub fn mount_with(&self, workers: usize, write: WriteOptions) -> Core {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .enable_all()
            .build()
            .unwrap();
        let options = MountOptions {
            write,
            ..MountOptions::default()
        };
        let fs = open_fs(&self.dataset, &self.spool, &options, runtime.handle()).unwrap();
        Core {
            fs: Some(fs),
            runtime: Some(runtime),
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

    pub fn mount_read_only(&self) -> Core {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let options = MountOptions {
            read_only: true,
            ..MountOptions::default()
        };
        let fs = open_fs(&self.dataset, &self.spool, &options, runtime.handle()).unwrap();
        Core {
            fs: Some(fs),
            runtime: Some(runtime),
        }
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
            let (_, files) = super::walk(&stamp);
            for f in files {
                let bytes = std::fs::read(stamp.join(&f)).unwrap();
                found.push((f.to_string_lossy().into_owned(), bytes));
            }
        }
        found
    }
}

/// One mount of the core.
pub struct Core {
    fs: Option<Arc<Fs>>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Core {
    pub fn fs(&self) -> &Arc<Fs> {
        self.fs.as_ref().unwrap()
    }

    /// The runtime the mount's tasks run on.
    pub fn runtime(&self) -> &tokio::runtime::Runtime {
        self.runtime.as_ref().unwrap()
    }

    pub fn block_on<T>(&self, f: impl std::future::Future<Output = T>) -> T {
        self.runtime.as_ref().unwrap().block_on(f)
    }

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
        self.block_on(self.fs().read(ino, 0, size as u32 + 1, &mut buf))
            .unwrap()
            .to_vec()
    }

    /// The entries of directory `dir` but `.` and `..`, in listing order;
    /// an error if a name is listed twice.
    pub fn list(&self, dir: Ino) -> Result<Vec<(String, Stat)>, String> {
        let mut entries = Vec::new();
        self.fs()
            .readdir(dir, 0, |name, stat, _| {
                entries.push((name.to_string(), *stat));
                false
            })
            .map_err(|e| format!("readdir of inode {dir}: {e}"))?;
        entries.retain(|(name, _)| name != "." && name != "..");
        let mut seen = BTreeSet::new();
        match entries.iter().find(|(name, _)| !seen.insert(name)) {
            Some((name, _)) => Err(format!("inode {dir} lists {name:?} twice")),
            None => Ok(entries),
        }
    }

    /// Every node below the root, by path, as listings show them.
    pub fn listing(&self) -> Result<BTreeMap<String, Stat>, String> {
        let mut out = BTreeMap::new();
        let mut pending = vec![(ROOT_INO, String::new())];
        while let Some((dir, prefix)) = pending.pop() {
            for (name, stat) in self.list(dir).map_err(|e| format!("/{prefix}: {e}"))? {
                let path = match prefix.is_empty() {
                    true => name,
                    false => format!("{prefix}/{name}"),
                };
                if stat.attr.kind == Kind::Dir {
                    pending.push((stat.attr.ino, path.clone()));
                }
                out.insert(path, stat);
            }
        }
        Ok(out)
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

    /// A clean unmount: the last commit, then everything goes.
    pub fn unmount(mut self) {
        let fs = self.fs.take().unwrap();
        self.block_on(fs.shutdown());
    }

    /// The process dies: nothing more runs, nothing is committed.
    pub fn crash(mut self) {
        drop(self.fs.take());
        self.runtime.take().unwrap().shutdown_background();
    }
}

impl Drop for Core {
    fn drop(&mut self) {
        drop(self.fs.take());
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}
