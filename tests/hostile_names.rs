//! Names taken from files and repositories — metadata keys, string values, tensor names, file
//! paths — that hold terminal escape sequences (ESC, OSC 8 links, title changes), CR, LF, NUL,
//! bidirectional overrides, or GitHub workflow commands (`::stop-commands::`, `::add-mask::`,
//! `##[error]`). Every text output of every command must show them escaped: no control or bidi
//! character reaches the terminal or the CI log, no name forges a line, and the only workflow
//! commands in a log are the annotations weight-inspect emits itself.

mod common;

use std::path::Path;
use std::process::Output;

use serde_json::{Value, json};

use common::git::Repo;
use common::models::make_models;
use common::{assert_success, code, run_in, stderr, stdout};

/// A tensor name (and a metadata key) that would forge a textconv line if printed raw.
const FORGED: &str = "x\n+tensor forged.weight f32 [1]";

/// Workflow commands weight-inspect prints itself, at the start of a line.
const OWN_COMMANDS: &[&str] = &[
    "::error ",
    "::warning ",
    "::notice ",
    "::group::",
    "::endgroup::",
];

/// Tensor names of both versions; the last one is removed in the second.
fn tensor_names() -> Vec<&'static str> {
    vec![
        "t.esc\x1b[2J",
        "t.osc\x1b]8;;http://x\x1b\\",
        FORGED,
        "::error ::t",
        "t\r\u{202e}bidi\u{2066}",
        "t\0nul",
        "##[error]t",
        "t.gone\x1b[1m",
    ]
}

/// Metadata with hostile keys and values. `version` 2 changes some values.
fn metadata(version: u32, strings_only: bool) -> Value {
    let template = [
        "{% for m in messages %}",
        "\x1b[2J\x1b]0;title\x07",
        "::error ::from-template",
        "  ::add-mask::masked",
        "##[warning]legacy",
        if version == 1 {
            "one\r\u{202e}"
        } else {
            "two\r\u{202e}"
        },
        "{% endfor %}",
    ]
    .join("\n");
    let mut m = json!({
        "general.name": format!("name\x1b[2J\n::error ::from-value v{version}"),
        "k\x1b[2J\u{202e}key": "v",
        "::add-mask::key": "x",
        "nul\0key": "n\0ul",
        "osc": "\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\",
        "title": "\x1b]0;pwned\x07",
        "cr": format!("a\rb{version}"),
        "legacy": "##[error]legacy value",
        "tokenizer.chat_template": template,
    });
    m[FORGED] = if strings_only { json!("1") } else { json!(1) };
    if !strings_only {
        m["arr"] = json!([
            "a\x1b[2J",
            format!("b\n::error ::arr{version}"),
            "##[warning]c"
        ]);
    }
    m
}

/// A GGUF model with hostile names; version 2 changes shapes, removes and adds tensors.
fn gguf(version: u32) -> Value {
    let mut names = tensor_names();
    if version == 2 {
        names.pop();
        names.push("t.new\n::warning ::n");
    }
    let tensors: Vec<Value> = names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let len = if version == 2 && i % 2 == 0 { 3 } else { 2 };
            json!({"name": name, "dtype": "f32", "shape": [len]})
        })
        .collect();
    json!({"kind": "gguf", "metadata": metadata(version, false), "tensors": tensors})
}

/// A safetensors model with hostile names (the same tensors in both versions, other values).
fn safetensors(version: u32) -> Value {
    let tensors: Vec<Value> = tensor_names()
        .iter()
        .enumerate()
        .map(|(i, name)| {
            json!({"name": name, "dtype": "float32", "shape": [4, 8],
                   "fill": {"normal": i, "plus": f64::from(version) / 100.0}})
        })
        .collect();
    json!({"kind": "safetensors", "metadata": metadata(version, true), "tensors": tensors})
}

