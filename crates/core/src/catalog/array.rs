//! A TileDB array as a catalog (`docs/TILEDB.md`): a directory of cell
//! files per var-sized attribute, and a `.raw` file per fixed-size
//! attribute (and per fixed-size dimension of a sparse array). Every file
//! is a map over decoded tiles ([`crate::cache::RecordRef`]), so a tile is
//! decoded once, cached, and shared by its cells.
//!
//! Mount time reads fragment metadata only. An array's cells are found on
//! first use (a lookup, a listing, a `stat` of a sparse array's `.raw`
//! file): a sparse array's by decoding its coordinate tiles, a dense
//! array's from its fragments' domains. An attribute's cell sizes are
//! found on first use of its directory, by decoding its offsets tiles.

use std::borrow::Cow;
use std::collections::HashMap;
use std::future::Future;
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use futures::StreamExt;
use packfs_format::engine::{ByteRangeMap, SourceIndex};
use packfs_format::tiledb::schema::ArrayType;
use parking_lot::Mutex;

use super::{Catalog, CatalogError, Entry};
use crate::array::cells::{
    coords_of, read_tile, var_bounds, CellLoc, Cells, DenseLayout, MAX_CELL_NAME,
};
use crate::array::{Array, ArrayError, Field, TileKind};
use crate::cache::BlockCache;
use crate::extents::{Extents, Source};
use crate::kind::Kind;

/// Ids of cell files start here; below are the root's entries.
const FIRST_CELL: u64 = 1 << 20;

/// The longest cell file extension (with its dot): a file name of the
/// longest cell name and it is at most 255 bytes.
const MAX_EXTENSION: usize = 255 - MAX_CELL_NAME;

/// Tiles decoded at once while sizes are gathered.
const TILES_AT_ONCE: usize = 16;

/// An entry of the root directory.
enum Top {
    /// The cell files of var-sized attribute `attribute`.
    Cells { attribute: usize, name: String },
    /// All values of a fixed-size field (`kind` Data), or the validity
    /// of a nullable one (`kind` Validity: one byte per cell, 1 valid, 0
    /// null), in order.
    Raw {
        field: Field,
        kind: TileKind,
        name: String,
    },
}

impl Top {
    fn name(&self) -> &str {
        match self {
            Top::Cells { name, .. } | Top::Raw { name, .. } => name,
        }
    }
}

/// The cells of one var-sized attribute that are files (not null).
struct AttributeCells {
    /// Indices into [`Cells::locs`], ascending.
    cells: Vec<u32>,
    /// Each file's bytes in its var tile, or why its tile's offsets could
    /// not be read (the file is listed; `stat` and reads fail).
    spans: Vec<Result<Range<u64>, Arc<str>>>,
}

/// The catalog of one array.
pub struct ArrayCatalog {
    array: Arc<Array>,
    cache: BlockCache,
    runtime: tokio::runtime::Handle,
    top: Vec<Top>,
    /// File name extension per var-sized attribute (with its dot).
    extensions: HashMap<usize, String>,
    mtime: SystemTime,
    dense: Option<DenseLayout>,
    /// The cells a read sees, found on first use.
    cell_index: Mutex<Option<Arc<Cells>>>,
    attributes: Mutex<HashMap<usize, Arc<AttributeCells>>>,
}

