//! The Prometheus endpoint of a mount (served at `/metrics` of the address
//! its options give, in the Prometheus text format): the process's recorded
//! [`metrics`](packfs_core::metrics), and values read live at each scrape
//! (`Live`): the counters of `.packfs/stats`, the block cache's bytes and
//! hit ratio, read-ahead in flight, and a read-write mount's spool and
//! pending items.

use std::net::SocketAddr;
use std::sync::Arc;

use http_body_util::Full;
use hyper::body::Bytes;
use packfs_core::cache::{BlockCache, Stats};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;
use tracing::{info, warn};

use crate::fs::Fs;
use crate::write::Writer;

/// What a scrape reads live from the mount.
#[derive(Clone)]
pub(crate) struct Live {
    stats: Arc<Stats>,
    cache: BlockCache,
    writer: Option<Arc<Writer>>,
}

impl Live {
    /// What a scrape reads of `fs`.
    pub(crate) fn of(fs: &Fs) -> Live {
        Live {
            stats: fs.reader().stats().clone(),
            cache: fs.reader().cache().clone(),
            writer: fs.shared_writer().cloned(),
        }
    }
}

impl std::fmt::Debug for Live {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Live")
    }
}

fn counter(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: u64,
) -> std::fmt::Result {
    let metric = ConstCounter::new(value);
    metric.encode(encoder.encode_descriptor(name, help, None, metric.metric_type())?)
}

fn gauge(encoder: &mut DescriptorEncoder, name: &str, help: &str, value: f64) -> std::fmt::Result {
    let metric = ConstGauge::new(value);
    metric.encode(encoder.encode_descriptor(name, help, None, metric.metric_type())?)
}

impl Collector for Live {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        for (name, value) in self.stats.counters() {
            let help = format!("`{name}` of .packfs/stats");
            counter(&mut encoder, name, &help, value)?;
        }
        let (hits, misses) = self.stats.hits_and_misses();
        let ratio = match hits + misses {
            0 => 0.0,
            all => hits as f64 / all as f64,
        };
        gauge(
            &mut encoder,
            "cache_hit_ratio",
            "Block reads served from the cache, of all block reads",
            ratio,
        )?;
        gauge(
            &mut encoder,
            "cache_bytes",
            "Bytes of blocks held in memory",
            self.cache.bytes_cached() as f64,
        )?;
        gauge(
            &mut encoder,
            "prefetch_in_flight_bytes",
            "Bytes of read-ahead GETs under way",
            self.cache.prefetch_in_flight() as f64,
        )?;
        if let Some(writer) = &self.writer {
            let state = writer.spool_state();
            gauge(
                &mut encoder,
                "spool_bytes",
                "Bytes of written files in the spool",
                state.spool_bytes as f64,
            )?;
            gauge(
                &mut encoder,
                "pending_items",
                "Files written and not committed yet",
                state.pending_items as f64,
            )?;
            gauge(
                &mut encoder,
                "pending_bytes",
                "Bytes of files written and not committed yet",
                state.pending_bytes as f64,
            )?;
        }
        Ok(())
    }
}

/// The registry of a mount: the process's metrics and `live`, every name
/// prefixed `packfs_`.
fn registry(live: Live) -> Registry {
    let mut registry = Registry::with_prefix("packfs");
    packfs_core::metrics::global().register(&mut registry);
    registry.register_collector(Box::new(live));
    registry
}

/// Why the metrics endpoint could not start.
#[derive(Debug, thiserror::Error)]
#[error("metrics endpoint {addr}: {source}")]
#[non_exhaustive]
pub struct MetricsError {
    addr: SocketAddr,
    #[source]
    source: std::io::Error,
}

impl MetricsError {
    /// The address the endpoint was to listen at.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

/// Binds `addr` and serves `/metrics` on the current runtime until the
/// process ends; other paths get 404.
pub(crate) async fn serve(addr: SocketAddr, live: Live) -> Result<SocketAddr, MetricsError> {
    let fail = |source| MetricsError { addr, source };
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(fail)?;
    let bound = listener.local_addr().map_err(fail)?;
    let registry = Arc::new(registry(live));
    info!("metrics at http://{bound}/metrics");
    tokio::spawn(async move {
        loop {
            let (stream, _) = match listener.accept().await {
                Ok(accepted) => accepted,
                Err(e) => {
                    warn!("metrics: accept: {e}");
                    continue;
                }
            };
            let registry = registry.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |request| {
                    let registry = registry.clone();
                    async move { respond(&registry, &request) }
                });
                let io = hyper_util::rt::TokioIo::new(stream);
                if let Err(e) = hyper::server::conn::http1::Builder::new()
                    .serve_connection(io, service)
                    .await
                {
                    tracing::debug!("metrics connection: {e}");
                }
            });
        }
    });
    Ok(bound)
}

type Response = hyper::Response<Full<Bytes>>;

fn respond<B>(
    registry: &Registry,
    request: &hyper::Request<B>,
) -> Result<Response, hyper::http::Error> {
    if request.uri().path() != "/metrics" {
        return hyper::Response::builder()
            .status(404)
            .body(Full::new(Bytes::from_static(b"packfs serves /metrics\n")));
    }
    let mut text = String::new();
    if let Err(e) = prometheus_client::encoding::text::encode(&mut text, registry) {
        warn!("metrics: encoding: {e}");
        return hyper::Response::builder().status(500).body(Full::default());
    }
    hyper::Response::builder()
        .header(
            "content-type",
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )
        .body(Full::new(Bytes::from(text)))
}
