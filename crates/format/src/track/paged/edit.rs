//! [`TrackRoot::edit`]: a paged Track changed by a [`TrackEdit`], reading
//! and re-encoding only the pages the change falls in.
//!
//! Pages are cut where a row's hash says, and a cut depends only on the
//! rows since the previous cut. So re-cutting from the first page an edit
//! touches, through the edited rows, until a cut falls again where an old
//! page ended, gives exactly the pages [`Track::encode_paged`] gives the
//! edited Track: the pages before and after are the old ones, unread.
//!
//! [`Track::encode_paged`]: super::super::Track::encode_paged

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashSet, VecDeque};

use super::super::check_mode;
use super::encode::{push_name_page, push_pack_page, seal, NameCutter, PackCutter, Row};
use super::*;
use crate::{check_pack, validate_item_name, Attrs, FormatError};

/// A change to a paged Track: rows removed, then rows added or replaced.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TrackEdit {
    /// Directories whose subtrees go: every row below each (not its own).
    pub cleared: Vec<String>,
    /// Names whose rows go, an item's or a directory's.
    pub removed: Vec<String>,
    /// Items added, or replacing the item of the same name.
    pub items: Vec<TrackItem>,
    /// Directories added, or replacing the directory of the same name: a
    /// paged Track lists every directory, so every one the edit makes
    /// must be here or in `implied`.
    pub dirs: Vec<TrackDir>,
    /// Directories listed, recording nothing, unless the Track (after the
    /// removals) lists them already: the directories above new items,
    /// for a writer that does not know which exist.
    pub implied: Vec<String>,
    /// Retired entries of packs the Track does not record yet: such a pack
    /// is tiled by the items the edit packs in it and these (a merge
    /// takes a branch's pack with the items it holds and the ranges the
    /// branch removed from it). Those of a recorded pack are ignored: its
    /// record has the pack's own.
    pub retired: Vec<FragmentEntry>,
}

impl TrackEdit {
    /// Whether it changes nothing.
    pub fn is_empty(&self) -> bool {
        self.cleared.is_empty()
            && self.removed.is_empty()
            && self.items.is_empty()
            && self.dirs.is_empty()
            && self.implied.is_empty()
            && self.retired.is_empty()
    }

    /// Whether the old row named `name` is below a directory it clears.
    pub fn clears(&self, name: &str) -> bool {
        self.cleared
            .iter()
            .any(|d| !name.is_empty() && (d.is_empty() || below(name, d)))
    }
}

/// Why [`TrackRoot::edit`] did not finish.
#[derive(Debug)]
pub enum EditError {
    /// It must read these pages first: call it again with them.
    Need(Vec<ObjectId>),
    /// A page read is damaged, or the edit contradicts the Track.
    Format(FormatError),
}

impl From<FormatError> for EditError {
    fn from(e: FormatError) -> Self {
        EditError::Format(e)
    }
}

/// A page's bytes (already checked against its id), if read yet.
pub type PageSource<'p> = dyn Fn(&ObjectId) -> Option<&'p [u8]> + 'p;

