//! Interoperability with deltatensors 0.2.0 (the reference, from PyPI): files it writes decode
//! here bit for bit as it decodes them; files written here are read by it and reconstruct to
//! the same values; parent hashes agree.

mod common;

use common::delta::{
    create, encoded_as_defined, ok, pair, rebuilt_as_defined, s, same_tensors_and_dtypes,
};
use common::{run, run_python, stderr};
use weight_inspect::deltas::Model;
use weight_inspect::deltas::OpenDelta;
use weight_inspect::deltas::{EncodeOptions, encode};
use weight_inspect::readers::wdelta::Strategy;

/// Shapes covering 2-D, 3-D, odd 1-D, a single element and a scalar.
const SHAPES: &str = "64x48,33,1,3x5x7,7x9,scalar";
/// The reference cannot encode a tensor of one element with int4 (min of an empty array).
const SHAPES_INT4: &str = "64x48,33,3x5x7,7x9,2";

/// (strategy, extra reference args, extra CLI args)
/// Every tensor of `theirs` decodes to the same float bits from `mine` (`what` names the case).
fn decode_bit_for_bit_alike(theirs: &OpenDelta, mine: &OpenDelta, what: &str) {
    for (name, e) in &theirs.file.header.tensors {
        let n = e.n_elements().unwrap() as usize;
        let bits = |delta: &OpenDelta| -> Vec<u32> {
            let values = delta.decode(name, n).unwrap();
            values.iter().map(|v| v.to_bits()).collect()
        };
        assert!(
            bits(theirs) == bits(mine),
            "{what}: {name} decodes differently"
        );
    }
}

fn variants() -> Vec<(&'static str, Vec<&'static str>, Vec<&'static str>)> {
    vec![
        ("sparse", vec![], vec![]),
        (
            "sparse",
            vec!["--sparsity", "0.5"],
            vec!["--sparsity", "0.5"],
        ),
        ("quantized", vec![], vec![]),
        ("int4", vec![], vec![]),
        (
            "int4",
            vec!["--outlier-fraction", "0.1"],
            vec!["--outlier-fraction", "0.1"],
        ),
    ]
}

#[test]
fn reference_files_decode_bit_for_bit_here() {
    let tmp = tempfile::tempdir().unwrap();
    for (i, (strategy, ref_args, _)) in variants().into_iter().enumerate() {
        let dir = tmp.path().join(format!("v{i}"));
        std::fs::create_dir_all(&dir).unwrap();
        let shapes = if strategy == "int4" {
            SHAPES_INT4
        } else {
            SHAPES
        };
        pair(&dir, shapes, "f32", i as u32, 1);
        let base = dir.join("base.safetensors");
        let ft = dir.join("ft1.safetensors");
        let wd = dir.join("ref.wdelta");
        let mut args = vec!["create", s(&base), s(&ft), s(&wd), strategy];
        args.extend(ref_args.iter());
        run_python("delta_ref.py", &args);
        let decoded = dir.join("decoded.safetensors");
        run_python("delta_ref.py", &["decode", s(&wd), s(&decoded)]);

        // Decode here, tensor by tensor, and compare bit patterns.
        let delta = OpenDelta::open(&wd).unwrap();
        let reference = Model::open(&decoded).unwrap();
        assert_eq!(delta.file.version, 1);
        for (name, t) in &reference.tensors {
            let mine = delta.decode(name, t.n_elements()).unwrap();
            let theirs = reference.load_f32(name, t).unwrap();
            assert_eq!(mine.len(), theirs.len());
            for (k, (a, b)) in mine.iter().zip(&theirs).enumerate() {
                assert_eq!(
                    a.to_bits(),
                    b.to_bits(),
                    "{strategy} {ref_args:?}: {name}[{k}]: {a} here, {b} in deltatensors"
                );
            }
        }

        // Parent hashes agree.
        let base_model = Model::open(&base).unwrap();
        assert_eq!(delta.parent_hash(), base_model.parent_hash(|_| {}).unwrap());

        // And the CLI reconstructs what the reference reconstructs.
        let mine = dir.join("mine.safetensors");
        ok(&run(&[
            "delta",
            "apply",
            "--base",
            s(&base),
            s(&wd),
            "-o",
            s(&mine),
            "--dtype",
            "f32",
        ]));
        let theirs = dir.join("theirs.safetensors");
        run_python("delta_ref.py", &["load", s(&wd), s(&base), s(&theirs)]);
        same_tensors_and_dtypes(&mine, &theirs);
    }
}

