//! Sequential-run detection per source object, and read-ahead.
//!
//! Runs are tracked per *object*, not per open file: reading item k and
//! then item k+1 of one pack is a run over that pack, exactly like reading
//! a big file front to back. Each object keeps several runs, so loader
//! workers scanning different parts of one pack do not reset each other;
//! a read that continues no run starts a new one, replacing the object's
//! oldest run.
//!
//! On a run the read-ahead window doubles with every newly reached block,
//! from one block up to `max_window`; an object no larger than
//! `max_window` is read ahead to its end (the seed's hint: a sequential
//! scan may fetch the whole pack once). Read-ahead is topped up when less
//! than half a window is left, so GETs stay large. Prefetch GETs in flight
//! hold permits of one global semaphore, so their memory is bounded by
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

/// The run state of one object, in blocks.
struct Run {
    /// First block after the furthest block read.
    next: u64,
    /// First block not yet requested by read-ahead.
    ahead: u64,
    /// Read-ahead window, in blocks; 0 outside a run.
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

    /// Notes a demand read of `blocks` of `object` and reads ahead if it
    /// continues a run.
    pub(super) fn on_read(&self, cache: &BlockCache, object: &ObjectRef, blocks: Range<u64>) {
        let options = &cache.inner.options;
        let bs = options.block_size;
        let total = object.len.div_ceil(bs);
        let max_window = (options.max_window / bs).max(1);
        let ahead = {
            let mut runs = self.runs.lock();
            let object_runs = runs.get_or_insert_mut(object.path.clone(), Vec::new);
            // A read continues a run if it is in the run's last block read,
            // or anywhere up to what was already read ahead for it
            // (concurrent kernel requests arrive out of order).
            let continued = object_runs.iter().position(|run| {
                blocks.start + 1 >= run.next && blocks.start <= run.next.max(run.ahead)
            });
            let Some(i) = continued else {
                if object_runs.len() == RUNS_PER_OBJECT {
                    object_runs.remove(0);
                }
                object_runs.push(Run {
                    next: blocks.end,
                    ahead: blocks.end,
                    window: 0,
                });
                return;
            };
            let run = object_runs.remove(i);
            object_runs.push(run);
            let run = object_runs.last_mut().expect("just pushed");
            if blocks.end > run.next {
                run.window = (run.window * 2).clamp(1, max_window);
                run.next = blocks.end;
            }
            // A run starts once a read moves on to a new block.
            if run.window == 0 {
                return;
            }
            let target = if object.len <= options.max_window {
                total
            } else {
                total.min(run.next + run.window)
            };
            let from = run.ahead.max(run.next);
            // Top up in large steps: only when less than half a window is
            // still ahead of the reader.
            if from >= target || (from - run.next) * 2 > run.window {
                return;
            }
            run.ahead = target;
            from..target
        };
        let per_request = (options.max_request / bs).max(1);
        let mut start = ahead.start;
        while start < ahead.end {
            let end = ahead.end.min(start + per_request);
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
