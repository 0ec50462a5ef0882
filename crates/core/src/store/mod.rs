//! Store access: opening a dataset location, object paths, content-addressed
//! puts, ranged gets, and refs moved by compare-and-swap.
//!
//! Everything above this module sees objects by [`Path`] and errors as
//! [`StoreError`]; which `object_store` backend sits underneath is decided
//! here, once, from the dataset location.

/// Fault injection, for tests and the packfs binary's hidden diagnostic
/// only: a store gets faults solely through [`StoreConfig::faults`].
#[doc(hidden)]
pub mod faults;
mod layout;
mod options;
mod refs;
#[cfg(feature = "cloud")]
mod remote;
#[cfg(not(feature = "cloud"))]
#[path = "no_remote.rs"]
mod remote;

use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{
    GetOptions, GetRange, ObjectStore, ObjectStoreExt, PutMode, PutOptions, WriteMultipart,
};
use packfs_format::{FormatError, ObjectId};
use thiserror::Error;

pub use layout::Layout;
pub(crate) use layout::ObjectKind;
pub use options::{StoreConfig, StoreOptions, UNSAFE_REFS_ENV};
use refs::RefBackend;
use remote::Remote;

/// Errors of the store layer. Each names the object or location involved.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum StoreError {
    #[error("invalid dataset location {location:?}: {detail}")]
    Location { location: String, detail: String },
    #[error("object {path} does not exist")]
    NotFound { path: String },
    #[error("{op} {path}: {source}")]
    Backend {
        op: &'static str,
        path: String,
        #[source]
        source: object_store::Error,
    },
    #[error("{op} {path}: {source}")]
    Io {
        op: &'static str,
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "ref {name:?} moved concurrently: expected {}, found {}",
        show(.expected),
        show(.actual)
    )]
    RefConflict {
        name: String,
        expected: Option<ObjectId>,
        actual: Option<ObjectId>,
    },
    /// No connection to a remote store, or none object_store would open.
    #[error(
        "{context}: cannot reach {endpoint}: {reason}{}",
        if *.plain_http_refused { " (plain HTTP is not allowed for this store)" } else { "" }
    )]
    Unreachable {
        context: String,
        endpoint: String,
        reason: String,
        /// The endpoint is plain `http://`, which the store's settings do
        /// not allow ([`StoreConfig::allow_http`]).
        plain_http_refused: bool,
    },
    /// The store refused the request's credentials (401/403).
    #[error("{context}: access denied by {endpoint}: {reason}; check the credentials: {hint}")]
    AccessDenied {
        context: String,
        endpoint: String,
        reason: String,
        hint: &'static str,
    },
    /// Requests could not be signed: no credentials were found.
    #[error("{location}: no credentials found ({detail}); {hint}")]
    NoCredentials {
        location: String,
        detail: String,
        hint: &'static str,
    },
    #[error("{context}: bucket {bucket:?} does not exist at {endpoint}")]
    NoSuchBucket {
        context: String,
        bucket: String,
        endpoint: String,
    },
    #[error(
        "store {location} cannot move refs atomically: {detail}. Concurrent writers could \
         silently lose each other's commits, so packfs refuses to write here. Use a store with \
         atomic conditional puts (AWS S3, or MinIO/Ceph with If-Match support), or set \
         PACKFS_UNSAFE_REFS=1 to accept the risk"
    )]
    NoAtomicRefs { location: String, detail: String },
    #[error(transparent)]
    Format(#[from] FormatError),
}

fn show(id: &Option<ObjectId>) -> String {
    id.map_or_else(|| "no manifest".to_string(), |id| id.to_hex())
}

impl StoreError {
    fn backend(op: &'static str, path: &Path, source: object_store::Error) -> Self {
        match source {
            object_store::Error::NotFound { .. } => StoreError::NotFound {
                path: path.to_string(),
            },
            source => StoreError::Backend {
                op,
                path: path.to_string(),
                source,
            },
        }
    }
}

/// A content-addressed object found already stored but last modified
/// longer ago than this is uploaded again by [`Store::put_immutable`], so
/// that what a writer is about to commit always looks young to `packfs gc`
/// (whose grace is at least twice this: see `gc::MIN_GRACE`).
pub(crate) const REFRESH_AGE: std::time::Duration = std::time::Duration::from_secs(3600);

/// Set to `1` to let `packfs gc` run with a grace, and `packfs expire`
/// keep a history, shorter than the floors [`REFRESH_AGE`] sets for them
/// (tests, or a store nobody writes to any more).
pub const UNSAFE_GRACE_ENV: &str = "PACKFS_UNSAFE_GRACE";

