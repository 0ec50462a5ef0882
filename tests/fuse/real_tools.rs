//! Tools users run in a read-write mount, each as a user would: git (a
//! clone, status, fsck), SQLite (a database written, then reopened after a
//! remount), tar (an archive with hard links and symbolic links), and a
//! Python virtual environment with pip installing a local wheel. Each
//! works, its result survives a remount, and the dataset verifies.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;
use crate::seeded_dataset;

/// Runs `program args…` in `dir`; its stdout.
fn run_in(dir: &Path, program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    let out = succeeded(&format!("{program} {args:?}"), out);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn git_sqlite_and_tar_with_links_work_and_survive_a_remount() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let ds = seeded_dataset(dir);
    let m = Mounted::writable_in(dir, &ds, &[]);
    let into = m.path.join("t/m");

    // git: a repository of two commits, cloned into the mount.
    let repo = dir.join("repo");
    std::fs::create_dir(&repo).unwrap();
    let git = |args: &[&str]| run_in(&repo, "git", args);
    git(&["init", "-q", "-b", "main"]);
    for (i, text) in ["first", "second"].iter().enumerate() {
        std::fs::write(repo.join("notes.txt"), text).unwrap();
        git(&["add", "notes.txt"]);
        let message = format!("commit {i}");
        git(&[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            &message,
        ]);
    }
    run_in(
        &into,
        "git",
        &["clone", "-q", repo.to_str().unwrap(), "clone"],
    );
    let clone = into.join("clone");
    assert_eq!(run_in(&clone, "git", &["status", "--porcelain"]), "");
    run_in(&clone, "git", &["fsck", "--strict"]);

    // SQLite: a table written row by row, each row its own transaction.
    let db = into.join("rows.db");
    let script = format!(
        "import sqlite3\n\
         db = sqlite3.connect({db:?}, isolation_level=None)\n\
         db.execute('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)')\n\
         for i in range(50):\n    db.execute('INSERT INTO t (v) VALUES (?)', (f'row {{i}}',))\n\
         db.close()\n"
    );
    run_in(dir, "python3", &["-c", &script]);

    // tar: an archive with a hard link and a symbolic link.
    let tree = dir.join("tree");
    write_file(&tree.join("data.bin"), b"shared bytes");
    std::fs::hard_link(tree.join("data.bin"), tree.join("hard.bin")).unwrap();
    std::os::unix::fs::symlink("data.bin", tree.join("soft.bin")).unwrap();
    let untarred = into.join("untarred");
    tar_copy(&tree, &untarred);
    use std::os::unix::fs::MetadataExt;
    let data = std::fs::metadata(untarred.join("data.bin")).unwrap();
    let hard = std::fs::metadata(untarred.join("hard.bin")).unwrap();
    assert_eq!(
        (data.ino(), data.nlink()),
        (hard.ino(), 2),
        "one file, two names"
    );
    assert_eq!(
        std::fs::read_link(untarred.join("soft.bin")).unwrap(),
        Path::new("data.bin")
    );

    m.unmount();
    let m = Mounted::writable_in(dir, &ds, &[]);
    run_in(&clone, "git", &["fsck", "--strict"]);
    assert!(run_in(&clone, "git", &["log", "--oneline"]).lines().count() == 2);
    let count = format!(
        "import sqlite3\nprint(sqlite3.connect({db:?}).execute('SELECT count(*) FROM t').fetchone()[0])"
    );
    assert_eq!(run_in(dir, "python3", &["-c", &count]).trim(), "50");
    for name in ["data.bin", "hard.bin", "soft.bin"] {
        assert_eq!(
            std::fs::read(untarred.join(name)).unwrap(),
            b"shared bytes",
            "{name}"
        );
    }
    m.unmount();
    packfs_ok(&["verify", ds.to_str().unwrap()]);
}

/// A wheel of one module, `hello` (`GREETING = "hi"`), made by hand: a zip
/// of the module and its `.dist-info`.
fn wheel(dir: &Path) -> PathBuf {
    let path = dir.join("hello-1.0-py3-none-any.whl");
    let script = format!(
        "import zipfile\n\
         files = {{\n\
           'hello/__init__.py': 'GREETING = \"hi\"\\n',\n\
           'hello-1.0.dist-info/METADATA': 'Metadata-Version: 2.1\\nName: hello\\nVersion: 1.0\\n',\n\
           'hello-1.0.dist-info/WHEEL': 'Wheel-Version: 1.0\\nGenerator: packfs-test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n',\n\
         }}\n\
         record = ''.join(f'{{n}},,\\n' for n in files) + 'hello-1.0.dist-info/RECORD,,\\n'\n\
         with zipfile.ZipFile({path:?}, 'w') as z:\n\
         \x20   for name, text in files.items():\n\
         \x20       z.writestr(name, text)\n\
         \x20   z.writestr('hello-1.0.dist-info/RECORD', record)\n"
    );
    run_in(dir, "python3", &["-c", &script]);
    path
}

#[test]
fn a_venv_with_pip_installs_a_wheel_in_a_mount() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let ds = seeded_dataset(dir);
    let wheel = wheel(dir);
    let m = Mounted::writable_in(dir, &ds, &[]);
    let venv = m.path.join("t/m/venv");
    run_in(dir, "python3", &["-m", "venv", venv.to_str().unwrap()]);
    let pip = venv.join("bin/pip");
    let install = [
        "install",
        "-q",
        "--no-index",
        "--no-deps",
        wheel.to_str().unwrap(),
    ];
    run_in(dir, pip.to_str().unwrap(), &install);
    let python = venv.join("bin/python");
    let greet = ["-c", "import hello; print(hello.GREETING)"];
    assert_eq!(run_in(dir, python.to_str().unwrap(), &greet).trim(), "hi");
    m.unmount();
    let m = Mounted::writable_in(dir, &ds, &[]);
    assert_eq!(run_in(dir, python.to_str().unwrap(), &greet).trim(), "hi");
    m.unmount();
    packfs_ok(&["verify", ds.to_str().unwrap()]);
}
