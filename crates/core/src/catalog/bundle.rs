//! A DataBundle as a catalog: its tree from the index, queried on demand
//! (mount time does not grow with the file count), and its files' bytes
//! as maps over decoded records, explicit PAD for `zeros` records, or,
//! for an uncompressed bundle, ranges of the shard.

use std::borrow::Cow;
use std::num::NonZeroUsize;
use std::ops::Range;
use std::sync::Arc;
use std::time::SystemTime;

use packfs_format::bundle::{is_valid_name, Compression};
use packfs_format::engine::{ByteRangeMap, SourceIndex};
use packfs_format::{time_of_ns, FormatError};
use parking_lot::Mutex;

use super::{Catalog, CatalogError, Entry, WholeRead};
use crate::bundle::index::{IndexEntry, IndexRecord};
use crate::bundle::{Bundle, BundleError};
use crate::cache::{ObjectRef, RecordCodec, RecordRef};
use crate::extents::{Extents, Source};
use crate::kind::Kind;

/// Directory listings kept (a listing is read once per `readdir` batch).
const LISTINGS: usize = 64;

/// Entries kept: those of recent listings and lookups, which the kernel
/// asks `stat` of next (one index query each otherwise).
const ENTRIES: usize = 1 << 16;

/// One directory's listing.
type Listing = Arc<DirListing>;

/// A directory's entries: ids and names, in key order, and what is wrong
/// with the keys in its range that name no entry.
struct DirListing {
    children: Vec<(u64, String)>,
    unlisted: Vec<FormatError>,
}

/// The catalog of one bundle; ids are the index's row ids, 0 the root.
pub struct BundleCatalog {
    bundle: Arc<Bundle>,
    listings: Mutex<lru::LruCache<u64, Listing>>,
    entries: Mutex<lru::LruCache<u64, Arc<IndexEntry>>>,
    /// The root's mtime (the bundle has no entry for its root).
    root_mtime: SystemTime,
}

impl BundleCatalog {
    /// The catalog of `bundle`; its root shows `root_mtime`.
    pub fn new(bundle: Arc<Bundle>, root_mtime: SystemTime) -> Self {
        BundleCatalog {
            bundle,
            listings: Mutex::new(lru::LruCache::new(
                NonZeroUsize::new(LISTINGS).expect("not zero"),
            )),
            entries: Mutex::new(lru::LruCache::new(
                NonZeroUsize::new(ENTRIES).expect("not zero"),
            )),
            root_mtime,
        }
    }

    /// Entry `id` of the index (not the root).
    fn indexed(&self, id: u64) -> Result<Option<Arc<IndexEntry>>, CatalogError> {
        if let Some(entry) = self.entries.lock().get(&id) {
            return Ok(Some(entry.clone()));
        }
        let Some(row) = i64::try_from(id).ok().filter(|&id| id > 0) else {
            return Ok(None);
        };
        let entry = self.bundle.index().entry(row).map_err(|e| self.failed(e))?;
        Ok(entry.map(|e| self.remember(e)))
    }

    /// Keeps `entry` for the `stat` that usually follows.
    fn remember(&self, entry: IndexEntry) -> Arc<IndexEntry> {
        let entry = Arc::new(entry);
        self.entries.lock().put(entry.id as u64, entry.clone());
        entry
    }

    /// `e`, naming the bundle (a mount logs it where it answers `EIO`; a
    /// command says it once, as its error).
    fn failed(&self, e: impl std::fmt::Display) -> CatalogError {
        CatalogError(format!("bundle {}: {e}", self.bundle.location()))
    }

    /// The path of directory `dir` relative to the root (`""` for it).
    fn dir_path(&self, dir: u64) -> Result<Option<String>, CatalogError> {
        if dir == 0 {
            return Ok(Some(String::new()));
        }
        let entry = self.indexed(dir)?.filter(|e| e.meta.is_dir());
        Ok(entry.map(|e| join(&e.dir, &e.name)))
    }

