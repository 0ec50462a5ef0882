//! Compiling a [`NormalizedMap`] into a [`ByteRangeProgram`]: the reads that
//! fetch its bytes. Compilation only chooses how bytes are fetched, never
//! which bytes land where.

use std::collections::BTreeMap;
use std::ops::Range;

use super::map::{NormalizedMap, SegmentKind, SourceIndex};

/// How many unwanted bytes the compiler may read to save requests: reads
/// to object storage cost far more per request than per byte.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CoalesceLimits {
    /// The largest run of unwanted source bytes between two segments read
    /// together.
    pub max_gap: u64,
    /// The largest ratio of bytes read to bytes wanted in one coalesced
    /// read; below 1.0 nothing is coalesced.
    pub max_amplification: f64,
    /// The longest coalesced read in bytes. A single segment longer than
    /// this is still read whole.
    pub max_read: u64,
}

impl Default for CoalesceLimits {
    /// Gaps of up to 64 KiB cost less than a second request, 25% waste at
    /// most, and reads of at most 8 MiB so one window does not hold back
    /// the others.
    fn default() -> Self {
        CoalesceLimits {
            max_gap: 64 << 10,
            max_amplification: 1.25,
            max_read: 8 << 20,
        }
    }
}

/// Part of a coalesced read: `len` bytes at `src_offset` of the source go to
/// `dest_offset` of the destination.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    pub src_offset: u64,
    pub dest_offset: u64,
    pub len: u64,
}

impl Piece {
    /// The source bytes this piece takes.
    pub fn src(&self) -> Range<u64> {
        self.src_offset..self.src_offset + self.len
    }

    /// The destination bytes this piece fills.
    pub fn dest(&self) -> Range<u64> {
        self.dest_offset..self.dest_offset + self.len
    }
}

/// One step of a program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Run {
    /// Zeros, as the map said explicitly.
    Pad { dest: Range<u64> },
    /// One read of `source` from `src_offset` that fills `dest` as is.
    Contiguous {
        source: SourceIndex,
        src_offset: u64,
        dest: Range<u64>,
    },
    /// One read of bytes `src` of `source`, scattered into several
    /// destination ranges; `src` is the union of the pieces' source ranges
    /// and the gaps between them.
    Coalesced {
        source: SourceIndex,
        src: Range<u64>,
        pieces: Vec<Piece>,
    },
    /// A strided run: a coalesced read whose pieces repeat at a
    /// fixed stride (a row of a dense array crossing many tiles), kept as
    /// its pattern instead of a list: piece `i` takes `len` bytes at
    /// `src_start + i * src_stride` to `dest_start + i * dest_stride`.
    /// One read of [`Run::src`], packed into the destination.
    Strided {
        source: SourceIndex,
        src_start: u64,
        src_stride: u64,
        dest_start: u64,
        dest_stride: u64,
        len: u64,
        count: u64,
    },
}

impl Run {
    /// The source the run reads (`None` for PAD).
    pub fn source(&self) -> Option<SourceIndex> {
        match self {
            Run::Pad { .. } => None,
            Run::Contiguous { source, .. }
            | Run::Coalesced { source, .. }
            | Run::Strided { source, .. } => Some(*source),
        }
    }

    /// The source bytes the run reads (`None` for PAD).
    pub fn src(&self) -> Option<Range<u64>> {
        match self {
            Run::Pad { .. } => None,
            Run::Contiguous {
                src_offset, dest, ..
            } => Some(*src_offset..src_offset + (dest.end - dest.start)),
            Run::Coalesced { src, .. } => Some(src.clone()),
            Run::Strided {
                src_start,
                src_stride,
                len,
                count,
                ..
            } => Some(*src_start..src_start + (count - 1) * src_stride + len),
        }
    }

