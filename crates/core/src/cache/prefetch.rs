//! Sequential-run detection per source object, and read-ahead.
//!
//! Runs are tracked per *object*, not per open file: reading item k and
//! then item k+1 of one pack is a run over that pack, exactly like reading
//! a big file front to back. Each object keeps several runs, so loader
//! workers scanning different parts of one pack do not reset each other;
//! a read that continues no run starts a new one, replacing the object's
//! oldest run.
//!
//! Read-ahead needs evidence: a read continues a run only if it starts
//! where the run's reads got to (within [`SLACK`], as concurrent kernel
//! requests arrive out of order) or inside what was read ahead for it, and
//! a run reads ahead only after [`EVIDENCE`] reads in a row have moved it
//! on. A shuffled reader, whose reads land anywhere, almost never builds
//! such a run, so it costs one right-sized GET per read and fetches
//! nothing it does not read (see [`Access`]).
//!
//! On a run the read-ahead window doubles with every read that moves it
//! on, from one block up to `max_window`; an object no larger than
//! `max_window` is read ahead to its end once the run has gone on for
//! [`WHOLE_OBJECT_EVIDENCE`] reads: a sequential scan of a pack's items
//! fetches the whole pack once. A run that reaches the end of an object
//! with a successor (the next chunk of a big item) carries on into it. Read-ahead is topped up when less than half
//! a window is left, so GETs stay large. Prefetch GETs in flight hold
//! permits of one global semaphore, so their memory is bounded by
//! `prefetch_memory`.

use std::ops::Range;
use std::sync::Arc;

use object_store::path::Path;
use parking_lot::Mutex;
use tokio::sync::Semaphore;

use super::{BlockCache, CacheOptions, ObjectRef, Stats};

/// Objects whose run state is remembered.
const TRACKED_OBJECTS: usize = 4096;
/// Concurrent runs tracked per object: several loader workers scanning
/// different parts of one pack each keep their own run.
const RUNS_PER_OBJECT: usize = 8;
/// How far before a run's end a read may start and still continue it.
const SLACK: u64 = 128 << 10;
/// Reads in a row that move a run on before it reads ahead.
const EVIDENCE: u32 = 2;
/// Reads in a row before a run reads a small object ahead to its end.
const WHOLE_OBJECT_EVIDENCE: u32 = 4;

/// How a demand read relates to the object's runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Access {
    /// It continues a run that reads ahead: its blocks are (or will be)
    /// fetched in large GETs, which it shares.
    Sequential,
    /// No evidence of a run (yet): fetch exactly the bytes wanted.
    Random,
}

/// The run state of one object, in bytes.
struct Run {
    /// End of the furthest read.
    next: u64,
    /// End of what read-ahead has requested (block-aligned).
    ahead: u64,
    /// Reads in a row that moved `next` on.
    streak: u32,
    /// Read-ahead window, in blocks; 0 before the run reads ahead.
    window: u64,
}

pub(super) struct Prefetcher {
    /// Per object, its runs, most recently continued last.
    runs: Mutex<lru::LruCache<Arc<Path>, Vec<Run>>>,
    /// Permits are KiB of prefetch GETs in flight.
    memory: Arc<Semaphore>,
}

impl Prefetcher {
    pub(super) fn new(options: &CacheOptions) -> Self {
        let kib = usize::try_from(options.prefetch_memory / 1024)
            .unwrap_or(usize::MAX)
            .max(1);
        Prefetcher {
            runs: Mutex::new(lru::LruCache::new(
                std::num::NonZeroUsize::new(TRACKED_OBJECTS).expect("nonzero"),
            )),
            memory: Arc::new(Semaphore::new(kib.min(Semaphore::MAX_PERMITS))),
        }
    }

    /// Bytes of prefetch GETs holding memory permits now.
    pub(super) fn in_flight_bytes(&self, options: &CacheOptions) -> u64 {
        let kib = (options.prefetch_memory / 1024).max(1);
        let free = self.memory.available_permits() as u64;
        kib.saturating_sub(free) * 1024
    }

