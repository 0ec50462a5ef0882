//! `packfs man [--dir DIR]`: the manual pages of this command line.

use std::path::PathBuf;

use clap::{Args, CommandFactory};

use super::{Cli, CliResult};

#[derive(Args, Debug)]
pub(crate) struct ManArgs {
    /// Write `packfs.1` and a page per subcommand into this directory
    /// instead of printing `packfs.1`.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

/// Prints `packfs.1` (roff) on stdout, or writes every page into
/// `args.dir`.
pub(super) fn run(args: ManArgs) -> CliResult {
    let command = Cli::command();
    let Some(dir) = args.dir else {
        clap_mangen::Man::new(command).render(&mut std::io::stdout())?;
        return Ok(());
    };
    std::fs::create_dir_all(&dir)?;
    clap_mangen::generate_to(command, &dir)?;
    Ok(())
}