impl TrackRoot {
    /// This Track (its index pages read: [`TrackRoot::needs_index`] is
    /// false) changed by `edit` and cut as `shape` says, reading pages
    /// through `page`: the root and the pages it does not share with this
    /// one. The pages are those [`Track::encode_paged`] gives the edited
    /// Track, but for one case: an item removed while another live item
    /// names the very same range of its pack leaves that range as a
    /// retired entry too, which readers drop.
    ///
    /// [`Track::encode_paged`]: super::super::Track::encode_paged
    pub fn edit<'p>(
        &self,
        edit: &TrackEdit,
        shape: &PageShape,
        page: &PageSource<'p>,
        what: &str,
        page_what: &dyn Fn(&ObjectId) -> String,
    ) -> Result<PagedTrack, EditError> {
        if self.needs_index() {
            return Err(EditError::Need(self.index.iter().map(|i| i.id).collect()));
        }
        check_edit(edit, what)?;
        let mut names = NameEdit::new(self, edit, page, page_what);
        let mut root = TrackRoot::default();
        let mut new_pages = Vec::new();
        let mut cutter = NameCutter::new(shape);
        let pieces = recut(
            self.pages.len(),
            &names.affected(),
            &mut |j| names.rows_of(j),
            &mut |row| cutter.ends_after(row),
            &|row, next| match next {
                Next::Row(next) => next.name() == row.name(),
                Next::Run(k) => self.pages[k].first == row.name(),
            },
        )?;
        for piece in pieces {
            match piece {
                Piece::Old(j) => {
                    let p = self.pages[j].clone();
                    root.items = root.items.saturating_add(p.items);
                    root.bytes = root.bytes.saturating_add(p.bytes);
                    root.pages.push(p);
                }
                Piece::New(rows) => push_name_page(rows, &mut root, &mut new_pages),
            }
        }
        let packs = names.pack_changes();
        let mut packs = PackEdit::new(self, packs, page, page_what);
        let mut cutter = PackCutter::new(shape);
        let pieces = recut(
            self.pack_pages.len(),
            &packs.affected(),
            &mut |j| packs.records_of(j, what),
            &mut |record| cutter.ends_after(record),
            &|_, _| false,
        )?;
        for piece in pieces {
            match piece {
                Piece::Old(j) => root.pack_pages.push(self.pack_pages[j].clone()),
                Piece::New(records) => push_pack_page(records, &mut root, &mut new_pages),
            }
        }
        let mut paged = seal(root, shape, new_pages);
        let old: HashSet<ObjectId> = self.page_ids().collect();
        paged.pages.retain(|(id, _)| !old.contains(id));
        Ok(paged)
    }
}

/// Refuses an edit that could not come from a Track: bad names or modes,
/// or one name added twice.
fn check_edit(edit: &TrackEdit, what: &str) -> Result<(), FormatError> {
    let mut items = HashSet::new();
    for (i, item) in edit.items.iter().enumerate() {
        validate_item_name(&item.name, &format!("{what}: edit items[{i}]"))?;
        check_mode(item.attrs.mode, || format!("{what}: edit items[{i}]"))?;
        if !items.insert(item.name.as_str()) {
            return Err(duplicate(what, &item.name));
        }
    }
    let mut dirs = HashSet::new();
    for (i, dir) in edit.implied.iter().enumerate() {
        if !dir.is_empty() {
            validate_item_name(dir, &format!("{what}: edit implied[{i}]"))?;
        }
    }
    for (i, dir) in edit.dirs.iter().enumerate() {
        if !dir.name.is_empty() {
            validate_item_name(&dir.name, &format!("{what}: edit dirs[{i}]"))?;
        }
        check_mode(dir.attrs.mode, || format!("{what}: edit dirs[{i}]"))?;
        if !dirs.insert(dir.name.as_str()) {
            return Err(duplicate(what, &dir.name));
        }
    }
    Ok(())
}

fn duplicate(what: &str, name: &str) -> FormatError {
    FormatError::Name {
        what: format!("{what}: edit"),
        name: name.to_string(),
        reason: "duplicate name",
    }
}

/// What follows a row, to tell whether a cut after it may fall there.
enum Next<'a, T> {
    /// The next row, read.
    Row(&'a T),
    /// The first row of old run `k`, not read: its first name is the
    /// root's.
    Run(usize),
}

/// A stretch of the edited sequence: an old run kept, or a new one.
enum Piece<T> {
    Old(usize),
    New(Vec<T>),
}

