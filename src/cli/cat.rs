//! `packfs cat`: a file of a dataset, view, bundle or array to stdout.

use std::io::Write;

use clap::Args;
use packfs_core::catalog::view::ViewSpec;
use packfs_core::catalog::Catalog;
use packfs_core::kind::Kind;
use packfs_core::reader::Reader;
use packfs_core::store::StoreConfig;
use packfs_core::tree::Tree;

use super::contents::{resolve_in, Contents};
use super::{CliResult, DatasetAt};

/// Bytes read at a time.
const STEP: u64 = 8 << 20;

#[derive(Args, Debug)]
pub(crate) struct CatArgs {
    #[command(flatten)]
    pub at: DatasetAt,
    /// Path inside the dataset, e.g. train/image/cat/001.jpg.
    pub path: String,
    /// Read the path in a loader view (as `mount --view`), e.g.
    /// `--view webdataset train/shard-000000.tar`.
    #[arg(long, value_name = "SPEC")]
    pub view: Option<ViewSpec>,
}

/// Writes the file `args` names to stdout; a reader that goes away ends it
/// quietly.
pub(super) async fn run(args: CatArgs, config: &StoreConfig) -> CliResult {
    match Contents::open(&args.at, args.view.as_ref(), config).await? {
        Contents::Tree { tree, reader } => cat_tree(&tree, &reader, &args.path).await,
        Contents::Catalog { catalog, reader } => cat_catalog(&*catalog, &reader, &args.path).await,
    }
}

/// `packfs cat` of a dataset's file.
async fn cat_tree(tree: &Tree, reader: &Reader, path: &str) -> CliResult {
    let item = tree.file_data(path)?;
    let mut out = std::io::stdout().lock();
    let mut offset = 0;
    while offset < item.size {
        let bytes = reader.read_item(&item, offset, STEP).await?;
        if !emit(&mut out, &bytes)? {
            return Ok(());
        }
        offset += bytes.len() as u64;
    }
    out.flush()?;
    Ok(())
}

/// `packfs cat` of a view's, bundle's or array's file.
async fn cat_catalog(catalog: &dyn Catalog, reader: &Reader, path: &str) -> CliResult {
    let id = resolve_in(catalog, path)?;
    let entry = catalog
        .entry(id)?
        .ok_or_else(|| format!("{path}: no such file or directory"))?;
    if entry.kind == Kind::Dir {
        return Err(format!("{path}: is a directory").into());
    }
    // A whole file is checked against its checksum, if its catalog records
    // one; the last bytes are written only if it agrees.
    let mut check = catalog.whole_read(id)?;
    let mut out = std::io::stdout().lock();
    let mut offset = 0;
    while offset < entry.size {
        let range = offset..entry.size.min(offset + STEP);
        let extents = catalog
            .extents(id, range.clone())?
            .ok_or_else(|| format!("{path}: vanished"))?;
        let bytes = reader.read(extents).await?;
        if let Some(check) = &mut check {
            check.feed(offset, &bytes)?;
        }
        if !emit(&mut out, &bytes)? {
            return Ok(());
        }
        offset = range.end;
    }
    out.flush()?;
    Ok(())
}

/// Writes `bytes` to `out`; `false` if the reader went away (a closed pipe).
fn emit(out: &mut impl Write, bytes: &[u8]) -> std::io::Result<bool> {
    match out.write_all(bytes) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(false),
        r => r.map(|()| true),
    }
}
