//! Tests that run packfs on a real S3-compatible server (moto on
//! 127.0.0.1, one server for the whole binary, one bucket a test) as well
//! as through the kernel on local directories: the write path (its main
//! suites on both), history, DataBundles mounted and converted, sharded
//! ingest as Kubernetes runs it, and what matters on S3 alone (multipart,
//! conditional puts, endpoints, credentials).
//!
//! Needs what `tests/fuse/` needs, plus moto in `.ci-venv-moto/` (or
//! `PACKFS_MOTO_SERVER`), which `.ci/run` installs: `cargo test --test s3`.

#[path = "../common/mod.rs"]
mod common;

mod bundle_convert;
mod bundle_mount;
mod history;
mod k8s_ingest;
mod s3;
mod write;
