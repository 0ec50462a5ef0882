//! Track object of kind `fragment`: the `object_index` of FragmentEntries
//! plus the per-item names and media types a filesystem needs.
//!
//! CBOR map: `{"kind": "fragment", "object_index": [entry…],
//! "names": [text…], "media_type_table": [text…], "media_types": [uint…]}`.
//! `names` and `media_types` are parallel to `object_index`; they are extra
//! keys, so each FragmentEntry keeps exactly the positional encoding of
//! Fragment Packs (`docs/FORMAT.md`) and a Track written by another DreamDB writer (no names) still
//! decodes, with names synthesized as `item-<index>`.
//!
//! Optional keys record what a filesystem shows of items and directories:
//! `modes` and `mtimes` (parallel to `object_index`, null where not
//! recorded) and `dirs` (directories below the modality, empty ones
//! included, each `[name, mode, mtime]`). Tracks without them still decode.
//!
//! A `null` name marks a *retired* entry: an item that was replaced or
//! removed while other items of its pack are still live. It is kept so the
//! pack invariants (entries contiguous from 0, summing to the pack length)
//! still hold and the pack's real length can still be checked; it is not
//! part of the namespace.

use std::sync::Arc;

use ciborium::value::Value;
use foldhash::{HashMapExt, HashSetExt};

use super::cbor;
use super::{validate_item_name, FormatError, FragmentEntry, ObjectId, Placement};

mod encode;
mod paged;
mod reader;
pub use paged::{
    check_lengths, name_order, pages_to_edit, read_pack_page, EditError, IndexRef, NamePage,
    PackPageRef, PackRecord, PageRef, PageShape, PageSource, PagedReader, PagedTrack, PagedWriter,
    Survey, TrackEdit, TrackRoot,
};
pub use reader::{read as read_columns, Columns, TrackLayout};

/// The only Track kind packfs serves.
pub const TRACK_KIND_FRAGMENT: &str = "fragment";
/// Media type used when a Track does not record one.
pub const DEFAULT_MEDIA_TYPE: &str = "application/octet-stream";

/// What a writer recorded of a file or directory for `stat`; `None`:
/// not recorded (a mount shows its defaults).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Attrs {
    /// Permission bits (at most `0o7777`).
    pub mode: Option<u16>,
    /// Modification time, in nanoseconds since the Unix epoch.
    pub mtime_ns: Option<i64>,
}

impl Attrs {
    /// The permission bits of a file whose writer recorded none.
    pub const DEFAULT_FILE_MODE: u16 = 0o644;
    /// The permission bits of a directory whose writer recorded none.
    pub const DEFAULT_DIR_MODE: u16 = 0o755;
}

/// One item of a Track.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrackItem {
    /// Path below the modality directory; may contain `/`.
    pub name: String,
    pub media_type: Arc<str>,
    pub entry: FragmentEntry,
    pub attrs: Attrs,
}

/// A directory below a Track's modality directory: recorded so that an
/// empty one, and the attributes of any, survive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrackDir {
    /// Path below the modality directory; `""` is the modality directory.
    pub name: String,
    pub attrs: Attrs,
}

/// The length each pack of a Track must have: the sum of its entries' sizes.
pub type PackLengths = foldhash::HashMap<ObjectId, u64>;

/// A validated Fragment Track.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Track {
    items: Vec<TrackItem>,
    /// Entries of removed items whose packs still hold live items.
    retired: Vec<FragmentEntry>,
    /// Recorded directories, sorted by name.
    dirs: Vec<TrackDir>,
    /// Length every pack must have: the sum of its entries' sizes, which
    /// tile it.
    pack_lengths: PackLengths,
}

