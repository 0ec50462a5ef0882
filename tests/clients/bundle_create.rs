//! `packfs bundle create`, checked by an independent reader:
//! `tests/bundle_reader.py`, written from docs/DATABUNDLE.md alone, reads
//! every bundle back and compares it with its source tree; `packfs
//! verify` and a read-only mount check it too. Also: an
//! existing bundle is refused, a failed or killed run leaves no index, a
//! bad source is refused before anything is written, and a bundle goes to
//! S3 (moto) and comes back whole.

use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::common::s3::S3;
use crate::common::*;

const INDEX: &str = "index/bundle.sqlite";

/// The Python that runs the reader: it needs `zstandard` (`.ci/run`
/// installs it into `.ci-venv-bundle`).
fn python() -> PathBuf {
    required_program(
        "PACKFS_BUNDLE_PYTHON",
        ".ci-venv-bundle/bin/python",
        "bundle tests need Python with zstandard",
    )
}

/// The independent reader must find `bundle` to hold exactly `src`, cut
/// into records as packfs cuts them; returns its summary.
fn read_back(bundle: &Path, src: &Path) -> String {
    let reader = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/bundle_reader.py");
    let out = Command::new(python())
        .arg(reader)
        .args([bundle, src])
        .arg("--writer-rules")
        .output()
        .expect("run the bundle reader");
    let out = succeeded(&format!("bundle_reader.py {}", bundle.display()), out);
    let verified = packfs_ok(&["verify", s(bundle)]);
    assert!(verified.stdout.starts_with(b"OK bundle"));
    String::from_utf8(out.stdout).unwrap()
}

fn s(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// `packfs bundle create SRC BUNDLE --no-progress EXTRA…`.
fn create(src: &Path, bundle: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["bundle", "create", s(src), s(bundle), "--no-progress"];
    args.extend_from_slice(extra);
    packfs(&args)
}

/// Half random bytes, half text (so compression has work of both kinds).
fn content(rng: &mut Rng, len: usize) -> Vec<u8> {
    if rng.below(2) == 0 {
        return rng.bytes(len);
    }
    let line = format!("line {} of a compressible file\n", rng.below(1000));
    line.bytes().cycle().take(len).collect()
}

/// 2,100 files from 0 B to 3 MiB: small ones in nested directories with
/// non-ASCII names and names holding " # " (a directory name starting
/// with it too), files just under and over 1 MiB, files of zeros, empty
/// files and directories, and a few modes.
fn source(root: &Path) {
    let mut rng = Rng::new(42);
    let dirs = [
        "",
        "a",
        "a/b",
        "données/ü",
        "x # y",
        "a/ # lead",
        "deep/1/2/3",
    ];
    for i in 0..2_100 {
        let dir = root.join(dirs[i % dirs.len()]);
        let name = match i % 5 {
            0 => format!("f{i} # {i}.bin"),
            1 => format!("é{i}.txt"),
            _ => format!("f{i:04}"),
        };
        let len = match i % 10 {
            0 => 0,
            1..=6 => rng.below(4096),
            _ => rng.below(16_384),
        };
        write_file(&dir.join(name), &content(&mut rng, len as usize));
    }
    write_file(&root.join("big/random"), &rng.bytes((3 << 20) + 123));
    write_file(&root.join("big/just over 1MiB"), &rng.bytes((1 << 20) + 1));
    write_file(&root.join("big/exactly 1MiB"), &rng.bytes(1 << 20));
    write_file(&root.join("zeros/3MiB"), &vec![0; 3 << 20]);
    write_file(&root.join("zeros/small"), &[0; 1000]);
    let mut half = vec![0; 2 << 20];
    half.extend(rng.bytes(100_000));
    write_file(&root.join("zeros/then data"), &half);
    for dir in ["empty", "a/empty/nested empty", "données/vide"] {
        std::fs::create_dir_all(root.join(dir)).unwrap();
    }
    let chmod = |path: &str, mode| {
        std::fs::set_permissions(root.join(path), std::fs::Permissions::from_mode(mode)).unwrap()
    };
    chmod("a/b/f0002", 0o600);
    chmod("big/random", 0o755);
    chmod("données/vide", 0o700);
}

#[test]
fn every_compression_reads_back_with_the_independent_reader() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    source(&src);
    let runs: [(&str, &[&str]); 4] = [
        ("zstd-default", &[]),
        (
            "gzip-64k-3",
            &[
                "--compression",
                "gzip",
                "--level",
                "1",
                "--record-size",
                "64KiB",
                "--shards",
                "3",
            ],
        ),
        (
            "none-4-512",
            &[
                "--compression",
                "none",
                "--shards",
                "4",
                "--block-size",
                "512",
            ],
        ),
        (
            "zstd-1m-1-64k",
            &[
                "--record-size",
                "1MiB",
                "--shards",
                "1",
                "--block-size",
                "64KiB",
            ],
        ),
    ];
    for (name, extra) in runs {
        let bundle = tmp.path().join(name);
        let out = succeeded(
            &format!("bundle create {name}"),
            create(&src, &bundle, extra),
        );
        let summary = String::from_utf8_lossy(&out.stderr);
        assert!(
            summary.contains("2106 files and 16 directories"),
            "{summary}"
        );
        let read = read_back(&bundle, &src);
        // Records of zeros are stored as nothing.
        let compressed = !name.starts_with("none");
        assert_eq!(compressed, !read.contains(" 0 zeros records"), "{read}");
    }
    // The shard count asked for is what was written.
    let shards = |name: &str| {
        std::fs::read_dir(tmp.path().join(name))
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .as_bytes()
                    .starts_with(b"shard-")
            })
            .count()
    };
    assert_eq!((shards("gzip-64k-3"), shards("none-4-512")), (3, 4));

    // Mounted, a bundle is its source tree (names with " # " included).
    require_fuse();
    let m = Mounted::new(
        &tmp.path().join("zstd-default"),
        &tmp.path().join("mnt"),
        &[],
    );
    diff_r(&src, &m.path);
}

