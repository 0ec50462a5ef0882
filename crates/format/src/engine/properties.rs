//! Property tests of the engine as a whole: whatever the map and limits,
//! execution (into a buffer of its own, staged, or into the caller's
//! buffer over whatever it held) yields the bytes a naive
//! segment-by-segment copy does, and normalization refuses maps that miss
//! or double-cover bytes.

use std::ops::Range;

use futures::executor::block_on;
use proptest::collection::vec;
use proptest::prelude::*;

use super::*;

/// Where a segment's bytes come from, by index into the case's sources.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Data { source: usize, src_offset: u64 },
    Pad,
}

#[derive(Clone, Copy, Debug)]
struct Laid {
    dest_offset: u64,
    len: u64,
    kind: Kind,
}

impl Laid {
    fn dest(&self) -> Range<u64> {
        self.dest_offset..self.dest_offset + self.len
    }
}

/// Random sources, a random partition of a destination over them, and the
/// same segments in the random order they are pushed.
#[derive(Clone, Debug)]
struct Case {
    sources: Vec<Vec<u8>>,
    /// In destination order, back to back from 0, none empty.
    segments: Vec<Laid>,
    pushed: Vec<Laid>,
    /// Zero-length segments pushed too: `(dest_offset, source)`, possibly
    /// out of bounds or naming no source, and all to be ignored.
    empty: Vec<(u64, usize)>,
}

impl Case {
    fn dest_len(&self) -> u64 {
        self.segments.last().map_or(0, |s| s.dest().end)
    }

    fn map(&self) -> ByteRangeMap {
        let mut map = ByteRangeMap::new(self.dest_len());
        for laid in &self.pushed {
            push(&mut map, laid);
        }
        for &(dest_offset, source) in &self.empty {
            map.push_data(dest_offset, 0, SourceIndex(source), 0);
        }
        map
    }

    /// The destination, copied segment by segment.
    fn reference(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for laid in &self.segments {
            match laid.kind {
                Kind::Pad => out.resize(out.len() + laid.len as usize, 0),
                Kind::Data { source, src_offset } => {
                    let from = src_offset as usize;
                    out.extend_from_slice(&self.sources[source][from..from + laid.len as usize]);
                }
            }
        }
        out
    }
}

fn push(map: &mut ByteRangeMap, laid: &Laid) {
    match laid.kind {
        Kind::Pad => map.push_pad(laid.dest_offset, laid.len),
        Kind::Data { source, src_offset } => {
            map.push_data(laid.dest_offset, laid.len, SourceIndex(source), src_offset)
        }
    };
}

/// A raw segment draw: PAD one time in four, else data of a source picked
/// by the `usize` at an offset picked by the `u64` (or right after the
/// previous segment's bytes, so neighbours merge, when the `bool` says so).
type Draw = (u8, usize, u64, u64, bool);

/// Lays draws out back to back, fitting each into its source.
fn lay_out(sources: &[Vec<u8>], draws: &[Draw]) -> Vec<Laid> {
    let mut laid: Vec<Laid> = Vec::new();
    let mut dest_offset = 0;
    for &(kind, pick, len, offset, follow) in draws {
        let kind = if kind == 0 {
            Kind::Pad
        } else {
            let source = pick % sources.len();
            let source_len = sources[source].len() as u64;
            let len = len.min(source_len);
            let after_previous = match laid.last() {
                Some(&Laid {
                    kind:
                        Kind::Data {
                            source: s,
                            src_offset,
                        },
                    len: previous,
                    ..
                }) if follow && s == source => Some(src_offset + previous),
                _ => None,
            };
            let src_offset = after_previous
                .filter(|&o| o + len <= source_len)
                .unwrap_or(offset % (source_len - len + 1));
            laid.push(Laid {
                dest_offset,
                len,
                kind: Kind::Data { source, src_offset },
            });
            dest_offset += len;
            continue;
        };
        laid.push(Laid {
            dest_offset,
            len,
            kind,
        });
        dest_offset += len;
    }
    laid
}

fn case() -> impl Strategy<Value = Case> {
    let draw = (
        0u8..4,
        any::<usize>(),
        1u64..48,
        any::<u64>(),
        any::<bool>(),
    );
    (
        vec(vec(any::<u8>(), 1..200), 1..=4),
        vec(draw, 1..24),
        vec((0u64..1000, 0usize..8), 0..3),
    )
        .prop_flat_map(|(sources, draws, empty)| {
            let segments = lay_out(&sources, &draws);
            let pushed = Just(segments.clone()).prop_shuffle();
            (Just(sources), Just(segments), pushed, Just(empty))
        })
        .prop_map(|(sources, segments, pushed, empty)| Case {
            sources,
            segments,
            pushed,
            empty,
        })
}

