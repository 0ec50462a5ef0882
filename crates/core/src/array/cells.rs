//! Which cells a read of an array sees and what they are called.
//!
//! A sparse array's cells are found by decoding its coordinate tiles
//! (once, on first use): every fragment's cells, merged into the array's
//! global order, a newer fragment's cell replacing an older one's at the
//! same coordinates. A dense array's cells follow from its domain and
//! its fragments' non-empty domains alone (`DenseGrid`).

use std::cmp::Reverse;
use std::ops::Range;

use bytes::Bytes;
use packfs_format::tiledb::schema::{ArraySchema, Dimension, Layout};
use packfs_format::tiledb::Datatype;

use super::{int_value, Array, ArrayError, Field, TileKind};
use crate::cache::BlockCache;

/// Where a cell is: fragment, tile, and position in the tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CellLoc {
    pub fragment: u32,
    pub tile: u32,
    pub pos: u32,
}

/// One part of a cell's sort key in global order.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum KeyPart {
    Int(i128),
    /// A float's bits, mapped so that integer order is numeric order.
    Float(u64),
    Bytes(Box<[u8]>),
}

/// Most cells of a dense array shown as files (its `.raw` files have no
/// limit): listing them takes memory per cell.
const MAX_DENSE_CELLS: u64 = 1 << 25;

/// A cell as found in a fragment: its global-order key, its write time
/// and its fragment (the newest first among equal keys), where it is and
/// its name.
type Found = (Vec<KeyPart>, Reverse<(u64, u32)>, CellLoc, Box<str>);

/// The cells a read of an array sees: a sparse array's in global order,
/// a dense array's (those its fragments wrote) row-major.
pub struct Cells {
    pub locs: Vec<CellLoc>,
    /// Each cell's name (`cell_name`), parallel to `locs`.
    pub names: Vec<Box<str>>,
    /// Indices of `names` in name order, for lookups.
    by_name: Vec<u32>,
}

impl Cells {
    /// Decodes every coordinate tile of `array` through `cache`.
    pub async fn load(array: &Array, cache: &BlockCache) -> Result<Cells, ArrayError> {
        let schema = array.schema();
        // A fragment stores its cells in global order, each once unless
        // it was consolidated with timestamps (then every version of a
        // cell, with its write time): with one fragment of the first kind
        // there is nothing to merge, so no keys are built.
        let fragments = array.fragments();
        let merge = fragments.len() > 1 || fragments.iter().any(|f| f.footer.includes_timestamps);
        let mut cells: Vec<Found> = Vec::new();
        for (f, fragment) in array.fragments().iter().enumerate() {
            for t in 0..fragment.tile_count() {
                let count = array.cells_in_tile(f, t) as usize;
                let mut coords: Vec<Vec<Vec<u8>>> = Vec::with_capacity(schema.dimensions.len());
                for (d, dim) in schema.dimensions.iter().enumerate() {
                    coords.push(dimension_values(array, cache, f, t, d, dim, count).await?);
                }
                let times = match fragment.footer.includes_timestamps {
                    true => {
                        let tile = read_tile(array, cache, f, Field::Timestamps, TileKind::Data, t);
                        let tile = tile.await?;
                        let times = tile.chunks_exact(8);
                        times
                            .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
                            .collect()
                    }
                    false => vec![fragment.stamp.t2; count],
                };
                for pos in 0..count {
                    // Only a fragment consolidated with timestamps holds
                    // cells written after the read's time.
                    if !array.sees(times[pos]) {
                        continue;
                    }
                    let values: Vec<&[u8]> = coords.iter().map(|c| c[pos].as_slice()).collect();
                    let loc = CellLoc {
                        fragment: f as u32,
                        tile: t as u32,
                        pos: pos as u32,
                    };
                    let name = cell_name(schema, &values).into_boxed_str();
                    let key = match merge {
                        true => global_key(schema, &values),
                        false => Vec::new(),
                    };
                    cells.push((key, Reverse((times[pos], f as u32)), loc, name));
                }
            }
        }
        if merge {
            cells.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
            if !schema.allows_dups {
                cells.dedup_by(|later, kept| later.0 == kept.0);
            }
        }
        let mut locs = Vec::with_capacity(cells.len());
        let mut names: Vec<Box<str>> = Vec::with_capacity(cells.len());
        let mut repeats = 0;
        for (i, (_, _, loc, name)) in cells.into_iter().enumerate() {
            locs.push(loc);
            // Duplicates (arrays that allow them) share coordinates; the
            // second and later get `~N` so every file has its own name.
            repeats = match names.last() {
                Some(last) if i > 0 && last.split('~').next() == Some(&*name) => repeats + 1,
                _ => 0,
            };
            names.push(match repeats {
                0 => name,
                n => format!("{name}~{n}").into_boxed_str(),
            });
        }
        Ok(Cells::ordered(locs, names))
    }

