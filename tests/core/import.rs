//! Import through the library API: packing counts, --timeline, adding to and
//! replacing in existing Tracks, and concurrent imports into one dataset.

use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use packfs_core::dataset::{Dataset, ItemSource};
use packfs_core::import::{import, ImportOptions};
use packfs_core::tree::Tree;

use crate::common::{write_file, Rng};

fn options() -> ImportOptions {
    ImportOptions::default().pack(packfs_core::packer::PackOptions::default().pack_items(10))
}

async fn tree(dataset: &Dataset) -> Tree {
    Tree::build(dataset.snapshot("main").await.unwrap()).unwrap()
}

fn data_objects(dataset: &Path, timeline: &str, modality: &str) -> usize {
    std::fs::read_dir(dataset.join(timeline).join(modality).join("0")).map_or(0, |d| d.count())
}

#[tokio::test]
async fn packs_hold_at_most_pack_items_in_sorted_order() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    let mut rng = Rng::new(1);
    for i in (0..95).rev() {
        write_file(&src.join(format!("image/{i:03}.jpg")), &rng.bytes(100 + i));
    }
    let dir = tmp.path().join("ds");
    let dataset = Dataset::open(dir.to_str().unwrap(), true).unwrap();
    let opts = options().timeline(Some("train".into()));
    let report = import(&dataset, &src, &opts).await.unwrap();
    assert_eq!(report.items, 95);
    assert_eq!(report.objects_written, 10, "⌈95/10⌉ packs");
    assert_eq!(data_objects(&dir, "train", "image"), 10);
    let snapshot = dataset.snapshot("main").await.unwrap();
    let items: Vec<_> = snapshot.tracks[0]
        .items
        .iter()
        .map(|i| i.to_item())
        .collect();
    let names: Vec<&str> = items.iter().map(|i| i.name.as_str()).collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted, "items keep sorted path order");
    // Consecutive items of one pack sit back to back in it.
    let ItemSource::Packed { offset, pack, .. } = &items[1].source else {
        panic!("packed")
    };
    let ItemSource::Packed {
        offset: first,
        pack: first_pack,
        ..
    } = &items[0].source
    else {
        panic!("packed")
    };
    assert_eq!((pack, *offset), (first_pack, first + items[0].size));
    assert_eq!(&*items[0].media_type, "image/jpeg");
}

#[tokio::test]
async fn reimport_adds_and_replaces_by_name_and_keeps_other_tracks() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ds");
    let dataset = Dataset::open(dir.to_str().unwrap(), true).unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    write_file(&a.join("train/image/x.jpg"), b"old x");
    write_file(&a.join("train/image/y.jpg"), b"y");
    write_file(&a.join("val/text/t.txt"), b"t");
    import(&dataset, &a, &options()).await.unwrap();
    write_file(&b.join("train/image/x.jpg"), b"new x");
    write_file(&b.join("train/image/z.jpg"), b"z");
    let report = import(&dataset, &b, &options()).await.unwrap();
    assert!(report.manifest.is_some());

    let t = tree(&dataset).await;
    let reader =
        packfs_core::reader::Reader::new(dataset.store().clone(), Default::default(), None);
    for (path, want) in [
        ("train/image/x.jpg", &b"new x"[..]),
        ("train/image/y.jpg", b"y"),
        ("train/image/z.jpg", b"z"),
        ("val/text/t.txt", b"t"),
    ] {
        let item = t.file_data(path).unwrap();
        assert_eq!(
            &reader.read_item(&item, 0, 100).await.unwrap()[..],
            want,
            "{path}"
        );
    }
    let history = dataset.history("main", 10).await.unwrap().manifests;
    assert_eq!(history.len(), 2);
    assert_eq!(history[0].1.parents, vec![history[1].0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_imports_into_one_dataset_both_land() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ds");
    let mut rng = Rng::new(9);
    let sources: Vec<_> = (0..4)
        .map(|w| {
            let src = tmp.path().join(format!("src{w}"));
            for i in 0..30 {
                write_file(&src.join(format!("train/mod{w}/{i}.bin")), &rng.bytes(1000));
            }
            src
        })
        .collect();
    let tasks: Vec<_> = sources
        .into_iter()
        .map(|src| {
            let dataset = Dataset::open(dir.to_str().unwrap(), true).unwrap();
            tokio::spawn(async move { import(&dataset, &src, &options()).await })
        })
        .collect();
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    let dataset = Dataset::open(dir.to_str().unwrap(), false).unwrap();
    let t = tree(&dataset).await;
    for w in 0..4 {
        for i in 0..30 {
            t.resolve_file(&format!("train/mod{w}/{i}.bin")).unwrap();
        }
    }
    assert_eq!(
        dataset.history("main", 100).await.unwrap().manifests.len(),
        4,
        "one commit per import, none lost"
    );
}

#[tokio::test]
async fn wrong_depth_and_bad_names_fail_before_writing() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    write_file(&src.join("train/image/ok.jpg"), b"ok");
    write_file(&src.join("train/stray.jpg"), b"stray");
    write_file(&src.join("_packfs_x/image/a.jpg"), b"a");
    let dir = tmp.path().join("ds");
    let dataset = Dataset::open(dir.to_str().unwrap(), true).unwrap();
    let err = import(&dataset, &src, &options())
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("stray.jpg: file at the wrong depth"), "{err}");
    assert!(err.contains("reserved"), "{err}");
    assert!(err.contains("nothing was written"), "{err}");
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        0,
        "nothing written"
    );
}

