//! Paged Tracks: a Track's entries as immutable, content-addressed pages
//! under a small root, so that a reader fetches only the pages it needs and
//! a writer stores only the pages it changed.
//!
//! - The **root** is the Track object (`_packfs/tracks/<hash>`): a CBOR
//!   map `{"kind": "fragment", "pages": [[first, id, items, bytes]…],
//!   "pack_pages": [[first, id, packs]…], "items": n, "bytes": n}`; past
//!   512 name pages, `"index": [[first, id, pages, items, bytes]…]`
//!   instead of `pages`, naming **index pages** (`{"kind":
//!   "fragment-index", "pages": […]}`) that list the name pages in runs.
//! - A **name page** (`_packfs/pages/<hash>`) is encoded exactly as a
//!   single-object Track of its rows (so every Track reader reads it): the
//!   items and directories whose names fall in its range, in
//!   [`name_order`], and no retired entry. A paged Track lists every
//!   directory, the modality directory (`""`) and those only implied by
//!   an item's name included, so a directory's entries are one run of rows.
//! - A **pack page** (`_packfs/pages/<hash>`, `{"kind": "fragment-packs",
//!   "packs": [[address, length, live, [retired entry…]]…]}`) holds, by
//!   address, one record per pack the Track's items name: the length the
//!   pack must have, how many live entries name it, and its retired
//!   entries, which keep the pack invariants whole.
//!
//! Pages are cut where a name's hash says (content-defined), so a change
//! re-encodes its own page and leaves the others, and their ids, as they
//! were: a commit stores what it changed and the path to the root.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::Arc;

use ciborium::value::Value;

use super::{RawColumns, Track, TrackDir, TrackItem, DEFAULT_MEDIA_TYPE, TRACK_KIND_FRAGMENT};
use crate::cbor::{self, MapReader, Stream};
use crate::{Attrs, Columns, FormatError, FragmentEntry, ObjectId, PackLengths, Placement};

/// The `kind` of a pack page.
const PACK_PAGE_KIND: &str = "fragment-packs";
/// The `kind` of an index page.
const INDEX_PAGE_KIND: &str = "fragment-index";

/// How a writer cuts a paged Track into pages. Readers accept any cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageShape {
    /// Rows (items and directories) a name page holds on average.
    rows: u64,
    /// Most rows a name page holds.
    max_rows: u64,
    /// Estimated encoded bytes at which a name page ends.
    max_bytes: u64,
    /// Records a pack page holds on average.
    packs: u64,
    /// Name pages an index page lists on average; a root lists up to
    /// twice as many itself.
    index: u64,
}

impl PageShape {
    /// About 4,096 rows (~300 KB for short names) a name page, at most
    /// 1 MiB; 1,024 packs a pack page; a root lists up to 512 name pages
    /// itself (~2.5M items), and beyond that index pages of ~256 each
    /// (~20 KB): a commit rewrites one of them and a root of a few KB.
    pub const DEFAULT: PageShape = PageShape {
        rows: 4096,
        max_rows: 16384,
        max_bytes: 1 << 20,
        packs: 1024,
        index: 256,
    };

    /// Pages of about `rows` rows and pack pages of about `rows` packs:
    /// small shapes cut small Tracks into many pages (tests).
    pub fn with_rows(rows: u64) -> PageShape {
        let rows = rows.max(1);
        PageShape {
            rows,
            max_rows: rows * 4,
            max_bytes: PageShape::DEFAULT.max_bytes,
            packs: rows,
            index: PageShape::DEFAULT.index,
        }
    }

    /// The same shape, listing name pages through index pages of about
    /// `pages` each once there are more than twice as many.
    pub fn with_index_pages(self, pages: u64) -> PageShape {
        PageShape {
            index: pages.max(1),
            ..self
        }
    }
}

impl Default for PageShape {
    fn default() -> Self {
        PageShape::DEFAULT
    }
}

/// The order of names in a paged Track: by parent directory, then by the
/// last segment, bytewise. The entries of one directory are then one run,
/// before those of its subdirectories; `""` (the modality directory)
/// comes first.
pub fn name_order(a: &str, b: &str) -> Ordering {
    split(a).cmp(&split(b))
}

/// A name as (parent directory, last segment).
fn split(name: &str) -> (&str, &str) {
    name.rsplit_once('/').unwrap_or(("", name))
}

/// A name page as the root lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageRef {
    /// The first name on the page (an item's or a directory's): the page
    /// holds the names from it up to the next page's first.
    pub first: String,
    pub id: ObjectId,
    /// Items on the page.
    pub items: u64,
    /// Bytes of those items.
    pub bytes: u64,
}

/// An index page as the root lists it: a run of the name pages' refs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexRef {
    /// The first name of its first name page.
    pub first: String,
    pub id: ObjectId,
    /// Name pages it lists.
    pub pages: u64,
    /// Items on those pages.
    pub items: u64,
    /// Bytes of those items.
    pub bytes: u64,
}

/// A pack page as the root lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PackPageRef {
    /// The first pack address on the page.
    pub first: ObjectId,
    pub id: ObjectId,
    /// Packs recorded on the page.
    pub packs: u64,
}

/// The root of a paged Track.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct TrackRoot {
    /// Name pages, in [`name_order`] of their first names: listed in the
    /// root, or in its index pages once [`TrackRoot::fill_index`] read
    /// them.
    pub pages: Vec<PageRef>,
    /// Index pages, when the root lists its name pages through them.
    pub index: Vec<IndexRef>,
    /// Pack pages, by first address.
    pub pack_pages: Vec<PackPageRef>,
    /// Items of the Track.
    pub items: u64,
    /// Bytes of those items.
    pub bytes: u64,
}

