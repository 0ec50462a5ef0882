//! TileDB arrays through the kernel: arrays written by TileDB itself (the
//! Python `tiledb` package, tests/tiledb_arrays.py), mounted, and compared
//! file by file with what TileDB reads of them — cells of var-sized
//! attributes, `.raw` columns of fixed-size ones, as of the latest write
//! and as of earlier timestamps. Damage fails only the files it touches.

use std::collections::BTreeMap;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common;
use crate::common::*;

/// The Python with `tiledb` that `.ci/run` installs.
fn python() -> PathBuf {
    required_program(
        "PACKFS_TILEDB_PYTHON",
        ".ci-venv-tiledb/bin/python",
        "the Python `tiledb` package writes the arrays these tests mount",
    )
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tiledb_arrays.py")
}

/// `python tiledb_arrays.py ARGS…`, which must succeed.
fn tiledb(args: &[&str]) {
    let out = Command::new(python())
        .arg(script())
        .args(args)
        .output()
        .expect("run python");
    succeeded(&format!("tiledb_arrays.py {args:?}"), out);
}

/// Writes array `kind` at `dir`.
fn write_array(kind: &str, dir: &Path) {
    tiledb(&["write", kind, dir.to_str().unwrap()]);
}

/// What TileDB reads of `array` (at `at`), as files under `out`.
fn dump(array: &Path, out: &Path, at: Option<u64>) {
    let at = at.map(|t| t.to_string());
    let mut args = vec!["dump", array.to_str().unwrap(), out.to_str().unwrap()];
    args.extend(at.as_deref());
    tiledb(&args);
}

/// Every file under `root` but the control directory: relative path →
/// bytes (directories as `path/`, empty).
fn tree(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let (dirs, files) = walk(root);
    let control = |rel: &Path| rel.starts_with(".packfs");
    let dirs = dirs
        .into_iter()
        .filter(|(rel, _)| !rel.as_os_str().is_empty() && !control(rel))
        .map(|(rel, _)| (format!("{}/", rel.display()), Vec::new()));
    let files = files.into_iter().filter(|rel| !control(rel)).map(|rel| {
        (
            rel.display().to_string(),
            std::fs::read(root.join(&rel)).unwrap(),
        )
    });
    dirs.chain(files).collect()
}

/// Asserts that two trees are equal, naming the first difference.
fn assert_same_tree(mounted: &BTreeMap<String, Vec<u8>>, expected: &BTreeMap<String, Vec<u8>>) {
    let names = |t: &BTreeMap<String, Vec<u8>>| t.keys().cloned().collect::<Vec<_>>();
    if names(mounted) != names(expected) {
        let only_mounted: Vec<_> = mounted
            .keys()
            .filter(|k| !expected.contains_key(*k))
            .take(5)
            .collect();
        let only_expected: Vec<_> = expected
            .keys()
            .filter(|k| !mounted.contains_key(*k))
            .take(5)
            .collect();
        panic!("listings differ: only mounted {only_mounted:?}, only in TileDB's read {only_expected:?}");
    }
    for (name, bytes) in expected {
        let got = &mounted[name];
        assert!(
            got == bytes,
            "{name}: {} bytes mounted, {} from TileDB; first difference at {:?}",
            got.len(),
            bytes.len(),
            got.iter().zip(bytes).position(|(a, b)| a != b)
        );
    }
}

/// Mounts `array` as of `at` (the latest for `None`) on a mount point in
/// `dir` and checks that every file equals what TileDB reads at that
/// time; returns the mount and TileDB's files.
fn mount_like_tiledb(
    array: &Path,
    dir: &Path,
    at: Option<u64>,
) -> (Mounted, BTreeMap<String, Vec<u8>>) {
    let label = at.map_or("latest".to_string(), |t| t.to_string());
    let expected = dir.join(format!("expected-{label}"));
    dump(array, &expected, at);
    let at_arg = at.map(|t| t.to_string());
    let extra: Vec<&str> = at_arg.iter().flat_map(|a| ["--at", a.as_str()]).collect();
    let mounted = Mounted::new(array, &dir.join(format!("mnt-{label}")), &extra);
    let expected = tree(&expected);
    assert_same_tree(&tree(&mounted.path), &expected);
    (mounted, expected)
}

