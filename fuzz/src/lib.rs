//! The bodies of the fuzz targets. `fuzz_targets/*.rs` hand them to
//! libFuzzer (nightly, cargo-fuzz); `tests/core/fuzz_corpus.rs` includes
//! this file by path and replays the committed corpus through them on
//! stable, so CI checks exactly what the fuzzer checked without needing
//! either tool.
//!
//! A body must not panic on any input. Its assertions are the properties a
//! run checks beyond that: decoded values survive a re-encode, and the
//! byte-range engine agrees with naive versions of its own rules.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::ops::Range;

use futures::executor::block_on;
use packfs_format::engine::{
    ByteRangeMap, ByteRangeProgram, CoalesceLimits, ExecuteError, MapError, MemorySource,
    NormalizedMap, Piece, Run, Segment, SegmentKind, SourceIndex, Uncovered,
};
use packfs_format::tiledb::fragment::{decode_u64_list, Footer};
use packfs_format::tiledb::schema::ArraySchema;
use packfs_format::tiledb::{decode_generic_tile, decode_tile, Datatype, FilterPipeline, TileType};
use packfs_format::{
    decode_ref, encode_ref, name_order, read_columns, read_pack_page, Columns, FragmentEntry,
    IndexRef, ItemManifest, Manifest, ObjectId, PackPageRef, PageRef, PageShape, PagedReader,
    Placement, Track, TrackRoot,
};

/// A target's body: runs one input.
pub type Body = fn(&[u8]);

/// Every target: its name (and `fuzz/corpus/` directory) and its body.
pub const TARGETS: &[(&str, Body)] = &[
    ("manifest", manifest),
    ("track", track),
    ("track_page", track_page),
    ("item_manifest", item_manifest),
    ("reference", reference),
    ("byte_range_map", byte_range_map),
    ("tiledb_tile", tiledb_tile),
    ("tiledb_metadata", tiledb_metadata),
];

/// Most bytes a fuzzed tile may decode to.
const TILE_LIMIT: usize = 1 << 20;

/// A TileDB data tile through a filter pipeline. Input: a byte choosing
/// what the tile holds (and the format version), a `u16` length, that
/// many bytes of serialized filter pipeline, then the stored tile.
pub fn tiledb_tile(data: &[u8]) {
    let [kind, a, b, rest @ ..] = data else {
        return;
    };
    let len = u16::from_le_bytes([*a, *b]) as usize;
    let Some((pipeline, stored)) = rest.split_at_checked(len) else {
        return;
    };
    let Ok(pipeline) = FilterPipeline::parse(pipeline) else {
        return;
    };
    let version = [22, 19, 10][(*kind / 8 % 3) as usize];
    let tile = match kind % 8 {
        0 => TileType::fixed(Datatype::INT32, 4, version),
        1 => TileType::fixed(Datatype::INT64, 8, version),
        2 => TileType::fixed(Datatype::FLOAT64, 8, version),
        3 => TileType::fixed(Datatype::INT16, 2, version),
        4 => TileType::fixed(Datatype::UINT8, 3, version),
        5 => TileType::offsets(version),
        6 => TileType::validity(version),
        _ => TileType::var_data(Datatype::BLOB, version).expect("blob has a size"),
    };
    if let Ok(decoded) = decode_tile(stored, &pipeline, &tile, TILE_LIMIT) {
        assert!(decoded.len() <= TILE_LIMIT);
    }
}

/// The schema the metadata target decodes footers against: the committed
/// fixture array's.
fn fixture_schema() -> ArraySchema {
    let file = include_bytes!("../../tests/fixtures/tiledb/small-sparse/__schema/__1795481743863_1795481743863_3c19862af600fe1e1511a5b11589e38a");
    let tile = decode_generic_tile(file, TILE_LIMIT).expect("fixture schema");
    ArraySchema::decode(&tile.data).expect("fixture schema")
}

