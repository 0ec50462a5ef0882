//! `packfs diff`: the items added, removed and changed from one Manifest to
//! another.
//!
//! Tracks with the same id on both sides hold the same items and are not
//! even fetched; of two paged Tracks, neither are the pages both list. Of an item on both sides, the Track entries decide almost
//! always: the same object, placement and size are the same bytes; another
//! size, or another whole object (whose id is the hash of the item's
//! bytes), are other bytes. Only an item of the same size stored elsewhere
//! — repacked with a changed neighbour, chunked differently, rewritten
//! unchanged through a mount — is read on both sides and compared, so
//! "modified" always means other bytes.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};

use futures::{StreamExt, TryStreamExt};
use packfs_format::{FragmentEntry, Placement, TrackEntry, TrackItem, TRACK_KIND_FRAGMENT};
use thiserror::Error;

use crate::dataset::{
    shared_ids, Dataset, DatasetError, Item, Resolved, SnapshotTrack, TrackObject, TrackPart,
};
use crate::reader::{ReadError, Reader};

/// Tracks fetched at once.
const TRACK_CONCURRENCY: usize = 16;
/// Item pairs compared byte by byte at once.
const COMPARE_CONCURRENCY: usize = 8;
/// Bytes of each side read per step of a comparison.
const COMPARE_STEP: u64 = 4 << 20;

/// Why two revisions could not be compared.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum DiffError {
    #[error("{0}")]
    Dataset(#[from] DatasetError),
    #[error("reading {path} of {revision} to compare it: {source}")]
    Read {
        path: String,
        revision: String,
        #[source]
        source: ReadError,
    },
}

/// How an item differs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// Only on the second side.
    Added,
    /// Only on the first side.
    Removed,
    /// On both sides, with other bytes.
    Modified,
    /// On both sides with the same bytes, but another mode or mtime.
    Touched,
}

impl Change {
    /// The marker `packfs diff` prints: `+`, `-`, `M`, `T`.
    pub fn marker(self) -> char {
        match self {
            Change::Added => '+',
            Change::Removed => '-',
            Change::Modified => 'M',
            Change::Touched => 'T',
        }
    }
}

/// One item that differs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Difference {
    pub change: Change,
    /// `/<timeline>/<modality>/<name>`.
    pub path: String,
}

/// What `diff` found.
#[derive(Debug, Default)]
pub struct DiffReport {
    /// Sorted by path, byte order.
    pub differences: Vec<Difference>,
    /// (timeline, modality) pairs whose Tracks differ.
    pub tracks_compared: usize,
    /// Items of the same size stored apart, read to compare their bytes.
    pub items_read: usize,
    /// Bytes those reads fetched, both sides.
    pub bytes_read: u64,
}

impl DiffReport {
    /// How many differences are of `change`.
    pub fn count(&self, change: Change) -> usize {
        self.differences
            .iter()
            .filter(|d| d.change == change)
            .count()
    }
}

/// The items that differ from the Manifest of `from` to that of `to`,
/// reading through `reader` only items whose entries cannot tell.
pub async fn diff(
    dataset: &Dataset,
    from: &Resolved,
    to: &Resolved,
    reader: &Reader,
) -> Result<DiffReport, DiffError> {
    let mut report = DiffReport::default();
    if from.id == to.id {
        return Ok(report);
    }
    let sides = [from, to];
    let manifests = [
        dataset.manifest(&from.id, &from.describe()).await?,
        dataset.manifest(&to.id, &to.describe()).await?,
    ];
    let mut pairs: BTreeMap<(&str, &str), [Option<&TrackEntry>; 2]> = BTreeMap::new();
    for (side, manifest) in manifests.iter().enumerate() {
        for entry in &manifest.tracks {
            let key = (entry.timeline.as_str(), entry.modality.as_str());
            pairs.entry(key).or_default()[side] = Some(entry);
        }
    }
    pairs.retain(|_, [a, b]| a.map(|e| e.track) != b.map(|e| e.track));
    report.tracks_compared = pairs.len();
    let loaded: Vec<[Option<TrackPart>; 2]> = futures::stream::iter(pairs.values())
        .map(|pair| load_pair(dataset, *pair, sides))
        .buffered(TRACK_CONCURRENCY)
        .try_collect()
        .await?;

    let mut to_read = Vec::new();
    for (pair, [a, b]) in pairs.values().zip(loaded) {
        let Some(entry) = pair[0].or(pair[1]) else {
            continue;
        };
        let dir = format!("/{}/{}/", entry.timeline, entry.modality);
        let (x, y) = (a.as_ref(), b.as_ref());
        let (x, y) = (x.map(|t| &t.items[..]), y.map(|t| &t.items[..]));
        let names = compare_items(x, y, &dir, &mut report.differences);
        // Items to read are on both sides, so are their Tracks.
        if let ([Some(x), Some(y)], Some(a), Some(b)) = (pair, a, b) {
            if !names.is_empty() {
                to_read.push(([*x, *y], [a, b], names));
            }
        }
    }
    for (entries, tracks, names) in to_read {
        compare_bytes(dataset, sides, entries, tracks, names, reader, &mut report).await?;
    }
    report.differences.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(report)
}

