//! [`Track::encode`], streamed: the CBOR is written element by element,
//! exactly as a tree of `ciborium::Value`s of the Track would be written,
//! without building that tree (it took ~600 bytes an item, several times
//! the items themselves, and was the peak of an import of a million files).

use std::collections::HashMap;
use std::iter::repeat_n;

use ciborium::value::Value;
use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};

use super::{mode_value, mtime_value, Track, DEFAULT_MEDIA_TYPE, TRACK_KIND_FRAGMENT};
use crate::cbor;
use crate::FragmentEntry;

impl Track {
    /// The Track as the CBOR map the module docs describe; the optional
    /// keys are written only when recorded, so a Track without them
    /// encodes (and hashes) exactly as before they existed.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        ciborium::into_writer(&Encoding::new(self), &mut out)
            .expect("writing CBOR into a Vec cannot fail");
        out
    }
}

/// A Track being written, with its table of media types.
struct Encoding<'a> {
    track: &'a Track,
    /// Media types in order of first use: items', then retired entries'.
    table: Vec<&'a str>,
    index: HashMap<&'a str, u64>,
}

impl<'a> Encoding<'a> {
    fn new(track: &'a Track) -> Self {
        let mut e = Encoding {
            track,
            table: Vec::new(),
            index: HashMap::new(),
        };
        let retired = track.retired.iter().map(|_| DEFAULT_MEDIA_TYPE);
        for media_type in track.items.iter().map(|i| &*i.media_type).chain(retired) {
            let next = e.table.len() as u64;
            if *e.index.entry(media_type).or_insert(next) == next {
                e.table.push(media_type);
            }
        }
        e
    }
}

impl Serialize for Encoding<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let t = self.track;
        let (items, retired) = (&t.items, &t.retired);
        let len = items.len() + retired.len();
        // Retired entries have no name, media type of their own, mode or mtime.
        let n = retired.len();
        let modes = items.iter().any(|i| i.attrs.mode.is_some());
        let mtimes = items.iter().any(|i| i.attrs.mtime_ns.is_some());
        let keys = 5 + usize::from(modes) + usize::from(mtimes) + usize::from(!t.dirs.is_empty());
        let mut map = s.serialize_map(Some(keys))?;
        map.serialize_entry("kind", TRACK_KIND_FRAGMENT)?;
        let entries = || items.iter().map(|i| &i.entry).chain(retired);
        map.serialize_entry(
            "object_index",
            &Array(len, || entries().map(FragmentEntry::to_cbor)),
        )?;
        let names = || {
            items
                .iter()
                .map(|i| Some(i.name.as_str()))
                .chain(repeat_n(None, n))
        };
        map.serialize_entry("names", &Array(len, names))?;
        map.serialize_entry("media_type_table", &self.table)?;
        let media = || {
            let retired = retired.iter().map(|_| DEFAULT_MEDIA_TYPE);
            let types = items.iter().map(|i| &*i.media_type).chain(retired);
            types.map(|m| self.index[m])
        };
        map.serialize_entry("media_types", &Array(len, media))?;
        if modes {
            let modes = || items.iter().map(|i| i.attrs.mode).chain(repeat_n(None, n));
            map.serialize_entry("modes", &Array(len, modes))?;
        }
        if mtimes {
            let mtimes = || {
                items
                    .iter()
                    .map(|i| i.attrs.mtime_ns)
                    .chain(repeat_n(None, n))
            };
            map.serialize_entry("mtimes", &Array(len, mtimes))?;
        }
        if !t.dirs.is_empty() {
            let dirs = || {
                t.dirs.iter().map(|d| {
                    Value::Array(vec![
                        cbor::text(&d.name),
                        mode_value(d.attrs.mode),
                        mtime_value(d.attrs.mtime_ns),
                    ])
                })
            };
            map.serialize_entry("dirs", &Array(t.dirs.len(), dirs))?;
        }
        map.end()
    }
}

/// A CBOR array of the `len` elements `elements` yields, written as they
/// are produced (the same bytes as a `Value::Array` of them).
struct Array<F>(usize, F);

