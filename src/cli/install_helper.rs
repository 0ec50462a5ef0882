//! `packfs install-helper [--dir DIR]`: `DIR/mount.fuse.packfs` and
//! `DIR/umount.fuse.packfs`, the links to this binary that mount(8) and
//! umount(8) run for mounts of type `fuse.packfs`.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use super::CliResult;

#[derive(Args, Debug)]
pub(crate) struct InstallHelperArgs {
    /// Where mount(8) looks for helpers.
    #[arg(long, default_value = "/sbin")]
    pub dir: PathBuf,
}

/// Links `DIR/mount.fuse.packfs` and `DIR/umount.fuse.packfs` to this
/// binary, replacing older links.
pub(super) fn run(args: &InstallHelperArgs) -> CliResult {
    let exe = std::env::current_exe()?.canonicalize()?;
    let mut out = std::io::stdout().lock();
    for name in ["mount.fuse.packfs", "umount.fuse.packfs"] {
        let link = args.dir.join(name);
        match std::fs::symlink_metadata(&link) {
            Ok(meta) if meta.file_type().is_symlink() => std::fs::remove_file(&link)?,
            Ok(_) => {
                return Err(format!(
                    "{} exists and is not a link; remove it first",
                    link.display()
                )
                .into())
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("{}: {e}", link.display()).into()),
        }
        std::os::unix::fs::symlink(&exe, &link)
            .map_err(|e| format!("linking {} to {}: {e}", link.display(), exe.display()))?;
        writeln!(out, "{} -> {}", link.display(), exe.display())?;
    }
    writeln!(out, "mount -t fuse.packfs DATASET DIR -o ref=main,… and fstab lines of type fuse.packfs now mount with packfs;")?;
    writeln!(
        out,
        "umount DIR returns once what was written into DIR is committed"
    )?;
    Ok(())
}