#[tokio::test]
async fn pack_items_1_writes_single_item_fragments() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    for i in 0..5 {
        write_file(
            &src.join(format!("t/m/{i}")),
            format!("item {i}").as_bytes(),
        );
    }
    let dir = tmp.path().join("ds");
    let dataset = Dataset::open(dir.to_str().unwrap(), true).unwrap();
    let mut opts = options();
    opts.pack.pack_items = 1;
    import(&dataset, &src, &opts).await.unwrap();
    let snapshot = dataset.snapshot("main").await.unwrap();
    assert!(snapshot.tracks[0]
        .items
        .iter()
        .all(|i| matches!(i.source(), ItemSource::Whole { .. })));
    assert_eq!(data_objects(&dir, "t", "m"), 5);
}

/// Packs of different files with the same bytes (zeros, sizes 1+2 and
/// 2+1) are one object that two Tracks entries would cut two ways: the
/// second pack's files become objects of their own, and every file reads
/// back.
#[tokio::test]
async fn packs_with_the_same_bytes_cut_differently_are_kept_apart() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    let sizes = [1, 2, 2, 1, 3];
    for (i, size) in sizes.iter().enumerate() {
        write_file(&src.join(format!("t/m/{i}")), &vec![0; *size]);
    }
    let dir = tmp.path().join("ds");
    let dataset = Dataset::open(dir.to_str().unwrap(), true).unwrap();
    let mut opts = options();
    opts.pack.pack_items = 2;
    import(&dataset, &src, &opts).await.unwrap();
    let t = tree(&dataset).await;
    let reader =
        packfs_core::reader::Reader::new(dataset.store().clone(), Default::default(), None);
    let mut whole = 0;
    for (i, size) in sizes.iter().enumerate() {
        let item = t.file_data(&format!("t/m/{i}")).unwrap();
        whole += usize::from(matches!(item.source, ItemSource::Whole { .. }));
        let bytes = reader.read_item(&item, 0, 100).await.unwrap();
        assert_eq!(&bytes[..], &vec![0; *size][..], "t/m/{i}");
    }
    assert_eq!(
        whole, 3,
        "files 2 and 3 on their own, and 4 (a one-item pack)"
    );
}

