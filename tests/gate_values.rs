//! `diff --values` of float64 tensors near 1e-200 (issue 44): every tensor's sums are merged
//! from its pieces into `Sums::default()`, which once brought a tiny piece to scale 0 and lost
//! it (`rel_l2: 0.0, cosine: null`). The files are written by the safetensors package; the
//! figures are numpy's, of the same values times 1e200.

mod common;

use serde_json::Value;

const WRITE: &str = r#"
import sys
import numpy as np
from safetensors.numpy import save_file

old = np.array([1.0, 2.0, 3.0, 4.0, 5.0]) * 1e-200
new = np.array([1.0, 2.5, 3.0, 4.0, 5.5]) * 1e-200
# Longer than one piece of the comparison (4096 elements): zeros, then the tiny values.
long_old = np.concatenate([np.zeros(5000), np.tile(old, 1000)])
long_new = np.concatenate([np.zeros(5000), np.tile(new, 1000)])
save_file({"tiny": old, "long": long_old}, sys.argv[1])
save_file({"tiny": new, "long": long_new}, sys.argv[2])
for name, a, b in (("tiny", old, new), ("long", long_old, long_new)):
    a, b = a * 1e200, b * 1e200
    rel = np.linalg.norm(b - a) / np.linalg.norm(a)
    cos = a @ b / (np.linalg.norm(a) * np.linalg.norm(b))
    print(name, repr(float(rel)), repr(float(cos)))
"#;

#[test]
fn float64_values_near_1e_200_keep_their_figures() {
    let dir = tempfile::tempdir().unwrap();
    let (old, new) = (
        dir.path().join("old.safetensors"),
        dir.path().join("new.safetensors"),
    );
    let written = common::run_python_source(WRITE, &[old.to_str().unwrap(), new.to_str().unwrap()]);
    let out = common::run(&[
        "diff",
        "--values",
        "--json",
        old.to_str().unwrap(),
        new.to_str().unwrap(),
    ]);
    assert_eq!(common::code(&out), 1, "{}", common::combined(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    for line in common::stdout(&written).lines() {
        let parts: Vec<&str> = line.split_whitespace().collect();
        let (name, rel, cos): (&str, f64, f64) = (
            parts[0],
            parts[1].parse().unwrap(),
            parts[2].parse().unwrap(),
        );
        let tensor = doc["values"]["tensors"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("{name} not compared: {doc:#}"));
        let ours_rel = tensor["rel_l2"]
            .as_f64()
            .unwrap_or_else(|| panic!("{tensor}"));
        let ours_cos = tensor["cosine"]
            .as_f64()
            .unwrap_or_else(|| panic!("{tensor}"));
        assert!(
            (ours_rel - rel).abs() <= 1e-9 * rel,
            "{name}: rel_l2 {ours_rel} vs numpy {rel}"
        );
        assert!(
            (ours_cos - cos).abs() <= 1e-12,
            "{name}: cosine {ours_cos} vs numpy {cos}"
        );
    }
}
