//! Sharded ingest as Kubernetes runs it (deploy/k8s/): the Indexed Job's
//! entrypoint (deploy/ingest.sh) run for 8 indexes at once as local
//! processes against S3 (moto), one retried, then the merge Job's
//! (deploy/merge.sh); every source file is then in main, byte for byte.

use std::path::Path;
use std::process::{Command, Output};

use crate::common::*;

const SHARDS: usize = 8;

fn deploy(file: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("deploy")
        .join(file)
}

/// `bash deploy/SCRIPT` with `env` and the S3 environment.
fn run_script(s3: &s3::S3, script: &str, env: &[(&str, String)]) -> std::process::Child {
    Command::new("bash")
        .arg(deploy(script))
        .envs(s3.env())
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .env("PACKFS", PACKFS)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

fn finished(what: &str, child: std::process::Child) -> Output {
    succeeded(what, child.wait_with_output().unwrap())
}

#[test]
fn eight_shards_and_a_merge_ingest_every_file() {
    require_fuse();
    let s3 = s3::S3::get();
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    let mut rng = Rng::new(16);
    let mut listing = String::new();
    for i in 0..400 {
        let (modality, ext) = if i % 2 == 0 {
            ("image", "jpg")
        } else {
            ("caption", "txt")
        };
        let path = format!("train/{modality}/d{}/{i:04}.{ext}", i % 7);
        write_file(&src.join(&path), &rng.bytes(50 + (i * 37) % 3000));
        listing.push_str(&path);
        listing.push('\n');
    }
    let listing_file = dir.path().join("listing.txt");
    std::fs::write(&listing_file, &listing).unwrap();
    let url = format!("s3://{}/ds", s3.bucket());
    let env = |index: usize| {
        vec![
            ("DATASET", url.clone()),
            ("SOURCE_ROOT", src.display().to_string()),
            ("SOURCE_LISTING", listing_file.display().to_string()),
            ("SHARDS", SHARDS.to_string()),
            ("JOB_COMPLETION_INDEX", index.to_string()),
        ]
    };

    // Every index at once, as the Job's pods; then index 3 again, as a
    // retried pod.
    let pods: Vec<_> = (0..SHARDS)
        .map(|i| run_script(s3, "ingest.sh", &env(i)))
        .collect();
    for (i, pod) in pods.into_iter().enumerate() {
        let out = finished(&format!("ingest.sh index {i}"), pod);
        let log = String::from_utf8_lossy(&out.stderr);
        assert!(
            log.contains(&format!("shard {i} of 8: 50 of 400 files")),
            "{log}"
        );
    }
    let retried = finished(
        "ingest.sh index 3 again",
        run_script(s3, "ingest.sh", &env(3)),
    );
    assert!(String::from_utf8_lossy(&retried.stderr).contains("reusing branch shard-3"));

    let merge_env = [("DATASET", url.clone()), ("SHARDS", SHARDS.to_string())];
    let merged = finished("merge.sh", run_script(s3, "merge.sh", &merge_env));
    let log = String::from_utf8_lossy(&merged.stderr);
    assert!(log.contains("ref main merged (9 parents)"), "{log}");
    assert!(String::from_utf8_lossy(&merged.stdout).contains("OK ref main"));

    let mnt = Mounted::on_s3(s3, &url, &dir.path().join("mnt"), &["--read-only"]);
    diff_r(&src, &mnt.path);
}

/// The Jobs run the entrypoints the image installs and give them every
/// variable they require.
#[test]
fn the_jobs_give_the_entrypoints_what_they_require() {
    for (job, script, entrypoint) in [
        (
            "k8s/ingest-job.yaml",
            "ingest.sh",
            "/usr/local/bin/packfs-ingest",
        ),
        (
            "k8s/merge-job.yaml",
            "merge.sh",
            "/usr/local/bin/packfs-merge",
        ),
    ] {
        let yaml = std::fs::read_to_string(deploy(job)).unwrap();
        let script_text = std::fs::read_to_string(deploy(script)).unwrap();
        assert!(
            yaml.contains(&format!("command: [\"{entrypoint}\"]")),
            "{job}"
        );
        let dockerfile = std::fs::read_to_string(deploy("Dockerfile")).unwrap();
        assert!(dockerfile.contains(&format!("COPY deploy/{script} {entrypoint}")));
        for required in script_text
            .split("${")
            .skip(1)
            .filter_map(|s| s.split_once(":?").map(|(name, _)| name))
        {
            let given = yaml.contains(&format!("- name: {required}"))
                || (required == "JOB_COMPLETION_INDEX" && yaml.contains("completionMode: Indexed"));
            assert!(
                given,
                "{job} does not set {required}, which {script} requires"
            );
        }
    }
}
