//! The metrics recorded as things happen: store request latency per
//! operation and outcome, commit latency, errors by kind. They are kept
//! process-wide in [`global`] because a daemon serves one mount; whoever
//! exports them registers them with [`Metrics::register`]. This module
//! imports nothing of the crate, so every layer may record.

use std::sync::OnceLock;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

/// A store request: its operation (`get`, `put`, `list`, …) and outcome.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Request {
    op: String,
    outcome: String,
}

/// What went wrong, for the errors counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorKind {
    kind: String,
}

/// The metrics recorded as things happen.
#[derive(Debug)]
pub struct Metrics {
    store_seconds: Family<Request, Histogram, fn() -> Histogram>,
    commit_seconds: Family<Outcome, Histogram, fn() -> Histogram>,
    committed_items: Counter,
    errors: Family<ErrorKind, Counter>,
}

/// Whether a commit landed.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Outcome {
    outcome: String,
}

/// 1 ms to ~65 s: a cached local read to a slow multipart upload.
fn latency_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

/// The process's metrics.
pub fn global() -> &'static Metrics {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    METRICS.get_or_init(|| Metrics {
        store_seconds: Family::new_with_constructor(latency_buckets),
        commit_seconds: Family::new_with_constructor(latency_buckets),
        committed_items: Counter::default(),
        errors: Family::default(),
    })
}

fn outcome(ok: bool) -> String {
    if ok { "ok" } else { "error" }.to_string()
}

impl Metrics {
    /// A store request `op` ended with `outcome` (`ok`, `not_found`,
    /// `conflict`, `error`) after `elapsed`, retries included.
    pub(crate) fn store_request(&self, op: &str, outcome: &str, elapsed: Duration) {
        let labels = Request {
            op: op.to_string(),
            outcome: outcome.to_string(),
        };
        self.store_seconds
            .get_or_create(&labels)
            .observe(elapsed.as_secs_f64());
        if outcome == "error" {
            self.error("store");
        }
    }

    /// A commit of `items` files took `elapsed`.
    pub fn commit(&self, ok: bool, items: usize, elapsed: Duration) {
        self.commit_seconds
            .get_or_create(&Outcome {
                outcome: outcome(ok),
            })
            .observe(elapsed.as_secs_f64());
        match ok {
            true => {
                self.committed_items.inc_by(items as u64);
            }
            false => self.error("commit"),
        }
    }

    /// An error of `kind` (`store`, `commit`, `read`, …).
    pub fn error(&self, kind: &str) {
        self.errors
            .get_or_create(&ErrorKind {
                kind: kind.to_string(),
            })
            .inc();
    }

    /// Registers these metrics in `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "store_request_seconds",
            "Store requests by operation and outcome, retries included",
            self.store_seconds.clone(),
        );
        registry.register(
            "commit_seconds",
            "Commits of written files (upload, Tracks, Manifest, ref)",
            self.commit_seconds.clone(),
        );
        registry.register(
            "committed_items",
            "Files committed by this mount",
            self.committed_items.clone(),
        );
        registry.register(
            "errors_by_kind",
            "Errors by kind: store (a request failed for good), commit",
            self.errors.clone(),
        );
    }
}
