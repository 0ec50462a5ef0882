//! Damaged datasets through a real FUSE mount: the damaged item gives EIO,
//! everything else keeps working, and a damaged Manifest refuses to mount.

use std::path::Path;

use crate::common::*;

/// The data objects of one modality, largest first.
fn packs(dataset: &Path, timeline: &str, modality: &str) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dataset.join(timeline).join(modality).join("0"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort_by_key(|p| std::cmp::Reverse(std::fs::metadata(p).unwrap().len()));
    v
}

#[test]
fn truncated_pack_gives_eio_for_its_items_only() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let (src, dataset) = (tmp.path().join("src"), tmp.path().join("dataset"));
    let mut rng = Rng::new(3);
    for i in 0..8 {
        write_file(&src.join(format!("t/m/{i}.bin")), &rng.bytes(10_000));
    }
    import(&src, &dataset, &["--pack-items", "4"]);
    // Two packs of four items: 0–3 and 4–7. Cut the first one short.
    let pack = packs(&dataset, "t", "m")
        .into_iter()
        .find(|p| {
            std::fs::read(p).unwrap()[..100] == std::fs::read(src.join("t/m/0.bin")).unwrap()[..100]
        })
        .expect("the pack holding item 0");
    let file = std::fs::OpenOptions::new().write(true).open(&pack).unwrap();
    file.set_len(25_000).unwrap();

    let mnt = Mounted::new(&dataset, &tmp.path().join("mnt"), &[]);
    for i in 0..4 {
        let err = std::fs::read(mnt.path.join(format!("t/m/{i}.bin"))).unwrap_err();
        assert_eq!(
            err.raw_os_error(),
            Some(libc::EIO),
            "item {i} of the short pack"
        );
    }
    for i in 4..8 {
        let rel = format!("t/m/{i}.bin");
        assert_eq!(
            std::fs::read(mnt.path.join(&rel)).unwrap(),
            std::fs::read(src.join(&rel)).unwrap()
        );
    }
    // The CLI names the pack and both lengths.
    let out = packfs(&["cat", dataset.to_str().unwrap(), "t/m/0.bin"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    let name = pack.file_name().unwrap().to_str().unwrap();
    assert!(
        err.contains(name) && err.contains("25000") && err.contains("40000"),
        "{err}"
    );
}

#[test]
fn damaged_manifest_refuses_to_mount_with_the_reason() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let (src, dataset) = (tmp.path().join("src"), tmp.path().join("dataset"));
    write_file(&src.join("t/m/a"), b"a");
    import(&src, &dataset, &["--pack-items", "4"]);
    let manifests = dataset.join("_packfs/manifests");
    let manifest = std::fs::read_dir(&manifests)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    std::fs::write(&manifest, b"\xa1\x61").unwrap();
    let mnt = tmp.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let out = packfs(&["mount", dataset.to_str().unwrap(), mnt.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("is damaged") && err.contains(manifest.file_name().unwrap().to_str().unwrap()),
        "{err}"
    );
    assert!(!is_mounted(&mnt.canonicalize().unwrap()));
}

/// `packfs mount ARGS` with the state directory (default spools) under
/// `state`; a hang past 30 s fails the test.
fn mount_within_30s(state: &Path, args: &[&str]) -> (bool, String) {
    let mut command = std::process::Command::new(PACKFS);
    command.arg("mount").args(args).env("XDG_STATE_HOME", state);
    run_within(&mut command, std::time::Duration::from_secs(30))
}

/// A dataset holding `t/m/a`, in `dir/ds`.
fn small_dataset(dir: &Path) -> std::path::PathBuf {
    let (src, dataset) = (dir.join("src"), dir.join("ds"));
    write_file(&src.join("t/m/a"), b"a");
    import(&src, &dataset, &[]);
    dataset
}

/// Mounting where a packfs mount is live fails at once, naming it (it
/// used to wait a minute for the first mount's spool, then blame the
/// spool; a read-only one stacked a second mount on the first).
#[test]
fn mounting_on_a_live_mount_fails_at_once() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let dataset = small_dataset(tmp.path());
    let ds = dataset.to_str().unwrap();
    let state = tmp.path().join("state");
    let mnt = tmp.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let mnt_str = mnt.to_str().unwrap();
    let (ok, stderr) = mount_within_30s(&state, &[ds, mnt_str]);
    assert!(ok, "{stderr}");
    let first = Mounted {
        path: mnt.canonicalize().unwrap(),
        pid: daemon_pid(&mnt.canonicalize().unwrap()),
    };
    for extra in [&[][..], &["--read-only"], &["--allow-non-empty"]] {
        let mut args = vec![ds, mnt_str];
        args.extend_from_slice(extra);
        let (ok, stderr) = mount_within_30s(&state, &args);
        assert!(!ok, "a second mount on a live one succeeded");
        let expected = format!("is already a mount point (packfs:{ds}");
        assert!(stderr.contains(&expected), "{stderr}");
        assert!(stderr.contains("fusermount3 -u"), "{stderr}");
    }
    // Still the one mount, serving.
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let target = format!(" {} ", first.path.display());
    assert_eq!(mounts.matches(&target).count(), 1, "{mounts}");
    assert_eq!(std::fs::read(first.path.join("t/m/a")).unwrap(), b"a");
}

