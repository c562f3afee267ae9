//! `weight-inspect check` on work-tree files: every rule, the output formats, rule merging,
//! pickle checkpoints made by Python's pickle, and policy errors with line and column.

mod common;

use common::git::Repo;
use common::models::{gguf, make_models};
use common::{code, combined};
use serde_json::json;

/// A plain directory (no git) with fixtures and a policy.
fn dir_with(policy: &str, spec: serde_json::Value) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(".weight-inspect.toml"), policy).unwrap();
    make_models(dir.path(), &spec);
    dir
}

fn check(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    let mut all = vec!["check"];
    all.extend_from_slice(args);
    common::run_in(Some(dir), &all)
}

#[test]
fn issue_example_policy_works_as_written() {
    // The example of the issue, with a real hash pinned in the second rule.
    let dir = dir_with(
        "",
        json!({
            "models/a/ok.gguf": gguf(&["f16", "q8_0"], json!({})),
            "models/a/quant.gguf": gguf(&["q4_k", "f32"], json!({})),
            "models/base.safetensors": {"kind": "safetensors", "metadata": {"format": "pt"},
                                        "tensors": [{"name": "w", "dtype": "float16", "shape": [2, 2]}]},
        }),
    );
    let id = common::run_in(
        Some(dir.path()),
        &["id", "--json", "models/base.safetensors"],
    );
    let id: serde_json::Value = serde_json::from_slice(&id.stdout).unwrap();
    let hash = id["structural_hash"].as_str().unwrap().to_string();
    let policy = format!(
        r#"[[rules]]
paths = ["models/**/*.gguf"]
allowed_dtypes = ["f32", "f16", "q8_0"]
require_lfs = true

[[rules]]
paths = ["models/base.safetensors"]
expected_hash = "{hash}"
required_metadata = {{ format = "pt" }}
forbid_formats = ["pickle"]
"#
    );
    std::fs::write(dir.path().join(".weight-inspect.toml"), policy).unwrap();
    // Outside git, require_lfs cannot be judged: an error, never a silent pass.
    let out = check(dir.path(), &["models/a/ok.gguf"]);
    assert_eq!(code(&out), 2, "{}", combined(&out));
    assert!(combined(&out).contains("require_lfs"), "{}", combined(&out));
    let out = check(dir.path(), &["models/base.safetensors"]);
    assert_eq!(code(&out), 0, "{}", combined(&out));
    assert!(
        common::stdout(&out).contains("1 file checked"),
        "{}",
        combined(&out)
    );

    // The same files in a repository with LFS: the GGUF rule applies fully.
    let repo = Repo::with_lfs(&["*.gguf"]);
    for f in [
        "models/a/ok.gguf",
        "models/a/quant.gguf",
        "models/base.safetensors",
        ".weight-inspect.toml",
    ] {
        repo.write(f, std::fs::read(dir.path().join(f)).unwrap());
    }
    repo.git(&["add", "."]);
    let out = repo.wi(&["check", "--staged"]);
    assert_eq!(code(&out), 1, "{}", combined(&out));
    let text = common::stdout(&out);
    assert!(
        text.contains("models/a/quant.gguf: allowed_dtypes: expected only f32, f16, q8_0; found q4_k in 1 tensor (blk.0.weight)"),
        "{text}"
    );
    assert_eq!(
        text.lines().count(),
        2,
        "one violation and the summary:\n{text}"
    );
    assert!(
        text.contains("1 violation in 1 of 3 files checked"),
        "{text}"
    );
}

