//! End to end through the kernel: import a generated tree, mount it with
//! FUSE, and check that every tool sees exactly the original tree.

use std::os::unix::fs::{FileExt, MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::common::*;

/// A tree of 2,000+ files: sizes from 0 bytes to several MiB, files larger
/// than the chunk size, nested names, spaces and non-ASCII.
fn generate_tree(src: &Path) -> usize {
    let mut rng = Rng::new(42);
    let mut count = 0;
    let dirs = ["", "sub dir/", "ünï/cødé/", "deep/a/b/c/", "日本/"];
    for (timeline, modality, n) in [
        ("train", "image", 1500),
        ("train", "text", 400),
        ("val", "image", 150),
    ] {
        for i in 0..n {
            let dir = dirs[rng.below(dirs.len() as u64) as usize];
            let size = match rng.below(100) {
                0..=4 => 0,
                5..=84 => 1 + rng.below(64 * 1024),
                85..=97 => 64 * 1024 + rng.below(900 * 1024),
                _ => (1 << 20) + rng.below(4 << 20),
            } as usize;
            let name = format!("{dir}item {i:05} é.bin");
            write_file(
                &src.join(timeline).join(modality).join(name),
                &rng.bytes(size),
            );
            count += 1;
        }
    }
    // Exactly at and just past the chunk size, and a multi-chunk file.
    write_file(&src.join("val/video/exact.mp4"), &rng.bytes(1 << 20));
    write_file(&src.join("val/video/over.mp4"), &rng.bytes((1 << 20) + 1));
    write_file(
        &src.join("val/video/large.mp4"),
        &rng.bytes(7 * (1 << 20) + 12345),
    );
    count + 3
}

/// Small packs and chunks, so a few thousand files exercise every shape.
const IMPORT_ARGS: &[&str] = &[
    "--pack-items",
    "64",
    "--pack-bytes",
    "4MiB",
    "--chunk-bytes",
    "1MiB",
];

fn pack_objects(dataset: &Path) -> Vec<std::path::PathBuf> {
    let (_, files) = walk(dataset);
    files
        .into_iter()
        .filter(|f| !f.starts_with("_packfs"))
        .collect()
}

#[test]
fn mounted_tree_equals_the_source_for_every_tool() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let (src, dataset) = (tmp.path().join("src"), tmp.path().join("dataset"));
    let n = generate_tree(&src);
    assert!(n >= 2000);
    import(&src, &dataset, IMPORT_ARGS);
    let objects = pack_objects(&dataset);
    assert!(
        objects.len() < n / 10,
        "{} data objects for {n} files: small files were not packed",
        objects.len()
    );

    let mnt = Mounted::new(&dataset, &tmp.path().join("mnt"), &[]);

    // Every directory listing and every byte, with std::fs.
    let (src_dirs, src_files) = walk(&src);
    let (mnt_dirs, mnt_files) = walk(&mnt.path);
    assert_eq!(src_dirs, mnt_dirs);
    assert_eq!(src_files, mnt_files);
    let mtime = std::fs::metadata(mnt.path.join(&mnt_files[0]))
        .unwrap()
        .mtime();
    for rel in &src_files {
        let (a, b) = (src.join(rel), mnt.path.join(rel));
        let meta = std::fs::metadata(&b).unwrap();
        assert_eq!(
            meta.len(),
            std::fs::metadata(&a).unwrap().len(),
            "{rel:?} size"
        );
        assert_eq!(meta.permissions().mode() & 0o777, 0o444, "{rel:?} mode");
        assert_eq!(meta.mtime(), mtime, "all files carry the Manifest time");
        assert!(
            std::fs::read(&a).unwrap() == std::fs::read(&b).unwrap(),
            "{rel:?} bytes differ"
        );
    }
    let dir_mode = std::fs::metadata(mnt.path.join("train"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(dir_mode & 0o777, 0o555);

    // Standard tools: cp -r, diff -r, tar, sha256sum, find.
    let out = tmp.path().join("copy");
    run_ok(
        "cp",
        &["-r", mnt.path.to_str().unwrap(), out.to_str().unwrap()],
    );
    run_ok(
        "diff",
        &["-r", src.to_str().unwrap(), out.to_str().unwrap()],
    );
    run_ok(
        "diff",
        &["-r", src.to_str().unwrap(), mnt.path.to_str().unwrap()],
    );
    let sums = |root: &Path| {
        let o = Command::new("sh")
            .arg("-c")
            .arg("find . -type f -print0 | sort -z | xargs -0 sha256sum")
            .current_dir(root)
            .output()
            .unwrap();
        assert!(o.status.success());
        o.stdout
    };
    assert_eq!(sums(&src), sums(&mnt.path));
    let untar = tmp.path().join("untar");
    std::fs::create_dir(&untar).unwrap();
    run_ok(
        "sh",
        &[
            "-c",
            &format!(
                "tar -C '{}' -cf - . | tar -C '{}' -xf -",
                mnt.path.display(),
                untar.display()
            ),
        ],
    );
    run_ok(
        "diff",
        &["-r", src.to_str().unwrap(), untar.to_str().unwrap()],
    );
    let found = Command::new("find")
        .arg(&mnt.path)
        .arg("-type")
        .arg("f")
        .output()
        .unwrap();
    assert_eq!(
        found
            .stdout
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .count(),
        n
    );
}

#[test]
fn partial_reads_across_chunk_and_pack_boundaries() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let (src, dataset) = (tmp.path().join("src"), tmp.path().join("dataset"));
    let mut rng = Rng::new(7);
    write_file(&src.join("t/m/large.bin"), &rng.bytes(5 * (1 << 20) + 777));
    for i in 0..50 {
        let len = rng.below(10_000) as usize;
        write_file(&src.join(format!("t/m/small/{i:03}")), &rng.bytes(len));
    }
    import(&src, &dataset, IMPORT_ARGS);
    let mnt = Mounted::new(&dataset, &tmp.path().join("mnt"), &[]);
    for rel in ["t/m/large.bin", "t/m/small/010", "t/m/small/049"] {
        let want = std::fs::read(src.join(rel)).unwrap();
        let file = std::fs::File::open(mnt.path.join(rel)).unwrap();
        for _ in 0..200 {
            let offset = rng.below(want.len() as u64 + 10);
            let len = rng.below(3 << 20) as usize;
            let mut buf = vec![0u8; len];
            let got = read_fully_at(&file, &mut buf, offset);
            let start = (offset as usize).min(want.len());
            let end = (start + len).min(want.len());
            assert_eq!(&buf[..got], &want[start..end], "{rel} at {offset}+{len}");
        }
    }
}

fn read_fully_at(file: &std::fs::File, buf: &mut [u8], offset: u64) -> usize {
    let mut done = 0;
    while done < buf.len() {
        match file
            .read_at(&mut buf[done..], offset + done as u64)
            .unwrap()
        {
            0 => break,
            n => done += n,
        }
    }
    done
}

#[test]
fn directory_of_100k_entries_lists_completely() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let (src, dataset) = (tmp.path().join("src"), tmp.path().join("dataset"));
    let dir = src.join("t/m");
    std::fs::create_dir_all(&dir).unwrap();
    let n = 100_017;
    for i in 0..n {
        std::fs::write(dir.join(format!("f{i:06}")), i.to_string()).unwrap();
    }
    import(&src, &dataset, &[]);
    let mnt = Mounted::new(&dataset, &tmp.path().join("mnt"), &[]);
    let mut names: Vec<String> = std::fs::read_dir(mnt.path.join("t/m"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names.len(), n);
    names.sort();
    names.dedup();
    assert_eq!(names.len(), n, "duplicate entries in the listing");
    assert_eq!(names[0], "f000000");
    assert_eq!(names[n - 1], format!("f{:06}", n - 1));
    assert_eq!(
        std::fs::read_to_string(mnt.path.join("t/m/f054321")).unwrap(),
        "54321"
    );
    let ls = Command::new("ls")
        .arg("-f")
        .arg(mnt.path.join("t/m"))
        .output()
        .unwrap();
    assert_eq!(
        ls.stdout
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .count(),
        n + 2
    );
}

#[test]
fn read_only_and_statfs_answers() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let (src, dataset) = (tmp.path().join("src"), tmp.path().join("dataset"));
    write_file(&src.join("t/m/a.txt"), b"abc");
    import(&src, &dataset, IMPORT_ARGS);
    let mnt = Mounted::new(&dataset, &tmp.path().join("mnt"), &[]);
    let err = std::fs::OpenOptions::new()
        .write(true)
        .open(mnt.path.join("t/m/a.txt"))
        .unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EROFS));
    let err = std::fs::write(mnt.path.join("t/m/new.txt"), b"x").unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EROFS));
    let err = std::fs::read(mnt.path.join("t/m/missing")).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
    let stat = Command::new("stat")
        .args(["-f", "-c", "%l %S"])
        .arg(&mnt.path)
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&stat.stdout).trim(), "255 4096");
    // `ls -l` must not fail on extended attributes.
    run_ok("ls", &["-lR", mnt.path.to_str().unwrap()]);
}

