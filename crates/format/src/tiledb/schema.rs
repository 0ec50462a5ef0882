//! The array schema (`__schema/<timestamped name>`): one generic tile
//! whose bytes [`ArraySchema::decode`] reads (format_spec/array_schema.md).

use super::datatype::Datatype;
use super::filter::FilterPipeline;
use super::{Cursor, TileDbError};

/// `cell_val_num` of a var-sized attribute or dimension.
pub const VAR_NUM: u32 = u32::MAX;

/// Dense arrays store every cell of a space tile; sparse ones only the
/// cells written, `capacity` per tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArrayType {
    Dense,
    Sparse,
}

/// A tile or cell order (`tiledb_layout_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    RowMajor,
    ColMajor,
    GlobalOrder,
    Unordered,
    Hilbert,
}

impl Layout {
    fn from_code(code: u8) -> Result<Layout, TileDbError> {
        Ok(match code {
            0 => Layout::RowMajor,
            1 => Layout::ColMajor,
            2 => Layout::GlobalOrder,
            3 => Layout::Unordered,
            4 => Layout::Hilbert,
            _ => {
                return Err(TileDbError::invalid(
                    "array schema",
                    format!("unknown layout code {code}"),
                ))
            }
        })
    }
}

/// A dimension of the domain.
#[derive(Clone, Debug, PartialEq)]
pub struct Dimension {
    pub name: String,
    pub datatype: Datatype,
    /// Values per coordinate; [`VAR_NUM`] for strings.
    pub cell_val_num: u32,
    /// The dimension's own filters; empty means the schema's coordinate
    /// filters apply ([`ArraySchema::dimension_filters`]).
    pub filters: FilterPipeline,
    /// Low and high bound, each one value; empty for string dimensions.
    pub domain: Vec<u8>,
    /// The space tile extent, one value; `None` for string dimensions.
    pub tile_extent: Option<Vec<u8>>,
}

impl Dimension {
    /// Whether coordinates are var-sized (strings).
    pub fn is_var(&self) -> bool {
        self.cell_val_num == VAR_NUM
    }

    /// Bytes of one coordinate of a fixed-size dimension.
    pub fn cell_size(&self) -> usize {
        self.datatype.size().unwrap_or(1) * self.cell_val_num as usize
    }
}

/// An attribute.
#[derive(Clone, Debug, PartialEq)]
pub struct Attribute {
    pub name: String,
    pub datatype: Datatype,
    /// Values per cell; [`VAR_NUM`] for var-sized attributes.
    pub cell_val_num: u32,
    pub filters: FilterPipeline,
    /// What a dense read returns for a cell no fragment wrote.
    pub fill: Vec<u8>,
    pub nullable: bool,
    /// Whether such a cell of a nullable attribute is valid (1) or null (0).
    pub fill_validity: u8,
}

impl Attribute {
    /// Whether cells are var-sized.
    pub fn is_var(&self) -> bool {
        self.cell_val_num == VAR_NUM
    }

    /// Bytes of one cell of a fixed-size attribute.
    pub fn cell_size(&self) -> usize {
        self.datatype.size().unwrap_or(1) * self.cell_val_num as usize
    }
}

/// An array schema, as far as reading cells needs it. Dimension labels,
/// enumerations and the current domain are read past, not kept.
#[derive(Clone, Debug, PartialEq)]
pub struct ArraySchema {
    pub version: u32,
    pub allows_dups: bool,
    pub array_type: ArrayType,
    pub tile_order: Layout,
    pub cell_order: Layout,
    /// Cells per tile of a sparse fragment.
    pub capacity: u64,
    pub coords_filters: FilterPipeline,
    pub offsets_filters: FilterPipeline,
    pub validity_filters: FilterPipeline,
    pub dimensions: Vec<Dimension>,
    pub attributes: Vec<Attribute>,
}

/// The oldest schema version read: 10 put schemas in `__schema/`, 12
/// fragments in `__fragments/`, the layout this reader lists.
pub(crate) const MIN_VERSION: u32 = 12;

/// The newest format version this reader knows.
pub(crate) const MAX_VERSION: u32 = 23;