/// A TileDB array's metadata file: as a schema file (a generic tile
/// holding a schema), and as a fragment metadata file of the fixture
/// schema's array (its footer, then the offset lists it points at).
pub fn tiledb_metadata(data: &[u8]) {
    if let Ok(tile) = decode_generic_tile(data, TILE_LIMIT) {
        assert!(tile.len <= data.len());
        let _ = ArraySchema::decode(&tile.data);
    }
    let Ok(footer) = Footer::decode(data, &fixture_schema()) else {
        return;
    };
    for &offset in footer.tile_offsets.iter().chain(&footer.tile_var_sizes) {
        let Some(at) = usize::try_from(offset).ok().filter(|&at| at <= data.len()) else {
            continue;
        };
        if let Ok(tile) = decode_generic_tile(&data[at..], TILE_LIMIT) {
            let _ = decode_u64_list(&tile.data, "fuzz");
        }
    }
}

pub fn manifest(data: &[u8]) {
    if let Ok(m) = Manifest::decode(data, "fuzz") {
        assert_eq!(Manifest::decode(&m.encode(), "re-encoded"), Ok(m));
    }
}

/// Also covers FragmentEntry, which is only ever decoded inside a Track.
pub fn track(data: &[u8]) {
    if let Ok(t) = Track::decode(data, "fuzz") {
        assert_eq!(Track::decode(&t.encode(), "re-encoded"), Ok(t));
    }
}

/// The objects of a paged Track: the input as a root, as a name page, as
/// a pack page and as an index page.
pub fn track_page(data: &[u8]) {
    let _ = TrackRoot::is_paged(data);
    if let Ok(root) = TrackRoot::decode(data, "fuzz") {
        let encoded = root.encode();
        assert!(TrackRoot::is_paged(&encoded));
        assert_eq!(
            TrackRoot::decode(&encoded, "re-encoded").as_ref(),
            Ok(&root)
        );
        for (k, page) in root.pages.iter().enumerate() {
            assert_eq!(root.page_of(&page.first), Some(k), "{:?}", page.first);
        }
    }
    name_page(data);
    pack_page(data);
    index_page(data);
}

/// The input as the one index page of a root: read whole, its pages are
/// what the root says, in order.
fn index_page(data: &[u8]) {
    let index = IndexRef {
        first: String::new(),
        id: ObjectId::of(data),
        pages: 1,
        items: 0,
        bytes: 0,
    };
    let mut root = TrackRoot {
        index: vec![index],
        ..TrackRoot::default()
    };
    if root.fill_index([data], page_what).is_ok() {
        assert_eq!(root.pages.len(), 1);
        assert_eq!(root.pages[0].first, "");
    }
}

/// What a Track reader reads of a page: names (`None`: retired) and sizes.
#[derive(Default)]
struct PageRows {
    names: Vec<Option<String>>,
    sizes: Vec<u64>,
}

impl Columns for PageRows {
    fn entry(&mut self, entry: FragmentEntry) {
        self.sizes.push(entry.byte_size);
    }
    fn name(&mut self, name: Option<&str>) {
        self.names.push(name.map(str::to_string));
    }
    fn media_type(&mut self, _: u32) {}
    fn mode(&mut self, _: Option<u16>) {}
    fn mtime(&mut self, _: Option<i64>) {}
}

fn page_what(id: &ObjectId) -> String {
    format!("page {id}")
}

