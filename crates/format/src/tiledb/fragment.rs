//! Fragments: their timestamped names, the footer of
//! `__fragment_metadata.tdb`, and the lists of tile offsets and sizes its
//! generic tiles hold (format_spec/fragment.md).

use super::datatype::TileType;
use super::filter::FilterPipeline;
use super::schema::{ArraySchema, MAX_VERSION, MIN_VERSION};
use super::{Cursor, TileDbError};

/// How the tiles of one data file decode: the file's filter pipeline and
/// what the tile holds.
#[derive(Clone, Debug)]
pub struct TileCodec {
    pub pipeline: FilterPipeline,
    pub tile: TileType,
}

impl TileCodec {
    /// Stored tile `data` unfiltered to exactly `len` bytes.
    pub fn decode(&self, data: &[u8], len: u64) -> Result<Vec<u8>, TileDbError> {
        let max = usize::try_from(len).unwrap_or(usize::MAX);
        let decoded = super::tile::decode_tile(data, &self.pipeline, &self.tile, max)?;
        if decoded.len() as u64 != len {
            return Err(TileDbError::invalid(
                "tile",
                format!(
                    "decodes to {} bytes, not the {len} its fragment says",
                    decoded.len()
                ),
            ));
        }
        Ok(decoded)
    }
}

/// A timestamped name `__t1_t2_uuid[_v]`: a fragment's folder, a commit
/// file's stem, a schema file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimestampedName {
    /// First and last write time, milliseconds since the epoch.
    pub t1: u64,
    pub t2: u64,
    pub uuid: String,
    /// The format version, where the name has one.
    pub version: Option<u32>,
}

impl TimestampedName {
    /// `name` parsed, or `None` if it is not a timestamped name (readers
    /// skip files they do not recognise).
    pub fn parse(name: &str) -> Option<TimestampedName> {
        let mut parts = name.strip_prefix("__")?.split('_');
        let t1 = parts.next()?.parse().ok()?;
        let t2 = parts.next()?.parse().ok()?;
        let uuid = parts.next()?.to_string();
        let version = match parts.next() {
            Some(v) => Some(v.parse().ok()?),
            None => None,
        };
        if parts.next().is_some() || uuid.is_empty() || t1 > t2 {
            return None;
        }
        Some(TimestampedName {
            t1,
            t2,
            uuid,
            version,
        })
    }
}

/// What errors in a footer name.
const FOOTER: &str = "fragment metadata footer";

/// A range of one dimension: fixed-size dimensions hold two values of its
/// type, string dimensions two strings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Range1D {
    pub low: Vec<u8>,
    pub high: Vec<u8>,
}

/// The footer of a fragment's metadata file: what the fragment holds and
/// where the generic tiles that index its data files start.
///
/// Per-field vectors are indexed as TileDB indexes them: attributes in
/// schema order, then the legacy coordinates slot, then dimensions, then
/// the timestamp and delete-metadata attributes the fragment includes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Footer {
    pub version: u32,
    /// The schema file (in `__schema/`) the fragment was written with.
    pub schema_name: String,
    pub dense: bool,
    /// `None` for an empty fragment.
    pub non_empty_domain: Option<Vec<Range1D>>,
    pub sparse_tile_num: u64,
    /// Cells in the last tile of a sparse fragment.
    pub last_tile_cell_num: u64,
    pub includes_timestamps: bool,
    pub includes_delete_meta: bool,
    /// Each field's data file size (of its offsets file if var-sized).
    pub file_sizes: Vec<u64>,
    pub file_var_sizes: Vec<u64>,
    pub file_validity_sizes: Vec<u64>,
    /// Offsets in the metadata file of each field's generic tiles.
    pub tile_offsets: Vec<u64>,
    pub tile_var_offsets: Vec<u64>,
    pub tile_var_sizes: Vec<u64>,
    pub tile_validity_offsets: Vec<u64>,
}

impl Footer {
    /// Index of attribute `i` in the per-field vectors.
    pub fn attribute_field(i: usize) -> usize {
        i
    }

    /// Index of dimension `i` in the per-field vectors of a fragment of
    /// `schema` (past the legacy coordinates slot).
    pub fn dimension_field(schema: &ArraySchema, i: usize) -> usize {
        schema.attributes.len() + 1 + i
    }

    /// The footer's bytes at the end of `file` (a whole metadata file):
    /// its last `u64` is the footer's length.
    fn bytes(file: &[u8]) -> Result<&[u8], TileDbError> {
        let Some(len_at) = file.len().checked_sub(8) else {
            return Err(TileDbError::invalid(FOOTER, "file shorter than 8 bytes"));
        };
        let footer_len = u64::from_le_bytes(file[len_at..].try_into().expect("8 bytes"));
        let start = usize::try_from(footer_len)
            .ok()
            .and_then(|len| len_at.checked_sub(len))
            .ok_or_else(|| {
                TileDbError::invalid(
                    FOOTER,
                    format!(
                        "length {footer_len} exceeds the file's {} bytes",
                        file.len()
                    ),
                )
            })?;
        Ok(&file[start..len_at])
    }

