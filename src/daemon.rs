//! Detaching `packfs mount` from the terminal the way mount tools do: the
//! command returns only once the filesystem is mounted (exit 0) or has
//! failed to mount (its error printed, exit 1).
//!
//! Must run before any thread exists (tokio, fuser): `fork` copies only the
//! calling thread.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Held by the detached child; tells the waiting parent how mounting went.
pub(crate) struct Readiness {
    pipe: File,
}

/// Forks. The parent waits for the child's verdict and exits with it
/// (printing `note` if the mount is ready); only the child returns, in a
/// new session.
pub(crate) fn detach(note: Option<String>) -> std::io::Result<Readiness> {
    let mut fds = [0; 2];
    // SAFETY: `fds` is a valid array of two ints for pipe2 to fill.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned only here.
    let (read_end, write_end) =
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: called while the process is single-threaded (see module docs).
    match unsafe { libc::fork() } {
        -1 => Err(std::io::Error::last_os_error()),
        0 => {
            drop(read_end);
            // SAFETY: plain syscalls without pointers (chdir gets a C string literal).
            unsafe {
                libc::setsid();
                libc::chdir(c"/".as_ptr());
            }
            Ok(Readiness {
                pipe: File::from(write_end),
            })
        }
        child => {
            drop(write_end);
            let mut verdict = Vec::new();
            let _ = File::from(read_end).read_to_end(&mut verdict);
            match verdict.split_first() {
                Some((b'R', _)) => {
                    if let Some(note) = note {
                        eprintln!("packfs: {note}");
                    }
                    std::process::exit(0)
                }
                Some((_, message)) => eprintln!("packfs: {}", String::from_utf8_lossy(message)),
                None => eprintln!(
                    "packfs: the mount daemon (pid {child}) exited before the mount was ready"
                ),
            }
            std::process::exit(1)
        }
    }
}

impl Readiness {
    /// Reports success and detaches stdio: stdin and stdout go to /dev/null,
    /// stderr (the log) to `log_file` (appended, created 0600) or /dev/null.
    pub(crate) fn ready(mut self, log_file: Option<&Path>) -> std::io::Result<()> {
        let null = OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/null")?;
        let log = match log_file {
            Some(path) => OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o600)
                .open(path)?,
            None => null.try_clone()?,
        };
        // SAFETY: dup2 onto the standard descriptors of this process.
        unsafe {
            libc::dup2(null.as_raw_fd(), 0);
            libc::dup2(null.as_raw_fd(), 1);
            libc::dup2(log.as_raw_fd(), 2);
        }
        self.pipe.write_all(b"R")
    }

    /// Reports a failure; the parent prints `message` and exits 1.
    pub(crate) fn fail(mut self, message: &str) {
        let _ = self.pipe.write_all(format!("E{message}").as_bytes());
    }
}
