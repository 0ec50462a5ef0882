//! `--metrics-addr`: a mount's Prometheus metrics, scraped over HTTP and
//! parsed by the Prometheus project's own Python client
//! (tests/metrics_reader.py), after reads and a commit through the mount.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;

/// The Python with `prometheus_client` that `.ci/run` installs.
fn python() -> PathBuf {
    required_program(
        "PACKFS_METRICS_PYTHON",
        ".ci-venv-metrics/bin/python",
        "the Python `prometheus_client` package parses the metrics",
    )
}

/// Samples at `url`: (name, labels) → value.
fn scrape(url: &str) -> BTreeMap<(String, String), f64> {
    let out = Command::new(python())
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/metrics_reader.py"))
        .arg(url)
        .output()
        .unwrap();
    let out = String::from_utf8(succeeded("metrics_reader.py", out).stdout).unwrap();
    out.lines()
        .map(|line| {
            let [name, labels, value] = line.split('\t').collect::<Vec<_>>()[..] else {
                panic!("{line}");
            };
            (
                (name.to_string(), labels.to_string()),
                value.parse().unwrap(),
            )
        })
        .collect()
}

#[test]
fn a_scrape_parses_and_counts_reads_and_commits() {
    require_fuse();
    let dir = tempfile::tempdir().unwrap();
    write_file(&dir.path().join("src/train/image/a.jpg"), &[1u8; 5000]);
    let ds = dir.path().join("ds");
    import(&dir.path().join("src"), &ds, &[]);
    let addr = format!("127.0.0.1:{}", free_port());
    let mnt = Mounted::writable_in(dir.path(), &ds, &["--metrics-addr", &addr]);
    let url = format!("http://{addr}/metrics");

    assert_eq!(
        std::fs::read(mnt.path.join("train/image/a.jpg")).unwrap(),
        [1u8; 5000]
    );
    for name in ["b", "c", "d"] {
        write_file(
            &mnt.path.join(format!("train/image/{name}.jpg")),
            name.as_bytes(),
        );
    }
    // fsync of the directory: everything written so far is committed.
    let train = std::fs::File::open(mnt.path.join("train/image")).unwrap();
    train.sync_all().unwrap();

    let m = scrape(&url);
    let get = |name: &str, labels: &str| -> f64 {
        *m.get(&(name.to_string(), labels.to_string()))
            .unwrap_or_else(|| {
                panic!(
                    "no {name}{{{labels}}} in {:#?}",
                    m.keys().collect::<Vec<_>>()
                )
            })
    };
    assert!(get("packfs_gets_total", "") >= 1.0);
    assert!(get("packfs_bytes_fetched_total", "") >= 5000.0);
    assert_eq!(get("packfs_committed_items_total", ""), 3.0);
    assert!(get("packfs_commit_seconds_count", "outcome=ok") >= 1.0);
    assert!(
        get("packfs_store_request_seconds_count", "op=put,outcome=ok") >= 3.0,
        "a pack, a Track, a Manifest"
    );
    let ratio = get("packfs_cache_hit_ratio", "");
    assert!((0.0..=1.0).contains(&ratio), "{ratio}");
    // A lone item read once is not kept (the kernel caches what it got).
    assert!(m.contains_key(&("packfs_cache_bytes".to_string(), String::new())));
    assert_eq!(get("packfs_pending_items", ""), 0.0, "committed");
    assert!(m.contains_key(&("packfs_spool_bytes".to_string(), String::new())));
    assert!(m.contains_key(&("packfs_prefetch_in_flight_bytes".to_string(), String::new())));

    // Anything but /metrics is 404.
    let other = Command::new(python())
        .args([
            "-c",
            &format!("import urllib.request; urllib.request.urlopen('http://{addr}/')"),
        ])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&other.stderr).contains("404"));
}

#[test]
fn an_address_in_use_refuses_the_mount_naming_it() {
    require_fuse();
    let dir = tempfile::tempdir().unwrap();
    write_file(&dir.path().join("src/t/m/a"), b"a");
    let ds = dir.path().join("ds");
    import(&dir.path().join("src"), &ds, &[]);
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let out = packfs(&[
        "mount",
        ds.to_str().unwrap(),
        mnt.to_str().unwrap(),
        "--read-only",
        "--metrics-addr",
        &addr,
    ]);
    failed_with(&out, &[&format!("--metrics-addr {addr}"), "in use"]);
    assert!(!is_mounted(&mnt));
}