/// Whether [`UNSAFE_GRACE_ENV`] lifts those floors.
pub(crate) fn floors_lifted() -> bool {
    std::env::var(UNSAFE_GRACE_ENV).is_ok_and(|v| v == "1")
}

fn refresh_age() -> chrono::Duration {
    chrono::Duration::from_std(REFRESH_AGE).expect("an hour fits")
}

/// Retrying, and which layer does it. Each failure is retried by exactly
/// one layer, so attempts never multiply, and all retrying of one call ends
/// within [`StoreOptions::retry_deadline`] of its first attempt:
///
/// - **object_store's HTTP client** (S3, GCS, Azure) retries what it sees
///   of a request: connection and transport errors, time-outs of safe
///   requests, 5xx/429/408 answers, and GET bodies broken mid-stream
///   (resumed with a ranged GET of the same ETag); up to
///   10 times (`remote.rs`), with its own backoff, until the deadline.
///   What it gives up on is final here.
/// - **packfs** ([`retrying`]) retries what that client cannot see: a body
///   that ended cleanly but shorter than the range the store announced,
///   and transient failures of stores without an HTTP client of their own
///   (a local directory, the in-memory store, injected faults); up to
///   [`ATTEMPTS`] attempts, 0.1 s doubling, each retry started only while
///   the deadline lasts and cut off when it passes.
///
/// Answers such as "not found", "already exists" or "precondition failed"
/// are final in both layers.
const ATTEMPTS: u32 = 4;
const FIRST_BACKOFF: std::time::Duration = std::time::Duration::from_millis(100);

/// The `store` names of object_store's HTTP backends, whose errors come
/// out of the client's own retries (see [`ATTEMPTS`]).
const HTTP_BACKENDS: [&str; 3] = ["S3", "GCS", "MicrosoftAzure"];

/// Whether packfs should retry an `object_store` error: a `Generic`
/// failure that object_store's HTTP client has not retried already.
fn transient(e: &object_store::Error) -> bool {
    matches!(e, object_store::Error::Generic { store, .. } if !HTTP_BACKENDS.contains(store))
}

/// The error for a body that ended before the length the store promised:
/// transient, since the next attempt usually gets it whole.
fn short_body(path: &Path, got: usize, want: u64) -> object_store::Error {
    object_store::Error::Generic {
        store: "packfs",
        source: format!("short read of {path}: got {got} of {want} bytes").into(),
    }
}

/// The body of a GET, which must be as long as the range the store said
/// it sends: a connection cut mid-body, or a server that lies, is caught
/// here rather than handed up as data.
async fn whole_body(path: &Path, result: object_store::GetResult) -> object_store::Result<Bytes> {
    let want = result.range.end - result.range.start;
    let bytes = result.bytes().await?;
    if bytes.len() as u64 != want {
        return Err(short_body(path, bytes.len(), want));
    }
    Ok(bytes)
}

/// Runs `request` until it succeeds, fails for good, runs out of
/// attempts, or `deadline` has passed since the first attempt (a retry
/// still running then is abandoned and the previous error returned).
async fn retrying<T, F, Fut>(
    deadline: std::time::Duration,
    op: &str,
    path: &Path,
    request: F,
) -> object_store::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = object_store::Result<T>>,
{
    let started = std::time::Instant::now();
    let result = retry_loop(deadline, op, path, started, request).await;
    let outcome = match &result {
        Ok(_) => "ok",
        // Answers, not failures: a probe for an absent object, a lost
        // compare-and-swap.
        Err(object_store::Error::NotFound { .. }) => "not_found",
        Err(
            object_store::Error::Precondition { .. } | object_store::Error::AlreadyExists { .. },
        ) => "conflict",
        Err(_) => "error",
    };
    crate::metrics::global().store_request(op, outcome, started.elapsed());
    result
}

async fn retry_loop<T, F, Fut>(
    deadline: std::time::Duration,
    op: &str,
    path: &Path,
    started: std::time::Instant,
    mut request: F,
) -> object_store::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = object_store::Result<T>>,
{
    let mut backoff = FIRST_BACKOFF;
    let mut result = request().await;
    for attempt in 1..ATTEMPTS {
        let e = match &result {
            Err(e) if transient(e) => e,
            _ => break,
        };
        let Some(left) = deadline.checked_sub(started.elapsed() + backoff) else {
            break;
        };
        tracing::debug!("{op} {path} failed ({e}); retry {attempt} in {backoff:?}");
        tokio::time::sleep(backoff).await;
        backoff *= 2;
        match tokio::time::timeout(left, request()).await {
            Ok(next) => result = next,
            Err(_) => break,
        }
    }
    result
}

