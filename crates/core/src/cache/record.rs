//! Encoded records (a DataBundle's compressed records, a TileDB array's
//! filtered tiles): read through the block cache as ranges of their
//! object, decoded once, and kept decoded in the same LRU, within the same
//! memory bound.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use futures::future::FutureExt;
use object_store::path::Path;
use packfs_format::bundle::Compression;
use packfs_format::tiledb::fragment::TileCodec;

use super::{BlockCache, BlockKey, Cached, FetchError, Stats};
use crate::cache::ObjectRef;

/// How a record's stored bytes decode.
#[derive(Clone, Debug)]
pub enum RecordCodec {
    /// A DataBundle record.
    Bundle(Compression),
    /// A TileDB data tile: its filter pipeline run in reverse.
    Tile(Arc<TileCodec>),
}

impl RecordCodec {
    /// `data` decoded to exactly `len` bytes; `what` names the record in
    /// the error.
    fn decode(&self, data: &[u8], len: u64, what: &str) -> Result<Vec<u8>, FetchError> {
        let decoded = match self {
            RecordCodec::Bundle(compression) => compression
                .decompress(data, len, what)
                .map_err(|e| FetchError::Decode(Arc::new(e))),
            RecordCodec::Tile(codec) => codec
                .decode(data, len)
                .map_err(|e| FetchError::Decode(Arc::new(e.within(what)))),
        }?;
        if decoded.len() as u64 != len {
            let detail = format!("decodes to {} bytes, not {len}", decoded.len());
            let e = packfs_format::FormatError::shape(what, detail);
            return Err(FetchError::Decode(Arc::new(e)));
        }
        Ok(decoded)
    }
}

/// A record: bytes `stored` of `object`, whose first `compressed` bytes
/// decode with `codec` to `len` bytes. `stored` may run on past
/// them to where the next record starts (a bundle pads records to its
/// block size), so that reads of consecutive records abut and read-ahead
/// sees them as one run.
#[derive(Clone, Debug)]
pub struct RecordRef {
    pub object: ObjectRef,
    pub stored: Range<u64>,
    pub compressed: u64,
    pub len: u64,
    pub codec: RecordCodec,
}

impl RecordRef {
    /// The cache key of the decoded record: a name no object has (object
    /// paths never contain an empty segment), and its stored offset.
    fn key(&self) -> BlockKey {
        let name = format!("{}//decoded", self.object.path);
        (Arc::new(Path::from(name)), self.stored.start)
    }
}

impl BlockCache {
    /// Exactly `len` bytes of `record` from `offset` (clamped to it). The
    /// stored bytes go through [`BlockCache::read`], so sequential records
    /// of a shard are read ahead like any run; the decoded record is
    /// cached, and concurrent readers of one record share its decoding.
    pub(crate) async fn read_record(
        &self,
        record: &RecordRef,
        offset: u64,
        len: u64,
    ) -> Result<Bytes, FetchError> {
        let end = record.len.min(offset.saturating_add(len));
        if offset >= end {
            return Ok(Bytes::new());
        }
        let key = record.key();
        let fetch = {
            let inner = &*self.inner;
            // Lock order everywhere: lru, then in_flight.
            let mut lru = inner.lru.lock();
            if let Some(cached) = lru.blocks.get(&key) {
                Stats::add(&inner.stats.cache_hits, 1);
                return Ok(cached.bytes.slice(offset as usize..end as usize));
            }
            let mut in_flight = inner.in_flight.lock();
            match in_flight.get(&key) {
                Some((fetch, _)) => fetch.clone(),
                None => {
                    let fetch = self.decode(record.clone(), key.clone());
                    in_flight.insert(key, (fetch.clone(), 0));
                    fetch
                }
            }
        };
        let decoded = fetch.await?[0].clone();
        Ok(decoded.slice(offset as usize..end as usize))
    }