/// The input as the one name page of a root that says what any Track
/// reader finds in it (its first name, its items and their bytes), so
/// only the paged checks can refuse it. A Track read from it encodes to
/// pages that read back as the same Track and encode to the same pages.
fn name_page(data: &[u8]) {
    let mut rows = PageRows::default();
    let layout = read_columns(data, "fuzz", &mut rows);
    let first = match &layout {
        Ok(layout) => {
            let names = rows.names.iter().flatten().map(String::as_str);
            let dirs = layout.dirs.iter().map(|d| d.name.as_str());
            names
                .chain(dirs)
                .min_by(|a, b| name_order(a, b))
                .unwrap_or("")
        }
        Err(_) => "",
    };
    let bytes = rows.sizes.iter().try_fold(0u64, |n, &s| n.checked_add(s));
    let page = PageRef {
        first: first.to_string(),
        id: ObjectId::of(data),
        items: rows.sizes.len() as u64,
        bytes: bytes.unwrap_or(0),
        // Not said: checked against nothing.
        t_end: None,
    };
    let root = TrackRoot {
        items: page.items,
        bytes: page.bytes,
        pages: vec![page],
        pack_pages: vec![],
        index: vec![],
    };
    let decoded = Track::decode_paged(&root, [data], [], "fuzz", page_what);
    assert!(
        layout.is_ok() || decoded.is_err(),
        "a page no Track reader reads"
    );
    let Ok(track) = decoded else {
        return;
    };
    for pair in track.items().windows(2) {
        assert_eq!(name_order(&pair[0].name, &pair[1].name), Ordering::Less);
    }
    for shape in [PageShape::default(), PageShape::with_rows(2)] {
        let paged = track.encode_paged(&shape);
        let pages: HashMap<ObjectId, &[u8]> =
            paged.pages.iter().map(|(id, b)| (*id, &b[..])).collect();
        let root = TrackRoot::decode(&paged.root, "re-encoded").expect("an encoded root");
        let again = Track::decode_paged(
            &root,
            root.pages.iter().map(|p| pages[&p.id]),
            root.pack_pages.iter().map(|p| pages[&p.id]),
            "re-encoded",
            page_what,
        )
        .expect("an encoded Track reads back");
        assert_eq!(again.items(), track.items());
        assert_eq!(again.retired(), track.retired());
        // Directories that record nothing and have something below them
        // may go; no other.
        for d in track.dirs() {
            assert!(
                again.dirs().contains(d) || d.attrs == Default::default(),
                "{d:?}"
            );
        }
        assert!(again.dirs().iter().all(|d| track.dirs().contains(d)));
        assert_eq!(again.encode_paged(&shape).id, paged.id);
    }
}

/// The input as a pack page: each record checked on its own, then read
/// under a root that names the page, where no name page holds its items.
fn pack_page(data: &[u8]) {
    let Ok(records) = read_pack_page(data, "fuzz") else {
        return;
    };
    for pair in records.windows(2) {
        assert!(pair[0].address < pair[1].address);
    }
    for r in &records {
        assert!(r.live > 0);
        for e in &r.retired {
            let Placement::Packed { offset } = e.placement else {
                panic!("a retired entry that is not packed: {e:?}");
            };
            assert!(e.address == r.address && offset + e.byte_size <= r.length);
        }
    }
    let Some(first) = records.first() else {
        return;
    };
    let root = TrackRoot {
        pages: vec![],
        pack_pages: vec![PackPageRef {
            first: first.address,
            id: ObjectId::of(data),
            packs: records.len() as u64,
        }],
        index: vec![],
        items: 0,
        bytes: 0,
    };
    let mut reader = PagedReader::new(&root, PageRows::default());
    reader
        .pack_page(data, "fuzz")
        .expect("a pack page reads under a root that says what it holds");
    assert!(reader.finish("fuzz").is_err(), "packs with no item");
}

pub fn item_manifest(data: &[u8]) {
    if let Ok(m) = ItemManifest::decode(data, "fuzz") {
        assert_eq!(ItemManifest::decode(&m.encode(), "re-encoded"), Ok(m));
    }
}

pub fn reference(data: &[u8]) {
    if let Ok(id) = decode_ref(data, "fuzz") {
        // Only the hex digits' case may differ from what packfs writes.
        let encoded = encode_ref(&id);
        assert!(data.eq_ignore_ascii_case(&encoded), "{data:?}");
        assert_eq!(decode_ref(&encoded, "re-encoded"), Ok(id));
    }
}

/// Reads fuzz input as a stream of fields. Past the end every field reads
/// as zero, so any input describes some map.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn byte(&mut self) -> u8 {
        let Some((&first, rest)) = self.0.split_first() else {
            return 0;
        };
        self.0 = rest;
        first
    }

    fn wide(&mut self) -> u64 {
        u64::from_le_bytes(std::array::from_fn(|_| self.byte()))
    }

    /// `base` moved by a signed byte: lands next to a boundary, where the
    /// off-by-one cases are.
    fn near(&mut self, base: u64) -> u64 {
        base.saturating_add_signed(i64::from(self.byte() as i8))
    }
}

/// One push onto a map; `source` is `None` for PAD.
#[derive(Clone, Copy, Debug)]
struct Push {
    dest: u64,
    len: u64,
    source: Option<(SourceIndex, u64)>,
}