impl Track {
    /// Builds a Track, checking names (valid, unique) and the pack invariants:
    /// entries sharing a pack, live and retired, are disjoint and contiguous
    /// from offset 0. Retired entries of packs with no live item left, and
    /// repeats of one range, are dropped. `what` names the track in errors.
    pub fn new(
        items: Vec<TrackItem>,
        mut retired: Vec<FragmentEntry>,
        what: &str,
    ) -> Result<Self, FormatError> {
        // foldhash: fast on a million names, and seeded per process so
        // hostile names cannot force collisions.
        let mut seen = foldhash::HashSet::with_capacity(items.len());
        let mut packs: foldhash::HashMap<ObjectId, Vec<(u64, u64)>> = foldhash::HashMap::new();
        for (i, item) in items.iter().enumerate() {
            // The location is formatted only for an error: this runs per item.
            validate_item_name(&item.name, "").map_err(|e| match e {
                FormatError::Name { name, reason, .. } => FormatError::Name {
                    what: format!("{what} names[{i}]"),
                    name,
                    reason,
                },
                e => e,
            })?;
            if !seen.insert(item.name.as_str()) {
                return Err(FormatError::Name {
                    what: what.to_string(),
                    name: item.name.clone(),
                    reason: "duplicate name",
                });
            }
            if let Placement::Packed { offset } = item.entry.placement {
                packs
                    .entry(item.entry.address)
                    .or_default()
                    .push((offset, item.entry.byte_size));
            }
        }
        // A retired entry is needed only while its pack has live items, and
        // not when a live entry holds the very same bytes again (an item
        // re-imported unchanged lands in the same pack at the same offset).
        // Writers pass every entry a pack ever had; keep one per range. The
        // live ranges are a set: a flush passes every old entry as retired,
        // and a pack holds up to tens of thousands of items.
        let live: foldhash::HashSet<(ObjectId, u64, u64)> = items
            .iter()
            .filter_map(|i| match i.entry.placement {
                Placement::Packed { offset } => Some((i.entry.address, offset, i.entry.byte_size)),
                _ => None,
            })
            .collect();
        let mut kept = foldhash::HashSet::new();
        retired.retain(|e| match e.placement {
            Placement::Packed { offset } => {
                let range = (e.address, offset, e.byte_size);
                packs.contains_key(&e.address) && !live.contains(&range) && kept.insert(range)
            }
            _ => false,
        });
        for e in &retired {
            if let Placement::Packed { offset } = e.placement {
                packs
                    .entry(e.address)
                    .or_default()
                    .push((offset, e.byte_size));
            }
        }
        let mut pack_lengths = foldhash::HashMap::with_capacity(packs.len());
        for (pack, mut ranges) in packs {
            let len = check_pack(&mut ranges).map_err(|detail| FormatError::Pack {
                what: what.to_string(),
                pack: pack.to_hex(),
                detail,
            })?;
            pack_lengths.insert(pack, len);
        }
        Ok(Track {
            items,
            retired,
            dirs: Vec::new(),
            pack_lengths,
        })
    }

    /// The same Track recording `dirs`: names follow the item-name rules
    /// (or are `""`, the modality directory) and are unique.
    pub fn with_dirs(mut self, mut dirs: Vec<TrackDir>, what: &str) -> Result<Self, FormatError> {
        dirs.sort_by(|a, b| a.name.cmp(&b.name));
        for (i, dir) in dirs.iter().enumerate() {
            if !dir.name.is_empty() {
                validate_item_name(&dir.name, &format!("{what} dirs[{i}]"))?;
            }
            check_mode(dir.attrs.mode, || format!("{what} dirs[{i}]"))?;
            if i > 0 && dirs[i - 1].name == dir.name {
                return Err(FormatError::Name {
                    what: format!("{what} dirs"),
                    name: dir.name.clone(),
                    reason: "duplicate name",
                });
            }
        }
        self.dirs = dirs;
        Ok(self)
    }

    /// The recorded directories, by name.
    pub fn dirs(&self) -> &[TrackDir] {
        &self.dirs
    }

    /// Removes the items `remove` selects. Packed entries among them are
    /// retired rather than dropped (see the module docs); returns the kept
    /// items and all retired entries, ready for [`Track::new`].
    pub fn remove_items(
        self,
        mut remove: impl FnMut(&TrackItem) -> bool,
    ) -> (Vec<TrackItem>, Vec<FragmentEntry>) {
        let mut retired = self.retired;
        let mut kept = Vec::with_capacity(self.items.len());
        for item in self.items {
            if !remove(&item) {
                kept.push(item);
            } else if matches!(item.entry.placement, Placement::Packed { .. }) {
                retired.push(item.entry);
            }
        }
        (kept, retired)
    }

    pub fn items(&self) -> &[TrackItem] {
        &self.items
    }

