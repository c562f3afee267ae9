//! `weight-inspect ci` on training checkpoints, in temporary repositories with real git: the
//! job summary, the log, the annotations and SARIF label a checkpoint's model identity and
//! what changed group by group (model weights apart from optimizer state), so that a new step
//! of the same run reads apart from another model. Fixtures: Lightning's own
//! `Trainer.save_checkpoint` (scripts/make_training_checkpoints.py).

mod common;

use std::path::{Path, PathBuf};

use common::git::Repo;
use common::{assert_contains, assert_lacks, code, combined};
use serde_json::Value;

fn training(name: &str) -> PathBuf {
    common::fixture("pytorch/training").join(name)
}

/// The model identity of both Lightning steps (`id --json`'s `model_identity`), and of the
/// LightningModule holding the Llama.
const RUN: &str = "b24ba64b64f8cc14c725213f6409a2a022da04c3f7aa841b9a4b117fabc971fa";
const LLAMA: &str = "bd06ba125f7f066db40bb85f39040626c38fa0218f72a4010dfb0b625e86fc8e";

/// main: runs/last.ckpt at step 2 and a policy pinning the run's model identity; branch pr:
/// last.ckpt at step 3 (same model), runs/other.ckpt another model, runs/plain.pt a state dict
/// inside `{"model": …}` with a payload nested in it.
fn run_repo() -> Repo {
    let repo = Repo::new();
    repo.write(
        ".weight-inspect.toml",
        format!("[[rules]]\npaths = [\"runs/**\"]\nexpected_model_identity = \"{RUN}\"\n"),
    );
    std::fs::create_dir_all(repo.path("runs")).unwrap();
    std::fs::copy(
        training("lightning-step2.ckpt"),
        repo.path("runs/last.ckpt"),
    )
    .unwrap();
    repo.commit_all("step 2");
    repo.git(&["checkout", "-q", "-b", "pr"]);
    std::fs::copy(
        training("lightning-step3.ckpt"),
        repo.path("runs/last.ckpt"),
    )
    .unwrap();
    std::fs::copy(
        training("lightning-llama.ckpt"),
        repo.path("runs/other.ckpt"),
    )
    .unwrap();
    std::fs::copy(
        common::fixture("pytorch/malicious/nested-p4.pt"),
        repo.path("runs/plain.pt"),
    )
    .unwrap();
    repo.commit_all("step 3, another model, a payload");
    repo
}

