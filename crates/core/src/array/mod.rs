//! TileDB arrays (`docs/TILEDB.md`) on any store: which fragments a read
//! sees, their metadata, and their tiles as records the block cache
//! decodes. The codecs are in [`packfs_format::tiledb`].

pub mod cells;

use std::sync::Arc;

use object_store::path::Path;
use packfs_format::tiledb::filter::FilterPipeline;
use packfs_format::tiledb::fragment::{decode_u64_list, Footer, TileCodec, TimestampedName};
use packfs_format::tiledb::schema::{ArraySchema, ArrayType};
use packfs_format::tiledb::TileType;
use packfs_format::tiledb::{tile, Datatype, TileDbError};
use thiserror::Error;

use crate::cache::{FetchError, ObjectRef, RecordCodec, RecordRef};
use crate::store::{Store, StoreError};

/// Why an array could not be opened or read. Each names the object and
/// what is wrong with it.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ArrayError {
    /// A file of the array does not decode.
    #[error("{object}: {source}")]
    Format {
        object: String,
        #[source]
        source: TileDbError,
    },
    /// The store failed.
    #[error("{0}")]
    Store(#[from] StoreError),
    /// A tile could not be read or decoded.
    #[error("{0}")]
    Fetch(#[from] FetchError),
    /// The array uses a feature packfs does not read (said which).
    #[error("TileDB array {location}: {detail}")]
    Unsupported { location: String, detail: String },
    /// From some time on, the array uses a feature packfs does not read
    /// (said which); a read as of a time before that sees it as it was.
    #[error(
        "TileDB array {location}: {detail}; read the array as of a time before that to see \
         it as it was"
    )]
    #[non_exhaustive]
    UnsupportedSince { location: String, detail: String },
    /// A file extension was given for an attribute that has no cell files
    /// (none of the array's var-sized attributes has that name).
    #[error(
        "TileDB array {location}: a cell file extension is given for {attribute:?}, which is \
         not a var-sized attribute"
    )]
    #[non_exhaustive]
    UnknownExtension { location: String, attribute: String },
    /// A cell file extension so long that a cell's file name could pass
    /// 255 bytes.
    #[error(
        "TileDB array {location}: the cell file extension for {attribute:?} is {len} bytes \
         with its dot; at most {max} fit beside the longest cell name"
    )]
    #[non_exhaustive]
    LongExtension {
        location: String,
        attribute: String,
        len: usize,
        max: usize,
    },
}

/// The kinds of tile a field has in a fragment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TileKind {
    /// Fixed-size values, or the cell offsets of a var-sized field.
    Data,
    /// The values of a var-sized field.
    Var,
    /// One byte per cell of a nullable attribute: 1 valid, 0 null.
    Validity,
}

/// A field of a fragment: an attribute or a dimension of the schema, by
/// index, or the per-cell write times a fragment consolidated with
/// timestamps holds (`t.tdb`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Field {
    Attribute(usize),
    Dimension(usize),
    Timestamps,
}

/// Where one field's tiles start in its data files.
#[derive(Clone, Debug, Default)]
struct FieldTiles {
    data: Vec<u64>,
    var: Vec<u64>,
    var_sizes: Vec<u64>,
    validity: Vec<u64>,
    /// Its data, var and validity files (indexed by [`TileKind`]).
    files: [Arc<Path>; 3],
}

/// A fragment a read of the array sees.
#[derive(Debug)]
pub struct Fragment {
    /// The fragment's folder name under `__fragments/`.
    pub name: String,
    pub stamp: TimestampedName,
    pub footer: Footer,
    dir: Path,
    /// Indexed like the footer's per-field vectors.
    fields: Vec<FieldTiles>,
    tile_count: usize,
}

impl Fragment {
    /// Tiles of each field.
    pub(crate) fn tile_count(&self) -> usize {
        self.tile_count
    }
}

