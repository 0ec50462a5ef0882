//! History: `--ref` takes a Manifest id, a unique prefix of one
//! or `REF~N`; such mounts are read-only and show the old content, and
//! `packfs diff` lists what changed between two revisions. Real FUSE
//! mounts of a local dataset, changed through a read-write mount.

use std::collections::BTreeMap;
use std::path::Path;

use crate::common::*;

/// Every file below `root` (the control directory is never listed) and
/// its bytes.
fn contents(root: &Path) -> BTreeMap<String, Vec<u8>> {
    walk(root)
        .1
        .into_iter()
        .map(|rel| {
            let bytes = std::fs::read(root.join(&rel)).unwrap();
            (rel.display().to_string(), bytes)
        })
        .collect()
}

/// The Manifest ids of `main`'s history, newest first.
fn manifests(dataset: &Path) -> Vec<String> {
    let log = packfs_ok(&["log", dataset.to_str().unwrap()]).stdout;
    String::from_utf8(log)
        .unwrap()
        .lines()
        .filter_map(|l| l.strip_prefix("manifest "))
        .map(String::from)
        .collect()
}

/// A dataset whose `main` has two Manifests: an import of `before`, then
/// one commit of a read-write mount that changes, replaces (same size,
/// other bytes), rewrites unchanged, chmods, removes and adds items across
/// two modalities of one timeline and a second timeline.
struct History {
    _tmp: tempfile::TempDir,
    dir: std::path::PathBuf,
    dataset: std::path::PathBuf,
    before: BTreeMap<String, Vec<u8>>,
}

impl History {
    fn new() -> History {
        require_fuse();
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        let dataset = dir.join("ds");
        let src = dir.join("src");
        let mut rng = Rng::new(14);
        for (rel, len) in [
            ("t/image/a.jpg", 3000),
            ("t/image/b.jpg", 2000),
            ("t/image/c.jpg", 1000),
            ("t/image/sub/d.jpg", 500),
            ("t/caption/a.txt", 40),
            ("t/caption/b.txt", 50),
            ("u/audio/x.wav", 4000),
        ] {
            write_file(&src.join(rel), &rng.bytes(len));
        }
        let before = contents(&src);
        import(&src, &dataset, &[]);

        // One commit, at unmount.
        let m = Mounted::writable_in(&dir, &dataset, &["--idle-flush", "3600"]);
        let p = |rel: &str| m.path.join(rel);
        std::fs::write(p("t/image/a.jpg"), rng.bytes(3001)).unwrap();
        std::fs::write(p("t/image/b.jpg"), rng.bytes(2000)).unwrap();
        std::fs::write(p("t/image/c.jpg"), &before["t/image/c.jpg"]).unwrap();
        std::fs::remove_file(p("t/image/sub/d.jpg")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        let private = std::fs::Permissions::from_mode(0o600);
        std::fs::set_permissions(p("t/caption/a.txt"), private).unwrap();
        std::fs::remove_file(p("t/caption/b.txt")).unwrap();
        std::fs::write(p("t/caption/c.txt"), b"new caption").unwrap();
        std::fs::write(p("t/caption/tab\there.txt"), b"odd name").unwrap();
        std::fs::write(p("u/audio/y.wav"), rng.bytes(100)).unwrap();
        m.unmount();
        drop(m);
        assert_eq!(manifests(&dataset).len(), 2, "one import, one commit");
        History {
            _tmp: tmp,
            dir,
            dataset,
            before,
        }
    }

    fn ds(&self) -> &str {
        self.dataset.to_str().unwrap()
    }

    /// `packfs diff` of the dataset: stdout and stderr.
    fn diff(&self, args: &[&str]) -> (String, String) {
        let mut all = vec!["diff", self.ds()];
        all.extend_from_slice(args);
        let out = packfs_ok(&all);
        (
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        )
    }
}

#[test]
fn history_mounts_show_the_old_content_and_refuse_writes() {
    let h = History::new();
    let [now, old] = <[String; 2]>::try_from(manifests(&h.dataset)).unwrap();
    for (i, revision) in ["main~1", old.as_str(), &old[..8], &old[..8].to_uppercase()]
        .into_iter()
        .enumerate()
    {
        // Not --read-only: any revision but a ref is mounted read-only.
        let mnt = h.dir.join(format!("mnt{i}"));
        let spool = h.dir.join(format!("spool{i}"));
        let m = Mounted::writable(&h.dataset, &mnt, &spool, &["--ref", revision]);
        assert_eq!(contents(&m.path), h.before, "{revision}");
        let manifest = std::fs::read_to_string(m.path.join(".packfs/manifest")).unwrap();
        assert_eq!(manifest, format!("{old}\n"), "{revision}");
        for attempt in [
            std::fs::write(m.path.join("t/image/new.jpg"), b"x"),
            std::fs::write(m.path.join("t/image/a.jpg"), b"x"),
            std::fs::remove_file(m.path.join("t/caption/b.txt")),
            std::fs::create_dir(m.path.join("t/video")),
        ] {
            let err = attempt.unwrap_err();
            assert_eq!(err.raw_os_error(), Some(libc::EROFS), "{revision}: {err}");
        }
        assert_eq!(contents(&m.path), h.before, "{revision}: unchanged");
    }
    // `main~0` is today's Manifest, also named for good.
    let m = Mounted::writable(
        &h.dataset,
        &h.dir.join("mnt-now"),
        &h.dir.join("spool-now"),
        &["--ref", "main~0"],
    );
    let manifest = std::fs::read_to_string(m.path.join(".packfs/manifest")).unwrap();
    assert_eq!(manifest, format!("{now}\n"));
    let err = std::fs::write(m.path.join("t/image/new.jpg"), b"x").unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EROFS));
    assert_eq!(manifests(&h.dataset), [now, old], "nothing was committed");
}

