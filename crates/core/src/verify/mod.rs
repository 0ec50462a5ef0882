//! `packfs verify`: checks that a revision names a complete, uncorrupted
//! dataset.
//!
//! Checked: the Manifest, every Track and every ItemManifest decode and obey
//! the format's rules (names, pack invariants, chunk sizes, the sizes of
//! symbolic links and other items that are no regular files); the tree has no
//! path used twice; every object exists, hashes to its name, and data
//! objects have exactly the length their entries require.

pub mod array;
pub mod bundle;

use std::collections::BTreeMap;

use futures::StreamExt;
use object_store::path::Path;
use packfs_format::{ObjectId, Special, SYMLINK_MAX};

use crate::dataset::{check_hash, Dataset, DatasetError, ItemSource};
use crate::progress::{Progress, Quiet, Unit};
use crate::store::StoreError;
use crate::tree::Tree;

/// Objects hashed at once.
const CONCURRENCY: usize = 16;

/// What verification found.
#[derive(Debug, Default)]
pub struct VerifyReport {
    pub manifest: Option<ObjectId>,
    pub items: usize,
    pub objects: usize,
    pub bytes: u64,
    /// Each problem found, naming the object and what is wrong. Empty: pass.
    pub problems: Vec<String>,
}

/// Verifies the Manifest `revision` names (see [`crate::dataset::Revision`]).
pub async fn verify(dataset: &Dataset, revision: &str) -> Result<VerifyReport, DatasetError> {
    verify_with(dataset, revision, &Quiet).await
}

/// [`verify`], reporting the objects checked to `progress` (a large
/// dataset takes a while).
pub async fn verify_with(
    dataset: &Dataset,
    revision: &str,
    progress: &dyn Progress,
) -> Result<VerifyReport, DatasetError> {
    let mut report = VerifyReport::default();
    progress.begin("loading the Manifest and its Tracks", Unit::Objects, None);
    let resolved = dataset.resolve_revision(&revision.parse()?).await?;
    let id = resolved.id;
    report.manifest = Some(id);
    let snapshot = match dataset.snapshot_at(id, &resolved.describe()).await {
        Ok(s) => s,
        Err(e) => {
            report.problems.push(e.to_string());
            return Ok(report);
        }
    };
    let layout = dataset.store().layout();
    // Every object, with the length it must have when that is known.
    let mut objects: BTreeMap<String, (Path, Option<u64>)> = BTreeMap::new();
    let mut want = |path: &Path, len: Option<u64>| {
        objects.insert(path.to_string(), (path.clone(), len));
    };
    want(&layout.manifest(&id), None);
    for (entry, track) in snapshot.manifest.tracks.iter().zip(&snapshot.tracks) {
        want(&layout.track(&entry.track), None);
        track.pages.iter().for_each(|p| want(&layout.page(p), None));
        report.items += track.items.len();
        for item in track.items.iter() {
            let path = || format!("{}/{}/{}", entry.timeline, entry.modality, item.name());
            report
                .problems
                .extend(special_problem(path, item.media_type(), item.size()));
            match &item.source() {
                ItemSource::Whole { object } => want(object, Some(item.size())),
                ItemSource::Packed { pack, pack_len, .. } => want(pack, Some(*pack_len)),
                ItemSource::Chunked { chunks } => {
                    chunks.iter().for_each(|c| want(&c.object, Some(c.size)))
                }
            }
        }
        // ItemManifests are named only by the Track's entries.
        for (manifest, _) in track.items.chunked() {
            want(
                &layout.data_object(&entry.timeline, &entry.modality, &manifest),
                None,
            );
        }
    }
    if let Err(e) = Tree::build(snapshot) {
        report.problems.push(e.to_string());
    }
    report.objects = objects.len();
    progress.begin("hashed", Unit::Objects, Some(objects.len() as u64));
    let results: Vec<(u64, Option<String>)> = futures::stream::iter(objects.into_values())
        .map(|(path, len)| async move { check_object(dataset, &path, len).await })
        .buffer_unordered(CONCURRENCY)
        .inspect(|_| progress.advance(1))
        .collect()
        .await;
    progress.end();
    for (bytes, problem) in results {
        report.bytes += bytes;
        report.problems.extend(problem);
    }
    Ok(report)
}

/// What is wrong with an item whose media type says it is no regular file
/// (`inode/…`), if anything: a kind packfs does not know, or bytes its
/// kind cannot have. `path` names the item.
fn special_problem(path: impl Fn() -> String, media_type: &str, size: u64) -> Option<String> {
    if !media_type.starts_with("inode/") {
        return None;
    }
    match Special::of_media_type(media_type) {
        None => Some(format!(
            "{}: media type {media_type:?} is no kind of file packfs knows (inode/symlink, \
             inode/fifo, inode/socket, inode/chardevice; rdev=N, inode/blockdevice; rdev=N)",
            path()
        )),
        Some(Special::Symlink) if size == 0 || size > SYMLINK_MAX => Some(format!(
            "{}: a symbolic link of {size} bytes (a target has 1 to {SYMLINK_MAX})",
            path()
        )),
        Some(Special::Symlink) => None,
        Some(_) if size > 0 => Some(format!(
            "{}: an item of media type {media_type:?} holds {size} bytes (it has none)",
            path()
        )),
        Some(_) => None,
    }
}

/// Hashes one object; returns its size and the problem, if any.
async fn check_object(
    dataset: &Dataset,
    path: &Path,
    expected_len: Option<u64>,
) -> (u64, Option<String>) {
    let hashed = dataset
        .store()
        .fold_chunks(path, blake3::Hasher::new, |hasher, chunk| {
            hasher.update(chunk);
        })
        .await;
    let (hasher, size) = match hashed {
        Ok(hashed) => hashed,
        Err(StoreError::NotFound { .. }) => return (0, Some(format!("{path}: missing"))),
        Err(e) => return (0, Some(e.to_string())),
    };
    if let Some(expected) = expected_len.filter(|&e| e != size) {
        return (
            size,
            Some(format!("{path}: object is {size} bytes long, but the dataset's entries say it must be {expected}")),
        );
    }
    let actual = ObjectId::from_hasher(&hasher);
    match path.filename().map(ObjectId::from_hex) {
        Some(Ok(named)) => (
            size,
            check_hash(path, &named, actual)
                .err()
                .map(|e| e.to_string()),
        ),
        _ => (
            size,
            Some(format!("{path}: not named by a content address")),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_that_are_no_regular_files_have_the_bytes_their_kind_allows() {
        let problem = |media_type: &str, size| special_problem(|| "t/m/x".into(), media_type, size);
        assert_eq!(problem("image/jpeg", 10), None);
        assert_eq!(problem("inode/symlink", 7), None);
        assert_eq!(problem("inode/fifo", 0), None);
        assert_eq!(problem("inode/chardevice; rdev=1025", 0), None);
        let said = |media_type, size, needle: &str| {
            let p = problem(media_type, size).unwrap_or_default();
            assert!(p.starts_with("t/m/x: ") && p.contains(needle), "{p}");
        };
        said("inode/symlink", 0, "symbolic link of 0 bytes");
        said("inode/symlink", 4096, "symbolic link of 4096 bytes");
        said("inode/socket", 3, "holds 3 bytes");
        said("inode/chardevice", 0, "no kind of file packfs knows");
        said("inode/directory", 0, "no kind of file packfs knows");
    }
}