/// Builds a map from `data`, normalizes, checks, compiles and executes it,
/// comparing each step with a naive model.
///
/// Input: a header byte (bit 0: the destination ends where the last
/// segment does, else a wide length follows the limits; bit 1: sources are
/// exactly as long as the segments need, else a count and a signed byte
/// per source follow, moving each length off what is needed; bit 2: push
/// in reverse; bits 3-7: rotate the push order), three bytes of coalescing
/// limits, then up to 64 segments to the end of the input, each an op byte
/// and its fields. Placing segments relative to a cursor and to each
/// source's last read keeps exact tilings and mergeable neighbours common.
pub fn byte_range_map(data: &[u8]) {
    let mut input = Reader(data);
    let header = input.byte();
    let limits = CoalesceLimits {
        max_gap: saturating_byte(input.byte(), u64::from),
        max_amplification: match input.byte() {
            u8::MAX => f64::INFINITY,
            b => f64::from(b) / 16.0,
        },
        max_read: saturating_byte(input.byte(), |b| u64::from(b) * 4),
    };
    let explicit_dest_len = (header & 1 == 0).then(|| input.wide());
    let len_deltas: Option<Vec<i8>> = (header & 2 == 0).then(|| {
        let count = input.byte() % 5;
        (0..count).map(|_| input.byte() as i8).collect()
    });

    let mut pushes = Vec::new();
    let mut cursor = 0u64;
    // Where the last read of each source ended, by source index.
    let mut source_ends = vec![0u64; 256];
    while !input.0.is_empty() && pushes.len() < 64 {
        // Op bit 0: PAD; bits 1-2: destination at the cursor (0, 3), near
        // it (1) or anywhere (2); bit 3: wide length; bits 4-5: source 0-3,
        // bit 6: any source up to 255; bit 7: source offset anywhere, else
        // near where that source's last read ended.
        let op = input.byte();
        let dest = match (op >> 1) & 3 {
            1 => input.near(cursor),
            2 => input.wide(),
            _ => cursor,
        };
        let len = if op & 8 != 0 {
            input.wide()
        } else {
            u64::from(input.byte())
        };
        let source = (op & 1 == 0).then(|| {
            let index = if op & 64 != 0 {
                usize::from(input.byte())
            } else {
                usize::from((op >> 4) & 3)
            };
            let offset = if op & 128 != 0 {
                input.wide()
            } else {
                input.near(source_ends[index])
            };
            source_ends[index] = offset.saturating_add(len);
            (SourceIndex(index), offset)
        });
        cursor = dest.saturating_add(len);
        pushes.push(Push { dest, len, source });
    }
    let dest_len = explicit_dest_len.unwrap_or(cursor);
    let needed = needed_source_lens(&pushes);
    let source_lens: Vec<u64> = match len_deltas {
        None => needed,
        // Fewer sources than are read, or lengths just off what is needed.
        Some(deltas) => deltas
            .iter()
            .enumerate()
            .map(|(i, &delta)| {
                let len = needed.get(i).copied().unwrap_or(0);
                len.saturating_add_signed(i64::from(delta))
            })
            .collect(),
    };

    if !pushes.is_empty() {
        let at = usize::from(header >> 3) % pushes.len();
        pushes.rotate_left(at);
    }
    if header & 4 != 0 {
        pushes.reverse();
    }
    let mut map = ByteRangeMap::new(dest_len);
    for push in &pushes {
        match push.source {
            None => map.push_pad(push.dest, push.len),
            Some((source, offset)) => map.push_data(push.dest, push.len, source, offset),
        };
    }

    let normalized = map.normalize();
    assert_eq!(
        normalized.is_ok(),
        tiles(&pushes, dest_len),
        "{normalized:?}"
    );
    let Ok(normalized) = normalized else {
        return;
    };
    check_normalized(&normalized, &pushes);

    let sources_ok = normalized.check_sources(&source_lens);
    assert_eq!(
        sources_ok.is_ok(),
        sources_hold(&pushes, &source_lens),
        "{sources_ok:?}"
    );
    for limits in [CoalesceLimits::default(), limits] {
        let program = ByteRangeProgram::compile(&normalized, &limits);
        check_program(&program, &normalized, &limits);
        execute(&program, &normalized, &source_lens, sources_ok.is_ok());
    }
}