/// One pack of a paged Track: what a pack page records of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PackRecord {
    pub address: ObjectId,
    /// The length the pack must have: its entries tile it.
    pub length: u64,
    /// Live entries (named items) that point into it.
    pub live: u64,
    /// Entries of replaced or removed items still in it.
    pub retired: Vec<FragmentEntry>,
}

/// A Track encoded in the paged form.
pub struct PagedTrack {
    /// The root: the Track object.
    pub root: Vec<u8>,
    pub id: ObjectId,
    /// Every page the root names, with its bytes: name pages, then pack pages.
    pub pages: Vec<(ObjectId, Vec<u8>)>,
}

impl TrackRoot {
    /// Whether the Track object `bytes` is a paged root (it has `pages` or
    /// `index`) rather than a single-object Track (it has
    /// `object_index`). Reads keys only as far as the first of them,
    /// skipping values.
    pub fn is_paged(bytes: &[u8]) -> bool {
        let mut s = Stream::new(bytes);
        let Ok(keys) = s.map() else { return false };
        let mut k = 0u64;
        while keys.is_none_or(|n| k < n) {
            k += 1;
            if keys.is_none() && s.at_end().unwrap_or(true) {
                return false;
            }
            match s.next_is_text() {
                Ok(true) => match s.text().as_deref() {
                    Ok("pages" | "index") => return true,
                    Ok("object_index") => return false,
                    Ok(_) => {}
                    Err(_) => return false,
                },
                Ok(false) => {
                    if s.skip().is_err() {
                        return false;
                    }
                }
                Err(_) => return false,
            }
            if s.skip().is_err() {
                return false;
            }
        }
        false
    }

    /// Decodes and checks a root: pages in strictly increasing order of
    /// their first names (pack pages of their first addresses), and the
    /// totals the sums of the pages'.
    pub fn decode(bytes: &[u8], what: &str) -> Result<TrackRoot, FormatError> {
        let value = cbor::decode(bytes, what)?;
        let map = MapReader::new(&value, what)?;
        if let Some(kind) = map.get("kind") {
            let kind = cbor::as_text(kind, &format!("{what} kind"))?;
            if kind != TRACK_KIND_FRAGMENT {
                return Err(FormatError::shape(
                    what,
                    format!("track kind {kind:?} is not supported (only \"fragment\")"),
                ));
            }
        }
        let mut root = TrackRoot::default();
        match (map.get("pages"), map.get("index")) {
            (Some(pages), None) => root.pages = read_page_refs(pages, what, "pages")?,
            (None, Some(index)) => root.index = read_index_refs(index, what)?,
            (None, None) => return Err(FormatError::shape(what, "missing field \"pages\"")),
            (Some(_), Some(_)) => {
                return Err(FormatError::shape(
                    what,
                    "a root lists its pages in exactly one of \"pages\" and \"index\"",
                ))
            }
        }
        let pack_pages = match map.get("pack_pages") {
            Some(v) => cbor::as_array(v, &format!("{what} pack_pages"))?,
            None => &[],
        };
        for (i, page) in pack_pages.iter().enumerate() {
            let at = format!("{what} pack_pages[{i}]");
            let [first, id, packs] = fields(page, &at, "[first, id, packs]")?;
            let page = PackPageRef {
                first: cbor::as_object_id(first, &at)?,
                id: cbor::as_object_id(id, &at)?,
                packs: cbor::as_u64(packs, &at)?,
            };
            if root
                .pack_pages
                .last()
                .is_some_and(|l| l.first >= page.first)
            {
                return Err(FormatError::shape(
                    at,
                    "first address does not come after the previous page's",
                ));
            }
            root.pack_pages.push(page);
        }
        root.items = cbor::as_u64(map.required("items")?, &format!("{what} items"))?;
        root.bytes = cbor::as_u64(map.required("bytes")?, &format!("{what} bytes"))?;
        let counts = match root.index.is_empty() {
            true => sums(root.pages.iter().map(|p| (p.items, p.bytes))),
            false => sums(root.index.iter().map(|p| (p.items, p.bytes))),
        };
        check_counts("the root says", (root.items, root.bytes), counts, what)?;
        Ok(root)
    }

    /// Whether the root lists its name pages through index pages not read
    /// yet: [`TrackRoot::fill_index`] needs their bytes.
    pub fn needs_index(&self) -> bool {
        !self.index.is_empty() && self.pages.is_empty()
    }