#[test]
fn a_ref_named_like_a_prefix_is_the_ref() {
    let h = History::new();
    let [now, old] = <[String; 2]>::try_from(manifests(&h.dataset)).unwrap();
    let ds = h.ds();
    // A ref whose name is the newest Manifest's prefix, at the oldest one.
    let name = &now[..8];
    packfs_ok(&["branch", ds, name, "--from", "main~1"]);
    let listed = |revision: &str| packfs_ok(&["ls", ds, "t/caption", "--ref", revision]).stdout;
    assert_eq!(listed(name), b"a.txt\nb.txt\n", "the ref wins");
    assert_eq!(
        listed(&now[..9]),
        listed("main"),
        "a longer prefix is the Manifest"
    );
    let log = packfs_ok(&["log", ds, "--ref", name]).stdout;
    assert!(String::from_utf8(log)
        .unwrap()
        .starts_with(&format!("manifest {old}")));
    // And it mounts read-write, as a ref.
    let m = Mounted::writable(
        &h.dataset,
        &h.dir.join("mnt"),
        &h.dir.join("spool"),
        &["--ref", name],
    );
    std::fs::write(m.path.join("t/caption/z.txt"), b"z").unwrap();
    assert!(!m.path.join(".packfs/manifest").exists());
    m.unmount();
    let cat = packfs_ok(&["cat", ds, "t/caption/z.txt", "--ref", name]).stdout;
    assert_eq!(cat, b"z");
}

#[test]
fn revisions_that_name_nothing_are_refused_saying_why() {
    let h = History::new();
    let ds = h.ds();
    let [_, old] = <[String; 2]>::try_from(manifests(&h.dataset)).unwrap();
    // Two Manifest objects sharing a prefix (only names are listed).
    let dir = h.dataset.join("_packfs/manifests");
    let twins = [
        format!("abcdef01{}", &old[8..]),
        format!("abcdef01{}", &old[..56]),
    ];
    for twin in &twins {
        std::fs::copy(dir.join(&old), dir.join(twin)).unwrap();
    }
    let mnt = h.dir.join("refused");
    std::fs::create_dir(&mnt).unwrap();
    let mnt = mnt.to_str().unwrap();
    let cases: [(&str, &[&str]); 5] = [
        (
            "abcdef01",
            &[
                "Manifest id prefix abcdef01 is ambiguous",
                &twins[0],
                &twins[1],
            ],
        ),
        (
            "deadbeef",
            &[
                "no ref named \"deadbeef\"",
                "no Manifest whose id starts with deadbeef",
            ],
        ),
        (
            &old[..7],
            &["a Manifest id prefix needs at least 8 hex digits"],
        ),
        (
            "main~2",
            &[
                "main~2 goes back past the start of history",
                "main has 2 Manifests",
            ],
        ),
        ("nosuch~1", &["ref \"nosuch\" does not exist"]),
    ];
    for (revision, needles) in cases {
        for args in [
            vec!["ls", ds, "--ref", revision],
            vec!["cat", ds, "t/caption/a.txt", "--ref", revision],
            vec!["log", ds, "--ref", revision],
            vec!["verify", ds, "--ref", revision],
            vec!["diff", ds, "main", revision],
            vec!["branch", ds, "new", "--from", revision],
            vec!["mount", ds, mnt, "--ref", revision],
        ] {
            failed_with(&packfs(&args), needles);
        }
    }
    assert!(!is_mounted(Path::new(mnt)));
    let bad = packfs(&["ls", ds, "--ref", "main^"]);
    failed_with(&bad, &["invalid revision \"main^\"", "write NAME~1"]);
    assert_eq!(bad.status.code(), Some(2), "a usage error");
}

