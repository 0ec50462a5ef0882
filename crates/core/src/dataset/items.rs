//! The items of a loaded Track as a compact table: one arena of names and a
//! column per field, with no heap object per item. A mount of ten million
//! items holds this rather than ten million [`Item`]s (a `String`, an
//! `Arc` and an enum each, ~136 bytes); an [`ItemRef`] reads one row, and
//! an [`Item`] is made only where one is kept.
//!
//! A Track is decoded straight into the table ([`ItemTable::decode`]) by
//! the format's one-pass reader, so a mount never holds the Track as
//! `TrackItem`s. Names are not checked for uniqueness here: the tree finds
//! a repeated name when it sorts each directory, without a hash set of
//! every name.

use std::sync::Arc;

use bytes::Bytes;
use object_store::path::Path;
use packfs_format::{
    check_lengths, check_pack, read_columns, Attrs, Columns, FormatError, FragmentEntry, ObjectId,
    PackLengths, PagedReader, Placement, TrackDir, TrackItem, TrackRoot, DEFAULT_MEDIA_TYPE,
};

use super::item::{ChunkRef, Item, ItemData, ItemSource};

/// A mode the writer did not record (modes are at most `0o7777`).
const NO_MODE: u16 = u16::MAX;
/// An mtime the writer did not record. `i64::MIN` ns is 1677-09-21, the
/// earliest time a Track can hold; an mtime recorded as exactly that shows
/// as not recorded.
const NO_MTIME: i64 = i64::MIN;

/// The object holding the bytes of some rows.
#[derive(Clone, Debug)]
struct Object {
    id: ObjectId,
    path: Arc<Path>,
    kind: ObjectKind,
}

#[derive(Clone, Debug)]
enum ObjectKind {
    Whole,
    /// A pack, which must be `len` bytes long.
    Packed {
        len: u64,
    },
    /// An ItemManifest, with its chunks once they are loaded.
    Chunked(Arc<[ChunkRef]>),
}

