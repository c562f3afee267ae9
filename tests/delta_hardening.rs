//! Hardening of the delta commands: an output that is one of the inputs is refused, signals
//! remove temporary files, an input that shrinks while it is read is an error (not SIGBUS),
//! hostile .wdelta headers are capped, fixed-form fields are validated, integer tensors are
//! carried, and outputs get the usual permissions.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::delta::{create, encoded_as_defined, ok, pair, rebuilt_as_defined, s};
use common::pause::Paused;
use common::{bin, code, run, stderr};

/// A small pair (base, fine-tuned) and a delta between them, in `dir`.
fn small_setup(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    pair(dir, "16x8,5", "f32", 3, 1);
    let base = dir.join("base.safetensors");
    let ft = dir.join("ft1.safetensors");
    let wd = dir.join("d.wdelta");
    ok(&create(&base, &ft, &wd, &[]));
    (base, ft, wd)
}

fn snapshot(paths: &[&Path]) -> Vec<Vec<u8>> {
    paths.iter().map(|p| std::fs::read(p).unwrap()).collect()
}

/// Hidden temporary files left in `dir`.
fn temps_in(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".weight-inspect-"))
        .collect()
}

fn assert_refused(out: &Output, needles: &[&str]) {
    assert_eq!(code(out), 2, "stderr: {}", stderr(out));
    let err = stderr(out);
    common::assert_contains(&err, needles);
    common::assert_contains(&err, &["would replace an input"]);
}

#[test]
fn an_output_that_is_an_input_is_refused_and_nothing_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let (base, ft, wd) = small_setup(d);
    let before = snapshot(&[&base, &ft, &wd]);
    let create = |out: &Path| {
        run(&[
            "delta",
            "create",
            "--strategy",
            "int4",
            "--base",
            s(&base),
            s(&ft),
            "-o",
            s(out),
        ])
    };
    assert_refused(&create(&base), &[s(&base), "base model"]);
    assert_refused(&create(&ft), &[s(&ft), "fine-tuned model"]);
    let apply = |out: &Path| run(&["delta", "apply", "--base", s(&base), s(&wd), "-o", s(out)]);
    assert_refused(&apply(&wd), &[s(&wd), "delta"]);
    assert_refused(&apply(&base), &[s(&base), "base model"]);
    let store = run(&[
        "delta",
        "store",
        s(&ft),
        "--parent",
        s(&base),
        "-o",
        s(&base),
    ]);
    assert_refused(&store, &[s(&base)]);
    let restore = run(&[
        "delta",
        "restore",
        s(&wd),
        "--parent",
        s(&base),
        "-o",
        s(&wd),
    ]);
    assert_refused(&restore, &[s(&wd)]);

    // Through a symlink, a hard link, and a path spelled differently.
    #[cfg(unix)]
    {
        let link = d.join("link.safetensors");
        std::os::unix::fs::symlink(&base, &link).unwrap();
        assert_refused(&create(&link), &["base model"]);
        let hard = d.join("hard.wdelta");
        std::fs::hard_link(&wd, &hard).unwrap();
        assert_refused(&apply(&hard), &["delta"]);
        std::fs::create_dir(d.join("sub")).unwrap();
        let roundabout = d.join("sub/../base.safetensors");
        assert_refused(&create(&roundabout), &["base model"]);
    }
    assert_eq!(snapshot(&[&base, &ft, &wd]), before, "an input changed");
    assert!(temps_in(d).is_empty(), "left {:?}", temps_in(d));
}

#[test]
fn an_output_inside_a_sharded_input_directory_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let (base, ft, _) = small_setup(d);
    let shards = d.join("base-sharded");
    common::run_python("delta_ref.py", &["shard", s(&base), s(&shards), "2"]);
    let shard = std::fs::read_dir(&shards)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "safetensors"))
        .unwrap();
    let before = std::fs::read(&shard).unwrap();
    for out in [shard.clone(), shards.join("new.wdelta"), shards.clone()] {
        let r = create(&shards, &ft, &out, &[]);
        assert_eq!(code(&r), 2, "{}: {}", out.display(), stderr(&r));
        common::assert_contains(&stderr(&r), &[s(&shards)]);
    }
    assert_eq!(std::fs::read(&shard).unwrap(), before);
    assert!(!shards.join("new.wdelta").exists());
    // Outside the directory, the sharded base works.
    ok(&create(&shards, &ft, &d.join("fine.wdelta"), &[]));
}