#[test]
fn foreground_mount_unmounts_on_sigterm_and_sigint() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let (src, dataset) = (tmp.path().join("src"), tmp.path().join("dataset"));
    write_file(&src.join("t/m/a.txt"), b"abc");
    import(&src, &dataset, IMPORT_ARGS);
    let mnt = tmp.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let mnt = mnt.canonicalize().unwrap();
    for signal in [libc::SIGTERM, libc::SIGINT] {
        let mut child = Command::new(PACKFS)
            .args([
                "mount",
                "--foreground",
                "--read-only",
                dataset.to_str().unwrap(),
                mnt.to_str().unwrap(),
            ])
            .spawn()
            .unwrap();
        wait_until("foreground mount", Duration::from_secs(20), || {
            is_mounted(&mnt)
        });
        assert_eq!(std::fs::read(mnt.join("t/m/a.txt")).unwrap(), b"abc");
        // SAFETY: signalling our own child process.
        unsafe { libc::kill(child.id() as i32, signal) };
        let status = child.wait().unwrap();
        assert!(status.success(), "exit after signal {signal}: {status}");
        assert!(!is_mounted(&mnt), "still mounted after signal {signal}");
    }
}

#[test]
fn mount_of_a_missing_dataset_fails_with_a_clear_error() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let mnt = tmp.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let out = packfs(&[
        "mount",
        tmp.path().join("nope").to_str().unwrap(),
        mnt.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("nope"), "{err}");
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let out = packfs(&["mount", empty.to_str().unwrap(), mnt.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("ref \"main\" does not exist"), "{err}");
    assert!(!is_mounted(&mnt.canonicalize().unwrap()));
}

#[test]
fn stats_file_counts_reads_and_stays_out_of_listings() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let (src, dataset) = (tmp.path().join("src"), tmp.path().join("dataset"));
    let mut rng = Rng::new(11);
    for i in 0..20 {
        write_file(&src.join(format!("t/m/{i:02}")), &rng.bytes(30_000));
    }
    import(&src, &dataset, &[]);
    let mnt = Mounted::new(&dataset, &tmp.path().join("mnt"), &[]);
    let names: Vec<_> = std::fs::read_dir(&mnt.path)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["t"], "the control directory is not listed");
    for i in 0..20 {
        std::fs::read(mnt.path.join(format!("t/m/{i:02}"))).unwrap();
    }
    let stats = std::fs::read_to_string(mnt.path.join(".packfs/stats")).unwrap();
    let counter = |name: &str| stat_counter(&mnt.path, name);
    assert!(counter("gets") >= 1, "{stats}");
    assert!(counter("bytes_fetched") >= 600_000, "{stats}");
    assert!(
        counter("cache_hits") > 0,
        "one block serves several small items: {stats}"
    );
    assert_eq!(counter("errors"), 0, "{stats}");
}