    /// The name of the schema the fragment of metadata `file` was written
    /// with, read before the schema is known: it follows the version.
    pub fn schema_name(file: &[u8]) -> Result<String, TileDbError> {
        let c = &mut Cursor::new(Footer::bytes(file)?, FOOTER);
        c.u32()?;
        let len = c.u64()?;
        Ok(String::from_utf8_lossy(c.take_u64_len(len)?).into_owned())
    }

    /// The footer at the end of `file`, a whole metadata file of a
    /// fragment of `schema`.
    pub fn decode(file: &[u8], schema: &ArraySchema) -> Result<Footer, TileDbError> {
        const WHAT: &str = FOOTER;
        let c = &mut Cursor::new(Footer::bytes(file)?, WHAT);
        let version = c.u32()?;
        if !(MIN_VERSION..=MAX_VERSION).contains(&version) {
            return Err(TileDbError::invalid(
                WHAT,
                format!("format version {version}: packfs reads versions {MIN_VERSION} to {MAX_VERSION}"),
            ));
        }
        let name_len = c.u64()?;
        let schema_name = String::from_utf8_lossy(c.take_u64_len(name_len)?).into_owned();
        let dense = c.u8()? != 0;
        let null_domain = c.u8()? != 0;
        let domain = decode_mbr(c, schema)?;
        let non_empty_domain = (!null_domain).then_some(domain);
        let sparse_tile_num = c.u64()?;
        let last_tile_cell_num = c.u64()?;
        let includes_timestamps = c.u8()? != 0;
        let includes_delete_meta = c.u8()? != 0;
        let fields = schema.attributes.len()
            + 1
            + schema.dimensions.len()
            + usize::from(includes_timestamps)
            + 2 * usize::from(includes_delete_meta);
        let mut list = || (0..fields).map(|_| c.u64()).collect::<Result<Vec<_>, _>>();
        let file_sizes = list()?;
        let file_var_sizes = list()?;
        let file_validity_sizes = list()?;
        let _rtree_offset = c.u64()?;
        let mut list = || (0..fields).map(|_| c.u64()).collect::<Result<Vec<_>, _>>();
        let tile_offsets = list()?;
        let tile_var_offsets = list()?;
        let tile_var_sizes = list()?;
        let tile_validity_offsets = list()?;
        // Mins, maxes, sums and null counts are statistics a reader of
        // cells does not need, as are the fragment-wide ones and the
        // processed conditions; version 23's optional sections likewise.
        Ok(Footer {
            version,
            schema_name,
            dense,
            non_empty_domain,
            sparse_tile_num,
            last_tile_cell_num,
            includes_timestamps,
            includes_delete_meta,
            file_sizes,
            file_var_sizes,
            file_validity_sizes,
            tile_offsets,
            tile_var_offsets,
            tile_var_sizes,
            tile_validity_offsets,
        })
    }
}

/// An MBR: one range per dimension of `schema`.
fn decode_mbr(c: &mut Cursor<'_>, schema: &ArraySchema) -> Result<Vec<Range1D>, TileDbError> {
    schema
        .dimensions
        .iter()
        .map(|dim| {
            if dim.is_var() {
                let range_len = c.u64()?;
                let low_len = c.u64()?;
                let bytes = c.take_u64_len(range_len)?;
                let low_len = usize::try_from(low_len)
                    .ok()
                    .filter(|&l| l <= bytes.len())
                    .ok_or_else(|| {
                        TileDbError::invalid("MBR", format!("minimum of {low_len} bytes"))
                    })?;
                Ok(Range1D {
                    low: bytes[..low_len].to_vec(),
                    high: bytes[low_len..].to_vec(),
                })
            } else {
                let size = dim.cell_size();
                Ok(Range1D {
                    low: c.take(size)?.to_vec(),
                    high: c.take(size)?.to_vec(),
                })
            }
        })
        .collect()
}

/// The `u64` values of a tile-offsets or tile-sizes generic tile (its
/// decoded bytes): a count, then the values.
pub fn decode_u64_list(bytes: &[u8], what: &str) -> Result<Vec<u64>, TileDbError> {
    let c = &mut Cursor::new(bytes, what);
    let count = c.count(8)?;
    (0..count).map(|_| c.u64()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamped_names_parse_and_reject() {
        let name =
            TimestampedName::parse("__1000_2000_1631a6b2a9975836b1b801bad3151c44_22").unwrap();
        assert_eq!((name.t1, name.t2, name.version), (1000, 2000, Some(22)));
        assert_eq!(name.uuid, "1631a6b2a9975836b1b801bad3151c44");
        let schema = TimestampedName::parse("__17_17_5ae1e99e").unwrap();
        assert_eq!(schema.version, None);
        for bad in [
            "",
            "__",
            "__1_2",
            "_1_2_u_3",
            "__2_1_u_22",
            "__1_2_u_x",
            "__1_2_u_22_9",
        ] {
            assert_eq!(TimestampedName::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn u64_lists_check_their_count() {
        let mut bytes = 2u64.to_le_bytes().to_vec();
        bytes.extend(7u64.to_le_bytes());
        bytes.extend(9u64.to_le_bytes());
        assert_eq!(decode_u64_list(&bytes, "offsets").unwrap(), vec![7, 9]);
        bytes[0] = 3;
        let err = decode_u64_list(&bytes, "offsets").unwrap_err();
        assert!(err.to_string().contains("offsets: count 3"), "{err}");
    }
}
