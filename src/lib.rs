//! packfs: mount packed datasets in object storage as ordinary files.
//!
//! Layers, top to bottom (each uses only those below it):
//!
//! - [`mount`] and [`fuse`]: the FUSE session and the thin adapter that turns
//!   kernel requests into namespace lookups and item reads (errno mapping
//!   lives in `fuse` alone).
//! - [`namespace`]: inodes, names and attributes of the mount: the snapshot's
//!   tree plus, on a read-write mount, an overlay of the changes.
//! - [`tree`]: the `/<timeline>/<modality>/<name…>` tree of a snapshot.
//! - [`reader`]: item byte ranges → a byte-range map over the item's objects,
//!   executed by the engine against the cache.
//! - [`engine`]: byte-range maps (destination ranges → source ranges or
//!   explicit PAD), checked, compiled into coalesced reads and executed.
//! - [`cache`]: the shared block cache with in-flight dedupe, per-object
//!   sequential read-ahead, and the read path's counters.
//! - [`write`]: read-write mounts: the spool of written files and the
//!   flusher that packs and commits them.
//! - [`import`], [`verify`] and [`gc`]: writing a dataset from a directory
//!   tree, checking one, and deleting what no ref reaches.
//! - [`dataset`]: refs → Manifests → Tracks → items; commits.
//! - [`format`] (pure CBOR codecs, no I/O) and [`store`] (object_store
//!   wiring: locations, object paths, refs moved by compare-and-swap).

pub mod cache;
mod daemon;
pub mod dataset;
pub mod engine;
pub mod format;
pub mod fuse;
pub mod gc;
pub mod import;
pub mod mount;
mod mountpoint;
pub mod namespace;
pub mod private_dir;
pub mod reader;
pub mod store;
pub mod tree;
pub mod verify;
pub mod write;
