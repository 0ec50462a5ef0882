//! A bundle's index: a SQLite file of one key-value table, read on demand
//! (a lookup or a listing is one indexed query; nothing is loaded whole).

use std::path::{Path, PathBuf};

use packfs_format::bundle::{
    dir_prefix, file_key, parse_file_key, prefix_end, record_key_shard, shard_key, shard_prefix,
    BundleConfig, Compression, FileMetadata, ShardMetadata, APPLICATION_ID, CONFIG_KEY,
    FILE_PREFIX,
};
use packfs_format::FormatError;
use parking_lot::Mutex;
use prost::Message;
use rusqlite::types::ValueRef;
use rusqlite::{params, Connection, OpenFlags, OptionalExtension};

use super::BundleError;

/// The table every bundle index has. A rowid table (not `WITHOUT ROWID`):
/// rowids are stable ids of entries, which a mount uses as inode ids.
const SCHEMA: &str = "CREATE TABLE bundle (key TEXT PRIMARY KEY NOT NULL, value BLOB NOT NULL)";

/// Connections kept for concurrent queries (SQLite connections serve one
/// query at a time).
const CONNECTIONS: usize = 4;

/// An entry of the index: its row id, directory, name and metadata.
#[derive(Clone, Debug, PartialEq)]
pub struct IndexEntry {
    pub id: i64,
    pub dir: String,
    pub name: String,
    pub meta: FileMetadata,
}

/// An entry as a listing finds it: its value decoded on its own, so a
/// damaged value spoils its own entry only.
#[derive(Clone, Debug)]
pub struct Listed {
    pub id: i64,
    pub dir: String,
    pub name: String,
    pub meta: Result<FileMetadata, FormatError>,
}

impl Listed {
    /// The entry, if its value decoded.
    pub fn entry(self) -> Result<IndexEntry, FormatError> {
        Ok(IndexEntry {
            id: self.id,
            dir: self.dir,
            name: self.name,
            meta: self.meta?,
        })
    }
}

/// A record of a compressed shard: where its uncompressed bytes start and
/// how it is stored.
#[derive(Clone, Debug, PartialEq)]
pub struct IndexRecord {
    pub start: u64,
    pub meta: ShardMetadata,
}

/// An open index, read-only.
pub struct Index {
    path: PathBuf,
    connections: Vec<Mutex<Connection>>,
    config: BundleConfig,
    compression: Compression,
}

impl Index {
    /// Opens the index file at `path` and checks its configuration.
    pub fn open(path: &Path) -> Result<Index, BundleError> {
        let connections = (0..CONNECTIONS)
            .map(|_| open_read_only(path).map(Mutex::new))
            .collect::<Result<Vec<_>, _>>()?;
        let conn = connections[0].lock();
        let app: i32 = conn
            .query_row("PRAGMA application_id", [], |row| row.get(0))
            .map_err(|e| index_error(path, e))?;
        if app != APPLICATION_ID {
            return Err(BundleError::Index {
                path: path.to_owned(),
                detail: format!(
                    "SQLite application_id is {app:#x}, not {APPLICATION_ID:#x}: not a DataBundle index"
                ),
            });
        }
        let value: Option<Vec<u8>> = conn
            .query_row(
                "SELECT value FROM bundle WHERE key = ?1",
                [CONFIG_KEY],
                |row| row.get(0),
            )
            .optional()
            .map_err(|e| index_error(path, e))?;
        let value = value.ok_or_else(|| BundleError::Index {
            path: path.to_owned(),
            detail: format!("no {CONFIG_KEY:?} key"),
        })?;
        let (config, compression) = BundleConfig::decode_checked(&value)?;
        drop(conn);
        Ok(Index {
            path: path.to_owned(),
            connections,
            config,
            compression,
        })
    }

    /// The bundle's configuration (checked).
    pub fn config(&self) -> &BundleConfig {
        &self.config
    }

    /// How its records are compressed.
    pub fn compression(&self) -> Compression {
        self.compression
    }

