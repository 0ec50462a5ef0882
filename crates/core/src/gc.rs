//! `packfs gc`: deletes objects no ref can reach.
//!
//! Reachable: every Manifest in the history of every ref and of every
//! fresh lease (all parents, but the links `packfs expire` cut), the
//! Tracks they list and their pages, and every data object those Tracks
//! name — packs and whole objects of live and retired entries,
//! ItemManifests and their chunks. What gc frees is what no kept history
//! names: the uploads of imports or flushes that never committed, objects
//! of branches whose ref is gone, and what only expired Manifests named.
//! An unreachable object younger
//! than the grace period is kept: a writer may have uploaded it and not
//! moved its ref yet.
//!
//! The walk reads each page once however many Tracks list it (a commit
//! rewrites a few pages of a Track and keeps the rest), so its cost is the
//! pages the history holds, not every Track of it whole.
//!
//! Writers race with gc in one more way: content addressing lets a writer
//! reuse an object that is already stored instead of uploading it (a
//! dedupe hit), and that object may be an old abandoned upload, unreachable
//! and past the grace. Two rules keep a commit from naming an object gc
//! deletes:
//!
//! - A writer's dedupe hit on an object older than
//!   `REFRESH_AGE` (1 h) uploads it again
//!   ([`crate::store::Store::put_immutable`]), so everything a writer is
//!   about to commit is younger than an hour, and `packfs gc` refuses a
//!   grace under `MIN_GRACE` (2 h): the writer has an hour or more to
//!   commit.
//! - gc works in two phases ([`plan`], then [`GcPlan::delete`]). Before
//!   deleting, it reads every ref again and walks whatever is new, so a
//!   commit that landed since the plan keeps what it names; then, just
//!   before each DELETE, it reads the victim's last-modified again and
//!   spares it if it became young (a writer refreshed it).
//!
//! What is left is the time between that last HEAD and the DELETE of one
//! object (one request): a writer that refreshes exactly that object in
//! that window, and commits, names a deleted object. object_store has no
//! conditional delete to close it. After its deletions gc reads the refs
//! once more and fails naming any deleted object a commit now names (one
//! landing later still needs `packfs verify` to be seen); re-running the
//! writer, e.g. the same import, uploads the object again.

use std::collections::{HashSet, VecDeque};
use std::time::Duration;

use object_store::path::Path;
use packfs_format::{FragmentEntry, ObjectId, Placement};
use thiserror::Error;

use crate::dataset::{Cuts, Dataset, DatasetError, TrackObject, LEASE_TTL};
use crate::progress::{Progress, Quiet, Unit};
use crate::store::{ObjectKind, StoreError, REFRESH_AGE};

/// The shortest grace gc accepts: twice [`REFRESH_AGE`], so that an object
/// a writer reused or refreshed stays at least an hour from deletion.
pub(crate) const MIN_GRACE: Duration = Duration::from_secs(2 * 3600);

pub use crate::store::UNSAFE_GRACE_ENV;

const _: () = assert!(MIN_GRACE.as_secs() >= 2 * REFRESH_AGE.as_secs());

/// Why gc stopped before deleting anything, or what went wrong.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum GcError {
    #[error("{0}")]
    Dataset(#[from] DatasetError),
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error(
        "a grace of {grace:?} is too short: writers reuse stored objects up to {REFRESH_AGE:?} \
         old without uploading them, so gc needs a grace of at least {MIN_GRACE:?} \
         ({UNSAFE_GRACE_ENV}=1 overrides this for a store nobody writes to)"
    )]
    GraceTooShort { grace: Duration },
    #[error(
        "a commit landed while gc ran and names objects gc had just deleted: {}; \
         re-run the writer that made it (an import uploads missing objects again)",
        .paths.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(", ")
    )]
    DeletedWhileCommitted { paths: Vec<Path> },
}

/// What gc found (and, unless a dry run, deleted).
#[derive(Debug, Default)]
pub struct GcReport {
    pub refs: usize,
    pub manifests_kept: usize,
    pub objects_kept: usize,
    /// Unreachable objects old enough to go: deleted unless a dry run.
    pub unreachable: Vec<(Path, u64)>,
    /// Unreachable objects kept for being younger than the grace period.
    pub too_young: usize,
    /// Chosen to go, but kept at the delete phase: a commit made since
    /// named them, or a writer refreshed them.
    pub spared: usize,
}

