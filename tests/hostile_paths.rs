//! Paths the user types (and paths derived from them) that hold ESC with an OSC 8 hyperlink,
//! CR, LF and a bidirectional override. Every command that takes a path prints it the one way
//! every name is printed (`crate::escape::shown`): no control or bidi character reaches the
//! terminal, no line is forged, and the path reads back from its escaped form, a backslash
//! shown as `\\`. Each command runs with the file missing and, where it reads one, present.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::git::{Repo, isolate};
use common::{repo_root, run_in, stderr, stdout};

/// A file name holding ESC (an OSC 8 hyperlink to "evil"), a backslash, CR, LF and U+202E.
const HOSTILE: &str = "x\u{1b}]8;;evil\u{1b}\\y\rz\nq\u{202e}w";
/// [`HOSTILE`] as the one rule shows it.
const SHOWN: &str = "x\\x1b]8;;evil\\x1b\\\\y\\rz\\nq\\u{202e}w";

/// Asserts that neither stream of `out` holds ESC, CR, U+202E or the name's raw line break.
fn assert_inert(what: &str, out: &Output) {
    assert_streams_inert(what, out, false);
}

/// [`assert_inert`] for a command whose stdout is JSON: its strings are escaped as JSON
/// escapes them (control characters as `\u001b`, `\r`, `\n`), and JSON, read by programs,
/// does not escape bidirectional characters.
fn assert_json_inert(what: &str, out: &Output) {
    assert_streams_inert(what, out, true);
}

fn assert_streams_inert(what: &str, out: &Output, json_stdout: bool) {
    for (stream, bytes) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
        let text = String::from_utf8_lossy(bytes);
        let context = || format!("{what} ({stream}):\n-----\n{text}\n-----");
        assert!(!bytes.contains(&0x1b), "ESC in {}", context());
        assert!(!bytes.contains(&b'\r'), "CR in {}", context());
        assert!(
            !text.contains("z\nq"),
            "the name's line break in {}",
            context()
        );
        if !(json_stdout && stream == "stdout") {
            assert!(!text.contains('\u{202e}'), "U+202E in {}", context());
        }
    }
}

/// [`assert_inert`], and the escaped name is printed (on stdout or stderr).
fn assert_shown(what: &str, out: &Output) {
    assert_inert(what, out);
    let all = format!("{}{}", stdout(out), stderr(out));
    assert!(
        all.contains(SHOWN),
        "{what}: the escaped name {SHOWN} is not in the output:\n-----\n{all}\n-----"
    );
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn example(name: &str) -> PathBuf {
    repo_root().join("examples").join(name)
}

/// A copy of `examples/NAME` in `dir` named `HOSTILE.EXT`.
fn hostile_copy(dir: &Path, name: &str, ext: &str) -> PathBuf {
    let path = dir.join(format!("{HOSTILE}.{ext}"));
    std::fs::copy(example(name), &path).unwrap();
    path
}

#[test]
fn model_commands_show_typed_paths_escaped() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let present = format!("{HOSTILE}.gguf");
    hostile_copy(dir, "tiny-llama-q8_0.gguf", "gguf");
    let missing = format!("{HOSTILE}-missing.gguf");
    let other = example("tiny-llama-f16.gguf");
    let other = s(&other);
    for (file, exists) in [(present.as_str(), true), (missing.as_str(), false)] {
        let commands: Vec<Vec<&str>> = vec![
            vec!["inspect", file],
            vec!["inspect", "--all", file],
            vec!["inspect", "--json", file],
            vec!["id", file],
            vec!["id", "--json", file],
            vec!["diff", file, other],
            vec!["diff", other, file],
            vec!["diff", "--json", other, file],
            vec!["diff", "--values", "--json", other, file],
            vec!["diff", "--values", file, other],
            vec!["diff", "--values", other, file],
            vec!["delta", "inspect", file],
            vec!["textconv", file],
        ];
        for args in commands {
            let what = format!("{args:?}");
            let out = run_in(Some(dir), &args);
            // textconv never fails; the others fail on a missing file, naming it.
            let named = !exists || args[..2] == ["delta", "inspect"];
            if named {
                assert_shown(&what, &out);
            } else {
                assert_inert(&what, &out);
            }
        }
    }
}

