//! Writes through a read-write mount: files copied or written in are
//! packed, committed and read back byte for byte after a remount. The
//! main suites run twice: on a local directory and on the test S3 server.

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::fs::Permissions;
use std::io::Write;
use std::os::unix::fs::{FileExt, PermissionsExt as _};
use std::path::Path;
use std::process::Command;

use crate::common::*;

/// A dataset with one item, `t/seed/readme.txt`, and an empty modality
/// directory's worth of room: callers mkdir what they need.
fn seeded(home: Home, dir: &Path) -> Home {
    let src = dir.join("seed-src");
    write_file(&src.join("t/seed/readme.txt"), b"seed\n");
    home.import(&src, &[]);
    home
}

/// `#[test]`s running `suite` on a local dataset and on S3.
macro_rules! on_local_and_s3 {
    ($suite:ident, $local:ident, $s3:ident) => {
        #[test]
        fn $local() {
            require_fuse();
            let tmp = tempfile::tempdir().unwrap();
            $suite(Home::local(tmp.path()), tmp.path());
        }

        #[test]
        fn $s3() {
            require_fuse();
            let tmp = tempfile::tempdir().unwrap();
            $suite(Home::s3(), tmp.path());
        }
    };
}

on_local_and_s3!(
    cp_r_of_2000_files,
    cp_r_of_2000_files_local,
    cp_r_of_2000_files_on_s3
);

/// `cp -r` of 2,000 files is packed into exactly ⌈n/256⌉ packs, committed,
/// and survives a remount.
fn cp_r_of_2000_files(home: Home, dir: &Path) {
    let home = seeded(home, dir);
    let tmp = dir;
    let src = tmp.join("src");
    let mut rng = Rng::new(42);
    let mut files = 0usize;
    for d in 0..10 {
        for i in 0..200 {
            let len = match i % 50 {
                0 => 0,
                1 => 1_500_000 + rng.below(1_000_000) as usize,
                _ => rng.below(64 << 10) as usize,
            };
            write_file(&src.join(format!("d{d}/f{i:04}.bin")), &rng.bytes(len));
            files += 1;
        }
    }
    let (mnt, spool) = (tmp.join("mnt"), tmp.join("spool"));
    // No idle commits (a slow machine may pause): only full packs and the
    // final commit at unmount.
    let args = ["--pack-items", "256", "--idle-flush", "3600"];
    let m = home.mount_rw(&mnt, &spool, &args);
    std::fs::create_dir(m.path.join("t/img")).unwrap();
    run_ok(
        "cp",
        &[
            "-r",
            &format!("{}/.", src.display()),
            m.path.join("t/img").to_str().unwrap(),
        ],
    );
    diff_r(&src, &m.path.join("t/img"));
    m.unmount();

    // Committed: a read-only remount serves exactly the source.
    let m = home.mount(&mnt, &[]);
    diff_r(&src, &m.path.join("t/img"));
    assert_eq!(
        std::fs::read(m.path.join("t/seed/readme.txt")).unwrap(),
        b"seed\n"
    );
    m.unmount();
    home.verify();
    // Flushes for full packs leave the rest for later: ⌈n / 256⌉ packs.
    // The files over 1 MB are still far below --pack-bytes (64 MiB).
    let packs = home.data_objects("t", "img");
    assert_eq!(
        packs,
        files.div_ceil(256),
        "{files} files with --pack-items 256"
    );
    let log = home.log();
    assert!(log.contains("packfs/"), "{log}");
    // The spool holds no bytes once everything is committed (empty files
    // stay for the next mount's new files).
    let data = std::fs::read_dir(spool.join("data")).unwrap();
    assert!(data
        .map(|e| e.unwrap().metadata().unwrap().len())
        .all(|len| len == 0));
}

/// What a file should hold, kept alongside the real writes.
struct Model(BTreeMap<String, Vec<u8>>);

