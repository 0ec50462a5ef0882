//! Tests through the kernel and the `packfs` binary, on datasets in local
//! directories: real FUSE mounts (read-only and read-write, daemonized, in
//! the foreground under systemd's readiness protocol, through mount(8), as
//! a user without root, with kernel passthrough), the commands (import,
//! info, gc, branch and merge, completions), damaged and hostile datasets,
//! faults injected into the store, the POSIX suite pjdfstest and a soak.
//!
//! Needs root, `/dev/fuse`, `fusermount3`, `pjdfstest` and the
//! `packfs-test` user, which `.ci/run` provides: `cargo test --test fuse`.

// Helpers are shared by several test binaries (and the fuzz corpus with
// the fuzz crate): `pub` there is for them, not API.
#![allow(unreachable_pub)]

/// The modules of `tests/common/` these tests use: a test binary includes
/// a module only if it uses all of it (the dead-code lint checks that).
#[path = "../common"]
mod common {
    pub mod archive;
    pub mod checks;
    pub mod cli;
    pub mod damage;
    pub mod files;
    pub mod home;
    pub mod mount;
    pub mod process;
    pub mod rng;

    pub use archive::*;
    pub use checks::*;
    pub use cli::*;
    pub use damage::*;
    pub use files::*;
    pub use home::*;
    pub use mount::*;
    pub use process::*;
    pub use rng::*;
}

/// A dataset of one file (`t/m/seed`) at `dir/ds`, imported from
/// `dir/src`: what a test that writes through a mount starts from.
fn seeded_dataset(dir: &std::path::Path) -> std::path::PathBuf {
    common::write_file(&dir.join("src/t/m/seed"), b"seed");
    let ds = dir.join("ds");
    common::import(&dir.join("src"), &ds, &[]);
    ds
}

mod bad_input;
mod bundle;
mod completions;
mod expire;
mod faults;
mod fsx;
mod gc;
mod hostile_names;
mod info;
mod links;
mod merge;
mod mount_errors;
mod mount_helper;
mod mount_roundtrip;
mod notify;
mod open_flags;
mod passthrough;
mod pjdfstest;
mod real_tools;
mod soak;
mod spool;
mod unprivileged;
mod usage_doc;
