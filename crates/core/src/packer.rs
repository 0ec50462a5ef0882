//! The packer: groups files into packs and chunks and uploads them, many
//! PUTs in flight, with the file bytes they hold bounded by a memory
//! budget. `packfs import` packs a source tree or a bundle with it, a
//! read-write mount its spool files. A [`FileReader`] delivers the bytes:
//! [`LocalFiles`] reads local files.

use std::collections::{BTreeMap, HashMap};
use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom};
use std::ops::Range;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use futures::future::{BoxFuture, FutureExt};
use futures::{StreamExt, TryStreamExt};
use packfs_format::{Chunk, FragmentEntry, ItemManifest, ObjectId, Placement};
use thiserror::Error;
use tokio::sync::Semaphore;

use crate::dataset::{Dataset, DatasetError};
use crate::progress::{Progress, Unit};

/// A file to pack as item `name` of (`timeline`, `modality`).
#[derive(Clone, Debug)]
pub struct SourceFile {
    pub timeline: String,
    pub modality: String,
    /// Path below the modality directory, `/`-separated.
    pub name: String,
    /// Where the file is: the local file [`LocalFiles`] reads, or for
    /// another [`FileReader`] the name messages give it.
    pub path: PathBuf,
    pub size: u64,
}

/// The files the packer packs, by index, sorted by (timeline, modality,
/// name). An import of millions of files lists them compactly rather than
/// as [`SourceFile`]s (see `import`).
pub trait SourceFiles: Sync {
    /// How many files there are.
    fn count(&self) -> usize;
    /// The (timeline, modality) of file `i`: the Track it joins.
    fn track(&self, i: usize) -> (&str, &str);
    /// The size of file `i` when it was listed.
    fn size(&self, i: usize) -> u64;
    /// Where file `i` is: the local file [`LocalFiles`] reads, or for
    /// another [`FileReader`] the name messages give it.
    fn path(&self, i: usize) -> PathBuf;
}

impl SourceFiles for Vec<SourceFile> {
    fn count(&self) -> usize {
        self.len()
    }

    fn track(&self, i: usize) -> (&str, &str) {
        (&self[i].timeline, &self[i].modality)
    }

    fn size(&self, i: usize) -> u64 {
        self[i].size
    }

    fn path(&self, i: usize) -> PathBuf {
        self[i].path.clone()
    }
}

/// Where the packer reads the bytes of the files it packs.
pub trait FileReader: Send + Sync {
    /// Bytes `range` of each `(file, range)` of `parts` (`file` indexes
    /// `files`), concatenated in order. A file's ranges come in order
    /// within one call, but a chunked file's chunks come in separate calls,
    /// concurrently and in any order.
    fn read<'a>(
        &'a self,
        files: &'a dyn SourceFiles,
        parts: Vec<(usize, Range<u64>)>,
    ) -> BoxFuture<'a, Result<Vec<u8>, PackError>>;
}

/// Local files, read at their `path` on the blocking pool. A file whose
/// size is not the one listed is an error: the bytes packed would not be
/// the file listed.
pub struct LocalFiles;

/// A range of a local file to read, and the file's size when listed.
struct LocalPart {
    path: PathBuf,
    size: u64,
    range: Range<u64>,
}

impl FileReader for LocalFiles {
    fn read<'a>(
        &'a self,
        files: &'a dyn SourceFiles,
        parts: Vec<(usize, Range<u64>)>,
    ) -> BoxFuture<'a, Result<Vec<u8>, PackError>> {
        let parts: Vec<LocalPart> = parts
            .into_iter()
            .map(|(i, range)| LocalPart {
                path: files.path(i),
                size: files.size(i),
                range,
            })
            .collect();
        tokio::task::spawn_blocking(move || read_body(&parts))
            .map(|joined| joined.expect("file reader panicked"))
            .boxed()
    }
}

