//! DataBundles through the kernel: bundles that `packfs bundle create`
//! wrote, with each compression, mounted and compared with the source by
//! std::fs (listings, sizes, modes, times, bytes, partial reads across
//! records, concurrent readers); damage fails the damaged files only.

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use packfs_core::bundle::index::Index;

use crate::common;
use crate::common::*;

/// A tree of 2,000+ files: empty to several MiB, files over 1 MiB, files
/// of zeros, empty directories, non-ASCII names and names with " # ".
fn generate_tree(src: &Path) -> usize {
    let mut rng = Rng::new(12);
    let mut n = 0;
    for d in 0..20 {
        for i in 0..100 {
            let len = match i % 10 {
                0 => 0,
                1 => 300_000 + rng.below(100_000) as usize,
                _ => rng.below(20_000) as usize,
            };
            write_file(&src.join(format!("d{d:02}/f{i:03}")), &rng.bytes(len));
            n += 1;
        }
    }
    write_file(&src.join("big/a.bin"), &rng.bytes(3 * (1 << 20) + 12_345));
    write_file(&src.join("big/zeros.bin"), &vec![0; 2 * (1 << 20) + 5]);
    write_file(&src.join("big/zeros-then-data"), &{
        let mut v = vec![0; 700_000];
        v.extend(rng.bytes(1000));
        v
    });
    write_file(&src.join("ünï/çödé # 1.txt"), b"non-ascii");
    write_file(&src.join("top"), b"at the root");
    std::fs::create_dir_all(src.join("empty/nested-empty")).unwrap();
    n + 5
}

/// `packfs bundle create SRC BUNDLE --no-progress EXTRA…`.
fn create(src: &Path, bundle: &str, extra: &[&str]) {
    let mut args = vec![
        "bundle",
        "create",
        src.to_str().unwrap(),
        bundle,
        "--no-progress",
    ];
    args.extend_from_slice(extra);
    packfs_ok(&args);
}

#[test]
fn bundles_of_every_compression_mount_like_their_source() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    assert!(generate_tree(&src) >= 2000);
    let want = fs_snapshot(&src);
    for (compression, extra) in [
        ("zstd", &["--shards", "3"][..]),
        ("gzip", &["--record-size", "64KiB"][..]),
        ("none", &["--shards", "2"][..]),
    ] {
        let bundle = tmp.path().join(format!("bundle-{compression}"));
        let mut args = vec!["--compression", compression];
        args.extend_from_slice(extra);
        create(&src, bundle.to_str().unwrap(), &args);
        let mnt = Mounted::new(&bundle, &tmp.path().join(format!("mnt-{compression}")), &[]);
        let got = fs_snapshot(&mnt.path);
        if compression != "none" {
            // Each directory's files were read in bundle order: records are
            // read ahead, not fetched one GET each. (The directories were
            // read in reverse, so each starts a run of its own that takes
            // a few reads to grow: about 2 records a GET here.)
            let gets = stat_counter(&mnt.path, "gets");
            let records = stat_counter(&mnt.path, "records_decoded");
            assert!(
                gets * 3 < records * 2,
                "{compression}: {gets} GETs for {records} records"
            );
        }
        assert_eq!(
            got.keys().collect::<Vec<_>>(),
            want.keys().collect::<Vec<_>>(),
            "{compression}: listing"
        );
        for (rel, w) in &want {
            assert!(
                got[rel] == *w,
                "{compression}: {rel} differs (mode, size, mtime or bytes)"
            );
        }

        // Partial reads that start and end inside records, and cross them.
        let big = std::fs::File::open(mnt.path.join("big/a.bin")).unwrap();
        let source = std::fs::read(src.join("big/a.bin")).unwrap();
        for (offset, len) in [(0, 1), (65_530, 20), (262_140, 300_000), (1 << 20, 3 << 20)] {
            let end = (offset + len).min(source.len());
            let mut buf = vec![0; end - offset];
            big.read_exact_at(&mut buf, offset as u64).unwrap();
            assert!(
                buf == source[offset..end],
                "{compression}: {len} bytes at {offset}"
            );
        }
        drop(big);

        // Concurrent readers of the same files.
        std::thread::scope(|s| {
            for t in 0..4 {
                let (mnt, want) = (&mnt.path, &want);
                s.spawn(move || {
                    for (rel, node) in want.iter().skip(t).step_by(2) {
                        if let Some(bytes) = &node.bytes {
                            assert!(std::fs::read(mnt.join(rel)).unwrap() == *bytes, "{rel}");
                        }
                    }
                });
            }
        });
        if compression != "none" {
            assert!(stat_counter(&mnt.path, "records_decoded") > 0);
        }
        assert_eq!(stat_counter(&mnt.path, "errors"), 0);
        drop(mnt);
        let verified = packfs_ok(&["verify", bundle.to_str().unwrap()]);
        let out = String::from_utf8_lossy(&verified.stdout);
        assert!(out.starts_with("OK bundle"), "{out}");
    }
}

