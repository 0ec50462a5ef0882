//! `packfs verify BUNDLE`: every shard header, every record (it decodes to
//! its length) and every file (its bytes, read as a mount reads them,
//! match its size and CRC32C).

use std::sync::Arc;

use packfs_format::bundle::crc32c;
use packfs_format::engine::{ByteRangeMap, SourceIndex};

use crate::bundle::index::IndexEntry;
use crate::bundle::{Bundle, BundleError};
use crate::catalog::bundle::BundleCatalog;
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
/// damage found inside it is listed in the report.
pub async fn verify(
    store: &Store,
    index_dir: &std::path::Path,
    reader: Reader,
) -> Result<BundleReport, BundleError> {
    let bundle = Arc::new(Bundle::open(store, index_dir).await?);
    let mut report = BundleReport::default();
    let index = bundle.index();
    let catalog = BundleCatalog::new(bundle.clone(), std::time::SystemTime::now());
    for shard in 0..index.config().shard_count {
        let object = bundle.shard(shard).expect("open checked every shard");
        let records = match index.records(shard) {
            Ok(records) => records,
            Err(e) => {
                report.problems.push(e.to_string());
                continue;
            }
        };
        for record in records {
            report.records += 1;
            let meta = &record.meta;
            if meta.zeros {
                continue;
            }
            let what = format!(
                "{} record at uncompressed offset {}",
                object.path, record.start
            );
            // Decoding checked that this sum fits.
            let end = meta.compressed_offset + meta.compressed_size;
            if end > object.len {
                report.problems.push(format!(
                    "{what}: stored at bytes {}..{end}, past the shard's end ({} bytes)",
                    meta.compressed_offset, object.len
                ));
                continue;
            }
            // Decoded as a mount decodes it, through the block cache: the
            // file pass below finds it decoded, read ahead in shard order.
            let len = meta.uncompressed_size;
            let mut map = ByteRangeMap::new(len);
            map.push_data(0, len, SourceIndex(0), 0);
            let source = Source::Record(Arc::new(catalog.record_ref(object, &record)));
            let extents = Extents {
                map,
                sources: vec![source],
            };
            if let Err(e) = reader.read(extents).await {
                report.problems.push(format!("{what}: {e}"));
            }
        }
    }
    for listed in index.entries()? {
        let path = match listed.dir.as_str() {
            "" => listed.name.clone(),
            dir => format!("{dir}/{}", listed.name),
        };
        let entry = match listed.entry() {
            Ok(entry) => entry,
            Err(e) => {
                report.problems.push(format!("{path}: {e}"));
                continue;
            }
        };
        if entry.meta.is_dir() {
            report.directories += 1;
            continue;
        }
        report.files += 1;
        match check_file(&catalog, &reader, &entry).await {
            Ok(()) => report.bytes += entry.meta.size,
            Err(detail) => report.problems.push(format!("{path}: {detail}")),
        }
    }
    Ok(report)
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