    /// The run's pieces: what goes where (none for PAD). A strided run's
    /// are generated from its pattern.
    pub fn pieces(&self) -> Vec<Piece> {
        match self {
            Run::Pad { .. } => Vec::new(),
            Run::Contiguous {
                src_offset, dest, ..
            } => vec![Piece {
                src_offset: *src_offset,
                dest_offset: dest.start,
                len: dest.end - dest.start,
            }],
            Run::Coalesced { pieces, .. } => pieces.clone(),
            Run::Strided {
                src_start,
                src_stride,
                dest_start,
                dest_stride,
                len,
                count,
                ..
            } => (0..*count)
                .map(|i| Piece {
                    src_offset: src_start + i * src_stride,
                    dest_offset: dest_start + i * dest_stride,
                    len: *len,
                })
                .collect(),
        }
    }
}

/// The compiled form of a [`NormalizedMap`]: runs that together produce
/// every destination byte exactly once.
///
/// Data runs come first, in read order: sources by index, each source's
/// runs by source offset (sequential reads suit storage read-ahead); PAD
/// runs follow in destination order.
#[derive(Clone, Debug, PartialEq)]
pub struct ByteRangeProgram {
    dest_len: u64,
    runs: Vec<Run>,
}

impl ByteRangeProgram {
    /// Schedules the reads of `map`: per source, segments sorted by source
    /// offset are merged into one read while `limits` allow, and never
    /// across sources. Segments that read the same source bytes share them.
    pub fn compile(map: &NormalizedMap, limits: &CoalesceLimits) -> Self {
        let mut pads = Vec::new();
        let mut by_source: BTreeMap<SourceIndex, Vec<Piece>> = BTreeMap::new();
        for segment in map.segments() {
            match segment.kind {
                SegmentKind::Pad => pads.push(Run::Pad {
                    dest: segment.dest.clone(),
                }),
                SegmentKind::Data { source, src_offset } => {
                    by_source.entry(source).or_default().push(Piece {
                        src_offset,
                        dest_offset: segment.dest.start,
                        len: segment.dest.end - segment.dest.start,
                    })
                }
            }
        }

        let mut runs = Vec::new();
        for (source, mut pieces) in by_source {
            pieces.sort_by_key(|p| (p.src_offset, p.dest_offset));
            let mut window: Option<Window> = None;
            for piece in pieces {
                match window.as_mut().filter(|w| w.admits(&piece, limits)) {
                    Some(open) => open.add(piece),
                    None => runs.extend(window.replace(Window::new(piece)).map(|w| w.run(source))),
                }
            }
            runs.extend(window.map(|w| w.run(source)));
        }
        runs.extend(pads);
        ByteRangeProgram {
            dest_len: map.dest_len(),
            runs,
        }
    }

    /// The length of the destination the program produces.
    pub fn dest_len(&self) -> u64 {
        self.dest_len
    }

    /// The runs, in the order described on [`ByteRangeProgram`].
    pub fn runs(&self) -> &[Run] {
        &self.runs
    }
}

/// Pieces of one source being gathered into one read. Pieces arrive sorted
/// by source offset, so every byte of the window from the start of the
/// newest piece onwards is wanted.
struct Window {
    src: Range<u64>,
    /// How many bytes of `src` some piece wants (overlaps counted once).
    wanted: u64,
    pieces: Vec<Piece>,
}

impl Window {
    fn new(piece: Piece) -> Self {
        Window {
            src: piece.src(),
            wanted: piece.len,
            pieces: vec![piece],
        }
    }

    /// Whether `piece`, which starts no earlier than any piece already in
    /// the window, can join it within `limits`.
    fn admits(&self, piece: &Piece, limits: &CoalesceLimits) -> bool {
        let src = piece.src();
        let gap = src.start.saturating_sub(self.src.end);
        let len = self.src.end.max(src.end) - self.src.start;
        let wanted = self.wanted + src.end.saturating_sub(self.src.end.max(src.start));
        gap <= limits.max_gap
            && len <= limits.max_read
            && len as f64 <= limits.max_amplification * wanted as f64
    }

    fn add(&mut self, piece: Piece) {
        let src = piece.src();
        self.wanted += src.end.saturating_sub(self.src.end.max(src.start));
        self.src.end = self.src.end.max(src.end);
        self.pieces.push(piece);
    }

