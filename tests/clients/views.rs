//! Loader views through the kernel: WebDataset tar shards read by the
//! `webdataset` library itself (tests/webdataset_reader.py) and by GNU
//! tar, shuffled shards, per-sample directories, and views beside a
//! read-write mount.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

use crate::common::*;

/// Items by (timeline, modality, name): their bytes.
type Items = BTreeMap<(String, String, String), Vec<u8>>;

/// The Python with `webdataset` that `.ci/run` installs.
fn python() -> PathBuf {
    required_program(
        "PACKFS_WEBDATASET_PYTHON",
        ".ci-venv-webdataset/bin/python",
        "the Python `webdataset` package reads the shards these tests mount",
    )
}

/// A source tree of two timelines: `train` with modalities `image`,
/// `caption`, `meta` and `thumb` (samples missing modalities, a 0-byte
/// item, names past ustar's 100 bytes, non-ASCII names, `thumb` with the
/// same extension as `image`), `val` with one modality. Returns the items
/// as (timeline, modality, name) → bytes.
fn source(dir: &Path) -> Items {
    let mut rng = Rng::new(14);
    let mut items = BTreeMap::new();
    let mut add = |timeline: &str, modality: &str, name: String, len: usize| {
        let bytes = rng.bytes(len);
        write_file(&dir.join(timeline).join(modality).join(&name), &bytes);
        items.insert((timeline.into(), modality.into(), name), bytes);
    };
    for i in 0..40 {
        let class = ["cat", "dog", "bird"][i % 3];
        add(
            "train",
            "image",
            format!("{class}/{i:05}.jpg"),
            500 + i * 97,
        );
        if i % 4 != 0 {
            add("train", "caption", format!("{class}/{i:05}.txt"), 10 + i);
        }
        if i % 5 == 0 {
            add("train", "meta", format!("{class}/{i:05}.json"), 0);
        }
    }
    add("train", "thumb", "cat/00003.jpg".into(), 64);
    // Past ustar's 155-byte prefix: a PAX header.
    let deep = format!("{}/{}", "d".repeat(160), "n".repeat(60));
    add("train", "image", format!("{deep}.jpg"), 700);
    add("train", "caption", format!("{deep}.txt"), 30);
    add("train", "image", "chat/été/🐈.png".into(), 1234);
    add("train", "caption", "chat/été/🐈.txt".into(), 12);
    for i in 0..9 {
        add("val", "image", format!("{i:03}.jpg"), 2000 + i);
    }
    items
}

/// Each item as its sample member: (timeline, member path) → (modality,
/// item name, bytes), with the view's rule for two modalities with one
/// extension.
fn members(items: &Items) -> BTreeMap<(String, String), (String, String, Vec<u8>)> {
    items
        .iter()
        .map(|((timeline, modality, name), bytes)| {
            let path = match modality.as_str() {
                "thumb" => name.replace(".jpg", ".thumb.jpg"),
                _ => name.clone(),
            };
            let item = (modality.clone(), name.clone(), bytes.clone());
            ((timeline.clone(), path), item)
        })
        .collect()
}

/// Where a member path's key ends (webdataset's `__key__`).
fn key(path: &str) -> &str {
    let base = path.rfind('/').map_or(0, |s| s + 1);
    let dot = path[base..].char_indices().skip(1).find(|&(_, c)| c == '.');
    dot.map_or(path, |(dot, _)| &path[..base + dot])
}

