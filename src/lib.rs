//! packfs: mount packed datasets in object storage as ordinary files.
//!
//! Layers, top to bottom (each uses only those below it;
//! `docs/ARCHITECTURE.md` has the picture):
//!
//! - [`mount`] and [`fuse`]: the FUSE session and the thin adapter that turns
//!   kernel requests into calls of the core (errno mapping lives in `fuse`
//!   alone).
//! - [`fs`]: the filesystem core: every operation a mount answers, on
//!   inodes, names and byte ranges, with no kernel types; tests drive it
//!   without `/dev/fuse`.
//! - [`write`]: read-write mounts: open handles, the spool of written
//!   files, its journal, and the flusher that packs and commits them.
//! - [`import`], [`verify`], [`diff`] and [`gc`]: commands that write a
//!   dataset from a directory tree or a DataBundle, check one, compare two
//!   of its Manifests, and delete what no ref reaches.
//! - [`bundle`]: DataBundles (`docs/DATABUNDLE.md`): their index, and
//!   `bundle create`, which writes one from a directory tree or a dataset.
//! - [`namespace`] and [`tree`]: inodes, names and attributes of the
//!   dataset's `/<timeline>/<modality>/<name…>` tree, plus, on a read-write
//!   mount, an overlay of the changes.
//! - [`reader`]: executes extents through the engine against the cache.
//! - [`catalog`]: read-only catalogs attached at names (the control
//!   directory); [`extents::Extents`], the one description of any
//!   file's bytes: a byte-range map over sources.
//! - [`packer`]: files (local ones, or a bundle's) into packs and chunks,
//!   uploaded (import and the flusher both use it).
//! - [`engine`]: byte-range maps (destination ranges → source ranges or
//!   explicit PAD), checked, compiled into coalesced reads and executed;
//!   [`cache`]: the shared block cache with in-flight dedupe, per-object
//!   sequential read-ahead, and the read path's counters.
//! - [`dataset`]: refs → Manifests → Tracks → items; commits; merges.
//! - [`format`] (pure CBOR codecs, no I/O) and [`store`] (object_store
//!   wiring: locations, object paths, retries, refs moved by
//!   compare-and-swap); [`blocking`]: where their blocking file reads run
//!   (inline on a FUSE loop thread, else on the runtime's pool).

pub mod array;
pub mod blocking;
pub mod bundle;
pub mod bundle_create;
pub mod cache;
pub mod catalog;
mod daemon;
pub mod dataset;
pub mod diff;
pub mod engine;
pub mod exporter;
pub mod extents;
pub mod format;
pub mod fs;
pub mod fuse;
pub mod gc;
pub mod import;
pub mod info;
pub mod kind;
pub mod metrics;
pub mod mount;
mod mountpoint;
pub mod namespace;
pub mod packer;
pub mod private_dir;
pub mod reader;
pub mod source_tree;
pub mod store;
pub mod tree;
pub mod units;
pub mod verify;
pub mod write;
