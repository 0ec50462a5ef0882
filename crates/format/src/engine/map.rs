//! [`ByteRangeMap`]: which source bytes (or explicit zero PAD) make up each
//! byte of a destination, and its normalization into a [`NormalizedMap`]
//! that covers the destination exactly once.

use std::fmt;
use std::ops::Range;

use thiserror::Error;

/// Which of the sources handed to execution a segment reads from (an index
/// into that slice), so a map stays plain data, free of I/O handles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SourceIndex(pub usize);

impl fmt::Display for SourceIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "source #{}", self.0)
    }
}

/// Where the bytes of a segment come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SegmentKind {
    /// The same number of bytes of `source`, starting at `src_offset`.
    Data {
        source: SourceIndex,
        src_offset: u64,
    },
    /// Zero bytes. Always explicit: execution never fills a byte with zeros
    /// unless the map says so.
    Pad,
}

/// One destination range of a [`NormalizedMap`] and where its bytes come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Segment {
    /// The destination bytes this segment produces; never empty.
    pub dest: Range<u64>,
    pub kind: SegmentKind,
}

/// Why a map cannot be executed. Each variant names the byte ranges at fault.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum MapError {
    /// A segment reaches past the end of the destination.
    #[error(
        "segment of {len} bytes at destination offset {dest_offset} ends past the destination's {dest_len} bytes"
    )]
    OutOfBounds {
        dest_offset: u64,
        len: u64,
        dest_len: u64,
    },
    /// A segment's destination or source end does not fit in a `u64`.
    #[error("segment of {len} bytes at destination offset {dest_offset} has an end past 2^64")]
    Overflow { dest_offset: u64, len: u64 },
    /// Destination bytes no segment covers: the map must say what every
    /// byte is, PAD included.
    #[error("destination bytes {range:?} are covered by no segment")]
    Gap { range: Range<u64> },
    /// Two segments claim the same destination bytes.
    #[error("destination bytes {first:?} and {second:?} are covered by two segments at once")]
    Overlap {
        first: Range<u64>,
        second: Range<u64>,
    },
    /// Sources do not hold bytes the map reads (unavailable, with the
    /// partial-coverage detail): every destination range left
    /// uncovered, with the source bytes it needed. Found before a program
    /// is built; no bytes are produced.
    #[error("unavailable: {}", describe(.missing))]
    Unavailable { missing: Vec<Uncovered> },
    /// A segment reads a source that was not supplied.
    #[error("a segment reads {source_index}, but only {supplied} sources were supplied")]
    UnknownSource {
        source_index: SourceIndex,
        supplied: usize,
    },
}

/// Destination bytes whose source does not hold what they read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Uncovered {
    /// The destination bytes left without source bytes.
    pub dest: Range<u64>,
    /// The source they read, and the bytes of it they needed.
    pub source_index: SourceIndex,
    pub src: Range<u64>,
    /// How long the source is.
    pub source_len: u64,
}

/// Uncovered ranges for a message: the first few, and how many more.
fn describe(missing: &[Uncovered]) -> String {
    const SHOWN: usize = 4;
    let mut text: Vec<String> = missing
        .iter()
        .take(SHOWN)
        .map(|u| {
            format!(
                "destination bytes {:?} need bytes {:?} of {}, which is {} bytes long",
                u.dest, u.src, u.source_index, u.source_len
            )
        })
        .collect();
    if missing.len() > SHOWN {
        text.push(format!("and {} more ranges", missing.len() - SHOWN));
    }
    text.join("; ")
}

/// A segment as pushed: unchecked, so its end may not even be representable.
#[derive(Clone, Copy, Debug)]
struct Pushed {
    dest_offset: u64,
    len: u64,
    kind: SegmentKind,
}

/// The builder form of a map from destination byte ranges to source ranges
/// or PAD. Segments may be pushed in any order; [`ByteRangeMap::normalize`]
/// checks that they cover `[0, dest_len)` exactly once.
#[derive(Clone, Debug)]
pub struct ByteRangeMap {
    dest_len: u64,
    segments: Vec<Pushed>,
}

