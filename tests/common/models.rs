//! Model and checkpoint files written by the reference libraries (gguf-py, safetensors, pickle)
//! through tests/common/make_models.py, which documents the spec format.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use super::{python, repo_root, stderr};

/// Writes every file of `specs` (`{"relative/path": spec, ...}`) under `dir`, creating parent
/// directories. The specs go to the script on stdin, so they may be large.
pub fn make_models(dir: &Path, specs: &Value) {
    std::fs::create_dir_all(dir).unwrap();
    let mut child = Command::new(python())
        .arg(repo_root().join("tests/common/make_models.py"))
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("failed to start python");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(specs.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().expect("python runs");
    assert!(
        out.status.success(),
        "make_models.py in {} failed:\n{}",
        dir.display(),
        stderr(&out)
    );
}

/// Writes one model file at `path` (see [`make_models`]).
pub fn make_model(path: &Path, spec: &Value) {
    let name = path.file_name().unwrap().to_str().unwrap();
    make_models(path.parent().unwrap(), &json!({ name: spec }));
}

/// A small GGUF spec with one `blk.N.weight` of shape [2, 256] (which fits every block size)
/// per dtype: f32/f16 tensors hold 0, 1, 2, ..., quantized ones zero blocks.
pub fn gguf(dtypes: &[&str], metadata: Value) -> Value {
    let tensors: Vec<Value> = dtypes
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let mut tensor =
                json!({"name": format!("blk.{i}.weight"), "dtype": d, "shape": [2, 256]});
            if matches!(*d, "f32" | "f16") {
                tensor["fill"] = json!("arange");
            }
            tensor
        })
        .collect();
    json!({"kind": "gguf", "metadata": metadata, "tensors": tensors})
}
