//! Hard links in a read-write mount, without the kernel: one file under
//! several names while mounted (one inode, the link count, shared bytes),
//! each name committed as an item of the same stored bytes, and the links
//! replayed from the journal after a crash.

use packfs_fs::fs::FsError;
use packfs_fs::namespace::NsError;

use crate::common::bench::Bench;
use crate::common::core::Core;

fn bench() -> Bench {
    Bench::new(&[("t/m/stored", b"stored".to_vec()), ("t/n/x", b"x".to_vec())])
}

fn nlink(core: &Core, path: &str) -> u32 {
    core.fs()
        .getattr(core.path(path).unwrap())
        .unwrap()
        .attr
        .nlink
}

/// `t/m/a` written, then linked as `t/m/b` and `t/m/d/c`; `stored` linked
/// as `t/m/s2`.
fn make_links(core: &Core) {
    let fs = core.fs();
    let m = core.path("t/m").unwrap();
    let fh = core.create_open("t/m", "a", b"one file");
    core.close(fh);
    let a = core.path("t/m/a").unwrap();
    fs.link(a, m, b"b").unwrap();
    let d = fs.mkdir(m, b"d", 0o755).unwrap().attr.ino;
    let linked = fs.link(a, d, b"c").unwrap();
    assert_eq!((linked.attr.ino, linked.attr.nlink), (a, 3));
    let stored = core.path("t/m/stored").unwrap();
    fs.link(stored, m, b"s2").unwrap();
}

#[test]
fn names_of_one_file_share_its_inode_bytes_and_link_count() {
    let bench = bench();
    let core = bench.mount();
    make_links(&core);
    let fs = core.fs();
    for name in ["t/m/a", "t/m/b", "t/m/d/c"] {
        assert_eq!(core.path(name).unwrap(), core.path("t/m/a").unwrap());
        assert_eq!(nlink(&core, name), 3, "{name}");
    }
    assert_eq!(nlink(&core, "t/m/s2"), 2);
    // Written through one name, read through another.
    let fh = core.open(core.path("t/m/b").unwrap(), true);
    core.block_on(fs.write(fh, 0, b"ONE")).unwrap();
    core.close(fh);
    assert_eq!(core.read_all(core.path("t/m/d/c").unwrap()), b"ONE file");
    // An unlink takes one name; a rename over a link replaces that name.
    let m = core.path("t/m").unwrap();
    fs.unlink(m, b"a").unwrap();
    assert_eq!(nlink(&core, "t/m/b"), 2);
    fs.rename((m, b"s2"), (m, b"b"), Default::default())
        .unwrap();
    assert_eq!(core.read_all(core.path("t/m/b").unwrap()), b"stored");
    assert_eq!(nlink(&core, "t/m/d/c"), 1);
    assert_eq!(nlink(&core, "t/m/stored"), 2);
    // Where a link cannot go.
    let n = core.path("t/n").unwrap();
    let c = core.path("t/m/d/c").unwrap();
    let refused = |e: FsError| match e {
        FsError::Namespace(e) => e,
        e => panic!("{e:?}"),
    };
    assert!(matches!(
        refused(fs.link(c, n, b"c").unwrap_err()),
        NsError::CrossModality
    ));
    assert!(matches!(
        refused(fs.link(m, n, b"m").unwrap_err()),
        NsError::NotPermitted(_)
    ));
    assert!(matches!(
        refused(fs.link(c, m, b"b").unwrap_err()),
        NsError::Exists
    ));
    core.unmount();
    assert_eq!(bench.committed("t/m/d/c").unwrap(), b"ONE file");
    assert_eq!(bench.committed("t/m/b").unwrap(), b"stored");
    assert_eq!(bench.committed("t/m/a"), None);
}

#[test]
fn each_name_is_committed_as_an_item_of_the_same_stored_bytes() {
    let bench = bench();
    let core = bench.mount();
    make_links(&core);
    core.unmount();
    let view = bench.mount_read_only();
    let snapshot = view.block_on(bench.dataset.snapshot("main")).unwrap();
    // Where each item of modality m is stored.
    let m = snapshot
        .manifest
        .tracks
        .iter()
        .position(|t| t.modality == "m")
        .unwrap();
    let stored_at = |name: &str| {
        let items = &snapshot.tracks[m].items;
        let item = items.iter().find(|i| i.name() == name).unwrap();
        format!("{:?}", item.source())
    };
    assert_eq!(stored_at("a"), stored_at("b"), "uploaded once");
    assert_eq!(stored_at("a"), stored_at("d/c"));
    assert_eq!(stored_at("stored"), stored_at("s2"));
    // A new mount shows each name as a file of its own.
    for name in ["t/m/a", "t/m/b", "t/m/d/c"] {
        assert_eq!(view.read_all(view.path(name).unwrap()), b"one file");
        assert_eq!(nlink(&view, name), 1);
    }
}

#[test]
fn links_are_replayed_after_a_crash() {
    let bench = bench();
    let core = bench.mount();
    make_links(&core);
    let fh = core.open(core.path("t/m/d/c").unwrap(), true);
    core.block_on(core.fs().write(fh, 0, b"ONE")).unwrap();
    core.close(fh);
    core.crash();
    bench.mount().unmount(); // replays the journal and commits
    for name in ["t/m/a", "t/m/b", "t/m/d/c"] {
        assert_eq!(bench.committed(name).unwrap(), b"ONE file", "{name}");
    }
    assert_eq!(bench.committed("t/m/s2").unwrap(), b"stored");
    assert!(bench.lost_and_found().is_empty());
}
