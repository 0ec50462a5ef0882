//! What a location holds: the one place where packfs tells a DataBundle
//! and a TileDB array from a packfs dataset, for every command that takes
//! any of them (mount, ls, cat, verify, import's source, bundle create's
//! destination).

use crate::array::Array;
use crate::bundle::{Bundle, BundleError};
use crate::store::Store;

/// The kind of thing at a location.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LocationKind {
    /// A packfs dataset (or nothing yet: a dataset is created by writing).
    Dataset,
    /// A DataBundle: it has a bundle index.
    Bundle,
    /// A TileDB array: it has a schema.
    Array,
}

impl LocationKind {
    /// What `store`'s location holds. A bundle's index is looked for first
    /// (its probe also says when the store has no credentials or cannot be
    /// reached), then an array's schema; a location with a bundle's first
    /// shard but no index is an error.
    pub async fn of(store: &Store) -> Result<LocationKind, BundleError> {
        if Bundle::is_bundle(store).await? {
            return Ok(LocationKind::Bundle);
        }
        if Array::is_array(store).await {
            return Ok(LocationKind::Array);
        }
        // Shards without an index are an interrupted bundle write, not an
        // empty dataset: said so, instead of "no ref main".
        if Bundle::has_shard_zero(store).await {
            return Err(BundleError::Unfinished {
                location: store.location().to_owned(),
            });
        }
        Ok(LocationKind::Dataset)
    }

    /// How messages name it.
    pub fn describe(self) -> &'static str {
        match self {
            LocationKind::Dataset => "packfs dataset",
            LocationKind::Bundle => "DataBundle",
            LocationKind::Array => "TileDB array",
        }
    }
}
