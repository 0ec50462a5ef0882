//! Item reads: bytes `[offset, offset + len)` of an item become a
//! [`ByteRangeMap`] over the objects that hold them (a pack range, the whole
//! object, or a span of chunk objects), compiled and executed by the
//! byte-range engine against the shared block cache.

use bytes::Bytes;
use futures::future::{BoxFuture, FutureExt};
use thiserror::Error;

use crate::cache::{BlockCache, CacheOptions, DiskCache, ObjectRef, Stats};
use crate::dataset::{Item, ItemSource};
use crate::engine::{
    ByteRangeMap, ByteRangeProgram, CoalesceLimits, ExecuteError, MapError, SeekableSource,
    SourceError, SourceIndex,
};
use crate::store::Store;

/// Why item bytes could not be read.
#[derive(Debug, Error)]
pub enum ReadError {
    /// The item's metadata does not describe its bytes completely.
    #[error(transparent)]
    Map(#[from] MapError),
    /// A source object could not deliver its bytes (missing, wrong length,
    /// store failure).
    #[error(transparent)]
    Execute(#[from] ExecuteError),
}

/// Reads item bytes through the block cache.
#[derive(Clone)]
pub struct ItemReader {
    cache: BlockCache,
    limits: CoalesceLimits,
}

impl ItemReader {
    /// A reader over `store`; with `disk`, cached blocks also persist there.
    pub fn new(store: Store, options: CacheOptions, disk: Option<DiskCache>) -> Self {
        ItemReader {
            cache: BlockCache::new(store, options, disk),
            limits: CoalesceLimits::default(),
        }
    }

    /// Counters of GETs, cache and prefetch behaviour.
    pub fn stats(&self) -> &std::sync::Arc<Stats> {
        self.cache.stats()
    }

    /// Reads up to `len` bytes of `item` from `offset`; fewer only at the
    /// end of the item.
    pub async fn read(&self, item: &Item, offset: u64, len: u64) -> Result<Bytes, ReadError> {
        let end = item.size.min(offset.saturating_add(len));
        if offset >= end {
            return Ok(Bytes::new());
        }
        let mut map = ByteRangeMap::new(end - offset);
        let mut objects = Vec::new();
        match &item.source {
            ItemSource::Whole { object } => {
                objects.push(ObjectRef {
                    path: object.clone(),
                    len: item.size,
                    drop_behind: true,
                });
                map.push_data(0, end - offset, SourceIndex(0), offset);
            }
            ItemSource::Packed {
                pack,
                offset: base,
                pack_len,
            } => {
                objects.push(ObjectRef {
                    path: pack.clone(),
                    len: *pack_len,
                    drop_behind: false,
                });
                map.push_data(0, end - offset, SourceIndex(0), base + offset);
            }
            ItemSource::Chunked { chunks } => {
                let mut chunk_start = 0u64;
                for chunk in chunks.iter() {
                    let chunk_end = chunk_start + chunk.size;
                    let (from, to) = (offset.max(chunk_start), end.min(chunk_end));
                    if from < to {
                        map.push_data(
                            from - offset,
                            to - from,
                            SourceIndex(objects.len()),
                            from - chunk_start,
                        );
                        objects.push(ObjectRef {
                            path: chunk.object.clone(),
                            len: chunk.size,
                            drop_behind: true,
                        });
                    }
                    chunk_start = chunk_end;
                }
            }
        }
        let program = ByteRangeProgram::compile(&map.normalize()?, &self.limits);
        let mut cached = Vec::with_capacity(objects.len());
        for object in objects {
            cached.push(CachedObject {
                cache: &self.cache,
                object,
            });
        }
        let mut sources: Vec<&dyn SeekableSource> = Vec::with_capacity(cached.len());
        for source in &cached {
            sources.push(source);
        }
        Ok(program.execute(&sources).await?)
    }
}

/// A store object seen through the block cache.
struct CachedObject<'a> {
    cache: &'a BlockCache,
    object: ObjectRef,
}

impl SeekableSource for CachedObject<'_> {
    fn len(&self) -> u64 {
        self.object.len
    }

    fn read_at(&self, offset: u64, len: u64) -> BoxFuture<'_, Result<Bytes, SourceError>> {
        async move {
            self.cache
                .read(&self.object, offset, len)
                .await
                .map_err(|e| SourceError::Other(Box::new(e)))
        }
        .boxed()
    }
}