#[test]
fn shards_are_never_more_than_files_and_an_empty_tree_is_a_bundle() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    write_file(&src.join("one"), b"1");
    write_file(&src.join("d/two"), b"22");
    let bundle = tmp.path().join("b");
    succeeded("create", create(&src, &bundle, &["--shards", "8"]));
    assert!(bundle.join("shard-00000001").exists() && !bundle.join("shard-00000002").exists());
    read_back(&bundle, &src);

    let empty = tmp.path().join("empty");
    std::fs::create_dir_all(empty.join("only/dirs")).unwrap();
    let bundle = tmp.path().join("e");
    succeeded("create", create(&empty, &bundle, &[]));
    assert!(!bundle.join("shard-00000000").exists());
    read_back(&bundle, &empty);
}

#[test]
fn an_existing_bundle_or_shard_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    write_file(&src.join("f"), b"data");
    let bundle = tmp.path().join("b");
    succeeded("create", create(&src, &bundle, &[]));
    let index = std::fs::read(bundle.join(INDEX)).unwrap();
    let out = create(&src, &bundle, &["--compression", "none"]);
    failed_with(
        &out,
        &[
            s(&bundle),
            "already holds a bundle index (index/bundle.sqlite)",
        ],
    );
    assert_eq!(std::fs::read(bundle.join(INDEX)).unwrap(), index);
    read_back(&bundle, &src);

    let debris = tmp.path().join("debris");
    write_file(&debris.join("shard-00000003"), b"left by a killed run");
    let out = create(&src, &debris, &[]);
    failed_with(&out, &[s(&debris), "shard file shard-00000003"]);
    assert!(!debris.join(INDEX).exists());
}

#[test]
fn a_bad_source_is_refused_before_anything_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    write_file(&src.join("fine"), b"ok");
    write_file(
        &src.join(std::ffi::OsStr::from_bytes(b"latin1-\xe9")),
        b"not UTF-8",
    );
    std::fs::create_dir(src.join("dir")).unwrap();
    std::os::unix::fs::symlink(src.join("dir"), src.join("link-to-dir")).unwrap();
    let bundle = tmp.path().join("b");
    failed_with(
        &create(&src, &bundle, &[]),
        &[
            "latin1-",
            "not valid UTF-8",
            "link-to-dir: symbolic link to a directory is not followed",
            "nothing was written",
        ],
    );
    assert!(
        !bundle.exists(),
        "a refused source created the bundle directory"
    );
    failed_with(
        &create(&src, &src.join("inside"), &[]),
        &["inside the source"],
    );
}