/// Reads of `file` at scattered offsets and lengths equal `expected`'s
/// slices.
fn assert_partial_reads(file: &Path, expected: &[u8]) {
    let f = std::fs::File::open(file).unwrap();
    let mut rng = Rng::new(expected.len() as u64);
    for _ in 0..50 {
        let len = expected.len() as u64;
        let offset = rng.below(len + 1);
        let n = rng.below(len - offset + 100) as usize;
        let mut buf = vec![0; n];
        let got = f.read_at(&mut buf, offset).unwrap();
        let want = &expected[offset as usize..(offset as usize + n).min(expected.len())];
        assert_eq!(&buf[..got], want, "{} at {offset}+{n}", file.display());
    }
}

#[test]
fn sparse_array_cells_and_columns_equal_what_tiledb_reads() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let array = tmp.path().join("sparse");
    write_array("sparse", &array);
    for at in [None, Some(1000), Some(2000), Some(2500)] {
        let (mounted, expected) = mount_like_tiledb(&array, tmp.path(), at);
        assert!(expected.len() > 300, "{} files", expected.len());
        for raw in ["label.raw", "score.raw", "id.raw"] {
            assert_partial_reads(&mounted.path.join(raw), &expected[raw]);
        }
        // Tiles are decoded once each and counted where datasets count
        // their reads.
        assert!(stat_counter(&mounted.path, "records_decoded") > 0);
    }
    // The newest write wins: cell 100 was written at 1000 and again at
    // 2000, so at 1000 its caption is the first one's.
    let mnt = tmp.path().join("mnt-ext");
    let mounted = Mounted::new(&array, &mnt, &["--ext", "image=jpg", "--at", "1000"]);
    let caption = std::fs::read_to_string(mounted.path.join("caption/00100")).unwrap();
    assert_eq!(caption, "caption 100/1 é");
    let image = mounted.path.join("image/00100.jpg");
    assert_eq!(
        std::fs::metadata(&image).unwrap().len(),
        (100 * 37 + 11) % 3000
    );
    assert!(!mounted.path.join("image/00100").exists());
    assert!(std::fs::read_dir(mounted.path.join("image"))
        .unwrap()
        .all(|e| e.unwrap().file_name().to_str().unwrap().ends_with(".jpg")));
}

#[test]
fn dense_array_raw_files_equal_tiledb_row_major_reads() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let array = tmp.path().join("dense");
    write_array("dense", &array);
    for at in [None, Some(1000)] {
        let (mounted, expected) = mount_like_tiledb(&array, tmp.path(), at);
        // Columns, and a file per written cell of the var-sized `d`.
        for name in ["a.raw", "b.raw", "c.raw", "c.validity", "d/", "d/01_01"] {
            assert!(expected.contains_key(name), "{name}");
        }
        let cells = expected
            .keys()
            .filter(|k| k.starts_with("d/") && k.len() > 2);
        assert_eq!(
            cells.count(),
            if at.is_some() {
                12 * 30
            } else {
                12 * 30 + 8 * 16
            }
        );
        assert_partial_reads(&mounted.path.join("a.raw"), &expected["a.raw"]);
        assert_partial_reads(&mounted.path.join("b.raw"), &expected["b.raw"]);
    }
}

#[test]
fn every_filter_decodes_like_tiledb() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let array = tmp.path().join("filters");
    write_array("filters", &array);
    let (_mounted, expected) = mount_like_tiledb(&array, tmp.path(), None);
    assert!(expected.contains_key("doubledelta.raw") && expected.contains_key("blob/"));
}

/// The folder of the fragment written at `t` in `array`.
fn fragment(array: &Path, t: u64) -> PathBuf {
    let dir = array.join("__fragments");
    std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            let name = p.file_name().unwrap().to_str().unwrap();
            name.starts_with(&format!("__{t}_{t}_"))
        })
        .unwrap_or_else(|| panic!("no fragment at {t} in {}", dir.display()))
}

/// Whether reading `path` fails with EIO.
fn fails_with_eio(path: &Path) -> bool {
    matches!(std::fs::read(path), Err(e) if e.raw_os_error() == Some(libc::EIO))
}

