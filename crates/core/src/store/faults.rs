//! A store that misbehaves on purpose, for tests, benchmarks and
//! diagnosing: it wraps another and adds delays, fails requests, cuts
//! bodies short, reports failure for a PUT it did apply, loses ref
//! compare-and-swaps as if another writer won, ignores conditional puts
//! the way some S3-compatible servers do (garage 2.5 and s3rver accept
//! `If-None-Match`/`If-Match` and overwrite anyway), or panics in the
//! middle of a commit. Faults can change while the store is in use (tests
//! turn them on and off), and it counts what it was asked.
//!
//! A store gets faults only through `StoreConfig::faults`: tests set it,
//! and so does the packfs binary's hidden fault-injection diagnostic
//! option, in the syntax of [`Faults::parse`](crate::store::faults::Faults::parse).

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::StreamExt;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, GetResultPayload, ListResult, MultipartUpload, ObjectMeta,
    ObjectStore, PutMode, PutMultipartOptions, PutOptions, PutPayload, PutResult,
};
use parking_lot::Mutex;

/// What a [`FaultyStore`] does wrong. `Default`: nothing.
#[derive(Debug, Default)]
pub struct Faults {
    /// GETs (and HEADs) of paths containing the text wait this long
    /// first ("": every GET, as if the store were far away); see
    /// [`Faults::slow_gets`].
    slow_gets: Mutex<Option<(String, Duration)>>,
    /// Waited before every PUT (and multipart completion).
    pub put_delay: Duration,
    /// Treat create-only and conditional-update puts as plain overwrites.
    pub ignore_conditions: AtomicBool,
    /// Every n-th GET fails with a transient error (0: none).
    pub fail_every_nth_get: AtomicU64,
    /// GETs of paths containing one of these fail, every time.
    pub fail_gets_of: Mutex<Vec<String>>,
    /// Every n-th GET returns only the first half of its body (0: none),
    /// as a connection cut mid-body would.
    pub truncate_every_nth_get: AtomicU64,
    /// This many next PUTs fail with a transient error.
    pub fail_next_puts: AtomicU64,
    /// Every n-th PUT (and multipart completion) fails with a transient
    /// error (0: none).
    pub fail_every_nth_put: AtomicU64,
    /// PUTs of paths containing one of these fail, every time.
    pub fail_puts_of: Mutex<Vec<String>>,
    /// PUTs of paths containing one of these are stored, then reported as
    /// failed (a response lost on the way back).
    pub lie_about_puts_of: Mutex<Vec<String>>,
    /// This many next LISTs fail with a transient error.
    pub fail_next_lists: AtomicU64,
    /// This many next conditional puts of refs fail as if another writer
    /// had moved the ref first (refs of object stores; a local
    /// directory's refs do not go through the store).
    pub lose_next_cas: AtomicU64,
    /// PUTs of data objects (packs, whole items, chunks: everything but
    /// the dataset's `_packfs/` metadata) panic, as a bug in the middle of
    /// a commit would.
    pub panic_on_data_puts: AtomicBool,
    /// GETs seen so far.
    pub gets: AtomicU64,
    /// GETs of the dataset's `_packfs/` metadata (refs, Manifests, Tracks,
    /// pages) among them.
    pub metadata_gets: AtomicU64,
    /// PUTs seen so far.
    pub puts: AtomicU64,
    /// Multipart uploads completed so far.
    pub multipart_puts: AtomicU64,
    /// Data objects whose upload started so far (PUTs and multipart
    /// uploads).
    pub data_puts: AtomicU64,
}

