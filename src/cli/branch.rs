//! `packfs branch`: a new ref at the Manifest of another.

use clap::Args;
use packfs_core::dataset::{Dataset, Revision};
use packfs_core::store::StoreConfig;

use super::CliResult;

#[derive(Args, Debug)]
pub(crate) struct BranchArgs {
    /// Dataset location.
    pub dataset: String,
    /// Name of the new ref.
    pub name: String,
    /// Where the branch starts: a ref, a Manifest id or prefix, or
    /// REVISION~N.
    #[arg(long, default_value = "main", value_name = "REVISION")]
    pub from: Revision,
}

/// Creates the ref and says where on stderr.
pub(super) async fn run(args: BranchArgs, config: &StoreConfig) -> CliResult {
    let dataset = Dataset::open_with(&args.dataset, false, config)?;
    let id = dataset
        .create_branch(&args.name, &args.from.to_string())
        .await?;
    eprintln!(
        "created ref {} at manifest {id} (from {})",
        args.name, args.from
    );
    Ok(())
}
