//! The layering of docs/ARCHITECTURE.md, checked over the `crate::` and `super::` paths of every
//! source file: the core imports no adapter and no CLI, adapters import no CLI, the top-level
//! modules import each other without a circle, and so do the files inside each folder.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const CORE: &[&str] = &[
    "artifact",
    "conversion",
    "diff",
    "digest",
    "dtype",
    "error",
    "escape",
    "formats",
    "fsutil",
    "hugepages",
    "identity",
    "mapped",
    "output",
    "progress",
    "read",
    "render",
    "sharded",
    "table",
    "values",
];
const ADAPTERS: &[&str] = &["input", "git", "policy", "ci", "delta", "remote"];
const CLI: &str = "cli";

/// Names `lib.rs` re-exports at the crate root, and the module each comes from.
const ROOT_REEXPORTS: &[(&str, &str)] = &[
    ("Artifact", "artifact"),
    ("Format", "artifact"),
    ("TensorInfo", "artifact"),
    ("Value", "artifact"),
    ("Error", "error"),
];

fn layer(top: &str) -> u8 {
    if CORE.contains(&top) {
        0
    } else if ADAPTERS.contains(&top) {
        1
    } else if top == CLI {
        2
    } else {
        panic!("src/{top}: not named in docs/ARCHITECTURE.md's layers (add it to this test too)")
    }
}

/// A source file: its module path (`["git", "changes"]`; `["git"]` for git/mod.rs).
struct Source {
    module: Vec<String>,
    is_folder_root: bool,
    text: String,
    path: PathBuf,
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
        out.push(Source {
            module,
            is_folder_root,
            text: strip_comments(&text),
            path,
        });
    }
}

/// Source text without `//` comments (doc links name modules without importing them).
fn strip_comments(text: &str) -> String {
    text.lines()
        .map(|line| match line.find("//") {
            Some(i) if !line[..i].contains('"') => &line[..i],
            _ => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every path starting with `crate::` or `super::` in `text`, with `{a, b::c}` groups expanded,
/// as absolute module paths (segments after `crate`).
fn referenced_paths(source: &Source) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let text = &source.text;
    for start in ["crate::", "super::"] {
        let mut from = 0;
        while let Some(i) = text[from..].find(start) {
            let at = from + i;
            from = at + start.len();
            let before = text[..at].chars().last();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let base: Vec<String> = if start == "crate::" {
                Vec::new()
            } else {
                // `super` of a folder's mod.rs is the folder's parent; of a file, its folder.
                let mut m = source.module.clone();
                m.pop();
                m
            };
            for tail in expand(&text[from..]) {
                let mut full = base.clone();
                full.extend(tail);
                out.push(full);
            }
        }
    }
    out
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
    edges: BTreeMap<(Vec<String>, Vec<String>), String>,
    folder_roots: BTreeSet<Vec<String>>,
}

fn graph() -> Graph {
    let sources = sources();
    let modules: BTreeSet<Vec<String>> = sources.iter().map(|s| s.module.clone()).collect();
    let folder_roots = sources
        .iter()
        .filter(|s| s.is_folder_root)
        .map(|s| s.module.clone())
        .collect();
    let mut edges = BTreeMap::new();
    for source in &sources {
        for path in referenced_paths(source) {
            let Some(target) = resolve(&path, &modules) else {
                continue;
            };
            if target != source.module {
                edges
                    .entry((source.module.clone(), target))
                    .or_insert_with(|| {
                        format!("{}: crate::{}", source.path.display(), path.join("::"))
                    });
            }
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
                        stack[start..].iter().map(|s| s.to_string()).collect();
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
    let mut wrong = Vec::new();
    for ((from, to), example) in &g.edges {
        let (a, b) = (&from[0], &to[0]);
        if a != b && layer(b) > layer(a) {
            wrong.push(format!(
                "{} imports {}: {example}",
                from.join("::"),
                to.join("::")
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "imports that run back up:\n{}",
        wrong.join("\n")
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

#[test]
fn files_inside_each_folder_import_each_other_without_a_circle() {
    let g = graph();
    // A folder's mod.rs is its face (it declares and re-exports the files); circles through it
    // are how Rust folders work, so only the files below it are checked.
    let edges: BTreeSet<(String, String)> = g
        .edges
        .keys()
        .filter(|(a, b)| {
            a.len() > 1
                && b.len() > 1
                && a[..a.len() - 1] == b[..b.len() - 1]
                && !g.folder_roots.contains(a)
                && !g.folder_roots.contains(b)
        })
        .map(|(a, b)| (a.join("::"), b.join("::")))
        .collect();
    assert_no_circle(&edges);
}

#[test]
fn the_checker_sees_imports() {
    // The test above would pass vacuously if no path were recognized.
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

/// The arrows between adapters that docs/ARCHITECTURE.md draws: (importer, imported). The
/// command line imports every adapter; the core none.
const ADAPTER_ARROWS: &[(&str, &str)] = &[
    ("ci", "git"),
    ("ci", "policy"),
    ("delta", "git"),
    ("git", "remote"),
    ("input", "git"),
    ("input", "remote"),
    ("policy", "git"),
];

#[test]
fn adapters_import_each_other_as_the_picture_draws() {
    let g = graph();
    let found: BTreeSet<(String, String)> = g
        .edges
        .keys()
        .filter(|(a, b)| {
            a[0] != b[0] && ADAPTERS.contains(&a[0].as_str()) && ADAPTERS.contains(&b[0].as_str())
        })
        .map(|(a, b)| (a[0].clone(), b[0].clone()))
        .collect();
    let drawn: BTreeSet<(String, String)> = ADAPTER_ARROWS
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    let undrawn: Vec<String> = found
        .difference(&drawn)
        .map(|(a, b)| {
            let example = g
                .edges
                .iter()
                .find(|((x, y), _)| &x[0] == a && &y[0] == b)
                .map(|(_, e)| e.clone())
                .unwrap_or_default();
            format!("{a} -> {b} ({example})")
        })
        .collect();
    assert!(
        undrawn.is_empty(),
        "adapter imports docs/ARCHITECTURE.md does not draw:\n{}",
        undrawn.join("\n")
    );
    let unused: Vec<String> = drawn
        .difference(&found)
        .map(|(a, b)| format!("{a} -> {b}"))
        .collect();
    assert!(
        unused.is_empty(),
        "arrows the picture draws but the code no longer has:\n{}",
        unused.join("\n")
    );
}

#[test]
fn adapters_are_used_through_their_faces() {
    // Another module names an adapter's items through its mod.rs (what it re-exports), never
    // a file inside it; the compiler enforces it once the files are private, and this says
    // where it was broken.
    let g = graph();
    let reaching_in: Vec<String> = g
        .edges
        .iter()
        .filter(|((a, b), _)| a[0] != b[0] && ADAPTERS.contains(&b[0].as_str()) && b.len() > 1)
        .map(|(_, example)| example.clone())
        .collect();
    assert!(
        reaching_in.is_empty(),
        "imports past an adapter's face:\n{}",
        reaching_in.join("\n")
    );
    // The files of an adapter folder are private to it.
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for adapter in ADAPTERS {
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
    // formats: the parsers, for the fuzz targets and library users; deltas and network:
    // namespaces of re-exports (network: what HTTP servers hand the remote reader, for the
    // fuzz targets).
    let mut public = public;
    public.sort_unstable();
    assert_eq!(
        public,
        ["deltas", "formats", "network"],
        "public modules of lib.rs"
    );
}