/// A pack that the Track being extended already holds, cut another way:
/// four files of 4 zero bytes, then (another import into the same
/// modality) files of 8, 4, 2 and 2 zero bytes, are the same 16-byte
/// object. The second import stores its files as objects of their own
/// (copied out of the pack on the store: three distinct contents) and
/// every file of both reads back.
#[tokio::test]
async fn a_pack_the_track_holds_cut_another_way_is_kept_apart_on_reimport() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    let mut want = Vec::new();
    for (i, size) in [4, 4, 4, 4].into_iter().enumerate() {
        want.push((format!("t/m/a{i}"), size));
    }
    for (i, size) in [8, 4, 2, 2].into_iter().enumerate() {
        want.push((format!("t/m/b{i}"), size));
    }
    for (name, size) in &want {
        let src = if name.starts_with("t/m/a") { &a } else { &b };
        write_file(&src.join(name), &vec![0; *size]);
    }
    let dir = tmp.path().join("ds");
    let dataset = Dataset::open(dir.to_str().unwrap(), true).unwrap();
    let mut opts = options();
    opts.pack.pack_items = 4;
    let first = import(&dataset, &a, &opts).await.unwrap();
    assert_eq!(first.objects_written, 1, "one pack");
    let second = import(&dataset, &b, &opts).await.unwrap();
    assert!(second.manifest.is_some());
    assert_eq!(
        (second.objects_written, second.objects_reused),
        (3, 1),
        "the pack is the first import's; 8, 4 and 2 zeros are new objects"
    );
    let t = tree(&dataset).await;
    let reader =
        packfs_core::reader::Reader::new(dataset.store().clone(), Default::default(), None);
    for (name, size) in &want {
        let item = t.file_data(name).unwrap();
        let whole = matches!(item.source, ItemSource::Whole { .. });
        assert_eq!(whole, name.starts_with("t/m/b"), "{name}");
        let bytes = reader.read_item(&item, 0, 100).await.unwrap();
        assert_eq!(&bytes[..], &vec![0; *size][..], "{name}");
    }
    // The second tree again (its files are the Track's last) changes
    // nothing: the same objects are found again.
    let again = import(&dataset, &b, &opts).await.unwrap();
    assert_eq!((again.manifest, again.objects_written), (None, 0));
}

#[tokio::test]
async fn unchanged_reimport_commits_nothing_and_renamed_copies_share_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    for i in 0..25 {
        write_file(
            &a.join(format!("t/m/{i:02}")),
            format!("bytes {i}").as_bytes(),
        );
        write_file(
            &b.join(format!("t/m/copy-{i:02}")),
            format!("bytes {i}").as_bytes(),
        );
    }
    let dir = tmp.path().join("ds");
    let dataset = Dataset::open(dir.to_str().unwrap(), true).unwrap();
    assert!(import(&dataset, &a, &options())
        .await
        .unwrap()
        .manifest
        .is_some());
    let again = import(&dataset, &a, &options()).await.unwrap();
    assert_eq!((again.manifest, again.objects_written), (None, 0));
    // The same bytes under other names pack into the very same objects.
    let copies = import(&dataset, &b, &options()).await.unwrap();
    assert_eq!(copies.objects_written, 0);
    let t = tree(&dataset).await;
    let reader =
        packfs_core::reader::Reader::new(dataset.store().clone(), Default::default(), None);
    for name in ["t/m/07", "t/m/copy-07"] {
        let item = t.file_data(name).unwrap();
        assert_eq!(
            &reader.read_item(&item, 0, 100).await.unwrap()[..],
            b"bytes 7"
        );
    }
}

/// The page objects of a local dataset.
fn pages(dataset: &Path) -> std::collections::BTreeSet<std::ffi::OsString> {
    let mut out = std::collections::BTreeSet::new();
    let mut pending = vec![dataset.join("_packfs/pages")];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            match entry.file_type().unwrap().is_dir() {
                true => pending.push(entry.path()),
                false => {
                    out.insert(entry.file_name());
                }
            }
        }
    }
    out
}

/// A local dataset at `dir` that cuts Tracks into pages of about 4 rows,
/// and lists them through index pages past 8.
fn small_pages(dir: &Path) -> Dataset {
    let shape = packfs_format::PageShape::with_rows(4).with_index_pages(4);
    Dataset::open(dir.to_str().unwrap(), true)
        .unwrap()
        .with_page_shape(shape)
}

/// Copies the tree `from` over the tree `to`.
fn copy_over(from: &Path, to: &Path) {
    let status = std::process::Command::new("cp")
        .args(["-r", "-T"])
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(status.success());
}

