//! Replays the committed fuzz corpus (`fuzz/corpus/<target>/`) through the
//! fuzz targets' own bodies, so CI checks every input the fuzzer kept on
//! stable, without nightly or cargo-fuzz. See `fuzz/README.md`.
//!
//! `cargo test --test core -- --ignored regenerate_seeds` writes the
//! valid encodings the corpus was grown from, where missing.

use std::fs;
use std::path::{Path, PathBuf};

use ciborium::value::Value;
use packfs_format::{
    encode_ref, read_columns, read_pack_page, Attrs, Chunk, Columns, FragmentEntry, ItemManifest,
    Manifest, ObjectId, PageShape, Placement, Track, TrackDir, TrackEntry, TrackItem, TrackRoot,
};

#[path = "../../fuzz/src/lib.rs"]
mod targets;

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus")
}

/// The files directly in `dir`, sorted so failures list stably.
fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_file())
        .collect();
    files.sort();
    files
}

#[test]
fn corpus_replays_without_panics() {
    let dir = corpus_dir();
    // A target without a corpus, or a corpus without a target, would
    // silently go unchecked.
    let mut on_disk: Vec<String> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    on_disk.sort();
    let mut known: Vec<&str> = targets::TARGETS.iter().map(|(name, _)| *name).collect();
    known.sort();
    assert_eq!(on_disk, known, "fuzz/corpus/ directories vs. fuzz targets");

    let mut failed = Vec::new();
    for (name, body) in targets::TARGETS {
        let files = files_in(&dir.join(name));
        assert!(!files.is_empty(), "fuzz/corpus/{name} has no inputs");
        for file in &files {
            let data = fs::read(file).unwrap();
            // Go on after a panic so one run lists every failing input.
            if std::panic::catch_unwind(|| body(&data)).is_err() {
                failed.push(file.display().to_string());
            }
        }
        println!("{name}: replayed {} inputs", files.len());
    }
    assert!(
        failed.is_empty(),
        "inputs that panic:\n{}",
        failed.join("\n")
    );
}

#[test]
#[ignore = "writes into fuzz/corpus; run by hand"]
fn regenerate_seeds() {
    for (target, seeds) in seeds() {
        let dir = corpus_dir().join(target);
        fs::create_dir_all(&dir).unwrap();
        let existing: Vec<Vec<u8>> = files_in(&dir)
            .iter()
            .map(|f| fs::read(f).unwrap())
            .collect();
        for seed in seeds.into_iter().filter(|s| !existing.contains(s)) {
            let name = format!("seed-{}", &ObjectId::of(&seed).to_hex()[..16]);
            fs::write(dir.join(name), seed).unwrap();
        }
    }
}

/// The seeds are what they claim: valid encodings, so the fuzzer starts
/// past the decoders' first checks.
#[test]
fn decoder_seeds_decode() {
    for (target, seeds) in seeds() {
        for seed in seeds {
            let decoded = match target {
                "manifest" => Manifest::decode(&seed, target).map(drop),
                "track" => Track::decode(&seed, target).map(drop),
                // A root, a pack page, a name page (a Track whose packs
                // may lie partly on other pages) or an index page.
                "track_page" => TrackRoot::decode(&seed, target)
                    .map(drop)
                    .or_else(|_| read_pack_page(&seed, target).map(drop))
                    .or_else(|_| read_columns(&seed, target, &mut Discard).map(drop))
                    .or_else(|e| index_page(&seed).ok_or(e)),
                "item_manifest" => ItemManifest::decode(&seed, target).map(drop),
                "reference" => packfs_format::decode_ref(&seed, target).map(drop),
                _ => continue,
            };
            decoded.unwrap_or_else(|e| panic!("{target} seed: {e}"));
        }
    }
}

/// `Some` if `bytes` is an index page: a map of kind `fragment-index`
/// listing pages, which a root with one index ref made from them reads.
fn index_page(bytes: &[u8]) -> Option<()> {
    let value: Value = ciborium::from_reader(bytes).ok()?;
    let pages = value
        .as_map()?
        .iter()
        .find(|(k, _)| k.as_text() == Some("pages"))?
        .1
        .as_array()?;
    let field = |page: &Value, i: usize| page.as_array().map(|a| a[i].clone());
    let count = |i| -> Option<u64> {
        pages.iter().try_fold(0u64, |n, p| {
            Some(n + u64::try_from(field(p, i)?.as_integer()?).ok()?)
        })
    };
    let index = packfs_format::IndexRef {
        first: field(pages.first()?, 0)?.as_text()?.to_string(),
        id: ObjectId::of(bytes),
        pages: pages.len() as u64,
        items: count(2)?,
        bytes: count(3)?,
    };
    let mut root = TrackRoot {
        index: vec![index],
        ..TrackRoot::default()
    };
    root.fill_index([bytes], |id| id.to_hex()).ok()
}

