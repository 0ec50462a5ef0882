//! Checking an import source directory before anything is written.

use std::path::Path;
use std::sync::Arc;

use packfs_format::{validate_item_name, validate_segment};

use super::source::{RowSource, TrackSource};
use super::walk::{Walk, Walked};
use super::ImportError;
use crate::source_tree::{
    check_root, list_dir, problems_report, Links, SourceEntry, SourceIoError,
};

impl From<SourceIoError> for ImportError {
    fn from(e: SourceIoError) -> Self {
        ImportError::Io {
            op: e.op,
            path: e.path,
            source: e.source,
        }
    }
}

/// Checks every file of `src` (read as [`ImportOptions::timeline`]
/// says) and counts each Track's files and bytes, holding no name per
/// file; every problem found (up to a limit) if any file cannot be
/// imported. Tracks without files are left out.
///
/// [`ImportOptions::timeline`]: super::ImportOptions::timeline
pub(super) fn scan(src: &Path, timeline: Option<&str>) -> Result<Vec<TrackSource>, ImportError> {
    if let Some(t) = timeline {
        if let Err(e) = validate_segment(t, "timeline") {
            return Err(ImportError::Source(vec![e.to_string()]));
        }
    }
    check_root(src)?;
    let mut problems = Vec::new();
    let mut tracks = Vec::new();
    match timeline {
        Some(t) => modalities(src, t, None, &mut tracks, &mut problems)?,
        None => {
            for entry in sorted(src, &mut problems)? {
                if !entry.meta.is_dir() {
                    wrong_depth(&entry, &[], None, &mut problems);
                } else if let Err(e) = validate_segment(&entry.name, "timeline") {
                    problems.push(format!("{}: {e}", entry.path.display()));
                } else {
                    let t = entry.name.as_str();
                    modalities(&entry.path, t, Some(t), &mut tracks, &mut problems)?;
                }
            }
        }
    }
    for track in &mut tracks {
        let RowSource::Dir(dir) = &track.rows else {
            unreachable!("a directory's Tracks are read from it")
        };
        // Names of one file (hard links) are stored once.
        let mut linked = std::collections::HashSet::new();
        for row in Walk::new(dir.clone()) {
            match row? {
                Walked::File {
                    size, hard_link, ..
                } => {
                    track.files += 1;
                    if hard_link.is_none_or(|id| linked.insert(id)) {
                        track.bytes += size;
                    }
                }
                Walked::Dir(_) => {}
                Walked::Problem(problem) => problems.push(problem),
            }
        }
    }
    if let Some(report) = problems_report(problems) {
        return Err(ImportError::Source(report));
    }
    tracks.retain(|t| t.files > 0);
    Ok(tracks)
}

/// The entries of `dir`, by name.
fn sorted(dir: &Path, problems: &mut Vec<String>) -> Result<Vec<SourceEntry>, ImportError> {
    let mut entries = list_dir(dir, Links::Follow, problems)?;
    entries.sort_unstable_by(|a, b| a.name.cmp(&b.name));
    Ok(entries)
}

/// Adds the modality directories of `dir`, the directory of `timeline`
/// (`timeline_dir` is its name when SRC has timeline directories), to
/// `tracks`.
fn modalities(
    dir: &Path,
    timeline: &str,
    timeline_dir: Option<&str>,
    tracks: &mut Vec<TrackSource>,
    problems: &mut Vec<String>,
) -> Result<(), ImportError> {
    for entry in sorted(dir, problems)? {
        if !entry.meta.is_dir() {
            let above: Vec<String> = timeline_dir.into_iter().map(str::to_owned).collect();
            let given = timeline_dir.is_none().then_some(timeline);
            wrong_depth(&entry, &above, given, problems);
        } else if let Err(e) = validate_segment(&entry.name, "modality") {
            problems.push(format!("{}: {e}", entry.path.display()));
        } else {
            tracks.push(TrackSource {
                key: Arc::new((timeline.to_owned(), entry.name)),
                files: 0,
                bytes: 0,
                rows: RowSource::Dir(entry.path),
            });
        }
    }
    Ok(())
}

/// Records the problem of a file above the modality directories, found
/// below the directories `above` (`timeline` as given to the import).
fn wrong_depth(
    entry: &SourceEntry,
    above: &[String],
    timeline: Option<&str>,
    problems: &mut Vec<String>,
) {
    let mut parts = above.to_vec();
    parts.push(entry.name.clone());
    if let Err(problem) = classify(&parts, timeline) {
        problems.push(format!("{}: {problem}", entry.path.display()));
    }
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
