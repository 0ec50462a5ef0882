//! Paged Tracks through the library: what a commit stores (counted), and
//! datasets whose Tracks are single objects read and committed onto.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use futures::TryStreamExt;
use object_store::path::Path;
use object_store::ObjectStore;
use packfs_core::cache::CacheOptions;
use packfs_core::reader::Reader;
use packfs_core::verify::verify;
use packfs_format::{Manifest, ObjectId, TrackRoot};
use packfs_fs::write::WriteOptions;

use crate::common::bench::Bench;
use crate::common::Rng;

/// `dirs` directories of `per_dir` small files each, below `t/m`.
fn many_small_files(dirs: usize, per_dir: usize) -> Bench {
    let mut rng = Rng::new(7);
    let files: Vec<(String, Vec<u8>)> = (0..dirs * per_dir)
        .map(|i| {
            let name = format!("t/m/d{:02}/f{:03}", i / per_dir, i % per_dir);
            (name, rng.bytes(10 + i % 50))
        })
        .collect();
    let refs: Vec<(&str, Vec<u8>)> = files.iter().map(|(p, b)| (p.as_str(), b.clone())).collect();
    Bench::new(&refs)
}

/// The objects under `_packfs/<dir>/`, with their sizes.
fn stored(bench: &Bench, dir: &str) -> BTreeMap<String, u64> {
    let prefix = Path::from(format!("_packfs/{dir}"));
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let listed: Vec<_> = bench
            .memory
            .list(Some(&prefix))
            .try_collect()
            .await
            .unwrap();
        listed
            .into_iter()
            .map(|m| (m.location.to_string(), m.size))
            .collect()
    })
}

/// A one-file commit into a Track of many pages stores that file's pack,
/// the pages on its path (its name page, its pack's pack page) and a new
/// root, Manifest and ref: nothing that grows with the Track.
#[test]
fn a_one_file_commit_stores_only_the_pages_on_its_path() {
    let bench = many_small_files(12, 50);
    let before = stored(&bench, "pages");
    let before_bytes: u64 = before.values().sum();
    assert!(before.len() >= 100, "{} pages", before.len());
    let options = WriteOptions::default().idle_flush(std::time::Duration::from_secs(3600));
    let core = bench.mount_with(2, options);
    let (puts, data_puts) = (
        bench.faults.puts.load(Ordering::SeqCst),
        bench.faults.data_puts.load(Ordering::SeqCst),
    );
    let fh = core.create_open("t/m/d05", "new", b"one new file");
    let ino = core.path("t/m/d05/new").unwrap();
    core.block_on(core.fs().fsync(Some(ino))).unwrap();
    core.close(fh);
    let data = bench.faults.data_puts.load(Ordering::SeqCst) - data_puts;
    let metadata = bench.faults.puts.load(Ordering::SeqCst) - puts - data;
    core.unmount();

    let after = stored(&bench, "pages");
    let new: Vec<(&String, &u64)> = after
        .iter()
        .filter(|(p, _)| !before.contains_key(*p))
        .collect();
    let new_bytes: u64 = new.iter().map(|(_, &n)| n).sum();
    assert_eq!(data, 1, "the new file's pack");
    assert!(
        (1..=4).contains(&new.len()),
        "{} new pages of {}: {new:?}",
        new.len(),
        before.len()
    );
    assert!(
        new_bytes * 20 < before_bytes,
        "{new_bytes} bytes of pages written for one file, against {before_bytes} in all"
    );
    assert_eq!(
        metadata,
        new.len() as u64 + 3,
        "the new pages, then the root, the Manifest and the ref"
    );
    assert_eq!(
        bench.committed("t/m/d05/new").as_deref(),
        Some(&b"one new file"[..])
    );
    let report = core_verify(&bench);
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(report.items, 12 * 50 + 1);
}

/// The index pages of the Track of `t/m` at `revision`.
fn index_pages(bench: &Bench, revision: &str) -> u64 {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let dataset = &bench.dataset;
        let resolved = dataset
            .resolve_revision(&revision.parse().unwrap())
            .await
            .unwrap();
        let manifest = dataset.manifest(&resolved.id, revision).await.unwrap();
        let track = manifest.tracks.iter().find(|t| t.modality == "m").unwrap();
        let store = dataset.store();
        let bytes = store
            .get(&store.layout().track(&track.track))
            .await
            .unwrap();
        TrackRoot::decode(&bytes, "root").unwrap().index.len() as u64
    })
}

fn core_verify(bench: &Bench) -> packfs_core::verify::VerifyReport {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime
        .block_on(verify(&bench.dataset, "main"))
        .expect("verify runs")
}

