//! Conversions between datasets and DataBundles: `packfs import BUNDLE
//! DATASET` and `packfs bundle create DATASET[/path] BUNDLE`. A tree goes
//! directory → dataset → bundle → dataset and comes back whole at every
//! step (through the kernel); a subtree becomes a bundle; a damaged bundle
//! fails its import by file name and commits nothing; modes and mtimes
//! carry over; S3 on either side.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use packfs_core::bundle::index::Index;

use crate::common;
use crate::common::*;

/// SRC/<timeline>/<modality>/<path…>: 2,000+ files from empty to several
/// MiB, files over 1 MiB, files of zeros, non-ASCII names, nested
/// directories. Returns the number of files.
fn generate_tree(src: &Path) -> usize {
    let mut rng = Rng::new(21);
    let mut n = 0;
    for (timeline, modality) in [("train", "image"), ("train", "text"), ("val", "image")] {
        for d in 0..7 {
            for i in 0..100 {
                let len = match i % 25 {
                    2 => 200_000 + rng.below(100_000) as usize,
                    _ => rng.below(20_000) as usize,
                };
                let bytes = match i % 25 {
                    0 => Vec::new(),
                    1 => vec![0; len],
                    _ => rng.bytes(len),
                };
                let path = format!("{timeline}/{modality}/d{d}/f{i:03}.bin");
                write_file(&src.join(path), &bytes);
                n += 1;
            }
        }
    }
    write_file(
        &src.join("train/blob/big.bin"),
        &rng.bytes(3 * (1 << 20) + 12_345),
    );
    write_file(
        &src.join("train/blob/zeros.bin"),
        &vec![0; 2 * (1 << 20) + 5],
    );
    write_file(&src.join("train/text/ñ/日本語 # 1.txt"), b"non-ascii");
    write_file(&src.join("val/image/a/b/c/ünï çödé.bin"), &rng.bytes(1000));
    n + 4
}

/// `got` has exactly the paths of `want`, and the same bytes in each file.
fn same_tree(what: &str, got: &BTreeMap<String, FsNode>, want: &BTreeMap<String, FsNode>) {
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        want.keys().collect::<Vec<_>>(),
        "{what}: listing"
    );
    for (rel, node) in want {
        assert!(got[rel].bytes == node.bytes, "{what}: {rel} differs");
    }
}

