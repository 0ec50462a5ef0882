//! DataBundles (`docs/DATABUNDLE.md`): a directory of `shard-%08d` files
//! and an `index/` database, on a local disk or under a store prefix.
//! The codecs are in [`packfs_format::bundle`]; this module opens and reads
//! bundles (and writes an index, for `bundle create`).

pub mod index;

use std::path::{Path as FsPath, PathBuf};
use std::sync::Arc;

use object_store::path::Path;
use packfs_format::bundle::{check_shard_header, shard_name, INDEX_PATH, SHARD_HEADER_LEN};
use packfs_format::FormatError;
use thiserror::Error;

use crate::cache::ObjectRef;
use crate::store::{Store, StoreError};
use index::Index;

/// The name of the first shard, which every bundle with files has.
const SHARD_ZERO: &str = "shard-00000000";

/// Why a bundle could not be read, or its index written. Each names the
/// file or object and what is wrong with it.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum BundleError {
    /// The index database could not be opened or queried, or is not a
    /// bundle's.
    #[error("bundle index {}: {detail}", path.display())]
    Index { path: PathBuf, detail: String },
    /// A key or value of the index, a shard header or a record does not
    /// decode.
    #[error("{0}")]
    Format(#[from] FormatError),
    /// A local file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The store failed.
    #[error("{0}")]
    Store(#[from] StoreError),
    /// The location has a bundle's shards but no index: a bundle write was
    /// interrupted before its last step.
    #[error(
        "{location} looks like a DataBundle whose index was never written: it has \
         {SHARD_ZERO} but no {INDEX_PATH} (an interrupted `packfs bundle create` leaves \
         this; remove it and create the bundle again)"
    )]
    Unfinished { location: String },
    /// A file's entry puts its bytes past 2^64: `what` names the sum.
    #[error("{what} overflows 64 bits ({left} + {right})")]
    Overflow {
        what: &'static str,
        left: u64,
        right: u64,
    },
}

/// An open bundle: its index and its shard objects.
pub struct Bundle {
    index: Index,
    shards: Vec<ObjectRef>,
    location: String,
}

impl Bundle {
    /// Whether `store`'s location holds a bundle (has its index).
    pub(crate) async fn is_bundle(store: &Store) -> Result<bool, BundleError> {
        // Asked before anything else of a location, so its failures are
        // explained: a store without credentials is said to be that, and
        // the probe is a one-byte GET, not a HEAD, because a refused HEAD
        // has no body to say why (e.g. InvalidAccessKeyId).
        store.check_credentials().await?;
        match store.get_range(&index_path(store), 0..1).await {
            Ok(_) => Ok(true),
            Err(StoreError::NotFound { .. }) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Whether `store`'s location holds the first shard of a bundle (an
    /// object `shard-00000000` that starts with its header).
    pub(crate) async fn has_shard_zero(store: &Store) -> bool {
        let path = store.layout().root().clone().join(SHARD_ZERO);
        match store.get_range(&path, 0..SHARD_HEADER_LEN as u64).await {
            Ok(header) => check_shard_header(&header.bytes, 0).is_ok(),
            Err(_) => false,
        }
    }

    /// Opens the bundle at `store`'s location. A local bundle's index is
    /// opened in place; another store's is downloaded first into
    /// `index_dir` (kept there, named after the object's location, size
    /// and ETag, so a remount reuses it), and its size checked. Every
    /// shard must exist and start with its header.
    pub async fn open(store: &Store, index_dir: &FsPath) -> Result<Bundle, BundleError> {
        let path = index_path(store);
        let file = match store.local_file(&path) {
            Some(file) => file,
            None => fetch_index(store, &path, index_dir).await?,
        };
        let index = crate::blocking::run(move || Index::open(&file)).await?;
        let count = index.config().shard_count;
        let mut shards = Vec::with_capacity(count as usize);
        for i in 0..count {
            let path = store.layout().root().clone().join(shard_name(i));
            // One request per shard: the header's GET also says the size.
            let header = store.get_range(&path, 0..SHARD_HEADER_LEN as u64).await?;
            check_shard_header(&header.bytes, i)?;
            shards.push(ObjectRef {
                path: Arc::new(path),
                len: header.object_size,
                drop_behind: false,
                then: None,
            });
        }
        Ok(Bundle {
            index,
            shards,
            location: store.location().to_owned(),
        })
    }

    /// The index.
    pub fn index(&self) -> &Index {
        &self.index
    }

    /// Shard `i`'s object, if there is one.
    pub(crate) fn shard(&self, i: u32) -> Option<&ObjectRef> {
        self.shards.get(i as usize)
    }

    /// Where the bundle is.
    pub fn location(&self) -> &str {
        &self.location
    }
}

/// The object of the index of the bundle at `store`'s location.
pub(crate) fn index_path(store: &Store) -> Path {
    // One segment at a time: `join` would escape a `/`.
    INDEX_PATH
        .split('/')
        .fold(store.layout().root().clone(), |path, segment| {
            path.join(segment)
        })
}

/// Downloads the index at `path` into `dir`, unless a copy of the same
/// object is there already. Written under a temporary name and renamed,
/// so a copy in place is whole.
async fn fetch_index(store: &Store, path: &Path, dir: &FsPath) -> Result<PathBuf, BundleError> {
    let meta = store
        .head(path)
        .await?
        .ok_or_else(|| StoreError::NotFound {
            path: path.to_string(),
        })?;
    let key = format!(
        "{}\n{path}\n{}\n{}",
        store.location(),
        meta.size,
        meta.e_tag.as_deref().unwrap_or("")
    );
    let file = dir.join(format!(
        "{}.sqlite",
        packfs_format::ObjectId::of(key.as_bytes()).to_hex()
    ));
    if std::fs::metadata(&file).is_ok_and(|m| m.len() == meta.size) {
        return Ok(file);
    }
    let bytes = store.get(path).await?;
    if bytes.len() as u64 != meta.size {
        return Err(FormatError::shape(
            path.to_string(),
            format!("read {} bytes of a {}-byte index", bytes.len(), meta.size),
        )
        .into());
    }
    let io = |path: &FsPath| {
        let path = path.to_owned();
        move |source| BundleError::Io { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let temp = file.with_extension("tmp");
    std::fs::write(&temp, &bytes).map_err(io(&temp))?;
    std::fs::rename(&temp, &file).map_err(io(&file))?;
    Ok(file)
}