/// The bytes of a ranged read, with the real size of the whole object so
/// callers can check it against what the metadata promised.
pub(crate) struct RangeRead {
    pub bytes: Bytes,
    pub object_size: u64,
}

/// What [`Store::read_local`] read: the pieces, and the object's size.
pub(crate) struct RangePieces {
    pub pieces: Vec<Bytes>,
    pub object_size: u64,
}

/// Reads `range` of the file at `path` in pieces of `piece` bytes.
fn read_pieces(
    path: &std::path::Path,
    range: Range<u64>,
    piece: u64,
) -> std::io::Result<RangePieces> {
    use std::io::{Read, Seek};
    let mut file = std::fs::File::open(path)?;
    let object_size = file.metadata()?.len();
    file.seek(std::io::SeekFrom::Start(range.start))?;
    let mut pieces = Vec::new();
    let mut at = range.start;
    while at < range.end {
        // Never more than the file holds: a range past its end (metadata
        // that claims a longer object) must not become an allocation.
        let len = piece
            .min(range.end - at)
            .min(object_size.saturating_sub(at));
        if len == 0 {
            break;
        }
        // `read_to_end` fills the spare capacity without zeroing it first.
        let mut buf = Vec::with_capacity(len as usize);
        (&mut file).take(len).read_to_end(&mut buf)?;
        if buf.is_empty() {
            break;
        }
        at += buf.len() as u64;
        pieces.push(Bytes::from(buf));
    }
    Ok(RangePieces {
        pieces,
        object_size,
    })
}

/// The local file `file` as a stream of parts of `part` bytes, read one
/// at a time as the upload asks for them. A failed read is an error of
/// the upload, which [`retrying`] starts over.
fn file_parts(
    file: &std::path::Path,
    part: usize,
) -> impl futures::Stream<Item = object_store::Result<Bytes>> + '_ {
    use tokio::io::AsyncReadExt;
    let failed = move |source: std::io::Error| object_store::Error::Generic {
        store: "local file",
        source: format!("read {}: {source}", file.display()).into(),
    };
    futures::stream::try_unfold(None, move |open: Option<tokio::fs::File>| async move {
        let mut f = match open {
            Some(f) => f,
            None => tokio::fs::File::open(file).await.map_err(failed)?,
        };
        let mut buf = Vec::with_capacity(part);
        (&mut f)
            .take(part as u64)
            .read_to_end(&mut buf)
            .await
            .map_err(failed)?;
        Ok((!buf.is_empty()).then(|| (Bytes::from(buf), Some(f))))
    })
}

/// A dataset's home: an object store, the prefix the dataset lives under,
/// and the mechanism that moves its refs atomically.
#[derive(Clone)]
pub struct Store {
    inner: Arc<dyn ObjectStore>,
    layout: Layout,
    refs: RefBackend,
    location: String,
    options: StoreOptions,
    /// Move refs without the conditional-put probe ([`StoreConfig::unsafe_refs`]).
    unsafe_refs: bool,
    /// Endpoint and credentials of a store reached over HTTP.
    remote: Option<Remote>,
    /// Set once the conditional-put probe passed (run before the first
    /// ref move; a failed probe runs again next time).
    cas_probe: Arc<tokio::sync::OnceCell<()>>,
    /// The directory of a local dataset, read directly by
    /// [`Store::read_local`].
    local_dir: Option<PathBuf>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("location", &self.location)
            .finish()
    }
}