impl Faults {
    /// Reads a fault list such as
    /// `get-fail-every=5,get-truncate-every=7,get-delay=20ms,put-fail-next=2`.
    /// Keys: `get-delay`, `put-delay` (durations); `get-fail-every`,
    /// `get-truncate-every`, `put-fail-every`, `put-fail-next`,
    /// `cas-lose-next`, `list-fail-next` (counts);
    /// `get-fail`, `put-fail`, `put-lie` (a path substring, repeatable);
    /// `ignore-conditions` (no value).
    pub fn parse(spec: &str) -> Result<Faults, String> {
        let mut faults = Faults::default();
        for item in spec.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (key, value) = item.split_once('=').unwrap_or((item, ""));
            let count = || {
                value
                    .parse::<u64>()
                    .map_err(|_| format!("{key} wants a whole number, not {value:?}"))
            };
            let duration =
                || crate::units::parse_duration(value).map_err(|e| format!("{key}: {e}"));
            match key {
                "get-delay" => faults.slow_gets("", duration()?),
                "put-delay" => faults.put_delay = duration()?,
                "get-fail-every" => faults.fail_every_nth_get = count()?.into(),
                "get-truncate-every" => faults.truncate_every_nth_get = count()?.into(),
                "put-fail-next" => faults.fail_next_puts = count()?.into(),
                "put-fail-every" => faults.fail_every_nth_put = count()?.into(),
                "cas-lose-next" => faults.lose_next_cas = count()?.into(),
                "list-fail-next" => faults.fail_next_lists = count()?.into(),
                "get-fail" => faults.fail_gets_of.get_mut().push(value.to_string()),
                "put-fail" => faults.fail_puts_of.get_mut().push(value.to_string()),
                "put-lie" => faults.lie_about_puts_of.get_mut().push(value.to_string()),
                "ignore-conditions" => faults.ignore_conditions = true.into(),
                _ => return Err(format!("unknown fault {key:?}")),
            }
        }
        Ok(faults)
    }

    /// From now on, GETs of paths containing `part` ("": every GET) wait
    /// `delay` first.
    pub fn slow_gets(&self, part: &str, delay: Duration) {
        *self.slow_gets.lock() = Some((part.to_string(), delay));
    }

    /// How long a GET of `path` waits first.
    fn get_delay(&self, path: &Path) -> Option<Duration> {
        let slow = self.slow_gets.lock();
        let (part, delay) = slow.as_ref()?;
        (path.as_ref().contains(part.as_str()) && !delay.is_zero()).then_some(*delay)
    }

    /// Counts the upload of `path` if it is a data object; panics if data
    /// PUTs are to.
    fn on_data_put(&self, path: &Path) {
        if is_metadata(path) {
            return;
        }
        if self.panic_on_data_puts.load(Ordering::SeqCst) {
            panic!("injected fault: PUT of {path}");
        }
        self.data_puts.fetch_add(1, Ordering::SeqCst);
    }

    /// Counts a GET; whether it fails, and whether its body is cut short.
    fn on_get(&self, path: &Path) -> (bool, bool) {
        let n = self.gets.fetch_add(1, Ordering::Relaxed) + 1;
        if is_metadata(path) {
            self.metadata_gets.fetch_add(1, Ordering::Relaxed);
        }
        let hit = |every: &AtomicU64| {
            let every = every.load(Ordering::Relaxed);
            every > 0 && n % every == 0
        };
        let fails = hit(&self.fail_every_nth_get) || matches(&self.fail_gets_of, path);
        (fails, hit(&self.truncate_every_nth_get))
    }

    /// Runs `put` with the PUT faults: a delay, a failure instead of it,
    /// or a failure reported after it landed.
    async fn around_put<T>(
        &self,
        what: &str,
        location: &Path,
        put: impl std::future::Future<Output = object_store::Result<T>>,
    ) -> object_store::Result<T> {
        if !self.put_delay.is_zero() {
            tokio::time::sleep(self.put_delay).await;
        }
        if self.put_fails() || matches(&self.fail_puts_of, location) {
            return Err(injected(what, location));
        }
        let result = put.await?;
        if matches(&self.lie_about_puts_of, location) {
            return Err(injected(
                &format!("{what} (stored, reported failed)"),
                location,
            ));
        }
        Ok(result)
    }

    /// Counts a PUT; whether it fails.
    fn put_fails(&self) -> bool {
        let n = self.puts.fetch_add(1, Ordering::Relaxed) + 1;
        let every = self.fail_every_nth_put.load(Ordering::Relaxed);
        take_one(&self.fail_next_puts) || (every > 0 && n % every == 0)
    }
}

/// Decrements `counter` unless it is zero; whether it did.
fn take_one(counter: &AtomicU64) -> bool {
    counter
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
        .is_ok()
}

/// Where refs live, whatever the dataset's prefix.
const REFS_DIR: &str = "_packfs/refs/";
/// The directory of a dataset's metadata: objects outside it are data.
const METADATA_DIR: &str = "_packfs";

fn is_metadata(path: &Path) -> bool {
    path.parts().any(|part| part.as_ref() == METADATA_DIR)
}

fn matches(list: &Mutex<Vec<String>>, path: &Path) -> bool {
    let path = path.as_ref();
    list.lock().iter().any(|s| path.contains(s.as_str()))
}

fn injected(what: &str, path: &Path) -> object_store::Error {
    object_store::Error::Generic {
        store: "faulty",
        source: format!("injected fault: {what} {path}").into(),
    }
}

/// An object store with [`Faults`].
#[derive(Debug)]
pub struct FaultyStore {
    inner: Arc<dyn ObjectStore>,
    faults: Arc<Faults>,
}

impl FaultyStore {
    pub fn new(inner: Arc<dyn ObjectStore>, faults: Arc<Faults>) -> Self {
        FaultyStore { inner, faults }
    }
}

impl fmt::Display for FaultyStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Faulty({:?}, {})", self.faults, self.inner)
    }
}

