//! Running a [`ByteRangeProgram`] against its sources.

use std::ops::Range;

use bytes::{Bytes, BytesMut};
use futures::{StreamExt, TryFutureExt, TryStreamExt};
use thiserror::Error;

use super::map::{uncovered, MapError, SourceIndex};
use super::program::{ByteRangeProgram, Run};
use super::source::{SeekableSource, SourceError};

/// How many reads one execution keeps in flight: enough to hide storage
/// latency, few enough not to flood the store or hold many windows at once.
const MAX_IN_FLIGHT: usize = 16;

/// Why a program could not produce its destination bytes.
#[derive(Debug, Error)]
pub enum ExecuteError {
    /// The sources do not hold the bytes the program reads; found before
    /// any read was issued.
    #[error(transparent)]
    Map(#[from] MapError),
    /// A source broke the read contract: it returned a different number of
    /// bytes than asked for instead of an error.
    #[error(
        "{source_index} returned {got} bytes at offset {offset} where {expected} were asked for"
    )]
    ShortRead {
        source_index: SourceIndex,
        offset: u64,
        expected: u64,
        got: u64,
    },
    /// A source failed a read.
    #[error("reading {len} bytes at offset {offset} of {source_index}: {error}")]
    Read {
        source_index: SourceIndex,
        offset: u64,
        len: u64,
        #[source]
        error: SourceError,
    },
    /// The destination is larger than this platform can address in memory.
    #[error("a destination of {dest_len} bytes does not fit in memory")]
    TooLarge { dest_len: u64 },
}

impl ByteRangeProgram {
    /// Produces exactly the destination bytes; `sources[i]` is
    /// [`SourceIndex`]`(i)`. Every read is first checked against the
    /// sources' lengths, so missing coverage fails before any I/O. Reads run
    /// concurrently (a bounded number at a time); a program that is one
    /// contiguous read returns that read's bytes without copying.
    pub async fn execute(&self, sources: &[&dyn SeekableSource]) -> Result<Bytes, ExecuteError> {
        // Callers check the map first (`NormalizedMap::check_sources`);
        // checked again here so that no program reads past a source.
        let lens: Vec<u64> = sources.iter().map(|s| s.len()).collect();
        let mut missing = Vec::new();
        for run in self.runs() {
            let Some(source) = run.source() else { continue };
            for piece in run.pieces() {
                missing.extend(uncovered(source, piece.src(), piece.dest_offset, &lens)?);
            }
        }
        if !missing.is_empty() {
            return Err(MapError::Unavailable { missing }.into());
        }

        // A program's only run covers its whole destination.
        if let [Run::Contiguous {
            source,
            src_offset,
            dest,
        }] = self.runs()
        {
            let src = *src_offset..src_offset + (dest.end - dest.start);
            return read(sources, *source, src).await;
        }

        let dest_len = usize::try_from(self.dest_len()).map_err(|_| ExecuteError::TooLarge {
            dest_len: self.dest_len(),
        })?;
        // Zeroed up front: this is the fill of the PAD runs. Every other
        // byte belongs to exactly one data run (a normalized map covers the
        // destination exactly once) and is overwritten below.
        let mut out = BytesMut::zeroed(dest_len);
        // Collected, not lazy: a lazy iterator's closure held across the
        // awaits below would keep the future from being `Send`.
        let reads: Vec<_> = self
            .runs()
            .iter()
            .filter_map(|run| {
                let (source, src) = run_read(run)?;
                Some(read(sources, source, src).map_ok(move |bytes| (run, bytes)))
            })
            .collect();
        let mut done = futures::stream::iter(reads).buffer_unordered(MAX_IN_FLIGHT);
        while let Some((run, bytes)) = done.try_next().await? {
            scatter(&mut out, run, &bytes);
        }
        Ok(out.freeze())
    }
}

/// The one read a run issues, if any: which source, which bytes.
fn run_read(run: &Run) -> Option<(SourceIndex, Range<u64>)> {
    Some((run.source()?, run.src()?))
}

/// Reads bytes `src` of `source`, holding the source to its contract.
async fn read(
    sources: &[&dyn SeekableSource],
    source: SourceIndex,
    src: Range<u64>,
) -> Result<Bytes, ExecuteError> {
    let reader = sources
        .get(source.0)
        .expect("execute checks every source index before reading");
    let (offset, len) = (src.start, src.end - src.start);
    let bytes = reader
        .read_at(offset, len)
        .await
        .map_err(|error| ExecuteError::Read {
            source_index: source,
            offset,
            len,
            error,
        })?;
    if bytes.len() as u64 != len {
        return Err(ExecuteError::ShortRead {
            source_index: source,
            offset,
            expected: len,
            got: bytes.len() as u64,
        });
    }
    Ok(bytes)
}

/// Copies the bytes read for `run` to where the run says they go.
fn scatter(out: &mut [u8], run: &Run, bytes: &[u8]) {
    match run {
        Run::Pad { .. } => {}
        Run::Contiguous { dest, .. } => out[in_memory(dest.clone())].copy_from_slice(bytes),
        Run::Coalesced { src, pieces, .. } => {
            for piece in pieces {
                let within = piece.src_offset - src.start..piece.src().end - src.start;
                out[in_memory(piece.dest())].copy_from_slice(&bytes[in_memory(within)]);
            }
        }
        Run::Strided {
            src_stride,
            dest_start,
            dest_stride,
            len,
            count,
            ..
        } => {
            // Packs the span read: piece i is `len` bytes at i strides.
            for i in 0..*count {
                let (from, to) = (i * src_stride, dest_start + i * dest_stride);
                out[in_memory(to..to + len)].copy_from_slice(&bytes[in_memory(from..from + len)]);
            }
        }
    }
}