#[cfg(any(test, feature = "testing"))]
impl ObjectKind {
    /// The same kind of object with the same chunks or length.
    fn same(&self, other: &ObjectKind) -> bool {
        match (self, other) {
            (ObjectKind::Whole, ObjectKind::Whole) => true,
            (ObjectKind::Packed { len: a }, ObjectKind::Packed { len: b }) => a == b,
            (ObjectKind::Chunked(a), ObjectKind::Chunked(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

/// The items of one Track, in Track order.
#[derive(Clone, Debug, Default)]
pub struct ItemTable {
    /// Every name, one after the other.
    names: String,
    /// Where each row's name ends in `names` (it starts where the previous
    /// one ends).
    name_ends: Vec<u64>,
    sizes: Vec<u64>,
    /// Offset in the pack, for packed rows (the format bounds it to u32).
    offsets: Vec<u32>,
    /// Index into `objects`.
    object_of: Vec<u32>,
    objects: Vec<Object>,
    media_types: Vec<Arc<str>>,
    /// Index into `media_types`; absent when there is only one.
    media_of: Option<Vec<u32>>,
    /// Absent when no row has one recorded.
    modes: Option<Vec<u16>>,
    mtimes: Option<Vec<i64>>,
}

/// One row of an [`ItemTable`].
#[derive(Clone, Copy)]
pub struct ItemRef<'a> {
    table: &'a ItemTable,
    row: usize,
}

impl ItemTable {
    /// Decodes the Track object `bytes` (already checked against its id)
    /// into a table, with the same checks as [`Track::decode`] except the
    /// uniqueness of names (see the module docs). `data_path` names the
    /// object an entry addresses; `what` names the Track in errors.
    /// Chunked rows need `set_chunks` before they are read.
    pub fn decode(
        bytes: &[u8],
        what: &str,
        data_path: impl Fn(&ObjectId) -> Path,
    ) -> Result<(ItemTable, Vec<TrackDir>), FormatError> {
        let mut builder = Builder::default();
        let layout = read_columns(bytes, what, &mut builder)?;
        let dirs = layout.dirs;
        let table = builder.finish(
            layout.len,
            layout.names,
            layout.media_table,
            what,
            data_path,
        )?;
        Ok((table, dirs))
    }

    /// [`ItemTable::decode`] of a paged Track: its `root`, and the bytes
    /// of its pages as `next_page` hands them out (each checked against its
    /// id), name pages then pack pages in the root's order, each dropped
    /// once read; `page_what` names a page in errors.
    pub fn decode_paged(
        root: &TrackRoot,
        mut next_page: impl FnMut() -> Option<Bytes>,
        what: &str,
        page_what: impl Fn(&ObjectId) -> String,
        data_path: impl Fn(&ObjectId) -> Path,
    ) -> Result<(ItemTable, Vec<TrackDir>), FormatError> {
        let mut reader = PagedReader::new(root, Builder::default());
        let names = root.pages.iter().map(|p| (p.id, true));
        for (id, is_name) in names.chain(root.pack_pages.iter().map(|p| (p.id, false))) {
            let what = page_what(&id);
            let bytes = next_page()
                .ok_or_else(|| FormatError::shape(&what, "the page could not be read"))?;
            match is_name {
                true => reader.name_page(&bytes, &what)?,
                false => reader.pack_page(&bytes, &what)?,
            }
        }
        let (builder, layout, lengths) = reader.finish(what)?;
        let table = builder.finish(layout.len, true, layout.media_table, what, data_path)?;
        let tiled: foldhash::HashMap<ObjectId, u64> = table
            .objects
            .iter()
            .filter_map(|o| match o.kind {
                ObjectKind::Packed { len } => Some((o.id, len)),
                _ => None,
            })
            .collect();
        check_lengths(&lengths, |a| tiled.get(a).copied(), what)?;
        Ok((table, layout.dirs))
    }

    /// The table of `items` (some of a Track's, without its retired
    /// entries), each pack's length taken from `lengths`, where the
    /// Track's entries were checked to tile it.
    pub(crate) fn of_items<'t>(
        items: impl IntoIterator<Item = &'t TrackItem>,
        lengths: &PackLengths,
        what: &str,
        data_path: impl Fn(&ObjectId) -> Path,
    ) -> Result<ItemTable, FormatError> {
        let mut builder = Builder::default();
        let mut media: Vec<Arc<str>> = Vec::new();
        let mut len = 0;
        for it in items {
            builder.entry(it.entry.clone());
            builder.name(Some(&it.name));
            let k = match media.iter().position(|m| *m == it.media_type) {
                Some(k) => k,
                None => {
                    media.push(it.media_type.clone());
                    media.len() - 1
                }
            };
            builder.media_type(k as u32);
            builder.mode(it.attrs.mode);
            builder.mtime(it.attrs.mtime_ns);
            len += 1;
        }
        if media.is_empty() {
            media.push(DEFAULT_MEDIA_TYPE.into());
        }
        let lengths = Lengths::Given(lengths);
        builder.finish_with(len, true, Some(media), what, data_path, lengths)
    }

    /// Name page `index` of `root` (its bytes checked against its id)
    /// decoded straight into a table, and checked on its own
    /// ([`TrackRoot::read_name_page_into`]), with its directories. Its
    /// packs have no length (the pack pages have them) and its chunked
    /// rows no chunks: until the caller finds those, the table answers for
    /// names, sizes and attributes, not for reading.
    pub(crate) fn decode_page(
        root: &TrackRoot,
        index: usize,
        bytes: &[u8],
        what: &str,
        data_path: impl Fn(&ObjectId) -> Path,
    ) -> Result<(ItemTable, Vec<TrackDir>), FormatError> {
        let mut builder = Builder::default();
        let layout = root.read_name_page_into(index, bytes, what, &mut builder)?;
        let (len, media) = (layout.len, layout.media_table);
        let table = builder.finish_with(len, true, media, what, data_path, Lengths::Later)?;
        Ok((table, layout.dirs))
    }

    /// About how many bytes of memory the table holds.
    pub fn heap_bytes(&self) -> usize {
        fn bytes<T>(v: &Vec<T>) -> usize {
            v.capacity() * std::mem::size_of::<T>()
        }
        // Each object's path is an allocation of its own.
        let paths: usize = self
            .objects
            .iter()
            .map(|o| o.path.as_ref().as_ref().len() + 32)
            .sum();
        self.names.capacity()
            + bytes(&self.name_ends)
            + bytes(&self.sizes)
            + bytes(&self.offsets)
            + bytes(&self.object_of)
            + bytes(&self.objects)
            + paths
            + self.media_of.as_ref().map_or(0, bytes)
            + self.modes.as_ref().map_or(0, bytes)
            + self.mtimes.as_ref().map_or(0, bytes)
    }

    /// Gives back the room its columns grew into.
    fn shrink_to_fit(&mut self) {
        self.names.shrink_to_fit();
        self.name_ends.shrink_to_fit();
        self.sizes.shrink_to_fit();
        self.offsets.shrink_to_fit();
        self.object_of.shrink_to_fit();
        self.objects.shrink_to_fit();
        if let Some(column) = &mut self.media_of {
            column.shrink_to_fit();
        }
        if let Some(column) = &mut self.modes {
            column.shrink_to_fit();
        }
        if let Some(column) = &mut self.mtimes {
            column.shrink_to_fit();
        }
    }

    pub fn len(&self) -> usize {
        self.sizes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sizes.is_empty()
    }

    /// Row `row`; panics if there is none.
    pub fn get(&self, row: usize) -> ItemRef<'_> {
        assert!(row < self.len(), "row {row} of {}", self.len());
        ItemRef { table: self, row }
    }

    pub fn iter(&self) -> impl ExactSizeIterator<Item = ItemRef<'_>> + '_ {
        (0..self.len()).map(|row| ItemRef { table: self, row })
    }

    /// The ItemManifests chunked rows point at, each with the size its rows
    /// declare (a manifest whose chunks add up to another size is damaged).
    pub(crate) fn chunked(&self) -> Vec<(ObjectId, u64)> {
        let mut wanted: Vec<(ObjectId, u64)> = self
            .iter()
            .filter_map(|it| match it.object().kind {
                ObjectKind::Chunked(_) => Some((it.object().id, it.size())),
                _ => None,
            })
            .collect();
        wanted.sort_unstable();
        wanted.dedup();
        wanted
    }

    /// The chunks of the ItemManifest `id`.
    pub(crate) fn set_chunks(&mut self, id: &ObjectId, chunks: Arc<[ChunkRef]>) {
        for o in self.objects.iter_mut().filter(|o| o.id == *id) {
            if matches!(o.kind, ObjectKind::Chunked(_)) {
                o.kind = ObjectKind::Chunked(chunks.clone());
            }
        }
    }

    /// Keeps the rows whose names `keep` accepts.
    pub fn retain(&mut self, mut keep: impl FnMut(&str) -> bool) {
        let kept: Vec<bool> = self.iter().map(|it| keep(it.name())).collect();
        if kept.iter().all(|&k| k) {
            return;
        }
        self.retain_rows(&kept);
    }

    /// Keeps the rows `kept` marks, in order.
    fn retain_rows(&mut self, kept: &[bool]) {
        fn filter<T: Copy>(v: &mut Vec<T>, kept: &[bool]) {
            let mut i = 0;
            v.retain(|_| {
                i += 1;
                kept[i - 1]
            });
            v.shrink_to_fit();
        }
        let mut names = String::new();
        let mut ends = Vec::new();
        for it in self.iter().filter(|it| kept[it.row]) {
            names.push_str(it.name());
            ends.push(names.len() as u64);
        }
        names.shrink_to_fit();
        (self.names, self.name_ends) = (names, ends);
        filter(&mut self.sizes, kept);
        filter(&mut self.offsets, kept);
        filter(&mut self.object_of, kept);
        if let Some(column) = &mut self.media_of {
            filter(column, kept);
        }
        if let Some(column) = &mut self.modes {
            filter(column, kept);
        }
        if let Some(column) = &mut self.mtimes {
            filter(column, kept);
        }
    }
}

/// Tables of hand-made items for tests, here and in the crates built on
/// this one (feature `testing`): objects are found by a linear search, so
/// a few items only.
#[cfg(any(test, feature = "testing"))]
impl FromIterator<Item> for ItemTable {
    fn from_iter<I: IntoIterator<Item = Item>>(items: I) -> Self {
        let mut t = ItemTable::default();
        let (mut modes, mut mtimes, mut media) = (Vec::new(), Vec::new(), Vec::new());
        for item in items {
            t.names.push_str(&item.name);
            t.name_ends.push(t.names.len() as u64);
            t.sizes.push(item.size);
            let (path, kind, offset) = match item.source {
                ItemSource::Whole { object } => (object, ObjectKind::Whole, 0),
                ItemSource::Packed {
                    pack,
                    offset,
                    pack_len,
                } => (pack, ObjectKind::Packed { len: pack_len }, offset),
                // Read through its chunks: the manifest's path is not used.
                ItemSource::Chunked { chunks } => {
                    (Arc::new(Path::default()), ObjectKind::Chunked(chunks), 0)
                }
            };
            t.offsets
                .push(u32::try_from(offset).expect("pack offsets fit u32"));
            let o = match t
                .objects
                .iter()
                .position(|o| o.path == path && o.kind.same(&kind))
            {
                Some(o) => o,
                None => {
                    t.objects.push(Object {
                        id: ObjectId::of(AsRef::<str>::as_ref(&*path).as_bytes()),
                        path,
                        kind,
                    });
                    t.objects.len() - 1
                }
            };
            t.object_of.push(o as u32);
            let k = match t.media_types.iter().position(|m| *m == item.media_type) {
                Some(k) => k,
                None => {
                    t.media_types.push(item.media_type.clone());
                    t.media_types.len() - 1
                }
            };
            media.push(k as u32);
            modes.push(item.attrs.mode.unwrap_or(NO_MODE));
            mtimes.push(item.attrs.mtime_ns.unwrap_or(NO_MTIME));
        }
        t.media_of = (t.media_types.len() > 1).then_some(media);
        t.modes = modes.iter().any(|&m| m != NO_MODE).then_some(modes);
        t.mtimes = mtimes.iter().any(|&m| m != NO_MTIME).then_some(mtimes);
        t
    }
}

impl<'a> ItemRef<'a> {
    /// Path below the modality directory.
    pub fn name(self) -> &'a str {
        let t = self.table;
        let start = match self.row {
            0 => 0,
            row => t.name_ends[row - 1],
        };
        &t.names[start as usize..t.name_ends[self.row] as usize]
    }

    pub fn size(self) -> u64 {
        self.table.sizes[self.row]
    }

    pub fn media_type(self) -> &'a Arc<str> {
        let t = self.table;
        let k = t.media_of.as_ref().map_or(0, |m| m[self.row]);
        &t.media_types[k as usize]
    }