impl Model {
    fn check(&self, root: &Path) {
        for (rel, bytes) in &self.0 {
            let got = std::fs::read(root.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
            assert!(
                got == *bytes,
                "{rel}: {} bytes, expected {}",
                got.len(),
                bytes.len()
            );
        }
        let (_, listed) = walk(&root.join("t/m"));
        let mut listed: Vec<String> = listed
            .iter()
            .map(|p| format!("t/m/{}", p.display()))
            .collect();
        listed.sort();
        let expected: Vec<&String> = self.0.keys().filter(|k| k.starts_with("t/m/")).collect();
        assert_eq!(listed.iter().collect::<Vec<_>>(), expected);
    }
}

on_local_and_s3!(
    writes_and_renames,
    writes_truncates_overwrites_renames_and_unlinks_survive_a_remount,
    writes_truncates_overwrites_renames_and_unlinks_survive_a_remount_on_s3
);

/// Random writes, truncates, copy-up overwrites, renames and unlinks are
/// all exactly as a model says, before and after a remount.
fn writes_and_renames(home: Home, tmp: &Path) {
    let src = tmp.join("src");
    let mut rng = Rng::new(7);
    let mut model = Model(BTreeMap::new());
    for name in ["a", "b", "c", "dir/x", "dir/y"] {
        let len = 10_000 + rng.below(50_000) as usize;
        let bytes = rng.bytes(len);
        write_file(&src.join("t/m").join(name), &bytes);
        model.0.insert(format!("t/m/{name}"), bytes);
    }
    home.import(&src, &[]);
    let (mnt, spool) = (tmp.join("mnt"), tmp.join("spool"));
    let m = home.mount_rw(&mnt, &spool, &[]);
    let p = |rel: &str| m.path.join(rel);

    // Random-offset writes, with a hole, into a new file.
    let f = OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(false)
        .open(p("t/m/new"))
        .unwrap();
    let mut expect = vec![0u8; 0];
    for _ in 0..40 {
        let (off, len) = (rng.below(300_000) as usize, 1 + rng.below(20_000) as usize);
        let data = rng.bytes(len);
        f.write_all_at(&data, off as u64).unwrap();
        if expect.len() < off + len {
            expect.resize(off + len, 0);
        }
        expect[off..off + len].copy_from_slice(&data);
    }
    // Truncate down, then up (the new tail reads as zeros).
    f.set_len(100_000).unwrap();
    expect.truncate(100_000);
    f.set_len(150_000).unwrap();
    expect.resize(150_000, 0);
    drop(f);
    model.0.insert("t/m/new".into(), expect);

    // Overwrite inside a packed item: its old bytes are copied up first.
    let f = OpenOptions::new().write(true).open(p("t/m/a")).unwrap();
    f.write_all_at(b"PATCHED", 5000).unwrap();
    drop(f);
    model.0.get_mut("t/m/a").unwrap()[5000..5007].copy_from_slice(b"PATCHED");
    // Overwrite with truncation, and truncate a packed item by path.
    std::fs::write(p("t/m/b"), b"short now").unwrap();
    model.0.insert("t/m/b".into(), b"short now".to_vec());
    OpenOptions::new()
        .write(true)
        .open(p("t/m/c"))
        .unwrap()
        .set_len(1234)
        .unwrap();
    model.0.get_mut("t/m/c").unwrap().truncate(1234);

    // Renames: a packed item, a directory, a new file over an existing one.
    std::fs::rename(p("t/m/dir/x"), p("t/m/x-renamed")).unwrap();
    let x = model.0.remove("t/m/dir/x").unwrap();
    model.0.insert("t/m/x-renamed".into(), x);
    std::fs::rename(p("t/m/dir"), p("t/m/dir2")).unwrap();
    let y = model.0.remove("t/m/dir/y").unwrap();
    model.0.insert("t/m/dir2/y".into(), y);
    std::fs::write(p("t/m/tmp"), b"replacement").unwrap();
    std::fs::rename(p("t/m/tmp"), p("t/m/x-renamed")).unwrap();
    model
        .0
        .insert("t/m/x-renamed".into(), b"replacement".to_vec());

    // Unlinks: a packed item and a new file.
    std::fs::remove_file(p("t/m/c")).unwrap();
    model.0.remove("t/m/c");
    std::fs::write(p("t/m/gone"), b"x").unwrap();
    std::fs::remove_file(p("t/m/gone")).unwrap();

    // A new modality; items cannot cross modalities in place (mv copies).
    std::fs::create_dir(p("t/other")).unwrap();
    let err = std::fs::rename(p("t/m/new"), p("t/other/new")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EXDEV));
    std::fs::write(p("t/other/o"), b"other").unwrap();
    model.0.insert("t/other/o".into(), b"other".to_vec());
    // Nothing may live above a modality, and names are bounded.
    let err = std::fs::write(p("t/loose"), b"x").unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EPERM));
    let err = std::fs::write(p(&format!("t/m/{}", "n".repeat(256))), b"x").unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENAMETOOLONG));

    model.check(&m.path);
    m.unmount();
    let m = home.mount(&mnt, &[]);
    model.check(&m.path);
    m.unmount();
    home.verify();
}