fn sha(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A dataset of [`source`] in `dir/ds`, small packs so samples span them.
fn dataset(dir: &Path) -> (PathBuf, Items) {
    let items = source(&dir.join("src"));
    let ds = dir.join("ds");
    import(&dir.join("src"), &ds, &["--pack-items", "8"]);
    (ds, items)
}

/// A dataset of [`source`] mounted with one view as the whole mount.
/// Fields drop in order: unmounted before the directory goes.
struct ViewMount {
    mnt: Mounted,
    items: Items,
    dir: tempfile::TempDir,
}

impl ViewMount {
    fn new(view: &str) -> ViewMount {
        require_fuse();
        let dir = tempfile::tempdir().unwrap();
        let (ds, items) = dataset(dir.path());
        let mnt = Mounted::new(&ds, &dir.path().join("mnt"), &["--view", view]);
        ViewMount { mnt, items, dir }
    }
}

/// The shards of a WebDataset view mounted at `mnt`, by timeline.
fn shards(mnt: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for timeline in std::fs::read_dir(mnt).unwrap() {
        let timeline = timeline.unwrap().path();
        for shard in std::fs::read_dir(&timeline).unwrap() {
            out.push(shard.unwrap().path());
        }
    }
    out.sort();
    out
}

/// Member paths of `shard`, in order, as `tar -t` lists them.
fn tar_list(shard: &Path) -> Vec<String> {
    let out = run_ok("tar", &["-tf", shard.to_str().unwrap()]);
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn the_webdataset_library_reads_every_sample_byte_for_byte() {
    let view = ViewMount::new("webdataset:samples=7");
    let (mnt, items) = (&view.mnt, &view.items);
    let shards = shards(&mnt.path);
    // train: 40 + 2 samples → 6 shards of 7; val: 9 → 2.
    assert_eq!(shards.len(), 8, "{shards:?}");
    let out = Command::new(python())
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/webdataset_reader.py"))
        .args(&shards)
        .output()
        .unwrap();
    let out = String::from_utf8(succeeded("webdataset_reader.py", out).stdout).unwrap();

    // Expected: per (timeline, key), extension → sha256.
    let mut expected: BTreeMap<(String, String), BTreeMap<String, String>> = BTreeMap::new();
    for ((timeline, path), (_, _, bytes)) in members(items) {
        let key = key(&path).to_string();
        let ext = path[key.len() + 1..].to_string();
        expected
            .entry((timeline, key))
            .or_default()
            .insert(ext, sha(&bytes));
    }
    let mut seen: BTreeMap<(String, String), BTreeMap<String, String>> = BTreeMap::new();
    let mut samples_per_shard: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in out.lines() {
        let [url, key, ext, digest] = line.split('\t').collect::<Vec<_>>()[..] else {
            panic!("{line}");
        };
        let timeline = Path::new(url)
            .parent()
            .unwrap()
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .to_string();
        samples_per_shard
            .entry(url.to_string())
            .or_default()
            .insert(key.to_string());
        let sample = seen.entry((timeline, key.to_string())).or_default();
        assert!(
            sample.insert(ext.to_string(), digest.to_string()).is_none(),
            "{key}.{ext} yielded twice"
        );
    }
    assert_eq!(seen, expected, "every sample, every member, every byte");
    let sizes: Vec<usize> = samples_per_shard.values().map(|s| s.len()).collect();
    assert_eq!(sizes, [7, 7, 7, 7, 7, 7, 7, 2], "samples=7 cuts shards");
}

#[test]
fn gnu_tar_lists_and_extracts_the_items_with_their_modes_and_times() {
    let view = ViewMount::new("webdataset:bytes=16KiB");
    let (mnt, items, dir) = (&view.mnt, &view.items, &view.dir);
    let out = dir.path().join("out");
    let mut listed = 0;
    for shard in shards(&mnt.path) {
        let timeline = shard.parent().unwrap().file_name().unwrap();
        let into = out.join(timeline);
        std::fs::create_dir_all(&into).unwrap();
        let names = tar_list(&shard);
        // Members of one sample are adjacent, and a shard is within its
        // bytes unless it is one sample.
        let keys: Vec<&str> = names.iter().map(|n| key(n)).collect();
        let mut runs = keys.clone();
        runs.dedup();
        let unique: BTreeSet<&&str> = runs.iter().collect();
        assert_eq!(
            unique.len(),
            runs.len(),
            "a sample split in {shard:?}: {keys:?}"
        );
        assert!(std::fs::metadata(&shard).unwrap().len() <= 16 << 10 || runs.len() == 1);
        listed += names.len();
        run_ok(
            "tar",
            &["-xf", shard.to_str().unwrap(), "-C", into.to_str().unwrap()],
        );
    }
    let expected = members(items);
    assert_eq!(listed, expected.len());
    // An import records no mode or mtime: an item's mtime is the
    // Manifest's (as a mount without a view shows it), not its source
    // file's, and its mode the default 0644.
    let plain = Mounted::new(&dir.path().join("ds"), &dir.path().join("plain"), &[]);
    for ((timeline, path), (modality, name, bytes)) in &expected {
        let file = out.join(timeline).join(path);
        assert_eq!(&std::fs::read(&file).unwrap(), bytes, "{file:?}");
        // tar restored the item's mode and mtime (whole seconds).
        let item = plain.path.join(timeline).join(modality).join(name);
        let (got, want) = (
            std::fs::metadata(&file).unwrap(),
            std::fs::metadata(&item).unwrap(),
        );
        assert_eq!(got.mtime(), want.mtime(), "{file:?}");
        assert_eq!(got.mode() & 0o7777, 0o644, "{file:?}");
    }
}

#[test]
fn a_seed_is_one_fixed_global_shuffle() {
    require_fuse();
    let dir = tempfile::tempdir().unwrap();
    let (ds, items) = dataset(dir.path());
    let layout = |spec: &str, at: &str| -> Vec<(String, Vec<String>)> {
        let mnt = Mounted::new(&ds, &dir.path().join(at), &["--view", spec]);
        shards(&mnt.path)
            .iter()
            .map(|s| {
                let bytes = std::fs::read(s).unwrap();
                (sha(&bytes), tar_list(s))
            })
            .collect()
    };
    let plain = layout("webdataset:samples=5", "plain");
    let one = layout("webdataset:samples=5,shuffle=1", "one");
    let two = layout("webdataset:samples=5,shuffle=2", "two");
    let one_again = layout("webdataset:samples=5,shuffle=1", "one");
    assert_eq!(
        one, one_again,
        "one seed, the same shards (bytes and order) after a remount"
    );
    assert_ne!(one, two, "another seed, another shuffle");
    assert_ne!(one, plain);
    for shuffled in [&one, &two] {
        let mut all: Vec<&String> = shuffled.iter().flat_map(|(_, names)| names).collect();
        assert_eq!(all.len(), items.len());
        all.sort();
        all.dedup();
        assert_eq!(all.len(), items.len(), "every member exactly once");
        // Samples are in no key order across the shards.
        let keys: Vec<&str> = shuffled
            .iter()
            .flat_map(|(_, n)| n)
            .map(|n| key(n))
            .collect();
        assert!(!keys.is_sorted());
    }
}

#[test]
fn the_per_sample_view_is_a_directory_per_sample() {
    let view = ViewMount::new("samples");
    let (mnt, items) = (&view.mnt, &view.items);
    let (_, files) = walk(&mnt.path);
    let shown: BTreeMap<String, Vec<u8>> = files
        .iter()
        .map(|f| {
            (
                f.display().to_string(),
                std::fs::read(mnt.path.join(f)).unwrap(),
            )
        })
        .collect();
    let expected: BTreeMap<String, Vec<u8>> = members(items)
        .into_iter()
        .map(|((timeline, path), (_, _, bytes))| {
            let base = path.rsplit('/').next().unwrap();
            (format!("{timeline}/{}/{base}", key(&path)), bytes)
        })
        .collect();
    assert_eq!(
        shown.keys().collect::<Vec<_>>(),
        expected.keys().collect::<Vec<_>>()
    );
    assert_eq!(shown, expected);
    // Read-only: nothing can be created in it.
    let e = std::fs::write(mnt.path.join("train/cat/new.txt"), b"x").unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EROFS), "{e}");
}

