//! Dataset items as extents: bytes of an item become a map over the
//! objects that hold them (a range of a pack, the whole object, or a span
//! of chunk objects).

use std::ops::Range;
use std::sync::Arc;

use super::{Extents, Source};
use crate::cache::ObjectRef;
use crate::dataset::{ItemData, ItemSource};
use crate::engine::{ByteRangeMap, SourceIndex};

/// Bytes `range` of `item` (clamped to its size).
pub fn item_extents(item: &ItemData, range: Range<u64>) -> Extents {
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
            let chunk_object = |chunk: &crate::dataset::ChunkRef| ObjectRef {
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