impl ArraySchema {
    /// The schema in `bytes`, a schema file's generic tile decoded.
    pub fn decode(bytes: &[u8]) -> Result<ArraySchema, TileDbError> {
        let c = &mut Cursor::new(bytes, "array schema");
        let version = c.u32()?;
        if !(MIN_VERSION..=MAX_VERSION).contains(&version) {
            return Err(TileDbError::invalid(
                "array schema",
                format!("format version {version}: packfs reads versions {MIN_VERSION} to {MAX_VERSION}"),
            ));
        }
        let allows_dups = c.u8()? != 0;
        let array_type = match c.u8()? {
            0 => ArrayType::Dense,
            1 => ArrayType::Sparse,
            code => {
                return Err(TileDbError::invalid(
                    "array schema",
                    format!("unknown array type {code}"),
                ))
            }
        };
        let tile_order = Layout::from_code(c.u8()?)?;
        let cell_order = Layout::from_code(c.u8()?)?;
        let capacity = c.u64()?;
        let coords_filters = FilterPipeline::read(c)?;
        let offsets_filters = FilterPipeline::read(c)?;
        let validity_filters = FilterPipeline::read(c)?;
        let dimension_count = c.count_u32(1)?;
        if dimension_count == 0 {
            return Err(TileDbError::invalid("array schema", "no dimensions"));
        }
        let mut dimensions = Vec::with_capacity(dimension_count);
        for _ in 0..dimension_count {
            dimensions.push(decode_dimension(c)?);
        }
        let attribute_count = c.count_u32(1)?;
        let mut attributes = Vec::with_capacity(attribute_count);
        for _ in 0..attribute_count {
            attributes.push(decode_attribute(c, version)?);
        }
        if version >= 18 && c.u32()? != 0 {
            return Err(TileDbError::invalid(
                "array schema",
                "dimension labels are not supported by packfs",
            ));
        }
        Ok(ArraySchema {
            version,
            allows_dups,
            array_type,
            tile_order,
            cell_order,
            capacity,
            coords_filters,
            offsets_filters,
            validity_filters,
            dimensions,
            attributes,
        })
    }

    /// The filters of dimension `index`'s tiles: its own, or the schema's
    /// coordinate filters where it has none (as TileDB applies them).
    pub fn dimension_filters(&self, index: usize) -> &FilterPipeline {
        let own = &self.dimensions[index].filters;
        match own.filters.is_empty() {
            true => &self.coords_filters,
            false => own,
        }
    }
}

fn name(c: &mut Cursor<'_>, what: &str) -> Result<String, TileDbError> {
    let len = c.u32()? as usize;
    let bytes = c.take(len)?;
    String::from_utf8(bytes.to_vec())
        .map_err(|_| TileDbError::invalid("array schema", format!("{what} name is not UTF-8")))
}

fn decode_dimension(c: &mut Cursor<'_>) -> Result<Dimension, TileDbError> {
    let name = name(c, "dimension")?;
    let datatype = Datatype(c.u8()?);
    let value_size = datatype.size()?;
    let cell_val_num = c.u32()?;
    let filters = FilterPipeline::read(c)?;
    let domain_size = c.u64()?;
    let domain = c.take_u64_len(domain_size)?.to_vec();
    let var = cell_val_num == VAR_NUM;
    let fixed_size = value_size * cell_val_num.max(1) as usize;
    if (var && !domain.is_empty()) || (!var && domain.len() != 2 * fixed_size) {
        return Err(TileDbError::invalid(
            "array schema",
            format!("dimension {name:?}: domain of {domain_size} bytes"),
        ));
    }
    let tile_extent = match c.u8()? {
        0 => Some(c.take(fixed_size)?.to_vec()),
        _ => None,
    };
    Ok(Dimension {
        name,
        datatype,
        cell_val_num,
        filters,
        domain,
        tile_extent,
    })
}

fn decode_attribute(c: &mut Cursor<'_>, version: u32) -> Result<Attribute, TileDbError> {
    let name = name(c, "attribute")?;
    let datatype = Datatype(c.u8()?);
    datatype.size()?;
    let cell_val_num = c.u32()?;
    if cell_val_num == 0 {
        return Err(TileDbError::invalid(
            "array schema",
            format!("attribute {name:?}: zero values per cell"),
        ));
    }
    let filters = FilterPipeline::read(c)?;
    let fill_size = c.u64()?;
    let fill = c.take_u64_len(fill_size)?.to_vec();
    let nullable = c.u8()? != 0;
    let fill_validity = c.u8()?;
    if version >= 17 {
        let _order = c.u8()?;
    }
    // The spec's attribute table leaves this out: since version 20 an
    // attribute names its enumeration (empty for none).
    if version >= 20 {
        let len = c.u32()? as usize;
        c.take(len)?;
    }
    Ok(Attribute {
        name,
        datatype,
        cell_val_num,
        filters,
        fill,
        nullable,
        fill_validity,
    })
}
