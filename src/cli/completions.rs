//! `packfs completions SHELL`: a shell completion script of this command
//! line.

use clap::{Args, CommandFactory};

use super::{Cli, CliResult};

#[derive(Args, Debug)]
pub(crate) struct CompletionsArgs {
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// Prints the script for `args.shell` on stdout.
pub(super) fn run(args: CompletionsArgs) -> CliResult {
    let mut command = Cli::command();
    clap_complete::generate(args.shell, &mut command, "packfs", &mut std::io::stdout());
    Ok(())
}