/// The destination bytes of `missing`, as sorted, merged ranges.
fn merged_dest(missing: &[Uncovered]) -> Vec<Range<u64>> {
    let mut ranges: Vec<Range<u64>> = missing.iter().map(|u| u.dest.clone()).collect();
    ranges.sort_by_key(|r| r.start);
    let mut merged: Vec<Range<u64>> = Vec::new();
    for r in ranges {
        match merged.last_mut() {
            Some(last) if last.end >= r.start => last.end = last.end.max(r.end),
            _ => merged.push(r),
        }
    }
    merged
}

/// `f(b)`, or `u64::MAX` for the byte 255, so "no limit" is reachable.
fn saturating_byte(b: u8, f: impl Fn(u8) -> u64) -> u64 {
    if b == u8::MAX {
        u64::MAX
    } else {
        f(b)
    }
}

/// The length each source needs for every data push to lie within it.
fn needed_source_lens(pushes: &[Push]) -> Vec<u64> {
    let mut lens = Vec::new();
    for push in pushes.iter().filter(|p| p.len > 0) {
        if let Some((SourceIndex(index), offset)) = push.source {
            if lens.len() <= index {
                lens.resize(index + 1, 0);
            }
            lens[index] = lens[index].max(offset.saturating_add(push.len));
        }
    }
    lens
}

/// Whether the non-empty pushes cover `[0, dest_len)` exactly once, with
/// representable ends: what normalization must accept.
fn tiles(pushes: &[Push], dest_len: u64) -> bool {
    let mut ranges = Vec::new();
    for push in pushes.iter().filter(|p| p.len > 0) {
        let Some(end) = push.dest.checked_add(push.len) else {
            return false;
        };
        if let Some((_, offset)) = push.source {
            if offset.checked_add(push.len).is_none() {
                return false;
            }
        }
        ranges.push(push.dest..end);
    }
    ranges.sort_by_key(|r| r.start);
    let mut covered = 0;
    for range in ranges {
        if range.start != covered {
            return false;
        }
        covered = range.end;
    }
    covered == dest_len
}

/// Whether the sources hold every byte the non-empty data pushes read.
fn sources_hold(pushes: &[Push], source_lens: &[u64]) -> bool {
    pushes
        .iter()
        .filter(|p| p.len > 0)
        .all(|push| match push.source {
            None => true,
            Some((SourceIndex(index), offset)) => source_lens
                .get(index)
                .is_some_and(|&len| offset + push.len <= len),
        })
}

/// A normalized map tiles its destination with maximal segments and maps
/// every pushed byte where its push said.
fn check_normalized(map: &NormalizedMap, pushes: &[Push]) {
    let segments = map.segments();
    let mut covered = 0;
    for segment in segments {
        assert!(segment.dest.start == covered && segment.dest.end > covered);
        covered = segment.dest.end;
    }
    assert_eq!(covered, map.dest_len());
    for pair in segments.windows(2) {
        assert!(!continues(&pair[0], &pair[1]), "{pair:?} should be one");
    }
    for push in pushes.iter().filter(|p| p.len > 0) {
        let at = segments.partition_point(|s| s.dest.end <= push.dest);
        let segment = &segments[at];
        let skip = push.dest - segment.dest.start;
        assert!(push.dest + push.len <= segment.dest.end, "{push:?}");
        match (push.source, segment.kind) {
            (None, SegmentKind::Pad) => {}
            (
                Some((source, offset)),
                SegmentKind::Data {
                    source: s,
                    src_offset,
                },
            ) => {
                assert_eq!((source, offset), (s, src_offset + skip), "{push:?}");
            }
            (_, kind) => panic!("{push:?} became {kind:?}"),
        }
    }
}

/// Whether `next` reads on where `last` stops (or both are PAD).
fn continues(last: &Segment, next: &Segment) -> bool {
    match (last.kind, next.kind) {
        (SegmentKind::Pad, SegmentKind::Pad) => true,
        (
            SegmentKind::Data { source, src_offset },
            SegmentKind::Data {
                source: s,
                src_offset: o,
            },
        ) => source == s && src_offset + (last.dest.end - last.dest.start) == o,
        _ => false,
    }
}

