//! Symbolic links, FIFOs and sockets through a real read-write mount, made
//! by the tools that make them: `tar -x` of an archive with links, `python
//! -m venv` (its `lib64` link), `mkfifo`, a Unix socket's `bind`. Each is
//! what it was after a remount, and the dataset verifies; `packfs ls -l`
//! shows link targets.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;
use std::process::Command;

use crate::common::*;
use crate::seeded_dataset;

/// A dataset of one file, mounted read-write in `dir`.
fn mounted(dir: &Path) -> (std::path::PathBuf, Mounted) {
    let ds = seeded_dataset(dir);
    let m = Mounted::writable_in(dir, &ds, &[]);
    (ds, m)
}

/// Each entry below `dir`: its type, mode, path, link target and (for a
/// file or a link) size, sorted by path.
fn listing(dir: &Path) -> String {
    let format = "%P %y %m %l %s\n";
    let out = run_ok(
        "find",
        &[dir.to_str().unwrap(), "-mindepth", "1", "-printf", format],
    );
    let mut lines: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| match l.split(' ').nth(1) {
            // A directory's size is the filesystem's own.
            Some("d") => l.rsplit_once(' ').unwrap().0.to_string(),
            _ => l.to_string(),
        })
        .collect();
    lines.sort();
    lines.join("\n")
}

#[test]
fn tar_venv_fifos_and_sockets_keep_their_links_and_nodes_across_a_remount() {
    require_fuse();
    let dir = tempfile::tempdir().unwrap();
    let (ds, m) = mounted(dir.path());
    let into = m.path.join("t/m");

    // An archive with relative, absolute and dangling links, one to a
    // directory, made from a tree on the local disk.
    let tree = dir.path().join("tree");
    write_file(&tree.join("pkg/data.txt"), b"data");
    for (target, link) in [
        ("data.txt", "pkg/rel"),
        ("/etc/hostname", "pkg/abs"),
        ("../missing", "pkg/dangling"),
        ("pkg", "dirlink"),
    ] {
        std::os::unix::fs::symlink(target, tree.join(link)).unwrap();
    }
    let untarred = into.join("untarred");
    tar_copy(&tree, &untarred);
    assert_eq!(listing(&untarred), listing(&tree));
    assert_eq!(
        std::fs::read(untarred.join("dirlink/rel")).unwrap(),
        b"data"
    );

    // A virtual environment: its lib64 is a link, its python another.
    let venv = into.join("venv");
    succeeded(
        "python3 -m venv --without-pip",
        Command::new("python3")
            .args(["-m", "venv", "--without-pip"])
            .arg(&venv)
            .output()
            .unwrap(),
    );
    let ran = Command::new(venv.join("bin/python"))
        .args(["-c", "import sys; print(sys.prefix)"])
        .output()
        .unwrap();
    let ran = succeeded("the venv's python", ran);
    assert_eq!(
        String::from_utf8_lossy(&ran.stdout).trim(),
        venv.to_str().unwrap()
    );

    run_ok(
        "mkfifo",
        &["-m", "0640", into.join("fifo").to_str().unwrap()],
    );
    let socket = into.join("sock");
    let bound = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    drop(bound);

    let before = listing(&into);
    m.unmount();
    let m = Mounted::writable_in(dir.path(), &ds, &[]);
    assert_eq!(listing(&into), before, "the same after a remount");
    let venv_lib64 = std::fs::symlink_metadata(into.join("venv/lib64")).unwrap();
    assert!(venv_lib64.file_type().is_symlink());
    let fifo = std::fs::metadata(into.join("fifo")).unwrap();
    assert!(fifo.file_type().is_fifo());
    assert_eq!(fifo.mode() & 0o7777, 0o640);
    assert!(std::fs::metadata(into.join("sock"))
        .unwrap()
        .file_type()
        .is_socket());
    // A FIFO in a mount is a pipe between this machine's processes.
    let fifo_path = into.join("fifo");
    let writer = std::thread::spawn(move || std::fs::write(fifo_path, b"through").unwrap());
    assert_eq!(std::fs::read(into.join("fifo")).unwrap(), b"through");
    writer.join().unwrap();
    m.unmount();
    packfs_ok(&["verify", ds.to_str().unwrap()]);
    // `ls -l` shows a link's target, and every entry of a directory
    // longer than one batch of its listing.
    let ls = |path: &str| {
        let out = packfs_ok(&["ls", ds.to_str().unwrap(), path, "-l"]);
        String::from_utf8(out.stdout).unwrap()
    };
    let pkg = ls("t/m/untarred/pkg");
    assert!(
        pkg.contains("inode/symlink") && pkg.contains(" rel -> data.txt\n"),
        "{pkg}"
    );
    assert!(pkg.contains(" dangling -> ../missing\n"), "{pkg}");
    assert!(ls("t/m/venv/lib64").trim_end().ends_with("lib64 -> lib"));
}

#[test]
fn ls_lists_a_directory_longer_than_a_batch_once_each() {
    let dir = tempfile::tempdir().unwrap();
    let names: Vec<String> = (0..2500).map(|i| format!("f{i:05}")).collect();
    for name in &names {
        write_file(&dir.path().join("src/t/m").join(name), b"x");
    }
    let ds = dir.path().join("ds");
    import(&dir.path().join("src"), &ds, &[]);
    let out = packfs_ok(&["ls", ds.to_str().unwrap(), "t/m"]);
    let listed: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(listed, names);
}
