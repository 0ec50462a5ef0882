//! mount(8) mounts datasets: `mount -t fuse.packfs` and fstab lines (a
//! temporary fstab through `mount -T`), with packfs's flags as `-o`
//! options, through the helper `packfs install-helper` links into /sbin;
//! and umount(8), which returns once what was written is committed.

use std::path::Path;
use std::process::Command;
use std::sync::Once;

use crate::common::*;

/// Links /sbin/mount.fuse.packfs to the packfs under test, once.
fn install_helper() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let out = packfs_ok(&["install-helper"]);
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(text.starts_with("/sbin/mount.fuse.packfs -> "), "{text}");
    });
}

/// The helper installed, a directory, and a dataset in it of two commits.
fn setup() -> (tempfile::TempDir, String) {
    require_fuse();
    install_helper();
    let dir = tempfile::tempdir().unwrap();
    let ds = two_commits(dir.path());
    (dir, ds)
}

/// A dataset with `a.jpg` ("old") at main~1 and ("new") plus `b.jpg` at main.
fn two_commits(dir: &Path) -> String {
    let ds = dir.join("ds");
    write_file(&dir.join("v1/train/image/a.jpg"), b"old");
    import(&dir.join("v1"), &ds, &[]);
    write_file(&dir.join("v2/train/image/a.jpg"), b"new");
    write_file(&dir.join("v2/train/image/b.jpg"), b"bee");
    import(&dir.join("v2"), &ds, &[]);
    ds.to_str().unwrap().to_string()
}

/// `umount DIR`, retried while the kernel still calls the mount busy (a
/// release of the last read may still be on its way).
fn umount(mnt: &Path) {
    wait_until("umount", std::time::Duration::from_secs(10), || {
        Command::new("umount").arg(mnt).status().unwrap().success()
    });
}

/// `mount -t fuse.packfs DATASET MNT -o OPTIONS`.
fn mount_t(ds: &str, mnt: &Path, options: &str) -> std::process::Output {
    mount_cmd(&[
        "-t",
        "fuse.packfs",
        ds,
        mnt.to_str().unwrap(),
        "-o",
        options,
    ])
}

fn mount_cmd(args: &[&str]) -> std::process::Output {
    Command::new("mount").args(args).output().unwrap()
}

/// Unmounts `mnt` when dropped.
struct Umount<'a>(&'a Path);

impl Drop for Umount<'_> {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0).status();
    }
}

#[test]
fn mount_t_fuse_packfs_takes_packfs_flags_as_options() {
    let (dir, ds) = setup();
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let out = mount_t(
        &ds,
        &mnt,
        "ref=main~1,_netdev,nofail,x-systemd.automount,nosuid,nodev,file_mode=0440",
    );
    succeeded("mount -t fuse.packfs", out);
    let _umount = Umount(&mnt);
    assert!(is_mounted(&mnt));
    assert_eq!(
        std::fs::read(mnt.join("train/image/a.jpg")).unwrap(),
        b"old"
    );
    assert!(!mnt.join("train/image/b.jpg").exists());
    assert_eq!(mode_of(&mnt.join("train/image/a.jpg")) & 0o777, 0o440);
    let e = std::fs::write(mnt.join("train/image/c.jpg"), b"x").unwrap_err();
    assert_eq!(
        e.raw_os_error(),
        Some(libc::EROFS),
        "a history mount is read-only"
    );
    umount(&mnt);
    assert!(!is_mounted(&mnt));

    // A misspelt option fails the mount, naming it.
    let out = mount_t(&ds, &mnt, "colour=red");
    failed_with(&out, &["--colour"]);
    assert!(!is_mounted(&mnt));
}

#[test]
fn fstab_lines_mount_by_mountpoint_and_with_mount_a() {
    let (dir, ds) = setup();
    let (shards, plain) = (dir.path().join("shards"), dir.path().join("plain"));
    std::fs::create_dir(&shards).unwrap();
    std::fs::create_dir(&plain).unwrap();
    let fstab = dir.path().join("fstab");
    std::fs::write(
        &fstab,
        format!(
            "# a comment\n\
             {ds} {} fuse.packfs ro,_netdev,view=\"webdataset:samples=1,shuffle=3\" 0 0\n\
             {ds} {} fuse.packfs noauto,ref=main 0 0\n",
            shards.display(),
            plain.display()
        ),
    )
    .unwrap();
    let fstab = fstab.to_str().unwrap();

    // `mount -a` mounts the auto line only.
    succeeded("mount -a -T", mount_cmd(&["-a", "-T", fstab]));
    let _u1 = Umount(&shards);
    let _u2 = Umount(&plain);
    assert!(is_mounted(&shards));
    assert!(!is_mounted(&plain), "noauto");
    let listed: Vec<String> = std::fs::read_dir(shards.join("train"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(listed.len(), 2, "two samples, one per shard: {listed:?}");

    // By its mountpoint alone: read-write, at main. `umount` returns once
    // what was written is committed, every time.
    for round in 0..3 {
        succeeded(
            "mount -T DIR",
            mount_cmd(&["-T", fstab, plain.to_str().unwrap()]),
        );
        assert_eq!(mount_type(&plain).as_deref(), Some("fuse.packfs"));
        assert_eq!(
            std::fs::read(plain.join("train/image/a.jpg")).unwrap(),
            b"new"
        );
        let name = format!("train/image/c{round}.jpg");
        std::fs::write(plain.join(&name), format!("sea {round}")).unwrap();
        umount(&plain);
        let cat = packfs_ok(&["cat", &ds, &name]).stdout;
        assert_eq!(
            cat,
            format!("sea {round}").as_bytes(),
            "written through an fstab mount and committed when umount returned"
        );
        let utab = std::fs::read_to_string("/run/mount/utab").unwrap_or_default();
        assert!(
            !utab.contains(&format!("TARGET={} ", plain.display())),
            "the mount's utab line outlives it: {utab}"
        );
    }
}

/// The type of the mount at `mnt`, as /proc/self/mountinfo shows it.
fn mount_type(mnt: &Path) -> Option<String> {
    let table = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    table.lines().rev().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        (left.split(' ').nth(4)? == mnt.to_str()?).then(|| right.split(' ').next().unwrap().into())
    })
}

/// A busy mount is not unmounted by `umount`, which says so; everything
/// written so far is committed all the same.
#[test]
fn umount_of_a_busy_mount_commits_and_keeps_it() {
    let (dir, ds) = setup();
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    succeeded("mount -t fuse.packfs", mount_t(&ds, &mnt, "ref=main"));
    let _umount = Umount(&mnt);
    std::fs::write(mnt.join("train/image/d.jpg"), b"dee").unwrap();
    let open = std::fs::File::open(mnt.join("train/image/a.jpg")).unwrap();
    let out = Command::new("umount").arg(&mnt).output().unwrap();
    failed_with(&out, &["busy", "committed"]);
    assert!(is_mounted(&mnt));
    assert_eq!(packfs_ok(&["cat", &ds, "train/image/d.jpg"]).stdout, b"dee");
    drop(open);
    umount(&mnt);
    assert!(!is_mounted(&mnt));
}
