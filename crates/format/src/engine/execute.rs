//! Running a [`ByteRangeProgram`] against its sources: written straight
//! into the caller's buffer, or (programs with a strided run) staged.

use std::ops::Range;

use bytes::{Bytes, BytesMut};
use futures::future::BoxFuture;
use futures::{StreamExt, TryFutureExt, TryStreamExt};
use thiserror::Error;

use super::map::{uncovered, MapError, SourceIndex};
use super::program::{ByteRangeProgram, Run};
use super::source::{SeekableSource, SourceError, Target};

/// How many reads one execution keeps in flight: enough to hide storage
/// latency, few enough not to flood the store or hold many windows at once.
const MAX_IN_FLIGHT: usize = 16;

/// Why a program could not produce its destination bytes.
#[derive(Debug, Error)]
#[non_exhaustive]
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
    /// The caller's buffer is not the destination's length.
    #[error("the destination is {dest_len} bytes, the buffer given for it {buffer}")]
    BufferSize { dest_len: u64, buffer: usize },
}

impl ByteRangeProgram {
    /// Whether [`ByteRangeProgram::execute_into`] writes straight into the
    /// caller's buffer: unless the program has a strided run, whose pieces
    /// are packed through a staging buffer.
    pub(crate) fn writes_directly(&self) -> bool {
        !self
            .runs()
            .iter()
            .any(|run| matches!(run, Run::Strided { .. }))
    }

    /// Produces exactly the destination bytes in a buffer of their own;
    /// `sources[i]` is [`SourceIndex`]`(i)`. A program that is one
    /// contiguous read returns that read's bytes without copying; any other
    /// is written as by [`ByteRangeProgram::execute_into`], into a new
    /// buffer (or staged, with no copy after).
    pub async fn execute(&self, sources: &[&dyn SeekableSource]) -> Result<Bytes, ExecuteError> {
        self.check(sources)?;
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
        if !self.writes_directly() {
            return self.stage(sources).await;
        }
        let mut out = vec![0; self.dest_len_in_memory()?];
        self.write_direct(sources, &mut out).await?;
        Ok(out.into())
    }

    /// Writes exactly the destination bytes into `dest`, which must be
    /// [`ByteRangeProgram::dest_len`] bytes long; `sources[i]` is
    /// [`SourceIndex`]`(i)`. Every read is first checked against the
    /// sources' lengths, so missing coverage fails before any I/O; reads
    /// run concurrently, a bounded number at a time.
    ///
    /// Direct write: each run's read lands straight in its places in
    /// `dest` ([`SeekableSource::read_scatter_at`]) and PAD runs zero their
    /// own bytes, so every byte of `dest` is written exactly once whatever
    /// it held before, with no staging buffer to zero and copy out of.
    /// A program containing any strided run does not write directly: it
    /// is staged as by
    /// [`ByteRangeProgram::execute_staged`] and copied into `dest`. On an
    /// error `dest` holds unspecified bytes.
    pub async fn execute_into(
        &self,
        sources: &[&dyn SeekableSource],
        dest: &mut [u8],
    ) -> Result<(), ExecuteError> {
        if dest.len() as u64 != self.dest_len() {
            return Err(ExecuteError::BufferSize {
                dest_len: self.dest_len(),
                buffer: dest.len(),
            });
        }
        self.check(sources)?;
        if self.writes_directly() {
            return self.write_direct(sources, dest).await;
        }
        dest.copy_from_slice(&self.stage(sources).await?);
        Ok(())
    }

    /// Produces the destination through a staging buffer: zeroed whole,
    /// each run read into a buffer of the source's ([`SeekableSource::read_at`])
    /// and its pieces copied out. The path of programs with a strided run;
    /// any program can take it, which lets a benchmark set it against
    /// direct write.
    pub async fn execute_staged(
        &self,
        sources: &[&dyn SeekableSource],
    ) -> Result<Bytes, ExecuteError> {
        self.check(sources)?;
        self.stage(sources).await
    }

    /// Fails if a read of the program lies outside its source, or names
    /// no source. Callers check the map first
    /// (`NormalizedMap::check_sources`); checked again here so that no
    /// program reads past a source.
    fn check(&self, sources: &[&dyn SeekableSource]) -> Result<(), ExecuteError> {
        let lens: Vec<u64> = sources.iter().map(|s| s.len()).collect();
        let mut missing = Vec::new();
        for run in self.runs() {
            let Some(source) = run.source() else { continue };
            for piece in run.pieces() {
                missing.extend(uncovered(source, piece.src(), piece.dest_offset, &lens)?);
            }
        }
        match missing.is_empty() {
            true => Ok(()),
            false => Err(MapError::Unavailable { missing }.into()),
        }
    }

