//! Refs moved by compare-and-swap.
//!
//! Stores with conditional puts (S3, GCS, Azure, in-memory) use them
//! directly: create-only for a new ref, update-if-ETag-matches otherwise.
//! `LocalFileSystem` supports create-only but not update
//! (`PutMode::Update` is `NotImplemented`), so local datasets serialize ref
//! updates with an exclusive `flock(2)` on `_packfs/locks/<ref>.lock`,
//! re-read the ref under the lock, and publish the new value with an
//! fsync'd write and an atomic `rename(2)`. Readers never lock: a rename
//! replaces the file whole.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::{Path as FsPath, PathBuf};

use object_store::{ObjectStoreExt, PutMode, PutOptions, UpdateVersion};

use super::{Store, StoreError};
use packfs_format::{decode_ref, encode_ref, ObjectId, RESERVED_PREFIX};

#[derive(Clone, Debug)]
pub(super) enum RefBackend {
    /// Conditional puts of the object store.
    Conditional,
    /// A local dataset directory: flock + rename.
    LocalDir(PathBuf),
}

impl RefBackend {
    /// Current value and the version token a conditional update needs.
    pub(super) async fn read(
        &self,
        store: &Store,
        name: &str,
    ) -> Result<Option<(ObjectId, UpdateVersion)>, StoreError> {
        let path = store.layout.reference(name);
        match self {
            RefBackend::LocalDir(dir) => {
                let file = local_ref_file(dir, name);
                match fs::read(&file) {
                    Ok(bytes) => Ok(Some((decode_ref(&bytes, name)?, no_version()))),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                    Err(source) => Err(StoreError::Io {
                        op: "read ref",
                        path: file.display().to_string(),
                        source,
                    }),
                }
            }
            RefBackend::Conditional => {
                let read = super::retrying(store.options.retry_deadline, "get", &path, || async {
                    let result = store.inner.get(&path).await?;
                    let version = UpdateVersion {
                        e_tag: result.meta.e_tag.clone(),
                        version: result.meta.version.clone(),
                    };
                    Ok((super::whole_body(&path, result).await?, version))
                });
                match read.await {
                    Ok((bytes, version)) => Ok(Some((decode_ref(&bytes, name)?, version))),
                    Err(object_store::Error::NotFound { .. }) => Ok(None),
                    Err(e) => Err(store.fail("get", &path, e)),
                }
            }
        }
    }

    pub(super) async fn compare_and_swap(
        &self,
        store: &Store,
        name: &str,
        expected: Option<ObjectId>,
        new: ObjectId,
    ) -> Result<(), StoreError> {
        match self {
            RefBackend::LocalDir(dir) => {
                let (dir, name) = (dir.clone(), name.to_string());
                tokio::task::spawn_blocking(move || local_cas(&dir, &name, expected, new))
                    .await
                    .expect("ref update task panicked")
            }
            RefBackend::Conditional => self.conditional_cas(store, name, expected, new).await,
        }
    }

    async fn conditional_cas(
        &self,
        store: &Store,
        name: &str,
        expected: Option<ObjectId>,
        new: ObjectId,
    ) -> Result<(), StoreError> {
        store.ensure_atomic_refs().await?;
        let path = store.layout.reference(name);
        let current = self.read(store, name).await?;
        let conflict = |actual| StoreError::RefConflict {
            name: name.to_string(),
            expected,
            actual,
        };
        let mode = match (&current, expected) {
            (None, None) => PutMode::Create,
            (Some((actual, version)), Some(want)) if *actual == want => {
                PutMode::Update(version.clone())
            }
            (current, _) => return Err(conflict(current.as_ref().map(|(id, _)| *id))),
        };
        let options = PutOptions {
            mode,
            ..Default::default()
        };
        let put = || {
            store
                .inner
                .put_opts(&path, encode_ref(&new).into(), options.clone())
        };
        match super::retrying(store.options.retry_deadline, "update ref", &path, put).await {
            Ok(_) => Ok(()),
            Err(
                object_store::Error::AlreadyExists { .. }
                | object_store::Error::Precondition { .. },
            ) => {
                let actual = self.read(store, name).await?.map(|(id, _)| id);
                // Our own earlier attempt may have landed with its answer
                // lost: then the ref already says what we asked.
                match actual == Some(new) {
                    true => Ok(()),
                    false => Err(conflict(actual)),
                }
            }
            Err(object_store::Error::NotImplemented { .. }) => Err(StoreError::NoAtomicRefs {
                location: store.location.clone(),
                detail: "the backend does not implement conditional puts".into(),
            }),
            Err(e) => Err(store.fail("update ref", &path, e)),
        }
    }
}

fn no_version() -> UpdateVersion {
    UpdateVersion {
        e_tag: None,
        version: None,
    }
}

