//! The packer: groups files into packs and chunks and uploads them, many
//! PUTs in flight, with the file bytes they hold bounded by a memory
//! budget. Files come as a stream of rows in the order of their Tracks
//! ([`Units`] cuts it into uploads as it comes) and their entries go out
//! in the same order ([`Packer`]), so a source of any number of files is
//! packed holding only what is in flight. `packfs import` packs a source
//! tree or a bundle with it, a read-write mount its spool files
//! ([`upload`]). A [`FileReader`] delivers the bytes: [`LocalFiles`]
//! reads local files.

mod local_files;
mod units;

use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};
use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use packfs_format::{Chunk, FragmentEntry, ItemManifest, ObjectId, Placement, Special};
use thiserror::Error;
use tokio::sync::Semaphore;

use crate::dataset::{Dataset, DatasetError};
use crate::progress::{Progress, Unit as ProgressUnit};
pub use local_files::LocalFiles;
pub(crate) use units::{Unit, Units};

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

/// A file as the packer reads it.
#[derive(Clone, Debug)]
pub struct PackFile {
    /// The (timeline, modality) whose data objects will hold it.
    pub track: Arc<(String, String)>,
    /// Where the file is: the local file [`LocalFiles`] reads, or for
    /// another [`FileReader`] the name messages give it.
    pub path: PathBuf,
    /// Its size when it was listed.
    pub size: u64,
    /// The source's own number for it, for a reader that needs more than
    /// its path (a bundle's index entry).
    pub id: usize,
    /// What it is if not a regular file: a symbolic link's bytes are its
    /// target, the others have none (a FIFO or a device is never opened).
    pub special: Option<Special>,
}

/// Where the packer reads the bytes of the files it packs.
pub trait FileReader: Send + Sync {
    /// Bytes `range` of each file of `parts`, concatenated in order. A
    /// file's ranges come in order within one call, but a chunked file's
    /// chunks come in separate calls, concurrently.
    fn read<'a>(
        &'a self,
        parts: Vec<(&'a PackFile, Range<u64>)>,
    ) -> BoxFuture<'a, Result<Vec<u8>, PackError>>;
}

/// A row of the packer's input: a file to pack, or a row of the caller's
/// passed through in its place (a directory of a Track being written).
/// `T` is the caller's and comes back with the row's output.
pub(crate) enum Input<T> {
    File(PackFile, T),
    Pass(T),
    /// In a pack, the row of a large file stored by the chunk units
    /// before it ([`Units`] makes these).
    Chunked(T),
}

/// A row of the packer's output, in the order of the input.
pub(crate) struct Output<T> {
    pub(crate) tag: T,
    /// Where a file's bytes are stored; `None` for a row passed through.
    pub(crate) stored: Option<Stored>,
}

/// Where the packer stored a file.
pub(crate) struct Stored {
    /// Its entry; `t_start` and `t_end` are left for the caller.
    pub(crate) entry: FragmentEntry,
    /// The length of its pack, when it is packed.
    pub(crate) pack_length: u64,
}

crate::options! {
/// How files are packed and uploaded.
#[derive(Clone, Debug)]
pub struct PackOptions {
    /// Most items in one pack.
    pub pack_items: usize,
    /// Most bytes in one pack (exceeded only by a single larger item).
    pub pack_bytes: u64,
    /// Files larger than this are split into chunks of this size, or
    /// smaller ones (`min_chunk_bytes`).
    pub chunk_bytes: u64,
    /// Files larger than this are chunked [default: `chunk_bytes`].
    pub chunk_above: Option<u64>,
    /// The smallest chunk [default: `chunk_bytes`]. A file is cut into
    /// chunks of the power of two that makes about 1024 of them, at least
    /// this and at most `chunk_bytes` ([`PackOptions::chunk_size`]): small
    /// chunks make a file rewritten in place (a database, a log, a
    /// checkpoint) store only the chunks a change falls in, as every
    /// chunk already stored is found by its hash and not uploaded again.
    pub min_chunk_bytes: Option<u64>,
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
            chunk_above: None,
            min_chunk_bytes: None,
            concurrency: 64,
            memory_bytes: 512 << 20,
        }
    }
}