impl Store {
    /// Opens a dataset location: a local path or `file://` URL (the embedded
    /// default), `memory://`, or any URL `object_store` parses (`s3://`,
    /// `gs://`, `az://`, …; credentials from the usual environment variables).
    ///
    /// With `create`, a missing local directory is created (for writers);
    /// otherwise a missing directory is an error. `config` holds the
    /// endpoint settings, time-outs and retry bounds, and any faults to
    /// inject (tests and diagnostics).
    pub fn open(location: &str, create: bool, config: &StoreConfig) -> Result<Store, StoreError> {
        let bad = |detail: String| StoreError::Location {
            location: location.to_string(),
            detail,
        };
        let store = if let Some(dir) = Self::local_path(location)? {
            if location.is_empty() {
                return Err(bad("empty path".into()));
            }
            Self::open_local(location, dir, create)?
        } else {
            let url = url::Url::parse(location).map_err(|e| bad(e.to_string()))?;
            let opened = remote::open(&url, config).map_err(bad)?;
            Store {
                remote: opened.remote,
                ..Store::from_object_store(opened.inner, opened.root, location)
            }
        };
        let store = Store {
            options: config.options,
            unsafe_refs: config.unsafe_refs,
            ..store
        };
        match &config.faults {
            Some(faults) => {
                tracing::warn!("injecting faults into {location}: {faults:?}");
                let faulty = faults::FaultyStore::new(store.inner.clone(), faults.clone());
                Ok(Store {
                    inner: Arc::new(faulty),
                    // Every read must meet the faults.
                    local_dir: None,
                    ..store
                })
            }
            None => Ok(store),
        }
    }

    /// The directory a location names if it is a local one (a path or a
    /// `file://` URL), `None` for any other URL.
    pub(crate) fn local_path(location: &str) -> Result<Option<PathBuf>, StoreError> {
        match location.split_once("://") {
            None => Ok(Some(PathBuf::from(location))),
            Some(("file", _)) => url::Url::parse(location)
                .ok()
                .and_then(|u| u.to_file_path().ok())
                .map(Some)
                .ok_or_else(|| StoreError::Location {
                    location: location.to_string(),
                    detail: "not a valid file:// URL".into(),
                }),
            Some(_) => Ok(None),
        }
    }

    fn open_local(location: &str, dir: PathBuf, create: bool) -> Result<Store, StoreError> {
        if create {
            std::fs::create_dir_all(&dir).map_err(|source| StoreError::Io {
                op: "create dataset directory",
                path: dir.display().to_string(),
                source,
            })?;
        }
        let dir = dir.canonicalize().map_err(|source| StoreError::Io {
            op: "open dataset directory",
            path: dir.display().to_string(),
            source,
        })?;
        if !dir.is_dir() {
            return Err(StoreError::Location {
                location: location.to_string(),
                detail: "is not a directory".into(),
            });
        }
        // fsync every object before the put returns: the commit order is
        // only a durability guarantee if each step is on disk.
        let inner = LocalFileSystem::new_with_prefix(&dir)
            .map_err(|e| StoreError::Location {
                location: location.to_string(),
                detail: e.to_string(),
            })?
            .with_fsync(true);
        Ok(Store {
            inner: Arc::new(inner),
            layout: Layout::new(Path::default()),
            refs: RefBackend::LocalDir(dir.clone()),
            location: dir.display().to_string(),
            options: StoreOptions::default(),
            unsafe_refs: false,
            remote: None,
            cas_probe: Default::default(),
            local_dir: Some(dir),
        })
    }

    /// Wraps an existing object store (tests and embedders); refs use the
    /// store's conditional puts, so it must support `PutMode::Update`.
    pub fn from_object_store(inner: Arc<dyn ObjectStore>, root: Path, location: &str) -> Store {
        Store {
            inner,
            layout: Layout::new(root),
            refs: RefBackend::Conditional,
            location: location.to_string(),
            options: StoreOptions::default(),
            unsafe_refs: false,
            remote: None,
            cas_probe: Default::default(),
            local_dir: None,
        }
    }

    /// The same store with other time-outs, retry bounds or part sizes.
    pub fn with_options(mut self, options: StoreOptions) -> Store {
        self.options = options;
        self
    }

    /// Where objects of this dataset live.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The location as given (or canonicalized, for local directories).
    pub fn location(&self) -> &str {
        &self.location
    }

    /// Reads a whole object.
    pub async fn get(&self, path: &Path) -> Result<Bytes, StoreError> {
        retrying(self.options.retry_deadline, "get", path, || async {
            whole_body(path, self.inner.get(path).await?).await
        })
        .await
        .map_err(|e| self.fail("get", path, e))
    }

    /// Reads `range` of an object. An empty range costs no request.
    pub(crate) async fn get_range(
        &self,
        path: &Path,
        range: Range<u64>,
    ) -> Result<RangeRead, StoreError> {
        let options = GetOptions {
            range: Some(GetRange::Bounded(range.clone())),
            ..Default::default()
        };
        retrying(self.options.retry_deadline, "get", path, || async {
            let result = self.inner.get_opts(path, options.clone()).await?;
            let object_size = result.meta.size;
            let bytes = whole_body(path, result).await?;
            Ok(RangeRead { bytes, object_size })
        })
        .await
        .map_err(|e| self.fail("get", path, e))
    }

