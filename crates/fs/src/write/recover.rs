//! Crash recovery: a mount that died (`kill -9`, a crash) left closed files
//! and changes in its spool's journal; the next mount of the same spool
//! replays them onto the Manifest the journal names and commits them before
//! it serves anything.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use packfs_core::dataset::Dataset;
use packfs_core::reader::Reader;
use packfs_core::tree::{Tree, DEFAULT_INDEX_BYTES};
use packfs_format::time_of_ns;
use tracing::warn;

use super::journal::{self, Journal, Record};
use super::{Spool, WriteError, WriteOptions, Writer};
use crate::namespace::{Ino, Namespace, NsError, ROOT_INO};

/// Commits what the journal of the spool at `spool_dir` holds for
/// `ref_name`, if anything; returns how many changes were replayed.
pub async fn recover(
    dataset: &Dataset,
    ref_name: &str,
    reader: Reader,
    spool_dir: &Path,
    options: &WriteOptions,
) -> Result<usize, WriteError> {
    if !spool_dir.join(super::spool::JOURNAL).exists() {
        return Ok(0);
    }
    let spool = Spool::open(spool_dir)?;
    let records =
        journal::read(&spool.journal_path()).map_err(spool.error("read the journal of"))?;
    let (Some(Record::Base(base)), changes) =
        (records.first(), records.get(1..).unwrap_or_default())
    else {
        return Ok(0);
    };
    if changes.is_empty() {
        return Ok(0);
    }
    warn!(
        "spool {}: an earlier mount ended before committing {} change(s); committing them now",
        spool_dir.display(),
        changes.len()
    );
    let tree = Tree::open(dataset, *base, "the spool journal", DEFAULT_INDEX_BYTES).await?;
    let ns = Arc::new(Namespace::new(tree, true));
    let journal =
        Journal::open(&spool.journal_path()).map_err(spool.error("open the journal of"))?;
    let writer = Writer::build(
        ns.clone(),
        dataset.clone(),
        ref_name,
        reader,
        spool,
        journal,
        options.clone(),
    );
    // Files being written when the mount died, by spool file: their path,
    // kept up to date through renames, names them in lost+found.
    let mut unclosed: HashMap<String, String> = HashMap::new();
    for record in changes {
        let mut replayed = false;
        match record {
            Record::Open { path, file } => {
                unclosed.insert(file.clone(), path.clone());
            }
            Record::Ended { file } => {
                unclosed.remove(file);
            }
            Record::Put { file, .. } => {
                unclosed.remove(file);
            }
            Record::Rename { from, to } => {
                // A file never closed has no version to move, but the
                // rename still replaced what `to` named.
                let unfinished = unclosed.values().any(|p| p == from);
                if unfinished
                    && parent_of(&ns, from)
                        .and_then(|(d, n)| ns.lookup(d, n))
                        .is_err()
                {
                    if let Ok((parent, name)) = parent_of(&ns, to) {
                        if let Ok(ino) = ns.unlink(parent, name) {
                            writer.forget_if_unused(ino);
                        }
                    }
                    replayed = true;
                }
                for path in unclosed.values_mut() {
                    if let Some(rest) = path.strip_prefix(from.as_str()) {
                        if rest.is_empty() || rest.starts_with('/') {
                            *path = format!("{to}{rest}");
                        }
                    }
                }
            }
            _ => {}
        }
        if replayed {
            continue;
        }
        if let Err(e) = replay(&writer, &ns, record) {
            warn!("journal: cannot replay {record:?} ({e}); skipped");
        }
    }
    writer.flush().await?;
    writer
        .spool
        .quarantine_leftovers(&unclosed)
        .map_err(writer.spool.error("move leftovers of"))?;
    // Everything is committed or in lost+found: nothing is left to replay
    // (a flush that committed nothing did not rewrite the journal).
    Journal::create(&writer.spool.journal_path(), *base)
        .map_err(writer.spool.error("reset the journal of"))?;
    Ok(changes.len())
}

/// Applies one journaled change to `ns`.
fn replay(writer: &Writer, ns: &Namespace, record: &Record) -> Result<(), WriteError> {
    match record {
        Record::Base(_) | Record::Open { .. } | Record::Ended { .. } => {}
        Record::Put {
            path,
            file,
            size,
            attrs,
            special,
        } => {
            let (parent, name) = parent_of(ns, path)?;
            let spool = writer.spool.named(file);
            if !spool.path.exists() {
                return Err(WriteError::SpoolFile {
                    path: spool.path,
                    source: std::io::ErrorKind::NotFound.into(),
                });
            }
            let ino = ns.put_file(parent, name, (spool, *size), *special)?;
            let mtime = attrs.mtime_ns.map(time_of_ns);
            ns.set_attrs(ino, attrs.mode, mtime)?;
        }
        Record::Unlink { path } => {
            let (parent, name) = parent_of(ns, path)?;
            let ino = ns.unlink(parent, name)?;
            writer.forget_if_unused(ino);
        }
        Record::Mkdir { path, mode } => {
            // A timeline made before the last commit is not in its
            // Manifest (empty timelines are not stored): made again here.
            let (dirs, _) = path.rsplit_once('/').unwrap_or(("", path));
            let mut at = ROOT_INO;
            for c in dirs.split('/').filter(|c| !c.is_empty()) {
                at = match ns.lookup(at, c.as_bytes()) {
                    Err(NsError::NotFound) => ns.mkdir(at, c.as_bytes(), 0o755)?.ino,
                    found => found?,
                };
            }
            let (parent, name) = parent_of(ns, path)?;
            ns.mkdir(parent, name, mode.unwrap_or(0o755))?;
        }
        Record::Rmdir { path } => {
            let (parent, name) = parent_of(ns, path)?;
            ns.rmdir(parent, name)?;
        }
        Record::SetAttr {
            path,
            mode,
            mtime_ns,
        } => {
            let ino = path
                .split('/')
                .filter(|c| !c.is_empty())
                .try_fold(ROOT_INO, |dir, c| ns.lookup(dir, c.as_bytes()))?;
            ns.set_attrs(ino, *mode, mtime_ns.map(time_of_ns))?;
        }
        Record::Rename { from, to } => {
            let (parent, name) = parent_of(ns, from)?;
            let (new_parent, new_name) = parent_of(ns, to)?;
            if let Some(replaced) = ns.rename(parent, name, new_parent, new_name)? {
                writer.forget_if_unused(replaced);
            }
        }
        Record::Link { from, to } => {
            let (parent, name) = parent_of(ns, from)?;
            let ino = ns.lookup(parent, name)?;
            let (new_parent, new_name) = parent_of(ns, to)?;
            ns.link(ino, new_parent, new_name)?;
        }
    }
    Ok(())
}

/// The directory holding `path` and the last component's name.
fn parent_of<'a>(ns: &Namespace, path: &'a str) -> Result<(Ino, &'a [u8]), NsError> {
    let (dirs, name) = path.rsplit_once('/').unwrap_or(("", path));
    let parent = dirs
        .split('/')
        .filter(|c| !c.is_empty())
        .try_fold(ROOT_INO, |dir, c| ns.lookup(dir, c.as_bytes()))?;
    Ok((parent, name.as_bytes()))
}
