//! packfs-core: packed datasets on any object store, read and written
//! without FUSE. Embedders (a Kubernetes driver, a Python binding) depend on
//! this crate alone: it builds without `fuser`, `clap` or `indicatif`, and
//! without its `cloud` feature without any HTTP stack.
//!
//! Reading a file takes one line ([`Files`]):
//!
//! ```no_run
//! # fn main() -> Result<(), packfs_core::FilesError> {
//! let bytes = packfs_core::Files::open("./dataset")?.at("main")?.open("train/caption/1.txt")?.read_all()?;
//! # Ok(())
//! # }
//! ```
//!
//! Layers, top to bottom (each module uses only those below it;
//! `docs/ARCHITECTURE.md` has the picture, and a test keeps it true):
//!
//! - [`files`]: a dataset's files read from code, in a few blocking calls;
//!   [`import`], [`bundle_create`], [`verify`], [`diff`], [`expire`],
//!   [`gc`] and [`info`]: the commands, as library functions.
//! - [`packer`]: files (local ones, or a bundle's) into packs and chunks,
//!   uploaded (import and a mount's flusher both use it).
//! - [`catalog`]: read-only trees whose files are [`extents::Extents`]: the
//!   control directory, a DataBundle, a TileDB array, the loader views.
//! - [`array`](mod@array) and [`bundle`]: TileDB arrays and DataBundles on any store.
//! - [`reader`]: executes [`extents::Extents`], the one description of a
//!   file's bytes, through the byte-range engine against the cache.
//! - [`tree`]: the dataset's `/<timeline>/<modality>/<name…>` tree of a
//!   snapshot.
//! - [`dataset`]: refs → Manifests → Tracks → items; commits; merges.
//! - [`cache`]: the shared block cache with in-flight dedupe, per-object
//!   sequential read-ahead, the disk tier and the read path's counters.
//! - [`store`]: object_store wiring: locations, object paths, retries,
//!   refs moved by compare-and-swap.
//! - Leaves: [`blocking`] (where blocking file reads run), [`metrics`]
//!   (what is recorded as it happens), [`kind`], [`units`],
//!   [`private_dir`], [`progress`], [`source_tree`]; [`options!`], how every
//!   options struct is declared.

pub mod array;
pub mod blocking;
pub mod bundle;
pub mod bundle_create;
pub mod cache;
pub mod catalog;
pub mod dataset;
pub mod diff;
pub mod expire;
pub mod extents;
pub mod files;
pub mod gc;
pub mod import;
pub mod info;
pub mod kind;
pub mod location;
pub mod metrics;
mod options;
pub mod packer;
pub mod private_dir;
pub mod progress;
pub mod reader;
pub mod source_tree;
pub mod store;
pub mod tree;
pub mod units;
pub mod verify;

pub use files::{DirEntry, File, Files, FilesError, Version};
