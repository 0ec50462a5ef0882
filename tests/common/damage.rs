//! Damage done by hand to files a test wrote, and what a mount answers
//! for it.

use std::os::unix::fs::FileExt;
use std::path::Path;

/// Flips one bit of byte `at` of `file`.
pub fn flip(file: &Path, at: u64) {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(file)
        .unwrap();
    let mut byte = [0];
    f.read_exact_at(&mut byte, at).unwrap();
    f.write_all_at(&[byte[0] ^ 0x10], at).unwrap();
}

/// Whether reading `rel` under `mnt` whole fails with EIO (and not
/// otherwise).
pub fn eio(mnt: &Path, rel: &str) -> bool {
    match std::fs::read(mnt.join(rel)) {
        Ok(_) => false,
        Err(e) => {
            assert_eq!(e.raw_os_error(), Some(libc::EIO), "{rel}: {e}");
            true
        }
    }
}