    /// The entry `name` of directory `dir` (`""` is the root).
    pub fn lookup(&self, dir: &str, name: &str) -> Result<Option<IndexEntry>, BundleError> {
        let key = file_key(dir, name);
        let row = self.query(|conn| {
            conn.prepare_cached("SELECT rowid, value FROM bundle WHERE key = ?1")?
                .query_row([&key], |row| {
                    Ok((row.get::<_, i64>(0)?, row.get::<_, Vec<u8>>(1)?))
                })
                .optional()
        })?;
        row.map(|(id, value)| {
            Ok(IndexEntry {
                id,
                dir: dir.to_owned(),
                name: name.to_owned(),
                meta: FileMetadata::decode_checked(&key, &value)?,
            })
        })
        .transpose()
    }

    /// The entry with row id `id`, if it is a file or directory entry.
    pub fn entry(&self, id: i64) -> Result<Option<IndexEntry>, BundleError> {
        let row = self.query(|conn| {
            conn.prepare_cached("SELECT key, value FROM bundle WHERE rowid = ?1")?
                .query_row([id], |row| {
                    Ok((row.get::<_, String>(0)?, row.get::<_, Vec<u8>>(1)?))
                })
                .optional()
        })?;
        let Some((key, value)) = row else {
            return Ok(None);
        };
        let Ok((dir, name)) = parse_file_key(key.as_bytes()) else {
            return Ok(None);
        };
        Ok(Some(IndexEntry {
            id,
            dir: dir.to_owned(),
            name: name.to_owned(),
            meta: FileMetadata::decode_checked(&key, &value)?,
        }))
    }

    /// Every entry of directory `dir`, in key (byte) order of names, and
    /// as an error each key of the directory that names no entry.
    pub fn list(&self, dir: &str) -> Result<Vec<Result<Listed, FormatError>>, BundleError> {
        let prefix = dir_prefix(dir);
        let mut rows = self.rows_in(&prefix, &prefix_end(&prefix))?;
        // Keys with a `/` after the prefix belong to a subdirectory whose
        // name starts with " # ", even if they do not parse.
        rows.retain(|(_, key, _)| {
            key.strip_prefix(prefix.as_bytes())
                .is_some_and(|name| !name.contains(&b'/'))
        });
        Ok(rows.into_iter().map(listed).collect())
    }

    /// Every file and directory entry, in key order, and as an error each
    /// key of the `FILE_METADATA` range that names no entry (for `verify`).
    pub fn entries(&self) -> Result<Vec<Result<Listed, FormatError>>, BundleError> {
        let prefix = FILE_PREFIX;
        let rows = self.rows_in(prefix, &prefix_end(prefix))?;
        Ok(rows.into_iter().map(listed).collect())
    }

    /// The keys of no kind the format defines, in key order: every key but
    /// the configuration's, those of the `FILE_METADATA` range and the
    /// record keys of shards below `shard_count` (which the other
    /// queries read), and any key that is not text.
    pub fn stray_keys(&self) -> Result<Vec<Vec<u8>>, BundleError> {
        let shard_count = self.config.shard_count;
        // The `FILE_METADATA` range is read as bytes: a key there that is
        // not UTF-8 is reported as a key that names no entry.
        let read_elsewhere = |key: &[u8]| {
            key.starts_with(FILE_PREFIX.as_bytes())
                || std::str::from_utf8(key).is_ok_and(|key| {
                    key == CONFIG_KEY
                        || record_key_shard(key).is_some_and(|shard| shard < shard_count)
                })
        };
        self.query(|conn| {
            let mut stmt = conn.prepare_cached("SELECT key FROM bundle ORDER BY key")?;
            let mut rows = stmt.query([])?;
            let mut stray = Vec::new();
            while let Some(row) = rows.next()? {
                // TEXT affinity leaves a NOT NULL key text or a blob; range
                // queries compare text, so they read no blob.
                let (key, text) = match row.get_ref(0)? {
                    ValueRef::Text(key) => (key, true),
                    other => (other.as_bytes().unwrap_or_default(), false),
                };
                if !(text && read_elsewhere(key)) {
                    stray.push(key.to_vec());
                }
            }
            Ok(stray)
        })
    }

