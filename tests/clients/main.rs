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

#[path = "../common/mod.rs"]
mod common;

mod array_mount;
mod bundle_create;
mod metrics;
mod views;
