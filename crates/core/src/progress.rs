//! How far a long command is. The library only counts what it does; its
//! caller decides what to show (the command line draws a bar on a
//! terminal, an embedder may log or ignore it).

/// What a step of the work counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// Bytes of file data.
    Bytes,
    /// Objects or files checked, deleted, …
    Objects,
}

/// Where a long command reports its progress. Called from the threads and
/// tasks doing the work, so it must be cheap and thread-safe.
pub trait Progress: Send + Sync {
    /// A step begins: `what` it is (`importing`, `deleting`, …), counting
    /// `unit`s, `total` of them if that is known yet.
    fn begin(&self, what: &str, unit: Unit, total: Option<u64>);

    /// `n` more units of the current step are done.
    fn advance(&self, n: u64);

    /// The work is over, done or failed.
    fn end(&self);
}

/// Reports nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct Quiet;

impl Progress for Quiet {
    fn begin(&self, _: &str, _: Unit, _: Option<u64>) {}
    fn advance(&self, _: u64) {}
    fn end(&self) {}
}
