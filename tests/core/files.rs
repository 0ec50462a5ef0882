//! Reading a dataset's files from code with `packfs_core::Files`: the bytes
//! and listings of an imported tree, errors that name what is wrong, and a
//! refusal inside an async runtime.

use packfs_core::dataset::Dataset;
use packfs_core::import::{import, ImportOptions};
use packfs_core::kind::Kind;
use packfs_core::{Files, FilesError};

use crate::common::{write_file, Rng};

/// A dataset of small files and one large enough to be chunked, imported
/// with small packs; returns its directory and the files' bytes.
fn dataset(tmp: &std::path::Path) -> (String, Vec<(String, Vec<u8>)>) {
    let mut rng = Rng::new(7);
    let mut files = Vec::new();
    for i in 0..40 {
        files.push((format!("train/image/{i:02}.jpg"), rng.bytes(100 + i * 37)));
    }
    files.push(("val/video/clip.bin".to_string(), rng.bytes(3 << 20)));
    let src = tmp.join("src");
    for (path, bytes) in &files {
        write_file(&src.join(path), bytes);
    }
    let dir = tmp.join("ds").to_str().unwrap().to_string();
    let mut options = ImportOptions::default();
    options.pack.pack_items = 8;
    options.pack.chunk_bytes = 1 << 20;
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let dataset = Dataset::open(&dir, true).unwrap();
        import(&dataset, &src, &options).await.unwrap();
    });
    (dir, files)
}

#[test]
fn every_file_reads_back_whole_and_in_ranges() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, files) = dataset(tmp.path());
    let version = Files::open(&dir).unwrap().at("main").unwrap();
    for (path, bytes) in &files {
        let file = version.open(path).unwrap();
        assert_eq!(file.size(), bytes.len() as u64, "{path}");
        assert_eq!(file.read_all().unwrap(), bytes[..], "{path}");
        let (from, to) = (bytes.len() as u64 / 3, bytes.len() as u64 / 2);
        assert_eq!(
            file.read(from..to).unwrap(),
            bytes[from as usize..to as usize],
            "{path}"
        );
        // A range past the end is cut there.
        assert_eq!(file.read(to..u64::MAX).unwrap(), bytes[to as usize..]);
    }
    // The chunked file in one line of calls.
    let clip = Files::open(&dir)
        .unwrap()
        .at("main")
        .unwrap()
        .open("val/video/clip.bin")
        .unwrap()
        .read((1 << 20) - 10..(1 << 20) + 10)
        .unwrap();
    let (_, video) = files.last().unwrap();
    assert_eq!(clip, video[(1 << 20) - 10..(1 << 20) + 10]);
}

#[test]
fn listings_show_directories_and_files_with_sizes() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, files) = dataset(tmp.path());
    let version = Files::open(&dir).unwrap().at("main").unwrap();
    let root: Vec<(String, Kind)> = version
        .list("")
        .unwrap()
        .into_iter()
        .map(|e| (e.name, e.kind))
        .collect();
    assert_eq!(
        root,
        [("train".into(), Kind::Dir), ("val".into(), Kind::Dir)]
    );
    let images = version.list("train/image").unwrap();
    assert_eq!(images.len(), 40);
    assert_eq!(images[3].name, "03.jpg");
    assert_eq!(images[3].size, files[3].1.len() as u64);
}

#[test]
fn errors_name_the_path_or_revision() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _) = dataset(tmp.path());
    let files = Files::open(&dir).unwrap();
    let version = files.at("main").unwrap();
    let missing = version.open("train/image/99.jpg").err().unwrap();
    assert!(matches!(missing, FilesError::Path(_)), "{missing:?}");
    assert!(
        missing.to_string().contains("train/image/99.jpg"),
        "{missing}"
    );
    let dir_as_file = version.open("train/image").err().unwrap();
    assert!(
        dir_as_file.to_string().contains("is a directory"),
        "{dir_as_file}"
    );
    let file_as_dir = version.list("train/image/01.jpg").unwrap_err();
    assert!(
        file_as_dir.to_string().contains("not a directory"),
        "{file_as_dir}"
    );
    let no_ref = files.at("nonesuch").err().unwrap();
    assert!(matches!(no_ref, FilesError::Dataset(_)), "{no_ref:?}");
    assert!(no_ref.to_string().contains("nonesuch"), "{no_ref}");
}

#[test]
fn calls_inside_an_async_runtime_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _) = dataset(tmp.path());
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let opened = runtime.block_on(async { Files::open(&dir).err() });
    assert!(
        matches!(opened, Some(FilesError::InAsyncContext)),
        "{opened:?}"
    );
}