/// Reads `files` (path below `mnt`, bytes) in order, checking each.
fn read_checked(mnt: &Path, files: &[(String, Vec<u8>)]) {
    for (name, bytes) in files {
        assert!(std::fs::read(mnt.join(name)).unwrap() == *bytes, "{name}");
    }
}

/// What a training loader does every epoch: small items of one pack in a
/// shuffled order. Each costs one GET of its own bytes, not blocks or
/// read-ahead of its neighbours; a scan in pack order still reads ahead.
#[test]
fn a_shuffled_scan_fetches_what_it_reads_and_a_sorted_one_reads_ahead() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let (src, dataset) = (tmp.path().join("src"), tmp.path().join("dataset"));
    let mut rng = Rng::new(17);
    let mut files = Vec::new();
    for i in 0..400 {
        let len = (16 << 10) + rng.below(48 << 10) as usize;
        let bytes = rng.bytes(len);
        let name = format!("t/m/{i:04}");
        write_file(&src.join(&name), &bytes);
        files.push((name, bytes));
    }
    import(&src, &dataset, &[]);
    let delivered: u64 = files.iter().map(|(_, b)| b.len() as u64).sum();
    let mut shuffled = files.clone();
    for i in (1..shuffled.len()).rev() {
        shuffled.swap(i, rng.below(i as u64 + 1) as usize);
    }
    // The default (read-write) mount and a read-only one read alike.
    for read_only in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let mnt = match read_only {
            true => Mounted::new(&dataset, &dir.path().join("mnt"), &[]),
            false => Mounted::writable_in(dir.path(), &dataset, &[]),
        };
        read_checked(&mnt.path, &shuffled);
        let fetched = stat_counter(&mnt.path, "bytes_fetched");
        assert!(
            fetched as f64 <= 1.5 * delivered as f64,
            "read-only {read_only}: fetched {fetched} bytes to deliver {delivered}"
        );
        mnt.unmount();
    }
    let mnt = Mounted::new(&dataset, &tmp.path().join("mnt"), &[]);
    read_checked(&mnt.path, &files);
    let gets = stat_counter(&mnt.path, "gets");
    assert!(
        stat_counter(&mnt.path, "prefetch_gets") > 0 && gets < files.len() as u64 / 10,
        "a sorted scan is read ahead in few GETs ({gets} for {} files)",
        files.len()
    );
}