/// The items of one (timeline, modality) on each side that may differ:
/// of two paged Tracks, only those on name pages the other side does not
/// list (a page with one id holds the same items on both sides), so what
/// is fetched grows with the difference, not with the Tracks. Tracks of
/// another kind than Fragment are refused, as a mount refuses them.
async fn load_pair(
    dataset: &Dataset,
    pair: [Option<&TrackEntry>; 2],
    sides: [&Resolved; 2],
) -> Result<[Option<TrackPart>; 2], DatasetError> {
    let referrer = [0, 1].map(|side| format!("manifest {}", sides[side].id));
    for (side, entry) in pair.iter().enumerate() {
        if let Some(entry) = entry.filter(|e| e.kind != TRACK_KIND_FRAGMENT) {
            return Err(DatasetError::UnsupportedTrackKind {
                id: sides[side].id,
                timeline: entry.timeline.clone(),
                modality: entry.modality.clone(),
                kind: entry.kind.clone(),
            });
        }
    }
    let mut roots = [None, None];
    for (side, entry) in pair.iter().enumerate() {
        if let Some(entry) = entry {
            let object = dataset.track_object_unindexed(&entry.track, &referrer[side]);
            roots[side] = Some(object.await?);
        }
    }
    // An index page both sides list lists the same name pages on both.
    let shared_index = match &roots {
        [Some(TrackObject::Paged(a)), Some(TrackObject::Paged(b))] => {
            shared_ids(a.index.iter().map(|p| p.id), b.index.iter().map(|p| p.id))
        }
        _ => HashSet::new(),
    };
    for (side, root) in roots.iter_mut().enumerate() {
        if let Some(TrackObject::Paged(root)) = root {
            dataset
                .list_unshared(root, &shared_index, &referrer[side])
                .await?;
        }
    }
    let shared = match &roots {
        [Some(TrackObject::Paged(a)), Some(TrackObject::Paged(b))] => {
            shared_ids(a.pages.iter().map(|p| p.id), b.pages.iter().map(|p| p.id))
        }
        _ => HashSet::new(),
    };
    let mut parts = [None, None];
    for ((side, entry), object) in pair.iter().enumerate().zip(roots) {
        if let (Some(entry), Some(object)) = (entry, object) {
            let part = dataset.track_part(&entry.track, object, &shared);
            parts[side] = Some(part.await?);
        }
    }
    Ok(parts)
}

/// Whether two entries name the same bytes in the same place.
fn same_place(a: &FragmentEntry, b: &FragmentEntry) -> bool {
    a.address == b.address && a.placement == b.placement && a.byte_size == b.byte_size
}

/// Adds the differences the entries of one (timeline, modality) show, its
/// paths starting with `dir`; returns the names whose bytes must be read
/// to tell, in the order of their bytes on the second side.
fn compare_items(
    a: Option<&[TrackItem]>,
    b: Option<&[TrackItem]>,
    dir: &str,
    out: &mut Vec<Difference>,
) -> Vec<String> {
    let mut before: HashMap<&str, &TrackItem> = a
        .map(|items| items.iter().map(|i| (i.name.as_str(), i)).collect())
        .unwrap_or_default();
    let mut push = |change, name: &str| {
        out.push(Difference {
            change,
            path: format!("{dir}{name}"),
        })
    };
    let mut unsure: Vec<&TrackItem> = Vec::new();
    for item in b.unwrap_or_default() {
        let Some(old) = before.remove(item.name.as_str()) else {
            push(Change::Added, &item.name);
            continue;
        };
        let (x, y) = (&old.entry, &item.entry);
        if same_place(x, y) {
            if old.attrs != item.attrs {
                push(Change::Touched, &item.name);
            }
        } else if x.byte_size != y.byte_size
            || (x.placement == Placement::Whole && y.placement == Placement::Whole)
        {
            push(Change::Modified, &item.name);
        } else {
            unsure.push(item);
        }
    }
    for name in before.into_keys() {
        push(Change::Removed, name);
    }
    unsure.sort_by_key(|i| {
        let offset = match i.entry.placement {
            Placement::Packed { offset } => offset,
            _ => 0,
        };
        (i.entry.address.0, offset)
    });
    unsure.into_iter().map(|i| i.name.clone()).collect()
}