impl ArrayCatalog {
    /// The catalog of `array`, reading tiles through `cache`. `extensions`
    /// maps attribute names to file extensions for their cell files.
    pub fn new(
        array: Arc<Array>,
        cache: BlockCache,
        runtime: tokio::runtime::Handle,
        extensions: &HashMap<String, String>,
    ) -> Result<ArrayCatalog, ArrayError> {
        let schema = array.schema().clone();
        let mut top = Vec::new();
        let mut named = HashMap::new();
        for (i, a) in schema.attributes.iter().enumerate() {
            if a.is_var() {
                top.push(Top::Cells {
                    attribute: i,
                    name: a.name.clone(),
                });
                if let Some(ext) = extensions.get(&a.name) {
                    let ext = format!(".{}", ext.trim_start_matches('.'));
                    if ext.len() > MAX_EXTENSION {
                        return Err(ArrayError::LongExtension {
                            location: array.location().to_string(),
                            attribute: a.name.clone(),
                            len: ext.len(),
                            max: MAX_EXTENSION,
                        });
                    }
                    named.insert(i, ext);
                }
            } else {
                top.push(Top::Raw {
                    field: Field::Attribute(i),
                    kind: TileKind::Data,
                    name: format!("{}.raw", a.name),
                });
                if a.nullable {
                    top.push(Top::Raw {
                        field: Field::Attribute(i),
                        kind: TileKind::Validity,
                        name: format!("{}.validity", a.name),
                    });
                }
            }
        }
        if let Some(unknown) = extensions.keys().find(|n| {
            !schema
                .attributes
                .iter()
                .any(|a| a.is_var() && &a.name == *n)
        }) {
            return Err(ArrayError::UnknownExtension {
                location: array.location().to_string(),
                attribute: unknown.clone(),
            });
        }
        if schema.array_type == ArrayType::Sparse {
            for (i, d) in schema.dimensions.iter().enumerate() {
                if !d.is_var() {
                    top.push(Top::Raw {
                        field: Field::Dimension(i),
                        kind: TileKind::Data,
                        name: format!("{}.raw", d.name),
                    });
                }
            }
        }
        let dense = match schema.array_type {
            ArrayType::Dense => Some(DenseLayout::of(&array)?),
            ArrayType::Sparse => None,
        };
        let newest = array
            .fragments()
            .iter()
            .map(|f| f.stamp.t2)
            .max()
            .unwrap_or(0);
        Ok(ArrayCatalog {
            mtime: SystemTime::UNIX_EPOCH + Duration::from_millis(newest),
            array,
            cache,
            runtime,
            top,
            extensions: named,
            dense,
            cell_index: Mutex::new(None),
            attributes: Mutex::new(HashMap::new()),
        })
    }

    /// The array shown.
    pub fn array(&self) -> &Arc<Array> {
        &self.array
    }

    /// Runs `future` to completion from a synchronous catalog call.
    fn wait<T>(&self, future: impl Future<Output = T>) -> T {
        crate::blocking::wait(&self.runtime, future)
    }

    /// `e`, naming the array (a mount logs it where it answers `EIO`; a
    /// command says it once, as its error).
    fn failed(&self, e: impl std::fmt::Display) -> CatalogError {
        CatalogError(format!("TileDB array {}: {e}", self.array.location()))
    }

    /// The cells a read of the array sees (a sparse array's from its
    /// coordinate tiles, a dense array's from its fragments' domains),
    /// found on first use.
    pub(crate) fn cells(&self) -> Result<Arc<Cells>, CatalogError> {
        let mut slot = self.cell_index.lock();
        if let Some(cells) = &*slot {
            return Ok(cells.clone());
        }
        let cells = match &self.dense {
            Some(dense) => Cells::dense(&self.array, dense),
            None => self.wait(Cells::load(&self.array, &self.cache)),
        }
        .map_err(|e| self.failed(e))?;
        let span = FIRST_CELL + self.top.len() as u64 * cells.locs.len() as u64;
        if span >= 1 << 32 {
            return Err(self.failed(format!(
                "{} cells in {} attributes are more files than one mount shows",
                cells.locs.len(),
                self.top.len()
            )));
        }
        let cells = Arc::new(cells);
        *slot = Some(cells.clone());
        Ok(cells)
    }

    /// Var-sized attribute `attribute`'s non-null cells and their sizes,
    /// found on first use.
    fn attribute_cells(&self, attribute: usize) -> Result<Arc<AttributeCells>, CatalogError> {
        if let Some(cells) = self.attributes.lock().get(&attribute) {
            return Ok(cells.clone());
        }
        let index = self.cells()?;
        let loaded = self.wait(load_attribute(&self.array, &self.cache, &index, attribute));
        let loaded = Arc::new(loaded);
        self.attributes.lock().insert(attribute, loaded.clone());
        Ok(loaded)
    }

    /// The id of cell `cell` of the directory at root entry `slot`.
    fn cell_id(&self, slot: usize, cell: usize, cells: usize) -> u64 {
        FIRST_CELL + (slot * cells + cell) as u64
    }

    /// Root entry slot and global cell index of a cell file id.
    fn cell_of(&self, id: u64) -> Option<(usize, usize)> {
        let cells = self.cell_index.lock().as_ref()?.locs.len();
        let n = usize::try_from(id.checked_sub(FIRST_CELL)?).ok()?;
        let slot = n.checked_div(cells)?;
        (slot < self.top.len()).then_some((slot, n % cells))
    }

