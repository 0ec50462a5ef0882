//! Damaged datasets through a real FUSE mount: the damaged item gives EIO,
//! everything else keeps working, and a damaged Manifest refuses to mount.

mod common;

use std::path::Path;

use common::*;

/// The data objects of one modality, largest first.
fn packs(dataset: &Path, timeline: &str, modality: &str) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dataset.join(timeline).join(modality).join("0"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort_by_key(|p| std::cmp::Reverse(std::fs::metadata(p).unwrap().len()));
    v
}

#[test]
fn truncated_pack_gives_eio_for_its_items_only() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let (src, dataset) = (tmp.path().join("src"), tmp.path().join("dataset"));
    let mut rng = Rng::new(3);
    for i in 0..8 {
        write_file(&src.join(format!("t/m/{i}.bin")), &rng.bytes(10_000));
    }
    import(&src, &dataset, &["--pack-items", "4"]);
    // Two packs of four items: 0–3 and 4–7. Cut the first one short.
    let pack = packs(&dataset, "t", "m")
        .into_iter()
        .find(|p| {
            std::fs::read(p).unwrap()[..100] == std::fs::read(src.join("t/m/0.bin")).unwrap()[..100]
        })
        .expect("the pack holding item 0");
    let file = std::fs::OpenOptions::new().write(true).open(&pack).unwrap();
    file.set_len(25_000).unwrap();

    let mnt = Mounted::new(&dataset, &tmp.path().join("mnt"), &[]);
    for i in 0..4 {
        let err = std::fs::read(mnt.path.join(format!("t/m/{i}.bin"))).unwrap_err();
        assert_eq!(
            err.raw_os_error(),
            Some(libc::EIO),
            "item {i} of the short pack"
        );
    }
    for i in 4..8 {
        let rel = format!("t/m/{i}.bin");
        assert_eq!(
            std::fs::read(mnt.path.join(&rel)).unwrap(),
            std::fs::read(src.join(&rel)).unwrap()
        );
    }
    // The CLI names the pack and both lengths.
    let out = packfs(&["cat", dataset.to_str().unwrap(), "t/m/0.bin"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    let name = pack.file_name().unwrap().to_str().unwrap();
    assert!(
        err.contains(name) && err.contains("25000") && err.contains("40000"),
        "{err}"
    );
}

#[test]
fn damaged_manifest_refuses_to_mount_with_the_reason() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let (src, dataset) = (tmp.path().join("src"), tmp.path().join("dataset"));
    write_file(&src.join("t/m/a"), b"a");
    import(&src, &dataset, &["--pack-items", "4"]);
    let manifests = dataset.join("_packfs/manifests");
    let manifest = std::fs::read_dir(&manifests)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    std::fs::write(&manifest, b"\xa1\x61").unwrap();
    let mnt = tmp.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let out = packfs(&["mount", dataset.to_str().unwrap(), mnt.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("is damaged") && err.contains(manifest.file_name().unwrap().to_str().unwrap()),
        "{err}"
    );
    assert!(!is_mounted(&mnt.canonicalize().unwrap()));
}
