//! `packfs branch` and `packfs merge`: sharded ingest into branches, union
//! merge back, conflicts, fast-forward, and refusals.

use std::path::Path;

use crate::common::*;

fn cat(dataset: &Path, rel: &str, reference: &str) -> Vec<u8> {
    packfs_ok(&["cat", dataset.to_str().unwrap(), rel, "--ref", reference]).stdout
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn branches_with_disjoint_slices_merge_into_one_manifest() {
    let tmp = tempfile::tempdir().unwrap();
    let dataset = tmp.path().join("ds");
    let ds = dataset.to_str().unwrap();
    let mut rng = Rng::new(11);
    let base = tmp.path().join("base");
    write_file(&base.join("t/m/base.bin"), &rng.bytes(3000));
    import(&base, &dataset, &[]);

    // Three workers each import their own slice into their own branch,
    // while main moves on too.
    let mut expected = vec![(
        "t/m/base.bin".to_string(),
        std::fs::read(base.join("t/m/base.bin")).unwrap(),
    )];
    for w in 0..3 {
        let name = format!("w{w}");
        packfs_ok(&["branch", ds, &name]);
        let src = tmp.path().join(format!("slice{w}"));
        for i in 0..20 {
            let rel = format!("t/m/w{w}/{i:03}.bin");
            let len = 100 + rng.below(5000) as usize;
            let bytes = rng.bytes(len);
            write_file(&src.join(&rel), &bytes);
            expected.push((rel, bytes));
        }
        import(&src, &dataset, &["--ref", &name]);
    }
    let main_src = tmp.path().join("main-src");
    let extra = rng.bytes(777);
    write_file(&main_src.join("t/other/late.bin"), &extra);
    import(&main_src, &dataset, &[]);
    expected.push(("t/other/late.bin".into(), extra));

    let out = packfs_ok(&["merge", ds, "--into", "main", "w0", "w1", "w2"]);
    assert!(
        stderr(&out).contains("merged (4 parents)"),
        "{}",
        stderr(&out)
    );
    for (rel, bytes) in &expected {
        assert_eq!(&cat(&dataset, rel, "main"), bytes, "{rel}");
    }
    let listing = String::from_utf8(packfs_ok(&["ls", ds, "t/m/w1"]).stdout).unwrap();
    assert_eq!(listing.lines().count(), 20);
    packfs_ok(&["verify", ds]);
    let log = String::from_utf8(packfs_ok(&["log", ds, "-n", "1"]).stdout).unwrap();
    let merge_line = log.lines().find(|l| l.starts_with("Merge:")).unwrap();
    assert_eq!(merge_line.split_whitespace().count(), 5, "{log}");

    // Merging the same branches again changes nothing.
    let out = packfs_ok(&["merge", ds, "w0", "w1", "w2"]);
    assert!(
        stderr(&out).contains("already up to date"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_name_written_on_both_sides_is_kept_twice() {
    let tmp = tempfile::tempdir().unwrap();
    let dataset = tmp.path().join("ds");
    let ds = dataset.to_str().unwrap();
    let src = |name: &str, bytes: &[u8]| {
        let dir = tmp.path().join(name);
        write_file(&dir.join("t/img/cat.jpg"), bytes);
        dir
    };
    import(&src("v1", b"first version"), &dataset, &[]);
    packfs_ok(&["branch", ds, "side"]);
    import(&src("ours", b"main's version"), &dataset, &[]);
    import(
        &src("theirs", b"the side branch's version"),
        &dataset,
        &["--ref", "side"],
    );
    let side_id = String::from_utf8(packfs_ok(&["log", ds, "--ref", "side", "-n", "1"]).stdout)
        .unwrap()
        .split_whitespace()
        .nth(1)
        .unwrap()[..12]
        .to_string();

    let out = packfs_ok(&["merge", ds, "side"]);
    let renamed = format!("cat.conflict-{side_id}.jpg");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = format!("t/img/cat.jpg: the merged-in version is kept as t/img/{renamed}");
    assert!(stdout.contains(&line), "{stdout}");
    assert!(stderr(&out).contains("1 conflict"), "{}", stderr(&out));
    assert_eq!(cat(&dataset, "t/img/cat.jpg", "main"), b"main's version");
    assert_eq!(
        cat(&dataset, &format!("t/img/{renamed}"), "main"),
        b"the side branch's version"
    );
    packfs_ok(&["verify", ds]);
    // The merge Manifest records the conflict; `packfs log` shows it.
    let log = String::from_utf8(packfs_ok(&["log", ds, "-n", "1"]).stdout).unwrap();
    assert!(log.contains(&format!("Conflict: {line}")), "{log}");
}

/// Branches whose Tracks hold one pack (16 zero bytes) cut different
/// ways: four files of 4 bytes on w0, files of 8, 4, 2 and 2 on w1, and
/// on w2 files of 4, 4 and 8 whose last was then replaced (its entry
/// retired, the live ones agreeing with w0's cut). The merge stores w1's
/// files apart, drops w2's retired entry, and every file reads back.
#[test]
fn branches_holding_one_pack_cut_two_ways_merge() {
    let tmp = tempfile::tempdir().unwrap();
    let dataset = with_dev_branch(tmp.path());
    let ds = dataset.to_str().unwrap();
    let zeros = |set: &str, files: &[(&str, usize)]| {
        let dir = tmp.path().join(set);
        for (name, size) in files {
            write_file(&dir.join("t/m").join(name), &vec![0; *size]);
        }
        dir
    };
    let sets = [
        ("w0", vec![("a0", 4), ("a1", 4), ("a2", 4), ("a3", 4)]),
        ("w1", vec![("b0", 8), ("b1", 4), ("b2", 2), ("b3", 2)]),
        ("w2", vec![("c0", 4), ("c1", 4), ("c2", 8)]),
    ];
    for (branch, files) in &sets {
        packfs_ok(&["branch", ds, branch]);
        let src = zeros(branch, files);
        import(&src, &dataset, &["--ref", branch, "--pack-items", "4"]);
    }
    let replaced = tmp.path().join("replaced");
    write_file(&replaced.join("t/m/c2"), b"not zeros");
    import(&replaced, &dataset, &["--ref", "w2"]);

    packfs_ok(&["merge", ds, "w0", "w1", "w2"]);
    for (name, size) in sets.iter().flat_map(|(_, files)| files) {
        let want = match *name {
            "c2" => b"not zeros".to_vec(),
            _ => vec![0; *size],
        };
        assert_eq!(
            cat(&dataset, &format!("t/m/{name}"), "main"),
            want,
            "{name}"
        );
    }
    assert_eq!(cat(&dataset, "t/m/a", "main"), b"a");
    packfs_ok(&["verify", ds]);
}

/// `packfs mount` (daemonized, no --log-file) with the state directory
/// `state`; returns the mount and the log file it says it writes.
fn mount_logging(dataset: &Path, mnt: &Path, state: &Path) -> (Mounted, std::path::PathBuf) {
    std::fs::create_dir_all(mnt).unwrap();
    let out = std::process::Command::new(PACKFS)
        .args(["mount", dataset.to_str().unwrap(), mnt.to_str().unwrap()])
        .env("XDG_STATE_HOME", state)
        .output()
        .unwrap();
    let out = succeeded("packfs mount", out);
    let stderr = String::from_utf8(out.stderr).unwrap();
    let log = stderr
        .lines()
        .find_map(|l| l.strip_prefix("packfs: logging to "))
        .unwrap_or_else(|| panic!("no log file named: {stderr}"));
    assert!(log.starts_with(state.to_str().unwrap()), "{log}");
    let path = mnt.canonicalize().unwrap();
    let pid = daemon_pid(&path);
    (Mounted { path, pid }, log.into())
}

/// Two mounts write the same name: the second commit is merged onto the
/// first with a conflict, which the daemon's default log file (no
/// --log-file given) and `packfs log` both show.
#[test]
fn a_conflict_between_two_mounts_is_logged_and_in_the_history() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let dataset = with_dev_branch(tmp.path());
    let state = tmp.path().join("state");
    let (a, _) = mount_logging(&dataset, &tmp.path().join("mnt-a"), &state);
    let (b, b_log) = mount_logging(&dataset, &tmp.path().join("mnt-b"), &state);
    for (m, text) in [(&a, "from a"), (&b, "from b")] {
        let mut file = std::fs::File::create(m.path.join("t/m/same.txt")).unwrap();
        std::io::Write::write_all(&mut file, text.as_bytes()).unwrap();
        file.sync_all().unwrap(); // committed; b's is merged onto a's
    }
    a.unmount();
    b.unmount();

    let ds = dataset.to_str().unwrap();
    let log = String::from_utf8(packfs_ok(&["log", ds]).stdout).unwrap();
    let conflict = log
        .lines()
        .find(|l| l.starts_with("Conflict: t/m/same.txt: the merged-in version is kept as "))
        .unwrap_or_else(|| panic!("no conflict in the log: {log}"));
    let renamed = conflict.rsplit(' ').next().unwrap();
    assert!(renamed.starts_with("t/m/same.conflict-"), "{conflict}");
    assert_eq!(cat(&dataset, "t/m/same.txt", "main"), b"from a");
    assert_eq!(cat(&dataset, renamed, "main"), b"from b");

    let daemon_log = std::fs::read_to_string(&b_log).unwrap();
    let warning = "WARN packfs_fs::write::flush: t/m/same.txt was also written by another writer";
    assert!(daemon_log.contains(warning), "{daemon_log}");
}

/// A dataset under `dir` holding `t/m/a`, with a branch `dev` of main.
fn with_dev_branch(dir: &Path) -> std::path::PathBuf {
    let dataset = dir.join("ds");
    let src = dir.join("a");
    write_file(&src.join("t/m/a"), b"a");
    import(&src, &dataset, &[]);
    packfs_ok(&["branch", dataset.to_str().unwrap(), "dev"]);
    dataset
}

/// Runs packfs with `args`, which must fail saying `text`.
fn fails_with(args: &[&str], text: &str) {
    let out = packfs(args);
    assert!(!out.status.success(), "{args:?} succeeded");
    assert!(stderr(&out).contains(text), "{args:?}: {}", stderr(&out));
}

#[test]
fn a_branch_ahead_of_main_fast_forwards() {
    let tmp = tempfile::tempdir().unwrap();
    let dataset = with_dev_branch(tmp.path());
    let ds = dataset.to_str().unwrap();
    let src = tmp.path().join("b");
    write_file(&src.join("t/m/b"), b"b");
    import(&src, &dataset, &["--ref", "dev"]);

    let out = packfs_ok(&["merge", ds, "dev"]);
    assert!(stderr(&out).contains("fast-forwarded"), "{}", stderr(&out));
    let main = packfs_ok(&["log", ds, "-n", "1"]).stdout;
    let dev = packfs_ok(&["log", ds, "--ref", "dev", "-n", "1"]).stdout;
    assert_eq!(main, dev, "main now points at dev's manifest");
    assert_eq!(cat(&dataset, "t/m/b", "main"), b"b");
}

#[test]
fn branch_and_merge_refuse_bad_refs_clearly() {
    let tmp = tempfile::tempdir().unwrap();
    let dataset = with_dev_branch(tmp.path());
    let ds = dataset.to_str().unwrap();

    fails_with(&["branch", ds, "dev"], "ref \"dev\" already exists");
    fails_with(
        &["branch", ds, "x", "--from", "nope"],
        "ref \"nope\" does not exist",
    );
    fails_with(&["merge", ds, "missing"], "ref \"missing\" does not exist");
    fails_with(&["branch", ds, "../escape"], "escape");
}