    /// The file of cell `cell` in attribute directory `slot`: its
    /// attribute and its span.
    fn cell_file(&self, slot: usize, cell: usize) -> Result<Option<(usize, Span)>, CatalogError> {
        let Some(Top::Cells { attribute, .. }) = self.top.get(slot) else {
            return Ok(None);
        };
        let cells = self.attribute_cells(*attribute)?;
        let Ok(at) = cells.cells.binary_search(&(cell as u32)) else {
            return Ok(None);
        };
        Ok(Some((*attribute, cells.spans[at].clone())))
    }

    /// Bytes per cell of the column of `field`'s `kind` tiles.
    fn column_cell_size(&self, field: Field, kind: TileKind) -> u64 {
        match kind {
            TileKind::Validity => 1,
            _ => self.array.cell_size(field),
        }
    }

    /// Bytes in the column file of `field`'s `kind` tiles.
    fn raw_size(&self, field: Field, kind: TileKind) -> Result<u64, CatalogError> {
        let cells = match &self.dense {
            Some(dense) => dense.cells(),
            None => self.cells()?.locs.len() as u64,
        };
        Ok(cells * self.column_cell_size(field, kind))
    }

    fn mtime_of(&self, loc: &CellLoc) -> SystemTime {
        let t2 = self.array.fragments()[loc.fragment as usize].stamp.t2;
        SystemTime::UNIX_EPOCH + Duration::from_millis(t2)
    }

    /// The map of bytes `range` of the column file of `field`'s `kind`
    /// tiles in a sparse array: each cell's value (or validity) in its
    /// fragment's tile.
    fn sparse_raw(
        &self,
        field: Field,
        kind: TileKind,
        range: Range<u64>,
    ) -> Result<Extents, CatalogError> {
        let index = self.cells()?;
        let size = self.column_cell_size(field, kind);
        let mut out = Clipped::new(range.clone());
        let first = range.start / size;
        let last = range.end.div_ceil(size).min(index.locs.len() as u64);
        let mut cell = first;
        while cell < last {
            let loc = index.locs[cell as usize];
            // Neighbours in global order that are neighbours in one tile
            // read as one segment.
            let mut run = 1;
            while cell + run < last {
                let next = index.locs[(cell + run) as usize];
                if (next.fragment, next.tile) != (loc.fragment, loc.tile)
                    || next.pos != loc.pos + run as u32
                {
                    break;
                }
                run += 1;
            }
            let source = out
                .tile(
                    &self.array,
                    loc.fragment as usize,
                    field,
                    kind,
                    loc.tile as usize,
                )
                .map_err(|e| self.failed(e))?;
            out.push(
                cell * size,
                run * size,
                Some((source, u64::from(loc.pos) * size)),
            );
            cell += run;
        }
        Ok(out.extents())
    }

    /// The map of bytes `range` of the column file of `field`'s `kind`
    /// tiles in a dense array, row-major over the fragments' bounding box:
    /// each cell from the newest fragment that wrote it, the fill value
    /// (or fill validity) where none did. Rows cross tiles, so one tile
    /// gives every `extent`-th row piece: the engine compiles those into
    /// strided runs.
    fn dense_raw(
        &self,
        field: Field,
        kind: TileKind,
        range: Range<u64>,
    ) -> Result<Extents, CatalogError> {
        let dense = self.dense.as_ref().expect("dense array");
        let mut out = Clipped::new(range.clone());
        let Some(bounds) = &dense.bounds else {
            return Ok(out.extents());
        };
        let size = self.column_cell_size(field, kind);
        let Field::Attribute(attribute) = field else {
            return Ok(out.extents());
        };
        let attribute = &self.array.schema().attributes[attribute];
        let fill = match kind {
            TileKind::Validity => vec![attribute.fill_validity],
            _ => fill_value(&attribute.fill, size),
        };
        let last_dim = bounds.len() - 1;
        let row_len = (bounds[last_dim].1 - bounds[last_dim].0 + 1) as u64;
        let total = dense.cells();
        let (first, end) = (range.start / size, range.end.div_ceil(size).min(total));
        let mut cell = first;
        while cell < end {
            let coords = coords_of(bounds, cell);
            let in_row = (row_len - (cell % row_len)).min(end - cell);
            let row_end = coords[last_dim] + in_row as i128 - 1;
            for (from, to, fragment) in dense.paint(&coords, row_end) {
                let dest = cell + (from - coords[last_dim]) as u64;
                let count = (to - from + 1) as u64;
                let Some(f) = fragment else {
                    out.push_fill(dest * size, count * size, &fill);
                    continue;
                };
                let region = dense.regions[f].as_ref().expect("painted by a region");
                let mut at = coords.clone();
                at[last_dim] = from;
                let mut done = 0;
                while done < count {
                    let (tile, pos) = dense.grid.locate(region, &at);
                    let (left, consecutive) = dense.grid.run_in_tile(&at);
                    let n = (left as u64).min(count - done);
                    let source = out
                        .tile(&self.array, f, field, kind, tile as usize)
                        .map_err(|e| self.failed(e))?;
                    let dest = (dest + done) * size;
                    if consecutive {
                        out.push(dest, n * size, Some((source, pos * size)));
                    } else {
                        let stride = dense.grid.col_major_stride();
                        for k in 0..n {
                            let src = (pos + k * stride) * size;
                            out.push(dest + k * size, size, Some((source, src)));
                        }
                    }
                    done += n;
                    at[last_dim] += n as i128;
                }
            }
            cell += in_row;
        }
        Ok(out.extents())
    }
}

