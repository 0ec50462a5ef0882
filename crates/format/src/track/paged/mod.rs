//! Paged Tracks: a Track's entries as immutable, content-addressed pages
//! under a small root, so that a reader fetches only the pages it needs and
//! a writer stores only the pages it changed.
//!
//! - The **root** is the Track object (`_packfs/tracks/<hash>`): a CBOR
//!   map `{"kind": "fragment", "pages": [[first, id, items, bytes,
//!   t_end]…],
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

mod edit;
mod encode;
mod read;
mod root;
#[cfg(test)]
mod tests;
mod write;

use std::cmp::Ordering;

use crate::{FragmentEntry, ObjectId, Placement, TrackDir, TrackItem};

pub use edit::{pages_to_edit, EditError, PageSource, Survey, TrackEdit};
pub use read::{check_lengths, read_pack_page, PagedReader};
pub use write::PagedWriter;

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

    /// Rows a name page holds on average.
    pub fn rows(&self) -> u64 {
        self.rows
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
    /// The largest `t_end` of those items: `None` for a page without
    /// items, and for a page of a root written before refs recorded it
    /// (its items do not say). A writer numbers new items after the
    /// largest of all pages.
    pub t_end: Option<i64>,
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
    /// The root decoded, its name pages listed in [`TrackRoot::pages`]
    /// even where it lists them through index pages: what an edit of this
    /// Track starts from without reading them.
    pub listed: TrackRoot,
    /// Every page the root names, with its bytes: name pages, then pack pages.
    pub pages: Vec<(ObjectId, Vec<u8>)>,
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

/// The offset of a packed entry.
fn packed(e: &FragmentEntry) -> Option<u64> {
    match e.placement {
        Placement::Packed { offset } => Some(offset),
        _ => None,
    }
}
