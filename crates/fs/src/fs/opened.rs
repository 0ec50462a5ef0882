//! How an open file is served.

use std::sync::Arc;

/// How an open file is served.
#[derive(Clone, Debug)]
pub enum Opened {
    /// No handle: reads need no per-open state. Only a read-only mount
    /// answers this, as an error the kernel remembers (it then stops
    /// sending OPEN and RELEASE at all, two round trips fewer per file).
    Stateless,
    /// A handle. With `direct_io` the kernel keeps no pages of the file
    /// (its bytes change behind the mount's back); otherwise it keeps them
    /// across opens (every change goes through this mount). With `flush`
    /// the core hears of every `close(2)` of it ([`crate::fs::Fs::flush`]): a handle
    /// open for writing journals its file then. One for reading needs no
    /// such word, which spares every close a round trip.
    Handle {
        fh: u64,
        direct_io: bool,
        flush: bool,
    },
    /// A handle whose reads the kernel serves from `file`, a complete copy
    /// of the file's bytes (passthrough), without the daemon.
    Backing { fh: u64, file: Arc<std::fs::File> },
}
