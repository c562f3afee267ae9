//! docs/ARCHITECTURE.md held against the code, over the `crate::` and `super::` paths of every
//! source file (and a folder's mod.rs's paths to its own files): the page's table of who
//! imports whom is exactly the code's, its floors are exact, the core imports no adapter and no
//! CLI, adapters import no CLI and each other only through their faces, no file imports the
//! mod.rs of a folder it lies in, and no import runs in a circle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Names `lib.rs` re-exports at the crate root, and the module each comes from.
const ROOT_REEXPORTS: &[(&str, &str)] = &[
    ("Artifact", "artifact"),
    ("Format", "artifact"),
    ("TensorInfo", "artifact"),
    ("Value", "artifact"),
    ("Error", "error"),
];

/// A row of the table "Who imports whom" in docs/ARCHITECTURE.md: a top-level module's layer,
/// its floor in the layer and the top-level modules it imports.
struct Row {
    layer: String,
    floor: u32,
    imports: BTreeSet<String>,
}

const LAYERS: [&str; 3] = ["core", "adapter", "command line"];

/// The table of docs/ARCHITECTURE.md, by module: the page is the one place the layers and the
/// arrows between top-level modules are written, and the tests hold the code to it.
fn page() -> BTreeMap<String, Row> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/ARCHITECTURE.md");
    let text = std::fs::read_to_string(&path).unwrap();
    let section = text
        .split("\n## Who imports whom")
        .nth(1)
        .expect("docs/ARCHITECTURE.md has a section `## Who imports whom`");
    let section = section.split("\n## ").next().unwrap();
    let backticked = |cell: &str| -> BTreeSet<String> {
        cell.split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_owned)
            .collect()
    };
    let mut rows = BTreeMap::new();
    for line in section.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line
            .trim()
            .trim_matches('|')
            .split('|')
            .map(str::trim)
            .collect();
        let [module, layer, floor, imports] = cells[..] else {
            panic!(
                "docs/ARCHITECTURE.md: `{line}`: expected | `module` | layer | floor | imports |"
            );
        };
        let module = module.trim_matches('`').to_owned();
        assert!(
            LAYERS.contains(&layer),
            "docs/ARCHITECTURE.md: {module}: layer `{layer}`, expected one of {LAYERS:?}"
        );
        let row = Row {
            layer: layer.to_owned(),
            floor: floor.parse().unwrap_or_else(|_| {
                panic!("docs/ARCHITECTURE.md: {module}: floor `{floor}`, expected a number")
            }),
            imports: backticked(imports),
        };
        assert!(
            rows.insert(module.clone(), row).is_none(),
            "docs/ARCHITECTURE.md: {module} has two rows"
        );
    }
    assert!(
        !rows.is_empty(),
        "docs/ARCHITECTURE.md: the table has no row"
    );
    rows
}

fn layer(page: &BTreeMap<String, Row>, top: &str) -> u8 {
    let row = page.get(top).unwrap_or_else(|| {
        panic!("src/{top}: no row in docs/ARCHITECTURE.md's table `Who imports whom`")
    });
    LAYERS.iter().position(|l| *l == row.layer).unwrap() as u8
}

fn adapters(page: &BTreeMap<String, Row>) -> BTreeSet<String> {
    page.iter()
        .filter(|(_, row)| row.layer == "adapter")
        .map(|(module, _)| module.clone())
        .collect()
}

/// A source file: its module path (`["git", "changes"]`; `["git"]` for git/mod.rs).
struct Source {
    module: Vec<String>,
    is_folder_root: bool,
    /// The code without comments, string and character literals (kept the same length, so
    /// positions hold).
    text: String,
    path: PathBuf,
}

impl Source {
    fn new(module: Vec<String>, is_folder_root: bool, text: &str, path: PathBuf) -> Source {
        Source {
            module,
            is_folder_root,
            text: code_only(text),
            path,
        }
    }
}

fn sources() -> Vec<Source> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = Vec::new();
    collect(&src, &src, &mut out);
    out
}

