//! Runs a sequence of operations on the core and on the model, comparing
//! them after every step, and the property test that runs random ones.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use object_store::memory::InMemory;
use packfs_core::kind::Kind;
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;

use crate::common::core::{Core, Fixture};
use crate::common::files::walk;
use crate::errno::E;
use crate::generators::op_strategy;
use crate::kernel::{mount, read, resolve, run_on_core, NewHandle};
use crate::model::{
    diff, parent_of, remounted, short, Entry, MHandle, Model, Out, CONTROL, STORED,
};
use crate::operations::{Op, H};

/// Runs `op` on the model and on the core and compares what they answer;
/// on success the model takes the change.
pub fn step(core: &Core, model: &mut Model, op: &Op) -> Result<(), String> {
    let mut next = model.clone();
    let expected = next.apply(op);
    let actual = run_on_core(core, model, op);
    match (expected, actual) {
        (Err(e), Err(a)) if e == a => Ok(()),
        (Ok(out), Ok((bytes, new_handle))) => {
            match (&out, &bytes) {
                (Out::Bytes(Some(want)), Some(got)) if want != got => {
                    return Err(format!("read {}", diff(got, want)));
                }
                (Out::Bytes(_), None) => {
                    return Err("the core read nothing".to_string());
                }
                _ => {}
            }
            match (out, new_handle) {
                (Out::Opened { file, write }, Some(NewHandle { fh, ino })) => {
                    next.handles.push(MHandle {
                        fh,
                        ino,
                        file,
                        write,
                    });
                    let known = next.file(file).ino.get_or_insert(ino);
                    if *known != ino {
                        return Err(format!("opened inode {ino}, the file's is {known}"));
                    }
                }
                (Out::Opened { .. }, None) | (_, Some(_)) => {
                    return Err("the core and the model disagree on a new handle".into());
                }
                _ => {}
            }
            *model = next;
            Ok(())
        }
        (expected, actual) => Err(format!(
            "the model says {:?}, the core {:?}",
            expected.map(|_| ()),
            actual.map(|_| ())
        )),
    }
}

// ---------------------------------------------------------------------------
// Comparing the whole mount