    /// The items, the length each pack must have, and the recorded
    /// directories.
    pub fn into_parts(self) -> (Vec<TrackItem>, PackLengths, Vec<TrackDir>) {
        (self.items, self.pack_lengths, self.dirs)
    }

    /// Entries of removed items kept for their packs' sake.
    pub fn retired(&self) -> &[FragmentEntry] {
        &self.retired
    }

    /// The length the pack `id` must have, if any entry of this Track is packed in it.
    pub fn pack_len(&self, id: &ObjectId) -> Option<u64> {
        self.pack_lengths.get(id).copied()
    }

    /// Decodes and validates a Track; `what` names the object for errors.
    pub fn decode(bytes: &[u8], what: &str) -> Result<Self, FormatError> {
        let mut columns = RawColumns::default();
        let layout = reader::read(bytes, what, &mut columns)?;
        Self::from_columns(columns, layout, what)
    }

    /// [`Track::decode`] of bytes it owns: they are dropped as soon as they
    /// are parsed, before the items are assembled, so the encoded Track
    /// (74 bytes an item for short names) and the items do not all peak
    /// together.
    pub fn decode_owned(bytes: impl AsRef<[u8]>, what: &str) -> Result<Self, FormatError> {
        let mut columns = RawColumns::default();
        let layout = reader::read(bytes.as_ref(), what, &mut columns)?;
        drop(bytes);
        Self::from_columns(columns, layout, what)
    }

    /// Assembles and validates the items of a parsed Track. The columns are
    /// consumed as they are zipped; absent ones were never materialized.
    fn from_columns(raw: RawColumns, layout: TrackLayout, what: &str) -> Result<Self, FormatError> {
        let default_media: Arc<str> = DEFAULT_MEDIA_TYPE.into();
        // Assembled from the back, each column shrunk every eighth, so what
        // is consumed is given back while the items grow.
        let RawColumns {
            mut index,
            mut names,
            media,
            mut modes,
            mut mtimes,
        } = raw;
        let step = (layout.len / 8).max(1 << 14);
        let mut items = Vec::with_capacity(layout.len);
        let mut retired = Vec::new();
        while let Some(entry) = index.pop() {
            let i = index.len();
            // The reader checked the lengths: every `pop` has an element.
            let name = match layout.names {
                true => names.pop().flatten(),
                false => Some(format!("item-{i:08}")),
            };
            let mode = modes.pop().flatten();
            let mtime_ns = mtimes.pop().flatten();
            let media_type = match &layout.media_table {
                Some(table) => table[media[i] as usize].clone(),
                None => default_media.clone(),
            };
            match name {
                Some(name) => items.push(TrackItem {
                    name,
                    media_type,
                    entry,
                    attrs: Attrs { mode, mtime_ns },
                }),
                None => retired.push(entry),
            }
            if i % step == 0 {
                index.shrink_to_fit();
                names.shrink_to_fit();
                modes.shrink_to_fit();
                mtimes.shrink_to_fit();
            }
        }
        items.reverse();
        retired.reverse();
        Track::new(items, retired, what)?.with_dirs(layout.dirs, what)
    }
}

/// A Track's columns as read, before validation; absent arrays stay empty.
#[derive(Default)]
struct RawColumns {
    index: Vec<FragmentEntry>,
    names: Vec<Option<String>>,
    media: Vec<u32>,
    modes: Vec<Option<u16>>,
    mtimes: Vec<Option<i64>>,
}

impl Columns for RawColumns {
    fn entry(&mut self, entry: FragmentEntry) {
        self.index.push(entry);
    }
    fn name(&mut self, name: Option<&str>) {
        self.names.push(name.map(str::to_string));
    }
    fn media_type(&mut self, index: u32) {
        self.media.push(index);
    }
    fn mode(&mut self, mode: Option<u16>) {
        self.modes.push(mode);
    }
    fn mtime(&mut self, mtime_ns: Option<i64>) {
        self.mtimes.push(mtime_ns);
    }
}

