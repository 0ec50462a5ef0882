//! Views over a paged dataset: planned from pages when first looked into
//! (not at mount), under the mount's index bound, each item shown once.

use std::collections::BTreeMap;
use std::io::Read;
use std::sync::atomic::Ordering;

use futures::TryStreamExt;
use object_store::{ObjectStore, ObjectStoreExt};

use packfs_fs::mount::MountOptions;

use crate::common::bench::Bench;
use crate::common::core::Core;

/// Samples `s0000..s0149` of timeline `t` in three directories (the top
/// one, `a` and `a/b`): an image and a caption each, every tenth a second
/// image (`.seg.png`); and 20 images of timeline `u`.
fn sample_files() -> Vec<(String, Vec<u8>)> {
    let mut files = Vec::new();
    for i in 0..150 {
        let dir = ["", "a/", "a/b/"][i % 3];
        files.push((format!("t/image/{dir}s{i:04}.jpg"), vec![i as u8; 100 + i]));
        let caption = format!("caption {i}").into();
        files.push((format!("t/caption/{dir}s{i:04}.txt"), caption));
        if i % 10 == 0 {
            files.push((format!("t/image/{dir}s{i:04}.seg.png"), vec![7; i]));
        }
    }
    // Sample `a`, whose directory is also that of keys `a/…`.
    files.push(("t/image/a.jpg".to_string(), vec![5; 77]));
    for i in 0..20 {
        files.push((format!("u/image/x{i:02}.jpg"), vec![1; i]));
    }
    files
}

/// Every file below directory `ino` of the mount, by path below it, with
/// its bytes.
fn walk(core: &Core, ino: u64, path: &str, out: &mut BTreeMap<String, Vec<u8>>) {
    for (name, stat) in core.list(ino).unwrap() {
        let child = format!("{path}/{name}");
        match stat.attr.kind {
            packfs_core::kind::Kind::Dir => walk(core, stat.attr.ino, &child, out),
            packfs_core::kind::Kind::File => {
                out.insert(child, core.read_all(stat.attr.ino));
            }
        }
    }
}

/// Every member of every shard below `dir` of the mount: (shard, member
/// path, bytes), in shard order.
fn members(core: &Core, dir: &str) -> Vec<(String, String, Vec<u8>)> {
    let ino = core.path(dir).unwrap();
    let mut out = Vec::new();
    for (shard, stat) in core.list(ino).unwrap() {
        let bytes = core.read_all(stat.attr.ino);
        assert_eq!(bytes.len() as u64, stat.attr.size, "{dir}/{shard}");
        let mut archive = tar::Archive::new(&bytes[..]);
        for entry in archive.entries().unwrap() {
            let mut entry = entry.unwrap();
            let path = entry.path().unwrap().to_str().unwrap().to_string();
            let mut data = Vec::new();
            entry.read_to_end(&mut data).unwrap();
            out.push((shard.clone(), path, data));
        }
    }
    out
}

