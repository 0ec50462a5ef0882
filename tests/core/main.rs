//! Tests of the library alone: no kernel, no `packfs` binary, no server.
//! The filesystem core driven as FUSE requests would drive it, on datasets
//! in memory (crashes simulated by dropping a mount's state), also by
//! several threads at once; import through the library; refs' compare and
//! swap; the decoders under random and hostile input and the fuzz corpus;
//! damaged TileDB arrays read through the library; and the layering of the
//! crates that docs/ARCHITECTURE.md draws (`architecture`).
//!
//! Needs nothing but `cargo test`: `cargo test --test core`.

// Helpers are shared by several test binaries (and the fuzz corpus with
// the fuzz crate): `pub` there is for them, not API.
#![allow(unreachable_pub)]

/// The modules of `tests/common/` these tests use: a test binary includes
/// a module only if it uses all of it (the dead-code lint checks that).
#[path = "../common"]
mod common {
    pub mod bench;
    pub mod core;
    pub mod files;
    pub mod process;
    pub mod rng;

    pub use files::*;
    pub use process::*;
    pub use rng::*;
}

mod architecture;
mod array_damage;
mod concurrency;
mod decode_fuzz;
mod expire;
mod files;
mod filesystem;
mod fuzz_corpus;
mod hard_links;
mod import;
mod merge;
mod paged;
mod ref_cas;
mod rewrites;
mod special;
mod spool;
mod views;