fn collect(root: &Path, dir: &Path, out: &mut Vec<Source>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            collect(root, &path, out);
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let rel = path.strip_prefix(root).unwrap();
        let mut module: Vec<String> = rel
            .with_extension("")
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        let is_folder_root = module.last().is_some_and(|m| m == "mod");
        if is_folder_root {
            module.pop();
        }
        if module == ["main"] || module == ["lib"] {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        out.push(Source::new(module, is_folder_root, &text, path));
    }
}

/// `text` with every comment, string literal and character literal blanked out (doc links
/// name modules without importing them; a `'{'` would unbalance the braces), every character
/// kept at its byte offset.
fn code_only(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |out: &mut String, c: char| {
        if c == '\n' {
            out.push('\n');
        } else {
            out.extend(std::iter::repeat_n(' ', c.len_utf8()));
        }
    };
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                blank(&mut out, chars[i]);
                i += 1;
            }
            continue;
        }
        if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                match (chars[i], chars.get(i + 1)) {
                    ('/', Some('*')) => depth += 1,
                    ('*', Some('/')) => depth -= 1,
                    _ => {}
                }
                if depth == 0 {
                    blank(&mut out, chars[i]);
                    blank(&mut out, chars[i + 1]);
                    i += 2;
                    break;
                }
                blank(&mut out, chars[i]);
                i += 1;
            }
            continue;
        }
        let starts_word = i == 0 || !ident(chars[i - 1]);
        // A raw string: r"…", r#"…"#, br"…".
        let raw_at = match (c, next) {
            ('r', Some('"' | '#')) if starts_word => Some(i + 1),
            ('b', Some('r')) if starts_word && matches!(chars.get(i + 2), Some('"' | '#')) => {
                Some(i + 2)
            }
            _ => None,
        };
        if let Some(mut j) = raw_at {
            let hashes = chars[j..].iter().take_while(|&&h| h == '#').count();
            if chars.get(j + hashes) == Some(&'"') {
                out.extend(chars[i..=(j + hashes)].iter());
                j += hashes + 1;
                loop {
                    if j >= chars.len() {
                        break;
                    }
                    if chars[j] == '"'
                        && chars[j + 1..]
                            .iter()
                            .take(hashes)
                            .filter(|&&h| h == '#')
                            .count()
                            == hashes
                    {
                        out.push('"');
                        out.extend(std::iter::repeat_n('#', hashes));
                        j += 1 + hashes;
                        break;
                    }
                    blank(&mut out, chars[j]);
                    j += 1;
                }
                i = j;
                continue;
            }
        }
        if c == '"' {
            out.push('"');
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' && i + 1 < chars.len() {
                    blank(&mut out, chars[i]);
                    i += 1;
                }
                blank(&mut out, chars[i]);
                i += 1;
            }
            if i < chars.len() {
                out.push('"');
                i += 1;
            }
            continue;
        }
        if c == '\'' {
            // A character literal ('x', '\n', '\u{7f}'), else a lifetime or label ('a).
            // After a backslash, the escaped character is no closing quote ('\'').
            let end = if next == Some('\\') {
                chars
                    .get(i + 3..)
                    .and_then(|rest| rest.iter().position(|&q| q == '\''))
                    .map(|k| i + 3 + k)
            } else if chars.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            if let Some(end) = end {
                out.push('\'');
                for &inner in &chars[i + 1..end] {
                    blank(&mut out, inner);
                }
                out.push('\'');
                i = end + 1;
                continue;
            }
        }
        out.push(c);
        i += 1;
    }
    out
}

/// An inline module (`mod tests { … }`): its name and the byte range of its body.
struct Inline {
    name: String,
    body: std::ops::Range<usize>,
}

