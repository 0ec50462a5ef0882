//! Without the `cloud` feature no store is remote: only local directories
//! and `memory://` open, and URLs of stores reached over HTTP are refused
//! with what to build instead.

use std::sync::Arc;

use object_store::path::Path;
use object_store::ObjectStore;

use super::{StoreConfig, StoreError};

/// A remote store: none can be opened in this build.
#[derive(Clone)]
pub(super) enum Remote {}

impl Remote {
    pub(super) async fn check_credentials(&self) -> object_store::Result<()> {
        match *self {}
    }

    pub(super) fn credentials_hint(&self) -> &'static str {
        match *self {}
    }

    pub(super) fn with_credentials_in_hand(&self) -> Remote {
        match *self {}
    }

    pub(super) fn no_such_bucket(&self, _: &str) -> StoreError {
        match *self {}
    }

    pub(super) fn explain(&self, _: &str, _: &object_store::Error) -> Option<StoreError> {
        match *self {}
    }
}

/// The `object_store` client opened by [`open`].
pub(super) struct Opened {
    pub(super) inner: Arc<dyn ObjectStore>,
    /// The dataset's prefix in the store.
    pub(super) root: Path,
    pub(super) remote: Option<Remote>,
}

/// The store of a `memory://` URL; others are refused.
pub(super) fn open(url: &url::Url, _: &StoreConfig) -> Result<Opened, String> {
    use object_store::ObjectStoreScheme as Scheme;
    match Scheme::parse(url).map_err(|e| e.to_string())? {
        (Scheme::Memory, root) => Ok(Opened {
            inner: Arc::new(object_store::memory::InMemory::new()),
            root,
            remote: None,
        }),
        (other, _) => Err(format!(
            "{other:?} URLs need packfs-core built with its `cloud` feature"
        )),
    }
}