/// An import onto a modality whose Track spans many pages edits it: it
/// stores the pages its new names fall in (with a new directory's row)
/// and a root, not the Track; every file, old and new, reads back.
#[tokio::test]
async fn an_import_onto_a_paged_track_stores_only_the_pages_it_changes() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ds");
    let dataset = small_pages(&dir);
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    let mut rng = Rng::new(3);
    for i in 0..300 {
        let path = format!("train/image/d{:02}/f{i:03}.jpg", i % 10);
        write_file(&a.join(path), &rng.bytes(20 + i % 30));
    }
    import(&dataset, &a, &options()).await.unwrap();
    let before = pages(&dir);
    assert!(before.len() >= 80, "{} pages", before.len());
    write_file(
        &b.join("train/image/d03/new.jpg"),
        b"new in an old directory",
    );
    write_file(
        &b.join("train/image/fresh/x.jpg"),
        b"new in a new directory",
    );
    write_file(&b.join("train/image/d07/f007.jpg"), b"replaced");
    let report = import(&dataset, &b, &options()).await.unwrap();
    assert!(report.manifest.is_some());
    let written: Vec<_> = pages(&dir).difference(&before).cloned().collect();
    assert!(
        (1..=12).contains(&written.len()),
        "{} pages written of {}",
        written.len(),
        before.len()
    );

    let t = tree(&dataset).await;
    let reader =
        packfs_core::reader::Reader::new(dataset.store().clone(), Default::default(), None);
    for (path, want) in [
        ("train/image/d03/new.jpg", &b"new in an old directory"[..]),
        ("train/image/fresh/x.jpg", b"new in a new directory"),
        ("train/image/d07/f007.jpg", b"replaced"),
    ] {
        let item = t.file_data(path).unwrap();
        assert_eq!(
            &reader.read_item(&item, 0, 100).await.unwrap()[..],
            want,
            "{path}"
        );
    }
    let listing = t.resolve("train/image/d05").unwrap();
    assert!(t.is_dir(listing));
    let report = packfs_core::verify::verify(&dataset, "main").await.unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(report.items, 302);
    // The same files again change nothing.
    let again = import(&dataset, &b, &options()).await.unwrap();
    assert!(
        again.manifest.is_none(),
        "an unchanged import commits nothing"
    );
}

/// An import that loses its compare-and-swap rebases onto the ref as it
/// is then, reading back only the pages holding its new items, not its
/// Track: over a Track of many pages, a lost CAS costs a few GETs more
/// than a won one (the edit done again), and every new file lands.
#[tokio::test]
async fn an_import_that_loses_its_ref_rereads_only_its_pages() {
    use std::sync::atomic::Ordering;
    use std::sync::Arc;

    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    let mut rng = Rng::new(5);
    for i in 0..400 {
        let path = format!("train/image/d{:02}/f{i:03}.jpg", i % 10);
        write_file(&a.join(path), &rng.bytes(20 + i % 30));
    }
    write_file(&b.join("train/image/d04/new.jpg"), b"new");
    write_file(&b.join("train/image/zz/other.jpg"), b"other");
    let mut gets = Vec::new();
    for lose in [0, 1] {
        let faults = Arc::new(packfs_core::store::faults::Faults::default());
        let memory = Arc::new(object_store::memory::InMemory::new());
        let store = packfs_core::store::faults::FaultyStore::new(memory, faults.clone());
        let store = packfs_core::store::Store::from_object_store(
            Arc::new(store),
            Default::default(),
            "memory://rebase",
        );
        let shape = packfs_format::PageShape::with_rows(4).with_index_pages(4);
        let dataset = Dataset::from_store(store).with_page_shape(shape);
        import(&dataset, &a, &options()).await.unwrap();
        faults.lose_next_cas.store(lose, Ordering::SeqCst);
        let before = faults.metadata_gets.load(Ordering::SeqCst);
        import(&dataset, &b, &options()).await.unwrap();
        gets.push(faults.metadata_gets.load(Ordering::SeqCst) - before);
        assert_eq!(
            faults.lose_next_cas.load(Ordering::SeqCst),
            0,
            "the CAS was lost"
        );
        let t = tree(&dataset).await;
        assert_eq!(t.item_count(), 402);
        for path in ["train/image/d04/new.jpg", "train/image/zz/other.jpg"] {
            assert!(t.file_data(path).is_ok(), "{path}");
        }
    }
    // The rebase redoes the edit (a handful of pages) and rereads the
    // pages of the new items; the Track has over 100 name pages.
    let pages = 400 / 4;
    assert!(
        gets[1] < gets[0] + pages / 3,
        "{} GETs with a lost CAS, {} without, over a Track of ~{pages} pages",
        gets[1],
        gets[0]
    );
}

