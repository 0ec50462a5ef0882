//! `mount -t fuse.packfs`, `/etc/fstab` and `umount`: the command lines
//! mount(8) and umount(8) give a helper, turned into `packfs mount`'s and
//! `packfs umount`'s.
//!
//! mount(8) runs `/sbin/mount.fuse.packfs SOURCE MOUNTPOINT [-sfnv] [-o
//! OPTIONS]` (installed by `packfs install-helper` as a link to this
//! binary); without that link, fuse3's `mount.fuse` runs `packfs SOURCE
//! MOUNTPOINT -o OPTIONS`. Both are recognised here. Every `packfs mount`
//! flag is an option, spelled with `_` or `-` (`cache_dir=/var/cache/packfs`,
//! `allow_other`, `ref=main`); `ro` is `--read-only`; the options mount(8)
//! and systemd keep for themselves (`_netdev`, `nofail`, `x-systemd.*`,
//! `noauto`, …) and the kernel flags packfs always sets (`nosuid`,
//! `nodev`) are accepted and ignored. A value with commas is quoted, as
//! fstab allows: `view="webdataset:samples=1000,shuffle=7"`.
//!
//! umount(8) runs `/sbin/umount.fuse.packfs MOUNTPOINT [-flnrv] [-t
//! TYPE]` for a mount of that type: `packfs umount MOUNTPOINT`, which
//! returns once everything written is committed. `-l` detaches lazily;
//! `-f` is taken as a plain unmount (forcing a FUSE mount aborts its
//! daemon, losing what it has not committed).

use std::ffi::OsString;
use std::path::Path;

/// Options mount(8), fstab and systemd use that are not packfs's to act
/// on: accepted and ignored, as mount(8) expects of a helper.
const IGNORED: &[&str] = &[
    "rw",
    "defaults",
    "auto",
    "noauto",
    "user",
    "users",
    "nouser",
    "owner",
    "group",
    "_netdev",
    "nofail",
    "exec",
    "noexec",
    "suid",
    "nosuid",
    "dev",
    "nodev",
    "async",
    "atime",
    "noatime",
    "relatime",
    "strictatime",
    "lazytime",
    "nodiratime",
    "diratime",
    "loud",
    "silent",
];

/// Why the helper's command line cannot be a mount.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HelperError {
    #[error("usage: mount.fuse.packfs DATASET MOUNTPOINT [-sfnv] [-o OPTIONS]")]
    Usage,
    #[error("usage: umount.fuse.packfs MOUNTPOINT [-flnrv] [-t TYPE]")]
    UmountUsage,
    #[error("umount -N: packfs unmounts in its own mount namespace only")]
    Namespace,
    #[error("-o {0:?}: a quote is not closed")]
    Quote(String),
}

/// What the helper was asked.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Helper {
    /// Mount or unmount: `packfs`'s own arguments for it.
    Run(Vec<OsString>),
    /// `-f`: mount(8)'s "fake" mode, do everything but mount.
    Fake,
}

/// The `packfs mount` or `packfs umount` command line for a helper
/// invocation, or `None` if `args` (with the program name first) is an
/// ordinary packfs command line.
pub(crate) fn from_args(args: &[OsString]) -> Option<Result<Helper, HelperError>> {
    let program = Path::new(args.first()?).file_name()?.to_string_lossy();
    if program.starts_with("umount.") {
        return Some(translate_umount(&args[1..]));
    }
    let named = program.starts_with("mount.");
    // fuse3's `mount.fuse` runs `packfs SOURCE MOUNTPOINT -o OPTIONS`:
    // never a packfs command line, whose first word is a subcommand.
    let via_mount_fuse = args.iter().any(|a| a == "-o")
        && args.get(1).is_some_and(|first| {
            let first = first.to_string_lossy();
            !first.starts_with('-') && !is_subcommand(&first)
        });
    (named || via_mount_fuse).then(|| translate(&args[1..]))
}

fn is_subcommand(word: &str) -> bool {
    use clap::CommandFactory;
    crate::cli::Cli::command()
        .get_subcommands()
        .any(|s| s.get_name() == word)
}

fn translate(args: &[OsString]) -> Result<Helper, HelperError> {
    let mut positional = Vec::new();
    let mut options = Vec::new();
    let mut fake = false;
    let mut verbose = false;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.to_str() {
            Some("-o") => options.extend(split_options(
                &args.next().ok_or(HelperError::Usage)?.to_string_lossy(),
            )?),
            Some("-t") | Some("-N") => {
                args.next(); // the type (fuse.packfs), a namespace
            }
            Some(flags) if flags.starts_with('-') && flags.len() > 1 => {
                fake |= flags.contains('f');
                verbose |= flags.contains('v');
                // -s (sloppy) and -n (no mtab) need nothing.
            }
            _ => positional.push(arg.clone()),
        }
    }
    let [source, mountpoint] =
        <[OsString; 2]>::try_from(positional).map_err(|_| HelperError::Usage)?;
    if fake {
        return Ok(Helper::Fake);
    }
    let mut out: Vec<OsString> = vec!["packfs".into(), "mount".into(), source, mountpoint];
    if verbose {
        out.push("-v".into());
    }
    for (key, value) in options {
        if IGNORED.contains(&key.as_str()) || key.starts_with("x-") || key == "comment" {
            continue;
        }
        let flag = match key.as_str() {
            "ro" => "read-only".to_string(),
            key => key.replace('_', "-"),
        };
        out.push(format!("--{flag}").into());
        if let Some(value) = value {
            out.push(value.into());
        }
    }
    Ok(Helper::Run(out))
}

