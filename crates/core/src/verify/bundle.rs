//! `packfs verify BUNDLE`: every shard header (its padding too), that no
//! shard file lies past `shard_count` and that every key of the index is
//! of a kind the format defines, every record (where it is stored, the
//! stream it covers, one frame or member decoding to its length), every
//! entry (its name, its parent) and every file (its bytes, read as a
//! mount reads them, match its size and CRC32C).

use std::sync::Arc;

use std::collections::HashMap;

use packfs_format::bundle::{
    crc32c, is_shard_name, is_shard_of, is_valid_name, key_name, Compression, CONFIG_KEY,
    FILE_PREFIX, NAME_RULE, SHARD_HEADER_LEN,
};
use packfs_format::engine::{ByteRangeMap, SourceIndex};
use packfs_format::FormatError;

use crate::bundle::index::IndexEntry;
use crate::bundle::{Bundle, BundleError};
use crate::catalog::bundle::{join, BundleCatalog};
use crate::extents::{Extents, Source};
use crate::reader::Reader;
use crate::store::Store;

/// What [`verify`] found.
#[derive(Debug, Default)]
pub struct BundleReport {
    pub files: u64,
    pub directories: u64,
    pub records: u64,
    pub bytes: u64,
    /// One line per problem, naming the file or record.
    pub problems: Vec<String>,
}

/// Bytes of a file read at a time.
const READ: u64 = 8 << 20;

/// Checks the bundle at `store`'s location; `index_dir` as for
/// [`Bundle::open`]. Errors only when the bundle cannot be opened at all;
/// damage found inside it is listed in the report, one line a problem,
/// each naming the rule of `docs/DATABUNDLE.md` it breaks.
pub async fn verify(
    store: &Store,
    index_dir: &std::path::Path,
    reader: Reader,
) -> Result<BundleReport, BundleError> {
    let bundle = Arc::new(Bundle::open(store, index_dir).await?);
    let mut report = BundleReport::default();
    let index = bundle.index();
    let catalog = BundleCatalog::new(bundle.clone(), std::time::SystemTime::now());
    let shard_count = index.config().shard_count;
    for shard in 0..shard_count {
        check_header_padding(store, &bundle, shard, &mut report).await?;
        check_records(&bundle, &catalog, &reader, shard, &mut report).await?;
    }
    for object in store.list_dir(store.layout().root()).await? {
        let Some(name) = object.location.filename() else {
            continue;
        };
        if is_shard_name(name) && !is_shard_of(name, shard_count) {
            report.problems.push(format!(
                "{}: a shard file, but shard_count is {shard_count} (shards are numbered 0 to \
                 shard_count − 1)",
                object.location
            ));
        }
    }
    for key in index.stray_keys()? {
        report.problems.push(format!(
            "{}: of no kind the format defines (keys are `{CONFIG_KEY}`, `{FILE_PREFIX}…` and \
             the record keys of shards below shard_count)",
            key_name(&key)
        ));
    }
    let listed = index.entries()?;
    // Every path with an entry, and whether it is a directory (`None`:
    // its value does not decode).
    let kinds: HashMap<String, Option<bool>> = listed
        .iter()
        .flatten()
        .map(|l| {
            (
                join(&l.dir, &l.name),
                l.meta.as_ref().ok().map(|m| m.is_dir()),
            )
        })
        .collect();
    for listed in listed {
        // A key that names no entry is named by itself.
        let listed = match listed {
            Ok(listed) => listed,
            Err(e) => {
                report.problems.push(e.to_string());
                continue;
            }
        };
        let path = join(&listed.dir, &listed.name);
        let mut problem = |detail: String| report.problems.push(format!("{path}: {detail}"));
        if !is_valid_name(&listed.name) {
            problem(format!(
                "name {:?} is not allowed ({NAME_RULE})",
                listed.name
            ));
            continue;
        }
        if !listed.dir.is_empty() {
            let parent = match listed.dir.split('/').any(str::is_empty) {
                true => Err("is not a path of names joined by `/`"),
                false => match kinds.get(&listed.dir) {
                    None => Err("has no entry"),
                    Some(Some(false)) => Err("is a file"),
                    Some(_) => Ok(()),
                },
            };
            if let Err(what) = parent {
                problem(format!(
                    "its directory {:?} {what} (the parent of every entry is the root or \
                     a directory with an entry)",
                    listed.dir
                ));
                continue;
            }
        }
        let entry = match listed.meta {
            Ok(meta) => IndexEntry {
                id: listed.id,
                dir: listed.dir,
                name: listed.name,
                meta,
            },
            // Named by its path alone: the key says the same again.
            Err(FormatError::Shape { detail, .. }) => {
                problem(detail);
                continue;
            }
            Err(e) => {
                problem(e.to_string());
                continue;
            }
        };
        let meta = &entry.meta;
        if meta.is_dir() {
            report.directories += 1;
            if (meta.shard_index, meta.shard_offset, meta.checksum) != (0, 0, 0) {
                problem(
                    "a directory with shard_index, shard_offset or checksum set \
                     (they are 0 for a directory)"
                        .into(),
                );
            }
            continue;
        }
        report.files += 1;
        match check_file(&catalog, &reader, &entry).await {
            Ok(()) => report.bytes += meta.size,
            Err(detail) => problem(detail),
        }
    }
    Ok(report)
}

