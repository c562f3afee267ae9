//! PyTorch checkpoints, checked against what torch itself recorded: tests/fixtures/pytorch holds
//! files written by real `torch.save` (scripts/make_pytorch_fixtures.py) and a manifest of every
//! tensor torch saw (key path, dtype, shape, stride, SHA-256 of its values). Values are checked
//! against a safetensors twin written without weight-inspect or torch
//! (tests/common/pytorch_twin.py); hostile files come from tests/common/hostile_pytorch.py.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use common::git::Repo;
use common::{
    assert_contains, assert_lacks, assert_success, code, combined, python, run, run_in, stderr,
    stdout,
};
use serde_json::Value;

fn dir() -> PathBuf {
    common::fixture("pytorch")
}

fn manifest() -> Value {
    let text = std::fs::read_to_string(dir().join("manifest.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Fixtures that hold only dense tensors (quantized.pt is refused by design, the malicious
/// ones are not in "files").
fn dense_fixtures(manifest: &Value) -> Vec<String> {
    manifest["files"]
        .as_object()
        .unwrap()
        .keys()
        .filter(|name| *name != "quantized.pt")
        .cloned()
        .collect()
}

/// torch's dtype name → weight-inspect's name and bytes per element.
fn dtype(torch: &str) -> (&'static str, u64) {
    match torch {
        "float32" => ("f32", 4),
        "float64" => ("f64", 8),
        "float16" => ("f16", 2),
        "bfloat16" => ("bf16", 2),
        "int64" => ("i64", 8),
        "int32" => ("i32", 4),
        "int16" => ("i16", 2),
        "int8" => ("i8", 1),
        "uint64" => ("u64", 8),
        "uint32" => ("u32", 4),
        "uint16" => ("u16", 2),
        "uint8" => ("u8", 1),
        "bool" => ("bool", 1),
        "complex32" => ("c32", 4),
        "complex64" => ("c64", 8),
        "complex128" => ("c128", 16),
        "float8_e4m3fn" => ("f8_e4m3", 1),
        "float8_e4m3fnuz" => ("f8_e4m3fnuz", 1),
        "float8_e5m2" => ("f8_e5m2", 1),
        "float8_e5m2fnuz" => ("f8_e5m2fnuz", 1),
        "float8_e8m0fnu" => ("f8_e8m0", 1),
        "float4_e2m1fn_x2" => ("f4_e2m1_x2", 1),
        "bits8" => ("bits8", 1),
        "bits16" => ("bits16", 2),
        other => panic!("the manifest names a dtype this test does not know: {other}"),
    }
}

/// The name weight-inspect gives a value at a key path: the keys joined by ".".
fn dotted(path: &Value) -> String {
    path.as_array()
        .unwrap()
        .iter()
        .map(|k| match k {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .collect::<Vec<_>>()
        .join(".")
}

fn inspect_json(path: &Path) -> Value {
    let out = run(&["inspect", "--json", path.to_str().unwrap()]);
    assert_success(&format!("inspect {}", path.display()), &out);
    serde_json::from_str(&stdout(&out)).unwrap()
}

fn hash_of(path: &Path) -> String {
    inspect_json(path)["structural_hash"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[test]
fn every_checkpoint_lists_the_tensors_torch_saved() {
    let manifest = manifest();
    for file in dense_fixtures(&manifest) {
        let entry = &manifest["files"][&file];
        let listed = inspect_json(&dir().join(&file));
        assert_eq!(listed["schema"], 1);
        assert_eq!(listed["format"], "pytorch", "{file}");
        let found: BTreeMap<String, &Value> = listed["tensors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| (t["name"].as_str().unwrap().to_owned(), t))
            .collect();
        let expected = entry["tensors"].as_array().unwrap();
        assert_eq!(found.len(), expected.len(), "{file}: {found:?}");
        for tensor in expected {
            let name = dotted(&tensor["path"]);
            let t = found
                .get(&name)
                .unwrap_or_else(|| panic!("{file}: no tensor {name:?} in {found:?}"));
            let (dtype, size) = dtype(tensor["dtype"].as_str().unwrap());
            assert_eq!(t["dtype"], dtype, "{file} {name}");
            assert_eq!(t["shape"], tensor["shape"], "{file} {name}");
            // The tensor's bytes, not its storage's.
            let elements = tensor["elements"].as_u64().unwrap();
            assert_eq!(t["byte_length"], elements * size, "{file} {name}");
        }
    }
}

#[test]
fn plain_values_beside_the_tensors_are_metadata() {
    let manifest = manifest();
    for file in dense_fixtures(&manifest) {
        let metadata = inspect_json(&dir().join(&file))["metadata"].clone();
        let metadata = metadata.as_object().unwrap();
        let mut explained = BTreeSet::new();
        for value in manifest["files"][&file]["values"].as_array().unwrap() {
            let path = value["path"].as_array().unwrap();
            let containers = value["containers"].as_array().unwrap();
            let want = &value["value"];
            let (kind, scalar) = match value["type"].as_str().unwrap() {
                "int" => ("i64", true),
                "float" => ("f64", true),
                "bool" => ("bool", true),
                "str" => ("string", true),
                // None, empty containers: no metadata (nothing to compare).
                _ => ("", false),
            };
            if !scalar {
                continue;
            }
            // An item of a list or tuple of plain values is an element of one array entry.
            let in_sequence = matches!(
                containers.last().and_then(Value::as_str),
                Some("list" | "tuple")
            );
            if in_sequence {
                let parent = dotted(&Value::Array(path[..path.len() - 1].to_vec()));
                let entry = &metadata
                    .get(&parent)
                    .unwrap_or_else(|| panic!("{file}: no array {parent:?}"));
                assert_eq!(entry["type"], "array", "{file} {parent}");
                assert_eq!(entry["element_type"], kind, "{file} {parent}");
                let index = path.last().unwrap().as_u64().unwrap() as usize;
                assert_eq!(&entry["values"][index], want, "{file} {parent}[{index}]");
                explained.insert(parent);
            } else {
                let name = dotted(&value["path"]);
                let entry = metadata
                    .get(&name)
                    .unwrap_or_else(|| panic!("{file}: no metadata {name:?} in {metadata:?}"));
                assert_eq!(entry["type"], kind, "{file} {name}");
                assert_eq!(&entry["value"], want, "{file} {name}");
                explained.insert(name);
            }
        }
        let listed: BTreeSet<String> = metadata.keys().cloned().collect();
        assert_eq!(listed, explained, "{file}: metadata torch did not save");
    }
    // The rule on a real Lightning checkpoint: hyper-parameters and counters, never tensors.
    let lightning = inspect_json(&dir().join("lightning.ckpt"));
    assert_eq!(lightning["metadata"]["hyper_parameters.lr"]["value"], 0.001);
    assert_eq!(lightning["metadata"]["epoch"]["type"], "i64");
    assert!(
        lightning["tensors"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "state_dict.layer.weight")
    );
}

#[test]
fn one_state_dict_has_one_identity_whatever_the_layout() {
    // The zip layout, the legacy layout, pickle protocols 4 and 5 and data.pkl at the end of
    // the archive are one state dict.
    let basic = hash_of(&dir().join("basic.pt"));
    for same in [
        "basic-legacy.pt",
        "protocol4.pt",
        "protocol5.pt",
        "data-pkl-last.zip.pt",
    ] {
        assert_eq!(hash_of(&dir().join(same)), basic, "{same}");
    }
    assert_eq!(
        hash_of(&dir().join("views.pt")),
        hash_of(&dir().join("views-legacy.pt"))
    );
    // A sharded checkpoint opens as one model: its folder, its index, or the one-file save.
    let whole = hash_of(&dir().join("hf-bin/pytorch_model.bin"));
    assert_eq!(hash_of(&dir().join("hf-bin-sharded")), whole);
    assert_eq!(
        hash_of(&dir().join("hf-bin-sharded/pytorch_model.bin.index.json")),
        whole
    );
    let sharded = inspect_json(&dir().join("hf-bin-sharded"));
    assert_eq!(sharded["tensor_count"], 21);
    // `id` says the same as inspect.
    let out = run(&["id", dir().join("basic-legacy.pt").to_str().unwrap()]);
    assert_success("id", &out);
    assert_contains(&stdout(&out), &[&format!("structural_hash: {basic}")]);
}

/// Writes the safetensors twin of a fixture; returns the names it holds.
fn twin(file: &str, out: &Path) -> Vec<String> {
    let run = Command::new(python())
        .arg(common::repo_root().join("tests/common/pytorch_twin.py"))
        .arg(dir().join("manifest.json"))
        .arg(file)
        .arg(out)
        .output()
        .unwrap();
    assert_success(&format!("pytorch_twin.py {file}"), &run);
    serde_json::from_str(&stdout(&run)).unwrap()
}

#[test]
fn values_equal_an_independent_reading_of_every_fixture() {
    let manifest = manifest();
    let tmp = tempfile::tempdir().unwrap();
    for file in dense_fixtures(&manifest) {
        let twin_path = tmp
            .path()
            .join(format!("{}.safetensors", file.replace('/', "_")));
        let names = twin(&file, &twin_path);
        let checkpoint = dir().join(&file);
        let out = run(&[
            "diff",
            "--values",
            "--json",
            checkpoint.to_str().unwrap(),
            twin_path.to_str().unwrap(),
        ]);
        let report: Value = serde_json::from_str(&stdout(&out))
            .unwrap_or_else(|e| panic!("{file}: {e}\n{}", combined(&out)));
        let values = &report["values"];
        assert_eq!(values["changed"], 0, "{file}: {values}");
        let compared: BTreeSet<&str> = values["tensors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                assert_eq!(t["changed"], false, "{file}: {t}");
                // Complex numbers have no decoder: they are compared byte for byte.
                if t["compared"] == "values" {
                    assert_eq!(t["max_abs_diff"], 0.0, "{file}: {t}");
                } else {
                    assert_eq!(t["compared"], "bytes", "{file}: {t}");
                    assert!(t["name"].as_str().unwrap().starts_with('c'), "{file}: {t}");
                }
                t["name"].as_str().unwrap()
            })
            .collect();
        let expected: BTreeSet<&str> = names.iter().map(String::as_str).collect();
        assert_eq!(compared, expected, "{file}: {values}");
    }
}

/// SHA-256 of each tensor's bytes in a safetensors file, read with numpy (not weight-inspect);
/// with `bump`, also writes OUT: the same file with the first value of tensor BUMP plus one.
const SAFETENSORS_HASHES: &str = r"
import hashlib, json, sys
import numpy as np
from safetensors.numpy import load_file, save_file
tensors = load_file(sys.argv[1])
print(json.dumps({n: hashlib.sha256(np.ascontiguousarray(t).tobytes()).hexdigest()
                  for n, t in tensors.items()}))
if len(sys.argv) > 2:
    bumped = tensors[sys.argv[2]].copy()
    bumped.reshape(-1)[0] += 1
    tensors[sys.argv[2]] = bumped
    save_file(tensors, sys.argv[3])
";

/// The per-tensor records of `diff --values --json OLD NEW`, by name.
fn value_records(old: &Path, new: &Path) -> BTreeMap<String, Value> {
    let out = run(&[
        "diff",
        "--values",
        "--json",
        old.to_str().unwrap(),
        new.to_str().unwrap(),
    ]);
    let report: Value =
        serde_json::from_str(&stdout(&out)).unwrap_or_else(|e| panic!("{e}\n{}", combined(&out)));
    report["values"]["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["name"].as_str().unwrap().to_owned(), t.clone()))
        .collect()
}

/// The conversion holds torch's own bytes (numpy's hashes of the safetensors tensors equal
/// the SHA-256 the fixture generator took from torch for each tensor of the checkpoint), so
/// the diff must find each of the 21 tensors identical; and a copy with one value bumped must
/// show that tensor, and only it, changed in one element.
#[test]
fn a_bin_checkpoint_and_its_safetensors_conversion_hold_the_same_values() {
    let manifest = manifest();
    let torch_hashes: BTreeMap<String, String> =
        manifest["files"]["hf-bin/pytorch_model.bin"]["tensors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                let name = t["path"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|p| p.as_str().unwrap());
                let name: Vec<&str> = name.collect();
                (name.join("."), t["sha256"].as_str().unwrap().to_owned())
            })
            .collect();
    assert_eq!(torch_hashes.len(), 21);
    let st = dir().join("hf-safetensors/model.safetensors");
    let tmp = tempfile::tempdir().unwrap();
    let bumped = tmp.path().join("bumped.safetensors");
    let victim = "model.layers.0.self_attn.q_proj.weight";
    let out = common::run_python_source(
        SAFETENSORS_HASHES,
        &[st.to_str().unwrap(), victim, bumped.to_str().unwrap()],
    );
    let numpy_hashes: BTreeMap<String, String> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        numpy_hashes, torch_hashes,
        "the conversion is not torch's bytes"
    );
    for bin in [
        dir().join("hf-bin/pytorch_model.bin"),
        dir().join("hf-bin-sharded/pytorch_model.bin.index.json"),
    ] {
        let same = value_records(&bin, &st);
        assert_eq!(
            same.keys().collect::<Vec<_>>(),
            torch_hashes.keys().collect::<Vec<_>>()
        );
        for (name, t) in &same {
            assert_eq!(t["changed"], false, "{}: {t}", bin.display());
            assert_eq!(t["max_abs_diff"], 0.0, "{name}: {t}");
        }
        let bumped = value_records(&bin, &bumped);
        let changed: Vec<&String> = bumped
            .iter()
            .filter(|(_, t)| t["changed"] == true)
            .map(|(n, _)| n)
            .collect();
        assert_eq!(changed, [victim], "{}", bin.display());
        assert_eq!(bumped[victim]["changed_elements"], 1, "{}", bumped[victim]);
        // One plus a float32 value, rounded to float32: within its ulp of 1.
        let diff = bumped[victim]["max_abs_diff"].as_f64().unwrap();
        assert!((diff - 1.0).abs() < 1e-6, "{}", bumped[victim]);
    }
}

/// A copy of the malicious fixtures in a fresh directory, which each command then runs in:
/// had any of them run its payload, `weight-inspect-canary` would appear there.
fn malicious_copies() -> (tempfile::TempDir, Vec<(String, String)>) {
    let manifest = manifest();
    let tmp = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for (name, entry) in manifest["malicious"].as_object().unwrap() {
        std::fs::copy(dir().join(name), tmp.path().join(name)).unwrap();
        assert_eq!(entry["creates"], "weight-inspect-canary");
        // The global the payload calls, as `module name`: refused as `module.name`.
        let global = entry["globals"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g.as_str().unwrap())
            .find(|g| !g.starts_with("torch") && !g.starts_with("collections"))
            .unwrap()
            .replace(' ', ".");
        files.push((name.clone(), global));
    }
    (tmp, files)
}

#[test]
fn malicious_pickles_are_named_dangerous_and_never_run() {
    let (tmp, files) = malicious_copies();
    let here = tmp.path();
    for (name, global) in &files {
        // A checkpoint with the payload inside, and a bare pickle that is nothing but the
        // payload, are both read: the payload is a dangerous finding.
        let out = run_in(Some(here), &["inspect", name]);
        assert_eq!(code(&out), 0, "{}", combined(&out));
        assert_contains(
            &stdout(&out),
            &[&format!("dangerous: {global} at offset"), "REDUCE"],
        );
        if name == "malicious-os-system-zip.pt" {
            assert_contains(&stdout(&out), &["weight [2] (f32)"]);
        }
        for args in [
            vec!["id", name.as_str()],
            vec!["diff", name.as_str(), name.as_str()],
            vec!["diff", "--values", name.as_str(), name.as_str()],
        ] {
            let out = run_in(Some(here), &args);
            assert_eq!(code(&out), 0, "{args:?}: {}", combined(&out));
        }
        let out = run_in(Some(here), &["textconv", name]);
        assert_eq!(code(&out), 0, "{}", combined(&out));
        assert_contains(
            &stdout(&out),
            &[&format!("finding: dangerous {global} REDUCE")],
        );
    }
    assert!(
        !here.join("weight-inspect-canary").exists(),
        "a payload ran: the canary file exists"
    );
    // The policy's pickle rule lists what the file would import.
    std::fs::write(
        here.join(".weight-inspect.toml"),
        "[[rules]]\npaths = [\"*.pt\"]\nforbid_formats = [\"pickle\"]\n",
    )
    .unwrap();
    let out = run_in(Some(here), &["check", "malicious-popen.pt"]);
    assert_eq!(code(&out), 1, "{}", combined(&out));
    assert_contains(&stdout(&out), &["forbid_formats", "subprocess.Popen"]);
    assert!(!here.join("weight-inspect-canary").exists());
}

#[test]
fn git_diff_shows_checkpoint_changes_and_refuses_payloads_without_failing() {
    let repo = Repo::new();
    let out = repo.wi(&["git", "install"]);
    assert_success("git install", &out);
    std::fs::copy(dir().join("basic.pt"), repo.path("model.pt")).unwrap();
    std::fs::copy(
        dir().join("hf-bin/pytorch_model.bin"),
        repo.path("pytorch_model.bin"),
    )
    .unwrap();
    repo.commit_all("v1");
    // The same state dict in the legacy layout: same structure, no structural change.
    std::fs::copy(dir().join("basic-legacy.pt"), repo.path("model.pt")).unwrap();
    repo.commit_all("legacy layout");
    let shown = repo.ok(&["show", "--no-ext-diff", "--format=", "HEAD"]);
    assert!(!shown.contains("\n-tensor"), "{shown}");
    // Another state dict: tensors come and go.
    std::fs::copy(dir().join("views.pt"), repo.path("model.pt")).unwrap();
    std::fs::copy(
        dir().join("malicious-os-system-zip.pt"),
        repo.path("pytorch_model.bin"),
    )
    .unwrap();
    repo.commit_all("v2");
    let diff = repo.ok(&["diff", "--no-ext-diff", "HEAD~1", "HEAD"]);
    assert_contains(
        &diff,
        &[
            "format: pytorch",
            "+tensor w_t: f32 [5, 3] 60 bytes",
            "+finding: dangerous posix.system REDUCE",
        ],
    );
    let driver = repo.ok(&["diff", "HEAD~1", "HEAD", "--", "model.pt"]);
    assert_contains(&driver, &["model.pt", "w_t"]);
    assert!(!repo.path("weight-inspect-canary").exists());
}

#[test]
fn hostile_checkpoints_get_clear_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let run_script = Command::new(python())
        .arg(common::repo_root().join("tests/common/hostile_pytorch.py"))
        .arg(dir().join("basic.pt"))
        .arg(tmp.path())
        .output()
        .unwrap();
    assert_success("hostile_pytorch.py", &run_script);
    let expect: &[(&str, &str)] = &[
        (
            "declared-size.pt",
            "declares 48 stored bytes but 52 bytes of content",
        ),
        ("overlap.pt", "overlaps member"),
        (
            "million-members.pt",
            "the zip directory declares 1099511627776 members, more than the 1048576",
        ),
        ("directory-outside.pt", "lies outside the file"),
        ("compressed.pt", "is compressed (zip method 8)"),
        ("deep.pt", "containers nest deeper than 256 levels"),
        (
            "huge-storage.pt",
            "declares 4611686018427387904 elements of 4 bytes",
        ),
        (
            "view-past-storage.pt",
            "reaches element 7 of a storage of 4 elements",
        ),
        (
            "missing-storage.pt",
            "storage \"7\" has no member \"archive/data/7\"",
        ),
        ("negative-stride.pt", "a negative stride"),
        (
            "duplicate-name.pt",
            "\"a.b\": two entries of the checkpoint have this name",
        ),
    ];
    let written: BTreeSet<String> = stdout(&run_script).lines().map(str::to_owned).collect();
    let mut tested: BTreeSet<String> = expect.iter().map(|(f, _)| f.to_string()).collect();
    tested.insert("memo-bomb.pt".to_owned());
    tested.insert("cycle.pt".to_owned());
    assert_eq!(written, tested);
    // A list that contains itself is data: walked once, the way back an alias.
    let cycle = tmp.path().join("cycle.pt");
    let out = run(&["inspect", cycle.to_str().unwrap()]);
    assert_eq!(code(&out), 0, "{}", combined(&out));
    assert_contains(&stdout(&out), &["a.0.__alias__: \"a\""]);
    // 2^64 paths through 65 lists, each heavy list walked once: read, with aliases.
    let bomb = tmp.path().join("memo-bomb.pt");
    let out = run(&["inspect", bomb.to_str().unwrap()]);
    assert_eq!(code(&out), 0, "{}", combined(&out));
    assert_contains(&stdout(&out), &["a.1.__alias__: \"a.0\""]);
    for (file, message) in expect {
        let path = tmp.path().join(file);
        let out = run(&["inspect", path.to_str().unwrap()]);
        assert_eq!(code(&out), 2, "{file}: {}", combined(&out));
        assert_contains(&stderr(&out), &[path.to_str().unwrap(), message]);
    }
}

#[test]
fn every_truncation_is_an_error_never_a_crash() {
    let tmp = tempfile::tempdir().unwrap();
    for file in ["basic.pt", "basic-legacy.pt", "views.pt"] {
        let bytes = std::fs::read(dir().join(file)).unwrap();
        let cut_path = tmp.path().join(file);
        // Every cut in the first 600 bytes (headers and pickles), then every 7th.
        let cuts = (0..bytes.len()).filter(|&n| n < 600 || n % 7 == 0);
        for cut in cuts {
            std::fs::write(&cut_path, &bytes[..cut]).unwrap();
            let out = run(&["inspect", "--json", cut_path.to_str().unwrap()]);
            let status = out.status.code();
            assert!(
                status == Some(2) || status == Some(0),
                "{file} cut at {cut}: {:?}\n{}",
                out.status,
                combined(&out)
            );
            assert!(!stderr(&out).contains("panicked"), "{file} cut at {cut}");
            if status == Some(0) {
                // A complete header without all its data is reported as a prefix.
                let listed: Value = serde_json::from_str(&stdout(&out)).unwrap();
                assert_eq!(listed["truncated"], true, "{file} cut at {cut}");
                assert!(
                    listed["data_bytes_present"].as_u64() < listed["data_bytes_expected"].as_u64(),
                    "{file} cut at {cut}: {listed}"
                );
            }
        }
    }
}

/// `diff --values --json a b`, parsed.
fn values_json(a: &Path, b: &Path) -> Value {
    let out = run(&[
        "diff",
        "--values",
        "--json",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
    ]);
    serde_json::from_str(&stdout(&out)).unwrap_or_else(|e| panic!("{e}: {}", combined(&out)))
}

/// The names of the tensors a `diff --values --json` document compared.
fn compared_tensors(json: &Value) -> BTreeSet<&str> {
    json["values"]["tensors"]
        .as_array()
        .unwrap_or_else(|| panic!("{json}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect()
}

/// Runs `python -c script args…` (the test venv's Python) and asserts it succeeded, naming
/// `label` when not.
fn python_c(label: &str, script: &str, args: &[&Path]) -> std::process::Output {
    let out = Command::new(python())
        .args(["-c", script])
        .args(args)
        .output()
        .unwrap();
    assert_success(label, &out);
    out
}

/// scripts/reference_identity.py, the independent reference, gives each of `paths` the
/// structural hash we give it (its canonical JSON shown when not).
fn assert_the_reference_agrees(paths: &[PathBuf]) {
    let args: Vec<&str> = paths.iter().map(|p| p.to_str().unwrap()).collect();
    let out = common::run_python("reference_identity.py", &args);
    let lines: Vec<Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), paths.len());
    for (path, reference) in paths.iter().zip(&lines) {
        assert_eq!(
            hash_of(path),
            reference["structural_hash"].as_str().unwrap(),
            "{}: {}",
            path.display(),
            reference["canonical"]
        );
    }
}

#[test]
fn the_independent_reference_computes_the_same_identities() {
    let manifest = manifest();
    let mut paths: Vec<PathBuf> = dense_fixtures(&manifest)
        .iter()
        .map(|f| dir().join(f))
        .collect();
    paths.push(dir().join("hf-bin-sharded"));
    assert_the_reference_agrees(&paths);
}

#[test]
fn a_pickle_at_the_end_is_read_up_to_the_header_cap() {
    // data.pkl after 3 MB of other members: beyond the first window of a prefix reader.
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("last.pt");
    let script = "import sys, zipfile
src = zipfile.ZipFile(sys.argv[1])
with zipfile.ZipFile(sys.argv[2], 'w') as out:
    for n in src.namelist():
        if not n.endswith('data.pkl'):
            out.writestr(n, src.read(n))
    out.writestr('basic/padding', bytes(3000000))
    for n in src.namelist():
        if n.endswith('data.pkl'):
            out.writestr(n, src.read(n))
";
    python_c("writing last.pt", script, &[&dir().join("basic.pt"), &file]);
    let basic = hash_of(&dir().join("basic.pt"));
    assert_eq!(hash_of(&file), basic);
    // textconv reads prefixes (never a memory map): it reads on until data.pkl is complete...
    let out = run(&["textconv", file.to_str().unwrap()]);
    assert_contains(&stdout(&out), &[&format!("structural-hash: {basic}")]);
    // ...but never past the header cap.
    let out = Command::new(common::bin())
        .args(["textconv", file.to_str().unwrap()])
        .env("WEIGHT_INSPECT_MAX_HEADER_BYTES", "1500000")
        .output()
        .unwrap();
    assert_eq!(code(&out), 0);
    assert_contains(
        &stdout(&out),
        &[
            "the checkpoint's pickle is not complete within its first",
            "WEIGHT_INSPECT_MAX_HEADER_BYTES",
        ],
    );
}

/// Training checkpoints written by the real libraries (scripts/make_training_checkpoints.py):
/// fairseq's layout with an argparse.Namespace, torch.save(model) of a module the generator
/// defines, numpy inside, and a transformers Trainer's checkpoint-2/. Each is read, its globals
/// stand-ins, and gives every tensor torch.load(weights_only=False) gave, with its dtype and
/// shape (numpy arrays, which are not torch tensors, are not read as tensors).
#[test]
fn training_checkpoints_give_every_tensor_torch_loads() {
    let training = dir().join("training");
    let text = std::fs::read_to_string(training.join("manifest.json")).unwrap();
    let manifest: Value = serde_json::from_str(&text).unwrap();
    let files = manifest.as_object().unwrap();
    assert!(files.len() >= 12, "{:?}", files.keys());
    for (file, entry) in files {
        let path = training.join(file);
        let out = run(&["inspect", "--json", "--all", path.to_str().unwrap()]);
        assert_eq!(code(&out), 0, "{file}: {}", combined(&out));
        let json: Value = serde_json::from_str(&stdout(&out)).unwrap();
        let read: BTreeMap<String, (String, Vec<u64>)> = json["tensors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                let shape = t["shape"].as_array().unwrap();
                (
                    t["name"].as_str().unwrap().to_owned(),
                    (
                        t["dtype"].as_str().unwrap().to_owned(),
                        shape.iter().map(|d| d.as_u64().unwrap()).collect(),
                    ),
                )
            })
            .collect();
        let expected: BTreeMap<String, (String, Vec<u64>)> = entry["tensors"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(name, t)| {
                let shape = t["shape"].as_array().unwrap();
                (
                    name.clone(),
                    (
                        dtype(t["dtype"].as_str().unwrap()).0.to_owned(),
                        shape.iter().map(|d| d.as_u64().unwrap()).collect(),
                    ),
                )
            })
            .collect();
        assert_eq!(read, expected, "{file}");
    }
    // What the stand-ins hold is named: a Namespace's attributes are metadata, a module's
    // parameters are named as in its state_dict(), an optimizer's state by its path.
    let fairseq = run(&["inspect", training.join("fairseq.pt").to_str().unwrap()]);
    assert_contains(
        &stdout(&fairseq),
        &[
            "benign: argparse.Namespace at offset",
            "NEWOBJ BUILD",
            "args.arch: \"tiny_transformer\"",
            "args.max_epoch: 3",
        ],
    );
    let json: Value = serde_json::from_str(&stdout(&run(&[
        "inspect",
        "--json",
        "--all",
        training.join("fairseq.pt").to_str().unwrap(),
    ])))
    .unwrap();
    let names: Vec<&str> = json["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    let id = run(&["id", training.join("fairseq.pt").to_str().unwrap()]);
    assert_contains(
        &stdout(&id),
        &[
            "groups: model 9 tensors, optimizer 24 tensors",
            "findings: 1 benign",
        ],
    );
    // Lightning's checkpoint in git: weights and optimizer state apart, parameters the weights.
    let textconv = run(&["textconv", dir().join("lightning.ckpt").to_str().unwrap()]);
    assert_contains(
        &stdout(&textconv),
        &[
            "parameters: 15\nparameters-f32: 15 in 2 tensors\n",
            "group-model: 2 tensors, 15 elements",
            "group-optimizer: 6 tensors, 32 elements",
        ],
    );
    // Model weights apart from optimizer state: AdamW's moments are not parameters.
    assert_eq!(json["parameters"]["total"], 154, "{}", json["parameters"]);
    assert_eq!(
        json["groups"],
        serde_json::json!([
            {"name": "model", "tensor_count": 9, "elements": 154},
            {"name": "optimizer", "tensor_count": 24, "elements": 312},
        ])
    );
    for name in [
        "model.encoder.layers.0.fc1.weight",
        "last_optimizer_state.state.0.exp_avg",
        "last_optimizer_state.state.0.exp_avg_sq",
    ] {
        assert!(names.contains(&name), "{name} not in {names:?}");
    }
    // The real libraries' files: the parameters are the elements of the tensors torch.load
    // gives under the model key (Lightning's state_dict, fairseq's model), none of an
    // optimizer's or RNG file's, all of a module's or a plain state dict's.
    for (file, model_key) in [
        ("lightning-step2.ckpt", Some("state_dict.")),
        ("lightning-llama.ckpt", Some("state_dict.")),
        ("fairseq.pt", Some("model.")),
        ("trainer/checkpoint-2/optimizer.pt", None),
        ("trainer/checkpoint-2/rng_state.pth", None),
        ("trainer/checkpoint-2/pytorch_model.bin", Some("")),
        ("module.pt", Some("")),
    ] {
        let tensors = manifest[file]["tensors"].as_object().unwrap();
        assert!(!tensors.is_empty(), "{file}");
        let expected: u64 = tensors
            .iter()
            .filter(|(name, _)| model_key.is_some_and(|k| name.starts_with(k)))
            .map(|(_, t)| {
                t["shape"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|d| d.as_u64().unwrap())
                    .product::<u64>()
            })
            .sum();
        let json = inspect_json(&training.join(file));
        assert_eq!(json["parameters"]["total"], expected, "{file}");
        if model_key.is_none() {
            assert_eq!(expected, 0, "{file}");
        }
    }
    let module = run(&["inspect", training.join("module.pt").to_str().unwrap()]);
    assert_contains(
        &stdout(&module),
        &[
            "unknown: __main__.Net at offset 2, NEWOBJ BUILD",
            "unknown: torch.nn.modules.linear.Linear",
        ],
    );
    let args = run(&[
        "inspect",
        training
            .join("trainer/checkpoint-2/training_args.bin")
            .to_str()
            .unwrap(),
    ]);
    assert_contains(
        &stdout(&args),
        &[
            "unknown: transformers.training_args.TrainingArguments",
            "learning_rate: 5e-5",
        ],
    );
}

/// `check` fails on a dangerous global by default wherever it reads a pickle's content, with
/// the tier in the text and SARIF; `allow_globals`, `forbid_globals` and `forbid_tiers` move
/// the line. Nothing runs.
#[test]
fn check_fails_on_dangerous_globals_and_policy_moves_the_line() {
    let tmp = tempfile::tempdir().unwrap();
    let here = tmp.path();
    std::fs::copy(
        dir().join("malicious-os-system-zip.pt"),
        here.join("payload.pt"),
    )
    .unwrap();
    std::fs::copy(dir().join("training/fairseq.pt"), here.join("fairseq.pt")).unwrap();
    std::fs::copy(dir().join("training/module.pt"), here.join("module.pt")).unwrap();
    let policy = |extra: &str| {
        std::fs::write(
            here.join(".weight-inspect.toml"),
            format!("[[rules]]\npaths = [\"*.pt\"]\nmax_tensors = 1000\n{extra}"),
        )
        .unwrap();
    };
    policy("");
    let out = run_in(
        Some(here),
        &["check", "payload.pt", "fairseq.pt", "module.pt"],
    );
    assert_eq!(code(&out), 1, "{}", combined(&out));
    let text = stdout(&out);
    assert_contains(
        &text,
        &["payload.pt", "pickle_globals", "dangerous: posix.system"],
    );
    assert!(!text.contains("fairseq.pt"), "{text}");
    assert!(!text.contains("module.pt"), "{text}");
    let sarif = run_in(Some(here), &["check", "--format", "sarif", "payload.pt"]);
    assert_contains(
        &stdout(&sarif),
        &["pickle_globals", "dangerous: posix.system"],
    );

    policy("allow_globals = [\"posix.system\"]\n");
    let out = run_in(Some(here), &["check", "payload.pt", "fairseq.pt"]);
    assert_eq!(code(&out), 0, "{}", combined(&out));

    policy(
        "forbid_tiers = [\"dangerous\", \"unknown\"]\nforbid_globals = [\"argparse.Namespace\"]\n",
    );
    let out = run_in(Some(here), &["check", "fairseq.pt", "module.pt"]);
    assert_eq!(code(&out), 1, "{}", combined(&out));
    assert_contains(
        &stdout(&out),
        &["benign: argparse.Namespace", "unknown: __main__.Net"],
    );
    assert!(!here.join("weight-inspect-canary").exists());
}

/// Malicious variants (scripts/make_malicious_pickles.py: os.system by GLOBAL + REDUCE and
/// STACK_GLOBAL in protocols 0 to 5, INST, OBJ, a builtins.getattr chain, a payload nested in a
/// real state dict) never run and are flagged dangerous by their global: a checkpoint is read
/// with the finding first, a bare pickle refused by it, and `check` flags both. Every global
/// picklescan (PyPI) calls dangerous in any fixture is flagged dangerous here too.
#[test]
fn malicious_variants_never_run_and_picklescan_dangerous_is_dangerous_here() {
    let source = dir().join("malicious");
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(source.join("manifest.json")).unwrap())
            .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let here = tmp.path();
    let mut files = Vec::new();
    for (name, global) in manifest.as_object().unwrap() {
        std::fs::copy(source.join(name), here.join(name)).unwrap();
        files.push((name.clone(), global.as_str().unwrap().to_owned()));
    }
    assert!(files.len() >= 11, "{files:?}");
    // The variants hold the opcodes they stand for: the protocol (PROTO 2..5, none before),
    // GLOBAL (`c`) up to protocol 3 and STACK_GLOBAL (0x93) from 4, INST (`i`), OBJ (`o`).
    for p in 0..=5u8 {
        let bytes = std::fs::read(source.join(format!("reduce-p{p}.pkl"))).unwrap();
        let proto = if p >= 2 { Some(p) } else { None };
        assert_eq!(
            (bytes[0] == 0x80).then(|| bytes[1]),
            proto,
            "reduce-p{p}.pkl"
        );
        let stack_global = bytes.contains(&0x93);
        assert_eq!(stack_global, p >= 4, "reduce-p{p}.pkl");
    }
    let inst = std::fs::read(source.join("inst.pkl")).unwrap();
    assert!(inst.starts_with(b"(") && inst.windows(14).any(|w| w == b"iposix\nsystem\n"));
    let obj = std::fs::read(source.join("obj.pkl")).unwrap();
    assert!(obj.windows(14).any(|w| w == b"cposix\nsystem\n") && obj.contains(&b'o'));
    for (name, global) in &files {
        let out = run_in(Some(here), &["inspect", name]);
        match code(&out) {
            0 => assert_contains(&stdout(&out), &[&format!("dangerous: {global} at offset")]),
            2 => assert_contains(&stderr(&out), &[&format!("refused global {global}")]),
            other => panic!("{name}: exit {other}: {}", combined(&out)),
        }
        for args in [
            vec!["id", name.as_str()],
            vec!["diff", "--values", name.as_str(), name.as_str()],
            vec!["textconv", name.as_str()],
        ] {
            run_in(Some(here), &args);
        }
    }
    assert!(
        !here.join("weight-inspect-canary").exists(),
        "a payload ran: the canary file exists"
    );

    // picklescan's verdicts on every fixture, compared with check's pickle_globals.
    let mut all: Vec<PathBuf> = files.iter().map(|(n, _)| here.join(n)).collect();
    for entry in std::fs::read_dir(dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "pt" || e == "ckpt") {
            all.push(path);
        }
    }
    // Every training checkpoint the real libraries wrote (manifest.json lists them all).
    let training: Value = serde_json::from_str(
        &std::fs::read_to_string(dir().join("training/manifest.json")).unwrap(),
    )
    .unwrap();
    for file in training.as_object().unwrap().keys() {
        all.push(dir().join("training").join(file));
    }
    let scan = Command::new(python())
        .arg("-c")
        .arg(
            "import json, sys\n\
             from picklescan.scanner import scan_file_path\n\
             out = {}\n\
             for p in sys.argv[1:]:\n\
             \x20   r = scan_file_path(p)\n\
             \x20   out[p] = sorted(f'{g.module}.{g.name}' for g in r.globals\n\
             \x20                   if g.safety.value == 'dangerous')\n\
             print(json.dumps(out))\n",
        )
        .args(&all)
        .output()
        .unwrap();
    assert_success("picklescan", &scan);
    let verdicts: BTreeMap<String, Vec<String>> =
        serde_json::from_slice(&scan.stdout).expect("picklescan's verdicts");
    let policy = here.join("policy");
    std::fs::create_dir_all(&policy).unwrap();
    std::fs::write(
        policy.join(".weight-inspect.toml"),
        "[[rules]]\npaths = [\"**\"]\nforbid_tiers = [\"dangerous\"]\n",
    )
    .unwrap();
    let mut flagged = 0;
    for (path, dangerous) in &verdicts {
        let copy = policy.join(format!(
            "f{flagged}-{}",
            Path::new(path).file_name().unwrap().to_str().unwrap()
        ));
        std::fs::copy(path, &copy).unwrap();
        let out = run_in(
            Some(&policy),
            &["check", copy.file_name().unwrap().to_str().unwrap()],
        );
        let text = stdout(&out);
        for global in dangerous {
            assert!(
                text.contains("pickle_globals") && text.contains(&format!("dangerous: {global}")),
                "{path}: picklescan calls {global} dangerous; check says:\n{}",
                combined(&out)
            );
        }
        if !dangerous.is_empty() {
            assert_eq!(code(&out), 1, "{path}: {}", combined(&out));
            flagged += 1;
        }
        std::fs::remove_file(&copy).unwrap();
    }
    assert!(flagged >= 16, "picklescan flagged only {flagged} files");
    assert!(!here.join("weight-inspect-canary").exists());
    assert!(!policy.join("weight-inspect-canary").exists());
}

/// Pieces of pickles the symbolic machine meets: globals of every tier, the opcodes that call,
/// build and fill stand-ins, containers, the memo, and raw bytes.
fn pickle_piece() -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
    use proptest::prelude::*;
    prop_oneof![
        Just(b"cposix\nsystem\n".to_vec()),
        Just(b"cargparse\nNamespace\n".to_vec()),
        Just(b"c__main__\nNet\n".to_vec()),
        Just(b"ccollections\nOrderedDict\n".to_vec()),
        Just(b"\x8c\x08builtins\x8c\x07getattr\x93".to_vec()),
        Just(b"(".to_vec()),
        Just(b")".to_vec()),
        Just(b"}".to_vec()),
        Just(b"]".to_vec()),
        Just(b"R".to_vec()),
        Just(b"\x81".to_vec()),
        Just(b"b".to_vec()),
        Just(b"s".to_vec()),
        Just(b"u".to_vec()),
        Just(b"a".to_vec()),
        Just(b"e".to_vec()),
        Just(b"o".to_vec()),
        Just(b"t".to_vec()),
        Just(b"\x85".to_vec()),
        Just(b"\x86".to_vec()),
        Just(b"\x94".to_vec()),
        Just(b"h\x00".to_vec()),
        Just(b"2".to_vec()),
        Just(b"0".to_vec()),
        Just(b"K\x07".to_vec()),
        Just(b"G?\xf0\x00\x00\x00\x00\x00\x00".to_vec()),
        Just(b"\x8c\x02lr".to_vec()),
        Just(b"\x8c\x0b_parameters".to_vec()),
        Just(b".".to_vec()),
        proptest::collection::vec(any::<u8>(), 0..6),
    ]
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

    /// Any byte string is read or refused with a named error, never a panic, and what the
    /// machine and the walk charged stays within the pickle's budget when it is read (a
    /// refusal stops at the charge that passes the limit).
    #[test]
    fn any_pickle_is_read_or_refused_within_the_budget(
        pieces in proptest::collection::vec(pickle_piece(), 0..60),
        protocol in 0u8..6,
    ) {
        let mut bytes = if protocol >= 2 { vec![0x80, protocol] } else { Vec::new() };
        bytes.extend(pieces.concat());
        let (spent, limit, accepted) =
            weight_inspect::readers::pytorch::fuzzing::run_pickle(&bytes, 1 << 20);
        if accepted {
            proptest::prop_assert!(spent <= limit, "{spent} > {limit}");
        }
        match weight_inspect::readers::pytorch::parse(&bytes) {
            Ok(_) => {}
            Err(e) => proptest::prop_assert!(!e.to_string().is_empty()),
        }
    }
}

/// docs/SPEC.md §5d: a training checkpoint keeps the structural identity of all it holds and
/// has a second one, its model identity: its model weights, named as a plain state dict of
/// them, and its groups; optimizer state, counters and hyper-parameters are not in it.
/// Lightning's own checkpoint after two steps and a hand-built one at step 120 of the same
/// model share it; fairseq's is `torch.save(model)`'s canonical JSON plus its groups.
#[test]
fn a_training_checkpoint_has_a_model_identity_of_its_weights_and_groups() {
    let canonical_of = |flag: &str, path: &Path| {
        let out = run(&["id", flag, path.to_str().unwrap()]);
        assert_eq!(code(&out), 0, "{}", combined(&out));
        stdout(&out).trim_end().to_owned()
    };
    let canonical = |path: &Path| canonical_of("--canonical", path);
    let model_canonical = |path: &Path| canonical_of("--model-canonical", path);
    let model_identity = |path: &Path| {
        let out = run(&["id", "--json", path.to_str().unwrap()]);
        let json: Value = serde_json::from_str(&stdout(&out)).unwrap();
        json["model_identity"].as_str().map(str::to_owned)
    };
    // Two files of one model at other steps: one model identity, two structural ones.
    let (ckpt, shape) = (
        dir().join("lightning.ckpt"),
        dir().join("lightning-shape.pt"),
    );
    assert_eq!(model_identity(&ckpt), model_identity(&shape));
    assert!(model_identity(&ckpt).is_some());
    assert_ne!(hash_of(&ckpt), hash_of(&shape));
    // The structural identity still holds the optimizer state and the counters.
    let structural = canonical(&ckpt);
    assert!(
        structural.starts_with(r#"{"format":"pytorch","metadata":{"epoch":1,"global_step":2,"#)
            && structural.contains(r#""optimizer_states.0.state.0.exp_avg":"#)
            && !structural.contains(r#""groups""#),
        "{structural}"
    );
    let lightning = model_canonical(&ckpt);
    assert!(
        lightning.starts_with(
            r#"{"format":"pytorch","groups":["model","optimizer","other","scheduler"],"metadata":{},"tensors":{"layer.bias":"#
        ),
        "{lightning}"
    );
    let training = dir().join("training");
    let fairseq = model_canonical(&training.join("fairseq.pt"));
    let module = canonical(&training.join("module.pt"));
    assert_eq!(
        fairseq.replace(r#""groups":["model","optimizer","other"],"#, ""),
        module
    );
    // A wrapped state dict with an epoch, the Trainer's optimizer.pt (one part as a whole) and
    // a module saved whole are no training checkpoints: no model identity, anywhere.
    for plain in [
        dir().join("model-wrapped.pt"),
        training.join("trainer/checkpoint-2/optimizer.pt"),
        training.join("module.pt"),
    ] {
        assert_eq!(model_identity(&plain), None, "{}", plain.display());
        let path = plain.to_str().unwrap();
        let out = run(&["id", "--model-canonical", path]);
        assert_eq!(code(&out), 2, "{}", combined(&out));
        assert_contains(&stderr(&out), &["not a training checkpoint"]);
        for command in ["id", "inspect", "textconv"] {
            assert_lacks(
                &stdout(&run(&[command, path])),
                &["model_identity", "model-identity"],
            );
        }
    }
    // id, inspect and textconv state the model identity and what it holds, beside the
    // structural hash they keep.
    let path = ckpt.to_str().unwrap();
    let hash = model_identity(&ckpt).unwrap();
    let what = "the model weights (state_dict) and the groups model, optimizer, other, scheduler";
    let structural = hash_of(&ckpt);
    assert_contains(
        &stdout(&run(&["id", path])),
        &[
            &format!("structural_hash: {structural}\n"),
            &format!("\nmodel_identity: {hash} ({what})\n"),
        ],
    );
    assert_contains(
        &stdout(&run(&["inspect", path])),
        &[
            &format!("structural_hash: {structural}\n"),
            &format!("\nmodel_identity: {hash} ({what})\n"),
        ],
    );
    assert_contains(
        &stdout(&run(&["textconv", path])),
        &[
            &format!("structural-hash: {structural}\n"),
            &format!("\nmodel-identity: {hash} ({what})\n"),
        ],
    );
    let json: Value = serde_json::from_str(&stdout(&run(&["id", "--json", path]))).unwrap();
    assert_eq!(
        json["training_checkpoint"],
        serde_json::json!({"model_keys": ["state_dict"], "groups": ["model", "optimizer", "other", "scheduler"]})
    );
    assert_eq!(json["structural_hash"], structural.as_str());
    assert_eq!(json["schema"], 1);
    let json: Value = serde_json::from_str(&stdout(&run(&["inspect", "--json", path]))).unwrap();
    assert_eq!(json["model_identity"], hash.as_str());
}

/// Two checkpoints of one Lightning run (steps 2 and 3, written by Lightning itself): two
/// structural identities, one model identity, and `diff` lists what changed beside it group by group, in text and JSON; against
/// a checkpoint of another model the model weights' changes are apart from the optimizer's.
#[test]
fn two_lightning_checkpoints_diff_group_by_group() {
    let training = dir().join("training");
    let step2 = training.join("lightning-step2.ckpt");
    let step3 = training.join("lightning-step3.ckpt");
    let llama = training.join("lightning-llama.ckpt");
    let (step2, step3, llama) = (
        step2.to_str().unwrap(),
        step3.to_str().unwrap(),
        llama.to_str().unwrap(),
    );
    let out = run(&["diff", step2, step3]);
    assert_eq!(code(&out), 1, "{}", combined(&out));
    assert_contains(
        &stdout(&out),
        &[
            "hash equal: false",
            "model identity equal: true",
            "Same model identity",
            "Metadata, other (outside the model identity):\n  ~ epoch: 1 -> 2\n  ~ global_step: 2 -> 3\n",
        ],
    );
    let json: Value =
        serde_json::from_str(&stdout(&run(&["diff", "--json", step2, step3]))).unwrap();
    assert_eq!(json["schema"], 1);
    assert_eq!(json["identical"], false);
    assert_eq!(json["model_identity_equal"], true);
    assert_eq!(json["old"]["model_identity"], json["new"]["model_identity"]);
    assert_ne!(
        json["old"]["structural_hash"],
        json["new"]["structural_hash"]
    );
    let other = &json["groups"]["other"];
    assert_eq!(other["in_model_identity"], false);
    assert_eq!(
        other["metadata"]["changed"]["global_step"]["new"]["value"], 3,
        "{other}"
    );
    // The same entries as the flat lists, told apart.
    assert_eq!(
        json["metadata"]["changed"]["global_step"],
        other["metadata"]["changed"]["global_step"]
    );

    // Grouped by default: a group's changes that repeat are one line.
    let grouped = stdout(&run(&["diff", step2, llama]));
    assert_contains(
        &grouped,
        &[
            "Tensors, model weights (23 changes, grouped; --all lists each):\n",
            "Tensors, optimizer state (outside the model identity; 61 changes, grouped; --all lists each):\n  + optimizer_states.0.state.2–20 {exp_avg, exp_avg_sq, step} (57 tensors)\n",
        ],
    );
    let out = run(&["diff", "--all", step2, llama]);
    assert_eq!(code(&out), 1, "{}", combined(&out));
    let text = stdout(&out);
    assert_contains(
        &text,
        &[
            "hash equal: false",
            "model identity equal: false",
            "Tensors, model weights:\n",
            "  + state_dict.lm_head.weight",
            "  - state_dict.layer.weight",
            "Tensors, optimizer state (outside the model identity):\n",
            "  + optimizer_states.0.state.20.exp_avg_sq",
        ],
    );
    assert!(
        text.find("Tensors, model weights:").unwrap()
            < text.find("Tensors, optimizer state").unwrap()
    );
    let json: Value =
        serde_json::from_str(&stdout(&run(&["diff", "--json", step2, llama]))).unwrap();
    let groups = &json["groups"];
    assert_eq!(groups["model"]["in_model_identity"], true);
    assert_eq!(json["model_identity_equal"], false);
    let model_added = groups["model"]["tensors"]["added"].as_object().unwrap();
    let optimizer_added = groups["optimizer"]["tensors"]["added"].as_object().unwrap();
    assert_eq!(model_added.len(), 21, "{:?}", model_added.keys());
    assert!(model_added.keys().all(|k| k.starts_with("state_dict.")));
    // AdamW's exp_avg, exp_avg_sq and step of 21 parameters, less the 6 already at step 2.
    assert_eq!(
        optimizer_added.len(),
        63 - 6,
        "{:?}",
        optimizer_added.keys()
    );
    assert!(
        optimizer_added
            .keys()
            .all(|k| k.starts_with("optimizer_states."))
    );
    // Plain files keep their diff as it was: no groups.
    let plain: Value = serde_json::from_str(&stdout(&run(&[
        "diff",
        "--json",
        dir().join("basic.pt").to_str().unwrap(),
        dir().join("views.pt").to_str().unwrap(),
    ])))
    .unwrap();
    assert!(plain.get("groups").is_none(), "{plain}");
}

/// `diff --values` of two Lightning checkpoints reads every group's values: the third step
/// moved the weights and Adam's moments, and each parameter's step count went from 2 to 3.
#[test]
fn diff_values_of_two_lightning_checkpoints() {
    let training = dir().join("training");
    let out = run(&[
        "diff",
        "--values",
        "--json",
        training.join("lightning-step2.ckpt").to_str().unwrap(),
        training.join("lightning-step3.ckpt").to_str().unwrap(),
    ]);
    assert_eq!(code(&out), 1, "{}", combined(&out));
    let json: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let text = json.to_string();
    for name in [
        "state_dict.layer.weight",
        "state_dict.layer.bias",
        "optimizer_states.0.state.0.exp_avg",
        "optimizer_states.0.state.1.exp_avg_sq",
    ] {
        assert!(text.contains(name), "{name} not in {text}");
    }
    let out = run(&[
        "diff",
        "--values",
        training.join("lightning-step2.ckpt").to_str().unwrap(),
        training.join("lightning-step3.ckpt").to_str().unwrap(),
    ]);
    let text = stdout(&out);
    assert_contains(&text, &["values changed in 8 of 8 tensors"]);
    let reference = checkpoint_values(
        &training.join("lightning-step2.ckpt"),
        &training.join("lightning-step3.ckpt"),
    );
    assert_group_figures(&text, &reference);
    // The step counters: one element each, 2.0 -> 3.0 (abs diff 1, rel_l2 0.5).
    for step in [
        "optimizer_states.0.state.0.step",
        "optimizer_states.0.state.1.step",
    ] {
        let line = text
            .lines()
            .find(|l| l.ends_with(step))
            .unwrap_or_else(|| panic!("{step} not in {text}"));
        let cells: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(&cells[..2], ["0.5", "1"], "{line}");
        assert!(line.contains(" 1/1 "), "{line}");
    }
}

/// Reads a torch.save zip's tensors without torch or weight-inspect (Python's Unpickler with
/// torch's rebuilders stubbed by numpy, in this test only) and prints, for two checkpoints,
/// each root key's relative L2 change of all its tensors taken as one vector.
const GROUP_REL_L2: &str = r#"
import io, json, pickle, sys, zipfile
import numpy as np
from numpy.lib.stride_tricks import as_strided

DTYPES = {"FloatStorage": np.float32, "DoubleStorage": np.float64, "LongStorage": np.int64,
          "IntStorage": np.int32, "HalfStorage": np.float16, "BoolStorage": np.bool_}

class Stub:
    def __init__(self, *a, **k): pass
    def __setstate__(self, state): pass

class Dict(dict):
    """An OrderedDict; torch's BUILD gives it attributes (`_metadata`)."""

def rebuild(storage, offset, size, stride, *rest):
    item = storage.itemsize
    return np.array(as_strided(storage[offset:], shape=size, strides=[s * item for s in stride]))

def load(path):
    z = zipfile.ZipFile(path)
    pkl = next(n for n in z.namelist() if n.endswith("data.pkl"))
    prefix = pkl[: -len("data.pkl")]
    class Reader(pickle.Unpickler):
        def find_class(self, module, name):
            if module == "torch._utils" and name == "_rebuild_tensor_v2":
                return rebuild
            if module == "torch._utils" and name == "_rebuild_parameter":
                return lambda data, *rest: data
            if module == "torch" and name in DTYPES:
                return name
            if module == "collections" and name == "OrderedDict":
                return Dict
            return Stub
        def persistent_load(self, pid):
            _, kind, key, _, _ = pid
            return np.frombuffer(z.read(prefix + "data/" + key), dtype=DTYPES[kind])
    return Reader(io.BytesIO(z.read(pkl))).load()

def tensors(obj, path=()):
    if isinstance(obj, np.ndarray):
        yield ".".join(path), obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from tensors(v, path + (str(k),))
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from tensors(v, path + (str(i),))

old, new = (dict(tensors(load(p))) for p in sys.argv[1:3])
sums = {}
for name, a in old.items():
    b = new[name].astype(np.float64)
    a = a.astype(np.float64)
    d, n = sums.get(name.split(".")[0], (0.0, 0.0))
    sums[name.split(".")[0]] = (d + float(((b - a) ** 2).sum()), n + float((a ** 2).sum()))
print(json.dumps({k: (d ** 0.5) / (n ** 0.5) for k, (d, n) in sums.items()}))
"#;

/// `diff --values` sums a training checkpoint's value changes up group by group, in text, JSON
/// and HTML: each group's tensors compared, changed and identical, and the relative L2 change
/// of the group as one vector, which matches numpy's over the tensors of the checkpoint's root
/// key (read here without torch or weight-inspect).
#[test]
fn diff_values_sums_each_group_up() {
    let training = dir().join("training");
    let (step2, step3) = (
        training.join("lightning-step2.ckpt"),
        training.join("lightning-step3.ckpt"),
    );
    let out = python_c("numpy's group rel_l2", GROUP_REL_L2, &[&step2, &step3]);
    let numpy: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let page = tmp.path().join("report.html");
    let out = run(&[
        "diff",
        "--values",
        "--json",
        "--html",
        page.to_str().unwrap(),
        step2.to_str().unwrap(),
        step3.to_str().unwrap(),
    ]);
    assert_eq!(code(&out), 1, "{}", combined(&out));
    let json: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(json["schema"], 1);
    let groups = json["values"]["groups"].as_array().unwrap();
    let names: Vec<&str> = groups
        .iter()
        .map(|g| g["group"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["model", "optimizer"]);
    for (group, root, tensors) in [
        (&groups[0], "state_dict", 2),
        (&groups[1], "optimizer_states", 6),
    ] {
        assert_eq!(group["compared"], tensors, "{group}");
        assert_eq!(group["changed"], tensors, "{group}");
        assert_eq!(group["identical"], 0, "{group}");
        let ours = group["rel_l2"].as_f64().unwrap();
        let theirs = numpy[root].as_f64().unwrap();
        assert!(
            (ours - theirs).abs() <= 1e-9 * theirs,
            "{root}: {ours} vs numpy's {theirs}"
        );
        // The group's figure is not its largest tensor's.
        assert!(group["max_rel_l2"].as_f64().unwrap() > ours, "{group}");
    }
    let html = std::fs::read_to_string(&page).unwrap();
    assert_contains(
        &html,
        &[
            "<h3>By group</h3>",
            "id=\"values-group-model\"><th class=\"name\">model weights</th><td>2</td><td>2</td><td>0</td><td>0.0257</td><td>0.0269</td>",
            "id=\"values-group-optimizer\"><th class=\"name\">optimizer state</th><td>6</td><td>6</td><td>0</td><td>0.5022</td>",
        ],
    );
    // A checkpoint against itself: every group identical, its norms summed all the same.
    let out = run(&[
        "diff",
        "--values",
        "--json",
        step2.to_str().unwrap(),
        step2.to_str().unwrap(),
    ]);
    assert_eq!(code(&out), 0, "{}", combined(&out));
    let json: Value = serde_json::from_str(&stdout(&out)).unwrap();
    for group in json["values"]["groups"].as_array().unwrap() {
        assert_eq!(group["changed"], 0, "{group}");
        assert_eq!(group["identical"], group["compared"], "{group}");
        assert_eq!(group["rel_l2"], 0.0, "{group}");
    }
    // A plain state dict has no groups.
    let plain = dir().join("basic.pt");
    let json: Value = values_json(&plain, &plain);
    assert!(json["values"].get("groups").is_none(), "{json}");
}

/// The conversion check with a Lightning checkpoint as the source: its model weights
/// (`state_dict.model.layers.0…` as `model.layers.0…`) are paired with the GGUFs llama.cpp's
/// converter made of the same weights; the optimizer state is not part of the model.
#[test]
fn a_lightning_checkpoint_is_checked_against_its_gguf_conversion() {
    let ckpt = dir().join("training/lightning-llama.ckpt");
    let conversions = common::fixture("conversions");
    let out = run(&[
        "diff",
        "--values",
        ckpt.to_str().unwrap(),
        conversions.join("llama-f32.gguf").to_str().unwrap(),
    ]);
    assert_eq!(code(&out), 0, "{}", combined(&out));
    assert_contains(
        &stdout(&out),
        &["faithful: 21/21 source tensors paired, identical in 21"],
    );
    assert!(
        !stdout(&out).contains("optimizer_states"),
        "{}",
        stdout(&out)
    );
    // Either order; a quantized conversion within its band.
    let out = run(&[
        "diff",
        "--values",
        conversions.join("llama-q8_0.gguf").to_str().unwrap(),
        ckpt.to_str().unwrap(),
    ]);
    // Values changed (quantized): status 1, as for any conversion that is not exact.
    assert_eq!(code(&out), 1, "{}", combined(&out));
    assert_contains(
        &stdout(&out),
        &[
            "  faithful: 21/21 source tensors paired",
            "blk.0.attn_q.weight ← model.layers.0.self_attn.q_proj.weight (permute_qk, f32 → q8_0)",
        ],
    );
    // A conversion that forgot to permute Q is caught.
    let out = run(&[
        "diff",
        "--values",
        ckpt.to_str().unwrap(),
        conversions
            .join("llama-f32-attn_q-not-permuted.gguf")
            .to_str()
            .unwrap(),
    ]);
    assert_eq!(code(&out), 1, "{}", combined(&out));
    assert_contains(&stdout(&out), &["NOT faithful", "blk.0.attn_q.weight"]);
}

/// numpy arrays inside a checkpoint are tensors named by their path, with numpy's dtype and
/// shape, whether numpy's `_reconstruct` holds the data as latin-1 text (protocol 2, torch's
/// default: `_codecs.encode` is never called) or as bytes (protocol 4), or `_frombuffer` does
/// (protocol 5). Their values are in the pickle: value diffs compare those of C order (the
/// text decoded, the bytes in place) and say so of a Fortran order's instead of reading bytes
/// at an offset that holds none of them.
#[test]
fn numpy_arrays_are_tensors_named_by_their_path() {
    let training = dir().join("training");
    let p4 = training.join("numpy-inside-p4.pt");
    let p5 = training.join("numpy-inside-p5.pt");
    // One content, two protocols, one identity.
    assert_eq!(hash_of(&p4), hash_of(&p5));
    let json = inspect_json(&p5);
    let tensors = json["tensors"].as_array().unwrap();
    let fortran = tensors.iter().find(|t| t["name"] == "fortran").unwrap();
    assert_eq!(fortran["dtype"], "i16");
    assert_eq!(fortran["shape"], serde_json::json!([2, 3]));
    assert_eq!(fortran["values_in_pickle"], true);
    let weight = tensors.iter().find(|t| t["name"] == "weight").unwrap();
    assert!(weight.get("values_in_pickle").is_none(), "{weight}");
    let findings: Vec<(&str, &str)> = json["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["global"].as_str().unwrap(), f["tier"].as_str().unwrap()))
        .collect();
    assert!(
        findings.contains(&("numpy._core.numeric._frombuffer", "benign")),
        "{findings:?}"
    );
    let out = run(&[
        "diff",
        "--values",
        training.join("numpy-inside.pt").to_str().unwrap(),
        p4.to_str().unwrap(),
    ]);
    let text = stdout(&out);
    assert_contains(
        &text,
        &[
            "Tensors, other:\n  + flags [3] (bool)\n  + fortran [2, 3] (i16)\n",
            // Protocol 2's latin-1 text (numpy-inside.pt) against bytes (protocol 4).
            "values identical in all 3 compared tensors",
        ],
    );
    assert_lacks(&text, &["not compared"]);
    // The Trainer's rng_state.pth: numpy's Mersenne Twister state is a tensor of the RNG group.
    let rng = inspect_json(&training.join("trainer/checkpoint-2/rng_state.pth"));
    let state = rng["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "numpy.1")
        .unwrap();
    assert_eq!(state["dtype"], "u32");
    assert_eq!(state["shape"], serde_json::json!([624]));
    assert_eq!(
        rng["groups"],
        serde_json::json!([{"name": "rng", "tensor_count": 2, "elements": 5056 + 624}])
    );
}

/// In git, a Lightning checkpoint that moved on a step keeps its model identity (its structural
/// hash changes), and the diff driver, textconv and `weight-inspect git diff` show what
/// changed beside it, group by group.
#[test]
fn git_diff_of_a_lightning_checkpoint_a_step_later() {
    let training = dir().join("training");
    let repo = Repo::new();
    assert_success("git install", &repo.wi(&["git", "install"]));
    std::fs::copy(
        training.join("lightning-step2.ckpt"),
        repo.path("last.ckpt"),
    )
    .unwrap();
    repo.commit_all("step 2");
    std::fs::copy(
        training.join("lightning-step3.ckpt"),
        repo.path("last.ckpt"),
    )
    .unwrap();
    repo.commit_all("step 3");
    let expected = [
        "hash equal: false",
        "model identity equal: true",
        "Same model identity",
        "Metadata, other (outside the model identity):\n  ~ epoch: 1 -> 2\n  ~ global_step: 2 -> 3\n",
    ];
    assert_contains(&repo.ok(&["diff", "HEAD~1", "HEAD"]), &expected);
    let out = repo.wi(&["git", "diff", "HEAD~1", "HEAD"]);
    assert_contains(&stdout(&out), &expected);
    // With values, summed up group by group, in text and JSON: the figures are numpy's
    // (tests/common/checkpoint_values.py reads both checkpoints without torch).
    let reference = checkpoint_values(
        &training.join("lightning-step2.ckpt"),
        &training.join("lightning-step3.ckpt"),
    );
    let out = repo.wi(&["git", "diff", "--values", "HEAD~1", "HEAD"]);
    assert_group_figures(&stdout(&out), &reference);
    let group_rel_l2 = reference["model"]["rel_l2"].as_f64().unwrap();
    let out = repo.wi(&["git", "diff", "--values", "--json", "HEAD~1", "HEAD"]);
    let json: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let model = &json["files"][0]["values"]["groups"][0];
    assert_eq!(model["group"], "model", "{json}");
    // Both sum the same float64 squares, in different orders: a few ulps apart at most.
    let json_rel_l2 = model["rel_l2"]
        .as_f64()
        .unwrap_or_else(|| panic!("{model}"));
    assert!(
        (json_rel_l2 / group_rel_l2 - 1.0).abs() < 1e-12,
        "{model} vs {group_rel_l2}"
    );
    let textconv = repo.ok(&["diff", "--no-ext-diff", "HEAD~1", "HEAD"]);
    assert_contains(
        &textconv,
        &[
            " model-identity: b24ba64b64f8cc14c725213f6409a2a022da04c3f7aa841b9a4b117fabc971fa (the model weights (state_dict) and the groups model, optimizer, other, scheduler)\n",
            "\n-structural-hash: ",
            "\n+structural-hash: ",
            "\n-meta global_step: i64 = 2\n",
            "\n+meta global_step: i64 = 3\n",
        ],
    );
}

/// tests/common/checkpoint_values.py OLD NEW: numpy's model-group figures of two checkpoints.
fn checkpoint_values(old: &Path, new: &Path) -> Value {
    let out = Command::new(common::python())
        .arg(common::repo_root().join("tests/common/checkpoint_values.py"))
        .args([old, new])
        .output()
        .unwrap();
    assert_success("checkpoint_values.py", &out);
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The `by group:` line of a Lightning step's value diff gives numpy's figures
/// ([`checkpoint_values`]) for the model (2 tensors) and optimizer (6) groups: `model 2 of 2
/// changed (rel_l2 R over the group; largest L), optimizer 6 of 6 changed (...)`.
fn assert_group_figures(text: &str, reference: &Value) {
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("by group: "))
        .unwrap_or_else(|| panic!("no group line: {text}"));
    let parts: Vec<&str> = line.trim_start()["by group: ".len()..]
        .split("), ")
        .collect();
    assert_eq!(parts.len(), 2, "{line}");
    for (part, (group, tensors)) in parts.iter().zip([("model", 2), ("optimizer", 6)]) {
        let figures = &reference[group];
        assert_eq!(figures["tensors"], tensors, "{reference}");
        let head = format!("{group} {tensors} of {tensors} changed (rel_l2 ");
        let rest = part
            .strip_prefix(&head)
            .unwrap_or_else(|| panic!("{head}: {line}"));
        let (rel_l2, largest) = rest.split_once(" over the group; largest ").unwrap();
        let largest = largest.trim_end_matches(')');
        assert_printed_near(rel_l2, figures["rel_l2"].as_f64().unwrap(), line);
        assert_printed_near(largest, figures["largest"].as_f64().unwrap(), line);
    }
}

/// A figure printed to a few digits agrees with `exact` to within half a unit of its last
/// digit.
fn assert_printed_near(printed: &str, exact: f64, context: &str) {
    let value: f64 = printed
        .parse()
        .unwrap_or_else(|_| panic!("{printed}: {context}"));
    // `0.0257`, or `8.19e-4` for small figures: the last digit's place.
    let (mantissa, exponent) = printed.split_once('e').unwrap_or((printed, "0"));
    let decimals = mantissa.split_once('.').map_or(0, |(_, d)| d.len());
    let exponent: i32 = exponent
        .parse()
        .unwrap_or_else(|_| panic!("{printed}: {context}"));
    let half_unit = 0.5 * 10f64.powi(exponent - i32::try_from(decimals).unwrap());
    assert!(
        (value - exact).abs() <= half_unit * (1.0 + 1e-9),
        "printed {printed}, numpy gives {exact}: {context}"
    );
}

/// numpy's own reading of a checkpoint's arrays (Python's Unpickler with numpy's rebuilders and
/// `_codecs`, torch stubbed out), every array under its dotted path written to a safetensors
/// twin with the safetensors package.
const NUMPY_TWIN: &str = r#"
import io, pickle, sys, zipfile
import numpy as np
from safetensors.numpy import save_file

class Stub:
    def __init__(self, *a, **k): pass
def stub(*a, **k): return None

class Reader(pickle.Unpickler):
    def find_class(self, module, name):
        if module.startswith("numpy") or module == "_codecs":
            return super().find_class(module, name)
        if module == "collections" and name == "OrderedDict":
            return dict
        return stub if name.startswith("_rebuild") else Stub
    def persistent_load(self, pid):
        return None

def arrays(obj, path=()):
    if isinstance(obj, np.ndarray):
        yield ".".join(path), np.ascontiguousarray(obj)
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from arrays(v, path + (str(k),))
    elif isinstance(obj, tuple):
        for i, v in enumerate(obj):
            yield from arrays(v, path + (str(i),))

with zipfile.ZipFile(sys.argv[1]) as z:
    name = next(n for n in z.namelist() if n.endswith("data.pkl"))
    root = Reader(io.BytesIO(z.read(name))).load()
save_file(dict(arrays(root)), sys.argv[2])
"#;

/// numpy's own reading of a checkpoint's arrays (Python's Unpickler with numpy's rebuilders,
/// torch stubbed out, in this test only), written to a safetensors twin with the safetensors
/// package: the arrays weight-inspect reads in place (bytes of protocols 4 and 5) hold the
/// same values; a Fortran-ordered one is left out and said so.
#[test]
fn numpy_arrays_read_in_place_hold_numpy_s_values() {
    let training = dir().join("training");
    let tmp = tempfile::tempdir().unwrap();
    for file in ["numpy-inside-p4.pt", "numpy-inside-p5.pt"] {
        let path = training.join(file);
        let twin = tmp.path().join(format!("{file}.safetensors"));
        python_c(
            &format!("numpy twin of {file}"),
            NUMPY_TWIN,
            &[&path, &twin],
        );
        let out = run(&[
            "diff",
            "--values",
            path.to_str().unwrap(),
            twin.to_str().unwrap(),
        ]);
        let text = stdout(&out);
        assert_contains(
            &text,
            &[
                "values identical in all 4 compared tensors",
                "not compared: fortran: a numpy array: its values are inside the pickle, not read",
            ],
        );
        let json: Value = values_json(&path, &twin);
        let compared: BTreeSet<&str> = compared_tensors(&json);
        assert_eq!(
            compared,
            BTreeSet::from(["array", "flags", "numpy_rng.1", "wide"]),
            "{file}"
        );
    }
}

/// Protocol 2 (torch.save's default) writes a numpy array's data as `_codecs.encode(text,
/// "latin1")`: the text is decoded, one byte per character and nothing called, and its values
/// compared. They equal numpy's own reading of the file, and those of the same checkpoint saved
/// with protocol 4 (data as bytes, read in place); a step later, the changed arrays show.
#[test]
fn protocol_2_numpy_arrays_are_decoded_and_compared() {
    let training = dir().join("training");
    let p2 = training.join("numpy-p2.pt");
    let tmp = tempfile::tempdir().unwrap();
    let twin = tmp.path().join("numpy-p2.safetensors");
    python_c("numpy twin of numpy-p2.pt", NUMPY_TWIN, &[&p2, &twin]);
    for other in [twin.clone(), training.join("numpy-p2-as-p4.pt")] {
        let json = values_json(&p2, &other);
        let values = &json["values"];
        let compared: BTreeSet<&str> = compared_tensors(&json);
        assert_eq!(
            compared,
            BTreeSet::from([
                "model.bytes",
                "model.counts",
                "model.mask",
                "model.weight",
                "model.wide",
                "numpy_rng.1",
            ]),
            "{other:?}: {json}"
        );
        assert_eq!(values["changed"], 0, "{other:?}: {json}");
        assert_eq!(values["bits_differ"], 0, "{other:?}: {json}");
        assert_eq!(
            values["skipped"],
            serde_json::json!([]),
            "{other:?}: {json}"
        );
    }
    let out = run(&[
        "diff",
        "--values",
        p2.to_str().unwrap(),
        training.join("numpy-p2-step.pt").to_str().unwrap(),
    ]);
    assert_eq!(code(&out), 1, "{}", combined(&out));
    let text = stdout(&out);
    // The largest rel_l2 is numpy's (scripts/values_reference.py over numpy's own readings).
    let step_twin = tmp.path().join("numpy-p2-step.safetensors");
    let step = training.join("numpy-p2-step.pt");
    python_c(
        "numpy twin of numpy-p2-step.pt",
        NUMPY_TWIN,
        &[&step, &step_twin],
    );
    let reference = common::run_python(
        "values_reference.py",
        &[twin.to_str().unwrap(), step_twin.to_str().unwrap()],
    );
    let reference: Value = serde_json::from_slice(&reference.stdout).unwrap();
    let weight_rel_l2 = reference["model.weight"]["rel_l2"].as_f64().unwrap();
    let largest = reference
        .as_object()
        .unwrap()
        .values()
        .filter_map(|f| f["rel_l2"].as_f64())
        .fold(0.0, f64::max);
    assert!(
        largest <= weight_rel_l2,
        "model.weight is not the largest: {reference}"
    );
    let summary = text
        .lines()
        .find_map(|l| l.split_once("values changed in 2 of 6 tensors; largest rel_l2 "))
        .unwrap_or_else(|| panic!("no summary: {text}"))
        .1;
    let (figure, name) = summary.split_once(' ').unwrap();
    assert_eq!(name, "(model.weight)", "{summary}");
    assert_printed_near(figure, weight_rel_l2, summary);
    assert_lacks(&text, &["not compared"]);
    let row = |name: &str| -> Vec<String> {
        let line = text
            .lines()
            .find(|l| l.ends_with(&format!(" {name}")))
            .unwrap_or_else(|| panic!("{name} not in {text}"));
        line.split_whitespace().map(str::to_owned).collect()
    };
    // counts: one i16 element moved by 1; weight: every f32 element by 0.01 (as rounded).
    assert_eq!(row("model.counts")[1], "1");
    assert_eq!(row("model.counts")[3], "1/5");
    assert_eq!(row("model.weight")[3], "32/32");
}

/// A hash pinned under schema 1 keeps holding: the policy's `expected_hash` of a training
/// checkpoint is its structural hash (golden.json's, the one schema 1 always gave it), never
/// its model identity; another step of the same model, with the same model identity, is a
/// changed file and the gate says so.
#[test]
fn a_pinned_hash_of_a_training_checkpoint_still_holds() {
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path();
    std::fs::copy(dir().join("lightning-shape.pt"), work.join("pinned.pt")).unwrap();
    std::fs::copy(dir().join("lightning.ckpt"), work.join("other-step.pt")).unwrap();
    let schema_1 = "a473b547f5b786fd00ca466acc7d0a8da6dc5578a6edb42cb92894aeb5ab7816";
    std::fs::write(
        work.join(".weight-inspect.toml"),
        format!("[[rules]]\npaths = [\"*.pt\"]\nexpected_hash = \"{schema_1}\"\n"),
    )
    .unwrap();
    let out = run_in(Some(work), &["check", "pinned.pt"]);
    assert_eq!(code(&out), 0, "{}", combined(&out));
    let out = run_in(Some(work), &["check", "--format", "json", "other-step.pt"]);
    assert_eq!(code(&out), 1, "{}", combined(&out));
    let doc: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(doc["violations"][0]["rule"], "expected_hash", "{doc}");
    // The two share the model identity the pin does not look at.
    let model_identity = |name: &str| {
        let out = run_in(Some(work), &["id", "--json", name]);
        let json: Value = serde_json::from_str(&stdout(&out)).unwrap();
        json["model_identity"].clone()
    };
    assert_eq!(model_identity("pinned.pt"), model_identity("other-step.pt"));
}

/// `expected_model_identity` pins a run's model across its steps: both Lightning checkpoints of
/// one run pass (where `expected_hash` of one step fails the other), another model fails with
/// its own model identity, a plain state dict fails as no training checkpoint, a truncated
/// copy fails, and a malformed pin is refused with its place in the policy.
#[test]
fn a_policy_pins_the_model_identity_of_a_run() {
    let training = dir().join("training");
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path();
    for (from, to) in [
        (training.join("lightning-step2.ckpt"), "step2.ckpt"),
        (training.join("lightning-step3.ckpt"), "step3.ckpt"),
        (training.join("lightning-llama.ckpt"), "llama.ckpt"),
        (dir().join("basic.pt"), "plain.ckpt"),
    ] {
        std::fs::copy(from, work.join(to)).unwrap();
    }
    let bytes = std::fs::read(work.join("step3.ckpt")).unwrap();
    std::fs::write(work.join("cut.ckpt"), &bytes[..bytes.len() - 100]).unwrap();
    let id = |name: &str| -> Value {
        serde_json::from_str(&stdout(&run_in(Some(work), &["id", "--json", name]))).unwrap()
    };
    let pinned = id("step2.ckpt")["model_identity"]
        .as_str()
        .unwrap()
        .to_owned();
    let llama = id("llama.ckpt")["model_identity"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_ne!(pinned, llama);
    std::fs::write(
        work.join(".weight-inspect.toml"),
        format!(
            "[[rules]]\npaths = [\"*.ckpt\"]\nexpected_model_identity = \"{}\"\n",
            pinned.to_uppercase()
        ),
    )
    .unwrap();
    for step in ["step2.ckpt", "step3.ckpt"] {
        let out = run_in(Some(work), &["check", step]);
        assert_eq!(code(&out), 0, "{step}: {}", combined(&out));
    }
    let violation = |name: &str| -> Value {
        let out = run_in(Some(work), &["check", "--format", "json", name]);
        assert_eq!(code(&out), 1, "{name}: {}", combined(&out));
        let doc: Value = serde_json::from_str(&stdout(&out)).unwrap();
        let violations = doc["violations"].as_array().unwrap();
        let v = violations
            .iter()
            .find(|v| v["rule"] == "expected_model_identity")
            .unwrap_or_else(|| panic!("{name}: {doc}"));
        assert_eq!(v["expected"], pinned.as_str(), "{doc}");
        v["found"].clone()
    };
    assert_eq!(violation("llama.ckpt"), llama.as_str());
    assert_contains(
        violation("plain.ckpt").as_str().unwrap(),
        &["no model identity: not a training checkpoint"],
    );
    // A copy cut short (its zip directory gone) passes no longer.
    assert_eq!(code(&run_in(Some(work), &["check", "cut.ckpt"])), 1);
    // SARIF names the rule and the text the policy's line.
    let out = run_in(Some(work), &["check", "--format", "sarif", "llama.ckpt"]);
    assert_contains(&stdout(&out), &["\"ruleId\": \"expected_model_identity\""]);
    let out = run_in(Some(work), &["check", "llama.ckpt"]);
    assert_contains(
        &combined(&out),
        &[&format!(
            "llama.ckpt: expected_model_identity: expected {pinned}; found {llama} [.weight-inspect.toml:1]"
        )],
    );
    // The structural hash of one step does not pin the next: that is what the key is for.
    std::fs::write(
        work.join(".weight-inspect.toml"),
        format!(
            "[[rules]]\npaths = [\"*.ckpt\"]\nexpected_hash = \"{}\"\n",
            id("step2.ckpt")["structural_hash"].as_str().unwrap()
        ),
    )
    .unwrap();
    assert_eq!(code(&run_in(Some(work), &["check", "step3.ckpt"])), 1);
    std::fs::write(
        work.join(".weight-inspect.toml"),
        "[[rules]]\npaths = [\"*.ckpt\"]\nexpected_model_identity = \"b24b\"\n",
    )
    .unwrap();
    let out = run_in(Some(work), &["check", "step2.ckpt"]);
    assert_eq!(code(&out), 2, "{}", combined(&out));
    assert_contains(
        &combined(&out),
        &[
            ".weight-inspect.toml:3:27: expected_model_identity must be a model identity of 64 hex digits",
        ],
    );
}

/// The walk's rule for shared parts (SPEC §5b, `PATH.__alias__`) as the independent reference
/// states it: heavy shared lists, strings and dicts (more than 4,096 as weighed) are walked once
/// and aliased at every later path, light ones (an optimizer's `betas`) walked at each path,
/// and the 2^64 paths of the memo bomb read as aliases; the reference's identities match ours.
#[test]
fn the_reference_aliases_heavy_shared_parts_as_we_do() {
    let tmp = tempfile::tempdir().unwrap();
    let script = r#"
import os, sys
sys.path.insert(0, sys.argv[1])
import hostile_pytorch as hp
out = sys.argv[2]
w = hp.Tensor(hp.Storage("0", 4), 0, (2, 2), (2, 1))
heavy = list(range(1000))
light = (0.9, 0.999)
text = "x" * 5000
nested = {"a": heavy, "b": [heavy, "y", 3]}
root = {
    "w": w,
    "opt": {"betas": light, "list": heavy, "lr": 0.1},
    "g2": {"betas": light, "list": heavy, "lr": 0.2},
    "note": text, "note2": text,
    "mixed": [heavy, 1, "z"],
    "nested": nested, "nested2": nested,
}
with open(os.path.join(out, "shared.pt"), "wb") as f:
    f.write(hp.checkpoint(hp.torch_pickle(root), {"0": bytes(16)}))
with open(os.path.join(out, "memo-bomb.pt"), "wb") as f:
    f.write(hp.checkpoint(hp.memo_bomb(), {}))
"#;
    let common_dir = common::repo_root().join("tests/common");
    python_c("writing shared.pt", script, &[&common_dir, tmp.path()]);
    let paths = [
        tmp.path().join("shared.pt"),
        tmp.path().join("memo-bomb.pt"),
    ];
    let out = run(&["inspect", paths[0].to_str().unwrap()]);
    assert_eq!(code(&out), 0, "{}", combined(&out));
    // The rule is exercised: heavy parts aliased, the light tuple walked at both paths.
    assert_contains(
        &stdout(&out),
        &[
            "g2.list.__alias__: \"opt.list\"",
            "note2.__alias__: \"note\"",
            "nested2.__alias__: \"nested\"",
            "mixed.0.__alias__: \"opt.list\"",
            "g2.betas: [0.9, 0.999]",
        ],
    );
    assert_the_reference_agrees(&paths);
}

/// `textconv --tensor-hashes` names a numpy array protocol 2 wrote as latin-1 text by the
/// digest of its values, as the same arrays written by protocol 4 (in place) are named, so
/// `git log -p` shows which of them a commit changed.
#[test]
fn tensor_hashes_cover_protocol_2_numpy_arrays() {
    let training = dir().join("training");
    let tensor_lines = |name: &str| -> Vec<String> {
        let out = run(&[
            "textconv",
            "--tensor-hashes",
            training.join(name).to_str().unwrap(),
        ]);
        assert_eq!(code(&out), 0, "{}", combined(&out));
        stdout(&out)
            .lines()
            .filter(|l| l.starts_with("tensor "))
            .map(str::to_owned)
            .collect()
    };
    let p2 = tensor_lines("numpy-p2.pt");
    assert!(
        p2.iter().any(|l| l.starts_with("tensor numpy_rng.1:")),
        "{p2:?}"
    );
    // SHA-256 of no bytes: what a tensor without a range of its own used to get.
    let nothing = "data sha256:e3b0c44298fc1c14";
    assert!(p2.iter().all(|l| !l.ends_with(nothing)), "{p2:?}");
    assert_eq!(p2, tensor_lines("numpy-p2-as-p4.pt"));
}
