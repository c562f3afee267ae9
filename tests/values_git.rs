//! `git diff --values` with the real git and git-lfs: values read from LFS objects in the local
//! store, from blobs and from the work tree; an object that is not local is skipped, and why.

mod common;

use common::git::Repo;
use common::models::make_model;
use common::{stderr, stdout};
use serde_json::{Value, json};

fn gguf(plus: f64) -> Value {
    json!({"kind": "gguf", "tensors": [
        {"name": "blk.0.attn.weight", "dtype": "float32", "shape": [8, 32], "fill": {"normal": 1}},
        {"name": "blk.1.attn.weight", "dtype": "float32", "shape": [8, 32],
         "fill": {"normal": 2, "plus": plus}},
    ]})
}

fn safetensors(plus: f64) -> Value {
    json!({"kind": "safetensors", "tensors": [
        {"name": "w", "dtype": "float32", "shape": [4, 4], "fill": {"normal": 3, "plus": plus}},
    ]})
}

/// model.gguf in LFS, weights.safetensors as a plain blob; v2 changes one tensor of each.
fn two_versions() -> Repo {
    let repo = Repo::with_lfs(&["*.gguf"]);
    make_model(&repo.path("model.gguf"), &gguf(0.0));
    make_model(&repo.path("weights.safetensors"), &safetensors(0.0));
    repo.commit_all("v1");
    make_model(&repo.path("model.gguf"), &gguf(0.5));
    make_model(&repo.path("weights.safetensors"), &safetensors(1.0));
    repo.commit_all("v2");
    repo
}

fn report(repo: &Repo, args: &[&str]) -> Value {
    let out = repo.wi(args);
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_str(&stdout(&out)).unwrap()
}

fn file<'a>(report: &'a Value, path: &str) -> &'a Value {
    report["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["new_path"] == path)
        .unwrap_or_else(|| panic!("{path} not in {report:#}"))
}

#[test]
fn values_of_lfs_objects_and_blobs_between_revisions() {
    let repo = two_versions();
    let out = repo.wi(&["git", "diff", "--values", "HEAD~1", "HEAD"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("values changed in 1 of 2 tensors; largest rel_l2"),
        "{text}"
    );
    assert!(
        text.contains("values changed in 1 of 1 tensors; largest rel_l2"),
        "{text}"
    );
    let doc = report(
        &repo,
        &["git", "diff", "--values", "--json", "HEAD~1", "HEAD"],
    );
    let gguf = &file(&doc, "model.gguf")["values"];
    assert_eq!(gguf["changed"], 1, "{gguf:#}");
    let changed: Vec<&Value> = gguf["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["changed"] == true)
        .collect();
    assert_eq!(changed[0]["name"], "blk.1.attn.weight");
    assert_eq!(changed[0]["changed_elements"], 256);
    assert_eq!(file(&doc, "weights.safetensors")["values"]["changed"], 1);
    // Without --values, no values section.
    let plain = report(&repo, &["git", "diff", "--json", "HEAD~1", "HEAD"]);
    assert!(file(&plain, "model.gguf").get("values").is_none());
}

#[test]
fn values_against_the_work_tree() {
    let repo = two_versions();
    make_model(&repo.path("model.gguf"), &gguf(0.25));
    let doc = report(&repo, &["git", "diff", "--values", "--json"]);
    let values = &file(&doc, "model.gguf")["values"];
    assert_eq!(values["changed"], 1, "{values:#}");
}

#[test]
fn lfs_objects_that_are_not_local_are_skipped_and_say_why() {
    let repo = two_versions();
    let old_oid = repo.lfs_oid("HEAD~1", "model.gguf");
    std::fs::remove_file(repo.lfs_object(&old_oid)).unwrap();
    let doc = report(
        &repo,
        &["git", "diff", "--values", "--json", "HEAD~1", "HEAD"],
    );
    let skipped = file(&doc, "model.gguf")["values"]["skipped"]
        .as_str()
        .unwrap();
    assert!(
        skipped.contains(&format!("sha256:{old_oid} is not in the local store")),
        "{skipped}"
    );
    assert!(skipped.contains("never downloaded"), "{skipped}");
    let out = repo.wi(&["git", "diff", "--values", "HEAD~1", "HEAD"]);
    assert!(
        stdout(&out).contains("values not compared: the old side's LFS object"),
        "{}",
        stdout(&out)
    );
    // The other file is still compared.
    assert_eq!(file(&doc, "weights.safetensors")["values"]["changed"], 1);
}

#[test]
fn diff_values_reads_rev_paths_and_lfs_objects() {
    let repo = two_versions();
    let out = repo.wi(&[
        "diff",
        "--values",
        "--json",
        "HEAD~1:model.gguf",
        "HEAD:model.gguf",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let doc: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(doc["values"]["changed"], 1);
    let out = repo.wi(&[
        "diff",
        "--values",
        "--json",
        "HEAD~1:weights.safetensors",
        "weights.safetensors",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let doc: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(doc["values"]["changed"], 1);
    let old_oid = repo.lfs_oid("HEAD~1", "model.gguf");
    std::fs::remove_file(repo.lfs_object(&old_oid)).unwrap();
    let out = repo.wi(&["diff", "--values", "HEAD~1:model.gguf", "HEAD:model.gguf"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("is not in the local store"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn ci_values_adds_a_weights_column_and_sections() {
    let repo = two_versions();
    let json_path = repo.path("../report.json");
    let out = repo.wi(&[
        "ci",
        "--base",
        "HEAD~1",
        "--head",
        "HEAD",
        "--values",
        "--summary",
        "-",
        "--json",
        json_path.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let summary = stdout(&out);
    assert!(
        summary.contains("| Size (old → new) | Weights |"),
        "{summary}"
    );
    assert!(
        summary.contains("| values changed in 1 of 2 tensors; largest rel\\_l2 "),
        "{summary}"
    );
    assert!(summary.contains("Values:"), "{summary}");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    let gguf = doc["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["new_path"] == "model.gguf");
    assert_eq!(gguf.unwrap()["values"]["changed"], 1, "{doc:#}");
    // Without --values the table keeps its columns.
    let out = repo.wi(&["ci", "--base", "HEAD~1", "--head", "HEAD", "--summary", "-"]);
    assert!(!stdout(&out).contains("Weights"), "{}", stdout(&out));
}

#[test]
fn the_action_script_passes_the_values_input() {
    let repo = two_versions();
    let summary = repo.path("../summary.md");
    let mut cmd = repo.command("bash");
    cmd.arg(common::repo_root().join("scripts/action/run.sh"))
        .env("WI_BIN", common::bin())
        .env("WI_BASE", "HEAD~1")
        .env("WI_VALUES", "true")
        .env("GITHUB_STEP_SUMMARY", &summary)
        .env("RUNNER_TEMP", repo.path(".."));
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = std::fs::read_to_string(&summary).unwrap();
    assert!(text.contains("| Weights |"), "{text}");
}
