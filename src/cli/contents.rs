//! What `ls` and `cat` read at a location: a dataset's tree at a revision,
//! a loader view of it, or the tree of a DataBundle or TileDB array.

use std::sync::Arc;

use packfs_core::array::Array;
use packfs_core::bundle::{Bundle, BundleError};
use packfs_core::cache::CacheOptions;
use packfs_core::catalog::array::ArrayCatalog;
use packfs_core::catalog::bundle::BundleCatalog;
use packfs_core::catalog::view::ViewSpec;
use packfs_core::catalog::Catalog;
use packfs_core::dataset::Dataset;
use packfs_core::location::LocationKind;
use packfs_core::reader::Reader;
use packfs_core::store::StoreConfig;
use packfs_core::tree::{Tree, DEFAULT_INDEX_BYTES};

use super::{CliResult, DatasetAt};

/// The contents of a location, opened for reading, each with a reader of
/// its store.
pub(super) enum Contents {
    /// A dataset's tree at the revision asked for.
    Tree { tree: Tree, reader: Reader },
    /// A catalog: a view of a dataset, a bundle's or an array's tree.
    Catalog {
        catalog: Arc<dyn Catalog>,
        reader: Reader,
    },
}

impl Contents {
    /// What `at` names: view `view` of its dataset if one is given, else
    /// the bundle or array there, else the dataset's tree.
    pub(super) async fn open(
        at: &DatasetAt,
        view: Option<&ViewSpec>,
        config: &StoreConfig,
    ) -> CliResult<Contents> {
        let dataset = Dataset::open_with(&at.dataset, false, config)?;
        let reader = Reader::new(dataset.store().clone(), CacheOptions::default(), None);
        if let Some(spec) = view {
            let tree = load_tree(&dataset, at).await?;
            let catalog = packfs_core::catalog::view::open(Arc::new(tree), spec);
            return Ok(Contents::Catalog { catalog, reader });
        }
        let store = dataset.store();
        // A probe that fails leaves the location to the dataset path, whose
        // errors name the ref it could not read and say why.
        let kind = match LocationKind::of(store).await {
            Err(e @ BundleError::Unfinished { .. }) => return Err(e.into()),
            kind => kind.unwrap_or(LocationKind::Dataset),
        };
        let catalog: Arc<dyn Catalog> = match kind {
            LocationKind::Bundle => {
                let index_dir = packfs_fs::mount::bundle_index_dir(None);
                let bundle = Bundle::open(store, &index_dir).await?;
                Arc::new(BundleCatalog::new(
                    Arc::new(bundle),
                    std::time::SystemTime::now(),
                ))
            }
            LocationKind::Array => {
                let array = Array::open(store, at.at).await?;
                let runtime = tokio::runtime::Handle::current();
                Arc::new(ArrayCatalog::new(
                    Arc::new(array),
                    reader.cache().clone(),
                    runtime,
                    &Default::default(),
                )?)
            }
            _ => {
                let tree = load_tree(&dataset, at).await?;
                return Ok(Contents::Tree { tree, reader });
            }
        };
        Ok(Contents::Catalog { catalog, reader })
    }
}

/// The tree of `dataset` at `at`'s revision: only the pages a command
/// asks for are read.
async fn load_tree(dataset: &Dataset, at: &DatasetAt) -> CliResult<Tree> {
    let resolved = dataset.resolve_revision(&at.revision).await?;
    let (id, referrer) = (resolved.id, resolved.describe());
    Ok(Tree::open(dataset, id, &referrer, DEFAULT_INDEX_BYTES).await?)
}

/// The catalog id of `path` (`/`-separated, from its root).
pub(super) fn resolve_in(catalog: &dyn Catalog, path: &str) -> CliResult<u64> {
    let mut id = 0;
    for name in path.split('/').filter(|n| !n.is_empty()) {
        id = catalog
            .lookup(id, name.as_bytes())?
            .ok_or_else(|| format!("{path}: no such file or directory"))?;
    }
    Ok(id)
}