// `ObjectStore` is an `#[async_trait]`; these are its desugared signatures.
impl ObjectStore for FaultyStore {
    fn put_opts<'life0, 'life1, 'async_trait>(
        &'life0 self,
        location: &'life1 Path,
        payload: PutPayload,
        mut opts: PutOptions,
    ) -> BoxFuture<'async_trait, object_store::Result<PutResult>>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(async move {
            let is_ref = location.as_ref().contains(REFS_DIR);
            match &opts.mode {
                PutMode::Update(_) if is_ref && take_one(&self.faults.lose_next_cas) => {
                    return Err(object_store::Error::Precondition {
                        path: location.to_string(),
                        source: "injected fault: another writer moved the ref first".into(),
                    })
                }
                PutMode::Create if is_ref && take_one(&self.faults.lose_next_cas) => {
                    return Err(object_store::Error::AlreadyExists {
                        path: location.to_string(),
                        source: "injected fault: another writer created the ref first".into(),
                    })
                }
                _ => {}
            }
            if self.faults.ignore_conditions.load(Ordering::Relaxed) {
                opts.mode = PutMode::Overwrite;
            }
            self.faults.on_data_put(location);
            let put = self.inner.put_opts(location, payload, opts);
            self.faults.around_put("put", location, put).await
        })
    }

    fn put_multipart_opts<'life0, 'life1, 'async_trait>(
        &'life0 self,
        location: &'life1 Path,
        opts: PutMultipartOptions,
    ) -> BoxFuture<'async_trait, object_store::Result<Box<dyn MultipartUpload>>>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(async move {
            self.faults.on_data_put(location);
            let upload = self.inner.put_multipart_opts(location, opts).await?;
            Ok(Box::new(FaultyUpload {
                inner: upload,
                location: location.clone(),
                faults: self.faults.clone(),
            }) as Box<dyn MultipartUpload>)
        })
    }

    fn get_opts<'life0, 'life1, 'async_trait>(
        &'life0 self,
        location: &'life1 Path,
        options: GetOptions,
    ) -> BoxFuture<'async_trait, object_store::Result<GetResult>>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(async move {
            if let Some(delay) = self.faults.get_delay(location) {
                tokio::time::sleep(delay).await;
            }
            let (fails, truncated) = self.faults.on_get(location);
            if fails {
                return Err(injected("get", location));
            }
            let result = self.inner.get_opts(location, options).await?;
            if !truncated {
                return Ok(result);
            }
            let (meta, range) = (result.meta.clone(), result.range.clone());
            let (attributes, extensions) = (result.attributes.clone(), result.extensions.clone());
            let mut body = result.bytes().await?;
            body.truncate(body.len() / 2);
            Ok(GetResult {
                payload: GetResultPayload::Stream(
                    futures::stream::once(async { Ok(body) }).boxed(),
                ),
                meta,
                range,
                attributes,
                extensions,
            })
        })
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        if take_one(&self.faults.fail_next_lists) {
            let at = prefix.cloned().unwrap_or_default();
            return futures::stream::once(async move { Err(injected("list", &at)) }).boxed();
        }
        self.inner.list(prefix)
    }

    fn list_with_delimiter<'life0, 'life1, 'async_trait>(
        &'life0 self,
        prefix: Option<&'life1 Path>,
    ) -> BoxFuture<'async_trait, object_store::Result<ListResult>>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        Self: 'async_trait,
    {
        self.inner.list_with_delimiter(prefix)
    }

    fn copy_opts<'life0, 'life1, 'life2, 'async_trait>(
        &'life0 self,
        from: &'life1 Path,
        to: &'life2 Path,
        options: CopyOptions,
    ) -> BoxFuture<'async_trait, object_store::Result<()>>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        'life2: 'async_trait,
        Self: 'async_trait,
    {
        self.inner.copy_opts(from, to, options)
    }
}

/// A multipart upload whose completion takes the [`Faults`] of PUTs: a
/// failing or lying completion is where a large object's upload goes wrong.
#[derive(Debug)]
struct FaultyUpload {
    inner: Box<dyn MultipartUpload>,
    location: Path,
    faults: Arc<Faults>,
}

impl MultipartUpload for FaultyUpload {
    fn put_part(&mut self, data: PutPayload) -> object_store::UploadPart {
        self.inner.put_part(data)
    }

    fn complete<'life0, 'async_trait>(
        &'life0 mut self,
    ) -> BoxFuture<'async_trait, object_store::Result<PutResult>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(async move {
            let faults = self.faults.clone();
            let location = self.location.clone();
            let complete = async {
                let result = self.inner.complete().await?;
                faults.multipart_puts.fetch_add(1, Ordering::Relaxed);
                Ok(result)
            };
            faults
                .around_put("multipart put", &location, complete)
                .await
        })
    }

    fn abort<'life0, 'async_trait>(
        &'life0 mut self,
    ) -> BoxFuture<'async_trait, object_store::Result<()>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        self.inner.abort()
    }
}
