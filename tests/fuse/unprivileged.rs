//! A user without root mounts a dataset: `packfs mount` runs as the
//! `packfs-test` user `.ci/run` creates, through the setuid `fusermount3`,
//! and only that user can enter the mount (without `--allow-other`).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common::*;

const USER: &str = "packfs-test";

/// `COMMAND ARGS…` run as [`USER`] with a home of `home` (runuser sets
/// HOME to the user's own, which does not exist).
fn as_user(home: &Path, command: &str, args: &[&str]) -> Output {
    Command::new("runuser")
        .args(["-u", USER, "--", "env"])
        .arg(format!("HOME={}", home.display()))
        .arg(command)
        .args(args)
        .env_remove("XDG_STATE_HOME")
        .output()
        .unwrap()
}

/// A directory holding a dataset (`ds`, one file) that [`USER`] may read,
/// and a home and a mountpoint the user owns.
fn user_setup() -> (tempfile::TempDir, PathBuf, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    write_file(&dir.path().join("src/train/image/a.jpg"), b"image a");
    let ds = dir.path().join("ds");
    import(&dir.path().join("src"), &ds, &[]);
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let (home, mnt) = (dir.path().join("home"), dir.path().join("mnt"));
    for d in [&home, &mnt] {
        std::fs::create_dir(d).unwrap();
        run_ok("chown", &[USER, d.to_str().unwrap()]);
    }
    (dir, ds, home, mnt)
}

#[test]
fn a_user_without_root_mounts_through_fusermount3() {
    require_fuse();
    let mode = std::fs::metadata("/dev/fuse").unwrap().permissions().mode();
    assert_eq!(
        mode & 0o666,
        0o666,
        "/dev/fuse must be open to users (`bash .ci/run` makes it 0666)"
    );
    let exists = Command::new("id")
        .arg(USER)
        .output()
        .unwrap()
        .status
        .success();
    assert!(
        exists,
        "user {USER} is missing: `bash .ci/run` creates it (useradd --system {USER})"
    );
    let (_dir, ds, home, mnt) = user_setup();
    run_ok("chmod", &["-R", "a+rX", ds.to_str().unwrap()]);

    let mounted = as_user(
        &home,
        PACKFS,
        &[
            "mount",
            ds.to_str().unwrap(),
            mnt.to_str().unwrap(),
            "--read-only",
        ],
    );
    succeeded("packfs mount as packfs-test", mounted);
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    let line = mounts
        .lines()
        .find(|l| l.split(' ').nth(1) == Some(mnt.to_str().unwrap()))
        .expect("mounted");
    let uid = String::from_utf8(run_ok("id", &["-u", USER]).stdout).unwrap();
    assert!(line.contains(&format!("user_id={}", uid.trim())), "{line}");

    let read = as_user(
        &home,
        "cat",
        &[mnt.join("train/image/a.jpg").to_str().unwrap()],
    );
    assert_eq!(succeeded("cat as packfs-test", read).stdout, b"image a");
    // Others, root included, are kept out without --allow-other.
    let e = std::fs::read_dir(&mnt).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EACCES), "{e}");

    succeeded(
        "fusermount3 -u as packfs-test",
        as_user(&home, "fusermount3", &["-u", mnt.to_str().unwrap()]),
    );
    wait_until("unmount", std::time::Duration::from_secs(10), || {
        !is_mounted(&mnt)
    });
}

/// `packfs sync` and `packfs umount` work for the user who mounted,
/// through `fusermount3 -u`: each file is in the dataset when the command
/// returns, and the daemon is gone after `umount`.
#[test]
fn a_user_without_root_syncs_and_unmounts_with_everything_committed() {
    require_fuse();
    let (_dir, ds, home, mnt) = user_setup();
    run_ok("chown", &["-R", USER, ds.to_str().unwrap()]);
    let (ds_arg, mnt_arg) = (ds.to_str().unwrap(), mnt.to_str().unwrap());
    for round in 0..3 {
        succeeded(
            "packfs mount as packfs-test",
            as_user(&home, PACKFS, &["mount", ds_arg, mnt_arg]),
        );
        let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
        let line = mounts
            .lines()
            .find(|l| l.split(' ').nth(1) == Some(mnt_arg))
            .expect("mounted");
        assert_eq!(line.split(' ').nth(2), Some("fuse.packfs"), "{line}");
        let write = |name: &str| {
            let line = format!("echo {name} > {}/{name}", mnt.join("train/image").display());
            succeeded(
                "a write as packfs-test",
                as_user(&home, "sh", &["-c", &line]),
            );
            (
                format!("train/image/{name}"),
                format!("{name}\n").into_bytes(),
            )
        };
        let (synced, bytes) = write(&format!("synced{round}"));
        succeeded(
            "packfs sync as packfs-test",
            as_user(&home, PACKFS, &["sync", mnt_arg]),
        );
        assert_eq!(packfs_ok(&["cat", ds_arg, &synced]).stdout, bytes);

        let (last, bytes) = write(&format!("last{round}"));
        succeeded(
            "packfs umount as packfs-test",
            as_user(&home, PACKFS, &["umount", mnt_arg]),
        );
        assert!(!is_mounted(&mnt), "round {round}: still mounted");
        assert_eq!(
            packfs_ok(&["cat", ds_arg, &last]).stdout,
            bytes,
            "round {round}: the file written just before `packfs umount` is committed"
        );
    }
    let daemons = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            std::fs::read(e.path().join("cmdline"))
                .is_ok_and(|c| c.windows(mnt_arg.len()).any(|w| w == mnt_arg.as_bytes()))
        })
        .count();
    assert_eq!(daemons, 0, "a daemon serving {mnt_arg} is still running");
}