    /// Fetches the credentials of a remote store (a no-op for others), so
    /// that a store without any is reported as that before a request
    /// fails for want of them.
    pub(crate) async fn check_credentials(&self) -> Result<(), StoreError> {
        let Some(remote) = &self.remote else {
            return Ok(());
        };
        remote
            .check_credentials()
            .await
            .map_err(|e| StoreError::NoCredentials {
                location: self.location.clone(),
                detail: e.to_string(),
                hint: remote.credentials_hint(),
            })
    }

    /// The file that holds object `path` of a local store; `None` for
    /// other stores.
    pub(crate) fn local_file(&self, path: &Path) -> Option<PathBuf> {
        let dir = self.local_dir.as_ref()?;
        // Percent-encoded names map to files as `object_store` decodes them.
        (!path.as_ref().contains('%')).then(|| dir.join(path.as_ref()))
    }

    /// Reads `range` of an object of a local dataset straight from its file,
    /// as consecutive pieces of at most `piece` bytes, each read into a
    /// buffer of its own: one blocking task, no zero-fill, no copy (a
    /// ranged GET through `object_store` takes two tasks, zero-fills its
    /// buffer, and one buffer must be copied to be cut). `None` for other
    /// stores. Pieces end early at the file's end: the caller compares the
    /// sizes.
    pub(crate) async fn read_local(
        &self,
        path: &Path,
        range: Range<u64>,
        piece: u64,
    ) -> Option<Result<RangePieces, StoreError>> {
        let file = self.local_file(path)?;
        let read = crate::blocking::run(move || read_pieces(&file, range, piece.max(1))).await;
        Some(read.map_err(|source| match source.kind() {
            std::io::ErrorKind::NotFound => StoreError::NotFound {
                path: path.to_string(),
            },
            _ => StoreError::Io {
                op: "read",
                path: path.to_string(),
                source,
            },
        }))
    }

    /// Streams a whole object through `f` chunk by chunk, folding it into
    /// a state made by `init` (for hashing large objects without holding
    /// them in memory). Returns the state and the object's size. A stream
    /// that breaks or ends short starts over with a fresh state.
    pub(crate) async fn fold_chunks<S>(
        &self,
        path: &Path,
        init: impl Fn() -> S,
        f: impl Fn(&mut S, &[u8]),
    ) -> Result<(S, u64), StoreError> {
        let attempt = || async {
            let result = self.inner.get(path).await?;
            let want = result.meta.size;
            let mut state = init();
            let mut size = 0u64;
            let mut stream = result.into_stream();
            while let Some(chunk) = stream.next().await {
                let chunk = chunk?;
                size += chunk.len() as u64;
                f(&mut state, &chunk);
            }
            if size != want {
                return Err(short_body(path, size as usize, want));
            }
            Ok((state, size))
        };
        retrying(self.options.retry_deadline, "get", path, attempt)
            .await
            .map_err(|e| self.fail("get", path, e))
    }

    /// An object's size and last-modified time, or `None` if it does not
    /// exist.
    pub(crate) async fn head(
        &self,
        path: &Path,
    ) -> Result<Option<object_store::ObjectMeta>, StoreError> {
        match retrying(self.options.retry_deadline, "head", path, || {
            self.inner.head(path)
        })
        .await
        {
            Ok(meta) => Ok(Some(meta)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.fail("head", path, e)),
        }
    }

    /// The size of an object, or `None` if it does not exist.
    pub async fn size(&self, path: &Path) -> Result<Option<u64>, StoreError> {
        Ok(self.head(path).await?.map(|meta| meta.size))
    }

