//! `packfs bundle create`: a DataBundle (`docs/DATABUNDLE.md`) from a
//! local directory tree or from a dataset's tree ([`BundleSource`]).
//!
//! The source is scanned and checked whole first. Its files are then cut
//! into contiguous parts of about equal bytes, one per shard, and the
//! shards are written in parallel, each by one thread at a time, each
//! fsynced. The index is written last, into a temporary file renamed into
//! place: it is the commit point, so a bundle whose writing failed or
//! crashed has no index and is never read as a bundle. A bundle for an
//! object store is written to a local staging directory, then its shards
//! are uploaded, and its index last.

mod dataset;
mod shard;
mod walk;

use std::io::Read;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use object_store::path::Path as ObjectPath;
use packfs_format::bundle::{
    file_key, is_shard_name, shard_key, shard_name, BundleConfig, Compression, FileMetadata,
    FileType, CONFIG_KEY, INDEX_PATH, MAGIC, VERSION,
};
use packfs_format::FormatError;
use thiserror::Error;

use crate::bundle::index::IndexWriter;
use crate::bundle::{index_path, BundleError};
use crate::dataset::Revision;
use crate::location::LocationKind;
use crate::progress::{Progress, Unit};
use crate::source_tree::SourceIoError;
use crate::store::{Store, StoreConfig, StoreError};
pub use dataset::DatasetTree;
use shard::Shard;
use walk::Entry;

/// Most shards written by default (and the default is at most the number
/// of CPUs).
const DEFAULT_MAX_SHARDS: usize = 8;
/// Largest `block_size` accepted: the shard header is one block.
const MAX_BLOCK_SIZE: u64 = 64 << 20;