    /// Notes a demand read of `bytes` of `object`, reads ahead if it
    /// continues a run that has shown itself, and says which it was.
    pub(super) fn on_read(
        &self,
        cache: &BlockCache,
        object: &ObjectRef,
        bytes: Range<u64>,
    ) -> Access {
        let options = &cache.inner.options;
        let bs = options.block_size;
        let total = object.len.div_ceil(bs);
        let max_window = (options.max_window / bs).max(1);
        let (ahead, carried) = {
            let mut runs = self.runs.lock();
            let object_runs = runs.get_or_insert_mut(object.path.clone(), Vec::new);
            let continued = object_runs.iter().position(|run| {
                bytes.start + SLACK >= run.next && bytes.start <= run.next.max(run.ahead)
            });
            let Some(i) = continued else {
                if object_runs.len() == RUNS_PER_OBJECT {
                    object_runs.remove(0);
                }
                object_runs.push(Run {
                    next: bytes.end,
                    ahead: bytes.end,
                    // Scans start at an object's start: a read there counts
                    // as one of a run already (one GET less per pack at
                    // 20 ms a GET; a shuffled reader rarely lands there).
                    streak: u32::from(bytes.start == 0),
                    window: 0,
                });
                return Access::Random;
            };
            let run = object_runs.remove(i);
            object_runs.push(run);
            let run = object_runs.last_mut().expect("just pushed");
            if bytes.end > run.next {
                run.next = bytes.end;
                run.streak = run.streak.saturating_add(1);
                if run.streak >= EVIDENCE {
                    run.window = (run.window * 2).clamp(1, max_window);
                }
            }
            if run.window == 0 {
                return Access::Random;
            }
            let next_block = run.next.div_ceil(bs);
            let target = if object.len <= options.max_window && run.streak >= WHOLE_OBJECT_EVIDENCE
            {
                total
            } else {
                total.min(next_block + run.window)
            };
            let from = (run.ahead.div_ceil(bs)).max(next_block);
            // Top up in large steps: only when less than half a window is
            // still ahead of the reader.
            if from >= target || (from - next_block) * 2 > run.window {
                return Access::Sequential;
            }
            run.ahead = target * bs;
            let (streak, window) = (run.streak, run.window);
            // Reaching the end, the run goes on into the next object: a
            // run of its own there, as far on as this one.
            let carried = object
                .then
                .as_ref()
                .filter(|_| target == total)
                .and_then(|then| {
                    let then_runs = runs.get_or_insert_mut(then.path.clone(), Vec::new);
                    if then_runs.iter().any(|r| r.next == 0) {
                        return None; // carried already
                    }
                    let blocks = then.len.div_ceil(bs).min(window);
                    if then_runs.len() == RUNS_PER_OBJECT {
                        then_runs.remove(0);
                    }
                    then_runs.push(Run {
                        next: 0,
                        ahead: blocks * bs,
                        streak,
                        window,
                    });
                    Some((then.clone(), blocks))
                });
            (from..target, carried)
        };
        self.read_ahead(cache, object, ahead);
        if let Some((then, blocks)) = carried {
            self.read_ahead(cache, &then, 0..blocks);
        }
        Access::Sequential
    }

    /// Starts prefetch GETs of `blocks` of `object`, as far as the memory
    /// bound allows.
    pub(super) fn read_ahead(&self, cache: &BlockCache, object: &ObjectRef, blocks: Range<u64>) {
        let options = &cache.inner.options;
        let bs = options.block_size;
        let per_request = (options.max_request / bs).max(1);
        let mut start = blocks.start;
        while start < blocks.end {
            let end = blocks.end.min(start + per_request);
            let kib = ((end - start) * bs).div_ceil(1024).min(u64::from(u32::MAX)) as u32;
            match self.memory.clone().try_acquire_many_owned(kib) {
                Ok(permit) => {
                    cache.claim(object, start..end, Some(Arc::new(permit)));
                }
                Err(_) => {
                    // Over the memory bound: demand reads fetch the rest.
                    Stats::add(&cache.inner.stats.prefetch_skipped, 1);
                    return;
                }
            }
            start = end;
        }
    }
}
