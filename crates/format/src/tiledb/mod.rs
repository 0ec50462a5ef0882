//! TileDB arrays: codecs for the files of an array written by TileDB
//! (format versions in `docs/TILEDB.md`), pure bytes in and values out.
//!
//! The public format specification is TileDB's `format_spec/` (array
//! schema, fragment, tile, generic tile, filter pipeline, timestamped
//! name). Everything TileDB writes is little-endian; `Cursor` reads it
//! and names the structure and offset of whatever is short or malformed.

use thiserror::Error;

mod datatype;
pub mod filter;
pub mod fragment;
pub mod schema;
pub mod tile;

pub use datatype::{Datatype, TileType};
pub use filter::{Filter, FilterPipeline};
pub use tile::{decode_generic_tile, decode_tile, GenericTile};

/// Why bytes of a TileDB array could not be decoded. `what` names the
/// structure (and where known the file and offset) so a message points at
/// the exact place.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TileDbError {
    /// The bytes end before the structure does.
    #[error("{what}: truncated: needs {needed} bytes at offset {offset}, {available} there")]
    Truncated {
        what: String,
        offset: usize,
        needed: usize,
        available: usize,
    },
    /// A field holds a value this reader does not accept.
    #[error("{what}: {detail}")]
    Invalid { what: String, detail: String },
    /// A filter this reader does not implement.
    #[error("{what}: filter {name} (type {code}) is not supported by packfs")]
    UnsupportedFilter {
        what: String,
        code: u8,
        name: &'static str,
    },
    /// A checksum filter's stored digest does not match the bytes.
    #[error("{what}: {algorithm} checksum mismatch")]
    Checksum {
        what: String,
        algorithm: &'static str,
    },
}

impl TileDbError {
    pub fn invalid(what: impl Into<String>, detail: impl Into<String>) -> Self {
        TileDbError::Invalid {
            what: what.into(),
            detail: detail.into(),
        }
    }

    /// The same error with `context` put in front of what it names (the
    /// file a tile came from, say).
    pub fn within(self, context: &str) -> Self {
        let prefix = |what: String| format!("{context}: {what}");
        match self {
            TileDbError::Truncated {
                what,
                offset,
                needed,
                available,
            } => TileDbError::Truncated {
                what: prefix(what),
                offset,
                needed,
                available,
            },
            TileDbError::Invalid { what, detail } => TileDbError::Invalid {
                what: prefix(what),
                detail,
            },
            TileDbError::UnsupportedFilter { what, code, name } => TileDbError::UnsupportedFilter {
                what: prefix(what),
                code,
                name,
            },
            TileDbError::Checksum { what, algorithm } => TileDbError::Checksum {
                what: prefix(what),
                algorithm,
            },
        }
    }
}

/// A little-endian reader over a byte slice that fails with
/// [`TileDbError::Truncated`] instead of panicking.
#[derive(Clone, Debug)]
pub(crate) struct Cursor<'a> {
    bytes: &'a [u8],
    offset: usize,
    what: &'a str,
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `bytes`, which hold `what`.
    pub(crate) fn new(bytes: &'a [u8], what: &'a str) -> Self {
        Cursor {
            bytes,
            offset: 0,
            what,
        }
    }

    /// Bytes consumed so far.
    pub(crate) fn offset(&self) -> usize {
        self.offset
    }

    /// Bytes not yet consumed.
    pub(crate) fn remaining(&self) -> usize {
        self.bytes.len() - self.offset
    }

    /// The next `len` bytes.
    pub(crate) fn take(&mut self, len: usize) -> Result<&'a [u8], TileDbError> {
        if len > self.remaining() {
            return Err(TileDbError::Truncated {
                what: self.what.to_string(),
                offset: self.offset,
                needed: len,
                available: self.remaining(),
            });
        }
        let taken = &self.bytes[self.offset..self.offset + len];
        self.offset += len;
        Ok(taken)
    }

    /// The next `len` bytes, `len` read from the bytes (so checked against
    /// what is there before anything is allocated).
    pub(crate) fn take_u64_len(&mut self, len: u64) -> Result<&'a [u8], TileDbError> {
        self.take(usize::try_from(len).unwrap_or(usize::MAX))
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], TileDbError> {
        Ok(self.take(N)?.try_into().expect("took N bytes"))
    }

    /// The next byte.
    pub(crate) fn u8(&mut self) -> Result<u8, TileDbError> {
        Ok(self.take(1)?[0])
    }

    /// The next little-endian `u32`.
    pub(crate) fn u32(&mut self) -> Result<u32, TileDbError> {
        self.array().map(u32::from_le_bytes)
    }

    /// The next little-endian `i32`.
    pub(crate) fn i32(&mut self) -> Result<i32, TileDbError> {
        self.array().map(i32::from_le_bytes)
    }

    /// The next little-endian `u64`.
    pub(crate) fn u64(&mut self) -> Result<u64, TileDbError> {
        self.array().map(u64::from_le_bytes)
    }

    /// A `u64` count of items of at least `item_size` bytes each, checked
    /// against the bytes left so a corrupt count cannot make a reader
    /// allocate or loop past the data.
    pub(crate) fn count(&mut self, item_size: usize) -> Result<usize, TileDbError> {
        let at = self.offset;
        let count = self.u64()?;
        self.check_count(count, item_size, at)
    }

    /// As [`Cursor::count`] for a `u32` count.
    pub(crate) fn count_u32(&mut self, item_size: usize) -> Result<usize, TileDbError> {
        let at = self.offset;
        let count = u64::from(self.u32()?);
        self.check_count(count, item_size, at)
    }

    fn check_count(&self, count: u64, item_size: usize, at: usize) -> Result<usize, TileDbError> {
        let fits = count
            .checked_mul(item_size.max(1) as u64)
            .is_some_and(|bytes| bytes <= self.remaining() as u64);
        if !fits {
            return Err(TileDbError::invalid(
                self.what,
                format!(
                    "count {count} at offset {at} needs more than the {} bytes left",
                    self.remaining()
                ),
            ));
        }
        Ok(count as usize)
    }
}