    /// The cells a dense array's fragments wrote, row-major over their
    /// bounding box, each from the newest fragment that wrote it. No tile
    /// is read: where a cell is follows from the domains.
    pub(crate) fn dense(array: &Array, layout: &DenseLayout) -> Result<Cells, ArrayError> {
        let total = layout.cells();
        if total > MAX_DENSE_CELLS {
            return Err(ArrayError::Unsupported {
                location: array.location().to_string(),
                detail: format!(
                    "the fragments of this dense array span {total} cells, more than the \
                     {MAX_DENSE_CELLS} packfs shows as files (its .raw files are there)"
                ),
            });
        }
        let (mut locs, mut names) = (Vec::new(), Vec::new());
        let Some(bounds) = &layout.bounds else {
            return Ok(Cells::ordered(locs, names));
        };
        let schema = array.schema();
        let last = bounds.len() - 1;
        let row_len = (bounds[last].1 - bounds[last].0 + 1) as u64;
        for row in 0..total / row_len {
            let coords = coords_of(bounds, row * row_len);
            for (from, to, fragment) in layout.paint(&coords, bounds[last].1) {
                let Some(f) = fragment else { continue };
                let region = layout.regions[f].as_ref().expect("painted by a region");
                let mut at = coords.clone();
                for x in from..=to {
                    at[last] = x;
                    let (tile, pos) = layout.grid.locate(region, &at);
                    locs.push(CellLoc {
                        fragment: f as u32,
                        tile: tile as u32,
                        pos: pos as u32,
                    });
                    // Each coordinate in its dimension's type (the low
                    // bytes of two's complement).
                    let values: Vec<Vec<u8>> = (schema.dimensions.iter().zip(&at))
                        .map(|(d, v)| v.to_le_bytes()[..d.cell_size()].to_vec())
                        .collect();
                    let values: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
                    names.push(cell_name(schema, &values).into_boxed_str());
                }
            }
        }
        Ok(Cells::ordered(locs, names))
    }

    /// Cells in order, with the lookup by name.
    fn ordered(locs: Vec<CellLoc>, names: Vec<Box<str>>) -> Cells {
        let names: Vec<Box<str>> = names.into_iter().map(fit).collect();
        let mut by_name: Vec<u32> = (0..names.len() as u32).collect();
        by_name.sort_by(|&a, &b| names[a as usize].cmp(&names[b as usize]));
        Cells {
            locs,
            names,
            by_name,
        }
    }

    /// The index of the cell called `name`.
    pub fn find(&self, name: &str) -> Option<usize> {
        let at = self
            .by_name
            .binary_search_by(|&i| (*self.names[i as usize]).cmp(name))
            .ok()?;
        Some(self.by_name[at] as usize)
    }
}

