//! `diff --values`: dequantization against gguf-py's, value diffs against a numpy (float64)
//! reference, identical files, and hostile files.

mod common;

use std::path::Path;

use common::{python, repo_root, run, stderr, stdout};
use serde_json::Value;

fn fixtures(kind: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(python())
        .arg(repo_root().join("tests/common/values_fixtures.py"))
        .args([kind, dir.path().to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "values_fixtures.py: {}", stderr(&out));
    dir
}

#[test]
fn dequantization_matches_gguf_py_bit_for_bit() {
    let dir = fixtures("blocks");
    let path = dir.path().join("blocks.gguf");
    let artifact = weight_inspect::read_file(&path).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let mut checked = Vec::new();
    for (name, info) in &artifact.tensors {
        let start = info.file_offset as usize;
        let raw = &bytes[start..start + info.byte_length as usize];
        let ours = weight_inspect::dequantize(info.dtype, raw).unwrap();
        let reference = std::fs::read(dir.path().join(format!("{name}.f32"))).unwrap();
        let reference: Vec<u32> = reference
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(ours.len(), reference.len(), "{name}");
        for (i, (o, r)) in ours.iter().zip(&reference).enumerate() {
            let o = *o as f32;
            assert!(
                o.to_bits() == *r || (o.is_nan() && f32::from_bits(*r).is_nan()),
                "{name} ({}) value {i}: ours {o:e}, gguf-py {:e}",
                info.dtype,
                f32::from_bits(*r)
            );
        }
        checked.push(info.dtype.name);
    }
    // Every quantized type with a decoder was covered.
    for dtype in weight_inspect::DECODED_GGUF_TYPES {
        let plain = ["f32", "f16", "f64", "i8", "i16", "i32", "i64"];
        assert!(
            plain.contains(dtype) || checked.contains(dtype),
            "{dtype} has no gguf-py check"
        );
    }
}

#[test]
fn the_iq_tables_are_what_the_generator_writes() {
    let out = common::run_python("gen_iq_tables.py", &[]);
    let committed =
        std::fs::read_to_string(repo_root().join("src/values/dequant/iq_tables.rs")).unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout) == committed,
        "src/values/dequant/iq_tables.rs differs from scripts/gen_iq_tables.py's output"
    );
}

/// `diff --values --json` of `old` and `new`, and the reference script's figures.
fn ours_and_reference(old: &Path, new: &Path) -> (Value, Value, i32) {
    let (o, n) = (old.to_str().unwrap(), new.to_str().unwrap());
    let out = run(&["diff", "--values", "--json", o, n]);
    assert!(out.status.code() != Some(2), "{}", stderr(&out));
    let ours: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let reference = common::run_python("values_reference.py", &[o, n]);
    let reference: Value = serde_json::from_slice(&reference.stdout).unwrap();
    (ours, reference, out.status.code().unwrap())
}

fn close(ours: &Value, reference: &Value, tolerance: f64) -> bool {
    match (ours.as_f64(), reference.as_f64()) {
        (Some(a), Some(b)) => (a - b).abs() <= tolerance * b.abs().max(1e-300),
        _ => ours == reference,
    }
}

/// Every tensor the reference compares, ours compares with the same figures.
fn assert_matches_reference(ours: &Value, reference: &Value) {
    let tensors = ours["values"]["tensors"].as_array().unwrap();
    let reference = reference.as_object().unwrap();
    assert_eq!(tensors.len(), reference.len(), "{tensors:#?}");
    for t in tensors {
        let name = t["name"].as_str().unwrap();
        let r = &reference[name];
        assert_eq!(t["changed"], r["changed"], "{name}");
        for key in ["changed_elements", "nonfinite_elements"] {
            assert_eq!(t[key], r[key], "{name}: {key}");
        }
        if r.get("bits_differ").is_some() {
            assert_eq!(t["bits_differ"], r["bits_differ"], "{name}: bits_differ");
        }
        assert!(
            close(&t["max_abs_diff"], &r["max_abs_diff"], 1e-12),
            "{name}: {t} vs {r}"
        );
        for key in ["rel_l2", "cosine"] {
            assert!(close(&t[key], &r[key], 1e-9), "{name}: {key}: {t} vs {r}");
        }
    }
}

