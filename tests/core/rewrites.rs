//! A large file rewritten in place through a read-write mount (a
//! database, a checkpoint) stores only the chunks a change falls in:
//! counted in data objects uploaded.

use std::sync::atomic::Ordering;

use crate::common::bench::Bench;
use crate::common::Rng;

#[test]
fn a_large_file_rewritten_in_place_stores_only_the_chunks_it_changed() {
    let bench = Bench::new(&[("t/m/seed", b"seed".to_vec())]);
    let uploads = || bench.faults.data_puts.load(Ordering::SeqCst);
    let core = bench.mount();
    let mut bytes = Rng::new(3).bytes(6 << 20);
    let before = uploads();
    let fh = core.create_open("t/m", "db", &bytes);
    core.close(fh);
    core.block_on(core.fs().fsync(None)).unwrap();
    // 6 MiB in chunks of 64 KiB (the power of two making ~1024 of them,
    // at least 64 KiB), and its ItemManifest.
    assert_eq!(uploads() - before, 96 + 1);

    let before = uploads();
    let ino = core.path("t/m/db").unwrap();
    let fh = core.open(ino, true);
    let at = (3 << 20) + 100;
    core.block_on(core.fs().write(fh, at as u64, b"a changed page"))
        .unwrap();
    core.close(fh);
    core.block_on(core.fs().fsync(None)).unwrap();
    assert_eq!(
        uploads() - before,
        2,
        "the chunk the change falls in, and the new ItemManifest"
    );
    core.unmount();
    bytes[at..at + 14].copy_from_slice(b"a changed page");
    assert_eq!(bench.committed("t/m/db").unwrap(), bytes);
}
