//! SARIF 2.1.0 from `check --format sarif` and `ci --sarif FILE`: valid against the official
//! schema (the `jsonschema` package), equal to a reviewed snapshot, with fingerprints that stay
//! the same across runs and change when the model's structure does.

mod common;

use common::git::{MODEL_PATTERNS, Repo};
use common::models::gguf;
use common::{code, python, repo_root, stderr, stdout};
use serde_json::{Value, json};

const POLICY: &str = r#"
[[rules]]
paths = ["models/*.gguf"]
allowed_dtypes = ["f16", "f32"]
required_metadata = ["general.license"]

[[rules]]
paths = ["models/llm"]
max_parameters = 100

[[rules]]
paths = ["**/*.pt"]
forbid_formats = ["pickle"]
"#;

fn tensors() -> Value {
    json!([
        {"name": "embed.weight", "dtype": "float32", "shape": [16, 8], "fill": {"normal": 1}},
        {"name": "layers.0.weight", "dtype": "float16", "shape": [8, 8], "fill": {"normal": 2}},
        {"name": "norm.weight", "dtype": "float32", "shape": [8], "fill": 1.0}
    ])
}

/// A repository with a clean model, one with two bad dtypes and no license, a sharded model
/// over its parameter bound, a pickle, and a path that needs percent-encoding.
fn repo() -> Repo {
    let repo = Repo::with_lfs(MODEL_PATTERNS);
    repo.write(".weight-inspect.toml", POLICY);
    repo.fixtures(json!({
        "models/good.gguf": gguf(&["f16"], json!({"general.license": "mit"})),
        "models/bad.gguf": gguf(&["q4_k", "q8_0", "f16"], json!({})),
        "models/odd name#1.gguf": gguf(&["f32"], json!({})),
        "models/llm": {"kind": "sharded_safetensors", "max_shard_size": 600, "tensors": tensors()},
        "weights/evil.pt": {"kind": "torch_zip", "evil": true},
    }));
    repo.commit_all("models");
    repo
}

/// Validates `sarif` against the vendored official schema (formats checked too).
fn assert_valid(sarif: &str) {
    let schema = repo_root().join("tests/fixtures/sarif/sarif-schema-2.1.0.json");
    let script = r#"
import json, sys
import jsonschema
schema = json.load(open(sys.argv[1]))
log = json.load(sys.stdin)
validator = jsonschema.Draft7Validator(schema, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER)
errors = sorted(validator.iter_errors(log), key=lambda e: list(e.absolute_path))
for e in errors:
    print("/".join(map(str, e.absolute_path)), e.message)
sys.exit(1 if errors else 0)
"#;
    let mut child = std::process::Command::new(python())
        .args(["-c", script])
        .arg(&schema)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python runs");
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(sarif.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "SARIF invalid against the 2.1.0 schema (jsonschema is pinned in \
         scripts/requirements-test.txt):\n{}{}\n{sarif}",
        stdout(&out),
        stderr(&out)
    );
}

fn results(sarif: &str) -> Vec<Value> {
    let log: Value = serde_json::from_str(sarif).expect("SARIF is JSON");
    log["runs"][0]["results"].as_array().unwrap().clone()
}