/// Every inline module of `text` (code only), nested ones after the ones around them.
fn inline_modules(text: &str) -> Vec<Inline> {
    let mut out: Vec<Inline> = Vec::new();
    let mut open: Vec<(usize, usize)> = Vec::new(); // (index in out, depth inside its body)
    let mut depth = 0usize;
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'{' => depth += 1,
            b'}' => {
                depth = depth.saturating_sub(1);
                if open.last().is_some_and(|(_, d)| *d == depth + 1) {
                    let (index, _) = open.pop().unwrap();
                    out[index].body.end = i;
                }
            }
            b'm' if text[i..].starts_with("mod ")
                && (i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_')) =>
            {
                let rest = &text[i + 4..];
                let name: String = rest
                    .trim_start()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                let after = rest.trim_start()[name.len()..].trim_start();
                if !name.is_empty() && after.starts_with('{') {
                    let brace = text.len() - after.len();
                    out.push(Inline {
                        name,
                        body: brace + 1..text.len(),
                    });
                    open.push((out.len() - 1, depth + 1));
                    depth += 1;
                    i = brace + 1;
                    continue;
                }
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// The module `source`'s code is in at byte `at`: its file's, or an inline module's in it.
fn module_at(source: &Source, inlines: &[Inline], at: usize) -> Vec<String> {
    let mut module = source.module.clone();
    module.extend(
        inlines
            .iter()
            .filter(|m| m.body.contains(&at))
            .map(|m| m.name.clone()),
    );
    module
}

/// Whether `module` (as `module_at` gives it) is test code of `source`.
fn in_tests(source: &Source, module: &[String]) -> bool {
    module[source.module.len()..].iter().any(|m| m == "tests")
}

/// A path named in a source: where it points (segments after `crate`), and whether it is only
/// named by test code.
struct Named {
    path: Vec<String>,
    in_tests: bool,
}

/// Every path starting with `crate::` or `super::` in `source` (and, in a folder's mod.rs, with
/// the name of a file it declares), with `{a, b::c}` groups expanded, as absolute module paths
/// (segments after `crate`).
fn referenced_paths(source: &Source) -> Vec<Named> {
    let mut out = Vec::new();
    let text = &source.text;
    let inlines = inline_modules(text);
    let mut starts = vec!["crate::".to_owned(), "super::".to_owned()];
    if source.is_folder_root {
        starts.extend(declared_files(text).into_iter().map(|m| format!("{m}::")));
    }
    for start in &starts {
        let mut from = 0;
        while let Some(i) = text[from..].find(start.as_str()) {
            let at = from + i;
            from = at + start.len();
            let before = text[..at].chars().last();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let module = module_at(source, &inlines, at);
            let mut base: Vec<String> = match start.as_str() {
                "crate::" => Vec::new(),
                "super::" => {
                    // `super` of a folder's mod.rs is the folder's parent; of a file, its
                    // folder; of an inline module, the module around it.
                    let mut m = module.clone();
                    m.pop();
                    m
                }
                child => {
                    let mut m = module.clone();
                    m.push(child.trim_end_matches("::").to_owned());
                    m
                }
            };
            let mut rest = &text[from..];
            if start == "super::" {
                while let Some(after) = rest.strip_prefix("super::") {
                    base.pop();
                    rest = after;
                }
            }
            for tail in expand(rest) {
                let mut full = base.clone();
                full.extend(tail);
                out.push(Named {
                    path: full,
                    in_tests: in_tests(source, &module),
                });
            }
        }
    }
    out
}

/// The files a folder's mod.rs declares (`mod name;`), which it names by their bare names.
fn declared_files(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|line| {
            let line = line.trim_start();
            let line = ["pub mod ", "pub(crate) mod ", "mod "]
                .iter()
                .find_map(|p| line.strip_prefix(p))?;
            line.trim_end()
                .strip_suffix(';')
                .map(|name| name.trim().to_owned())
        })
        .collect()
}

/// The paths written at the start of `rest`: `a::b::C`, or `a::{b, c::d}` expanded.
fn expand(rest: &str) -> Vec<Vec<String>> {
    let mut segments = Vec::new();
    let mut s = rest;
    loop {
        let ident: String = s
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if !ident.is_empty() {
            s = &s[ident.len()..];
            segments.push(ident);
            if let Some(next) = s.strip_prefix("::") {
                s = next;
                continue;
            }
            return vec![segments];
        }
        if let Some(group) = s.strip_prefix('{') {
            let mut depth = 0;
            let mut end = group.len();
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        end = i;
                        break;
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            let inner = &group[..end];
            let mut parts = Vec::new();
            let mut depth = 0;
            let mut last = 0;
            for (i, c) in inner.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        parts.push(&inner[last..i]);
                        last = i + 1;
                    }
                    _ => {}
                }
            }
            parts.push(&inner[last..]);
            let mut out = Vec::new();
            for part in parts {
                let part = part.trim();
                if part.is_empty() {
                    continue;
                }
                if part == "self" {
                    out.push(segments.clone());
                    continue;
                }
                for tail in expand(part) {
                    let mut full = segments.clone();
                    full.extend(tail);
                    out.push(full);
                }
            }
            return out;
        }
        return vec![segments];
    }
}