#[test]
fn cache_dir_serves_a_remount_without_the_store() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let (src, dataset) = (tmp.path().join("src"), tmp.path().join("dataset"));
    let mut rng = Rng::new(5);
    for i in 0..10 {
        write_file(&src.join(format!("t/m/{i}")), &rng.bytes(50_000));
    }
    import(&src, &dataset, &[]);
    let cache = tmp.path().join("cache");
    let args = ["--cache-dir", cache.to_str().unwrap()];
    let mnt = Mounted::new(&dataset, &tmp.path().join("mnt"), &args);
    for i in 0..10 {
        std::fs::read(mnt.path.join(format!("t/m/{i}"))).unwrap();
    }
    mnt.unmount();
    // Block files are written behind the reads; the pack is 500,000 bytes.
    let cached = || {
        let (_, files) = walk(&cache);
        files
            .iter()
            .map(|f| std::fs::metadata(cache.join(f)).unwrap().len())
            .sum::<u64>()
    };
    wait_until("blocks on disk", Duration::from_secs(10), || {
        cached() >= 500_000
    });
    // With the data objects gone, only the cache directory can serve reads.
    std::fs::remove_dir_all(dataset.join("t")).unwrap();
    let mnt = Mounted::new(&dataset, &tmp.path().join("mnt"), &args);
    for i in 0..10 {
        let rel = format!("t/m/{i}");
        assert_eq!(
            std::fs::read(mnt.path.join(&rel)).unwrap(),
            std::fs::read(src.join(&rel)).unwrap()
        );
    }
}
