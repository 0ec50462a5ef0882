//! Damaged TileDB arrays never panic packfs: the committed fixture arrays
//! with bytes of their schema, fragment metadata and data files flipped,
//! cut short or overwritten are opened, listed and read whole through the
//! library (the code a mount runs, without the kernel); every step either
//! works or returns an error.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use packfs_core::array::Array;
use packfs_core::cache::CacheOptions;
use packfs_core::catalog::array::ArrayCatalog;
use packfs_core::catalog::Catalog;
use packfs_core::kind::Kind;
use packfs_core::reader::Reader;
use packfs_core::store::{Store, StoreConfig};

use crate::common::{run_ok, walk, Rng};

/// Every file under `dir`, relative.
fn files(dir: &Path) -> Vec<String> {
    let files = walk(dir).1.into_iter();
    files.map(|rel| rel.display().to_string()).collect()
}

/// Opens the array at `dir`, lists every directory and reads every file
/// whole; returns how many files read without an error.
fn open_list_and_read(runtime: &tokio::runtime::Runtime, dir: &Path) -> usize {
    let location = dir.display().to_string();
    let store = Store::open(&location, false, &StoreConfig::default()).unwrap();
    let Ok(array) = runtime.block_on(Array::open(&store, None)) else {
        return 0;
    };
    let reader = Reader::new(store, CacheOptions::default(), None);
    let handle = runtime.handle().clone();
    let Ok(catalog) = ArrayCatalog::new(
        Arc::new(array),
        reader.cache().clone(),
        handle,
        &HashMap::new(),
    ) else {
        return 0;
    };
    let mut read = 0;
    let mut dirs = vec![0];
    while let Some(dir) = dirs.pop() {
        let mut index = 0;
        while let Some((id, _)) = catalog.child(dir, index) {
            index += 1;
            let Ok(Some(entry)) = catalog.entry(id) else {
                continue;
            };
            if entry.kind == Kind::Dir {
                dirs.push(id);
                continue;
            }
            let Ok(Some(extents)) = catalog.extents(id, 0..entry.size) else {
                continue;
            };
            if let Ok(bytes) = runtime.block_on(reader.read(extents)) {
                assert_eq!(bytes.len() as u64, entry.size);
                read += 1;
            }
        }
    }
    read
}

#[test]
fn damaged_fixture_arrays_fail_with_errors_never_panics() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tiledb");
    let tmp = tempfile::tempdir().unwrap();
    let mut rng = Rng::new(0x2545_f491_4f6c_dd1d);
    let copy = |from: &Path, to: &Path| {
        run_ok("cp", &["-r", from.to_str().unwrap(), to.to_str().unwrap()]);
    };
    // A random index below `n`.
    let mut below = move |n: usize| rng.below(n as u64) as usize;
    for name in ["small-sparse", "small-dense"] {
        let pristine = tmp.path().join(format!("{name}-pristine"));
        copy(&fixtures.join(name), &pristine);
        // The undamaged array reads whole: every file TileDB's read shows.
        let all = open_list_and_read(&runtime, &pristine);
        let expected = files(&fixtures.join(format!("{name}-expected"))).len();
        assert_eq!(all, expected, "{name}");
        let targets = files(&pristine);
        for round in 0..150 {
            let work = tmp.path().join(format!("{name}-{round}"));
            copy(&pristine, &work);
            let target = &targets[below(targets.len())];
            let path = work.join(target);
            let mut bytes = std::fs::read(&path).unwrap();
            if bytes.is_empty() {
                continue;
            }
            for _ in 0..1 + below(4) {
                let at = below(bytes.len());
                match below(4) {
                    0 => bytes[at] ^= 1 << below(8),
                    1 => bytes[at] = below(256) as u8,
                    2 => bytes[at] = 0xff,
                    _ => bytes.truncate(at),
                }
                if bytes.is_empty() {
                    break;
                }
            }
            std::fs::write(&path, &bytes).unwrap();
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                open_list_and_read(&runtime, &work)
            }));
            assert!(result.is_ok(), "{target} damaged in round {round} panicked");
            std::fs::remove_dir_all(&work).unwrap();
        }
    }
}
