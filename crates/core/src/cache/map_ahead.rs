//! Read-ahead that follows a file's map instead of its objects.
//!
//! The per-object prefetcher (`prefetch.rs`) sees a run only where a
//! file's bytes lie in object order. A synthesized file (a shuffled tar
//! shard: each member from anywhere in any pack) reads its objects in no
//! order at all, yet its whole map is known: what comes after byte `n` of
//! the file is known before it is asked for. So runs are tracked per
//! *file* here, and a file read front to back has the next window of its
//! map fetched ahead: its source ranges sorted by object and offset,
//! neighbours merged (a source-ordered window schedule), fetched
//! as prefetch GETs into the block cache, where the demand reads find them.
//!
//! The evidence and window rules are the per-object prefetcher's: two
//! reads in a row that move a run on, then a window that doubles per read
//! up to `max_window`, topped up when less than half of it is left.

use std::num::NonZeroUsize;
use std::ops::Range;

use parking_lot::Mutex;

use super::CacheOptions;

/// Files whose run is remembered.
const TRACKED_FILES: usize = 1024;
/// How far before a run's end, or past what was read ahead for it, a read
/// may start and still continue it. The kernel keeps several requests of a
/// file's read-ahead in flight (the mount asks for 4 MiB of it) and the
/// FUSE threads finish them in any order, so a front-to-back reader's
/// requests land anywhere within that window of each other; resetting the
/// run on each would stop the windows just when they are needed.
const BAND: u64 = 8 << 20;
/// Reads in a row that move a run on before it reads ahead.
const EVIDENCE: u32 = 2;

/// A file's run, in file offsets.
struct Run {
    /// End of the furthest read.
    next: u64,
    /// End of what has been read ahead.
    ahead: u64,
    streak: u32,
    /// Read-ahead window in bytes; 0 before the run reads ahead.
    window: u64,
}

/// Runs of files by a caller-chosen key (an inode).
pub(crate) struct MapAhead {
    runs: Mutex<lru::LruCache<u64, Run>>,
}

impl Default for MapAhead {
    fn default() -> Self {
        MapAhead {
            runs: Mutex::new(lru::LruCache::new(
                NonZeroUsize::new(TRACKED_FILES).expect("not zero"),
            )),
        }
    }
}

impl MapAhead {
    /// Notes a read of `range` of file `file` (`size` bytes long); returns
    /// the bytes of the file to read ahead now, if any.
    pub(crate) fn on_read(
        &self,
        options: &CacheOptions,
        file: u64,
        range: Range<u64>,
        size: u64,
    ) -> Option<Range<u64>> {
        let mut runs = self.runs.lock();
        let run = runs.get_or_insert_mut(file, || Run {
            next: 0,
            ahead: 0,
            streak: 0,
            window: 0,
        });
        let continues =
            range.start + BAND >= run.next && range.start <= run.next.max(run.ahead) + BAND;
        if !continues {
            *run = Run {
                next: range.end,
                ahead: range.end,
                streak: u32::from(range.start == 0),
                window: 0,
            };
            return None;
        }
        if range.end > run.next {
            run.next = range.end;
            run.streak = run.streak.saturating_add(1);
            if run.streak >= EVIDENCE {
                run.window = (run.window * 2).clamp(options.block_size, options.max_window);
            }
        }
        if run.window == 0 {
            return None;
        }
        let from = run.ahead.max(run.next);
        let target = size.min(run.next + run.window);
        // Top up in large steps: only when less than half a window is left.
        if from >= target || (from - run.next) * 2 > run.window {
            return None;
        }
        run.ahead = target;
        Some(from..target)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_front_to_back_reader_gets_growing_windows_and_a_seeker_none() {
        let options = CacheOptions::default();
        let ahead = MapAhead::default();
        let size = 1 << 30;
        let read = |file, at: u64| ahead.on_read(&options, file, at..at + (128 << 10), size);
        assert_eq!(read(1, 0), None, "one read is no run");
        let first = read(1, 128 << 10).expect("the second read in a row reads ahead");
        assert_eq!(first, (256 << 10)..(512 << 10));
        let mut covered = first.end;
        let mut at = 256 << 10;
        while at < (64 << 20) {
            if let Some(r) = read(1, at) {
                assert_eq!(r.start, covered, "windows follow on");
                covered = r.end;
            }
            at += 128 << 10;
        }
        assert!(covered - at >= (32 << 20), "the window grew to max_window");
        // Another file reading here and there never reads ahead.
        for at in [50u64 << 20, 10 << 20, 90 << 20, 30 << 20] {
            assert_eq!(read(2, at), None);
        }
        // Nor past the end of a file.
        assert_eq!(ahead.on_read(&options, 3, 0..10, 20), None);
        assert_eq!(ahead.on_read(&options, 3, 10..20, 20), None);
    }

    #[test]
    fn requests_finished_out_of_order_keep_the_run_going() {
        let options = CacheOptions::default();
        let ahead = MapAhead::default();
        let mib = 1u64 << 20;
        // A front-to-back reader's 1 MiB requests, each group of four
        // arriving in another order, as concurrent FUSE threads finish them.
        let order = [1u64, 0, 3, 2, 2, 0, 3, 1, 3, 2, 1, 0];
        let mut covered = 0;
        let mut last = 0;
        for group in 0..16u64 {
            for i in 0..4 {
                let at = (group * 4 + order[(group as usize * 4 + i) % order.len()]) * mib;
                if let Some(r) = ahead.on_read(&options, 1, at..at + mib, 1 << 30) {
                    assert!(r.start >= covered, "nothing is fetched ahead twice");
                    covered = r.end;
                }
                last = last.max(at + mib);
            }
        }
        assert!(
            covered >= last + options.max_window / 2,
            "the window grew as for an ordered reader: {covered} after {last}"
        );
    }
}
