//! A timeline's samples in sample order, read from the tree page by page.
//!
//! Samples are ordered as a Track lists names: by the key's directory,
//! then the key's base name, then the extension. Each Track's items are
//! then already in sample order, and a merge of the timeline's Tracks
//! gives its samples one page of each Track at a time; a cursor every
//! [`CHECKPOINT`] samples lets a shard find its samples again without
//! holding them. The one case where the orders differ (a key that another
//! extends with a byte below `.`: `a-b.jpg` is listed before `a.jpg`,
//! sample `a` comes before `a-b`) is found while streaming, and that
//! timeline's samples are then sorted in memory ([`Samples::Held`]).

use std::ops::Range;
use std::sync::OnceLock;

use packfs_format::Attrs;

use super::catalog_error;
use crate::catalog::CatalogError;
use crate::tree::{Tree, TreeError, TreeItem};

/// A cursor is kept every this many samples: finding sample `n` streams at
/// most this many from the cursor before it.
const CHECKPOINT: u64 = 64;

/// Most threads [`Samples::pick`] walks on.
const PICK_THREADS: usize = 8;

/// One item of a sample.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SampleMember {
    /// Index of the item in the [`Tree`].
    pub item: u32,
    /// Its path in the sample: the key and the item's extension
    /// (`cat/0001.jpg`), made unique within the sample if two modalities
    /// hold the same one (`cat/0001.thumb.jpg`).
    pub path: Box<str>,
    /// The item's size and recorded attributes.
    pub size: u64,
    pub attrs: Attrs,
}

/// A sample: every item of a timeline with one key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Sample {
    pub key: Box<str>,
    /// In path order: by extension, then modality.
    pub members: Vec<SampleMember>,
}

/// The samples of one timeline, in sample order, all in memory.
#[derive(Debug)]
pub(crate) struct TimelineSamples {
    /// Each sample's key and its members' range in `members`.
    pub samples: Vec<(Box<str>, Range<u32>)>,
    /// Members of all samples, each sample's in path order.
    pub members: Vec<SampleMember>,
}

/// Where an item's key ends: before the first dot of its base name that is
/// not the base name's first byte (`.hidden` has no extension).
pub(crate) fn key_len(name: &str) -> usize {
    base_and_key(name).1
}

/// Where `name`'s base name starts, and where its key ends.
fn base_and_key(name: &str) -> (usize, usize) {
    let base = name.rfind('/').map_or(0, |slash| slash + 1);
    let key = name[base..]
        .char_indices()
        .skip(1)
        .find(|&(_, c)| c == '.')
        .map_or(name.len(), |(dot, _)| base + dot);
    (base, key)
}

/// `name` as sample order compares it: its directory, its key's base
/// name, and the rest (then modalities break ties). This is the order the
/// index lists names in (by directory, then base name) but for a key that
/// another extends with a byte below `.` (`a.jpg`, `a-b.jpg`).
pub(super) fn order(name: &str) -> (&str, &str, &str) {
    let (base, key) = base_and_key(name);
    order_of(name, base, key)
}

/// [`order`] of `name` whose base name starts at `base` and key ends at
/// `key`.
fn order_of(name: &str, base: usize, key: usize) -> (&str, &str, &str) {
    (
        &name[..base.saturating_sub(1)],
        &name[base..key],
        &name[key..],
    )
}

/// The key of `name`.
fn key(name: &str) -> &str {
    &name[..key_len(name)]
}

/// The Tracks of `timeline` (indexes into [`Tree::tracks`]), by modality:
/// the order of members that share a name.
pub(crate) fn timeline_tracks(tree: &Tree, timeline: &str) -> Vec<usize> {
    let tracks = tree.tracks();
    let mut mine: Vec<usize> = (0..tracks.len())
        .filter(|&i| tracks[i].timeline == timeline)
        .collect();
    mine.sort_by(|&a, &b| tracks[a].modality.cmp(&tracks[b].modality));
    mine
}

/// A timeline of a view, and the view's plan of it (`P`), made when the
/// timeline is first looked into.
pub(crate) struct Timeline<P> {
    pub(crate) name: String,
    plan: OnceLock<Result<P, String>>,
}