    /// Reads the index pages (each already checked against its id), in
    /// the root's order, into [`TrackRoot::pages`]; each must list as many
    /// pages, items and bytes as the root says, from the first name it
    /// gives, in order across pages. `page_what` names a page in errors.
    pub fn fill_index<'b>(
        &mut self,
        index_pages: impl IntoIterator<Item = &'b [u8]>,
        page_what: impl Fn(&ObjectId) -> String,
    ) -> Result<(), FormatError> {
        let mut pages: Vec<PageRef> = Vec::new();
        let mut read = 0;
        for (bytes, index) in index_pages.into_iter().zip(&self.index) {
            read += 1;
            let what = page_what(&index.id);
            let value = cbor::decode(bytes, &what)?;
            let map = MapReader::new(&value, &what)?;
            let kind = cbor::as_text(map.required("kind")?, &format!("{what} kind"))?;
            if kind != INDEX_PAGE_KIND {
                return Err(FormatError::shape(
                    &what,
                    format!("kind {kind:?} is not an index page ({INDEX_PAGE_KIND:?})"),
                ));
            }
            let refs = read_page_refs(map.required("pages")?, &what, "pages")?;
            let counts = sums(refs.iter().map(|p| (p.items, p.bytes)));
            let expected = (index.items, index.bytes);
            check_counts("the root says the page lists", expected, counts, &what)?;
            let first = refs.first().map(|p| p.first.as_str());
            if refs.len() as u64 != index.pages || first != Some(index.first.as_str()) {
                return Err(FormatError::shape(
                    &what,
                    format!(
                        "the root says it lists {} pages from {:?}, but it lists {} from {first:?}",
                        index.pages,
                        index.first,
                        refs.len()
                    ),
                ));
            }
            if let (Some(last), Some(next)) = (pages.last(), refs.first()) {
                if name_order(&last.first, &next.first) != Ordering::Less {
                    return Err(FormatError::shape(
                        &what,
                        format!("{:?} does not come after the previous page's", next.first),
                    ));
                }
            }
            pages.extend(refs);
        }
        if read != self.index.len() {
            return Err(FormatError::shape(
                "a paged Track's root",
                "not every index page of the root was read",
            ));
        }
        self.pages = pages;
        Ok(())
    }

    /// The root as CBOR.
    pub fn encode(&self) -> Vec<u8> {
        let pack_pages = self.pack_pages.iter().map(|p| {
            Value::Array(vec![
                cbor::id(&p.first),
                cbor::id(&p.id),
                cbor::uint(p.packs),
            ])
        });
        let listed = match self.index.is_empty() {
            true => (cbor::text("pages"), page_refs_value(&self.pages)),
            false => (cbor::text("index"), index_value(&self.index)),
        };
        cbor::encode(&Value::Map(vec![
            (cbor::text("kind"), cbor::text(TRACK_KIND_FRAGMENT)),
            listed,
            (cbor::text("pack_pages"), Value::Array(pack_pages.collect())),
            (cbor::text("items"), cbor::uint(self.items)),
            (cbor::text("bytes"), cbor::uint(self.bytes)),
        ]))
    }

    /// Every page the root names: name pages, pack pages, then index
    /// pages.
    pub fn page_ids(&self) -> impl Iterator<Item = ObjectId> + '_ {
        let names = self.pages.iter().map(|p| p.id);
        let packs = names.chain(self.pack_pages.iter().map(|p| p.id));
        packs.chain(self.index.iter().map(|p| p.id))
    }

    /// The pack page that records pack `address` if the Track has it.
    pub fn pack_page_of(&self, address: &ObjectId) -> Option<usize> {
        let after = self.pack_pages.partition_point(|p| p.first <= *address);
        after.checked_sub(1)
    }

    /// The name page that holds `name` if the Track has it: the last page
    /// whose first name does not come after it.
    pub fn page_of(&self, name: &str) -> Option<usize> {
        let after = self
            .pages
            .partition_point(|p| name_order(&p.first, name) != Ordering::Greater);
        after.checked_sub(1)
    }
}

/// A name page decoded on its own, for a reader that needs only some
/// pages (checks that span pages need them all: [`PagedReader`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamePage {
    /// Its items, in name order.
    pub items: Vec<TrackItem>,
    /// Its directories, in name order, as listed (none dropped).
    pub dirs: Vec<TrackDir>,
}

impl TrackRoot {
    /// Name page `index` (its bytes already checked against its id),
    /// decoded and checked on its own; `what` names it in errors.
    pub fn name_page(
        &self,
        index: usize,
        bytes: &[u8],
        what: &str,
    ) -> Result<NamePage, FormatError> {
        if index >= self.pages.len() {
            return Err(FormatError::shape(
                what,
                format!(
                    "the root has {} name pages, not {}",
                    self.pages.len(),
                    index + 1
                ),
            ));
        }
        let (raw, layout) = read_name_page(self, index, bytes, what)?;
        let default_media: Arc<str> = DEFAULT_MEDIA_TYPE.into();
        let RawColumns {
            index: entries,
            names,
            media,
            modes,
            mtimes,
        } = raw;
        let items = entries
            .into_iter()
            .zip(names)
            .enumerate()
            .map(|(row, (entry, name))| TrackItem {
                name: name.expect("a name page names every item"),
                media_type: match &layout.media_table {
                    Some(table) => table[media[row] as usize].clone(),
                    None => default_media.clone(),
                },
                entry,
                attrs: Attrs {
                    mode: modes.get(row).copied().flatten(),
                    mtime_ns: mtimes.get(row).copied().flatten(),
                },
            })
            .collect();
        Ok(NamePage {
            items,
            dirs: layout.dirs,
        })
    }
}

/// The page refs `[first, id, items, bytes]` of `value` (the `field` of
/// `what`), in strictly increasing name order.
fn read_page_refs(value: &Value, what: &str, field: &str) -> Result<Vec<PageRef>, FormatError> {
    let mut refs: Vec<PageRef> = Vec::new();
    for (i, page) in cbor::as_array(value, &format!("{what} {field}"))?
        .iter()
        .enumerate()
    {
        let at = format!("{what} {field}[{i}]");
        let [first, id, items, bytes] = fields(page, &at, "[first, id, items, bytes]")?;
        let page = PageRef {
            first: cbor::as_text(first, &at)?.to_string(),
            id: cbor::as_object_id(id, &at)?,
            items: cbor::as_u64(items, &at)?,
            bytes: cbor::as_u64(bytes, &at)?,
        };
        check_first(&page.first, refs.last().map(|l| l.first.as_str()), &at)?;
        refs.push(page);
    }
    Ok(refs)
}

/// The index refs `[first, id, pages, items, bytes]` of a root's `index`.
fn read_index_refs(value: &Value, what: &str) -> Result<Vec<IndexRef>, FormatError> {
    let mut refs: Vec<IndexRef> = Vec::new();
    for (i, page) in cbor::as_array(value, &format!("{what} index"))?
        .iter()
        .enumerate()
    {
        let at = format!("{what} index[{i}]");
        let shape = "[first, id, pages, items, bytes]";
        let [first, id, pages, items, bytes] = fields(page, &at, shape)?;
        let page = IndexRef {
            first: cbor::as_text(first, &at)?.to_string(),
            id: cbor::as_object_id(id, &at)?,
            pages: cbor::as_u64(pages, &at)?,
            items: cbor::as_u64(items, &at)?,
            bytes: cbor::as_u64(bytes, &at)?,
        };
        check_first(&page.first, refs.last().map(|l| l.first.as_str()), &at)?;
        refs.push(page);
    }
    Ok(refs)
}