#[test]
fn argument_errors_quote_typed_arguments_escaped() {
    let gguf = example("tiny-llama-q8_0.gguf");
    for args in [
        vec!["inspect", s(&gguf), HOSTILE],
        vec!["diff", s(&gguf), s(&gguf), HOSTILE],
        vec!["delta", "inspect", HOSTILE, HOSTILE],
        vec!["check", "--format", HOSTILE],
    ] {
        let out = common::run(&args);
        assert_eq!(common::code(&out), 2, "{args:?}: {}", stderr(&out));
        assert_shown(&format!("{args:?}"), &out);
    }
    // An ordinary refusal is clap's own.
    let out = common::run(&["inspect", s(&gguf), "extra"]);
    assert!(
        stderr(&out).contains("unexpected argument 'extra' found"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn delta_commands_show_typed_paths_escaped() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let base = example("tiny-base.safetensors");
    let tuned = example("tiny-tuned.safetensors");
    let model = hostile_copy(dir, "tiny-base.safetensors", "safetensors");
    let gguf = hostile_copy(dir, "tiny-llama-q8_0.gguf", "gguf");
    let delta = dir.join(format!("{HOSTILE}.wdelta"));
    let rebuilt = dir.join(format!("{HOSTILE}-rebuilt.safetensors"));
    let missing = dir.join(format!("{HOSTILE}-missing.safetensors"));
    let run = |args: &[&str]| run_in(Some(dir), args);

    // Written: each success names its output (or its inputs).
    // int4: a lossless delta records the file's name, and refuses one with a backslash.
    let out = run(&[
        "delta",
        "create",
        "--strategy",
        "int4",
        "--base",
        s(&base),
        s(&model),
        "-o",
        s(&delta),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_shown("delta create", &out);
    for args in [
        vec!["delta", "inspect", s(&delta)],
        vec![
            "delta",
            "apply",
            "--base",
            s(&base),
            s(&delta),
            "-o",
            s(&rebuilt),
        ],
        vec!["delta", "verify", "--base", s(&model), s(&delta)],
    ] {
        let out = run(&args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        assert_shown(&format!("{args:?}"), &out);
    }
    let out = run(&["delta", "inspect", "--json", s(&delta)]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_inert("delta inspect --json", &out);

    // Refused: each error names the path it is about.
    let out_file = dir.join("out.wdelta");
    for args in [
        // Missing base, missing fine-tuned model.
        vec![
            "delta",
            "create",
            "--base",
            s(&missing),
            s(&tuned),
            "-o",
            s(&out_file),
        ],
        vec![
            "delta",
            "create",
            "--base",
            s(&base),
            s(&missing),
            "-o",
            s(&out_file),
        ],
        // Not safetensors, for a lossy strategy.
        vec![
            "delta",
            "create",
            "--strategy",
            "int4",
            "--base",
            s(&gguf),
            s(&tuned),
            "-o",
            s(&out_file),
        ],
        // Tensors that differ (a lossy delta needs the same tensors): both models named, in
        // the list of differences too.
        vec![
            "delta",
            "create",
            "--strategy",
            "int4",
            "--base",
            s(&model),
            s(&tuned),
            "-o",
            s(&out_file),
        ],
        // The output is an input.
        vec![
            "delta",
            "create",
            "--base",
            s(&base),
            s(&model),
            "-o",
            s(&model),
        ],
        // A missing delta, a missing base.
        vec![
            "delta",
            "apply",
            "--base",
            s(&base),
            s(&missing),
            "-o",
            s(&out_file),
        ],
        vec![
            "delta",
            "apply",
            "--base",
            s(&missing),
            s(&delta),
            "-o",
            s(&out_file),
        ],
        // A base the delta does not fit.
        vec![
            "delta",
            "apply",
            "--base",
            s(&tuned),
            s(&delta),
            "-o",
            s(&out_file),
        ],
        vec!["delta", "verify", "--base", s(&missing), s(&delta)],
        // No output name to derive.
        vec!["delta", "restore", s(&missing)],
    ] {
        let out = run(&args);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert_shown(&format!("{args:?}"), &out);
    }
}

#[test]
fn policy_commands_show_typed_paths_escaped() {
    let repo = Repo::new();
    let policy = format!("{HOSTILE}.toml");
    repo.write(
        &policy,
        "[[rules]]\npaths = [\"**/*.gguf\"]\nforbid_formats = [\"gguf\"]\n",
    );
    let model = format!("{HOSTILE}.gguf");
    std::fs::copy(example("tiny-llama-q8_0.gguf"), repo.path(&model)).unwrap();
    let bad = format!("{HOSTILE}-bad.toml");
    repo.write(&bad, "[[rules]\n");
    let missing = format!("{HOSTILE}-missing.toml");
    let gone = format!("{HOSTILE}-gone.gguf");
    repo.commit_all("hostile names");

    // The policy's name, in the summary and on each violation; the file's, on its line.
    let out = repo.wi(&["check", "--policy", &policy, &model]);
    assert_eq!(common::code(&out), 1, "{}", stderr(&out));
    assert_shown("check --policy", &out);
    assert!(
        stdout(&out).contains(&format!("against {SHOWN}.toml")),
        "{}",
        stdout(&out)
    );
    let out = repo.wi(&["check", "--format", "github", "--policy", &policy, &model]);
    assert_eq!(common::code(&out), 1, "{}", stderr(&out));
    assert_shown("check --format github", &out);
    for format in ["json", "sarif"] {
        let out = repo.wi(&["check", "--format", format, "--policy", &policy, &model]);
        assert_eq!(common::code(&out), 1, "{format}: {}", stderr(&out));
        assert_json_inert(&format!("check --format {format}"), &out);
    }
    let out = repo.wi(&["policy", "validate", "--policy", &policy]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_shown("policy validate", &out);
    assert!(stdout(&out).starts_with(&format!("{SHOWN}.toml: valid")));

    for args in [
        vec!["check", "--policy", missing.as_str()],
        vec!["check", "--policy", bad.as_str()],
        vec!["policy", "validate", "--policy", missing.as_str()],
        vec!["policy", "validate", "--policy", bad.as_str()],
        vec!["policy", "pin", "--policy", bad.as_str(), model.as_str()],
        vec![
            "check",
            "--staged",
            "--policy",
            policy.as_str(),
            gone.as_str(),
        ],
        vec![
            "ci",
            "--base",
            "HEAD",
            "--head",
            "HEAD",
            "--policy",
            missing.as_str(),
        ],
    ] {
        let out = repo.wi(&args);
        assert_eq!(common::code(&out), 2, "{args:?}: {}", stderr(&out));
        assert_inert(&format!("{args:?}"), &out);
        if args.iter().any(|a| a.contains(HOSTILE)) {
            assert_shown(&format!("{args:?}"), &out);
        }
    }
}

#[test]
fn git_arguments_show_typed_paths_escaped() {
    let repo = Repo::new();
    let model = format!("{HOSTILE}.gguf");
    std::fs::copy(example("tiny-llama-q8_0.gguf"), repo.path(&model)).unwrap();
    repo.commit_all("a model with a hostile name");
    std::fs::copy(example("tiny-llama-f16.gguf"), repo.path(&model)).unwrap();

    // REV:path that names nothing, a revision that does not exist.
    for args in [
        vec!["inspect".to_owned(), format!("HEAD:{HOSTILE}-missing.gguf")],
        vec!["id".to_owned(), format!(":{HOSTILE}-missing.gguf")],
        vec!["git".to_owned(), "diff".to_owned(), HOSTILE.to_owned()],
        vec![
            "diff".to_owned(),
            format!("{HOSTILE}:{model}"),
            format!("HEAD:{model}"),
        ],
    ] {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = repo.wi(&args);
        assert_eq!(common::code(&out), 2, "{args:?}: {}", stderr(&out));
        assert_shown(&format!("{args:?}"), &out);
    }
    // The changed file, named by a path argument.
    let out = repo.wi(&["git", "diff", "HEAD", "--", &model]);
    assert!(common::code(&out) < 2, "{}", stderr(&out));
    assert_shown("git diff -- PATH", &out);
    let out = repo.wi(&["inspect", &format!("HEAD:{model}")]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_inert("inspect HEAD:PATH", &out);
}

/// A repository (and HOME) in a directory whose name is hostile: the files `git install`,
/// `git uninstall` and `hook` write are named with it.
#[test]
fn files_written_in_a_hostile_directory_are_named_escaped() {
    common::require_tool("git");
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let dir = tmp.path().join(HOSTILE);
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&dir).unwrap();
    let init = common::git::git_command(&home, &dir, &["init", "-q", "-b", "main"])
        .output()
        .unwrap();
    assert!(init.status.success(), "{}", stderr(&init));
    let wi = |args: &[&str]| {
        let mut cmd = Command::new(common::bin());
        cmd.args(args).current_dir(&dir);
        isolate(&mut cmd, &home);
        cmd.output().unwrap()
    };
    for args in [
        vec!["git", "install"],
        vec!["git", "uninstall"],
        vec!["hook", "install"],
        vec!["hook", "uninstall"],
    ] {
        let out = wi(&args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        assert_inert(&format!("{args:?}"), &out);
    }
    let out = wi(&["git", "install"]);
    assert_shown("git install", &out);
    // Manual pages written into a hostile directory.
    let man = tmp.path().join(format!("{HOSTILE}-man"));
    std::fs::create_dir_all(&man).unwrap();
    let out = wi(&["completions", "--man", s(&man)]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_shown("completions --man", &out);
}