fn local_ref_file(dir: &FsPath, name: &str) -> PathBuf {
    dir.join(RESERVED_PREFIX).join("refs").join(name)
}

fn io_err<'a>(
    op: &'static str,
    path: &'a FsPath,
) -> impl FnOnce(std::io::Error) -> StoreError + 'a {
    move |source| StoreError::Io {
        op,
        path: path.display().to_string(),
        source,
    }
}

fn local_cas(
    dir: &FsPath,
    name: &str,
    expected: Option<ObjectId>,
    new: ObjectId,
) -> Result<(), StoreError> {
    let locks = dir.join(RESERVED_PREFIX).join("locks");
    fs::create_dir_all(&locks).map_err(io_err("create lock directory", &locks))?;
    let lock_path = locks.join(format!("{name}.lock"));
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(io_err("open ref lock", &lock_path))?;
    flock_exclusive(&lock).map_err(io_err("lock ref", &lock_path))?;

    let file = local_ref_file(dir, name);
    let actual = match fs::read(&file) {
        Ok(bytes) => Some(decode_ref(&bytes, name)?),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(io_err("read ref", &file)(e)),
    };
    if actual != expected {
        return Err(StoreError::RefConflict {
            name: name.to_string(),
            expected,
            actual,
        });
    }
    let refs_dir = file.parent().expect("ref file has a parent");
    fs::create_dir_all(refs_dir).map_err(io_err("create refs directory", refs_dir))?;
    let tmp = refs_dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let mut out = File::create(&tmp).map_err(io_err("write ref", &tmp))?;
    out.write_all(&encode_ref(&new))
        .and_then(|_| out.sync_all())
        .map_err(io_err("write ref", &tmp))?;
    fs::rename(&tmp, &file).map_err(io_err("publish ref", &file))?;
    File::open(refs_dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err("sync refs directory", refs_dir))?;
    Ok(()) // dropping `lock` releases the flock
}

fn flock_exclusive(file: &File) -> std::io::Result<()> {
    loop {
        // SAFETY: flock on a descriptor we own; no memory is passed.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } == 0 {
            return Ok(());
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// Checks once that the store honours conditional puts: creating an
/// existing object must fail (`If-None-Match: *`) and updating with a stale
/// version must fail (`If-Match`). Some S3-compatible servers accept both
/// and overwrite, which would let two writers both move a ref: only such a
/// store (or one without conditional puts) is [`StoreError::NoAtomicRefs`].
/// A store that cannot be reached, has no credentials, refuses them or
/// has no such bucket is said to be that, never advised to go unsafe.
pub(super) async fn probe_conditional_puts(store: &Store) -> Result<(), StoreError> {
    let location = &store.location;
    store.check_credentials().await?;
    let remote = store.remote.as_ref().map(|r| r.with_credentials_in_hand());
    let nonce = format!(
        "cas-probe-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    );
    let path = store.layout.lock(&nonce);
    let put = |mode: PutMode, body: &'static [u8]| {
        let options = PutOptions {
            mode,
            ..Default::default()
        };
        store.inner.put_opts(&path, body.into(), options)
    };
    let not_atomic = |detail: &str| StoreError::NoAtomicRefs {
        location: location.clone(),
        detail: detail.to_string(),
    };
    let failed = |e| match (e, &remote) {
        // A PUT finds no object missing: its bucket is.
        (object_store::Error::NotFound { .. }, Some(remote)) => remote.no_such_bucket(location),
        (object_store::Error::NotImplemented { .. }, _) => {
            not_atomic("the backend does not implement conditional puts")
        }
        (e, Some(remote)) => match remote.explain(location, &e) {
            Some(explained) => explained,
            None => StoreError::backend("probe put", &path, e),
        },
        (e, None) => StoreError::backend("probe put", &path, e),
    };
    let outcome = async {
        put(PutMode::Create, b"1").await.map_err(failed)?;
        match put(PutMode::Create, b"2").await {
            Err(object_store::Error::AlreadyExists { .. }) => {}
            Ok(_) => {
                return Err(not_atomic(
                    "a create-only put (If-None-Match: *) overwrote an existing object",
                ))
            }
            Err(e) => return Err(failed(e)),
        }
        let stale = UpdateVersion {
            e_tag: Some("\"packfs-stale-etag\"".into()),
            version: None,
        };
        match put(PutMode::Update(stale), b"3").await {
            Err(object_store::Error::Precondition { .. }) => Ok(()),
            Ok(_) => Err(not_atomic(
                "an update with a stale ETag (If-Match) succeeded",
            )),
            Err(e) => Err(failed(e)),
        }
    }
    .await;
    let _ = store.inner.delete(&path).await;
    outcome
}