/// A page's first name: valid, and after the previous page's.
fn check_first(first: &str, previous: Option<&str>, at: &str) -> Result<(), FormatError> {
    if !first.is_empty() {
        crate::validate_item_name(first, at)?;
    }
    match previous {
        Some(last) if name_order(last, first) != Ordering::Less => Err(FormatError::shape(
            at,
            format!("first name {first:?} does not come after the previous page's {last:?}"),
        )),
        _ => Ok(()),
    }
}

/// The sums of (items, bytes) pairs; `None` past 2^64.
fn sums(counts: impl Iterator<Item = (u64, u64)>) -> (Option<u64>, Option<u64>) {
    counts.fold((Some(0), Some(0)), |(i, b), (items, bytes)| {
        (
            i.and_then(|i| i.checked_add(items)),
            b.and_then(|b| b.checked_add(bytes)),
        )
    })
}

/// Fails unless the (items, bytes) `listed` add up to the `said` ones.
fn check_counts(
    said: &str,
    (items, bytes): (u64, u64),
    listed: (Option<u64>, Option<u64>),
    what: &str,
) -> Result<(), FormatError> {
    if listed == (Some(items), Some(bytes)) {
        return Ok(());
    }
    let big = |n: Option<u64>| n.map_or("more than 2^64".into(), |n| n.to_string());
    Err(FormatError::shape(
        what,
        format!(
            "{said} {items} items of {bytes} bytes, but its pages add up to {} items of {} bytes",
            big(listed.0),
            big(listed.1)
        ),
    ))
}

/// The `index` of a root.
fn index_value(index: &[IndexRef]) -> Value {
    let refs = index.iter().map(|p| {
        Value::Array(vec![
            cbor::text(&p.first),
            cbor::id(&p.id),
            cbor::uint(p.pages),
            cbor::uint(p.items),
            cbor::uint(p.bytes),
        ])
    });
    Value::Array(refs.collect())
}

/// The `pages` of a root or an index page.
fn page_refs_value(pages: &[PageRef]) -> Value {
    let refs = pages.iter().map(|p| {
        Value::Array(vec![
            cbor::text(&p.first),
            cbor::id(&p.id),
            cbor::uint(p.items),
            cbor::uint(p.bytes),
        ])
    });
    Value::Array(refs.collect())
}

/// The `N` elements of the array `value`, or an error naming `shape`.
fn fields<'v, const N: usize>(
    value: &'v Value,
    what: &str,
    shape: &str,
) -> Result<[&'v Value; N], FormatError> {
    let elements = cbor::as_array(value, what)?;
    let refs: Vec<&Value> = elements.iter().collect();
    refs.try_into()
        .map_err(|_| FormatError::shape(what, format!("expected {shape}")))
}

/// Decides where pages end: after a row whose key hashes to a multiple of
/// the average, once a quarter of it is reached, or at the maximum.
struct Cutter {
    average: u64,
    max_rows: u64,
    max_bytes: u64,
    rows: u64,
    bytes: u64,
}

impl Cutter {
    fn new(average: u64, max_rows: u64, max_bytes: u64) -> Cutter {
        Cutter {
            average: average.max(1),
            max_rows: max_rows.max(1),
            max_bytes,
            rows: 0,
            bytes: 0,
        }
    }

    /// Whether the page ends after a row of key hash `hash` and about
    /// `bytes` encoded bytes.
    fn ends_after(&mut self, hash: u64, bytes: u64) -> bool {
        self.rows += 1;
        self.bytes += bytes;
        let end = (self.rows >= self.average.div_ceil(4) && hash % self.average == 0)
            || self.rows >= self.max_rows
            || self.bytes >= self.max_bytes;
        if end {
            self.rows = 0;
            self.bytes = 0;
        }
        end
    }
}

/// A stable 64-bit hash of a name (FNV-1a, then a SplitMix64 finish so
/// its low bits are as good as its high ones): page cuts must fall on the
/// same names in every process, so no per-process seed.
fn name_hash(name: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// A row of a name page being cut.
enum Row<'t> {
    Item(&'t TrackItem),
    Dir(TrackDir),
}

impl Row<'_> {
    fn name(&self) -> &str {
        match self {
            Row::Item(i) => &i.name,
            Row::Dir(d) => &d.name,
        }
    }
}

impl Track {
    /// The Track in the paged form, cut as `shape` says.
    pub fn encode_paged(&self, shape: &PageShape) -> PagedTrack {
        let mut pages = Vec::new();
        let mut root = TrackRoot::default();
        let mut cutter = Cutter::new(shape.rows, shape.max_rows, shape.max_bytes);
        let mut page: Vec<Row> = Vec::new();
        let mut rows = self.rows().into_iter().peekable();
        while let Some(row) = rows.next() {
            let bytes = row.name().len() as u64
                + match row {
                    Row::Item(_) => 56,
                    Row::Dir(_) => 16,
                };
            let end = cutter.ends_after(name_hash(row.name()), bytes);
            // A name that is both an item's and a directory's (which the
            // tree refuses, naming it) stays on one page, so the pages
            // still decode and the refusal is the tree's.
            let same_name_next = rows.peek().is_some_and(|next| next.name() == row.name());
            page.push(row);
            if end && !same_name_next {
                push_name_page(std::mem::take(&mut page), &mut root, &mut pages);
            }
        }
        if !page.is_empty() {
            push_name_page(page, &mut root, &mut pages);
        }
        let mut cutter = Cutter::new(shape.packs, shape.packs * 4, shape.max_bytes);
        let mut page: Vec<PackRecord> = Vec::new();
        for record in self.pack_records() {
            let hash = u64::from_le_bytes(record.address.0[..8].try_into().expect("8 bytes"));
            let bytes = 48 + 50 * record.retired.len() as u64;
            let end = cutter.ends_after(hash, bytes);
            page.push(record);
            if end {
                push_pack_page(std::mem::take(&mut page), &mut root, &mut pages);
            }
        }
        if !page.is_empty() {
            push_pack_page(page, &mut root, &mut pages);
        }
        if root.pages.len() as u64 > 2 * shape.index {
            push_index_pages(&mut root, shape, &mut pages);
        }
        let bytes = root.encode();
        PagedTrack {
            id: ObjectId::of(&bytes),
            root: bytes,
            pages,
        }
    }