    /// The entries of directory `dir`. One whose value is damaged is
    /// listed all the same (its name is in its key); its `stat` fails. A
    /// key that does not parse has no name to list: it is logged, kept
    /// for [`Catalog::unlisted`], and the other entries are listed.
    fn listing(&self, dir: u64) -> Option<Listing> {
        if let Some(listing) = self.listings.lock().get(&dir) {
            return Some(listing.clone());
        }
        let path = self.dir_path(dir).ok()??;
        let entries = self.bundle.index().list(&path).unwrap_or_else(|e| {
            tracing::error!("{}", self.failed(e));
            Vec::new()
        });
        let mut children = Vec::with_capacity(entries.len());
        let mut unlisted = Vec::new();
        for listed in entries {
            let listed = match listed {
                Ok(listed) => listed,
                Err(e) => {
                    tracing::error!("{}", self.failed(&e));
                    unlisted.push(e);
                    continue;
                }
            };
            // A name no directory may hold (`..`, `.`) is not listed:
            // `packfs verify` reports it.
            if !is_valid_name(&listed.name) {
                continue;
            }
            children.push((listed.id as u64, listed.name.clone()));
            if let Ok(entry) = listed.entry() {
                self.remember(entry);
            }
        }
        let listing: Listing = Arc::new(DirListing { children, unlisted });
        self.listings.lock().put(dir, listing.clone());
        Some(listing)
    }

    /// Stored record `record` of shard object `shard`, as the block cache
    /// reads and decodes it: read up to the next block, where the next
    /// record starts, so that reads of consecutive records abut.
    pub(crate) fn record_ref(&self, shard: &ObjectRef, record: &IndexRecord) -> RecordRef {
        let index = self.bundle.index();
        let start = record.meta.compressed_offset;
        let end = start + record.meta.compressed_size;
        let padded = end
            .checked_next_multiple_of(index.config().block_size)
            .unwrap_or(end)
            .min(shard.len)
            .max(end);
        RecordRef {
            object: shard.clone(),
            stored: start..padded,
            compressed: record.meta.compressed_size,
            len: record.meta.uncompressed_size,
            codec: RecordCodec::Bundle(index.compression()),
        }
    }

    /// The map of bytes `range` (within its size) of file `entry`, as
    /// [`Catalog::extents`] gives it for the entry's id, or what is wrong
    /// with the index (not naming the file: callers do). For a reader that holds the entry already, as
    /// `packfs import` of a bundle does.
    pub(crate) fn file_extents(
        &self,
        entry: &IndexEntry,
        range: Range<u64>,
    ) -> Result<Extents, BundleError> {
        let meta = &entry.meta;
        let len = range.end - range.start;
        let mut map = ByteRangeMap::new(len);
        let mut sources = Vec::new();
        if len == 0 {
            return Ok(Extents { map, sources });
        }
        let shard = self.bundle.shard(meta.shard_index).ok_or_else(|| {
            packfs_format::FormatError::shape(
                "shard_index",
                format!("shard {} does not exist", meta.shard_index),
            )
        })?;
        let overflow = |what, left, right| BundleError::Overflow { what, left, right };
        // Checked once for the whole file: every range of it then fits.
        meta.shard_offset
            .checked_add(meta.size)
            .ok_or_else(|| overflow("shard_offset + size", meta.shard_offset, meta.size))?;
        let stream = meta.shard_offset + range.start..meta.shard_offset + range.end;
        let index = self.bundle.index();
        let compression = index.compression();
        let block_size = index.config().block_size;
        if compression == Compression::None {
            let start = block_size.checked_add(meta.shard_offset).ok_or_else(|| {
                overflow("block_size + shard_offset", block_size, meta.shard_offset)
            })?;
            start
                .checked_add(meta.size)
                .ok_or_else(|| overflow("block_size + shard_offset + size", start, meta.size))?;
            sources.push(Source::Object(shard.clone()));
            map.push_data(0, len, SourceIndex(0), block_size + stream.start);
            return Ok(Extents { map, sources });
        }
        for record in index.records_covering(meta.shard_index, stream.clone())? {
            let held = record.start..record.start + record.meta.uncompressed_size;
            let (from, to) = (stream.start.max(held.start), stream.end.min(held.end));
            if from >= to {
                continue;
            }
            let dest = from - stream.start;
            if record.meta.zeros {
                map.push_pad(dest, to - from);
                continue;
            }
            sources.push(Source::Record(Arc::new(self.record_ref(shard, &record))));
            map.push_data(
                dest,
                to - from,
                SourceIndex(sources.len() - 1),
                from - held.start,
            );
        }
        // Bytes no record holds stay a gap: the read fails (EIO), naming
        // it, instead of inventing bytes.
        Ok(Extents { map, sources })
    }
}