impl ByteRangeMap {
    /// An empty map for a destination of `dest_len` bytes. The length is
    /// fixed up front so that an uncovered tail is a detectable gap.
    pub fn new(dest_len: u64) -> Self {
        ByteRangeMap {
            dest_len,
            segments: Vec::new(),
        }
    }

    /// Destination bytes `[dest_offset, dest_offset+len)` are the bytes of
    /// `source` from `src_offset`.
    pub fn push_data(
        &mut self,
        dest_offset: u64,
        len: u64,
        source: SourceIndex,
        src_offset: u64,
    ) -> &mut Self {
        self.push(dest_offset, len, SegmentKind::Data { source, src_offset })
    }

    /// Destination bytes `[dest_offset, dest_offset+len)` are zeros.
    pub fn push_pad(&mut self, dest_offset: u64, len: u64) -> &mut Self {
        self.push(dest_offset, len, SegmentKind::Pad)
    }

    /// Adds every segment of `other` moved to start at `dest_offset`, its
    /// sources renumbered from `first_source`: how a file made of other
    /// files' bytes (a tar of items) is built from their maps.
    pub fn splice(&mut self, dest_offset: u64, other: ByteRangeMap, first_source: usize) {
        for pushed in other.segments {
            let kind = match pushed.kind {
                SegmentKind::Data { source, src_offset } => SegmentKind::Data {
                    source: SourceIndex(first_source + source.0),
                    src_offset,
                },
                SegmentKind::Pad => SegmentKind::Pad,
            };
            self.push(
                dest_offset.saturating_add(pushed.dest_offset),
                pushed.len,
                kind,
            );
        }
    }

    fn push(&mut self, dest_offset: u64, len: u64, kind: SegmentKind) -> &mut Self {
        self.segments.push(Pushed {
            dest_offset,
            len,
            kind,
        });
        self
    }

    /// Sorts the segments by destination, drops empty ones, merges
    /// neighbours that read on contiguously (or are both PAD), and rejects
    /// gaps, overlaps and out-of-bounds segments.
    pub fn normalize(self) -> Result<NormalizedMap, MapError> {
        let dest_len = self.dest_len;
        let mut checked = Vec::with_capacity(self.segments.len());
        for pushed in self.segments.into_iter().filter(|p| p.len > 0) {
            checked.push(checked_segment(pushed, dest_len)?);
        }
        checked.sort_by_key(|s: &Segment| s.dest.start);

        let mut segments: Vec<Segment> = Vec::with_capacity(checked.len());
        // The last segment taken, unmerged: it ends where coverage ends.
        let mut previous: Option<Range<u64>> = None;
        for segment in checked {
            let covered = previous.as_ref().map_or(0, |p| p.end);
            if segment.dest.start > covered {
                return Err(MapError::Gap {
                    range: covered..segment.dest.start,
                });
            }
            if let Some(first) = previous.filter(|_| segment.dest.start < covered) {
                return Err(MapError::Overlap {
                    first,
                    second: segment.dest,
                });
            }
            previous = Some(segment.dest.clone());
            match segments.last_mut() {
                Some(last) if continues(last, &segment) => last.dest.end = segment.dest.end,
                _ => segments.push(segment),
            }
        }
        let covered = previous.map_or(0, |p| p.end);
        if covered < dest_len {
            return Err(MapError::Gap {
                range: covered..dest_len,
            });
        }
        Ok(NormalizedMap { dest_len, segments })
    }
}

/// Turns a pushed segment into one whose destination and source ends are
/// representable and whose destination lies within `[0, dest_len)`.
fn checked_segment(pushed: Pushed, dest_len: u64) -> Result<Segment, MapError> {
    let Pushed {
        dest_offset,
        len,
        kind,
    } = pushed;
    let overflow = || MapError::Overflow { dest_offset, len };
    let dest_end = dest_offset.checked_add(len).ok_or_else(overflow)?;
    if let SegmentKind::Data { src_offset, .. } = kind {
        src_offset.checked_add(len).ok_or_else(overflow)?;
    }
    if dest_end > dest_len {
        return Err(MapError::OutOfBounds {
            dest_offset,
            len,
            dest_len,
        });
    }
    Ok(Segment {
        dest: dest_offset..dest_end,
        kind,
    })
}

