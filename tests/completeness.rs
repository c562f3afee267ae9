//! A model file cut short (an interrupted download or copy) still has the header of the whole
//! model, so its structural hash is the complete file's: every command says it is incomplete
//! beside that hash (`id`, `diff`, textconv, `ci`), and `check` refuses it, even where the
//! policy pins its hash. Multi-file models with a missing or cut part are incomplete too.

mod common;

use std::path::{Path, PathBuf};

use common::git::Repo;
use common::models::make_model;
use common::{code, combined, fixture, run_in, stdout};
use serde_json::{Value, json};

/// A GGUF written by gguf-py with 3 f32 tensors of 4096 values each (48 KiB of data).
fn model_spec() -> Value {
    json!({
        "kind": "gguf",
        "metadata": {"general.name": "cut", "general.architecture": "llama"},
        "tensors": [
            {"name": "token_embd.weight", "dtype": "float32", "shape": [16, 256], "fill": "arange"},
            {"name": "blk.0.attn_q.weight", "dtype": "float32", "shape": [16, 256], "fill": 1},
            {"name": "output.weight", "dtype": "float32", "shape": [16, 256], "fill": 2},
        ],
    })
}

/// `whole.gguf` and `cut.gguf`, its first 20,000 bytes (header and part of the data).
fn whole_and_cut(dir: &Path) -> (PathBuf, PathBuf) {
    let whole = dir.join("whole.gguf");
    make_model(&whole, &model_spec());
    let bytes = std::fs::read(&whole).unwrap();
    assert!(bytes.len() > 40_000, "{}", bytes.len());
    let cut = dir.join("cut.gguf");
    std::fs::write(&cut, &bytes[..20_000]).unwrap();
    (whole, cut)
}

fn wi(dir: &Path, args: &[&str]) -> std::process::Output {
    run_in(Some(dir), args)
}

fn json_of(out: &std::process::Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", combined(out)))
}

#[test]
fn id_and_diff_say_a_cut_file_is_incomplete_beside_the_same_hash() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    whole_and_cut(dir);

    let whole = json_of(&wi(dir, &["id", "--json", "whole.gguf"]));
    let cut = json_of(&wi(dir, &["id", "--json", "cut.gguf"]));
    assert_eq!(whole["schema"], 1);
    // The identity is the header's: completeness is reported beside it, never inside it.
    assert_eq!(whole["structural_hash"], cut["structural_hash"]);
    assert_eq!(whole["complete"], true);
    assert!(whole.get("incomplete").is_none(), "{whole}");
    assert_eq!(cut["complete"], false);
    let why = cut["incomplete"].as_str().unwrap();
    assert!(
        why.contains(" of 49152 bytes of tensor data present (truncated)"),
        "{why}"
    );

    let text = stdout(&wi(dir, &["id", "cut.gguf"]));
    assert!(text.contains(&format!("incomplete: {why}\n")), "{text}");
    let text = stdout(&wi(dir, &["id", "whole.gguf"]));
    assert!(!text.contains("incomplete"), "{text}");

    // diff: structurally identical, the cut side says so, and a cut copy is a difference
    // (exit 1, as diff(1) exits for two files that differ).
    let out = wi(dir, &["diff", "whole.gguf", "cut.gguf"]);
    assert_eq!(code(&out), 1, "{}", combined(&out));
    let text = stdout(&out);
    assert!(text.contains("No structural differences."), "{text}");
    assert!(
        text.contains("bytes differ: ") && text.contains(" -> 20000 bytes"),
        "{text}"
    );
    assert!(text.contains(&format!("new incomplete: {why}")), "{text}");
    assert!(!text.contains("old incomplete"), "{text}");
    let doc = json_of(&wi(dir, &["diff", "--json", "whole.gguf", "cut.gguf"]));
    assert_eq!(doc["old"]["complete"], true);
    assert_eq!(doc["new"]["complete"], false);
    assert_eq!(doc["new"]["incomplete"], why);

    // textconv shows it too, next to the structural hash.
    let text = stdout(&wi(dir, &["textconv", "cut.gguf"]));
    assert!(text.contains(&format!("\nincomplete: {why}\n")), "{text}");
}