/// Reads every file of `src` (laid out as `<timeline>/<modality>/…`)
/// back from the dataset's `main` and compares the bytes; returns how
/// many there are.
async fn assert_holds(dataset: &Dataset, src: &Path) -> usize {
    let t = tree(dataset).await;
    let reader =
        packfs_core::reader::Reader::new(dataset.store().clone(), Default::default(), None);
    let mut pending = vec![src.to_path_buf()];
    let mut files = 0;
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
                continue;
            }
            let name = path.strip_prefix(src).unwrap().to_str().unwrap();
            let item = t.file_data(name).unwrap_or_else(|e| panic!("{name}: {e}"));
            let want = std::fs::read(&path).unwrap();
            let got = reader.read_item(&item, 0, want.len() as u64 + 1).await;
            assert_eq!(got.unwrap(), want, "{name}");
            files += 1;
        }
    }
    files
}

/// Every directory of the source becomes one of its Track, an empty one
/// too; importing the same tree again commits nothing.
#[tokio::test]
async fn directories_are_imported_empty_ones_too() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    write_file(&src.join("t/m/a/x.bin"), b"x");
    for dir in ["t/m/empty", "t/m/a/deeper/still", "t/m/a-b"] {
        std::fs::create_dir_all(src.join(dir)).unwrap();
    }
    let dir = tmp.path().join("ds");
    let dataset = Dataset::open(dir.to_str().unwrap(), true).unwrap();
    import(&dataset, &src, &options()).await.unwrap();
    let t = tree(&dataset).await;
    for dir in ["t/m/empty", "t/m/a/deeper", "t/m/a/deeper/still", "t/m/a-b"] {
        let id = t.resolve(dir).unwrap_or_else(|e| panic!("{dir}: {e}"));
        assert!(t.is_dir(id), "{dir}");
    }
    let again = import(&dataset, &src, &options()).await.unwrap();
    assert_eq!((again.manifest, again.objects_written), (None, 0));
}

/// An import onto a Track of many pages adds its files in batches (with
/// small pages, a batch is 64 rows): each batch an edit of the Track as
/// the one before left it, a pack never split between two. Every file,
/// old and new, reads back, `verify` finds nothing wrong, and the same
/// import again commits nothing.
#[tokio::test]
async fn an_import_onto_a_track_adds_its_files_in_batches() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ds");
    let dataset = small_pages(&dir);
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    let mut rng = Rng::new(11);
    for i in 0..200 {
        let path = format!("t/m/d{:02}/f{i:03}", i % 7);
        write_file(&a.join(path), &rng.bytes(10 + i % 40));
    }
    import(&dataset, &a, &options()).await.unwrap();
    // Interleaved with the old names, replacing some, in new directories.
    for i in 0..300 {
        let path = match i % 3 {
            0 => format!("t/m/d{:02}/f{:03}", i % 7, i / 3),
            1 => format!("t/m/d{:02}/g{i:03}", i % 7),
            _ => format!("t/m/new{:02}/h{i:03}", i % 5),
        };
        write_file(&b.join(path), &rng.bytes(5 + i % 50));
    }
    let report = import(&dataset, &b, &options()).await.unwrap();
    assert_eq!(report.items, 300);
    // The tree of `a`, with `b`'s files over it, is what `main` holds.
    let both = tmp.path().join("both");
    copy_over(&a, &both);
    copy_over(&b, &both);
    let files = assert_holds(&dataset, &both).await;
    assert!(files > 400, "{files} files, some replaced");
    assert_eq!(tree(&dataset).await.item_count() as usize, files);
    let report = packfs_core::verify::verify(&dataset, "main").await.unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    // The same files again, batch by batch, change nothing: a file equal
    // to the item of its name leaves it as it is, number included.
    let again = import(&dataset, &b, &options()).await.unwrap();
    assert_eq!((again.manifest, again.objects_written), (None, 0));
}

/// Reports nothing, but when the import ends its uploads runs `then`
/// once: another writer moving the ref before the import commits.
struct ThenAtEnd(std::sync::Mutex<Option<Box<dyn FnOnce() + Send>>>);

impl packfs_core::progress::Progress for ThenAtEnd {
    fn begin(&self, _: &str, _: packfs_core::progress::Unit, _: Option<u64>) {}
    fn advance(&self, _: u64) {}
    fn end(&self) {
        if let Some(then) = self.0.lock().unwrap().take() {
            then();
        }
    }
}