/// The `count` coordinates of dimension `d` in tile `t` of fragment `f`,
/// one value each.
async fn dimension_values(
    array: &Array,
    cache: &BlockCache,
    f: usize,
    t: usize,
    d: usize,
    dim: &Dimension,
    count: usize,
) -> Result<Vec<Vec<u8>>, ArrayError> {
    let field = Field::Dimension(d);
    let data = read_tile(array, cache, f, field, TileKind::Data, t).await?;
    if !dim.is_var() {
        let size = dim.cell_size();
        return Ok(data
            .chunks_exact(size)
            .take(count)
            .map(<[u8]>::to_vec)
            .collect());
    }
    let values = read_tile(array, cache, f, field, TileKind::Var, t).await?;
    let bounds =
        var_bounds(&data, values.len() as u64, count).map_err(|detail| ArrayError::Format {
            object: format!(
                "{} (dimension {:?}, tile {t})",
                array.fragments()[f].name,
                dim.name
            ),
            source: packfs_format::tiledb::TileDbError::invalid("cell offsets", detail),
        })?;
    Ok(bounds
        .into_iter()
        .map(|r| values[r.start as usize..r.end as usize].to_vec())
        .collect())
}

/// A whole decoded tile.
pub(crate) async fn read_tile(
    array: &Array,
    cache: &BlockCache,
    f: usize,
    field: Field,
    kind: TileKind,
    t: usize,
) -> Result<Bytes, ArrayError> {
    let record = array.tile(f, field, kind, t)?;
    Ok(cache.read_record(&record, 0, record.len).await?)
}

/// The byte range of each of `count` cells in a var tile of `var_len`
/// bytes, from the tile's offsets (`u64` each, the first 0), checked.
pub(crate) fn var_bounds(
    offsets: &[u8],
    var_len: u64,
    count: usize,
) -> Result<Vec<Range<u64>>, String> {
    if offsets.len() < count * 8 {
        return Err(format!(
            "{} bytes hold fewer than {count} offsets",
            offsets.len()
        ));
    }
    let starts: Vec<u64> = offsets
        .chunks_exact(8)
        .take(count)
        .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
        .collect();
    let mut bounds = Vec::with_capacity(count);
    for (i, &start) in starts.iter().enumerate() {
        let end = starts.get(i + 1).copied().unwrap_or(var_len);
        if start > end || end > var_len {
            return Err(format!(
                "cell {i} spans {start}..{end} of a {var_len}-byte tile"
            ));
        }
        bounds.push(start..end);
    }
    Ok(bounds)
}

/// The cell's sort key in the array's global order: the space tile it
/// lies in (in tile order), then its coordinates (in cell order).
fn global_key(schema: &ArraySchema, values: &[&[u8]]) -> Vec<KeyPart> {
    let dims = &schema.dimensions;
    let order = |layout: Layout| -> Vec<usize> {
        match layout {
            Layout::ColMajor => (0..dims.len()).rev().collect(),
            _ => (0..dims.len()).collect(),
        }
    };
    let mut key = Vec::with_capacity(2 * dims.len());
    for d in order(schema.tile_order) {
        key.push(tile_part(&dims[d], values[d]));
    }
    for d in order(schema.cell_order) {
        key.push(value_part(dims[d].datatype, values[d], dims[d].is_var()));
    }
    key
}

/// The index of the space tile holding `value` along `dim` (0 for
/// dimensions without tiles).
fn tile_part(dim: &Dimension, value: &[u8]) -> KeyPart {
    let Some(extent) = dim.tile_extent.as_deref() else {
        return KeyPart::Int(0);
    };
    let low = &dim.domain[..extent.len()];
    if dim.datatype.is_integer() {
        let extent = int_value(dim.datatype, extent).max(1);
        let v = int_value(dim.datatype, value) - int_value(dim.datatype, low);
        return KeyPart::Int(v.div_euclid(extent));
    }
    match (
        float(dim.datatype, value),
        float(dim.datatype, low),
        float(dim.datatype, extent),
    ) {
        (Some(v), Some(low), Some(extent)) if extent > 0.0 => {
            KeyPart::Float(float_order(((v - low) / extent).floor()))
        }
        _ => KeyPart::Int(0),
    }
}