#[test]
fn files_written_here_are_read_by_the_reference() {
    let tmp = tempfile::tempdir().unwrap();
    for (i, (strategy, _, cli_args)) in variants().into_iter().enumerate() {
        let dir = tmp.path().join(format!("v{i}"));
        std::fs::create_dir_all(&dir).unwrap();
        // Here a single-element tensor is fine with int4 too.
        pair(&dir, SHAPES, "f32", 100 + i as u32, 1);
        let base = dir.join("base.safetensors");
        let ft = dir.join("ft1.safetensors");
        let wd = dir.join("mine.wdelta");
        let mut args = vec![
            "delta",
            "create",
            "--base",
            s(&base),
            s(&ft),
            "-o",
            s(&wd),
            "--strategy",
            strategy,
        ];
        args.extend(cli_args.iter());
        ok(&run(&args));

        // The reference verifies the parent hash while loading, then reconstructs.
        let theirs = dir.join("theirs.safetensors");
        run_python("delta_ref.py", &["load", s(&wd), s(&base), s(&theirs)]);
        let mine = dir.join("mine.safetensors");
        ok(&run(&[
            "delta",
            "apply",
            "--base",
            s(&base),
            s(&wd),
            "-o",
            s(&mine),
            "--dtype",
            "f32",
        ]));
        same_tensors_and_dtypes(&mine, &theirs);

        // The parent hash is the reference's hash of the base.
        let h = run_python("delta_ref.py", &["hash", s(&base)]);
        let delta = OpenDelta::open(&wd).unwrap();
        assert_eq!(
            delta.parent_hash(),
            String::from_utf8_lossy(&h.stdout).trim()
        );
    }
}

#[test]
fn encoder_matches_the_reference_without_ties() {
    // With random float32 deltas (no ties in magnitude) the reference's argpartition and the
    // selection here agree, so the files must decode to identical values.
    let tmp = tempfile::tempdir().unwrap();
    for (i, (strategy, ref_args, cli_args)) in variants().into_iter().enumerate() {
        let dir = tmp.path().join(format!("v{i}"));
        std::fs::create_dir_all(&dir).unwrap();
        pair(&dir, SHAPES_INT4, "f32", 200 + i as u32, 1);
        let base = dir.join("base.safetensors");
        let ft = dir.join("ft1.safetensors");
        let theirs_wd = dir.join("ref.wdelta");
        let mut args = vec!["create", s(&base), s(&ft), s(&theirs_wd), strategy];
        args.extend(ref_args.iter());
        run_python("delta_ref.py", &args);
        let mine_wd = dir.join("mine.wdelta");
        let mut args = vec![
            "delta",
            "create",
            "--base",
            s(&base),
            s(&ft),
            "-o",
            s(&mine_wd),
            "--strategy",
            strategy,
        ];
        args.extend(cli_args.iter());
        ok(&run(&args));
        let a = OpenDelta::open(&theirs_wd).unwrap();
        let b = OpenDelta::open(&mine_wd).unwrap();
        decode_bit_for_bit_alike(&a, &b, &format!("{strategy} {cli_args:?}"));
        // The same header but for the fine-tune's metadata and the loss figures, which only
        // this writer records.
        let mut ours = b.file.header.clone();
        assert_eq!(
            ours.metadata.take().and_then(|m| m.get("step").cloned()),
            Some("ft1".to_string()),
            "{strategy}: the fine-tune's metadata"
        );
        let loss = ours.loss.take().expect("create records the loss figures");
        assert!(
            loss.update_lost.is_some_and(|l| l > 0.0 && l < 1.0),
            "{strategy}: {loss:?}"
        );
        assert_eq!(a.file.header, ours, "{strategy}: headers");
    }
}

