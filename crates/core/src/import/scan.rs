//! Scanning and checking an import source before anything is written.

use std::path::Path;

use packfs_format::{validate_item_name, validate_segment, Attrs, TrackItem};

use super::listing::{Groups, Listing};
use super::ImportError;
use crate::source_tree::{check_root, list_dir, problems_report, SourceIoError};

impl From<SourceIoError> for ImportError {
    fn from(e: SourceIoError) -> Self {
        ImportError::Io {
            op: e.op,
            path: e.path,
            source: e.source,
        }
    }
}

/// Lists the files of `src`, sorted by (timeline, modality, name), or every
/// problem found (up to a limit) if any file cannot be imported.
pub(super) fn scan(src: &Path, timeline: Option<&str>) -> Result<Listing, ImportError> {
    let mut problems = Vec::new();
    if let Some(t) = timeline {
        if let Err(e) = validate_segment(t, "timeline") {
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
        "SRC/<modality>/<name…> (a timeline given)"
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