fn s(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// `packfs bundle create SRC BUNDLE --no-progress EXTRA…`.
fn bundle_create(src: &str, bundle: &Path, extra: &[&str]) {
    let mut args = vec!["bundle", "create", src, s(bundle), "--no-progress"];
    args.extend_from_slice(extra);
    packfs_ok(&args);
}

/// The Manifest `ref` of the local dataset `ds` points at.
fn ref_of(ds: &Path, name: &str) -> Vec<u8> {
    std::fs::read(ds.join("_packfs/refs").join(name)).unwrap()
}

#[test]
fn a_tree_round_trips_through_a_dataset_a_bundle_and_a_second_dataset() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    assert!(generate_tree(&src) >= 2000);
    let want = fs_snapshot(&src);
    let (ds1, ds2) = (tmp.path().join("ds1"), tmp.path().join("ds2"));
    let bundle = tmp.path().join("bundle");

    // Chunks of 1 MiB: the big files are chunked items on both sides, and
    // the second import reads and checks a file in several parts.
    import(
        &src,
        &ds1,
        &["--pack-items", "100", "--chunk-bytes", "1MiB"],
    );
    bundle_create(s(&ds1), &bundle, &["--shards", "3"]);
    let out = packfs_ok(&[
        "import",
        s(&bundle),
        s(&ds2),
        "--no-progress",
        "--chunk-bytes",
        "1MiB",
        "--concurrency",
        "8",
    ]);
    let summary = String::from_utf8_lossy(&out.stderr);
    assert!(
        summary.contains(&format!(
            "imported {} files",
            want.values().filter(|n| n.bytes.is_some()).count()
        )),
        "{summary}"
    );
    packfs_ok(&["verify", s(&bundle)]);
    packfs_ok(&["verify", s(&ds2)]);

    let first = Mounted::new(&ds1, &tmp.path().join("mnt1"), &[]);
    let from_dataset = fs_snapshot(&first.path);
    same_tree("dataset", &from_dataset, &want);
    drop(first);
    let mnt = Mounted::new(&bundle, &tmp.path().join("mnt-bundle"), &[]);
    let from_bundle = fs_snapshot(&mnt.path);
    same_tree("bundle of the dataset", &from_bundle, &want);
    drop(mnt);
    let second = Mounted::new(&ds2, &tmp.path().join("mnt2"), &[]);
    let from_second = fs_snapshot(&second.path);
    same_tree("dataset of the bundle", &from_second, &want);
    drop(second);

    // The bundle records what a read-write mount of the first dataset
    // shows (it recorded no modes: the defaults; no mtimes: its commit's
    // time), and the second dataset keeps the bundle's modes and mtimes.
    for (rel, node) in &from_bundle {
        let expected_mode = if node.bytes.is_some() { 0o644 } else { 0o755 };
        assert_eq!(node.mode, expected_mode, "{rel}");
        if node.bytes.is_some() {
            assert_eq!(node.mtime, from_dataset[rel].mtime, "{rel}");
            assert_eq!(
                (from_second[rel].mode, from_second[rel].mtime),
                (node.mode, node.mtime),
                "{rel}"
            );
        }
    }

    // A subtree: `DATASET/train/image` and `DATASET/val` (with --ref).
    for (path, extra) in [("train/image", &[][..]), ("val", &["--ref", "main"][..])] {
        let sub = tmp
            .path()
            .join(format!("bundle-{}", path.replace('/', "-")));
        bundle_create(s(&ds1.join(path)), &sub, extra);
        let mnt = Mounted::new(
            &sub,
            &tmp.path().join(format!("mnt-{}", path.replace('/', "-"))),
            &[],
        );
        same_tree(path, &fs_snapshot(&mnt.path), &fs_snapshot(&src.join(path)));
    }
    let nowhere = tmp.path().join("nowhere");
    failed_with(
        &packfs(&[
            "bundle",
            "create",
            s(&ds1.join("train/nope")),
            s(&nowhere),
            "--no-progress",
        ]),
        &["/train/nope: no such file or directory", s(&ds1)],
    );
    failed_with(
        &packfs(&[
            "bundle",
            "create",
            s(&ds1.join("train/blob/big.bin")),
            s(&nowhere),
        ]),
        &["/train/blob/big.bin: not a directory"],
    );
    failed_with(
        &packfs(&["bundle", "create", s(&ds1), s(&nowhere), "--ref", "nope"]),
        &["ref \"nope\" does not exist"],
    );
    assert!(!nowhere.exists(), "a failed bundle create left a directory");
}

/// A small tree in SRC/t/m/…, as a bundle of `compression`.
fn small_bundle(dir: &Path, compression: &str) -> std::path::PathBuf {
    let src = dir.join(format!("src-{compression}"));
    let mut rng = Rng::new(3);
    for i in 0..30 {
        write_file(&src.join(format!("t/m/{i:02}")), &rng.bytes(20_000));
    }
    write_file(&src.join("t/m/big"), &rng.bytes(2 << 20));
    let bundle = dir.join(format!("bundle-{compression}"));
    bundle_create(
        s(&src),
        &bundle,
        &["--shards", "1", "--compression", compression],
    );
    bundle
}

/// `packfs import BUNDLE DS` fails with `needle` in its message, says
/// nothing was committed, and the ref stays at `committed`.
fn import_fails(bundle: &Path, ds: &Path, needle: &str, committed: &[u8]) {
    let out = packfs(&["import", s(bundle), s(ds), "--no-progress"]);
    failed_with(&out, &[needle, "nothing was committed"]);
    assert_eq!(ref_of(ds, "main"), committed, "the ref moved");
}

#[test]
fn a_damaged_bundle_fails_its_import_naming_a_file_and_commits_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("ds");
    let before = tmp.path().join("before");
    write_file(&before.join("t/m/old"), b"committed before");
    import(&before, &ds, &[]);
    let committed = ref_of(&ds, "main");

    // zstd: the record no longer decodes.
    let bundle = small_bundle(tmp.path(), "zstd");
    let index = Index::open(&bundle.join("index/bundle.sqlite")).unwrap();
    let record = &index.records(0).unwrap()[0];
    flip(
        &bundle.join("shard-00000000"),
        record.meta.compressed_offset + record.meta.compressed_size / 2,
    );
    import_fails(
        &bundle,
        &ds,
        &format!("{}/t/m/", bundle.display()),
        &committed,
    );

    // none: the bytes read, but not those the index's CRC32C describes.
    let bundle = small_bundle(tmp.path(), "none");
    let index = Index::open(&bundle.join("index/bundle.sqlite")).unwrap();
    let entry = index.lookup("t/m", "07").unwrap().unwrap();
    let header = index.config().block_size;
    flip(
        &bundle.join("shard-00000000"),
        header + entry.meta.shard_offset + 100,
    );
    let needle = format!("{}/t/m/07: CRC32C of its bytes is", bundle.display());
    import_fails(&bundle, &ds, &needle, &committed);
    packfs_ok(&["verify", s(&ds)]);
}