    /// Writes a content-addressed object unless it is already there.
    /// Returns whether bytes were uploaded. An object present with the wrong
    /// size is damaged and is replaced. Objects over
    /// [`StoreOptions::multipart_threshold`] go up in parts.
    ///
    /// An object already there but last modified more than `REFRESH_AGE`
    /// ago is uploaded again (the same bytes, so harmless to any reader) to
    /// make it young: the caller is about to commit something naming it,
    /// and `packfs gc` deletes unreachable objects older than its grace
    /// (at least two hours), which an old abandoned upload
    /// that this writer happened to rebuild may well be. A refreshed object
    /// stays safe from gc for a grace after the refresh, and if gc deleted
    /// it between the HEAD and the refresh, the refresh puts it back.
    pub async fn put_immutable(&self, path: &Path, bytes: Bytes) -> Result<bool, StoreError> {
        let len = bytes.len() as u64;
        let fresh = |meta: &object_store::ObjectMeta| {
            meta.size == len && chrono::Utc::now() - meta.last_modified < refresh_age()
        };
        let mode = match self.head(path).await? {
            Some(meta) if fresh(&meta) => return Ok(false),
            Some(meta) if meta.size == len => {
                tracing::debug!("{path} is older than {REFRESH_AGE:?}: uploading it again");
                PutMode::Overwrite
            }
            Some(_) => PutMode::Overwrite,
            None => PutMode::Create,
        };
        let deadline = self.options.retry_deadline;
        if len > self.options.multipart_threshold {
            // Multipart uploads cannot be create-only; for content-addressed
            // bytes a concurrent identical upload is harmless anyway.
            // A completion whose answer was lost may have landed (the
            // object is then there and young): retries look first.
            let tried = std::sync::atomic::AtomicBool::new(false);
            let put = || async {
                if tried.swap(true, std::sync::atomic::Ordering::Relaxed) {
                    match self.inner.head(path).await {
                        Ok(meta) if fresh(&meta) => return Ok(()),
                        _ => {}
                    }
                }
                let part = self.options.part_bytes;
                let parts = (0..bytes.len())
                    .step_by(part)
                    .map(|start| Ok(bytes.slice(start..bytes.len().min(start + part))));
                self.put_multipart(path, futures::stream::iter(parts)).await
            };
            return match retrying(deadline, "multipart put", path, put).await {
                Ok(()) => Ok(true),
                Err(e) => Err(StoreError::backend("multipart put", path, e)),
            };
        }
        let options = PutOptions {
            mode,
            ..Default::default()
        };
        // A put whose answer was lost may have landed: the retry then finds
        // the object (AlreadyExists), which is the same success.
        let put = || {
            self.inner
                .put_opts(path, bytes.clone().into(), options.clone())
        };
        match retrying(deadline, "put", path, put).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::AlreadyExists { .. }) => Ok(false),
            Err(e) => Err(StoreError::backend("put", path, e)),
        }
    }

    /// One multipart upload of `parts` (each `StoreOptions::part_bytes`
    /// long but the last), a few in flight at a time; aborted (parts
    /// deleted) if any part, the source of the parts, or the completion
    /// fails.
    async fn put_multipart(
        &self,
        path: &Path,
        parts: impl futures::Stream<Item = object_store::Result<Bytes>>,
    ) -> object_store::Result<()> {
        const PARTS_IN_FLIGHT: usize = 4;
        let upload = self.inner.put_multipart(path).await?;
        let mut writer = WriteMultipart::new_with_chunk_size(upload, self.options.part_bytes);
        let mut parts = std::pin::pin!(parts);
        loop {
            let next = match writer.wait_for_capacity(PARTS_IN_FLIGHT).await {
                Ok(()) => parts.next().await,
                Err(e) => Some(Err(e)),
            };
            match next {
                Some(Ok(part)) => writer.put(part),
                Some(Err(e)) => {
                    writer.abort().await.ok();
                    return Err(e);
                }
                None => break,
            }
        }
        writer.finish().await.map(|_| ())
    }

    /// Uploads the local file `file` as object `path`, replacing any
    /// object there; returns its size. A file over
    /// [`StoreOptions::multipart_threshold`] is read and sent part by
    /// part (only the parts in flight are in memory); a smaller one in
    /// one put. Both are retried like [`Store::put_immutable`]'s.
    pub async fn put_file(&self, path: &Path, file: &std::path::Path) -> Result<u64, StoreError> {
        let local = |source| StoreError::Io {
            op: "read",
            path: file.display().to_string(),
            source,
        };
        let len = tokio::fs::metadata(file).await.map_err(local)?.len();
        let deadline = self.options.retry_deadline;
        if len > self.options.multipart_threshold {
            // The answer to a completion may be lost after it landed; the
            // retry then replaces the object with the same bytes.
            let put = || self.put_multipart(path, file_parts(file, self.options.part_bytes));
            retrying(deadline, "multipart put", path, put)
                .await
                .map_err(|e| self.fail("multipart put", path, e))?;
        } else {
            let bytes = Bytes::from(tokio::fs::read(file).await.map_err(local)?);
            let put = || self.inner.put(path, bytes.clone().into());
            retrying(deadline, "put", path, put)
                .await
                .map_err(|e| self.fail("put", path, e))?;
        }
        Ok(len)
    }

    /// Overwrites an object regardless of what is there: the few objects
    /// that change in place (a mount's lease), and tests.
    pub(crate) async fn put_overwrite(&self, path: &Path, bytes: Bytes) -> Result<(), StoreError> {
        let put = || self.inner.put(path, bytes.clone().into());
        retrying(self.options.retry_deadline, "put", path, put)
            .await
            .map(|_| ())
            .map_err(|e| self.fail("put", path, e))
    }

    /// Every object under the dataset's root (refs and metadata included).
    pub(crate) async fn list_all(&self) -> Result<Vec<object_store::ObjectMeta>, StoreError> {
        let root = self.layout.root().clone();
        let list = || self.inner.list(Some(&root)).try_collect();
        retrying(self.options.retry_deadline, "list", &root, list)
            .await
            .map_err(|e| self.fail("list", &root, e))
    }

    /// The objects directly in `dir` (none of its subdirectories').
    pub(crate) async fn list_dir(
        &self,
        dir: &Path,
    ) -> Result<Vec<object_store::ObjectMeta>, StoreError> {
        let list = || self.inner.list_with_delimiter(Some(dir));
        retrying(self.options.retry_deadline, "list", dir, list)
            .await
            .map(|listed| listed.objects)
            .map_err(|e| self.fail("list", dir, e))
    }

    /// The names of the directories directly in `dir` (the common
    /// prefixes one level down), sorted.
    pub(crate) async fn list_subdirs(&self, dir: &Path) -> Result<Vec<String>, StoreError> {
        let list = || self.inner.list_with_delimiter(Some(dir));
        let listed = retrying(self.options.retry_deadline, "list", dir, list)
            .await
            .map_err(|e| self.fail("list", dir, e))?;
        let mut names: Vec<String> = listed
            .common_prefixes
            .iter()
            .filter_map(|p| p.filename().map(str::to_string))
            .collect();
        names.sort();
        Ok(names)
    }

    /// Deletes an object (gone already counts as deleted).
    pub async fn delete(&self, path: &Path) -> Result<(), StoreError> {
        let delete = || self.inner.delete(path);
        match retrying(self.options.retry_deadline, "delete", path, delete).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.fail("delete", path, e)),
        }
    }

    /// The names of all refs.
    pub async fn ref_names(&self) -> Result<Vec<String>, StoreError> {
        let dir = self.layout.refs_dir();
        let list = || {
            self.inner
                .list(Some(&dir))
                .map_ok(|meta| meta.location.filename().unwrap_or_default().to_string())
                .try_collect::<Vec<String>>()
        };
        let mut names = retrying(self.options.retry_deadline, "list", &dir, list)
            .await
            .map_err(|e| self.fail("list", &dir, e))?;
        // Lock files and temporaries of the local ref backend are not refs.
        names.retain(|n| packfs_format::validate_ref_name(n).is_ok());
        names.sort();
        Ok(names)
    }

    /// Fails with [`StoreError::NoAtomicRefs`] unless refs can move
    /// atomically here: always on a local directory; on an object store
    /// once its conditional puts were shown to work (probed once per
    /// `Store`), or the user overrode the check ([`StoreConfig::unsafe_refs`],
    /// `PACKFS_UNSAFE_REFS=1`). Writers call this before they write anything.
    pub async fn ensure_atomic_refs(&self) -> Result<(), StoreError> {
        if matches!(self.refs, RefBackend::LocalDir(_)) || self.unsafe_refs {
            return Ok(());
        }
        self.cas_probe
            .get_or_try_init(|| refs::probe_conditional_puts(self))
            .await
            .map(|_| ())
    }

    /// The error for `source`, met doing `op` on `path`: "not found", the
    /// failures [`remote`] puts in the user's terms, or the store's own.
    fn fail(&self, op: &'static str, path: &Path, source: object_store::Error) -> StoreError {
        let explained = match (&self.remote, &source) {
            (_, object_store::Error::NotFound { .. }) | (None, _) => None,
            (Some(remote), source) => remote.explain(&format!("{op} {path}"), source),
        };
        explained.unwrap_or_else(|| StoreError::backend(op, path, source))
    }

    /// The Manifest a ref points at, or `None` if the ref does not exist.
    pub async fn read_ref(&self, name: &str) -> Result<Option<ObjectId>, StoreError> {
        packfs_format::validate_ref_name(name)?;
        Ok(self.refs.read(self, name).await?.map(|(id, _)| id))
    }

    /// Moves ref `name` from `expected` (`None`: the ref must not exist yet)
    /// to `new`, atomically. Fails with [`StoreError::RefConflict`] if the
    /// ref no longer holds `expected`.
    pub async fn update_ref(
        &self,
        name: &str,
        expected: Option<ObjectId>,
        new: ObjectId,
    ) -> Result<(), StoreError> {
        packfs_format::validate_ref_name(name)?;
        self.refs.compare_and_swap(self, name, expected, new).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::{Duration, Instant};

    use super::*;

    fn generic(store: &'static str) -> object_store::Error {
        object_store::Error::Generic {
            store,
            source: "boom".into(),
        }
    }

    /// Runs `retrying` over a request that always fails with `error`;
    /// returns how many times the request ran.
    async fn attempts_of(deadline: Duration, error: impl Fn() -> object_store::Error) -> u32 {
        let calls = AtomicU32::new(0);
        let result: object_store::Result<()> =
            retrying(deadline, "get", &Path::from("x"), || async {
                calls.fetch_add(1, Ordering::SeqCst);
                Err(error())
            })
            .await;
        assert!(result.is_err());
        calls.into_inner()
    }

    /// What object_store's HTTP client gave up on is not retried again:
    /// its retries and packfs's would multiply.
    #[tokio::test]
    async fn failures_the_http_client_retried_are_final() {
        for store in HTTP_BACKENDS {
            let error = move || generic(store);
            assert_eq!(attempts_of(Duration::from_secs(30), error).await, 1);
        }
    }

    /// Failures no HTTP client saw (a short body, a local or injected
    /// fault) are retried, a bounded number of times, within the deadline.
    #[tokio::test]
    async fn other_transient_failures_are_retried_within_the_deadline() {
        let short = || short_body(&Path::from("x"), 1, 2);
        assert_eq!(attempts_of(Duration::from_secs(30), short).await, ATTEMPTS);
        assert_eq!(attempts_of(Duration::ZERO, short).await, 1);
        let not_found = || object_store::Error::NotFound {
            path: "x".into(),
            source: "gone".into(),
        };
        assert_eq!(attempts_of(Duration::from_secs(30), not_found).await, 1);
    }

    /// Local files go up whole or, over the threshold, in parts, and come
    /// back the same; a listing of a directory leaves out its
    /// subdirectories.
    #[tokio::test]
    async fn local_files_are_uploaded_whole_or_in_parts() {
        let tmp = tempfile::tempdir().unwrap();
        let inner = Arc::new(object_store::memory::InMemory::new());
        let store = Store::from_object_store(inner, Path::from("b"), "memory://").with_options(
            StoreOptions {
                multipart_threshold: 1000,
                part_bytes: 300,
                ..StoreOptions::default()
            },
        );
        for len in [0, 999, 1000, 1001, 2500] {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
            let file = tmp.path().join(format!("f{len}"));
            std::fs::write(&file, &bytes).unwrap();
            let path = Path::from(format!("b/f{len}"));
            assert_eq!(store.put_file(&path, &file).await.unwrap(), len as u64);
            assert_eq!(store.get(&path).await.unwrap(), bytes, "{len} bytes");
        }
        let file = tmp.path().join("f999");
        store.put_file(&Path::from("b/sub/x"), &file).await.unwrap();
        let listed = store.list_dir(&Path::from("b")).await.unwrap();
        assert_eq!(listed.len(), 5);
        let missing = tmp.path().join("missing");
        let err = store.put_file(&Path::from("b/m"), &missing).await;
        assert!(err.unwrap_err().to_string().contains("missing"));
    }

    /// A retry still running when the deadline passes is abandoned: the
    /// call ends within the deadline with the failure that caused it.
    #[tokio::test]
    async fn a_retry_is_cut_off_at_the_deadline() {
        let calls = AtomicU32::new(0);
        let started = Instant::now();
        let result: object_store::Result<()> = retrying(
            Duration::from_millis(500),
            "get",
            &Path::from("x"),
            || async {
                if calls.fetch_add(1, Ordering::SeqCst) > 0 {
                    tokio::time::sleep(Duration::from_secs(60)).await;
                }
                Err(generic("faulty"))
            },
        )
        .await;
        assert!(started.elapsed() < Duration::from_secs(5));
        assert!(
            matches!(
                result,
                Err(object_store::Error::Generic {
                    store: "faulty",
                    ..
                })
            ),
            "{result:?}"
        );
        assert_eq!(calls.into_inner(), 2);
    }
}
