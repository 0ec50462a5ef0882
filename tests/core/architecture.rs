//! The layering `docs/ARCHITECTURE.md` draws, checked against the code.
//!
//! The crates make an import of a higher crate a compile error; within a
//! crate this test keeps the rest of the picture true:
//!
//! - every top-level module of a crate sits in exactly one layer of the
//!   `layers` block of ARCHITECTURE.md, and every module named there
//!   exists;
//! - a module uses only modules of layers below its own;
//! - no source file uses another that uses it back, directly or around a
//!   loop (a module's `pub use` of its children's items is its interface,
//!   not a use).
//!
//! Sources are read as text: comments, strings and `#[cfg(test)]` code are
//! left out, and every path that starts with `crate::`, `super::`,
//! `self::` or a child module's name is resolved to the file that defines
//! what it names.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// A module path within a crate: `[]` is the crate root.
type ModPath = Vec<String>;

/// One crate's sources.
struct Crate {
    name: String,
    /// Module path → its file, test-only modules left out.
    files: BTreeMap<ModPath, PathBuf>,
    /// Module path → its code without comments, strings and test code.
    code: BTreeMap<ModPath, String>,
}

#[test]
fn every_module_uses_only_layers_below_it_and_no_file_is_in_a_loop() {
    let layers = layers_of_architecture_md();
    let mut problems = Vec::new();
    for (name, dir) in [
        ("packfs-format", "crates/format/src"),
        ("packfs-core", "crates/core/src"),
        ("packfs-fs", "crates/fs/src"),
    ] {
        let krate = Crate::read(name, &Path::new(ROOT).join(dir));
        let Some(layers) = layers.get(name) else {
            problems.push(format!("ARCHITECTURE.md has no layers of {name}"));
            continue;
        };
        let uses = krate.uses();
        problems.extend(check_layers(&krate, layers, &uses));
        problems.extend(check_loops(&krate, &uses));
    }
    assert!(
        problems.is_empty(),
        "the code and the layers of docs/ARCHITECTURE.md disagree:\n  {}",
        problems.join("\n  ")
    );
}

/// Embedders (a Python binding, a Kubernetes driver) depend on
/// packfs-core alone: it brings no FUSE, no command line and no terminal
/// drawing (the metrics endpoint's HTTP server is packfs-fs's); without
/// its `cloud` feature, no HTTP stack at all.
#[test]
fn the_core_crate_needs_no_fuse_command_line_or_http_server() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let tree = |extra: &[&str]| -> BTreeSet<String> {
        let out = std::process::Command::new(&cargo)
            .current_dir(ROOT)
            .args(["tree", "--locked", "--offline", "-p", "packfs-core"])
            .args(["-e", "normal", "--prefix", "none", "--format", "{p}"])
            .args(extra)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|line| line.split_whitespace().next().map(str::to_string))
            .collect()
    };
    let forbidden = |crates: &BTreeSet<String>, names: &[&str]| -> Vec<String> {
        names
            .iter()
            .filter(|name| crates.contains(**name))
            .map(|name| name.to_string())
            .collect()
    };
    let default = tree(&[]);
    assert!(default.contains("object_store"), "{default:?}");
    let found = forbidden(&default, &["fuser", "clap", "indicatif"]);
    assert!(found.is_empty(), "packfs-core depends on {found:?}");
    let local = tree(&["--no-default-features"]);
    let found = forbidden(&local, &["fuser", "clap", "indicatif", "hyper", "reqwest"]);
    assert!(
        found.is_empty(),
        "packfs-core without `cloud` depends on {found:?}"
    );
}