    /// The row ids, keys and values of the keys in `low..high`, in key
    /// order. Keys are read as bytes: one that is not UTF-8 spoils only
    /// itself.
    fn rows_in(&self, low: &str, high: &str) -> Result<Vec<Row>, BundleError> {
        self.query(|conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT rowid, CAST(key AS BLOB), value FROM bundle \
                 WHERE key >= ?1 AND key < ?2 ORDER BY key",
            )?;
            let rows = stmt.query_map([low, high], |row| {
                Ok((row.get(0)?, row.get(1)?, row.get(2)?))
            })?;
            rows.collect()
        })
    }

    /// The record of shard `shard` that holds uncompressed offset `offset`:
    /// the one with the greatest start not after it.
    pub(crate) fn record_at(
        &self,
        shard: u32,
        offset: u64,
    ) -> Result<Option<IndexRecord>, BundleError> {
        let (low, high) = (shard_prefix(shard), shard_key(shard, offset));
        let row = self.query(|conn| {
            conn.prepare_cached(
                "SELECT key, value FROM bundle WHERE key >= ?1 AND key <= ?2 \
                 ORDER BY key DESC LIMIT 1",
            )?
            .query_row([&low, &high], |row| {
                Ok((row.get::<_, String>(0)?, row.get::<_, Vec<u8>>(1)?))
            })
            .optional()
        })?;
        row.map(|(key, value)| record(&key, &value)).transpose()
    }

    /// The records of shard `shard` that hold bytes of `range` of its
    /// stream, in order (from the one holding `range.start`).
    pub(crate) fn records_covering(
        &self,
        shard: u32,
        range: std::ops::Range<u64>,
    ) -> Result<Vec<IndexRecord>, BundleError> {
        let Some(first) = self.record_at(shard, range.start)? else {
            return Ok(Vec::new());
        };
        self.records_in(shard_key(shard, first.start), shard_key(shard, range.end))
    }

    /// Every record of shard `shard`, in stream order.
    pub fn records(&self, shard: u32) -> Result<Vec<IndexRecord>, BundleError> {
        let prefix = shard_prefix(shard);
        let end = prefix_end(&prefix);
        self.records_in(prefix, end)
    }

    /// The records whose keys are in `low..high`, in order.
    fn records_in(&self, low: String, high: String) -> Result<Vec<IndexRecord>, BundleError> {
        let rows = self.query(|conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT key, value FROM bundle WHERE key >= ?1 AND key < ?2 ORDER BY key",
            )?;
            let rows = stmt.query_map([&low, &high], |row| {
                Ok((row.get::<_, String>(0)?, row.get::<_, Vec<u8>>(1)?))
            })?;
            rows.collect::<Result<Vec<_>, _>>()
        })?;
        rows.iter().map(|(key, value)| record(key, value)).collect()
    }

    /// Runs `f` on a free connection (or waits for the first).
    fn query<T>(
        &self,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T>,
    ) -> Result<T, BundleError> {
        let conn = self
            .connections
            .iter()
            .find_map(|c| c.try_lock())
            .unwrap_or_else(|| self.connections[0].lock());
        f(&conn).map_err(|e| index_error(&self.path, e))
    }
}

/// A row of the index: its id, key and value.
type Row = (i64, Vec<u8>, Vec<u8>);

/// The entry of a `FILE_METADATA` row, or what is wrong with its key.
fn listed((id, key, value): Row) -> Result<Listed, FormatError> {
    let (dir, name) = parse_file_key(&key)?;
    Ok(Listed {
        id,
        dir: dir.to_owned(),
        name: name.to_owned(),
        meta: FileMetadata::decode_checked(&file_key(dir, name), &value),
    })
}