/// Asserts that a command's output holds nothing a terminal or a GitHub Actions log acts on:
/// no control character but LF and tab, no bidirectional formatting character, no line that
/// the runner reads as a workflow command (`::` after leading white space; `##[` anywhere)
/// unless `annotations` allows the commands weight-inspect emits, and no forged tensor line.
fn assert_inert(what: &str, bytes: &[u8], annotations: bool) {
    let text = std::str::from_utf8(bytes)
        .unwrap_or_else(|e| panic!("{what}: output is not UTF-8 ({e}):\n{bytes:?}"));
    let context = || format!("{what}:\n-----\n{text}\n-----");
    for c in text.chars() {
        assert!(
            !c.is_control() || c == '\n' || c == '\t',
            "{what}: control character {c:?} in the output\n{}",
            context()
        );
        assert!(
            !matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}' | '\u{61c}'),
            "{what}: bidi character {c:?} in the output\n{}",
            context()
        );
    }
    assert!(
        !text.contains("##["),
        "{what}: `##[` in the output\n{}",
        context()
    );
    for line in text.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("::") {
            assert!(
                annotations && OWN_COMMANDS.iter().any(|p| line.starts_with(p)),
                "{what}: line {line:?} is a workflow command\n{}",
                context()
            );
        }
        let bare = trimmed.trim_start_matches(['+', '-', ' ']);
        assert!(
            !bare.starts_with("tensor forged") && !bare.starts_with("forged.weight"),
            "{what}: forged line {line:?}\n{}",
            context()
        );
    }
}

/// stdout and stderr of a command, each inert.
fn check_output(what: &str, out: &Output, annotations: bool) {
    assert_inert(&format!("{what} (stdout)"), &out.stdout, annotations);
    assert_inert(&format!("{what} (stderr)"), &out.stderr, false);
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn model_commands_show_hostile_names_escaped() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    make_models(
        dir,
        &json!({
            "old.gguf": gguf(1),
            "new.gguf": gguf(2),
            "old.safetensors": safetensors(1),
            "new.safetensors": safetensors(2),
        }),
    );
    let wi = |args: &[&str]| run_in(Some(dir), args);
    for file in ["old.gguf", "new.gguf", "old.safetensors", "new.safetensors"] {
        for args in [
            vec!["inspect", file],
            vec!["inspect", "--all", file],
            vec!["id", file],
            vec!["textconv", file],
        ] {
            let out = wi(&args);
            assert_success(&format!("{args:?}"), &out);
            check_output(&format!("{args:?}"), &out, false);
        }
    }
    let inspect = stdout(&wi(&["inspect", "--all", "old.gguf"]));
    // The names are there, shown escaped.
    common::assert_contains(
        &inspect,
        &[
            "  k\\x1b[2J\\u{202e}key: \"v\"",
            "  \\x3a:add-mask::key: \"x\"",
            "  x\\n+tensor forged.weight f32 [1]: 1",
            "  nul\\0key: \"n\\0ul\"",
            "  title: \"\\x1b]0;pwned\\x07\"",
            "  legacy: \"\\x23#[error]legacy value\"",
            ": t.osc\\x1b]8;;http://x\\x1b\\\\ [2] (f32)",
            ": t\\r\\u{202e}bidi\\u{2066} [2] (f32)",
            ": \\x3a:error ::t [2] (f32)",
        ],
    );
    let textconv = stdout(&wi(&["textconv", "old.gguf"]));
    common::assert_contains(
        &textconv,
        &[
            "tensor x\\n+tensor forged.weight f32 [1]: f32 [2] 8 bytes",
            "meta x\\n+tensor forged.weight f32 [1]: u32 = 1",
            "    | \\x1b[2J\\x1b]0;title\\x07",
            "    | \\x3a:error ::from-template",
            "    | one\\r\\u{202e}",
            "meta arr: array[string; 3] = [\"a\\x1b[2J\", \"b\\n::error ::arr1\", \"\\x23#[warning]c\"]",
        ],
    );

    for (old, new) in [
        ("old.gguf", "new.gguf"),
        ("old.safetensors", "new.safetensors"),
    ] {
        let out = wi(&["diff", old, new]);
        assert_eq!(code(&out), 1, "{}", stderr(&out));
        check_output(&format!("diff {old} {new}"), &out, false);
    }
    let diff = stdout(&wi(&["diff", "old.gguf", "new.gguf"]));
    common::assert_contains(
        &diff,
        &[
            "  - t.gone\\x1b[1m [2] (f32)",
            "  + t.new\\n::warning ::n [2] (f32)",
            "  ~ x\\n+tensor forged.weight f32 [1]:",
            // The line diff of a long string breaks lines at CR too; the rest is escaped.
            "      -one\n      +two\n       \\u{202e}\n",
            "         \\x3a:add-mask::masked",
            "       \\x23#[warning]legacy",
        ],
    );

    // git's external diff protocol, with hostile paths as git would pass them.
    let path = "m\n::error ::driver\x1b[2J.gguf";
    let (old, new) = (dir.join("old.gguf"), dir.join("new.gguf"));
    let seven = [
        path,
        s(&old),
        "1111111",
        "100644",
        s(&new),
        "2222222",
        "100644",
    ];
    let nine = [
        path,
        s(&old),
        "1111111",
        "100644",
        s(&new),
        "2222222",
        "100644",
        "renamed\r##[error]to\u{202e}.gguf",
        "similarity index 90%\n",
    ];
    let mut calls: Vec<Vec<&str>> = vec![seven.to_vec(), nine.to_vec(), vec![path]];
    calls.push(vec![
        path,
        "/dev/null",
        "0000000",
        "100644",
        s(&new),
        "2222222",
        "100644",
    ]);
    for call in calls {
        let mut args = vec!["git-diff-driver"];
        args.extend_from_slice(&call);
        let out = wi(&args);
        assert_eq!(code(&out), 0, "driver exits 0: {}", stderr(&out));
        check_output(&format!("git-diff-driver {call:?}"), &out, false);
    }
    let driver = stdout(&wi(&[
        "git-diff-driver",
        path,
        "/dev/null",
        "0",
        "100644",
        s(&new),
        "2",
        "100644",
    ]));
    assert!(
        driver.starts_with("weight-inspect /dev/null b/m\\n::error ::driver\\x1b[2J.gguf\n"),
        "{driver}"
    );

    // Weight deltas print tensor names too.
    let out = wi(&[
        "delta",
        "create",
        "--strategy",
        "int4",
        "--base",
        "old.safetensors",
        "new.safetensors",
        "-o",
        "d.wdelta",
    ]);
    assert_success("delta create", &out);
    for args in [
        vec!["delta", "inspect", "d.wdelta"],
        vec!["inspect", "d.wdelta"],
        vec!["textconv", "d.wdelta"],
    ] {
        let out = wi(&args);
        assert_success(&format!("{args:?}"), &out);
        check_output(&format!("{args:?}"), &out, false);
    }
    common::assert_contains(
        &stdout(&wi(&["delta", "inspect", "d.wdelta"])),
        &["tensor x\\n+tensor forged.weight f32 [1]: int4 [4, 8]"],
    );
}