#[test]
fn fsync_returns_after_the_commit() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let home = seeded(Home::local(tmp.path()), tmp.path());
    let (mnt, spool) = (tmp.path().join("mnt"), tmp.path().join("spool"));
    // An idle delay far longer than the test: only fsync can commit.
    let m = home.mount_rw(&mnt, &spool, &[]);
    let path = m.path.join("t/seed/new.txt");
    let f = OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(&path)
        .unwrap();
    f.write_all_at(b"durable", 0).unwrap();
    f.sync_all().unwrap();
    drop(f);
    let log = home.log();
    assert!(log.contains(" mount"), "{log}");
    let cat = home.packfs_ok(&["cat", home.location(), "t/seed/new.txt"]);
    assert_eq!(cat.stdout, b"durable");
}

on_local_and_s3!(
    two_mounts,
    two_mounts_writing_different_files_keep_both,
    two_mounts_writing_different_files_keep_both_on_s3
);

/// Two read-write mounts of one ref: the second commit merges onto the
/// first and both sets of files are kept.
fn two_mounts(home: Home, tmp: &Path) {
    let home = seeded(home, tmp);
    let a = home.mount_rw(&tmp.join("mnt-a"), &tmp.join("spool-a"), &[]);
    let b = home.mount_rw(&tmp.join("mnt-b"), &tmp.join("spool-b"), &[]);
    for i in 0..50 {
        std::fs::write(a.path.join(format!("t/seed/a{i}")), format!("from a {i}")).unwrap();
        std::fs::write(b.path.join(format!("t/seed/b{i}")), format!("from b {i}")).unwrap();
    }
    // Commit a first, then b onto a ref a has moved: b must merge.
    Command::new("sync")
        .arg("-f")
        .arg(a.path.join("t/seed"))
        .status()
        .unwrap();
    a.unmount();
    b.unmount();
    let m = home.mount(&tmp.join("mnt-a"), &[]);
    for i in 0..50 {
        for who in ["a", "b"] {
            let got = std::fs::read_to_string(m.path.join(format!("t/seed/{who}{i}"))).unwrap();
            assert_eq!(got, format!("from {who} {i}"));
        }
    }
    m.unmount();
    home.verify();
    let log = home.log();
    let newest = log.split("\nmanifest ").next().unwrap();
    assert!(
        newest.contains("Merge:"),
        "b's commit was merged onto a's: {log}"
    );
}

on_local_and_s3!(
    kill_9,
    closed_files_survive_kill_9_and_are_committed_by_the_next_mount,
    closed_files_survive_kill_9_and_are_committed_by_the_next_mount_on_s3
);

/// A mount killed with SIGKILL: its closed files are committed by the next
/// mount from the journal; a half-written one goes to lost+found.
fn kill_9(home: Home, tmp: &Path) {
    let home = seeded(home, tmp);
    let (mnt, spool) = (tmp.join("mnt"), tmp.join("spool"));
    // No idle commit: only the journal can save what is written here.
    let m = home.mount_rw(&mnt, &spool, &["--idle-flush", "3600"]);
    let p = |rel: &str| m.path.join(rel);
    let mut rng = Rng::new(9);
    let mut closed = BTreeMap::new();
    std::fs::create_dir(p("t/seed/dir")).unwrap();
    for i in 0..30 {
        let len = rng.below(100_000) as usize;
        let bytes = rng.bytes(len);
        std::fs::write(p(&format!("t/seed/dir/f{i}")), &bytes).unwrap();
        closed.insert(format!("t/seed/dir/f{i}"), bytes);
    }
    std::fs::rename(p("t/seed/dir/f0"), p("t/seed/moved")).unwrap();
    let moved = closed.remove("t/seed/dir/f0").unwrap();
    closed.insert("t/seed/moved".into(), moved);
    std::fs::remove_file(p("t/seed/dir/f1")).unwrap();
    closed.remove("t/seed/dir/f1");
    std::fs::remove_file(p("t/seed/readme.txt")).unwrap();
    let log = home.log();
    assert!(
        !log.contains(" mount"),
        "nothing may be committed yet: {log}"
    );
    // Half-written at the kill: must not be committed as if complete. (No
    // process may start while it is open: the child's copy of the
    // descriptor, closed at exec, would be a close of the file.)
    let open = OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(p("t/seed/open"))
        .unwrap();
    open.write_all_at(b"half", 0).unwrap();
    m.kill();
    drop(open);
    m.unmount(); // clears the dead mount

    let m = home.mount_rw(&mnt, &spool, &[]);
    for (rel, bytes) in &closed {
        assert_eq!(&std::fs::read(m.path.join(rel)).unwrap(), bytes, "{rel}");
    }
    assert!(!m.path.join("t/seed/readme.txt").exists());
    assert!(!m.path.join("t/seed/dir/f1").exists());
    assert!(
        !m.path.join("t/seed/open").exists(),
        "a half-written file was committed"
    );
    m.unmount();
    home.verify();
    let log = home.log();
    assert!(log.contains(" mount"), "the next mount committed: {log}");
    // The half-written file's bytes are kept aside, not deleted.
    let lost = walk(&spool.join("lost+found")).1;
    assert_eq!(lost.len(), 1, "{lost:?}");
    assert!(
        lost[0].ends_with("t/seed/open"),
        "kept under its path: {lost:?}"
    );
    let kept = std::fs::read(spool.join("lost+found").join(&lost[0])).unwrap();
    assert_eq!(kept, b"half");
}