crate::options! {
/// How files are packed and uploaded.
#[derive(Clone, Debug)]
pub struct PackOptions {
    /// Most items in one pack.
    pub pack_items: usize,
    /// Most bytes in one pack (exceeded only by a single larger item).
    pub pack_bytes: u64,
    /// Files larger than this are split into chunks of this size.
    pub chunk_bytes: u64,
    /// Uploads in flight at once.
    pub concurrency: usize,
    /// Bytes of file data held in memory by in-flight uploads, at most.
    pub memory_bytes: u64,
}
}

impl Default for PackOptions {
    fn default() -> Self {
        PackOptions {
            pack_items: 1024,
            pack_bytes: 64 << 20,
            chunk_bytes: 64 << 20,
            concurrency: 64,
            memory_bytes: 512 << 20,
        }
    }
}

/// Why files could not be packed and uploaded. Nothing is committed then.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum PackError {
    #[error("read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} changed size while being packed ({expected} bytes when listed, now {actual}); nothing was committed")]
    Changed {
        path: PathBuf,
        expected: u64,
        actual: u64,
    },
    /// A [`FileReader`] other than [`LocalFiles`] could not deliver a
    /// file's bytes; its error names the file.
    #[error(transparent)]
    Source(Box<dyn std::error::Error + Send + Sync>),
    #[error("{0}")]
    Dataset(#[from] DatasetError),
}

/// A media type from the file extension; the bytes are never sniffed.
pub fn media_type(name: &str) -> &'static str {
    let ext = name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
    match ext.as_deref() {
        Some("jpg" | "jpeg") => "image/jpeg",
        Some("png") => "image/png",
        Some("webp") => "image/webp",
        Some("gif") => "image/gif",
        Some("tif" | "tiff") => "image/tiff",
        Some("wav") => "audio/wav",
        Some("flac") => "audio/flac",
        Some("mp3") => "audio/mpeg",
        Some("mp4") => "video/mp4",
        Some("webm") => "video/webm",
        Some("txt") => "text/plain",
        Some("json") => "application/json",
        Some("cbor") => "application/cbor",
        Some("npy") => "application/x-npy",
        Some("tar") => "application/x-tar",
        _ => "application/octet-stream",
    }
}

/// One upload: a pack of consecutive small files, or one chunk of a large one.
enum Upload {
    Pack {
        files: Vec<usize>,
        bytes: u64,
    },
    Chunk {
        file: usize,
        index: usize,
        range: Range<u64>,
    },
}

impl Upload {
    fn bytes(&self) -> u64 {
        match self {
            Upload::Pack { bytes, .. } => *bytes,
            Upload::Chunk { range, .. } => range.end - range.start,
        }
    }
}

enum Done {
    Pack {
        files: Vec<usize>,
        address: ObjectId,
        sizes: Vec<u64>,
    },
    Chunk {
        file: usize,
        index: usize,
        chunk: Chunk,
    },
}

/// The FragmentEntry of every file (parallel to the input; `t_start` and
/// `t_end` are left for the caller) and what the upload cost.
pub struct Uploaded {
    pub entries: Vec<FragmentEntry>,
    pub written: usize,
    pub reused: usize,
}

/// Splits files, which are sorted by (timeline, modality, name), into
/// upload units: small files of one modality are packed in order, up to
/// `pack_items` and `pack_bytes`; files over `chunk_bytes` are chunked.
fn plan(files: &dyn SourceFiles, o: &PackOptions) -> Vec<Upload> {
    let mut units = Vec::new();
    let mut pack: Vec<usize> = Vec::new();
    let mut pack_bytes = 0u64;
    let flush = |pack: &mut Vec<usize>, bytes: &mut u64, units: &mut Vec<Upload>| {
        if !pack.is_empty() {
            units.push(Upload::Pack {
                files: std::mem::take(pack),
                bytes: std::mem::take(bytes),
            });
        }
    };
    for i in 0..files.count() {
        let size = files.size(i);
        let same_track = pack
            .first()
            .is_none_or(|&p| files.track(p) == files.track(i));
        if !same_track {
            flush(&mut pack, &mut pack_bytes, &mut units);
        }
        if size > o.chunk_bytes {
            let mut start = 0;
            let mut index = 0;
            while start < size {
                let end = size.min(start + o.chunk_bytes);
                units.push(Upload::Chunk {
                    file: i,
                    index,
                    range: start..end,
                });
                start = end;
                index += 1;
            }
            continue;
        }
        if !pack.is_empty() && (pack.len() >= o.pack_items || pack_bytes + size > o.pack_bytes) {
            flush(&mut pack, &mut pack_bytes, &mut units);
        }
        pack.push(i);
        pack_bytes += size;
    }
    flush(&mut pack, &mut pack_bytes, &mut units);
    units
}

