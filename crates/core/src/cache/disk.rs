//! The optional persistent tier under the memory cache (a cache directory):
//! blocks survive remounts, bounded in bytes.
//!
//! One file per block, named by the BLAKE3 hash of (object path, block
//! size, block index) and holding the BLAKE3 hash of its content followed
//! by the content. Every read checks that hash, so a torn or damaged file
//! is a miss (and is deleted), never wrong bytes. The directory belongs to
//! one mount at a time: an exclusive `flock` on `lock` guards it.

use std::fs::{self, File};
use std::io::Write;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path as FsPath, PathBuf};

use bytes::Bytes;
use object_store::path::Path;
use parking_lot::Mutex;
use thiserror::Error;

/// How long opening waits for another mount to release the directory.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Why a cache directory could not be used.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum DiskCacheError {
    #[error("cache directory {dir}: {source}")]
    Io {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cache directory {dir} is in use by another packfs mount")]
    InUse { dir: PathBuf },
}

/// A bounded directory of verified blocks. All methods do blocking I/O.
pub struct DiskCache {
    dir: PathBuf,
    max_bytes: u64,
    state: Mutex<State>,
    /// Held for the cache's lifetime: the flock is released on close.
    _lock: File,
    #[cfg(test)]
    pub(super) probe: probe::PutProbe,
}

struct State {
    /// File name → size on disk, least recently used first.
    files: lru::LruCache<String, u64>,
    bytes: u64,
}

impl DiskCache {
    /// Opens (creating it private, 0700) `dir`, bounded to `max_bytes`,
    /// and indexes the blocks a previous mount left, oldest first.
    pub fn open(dir: &FsPath, max_bytes: u64) -> Result<Self, DiskCacheError> {
        let io = |source| DiskCacheError::Io {
            dir: dir.to_path_buf(),
            source,
        };
        let lock = crate::private_dir::lock(dir, LOCK_WAIT)
            .map_err(io)?
            .ok_or_else(|| DiskCacheError::InUse {
                dir: dir.to_path_buf(),
            })?;
        let mut found = Vec::new();
        for shard in fs::read_dir(dir).map_err(io)? {
            let shard = shard.map_err(io)?;
            // The whole-file copies' directory has its own index and bound.
            if !shard.file_type().map_err(io)?.is_dir()
                || shard.file_name() == super::whole::WHOLE_DIR
            {
                continue;
            }
            for file in fs::read_dir(shard.path()).map_err(io)? {
                let file = file.map_err(io)?;
                if file.file_name().to_string_lossy().ends_with(".tmp") {
                    let _ = fs::remove_file(file.path()); // left by a crash mid-write
                    continue;
                }
                let meta = file.metadata().map_err(io)?;
                let name = format!(
                    "{}/{}",
                    shard.file_name().to_string_lossy(),
                    file.file_name().to_string_lossy()
                );
                found.push((meta.modified().ok(), name, meta.len()));
            }
        }
        found.sort();
        let mut state = State {
            files: lru::LruCache::unbounded(),
            bytes: 0,
        };
        for (_, name, size) in found {
            state.bytes += size;
            state.files.put(name, size);
        }
        let cache = DiskCache {
            dir: dir.to_path_buf(),
            max_bytes,
            state: Mutex::new(state),
            _lock: lock,
            #[cfg(test)]
            probe: Default::default(),
        };
        cache.evict(&mut cache.state.lock());
        Ok(cache)
    }

    fn name(object: &Path, block_size: u64, block: u64) -> String {
        let mut h = blake3::Hasher::new();
        h.update(object.as_ref().as_bytes());
        h.update(&block_size.to_le_bytes());
        h.update(&block.to_le_bytes());
        let hex = h.finalize().to_hex();
        format!("{}/{}", &hex[..2], &hex[2..])
    }

    /// The block, if it is on disk and intact.
    pub fn get(&self, object: &Path, block_size: u64, block: u64) -> Option<Bytes> {
        let name = Self::name(object, block_size, block);
        self.state.lock().files.get(&name)?;
        let data = fs::read(self.dir.join(&name)).ok();
        let content = data.as_deref().and_then(|d| {
            let (hash, content) = d.split_at_checked(32)?;
            (blake3::hash(content).as_bytes() == hash).then_some(content)
        });
        match content {
            Some(content) => Some(Bytes::copy_from_slice(content)),
            None => {
                // Damaged or vanished: forget it; the caller fetches again.
                let _ = fs::remove_file(self.dir.join(&name));
                let mut state = self.state.lock();
                if let Some(size) = state.files.pop(&name) {
                    state.bytes -= size;
                }
                None
            }
        }
    }

