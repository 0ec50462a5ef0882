//! The WebDataset view: `/<timeline>/shard-%06d.tar`, tar shards of the
//! timeline's samples synthesized from the packs.
//!
//! A shard is a [`ByteRangeMap`] over three kinds of bytes: each member's
//! tar header (built in memory from its path, size, mode and mtime), the
//! item's bytes where they are stored, and explicit PAD (to the 512-byte
//! block after each member, and the two zero blocks that end the archive).
//! The whole layout (which sample is in which shard, at which offset) is
//! computed when the view is built, so `stat` sizes are exact before any
//! byte is read and a read of any range maps straight to its sources.
//!
//! Samples go to shards in key order, or with `shuffle=SEED` in a seeded
//! global permutation: a new seed is a new shuffle of the whole timeline,
//! with nothing rewritten on the store.

use std::borrow::Cow;
use std::ops::Range;
use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;
use packfs_format::engine::{ByteRangeMap, SourceIndex};
use packfs_format::{tar, time_of_ns, Attrs};

use super::{catalog_error, samples, SampleMember, ShardCut, ShardOptions, TimelineSamples};
use crate::catalog::{Catalog, CatalogError, Entry};
use crate::extents::{Extents, Source};
use crate::kind::Kind;
use crate::tree::{Tree, TreeError};

/// One member placed in a shard.
#[derive(Debug)]
struct Placed {
    /// Offset of its header in the shard.
    offset: u64,
    /// Index into the timeline's members.
    member: u32,
}

#[derive(Debug)]
struct Shard {
    /// Its members, a range of [`Timeline::placed`].
    placed: Range<usize>,
    size: u64,
}

#[derive(Debug)]
struct Timeline {
    samples: TimelineSamples,
    /// Members in shard order, every shard's consecutive.
    placed: Vec<Placed>,
    shards: Vec<Shard>,
    /// Catalog id of its first shard.
    first_id: u64,
}

/// The shards of every timeline of a snapshot. Ids: 0 the root, `1 + t`
/// timeline `t`, then every shard of every timeline in order.
pub(crate) struct ShardCatalog {
    tree: Arc<Tree>,
    timelines: Vec<Timeline>,
    mtime: SystemTime,
}

/// `shard-000042.tar`: six digits, more past a million shards.
fn shard_name(index: usize) -> String {
    format!("shard-{index:06}.tar")
}

impl ShardCatalog {
    /// The shards of `tree`'s items cut and ordered as `options` says.
    pub(crate) fn new(tree: Arc<Tree>, options: ShardOptions) -> Result<Self, TreeError> {
        let mtime = time_of_ns(tree.ts_unix_ns() as i64);
        let mut timelines = Vec::new();
        let all = samples(&tree)?;
        let mut next_id = 1 + all.len() as u64;
        for samples in all {
            let mut timeline = layout(&tree, samples, options)?;
            timeline.first_id = next_id;
            next_id += timeline.shards.len() as u64;
            timelines.push(timeline);
        }
        Ok(ShardCatalog {
            tree,
            timelines,
            mtime,
        })
    }

    /// The timeline and shard index of catalog id `id`, if it is a shard.
    fn shard(&self, id: u64) -> Option<(&Timeline, usize)> {
        let t = self.timelines.partition_point(|t| t.first_id <= id);
        let timeline = self.timelines.get(t.checked_sub(1)?)?;
        let index = usize::try_from(id - timeline.first_id).ok()?;
        (index < timeline.shards.len()).then_some((timeline, index))
    }

    fn dir(&self) -> Entry {
        Entry {
            kind: Kind::Dir,
            size: 0,
            perm: 0o555,
            mtime: self.mtime,
            volatile: false,
        }
    }
}

/// Places `samples`' members into shards.
fn layout(
    tree: &Tree,
    samples: TimelineSamples,
    options: ShardOptions,
) -> Result<Timeline, TreeError> {
    let mut order: Vec<u32> = (0..samples.samples.len() as u32).collect();
    if let Some(seed) = options.shuffle {
        shuffle(&mut order, seed);
    }
    let mut placed = Vec::with_capacity(samples.members.len());
    let mut shards = Vec::new();
    let (mut start, mut offset, mut in_shard) = (0usize, 0u64, 0u64);
    for sample in order {
        let members = samples.samples[sample as usize].1.clone();
        let mut bytes = 0;
        for m in members.clone() {
            bytes += member_len(tree, &samples.members[m as usize])?;
        }
        let full = match options.cut {
            ShardCut::Samples(n) => in_shard >= n,
            ShardCut::Bytes(max) => in_shard > 0 && offset + bytes + tar::END_OF_ARCHIVE > max,
        };
        if full {
            shards.push(Shard {
                placed: start..placed.len(),
                size: offset + tar::END_OF_ARCHIVE,
            });
            (start, offset, in_shard) = (placed.len(), 0, 0);
        }
        for member in members {
            placed.push(Placed { offset, member });
            offset += member_len(tree, &samples.members[member as usize])?;
        }
        in_shard += 1;
    }
    if in_shard > 0 {
        shards.push(Shard {
            placed: start..placed.len(),
            size: offset + tar::END_OF_ARCHIVE,
        });
    }
    Ok(Timeline {
        samples,
        placed,
        shards,
        first_id: 0,
    })
}