fn value_part(datatype: Datatype, value: &[u8], var: bool) -> KeyPart {
    if var {
        return KeyPart::Bytes(value.into());
    }
    if datatype.is_integer() {
        return KeyPart::Int(int_value(datatype, value));
    }
    match float(datatype, value) {
        Some(v) => KeyPart::Float(float_order(v)),
        None => KeyPart::Bytes(value.into()),
    }
}

fn float(datatype: Datatype, bytes: &[u8]) -> Option<f64> {
    match datatype {
        Datatype::FLOAT32 => Some(f32::from_le_bytes(bytes.try_into().ok()?) as f64),
        Datatype::FLOAT64 => Some(f64::from_le_bytes(bytes.try_into().ok()?)),
        _ => None,
    }
}

/// `v`'s bits mapped so that unsigned order is numeric order.
fn float_order(v: f64) -> u64 {
    let bits = v.to_bits();
    match bits >> 63 {
        1 => !bits,
        _ => bits | (1 << 63),
    }
}

/// A cell's file name: its coordinates, joined by `_`. Integers are
/// decimal, zero-padded to the width of the dimension's widest bound so
/// names sort in coordinate order (negative values get a `-`); floats
/// are written shortest-exact; strings are percent-escaped except for
/// ASCII letters, digits, `-` and `.`, and a string of only dots (or an
/// empty one) is escaped whole so that no name is `.`, `..` or empty.
pub(crate) fn cell_name(schema: &ArraySchema, values: &[&[u8]]) -> String {
    let mut name = String::new();
    for (d, (dim, value)) in schema.dimensions.iter().zip(values).enumerate() {
        if d > 0 {
            name.push('_');
        }
        coordinate_name(dim, value, &mut name);
    }
    name
}

/// A cell name longer than this is cut ([`fit`]); a file name is at most
/// 255 bytes, the rest is room for an extension.
pub(crate) const MAX_CELL_NAME: usize = 200;
/// What a cut name keeps of the whole.
const CUT_PREFIX: usize = MAX_CELL_NAME - 1 - HASH_HEX;
/// Hex digits of BLAKE3 that end a cut name.
const HASH_HEX: usize = 32;

/// `name`, or if longer than [`MAX_CELL_NAME`] bytes its first bytes, `~`
/// and the start of the BLAKE3 hash of the whole name in hex: unique, as
/// no coordinate puts a `~` there (strings escape it, and `~N` of
/// duplicates ends a name).
fn fit(name: Box<str>) -> Box<str> {
    if name.len() <= MAX_CELL_NAME {
        return name;
    }
    let hash = blake3::hash(name.as_bytes()).to_hex();
    // Names are ASCII: any byte is a character boundary.
    format!("{}~{}", &name[..CUT_PREFIX], &hash[..HASH_HEX]).into_boxed_str()
}

/// `v` as the shortest decimal that reads back exactly: in exponent form
/// (`1e-7`, `5e-324`, `1.5e300`) below 1e-4 and from 1e16 on in magnitude,
/// as Rust's `{:?}` switches, so no float takes more than about 24 bytes.
fn float_name<F>(v: F, magnitude: f64, out: &mut String)
where
    F: std::fmt::Display + std::fmt::LowerExp,
{
    use std::fmt::Write;
    let _ = match magnitude != 0.0 && !(1e-4..1e16).contains(&magnitude) {
        true => write!(out, "{v:e}"),
        false => write!(out, "{v}"),
    };
}

fn coordinate_name(dim: &Dimension, value: &[u8], out: &mut String) {
    use std::fmt::Write;
    if dim.is_var() {
        escape(value, out);
        return;
    }
    if dim.datatype.is_integer() {
        let size = dim.cell_size();
        let width = [&dim.domain[..size], &dim.domain[size..]]
            .iter()
            .map(|b| int_value(dim.datatype, b).unsigned_abs().to_string().len())
            .max()
            .unwrap_or(1);
        let v = int_value(dim.datatype, value);
        let sign = if v < 0 { "-" } else { "" };
        let _ = write!(out, "{sign}{:0width$}", v.unsigned_abs());
        return;
    }
    match float(dim.datatype, value) {
        Some(v) if dim.datatype == Datatype::FLOAT32 => float_name(v as f32, v.abs(), out),
        Some(v) => float_name(v, v.abs(), out),
        None => escape(value, out),
    }
}