/// Parses the `::error file=F,title=T::MESSAGE` lines of a log: (file, title, message).
fn error_commands(log: &str) -> Vec<(String, String, String)> {
    log.lines()
        .filter_map(|l| l.strip_prefix("::error "))
        .map(|rest| {
            let (props, message) = rest.split_once("::").unwrap();
            let prop = |k: &str| {
                props
                    .split(',')
                    .find_map(|p| p.strip_prefix(&format!("{k}=")))
                    .unwrap_or_default()
                    .replace("%3A", ":")
                    .replace("%2C", ",")
                    .replace("%25", "%")
            };
            (prop("file"), prop("title"), message.replace("%25", "%"))
        })
        .collect()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn ci_labels_a_training_checkpoint_s_groups_and_model_identity() {
    let repo = run_repo();
    let out = tempfile::tempdir().unwrap();
    let (summary, sarif) = (
        out.path().join("summary.md"),
        out.path().join("report.sarif"),
    );
    let (json, html) = (
        out.path().join("report.json"),
        out.path().join("report.html"),
    );
    let run = repo.wi(&[
        "ci",
        "--base",
        "main",
        "--annotations",
        "--values",
        "--summary",
        summary.to_str().unwrap(),
        "--sarif",
        sarif.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    let log = combined(&run);
    assert_eq!(code(&run), 1, "{log}");
    let step = "model identity b24ba64b64f8 (unchanged); model weights changed (values 2 of 2); \
                optimizer state changed (values 6 of 6); scheduler state unchanged; other \
                changed (metadata +0 −0 ~29)";
    let other = "model identity bd06ba125f7f; groups: model weights, optimizer state, scheduler \
                 state, other";

    // The summary: a table of the training checkpoints; a state dict is not one.
    let summary = read(&summary);
    assert_contains(
        &summary,
        &[
            "\n### Training checkpoints\n",
            "| File | Model identity and groups |\n| --- | --- |\n",
            &format!("| `runs/last.ckpt` | {} |\n", step.replace('~', "\\~")),
            &format!("| `runs/other.ckpt` | {other} |\n"),
        ],
    );
    assert_lacks(&summary, &["| `runs/plain.pt` | groups"]);

    // The log line of each file, then the annotations: the run's next step passes; the other
    // model's violation carries its label; the payload's tier shows.
    assert_contains(
        &log,
        &[&format!(
            "runs/last.ckpt  pytorch  2c8e57bc1fa3 -> 7cbf4c6f4a09  tensors +0 −0 ~0, metadata +0 −0 ~29\n          training checkpoint: {step}\n"
        )],
    );
    let errors = error_commands(&common::stdout(&run));
    let of = |file: &str| -> Vec<&(String, String, String)> {
        errors.iter().filter(|e| e.0 == file).collect()
    };
    assert!(of("runs/last.ckpt").is_empty(), "{errors:?}");
    let [(_, title, message)] = of("runs/other.ckpt")[..] else {
        panic!("{errors:?}")
    };
    assert_eq!(title, "weight-inspect: expected_model_identity");
    assert_eq!(
        message,
        &format!(
            "expected {RUN}; found {LLAMA} (.weight-inspect.toml:1) (training checkpoint: {other})"
        )
    );
    let plain = of("runs/plain.pt");
    assert!(
        plain.iter().any(|e| e.1 == "weight-inspect: pickle_globals"
            && e.2.contains("found dangerous: posix.system")
            && !e.2.contains("training checkpoint")),
        "{errors:?}"
    );

    // SARIF: the other model's result names its model identity and groups.
    let sarif: Value = serde_json::from_str(&read(&sarif)).unwrap();
    let results = sarif["runs"][0]["results"].as_array().unwrap();
    let result = results
        .iter()
        .find(|r| r["properties"]["path"] == "runs/other.ckpt")
        .unwrap_or_else(|| panic!("{sarif}"));
    assert_eq!(result["ruleId"], "expected_model_identity");
    assert_eq!(result["properties"]["modelIdentity"], LLAMA);
    assert_eq!(
        result["properties"]["trainingGroups"],
        serde_json::json!(["model", "optimizer", "other", "scheduler"])
    );
    assert!(
        result["message"]["text"]
            .as_str()
            .unwrap()
            .ends_with("[a training checkpoint: model identity bd06ba125f7f, groups model, optimizer, other, scheduler]"),
        "{result}"
    );
    let payload = results
        .iter()
        .find(|r| r["ruleId"] == "pickle_globals")
        .unwrap_or_else(|| panic!("{sarif}"));
    assert!(
        payload["properties"].get("modelIdentity").is_none(),
        "{payload}"
    );
    assert_contains(
        payload["message"]["text"].as_str().unwrap(),
        &["dangerous: posix.system"],
    );

    // The JSON report's values and the HTML page sum the step's changes up group by group.
    let report: Value = serde_json::from_str(&read(&json)).unwrap();
    let last = report["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["new_path"] == "runs/last.ckpt")
        .unwrap_or_else(|| panic!("{report}"));
    let groups: Vec<(&str, u64, u64)> = last["values"]["groups"]
        .as_array()
        .unwrap_or_else(|| panic!("{last}"))
        .iter()
        .map(|g| {
            (
                g["group"].as_str().unwrap(),
                g["compared"].as_u64().unwrap(),
                g["changed"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(groups, [("model", 2, 2), ("optimizer", 6, 6)]);
    assert_contains(
        &read(&html),
        &[
            "<h3>By group</h3>",
            "<th class=\"name\">model weights</th><td>2</td><td>2</td><td>0</td><td>0.0257</td>",
        ],
    );

    // With --fail-on change, each changed checkpoint's annotation carries its label; without
    // --values the structure alone says what changed.
    let run = repo.wi(&[
        "ci",
        "--base",
        "main",
        "--annotations",
        "--fail-on",
        "change",
    ]);
    let errors = error_commands(&common::stdout(&run));
    let change = errors
        .iter()
        .find(|e| e.0 == "runs/last.ckpt")
        .unwrap_or_else(|| panic!("{errors:?}"));
    assert_eq!(change.1, "weight-inspect: model modified");
    assert_contains(
        &change.2,
        &[
            "; training checkpoint: model identity b24ba64b64f8 (unchanged); model weights: structure unchanged; optimizer state: structure unchanged; scheduler state: structure unchanged; other changed (metadata +0 −0 ~29); --fail-on change",
        ],
    );
}