/// (uri, rule, fingerprint) of every result.
fn fingerprints(sarif: &str) -> Vec<(String, String, String)> {
    results(sarif)
        .iter()
        .map(|r| {
            (
                r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
                r["ruleId"].as_str().unwrap().to_owned(),
                r["partialFingerprints"]["weightInspect/v1"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
            )
        })
        .collect()
}

fn check_sarif(repo: &Repo) -> String {
    let out = repo.wi(&["check", "--format", "sarif"]);
    assert_eq!(code(&out), 1, "{}{}", stdout(&out), stderr(&out));
    stdout(&out)
}

#[test]
fn check_writes_valid_sarif_matching_the_snapshot() {
    let repo = repo();
    let sarif = check_sarif(&repo);
    assert_valid(&sarif);

    let found = results(&sarif);
    let rule_of = |uri: &str, rule: &str| {
        found
            .iter()
            .find(|r| {
                r["ruleId"] == rule
                    && r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == uri
            })
            .unwrap_or_else(|| panic!("no {rule} result on {uri}:\n{sarif}"))
    };
    // One result per violation: two bad dtypes, two missing licenses, the model, the pickle
    // (its format, and its dangerous global).
    assert_eq!(found.len(), 7, "{sarif}");
    rule_of("models/odd%20name%231.gguf", "required_metadata");
    let q4 = rule_of("models/bad.gguf", "allowed_dtypes");
    assert_eq!(q4["level"], "error");
    assert_eq!(
        q4["locations"][0]["logicalLocations"][0]["kind"], "tensor",
        "{q4}"
    );
    let license = rule_of("models/bad.gguf", "required_metadata");
    assert_eq!(
        license["locations"][0]["logicalLocations"],
        json!([{"name": "general.license", "kind": "metadata"}])
    );
    // The model directory's result points at its index, a real file.
    let model = rule_of("models/llm/model.safetensors.index.json", "max_parameters");
    assert_eq!(model["properties"]["path"], "models/llm");
    rule_of("weights/evil.pt", "forbid_formats");
    let global = rule_of("weights/evil.pt", "pickle_globals");
    assert!(
        global["message"]["text"]
            .as_str()
            .unwrap()
            .contains("dangerous: "),
        "{global}"
    );
    // Every rule id is described in the driver, and each result's index points at its rule.
    let log: Value = serde_json::from_str(&sarif).unwrap();
    let rules = log["runs"][0]["tool"]["driver"]["rules"]
        .as_array()
        .unwrap();
    for r in &found {
        let index = r["ruleIndex"].as_u64().unwrap() as usize;
        assert_eq!(rules[index]["id"], r["ruleId"]);
        assert!(!rules[index]["help"]["text"].as_str().unwrap().is_empty());
    }
    assert_eq!(log["properties"]["schema"], 1);

    let snapshot = sarif.replace(&format!("\"{}\"", env!("CARGO_PKG_VERSION")), "\"VERSION\"");
    let path = repo_root().join("tests/fixtures/sarif/check.sarif");
    // Blessing writes the snapshot and fails: what the code under test wrote is never
    // compared with itself. The next run, without the variable, compares (after a review of
    // the file's diff).
    if std::env::var_os("WEIGHT_INSPECT_BLESS").is_some() {
        std::fs::write(&path, &snapshot).unwrap();
        panic!(
            "WEIGHT_INSPECT_BLESS: wrote {}; review its diff, then run again without it",
            path.display()
        );
    }
    let expected = std::fs::read_to_string(&path).expect("the snapshot exists");
    assert!(
        snapshot == expected,
        "check --format sarif differs from {} (WEIGHT_INSPECT_BLESS=1 rewrites it, and \
         fails; a run without it compares):\n{snapshot}",
        path.display()
    );
}

#[test]
fn fingerprints_are_stable_and_follow_a_real_change() {
    let repo = repo();
    let first = fingerprints(&check_sarif(&repo));
    let again = fingerprints(&check_sarif(&repo));
    assert_eq!(first, again);
    let unique: std::collections::BTreeSet<_> = first.iter().map(|(.., f)| f).collect();
    assert_eq!(unique.len(), first.len(), "{first:?}");

    // Re-quantize the bad model (q8_0 becomes q5_0): its results change fingerprints, the
    // others keep theirs.
    repo.fixtures(json!({"models/bad.gguf": gguf(&["q4_k", "q5_0", "f16"], json!({}))}));
    let changed = fingerprints(&check_sarif(&repo));
    assert_eq!(changed.len(), first.len());
    for ((uri, rule, before), (uri2, rule2, after)) in first.iter().zip(&changed) {
        assert_eq!((uri, rule), (uri2, rule2));
        if uri == "models/bad.gguf" {
            assert_ne!(before, after, "{uri} {rule}");
        } else {
            assert_eq!(before, after, "{uri} {rule}");
        }
    }
}

#[test]
fn ci_writes_sarif_of_the_head_side() {
    let repo = Repo::with_lfs(MODEL_PATTERNS);
    repo.write(".weight-inspect.toml", POLICY);
    repo.fixtures(json!({"models/good.gguf": gguf(&["f16"], json!({"general.license": "mit"}))}));
    repo.commit_all("base");
    repo.fixtures(json!({
        "models/bad.gguf": gguf(&["q4_k"], json!({"general.license": "mit"})),
        "models/llm": {"kind": "sharded_safetensors", "max_shard_size": 600, "tensors": tensors()},
    }));
    repo.commit_all("head");
    let sarif_path = repo.path("out/report.sarif");
    let out = repo.wi(&[
        "ci",
        "--base",
        "HEAD^",
        "--sarif",
        sarif_path.to_str().unwrap(),
    ]);
    assert_eq!(code(&out), 1, "{}{}", stdout(&out), stderr(&out));
    let sarif = std::fs::read_to_string(&sarif_path).expect("ci wrote the SARIF file");
    assert_valid(&sarif);
    let mut found: Vec<_> = fingerprints(&sarif)
        .into_iter()
        .map(|(uri, rule, _)| (uri, rule))
        .collect();
    found.sort();
    assert_eq!(
        found,
        [
            ("models/bad.gguf".to_owned(), "allowed_dtypes".to_owned()),
            (
                "models/llm/model.safetensors.index.json".to_owned(),
                "max_parameters".to_owned()
            ),
        ]
    );

    // With --fail-on never the results are warnings.
    let out = repo.wi(&[
        "ci",
        "--base",
        "HEAD^",
        "--fail-on",
        "never",
        "--sarif",
        sarif_path.to_str().unwrap(),
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let sarif = std::fs::read_to_string(&sarif_path).unwrap();
    assert!(results(&sarif).iter().all(|r| r["level"] == "warning"));
}

#[test]
fn a_model_directory_whose_files_do_not_fit_is_a_directory_location() {
    let repo = repo();
    // A new set of shards staged without the index that names them.
    let _ = std::fs::remove_dir_all(repo.path("models/llm"));
    repo.fixtures(json!({
        "models/llm": {"kind": "sharded_safetensors", "max_shard_size": 1100, "tensors": tensors()},
    }));
    repo.git(&["add", "models/llm/model-00001-of-00002.safetensors"]);
    let out = repo.wi(&["check", "--staged", "--format", "sarif", "models/llm"]);
    let sarif = stdout(&out);
    assert_eq!(code(&out), 1, "{sarif}{}", stderr(&out));
    assert_valid(&sarif);
    let found = results(&sarif);
    assert_eq!(found.len(), 1, "{sarif}");
    assert_eq!(found[0]["ruleId"], "model_files");
    let location = &found[0]["locations"][0]["physicalLocation"];
    assert_eq!(location["artifactLocation"]["uri"], "models/llm/");
    assert!(location.get("region").is_none(), "{location}");
}

#[test]
fn a_file_that_cannot_be_checked_is_a_tool_notification() {
    let repo = repo();
    let oid = "4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393";
    let pointer =
        format!("version https://git-lfs.github.com/spec/v1\noid sha256:{oid}\nsize 12345\n");
    repo.write("models/absent.gguf", &pointer);
    repo.git(&["add", "models/absent.gguf"]);
    let out = repo.wi(&["check", "--staged", "--all", "--format", "sarif"]);
    // An error (exit 2), the SARIF on stdout all the same, the error on stderr too.
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("models/absent.gguf: the LFS object"),
        "{}",
        stderr(&out)
    );
    let sarif = stdout(&out);
    assert_valid(&sarif);
    let log: Value = serde_json::from_str(&sarif).unwrap();
    let invocation = &log["runs"][0]["invocations"][0];
    assert_eq!(invocation["executionSuccessful"], false);
    let note = &invocation["toolExecutionNotifications"][0];
    assert_eq!(note["level"], "error");
    assert!(
        note["message"]["text"]
            .as_str()
            .unwrap()
            .starts_with("cannot check: models/absent.gguf: the LFS object"),
        "{note}"
    );
    assert_eq!(
        note["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
        "models/absent.gguf"
    );
    // The violations of the other files are still results.
    assert_eq!(results(&sarif).len(), 7);
}