impl<P> Timeline<P> {
    /// The timelines of `tree`, in name order, none planned.
    pub(crate) fn all(tree: &Tree) -> Vec<Timeline<P>> {
        let mut names: Vec<String> = tree.tracks().iter().map(|t| t.timeline.clone()).collect();
        names.sort_unstable();
        names.dedup();
        names
            .into_iter()
            .map(|name| Timeline {
                name,
                plan: OnceLock::new(),
            })
            .collect()
    }

    /// Its plan, made by `make` if this is the first ask (an error is
    /// kept, and logged once).
    pub(crate) fn plan(
        &self,
        make: impl FnOnce(&str) -> Result<P, TreeError>,
    ) -> Result<&P, CatalogError> {
        self.plan
            .get_or_init(|| make(&self.name).map_err(|e| catalog_error(e).0))
            .as_ref()
            .map_err(|e| CatalogError(e.clone()))
    }
}

/// The samples of `timeline`, sorted in memory.
fn held(tree: &Tree, timeline: &str) -> Result<TimelineSamples, TreeError> {
    let tracks = tree.tracks();
    let mine = timeline_tracks(tree, timeline);
    // (name, item, rank of its modality).
    let mut items: Vec<(Box<str>, u32, usize)> = Vec::new();
    for (rank, &t) in mine.iter().enumerate() {
        let span = &tracks[t];
        for item in span.first_item..span.first_item + span.len {
            items.push((tree.item(item)?.name().into(), item, rank));
        }
    }
    let member = |item: u32, path: Box<str>| -> Result<SampleMember, TreeError> {
        let found = tree.item(item)?;
        Ok(SampleMember {
            item,
            path,
            size: found.size(),
            attrs: found.attrs(),
        })
    };
    items.sort_unstable_by(|a, b| (order(&a.0), a.2).cmp(&(order(&b.0), b.2)));
    let mut out = TimelineSamples {
        samples: Vec::new(),
        members: Vec::with_capacity(items.len()),
    };
    let mut start = 0;
    while start < items.len() {
        let key = key(&items[start].0);
        let end = start
            + items[start..]
                .iter()
                .take_while(|(name, ..)| self::key(name) == key)
                .count();
        let first = out.members.len();
        for (name, item, rank) in &items[start..end] {
            let modality = &tracks[mine[*rank]].modality;
            let path = unique_path(name, modality, &out.members[first..]);
            out.members.push(member(*item, path)?);
        }
        out.samples
            .push((key.into(), first as u32..out.members.len() as u32));
        start = end;
    }
    Ok(out)
}

/// `name` as a member path unless an earlier member of the sample has it;
/// then with the modality (and, failing that, a number) before the
/// extension.
fn unique_path(name: &str, modality: &str, taken: &[SampleMember]) -> Box<str> {
    let free = |p: &str| !taken.iter().any(|t| &*t.path == p);
    if free(name) {
        return name.into();
    }
    let (key, ext) = name.split_at(key_len(name));
    (0..)
        .map(|n| match n {
            0 => format!("{key}.{modality}{ext}"),
            n => format!("{key}.{modality}.{n}{ext}"),
        })
        .find(|p| free(p))
        .expect("some number is free")
        .into()
}

/// Where a stream of a timeline's samples stands: each Track's next item.
type Cursor = Vec<u32>;

/// The samples of a timeline, as a shard finds them again.
pub(crate) enum Samples {
    /// Streamed from the Tracks' pages; the cursor at
    /// `checkpoints[i * tracks.len()..]` is where sample
    /// `i * CHECKPOINT` starts.
    Streamed {
        tracks: Vec<usize>,
        checkpoints: Vec<u32>,
        count: u64,
    },
    /// Sorted in memory: a Track's names are not in sample order.
    Held(TimelineSamples),
}

