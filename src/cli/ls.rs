//! `packfs ls`: a directory (or one file) of a dataset, view, bundle or
//! array.

use std::io::Write;

use clap::Args;
use packfs_core::catalog::view::ViewSpec;
use packfs_core::catalog::Catalog;
use packfs_core::kind::Kind;
use packfs_core::reader::Reader;
use packfs_core::store::StoreConfig;
use packfs_core::tree::{NodeId, NodeKind, Tree};
use packfs_format::Special;

use super::contents::{resolve_in, Contents};
use super::{CliResult, DatasetAt};

#[derive(Args, Debug)]
pub(crate) struct LsArgs {
    #[command(flatten)]
    pub at: DatasetAt,
    /// Path inside the dataset, e.g. train/image.
    #[arg(default_value = "/")]
    pub path: String,
    /// Show size and media type, and a symbolic link's target.
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
        Contents::Tree { tree, reader } => ls_tree(&tree, &reader, &args.path, args.long).await,
        Contents::Catalog { catalog, .. } => ls_catalog(&*catalog, &args.path, args.long),
    }
}

/// Entries listed between reads of link targets: a listing of any size
/// streams, holding this many names at most.
const BATCH: usize = 1024;

/// `packfs ls` of a dataset's tree; with `long`, a symbolic link shows its
/// target (`name -> target`), read from the store.
async fn ls_tree(tree: &Tree, reader: &Reader, path: &str, long: bool) -> CliResult {
    let node = tree.resolve(path)?;
    let dir = path.trim_matches('/');
    let mut out = std::io::stdout().lock();
    if !tree.is_dir(node) {
        let name = dir.rsplit('/').next().unwrap_or(dir);
        return show(&mut out, tree, reader, (node, name, dir), long).await;
    }
    let mut from = 0;
    loop {
        let mut batch: Vec<(NodeId, String)> = Vec::new();
        tree.children(node, from, |c| {
            batch.push((c.id, c.name.to_string()));
            from = c.next;
            batch.len() >= BATCH
        })?;
        for (id, name) in &batch {
            let full = match dir {
                "" => name.clone(),
                dir => format!("{dir}/{name}"),
            };
            show(&mut out, tree, reader, (*id, name, &full), long).await?;
        }
        if batch.len() < BATCH {
            return Ok(());
        }
    }
}

/// One line of `packfs ls` for node `id`, named `name`, at `path`.
async fn show(
    out: &mut impl Write,
    tree: &Tree,
    reader: &Reader,
    (id, name, path): (NodeId, &str, &str),
    long: bool,
) -> CliResult {
    match (tree.is_dir(id), long) {
        (true, false) => writeln!(out, "{name}/")?,
        (true, true) => writeln!(out, "{:>14}  {:<26}  {name}/", "-", "directory")?,
        (false, false) => writeln!(out, "{name}")?,
        (false, true) => {
            let Some(NodeKind::File(i)) = tree.node(id)?.map(|n| n.kind) else {
                return Err(format!("{name}: vanished").into());
            };
            let item = tree.item(i)?;
            let target = match item.special() {
                Some(Special::Symlink) => {
                    let data = tree.file_data(path)?;
                    let target = reader.read_item(&data, 0, data.size).await?;
                    format!(" -> {}", String::from_utf8_lossy(&target))
                }
                _ => String::new(),
            };
            writeln!(
                out,
                "{:>14}  {:<26}  {name}{target}",
                item.size(),
                item.media_type()
            )?
        }
    }
    Ok(())
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
