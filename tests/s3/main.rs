//! Tests that run packfs on a real S3-compatible server (moto on
//! 127.0.0.1, one server for the whole binary, one bucket a test) as well
//! as through the kernel on local directories: the write path (its main
//! suites on both), history, DataBundles mounted and converted, sharded
//! ingest as Kubernetes runs it, and what matters on S3 alone (multipart,
//! conditional puts, endpoints, credentials).
//!
//! Needs what `tests/fuse/` needs, plus `rsync` and moto in
//! `.ci-venv-moto/` (or `PACKFS_MOTO_SERVER`), which `.ci/run` installs:
//! `cargo test --test s3`.

// Helpers are shared by several test binaries (and the fuzz corpus with
// the fuzz crate): `pub` there is for them, not API.
#![allow(unreachable_pub)]

/// The modules of `tests/common/` these tests use: a test binary includes
/// a module only if it uses all of it (the dead-code lint checks that).
#[path = "../common"]
mod common {
    pub mod checks;
    pub mod cli;
    pub mod damage;
    pub mod files;
    pub mod home;
    pub mod mount;
    pub mod process;
    pub mod rng;
    pub mod s3;
    pub mod s3_home;
    pub mod snapshot;
    pub mod venv;

    pub use checks::*;
    pub use cli::*;
    pub use damage::*;
    pub use files::*;
    pub use home::*;
    pub use mount::*;
    pub use process::*;
    pub use rng::*;
    pub use s3::free_port;
    pub use snapshot::*;
}

mod bundle_convert;
mod bundle_mount;
mod history;
mod k8s_ingest;
mod s3;
mod write;