/// One cell's fill value of `size` bytes (TileDB stores one per cell).
fn fill_value(fill: &[u8], size: u64) -> Vec<u8> {
    let mut value = fill.to_vec();
    value.resize(size as usize, 0);
    value
}

/// Builds the map of one byte range of a file from pieces of the whole
/// file, clipping each to the range; sources are the tiles it names, each
/// once.
struct Clipped {
    range: Range<u64>,
    map: ByteRangeMap,
    sources: Vec<Source>,
    tiles: HashMap<(usize, Field, TileKind, usize), SourceIndex>,
}

impl Clipped {
    fn new(range: Range<u64>) -> Clipped {
        Clipped {
            map: ByteRangeMap::new(range.end - range.start),
            range,
            sources: Vec::new(),
            tiles: HashMap::new(),
        }
    }

    /// The source of tile `tile` (of `kind`) of `field` in fragment `f`.
    fn tile(
        &mut self,
        array: &Array,
        f: usize,
        field: Field,
        kind: TileKind,
        tile: usize,
    ) -> Result<SourceIndex, ArrayError> {
        if let Some(&index) = self.tiles.get(&(f, field, kind, tile)) {
            return Ok(index);
        }
        let record = array.tile(f, field, kind, tile)?;
        self.sources.push(Source::Record(Arc::new(record)));
        let index = SourceIndex(self.sources.len() - 1);
        self.tiles.insert((f, field, kind, tile), index);
        Ok(index)
    }

    /// File bytes `offset..offset + len` from `source` at its offset, or
    /// PAD; only their part inside the range.
    fn push(&mut self, offset: u64, len: u64, source: Option<(SourceIndex, u64)>) {
        let from = offset.max(self.range.start);
        let to = (offset + len).min(self.range.end);
        if from >= to {
            return;
        }
        let dest = from - self.range.start;
        match source {
            Some((index, at)) => {
                self.map
                    .push_data(dest, to - from, index, at + (from - offset));
            }
            None => {
                self.map.push_pad(dest, to - from);
            }
        }
    }

    /// `len` bytes of repeated `fill` at file offset `offset`: PAD when
    /// the fill value is zeros.
    fn push_fill(&mut self, offset: u64, len: u64, fill: &[u8]) {
        if fill.iter().all(|&b| b == 0) {
            return self.push(offset, len, None);
        }
        let bytes: Bytes = fill.iter().copied().cycle().take(len as usize).collect();
        self.sources.push(Source::Memory(bytes));
        let index = SourceIndex(self.sources.len() - 1);
        self.push(offset, len, Some((index, 0)));
    }

    fn extents(self) -> Extents {
        Extents {
            map: self.map,
            sources: self.sources,
        }
    }
}

/// A cell file's bytes in its var tile, or what is wrong with the tile.
type Span = Result<Range<u64>, Arc<str>>;

/// A var tile's cells: their spans in it, and the validity tile; or what
/// is wrong with the tile.
type TileCells = Result<(Vec<Range<u64>>, Option<Bytes>), Arc<str>>;

