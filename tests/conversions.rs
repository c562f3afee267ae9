//! Conversions compared by value: GGUF files made by llama.cpp's own convert_hf_to_gguf.py and
//! llama-quantize (committed with their generator, tests/fixtures/conversions/manifest.json)
//! against the Hugging Face / PyTorch models they were made from, checked pair by pair against
//! an independent numpy reference over gguf-py (scripts/conversion_reference.py).

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::{python, repo_root, run, stdout};
use serde_json::Value;

fn conversions_dir() -> std::path::PathBuf {
    repo_root().join("tests/fixtures/conversions")
}

fn manifest() -> Vec<Value> {
    let text = std::fs::read_to_string(conversions_dir().join("manifest.json")).unwrap();
    let doc: Value = serde_json::from_str(&text).unwrap();
    doc["conversions"].as_array().unwrap().clone()
}

fn report(source: &Path, gguf: &Path, extra: &[&str]) -> (Value, i32) {
    let mut args = vec![
        "diff",
        "--values",
        "--json",
        source.to_str().unwrap(),
        gguf.to_str().unwrap(),
    ];
    args.extend(extra);
    let out = run(&args);
    let code = out.status.code().unwrap_or(-1);
    assert!(
        code == 0 || code == 1,
        "weight-inspect {args:?} exited {code}: {}",
        common::stderr(&out)
    );
    let doc: Value = serde_json::from_str(&stdout(&out)).expect("JSON output");
    assert_eq!(doc["schema"], 1);
    (doc["conversion"].clone(), code)
}

fn reference(source: &Path, gguf: &Path) -> Value {
    let out = common::run_python(
        "conversion_reference.py",
        &[source.to_str().unwrap(), gguf.to_str().unwrap()],
    );
    serde_json::from_slice(&out.stdout).expect("reference JSON")
}

/// Equal to 1e-6 relative (absolute below 1e-12).
fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * a.abs().max(b.abs()) || (a - b).abs() < 1e-12
}

