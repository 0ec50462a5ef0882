//! The WebDataset view: `/<timeline>/shard-%06d.tar`, tar shards of the
//! timeline's samples synthesized from the packs.
//!
//! A shard is a [`ByteRangeMap`] over three kinds of bytes: each member's
//! tar header (built in memory from its path, size, mode and mtime), the
//! item's bytes where they are stored, and explicit PAD (to the 512-byte
//! block after each member, and the two zero blocks that end the archive).
//!
//! Nothing is read at mount. The first listing of a timeline plans it:
//! one pass over its samples, page by page, gives every shard's first
//! sample and exact size (so `stat` sizes are exact before any byte is
//! read), and keeps a cursor every few samples, not the samples. The
//! first read of a shard lays it out: its samples found again from the
//! cursors, each member's offset and what reading it needs, kept for the
//! shards read lately.
//!
//! Samples go to shards in sample order, or with `shuffle=SEED` in a seeded
//! global permutation (`shuffle.rs`): a new seed is a new shuffle of the
//! whole timeline, with nothing rewritten on the store.

use std::borrow::Cow;
use std::ops::Range;
use std::sync::{Arc, OnceLock};
use std::time::{Instant, SystemTime};

use bytes::Bytes;
use packfs_format::engine::{ByteRangeMap, SourceIndex};
use packfs_format::{tar, time_of_ns, Attrs};
use parking_lot::Mutex;

use super::samples::{Sample, SampleMember, Samples, Timeline};
use super::shuffle::{fisher_yates, Keyed, DRAWN_MAX};
use super::{catalog_error, ShardCut, ShardOptions};
use crate::catalog::{Catalog, CatalogError, Entry};
use crate::dataset::ItemData;
use crate::extents::{Extents, Source};
use crate::kind::Kind;
use crate::tree::{Tree, TreeError};

/// Members of the shard layouts kept built (~100 bytes each and their
/// paths): a loader reads a few shards at once, each front to back, and a
/// shard of tiny items in key order may hold a million members.
const LAYOUT_MEMBERS: usize = 1 << 20;

/// One member placed in a shard, with all that reading it needs: a read
/// of a shuffled shard then reads no index page (its members' pages are
/// all over the index).
#[derive(Debug)]
struct Placed {
    /// Offset of its header in the shard.
    offset: u64,
    path: Box<str>,
    mode: u16,
    mtime: i64,
    data: ItemData,
}

impl Placed {
    fn tar_member(&self) -> tar::Member<'_> {
        tar::Member {
            path: &self.path,
            size: self.data.size,
            mode: self.mode,
            mtime: self.mtime,
        }
    }
}

/// Where a shard's members are: built when the shard is first read.
#[derive(Debug)]
struct Layout {
    placed: Vec<Placed>,
    size: u64,
}

/// The shard layouts built, least recently used first out once they hold
/// more than [`LAYOUT_MEMBERS`].
struct Layouts {
    cells: lru::LruCache<(usize, usize), Arc<LayoutCell>>,
    members: usize,
}

/// A shard's layout, built by the first read that needs it.
type LayoutCell = OnceLock<Result<Arc<Layout>, String>>;

/// The order samples go to shards in.
enum Order {
    Key,
    /// Fisher–Yates: the sample at each position.
    Drawn(Vec<u32>),
    Keyed(Keyed),
}

/// Which samples each shard of a timeline holds, and its size: what
/// `ls -l` shows, without any shard's members.
struct Plan {
    samples: Samples,
    order: Order,
    /// Where each shard starts in `order`, then where the last one ends.
    starts: Vec<u64>,
    sizes: Vec<u64>,
}

/// The shards of every timeline of a snapshot. Ids: 0 the root, `1 + t`
/// timeline `t`, and shard `k` of timeline `t` is `1 + T + k·T + t` (of
/// `T` timelines), so that ids need no plan.
pub(crate) struct ShardCatalog {
    tree: Arc<Tree>,
    options: ShardOptions,
    /// Timelines of more samples than this are shuffled by [`Keyed`].
    drawn_max: u64,
    timelines: Vec<Timeline<Plan>>,
    layouts: Mutex<Layouts>,
    mtime: SystemTime,
}

/// `shard-000042.tar`: six digits, more past a million shards.
fn shard_name(index: usize) -> String {
    format!("shard-{index:06}.tar")
}