#[test]
fn a_bundles_modes_mtimes_and_layout_carry_over_as_a_directorys_would() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    // SRC/<modality>/…, imported with --timeline.
    let src = tmp.path().join("src");
    write_file(&src.join("image/a/x.jpg"), b"x");
    write_file(&src.join("image/y.jpg"), b"yy");
    std::fs::create_dir_all(src.join("image/empty")).unwrap();
    let secret = src.join("image/a/x.jpg");
    std::fs::set_permissions(&secret, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let mtime = std::time::UNIX_EPOCH + std::time::Duration::new(1_600_000_000, 123_456_789);
    std::fs::File::options()
        .write(true)
        .open(&secret)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    let bundle = tmp.path().join("bundle");
    bundle_create(s(&src), &bundle, &[]);

    // Without --timeline the layout is wrong: refused like a directory's,
    // by path, before anything is written.
    let ds = tmp.path().join("ds");
    failed_with(
        &packfs(&["import", s(&bundle), s(&ds), "--no-progress"]),
        &[
            &format!("{}/image/y.jpg: file at the wrong depth", bundle.display()),
            "nothing was written",
        ],
    );
    assert!(!ds.exists(), "a refused import created the dataset");

    import(&bundle, &ds, &["--timeline", "train"]);
    let mnt = Mounted::new(&ds, &tmp.path().join("mnt"), &[]);
    let x = std::fs::metadata(mnt.path.join("train/image/a/x.jpg")).unwrap();
    assert_eq!(x.mode() & 0o7777, 0o600);
    assert_eq!((x.mtime(), x.mtime_nsec()), (1_600_000_000, 123_456_789));
    assert_eq!(
        std::fs::read(mnt.path.join("train/image/y.jpg")).unwrap(),
        b"yy"
    );
    // Directories carry over, an empty one too, as from a directory.
    assert!(mnt.path.join("train/image/empty").is_dir());
}

#[test]
fn bundles_and_datasets_on_s3_convert_both_ways() {
    require_fuse();
    let s3 = common::s3::S3::get();
    let bucket = s3.bucket();
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    let mut rng = Rng::new(8);
    for i in 0..150 {
        let len = rng.below(30_000) as usize;
        write_file(&src.join(format!("t/m/d{}/{i:03}", i % 4)), &rng.bytes(len));
    }
    write_file(&src.join("t/big/b"), &rng.bytes(3 << 20));
    let want = fs_snapshot(&src);

    // A bundle on S3 into a local dataset.
    let bundle_url = format!("s3://{bucket}/bundles/b");
    s3.packfs_ok(&[
        "bundle",
        "create",
        s(&src),
        &bundle_url,
        "--no-progress",
        "--shards",
        "2",
    ]);
    let ds = tmp.path().join("ds");
    s3.packfs_ok(&["import", &bundle_url, s(&ds), "--no-progress"]);
    let mnt = Mounted::new(&ds, &tmp.path().join("mnt"), &[]);
    same_tree(
        "local dataset of an S3 bundle",
        &fs_snapshot(&mnt.path),
        &want,
    );
    drop(mnt);

    // A subtree of a dataset on S3 into a local bundle.
    let ds_url = format!("s3://{bucket}/ds");
    s3.packfs_ok(&["import", s(&src), &ds_url, "--no-progress"]);
    let bundle = tmp.path().join("bundle");
    s3.packfs_ok(&[
        "bundle",
        "create",
        &format!("{ds_url}/t/m"),
        s(&bundle),
        "--no-progress",
    ]);
    let mnt = Mounted::new(&bundle, &tmp.path().join("mnt-bundle"), &[]);
    same_tree(
        "bundle of an S3 dataset",
        &fs_snapshot(&mnt.path),
        &fs_snapshot(&src.join("t/m")),
    );
    drop(mnt);

    // An S3 prefix with neither is refused by name.
    let empty = format!("s3://{bucket}/nothing");
    failed_with(
        &s3.packfs(&["import", &empty, s(&tmp.path().join("ds2"))]),
        &[&empty, "holds no DataBundle"],
    );
    failed_with(
        &s3.packfs(&["bundle", "create", &empty, s(&tmp.path().join("b2"))]),
        &[&empty, "no dataset"],
    );
}
