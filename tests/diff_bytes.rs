//! `diff` exits as diff(1) does: 1 whenever the two files differ, in structure or in bytes, and
//! says which. Pairs of one structure (a weight-only change, a copy cut short, an identical
//! copy) are written by the reference writers, compared as files, as `REV:path`, through git's
//! external driver, `weight-inspect git diff`, textconv and `ci`, in a real LFS repository.

mod common;

use std::path::Path;

use serde_json::{Value, json};

use common::git::Repo;
use common::models::make_models;
use common::{assert_contains, assert_lacks, code, run_in, stderr, stdout};

/// A safetensors spec of two float32 tensors: `a` always zeros, `b` filled with `b_fill`.
fn st(b_fill: f64) -> Value {
    json!({"kind": "safetensors", "tensors": [
        {"name": "a", "dtype": "float32", "shape": [64, 64]},
        {"name": "b", "dtype": "float32", "shape": [64, 64], "fill": b_fill},
    ]})
}

/// A GGUF spec of the same two tensors.
fn gg(b_fill: f64) -> Value {
    json!({"kind": "gguf", "metadata": {}, "tensors": [
        {"name": "a", "dtype": "f32", "shape": [64, 64]},
        {"name": "b", "dtype": "f32", "shape": [64, 64], "fill": b_fill},
    ]})
}

fn truncated_copy(from: &Path, to: &Path, cut: usize) {
    let bytes = std::fs::read(from).unwrap();
    std::fs::write(to, &bytes[..bytes.len() - cut]).unwrap();
}

fn diff(dir: &Path, args: &[&str]) -> (i32, String) {
    let mut all = vec!["diff"];
    all.extend_from_slice(args);
    let out = run_in(Some(dir), &all);
    (code(&out), format!("{}{}", stdout(&out), stderr(&out)))
}

#[test]
fn exit_status_on_weight_only_truncated_and_identical_files() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    make_models(
        dir,
        &json!({
            "a.safetensors": st(1.0), "b.safetensors": st(2.0),
            "a.gguf": gg(1.0), "b.gguf": gg(2.0),
        }),
    );
    for ext in ["safetensors", "gguf"] {
        let (a, b, c, t) = (
            format!("a.{ext}"),
            format!("b.{ext}"),
            format!("c.{ext}"),
            format!("t.{ext}"),
        );
        std::fs::copy(dir.join(&a), dir.join(&c)).unwrap();
        truncated_copy(&dir.join(&a), &dir.join(&t), 100);

        let (status, text) = diff(dir, &[&a, &b]);
        assert_eq!(status, 1, "weight-only {ext}: {text}");
        assert_contains(
            &text,
            &[
                "No structural differences.",
                "tensor data differs: first in b (offset ",
                "`--values` compares the values",
            ],
        );

        let (status, text) = diff(dir, &[&a, &c]);
        assert_eq!(status, 0, "identical {ext}: {text}");
        let size = std::fs::metadata(dir.join(&a)).unwrap().len();
        assert_contains(&text, &[&format!("bytes: identical ({size} bytes)")]);

        let (status, text) = diff(dir, &[&a, &t]);
        assert_eq!(status, 1, "truncated {ext}: {text}");
        assert_contains(
            &text,
            &[
                "new incomplete: ",
                &format!("bytes differ: {size} -> {} bytes", size - 100),
            ],
        );

        // Headers only: the weight-only pair is not told apart, and the output says so; a side
        // cut short is still a difference.
        let (status, text) = diff(dir, &["--structure-only", &a, &b]);
        assert_eq!(status, 0, "--structure-only {ext}: {text}");
        assert_contains(
            &text,
            &["bytes: not compared (--structure-only: headers only)"],
        );
        let (status, text) = diff(dir, &["--structure-only", &a, &t]);
        assert_eq!(status, 1, "--structure-only truncated {ext}: {text}");
    }

    // The JSON keeps schema 1 first and gains "bytes".
    let out = run_in(Some(dir), &["diff", "--json", "a.gguf", "b.gguf"]);
    assert_eq!(code(&out), 1);
    let text = stdout(&out);
    assert!(text.starts_with("{\n  \"schema\": 1,"), "{text}");
    let doc: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(doc["bytes"]["identical"], json!(false));
    assert_eq!(doc["bytes"]["in"], json!("tensor"));
    assert_eq!(doc["bytes"]["tensor"], json!("b"));
    let offset = doc["bytes"]["first_difference"].as_u64().unwrap();
    let (a, b) = (
        std::fs::read(dir.join("a.gguf")).unwrap(),
        std::fs::read(dir.join("b.gguf")).unwrap(),
    );
    let first = a.iter().zip(&b).position(|(x, y)| x != y).unwrap();
    assert_eq!(
        offset, first as u64,
        "the first byte that differs, as cmp finds it"
    );
    let out = run_in(Some(dir), &["diff", "--json", "a.gguf", "c.gguf"]);
    let doc: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(doc["bytes"]["identical"], json!(true));
    assert_eq!(doc["bytes"]["size"], json!(a.len()));
}