    /// Mode and mtime its writer recorded.
    pub fn attrs(self) -> Attrs {
        let t = self.table;
        Attrs {
            mode: t
                .modes
                .as_ref()
                .map(|m| m[self.row])
                .filter(|&m| m != NO_MODE),
            mtime_ns: t
                .mtimes
                .as_ref()
                .map(|m| m[self.row])
                .filter(|&m| m != NO_MTIME),
        }
    }

    /// Where its bytes are.
    pub fn source(self) -> ItemSource {
        let o = self.object();
        match &o.kind {
            ObjectKind::Whole => ItemSource::Whole {
                object: o.path.clone(),
            },
            ObjectKind::Packed { len } => ItemSource::Packed {
                pack: o.path.clone(),
                offset: u64::from(self.table.offsets[self.row]),
                pack_len: *len,
            },
            ObjectKind::Chunked(chunks) => ItemSource::Chunked {
                chunks: chunks.clone(),
            },
        }
    }

    /// What reading it needs.
    pub fn data(self) -> ItemData {
        ItemData {
            size: self.size(),
            source: self.source(),
        }
    }

    /// The item as an owned value, for keeping beyond the table.
    pub fn to_item(self) -> Item {
        Item {
            name: self.name().to_string(),
            size: self.size(),
            media_type: self.media_type().clone(),
            source: self.source(),
            attrs: self.attrs(),
        }
    }

