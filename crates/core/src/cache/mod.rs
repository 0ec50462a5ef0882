//! The block cache: object bytes in fixed-size blocks, shared by every
//! reader of a mount, bounded in bytes, with one GET per missing run of
//! blocks no matter how many readers want it (in-flight dedupe).
//!
//! Objects are immutable, so a cached block is never revalidated. Blocks
//! are keyed by (object path, block index); an object's expected length
//! comes from the dataset's metadata and every GET checks the real one.

mod disk;
pub mod map_ahead;
mod prefetch;
mod record;
mod stats;
pub mod whole;

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use futures::future::{BoxFuture, FutureExt, Shared};
use object_store::path::Path;
use parking_lot::Mutex;
use thiserror::Error;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::store::{Store, StoreError};
pub use disk::{DiskCache, DiskCacheError};
use prefetch::{Access, Prefetcher};
pub use record::RecordCodec;
pub use record::RecordRef;
pub use stats::Stats;

crate::options! {
/// Settings of the cache and prefetcher.
#[derive(Clone, Debug)]
pub struct CacheOptions {
    /// Most bytes of blocks kept in memory.
    pub cache_bytes: u64,
    /// Unit of caching and of demand GETs.
    pub block_size: u64,
    /// Read ahead on sequential runs.
    pub prefetch: bool,
    /// Largest read-ahead window of one object's run.
    pub max_window: u64,
    /// Most bytes of prefetch GETs in flight across the mount.
    pub prefetch_memory: u64,
    /// Largest single prefetch GET.
    pub max_request: u64,
}
}

impl Default for CacheOptions {
    fn default() -> Self {
        CacheOptions {
            cache_bytes: 512 << 20,
            block_size: 256 << 10,
            prefetch: true,
            max_window: 64 << 20,
            prefetch_memory: 256 << 20,
            max_request: 8 << 20,
        }
    }
}

/// Why bytes could not be fetched. Cloneable: one failed GET is reported
/// to every reader that waited for it.
#[derive(Clone, Debug, Error)]
#[non_exhaustive]
pub enum FetchError {
    /// The object's real length disagrees with the metadata (a pack's
    /// length is the sum of its entries').
    #[error("object {object} is {actual} bytes long, but the dataset's entries say it must be {expected}")]
    LengthMismatch {
        object: String,
        expected: u64,
        actual: u64,
    },
    #[error(transparent)]
    Store(Arc<StoreError>),
    /// An encoded record does not decode to the bytes the metadata says.
    #[error(transparent)]
    Decode(Arc<dyn std::error::Error + Send + Sync>),
}

/// An object as the metadata describes it.
#[derive(Clone, Debug)]
pub struct ObjectRef {
    pub path: Arc<Path>,
    /// The length the object must have.
    pub len: u64,
    /// Drop each block from memory once a read has consumed its last byte.
    /// Right for objects holding the bytes of one item (a whole object or a
    /// chunk): the kernel's page cache keeps what it was given, so nothing
    /// asks for those bytes again soon, and freeing them as a big item
    /// streams by lets new reads reuse warm memory instead of faulting in
    /// fresh pages (measured: ~20% more throughput on a 1 GiB first pass)
    /// and keeps one big scan from flushing the cache of small items.
    /// Wrong for packs, whose blocks are shared by neighbouring items.
    pub drop_behind: bool,
    /// The object a sequential reader goes on to at this one's end (the
    /// next chunk of the same item): read-ahead that reaches the end
    /// carries on into it, so a big item streams across its chunks.
    pub then: Option<Arc<ObjectRef>>,
}

type BlockKey = (Arc<Path>, u64);
type Fetch = Shared<BoxFuture<'static, Result<Arc<[Bytes]>, FetchError>>>;

struct Cached {
    bytes: Bytes,
    /// Brought in by prefetch and not read yet.
    prefetched: bool,
}

struct Lru {
    blocks: lru::LruCache<BlockKey, Cached>,
    bytes: u64,
}

impl Lru {
    /// Drops least recently used entries until at most `limit` bytes stay.
    fn evict_to(&mut self, limit: u64) {
        while self.bytes > limit {
            match self.blocks.pop_lru() {
                Some((_, old)) => self.bytes -= old.bytes.len() as u64,
                None => break,
            }
        }
    }
}

/// Write-behind jobs to the disk tier (one per GET, writing its blocks)
/// running at once; when all are busy, a GET's blocks are not written to
/// disk at all (counted as `disk_skipped`): a cache may drop writes, and
/// queueing them would hold their bytes in memory without bound.
const DISK_WRITES_IN_FLIGHT: usize = 4;

/// A block being fetched: the shared GET and this block's index in it.
type InFlight = HashMap<BlockKey, (Fetch, usize)>;

