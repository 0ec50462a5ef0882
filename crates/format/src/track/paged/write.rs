//! [`PagedWriter`]: a paged Track written row by row, its pages handed out
//! as they are cut, so a writer of any number of items holds one page and
//! a record per pack; [`Track::encode_paged`] is a Track's rows written so.

use std::borrow::Cow;
use std::collections::HashMap;

use super::super::Track;

use super::super::check_mode;
use super::encode::{push_name_page, push_pack_page, seal, NameCutter, PackCutter, Row};
use super::*;
use crate::{validate_item_name, Attrs, FormatError};

/// What the writer knows of a pack so far.
#[derive(Default)]
struct PackState {
    length: Option<u64>,
    live: u64,
    retired: Vec<FragmentEntry>,
}

/// Writes a paged Track from its rows in [`name_order`] (a directory
/// before an item of the same name; every directory listed, the modality
/// directory `""` first): the same pages as [`Track::encode_paged`] of the
/// same Track. Packs are declared with their lengths ([`PagedWriter::pack`]),
/// which are trusted: readers check that entries tile them.
///
/// [`Track::encode_paged`]: super::super::Track::encode_paged
pub struct PagedWriter<'t> {
    shape: PageShape,
    cutter: NameCutter,
    page: Vec<Row<'t>>,
    /// The last row ended a page unless the next has its name.
    cut_pending: bool,
    /// The key of the last row of the last page ended.
    ended_with: Option<(String, bool)>,
    root: TrackRoot,
    /// Pages cut and not yet taken.
    pages: Vec<(ObjectId, Vec<u8>)>,
    packs: HashMap<ObjectId, PackState>,
}

impl<'t> PagedWriter<'t> {
    pub fn new(shape: &PageShape) -> Self {
        PagedWriter {
            shape: *shape,
            cutter: NameCutter::new(shape),
            page: Vec::new(),
            cut_pending: false,
            ended_with: None,
            root: TrackRoot::default(),
            pages: Vec::new(),
            packs: HashMap::new(),
        }
    }

    /// Declares pack `address`, `length` bytes long.
    pub fn pack(&mut self, address: ObjectId, length: u64) {
        self.packs.entry(address).or_default().length = Some(length);
    }

    /// Adds a retired entry (an entry of its pack that no item names);
    /// dropped at the end if no item is packed in its pack.
    pub fn retired(&mut self, entry: FragmentEntry) {
        if packed(&entry).is_some() {
            let pack = self.packs.entry(entry.address).or_default();
            pack.retired.push(entry);
        }
    }

    /// Adds the next item row.
    pub fn item(&mut self, item: TrackItem) -> Result<(), FormatError> {
        validate_item_name(&item.name, "a paged Track being written")?;
        check_mode(item.attrs.mode, || format!("item {:?}", item.name))?;
        self.row(Row::Item(Cow::Owned(item)))
    }

    /// Adds the next directory row.
    pub fn dir(&mut self, dir: TrackDir) -> Result<(), FormatError> {
        if !dir.name.is_empty() {
            validate_item_name(&dir.name, "a paged Track being written")?;
        }
        check_mode(dir.attrs.mode, || format!("directory {:?}", dir.name))?;
        self.row(Row::Dir(dir))
    }

    /// Adds the next row: after the previous one in name order.
    pub(super) fn row(&mut self, row: Row<'t>) -> Result<(), FormatError> {
        let after = match (self.page.last(), &self.ended_with) {
            (Some(last), _) => last.key() < row.key(),
            (None, Some((name, item))) => {
                let (parent, leaf) = split(name);
                (parent, leaf, *item) < row.key()
            }
            (None, None) => true,
        };
        if !after {
            return Err(FormatError::shape(
                "a paged Track being written",
                format!("{:?} does not come after the row before it", row.name()),
            ));
        }
        if let Row::Item(item) = &row {
            if packed(&item.entry).is_some() {
                self.packs.entry(item.entry.address).or_default().live += 1;
            }
        }
        // A name that is both an item's and a directory's (which the tree
        // refuses, naming it) stays on one page, so the pages still decode
        // and the refusal is the tree's.
        if std::mem::take(&mut self.cut_pending)
            && self
                .page
                .last()
                .is_some_and(|last| last.name() != row.name())
        {
            self.end_page();
        }
        self.cut_pending = self.cutter.ends_after(&row);
        self.page.push(row);
        Ok(())
    }

    fn end_page(&mut self) {
        let rows = std::mem::take(&mut self.page);
        if let Some(last) = rows.last() {
            self.ended_with = Some((last.name().to_string(), last.key().2));
        }
        push_name_page(rows, &mut self.root, &mut self.pages);
    }

    /// The pages cut so far that were not taken yet (to store them).
    pub fn take_pages(&mut self) -> Vec<(ObjectId, Vec<u8>)> {
        std::mem::take(&mut self.pages)
    }

    /// Ends the Track: its last name page, its pack pages and index pages,
    /// and its root, with the pages not taken yet. Fails if an item is
    /// packed in a pack never declared.
    pub fn finish(mut self) -> Result<PagedTrack, FormatError> {
        if !self.page.is_empty() {
            self.end_page();
        }
        let mut records = Vec::with_capacity(self.packs.len());
        for (address, pack) in self.packs {
            if pack.live == 0 {
                continue;
            }
            let Some(length) = pack.length else {
                return Err(FormatError::Pack {
                    what: "a paged Track being written".into(),
                    pack: address.to_hex(),
                    detail: format!(
                        "{} items are packed in it, but its length is not given",
                        pack.live
                    ),
                });
            };
            let mut retired = pack.retired;
            // By range: two entries may start at one offset (one of them
            // empty), and their order must not be the order they were
            // retired in.
            retired.sort_unstable_by_key(|e| (packed(e), e.byte_size));
            records.push(PackRecord {
                address,
                length,
                live: pack.live,
                retired,
            });
        }
        records.sort_unstable_by_key(|r| r.address);
        let mut cutter = PackCutter::new(&self.shape);
        let mut page: Vec<PackRecord> = Vec::new();
        for record in records {
            let end = cutter.ends_after(&record);
            page.push(record);
            if end {
                push_pack_page(std::mem::take(&mut page), &mut self.root, &mut self.pages);
            }
        }
        if !page.is_empty() {
            push_pack_page(page, &mut self.root, &mut self.pages);
        }
        Ok(seal(self.root, &self.shape, self.pages))
    }
}

impl Track {
    /// The Track in the paged form, cut as `shape` says.
    pub fn encode_paged(&self, shape: &PageShape) -> PagedTrack {
        let mut writer = PagedWriter::new(shape);
        for (&address, &length) in &self.pack_lengths {
            writer.pack(address, length);
        }
        for e in &self.retired {
            writer.retired(e.clone());
        }
        for row in self.rows() {
            writer
                .row(row)
                .expect("a Track's rows are sorted and distinct");
        }
        writer
            .finish()
            .expect("a Track knows the length of each pack")
    }

    /// Items and every directory (recorded, implied by a name, and the
    /// modality directory), in [`name_order`].
    pub(super) fn rows(&self) -> Vec<Row<'_>> {
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
        let mut rows: Vec<Row> = self
            .items
            .iter()
            .map(|i| Row::Item(Cow::Borrowed(i)))
            .collect();
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
        // A recorded name clash still encodes deterministically.
        rows.sort_unstable_by(|a, b| a.key().cmp(&b.key()));
        rows
    }
}
