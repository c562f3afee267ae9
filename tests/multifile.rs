//! Multi-file models: safetensors shards planned by huggingface_hub's splitter and written by
//! the safetensors package with the index transformers writes, and GGUF split by gguf-py's
//! writer, each read as the one model it is. Identities are checked against the Python
//! reference (scripts/reference_identity.py); every validation rule has a hostile fixture.

mod common;

use std::path::{Path, PathBuf};

use common::models::make_models;
use common::{code, run, run_python, stderr, stdout};
use serde_json::{Value, json};

fn tensors() -> Value {
    json!([
        {"name": "model.embed.weight", "dtype": "float32", "shape": [16, 8], "fill": {"normal": 1}},
        {"name": "model.layers.0.attn.weight", "dtype": "float16", "shape": [8, 8], "fill": {"normal": 2}},
        {"name": "model.layers.0.mlp.weight", "dtype": "float32", "shape": [8, 32], "fill": {"normal": 3}},
        {"name": "model.layers.1.attn.weight", "dtype": "float16", "shape": [8, 8], "fill": {"normal": 4}},
        {"name": "model.layers.1.mlp.weight", "dtype": "float32", "shape": [8, 32], "fill": {"normal": 5}},
        {"name": "model.norm.weight", "dtype": "float32", "shape": [8], "fill": 1.0}
    ])
}

fn gguf_tensors() -> Value {
    json!([
        {"name": "token_embd.weight", "dtype": "f32", "shape": [16, 8], "fill": "arange"},
        {"name": "blk.0.attn_q.weight", "dtype": "q8_0", "shape": [2, 64]},
        {"name": "blk.0.ffn_up.weight", "dtype": "f16", "shape": [8, 8], "fill": "arange"},
        {"name": "blk.1.attn_q.weight", "dtype": "q8_0", "shape": [2, 64]},
        {"name": "blk.1.ffn_up.weight", "dtype": "f16", "shape": [8, 8], "fill": "arange"},
        {"name": "output_norm.weight", "dtype": "f32", "shape": [8]}
    ])
}

fn gguf_metadata() -> Value {
    json!({"general.name": "tiny", "llama.block_count": 2, "tokenizer.ggml.tokens": ["a", "b", "c"]})
}