/// Sizes and validity of var-sized attribute `attribute`'s cells, from
/// its offsets (and validity) tiles.
async fn load_attribute(
    array: &Array,
    cache: &BlockCache,
    index: &Cells,
    attribute: usize,
) -> AttributeCells {
    let field = Field::Attribute(attribute);
    let nullable = array.is_nullable(field);
    let mut tiles: Vec<(usize, usize)> = index
        .locs
        .iter()
        .map(|l| (l.fragment as usize, l.tile as usize))
        .collect();
    tiles.sort_unstable();
    tiles.dedup();
    let decoded: HashMap<(usize, usize), TileCells> = futures::stream::iter(tiles)
        .map(|(f, t)| async move {
            let cells = async {
                let offsets = read_tile(array, cache, f, field, TileKind::Data, t).await?;
                let var = array.tile(f, field, TileKind::Var, t)?;
                let count = array.cells_in_tile(f, t) as usize;
                let spans =
                    var_bounds(&offsets, var.len, count).map_err(|detail| ArrayError::Format {
                        object: format!(
                            "{} (attribute {attribute}, tile {t})",
                            array.fragments()[f].name
                        ),
                        source: packfs_format::tiledb::TileDbError::invalid("cell offsets", detail),
                    })?;
                let validity = match nullable {
                    true => Some(read_tile(array, cache, f, field, TileKind::Validity, t).await?),
                    false => None,
                };
                Ok::<_, ArrayError>((spans, validity))
            }
            .await;
            // A damaged tile fails its cells only: they stay listed.
            let cells = cells.map_err(|e| {
                tracing::error!("TileDB array {}: {e}", array.location());
                Arc::from(e.to_string())
            });
            ((f, t), cells)
        })
        .buffer_unordered(TILES_AT_ONCE)
        .collect()
        .await;
    let mut cells = Vec::new();
    let mut spans = Vec::new();
    for (i, loc) in index.locs.iter().enumerate() {
        let pos = loc.pos as usize;
        let span = match &decoded[&(loc.fragment as usize, loc.tile as usize)] {
            Ok((_, Some(validity))) if validity.get(pos).copied().unwrap_or(0) == 0 => continue,
            Ok((bounds, _)) => Ok(bounds[pos].clone()),
            Err(e) => Err(e.clone()),
        };
        cells.push(i as u32);
        spans.push(span);
    }
    AttributeCells { cells, spans }
}

impl Catalog for ArrayCatalog {
    fn entry(&self, id: u64) -> Result<Option<Entry>, CatalogError> {
        let dir = |mtime| Entry {
            kind: Kind::Dir,
            size: 0,
            perm: 0o555,
            mtime,
            volatile: false,
        };
        if id == 0 {
            return Ok(Some(dir(self.mtime)));
        }
        if id < FIRST_CELL {
            return Ok(match self.top.get(id as usize - 1) {
                Some(Top::Cells { .. }) => Some(dir(self.mtime)),
                Some(Top::Raw { field, kind, .. }) => Some(Entry {
                    kind: Kind::File,
                    size: self.raw_size(*field, *kind)?,
                    perm: 0o444,
                    mtime: self.mtime,
                    volatile: false,
                }),
                None => None,
            });
        }
        let Some((slot, cell)) = self.cell_of(id) else {
            return Ok(None);
        };
        let Some((_, span)) = self.cell_file(slot, cell)? else {
            return Ok(None);
        };
        let span = span.map_err(|e| CatalogError(e.to_string()))?;
        let loc = self.cells()?.locs[cell];
        Ok(Some(Entry {
            kind: Kind::File,
            size: span.end - span.start,
            perm: 0o444,
            mtime: self.mtime_of(&loc),
            volatile: false,
        }))
    }

    fn lookup(&self, dir: u64, name: &[u8]) -> Result<Option<u64>, CatalogError> {
        let Ok(name) = std::str::from_utf8(name) else {
            return Ok(None);
        };
        if dir == 0 {
            let slot = self.top.iter().position(|t| t.name() == name);
            return Ok(slot.map(|s| s as u64 + 1));
        }
        let slot = (dir - 1) as usize;
        let Some(Top::Cells { attribute, .. }) = self.top.get(slot) else {
            return Ok(None);
        };
        let name = match self.extensions.get(attribute) {
            Some(ext) => match name.strip_suffix(ext.as_str()) {
                Some(stem) => stem,
                None => return Ok(None),
            },
            None => name,
        };
        let index = self.cells()?;
        let Some(cell) = index.find(name) else {
            return Ok(None);
        };
        if self.cell_file(slot, cell)?.is_none() {
            return Ok(None);
        }
        Ok(Some(self.cell_id(slot, cell, index.locs.len())))
    }