/// Everything the refs reach, built up by walking Manifests.
#[derive(Default)]
struct Reach {
    manifests: HashSet<ObjectId>,
    tracks: HashSet<ObjectId>,
    /// Pages of the Tracks walked: each is read once, however many Tracks
    /// name it.
    pages: HashSet<ObjectId>,
    keep: HashSet<Path>,
    /// Parent links `packfs expire` cut, read when gc starts: not walked.
    cuts: Cuts,
}

impl Reach {
    /// Walks from every ref's Manifest and every fresh lease's, along the
    /// parent links expiry left, skipping Manifests walked already
    /// (immutable, so what they reach is known). Returns how many refs
    /// there are.
    async fn walk_refs(&mut self, dataset: &Dataset) -> Result<usize, GcError> {
        let store = dataset.store();
        let refs = store.ref_names().await?;
        let mut queue: VecDeque<(ObjectId, String)> = VecDeque::new();
        for name in &refs {
            if let Some(id) = store.read_ref(name).await? {
                queue.push_back((id, format!("ref {name:?}")));
            }
        }
        for held in dataset.leases().await? {
            if held.age < LEASE_TTL {
                queue.push_back((held.lease.manifest, format!("lease {}", held.path)));
            }
        }
        while let Some((id, referrer)) = queue.pop_front() {
            if !self.manifests.insert(id) {
                continue;
            }
            let manifest = dataset.manifest(&id, &referrer).await?;
            self.keep.insert(store.layout().manifest(&id));
            for t in &manifest.tracks {
                if self.tracks.insert(t.track) {
                    self.walk_track(dataset, &id, t).await?;
                }
            }
            for parent in self.cuts.parents(&id, &manifest) {
                queue.push_back((parent, format!("manifest {id}")));
            }
        }
        let layout = store.layout();
        self.keep
            .extend(self.pages.iter().map(|page| layout.page(page)));
        Ok(refs.len())
    }

    async fn walk_track(
        &mut self,
        dataset: &Dataset,
        manifest: &ObjectId,
        t: &packfs_format::TrackEntry,
    ) -> Result<(), GcError> {
        let layout = dataset.store().layout();
        self.keep.insert(layout.track(&t.track));
        let referrer = format!("manifest {manifest}");
        let (keep, seen) = (&mut self.keep, &mut self.pages);
        let mut chunked = Vec::new();
        let mut reach = |e: &FragmentEntry| {
            let object = layout.data_object(&t.timeline, &t.modality, &e.address);
            if keep.insert(object) && e.placement == Placement::Chunked {
                chunked.push(e.address);
            }
        };
        match dataset.track_object_unindexed(&t.track, &referrer).await? {
            TrackObject::Single(bytes) => {
                let track = dataset.decode_single(&t.track, bytes).await?;
                let items = track.items().iter().map(|i| &i.entry);
                items.chain(track.retired()).for_each(&mut reach);
            }
            TrackObject::Paged(root) => {
                // Its pages join `seen`, kept once the walk is over.
                dataset
                    .unseen_entries(&t.track, root, seen, &mut reach)
                    .await?;
            }
        }
        let referrer = format!("track {}", t.track);
        for address in chunked {
            let im = dataset
                .item_manifest(&t.timeline, &t.modality, &address, &referrer)
                .await?;
            for c in &im.chunks {
                self.keep
                    .insert(layout.data_object(&t.timeline, &t.modality, &c.address));
            }
        }
        Ok(())
    }
}

/// What gc would delete, and what it knows is reachable.
pub struct GcPlan<'a> {
    dataset: &'a Dataset,
    grace: chrono::Duration,
    reach: Reach,
    report: GcReport,
}

/// Fails unless `grace` is at least `MIN_GRACE` or [`UNSAFE_GRACE_ENV`]
/// is `1`. `packfs gc` checks the grace it is given with this; [`gc`] and [`plan`]
/// take any grace (tests use short ones on stores no writer uses).
pub fn check_grace(grace: Duration) -> Result<(), GcError> {
    if grace < MIN_GRACE && !crate::store::floors_lifted() {
        return Err(GcError::GraceTooShort { grace });
    }
    Ok(())
}

/// Finds what no ref reaches and, unless `dry_run`, deletes what is older
/// than `grace` (which should be at least `MIN_GRACE`: see
/// [`check_grace`]). Any missing or undecodable Manifest, Track or ItemManifest
/// in the history stops gc before it deletes anything.
pub async fn gc(dataset: &Dataset, grace: Duration, dry_run: bool) -> Result<GcReport, GcError> {
    gc_with(dataset, grace, dry_run, &Quiet).await
}