/// The tar member of `member`: its path, the item's size, recorded mode
/// (0644 if none) and mtime (the Manifest's if none), in whole seconds.
fn tar_member<'a>(tree: &Tree, member: &'a SampleMember) -> Result<tar::Member<'a>, TreeError> {
    let item = tree.item(member.item)?;
    let mtime_ns = item.attrs().mtime_ns.unwrap_or(tree.ts_unix_ns() as i64);
    Ok(tar::Member {
        path: &member.path,
        size: item.size(),
        mode: item.attrs().mode.unwrap_or(Attrs::DEFAULT_FILE_MODE),
        mtime: mtime_ns.div_euclid(1_000_000_000),
    })
}

/// Bytes of `member` in a shard: header, data, padding.
fn member_len(tree: &Tree, member: &SampleMember) -> Result<u64, TreeError> {
    let m = tar_member(tree, member)?;
    Ok(tar::header_len(&m) + m.size + tar::padding(m.size))
}

/// Shuffles `order` by Fisher–Yates with SplitMix64 seeded by `seed`. Both
/// are written out here, not taken from a crate, because the permutation
/// is part of what a seed promises: a later version of a random-number
/// crate may change its streams, and a seed must give the same shards in
/// every packfs version.
fn shuffle(order: &mut [u32], seed: u64) {
    let mut state = seed;
    let mut next = move || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    for i in (1..order.len()).rev() {
        // Lemire's multiply-shift; its bias (< 2^-32 for any slice that
        // fits in memory) is far below what a shuffle can show.
        let j = ((u128::from(next()) * (i as u128 + 1)) >> 64) as usize;
        order.swap(i, j);
    }
}

impl Catalog for ShardCatalog {
    fn entry(&self, id: u64) -> Result<Option<Entry>, CatalogError> {
        if id as usize <= self.timelines.len() {
            return Ok(Some(self.dir()));
        }
        Ok(self.shard(id).map(|(timeline, index)| Entry {
            kind: Kind::File,
            size: timeline.shards[index].size,
            perm: 0o444,
            ..self.dir()
        }))
    }