/// Shared state of the cache; cheap to clone.
#[derive(Clone)]
pub struct BlockCache {
    inner: Arc<Inner>,
}

struct Inner {
    store: Store,
    options: CacheOptions,
    lru: Mutex<Lru>,
    in_flight: Mutex<InFlight>,
    prefetcher: Prefetcher,
    stats: Arc<Stats>,
    disk: Option<Arc<DiskCache>>,
    /// Permits of write-behind jobs to `disk`.
    disk_writes: Arc<Semaphore>,
}

/// Where the bytes of one block come from during a read.
enum Pending {
    Ready(Bytes),
    Wait(Fetch, usize),
}

impl BlockCache {
    /// A cache over `store`; with `disk`, blocks also persist there.
    pub fn new(store: Store, options: CacheOptions, disk: Option<DiskCache>) -> Self {
        let prefetcher = Prefetcher::new(&options);
        BlockCache {
            inner: Arc::new(Inner {
                store,
                lru: Mutex::new(Lru {
                    blocks: lru::LruCache::unbounded(),
                    bytes: 0,
                }),
                in_flight: Mutex::new(HashMap::new()),
                prefetcher,
                stats: Arc::new(Stats::default()),
                disk: disk.map(Arc::new),
                disk_writes: Arc::new(Semaphore::new(DISK_WRITES_IN_FLIGHT)),
                options,
            }),
        }
    }

    pub fn stats(&self) -> &Arc<Stats> {
        &self.inner.stats
    }

    /// Its settings.
    pub fn options(&self) -> &CacheOptions {
        &self.inner.options
    }

    /// Bytes of blocks held in memory now.
    pub fn bytes_cached(&self) -> u64 {
        self.inner.lru.lock().bytes
    }

    /// Bytes of read-ahead GETs under way now.
    pub fn prefetch_in_flight(&self) -> u64 {
        self.inner.prefetcher.in_flight_bytes(&self.inner.options)
    }

    /// Exactly `len` bytes of `object` from `offset` (clamped to the object).
    /// One buffer: a slice of a block (or of a GET's body) when one holds
    /// them all, else the blocks joined (a copy).
    pub async fn read(
        &self,
        object: &ObjectRef,
        offset: u64,
        len: u64,
    ) -> Result<Bytes, FetchError> {
        Ok(self.read_blocks(object, offset, len).await?.join())
    }

    /// Bytes `len` bytes of `object` from `offset` (clamped to the object),
    /// as the buffers that hold them, for a reader that copies them out
    /// itself ([`Blocks::copy_to`]) rather than have them joined.
    pub(crate) async fn read_blocks(
        &self,
        object: &ObjectRef,
        offset: u64,
        len: u64,
    ) -> Result<Blocks, FetchError> {
        let end = object.len.min(offset.saturating_add(len));
        if offset >= end {
            return Ok(Blocks::empty(offset));
        }
        let bs = self.inner.options.block_size;
        let blocks = offset / bs..end.div_ceil(bs);
        let pending = match self.inner.options.prefetch {
            // Without read-ahead every read goes through blocks, so
            // concurrent readers of one block share its GET.
            false => self.claim(object, blocks.clone(), None),
            true => match self.inner.prefetcher.on_read(self, object, offset..end) {
                Access::Sequential => self.claim(object, blocks.clone(), None),
                // A random read of blocks not all at hand costs one GET of
                // exactly its bytes: whole blocks would fetch (and cache)
                // many times what a shuffled reader of small items uses.
                Access::Random => match self.claim_present(object, blocks.clone()) {
                    Some(pending) => pending,
                    None => return self.fetch_exact(object, offset..end).await,
                },
            },
        };
        let mut parts = Vec::with_capacity(pending.len());
        for p in pending {
            parts.push(match p {
                Pending::Ready(b) => b,
                Pending::Wait(fetch, i) => fetch.await?[i].clone(),
            });
        }
        if object.drop_behind {
            self.drop_consumed(object, blocks.start..blocks.end.min(end / bs));
            if end == object.len {
                self.drop_consumed(object, blocks.end - 1..blocks.end);
            }
        }
        Ok(Blocks {
            first: blocks.start * bs,
            block_size: bs,
            parts,
            range: offset..end,
        })
    }

    /// Fetches the blocks holding `bytes` of `object` in the background,
    /// as prefetch (bounded by `prefetch_memory`, skipped past it), for a
    /// reader that will want them: read-ahead that follows a file's map
    /// ([`map_ahead`]).
    pub fn prefetch(&self, object: &ObjectRef, bytes: Range<u64>) {
        let end = bytes.end.min(object.len);
        if !self.inner.options.prefetch || bytes.start >= end {
            return;
        }
        let bs = self.inner.options.block_size;
        let blocks = bytes.start / bs..end.div_ceil(bs);
        self.inner.prefetcher.read_ahead(self, object, blocks);
    }