/// Whether `next`, which starts where `last` ends, continues it: both PAD,
/// or the same source read on without a jump.
fn continues(last: &Segment, next: &Segment) -> bool {
    match (last.kind, next.kind) {
        (SegmentKind::Pad, SegmentKind::Pad) => true,
        (
            SegmentKind::Data { source, src_offset },
            SegmentKind::Data {
                source: next_source,
                src_offset: next_offset,
            },
        ) => source == next_source && src_offset + (last.dest.end - last.dest.start) == next_offset,
        _ => false,
    }
}

/// A map whose segments are sorted, non-empty, maximal, and cover
/// `[0, dest_len)` exactly once; only [`ByteRangeMap::normalize`] makes one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NormalizedMap {
    dest_len: u64,
    segments: Vec<Segment>,
}

impl NormalizedMap {
    /// The length of the destination the map produces.
    pub fn dest_len(&self) -> u64 {
        self.dest_len
    }

    /// The segments in destination order.
    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// Checks, before a program is compiled, that every source a segment
    /// reads exists and holds the bytes it reads; `source_lens[i]` is the
    /// length of source `i`. Missing coverage is [`MapError::Unavailable`]
    /// listing every uncovered destination range: the executor never
    /// invents bytes for it.
    pub fn check_sources(&self, source_lens: &[u64]) -> Result<(), MapError> {
        let mut missing = Vec::new();
        for segment in &self.segments {
            if let SegmentKind::Data { source, src_offset } = segment.kind {
                let len = segment.dest.end - segment.dest.start;
                let src = src_offset..src_offset + len;
                missing.extend(uncovered(source, src, segment.dest.start, source_lens)?);
            }
        }
        match missing.is_empty() {
            true => Ok(()),
            false => Err(MapError::Unavailable { missing }),
        }
    }
}

