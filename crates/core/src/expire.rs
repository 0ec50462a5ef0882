//! `packfs expire`: cuts the history down to what the user keeps, so that
//! `packfs gc` can delete what only the rest named.
//!
//! Manifests are immutable and name their parents, so nothing is
//! rewritten: expire stores a record of the parent links it cuts
//! ([`packfs_format::ExpiryRecord`]), which every walk of history follows
//! ([`crate::dataset::Cuts`]). What no kept Manifest reaches becomes
//! unreachable, and gc deletes it once it is older than gc's grace. No
//! live data is rewritten: a pack a kept Manifest names stays whole.
//!
//! Kept, for every ref: its newest `last` Manifests along first parents,
//! and every Manifest of its history younger than `within`. Kept besides,
//! whatever they keep:
//!
//! - what a merge needs: each Manifest where the histories of refs (and of
//!   writing mounts) part, and every Manifest between it and them, so a
//!   later merge of any of them finds the same common ancestor;
//! - each fresh lease's Manifest ([`crate::dataset::LEASE_TTL`]): a
//!   read-only mount's Manifest, and for a writing mount also the history
//!   from it to its ref, so its next commit can merge;
//!
//! and, from the kept Manifests, every link to a kept parent. A Manifest
//! younger than [`MIN_KEEP_WITHIN`] is always kept: a writer may be about
//! to commit onto it.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::time::Duration;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;
use packfs_format::{ExpiryRecord, ObjectId};
use thiserror::Error;

use crate::dataset::{Dataset, DatasetError, LEASE_TTL, METADATA_CONCURRENCY};
use crate::progress::{Progress, Quiet, Unit};
use crate::store::{StoreError, REFRESH_AGE, UNSAFE_GRACE_ENV};

/// The shortest `within` `packfs expire` accepts: a writer reuses what is
/// up to [`REFRESH_AGE`] old without looking again, and a mount renews its
/// lease more often than that.
pub const MIN_KEEP_WITHIN: Duration = REFRESH_AGE;

/// How much history to keep.
#[derive(Clone, Copy, Debug)]
pub struct KeepRules {
    /// Newest Manifests kept along each ref's first parents (at least 1:
    /// the ref's own).
    pub last: usize,
    /// Manifests younger than this are kept.
    pub within: Duration,
}

#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ExpireError {
    #[error("{0}")]
    Dataset(#[from] DatasetError),
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error(
        "keeping {within:?} of history is too little: writers commit onto Manifests up to \
         {MIN_KEEP_WITHIN:?} old, so expire keeps at least that ({UNSAFE_GRACE_ENV}=1 overrides \
         this for a store nobody writes to)"
    )]
    KeepTooShort { within: Duration },
    #[error("the history has a cycle through manifest {0}: the store is damaged")]
    Cycle(ObjectId),
}

/// What expire found (and, unless a dry run, did).
#[derive(Debug, Default)]
pub struct ExpireReport {
    pub refs: usize,
    /// Fresh leases of mounts, whose Manifests were kept.
    pub leases: usize,
    /// Manifests of the history before this expiry.
    pub manifests: usize,
    /// Those kept.
    pub kept: usize,
    /// Those cut off, with their commit times (ns since the Unix epoch),
    /// newest first.
    pub expired: Vec<(ObjectId, u64)>,
    /// Parent links cut, with those of earlier expiries still needed.
    pub cut_links: usize,
    /// The expiry record stored (`None` for a dry run, or when nothing
    /// changed).
    pub record: Option<ObjectId>,
    /// Leases not renewed for [`LEASE_TTL`], deleted (listed by a dry
    /// run).
    pub stale_leases: Vec<Path>,
}

/// Fails unless `within` is at least [`MIN_KEEP_WITHIN`] or
/// [`UNSAFE_GRACE_ENV`] is `1`. `packfs expire` checks its rules with
/// this; [`expire`] takes any (tests use none on stores nobody writes to).
pub fn check_keep_within(within: Duration) -> Result<(), ExpireError> {
    if within < MIN_KEEP_WITHIN && !crate::store::floors_lifted() {
        return Err(ExpireError::KeepTooShort { within });
    }
    Ok(())
}

/// A Manifest of the history, as the walk found it.
struct Node {
    id: ObjectId,
    /// Its parents, but those cut before.
    parents: Vec<usize>,
    /// Its first parent, unless that link was cut.
    first: Option<usize>,
    children: Vec<usize>,
    ts_unix_ns: u64,
}

