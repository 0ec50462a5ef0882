//! The read seam: turns "bytes `[offset, offset+len)` of an item" into
//! ranged GETs of the objects that hold them.
//!
//! This is the first, simple path: one GET per object span, no cache, no
//! prefetch. The ByteRangeMap engine, block cache and prefetcher replace the
//! body of [`ItemReader::read`] without changing its callers.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use object_store::path::Path;
use thiserror::Error;

use crate::dataset::{Item, ItemSource};
use crate::store::{Store, StoreError};

/// Why item bytes could not be read.
#[derive(Debug, Error)]
pub enum ReadError {
    /// The object's real length disagrees with the metadata (seed 0022 §3.4).
    #[error("object {object} is {actual} bytes long, but the dataset's entries say it must be {expected}")]
    LengthMismatch {
        object: String,
        expected: u64,
        actual: u64,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// One contiguous piece of a read: `len` bytes at `offset` of `object`,
/// whose total length must be `object_len`.
struct Span<'a> {
    object: &'a Arc<Path>,
    object_len: u64,
    offset: u64,
    len: u64,
}

/// Reads item bytes from the store.
#[derive(Clone, Debug)]
pub struct ItemReader {
    store: Store,
}

impl ItemReader {
    pub fn new(store: Store) -> Self {
        ItemReader { store }
    }

    /// Reads up to `len` bytes of `item` from `offset`; fewer only at the
    /// end of the item.
    pub async fn read(&self, item: &Item, offset: u64, len: u64) -> Result<Bytes, ReadError> {
        let spans = spans(item, offset, len);
        let reads = spans.iter().map(|span| self.read_span(span));
        let mut parts = futures::future::try_join_all(reads).await?;
        if parts.len() == 1 {
            return Ok(parts.pop().expect("one part"));
        }
        let mut out = BytesMut::with_capacity(parts.iter().map(Bytes::len).sum());
        parts.iter().for_each(|p| out.extend_from_slice(p));
        Ok(out.freeze())
    }

    async fn read_span(&self, span: &Span<'_>) -> Result<Bytes, ReadError> {
        let mismatch = |actual| ReadError::LengthMismatch {
            object: span.object.to_string(),
            expected: span.object_len,
            actual,
        };
        match self
            .store
            .get_range(span.object, span.offset..span.offset + span.len)
            .await
        {
            Ok(read) if read.object_size != span.object_len => Err(mismatch(read.object_size)),
            Ok(read) if read.bytes.len() as u64 != span.len => Err(mismatch(read.object_size)),
            Ok(read) => Ok(read.bytes),
            // A range past the end of a short object fails in the backend;
            // report the real cause when it is a wrong length.
            Err(err) => match self.store.size(span.object).await {
                Ok(Some(actual)) if actual != span.object_len => Err(mismatch(actual)),
                _ => Err(err.into()),
            },
        }
    }
}

/// Splits a read of an item into per-object spans, clamped to the item.
fn spans(item: &Item, offset: u64, len: u64) -> Vec<Span<'_>> {
    let end = item.size.min(offset.saturating_add(len));
    if offset >= end {
        return Vec::new();
    }
    match &item.source {
        ItemSource::Whole { object } => vec![Span {
            object,
            object_len: item.size,
            offset,
            len: end - offset,
        }],
        ItemSource::Packed {
            pack,
            offset: base,
            pack_len,
        } => vec![Span {
            object: pack,
            object_len: *pack_len,
            offset: base + offset,
            len: end - offset,
        }],
        ItemSource::Chunked { chunks } => {
            let mut spans = Vec::new();
            let mut chunk_start = 0u64;
            for chunk in chunks.iter() {
                let chunk_end = chunk_start + chunk.size;
                let (from, to) = (offset.max(chunk_start), end.min(chunk_end));
                if from < to {
                    spans.push(Span {
                        object: &chunk.object,
                        object_len: chunk.size,
                        offset: from - chunk_start,
                        len: to - from,
                    });
                }
                chunk_start = chunk_end;
            }
            spans
        }
    }
}