/// Hostile paths of the repository tests: model files whose names hold line breaks followed
/// by workflow commands, a command at the start, escape sequences, a CR and a legacy command.
const GGUF_PATHS: &[&str] = &[
    "!\n::stop-commands::x\nm.gguf",
    "::error ::at-start.gguf",
    "esc\x1b]8;;x\x1b\\\u{202e}.gguf",
    "cr\r##[error]legacy.gguf",
];
const SAFETENSORS_PATH: &str = "a\n::add-mask::weight\nb.safetensors";
/// An LFS pointer whose object is not present: a file the policy cannot check.
const POINTER_PATH: &str = "ptr\n::warning ::x.gguf";

const POLICY: &str = r#"
[[rules]]
paths = ["**"]
exclude = [".weight-inspect.toml"]
allowed_dtypes = ["f16"]
forbidden_metadata = ["general.name"]
required_metadata = { "legacy" = "expected" }
require_lfs = true
max_tensors = 1
"#;

fn pointer() -> String {
    format!(
        "version https://git-lfs.github.com/spec/v1\noid sha256:{}\nsize 12345\n",
        "4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393"
    )
}

/// A repository whose first commit holds the policy and version 1 of the hostile models, and
/// whose second commit changes them and adds the pointer.
fn hostile_repo() -> Repo {
    let repo = Repo::new();
    repo.write(".weight-inspect.toml", POLICY);
    let mut specs = serde_json::Map::new();
    for p in GGUF_PATHS {
        specs.insert((*p).to_owned(), gguf(1));
    }
    specs.insert(SAFETENSORS_PATH.to_owned(), safetensors(1));
    make_models(&repo.dir, &Value::Object(specs));
    repo.commit_all("v1");
    let mut specs = serde_json::Map::new();
    for p in GGUF_PATHS {
        specs.insert((*p).to_owned(), gguf(2));
    }
    specs.insert(SAFETENSORS_PATH.to_owned(), safetensors(2));
    make_models(&repo.dir, &Value::Object(specs));
    repo.write(POINTER_PATH, pointer());
    repo.commit_all("v2");
    repo
}

