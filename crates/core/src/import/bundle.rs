//! A DataBundle as an import source: its tree, from the index, mapped onto
//! timelines and modalities as a directory's is, and its files' bytes read
//! as a mount reads them (records decoded through the block cache), each
//! file checked against its CRC32C before anything is committed.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::future::{BoxFuture, FutureExt};
use packfs_format::bundle::crc32c;
use packfs_format::{name_order, Attrs};
use parking_lot::Mutex;
use thiserror::Error;

use super::scan::classify;
use super::source::{RowSource, SourceRow, TrackSource};
use super::{ImportError, Prepared};
use crate::bundle::index::{IndexEntry, Listed};
use crate::bundle::{Bundle, BundleError};
use crate::cache::CacheOptions;
use crate::catalog::bundle::BundleCatalog;
use crate::packer::{FileReader, PackError, PackFile};
use crate::reader::{ReadError, Reader};
use crate::source_tree::problems_report;
use crate::store::Store;

/// Bytes of a file read from the bundle at a time (a chunk is read in
/// such steps, so a read never holds a chunk twice).
const STEP: u64 = 8 << 20;

/// Why the bytes of a bundle's file could not be imported. Each names the
/// file as `BUNDLE/path`.
#[derive(Debug, Error)]
pub(crate) enum BundleFileError {
    /// The index could not say where its bytes are.
    #[error("{file}: {source}; nothing was committed")]
    Index {
        file: String,
        #[source]
        source: Box<BundleError>,
    },
    /// A record holding its bytes could not be read or decoded.
    #[error("{file}: {source}; nothing was committed")]
    Read {
        file: String,
        #[source]
        source: ReadError,
    },
    /// Its bytes are not those the index describes.
    #[error(
        "{file}: CRC32C of its bytes is {actual:#010x}, the bundle's index says \
         {expected:#010x}: the bundle is damaged; nothing was committed"
    )]
    Checksum {
        file: String,
        actual: u32,
        expected: u32,
    },
}

/// Lists the files of the bundle at `store`'s location (`index_dir` as for
/// [`Bundle::open`]) as import sources: every file's path below the
/// bundle's root is classified as a directory import classifies it
/// (`timeline` as [`ImportOptions::timeline`](super::ImportOptions::timeline)), problems are reported the same way, and
/// files and directories keep the mode and mtime the bundle records. The
/// index is read whole, so the rows are held whole too.
pub(super) async fn prepare(
    store: &Store,
    index_dir: &Path,
    timeline: Option<&str>,
) -> Result<Prepared, ImportError> {
    let bundle = Arc::new(Bundle::open(store, index_dir).await?);
    let location = bundle.location().to_owned();
    let listed = {
        let bundle = bundle.clone();
        crate::blocking::run(move || bundle.index().entries()).await?
    };
    // A damaged entry fails the import: nothing of it could be imported.
    let entries = listed
        .into_iter()
        .map(|l| l.and_then(Listed::entry).map_err(BundleError::from))
        .collect::<Result<Vec<_>, _>>()?;
    let mut problems = Vec::new();
    let mut tracks: BTreeMap<(String, String), Rows> = BTreeMap::new();
    let mut files = Vec::new();
    let mut dirs = Vec::new();
    for mut entry in entries {
        let mut parts: Vec<String> = entry.dir.split('/').map(str::to_owned).collect();
        parts.retain(|p| !p.is_empty());
        parts.push(entry.name.clone());
        let attrs = entry
            .meta
            .attributes()
            .map_or_else(Attrs::default, |a| Attrs {
                mode: Some((a.mode & 0o7777) as u16),
                mtime_ns: Some(a.mtime_ns),
            });
        if entry.meta.is_dir() {
            // Directories above the modality directories are not rows.
            if let Ok((t, m, name)) = classify(&parts, timeline) {
                dirs.push(((t.to_owned(), m.to_owned()), name, attrs));
            }
            continue;
        }
        match classify(&parts, timeline) {
            Ok((t, m, name)) => {
                let key = (t.to_owned(), m.to_owned());
                let rows = tracks.entry(key.clone()).or_default();
                rows.files += 1;
                rows.bytes += entry.meta.size;
                rows.names.push((name, Some(files.len())));
                // Not needed past here; a large bundle has many entries.
                entry.meta.user_data = None;
                files.push((entry, attrs, location.clone() + "/" + &parts.join("/")));
            }
            Err(problem) => problems.push(format!("{location}/{}: {problem}", parts.join("/"))),
        }
    }
    if let Some(report) = problems_report(problems) {
        return Err(ImportError::Source(report));
    }
    let mut dir_attrs: HashMap<(String, String), HashMap<String, Attrs>> = HashMap::new();
    for (key, name, attrs) in dirs {
        if tracks.contains_key(&key) {
            dir_attrs.entry(key).or_default().insert(name, attrs);
        }
    }
    let mut sources = Vec::with_capacity(tracks.len());
    for (key, rows) in tracks {
        let recorded = dir_attrs.remove(&key).unwrap_or_default();
        let key = Arc::new(key);
        let (files_in, bytes) = (rows.files, rows.bytes);
        sources.push(TrackSource {
            key: key.clone(),
            files: files_in,
            bytes,
            rows: RowSource::Listed(rows.in_order(recorded, &key, &files)),
        });
    }
    let reader = BundleFiles {
        catalog: BundleCatalog::new(bundle, std::time::SystemTime::now()),
        reader: Reader::new(store.clone(), CacheOptions::default(), None),
        entries: files.into_iter().map(|(entry, ..)| entry).collect(),
        pieces: Mutex::new(HashMap::new()),
    };
    Ok(Prepared {
        tracks: sources,
        reader: Box::new(reader),
    })
}