fn limits() -> impl Strategy<Value = CoalesceLimits> {
    (
        prop_oneof![Just(0u64), 0u64..64, Just(u64::MAX)],
        prop_oneof![Just(1.0f64), 1.0f64..4.0, Just(f64::INFINITY)],
        prop_oneof![1u64..512, Just(u64::MAX)],
    )
        .prop_map(|(max_gap, max_amplification, max_read)| CoalesceLimits {
            max_gap,
            max_amplification,
            max_read,
        })
}

/// Checks that a coalesced read stays within `limits`.
fn check_window(src: &Range<u64>, pieces: &[Piece], limits: &CoalesceLimits) {
    let mut ranges: Vec<_> = pieces.iter().map(Piece::src).collect();
    ranges.sort_by_key(|r| r.start);
    assert_eq!(ranges[0].start, src.start);
    let (mut end, mut wanted) = (src.start, 0);
    for range in ranges {
        assert!(range.start.saturating_sub(end) <= limits.max_gap);
        wanted += range.end.saturating_sub(end.max(range.start));
        end = end.max(range.end);
    }
    assert_eq!(end, src.end);
    let len = src.end - src.start;
    assert!(len <= limits.max_read);
    assert!(len as f64 <= limits.max_amplification * wanted as f64);
}

/// A dense array's row-major file over tiles: `tiles` sources side by
/// side, each holding `rows` rows of `width` bytes at its own row stride
/// (`width` plus padding) from its own start. Destination row `r` is row
/// `r` of every tile in turn, so each tile's pieces repeat at a fixed
/// stride in both source and destination.
#[derive(Clone, Debug)]
struct Tiled {
    sources: Vec<Vec<u8>>,
    width: u64,
    rows: u64,
    /// Per tile: (start, row stride).
    layout: Vec<(u64, u64)>,
}

impl Tiled {
    fn map(&self) -> ByteRangeMap {
        let tiles = self.layout.len() as u64;
        let mut map = ByteRangeMap::new(self.rows * tiles * self.width);
        for r in 0..self.rows {
            for (t, &(start, stride)) in self.layout.iter().enumerate() {
                let dest = (r * tiles + t as u64) * self.width;
                map.push_data(dest, self.width, SourceIndex(t), start + r * stride);
            }
        }
        map
    }

    /// The destination, copied row by row and tile by tile.
    fn reference(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for r in 0..self.rows {
            for (t, &(start, stride)) in self.layout.iter().enumerate() {
                let from = (start + r * stride) as usize;
                out.extend_from_slice(&self.sources[t][from..from + self.width as usize]);
            }
        }
        out
    }
}

fn tiled() -> impl Strategy<Value = Tiled> {
    (
        1u64..12,
        1u64..24,
        vec((0u64..40, 0u64..9), 1..5),
        any::<u8>(),
    )
        .prop_map(|(width, rows, tiles, seed)| {
            let layout: Vec<(u64, u64)> = tiles.iter().map(|&(s, pad)| (s, width + pad)).collect();
            let sources = layout
                .iter()
                .enumerate()
                .map(|(t, &(start, stride))| {
                    let len = start + rows * stride;
                    (0..len)
                        .map(|i| (i as u8).wrapping_mul(31) ^ seed ^ t as u8)
                        .collect()
                })
                .collect();
            Tiled {
                sources,
                width,
                rows,
                layout,
            }
        })
}

/// Checks every way of executing `program` against `reference`; the
/// caller's buffer starts out filled with `garbage`.
fn every_path_matches(
    program: &ByteRangeProgram,
    sources: &[&dyn SeekableSource],
    reference: &[u8],
    garbage: u8,
) -> Result<(), TestCaseError> {
    let out = block_on(program.execute(sources)).unwrap();
    prop_assert_eq!(&out[..], reference, "execute");
    let staged = block_on(program.execute_staged(sources)).unwrap();
    prop_assert_eq!(&staged[..], reference, "staged");
    let mut dest = vec![garbage; reference.len()];
    block_on(program.execute_into(sources, &mut dest)).unwrap();
    prop_assert_eq!(&dest[..], reference, "into a buffer of {:#x}", garbage);
    let strided = program
        .runs()
        .iter()
        .any(|r| matches!(r, Run::Strided { .. }));
    prop_assert_eq!(program.writes_directly(), !strided);
    Ok(())
}