#[cfg(unix)]
#[test]
fn apply_and_restore_outputs_get_the_usual_permissions() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let (base, _, wd) = small_setup(d);
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let out = d.join("out.safetensors");
    let apply = || {
        ok(&run(&[
            "delta",
            "apply",
            "--base",
            s(&base),
            s(&wd),
            "-o",
            s(&out),
        ]));
    };
    apply();
    assert_eq!(mode(&out), 0o644, "a new output is 0644");
    std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o600)).unwrap();
    apply();
    assert_eq!(mode(&out), 0o600, "a replaced output keeps its mode");
    std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o640)).unwrap();
    ok(&run(&[
        "delta",
        "restore",
        s(&wd),
        "--parent",
        s(&base),
        "-o",
        s(&out),
    ]));
    assert_eq!(mode(&out), 0o640, "restore keeps the replaced file's mode");
    let restored = d.join("restored.safetensors");
    ok(&run(&[
        "delta",
        "restore",
        s(&wd),
        "--parent",
        s(&base),
        "-o",
        s(&restored),
    ]));
    assert_eq!(mode(&restored), 0o644);
}

/// A pair large enough that `apply` runs for a while in a debug build, and its delta.
fn big_setup(dir: &Path, shapes: &str) -> (PathBuf, PathBuf) {
    pair(dir, shapes, "f32", 11, 1);
    let base = dir.join("base.safetensors");
    let wd = dir.join("big.wdelta");
    ok(&create(
        &base,
        &dir.join("ft1.safetensors"),
        &wd,
        &["--strategy", "sparse"],
    ));
    (base, wd)
}

/// Starts weight-inspect with `args` and returns it stopped at the pause point just after its
/// temporary output file was created (docs/TESTING.md): the moment to signal it, or to change
/// an input under it.
fn until_temp_exists(args: &[&str]) -> Paused {
    let mut cmd = Command::new(bin());
    cmd.args(args);
    common::pause::start_paused(cmd, "output-temp-created")
}

/// Starts `delta apply` into `outdir/model.safetensors`, stopped once its temporary file
/// exists.
fn apply_until_temp_exists(base: &Path, wd: &Path, outdir: &Path) -> Paused {
    let out_path = outdir.join("model.safetensors");
    let args = [
        "delta",
        "apply",
        "--base",
        s(base),
        s(wd),
        "-o",
        s(&out_path),
    ];
    until_temp_exists(&[&args[..], &["--threads", "1"]].concat())
}

#[cfg(unix)]
#[test]
fn signals_remove_temporary_files_and_keep_the_old_output() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let (base, wd) = big_setup(d, "2048x2048,2048x2048,2048x2048,2048x2048");
    let outdir = d.join("out");
    std::fs::create_dir_all(&outdir).unwrap();
    let old = b"the previous output".to_vec();
    for (signal, number) in [("INT", 2), ("TERM", 15), ("HUP", 1)] {
        let out_path = outdir.join("model.safetensors");
        std::fs::write(&out_path, &old).unwrap();
        let paused = apply_until_temp_exists(&base, &wd, &outdir);
        let (status, err) = paused.signal(number);
        assert_eq!(
            status.code(),
            Some(128 + number),
            "SIG{signal}: {status:?} {err}"
        );
        common::assert_contains(
            &err,
            &[&format!("stopped by SIG{signal}"), "temporary file"],
        );
        assert_eq!(
            err.trim().lines().count(),
            1,
            "one line on stderr, got {err:?}"
        );
        assert!(
            temps_in(&outdir).is_empty(),
            "SIG{signal} left {:?}",
            temps_in(&outdir)
        );
        assert_eq!(
            std::fs::read(&out_path).unwrap(),
            old,
            "the old output changed"
        );
    }
}

#[cfg(unix)]
#[test]
fn an_input_truncated_during_apply_is_an_error_not_sigbus() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    // Two models of 134 MB (numpy), and their delta.
    let (base, wd) = big_setup(d, "4096x4096,4096x4096");
    let outdir = d.join("out");
    std::fs::create_dir_all(&outdir).unwrap();
    // The base, then the .wdelta (which apply streams alongside it), cut short while they are
    // read; each keeps its first kilobyte (the header stays readable).
    for (which, original) in [("safetensors", &base), ("wdelta", &wd)] {
        for round in 0..3 {
            let victim = d.join(format!("victim{round}.{which}"));
            std::fs::copy(original, &victim).unwrap();
            let (base_in, delta_in) = if which == "wdelta" {
                (&base, &victim)
            } else {
                (&victim, &wd)
            };
            let child = apply_until_temp_exists(base_in, delta_in, &outdir);
            std::fs::OpenOptions::new()
                .write(true)
                .open(&victim)
                .unwrap()
                .set_len(1024)
                .unwrap();
            let context = format!("{which} round {round}");
            refused_cleanly(child, &victim, &outdir.join("model.safetensors"), &context);
        }
    }
}

/// `child`, whose input `victim` was changed under it, ends with exit 2 and an error naming
/// `victim`, leaving neither a temporary file beside `output` nor `output` itself.
fn refused_cleanly(child: Paused, victim: &Path, output: &Path, context: &str) {
    let (status, err) = child.resume();
    assert_eq!(status.code(), Some(2), "{context}: {status:?} {err}");
    common::assert_contains(&err, &[s(victim), "changed while it was read"]);
    let dir = output.parent().unwrap();
    assert!(temps_in(dir).is_empty(), "left {:?}", temps_in(dir));
    assert!(!output.exists());
}