/// `packfs verify ARRAY`: whether it passed, and its output.
fn verify(array: &Path) -> (bool, String) {
    let out = packfs(&["verify", array.to_str().unwrap()]);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn damage_fails_only_the_cells_it_touches() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let array = tmp.path().join("sparse");
    write_array("sparse", &array);
    let expected = tmp.path().join("expected");
    dump(&array, &expected, None);
    let (ok, text) = verify(&array);
    assert!(ok, "{text}");

    // Image values of the fragment written at 3000 lose their tail; the
    // caption offsets of the one written at 1000 are gone.
    let values = fragment(&array, 3000).join("a0_var.tdb");
    let len = std::fs::metadata(&values).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&values)
        .unwrap()
        .set_len(len - 10)
        .unwrap();
    let offsets = fragment(&array, 1000).join("a1.tdb");
    std::fs::remove_file(&offsets).unwrap();

    let mounted = Mounted::new(&array, &tmp.path().join("mnt"), &[]);
    let mnt = &mounted.path;
    // Cell 301 is the 3000 fragment's, 0 the 1000 one's, 105 the 2000 one's.
    assert!(fails_with_eio(&mnt.join("image/00301")));
    for (file, cell) in [
        ("image", "00000"),
        ("image", "00105"),
        ("caption", "00301"),
        ("caption", "00105"),
    ] {
        let path = format!("{file}/{cell}");
        assert_eq!(
            std::fs::read(mnt.join(&path)).unwrap(),
            std::fs::read(expected.join(&path)).unwrap(),
            "{path}"
        );
    }
    // The damaged caption tile's cells are still listed; each fails.
    let listed: Vec<String> = std::fs::read_dir(mnt.join("caption"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(
        listed.len(),
        std::fs::read_dir(expected.join("caption")).unwrap().count()
    );
    assert!(listed.contains(&"00000".to_string()));
    assert!(
        matches!(std::fs::metadata(mnt.join("caption/00000")), Err(e) if e.raw_os_error() == Some(libc::EIO))
    );
    assert_eq!(
        std::fs::read(mnt.join("label.raw")).unwrap(),
        std::fs::read(expected.join("label.raw")).unwrap()
    );
    drop(mounted);

    let (ok, text) = verify(&array);
    assert!(!ok, "{text}");
    assert!(
        text.contains(&offsets.strip_prefix(&array).unwrap().display().to_string()),
        "{text}"
    );
    assert!(
        text.contains(&values.strip_prefix(&array).unwrap().display().to_string()),
        "{text}"
    );

    // Metadata that does not decode refuses the mount, naming the file.
    let metadata = fragment(&array, 2000).join("__fragment_metadata.tdb");
    let len = std::fs::metadata(&metadata).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&metadata)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    let mnt = tmp.path().join("mnt2");
    std::fs::create_dir(&mnt).unwrap();
    let out = packfs(&["mount", array.to_str().unwrap(), mnt.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("__fragment_metadata.tdb"),
        "{stderr}"
    );
    assert!(!is_mounted(&mnt));
}

#[test]
fn checksums_and_unsupported_filters_fail_the_files_they_hold() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let array = tmp.path().join("filters");
    write_array("filters", &array);
    let expected = tmp.path().join("expected");
    dump(&array, &expected, None);
    // `md5` is attribute 9: flip the last byte of its data, which the
    // checksum covers.
    let data = fragment(&array, 1000).join("a9.tdb");
    let mut bytes = std::fs::read(&data).unwrap();
    *bytes.last_mut().unwrap() ^= 0x40;
    std::fs::write(&data, bytes).unwrap();
    {
        let mounted = Mounted::new(&array, &tmp.path().join("mnt"), &[]);
        assert!(fails_with_eio(&mounted.path.join("md5.raw")));
        for ok in ["gzip.raw", "sha256.raw", "id.raw"] {
            assert_eq!(
                std::fs::read(mounted.path.join(ok)).unwrap(),
                std::fs::read(expected.join(ok)).unwrap(),
                "{ok}"
            );
        }
    }
    let (ok, text) = verify(&array);
    assert!(
        !ok && text.contains("a9.tdb") && text.contains("MD5 checksum mismatch"),
        "{text}"
    );

    // bzip2 is not decoded by packfs: the array mounts, that attribute's
    // file fails, and verify names the filter and the file.
    let array = tmp.path().join("unsupported");
    write_array("unsupported", &array);
    {
        let mounted = Mounted::new(&array, &tmp.path().join("mnt2"), &[]);
        let plain = std::fs::read(mounted.path.join("plain.raw")).unwrap();
        let want: Vec<u8> = (0..50i32).flat_map(|i| i.to_le_bytes()).collect();
        assert_eq!(plain, want);
        assert!(fails_with_eio(&mounted.path.join("bz.raw")));
    }
    let (ok, text) = verify(&array);
    assert!(
        !ok && text.contains("bzip2") && text.contains("a1.tdb"),
        "{text}"
    );
}