#[test]
fn dtypes_metadata_and_limits() {
    let policy = r#"
[[rules]]
paths = ["*.gguf"]
denied_dtypes = ["q4_k", "Q4_0"]
required_metadata = { general.architecture = "llama", "general.name" = "base", "llama.context_length" = 4096 }
forbidden_metadata = ["general.url"]
max_tensors = 2
max_parameters = 1024
max_file_size = "1 MiB"

[[rules]]
paths = ["big.gguf"]
max_file_size = 100
"#;
    let dir = dir_with(
        policy,
        json!({
            "ok.gguf": gguf(&["f16", "q8_0"], json!({"general.name": "base", "llama.context_length": 4096})),
            "bad.gguf": gguf(&["q4_k", "q4_0", "f16"], json!({"general.name": "other", "general.url": "http://x"})),
            "big.gguf": gguf(&["f16"], json!({"general.name": "base", "llama.context_length": 4096})),
        }),
    );
    let out = check(dir.path(), &["ok.gguf"]);
    assert_eq!(code(&out), 0, "{}", combined(&out));

    let out = check(dir.path(), &["bad.gguf", "big.gguf"]);
    assert_eq!(code(&out), 1, "{}", combined(&out));
    let text = common::stdout(&out);
    for expected in [
        "bad.gguf: denied_dtypes: expected none of q4_k, q4_0; found q4_0 in 1 tensor (blk.1.weight) [.weight-inspect.toml:2]",
        "bad.gguf: denied_dtypes: expected none of q4_k, q4_0; found q4_k in 1 tensor (blk.0.weight)",
        "bad.gguf: required_metadata: expected general.name = \"base\"; found general.name = \"other\"",
        "bad.gguf: required_metadata: expected llama.context_length = 4096; found no metadata key llama.context_length",
        "bad.gguf: forbidden_metadata: expected no metadata key general.url; found general.url = \"http://x\"",
        "bad.gguf: max_tensors: expected at most 2 tensors; found 3 tensors",
        "bad.gguf: max_parameters: expected at most 1024 parameters; found 1536 parameters",
        // The later rule wins for max_file_size, and names its own line.
        "big.gguf: max_file_size: expected at most 100 bytes; found",
        "[.weight-inspect.toml:11]",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
    }
    assert!(!text.contains("general.architecture"), "{text}");
    assert!(
        text.contains("8 violations in 2 of 2 files checked"),
        "{text}"
    );
}

#[test]
fn safetensors_metadata_compares_as_text() {
    let policy = r#"
[[rules]]
paths = ["*.safetensors"]
required_metadata = { format = "pt", epoch = 3 }
allowed_dtypes = ["bf16", "f32"]
"#;
    let dir = dir_with(
        policy,
        json!({
            "a.safetensors": {"kind": "safetensors", "metadata": {"format": "pt", "epoch": "3"},
                              "tensors": [{"name": "w", "dtype": "float32", "shape": [2, 2]}]},
            "b.safetensors": {"kind": "safetensors", "metadata": {"format": "np"},
                              "tensors": [{"name": "w", "dtype": "float16", "shape": [2, 2]},
                                          {"name": "v", "dtype": "int8", "shape": [4]}]},
        }),
    );
    let out = check(dir.path(), &["a.safetensors"]);
    assert_eq!(code(&out), 0, "{}", combined(&out));
    let out = check(dir.path(), &["b.safetensors"]);
    let text = common::stdout(&out);
    assert_eq!(code(&out), 1, "{text}");
    assert!(
        text.contains("required_metadata: expected format = \"pt\"; found format = \"np\""),
        "{text}"
    );
    assert!(
        text.contains("required_metadata: expected epoch = 3; found no metadata key epoch"),
        "{text}"
    );
    assert!(
        text.contains("allowed_dtypes: expected only bf16, f32; found f16 in 1 tensor (w)"),
        "{text}"
    );
    assert!(
        text.contains("allowed_dtypes: expected only bf16, f32; found i8 in 1 tensor (v)"),
        "{text}"
    );
}

