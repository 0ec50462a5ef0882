//! An in-memory object store whose misbehaviour a test switches on at the
//! moment it wants: a panic in the middle of a commit, GETs of some objects
//! slowed down.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult,
};
use parking_lot::Mutex;

/// What a [`TestStore`] does wrong right now.
#[derive(Debug, Default)]
pub struct TestStoreControl {
    /// PUTs of data objects (packs, whole items, chunks) panic.
    pub panic_on_data_puts: AtomicBool,
    /// Data objects PUT so far (single PUTs and multipart uploads).
    pub data_puts: AtomicU64,
    /// GETs of paths containing the text wait this long first.
    slow_gets: Mutex<Option<(String, Duration)>>,
}

impl TestStoreControl {
    /// GETs of paths containing `part` take `delay` from now on.
    pub fn slow_gets(&self, part: &str, delay: Duration) {
        *self.slow_gets.lock() = Some((part.to_string(), delay));
    }
}

#[derive(Debug)]
pub struct TestStore {
    inner: InMemory,
    control: Arc<TestStoreControl>,
}

impl TestStore {
    /// An empty store and the switches of its faults.
    pub fn in_memory() -> (TestStore, Arc<TestStoreControl>) {
        let control = Arc::new(TestStoreControl::default());
        let store = TestStore {
            inner: InMemory::new(),
            control: control.clone(),
        };
        (store, control)
    }
}

impl fmt::Display for TestStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TestStore")
    }
}

/// Data objects are everything outside the dataset's `_packfs/` metadata.
fn is_data(location: &Path) -> bool {
    !location.as_ref().starts_with("_packfs")
}

// `ObjectStore` is an `#[async_trait]`; these are its desugared signatures.
impl ObjectStore for TestStore {
    fn put_opts<'life0, 'life1, 'async_trait>(
        &'life0 self,
        location: &'life1 Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> BoxFuture<'async_trait, object_store::Result<PutResult>>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(async move {
            if is_data(location) && self.control.panic_on_data_puts.load(Ordering::SeqCst) {
                panic!("test store: PUT of {location}");
            }
            if is_data(location) {
                self.control.data_puts.fetch_add(1, Ordering::SeqCst);
            }
            self.inner.put_opts(location, payload, opts).await
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
        if is_data(location) {
            self.control.data_puts.fetch_add(1, Ordering::SeqCst);
        }
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
            let delay = self
                .control
                .slow_gets
                .lock()
                .as_ref()
                .filter(|(part, _)| location.as_ref().contains(part.as_str()))
                .map(|(_, delay)| *delay);
            if let Some(delay) = delay {
                tokio::time::sleep(delay).await;
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
