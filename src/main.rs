mod cli;
mod daemon;
mod mount;
mod mount_helper;
mod progress;

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Parser;
use cli::{BundleCommand, Cli, Command};
use mount_helper::Helper;
use packfs_core::store::StoreConfig;
use tracing_subscriber::EnvFilter;

fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // Run by mount(8) (`mount -t fuse.packfs`, fstab) as its helper?
    let cli = match mount_helper::from_args(&args) {
        None => Cli::parse_from(args),
        Some(Ok(Helper::Mount(args))) => Cli::parse_from(args),
        Some(Ok(Helper::Fake)) => return ExitCode::SUCCESS,
        Some(Err(e)) => {
            eprintln!("packfs: {e}");
            return ExitCode::FAILURE;
        }
    };
    let config = cli.store.config();
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
    let daemonizing = matches!(&cli.command, Command::Mount(args) if !args.foreground);
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(!daemonizing && std::io::stderr().is_terminal())
        .init();

    let result = match cli.command {
        // Mounting may fork, so it runs before any runtime thread exists.
        Command::Mount(args) => mount::run(&args, config).map(|()| true),
        Command::Completions { shell } => cli::run_completions(shell).map(|()| true),
        Command::InstallHelper { dir } => cli::run_install_helper(&dir).map(|()| true),
        Command::Man { dir } => cli::run_man(dir).map(|()| true),
        command => run_async(command, &config),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        // `packfs info | head`: the reader went away, nothing is wrong.
        Err(e) if is_broken_pipe(&*e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("packfs: {e}");
            ExitCode::FAILURE
        }
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

fn run_async(command: Command, config: &StoreConfig) -> Result<bool, Box<dyn std::error::Error>> {
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async {
        match command {
            Command::Import(args) => cli::run_import(args, config).await.map(|_| true),
            Command::Ls {
                at,
                path,
                long,
                view,
            } => cli::run_ls(at, path, long, view, config)
                .await
                .map(|_| true),
            Command::Cat { at, path, view } => {
                cli::run_cat(at, path, view, config).await.map(|_| true)
            }
            Command::Info { at, json } => cli::run_info(at, json, config).await.map(|_| true),
            Command::Log { at, max_count } => {
                cli::run_log(at, max_count, config).await.map(|_| true)
            }
            Command::Verify { at } => cli::run_verify(at, config).await,
            Command::Diff {
                dataset,
                from,
                to,
                nul,
            } => cli::run_diff(dataset, from, to, nul, config)
                .await
                .map(|_| true),
            Command::Gc {
                dataset,
                dry_run,
                grace,
            } => cli::run_gc(dataset, dry_run, grace, config)
                .await
                .map(|_| true),
            Command::Branch {
                dataset,
                name,
                from,
            } => cli::run_branch(dataset, name, from, config)
                .await
                .map(|_| true),
            Command::Merge {
                dataset,
                into,
                branches,
            } => cli::run_merge(dataset, into, branches, config)
                .await
                .map(|_| true),
            Command::Bundle {
                command: BundleCommand::Create(args),
            } => cli::run_bundle_create(args, config).await.map(|_| true),
            Command::Mount(_)
            | Command::Completions { .. }
            | Command::Man { .. }
            | Command::InstallHelper { .. } => {
                unreachable!("runs outside the runtime")
            }
        }
    })
}