/// A Track reader's sink that keeps nothing.
struct Discard;

impl Columns for Discard {
    fn entry(&mut self, _: FragmentEntry) {}
    fn name(&mut self, _: Option<&str>) {}
    fn media_type(&mut self, _: u32) {}
    fn mode(&mut self, _: Option<u16>) {}
    fn mtime(&mut self, _: Option<i64>) {}
}

fn cbor(value: Value) -> Vec<u8> {
    let mut out = Vec::new();
    ciborium::into_writer(&value, &mut out).unwrap();
    out
}

fn text(s: &str) -> Value {
    Value::Text(s.into())
}

fn map(entries: Vec<(&str, Value)>) -> Value {
    Value::Map(entries.into_iter().map(|(k, v)| (text(k), v)).collect())
}

/// Valid inputs per target, each reaching deep into its decoder: every
/// entry shape, retired entries, and the forms other writers use (text
/// addresses, omitted optional fields, unknown keys).
fn seeds() -> Vec<(&'static str, Vec<Vec<u8>>)> {
    let id = |s: &str| ObjectId::of(s.as_bytes());
    let entry = |address, byte_size, placement| FragmentEntry {
        t_start: -1,
        t_end: 1,
        byte_size,
        address,
        placement,
    };
    let item = |name: &str, media_type: &str, entry| TrackItem {
        name: name.into(),
        media_type: media_type.into(),
        attrs: Default::default(),
        entry,
    };
    let packed = |offset| Placement::Packed { offset };

    let manifest = Manifest {
        parents: vec![id("p1"), id("p2")],
        timelines: vec!["train".into(), "val".into()],
        tracks: vec![
            TrackEntry {
                timeline: "train".into(),
                modality: "image".into(),
                kind: "fragment".into(),
                track: id("t1"),
            },
            TrackEntry {
                timeline: "val".into(),
                modality: "label".into(),
                kind: "fragment".into(),
                track: id("t2"),
            },
        ],
        ts_unix_ns: 1_700_000_000_000_000_000,
        writer: "packfs seed".into(),
    };
    let empty_manifest = Manifest {
        parents: vec![],
        timelines: vec![],
        tracks: vec![],
        ts_unix_ns: 0,
        writer: String::new(),
    };
    let foreign_manifest = map(vec![
        ("v", Value::from(1)),
        ("parents", Value::Array(vec![text(&id("p").to_hex())])),
        ("timelines", Value::Array(vec![text("t")])),
        (
            "tracks",
            Value::Array(vec![map(vec![
                ("timeline", text("t")),
                ("modality", text("m")),
                ("track", text(&id("t").to_hex())),
            ])]),
        ),
        ("ts", Value::from(5)),
        ("writer", text("other")),
        ("extra", Value::Null),
    ]);

    // Pack "p" holds a (0..5), b (5..12) and a retired entry (12..15).
    let track = Track::new(
        vec![
            item("a/b.jpg", "image/jpeg", entry(id("p"), 5, packed(0))),
            item("c.txt", "text/plain", entry(id("p"), 7, packed(5))),
            item("copy of a", "image/jpeg", entry(id("p"), 5, packed(0))),
            item("whole", "image/jpeg", entry(id("w"), 9, Placement::Whole)),
            item(
                "big",
                "video/mp4",
                entry(id("im"), 1 << 40, Placement::Chunked),
            ),
        ],
        vec![entry(id("p"), 3, packed(12))],
        "seed",
    )
    .unwrap();
    let empty_track = Track::new(vec![], vec![], "seed").unwrap();
    // Another writer's Track: no names or media types, a text address, and
    // a 5-element entry with is_manifest = false.
    let foreign_track = map(vec![
        ("kind", text("fragment")),
        (
            "object_index",
            Value::Array(vec![
                Value::Array(vec![
                    Value::from(0),
                    Value::from(1),
                    Value::from(4),
                    text(&id("x").to_hex()),
                    Value::Bool(false),
                ]),
                entry(id("q"), 2, packed(0)).to_cbor(),
            ]),
        ),
        ("unknown", Value::Array(vec![Value::Null])),
    ]);

    // Paged: the Track above with directories, cut into pages of about
    // two rows (so packs span pages), and one of whole and chunked items
    // only, whose single name page reads on its own.
    let dir = |name: &str, mode, mtime_ns| TrackDir {
        name: name.into(),
        attrs: Attrs { mode, mtime_ns },
    };
    let with_dirs = track
        .clone()
        .with_dirs(
            vec![
                dir("", Some(0o755), None),
                dir("a", None, Some(1_700_000_000_000_000_000)),
                dir("empty", None, None),
                dir("d/e", Some(0o700), Some(-1)),
            ],
            "seed",
        )
        .unwrap();
    let unpacked = Track::new(
        vec![
            item("whole", "image/jpeg", entry(id("w"), 9, Placement::Whole)),
            item(
                "x/big",
                "video/mp4",
                entry(id("im"), 1 << 40, Placement::Chunked),
            ),
        ],
        vec![],
        "seed",
    )
    .unwrap()
    .with_dirs(vec![dir("x/empty", Some(0o750), None)], "seed")
    .unwrap();
    let mut paged = Vec::new();
    for encoded in [
        with_dirs.encode_paged(&PageShape::with_rows(2)),
        unpacked.encode_paged(&PageShape::default()),
        // Name pages listed through index pages.
        with_dirs.encode_paged(&PageShape::with_rows(1).with_index_pages(1)),
    ] {
        paged.push(encoded.root);
        paged.extend(encoded.pages.into_iter().map(|(_, page)| page));
    }

    let chunks = ItemManifest {
        chunks: vec![
            Chunk {
                address: id("c1"),
                size: 10,
            },
            Chunk {
                address: id("c2"),
                size: 3,
            },
        ],
    };
    let foreign_chunks = map(vec![
        ("v", Value::from(1)),
        (
            "chunks",
            Value::Array(vec![Value::Array(vec![
                text(&id("c").to_hex()),
                Value::from(u64::MAX),
            ])]),
        ),
    ]);

    let reference = encode_ref(&id("m"));
    vec![
        (
            "manifest",
            vec![
                manifest.encode(),
                empty_manifest.encode(),
                cbor(foreign_manifest),
            ],
        ),
        (
            "track",
            vec![track.encode(), empty_track.encode(), cbor(foreign_track)],
        ),
        ("track_page", paged),
        (
            "item_manifest",
            vec![
                chunks.encode(),
                ItemManifest { chunks: vec![] }.encode(),
                cbor(foreign_chunks),
            ],
        ),
        ("reference", vec![reference.to_ascii_uppercase(), reference]),
        ("byte_range_map", byte_range_map_seeds()),
    ]
}