/// Expires the history of `dataset` down to `rules` (see the module docs)
/// and, unless `dry_run`, stores the record of its cuts and deletes stale
/// leases.
pub async fn expire(
    dataset: &Dataset,
    rules: KeepRules,
    dry_run: bool,
) -> Result<ExpireReport, ExpireError> {
    expire_with(dataset, rules, dry_run, &Quiet).await
}

/// [`expire`], counting the Manifests walked on `progress`.
pub async fn expire_with(
    dataset: &Dataset,
    rules: KeepRules,
    dry_run: bool,
    progress: &dyn Progress,
) -> Result<ExpireReport, ExpireError> {
    let store = dataset.store();
    let cuts = dataset.cuts().await?;
    let mut report = ExpireReport::default();

    // Roots: refs, and the leases of mounts.
    let mut heads = Vec::new();
    for name in store.ref_names().await? {
        if let Some(id) = store.read_ref(&name).await? {
            heads.push(id);
        }
    }
    report.refs = heads.len();
    let (mut writing, mut reading) = (Vec::new(), Vec::new());
    for held in dataset.leases().await? {
        match held.age < LEASE_TTL {
            true if held.lease.writes => writing.push(held.lease.manifest),
            true => reading.push(held.lease.manifest),
            false => report.stale_leases.push(held.path),
        }
    }
    report.leases = writing.len() + reading.len();

    progress.begin("walking the history", Unit::Objects, None);
    let nodes = walk(
        dataset,
        &cuts,
        heads.iter().chain(&writing).chain(&reading),
        progress,
    )
    .await?;
    progress.end();
    report.manifests = nodes.len();
    let index: HashMap<ObjectId, usize> =
        nodes.iter().enumerate().map(|(i, n)| (n.id, i)).collect();

    // Which of the refs and writing mounts each Manifest is in the
    // history of: where two of them part is a common ancestor a merge
    // looks for.
    let roots: Vec<usize> = heads.iter().chain(&writing).map(|id| index[id]).collect();
    let bits = histories_of(&nodes, &roots)?;
    let mut seeds: Vec<usize> = roots.clone();
    for &head in &heads {
        let mut at = Some(index[&head]);
        for _ in 0..rules.last {
            let Some(i) = at else { break };
            seeds.push(i);
            at = nodes[i].first;
        }
    }
    let now = chrono::Utc::now().timestamp_nanos_opt().unwrap_or(i64::MAX) as u64;
    let within = rules.within.as_nanos().min(u128::from(u64::MAX)) as u64;
    for (i, node) in nodes.iter().enumerate() {
        let young = now.saturating_sub(node.ts_unix_ns) < within;
        let parting =
            !node.children.is_empty() && node.children.iter().all(|&c| bits[c] != bits[i]);
        if young || parting {
            seeds.push(i);
        }
    }
    // Kept: the seeds and everything between them and the roots; and the
    // Manifests of read-only mounts, alone.
    let mut kept = vec![false; nodes.len()];
    let mut queue: VecDeque<usize> = seeds.into_iter().collect();
    while let Some(i) = queue.pop_front() {
        if !std::mem::replace(&mut kept[i], true) {
            queue.extend(nodes[i].children.iter().copied());
        }
    }
    for id in &reading {
        kept[index[id]] = true;
    }
    report.kept = kept.iter().filter(|&&k| k).count();
    report.expired = nodes
        .iter()
        .zip(&kept)
        .filter(|(_, &k)| !k)
        .map(|(n, _)| (n.id, n.ts_unix_ns))
        .collect();
    report
        .expired
        .sort_by_key(|&(id, ts)| (std::cmp::Reverse(ts), id));

    let mut links: BTreeSet<(ObjectId, ObjectId)> = cuts
        .links()
        .filter(|(child, _)| index.get(child).is_some_and(|&i| kept[i]))
        .copied()
        .collect();
    for (_, node) in nodes.iter().enumerate().filter(|(i, _)| kept[*i]) {
        for &p in node.parents.iter().filter(|&&p| !kept[p]) {
            links.insert((node.id, nodes[p].id));
        }
    }
    report.cut_links = links.len();
    if dry_run {
        return Ok(report);
    }
    let record = ExpiryRecord { cuts: links };
    let bytes = record.encode();
    let id = ObjectId::of(&bytes);
    let path = store.layout().expiry(&id);
    let unchanged = cuts.records == [path.clone()];
    if !unchanged && !record.cuts.is_empty() {
        store.put_immutable(&path, Bytes::from(bytes)).await?;
        report.record = Some(id);
    }
    // The new record holds every cut still needed: the older ones go.
    for old in cuts
        .records
        .iter()
        .filter(|&p| *p != path || record.cuts.is_empty())
    {
        store.delete(old).await?;
    }
    for lease in &report.stale_leases {
        store.delete(lease).await?;
    }
    Ok(report)
}