fn record(key: &str, value: &[u8]) -> Result<IndexRecord, BundleError> {
    let (_, start) = packfs_format::bundle::parse_shard_key(key).ok_or_else(|| {
        let expected = "not a SHARD_METADATA key (`SHARD_METADATA # <shard, 8 digits> \
                            # <offset, 20 digits>`)";
        FormatError::shape(key, expected)
    })?;
    let meta = ShardMetadata::decode_checked(key, value)?;
    if start.checked_add(meta.uncompressed_size).is_none() {
        let detail = format!(
            "offset {start} + uncompressed_size {} overflows 64 bits",
            meta.uncompressed_size
        );
        return Err(FormatError::shape(key, detail).into());
    }
    Ok(IndexRecord { start, meta })
}

/// Opens `path` read-only as an immutable database: no locks, no journal,
/// nothing written next to it.
fn open_read_only(path: &Path) -> Result<Connection, BundleError> {
    let mut uri = url::Url::from_file_path(path).map_err(|()| BundleError::Index {
        path: path.to_owned(),
        detail: "not an absolute path".into(),
    })?;
    uri.set_query(Some("immutable=1"));
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
        | OpenFlags::SQLITE_OPEN_URI
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    Connection::open_with_flags(uri.as_str(), flags).map_err(|e| index_error(path, e))
}

fn index_error(path: &Path, e: rusqlite::Error) -> BundleError {
    BundleError::Index {
        path: path.to_owned(),
        detail: e.to_string(),
    }
}

/// Writes a new index file: rows go in one transaction, and nothing is at
/// the final path until [`IndexWriter::finish`] renames it there.
pub(crate) struct IndexWriter {
    conn: Connection,
    temp: PathBuf,
    path: PathBuf,
}

