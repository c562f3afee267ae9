//! `relate`: every relation on models made by real tools — transformers' training steps,
//! PEFT, a numpy merge recipe, llama.cpp's converter and quantizer (scripts/
//! make_lineage_fixtures.py, make_finetune_pairs.py, make_conversion_fixtures.py) — with the
//! Hub's spelling of `base_model_relation` in `--json`.

mod common;

use std::path::PathBuf;

use common::{code, repo_root, run, stderr, stdout};
use serde_json::Value;

fn lineage(name: &str) -> PathBuf {
    repo_root().join("tests/fixtures/lineage").join(name)
}

fn finetune(name: &str) -> PathBuf {
    repo_root().join("tests/fixtures/finetune").join(name)
}

fn conversions(name: &str) -> PathBuf {
    repo_root().join("tests/fixtures/conversions").join(name)
}

/// `relate --json MODEL PARENT…`: the document and the exit code.
fn relate(model: &std::path::Path, parents: &[PathBuf]) -> (Value, i32) {
    let mut args = vec!["relate".to_owned(), "--json".to_owned()];
    args.push(model.display().to_string());
    args.extend(parents.iter().map(|p| p.display().to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = run(&args);
    let exit = code(&out);
    assert!(exit == 0 || exit == 1, "relate {args:?}: {}", stderr(&out));
    let doc: Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    assert_eq!(doc["schema"], 1);
    (doc, exit)
}

fn assert_relation(doc: &Value, relation: &str, hub: Option<&str>) {
    assert_eq!(doc["relation"], relation, "{doc:#}");
    match hub {
        Some(hub) => assert_eq!(doc["base_model_relation"], hub, "{doc:#}"),
        None => assert!(doc["base_model_relation"].is_null(), "{doc:#}"),
    }
    let confidence = doc["confidence"].as_f64().unwrap();
    assert!((0.0..=1.0).contains(&confidence));
}

#[test]
fn identical_files_are_decided_by_their_bytes() {
    let temp = tempfile::tempdir().unwrap();
    let copy = temp.path().join("copy.safetensors");
    std::fs::copy(lineage("base/model.safetensors"), &copy).unwrap();
    let (doc, exit) = relate(&copy, &[lineage("base/model.safetensors")]);
    assert_relation(&doc, "identical", None);
    assert_eq!(doc["decided_by"], "bytes");
    assert_eq!(doc["evidence"]["files_equal"], true);
    assert_eq!(exit, 0);
}

#[test]
fn a_gradient_fine_tune_names_what_moved() {
    let (doc, exit) = relate(&lineage("ft-a"), &[lineage("base")]);
    assert_relation(&doc, "fine-tune", Some("finetune"));
    assert_eq!(exit, 0);
    let e = &doc["evidence"];
    assert_eq!(e["moved"], 42);
    assert_eq!(e["frozen"], 0);
    let rel = e["rel_l2"].as_f64().unwrap();
    assert!(rel > 0.01 && rel < 0.2, "{rel}");
    let layers: Vec<&str> = e["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["layer"].as_str().unwrap())
        .collect();
    assert_eq!(layers, ["bert.encoder.layer.0", "bert.encoder.layer.1"]);
    assert!(
        doc["summary"]
            .as_str()
            .unwrap()
            .starts_with("fine-tune of ")
    );
}

#[test]
fn a_fine_tune_of_the_last_layer_names_the_frozen_ones() {
    let (doc, _) = relate(
        &finetune("f32-frozen/ft.safetensors"),
        &[finetune("f32-frozen/base.safetensors")],
    );
    assert_relation(&doc, "fine-tune", Some("finetune"));
    let e = &doc["evidence"];
    assert_eq!(e["moved"], 16);
    assert_eq!(e["frozen"], 26);
    assert_eq!(
        e["frozen_layers"],
        serde_json::json!(["bert.encoder.layer.0"])
    );
    assert_eq!(e["layers"][0]["layer"], "bert.encoder.layer.1");
    assert_eq!(e["layers"][0]["moved"], 16);
    // A GGUF pair converted by llama.cpp from two Llamas a few AdamW steps apart.
    let (doc, _) = relate(
        &finetune("gguf-f16/ft.gguf"),
        &[finetune("gguf-f16/base.gguf")],
    );
    assert_relation(&doc, "fine-tune", Some("finetune"));
}

/// Two models of one architecture initialised and trained apart: never a fine-tune.
#[test]
fn models_trained_apart_are_unrelated_by_their_values() {
    let (doc, exit) = relate(&lineage("independent"), &[lineage("base")]);
    assert_relation(&doc, "unrelated", None);
    assert_eq!(exit, 1);
    assert_eq!(doc["decided_by"], "values");
    assert_eq!(doc["evidence"]["by"], "values");
    assert!(doc["evidence"]["related_share"].as_f64().unwrap() < 0.5);
    assert!(doc["parent"].is_null());
    // And the other way round, and against a fine-tune of the other.
    for (model, parent) in [("base", "independent"), ("ft-a", "independent")] {
        let (doc, _) = relate(&lineage(model), &[lineage(parent)]);
        assert_relation(&doc, "unrelated", None);
    }
}

#[test]
fn another_architecture_is_unrelated_by_its_headers() {
    let (doc, exit) = relate(&lineage("gpt2"), &[lineage("base")]);
    assert_relation(&doc, "unrelated", None);
    assert_eq!(doc["decided_by"], "headers");
    assert_eq!(doc["evidence"]["by"], "no-common-tensors");
    assert_eq!(exit, 1);
    // GGUFs of two architectures: their general.architecture decides.
    let (doc, _) = relate(
        &conversions("xlm-roberta-f32.gguf"),
        &[conversions("llama-f32.gguf")],
    );
    assert_relation(&doc, "unrelated", None);
    assert_eq!(doc["evidence"]["by"], "architecture");
}

#[test]
fn casts_and_requantizations_name_their_band() {
    let (doc, _) = relate(&lineage("f16"), &[lineage("base")]);
    assert_relation(&doc, "cast", Some("quantized"));
    let band = &doc["evidence"]["bands"][0];
    assert_eq!(
        (band["from"].as_str(), band["to"].as_str()),
        (Some("f32"), Some("f16"))
    );
    assert!(band["worst_rel_l2"].as_f64().unwrap() <= band["bound"].as_f64().unwrap());
    let (doc, _) = relate(
        &finetune("bf16-full/base.safetensors"),
        &[finetune("f32-full/base.safetensors")],
    );
    assert_relation(&doc, "cast", Some("quantized"));
    // llama.cpp's converter writing q8_0 and f16 from one model: one re-quantizes the other.
    let (doc, _) = relate(
        &finetune("gguf-q8_0/base.gguf"),
        &[finetune("gguf-f16/base.gguf")],
    );
    assert_relation(&doc, "re-quantized", Some("quantized"));
    let band = &doc["evidence"]["bands"][0];
    assert_eq!(
        (band["from"].as_str(), band["to"].as_str()),
        (Some("f16"), Some("q8_0"))
    );
    assert_eq!(band["bound"], 0.02);
    // llama-quantize's q4_k_m against its f16: re-quantized too.
    let (doc, _) = relate(
        &conversions("llama256-q4_k_m.gguf"),
        &[conversions("llama256-f16.gguf")],
    );
    assert_relation(&doc, "re-quantized", Some("quantized"));
}

#[test]
fn conversions_are_paired_as_the_converter_names_them() {
    let (doc, _) = relate(&conversions("llama-f32.gguf"), &[conversions("llama")]);
    assert_relation(&doc, "conversion", None);
    assert_eq!(doc["evidence"]["faithful"], true);
    assert_eq!(doc["evidence"]["source_format"], "safetensors");
    let (doc, _) = relate(&conversions("llama-q8_0.gguf"), &[conversions("llama")]);
    assert_relation(&doc, "conversion", Some("quantized"));
    assert!(doc["evidence"]["worst_tensor"].is_string());
    // A converter that skipped the Q permutation: still a conversion, not faithful, and its
    // worst tensor named.
    let (doc, _) = relate(
        &conversions("llama-f32-attn_q-not-permuted.gguf"),
        &[conversions("llama")],
    );
    assert_relation(&doc, "conversion", None);
    assert_eq!(doc["evidence"]["faithful"], false);
    assert_eq!(doc["evidence"]["worst_tensor"], "blk.0.attn_q.weight");
}

#[test]
fn a_numpy_merge_is_found_with_its_weights() {
    let (doc, exit) = relate(&lineage("merge"), &[lineage("ft-a"), lineage("ft-b")]);
    assert_relation(&doc, "merge", Some("merge"));
    assert_eq!(exit, 0);
    assert_eq!(doc["decided_by"], "sample");
    let weights = doc["evidence"]["weights"].as_array().unwrap();
    let w: Vec<f64> = weights
        .iter()
        .map(|w| w["weight"].as_f64().unwrap())
        .collect();
    assert!(
        (w[0] - 0.35).abs() < 1e-3 && (w[1] - 0.65).abs() < 1e-3,
        "{w:?}"
    );
    assert!(doc["evidence"]["residual"].as_f64().unwrap() < 1e-4);
    assert_eq!(doc["parents"].as_array().unwrap().len(), 2);
    // Each candidate alone is a fine-tune of it; the base as a third candidate changes
    // nothing.
    assert_eq!(doc["candidates"][0]["relation"], "fine-tune");
    let (doc, _) = relate(
        &lineage("merge"),
        &[lineage("base"), lineage("ft-a"), lineage("ft-b")],
    );
    assert_relation(&doc, "merge", Some("merge"));
}

/// A fine-tune among candidates that include its siblings is not called a merge: the base
/// explains it, the others add nothing.
#[test]
fn a_fine_tune_among_its_siblings_is_no_merge() {
    let (doc, _) = relate(
        &lineage("ft-b"),
        &[lineage("independent"), lineage("base"), lineage("ft-a")],
    );
    assert_relation(&doc, "fine-tune", Some("finetune"));
    assert_eq!(doc["parent"], lineage("base").display().to_string());
    assert_eq!(doc["candidates"][0]["relation"], "unrelated");
}

#[test]
fn a_peft_lora_fits_its_base() {
    let (doc, exit) = relate(
        &lineage("lora/adapter_model.safetensors"),
        &[lineage("base")],
    );
    assert_relation(&doc, "adapter", Some("adapter"));
    assert_eq!(exit, 0);
    assert_eq!(doc["decided_by"], "headers");
    let e = &doc["evidence"];
    assert_eq!(e["rank"], 4);
    assert_eq!(e["alpha"], 8.0);
    assert_eq!(e["target_modules"], serde_json::json!(["query", "value"]));
    assert_eq!(e["fitted"], e["pairs"]);
    assert_eq!(e["layout"], "peft");
    // The same adapter against another architecture fits nothing.
    let (doc, _) = relate(
        &lineage("lora/adapter_model.safetensors"),
        &[lineage("gpt2")],
    );
    assert_relation(&doc, "unrelated", None);
    assert_eq!(doc["evidence"]["by"], "adapter-does-not-fit");
}

#[test]
fn vocabulary_rows_and_layers_added_or_removed() {
    let (doc, _) = relate(&lineage("extended-only"), &[lineage("base")]);
    assert_relation(&doc, "extended", None);
    let rows = &doc["evidence"]["rows"][0];
    assert_eq!(rows["tensor"], "bert.embeddings.word_embeddings.weight");
    assert_eq!(
        (rows["parent_rows"].as_u64(), rows["rows"].as_u64()),
        (Some(96), Some(112))
    );
    assert_eq!(rows["shared_rows_equal"], true);
    let (doc, _) = relate(&lineage("extended"), &[lineage("base")]);
    assert_relation(&doc, "extended", Some("finetune"));
    assert_eq!(doc["evidence"]["rows"][0]["shared_rows_equal"], false);
    let (doc, _) = relate(&lineage("pruned"), &[lineage("base")]);
    assert_relation(&doc, "pruned", None);
    assert_eq!(
        doc["evidence"]["layers_removed"],
        serde_json::json!(["bert.encoder.layer.1"])
    );
    // The other way round: the layer was added.
    let (doc, _) = relate(&lineage("base"), &[lineage("pruned")]);
    assert_relation(&doc, "extended", None);
    assert_eq!(
        doc["evidence"]["layers_added"],
        serde_json::json!(["bert.encoder.layer.1"])
    );
}

#[test]
fn text_names_the_relation_and_each_candidate() {
    let out = run(&[
        "relate",
        lineage("ft-a").to_str().unwrap(),
        lineage("independent").to_str().unwrap(),
        lineage("base").to_str().unwrap(),
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = stdout(&out);
    common::assert_contains(
        &text,
        &[
            "relation: fine-tune",
            "base_model_relation: finetune",
            "bert.encoder.layer.1: 16 of 16 tensors moved, rel_l2",
            "candidates:",
            "unrelated (high",
        ],
    );
}