/// Uploads `files` (sorted by timeline, modality, name), read by
/// `reader`, as packs and chunks; the entries are parallel to `files`.
/// Bytes read are reported to `progress`.
pub async fn upload(
    dataset: &Dataset,
    files: &dyn SourceFiles,
    reader: &dyn FileReader,
    options: &PackOptions,
    progress: &dyn Progress,
) -> Result<Uploaded, PackError> {
    let units = plan(files, options);
    let total: u64 = (0..files.count()).map(|i| files.size(i)).sum();
    progress.begin("importing", Unit::Bytes, Some(total));
    // Permits are KiB of file data held in memory by in-flight units.
    let budget_kib = u32::try_from(options.memory_bytes.div_ceil(1024)).unwrap_or(u32::MAX);
    let memory = Arc::new(Semaphore::new(budget_kib as usize));
    let mut written = 0;
    let mut reused = 0;

    let done: Vec<Done> = futures::stream::iter(units)
        .map(|unit| {
            let memory = memory.clone();
            async move {
                let kib = u32::try_from(unit.bytes().div_ceil(1024))
                    .unwrap_or(u32::MAX)
                    .clamp(1, budget_kib);
                let _permit = memory
                    .acquire_many(kib)
                    .await
                    .expect("semaphore is never closed");
                let bytes = unit.bytes();
                let (done, fresh) = upload_unit(dataset, files, reader, unit).await?;
                progress.advance(bytes);
                Ok::<_, PackError>((done, fresh))
            }
        })
        .buffer_unordered(options.concurrency)
        .map_ok(|(done, fresh)| {
            if fresh {
                written += 1;
            } else {
                reused += 1;
            }
            done
        })
        .try_collect()
        .await?;
    let (done, twins_written) = separate_twin_packs(dataset, files, reader, done).await?;
    written += twins_written;

    let placeholder = FragmentEntry {
        t_start: 0,
        t_end: 0,
        byte_size: 0,
        address: ObjectId([0; 32]),
        placement: Placement::Whole,
    };
    let mut entries = vec![placeholder; files.count()];
    let mut chunked: BTreeMap<usize, BTreeMap<usize, Chunk>> = BTreeMap::new();
    for d in done {
        match d {
            // A one-item "pack" is simply that item's own object
            // (pack_items = 1 writes single-item fragments).
            Done::Pack {
                files: members,
                address,
                sizes,
            } if members.len() == 1 => {
                entries[members[0]] = FragmentEntry {
                    byte_size: sizes[0],
                    address,
                    placement: Placement::Whole,
                    ..entries[members[0]].clone()
                };
            }
            Done::Pack {
                files: members,
                address,
                sizes,
            } => {
                let mut offset = 0;
                for (i, size) in members.into_iter().zip(sizes) {
                    entries[i] = FragmentEntry {
                        byte_size: size,
                        address,
                        placement: Placement::Packed { offset },
                        ..entries[i].clone()
                    };
                    offset += size;
                }
            }
            Done::Chunk { file, index, chunk } => {
                chunked.entry(file).or_default().insert(index, chunk);
            }
        }
    }
    // ItemManifests are data objects too: written before any Track names them.
    for (file, chunks) in chunked {
        let manifest = ItemManifest {
            chunks: chunks.into_values().collect(),
        };
        let (timeline, modality) = files.track(file);
        let bytes = Bytes::from(manifest.encode());
        let address = ObjectId::of(&bytes);
        let path = dataset
            .store()
            .layout()
            .data_object(timeline, modality, &address);
        if dataset
            .store()
            .put_immutable(&path, bytes)
            .await
            .map_err(crate::dataset::DatasetError::from)?
        {
            written += 1;
        } else {
            reused += 1;
        }
        entries[file] = FragmentEntry {
            byte_size: manifest.total_size(),
            address,
            placement: Placement::Chunked,
            ..entries[file].clone()
        };
    }
    progress.end();
    Ok(Uploaded {
        entries,
        written,
        reused,
    })
}