/// The files of one Track of a bundle, as they are found.
#[derive(Default)]
struct Rows {
    files: u64,
    bytes: u64,
    /// Item names, each with its file's number.
    names: Vec<(String, Option<usize>)>,
}

impl Rows {
    /// The rows of the Track `key`: its files (`files` by number: index
    /// entry, attributes, path for messages), the directories above them
    /// and those `recorded` (by name, with attributes), in the Track's
    /// order.
    fn in_order(
        self,
        mut recorded: HashMap<String, Attrs>,
        key: &Arc<(String, String)>,
        files: &[(IndexEntry, Attrs, String)],
    ) -> Vec<SourceRow> {
        let mut names = self.names;
        // Every directory set holds those above it too, so adding one
        // stops at the first that is there.
        let mut dirs: HashSet<String> = HashSet::from([String::new()]);
        let parents = names.iter().filter_map(|(n, _)| n.rsplit_once('/'));
        let tops = parents.map(|(parent, _)| parent);
        for mut dir in tops.chain(recorded.keys().map(String::as_str)) {
            while dirs.insert(dir.to_owned()) {
                dir = dir.rsplit_once('/').map_or("", |(parent, _)| parent);
            }
        }
        names.extend(dirs.into_iter().map(|d| (d, None)));
        // A directory before an item of the same name, as the Track has it.
        names.sort_unstable_by(|a, b| {
            name_order(&a.0, &b.0).then(a.1.is_some().cmp(&b.1.is_some()))
        });
        names
            .into_iter()
            .map(|(name, file)| match file {
                None => SourceRow::Dir {
                    attrs: recorded.remove(&name).unwrap_or_default(),
                    name,
                },
                Some(i) => {
                    let (entry, attrs, path) = &files[i];
                    SourceRow::File {
                        name,
                        attrs: *attrs,
                        file: PackFile {
                            track: key.clone(),
                            path: PathBuf::from(path),
                            size: entry.meta.size,
                            id: i,
                            special: None,
                        },
                        hard_link: None,
                    }
                }
            })
            .collect()
    }
}

/// The CRC32C of bytes `range` of a file.
struct Piece {
    range: Range<u64>,
    crc: u32,
}

