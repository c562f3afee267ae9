//! `bom`: CycloneDX 1.6 ML-BOMs validated by cyclonedx-python-lib's strict validator, their
//! hashes checked against `sha256sum`, on single and multi-file models, `REV:path`, a clone
//! without LFS objects (headers from a real LFS server, giftless) and offline.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::git::Repo;
use common::lfs_server::LfsServer;
use common::{assert_success, code, repo_root, run, stderr, stdout};
use serde_json::Value;

fn fixture(rel: &str) -> PathBuf {
    repo_root().join("tests/fixtures").join(rel)
}

/// Validates `bom` with CycloneDX's strict JSON validator (schema 1.6); panics with its
/// errors.
fn validate(bom: &str) {
    let out = common::run_python_source(
        r#"
import sys
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator
errors = JsonStrictValidator(SchemaVersion.V1_6).validate_str(open(sys.argv[1]).read(), all_errors=True)
if errors:
    for e in errors:
        print(e, file=sys.stderr)
    sys.exit(1)
print("valid")
"#,
        &[write_temp(bom).to_str().unwrap()],
    );
    assert!(
        out.status.success(),
        "invalid CycloneDX 1.6:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn write_temp(text: &str) -> PathBuf {
    let dir = tempfile::tempdir().unwrap().keep();
    let path = dir.join("bom.json");
    std::fs::write(&path, text).unwrap();
    path
}

fn sha256sum(path: &Path) -> String {
    common::require_tool("sha256sum");
    let out = Command::new("sha256sum").arg(path).output().unwrap();
    assert_success("sha256sum", &out);
    stdout(&out).split_whitespace().next().unwrap().to_owned()
}

fn bom(args: &[&str]) -> (String, Value) {
    let mut all = vec!["bom"];
    all.extend_from_slice(args);
    let out = run(&all);
    assert_eq!(code(&out), 0, "bom {args:?}: {}", stderr(&out));
    let text = stdout(&out);
    let doc: Value = serde_json::from_str(&text).expect("JSON");
    (text, doc)
}

fn property<'a>(component: &'a Value, name: &str) -> Option<&'a str> {
    component["properties"]
        .as_array()?
        .iter()
        .find(|p| p["name"] == name)?["value"]
        .as_str()
}

fn structural_hash(path: &Path) -> String {
    let out = run(&["id", "--json", path.to_str().unwrap()]);
    let doc: Value = serde_json::from_str(&stdout(&out)).unwrap();
    doc["structural_hash"].as_str().unwrap().to_owned()
}