#[test]
fn bf16_base_hashes_raw_bits_and_reconstructs_in_bf16() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    pair(dir, SHAPES, "bf16", 7, 1);
    let base = dir.join("base.safetensors");
    let ft = dir.join("ft1.safetensors");
    for strategy in ["int4", "sparse", "quantized"] {
        let wd = dir.join(format!("{strategy}.wdelta"));
        ok(&create(&base, &ft, &wd, &["--strategy", strategy]));
        let h = run_python("delta_ref.py", &["hash", s(&base)]);
        let delta = OpenDelta::open(&wd).unwrap();
        assert_eq!(
            delta.parent_hash(),
            String::from_utf8_lossy(&h.stdout).trim()
        );
        let mine = dir.join(format!("{strategy}.mine.safetensors"));
        ok(&run(&[
            "delta",
            "apply",
            "--base",
            s(&base),
            s(&wd),
            "-o",
            s(&mine),
        ]));
        let theirs = dir.join(format!("{strategy}.theirs.safetensors"));
        run_python(
            "delta_ref.py",
            &["apply-bf16", s(&wd), s(&base), s(&theirs)],
        );
        same_tensors_and_dtypes(&mine, &theirs);
    }
}

#[test]
fn chains_agree_with_the_reference() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    pair(dir, SHAPES_INT4, "f32", 11, 2);
    let base = dir.join("base.safetensors");
    let ft1 = dir.join("ft1.safetensors");
    let ft2 = dir.join("ft2.safetensors");
    let a = dir.join("a.wdelta");
    let b = dir.join("b.wdelta");
    ok(&create(&base, &ft1, &a, &[]));
    ok(&run(&[
        "delta",
        "create",
        "--strategy",
        "int4",
        "--base",
        s(&base),
        "--chain",
        s(&a),
        "-o",
        s(&b),
        s(&ft2),
    ]));
    let mine = dir.join("mine.safetensors");
    ok(&run(&[
        "delta",
        "apply",
        "--base",
        s(&base),
        "--chain",
        s(&a),
        s(&b),
        "-o",
        s(&mine),
        "--dtype",
        "f32",
    ]));
    // load_delta_chain verifies every link's parent hash the reference's way.
    let theirs = dir.join("theirs.safetensors");
    run_python(
        "delta_ref.py",
        &["load-chain", s(&base), s(&theirs), s(&a), s(&b)],
    );
    same_tensors_and_dtypes(&mine, &theirs);

    // Out of order: the second link does not fit the base.
    let out = run(&[
        "delta",
        "apply",
        "--base",
        s(&base),
        "--chain",
        s(&b),
        s(&a),
        "-o",
        s(&dir.join("bad.safetensors")),
    ]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("wrong parent"), "{}", stderr(&out));
    assert!(!dir.join("bad.safetensors").exists());
}

#[test]
fn version_2_is_more_accurate_and_rejected_by_the_reference() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    pair(dir, "128x64,333", "f32", 5, 1);
    let base = dir.join("base.safetensors");
    let ft = dir.join("ft1.safetensors");
    let v1 = dir.join("v1.wdelta");
    let v2 = dir.join("v2.wdelta");
    ok(&create(&base, &ft, &v1, &[]));
    ok(&create(&base, &ft, &v2, &["--format-version", "2"]));
    let d2 = OpenDelta::open(&v2).unwrap();
    assert_eq!(d2.file.version, 2);
    for e in d2.file.header.tensors.values() {
        assert_eq!(e.base_dtype.as_deref(), Some("float32"));
    }
    let run_opts = weight_inspect::deltas::RunOptions::default();
    let bm = Model::open(&base).unwrap();
    let fm = Model::open(&ft).unwrap();
    let e1 = weight_inspect::deltas::reconstruction_error(
        &bm,
        &OpenDelta::open(&v1).unwrap(),
        &fm,
        &run_opts,
    )
    .unwrap();
    let e2 = weight_inspect::deltas::reconstruction_error(&bm, &d2, &fm, &run_opts).unwrap();
    assert!(
        e2.rms_error <= e1.rms_error,
        "v2 rms {} > v1 rms {}",
        e2.rms_error,
        e1.rms_error
    );
    // deltatensors 0.2.0 reads version 1 only and says so.
    let out = std::process::Command::new(common::python())
        .arg(common::repo_root().join("scripts/delta_ref.py"))
        .args(["load", s(&v2), s(&base), s(&dir.join("x.safetensors"))])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Unsupported .wdelta version 2"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mine = dir.join("mine.safetensors");
    ok(&run(&[
        "delta",
        "apply",
        "--base",
        s(&base),
        s(&v2),
        "-o",
        s(&mine),
    ]));
    // What deltatensors cannot read is checked against the format's definition in numpy.
    encoded_as_defined(&base, &[], &ft, &v2);
    rebuilt_as_defined(&base, &mine, &[&v2]);
}