    fn dest_len_in_memory(&self) -> Result<usize, ExecuteError> {
        usize::try_from(self.dest_len()).map_err(|_| ExecuteError::TooLarge {
            dest_len: self.dest_len(),
        })
    }

    /// Direct write of a checked program into `dest`, of its length.
    async fn write_direct(
        &self,
        sources: &[&dyn SeekableSource],
        dest: &mut [u8],
    ) -> Result<(), ExecuteError> {
        // Every piece's place, `(dest, run, src_offset)`, in destination
        // order: a normalized map covers each byte exactly once, so the
        // places tile `dest`, and cutting them off it one after another
        // gives each run its own disjoint slices.
        let mut places = Vec::new();
        for (index, run) in self.runs().iter().enumerate() {
            match run {
                Run::Pad { dest: pad } => places.push((pad.clone(), index, 0)),
                _ => places.extend(run.pieces().iter().map(|p| (p.dest(), index, p.src_offset))),
            }
        }
        places.sort_unstable_by_key(|(dest, ..)| dest.start);
        let mut targets: Vec<Vec<Target<'_>>> = self.runs().iter().map(|_| Vec::new()).collect();
        let mut rest = dest;
        for (place, index, src_offset) in places {
            let (head, tail) = std::mem::take(&mut rest).split_at_mut(in_memory(place).len());
            targets[index].push(Target {
                src_offset,
                dest: head,
            });
            rest = tail;
        }
        debug_assert!(rest.is_empty(), "the runs leave bytes unwritten");

        let mut reads = Vec::new();
        for (run, targets) in self.runs().iter().zip(targets) {
            match run_read(run) {
                // PAD zeroes its own bytes and nothing else.
                None => targets.into_iter().for_each(|t| t.dest.fill(0)),
                Some((source, src)) => reads.push(read_into(sources, source, src, targets)),
            }
        }
        futures::stream::iter(reads)
            .buffer_unordered(MAX_IN_FLIGHT)
            .try_collect()
            .await
    }

    /// The staging path of a checked program.
    async fn stage(&self, sources: &[&dyn SeekableSource]) -> Result<Bytes, ExecuteError> {
        // Zeroed up front: this is the fill of the PAD runs. Every other
        // byte belongs to exactly one data run (a normalized map covers the
        // destination exactly once) and is overwritten below.
        let mut out = BytesMut::zeroed(self.dest_len_in_memory()?);
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

/// The source `source` of `sources`, which `check` has found there.
fn source_of<'a>(
    sources: &[&'a dyn SeekableSource],
    source: SourceIndex,
) -> &'a dyn SeekableSource {
    sources
        .get(source.0)
        .copied()
        .expect("execute checks every source index before reading")
}

/// Reads bytes `src` of `source`, holding the source to its contract.
async fn read(
    sources: &[&dyn SeekableSource],
    source: SourceIndex,
    src: Range<u64>,
) -> Result<Bytes, ExecuteError> {
    let (offset, len) = (src.start, src.end - src.start);
    let bytes = source_of(sources, source)
        .read_at(offset, len)
        .await
        .map_err(|error| ExecuteError::Read {
            source_index: source,
            offset,
            len,
            error,
        })?;
    held_to_contract(source, src, bytes.len() as u64)?;
    Ok(bytes)
}

/// Reads bytes `src` of `source` straight into `targets`, holding the
/// source to its contract. A read of one piece is a plain
/// [`SeekableSource::read_into_at`].
async fn read_into(
    sources: &[&dyn SeekableSource],
    source: SourceIndex,
    src: Range<u64>,
    mut targets: Vec<Target<'_>>,
) -> Result<(), ExecuteError> {
    let reader = source_of(sources, source);
    let (offset, len) = (src.start, src.end - src.start);
    let read: BoxFuture<'_, _> = match targets.as_slice() {
        [one] if one.src_offset == offset && one.dest.len() as u64 == len => {
            let one = targets.pop().expect("one target");
            reader.read_into_at(one.src_offset, one.dest)
        }
        _ => reader.read_scatter_at(src.clone(), targets),
    };
    let got = read.await.map_err(|error| ExecuteError::Read {
        source_index: source,
        offset,
        len,
        error,
    })?;
    held_to_contract(source, src, got)
}