/// An open array: its schema and the fragments a read at its timestamp
/// sees, oldest first (a newer fragment's cell wins over an older one's).
pub struct Array {
    store: Store,
    schema: Arc<ArraySchema>,
    fragments: Vec<Fragment>,
    /// Per fragment and field, the codec of its data, var and validity
    /// tiles (the filters' behaviour depends on the format version).
    codecs: Vec<Vec<[Arc<TileCodec>; 3]>>,
    /// The time of the read (`None`: the latest): cells of a fragment
    /// consolidated with timestamps written after it are not seen.
    at: Option<u64>,
}

impl Array {
    /// Whether `store`'s location holds a TileDB array (a `__schema/`
    /// folder with a schema in it). A location that cannot be listed is
    /// taken not to: the caller goes on to open it as a dataset, whose
    /// errors explain what is wrong with a store (a missing bucket,
    /// refused credentials, an unreachable endpoint).
    pub(crate) async fn is_array(store: &Store) -> bool {
        match store.list_dir(&schema_dir(store)).await {
            Ok(listed) => listed
                .iter()
                .any(|o| o.location.filename().is_some_and(is_timestamped)),
            Err(e) => {
                tracing::debug!("not probing for a TileDB array: {e}");
                false
            }
        }
    }

    /// Opens the array at `store`'s location as a read at `at`
    /// (milliseconds since the epoch; `None` for the latest) sees it.
    pub async fn open(store: &Store, at: Option<u64>) -> Result<Array, ArrayError> {
        let location = store.location().to_string();
        let unsupported = |detail: String| ArrayError::Unsupported {
            location: location.clone(),
            detail,
        };
        let unsupported_since = |detail: String| ArrayError::UnsupportedSince {
            location: location.clone(),
            detail,
        };
        let visible = |t2: u64| at.is_none_or(|at| t2 <= at);
        // A fragment whose range starts by `at` and ends after it is read
        // only if it was consolidated with timestamps, and then only its
        // cells written by `at` (its footer says which kind it is).
        let partly = |s: &TimestampedName| at.is_some_and(|at| s.t1 <= at && at < s.t2);
        let committed = committed_fragments(store, &visible, &unsupported_since).await?;
        let root = store.layout().root().clone();
        let fragments_dir = root.clone().join("__fragments");
        let mut names: Vec<(TimestampedName, String)> = store
            .list_subdirs(&fragments_dir)
            .await?
            .into_iter()
            .filter(|name| committed.contains(name))
            .filter_map(|name| TimestampedName::parse(&name).map(|stamp| (stamp, name)))
            .filter(|(stamp, _)| visible(stamp.t2) || partly(stamp))
            .collect();
        names.sort_by(|(a, an), (b, bn)| (a.t1, a.t2, an).cmp(&(b.t1, b.t2, bn)));

        let first = names.first().map(|(_, n)| n);
        let (schema_name, schema) = load_schema(store, first, &fragments_dir).await?;
        let schema = Arc::new(schema);
        check_supported(&schema).map_err(&unsupported)?;
        let mut fragments = Vec::with_capacity(names.len());
        for (stamp, name) in names {
            let fragment =
                load_fragment(store, (&schema_name, &schema), &fragments_dir, stamp, name).await?;
            if partly(&fragment.stamp) && !fragment.footer.includes_timestamps {
                continue;
            }
            if fragment.footer.includes_delete_meta {
                return Err(unsupported(format!(
                    "fragment {} holds delete metadata: arrays with deletes are not read by packfs",
                    fragment.name
                )));
            }
            fragments.push(fragment);
        }
        // A consolidated fragment covers the time range of those it was
        // made from; until they are vacuumed both exist, and a read sees
        // only the consolidated one.
        let stamps: Vec<TimestampedName> = fragments.iter().map(|f| f.stamp.clone()).collect();
        fragments.retain(|f| {
            let s = &f.stamp;
            !(stamps.iter()).any(|o| o.t1 <= s.t1 && s.t2 <= o.t2 && (o.t1, o.t2) != (s.t1, s.t2))
        });
        let codecs = fragments
            .iter()
            .map(|f| field_codecs(&schema, f.footer.version))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|source| ArrayError::Format {
                object: format!("{}/__schema", location),
                source,
            })?;
        // A field whose filters packfs cannot run still mounts; reads of
        // its files fail (EIO), naming the filter, and this says so now.
        let mut warned = std::collections::HashSet::new();
        for fragment_codecs in &codecs {
            for (index, field) in fragment_codecs.iter().enumerate() {
                for codec in field {
                    let Err(e) = codec.pipeline.ensure_supported(&codec.tile) else {
                        continue;
                    };
                    let name = field_name(&schema, index);
                    if warned.insert((index, e.to_string())) {
                        tracing::warn!("TileDB array {location}: {name}: {e}; its files will fail to read (EIO)");
                    }
                }
            }
        }
        Ok(Array {
            store: store.clone(),
            schema,
            fragments,
            codecs,
            at,
        })
    }

    /// Where the array is.
    pub fn location(&self) -> &str {
        self.store.location()
    }

    /// The schema the visible fragments were written with.
    pub fn schema(&self) -> &Arc<ArraySchema> {
        &self.schema
    }

    /// Whether a read sees a cell written at `time` (milliseconds).
    pub(crate) fn sees(&self, time: u64) -> bool {
        self.at.is_none_or(|at| time <= at)
    }

    /// The fragments a read sees, oldest first.
    pub fn fragments(&self) -> &[Fragment] {
        &self.fragments
    }

    /// Index of `field` in a fragment's per-field vectors.
    pub(crate) fn field_index(&self, field: Field) -> usize {
        match field {
            Field::Attribute(i) => Footer::attribute_field(i),
            Field::Dimension(i) => Footer::dimension_field(&self.schema, i),
            Field::Timestamps => {
                Footer::dimension_field(&self.schema, self.schema.dimensions.len())
            }
        }
    }

    /// Cells in tile `tile` of fragment `fragment`.
    pub(crate) fn cells_in_tile(&self, fragment: usize, tile: usize) -> u64 {
        let f = &self.fragments[fragment];
        match self.schema.array_type {
            ArrayType::Dense => dense_tile_cells(&self.schema),
            ArrayType::Sparse if tile + 1 == f.tile_count() => f.footer.last_tile_cell_num,
            ArrayType::Sparse => self.schema.capacity,
        }
    }

    /// Tile `tile` of `field` in fragment `fragment`, as a record of its
    /// data file that the block cache reads and decodes (a var tile
    /// decodes to the size its fragment lists).
    pub fn tile(
        &self,
        fragment: usize,
        field: Field,
        kind: TileKind,
        tile: usize,
    ) -> Result<RecordRef, ArrayError> {
        let f = &self.fragments[fragment];
        let index = self.field_index(field);
        let metadata = || f.dir.clone().join("__fragment_metadata.tdb").to_string();
        let Some(tiles) = f.fields.get(index) else {
            return Err(ArrayError::Format {
                object: metadata(),
                source: TileDbError::invalid(
                    "fragment metadata",
                    format!("no tiles of {}", field_name(&self.schema, index)),
                ),
            });
        };
        let (starts, file) = match kind {
            TileKind::Data => (&tiles.data, f.footer.file_sizes[index]),
            TileKind::Var => (&tiles.var, f.footer.file_var_sizes[index]),
            TileKind::Validity => (&tiles.validity, f.footer.file_validity_sizes[index]),
        };
        let path = &tiles.files[kind as usize];
        let cells = self.cells_in_tile(fragment, tile);
        let len = match kind {
            TileKind::Data => match self.is_var(field) {
                true => cells.saturating_mul(8),
                false => cells.saturating_mul(self.cell_size(field)),
            },
            TileKind::Var => tiles.var_sizes.get(tile).copied().unwrap_or(0),
            TileKind::Validity => cells,
        };
        let start = starts.get(tile).copied();
        let end = starts.get(tile + 1).copied().unwrap_or(file);
        let stored = match start {
            Some(start) if start <= end && end <= file => start..end,
            _ => {
                return Err(ArrayError::Format {
                    object: metadata(),
                    source: TileDbError::invalid(
                        format!("{path} tile {tile}"),
                        format!("offsets {start:?}..{end} outside the file's {file} bytes"),
                    ),
                })
            }
        };
        let stored_len = stored.end - stored.start;
        if len.max(stored_len) > MAX_TILE_BYTES {
            return Err(ArrayError::Format {
                object: metadata(),
                source: TileDbError::invalid(
                    format!("{path} tile {tile}"),
                    format!(
                        "{stored_len} bytes stored, {len} decoded: more than the \
                         {MAX_TILE_BYTES} packfs reads in one tile"
                    ),
                ),
            });
        }
        let codec = self.codecs[fragment][index][kind as usize].clone();
        Ok(RecordRef {
            object: ObjectRef {
                path: path.clone(),
                len: file,
                drop_behind: false,
                then: None,
            },
            compressed: stored.end - stored.start,
            stored,
            len,
            codec: RecordCodec::Tile(codec),
        })
    }

    /// Whether `field` is var-sized.
    pub fn is_var(&self, field: Field) -> bool {
        match field {
            Field::Attribute(i) => self.schema.attributes[i].is_var(),
            Field::Dimension(i) => self.schema.dimensions[i].is_var(),
            Field::Timestamps => false,
        }
    }

    /// Bytes per cell of fixed-size `field`.
    pub fn cell_size(&self, field: Field) -> u64 {
        match field {
            Field::Attribute(i) => self.schema.attributes[i].cell_size() as u64,
            Field::Dimension(i) => self.schema.dimensions[i].cell_size() as u64,
            Field::Timestamps => 8,
        }
    }

    /// Whether `field` is a nullable attribute.
    pub(crate) fn is_nullable(&self, field: Field) -> bool {
        matches!(field, Field::Attribute(i) if self.schema.attributes[i].nullable)
    }
}