/// `delta create --strategy lossless` of `ft` against `base` into `outdir`, stopped once its
/// temporary output exists.
fn lossless_create_until_temp_exists(base: &Path, ft: &Path, outdir: &Path) -> Paused {
    let out_path = outdir.join("d.wdelta");
    let mut args: Vec<&str> = "delta create --strategy lossless --threads 1 -o"
        .split(' ')
        .collect();
    args.extend([s(&out_path), "--base", s(base), s(ft)]);
    until_temp_exists(&args)
}

/// The lossless strategy reads both models through memory maps: a file cut short under them
/// is an error naming it (not SIGBUS), and so is a file written in place during the run, whose
/// bytes would no longer be those hashed; neither leaves a temporary file or an output.
#[cfg(unix)]
#[test]
fn an_input_cut_or_written_during_lossless_create_is_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let (base, _) = big_setup(d, "4096x4096,4096x4096");
    let ft = d.join("ft1.safetensors");
    let outdir = d.join("out");
    std::fs::create_dir_all(&outdir).unwrap();
    for (which, original) in [("ft", &ft), ("base", &base)] {
        for cut in [true, false] {
            let victim = d.join(format!("victim-{which}-{cut}.safetensors"));
            std::fs::copy(original, &victim).unwrap();
            let (base_in, ft_in) = if which == "ft" {
                (&base, &victim)
            } else {
                (&victim, &ft)
            };
            let child = lossless_create_until_temp_exists(base_in, ft_in, &outdir);
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(&victim)
                .unwrap();
            if cut {
                f.set_len(1024).unwrap();
            } else {
                use std::os::unix::fs::FileExt;
                f.write_all_at(&[0x5a; 4096], 100 << 20).unwrap();
            }
            drop(f);
            let context = format!("{which} cut={cut}");
            refused_cleanly(child, &victim, &outdir.join("d.wdelta"), &context);
        }
    }
}

/// A BERT-like pair: float weights that change, an int64 `position_ids` that does not, an
/// int64 counter that changes by a little, in `dir` as base.safetensors and ft.safetensors.
/// (The counter has two elements: deltatensors cannot encode one element with int4.)
fn bert_like_pair(dir: &Path, counter_change: i64) {
    use serde_json::json;
    let tensors = |plus: f64, counter: i64| {
        json!([
            {"name": "embeddings.position_ids", "dtype": "int64", "shape": [1, 512], "fill": "arange"},
            {"name": "embeddings.word.weight", "dtype": "float32", "shape": [64, 16], "fill": {"normal": 0, "plus": plus}},
            {"name": "encoder.dense.weight", "dtype": "float32", "shape": [16, 16], "fill": {"normal": 1, "plus": plus}},
            {"name": "pooler.num_batches_tracked", "dtype": "int64", "shape": [2], "fill": counter},
        ])
    };
    common::models::make_models(
        dir,
        &json!({
            "base.safetensors": {"kind": "safetensors", "tensors": tensors(0.0, 7)},
            "ft.safetensors": {"kind": "safetensors", "tensors": tensors(0.01, 7 + counter_change)},
        }),
    );
}

fn raw_of(path: &Path, name: &str) -> (Vec<u8>, &'static str) {
    let m = weight_inspect::deltas::Model::open(path).unwrap();
    let t = &m.tensors[name];
    (m.read_raw(t).unwrap(), t.dtype)
}

fn f32_of(path: &Path, name: &str) -> Vec<f32> {
    let m = weight_inspect::deltas::Model::open(path).unwrap();
    m.load_f32(name, &m.tensors[name]).unwrap()
}

const INTS: [&str; 2] = ["embeddings.position_ids", "pooler.num_batches_tracked"];
const FLOATS: [&str; 2] = ["embeddings.word.weight", "encoder.dense.weight"];

/// Our apply output (ints exact, as int64) against the fine-tuned model, and the reference's
/// reconstruction (everything float32) against ours.
fn check_reconstructions(ft: &Path, ours: &Path, theirs: &Path) {
    for name in INTS {
        assert_eq!(
            raw_of(ours, name),
            raw_of(ft, name),
            "{name} rebuilt exactly"
        );
        assert_eq!(
            raw_of(theirs, name).1,
            "f32",
            "the reference loads {name} as float32"
        );
        assert_eq!(
            f32_of(theirs, name),
            f32_of(ft, name),
            "{name} in the reference"
        );
    }
    for name in FLOATS {
        let a: Vec<u32> = f32_of(ours, name).iter().map(|x| x.to_bits()).collect();
        let b: Vec<u32> = f32_of(theirs, name).iter().map(|x| x.to_bits()).collect();
        assert_eq!(a, b, "{name}: ours and the reference's reconstruction");
    }
}

