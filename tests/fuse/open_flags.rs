//! Open flags through the kernel on a read-write mount.

use std::os::unix::fs::OpenOptionsExt;

use crate::common::*;

/// `open(O_RDONLY | O_TRUNC)` empties the file, as on Linux's own
/// filesystems. The kernel has dropped its cached size and pages by then
/// (atomic O_TRUNC): the file kept its bytes in the daemon, and a program
/// running from it crashed.
#[test]
fn an_open_for_reading_with_o_trunc_empties_the_file() {
    require_fuse();
    let dir = tempfile::tempdir().unwrap();
    write_file(&dir.path().join("src/t/m/stored"), b"stored bytes");
    let ds = dir.path().join("ds");
    import(&dir.path().join("src"), &ds, &[]);
    let m = Mounted::writable_in(dir.path(), &ds, &[]);
    let new = m.path.join("t/m/new");
    std::fs::write(&new, b"new bytes").unwrap();
    for path in [m.path.join("t/m/stored"), new] {
        let opened = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_TRUNC)
            .open(&path)
            .unwrap();
        drop(opened);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 0, "{path:?}");
    }
    m.unmount();
    for name in ["stored", "new"] {
        let cat = packfs_ok(&["cat", ds.to_str().unwrap(), &format!("t/m/{name}")]);
        assert_eq!(cat.stdout, b"", "{name}");
    }
}