/// How messages name the field at per-field `index` of a fragment.
fn field_name(schema: &ArraySchema, index: usize) -> String {
    let attributes = schema.attributes.len();
    match index.checked_sub(attributes + 1) {
        _ if index < attributes => format!("attribute {:?}", schema.attributes[index].name),
        Some(d) if d < schema.dimensions.len() => {
            format!("dimension {:?}", schema.dimensions[d].name)
        }
        Some(_) => "timestamps".to_string(),
        None => "coordinates".to_string(),
    }
}

/// Cells in every tile of a dense array: the product of the tile extents.
pub(crate) fn dense_tile_cells(schema: &ArraySchema) -> u64 {
    schema
        .dimensions
        .iter()
        .map(|d| {
            d.tile_extent.as_deref().map_or(1, |e| {
                int_value(d.datatype, e).clamp(1, i128::from(u32::MAX)) as u64
            })
        })
        .fold(1, u64::saturating_mul)
}

/// The integer in `bytes`, a value of `datatype` (an integer type).
pub(crate) fn int_value(datatype: Datatype, bytes: &[u8]) -> i128 {
    let mut le = [0u8; 16];
    let n = bytes.len().min(16);
    le[..n].copy_from_slice(&bytes[..n]);
    if datatype.is_signed() && n > 0 && bytes[n - 1] & 0x80 != 0 {
        le[n..].fill(0xff);
    }
    i128::from_le_bytes(le)
}