    /// The address of the object holding its bytes (its pack's, or its
    /// ItemManifest's).
    pub(crate) fn object_id(self) -> ObjectId {
        self.object().id
    }

    fn object(self) -> &'a Object {
        &self.table.objects[self.table.object_of[self.row] as usize]
    }
}

impl std::fmt::Debug for ItemRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ItemRef")
            .field("name", &self.name())
            .field("size", &self.size())
            .finish()
    }
}

/// A table being filled from a Track's columns.
#[derive(Default)]
struct Builder {
    table: ItemTable,
    /// Objects by address and placement, and the last one found: entries
    /// of one pack come together, so most lookups are that one.
    object_index: foldhash::HashMap<(ObjectId, u8), u32>,
    last_object: Option<((ObjectId, u8), u32)>,
    /// Rows with a null name: entries kept only for their pack's sake.
    retired: Vec<usize>,
    media: Vec<u32>,
    modes: Vec<u16>,
    mtimes: Vec<i64>,
    any_mode: bool,
    any_mtime: bool,
}

impl Columns for Builder {
    fn entry(&mut self, e: FragmentEntry) {
        let t = &mut self.table;
        t.sizes.push(e.byte_size);
        let (kind, offset) = match e.placement {
            Placement::Whole => (0, 0),
            Placement::Packed { offset } => (1, offset),
            Placement::Chunked => (2, 0),
        };
        // The reader refused offsets beyond u32.
        t.offsets.push(offset as u32);
        let key = (e.address, kind);
        let o = match self.last_object {
            Some((last, o)) if last == key => o,
            _ => {
                let next = t.objects.len() as u32;
                let o = *self.object_index.entry(key).or_insert(next);
                if o == next {
                    t.objects.push(Object {
                        id: e.address,
                        path: Arc::new(Path::default()),
                        kind: match e.placement {
                            Placement::Whole => ObjectKind::Whole,
                            Placement::Packed { .. } => ObjectKind::Packed { len: 0 },
                            Placement::Chunked => ObjectKind::Chunked(Arc::from([])),
                        },
                    });
                }
                self.last_object = Some((key, o));
                o
            }
        };
        t.object_of.push(o);
    }