/// Reads `names` on both sides of one (timeline, modality) and adds those
/// whose bytes differ (or, the bytes equal, whose mode or mtime does).
async fn compare_bytes(
    dataset: &Dataset,
    sides: [&Resolved; 2],
    entries: [&TrackEntry; 2],
    parts: [TrackPart; 2],
    names: Vec<String>,
    reader: &Reader,
    report: &mut DiffReport,
) -> Result<(), DiffError> {
    let wanted: HashSet<&str> = names.iter().map(String::as_str).collect();
    let [a, b] = parts;
    let (a_items, b_items) = (wanted_items(&a, &wanted), wanted_items(&b, &wanted));
    let referrer = [0, 1].map(|side| format!("manifest {}", sides[side].id));
    let (a_lengths, b_lengths) = futures::try_join!(
        dataset.pack_lengths(&a, &a_items, &referrer[0]),
        dataset.pack_lengths(&b, &b_items, &referrer[1]),
    )?;
    let (a, b) = futures::try_join!(
        SnapshotTrack::load_items(dataset, entries[0], &a_items, &a_lengths),
        SnapshotTrack::load_items(dataset, entries[1], &b_items, &b_lengths),
    )?;
    let by_name = |t: &SnapshotTrack| -> HashMap<String, Item> {
        t.items
            .iter()
            .map(|i| (i.name().to_string(), i.to_item()))
            .collect()
    };
    let (a, b) = (by_name(&a), by_name(&b));
    let dir = format!("/{}/{}/", entries[1].timeline, entries[1].modality);
    let results: Vec<(String, Option<Change>, u64)> = futures::stream::iter(&names)
        .map(|name| {
            let (x, y, path) = (&a[name], &b[name], format!("{dir}{name}"));
            async move {
                let (same, read) = same_bytes(reader, [x, y], sides, &path).await?;
                let change = match same {
                    false => Some(Change::Modified),
                    true if x.attrs != y.attrs => Some(Change::Touched),
                    true => None,
                };
                Ok::<_, DiffError>((path, change, read))
            }
        })
        .buffered(COMPARE_CONCURRENCY)
        .try_collect()
        .await?;
    for (path, change, read) in results {
        report.items_read += 1;
        report.bytes_read += read;
        if let Some(change) = change {
            report.differences.push(Difference { change, path });
        }
    }
    Ok(())
}

/// The items of `part` whose names are `wanted`.
fn wanted_items<'p>(part: &'p TrackPart, wanted: &HashSet<&str>) -> Vec<&'p TrackItem> {
    let items = part.items.iter();
    items.filter(|i| wanted.contains(i.name.as_str())).collect()
}

/// Whether two items of one size hold the same bytes, reading both up to
/// the first difference; and how many bytes that read.
async fn same_bytes(
    reader: &Reader,
    items: [&Item; 2],
    sides: [&Resolved; 2],
    path: &str,
) -> Result<(bool, u64), DiffError> {
    let read = |side: usize, offset| async move {
        reader
            .read_item(&items[side].data(), offset, COMPARE_STEP)
            .await
            .map_err(|source| DiffError::Read {
                path: path.to_string(),
                revision: sides[side].revision.to_string(),
                source,
            })
    };
    let (mut offset, mut fetched) = (0, 0);
    while offset < items[1].size {
        let (x, y) = futures::try_join!(read(0, offset), read(1, offset))?;
        fetched += (x.len() + y.len()) as u64;
        if x != y {
            return Ok((false, fetched));
        }
        if x.is_empty() {
            break;
        }
        offset += x.len() as u64;
    }
    Ok((true, fetched))
}