/// Fails a read of `src` that delivered `got` bytes instead of all.
fn held_to_contract(source: SourceIndex, src: Range<u64>, got: u64) -> Result<(), ExecuteError> {
    let expected = src.end - src.start;
    match got == expected {
        true => Ok(()),
        false => Err(ExecuteError::ShortRead {
            source_index: source,
            offset: src.start,
            expected,
            got,
        }),
    }
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

    /// A memory source that counts which way it is read: `read_at` (the
    /// staged path) or `read_scatter_at` (direct write, which may `lie`
    /// that it had one byte fewer).
    struct Counting {
        inner: MemorySource,
        reads: AtomicUsize,
        scatters: AtomicUsize,
        lie: bool,
    }

    impl Counting {
        fn new(bytes: impl Into<Bytes>) -> Self {
            Counting {
                inner: MemorySource::new(bytes),
                reads: AtomicUsize::new(0),
                scatters: AtomicUsize::new(0),
                lie: false,
            }
        }

        fn counts(&self) -> (usize, usize) {
            let load = |n: &AtomicUsize| n.load(Ordering::SeqCst);
            (load(&self.reads), load(&self.scatters))
        }
    }

    impl SeekableSource for Counting {
        fn len(&self) -> u64 {
            self.inner.len()
        }

        fn read_at(&self, offset: u64, len: u64) -> BoxFuture<'_, Result<Bytes, SourceError>> {
            self.reads.fetch_add(1, Ordering::SeqCst);
            self.inner.read_at(offset, len)
        }

        fn read_scatter_at<'a>(
            &'a self,
            src: Range<u64>,
            targets: Vec<Target<'a>>,
        ) -> BoxFuture<'a, Result<u64, SourceError>> {
            self.scatters.fetch_add(1, Ordering::SeqCst);
            if self.lie {
                let claimed = src.end - src.start - 1;
                return Box::pin(async move { Ok(claimed) });
            }
            self.inner.read_scatter_at(src, targets)
        }
    }

    /// The destination by every path: [`ByteRangeProgram::execute`],
    /// staged, and into buffers holding garbage; all must agree.
    fn every_path(program: &ByteRangeProgram, sources: &[&dyn SeekableSource]) -> Bytes {
        let out = block_on(program.execute(sources)).unwrap();
        let staged = block_on(program.execute_staged(sources)).unwrap();
        assert_eq!(out, staged, "execute and the staged path");
        for garbage in [0x00, 0xa5, 0xff] {
            let mut dest = vec![garbage; out.len()];
            block_on(program.execute_into(sources, &mut dest)).unwrap();
            assert_eq!(dest, out, "into a buffer of {garbage:#x}");
        }
        out
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
        let program = program(map);
        assert!(program.writes_directly());
        assert_eq!(every_path(&program, &[&a, &b]), &b"XYZ\0\0ghab\0bc"[..]);
    }

    #[test]
    fn direct_write_reads_each_run_once_straight_into_place() {
        // A's pieces coalesce into one read (overlapping in the source,
        // out of destination order); B's is alone.
        let (a, b) = (Counting::new(&b"abcdefgh"[..]), Counting::new(&b"XYZ"[..]));
        let mut map = ByteRangeMap::new(13);
        map.push_data(0, 2, A, 4)
            .push_pad(2, 3)
            .push_data(5, 3, A, 0)
            .push_data(8, 2, B, 1)
            .push_data(10, 3, A, 1);
        let program = program(map);
        assert!(matches!(program.runs()[0], Run::Coalesced { .. }));
        let mut dest = vec![0xee; 13];
        block_on(program.execute_into(&[&a, &b], &mut dest)).unwrap();
        assert_eq!(dest, b"ef\0\0\0abcYZbcd");
        assert_eq!((a.counts(), b.counts()), ((0, 1), (0, 1)));
    }

    #[test]
    fn pad_zeroes_its_own_bytes_over_garbage_and_nothing_else() {
        let a = Counting::new(&b"ABCDEFGHIJ"[..]);
        let mut map = ByteRangeMap::new(10);
        map.push_pad(0, 3)
            .push_data(3, 2, A, 8)
            .push_pad(5, 4)
            .push_data(9, 1, A, 0);
        let mut dest = vec![0xff; 10];
        block_on(program(map).execute_into(&[&a], &mut dest)).unwrap();
        assert_eq!(dest, b"\0\0\0IJ\0\0\0\0A");
        assert_eq!(a.counts(), (0, 2));
    }

    #[test]
    fn strided_programs_are_staged() {
        // Rows of 4 bytes, 5 apart in A, every 8 bytes in the destination,
        // interleaved with B's rows: two strided runs.
        let a = Counting::new((0..20u8).collect::<Vec<_>>());
        let b = Counting::new((100..116u8).collect::<Vec<_>>());
        let mut map = ByteRangeMap::new(32);
        for row in 0..4 {
            map.push_data(row * 8, 4, A, row * 5)
                .push_data(row * 8 + 4, 4, B, row * 4);
        }
        let program = program(map);
        assert!(program
            .runs()
            .iter()
            .all(|r| matches!(r, Run::Strided { .. })));
        assert!(!program.writes_directly());
        let sources: [&dyn SeekableSource; 2] = [&a, &b];
        let mut dest = vec![0xff; 32];
        block_on(program.execute_into(&sources, &mut dest)).unwrap();
        assert_eq!(&dest[..12], [0, 1, 2, 3, 100, 101, 102, 103, 5, 6, 7, 8]);
        assert_eq!((a.counts(), b.counts()), ((1, 0), (1, 0)));
        assert_eq!(every_path(&program, &sources), dest);
        assert_eq!(a.counts().1 + b.counts().1, 0, "never written directly");
    }

    #[test]
    fn a_buffer_of_another_length_is_refused() {
        let a = MemorySource::new(&b"0123"[..]);
        let mut map = ByteRangeMap::new(4);
        map.push_data(0, 2, A, 0).push_pad(2, 2);
        let program = program(map);
        for len in [3, 5] {
            let err = block_on(program.execute_into(&[&a], &mut vec![0; len])).unwrap_err();
            assert!(
                matches!(err, ExecuteError::BufferSize { dest_len: 4, buffer } if buffer == len),
                "{err}"
            );
        }
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
        assert!(every_path(&program(ByteRangeMap::new(0)), &[]).is_empty());
        let mut map = ByteRangeMap::new(5);
        map.push_pad(0, 5);
        assert_eq!(every_path(&program(map), &[&source]), &[0u8; 5][..]);
        assert_eq!(source.reads.load(Ordering::SeqCst), 0);
    }

    /// Every way of executing `program`, each failed with what `check`
    /// says of its error.
    fn every_path_fails(
        program: &ByteRangeProgram,
        sources: &[&dyn SeekableSource],
        check: impl Fn(&ExecuteError) -> bool,
    ) {
        let mut dest = vec![0; program.dest_len() as usize];
        for err in [
            block_on(program.execute(sources)).unwrap_err(),
            block_on(program.execute_staged(sources)).unwrap_err(),
            block_on(program.execute_into(sources, &mut dest)).unwrap_err(),
        ] {
            assert!(check(&err), "{err}");
        }
    }

    #[test]
    fn a_short_read_is_an_error_not_data() {
        // `read_at` one byte short: under the provided `read_into_at` and
        // `read_scatter_at` too.
        let mut source = Faulty::new(b"0123456789");
        source.short_by = 1;
        for pad in [0, 2] {
            let mut map = ByteRangeMap::new(6 + pad);
            map.push_data(0, 6, A, 3).push_pad(6, pad);
            every_path_fails(&program(map), &[&source], |err| {
                matches!(
                    err,
                    ExecuteError::ShortRead {
                        source_index: A,
                        offset: 3,
                        expected: 6,
                        got: 5
                    }
                )
            });
        }
        // A direct read that owns up to having had too few bytes.
        let mut source = Counting::new(&b"0123456789"[..]);
        source.lie = true;
        let mut map = ByteRangeMap::new(6);
        map.push_data(0, 2, A, 1)
            .push_pad(2, 2)
            .push_data(4, 2, A, 3);
        let mut dest = vec![0; 6];
        let err = block_on(program(map).execute_into(&[&source], &mut dest)).unwrap_err();
        assert!(
            matches!(
                err,
                ExecuteError::ShortRead {
                    source_index: A,
                    offset: 1,
                    expected: 4,
                    got: 3
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn a_failed_read_keeps_its_cause() {
        let mut source = Faulty::new(b"0123456789");
        source.fail = true;
        let mut map = ByteRangeMap::new(4);
        map.push_data(0, 4, A, 1);
        every_path_fails(&program(map), &[&source], |err| {
            err.to_string() == "reading 4 bytes at offset 1 of source #0: disk on fire"
        });
    }

    #[test]
    fn missing_coverage_fails_before_any_read() {
        let (a, b) = (Faulty::new(b"0123456789"), Faulty::new(b"abc"));
        let mut map = ByteRangeMap::new(8);
        map.push_data(0, 4, A, 0)
            .push_data(4, 2, B, 2)
            .push_data(6, 2, B, 0);
        let program = program(map);
        every_path_fails(&program, &[&a, &b], |err| {
            matches!(
                err,
                ExecuteError::Map(MapError::Unavailable { missing }) if *missing == [Uncovered {
                    dest: 5..6,
                    source_index: B,
                    src: 3..4,
                    source_len: 3,
                }]
            )
        });
        every_path_fails(&program, &[&a], |err| {
            matches!(
                err,
                ExecuteError::Map(MapError::UnknownSource {
                    source_index: B,
                    supplied: 1
                })
            )
        });
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
        assert_send(program.execute_into(&[], &mut []));
    }
}