    fn name(&mut self, name: Option<&str>) {
        let t = &mut self.table;
        match name {
            Some(name) => t.names.push_str(name),
            None => self.retired.push(t.name_ends.len()),
        }
        t.name_ends.push(t.names.len() as u64);
    }

    fn media_type(&mut self, index: u32) {
        self.media.push(index);
    }

    fn mode(&mut self, mode: Option<u16>) {
        self.any_mode |= mode.is_some();
        self.modes.push(mode.unwrap_or(NO_MODE));
    }

    fn mtime(&mut self, mtime_ns: Option<i64>) {
        self.any_mtime |= mtime_ns.is_some();
        self.mtimes.push(mtime_ns.unwrap_or(NO_MTIME));
    }
}

impl Builder {
    /// The finished table of `len` rows: names synthesized when the Track
    /// has none, packs checked and their lengths set, retired rows dropped.
    fn finish(
        self,
        len: usize,
        has_names: bool,
        media_table: Option<Vec<Arc<str>>>,
        what: &str,
        data_path: impl Fn(&ObjectId) -> Path,
    ) -> Result<ItemTable, FormatError> {
        self.finish_with(len, has_names, media_table, what, data_path, Lengths::Tiled)
    }

    /// [`Builder::finish`], the packs' lengths found as `lengths` says.
    fn finish_with(
        mut self,
        len: usize,
        has_names: bool,
        media_table: Option<Vec<Arc<str>>>,
        what: &str,
        data_path: impl Fn(&ObjectId) -> Path,
        lengths: Lengths<'_>,
    ) -> Result<ItemTable, FormatError> {
        if !has_names {
            // A Track from a writer that records no names (module docs of
            // the format's Track).
            for i in 0..len {
                self.name(Some(&format!("item-{i:08}")));
            }
        }
        let mut t = self.table;
        match media_table {
            Some(table) => {
                t.media_of = (table.len() > 1).then_some(self.media);
                t.media_types = table;
            }
            None => t.media_types = vec![DEFAULT_MEDIA_TYPE.into()],
        }
        t.modes = self.any_mode.then_some(self.modes);
        t.mtimes = self.any_mtime.then_some(self.mtimes);
        match lengths {
            Lengths::Tiled => check_packs(&mut t, &self.retired, what)?,
            Lengths::Given(lengths) => set_pack_lengths(&mut t, lengths, what)?,
            Lengths::Later => {}
        }
        for o in &mut t.objects {
            o.path = Arc::new(data_path(&o.id));
        }
        if !self.retired.is_empty() {
            let mut kept = vec![true; len];
            self.retired.iter().for_each(|&r| kept[r] = false);
            t.retain_rows(&kept);
        }
        t.shrink_to_fit();
        Ok(t)
    }
}