    /// Items and every directory (recorded, implied by a name, and the
    /// modality directory), in [`name_order`].
    fn rows(&self) -> Vec<Row<'_>> {
        let mut dirs: HashMap<&str, Attrs> = HashMap::new();
        dirs.insert("", Attrs::default());
        // Above items and above recorded directories alike.
        let names = self.items.iter().map(|i| i.name.as_str());
        for mut name in names.chain(self.dirs.iter().map(|d| d.name.as_str())) {
            while let Some((parent, _)) = name.rsplit_once('/') {
                if dirs.insert(parent, Attrs::default()).is_some() {
                    break;
                }
                name = parent;
            }
        }
        let mut rows: Vec<Row> = self.items.iter().map(Row::Item).collect();
        for dir in &self.dirs {
            dirs.remove(dir.name.as_str());
            rows.push(Row::Dir(dir.clone()));
        }
        rows.extend(dirs.into_iter().map(|(name, attrs)| {
            Row::Dir(TrackDir {
                name: name.to_string(),
                attrs,
            })
        }));
        // Names are unique among items and among directories, and a name is
        // not both (the tree refuses that): the order is total.
        rows.sort_unstable_by(|a, b| {
            name_order(a.name(), b.name()).then_with(|| {
                // A recorded name clash still encodes deterministically.
                matches!(a, Row::Item(_)).cmp(&matches!(b, Row::Item(_)))
            })
        });
        rows
    }

    /// One record per pack, by address.
    fn pack_records(&self) -> Vec<PackRecord> {
        let mut records: HashMap<ObjectId, PackRecord> = HashMap::new();
        for (address, &length) in &self.pack_lengths {
            records.insert(
                *address,
                PackRecord {
                    address: *address,
                    length,
                    live: 0,
                    retired: Vec::new(),
                },
            );
        }
        for item in &self.items {
            if let Some(r) = packed(&item.entry).and_then(|_| records.get_mut(&item.entry.address))
            {
                r.live += 1;
            }
        }
        for e in &self.retired {
            if let Some(r) = records.get_mut(&e.address) {
                r.retired.push(e.clone());
            }
        }
        let mut records: Vec<PackRecord> = records.into_values().collect();
        records.sort_unstable_by_key(|r| r.address);
        for r in &mut records {
            // By range: two entries may start at one offset (one of them
            // empty), and their order must not be the order they were retired in.
            r.retired.sort_unstable_by_key(|e| (packed(e), e.byte_size));
        }
        records
    }
}

/// The offset of a packed entry.
fn packed(e: &FragmentEntry) -> Option<u64> {
    match e.placement {
        Placement::Packed { offset } => Some(offset),
        _ => None,
    }
}

fn push_name_page(rows: Vec<Row>, root: &mut TrackRoot, pages: &mut Vec<(ObjectId, Vec<u8>)>) {
    let first = rows[0].name().to_string();
    let mut items = Vec::new();
    let mut dirs = Vec::new();
    for row in rows {
        match row {
            Row::Item(i) => items.push(i.clone()),
            Row::Dir(d) => dirs.push(d),
        }
    }
    let bytes: u64 = items.iter().map(|i| i.entry.byte_size).sum();
    let count = items.len() as u64;
    let page = Track {
        items,
        retired: Vec::new(),
        dirs,
        pack_lengths: PackLengths::default(),
    }
    .encode();
    let id = ObjectId::of(&page);
    root.items += count;
    root.bytes += bytes;
    root.pages.push(PageRef {
        first,
        id,
        items: count,
        bytes,
    });
    pages.push((id, page));
}

/// Lists the root's name pages through index pages, cut where a page's
/// first name hashes to a multiple of the average.
fn push_index_pages(root: &mut TrackRoot, shape: &PageShape, pages: &mut Vec<(ObjectId, Vec<u8>)>) {
    let mut cutter = Cutter::new(shape.index, shape.index * 4, u64::MAX);
    let mut start = 0;
    for i in 0..root.pages.len() {
        let end = cutter.ends_after(name_hash(&root.pages[i].first), 0);
        if end || i + 1 == root.pages.len() {
            let run = &root.pages[start..=i];
            let page = cbor::encode(&Value::Map(vec![
                (cbor::text("kind"), cbor::text(INDEX_PAGE_KIND)),
                (cbor::text("pages"), page_refs_value(run)),
            ]));
            let id = ObjectId::of(&page);
            let (items, bytes) = sums(run.iter().map(|p| (p.items, p.bytes)));
            root.index.push(IndexRef {
                first: run[0].first.clone(),
                id,
                pages: run.len() as u64,
                items: items.unwrap_or(u64::MAX),
                bytes: bytes.unwrap_or(u64::MAX),
            });
            pages.push((id, page));
            start = i + 1;
        }
    }
}