/// The source file a path points into: the longest module prefix that is a file.
fn resolve(path: &[String], modules: &BTreeSet<Vec<String>>) -> Option<Vec<String>> {
    if let [name, ..] = path
        && let Some((_, module)) = ROOT_REEXPORTS.iter().find(|(n, _)| n == name)
    {
        return Some(vec![module.to_string()]);
    }
    (1..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|prefix| modules.contains(prefix))
}

struct Graph {
    /// (from file, to file) with the referenced path, for messages.
    edges: BTreeMap<(Vec<String>, Vec<String>), Edge>,
    folder_roots: BTreeSet<Vec<String>>,
}

struct Edge {
    /// Where the import is written, for messages.
    example: String,
    /// Only test code (`mod tests`) imports this way.
    tests_only: bool,
}

fn graph() -> Graph {
    graph_of(&sources())
}

fn graph_of(sources: &[Source]) -> Graph {
    let modules: BTreeSet<Vec<String>> = sources.iter().map(|s| s.module.clone()).collect();
    let folder_roots = sources
        .iter()
        .filter(|s| s.is_folder_root)
        .map(|s| s.module.clone())
        .collect();
    let mut edges: BTreeMap<_, Edge> = BTreeMap::new();
    for source in sources {
        for named in referenced_paths(source) {
            let Some(target) = resolve(&named.path, &modules) else {
                continue;
            };
            if target == source.module {
                continue;
            }
            let example = format!(
                "{}: crate::{}",
                source.path.display(),
                named.path.join("::")
            );
            let edge = edges
                .entry((source.module.clone(), target))
                .or_insert(Edge {
                    example,
                    tests_only: true,
                });
            edge.tests_only &= named.in_tests;
        }
    }
    Graph {
        edges,
        folder_roots,
    }
}

