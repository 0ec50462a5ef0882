//! `packfs ls`: a directory (or one file) of a dataset, view, bundle or
//! array.

use std::io::Write;

use clap::Args;
use packfs_core::catalog::view::ViewSpec;
use packfs_core::catalog::Catalog;
use packfs_core::kind::Kind;
use packfs_core::store::StoreConfig;
use packfs_core::tree::{NodeKind, Tree};

use super::contents::{resolve_in, Contents};
use super::{CliResult, DatasetAt};

#[derive(Args, Debug)]
pub(crate) struct LsArgs {
    #[command(flatten)]
    pub at: DatasetAt,
    /// Path inside the dataset, e.g. train/image.
    #[arg(default_value = "/")]
    pub path: String,
    /// Show size and media type.
    #[arg(short, long)]
    pub long: bool,
    /// List the dataset as a loader view shows it (`webdataset…` or
    /// `samples`, as `mount --view`): e.g. its shards and their sizes.
    #[arg(long, value_name = "SPEC")]
    pub view: Option<ViewSpec>,
}

/// Lists the path `args` names on stdout, one entry a line.
pub(super) async fn run(args: LsArgs, config: &StoreConfig) -> CliResult {
    match Contents::open(&args.at, args.view.as_ref(), config).await? {
        Contents::Tree { tree, .. } => ls_tree(&tree, &args.path, args.long),
        Contents::Catalog { catalog, .. } => ls_catalog(&*catalog, &args.path, args.long),
    }
}

/// `packfs ls` of a dataset's tree.
fn ls_tree(tree: &Tree, path: &str, long: bool) -> CliResult {
    let node = tree.resolve(path)?;
    let mut out = std::io::stdout().lock();
    let mut show = |id, name: &str| -> CliResult {
        match (tree.is_dir(id), long) {
            (true, false) => writeln!(out, "{name}/")?,
            (true, true) => writeln!(out, "{:>14}  {:<26}  {name}/", "-", "directory")?,
            (false, false) => writeln!(out, "{name}")?,
            (false, true) => {
                let Some(NodeKind::File(i)) = tree.node(id)?.map(|n| n.kind) else {
                    return Err(format!("{name}: vanished").into());
                };
                let item = tree.item(i)?;
                writeln!(
                    out,
                    "{:>14}  {:<26}  {name}",
                    item.size(),
                    item.media_type()
                )?
            }
        }
        Ok(())
    };
    if !tree.is_dir(node) {
        return show(node, path.rsplit('/').next().unwrap_or(path));
    }
    let mut failed = Ok(());
    tree.children(node, 0, |c| {
        failed = show(c.id, c.name);
        failed.is_err()
    })?;
    failed
}

/// `packfs ls` of a view's, bundle's or array's tree. An entry whose
/// metadata is damaged is listed all the same, as a mount lists it (its
/// name is known), and one whose name cannot be known is not; what is
/// wrong with either is the command's error, so it exits 1.
fn ls_catalog(catalog: &dyn Catalog, path: &str, long: bool) -> CliResult {
    let id = resolve_in(catalog, path)?;
    let entry = catalog
        .entry(id)?
        .ok_or_else(|| format!("{path}: no such file or directory"))?;
    let mut out = std::io::stdout().lock();
    let mut damaged = Vec::new();
    let mut show = |id: u64, name: &str| -> CliResult {
        let entry = match catalog.entry(id) {
            Ok(entry) => entry.ok_or_else(|| format!("{name}: vanished"))?,
            Err(e) => {
                match long {
                    true => writeln!(out, "{:>14}  {name}", "?")?,
                    false => writeln!(out, "{name}")?,
                }
                damaged.push(e.to_string());
                return Ok(());
            }
        };
        match (entry.kind, long) {
            (Kind::Dir, false) => writeln!(out, "{name}/")?,
            (Kind::Dir, true) => writeln!(out, "{:>14}  {name}/", "-")?,
            (Kind::File, false) => writeln!(out, "{name}")?,
            (Kind::File, true) => writeln!(out, "{:>14}  {name}", entry.size)?,
        }
        Ok(())
    };
    if entry.kind == Kind::File {
        show(id, path.rsplit('/').next().unwrap_or(path))?;
    } else {
        let mut index = 0;
        while let Some((child, name)) = catalog.child(id, index) {
            show(child, &name)?;
            index += 1;
        }
        damaged.extend(catalog.unlisted(id).iter().map(ToString::to_string));
    }
    out.flush()?;
    match damaged.is_empty() {
        true => Ok(()),
        false => Err(damaged.join("\n").into()),
    }
}
