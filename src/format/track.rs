//! Track object of kind `fragment`: the `object_index` of FragmentEntries
//! plus the per-item names and media types a filesystem needs.
//!
//! CBOR map: `{"kind": "fragment", "object_index": [entry…],
//! "names": [text…], "media_type_table": [text…], "media_types": [uint…]}`.
//! `names` and `media_types` are parallel to `object_index`; they are extra
//! keys, so each FragmentEntry keeps exactly the positional encoding of the
//! seed and a Track written by another DreamDB writer (no names) still
//! decodes, with names synthesized as `item-<index>`.
//!
//! A `null` name marks a *retired* entry: an item that was replaced or
//! removed while other items of its pack are still live. It is kept so the
//! pack invariants (entries contiguous from 0, summing to the pack length)
//! still hold and the pack's real length can still be checked; it is not
//! part of the namespace.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use ciborium::value::Value;

use super::cbor::{self, as_array, as_text, as_u64, MapReader};
use super::{validate_item_name, FormatError, FragmentEntry, ObjectId, Placement};

/// The only Track kind packfs serves.
pub const TRACK_KIND_FRAGMENT: &str = "fragment";
/// Media type used when a Track does not record one.
const DEFAULT_MEDIA_TYPE: &str = "application/octet-stream";

/// One item of a Track.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrackItem {
    /// Path below the modality directory; may contain `/`.
    pub name: String,
    pub media_type: Arc<str>,
    pub entry: FragmentEntry,
}

/// A validated Fragment Track.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Track {
    items: Vec<TrackItem>,
    /// Entries of removed items whose packs still hold live items.
    retired: Vec<FragmentEntry>,
    /// Length every pack must have: the sum of its entries' sizes (seed §3.4).
    pack_lengths: HashMap<ObjectId, u64>,
}