/// The README's `cat MOUNT/.packfs/stats` on a read-write mount, then more
/// writes: each must reach the writer and be committed at unmount (an
/// answer to the control file's OPEN that switched the kernel's no-open
/// mode on used to send later opens nowhere).
#[test]
fn writes_after_reading_the_stats_file_are_committed() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let home = seeded(Home::local(&tmp.path().join("ds")), tmp.path());
    let m = home.mount_rw(&tmp.path().join("mnt"), &tmp.path().join("spool"), &[]);
    let p = |rel: &str| m.path.join(rel);
    let append = |rel: &str, text: &str| {
        let mut f = OpenOptions::new().append(true).open(p(rel)).unwrap();
        f.write_all(text.as_bytes()).unwrap();
    };
    append("t/seed/readme.txt", "X\n");
    let stats = std::fs::read_to_string(p(".packfs/stats")).unwrap();
    assert!(stats.contains("gets"), "{stats}");
    std::fs::write(p("t/seed/b.txt"), "b\n").unwrap();
    append("t/seed/b.txt", "Y\n");
    std::fs::write(p("t/seed/c.txt"), "Z\n").unwrap();
    let readme = std::fs::read_to_string(p("t/seed/readme.txt")).unwrap();
    m.unmount();
    let cat = |rel: &str| {
        String::from_utf8(home.packfs_ok(&["cat", home.location(), rel]).stdout).unwrap()
    };
    assert_eq!(cat("t/seed/c.txt"), "Z\n");
    assert_eq!(cat("t/seed/b.txt"), "b\nY\n");
    assert_eq!(cat("t/seed/readme.txt"), readme);
    assert!(readme.ends_with("X\n"));
}

/// `echo x > f` and a SIGKILL right after, with no pause: `close` had
/// returned, so the file must be there after the next mount, under its name.
#[test]
fn a_file_closed_just_before_kill_9_is_kept() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let home = seeded(Home::local(&tmp.path().join("ds")), tmp.path());
    let (mnt, spool) = (tmp.path().join("mnt"), tmp.path().join("spool"));
    for round in 0..3 {
        let m = home.mount_rw(&mnt, &spool, &["--idle-flush", "3600"]);
        let name = format!("t/seed/echo{round}.txt");
        std::fs::write(m.path.join(&name), format!("x{round}\n")).unwrap();
        // SAFETY: killing the daemon this test started.
        unsafe { libc::kill(m.pid.expect("daemon pid") as i32, libc::SIGKILL) };
        wait_until(
            "the daemon to die",
            std::time::Duration::from_secs(10),
            || !Path::new(&format!("/proc/{}", m.pid.unwrap())).exists(),
        );
        m.unmount();
    }
    let m = home.mount_rw(&mnt, &spool, &[]);
    m.unmount();
    for round in 0..3 {
        let name = format!("t/seed/echo{round}.txt");
        let out = home.packfs_ok(&["cat", home.location(), &name]).stdout;
        assert_eq!(out, format!("x{round}\n").as_bytes(), "{name}");
    }
    assert!(
        !spool.join("lost+found").exists(),
        "nothing was half-written"
    );
}

