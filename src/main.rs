mod cli;
mod daemon;
mod mount_helper;
mod progress;

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Parser;
use tracing_subscriber::EnvFilter;

use cli::Cli;
use mount_helper::Helper;

fn main() -> ExitCode {
    limit_malloc_arenas();
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // Run by mount(8) (`mount -t fuse.packfs`, fstab) or umount(8) as
    // their helper?
    let cli = match mount_helper::from_args(&args) {
        None => Cli::parse_from(args),
        Some(Ok(Helper::Run(args))) => Cli::parse_from(args),
        Some(Ok(Helper::Fake)) => return ExitCode::SUCCESS,
        Some(Err(e)) => {
            eprintln!("packfs: {e}");
            return ExitCode::FAILURE;
        }
    };
    // fuser warns of every request it does not implement (ioctl, …) and
    // of unmounting what was unmounted already: noise at the default level.
    let default_level = match cli.verbose {
        0 => "warn,fuser=error",
        1 => "info",
        _ => "debug",
    };
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_level));
    // A daemonized mount's stderr becomes its log file: no colours there.
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(!cli.command.daemonizes() && std::io::stderr().is_terminal())
        .init();

    if cli.command.is_batch() {
        return_large_blocks();
    }
    match cli.command.run(cli.store.config()) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        // `packfs info | head`: the reader went away, nothing is wrong.
        Err(e) if is_broken_pipe(&*e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("packfs: {}", cli::error_text(&*e));
            ExitCode::FAILURE
        }
    }
}

/// Has large blocks (1 MiB and more) mapped on their own, so freeing one
/// gives it back. By default glibc raises that threshold as large blocks
/// are freed, and then keeps them in the arena of the thread that made
/// them: a batch command that decodes and encodes pages on many threads
/// (a merge of 8 branches of 100,000 items: a 73 MiB heap) grew to
/// 680 MiB of RSS, and to 158 MiB with this. A mount keeps the default:
/// its cache allocates and frees large blocks at read speed.
fn return_large_blocks() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only tunes the allocator, before any thread starts.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
    }
}

/// Whether `e` is a write to a closed pipe.
fn is_broken_pipe(e: &(dyn std::error::Error + 'static)) -> bool {
    let kind = e
        .downcast_ref::<std::io::Error>()
        .map(std::io::Error::kind)
        .or_else(|| e.downcast_ref::<serde_json::Error>()?.io_error_kind());
    kind == Some(std::io::ErrorKind::BrokenPipe)
}

/// Caps glibc's malloc at one arena per core (its default is eight), unless
/// `MALLOC_ARENA_MAX` is set. glibc gives a thread that finds the arenas
/// busy an arena of its own and keeps what each one freed, so work spread
/// over the blocking pool's threads (a Track edit, a page decoded) holds
/// several times its heap: an import of 10M files onto a Track peaked at
/// 427 MiB RSS over an 84 MiB heap, and at 137 MiB with two arenas.
fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let arenas = libc::c_int::try_from(cores).unwrap_or(libc::c_int::MAX);
        // SAFETY: mallopt only sets a tunable; it runs before any thread
        // but this one exists.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, arenas);
        }
    }
}