/// A mount whose daemon was killed (-9) answers ENOTCONN: mounting there
/// says to unmount it, not that it is no directory.
#[test]
fn mounting_on_a_dead_mount_says_to_unmount_it() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let dataset = small_dataset(tmp.path());
    let ds = dataset.to_str().unwrap();
    let dead = Mounted::new(&dataset, &tmp.path().join("mnt"), &[]);
    let pid = dead.pid.expect("the daemon's pid");
    // The kernel now holds the root's attributes: `stat` of the dead mount
    // answers from them, so only a request the daemon must answer
    // (statfs) shows it is dead.
    std::fs::metadata(&dead.path).unwrap();
    // SAFETY: kill(2) of the daemon this test started.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGKILL) }, 0);
    wait_until(
        "the mount to go dead",
        std::time::Duration::from_secs(10),
        || {
            let statfs = std::process::Command::new("stat")
                .args(["-f", dead.path.to_str().unwrap()])
                .output()
                .unwrap();
            String::from_utf8_lossy(&statfs.stderr).contains("not connected")
        },
    );
    let state = tmp.path().join("state");
    let mnt = dead.path.to_str().unwrap();
    let sub = format!("{mnt}/sub");
    for target in [mnt, &sub] {
        let (ok, stderr) = mount_within_30s(&state, &[ds, target, "--read-only"]);
        assert!(!ok);
        assert!(
            stderr.contains("dead FUSE mount") && stderr.contains("fusermount3 -u"),
            "{stderr}"
        );
        assert!(!stderr.contains("not a directory"), "{stderr}");
    }
    drop(dead); // unmounts it
}

/// A non-empty directory is refused (the mount would hide what it holds)
/// unless --allow-non-empty is given; then its files are back after the
/// unmount.
#[test]
fn a_non_empty_mountpoint_needs_allow_non_empty() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let dataset = small_dataset(tmp.path());
    let ds = dataset.to_str().unwrap();
    let mnt = tmp.path().join("mnt");
    write_file(&mnt.join("mine.txt"), b"mine");
    let state = tmp.path().join("state");
    let (ok, stderr) = mount_within_30s(&state, &[ds, mnt.to_str().unwrap()]);
    assert!(!ok, "mounted over a non-empty directory");
    assert!(
        stderr.contains("is not empty") && stderr.contains("--allow-non-empty"),
        "{stderr}"
    );
    assert!(!is_mounted(&mnt.canonicalize().unwrap()));

    let m = Mounted::new(&dataset, &mnt, &["--allow-non-empty"]);
    assert_eq!(std::fs::read(m.path.join("t/m/a")).unwrap(), b"a");
    assert!(!m.path.join("mine.txt").exists());
    m.unmount();
    assert_eq!(std::fs::read(mnt.join("mine.txt")).unwrap(), b"mine");
}