#[test]
fn a_full_spool_waits_for_commits_and_refuses_what_cannot_fit() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let home = seeded(Home::local(tmp.path()), tmp.path());
    let (mnt, spool) = (tmp.path().join("mnt"), tmp.path().join("spool"));
    let m = home.mount_rw(
        &mnt,
        &spool,
        &["--spool-bytes", "1MiB", "--idle-flush", "3600"],
    );
    let mut rng = Rng::new(3);
    // 4 MB through a 1 MiB spool: each write that does not fit waits for a
    // commit of the closed files to free room.
    let mut written = Vec::new();
    for i in 0..10 {
        let bytes = rng.bytes(400_000);
        std::fs::write(m.path.join(format!("t/seed/{i}")), &bytes).unwrap();
        written.push(bytes);
    }
    // One file larger than the whole spool can never fit.
    let err = std::fs::write(m.path.join("t/seed/huge"), vec![7u8; 2 << 20]).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENOSPC));
    let _ = std::fs::remove_file(m.path.join("t/seed/huge"));
    m.unmount();
    let m = home.mount(&mnt, &[]);
    for (i, bytes) in written.iter().enumerate() {
        assert_eq!(
            &std::fs::read(m.path.join(format!("t/seed/{i}"))).unwrap(),
            bytes
        );
    }
}

#[test]
fn rm_rf_of_a_large_directory_removes_everything() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let home = seeded(Home::local(tmp.path()), tmp.path());
    let m = home.mount_rw(&tmp.path().join("mnt"), &tmp.path().join("spool"), &[]);
    let dir = m.path.join("t/seed/many");
    std::fs::create_dir(&dir).unwrap();
    for i in 0..600 {
        std::fs::write(dir.join(format!("file-with-a-long-name-{i:04}")), b"x").unwrap();
    }
    // rm unlinks between readdir calls: each listing must resume correctly.
    run_ok("rm", &["-rf", dir.to_str().unwrap()]);
    assert!(!dir.exists());
    m.unmount();
    let m = home.mount(&tmp.path().join("mnt"), &[]);
    assert!(!m.path.join("t/seed/many").exists());
    assert_eq!(
        std::fs::read(m.path.join("t/seed/readme.txt")).unwrap(),
        b"seed\n"
    );
}

#[test]
fn owner_only_keeps_others_out_and_the_spool_is_private() {
    use std::os::unix::fs::PermissionsExt;
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    // Traversable by others, so only the mount itself can refuse them.
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let home = seeded(Home::local(tmp.path()), tmp.path());
    let (mnt, spool) = (tmp.path().join("mnt"), tmp.path().join("spool"));
    let m = home.mount_rw(&mnt, &spool, &["--owner-only"]);
    std::fs::write(m.path.join("t/seed/mine"), b"x").unwrap();
    let outside = as_nobody(&["ls", tmp.path().to_str().unwrap()]);
    assert!(
        outside.status.success(),
        "the test directory itself must be readable"
    );
    let mode = std::fs::metadata(tmp.path().join("spool"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700, "spool mode {mode:o}");
    // With --owner-only the kernel lets no other user in, root's files
    // or not.
    let listing = as_nobody(&["ls", m.path.join("t/seed").to_str().unwrap()]);
    assert!(!listing.status.success(), "another user listed the mount");
    assert!(
        String::from_utf8_lossy(&listing.stderr).contains("Permission denied"),
        "{}",
        String::from_utf8_lossy(&listing.stderr)
    );
}

/// Sends SIGTERM to the daemon of `m` and returns how long it took to exit.
fn terminate(m: &Mounted) -> std::time::Duration {
    let pid = m.pid.expect("daemon pid");
    let start = std::time::Instant::now();
    // SAFETY: signalling the daemon this test started.
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    wait_until(
        "the daemon to exit",
        std::time::Duration::from_secs(60),
        || !Path::new(&format!("/proc/{pid}")).exists(),
    );
    start.elapsed()
}

#[test]
fn sigterm_finishes_in_flight_uploads_then_commits_and_unmounts() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let home = seeded(Home::local(tmp.path()), tmp.path());
    // Slow PUTs and small packs: threshold flushes are uploading when the
    // signal comes.
    let args = [
        "--pack-items",
        "5",
        "--idle-flush",
        "3600",
        "--inject-faults",
        "put-delay=300ms",
    ];
    let m = home.mount_rw(&tmp.path().join("mnt"), &tmp.path().join("spool"), &args);
    let mut rng = Rng::new(5);
    let mut written = BTreeMap::new();
    for i in 0..23 {
        let len = rng.below(50_000) as usize;
        let bytes = rng.bytes(len);
        std::fs::write(m.path.join(format!("t/seed/f{i}")), &bytes).unwrap();
        written.insert(format!("t/seed/f{i}"), bytes);
    }
    let took = terminate(&m);
    assert!(!is_mounted(&m.path));
    let m = home.mount(&tmp.path().join("mnt"), &[]);
    for (rel, bytes) in &written {
        assert_eq!(&std::fs::read(m.path.join(rel)).unwrap(), bytes, "{rel}");
    }
    m.unmount();
    home.verify();
    eprintln!("SIGTERM to exit, with uploads in flight: {took:?}");
}