    /// Forgets `blocks` of `object` (those a read has used up).
    fn drop_consumed(&self, object: &ObjectRef, blocks: Range<u64>) {
        let mut lru = self.inner.lru.lock();
        for b in blocks {
            if let Some(old) = lru.blocks.pop(&(object.path.clone(), b)) {
                lru.bytes -= old.bytes.len() as u64;
            }
        }
    }

    /// For each block of `blocks`, its cached bytes or the fetch under way,
    /// if every one of them has either; otherwise nothing is counted or
    /// started.
    fn claim_present(&self, object: &ObjectRef, blocks: Range<u64>) -> Option<Vec<Pending>> {
        let inner = &*self.inner;
        let lru = inner.lru.lock();
        let in_flight = inner.in_flight.lock();
        let key = |b: u64| (object.path.clone(), b);
        let all = blocks
            .clone()
            .all(|b| lru.blocks.contains(&key(b)) || in_flight.contains_key(&key(b)));
        drop((lru, in_flight));
        // A block evicted in between is fetched again by the claim: rare,
        // and still right.
        all.then(|| self.claim(object, blocks, None))
    }

    /// Exactly `range` of `object`: from the disk tier if it holds all its
    /// blocks, else by one GET of just those bytes (not cached: the kernel
    /// keeps what a reader was given).
    async fn fetch_exact(
        &self,
        object: &ObjectRef,
        range: Range<u64>,
    ) -> Result<Blocks, FetchError> {
        let inner = &*self.inner;
        let stats = &inner.stats;
        let bs = inner.options.block_size;
        Stats::add(&stats.cache_misses, 1);
        let blocks = range.start / bs..range.end.div_ceil(bs);
        if let Some(parts) = self.disk_blocks(object, blocks.clone()).await {
            return Ok(Blocks {
                first: blocks.start * bs,
                block_size: bs,
                parts: parts.to_vec(),
                range,
            });
        }
        let len = range.end - range.start;
        let pieces = get_pieces(&inner.store, object, range.clone(), len).await;
        Stats::add(&stats.gets, 1);
        match pieces {
            Ok(pieces) => {
                Stats::add(&stats.bytes_fetched, len);
                Ok(Blocks {
                    first: range.start,
                    block_size: len,
                    parts: pieces.to_vec(),
                    range,
                })
            }
            Err(e) => {
                Stats::add(&stats.errors, 1);
                Err(e)
            }
        }
    }

    /// `blocks` of `object` from the disk tier, if there is one and it has
    /// them all.
    async fn disk_blocks(&self, object: &ObjectRef, blocks: Range<u64>) -> Option<Arc<[Bytes]>> {
        let inner = &*self.inner;
        let disk = inner.disk.clone()?;
        let (path, bs) = (object.path.clone(), inner.options.block_size);
        let found = crate::blocking::run(move || {
            blocks
                .map(|b| disk.get(&path, bs, b))
                .collect::<Option<Arc<[Bytes]>>>()
        })
        .await;
        if let Some(parts) = &found {
            Stats::add(&inner.stats.disk_hits, parts.len() as u64);
        }
        found
    }

    /// For each block of `blocks`: its cached bytes, or the fetch to wait
    /// for. Each run of missing blocks starts one GET (split at
    /// `max_request`). With `permit` (a prefetch), nothing is returned and
    /// the permit is held until the started GETs finish.
    fn claim(
        &self,
        object: &ObjectRef,
        blocks: Range<u64>,
        permit: Option<Arc<OwnedSemaphorePermit>>,
    ) -> Vec<Pending> {
        let inner = &*self.inner;
        let stats = &inner.stats;
        let demand = permit.is_none();
        let per_request = (inner.options.max_request / inner.options.block_size).max(1);
        let mut out = Vec::with_capacity(if demand {
            (blocks.end - blocks.start) as usize
        } else {
            0
        });
        // Lock order everywhere: lru, then in_flight.
        let mut lru = inner.lru.lock();
        let mut in_flight = inner.in_flight.lock();
        let key = |b: u64| (object.path.clone(), b);
        let mut b = blocks.start;
        while b < blocks.end {
            if let Some(cached) = lru.blocks.get_mut(&key(b)) {
                if demand {
                    Stats::add(&stats.cache_hits, 1);
                    if std::mem::take(&mut cached.prefetched) {
                        Stats::add(&stats.prefetch_hits, 1);
                    }
                    out.push(Pending::Ready(cached.bytes.clone()));
                }
                b += 1;
                continue;
            }
            if let Some((fetch, i)) = in_flight.get(&key(b)) {
                if demand {
                    Stats::add(&stats.cache_hits, 1);
                    out.push(Pending::Wait(fetch.clone(), *i));
                }
                b += 1;
                continue;
            }
            let mut end = b + 1;
            while end < blocks.end
                && end - b < per_request
                && !lru.blocks.contains(&key(end))
                && !in_flight.contains_key(&key(end))
            {
                end += 1;
            }
            let fetch = self.start_fetch(object, b..end, permit.clone());
            for (i, block) in (b..end).enumerate() {
                in_flight.insert(key(block), (fetch.clone(), i));
                if demand {
                    Stats::add(&stats.cache_misses, 1);
                    out.push(Pending::Wait(fetch.clone(), i));
                }
            }
            b = end;
        }
        out
    }

