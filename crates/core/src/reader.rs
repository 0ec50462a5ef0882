//! Reads of file bytes: [`Extents`] (a byte-range map over sources) are
//! compiled and executed by the byte-range engine, store objects through
//! the shared block cache. Every file of a mount is read here: dataset
//! items and catalog files alike.

use std::ops::{Deref, Range};

use bytes::Bytes;
use futures::future::{BoxFuture, FutureExt};
use packfs_format::engine::{
    ByteRangeProgram, CoalesceLimits, ExecuteError, MapError, MemorySource, NormalizedMap, Run,
    SeekableSource, SegmentKind, SourceError, Target,
};
use thiserror::Error;

use crate::cache::map_ahead::MapAhead;
use crate::cache::{BlockCache, CacheOptions, DiskCache, ObjectRef, RecordRef, Stats};
use crate::dataset::ItemData;
use crate::extents::{Extents, Source};
use crate::store::Store;

/// Why file bytes could not be read.
#[derive(Debug, Error)]
#[non_exhaustive]
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
}

impl Reader {
    /// A reader over `store`; with `disk`, cached blocks also persist there.
    pub fn new(store: Store, options: CacheOptions, disk: Option<DiskCache>) -> Self {
        Reader {
            cache: BlockCache::new(store, options, disk),
            limits: CoalesceLimits::default(),
            ahead: Default::default(),
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
    pub async fn read_item(
        &self,
        item: &ItemData,
        offset: u64,
        len: u64,
    ) -> Result<Bytes, ReadError> {
        self.read(Extents::of_item(item, offset..offset.saturating_add(len)))
            .await
    }

    /// Notes a read of `range` of file `file` (a key the caller chooses,
    /// `size` bytes long) whose map is known past the read (a catalog
    /// file: a shuffled shard's next members, wherever they are stored).
    /// When the read continues a front-to-back run, the next window of the
    /// file, whose extents `extents_of` gives, is fetched ahead.
    pub fn follow(
        &self,
        file: u64,
        range: std::ops::Range<u64>,
        size: u64,
        extents_of: impl FnOnce(std::ops::Range<u64>) -> Option<Extents>,
    ) {
        let options = self.cache.options();
        if !options.prefetch {
            return;
        }
        if let Some(ahead) = self.ahead.on_read(options, file, range, size) {
            if let Some(extents) = extents_of(ahead) {
                self.read_ahead(extents);
            }
        }
    }

    /// Starts fetching the store bytes `extents` map, in source order
    /// (objects by path, ranges by offset, neighbours merged), into the
    /// block cache for the reads that follow. Other sources are left to
    /// those reads.
    fn read_ahead(&self, extents: Extents) {
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
        let gap = self.cache.options().block_size;
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
        let sources = self.sources(extents.sources);
        let sources: Vec<&dyn SeekableSource> = sources.iter().map(|s| &**s).collect();
        let program = self.compile(map, &sources)?;
        Ok(program.execute(&sources).await?)
    }

    /// The bytes `extents` describe, as [`Reader::read`] gives them, but
    /// written into `buf` (grown if it is shorter) where that saves a
    /// copy. Whatever `buf` held is overwritten, so one buffer can serve
    /// read after read.
    pub async fn read_into<'b>(
        &self,
        extents: Extents,
        buf: &'b mut Vec<u8>,
    ) -> Result<ReadBytes<'b>, ReadError> {
        let map = extents.map.normalize()?;
        let sources = self.sources(extents.sources);
        let sources: Vec<&dyn SeekableSource> = sources.iter().map(|s| &**s).collect();
        let program = self.compile(map, &sources)?;
        // One contiguous read is never more copies as the source's own
        // bytes than written into `buf`: from one cached block, a record,
        // memory or an uncached random read's GET it is a slice, no copy
        // at all; across cached blocks the cache joins them, one copy, as
        // many as `buf` would take. Several runs are written into `buf`:
        // one copy, where a buffer of their own was zeroed, then filled
        // from reads that had themselves joined blocks.
        if let [Run::Contiguous { .. }] = program.runs() {
            return Ok(ReadBytes::Shared(program.execute(&sources).await?));
        }
        let len = usize::try_from(program.dest_len()).map_err(|_| ExecuteError::TooLarge {
            dest_len: program.dest_len(),
        })?;
        if buf.len() < len {
            buf.resize(len, 0);
        }
        let dest = &mut buf[..len];
        program.execute_into(&sources, dest).await?;
        Ok(ReadBytes::Written(dest))
    }

    /// The engine's sources for `sources`: store objects and records read
    /// through the block cache.
    pub fn sources(&self, sources: Vec<Source>) -> Vec<Box<dyn SeekableSource + '_>> {
        sources
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
            .collect()
    }

    /// The program of `map` over `sources`, once they are known to hold
    /// every byte it reads.
    fn compile(
        &self,
        map: NormalizedMap,
        sources: &[&dyn SeekableSource],
    ) -> Result<ByteRangeProgram, ReadError> {
        let lens: Vec<u64> = sources.iter().map(|s| s.len()).collect();
        map.check_sources(&lens)?;
        Ok(ByteRangeProgram::compile(&map, &self.limits))
    }
}