impl PackOptions {
    /// The chunks a file of `size` bytes is cut into, if it is chunked:
    /// their size (the last may be shorter).
    pub fn chunk_size(&self, size: u64) -> Option<u64> {
        let largest = self.chunk_bytes.max(1);
        if size <= self.chunk_above.unwrap_or(largest) {
            return None;
        }
        let smallest = self.min_chunk_bytes.unwrap_or(largest).clamp(1, largest);
        // A power of two: a file that grows or shrinks keeps its cuts
        // until its size crosses one, so its unchanged chunks keep their
        // hashes.
        let fitting = size.div_ceil(1024).next_power_of_two();
        Some(fitting.clamp(smallest, largest))
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

/// A unit uploaded, and whether its object was new to the store.
enum Done<T> {
    /// A pack's rows and the object holding its files (address, length):
    /// `None` when it had none.
    Pack {
        rows: Vec<Input<T>>,
        stored: Option<(ObjectId, u64)>,
    },
    Chunk {
        file: PackFile,
        chunk: Chunk,
        last: bool,
    },
}

/// Uploads a stream of units, many at once within the memory budget, and
/// hands out the outputs of their rows in order ([`Packer::next`]).
pub(crate) struct Packer<'a, T> {
    dataset: &'a Dataset,
    reader: &'a dyn FileReader,
    /// The units uploaded, in order.
    done: BoxStream<'a, Result<(Done<T>, bool), PackError>>,
    ready: VecDeque<Output<T>>,
    /// The chunks of the large file being uploaded, so far.
    chunks: Vec<Chunk>,
    /// Large files stored, for the [`Input::Chunked`] rows of the next
    /// pack, in order.
    chunked: VecDeque<Stored>,
    /// The cut of each pack stored so far: a hash of its files' sizes.
    cuts: HashMap<ObjectId, ObjectId>,
    /// Data objects uploaded.
    pub(crate) written: usize,
    /// Data objects the store held already.
    pub(crate) reused: usize,
}

impl<'a, T: Send + 'a> Packer<'a, T> {
    /// Uploads `units` with `reader`'s bytes into `dataset`, reporting
    /// bytes read to `progress`.
    pub(crate) fn new(
        dataset: &'a Dataset,
        reader: &'a dyn FileReader,
        options: &PackOptions,
        progress: &'a dyn Progress,
        units: impl Stream<Item = Unit<T>> + Send + 'a,
    ) -> Self {
        // Permits are KiB of file data held in memory by in-flight units.
        let budget_kib = u32::try_from(options.memory_bytes.div_ceil(1024)).unwrap_or(u32::MAX);
        let memory = Arc::new(Semaphore::new(budget_kib as usize));
        let done = units
            .map(move |unit| {
                let memory = memory.clone();
                async move {
                    let bytes = unit.bytes();
                    let kib = u32::try_from(bytes.div_ceil(1024))
                        .unwrap_or(u32::MAX)
                        .clamp(1, budget_kib);
                    let _permit = memory
                        .acquire_many(kib)
                        .await
                        .expect("semaphore is never closed");
                    let done = upload_unit(dataset, reader, unit).await?;
                    progress.advance(bytes);
                    Ok(done)
                }
            })
            .buffered(options.concurrency.max(1))
            .boxed();
        Packer {
            dataset,
            reader,
            done,
            ready: VecDeque::new(),
            chunks: Vec::new(),
            chunked: VecDeque::new(),
            cuts: HashMap::new(),
            written: 0,
            reused: 0,
        }
    }

    /// The output of the next row; `None` after the last.
    pub(crate) async fn next(&mut self) -> Result<Option<Output<T>>, PackError> {
        loop {
            if let Some(out) = self.ready.pop_front() {
                return Ok(Some(out));
            }
            let Some(done) = self.done.next().await else {
                return Ok(None);
            };
            let (done, fresh) = done?;
            self.count(fresh);
            self.settle(done).await?;
        }
    }

    fn count(&mut self, fresh: bool) {
        match fresh {
            true => self.written += 1,
            false => self.reused += 1,
        }
    }