/// A zstd bundle of small files in a few records and one big file.
fn small_bundle(dir: &Path) -> (PathBuf, PathBuf) {
    let src = dir.join("src");
    let mut rng = Rng::new(5);
    for i in 0..40 {
        write_file(&src.join(format!("s/{i:02}")), &rng.bytes(20_000));
    }
    write_file(&src.join("z/big"), &rng.bytes(2 << 20));
    let bundle = dir.join("bundle");
    create(&src, bundle.to_str().unwrap(), &["--shards", "1"]);
    (src, bundle)
}

#[test]
fn a_damaged_record_fails_its_files_only_and_verify_names_them() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let (src, bundle) = small_bundle(tmp.path());
    let index = Index::open(&bundle.join("index/bundle.sqlite")).unwrap();
    let first = &index.records(0).unwrap()[0];
    let at = first.meta.compressed_offset + first.meta.compressed_size / 2;
    let shard = bundle.join("shard-00000000");
    let file = std::fs::OpenOptions::new()
        .write(true)
        .read(true)
        .open(&shard)
        .unwrap();
    let mut byte = [0];
    file.read_exact_at(&mut byte, at).unwrap();
    file.write_all_at(&[byte[0] ^ 0x20], at).unwrap();
    drop(file);

    let mnt = Mounted::new(&bundle, &tmp.path().join("mnt"), &[]);
    let record = first.start..first.start + first.meta.uncompressed_size;
    let mut failed = Vec::new();
    for i in 0..40 {
        let rel = format!("s/{i:02}");
        let entry = index.lookup("s", &format!("{i:02}")).unwrap().unwrap();
        let in_record = entry.meta.shard_offset < record.end;
        if eio(&mnt.path, &rel) {
            failed.push(rel.clone());
        } else {
            assert_eq!(
                std::fs::read(mnt.path.join(&rel)).unwrap(),
                std::fs::read(src.join(&rel)).unwrap()
            );
        }
        assert_eq!(failed.contains(&rel), in_record, "{rel}");
    }
    assert!(!failed.is_empty());
    assert!(!eio(&mnt.path, "z/big"), "a file outside the record reads");
    drop(mnt);

    let out = packfs(&["verify", bundle.to_str().unwrap()]);
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("shard-00000000"), "{text}");
    for rel in &failed {
        assert!(
            text.contains(&format!("FAIL {rel}:")),
            "{rel} not named in {text}"
        );
    }
}

#[test]
fn a_truncated_shard_fails_the_files_past_its_end() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let (_src, bundle) = small_bundle(tmp.path());
    let shard = bundle.join("shard-00000000");
    let len = std::fs::metadata(&shard).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&shard)
        .unwrap()
        .set_len(len - 100_000)
        .unwrap();
    let mnt = Mounted::new(&bundle, &tmp.path().join("mnt"), &[]);
    assert!(eio(&mnt.path, "z/big"), "the last file lost its tail");
    assert!(!eio(&mnt.path, "s/00"), "the first file is whole");
    drop(mnt);
    let out = packfs(&["verify", bundle.to_str().unwrap()]);
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("FAIL z/big:") && text.contains("past the shard's end"),
        "{text}"
    );
}

