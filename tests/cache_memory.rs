//! The memory cache's byte bound holds for the memory really in use, not
//! just for the sum of the cached blocks' lengths: a block must not keep a
//! whole multi-block GET buffer alive after its siblings were evicted.
//!
//! Measured with a counting global allocator, so this file holds one test
//! (a second one running at the same time would disturb the count) and is
//! a test binary of its own: the allocator counts every thread of the
//! process, so it cannot share one with other tests.

// Helpers are shared by several test binaries (and the fuzz corpus with
// the fuzz crate): `pub` there is for them, not API.
#![allow(unreachable_pub)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

use object_store::path::Path;
use packfs_core::cache::{BlockCache, CacheOptions, ObjectRef};
use packfs_core::store::Store;

/// The system allocator, counting the bytes currently allocated.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc(layout);
        if !p.is_null() {
            LIVE.fetch_add(layout.size(), Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        LIVE.fetch_sub(layout.size(), Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = System.realloc(ptr, layout, new_size);
        if !p.is_null() {
            LIVE.fetch_sub(layout.size(), Relaxed);
            LIVE.fetch_add(new_size, Relaxed);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const MIB: usize = 1 << 20;

#[test]
fn cached_blocks_hold_no_more_memory_than_the_bound() {
    const OBJECTS: usize = 120;
    const OBJECT_BYTES: usize = MIB;
    const HOT: usize = 40;
    let tmp = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        // A local directory store: its GETs allocate exactly the range read,
        // and the objects themselves are not in this process's memory.
        let store = Store::open(tmp.path().to_str().unwrap(), true, &Default::default()).unwrap();
        let mut objects = Vec::new();
        for i in 0..OBJECTS {
            let path = Path::from(format!("t/m/0/{i:064x}"));
            let body: Vec<u8> = (0..OBJECT_BYTES).map(|j| (i * 31 + j) as u8).collect();
            // Written straight into the store's directory.
            let file = tmp.path().join(path.as_ref());
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(file, body).unwrap();
            objects.push(ObjectRef {
                path: Arc::new(path),
                len: OBJECT_BYTES as u64,
                drop_behind: false,
                then: None,
            });
        }
        let bound = 4 * MIB;
        // Each object is one GET of 16 blocks.
        let options = CacheOptions::default()
            .cache_bytes(bound as u64)
            .block_size(64 << 10)
            .prefetch(false)
            .max_request(OBJECT_BYTES as u64);
        let before = LIVE.load(Relaxed);
        let cache = BlockCache::new(store, options.clone(), None);
        // Each object is read whole (one GET), then the first block of the
        // last HOT objects is read again: those first blocks stay cached
        // while their 15 siblings are evicted. If a block were a slice of
        // its GET's buffer, each would keep a whole MiB alive.
        let mut peak = 0;
        for i in 0..OBJECTS {
            let all = cache.read(&objects[i], 0, u64::MAX).await.unwrap();
            assert_eq!(all.len(), OBJECT_BYTES);
            drop(all);
            for hot in &objects[i.saturating_sub(HOT)..=i] {
                let first = cache.read(hot, 0, 100).await.unwrap();
                assert_eq!(first.len(), 100);
            }
            peak = peak.max(LIVE.load(Relaxed).saturating_sub(before));
        }
        // Slack for the cache's own tables, the runtime and the allocator's
        // rounding: far below what one more GET buffer per hot block costs.
        let slack = MIB;
        assert!(
            peak <= bound + slack,
            "the cache held {:.1} MiB with a bound of {} MiB",
            peak as f64 / MIB as f64,
            bound / MIB
        );
        drop(cache);

        // Drop-behind objects (whole items, chunks) keep their blocks as
        // slices of the GET buffer, charged whole until the last one goes.
        // A read that stops one block short of the end leaves that block
        // cached: it must count as the whole buffer it keeps alive.
        let streamed: Vec<ObjectRef> = objects
            .iter()
            .map(|o| ObjectRef {
                drop_behind: true,
                then: None,
                ..o.clone()
            })
            .collect();
        let before = LIVE.load(Relaxed);
        let cache = BlockCache::new(
            Store::open(tmp.path().to_str().unwrap(), false, &Default::default()).unwrap(),
            options,
            None,
        );
        let mut peak = 0;
        let almost = (OBJECT_BYTES - (64 << 10) + 1) as u64;
        for object in &streamed {
            let read = cache.read(object, 0, almost).await.unwrap();
            assert_eq!(read.len() as u64, almost);
            drop(read);
            peak = peak.max(LIVE.load(Relaxed).saturating_sub(before));
        }
        assert!(
            peak <= bound + slack,
            "abandoned streams held {:.1} MiB with a bound of {} MiB",
            peak as f64 / MIB as f64,
            bound / MIB
        );
    });
}