/// Why a bundle could not be created. Each names the file or object and
/// what is wrong with it.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum CreateError {
    /// Writing the bundle's index, or reading a bundle already there,
    /// failed.
    #[error("{0}")]
    Bundle(#[from] BundleError),
    /// A local file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The store failed.
    #[error("{0}")]
    Store(#[from] StoreError),
    /// Entries of the source tree that cannot be bundled, each with its
    /// path (and that nothing was written).
    #[error("{}", .0.join("\n"))]
    Source(Vec<String>),
    /// A source directory or file could not be listed or read.
    #[error("{0}")]
    SourceIo(#[from] SourceIoError),
    /// A source file's size changed between the scan and its reading, so
    /// the bytes bundled would not be the file listed.
    #[error(
        "{} changed size while being bundled ({listed} bytes when listed, {now} now)",
        path.display()
    )]
    Changed {
        path: PathBuf,
        listed: u64,
        /// What was found: a number of bytes, or "more".
        now: String,
    },
    /// The destination already holds a bundle, or part of one.
    #[error("{location} already holds {what}: refusing to overwrite it (remove it, or choose another location)")]
    Exists { location: String, what: String },
    /// A source or destination that cannot be used.
    #[error("{0}")]
    Invalid(String),
    /// An option out of range.
    #[error("invalid option: {0}")]
    #[non_exhaustive]
    Option(#[from] OptionError),
    /// A dataset, the source of a bundle, could not be read.
    #[error("{0}")]
    Dataset(#[from] crate::dataset::DatasetError),
    /// A dataset's tree could not be built.
    #[error("{0}")]
    Tree(#[from] crate::tree::TreeError),
    /// The path of a dataset's tree a bundle was asked of is not one of
    /// its directories.
    #[error("dataset {location} at {revision}: {source}")]
    DatasetPath {
        location: String,
        revision: String,
        #[source]
        source: crate::tree::TreeError,
    },
}

crate::options! {
/// How a bundle is written. `Default` gives the documented defaults.
#[derive(Clone, Debug)]
pub struct CreateOptions {
    pub compression: Compression,
    /// Compression level (`None`: the algorithm's default).
    pub level: Option<i32>,
    /// Most uncompressed bytes of one record.
    pub record_size: u64,
    /// Records start at multiples of this in a shard file.
    pub block_size: u64,
    /// Number of shards (`None`: the number of CPUs, at most 8); never
    /// more than the number of files.
    pub shards: Option<u32>,
    /// Where a bundle bound for an object store is put together (`None`:
    /// the system's temporary directory).
    pub staging_dir: Option<PathBuf>,
}
}

impl Default for CreateOptions {
    fn default() -> Self {
        CreateOptions {
            compression: Compression::Zstd,
            level: None,
            record_size: 256 << 10,
            block_size: 4096,
            shards: None,
            staging_dir: None,
        }
    }
}

/// What a bundle holds and what it took.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CreateReport {
    pub files: usize,
    pub dirs: usize,
    /// Bytes of the source files.
    pub bytes_in: u64,
    /// Bytes of the shard files and the index.
    pub bytes_stored: u64,
    pub shards: u32,
}

/// What a bundle is made of.
pub enum BundleSource {
    /// A local directory tree.
    Dir(PathBuf),
    /// A dataset's tree at a ref, or the subtree below a directory of it.
    Dataset(Box<DatasetTree>),
}

impl BundleSource {
    /// The source `src` names, read at `revision` if it is a dataset: a
    /// dataset, or a location inside one followed by a path of its tree
    /// (see [`DatasetTree`]); else a local directory. A local directory
    /// that is a dataset, or is inside one, is read as the dataset.
    pub async fn open(
        src: &str,
        revision: &Revision,
        config: &StoreConfig,
    ) -> Result<BundleSource, CreateError> {
        if let Some(tree) = DatasetTree::find(src, revision, config).await? {
            return Ok(BundleSource::Dataset(Box::new(tree)));
        }
        match Store::local_path(src)? {
            Some(dir) => Ok(BundleSource::Dir(dir)),
            None => Err(CreateError::Invalid(format!(
                "{src}: no dataset there or above it (no refs under _packfs/refs); \
                 bundle create reads a local directory or a dataset"
            ))),
        }
    }

    /// Every entry of the tree, in the order its files go into the shards.
    fn entries(&self) -> Result<Vec<Entry>, CreateError> {
        match self {
            BundleSource::Dir(src) => walk::scan(src),
            BundleSource::Dataset(tree) => Ok(tree.entries()?),
        }
    }

    /// A reader of the bytes of file `entry`, from its start.
    fn open_file(&self, entry: &Entry) -> Result<Box<dyn Read + '_>, SourceIoError> {
        match self {
            BundleSource::Dir(_) => match std::fs::File::open(&entry.path) {
                Ok(file) => Ok(Box::new(file)),
                Err(source) => Err(SourceIoError {
                    op: "read",
                    path: entry.path.clone(),
                    source,
                }),
            },
            BundleSource::Dataset(tree) => Ok(Box::new(tree.open_file(entry)?)),
        }
    }
}

/// Writes a bundle of `src` at `location`: a local directory (a path or
/// `file://` URL; created if missing) or an object-store URL
/// [`Store::open`] accepts, reporting bytes bundled and uploaded to
/// `progress`. Refuses a location that already holds an index or shards.
pub async fn create(
    src: BundleSource,
    location: &str,
    options: &CreateOptions,
    config: &StoreConfig,
    progress: Arc<dyn Progress>,
) -> Result<CreateReport, CreateError> {
    if let Some(dir) = Store::local_path(location)? {
        let options = options.clone();
        return crate::blocking::run(move || create_local(&src, &dir, &options, &*progress)).await;
    }
    bundle_config(options, 0)?;
    let store = Store::open(location, false, config)?;
    refuse_existing_objects(&store, location).await?;
    let staging = Staging::new(options.staging_dir.as_deref())?;
    let report = {
        let (dir, options, progress) = (staging.0.clone(), options.clone(), progress.clone());
        crate::blocking::run(move || create_local(&src, &dir, &options, &*progress)).await?
    };
    upload(&store, &staging.0, report.shards, &*progress).await?;
    Ok(report)
}

/// Writes a bundle of `src` into the local directory `dir` (created if
/// missing), reporting bytes bundled to `progress`.
pub(crate) fn create_local(
    src: &BundleSource,
    dir: &Path,
    options: &CreateOptions,
    progress: &dyn Progress,
) -> Result<CreateReport, CreateError> {
    bundle_config(options, 0)?;
    if let BundleSource::Dir(src) = src {
        refuse_inside(src, dir)?;
    }
    let entries = src.entries()?;
    let files: Vec<&Entry> = entries.iter().filter(|e| e.file_size.is_some()).collect();
    let sizes: Vec<u64> = files.iter().filter_map(|e| e.file_size).collect();
    let default_shards = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(DEFAULT_MAX_SHARDS);
    let wanted = options.shards.map_or(default_shards, |n| n as usize);
    let parts = split(&sizes, wanted.min(files.len()));
    let config = bundle_config(options, parts.len() as u32)?;

    let created_dir = !dir.exists();
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let written = refuse_existing_files(dir).and_then(|()| {
        let shards = write_shards(src, dir, &files, &parts, options, progress)?;
        let index_bytes = write_index(dir, &config, &entries, &shards)
            .inspect_err(|_| remove_shards(dir, 0..parts.len()))?;
        Ok(shards.iter().map(|s| s.bytes).sum::<u64>() + index_bytes)
    });
    let bytes_stored = match written {
        Ok(bytes) => bytes,
        Err(e) => {
            if created_dir {
                // Empty unless something else wrote there meanwhile.
                std::fs::remove_dir(dir.join("index")).ok();
                std::fs::remove_dir(dir).ok();
            }
            return Err(e);
        }
    };
    Ok(CreateReport {
        files: files.len(),
        dirs: entries.len() - files.len(),
        bytes_in: sizes.iter().sum(),
        bytes_stored,
        shards: config.shard_count,
    })
}

/// An option of [`CreateOptions`] out of range, named by its field.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum OptionError {
    #[error("shards must be at least 1")]
    NoShards,
    /// The shard header is one block.
    #[error("block_size must be at most {max}")]
    BlockSizeTooLarge { max: u64 },
    #[error("a compression level has no meaning without compression")]
    LevelWithoutCompression,
    #[error("{compression} levels are {levels:?}, not {level}")]
    Level {
        compression: &'static str,
        levels: std::ops::RangeInclusive<i32>,
        level: i32,
    },
    /// The bundle's configuration would not pass a reader's checks.
    #[error("{0}")]
    Config(FormatError),
}