    /// Turns a unit uploaded into the outputs of its rows.
    async fn settle(&mut self, done: Done<T>) -> Result<(), PackError> {
        match done {
            Done::Pack { rows, stored: None } => {
                for row in rows {
                    let out = self.passed(row);
                    self.ready.push_back(out);
                }
            }
            Done::Pack {
                rows,
                stored: Some((address, length)),
            } => match self.is_twin(address, &rows) {
                true => self.store_apart(rows).await?,
                false => self.place(rows, address, length),
            },
            Done::Chunk { file, chunk, last } => {
                self.chunks.push(chunk);
                if !last {
                    return Ok(());
                }
                // ItemManifests are data objects too: written before any
                // Track names them.
                let manifest = ItemManifest {
                    chunks: std::mem::take(&mut self.chunks),
                };
                let (address, _, fresh) =
                    put_data(self.dataset, &file.track, manifest.encode()).await?;
                self.count(fresh);
                let entry = entry(manifest.total_size(), address, Placement::Chunked);
                self.chunked.push_back(Stored {
                    entry,
                    pack_length: 0,
                });
            }
        }
        Ok(())
    }

    /// The output of a row of a pack that is not one of its files.
    fn passed(&mut self, row: Input<T>) -> Output<T> {
        match row {
            Input::Pass(tag) => Output { tag, stored: None },
            Input::Chunked(tag) => Output {
                tag,
                stored: Some(
                    self.chunked
                        .pop_front()
                        .expect("a large file's chunks come before its row"),
                ),
            },
            Input::File(..) => unreachable!("a file of a pack is placed"),
        }
    }

    /// Whether the pack `address` of the files of `rows` is one stored
    /// before with other files' bytes cut another way. Two packs of
    /// different files can have the same bytes (files of zeros whose sizes
    /// add up alike, in another order): they are then one object cut two
    /// ways, which no Track may hold (a pack's entries are disjoint and
    /// tile it). The first pack keeps the object.
    fn is_twin(&mut self, address: ObjectId, rows: &[Input<T>]) -> bool {
        let mut sizes = Vec::with_capacity(rows.len() * 8);
        for row in rows {
            if let Input::File(file, _) = row {
                sizes.extend_from_slice(&file.size.to_le_bytes());
            }
        }
        let cut = ObjectId::of(&sizes);
        match self.cuts.entry(address) {
            Entry::Occupied(first) => *first.get() != cut,
            Entry::Vacant(slot) => {
                slot.insert(cut);
                false
            }
        }
    }

    /// The outputs of a pack's rows, its files stored in `address`,
    /// `length` bytes long. A one-file "pack" is simply that file's own
    /// object (`pack_items` = 1 writes single-item fragments).
    fn place(&mut self, rows: Vec<Input<T>>, address: ObjectId, length: u64) {
        let files = rows.iter().filter(|r| matches!(r, Input::File(..))).count();
        let mut offset = 0;
        for row in rows {
            let out = match row {
                Input::File(file, tag) => {
                    let placement = match files {
                        1 => Placement::Whole,
                        _ => Placement::Packed { offset },
                    };
                    offset += file.size;
                    let entry = entry(file.size, address, placement);
                    Output {
                        tag,
                        stored: Some(Stored {
                            entry,
                            pack_length: length,
                        }),
                    }
                }
                row => self.passed(row),
            };
            self.ready.push_back(out);
        }
    }

    /// Stores each file of a twin pack's `rows` as an object of its own.
    async fn store_apart(&mut self, rows: Vec<Input<T>>) -> Result<(), PackError> {
        for row in rows {
            let out = match row {
                Input::File(file, tag) => {
                    let body = self.reader.read(vec![(&file, 0..file.size)]).await?;
                    let (address, _, fresh) = put_data(self.dataset, &file.track, body).await?;
                    self.count(fresh);
                    let entry = entry(file.size, address, Placement::Whole);
                    Output {
                        tag,
                        stored: Some(Stored {
                            entry,
                            pack_length: 0,
                        }),
                    }
                }
                row => self.passed(row),
            };
            self.ready.push_back(out);
        }
        Ok(())
    }
}