/// Two packs of different files can have the same bytes (files of zeros
/// whose sizes add up alike, in another order): they are then one object
/// cut two ways, which no Track may hold (a pack's entries are disjoint
/// and tile it). The pack of the lowest-numbered files keeps the
/// object; each file of the others is stored as an object of its own.
/// Returns the units and how many objects that wrote.
async fn separate_twin_packs(
    dataset: &Dataset,
    files: &dyn SourceFiles,
    reader: &dyn FileReader,
    mut done: Vec<Done>,
) -> Result<(Vec<Done>, usize), PackError> {
    done.sort_by_key(|d| match d {
        Done::Pack { files, .. } => files[0],
        Done::Chunk { file, .. } => *file,
    });
    let mut cuts: HashMap<ObjectId, Vec<u64>> = HashMap::new();
    let mut out = Vec::with_capacity(done.len());
    let mut written = 0;
    for d in done {
        let Done::Pack {
            address,
            sizes,
            files: members,
        } = &d
        else {
            out.push(d);
            continue;
        };
        match cuts.get(address) {
            Some(cut) if cut != sizes => {
                for &m in members {
                    let unit = Upload::Pack {
                        files: vec![m],
                        bytes: files.size(m),
                    };
                    let (single, fresh) = upload_unit(dataset, files, reader, unit).await?;
                    written += usize::from(fresh);
                    out.push(single);
                }
            }
            Some(_) => out.push(d),
            None => {
                cuts.insert(*address, sizes.clone());
                out.push(d);
            }
        }
    }
    Ok((out, written))
}

/// Reads a unit's bytes, hashes them and PUTs the object unless present.
/// Returns whether it was uploaded.
async fn upload_unit(
    dataset: &Dataset,
    files: &dyn SourceFiles,
    reader: &dyn FileReader,
    unit: Upload,
) -> Result<(Done, bool), PackError> {
    let parts: Vec<(usize, Range<u64>)> = match &unit {
        Upload::Pack { files: members, .. } => {
            members.iter().map(|&i| (i, 0..files.size(i))).collect()
        }
        Upload::Chunk { file, range, .. } => vec![(*file, range.clone())],
    };
    let (timeline, modality) = files.track(parts[0].0);
    let body = reader.read(files, parts).await?;
    let address = ObjectId::of(&body);
    let size = body.len() as u64;
    let path = dataset
        .store()
        .layout()
        .data_object(timeline, modality, &address);
    let fresh = dataset
        .store()
        .put_immutable(&path, Bytes::from(body))
        .await
        .map_err(DatasetError::from)?;
    let done = match unit {
        Upload::Pack { files: members, .. } => {
            let sizes = members.iter().map(|&i| files.size(i)).collect();
            Done::Pack {
                files: members,
                address,
                sizes,
            }
        }
        Upload::Chunk { file, index, .. } => Done::Chunk {
            file,
            index,
            chunk: Chunk { address, size },
        },
    };
    Ok((done, fresh))
}