#[test]
fn diff_lists_added_removed_modified_and_touched_items() {
    let h = History::new();
    let (out, err) = h.diff(&["main~1", "main"]);
    assert_eq!(
        out,
        "T\t/t/caption/a.txt\n\
         -\t/t/caption/b.txt\n\
         +\t/t/caption/c.txt\n\
         +\t\"/t/caption/tab\\there.txt\"\n\
         M\t/t/image/a.jpg\n\
         M\t/t/image/b.jpg\n\
         T\t/t/image/c.jpg\n\
         -\t/t/image/sub/d.jpg\n\
         +\t/u/audio/y.wav\n"
    );
    let [now, old] = <[String; 2]>::try_from(manifests(&h.dataset)).unwrap();
    let summary = format!(
        "from main~1 ({}) to main ({}): 3 added, 2 removed, 2 modified, 2 touched \
         (mode or mtime only)\n2 items of the same size stored apart were read and compared",
        &old[..12],
        &now[..12]
    );
    assert!(err.starts_with(&summary), "{err}");

    // The other way round, by id and prefix, NUL-separated.
    let (out, _) = h.diff(&[&now, &old[..8], "-z"]);
    assert_eq!(
        out,
        "T\0/t/caption/a.txt\0+\0/t/caption/b.txt\0-\0/t/caption/c.txt\0\
         -\0/t/caption/tab\there.txt\0M\0/t/image/a.jpg\0M\0/t/image/b.jpg\0\
         T\0/t/image/c.jpg\0+\0/t/image/sub/d.jpg\0-\0/u/audio/y.wav\0"
    );

    for same in [["main", "main"], ["main~1", old.as_str()]] {
        let (out, err) = h.diff(&same);
        assert_eq!(out, "");
        assert!(err.contains(": no differences"), "{err}");
    }
}

/// On an object store a prefix is found by listing the Manifests, and a
/// history mount reads the old content there too.
#[test]
fn prefixes_and_history_mounts_work_on_s3() {
    require_fuse();
    let home = Home::s3();
    let tmp = tempfile::tempdir().unwrap();
    for (i, text) in [b"one", b"two"].into_iter().enumerate() {
        let src = tmp.path().join(format!("src{i}"));
        write_file(&src.join("t/m/f.txt"), text);
        home.import(&src, &[]);
    }
    let log = home.log();
    let ids: Vec<&str> = log
        .lines()
        .filter_map(|l| l.strip_prefix("manifest "))
        .collect();
    let [now, old] = <[&str; 2]>::try_from(ids).unwrap();
    let cat =
        |revision: &str| home.packfs_ok(&["cat", home.location(), "t/m/f.txt", "--ref", revision]);
    assert_eq!(cat(&old[..8]).stdout, b"one");
    assert_eq!(cat(now).stdout, b"two");
    let diff = home.packfs_ok(&["diff", home.location(), &old[..10], "main"]);
    assert_eq!(diff.stdout, b"M\t/t/m/f.txt\n");
    let m = home.mount(&tmp.path().join("mnt"), &["--ref", &old[..8]]);
    assert_eq!(std::fs::read(m.path.join("t/m/f.txt")).unwrap(), b"one");
    let manifest = std::fs::read_to_string(m.path.join(".packfs/manifest")).unwrap();
    assert_eq!(manifest.trim_end(), old);
}