fn translate_umount(args: &[OsString]) -> Result<Helper, HelperError> {
    let mut out: Vec<OsString> = vec!["packfs".into(), "umount".into()];
    let mut mountpoint = None;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.to_str() {
            Some("-t") => {
                args.next(); // fuse.packfs
            }
            Some("-N") => return Err(HelperError::Namespace),
            Some(flags) if flags.starts_with('-') && flags.len() > 1 => {
                if flags.contains('l') {
                    out.push("--lazy".into());
                }
                if flags.contains('v') {
                    out.push("-v".into());
                }
                // -f, -n (no mtab) and -r (remount read-only on failure)
                // need nothing.
            }
            _ if mountpoint.is_none() => mountpoint = Some(arg.clone()),
            _ => return Err(HelperError::UmountUsage),
        }
    }
    out.push(mountpoint.ok_or(HelperError::UmountUsage)?);
    Ok(Helper::Run(out))
}

/// `a,b=c,d="e,f"` as (key, value) pairs, quotes removed.
fn split_options(text: &str) -> Result<Vec<(String, Option<String>)>, HelperError> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut quoted = false;
    for c in text.chars().chain(std::iter::once(',')) {
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted => {
                if !current.is_empty() {
                    let option = std::mem::take(&mut current);
                    out.push(match option.split_once('=') {
                        Some((key, value)) => (key.to_string(), Some(value.to_string())),
                        None => (option, None),
                    });
                }
            }
            c => current.push(c),
        }
    }
    match quoted {
        true => Err(HelperError::Quote(text.to_string())),
        false => Ok(out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<OsString> {
        line.split(' ').map(OsString::from).collect()
    }

    fn mount(line: &str) -> Vec<String> {
        match from_args(&args(line)) {
            Some(Ok(Helper::Run(out))) => {
                out.into_iter().map(|a| a.into_string().unwrap()).collect()
            }
            other => panic!("{line}: {other:?}"),
        }
    }

    #[test]
    fn mount_options_become_packfs_flags() {
        assert_eq!(
            mount("/sbin/mount.fuse.packfs s3://b/ds /mnt/ds -o rw,_netdev,ref=main~1,cache_dir=/var/cache/packfs,allow_other,x-systemd.automount,nosuid,nodev"),
            ["packfs", "mount", "s3://b/ds", "/mnt/ds", "--ref", "main~1", "--cache-dir", "/var/cache/packfs", "--allow-other"]
        );
        assert_eq!(
            mount("mount.fuse.packfs ds /m -n -o ro,uid=1000,gid=100,view=\"webdataset:samples=10,shuffle=7\" -t fuse.packfs -v"),
            ["packfs", "mount", "ds", "/m", "-v", "--read-only", "--uid", "1000", "--gid", "100", "--view", "webdataset:samples=10,shuffle=7"]
        );
        // fuse3's mount.fuse runs the type's program by its own name.
        assert_eq!(
            mount("packfs ds /m -o dev,suid,read_only"),
            ["packfs", "mount", "ds", "/m", "--read-only"]
        );
    }

    #[test]
    fn packfs_command_lines_are_not_the_helpers() {
        assert!(from_args(&args("packfs mount ds /m -o x")).is_none());
        assert!(from_args(&args("packfs ls ds")).is_none());
        assert!(from_args(&args("packfs -v mount ds /m")).is_none());
    }

    #[test]
    fn umount_lines_become_packfs_umount() {
        assert_eq!(
            mount("/sbin/umount.fuse.packfs /mnt/ds -n -t fuse.packfs"),
            ["packfs", "umount", "/mnt/ds"]
        );
        assert_eq!(
            mount("umount.fuse.packfs /m -lv"),
            ["packfs", "umount", "--lazy", "-v", "/m"]
        );
        assert!(matches!(
            from_args(&args("umount.fuse.packfs /m -N 1234")),
            Some(Err(HelperError::Namespace))
        ));
        assert!(matches!(
            from_args(&args("umount.fuse.packfs -v")),
            Some(Err(HelperError::UmountUsage))
        ));
    }

    #[test]
    fn fake_mounts_and_bad_lines() {
        assert!(matches!(
            from_args(&args("mount.fuse.packfs ds /m -f -o ro")),
            Some(Ok(Helper::Fake))
        ));
        assert!(matches!(
            from_args(&args("mount.fuse.packfs ds")),
            Some(Err(HelperError::Usage))
        ));
        assert!(matches!(
            from_args(&args("mount.fuse.packfs ds /m -o view=\"a,b")),
            Some(Err(HelperError::Quote(_)))
        ));
    }
}
