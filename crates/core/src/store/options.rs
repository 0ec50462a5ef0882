//! How to reach the store and how patient to be with it: endpoint
//! settings, request time-outs, the retry deadline, when uploads go
//! multipart, and the diagnostic faults. The caller (the command line, an
//! embedder, a test) builds a [`StoreConfig`] and hands it to
//! [`Store::open`](super::Store::open); nothing here reads packfs's own
//! environment variables. A daemonized mount keeps the config it was given
//! across its `fork`.

use std::sync::Arc;
use std::time::Duration;

use super::faults::Faults;

/// The user switch that lets packfs move refs on a store whose conditional
/// puts were not shown to work (`docs/SEMANTICS.md`); the command line
/// reads it into [`StoreConfig::unsafe_refs`].
pub const UNSAFE_REFS_ENV: &str = "PACKFS_UNSAFE_REFS";

crate::options! {
/// Everything [`Store::open`](super::Store::open) needs besides the
/// location. Credentials are not here: they come from the usual `AWS_*`
/// (`GOOGLE_*`, `AZURE_*`) environment variables, read by `object_store`.
#[derive(Clone, Debug, Default)]
pub struct StoreConfig {
    /// Time-outs, retry bound and multipart sizes.
    pub options: StoreOptions,
    /// S3-compatible endpoint URL; overrides `AWS_ENDPOINT`.
    pub endpoint: Option<String>,
    /// S3 region; overrides `AWS_REGION`.
    pub region: Option<String>,
    /// Address buckets as `<endpoint>/<bucket>` (S3).
    pub path_style: bool,
    /// Allow plain `http://` endpoints.
    pub allow_http: bool,
    /// Move refs even where conditional puts were not shown to be atomic.
    pub unsafe_refs: bool,
    /// Faults injected between packfs and the store: only tests and the
    /// hidden fault-injection diagnostic of the packfs binary set this.
    pub faults: Option<Arc<Faults>>,
}
}

crate::options! {
/// Time-outs and retry bounds of one [`Store`](super::Store).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreOptions {
    /// Limit on one HTTP request, body included (object stores only).
    pub timeout: Duration,
    /// Limit on opening a connection (object stores only).
    pub connect_timeout: Duration,
    /// Retries of transient failures stop once this much time has passed
    /// since the first attempt; the last error is then returned.
    pub retry_deadline: Duration,
    /// Objects larger than this are uploaded in parts.
    pub multipart_threshold: u64,
    /// Size of each part of a multipart upload (S3 wants ≥ 5 MiB).
    pub part_bytes: usize,
}
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(5),
            retry_deadline: Duration::from_secs(30),
            multipart_threshold: 16 << 20,
            part_bytes: 8 << 20,
        }
    }
}