/// Maps in the input format `targets::byte_range_map` documents.
fn byte_range_map_seeds() -> Vec<Vec<u8>> {
    // Op bytes: data of source 0 or 1 at the cursor, reading on from that
    // source's last read (each followed by a length byte and a 0 offset
    // delta), and PAD at the cursor (followed by a length byte).
    const DATA_0: u8 = 0x00;
    const DATA_1: u8 = 0x10;
    const PAD: u8 = 0x01;
    let segments = [DATA_0, 10, 0, PAD, 5, DATA_1, 7, 0, DATA_0, 3, 0, PAD, 2];
    // Header bit 0: the destination ends with the last segment, else a
    // wide length follows the limits; bit 1: sources are as long as needed,
    // else a count and a length delta per source follow; bit 2: push in
    // reverse; bits 3-7: rotate. Limits: max_gap, amplification (/16) and
    // max_read (*4) bytes.
    let with = |header: u8, fields: &[u8]| {
        let mut input = vec![header];
        input.extend(fields);
        input.extend(segments);
        input
    };
    vec![
        with(0b011, &[16, 32, 64]),
        with(0b0001_0111, &[0, 16, 255]),
        // Source 1 one byte short.
        with(0b001, &[255, 255, 255, 2, 0, 0xff]),
        // Only source 0 supplied.
        with(0b001, &[255, 255, 255, 1, 0]),
        // Too short a destination.
        with(0b010, &[1, 20, 1, 20, 0, 0, 0, 0, 0, 0, 0]),
    ]
}