impl IndexWriter {
    /// Starts the index that will be at `path` (written beside it first).
    pub(crate) fn create(path: &Path) -> Result<IndexWriter, BundleError> {
        let temp = path.with_extension("sqlite.tmp");
        match std::fs::remove_file(&temp) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(BundleError::Io {
                    path: temp,
                    source: e,
                })
            }
            _ => {}
        }
        let conn = Connection::open(&temp).map_err(|e| index_error(&temp, e))?;
        conn.execute_batch(&format!(
            "PRAGMA application_id = {APPLICATION_ID}; PRAGMA journal_mode = OFF; \
             PRAGMA synchronous = OFF; {SCHEMA}; BEGIN;"
        ))
        .map_err(|e| index_error(&temp, e))?;
        Ok(IndexWriter {
            conn,
            temp,
            path: path.to_owned(),
        })
    }

    /// Adds `key` with `value`.
    pub(crate) fn put(&mut self, key: &str, value: &impl Message) -> Result<(), BundleError> {
        self.conn
            .prepare_cached("INSERT INTO bundle (key, value) VALUES (?1, ?2)")
            .and_then(|mut stmt| stmt.execute(params![key, value.encode_to_vec()]))
            .map(drop)
            .map_err(|e| index_error(&self.temp, e))
    }

    /// Commits the rows, makes the file durable and moves it to its path.
    pub(crate) fn finish(self) -> Result<(), BundleError> {
        self.conn
            .execute_batch("COMMIT; VACUUM;")
            .map_err(|e| index_error(&self.temp, e))?;
        self.conn
            .close()
            .map_err(|(_, e)| index_error(&self.temp, e))?;
        let io = |path: &Path| {
            let path = path.to_owned();
            move |source| BundleError::Io { path, source }
        };
        std::fs::File::open(&self.temp)
            .and_then(|f| f.sync_all())
            .map_err(io(&self.temp))?;
        std::fs::rename(&self.temp, &self.path).map_err(io(&self.path))?;
        if let Some(dir) = self.path.parent() {
            std::fs::File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(io(dir))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use packfs_format::bundle::{FileType, MAGIC, VERSION};

    fn file(shard_offset: u64, size: u64) -> FileMetadata {
        FileMetadata {
            r#type: FileType::File as i32,
            shard_index: 0,
            shard_offset,
            size,
            checksum: 0,
            user_data: None,
        }
    }

    #[test]
    fn lookups_listings_and_records_query_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bundle.sqlite");
        let mut w = IndexWriter::create(&path).unwrap();
        let config = BundleConfig {
            magic: MAGIC.into(),
            version: VERSION,
            block_size: 4096,
            record_size: 1 << 18,
            compression_algorithm: "zstd".into(),
            shard_count: 1,
        };
        w.put(CONFIG_KEY, &config).unwrap();
        let dir_meta = FileMetadata {
            r#type: FileType::Directory as i32,
            ..file(0, 0)
        };
        w.put(&file_key("", "a"), &dir_meta).unwrap();
        w.put(&file_key("a", "x"), &file(0, 10)).unwrap();
        w.put(&file_key("a", "y # z"), &file(10, 5)).unwrap();
        w.put(&file_key("a/b", "deep"), &file(15, 1)).unwrap();
        w.put(&file_key("a", " # c"), &dir_meta).unwrap();
        w.put(&file_key("a/ # c", "inner"), &file(16, 1)).unwrap();
        w.put(&file_key("a", ""), &file(17, 1)).unwrap();
        for (start, size) in [(0, 1 << 18), (1 << 18, 100)] {
            let record = ShardMetadata {
                compressed_offset: 4096 + start,
                compressed_size: 7,
                uncompressed_size: size,
                zeros: false,
            };
            w.put(&shard_key(0, start), &record).unwrap();
        }
        assert!(!path.exists(), "nothing at the path before finish");
        w.finish().unwrap();

        let index = Index::open(&path).unwrap();
        assert_eq!(index.config(), &config);
        let names: Vec<_> = index
            .list("a")
            .unwrap()
            .into_iter()
            .map(|e| e.map_or_else(|e| e.to_string(), |e| e.name))
            .collect();
        let empty = r#"index key "FILE_METADATA # a/ # ": an empty name"#;
        assert!(names[0].starts_with(empty), "{names:?}");
        assert_eq!(names[1..], [" # c", "x", "y # z"]);
        let inner = index.list("a/ # c").unwrap();
        assert_eq!(inner.len(), 1);
        assert_eq!(inner[0].as_ref().unwrap().name, "inner");
        let root = index.list("").unwrap();
        assert_eq!(root.len(), 1);
        assert!(root[0].as_ref().unwrap().meta.as_ref().unwrap().is_dir());
        let y = index.lookup("a", "y # z").unwrap().unwrap();
        assert_eq!(index.entry(y.id).unwrap().unwrap(), y);
        assert!(index.lookup("a", "missing").unwrap().is_none());
        let at = |offset| index.record_at(0, offset).unwrap().unwrap().start;
        assert_eq!(
            (at(0), at(5), at(1 << 18), at(u64::MAX)),
            (0, 0, 1 << 18, 1 << 18)
        );
        assert!(index.record_at(1, 0).unwrap().is_none());
        assert_eq!(index.records(0).unwrap().len(), 2);
        assert_eq!(index.entries().unwrap().len(), 7);
        let covering = |r| index.records_covering(0, r).unwrap().len();
        assert_eq!(covering(5..(1 << 18)), 1);
        assert_eq!(covering(5..(1 << 18) + 1), 2);
        assert_eq!(covering((1 << 18) + 1..(1 << 18) + 2), 1);
    }

    #[test]
    fn other_sqlite_files_are_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("other.sqlite");
        Connection::open(&path)
            .unwrap()
            .execute_batch("CREATE TABLE t (x)")
            .unwrap();
        let err = Index::open(&path).err().unwrap().to_string();
        assert!(
            err.contains("other.sqlite") && err.contains("application_id"),
            "{err}"
        );
    }
}
