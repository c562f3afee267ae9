//! weight-inspect's structural identity against an independent implementation
//! (scripts/reference_identity.py, on gguf-py and the safetensors package), byte for byte, on
//! every committed fixture and on a generated 262,144-token vocabulary; the golden vectors of
//! the spec; and the ggml type table against gguf-py's.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::{fixture, python, repo_root, run, run_python, stderr, stdout};
use sha2::{Digest, Sha256};

fn committed_fixtures() -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(repo_root().join("tests/fixtures"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            matches!(
                p.extension().and_then(|e| e.to_str()),
                Some("gguf" | "safetensors")
            )
        })
        .collect();
    paths.sort();
    assert!(paths.len() >= 15, "committed fixtures missing: {paths:?}");
    paths
}

struct Reference {
    canonical: String,
    hash: String,
    /// A training checkpoint's model identity (SPEC §5d): its canonical JSON and hash.
    model: Option<(String, String)>,
}

/// Runs the Python reference once over all `paths`.
fn reference(paths: &[PathBuf]) -> Vec<Reference> {
    let args: Vec<&str> = paths.iter().map(|p| p.to_str().unwrap()).collect();
    let out = run_python("reference_identity.py", &args);
    let refs: Vec<Reference> = stdout(&out)
        .lines()
        .map(|line| {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            Reference {
                canonical: v["canonical"].as_str().unwrap().to_owned(),
                hash: v["structural_hash"].as_str().unwrap().to_owned(),
                model: v["model_canonical"].as_str().map(|canonical| {
                    let hash = v["model_identity"].as_str().unwrap();
                    (canonical.to_owned(), hash.to_owned())
                }),
            }
        })
        .collect();
    assert_eq!(refs.len(), paths.len());
    refs
}