impl Samples {
    /// Reads every sample of `timeline` once, in sample order, giving each to
    /// `visit` with its number; from pages if the Tracks' names allow it,
    /// else sorted in memory. When a Track's names turn out not to be in
    /// sample order, the samples are given again from number 0: a visitor
    /// given sample 0 starts over.
    pub(crate) fn scan(
        tree: &Tree,
        timeline: &str,
        visit: &mut dyn FnMut(u64, Sample) -> Result<(), TreeError>,
    ) -> Result<Samples, TreeError> {
        let tracks = timeline_tracks(tree, timeline);
        let start: Cursor = tracks
            .iter()
            .map(|&t| tree.tracks()[t].first_item)
            .collect();
        let mut stream = Stream::new(tree, &tracks, start)?;
        let mut checkpoints = Vec::new();
        let mut count = 0;
        loop {
            if count % CHECKPOINT == 0 {
                checkpoints.extend_from_slice(&stream.at);
            }
            match stream.next_sample()? {
                Next::Sample(sample) => visit(count, sample)?,
                Next::End => break,
                Next::Unsorted(name) => {
                    tracing::info!(
                        "timeline {timeline}: {name:?} sorts apart from its key; its samples are sorted in memory"
                    );
                    let held = held(tree, timeline)?;
                    let samples = Samples::Held(held);
                    samples.each(tree, visit)?;
                    return Ok(samples);
                }
            }
            count += 1;
        }
        checkpoints.shrink_to_fit();
        Ok(Samples::Streamed {
            tracks,
            checkpoints,
            count,
        })
    }

    /// How many samples there are.
    pub(crate) fn len(&self) -> u64 {
        match self {
            Samples::Streamed { count, .. } => *count,
            Samples::Held(held) => held.samples.len() as u64,
        }
    }

    /// Gives every sample to `visit` again, in sample order.
    pub(crate) fn each(
        &self,
        tree: &Tree,
        visit: &mut dyn FnMut(u64, Sample) -> Result<(), TreeError>,
    ) -> Result<(), TreeError> {
        self.range(tree, 0..self.len(), visit)
    }

    /// Gives samples `numbers` to `visit`, in sample order.
    pub(crate) fn range(
        &self,
        tree: &Tree,
        numbers: Range<u64>,
        visit: &mut dyn FnMut(u64, Sample) -> Result<(), TreeError>,
    ) -> Result<(), TreeError> {
        let numbers = numbers.start..numbers.end.min(self.len());
        match self {
            Samples::Held(held) => {
                for n in numbers {
                    let (key, members) = &held.samples[n as usize];
                    let sample = Sample {
                        key: key.clone(),
                        members: held.members[members.start as usize..members.end as usize]
                            .to_vec(),
                    };
                    visit(n, sample)?;
                }
                Ok(())
            }
            Samples::Streamed {
                tracks,
                checkpoints,
                ..
            } => {
                let mut n = numbers.start / CHECKPOINT * CHECKPOINT;
                let at = (n / CHECKPOINT) as usize * tracks.len();
                let from = checkpoints[at..at + tracks.len()].to_vec();
                let mut stream = Stream::new(tree, tracks, from)?;
                while n < numbers.end {
                    // The tree cannot change: a stream that ends early (or
                    // finds its order broken) has nothing more to give.
                    let Next::Sample(sample) = stream.next_sample()? else {
                        break;
                    };
                    if n >= numbers.start {
                        visit(n, sample)?;
                    }
                    n += 1;
                }
                Ok(())
            }
        }
    }