/// The configuration of a bundle of `shard_count` shards written with
/// `options`, checked as a reader checks it (packfs never writes a bundle
/// it would refuse to read); the options that are not in it are checked
/// too.
fn bundle_config(options: &CreateOptions, shard_count: u32) -> Result<BundleConfig, CreateError> {
    use prost::Message;
    let invalid = |e: OptionError| Err(CreateError::Option(e));
    if options.shards == Some(0) {
        return invalid(OptionError::NoShards);
    }
    if options.block_size > MAX_BLOCK_SIZE {
        return invalid(OptionError::BlockSizeTooLarge {
            max: MAX_BLOCK_SIZE,
        });
    }
    if let Some(level) = options.level {
        let levels = match options.compression {
            Compression::None => return invalid(OptionError::LevelWithoutCompression),
            Compression::Zstd => zstd::compression_level_range(),
            Compression::Gzip => 0..=9,
        };
        if !levels.contains(&level) {
            return invalid(OptionError::Level {
                compression: options.compression.name(),
                levels,
                level,
            });
        }
    }
    let config = BundleConfig {
        magic: MAGIC.into(),
        version: VERSION,
        block_size: options.block_size,
        record_size: options.record_size,
        compression_algorithm: options.compression.name().into(),
        shard_count,
    };
    match BundleConfig::decode_checked(&config.encode_to_vec()) {
        Ok(_) => Ok(config),
        Err(e) => invalid(OptionError::Config(e)),
    }
}

