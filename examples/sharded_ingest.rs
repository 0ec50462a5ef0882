//! Sharded ingest by branches and a union merge: N
//! workers each import a disjoint slice of a source tree into a branch of
//! their own, all at once, then one union merge brings every branch into
//! `main` as a single Manifest with N + 1 parents. The result is checked
//! byte for byte against the source and with `verify`.
//!
//!     cargo run --release --example sharded_ingest [-- WORKERS [FILES]]
//!
//! Defaults: 4 workers, 4,000 files of 1–64 KiB, in a temporary directory.

use std::path::Path;
use std::time::Instant;

use packfs_core::dataset::{writer_string, Dataset, MergeOutcome};
use packfs_core::import::{import, ImportOptions};
use packfs_core::reader::Reader;
use packfs_core::tree::Tree;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let workers: usize = args.next().map_or(Ok(4), |a| a.parse())?;
    let files: usize = args.next().map_or(Ok(4000), |a| a.parse())?;
    if workers == 0 {
        return Err("WORKERS must be at least 1".into());
    }
    let work = tempfile::Builder::new()
        .prefix("packfs-sharded-")
        .tempdir()?;
    let dataset_dir = work.path().join("dataset");
    let slices = write_slices(work.path(), workers, files)?;
    tokio::runtime::Runtime::new()?.block_on(run(&dataset_dir, &slices, files))
}

/// Writes `files` files split into `workers` slices: `slice-<w>/train/image/w<w>/…`.
fn write_slices(root: &Path, workers: usize, files: usize) -> Result<Vec<std::path::PathBuf>> {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let slices: Vec<_> = (0..workers)
        .map(|w| root.join(format!("slice-{w}")))
        .collect();
    for i in 0..files {
        let w = i % workers;
        let path = slices[w].join(format!("train/image/w{w}/{i:06}.bin"));
        std::fs::create_dir_all(path.parent().expect("has a parent"))?;
        let len = 1024 + (next() % (63 * 1024)) as usize;
        let bytes: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        std::fs::write(path, bytes)?;
    }
    Ok(slices)
}

async fn run(dataset_dir: &Path, slices: &[std::path::PathBuf], files: usize) -> Result<()> {
    let dataset = Dataset::open(dataset_dir.to_str().ok_or("non-UTF-8 path")?, true)?;
    // The trunk starts with one file so the branches have a common ancestor.
    let seed = dataset_dir.with_file_name("seed");
    std::fs::create_dir_all(seed.join("train/image"))?;
    std::fs::write(seed.join("train/image/README.txt"), b"sharded ingest\n")?;
    let options = ImportOptions::default();
    import(&dataset, &seed, &options).await?;

    let started = Instant::now();
    let branches: Vec<String> = (0..slices.len()).map(|w| format!("ingest-w{w}")).collect();
    for branch in &branches {
        dataset.create_branch(branch, "main").await?;
    }
    let tasks: Vec<_> = slices
        .iter()
        .zip(&branches)
        .map(|(slice, branch)| {
            let (dataset, slice) = (dataset.clone(), slice.clone());
            let options = options.clone().ref_name(branch.clone());
            tokio::spawn(async move { import(&dataset, &slice, &options).await })
        })
        .collect();
    for task in tasks {
        task.await??;
    }
    let ingested = started.elapsed();
    let report = dataset
        .merge_refs("main", &branches, &writer_string("sharded_ingest"))
        .await?;
    let merged = started.elapsed() - ingested;
    let MergeOutcome::Merged { parents } = report.outcome else {
        return Err(format!("expected a merge, got {:?}", report.outcome).into());
    };
    println!(
        "{} workers imported {files} files in {ingested:.2?}; merged into main \
         (manifest {}, {parents} parents) in {merged:.2?}",
        slices.len(),
        report.manifest.short()
    );
    if !report.conflicts.is_empty() {
        return Err(format!("disjoint slices must not conflict: {:?}", report.conflicts).into());
    }

    // Every source file is in main with its exact bytes.
    let tree = Tree::build(dataset.snapshot("main").await?)?;
    let reader = Reader::new(dataset.store().clone(), Default::default(), None);
    let mut checked = 0;
    for slice in slices {
        for entry in walk(slice)? {
            let rel = entry
                .strip_prefix(slice)?
                .to_str()
                .ok_or("non-UTF-8 name")?;
            let item = tree.file_data(rel)?;
            let bytes = reader.read_item(&item, 0, item.size).await?;
            if bytes != std::fs::read(&entry)? {
                return Err(format!("{rel}: bytes differ after the merge").into());
            }
            checked += 1;
        }
    }
    let verified = packfs_core::verify::verify(&dataset, "main").await?;
    if !verified.problems.is_empty() {
        return Err(format!("verify failed: {:?}", verified.problems).into());
    }
    println!(
        "checked {checked} files byte for byte; verify: {} items, {} objects OK",
        verified.items, verified.objects
    );
    Ok(())
}

/// Files under `dir`, recursively.
fn walk(dir: &Path) -> Result<Vec<std::path::PathBuf>> {
    let mut out = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for entry in std::fs::read_dir(&d)? {
            let path = entry?.path();
            if path.is_dir() {
                pending.push(path);
            } else {
                out.push(path);
            }
        }
    }
    Ok(out)
}