fn names(values: &Value) -> Vec<String> {
    let mut v: Vec<String> = values
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap().to_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn every_conversion_matches_the_numpy_reference() {
    let _ = python();
    for conversion in manifest() {
        let gguf_name = conversion["gguf"].as_str().unwrap();
        let gguf = conversions_dir().join(gguf_name);
        let source = conversions_dir().join(conversion["source"].as_str().unwrap());
        let reference_source =
            conversions_dir().join(conversion["reference_source"].as_str().unwrap());
        let (ours, _) = report(&source, &gguf, &[]);
        let theirs = reference(&reference_source, &gguf);

        assert_eq!(
            ours["paired_by"]["architecture"], theirs["architecture"],
            "{gguf_name}"
        );
        let ours_pairs: BTreeMap<String, &Value> = ours["pairs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| (p["target"].as_str().unwrap().to_owned(), p))
            .collect();
        let their_pairs = theirs["pairs"].as_array().unwrap();
        assert_eq!(
            ours_pairs.keys().cloned().collect::<Vec<_>>(),
            their_pairs
                .iter()
                .map(|p| p["target"].as_str().unwrap().to_owned())
                .collect::<Vec<_>>(),
            "{gguf_name}: paired GGUF tensors"
        );
        for t in their_pairs {
            let target = t["target"].as_str().unwrap();
            let o = ours_pairs[target];
            let what = format!("{gguf_name}: {target}");
            assert_eq!(o["sources"], t["source"], "{what}: sources");
            assert_eq!(o["transform"], t["transform"], "{what}: transform");
            assert_eq!(
                o["target_dtype"].as_str().unwrap().to_uppercase(),
                t["target_type"].as_str().unwrap(),
                "{what}: dtype"
            );
            assert_eq!(o["elements"], t["elements"], "{what}: elements");
            assert_eq!(
                o["changed_elements"], t["changed_elements"],
                "{what}: changed elements"
            );
            assert_eq!(
                o["nonfinite_elements"], t["nonfinite_elements"],
                "{what}: non-finite elements"
            );
            for figure in ["max_abs_diff", "rel_l2", "cosine"] {
                let (a, b) = (o[figure].as_f64(), t[figure].as_f64());
                match (a, b) {
                    (Some(a), Some(b)) => {
                        assert!(close(a, b), "{what}: {figure} {a} vs reference {b}");
                    }
                    _ => assert_eq!(a, b, "{what}: {figure}"),
                }
            }
        }
        let dropped: Vec<String> = ours["dropped"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["source"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(
            dropped,
            names(&theirs["unpaired_source"]),
            "{gguf_name}: dropped source tensors"
        );
        assert_eq!(
            names(&ours["added"]),
            names(&theirs["unpaired_target"]),
            "{gguf_name}: added GGUF tensors"
        );
        assert_eq!(
            ours["not_compared"].as_array().unwrap().len(),
            0,
            "{gguf_name}: {}",
            ours["not_compared"]
        );
    }
}

#[test]
fn lossless_conversions_report_every_tensor_identical() {
    let mut ran = 0;
    for conversion in manifest() {
        if conversion["reference_check"] != "every pair has changed_elements 0" {
            continue;
        }
        ran += 1;
        let gguf_name = conversion["gguf"].as_str().unwrap();
        let gguf = conversions_dir().join(gguf_name);
        let source = conversions_dir().join(conversion["source"].as_str().unwrap());
        let (ours, code) = report(&source, &gguf, &[]);
        assert_eq!(ours["faithful"], true, "{gguf_name}: {}", ours["summary"]);
        assert_eq!(ours["identical"], ours["compared"], "{gguf_name}");
        assert!(ours["compared"].as_u64().unwrap() > 0);
        // Exit 1 only for the tensors the converter left out (XLM-R's pooler).
        let dropped = ours["dropped"].as_array().unwrap().len();
        assert_eq!(code, i32::from(dropped > 0), "{gguf_name}: exit status");
    }
    // The manifest's lossless conversions (a filter that matched none would pass otherwise).
    assert_eq!(ran, 6, "lossless conversions checked");
}

#[test]
fn a_wrong_permutation_is_caught_and_named() {
    let dir = conversions_dir();
    let (ours, code) = report(
        &dir.join("llama"),
        &dir.join("llama-f32-attn_q-not-permuted.gguf"),
        &[],
    );
    assert_eq!(code, 1);
    assert_eq!(ours["faithful"], false, "{}", ours["summary"]);
    assert_eq!(ours["suspect"], 1);
    let suspect: Vec<&Value> = ours["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| !p["suspect"].is_null())
        .collect();
    assert_eq!(suspect.len(), 1);
    assert_eq!(suspect[0]["target"], "blk.0.attn_q.weight");
    let why = suspect[0]["suspect"].as_str().unwrap();
    assert!(why.contains("Q/K head permutation is wrong"), "{why}");
    assert!(why.contains("(rel_l2 0)"), "{why}");

    let out = run(&[
        "diff",
        "--values",
        dir.join("llama").to_str().unwrap(),
        dir.join("llama-f32-attn_q-not-permuted.gguf")
            .to_str()
            .unwrap(),
    ]);
    let text = stdout(&out);
    assert!(text.contains("NOT faithful"), "{text}");
    assert!(
        text.contains("blk.0.attn_q.weight: the Q/K head permutation is wrong"),
        "{text}"
    );
}

#[test]
fn a_quantized_conversion_is_faithful_and_reports_its_error() {
    let dir = conversions_dir();
    let (ours, code) = report(&dir.join("llama"), &dir.join("llama-q4_1.gguf"), &[]);
    assert_eq!(code, 1, "values changed");
    assert_eq!(ours["faithful"], true, "{}", ours["summary"]);
    let summary = ours["summary"].as_str().unwrap();
    assert!(
        summary.starts_with(
            "faithful: 21/21 source tensors paired, identical in 5, error rel_l2 median"
        ),
        "{summary}"
    );
    assert!(summary.contains("(q4_1)"), "{summary}");
    // Either order of the arguments: the source is the side that is not GGUF.
    let (swapped, _) = report(&dir.join("llama-q4_1.gguf"), &dir.join("llama"), &[]);
    assert_eq!(swapped["pairs"], ours["pairs"]);
    // The per-layer view covers both blocks.
    let layers: Vec<&str> = ours["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["layer"].as_str().unwrap())
        .collect();
    assert_eq!(layers, ["blk.0", "blk.1"]);
}

#[test]
fn the_configuration_is_checked_where_the_converter_writes_it() {
    let dir = conversions_dir();
    let (ours, _) = report(
        &dir.join("xlm-roberta"),
        &dir.join("xlm-roberta-f32.gguf"),
        &[],
    );
    let checks = ours["metadata"]["checks"].as_array().unwrap();
    let get = |key: &str| {
        checks
            .iter()
            .find(|c| c["config_key"] == key)
            .unwrap_or_else(|| panic!("{key} not checked: {checks:?}"))
    };
    assert_eq!(get("num_hidden_layers")["equal"], true);
    assert_eq!(get("hidden_size")["gguf_key"], "bert.embedding_length");
    // RoBERTa's positions start after the padding: the converter writes 2 fewer.
    let positions = get("max_position_embeddings");
    assert_eq!(positions["equal"], false);
    assert_eq!(positions["source"], "40");
    assert_eq!(positions["target"], "38");
    assert!(
        ours["metadata"]["not_checked"]
            .as_str()
            .unwrap()
            .contains("tokenizer contents")
    );
}

#[test]
fn map_none_pairs_by_names_only() {
    let dir = conversions_dir();
    let (ours, _) = report(
        &dir.join("llama"),
        &dir.join("llama-f32.gguf"),
        &["--map", "none"],
    );
    assert!(ours.is_null(), "a plain value diff, no conversion report");
    let out = run(&[
        "diff",
        "--values",
        "--map",
        "none",
        dir.join("llama").to_str().unwrap(),
        dir.join("llama-f32.gguf").to_str().unwrap(),
    ]);
    assert!(
        stdout(&out).contains("values identical in all 0 compared tensors"),
        "{}",
        stdout(&out)
    );
}

/// Two safetensors files written by the safetensors package: the second holds the first's
/// tensors under other names, one transposed and one with its rows permuted per head.
#[test]
fn map_rules_rename_transpose_and_permute() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (
        tmp.path().join("a.safetensors"),
        tmp.path().join("b.safetensors"),
    );
    let script = r#"
import sys, numpy as np
from safetensors.numpy import save_file
rng = np.random.default_rng(7)
w = rng.standard_normal((8, 6)).astype(np.float32)
q = rng.standard_normal((16, 4)).astype(np.float32)
n = rng.standard_normal((6,)).astype(np.float32)
def permute(x, heads):
    return x.reshape(heads, 2, x.shape[0] // heads // 2, *x.shape[1:]).swapaxes(1, 2).reshape(x.shape)
save_file({"double_blocks.0.proj": w, "double_blocks.0.q": q, "norm": n}, sys.argv[1])
save_file({"transformer.0.proj_t": np.ascontiguousarray(w.T), "transformer.0.q": permute(q, 2),
           "final_norm": n}, sys.argv[2])
"#;
    let out = std::process::Command::new(python())
        .args(["-c", script, a.to_str().unwrap(), b.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::stderr(&out));
    let map = tmp.path().join("map.toml");
    std::fs::write(
        &map,
        r"
[[rule]]
from = 'double_blocks\.(\d+)\.proj'
to = 'transformer.$1.proj_t'
transpose = true

[[rule]]
from = 'double_blocks\.(\d+)\.q'
to = 'transformer.$1.q'
permute_heads = 2

[[rule]]
from = 'norm'
to = 'final_norm'
",
    )
    .unwrap();
    let (ours, code) = report(&a, &b, &["--map", map.to_str().unwrap()]);
    assert_eq!(code, 0, "{}", ours["summary"]);
    assert_eq!(ours["paired_by"]["method"], "names");
    assert_eq!(ours["compared"], 3);
    assert_eq!(ours["identical"], 3, "{}", ours["pairs"]);
    let transforms: Vec<&str> = ours["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["transform"].as_str().unwrap())
        .collect();
    assert_eq!(
        transforms,
        ["final_norm", "transformer.0.proj_t", "transformer.0.q"].map(|t| {
            match t {
                "final_norm" => "identity",
                "transformer.0.proj_t" => "transpose",
                _ => "permute_qk",
            }
        })
    );

    // Without the rules nothing pairs: the names differ.
    let out = run(&["diff", "--values", a.to_str().unwrap(), b.to_str().unwrap()]);
    assert!(stdout(&out).contains("values identical in all 0 compared tensors"));

    // A rule that does not fit the shapes is reported, not compared.
    std::fs::write(
        &map,
        "[[rule]]\nfrom = 'double_blocks\\.0\\.proj'\nto = 'transformer.0.proj_t'\n",
    )
    .unwrap();
    let (ours, code) = report(&a, &b, &["--map", map.to_str().unwrap()]);
    assert_eq!(code, 1);
    let not = ours["not_compared"].as_array().unwrap();
    assert_eq!(not.len(), 1, "{not:?}");
    assert!(
        not[0]["why"].as_str().unwrap().contains("[8, 6] → [6, 8]"),
        "{not:?}"
    );
}

#[test]
fn a_bad_map_file_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let map = tmp.path().join("map.toml");
    std::fs::write(&map, "[[rule]]\nfrom = '('\nto = 'x'\n").unwrap();
    let dir = conversions_dir();
    let out = run(&[
        "diff",
        "--values",
        "--map",
        map.to_str().unwrap(),
        dir.join("llama").to_str().unwrap(),
        dir.join("llama-f32.gguf").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = common::stderr(&out);
    assert!(
        err.contains("map.toml: rule 1: `from` is not a regular expression"),
        "{err}"
    );
    let out = run(&[
        "diff",
        "--map",
        "none",
        dir.join("llama").to_str().unwrap(),
        dir.join("llama-f32.gguf").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2), "--map needs --values");
}

#[test]
fn the_name_table_is_what_the_generator_writes() {
    let out = common::run_python("gen_tensor_names.py", &[]);
    let committed =
        std::fs::read_to_string(repo_root().join("src/conversion/names_table.rs")).unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout) == committed,
        "src/conversion/names_table.rs differs from scripts/gen_tensor_names.py's output"
    );
}

/// The converter table is what the extractor reads from the vendored, pinned converter source.
#[test]
fn the_converter_table_is_what_the_extractor_writes() {
    let out = common::run_python("gen_conversion_transforms.py", &[]);
    assert!(out.status.success(), "{}", common::stderr(&out));
    let committed =
        std::fs::read_to_string(repo_root().join("src/conversion/converter_table.rs")).unwrap();
    let generated = String::from_utf8_lossy(&out.stdout);
    assert!(
        generated.matches("Converter { arch: ").count() > 100,
        "{generated}"
    );
    assert!(
        generated == committed,
        "src/conversion/converter_table.rs differs from scripts/gen_conversion_transforms.py's output"
    );
}

mod in_git {
    use super::*;
    use common::git::Repo;

    fn copy(repo: &Repo, from: &str, to: &str) {
        let target = repo.path(to);
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::copy(conversions_dir().join(from), target).unwrap();
    }

    /// main: models/ holds the Hugging Face model (config.json, model.safetensors) and its f32
    /// GGUF, all in LFS; branch pr: the GGUF re-converted as q4_1.
    fn repo_with_a_conversion() -> Repo {
        let repo = Repo::with_lfs(&["*.gguf", "*.safetensors"]);
        copy(&repo, "llama/model.safetensors", "models/model.safetensors");
        copy(&repo, "llama/config.json", "models/config.json");
        copy(&repo, "llama-f32.gguf", "models/model.gguf");
        repo.git(&["add", "."]);
        repo.git(&["commit", "-q", "-m", "base"]);
        repo.git(&["checkout", "-q", "-b", "pr"]);
        copy(&repo, "llama-q4_1.gguf", "models/model.gguf");
        repo.git(&["add", "."]);
        repo.git(&["commit", "-q", "-m", "q4_1"]);
        repo
    }

    #[test]
    fn git_diff_compares_a_changed_gguf_with_its_reference() {
        let repo = repo_with_a_conversion();
        let out = repo.wi(&[
            "git",
            "diff",
            "--values",
            "--reference",
            "models/model.safetensors",
            "main",
            "pr",
        ]);
        let text = stdout(&out);
        assert!(out.status.success(), "{}", common::stderr(&out));
        assert!(
            text.contains("Conversion: models/model.safetensors → models/model.gguf"),
            "{text}"
        );
        assert!(
            text.contains("faithful: 21/21 source tensors paired, identical in 5"),
            "{text}"
        );
        assert!(text.contains("(q4_1)"), "{text}");

        let out = repo.wi(&[
            "git",
            "diff",
            "--json",
            "--values",
            "--reference",
            "models/model.safetensors",
            "main",
            "pr",
        ]);
        let doc: Value = serde_json::from_str(&stdout(&out)).unwrap();
        let file = &doc["files"][0];
        assert_eq!(file["new_path"], "models/model.gguf");
        assert_eq!(file["conversion"]["faithful"], true);
        assert_eq!(file["conversion"]["source"], "models/model.safetensors");
        assert_eq!(file["conversion"]["compared"], 21);

        // In the work tree: the wrongly permuted file is caught.
        copy(
            &repo,
            "llama-f32-attn_q-not-permuted.gguf",
            "models/model.gguf",
        );
        let out = repo.wi(&[
            "git",
            "diff",
            "--values",
            "--reference",
            "models/model.safetensors",
        ]);
        let text = stdout(&out);
        assert!(text.contains("NOT faithful"), "{text}");
        assert!(text.contains("blk.0.attn_q.weight: the Q/K head permutation is wrong"));

        // A reference that is not there is said, not fatal.
        let out = repo.wi(&[
            "git",
            "diff",
            "--values",
            "--reference",
            "models/nope.safetensors",
        ]);
        assert!(out.status.success());
        assert!(
            stdout(&out).contains("not compared with the reference: the reference models/nope.safetensors is not a file in the work tree"),
            "{}",
            stdout(&out)
        );
    }

    #[test]
    fn ci_summarizes_the_conversion_in_the_weights_column() {
        let repo = repo_with_a_conversion();
        let json = repo.path("report.json");
        let summary = repo.path("summary.md");
        let out = repo.wi(&[
            "ci",
            "--summary",
            summary.to_str().unwrap(),
            "--base",
            "main",
            "--head",
            "pr",
            "--values",
            "--reference",
            "models/model.safetensors",
            "--json",
            json.to_str().unwrap(),
        ]);
        assert_eq!(out.status.code(), Some(0), "{}", common::stderr(&out));
        let summary = std::fs::read_to_string(&summary).unwrap();
        assert!(
            summary.contains(
                "conversion of models/model.safetensors: faithful: 21/21 source tensors paired"
            ),
            "{summary}"
        );
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        assert_eq!(doc["files"][0]["conversion"]["faithful"], true, "{doc}");
    }

    #[test]
    fn the_action_script_passes_the_reference_input() {
        let repo = repo_with_a_conversion();
        let summary = repo.path("../summary.md");
        let mut cmd = repo.command("bash");
        cmd.arg(repo_root().join("scripts/action/run.sh"))
            .env("WI_BIN", common::bin())
            .env("WI_BASE", "main")
            .env("WI_VALUES", "true")
            .env("WI_REFERENCE", "models/model.safetensors")
            .env("GITHUB_STEP_SUMMARY", &summary)
            .env("RUNNER_TEMP", repo.path(".."));
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{}", common::stderr(&out));
        let text = std::fs::read_to_string(&summary).unwrap();
        assert!(
            text.contains("conversion of models/model.safetensors: faithful"),
            "{text}"
        );
    }

    const POLICY: &str = r#"[[rules]]
paths = ["models/*.gguf"]
reference = "model.safetensors"
max_rel_l2 = 0.02
"#;

    #[test]
    fn a_policy_bounds_the_conversion_error_per_tensor() {
        let repo = repo_with_a_conversion();
        repo.write(".weight-inspect.toml", POLICY);
        // q4_1 loses ~8 % per tensor: every quantized tensor is named with its figure.
        let out = repo.wi(&["check", "models/model.gguf"]);
        assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
        let text = stdout(&out);
        assert!(text.contains("max_rel_l2"), "{text}");
        assert!(text.contains("blk.0.attn_k.weight: rel_l2 0.08"), "{text}");
        // output.weight stays q6_k: within the bound; the other 15 are not.
        let named = text
            .lines()
            .filter(|l| l.contains(": max_rel_l2: "))
            .count();
        assert_eq!(named, 15, "{text}");
        assert!(!text.contains("found output.weight"), "{text}");

        // SARIF from ci: one result per tensor, the tensor as a logical location.
        let sarif = repo.path("out.sarif");
        repo.git(&["add", ".weight-inspect.toml"]);
        repo.git(&["commit", "-q", "-m", "policy"]);
        let out = repo.wi(&[
            "ci",
            "--base",
            "main",
            "--head",
            "pr",
            "--sarif",
            sarif.to_str().unwrap(),
        ]);
        assert_eq!(out.status.code(), Some(1));
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(&sarif).unwrap()).unwrap();
        let results = doc["runs"][0]["results"].as_array().unwrap();
        let ours: Vec<&Value> = results
            .iter()
            .filter(|r| r["ruleId"] == "max_rel_l2")
            .collect();
        assert_eq!(ours.len(), 15, "{results:?}");
        assert!(
            ours.iter()
                .any(|r| r.to_string().contains("blk.1.ffn_down.weight"))
        );

        // q8_0 stays within 2 %: clean. The f32 original: clean.
        copy(&repo, "llama-q8_0.gguf", "models/model.gguf");
        let out = repo.wi(&["check", "models/model.gguf"]);
        assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
        copy(&repo, "llama-f32.gguf", "models/model.gguf");
        assert_eq!(
            repo.wi(&["check", "models/model.gguf"]).status.code(),
            Some(0)
        );

        // Without the reference beside it: a violation that says so.
        std::fs::remove_file(repo.path("models/model.safetensors")).unwrap();
        let out = repo.wi(&["check", "models/model.gguf"]);
        assert_eq!(out.status.code(), Some(1));
        assert!(
            stdout(&out).contains("no file models/model.safetensors beside it"),
            "{}",
            stdout(&out)
        );
    }

    #[test]
    fn a_half_conversion_rule_is_refused_with_its_line() {
        let repo = Repo::new();
        repo.write(
            ".weight-inspect.toml",
            "[[rules]]\npaths = [\"*.gguf\"]\nmax_rel_l2 = 0.02\n",
        );
        let out = repo.wi(&["check"]);
        assert_eq!(out.status.code(), Some(2));
        let err = common::stderr(&out);
        assert!(err.contains("`max_rel_l2` needs `reference`"), "{err}");
        assert!(err.contains(":3:"), "{err}");
    }
}

/// The conversion zoo (scripts/make_conversion_zoo.py): one tiny model per architecture
/// family, converted by the pinned convert_hf_to_gguf.py to f32, f16 and q8_0, and corrupted
/// copies of some f32 conversions.
mod zoo {
    use super::*;

    fn dir() -> std::path::PathBuf {
        conversions_dir().join("zoo")
    }

    fn zoo_manifest() -> Value {
        let text = std::fs::read_to_string(dir().join("manifest.json")).unwrap();
        serde_json::from_str(&text).unwrap()
    }

    /// What the report must call each deliberate corruption.
    const NAMED: &[(&str, &str)] = &[
        (
            "mistral-f32-attn_k-not-permuted.gguf",
            "the Q/K head permutation is wrong",
        ),
        (
            "qwen2-f32-norm-plus-one.gguf",
            "1 was added where the converter adds nothing",
        ),
        (
            "gemma-f32-norm-missing-plus-one.gguf",
            "the converter's +1 on this norm weight is missing",
        ),
        (
            "gemma2-f32-norm-plus-two.gguf",
            "the converter's +1 on this norm weight is applied twice",
        ),
        (
            "phi3-f32-attn_output-transposed.gguf",
            "the matrix is transposed",
        ),
        (
            "qwen3-f32-attn_q-heads-swapped.gguf",
            "heads 0 and 2 are swapped",
        ),
        (
            "qwen2_moe-f32-experts-swapped.gguf",
            "experts 1 and 3 are swapped",
        ),
        (
            "qwen2-f32-attn_q-permuted.gguf",
            "the Q/K head permutation was applied, but the converter applies none",
        ),
        (
            "granite-f32-attn_q-not-permuted.gguf",
            "the Q/K head permutation is wrong",
        ),
        (
            "smollm3-f32-attn_k-not-permuted.gguf",
            "the Q/K head permutation is wrong",
        ),
        (
            "granitemoe-f32-up-experts-swapped.gguf",
            "experts 1 and 3 are swapped",
        ),
        (
            "deepseek_v3-f32-attn_v_b-from-layer-0.gguf",
            "it holds layer 0's tensor (model.layers.0.self_attn.kv_b_proj.weight)",
        ),
        (
            "starcoder2-f32-ffn_up-from-layer-0.gguf",
            "it holds layer 0's tensor (model.layers.0.mlp.c_fc.weight)",
        ),
    ];

    #[test]
    fn the_zoo_covers_the_architectures_the_issue_names() {
        let manifest = zoo_manifest();
        let archs: std::collections::BTreeSet<&str> = manifest["conversions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["architecture"].as_str().unwrap())
            .collect();
        for arch in [
            "llama",
            "qwen2",
            "qwen3",
            "qwen2moe",
            "gemma",
            "gemma2",
            "gemma3",
            "phi3",
            "gpt2",
            "starcoder2",
            "stablelm",
            "olmo2",
            "gptneox",
            "granite",
            "granitemoe",
            "smollm3",
            "deepseek2",
        ] {
            assert!(
                archs.contains(arch),
                "{arch} missing from the zoo: {archs:?}"
            );
        }
        assert!(
            archs.contains("falcon") || archs.contains("bloom"),
            "{archs:?}"
        );
    }

    #[test]
    fn every_zoo_conversion_is_faithful_within_its_band() {
        let mut ran = 0;
        for c in zoo_manifest()["conversions"].as_array().unwrap() {
            if c.get("wrong").is_some() {
                continue;
            }
            ran += 1;
            let name = c["gguf"].as_str().unwrap();
            let source = dir().join(c["source"].as_str().unwrap());
            let (ours, _) = report(&source, &dir().join(name), &[]);
            assert_eq!(ours["faithful"], true, "{name}: {}", ours["summary"]);
            assert_eq!(ours["suspect"], 0, "{name}");
            assert_eq!(ours["not_compared"], serde_json::json!([]), "{name}");
            assert_eq!(ours["added"], serde_json::json!([]), "{name}");
            for d in ours["dropped"].as_array().unwrap() {
                let why = d["why"].as_str().unwrap();
                assert!(
                    !why.contains("no GGUF name"),
                    "{name}: {} dropped without a reason: {why}",
                    d["source"]
                );
            }
            let outtype = c["outtype"].as_str().unwrap();
            if outtype == "f32" {
                assert_eq!(
                    ours["identical"], ours["compared"],
                    "{name}: {}",
                    ours["summary"]
                );
            } else {
                let band = ours["bands"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|b| b["target_dtype"] == outtype)
                    .unwrap_or_else(|| panic!("{name}: no {outtype} band: {}", ours["bands"]));
                assert_eq!(band["outside"], 0, "{name}");
                assert!(band["pairs"].as_u64().unwrap() > 0, "{name}");
            }
        }
        // Every zoo conversion but the deliberately wrong ones.
        assert_eq!(ran, 57, "zoo conversions checked");
    }

    #[test]
    fn every_deliberate_corruption_is_caught_and_named() {
        let manifest = zoo_manifest();
        let wrong: Vec<&Value> = manifest["conversions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c.get("wrong").is_some())
            .collect();
        assert_eq!(
            wrong.len(),
            NAMED.len(),
            "every corruption has its expected name"
        );
        for c in wrong {
            let name = c["gguf"].as_str().unwrap();
            let expected = NAMED
                .iter()
                .find(|(g, _)| *g == name)
                .unwrap_or_else(|| panic!("{name}: no expected name"))
                .1;
            let source = dir().join(c["source"].as_str().unwrap());
            let (ours, code) = report(&source, &dir().join(name), &[]);
            assert_eq!(code, 1, "{name}");
            assert_eq!(ours["faithful"], false, "{name}: {}", ours["summary"]);
            let suspect: Vec<&Value> = ours["pairs"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|p| !p["suspect"].is_null())
                .collect();
            assert_eq!(suspect.len(), 1, "{name}: {suspect:?}");
            assert_eq!(suspect[0]["target"], c["wrong_tensor"], "{name}");
            let why = suspect[0]["suspect"].as_str().unwrap();
            assert!(why.starts_with(expected), "{name}: {why}");
        }
    }

    /// Gemma's deliberate +1 on norm weights through git: main holds the model and its f32
    /// GGUF, pr the q8_0 one; then the work tree holds a GGUF whose +1 is missing.
    #[test]
    fn git_diff_and_ci_check_gemma_against_its_reference() {
        use common::git::Repo;
        let repo = Repo::with_lfs(&["*.gguf", "*.safetensors"]);
        let copy = |from: &str, to: &str| {
            let target = repo.path(to);
            std::fs::create_dir_all(target.parent().unwrap()).unwrap();
            std::fs::copy(dir().join(from), target).unwrap();
        };
        copy("gemma/model.safetensors", "models/model.safetensors");
        copy("gemma/config.json", "models/config.json");
        copy("gemma-f32.gguf", "models/model.gguf");
        repo.git(&["add", "."]);
        repo.git(&["commit", "-q", "-m", "base"]);
        repo.git(&["checkout", "-q", "-b", "pr"]);
        copy("gemma-q8_0.gguf", "models/model.gguf");
        repo.git(&["add", "."]);
        repo.git(&["commit", "-q", "-m", "q8_0"]);
        let reference = ["--values", "--reference", "models/model.safetensors"];

        let mut args = vec!["git", "diff"];
        args.extend(reference);
        args.extend(["main", "pr"]);
        let out = repo.wi(&args);
        let text = stdout(&out);
        assert!(out.status.success(), "{}", common::stderr(&out));
        assert!(
            text.contains("  faithful: 20/20 source tensors paired"),
            "{text}"
        );
        assert!(text.contains("plus_one 5"), "{text}");

        let json = repo.path("report.json");
        let mut args = vec!["ci", "--base", "main", "--head", "pr"];
        args.extend(reference);
        args.extend(["--json", json.to_str().unwrap()]);
        let out = repo.wi(&args);
        assert_eq!(out.status.code(), Some(0), "{}", common::stderr(&out));
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        assert_eq!(doc["files"][0]["conversion"]["faithful"], true, "{doc}");

        copy("gemma-f32-norm-missing-plus-one.gguf", "models/model.gguf");
        let mut args = vec!["git", "diff"];
        args.extend(reference);
        let text = stdout(&repo.wi(&args));
        assert!(text.contains("NOT faithful"), "{text}");
        assert!(
            text.contains(
                "blk.1.ffn_norm.weight: the converter's +1 on this norm weight is missing"
            ),
            "{text}"
        );
    }

    /// The policy's `reference` + `max_rel_l2` on Gemma, whose converter adds 1 to every norm
    /// weight on purpose: its q8_0 GGUF passes `check`, `check --staged` and the commit hook;
    /// the GGUF whose +1 is missing on one norm is refused by them and by `ci`, the tensor and
    /// the mistake named.
    #[test]
    fn the_policy_passes_gemma_and_names_its_missing_plus_one() {
        use common::git::Repo;
        let repo = Repo::with_lfs(&["*.gguf", "*.safetensors"]);
        let copy = |from: &str, to: &str| {
            let target = repo.path(to);
            std::fs::create_dir_all(target.parent().unwrap()).unwrap();
            std::fs::copy(dir().join(from), target).unwrap();
        };
        let policy = |bound: &str| {
            format!(
                "[[rules]]\npaths = [\"models/*.gguf\"]\nreference = \"model.safetensors\"\n\
                 max_rel_l2 = {bound}\n"
            )
        };
        let violations = |out: &std::process::Output| -> Vec<String> {
            stdout(out)
                .lines()
                .filter(|l| l.starts_with("models/model.gguf: max_rel_l2: "))
                .map(str::to_owned)
                .collect()
        };
        repo.write(".weight-inspect.toml", policy("0.02"));
        let out = repo.wi(&["hook", "install"]);
        assert_eq!(out.status.code(), Some(0), "{}", common::stderr(&out));
        copy("gemma/model.safetensors", "models/model.safetensors");
        copy("gemma/config.json", "models/config.json");
        copy("gemma-q8_0.gguf", "models/model.gguf");
        repo.git(&["add", "."]);

        // Faithful within q8_0's band (and the +1 on its five norms expected): clean.
        let out = repo.wi(&["check", "--staged"]);
        assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
        assert!(
            stdout(&out).contains("1 file checked against .weight-inspect.toml, no violations"),
            "{}",
            stdout(&out)
        );
        let out = repo.wi(&["check", "models/model.gguf"]);
        assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
        let out = repo.try_git(&["commit", "-m", "gemma q8_0"]);
        assert!(out.status.success(), "{}", common::stderr(&out));

        // The clean verdict compared the values: a bound tighter than q8_0 loses names the
        // quantized tensors, and only them, with no mistake (rounding is not one).
        repo.write(".weight-inspect.toml", policy("0.0001"));
        let out = repo.wi(&["check", "models/model.gguf"]);
        assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
        let tight = violations(&out);
        assert!(!tight.is_empty(), "{}", stdout(&out));
        for v in &tight {
            assert!(v.contains(", f32 → q8_0) ["), "{v}");
        }
        repo.write(".weight-inspect.toml", policy("0.02"));

        // The +1 missing on blk.1.ffn_norm.weight: one violation, the tensor and the mistake
        // named, in the work tree, the index, the JSON and the commit hook.
        copy("gemma-f32-norm-missing-plus-one.gguf", "models/model.gguf");
        let expected = "models/model.gguf: max_rel_l2: expected every tensor within rel_l2 \
                        0.02 of models/model.safetensors; found blk.1.ffn_norm.weight: rel_l2 ";
        let mistake = "(plus_one, f32 → f32): the converter's +1 on this norm weight is \
                       missing (rel_l2 ";
        // Once the +1 is added back, what is left is f32 rounding, far inside the band.
        let fit = |text: &str| -> f64 {
            let (_, rest) = text.split_once(mistake).unwrap_or_else(|| panic!("{text}"));
            let (figure, _) = rest.split_once(" once undone)").unwrap();
            figure.parse().unwrap()
        };
        let out = repo.wi(&["check", "models/model.gguf"]);
        assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
        let found = violations(&out);
        assert_eq!(found.len(), 1, "{}", stdout(&out));
        assert!(found[0].starts_with(expected), "{}", found[0]);
        assert!(fit(&found[0]) < 1e-5, "{}", found[0]);
        assert!(
            found[0].ends_with(" once undone) [.weight-inspect.toml:1]"),
            "{}",
            found[0]
        );

        repo.git(&["add", "models/model.gguf"]);
        let out = repo.wi(&["check", "--staged"]);
        assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
        assert_eq!(violations(&out), found, "{}", stdout(&out));

        let out = repo.wi(&["check", "--staged", "--format", "json"]);
        assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
        let doc: Value = serde_json::from_str(&stdout(&out)).unwrap();
        let listed = doc["violations"].as_array().unwrap();
        assert_eq!(listed.len(), 1, "{doc}");
        assert_eq!(listed[0]["rule"], "max_rel_l2");
        let text = listed[0]["found"].as_str().unwrap().to_owned();
        assert!(text.starts_with("blk.1.ffn_norm.weight: rel_l2 "), "{text}");
        assert!(
            fit(&text) < 1e-5 && text.ends_with(" once undone)"),
            "{text}"
        );

        let out = repo.try_git(&["commit", "-m", "gemma without its +1"]);
        let both = format!("{}{}", stdout(&out), common::stderr(&out));
        assert!(!out.status.success(), "{both}");
        assert!(both.contains("weight-inspect: commit refused"), "{both}");
        assert!(both.contains(&found[0]), "{both}");

        // Committed past the hook, `ci` refuses it: one SARIF result on the tensor.
        repo.git(&["commit", "-q", "--no-verify", "-m", "gemma without its +1"]);
        let sarif = repo.path("../out.sarif");
        let out = repo.wi(&[
            "ci",
            "--base",
            "HEAD~1",
            "--head",
            "HEAD",
            "--sarif",
            sarif.to_str().unwrap(),
        ]);
        assert_eq!(out.status.code(), Some(1), "{}", common::stderr(&out));
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(&sarif).unwrap()).unwrap();
        let results: Vec<&Value> = doc["runs"][0]["results"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["ruleId"] == "max_rel_l2")
            .collect();
        assert_eq!(results.len(), 1, "{doc}");
        let message = results[0]["message"]["text"].as_str().unwrap();
        assert!(message.contains(&text), "{message}");
        assert!(
            results[0].to_string().contains("blk.1.ffn_norm.weight"),
            "{}",
            results[0]
        );
    }

    /// One source tensor cut into several GGUF tensors, and several stacked into one, each
    /// pair compared exactly in f32: DeepSeek-V3's kv_b_proj into attn_k_b (transposed per
    /// head) and attn_v_b, its experts stacked, its router's e_score_correction_bias kept;
    /// GraniteMoE's input_linear into gate and up experts.
    #[test]
    fn splits_and_merges_pair_both_ways_exactly() {
        let expected: &[(&str, &str, &str, usize)] = &[
            ("deepseek_v3", "blk.0.attn_k_b.weight", "split+transpose", 1),
            ("deepseek_v3", "blk.1.attn_v_b.weight", "split", 1),
            (
                "deepseek_v3",
                "blk.1.ffn_gate_exps.weight",
                "stack_experts",
                4,
            ),
            ("deepseek_v3", "blk.1.exp_probs_b.bias", "identity", 1),
            ("granitemoe", "blk.0.ffn_gate_exps.weight", "split", 1),
            ("granitemoe", "blk.1.ffn_up_exps.weight", "split", 1),
        ];
        let mut ran = 0;
        for (family, target, transform, sources) in expected {
            let (ours, code) = report(
                &dir().join(family),
                &dir().join(format!("{family}-f32.gguf")),
                &[],
            );
            assert_eq!(code, 0, "{family}: {}", ours["summary"]);
            let pair = ours["pairs"]
                .as_array()
                .unwrap()
                .iter()
                .find(|p| p["target"] == *target)
                .unwrap_or_else(|| panic!("{family}: no pair for {target}"));
            assert_eq!(pair["transform"], *transform, "{pair}");
            assert_eq!(
                pair["sources"].as_array().unwrap().len(),
                *sources,
                "{pair}"
            );
            assert_eq!(pair["identical"], true, "{pair}");
            assert_eq!(pair["rel_l2"], 0.0, "{pair}");
            // Each source counted once however many pairs it is in.
            assert_eq!(ours["paired_sources"], ours["source_tensors"], "{family}");
            ran += 1;
        }
        assert_eq!(ran, 6);
        // kv_b_proj is in both of its parts' pairs.
        let (ours, _) = report(
            &dir().join("deepseek_v3"),
            &dir().join("deepseek_v3-q8_0.gguf"),
            &[],
        );
        let kv_b: Vec<&str> = ours["pairs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["sources"][0] == "model.layers.1.self_attn.kv_b_proj.weight")
            .map(|p| p["target"].as_str().unwrap())
            .collect();
        assert_eq!(kv_b, ["blk.1.attn_k_b.weight", "blk.1.attn_v_b.weight"]);
    }

    /// docs/values.md's coverage table (scripts/gen_conversion_coverage.py) marks every
    /// architecture a committed conversion checks as checked, and only those.
    #[test]
    fn the_coverage_table_marks_the_tested_architectures() {
        let doc = std::fs::read_to_string(repo_root().join("docs/values.md")).unwrap();
        let table = doc
            .split("<!-- coverage:begin")
            .nth(1)
            .and_then(|t| t.split("<!-- coverage:end -->").next())
            .expect("the coverage markers");
        let checked: std::collections::BTreeSet<String> = table
            .lines()
            .filter(|l| l.contains("| checked by a test |"))
            .map(|l| l.split('`').nth(1).unwrap().to_owned())
            .collect();
        let mut tested = std::collections::BTreeSet::new();
        for c in manifest()
            .iter()
            .chain(zoo_manifest()["conversions"].as_array().unwrap())
        {
            tested.insert(c["architecture"].as_str().unwrap().to_owned());
        }
        assert_eq!(checked, tested);
    }

    /// config.json against the GGUF's keys for every architecture: head counts, context
    /// length, vocabulary and the rest equal, except what the converter itself writes
    /// differently (GPT2Model writes 4 × n_embd as the feed-forward length whatever n_inner
    /// says; FalconModel writes context length 2048, "not in config.json").
    #[test]
    fn the_configuration_is_checked_for_every_architecture() {
        let mut ran = 0;
        for c in zoo_manifest()["conversions"].as_array().unwrap() {
            if c["outtype"] != "f32" || c.get("wrong").is_some() {
                continue;
            }
            ran += 1;
            let name = c["gguf"].as_str().unwrap();
            let source = dir().join(c["source"].as_str().unwrap());
            let (ours, _) = report(&source, &dir().join(name), &[]);
            let checks = ours["metadata"]["checks"].as_array().unwrap();
            let keys: Vec<&str> = checks
                .iter()
                .map(|k| k["config_key"].as_str().unwrap())
                .collect();
            for wanted in [
                &["num_attention_heads", "n_head"][..],
                &["num_hidden_layers", "n_layer"],
                &["vocab_size"],
            ] {
                assert!(
                    wanted.iter().any(|w| keys.contains(w)),
                    "{name}: none of {wanted:?} checked: {keys:?}"
                );
            }
            for k in checks {
                let known = (name == "gpt2-f32.gguf" && k["config_key"] == "n_inner")
                    || (name == "falcon-f32.gguf" && k["config_key"] == "max_position_embeddings")
                    // DeepseekV2Model writes MLA as MQA: head_count_kv 1
                    || (name == "deepseek_v3-f32.gguf" && k["config_key"] == "num_key_value_heads");
                assert_eq!(k["equal"], !known, "{name}: {k}");
            }
        }
        // The zoo's float32 conversions, one per architecture.
        assert_eq!(ran, 19, "configurations checked");
    }

    #[test]
    fn the_text_report_leads_with_the_verdict_band_and_transforms() {
        let out = run(&[
            "diff",
            "--values",
            dir().join("gemma").to_str().unwrap(),
            dir().join("gemma-q8_0.gguf").to_str().unwrap(),
        ]);
        let text = stdout(&out);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[2].starts_with("  faithful: "), "{text}");
        assert_eq!(
            lines[3],
            "  expected error band: f32 exact: 0 outside; q8_0 rel_l2 ≤ 0.02 (blocks of 32): 0 \
             outside",
            "{text}"
        );
        assert!(
            lines[4].starts_with(
                "  transforms: identity 15, plus_one 5 — conversion/gemma.py GemmaModel"
            ),
            "{text}"
        );
    }
}
