//! The settings of a read-write mount.

use std::path::PathBuf;
use std::time::Duration;

packfs_core::options! {
/// Settings of a read-write mount. `Default` gives the documented defaults.
#[derive(Clone, Debug)]
pub struct WriteOptions {
    /// Spool directory of a mount; `None`: `default_dir` of the mount.
    pub spool_dir: Option<PathBuf>,
    /// A flush starts once this many closed files wait…
    pub pack_items: usize,
    /// …or this many bytes of them.
    pub pack_bytes: u64,
    /// Written files larger than `chunk_above` are stored in chunks of
    /// at most this size…
    pub chunk_bytes: u64,
    /// …and at least this size: about 1024 chunks a file, so a file
    /// rewritten in place (a database, a checkpoint) stores only the
    /// chunks a change falls in.
    pub min_chunk_bytes: u64,
    /// Written files larger than this are chunked; smaller ones are packed
    /// and stored whole at each commit that changes them.
    pub chunk_above: u64,
    /// A flush starts after this long without a change.
    pub idle_flush: Duration,
    /// Most bytes the spool may hold; a write that would pass it waits for
    /// flushes to free space, and gets ENOSPC if none comes.
    pub spool_bytes: u64,
    /// How long the last commit at unmount (or SIGTERM) may take. What has
    /// not been committed by then stays journaled in the spool, and the
    /// next mount of the dataset with this spool commits it.
    pub shutdown_timeout: Duration,
}
}

impl Default for WriteOptions {
    fn default() -> Self {
        WriteOptions {
            spool_dir: None,
            pack_items: 1024,
            pack_bytes: 64 << 20,
            chunk_bytes: 64 << 20,
            min_chunk_bytes: 64 << 10,
            chunk_above: 4 << 20,
            idle_flush: Duration::from_secs(2),
            spool_bytes: 10 << 30,
            // Below systemd's default stop timeout (and our unit's 60 s).
            shutdown_timeout: Duration::from_secs(45),
        }
    }
}