    /// The run that reads this window: a window of one piece is a plain
    /// contiguous read, one of pieces at fixed strides a strided run.
    fn run(self, source: SourceIndex) -> Run {
        match self.pieces.as_slice() {
            [piece] => Run::Contiguous {
                source,
                src_offset: piece.src_offset,
                dest: piece.dest(),
            },
            pieces => match stride(pieces) {
                Some((src_stride, dest_stride)) => Run::Strided {
                    source,
                    src_start: pieces[0].src_offset,
                    src_stride,
                    dest_start: pieces[0].dest_offset,
                    dest_stride,
                    len: pieces[0].len,
                    count: pieces.len() as u64,
                },
                None => Run::Coalesced {
                    source,
                    src: self.src,
                    pieces: self.pieces,
                },
            },
        }
    }
}

/// The source and destination strides of `pieces` (in source order), if
/// there are at least three, all of one length, at one positive source
/// stride and one positive destination stride.
fn stride(pieces: &[Piece]) -> Option<(u64, u64)> {
    let [first, second, ..] = pieces else {
        return None;
    };
    if pieces.len() < 3 || second.src_offset <= first.src_offset {
        return None;
    }
    let src_stride = second.src_offset - first.src_offset;
    let dest_stride = second.dest_offset.checked_sub(first.dest_offset)?;
    let regular = pieces.windows(2).all(|w| {
        w[1].len == first.len
            && w[1].src_offset.checked_sub(w[0].src_offset) == Some(src_stride)
            && w[1].dest_offset.checked_sub(w[0].dest_offset) == Some(dest_stride)
    });
    (regular && dest_stride > 0).then_some((src_stride, dest_stride))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::map::ByteRangeMap;

    const A: SourceIndex = SourceIndex(0);
    const B: SourceIndex = SourceIndex(1);

    /// Compiles data segments `(len, source, src_offset)` laid out back to
    /// back from destination offset 0.
    fn compile(segments: &[(u64, SourceIndex, u64)], limits: CoalesceLimits) -> Vec<Run> {
        let mut map = ByteRangeMap::new(segments.iter().map(|s| s.0).sum());
        let mut dest = 0;
        for &(len, source, src_offset) in segments {
            map.push_data(dest, len, source, src_offset);
            dest += len;
        }
        ByteRangeProgram::compile(&map.normalize().unwrap(), &limits)
            .runs()
            .to_vec()
    }

    fn limits(max_gap: u64, max_amplification: f64, max_read: u64) -> CoalesceLimits {
        CoalesceLimits {
            max_gap,
            max_amplification,
            max_read,
        }
    }

    fn piece(src_offset: u64, dest_offset: u64, len: u64) -> Piece {
        Piece {
            src_offset,
            dest_offset,
            len,
        }
    }

    fn contiguous(source: SourceIndex, src_offset: u64, dest: Range<u64>) -> Run {
        Run::Contiguous {
            source,
            src_offset,
            dest,
        }
    }

    /// Two 10-byte segments 90 bytes apart in the source: one read of 110
    /// bytes, or two of 10.
    const APART: [(u64, SourceIndex, u64); 2] = [(10, A, 0), (10, A, 100)];

    fn apart_coalesced() -> Vec<Run> {
        vec![Run::Coalesced {
            source: A,
            src: 0..110,
            pieces: vec![piece(0, 0, 10), piece(100, 10, 10)],
        }]
    }

    fn apart_separate() -> Vec<Run> {
        vec![contiguous(A, 0, 0..10), contiguous(A, 100, 10..20)]
    }

    #[test]
    fn coalesces_within_all_limits() {
        assert_eq!(compile(&APART, limits(90, 5.5, 110)), apart_coalesced());
    }

    #[test]
    fn respects_the_gap_limit() {
        assert_eq!(compile(&APART, limits(89, 5.5, 110)), apart_separate());
    }

    #[test]
    fn respects_the_amplification_limit() {
        assert_eq!(compile(&APART, limits(90, 5.4, 110)), apart_separate());
    }

    #[test]
    fn respects_the_read_limit() {
        assert_eq!(compile(&APART, limits(90, 5.5, 109)), apart_separate());
    }

    #[test]
    fn reads_in_source_order_whatever_the_destination_order() {
        let runs = compile(&[(10, A, 10), (10, A, 0)], CoalesceLimits::default());
        assert_eq!(
            runs,
            [Run::Coalesced {
                source: A,
                src: 0..20,
                pieces: vec![piece(0, 10, 10), piece(10, 0, 10)],
            }]
        );
    }

    #[test]
    fn never_coalesces_across_sources() {
        let runs = compile(
            &[(10, A, 0), (10, B, 10)],
            limits(u64::MAX, 100.0, u64::MAX),
        );
        assert_eq!(runs, [contiguous(A, 0, 0..10), contiguous(B, 10, 10..20)]);
    }

    #[test]
    fn overlapping_source_ranges_are_read_once() {
        // Bytes 5..10 and 0..10 of A are each wanted twice; nothing is wasted.
        let runs = compile(&[(10, A, 0), (10, A, 5), (10, A, 0)], limits(0, 1.0, 15));
        assert_eq!(
            runs,
            [Run::Coalesced {
                source: A,
                src: 0..15,
                pieces: vec![piece(0, 0, 10), piece(0, 20, 10), piece(5, 10, 10)],
            }]
        );
    }

    #[test]
    fn lone_segments_and_pads_become_their_own_runs() {
        let mut map = ByteRangeMap::new(30);
        map.push_pad(0, 10)
            .push_data(10, 10, A, 1 << 30)
            .push_pad(20, 5)
            .push_data(25, 5, A, 0);
        let program = ByteRangeProgram::compile(&map.normalize().unwrap(), &Default::default());
        assert_eq!(program.dest_len(), 30);
        assert_eq!(
            program.runs(),
            [
                contiguous(A, 0, 25..30),
                contiguous(A, 1 << 30, 10..20),
                Run::Pad { dest: 0..10 },
                Run::Pad { dest: 20..25 },
            ]
        );
    }

    #[test]
    fn pieces_at_fixed_strides_become_one_strided_run() {
        // Rows of 8 bytes, 10 apart in A, every 16 bytes in the
        // destination (interleaved with B's rows, back to back in B).
        let rows: Vec<_> = (0..4)
            .flat_map(|r| [(8, A, r * 10), (8, B, 100 + r * 8)])
            .collect();
        let runs = compile(&rows, CoalesceLimits::default());
        let strided = Run::Strided {
            source: A,
            src_start: 0,
            src_stride: 10,
            dest_start: 0,
            dest_stride: 16,
            len: 8,
            count: 4,
        };
        assert_eq!(runs[0], strided);
        assert_eq!(strided.src(), Some(0..38));
        assert_eq!(strided.pieces()[3], piece(30, 48, 8));
        let b = &runs[1];
        assert!(
            matches!(
                b,
                Run::Strided {
                    source: B,
                    src_stride: 8,
                    ..
                }
            ),
            "{b:?}"
        );
        // One piece off the stride: a plain coalesced read.
        let mut rows = rows;
        rows[6].2 += 1;
        let runs = compile(&rows, CoalesceLimits::default());
        assert!(
            matches!(runs[0], Run::Coalesced { source: A, .. }),
            "{runs:?}"
        );
    }

    #[test]
    fn an_oversized_segment_is_still_read_whole() {
        let runs = compile(&[(100, A, 0)], limits(0, 2.0, 50));
        assert_eq!(runs, [contiguous(A, 0, 0..100)]);
        let runs = compile(&[(100, A, 0), (1, A, 200)], limits(100, 2.0, 50));
        assert_eq!(
            runs,
            [contiguous(A, 0, 0..100), contiguous(A, 200, 100..101)]
        );
    }
}
