//! `packfs umount MOUNTPOINT`: commit, unmount, and return once the
//! daemon has finished (umount(8) runs it too, as `umount.fuse.packfs`).

use std::path::PathBuf;

use clap::Args;
use packfs_fs::mounted::Mounted;

use super::CliResult;

#[derive(Args, Debug)]
pub(crate) struct UmountArgs {
    /// The mountpoint.
    pub mountpoint: PathBuf,
    /// Detach a busy mount now; it goes, and its daemon commits and
    /// exits, once the last file in it is closed (not waited for).
    #[arg(short, long)]
    pub lazy: bool,
}

pub(super) fn run(args: &UmountArgs) -> CliResult {
    let mounted = Mounted::find(&args.mountpoint)?;
    if mounted.daemon().is_none() {
        eprintln!(
            "packfs: {}: its daemon is gone; unmounting (a later mount with the same spool \
             commits what it left)",
            mounted.path().display()
        );
    }
    mounted.unmount(args.lazy, |pid| {
        eprintln!("packfs: waiting for the daemon (pid {pid}) to finish its last commit…");
    })?;
    Ok(())
}
