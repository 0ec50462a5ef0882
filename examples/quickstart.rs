//! Builds a small sample dataset on a local directory store with the
//! library API, reads a file back through it, then mounts it with FUSE in
//! the foreground until Ctrl-C.
//!
//!     cargo run --release --example quickstart [WORKDIR]
//!
//! WORKDIR (default `./packfs-quickstart`) receives `source/`, `dataset/`
//! and the mountpoint `mnt/`.

use std::path::{Path, PathBuf};

use packfs_core::dataset::Dataset;
use packfs_core::import::{import, ImportOptions};
use packfs_core::Files;
use packfs_fs::mount::{mount, MountOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let work = PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| "packfs-quickstart".into()),
    );
    let (source, dataset_dir, mnt) = (work.join("source"), work.join("dataset"), work.join("mnt"));
    let files = write_sample_tree(&source)?;
    println!("wrote {files} sample files under {}", source.display());

    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async {
        let dataset = Dataset::open(dataset_dir.to_str().ok_or("non-UTF-8 path")?, true)?;
        let mut options = ImportOptions::default();
        options.pack.pack_items = 256;
        options.pack.chunk_bytes = 4 << 20;
        let report = import(&dataset, &source, &options).await?;
        println!(
            "imported {} files into {} objects at {}",
            report.items,
            report.objects_written + report.objects_reused,
            dataset_dir.display()
        );
        Ok::<_, Box<dyn std::error::Error>>(())
    })?;
    drop(runtime); // reading and mounting start runtimes of their own

    // Read one file back through the library, without FUSE.
    let caption = Files::open(dataset_dir.to_str().ok_or("non-UTF-8 path")?)?
        .at("main")?
        .open("train/caption/sample-00007.txt")?
        .read_all()?;
    println!(
        "train/caption/sample-00007.txt says: {}",
        String::from_utf8_lossy(&caption).trim()
    );

    std::fs::create_dir_all(&mnt)?;
    let mnt = mnt.canonicalize()?;
    println!(
        "\nmounting at {} (Ctrl-C to unmount). In another terminal, try:",
        mnt.display()
    );
    for cmd in [
        format!("ls -l {}/train/image | head", mnt.display()),
        format!("find {} -type f | wc -l", mnt.display()),
        format!(
            "diff -r {} {} && echo identical",
            source.display(),
            mnt.display()
        ),
        format!("sha256sum {}/val/video/clip.mp4", mnt.display()),
        format!("tar -C {} -cf - . | tar -tvf - | tail -3", mnt.display()),
        format!(
            "echo hello > {}/train/caption/hello.txt   # packed and committed within 2 s",
            mnt.display()
        ),
        format!(
            "cargo run --release -- log {}   # the mount's commit is on top",
            dataset_dir.display()
        ),
    ] {
        println!("  {cmd}");
    }
    mount(
        dataset_dir.to_str().ok_or("non-UTF-8 path")?,
        &mnt,
        &MountOptions::default(),
        || {},
    )?;
    println!("unmounted");
    Ok(())
}

/// A dataset shaped like an image-captioning corpus: small images and
/// captions for training and validation, and one video larger than the
/// chunk size.
fn write_sample_tree(root: &Path) -> std::io::Result<usize> {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut noise = |len: usize| -> Vec<u8> {
        (0..len)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect()
    };
    let mut count = 0;
    for (timeline, n) in [("train", 800), ("val", 200)] {
        for i in 0..n {
            let image = root
                .join(timeline)
                .join("image")
                .join(format!("sample-{i:05}.jpg"));
            let caption = root
                .join(timeline)
                .join("caption")
                .join(format!("sample-{i:05}.txt"));
            for path in [&image, &caption] {
                std::fs::create_dir_all(path.parent().expect("has a parent"))?;
            }
            std::fs::write(&image, noise(16 * 1024 + (i * 37) % (48 * 1024)))?;
            std::fs::write(
                &caption,
                format!("sample {i} of {timeline}: a photo of thing #{}\n", i % 17),
            )?;
            count += 2;
        }
    }
    let video = root.join("val/video/clip.mp4");
    std::fs::create_dir_all(video.parent().expect("has a parent"))?;
    std::fs::write(&video, noise(10 << 20))?;
    Ok(count + 1)
}