#[test]
fn unknown_compression_and_a_corrupt_index_are_refused_by_name() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let (_src, bundle) = small_bundle(tmp.path());
    let index_path = bundle.join("index/bundle.sqlite");
    let mnt = tmp.path().join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();

    let mut config = Index::open(&index_path).unwrap().config().clone();
    config.compression_algorithm = "lz4".into();
    let conn = rusqlite::Connection::open(&index_path).unwrap();
    conn.execute(
        "UPDATE bundle SET value = ?1 WHERE key = 'BUNDLE_CONFIG #'",
        [prost::Message::encode_to_vec(&config)],
    )
    .unwrap();
    drop(conn);
    let out = packfs(&["mount", bundle.to_str().unwrap(), mnt.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("\"lz4\""), "{err}");

    std::fs::write(&index_path, b"not a database, not at all; just text").unwrap();
    let out = packfs(&["mount", bundle.to_str().unwrap(), mnt.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("bundle.sqlite"),
        "{err}"
    );
    assert!(!is_mounted(&mnt));
}

#[test]
fn a_bundle_on_s3_mounts_like_its_source() {
    require_fuse();
    let s3 = common::s3::S3::get();
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    let mut rng = Rng::new(9);
    for i in 0..200 {
        let len = rng.below(30_000) as usize;
        write_file(&src.join(format!("d/{i:03}")), &rng.bytes(len));
    }
    write_file(&src.join("big"), &rng.bytes(3 << 20));
    std::fs::create_dir_all(src.join("empty")).unwrap();
    let url = format!("s3://{}/bundles/b", s3.bucket());
    s3.packfs_ok(&[
        "bundle",
        "create",
        src.to_str().unwrap(),
        &url,
        "--no-progress",
        "--shards",
        "2",
    ]);
    let cache = tmp.path().join("cache");
    let cache_arg = cache.to_str().unwrap();
    let mount = |name: &str| {
        let args = ["--read-only", "--cache-dir", cache_arg];
        Mounted::on_s3(s3, &url, &tmp.path().join(name), &args)
    };
    let mnt = mount("mnt");
    assert!(
        fs_snapshot(&mnt.path) == fs_snapshot(&src),
        "the mount differs from its source"
    );
    drop(mnt);
    // The index was downloaded once into the cache directory; a remount
    // uses that copy.
    let copies = std::fs::read_dir(cache.join("bundle-index"))
        .unwrap()
        .count();
    assert_eq!(copies, 1);
    let mnt = mount("mnt2");
    assert_eq!(
        std::fs::read(mnt.path.join("big")).unwrap(),
        std::fs::read(src.join("big")).unwrap()
    );
    assert_eq!(
        std::fs::read_dir(cache.join("bundle-index"))
            .unwrap()
            .count(),
        1
    );
}

#[test]
fn a_damaged_index_entry_fails_that_file_only() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let (src, bundle) = small_bundle(tmp.path());
    let conn = rusqlite::Connection::open(bundle.join("index/bundle.sqlite")).unwrap();
    let changed = conn
        .execute(
            "UPDATE bundle SET value = X'ffffffff' WHERE key = 'FILE_METADATA # s/ # 07'",
            [],
        )
        .unwrap();
    assert_eq!(changed, 1);
    drop(conn);

    let mnt = Mounted::new(&bundle, &tmp.path().join("mnt"), &[]);
    let names: Vec<_> = std::fs::read_dir(mnt.path.join("s"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names.len(), 40, "the damaged entry is still listed");
    let err = std::fs::metadata(mnt.path.join("s/07")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EIO), "{err}");
    assert!(eio(&mnt.path, "s/07"));
    for rel in ["s/06", "s/08", "z/big"] {
        assert_eq!(
            std::fs::read(mnt.path.join(rel)).unwrap(),
            std::fs::read(src.join(rel)).unwrap(),
            "{rel}"
        );
    }
    drop(mnt);
    let out = packfs(&["verify", bundle.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        !out.status.success() && text.contains("FAIL s/07:"),
        "{text}"
    );
}

#[test]
fn ls_and_cat_read_a_bundle_without_mounting_it() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, bundle) = small_bundle(tmp.path());
    let bundle = bundle.to_str().unwrap();
    let out = packfs_ok(&["ls", bundle]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "s/\nz/\n");
    let out = packfs_ok(&["ls", "-l", bundle, "z"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("{:>14}  big\n", 2 << 20)
    );
    let out = packfs_ok(&["cat", bundle, "z/big"]);
    assert!(out.stdout == std::fs::read(src.join("z/big")).unwrap());
    let out = packfs(&["cat", bundle, "z/missing"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("z/missing: no such file"),
        "{stderr}"
    );
}
