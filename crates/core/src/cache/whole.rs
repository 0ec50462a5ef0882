//! Whole-file copies of items, for kernel passthrough (in a cache directory): an
//! item read whole once through the mount is assembled, from the bytes as
//! they are served, into one plain file under `<cache dir>/whole`, so that
//! a later open can hand the kernel that file and its reads skip the
//! daemon.
//!
//! One writer thread assembles copies in temporary files: reads queue
//! their bytes, and wait a little for room when the writer is behind (the
//! local disk's writeback throttles it below a fast store's pace); past
//! that wait a piece is dropped, leaving a hole that a later read of the
//! item through the daemon fills. A copy
//! whose every byte is in is hashed with BLAKE3, renamed into place, and
//! sealed (`<key>.b3`: the hash, and the copy's inode and change time).
//! Only a sealed copy is ever offered. A copy a previous mount left is
//! hashed again before its first use unless it is untouched since it was
//! sealed (same inode and change time: any write, truncation or `chmod`
//! moves the change time, and no one can set it back); a torn, truncated
//! or damaged copy is deleted, never served. Copies are
//! bounded in bytes, least recently used dropped first; the directory is
//! guarded by the block tier's lock on the cache directory.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::Read;
use std::ops::Range;
use std::os::unix::fs::{DirBuilderExt, FileExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use parking_lot::Mutex;
use thiserror::Error;
use tokio::sync::mpsc;
use tracing::{debug, warn};

use super::Stats;

/// The subdirectory of the cache directory that holds the copies.
pub(crate) const WHOLE_DIR: &str = "whole";
/// Pieces of read bytes waiting for the writer thread (each at most one
/// kernel read, 1 MiB): bounds the memory they hold.
const QUEUE: usize = 64;
/// How long a read waits for room in the queue before it drops its piece.
const QUEUE_WAIT: Duration = Duration::from_millis(200);
/// Copies assembled at once; a new one displaces the least recently fed.
const BUILDS: usize = 8;
/// Suffix of a copy's seal: its BLAKE3 hash, then the inode number and
/// change time (seconds, nanoseconds; little-endian) the copy had when it
/// was hashed.
const SUM: &str = ".b3";
/// Length of a seal.
const SUM_LEN: usize = 32 + 3 * 8;
/// Suffix of a copy being assembled.
const TMP: &str = ".tmp";

crate::options! {
/// Settings of the whole-file copies.
#[derive(Clone, Debug)]
pub struct WholeOptions {
    /// Most bytes of finished copies kept (besides the block tier's bound).
    pub max_bytes: u64,
    /// Items smaller than this get no copy: the daemon serves them faster
    /// (see docs/PERFORMANCE.md).
    pub min_size: u64,
}
}

impl Default for WholeOptions {
    fn default() -> Self {
        WholeOptions {
            max_bytes: 10 << 30,
            min_size: 1 << 20,
        }
    }
}

/// Why the copies' directory could not be used.
#[derive(Debug, Error)]
#[error("whole-file copies in {dir}: {source}")]
#[non_exhaustive]
pub struct WholeError {
    dir: PathBuf,
    #[source]
    source: std::io::Error,
}

/// The identity of an item's bytes (a hash of where they are stored).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WholeKey(pub [u8; 32]);

impl WholeKey {
    fn hex(&self) -> String {
        blake3::Hash::from(self.0).to_hex().to_string()
    }

    fn from_hex(name: &str) -> Option<Self> {
        blake3::Hash::from_hex(name)
            .ok()
            .map(|h| WholeKey(*h.as_bytes()))
    }
}

/// The directory of whole-file copies and the thread that assembles them.
pub struct WholeCache {
    shared: Arc<Shared>,
    /// `None` once [`WholeCache::finish`] has closed it.
    queue: parking_lot::RwLock<Option<mpsc::Sender<Piece>>>,
    /// The writer thread, joined by [`WholeCache::finish`].
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
}

struct Shared {
    dir: PathBuf,
    options: WholeOptions,
    index: Mutex<Index>,
    stats: Arc<Stats>,
}

/// Finished copies, least recently used first.
struct Index {
    copies: lru::LruCache<WholeKey, Finished>,
    bytes: u64,
}

struct Finished {
    size: u64,
    /// Hashed by this mount (made by it, or checked at its first use).
    verified: bool,
}

/// Bytes `offset..` of the item `key` of `size` bytes, as a read served them.
struct Piece {
    key: WholeKey,
    size: u64,
    offset: u64,
    bytes: Bytes,
}

impl WholeCache {
    /// Opens (creating it) `<cache_dir>/whole`, which must be under the
    /// lock the block tier holds, and indexes the copies a previous mount
    /// left, oldest first; what a crash left half-written is deleted.
    pub fn open(
        cache_dir: &Path,
        options: WholeOptions,
        stats: Arc<Stats>,
    ) -> Result<Self, WholeError> {
        let dir = cache_dir.join(WHOLE_DIR);
        let io = |source| WholeError {
            dir: dir.clone(),
            source,
        };
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(io)?;
        let mut found = Vec::new();
        // Seals by copy, with their mtime: when the copy was last used.
        let mut sums = HashMap::new();
        for entry in fs::read_dir(&dir).map_err(io)? {
            let entry = entry.map_err(io)?;
            let name = entry.file_name().to_string_lossy().into_owned();
            match name.strip_suffix(SUM).and_then(WholeKey::from_hex) {
                Some(key) if entry.metadata().map_err(io)?.len() == SUM_LEN as u64 => {
                    sums.insert(key, entry.metadata().map_err(io)?.modified().ok());
                }
                _ => match WholeKey::from_hex(&name) {
                    Some(key) => {
                        let meta = entry.metadata().map_err(io)?;
                        found.push((key, meta.len()));
                    }
                    None => {
                        let _ = fs::remove_file(entry.path()); // a crash's leftover
                    }
                },
            }
        }
        found.sort_by_key(|(key, _)| sums.get(key).copied().flatten());
        let mut index = Index {
            copies: lru::LruCache::unbounded(),
            bytes: 0,
        };
        for (key, size) in found {
            if sums.remove(&key).is_some() {
                index.bytes += size;
                index.copies.put(
                    key,
                    Finished {
                        size,
                        verified: false,
                    },
                );
            } else {
                let _ = fs::remove_file(dir.join(key.hex()));
            }
        }
        for key in sums.into_keys() {
            let _ = fs::remove_file(dir.join(format!("{}{SUM}", key.hex())));
        }
        let shared = Arc::new(Shared {
            dir: dir.clone(),
            options,
            index: Mutex::new(index),
            stats,
        });
        shared.evict(&mut shared.index.lock());
        let (queue, pieces) = mpsc::channel(QUEUE);
        let builder = shared.clone();
        let writer = std::thread::Builder::new()
            .name("packfs-whole".into())
            .spawn(move || Builder::new(builder).run(pieces))
            .map_err(io)?;
        Ok(WholeCache {
            shared,
            queue: parking_lot::RwLock::new(Some(queue)),
            writer: Mutex::new(Some(writer)),
        })
    }

    /// At unmount: takes no more pieces and waits for the writer to finish
    /// the copies whose every byte it has (the daemon exits right after,
    /// and a copy half-renamed would be lost).
    pub async fn finish(&self) {
        drop(self.queue.write().take());
        let writer = self.writer.lock().take();
        if let Some(writer) = writer {
            let _ = tokio::task::spawn_blocking(move || writer.join()).await;
        }
    }

    /// The smallest item that gets a copy.
    pub fn min_size(&self) -> u64 {
        self.shared.options.min_size
    }

    /// Bytes `offset..` of the item `key` (`size` bytes long), as a read
    /// served them: fed to its copy. Waits at most `QUEUE_WAIT`.
    pub async fn served(&self, key: WholeKey, size: u64, offset: u64, bytes: &Bytes) {
        if size < self.shared.options.min_size
            || size > self.shared.options.max_bytes
            || bytes.is_empty()
        {
            return;
        }
        let piece = Piece {
            key,
            size,
            offset,
            bytes: bytes.clone(),
        };
        let Some(queue) = self.queue.read().clone() else {
            return; // unmounting
        };
        if let Err(mpsc::error::TrySendError::Full(piece)) = queue.try_send(piece) {
            let sent = tokio::time::timeout(QUEUE_WAIT, queue.send(piece)).await;
            if !matches!(sent, Ok(Ok(()))) {
                Stats::add(&self.shared.stats.whole_dropped, 1);
            }
        }
    }

    /// The finished copy of item `key` (`size` bytes long), open for
    /// reading, if there is one and its bytes are intact. The first use of
    /// a copy a previous mount made hashes it (blocking, on a worker).
    pub async fn open_copy(&self, key: WholeKey, size: u64) -> Option<File> {
        let verified = {
            let mut index = self.shared.index.lock();
            let copy = index.copies.get(&key)?;
            if copy.size != size {
                return None;
            }
            copy.verified
        };
        let shared = self.shared.clone();
        if verified {
            return shared.open(key, size, false);
        }
        tokio::task::spawn_blocking(move || shared.open(key, size, true))
            .await
            .ok()
            .flatten()
    }
}

impl Shared {
    fn path(&self, key: &WholeKey, suffix: &str) -> PathBuf {
        self.dir.join(format!("{}{suffix}", key.hex()))
    }

    /// Opens the copy of `key`, hashing it first when `check`; a copy that
    /// cannot be opened or fails the check is deleted.
    fn open(&self, key: WholeKey, size: u64, check: bool) -> Option<File> {
        let opened = File::open(self.path(&key, "")).and_then(|file| {
            if check {
                let mut sum = [0u8; SUM_LEN];
                File::open(self.path(&key, SUM))?.read_exact(&mut sum)?;
                let meta = file.metadata()?;
                // Untouched since it was hashed (any change of a file moves
                // its change time, which no one can set back): no need to
                // read 512 MiB again before the first open.
                let untouched = sum[32..] == seal(&meta);
                if meta.len() != size || !(untouched || hash(&file)? == sum[..32]) {
                    return Err(std::io::Error::other("its bytes do not match its hash"));
                }
            }
            Ok(file)
        });
        match opened {
            Ok(file) => {
                // The seal's mtime orders the next mount's index by last
                // use (touching the copy would move its change time).
                if let Ok(sum) = File::options().write(true).open(self.path(&key, SUM)) {
                    let _ = sum.set_modified(SystemTime::now());
                }
                if let Some(copy) = self.index.lock().copies.get_mut(&key) {
                    copy.verified = true;
                }
                Some(file)
            }
            Err(e) => {
                warn!("whole-file copy {} dropped: {e}", key.hex());
                self.forget(&key);
                None
            }
        }
    }

    fn forget(&self, key: &WholeKey) {
        let mut index = self.index.lock();
        if let Some(copy) = index.copies.pop(key) {
            index.bytes -= copy.size;
        }
        drop(index);
        self.remove(key);
    }

    /// Deletes the files of `key`. A copy the kernel has open for
    /// passthrough keeps its bytes until that file is closed.
    fn remove(&self, key: &WholeKey) {
        let _ = fs::remove_file(self.path(key, ""));
        let _ = fs::remove_file(self.path(key, SUM));
    }

    fn evict(&self, index: &mut Index) {
        while index.bytes > self.options.max_bytes {
            let Some((key, copy)) = index.copies.pop_lru() else {
                break;
            };
            index.bytes -= copy.size;
            self.remove(&key);
        }
    }
}

/// What identifies a file's state: its inode and change time.
fn seal(meta: &fs::Metadata) -> Vec<u8> {
    use std::os::unix::fs::MetadataExt;
    [meta.ino(), meta.ctime() as u64, meta.ctime_nsec() as u64]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect()
}

/// The BLAKE3 hash of everything in `file`.
fn hash(file: &File) -> std::io::Result<[u8; 32]> {
    let mut hasher = blake3::Hasher::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut offset = 0;
    loop {
        let n = file.read_at(&mut buf, offset)?;
        if n == 0 {
            return Ok(*hasher.finalize().as_bytes());
        }
        hasher.update(&buf[..n]);
        offset += n as u64;
    }
}

/// A copy being assembled.
struct Build {
    file: File,
    size: u64,
    /// Byte ranges written, sorted and disjoint (touching ranges merged).
    covered: Vec<Range<u64>>,
    /// When it was last fed (a counter).
    fed: u64,
}

impl Build {
    fn cover(&mut self, range: Range<u64>) {
        let mut merged = range;
        self.covered.retain(|r| {
            let apart = r.end < merged.start || merged.end < r.start;
            if !apart {
                merged = merged.start.min(r.start)..merged.end.max(r.end);
            }
            apart
        });
        let at = self.covered.partition_point(|r| r.start < merged.start);
        self.covered.insert(at, merged);
    }

    fn complete(&self) -> bool {
        matches!(self.covered.as_slice(), [r] if *r == (0..self.size))
    }
}

/// The writer thread's state.
struct Builder {
    shared: Arc<Shared>,
    builds: HashMap<WholeKey, Build>,
    clock: u64,
}

impl Builder {
    fn new(shared: Arc<Shared>) -> Self {
        Builder {
            shared,
            builds: HashMap::new(),
            clock: 0,
        }
    }

    /// Feeds pieces to their copies until the cache is dropped, then
    /// deletes the unfinished ones.
    fn run(mut self, mut pieces: mpsc::Receiver<Piece>) {
        while let Some(piece) = pieces.blocking_recv() {
            self.feed(piece);
        }
        for key in std::mem::take(&mut self.builds).into_keys() {
            let _ = fs::remove_file(self.shared.path(&key, TMP));
        }
    }

    fn feed(&mut self, piece: Piece) {
        let key = piece.key;
        if self.shared.index.lock().copies.contains(&key) {
            return;
        }
        self.clock += 1;
        if !self.builds.contains_key(&key) {
            if self.builds.len() >= BUILDS {
                let oldest = self
                    .builds
                    .iter()
                    .min_by_key(|(_, b)| b.fed)
                    .map(|(k, _)| *k);
                if let Some(oldest) = oldest {
                    self.abandon(&oldest);
                }
            }
            let created = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(self.shared.path(&key, TMP));
            match created {
                Ok(file) => {
                    let build = Build {
                        file,
                        size: piece.size,
                        covered: Vec::new(),
                        fed: 0,
                    };
                    self.builds.insert(key, build);
                }
                Err(e) => return debug!("cannot start a whole-file copy: {e}"),
            }
        }
        let build = self.builds.get_mut(&key).expect("just inserted");
        let end = piece.offset + piece.bytes.len() as u64;
        if build.size != piece.size || end > build.size {
            return self.abandon(&key); // cannot happen: one key, one item
        }
        if let Err(e) = build.file.write_all_at(&piece.bytes, piece.offset) {
            debug!("whole-file copy {}: {e}", key.hex());
            return self.abandon(&key);
        }
        build.cover(piece.offset..end);
        build.fed = self.clock;
        if build.complete() {
            let build = self.builds.remove(&key).expect("present");
            if let Err(e) = self.finish(&key, &build) {
                warn!("whole-file copy {} not kept: {e}", key.hex());
                let _ = fs::remove_file(self.shared.path(&key, TMP));
                self.shared.remove(&key);
            }
        }
    }

    fn abandon(&mut self, key: &WholeKey) {
        self.builds.remove(key);
        let _ = fs::remove_file(self.shared.path(key, TMP));
    }

    /// Hashes a complete copy, renames it into place and seals it: a copy
    /// found without its seal (a crash in between) is deleted.
    fn finish(&self, key: &WholeKey, build: &Build) -> std::io::Result<()> {
        let shared = &self.shared;
        let sum = hash(&build.file)?;
        fs::set_permissions(shared.path(key, TMP), fs::Permissions::from_mode(0o400))?;
        fs::rename(shared.path(key, TMP), shared.path(key, ""))?;
        // Sealed as renamed; a copy found without its seal is deleted.
        let mut sealed = sum.to_vec();
        sealed.extend_from_slice(&seal(&fs::metadata(shared.path(key, ""))?));
        fs::write(shared.path(key, SUM), sealed)?;
        let mut index = shared.index.lock();
        index.bytes += build.size;
        index.copies.put(
            *key,
            Finished {
                size: build.size,
                verified: true,
            },
        );
        shared.evict(&mut index);
        Stats::add(&shared.stats.whole_copies, 1);
        debug!("whole-file copy {} made ({} bytes)", key.hex(), build.size);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: u8) -> WholeKey {
        WholeKey([i; 32])
    }

    fn options(max_bytes: u64) -> WholeOptions {
        WholeOptions {
            max_bytes,
            min_size: 10,
        }
    }

    fn bytes(i: u8, len: usize) -> Bytes {
        (0..len).map(|j| (j as u8).wrapping_mul(i)).collect()
    }

    /// Waits for the writer thread to finish what was queued.
    async fn copy(cache: &WholeCache, key: WholeKey, size: u64) -> Option<File> {
        for _ in 0..200 {
            if let Some(file) = cache.open_copy(key, size).await {
                return Some(file);
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        None
    }

    fn contents(file: &File) -> Vec<u8> {
        let mut out = Vec::new();
        (&*file).read_to_end(&mut out).unwrap();
        out
    }

    #[tokio::test]
    async fn a_copy_is_offered_only_once_every_byte_is_in() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = WholeCache::open(tmp.path(), options(1 << 20), Default::default()).unwrap();
        let all = bytes(3, 1000);
        // Out of order, overlapping, with a hole until the last piece.
        cache.served(key(1), 1000, 600, &all.slice(600..1000)).await;
        cache.served(key(1), 1000, 0, &all.slice(0..300)).await;
        cache.served(key(1), 1000, 100, &all.slice(100..400)).await;
        assert!(copy(&cache, key(1), 1000).await.is_none());
        cache.served(key(1), 1000, 400, &all.slice(400..600)).await;
        let file = copy(&cache, key(1), 1000).await.unwrap();
        assert_eq!(contents(&file), all);
        // Another size is another item.
        assert!(cache.open_copy(key(1), 999).await.is_none());
    }

    #[tokio::test]
    async fn a_damaged_copy_left_by_a_mount_is_deleted_not_served() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = WholeCache::open(tmp.path(), options(1 << 20), Default::default()).unwrap();
        for i in [1, 2] {
            cache.served(key(i), 500, 0, &bytes(i, 500)).await;
            assert!(copy(&cache, key(i), 500).await.is_some());
        }
        drop(cache);
        let damaged = tmp.path().join(WHOLE_DIR).join(key(2).hex());
        fs::set_permissions(&damaged, fs::Permissions::from_mode(0o600)).unwrap();
        let mut data = fs::read(&damaged).unwrap();
        data[7] ^= 1;
        fs::write(&damaged, data).unwrap();
        fs::write(tmp.path().join(WHOLE_DIR).join("x.tmp"), b"torn").unwrap();
        let cache = WholeCache::open(tmp.path(), options(1 << 20), Default::default()).unwrap();
        assert_eq!(
            contents(&cache.open_copy(key(1), 500).await.unwrap()),
            bytes(1, 500)
        );
        assert!(cache.open_copy(key(2), 500).await.is_none());
        assert!(!damaged.exists());
        assert!(!tmp.path().join(WHOLE_DIR).join("x.tmp").exists());
    }

    #[tokio::test]
    async fn copies_stay_within_their_bound_least_recent_dropped_first() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = WholeCache::open(tmp.path(), options(1000), Default::default()).unwrap();
        for i in 1..=3 {
            cache.served(key(i), 400, 0, &bytes(i, 400)).await;
            assert!(copy(&cache, key(i), 400).await.is_some());
            if i == 2 {
                assert!(cache.open_copy(key(1), 400).await.is_some()); // 1 is now recent
            }
        }
        assert!(cache.open_copy(key(2), 400).await.is_none());
        assert!(cache.open_copy(key(1), 400).await.is_some());
        assert!(cache.open_copy(key(3), 400).await.is_some());
        // Bigger than the bound, or smaller than the minimum: never copied.
        cache.served(key(4), 2000, 0, &bytes(4, 2000)).await;
        cache.served(key(5), 5, 0, &bytes(5, 5)).await;
        assert!(copy(&cache, key(4), 2000).await.is_none());
        assert!(cache.open_copy(key(5), 5).await.is_none());
    }
}
