//! Compressed records (a DataBundle's): read through the block cache as
//! ranges of their object, decoded once, and kept decoded in the same
//! LRU, within the same memory bound.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use futures::future::FutureExt;
use object_store::path::Path;

use super::{BlockCache, BlockKey, Cached, FetchError, Stats};
use crate::cache::ObjectRef;
use crate::format::bundle::Compression;

/// A record: bytes `stored` of `object`, whose first `compressed` bytes
/// decode with `compression` to `len` bytes. `stored` may run on past
/// them to where the next record starts (a bundle pads records to its
/// block size), so that reads of consecutive records abut and read-ahead
/// sees them as one run.
#[derive(Clone, Debug)]
pub struct RecordRef {
    pub object: ObjectRef,
    pub stored: Range<u64>,
    pub compressed: u64,
    pub len: u64,
    pub compression: Compression,
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
    pub async fn read_record(
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
                let (compression, len) = (record.compression, record.len);
                let data = bytes.slice(..bytes.len().min(record.compressed as usize));
                crate::blocking::run(move || compression.decompress(&data, len, &what))
                    .await
                    .map(Bytes::from)
                    .map_err(|e| FetchError::Decode(Arc::new(e)))
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
