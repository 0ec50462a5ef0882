//! packfs-fs: a dataset served as a filesystem.
//!
//! Layers, top to bottom (each module uses only those below it and
//! `packfs-core`; `docs/ARCHITECTURE.md` has the picture):
//!
//! - [`mount`] and [`exporter`]: the FUSE session of a mount, and its
//!   Prometheus endpoint; [`mounted`]: a live mount from outside
//!   (committed, unmounted); [`mountpoint`]: checks of the directory
//!   mounted on, and the kernel's table of mounts; `utab`: libmount's
//!   table, which sends umount(8) to `packfs umount`.
//! - [`fuse`]: the thin adapter that turns kernel requests into calls of
//!   the core and its errors into the errno the core chose.
//! - [`fs`]: the filesystem core: every operation a mount answers, on
//!   inodes, names and byte ranges, with no kernel types; tests drive it
//!   without `/dev/fuse`.
//! - [`write`](mod@write): read-write mounts: open handles, the spool of written
//!   files, its journal, and the flusher that packs and commits them.
//! - [`namespace`]: inodes, names and attributes of the dataset's tree
//!   plus, on a read-write mount, an overlay of the changes.

pub mod exporter;
pub mod fs;
pub mod fuse;
pub mod mount;
pub mod mounted;
pub mod mountpoint;
pub mod namespace;
mod utab;
pub mod write;