impl ShardCatalog {
    /// The shards of `tree`'s items cut and ordered as `options` says.
    /// Nothing is read until a timeline is listed: then its items' names
    /// and sizes once, page by page.
    pub(crate) fn new(tree: Arc<Tree>, options: ShardOptions) -> Self {
        ShardCatalog {
            mtime: time_of_ns(tree.ts_unix_ns() as i64),
            timelines: Timeline::all(&tree),
            tree,
            options,
            drawn_max: DRAWN_MAX,
            layouts: Mutex::new(Layouts {
                cells: lru::LruCache::unbounded(),
                members: 0,
            }),
        }
    }

    /// The catalog shuffling timelines of more than `drawn_max` samples by
    /// [`Keyed`]: tests see both shuffles on a few samples.
    #[cfg(test)]
    fn with_drawn_max(mut self, drawn_max: u64) -> Self {
        self.drawn_max = drawn_max;
        self
    }

    /// The plan of timeline `t`, made now if it is the first ask.
    fn plan(&self, t: usize) -> Result<&Plan, CatalogError> {
        self.timelines[t].plan(|name| {
            let started = Instant::now();
            let plan = plan(&self.tree, name, self.options, self.drawn_max)?;
            tracing::info!(
                "view timeline {name}: {} samples in {} shards, planned in {:.2?}",
                plan.samples.len(),
                plan.sizes.len(),
                started.elapsed()
            );
            Ok(plan)
        })
    }

    /// The timeline and shard index of catalog id `id`, if it is a shard.
    fn shard(&self, id: u64) -> Result<Option<(usize, usize)>, CatalogError> {
        let count = self.timelines.len() as u64;
        let Some(n) = id.checked_sub(1 + count) else {
            return Ok(None);
        };
        let (t, k) = ((n % count) as usize, (n / count) as usize);
        Ok((k < self.plan(t)?.sizes.len()).then_some((t, k)))
    }

    fn shard_id(&self, t: usize, k: usize) -> u64 {
        let count = self.timelines.len() as u64;
        1 + count + k as u64 * count + t as u64
    }

    /// Where shard `k` of timeline `t` has its members. Built once however
    /// many reads ask at once: the kernel's read-ahead sends several.
    fn layout(&self, t: usize, k: usize) -> Result<Arc<Layout>, CatalogError> {
        let cell = self
            .layouts
            .lock()
            .cells
            .get_or_insert((t, k), || Arc::new(OnceLock::new()))
            .clone();
        let mut built = false;
        let layout = cell
            .get_or_init(|| {
                built = true;
                self.build_layout(t, k).map(Arc::new).map_err(|e| e.0)
            })
            .clone()
            .map_err(CatalogError)?;
        if built {
            self.keep((t, k), &cell, layout.placed.len());
        }
        Ok(layout)
    }

    /// Counts a layout of `members` just built into `cell`, shard `shard`'s
    /// (unless it was dropped meanwhile), and drops the least recently used
    /// others while the layouts hold too many.
    fn keep(&self, shard: (usize, usize), cell: &Arc<LayoutCell>, members: usize) {
        let mut layouts = self.layouts.lock();
        let kept = layouts.cells.peek(&shard);
        if !kept.is_some_and(|c| Arc::ptr_eq(c, cell)) {
            return;
        }
        layouts.members += members;
        while layouts.members > LAYOUT_MEMBERS && layouts.cells.len() > 1 {
            let Some((_, dropped)) = layouts.cells.pop_lru() else {
                break;
            };
            if let Some(Ok(layout)) = dropped.get() {
                layouts.members -= layout.placed.len();
            }
        }
    }