/// `path` as `packfs diff` prints it: as it is, or, if it holds a control
/// character, `"` or `\`, in double quotes with C escapes (git's quoting),
/// so that every line is one path.
pub fn quote_path(path: &str) -> Cow<'_, str> {
    if !path
        .chars()
        .any(|c| c.is_control() || c == '"' || c == '\\')
    {
        return Cow::Borrowed(path);
    }
    let mut out = String::with_capacity(path.len() + 2);
    out.push('"');
    for c in path.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => {
                let mut utf8 = [0; 4];
                for byte in c.encode_utf8(&mut utf8).bytes() {
                    out.push_str(&format!("\\{byte:03o}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use packfs_format::{Attrs, ObjectId, Track};

    fn item(name: &str, size: u64, address: &[u8], placement: Placement, mode: u16) -> TrackItem {
        TrackItem {
            name: name.into(),
            media_type: "application/octet-stream".into(),
            entry: FragmentEntry {
                t_start: 0,
                t_end: 1,
                byte_size: size,
                address: ObjectId::of(address),
                placement,
            },
            attrs: Attrs {
                mode: Some(mode),
                mtime_ns: None,
            },
        }
    }

    fn track(items: Vec<TrackItem>) -> Track {
        Track::new(items, Vec::new(), "test").unwrap()
    }

    #[test]
    fn entries_decide_all_but_same_sized_items_stored_apart() {
        use Placement::{Chunked, Packed, Whole};
        let a = track(vec![
            item("same", 4, b"w1", Whole, 0o644),
            item("touched", 4, b"w2", Whole, 0o644),
            item("resized", 4, b"p1", Packed { offset: 0 }, 0o644),
            item("rewritten", 4, b"w3", Whole, 0o644),
            item("repacked", 4, b"p1", Packed { offset: 4 }, 0o644),
            item("rechunked", 100, b"c1", Chunked, 0o644),
            item("gone", 1, b"w5", Whole, 0o644),
        ]);
        let b = track(vec![
            item("same", 4, b"w1", Whole, 0o644),
            item("touched", 4, b"w2", Whole, 0o600),
            item("resized", 5, b"p2", Packed { offset: 0 }, 0o644),
            item("rewritten", 4, b"w4", Whole, 0o644),
            item("repacked", 4, b"p2", Packed { offset: 5 }, 0o644),
            item("rechunked", 100, b"c2", Chunked, 0o644),
            item("new", 1, b"w6", Whole, 0o644),
        ]);
        let mut out = Vec::new();
        let mut unsure = compare_items(Some(a.items()), Some(b.items()), "/t/m/", &mut out);
        out.sort_by(|x, y| x.path.cmp(&y.path));
        let got: Vec<(char, &str)> = out
            .iter()
            .map(|d| (d.change.marker(), d.path.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ('-', "/t/m/gone"),
                ('+', "/t/m/new"),
                ('M', "/t/m/resized"),
                ('M', "/t/m/rewritten"),
                ('T', "/t/m/touched"),
            ]
        );
        unsure.sort();
        assert_eq!(unsure, ["rechunked", "repacked"]);
    }

    #[test]
    fn a_side_without_the_track_adds_or_removes_everything() {
        let t = track(vec![item("a", 1, b"x", Placement::Whole, 0o644)]);
        let mut out = Vec::new();
        assert!(compare_items(None, Some(t.items()), "/t/m/", &mut out).is_empty());
        assert!(compare_items(Some(t.items()), None, "/t/m/", &mut out).is_empty());
        let markers: Vec<char> = out.iter().map(|d| d.change.marker()).collect();
        assert_eq!(markers, ['+', '-']);
    }

    #[test]
    fn paths_are_quoted_only_when_a_line_could_not_hold_them() {
        assert_eq!(quote_path("/t/m/a b/ünï.jpg"), "/t/m/a b/ünï.jpg");
        assert_eq!(quote_path("/t/m/a\nb"), "\"/t/m/a\\nb\"");
        assert_eq!(quote_path("/t/m/tab\there"), "\"/t/m/tab\\there\"");
        assert_eq!(quote_path("/t/m/q\"\\"), "\"/t/m/q\\\"\\\\\"");
        assert_eq!(quote_path("/t/m/\x01\u{85}"), "\"/t/m/\\001\\302\\205\"");
    }
}
