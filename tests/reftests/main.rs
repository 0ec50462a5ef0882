//! Reference-model tests of the filesystem core, without the kernel:
//! random sequences of operations over a small universe of names run both
//! on a mount's [`Fs`](packfs_fs::fs::Fs) core (an in-memory store, a real
//! spool) and on a plain in-memory model of what `docs/SEMANTICS.md`
//! promises, and the two are compared after every step: listings, lookups,
//! attributes, bytes and errors. Crashes (all state dropped, the spool
//! remounted) and clean remounts are among the operations. Failures
//! proptest finds are kept as named regression tests.
//!
//! The harness stands in for the kernel where the kernel answers without
//! asking the filesystem (path walks, `EEXIST` on create and mkdir of a
//! name it found, `rename` of an entry onto itself, kind mismatches of
//! rename, unlink and rmdir), so errors are those a program would see.
//!
//! - [`operations`]: the operations a case is made of;
//! - [`generators`]: their proptest strategies;
//! - [`model`]: the reference model;
//! - [`errno`]: errors as a program sees them;
//! - [`kernel`]: the core driven as the kernel would;
//! - [`harness`]: a sequence run on both and compared, and the property test;
//! - [`regressions`]: the sequences proptest found.

// Helpers are shared by several test binaries (and the fuzz corpus with
// the fuzz crate): `pub` there is for them, not API.
#![allow(unreachable_pub)]

/// The modules of `tests/common/` these tests use: a test binary includes
/// a module only if it uses all of it (the dead-code lint checks that).
#[path = "../common"]
mod common {
    pub mod core;
    pub mod files;
}

mod errno;
mod generators;
mod harness;
mod kernel;
mod model;
mod operations;
mod regressions;
