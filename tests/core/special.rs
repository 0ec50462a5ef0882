//! Symbolic links, FIFOs, sockets and device nodes in a read-write mount,
//! without the kernel: made, read back, committed as items whose media
//! type says what they are, and replayed from the journal after a crash.

use packfs_format::Special;
use packfs_fs::fs::FsError;
use packfs_fs::namespace::{Attr, NsError};

use crate::common::bench::Bench;
use crate::common::core::Core;

fn bench() -> Bench {
    Bench::new(&[("t/m/file", b"bytes".to_vec())])
}

/// Makes `link` (to `../file`), `fifo`, `sock` and `tty` (a character
/// device 4:1, mode 0620) in `t/m/sub`.
fn make_all(core: &Core) {
    let fs = core.fs();
    let m = core.path("t/m").unwrap();
    let sub = fs.mkdir(m, b"sub", 0o755).unwrap().attr.ino;
    fs.symlink(sub, b"link", b"../file").unwrap();
    fs.mknod(sub, b"fifo", libc::S_IFIFO | 0o640, 0).unwrap();
    fs.mknod(sub, b"sock", libc::S_IFSOCK | 0o755, 0).unwrap();
    fs.mknod(sub, b"tty", libc::S_IFCHR | 0o620, 0x0401)
        .unwrap();
}

/// The attributes of `path`.
fn attr(core: &Core, path: &str) -> Attr {
    core.fs().getattr(core.path(path).unwrap()).unwrap().attr
}

/// What `make_all` made, as `core` shows it.
fn check_all(core: &Core) {
    let link = attr(core, "t/m/sub/link");
    assert_eq!(
        (link.special, link.perm, link.size),
        (Some(Special::Symlink), 0o777, 7)
    );
    let target = core.block_on(core.fs().readlink(link.ino)).unwrap();
    assert_eq!(target, b"../file");
    let fifo = attr(core, "t/m/sub/fifo");
    assert_eq!(
        (fifo.special, fifo.perm, fifo.size),
        (Some(Special::Fifo), 0o640, 0)
    );
    assert_eq!(attr(core, "t/m/sub/sock").special, Some(Special::Socket));
    let tty = attr(core, "t/m/sub/tty");
    assert_eq!(
        (tty.special, tty.perm),
        (Some(Special::CharDevice(0x0401)), 0o620)
    );
    assert_eq!(attr(core, "t/m/file").special, None);
}

#[test]
fn links_fifos_sockets_and_devices_are_committed_as_what_they_are() {
    let bench = bench();
    let core = bench.mount();
    make_all(&core);
    check_all(&core);
    core.unmount();
    check_all(&bench.mount_read_only());
    // The link's item holds its target, as a file would.
    assert_eq!(bench.committed("t/m/sub/link").unwrap(), b"../file");
}

#[test]
fn links_and_nodes_made_before_a_crash_are_recovered() {
    let bench = bench();
    let core = bench.mount();
    make_all(&core);
    core.crash();
    bench.mount().unmount(); // replays the journal and commits
    check_all(&bench.mount_read_only());
}

#[test]
fn links_are_renamed_and_removed_like_files_and_refused_where_invalid() {
    let bench = bench();
    let core = bench.mount();
    let fs = core.fs();
    let m = core.path("t/m").unwrap();
    fs.symlink(m, b"a", b"file").unwrap();
    fs.rename((m, b"a"), (m, b"b"), Default::default()).unwrap();
    assert_eq!(attr(&core, "t/m/b").special, Some(Special::Symlink));
    let is = |e: FsError, want: NsError| {
        assert!(
            matches!(&e, FsError::Namespace(got) if std::mem::discriminant(got) == std::mem::discriminant(&want)),
            "{e:?}, not {want:?}"
        )
    };
    is(fs.symlink(m, b"b", b"x").unwrap_err(), NsError::Exists);
    is(fs.symlink(m, b"empty", b"").unwrap_err(), NsError::NotFound);
    is(
        fs.symlink(m, b"long", &[b'x'; 4096]).unwrap_err(),
        NsError::NameTooLong,
    );
    let file = core.path("t/m/file").unwrap();
    is(
        core.block_on(fs.readlink(file)).unwrap_err(),
        NsError::Invalid(""),
    );
    // Outside a modality nothing but directories can be made.
    let t = core.path("t").unwrap();
    is(
        fs.symlink(t, b"l", b"m").unwrap_err(),
        NsError::NotPermitted(""),
    );
    // mknod of a regular file makes an empty, closed one.
    fs.mknod(m, b"empty", libc::S_IFREG | 0o600, 0).unwrap();
    fs.unlink(m, b"b").unwrap();
    core.unmount();
    assert_eq!(bench.committed("t/m/b"), None);
    assert_eq!(bench.committed("t/m/empty").unwrap(), b"");
}