#[test]
fn pickle_checkpoints_are_recognized_and_their_imports_listed() {
    let policy = r#"
[[rules]]
paths = ["**/*.{bin,pt,pth,ckpt}"]
forbid_formats = ["pickle"]
"#;
    let dir = dir_with(
        policy,
        json!({
            "zip.pt": {"kind": "torch_zip"},
            "evil.pth": {"kind": "torch_zip", "evil": true},
            "legacy.bin": {"kind": "raw_pickle", "legacy": true},
            "p4.ckpt": {"kind": "raw_pickle", "protocol": 4, "evil": true},
            "p5.ckpt": {"kind": "raw_pickle", "protocol": 5},
            "os.bin": {"kind": "os_system"},
            "safe.bin": gguf(&["f16"], json!({})),
        }),
    );
    std::fs::write(dir.path().join("notes.bin"), b"\x80\x02\xff not a pickle").unwrap();
    let out = check(dir.path(), &["."]);
    let text = common::stdout(&out);
    assert_eq!(code(&out), 1, "{}", combined(&out));
    let line = |file: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("{file}: ")))
            .unwrap_or_else(|| panic!("no line for {file}:\n{text}"))
            .to_string()
    };
    let torch = "collections.OrderedDict, torch._utils._rebuild_tensor_v2, torch.FloatStorage";
    assert_eq!(
        line("zip.pt"),
        format!(
            "zip.pt: forbid_formats: expected none of the formats pickle; found pickle (zip \
             archive, archive/data.pkl) importing {torch} [.weight-inspect.toml:2]"
        )
    );
    let evil = line("evil.pth");
    assert!(
        evil.contains(&format!("importing {torch}, posix.system;")),
        "{evil}"
    );
    assert!(
        evil.contains("dangerous: posix.system (os.system)"),
        "{evil}"
    );
    assert!(line("legacy.bin").contains(&format!("pickle (raw, protocol 2) importing {torch} [")));
    assert!(line("p4.ckpt").contains("pickle (raw, protocol 4) importing collections.OrderedDict"));
    assert!(line("p4.ckpt").contains("dangerous: posix.system"));
    assert!(line("p5.ckpt").contains("pickle (raw, protocol 5)"));
    let os = line("os.bin");
    assert!(
        os.contains("importing os.system; dangerous: os.system"),
        "{os}"
    );
    assert!(!text.contains("safe.bin"), "{text}");
    assert!(!text.contains("notes.bin"), "{text}");
    // The three payloads are dangerous globals too (pickle_globals, on by default).
    for file in ["evil.pth", "p4.ckpt", "os.bin"] {
        assert!(
            text.contains(&format!("{file}: pickle_globals: ")),
            "{file}: {text}"
        );
    }
    assert!(
        text.contains("9 violations in 6 of 8 files checked"),
        "{text}"
    );
}

#[test]
fn structural_rules_on_a_non_model_are_violations() {
    let policy = r#"
[[rules]]
paths = ["*.bin"]
allowed_dtypes = ["f16"]
"#;
    let dir = dir_with(policy, json!({"model.bin": {"kind": "torch_zip"}}));
    std::fs::write(dir.path().join("empty.bin"), b"").unwrap();
    let out = check(dir.path(), &["model.bin", "empty.bin"]);
    let text = common::stdout(&out);
    assert_eq!(code(&out), 1, "{text}");
    // A PyTorch checkpoint is read: the structural rules judge its tensors.
    assert!(
        text.contains(
            "model.bin: allowed_dtypes: expected only f16; found f32 in 1 tensor (weight)"
        ),
        "{text}"
    );
    assert!(text.contains("empty.bin: format: expected a readable GGUF, safetensors or PyTorch file (for allowed_dtypes); found none of GGUF, safetensors or PyTorch (first bytes none: the file is empty)"), "{text}");
}

#[test]
fn json_and_github_outputs() {
    let policy = "[[rules]]\npaths = [\"m/*\"]\nallowed_dtypes = [\"f32\"]\n";
    let dir = dir_with(policy, json!({"m/a,b:c.gguf": gguf(&["f16"], json!({}))}));
    let out = check(dir.path(), &["--format", "json", "m"]);
    assert_eq!(code(&out), 1);
    let text = common::stdout(&out);
    assert!(text.starts_with("{\n  \"schema\": 1,"), "{text}");
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["source"], "worktree");
    assert_eq!(v["selection"], "paths");
    assert_eq!(v["checked"], 1);
    assert_eq!(v["failing"], 1);
    assert_eq!(v["violations"][0]["path"], "m/a,b:c.gguf");
    assert_eq!(v["violations"][0]["rule"], "allowed_dtypes");
    assert_eq!(v["violations"][0]["expected"], "only f32");
    assert_eq!(v["violations"][0]["policy_rule"], 1);
    assert_eq!(v["violations"][0]["policy_line"], 1);
    assert_eq!(v["errors"], json!([]));

    let out = check(dir.path(), &["--format", "github", "m"]);
    assert_eq!(code(&out), 1);
    let first = common::stdout(&out).lines().next().unwrap().to_string();
    assert_eq!(
        first,
        "::error file=m/a%2Cb%3Ac.gguf,title=weight-inspect%3A allowed_dtypes::expected only f32; \
         found f16 in 1 tensor (blk.0.weight) (.weight-inspect.toml:1)"
    );
}