fn tensor<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["values"]["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("{name} not compared"))
}

#[test]
fn gguf_value_diffs_match_the_numpy_reference() {
    let dir = fixtures("pairs");
    let (ours, reference, code) =
        ours_and_reference(&dir.path().join("old.gguf"), &dir.path().join("new.gguf"));
    assert_eq!(code, 1);
    assert_matches_reference(&ours, &reference);
    assert_eq!(ours["schema"], 1);
    // The changes the fixture made, as the figures say them.
    assert_eq!(tensor(&ours, "blk.0.same")["changed"], false);
    assert_eq!(tensor(&ours, "blk.1.row")["changed_elements"], 16);
    assert_eq!(tensor(&ours, "blk.1.q8_0")["changed_elements"], 1);
    let scaled = tensor(&ours, "blk.0.scaled");
    assert!(
        (scaled["rel_l2"].as_f64().unwrap() - 0.01).abs() < 1e-6,
        "{scaled}"
    );
    let quantized = tensor(&ours, "blk.3.f16_to_q8_0");
    assert_eq!(
        (&quantized["old_dtype"], &quantized["new_dtype"]),
        (&"f16".into(), &"q8_0".into())
    );
    assert!(
        quantized["note"]
            .as_str()
            .unwrap()
            .contains("quantization error")
    );
    let nonfinite = tensor(&ours, "blk.4.nonfinite");
    assert_eq!(
        (
            &nonfinite["nonfinite_elements"],
            &nonfinite["changed_elements"]
        ),
        (&5.into(), &4.into())
    );
    let zero = tensor(&ours, "blk.4.zero_norm");
    assert_eq!(
        (&zero["rel_l2"], &zero["cosine"]),
        (&Value::Null, &Value::Null)
    );
    // Equal values with other bits: not changed, and said why.
    let signed_zero = tensor(&ours, "blk.4.signed_zero");
    assert_eq!(
        (&signed_zero["changed"], &signed_zero["changed_elements"]),
        (&false.into(), &0.into())
    );
    assert_eq!(signed_zero["bits_differ"]["signed_zeros"], 128);
    let bits = tensor(&ours, "blk.4.bits");
    assert_eq!(bits["changed"], false);
    assert_eq!(
        bits["bits_differ"],
        serde_json::json!({"signed_zeros": 3, "nan_payloads": 2, "other_encodings": 0})
    );
    assert_eq!(
        bits["note"],
        "values equal, bits differ: 3 signed zeros, 2 NaN payloads"
    );
    assert_eq!(ours["values"]["bits_differ"], 2);
    let skipped = ours["values"]["skipped"].as_array().unwrap();
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    assert_eq!(skipped[0]["name"], "blk.3.f32_to_q4_k_shape");
    // The per-layer view: blk.0 .. blk.4.
    let layers: Vec<&str> = ours["values"]["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["layer"].as_str().unwrap())
        .collect();
    assert_eq!(layers, ["blk.0", "blk.1", "blk.2", "blk.3", "blk.4"]);
}

#[test]
fn safetensors_value_diffs_match_the_numpy_reference() {
    let dir = fixtures("pairs");
    let (ours, reference, code) = ours_and_reference(
        &dir.path().join("old.safetensors"),
        &dir.path().join("new.safetensors"),
    );
    assert_eq!(code, 1);
    assert_matches_reference(&ours, &reference);
    let tiny = tensor(&ours, "layers.1.f16_tiny");
    assert_eq!(tiny["changed_elements"], 1);
    assert!(tiny["max_abs_diff"].as_f64().unwrap() < 2e-12);
    assert_eq!(tensor(&ours, "layers.2.empty")["changed"], false);
    assert_eq!(tensor(&ours, "layers.2.ints")["changed_elements"], 1);
    assert_eq!(tensor(&ours, "layers.0.to_bf16")["new_dtype"], "bf16");
}

#[test]
fn text_output_summarizes_then_lists_by_rel_l2_with_a_layer_view() {
    let dir = fixtures("pairs");
    let (o, n) = (dir.path().join("old.gguf"), dir.path().join("new.gguf"));
    let out = run(&["diff", "--values", o.to_str().unwrap(), n.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = stdout(&out);
    let values = &text[text.find("Values:").expect("a Values section")..];
    let mut lines = values.lines().skip(1);
    let summary = lines.next().unwrap();
    assert!(
        summary.starts_with(
            "  values changed in 22 of 25 tensors; largest rel_l2 inf (blk.4.zero_norm)"
        ),
        "{text}"
    );
    assert!(
        values.contains("blk.3.f16_to_q8_0 (f16 → q8_0: quantization error)"),
        "{text}"
    );
    assert!(values.contains("Per layer"), "{text}");
    assert!(
        values.contains("  blk.4.bits: values equal, bits differ: 3 signed zeros, 2 NaN payloads"),
        "{text}"
    );
    assert!(
        !values
            .lines()
            .skip_while(|l| !l.contains("largest rel_l2 first"))
            .take_while(|l| !l.is_empty())
            .any(|l| l.contains("blk.4.bits") || l.contains("blk.4.signed_zero")),
        "equal values are not listed as changed:\n{text}"
    );
    // Listed in decreasing rel_l2 (infinite first).
    let listed: Vec<&str> = values
        .lines()
        .skip_while(|l| !l.contains("largest rel_l2 first"))
        .skip(2)
        .take_while(|l| !l.is_empty())
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    let ranks: Vec<f64> = listed
        .iter()
        .map(|r| {
            if *r == "inf" {
                f64::INFINITY
            } else {
                r.parse().unwrap()
            }
        })
        .collect();
    assert!(ranks.windows(2).all(|w| w[0] >= w[1]), "{listed:?}");
}

#[test]
fn identical_files_exit_0() {
    let dir = fixtures("pairs");
    let path = dir.path().join("old.gguf");
    let p = path.to_str().unwrap();
    let out = run(&["diff", "--values", p, p]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("values identical in all 26 compared tensors"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn truncated_data_is_a_clear_error() {
    let dir = fixtures("pairs");
    let old = dir.path().join("old.gguf");
    let cut = dir.path().join("cut.gguf");
    let bytes = std::fs::read(&old).unwrap();
    std::fs::write(&cut, &bytes[..bytes.len() - 1000]).unwrap();
    let out = run(&[
        "diff",
        "--values",
        old.to_str().unwrap(),
        cut.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("cut.gguf: tensor"), "{err}");
    assert!(err.contains("lies outside the file"), "{err}");
    assert!(
        err.contains(&format!("({} bytes)", bytes.len() - 1000)),
        "{err}"
    );
}

/// A GGUF whose header puts a tensor's data past the end of the file (a correct header, data
/// section missing).
#[test]
fn tensor_data_outside_the_file_is_a_clear_error() {
    let dir = fixtures("pairs");
    let old = dir.path().join("old.gguf");
    let artifact = weight_inspect::read_file(&old).unwrap();
    let header = artifact.layout.header_size as usize;
    let bytes = std::fs::read(&old).unwrap();
    let headless = dir.path().join("header-only.gguf");
    std::fs::write(&headless, &bytes[..header]).unwrap();
    let out = run(&[
        "diff",
        "--values",
        headless.to_str().unwrap(),
        old.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("header-only.gguf: tensor \"blk.0.same\": data at bytes ["),
        "{err}"
    );
}

#[test]
fn shape_and_byte_length_mismatch_is_a_clear_error() {
    let dir = fixtures("pairs");
    let path = dir.path().join("old.safetensors");
    let bytes = std::fs::read(&path).unwrap();
    // Claim 100 int32 take 404 bytes: the header no longer fits the shape.
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let at = text.find("\"layers.2.ints\"").unwrap();
    let shape = text[at..].find("[100]").unwrap() + at;
    let mut bad = bytes.clone();
    bad[shape..shape + 5].copy_from_slice(b"[101]");
    let bad_path = dir.path().join("bad.safetensors");
    std::fs::write(&bad_path, &bad).unwrap();
    let out = run(&[
        "diff",
        "--values",
        path.to_str().unwrap(),
        bad_path.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("bad.safetensors"), "{err}");
    assert!(err.contains("layers.2.ints"), "{err}");
    assert!(err.contains("needs 404 bytes"), "{err}");
}

/// safetensors' 8-bit floats decode as ml_dtypes (the reference implementation JAX and
/// PyTorch interoperate with) reads them, for all 256 codes.
#[test]
fn float8_codes_decode_as_ml_dtypes_reads_them() {
    let script = r#"
import json, ml_dtypes, numpy as np
codes = np.arange(256, dtype=np.uint8)
out = {}
for ours, theirs in [("f8_e4m3", "float8_e4m3fn"), ("f8_e5m2", "float8_e5m2"),
                     ("f8_e4m3fnuz", "float8_e4m3fnuz"), ("f8_e5m2fnuz", "float8_e5m2fnuz"),
                     ("f8_e8m0", "float8_e8m0fnu")]:
    values = codes.view(getattr(ml_dtypes, theirs)).astype(np.float64)
    out[ours] = [None if np.isnan(v) else repr(float(v)) for v in values]
print(json.dumps(out))
"#;
    let out = std::process::Command::new(python())
        .args(["-c", script])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let reference: Value = serde_json::from_slice(&out.stdout).unwrap();
    let codes: Vec<u8> = (0..=255).collect();
    for (dtype, values) in reference.as_object().unwrap() {
        let ours =
            weight_inspect::dequantize(weight_inspect::Dtype::by_name(dtype).unwrap(), &codes)
                .unwrap();
        for (code, (o, r)) in ours.iter().zip(values.as_array().unwrap()).enumerate() {
            // Python's repr of a float: "0.5", "-inf", "448.0".
            let r = r
                .as_str()
                .map(|r| r.replace("inf", "Infinity").parse::<f64>().unwrap());
            match r {
                None => assert!(
                    o.is_nan(),
                    "{dtype} code {code:#04x}: ours {o}, ml_dtypes NaN"
                ),
                Some(r) => assert!(
                    o.to_bits() == r.to_bits()
                        || (*o == 0.0 && r == 0.0 && o.is_sign_negative() == r.is_sign_negative()),
                    "{dtype} code {code:#04x}: ours {o}, ml_dtypes {r}"
                ),
            }
        }
    }
}

#[test]
fn sixty_four_bit_integers_beyond_f64_are_counted_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let (old, new) = (
        dir.path().join("old.safetensors"),
        dir.path().join("new.safetensors"),
    );
    // 2^53 and 2^53 + 1 round to the same f64; so do u64::MAX and u64::MAX - 1.
    let script = r#"
import sys
import numpy as np
from safetensors.numpy import save_file
big = 2**53
save_file({
    "counter": np.array([big, big + 2, 5], dtype=np.int64),
    "ids": np.array([2**64 - 1, 1], dtype=np.uint64),
    "small": np.array([1, 2, 3], dtype=np.int64),
}, sys.argv[1])
save_file({
    "counter": np.array([big + 1, big + 2, 5], dtype=np.int64),
    "ids": np.array([2**64 - 2, 1], dtype=np.uint64),
    "small": np.array([1, 2, 4], dtype=np.int64),
}, sys.argv[2])
"#;
    let out = std::process::Command::new(python())
        .args(["-c", script, old.to_str().unwrap(), new.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let (old, new) = (old.to_str().unwrap(), new.to_str().unwrap());
    let out = run(&["diff", "--values", "--json", old, new]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let doc: Value = serde_json::from_str(&stdout(&out)).unwrap();
    for (name, changed, approximate) in
        [("counter", 1, true), ("ids", 1, true), ("small", 1, false)]
    {
        let t = tensor(&doc, name);
        assert_eq!(t["changed"], true, "{name}: {t}");
        assert_eq!(t["changed_elements"], changed, "{name}: {t}");
        let note = t["note"].as_str().unwrap_or_default();
        assert_eq!(note.contains("2^53"), approximate, "{name}: {t}");
    }
    let text = stdout(&run(&["diff", "--values", old, new]));
    assert!(text.contains("counted exactly"), "{text}");
}