fn push_pack_page(
    records: Vec<PackRecord>,
    root: &mut TrackRoot,
    pages: &mut Vec<(ObjectId, Vec<u8>)>,
) {
    let encoded = records.iter().map(|r| {
        Value::Array(vec![
            cbor::id(&r.address),
            cbor::uint(r.length),
            cbor::uint(r.live),
            Value::Array(r.retired.iter().map(FragmentEntry::to_cbor).collect()),
        ])
    });
    let page = cbor::encode(&Value::Map(vec![
        (cbor::text("kind"), cbor::text(PACK_PAGE_KIND)),
        (cbor::text("packs"), Value::Array(encoded.collect())),
    ]));
    let id = ObjectId::of(&page);
    root.pack_pages.push(PackPageRef {
        first: records[0].address,
        id,
        packs: records.len() as u64,
    });
    pages.push((id, page));
}

/// Decodes a paged Track page by page into a [`Columns`] sink, as
/// [`read_columns`](crate::read_columns) does a single-object Track: the
/// name pages' rows in order, then the retired entries of the pack pages.
/// Each page is checked on its own as it is read (its names in order and
/// inside its range, its counts those the root gives, pack records in
/// order and their retired entries inside their packs); [`finish`] checks
/// what spans pages (live counts). The sink checks that each pack's
/// entries tile it, and the caller that the length they tile is the one
/// [`finish`] returns.
///
/// [`finish`]: PagedReader::finish
pub struct PagedReader<'r, C> {
    root: &'r TrackRoot,
    columns: C,
    media: Vec<Arc<str>>,
    media_index: HashMap<Arc<str>, u32>,
    rows: usize,
    /// Whether the sink gets modes (mtimes): a page recorded some.
    modes: bool,
    mtimes: bool,
    next_page: usize,
    next_pack_page: usize,
    dirs: Vec<TrackDir>,
    /// Directories with a row below them.
    parents: foldhash::HashSet<String>,
    /// Live entries naming each pack, as the name pages say.
    live: foldhash::HashMap<ObjectId, u64>,
    /// Packs as the pack pages record them: length and live entries.
    records: foldhash::HashMap<ObjectId, (u64, u64)>,
}

impl<'r, C: Columns> PagedReader<'r, C> {
    pub fn new(root: &'r TrackRoot, columns: C) -> Self {
        PagedReader {
            root,
            columns,
            media: Vec::new(),
            media_index: HashMap::new(),
            rows: 0,
            modes: false,
            mtimes: false,
            next_page: 0,
            next_pack_page: 0,
            dirs: Vec::new(),
            parents: Default::default(),
            live: Default::default(),
            records: Default::default(),
        }
    }

    fn intern(&mut self, media: &Arc<str>) -> u32 {
        if let Some(&k) = self.media_index.get(media) {
            return k;
        }
        let k = self.media.len() as u32;
        self.media.push(media.clone());
        self.media_index.insert(media.clone(), k);
        k
    }

