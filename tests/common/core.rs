//! The filesystem core driven directly, without the kernel: a dataset in
//! an in-memory object store, mounts of it as [`Fs`] cores on their own
//! runtimes, and crashes simulated by dropping a mount's state and
//! remounting its spool.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;

use object_store::ObjectStore;
use packfs_core::dataset::Dataset;
use packfs_core::import::ImportOptions;
use packfs_core::kind::Kind;
use packfs_core::store::Store;
use packfs_format::PageShape;
use packfs_fs::fs::{Fs, Stat};
use packfs_fs::mount::{open_fs, MountOptions};
use packfs_fs::namespace::{Ino, ROOT_INO};
use packfs_fs::write::WriteOptions;

use super::files::write_file;

/// The index bound of the mounts of every core test: a few pages of a few
/// rows, so pages are dropped and read again all the time.
const INDEX_BYTES: u64 = 16 << 10;

/// A dataset in an in-memory store and the spool its mounts use.
pub struct Fixture {
    pub dataset: Dataset,
    pub spool: PathBuf,
    _tmp: tempfile::TempDir,
}

impl Fixture {
    /// A dataset holding `files` (`t/<modality>/<name>` → bytes) in
    /// `store`.
    pub fn new(store: Arc<dyn ObjectStore>, files: &[(&str, Vec<u8>)]) -> Fixture {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("src");
        for (path, bytes) in files {
            write_file(&src.join(path), bytes);
        }
        // Pages of a few rows under index pages of a few pages: every test
        // of the core crosses page boundaries in what it commits and reads
        // back.
        let dataset = Dataset::from_store(Store::from_object_store(
            store,
            Default::default(),
            "memory://core-test",
        ))
        .with_page_shape(PageShape::with_rows(4).with_index_pages(4));
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime
            .block_on(packfs_core::import::import(
                &dataset,
                &src,
                &ImportOptions::default()
                    .pack(packfs_core::packer::PackOptions::default().pack_items(4)),
            ))
            .unwrap();
        Fixture {
            dataset,
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
        let options = MountOptions::default()
            .write(write)
            .index_cache_bytes(INDEX_BYTES);
        let fs = open_fs(&self.dataset, &self.spool, &options, runtime.handle()).unwrap();
        Core {
            fs: Some(fs),
            runtime: Some(runtime),
        }
    }

    pub fn mount_read_only(&self) -> Core {
        let options = MountOptions::default()
            .read_only(true)
            .index_cache_bytes(INDEX_BYTES);
        self.mount_options(&options)
    }

    /// A mount of it with `options`, on a runtime of its own.
    pub fn mount_options(&self, options: &MountOptions) -> Core {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let fs = open_fs(&self.dataset, &self.spool, options, runtime.handle()).unwrap();
        Core {
            fs: Some(fs),
            runtime: Some(runtime),
        }
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
        self.runtime().block_on(f)
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
