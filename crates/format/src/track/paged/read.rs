//! Reading a paged Track: page by page into a [`Columns`] sink, each page
//! checked on its own and what spans pages at the end.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::Arc;

use super::super::{RawColumns, Track, TrackLayout, DEFAULT_MEDIA_TYPE};
use super::*;
use crate::cbor::{self, Stream};
use crate::{Attrs, Columns, FormatError, PackLengths};

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
    ) -> Result<(C, TrackLayout, PackLengths), FormatError> {
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
    pub fn finish(self, what: &str) -> Result<(C, TrackLayout, PackLengths), FormatError> {
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
        let layout = TrackLayout {
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
pub(super) fn read_name_page(
    root: &TrackRoot,
    index: usize,
    bytes: &[u8],
    what: &str,
) -> Result<(RawColumns, TrackLayout), FormatError> {
    let mut raw = RawColumns::default();
    let layout = root.read_name_page_into(index, bytes, what, &mut raw)?;
    Ok((raw, layout))
}

impl TrackRoot {
    /// Reads name page `index` (its bytes already checked against its id)
    /// into `columns`, checking it on its own as its rows go by: names in
    /// order and in the page's range, its first name and its counts those
    /// the root gives, no retired entry. On an error `columns` holds part
    /// of the page.
    pub fn read_name_page_into(
        &self,
        index: usize,
        bytes: &[u8],
        what: &str,
        columns: &mut impl Columns,
    ) -> Result<TrackLayout, FormatError> {
        let page = &self.pages[index];
        let end = self.pages.get(index + 1).map(|p| p.first.as_str());
        let mut checked = CheckedRows {
            columns,
            previous: String::new(),
            first: None,
            names: 0,
            bytes: Some(0),
            t_end: None,
            problem: None,
            what,
        };
        let layout = super::super::reader::read(bytes, what, &mut checked)?;
        if let Some(problem) = checked.problem {
            return Err(problem);
        }
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
        // Names increase: the first and the last bound them all.
        let last = (checked.names > 0).then_some(checked.previous.as_str());
        for name in checked.first.iter().map(String::as_str).chain(last) {
            let in_range = name_order(&page.first, name) != Ordering::Greater
                && end.is_none_or(|end| name_order(name, end) == Ordering::Less);
            if !in_range {
                return Err(out_of_range(name));
            }
        }
        if !layout.names && layout.len > 0 {
            return Err(FormatError::shape(what, "a name page must name its items"));
        }
        let mut first = checked.first.as_deref();
        let dirs = &layout.dirs;
        for (i, d) in dirs.iter().enumerate() {
            if i > 0 && name_order(&dirs[i - 1].name, &d.name) != Ordering::Less {
                return Err(FormatError::shape(
                    format!("{what} dirs[{i}]"),
                    format!("{:?} is out of order", d.name),
                ));
            }
            let in_range = name_order(&page.first, &d.name) != Ordering::Greater
                && end.is_none_or(|end| name_order(&d.name, end) == Ordering::Less);
            if !in_range {
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
        if page.t_end.is_some() && page.t_end != checked.t_end {
            return Err(FormatError::shape(
                what,
                format!(
                    "the root says the page's items end at t {:?}, but they end at {:?}",
                    page.t_end, checked.t_end
                ),
            ));
        }
        let bytes = checked.bytes;
        if layout.len as u64 != page.items || bytes != Some(page.bytes) {
            return Err(FormatError::shape(
                what,
                format!(
                    "the root says the page holds {} items of {} bytes, but it holds {} of {}",
                    page.items,
                    page.bytes,
                    layout.len,
                    bytes.map_or("more than 2^64".into(), |n| n.to_string()),
                ),
            ));
        }
        Ok(layout)
    }
}

/// A [`Columns`] sink that checks a name page's rows on their way to
/// another: names in increasing name order, none retired; the first name,
/// the last, the bytes and the largest `t_end`, for the checks at the end.
struct CheckedRows<'c, C> {
    columns: &'c mut C,
    /// The last name so far.
    previous: String,
    first: Option<String>,
    names: usize,
    /// Sum of the sizes (`None` past 2^64: hostile sizes).
    bytes: Option<u64>,
    t_end: Option<i64>,
    problem: Option<FormatError>,
    what: &'c str,
}

impl<C: Columns> Columns for CheckedRows<'_, C> {
    fn entry(&mut self, entry: FragmentEntry) {
        self.bytes = self.bytes.and_then(|n| n.checked_add(entry.byte_size));
        self.t_end = self.t_end.max(Some(entry.t_end));
        self.columns.entry(entry);
    }

    fn name(&mut self, name: Option<&str>) {
        let i = self.names;
        self.names += 1;
        let at = || format!("{} names[{i}]", self.what);
        match name {
            None => {
                let problem = FormatError::shape(at(), "a name page holds no retired entry");
                self.problem.get_or_insert(problem);
            }
            Some(name) => {
                if i > 0 && name_order(&self.previous, name) != Ordering::Less {
                    let problem = FormatError::shape(at(), format!("{name:?} is out of order"));
                    self.problem.get_or_insert(problem);
                }
                if i == 0 {
                    self.first = Some(name.to_string());
                }
                self.previous.clear();
                self.previous.push_str(name);
            }
        }
        self.columns.name(name);
    }

    fn media_type(&mut self, index: u32) {
        self.columns.media_type(index);
    }

    fn mode(&mut self, mode: Option<u16>) {
        self.columns.mode(mode);
    }

    fn mtime(&mut self, mtime_ns: Option<i64>) {
        self.columns.mtime(mtime_ns);
    }
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