    fn lookup(&self, dir: u64, name: &[u8]) -> Result<Option<u64>, CatalogError> {
        let Ok(name) = std::str::from_utf8(name) else {
            return Ok(None);
        };
        if dir == 0 {
            let found = self
                .timelines
                .binary_search_by(|t| t.samples.timeline.as_str().cmp(name));
            return Ok(found.ok().map(|t| 1 + t as u64));
        }
        let Some(timeline) = self.timelines.get(dir as usize - 1) else {
            return Ok(None);
        };
        let index = name
            .strip_prefix("shard-")
            .and_then(|n| n.strip_suffix(".tar"))
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|&i| i < timeline.shards.len() && shard_name(i) == name);
        Ok(index.map(|i| timeline.first_id + i as u64))
    }

    fn child(&self, dir: u64, index: usize) -> Option<(u64, Cow<'_, str>)> {
        if dir == 0 {
            let timeline = self.timelines.get(index)?;
            return Some((1 + index as u64, Cow::Borrowed(&timeline.samples.timeline)));
        }
        let timeline = self
            .timelines
            .get(usize::try_from(dir).ok()?.checked_sub(1)?)?;
        (index < timeline.shards.len()).then(|| {
            (
                timeline.first_id + index as u64,
                Cow::Owned(shard_name(index)),
            )
        })
    }

    fn parent(&self, dir: u64) -> Option<u64> {
        (dir != 0).then_some(0)
    }

    fn extents(&self, id: u64, range: Range<u64>) -> Result<Option<Extents>, CatalogError> {
        let Some((timeline, index)) = self.shard(id) else {
            return Ok(None);
        };
        let shard = &timeline.shards[index];
        let range = range.start.min(shard.size)..range.end.min(shard.size);
        let mut extents = Extents {
            map: ByteRangeMap::new(range.end - range.start),
            sources: Vec::new(),
        };
        // The part of `part` (shard offsets) inside the read, relative to
        // the part's start and to the read's start.
        let clip = |part: Range<u64>| {
            let (from, to) = (part.start.max(range.start), part.end.min(range.end));
            (from < to).then(|| (from - part.start..to - part.start, from - range.start))
        };
        let placed = &timeline.placed[shard.placed.clone()];
        let first = placed.partition_point(|p| p.offset <= range.start);
        for p in &placed[first.saturating_sub(1)..] {
            if p.offset >= range.end {
                break;
            }
            let member = &timeline.samples.members[p.member as usize];
            let tar_member = tar_member(&self.tree, member).map_err(catalog_error)?;
            let header_len = tar::header_len(&tar_member);
            let data = p.offset + header_len;
            let pad = data + tar_member.size;
            if let Some((within, dest)) = clip(p.offset..data) {
                let header = Bytes::from(tar::header(&tar_member));
                let source = SourceIndex(extents.sources.len());
                extents.sources.push(Source::Memory(header));
                extents
                    .map
                    .push_data(dest, within.end - within.start, source, within.start);
            }
            if let Some((within, dest)) = clip(data..pad) {
                let item = self.tree.item_data(member.item).map_err(catalog_error)?;
                extents.splice(dest, Extents::of_item(&item, within));
            }
            if let Some((within, dest)) = clip(pad..pad + tar::padding(tar_member.size)) {
                extents.map.push_pad(dest, within.end - within.start);
            }
        }
        if let Some((within, dest)) = clip(shard.size - tar::END_OF_ARCHIVE..shard.size) {
            extents.map.push_pad(dest, within.end - within.start);
        }
        Ok(Some(extents))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::io::Read;

    use super::*;
    use crate::catalog::view::tests::{files, items, read, tree_and_reader};
    use crate::catalog::view::{key_len, ViewSpec};

    /// (shard path, member path, bytes, mode, mtime) of every member of
    /// every shard of `spec`, as the `tar` crate reads the whole shards;
    /// every shard is also read in ragged pieces, which must agree.
    async fn members(spec: &str) -> Vec<(String, String, Vec<u8>, u32, u64)> {
        let ViewSpec::WebDataset(options) = spec.parse().unwrap() else {
            panic!("{spec}")
        };
        let (tree, reader) = tree_and_reader().await;
        let catalog = ShardCatalog::new(tree, options).unwrap();
        let mut out = Vec::new();
        for (shard, id) in files(&catalog, 0, "") {
            let size = catalog.entry(id).unwrap().unwrap().size;
            assert_eq!(size % tar::BLOCK, 0);
            let whole = read(&catalog, &reader, id, 0..size + 100).await;
            assert_eq!(whole.len() as u64, size, "{shard}");
            assert!(whole[whole.len() - 1024..].iter().all(|&b| b == 0));
            let mut pieces = Vec::new();
            let mut at = 0;
            for step in [1u64, 511, 2, 700, 4096, 33].iter().cycle() {
                if at >= size {
                    break;
                }
                pieces.extend(read(&catalog, &reader, id, at..at + step).await);
                at += step;
            }
            assert_eq!(pieces, whole, "{shard} read in pieces");
            let mut archive = ::tar::Archive::new(&whole[..]);
            for entry in archive.entries().unwrap() {
                let mut entry = entry.unwrap();
                let path = entry.path().unwrap().to_str().unwrap().to_string();
                let (mode, mtime) = (
                    entry.header().mode().unwrap(),
                    entry.header().mtime().unwrap(),
                );
                let mut bytes = Vec::new();
                entry.read_to_end(&mut bytes).unwrap();
                out.push((shard.clone(), path, bytes, mode, mtime));
            }
        }
        out
    }

    /// Every item is a member exactly once, with its bytes, mode and mtime
    /// (in seconds); members of a sample are adjacent and in one shard.
    fn check_complete(members: &[(String, String, Vec<u8>, u32, u64)]) {
        let mut expected: HashMap<(String, String), Vec<u8>> = HashMap::new();
        for (t, m, name, bytes) in items() {
            let path = if m == "thumb" {
                name.replace(".jpg", ".thumb.jpg")
            } else {
                name
            };
            expected.insert((t.to_string(), path), bytes);
        }
        assert_eq!(members.len(), expected.len());
        let mut seen_keys: Vec<(String, String)> = Vec::new();
        for (shard, path, bytes, mode, mtime) in members {
            let timeline = shard.split('/').nth(1).unwrap().to_string();
            let want = expected.remove(&(timeline.clone(), path.clone()));
            assert_eq!(want.as_ref(), Some(bytes), "{shard} {path}");
            assert_eq!((*mode, *mtime), (0o640, 1_700_000_000));
            let key = (shard.clone(), path[..key_len(path)].to_string());
            if seen_keys.last() != Some(&key) {
                assert!(
                    !seen_keys
                        .iter()
                        .any(|(_, k)| *k == key.1 && key.0.starts_with(&format!("/{timeline}/"))),
                    "sample {key:?} split"
                );
                seen_keys.push(key);
            }
        }
    }

    #[tokio::test]
    async fn shards_hold_every_item_once_whatever_the_cut() {
        for spec in [
            "webdataset",
            "webdataset:samples=1",
            "webdataset:samples=3",
            "webdataset:bytes=4KiB",
            "webdataset:bytes=1",
            "webdataset:samples=2,shuffle=1",
        ] {
            let members = members(spec).await;
            check_complete(&members);
            let shards: std::collections::BTreeSet<_> = members.iter().map(|m| &m.0).collect();
            let expected = match spec {
                "webdataset" => 2,
                "webdataset:samples=1" | "webdataset:bytes=1" => 11,
                "webdataset:samples=3" => 5,
                "webdataset:samples=2,shuffle=1" => 6,
                _ => shards.len(),
            };
            assert_eq!(shards.len(), expected, "{spec}");
        }
    }

    /// Read front to back as a mount reads a catalog file (following it
    /// with the reader), a shuffled shard is fetched ahead along its map:
    /// its members' blocks arrive as prefetch, and the demand reads find
    /// them.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_shuffled_shard_is_read_ahead_along_its_map() {
        use std::sync::atomic::Ordering::Relaxed;

        use crate::cache::CacheOptions;
        use crate::reader::Reader;

        let (tree, store) = crate::catalog::view::tests::tree_and_store().await;
        let options = CacheOptions {
            block_size: 512,
            max_window: 16 << 10,
            max_request: 4 << 10,
            ..CacheOptions::default()
        };
        let reader = Reader::new(store, options, None);
        let shuffled = ShardOptions {
            shuffle: Some(3),
            ..ShardOptions::default()
        };
        let catalog = ShardCatalog::new(tree, shuffled).unwrap();
        let train = catalog.lookup(0, b"train").unwrap().unwrap();
        let shard = catalog.lookup(train, b"shard-000000.tar").unwrap().unwrap();
        let size = catalog.entry(shard).unwrap().unwrap().size;
        let (mut bytes, mut buf) = (Vec::new(), Vec::new());
        while (bytes.len() as u64) < size {
            let offset = bytes.len() as u64;
            let range = offset..(offset + 1024).min(size);
            reader.follow(shard, range.clone(), size, |ahead| {
                catalog.extents(shard, ahead).ok().flatten()
            });
            let extents = catalog.extents(shard, range).unwrap().unwrap();
            let chunk = reader.read_into(extents, &mut buf).await.unwrap();
            bytes.extend_from_slice(&chunk.to_bytes());
            // Let the prefetch tasks run, as a reader's pace would.
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
        let stats = reader.stats();
        let (prefetched, hits) = (
            stats.prefetch_gets.load(Relaxed),
            stats.prefetch_hits.load(Relaxed),
        );
        let misses = stats.cache_misses.load(Relaxed);
        assert!(prefetched > 0, "no prefetch GETs");
        assert!(hits > misses, "prefetch hits {hits} vs misses {misses}");
    }

    #[tokio::test]
    async fn shuffled_shards_are_fixed_by_their_seed() {
        let order = |m: Vec<(String, String, Vec<u8>, u32, u64)>| -> Vec<(String, String)> {
            m.into_iter().map(|(s, p, ..)| (s, p)).collect()
        };
        let plain = order(members("webdataset:samples=2").await);
        let one = order(members("webdataset:samples=2,shuffle=1").await);
        let again = order(members("webdataset:samples=2,shuffle=1").await);
        let two = order(members("webdataset:samples=2,shuffle=2").await);
        assert_eq!(one, again);
        assert_ne!(one, two);
        assert_ne!(one, plain);
        let train: Vec<&String> = plain
            .iter()
            .filter(|(s, _)| s.starts_with("/train/"))
            .map(|(_, p)| p)
            .collect();
        assert!(
            train.is_sorted(),
            "unshuffled shards are in key order: {train:?}"
        );
    }

    #[test]
    fn a_seed_is_a_fixed_permutation() {
        let mut a: Vec<u32> = (0..1000).collect();
        let mut b = a.clone();
        shuffle(&mut a, 7);
        shuffle(&mut b, 7);
        assert_eq!(a, b);
        let mut c: Vec<u32> = (0..1000).collect();
        shuffle(&mut c, 8);
        assert_ne!(a, c);
        let mut sorted = a.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..1000).collect::<Vec<_>>());
        // Pinned (computed by an independent implementation of SplitMix64,
        // which gives the reference's 0x599ed017fb08fc85 first for seed
        // 1234567): a seed gives these shards in every version.
        let mut pinned: Vec<u32> = (0..10).collect();
        shuffle(&mut pinned, 42);
        assert_eq!(pinned, [8, 3, 6, 5, 4, 0, 9, 2, 1, 7]);
    }
}