/// Each file component's SHA-256 by its name.
fn file_hashes(component: &Value) -> Vec<(String, String)> {
    component["components"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["name"].as_str().unwrap().to_owned(),
                f["hashes"][0]["content"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn a_fine_tune_with_its_base_is_valid_and_hashed_as_sha256sum_does() {
    let (ft, base) = (fixture("lineage/ft-a"), fixture("lineage/base"));
    let (text, doc) = bom(&[ft.to_str().unwrap(), "--base", base.to_str().unwrap()]);
    validate(&text);
    assert_eq!(doc["specVersion"], "1.6");
    assert!(doc["metadata"].get("timestamp").is_none());
    let model = &doc["components"][0];
    assert_eq!(model["type"], "machine-learning-model");
    let file = ft.join("model.safetensors");
    assert_eq!(model["hashes"][0]["content"], sha256sum(&file));
    assert_eq!(
        property(model, "weight-inspect:structural_hash").unwrap(),
        structural_hash(&ft)
    );
    assert_eq!(
        property(model, "weight-inspect:parameters:f32"),
        Some("22528")
    );
    let card = &model["modelCard"];
    assert_eq!(
        card["modelParameters"]["modelArchitecture"],
        "BertForMaskedLM"
    );
    assert_eq!(card["properties"][0]["name"], "context_length");
    assert_eq!(card["properties"][0]["value"], "32");
    // No licence in the model's files: none written, never "unknown".
    assert!(model.get("licenses").is_none());
    let ancestor = &model["pedigree"]["ancestors"][0];
    assert_eq!(
        ancestor["hashes"][0]["content"],
        sha256sum(&base.join("model.safetensors"))
    );
    assert_eq!(
        property(ancestor, "weight-inspect:relation"),
        Some("fine-tune")
    );
    assert_eq!(
        property(ancestor, "weight-inspect:base_model_relation"),
        Some("finetune")
    );
}

#[test]
fn the_same_inputs_give_the_same_bytes_and_a_timestamp_only_when_asked() {
    let ft = fixture("lineage/merge");
    let args = [ft.to_str().unwrap()];
    let (a, doc) = bom(&args);
    let (b, _) = bom(&args);
    assert_eq!(a, b);
    let serial = doc["serialNumber"].as_str().unwrap().to_owned();
    let (timed, doc) = bom(&[args[0], "--timestamp", "2026-05-01T12:00:00Z"]);
    validate(&timed);
    assert_eq!(doc["metadata"]["timestamp"], "2026-05-01T12:00:00Z");
    assert_eq!(doc["serialNumber"], serial.as_str());
    let out = run(&["bom", args[0], "--timestamp", "yesterday"]);
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("RFC 3339"), "{}", stderr(&out));
    // --output writes the same bytes to a file.
    let temp = tempfile::tempdir().unwrap();
    let path = temp.path().join("bom.cdx.json");
    let out = run(&["bom", args[0], "-o", path.to_str().unwrap()]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), a);
}

#[test]
fn multi_file_models_list_every_file() {
    let sharded = fixture("golden-sharded");
    let split = fixture("golden-split/golden-types-00001-of-00002.gguf");
    let lora = fixture("lineage/lora/adapter_model.safetensors");
    let q4 = fixture("conversions/llama256-q4_k_m.gguf");
    let (text, doc) = bom(&[
        sharded.to_str().unwrap(),
        split.to_str().unwrap(),
        lora.to_str().unwrap(),
        q4.to_str().unwrap(),
    ]);
    validate(&text);
    let components = doc["components"].as_array().unwrap();
    assert_eq!(components.len(), 4);
    let files = file_hashes(&components[0]);
    assert_eq!(files.len(), 3, "{files:?}");
    for (name, hash) in &files {
        assert_eq!(*hash, sha256sum(Path::new(name)), "{name}");
    }
    assert!(files[0].0.ends_with("model.safetensors.index.json"));
    let parts = file_hashes(&components[1]);
    assert_eq!(parts.len(), 2);
    assert!(components[1].get("hashes").is_none(), "several files");
    for (name, hash) in &parts {
        assert_eq!(*hash, sha256sum(Path::new(name)));
    }
    // llama-quantize's Q4_K_M: its file type and context length in the model card.
    let card = &components[3]["modelCard"];
    assert_eq!(card["modelParameters"]["architectureFamily"], "llama");
    let props: Vec<(&str, &str)> = card["properties"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["name"].as_str().unwrap(), p["value"].as_str().unwrap()))
        .collect();
    assert!(
        props.contains(&("quantization", "MOSTLY_Q4_K_M")),
        "{props:?}"
    );
    assert!(props.iter().any(|p| p.0 == "context_length"), "{props:?}");
}

#[test]
fn licences_are_valid_spdx_ids_or_left_out() {
    let temp = tempfile::tempdir().unwrap();
    for (declared, expected) in [
        ("apache-2.0", Some("Apache-2.0")),
        ("mit", Some("MIT")),
        ("other", None),
        ("llama3", None),
    ] {
        let dir = temp.path().join(declared);
        std::fs::create_dir(&dir).unwrap();
        for f in ["model.safetensors", "config.json"] {
            std::fs::copy(fixture("lineage/base").join(f), dir.join(f)).unwrap();
        }
        std::fs::write(
            dir.join("README.md"),
            format!("---\nlicense: {declared}\nlibrary_name: transformers\n---\n# base\n"),
        )
        .unwrap();
        let (text, doc) = bom(&[dir.to_str().unwrap()]);
        validate(&text);
        let id = doc["components"][0]["licenses"][0]["license"]["id"].as_str();
        assert_eq!(id, expected, "{declared}");
        if expected.is_none() {
            assert!(doc["components"][0].get("licenses").is_none());
        }
    }
}