#[test]
fn sigterm_with_a_hung_store_is_bounded_and_the_next_mount_commits() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let home = seeded(Home::local(tmp.path()), tmp.path());
    let (mnt, spool) = (tmp.path().join("mnt"), tmp.path().join("spool"));
    let before = home.log();
    let args = [
        "--idle-flush",
        "3600",
        "--shutdown-timeout",
        "1",
        "--inject-faults",
        "put-delay=1h",
    ];
    let m = home.mount_rw(&mnt, &spool, &args);
    std::fs::write(m.path.join("t/seed/late"), b"committed by the next mount").unwrap();
    let took = terminate(&m);
    assert!(
        took < std::time::Duration::from_secs(15),
        "SIGTERM took {took:?} with --shutdown-timeout 1"
    );
    assert!(!is_mounted(&m.path));
    assert_eq!(home.log(), before, "nothing could be committed");
    // The next mount (store healthy again) commits what was left.
    let m = home.mount_rw(&mnt, &spool, &[]);
    assert_eq!(
        std::fs::read(m.path.join("t/seed/late")).unwrap(),
        b"committed by the next mount"
    );
    m.unmount();
    home.verify();
    let cat = home.packfs_ok(&["cat", home.location(), "t/seed/late"]);
    assert_eq!(cat.stdout, b"committed by the next mount");
}

