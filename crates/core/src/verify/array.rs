//! `packfs verify` of a TileDB array: every tile of every fragment a read
//! sees is read and run through its filters (checksum filters verify
//! their digests), decoded sizes are checked against the fragment
//! metadata, and var tiles' cell offsets against their tile.

use futures::StreamExt;
use packfs_format::tiledb::schema::ArrayType;

use crate::array::cells::var_bounds;
use crate::array::{Array, Field, TileKind};
use crate::cache::BlockCache;

/// Tiles read at once.
const TILES_AT_ONCE: usize = 8;

/// What verification found.
#[derive(Debug, Default)]
pub struct Report {
    pub fragments: usize,
    pub tiles: u64,
    /// Decoded bytes checked.
    pub bytes: u64,
    /// One line per damaged tile, naming its file and what is wrong.
    pub problems: Vec<String>,
}

/// Verifies every tile of `array`, reading through `cache`.
pub async fn verify(array: &Array, cache: &BlockCache) -> Report {
    let schema = array.schema();
    let mut fields: Vec<Field> = (0..schema.attributes.len()).map(Field::Attribute).collect();
    if schema.array_type == ArrayType::Sparse {
        fields.extend((0..schema.dimensions.len()).map(Field::Dimension));
    }
    let mut work = Vec::new();
    for (f, fragment) in array.fragments().iter().enumerate() {
        let timestamps = fragment
            .footer
            .includes_timestamps
            .then_some(Field::Timestamps);
        for &field in fields.iter().chain(&timestamps) {
            for t in 0..fragment.tile_count() {
                work.push((f, field, t));
            }
        }
    }
    let results: Vec<(u64, u64, Option<String>)> = futures::stream::iter(work)
        .map(|(f, field, t)| check_tile(array, cache, f, field, t))
        .buffered(TILES_AT_ONCE)
        .collect()
        .await;
    let mut report = Report {
        fragments: array.fragments().len(),
        ..Report::default()
    };
    for (tiles, bytes, problems) in results {
        report.tiles += tiles;
        report.bytes += bytes;
        report.problems.extend(problems);
    }
    report
}

/// Tile `t` of `field` in fragment `f`, all its kinds: tiles and bytes
/// decoded, and the first problem found (which ends the check).
async fn check_tile(
    array: &Array,
    cache: &BlockCache,
    f: usize,
    field: Field,
    t: usize,
) -> (u64, u64, Option<String>) {
    let mut kinds = vec![TileKind::Data];
    if array.is_var(field) {
        kinds.push(TileKind::Var);
    }
    if array.is_nullable(field) {
        kinds.push(TileKind::Validity);
    }
    let (mut tiles, mut bytes) = (0, 0);
    let mut decoded = Vec::new();
    for kind in kinds {
        let record = match array.tile(f, field, kind, t) {
            Ok(record) => record,
            Err(e) => return (tiles, bytes, Some(e.to_string())),
        };
        match cache.read_record(&record, 0, record.len).await {
            Ok(data) => {
                tiles += 1;
                bytes += data.len() as u64;
                decoded.push((record.object.path, data));
            }
            Err(e) => {
                let problem = format!("{} tile {t}: {e}", record.object.path);
                return (tiles, bytes, Some(problem));
            }
        }
    }
    let mut problem = None;
    if let [(offsets_file, offsets), (_, values), ..] = &decoded[..] {
        if array.is_var(field) {
            let cells = array.cells_in_tile(f, t) as usize;
            if let Err(detail) = var_bounds(offsets, values.len() as u64, cells) {
                problem = Some(format!("{offsets_file} tile {t}: cell offsets: {detail}"));
            }
        }
    }
    (tiles, bytes, problem)
}