    /// Starts one GET for `blocks` of `object` in its own task, so it
    /// completes and fills the cache even if no reader waits for it.
    fn start_fetch(
        &self,
        object: &ObjectRef,
        blocks: Range<u64>,
        permit: Option<Arc<OwnedSemaphorePermit>>,
    ) -> Fetch {
        let cache = self.clone();
        let object = object.clone();
        let task = tokio::spawn(async move {
            let result = cache.fetch(&object, blocks, permit.is_some()).await;
            drop(permit);
            result
        });
        async move { task.await.expect("block fetch task panicked") }
            .boxed()
            .shared()
    }

    async fn fetch(
        &self,
        object: &ObjectRef,
        blocks: Range<u64>,
        prefetch: bool,
    ) -> Result<Arc<[Bytes]>, FetchError> {
        let inner = &*self.inner;
        let stats = &inner.stats;
        let parts = self.load(object, blocks.clone(), prefetch).await;
        // Move the blocks from in flight to cached in one step, so no reader
        // finds a block in neither place and fetches it again.
        let mut lru = inner.lru.lock();
        let mut in_flight = inner.in_flight.lock();
        for b in blocks.clone() {
            in_flight.remove(&(object.path.clone(), b));
        }
        drop(in_flight);
        let parts = match parts {
            Ok(parts) => parts,
            Err(e) => {
                Stats::add(&stats.errors, 1);
                return Err(e);
            }
        };
        for (b, part) in blocks.zip(parts.iter()) {
            let cached = Cached {
                bytes: part.clone(),
                prefetched: prefetch,
            };
            lru.bytes += part.len() as u64;
            if let Some(old) = lru.blocks.put((object.path.clone(), b), cached) {
                lru.bytes -= old.bytes.len() as u64;
            }
        }
        lru.evict_to(inner.options.cache_bytes);
        Ok(parts)
    }

    /// The bytes of `blocks`: from the disk tier if it has them all,
    /// otherwise by one GET (whose blocks then go to the disk tier).
    async fn load(
        &self,
        object: &ObjectRef,
        blocks: Range<u64>,
        prefetch: bool,
    ) -> Result<Arc<[Bytes]>, FetchError> {
        let inner = &*self.inner;
        let stats = &inner.stats;
        let bs = inner.options.block_size;
        if let Some(parts) = self.disk_blocks(object, blocks.clone()).await {
            return Ok(parts);
        }
        let range = blocks.start * bs..(blocks.end * bs).min(object.len);
        let parts = get_pieces(&inner.store, object, range.clone(), bs).await;
        Stats::add(&stats.gets, 1);
        if prefetch {
            Stats::add(&stats.prefetch_gets, 1);
        }
        let parts = parts?;
        Stats::add(&stats.bytes_fetched, range.end - range.start);
        if let Some(disk) = &inner.disk {
            // Written behind the reader: a slow disk never delays a read,
            // and never makes writes (and the bytes they hold) pile up.
            match inner.disk_writes.clone().try_acquire_owned() {
                Ok(permit) => {
                    let (disk, path, written) = (disk.clone(), object.path.clone(), parts.clone());
                    tokio::task::spawn_blocking(move || {
                        for (b, part) in blocks.zip(written.iter()) {
                            disk.put(&path, bs, b, part);
                        }
                        drop(permit);
                    });
                }
                Err(_) => Stats::add(&stats.disk_skipped, parts.len() as u64),
            }
        }
        Ok(parts)
    }
}

/// Bytes `range` of an object in the buffers that hold them: consecutive
/// blocks of `block_size` bytes (the last may be shorter) from byte
/// `first`.
pub(crate) struct Blocks {
    first: u64,
    block_size: u64,
    parts: Vec<Bytes>,
    range: Range<u64>,
}

impl Blocks {
    /// No bytes, at `offset`.
    fn empty(offset: u64) -> Self {
        Blocks {
            first: offset,
            block_size: 1,
            parts: Vec::new(),
            range: offset..offset,
        }
    }

    /// The object bytes held (the read, clamped to the object).
    pub(crate) fn range(&self) -> Range<u64> {
        self.range.clone()
    }