#[test]
fn policy_errors_name_file_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    make_models(dir.path(), &json!({"a.gguf": gguf(&["f16"], json!({}))}));
    let cases: &[(&str, &str, &str)] = &[
        (
            "[[rules]]\npaths = [\"*.gguf\"\n",
            "p.toml:2:18:",
            "unclosed array",
        ),
        (
            "[[rules]]\npaths = [\"*.gguf\"]\nallowed_dtype = [\"f16\"]\n",
            "p.toml:3:1:",
            "unknown field `allowed_dtype`",
        ),
        (
            "[[rules]]\npaths = [\"*.gguf\", \"a/[b\"]\n",
            "p.toml:2:20:",
            "bad glob \"a/[b\"",
        ),
        (
            "[[rules]]\npaths = [\"*.gguf\"]\nrequire_lfs = \"yes\"\n",
            "p.toml:3:15:",
            "expected a boolean",
        ),
        (
            "[[rules]]\npaths = [\"*.gguf\"]\nmax_tensors = -3\n",
            "p.toml:3:15:",
            "-3",
        ),
        (
            "[[rules]]\npaths = [\"*.gguf\"]\nexpected_hash = \"abc\"\n",
            "p.toml:3:17:",
            "64 hex digits",
        ),
        (
            "[[rules]]\npaths = [\"*.gguf\"]\nallowed_dtypes = [\"q4k\"]\n",
            "p.toml:3:18:",
            "unknown dtype \"q4k\"",
        ),
        (
            "[[rules]]\npaths = [\"*.gguf\"]\nforbid_formats = [\"onnx\"]\n",
            "p.toml:3:",
            "onnx",
        ),
        (
            "\n[[rule]]\npaths = [\"*.gguf\"]\n",
            "p.toml:2:",
            "unknown field `rule`",
        ),
        (
            "[[rules]]\nallowed_dtypes = [\"f16\"]\n",
            "p.toml:1:1:",
            "missing field `paths`",
        ),
    ];
    for (policy, location, message) in cases {
        std::fs::write(dir.path().join("p.toml"), policy).unwrap();
        let out = check(dir.path(), &["--policy", "p.toml", "a.gguf"]);
        let err = common::stderr(&out);
        assert_eq!(code(&out), 2, "{policy:?}: {}", combined(&out));
        assert!(
            err.starts_with(&format!("weight-inspect: {location}")),
            "{policy:?}: {err}"
        );
        assert!(err.contains(message), "{policy:?}: {err}");
        assert!(common::stdout(&out).is_empty(), "{policy:?}");
    }
    // `policy validate` reports the same way; a valid file says so.
    let out = common::run_in(
        Some(dir.path()),
        &["policy", "validate", "--policy", "p.toml"],
    );
    assert_eq!(code(&out), 2);
    std::fs::write(dir.path().join("p.toml"), "[[rules]]\npaths = [\"*\"]\n").unwrap();
    let out = common::run_in(
        Some(dir.path()),
        &["policy", "validate", "--policy", "p.toml"],
    );
    assert_eq!(code(&out), 0, "{}", combined(&out));
    assert_eq!(common::stdout(&out), "p.toml: valid, 1 rule\n");
    // No policy file at all is an error too.
    let out = check(dir.path(), &["a.gguf"]);
    assert_eq!(code(&out), 2);
    assert!(
        common::stderr(&out).contains("no policy file"),
        "{}",
        combined(&out)
    );
}