/// The concatenated bytes of each local file's range. A file whose size
/// changed since the scan is an error.
fn read_body(parts: &[LocalPart]) -> Result<Vec<u8>, PackError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| PackError::Read { path, source }
    };
    let total = parts
        .iter()
        .map(|p| p.range.end - p.range.start)
        .sum::<u64>();
    let mut body = Vec::with_capacity(total as usize);
    let mut dir = None;
    for LocalPart { path, size, range } in parts {
        let mut file = open_in_dir(&mut dir, path).map_err(io(path))?;
        let actual = file.metadata().map_err(io(path))?.len();
        if actual != *size {
            return Err(PackError::Changed {
                path: path.clone(),
                expected: *size,
                actual,
            });
        }
        let (start, len) = (range.start, range.end - range.start);
        if start > 0 {
            file.seek(SeekFrom::Start(start)).map_err(io(path))?;
        }
        let before = body.len();
        file.take(len).read_to_end(&mut body).map_err(io(path))?;
        let got = (body.len() - before) as u64;
        if got != len {
            return Err(PackError::Changed {
                path: path.clone(),
                expected: *size,
                actual: start + got,
            });
        }
    }
    Ok(body)
}

/// Opens `path` by its name in its directory, which is kept open in `dir`
/// for the next file: the files of a pack are consecutive names, mostly of
/// one directory, and looking up each one's whole path was much of an
/// import's CPU.
fn open_in_dir(dir: &mut Option<(PathBuf, OwnedFd)>, path: &Path) -> std::io::Result<File> {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return File::open(path);
    };
    if dir.as_ref().is_none_or(|(open, _)| open != parent) {
        let at = match parent.as_os_str().is_empty() {
            true => Path::new("."),
            false => parent,
        };
        // O_PATH: looking names up in it needs no read permission on it.
        let parent_fd = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
            .open(at)?;
        *dir = Some((parent.to_path_buf(), parent_fd.into()));
    }
    let (_, parent_fd) = dir.as_ref().expect("just opened");
    let name = CString::new(name.as_bytes())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    // SAFETY: a valid directory descriptor and a NUL-terminated name.
    let fd = unsafe {
        libc::openat(
            parent_fd.as_raw_fd(),
            name.as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened and is owned by nothing else.
    Ok(unsafe { File::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(path: &Path, size: u64, range: Range<u64>) -> LocalPart {
        LocalPart {
            path: path.to_path_buf(),
            size,
            range,
        }
    }

    #[test]
    fn local_files_are_read_by_name_in_their_directory_and_checked() {
        let tmp = tempfile::tempdir().unwrap();
        let (a, b, link) = (
            tmp.path().join("d1/a"),
            tmp.path().join("d2/b"),
            tmp.path().join("d2/link"),
        );
        std::fs::create_dir_all(a.parent().unwrap()).unwrap();
        std::fs::create_dir_all(b.parent().unwrap()).unwrap();
        std::fs::write(&a, b"hello").unwrap();
        std::fs::write(&b, b"world!").unwrap();
        std::os::unix::fs::symlink(&a, &link).unwrap();
        // Directories change between files; a link is followed; a range
        // past the start is read from its offset.
        let parts = [
            part(&a, 5, 0..5),
            part(&b, 6, 1..6),
            part(&link, 5, 0..5),
            part(&a, 5, 3..5),
        ];
        assert_eq!(read_body(&parts).unwrap(), b"helloorld!hellolo");

        match read_body(&[part(&a, 4, 0..4)]) {
            Err(PackError::Changed {
                path,
                expected: 4,
                actual: 5,
            }) => assert_eq!(path, a),
            other => panic!("expected Changed, got {:?}", other.map(|_| ())),
        }
        let missing = tmp.path().join("d1/missing");
        match read_body(&[part(&missing, 1, 0..1)]) {
            Err(PackError::Read { path, source }) => {
                assert_eq!(path, missing);
                assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
            }
            other => panic!("expected Read, got {:?}", other.map(|_| ())),
        }
    }
}
