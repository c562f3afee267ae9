//! The core commands (`inspect`, `id`, `textconv`) describe `.wdelta` files, so `git diff`
//! shows delta headers.

mod common;

use common::models::make_models;
use common::{run_in, stdout};
use serde_json::{Value, json};

fn make_delta(dir: &std::path::Path) {
    // One normal-distributed tensor, and the same plus 0.01.
    let w =
        |fill: Value| json!([{"name": "w", "dtype": "float32", "shape": [8, 16], "fill": fill}]);
    make_models(
        dir,
        &json!({
            "base.safetensors": {"kind": "safetensors", "tensors": w(json!({"normal": 0}))},
            "tuned.safetensors": {"kind": "safetensors", "tensors": w(json!({"normal": 0, "plus": 0.01}))},
        }),
    );
    let out = run_in(
        Some(dir),
        &[
            "delta",
            "create",
            "--strategy",
            "int4",
            "--base",
            "base.safetensors",
            "tuned.safetensors",
            "-o",
            "d.wdelta",
        ],
    );
    assert!(out.status.success(), "{}", common::stderr(&out));
}

#[test]
fn inspect_id_and_textconv_describe_a_delta() {
    let dir = tempfile::tempdir().unwrap();
    make_delta(dir.path());
    let parent = {
        let out = run_in(
            Some(dir.path()),
            &["delta", "inspect", "--json", "d.wdelta"],
        );
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        json["parent_hash"].as_str().unwrap().to_owned()
    };
    assert_eq!(parent.len(), 64);

    let inspect = run_in(Some(dir.path()), &["inspect", "d.wdelta"]);
    assert!(inspect.status.success());
    assert!(stdout(&inspect).contains("format: wdelta version 1"));
    assert!(stdout(&inspect).contains(&parent));
    assert!(stdout(&inspect).contains("tensor w: int4 [8, 16]"));

    let id = run_in(Some(dir.path()), &["id", "--json", "d.wdelta"]);
    let json: serde_json::Value = serde_json::from_slice(&id.stdout).unwrap();
    assert_eq!(json["schema"], 1);
    assert_eq!(json["format"], "wdelta");
    assert_eq!(json["parent_hash"], parent.as_str());

    let textconv = run_in(Some(dir.path()), &["textconv", "d.wdelta"]);
    assert!(textconv.status.success());
    let text = stdout(&textconv);
    let bytes = std::fs::read(dir.path().join("d.wdelta")).unwrap();
    let digest = {
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(&bytes))
    };
    let head = format!(
        "weight-inspect textconv 5\nbytes: sha256:{digest}, {} bytes\ndelta: .wdelta version \
         1, int4 (approximate): parent hash {parent}, 1 tensors changed, {} bytes, update lost ",
        bytes.len(),
        bytes.len()
    );
    // The line every reader shows, then the description.
    assert!(text.contains("\nformat: wdelta version 1\n"), "{text}");
    assert_eq!(
        text.lines().nth(2).map(|l| l.trim_start_matches("delta: ")),
        stdout(&inspect)
            .lines()
            .next()
            .map(|l| l.trim_start_matches("delta: ")),
        "textconv and inspect show the same line"
    );
    assert!(text.starts_with(&head), "{text}");
}

#[test]
fn a_corrupt_delta_is_an_error_for_inspect_and_a_note_for_textconv() {
    let dir = tempfile::tempdir().unwrap();
    make_delta(dir.path());
    let path = dir.path().join("d.wdelta");
    let mut bytes = std::fs::read(&path).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&path, bytes).unwrap();

    let inspect = run_in(Some(dir.path()), &["inspect", "d.wdelta"]);
    assert_eq!(inspect.status.code(), Some(2));
    assert!(common::stderr(&inspect).contains("d.wdelta"));

    let textconv = run_in(Some(dir.path()), &["textconv", "d.wdelta"]);
    assert_eq!(textconv.status.code(), Some(0));
    assert!(stdout(&textconv).contains("unreadable .wdelta file"));
}