/// The length of a pack whose entries have the ranges `(offset, size)`:
/// they must cover it from 0 with no gap and no overlap, where equal ranges
/// name the same bytes (two items with identical content imported under
/// different names share them). Sorts `ranges`; the error is the detail.
pub fn check_pack(ranges: &mut Vec<(u64, u64)>) -> Result<u64, String> {
    ranges.sort_unstable();
    ranges.dedup();
    let mut next = 0u64;
    for &(offset, size) in ranges.iter() {
        if offset != next {
            return Err(if offset < next {
                format!("entries overlap: one starts at {offset}, inside the previous one which ends at {next}")
            } else {
                format!("gap: bytes {next}..{offset} belong to no entry")
            });
        }
        next += size;
    }
    Ok(next)
}

fn mode_value(mode: Option<u16>) -> Value {
    mode.map_or(Value::Null, |m| cbor::uint(u64::from(m)))
}

fn mtime_value(mtime_ns: Option<i64>) -> Value {
    mtime_ns.map_or(Value::Null, |t| Value::Integer(t.into()))
}

/// Permission bits fit in `0o7777`.
fn check_mode(mode: Option<u16>, what: impl FnOnce() -> String) -> Result<(), FormatError> {
    match mode {
        Some(m) if m > 0o7777 => Err(FormatError::shape(
            what(),
            format!("mode {m:#o} has bits outside 0o7777"),
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An item of `size` bytes at `offset` of the pack whose bytes are `pack`.
    fn item(name: &str, pack: &[u8], offset: u64, size: u64) -> TrackItem {
        TrackItem {
            name: name.into(),
            media_type: "image/jpeg".into(),
            attrs: Default::default(),
            entry: FragmentEntry {
                t_start: 0,
                t_end: 1,
                byte_size: size,
                address: ObjectId::of(pack),
                placement: Placement::Packed { offset },
            },
        }
    }

    #[test]
    fn round_trip_keeps_names_media_types_and_pack_lengths() {
        let mut whole = item("c/d.bin", b"w", 0, 9);
        whole.entry.placement = Placement::Whole;
        whole.media_type = "application/octet-stream".into();
        let t = Track::new(
            vec![
                item("a.jpg", b"p", 0, 5),
                item("b b.jpg", b"p", 5, 0),
                item("ü.jpg", b"p", 5, 7),
                whole,
            ],
            vec![],
            "t",
        )
        .unwrap();
        let back = Track::decode(&t.encode(), "t").unwrap();
        assert_eq!(back, t);
        assert_eq!(back.pack_len(&ObjectId::of(b"p")), Some(12));
    }

    #[test]
    fn modes_mtimes_and_dirs_round_trip_and_are_absent_unless_recorded() {
        let plain = Track::new(
            vec![item("a", b"p", 0, 5), item("b", b"p", 5, 1)],
            vec![],
            "t",
        )
        .unwrap();
        let bytes = plain.encode();
        for key in ["modes", "mtimes", "dirs"] {
            let found = bytes.windows(key.len()).any(|w| w == key.as_bytes());
            assert!(!found, "{key} written with nothing recorded");
        }
        let decoded = Track::decode(&bytes, "t").unwrap();
        assert!(decoded.items().iter().all(|i| i.attrs == Attrs::default()));
        assert!(decoded.dirs().is_empty());

        let mut a = item("a", b"p", 0, 5);
        a.attrs = Attrs {
            mode: Some(0o600),
            mtime_ns: Some(-1_500_000_000),
        };
        let mut b = item("sub/b", b"p", 5, 1);
        b.attrs.mtime_ns = Some(1_700_000_000_123_456_789);
        let dirs = vec![
            TrackDir {
                name: "sub/empty".into(),
                attrs: Attrs::default(),
            },
            TrackDir {
                name: "".into(),
                attrs: Attrs {
                    mode: Some(0o750),
                    mtime_ns: None,
                },
            },
        ];
        let t = Track::new(vec![a, b], vec![], "t")
            .unwrap()
            .with_dirs(dirs, "t")
            .unwrap();
        let back = Track::decode(&t.encode(), "t").unwrap();
        assert_eq!(back, t);
        assert_eq!(back.dirs()[0].name, "", "sorted by name");

        let dup = vec![
            TrackDir {
                name: "d".into(),
                attrs: Attrs::default(),
            };
            2
        ];
        let e = plain.clone().with_dirs(dup, "t").unwrap_err();
        assert!(e.to_string().contains("duplicate"), "{e}");
        let mut bad = item("a", b"p", 0, 5);
        bad.attrs.mode = Some(0o10000);
        let bytes = Track::new(vec![bad], vec![], "t").unwrap().encode();
        let e = Track::decode(&bytes, "t").unwrap_err();
        assert!(e.to_string().contains("outside 0o7777"), "{e}");
    }

    /// Assembly from the back with shrinking (`from_raw`) keeps every
    /// item, its order, media type, mode and mtime, and the retired
    /// entries, past several shrink steps; `decode_owned` agrees.
    #[test]
    fn large_tracks_decode_in_order_owned_or_borrowed() {
        let n = 40_000u64;
        let (mut items, mut all) = (Vec::new(), Vec::new());
        for i in 0..n {
            let mut it = item(&format!("d{}/i{i}", i % 7), b"p", i, 1);
            it.media_type = ["image/jpeg", "text/plain", "a/b"][(i % 3) as usize].into();
            if i % 5 == 0 {
                it.attrs.mode = Some(0o640);
            }
            if i % 3 == 0 {
                it.attrs.mtime_ns = Some(i as i64 - 7);
            }
            all.push(it.clone());
            items.push(it);
        }
        let t = Track::new(items, vec![], "t").unwrap();
        // Items whose name ends in 1 removed: retired entries interleave
        // with live ones.
        let (kept, retired) = t.remove_items(|i| i.name.ends_with('1'));
        let t = Track::new(kept, retired, "t").unwrap();
        assert!(!t.retired().is_empty());
        let bytes = t.encode();
        assert_eq!(Track::decode(&bytes, "t").unwrap(), t);
        assert_eq!(Track::decode_owned(bytes.clone(), "t").unwrap(), t);
        let names: Vec<&str> = t.items().iter().map(|i| i.name.as_str()).collect();
        let want: Vec<&str> = all
            .iter()
            .map(|i| i.name.as_str())
            .filter(|n| !n.ends_with('1'))
            .collect();
        assert_eq!(names, want);
    }

    #[test]
    fn track_from_a_writer_without_names_decodes() {
        let entry = item("x", b"p", 0, 4).entry;
        let bytes = cbor::encode(&Value::Map(vec![(
            cbor::text("object_index"),
            Value::Array(vec![entry.to_cbor()]),
        )]));
        let t = Track::decode(&bytes, "t").unwrap();
        assert_eq!(t.items()[0].name, "item-00000000");
        assert_eq!(&*t.items()[0].media_type, DEFAULT_MEDIA_TYPE);
    }

    #[test]
    fn rejects_gaps_overlaps_and_duplicates() {
        let e = Track::new(
            vec![item("a", b"p", 0, 5), item("b", b"p", 6, 1)],
            vec![],
            "track T",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("track T")
                && e.contains("gap: bytes 5..6")
                && e.contains(&ObjectId::of(b"p").to_hex()),
            "{e}"
        );
        let e = Track::new(
            vec![item("a", b"p", 0, 5), item("b", b"p", 3, 4)],
            vec![],
            "t",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("overlap"), "{e}");
        let e = Track::new(vec![item("a", b"p", 1, 5)], vec![], "t")
            .unwrap_err()
            .to_string();
        assert!(e.contains("gap: bytes 0..1"), "{e}");
        let e = Track::new(
            vec![item("a", b"p", 0, 5), item("a", b"q", 0, 1)],
            vec![],
            "t",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("duplicate name"), "{e}");
        let e = Track::new(vec![item("../a", b"p", 0, 5)], vec![], "t")
            .unwrap_err()
            .to_string();
        assert!(e.contains("names[0]"), "{e}");
    }

    #[test]
    fn identical_ranges_of_one_pack_are_the_same_bytes() {
        let t = Track::new(
            vec![
                item("a", b"p", 0, 5),
                item("copy of a", b"p", 0, 5),
                item("b", b"p", 5, 1),
            ],
            vec![],
            "t",
        )
        .unwrap();
        assert_eq!(t.pack_len(&ObjectId::of(b"p")), Some(6));
    }

    #[test]
    fn removed_packed_items_are_retired_until_their_pack_has_no_live_item() {
        let t = Track::new(
            vec![
                item("a", b"p", 0, 5),
                item("b", b"p", 5, 3),
                item("c", b"q", 0, 2),
            ],
            vec![],
            "t",
        )
        .unwrap();
        let (kept, retired) = t.remove_items(|i| i.name == "a" || i.name == "c");
        let t = Track::new(kept, retired, "t").unwrap();
        assert_eq!(t.items().len(), 1);
        assert_eq!(
            t.retired().len(),
            1,
            "a's entry stays for pack p; c's pack q is unreferenced"
        );
        assert_eq!(t.pack_len(&ObjectId::of(b"p")), Some(8));
        assert_eq!(t.pack_len(&ObjectId::of(b"q")), None);
        let back = Track::decode(&t.encode(), "t").unwrap();
        assert_eq!(back, t);
        // Re-adding the same bytes supersedes the retired entry.
        let again = item("a", b"p", 0, 5);
        let (mut kept, retired) = back.clone().remove_items(|_| false);
        kept.push(again);
        let t2 = Track::new(kept, retired, "t").unwrap();
        assert!(t2.retired().is_empty());
        assert_eq!(t2.pack_len(&ObjectId::of(b"p")), Some(8));
        let (kept, retired) = back.remove_items(|_| true);
        let t = Track::new(kept, retired, "t").unwrap();
        assert!(t.items().is_empty() && t.retired().is_empty());
    }

    #[test]
    fn a_bad_entry_is_named_by_its_position() {
        let good = item("a", b"p", 0, 1).entry.to_cbor();
        let bad = Value::Array(vec![
            cbor::int(0),
            cbor::int(1),
            cbor::text("5"),
            cbor::id(&ObjectId::of(b"x")),
        ]);
        let bytes = cbor::encode(&Value::Map(vec![(
            cbor::text("object_index"),
            Value::Array(vec![good, bad]),
        )]));
        let e = Track::decode(&bytes, "track T").unwrap_err().to_string();
        assert!(
            e.starts_with(
                "track T object_index[1] element 2 (byte_size): expected an unsigned integer"
            ),
            "{e}"
        );
        let e = Track::decode(&cbor::encode(&Value::Map(vec![])), "track T")
            .unwrap_err()
            .to_string();
        assert!(e.contains("missing field \"object_index\""), "{e}");
        let e = Track::decode(&cbor::encode(&cbor::text("x")), "track T")
            .unwrap_err()
            .to_string();
        assert!(e.contains("expected a map"), "{e}");
    }

    /// Keys packfs does not know are skipped, repeated or not; a known
    /// key given twice is an error.
    #[test]
    fn unknown_keys_are_skipped_and_known_ones_may_not_repeat() {
        let index = || Value::Array(vec![item("a", b"p", 0, 1).entry.to_cbor()]);
        let mut map = vec![(cbor::text("object_index"), index())];
        for _ in 0..3 {
            map.push((cbor::text("x-other-writer"), cbor::uint(1)));
            map.push((cbor::uint(7), cbor::text("a key that is not text")));
        }
        let t = Track::decode(&cbor::encode(&Value::Map(map.clone())), "t").unwrap();
        assert_eq!(t.items().len(), 1);
        map.push((cbor::text("object_index"), index()));
        let e = Track::decode(&cbor::encode(&Value::Map(map)), "t").unwrap_err();
        assert!(
            e.to_string().contains("\"object_index\" appears twice"),
            "{e}"
        );
    }

    #[test]
    fn rejects_bad_kind_and_mismatched_parallel_arrays() {
        let bytes = cbor::encode(&Value::Map(vec![
            (cbor::text("kind"), cbor::text("spatial_bucket")),
            (cbor::text("object_index"), Value::Array(vec![])),
        ]));
        assert!(Track::decode(&bytes, "t")
            .unwrap_err()
            .to_string()
            .contains("not supported"));
        let bytes = cbor::encode(&Value::Map(vec![
            (
                cbor::text("object_index"),
                Value::Array(vec![item("a", b"p", 0, 1).entry.to_cbor()]),
            ),
            (cbor::text("names"), Value::Array(vec![])),
        ]));
        assert!(Track::decode(&bytes, "t")
            .unwrap_err()
            .to_string()
            .contains("names has 0 elements"));
    }
}