impl<F, I> Serialize for Array<F>
where
    F: Fn() -> I,
    I: Iterator,
    I::Item: Serialize,
{
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0))?;
        for element in (self.1)() {
            seq.serialize_element(&element)?;
        }
        seq.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::track::{Attrs, TrackDir, TrackItem};
    use crate::ObjectId;
    use crate::Placement;

    /// The encoding as a tree of `Value`s, as packfs wrote Tracks before
    /// they were streamed: the bytes (and ids) must not change.
    fn value_encoding(t: &Track) -> Vec<u8> {
        let mut table: Vec<&str> = Vec::new();
        let mut index: HashMap<&str, u64> = HashMap::new();
        let mut intern = |m| {
            let next = table.len() as u64;
            let i = *index.entry(m).or_insert(next);
            if i == next {
                table.push(m);
            }
            cbor::uint(i)
        };
        let (mut entries, mut names, mut media) = (Vec::new(), Vec::new(), Vec::new());
        let (mut modes, mut mtimes) = (Vec::new(), Vec::new());
        for it in t.items() {
            entries.push(it.entry.to_cbor());
            names.push(cbor::text(&it.name));
            media.push(intern(&it.media_type));
            modes.push(mode_value(it.attrs.mode));
            mtimes.push(mtime_value(it.attrs.mtime_ns));
        }
        for e in t.retired() {
            entries.push(e.to_cbor());
            names.push(Value::Null);
            media.push(intern(DEFAULT_MEDIA_TYPE));
            modes.push(Value::Null);
            mtimes.push(Value::Null);
        }
        let mut map = vec![
            (cbor::text("kind"), cbor::text(TRACK_KIND_FRAGMENT)),
            (cbor::text("object_index"), Value::Array(entries)),
            (cbor::text("names"), Value::Array(names)),
            (
                cbor::text("media_type_table"),
                Value::Array(table.iter().map(|t| cbor::text(t)).collect()),
            ),
            (cbor::text("media_types"), Value::Array(media)),
        ];
        if t.items().iter().any(|i| i.attrs.mode.is_some()) {
            map.push((cbor::text("modes"), Value::Array(modes)));
        }
        if t.items().iter().any(|i| i.attrs.mtime_ns.is_some()) {
            map.push((cbor::text("mtimes"), Value::Array(mtimes)));
        }
        if !t.dirs().is_empty() {
            let dirs = t.dirs().iter().map(|d| {
                Value::Array(vec![
                    cbor::text(&d.name),
                    mode_value(d.attrs.mode),
                    mtime_value(d.attrs.mtime_ns),
                ])
            });
            map.push((cbor::text("dirs"), Value::Array(dirs.collect())));
        }
        cbor::encode(&Value::Map(map))
    }

    fn item(i: u64, placement: Placement, attrs: Attrs) -> TrackItem {
        TrackItem {
            name: format!("d{}/i{i}", i % 3),
            media_type: ["image/jpeg", "text/plain", "a/b"][(i % 3) as usize].into(),
            entry: FragmentEntry {
                t_start: i as i64,
                t_end: i as i64 + 1,
                byte_size: 1 << (i % 40),
                address: ObjectId::of(&i.to_le_bytes()),
                placement,
            },
            attrs,
        }
    }

    #[test]
    fn streamed_bytes_are_those_of_the_value_tree() {
        let none = Attrs::default();
        // Whole, chunked and packed items with every size of integer; no
        // modes, mtimes or dirs recorded.
        let mut items: Vec<TrackItem> = (0..50)
            .map(|i| match i % 3 {
                0 => item(i, Placement::Whole, none),
                1 => item(i, Placement::Chunked, none),
                _ => item(i, Placement::Packed { offset: 0 }, none),
            })
            .collect();
        let plain = Track::new(items.clone(), vec![], "t").unwrap();
        assert_eq!(plain.encode(), value_encoding(&plain));

        // One pack of 300 items, some removed (retired), with modes,
        // negative and huge mtimes, and directories.
        let pack = ObjectId::of(b"pack");
        let mut offset = 0;
        items = (0..300)
            .map(|i| {
                let attrs = Attrs {
                    mode: (i % 4 == 0).then_some(0o640),
                    mtime_ns: (i % 5 != 0).then_some(i as i64 * 1_000_000_007 - 40_000_000_000),
                };
                let mut it = item(i, Placement::Packed { offset }, attrs);
                it.entry.address = pack;
                offset += it.entry.byte_size;
                it
            })
            .collect();
        let (kept, retired) = Track::new(items, vec![], "t")
            .unwrap()
            .remove_items(|i| i.name.ends_with('7'));
        let dirs = vec![
            TrackDir {
                name: "".into(),
                attrs: Attrs {
                    mode: Some(0o750),
                    mtime_ns: Some(-1),
                },
            },
            TrackDir {
                name: "d1/empty".into(),
                attrs: none,
            },
        ];
        let full = Track::new(kept, retired, "t")
            .unwrap()
            .with_dirs(dirs, "t")
            .unwrap();
        assert!(!full.retired().is_empty());
        assert_eq!(full.encode(), value_encoding(&full));

        let empty = Track::new(vec![], vec![], "t").unwrap();
        assert_eq!(empty.encode(), value_encoding(&empty));
    }
}