/// Reads the files of a bundle for the packer, as a mount reads them.
struct BundleFiles {
    catalog: BundleCatalog,
    reader: Reader,
    /// The index entry of each file, by its number ([`PackFile::id`]).
    entries: Vec<IndexEntry>,
    /// Pieces read so far of files the packer reads in several calls
    /// (chunked files), until they cover the file and it is checked.
    pieces: Mutex<HashMap<usize, Vec<Piece>>>,
}

impl FileReader for BundleFiles {
    fn read<'a>(
        &'a self,
        parts: Vec<(&'a PackFile, Range<u64>)>,
    ) -> BoxFuture<'a, Result<Vec<u8>, PackError>> {
        async move {
            let total = parts.iter().map(|(_, r)| r.end - r.start).sum::<u64>();
            let mut body = Vec::with_capacity(total as usize);
            for (file, range) in parts {
                let (i, path) = (file.id, file.path.as_path());
                let crc = self
                    .read_range(i, range.clone(), &mut body, path)
                    .await
                    .map_err(|e| PackError::Source(Box::new(e)))?;
                self.check(i, Piece { range, crc }, path)
                    .map_err(|e| PackError::Source(Box::new(e)))?;
            }
            Ok(body)
        }
        .boxed()
    }
}

impl BundleFiles {
    /// Appends bytes `range` of file `i` (at `file`) to `body`; returns
    /// their CRC32C.
    async fn read_range(
        &self,
        i: usize,
        range: Range<u64>,
        body: &mut Vec<u8>,
        file: &Path,
    ) -> Result<u32, BundleFileError> {
        let name = || file.display().to_string();
        let entry = &self.entries[i];
        let mut crc = 0;
        let mut at = range.start;
        while at < range.end {
            let end = range.end.min(at + STEP);
            let extents = self
                .catalog
                .file_extents(entry, at..end)
                .map_err(|source| BundleFileError::Index {
                    file: name(),
                    source: Box::new(source),
                })?;
            let bytes =
                self.reader
                    .read(extents)
                    .await
                    .map_err(|source| BundleFileError::Read {
                        file: name(),
                        source,
                    })?;
            crc = crc32c(crc, &bytes);
            body.extend_from_slice(&bytes);
            at = end;
        }
        Ok(crc)
    }

    /// Checks file `i` (at `file`) against its CRC32C once `piece` and the
    /// pieces read before it cover the whole file.
    fn check(&self, i: usize, piece: Piece, file: &Path) -> Result<(), BundleFileError> {
        let meta = &self.entries[i].meta;
        let crc = if piece.range == (0..meta.size) {
            piece.crc
        } else {
            let mut pieces = self.pieces.lock();
            let read = pieces.entry(i).or_default();
            read.push(piece);
            let covered: u64 = read.iter().map(|p| p.range.end - p.range.start).sum();
            if covered < meta.size {
                return Ok(());
            }
            combine(pieces.remove(&i).expect("just added"))
        };
        match crc == meta.checksum {
            true => Ok(()),
            false => Err(BundleFileError::Checksum {
                file: file.display().to_string(),
                actual: crc,
                expected: meta.checksum,
            }),
        }
    }
}

/// The CRC32C of the bytes `pieces` cover, together (they cover a range
/// without gaps or overlaps, in any order).
fn combine(mut pieces: Vec<Piece>) -> u32 {
    pieces.sort_by_key(|p| p.range.start);
    pieces.iter().fold(0, |crc, p| {
        crc32c::crc32c_combine(crc, p.crc, (p.range.end - p.range.start) as usize)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_read_in_any_order_combine_into_the_whole_crc() {
        let bytes: Vec<u8> = (0..100_000u32).map(|i| (i * 7 + i / 13) as u8).collect();
        let cuts = [0, 1, 4096, 4097, 65_536, 99_999, 100_000];
        let mut pieces: Vec<Piece> = cuts
            .windows(2)
            .map(|w| Piece {
                range: w[0]..w[1],
                crc: crc32c(0, &bytes[w[0] as usize..w[1] as usize]),
            })
            .collect();
        pieces.reverse();
        pieces.swap(1, 3);
        assert_eq!(combine(pieces), crc32c(0, &bytes));
    }
}
