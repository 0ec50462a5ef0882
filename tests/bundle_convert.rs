//! Conversions between datasets and DataBundles: `packfs import BUNDLE
//! DATASET`. A damaged bundle fails its import by file name and commits
//! nothing; modes and mtimes carry over.

mod common;

use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;

use common::*;
use packfs::bundle::index::Index;

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

/// Flips one bit of byte `at` of `file`.
fn flip(file: &Path, at: u64) {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(file)
        .unwrap();
    let mut byte = [0];
    f.read_exact_at(&mut byte, at).unwrap();
    f.write_all_at(&[byte[0] ^ 0x10], at).unwrap();
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
    // Directories are not imported, as from a directory.
    assert!(!mnt.path.join("train/image/empty").exists());
}