/// A copy of committed fixture array `name` (written by TileDB 2.30)
/// under `dir`, and the path of TileDB's read of it (`expected`).
fn fixture(name: &str, dir: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/tiledb")
        .join(name);
    let dst = dir.join(name);
    run_ok("cp", &["-r", src.to_str().unwrap(), dst.to_str().unwrap()]);
    dst
}

/// The committed arrays mount as TileDB read them when they were
/// written: this runs without the Python package.
#[test]
fn committed_fixture_arrays_mount_as_tiledb_read_them() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let expected = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tiledb");
    for (name, at, want) in [
        ("small-sparse", None, "small-sparse-expected"),
        ("small-sparse", Some("1000"), "small-sparse-expected-1000"),
        ("small-dense", None, "small-dense-expected"),
    ] {
        let array = match tmp.path().join(name).exists() {
            true => tmp.path().join(name),
            false => fixture(name, tmp.path()),
        };
        let extra: Vec<&str> = at.iter().flat_map(|a| ["--at", *a]).collect();
        let mnt = tmp.path().join(format!("mnt-{want}"));
        let mounted = Mounted::new(&array, &mnt, &extra);
        assert_same_tree(&tree(&mounted.path), &tree(&expected.join(want)));
    }
    // The cell written twice reads as its second write; the empty one is
    // an empty file.
    let mounted = Mounted::new(
        &tmp.path().join("small-sparse"),
        &tmp.path().join("mnt"),
        &[],
    );
    assert_eq!(
        std::fs::read(mounted.path.join("image/007")).unwrap(),
        b"seven again"
    );
    assert_eq!(
        std::fs::metadata(mounted.path.join("image/008"))
            .unwrap()
            .len(),
        0
    );
}

/// Copies every file under `dir` to `bucket` under `prefix`.
fn upload(s3: &common::s3::S3, bucket: &str, prefix: &str, dir: &Path) {
    use object_store::ObjectStoreExt;
    let client = s3.client(bucket);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    for rel in walk(dir).1 {
        let key = object_store::path::Path::from(format!("{prefix}/{}", rel.display()));
        let bytes = std::fs::read(dir.join(&rel)).unwrap();
        runtime.block_on(client.put(&key, bytes.into())).unwrap();
    }
}

#[test]
fn an_array_on_s3_mounts_like_tiledb_reads_it() {
    require_fuse();
    let s3 = common::s3::S3::get();
    let tmp = tempfile::tempdir().unwrap();
    let array = tmp.path().join("sparse");
    write_array("sparse", &array);
    let bucket = s3.bucket();
    upload(s3, &bucket, "arrays/sparse", &array);
    let url = format!("s3://{bucket}/arrays/sparse");
    for at in [None, Some("2000")] {
        let expected = tmp.path().join(format!("expected-{at:?}"));
        dump(&array, &expected, at.map(|a| a.parse().unwrap()));
        let mut extra = vec!["--read-only"];
        extra.extend(at.iter().flat_map(|a| ["--at", *a]));
        let mnt = tmp.path().join(format!("mnt-{at:?}"));
        let mounted = Mounted::on_s3(s3, &url, &mnt, &extra);
        assert_same_tree(&tree(&mounted.path), &tree(&expected));
    }
    let out = s3.packfs_ok(&["verify", &url]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("OK TileDB array"), "{text}");
}