    /// Stores a block (best effort: a full or failing disk only costs hits).
    pub fn put(&self, object: &Path, block_size: u64, block: u64, content: &[u8]) {
        #[cfg(test)]
        let _probe = self.probe.enter();
        let name = Self::name(object, block_size, block);
        let path = self.dir.join(&name);
        let tmp = self.dir.join(format!("{name}.tmp"));
        let written = fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(path.parent().expect("shard directory"))
            .and_then(|()| {
                let mut f = File::create(&tmp)?;
                f.write_all(blake3::hash(content).as_bytes())?;
                f.write_all(content)
            })
            .and_then(|()| fs::rename(&tmp, &path));
        if written.is_err() {
            let _ = fs::remove_file(&tmp);
            return;
        }
        let size = 32 + content.len() as u64;
        let mut state = self.state.lock();
        state.bytes += size;
        if let Some(old) = state.files.put(name, size) {
            state.bytes -= old;
        }
        self.evict(&mut state);
    }

    fn evict(&self, state: &mut State) {
        while state.bytes > self.max_bytes {
            let Some((name, size)) = state.files.pop_lru() else {
                break;
            };
            let _ = fs::remove_file(self.dir.join(name));
            state.bytes -= size;
        }
    }
}

/// A test instrument: slows every `put` and records how many ran at once.
#[cfg(test)]
pub(super) mod probe {
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    use std::time::Duration;

    #[derive(Default)]
    pub(in crate::cache) struct PutProbe {
        pub delay: parking_lot::Mutex<Duration>,
        running: AtomicUsize,
        pub most: AtomicUsize,
    }

    pub(in crate::cache) struct Running<'a>(&'a PutProbe);

    impl PutProbe {
        pub(super) fn enter(&self) -> Running<'_> {
            let now = self.running.fetch_add(1, SeqCst) + 1;
            self.most.fetch_max(now, SeqCst);
            std::thread::sleep(*self.delay.lock());
            Running(self)
        }

        pub(crate) fn running(&self) -> usize {
            self.running.load(SeqCst)
        }
    }

    impl Drop for Running<'_> {
        fn drop(&mut self) {
            self.0.running.fetch_sub(1, SeqCst);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes of block files under `dir` (the `lock` file excluded).
    fn bytes_on_disk(dir: &FsPath) -> u64 {
        fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap())
            .filter(|e| e.file_type().unwrap().is_dir())
            .flat_map(|shard| fs::read_dir(shard.path()).unwrap())
            .map(|f| f.unwrap().metadata().unwrap().len())
            .sum()
    }

    fn block(i: u64) -> Vec<u8> {
        (0..1000u64).map(|j| (i * 31 + j) as u8).collect()
    }

    #[test]
    fn stays_within_its_byte_bound_dropping_least_recent_first() {
        let tmp = tempfile::tempdir().unwrap();
        let object = Path::from("t/m/0/pack");
        let per_block = 32 + 1000;
        let cache = DiskCache::open(tmp.path(), 3 * per_block).unwrap();
        for i in 0..10 {
            cache.put(&object, 1000, i, &block(i));
            // Using block 0 keeps it the most recent of the old ones.
            assert!(cache.get(&object, 1000, 0).is_some(), "after put {i}");
            assert!(bytes_on_disk(tmp.path()) <= 3 * per_block);
        }
        assert_eq!(bytes_on_disk(tmp.path()), 3 * per_block);
        for i in [0, 8, 9] {
            assert_eq!(cache.get(&object, 1000, i).as_deref(), Some(&block(i)[..]));
        }
        for i in 1..8 {
            assert!(cache.get(&object, 1000, i).is_none(), "block {i} kept");
        }
        // A smaller bound on the next open evicts down to it at once.
        drop(cache);
        let cache = DiskCache::open(tmp.path(), per_block).unwrap();
        assert_eq!(bytes_on_disk(tmp.path()), per_block);
        let kept = [0, 8, 9]
            .into_iter()
            .filter(|&i| cache.get(&object, 1000, i).is_some())
            .count();
        assert_eq!(kept, 1);
    }

    #[test]
    fn a_damaged_block_is_a_miss_and_is_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let object = Path::from("t/m/0/pack");
        let cache = DiskCache::open(tmp.path(), 1 << 20).unwrap();
        cache.put(&object, 1000, 7, &block(7));
        let file = tmp.path().join(DiskCache::name(&object, 1000, 7));
        let mut data = fs::read(&file).unwrap();
        data[100] ^= 1;
        fs::write(&file, data).unwrap();
        assert!(cache.get(&object, 1000, 7).is_none());
        assert!(!file.exists());
        assert_eq!(bytes_on_disk(tmp.path()), 0);
    }

    #[test]
    fn a_second_open_of_a_directory_in_use_fails() {
        let tmp = tempfile::tempdir().unwrap();
        let _first = DiskCache::open(tmp.path(), 1 << 20).unwrap();
        let err = DiskCache::open(tmp.path(), 1 << 20).err().unwrap();
        assert!(matches!(err, DiskCacheError::InUse { .. }), "{err}");
    }
}
