//! The root of a paged Track and its index pages: decoding, checking,
//! encoding, and finding the page of a name.

use std::cmp::Ordering;
use std::sync::Arc;

use ciborium::value::Value;

use super::super::{RawColumns, DEFAULT_MEDIA_TYPE, TRACK_KIND_FRAGMENT};
use super::read::read_name_page;
use super::*;
use crate::cbor::{self, MapReader, Stream};
use crate::{Attrs, FormatError};

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
        for (k, bytes) in index_pages.into_iter().enumerate().take(self.index.len()) {
            read += 1;
            let what = page_what(&self.index[k].id);
            let refs = self.index_page(k, bytes, &what)?;
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

    /// The name page refs index page `k` lists (its bytes already checked
    /// against its id), checked against what the root says of it: its
    /// kind, its count of pages, items and bytes, its first name.
    pub fn index_page(
        &self,
        k: usize,
        bytes: &[u8],
        what: &str,
    ) -> Result<Vec<PageRef>, FormatError> {
        let index = self.index.get(k).ok_or_else(|| {
            FormatError::shape(
                what,
                format!("the root has {} index pages", self.index.len()),
            )
        })?;
        let value = cbor::decode(bytes, what)?;
        let map = MapReader::new(&value, what)?;
        let kind = cbor::as_text(map.required("kind")?, &format!("{what} kind"))?;
        if kind != INDEX_PAGE_KIND {
            return Err(FormatError::shape(
                what,
                format!("kind {kind:?} is not an index page ({INDEX_PAGE_KIND:?})"),
            ));
        }
        let refs = read_page_refs(map.required("pages")?, what, "pages")?;
        let counts = sums(refs.iter().map(|p| (p.items, p.bytes)));
        let expected = (index.items, index.bytes);
        check_counts("the root says the page lists", expected, counts, what)?;
        let first = refs.first().map(|p| p.first.as_str());
        if refs.len() as u64 != index.pages || first != Some(index.first.as_str()) {
            return Err(FormatError::shape(
                what,
                format!(
                    "the root says it lists {} pages from {:?}, but it lists {} from {first:?}",
                    index.pages,
                    index.first,
                    refs.len()
                ),
            ));
        }
        Ok(refs)
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

/// The page refs `[first, id, items, bytes, t_end]` (or the first four)
/// of `value` (the `field` of `what`), in strictly increasing name order.
fn read_page_refs(value: &Value, what: &str, field: &str) -> Result<Vec<PageRef>, FormatError> {
    let mut refs: Vec<PageRef> = Vec::new();
    for (i, page) in cbor::as_array(value, &format!("{what} {field}"))?
        .iter()
        .enumerate()
    {
        let at = format!("{what} {field}[{i}]");
        // Refs written before they recorded `t_end` have four elements.
        let (fields, t_end) = match cbor::as_array(page, &at)? {
            [a, b, c, d] => ([a, b, c, d], None),
            [a, b, c, d, Value::Null] => ([a, b, c, d], None),
            [a, b, c, d, t] => ([a, b, c, d], Some(cbor::as_i64(t, &at)?)),
            _ => {
                let shape = "expected [first, id, items, bytes, t_end]";
                return Err(FormatError::shape(&at, shape));
            }
        };
        let [first, id, items, bytes] = fields;
        let page = PageRef {
            first: cbor::as_text(first, &at)?.to_string(),
            id: cbor::as_object_id(id, &at)?,
            items: cbor::as_u64(items, &at)?,
            bytes: cbor::as_u64(bytes, &at)?,
            t_end,
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
pub(super) fn sums(counts: impl Iterator<Item = (u64, u64)>) -> (Option<u64>, Option<u64>) {
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
pub(super) fn page_refs_value(pages: &[PageRef]) -> Value {
    let refs = pages.iter().map(|p| {
        Value::Array(vec![
            cbor::text(&p.first),
            cbor::id(&p.id),
            cbor::uint(p.items),
            cbor::uint(p.bytes),
            p.t_end.map_or(Value::Null, |t| Value::Integer(t.into())),
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