/// `runuser -u nobody -- ARGS…`.
fn as_nobody(args: &[&str]) -> std::process::Output {
    Command::new("runuser")
        .args(["-u", "nobody", "--"])
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn a_root_mount_lets_others_in_under_kernel_permission_checks() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let home = seeded(Home::local(tmp.path()), tmp.path());
    let (mnt, spool) = (tmp.path().join("mnt"), tmp.path().join("spool"));
    // Root mounts (the tests run as root): others get in by default.
    let m = home.mount_rw(&mnt, &spool, &[]);
    let p = |rel: &str| m.path.join(rel).to_str().unwrap().to_string();
    // Others read what the mode bits let them read…
    let read = as_nobody(&["cat", &p("t/seed/readme.txt")]);
    assert!(read.status.success(), "{read:?}");
    assert_eq!(read.stdout, b"seed\n");
    // …and cannot write into directories they do not own.
    let write = as_nobody(&["touch", &p("t/seed/intruder")]);
    assert!(
        !write.status.success(),
        "nobody wrote into root's directory"
    );
    assert!(String::from_utf8_lossy(&write.stderr).contains("Permission denied"));
    // A file the owner makes private is private: the kernel checks modes.
    std::fs::write(m.path.join("t/seed/secret"), b"mine").unwrap();
    let meta = std::fs::metadata(m.path.join("t/seed/secret")).unwrap();
    assert_eq!(
        (meta.uid(), meta.gid()),
        (0, 0),
        "owned by the mounting user"
    );
    std::fs::set_permissions(
        m.path.join("t/seed/secret"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    let denied = as_nobody(&["cat", &p("t/seed/secret")]);
    assert!(!denied.status.success(), "nobody read a 0600 file");
    m.unmount();

    // With --uid/--gid the mount belongs to another user, who may write;
    // what they create is theirs and is committed.
    let m = home.mount_rw(
        &mnt,
        &spool,
        &["--allow-other", "--uid", "65534", "--gid", "65534"],
    );
    let created = as_nobody(&[
        "sh",
        "-c",
        &format!("echo hello > {}", p("t/seed/by-nobody")),
    ]);
    assert!(created.status.success(), "{created:?}");
    let meta = std::fs::metadata(m.path.join("t/seed/by-nobody")).unwrap();
    assert_eq!((meta.uid(), meta.gid()), (65534, 65534));
    m.unmount();
    let cat = home.packfs_ok(&["cat", home.location(), "t/seed/by-nobody"]);
    assert_eq!(cat.stdout, b"hello\n");

    // --file-mode/--dir-mode set what stored nodes show, and the kernel
    // enforces it for others.
    let modes = ["--allow-other", "--file-mode", "0640", "--dir-mode", "0750"];
    let m = home.mount(&mnt, &modes);
    let mode = |rel: &str| mode_of(&m.path.join(rel));
    assert_eq!((mode("t/seed"), mode("t/seed/readme.txt")), (0o750, 0o640));
    let denied = as_nobody(&["ls", &p("t/seed")]);
    assert!(
        !denied.status.success(),
        "nobody listed a 0750 root directory"
    );
    m.unmount();
}

on_local_and_s3!(
    kill_9_mid_commit,
    kill_9_at_each_step_of_a_commit_leaves_a_valid_ref,
    kill_9_at_each_step_of_a_commit_leaves_a_valid_ref_on_s3
);

/// A mount killed with SIGKILL while its commit is under way — uploading
/// packs, Tracks or the Manifest (each PUT slowed to 400 ms) — leaves the
/// ref on a Manifest that verifies, and the next mount commits every file,
/// moves none to lost+found and leaves no version in the spool.
fn kill_9_mid_commit(home: Home, tmp: &Path) {
    let home = seeded(home, tmp);
    let mut expected = BTreeMap::new();
    for (round, kill_after_ms) in [150u64, 550, 950, 1350].into_iter().enumerate() {
        let (mnt, spool) = (tmp.join("mnt"), tmp.join(format!("spool{round}")));
        let args = ["--idle-flush", "3600", "--inject-faults", "put-delay=400ms"];
        let m = home.mount_rw(&mnt, &spool, &args);
        for i in 0..5 {
            let rel = format!("t/seed/r{round}-{i}");
            let bytes = format!("round {round} file {i}").into_bytes();
            std::fs::write(m.path.join(&rel), &bytes).unwrap();
            expected.insert(rel, bytes);
        }
        // fsync starts the commit; the kill lands somewhere inside it.
        let last = m.path.join(format!("t/seed/r{round}-4"));
        let syncer = std::thread::spawn(move || {
            let file = OpenOptions::new().write(true).open(last).unwrap();
            let _ = file.sync_all();
        });
        std::thread::sleep(std::time::Duration::from_millis(kill_after_ms));
        m.kill();
        m.unmount();
        syncer.join().unwrap();
        home.verify();
        // The next mount with that spool commits what the killed one had,
        // and keeps nothing in lost+found: every file was closed.
        let m = home.mount_rw(&mnt, &spool, &[]);
        m.unmount();
        home.verify();
        assert!(
            !spool.join("lost+found").exists(),
            "round {round}: lost+found holds {:?}",
            walk(&spool.join("lost+found")).1
        );
        let held = walk(&spool.join("data"))
            .1
            .iter()
            .filter(|f| std::fs::metadata(spool.join("data").join(f)).is_ok_and(|m| m.len() > 0))
            .count();
        assert_eq!(held, 0, "round {round}: versions left in the spool");
    }
    let m = home.mount(&tmp.join("mnt"), &[]);
    for (rel, bytes) in &expected {
        assert_eq!(&std::fs::read(m.path.join(rel)).unwrap(), bytes, "{rel}");
    }
}

/// `rsync -a` into a mount twice, then after a remount a third time with
/// `--itemize-changes`: nothing is left to transfer or fix, because modes,
/// mtimes and directories (empty ones too) are stored.
#[test]
fn rsync_a_into_a_mount_is_idempotent_across_remounts() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let home = seeded(Home::local(&tmp.path().join("ds")), tmp.path());
    let src = tmp.path().join("rsync-src");
    let mut rng = Rng::new(21);
    for i in 0..40 {
        let rel = format!("d{}/f{i}.bin", i % 4);
        let len = rng.below(20_000) as usize;
        write_file(&src.join(&rel), &rng.bytes(len));
    }
    std::fs::create_dir_all(src.join("empty/deeper")).unwrap();
    std::fs::set_permissions(src.join("d1/f1.bin"), Permissions::from_mode(0o600)).unwrap();
    std::fs::set_permissions(src.join("d2"), Permissions::from_mode(0o750)).unwrap();
    std::fs::set_permissions(src.join("d3/f3.bin"), Permissions::from_mode(0o755)).unwrap();
    // Times from the past, as a checkout or an unpacked archive has.
    run_ok(
        "touch",
        &[
            "-d",
            "2001-02-03 04:05:06.789",
            src.join("d0/f0.bin").to_str().unwrap(),
        ],
    );
    run_ok(
        "touch",
        &[
            "-d",
            "1999-12-31 23:59:59",
            src.join("empty").to_str().unwrap(),
        ],
    );

    let (mnt, spool) = (tmp.path().join("mnt"), tmp.path().join("spool"));
    let rsync = |m: &Mounted, extra: &[&str]| {
        let target = format!("{}/", m.path.join("t/seed/copy").display());
        let mut args = vec!["-a"];
        args.extend_from_slice(extra);
        let from = format!("{}/", src.display());
        args.extend_from_slice(&[&from, &target]);
        String::from_utf8(run_ok("rsync", &args).stdout).unwrap()
    };
    let m = home.mount_rw(&mnt, &spool, &[]);
    rsync(&m, &[]);
    rsync(&m, &[]);
    m.unmount();
    let m = home.mount_rw(&mnt, &spool, &[]);
    let changes = rsync(&m, &["--itemize-changes"]);
    assert_eq!(changes, "", "rsync found differences after a remount");
    assert!(m.path.join("t/seed/copy/empty/deeper").is_dir());
    let mode = |rel: &str| mode_of(&m.path.join(rel));
    assert_eq!(mode("t/seed/copy/d1/f1.bin"), 0o600);
    assert_eq!(mode("t/seed/copy/d2"), 0o750);
    m.unmount();
    home.verify();
}

/// An empty directory made through a mount, its mode and time, and a
/// chmod of a stored file survive unmount and remount.
#[test]
fn empty_directories_modes_and_times_persist() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let home = seeded(Home::local(&tmp.path().join("ds")), tmp.path());
    let (mnt, spool) = (tmp.path().join("mnt"), tmp.path().join("spool"));
    let m = home.mount_rw(&mnt, &spool, &[]);
    std::fs::create_dir_all(m.path.join("t/seed/out/run1")).unwrap();
    std::fs::set_permissions(m.path.join("t/seed/out"), Permissions::from_mode(0o700)).unwrap();
    std::fs::set_permissions(
        m.path.join("t/seed/readme.txt"),
        Permissions::from_mode(0o751),
    )
    .unwrap();
    run_ok(
        "touch",
        &[
            "-m",
            "-d",
            "2010-01-01 00:00:00",
            m.path.join("t/seed/out/run1").to_str().unwrap(),
        ],
    );
    let before = std::fs::metadata(m.path.join("t/seed/out/run1"))
        .unwrap()
        .modified()
        .unwrap();
    m.unmount();
    let m = home.mount(&mnt, &[]);
    let meta = |rel: &str| std::fs::metadata(m.path.join(rel)).unwrap();
    assert!(
        meta("t/seed/out/run1").is_dir(),
        "the empty directory is gone"
    );
    assert_eq!(meta("t/seed/out/run1").modified().unwrap(), before);
    assert_eq!(meta("t/seed/out").permissions().mode() & 0o7777, 0o700);
    assert_eq!(
        meta("t/seed/readme.txt").permissions().mode() & 0o7777,
        0o751
    );
    m.unmount();
}