    /// Samples `numbers` (in any order, each once), each given to
    /// `convert` as it is read (while its page is at hand), and the
    /// results in the order of `numbers`; a number past the last is left
    /// out.
    ///
    /// Samples between two cursors are found by one walk from the first;
    /// the walks run on a few threads, as each wanted sample of a shuffled
    /// shard is on a page of its own, decoded for it.
    pub(crate) fn pick<T: Send>(
        &self,
        tree: &Tree,
        numbers: &[u64],
        convert: &(dyn Fn(Sample) -> Result<T, TreeError> + Sync),
    ) -> Result<Vec<T>, TreeError> {
        let mut wanted: Vec<(u64, usize)> = numbers.iter().copied().zip(0..).collect();
        wanted.sort_unstable();
        let mut walks: Vec<Range<usize>> = Vec::new();
        let mut i = 0;
        while i < wanted.len() {
            let block = wanted[i].0 / CHECKPOINT;
            let end = i + wanted[i..]
                .iter()
                .take_while(|(n, _)| n / CHECKPOINT == block)
                .count();
            walks.push(i..end);
            i = end;
        }
        let walk = |walks: &[Range<usize>]| -> Result<Vec<(usize, T)>, TreeError> {
            let mut found = Vec::new();
            for w in walks {
                let mut next = w.start;
                let numbers = wanted[w.start].0..wanted[w.end - 1].0 + 1;
                self.range(tree, numbers, &mut |n, sample| {
                    if wanted[next].0 == n {
                        found.push((wanted[next].1, convert(sample)?));
                        next += 1;
                    }
                    Ok(())
                })?;
            }
            Ok(found)
        };
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .clamp(1, PICK_THREADS);
        let per_thread = walks.len().div_ceil(threads).max(1);
        let found: Vec<Vec<(usize, T)>> = std::thread::scope(|scope| {
            let handles: Vec<_> = walks
                .chunks(per_thread)
                .map(|chunk| scope.spawn(move || walk(chunk)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect::<Result<_, _>>()
        })?;
        let mut out: Vec<Option<T>> = numbers.iter().map(|_| None).collect();
        for (at, t) in found.into_iter().flatten() {
            out[at] = Some(t);
        }
        Ok(out.into_iter().flatten().collect())
    }
}

enum Next {
    Sample(Sample),
    End,
    /// This name of a Track sorts before the one it follows by key.
    Unsorted(String),
}

/// A Track's next item, with where its base name starts and its key ends.
struct Head {
    item: TreeItem,
    base: usize,
    key: usize,
}

impl Head {
    fn new(item: TreeItem) -> Head {
        let (base, key) = base_and_key(item.name());
        Head { item, base, key }
    }

    fn key(&self) -> &str {
        &self.item.name()[..self.key]
    }

    fn order(&self) -> (&str, &str, &str) {
        order_of(self.item.name(), self.base, self.key)
    }
}

/// The next item of each Track, and the merge of their samples.
struct Stream<'t> {
    tree: &'t Tree,
    /// Per Track (by modality): its next item, its end, and the item.
    at: Vec<u32>,
    end: Vec<u32>,
    heads: Vec<Option<Head>>,
    modalities: Vec<&'t str>,
}

impl<'t> Stream<'t> {
    fn new(tree: &'t Tree, tracks: &[usize], at: Cursor) -> Result<Self, TreeError> {
        let spans = tree.tracks();
        let mut stream = Stream {
            tree,
            at,
            end: tracks
                .iter()
                .map(|&t| spans[t].first_item + spans[t].len)
                .collect(),
            heads: Vec::with_capacity(tracks.len()),
            modalities: tracks.iter().map(|&t| spans[t].modality.as_str()).collect(),
        };
        for t in 0..tracks.len() {
            let head = (stream.at[t] < stream.end[t])
                .then(|| tree.item(stream.at[t]).map(Head::new))
                .transpose()?;
            stream.heads.push(head);
        }
        Ok(stream)
    }

    /// The Track whose head comes first in sample order.
    fn first(&self) -> Option<usize> {
        (0..self.heads.len())
            .filter_map(|t| Some((self.heads[t].as_ref()?.order(), t)))
            .min()
            .map(|(_, t)| t)
    }