    fn build_layout(&self, t: usize, k: usize) -> Result<Layout, CatalogError> {
        let plan = self.plan(t)?;
        let positions = plan.starts[k]..plan.starts[k + 1];
        let tree = &*self.tree;
        // Each sample's members with what reading them needs, looked up
        // while the sample's page is at hand: a shuffled shard's samples
        // are all over the index.
        let members = |sample: Sample| -> Result<Vec<Placed>, TreeError> {
            let placed = sample.members.into_iter().map(|m| placed_member(tree, m));
            placed.collect()
        };
        let mut placed = Vec::new();
        let mut count = 0;
        let mut place = |members: Vec<Placed>| {
            count += 1;
            placed.extend(members);
        };
        match &plan.order {
            Order::Key => plan.samples.range(tree, positions.clone(), &mut |_, s| {
                place(members(s)?);
                Ok(())
            }),
            Order::Drawn(order) => {
                let numbers: Vec<u64> = order[positions.start as usize..positions.end as usize]
                    .iter()
                    .map(|&s| u64::from(s))
                    .collect();
                let picked = plan.samples.pick(tree, &numbers, &members);
                picked.map(|samples| samples.into_iter().for_each(&mut place))
            }
            Order::Keyed(keyed) => {
                let numbers: Vec<u64> = positions.clone().map(|p| keyed.at(p)).collect();
                let picked = plan.samples.pick(tree, &numbers, &members);
                picked.map(|samples| samples.into_iter().for_each(&mut place))
            }
        }
        .map_err(catalog_error)?;
        placed.shrink_to_fit();
        let mut offset = 0;
        for p in &mut placed {
            p.offset = offset;
            offset += tar_len(&p.tar_member());
        }
        let size = offset + tar::END_OF_ARCHIVE;
        if count != positions.end - positions.start || size != plan.sizes[k] {
            // The tree cannot change under a view; a mismatch is a bug,
            // and wrong bytes are worse than an error.
            return Err(CatalogError(format!(
                "view of timeline {}: {} lays out as {size} bytes, planned {}",
                self.timelines[t].name,
                shard_name(k),
                plan.sizes[k]
            )));
        }
        Ok(Layout { placed, size })
    }

    fn dir(&self) -> Entry {
        super::dir_entry(self.mtime)
    }
}

/// Shard boundaries as samples come, in the order they go to shards.
struct Cut {
    rule: ShardCut,
    starts: Vec<u64>,
    sizes: Vec<u64>,
    /// Samples and bytes in the shard being filled.
    in_shard: u64,
    offset: u64,
}

impl Cut {
    fn new(rule: ShardCut) -> Self {
        Cut {
            rule,
            starts: vec![0],
            sizes: Vec::new(),
            in_shard: 0,
            offset: 0,
        }
    }

    /// The sample at `position`, of `len` bytes of tar.
    fn push(&mut self, position: u64, len: u64) {
        let full = match self.rule {
            ShardCut::Samples(n) => self.in_shard >= n,
            ShardCut::Bytes(max) => {
                self.in_shard > 0 && self.offset + len + tar::END_OF_ARCHIVE > max
            }
        };
        if full {
            self.sizes.push(self.offset + tar::END_OF_ARCHIVE);
            self.starts.push(position);
            (self.offset, self.in_shard) = (0, 0);
        }
        self.offset += len;
        self.in_shard += 1;
    }

    /// Starts and sizes of the shards of `count` samples.
    fn finish(mut self, count: u64) -> (Vec<u64>, Vec<u64>) {
        if self.in_shard > 0 {
            self.sizes.push(self.offset + tar::END_OF_ARCHIVE);
            self.starts.push(count);
        }
        (self.starts, self.sizes)
    }
}

/// The plan of `timeline`: one pass over its samples in sample order, and
/// for a shuffle a second (which needs the count before it can place a
/// sample).
fn plan(
    tree: &Tree,
    timeline: &str,
    options: ShardOptions,
    drawn_max: u64,
) -> Result<Plan, TreeError> {
    let mut cut = Cut::new(options.cut);
    let mut total = 0;
    let samples = Samples::scan(tree, timeline, &mut |n, sample| {
        if n == 0 {
            (cut, total) = (Cut::new(options.cut), 0);
        }
        let len = sample_len(tree, &sample);
        total += len;
        if options.shuffle.is_none() {
            cut.push(n, len);
        }
        Ok(())
    })?;
    let count = samples.len();
    let (order, (starts, sizes)) = match options.shuffle {
        None => (Order::Key, cut.finish(count)),
        Some(seed) if count <= drawn_max => {
            // A second pass for each sample's bytes, in shuffled order:
            // held only for a timeline small enough to be drawn.
            let mut lens = Vec::with_capacity(count as usize);
            samples.each(tree, &mut |_, sample| {
                lens.push(sample_len(tree, &sample));
                Ok(())
            })?;
            let mut order: Vec<u32> = (0..count as u32).collect();
            fisher_yates(&mut order, seed);
            let mut cut = Cut::new(options.cut);
            for (position, &sample) in order.iter().enumerate() {
                cut.push(position as u64, lens[sample as usize]);
            }
            (Order::Drawn(order), cut.finish(count))
        }
        Some(seed) => {
            let keyed = Keyed::new(seed, count);
            let per_shard = match options.cut {
                ShardCut::Samples(n) => n,
                // Shards of one sample count whose mean is the size asked.
                ShardCut::Bytes(max) => {
                    let mean = total.div_ceil(count).max(1);
                    (max.saturating_sub(tar::END_OF_ARCHIVE) / mean).max(1)
                }
            };
            let shards = count.div_ceil(per_shard);
            let mut sizes = vec![tar::END_OF_ARCHIVE; shards as usize];
            samples.each(tree, &mut |n, sample| {
                sizes[(keyed.position_of(n) / per_shard) as usize] += sample_len(tree, &sample);
                Ok(())
            })?;
            let starts = (0..=shards).map(|k| (k * per_shard).min(count)).collect();
            (Order::Keyed(keyed), (starts, sizes))
        }
    };
    Ok(Plan {
        samples,
        order,
        starts,
        sizes,
    })
}