/// A program produces each segment of its map exactly once, reads in
/// order (sources by index, then source offset; PAD last), and coalesces
/// only within `limits`.
fn check_program(program: &ByteRangeProgram, map: &NormalizedMap, limits: &CoalesceLimits) {
    assert_eq!(program.dest_len(), map.dest_len());
    let mut produced = Vec::new();
    let mut last_read = None;
    let mut pads_began = false;
    for run in program.runs() {
        let read = match run {
            Run::Pad { dest } => {
                pads_began = true;
                produced.push(Segment {
                    dest: dest.clone(),
                    kind: SegmentKind::Pad,
                });
                continue;
            }
            Run::Contiguous {
                source,
                src_offset,
                dest,
            } => {
                produced.push(Segment {
                    dest: dest.clone(),
                    kind: SegmentKind::Data {
                        source: *source,
                        src_offset: *src_offset,
                    },
                });
                (*source, *src_offset)
            }
            Run::Coalesced { source, .. } | Run::Strided { source, .. } => {
                let (src, pieces) = (run.src().expect("a read"), run.pieces());
                assert!(pieces.len() > 1, "{run:?}");
                check_window(&src, &pieces, limits);
                produced.extend(pieces.iter().map(|p| Segment {
                    dest: p.dest(),
                    kind: SegmentKind::Data {
                        source: *source,
                        src_offset: p.src_offset,
                    },
                }));
                (*source, src.start)
            }
        };
        assert!(!pads_began, "a read after PAD: {run:?}");
        assert!(last_read <= Some(read), "{run:?} read out of order");
        last_read = Some(read);
    }
    produced.sort_by_key(|s| s.dest.start);
    assert_eq!(produced, map.segments());
}

/// A coalesced read spans exactly its pieces and the gaps between them,
/// each gap and the whole within `limits`.
fn check_window(src: &Range<u64>, pieces: &[Piece], limits: &CoalesceLimits) {
    let mut reads: Vec<Range<u64>> = pieces.iter().map(Piece::src).collect();
    reads.sort_by_key(|r| r.start);
    assert_eq!(reads[0].start, src.start);
    let (mut end, mut wanted) = (src.start, 0u64);
    for read in reads {
        assert!(read.start.saturating_sub(end) <= limits.max_gap);
        wanted += read.end.saturating_sub(end.max(read.start));
        end = end.max(read.end);
    }
    assert_eq!(end, src.end);
    let len = src.end - src.start;
    assert!(len <= limits.max_read && len as f64 <= limits.max_amplification * wanted as f64);
}

/// Sources and destinations this small are executed for real.
const EXECUTE_MAX: u64 = 1 << 16;

/// Byte `offset` of source `index`: differs between neighbouring offsets
/// and between sources, so a misplaced copy shows.
fn source_byte(index: usize, offset: u64) -> u8 {
    (offset.wrapping_mul(31) ^ (offset >> 8) ^ (index as u64).wrapping_mul(0x9e)) as u8
}

/// Executes `program` over sources of `source_lens` filled by
/// [`source_byte`] and compares with copying each segment by hand; a
/// program whose sources fall short must fail before reading.
fn execute(program: &ByteRangeProgram, map: &NormalizedMap, source_lens: &[u64], sources_ok: bool) {
    if map.dest_len() > EXECUTE_MAX || source_lens.iter().any(|&len| len > EXECUTE_MAX) {
        return;
    }
    let sources: Vec<MemorySource> = source_lens
        .iter()
        .enumerate()
        .map(|(i, &len)| MemorySource::new((0..len).map(|o| source_byte(i, o)).collect::<Vec<_>>()))
        .collect();
    let sources: Vec<&dyn packfs_format::engine::SeekableSource> =
        sources.iter().map(|s| s as _).collect();
    let got = block_on(program.execute(&sources));
    if !sources_ok {
        let Err(ExecuteError::Map(error)) = got else {
            panic!("missing coverage executed: {got:?}");
        };
        // The map's check and the program's name the same uncovered
        // destination bytes, however the program cut them into runs.
        if let (MapError::Unavailable { missing: run }, Err(MapError::Unavailable { missing })) =
            (&error, map.check_sources(source_lens))
        {
            assert_eq!(merged_dest(run), merged_dest(&missing));
        }
        return;
    }
    let mut expected = vec![0u8; map.dest_len() as usize];
    for segment in map.segments() {
        if let SegmentKind::Data { source, src_offset } = segment.kind {
            for dest in segment.dest.clone() {
                expected[dest as usize] =
                    source_byte(source.0, src_offset + (dest - segment.dest.start));
            }
        }
    }
    assert_eq!(got.expect("the sources hold every byte read"), expected);
}