    fn next_sample(&mut self) -> Result<Next, TreeError> {
        let Some(first) = self.first() else {
            return Ok(Next::End);
        };
        let key: Box<str> = self.heads[first].as_ref().expect("first").key().into();
        let mut members: Vec<SampleMember> = Vec::new();
        while let Some(t) = self.first() {
            let head = self.heads[t].take().expect("first");
            if head.key() != &*key {
                self.heads[t] = Some(head);
                break;
            }
            let item = &head.item;
            members.push(SampleMember {
                item: self.at[t],
                path: unique_path(item.name(), self.modalities[t], &members),
                size: item.size(),
                attrs: item.attrs(),
            });
            self.at[t] += 1;
            if self.at[t] >= self.end[t] {
                continue;
            }
            let next = match item.next_on_page() {
                Some(next) => Head::new(next),
                None => Head::new(self.tree.item_in_pass(self.at[t])?),
            };
            if next.order() < head.order() {
                return Ok(Next::Unsorted(next.item.name().to_string()));
            }
            self.heads[t] = Some(next);
        }
        Ok(Next::Sample(Sample { key, members }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_end_at_the_first_dot_of_the_base_name() {
        fn key(n: &str) -> &str {
            &n[..key_len(n)]
        }
        assert_eq!(key("cat/0001.jpg"), "cat/0001");
        assert_eq!(key("a.b/0001.seg.png"), "a.b/0001");
        assert_eq!(key("0001"), "0001");
        assert_eq!(key("dir/.hidden"), "dir/.hidden");
        assert_eq!(key("dir/.hidden.txt"), "dir/.hidden");
        assert_eq!(key("été.jpg"), "été");
    }

    /// Every sample of `timeline` as streamed (or held, if the names ask
    /// for it), found again by `each`, `range` and `pick`; and whether
    /// they were streamed.
    fn scanned(tree: &Tree, timeline: &str) -> (Vec<Sample>, bool) {
        let mut seen = Vec::new();
        let samples = Samples::scan(tree, timeline, &mut |n, sample| {
            if n == 0 {
                seen.clear();
            }
            assert_eq!(n, seen.len() as u64);
            seen.push(sample);
            Ok(())
        })
        .unwrap();
        assert_eq!(samples.len(), seen.len() as u64);
        let mut again = Vec::new();
        samples
            .each(tree, &mut |_, s| {
                again.push(s);
                Ok(())
            })
            .unwrap();
        assert_eq!(again, seen);
        for from in 0..seen.len() as u64 {
            let mut some = Vec::new();
            let to = (from + 3).min(seen.len() as u64);
            samples
                .range(tree, from..to, &mut |n, s| {
                    some.push((n, s));
                    Ok(())
                })
                .unwrap();
            let want: Vec<(u64, Sample)> =
                (from..to).map(|n| (n, seen[n as usize].clone())).collect();
            assert_eq!(some, want);
        }
        let numbers: Vec<u64> = (0..seen.len() as u64).rev().step_by(2).collect();
        let picked = samples.pick(tree, &numbers, &Ok).unwrap();
        let want: Vec<Sample> = numbers.iter().map(|&n| seen[n as usize].clone()).collect();
        assert_eq!(picked, want);
        (seen, matches!(samples, Samples::Streamed { .. }))
    }

    fn held_samples(tree: &Tree, timeline: &str) -> Vec<Sample> {
        let held = held(tree, timeline).unwrap();
        held.samples
            .iter()
            .map(|(key, members)| Sample {
                key: key.clone(),
                members: held.members[members.start as usize..members.end as usize].to_vec(),
            })
            .collect()
    }

    #[tokio::test]
    async fn streamed_samples_are_the_samples_sorted_in_memory() {
        let (tree, _) = crate::catalog::view::tests::tree_and_store().await;
        for timeline in ["train", "val"] {
            let (streamed, from_pages) = scanned(&tree, timeline);
            assert!(from_pages, "{timeline}");
            assert_eq!(streamed, held_samples(&tree, timeline), "{timeline}");
        }
        let train = scanned(&tree, "train").0;
        let cat1 = train.iter().find(|s| &*s.key == "cat/0001").unwrap();
        let paths: Vec<&str> = cat1.members.iter().map(|m| &*m.path).collect();
        assert_eq!(
            paths,
            ["cat/0001.jpg", "cat/0001.thumb.jpg", "cat/0001.txt"]
        );
    }

    /// A key that another extends with a byte below `.` sorts after it by
    /// key and before it by name: the samples are then sorted in memory,
    /// the same.
    #[tokio::test]
    async fn names_out_of_key_order_are_sorted_in_memory() {
        let items = ["a.jpg", "a-b.jpg", "a.x.jpg", "b.jpg", "d/x.jpg"]
            .into_iter()
            .map(|n| ("t", "image", n.to_string(), n.as_bytes().to_vec()))
            .chain(["a.txt", "d/x.txt"].map(|n| ("t", "caption", n.to_string(), vec![1])))
            .collect();
        let (tree, _) = crate::catalog::view::tests::tree_and_store_of(items).await;
        let (samples, from_pages) = scanned(&tree, "t");
        assert!(!from_pages);
        assert_eq!(samples, held_samples(&tree, "t"));
        let keys: Vec<&str> = samples.iter().map(|s| &*s.key).collect();
        assert_eq!(keys, ["a", "a-b", "b", "d/x"]);
    }
}