/// The bytes of a read: shared with the buffer that held them, or written
/// into the caller's.
#[derive(Debug)]
pub enum ReadBytes<'b> {
    /// A source's own bytes (a slice of a cached block, a decoded record,
    /// memory), not copied.
    Shared(Bytes),
    /// The start of the caller's buffer.
    Written(&'b [u8]),
}

impl ReadBytes<'_> {
    /// The bytes in a buffer of their own: shared as they are, or copied
    /// out of the caller's buffer.
    pub fn to_bytes(&self) -> Bytes {
        match self {
            ReadBytes::Shared(bytes) => bytes.clone(),
            ReadBytes::Written(bytes) => Bytes::copy_from_slice(bytes),
        }
    }
}

impl Deref for ReadBytes<'_> {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            ReadBytes::Shared(bytes) => bytes,
            ReadBytes::Written(bytes) => bytes,
        }
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

    /// Copies each target straight out of the cached blocks: `read_at`
    /// would first join a read spanning several blocks into a new buffer.
    fn read_scatter_at<'a>(
        &'a self,
        src: Range<u64>,
        targets: Vec<Target<'a>>,
    ) -> BoxFuture<'a, Result<u64, SourceError>> {
        async move {
            let blocks = self
                .cache
                .read_blocks(&self.object, src.start, src.end - src.start)
                .await
                .map_err(|e| SourceError::Other(Box::new(e)))?;
            let held = blocks.range();
            if held != src {
                return Ok(held.end - held.start);
            }
            for target in targets {
                let len = target.dest.len();
                let copied = blocks.copy_to(target.src_offset, target.dest);
                if copied < len {
                    return Ok(target.src_offset + copied as u64 - src.start);
                }
            }
            Ok(src.end - src.start)
        }
        .boxed()
    }
}

/// A compressed record, decoded through the block cache. Its reads are
/// slices of the decoded record, so the provided `read_scatter_at` already
/// copies each byte once.
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
    use packfs_format::engine::{ByteRangeMap, SourceIndex, Uncovered};

    /// A reader (with 4 KiB blocks) over objects holding `a` and `b`, and
    /// refs to them.
    async fn two_objects(a: &[u8], b: &[u8]) -> (Reader, ObjectRef, ObjectRef) {
        let store = Store::from_object_store(Arc::new(InMemory::new()), Path::default(), "memory");
        let mut refs = Vec::new();
        for (name, bytes) in [("a", a), ("b", b)] {
            let path = Arc::new(Path::from(name));
            let len = bytes.len() as u64;
            let bytes = Bytes::copy_from_slice(bytes);
            store.put_overwrite(&path, bytes).await.unwrap();
            refs.push(ObjectRef {
                path,
                len,
                drop_behind: false,
                then: None,
            });
        }
        let options = CacheOptions {
            block_size: 4096,
            ..CacheOptions::default()
        };
        let b = refs.pop().unwrap();
        let a = refs.pop().unwrap();
        (Reader::new(store, options, None), a, b)
    }

    /// A read of several runs is written into the caller's buffer, over
    /// whatever it held, with the bytes [`Reader::read`] gives; a read of
    /// one run shares the source's bytes.
    #[tokio::test]
    async fn reads_of_several_runs_are_written_into_the_callers_buffer() {
        let a: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
        let b: Vec<u8> = (0..9_000u32).map(|i| (i % 239) as u8 ^ 0x5a).collect();
        let (reader, object_a, object_b) = two_objects(&a, &b).await;
        // Pieces crossing 4 KiB blocks, PAD between them, and memory.
        let mut map = ByteRangeMap::new(12_000);
        map.push_data(0, 5_000, SourceIndex(0), 3_000)
            .push_pad(5_000, 100)
            .push_data(5_100, 4_000, SourceIndex(1), 4_000)
            .push_pad(9_100, 400)
            .push_data(9_500, 2_400, SourceIndex(0), 12_000)
            .push_data(11_900, 100, SourceIndex(2), 0);
        let extents = Extents {
            map,
            sources: vec![
                Source::Object(object_a.clone()),
                Source::Object(object_b),
                Source::Memory(Bytes::from(vec![7; 100])),
            ],
        };
        let expected = reader.read(extents.clone()).await.unwrap();
        assert_eq!(&expected[..5_000], &a[3_000..8_000]);
        assert_eq!(&expected[5_000..5_100], [0; 100]);
        let mut buf = vec![0xff; 20_000];
        let got = reader.read_into(extents.clone(), &mut buf).await.unwrap();
        assert!(matches!(got, ReadBytes::Written(_)));
        assert_eq!(&got[..], &expected[..]);
        let mut short = Vec::new();
        let got = reader.read_into(extents, &mut short).await.unwrap();
        assert_eq!(&got[..], &expected[..]);

        let mut map = ByteRangeMap::new(6_000);
        map.push_data(0, 6_000, SourceIndex(0), 1_000);
        let one_run = Extents {
            map,
            sources: vec![Source::Object(object_a)],
        };
        let got = reader.read_into(one_run, &mut buf).await.unwrap();
        assert!(matches!(got, ReadBytes::Shared(_)));
        assert_eq!(&got[..], &a[1_000..7_000]);
    }

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