/// A repository with `m.safetensors` (LFS) committed three times: v1, v2 with other weights
/// only, v3 cut short; the drivers installed.
fn lineage() -> Repo {
    let repo = Repo::with_lfs(&["*.safetensors"]);
    let install = repo.wi(&["git", "install"]);
    assert_eq!(code(&install), 0, "{}", stderr(&install));
    make_models(&repo.dir, &json!({"m.safetensors": st(1.0)}));
    repo.write(
        ".weight-inspect.toml",
        "[[rules]]\npaths = [\"*.safetensors\"]\nallowed_dtypes = [\"f32\"]\n",
    );
    repo.commit_all("v1");
    make_models(&repo.dir, &json!({"m.safetensors": st(2.0)}));
    repo.commit_all("v2: weights only");
    let m = repo.path("m.safetensors");
    let full = std::fs::read(&m).unwrap();
    std::fs::write(&m, &full[..full.len() - 64]).unwrap();
    repo.commit_all("v3: cut short");
    repo
}

#[test]
fn weight_only_and_truncated_commits_through_git() {
    let repo = lineage();
    let hint = "`weight-inspect git diff --values` compares the values";
    // REV:path sides read the LFS objects from the local store.
    let out = repo.wi(&["diff", "HEAD~2:m.safetensors", "HEAD~1:m.safetensors"]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert_contains(&stdout(&out), &["tensor data differs: first in b (offset "]);
    let out = repo.wi(&["diff", "HEAD~2:m.safetensors", "HEAD~2:m.safetensors"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));

    // git's external driver.
    let driver = repo.ok(&["diff", "HEAD~2", "HEAD~1"]);
    assert_contains(
        &driver,
        &[
            "structure identical",
            "tensor data differs: first in b (offset ",
            hint,
        ],
    );
    assert_lacks(&driver, &["differ only in tensor data or layout"]);
    // The LFS oids, as textconv's `bytes:` lines show them.
    let size = std::fs::metadata(repo.lfs_object(&repo.lfs_oid("HEAD~2", "m.safetensors")))
        .unwrap()
        .len();
    let oids = format!(
        "bytes: sha256:{}, {size} bytes -> sha256:{}, {size} bytes\n",
        repo.lfs_oid("HEAD~2", "m.safetensors"),
        repo.lfs_oid("HEAD~1", "m.safetensors")
    );
    assert_contains(&driver, &[&oids]);
    // weight-inspect git diff, with its exit status and JSON.
    let out = repo.wi(&["git", "diff", "--exit-code", "HEAD~2", "HEAD~1"]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let fast = stdout(&out);
    assert_contains(
        &fast,
        &["tensor data differs: first in b (offset ", hint, &oids],
    );
    let json = repo.wi(&["git", "diff", "--json", "HEAD~2", "HEAD~1"]);
    let doc: Value = serde_json::from_str(&stdout(&json)).unwrap();
    assert_eq!(doc["schema"], json!(1));
    assert_eq!(doc["files"][0]["bytes"]["tensor"], json!("b"));
    // textconv: the bytes line changes, and nothing else.
    let textconv = repo.ok(&["diff", "--no-ext-diff", "HEAD~2", "HEAD~1"]);
    let changed: Vec<&str> = textconv
        .lines()
        .filter(|l| (l.starts_with('+') || l.starts_with('-')) && !l.starts_with("+++"))
        .filter(|l| !l.starts_with("---"))
        .collect();
    assert_eq!(changed.len(), 2, "{textconv}");
    assert!(changed.iter().all(|l| l[1..].starts_with("bytes: sha256:")));

    // The truncated commit: incomplete, and its size named.
    let driver = repo.ok(&["diff", "HEAD~1", "HEAD"]);
    assert_contains(&driver, &["new incomplete: ", "\nbytes differ: "]);

    // ci: the row and the log say that the data changed.
    let summary = repo.tmp.path().join("summary.md");
    let out = repo.wi(&[
        "ci",
        "--base",
        "HEAD~2",
        "--head",
        "HEAD~1",
        "--summary",
        summary.to_str().unwrap(),
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let log = stdout(&out);
    assert_contains(
        &log,
        &[
            "tensors +0 −0 ~0, metadata +0 −0 ~0; tensor data differs",
            // A clean verdict reads as check's, never "0 violations in 0 of 1 file".
            "1 file checked against .weight-inspect.toml, no violations",
        ],
    );
    assert_lacks(&log, &["0 violations"]);
    let md = std::fs::read_to_string(&summary).unwrap();
    assert_contains(
        &md,
        &[
            "| +0 −0 ~0 | +0 −0 ~0 | tensor data differs |",
            hint,
            "Policy `.weight-inspect.toml`: 1 file checked, no violations.",
        ],
    );
}

#[test]
fn a_gguf_cut_short_in_its_header_is_called_truncated() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    make_models(
        dir,
        &json!({"m.gguf": {"kind": "gguf", "metadata": {"general.name": "tiny",
            "tokenizer.ggml.tokens": ["a", "b", "c", "d"]}, "tensors": [
            {"name": "a", "dtype": "f32", "shape": [4]}]}}),
    );
    let whole = std::fs::read(dir.join("m.gguf")).unwrap();
    // Inside the key-value count's promise, inside a key, and inside the vocabulary.
    let tokens = whole
        .windows(21)
        .position(|w| w == b"tokenizer.ggml.tokens")
        .unwrap();
    for keep in [30, 60, tokens + 21 + 20] {
        let cut = dir.join(format!("cut{keep}.gguf"));
        std::fs::write(&cut, &whole[..keep]).unwrap();
        let out = run_in(Some(dir), &["inspect", cut.to_str().unwrap()]);
        assert_eq!(code(&out), 2, "{}", stdout(&out));
        let err = stderr(&out);
        assert!(err.contains("truncated"), "cut to {keep} bytes: {err}");
        assert!(err.contains(&format!("cut{keep}.gguf")), "{err}");
        assert!(err.contains("offset "), "{err}");
    }
}
