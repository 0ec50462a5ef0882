//! The name pages a paged tree holds, each decoded once into its rows in
//! name order, under a bound of bytes: the least recently used go first.

use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use packfs_format::{name_order, ObjectId, TrackDir};
use parking_lot::Mutex;

use crate::dataset::{ChunkRef, ItemTable};

/// A row of `Page::rows` with this bit set is a directory (the rest is its
/// index in `Page::dirs`); else an item's row in the table.
const DIR_ROW: u32 = 1 << 31;

/// One name page: its items, its directories, and both merged in name
/// order, which is the order of `readdir` and of lookups.
pub(super) struct Page {
    /// Its items, without their packs' lengths or chunks.
    table: Arc<ItemTable>,
    /// The chunks of its chunked items read so far, by ItemManifest.
    chunks: Mutex<HashMap<ObjectId, Arc<[ChunkRef]>>>,
    dirs: Vec<TrackDir>,
    rows: Vec<u32>,
    bytes: usize,
}

/// A row of a page.
pub(super) enum Row<'a> {
    /// An item: its row in the page's table.
    Item(u32),
    Dir(&'a TrackDir),
}

impl Page {
    pub(super) fn new(table: ItemTable, dirs: Vec<TrackDir>) -> Page {
        let mut rows = Vec::with_capacity(table.len() + dirs.len());
        let (mut i, mut d) = (0, 0);
        while i < table.len() || d < dirs.len() {
            let item_first = match (i < table.len(), dirs.get(d)) {
                (true, Some(dir)) => name_order(table.get(i).name(), &dir.name) == Ordering::Less,
                (item, _) => item,
            };
            match item_first {
                true => {
                    rows.push(i as u32);
                    i += 1;
                }
                false => {
                    rows.push(DIR_ROW | d as u32);
                    d += 1;
                }
            }
        }
        let dir_bytes: usize = dirs.iter().map(|d| d.name.len() + 48).sum();
        let bytes = table.heap_bytes() + dir_bytes + rows.len() * 4;
        Page {
            table: Arc::new(table),
            chunks: Mutex::default(),
            dirs,
            rows,
            bytes,
        }
    }

    /// Its items.
    pub(super) fn table(&self) -> &Arc<ItemTable> {
        &self.table
    }

    /// The chunks of ItemManifest `id`, if they were read.
    pub(super) fn chunks(&self, id: &ObjectId) -> Option<Arc<[ChunkRef]>> {
        self.chunks.lock().get(id).cloned()
    }

    pub(super) fn keep_chunks(&self, id: ObjectId, chunks: Arc<[ChunkRef]>) {
        self.chunks.lock().insert(id, chunks);
    }

    pub(super) fn len(&self) -> usize {
        self.rows.len()
    }

    /// Row `r` (of `table`, its table) and its name.
    pub(super) fn row<'a>(&'a self, table: &'a ItemTable, r: usize) -> (Row<'a>, &'a str) {
        let row = self.rows[r];
        match row & DIR_ROW {
            0 => (Row::Item(row), table.get(row as usize).name()),
            _ => {
                let dir = &self.dirs[(row & !DIR_ROW) as usize];
                (Row::Dir(dir), &dir.name)
            }
        }
    }

    /// The first row whose name does not come before `name`.
    pub(super) fn seek(&self, table: &ItemTable, name: &str) -> usize {
        let (mut lo, mut hi) = (0, self.rows.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            match name_order(self.row(table, mid).1, name) {
                Ordering::Less => lo = mid + 1,
                _ => hi = mid,
            }
        }
        lo
    }
}

/// Pages by (Track, page) under a bound of bytes.
pub(super) struct PageCache {
    pages: Mutex<Held>,
    bound: usize,
    /// Pages being read ahead.
    coming: Mutex<HashSet<(u32, u32)>>,
}

struct Held {
    pages: lru::LruCache<(u32, u32), Arc<Page>>,
    bytes: usize,
}

impl PageCache {
    /// A cache of at most `bound` bytes of pages, but always the one in use.
    pub(super) fn new(bound: usize) -> Self {
        PageCache {
            pages: Mutex::new(Held {
                pages: lru::LruCache::unbounded(),
                bytes: 0,
            }),
            bound,
            coming: Mutex::default(),
        }
    }

    pub(super) fn get(&self, key: (u32, u32)) -> Option<Arc<Page>> {
        self.pages.lock().pages.get(&key).cloned()
    }

    /// Claims page `key` for reading ahead: false if it is held or already
    /// coming. [`PageCache::arrived`] ends the claim.
    pub(super) fn claim(&self, key: (u32, u32)) -> bool {
        !self.pages.lock().pages.contains(&key) && self.coming.lock().insert(key)
    }

    pub(super) fn arrived(&self, key: (u32, u32)) {
        self.coming.lock().remove(&key);
    }

    /// Keeps `page` (or the one another thread kept first, returned),
    /// dropping the least recently used pages beyond the bound.
    pub(super) fn insert(&self, key: (u32, u32), page: Page) -> Arc<Page> {
        let mut held = self.pages.lock();
        if let Some(page) = held.pages.get(&key) {
            return page.clone();
        }
        let page = Arc::new(page);
        held.bytes += page.bytes;
        held.pages.put(key, page.clone());
        while held.bytes > self.bound && held.pages.len() > 1 {
            let (_, old) = held.pages.pop_lru().expect("more than one page");
            held.bytes -= old.bytes;
        }
        page
    }

    /// Bytes of the pages held.
    pub(super) fn bytes(&self) -> usize {
        self.pages.lock().bytes
    }
}