/// An import whose modality another import changed between its read of
/// the ref and its commit adds its files again onto that Track, a batch
/// at a time, read back from the pages of the Track it had stored: both
/// imports' files land, and neither's replaces the other's but by name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_import_rebases_onto_a_track_another_writer_changed() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ds");
    let open = || small_pages(&dir);
    let (base, ours, theirs) = (
        tmp.path().join("base"),
        tmp.path().join("ours"),
        tmp.path().join("theirs"),
    );
    let mut rng = Rng::new(12);
    for i in 0..100 {
        write_file(
            &base.join(format!("t/m/d{}/b{i:03}", i % 4)),
            &rng.bytes(30),
        );
    }
    for i in 0..150 {
        write_file(
            &ours.join(format!("t/m/d{}/o{i:03}", i % 5)),
            &rng.bytes(20),
        );
        write_file(
            &theirs.join(format!("t/m/d{}/t{i:03}", i % 3)),
            &rng.bytes(25),
        );
    }
    write_file(&ours.join("t/m/d0/b000"), b"ours");
    write_file(&theirs.join("t/other/x"), b"their other modality");
    import(&open(), &base, &options()).await.unwrap();

    let their_dataset = open();
    let their_src = theirs.clone();
    let handle = tokio::runtime::Handle::current();
    let theirs_then = move || {
        std::thread::scope(|s| {
            s.spawn(|| {
                handle
                    .block_on(import(&their_dataset, &their_src, &options()))
                    .unwrap()
            });
        });
    };
    let progress = ThenAtEnd(std::sync::Mutex::new(Some(Box::new(theirs_then))));
    let dataset = open();
    let prepared = packfs_core::import::prepare_source(
        ours.to_str().unwrap(),
        &options(),
        &Default::default(),
        &tmp.path().join("index"),
    )
    .await
    .unwrap();
    let report = packfs_core::import::import_files(&dataset, prepared, &options(), &progress)
        .await
        .unwrap();
    assert!(report.manifest.is_some());
    assert!(progress.0.lock().unwrap().is_none(), "the other import ran");
    let history = dataset.history("main", 10).await.unwrap().manifests;
    assert_eq!(history.len(), 3, "base, theirs, ours rebased onto theirs");

    let all = tmp.path().join("all");
    for src in [&base, &theirs, &ours] {
        copy_over(src, &all);
    }
    let files = assert_holds(&dataset, &all).await;
    assert_eq!(files, 100 + 150 + 150 + 1);
    assert_eq!(tree(&dataset).await.item_count() as usize, files);
    let report = packfs_core::verify::verify(&dataset, "main").await.unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}

/// A source that changes between the check and the packing fails the
/// import, naming what changed, and commits nothing.
#[tokio::test]
async fn a_source_that_changes_after_its_check_commits_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    for i in 0..20 {
        write_file(&src.join(format!("t/m/f{i:02}")), b"bytes");
    }
    let dir = tmp.path().join("ds");
    let dataset = Dataset::open(dir.to_str().unwrap(), true).unwrap();
    let prepared = packfs_core::import::prepare_source(
        src.to_str().unwrap(),
        &options(),
        &Default::default(),
        &tmp.path().join("index"),
    )
    .await
    .unwrap();
    // A name that is not UTF-8 cannot be imported.
    let bad = std::ffi::OsStr::from_bytes(b"f10-loop\xff");
    std::fs::write(src.join("t/m").join(bad), b"x").unwrap();
    let err = packfs_core::import::import_files(
        &dataset,
        prepared,
        &options(),
        &packfs_core::progress::Quiet,
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(err.contains("f10-loop"), "{err}");
    assert!(err.contains("changed"), "{err}");
    assert!(err.contains("nothing was committed"), "{err}");
    assert!(dataset.store().read_ref("main").await.unwrap().is_none());
}