/// The part of a read of bytes `src` of `source`, landing at destination
/// offset `dest_start`, that the source does not hold; an error if the
/// source is not one of `source_lens`.
pub(super) fn uncovered(
    source: SourceIndex,
    src: Range<u64>,
    dest_start: u64,
    source_lens: &[u64],
) -> Result<Option<Uncovered>, MapError> {
    let source_len = *source_lens.get(source.0).ok_or(MapError::UnknownSource {
        source_index: source,
        supplied: source_lens.len(),
    })?;
    if src.end <= source_len {
        return Ok(None);
    }
    let from = src.start.max(source_len);
    let dest = dest_start + (from - src.start)..dest_start + (src.end - src.start);
    Ok(Some(Uncovered {
        dest,
        source_index: source,
        src: from..src.end,
        source_len,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: SourceIndex = SourceIndex(0);
    const B: SourceIndex = SourceIndex(1);

    fn data(dest: Range<u64>, source: SourceIndex, src_offset: u64) -> Segment {
        Segment {
            dest,
            kind: SegmentKind::Data { source, src_offset },
        }
    }

    fn pad(dest: Range<u64>) -> Segment {
        Segment {
            dest,
            kind: SegmentKind::Pad,
        }
    }

    #[test]
    fn sorts_and_merges_contiguous_neighbours() {
        let mut map = ByteRangeMap::new(40);
        map.push_data(10, 5, A, 105)
            .push_data(0, 10, A, 95)
            .push_pad(15, 3)
            .push_pad(18, 2)
            .push_data(20, 5, A, 200)
            .push_data(25, 5, B, 205)
            .push_data(30, 10, B, 210);
        let normalized = map.normalize().unwrap();
        assert_eq!(
            normalized.segments(),
            [
                data(0..15, A, 95),
                pad(15..20),
                data(20..25, A, 200),
                data(25..40, B, 205),
            ]
        );
    }

    #[test]
    fn does_not_merge_a_source_jump() {
        let mut map = ByteRangeMap::new(10);
        map.push_data(0, 5, A, 0).push_data(5, 5, A, 6);
        let normalized = map.normalize().unwrap();
        assert_eq!(normalized.segments(), [data(0..5, A, 0), data(5..10, A, 6)]);
    }

    #[test]
    fn drops_zero_length_segments_anywhere() {
        let mut map = ByteRangeMap::new(4);
        map.push_pad(0, 4).push_data(2, 0, B, 7).push_pad(99, 0);
        assert_eq!(map.normalize().unwrap().segments(), [pad(0..4)]);
    }

    #[test]
    fn empty_destination_needs_no_segments() {
        let normalized = ByteRangeMap::new(0).normalize().unwrap();
        assert!(normalized.segments().is_empty());
        assert_eq!(normalized.dest_len(), 0);
    }

    #[test]
    fn rejects_gaps_in_the_middle_head_and_tail() {
        let gap = |pushes: &[(u64, u64)], dest_len| {
            let mut map = ByteRangeMap::new(dest_len);
            for &(offset, len) in pushes {
                map.push_pad(offset, len);
            }
            map.normalize().unwrap_err()
        };
        assert_eq!(gap(&[(0, 4), (6, 4)], 10), MapError::Gap { range: 4..6 });
        assert_eq!(gap(&[(3, 7)], 10), MapError::Gap { range: 0..3 });
        assert_eq!(gap(&[(0, 7)], 10), MapError::Gap { range: 7..10 });
        assert_eq!(gap(&[], 10), MapError::Gap { range: 0..10 });
    }

    #[test]
    fn rejects_overlaps_naming_both_ranges() {
        let mut map = ByteRangeMap::new(10);
        map.push_data(0, 6, A, 0).push_pad(4, 6);
        assert_eq!(
            map.normalize().unwrap_err(),
            MapError::Overlap {
                first: 0..6,
                second: 4..10
            }
        );
    }

    #[test]
    fn rejects_an_overlap_hidden_by_a_merge() {
        // 0..5 and 5..10 merge; 5..8 overlaps the second of them.
        let mut map = ByteRangeMap::new(10);
        map.push_pad(0, 5).push_pad(5, 5).push_pad(5, 3);
        assert_eq!(
            map.normalize().unwrap_err(),
            MapError::Overlap {
                first: 5..10,
                second: 5..8
            }
        );
    }

    #[test]
    fn rejects_segments_past_the_destination_or_u64() {
        let mut map = ByteRangeMap::new(10);
        map.push_pad(0, 10).push_pad(8, 4);
        assert_eq!(
            map.normalize().unwrap_err(),
            MapError::OutOfBounds {
                dest_offset: 8,
                len: 4,
                dest_len: 10
            }
        );
        let mut map = ByteRangeMap::new(u64::MAX);
        map.push_data(0, u64::MAX, A, 1);
        assert_eq!(
            map.normalize().unwrap_err(),
            MapError::Overflow {
                dest_offset: 0,
                len: u64::MAX
            }
        );
    }

    #[test]
    fn check_sources_reports_short_and_unknown_sources() {
        let mut map = ByteRangeMap::new(20);
        map.push_data(0, 10, A, 0).push_data(10, 10, B, 5);
        let normalized = map.normalize().unwrap();
        assert_eq!(normalized.check_sources(&[10, 15]), Ok(()));
        // Every uncovered destination range is listed, with what it needed.
        assert_eq!(
            normalized.check_sources(&[4, 14]),
            Err(MapError::Unavailable {
                missing: vec![
                    Uncovered {
                        dest: 4..10,
                        source_index: A,
                        src: 4..10,
                        source_len: 4
                    },
                    Uncovered {
                        dest: 19..20,
                        source_index: B,
                        src: 14..15,
                        source_len: 14
                    },
                ]
            })
        );
        let err = normalized.check_sources(&[4, 14]).unwrap_err().to_string();
        assert!(
            err.starts_with("unavailable: destination bytes 4..10 need bytes 4..10 of source #0"),
            "{err}"
        );
        assert_eq!(
            normalized.check_sources(&[10]),
            Err(MapError::UnknownSource {
                source_index: B,
                supplied: 1
            })
        );
    }
}