/// The models every test starts from, written once per test into its own directory.
fn models(dir: &Path) {
    let changed = {
        let mut t = tensors();
        t[2]["shape"] = json!([8, 64]);
        t[3]["dtype"] = json!("float32");
        t.as_array_mut().unwrap().pop();
        t
    };
    make_models(
        dir,
        &json!({
            "small": {"kind": "sharded_safetensors", "max_shard_size": 600, "tensors": tensors()},
            "large": {"kind": "sharded_safetensors", "max_shard_size": 1400, "tensors": tensors()},
            "changed": {"kind": "sharded_safetensors", "max_shard_size": 600, "tensors": changed},
            "twin/model.safetensors": {"kind": "safetensors", "metadata": {"format": "pt"}, "tensors": tensors()},
            "split/tiny.gguf": {"kind": "gguf", "writer": {"split_max_tensors": 2},
                                "metadata": gguf_metadata(), "tensors": gguf_tensors()},
            "unsplit/tiny.gguf": {"kind": "gguf", "metadata": gguf_metadata(), "tensors": gguf_tensors()},
        }),
    );
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

fn hash(target: &Path) -> String {
    let out = run(&["id", "--json", p(target)]);
    assert_eq!(code(&out), 0, "id {}: {}", target.display(), stderr(&out));
    let doc: Value = serde_json::from_str(&stdout(&out)).unwrap();
    doc["structural_hash"].as_str().unwrap().to_owned()
}

fn reference_hashes(targets: &[&Path]) -> Vec<String> {
    let args: Vec<&str> = targets.iter().map(|t| p(t)).collect();
    let out = run_python("reference_identity.py", &args);
    stdout(&out)
        .lines()
        .map(|line| {
            let v: Value = serde_json::from_str(line).unwrap();
            v["structural_hash"].as_str().unwrap().to_owned()
        })
        .collect()
}

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

#[test]
fn resharded_and_single_file_twins_share_one_identity_with_the_reference() {
    let dir = tmp();
    let d = dir.path();
    models(d);
    let shard_count = |m: &str| {
        std::fs::read_dir(d.join(m))
            .unwrap()
            .filter(|e| e.as_ref().unwrap().path().extension().unwrap() == "safetensors")
            .count()
    };
    assert!(shard_count("small") > shard_count("large") && shard_count("large") > 1);

    let targets: Vec<PathBuf> = vec![
        d.join("small"),
        d.join("large/model.safetensors.index.json"),
        d.join("twin/model.safetensors"),
    ];
    let ours: Vec<String> = targets.iter().map(|t| hash(t)).collect();
    assert_eq!(ours[0], ours[1]);
    assert_eq!(ours[0], ours[2]);
    let refs = reference_hashes(&targets.iter().map(PathBuf::as_path).collect::<Vec<_>>());
    assert_eq!(ours, refs);

    let parts: Vec<PathBuf> = (1..=3)
        .map(|n| d.join(format!("split/tiny-{n:05}-of-00003.gguf")))
        .collect();
    assert!(parts.iter().all(|p| p.is_file()), "gguf-py wrote 3 parts");
    let mut gguf_targets: Vec<PathBuf> = parts.clone();
    gguf_targets.push(d.join("split"));
    gguf_targets.push(d.join("unsplit/tiny.gguf"));
    let ours: Vec<String> = gguf_targets.iter().map(|t| hash(t)).collect();
    assert!(ours.iter().all(|h| *h == ours[0]), "{ours:?}");
    let refs = reference_hashes(&[&parts[1], &gguf_targets[4]]);
    assert_eq!(refs, [ours[0].clone(), ours[0].clone()]);
}

#[test]
fn inspect_reports_the_whole_model_and_each_shard() {
    let dir = tmp();
    let d = dir.path();
    models(d);
    let out = run(&["inspect", "--shards", p(&d.join("small"))]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("tensor_count: 6"), "{text}");
    assert!(
        text.contains("files: 4 safetensors shards, index model.safetensors.index.json"),
        "{text}"
    );
    // Each shard's own identity is that of the shard read alone.
    for n in 1..=4 {
        let shard = format!("model-{n:05}-of-00004.safetensors");
        let own = hash(&d.join("small").join(&shard));
        assert!(
            text.contains(&format!("{shard}: ")) && text.contains(&own),
            "{shard}\n{text}"
        );
    }
    let out = run(&[
        "inspect",
        "--json",
        p(&d.join("split/tiny-00003-of-00003.gguf")),
    ]);
    let doc: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(doc["schema"], 1);
    assert_eq!(doc["tensor_count"], 6);
    assert_eq!(doc["files"]["scheme"], "gguf-split");
    assert_eq!(doc["files"]["parts"].as_array().unwrap().len(), 3);
    assert!(
        doc["metadata"].get("split.count").is_none(),
        "split keys are layout"
    );
    assert_eq!(doc["metadata"]["general.name"]["value"], "tiny");
    let holder = doc["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "output_norm.weight")
        .unwrap();
    assert_eq!(holder["file"], "tiny-00003-of-00003.gguf");
}

#[test]
fn resharding_is_a_layout_change_and_a_changed_model_names_each_change() {
    let dir = tmp();
    let d = dir.path();
    models(d);
    let out = run(&["diff", p(&d.join("small")), p(&d.join("large"))]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stdout(&out).contains("layout: 4 safetensors shards -> 3 safetensors shards"),
        "{}",
        stdout(&out)
    );
    let out = run(&[
        "diff",
        "--json",
        p(&d.join("small")),
        p(&d.join("twin/model.safetensors")),
    ]);
    assert_eq!(code(&out), 0);
    let doc: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(doc["identical"], true);
    assert_eq!(doc["layout"]["old"]["scheme"], "safetensors-index");
    assert_eq!(doc["layout"]["new"]["scheme"], "single-file");

    let out = run(&["diff", "--json", p(&d.join("small")), p(&d.join("changed"))]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let doc: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(doc["identical"], false);
    let changed = doc["tensors"]["changed"].as_object().unwrap();
    assert!(changed.contains_key("model.layers.0.mlp.weight"));
    assert!(changed.contains_key("model.layers.1.attn.weight"));
    assert!(
        doc["tensors"]["removed"]
            .as_object()
            .unwrap()
            .contains_key("model.norm.weight")
    );
    assert_eq!(doc["counts"]["tensors_changed"], 2);
}

/// Runs `id` on `target` and returns stderr, asserting exit 2.
fn refused(target: &Path) -> String {
    let out = run(&["id", p(target)]);
    assert_eq!(
        code(&out),
        2,
        "id {} should fail: {}",
        target.display(),
        stdout(&out)
    );
    stderr(&out)
}

fn assert_says(text: &str, needles: &[&str]) {
    for n in needles {
        assert!(text.contains(n), "expected {n:?} in:\n{text}");
    }
}

fn edit_index(dir: &Path, edit: impl FnOnce(&mut Value)) {
    let path = dir.join("model.safetensors.index.json");
    let mut index: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    edit(&mut index);
    std::fs::write(&path, serde_json::to_string_pretty(&index).unwrap()).unwrap();
}

#[test]
fn every_rule_of_a_sharded_safetensors_model_has_its_error() {
    let root = tmp();
    let fresh = |name: &str| -> PathBuf {
        let d = root.path().join(name);
        make_models(
            root.path(),
            &json!({ name: {"kind": "sharded_safetensors", "max_shard_size": 600, "tensors": tensors()} }),
        );
        d
    };
    let shard = |n: u32| format!("model-{n:05}-of-00004.safetensors");

    let d = fresh("missing");
    std::fs::remove_file(d.join(shard(3))).unwrap();
    assert_says(
        &refused(&d),
        &[
            &shard(3),
            "missing",
            "model.safetensors.index.json names it",
        ],
    );

    let d = fresh("extra");
    std::fs::copy(d.join(shard(1)), d.join("model-00005-of-00004.safetensors")).unwrap();
    assert_says(
        &refused(&d),
        &[
            "model-00005-of-00004.safetensors",
            "the index does not name it",
        ],
    );

    let d = fresh("not_in_shard");
    edit_index(&d, |i| i["weight_map"]["model.ghost"] = json!(shard(2)));
    assert_says(&refused(&d), &["\"model.ghost\" is missing", &shard(2)]);

    let d = fresh("not_in_index");
    edit_index(&d, |i| {
        i["weight_map"]
            .as_object_mut()
            .unwrap()
            .remove("model.norm.weight");
    });
    assert_says(
        &refused(&d),
        &["holds tensor \"model.norm.weight\", which", "does not name"],
    );

    let d = fresh("other_shard");
    edit_index(&d, |i| {
        i["weight_map"]["model.norm.weight"] = json!(shard(1));
    });
    assert_says(
        &refused(&d),
        &["\"model.norm.weight\"", &format!("maps to {}", shard(1))],
    );

    let d = fresh("total_size");
    edit_index(&d, |i| i["metadata"]["total_size"] = json!(12));
    assert_says(
        &refused(&d),
        &["metadata.total_size is 12", "hold 2848 bytes"],
    );

    let d = fresh("unsafe");
    edit_index(&d, |i| {
        i["weight_map"]["model.norm.weight"] = json!("../model.safetensors");
    });
    assert_says(
        &refused(&d),
        &["\"../model.safetensors\" is not a plain file name"],
    );

    let d = fresh("duplicate");
    let path = d.join("model.safetensors.index.json");
    let text = std::fs::read_to_string(&path).unwrap();
    let dup = format!(
        "\"weight_map\": {{\n    \"model.norm.weight\": \"{}\",",
        shard(1)
    );
    std::fs::write(&path, text.replacen("\"weight_map\": {", &dup, 1)).unwrap();
    assert_says(
        &refused(&d),
        &["\"model.norm.weight\" appears twice in weight_map"],
    );

    let d = fresh("metadata");
    // Rewrite one shard with other __metadata__, through the safetensors package.
    let names: Vec<String> = {
        let out = run(&["inspect", "--json", p(&d.join(shard(2)))]);
        let doc: Value = serde_json::from_str(&stdout(&out)).unwrap();
        doc["tensors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let subset: Vec<Value> = tensors()
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| names.iter().any(|n| t["name"] == n.as_str()))
        .cloned()
        .collect();
    make_models(
        &d,
        &json!({ shard(2): {"kind": "safetensors", "metadata": {"format": "np"}, "tensors": subset} }),
    );
    assert_says(
        &refused(&d),
        &[&shard(2), "__metadata__ differs from that of", &shard(1)],
    );

    let d = fresh("link");
    let outside = root.path().join("elsewhere.safetensors");
    std::fs::rename(d.join(shard(4)), &outside).unwrap();
    std::os::unix::fs::symlink(&outside, d.join(shard(4))).unwrap();
    assert_says(
        &refused(&d),
        &[
            &shard(4),
            "a symbolic link to",
            "outside the model's directory",
        ],
    );

    let d = fresh("format");
    std::fs::remove_file(d.join(shard(2))).unwrap();
    make_models(&d, &json!({ shard(2): {"kind": "gguf", "tensors": []} }));
    assert_says(&refused(&d), &[&shard(2), "is gguf, expected safetensors"]);

    let d = fresh("ambiguous");
    std::fs::copy(d.join(shard(1)), d.join("consolidated.safetensors")).unwrap();
    assert_says(
        &refused(&d),
        &[
            "holds 2 models",
            "consolidated.safetensors",
            "name one of them",
        ],
    );
    // Naming the index picks the sharded one.
    let out = run(&["id", p(&d.join("model.safetensors.index.json"))]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
}

#[test]
fn every_rule_of_a_split_gguf_has_its_error() {
    let root = tmp();
    let split = |name: &str| -> PathBuf {
        make_models(
            root.path(),
            &json!({ format!("{name}/tiny.gguf"): {"kind": "gguf", "writer": {"split_max_tensors": 2},
                     "metadata": gguf_metadata(), "tensors": gguf_tensors()} }),
        );
        root.path().join(name)
    };
    let part = |n: u32| format!("tiny-{n:05}-of-00003.gguf");
    // A later part made by hand: its split keys, and no model metadata.
    let hand_part = |dir: &Path, n: u32, metadata: Value, tensors: Value| {
        let mut spec =
            json!({"kind": "gguf", "no_arch": true, "metadata": metadata, "tensors": tensors});
        if metadata_is_empty(&spec) {
            spec["metadata"] = json!({});
        }
        make_models(dir, &json!({ part(n): spec }));
    };
    let last_tensors = json!([
        {"name": "blk.1.ffn_up.weight", "dtype": "f16", "shape": [8, 8], "fill": "arange"},
        {"name": "output_norm.weight", "dtype": "f32", "shape": [8]}
    ]);
    let keys = |no: u32, count: u32, tensors: u32| json!({"split.no": no, "split.count": count, "split.tensors.count": tensors});

    let d = split("missing");
    std::fs::remove_file(d.join(part(2))).unwrap();
    assert_says(
        &refused(&d.join(part(1))),
        &[&part(2), "missing", "tiny-*-of-00003.gguf"],
    );

    let d = split("extra");
    std::fs::copy(d.join(part(1)), d.join("tiny-00001-of-00004.gguf")).unwrap();
    assert_says(
        &refused(&d.join(part(3))),
        &["tiny-00001-of-00004.gguf", "it says 4 parts"],
    );

    let d = split("number");
    hand_part(&d, 3, keys(1, 3, 6), last_tensors.clone());
    assert_says(
        &refused(&d.join(part(1))),
        &[&part(3), "split.no is 1, expected 2"],
    );

    let d = split("count");
    hand_part(&d, 3, keys(2, 4, 6), last_tensors.clone());
    assert_says(
        &refused(&d.join(part(1))),
        &[&part(3), "split.count is 4, expected 3"],
    );

    let d = split("tensors_count");
    hand_part(&d, 3, keys(2, 3, 7), last_tensors.clone());
    assert_says(
        &refused(&d.join(part(1))),
        &[&part(3), "split.tensors.count is 7, but", "says 6"],
    );

    let d = split("metadata_later");
    let mut meta = keys(2, 3, 6);
    meta["general.name"] = json!("sneaky");
    hand_part(&d, 3, meta, last_tensors.clone());
    assert_says(
        &refused(&d.join(part(1))),
        &[
            &part(3),
            "\"general.name\" in part 3",
            "only the first part carries",
        ],
    );

    let d = split("twice");
    let twice = json!([
        {"name": "blk.1.ffn_up.weight", "dtype": "f16", "shape": [8, 8], "fill": "arange"},
        {"name": "token_embd.weight", "dtype": "f32", "shape": [16, 8]}
    ]);
    hand_part(&d, 3, keys(2, 3, 6), twice);
    assert_says(
        &refused(&d.join(part(1))),
        &["\"token_embd.weight\"", "already held by", &part(1)],
    );

    // GGUF v2 and v3 share their layout: the version field alone makes a v2 part.
    let d = split("version");
    let mut bytes = std::fs::read(d.join(part(2))).unwrap();
    bytes[4..8].copy_from_slice(&2u32.to_le_bytes());
    std::fs::write(d.join(part(2)), bytes).unwrap();
    assert_says(
        &refused(&d.join(part(1))),
        &[&part(2), "GGUF version 2, but", "is version 3"],
    );

    let d = split("missing_key");
    hand_part(
        &d,
        3,
        json!({"split.no": 2, "split.count": 3}),
        last_tensors.clone(),
    );
    assert_says(
        &refused(&d.join(part(2))),
        &[&part(3), "split.tensors.count is missing"],
    );

    // A file merged by llama-gguf-split keeps split.count = 0: one file, not a part.
    let merged = root.path().join("merged");
    let mut meta = gguf_metadata();
    meta["split.count"] = json!(0);
    make_models(
        &merged,
        &json!({ "tiny-00001-of-00001.gguf": {"kind": "gguf", "metadata": meta, "tensors": gguf_tensors()} }),
    );
    let out = run(&[
        "inspect",
        "--json",
        p(&merged.join("tiny-00001-of-00001.gguf")),
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let doc: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert!(doc.get("files").is_none());
    assert!(doc["metadata"].get("split.count").is_some());
}

fn metadata_is_empty(spec: &Value) -> bool {
    spec["metadata"]
        .as_object()
        .is_none_or(serde_json::Map::is_empty)
}

#[test]
fn value_diffs_follow_tensors_across_shards() {
    let dir = tmp();
    let d = dir.path();
    let mut retrained = tensors();
    retrained[4]["fill"] = json!({"normal": 5, "plus": 0.001});
    make_models(
        d,
        &json!({
            "small": {"kind": "sharded_safetensors", "max_shard_size": 600, "tensors": tensors()},
            "large": {"kind": "sharded_safetensors", "max_shard_size": 1400, "tensors": tensors()},
            "retrained": {"kind": "sharded_safetensors", "max_shard_size": 1400, "tensors": retrained},
            "split/tiny.gguf": {"kind": "gguf", "writer": {"split_max_tensors": 2},
                                "metadata": gguf_metadata(), "tensors": gguf_tensors()},
            "unsplit/tiny.gguf": {"kind": "gguf", "metadata": gguf_metadata(), "tensors": gguf_tensors()},
        }),
    );
    // Resharded, and split against the single file: the same values, read from other files.
    for (a, b) in [
        (
            d.join("small"),
            d.join("large/model.safetensors.index.json"),
        ),
        (
            d.join("split/tiny-00002-of-00003.gguf"),
            d.join("unsplit/tiny.gguf"),
        ),
    ] {
        let out = run(&["diff", "--values", p(&a), p(&b)]);
        assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
        assert!(
            stdout(&out).contains("values identical in all 6 compared tensors"),
            "{}",
            stdout(&out)
        );
    }
    let out = run(&[
        "diff",
        "--values",
        "--json",
        p(&d.join("small")),
        p(&d.join("retrained")),
    ]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let doc: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let changed: Vec<&str> = doc["values"]["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["changed"] == true)
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(changed, ["model.layers.1.mlp.weight"], "{doc}");
}