/// Re-cuts a sequence cut into `runs` runs where it is `affected`:
/// `rows_of(j)` gives run `j`'s rows as edited (for `runs == 0`, run 0 is
/// every row), `ends_after` feeds the cut, `glued` says whether a cut
/// after a row must wait (its next row has the same name). A run is read
/// only where it is affected or the re-cut has not met an old cut yet.
fn recut<T>(
    runs: usize,
    affected: &BTreeSet<usize>,
    rows_of: &mut dyn FnMut(usize) -> Result<Vec<T>, EditError>,
    ends_after: &mut dyn FnMut(&T) -> bool,
    glued: &dyn Fn(&T, Next<'_, T>) -> bool,
) -> Result<Vec<Piece<T>>, EditError> {
    let mut out = Vec::new();
    let runs_or_one = runs.max(1);
    let mut k = 0;
    while k < runs_or_one {
        if runs > 0 && !affected.contains(&k) {
            out.push(Piece::Old(k));
            k += 1;
            continue;
        }
        let mut queue: VecDeque<T> = rows_of(k)?.into();
        k += 1;
        let mut page = Vec::new();
        loop {
            while let Some(row) = queue.pop_front() {
                // The next row must be known exactly where it is edited.
                if queue.is_empty() && k < runs && affected.contains(&k) {
                    queue.extend(rows_of(k)?);
                    k += 1;
                }
                let end = ends_after(&row);
                let wait = match queue.front() {
                    Some(next) => glued(&row, Next::Row(next)),
                    None => k < runs && glued(&row, Next::Run(k)),
                };
                page.push(row);
                if end && !wait {
                    out.push(Piece::New(std::mem::take(&mut page)));
                }
            }
            // At the end of old run k - 1: a cut here is an old one.
            if page.is_empty() || k >= runs {
                break;
            }
            queue.extend(rows_of(k)?);
            k += 1;
        }
        if !page.is_empty() {
            out.push(Piece::New(page));
        }
    }
    Ok(out)
}

/// Entries removed and added in one pack.
#[derive(Default)]
struct PackChange {
    removed: Vec<FragmentEntry>,
    added: Vec<FragmentEntry>,
    /// Retired ranges the edit gives, for a pack not recorded yet.
    retired: Vec<FragmentEntry>,
}

/// The name pages' side of an edit.
struct NameEdit<'a, 'p> {
    root: &'a TrackRoot,
    edit: &'a TrackEdit,
    page: &'a PageSource<'p>,
    page_what: &'a dyn Fn(&ObjectId) -> String,
    /// The rows added, by the old page they fall in.
    added: BTreeMap<usize, Vec<Row<'a>>>,
    /// Names (with whether an item's) whose old rows the added replace.
    replaced: HashSet<(&'a str, bool)>,
    /// Directories to list if the page lacks them, by the old page they
    /// fall in.
    implied: BTreeMap<usize, Vec<&'a str>>,
    removed: HashSet<&'a str>,
    /// Entries of the item rows dropped.
    dropped: Vec<FragmentEntry>,
}

impl<'a, 'p> NameEdit<'a, 'p> {
    fn new(
        root: &'a TrackRoot,
        edit: &'a TrackEdit,
        page: &'a PageSource<'p>,
        page_what: &'a dyn Fn(&ObjectId) -> String,
    ) -> Self {
        // Sorted by keys split once: an edit may add millions of rows.
        type Keyed<'a> = ((&'a str, &'a str, bool), Row<'a>);
        let mut keyed: BTreeMap<usize, Vec<Keyed<'a>>> = BTreeMap::new();
        let items = edit.items.iter().map(|i| {
            let (parent, leaf) = split(&i.name);
            ((parent, leaf, true), Row::Item(Cow::Borrowed(i)))
        });
        let dirs = edit.dirs.iter().map(|d| {
            let (parent, leaf) = split(&d.name);
            ((parent, leaf, false), Row::Dir(d.clone()))
        });
        for (key, row) in items.chain(dirs) {
            let j = root.page_of(row.name()).unwrap_or(0);
            keyed.entry(j).or_default().push((key, row));
        }
        let mut added: BTreeMap<usize, Vec<Row<'a>>> = BTreeMap::new();
        for (j, mut rows) in keyed {
            rows.sort_unstable_by(|a, b| a.0.cmp(&b.0));
            added.insert(j, rows.into_iter().map(|(_, row)| row).collect());
        }
        let mut implied: BTreeMap<usize, Vec<&'a str>> = BTreeMap::new();
        for dir in &edit.implied {
            let j = root.page_of(dir).unwrap_or(0);
            implied.entry(j).or_default().push(dir);
        }
        let replaced = edit
            .items
            .iter()
            .map(|i| (i.name.as_str(), true))
            .chain(edit.dirs.iter().map(|d| (d.name.as_str(), false)))
            .collect();
        NameEdit {
            root,
            edit,
            page,
            page_what,
            added,
            replaced,
            implied,
            removed: edit.removed.iter().map(String::as_str).collect(),
            dropped: Vec::new(),
        }
    }

    /// The old pages the edit falls in.
    fn affected(&self) -> BTreeSet<usize> {
        let mut pages: BTreeSet<usize> = self.added.keys().copied().collect();
        pages.extend(self.implied.keys().copied());
        for name in &self.edit.removed {
            pages.insert(self.root.page_of(name).unwrap_or(0));
        }
        for dir in &self.edit.cleared {
            if dir.is_empty() {
                pages.extend(0..self.root.pages.len());
                continue;
            }
            // Rows whose parent is `dir`, then those whose parent is below
            // it: `dir` + "/" up to `dir` + "0" ('0' follows '/').
            for (from, to) in [
                (dir.clone(), format!("{dir}\0")),
                (format!("{dir}/"), format!("{dir}0")),
            ] {
                let first = self.page_of_parent(&from).unwrap_or(0);
                let end = self.page_of_parent(&to).map_or(0, |j| j + 1);
                pages.extend(first..end);
            }
        }
        pages
    }

    /// The page holding the first row whose parent directory is `parent`
    /// or after it.
    fn page_of_parent(&self, parent: &str) -> Option<usize> {
        let after = self
            .root
            .pages
            .partition_point(|p| split(&p.first).0 < parent);
        after.checked_sub(1)
    }

    fn goes(&self, name: &str, item: bool) -> bool {
        self.removed.contains(name)
            || self.replaced.contains(&(name, item))
            || self.edit.clears(name)
    }

    /// Old page `j`'s rows, edited.
    fn rows_of(&mut self, j: usize) -> Result<Vec<Row<'a>>, EditError> {
        let mut rows: Vec<Row<'a>> = Vec::new();
        if let Some(p) = self.root.pages.get(j) {
            let bytes = (self.page)(&p.id).ok_or(EditError::Need(vec![p.id]))?;
            let page = self.root.name_page(j, bytes, &(self.page_what)(&p.id))?;
            for d in page.dirs {
                if !self.goes(&d.name, false) {
                    rows.push(Row::Dir(d));
                }
            }
            for i in page.items {
                match self.goes(&i.name, true) {
                    true => self.dropped.push(i.entry),
                    false => rows.push(Row::Item(Cow::Owned(i))),
                }
            }
        }
        rows.extend(self.added.remove(&j).unwrap_or_default());
        let listed: HashSet<&str> = rows
            .iter()
            .filter(|r| matches!(r, Row::Dir(_)))
            .map(Row::name)
            .collect();
        let mut implied: Vec<Row<'a>> = Vec::new();
        for dir in self.implied.remove(&j).unwrap_or_default() {
            if !listed.contains(dir) && !implied.iter().any(|r| r.name() == dir) {
                implied.push(Row::Dir(TrackDir {
                    name: dir.to_string(),
                    attrs: Attrs::default(),
                }));
            }
        }
        rows.extend(implied);
        rows.sort_by(|a, b| a.key().cmp(&b.key()));
        Ok(rows)
    }

    /// What the edit keeps and drops of the pages it touches, given the
    /// largest `t_end` of the pages it does not (`untouched`).
    fn survey(&self, untouched: Option<i64>) -> Result<Survey, EditError> {
        let mut survey = Survey {
            kept_t_end: untouched,
            dropped: Vec::new(),
        };
        let affected = self.affected();
        let missing: Vec<ObjectId> = affected
            .iter()
            .filter_map(|&j| self.root.pages.get(j))
            .filter(|p| (self.page)(&p.id).is_none())
            .map(|p| p.id)
            .collect();
        if !missing.is_empty() {
            return Err(EditError::Need(missing));
        }
        for &j in &affected {
            let Some(p) = self.root.pages.get(j) else {
                continue;
            };
            let bytes = (self.page)(&p.id).ok_or(EditError::Need(vec![p.id]))?;
            let page = self.root.name_page(j, bytes, &(self.page_what)(&p.id))?;
            for item in page.items {
                match self.goes(&item.name, true) {
                    true => survey.dropped.push(item.entry),
                    false => survey.kept_t_end = survey.kept_t_end.max(Some(item.entry.t_end)),
                }
            }
        }
        Ok(survey)
    }

    /// The entries removed and added, by pack.
    fn pack_changes(self) -> BTreeMap<ObjectId, PackChange> {
        let mut packs: BTreeMap<ObjectId, PackChange> = BTreeMap::new();
        for e in self.dropped {
            if packed(&e).is_some() {
                packs.entry(e.address).or_default().removed.push(e);
            }
        }
        for i in &self.edit.items {
            if packed(&i.entry).is_some() {
                let change = packs.entry(i.entry.address).or_default();
                change.added.push(i.entry.clone());
            }
        }
        for e in &self.edit.retired {
            if let Some(change) = packs.get_mut(&e.address) {
                change.retired.push(e.clone());
            }
        }
        packs
    }
}