/// The `layers` block of ARCHITECTURE.md: per crate, its layers top to
/// bottom, each a list of module names.
fn layers_of_architecture_md() -> BTreeMap<String, Vec<Vec<String>>> {
    let doc = std::fs::read_to_string(Path::new(ROOT).join("docs/ARCHITECTURE.md")).unwrap();
    let block = doc
        .split("```layers\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("docs/ARCHITECTURE.md has a ```layers block");
    let mut crates: BTreeMap<String, Vec<Vec<String>>> = BTreeMap::new();
    let mut current = None;
    for line in block.lines().filter(|l| !l.trim().is_empty()) {
        if !line.starts_with(' ') {
            current = Some(line.trim().to_string());
        } else if let Some(name) = &current {
            // `label: a b c`; the label is for readers.
            let modules = line.split_once(':').map_or(line, |(_, m)| m);
            let layer = modules.split_whitespace().map(str::to_string).collect();
            crates.entry(name.clone()).or_default().push(layer);
        }
    }
    crates
}

/// Layer problems: modules not placed, placed twice or not existing, and
/// uses of a module of the same or a higher layer.
fn check_layers(
    krate: &Crate,
    layers: &[Vec<String>],
    uses: &BTreeSet<(ModPath, ModPath)>,
) -> Vec<String> {
    let mut problems = Vec::new();
    let mut rank = BTreeMap::new();
    // Top to bottom in the document: the bottom layer ranks 0.
    for (i, layer) in layers.iter().rev().enumerate() {
        for module in layer {
            if rank.insert(module.clone(), i).is_some() {
                problems.push(format!("{}: {module} is in two layers", krate.name));
            }
        }
    }
    let tops: BTreeSet<String> = krate
        .files
        .keys()
        .filter_map(|path| path.first().cloned())
        .collect();
    for top in &tops {
        if !rank.contains_key(top) {
            problems.push(format!("{}: module {top} is in no layer", krate.name));
        }
    }
    for module in rank.keys() {
        if !tops.contains(module) {
            problems.push(format!(
                "{}: layer module {module} does not exist",
                krate.name
            ));
        }
    }
    for (from, to) in uses {
        let (Some(a), Some(b)) = (from.first(), to.first()) else {
            continue; // the crate root
        };
        if a == b {
            continue;
        }
        if let (Some(ra), Some(rb)) = (rank.get(a), rank.get(b)) {
            if rb >= ra {
                problems.push(format!(
                    "{}: {} uses {}, which is not in a lower layer",
                    krate.name,
                    from.join("::"),
                    to.join("::")
                ));
            }
        }
    }
    problems
}

/// Loops of sibling modules that use each other (with what is inside
/// them). A module's own file and its children's files are parts of one
/// concept, which may use each other; siblings may not, around any loop.
fn check_loops(krate: &Crate, uses: &BTreeSet<(ModPath, ModPath)>) -> Vec<String> {
    let mut graph: BTreeMap<ModPath, Vec<ModPath>> = BTreeMap::new();
    for (from, to) in uses {
        let common = from.iter().zip(to).take_while(|(a, b)| a == b).count();
        if common == from.len() || common == to.len() {
            continue; // a module and a module inside it
        }
        let (a, b) = (from[..=common].to_vec(), to[..=common].to_vec());
        graph.entry(a).or_default().push(b);
    }
    // Depth-first search; a back edge closes a loop.
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    fn visit<'a>(
        node: &'a ModPath,
        graph: &'a BTreeMap<ModPath, Vec<ModPath>>,
        marks: &mut BTreeMap<&'a ModPath, Mark>,
        stack: &mut Vec<&'a ModPath>,
        loops: &mut BTreeSet<String>,
    ) {
        marks.insert(node, Mark::Open);
        stack.push(node);
        for next in graph.get(node).into_iter().flatten() {
            match marks.get(next) {
                None => visit(next, graph, marks, stack, loops),
                Some(Mark::Open) => {
                    let start = stack.iter().position(|n| *n == next).unwrap_or(0);
                    let mut names: Vec<String> =
                        stack[start..].iter().map(|p| p.join("::")).collect();
                    // One loop found from different places is one loop.
                    let first = (0..names.len()).min_by_key(|&i| &names[i]).unwrap_or(0);
                    names.rotate_left(first);
                    names.push(names[0].clone());
                    loops.insert(names.join(" -> "));
                }
                Some(Mark::Done) => {}
            }
        }
        stack.pop();
        marks.insert(node, Mark::Done);
    }
    let mut marks = BTreeMap::new();
    let mut loops = BTreeSet::new();
    for node in graph.keys() {
        if !marks.contains_key(node) {
            visit(node, &graph, &mut marks, &mut Vec::new(), &mut loops);
        }
    }
    loops
        .into_iter()
        .map(|l| format!("{}: modules use each other: {l}", krate.name))
        .collect()
}

impl Crate {
    fn read(name: &str, src: &Path) -> Crate {
        let mut krate = Crate {
            name: name.to_string(),
            files: BTreeMap::new(),
            code: BTreeMap::new(),
        };
        krate.add(Vec::new(), src.join("lib.rs"));
        krate
    }

    /// Adds the module at `path` in `file` and, recursively, the modules it
    /// declares (but those declared for tests only).
    fn add(&mut self, path: ModPath, file: PathBuf) {
        let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{file:?}: {e}"));
        let code = strip_comments_and_strings(&text);
        let dir = match file.file_name().and_then(|n| n.to_str()) {
            Some("lib.rs" | "mod.rs") => file.parent().unwrap().to_path_buf(),
            _ => file.with_extension(""),
        };
        for child in declared_modules(&code) {
            let flat = dir.join(format!("{child}.rs"));
            let nested = dir.join(&child).join("mod.rs");
            let child_file = if flat.exists() { flat } else { nested };
            let mut child_path = path.clone();
            child_path.push(child);
            self.add(child_path, child_file);
        }
        self.code.insert(path.clone(), strip_test_code(&code));
        self.files.insert(path, file);
    }

    fn is_module(&self, path: &[String]) -> bool {
        self.files.contains_key(path)
    }

    /// Every (user, used) pair of modules, each the module whose file
    /// holds the code or the definition.
    fn uses(&self) -> BTreeSet<(ModPath, ModPath)> {
        let reexports = self.reexports();
        let mut uses = BTreeSet::new();
        for (module, code) in &self.code {
            for (path, is_reexport) in paths_in(code) {
                if is_reexport {
                    continue;
                }
                let Some(absolute) = self.absolute(module, &path) else {
                    continue;
                };
                let target = self.defining_module(&absolute, &reexports);
                if &target != module && !target.is_empty() {
                    uses.insert((module.clone(), target));
                }
            }
        }
        uses
    }

    /// What each module's `pub use` names, by (module, name).
    fn reexports(&self) -> BTreeMap<(ModPath, String), ModPath> {
        let mut map = BTreeMap::new();
        for (module, code) in &self.code {
            for (path, is_reexport) in paths_in(code) {
                if !is_reexport {
                    continue;
                }
                let Some(absolute) = self.absolute(module, &path) else {
                    continue;
                };
                let (name, alias) = match path.last().map(|l| l.split_once(" as ")) {
                    Some(Some((name, alias))) => (name.to_string(), alias.to_string()),
                    _ => (path.last().cloned().unwrap_or_default(), String::new()),
                };
                let mut target = absolute;
                target.pop();
                target.push(name.clone());
                let shown = if alias.is_empty() { name } else { alias };
                map.insert((module.clone(), shown), target);
            }
        }
        map
    }

    /// `path` as written in `module`, from the crate root; `None` if it
    /// names something outside the crate.
    fn absolute(&self, module: &ModPath, path: &[String]) -> Option<ModPath> {
        let mut base = module.clone();
        let mut rest = path;
        match rest.first().map(String::as_str) {
            Some("crate") => {
                base.clear();
                rest = &rest[1..];
            }
            Some("self") => rest = &rest[1..],
            Some("super") => {
                while rest.first().map(String::as_str) == Some("super") {
                    base.pop();
                    rest = &rest[1..];
                }
            }
            Some(first) => {
                let mut child = module.clone();
                child.push(first.to_string());
                if !self.is_module(&child) {
                    return None;
                }
            }
            None => return None,
        }
        base.extend(
            rest.iter()
                .map(|s| s.split(" as ").next().unwrap().to_string()),
        );
        Some(base)
    }

    /// The module that defines what `path` names, following re-exports.
    fn defining_module(
        &self,
        path: &[String],
        reexports: &BTreeMap<(ModPath, String), ModPath>,
    ) -> ModPath {
        let mut path = path.to_vec();
        for _ in 0..8 {
            let split = (0..=path.len())
                .rev()
                .find(|&i| self.is_module(&path[..i]))
                .unwrap_or(0);
            let module = path[..split].to_vec();
            let Some(name) = path.get(split) else {
                return module;
            };
            match reexports.get(&(module.clone(), name.clone())) {
                Some(target) => {
                    let mut next = target.clone();
                    next.extend_from_slice(&path[split + 1..]);
                    path = next;
                }
                None => return module,
            }
        }
        path
    }
}

/// `mod x;` declarations, but those under `#[cfg(test)]`.
fn declared_modules(code: &str) -> Vec<String> {
    let mut modules = Vec::new();
    let mut test_only = false;
    for line in code.lines().map(str::trim) {
        if line.starts_with("#[cfg(test)]") {
            test_only = true;
            continue;
        }
        let declaration = line
            .trim_start_matches("pub ")
            .trim_start_matches("pub(crate) ")
            .trim_start_matches("pub(super) ");
        if let Some(name) = declaration
            .strip_prefix("mod ")
            .and_then(|rest| rest.strip_suffix(';'))
        {
            if !test_only {
                modules.push(name.trim().to_string());
            }
        }
        if !line.starts_with("#[") && !line.is_empty() {
            test_only = false;
        }
    }
    modules
}

/// `code` without the bodies of `#[cfg(test)]` items (test modules and
/// test-only functions).
fn strip_test_code(code: &str) -> String {
    let mut out = String::new();
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at..];
        // The item ends at its `;` or at the brace closing its first `{`.
        let semi = after.find(';');
        let brace = after.find('{');
        let end = match (semi, brace) {
            (Some(s), Some(b)) if s < b => s + 1,
            (_, Some(b)) => matching_brace(after, b).map_or(after.len(), |e| e + 1),
            (Some(s), None) => s + 1,
            (None, None) => after.len(),
        };
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

fn matching_brace(text: &str, open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in text[open..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(open + i);
                }
            }
            _ => {}
        }
    }
    None
}