proptest! {
    #[test]
    fn strided_maps_execute_like_a_naive_copy(
        tiled in tiled(),
        all_limits in vec(limits(), 3),
        garbage in any::<u8>(),
    ) {
        let normalized = tiled.map().normalize().unwrap();
        let sources: Vec<MemorySource> =
            tiled.sources.iter().map(|s| MemorySource::new(s.clone())).collect();
        let sources: Vec<&dyn SeekableSource> =
            sources.iter().map(|s| s as &dyn SeekableSource).collect();
        let reference = tiled.reference();
        for limits in all_limits.iter().chain([&CoalesceLimits::default()]) {
            let program = ByteRangeProgram::compile(&normalized, limits);
            for run in program.runs() {
                // Coalesced reads (strided ones too) keep to the limits.
                if let Run::Coalesced { .. } | Run::Strided { .. } = run {
                    check_window(&run.src().unwrap(), &run.pieces(), limits);
                }
            }
            every_path_matches(&program, &sources, &reference, garbage)?;
        }
        // With room to coalesce, a tile read in 3 or more rows with a gap
        // between them becomes one strided run.
        let program = ByteRangeProgram::compile(&normalized, &CoalesceLimits {
            max_gap: u64::MAX,
            max_amplification: f64::INFINITY,
            max_read: u64::MAX,
        });
        let strided = program.runs().iter().filter(|r| matches!(r, Run::Strided { .. })).count();
        let multi = tiled.layout.len() > 1 || tiled.layout[0].1 > tiled.width;
        if tiled.rows >= 3 && multi {
            prop_assert_eq!(strided, tiled.layout.len(), "{:?}", program.runs());
        }
    }

    #[test]
    fn execution_matches_a_naive_copy(
        case in case(),
        all_limits in vec(limits(), 3),
        garbage in any::<u8>(),
    ) {
        let normalized = case.map().normalize().unwrap();
        prop_assert_eq!(normalized.dest_len(), case.dest_len());
        // Normalized segments are maximal: no neighbours left to merge.
        for pair in normalized.segments().windows(2) {
            let continues = match (pair[0].kind, pair[1].kind) {
                (SegmentKind::Pad, SegmentKind::Pad) => true,
                (
                    SegmentKind::Data { source: a, src_offset: x },
                    SegmentKind::Data { source: b, src_offset: y },
                ) => a == b && x + (pair[0].dest.end - pair[0].dest.start) == y,
                _ => false,
            };
            prop_assert!(!continues, "{:?} not merged", pair);
        }

        let sources: Vec<MemorySource> =
            case.sources.iter().map(|s| MemorySource::new(s.clone())).collect();
        let sources: Vec<&dyn SeekableSource> =
            sources.iter().map(|s| s as &dyn SeekableSource).collect();
        let reference = case.reference();
        for limits in all_limits.iter().chain([&CoalesceLimits::default()]) {
            let program = ByteRangeProgram::compile(&normalized, limits);
            let mut covered = 0;
            for run in program.runs() {
                covered += match run {
                    Run::Pad { dest } | Run::Contiguous { dest, .. } => dest.end - dest.start,
                    Run::Coalesced { .. } | Run::Strided { .. } => {
                        let pieces = run.pieces();
                        check_window(&run.src().unwrap(), &pieces, limits);
                        pieces.iter().map(|p| p.len).sum()
                    }
                };
            }
            prop_assert_eq!(covered, case.dest_len());
            every_path_matches(&program, &sources, &reference, garbage)?;
        }
    }

    #[test]
    fn normalize_rejects_a_missing_segment(case in case(), pick in any::<usize>()) {
        let mut case = case;
        let removed = case.pushed.remove(pick % case.pushed.len());
        prop_assert_eq!(
            case.map().normalize().unwrap_err(),
            MapError::Gap { range: removed.dest() }
        );
    }

    #[test]
    fn normalize_rejects_a_doubly_covered_range(
        case in case(),
        at in any::<u64>(),
        len in any::<u64>(),
        pick in any::<usize>(),
        is_pad in any::<bool>(),
    ) {
        let dest_len = case.dest_len();
        let start = at % dest_len;
        let extra = Laid {
            dest_offset: start,
            len: 1 + len % (dest_len - start),
            kind: if is_pad {
                Kind::Pad
            } else {
                Kind::Data { source: pick % case.sources.len(), src_offset: 0 }
            },
        };
        let mut map = case.map();
        push(&mut map, &extra);
        match map.normalize().unwrap_err() {
            MapError::Overlap { first, second } => {
                prop_assert!(first.start < second.end && second.start < first.end);
                prop_assert!(first == extra.dest() || second == extra.dest());
            }
            err => prop_assert!(false, "expected an overlap, got {}", err),
        }
    }
}
