//! Writing one shard file: its header, then the bytes of its files as one
//! stream, cut into compressed records (or stored as is).

use std::fs::File;
use std::io::{ErrorKind, Read, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use packfs_format::bundle::{
    crc32c, shard_header, Compression, FileMetadata, FileType, ShardMetadata, LARGE_FILE,
};

use super::walk::Entry;
use super::CreateError;
use super::{BundleSource, CreateOptions};
use crate::progress::Progress;
use crate::source_tree::SourceIoError;

/// What a shard holds, for the index.
pub(super) struct Shard {
    /// The metadata of the files given, in their order.
    pub files: Vec<FileMetadata>,
    /// Each record's uncompressed start offset and metadata (none for
    /// `Compression::None`).
    pub records: Vec<(u64, ShardMetadata)>,
    /// The shard file's size.
    pub bytes: u64,
}

/// Writes shard `index` of `files` (all files of `src`, no directories) to
/// the new file `path`. Returns `None` if `stop` was set before it was done
/// (the file is then incomplete). Memory: one record and its compressed
/// bytes.
pub(super) fn write(
    src: &BundleSource,
    path: &Path,
    index: u32,
    files: &[&Entry],
    options: &CreateOptions,
    progress: &dyn Progress,
    stop: &AtomicBool,
) -> Result<Option<Shard>, CreateError> {
    let io = |source| CreateError::Io {
        path: path.to_owned(),
        source,
    };
    let mut out = Out {
        file: File::create_new(path).map_err(io)?,
        path,
        at: 0,
    };
    out.write(&shard_header(index, options.block_size))?;
    let mut writer = Writer {
        out,
        options,
        record: vec![0; options.record_size as usize],
        filled: 0,
        start: 0,
        records: Vec::new(),
    };
    let mut metas = Vec::with_capacity(files.len());
    for entry in files {
        if stop.load(Ordering::Relaxed) {
            return Ok(None);
        }
        let (offset, checksum) = writer.add_file(src, entry, progress)?;
        metas.push(FileMetadata {
            r#type: FileType::File as i32,
            shard_index: index,
            shard_offset: offset,
            size: entry.file_size.expect("shards hold files"),
            checksum,
            user_data: Some(entry.attributes.to_any()),
        });
    }
    writer.end_record()?;
    let Writer { out, records, .. } = writer;
    out.file.sync_all().map_err(io)?;
    Ok(Some(Shard {
        files: metas,
        records,
        bytes: out.at,
    }))
}

/// The shard file and how many bytes it holds.
struct Out<'a> {
    file: File,
    path: &'a Path,
    at: u64,
}

impl Out<'_> {
    fn write(&mut self, bytes: &[u8]) -> Result<(), CreateError> {
        self.file
            .write_all(bytes)
            .map_err(|source| CreateError::Io {
                path: self.path.to_owned(),
                source,
            })?;
        self.at += bytes.len() as u64;
        Ok(())
    }
}

/// The shard's stream: the record being filled, and where it starts.
struct Writer<'a> {
    out: Out<'a>,
    options: &'a CreateOptions,
    /// `record_size` bytes, of which the first `filled` are the record's.
    record: Vec<u8>,
    filled: usize,
    /// Offset of the record's first byte in the stream.
    start: u64,
    records: Vec<(u64, ShardMetadata)>,
}

impl Writer<'_> {
    /// Appends the file of `entry` to the stream; returns its offset there
    /// and its CRC32C. Fails if it is not as long as when it was listed.
    fn add_file(
        &mut self,
        src: &BundleSource,
        entry: &Entry,
        progress: &dyn Progress,
    ) -> Result<(u64, u32), CreateError> {
        let size = entry.file_size.expect("shards hold files");
        // A large file starts a record: reading it then never needs the
        // tail of the record before it.
        if size > LARGE_FILE {
            self.end_record()?;
        }
        let offset = self.start + self.filled as u64;
        let read_error = |source| SourceIoError {
            op: "read",
            path: entry.path.clone(),
            source,
        };
        let mut file = src.open_file(entry)?;
        let mut crc = 0;
        let mut left = size;
        while left > 0 {
            if self.filled == self.record.len() {
                self.end_record()?;
            }
            let room =
                (self.record.len() - self.filled).min(usize::try_from(left).unwrap_or(usize::MAX));
            let buf = &mut self.record[self.filled..self.filled + room];
            let n = read_some(&mut file, buf).map_err(read_error)?;
            if n == 0 {
                return Err(changed(entry, format!("{} bytes", size - left)));
            }
            crc = crc32c(crc, &buf[..n]);
            self.filled += n;
            left -= n as u64;
            progress.advance(n as u64);
        }
        if read_some(&mut file, &mut [0]).map_err(read_error)? != 0 {
            return Err(changed(entry, format!("more than {size} bytes")));
        }
        Ok((offset, crc))
    }

    /// Ends the record being filled, if it holds anything: stores it and
    /// starts the next one where it ends.
    fn end_record(&mut self) -> Result<(), CreateError> {
        if self.filled == 0 {
            return Ok(());
        }
        let data = &self.record[..self.filled];
        let block = self.options.block_size;
        let record = |compressed_size, zeros| ShardMetadata {
            compressed_offset: self.out.at,
            compressed_size,
            uncompressed_size: data.len() as u64,
            zeros,
        };
        match self.options.compression {
            Compression::None => self.out.write(data)?,
            _ if data.iter().all(|&b| b == 0) => self.records.push((self.start, record(0, true))),
            c => {
                debug_assert_eq!(self.out.at % block, 0, "records start on a block");
                let meta = {
                    let mut packed = c.compress(data, self.options.level);
                    let meta = record(packed.len() as u64, false);
                    packed.resize((packed.len() as u64).next_multiple_of(block) as usize, 0);
                    self.out.write(&packed)?;
                    meta
                };
                self.records.push((self.start, meta));
            }
        }
        self.start += self.filled as u64;
        self.filled = 0;
        Ok(())
    }
}

fn changed(entry: &Entry, now: String) -> CreateError {
    CreateError::Changed {
        path: entry.path.clone(),
        listed: entry.file_size.unwrap_or(0),
        now,
    }
}

/// One `read`, retried if a signal interrupts it.
fn read_some(file: &mut dyn Read, buf: &mut [u8]) -> std::io::Result<usize> {
    loop {
        match file.read(buf) {
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            result => return result,
        }
    }
}