/// [`gc`], telling `progress` what it is doing and counting deletions (a
/// large store takes a while to list and walk).
pub async fn gc_with(
    dataset: &Dataset,
    grace: Duration,
    dry_run: bool,
    progress: &dyn Progress,
) -> Result<GcReport, GcError> {
    progress.begin(
        "listing objects and walking the history of every ref",
        Unit::Objects,
        None,
    );
    let plan = plan(dataset, grace).await?;
    if dry_run {
        progress.end();
        return Ok(plan.report);
    }
    let unreachable = plan.report.unreachable.len() as u64;
    progress.begin("deleting", Unit::Objects, Some(unreachable));
    let deleted = plan.delete_with(progress).await;
    progress.end();
    deleted
}

/// The first phase of [`gc`]: walks every ref's history and lists the
/// unreachable objects older than `grace` (the report's `unreachable`).
/// Deletes nothing.
pub async fn plan(dataset: &Dataset, grace: Duration) -> Result<GcPlan<'_>, GcError> {
    let store = dataset.store();
    let layout = store.layout();
    let mut report = GcReport::default();
    let mut reach = Reach {
        cuts: dataset.cuts().await?,
        ..Reach::default()
    };
    report.refs = reach.walk_refs(dataset).await?;
    report.manifests_kept = reach.manifests.len();

    let now = chrono::Utc::now();
    let grace = chrono::Duration::from_std(grace).unwrap_or(chrono::Duration::MAX);
    for meta in store.list_all().await? {
        if layout.classify(&meta.location) == ObjectKind::Other {
            continue; // refs, locks, foreign files: never gc's to delete
        }
        if reach.keep.contains(&meta.location) {
            report.objects_kept += 1;
        } else if now - meta.last_modified < grace {
            report.too_young += 1;
        } else {
            report.unreachable.push((meta.location, meta.size));
        }
    }
    report.unreachable.sort();
    Ok(GcPlan {
        dataset,
        grace,
        reach,
        report,
    })
}

impl GcPlan<'_> {
    /// What the plan found: `unreachable` is what [`GcPlan::delete`] may
    /// delete.
    pub fn report(&self) -> &GcReport {
        &self.report
    }

    /// The second phase of [`gc`]: reads every ref again and walks what is
    /// new, then deletes each planned object that is still unreachable and
    /// still older than the grace by a HEAD just before its DELETE. The
    /// report's `unreachable` becomes what was deleted; `spared` counts the
    /// rest.
    pub async fn delete(self) -> Result<GcReport, GcError> {
        self.delete_with(&Quiet).await
    }

    /// [`GcPlan::delete`], counting planned objects on `progress`.
    pub(crate) async fn delete_with(
        mut self,
        progress: &dyn Progress,
    ) -> Result<GcReport, GcError> {
        let store = self.dataset.store();
        self.reach.walk_refs(self.dataset).await?;
        let planned = std::mem::take(&mut self.report.unreachable);
        let mut deleted = Vec::with_capacity(planned.len());
        for (path, size) in planned {
            progress.advance(1);
            let old = !self.reach.keep.contains(&path)
                && match store.head(&path).await? {
                    Some(meta) => chrono::Utc::now() - meta.last_modified >= self.grace,
                    None => continue, // gone already
                };
            if !old {
                self.report.spared += 1;
                continue;
            }
            store.delete(&path).await?;
            deleted.push((path, size));
        }
        // A commit that refreshed a victim between its HEAD and its DELETE
        // cannot be prevented, but it is found and reported.
        let was_deleted = |missing: &str| deleted.iter().any(|(p, _)| p.as_ref() == missing);
        match self.reach.walk_refs(self.dataset).await {
            Err(GcError::Dataset(DatasetError::Missing { path, .. })) if was_deleted(&path) => {
                return Err(GcError::DeletedWhileCommitted {
                    paths: vec![Path::from(path)],
                })
            }
            walked => walked?,
        };
        let lost: Vec<Path> = deleted
            .iter()
            .filter(|(path, _)| self.reach.keep.contains(path))
            .map(|(path, _)| path.clone())
            .collect();
        if !lost.is_empty() {
            return Err(GcError::DeletedWhileCommitted { paths: lost });
        }
        self.report.unreachable = deleted;
        self.report.manifests_kept = self.reach.manifests.len();
        Ok(self.report)
    }
}