/// Cuts `sizes` into `parts` (at most `sizes.len()`) contiguous, non-empty
/// runs of about equal bytes: each file goes to the part its middle byte
/// falls in.
fn split(sizes: &[u64], parts: usize) -> Vec<Range<usize>> {
    let total: u128 = sizes.iter().map(|&s| u128::from(s)).sum();
    let mut runs = Vec::with_capacity(parts);
    let (mut start, mut before) = (0, 0u128);
    for part in 0..parts {
        // Leave a file for each later part.
        let last = sizes.len() - (parts - part - 1);
        let bound = 2 * total * (part as u128 + 1) / parts as u128;
        before += u128::from(sizes[start]);
        let mut end = start + 1;
        while end < last && (part + 1 == parts || 2 * before + u128::from(sizes[end]) < bound) {
            before += u128::from(sizes[end]);
            end += 1;
        }
        runs.push(start..end);
        start = end;
    }
    runs
}

/// Writes the shards, `parts` of `files` of `src`, on as many threads as
/// there are CPUs (each thread writes whole shards). On failure the shard
/// files written are removed, and the first error (by shard) is returned.
fn write_shards(
    src: &BundleSource,
    dir: &Path,
    files: &[&Entry],
    parts: &[Range<usize>],
    options: &CreateOptions,
    progress: &dyn Progress,
) -> Result<Vec<Shard>, CreateError> {
    let bytes = parts
        .iter()
        .flat_map(|p| &files[p.clone()])
        .filter_map(|e| e.file_size)
        .sum();
    progress.begin("bundling", Unit::Bytes, Some(bytes));
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(parts.len());
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    // Each thread takes the next shard not yet taken, until none is left
    // or one failed; it returns what it wrote, by shard.
    let mut results = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= parts.len() || stop.load(Ordering::Relaxed) {
                            return mine;
                        }
                        let path = dir.join(shard_name(i as u32));
                        let part = &files[parts[i].clone()];
                        let result =
                            shard::write(src, &path, i as u32, part, options, progress, &stop);
                        if result.is_err() {
                            stop.store(true, Ordering::Relaxed);
                        }
                        mine.push((i, result));
                    }
                })
            })
            .collect();
        threads
            .into_iter()
            .flat_map(|t| t.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect::<Vec<_>>()
    });
    progress.end();
    results.sort_by_key(|(i, _)| *i);
    if !stop.load(Ordering::Relaxed) {
        let done = results.into_iter().map(|(_, r)| match r {
            Ok(Some(shard)) => shard,
            _ => unreachable!("every shard is written when none failed"),
        });
        return Ok(done.collect());
    }
    // Remove what was written: a shard whose file was there already
    // failed with AlreadyExists, and that file is left alone.
    let mut first = None;
    for (i, result) in results {
        let theirs = matches!(&result, Err(CreateError::Io { source, .. })
            if source.kind() == std::io::ErrorKind::AlreadyExists);
        if !theirs {
            remove_shards(dir, i..i + 1);
        }
        if let Err(e) = result {
            first.get_or_insert(e);
        }
    }
    Err(first.expect("a shard failed"))
}

/// Removes the files of shards `range` (those of a bundle not written).
fn remove_shards(dir: &Path, range: Range<usize>) {
    for i in range {
        std::fs::remove_file(dir.join(shard_name(i as u32))).ok();
    }
}

/// Writes the index of `entries` (the files among them in shard order,
/// as `shards` hold them); returns its size.
fn write_index(
    dir: &Path,
    config: &BundleConfig,
    entries: &[Entry],
    shards: &[Shard],
) -> Result<u64, CreateError> {
    let path = dir.join(INDEX_PATH);
    let index_dir = path.parent().expect("the index is in a directory");
    std::fs::create_dir_all(index_dir).map_err(io(index_dir))?;
    // The shard files' names and the index directory are durable before
    // the index, which says they are there.
    sync_dir(dir)?;
    let mut index = IndexWriter::create(&path)?;
    index.put(CONFIG_KEY, config)?;
    let mut files = shards.iter().flat_map(|s| &s.files);
    for e in entries {
        let key = file_key(&e.dir, &e.name);
        match e.file_size {
            Some(_) => index.put(&key, files.next().expect("a shard holds every file"))?,
            None => index.put(
                &key,
                &FileMetadata {
                    r#type: FileType::Directory as i32,
                    shard_index: 0,
                    shard_offset: 0,
                    size: 0,
                    checksum: 0,
                    user_data: Some(e.attributes.to_any()),
                },
            )?,
        }
    }
    for (i, shard) in shards.iter().enumerate() {
        for (start, record) in &shard.records {
            index.put(&shard_key(i as u32, *start), record)?;
        }
    }
    index.finish()?;
    Ok(std::fs::metadata(&path).map_err(io(&path))?.len())
}