    /// Reads and decodes `record`, then moves it from in flight to cached.
    fn decode(&self, record: RecordRef, key: BlockKey) -> super::Fetch {
        let cache = self.clone();
        let task = tokio::spawn(async move {
            let result = async {
                let stored = &record.stored;
                let bytes = cache
                    .read(&record.object, stored.start, stored.end - stored.start)
                    .await?;
                let what = format!("record at {} of {}", stored.start, record.object.path);
                let (codec, len) = (record.codec.clone(), record.len);
                let data = bytes.slice(..bytes.len().min(record.compressed as usize));
                crate::blocking::run(move || codec.decode(&data, len, &what))
                    .await
                    .map(Bytes::from)
            }
            .await;
            let inner = &*cache.inner;
            let mut lru = inner.lru.lock();
            inner.in_flight.lock().remove(&key);
            let decoded = match result {
                Ok(decoded) => decoded,
                Err(e) => {
                    Stats::add(&inner.stats.errors, 1);
                    return Err(e);
                }
            };
            Stats::add(&inner.stats.records_decoded, 1);
            let cached = Cached {
                bytes: decoded.clone(),
                prefetched: false,
            };
            lru.bytes += decoded.len() as u64;
            if let Some(old) = lru.blocks.put(key, cached) {
                lru.bytes -= old.bytes.len() as u64;
            }
            lru.evict_to(inner.options.cache_bytes);
            Ok(Arc::from([decoded]))
        });
        async move { task.await.expect("record decode task panicked") }
            .boxed()
            .shared()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering::Relaxed;

    use object_store::memory::InMemory;

    use super::*;
    use crate::cache::CacheOptions;
    use crate::store::Store;

    /// A cache over an object holding `stored`, and a record of it that
    /// decodes to `len` bytes.
    async fn record_of(stored: Vec<u8>, len: u64) -> (BlockCache, RecordRef) {
        let store = Store::from_object_store(Arc::new(InMemory::new()), Path::default(), "memory");
        let path = Arc::new(Path::from("b/shard-00000000"));
        let size = stored.len() as u64;
        store
            .put_overwrite(&path, Bytes::from(stored))
            .await
            .unwrap();
        let object = ObjectRef {
            path,
            len: size,
            drop_behind: false,
            then: None,
        };
        let record = RecordRef {
            object,
            stored: 0..size,
            compressed: size,
            len,
            codec: RecordCodec::Bundle(Compression::Zstd),
        };
        (
            BlockCache::new(store, CacheOptions::default(), None),
            record,
        )
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_readers_share_one_decode_and_it_stays_cached() {
        let plain: Vec<u8> = (0..300_000u32).map(|i| (i % 253) as u8).collect();
        let stored = Compression::Zstd.compress(&plain, None);
        let (cache, record) = record_of(stored, plain.len() as u64).await;
        let reads: Vec<_> = (0..8u64)
            .map(|i| {
                let (cache, record) = (cache.clone(), record.clone());
                tokio::spawn(async move { cache.read_record(&record, i * 1000, 5000).await })
            })
            .collect();
        for (i, read) in reads.into_iter().enumerate() {
            let at = i * 1000;
            assert_eq!(read.await.unwrap().unwrap(), plain[at..at + 5000]);
        }
        let tail = cache.read_record(&record, 299_990, 100).await.unwrap();
        assert_eq!(tail, plain[299_990..]);
        assert_eq!(cache.stats().records_decoded.load(Relaxed), 1);
    }

    #[tokio::test]
    async fn a_damaged_record_is_an_error_every_time() {
        let plain = vec![7u8; 100_000];
        let mut stored = Compression::Zstd.compress(&plain, None);
        let last = stored.len() - 1;
        stored[last] ^= 0x01; // the content checksum
        let (cache, record) = record_of(stored, plain.len() as u64).await;
        for _ in 0..2 {
            let err = cache.read_record(&record, 0, 10).await.unwrap_err();
            assert!(matches!(err, FetchError::Decode(_)), "{err}");
            assert!(err.to_string().contains("shard-00000000"), "{err}");
        }
        assert_eq!(cache.stats().records_decoded.load(Relaxed), 0);
    }
}