/// Compares the core with the model: the listings, each node's lookup,
/// kind and size and the files' bytes, and with `attrs` the modes, known
/// mtimes, link counts and inodes; then what open handles read.
fn compare(core: &Core, model: &mut Model, attrs: bool) -> Result<(), String> {
    let listed = core.listing()?;
    let real: BTreeMap<&str, Kind> = listed
        .iter()
        .map(|(k, s)| (k.as_str(), s.attr.kind))
        .collect();
    let expected: BTreeMap<&str, Kind> = model
        .entries
        .iter()
        .map(|(k, e)| {
            let kind = match e {
                Entry::Dir(_) => Kind::Dir,
                Entry::File(_) => Kind::File,
            };
            (k.as_str(), kind)
        })
        .collect();
    if real != expected {
        return Err(format!("the mount lists {real:?}, the model {expected:?}"));
    }
    let mut inos = BTreeSet::new();
    for (path, listed_stat) in &listed {
        let stat = resolve(core, path).map_err(|e| format!("lookup {path}: {e:?}"))?;
        let attr = stat.attr;
        if attr.ino != listed_stat.attr.ino || !inos.insert(attr.ino) {
            return Err(format!(
                "{path}: inode {} (listed {})",
                attr.ino, listed_stat.attr.ino
            ));
        }
        match &model.entries[path] {
            Entry::Dir(d) => {
                let subdirs = model
                    .entries
                    .iter()
                    .filter(|(k, e)| parent_of(k) == path && matches!(e, Entry::Dir(_)))
                    .count();
                let want = (d.perm, d.mtime.unwrap_or(attr.mtime), 2 + subdirs as u32);
                let got = (attr.perm, attr.mtime, attr.nlink);
                // A stored directory the mount has not changed may not know
                // its subdirectories: nlink 1.
                let unknown = d.stored && attr.nlink == 1 && (want.0, want.1) == (got.0, got.1);
                if attrs && want != got && !unknown {
                    return Err(format!(
                        "{path}: (mode, mtime, nlink) {got:?}, the model {want:?}"
                    ));
                }
            }
            Entry::File(id) => {
                let f = model.files.get_mut(id).expect("named file exists");
                let bytes = read(core, attr.ino, 0, attr.size as u32 + 1)
                    .map_err(|e| format!("read {path}: {e:?}"))?;
                if attr.size != f.bytes.len() as u64 || bytes != f.bytes {
                    return Err(format!(
                        "{path}: size {}, {}",
                        attr.size,
                        diff(&bytes, &f.bytes)
                    ));
                }
                if attrs {
                    let want = (
                        f.perm,
                        f.mtime.unwrap_or(attr.mtime),
                        1,
                        *f.ino.get_or_insert(attr.ino),
                    );
                    let got = (attr.perm, attr.mtime, attr.nlink, attr.ino);
                    if want != got {
                        return Err(format!(
                            "{path}: (mode, mtime, nlink, inode) {got:?}, the model {want:?}"
                        ));
                    }
                }
            }
        }
    }
    // The control directory is found but never listed.
    let control = resolve(core, CONTROL).map_err(|e| format!("lookup .packfs: {e:?}"))?;
    if control.attr.kind != Kind::Dir {
        return Err(".packfs is not a directory".into());
    }
    for h in &model.handles {
        let f = &model.files[&h.file];
        let size = core
            .fs()
            .getattr(h.ino)
            .map(|s| s.attr.size)
            .map_err(E::from);
        let bytes = read(core, h.ino, 0, f.bytes.len() as u32 + 1);
        if size != Ok(f.bytes.len() as u64) || bytes.as_ref() != Ok(&f.bytes) {
            return Err(format!(
                "handle {} (inode {}) shows size {size:?}, {}",
                h.fh,
                h.ino,
                match &bytes {
                    Ok(b) => diff(b, &f.bytes),
                    Err(e) => format!("{e:?}"),
                }
            ));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Running a sequence

/// Files below the spool's `lost+found`, by path below it.
fn lost_and_found(fixture: &Fixture) -> BTreeMap<String, Vec<u8>> {
    let root = fixture.spool.join("lost+found");
    if !root.exists() {
        return BTreeMap::new();
    }
    let (_, files) = walk(&root);
    files
        .into_iter()
        .map(|rel| {
            let bytes = std::fs::read(root.join(&rel)).unwrap();
            (rel.to_string_lossy().into_owned(), bytes)
        })
        .collect()
}

/// The new entries of `lost+found` must hold each of `expected`'s
/// unfinished files under its path (below a `<time>/` directory, with a
/// `.<n>` suffix if that name was taken).
fn check_lost_and_found(
    before: &BTreeMap<String, Vec<u8>>,
    after: &BTreeMap<String, Vec<u8>>,
    expected: &[(String, Vec<u8>)],
) -> Result<(), String> {
    let new: Vec<(&str, &Vec<u8>)> = after
        .iter()
        .filter(|(k, _)| !before.contains_key(*k))
        .map(|(k, v)| (k.split_once('/').map_or(k.as_str(), |(_, rest)| rest), v))
        .collect();
    for (path, bytes) in expected {
        let named = |found: &str| {
            found == path
                || found
                    .strip_prefix(path.as_str())
                    .and_then(|r| r.strip_prefix('.'))
                    .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        };
        if !new.iter().any(|(found, b)| named(found) && *b == bytes) {
            return Err(format!(
                "lost+found lacks {path} with {}; new entries: {:?}",
                short(bytes),
                new.iter().map(|(p, b)| (p, short(b))).collect::<Vec<_>>()
            ));
        }
    }
    Ok(())
}

/// The committed dataset (a read-only mount of the ref) must be `model`.
fn compare_committed(fixture: &Fixture, model: &Model) -> Result<(), String> {
    let core = fixture.mount_read_only();
    let mut committed = model.clone();
    compare(&core, &mut committed, false).map_err(|e| format!("the committed dataset: {e}"))
}

/// Runs `ops` from the stored dataset on a fresh store, comparing the core
/// with the model after each (`REFTESTS_TRACE=1` prints them as they
/// run, with their paths); at the end every handle is closed and a
/// remount must show what the model keeps.
pub fn run(ops: &[Op]) -> Result<(), String> {
    let files: Vec<(&str, Vec<u8>)> = STORED.iter().map(|(p, d)| (*p, d.bytes())).collect();
    let fixture = Fixture::new(Arc::new(InMemory::new()), &files);
    let mut core = mount(&fixture);
    let mut model = Model::initial();
    compare(&core, &mut model, true).map_err(|e| format!("at the start: {e}"))?;
    let ops = ops.iter().chain([&Op::Remount]);
    for (i, op) in ops.enumerate() {
        let op = &model.concrete(op);
        let context = |e: String| format!("op {i} {op:?}: {e}");
        if std::env::var_os("REFTESTS_TRACE").is_some() {
            eprintln!("{i}: {op:?}");
        }
        match op {
            Op::Commit => {
                core.block_on(core.fs().fsync(None))
                    .map_err(|e| context(format!("fsync: {e}")))?;
                compare_committed(&fixture, &model.committed()).map_err(context)?;
            }
            Op::Crash => {
                let before = lost_and_found(&fixture);
                let lost = model.settle_open_files();
                model = remounted(&model);
                core.crash();
                core = mount(&fixture);
                compare(&core, &mut model, true).map_err(context)?;
                check_lost_and_found(&before, &lost_and_found(&fixture), &lost).map_err(context)?;
            }
            Op::Remount => {
                while !model.handles.is_empty() {
                    let close = Op::HandleClose { h: H(0) };
                    step(&core, &mut model, &close).map_err(context)?;
                }
                core.unmount();
                model = remounted(&model);
                core = mount(&fixture);
            }
            op => step(&core, &mut model, op).map_err(context)?,
        }
        compare(&core, &mut model, true).map_err(context)?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 128,
        max_shrink_iters: 4096,
        // Failures found are kept (and re-run first) in proptest-regressions/
        // at the package root (where cargo runs tests), by this file's path
        // below tests/.
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "proptest-regressions/reftests/harness.txt",
        ))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn the_core_behaves_like_the_model(ops in proptest::collection::vec(op_strategy(), 1..30)) {
        if let Err(e) = run(&ops) {
            return Err(TestCaseError::fail(e));
        }
    }
}