#[test]
fn a_tensor_encoded_in_blocks_matches_the_reference() {
    // 2048 x 2049 elements: over the 2^22 from which int4 is encoded in blocks of 2^20 across
    // the workers, in two passes over the inputs (the last block partial). The reference
    // encodes the whole tensor at once; the decoded values must be identical, and the file the
    // same for any number of threads. bf16 goes through the converting reads (the reference,
    // over numpy, cannot load it: there the file is compared across thread counts only).
    let tmp = tempfile::tempdir().unwrap();
    for dtype in ["f32", "bf16"] {
        let dir = tmp.path().join(dtype);
        std::fs::create_dir_all(&dir).unwrap();
        pair(&dir, "2048x2049,64x48", dtype, 300, 1);
        let base = dir.join("base.safetensors");
        let ft = dir.join("ft1.safetensors");
        let files: Vec<Vec<u8>> = ["1", "3"]
            .iter()
            .map(|threads| {
                let wd = dir.join(format!("mine{threads}.wdelta"));
                ok(&create(
                    &base,
                    &ft,
                    &wd,
                    &["--strategy", "int4", "--threads", threads],
                ));
                std::fs::read(&wd).unwrap()
            })
            .collect();
        assert!(
            files[0] == files[1],
            "{dtype}: the file depends on --threads"
        );
        if dtype == "bf16" {
            continue;
        }
        let theirs_wd = dir.join("ref.wdelta");
        run_python(
            "delta_ref.py",
            &["create", s(&base), s(&ft), s(&theirs_wd), "int4"],
        );
        let a = OpenDelta::open(&theirs_wd).unwrap();
        let b = OpenDelta::open(&dir.join("mine1.wdelta")).unwrap();
        decode_bit_for_bit_alike(&a, &b, dtype);
    }
}

/// Writes DIR/base.safetensors, DIR/ft1.safetensors and DIR/ft2.safetensors (ft1 then a step
/// more) with tensors over the 2^22 elements from which create works in blocks of 2^20, whose
/// deltas reach every path of the blocked selections: noise with NaN and unchanged values,
/// a few repeated magnitudes (ties cut at the threshold), few changes (a threshold of zero), a
/// long 1-D tensor and rows longer than a block (quantized sums those in halves).
fn blocked_pair(dir: &std::path::Path) {
    const SCRIPT: &str = r#"
import sys
import numpy as np
from safetensors.numpy import save_file
out = sys.argv[1]
rng = np.random.default_rng(29)
n2 = (2048, 2049)
base = {
    "a.noise": rng.standard_normal(n2, dtype=np.float32),
    "b.ties": rng.standard_normal(n2, dtype=np.float32),
    "c.few": rng.standard_normal(n2, dtype=np.float32),
    "d.vec": rng.standard_normal(4194313, dtype=np.float32),
    "e.long_rows": rng.standard_normal((2, 1, 2200011), dtype=np.float32),
    "f.small": rng.standard_normal((7, 9), dtype=np.float32),
}
save_file(base, f"{out}/base.safetensors")
prev = base
for step in (1, 2):
    ft = {}
    for name, b in prev.items():
        d = rng.standard_normal(b.shape, dtype=np.float32) * np.float32(1e-3)
        if name == "b.ties":
            d = rng.choice(np.array([0, 1e-3, -1e-3, 2e-3, -2e-3], np.float32), b.shape)
        if name == "c.few":
            d = np.where(rng.random(b.shape) < 0.05, d, np.float32(0))
        f = (b + d).astype(np.float32)
        flat = f.reshape(-1)
        flat[::1001] = b.reshape(-1)[::1001]
        if name == "a.noise":
            flat[[5, 3_000_000, 4_000_000]] = np.nan
        ft[name] = f
    save_file(ft, f"{out}/ft{step}.safetensors")
    prev = ft
"#;
    common::run_python_source(SCRIPT, &[s(dir)]);
}

