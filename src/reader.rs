//! Reads of file bytes: [`Extents`] (a byte-range map over sources) are
//! compiled and executed by the byte-range engine, store objects through
//! the shared block cache. Every file of a mount is read here: dataset
//! items and catalog files alike.

use bytes::Bytes;
use futures::future::{BoxFuture, FutureExt};
use thiserror::Error;

use crate::cache::map_ahead::MapAhead;
use crate::cache::{BlockCache, CacheOptions, DiskCache, ObjectRef, RecordRef, Stats};
use crate::catalog::dataset::item_extents;
use crate::catalog::{Extents, Source};
use crate::dataset::Item;
use crate::engine::{
    ByteRangeProgram, CoalesceLimits, ExecuteError, MapError, MemorySource, SeekableSource,
    SegmentKind, SourceError,
};
use crate::store::Store;

/// Why file bytes could not be read.
#[derive(Debug, Error)]
pub enum ReadError {
    /// The metadata does not describe the bytes completely.
    #[error(transparent)]
    Map(#[from] MapError),
    /// A source could not deliver its bytes (missing, wrong length, store
    /// failure).
    #[error(transparent)]
    Execute(#[from] ExecuteError),
}

/// Reads file bytes through the block cache.
#[derive(Clone)]
pub struct Reader {
    cache: BlockCache,
    limits: CoalesceLimits,
    ahead: std::sync::Arc<MapAhead>,
    options: std::sync::Arc<CacheOptions>,
}

impl Reader {
    /// A reader over `store`; with `disk`, cached blocks also persist there.
    pub fn new(store: Store, options: CacheOptions, disk: Option<DiskCache>) -> Self {
        Reader {
            cache: BlockCache::new(store, options.clone(), disk),
            limits: CoalesceLimits::default(),
            ahead: Default::default(),
            options: std::sync::Arc::new(options),
        }
    }

    /// The block cache reads go through (catalogs decode tiles with it).
    pub fn cache(&self) -> &BlockCache {
        &self.cache
    }

    /// Counters of GETs, cache and prefetch behaviour.
    pub fn stats(&self) -> &std::sync::Arc<Stats> {
        self.cache.stats()
    }

    /// Up to `len` bytes of `item` from `offset`; fewer only at its end.
    pub async fn read_item(&self, item: &Item, offset: u64, len: u64) -> Result<Bytes, ReadError> {
        self.read(item_extents(item, offset..offset.saturating_add(len)))
            .await
    }

    /// Notes a read of `range` of file `file` (a key the caller chooses,
    /// `size` bytes long) whose map is known ahead (a catalog file); returns
    /// the range to read ahead with [`Self::read_ahead`] when the read
    /// continues a front-to-back run.
    pub fn follow(
        &self,
        file: u64,
        range: std::ops::Range<u64>,
        size: u64,
    ) -> Option<std::ops::Range<u64>> {
        if !self.options.prefetch {
            return None;
        }
        self.ahead.on_read(&self.options, file, range, size)
    }

    /// Starts fetching the store bytes `extents` map, in source order
    /// (objects by path, ranges by offset, neighbours merged), into the
    /// block cache for the reads that follow. Other sources are left to
    /// those reads.
    pub fn read_ahead(&self, extents: Extents) {
        let Ok(map) = extents.map.normalize() else {
            return; // the demand read reports it
        };
        let mut ranges: Vec<(&ObjectRef, std::ops::Range<u64>)> = map
            .segments()
            .iter()
            .filter_map(|segment| {
                let SegmentKind::Data { source, src_offset } = segment.kind else {
                    return None;
                };
                let Some(Source::Object(object)) = extents.sources.get(source.0) else {
                    return None;
                };
                let len = segment.dest.end - segment.dest.start;
                Some((object, src_offset..src_offset + len))
            })
            .collect();
        ranges.sort_by(|(a, ra), (b, rb)| a.path.cmp(&b.path).then(ra.start.cmp(&rb.start)));
        // Ranges of one object less than a block apart are one fetch: the
        // cache fetches whole blocks anyway.
        let gap = self.options.block_size;
        let mut merged: Option<(&ObjectRef, std::ops::Range<u64>)> = None;
        for (object, range) in ranges {
            match &mut merged {
                Some((o, r)) if o.path == object.path && range.start <= r.end + gap => {
                    r.end = r.end.max(range.end)
                }
                _ => {
                    if let Some((o, r)) = merged.replace((object, range)) {
                        self.cache.prefetch(o, r);
                    }
                }
            }
        }
        if let Some((o, r)) = merged {
            self.cache.prefetch(o, r);
        }
    }

    /// The bytes `extents` describe. Sources that do not hold what the
    /// map reads are [`MapError::Unavailable`] before anything is read.
    pub async fn read(&self, extents: Extents) -> Result<Bytes, ReadError> {
        let map = extents.map.normalize()?;
        let sources: Vec<Box<dyn SeekableSource + '_>> = extents
            .sources
            .into_iter()
            .map(|source| -> Box<dyn SeekableSource + '_> {
                match source {
                    Source::Object(object) => Box::new(CachedObject {
                        cache: &self.cache,
                        object,
                    }),
                    Source::Memory(bytes) => Box::new(MemorySource::new(bytes)),
                    Source::Record(record) => Box::new(CachedRecord {
                        cache: &self.cache,
                        record,
                    }),
                }
            })
            .collect();
        let sources: Vec<&dyn SeekableSource> = sources.iter().map(|s| &**s).collect();
        let lens: Vec<u64> = sources.iter().map(|s| s.len()).collect();
        map.check_sources(&lens)?;
        let program = ByteRangeProgram::compile(&map, &self.limits);
        if program.dest_len() == 0 {
            return Ok(Bytes::new());
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

/// A compressed record, decoded through the block cache.
struct CachedRecord<'a> {
    cache: &'a BlockCache,
    record: std::sync::Arc<RecordRef>,
}

impl SeekableSource for CachedRecord<'_> {
    fn len(&self) -> u64 {
        self.record.len
    }

    fn read_at(&self, offset: u64, len: u64) -> BoxFuture<'_, Result<Bytes, SourceError>> {
        async move {
            self.cache
                .read_record(&self.record, offset, len)
                .await
                .map_err(|e| SourceError::Other(Box::new(e)))
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering::Relaxed;
    use std::sync::Arc;

    use object_store::memory::InMemory;
    use object_store::path::Path;

    use super::*;
    use crate::engine::{ByteRangeMap, SourceIndex, Uncovered};

    /// Bytes a source does not hold are unavailable before any read: the
    /// error lists each uncovered destination range and what it needed,
    /// and nothing was fetched.
    #[tokio::test]
    async fn missing_coverage_is_unavailable_before_any_read() {
        let store = Store::from_object_store(Arc::new(InMemory::new()), Path::default(), "memory");
        let path = Arc::new(Path::from("pack"));
        store
            .put_overwrite(&path, Bytes::from_static(b"0123456789"))
            .await
            .unwrap();
        let reader = Reader::new(store, CacheOptions::default(), None);
        let object = ObjectRef {
            path,
            len: 10,
            drop_behind: false,
            then: None,
        };
        let mut map = ByteRangeMap::new(8);
        map.push_data(0, 4, SourceIndex(0), 8)
            .push_pad(4, 2)
            .push_data(6, 2, SourceIndex(1), 4);
        let extents = Extents {
            map,
            sources: vec![
                Source::Object(object),
                Source::Memory(Bytes::from_static(b"abc")),
            ],
        };
        let err = reader.read(extents).await.unwrap_err();
        let ReadError::Map(MapError::Unavailable { missing }) = &err else {
            panic!("{err}");
        };
        let needed = |dest, source, src, source_len| Uncovered {
            dest,
            source_index: SourceIndex(source),
            src,
            source_len,
        };
        assert_eq!(
            missing,
            &[needed(2..4, 0, 10..12, 10), needed(6..8, 1, 4..6, 3)]
        );
        assert_eq!(reader.stats().gets.load(Relaxed), 0);
    }
}