/// `text` with comments removed and string and character literals emptied,
/// so that neither is read as code.
fn strip_comments_and_strings(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < bytes.len() {
        let rest = &text[i..];
        if rest.starts_with("//") {
            i += rest.find('\n').unwrap_or(rest.len());
        } else if rest.starts_with("/*") {
            i += rest.find("*/").map_or(rest.len(), |e| e + 2);
        } else if let Some(len) = raw_string_len(rest) {
            out.push_str("\"\"");
            i += len;
        } else if rest.starts_with('"') {
            let mut j = 1;
            while j < rest.len() {
                match bytes[i + j] {
                    b'\\' => j += 2,
                    b'"' => break,
                    _ => j += 1,
                }
            }
            out.push_str("\"\"");
            i += j + 1;
        } else if let Some(len) = char_literal_len(rest) {
            out.push_str("' '");
            i += len;
        } else {
            let c = rest.chars().next().unwrap();
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// The length of the raw string literal (`r"…"`, `r#"…"#`, `br"…"`) that
/// `text` starts with.
fn raw_string_len(text: &str) -> Option<usize> {
    let start = text.strip_prefix('b').unwrap_or(text);
    let hashes_and_quote = start.strip_prefix('r')?;
    let hashes = hashes_and_quote.len() - hashes_and_quote.trim_start_matches('#').len();
    let body = hashes_and_quote[hashes..].strip_prefix('"')?;
    let close = format!("\"{}", "#".repeat(hashes));
    let end = body.find(&close)?;
    Some(text.len() - body.len() + end + close.len())
}

/// The length of the character literal `text` starts with (`'a'`, `'\n'`,
/// `b'x'`), if it is one and not a lifetime.
fn char_literal_len(text: &str) -> Option<usize> {
    let start = text.strip_prefix('b').unwrap_or(text);
    let inner = start.strip_prefix('\'')?;
    let mut chars = inner.char_indices();
    let (_, first) = chars.next()?;
    let after = if first == '\\' {
        inner[1..].find('\'')? + 1
    } else {
        first.len_utf8()
    };
    inner[after..]
        .starts_with('\'')
        .then(|| text.len() - inner.len() + after + 1)
}

/// The paths `code` names, each with whether it is in a re-export
/// (`pub use`). `use` trees (`a::{b, c::d}`) are expanded.
fn paths_in(code: &str) -> Vec<(Vec<String>, bool)> {
    let mut paths = Vec::new();
    let bytes = code.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let boundary = i == 0 || !is_ident(bytes[i - 1]) && bytes[i - 1] != b':';
        if boundary && is_ident(bytes[i]) {
            let (tree, len) = read_path(&code[i..]);
            if tree.contains("::") {
                let reexport = is_reexport(&code[..i]);
                for path in expand(&tree) {
                    paths.push((path, reexport));
                }
            }
            i += len.max(1);
        } else {
            i += 1;
        }
    }
    paths
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Whether the path ending `before` starts a `pub use` statement.
fn is_reexport(before: &str) -> bool {
    let statement = before.rsplit([';', '{', '}']).next().unwrap_or("");
    let words: Vec<&str> = statement.split_whitespace().collect();
    matches!(words.as_slice(), [.., vis, "use"] if vis.starts_with("pub"))
}

/// The path or `use` tree `text` starts with, and its length.
fn read_path(text: &str) -> (String, usize) {
    let bytes = text.as_bytes();
    let mut depth = 0;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let path_char = is_ident(b) || b == b':';
        let tree_char = depth > 0 && (b == b',' || b.is_ascii_whitespace() || b == b'*');
        if b == b'{' && text[..i].ends_with("::") {
            depth += 1;
        } else if b == b'}' && depth > 0 {
            depth -= 1;
        } else if !(path_char || tree_char) {
            break;
        }
        i += 1;
    }
    // `a::b as c` keeps its alias for re-exports.
    let mut tree = text[..i].trim_end_matches(':').to_string();
    if depth == 0 {
        if let Some(alias) = text[i..].strip_prefix(" as ") {
            let name: String = alias.chars().take_while(|c| is_ident(*c as u8)).collect();
            tree = format!("{tree} as {name}");
        }
    }
    (tree, i)
}

/// The paths of a `use` tree: `a::{b, c::{d, e}}` is `a::b`, `a::c::d`,
/// `a::c::e`; `self` in a group is the group's prefix.
fn expand(tree: &str) -> Vec<Vec<String>> {
    let tree: String = tree.split_whitespace().collect::<Vec<_>>().join(" ");
    let Some(open) = tree.find("::{") else {
        return vec![tree.split("::").map(str::to_string).collect()];
    };
    let prefix: Vec<String> = tree[..open].split("::").map(str::to_string).collect();
    let close = matching_brace(&tree, open + 2).unwrap_or(tree.len() - 1);
    let mut out = Vec::new();
    for item in split_top_level(&tree[open + 3..close]) {
        let item = item.trim();
        if item.is_empty() || item == "*" {
            continue;
        }
        for tail in expand(item) {
            let mut path = prefix.clone();
            if tail != ["self"] {
                path.extend(tail);
            }
            out.push(path);
        }
    }
    out
}

fn split_top_level(list: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0, 0);
    for (i, c) in list.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&list[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&list[start..]);
    parts
}

#[test]
fn use_trees_expand_and_resolve() {
    assert_eq!(
        expand("crate::a::{b, c::{d, self}}"),
        [
            vec!["crate", "a", "b"],
            vec!["crate", "a", "c", "d"],
            vec!["crate", "a", "c"],
        ]
    );
    let code = strip_comments_and_strings(
        "// crate::x::y\nuse crate::a::B; let s = \"crate::c::d\"; pub use child::{E, F as G};",
    );
    let paths = paths_in(&code);
    assert_eq!(
        paths,
        [
            (vec!["crate".into(), "a".into(), "B".into()], false),
            (vec!["child".into(), "E".into()], true),
            (vec!["child".into(), "F as G".into()], true),
        ]
    );
    assert_eq!(
        strip_test_code("a\n#[cfg(test)]\nmod tests { fn x() { y() } }\nb"),
        "a\n\nb"
    );
}
