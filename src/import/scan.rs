//! Scanning and checking an import source before anything is written.

use std::fs;
use std::path::Path;

use super::{ImportError, SourceFile};
use crate::format::{validate_item_name, validate_segment};

/// How many source problems are listed before the rest are summarized.
const MAX_REPORTED: usize = 20;

/// Lists the files of `src`, sorted by (timeline, modality, name), or every
/// problem found (up to a limit) if any file cannot be imported.
pub(super) fn scan(src: &Path, timeline: Option<&str>) -> Result<Vec<SourceFile>, ImportError> {
    let mut problems = Vec::new();
    if let Some(t) = timeline {
        if let Err(e) = validate_segment(t, "--timeline") {
            return Err(ImportError::Source(vec![e.to_string()]));
        }
    }
    match fs::metadata(src) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            return Err(ImportError::Source(vec![format!(
                "{}: not a directory",
                src.display()
            )]))
        }
        Err(source) => {
            return Err(ImportError::Io {
                op: "read source",
                path: src.to_path_buf(),
                source,
            })
        }
    }
    let mut files = Vec::new();
    let mut prefix = Vec::new();
    walk(src, &mut prefix, timeline, &mut files, &mut problems)?;
    if !problems.is_empty() {
        let total = problems.len();
        problems.truncate(MAX_REPORTED);
        if total > MAX_REPORTED {
            problems.push(format!("… and {} more problems", total - MAX_REPORTED));
        }
        problems.push("nothing was written".into());
        return Err(ImportError::Source(problems));
    }
    files.sort_by(|a, b| {
        (&a.timeline, &a.modality, &a.name).cmp(&(&b.timeline, &b.modality, &b.name))
    });
    Ok(files)
}

fn walk(
    dir: &Path,
    prefix: &mut Vec<String>,
    timeline: Option<&str>,
    files: &mut Vec<SourceFile>,
    problems: &mut Vec<String>,
) -> Result<(), ImportError> {
    let entries = fs::read_dir(dir).map_err(|source| ImportError::Io {
        op: "list",
        path: dir.to_path_buf(),
        source,
    })?;
    for entry in entries {
        let entry = entry.map_err(|source| ImportError::Io {
            op: "list",
            path: dir.to_path_buf(),
            source,
        })?;
        let path = entry.path();
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            problems.push(format!("{}: file name is not valid UTF-8", path.display()));
            continue;
        };
        let is_link = entry.file_type().map(|t| t.is_symlink()).unwrap_or(false);
        let meta = fs::metadata(&path).map_err(|source| ImportError::Io {
            op: "stat",
            path: path.clone(),
            source,
        })?;
        prefix.push(name);
        if meta.is_dir() {
            if is_link {
                problems.push(format!(
                    "{}: symbolic link to a directory is not followed",
                    path.display()
                ));
            } else {
                walk(&path, prefix, timeline, files, problems)?;
            }
        } else if meta.is_file() {
            match classify(prefix, timeline) {
                Ok((timeline, modality, name)) => files.push(SourceFile {
                    timeline,
                    modality,
                    name,
                    path,
                    size: meta.len(),
                }),
                Err(problem) => problems.push(format!("{}: {problem}", path.display())),
            }
        } else {
            problems.push(format!(
                "{}: not a regular file or directory",
                path.display()
            ));
        }
        prefix.pop();
    }
    Ok(())
}

/// Splits a file's path below SRC into (timeline, modality, item name).
fn classify(parts: &[String], timeline: Option<&str>) -> Result<(String, String, String), String> {
    let (timeline, rest) = match timeline {
        Some(t) => (t.to_string(), parts),
        None => match parts.split_first() {
            Some((t, rest)) => (t.clone(), rest),
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
    validate_segment(&timeline, "timeline").map_err(|e| e.to_string())?;
    validate_segment(modality, "modality").map_err(|e| e.to_string())?;
    validate_item_name(&name, "item").map_err(|e| e.to_string())?;
    Ok((timeline, modality.clone(), name))
}