fn escape(value: &[u8], out: &mut String) {
    use std::fmt::Write;
    let only_dots = value.iter().all(|&b| b == b'.');
    if value.is_empty() {
        out.push('%');
        return;
    }
    for &b in value {
        let plain = (b.is_ascii_alphanumeric() || b == b'-' || b == b'.') && !only_dots;
        match plain {
            true => out.push(b as char),
            false => {
                let _ = write!(out, "%{b:02X}");
            }
        }
    }
}

/// The geometry of a dense array: the domain, its space tiles, and how a
/// fragment's tiles and cells are laid out.
pub(crate) struct DenseGrid {
    /// Per dimension: domain low bound, high bound and tile extent.
    dims: Vec<(i128, i128, i128)>,
    tile_order: Layout,
    cell_order: Layout,
}

/// A fragment's box of cells, per dimension `low..=high`.
pub(crate) type Region = Vec<(i128, i128)>;

impl DenseGrid {
    /// The grid of `schema`'s domain (integer dimensions).
    pub(crate) fn new(schema: &ArraySchema) -> DenseGrid {
        let dims = schema
            .dimensions
            .iter()
            .map(|d| {
                let size = d.cell_size();
                let low = int_value(d.datatype, &d.domain[..size]);
                let high = int_value(d.datatype, &d.domain[size..]);
                let extent = d
                    .tile_extent
                    .as_deref()
                    .map_or(high - low + 1, |e| int_value(d.datatype, e))
                    .max(1);
                (low, high, extent)
            })
            .collect();
        DenseGrid {
            dims,
            tile_order: schema.tile_order,
            cell_order: schema.cell_order,
        }
    }

    /// The region of an MBR (integer values of each dimension).
    pub(crate) fn region(
        &self,
        schema: &ArraySchema,
        mbr: &[packfs_format::tiledb::fragment::Range1D],
    ) -> Region {
        schema
            .dimensions
            .iter()
            .zip(mbr)
            .map(|(d, r)| {
                (
                    int_value(d.datatype, &r.low),
                    int_value(d.datatype, &r.high),
                )
            })
            .collect()
    }

    /// Space tiles of the fragment with region `region`, per dimension:
    /// the first tile index and the count.
    fn tile_span(&self, region: &Region) -> Vec<(i128, i128)> {
        self.dims
            .iter()
            .zip(region)
            .map(|(&(low, _, extent), &(a, b))| {
                let first = (a - low).div_euclid(extent);
                let last = (b - low).div_euclid(extent);
                (first, last - first + 1)
            })
            .collect()
    }

    /// How many tiles a fragment with region `region` holds.
    pub(crate) fn tile_count(&self, region: &Region) -> u64 {
        self.tile_span(region)
            .iter()
            .map(|&(_, n)| n as u64)
            .fold(1, u64::saturating_mul)
    }

    /// The tile of the fragment with `region` holding cell `coords`, and
    /// the cell's position in it.
    pub(crate) fn locate(&self, region: &Region, coords: &[i128]) -> (u64, u64) {
        let span = self.tile_span(region);
        let dims = self.dims.len();
        let tile_index: Vec<i128> = (0..dims)
            .map(|d| (coords[d] - self.dims[d].0).div_euclid(self.dims[d].2) - span[d].0)
            .collect();
        let within: Vec<i128> = (0..dims)
            .map(|d| (coords[d] - self.dims[d].0).rem_euclid(self.dims[d].2))
            .collect();
        let tile = linear(
            &tile_index,
            &span.iter().map(|s| s.1).collect::<Vec<_>>(),
            self.tile_order,
        );
        let extents: Vec<i128> = self.dims.iter().map(|d| d.2).collect();
        let pos = linear(&within, &extents, self.cell_order);
        (tile as u64, pos as u64)
    }

