//! `packfs sync MOUNTPOINT`: commit what a read-write mount holds, and
//! keep it mounted.

use std::path::PathBuf;

use clap::Args;
use packfs_fs::mounted::Mounted;

use super::CliResult;

#[derive(Args, Debug)]
pub(crate) struct SyncArgs {
    /// The mountpoint.
    pub mountpoint: PathBuf,
}

pub(super) fn run(args: &SyncArgs) -> CliResult {
    let mounted = Mounted::find(&args.mountpoint)?;
    if mounted.daemon().is_none() {
        return Err(format!(
            "{}: its daemon is gone (the mount is dead): unmount it and mount again",
            mounted.path().display()
        )
        .into());
    }
    if !mounted.is_writable() {
        eprintln!(
            "packfs: {} is read-only: nothing to commit",
            mounted.path().display()
        );
    }
    mounted.sync()?;
    Ok(())
}