#[test]
fn check_refuses_a_cut_copy_of_a_pinned_model() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    whole_and_cut(dir);
    let hash = json_of(&wi(dir, &["id", "--json", "whole.gguf"]))["structural_hash"]
        .as_str()
        .unwrap()
        .to_owned();
    let pinned = format!("[[rules]]\npaths = [\"*.gguf\"]\nexpected_hash = \"{hash}\"\n");
    std::fs::write(dir.join(".weight-inspect.toml"), &pinned).unwrap();

    let out = wi(dir, &["check", "whole.gguf"]);
    assert_eq!(code(&out), 0, "{}", combined(&out));
    let out = wi(dir, &["check", "cut.gguf"]);
    assert_eq!(code(&out), 1, "{}", combined(&out));
    let text = stdout(&out);
    assert!(text.contains("expected_hash"), "{text}");
    assert!(text.contains("but the file is incomplete"), "{text}");
    let doc = json_of(&wi(dir, &["check", "--format", "json", "cut.gguf"]));
    let rules: Vec<&str> = doc["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["rule"].as_str().unwrap())
        .collect();
    assert_eq!(rules, ["expected_hash", "complete"], "{doc}");

    // A repository that keeps partial files on purpose turns `complete` off; a pinned hash
    // still holds only for the complete file.
    std::fs::write(
        dir.join(".weight-inspect.toml"),
        format!("{pinned}complete = false\n"),
    )
    .unwrap();
    let doc = json_of(&wi(dir, &["check", "--format", "json", "cut.gguf"]));
    assert_eq!(doc["violations"].as_array().unwrap().len(), 1, "{doc}");
    assert_eq!(doc["violations"][0]["rule"], "expected_hash");
    std::fs::write(
        dir.join(".weight-inspect.toml"),
        "[[rules]]\npaths = [\"*.gguf\"]\nmax_file_size = \"1 GB\"\ncomplete = false\n",
    )
    .unwrap();
    let out = wi(dir, &["check", "cut.gguf"]);
    assert_eq!(code(&out), 0, "{}", combined(&out));

    // `complete` is on by default for model files, whatever the rule checks.
    std::fs::write(
        dir.join(".weight-inspect.toml"),
        "[[rules]]\npaths = [\"*.gguf\"]\nmax_file_size = \"1 GB\"\n",
    )
    .unwrap();
    let doc = json_of(&wi(
        dir,
        &["check", "--format", "json", "whole.gguf", "cut.gguf"],
    ));
    let violations = doc["violations"].as_array().unwrap();
    assert_eq!(violations.len(), 1, "{doc}");
    assert_eq!(violations[0]["path"], "cut.gguf");
    assert_eq!(violations[0]["rule"], "complete");
    assert_eq!(violations[0]["policy_rule"], 1);
    assert!(
        violations[0]["found"]
            .as_str()
            .unwrap()
            .starts_with("incomplete: 19"),
        "{doc}"
    );
    // And SARIF knows the rule.
    let out = wi(dir, &["check", "--format", "sarif", "cut.gguf"]);
    let sarif = json_of(&out);
    let rules = &sarif["runs"][0]["tool"]["driver"]["rules"];
    assert!(
        rules
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["id"] == "complete"),
        "{rules}"
    );
    assert_eq!(sarif["runs"][0]["results"][0]["ruleId"], "complete");
}

/// A copy of a fixture directory.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

#[test]
fn multi_file_models_with_a_missing_or_cut_part_are_incomplete() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let split = dir.join("split");
    copy_dir(&fixture("golden-split"), &split);
    let part2 = split.join("golden-types-00002-of-00002.gguf");
    let bytes = std::fs::read(&part2).unwrap();
    std::fs::write(&part2, &bytes[..bytes.len() - 10]).unwrap();
    let doc = json_of(&wi(dir, &["id", "--json", "split"]));
    assert_eq!(doc["complete"], false, "{doc}");
    assert!(
        doc["incomplete"]
            .as_str()
            .unwrap()
            .ends_with("(truncated: golden-types-00002-of-00002.gguf)"),
        "{doc}"
    );
    // check judges the model directory as a whole, and names the part cut short.
    std::fs::write(
        dir.join(".weight-inspect.toml"),
        "[[rules]]\npaths = [\"split\", \"split/**\"]\nmax_file_size = \"1 GB\"\n",
    )
    .unwrap();
    let doc = json_of(&wi(dir, &["check", "--format", "json", "split"]));
    let whole_model = doc["violations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["path"] == "split")
        .unwrap_or_else(|| panic!("{doc}"));
    assert_eq!(whole_model["rule"], "complete");
    assert!(
        whole_model["found"]
            .as_str()
            .unwrap()
            .contains("(truncated: golden-types-00002-of-00002.gguf)"),
        "{doc}"
    );
    std::fs::remove_file(&part2).unwrap();
    let out = wi(dir, &["id", "split/golden-types-00001-of-00002.gguf"]);
    assert_eq!(code(&out), 2, "{}", combined(&out));
    assert!(
        combined(&out).contains("golden-types-00002-of-00002.gguf: missing;")
            && combined(&out).contains("which is incomplete without it"),
        "{}",
        combined(&out)
    );

    let sharded = dir.join("sharded");
    copy_dir(&fixture("golden-sharded"), &sharded);
    std::fs::remove_file(sharded.join("model-00002-of-00002.safetensors")).unwrap();
    let out = wi(dir, &["id", "sharded"]);
    assert_eq!(code(&out), 2, "{}", combined(&out));
    assert!(
        combined(&out).contains("which is incomplete without it"),
        "{}",
        combined(&out)
    );
    // check names it as a model whose files do not fit together, and says why.
    std::fs::write(
        dir.join(".weight-inspect.toml"),
        "[[rules]]\npaths = [\"sharded\", \"sharded/**\"]\nmax_file_size = \"1 GB\"\n",
    )
    .unwrap();
    let out = wi(dir, &["check", "--format", "json", "sharded"]);
    assert_eq!(code(&out), 1, "{}", combined(&out));
    let doc = json_of(&out);
    assert_eq!(doc["violations"][0]["rule"], "model_files", "{doc}");
    assert!(
        doc["violations"][0]["found"]
            .as_str()
            .unwrap()
            .contains("which is incomplete without it"),
        "{doc}"
    );
}

