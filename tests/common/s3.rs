//! A real S3-compatible server for tests: moto in server mode on
//! 127.0.0.1 (installed by `.ci/run` into `.ci-venv-moto/`; see
//! `../shared/notes/object-store-and-s3.md` for why moto: it is the server
//! here whose conditional puts are atomic). One server per test binary,
//! one bucket per test.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::cli::packfs_with_env;
use super::mount::Mounted;
use super::process::succeeded;
use super::venv::required_program;

/// The moto server of this test process.
pub struct S3 {
    port: u16,
}

static SERVER: OnceLock<S3> = OnceLock::new();
static BUCKETS: AtomicUsize = AtomicUsize::new(0);

fn moto_server() -> PathBuf {
    required_program(
        "PACKFS_MOTO_SERVER",
        ".ci-venv-moto/bin/moto_server",
        "S3 tests need moto",
    )
}

/// One HTTP/1.0 request to the server; returns the status code.
fn http(port: u16, method: &str, path: &str) -> std::io::Result<u16> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        s,
        "{method} {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\n\r\n"
    )?;
    let mut response = String::new();
    s.read_to_string(&mut response)?;
    let code = response
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok());
    code.ok_or_else(|| std::io::Error::other(format!("bad response: {response:.200}")))
}

impl S3 {
    /// The server, started on first use. It lives as long as this test
    /// process: a thread that never ends owns it, and the kernel stops it
    /// when the process goes (`PR_SET_PDEATHSIG`).
    pub fn get() -> &'static S3 {
        SERVER.get_or_init(|| S3::start(&[]))
    }

    /// A server started with `env` added to moto's environment, answering
    /// once this returns.
    pub fn start(env: &[(&str, &str)]) -> S3 {
        let port = free_port();
        let bin = moto_server();
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let (started, ready) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::os::unix::process::CommandExt;
            let mut command = Command::new(bin);
            command
                .args(["-H", "127.0.0.1", "-p", &port.to_string()])
                .envs(env)
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            // SAFETY: prctl only sets a flag of the child being started.
            unsafe {
                command.pre_exec(|| {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                    Ok(())
                });
            }
            let child = command.spawn().expect("start moto_server");
            started.send(()).unwrap();
            let _keep = child;
            loop {
                std::thread::park();
            }
        });
        ready.recv().unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        while http(port, "GET", "/").is_err() {
            assert!(
                Instant::now() < deadline,
                "moto_server did not answer on port {port}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        S3 { port }
    }

    /// The server's endpoint URL.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// A new empty bucket; returns its name.
    pub fn bucket(&self) -> String {
        let name = format!("packfs-test-{}", BUCKETS.fetch_add(1, Ordering::SeqCst));
        let code = http(self.port, "PUT", &format!("/{name}")).unwrap();
        assert_eq!(code, 200, "creating bucket {name}");
        name
    }

    /// The environment packfs reads its S3 settings from (object_store's
    /// `AWS_*` keys). moto checks no signature; the keys are placeholders.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT", self.endpoint()),
            ("AWS_ALLOW_HTTP", "true".into()),
            ("AWS_VIRTUAL_HOSTED_STYLE_REQUEST", "false".into()),
            ("AWS_REGION", "us-east-1".into()),
            ("AWS_ACCESS_KEY_ID", "testing".into()),
            ("AWS_SECRET_ACCESS_KEY", "testing".into()),
            ("AWS_CONDITIONAL_PUT", "etag".into()),
        ]
    }

    /// An `object_store` client for `bucket`, to look at objects directly.
    pub fn client(&self, bucket: &str) -> object_store::aws::AmazonS3 {
        self.env()
            .into_iter()
            .fold(
                object_store::aws::AmazonS3Builder::new().with_bucket_name(bucket),
                |b, (key, value)| b.with_config(key.to_ascii_lowercase().parse().unwrap(), value),
            )
            .build()
            .unwrap()
    }

    /// `packfs ARGS` with the S3 environment.
    pub fn packfs(&self, args: &[&str]) -> Output {
        packfs_with_env(&self.env(), args)
    }

    /// Like [`S3::packfs`]; panics with the output if it fails.
    pub fn packfs_ok(&self, args: &[&str]) -> Output {
        succeeded(&format!("packfs {args:?}"), self.packfs(args))
    }
}

impl Mounted {
    /// A mount of the dataset at `url` on the test S3 server.
    pub fn on_s3(s3: &S3, url: &str, mountpoint: &Path, extra: &[&str]) -> Mounted {
        Self::mount_by(url, mountpoint, extra, |args| {
            s3.packfs_ok(args);
        })
    }
}

/// A port on 127.0.0.1 nothing listens on right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