    /// Reads every page, name pages then pack pages, in the root's order
    /// (each already checked against its id), then [`finish`]es; `what`
    /// names the root and `page_what` a page in errors.
    ///
    /// [`finish`]: PagedReader::finish
    pub fn read<'b>(
        mut self,
        name_pages: impl IntoIterator<Item = &'b [u8]>,
        pack_pages: impl IntoIterator<Item = &'b [u8]>,
        what: &str,
        page_what: impl Fn(&ObjectId) -> String,
    ) -> Result<(C, super::TrackLayout, PackLengths), FormatError> {
        let root = self.root;
        for (bytes, page) in name_pages.into_iter().zip(&root.pages) {
            self.name_page(bytes, &page_what(&page.id))?;
        }
        for (bytes, page) in pack_pages.into_iter().zip(&root.pack_pages) {
            self.pack_page(bytes, &page_what(&page.id))?;
        }
        self.finish(what)
    }

    /// Reads the next name page (already checked against its id); `what`
    /// names it in errors.
    pub fn name_page(&mut self, bytes: &[u8], what: &str) -> Result<(), FormatError> {
        let index = self.next_page;
        if index >= self.root.pages.len() {
            return Err(FormatError::shape(
                what,
                "the root names fewer name pages than were read",
            ));
        }
        self.next_page += 1;
        let (raw, layout) = read_name_page(self.root, index, bytes, what)?;
        let mut dirs = layout.dirs;
        let default_media: Arc<str> = DEFAULT_MEDIA_TYPE.into();
        let media: Vec<u32> = match &layout.media_table {
            Some(table) => {
                let table: Vec<u32> = table.iter().map(|m| self.intern(m)).collect();
                raw.media.iter().map(|&k| table[k as usize]).collect()
            }
            None => vec![self.intern(&default_media); raw.index.len()],
        };
        // Modes and mtimes go to the sink only once a page records some,
        // as a single object without them sends none: a column of
        // "not recorded" for every item would cost 10 B an item at the peak.
        if !raw.modes.is_empty() && !self.modes {
            (0..self.rows).for_each(|_| self.columns.mode(None));
            self.modes = true;
        }
        if !raw.mtimes.is_empty() && !self.mtimes {
            (0..self.rows).for_each(|_| self.columns.mtime(None));
            self.mtimes = true;
        }
        let mut last_parent: Option<&str> = None;
        for (row, entry) in raw.index.into_iter().enumerate() {
            let name = raw.names[row].as_deref().expect("checked above");
            let parent = split(name).0;
            if last_parent != Some(parent) {
                self.parents.insert(parent.to_string());
                last_parent = Some(parent);
            }
            if packed(&entry).is_some() {
                *self.live.entry(entry.address).or_default() += 1;
            }
            self.columns.entry(entry);
            self.columns.name(Some(name));
            self.columns.media_type(media[row]);
            if self.modes {
                self.columns.mode(raw.modes.get(row).copied().flatten());
            }
            if self.mtimes {
                self.columns.mtime(raw.mtimes.get(row).copied().flatten());
            }
            self.rows += 1;
        }
        for d in &dirs {
            if !d.name.is_empty() {
                self.parents.insert(split(&d.name).0.to_string());
            }
        }
        self.dirs.append(&mut dirs);
        Ok(())
    }

    /// Reads the next pack page (already checked against its id), after
    /// every name page.
    pub fn pack_page(&mut self, bytes: &[u8], what: &str) -> Result<(), FormatError> {
        let page = self
            .root
            .pack_pages
            .get(self.next_pack_page)
            .ok_or_else(|| {
                FormatError::shape(what, "the root names fewer pack pages than were read")
            })?;
        let end = self
            .root
            .pack_pages
            .get(self.next_pack_page + 1)
            .map(|p| p.first);
        self.next_pack_page += 1;
        let records = read_pack_page(bytes, what)?;
        if records.first().map(|r| r.address) != Some(page.first)
            || records.len() as u64 != page.packs
            || records
                .last()
                .is_some_and(|r| end.is_some_and(|e| r.address >= e))
        {
            return Err(FormatError::shape(
                what,
                format!(
                    "the root says the page holds {} packs from {}, but it holds {} from {}",
                    page.packs,
                    page.first,
                    records.len(),
                    records
                        .first()
                        .map_or("none".into(), |r| r.address.to_string())
                ),
            ));
        }
        for r in records {
            for e in r.retired {
                // A retired entry is no item: any media type will do, and
                // one already in the table adds no column to the sink's.
                let media = match self.media.is_empty() {
                    true => self.intern(&Arc::from(DEFAULT_MEDIA_TYPE)),
                    false => 0,
                };
                self.columns.entry(e);
                self.columns.name(None);
                self.columns.media_type(media);
                if self.modes {
                    self.columns.mode(None);
                }
                if self.mtimes {
                    self.columns.mtime(None);
                }
                self.rows += 1;
            }
            self.records.insert(r.address, (r.length, r.live));
        }
        Ok(())
    }

    /// Checks what spans pages and returns the sink, the layout of what it
    /// was given (its directories without those that record nothing) and
    /// the length each pack must have.
    pub fn finish(self, what: &str) -> Result<(C, super::TrackLayout, PackLengths), FormatError> {
        if self.next_page != self.root.pages.len()
            || self.next_pack_page != self.root.pack_pages.len()
        {
            return Err(FormatError::shape(
                what,
                "not every page of the root was read",
            ));
        }
        for (address, &live) in &self.live {
            let recorded = self.records.get(address).map(|&(_, live)| live);
            if recorded != Some(live) {
                return Err(FormatError::Pack {
                    what: what.to_string(),
                    pack: address.to_hex(),
                    detail: format!(
                        "{live} items are packed in it, but the pack pages record {}",
                        recorded.map_or("no such pack".into(), |n| format!("{n} items"))
                    ),
                });
            }
        }
        if let Some(address) = self.records.keys().find(|a| !self.live.contains_key(a)) {
            return Err(FormatError::Pack {
                what: what.to_string(),
                pack: address.to_hex(),
                detail: "the pack pages record it, but no item is packed in it".into(),
            });
        }
        // A directory that records no attributes and has something below
        // it (or is the modality directory) says nothing a tree of the
        // items does not say already.
        let parents = self.parents;
        let dirs = self
            .dirs
            .into_iter()
            .filter(|d| {
                d.attrs != Attrs::default() || !(d.name.is_empty() || parents.contains(&d.name))
            })
            .collect();
        let lengths = self.records.into_iter().map(|(a, (len, _))| (a, len));
        let layout = super::TrackLayout {
            len: self.rows,
            names: true,
            media_table: Some(self.media),
            dirs,
        };
        Ok((self.columns, layout, lengths.collect()))
    }
}

/// Reads name page `index` of `root` (already checked against its id) and
/// checks it on its own: names in order and in the page's range, its first
/// name and its counts those the root gives, no retired entry.
fn read_name_page(
    root: &TrackRoot,
    index: usize,
    bytes: &[u8],
    what: &str,
) -> Result<(RawColumns, super::TrackLayout), FormatError> {
    let page = &root.pages[index];
    let end = root.pages.get(index + 1).map(|p| p.first.as_str());
    let mut raw = RawColumns::default();
    let layout = super::reader::read(bytes, what, &mut raw)?;
    let in_range = |name: &str| {
        name_order(&page.first, name) != Ordering::Greater
            && end.is_none_or(|end| name_order(name, end) == Ordering::Less)
    };
    let out_of_range = |name: &str| {
        FormatError::shape(
            what,
            format!(
                "{name:?} is outside the page's range (from {:?}{})",
                page.first,
                end.map_or(String::new(), |e| format!(" up to {e:?}"))
            ),
        )
    };
    let mut first: Option<&str> = None;
    let mut previous: Option<&str> = None;
    for (i, name) in raw.names.iter().enumerate() {
        let Some(name) = name.as_deref() else {
            return Err(FormatError::shape(
                format!("{what} names[{i}]"),
                "a name page holds no retired entry",
            ));
        };
        if previous.is_some_and(|p| name_order(p, name) != Ordering::Less) {
            return Err(FormatError::shape(
                format!("{what} names[{i}]"),
                format!("{name:?} is out of order"),
            ));
        }
        if !in_range(name) {
            return Err(out_of_range(name));
        }
        previous = Some(name);
        first = first
            .filter(|f| name_order(f, name) == Ordering::Less)
            .or(Some(name));
    }
    if !layout.names && layout.len > 0 {
        return Err(FormatError::shape(what, "a name page must name its items"));
    }
    let dirs = &layout.dirs;
    for (i, d) in dirs.iter().enumerate() {
        if i > 0 && name_order(&dirs[i - 1].name, &d.name) != Ordering::Less {
            return Err(FormatError::shape(
                format!("{what} dirs[{i}]"),
                format!("{:?} is out of order", d.name),
            ));
        }
        if !in_range(&d.name) {
            return Err(out_of_range(&d.name));
        }
    }
    if let Some(d) = dirs.first() {
        first = first
            .filter(|f| name_order(f, &d.name) == Ordering::Less)
            .or(Some(&d.name));
    }
    if first != Some(page.first.as_str()) {
        return Err(FormatError::shape(
            what,
            format!(
                "the root says the page starts at {:?}, but its first name is {first:?}",
                page.first
            ),
        ));
    }
    // Checked: hostile sizes may add up past 2^64.
    let bytes = raw
        .index
        .iter()
        .try_fold(0u64, |n, e| n.checked_add(e.byte_size));
    if raw.index.len() as u64 != page.items || bytes != Some(page.bytes) {
        return Err(FormatError::shape(
            what,
            format!(
                "the root says the page holds {} items of {} bytes, but it holds {} of {}",
                page.items,
                page.bytes,
                raw.index.len(),
                bytes.map_or("more than 2^64".into(), |n| n.to_string()),
            ),
        ));
    }
    Ok((raw, layout))
}