/// Every tensor's arrays in `delta` are those [`encode`] gives over the whole delta of
/// `ft` against `prev` (per tensor: its values before, as float32).
fn records_are_the_whole_encoding(
    delta: &std::path::Path,
    prev: &dyn Fn(&str) -> Vec<f32>,
    ft: &Model,
    opts: &EncodeOptions,
    what: &str,
) {
    let d = OpenDelta::open(delta).unwrap();
    for (name, t) in &ft.tensors {
        let p = prev(name);
        let f = ft.load_f32(name, t).unwrap();
        // As create subtracts: equal bits are no change.
        let whole_delta: Vec<f32> = f
            .iter()
            .zip(&p)
            .map(|(&f, &p)| {
                if f.to_bits() == p.to_bits() {
                    0.0
                } else {
                    f - p
                }
            })
            .collect();
        let whole = encode(&whole_delta, &t.shape, opts);
        let arrays = d.file.arrays(d.bytes(), name).unwrap();
        assert_eq!(arrays.fields.len(), whole.len(), "{what}: {name}");
        for (a, w) in arrays.fields.iter().zip(&whole) {
            assert!(
                a.data == &w.data[..],
                "{what}: {name}.{} differs from the whole tensor's encoding",
                w.field
            );
        }
    }
}

#[test]
fn sparse_quantized_and_chained_int4_in_blocks_are_the_whole_tensor_encoding() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    blocked_pair(dir);
    let (base_path, ft1_path) = (dir.join("base.safetensors"), dir.join("ft1.safetensors"));
    let base = Model::open(&base_path).unwrap();
    let ft1 = Model::open(&ft1_path).unwrap();
    let base_values = |name: &str| base.load_f32(name, &base.tensors[name]).unwrap();
    for (strategy, extra, opts) in [
        (
            "sparse",
            vec![],
            EncodeOptions {
                strategy: Strategy::Sparse,
                ..EncodeOptions::default()
            },
        ),
        (
            "sparse",
            vec!["--sparsity", "0.3"],
            EncodeOptions {
                strategy: Strategy::Sparse,
                sparsity: 0.3,
                ..EncodeOptions::default()
            },
        ),
        (
            "quantized",
            vec![],
            EncodeOptions {
                strategy: Strategy::Quantized,
                ..EncodeOptions::default()
            },
        ),
        // int4's outliers by radix counting, at any fraction (above 1/32 too).
        ("int4", vec![], EncodeOptions::default()),
        (
            "int4",
            vec!["--outlier-fraction", "0.001"],
            EncodeOptions {
                outlier_fraction: 0.001,
                ..EncodeOptions::default()
            },
        ),
        (
            "int4",
            vec!["--outlier-fraction", "0.2", "--format-version", "2"],
            EncodeOptions {
                outlier_fraction: 0.2,
                version: 2,
                ..EncodeOptions::default()
            },
        ),
    ] {
        let files: Vec<Vec<u8>> = ["1", "3"]
            .iter()
            .map(|threads| {
                let wd = dir.join(format!("{strategy}{threads}.wdelta"));
                let mut args = vec!["--strategy", strategy, "--threads", threads];
                args.extend_from_slice(&extra);
                ok(&create(&base_path, &ft1_path, &wd, &args));
                std::fs::read(&wd).unwrap()
            })
            .collect();
        let what = format!("{strategy} {extra:?}");
        assert!(
            files[0] == files[1],
            "{what}: the file depends on --threads"
        );
        let wd = dir.join(format!("{strategy}1.wdelta"));
        records_are_the_whole_encoding(&wd, &base_values, &ft1, &opts, &what);
    }
    // int4 (format version 2) against a chain: the sparse delta of ft1, then ft2.
    let link = dir.join("sparse1.wdelta");
    let chained = dir.join("chained.wdelta");
    let ft2 = Model::open(&dir.join("ft2.safetensors")).unwrap();
    ok(&run(&[
        "delta",
        "create",
        "--strategy",
        "int4",
        "--base",
        s(&base_path),
        s(&dir.join("ft2.safetensors")),
        "--chain",
        s(&link),
        "-o",
        s(&chained),
        "--format-version",
        "2",
        "--threads",
        "2",
    ]));
    let l = OpenDelta::open(&link).unwrap();
    let rebuilt = |name: &str| -> Vec<f32> {
        let mut v = base_values(name);
        let d = l.decode(name, v.len()).unwrap();
        for (a, b) in v.iter_mut().zip(&d) {
            if *b != 0.0 {
                *a += *b;
            }
        }
        v
    };
    let opts = EncodeOptions {
        version: 2,
        ..EncodeOptions::default()
    };
    records_are_the_whole_encoding(&chained, &rebuilt, &ft2, &opts, "int4 v2 --chain");
}