/// Bytes of `sample`'s members in a shard.
fn sample_len(tree: &Tree, sample: &Sample) -> u64 {
    sample
        .members
        .iter()
        .map(|m| {
            let (mode, mtime) = mode_and_mtime(tree, m.attrs);
            tar_len(&tar::Member {
                path: &m.path,
                size: m.size,
                mode,
                mtime,
            })
        })
        .sum()
}

/// `member`, to be placed in a shard.
fn placed_member(tree: &Tree, member: SampleMember) -> Result<Placed, TreeError> {
    let (mode, mtime) = mode_and_mtime(tree, member.attrs);
    Ok(Placed {
        offset: 0,
        data: tree.item_data(member.item)?,
        path: member.path,
        mode,
        mtime,
    })
}

/// A member's mode and mtime in its tar header: the item's recorded mode
/// (0644 if none) and mtime (the Manifest's if none), in whole seconds.
fn mode_and_mtime(tree: &Tree, attrs: Attrs) -> (u16, i64) {
    let mtime_ns = attrs.mtime_ns.unwrap_or(tree.ts_unix_ns() as i64);
    (
        attrs.mode.unwrap_or(Attrs::DEFAULT_FILE_MODE),
        mtime_ns.div_euclid(1_000_000_000),
    )
}

/// Bytes of `member` in a shard: header, data, padding.
fn tar_len(member: &tar::Member) -> u64 {
    tar::header_len(member) + member.size + tar::padding(member.size)
}

impl Catalog for ShardCatalog {
    fn entry(&self, id: u64) -> Result<Option<Entry>, CatalogError> {
        if id as usize <= self.timelines.len() {
            return Ok(Some(self.dir()));
        }
        let Some((t, k)) = self.shard(id)? else {
            return Ok(None);
        };
        Ok(Some(Entry {
            kind: Kind::File,
            size: self.plan(t)?.sizes[k],
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
                .binary_search_by(|t| t.name.as_str().cmp(name));
            return Ok(found.ok().map(|t| 1 + t as u64));
        }
        let Some(t) = (dir as usize)
            .checked_sub(1)
            .filter(|&t| t < self.timelines.len())
        else {
            return Ok(None);
        };
        let Some(k) = name
            .strip_prefix("shard-")
            .and_then(|n| n.strip_suffix(".tar"))
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|&k| shard_name(k) == name)
        else {
            return Ok(None);
        };
        Ok((k < self.plan(t)?.sizes.len()).then(|| self.shard_id(t, k)))
    }

    fn child(&self, dir: u64, index: usize) -> Option<(u64, Cow<'_, str>)> {
        if dir == 0 {
            let timeline = self.timelines.get(index)?;
            return Some((1 + index as u64, Cow::Borrowed(&timeline.name)));
        }
        let t = usize::try_from(dir).ok()?.checked_sub(1)?;
        if t >= self.timelines.len() {
            return None;
        }
        // A plan that cannot be made was logged: the directory lists empty.
        let shards = self.plan(t).ok()?.sizes.len();
        (index < shards).then(|| (self.shard_id(t, index), Cow::Owned(shard_name(index))))
    }

    fn parent(&self, dir: u64) -> Option<u64> {
        (dir != 0).then_some(0)
    }

    fn extents(&self, id: u64, range: Range<u64>) -> Result<Option<Extents>, CatalogError> {
        let Some((t, k)) = self.shard(id)? else {
            return Ok(None);
        };
        let layout = self.layout(t, k)?;
        let size = layout.size;
        let range = range.start.min(size)..range.end.min(size);
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
        let placed = &layout.placed;
        let first = placed.partition_point(|p| p.offset <= range.start);
        for p in &placed[first.saturating_sub(1)..] {
            if p.offset >= range.end {
                break;
            }
            let tar_member = p.tar_member();
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
                extents.splice(dest, Extents::of_item(&p.data, within));
            }
            if let Some((within, dest)) = clip(pad..pad + tar::padding(tar_member.size)) {
                extents.map.push_pad(dest, within.end - within.start);
            }
        }
        if let Some((within, dest)) = clip(size - tar::END_OF_ARCHIVE..size) {
            extents.map.push_pad(dest, within.end - within.start);
        }
        Ok(Some(extents))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashMap};
    use std::io::Read;