#[test]
fn git_integrations_show_hostile_paths_and_names_escaped() {
    let repo = hostile_repo();
    for args in [
        vec!["git", "diff", "HEAD~1", "HEAD"],
        vec!["git", "diff", "HEAD~1"],
        vec!["inspect", "HEAD:::error ::at-start.gguf"],
        vec![
            "diff",
            "HEAD~1:::error ::at-start.gguf",
            "HEAD:::error ::at-start.gguf",
        ],
    ] {
        let out = repo.wi(&args);
        assert!(code(&out) < 2, "{args:?}: {}", stderr(&out));
        check_output(&format!("{args:?}"), &out, false);
    }
    let report = stdout(&repo.wi(&["git", "diff", "HEAD~1", "HEAD"]));
    common::assert_contains(
        &report,
        &[
            "weight-inspect a/!\\n::stop-commands::x\\nm.gguf b/!\\n::stop-commands::x\\nm.gguf",
            "weight-inspect a/\\x3a:error ::at-start.gguf b/\\x3a:error ::at-start.gguf",
            "weight-inspect a/cr\\r\\x23#[error]legacy.gguf",
            "new file: LFS object sha256:4d7a2146",
        ],
    );

    // git itself, calling the external driver (`git diff`) and textconv (`git log -p`).
    let out = repo.wi(&["git", "install"]);
    assert_success("git install", &out);
    for args in [
        vec!["diff", "HEAD~1", "HEAD"],
        vec!["diff", "--no-ext-diff", "HEAD~1", "HEAD"],
        vec!["log", "-p", "-2"],
    ] {
        let out = repo.try_git(&args);
        assert_success(&format!("git {args:?}"), &out);
        // git's own header lines quote paths git's way (C escapes, but `##[` as it is): they
        // are git's output, not ours.
        let ours: String = stdout(&out)
            .lines()
            .filter(|l| {
                !l.starts_with("diff --git ") && !l.starts_with("--- ") && !l.starts_with("+++ ")
            })
            .map(|l| format!("{l}\n"))
            .collect();
        assert_inert(&format!("git {args:?}"), ours.as_bytes(), false);
        assert_inert(&format!("git {args:?} (stderr)"), &out.stderr, false);
        assert!(
            stdout(&out).contains("weight-inspect"),
            "git {args:?} ran no driver:\n{}",
            stdout(&out)
        );
    }
}

#[test]
fn policy_reports_show_hostile_paths_and_names_escaped() {
    let repo = hostile_repo();
    for args in [
        vec!["check"],
        vec!["check", "--staged", "--all"],
        vec!["check", "--format", "github"],
        vec!["check", "--staged", "--all", "--format", "github"],
    ] {
        let out = repo.wi(&args);
        // Violations, and a file that could not be checked.
        assert_eq!(code(&out), 2, "{args:?}: {}", stderr(&out));
        check_output(&format!("{args:?}"), &out, args.contains(&"github"));
    }
    let text = repo.wi(&["check"]);
    common::assert_contains(
        &stdout(&text),
        &[
            "!\\n::stop-commands::x\\nm.gguf: allowed_dtypes: expected only f16; found f32 in 8 \
             tensors (\\x23#[error]t, \\x3a:error ::t, t\\0nul, ...)",
            "\\x3a:error ::at-start.gguf: max_tensors:",
            "forbidden_metadata: expected no metadata key general.name; found general.name = \
             \"name\\x1b[2J\\n::error ::from-value v2\"",
        ],
    );
    common::assert_contains(
        &stderr(&text),
        &["weight-inspect: ptr\\n::warning ::x.gguf: the LFS object sha256:4d7a2146"],
    );
    let github = stdout(&repo.wi(&["check", "--format", "github"]));
    common::assert_contains(
        &github,
        &[
            "::error file=!\\n%3A%3Astop-commands%3A%3Ax\\nm.gguf,title=weight-inspect%3A \
             allowed_dtypes::",
            "::error file=ptr\\n%3A%3Awarning %3A%3Ax.gguf,title=weight-inspect%3A cannot check::",
        ],
    );
}