    /// Cells from `coords` on along the last dimension that lie in the
    /// same tile, and whether they are consecutive in it (row-major cell
    /// order) or one tile extent of the first dimensions apart.
    pub(crate) fn run_in_tile(&self, coords: &[i128]) -> (i128, bool) {
        let last = self.dims.len() - 1;
        let (low, _, extent) = self.dims[last];
        let left = extent - (coords[last] - low).rem_euclid(extent);
        (
            left,
            self.cell_order != Layout::ColMajor || self.dims.len() == 1,
        )
    }

    /// The distance, in cells, between neighbours along the last dimension
    /// inside a tile in column-major cell order.
    pub(crate) fn col_major_stride(&self) -> u64 {
        self.dims[..self.dims.len() - 1]
            .iter()
            .map(|d| d.2 as u64)
            .product()
    }
}

/// A dense array's fragments as regions of its domain.
pub(crate) struct DenseLayout {
    pub grid: DenseGrid,
    /// Per fragment (oldest first), the box it wrote.
    pub regions: Vec<Option<Region>>,
    /// The box of all fragments: what `.raw` files hold, row-major.
    pub bounds: Option<Region>,
}

impl DenseLayout {
    /// The geometry of `array`'s fragments, checked against their tile
    /// counts.
    pub(crate) fn of(array: &Array) -> Result<DenseLayout, ArrayError> {
        let schema = array.schema();
        let grid = DenseGrid::new(schema);
        let mut regions = Vec::new();
        let mut bounds: Option<Region> = None;
        for fragment in array.fragments() {
            let Some(mbr) = &fragment.footer.non_empty_domain else {
                regions.push(None);
                continue;
            };
            let region = grid.region(schema, mbr);
            // A non-empty domain outside the array's domain (or upside
            // down) is damage, and would make no sense of the tile grid.
            let inside = region
                .iter()
                .zip(&grid.dims)
                .all(|(&(a, b), &(low, high, _))| low <= a && a <= b && b <= high);
            if !inside {
                return Err(ArrayError::Format {
                    object: format!("{}/__fragment_metadata.tdb", fragment.name),
                    source: packfs_format::tiledb::TileDbError::invalid(
                        "fragment metadata footer",
                        format!("non-empty domain {region:?} is not inside the array's domain"),
                    ),
                });
            }
            let expected = grid.tile_count(&region);
            if expected != fragment.tile_count() as u64 {
                return Err(ArrayError::Format {
                    object: format!("{}/__fragment_metadata.tdb", fragment.name),
                    source: packfs_format::tiledb::TileDbError::invalid(
                        "fragment metadata",
                        format!(
                            "{} tiles listed, but its non-empty domain spans {expected}",
                            fragment.tile_count()
                        ),
                    ),
                });
            }
            bounds = Some(match bounds {
                None => region.clone(),
                Some(b) => b
                    .iter()
                    .zip(&region)
                    .map(|(&(l, h), &(a, z))| (l.min(a), h.max(z)))
                    .collect(),
            });
            regions.push(Some(region));
        }
        Ok(DenseLayout {
            grid,
            regions,
            bounds,
        })
    }

    /// Cells in the bounding box.
    pub(crate) fn cells(&self) -> u64 {
        self.bounds.as_ref().map_or(0, |b| {
            b.iter()
                .map(|&(low, high)| (high - low + 1) as u64)
                .fold(1, u64::saturating_mul)
        })
    }

    /// The cells `coords..=row_end` along the last dimension, split by the
    /// newest fragment that wrote each (`None`: none did), in order.
    pub(crate) fn paint(&self, coords: &[i128], row_end: i128) -> Vec<(i128, i128, Option<usize>)> {
        let last = coords.len() - 1;
        let mut pieces = vec![(coords[last], row_end, None)];
        for (f, region) in self.regions.iter().enumerate().rev() {
            let Some(region) = region else { continue };
            let inside = (0..last).all(|d| region[d].0 <= coords[d] && coords[d] <= region[d].1);
            if !inside {
                continue;
            }
            let (a, b) = region[last];
            let mut next = Vec::with_capacity(pieces.len() + 2);
            for (from, to, owner) in pieces {
                if owner.is_some() || b < from || to < a {
                    next.push((from, to, owner));
                    continue;
                }
                let (lo, hi) = (from.max(a), to.min(b));
                if from < lo {
                    next.push((from, lo - 1, None));
                }
                next.push((lo, hi, Some(f)));
                if hi < to {
                    next.push((hi + 1, to, None));
                }
            }
            pieces = next;
        }
        pieces
    }
}

