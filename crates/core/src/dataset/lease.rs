//! Leases of running mounts (`docs/FORMAT.md`, Leases): a mount names the
//! Manifest it serves or writes over, renews the lease now and then and
//! releases it when it ends, and while the lease is fresh `packfs expire`
//! and gc keep that Manifest and what it reaches.

use std::time::Duration;

use bytes::Bytes;
use object_store::path::Path;
use packfs_format::{Lease, ObjectId};

use super::{Dataset, DatasetError};

/// How long a lease not renewed still protects its Manifest: a mount that
/// died keeps its Manifest for this long, so its spool can be recovered
/// onto it.
pub const LEASE_TTL: Duration = Duration::from_secs(7 * 24 * 3600);

/// How often a mount renews its lease.
pub const LEASE_RENEWAL: Duration = Duration::from_secs(600);

/// A lease this process holds.
pub struct LeaseHolder {
    dataset: Dataset,
    path: Path,
    reference: String,
    writes: bool,
    /// Set once released: a renewal after that would bring it back.
    released: tokio::sync::Mutex<bool>,
}

/// A lease found in the store.
#[derive(Debug)]
pub struct StoredLease {
    pub path: Path,
    pub lease: Lease,
    /// Since it was last renewed.
    pub age: Duration,
}

impl Dataset {
    /// A lease named `name` (unique to this process) for a mount of
    /// `reference` (a ref, or a Manifest's hex id), which commits if
    /// `writes`: nothing is stored until [`LeaseHolder::renew`].
    pub fn lease(&self, name: &str, reference: &str, writes: bool) -> LeaseHolder {
        LeaseHolder {
            dataset: self.clone(),
            path: self.store().layout().lease(name),
            reference: reference.to_string(),
            writes,
            released: Default::default(),
        }
    }

    /// [`Dataset::lease`], taken on `manifest`.
    pub async fn take_lease(
        &self,
        name: &str,
        reference: &str,
        manifest: ObjectId,
        writes: bool,
    ) -> Result<LeaseHolder, DatasetError> {
        let holder = self.lease(name, reference, writes);
        holder.renew(manifest).await?;
        Ok(holder)
    }

    /// Every lease stored, fresh or not (`age` tells), each decoded.
    pub async fn leases(&self) -> Result<Vec<StoredLease>, DatasetError> {
        let layout = self.store().layout();
        let now = chrono::Utc::now();
        let mut out = Vec::new();
        for meta in self.store().list_dir(&layout.leases_dir()).await? {
            let bytes = match self.store().get(&meta.location).await {
                Ok(bytes) => bytes,
                // Released since the listing.
                Err(crate::store::StoreError::NotFound { .. }) => continue,
                Err(e) => return Err(e.into()),
            };
            let lease = Lease::decode(&bytes, &format!("lease {}", meta.location))?;
            let age = (now - meta.last_modified).to_std().unwrap_or_default();
            out.push(StoredLease {
                path: meta.location,
                lease,
                age,
            });
        }
        Ok(out)
    }
}

impl LeaseHolder {
    /// Writes the lease again, naming `manifest`: renewed for
    /// [`LEASE_TTL`]. Nothing once released.
    pub async fn renew(&self, manifest: ObjectId) -> Result<(), DatasetError> {
        let released = self.released.lock().await;
        if *released {
            return Ok(());
        }
        let lease = Lease {
            reference: self.reference.clone(),
            manifest,
            writes: self.writes,
        };
        let bytes = Bytes::from(lease.encode());
        Ok(self
            .dataset
            .store()
            .put_overwrite(&self.path, bytes)
            .await?)
    }

    /// Deletes the lease: the mount is over. Waits for a renewal in
    /// flight, so none lands after.
    pub async fn release(&self) -> Result<(), DatasetError> {
        let mut released = self.released.lock().await;
        *released = true;
        Ok(self.dataset.store().delete(&self.path).await?)
    }
}
