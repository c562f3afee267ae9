//! Helpers of the .wdelta tests: reference model pairs, success checks, tensor comparisons.

use std::path::Path;
use std::process::Output;

use weight_inspect::deltas::Model;

use super::{run_python, stderr, stdout};

/// A path as a command-line argument.
pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Asserts that a command succeeded, showing its output otherwise.
pub fn ok(out: &Output) {
    assert!(
        out.status.success(),
        "failed: {}\n{}",
        stdout(out),
        stderr(out)
    );
}

/// `weight-inspect delta create --base BASE FINETUNED -o OUT EXTRA...`.
pub fn create(base: &Path, finetuned: &Path, out: &Path, extra: &[&str]) -> Output {
    super::run(&create_args(base, finetuned, out, extra))
}

/// The arguments of [`create`]: int4 unless `extra` names a strategy (the lossy format these
/// helpers' tests exercise; `create`'s own default, lossless, is tested in delta_lossless.rs
/// and delta_readers.rs).
pub fn create_args<'a>(
    base: &'a Path,
    finetuned: &'a Path,
    out: &'a Path,
    extra: &[&'a str],
) -> Vec<&'a str> {
    let mut args = vec![
        "delta",
        "create",
        "--base",
        s(base),
        s(finetuned),
        "-o",
        s(out),
    ];
    if !extra.contains(&"--strategy") {
        args.extend(["--strategy", "int4"]);
    }
    args.extend_from_slice(extra);
    args
}

/// `delta_ref.py make-pair`: DIR/base.safetensors and DIR/ft1..ftSTEPS.safetensors in `dtype`
/// (f32, f16 or bf16), each a small fine-tune-like step from the one before.
pub fn pair(dir: &Path, shapes: &str, dtype: &str, seed: u32, steps: u32) {
    run_python(
        "delta_ref.py",
        &[
            "make-pair",
            s(dir),
            "--shapes",
            shapes,
            "--dtype",
            dtype,
            "--seed",
            &seed.to_string(),
            "--steps",
            &steps.to_string(),
        ],
    );
}

/// Every tensor of a model as (name, raw bytes, dtype), in name order.
pub fn tensors(path: &Path) -> Vec<(String, Vec<u8>, &'static str)> {
    let m = Model::open(path).unwrap();
    m.tensors
        .iter()
        .map(|(n, t)| (n.clone(), m.read_raw(t).unwrap(), t.dtype))
        .collect()
}

/// Asserts that two models have the same tensor names with the same raw bytes.
pub fn same_tensors(a: &Path, b: &Path) {
    compare_tensors(a, b, false);
}

/// Asserts that two models have the same tensor names, dtypes and raw bytes.
pub fn same_tensors_and_dtypes(a: &Path, b: &Path) {
    compare_tensors(a, b, true);
}

fn compare_tensors(a: &Path, b: &Path, dtypes: bool) {
    let ta = tensors(a);
    let tb = tensors(b);
    let names = |t: &[(String, Vec<u8>, &str)]| t.iter().map(|x| x.0.clone()).collect::<Vec<_>>();
    assert_eq!(names(&ta), names(&tb), "{} vs {}", a.display(), b.display());
    for ((name, bytes_a, dtype_a), (_, bytes_b, dtype_b)) in ta.iter().zip(&tb) {
        if dtypes {
            assert_eq!(dtype_a, dtype_b, "dtype of {name}");
        }
        assert!(
            bytes_a == bytes_b,
            "tensor {name} differs between {} and {}",
            a.display(),
            b.display()
        );
    }
}

/// Asserts that `rebuilt` (float32 tensors) is, bit for bit, the reconstruction of the lineage
/// `links` from `base` by the reference (`delta_ref.py check-rebuilt`: deltatensors for version
/// 1, the format's definition in numpy for version 2).
pub fn rebuilt_as_defined(base: &Path, rebuilt: &Path, links: &[&Path]) {
    let mut args = vec!["check-rebuilt", s(base), s(rebuilt)];
    args.extend(links.iter().map(|p| s(p)));
    run_python("delta_ref.py", &args);
}

/// Asserts that every record of `wdelta` is what its strategy's definition gives for the delta
/// of `ft` against its parent: `base` rebuilt through the lineage `through` (none: `base`
/// itself). `delta_ref.py check-encoding`, in numpy and deltatensors.
pub fn encoded_as_defined(base: &Path, through: &[&Path], ft: &Path, wdelta: &Path) {
    let mut args = vec!["check-encoding", s(base), s(ft), s(wdelta)];
    if !through.is_empty() {
        args.push("--through");
        args.extend(through.iter().map(|p| s(p)));
    }
    run_python("delta_ref.py", &args);
}