#[test]
fn integer_tensors_are_carried_and_interoperate_with_deltatensors() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    bert_like_pair(d, 2);
    let (base, ft) = (d.join("base.safetensors"), d.join("ft.safetensors"));
    for strategy in ["int4", "sparse", "quantized"] {
        // Written here, read by deltatensors (which verifies the parent hash over the int64
        // bytes too).
        let wd = d.join(format!("ours-{strategy}.wdelta"));
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
        if strategy == "sparse" {
            // Keeps every element, so the changed counter is carried exactly.
            args.extend(["--sparsity", "0"]);
        }
        ok(&run(&args));
        let theirs = d.join(format!("theirs-{strategy}.safetensors"));
        common::run_python("delta_ref.py", &["load", s(&wd), s(&base), s(&theirs)]);
        let ours = d.join(format!("ours-{strategy}.safetensors"));
        ok(&run(&[
            "delta",
            "apply",
            "--base",
            s(&base),
            s(&wd),
            "-o",
            s(&ours),
            "--dtype",
            "f32",
        ]));
        check_reconstructions(&ft, &ours, &theirs);

        // Written by deltatensors, applied here.
        let ref_wd = d.join(format!("ref-{strategy}.wdelta"));
        let mut ref_args = vec!["create", s(&base), s(&ft), s(&ref_wd), strategy];
        if strategy == "sparse" {
            ref_args.extend(["--sparsity", "0"]);
        }
        common::run_python("delta_ref.py", &ref_args);
        let ours_ref = d.join(format!("ours-from-ref-{strategy}.safetensors"));
        ok(&run(&[
            "delta",
            "apply",
            "--base",
            s(&base),
            s(&ref_wd),
            "-o",
            s(&ours_ref),
            "--dtype",
            "f32",
        ]));
        let theirs_ref = d.join(format!("theirs-from-ref-{strategy}.safetensors"));
        common::run_python(
            "delta_ref.py",
            &["load", s(&ref_wd), s(&base), s(&theirs_ref)],
        );
        check_reconstructions(&ft, &ours_ref, &theirs_ref);
    }
    // The default --dtype keeps every tensor's dtype, integers included.
    let out = d.join("default.safetensors");
    ok(&run(&[
        "delta",
        "apply",
        "--base",
        s(&base),
        s(&d.join("ours-int4.wdelta")),
        "-o",
        s(&out),
    ]));
    for name in INTS {
        assert_eq!(raw_of(&out, name), raw_of(&ft, name));
    }
}

#[test]
fn an_integer_change_that_cannot_be_carried_exactly_is_refused() {
    use serde_json::json;
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    // 2^40 and 2^40 + 1 are one float32: a float delta cannot tell them apart.
    let model = |v: i64| {
        json!({"kind": "safetensors", "tensors": [
            {"name": "big", "dtype": "int64", "shape": [3], "fill": v},
            {"name": "w", "dtype": "float32", "shape": [4, 4], "fill": {"normal": 0}},
        ]})
    };
    common::models::make_models(
        d,
        &json!({"base.safetensors": model(1 << 40), "ft.safetensors": model((1 << 40) + 1)}),
    );
    let wd = d.join("x.wdelta");
    let out = create(
        &d.join("base.safetensors"),
        &d.join("ft.safetensors"),
        &wd,
        &[],
    );
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    common::assert_contains(
        &stderr(&out),
        &[
            "integer tensor big",
            "cannot carry exactly",
            "1099511627777",
        ],
    );
    assert!(!wd.exists());
    assert!(temps_in(d).is_empty());
}