#[test]
fn ls_cat_and_verify_read_an_array_without_mounting_it() {
    let tmp = tempfile::tempdir().unwrap();
    let array = fixture("small-sparse", tmp.path());
    let array = array.to_str().unwrap();
    let expected = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tiledb");
    let out = packfs_ok(&["ls", array]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "image/\nlabel.raw\nid.raw\n"
    );
    let out = packfs_ok(&["ls", array, "image"]);
    let listed = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut want: Vec<String> = std::fs::read_dir(expected.join("small-sparse-expected/image"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    want.sort();
    assert_eq!(listed.lines().collect::<Vec<_>>(), want);
    for (at, dir) in [
        (None, "small-sparse-expected"),
        (Some("1000"), "small-sparse-expected-1000"),
    ] {
        let mut args = vec!["cat", array, "image/007"];
        args.extend(at.iter().flat_map(|a| ["--at", *a]));
        let out = packfs_ok(&args);
        assert_eq!(
            out.stdout,
            std::fs::read(expected.join(dir).join("image/007")).unwrap()
        );
    }
    let out = packfs_ok(&["verify", array]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("OK TileDB array") && text.contains("2 fragments"),
        "{text}"
    );
}

#[test]
fn a_string_dimension_names_cells_by_escaped_keys_in_global_order() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let array = tmp.path().join("sparse2d");
    write_array("sparse2d", &array);
    for at in [None, Some(1000)] {
        let (_mounted, expected) = mount_like_tiledb(&array, tmp.path(), at);
        // Keys with `/`, `_`, a space, dots and the empty key.
        for name in [
            "image/cat%2F01_07",
            "image/dog%5F2_00",
            "image/%2E%2E_15",
            "image/%_99",
        ] {
            assert!(expected.contains_key(name), "{name}");
        }
    }
}

/// Float coordinates of any magnitude and keys past 255 bytes still make
/// names a directory can hold (docs/TILEDB.md, "Cell names"): `cp -r` of
/// the mount copies every cell.
#[test]
fn cell_names_fit_a_file_name_whatever_the_coordinates() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let array = tmp.path().join("long-names");
    write_array("long-names", &array);
    let mnt = Mounted::new(&array, &tmp.path().join("mnt"), &[]);
    let copy = tmp.path().join("copy");
    let status = Command::new("cp")
        .arg("-r")
        .arg(&mnt.path)
        .arg(&copy)
        .status()
        .unwrap();
    assert!(status.success(), "cp -r of the mount failed");
    let names: Vec<String> = std::fs::read_dir(copy.join("image"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names.len(), 6, "{names:?}");
    assert!(names.iter().all(|n| n.len() <= 255), "{names:?}");
    for name in ["a_5e-324", "a_-1e-7", "a_0.5", "a_1e20"] {
        assert!(names.iter().any(|n| n == name), "{name} not in {names:?}");
    }
}

#[test]
fn consolidated_commits_and_fragments_read_like_tiledb_at_every_time() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let array = tmp.path().join("consolidated");
    write_array("consolidated", &array);
    let commits: Vec<String> = std::fs::read_dir(array.join("__commits"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(commits.iter().any(|c| c.ends_with(".con")), "{commits:?}");
    // Latest: the consolidated fragment hides the ones it was made of;
    // at 2000, before it, those are read.
    for at in [None, Some(2000), Some(3000)] {
        mount_like_tiledb(&array, tmp.path(), at);
    }
}

/// A fragment consolidated with timestamps keeps each cell's write time:
/// a read at a time inside its range sees the cells written up to then,
/// cell by cell, as TileDB reads them.
#[test]
fn a_fragment_consolidated_with_timestamps_is_read_cell_by_cell_in_time() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let array = tmp.path().join("timestamped");
    write_array("timestamped", &array);
    let fragments = std::fs::read_dir(array.join("__fragments"))
        .unwrap()
        .count();
    assert_eq!(fragments, 1, "vacuumed down to the consolidated fragment");
    for at in [None, Some(1000), Some(1500), Some(2000), Some(3000)] {
        let (_mounted, expected) = mount_like_tiledb(&array, tmp.path(), at);
        assert!(
            expected.keys().any(|k| k.starts_with("image/")),
            "TileDB reads cells at {at:?}"
        );
    }
}

/// Writes array `kind`, checks that mounting it is refused with a
/// message holding every one of `saying` and nothing is mounted, then that
/// a mount `--at` `before` reads what TileDB reads at that time.
fn refused_unless_read_before(kind: &str, saying: &[&str], before: u64) {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let array = tmp.path().join(kind);
    write_array(kind, &array);
    let mnt = tmp.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let out = packfs(&["mount", array.to_str().unwrap(), mnt.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    for s in saying {
        assert!(stderr.contains(s), "{s:?} missing: {stderr}");
    }
    assert!(!is_mounted(&mnt));
    mount_like_tiledb(&array, tmp.path(), Some(before));
}

#[test]
fn arrays_with_deletes_are_refused_unless_read_before_them() {
    refused_unless_read_before("deleted", &[".del", "deletes are not read by packfs"], 3000);
}

#[test]
fn an_evolved_schema_is_refused_unless_read_before_the_change() {
    refused_unless_read_before("evolved", &["schema evolved", "__5000_5000_"], 2000);
}