/// Symbolic links (to files, to directories, dangling, absolute) are
/// imported as links, never followed, and FIFOs as FIFOs; a link whose
/// target changes is imported again.
#[tokio::test]
async fn links_and_fifos_are_imported_as_what_they_are() {
    use packfs_format::Special;
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    write_file(&src.join("t/m/d/f"), b"data");
    let m = src.join("t/m");
    for (target, link) in [("d/f", "rel"), ("d", "dirlink"), ("/nowhere", "abs")] {
        std::os::unix::fs::symlink(target, m.join(link)).unwrap();
    }
    let fifo = std::ffi::CString::new(m.join("fifo").to_str().unwrap()).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o640) }, 0);
    let dir = tmp.path().join("ds");
    let dataset = Dataset::open(dir.to_str().unwrap(), true).unwrap();
    let report = import(&dataset, &src, &options()).await.unwrap();
    assert_eq!(report.items, 5);
    let tree = tree(&dataset).await;
    let item = |path: &str| tree.item(tree.resolve_file(path).unwrap()).unwrap();
    for (link, target) in [
        ("t/m/rel", "d/f"),
        ("t/m/dirlink", "d"),
        ("t/m/abs", "/nowhere"),
    ] {
        assert_eq!(item(link).special(), Some(Special::Symlink), "{link}");
        assert_eq!(item(link).size(), target.len() as u64, "{link}");
    }
    assert_eq!(item("t/m/fifo").special(), Some(Special::Fifo));
    assert_eq!(item("t/m/d/f").special(), None);
    let location = dir.to_str().unwrap().to_string();
    // Files runs a runtime of its own: from a thread outside this one.
    let target = std::thread::spawn(move || {
        let main = packfs_core::files::Files::open(&location)
            .unwrap()
            .at("main")
            .unwrap();
        main.open("t/m/dirlink").unwrap().read_all().unwrap()
    });
    assert_eq!(
        &target.join().unwrap()[..],
        b"d",
        "a link's bytes are its target"
    );

    std::fs::remove_file(m.join("rel")).unwrap();
    std::os::unix::fs::symlink("d/other", m.join("rel")).unwrap();
    import(&dataset, &src, &options()).await.unwrap();
    let tree = self::tree(&dataset).await;
    let rel = tree.item(tree.resolve_file("t/m/rel").unwrap()).unwrap();
    assert_eq!(rel.size(), 7);
}

/// Names of one file (hard links) are imported as items of the bytes
/// stored once: one upload, every name reading them.
#[tokio::test]
async fn hard_links_are_stored_once() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    let big = vec![7u8; 100_000];
    write_file(&src.join("t/m/a.bin"), &big);
    let m = src.join("t/m");
    std::fs::create_dir(m.join("d")).unwrap();
    std::fs::hard_link(m.join("a.bin"), m.join("b.jpg")).unwrap();
    std::fs::hard_link(m.join("a.bin"), m.join("d/c.bin")).unwrap();
    write_file(&src.join("t/m/other"), b"other");
    let dir = tmp.path().join("ds");
    let dataset = Dataset::open(dir.to_str().unwrap(), true).unwrap();
    let report = import(&dataset, &src, &options()).await.unwrap();
    assert_eq!(report.items, 4);
    let snapshot = dataset.snapshot("main").await.unwrap();
    let items = &snapshot.tracks[0].items;
    let source = |name: &str| {
        let item = items.iter().find(|i| i.name() == name).unwrap();
        format!("{:?}", item.source())
    };
    assert_eq!(source("a.bin"), source("b.jpg"));
    assert_eq!(source("a.bin"), source("d/c.bin"));
    let stored: u64 = walk_sizes(&dir.join("t/m"));
    assert!(
        stored < 2 * big.len() as u64,
        "the linked bytes are stored once: {stored} bytes of data objects"
    );
    let media = |name: &str| {
        items
            .iter()
            .find(|i| i.name() == name)
            .unwrap()
            .media_type()
            .to_string()
    };
    assert_eq!(media("b.jpg"), "image/jpeg", "each name's own media type");
    let report = packfs_core::verify::verify(&dataset, "main").await.unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    // Imported again, unchanged: nothing is committed.
    let again = import(&dataset, &src, &options()).await.unwrap();
    assert_eq!(again.objects_written, 0);
}

/// The bytes of every file below `dir`.
fn walk_sizes(dir: &Path) -> u64 {
    std::fs::read_dir(dir).map_or(0, |entries| {
        entries
            .map(|e| e.unwrap())
            .map(|e| match e.file_type().unwrap().is_dir() {
                true => walk_sizes(&e.path()),
                false => e.metadata().unwrap().len(),
            })
            .sum()
    })
}