/// Writes a .wdelta of `n` empty tensors as scripts/wdelta_header_rss.py does: sparse (two
/// records a tensor) or int4 (five), names of `name_len` bytes, header shapes of `ndim` zeros
/// (records are 1-D). Returns the file's "header" in the sense of the memory bound, every byte
/// but the raw array bytes (preamble, JSON, the records' framing, checksum), and the bytes of
/// the JSON header alone.
fn header_bomb(path: &Path, n: usize, int4: bool, name_len: usize, ndim: usize) -> (u64, u64) {
    use sha2::{Digest, Sha256};
    use std::io::Write;
    // (field, dtype, elements, element size)
    let arrays: &[(&str, &str, u64, u64)] = if int4 {
        &[
            ("outlier_idx", "int64", 0, 8),
            ("outlier_vals", "float16", 0, 2),
            ("scale", "float16", 1, 2),
            ("zero_point", "float16", 1, 2),
            ("packed", "uint8", 0, 1),
        ]
    } else {
        &[("indices", "int64", 0, 8), ("values", "float32", 0, 4)]
    };
    let shape = vec!["0"; ndim].join(",");
    let mut entry = if int4 {
        format!(
            r#"{{"strategy":"int4","shape":[{shape}],"dtype":"float32","outlier_fraction":0.01,"n_elements":0,"n_outliers":0"#
        )
    } else {
        format!(r#"{{"strategy":"sparse","shape":[{shape}],"dtype":"float32","sparsity":0.9"#)
    };
    for (field, ..) in arrays {
        entry.push_str(&format!(r#","{field}":{{"_ref":"{field}"}}"#));
    }
    entry.push('}');
    let names: Vec<String> = (0..n)
        .map(|i| format!("{:x>name_len$}", format!("t{i:08}")))
        .collect();
    let mut json = format!(
        r#"{{"parent_hash":"{}","strategy":"{}","tensors":{{"#,
        "0".repeat(64),
        if int4 { "int4" } else { "sparse" }
    );
    for (i, name) in names.iter().enumerate() {
        if i > 0 {
            json.push(',');
        }
        json.push_str(&format!(r#""{name}":{entry}"#));
    }
    json.push_str("}}");

    let mut out = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut hasher = Sha256::new();
    let mut put = |bytes: &[u8]| {
        hasher.update(bytes);
        out.write_all(bytes).unwrap();
    };
    put(b"wdelta\0");
    put(&1u32.to_le_bytes());
    put(&(json.len() as u32).to_le_bytes());
    put(json.as_bytes());
    let mut payload = 0;
    for name in &names {
        for (field, dtype, count, size) in arrays {
            for s in [name.as_str(), field, dtype] {
                put(&(s.len() as u32).to_le_bytes());
                put(s.as_bytes());
            }
            put(&1u32.to_le_bytes());
            put(&count.to_le_bytes());
            put(&(count * size).to_le_bytes());
            put(&vec![0; (count * size) as usize]);
            payload += count * size;
        }
    }
    let digest = hasher.finalize();
    out.write_all(&digest).unwrap();
    out.flush().unwrap();
    drop(out);
    (
        std::fs::metadata(path).unwrap().len() - payload,
        json.len() as u64,
    )
}

/// Runs weight-inspect under Python's getrusage (as tests/header_bombs.rs does): exit code,
/// stdout, stderr, peak RSS in bytes.
fn run_measured(args: &[&str]) -> (Option<i32>, String, String, u64) {
    const MEASURE: &str = r#"
import resource, subprocess, sys
r = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
sys.stderr.buffer.write(r.stderr)
head = r.stdout[:4096].decode("utf-8", "replace").replace("\n", "|")
print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, head)
"#;
    let out = Command::new(common::python())
        .arg("-c")
        .arg(MEASURE)
        .arg(bin())
        .args(args)
        .env_remove("WEIGHT_INSPECT_MAX_HEADER_BYTES")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut fields = text.splitn(3, ' ');
    let code = fields.next().and_then(|c| c.parse().ok());
    let kib: u64 = fields.next().unwrap().trim().parse().unwrap();
    let head = fields.next().unwrap_or("").replace('|', "\n");
    (
        code,
        head,
        String::from_utf8_lossy(&out.stderr).into_owned(),
        kib * 1024,
    )
}

/// Files at the caps (100,000 tensors, the most a 100 MB header may declare): minimal entries,
/// 64-dimension shapes (2 bytes of JSON a dimension) and 700-byte names (a 97 MB JSON header),
/// each read by `delta inspect` (into memory) and `inspect` (mapped), in at most 3 x the header
/// + 64 MiB, the header being the file less its raw array bytes (the file's own pages count).
#[test]
fn wdelta_headers_at_the_caps_parse_within_three_times_their_size() {
    const MIB: u64 = 1 << 20;
    let tmp = tempfile::tempdir().unwrap();
    let cases = [
        ("minimal", false, 9, 1),
        ("dims", false, 9, 64),
        ("long-names", true, 700, 1),
    ];
    for (label, int4, name_len, ndim) in cases {
        let path = tmp.path().join(format!("{label}.wdelta"));
        let (header, json) = header_bomb(&path, 100_000, int4, name_len, ndim);
        let bound = 3 * header + 64 * MIB;
        for command in [&["delta", "inspect"][..], &["inspect"][..]] {
            let mut args = command.to_vec();
            args.push(s(&path));
            let (code, out, err, rss) = run_measured(&args);
            assert_eq!(code, Some(0), "{label} {command:?}: {err}");
            assert!(
                out.contains("tensors: 100000\n"),
                "{label} {command:?}: {out}"
            );
            assert!(
                rss <= bound,
                "{label} {command:?}: peak RSS {rss} bytes exceeds 3 x {header} + 64 MiB = {bound}"
            );
            if label == "minimal" {
                // Tighter still: within 3 x the JSON header alone (13.5 MB) + 64 MiB.
                let json_bound = 3 * json + 64 * MIB;
                assert!(
                    rss <= json_bound,
                    "{label} {command:?}: peak RSS {rss} bytes exceeds 3 x {json} + 64 MiB"
                );
            }
        }
        std::fs::remove_file(&path).unwrap();
    }
}

/// One float32 tensor of 8192 x 8192 (256 MiB) and a small one, in DIR/base.safetensors,
/// DIR/ft1.safetensors and DIR/ft2.safetensors (each a small step from the one before).
fn one_large_tensor(dir: &Path) {
    const SCRIPT: &str = r#"
import sys
import numpy as np
from safetensors.numpy import save_file
out = sys.argv[1]
rng = np.random.default_rng(5)
m = {"big": rng.standard_normal((8192, 8192), dtype=np.float32),
     "small": rng.standard_normal((64, 48), dtype=np.float32)}
save_file(m, f"{out}/base.safetensors")
for step in (1, 2):
    for v in m.values():
        v += rng.standard_normal(v.shape, dtype=np.float32) * np.float32(1e-3)
    save_file(m, f"{out}/ft{step}.safetensors")
"#;
    common::run_python_source(SCRIPT, &[s(dir)]);
}

/// Runs weight-inspect with `args` and `--threads 2`: it must succeed, its peak RSS below
/// half the 256 MiB tensor of [`one_large_tensor`]. Gives the start of its stdout.
fn runs_below_half_the_tensor(args: &[&str]) -> String {
    const MIB: u64 = 1 << 20;
    let args = [args, &["--threads", "2"]].concat();
    let (code, out, err, rss) = run_measured(&args);
    assert_eq!(code, Some(0), "{args:?}: {err}");
    assert!(
        rss < 128 * MIB,
        "{}: peak RSS {} MiB, not below half the 256 MiB tensor",
        args[..2].join(" "),
        rss / MIB
    );
    out
}

/// The memory of create (each strategy, against a base and a chain), apply (a sparse delta,
/// a chain, which verifies the lineage) and restore follows neither the model nor its largest
/// tensor: on a tensor of 256 MiB of float32, each peaks below half of it (a worker holding
/// the tensor's float32 delta, and its base values, was 2 to 4 times it). What each wrote is
/// what it should be: every delta's records as its strategy defines them, every rebuilt model
/// bit for bit the reference's reconstruction, the figures of `verify --against` numpy's.
#[test]
fn memory_does_not_follow_the_largest_tensor() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    one_large_tensor(dir);
    let file = |name: &str| dir.join(name);
    let path = |name: &str| s(&dir.join(name)).to_owned();
    let (base, ft1, ft2) = (
        path("base.safetensors"),
        path("ft1.safetensors"),
        path("ft2.safetensors"),
    );
    let (sparse, quantized, chained) = (
        path("sparse.wdelta"),
        path("quantized.wdelta"),
        path("chained.wdelta"),
    );
    let (applied, applied_chain, restored) = (
        path("applied.safetensors"),
        path("applied-chain.safetensors"),
        path("restored.safetensors"),
    );
    let commands: Vec<Vec<&str>> = vec![
        vec![
            "delta",
            "create",
            "--base",
            &base,
            &ft1,
            "-o",
            &sparse,
            "--strategy",
            "sparse",
            "--sparsity",
            "0.99",
        ],
        vec![
            "delta",
            "create",
            "--base",
            &base,
            &ft1,
            "-o",
            &quantized,
            "--strategy",
            "quantized",
        ],
        vec![
            "delta",
            "create",
            "--base",
            &base,
            &ft2,
            "--chain",
            &sparse,
            "-o",
            &chained,
            "--strategy",
            "int4",
        ],
        vec!["delta", "apply", "--base", &base, &sparse, "-o", &applied],
        vec![
            "delta",
            "apply",
            "--base",
            &base,
            "--chain",
            &sparse,
            &chained,
            "-o",
            &applied_chain,
        ],
        vec![
            "delta", "restore", &quantized, "--parent", &base, "-o", &restored,
        ],
    ];
    for args in commands {
        runs_below_half_the_tensor(&args);
    }
    // What the delta loses, measured with the base read chunk by chunk beside the fine-tune
    // (it was loaded whole: the 256 MiB tensor).
    let verify = [
        "delta",
        "verify",
        "--base",
        &base,
        &quantized,
        "--against",
        &ft1,
    ];
    let report = runs_below_half_the_tensor(&verify);

    let base = file("base.safetensors");
    let sparse = file("sparse.wdelta");
    encoded_as_defined(&base, &[], &file("ft1.safetensors"), &sparse);
    encoded_as_defined(
        &base,
        &[],
        &file("ft1.safetensors"),
        &file("quantized.wdelta"),
    );
    encoded_as_defined(
        &base,
        &[&sparse],
        &file("ft2.safetensors"),
        &file("chained.wdelta"),
    );
    rebuilt_as_defined(&base, &file("applied.safetensors"), &[&sparse]);
    rebuilt_as_defined(
        &base,
        &file("applied-chain.safetensors"),
        &[&sparse, &file("chained.wdelta")],
    );
    rebuilt_as_defined(
        &base,
        &file("restored.safetensors"),
        &[&file("quantized.wdelta")],
    );
    verify_reports_numpys_figures(
        &report,
        &base,
        &file("restored.safetensors"),
        &file("ft1.safetensors"),
    );
}

/// `verify --against`'s line for each tensor holds the rel_l2 and update lost numpy computes
/// (float64, in chunks) from the base, the delta's reconstruction and the fine-tune.
fn verify_reports_numpys_figures(report: &str, base: &Path, rebuilt: &Path, ft: &Path) {
    const SCRIPT: &str = r"
import sys
import numpy as np
from safetensors.numpy import load_file
b, r, f = (load_file(p) for p in sys.argv[1:4])
for name in sorted(b):
    s = np.zeros(3)
    bb, rr, ff = (x[name].reshape(-1) for x in (b, r, f))
    for at in range(0, bb.size, 1 << 22):
        x, y, z = (v[at:at + (1 << 22)].astype(np.float64) for v in (bb, rr, ff))
        s += [((y - z) ** 2).sum(), (z ** 2).sum(), ((z - x) ** 2).sum()]
    e = np.sqrt(s)
    print(name, e[0] / e[1], e[0] / e[2])
";
    let out = common::run_python_source(SCRIPT, &[s(base), s(rebuilt), s(ft)]);
    let expected = String::from_utf8(out.stdout).unwrap();
    let mut checked = 0;
    for line in expected.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        let (name, rel, lost): (&str, f64, f64) = (
            fields[0],
            fields[1].parse().unwrap(),
            fields[2].parse().unwrap(),
        );
        let shown = report
            .lines()
            .find(|l| l.starts_with(&format!("tensor {name}: ")))
            .unwrap_or_else(|| panic!("no line for {name} in:\n{report}"));
        let after = |key: &str| -> f64 {
            let rest = &shown[shown.find(key).unwrap() + key.len()..];
            let num: String = rest
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .collect();
            num.parse().unwrap()
        };
        // The line shows six decimals of rel_l2 and four of the update lost.
        let (r, l) = (after("rel_l2 "), after("update lost "));
        assert!(
            (r - rel).abs() <= 6e-7 && (l - lost).abs() <= 6e-5 && lost > 0.1,
            "{shown}: numpy has rel_l2 {rel}, update lost {lost}"
        );
        checked += 1;
    }
    assert_eq!(checked, 2, "two tensors, big and small");
}

/// Sparse at a low sparsity, where a tensor's records are large (12 bytes a kept value: 240
/// MB for the 256 MiB tensor at sparsity 0.7): `create` spools them and `apply` streams them,
/// the memory of each below half the tensor (both held them whole: 364 and 264 MB).
#[test]
fn memory_does_not_follow_a_sparse_tensors_kept_values() {
    let options = ["--strategy", "sparse", "--sparsity", "0.7"];
    let tmp = large_records_created_and_applied(&options, 200);
    // The spools were unlinked temporary files: nothing else is left beside the outputs.
    let mut left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(
        left,
        [
            "base.safetensors",
            "delta.wdelta",
            "ft1.safetensors",
            "ft2.safetensors",
            "out.safetensors"
        ]
    );
}

/// int4 with a large outlier fraction, whose outliers alone pass the bound (0.2 of the 64M
/// elements: 13.4M outliers, 134 MB of records, 295 MB as `apply` held them decoded beside
/// them): `create` selects them by counting and spools them, `apply` streams them, the memory
/// of each below half the 256 MiB tensor (they took 797 and 298 MB when `create` encoded such
/// a fraction whole and `apply` held the outliers).
#[test]
fn memory_does_not_follow_an_int4_tensors_outliers() {
    let options = ["--strategy", "int4", "--outlier-fraction", "0.2"];
    large_records_created_and_applied(&options, 128);
}

/// `create` with `options` on the tensor of [`one_large_tensor`], whose records must pass
/// `records_mib` MiB, then `apply` of that delta, each below half the tensor; the records are
/// as the strategy defines them and the rebuilt model is the reference's reconstruction. Gives
/// the directory (base, fine-tunes, `delta.wdelta`, `out.safetensors`).
fn large_records_created_and_applied(options: &[&str], records_mib: u64) -> tempfile::TempDir {
    const MIB: u64 = 1 << 20;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    one_large_tensor(dir);
    let path = |name: &str| s(&dir.join(name)).to_owned();
    let (base, ft1, delta, out) = (
        path("base.safetensors"),
        path("ft1.safetensors"),
        path("delta.wdelta"),
        path("out.safetensors"),
    );
    let create = [
        &["delta", "create", "--base", &base, &ft1, "-o", &delta][..],
        options,
    ];
    runs_below_half_the_tensor(&create.concat());
    let records = std::fs::metadata(&delta).unwrap().len();
    assert!(
        records > records_mib * MIB,
        "{} MiB of records",
        records / MIB
    );
    runs_below_half_the_tensor(&["delta", "apply", "--base", &base, &delta, "-o", &out]);
    let (base, delta) = (dir.join("base.safetensors"), dir.join("delta.wdelta"));
    encoded_as_defined(&base, &[], &dir.join("ft1.safetensors"), &delta);
    rebuilt_as_defined(&base, &dir.join("out.safetensors"), &[&delta]);
    tmp
}

/// A lineage whose links are larger than the bound (two sparse links at sparsity 0.7 of the
/// 256 MiB tensor, 242 MB each): `create --chain`, `verify --chain`, `apply --chain` and
/// `delta restore` through the stored links each peak below half the tensor. Each held every
/// link whole, and the codec's decoders a sparse tensor's indices and values beside it (526,
/// 796 and 797 MB for the first three). Each link's records are as the strategy defines them,
/// and what apply and restore rebuilt is the reference's reconstruction.
#[test]
fn memory_does_not_follow_a_lineages_links() {
    const MIB: u64 = 1 << 20;
    let repo = common::git::Repo::with_lfs(&["*.safetensors", "*.wdelta"]);
    let dir = repo.dir.as_path();
    one_large_tensor(dir);
    let path = |name: &str| s(&dir.join(name)).to_owned();
    let (base, ft1, ft2) = (
        path("base.safetensors"),
        path("ft1.safetensors"),
        path("ft2.safetensors"),
    );
    let (link1, link2) = (path("link1.wdelta"), path("link2.wdelta"));
    let (applied, restored) = (path("applied.safetensors"), path("restored.safetensors"));
    let sparse = ["--strategy", "sparse", "--sparsity", "0.7"];
    let create1 = [
        &["delta", "create", "--base", &base, &ft1, "-o", &link1],
        &sparse[..],
    ];
    ok(&run(&create1.concat()));
    let create2 = [
        &[
            "delta", "create", "--base", &base, &ft2, "-o", &link2, "--chain", &link1,
        ][..],
        &sparse[..],
    ];
    let commands: Vec<Vec<&str>> = vec![
        create2.concat(),
        vec![
            "delta", "verify", "--base", &base, "--chain", &link1, &link2,
        ],
        vec![
            "delta", "apply", "--base", &base, "--chain", &link1, &link2, "-o", &applied,
        ],
    ];
    for args in &commands {
        runs_below_half_the_tensor(args);
    }
    for link in [&link1, &link2] {
        let len = std::fs::metadata(link).unwrap().len();
        assert!(len > 200 * MIB, "{link}: {} MiB", len / MIB);
    }
    // Stored: the base and the first link committed, the second restored through them.
    repo.git(&["add", ".gitattributes", "base.safetensors", "link1.wdelta"]);
    repo.git(&["commit", "-q", "-m", "base and link 1"]);
    runs_below_half_the_tensor(&["delta", "restore", &link2, "-o", &restored]);
    assert!(
        std::fs::read(&restored).unwrap() == std::fs::read(&applied).unwrap(),
        "restore gives back what apply --chain rebuilt"
    );
    let (base, link1, link2) = (
        dir.join("base.safetensors"),
        dir.join("link1.wdelta"),
        dir.join("link2.wdelta"),
    );
    encoded_as_defined(&base, &[], &dir.join("ft1.safetensors"), &link1);
    encoded_as_defined(&base, &[&link1], &dir.join("ft2.safetensors"), &link2);
    rebuilt_as_defined(&base, &dir.join("applied.safetensors"), &[&link1, &link2]);
}

/// `apply --chain` maps its links and reads them again after their checksums were verified: a
/// link cut short during the run is an error naming it (not SIGBUS), and so is one written in
/// place, whose stamps moved; neither leaves a temporary file or an output.
#[cfg(unix)]
#[test]
fn a_link_cut_or_written_during_apply_chain_is_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let (base, link1) = big_setup(d, "4096x4096,4096x4096");
    let link2 = d.join("link2.wdelta");
    let ft = d.join("ft1.safetensors");
    let chained = ["--strategy", "int4", "--chain", s(&link1)];
    ok(&create(&base, &ft, &link2, &chained));
    let outdir = d.join("out");
    std::fs::create_dir_all(&outdir).unwrap();
    let output = outdir.join("model.safetensors");
    for (which, original) in [(1, &link1), (2, &link2)] {
        for cut in [true, false] {
            let victim = d.join(format!("victim-{which}-{cut}.wdelta"));
            std::fs::copy(original, &victim).unwrap();
            let chain = if which == 1 {
                [&victim, &link2]
            } else {
                [&link1, &victim]
            };
            let args = [
                "delta",
                "apply",
                "--base",
                s(&base),
                "--chain",
                s(chain[0]),
                s(chain[1]),
                "-o",
                s(&output),
                "--threads",
                "1",
            ];
            let child = until_temp_exists(&args);
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(&victim)
                .unwrap();
            let len = f.metadata().unwrap().len();
            if cut {
                f.set_len(1024).unwrap();
            } else {
                use std::os::unix::fs::FileExt;
                f.write_all_at(&[0x5a; 4096], len / 2).unwrap();
            }
            drop(f);
            let context = format!("link {which} cut={cut}");
            refused_cleanly(child, &victim, &output, &context);
        }
    }
}
