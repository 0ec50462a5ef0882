//! systemd readiness (`Type=notify`): `packfs mount --foreground` tells the
//! socket in `NOTIFY_SOCKET` READY=1 once the mount answers, and
//! STOPPING=1 when it is asked to stop. The test is the socket systemd
//! would listen on; nothing waits by sleeping.

use std::os::unix::net::UnixDatagram;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::*;

/// The next datagram on `socket`, as text.
fn message(socket: &UnixDatagram) -> String {
    let mut buf = [0u8; 4096];
    let n = socket
        .recv(&mut buf)
        .expect("a notification within the time-out");
    String::from_utf8(buf[..n].to_vec()).unwrap()
}

#[test]
fn ready_once_the_mount_answers_and_stopping_on_sigterm() {
    require_fuse();
    let dir = tempfile::tempdir().unwrap();
    write_file(&dir.path().join("src/train/image/a.jpg"), b"image a");
    let ds = dir.path().join("ds");
    import(&dir.path().join("src"), &ds, &[]);
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let socket_path = dir.path().join("notify.sock");
    let socket = UnixDatagram::bind(&socket_path).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();

    let mut daemon = Command::new(PACKFS)
        .args(["mount", "--foreground", "--read-only"])
        .arg(&ds)
        .arg(&mnt)
        .env("NOTIFY_SOCKET", &socket_path)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let ready = message(&socket);
    assert!(ready.lines().any(|l| l == "READY=1"), "{ready}");
    assert!(
        ready.contains(&format!("MAINPID={}", daemon.id())),
        "{ready}"
    );
    let status = ready.lines().find(|l| l.starts_with("STATUS=")).unwrap();
    assert!(
        status.contains("serving") && status.contains(mnt.to_str().unwrap()),
        "{status}"
    );
    // Usable the moment systemd hears it is ready.
    assert!(is_mounted(&mnt.canonicalize().unwrap()));
    assert_eq!(
        std::fs::read(mnt.join("train/image/a.jpg")).unwrap(),
        b"image a"
    );

    unsafe { libc::kill(daemon.id() as i32, libc::SIGTERM) };
    let stopping = message(&socket);
    assert!(stopping.lines().any(|l| l == "STOPPING=1"), "{stopping}");
    let status = daemon.wait().unwrap();
    assert!(status.success(), "{status}");
    assert!(!is_mounted(&mnt));
}