#[test]
fn a_view_beside_a_read_write_mount_shows_the_snapshot_it_started_from() {
    require_fuse();
    let dir = tempfile::tempdir().unwrap();
    let (ds, items) = dataset(dir.path());
    let spool = dir.path().join("spool");
    let mnt_dir = dir.path().join("mnt");
    let log =
        String::from_utf8(packfs_ok(&["log", ds.to_str().unwrap(), "-n", "1"]).stdout).unwrap();
    let first = log
        .lines()
        .next()
        .unwrap()
        .strip_prefix("manifest ")
        .unwrap()
        .to_string();
    let views = ["--view", ".shards=webdataset", "--view", ".samples=samples"];
    let mnt = Mounted::writable(&ds, &mnt_dir, &spool, &views);
    let shard = mnt.path.join(".shards/train/shard-000000.tar");
    let before = std::fs::read(&shard).unwrap();
    assert_eq!(
        tar_list(&shard).len(),
        items.keys().filter(|k| k.0 == "train").count()
    );
    // The views are found by name but not listed: `find` sees the dataset.
    let root: BTreeSet<String> = std::fs::read_dir(&mnt.path)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(root, BTreeSet::from(["train".into(), "val".into()]));

    // A write while the view is read: the view keeps the mount's snapshot.
    write_file(&mnt.path.join("train/image/cat/99999.jpg"), b"new image");
    write_file(
        &mnt.path.join("train/caption/cat/99999.txt"),
        b"new caption",
    );
    let during = std::fs::read(&shard).unwrap();
    assert_eq!(during, before);
    assert_eq!(
        std::fs::read(mnt.path.join(".samples/train/cat/00000/00000.jpg")).unwrap(),
        items[&("train".into(), "image".into(), "cat/00000.jpg".into())]
    );
    let e = std::fs::write(mnt.path.join(".shards/train/x.tar"), b"x").unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EROFS), "{e}");
    mnt.unmount();
    drop(mnt);

    // Committed at unmount: the next mount's view has the new sample.
    let mnt = Mounted::writable(&ds, &mnt_dir, &spool, &views);
    let names = tar_list(&mnt.path.join(".shards/train/shard-000000.tar"));
    assert!(names.contains(&"cat/99999.jpg".to_string()), "{names:?}");
    assert!(names.contains(&"cat/99999.txt".to_string()));
    assert_eq!(
        std::fs::read(mnt.path.join(".samples/train/cat/99999/99999.txt")).unwrap(),
        b"new caption"
    );
    drop(mnt);

    // A view of a history mount: the Manifest before the writes, by id.
    let old = Mounted::new(
        &ds,
        &dir.path().join("old"),
        &["--ref", &first, "--view", "webdataset"],
    );
    let manifest = std::fs::read_to_string(old.path.join(".packfs/manifest")).unwrap();
    assert_eq!(manifest.trim(), first);
    assert_eq!(
        std::fs::read(old.path.join("train/shard-000000.tar")).unwrap(),
        before
    );
}

