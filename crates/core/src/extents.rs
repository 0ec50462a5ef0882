//! The one description of a file's bytes: [`Extents`], a
//! [`ByteRangeMap`] from the file's bytes to [`Source`]s (a range of a store
//! object, bytes held in memory, a decoded record) with explicit PAD.
//! Dataset items ([`Extents::of_item`]) and catalog files alike are read
//! through it by the reader.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use packfs_format::engine::{ByteRangeMap, SourceIndex};

use crate::cache::{ObjectRef, RecordRef};
use crate::dataset::{ChunkRef, ItemData, ItemSource};

/// Where bytes of a file come from. One file may mix kinds.
#[derive(Clone, Debug)]
pub enum Source {
    /// A store object, read through the shared block cache.
    Object(ObjectRef),
    /// Bytes held in memory (generated text, headers).
    Memory(Bytes),
    /// A compressed record, decoded once and cached decoded.
    Record(Arc<RecordRef>),
}

/// Bytes `range` of a file: `map` (destination offset 0 is `range.start`)
/// over `sources`, which its segments name by index.
#[derive(Clone, Debug)]
pub struct Extents {
    pub map: ByteRangeMap,
    pub sources: Vec<Source>,
}

impl Extents {
    /// `len` bytes of one in-memory buffer from `offset` (clamped to it).
    pub(crate) fn of_memory(bytes: Bytes, range: Range<u64>) -> Extents {
        let len = bytes.len() as u64;
        let (start, end) = (range.start.min(len), range.end.min(len));
        let mut map = ByteRangeMap::new(end - start);
        map.push_data(0, end - start, SourceIndex(0), start);
        Extents {
            map,
            sources: vec![Source::Memory(bytes)],
        }
    }

    /// Adds `other`'s bytes at `dest_offset` of these (within this map's
    /// length), its sources after these.
    pub fn splice(&mut self, dest_offset: u64, other: Extents) {
        self.map.splice(dest_offset, other.map, self.sources.len());
        self.sources.extend(other.sources);
    }

    /// Bytes `range` of dataset item `item` (clamped to its size): a range
    /// of its pack, its whole object, or a span of its chunk objects.
    pub fn of_item(item: &ItemData, range: Range<u64>) -> Extents {
        let end = item.size.min(range.end);
        let offset = range.start.min(end);
        let mut map = ByteRangeMap::new(end - offset);
        let mut sources = Vec::new();
        let mut object = |object: ObjectRef| {
            sources.push(Source::Object(object));
            SourceIndex(sources.len() - 1)
        };
        match &item.source {
            ItemSource::Whole { object: path } => {
                let source = object(ObjectRef {
                    path: path.clone(),
                    len: item.size,
                    drop_behind: true,
                    then: None,
                });
                map.push_data(0, end - offset, source, offset);
            }
            ItemSource::Packed {
                pack,
                offset: base,
                pack_len,
            } => {
                let source = object(ObjectRef {
                    path: pack.clone(),
                    len: *pack_len,
                    drop_behind: false,
                    then: None,
                });
                map.push_data(0, end - offset, source, base + offset);
            }
            ItemSource::Chunked { chunks } => {
                let chunk_object = |chunk: &ChunkRef| ObjectRef {
                    path: chunk.object.clone(),
                    len: chunk.size,
                    drop_behind: true,
                    then: None,
                };
                let mut chunk_start = 0u64;
                for (i, chunk) in chunks.iter().enumerate() {
                    let chunk_end = chunk_start + chunk.size;
                    let (from, to) = (offset.max(chunk_start), end.min(chunk_end));
                    if from < to {
                        let source = object(ObjectRef {
                            then: chunks.get(i + 1).map(|next| Arc::new(chunk_object(next))),
                            ..chunk_object(chunk)
                        });
                        map.push_data(from - offset, to - from, source, from - chunk_start);
                    }
                    chunk_start = chunk_end;
                }
            }
        }
        Extents { map, sources }
    }
}
