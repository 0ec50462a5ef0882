//! Scanning and checking an import source before anything is written,
//! and the rules every command that reads a source tree shares
//! ([`list_dir`], [`problems_report`]).

use std::fs;
use std::path::{Path, PathBuf};

use thiserror::Error;

use super::listing::{Groups, Listing};
use super::ImportError;
use crate::format::{validate_item_name, validate_segment, Attrs, TrackItem};

/// How many source problems are listed before the rest are summarized.
const MAX_REPORTED: usize = 20;

/// A source directory or entry that could not be listed or examined.
#[derive(Debug, Error)]
#[error("{op} {path}: {source}")]
pub struct SourceIoError {
    pub op: &'static str,
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

impl From<SourceIoError> for ImportError {
    fn from(e: SourceIoError) -> Self {
        ImportError::Io {
            op: e.op,
            path: e.path,
            source: e.source,
        }
    }
}

/// An entry of a source directory that packfs reads: a directory (never
/// a symbolic link) or a regular file (a symbolic link to one is followed:
/// `meta` is the target's).
pub struct SourceEntry {
    pub name: String,
    pub path: PathBuf,
    pub meta: fs::Metadata,
}

/// The entries of `dir` packfs reads, in no particular order. Entries it
/// refuses are described, with their paths, in `problems`: names that are
/// not UTF-8, symbolic links to directories (not followed: they could
/// loop), and anything but regular files and directories.
pub fn list_dir(dir: &Path, problems: &mut Vec<String>) -> Result<Vec<SourceEntry>, SourceIoError> {
    let listing = |source| SourceIoError {
        op: "list",
        path: dir.to_path_buf(),
        source,
    };
    let mut listed = Vec::new();
    for entry in fs::read_dir(dir).map_err(listing)? {
        let entry = entry.map_err(listing)?;
        let path = entry.path();
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            problems.push(format!("{}: file name is not valid UTF-8", path.display()));
            continue;
        };
        let is_link = entry.file_type().is_ok_and(|t| t.is_symlink());
        // Anything but a link is examined relative to its directory: no
        // lookup of the whole path per file (~3% of an import's CPU).
        let meta = match is_link {
            true => fs::metadata(&path),
            false => entry.metadata(),
        };
        let meta = meta.map_err(|source| SourceIoError {
            op: "stat",
            path: path.clone(),
            source,
        })?;
        if meta.is_dir() && is_link {
            problems.push(format!(
                "{}: symbolic link to a directory is not followed",
                path.display()
            ));
        } else if meta.is_dir() || meta.is_file() {
            listed.push(SourceEntry { name, path, meta });
        } else {
            problems.push(format!(
                "{}: not a regular file or directory",
                path.display()
            ));
        }
    }
    Ok(listed)
}

/// Fails unless `src`, the root of a source tree, is a directory.
pub fn check_root(src: &Path) -> Result<(), SourceIoError> {
    let fail = |source| SourceIoError {
        op: "read source",
        path: src.to_path_buf(),
        source,
    };
    match fs::metadata(src) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(fail(std::io::ErrorKind::NotADirectory.into())),
        Err(source) => Err(fail(source)),
    }
}

/// What to tell the user of `problems` found in a source tree (`None`
/// when there are none): the first few, how many more, and that nothing
/// was written.
pub fn problems_report(mut problems: Vec<String>) -> Option<Vec<String>> {
    if problems.is_empty() {
        return None;
    }
    let total = problems.len();
    problems.truncate(MAX_REPORTED);
    if total > MAX_REPORTED {
        problems.push(format!("… and {} more problems", total - MAX_REPORTED));
    }
    problems.push("nothing was written".into());
    Some(problems)
}

/// Lists the files of `src`, sorted by (timeline, modality, name), or every
/// problem found (up to a limit) if any file cannot be imported.
pub(super) fn scan(src: &Path, timeline: Option<&str>) -> Result<Listing, ImportError> {
    let mut problems = Vec::new();
    if let Some(t) = timeline {
        if let Err(e) = validate_segment(t, "--timeline") {
            return Err(ImportError::Source(vec![e.to_string()]));
        }
    }
    check_root(src)?;
    let mut files = Groups::new();
    let mut prefix = Vec::new();
    walk(src, &mut prefix, timeline, &mut files, &mut problems)?;
    if let Some(report) = problems_report(problems) {
        return Err(ImportError::Source(report));
    }
    let tracks = files.sorted(|item| &item.name);
    Ok(Listing::new(src.to_path_buf(), timeline.is_none(), tracks))
}

fn walk(
    dir: &Path,
    prefix: &mut Vec<String>,
    timeline: Option<&str>,
    files: &mut Groups<TrackItem>,
    problems: &mut Vec<String>,
) -> Result<(), ImportError> {
    for entry in list_dir(dir, problems)? {
        prefix.push(entry.name);
        if entry.meta.is_dir() {
            walk(&entry.path, prefix, timeline, files, problems)?;
        } else {
            match classify(prefix, timeline) {
                Ok((timeline, modality, name)) => {
                    // A directory's import records no mode or mtime.
                    let item = files.item(name, entry.meta.len(), Attrs::default());
                    files.group(timeline, modality).push(item);
                }
                Err(problem) => problems.push(format!("{}: {problem}", entry.path.display())),
            }
        }
        prefix.pop();
    }
    Ok(())
}

/// Splits a file's path below SRC into (timeline, modality, item name);
/// what is wrong with it if it is not a valid item's.
pub(super) fn classify<'a>(
    parts: &'a [String],
    timeline: Option<&'a str>,
) -> Result<(&'a str, &'a str, String), String> {
    let (timeline, rest) = match timeline {
        Some(t) => (t, parts),
        None => match parts.split_first() {
            Some((t, rest)) => (t.as_str(), rest),
            None => unreachable!("a file has a name"),
        },
    };
    let layout = if parts.len() == rest.len() {
        "SRC/<modality>/<name…> (with --timeline)"
    } else {
        "SRC/<timeline>/<modality>/<name…>"
    };
    let [modality, name @ ..] = rest else {
        return Err(format!("file at the wrong depth: the layout is {layout}"));
    };
    if name.is_empty() {
        return Err(format!("file at the wrong depth: the layout is {layout}"));
    }
    let name = name.join("/");
    validate_segment(timeline, "timeline").map_err(|e| e.to_string())?;
    validate_segment(modality, "modality").map_err(|e| e.to_string())?;
    validate_item_name(&name, "item").map_err(|e| e.to_string())?;
    Ok((timeline, modality, name))
}