/// Fails if `dir` holds an index or a shard file.
fn refuse_existing_files(dir: &Path) -> Result<(), CreateError> {
    let exists = |what: String| {
        Err(CreateError::Exists {
            location: dir.display().to_string(),
            what,
        })
    };
    if dir.join(INDEX_PATH).exists() {
        return exists(format!("a bundle index ({INDEX_PATH})"));
    }
    for entry in std::fs::read_dir(dir).map_err(io(dir))? {
        let name = entry.map_err(io(dir))?.file_name();
        if let Some(name) = name.to_str().filter(|n| is_shard_name(n)) {
            return exists(format!("shard file {name}"));
        }
    }
    Ok(())
}

/// Fails if the bundle at `store`'s location has an index or a shard.
async fn refuse_existing_objects(store: &Store, location: &str) -> Result<(), CreateError> {
    let exists = |what: String| {
        Err(CreateError::Exists {
            location: location.to_string(),
            what,
        })
    };
    if LocationKind::of(store).await? == LocationKind::Bundle {
        return exists(format!("a bundle index ({INDEX_PATH})"));
    }
    for object in store.list_dir(store.layout().root()).await? {
        if let Some(name) = object.location.filename().filter(|n| is_shard_name(n)) {
            return exists(format!("shard {name}"));
        }
    }
    Ok(())
}

/// Uploads the bundle of `shards` shards in `staging` to `store`'s
/// location: the shards, then the index. If an upload fails, the shards
/// uploaded are deleted (best effort: without an index they are no
/// bundle anyway).
async fn upload(
    store: &Store,
    staging: &Path,
    shards: u32,
    progress: &dyn Progress,
) -> Result<(), CreateError> {
    let root = store.layout().root();
    let mut files: Vec<(PathBuf, ObjectPath)> = (0..shards)
        .map(|i| {
            (
                staging.join(shard_name(i)),
                root.clone().join(shard_name(i)),
            )
        })
        .collect();
    files.push((staging.join(INDEX_PATH), index_path(store)));
    let mut bytes = 0;
    for (file, _) in &files {
        bytes += std::fs::metadata(file).map_err(io(file))?.len();
    }
    progress.begin("uploading", Unit::Bytes, Some(bytes));
    for (i, (file, object)) in files.iter().enumerate() {
        match store.put_file(object, file).await {
            Ok(len) => progress.advance(len),
            Err(e) => {
                progress.end();
                for (_, uploaded) in &files[..i] {
                    if let Err(e) = store.delete(uploaded).await {
                        tracing::warn!("could not delete {uploaded} of a failed upload: {e}");
                    }
                }
                return Err(e.into());
            }
        }
    }
    progress.end();
    Ok(())
}

/// A new local directory a bundle for an object store is written into;
/// removed with all it holds when dropped.
struct Staging(PathBuf);

impl Staging {
    fn new(parent: Option<&Path>) -> Result<Staging, CreateError> {
        static COUNT: AtomicUsize = AtomicUsize::new(0);
        let parent = parent.map_or_else(std::env::temp_dir, Path::to_owned);
        std::fs::create_dir_all(&parent).map_err(io(&parent))?;
        let name = format!(
            "packfs-bundle-{}-{}",
            std::process::id(),
            COUNT.fetch_add(1, Ordering::Relaxed)
        );
        let dir = parent.join(name);
        std::fs::create_dir(&dir).map_err(io(&dir))?;
        Ok(Staging(dir))
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.0) {
            tracing::warn!(
                "could not remove staging directory {}: {e}",
                self.0.display()
            );
        }
    }
}

