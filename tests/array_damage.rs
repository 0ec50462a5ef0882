//! Damaged TileDB arrays never panic packfs: the committed fixture arrays
//! with bytes of their schema, fragment metadata and data files flipped,
//! cut short or overwritten are opened, listed and read whole through the
//! library (the code a mount runs, without the kernel); every step either
//! works or returns an error.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use packfs::array::Array;
use packfs::cache::CacheOptions;
use packfs::catalog::array::ArrayCatalog;
use packfs::catalog::{Catalog, Kind};
use packfs::reader::Reader;
use packfs::store::{Store, StoreConfig};

/// xorshift: the same mutations every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Every file under `dir`, relative.
fn files(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            match path.is_dir() {
                true => stack.push(path),
                false => out.push(path.strip_prefix(dir).unwrap().display().to_string()),
            }
        }
    }
    out.sort();
    out
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
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    for name in ["small-sparse", "small-dense"] {
        let pristine = tmp.path().join(format!("{name}-pristine"));
        let status = std::process::Command::new("cp")
            .arg("-r")
            .arg(fixtures.join(name))
            .arg(&pristine)
            .status()
            .unwrap();
        assert!(status.success());
        // The undamaged array reads whole: every file TileDB's read shows.
        let all = open_list_and_read(&runtime, &pristine);
        let expected = files(&fixtures.join(format!("{name}-expected"))).len();
        assert_eq!(all, expected, "{name}");
        let targets = files(&pristine);
        for round in 0..150 {
            let work = tmp.path().join(format!("{name}-{round}"));
            let status = std::process::Command::new("cp")
                .arg("-r")
                .arg(&pristine)
                .arg(&work)
                .status()
                .unwrap();
            assert!(status.success());
            let target = &targets[rng.below(targets.len())];
            let path = work.join(target);
            let mut bytes = std::fs::read(&path).unwrap();
            if bytes.is_empty() {
                continue;
            }
            for _ in 0..1 + rng.below(4) {
                let at = rng.below(bytes.len());
                match rng.below(4) {
                    0 => bytes[at] ^= 1 << rng.below(8),
                    1 => bytes[at] = rng.next() as u8,
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