    /// The bytes in one buffer: a slice when one block holds them.
    fn join(self) -> Bytes {
        if let [part] = self.parts.as_slice() {
            let lo = (self.range.start - self.first) as usize;
            return part.slice(lo..lo + (self.range.end - self.range.start) as usize);
        }
        let mut out = BytesMut::with_capacity((self.range.end - self.range.start) as usize);
        self.extend(self.range.clone(), |bytes| out.extend_from_slice(bytes));
        out.freeze()
    }

    /// Copies the `dest.len()` bytes from `offset`, which lie within
    /// [`Blocks::range`], straight out of their blocks into `dest`.
    /// Returns how many it copied: fewer only if a block is shorter than
    /// it should be.
    pub(crate) fn copy_to(&self, offset: u64, dest: &mut [u8]) -> usize {
        let end = offset + dest.len() as u64;
        assert!(
            self.range.start <= offset && end <= self.range.end,
            "{offset}..{end} lies outside the blocks read, {:?}",
            self.range
        );
        let mut copied = 0;
        self.extend(offset..end, |bytes| {
            dest[copied..copied + bytes.len()].copy_from_slice(bytes);
            copied += bytes.len();
        });
        copied
    }

    /// Hands `range` (within the blocks) to `put`, one block's part at a
    /// time, in order; stops early at a block that ends too soon.
    fn extend(&self, range: Range<u64>, mut put: impl FnMut(&[u8])) {
        let mut at = range.start;
        while at < range.end {
            let index = (at - self.first) / self.block_size;
            let block_start = self.first + index * self.block_size;
            let Some(part) = self.parts.get(index as usize) else {
                return;
            };
            let lo = (at - block_start) as usize;
            let hi = ((range.end - block_start) as usize).min(part.len());
            if hi <= lo {
                return;
            }
            put(&part[lo..hi]);
            at = block_start + hi as u64;
        }
    }
}

/// The blocks of one GET's body, each in its own allocation.
///
/// Slicing the body instead would share one buffer (up to `max_request`,
/// 8 MiB) among all its blocks: evicting a block would free nothing while
/// a sibling stayed cached, so a few hot blocks could pin many whole GET
/// buffers and real memory could pass `cache_bytes` many times over
/// (`tests/cache_memory.rs` measured 42 MiB under a 4 MiB bound). Copying
/// makes the LRU's byte count the memory really held. The copy costs one
/// memcpy of bytes that just came over the network or from disk: measured
/// on the 2-core benchmark VM, about 0.5 ms per 8 MiB prefetch GET once
/// the allocator reuses evicted blocks' memory (0.6 ms for a bare memcpy;
/// up to 9 ms when every block needs fresh pages), against ~6 ms for the
/// GET itself at the local store's 1.3 GB/s; on a big item's first pass
/// it measured about 15% (`dd` of 512 MiB: 1.4–1.6 against 1.7–2.0 GB/s,
/// builds alternating). The other way, charging each buffer whole until
/// its last slice is gone, also keeps the bound, but a hot 256 KiB block
/// then costs 8 MiB of it, so a cache of scattered hot blocks holds 32
/// times fewer of them; tried for drop-behind objects only, it kept the
/// first pass's speed but random preads then filled the cache with whole
/// prefetch buffers (daemon peak 889 against 635 MiB). A body of exactly
/// one block is kept as it is: it is already that block's own buffer (the
/// local store reads exactly the range, object_store's HTTP clients
/// collect a body into one buffer).
fn split_into_blocks(body: Bytes, block_size: u64) -> Arc<[Bytes]> {
    let bs = block_size as usize;
    if body.len() <= bs {
        return Arc::from([body]);
    }
    body.chunks(bs).map(Bytes::copy_from_slice).collect()
}

/// Exactly `range` of an object of `object.len` bytes, in pieces of
/// `piece` bytes (the last may be shorter), each in its own buffer: read
/// straight into them from a local dataset's file, else one ranged GET
/// cut up.
async fn get_pieces(
    store: &Store,
    object: &ObjectRef,
    range: Range<u64>,
    piece: u64,
) -> Result<Arc<[Bytes]>, FetchError> {
    let Some(read) = store.read_local(&object.path, range.clone(), piece).await else {
        return Ok(split_into_blocks(
            get_exact(store, object, range).await?,
            piece,
        ));
    };
    let read = read.map_err(|e| FetchError::Store(Arc::new(e)))?;
    let got: u64 = read.pieces.iter().map(|p| p.len() as u64).sum();
    if read.object_size != object.len || got != range.end - range.start {
        return Err(FetchError::LengthMismatch {
            object: object.path.to_string(),
            expected: object.len,
            actual: read.object_size,
        });
    }
    Ok(read.pieces.into())
}