#[test]
fn ls_and_cat_show_a_view_without_mounting() {
    let view = ViewMount::new("webdataset:samples=9,shuffle=5");
    let ds = view.dir.path().join("ds");
    let ds = ds.to_str().unwrap();
    let spec = ["--view", "webdataset:samples=9,shuffle=5"];
    let listed = packfs_ok(&[&["ls", ds, "train", "-l"][..], &spec].concat()).stdout;
    let mounted: Vec<String> = shards(&view.mnt.path)
        .iter()
        .filter(|s| s.parent().unwrap().ends_with("train"))
        .map(|s| {
            let size = std::fs::metadata(s).unwrap().len();
            format!("{size:>14}  {}", s.file_name().unwrap().to_str().unwrap())
        })
        .collect();
    assert_eq!(
        String::from_utf8(listed)
            .unwrap()
            .lines()
            .collect::<Vec<_>>(),
        mounted
    );
    let shard = "train/shard-000002.tar";
    let cat = packfs_ok(&[&["cat", ds, shard][..], &spec].concat()).stdout;
    assert_eq!(cat, std::fs::read(view.mnt.path.join(shard)).unwrap());
    let sample = packfs_ok(&[
        "cat",
        ds,
        "train/cat/00003/00003.thumb.jpg",
        "--view",
        "samples",
    ])
    .stdout;
    assert_eq!(
        sample,
        view.items[&("train".into(), "thumb".into(), "cat/00003.jpg".into())]
    );
}

#[test]
fn bad_views_are_refused_with_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let (ds, _) = dataset(dir.path());
    let mnt = dir.path().join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    let ds = ds.to_str().unwrap();
    let mount = |view: &str| {
        packfs(&[
            "mount",
            ds,
            mnt.to_str().unwrap(),
            "--foreground",
            "--view",
            view,
        ])
    };
    failed_with(&mount("tar"), &["--view", "unknown view \"tar\""]);
    failed_with(
        &mount("webdataset:samples=0"),
        &["samples=0 is not a positive number"],
    );
    failed_with(&mount("webdataset:seed=1"), &["unknown option \"seed\""]);
    failed_with(&mount(".=samples"), &["\".\" cannot name a view"]);
    failed_with(&mount(".packfs=samples"), &["cannot name a view"]);
    let out = packfs(&[
        "mount",
        ds,
        mnt.to_str().unwrap(),
        "--foreground",
        "--view",
        "samples",
        "--view",
        "webdataset",
    ]);
    failed_with(&out, &["only one view can be the whole mount"]);
    assert!(!is_mounted(&mnt));
}
