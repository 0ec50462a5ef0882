//! docs/USAGE.md's command reference is the `--help` of every command,
//! copied verbatim, so it cannot drift from the binary.
//!
//! The commands are found by reading `packfs --help` (and the help of
//! every command that has subcommands, such as `packfs bundle`), not from
//! a list kept here. Each has a section in the reference: a `### packfs
//! <command>` heading followed by a ```` ```text ```` block holding its
//! `--help`. Prose around the blocks is written by hand and kept.
//!
//! When the help changed, rerun with `PACKFS_BLESS=1` to rewrite the
//! blocks (a new command gets a section at the end of the reference, a
//! removed command's section goes), then review the diff.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The heading of the generated part; it runs to the next `## ` heading.
const REFERENCE: &str = "## Command reference";
/// The prefix of one command's heading inside it.
const COMMAND_HEADING: &str = "### packfs";
const FENCE_OPEN: &str = "```text";
const FENCE_CLOSE: &str = "```";

fn usage_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/USAGE.md")
}

/// `packfs <words…> --help`, checked to come out the same at any terminal
/// width: clap here wraps nothing (no `wrap_help` feature), so the doc can
/// hold it verbatim.
fn help(words: &[String]) -> String {
    let run = |columns: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_packfs"))
            .args(words)
            .arg("--help")
            .env("COLUMNS", columns)
            .env_remove("CLICOLOR_FORCE")
            .output()
            .expect("run packfs");
        assert!(
            out.status.success(),
            "packfs {} --help failed: {}",
            words.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("help is UTF-8")
    };
    let narrow = run("40");
    let wide = run("300");
    assert_eq!(
        narrow,
        wide,
        "`packfs {} --help` depends on the terminal width (was clap's wrap_help \
         feature turned on?); docs/USAGE.md can only hold output that does not",
        words.join(" ")
    );
    assert!(!narrow.contains('\x1b'), "help output holds escape codes");
    assert!(
        narrow.ends_with('\n') && !narrow.lines().any(|line| line.starts_with("```")),
        "this help cannot be held in a fenced block:\n{narrow}"
    );
    narrow
}

/// The subcommands a help text lists under `Commands:`, without clap's
/// own `help`.
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|line| *line != "Commands:")
        .skip(1)
        .take_while(|line| !line.trim().is_empty())
        // A command's line is indented by two spaces; continuation lines
        // of a long description by more.
        .filter(|line| line.starts_with("  ") && !line.starts_with("   "))
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_string)
        .collect()
}

/// Every command, depth first from `packfs` itself, with its help:
/// (`["bundle", "create"]`, help of `packfs bundle create`).
fn all_helps() -> Vec<(Vec<String>, String)> {
    let mut found = Vec::new();
    let mut pending = vec![Vec::new()];
    while let Some(words) = pending.pop() {
        let text = help(&words);
        for sub in subcommands(&text).into_iter().rev() {
            let mut deeper = words.clone();
            deeper.push(sub);
            pending.push(deeper);
        }
        found.push((words, text));
    }
    found
}

