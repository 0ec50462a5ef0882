//! The cut into pages: where name, pack and index pages end (content
//! defined), and each page's encoding with its ref in the root.

use std::borrow::Cow;

use ciborium::value::Value;

use super::super::Track;
use super::root::{page_refs_value, sums};
use super::*;
use crate::cbor;
use crate::PackLengths;

/// Decides where pages end: after a row whose key hashes to a multiple of
/// the average, once a quarter of it is reached, or at the maximum.
pub(super) struct Cutter {
    average: u64,
    max_rows: u64,
    max_bytes: u64,
    rows: u64,
    bytes: u64,
}

impl Cutter {
    pub(super) fn new(average: u64, max_rows: u64, max_bytes: u64) -> Cutter {
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
    pub(super) fn ends_after(&mut self, hash: u64, bytes: u64) -> bool {
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
pub(super) fn name_hash(name: &str) -> u64 {
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
pub(super) enum Row<'t> {
    Item(Cow<'t, TrackItem>),
    Dir(TrackDir),
}

impl Row<'_> {
    pub(super) fn name(&self) -> &str {
        match self {
            Row::Item(i) => &i.name,
            Row::Dir(d) => &d.name,
        }
    }

    /// Its place in a name page: [`name_order`], a directory before an
    /// item of the same name.
    pub(super) fn key(&self) -> (&str, &str, bool) {
        let (parent, leaf) = split(self.name());
        (parent, leaf, matches!(self, Row::Item(_)))
    }

    /// Its estimated encoded size, for the cut.
    fn bytes(&self) -> u64 {
        self.name().len() as u64
            + match self {
                Row::Item(_) => 56,
                Row::Dir(_) => 16,
            }
    }
}

/// The cut of name pages: [`Cutter`] fed with rows.
pub(super) struct NameCutter(Cutter);

impl NameCutter {
    pub(super) fn new(shape: &PageShape) -> NameCutter {
        NameCutter(Cutter::new(shape.rows, shape.max_rows, shape.max_bytes))
    }

    pub(super) fn ends_after(&mut self, row: &Row) -> bool {
        self.0.ends_after(name_hash(row.name()), row.bytes())
    }
}

/// The cut of pack pages: [`Cutter`] fed with records.
pub(super) struct PackCutter(Cutter);

impl PackCutter {
    pub(super) fn new(shape: &PageShape) -> PackCutter {
        PackCutter(Cutter::new(shape.packs, shape.packs * 4, shape.max_bytes))
    }

    pub(super) fn ends_after(&mut self, record: &PackRecord) -> bool {
        let hash = u64::from_le_bytes(record.address.0[..8].try_into().expect("8 bytes"));
        self.0
            .ends_after(hash, 48 + 50 * record.retired.len() as u64)
    }
}

pub(super) fn push_name_page(
    rows: Vec<Row>,
    root: &mut TrackRoot,
    pages: &mut Vec<(ObjectId, Vec<u8>)>,
) {
    let first = rows[0].name().to_string();
    let mut items = Vec::new();
    let mut dirs = Vec::new();
    for row in rows {
        match row {
            Row::Item(i) => items.push(i.into_owned()),
            Row::Dir(d) => dirs.push(d),
        }
    }
    let bytes: u64 = items.iter().map(|i| i.entry.byte_size).sum();
    let count = items.len() as u64;
    let t_end = items.iter().map(|i| i.entry.t_end).max();
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
        t_end,
    });
    pages.push((id, page));
}

/// The paged Track `root` lists, `pages` holding its pages not stored
/// yet: past twice the index size its name pages are listed through index
/// pages, then the root is encoded.
pub(super) fn seal(
    mut root: TrackRoot,
    shape: &PageShape,
    mut pages: Vec<(ObjectId, Vec<u8>)>,
) -> PagedTrack {
    if root.pages.len() as u64 > 2 * shape.index {
        push_index_pages(&mut root, shape, &mut pages);
    }
    let bytes = root.encode();
    PagedTrack {
        id: ObjectId::of(&bytes),
        root: bytes,
        listed: root,
        pages,
    }
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

pub(super) fn push_pack_page(
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
