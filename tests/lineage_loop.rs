//! The relation in the loop: `git diff --values` and `ci --values` say how a replaced model
//! relates to the one before it (a fine-tune, or an unrelated model swapped in).

mod common;

use common::git::Repo;
use common::{code, repo_root, stderr, stdout};
use serde_json::Value;

/// model/model.safetensors in LFS: the base, then its fine-tune, then a model trained apart.
fn history() -> Repo {
    let repo = Repo::with_lfs(&["*.safetensors"]);
    std::fs::create_dir_all(repo.path("model")).unwrap();
    for (name, message) in [
        ("base", "base"),
        ("ft-a", "fine-tune"),
        ("independent", "swap"),
    ] {
        let from = repo_root().join("tests/fixtures/lineage").join(name);
        std::fs::copy(
            from.join("model.safetensors"),
            repo.path("model/model.safetensors"),
        )
        .unwrap();
        repo.commit_all(message);
    }
    repo
}

#[test]
fn git_diff_values_names_the_relation() {
    let repo = history();
    let out = repo.wi(&["git", "diff", "--values", "HEAD~2", "HEAD~1"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("relation: fine-tune of the old side: 42 of 42 tensors moved"),
        "{text}"
    );
    let out = repo.wi(&["git", "diff", "--values", "--json", "HEAD~1", "HEAD"]);
    let doc: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let relation = &doc["files"][0]["relation"];
    assert_eq!(relation["relation"], "unrelated", "{doc:#}");
    assert!(relation["base_model_relation"].is_null());
    assert_eq!(relation["evidence"]["by"], "values");
    let out = repo.wi(&["git", "diff", "--values", "--json", "HEAD~2", "HEAD~1"]);
    let doc: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(
        doc["files"][0]["relation"]["base_model_relation"],
        "finetune"
    );
}

#[test]
fn the_ci_summary_says_how_the_new_model_relates_to_the_base() {
    let repo = history();
    let out = repo.wi(&[
        "ci",
        "--base",
        "HEAD~2",
        "--head",
        "HEAD~1",
        "--values",
        "--summary",
        "-",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let summary = stdout(&out);
    assert!(
        summary.contains("fine-tune of the base: 42 of 42 tensors moved"),
        "{summary}"
    );
    let out = repo.wi(&[
        "ci",
        "--base",
        "HEAD~1",
        "--head",
        "HEAD",
        "--values",
        "--summary",
        "-",
    ]);
    let summary = stdout(&out);
    assert!(
        summary.contains("unrelated to the base: values uncorrelated"),
        "{summary}"
    );
}

/// The Action's `bom` input: run.sh writes the JSON report, bom.sh the BOM of the changed
/// model with its base version as an ancestor, and names it in the step outputs.
#[test]
fn the_action_writes_the_bom_of_the_changed_models() {
    let repo = history();
    let temp = repo.path("..");
    let outputs = temp.join("outputs.txt");
    let mut cmd = repo.command("bash");
    cmd.arg(repo_root().join("scripts/action/run.sh"))
        .env("WI_BIN", common::bin())
        .env("WI_BASE", "HEAD~2")
        .env("WI_HEAD", "HEAD~1")
        .env("GITHUB_OUTPUT", &outputs)
        .env("RUNNER_TEMP", &temp);
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let report = std::fs::read_to_string(&outputs)
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("report=").map(str::to_owned))
        .expect("report output");
    let mut cmd = repo.command("bash");
    cmd.arg(repo_root().join("scripts/action/bom.sh"))
        .env("WI_BIN", common::bin())
        .env("WI_BASE", "HEAD~2")
        .env("WI_HEAD", "HEAD~1")
        .env("WI_BOM", "model-bom.cdx.json")
        .env("WI_REPORT", &report)
        .env("GITHUB_OUTPUT", &outputs);
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let written = std::fs::read_to_string(&outputs).unwrap();
    let bom_path = written
        .lines()
        .find_map(|l| l.strip_prefix("bom="))
        .expect("bom output");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(bom_path).unwrap()).unwrap();
    let model = &doc["components"][0];
    assert_eq!(model["name"], "model.safetensors");
    assert_eq!(
        model["hashes"][0]["content"],
        repo.lfs_oid("HEAD~1", "model/model.safetensors")
    );
    let ancestor = &model["pedigree"]["ancestors"][0];
    let relation = ancestor["properties"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "weight-inspect:relation")
        .unwrap();
    assert_eq!(relation["value"], "fine-tune");
}

/// `relation = ["quantized"]` with `reference`: a folder of quantizations of one model, where
/// a swapped-in unrelated model fails the check and names what it is.
#[test]
fn a_policy_requires_a_relation_to_the_reference() {
    let repo = Repo::new();
    let fixtures = repo_root().join("tests/fixtures/lineage");
    for (from, to) in [
        ("base/model.safetensors", "base/model.safetensors"),
        ("f16/model.safetensors", "quants/f16.safetensors"),
    ] {
        std::fs::create_dir_all(repo.path(to).parent().unwrap()).unwrap();
        std::fs::copy(fixtures.join(from), repo.path(to)).unwrap();
    }
    repo.write(
        ".weight-inspect.toml",
        "[[rules]]\npaths = [\"quants/*.safetensors\"]\nreference = \"../base/model.safetensors\"\nrelation = [\"quantized\"]\n",
    );
    let out = repo.wi(&["check", "quants/f16.safetensors"]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    std::fs::copy(
        fixtures.join("independent/model.safetensors"),
        repo.path("quants/swapped.safetensors"),
    )
    .unwrap();
    let out = repo.wi(&["check", "--format", "json", "quants/swapped.safetensors"]);
    assert_eq!(code(&out), 1, "{}{}", stdout(&out), stderr(&out));
    let doc: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let v = &doc["violations"][0];
    assert_eq!(v["rule"], "relation", "{doc:#}");
    assert!(
        v["found"]
            .as_str()
            .unwrap()
            .contains("unrelated to base/model.safetensors"),
        "{doc:#}"
    );
    // An unknown relation is refused when the policy is read.
    repo.write(
        ".weight-inspect.toml",
        "[[rules]]\npaths = [\"quants/*.safetensors\"]\nreference = \"../base/model.safetensors\"\nrelation = [\"quantised\"]\n",
    );
    let out = repo.wi(&["check", "quants/f16.safetensors"]);
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).contains("unknown relation"),
        "{}",
        stderr(&out)
    );
}