/// An entry of `byte_size` bytes at `address`, numbered by the caller.
fn entry(byte_size: u64, address: ObjectId, placement: Placement) -> FragmentEntry {
    FragmentEntry {
        t_start: 0,
        t_end: 0,
        byte_size,
        address,
        placement,
    }
}

/// Reads a unit's bytes and stores them as a data object of its Track.
async fn upload_unit<T>(
    dataset: &Dataset,
    reader: &dyn FileReader,
    unit: Unit<T>,
) -> Result<(Done<T>, bool), PackError> {
    match unit {
        Unit::Pack { rows, .. } => {
            let parts: Vec<(&PackFile, Range<u64>)> = rows
                .iter()
                .filter_map(|row| match row {
                    Input::File(file, _) => Some((file, 0..file.size)),
                    Input::Pass(_) | Input::Chunked(_) => None,
                })
                .collect();
            let Some((first, _)) = parts.first() else {
                return Ok((Done::Pack { rows, stored: None }, false));
            };
            let track = first.track.clone();
            let body = reader.read(parts).await?;
            let (address, length, fresh) = put_data(dataset, &track, body).await?;
            let stored = Some((address, length));
            Ok((Done::Pack { rows, stored }, fresh))
        }
        Unit::Chunk { file, range, last } => {
            let body = reader.read(vec![(&file, range)]).await?;
            let (address, size, fresh) = put_data(dataset, &file.track, body).await?;
            let chunk = Chunk { address, size };
            Ok((Done::Chunk { file, chunk, last }, fresh))
        }
    }
}

/// Stores `body` as a data object of `track` (timeline, modality) unless
/// present: its address, its length and whether it was new.
async fn put_data(
    dataset: &Dataset,
    track: &(String, String),
    body: Vec<u8>,
) -> Result<(ObjectId, u64, bool), PackError> {
    let address = ObjectId::of(&body);
    let length = body.len() as u64;
    let path = dataset
        .store()
        .layout()
        .data_object(&track.0, &track.1, &address);
    let fresh = dataset
        .store()
        .put_immutable(&path, Bytes::from(body))
        .await
        .map_err(DatasetError::from)?;
    Ok((address, length, fresh))
}

/// The FragmentEntry of every file (parallel to the input; `t_start` and
/// `t_end` are left for the caller) and what the upload cost.
pub struct Uploaded {
    pub entries: Vec<FragmentEntry>,
    pub written: usize,
    pub reused: usize,
}

/// Uploads `files` (sorted by timeline, modality, name), read by
/// `reader`, as packs and chunks; the entries are parallel to `files`.
/// Bytes read are reported to `progress`.
pub async fn upload(
    dataset: &Dataset,
    files: &[SourceFile],
    reader: &dyn FileReader,
    options: &PackOptions,
    progress: &dyn Progress,
) -> Result<Uploaded, PackError> {
    let total = files.iter().map(|f| f.size).sum();
    progress.begin("importing", ProgressUnit::Bytes, Some(total));
    let mut track: Option<Arc<(String, String)>> = None;
    let mut rows = Vec::with_capacity(files.len());
    for (i, f) in files.iter().enumerate() {
        let same = track
            .as_ref()
            .is_some_and(|t| t.0 == f.timeline && t.1 == f.modality);
        if !same {
            track = Some(Arc::new((f.timeline.clone(), f.modality.clone())));
        }
        let file = PackFile {
            track: track.clone().expect("set above"),
            path: f.path.clone(),
            size: f.size,
            id: i,
            special: None,
        };
        rows.push(Input::File(file, i));
    }
    let units = futures::stream::iter(Units::new(rows.into_iter(), options));
    let mut packer = Packer::new(dataset, reader, options, progress, units);
    let mut entries = vec![entry(0, ObjectId([0; 32]), Placement::Whole); files.len()];
    while let Some(out) = packer.next().await? {
        if let Some(stored) = out.stored {
            entries[out.tag] = stored.entry;
        }
    }
    progress.end();
    Ok(Uploaded {
        entries,
        written: packer.written,
        reused: packer.reused,
    })
}
