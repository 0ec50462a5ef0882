//! `packfs gc`: unreachable objects old enough go, everything any ref's
//! history reaches stays, and a dry run deletes nothing.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

/// Writes an object nobody references at `rel` below the dataset, dated
/// `age` ago (`touch -d`).
fn orphan(dataset: &Path, rel: &str, age: &str) -> PathBuf {
    let path = dataset.join(rel);
    write_file(&path, b"an upload that never committed");
    run_ok("touch", &["-d", age, path.to_str().unwrap()]);
    path
}

/// `path` relative to the dataset, as gc names objects.
fn rel_of(dataset: &Path, path: &Path) -> String {
    path.strip_prefix(dataset)
        .unwrap()
        .to_str()
        .unwrap()
        .to_string()
}

#[test]
fn gc_deletes_old_unreachable_objects_and_keeps_all_history() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    let mut rng = Rng::new(5);
    for i in 0..20 {
        write_file(&src.join(format!("t/m/{i}")), &rng.bytes(5000));
    }
    let dataset = tmp.path().join("ds");
    import(&src, &dataset, &["--pack-items", "5"]);
    // History: a second Manifest in which items are replaced and removed.
    let m = Mounted::writable_in(tmp.path(), &dataset, &[]);
    std::fs::write(m.path.join("t/m/0"), b"replaced").unwrap();
    std::fs::remove_file(m.path.join("t/m/1")).unwrap();
    m.unmount();
    let ds = dataset.to_str().unwrap();
    let before = walk(&dataset).1.len();

    let hex = |n: u8| format!("{n:02x}").repeat(32);
    let old = [
        orphan(&dataset, &format!("t/m/0/{}", hex(1)), "2 days ago"),
        orphan(
            &dataset,
            &format!("_packfs/manifests/{}", hex(2)),
            "2 days ago",
        ),
        orphan(
            &dataset,
            &format!("_packfs/tracks/{}", hex(3)),
            "2 days ago",
        ),
    ];
    let young = orphan(&dataset, &format!("t/m/0/{}", hex(4)), "now");

    let out = packfs_ok(&["gc", ds, "--dry-run"]);
    let listed = String::from_utf8_lossy(&out.stdout);
    for path in &old {
        let name = path.file_name().unwrap().to_str().unwrap();
        assert!(
            listed.contains(&format!("would delete {}", rel_of(&dataset, path))),
            "{name}: {listed}"
        );
        assert!(path.exists(), "a dry run deleted {path:?}");
    }
    assert!(
        !listed.contains(young.file_name().unwrap().to_str().unwrap()),
        "{listed}"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("kept 1 younger"));

    packfs_ok(&["gc", ds]);
    for path in &old {
        assert!(!path.exists(), "{path:?} survived gc");
    }
    assert!(
        young.exists(),
        "gc deleted an object within the grace period"
    );
    assert_eq!(
        walk(&dataset).1.len(),
        before + 1,
        "gc deleted a reachable object"
    );
    packfs_ok(&["verify", ds]);
    // The history still reads (log opens every Manifest along it).
    let log = String::from_utf8(packfs_ok(&["log", ds]).stdout).unwrap();
    assert_eq!(log.matches("manifest ").count(), 2, "{log}");
    let m = Mounted::new(&dataset, &tmp.path().join("mnt"), &[]);
    assert_eq!(std::fs::read(m.path.join("t/m/0")).unwrap(), b"replaced");
    m.unmount();

    let out = Command::new(PACKFS)
        .args(["gc", ds, "--grace", "0s"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(!young.exists());
}