/// The path of entry `name` of directory `dir`, from the bundle's root.
pub(crate) fn join(dir: &str, name: &str) -> String {
    match dir {
        "" => name.to_owned(),
        dir => format!("{dir}/{name}"),
    }
}

fn mtime(entry: &IndexEntry) -> SystemTime {
    entry
        .meta
        .attributes()
        .map_or(SystemTime::UNIX_EPOCH, |a| time_of_ns(a.mtime_ns))
}

impl Catalog for BundleCatalog {
    fn entry(&self, id: u64) -> Result<Option<Entry>, CatalogError> {
        if id == 0 {
            return Ok(Some(Entry {
                kind: Kind::Dir,
                size: 0,
                perm: 0o555,
                mtime: self.root_mtime,
                volatile: false,
            }));
        }
        let Some(entry) = self.indexed(id)? else {
            return Ok(None);
        };
        let kind = match entry.meta.is_dir() {
            true => Kind::Dir,
            false => Kind::File,
        };
        let perm = match (entry.meta.attributes(), kind) {
            (Some(a), _) => (a.mode & 0o7777) as u16,
            (None, Kind::Dir) => 0o555,
            (None, Kind::File) => 0o444,
        };
        Ok(Some(Entry {
            kind,
            size: entry.meta.size,
            perm,
            mtime: mtime(&entry),
            volatile: false,
        }))
    }

    fn lookup(&self, dir: u64, name: &[u8]) -> Result<Option<u64>, CatalogError> {
        let (Ok(name), Some(path)) = (std::str::from_utf8(name), self.dir_path(dir)?) else {
            return Ok(None);
        };
        let found = self.bundle.index().lookup(&path, name);
        Ok(found
            .map_err(|e| self.failed(e))?
            .map(|e| self.remember(e).id as u64))
    }

    fn child(&self, dir: u64, index: usize) -> Option<(u64, Cow<'_, str>)> {
        let listing = self.listing(dir)?;
        let (id, name) = listing.children.get(index)?;
        Some((*id, Cow::Owned(name.clone())))
    }

    fn unlisted(&self, dir: u64) -> Vec<CatalogError> {
        let listing = self.listing(dir);
        let unlisted = listing.iter().flat_map(|l| &l.unlisted);
        unlisted.map(|e| self.failed(e)).collect()
    }

    fn parent(&self, dir: u64) -> Option<u64> {
        if dir == 0 {
            return None;
        }
        let entry = self.indexed(dir).ok()??;
        if entry.dir.is_empty() {
            return Some(0);
        }
        let (up, name) = entry.dir.rsplit_once('/').unwrap_or(("", &entry.dir));
        let parent = self.bundle.index().lookup(up, name).ok()??;
        Some(parent.id as u64)
    }

    fn extents(&self, id: u64, range: Range<u64>) -> Result<Option<Extents>, CatalogError> {
        let Some(entry) = self.indexed(id)?.filter(|e| !e.meta.is_dir()) else {
            return Ok(None);
        };
        let end = range.end.min(entry.meta.size);
        let range = range.start.min(end)..end;
        let extents = self
            .file_extents(&entry, range)
            .map_err(|e| self.failed(format!("{}: {e}", join(&entry.dir, &entry.name))))?;
        Ok(Some(extents))
    }

    fn whole_read(&self, id: u64) -> Result<Option<WholeRead>, CatalogError> {
        let Some(entry) = self.indexed(id)?.filter(|e| !e.meta.is_dir()) else {
            return Ok(None);
        };
        let file = format!(
            "bundle {}: {}",
            self.bundle.location(),
            join(&entry.dir, &entry.name)
        );
        Ok(Some(WholeRead::new(
            file,
            entry.meta.size,
            entry.meta.checksum,
        )))
    }
}