#[test]
fn views_of_small_pages_show_every_item_once() {
    let files = sample_files();
    let refs: Vec<(&str, Vec<u8>)> = files.iter().map(|(p, b)| (p.as_str(), b.clone())).collect();
    let bench = Bench::new(&refs);
    let gets = || bench.faults.metadata_gets.load(Ordering::SeqCst);
    let bound = 16 << 10;
    let options = MountOptions::default()
        .read_only(true)
        .index_cache_bytes(bound)
        .views(vec![
            ".wds=webdataset:samples=7".parse().unwrap(),
            ".shuffled=webdataset:samples=5,shuffle=3".parse().unwrap(),
            ".samples=samples".parse().unwrap(),
        ]);
    let mount = |options: &MountOptions| {
        let before = gets();
        let core = bench.mount_options(options);
        (core, gets() - before)
    };
    let (plain, plain_gets) = mount(&options.clone().views(Vec::new()));
    let (core, view_gets) = mount(&options);
    assert_eq!(view_gets, plain_gets, "a view reads nothing at mount");
    drop(plain);

    // In sample order: by directory (the top one first), then key, then
    // extension: s0000.jpg, s0000.seg.png, s0000.txt, s0003.jpg, …
    let mut expected: BTreeMap<&str, Vec<(String, &[u8])>> = BTreeMap::new();
    let mut sorted: Vec<&(String, Vec<u8>)> = files.iter().collect();
    sorted.sort_by_key(|(p, _)| {
        let (timeline, rest) = p.split_once('/').unwrap();
        let name = rest.split_once('/').unwrap().1;
        let (dir, base) = name.rsplit_once('/').unwrap_or(("", name));
        let dot = base.find('.').unwrap();
        (
            timeline,
            dir,
            base[..dot].to_string(),
            base[dot..].to_string(),
        )
    });
    for (path, bytes) in sorted {
        let (timeline, rest) = path.split_once('/').unwrap();
        let name = rest.split_once('/').unwrap().1;
        expected
            .entry(timeline)
            .or_default()
            .push((name.to_string(), bytes));
    }
    assert_eq!(expected.len(), 2);
    for (timeline, want) in &expected {
        let got = members(&core, &format!(".wds/{timeline}"));
        let names: Vec<&str> = got.iter().map(|(_, p, _)| p.as_str()).collect();
        let want_names: Vec<&str> = want.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(names, want_names, "{timeline} in sample order");
        for ((_, path, bytes), (_, want)) in got.iter().zip(want) {
            assert!(bytes == want, "{timeline}/{path}: other bytes");
        }
        let want: Vec<(&str, &[u8])> = want.iter().map(|(p, b)| (p.as_str(), *b)).collect();
        let shards: std::collections::BTreeSet<&String> = got.iter().map(|m| &m.0).collect();
        let keys: std::collections::BTreeSet<&str> = want
            .iter()
            .map(|(p, _)| &p[..p.find('.').unwrap()])
            .collect();
        assert_eq!(shards.len(), keys.len().div_ceil(7), "{timeline}");

        let shuffled = members(&core, &format!(".shuffled/{timeline}"));
        let mut order: Vec<(&str, &[u8])> = shuffled
            .iter()
            .map(|(_, p, b)| (p.as_str(), &b[..]))
            .collect();
        assert!(order != want, "{timeline} shuffled");
        order.sort();
        let mut sorted_want = want.clone();
        sorted_want.sort();
        assert!(order == sorted_want, "{timeline}: every item once");
    }
    let held = core.fs().namespace().tree().index_bytes();
    assert!(
        held as u64 <= bound,
        "{held} bytes of pages held, bound {bound}"
    );

    // The per-sample view: each item at /<timeline>/<key>/<base name>.
    let mut shown = BTreeMap::new();
    walk(&core, core.path(".samples").unwrap(), "", &mut shown);
    let mut want = BTreeMap::new();
    for (path, bytes) in &files {
        let (timeline, rest) = path.split_once('/').unwrap();
        let name = rest.split_once('/').unwrap().1;
        let (dir, base) = name.rsplit_once('/').map_or(("", name), |(d, b)| (d, b));
        let key = &base[..base.find('.').unwrap()];
        let dir = if dir.is_empty() {
            String::new()
        } else {
            format!("/{dir}")
        };
        want.insert(format!("/{timeline}{dir}/{key}/{base}"), bytes.clone());
    }
    assert_eq!(shown.len(), want.len());
    for (path, bytes) in &want {
        assert!(
            shown.get(path) == Some(bytes),
            "{path} not shown, or other bytes"
        );
    }
    let held = core.fs().namespace().tree().index_bytes();
    assert!(
        held as u64 <= bound,
        "{held} bytes of pages held, bound {bound}"
    );

    // The same seed, the same shards, on another mount.
    let again = bench.mount_options(&options);
    assert_eq!(
        members(&again, ".shuffled/t"),
        members(&core, ".shuffled/t")
    );
}

/// A damaged name page of timeline `u` fails that timeline's views (a
/// lookup in them answers an error naming the page; their listings are
/// empty) and nothing else: `t`'s shards and sample directories still
/// read right.
#[test]
fn a_damaged_page_fails_the_views_of_its_timeline_only() {
    let files = sample_files();
    let refs: Vec<(&str, Vec<u8>)> = files.iter().map(|(p, b)| (p.as_str(), b.clone())).collect();
    let bench = Bench::new(&refs);
    // Every page holding a name of `u` (`x05.jpg` …), one byte flipped.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let damaged = runtime.block_on(async {
        let pages = object_store::path::Path::from("_packfs/pages");
        let listed: Vec<_> = bench.memory.list(Some(&pages)).try_collect().await.unwrap();
        let mut damaged = 0;
        for meta in listed {
            let bytes = bench
                .memory
                .get(&meta.location)
                .await
                .unwrap()
                .bytes()
                .await;
            let mut bytes = bytes.unwrap().to_vec();
            if bytes.windows(7).any(|w| w == b"x05.jpg") {
                let last = bytes.len() - 1;
                bytes[last] ^= 0x55;
                bench
                    .memory
                    .put(&meta.location, bytes.into())
                    .await
                    .unwrap();
                damaged += 1;
            }
        }
        damaged
    });
    assert!(damaged > 0, "no page of timeline u found");
    let options = MountOptions::default().read_only(true).views(vec![
        ".wds=webdataset:samples=7".parse().unwrap(),
        ".samples=samples".parse().unwrap(),
    ]);
    let core = bench.mount_options(&options);
    for view in [".wds", ".samples"] {
        let u = core.path(&format!("{view}/u")).unwrap();
        let e = core.fs().lookup(u, b"shard-000000.tar").unwrap_err();
        assert!(e.to_string().contains("_packfs/pages/"), "{view}: {e}");
        assert!(core.list(u).unwrap().is_empty(), "{view}");
    }
    let shards = members(&core, ".wds/t");
    assert_eq!(
        shards.len(),
        files.iter().filter(|(p, _)| p.starts_with("t/")).count()
    );
    let mut shown = BTreeMap::new();
    walk(&core, core.path(".samples/t").unwrap(), "", &mut shown);
    assert_eq!(shown.len(), shards.len());
}