/// A ranged GET that must return exactly `range` of an object of `object.len` bytes.
async fn get_exact(
    store: &Store,
    object: &ObjectRef,
    range: Range<u64>,
) -> Result<Bytes, FetchError> {
    let mismatch = |actual| FetchError::LengthMismatch {
        object: object.path.to_string(),
        expected: object.len,
        actual,
    };
    match store.get_range(&object.path, range.clone()).await {
        Ok(read) if read.object_size != object.len => Err(mismatch(read.object_size)),
        Ok(read) if read.bytes.len() as u64 != range.end - range.start => {
            Err(mismatch(read.object_size))
        }
        Ok(read) => Ok(read.bytes),
        // A range past the end of a short object fails in the backend;
        // report the real cause when it is a wrong length.
        Err(err) => match store.size(&object.path).await {
            Ok(Some(actual)) if actual != object.len => Err(mismatch(actual)),
            _ => Err(FetchError::Store(Arc::new(err))),
        },
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering::Relaxed;

    use object_store::memory::InMemory;

    use super::*;

    async fn cache_with(len: usize, options: CacheOptions) -> (BlockCache, ObjectRef, Vec<u8>) {
        let store = Store::from_object_store(Arc::new(InMemory::new()), Path::default(), "memory");
        let bytes: Vec<u8> = (0..len).map(|i| (i * 7 + i / 251) as u8).collect();
        let path = Arc::new(Path::from("t/m/0/obj"));
        store
            .put_overwrite(&path, Bytes::from(bytes.clone()))
            .await
            .unwrap();
        let object = ObjectRef {
            path,
            len: len as u64,
            drop_behind: false,
            then: None,
        };
        (BlockCache::new(store, options, None), object, bytes)
    }

    fn small_blocks() -> CacheOptions {
        CacheOptions {
            block_size: 64 << 10,
            max_window: 1 << 20,
            max_request: 256 << 10,
            ..CacheOptions::default()
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_misses_on_one_block_cause_one_get() {
        let options = CacheOptions {
            prefetch: false,
            ..small_blocks()
        };
        let (cache, object, bytes) = cache_with(100_000, options).await;
        let reads: Vec<_> = (0..16)
            .map(|_| {
                let (cache, object) = (cache.clone(), object.clone());
                tokio::spawn(async move { cache.read(&object, 1000, 5000).await.unwrap() })
            })
            .collect();
        for r in reads {
            assert_eq!(&r.await.unwrap()[..], &bytes[1000..6000]);
        }
        assert_eq!(cache.stats().gets.load(Relaxed), 1);
    }

    #[tokio::test]
    async fn blocks_are_copied_out_as_they_are_joined() {
        let (cache, object, bytes) = cache_with(300_000, small_blocks()).await;
        let block = small_blocks().block_size;
        // Across three blocks, then (the first read of a random reader)
        // from one GET of exactly the bytes.
        for (offset, len) in [(block - 100, block + 200), (250_000, 9_000)] {
            let blocks = cache.read_blocks(&object, offset, len).await.unwrap();
            assert_eq!(blocks.range(), offset..offset + len);
            let (from, to) = (offset as usize, (offset + len) as usize);
            for (at, n) in [(from, to - from), (from + 50, 150), (to - 7, 7)] {
                let mut dest = vec![0; n];
                assert_eq!(blocks.copy_to(at as u64, &mut dest), n);
                assert_eq!(dest, &bytes[at..at + n]);
            }
            assert_eq!(blocks.join(), &bytes[from..to]);
        }
        let past_the_end = cache.read_blocks(&object, 299_990, 100).await.unwrap();
        assert_eq!(past_the_end.range(), 299_990..300_000);
    }

    #[test]
    fn a_short_block_stops_a_copy_instead_of_spinning() {
        let blocks = Blocks {
            first: 0,
            block_size: 4,
            parts: vec![Bytes::from_static(b"abcd"), Bytes::from_static(b"ef")],
            range: 0..12,
        };
        let mut dest = [0; 8];
        assert_eq!(blocks.copy_to(2, &mut dest), 4);
        assert_eq!(&dest[..4], b"cdef");
    }

    #[tokio::test]
    async fn a_sequential_scan_is_read_ahead_and_a_random_one_is_not() {
        let len = 8 << 20;
        let (cache, object, bytes) = cache_with(len, small_blocks()).await;
        for offset in (0..len).step_by(16 << 10) {
            let got = cache.read(&object, offset as u64, 16 << 10).await.unwrap();
            assert_eq!(&got[..], &bytes[offset..offset + (16 << 10)]);
        }
        let stats = cache.stats();
        let blocks = (len as u64) / (64 << 10);
        assert!(
            stats.prefetch_hits.load(Relaxed) > blocks / 2,
            "{}",
            stats.render()
        );
        assert!(
            stats.gets.load(Relaxed) < blocks / 2,
            "few, large GETs: {}",
            stats.render()
        );

        let (cache, object, _) = cache_with(len, small_blocks()).await;
        for i in 0..50u64 {
            let offset = (i * 7_919 * 4096) % (len as u64 - 4096);
            cache.read(&object, offset, 4096).await.unwrap();
        }
        assert_eq!(
            cache.stats().prefetch_gets.load(Relaxed),
            0,
            "{}",
            cache.stats().render()
        );
    }

    /// Waits until no GET of `cache` is in flight.
    async fn settled(cache: &BlockCache) {
        for _ in 0..500 {
            if cache.inner.in_flight.lock().is_empty() {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        panic!("GETs still in flight after 5 s");
    }

    #[tokio::test]
    async fn read_ahead_carries_on_into_the_next_chunk() {
        let len = 2 << 20;
        let (cache, first, _) = cache_with(len, small_blocks()).await;
        let bytes: Vec<u8> = (0..len).map(|i| (i % 253) as u8).collect();
        let path = Arc::new(Path::from("t/m/0/next"));
        let store = &cache.inner.store;
        store
            .put_overwrite(&path, Bytes::from(bytes.clone()))
            .await
            .unwrap();
        let next = ObjectRef {
            path,
            len: len as u64,
            drop_behind: true,
            then: None,
        };
        let first = ObjectRef {
            then: Some(Arc::new(next.clone())),
            ..first
        };
        for offset in (0..len).step_by(64 << 10) {
            cache.read(&first, offset as u64, 64 << 10).await.unwrap();
        }
        settled(&cache).await;
        let stats = cache.stats();
        let (gets, hits) = (stats.gets.load(Relaxed), stats.prefetch_hits.load(Relaxed));
        let got = cache.read(&next, 0, 256 << 10).await.unwrap();
        assert_eq!(&got[..], &bytes[..256 << 10]);
        assert_eq!(stats.gets.load(Relaxed), gets, "{}", stats.render());
        assert_eq!(stats.prefetch_hits.load(Relaxed), hits + 4);
    }

    #[tokio::test]
    async fn interleaved_scans_of_one_object_each_keep_their_run() {
        let len = 8 << 20;
        let (cache, object, _) = cache_with(len, small_blocks()).await;
        let half = len as u64 / 2;
        for offset in (0..half).step_by(16 << 10) {
            cache.read(&object, offset, 16 << 10).await.unwrap();
            cache.read(&object, half + offset, 16 << 10).await.unwrap();
        }
        let stats = cache.stats();
        let blocks = (len as u64) / (64 << 10);
        assert!(
            stats.prefetch_hits.load(Relaxed) > blocks / 2,
            "{}",
            stats.render()
        );
    }

    #[tokio::test]
    async fn the_disk_tier_survives_a_new_cache_and_rejects_damaged_blocks() {
        let dir = tempfile::tempdir().unwrap();
        let options = CacheOptions {
            prefetch: false,
            ..small_blocks()
        };
        let (cache, object, bytes) = cache_with(300_000, options.clone()).await;
        let store = cache.inner.store.clone();
        let first = BlockCache::new(
            store.clone(),
            options.clone(),
            Some(DiskCache::open(dir.path(), 1 << 30).unwrap()),
        );
        assert!(first.read(&object, 0, 300_000).await.unwrap() == bytes);
        assert!(
            DiskCache::open(dir.path(), 1 << 30).is_err(),
            "one mount per directory"
        );
        drop(first);
        // Writes are behind the reader; wait for the five block files.
        let files = || {
            std::fs::read_dir(dir.path())
                .unwrap()
                .filter_map(|e| e.ok())
                .filter(|e| e.path().is_dir())
                .flat_map(|d| {
                    std::fs::read_dir(d.path())
                        .unwrap()
                        .filter_map(|e| e.ok())
                        .map(|e| e.path())
                })
                .filter(|p| !p.to_string_lossy().ends_with(".tmp"))
                .collect::<Vec<_>>()
        };
        for _ in 0..200 {
            if files().len() == 5 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        let blocks = files();
        assert_eq!(blocks.len(), 5);

        let second = BlockCache::new(
            store.clone(),
            options.clone(),
            Some(DiskCache::open(dir.path(), 1 << 30).unwrap()),
        );
        assert!(second.read(&object, 0, 300_000).await.unwrap() == bytes);
        assert_eq!(
            second.stats().gets.load(Relaxed),
            0,
            "{}",
            second.stats().render()
        );
        assert_eq!(second.stats().disk_hits.load(Relaxed), 5);
        drop(second);

        let mut damaged = std::fs::read(&blocks[0]).unwrap();
        let last = damaged.len() - 1;
        damaged[last] ^= 1;
        std::fs::write(&blocks[0], damaged).unwrap();
        let third = BlockCache::new(
            store,
            options,
            Some(DiskCache::open(dir.path(), 1 << 30).unwrap()),
        );
        assert!(
            third.read(&object, 0, 300_000).await.unwrap() == bytes,
            "never the damaged bytes"
        );
        assert!(
            third.stats().gets.load(Relaxed) >= 1,
            "the damaged block was fetched again"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn a_burst_of_reads_keeps_few_disk_writes_in_flight() {
        const OBJECTS: usize = 48;
        let dir = tempfile::tempdir().unwrap();
        let store = Store::from_object_store(Arc::new(InMemory::new()), Path::default(), "memory");
        let mut objects = Vec::new();
        for i in 0..OBJECTS {
            let path = Arc::new(Path::from(format!("t/m/0/{i}")));
            let body = Bytes::from(vec![i as u8; 100_000]);
            store.put_overwrite(&path, body).await.unwrap();
            objects.push(ObjectRef {
                path,
                len: 100_000,
                drop_behind: false,
                then: None,
            });
        }
        let disk = DiskCache::open(dir.path(), 1 << 30).unwrap();
        // A slow disk: every block takes 20 ms to write.
        *disk.probe.delay.lock() = std::time::Duration::from_millis(20);
        let options = CacheOptions {
            prefetch: false,
            ..small_blocks()
        };
        let cache = BlockCache::new(store, options, Some(disk));
        let reads: Vec<_> = objects
            .iter()
            .map(|object| {
                let (cache, object) = (cache.clone(), object.clone());
                tokio::spawn(async move { cache.read(&object, 0, u64::MAX).await.unwrap() })
            })
            .collect();
        for (i, read) in reads.into_iter().enumerate() {
            assert!(read.await.unwrap().iter().all(|&b| b == i as u8));
        }
        let probe = &cache.inner.disk.as_ref().unwrap().probe;
        for _ in 0..500 {
            if probe.running() == 0 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        let most = probe.most.load(Relaxed);
        assert!(
            (1..=DISK_WRITES_IN_FLIGHT).contains(&most),
            "{most} disk writes ran at once"
        );
        let stats = cache.stats();
        assert!(stats.disk_skipped.load(Relaxed) > 0, "{}", stats.render());
    }

    #[tokio::test]
    async fn memory_stays_within_the_cache_bound() {
        let options = CacheOptions {
            cache_bytes: 1 << 20,
            ..small_blocks()
        };
        let (cache, object, bytes) = cache_with(6 << 20, options).await;
        let all = cache.read(&object, 0, 6 << 20).await.unwrap();
        assert!(all == bytes);
        assert!(cache.inner.lru.lock().bytes <= 1 << 20);
    }

    #[tokio::test]
    async fn drop_behind_frees_consumed_blocks_and_keeps_the_rest() {
        let options = CacheOptions {
            prefetch: false,
            ..small_blocks()
        };
        let block = options.block_size as usize;
        let (cache, mut object, bytes) = cache_with(4 * block + 100, options).await;
        object.drop_behind = true;
        let cached = |cache: &BlockCache| cache.inner.lru.lock().blocks.len();
        // Ends inside block 1: block 0 is used up, block 1 is not.
        let got = cache.read(&object, 10, block as u64 + 5).await.unwrap();
        assert_eq!(&got[..], &bytes[10..block + 15]);
        assert_eq!(cached(&cache), 1);
        // Through the end of the object: every block it touched is freed.
        let got = cache.read(&object, block as u64, u64::MAX).await.unwrap();
        assert_eq!(&got[..], &bytes[block..]);
        assert_eq!((cached(&cache), cache.inner.lru.lock().bytes), (0, 0));
        // A re-read is correct; it costs a GET.
        let gets = cache.stats().gets.load(Relaxed);
        assert_eq!(
            &cache.read(&object, 0, 100).await.unwrap()[..],
            &bytes[..100]
        );
        assert_eq!(cache.stats().gets.load(Relaxed), gets + 1);

        // A pack keeps what was read.
        object.drop_behind = false;
        cache.read(&object, 0, u64::MAX).await.unwrap();
        assert_eq!(cached(&cache), 5);
    }

    #[tokio::test]
    async fn a_short_object_is_a_length_mismatch_for_every_waiter() {
        let (cache, mut object, _) = cache_with(10_000, small_blocks()).await;
        object.len = 12_000;
        let err = cache.read(&object, 0, 100).await.unwrap_err().to_string();
        assert!(
            err.contains("10000 bytes long") && err.contains("must be 12000"),
            "{err}"
        );
        assert_eq!(cache.stats().errors.load(Relaxed), 1);
    }
}