#[test]
fn ci_logs_and_summaries_show_hostile_paths_escaped() {
    let repo = hostile_repo();
    let base = ["ci", "--base", "HEAD~1", "--head", "HEAD"];
    let with = |extra: &[&str]| {
        let mut args = base.to_vec();
        args.extend_from_slice(extra);
        repo.wi(&args)
    };
    for extra in [
        vec!["--annotations"],
        vec!["--annotations", "--fail-on", "change"],
        vec!["--annotations", "--fail-on", "never"],
        vec![],
        vec!["--summary", "-"],
    ] {
        let out = with(&extra);
        assert!(code(&out) < 2, "ci {extra:?}: {}", stderr(&out));
        check_output(
            &format!("ci {extra:?}"),
            &out,
            extra.contains(&"--annotations"),
        );
    }
    let out = with(&["--annotations", "--fail-on", "change"]);
    let log = stdout(&out);
    // Every file has its status line, shown escaped, before the annotations.
    common::assert_contains(
        &log,
        &[
            "modified  !\\n::stop-commands::x\\nm.gguf  gguf",
            "modified  a\\n::add-mask::weight\\nb.safetensors  safetensors",
            "modified  \\x3a:error ::at-start.gguf  gguf",
            "added     ptr\\n::warning ::x.gguf  ?",
        ],
    );
    // More than ten errors: the rest are grouped in one annotation, one line each (the
    // message's own line breaks, escaped), files shown escaped.
    let errors: Vec<&str> = log.lines().filter(|l| l.starts_with("::error ")).collect();
    assert_eq!(errors.len(), 10, "{log}");
    assert!(
        errors[9].contains("more errors::GitHub shows 10 errors per step"),
        "{log}"
    );
    assert!(errors[9].contains("%0A"), "{log}");
    let markdown = stdout(&with(&["--summary", "-"]));
    common::assert_contains(
        &markdown,
        &[
            "| modified | `!\\n::stop-commands::x\\nm.gguf` | gguf |",
            "<summary><code>a\\n::add-mask::weight\\nb.safetensors</code>: modified,",
        ],
    );
}

/// Paths the user typed are printed escaped too: a file name holding ESC, CR, a bidi override
/// and a terminal hyperlink, missing and present, through every command that takes a path.
#[test]
fn typed_paths_are_shown_escaped() {
    let tmp = tempfile::tempdir().unwrap();
    let hostile = "x\u{1b}]8;;evil\u{1b}\\y\rz\u{202e}";
    let present = tmp.path().join(format!("{hostile}.gguf"));
    std::fs::copy(
        common::repo_root().join("examples/tiny-llama-q8_0.gguf"),
        &present,
    )
    .unwrap();
    let missing = tmp.path().join(format!("{hostile}-missing.gguf"));
    let other = common::repo_root().join("examples/tiny-llama-f16.gguf");
    let out_file = tmp.path().join(format!("{hostile}.wdelta"));
    let mut escaped_seen = 0;
    for path in [&present, &missing] {
        let p = s(path);
        let commands: Vec<Vec<&str>> = vec![
            vec!["inspect", p],
            vec!["inspect", "--json", p],
            vec!["id", p],
            vec!["diff", p, s(&other)],
            vec!["diff", s(&other), p],
            vec!["diff", "--values", p, s(&other)],
            vec!["delta", "inspect", p],
            vec![
                "delta",
                "create",
                "--base",
                p,
                s(&other),
                "-o",
                s(&out_file),
            ],
            vec!["delta", "apply", "--base", p, p, "-o", s(&out_file)],
            vec!["check", p],
            vec!["textconv", p],
        ];
        for args in commands {
            let out = common::run_in(Some(tmp.path()), &args);
            check_output(&format!("{args:?}"), &out, false);
            let err = String::from_utf8_lossy(&out.stderr);
            if err.contains("\\x1b]8;;evil\\x1b") {
                escaped_seen += 1;
            }
        }
    }
    // The path is named in the errors, escaped (a missing file in every command).
    assert!(
        escaped_seen >= 11,
        "the escaped path was named {escaped_seen} times"
    );
}