    fn child(&self, dir: u64, index: usize) -> Option<(u64, Cow<'_, str>)> {
        if dir == 0 {
            let top = self.top.get(index)?;
            return Some((index as u64 + 1, Cow::Borrowed(top.name())));
        }
        let slot = (dir - 1) as usize;
        let Some(Top::Cells { attribute, .. }) = self.top.get(slot) else {
            return None;
        };
        let all = self.cells().ok()?;
        let files = self.attribute_cells(*attribute).ok()?;
        let cell = *files.cells.get(index)? as usize;
        let name = match self.extensions.get(attribute) {
            Some(ext) => Cow::Owned(format!("{}{ext}", all.names[cell])),
            None => Cow::Owned(all.names[cell].to_string()),
        };
        Some((self.cell_id(slot, cell, all.locs.len()), name))
    }

    fn parent(&self, dir: u64) -> Option<u64> {
        (dir != 0).then_some(0)
    }

    fn extents(&self, id: u64, range: Range<u64>) -> Result<Option<Extents>, CatalogError> {
        if (1..FIRST_CELL).contains(&id) {
            let Some(&Top::Raw { field, kind, .. }) = self.top.get(id as usize - 1) else {
                return Ok(None);
            };
            let extents = match self.dense {
                Some(_) => self.dense_raw(field, kind, range)?,
                None => self.sparse_raw(field, kind, range)?,
            };
            return Ok(Some(extents));
        }
        let Some((slot, cell)) = self.cell_of(id) else {
            return Ok(None);
        };
        let Some((attribute, span)) = self.cell_file(slot, cell)? else {
            return Ok(None);
        };
        let span = span.map_err(|e| CatalogError(e.to_string()))?;
        let loc = self.cells()?.locs[cell];
        let record = self
            .array
            .tile(
                loc.fragment as usize,
                Field::Attribute(attribute),
                TileKind::Var,
                loc.tile as usize,
            )
            .map_err(|e| self.failed(e))?;
        let len = range
            .end
            .min(span.end - span.start)
            .saturating_sub(range.start);
        let mut map = ByteRangeMap::new(len);
        if len > 0 {
            map.push_data(0, len, SourceIndex(0), span.start + range.start);
        }
        Ok(Some(Extents {
            map,
            sources: vec![Source::Record(Arc::new(record))],
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::CacheOptions;
    use crate::reader::Reader;
    use crate::store::{Store, StoreConfig};
    use packfs_format::engine::{ByteRangeProgram, CoalesceLimits, Run};

    fn fixture(name: &str) -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/tiledb")
            .join(name)
    }

    /// A dense array's rows cross tiles: its `.raw` file's map holds one
    /// piece per row per tile, which compile into strided runs (one per
    /// tile and source, never across tiles), and read back as TileDB
    /// read the array.
    #[test]
    fn dense_raw_files_compile_to_strided_runs_per_tile() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .unwrap();
        let location = fixture("small-dense").display().to_string();
        let store = Store::open(&location, false, &StoreConfig::default()).unwrap();
        let array = runtime.block_on(Array::open(&store, None)).unwrap();
        let reader = Reader::new(store, CacheOptions::default(), None);
        let catalog = ArrayCatalog::new(
            Arc::new(array),
            reader.cache().clone(),
            runtime.handle().clone(),
            &HashMap::new(),
        )
        .unwrap();
        let id = catalog.lookup(0, b"v.raw").unwrap().unwrap();
        let size = catalog.entry(id).unwrap().unwrap().size;
        let want = std::fs::read(fixture("small-dense-expected/v.raw")).unwrap();
        assert_eq!(size, want.len() as u64);

        let extents = catalog.extents(id, 0..size).unwrap().unwrap();
        assert_eq!(extents.sources.len(), 4, "one source per tile");
        let map = extents.map.clone().normalize().unwrap();
        let program = ByteRangeProgram::compile(&map, &CoalesceLimits::default());
        let strided = program
            .runs()
            .iter()
            .filter(|r| matches!(r, Run::Strided { .. }))
            .count();
        // Rows 2-3 lie in the first tile row, 4-6 in the second: each of
        // the 4 tiles gives its rows as one run. The three rows of a tile
        // of the second tile row are a strided run; the two of the first,
        // contiguous in their tile, one coalesced read.
        assert_eq!(program.runs().len(), 4, "{:?}", program.runs());
        assert_eq!(strided, 2, "{:?}", program.runs());

        let got = runtime.block_on(reader.read(extents)).unwrap();
        assert_eq!(&got[..], &want[..]);
        // A range starting and ending inside cells, across tiles.
        let part = catalog.extents(id, 5..61).unwrap().unwrap();
        let got = runtime.block_on(reader.read(part)).unwrap();
        assert_eq!(&got[..], &want[5..61]);
    }
}