    use super::*;
    use crate::catalog::view::samples::key_len;
    use crate::catalog::view::tests::{files, items, read, tree_and_reader};
    use crate::catalog::view::ViewSpec;

    /// (shard path, member path, bytes, mode, mtime) of every member of
    /// every shard of `spec`, as the `tar` crate reads the whole shards;
    /// every shard is also read in ragged pieces, which must agree.
    async fn members(spec: &str) -> Vec<(String, String, Vec<u8>, u32, u64)> {
        members_drawn_up_to(spec, DRAWN_MAX).await
    }

    /// [`members`], timelines of more than `drawn_max` samples shuffled
    /// by [`Keyed`].
    async fn members_drawn_up_to(
        spec: &str,
        drawn_max: u64,
    ) -> Vec<(String, String, Vec<u8>, u32, u64)> {
        let ViewSpec::WebDataset(options) = spec.parse().unwrap() else {
            panic!("{spec}")
        };
        let (tree, reader) = tree_and_reader().await;
        let catalog = ShardCatalog::new(tree, options).with_drawn_max(drawn_max);
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
        let catalog = ShardCatalog::new(tree, shuffled);
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
            train.is_sorted_by_key(|p| crate::catalog::view::samples::order(p)),
            "unshuffled shards are in sample order: {train:?}"
        );
        assert_eq!(train[0], "x.seg.png", "keys of the top directory first");
    }

    /// Above the Fisher–Yates limit a shuffle is keyed: every item still
    /// once, a sample never split, fixed by its seed, and `bytes=` cuts
    /// shards of one sample count.
    #[tokio::test]
    async fn a_keyed_shuffle_places_every_sample_once() {
        let keyed = |spec: &'static str| members_drawn_up_to(spec, 0);
        let order = |m: Vec<(String, String, Vec<u8>, u32, u64)>| -> Vec<(String, String)> {
            m.into_iter().map(|(s, p, ..)| (s, p)).collect()
        };
        for spec in [
            "webdataset:samples=2,shuffle=1",
            "webdataset:bytes=4KiB,shuffle=1",
        ] {
            check_complete(&keyed(spec).await);
        }
        let one = order(keyed("webdataset:samples=2,shuffle=1").await);
        assert_eq!(one, order(keyed("webdataset:samples=2,shuffle=1").await));
        assert_ne!(one, order(keyed("webdataset:samples=2,shuffle=2").await));
        assert_ne!(one, order(members("webdataset:samples=2,shuffle=1").await));
        // Samples a shard: every shard but a timeline's last holds as many.
        let by_shard = |m: &[(String, String)]| {
            let mut keys: BTreeMap<&str, std::collections::BTreeSet<&str>> = BTreeMap::new();
            for (shard, path) in m {
                keys.entry(shard)
                    .or_default()
                    .insert(&path[..key_len(path)]);
            }
            keys.into_iter()
                .map(|(shard, keys)| (shard.to_string(), keys.len()))
                .collect::<Vec<_>>()
        };
        let shards = by_shard(&order(keyed("webdataset:bytes=4KiB,shuffle=1").await));
        let train: Vec<usize> = shards
            .iter()
            .filter(|(s, _)| s.starts_with("/train/"))
            .map(|&(_, n)| n)
            .collect();
        assert!(train.len() > 1, "{shards:?}");
        assert!(
            train[..train.len() - 1].iter().all(|&n| n == train[0]),
            "{shards:?}"
        );
    }
}
