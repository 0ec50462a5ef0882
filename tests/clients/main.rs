//! Tests whose checker is another program's own library, in a Python
//! virtual environment `.ci/run` makes: TileDB arrays written and read by
//! `tiledb` and mounted (also from S3), DataBundles that `packfs bundle
//! create` writes read back by an independent reader using `zstandard`
//! (`tests/bundle_reader.py`), the WebDataset view read by `webdataset`,
//! and the mount's metrics parsed by `prometheus_client`.
//!
//! Needs what `tests/s3/` needs, plus `.ci-venv-tiledb/`, `.ci-venv-bundle/`,
//! `.ci-venv-webdataset/` and `.ci-venv-metrics/`: `cargo test --test
//! clients`.

// Helpers are shared by several test binaries (and the fuzz corpus with
// the fuzz crate): `pub` there is for them, not API.
#![allow(unreachable_pub)]

/// The modules of `tests/common/` these tests use: a test binary includes
/// a module only if it uses all of it (the dead-code lint checks that).
#[path = "../common"]
mod common {
    pub mod cli;
    pub mod files;
    pub mod mount;
    pub mod process;
    pub mod rng;
    pub mod s3;
    pub mod venv;

    pub use cli::*;
    pub use files::*;
    pub use mount::*;
    pub use process::*;
    pub use rng::*;
    pub use s3::free_port;
    pub use venv::*;
}

mod array_mount;
mod bundle_create;
mod metrics;
mod views;
