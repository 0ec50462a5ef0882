//! Counters of the read path, shown in `/.packfs/stats` of a mount.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};

/// Monotonic counters; relaxed atomics, read for display only.
#[derive(Debug, Default)]
pub struct Stats {
    pub gets: AtomicU64,
    pub bytes_fetched: AtomicU64,
    pub cache_hits: AtomicU64,
    pub cache_misses: AtomicU64,
    pub prefetch_gets: AtomicU64,
    pub prefetch_hits: AtomicU64,
    pub prefetch_skipped: AtomicU64,
    pub disk_hits: AtomicU64,
    /// Blocks not written to the disk tier: its write-behind was full.
    pub disk_skipped: AtomicU64,
    pub errors: AtomicU64,
    /// Opens of dataset files the kernel serves by passthrough from a
    /// whole-file copy.
    pub opens_passthrough: AtomicU64,
    /// Opens of dataset files whose reads come to the daemon (read-only
    /// mounts in the kernel's no-open mode send none, so count none).
    pub opens_daemon: AtomicU64,
    /// Whole-file copies made.
    pub whole_copies: AtomicU64,
    /// Read bytes not fed to a whole-file copy: its writer was behind.
    pub whole_dropped: AtomicU64,
    /// Compressed records (of DataBundles) decoded.
    pub records_decoded: AtomicU64,
}

impl Stats {
    /// Adds `n` to `counter`, one of these (a relaxed count: the counters
    /// are read for reports, never to order other memory).
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// Every counter by name, as the stats file and the metrics show them.
    pub fn counters(&self) -> [(&'static str, u64); 15] {
        [
            ("gets", &self.gets),
            ("bytes_fetched", &self.bytes_fetched),
            ("cache_hits", &self.cache_hits),
            ("cache_misses", &self.cache_misses),
            ("prefetch_gets", &self.prefetch_gets),
            ("prefetch_hits", &self.prefetch_hits),
            ("prefetch_skipped", &self.prefetch_skipped),
            ("disk_hits", &self.disk_hits),
            ("disk_skipped", &self.disk_skipped),
            ("errors", &self.errors),
            ("opens_passthrough", &self.opens_passthrough),
            ("opens_daemon", &self.opens_daemon),
            ("whole_copies", &self.whole_copies),
            ("whole_dropped", &self.whole_dropped),
            ("records_decoded", &self.records_decoded),
        ]
        .map(|(name, c)| (name, c.load(Ordering::Relaxed)))
    }

    /// Block reads served from the cache, and those that were not.
    pub fn hits_and_misses(&self) -> (u64, u64) {
        (
            self.cache_hits.load(Ordering::Relaxed),
            self.cache_misses.load(Ordering::Relaxed),
        )
    }

    /// `name value` lines, one counter each, in fixed-width columns so the
    /// text's length never changes (the stats file's size is stable).
    pub fn render(&self) -> String {
        let mut out = String::new();
        for (name, value) in self.counters() {
            let _ = writeln!(out, "{name:<16} {value:>20}");
        }
        out
    }
}