/// Fails if `dir` is `src` or inside it: the bundle would bundle itself.
fn refuse_inside(src: &Path, dir: &Path) -> Result<(), CreateError> {
    let src = src.canonicalize().map_err(|source| SourceIoError {
        op: "read source",
        path: src.to_owned(),
        source,
    })?;
    // `dir` may not exist yet: resolve the part of it that does.
    let absolute = std::path::absolute(dir).map_err(io(dir))?;
    let mut existing = absolute.as_path();
    let mut rest = Vec::new();
    let resolved = loop {
        match existing.canonicalize() {
            Ok(path) => break path,
            Err(_) => match (existing.parent(), existing.file_name()) {
                (Some(parent), Some(name)) => {
                    rest.push(name);
                    existing = parent;
                }
                _ => break absolute.clone(),
            },
        }
    };
    let resolved = rest
        .iter()
        .rev()
        .fold(resolved, |path, name| path.join(name));
    if resolved.starts_with(&src) {
        return Err(CreateError::Invalid(format!(
            "{} is inside the source {}: the bundle would contain itself",
            dir.display(),
            src.display()
        )));
    }
    Ok(())
}

fn sync_dir(dir: &Path) -> Result<(), CreateError> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io(dir))
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> CreateError {
    let path = path.to_owned();
    move |source| CreateError::Io { path, source }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::progress::Quiet;

    #[test]
    fn parts_are_contiguous_non_empty_and_balanced() {
        let check = |sizes: &[u64], parts: usize| {
            let runs = split(sizes, parts);
            assert_eq!(runs.len(), parts, "{sizes:?}");
            let mut next = 0;
            for r in &runs {
                assert!(r.start == next && r.end > r.start, "{runs:?}");
                next = r.end;
            }
            assert_eq!(next, sizes.len());
            runs
        };
        assert_eq!(check(&[10; 8], 4), [0..2, 2..4, 4..6, 6..8]);
        assert_eq!(check(&[100, 1, 1, 1, 1], 2), [0..1, 1..5]);
        assert_eq!(check(&[1, 1, 1, 1, 100], 2), [0..4, 4..5]);
        check(&[0; 5], 5);
        check(&[0; 5], 2);
        check(&[7], 1);
        check(&[], 0);
        check(&[u64::MAX, u64::MAX, 3], 3);
    }

    #[test]
    fn options_are_checked_before_anything_is_written() {
        let bad = |f: fn(&mut CreateOptions)| {
            let mut options = CreateOptions::default();
            f(&mut options);
            bundle_config(&options, 1).unwrap_err().to_string()
        };
        assert!(bad(|o| o.block_size = 1000).contains("block_size 1000"));
        assert!(bad(|o| o.record_size = 0).contains("record_size 0"));
        assert!(bad(|o| o.shards = Some(0)).contains("shards must be at least 1"));
        let gzip = |o: &mut CreateOptions| {
            o.compression = Compression::Gzip;
            o.level = Some(10);
        };
        assert!(bad(gzip).contains("gzip levels"));
        let none = |o: &mut CreateOptions| {
            o.compression = Compression::None;
            o.level = Some(1);
        };
        assert!(bad(none).contains("level has no meaning without compression"));
    }

    #[test]
    fn a_bundle_inside_its_source_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("src");
        std::fs::create_dir(&src).unwrap();
        let source = BundleSource::Dir(src.clone());
        let err = create_local(
            &source,
            &src.join("new/bundle"),
            &CreateOptions::default(),
            &Quiet,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("inside the source"), "{err}");
        assert!(!src.join("new").exists());
        create_local(
            &source,
            &tmp.path().join("b"),
            &CreateOptions::default(),
            &Quiet,
        )
        .unwrap();
    }
}