/// Whether `name` is below directory `dir`.
pub(super) fn below(name: &str, dir: &str) -> bool {
    name.len() > dir.len() && name.starts_with(dir) && name.as_bytes()[dir.len()] == b'/'
}

/// The pack pages' side of an edit.
struct PackEdit<'a, 'p> {
    root: &'a TrackRoot,
    page: &'a PageSource<'p>,
    page_what: &'a dyn Fn(&ObjectId) -> String,
    /// The packs changed, by the old pack page they fall in.
    changes: BTreeMap<usize, BTreeMap<ObjectId, PackChange>>,
}

impl<'a, 'p> PackEdit<'a, 'p> {
    fn new(
        root: &'a TrackRoot,
        packs: BTreeMap<ObjectId, PackChange>,
        page: &'a PageSource<'p>,
        page_what: &'a dyn Fn(&ObjectId) -> String,
    ) -> Self {
        let mut changes: BTreeMap<usize, BTreeMap<ObjectId, PackChange>> = BTreeMap::new();
        for (address, change) in packs {
            let j = root.pack_page_of(&address).unwrap_or(0);
            changes.entry(j).or_default().insert(address, change);
        }
        PackEdit {
            root,
            page,
            page_what,
            changes,
        }
    }

    fn affected(&self) -> BTreeSet<usize> {
        self.changes.keys().copied().collect()
    }

