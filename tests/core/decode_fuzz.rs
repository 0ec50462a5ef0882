//! The decoders never panic and never allocate what a hostile length field
//! claims: random bytes, mutations of valid encodings, and headers that
//! announce huge strings, arrays and maps all end in an error naming what
//! was being decoded (or, for a lucky mutation, a valid value).

use packfs_format::engine::{ByteRangeMap, SourceIndex};
use packfs_format::{FragmentEntry, ItemManifest, Manifest, ObjectId, Placement, Track, TrackItem};
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;

/// Every decoder of the on-store format, run on `bytes`.
fn decode_all(bytes: &[u8]) {
    let _ = Manifest::decode(bytes, "fuzz");
    let _ = Track::decode(bytes, "fuzz");
    let _ = ItemManifest::decode(bytes, "fuzz");
    let _ = packfs_format::decode_ref(bytes, "fuzz");
}

/// Valid encodings to mutate: a Manifest, a Track with each entry shape,
/// an ItemManifest and a ref.
fn seeds() -> Vec<Vec<u8>> {
    let id = ObjectId::of(b"seed");
    let entry = |placement, t| FragmentEntry {
        t_start: t,
        t_end: t + 1,
        byte_size: 10,
        address: id,
        placement,
    };
    let items = vec![
        TrackItem {
            name: "a/b.jpg".into(),
            media_type: "image/jpeg".into(),
            attrs: Default::default(),
            entry: entry(Placement::Packed { offset: 0 }, 0),
        },
        TrackItem {
            name: "c".into(),
            media_type: "text/plain".into(),
            attrs: Default::default(),
            entry: entry(Placement::Whole, 1),
        },
    ];
    let track = Track::new(items, Vec::new(), "seed").unwrap();
    let manifest = Manifest {
        parents: vec![id],
        timelines: vec!["t".into()],
        tracks: vec![packfs_format::TrackEntry {
            timeline: "t".into(),
            modality: "m".into(),
            kind: "fragment".into(),
            track: id,
        }],
        ts_unix_ns: 1,
        writer: "seed".into(),
    };
    let item_manifest = ItemManifest {
        chunks: vec![packfs_format::Chunk {
            address: id,
            size: 5,
        }],
    };
    vec![
        manifest.encode(),
        track.encode(),
        item_manifest.encode(),
        format!("{}\n", id.to_hex()).into_bytes(),
    ]
}

#[test]
fn hostile_lengths_fail_without_allocating_them() {
    // Major types 2 (bytes), 3 (text), 4 (array), 5 (map) with a 64-bit
    // length of 2^64 - 1, alone and inside a map.
    for major in [0x5b_u8, 0x7b, 0x9b, 0xbb] {
        let mut alone = vec![major];
        alone.extend([0xff; 8]);
        decode_all(&alone);
        let mut nested = vec![0xa1, 0x61, b'v', major];
        nested.extend([0xff; 8]);
        decode_all(&nested);
    }
    // Deep nesting: 100,000 nested arrays.
    decode_all(&vec![0x81; 100_000]);
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 2000,
        // Failures found are kept (and re-run first) in proptest-regressions/
        // at the package root (where cargo runs tests), by this file's path
        // below tests/.
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "proptest-regressions/core/decode_fuzz.txt",
        ))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
        decode_all(&bytes);
    }

    #[test]
    fn mutated_valid_encodings_never_panic(
        which in 0usize..4,
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut bytes = seeds()[which].clone();
        for (at, value) in flips {
            let i = at.index(bytes.len());
            bytes[i] = value;
        }
        decode_all(&bytes);
        let keep = cut.index(bytes.len() + 1);
        decode_all(&bytes[..keep]);
    }

    #[test]
    fn byte_range_map_normalization_never_panics(
        segments in proptest::collection::vec((0u64..1 << 40, 0u64..1 << 20, 0usize..4, 0u64..1 << 40, any::<bool>()), 0..32),
        len in 0u64..1 << 41,
    ) {
        let mut map = ByteRangeMap::new(len);
        for (dest, size, source, offset, pad) in segments {
            if pad {
                map.push_pad(dest, size);
            } else {
                map.push_data(dest, size, SourceIndex(source), offset);
            }
        }
        let _ = map.normalize();
    }
}