/// Every Manifest reachable from `roots` along the links `cuts` leaves,
/// fetched a wave at a time.
async fn walk(
    dataset: &Dataset,
    cuts: &crate::dataset::Cuts,
    roots: impl Iterator<Item = &ObjectId>,
    progress: &dyn Progress,
) -> Result<Vec<Node>, ExpireError> {
    let mut found: HashMap<ObjectId, (Vec<ObjectId>, Option<ObjectId>, u64)> = HashMap::new();
    let mut wave: Vec<ObjectId> = roots.copied().collect::<HashSet<_>>().into_iter().collect();
    while !wave.is_empty() {
        let fetched: Vec<(ObjectId, packfs_format::Manifest)> = futures::stream::iter(&wave)
            .map(|id| async move {
                let manifest = dataset.manifest(id, "the history").await?;
                Ok::<_, DatasetError>((*id, manifest))
            })
            .buffer_unordered(METADATA_CONCURRENCY)
            .try_collect()
            .await?;
        progress.advance(fetched.len() as u64);
        let mut next = HashSet::new();
        for (id, manifest) in fetched {
            let parents = cuts.parents(&id, &manifest);
            let first = manifest
                .parents
                .first()
                .filter(|p| !cuts.is_cut(&id, p))
                .copied();
            next.extend(parents.iter().filter(|p| !found.contains_key(*p)).copied());
            found.insert(id, (parents, first, manifest.ts_unix_ns));
        }
        next.retain(|id| !found.contains_key(id));
        wave = next.into_iter().collect();
    }
    let ids: Vec<ObjectId> = found.keys().copied().collect();
    let index: HashMap<ObjectId, usize> = ids.iter().enumerate().map(|(i, id)| (*id, i)).collect();
    let mut nodes: Vec<Node> = ids
        .iter()
        .map(|id| {
            let (parents, first, ts_unix_ns) = &found[id];
            Node {
                id: *id,
                parents: parents.iter().map(|p| index[p]).collect(),
                first: first.map(|p| index[&p]),
                children: Vec::new(),
                ts_unix_ns: *ts_unix_ns,
            }
        })
        .collect();
    for i in 0..nodes.len() {
        for p in nodes[i].parents.clone() {
            nodes[p].children.push(i);
        }
    }
    Ok(nodes)
}

/// For each Manifest, the set of `roots` whose history holds it, as a
/// bit set: each root's bit, passed from children to parents.
fn histories_of(nodes: &[Node], roots: &[usize]) -> Result<Vec<Vec<u64>>, ExpireError> {
    let words = roots.len().div_ceil(64).max(1);
    let mut bits = vec![vec![0u64; words]; nodes.len()];
    for (r, &i) in roots.iter().enumerate() {
        bits[i][r / 64] |= 1 << (r % 64);
    }
    let mut waiting: Vec<usize> = nodes.iter().map(|n| n.children.len()).collect();
    let mut ready: Vec<usize> = (0..nodes.len()).filter(|&i| waiting[i] == 0).collect();
    let mut done = 0;
    while let Some(i) = ready.pop() {
        done += 1;
        for &p in &nodes[i].parents {
            let (from, to) = if i < p {
                let (a, b) = bits.split_at_mut(p);
                (&a[i], &mut b[0])
            } else {
                let (a, b) = bits.split_at_mut(i);
                (&b[0], &mut a[p])
            };
            to.iter_mut().zip(from).for_each(|(t, f)| *t |= f);
            waiting[p] -= 1;
            if waiting[p] == 0 {
                ready.push(p);
            }
        }
    }
    match waiting.iter().position(|&w| w > 0) {
        Some(i) if done < nodes.len() => Err(ExpireError::Cycle(nodes[i].id)),
        _ => Ok(bits),
    }
}