on_local_and_s3!(
    zeros_cut_two_ways,
    a_pack_the_track_holds_cut_another_way_is_committed_apart,
    a_pack_the_track_holds_cut_another_way_is_committed_apart_on_s3
);

/// Files of zeros written and committed, then in the same modality other
/// files of zeros with the same total bytes, cut another way: their pack
/// is the very object the Track holds already, so the second commit
/// stores them as objects of their own (it used to fail at every retry,
/// leaving them in the spool), and every file survives a remount.
fn zeros_cut_two_ways(home: Home, tmp: &Path) {
    let home = seeded(home, tmp);
    let (mnt, spool) = (tmp.join("mnt"), tmp.join("spool"));
    let m = home.mount_rw(&mnt, &spool, &["--pack-items", "4"]);
    let dir = m.path.join("t/zeros");
    std::fs::create_dir(&dir).unwrap();
    let sets = [
        [("a0", 4096), ("a1", 4096), ("a2", 4096), ("a3", 4096)],
        [("b0", 8192), ("b1", 4096), ("b2", 2048), ("b3", 2048)],
    ];
    for set in &sets {
        for (name, size) in set {
            std::fs::write(dir.join(name), vec![0u8; *size]).unwrap();
        }
        // One full pack of four files, committed on its own.
        let last = std::fs::File::open(dir.join(set[3].0)).unwrap();
        last.sync_all()
            .unwrap_or_else(|e| panic!("fsync of the set of {}: {e}", set[3].0));
    }
    m.unmount();
    let m = home.mount(&mnt, &[]);
    for (name, size) in sets.iter().flatten() {
        let got = std::fs::read(m.path.join("t/zeros").join(name)).unwrap();
        assert!(
            got == vec![0u8; *size],
            "t/zeros/{name}: {} bytes",
            got.len()
        );
    }
    m.unmount();
    home.verify();
}