/// Where a table's packs' lengths come from.
enum Lengths<'a> {
    /// The rows are all of a Track's entries: each pack's entries tile
    /// it, which is checked, and give its length.
    Tiled,
    /// The rows are some of a Track's: the lengths recorded for it.
    Given(&'a PackLengths),
    /// Set later ([`ItemTable::set_pack_lengths`]).
    Later,
}

/// Sets each pack's length to the one `lengths` gives.
fn set_pack_lengths(
    t: &mut ItemTable,
    lengths: &PackLengths,
    what: &str,
) -> Result<(), FormatError> {
    for o in &mut t.objects {
        if let ObjectKind::Packed { len } = &mut o.kind {
            *len = *lengths.get(&o.id).ok_or_else(|| FormatError::Pack {
                what: what.to_string(),
                pack: o.id.to_hex(),
                detail: "no length is recorded for it".into(),
            })?;
        }
    }
    Ok(())
}

/// Checks that the entries of each pack with a live row cover it from 0
/// with no gap or overlap (live and retired alike, as [`Track::new`]
/// does), and records each pack's length. Entries usually come in pack
/// order, so each pack is checked as it goes; only a pack whose entries
/// are out of order has its ranges collected and sorted.
fn check_packs(t: &mut ItemTable, retired: &[usize], what: &str) -> Result<(), FormatError> {
    #[derive(Clone, Copy, Default)]
    struct Pack {
        next: u64,
        live: bool,
        scattered: bool,
    }
    let mut packs = vec![Pack::default(); t.objects.len()];
    let mut retired_rows = retired.iter().peekable();
    for row in 0..t.sizes.len() {
        let o = t.object_of[row] as usize;
        let is_retired = retired_rows.next_if_eq(&&row).is_some();
        if !matches!(t.objects[o].kind, ObjectKind::Packed { .. }) {
            continue;
        }
        let p = &mut packs[o];
        p.live |= !is_retired;
        let offset = u64::from(t.offsets[row]);
        if !p.scattered && offset == p.next {
            p.next += t.sizes[row];
        } else {
            p.scattered = true;
        }
    }
    let mut ranges: foldhash::HashMap<u32, Vec<(u64, u64)>> = Default::default();
    for row in 0..t.sizes.len() {
        let o = t.object_of[row];
        if packs[o as usize].scattered && packs[o as usize].live {
            let range = (u64::from(t.offsets[row]), t.sizes[row]);
            ranges.entry(o).or_default().push(range);
        }
    }
    for (o, mut ranges) in ranges {
        packs[o as usize].next = check_pack(&mut ranges).map_err(|detail| FormatError::Pack {
            what: what.to_string(),
            pack: t.objects[o as usize].id.to_hex(),
            detail,
        })?;
    }
    for (o, p) in t.objects.iter_mut().zip(&packs) {
        if let ObjectKind::Packed { len } = &mut o.kind {
            *len = p.next;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::testing::item;
    use packfs_format::Track;

    fn path(id: &ObjectId) -> Path {
        Path::from(format!("data/{}", id.to_hex()))
    }

    /// The table decoded from a Track's bytes holds what `Track::decode`
    /// holds, row for row, retired entries dropped, pack lengths included.
    #[test]
    fn decoded_table_agrees_with_the_track() {
        let mut items = Vec::new();
        for i in 0..5000u64 {
            let mut it = item(&format!("d{}/i{i}", i % 7), b"p", i * 3, 3);
            if i % 2 == 0 {
                it.media_type = "text/plain".into();
            }
            if i % 5 == 0 {
                it.attrs.mode = Some(0o640);
            }
            if i % 3 == 0 {
                it.attrs.mtime_ns = Some(-(i as i64));
            }
            items.push(it);
        }
        let mut whole = item("w", b"whole", 0, 9);
        whole.entry.placement = Placement::Whole;
        items.push(whole);
        // Out of pack order: checked by sorting.
        items.push(item("q1", b"q", 4, 2));
        items.push(item("q0", b"q", 0, 4));
        let t = Track::new(items, vec![], "t").unwrap();
        let (kept, retired) = t.remove_items(|i| i.name.ends_with('1'));
        let t = Track::new(kept, retired, "t").unwrap();
        let (table, _) = ItemTable::decode(&t.encode(), "t", path).unwrap();
        assert_eq!(table.len(), t.items().len());
        for (row, it) in table.iter().zip(t.items()) {
            assert_eq!(row.name(), it.name);
            assert_eq!(row.size(), it.entry.byte_size);
            assert_eq!(row.media_type(), &it.media_type);
            assert_eq!(row.attrs(), it.attrs);
            match (row.source(), it.entry.placement) {
                (
                    ItemSource::Packed {
                        pack,
                        offset,
                        pack_len,
                    },
                    Placement::Packed { offset: o },
                ) => {
                    assert_eq!(*pack, path(&it.entry.address));
                    assert_eq!(offset, o);
                    assert_eq!(Some(pack_len), t.pack_len(&it.entry.address));
                }
                (ItemSource::Whole { object }, Placement::Whole) => {
                    assert_eq!(*object, path(&it.entry.address))
                }
                other => panic!("{other:?}"),
            }
        }
        let (_, lengths, _) = t.clone().into_parts();
        let of_track = ItemTable::of_items(t.items(), &lengths, "t", path).unwrap();
        assert!(table
            .iter()
            .zip(of_track.iter())
            .all(|(a, b)| a.to_item().name == b.name()
                && a.attrs() == b.attrs()
                && a.media_type() == b.media_type()));
    }

    #[test]
    fn gaps_and_overlaps_name_the_pack() {
        let bytes = |items: Vec<packfs_format::TrackItem>| {
            // Encoded by hand: `Track::new` would refuse these.
            use ciborium::value::Value;
            let entries = items.iter().map(|i| i.entry.to_cbor()).collect();
            let names = items.iter().map(|i| Value::Text(i.name.clone())).collect();
            let mut out = Vec::new();
            let track = Value::Map(vec![
                (Value::Text("object_index".into()), Value::Array(entries)),
                (Value::Text("names".into()), Value::Array(names)),
            ]);
            ciborium::into_writer(&track, &mut out).unwrap();
            out
        };
        let e = ItemTable::decode(
            &bytes(vec![item("a", b"p", 0, 5), item("b", b"p", 6, 1)]),
            "track T",
            path,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("track T")
                && e.contains("gap: bytes 5..6")
                && e.contains(&ObjectId::of(b"p").to_hex()),
            "{e}"
        );
        let e = ItemTable::decode(
            &bytes(vec![item("a", b"p", 0, 5), item("b", b"p", 3, 4)]),
            "t",
            path,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("overlap"), "{e}");
        let (t, _) = ItemTable::decode(
            &bytes(vec![item("a", b"p", 0, 5), item("copy", b"p", 0, 5)]),
            "t",
            path,
        )
        .unwrap();
        assert_eq!(t.len(), 2, "equal ranges are the same bytes");
    }

    #[test]
    fn retain_keeps_rows_in_order_with_their_columns() {
        let items: Vec<Item> = (0..10u64)
            .map(|i| Item {
                name: format!("n{i}"),
                size: i,
                media_type: if i % 2 == 0 { "a/b" } else { "c/d" }.into(),
                source: ItemSource::Whole {
                    object: Arc::new(Path::from(format!("o{i}"))),
                },
                attrs: Attrs {
                    mode: (i == 3).then_some(0o600),
                    mtime_ns: None,
                },
            })
            .collect();
        let mut t: ItemTable = items.into_iter().collect();
        t.retain(|n| n != "n0" && n != "n5");
        let names: Vec<&str> = t.iter().map(|i| i.name()).collect();
        assert_eq!(names, ["n1", "n2", "n3", "n4", "n6", "n7", "n8", "n9"]);
        let three = t.get(2);
        assert_eq!(
            (three.size(), three.attrs().mode, &**three.media_type()),
            (3, Some(0o600), "c/d")
        );
        let ItemSource::Whole { object } = t.get(4).source() else {
            panic!()
        };
        assert_eq!(object.as_ref(), &Path::from("o6"));
    }
}