impl Track {
    /// Builds a Track, checking names (valid, unique) and the pack invariants:
    /// entries sharing a pack, live and retired, are disjoint and contiguous
    /// from offset 0. Retired entries of packs with no live item left are
    /// dropped. `what` names the track in errors.
    pub fn new(
        items: Vec<TrackItem>,
        mut retired: Vec<FragmentEntry>,
        what: &str,
    ) -> Result<Self, FormatError> {
        let mut seen = HashSet::with_capacity(items.len());
        let mut packs: HashMap<ObjectId, Vec<(u64, u64)>> = HashMap::new();
        for (i, item) in items.iter().enumerate() {
            validate_item_name(&item.name, &format!("{what} names[{i}]"))?;
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
        retired.retain(|e| match e.placement {
            Placement::Packed { offset } => packs
                .get(&e.address)
                .is_some_and(|live| !live.contains(&(offset, e.byte_size))),
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
        let mut pack_lengths = HashMap::with_capacity(packs.len());
        for (pack, mut ranges) in packs {
            // Entries with the same range name the same bytes: two items with
            // identical content imported under different names share them.
            ranges.sort_unstable();
            ranges.dedup();
            let mut next = 0u64;
            for (offset, size) in ranges {
                if offset != next {
                    let detail = if offset < next {
                        format!("entries overlap: one starts at {offset}, inside the previous one which ends at {next}")
                    } else {
                        format!("gap: bytes {next}..{offset} belong to no entry")
                    };
                    return Err(FormatError::Pack {
                        what: what.to_string(),
                        pack: pack.to_hex(),
                        detail,
                    });
                }
                next += size;
            }
            pack_lengths.insert(pack, next);
        }
        Ok(Track {
            items,
            retired,
            pack_lengths,
        })
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

    pub fn into_items(self) -> Vec<TrackItem> {
        self.items
    }

    /// Entries of removed items kept for their packs' sake.
    pub fn retired(&self) -> &[FragmentEntry] {
        &self.retired
    }

    /// The length the pack `id` must have, if any entry of this Track is packed in it.
    pub fn pack_len(&self, id: &ObjectId) -> Option<u64> {
        self.pack_lengths.get(id).copied()
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut table: Vec<&str> = Vec::new();
        let mut index: HashMap<&str, u64> = HashMap::new();
        let mut entries = Vec::with_capacity(self.items.len() + self.retired.len());
        let mut names = Vec::with_capacity(entries.capacity());
        let mut media = Vec::with_capacity(entries.capacity());
        for it in &self.items {
            entries.push(it.entry.to_cbor());
            names.push(cbor::text(&it.name));
            media.push(intern(&mut table, &mut index, &it.media_type));
        }
        for e in &self.retired {
            entries.push(e.to_cbor());
            names.push(Value::Null);
            media.push(intern(&mut table, &mut index, DEFAULT_MEDIA_TYPE));
        }
        cbor::encode(&Value::Map(vec![
            (cbor::text("kind"), cbor::text(TRACK_KIND_FRAGMENT)),
            (cbor::text("object_index"), Value::Array(entries)),
            (cbor::text("names"), Value::Array(names)),
            (
                cbor::text("media_type_table"),
                Value::Array(table.iter().map(|t| cbor::text(t)).collect()),
            ),
            (cbor::text("media_types"), Value::Array(media)),
        ]))
    }

    /// Decodes and validates a Track; `what` names the object for errors.
    pub fn decode(bytes: &[u8], what: &str) -> Result<Self, FormatError> {
        let value = cbor::decode(bytes, what)?;
        let map = MapReader::new(&value, what)?;
        if let Some(kind) = map.get("kind") {
            let kind = as_text(kind, &format!("{what} kind"))?;
            if kind != TRACK_KIND_FRAGMENT {
                return Err(FormatError::shape(
                    what,
                    format!("track kind {kind:?} is not supported (only \"fragment\")"),
                ));
            }
        }
        let index = as_array(
            map.required("object_index")?,
            &format!("{what} object_index"),
        )?;
        let names = match map.get("names") {
            Some(v) => {
                let names = as_array(v, &format!("{what} names"))?;
                parallel(names.len(), index.len(), what, "names")?;
                names
                    .iter()
                    .enumerate()
                    .map(|(i, n)| match n {
                        Value::Null => Ok(None),
                        n => as_text(n, &format!("{what} names[{i}]")).map(|n| Some(n.to_string())),
                    })
                    .collect::<Result<Vec<_>, _>>()?
            }
            None => (0..index.len())
                .map(|i| Some(format!("item-{i:08}")))
                .collect(),
        };
        let media = decode_media_types(&map, index.len(), what)?;
        let mut items = Vec::with_capacity(index.len());
        let mut retired = Vec::new();
        for (i, ((entry, name), media_type)) in index.iter().zip(names).zip(media).enumerate() {
            let entry = FragmentEntry::from_cbor(entry, &format!("{what} object_index[{i}]"))?;
            match name {
                Some(name) => items.push(TrackItem {
                    name,
                    media_type,
                    entry,
                }),
                None => retired.push(entry),
            }
        }
        Track::new(items, retired, what)
    }
}

/// The index of `media_type` in the table being built, adding it if new.
fn intern<'a>(
    table: &mut Vec<&'a str>,
    index: &mut HashMap<&'a str, u64>,
    media_type: &'a str,
) -> Value {
    let next = table.len() as u64;
    let i = *index.entry(media_type).or_insert(next);
    if i == next {
        table.push(media_type);
    }
    cbor::uint(i)
}

fn parallel(len: usize, expected: usize, what: &str, field: &str) -> Result<(), FormatError> {
    if len != expected {
        return Err(FormatError::shape(
            what,
            format!("{field} has {len} elements but object_index has {expected}"),
        ));
    }
    Ok(())
}

fn decode_media_types(
    map: &MapReader,
    len: usize,
    what: &str,
) -> Result<Vec<Arc<str>>, FormatError> {
    let (Some(table), Some(indices)) = (map.get("media_type_table"), map.get("media_types")) else {
        let default: Arc<str> = DEFAULT_MEDIA_TYPE.into();
        return Ok(vec![default; len]);
    };
    let table = as_array(table, &format!("{what} media_type_table"))?
        .iter()
        .enumerate()
        .map(|(i, t)| as_text(t, &format!("{what} media_type_table[{i}]")).map(Arc::<str>::from))
        .collect::<Result<Vec<_>, _>>()?;
    let indices = as_array(indices, &format!("{what} media_types"))?;
    parallel(indices.len(), len, what, "media_types")?;
    indices
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let at = format!("{what} media_types[{i}]");
            let k = as_u64(v, &at)?;
            table.get(k as usize).cloned().ok_or_else(|| {
                FormatError::shape(&at, format!("index {k} is outside media_type_table"))
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(name: &str, pack: &[u8], offset: u64, size: u64) -> TrackItem {
        TrackItem {
            name: name.into(),
            media_type: "image/jpeg".into(),
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