#[test]
fn ci_says_a_pull_request_brings_an_incomplete_model() {
    let repo = Repo::with_lfs(&["*.gguf"]);
    repo.write(
        ".weight-inspect.toml",
        "[[rules]]\npaths = [\"models/**\"]\nallowed_dtypes = [\"f32\"]\n",
    );
    make_model(&repo.path("models/a.gguf"), &model_spec());
    repo.git(&["add", "."]);
    repo.git(&["commit", "-q", "-m", "base"]);
    repo.git(&["checkout", "-q", "-b", "pr"]);
    let bytes = std::fs::read(repo.path("models/a.gguf")).unwrap();
    std::fs::write(repo.path("models/a.gguf"), &bytes[..20_000]).unwrap();
    repo.git(&["commit", "-q", "-am", "an interrupted copy"]);

    let out_dir = tempfile::tempdir().unwrap();
    let report = out_dir.path().join("report.json");
    let summary = out_dir.path().join("summary.md");
    let run = repo.wi(&[
        "ci",
        "--base",
        "main",
        "--json",
        report.to_str().unwrap(),
        "--summary",
        summary.to_str().unwrap(),
    ]);
    assert_eq!(code(&run), 1, "{}", combined(&run));
    let log = stdout(&run);
    assert!(log.contains(" (incomplete)  "), "{log}");
    assert!(log.contains("complete"), "{log}");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let file = &doc["files"][0];
    assert_eq!(file["old"]["complete"], true, "{doc}");
    assert_eq!(file["new"]["complete"], false, "{doc}");
    assert!(
        doc["violations"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v["rule"] == "complete"),
        "{doc}"
    );
    let summary = std::fs::read_to_string(&summary).unwrap();
    assert!(summary.contains(" (incomplete)"), "{summary}");
}

#[test]
fn an_interrupted_copy_committed_over_a_pinned_lfs_model_is_refused_and_shown() {
    let repo = Repo::with_lfs(&["*.gguf"]);
    assert_eq!(
        code(&repo.wi(&["git", "install"])),
        0,
        "weight-inspect git install"
    );
    make_model(&repo.path("models/a.gguf"), &model_spec());
    let pin = repo.wi(&["policy", "pin", "models/a.gguf"]);
    assert_eq!(code(&pin), 0, "{}", combined(&pin));
    repo.git(&["add", "."]);
    repo.git(&["commit", "-q", "-m", "pinned"]);
    let out = repo.wi(&["check"]);
    assert_eq!(code(&out), 0, "{}", combined(&out));

    let bytes = std::fs::read(repo.path("models/a.gguf")).unwrap();
    std::fs::write(repo.path("models/a.gguf"), &bytes[..20_000]).unwrap();
    repo.git(&["add", "models/a.gguf"]);
    // Staged: the LFS object of the cut copy, judged by its pointer's size.
    let out = repo.wi(&["check", "--staged", "--format", "json"]);
    assert_eq!(code(&out), 1, "{}", combined(&out));
    let doc = json_of(&out);
    let rules: Vec<&str> = doc["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["rule"].as_str().unwrap())
        .collect();
    assert_eq!(rules, ["expected_hash", "complete"], "{doc}");
    repo.git(&["commit", "-q", "-m", "an interrupted copy"]);

    // The drivers and the fast path say the new side is incomplete, beside the same hash.
    let external = repo.ok(&["diff", "HEAD~1", "HEAD"]);
    assert!(
        external.contains("structure identical") && external.contains("new incomplete: 19"),
        "{external}"
    );
    let log = repo.ok(&["log", "-p", "-1"]);
    assert!(log.contains("\n+incomplete: 19"), "{log}");
    let fast = repo.wi(&["git", "diff", "--json", "HEAD~1", "HEAD"]);
    let doc = json_of(&fast);
    assert_eq!(doc["files"][0]["old"]["complete"], true, "{doc}");
    assert_eq!(doc["files"][0]["new"]["complete"], false, "{doc}");
}
