//! TileDB tiles: a data tile as a fragment's files store it
//! (`format_spec/tile.md`) and a generic tile, the self-describing tile
//! that schemas and fragment metadata sections are made of
//! (`format_spec/generic_tile.md`). Both decode to the bytes TileDB was
//! given; neither panics on any input, so they are the fuzzing entry
//! points of the format's binary side.

use super::datatype::{Datatype, TileType};
use super::filter::FilterPipeline;
use super::{Cursor, TileDbError};

/// Bytes of a chunk header: original, filtered and metadata lengths.
const CHUNK_HEADER: usize = 12;

/// Decodes one data tile, all of `bytes` (chunk count `u64`, then per
/// chunk its original, filtered and metadata lengths `u32`, metadata and
/// filtered data), through `pipeline`. The chunks' original lengths may add
/// up to at most `max_size`, so a corrupt header cannot make this allocate
/// more than the caller expects (fragment metadata gives the exact size of
/// fixed tiles and of var tiles). Never panics.
pub fn decode_tile(
    bytes: &[u8],
    pipeline: &FilterPipeline,
    tile: &TileType,
    max_size: usize,
) -> Result<Vec<u8>, TileDbError> {
    pipeline.ensure_supported(tile)?;
    let mut cursor = Cursor::new(bytes, "tile");
    // A count past the bytes ends in Truncated at the first missing chunk.
    let count = cursor.u64()?;
    let mut chunks = Vec::with_capacity(cursor.remaining() / CHUNK_HEADER);
    let mut total: usize = 0;
    for index in 0..count {
        let at = cursor.offset();
        let original = cursor.u32()? as usize;
        let filtered = cursor.u32()? as usize;
        let metadata_len = cursor.u32()? as usize;
        let metadata = cursor.take(metadata_len)?;
        let data = cursor.take(filtered)?;
        total = total.saturating_add(original);
        if total > max_size {
            return Err(TileDbError::invalid(
                "tile",
                format!(
                    "chunk {index} at offset {at} takes the tile past {max_size} bytes, \
                     the most it may hold"
                ),
            ));
        }
        chunks.push((at, original, metadata, data));
    }
    if cursor.remaining() != 0 {
        return Err(TileDbError::invalid(
            "tile",
            format!(
                "{} bytes after the last chunk at offset {}",
                cursor.remaining(),
                cursor.offset()
            ),
        ));
    }
    let mut out = Vec::with_capacity(total);
    for (index, (at, original, metadata, data)) in chunks.into_iter().enumerate() {
        let chunk = pipeline
            .unfilter_chunk(tile, metadata, data, original)
            .map_err(|e| e.within(&format!("tile chunk {index} at offset {at}")))?;
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

/// A decoded generic tile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GenericTile {
    /// Format version of the writer (a schema's or fragment's version).
    pub version: u32,
    /// Datatype the tile was filtered as.
    pub datatype: Datatype,
    /// Cell size the tile was filtered with.
    pub cell_size: u64,
    /// The unfiltered bytes.
    pub data: Vec<u8>,
    /// Bytes the tile occupies from the start of the slice, header
    /// included: where the next generic tile of a file starts.
    pub len: usize,
}

/// Bytes of a generic tile's header before its filter pipeline.
const GENERIC_HEADER: usize = 34;

/// Decodes the generic tile at the start of `bytes` (version `u32`,
/// persisted size `u64`, tile size `u64`, datatype `u8`, cell size `u64`,
/// encryption type `u8`, pipeline size `u32`, pipeline, then the tile);
/// bytes after it are left alone. A tile larger than `max_size` once
/// unfiltered is refused before anything is allocated for it. Never panics.
pub fn decode_generic_tile(bytes: &[u8], max_size: usize) -> Result<GenericTile, TileDbError> {
    let what = "generic tile";
    let mut cursor = Cursor::new(bytes, what);
    let version = cursor.u32()?;
    let persisted = cursor.u64()?;
    let tile_size = cursor.u64()?;
    let datatype = Datatype(cursor.u8()?);
    let cell_size = cursor.u64()?;
    let encryption = cursor.u8()?;
    let pipeline_len = cursor.u32()?;
    debug_assert_eq!(cursor.offset(), GENERIC_HEADER);
    if encryption != 0 {
        return Err(TileDbError::invalid(
            what,
            format!(
                "encrypted (encryption type {encryption}, AES-256-GCM); \
                 packfs reads only unencrypted arrays"
            ),
        ));
    }
    let size = usize::try_from(tile_size)
        .ok()
        .filter(|&size| size <= max_size)
        .ok_or_else(|| {
            TileDbError::invalid(
                what,
                format!("tile size {tile_size} is more than the {max_size} bytes allowed"),
            )
        })?;
    let pipeline_bytes = cursor.take(pipeline_len as usize)?;
    let pipeline = FilterPipeline::parse(pipeline_bytes)
        .map_err(|e| e.within(&format!("{what} at offset {GENERIC_HEADER}")))?;
    let at = cursor.offset();
    let filtered = cursor.take_u64_len(persisted)?;
    let tile = TileType::fixed(datatype, cell_size, version);
    let data = decode_tile(filtered, &pipeline, &tile, size)
        .map_err(|e| e.within(&format!("{what} data at offset {at}")))?;
    if data.len() != size {
        return Err(TileDbError::invalid(
            what,
            format!(
                "unfiltered to {} bytes, the header says {tile_size}",
                data.len()
            ),
        ));
    }
    Ok(GenericTile {
        version,
        datatype,
        cell_size,
        data,
        len: cursor.offset(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tiledb::filter::Filter;
    use std::io::Read;

    /// Files written by TileDB 2.30 through `make_filter_fixtures.py`.
    const FIXTURES: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/tiledb/filters/"
    );

    fn fixture(name: &str) -> Vec<u8> {
        std::fs::read(format!("{FIXTURES}{name}")).unwrap_or_else(|e| panic!("{name}: {e}"))
    }

    fn expected(name: &str) -> Vec<u8> {
        let plain = format!("{FIXTURES}{name}.expected");
        if let Ok(bytes) = std::fs::read(&plain) {
            return bytes;
        }
        let mut out = Vec::new();
        flate2::read::ZlibDecoder::new(&fixture(&format!("{name}.expected.zlib"))[..])
            .read_to_end(&mut out)
            .unwrap();
        out
    }

    struct Case {
        name: String,
        tile: TileType,
    }

    fn manifest() -> Vec<Case> {
        String::from_utf8(fixture("MANIFEST"))
            .unwrap()
            .lines()
            .filter(|line| !line.starts_with('#') && !line.is_empty())
            .map(|line| {
                let f: Vec<&str> = line.split(' ').collect();
                let datatype = Datatype(f[1].parse().unwrap());
                let version = f[4].parse().unwrap();
                let tile = if f[3] == "1" {
                    TileType::var_data(datatype, version).unwrap()
                } else {
                    TileType::fixed(datatype, f[2].parse().unwrap(), version)
                };
                Case {
                    name: f[0].to_string(),
                    tile,
                }
            })
            .collect()
    }

    fn pipeline(name: &str) -> FilterPipeline {
        FilterPipeline::parse(&fixture(&format!("{name}.pipeline"))).unwrap()
    }

    #[test]
    fn every_fixture_tile_decodes_to_the_values_written() {
        let cases = manifest();
        assert!(cases.len() >= 25, "{} cases", cases.len());
        for case in cases {
            let want = expected(&case.name);
            let got = decode_tile(
                &fixture(&format!("{}.tdb", case.name)),
                &pipeline(&case.name),
                &case.tile,
                want.len(),
            )
            .unwrap_or_else(|e| panic!("{}: {e}", case.name));
            assert!(got == want, "{}: decoded bytes differ", case.name);
        }
    }

    #[test]
    fn default_pipelines_are_zstd_for_offsets_and_coords_and_rle_for_validity() {
        let zstd = vec![Filter::Zstd { level: -1 }];
        assert_eq!(pipeline("default_offsets").filters, zstd);
        assert_eq!(pipeline("default_coords").filters, zstd);
        assert_eq!(
            pipeline("default_validity").filters,
            vec![Filter::Rle { level: -1 }]
        );
        assert!(pipeline("default_var_data").filters.is_empty());
        assert_eq!(pipeline("default_var_data").max_chunk_size, 64 * 1024);
    }

    #[test]
    fn a_tile_over_the_size_limit_is_refused_before_decoding() {
        let bytes = fixture("zstd_two_chunks_int32.tdb");
        let tile = TileType::fixed(Datatype::INT32, 4, 22);
        let err = decode_tile(
            &bytes,
            &pipeline("zstd_two_chunks_int32"),
            &tile,
            80_000 - 1,
        )
        .unwrap_err();
        assert!(err.to_string().contains("most it may hold"), "{err}");
    }

    #[test]
    fn a_truncated_tile_is_truncated_not_a_panic() {
        let bytes = fixture("gzip_int32.tdb");
        let tile = TileType::fixed(Datatype::INT32, 4, 22);
        for len in 0..bytes.len() {
            let err =
                decode_tile(&bytes[..len], &pipeline("gzip_int32"), &tile, 1 << 20).unwrap_err();
            assert!(
                matches!(err, TileDbError::Truncated { .. }),
                "{len} bytes: {err}"
            );
        }
        let mut longer = bytes.clone();
        longer.push(0);
        let err = decode_tile(&longer, &pipeline("gzip_int32"), &tile, 1 << 20).unwrap_err();
        assert!(err.to_string().contains("after the last chunk"), "{err}");
    }

    #[test]
    fn the_schema_is_one_generic_tile() {
        let bytes = fixture("schema.tdb");
        let tile = decode_generic_tile(&bytes, 1 << 20).unwrap();
        assert_eq!(tile.data, expected("schema"));
        assert_eq!(tile.len, bytes.len());
        assert_eq!(tile.version, 22);
        assert_eq!(tile.datatype, Datatype::CHAR);
        assert_eq!(tile.cell_size, 1);
        // Bytes after the tile are not its business.
        let mut longer = bytes.clone();
        longer.extend_from_slice(b"next");
        assert_eq!(
            decode_generic_tile(&longer, 1 << 20).unwrap().len,
            bytes.len()
        );
        let err = decode_generic_tile(&bytes, tile.data.len() - 1).unwrap_err();
        assert!(err.to_string().contains("allowed"), "{err}");
    }

    #[test]
    fn fragment_metadata_is_generic_tiles_up_to_the_footer() {
        let bytes = fixture("fragment_metadata.tdb");
        let footer_len = u64::from_le_bytes(bytes[bytes.len() - 8..].try_into().unwrap());
        let end = bytes.len() - 8 - footer_len as usize;
        let mut at = 0;
        let mut tiles = 0;
        while at < end {
            let tile = decode_generic_tile(&bytes[at..end], 1 << 20)
                .unwrap_or_else(|e| panic!("tile {tiles} at {at}: {e}"));
            assert_eq!(tile.version, 22);
            at += tile.len;
            tiles += 1;
        }
        assert_eq!(at, end);
        assert!(tiles >= 5, "{tiles} tiles");
    }

    #[test]
    fn an_encrypted_generic_tile_is_refused_clearly() {
        let mut bytes = fixture("schema.tdb");
        bytes[29] = 1;
        let err = decode_generic_tile(&bytes, 1 << 20).unwrap_err();
        assert!(err.to_string().contains("encrypted"), "{err}");
    }

    #[test]
    fn a_generic_tile_cut_anywhere_is_an_error() {
        let bytes = fixture("schema.tdb");
        for len in 0..bytes.len() {
            assert!(
                decode_generic_tile(&bytes[..len], 1 << 20).is_err(),
                "{len}"
            );
        }
    }

    mod corrupt {
        use super::*;
        use proptest::prelude::*;

        fn flip(mut bytes: Vec<u8>, edits: &[(usize, u8)]) -> Vec<u8> {
            for &(at, value) in edits {
                let len = bytes.len();
                bytes[at % len] ^= value;
            }
            bytes
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(512))]

            #[test]
            fn corrupt_fixture_tiles_never_panic(
                case in 0usize..64,
                edits in proptest::collection::vec((any::<usize>(), 1u8..), 1..4),
                cut in any::<usize>(),
            ) {
                let cases = manifest();
                let case = &cases[case % cases.len()];
                let bytes = flip(fixture(&format!("{}.tdb", case.name)), &edits);
                let bytes = &bytes[..bytes.len() - cut % 2 * (cut % bytes.len())];
                let _ = decode_tile(bytes, &pipeline(&case.name), &case.tile, 1 << 20);
                let pipe = flip(fixture(&format!("{}.pipeline", case.name)), &edits);
                if let Ok(pipe) = FilterPipeline::parse(&pipe) {
                    let _ = decode_tile(
                        &fixture(&format!("{}.tdb", case.name)), &pipe, &case.tile, 1 << 20);
                }
            }

            #[test]
            fn corrupt_generic_tiles_never_panic(
                edits in proptest::collection::vec((any::<usize>(), 1u8..), 1..4),
            ) {
                let bytes = flip(fixture("schema.tdb"), &edits);
                let _ = decode_generic_tile(&bytes, 1 << 20);
            }

            #[test]
            fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
                let _ = decode_generic_tile(&bytes, 1 << 20);
                let tile = TileType::fixed(Datatype::INT64, 8, 22);
                if let Ok(pipe) = FilterPipeline::parse(&bytes) {
                    let _ = decode_tile(&fixture("none_int32.tdb"), &pipe, &tile, 1 << 20);
                }
            }
        }
    }
}