/// `packfs bundle create` for `["bundle", "create"]`.
fn title(words: &[String]) -> String {
    std::iter::once("packfs")
        .chain(words.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join(" ")
}

/// One command's section of the reference, as lines of the doc.
struct Section {
    /// `packfs bundle create`.
    title: String,
    /// Line index of the heading.
    heading: usize,
    /// Line indices of the opening and closing fence of its first
    /// ```` ```text ```` block, if it has one.
    block: Option<(usize, usize)>,
    /// Line index where the section ends (the next heading, or the end of
    /// the reference).
    end: usize,
}

/// Which lines are inside a fenced block (fences included), where a `#`
/// is not a heading.
fn fenced(lines: &[String]) -> Vec<bool> {
    let mut inside = false;
    lines
        .iter()
        .map(|line| {
            let fence = line.starts_with("```");
            let fenced = inside || fence;
            if fence {
                inside = !inside;
            }
            fenced
        })
        .collect()
}

/// The line where the reference ends (the next `## ` heading, or the end
/// of the doc) and its command sections.
fn parse(lines: &[String]) -> (usize, Vec<Section>) {
    let fenced = fenced(lines);
    let heading = |i: usize, prefix: &str| !fenced[i] && lines[i].starts_with(prefix);
    let start = (0..lines.len())
        .find(|&i| !fenced[i] && lines[i] == REFERENCE)
        .unwrap_or_else(|| panic!("docs/USAGE.md has no `{REFERENCE}` heading"));
    let end = (start + 1..lines.len())
        .find(|&i| heading(i, "## "))
        .unwrap_or(lines.len());
    let mut sections = Vec::new();
    let mut i = start + 1;
    while i < end {
        let line = &lines[i];
        let Some(title) = line
            .strip_prefix(COMMAND_HEADING)
            .filter(|rest| !fenced[i] && (rest.is_empty() || rest.starts_with(' ')))
            .map(|rest| format!("packfs{rest}"))
        else {
            i += 1;
            continue;
        };
        let section_end = (i + 1..end).find(|&j| heading(j, "#")).unwrap_or(end);
        let block = (i + 1..section_end)
            .find(|&j| lines[j] == FENCE_OPEN)
            .map(|open| {
                let close = (open + 1..section_end)
                    .find(|&j| lines[j] == FENCE_CLOSE)
                    .unwrap_or_else(|| panic!("unclosed ```text block under `{line}`"));
                (open, close)
            });
        sections.push(Section {
            title,
            heading: i,
            block,
            end: section_end,
        });
        i = section_end;
    }
    (end, sections)
}

/// A fenced block holding `text`.
fn block_lines(text: &str) -> Vec<String> {
    std::iter::once(FENCE_OPEN)
        .chain(text.lines())
        .chain(std::iter::once(FENCE_CLOSE))
        .map(str::to_string)
        .collect()
}

/// What docs/USAGE.md should be, and what is wrong with it now: every
/// command's block set to its help, sections of commands that no longer
/// exist removed, missing sections added at the end of the reference.
fn regenerate(doc: &str, helps: &[(Vec<String>, String)]) -> (String, Vec<String>) {
    let mut lines: Vec<String> = doc.lines().map(str::to_string).collect();
    let mut problems = Vec::new();
    let (_, sections) = parse(&lines);
    // Line range replacements, applied from the bottom up.
    let mut edits: Vec<(usize, usize, Vec<String>)> = Vec::new();
    for section in &sections {
        let help = helps
            .iter()
            .find(|(words, _)| title(words) == section.title);
        match (help, section.block) {
            (None, _) => {
                problems.push(format!(
                    "`{}` has a section but is no longer a command",
                    section.title
                ));
                edits.push((section.heading, section.end, Vec::new()));
            }
            (Some((_, text)), None) => {
                problems.push(format!("`### {}` has no ```text block", section.title));
                let mut insert = vec![lines[section.heading].clone(), String::new()];
                insert.extend(block_lines(text));
                edits.push((section.heading, section.heading + 1, insert));
            }
            (Some((_, text)), Some((open, close))) => {
                if lines[open + 1..close].join("\n") + "\n" != *text {
                    problems.push(format!(
                        "the ```text block under `### {}` is not the output of `{} --help`",
                        section.title, section.title
                    ));
                    edits.push((open, close + 1, block_lines(text)));
                }
            }
        }
    }
    edits.sort_by_key(|(start, _, _)| std::cmp::Reverse(*start));
    for (start, end, replacement) in edits {
        lines.splice(start..end, replacement);
    }
    // New commands: after the last non-blank line of the reference.
    let (reference_end, sections) = parse(&lines);
    let mut appended = Vec::new();
    for (words, text) in helps {
        let title = title(words);
        if !sections.iter().any(|section| section.title == title) {
            problems.push(format!("`{title}` has no `### {title}` section"));
            appended.extend([String::new(), format!("### {title}"), String::new()]);
            appended.extend(block_lines(text));
        }
    }
    if !appended.is_empty() {
        let mut at = reference_end;
        while lines[at - 1].trim().is_empty() {
            at -= 1;
        }
        if at == reference_end && reference_end < lines.len() {
            appended.push(String::new());
        }
        lines.splice(at..at, appended);
    }
    (lines.join("\n") + "\n", problems)
}

#[test]
fn usage_doc_holds_every_commands_help() {
    let helps = all_helps();
    let names: Vec<String> = helps.iter().map(|(words, _)| words.join(" ")).collect();
    // The discovery itself works: the top command, its commands and the
    // nested `bundle create` are all found.
    for expected in ["", "import", "mount", "bundle", "bundle create"] {
        assert!(
            names.iter().any(|name| name == expected),
            "`packfs {expected}` not found in the help; found {names:?}"
        );
    }
    let path = usage_path();
    let doc = std::fs::read_to_string(&path).expect("read docs/USAGE.md");
    let (updated, problems) = regenerate(&doc, &helps);
    if problems.is_empty() {
        return;
    }
    if std::env::var("PACKFS_BLESS").is_ok_and(|v| v == "1") {
        std::fs::write(&path, updated).expect("write docs/USAGE.md");
        eprintln!(
            "rewrote docs/USAGE.md's command reference:\n  {}",
            problems.join("\n  ")
        );
        return;
    }
    panic!(
        "docs/USAGE.md's command reference does not match the binary's --help:\n  {}\n\
         Rerun with PACKFS_BLESS=1 to rewrite the generated blocks \
         (PACKFS_BLESS=1 cargo test --test fuse usage_doc), then review the diff \
         and update the prose around them if it no longer holds.",
        problems.join("\n  ")
    );
}

#[test]
fn subcommands_are_read_from_the_commands_list() {
    let text = "Usage: packfs <COMMAND>\n\nCommands:\n  import  Pack a tree\n  \
                mount   Mount a dataset\n          and more\n  help    Print this message\n\n\
                Options:\n  -v, --verbose  More\n";
    assert_eq!(subcommands(text), ["import", "mount"]);
    assert!(subcommands("Usage: packfs ls\n\nOptions:\n  -l\n").is_empty());
}

#[test]
fn blessing_keeps_prose_and_fixes_sections() {
    let helps = vec![
        (Vec::new(), "top help\n".to_string()),
        (vec!["ls".to_string()], "ls help\nline two\n".to_string()),
        (vec!["cat".to_string()], "cat help\n".to_string()),
    ];
    let doc = "# Usage\n\nProse.\n\n## Command reference\n\nIntro prose.\n\n\
               ### packfs\n\nAbout packfs.\n\n```text\nold top\n```\n\nAfter.\n\n\
               ### packfs ls\n\n```text\nls help\nline two\n```\n\n\
               ### packfs gone\n\n```text\ngone\n```\n\n## Later\n\nKept.\n";
    let (updated, problems) = regenerate(doc, &helps);
    assert_eq!(problems.len(), 3, "{problems:?}");
    assert_eq!(
        updated,
        "# Usage\n\nProse.\n\n## Command reference\n\nIntro prose.\n\n\
         ### packfs\n\nAbout packfs.\n\n```text\ntop help\n```\n\nAfter.\n\n\
         ### packfs ls\n\n```text\nls help\nline two\n```\n\n\
         ### packfs cat\n\n```text\ncat help\n```\n\n## Later\n\nKept.\n"
    );
    let (again, problems) = regenerate(&updated, &helps);
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(again, updated);

    // A `#` line inside a block (or a shell comment in an example above
    // the reference) is not a heading.
    let helps = vec![(Vec::new(), "# not a heading\ntext\n".to_string())];
    let doc = "```sh\n## Command reference\n```\n\n## Command reference\n\n\
               ### packfs\n\n```text\n# not a heading\ntext\n```\n";
    let (again, problems) = regenerate(doc, &helps);
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(again, doc);
}