/// A range of a buffer that is already in memory, as indexes.
fn in_memory(range: Range<u64>) -> Range<usize> {
    let index =
        |n: u64| usize::try_from(n).expect("an offset within a buffer in memory fits in usize");
    index(range.start)..index(range.end)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use futures::executor::block_on;
    use futures::future::BoxFuture;

    use super::*;
    use crate::engine::map::{ByteRangeMap, Uncovered};
    use crate::engine::program::CoalesceLimits;
    use crate::engine::source::MemorySource;

    const A: SourceIndex = SourceIndex(0);
    const B: SourceIndex = SourceIndex(1);

    fn program(map: ByteRangeMap) -> ByteRangeProgram {
        ByteRangeProgram::compile(&map.normalize().unwrap(), &CoalesceLimits::default())
    }

    /// A memory source that counts its reads and may return fewer bytes
    /// than asked for, or fail.
    struct Faulty {
        inner: MemorySource,
        reads: AtomicUsize,
        short_by: usize,
        fail: bool,
    }

    impl Faulty {
        fn new(bytes: &'static [u8]) -> Self {
            Faulty {
                inner: MemorySource::new(bytes),
                reads: AtomicUsize::new(0),
                short_by: 0,
                fail: false,
            }
        }
    }

    impl SeekableSource for Faulty {
        fn len(&self) -> u64 {
            self.inner.len()
        }

        fn read_at(&self, offset: u64, len: u64) -> BoxFuture<'_, Result<Bytes, SourceError>> {
            self.reads.fetch_add(1, Ordering::SeqCst);
            Box::pin(async move {
                if self.fail {
                    return Err(SourceError::Other("disk on fire".into()));
                }
                let bytes = self.inner.read_at(offset, len).await?;
                Ok(bytes.slice(..bytes.len() - self.short_by))
            })
        }
    }

    #[test]
    fn assembles_data_and_explicit_pad() {
        let (a, b) = (
            MemorySource::new(&b"abcdefgh"[..]),
            MemorySource::new(&b"XYZ"[..]),
        );
        let mut map = ByteRangeMap::new(12);
        map.push_data(0, 3, B, 0)
            .push_pad(3, 2)
            .push_data(5, 2, A, 6)
            .push_data(7, 2, A, 0)
            .push_pad(9, 1)
            .push_data(10, 2, A, 1);
        let out = block_on(program(map).execute(&[&a, &b])).unwrap();
        assert_eq!(out, &b"XYZ\0\0ghab\0bc"[..]);
    }

    #[test]
    fn one_contiguous_run_returns_the_source_bytes_uncopied() {
        let bytes = Bytes::from_static(b"0123456789");
        let source = MemorySource::new(bytes.clone());
        let mut map = ByteRangeMap::new(4);
        map.push_data(0, 4, A, 2);
        let out = block_on(program(map).execute(&[&source])).unwrap();
        assert_eq!(out, &b"2345"[..]);
        assert_eq!(out.as_ptr(), bytes[2..].as_ptr());
    }

    #[test]
    fn empty_and_all_pad_destinations_read_nothing() {
        let source = Faulty::new(b"abc");
        let out = block_on(program(ByteRangeMap::new(0)).execute(&[])).unwrap();
        assert!(out.is_empty());
        let mut map = ByteRangeMap::new(5);
        map.push_pad(0, 5);
        let out = block_on(program(map).execute(&[&source])).unwrap();
        assert_eq!(out, &[0u8; 5][..]);
        assert_eq!(source.reads.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn a_short_read_is_an_error_not_data() {
        let mut source = Faulty::new(b"0123456789");
        source.short_by = 1;
        for pad in [0, 2] {
            let mut map = ByteRangeMap::new(6 + pad);
            map.push_data(0, 6, A, 3).push_pad(6, pad);
            let err = block_on(program(map).execute(&[&source])).unwrap_err();
            assert!(
                matches!(
                    err,
                    ExecuteError::ShortRead {
                        source_index: A,
                        offset: 3,
                        expected: 6,
                        got: 5
                    }
                ),
                "{err}"
            );
        }
    }

    #[test]
    fn a_failed_read_keeps_its_cause() {
        let mut source = Faulty::new(b"0123456789");
        source.fail = true;
        let mut map = ByteRangeMap::new(4);
        map.push_data(0, 4, A, 1);
        let err = block_on(program(map).execute(&[&source])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "reading 4 bytes at offset 1 of source #0: disk on fire"
        );
    }

    #[test]
    fn missing_coverage_fails_before_any_read() {
        let (a, b) = (Faulty::new(b"0123456789"), Faulty::new(b"abc"));
        let mut map = ByteRangeMap::new(8);
        map.push_data(0, 4, A, 0)
            .push_data(4, 2, B, 2)
            .push_data(6, 2, B, 0);
        let program = program(map);
        let err = block_on(program.execute(&[&a, &b])).unwrap_err();
        assert!(
            matches!(
                &err,
                ExecuteError::Map(MapError::Unavailable { missing }) if *missing == [Uncovered {
                    dest: 5..6,
                    source_index: B,
                    src: 3..4,
                    source_len: 3,
                }]
            ),
            "{err}"
        );
        let err = block_on(program.execute(&[&a])).unwrap_err();
        assert!(
            matches!(
                err,
                ExecuteError::Map(MapError::UnknownSource {
                    source_index: B,
                    supplied: 1
                })
            ),
            "{err}"
        );
        assert_eq!(
            a.reads.load(Ordering::SeqCst) + b.reads.load(Ordering::SeqCst),
            0
        );
    }

    #[test]
    fn execution_can_be_spawned() {
        fn assert_send<T: Send>(_: T) {}
        let program = program(ByteRangeMap::new(0));
        assert_send(program.execute(&[]));
    }
}