#[test]
fn a_wdelta_names_its_parent_hash() {
    let temp = tempfile::tempdir().unwrap();
    let delta = temp.path().join("ft.wdelta");
    let base = fixture("lineage/base/model.safetensors");
    let out = run(&[
        "delta",
        "create",
        "--base",
        base.to_str().unwrap(),
        "--output",
        delta.to_str().unwrap(),
        fixture("lineage/ft-a/model.safetensors").to_str().unwrap(),
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let (text, doc) = bom(&[delta.to_str().unwrap()]);
    validate(&text);
    let model = &doc["components"][0];
    assert_eq!(model["hashes"][0]["content"], sha256sum(&delta));
    let parent = property(model, "weight-inspect:wdelta:parent_hash").unwrap();
    assert_eq!(parent.len(), 64);
    let ancestor = &model["pedigree"]["ancestors"][0];
    assert_eq!(
        property(ancestor, "weight-inspect:wdelta:parent_hash"),
        Some(parent)
    );
}

/// A repository whose models are in LFS: `REV:path`, and a clone without LFS objects that
/// reads the headers from giftless, or (offline) describes the files by their pointers.
#[test]
fn rev_paths_and_a_clone_without_lfs_objects() {
    let source = Repo::with_lfs(&["*.safetensors", "*.gguf"]);
    let ft = fixture("lineage/ft-a/model.safetensors");
    std::fs::create_dir_all(source.path("models/ft")).unwrap();
    std::fs::copy(&ft, source.path("models/ft/model.safetensors")).unwrap();
    std::fs::copy(
        fixture("lineage/ft-a/config.json"),
        source.path("models/ft/config.json"),
    )
    .unwrap();
    std::fs::create_dir_all(source.path("models/sharded")).unwrap();
    for entry in std::fs::read_dir(fixture("golden-sharded")).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(
            entry.path(),
            source.path("models/sharded").join(entry.file_name()),
        )
        .unwrap();
    }
    source.commit_all("models");
    let ft_sha = sha256sum(&ft);
    let shard_sha = sha256sum(&fixture("golden-sharded/model-00001-of-00002.safetensors"));

    let out = source.wi(&[
        "bom",
        "HEAD:models/ft/model.safetensors",
        "HEAD:models/sharded",
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = stdout(&out);
    let doc: Value = serde_json::from_str(&text).unwrap();
    validate(&text);
    let model = &doc["components"][0];
    assert_eq!(model["hashes"][0]["content"], ft_sha.as_str());
    assert_eq!(
        model["components"][0]["properties"][0]["value"],
        "lfs-pointer-oid"
    );
    assert_eq!(
        model["modelCard"]["modelParameters"]["modelArchitecture"],
        "BertForMaskedLM"
    );
    let shards = file_hashes(&doc["components"][1]);
    assert_eq!(shards.len(), 3);
    assert_eq!(
        shards[1],
        (
            "HEAD:models/sharded/model-00001-of-00002.safetensors".into(),
            shard_sha.clone()
        )
    );

    // Pushed to a bare repository and giftless; cloned without LFS content.
    let storage = source.tmp.path().join("lfs-storage");
    let bare = source.tmp.path().join("bare.git");
    source.ok(&["init", "-q", "--bare", "-b", "main", bare.to_str().unwrap()]);
    let server = LfsServer::giftless(&storage, true);
    let with_token = server.lfs_url().replacen(
        "http://",
        &format!("http://_jwt:{}@", server.token("write")),
        1,
    );
    source.git(&["remote", "add", "origin", bare.to_str().unwrap()]);
    source.git(&["config", "lfs.url", &with_token]);
    source.git(&["push", "-q", "origin", "main"]);
    let clone = source.tmp.path().join("clone");
    let out = source
        .git_cmd_in(
            source.tmp.path(),
            &["clone", "-q", bare.to_str().unwrap(), "clone"],
        )
        .env("GIT_LFS_SKIP_SMUDGE", "1")
        .output()
        .unwrap();
    assert_success("git clone", &out);
    source.ok_in(&clone, &["config", "lfs.url", &server.lfs_url()]);
    let header = format!("Authorization: Bearer {}", server.token("read"));
    source.ok_in(
        &clone,
        &[
            "config",
            &format!("http.{}/.extraheader", server.origin()),
            &header,
        ],
    );
    // Offline, before any header is cached: the file is described by its pointer alone.
    let out = source
        .command_in(&clone, common::bin())
        .args(["--offline", "bom", "HEAD:models/ft/model.safetensors"])
        .env(
            "WEIGHT_INSPECT_CACHE_DIR",
            source.tmp.path().join("empty-cache"),
        )
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = stdout(&out);
    validate(&text);
    let doc: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        doc["components"][0]["hashes"][0]["content"],
        ft_sha.as_str()
    );
    assert!(property(&doc["components"][0], "weight-inspect:structural_hash").is_none());
    assert!(
        stderr(&out).contains("described by its LFS pointer alone"),
        "{}",
        stderr(&out)
    );

    let out = source.wi_in(
        &clone,
        &["bom", "models/sharded", "models/ft/model.safetensors"],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = stdout(&out);
    validate(&text);
    let doc: Value = serde_json::from_str(&text).unwrap();
    let shards = file_hashes(&doc["components"][0]);
    assert_eq!(shards[1].1, shard_sha);
    assert_eq!(
        property(&doc["components"][0], "weight-inspect:structural_hash").unwrap(),
        structural_hash(&fixture("golden-sharded"))
    );
    assert_eq!(
        doc["components"][1]["hashes"][0]["content"],
        ft_sha.as_str()
    );
    // No object was downloaded: the work tree still holds pointers.
    let pointer = std::fs::read(clone.join("models/ft/model.safetensors")).unwrap();
    assert!(pointer.starts_with(b"version https://git-lfs"));
}