    /// Old pack page `j`'s records, edited.
    fn records_of(&mut self, j: usize, what: &str) -> Result<Vec<PackRecord>, EditError> {
        let mut records = Vec::new();
        if let Some(p) = self.root.pack_pages.get(j) {
            let bytes = (self.page)(&p.id).ok_or(EditError::Need(vec![p.id]))?;
            let page_what = (self.page_what)(&p.id);
            records = read_pack_page(bytes, &page_what)?;
            if records.len() as u64 != p.packs
                || records.first().map(|r| r.address) != Some(p.first)
            {
                return Err(FormatError::shape(
                    page_what,
                    format!("the root says it holds {} packs from {}", p.packs, p.first),
                )
                .into());
            }
        }
        let mut changes = self.changes.remove(&j).unwrap_or_default();
        let mut out = Vec::with_capacity(records.len() + changes.len());
        for r in records {
            match changes.remove(&r.address) {
                None => out.push(r),
                Some(change) => {
                    let address = r.address;
                    out.extend(changed(Some(r), address, change, what)?);
                }
            }
        }
        for (address, change) in changes {
            out.extend(changed(None, address, change, what)?);
        }
        out.sort_unstable_by_key(|r| r.address);
        Ok(out)
    }
}

/// Pack `address`'s record (`None`: new) after `change`; `None` once no
/// live entry names it, as then nothing needs its retired entries.
fn changed(
    record: Option<PackRecord>,
    address: ObjectId,
    change: PackChange,
    what: &str,
) -> Result<Option<PackRecord>, FormatError> {
    let range = |e: &FragmentEntry| (packed(e), e.byte_size);
    let pack_error = |detail: String| FormatError::Pack {
        what: what.to_string(),
        pack: address.to_hex(),
        detail,
    };
    let Some(mut record) = record else {
        if !change.removed.is_empty() {
            return Err(pack_error(
                "an item packed in it is removed, but no pack page records it".into(),
            ));
        }
        let added: HashSet<_> = change.added.iter().map(range).collect();
        let mut retired: Vec<FragmentEntry> = Vec::new();
        for e in change.retired {
            if !added.contains(&range(&e)) && !retired.iter().any(|k| range(k) == range(&e)) {
                retired.push(e);
            }
        }
        retired.sort_unstable_by_key(range);
        let mut ranges: Vec<(u64, u64)> = change
            .added
            .iter()
            .chain(&retired)
            .map(|e| (packed(e).unwrap_or(0), e.byte_size))
            .collect();
        let length = check_pack(&mut ranges).map_err(pack_error)?;
        return Ok(Some(PackRecord {
            address,
            length,
            live: change.added.len() as u64,
            retired,
        }));
    };
    let live = (record.live + change.added.len() as u64)
        .checked_sub(change.removed.len() as u64)
        .ok_or_else(|| {
            pack_error(format!(
                "{} items packed in it are removed, but its pack page records {} live",
                change.removed.len(),
                record.live
            ))
        })?;
    if live == 0 {
        return Ok(None);
    }
    for e in &change.added {
        let end = packed(e).unwrap_or(0).checked_add(e.byte_size);
        if end.is_none_or(|end| end > record.length) {
            return Err(pack_error(format!(
                "an item added at {} ({} bytes) ends past its length, {}",
                packed(e).unwrap_or(0),
                e.byte_size,
                record.length
            )));
        }
    }
    let added: HashSet<_> = change.added.iter().map(range).collect();
    record.retired.retain(|e| !added.contains(&range(e)));
    for e in change.removed {
        let r = range(&e);
        if !added.contains(&r) && !record.retired.iter().any(|k| range(k) == r) {
            record.retired.push(e);
        }
    }
    record.retired.sort_unstable_by_key(range);
    record.live = live;
    Ok(Some(record))
}