/// A file whose size changes between the scan and its reading (a link to
/// a /proc file: listed as 0 bytes, read as more) fails the run after
/// other files were written: the shards written are removed, and there
/// is no index.
#[test]
fn a_failure_midway_leaves_no_index() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    let mut rng = Rng::new(3);
    for i in 0..50 {
        write_file(&src.join(format!("f{i:02}")), &rng.bytes(100_000));
    }
    std::os::unix::fs::symlink("/proc/self/status", src.join("zz-grows")).unwrap();
    let bundle = tmp.path().join("b");
    std::fs::create_dir(&bundle).unwrap();
    let out = create(&src, &bundle, &["--shards", "2"]);
    failed_with(
        &out,
        &[
            "zz-grows changed size while being bundled",
            "0 bytes when listed",
        ],
    );
    assert!(!bundle.join(INDEX).exists(), "a failed run left an index");
    let left: Vec<_> = std::fs::read_dir(&bundle).unwrap().collect();
    assert!(
        left.iter().all(|e| !e
            .as_ref()
            .unwrap()
            .file_name()
            .as_bytes()
            .starts_with(b"shard-")),
        "a failed run left shards: {left:?}"
    );
}

/// A run killed while it writes shards leaves shards but no index: the
/// index is written last, so there is no bundle to read.
#[test]
fn a_killed_run_leaves_no_index() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    // Incompressible and compressed hard by a debug build: seconds of
    // work, of which the first record takes a fraction.
    write_file(&src.join("big"), &Rng::new(9).bytes(48 << 20));
    let bundle = tmp.path().join("b");
    let mut child = Command::new(PACKFS)
        .args(["bundle", "create", s(&src), s(&bundle), "--no-progress"])
        .args(["--compression", "gzip", "--level", "9", "--shards", "1"])
        .spawn()
        .unwrap();
    let shard = bundle.join("shard-00000000");
    let started = Instant::now();
    while std::fs::metadata(&shard).map_or(0, |m| m.len()) <= 4096 {
        assert!(
            child.try_wait().unwrap().is_none(),
            "bundle create ended before it wrote a record: the test needs a slower run"
        );
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "no record written"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap();
    let status = child.wait().unwrap();
    assert!(
        !status.success(),
        "bundle create finished before it was killed"
    );
    assert!(shard.exists());
    assert!(!bundle.join(INDEX).exists(), "a killed run left an index");
}

/// A bundle written to S3 comes back whole: shards (one over the
/// multipart threshold) and index, and nothing left in the staging
/// directory. A second run to the same prefix is refused.
#[test]
fn a_bundle_on_s3_reads_back() {
    let s3 = S3::get();
    let bucket = s3.bucket();
    let url = format!("s3://{bucket}/bundles/one");
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    let mut rng = Rng::new(5);
    for i in 0..40 {
        write_file(
            &src.join(format!("d{}/f{i}", i % 3)),
            &content(&mut rng, 20_000),
        );
    }
    write_file(&src.join("large"), &rng.bytes(20 << 20));
    std::fs::create_dir(src.join("empty")).unwrap();
    let staging = tmp.path().join("staging");
    let create = |compression: &str| {
        s3.packfs(&[
            "bundle",
            "create",
            s(&src),
            &url,
            "--no-progress",
            "--compression",
            compression,
            "--shards",
            "2",
            "--staging-dir",
            s(&staging),
        ])
    };
    succeeded("bundle create to s3", create("none"));
    assert_eq!(
        std::fs::read_dir(&staging).unwrap().count(),
        0,
        "staging left behind"
    );

    let local = tmp.path().join("downloaded");
    let names = download(s3, &bucket, "bundles/one", &local);
    assert_eq!(names, [INDEX, "shard-00000000", "shard-00000001"]);
    assert!(
        std::fs::metadata(local.join("shard-00000000"))
            .unwrap()
            .len()
            > 16 << 20
    );
    read_back(&local, &src);
    s3.packfs_ok(&["verify", &url]);

    failed_with(&create("zstd"), &[&url, "already holds a bundle index"]);
}

/// Copies every object under `prefix` of `bucket` into `dir`; returns
/// their names relative to `prefix`, sorted.
fn download(s3: &S3, bucket: &str, prefix: &str, dir: &Path) -> Vec<String> {
    use futures::TryStreamExt;
    use object_store::{ObjectStore, ObjectStoreExt};
    let client = s3.client(bucket);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let prefix = object_store::path::Path::from(prefix);
        let listed: Vec<_> = client.list(Some(&prefix)).try_collect().await.unwrap();
        let mut names = Vec::new();
        for meta in listed {
            let rel: Vec<_> = meta.location.prefix_match(&prefix).unwrap().collect();
            let rel = rel.iter().map(|p| p.as_ref()).collect::<Vec<_>>().join("/");
            let bytes = client
                .get(&meta.location)
                .await
                .unwrap()
                .bytes()
                .await
                .unwrap();
            write_file(&dir.join(&rel), &bytes);
            names.push(rel);
        }
        names.sort();
        names
    })
}