/// The records of a pack page, each checked on its own: addresses in
/// order, at least one live entry, retired entries packed in their pack,
/// inside its length.
pub fn read_pack_page(bytes: &[u8], what: &str) -> Result<Vec<PackRecord>, FormatError> {
    let mut s = Stream::new(bytes);
    let top = |e: cbor::StreamError| e.at(what, "");
    let keys = s.map().map_err(top)?;
    let mut records = None;
    let mut k = 0u64;
    while keys.is_none_or(|n| k < n) {
        if keys.is_none() && s.at_end().map_err(top)? {
            break;
        }
        k += 1;
        let key = s.text().map_err(top)?.into_owned();
        match key.as_str() {
            "kind" => {
                let kind = s.text().map_err(|e| e.at(what, "kind"))?;
                if kind != PACK_PAGE_KIND {
                    return Err(FormatError::shape(
                        what,
                        format!("kind {kind:?} is not a pack page ({PACK_PAGE_KIND:?})"),
                    ));
                }
            }
            "packs" => {
                let mut out: Vec<PackRecord> = Vec::new();
                s.elements(
                    |s, i| {
                        let at = format!("{what} packs[{i}]");
                        out.push(read_record(s, &at)?);
                        if i > 0 && out[i - 1].address >= out[i].address {
                            return Err(FormatError::shape(at, "pack out of order"));
                        }
                        Ok(())
                    },
                    what,
                    "packs",
                )?;
                records = Some(out);
            }
            _ => s.skip().map_err(top)?,
        }
    }
    s.finish().map_err(top)?;
    records.ok_or_else(|| FormatError::shape(what, "missing field \"packs\""))
}

/// `[address, length, live, [entry…]]`.
fn read_record(s: &mut Stream, what: &str) -> Result<PackRecord, FormatError> {
    let shape = "expected [address, length, live, retired]";
    if s.array().map_err(|e| e.at(what, ""))? != Some(4) {
        return Err(FormatError::shape(what, shape));
    }
    let address = s.object_id().map_err(|e| e.at(what, "address"))?;
    let length = s.u64().map_err(|e| e.at(what, "length"))?;
    let live = s.u64().map_err(|e| e.at(what, "live"))?;
    if live == 0 {
        return Err(FormatError::shape(
            what,
            "a pack with no live item is not recorded",
        ));
    }
    let mut retired = Vec::new();
    s.elements(
        |s, j| {
            let at = || format!("{what} retired[{j}]");
            let e = FragmentEntry::read(s, &at)?;
            let inside = packed(&e).is_some_and(|o| o + e.byte_size <= length);
            if e.address != address || !inside {
                return Err(FormatError::shape(
                    at(),
                    format!("not an entry inside pack {address} of {length} bytes"),
                ));
            }
            retired.push(e);
            Ok(())
        },
        what,
        "retired",
    )?;
    Ok(PackRecord {
        address,
        length,
        live,
        retired,
    })
}

impl Track {
    /// Decodes a paged Track from its root and its pages' bytes (each
    /// already checked against its id), in the root's order; `what` names
    /// the root and `page_what` a page in errors.
    pub fn decode_paged<'b>(
        root: &TrackRoot,
        name_pages: impl IntoIterator<Item = &'b [u8]>,
        pack_pages: impl IntoIterator<Item = &'b [u8]>,
        what: &str,
        page_what: impl Fn(&ObjectId) -> String,
    ) -> Result<Track, FormatError> {
        let reader = PagedReader::new(root, RawColumns::default());
        let (raw, layout, lengths) = reader.read(name_pages, pack_pages, what, page_what)?;
        let track = Track::from_columns(raw, layout, what)?;
        check_lengths(&lengths, |a| track.pack_len(a), what)?;
        Ok(track)
    }
}

/// Fails unless the length each pack's entries tile (`tiled`) is the one
/// its record gives.
pub fn check_lengths(
    recorded: &PackLengths,
    tiled: impl Fn(&ObjectId) -> Option<u64>,
    what: &str,
) -> Result<(), FormatError> {
    for (address, &length) in recorded {
        let tiled = tiled(address);
        if tiled != Some(length) {
            return Err(FormatError::Pack {
                what: what.to_string(),
                pack: address.to_hex(),
                detail: format!(
                    "the pack pages say it is {length} bytes long, but its entries tile {}",
                    tiled.map_or("nothing".into(), |n| format!("{n} bytes"))
                ),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
