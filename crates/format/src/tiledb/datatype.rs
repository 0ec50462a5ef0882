//! The types of a TileDB field's values: the datatype code, and what a
//! tile's filters need to know of its cells.

use super::TileDbError;

/// A TileDB datatype (`tiledb_datatype_t`), as stored in schemas and tile
/// headers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Datatype(pub u8);

impl Datatype {
    // The codes packfs refers to by name; the others are handled by
    // number (`size`, `is_integer`).
    pub const INT32: Datatype = Datatype(0);
    pub const INT64: Datatype = Datatype(1);
    pub const FLOAT32: Datatype = Datatype(2);
    pub const FLOAT64: Datatype = Datatype(3);
    pub const CHAR: Datatype = Datatype(4);
    pub const INT8: Datatype = Datatype(5);
    pub const UINT8: Datatype = Datatype(6);
    pub const INT16: Datatype = Datatype(7);
    pub const UINT16: Datatype = Datatype(8);
    pub const UINT32: Datatype = Datatype(9);
    pub const UINT64: Datatype = Datatype(10);
    pub const STRING_ASCII: Datatype = Datatype(11);
    pub const STRING_UTF8: Datatype = Datatype(12);
    pub const BLOB: Datatype = Datatype(40);
    pub const BOOL: Datatype = Datatype(41);

    /// Bytes of one value, or an error for a code TileDB does not define.
    pub fn size(self) -> Result<usize, TileDbError> {
        Ok(match self.0 {
            0 | 2 | 9 => 4,
            1 | 3 | 10 => 8,
            4..=6 | 11 | 12 | 40 | 41 | 42 | 43 => 1,
            7 | 8 | 13 | 15 => 2,
            14 | 16 => 4,
            17 => 1,
            18..=39 => 8,
            code => {
                return Err(TileDbError::invalid(
                    "datatype",
                    format!("unknown datatype code {code}"),
                ))
            }
        })
    }

    /// Whether values are integers (signed or not) of the datatype's size,
    /// as the integer filters (delta, bit-width reduction) treat them.
    /// Dates and times are 64-bit signed integers.
    pub fn is_integer(self) -> bool {
        matches!(self.0, 0 | 1 | 5..=10 | 18..=39)
    }

    /// Whether integer values are signed.
    pub fn is_signed(self) -> bool {
        matches!(self.0, 0 | 1 | 5 | 7 | 18..=39)
    }
}

/// What the filters of a tile need to know of its values, as TileDB's
/// reader has it: the filters' element width comes from the datatype, RLE
/// repeats whole cells, and some filters changed with the format version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TileType {
    /// The field's datatype (the first filter's input type).
    pub datatype: Datatype,
    /// Bytes per cell: the datatype size times the values per cell for a
    /// fixed-size field, the datatype size for var-sized data.
    pub cell_size: u64,
    /// Format version of the fragment (or generic tile) holding the tile.
    pub format_version: u32,
    /// Whether this is the data tile of a var-sized field, where TileDB
    /// gives strings a layout of their own under RLE and dictionary.
    pub var_data: bool,
}

impl TileType {
    /// A tile of a fixed-size attribute or dimension.
    pub fn fixed(datatype: Datatype, cell_size: u64, format_version: u32) -> TileType {
        TileType {
            datatype,
            cell_size,
            format_version,
            var_data: false,
        }
    }

    /// The data tile of a var-sized attribute or dimension.
    pub fn var_data(datatype: Datatype, format_version: u32) -> Result<TileType, TileDbError> {
        Ok(TileType {
            datatype,
            cell_size: datatype.size()? as u64,
            format_version,
            var_data: true,
        })
    }

    /// The offsets tile of a var-sized field: one `u64` per cell, each
    /// relative to the start of the var tile; the reader's extra closing
    /// offset is not stored.
    pub fn offsets(format_version: u32) -> TileType {
        TileType::fixed(Datatype::UINT64, 8, format_version)
    }

    /// The validity tile of a nullable field: one `u8` per cell.
    pub fn validity(format_version: u32) -> TileType {
        TileType::fixed(Datatype::UINT8, 1, format_version)
    }
}
