//! The parent links of the history that `packfs expire` cut
//! (`docs/FORMAT.md`, Expiry): every walk of history (gc, log, `REV~N`,
//! merge bases) follows a Manifest's parents through [`Cuts::parents`].

use std::collections::HashSet;

use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;
use packfs_format::{ExpiryRecord, Manifest, ObjectId};

use super::{check_content, Dataset, DatasetError, METADATA_CONCURRENCY};

/// The cut links of a dataset's history: the union of its expiry records.
#[derive(Debug, Default)]
pub struct Cuts {
    links: HashSet<(ObjectId, ObjectId)>,
    /// The records read, by path.
    pub(crate) records: Vec<Path>,
}

impl Cuts {
    /// The parents of Manifest `id` that walks of history still follow.
    pub fn parents(&self, id: &ObjectId, manifest: &Manifest) -> Vec<ObjectId> {
        manifest
            .parents
            .iter()
            .filter(|p| !self.is_cut(id, p))
            .copied()
            .collect()
    }

    /// Whether the link from Manifest `id` to its parent `parent` is cut.
    pub fn is_cut(&self, id: &ObjectId, parent: &ObjectId) -> bool {
        self.links.contains(&(*id, *parent))
    }

    /// Every cut link, (Manifest, parent).
    pub(crate) fn links(&self) -> impl Iterator<Item = &(ObjectId, ObjectId)> {
        self.links.iter()
    }
}

impl Dataset {
    /// The history's cuts: every expiry record stored, each checked against
    /// its id.
    pub async fn cuts(&self) -> Result<Cuts, DatasetError> {
        let layout = self.store().layout();
        let listed = self.store().list_dir(&layout.expiry_dir()).await?;
        let records: Vec<(Path, ObjectId)> = listed
            .into_iter()
            .filter_map(|meta| {
                let id = ObjectId::from_hex(meta.location.filename()?).ok()?;
                Some((meta.location, id))
            })
            .collect();
        let fetches = records.iter().cloned().map(|(path, id)| async move {
            let bytes = self
                .fetch(&path, "expiry record", &id, "the history")
                .await?;
            check_content(&path, &id, &bytes)?;
            let what = format!("expiry record {path}");
            Ok::<_, DatasetError>(ExpiryRecord::decode(&bytes, &what)?)
        });
        let decoded: Vec<ExpiryRecord> = futures::stream::iter(fetches)
            .buffered(METADATA_CONCURRENCY)
            .try_collect()
            .await?;
        Ok(Cuts {
            links: decoded.into_iter().flat_map(|r| r.cuts).collect(),
            records: records.into_iter().map(|(path, _)| path).collect(),
        })
    }
}