/// A dataset written before Tracks were paged (each Track one object)
/// mounts and reads unchanged; a commit onto it writes the paged form,
/// and every file, old and new, reads back.
#[test]
fn a_single_object_track_reads_and_a_commit_onto_it_pages_it() {
    let bench = many_small_files(3, 20);
    let expected = bench.mount_read_only().files().unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    // The same Manifest, its Tracks rewritten as single objects.
    runtime.block_on(async {
        let dataset = &bench.dataset;
        let store = dataset.store();
        let id = dataset.resolve("main").await.unwrap();
        let mut manifest: Manifest = dataset.manifest(&id, "main").await.unwrap();
        for t in &mut manifest.tracks {
            let single = dataset.track(&t.track, "main").await.unwrap().encode();
            t.track = ObjectId::of(&single);
            store
                .put_immutable(&store.layout().track(&t.track), single.into())
                .await
                .unwrap();
        }
        manifest.parents = vec![id];
        let bytes = manifest.encode();
        let new = ObjectId::of(&bytes);
        store
            .put_immutable(&store.layout().manifest(&new), bytes.into())
            .await
            .unwrap();
        store.update_ref("main", Some(id), new).await.unwrap();
        let track = dataset.track(&manifest.tracks[0].track, "t").await.unwrap();
        assert_eq!(track.items().len(), 60);
    });
    let pages_before = stored(&bench, "pages");
    assert_eq!(bench.mount_read_only().files().unwrap(), expected);

    let core = bench.mount();
    let fh = core.create_open("t/m/d01", "added", b"added to a single-object track");
    core.close(fh);
    core.block_on(core.fs().fsync(None)).unwrap();
    core.unmount();
    let mut expected = expected;
    expected.insert(
        "t/m/d01/added".into(),
        b"added to a single-object track".to_vec(),
    );
    assert_eq!(bench.mount_read_only().files().unwrap(), expected);
    let new_pages = stored(&bench, "pages").len() - pages_before.len();
    assert!(new_pages > 0, "the commit wrote the paged form");
    let report = core_verify(&bench);
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}

/// `packfs diff` of two revisions of a many-page Track fetches the pages
/// that differ, not the Track: a handful of GETs for one file. Items it
/// must read to tell (same size, stored elsewhere) find their packs'
/// lengths on the pack pages.
#[test]
fn a_diff_fetches_only_the_pages_that_differ() {
    let bench = many_small_files(12, 50);
    let pages = stored(&bench, "pages").len();
    let core = bench.mount();
    let fh = core.create_open("t/m/d05", "new", b"one new file");
    core.close(fh);
    core.block_on(core.fs().fsync(None)).unwrap();
    // Same size, other bytes; then the same bytes again.
    let f = core.path("t/m/d03/f010").unwrap();
    let old = core.read_all(f);
    let mut other = old.clone();
    other[0] ^= 0xff;
    for bytes in [&other, &other] {
        let fh = core.open(f, true);
        core.block_on(core.fs().write(fh, 0, bytes)).unwrap();
        core.close(fh);
        core.block_on(core.fs().fsync(None)).unwrap();
    }
    core.unmount();

    let runtime = tokio::runtime::Runtime::new().unwrap();
    let diff = |from: &str, to: &str| {
        let gets = bench.faults.gets.load(Ordering::SeqCst);
        let report = runtime.block_on(async {
            let dataset = &bench.dataset;
            let from = dataset.resolve_revision(&from.parse().unwrap()).await?;
            let to = dataset.resolve_revision(&to.parse().unwrap()).await?;
            let reader = Reader::new(dataset.store().clone(), CacheOptions::default(), None);
            packfs_core::diff::diff(dataset, &from, &to, &reader)
                .await
                .map_err(|e| packfs_core::dataset::DatasetError::Merge(e.to_string()))
        });
        let report = report.unwrap();
        let got: Vec<String> = report
            .differences
            .iter()
            .map(|d| format!("{} {}", d.change.marker(), d.path))
            .collect();
        (got, bench.faults.gets.load(Ordering::SeqCst) - gets)
    };
    // Three commits: the new file, the changed bytes, the same bytes again.
    let (added, gets) = diff("main~3", "main~2");
    assert_eq!(added, ["+ /t/m/d05/new"]);
    // The refs and the Manifests along the history (6), the two Manifests
    // compared, their Tracks' roots, and the index pages and name pages
    // that differ (one to three of each a side): none of the others.
    let index = index_pages(&bench, "main~3") + index_pages(&bench, "main~2");
    assert!(
        index > 12,
        "the Tracks list their pages through index pages"
    );
    assert!(
        gets <= 22,
        "{gets} GETs for a one-file diff of {pages} pages ({index} index pages)"
    );
    let (modified, _) = diff("main~2", "main~1");
    assert_eq!(modified, ["M /t/m/d03/f010"]);
    // Read on both sides and found equal: only its mtime moved.
    let (rewritten, _) = diff("main~1", "main");
    assert_eq!(rewritten, ["T /t/m/d03/f010"]);
    let (both, _) = diff("main~3", "main");
    assert_eq!(both, ["M /t/m/d03/f010", "+ /t/m/d05/new"]);
}
