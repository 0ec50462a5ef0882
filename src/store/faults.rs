//! A store that misbehaves on purpose, for tests, benchmarks and
//! diagnosing: it wraps another and adds delays, fails requests, reports
//! failure for a PUT it did apply, or ignores conditional puts the way some
//! S3-compatible servers do (garage 2.5 and s3rver accept
//! `If-None-Match`/`If-Match` and overwrite anyway). Faults can change
//! while the store is in use (tests turn them on and off).

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMode, PutMultipartOptions, PutOptions, PutPayload, PutResult,
};

/// What a [`FaultyStore`] does wrong. `Default`: nothing.
#[derive(Debug, Default)]
pub struct Faults {
    /// Waited before every GET (and HEAD), as if the store were far away.
    pub get_delay: Duration,
    /// Treat create-only and conditional-update puts as plain overwrites.
    pub ignore_conditions: AtomicBool,
    /// Every n-th GET fails with a transient error (0: none).
    pub fail_every_nth_get: AtomicU64,
    /// GETs of paths containing one of these fail, every time.
    pub fail_gets_of: Mutex<Vec<String>>,
    /// This many next PUTs fail with a transient error.
    pub fail_next_puts: AtomicU64,
    /// PUTs of paths containing one of these fail, every time.
    pub fail_puts_of: Mutex<Vec<String>>,
    /// PUTs of paths containing one of these are stored, then reported as
    /// failed (a response lost on the way back).
    pub lie_about_puts_of: Mutex<Vec<String>>,
    /// GETs seen so far.
    pub gets: AtomicU64,
}

impl Faults {
    fn get_fails(&self, path: &Path) -> bool {
        let n = self.gets.fetch_add(1, Ordering::Relaxed) + 1;
        let every = self.fail_every_nth_get.load(Ordering::Relaxed);
        (every > 0 && n % every == 0) || matches(&self.fail_gets_of, path)
    }

    fn put_fails(&self) -> bool {
        self.fail_next_puts
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
            .is_ok()
    }
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
            if self.faults.ignore_conditions.load(Ordering::Relaxed) {
                opts.mode = PutMode::Overwrite;
            }
            if self.faults.put_fails() || matches(&self.faults.fail_puts_of, location) {
                return Err(injected("put", location));
            }
            let result = self.inner.put_opts(location, payload, opts).await?;
            if matches(&self.faults.lie_about_puts_of, location) {
                return Err(injected("put (stored, reported failed)", location));
            }
            Ok(result)
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
        self.inner.put_multipart_opts(location, opts)
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
            if !self.faults.get_delay.is_zero() {
                tokio::time::sleep(self.faults.get_delay).await;
            }
            if self.faults.get_fails(location) {
                return Err(injected("get", location));
            }
            self.inner.get_opts(location, options).await
        })
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
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