/// `id --canonical` output (canonical JSON plus one newline), as raw bytes.
fn our_canonical(path: &Path) -> Vec<u8> {
    let out = run(&["id", "--canonical", path.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "id --canonical {}: {}",
        path.display(),
        stderr(&out)
    );
    out.stdout
}

/// `{"schema": 1, ...` with any whitespace.
fn starts_with_schema_1(text: &str) -> bool {
    let compact: String = text
        .chars()
        .take(64)
        .filter(|c| !c.is_whitespace())
        .collect();
    compact.starts_with("{\"schema\":1,")
}

/// `id --json` output; checks it is schema 1 and returns its structural_hash.
fn our_hash(path: &Path) -> String {
    let out = run(&["id", "--json", path.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "id --json {}: {}",
        path.display(),
        stderr(&out)
    );
    let text = stdout(&out);
    assert!(
        starts_with_schema_1(&text),
        "id --json must start with {{\"schema\": 1: {text}"
    );
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["structural_hash"].as_str().unwrap().to_owned()
}

fn assert_matches_reference(paths: &[PathBuf]) {
    for (path, r) in paths.iter().zip(reference(paths)) {
        let ours = our_canonical(path);
        let expected = format!("{}\n", r.canonical);
        assert!(
            ours == expected.as_bytes(),
            "{}: canonical JSON differs from the reference\nours:      {}\nreference: {}",
            path.display(),
            String::from_utf8_lossy(&ours),
            expected
        );
        assert_eq!(
            our_hash(path),
            r.hash,
            "{}: structural hash",
            path.display()
        );
        assert_eq!(
            hex_sha256(r.canonical.as_bytes()),
            r.hash,
            "the reference's own hash"
        );
    }
}

fn hex_sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn committed_fixtures_match_the_python_reference() {
    assert_matches_reference(&committed_fixtures());
}

#[test]
fn vocab262k_matches_the_python_reference() {
    let dir = tempfile::tempdir().unwrap();
    run_python(
        "make_fixtures.py",
        &[dir.path().to_str().unwrap(), "--only", "vocab262k.gguf"],
    );
    let path = dir.path().join("vocab262k.gguf");
    assert_matches_reference(std::slice::from_ref(&path));

    // The vocabulary is summarized, not dumped, by inspect.
    let out = run(&["inspect", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    for (key, summary) in [
        ("tokenizer.ggml.tokens:", "[262144 × string]"),
        ("tokenizer.ggml.scores:", "[262144 × f32]"),
        ("tokenizer.ggml.token_type:", "[262144 × i32]"),
    ] {
        assert!(
            text.lines().any(|l| l.contains(key) && l.contains(summary)),
            "inspect should summarize {key} as {summary}:\n{text}"
        );
    }
    // The chat template is shortened, with its length noted.
    let template = text
        .lines()
        .find(|l| l.contains("tokenizer.chat_template:"))
        .unwrap();
    assert!(
        template.len() < 200 && template.contains("6396"),
        "{template}"
    );
    assert!(
        text.len() < 64 * 1024,
        "inspect printed {} bytes for a 262k vocabulary",
        text.len()
    );
}

#[test]
fn golden_vectors() {
    let mut golden: BTreeMap<String, serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(fixture("golden.json")).unwrap()).unwrap();
    // Training checkpoints' model identities (SPEC §5d), a second hash beside the structural one.
    let model_vectors = golden.remove("model_identity").unwrap();
    // Three files, two multi-file models that are the same models as two of them,
    // two PyTorch checkpoints (legacy and zip layout) and a fairseq training checkpoint.
    assert_eq!(golden.len(), 8);
    let paths: Vec<PathBuf> = golden.keys().map(|name| fixture(name)).collect();
    for ((name, vector), r) in golden.iter().zip(reference(&paths)) {
        let canonical = vector["canonical"].as_str().unwrap();
        let hash = vector["structural_hash"].as_str().unwrap();
        assert_eq!(
            hex_sha256(canonical.as_bytes()),
            hash,
            "{name}: golden hash is SHA-256 of the golden canonical JSON"
        );
        assert_eq!(
            our_canonical(&fixture(name)),
            format!("{canonical}\n").into_bytes(),
            "{name}: canonical JSON"
        );
        assert_eq!(our_hash(&fixture(name)), hash, "{name}: structural hash");
        assert_eq!(r.canonical, canonical, "{name}: Python reference");
    }
    // The model identity: Lightning's hand-built checkpoint, Lightning's own at steps 2 and 3
    // and fairseq's; the structural hashes above are untouched by it.
    let model_vectors = model_vectors.as_object().unwrap();
    assert_eq!(model_vectors.len(), 5);
    let paths: Vec<PathBuf> = model_vectors.keys().map(|name| fixture(name)).collect();
    for ((name, vector), r) in model_vectors.iter().zip(reference(&paths)) {
        let canonical = vector["canonical"].as_str().unwrap();
        let hash = vector["model_identity"].as_str().unwrap();
        assert_eq!(hex_sha256(canonical.as_bytes()), hash, "{name}");
        let out = run(&["id", "--model-canonical", fixture(name).to_str().unwrap()]);
        assert!(out.status.success(), "{name}: {}", stderr(&out));
        assert_eq!(out.stdout, format!("{canonical}\n").into_bytes(), "{name}");
        let json: serde_json::Value = serde_json::from_str(&stdout(&run(&[
            "id",
            "--json",
            fixture(name).to_str().unwrap(),
        ])))
        .unwrap();
        assert_eq!(json["model_identity"], hash, "{name}: id --json");
        assert_ne!(json["structural_hash"], hash, "{name}: a second hash");
        assert_eq!(
            r.model,
            Some((canonical.to_owned(), hash.to_owned())),
            "{name}: Python reference"
        );
    }
    // A file that is no training checkpoint has no model identity, in either implementation.
    let plain = fixture("pytorch/basic-legacy.pt");
    assert!(reference(std::slice::from_ref(&plain))[0].model.is_none());
    let out = run(&["id", "--model-canonical", plain.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("not a training checkpoint"),
        "{}",
        stderr(&out)
    );
    // docs/SPEC.md quotes the same vectors.
    let spec = std::fs::read_to_string(repo_root().join("docs/SPEC.md")).unwrap();
    for (name, vector) in golden.iter().chain(model_vectors) {
        let hash = vector["structural_hash"]
            .as_str()
            .or(vector["model_identity"].as_str())
            .unwrap();
        let canonical = vector["canonical"].as_str().unwrap();
        assert!(
            spec.contains(hash),
            "the spec does not quote the hash of {name}"
        );
        assert!(
            spec.contains(canonical),
            "the spec does not quote the canonical JSON of {name}"
        );
    }
}

/// make_fixtures.py still produces the committed fixtures: byte for byte for GGUF (deterministic
/// writer), identity for safetensors (the package orders __metadata__ by a seeded hash map).
#[test]
fn regenerated_fixtures_have_the_committed_identities() {
    let dir = tempfile::tempdir().unwrap();
    run_python("make_fixtures.py", &[dir.path().to_str().unwrap()]);
    for committed in committed_fixtures() {
        let name = committed.file_name().unwrap();
        let regenerated = dir.path().join(name);
        assert!(
            regenerated.exists(),
            "make_fixtures.py no longer writes {name:?}"
        );
        if committed.extension().unwrap() == "gguf" {
            assert!(
                std::fs::read(&committed).unwrap() == std::fs::read(&regenerated).unwrap(),
                "{name:?} differs from what make_fixtures.py writes now: regenerate the fixtures"
            );
        } else {
            assert_eq!(our_hash(&committed), our_hash(&regenerated), "{name:?}");
        }
    }
    // The multi-file golden models: the same files, byte for byte for GGUF and for the index.
    for model in ["golden-sharded", "golden-split"] {
        let mut names: Vec<_> = std::fs::read_dir(fixture(model))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        let mut regenerated: Vec<_> = std::fs::read_dir(dir.path().join(model))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        regenerated.sort();
        assert_eq!(
            names, regenerated,
            "{model}: make_fixtures.py writes other files"
        );
        for name in names {
            let (committed, fresh) = (
                fixture(model).join(&name),
                dir.path().join(model).join(&name),
            );
            if name.to_str().unwrap().ends_with(".safetensors") {
                assert_eq!(our_hash(&committed), our_hash(&fresh), "{model}/{name:?}");
            } else {
                assert!(
                    std::fs::read(&committed).unwrap() == std::fs::read(&fresh).unwrap(),
                    "{model}/{name:?} differs from what make_fixtures.py writes now"
                );
            }
        }
    }
    let generated = std::fs::read_dir(dir.path()).unwrap().count();
    assert_eq!(
        generated,
        committed_fixtures().len() + 2,
        "make_fixtures.py writes files that are not committed"
    );
}

/// Our ggml type table (names and sizes) agrees with gguf-py's GGML_QUANT_SIZES for every type id
/// gguf-py 0.19 knows, except q8_1 (gguf-py: 40 bytes per block, ggml: 36) and type 42 (q2_0,
/// newer than gguf-py 0.19).
#[test]
fn gguf_type_table_agrees_with_gguf_py() {
    let script = "import json\n\
        from gguf import GGML_QUANT_SIZES, GGMLQuantizationType\n\
        print(json.dumps({t.name.lower(): [int(t), *GGML_QUANT_SIZES[t]] for t in GGMLQuantizationType}))\n";
    let out = std::process::Command::new(python())
        .args(["-c", script])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let gguf_py: BTreeMap<String, (u32, u64, u64)> = serde_json::from_slice(&out.stdout).unwrap();
    assert!(gguf_py.len() >= 30, "{gguf_py:?}");

    let out = run(&[
        "inspect",
        "--json",
        fixture("quant-types.gguf").to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ours: BTreeMap<String, (String, u64, u64)> = doc["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let n: u64 = t["shape"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d.as_u64().unwrap())
                .product();
            let name = t["name"]
                .as_str()
                .unwrap()
                .strip_prefix("t.")
                .unwrap()
                .to_owned();
            (
                name,
                (
                    t["dtype"].as_str().unwrap().to_owned(),
                    n,
                    t["byte_length"].as_u64().unwrap(),
                ),
            )
        })
        .collect();

    for (name, &(id, block, size)) in &gguf_py {
        let (dtype, n, byte_length) = ours.get(name).unwrap_or_else(|| {
            panic!("quant-types.gguf lacks {name} (id {id}): regenerate the fixtures")
        });
        assert_eq!(dtype, name, "type id {id}: dtype name");
        if name == "q8_1" {
            assert_eq!(
                (block, size),
                (32, 40),
                "gguf-py's q8_1 size changed: revisit the documented discrepancy"
            );
            assert_eq!(
                *byte_length,
                n / 32 * 36,
                "q8_1 follows ggml: 36 bytes per 32 elements"
            );
        } else {
            assert_eq!(
                *byte_length,
                n / block * size,
                "{name} (id {id}): byte length"
            );
        }
    }
    assert!(
        !gguf_py.values().any(|&(id, ..)| id == 42),
        "gguf-py now knows type 42: compare it too"
    );
    let (dtype, n, byte_length) = &ours["q2_0"];
    assert_eq!((dtype.as_str(), *byte_length), ("q2_0", n / 64 * 18));
    assert_eq!(
        ours.len(),
        gguf_py.len() + 1,
        "quant-types.gguf has types gguf-py does not know besides q2_0"
    );
}