/// The coordinates of cell `index` of `bounds` in row-major order.
pub(crate) fn coords_of(bounds: &Region, mut index: u64) -> Vec<i128> {
    let mut coords = vec![0; bounds.len()];
    for d in (0..bounds.len()).rev() {
        let extent = (bounds[d].1 - bounds[d].0 + 1) as u64;
        coords[d] = bounds[d].0 + (index % extent) as i128;
        index /= extent;
    }
    coords
}

/// The linear index of `index` in a box of `sizes`, in `layout` order.
fn linear(index: &[i128], sizes: &[i128], layout: Layout) -> i128 {
    let order: Vec<usize> = match layout {
        Layout::ColMajor => (0..index.len()).rev().collect(),
        _ => (0..index.len()).collect(),
    };
    order.iter().fold(0, |acc, &d| acc * sizes[d] + index[d])
}

#[cfg(test)]
mod tests {
    use super::*;
    use packfs_format::tiledb::filter::FilterPipeline;
    use packfs_format::tiledb::schema::{ArrayType, VAR_NUM};

    fn pipeline() -> FilterPipeline {
        FilterPipeline::parse(&[0, 0, 1, 0, 0, 0, 0, 0]).unwrap()
    }

    fn dim(name: &str, datatype: Datatype, domain: Vec<u8>, extent: Option<Vec<u8>>) -> Dimension {
        let var = domain.is_empty();
        Dimension {
            name: name.into(),
            datatype,
            cell_val_num: if var { VAR_NUM } else { 1 },
            filters: pipeline(),
            domain,
            tile_extent: extent,
        }
    }

    fn schema(dimensions: Vec<Dimension>) -> ArraySchema {
        ArraySchema {
            version: 22,
            allows_dups: false,
            array_type: ArrayType::Sparse,
            tile_order: Layout::RowMajor,
            cell_order: Layout::RowMajor,
            capacity: 10,
            coords_filters: pipeline(),
            offsets_filters: pipeline(),
            validity_filters: pipeline(),
            dimensions,
            attributes: Vec::new(),
        }
    }

    fn i64s(a: i64, b: i64) -> Vec<u8> {
        [a.to_le_bytes(), b.to_le_bytes()].concat()
    }

    #[test]
    fn integer_names_are_padded_to_the_domain_and_sort_numerically() {
        let s = schema(vec![dim(
            "id",
            Datatype::INT64,
            i64s(0, 99_999),
            Some(100i64.to_le_bytes().to_vec()),
        )]);
        let name = |v: i64| cell_name(&s, &[&v.to_le_bytes()]);
        assert_eq!(name(7), "00007");
        assert_eq!(name(99_999), "99999");
        let mut names: Vec<String> = [5, 40, 3, 12_000].into_iter().map(name).collect();
        names.sort();
        assert_eq!(names, ["00003", "00005", "00040", "12000"]);
        let s = schema(vec![dim("x", Datatype::INT64, i64s(-50, 50), None)]);
        assert_eq!(cell_name(&s, &[&(-3i64).to_le_bytes()]), "-03");
    }

