//! The suites that matter on a real S3-compatible server (moto on
//! 127.0.0.1): import, read-only and read-write mounts, branches and merge,
//! concurrent committers, gc and verify, through `s3://` URLs.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use crate::common::s3::S3;
use crate::common::*;

impl S3 {
    /// A second server that checks credentials: it knows no access key, so
    /// every signed request is refused (403 InvalidAccessKeyId). It has no
    /// buckets.
    fn checking_credentials() -> &'static S3 {
        static CHECKING: OnceLock<S3> = OnceLock::new();
        CHECKING.get_or_init(|| S3::start(&[("INITIAL_NO_AUTH_ACTION_COUNT", "0")]))
    }
}

/// A source tree of `n` files of up to 40 KB, and one of 3 MB (chunked
/// with `--chunk-bytes 1MiB`).
fn source(dir: &Path, n: usize, seed: u64) {
    let mut rng = Rng::new(seed);
    for i in 0..n {
        let len = rng.below(40_000) as usize;
        write_file(
            &dir.join(format!("t/m/d{}/f{i:03}", i % 4)),
            &rng.bytes(len),
        );
    }
    write_file(&dir.join("t/big/blob"), &rng.bytes(3_000_000));
}

#[test]
fn import_mount_write_and_verify_on_s3() {
    require_fuse();
    let s3 = S3::get();
    let url = format!("s3://{}/datasets/one", s3.bucket());
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    source(&src, 120, 1);
    let src_str = src.to_str().unwrap();
    s3.packfs_ok(&[
        "import",
        src_str,
        &url,
        "--no-progress",
        "--pack-items",
        "32",
        "--chunk-bytes",
        "1MiB",
    ]);
    s3.packfs_ok(&["verify", &url]);

    // Read-only: byte for byte.
    let mnt = tmp.path().join("mnt");
    let m = Mounted::on_s3(s3, &url, &mnt, &["--read-only"]);
    diff_r(&src.join("t"), &m.path.join("t"));
    m.unmount();

    // Read-write: copy more in, overwrite and delete; commit at unmount.
    let more = tmp.path().join("more");
    source(&more, 60, 2);
    let spool = tmp.path().join("spool");
    let m = Mounted::on_s3(s3, &url, &mnt, &["--spool-dir", spool.to_str().unwrap()]);
    std::fs::create_dir(m.path.join("t/m/more")).unwrap();
    run_ok(
        "cp",
        &[
            "-r",
            &format!("{}/.", more.join("t/m").display()),
            m.path.join("t/m/more").to_str().unwrap(),
        ],
    );
    std::fs::write(m.path.join("t/m/d0/f000"), b"overwritten on S3").unwrap();
    std::fs::remove_file(m.path.join("t/m/d1/f001")).unwrap();
    m.unmount();

    let m = Mounted::on_s3(s3, &url, &mnt, &["--read-only"]);
    diff_r(&more.join("t/m"), &m.path.join("t/m/more"));
    assert_eq!(
        std::fs::read(m.path.join("t/m/d0/f000")).unwrap(),
        b"overwritten on S3"
    );
    assert!(!m.path.join("t/m/d1/f001").exists());
    assert_eq!(
        std::fs::read(m.path.join("t/big/blob")).unwrap(),
        std::fs::read(src.join("t/big/blob")).unwrap()
    );
    m.unmount();
    s3.packfs_ok(&["verify", &url]);
    let out = s3.packfs_ok(&["gc", &url, "--dry-run"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("would delete 0 unreachable"));
}

#[test]
fn concurrent_importers_and_branches_merge_on_s3() {
    let s3 = S3::get();
    let url = format!("s3://{}/ds", s3.bucket());
    let tmp = tempfile::tempdir().unwrap();
    let seed = tmp.path().join("seed");
    write_file(&seed.join("t/m/seed"), b"seed");
    s3.packfs_ok(&["import", seed.to_str().unwrap(), &url, "--no-progress"]);

    // Six importers commit to main at once: each CAS loser rebases.
    let children: Vec<_> = (0..6)
        .map(|w| {
            let src = tmp.path().join(format!("w{w}"));
            for i in 0..10 {
                write_file(
                    &src.join(format!("t/m/w{w}/{i}")),
                    format!("{w}-{i}").as_bytes(),
                );
            }
            Command::new(PACKFS)
                .args(["import", src.to_str().unwrap(), &url, "--no-progress"])
                .envs(s3.env())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // The S3 settings given as options instead of AWS_* variables.
    let endpoint = s3
        .env()
        .into_iter()
        .find(|(k, _)| *k == "AWS_ENDPOINT")
        .unwrap()
        .1;
    let flags_only = Command::new(PACKFS)
        .args([
            "log",
            &url,
            "-n",
            "1",
            "--endpoint",
            &endpoint,
            "--region",
            "us-east-1",
        ])
        .args(["--path-style", "--allow-http"])
        .env_clear()
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .output()
        .unwrap();
    assert!(
        flags_only.status.success(),
        "{}",
        String::from_utf8_lossy(&flags_only.stderr)
    );
    assert!(String::from_utf8_lossy(&flags_only.stdout).contains("manifest "));

    // A branch, written to and merged back as one Manifest.
    s3.packfs_ok(&["branch", &url, "side"]);
    let side = tmp.path().join("side");
    write_file(&side.join("t/m/side"), b"from the branch");
    s3.packfs_ok(&[
        "import",
        side.to_str().unwrap(),
        &url,
        "--ref",
        "side",
        "--no-progress",
    ]);
    let late = tmp.path().join("late");
    write_file(&late.join("t/m/late"), b"on main meanwhile");
    s3.packfs_ok(&["import", late.to_str().unwrap(), &url, "--no-progress"]);
    let out = s3.packfs_ok(&["merge", &url, "side"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("merged (2 parents)"));

    for w in 0..6 {
        for i in 0..10 {
            let got = s3
                .packfs_ok(&["cat", &url, &format!("t/m/w{w}/{i}")])
                .stdout;
            assert_eq!(got, format!("{w}-{i}").as_bytes());
        }
    }
    assert_eq!(
        s3.packfs_ok(&["cat", &url, "t/m/side"]).stdout,
        b"from the branch"
    );
    assert_eq!(
        s3.packfs_ok(&["cat", &url, "t/m/late"]).stdout,
        b"on main meanwhile"
    );
    s3.packfs_ok(&["verify", &url]);
}

/// An item over the multipart threshold (16 MiB) goes up as a multipart
/// upload of 8 MiB parts, and reads back exact through a mount.
#[test]
fn large_items_are_multipart_uploads_on_s3() {
    use object_store::ObjectStore;
    require_fuse();
    let home = Home::s3();
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    let big = Rng::new(3).bytes(40 << 20);
    write_file(&src.join("t/video/clip.bin"), &big);
    home.import(&src, &[]);
    let (s3, bucket) = (S3::get(), home.bucket().unwrap());
    let client = s3.client(bucket);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let objects: Vec<_> = runtime
        .block_on(futures::TryStreamExt::try_collect::<Vec<_>>(
            client.list(Some(&"ds/t/video/0".into())),
        ))
        .unwrap();
    assert_eq!(objects.len(), 1, "{objects:?}");
    // S3 ETags of multipart objects end in -<number of parts>.
    let etag = objects[0].e_tag.clone().unwrap_or_default();
    assert!(etag.trim_matches('"').ends_with("-5"), "ETag {etag}");
    let m = home.mount(&tmp.path().join("mnt"), &[]);
    assert!(std::fs::read(m.path.join("t/video/clip.bin")).unwrap() == big);
    m.unmount();
    home.verify();
}

/// A store that does not answer is an error naming what failed, within the
/// time-outs given, never a hang.
#[test]
fn an_unreachable_endpoint_fails_promptly_and_clearly() {
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let start = std::time::Instant::now();
    let out = Command::new(PACKFS)
        .args(["ls", "s3://nowhere/ds"])
        .args(["--endpoint", &format!("http://127.0.0.1:{port}")])
        .args(["--path-style", "--allow-http", "--region", "us-east-1"])
        .args(["--connect-timeout", "1s", "--retry-deadline", "2s"])
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .output()
        .unwrap();
    let took = start.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("_packfs/refs/main"), "{stderr}");
    assert!(!stderr.contains("testing"), "credentials leaked: {stderr}");
    assert!(took < std::time::Duration::from_secs(30), "took {took:?}");
    // A malformed time-out is refused up front.
    let out = packfs(&["--timeout", "soon", "ls", "s3://nowhere/ds"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--timeout"));
}

/// `packfs ARGS` against `endpoint` with the S3 flags and `env` only (no
/// inherited `AWS_*`); a hang fails the test.
fn packfs_at(endpoint: &str, args: &[&str], env: &[(&str, &str)]) -> (bool, String) {
    let mut command = Command::new(PACKFS);
    command
        .args(args)
        .args([
            "--endpoint",
            endpoint,
            "--path-style",
            "--region",
            "us-east-1",
        ])
        .args(["--connect-timeout", "1s", "--retry-deadline", "2s"])
        .env_clear()
        .envs(env.iter().copied());
    run_within(&mut command, std::time::Duration::from_secs(60))
}

const KEYS: [(&str, &str); 2] = [
    ("AWS_ACCESS_KEY_ID", "AKIDMUSTNOTLEAK"),
    ("AWS_SECRET_ACCESS_KEY", "SECRETMUSTNOTLEAK"),
];

/// Fails unless `stderr` is a failure saying `what`, with no advice to
/// give up atomic refs and no credentials in it.
fn refused_saying(result: (bool, String), what: &[&str]) {
    let (ok, stderr) = result;
    assert!(!ok, "succeeded: {stderr}");
    for w in what {
        assert!(stderr.contains(w), "{w:?} missing: {stderr}");
    }
    assert!(
        !stderr.contains("PACKFS_UNSAFE_REFS") && !stderr.contains("atomically"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("MUSTNOTLEAK"),
        "credentials leaked: {stderr}"
    );
}

/// Writers (import, a read-write mount) probe the store's conditional puts
/// first. A store they cannot reach, that refuses or lacks credentials, or
/// whose bucket is missing is reported as that, never as a store that
/// cannot move refs atomically.
#[test]
fn writers_say_why_they_cannot_use_a_store() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    write_file(&src.join("t/m/a"), b"a");
    let mnt = tmp.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let spool = tmp.path().join("spool");
    let (src, mnt_str, spool) = (
        src.to_str().unwrap(),
        mnt.to_str().unwrap(),
        spool.to_str().unwrap(),
    );
    // `import` and a read-write `mount` of `url`.
    let writers = |url: &str| {
        [
            vec!["import", src, url, "--no-progress"],
            vec!["mount", url, mnt_str, "--spool-dir", spool],
        ]
        .map(|args| args.into_iter().map(String::from).collect::<Vec<_>>())
    };
    let run = |endpoint: &str, args: &[String], env: &[(&str, &str)]| {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        packfs_at(endpoint, &args, env)
    };
    let allow = ("AWS_ALLOW_HTTP", "true");
    let env = [KEYS[0], KEYS[1], allow];
    let s3 = S3::get();
    let bucket = s3.bucket();
    let url = format!("s3://{bucket}/ds");

    // Nothing listens.
    let nowhere = format!("http://127.0.0.1:{}", free_port());
    for args in writers(&url) {
        let refused = format!("cannot reach {nowhere}: connection refused");
        refused_saying(run(&nowhere, &args, &env), &[&refused]);
    }
    // A plain http:// endpoint without --allow-http.
    for args in writers(&url) {
        refused_saying(run(&s3.endpoint(), &args, &KEYS), &["--allow-http"]);
    }
    // A missing bucket.
    for args in writers("s3://no-such-bucket/ds") {
        let missing = "bucket \"no-such-bucket\" does not exist";
        refused_saying(run(&s3.endpoint(), &args, &env), &[missing]);
    }
    // No credentials at all (and no instance metadata service to ask).
    let no_metadata = format!("http://127.0.0.1:{}", free_port());
    let without_keys = [allow, ("AWS_METADATA_ENDPOINT", no_metadata.as_str())];
    for args in writers(&url) {
        let expected = ["no credentials found", "AWS_ACCESS_KEY_ID"];
        refused_saying(run(&s3.endpoint(), &args, &without_keys), &expected);
    }
    // Credentials the store does not know.
    let checking = S3::checking_credentials();
    let denied = format!("access denied by {}", checking.endpoint());
    for args in writers(&url) {
        let expected = [denied.as_str(), "InvalidAccessKeyId", "AWS_ACCESS_KEY_ID"];
        refused_saying(run(&checking.endpoint(), &args, &env), &expected);
    }
    assert!(!is_mounted(&mnt.canonicalize().unwrap()));
    // With all in order the same import goes through.
    s3.packfs_ok(&["import", src, &url, "--no-progress"]);
}

/// Neither the access key nor the secret shows up in errors or in the most
/// verbose logs.
#[test]
fn credentials_never_appear_in_logs_or_errors() {
    let s3 = S3::get();
    let url = format!("s3://{}/ds", s3.bucket());
    let tmp = tempfile::tempdir().unwrap();
    write_file(&tmp.path().join("src/t/m/a"), b"a");
    let (key, secret) = ("AKIDMUSTNOTLEAK", "SECRETMUSTNOTLEAK");
    let run = |args: &[&str]| {
        Command::new(PACKFS)
            .args(args)
            .envs(s3.env())
            .env("AWS_ACCESS_KEY_ID", key)
            .env("AWS_SECRET_ACCESS_KEY", secret)
            .env("RUST_LOG", "trace")
            .output()
            .unwrap()
    };
    let src = tmp.path().join("src");
    let outputs = [
        run(&["import", src.to_str().unwrap(), &url, "--no-progress"]),
        run(&["-vv", "cat", &url, "t/m/a"]),
        run(&["-vv", "cat", &url, "t/m/missing"]),
        run(&["-vv", "ls", &format!("s3://{}-absent/ds", s3.bucket())]),
    ];
    assert!(outputs[0].status.success() && outputs[1].status.success());
    assert!(!outputs[2].status.success() && !outputs[3].status.success());
    for out in outputs {
        let text = String::from_utf8_lossy(&out.stderr);
        assert!(!text.is_empty(), "trace logs were written");
        assert!(!text.contains(key) && !text.contains(secret), "{text}");
    }
}