fn is_timestamped(name: &str) -> bool {
    TimestampedName::parse(name).is_some()
}

fn schema_dir(store: &Store) -> Path {
    store.layout().root().clone().join("__schema")
}

/// Refuses what this reader cannot show correctly.
fn check_supported(schema: &ArraySchema) -> Result<(), String> {
    use packfs_format::tiledb::schema::Layout;
    if schema.array_type == ArrayType::Sparse && schema.cell_order == Layout::Hilbert {
        return Err("sparse arrays in Hilbert cell order are not read by packfs".into());
    }
    if schema.array_type == ArrayType::Dense {
        if let Some(d) = schema.dimensions.iter().find(|d| !d.datatype.is_integer()) {
            return Err(format!(
                "dense dimension {:?} is not an integer type",
                d.name
            ));
        }
    }
    Ok(())
}

/// The names of the fragments committed, as a read at `visible` times
/// sees them: `.wrt` commit files and the write entries of consolidated
/// commits (`.con`) files, less the fragments a vacuum file (`.vac`) the
/// read sees lists (those a consolidation replaced: a read at a time
/// before the consolidation still sees them). Delete commits a read sees
/// are refused: packfs does not evaluate delete conditions.
async fn committed_fragments(
    store: &Store,
    visible: &impl Fn(u64) -> bool,
    unsupported_since: &impl Fn(String) -> ArrayError,
) -> Result<std::collections::HashSet<String>, ArrayError> {
    let dir = store.layout().root().clone().join("__commits");
    let mut committed = std::collections::HashSet::new();
    let mut vacuumed = std::collections::HashSet::new();
    let refuse_delete = |file: &str| {
        unsupported_since(format!(
            "delete commit {file}: arrays with deletes are not read by packfs"
        ))
    };
    for object in store.list_dir(&dir).await? {
        let Some(file) = object.location.filename() else {
            continue;
        };
        let Some((stem, ext)) = file.rsplit_once('.') else {
            continue;
        };
        let Some(stamp) = TimestampedName::parse(stem) else {
            continue;
        };
        match ext {
            "wrt" => {
                committed.insert(stem.to_string());
            }
            "del" if visible(stamp.t2) => return Err(refuse_delete(file)),
            "vac" if visible(stamp.t2) => {
                let bytes = store.get(&object.location).await?;
                for line in String::from_utf8_lossy(&bytes).lines() {
                    let name = line
                        .trim_end_matches('/')
                        .rsplit('/')
                        .next()
                        .unwrap_or(line);
                    vacuumed.insert(name.to_string());
                }
            }
            "con" => {
                let bytes = store.get(&object.location).await?;
                for line in consolidated_lines(&bytes) {
                    let name = line.rsplit('/').next().unwrap_or(line);
                    let (stem, ext) = name.rsplit_once('.').unwrap_or((name, ""));
                    let seen = TimestampedName::parse(stem).is_some_and(|s| visible(s.t2));
                    match ext {
                        "wrt" => {
                            committed.insert(stem.to_string());
                        }
                        "del" if seen => return Err(refuse_delete(&format!("{name} (in {file})"))),
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    committed.retain(|name| !vacuumed.contains(name));
    Ok(committed)
}

/// The URI lines of a consolidated commits file. A delete or update
/// entry's line is followed by its condition (a `u64` size and that many
/// bytes), which is skipped; a malformed rest ends the list.
fn consolidated_lines(bytes: &[u8]) -> Vec<&str> {
    let mut lines = Vec::new();
    let mut rest = bytes;
    while let Some(end) = rest.iter().position(|&b| b == b'\n') {
        let Ok(line) = std::str::from_utf8(&rest[..end]) else {
            break;
        };
        rest = &rest[end + 1..];
        if line.ends_with(".del") || line.ends_with(".upd") {
            let Some(size) = rest.get(..8) else { break };
            let size = u64::from_le_bytes(size.try_into().expect("8 bytes"));
            match usize::try_from(size).ok().and_then(|n| rest.get(8 + n..)) {
                Some(after) => rest = after,
                None => rest = &[],
            }
        }
        if !line.is_empty() {
            lines.push(line);
        }
    }
    lines
}

/// The schema fragment `first` (if any) was written with, or the newest
/// schema of the array; and its file name.
async fn load_schema(
    store: &Store,
    first: Option<&String>,
    fragments_dir: &Path,
) -> Result<(String, ArraySchema), ArrayError> {
    let dir = schema_dir(store);
    let name = match first {
        Some(fragment) => {
            let path = fragments_dir
                .clone()
                .join(fragment.as_str())
                .join("__fragment_metadata.tdb");
            let bytes = store.get(&path).await?;
            // Only the schema name is needed here; the footer is decoded
            // again, against the schema, with the fragment.
            Footer::schema_name(&bytes).map_err(|source| ArrayError::Format {
                object: path.to_string(),
                source,
            })?
        }
        None => {
            let mut names: Vec<String> = store
                .list_dir(&dir)
                .await?
                .iter()
                .filter_map(|o| o.location.filename().map(str::to_string))
                .filter(|n| is_timestamped(n))
                .collect();
            names.sort_by_key(|n| TimestampedName::parse(n).map(|s| (s.t1, s.t2)));
            names.pop().ok_or_else(|| ArrayError::Unsupported {
                location: store.location().to_string(),
                detail: "no schema in __schema/".into(),
            })?
        }
    };
    let path = dir.clone().join(name.as_str());
    let bytes = store.get(&path).await?;
    let format = |source| ArrayError::Format {
        object: path.to_string(),
        source,
    };
    let decoded = tile::decode_generic_tile(&bytes, MAX_METADATA_TILE).map_err(format)?;
    let schema = ArraySchema::decode(&decoded.data).map_err(format)?;
    Ok((name, schema))
}

/// A fragment's metadata: its footer, and where each field's tiles are.
async fn load_fragment(
    store: &Store,
    (schema_name, schema): (&str, &ArraySchema),
    fragments_dir: &Path,
    stamp: TimestampedName,
    name: String,
) -> Result<Fragment, ArrayError> {
    let dir = fragments_dir.clone().join(name.as_str());
    let path = dir.clone().join("__fragment_metadata.tdb");
    let bytes = store.get(&path).await?;
    let format = |source| ArrayError::Format {
        object: path.to_string(),
        source,
    };
    // A footer is laid out by its schema's fields: one written with
    // another schema (an evolved array) cannot be read with this one.
    let written_with = Footer::schema_name(&bytes).map_err(format)?;
    if written_with != schema_name {
        return Err(ArrayError::UnsupportedSince {
            location: store.location().to_string(),
            detail: format!(
                "fragment {name} was written with schema {written_with}, others with \
                 {schema_name}: arrays whose schema evolved are not read by packfs"
            ),
        });
    }
    let footer = Footer::decode(&bytes, schema).map_err(format)?;
    if footer.dense != (schema.array_type == ArrayType::Dense) {
        return Err(format(TileDbError::invalid(
            "fragment metadata footer",
            "dense flag disagrees with the array schema",
        )));
    }
    let list = |offset: u64, what: &str| -> Result<Vec<u64>, ArrayError> {
        let at = usize::try_from(offset)
            .ok()
            .filter(|&at| at <= bytes.len())
            .ok_or_else(|| {
                format(TileDbError::invalid(
                    what,
                    format!("offset {offset} past the file's {} bytes", bytes.len()),
                ))
            })?;
        let decoded = tile::decode_generic_tile(&bytes[at..], MAX_METADATA_TILE)
            .map_err(|e| format(e.within(what)))?;
        decode_u64_list(&decoded.data, what).map_err(format)
    };
    // Attributes, the legacy coordinates slot, dimensions, and the
    // timestamps of a fragment consolidated with them.
    let timestamps = schema.attributes.len() + 1 + schema.dimensions.len();
    let fields = timestamps + usize::from(footer.includes_timestamps);
    let mut tiles = Vec::with_capacity(fields);
    for index in 0..fields {
        let legacy_coords = index == schema.attributes.len();
        let attribute = schema.attributes.get(index);
        let var = match attribute {
            Some(a) => a.is_var(),
            None if legacy_coords || index == timestamps => false,
            None => schema.dimensions[index - schema.attributes.len() - 1].is_var(),
        };
        let stem = match index.checked_sub(schema.attributes.len() + 1) {
            None => format!("a{index}"),
            Some(d) if index < timestamps => format!("d{d}"),
            Some(_) => "t".to_string(),
        };
        let mut field = FieldTiles {
            files: ["", "_var", "_validity"]
                .map(|suffix| Arc::new(dir.clone().join(format!("{stem}{suffix}.tdb")))),
            ..FieldTiles::default()
        };
        // Dense fragments store no coordinates.
        let dense_dimension = attribute.is_none() && schema.array_type == ArrayType::Dense;
        if legacy_coords || dense_dimension {
            tiles.push(field);
            continue;
        }
        let what = format!("tile offsets of field {index}");
        field.data = list(footer.tile_offsets[index], &what)?;
        if var {
            field.var = list(footer.tile_var_offsets[index], &what)?;
            field.var_sizes = list(footer.tile_var_sizes[index], &what)?;
        }
        if attribute.is_some_and(|a| a.nullable) {
            field.validity = list(footer.tile_validity_offsets[index], &what)?;
        }
        tiles.push(field);
    }
    // Every field must have one tile per tile of the fragment.
    let count = tiles
        .iter()
        .find(|t| !t.data.is_empty())
        .map_or(0, |t| t.data.len());
    let expected = match schema.array_type {
        ArrayType::Sparse => Some(footer.sparse_tile_num as usize),
        ArrayType::Dense => None,
    };
    for (index, t) in tiles.iter().enumerate() {
        let coordinates = index >= schema.attributes.len();
        if coordinates
            && (index == schema.attributes.len() || schema.array_type == ArrayType::Dense)
        {
            continue;
        }
        let var_ok = t.var.is_empty() || (t.var.len() == count && t.var_sizes.len() == count);
        let validity_ok = t.validity.is_empty() || t.validity.len() == count;
        if t.data.len() != count || !var_ok || !validity_ok || expected.is_some_and(|e| e != count)
        {
            return Err(format(TileDbError::invalid(
                "fragment metadata",
                format!("field {index} lists a different number of tiles than the fragment has"),
            )));
        }
    }
    Ok(Fragment {
        name,
        stamp,
        footer,
        dir,
        fields: tiles,
        tile_count: count,
    })
}

/// The codecs of each field's data, var and validity tiles in a fragment
/// of format `version`.
fn field_codecs(
    schema: &ArraySchema,
    version: u32,
) -> Result<Vec<[Arc<TileCodec>; 3]>, TileDbError> {
    let offsets = Arc::new(TileCodec {
        pipeline: schema.offsets_filters.clone(),
        tile: TileType::offsets(version),
    });
    let validity = Arc::new(TileCodec {
        pipeline: schema.validity_filters.clone(),
        tile: TileType::validity(version),
    });
    let codecs = |pipeline: &FilterPipeline, datatype: Datatype, var: bool, cell_size: usize| {
        let tile = match var {
            true => TileType::var_data(datatype, version)?,
            false => TileType::fixed(datatype, cell_size as u64, version),
        };
        let values = Arc::new(TileCodec {
            pipeline: pipeline.clone(),
            tile,
        });
        let data = match var {
            true => offsets.clone(),
            false => values.clone(),
        };
        Ok::<_, TileDbError>([data, values, validity.clone()])
    };
    let mut all = Vec::new();
    for a in &schema.attributes {
        all.push(codecs(&a.filters, a.datatype, a.is_var(), a.cell_size())?);
    }
    all.push(codecs(&schema.coords_filters, Datatype::UINT8, false, 1)?);
    for (i, d) in schema.dimensions.iter().enumerate() {
        all.push(codecs(
            schema.dimension_filters(i),
            d.datatype,
            d.is_var(),
            d.cell_size(),
        )?);
    }
    // Write times take the coordinate filters, as TileDB's special
    // attributes do.
    all.push(codecs(&schema.coords_filters, Datatype::UINT64, false, 8)?);
    Ok(all)
}

/// The most bytes one data tile may occupy or decode to: the fragment
/// metadata says how many, and a corrupt value must not become an
/// allocation.
const MAX_TILE_BYTES: u64 = 1 << 32;

/// Generic tiles of metadata (a schema, a list of tile offsets) decode to
/// at most this many bytes: a corrupt header cannot make a reader
/// allocate more.
const MAX_METADATA_TILE: usize = 1 << 30;