    #[test]
    fn float_names_are_short_and_long_names_are_cut() {
        let f64s = |a: f64, b: f64| [a.to_le_bytes(), b.to_le_bytes()].concat();
        let s = schema(vec![dim("x", Datatype::FLOAT64, f64s(-1e300, 1e300), None)]);
        let name = |v: f64| cell_name(&s, &[&v.to_le_bytes()]);
        assert_eq!(name(5e-324), "5e-324");
        assert_eq!(name(-1e-7), "-1e-7");
        assert_eq!(name(1.5e300), "1.5e300");
        assert_eq!(
            (name(0.5), name(1.0), name(0.0)),
            ("0.5".into(), "1".into(), "0".into())
        );
        let domain = [(-1f32).to_le_bytes(), 1f32.to_le_bytes()].concat();
        let s = schema(vec![dim("x", Datatype::FLOAT32, domain, None)]);
        assert_eq!(cell_name(&s, &[&1e-7f32.to_le_bytes()]), "1e-7");

        let loc = CellLoc {
            fragment: 0,
            tile: 0,
            pos: 0,
        };
        let long = |end: &str| format!("{}{end}", "k".repeat(300)).into_boxed_str();
        let cells = Cells::ordered(vec![loc; 3], vec![long("1"), long("2"), "short".into()]);
        assert!(cells.names.iter().all(|n| n.len() <= MAX_CELL_NAME));
        assert_ne!(cells.names[0], cells.names[1]);
        assert!(cells.names[0].starts_with(&"k".repeat(CUT_PREFIX)));
        assert_eq!(&*cells.names[2], "short");
        assert_eq!(cells.find(&cells.names[1].clone()), Some(1));
    }

    #[test]
    fn string_coordinates_are_escaped_and_joined() {
        let s = schema(vec![
            dim("key", Datatype::STRING_ASCII, Vec::new(), None),
            dim("n", Datatype::UINT8, vec![0, 200], None),
        ]);
        assert_eq!(
            cell_name(&s, &[b"cat/01_a b", &[9]]),
            "cat%2F01%5Fa%20b_009"
        );
        assert_eq!(cell_name(&s, &[b"..", &[0]]), "%2E%2E_000");
        assert_eq!(cell_name(&s, &[b"", &[0]]), "%_000");
        assert_eq!(cell_name(&s, &[b"a.jpg", &[1]]), "a.jpg_001");
    }

    #[test]
    fn global_order_is_tile_then_cell_order() {
        // 2-D, tiles of 2x2 over 0..=3: (0,2) lies in the second tile of
        // the first tile row, after (1,1) of the first tile.
        let extent = Some(2i64.to_le_bytes().to_vec());
        let s = schema(vec![
            dim("r", Datatype::INT64, i64s(0, 3), extent.clone()),
            dim("c", Datatype::INT64, i64s(0, 3), extent),
        ]);
        let key = |r: i64, c: i64| global_key(&s, &[&r.to_le_bytes(), &c.to_le_bytes()]);
        assert!(key(1, 1) < key(0, 2));
        assert!(key(0, 3) < key(2, 0));
        assert!(key(0, 0) < key(0, 1));
        let f = |v: f64| float_order(v);
        assert!(f(-2.0) < f(-1.0) && f(-1.0) < f(0.0) && f(0.0) < f(0.5));
    }

    #[test]
    fn dense_cells_are_located_by_tile_and_position() {
        let mut s = schema(vec![
            dim(
                "r",
                Datatype::INT64,
                i64s(1, 10),
                Some(3i64.to_le_bytes().to_vec()),
            ),
            dim(
                "c",
                Datatype::INT64,
                i64s(1, 8),
                Some(4i64.to_le_bytes().to_vec()),
            ),
        ]);
        s.array_type = ArrayType::Dense;
        let grid = DenseGrid::new(&s);
        // A fragment over rows 2..=5, columns 3..=6: tile rows 0..=1,
        // tile columns 0..=1, so 4 tiles of 3x4 cells.
        let region = vec![(2, 5), (3, 6)];
        assert_eq!(grid.tile_count(&region), 4);
        assert_eq!(grid.locate(&region, &[2, 3]), (0, 4 + 2));
        assert_eq!(grid.locate(&region, &[5, 6]), (3, 4 + 1));
        assert_eq!(grid.run_in_tile(&[2, 3]), (2, true));
    }
}