fn find_cycle(edges: &BTreeSet<(String, String)>) -> Option<Vec<String>> {
    let nodes: BTreeSet<&String> = edges.iter().flat_map(|(a, b)| [a, b]).collect();
    // 0 unvisited, 1 on the stack, 2 done.
    let mut state: BTreeMap<&String, u8> = nodes.iter().map(|n| (*n, 0)).collect();
    fn visit<'a>(
        node: &'a String,
        edges: &'a BTreeSet<(String, String)>,
        state: &mut BTreeMap<&'a String, u8>,
        stack: &mut Vec<&'a String>,
    ) -> Option<Vec<String>> {
        state.insert(node, 1);
        stack.push(node);
        for (_, next) in edges.iter().filter(|(a, _)| a == node) {
            match state[next] {
                1 => {
                    let start = stack.iter().position(|n| *n == next).unwrap();
                    let mut cycle: Vec<String> =
                        stack[start..].iter().map(|s| (*s).clone()).collect();
                    cycle.push(next.clone());
                    return Some(cycle);
                }
                0 => {
                    if let Some(c) = visit(next, edges, state, stack) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(node, 2);
        None
    }
    for node in nodes {
        if state[node] == 0
            && let Some(c) = visit(node, edges, &mut state, &mut Vec::new())
        {
            return Some(c);
        }
    }
    None
}

fn assert_no_circle(edges: &BTreeSet<(String, String)>) {
    if let Some(cycle) = find_cycle(edges) {
        panic!("import circle: {}", cycle.join(" -> "));
    }
}

#[test]
fn the_core_imports_no_adapter_and_nothing_imports_the_cli() {
    let g = graph();
    let page = page();
    let mut wrong = Vec::new();
    for ((from, to), edge) in &g.edges {
        let (a, b) = (&from[0], &to[0]);
        if a != b && layer(&page, b) > layer(&page, a) {
            wrong.push(format!(
                "{} imports {}: {}",
                from.join("::"),
                to.join("::"),
                edge.example
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "imports that run back up:\n{}",
        wrong.join("\n")
    );
}

/// The adapters `g` shows `delta` importing (test code too): it depends only on the core, so
/// that it could become a crate of its own; the git store that finds parents in history is
/// the git adapter's, which calls delta's face.
fn adapters_delta_imports(g: &Graph, page: &BTreeMap<String, Row>) -> Vec<String> {
    let adapters = adapters(page);
    g.edges
        .iter()
        .filter(|((from, to), _)| {
            from[0] == "delta" && to[0] != "delta" && adapters.contains(&to[0])
        })
        .map(|(_, edge)| edge.example.clone())
        .collect()
}

#[test]
fn delta_depends_only_on_the_core() {
    let page = page();
    let wrong = adapters_delta_imports(&graph(), &page);
    assert!(
        wrong.is_empty(),
        "delta imports another adapter:\n{}",
        wrong.join("\n")
    );
    // The check sees such an arrow where there is one.
    let planted = planted(&[
        ("delta/mod.rs", "mod store;\n"),
        ("delta/store.rs", "use crate::git::files_in_history;\n"),
        ("git/mod.rs", "pub(crate) fn files_in_history() {}\n"),
    ]);
    assert_eq!(
        adapters_delta_imports(&planted, &page),
        vec!["delta/store.rs: crate::git::files_in_history".to_string()]
    );
}

#[test]
fn top_level_modules_import_each_other_without_a_circle() {
    let g = graph();
    let edges: BTreeSet<(String, String)> = g
        .edges
        .keys()
        .filter(|(a, b)| a[0] != b[0])
        .map(|(a, b)| (a[0].clone(), b[0].clone()))
        .collect();
    assert_no_circle(&edges);
}

/// The imports that run back up inside folders: a file, or a folder's mod.rs, importing the
/// mod.rs of a folder it lies in. mod.rs declares its folder's files and re-exports their
/// items, so it stands above all of them; a file names what it uses by the file that defines it
/// (`super::error::GitError`), never through the face. Test code (`mod tests`) may use its
/// folder's test helpers.
fn arrows_up_inside_folders(g: &Graph) -> BTreeMap<(String, String), String> {
    g.edges
        .iter()
        .filter(|((from, to), edge)| {
            !edge.tests_only
                && g.folder_roots.contains(to)
                && from.len() > to.len()
                && from.starts_with(to)
        })
        .map(|((from, to), edge)| ((from.join("::"), to.join("::")), edge.example.clone()))
        .collect()
}

#[test]
fn inside_folders_imports_run_one_way() {
    let found: Vec<String> = arrows_up_inside_folders(&graph())
        .into_iter()
        .map(|((from, to), example)| format!("{from} -> {to} (mod.rs) ({example})"))
        .collect();
    assert!(
        found.is_empty(),
        "imports that run back up inside a folder: name the file that defines the item \
         (`super::error::…`), not the folder's mod.rs (docs/ARCHITECTURE.md):\n{}",
        found.join("\n")
    );
}

#[test]
fn files_import_each_other_without_a_circle() {
    // Every file of the crate, a folder's mod.rs included (it imports the files it declares),
    // as the code is built; test code left out.
    let g = graph();
    let edges: BTreeSet<(String, String)> = g
        .edges
        .iter()
        .filter(|(_, edge)| !edge.tests_only)
        .map(|((a, b), _)| (a.join("::"), b.join("::")))
        .collect();
    assert_no_circle(&edges);
}

#[test]
fn the_checker_sees_imports() {
    // The tests above would pass vacuously if no path were recognized.
    let g = graph();
    let has = |from: &[&str], to: &[&str]| g.edges.keys().any(|(a, b)| a == from && b == to);
    assert!(
        has(&["cli", "core"], &["input"]),
        "cli/core.rs opens inputs"
    );
    assert!(
        has(&["git", "changes"], &["git", "objects"]),
        "the walk reads objects"
    );
    assert!(has(&["read"], &["formats"]), "read.rs parses formats");
    assert!(
        has(&["git"], &["git", "changes"]),
        "git/mod.rs re-exports the walk"
    );
    assert_eq!(
        expand("a::{b, c::{d, e}, self}"),
        vec![
            vec!["a", "b"],
            vec!["a", "c", "d"],
            vec!["a", "c", "e"],
            vec!["a"]
        ]
        .into_iter()
        .map(|v| v.into_iter().map(String::from).collect::<Vec<_>>())
        .collect::<Vec<_>>()
    );
}

/// The graph of a planted crate: (path under src/, text).
fn planted(files: &[(&str, &str)]) -> Graph {
    let sources: Vec<Source> = files
        .iter()
        .map(|(path, text)| {
            let mut module: Vec<String> = path
                .trim_end_matches(".rs")
                .split('/')
                .map(String::from)
                .collect();
            let is_folder_root = module.last().is_some_and(|m| m == "mod");
            if is_folder_root {
                module.pop();
            }
            Source::new(module, is_folder_root, text, PathBuf::from(path))
        })
        .collect();
    graph_of(&sources)
}

#[test]
fn the_checker_finds_an_arrow_back_up_inside_a_folder() {
    let face = "mod changes;\nmod error;\n\
                pub(crate) use changes::changed_files;\npub(crate) use error::GitError;\n\
                pub(crate) fn helper() {}\n";
    let error = "pub enum GitError { Open }\n";
    let arrows = |changes: &str| {
        let g = planted(&[
            ("git/mod.rs", face),
            ("git/error.rs", error),
            ("git/changes.rs", changes),
        ]);
        arrows_up_inside_folders(&g).into_keys().collect::<Vec<_>>()
    };
    let up = vec![("git::changes".to_owned(), "git".to_owned())];
    // Through the face, for an item of a file or one mod.rs defines: up.
    assert_eq!(
        arrows("use super::GitError;\npub fn changed_files() {}\n"),
        up
    );
    assert_eq!(arrows("fn f() { super::helper() }\n"), up);
    assert_eq!(arrows("use crate::git::{error::GitError, helper};\n"), up);
    // By the file that defines it; from tests, through the file's own `super`; named in a
    // comment, a doc link or a string; after a `'{'` that would unbalance a brace count: not.
    assert_eq!(
        arrows(
            "use super::error::GitError;\n\
             /// Unlike [`super::GitError`], and \"super::helper\" in a string.\n\
             pub fn changed_files() { let _ = '{'; }\n\
             #[cfg(test)]\nmod tests {\n    use super::*;\n    use super::super::helper;\n}\n\
             // use super::GitError;\n"
        ),
        Vec::<(String, String)>::new()
    );
    // The face's own arrows down are seen, so a circle through it would be.
    let g = planted(&[
        ("git/mod.rs", face),
        ("git/error.rs", error),
        ("git/changes.rs", "use super::error::GitError;\n"),
    ]);
    let to = |module: &[&str]| {
        module
            .iter()
            .map(std::string::ToString::to_string)
            .collect::<Vec<_>>()
    };
    assert!(
        g.edges
            .contains_key(&(to(&["git"]), to(&["git", "changes"])))
    );
    assert!(g.edges.contains_key(&(to(&["git"]), to(&["git", "error"]))));
    // A nested folder's mod.rs lies in its parent folder too.
    let g = planted(&[
        ("formats/mod.rs", "mod pytorch;\npub struct Limit;\n"),
        ("formats/pytorch/mod.rs", "use super::Limit;\n"),
    ]);
    assert_eq!(
        arrows_up_inside_folders(&g).into_keys().collect::<Vec<_>>(),
        vec![("formats::pytorch".to_owned(), "formats".to_owned())]
    );
    // Blanked text keeps every offset.
    let text = "let s = r#\"a \"quoted\" é\"#; let c = '\\''; /* x */ 'a: loop {}";
    assert_eq!(
        code_only(text),
        "let s = r#\"             \"#; let c = '  ';         'a: loop {}"
    );
    assert_eq!(code_only(text).len(), text.len());
}

#[test]
fn the_page_draws_every_import_between_top_level_modules() {
    // The built code's imports (test code left out), against the table of the page: every
    // module has its row, and every arrow the code has is drawn, and only those.
    let g = graph();
    let page = page();
    let mut found: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for source in sources() {
        found.entry(source.module[0].clone()).or_default();
    }
    for ((a, b), edge) in &g.edges {
        if a[0] != b[0] && !edge.tests_only {
            found.entry(a[0].clone()).or_default().insert(b[0].clone());
        }
    }
    let mut wrong = Vec::new();
    for (module, imports) in &found {
        let Some(row) = page.get(module) else {
            wrong.push(format!("src/{module} has no row"));
            continue;
        };
        for undrawn in imports.difference(&row.imports) {
            let example = g
                .edges
                .iter()
                .find(|((x, y), e)| &x[0] == module && &y[0] == undrawn && !e.tests_only)
                .map(|(_, e)| e.example.clone())
                .unwrap_or_default();
            wrong.push(format!("{module} -> {undrawn} is not drawn ({example})"));
        }
        for unused in row.imports.difference(imports) {
            wrong.push(format!(
                "{module} -> {unused} is drawn, but the code has no such import"
            ));
        }
    }
    for module in page.keys().filter(|m| !found.contains_key(*m)) {
        wrong.push(format!("{module} has a row, but src/ has no such module"));
    }
    assert!(
        wrong.is_empty(),
        "docs/ARCHITECTURE.md's table `Who imports whom` and the code differ:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn every_module_stands_one_floor_above_what_it_imports() {
    // Exact floors: the page's picture can be drawn from the table alone, and an arrow that
    // runs sideways or up in a layer shows as a floor that cannot be.
    let page = page();
    let mut wrong = Vec::new();
    for (module, row) in &page {
        let below = row
            .imports
            .iter()
            .filter_map(|m| page.get(m))
            .filter(|imported| imported.layer == row.layer)
            .map(|imported| imported.floor + 1)
            .max()
            .unwrap_or(0);
        if row.floor != below {
            wrong.push(format!(
                "{module}: floor {}, but what it imports in its layer puts it on floor {below}",
                row.floor
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "docs/ARCHITECTURE.md's floors:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn adapters_are_used_through_their_faces() {
    // Another module names an adapter's items through its mod.rs (what it re-exports), never
    // a file inside it; the compiler enforces it once the files are private, and this says
    // where it was broken.
    let g = graph();
    let adapters = adapters(&page());
    let reaching_in: Vec<String> = g
        .edges
        .iter()
        .filter(|((a, b), _)| a[0] != b[0] && adapters.contains(&b[0]) && b.len() > 1)
        .map(|(_, edge)| edge.example.clone())
        .collect();
    assert!(
        reaching_in.is_empty(),
        "imports past an adapter's face:\n{}",
        reaching_in.join("\n")
    );
    // The files of an adapter folder are private to it.
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for adapter in &adapters {
        let root = src.join(adapter).join("mod.rs");
        let Ok(text) = std::fs::read_to_string(&root) else {
            continue; // a one-file adapter (input.rs)
        };
        for line in text.lines() {
            let line = line.trim_start();
            assert!(
                !(line.starts_with("pub mod ") || line.starts_with("pub(crate) mod ")),
                "{}: `{line}` opens a file of the adapter to others; re-export its items",
                root.display()
            );
        }
    }
}

#[test]
fn the_crate_exports_its_face_only() {
    let lib =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs")).unwrap();
    let public: Vec<&str> = lib
        .lines()
        .filter_map(|l| l.strip_prefix("pub mod "))
        .map(|l| l.trim_end_matches(['{', ';', ' ']))
        .collect();
    // readers: the parsers' entry points (formats stays private), for the fuzz targets and
    // library users; deltas and network: namespaces of re-exports (network: what HTTP servers
    // hand the remote reader, for the fuzz targets).
    let mut public = public;
    public.sort_unstable();
    assert_eq!(
        public,
        ["deltas", "network", "readers"],
        "public modules of lib.rs"
    );
}