/// What an edit keeps and drops of a Track ([`TrackRoot::survey`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Survey {
    /// The largest `t_end` of the items the edit keeps: new items are
    /// numbered after it.
    pub kept_t_end: Option<i64>,
    /// The entries of the items it removes or replaces.
    pub dropped: Vec<FragmentEntry>,
}

impl TrackRoot {
    /// What this Track (its index read) keeps and drops through `edit`.
    /// Reads the pages the edit touches, and those whose refs do not give
    /// their largest `t_end`.
    pub fn survey<'p>(
        &self,
        edit: &TrackEdit,
        page: &PageSource<'p>,
        page_what: &dyn Fn(&ObjectId) -> String,
    ) -> Result<Survey, EditError> {
        let names = NameEdit::new(self, edit, page, page_what);
        let affected = names.affected();
        let mut untouched = None;
        let mut silent = Vec::new();
        for (j, p) in self.pages.iter().enumerate() {
            if affected.contains(&j) {
                continue;
            }
            match p.t_end {
                Some(t) => untouched = untouched.max(Some(t)),
                None if p.items > 0 => match page(&p.id) {
                    Some(bytes) => {
                        let items = self.name_page(j, bytes, &page_what(&p.id))?.items;
                        untouched = untouched.max(items.iter().map(|i| i.entry.t_end).max());
                    }
                    None => silent.push(p.id),
                },
                None => {}
            }
        }
        if !silent.is_empty() {
            return Err(EditError::Need(silent));
        }
        names.survey(untouched)
    }
}

/// The pages an edit certainly reads: those holding its names, for
/// fetching at once before [`TrackRoot::edit`] asks for the rest.
pub fn pages_to_edit(root: &TrackRoot, edit: &TrackEdit) -> Vec<ObjectId> {
    let names = NameEdit::new(root, edit, &|_| None, &|_| String::new());
    names
        .affected()
        .into_iter()
        .filter_map(|j| root.pages.get(j).map(|p| p.id))
        .collect()
}