/// Checks that the header of shard `shard` holds zeros after its data, up
/// to `block_size` (opening the bundle read only the data).
async fn check_header_padding(
    store: &Store,
    bundle: &Bundle,
    shard: u32,
    report: &mut BundleReport,
) -> Result<(), BundleError> {
    let object = bundle.shard(shard).expect("open checked every shard");
    // A shard shorter than its header is said by its records or files.
    let end = bundle.index().config().block_size.min(object.len);
    let mut at = SHARD_HEADER_LEN as u64;
    while at < end {
        let to = end.min(at + READ);
        let bytes = store.get_range(&object.path, at..to).await?.bytes;
        if let Some(i) = bytes.iter().position(|&b| b != 0) {
            report.problems.push(format!(
                "{}: header byte {} is {:#04x} (header bytes 16 to block_size − 1 are zeros)",
                object.path,
                at + i as u64,
                bytes[i]
            ));
            break;
        }
        at = to;
    }
    Ok(())
}

/// Checks the records of shard `shard`: they cover its stream from 0
/// without gaps, each stored one starts where the padding of the one
/// before ends, the file ends after the last one's, and each decodes to
/// its length (through the block cache, as a mount decodes it: the file
/// pass finds them decoded) and, if all zeros, is a `zeros` record.
async fn check_records(
    bundle: &Bundle,
    catalog: &BundleCatalog,
    reader: &Reader,
    shard: u32,
    report: &mut BundleReport,
) -> Result<(), BundleError> {
    let index = bundle.index();
    let block = index.config().block_size;
    let object = bundle.shard(shard).expect("open checked every shard");
    let records = match index.records(shard) {
        Ok(records) => records,
        Err(e) => {
            report.problems.push(e.to_string());
            return Ok(());
        }
    };
    if index.compression() == Compression::None {
        if !records.is_empty() {
            report.problems.push(format!(
                "{}: {} records in a bundle without compression (compression `none` has no \
                 records)",
                object.path,
                records.len()
            ));
        }
        return Ok(());
    }
    // Where the next record starts in the stream, and in the shard file.
    let (mut stream, mut stored) = (0, block);
    let problems_before = report.problems.len();
    for record in records {
        report.records += 1;
        let meta = &record.meta;
        let what = format!(
            "{} record at uncompressed offset {}",
            object.path, record.start
        );
        let mut problem = |detail: String| report.problems.push(format!("{what}: {detail}"));
        if record.start != stream {
            problem(format!(
                "the records before it end at {stream} (records cover the stream from 0 \
                 without gaps or overlaps)"
            ));
        }
        if meta.uncompressed_size > index.config().record_size {
            problem(format!(
                "uncompressed_size {} is over record_size {}",
                meta.uncompressed_size,
                index.config().record_size
            ));
        }
        stream = record.start.saturating_add(meta.uncompressed_size);
        if meta.compressed_offset != stored {
            problem(format!(
                "compressed_offset is {}, not {stored} (a stored record starts where the \
                 padding of the one before ends, a `zeros` record has the offset the next \
                 stored one would have)",
                meta.compressed_offset
            ));
        }
        if meta.zeros {
            continue;
        }
        // Decoding checked that this sum fits.
        let end = meta.compressed_offset + meta.compressed_size;
        stored = end.checked_next_multiple_of(block).unwrap_or(end);
        if end > object.len {
            problem(format!(
                "stored at bytes {}..{end}, past the shard's end ({} bytes)",
                meta.compressed_offset, object.len
            ));
            continue;
        }
        let len = meta.uncompressed_size;
        let mut map = ByteRangeMap::new(len);
        map.push_data(0, len, SourceIndex(0), 0);
        let source = Source::Record(Arc::new(catalog.record_ref(object, &record)));
        let extents = Extents {
            map,
            sources: vec![source],
        };
        match reader.read(extents).await {
            Ok(bytes) if bytes.iter().all(|&b| b == 0) => problem(
                "all its bytes are zero but it is stored (an all-zero record is `zeros`)".into(),
            ),
            Ok(_) => {}
            Err(e) => problem(e.to_string()),
        }
    }
    // A shard cut short is said by its records already.
    if object.len != stored && report.problems.len() == problems_before {
        report.problems.push(format!(
            "{}: {} bytes long, its last record's padding ends at {stored} (a shard ends \
             after its last record's padding)",
            object.path, object.len
        ));
    }
    Ok(())
}

/// Reads file `entry` whole and compares its CRC32C.
async fn check_file(
    catalog: &BundleCatalog,
    reader: &Reader,
    entry: &IndexEntry,
) -> Result<(), String> {
    let meta = &entry.meta;
    let mut crc = 0;
    let mut at = 0;
    while at < meta.size {
        let end = meta.size.min(at + READ);
        let extents = catalog
            .file_extents(entry, at..end)
            .map_err(|e| e.to_string())?;
        let bytes = reader.read(extents).await.map_err(|e| e.to_string())?;
        crc = crc32c(crc, &bytes);
        at = end;
    }
    match crc == meta.checksum {
        true => Ok(()),
        false => Err(format!(
            "CRC32C is {crc:#010x}, the index says {:#010x}",
            meta.checksum
        )),
    }
}
