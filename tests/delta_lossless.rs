//! The lossless strategy (.wdelta version 3): the fine-tuned file(s) come back byte for byte
//! (header, metadata, padding, tensor order) from pairs written by the reference writers
//! (safetensors, gguf-py) through scripts/lossless_pair.py; what is refused is refused by name.

mod common;

use std::path::{Path, PathBuf};

use common::delta::{ok, s};
use common::git::Repo;
use common::{code, run, run_python, stderr, stdout};

fn make(kind: &str, dir: &Path, extra: &[&str]) {
    let mut args = vec![kind, s(dir)];
    args.extend_from_slice(extra);
    run_python("lossless_pair.py", &args);
}

fn create(base: &Path, ft: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "delta",
        "create",
        "--strategy",
        "lossless",
        "--base",
        s(base),
        s(ft),
        "-o",
        s(out),
    ];
    args.extend_from_slice(extra);
    run(&args)
}

/// A safetensors pair from lossless_pair.py in a temporary directory, with its lossless
/// delta: (the directory, base, fine-tune, delta).
fn stored_safetensors_pair() -> (tempfile::TempDir, PathBuf, PathBuf, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    make("safetensors", dir, &[]);
    let (base, ft) = (dir.join("base.safetensors"), dir.join("ft.safetensors"));
    let delta = dir.join("ft.wdelta");
    ok(&create(&base, &ft, &delta, &[]));
    (tmp, base, ft, delta)
}

fn apply(base: &Path, delta: &Path, out: &Path) -> std::process::Output {
    run(&["delta", "apply", "--base", s(base), s(delta), "-o", s(out)])
}

fn same_bytes(a: &Path, b: &Path) {
    let (x, y) = (std::fs::read(a).unwrap(), std::fs::read(b).unwrap());
    assert!(x == y, "{} and {} differ", a.display(), b.display());
}

fn structural_id(path: &Path) -> String {
    let out = run(&["id", s(path)]);
    ok(&out);
    stdout(&out)
}

/// A pair, its delta and the rebuilt file, byte-compared.
fn round_trip(base: &Path, ft: &Path, dir: &Path) -> PathBuf {
    let delta = dir.join("ft.wdelta");
    ok(&create(base, ft, &delta, &[]));
    let rebuilt = dir.join("rebuilt");
    let out = apply(base, &delta, &rebuilt);
    ok(&out);
    assert!(stdout(&out).contains("identical to the fine-tuned model"));
    delta
}

#[test]
fn safetensors_float_and_integer_tensors_come_back_byte_identical() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    make(
        "safetensors",
        dir,
        &[
            "--dtypes",
            "float32,bfloat16,float16,float64,int64,int8,uint8",
        ],
    );
    let (base, ft) = (dir.join("base.safetensors"), dir.join("ft.safetensors"));
    let delta = round_trip(&base, &ft, dir);
    same_bytes(&dir.join("rebuilt"), &ft);
    // Metadata, signed zeros and NaN payloads included: the structural identity is the same.
    assert_eq!(structural_id(&dir.join("rebuilt")), structural_id(&ft));
    let shown = stdout(&run(&["delta", "inspect", s(&delta)]));
    // 7 dtypes x (weight changed, frozen and special unchanged) + reshaped + new, stored whole.
    assert!(
        shown.contains("tensors: 23 (14 unchanged, 7 changed, 2 stored whole)"),
        "{shown}"
    );
    assert!(shown.contains("tensor head.new: whole"), "{shown}");
    assert!(shown.contains("tensor layer0.float32.frozen: unchanged 4096 bytes, 0 stored"));
    let json: serde_json::Value =
        serde_json::from_str(&stdout(&run(&["delta", "inspect", "--json", s(&delta)]))).unwrap();
    assert_eq!(json["schema"], 1);
    assert_eq!(json["strategy"], "lossless");
    assert_eq!(json["lossless"], true);
}

#[test]
fn sharded_safetensors_come_back_file_for_file() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    make("sharded", dir, &[]);
    round_trip(&dir.join("base"), &dir.join("ft"), dir);
    let mut names: Vec<_> = std::fs::read_dir(dir.join("ft"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    names.sort();
    assert!(names.len() > 2, "{names:?}");
    for name in &names {
        same_bytes(&dir.join("rebuilt").join(name), &dir.join("ft").join(name));
    }
    assert_eq!(
        std::fs::read_dir(dir.join("rebuilt")).unwrap().count(),
        names.len()
    );
}

#[test]
fn gguf_quantized_and_float_tensors_come_back_byte_identical() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    make(
        "gguf",
        dir,
        &["--types", "f32,f16,q8_0,q4_0,q4_1,q5_0,q4_k,q6_k,iq4_nl"],
    );
    let (base, ft) = (dir.join("base.gguf"), dir.join("ft.gguf"));
    let delta = round_trip(&base, &ft, dir);
    same_bytes(&dir.join("rebuilt"), &ft);
    let shown = stdout(&run(&["delta", "inspect", s(&delta)]));
    assert!(
        shown.contains("tensor blk.2.q8_0.weight: changed"),
        "{shown}"
    );
    assert!(
        shown.contains("tensor blk.2.q8_0.frozen: unchanged"),
        "{shown}"
    );
}

#[test]
fn a_lossy_strategy_on_gguf_is_refused_naming_the_lossless_one() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    make("gguf", dir, &["--types", "f32,q8_0"]);
    let (base, ft) = (dir.join("base.gguf"), dir.join("ft.gguf"));
    let out = dir.join("d.wdelta");
    for strategy in ["int4", "sparse", "quantized"] {
        let refused = common::delta::create(&base, &ft, &out, &["--strategy", strategy]);
        assert_eq!(code(&refused), 2, "{strategy}: {}", stderr(&refused));
        let err = stderr(&refused);
        assert!(
            err.contains("base.gguf: a gguf file; the lossy strategies (int4, sparse, quantized) take safetensors models, `--strategy lossless` stores safetensors, GGUF and PyTorch models"),
            "{strategy}: {err}"
        );
        assert!(!out.exists(), "{strategy}: an output was written");
    }
    ok(&create(&base, &ft, &out, &[]));
}

/// `delta create` without `--strategy` is lossless, for GGUF as for safetensors: it says so,
/// and `apply` rebuilds the fine-tune's bytes.
#[test]
fn create_is_lossless_by_default_for_gguf_and_safetensors() {
    for (kind, ext) in [("gguf", "gguf"), ("safetensors", "safetensors")] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        make(kind, dir, &[]);
        let base = dir.join(format!("base.{ext}"));
        let ft = dir.join(format!("ft.{ext}"));
        let delta = dir.join("d.wdelta");
        let out = run(&[
            "delta",
            "create",
            "--base",
            s(&base),
            s(&ft),
            "-o",
            s(&delta),
        ]);
        ok(&out);
        assert!(
            stdout(&out)
                .contains("strategy: lossless (rebuilds the fine-tuned files byte for byte)"),
            "{kind}: {}",
            stdout(&out)
        );
        let rebuilt = dir.join(format!("rebuilt.{ext}"));
        let applied = apply(&base, &delta, &rebuilt);
        ok(&applied);
        assert!(stdout(&applied).contains("identical to the fine-tuned model"));
        same_bytes(&ft, &rebuilt);
    }
}

#[test]
fn split_gguf_comes_back_part_for_part() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    make("gguf", dir, &["--types", "f32,q8_0,q4_k", "--split", "2"]);
    let first = |prefix: &str| {
        let mut parts: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.file_name().unwrap().to_str().unwrap().starts_with(prefix))
            .collect();
        parts.sort();
        assert!(parts.len() > 1, "{parts:?}");
        (parts[0].clone(), parts.len())
    };
    let (base, _) = first("base-");
    let (ft, parts) = first("ft-");
    round_trip(&base, &ft, dir);
    let mut n = 0;
    for e in std::fs::read_dir(dir.join("rebuilt")).unwrap() {
        let name = e.unwrap().file_name();
        same_bytes(&dir.join("rebuilt").join(&name), &dir.join(&name));
        n += 1;
    }
    assert_eq!(n, parts);
}

#[test]
fn a_zero_delta_is_tiny_and_the_bytes_do_not_depend_on_threads() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    make("safetensors", dir, &["--rows", "512"]);
    let base = dir.join("base.safetensors");
    let zero = dir.join("zero.wdelta");
    ok(&create(&base, &base, &zero, &[]));
    let model = std::fs::metadata(&base).unwrap().len();
    let size = std::fs::metadata(&zero).unwrap().len();
    // A reference per tensor, the header bytes compressed: no tensor data.
    assert!(
        size < 4096 && size * 100 < model,
        "{size} bytes for {model}"
    );
    ok(&apply(&base, &zero, &dir.join("same")));
    same_bytes(&dir.join("same"), &base);

    let ft = dir.join("ft.safetensors");
    let one = dir.join("one.wdelta");
    let two = dir.join("two.wdelta");
    ok(&create(&base, &ft, &one, &["--threads", "1"]));
    ok(&create(&base, &ft, &two, &["--threads", "3"]));
    same_bytes(&one, &two);
}

#[test]
fn a_tampered_base_is_refused_and_nothing_is_written() {
    let (tmp, base, _, delta) = stored_safetensors_pair();
    let dir = tmp.path();
    let mut bytes = std::fs::read(&base).unwrap();
    let last = bytes.len() - 5;
    bytes[last] ^= 0x40;
    let tampered = dir.join("tampered.safetensors");
    std::fs::write(&tampered, &bytes).unwrap();
    let out = apply(&tampered, &delta, &dir.join("out"));
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(stderr(&out).contains("wrong parent"), "{}", stderr(&out));
    assert!(!dir.join("out").exists());
}

#[test]
fn a_truncated_or_corrupted_delta_is_refused_by_name() {
    let (tmp, base, _, delta) = stored_safetensors_pair();
    let dir = tmp.path();
    let bytes = std::fs::read(&delta).unwrap();
    let cut = dir.join("cut.wdelta");
    for keep in [bytes.len() - 1, bytes.len() - 100, bytes.len() / 2, 30] {
        std::fs::write(&cut, &bytes[..keep]).unwrap();
        let out = apply(&base, &cut, &dir.join("out"));
        assert_eq!(code(&out), 2, "kept {keep}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(
            [
                "header length",
                "checksum mismatch",
                "shorter than",
                "JSON header",
                "frames"
            ]
            .iter()
            .any(|w| err.contains(w)),
            "kept {keep}: {err}"
        );
        assert!(err.contains("cut.wdelta"), "{err}");
        assert!(!dir.join("out").exists());
    }
    // A flipped byte in the header or inside a frame (the frames are decoded while the
    // checksum is verified beside them): the checksum says so, and nothing is written.
    for at in [40, bytes.len() / 2] {
        let mut flipped = bytes.clone();
        flipped[at] ^= 1;
        std::fs::write(&cut, &flipped).unwrap();
        let out = apply(&base, &cut, &dir.join("out"));
        assert_eq!(code(&out), 2);
        assert!(
            stderr(&out).contains("checksum mismatch"),
            "byte {at}: {}",
            stderr(&out)
        );
        assert!(!dir.join("out").exists());
    }
}

#[test]
fn readers_that_do_not_know_version_3_refuse_it_by_name() {
    let (tmp, _, _, delta) = stored_safetensors_pair();
    let dir = tmp.path();
    // deltatensors 0.2.0 (format version 1) refuses the version.
    let out = std::process::Command::new(common::python())
        .args([
            "-c",
            "import sys; from deltatensors.format import read_wdelta; \
             read_wdelta(open(sys.argv[1], 'rb'))",
            s(&delta),
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("ersion") && err.contains('3'), "{err}");
    // In a chain it is a link like any other: the same delta twice does not apply to what the
    // first rebuilt, and the error says so.
    let out = run(&[
        "delta",
        "apply",
        "--base",
        s(&dir.join("base.safetensors")),
        "--chain",
        s(&delta),
        s(&delta),
        "-o",
        s(&dir.join("out")),
    ]);
    assert_eq!(code(&out), 2);
    common::assert_contains(&stderr(&out), &["wrong parent", "the model ", " rebuilds"]);
    common::assert_lacks(&stderr(&out), &[".weight-inspect-lineage"]);
    assert!(!dir.join("out").exists());
}

#[test]
fn inspect_id_and_textconv_describe_a_lossless_delta() {
    let (tmp, _, _, delta) = stored_safetensors_pair();
    let dir = tmp.path();
    let parent = {
        let out = run(&["delta", "inspect", "--json", s(&delta)]);
        ok(&out);
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        json["parent_hash"].as_str().unwrap().to_owned()
    };
    assert_eq!(parent.len(), 64);
    // The pair: per dtype a changed, a frozen and a special (-0.0, NaN payloads) tensor, one
    // new tensor and one of another shape, each small enough for one chunk, and the header.
    let out = run(&["inspect", s(&delta)]);
    ok(&out);
    let text = stdout(&out);
    for line in [
        "format: wdelta version 3\n".to_string(),
        "strategy: lossless".to_string(),
        format!("parent hash: {parent}\n"),
        "model format: safetensors\n".to_string(),
        format!(
            "file size: {} bytes\n",
            std::fs::metadata(&delta).unwrap().len()
        ),
        "tensors: 14 (8 unchanged, 4 changed, 2 stored whole)\n".to_string(),
        "chunks: 15 (4 stored as differences from the base, 8 unchanged, 2 stored whole, 1 other)\n".to_string(),
        "tensor layer1.bfloat16.frozen: unchanged 2048 bytes, 0 stored\n".to_string(),
    ] {
        assert!(text.contains(&line), "{line:?} not in\n{text}");
    }

    let out = run(&["id", "--json", s(&delta)]);
    ok(&out);
    let raw = stdout(&out);
    assert!(raw.starts_with("{\"schema\":1,"), "{raw}");
    let json: serde_json::Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(json["format"], "wdelta");
    assert_eq!(json["version"], 3);
    assert_eq!(json["strategy"], "lossless");
    assert_eq!(json["model_format"], "safetensors");
    assert_eq!(json["parent_hash"], parent.as_str());
    assert_eq!(
        json["chunks"],
        serde_json::json!({"xor": 4, "unchanged": 8, "whole": 2, "other": 1})
    );
    let whole: Vec<_> = json["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["stored"] == "whole")
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(whole, ["head.new", "head.reshaped"]);

    let out = run(&["textconv", s(&delta)]);
    ok(&out);
    let text = stdout(&out);
    assert!(text.contains("\nformat: wdelta version 3\n"), "{text}");
    assert!(text.contains("\nmodel format: safetensors\n"), "{text}");

    // A GGUF fine-tune names its format.
    let gguf = dir.join("gguf");
    make("gguf", &gguf, &[]);
    let gdelta = gguf.join("ft.wdelta");
    ok(&create(
        &gguf.join("base.gguf"),
        &gguf.join("ft.gguf"),
        &gdelta,
        &[],
    ));
    let out = run(&["inspect", "--json", s(&gdelta)]);
    ok(&out);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["model_format"], "gguf");

    // A corrupted one is an error naming the version for inspect, a note for textconv.
    let mut bytes = std::fs::read(&delta).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&delta, bytes).unwrap();
    let out = run(&["inspect", s(&delta)]);
    assert_eq!(code(&out), 2);
    let err = stderr(&out);
    assert!(
        err.contains("ft.wdelta") && err.contains("version 3") && err.contains("checksum"),
        "{err}"
    );
    let out = run(&["textconv", s(&delta)]);
    ok(&out);
    assert!(
        stdout(&out).contains("unreadable .wdelta file"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn git_log_p_of_a_stored_delta_describes_it() {
    let repo = Repo::with_lfs(&["*.safetensors", "*.wdelta"]);
    let work = repo.tmp.path().join("work");
    make("safetensors", &work, &[]);
    std::fs::write(repo.path(".gitignore"), "model.safetensors\n").unwrap();
    std::fs::copy(work.join("base.safetensors"), repo.path("base.safetensors")).unwrap();
    ok(&repo.wi(&["git", "install", "--textconv"]));
    let mut attributes = std::fs::read_to_string(repo.path(".gitattributes")).unwrap();
    attributes.push_str("*.wdelta diff=weight-inspect\n");
    std::fs::write(repo.path(".gitattributes"), attributes).unwrap();
    repo.git(&["add", ".gitattributes", ".gitignore", "base.safetensors"]);
    repo.git(&["commit", "-q", "-m", "base"]);
    std::fs::copy(work.join("ft.safetensors"), repo.path("model.safetensors")).unwrap();
    ok(&repo.wi(&[
        "delta",
        "store",
        "model.safetensors",
        "--parent",
        "base.safetensors",
    ]));
    repo.git(&["add", "model.safetensors.wdelta"]);
    repo.git(&["commit", "-q", "-m", "fine-tune"]);
    let log = repo.ok(&["log", "-p", "-1", "--", "model.safetensors.wdelta"]);
    assert!(!log.contains("unreadable"), "{log}");
    for line in [
        "\n+format: wdelta version 3\n",
        "\n+strategy: lossless",
        "\n+model format: safetensors\n",
        "\n+chunks: 15 (4 stored as differences from the base, 8 unchanged, 2 stored whole, 1 other)\n",
        "\n+file model.safetensors: ",
    ] {
        assert!(log.contains(line), "{line:?} not in\n{log}");
    }
}

#[test]
fn pytorch_checkpoints_come_back_as_they_were() {
    // Checkpoints written by torch.save (zip and legacy layouts) and a sharded pytorch_model.bin
    // directory written by transformers (tests/fixtures/pytorch, scripts/make_pytorch_fixtures.py).
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let fx = |name: &str| common::fixture(&format!("pytorch/{name}"));
    for (base, ft) in [
        ("basic.pt", "all-dtypes.pt"),
        ("basic-legacy.pt", "all-dtypes-legacy.pt"),
        ("basic.pt", "basic-legacy.pt"),
    ] {
        let delta = dir.join("pt.wdelta");
        ok(&create(&fx(base), &fx(ft), &delta, &[]));
        let out = dir.join("rebuilt.pt");
        ok(&apply(&fx(base), &delta, &out));
        same_bytes(&out, &fx(ft));
    }
    let delta = dir.join("sharded.wdelta");
    ok(&create(&fx("hf-bin"), &fx("hf-bin-sharded"), &delta, &[]));
    let shown = stdout(&run(&["delta", "inspect", s(&delta)]));
    assert!(
        shown.contains("(21 unchanged, 0 changed, 0 stored whole)"),
        "{shown}"
    );
    ok(&apply(&fx("hf-bin"), &delta, &dir.join("sharded")));
    let mut n = 0;
    for e in std::fs::read_dir(dir.join("sharded")).unwrap() {
        let name = e.unwrap().file_name();
        same_bytes(
            &dir.join("sharded").join(&name),
            &fx("hf-bin-sharded").join(&name),
        );
        n += 1;
    }
    assert_eq!(n, 3);
}

#[test]
fn verify_checks_the_base_and_the_checksum() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    make("gguf", dir, &["--types", "f16,q8_0"]);
    let (base, ft) = (dir.join("base.gguf"), dir.join("ft.gguf"));
    let delta = dir.join("ft.wdelta");
    ok(&create(&base, &ft, &delta, &[]));
    let out = run(&["delta", "verify", "--base", s(&base), s(&delta)]);
    ok(&out);
    assert!(
        stdout(&out).contains("applies (lossless"),
        "{}",
        stdout(&out)
    );
    let out = run(&["delta", "verify", "--base", s(&ft), s(&delta)]);
    assert_eq!(code(&out), 1);
    assert!(stderr(&out).contains("wrong parent"), "{}", stderr(&out));
}

#[test]
fn store_and_restore_through_git_give_back_the_committed_bytes() {
    let repo = Repo::with_lfs(&["*.safetensors", "*.wdelta"]);
    let work = repo.tmp.path().join("work");
    make("safetensors", &work, &[]);
    std::fs::write(repo.path(".gitignore"), "model.safetensors\n").unwrap();
    std::fs::copy(work.join("base.safetensors"), repo.path("base.safetensors")).unwrap();
    repo.git(&["add", ".gitattributes", ".gitignore", "base.safetensors"]);
    repo.git(&["commit", "-q", "-m", "base"]);
    std::fs::copy(work.join("ft.safetensors"), repo.path("model.safetensors")).unwrap();
    // Lossless is store's default.
    let out = repo.wi(&[
        "delta",
        "store",
        "model.safetensors",
        "--parent",
        "base.safetensors",
    ]);
    ok(&out);
    assert!(
        stdout(&out).contains("strategy: lossless"),
        "{}",
        stdout(&out)
    );
    repo.git(&["add", "model.safetensors.wdelta"]);
    repo.git(&["commit", "-q", "-m", "fine-tune"]);
    std::fs::remove_file(repo.path("model.safetensors")).unwrap();
    // The base is found by hash in HEAD's tree.
    let out = repo.wi(&["delta", "restore", "model.safetensors.wdelta"]);
    ok(&out);
    assert!(
        stdout(&out).contains("identical to the stored model"),
        "{}",
        stdout(&out)
    );
    same_bytes(
        &repo.path("model.safetensors"),
        &work.join("ft.safetensors"),
    );
    let cmp = std::process::Command::new("cmp")
        .args([
            s(&repo.path("model.safetensors")),
            s(&work.join("ft.safetensors")),
        ])
        .status()
        .unwrap();
    assert!(cmp.success());

    // A lossy strategy is an explicit choice, and says what it is (lossy strategies need the
    // same tensor names and shapes: the base itself stands in for a fine-tune).
    std::fs::copy(
        work.join("base.safetensors"),
        repo.path("model.safetensors"),
    )
    .unwrap();
    let out = repo.wi(&[
        "delta",
        "store",
        "--strategy",
        "int4",
        "model.safetensors",
        "--parent",
        "base.safetensors",
        "-o",
        "lossy.wdelta",
    ]);
    ok(&out);
    assert!(
        stdout(&out).contains("strategy: int4 (lossy"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn a_gguf_model_is_stored_and_restored_against_a_given_parent() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    make("gguf", dir, &["--types", "f16,q8_0,q6_k"]);
    let model = dir.join("model.gguf");
    std::fs::copy(dir.join("ft.gguf"), &model).unwrap();
    let base = dir.join("base.gguf");
    ok(&run(&["delta", "store", s(&model), "--parent", s(&base)]));
    std::fs::remove_file(&model).unwrap();
    let stored = dir.join("model.gguf.wdelta");
    let out = run(&["delta", "restore", s(&stored), "--parent", s(&base)]);
    ok(&out);
    same_bytes(&model, &dir.join("ft.gguf"));
}

#[test]
fn real_fine_tunes_come_back_byte_identical() {
    // Pairs made by real AdamW steps with torch (tests/fixtures/finetune,
    // scripts/make_finetune_pairs.py): BERT in float32 (every parameter trained, or only the last
    // layer) and bfloat16, and Llama converted to GGUF f16 and q8_0 by llama.cpp's converter.
    let tmp = tempfile::tempdir().unwrap();
    let fx = |pair: &str, file: &str| common::fixture(&format!("finetune/{pair}/{file}"));
    let mut sizes = std::collections::BTreeMap::new();
    for (pair, ext) in [
        ("f32-full", "safetensors"),
        ("f32-frozen", "safetensors"),
        ("bf16-full", "safetensors"),
        ("gguf-f16", "gguf"),
        ("gguf-q8_0", "gguf"),
    ] {
        let dir = tmp.path().join(pair);
        std::fs::create_dir(&dir).unwrap();
        let (base, ft) = (
            fx(pair, &format!("base.{ext}")),
            fx(pair, &format!("ft.{ext}")),
        );
        let delta = round_trip(&base, &ft, &dir);
        same_bytes(&dir.join("rebuilt"), &ft);
        assert_eq!(structural_id(&dir.join("rebuilt")), structural_id(&ft));
        let json: serde_json::Value =
            serde_json::from_str(&stdout(&run(&["delta", "inspect", "--json", s(&delta)])))
                .unwrap();
        let len = std::fs::metadata(&delta).unwrap().len();
        assert!(
            len < std::fs::metadata(&ft).unwrap().len(),
            "{pair}: {len} bytes"
        );
        sizes.insert(pair, (len, json));
    }
    // Weight decay moves every trained float: nothing of the full fine-tune is unchanged; the
    // frozen one keeps all but the last of its two layers, so its delta is a fraction of the
    // full one's.
    let tensors = |pair: &str, kind: &str| {
        let all = sizes[pair].1["tensors"].as_array().unwrap();
        all.iter().filter(|t| t["stored"] == kind).count()
    };
    assert_eq!(tensors("f32-full", "unchanged"), 0);
    assert!(tensors("f32-frozen", "unchanged") > tensors("f32-frozen", "changed"));
    let (frozen, full) = (sizes["f32-frozen"].0, sizes["f32-full"].0);
    assert!(frozen * 5 < full * 3, "frozen {frozen} bytes, full {full}");
}

/// `delta create` in `dir` (lossless unless `extra` names a strategy) of `ft` against `base`
/// through `chain`.
fn create_on(dir: &Path, chain: &[&str], ft: &str, out: &str, extra: &[&str]) {
    let mut args = vec![
        "delta",
        "create",
        "--base",
        "base.safetensors",
        ft,
        "-o",
        out,
    ];
    if !chain.is_empty() {
        args.push("--chain");
        args.extend_from_slice(chain);
    }
    args.extend_from_slice(extra);
    ok(&common::run_in(Some(dir), &args));
}

/// `delta apply` in `dir` of `chain` on base.safetensors into `out`: its report.
fn apply_chain(dir: &Path, chain: &[&str], out: &str) -> String {
    let mut args = vec!["delta", "apply", "--base", "base.safetensors", "--chain"];
    args.extend_from_slice(chain);
    args.extend(["-o", out]);
    let done = common::run_in(Some(dir), &args);
    ok(&done);
    stdout(&done)
}

/// Lossless and lossy links chain onto each other in either order: a lossless link rebuilds
/// exactly the fine-tune it was made from, whatever came before it; a lossy one is approximate
/// and says so; every link's parent hash is checked (verify lists each).
#[test]
fn lossless_and_lossy_links_chain_in_either_order() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    common::delta::pair(d, "32x16,7,3x4x5", "f32", 11, 3);
    // lossless -> int4 -> lossless
    create_on(d, &[], "ft1.safetensors", "l1.wdelta", &[]);
    create_on(
        d,
        &["l1.wdelta"],
        "ft2.safetensors",
        "d2.wdelta",
        &["--strategy", "int4"],
    );
    create_on(
        d,
        &["l1.wdelta", "d2.wdelta"],
        "ft3.safetensors",
        "l3.wdelta",
        &[],
    );
    let text = apply_chain(
        d,
        &["l1.wdelta", "d2.wdelta", "l3.wdelta"],
        "r3.safetensors",
    );
    assert!(
        text.contains("identical to the fine-tuned model (lossless; 3 deltas"),
        "{text}"
    );
    same_bytes(&d.join("r3.safetensors"), &d.join("ft3.safetensors"));
    // The int4 link after a lossless one names the hash of the bytes that one rebuilds: it
    // applies to the fine-tune itself, with the same result.
    let text = apply_chain(d, &["l1.wdelta", "d2.wdelta"], "r2.safetensors");
    assert!(text.contains(": approximate, int4, 3 tensors, "), "{text}");
    assert!(text.contains("2 deltas verified"), "{text}");
    ok(&common::run_in(
        Some(d),
        &[
            "delta",
            "apply",
            "--base",
            "ft1.safetensors",
            "d2.wdelta",
            "-o",
            "r2b.safetensors",
        ],
    ));
    same_bytes(&d.join("r2.safetensors"), &d.join("r2b.safetensors"));
    let out = common::run_in(
        Some(d),
        &[
            "delta",
            "verify",
            "--base",
            "base.safetensors",
            "--chain",
            "l1.wdelta",
            "d2.wdelta",
            "l3.wdelta",
        ],
    );
    ok(&out);
    let v = stdout(&out);
    assert_eq!(v.lines().count(), 4, "{v}");
    common::assert_contains(
        &v,
        &[
            "ok: l1.wdelta applies (lossless, checksum verified)",
            "ok: d2.wdelta applies (parent hash ",
            "ok: l3.wdelta applies (lossless, checksum verified)",
        ],
    );
    // Out of order, the lossless link does not apply: named, nothing written.
    let out = common::run_in(
        Some(d),
        &[
            "delta",
            "apply",
            "--base",
            "base.safetensors",
            "--chain",
            "l1.wdelta",
            "l3.wdelta",
            "-o",
            "bad.safetensors",
        ],
    );
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(stderr(&out).contains("l3.wdelta"), "{}", stderr(&out));
    assert!(!d.join("bad.safetensors").exists());

    // int4 -> lossless: the lossless link is made against the int4 link's rebuilt model (in
    // the base's dtype) and gives back ft2's bytes.
    create_on(
        d,
        &[],
        "ft1.safetensors",
        "d1.wdelta",
        &["--strategy", "int4"],
    );
    create_on(d, &["d1.wdelta"], "ft2.safetensors", "l2.wdelta", &[]);
    let text = apply_chain(d, &["d1.wdelta", "l2.wdelta"], "s2.safetensors");
    assert!(text.contains("identical to the fine-tuned model"), "{text}");
    same_bytes(&d.join("s2.safetensors"), &d.join("ft2.safetensors"));
    ok(&common::run_in(
        Some(d),
        &[
            "delta",
            "apply",
            "--base",
            "base.safetensors",
            "d1.wdelta",
            "-o",
            "s1.safetensors",
        ],
    ));
    let out = common::run_in(
        Some(d),
        &["delta", "verify", "--base", "s1.safetensors", "l2.wdelta"],
    );
    ok(&out);
    // No scratch file is left beside the outputs.
    let left: Vec<_> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".weight-inspect"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// A file and a tensor named with a backslash (an ordinary character on Unix) go through
/// create, apply, store and restore and come back byte for byte, under their own names.
#[test]
fn a_backslash_in_a_file_or_tensor_name_round_trips() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    run_python_source_in(
        d,
        r#"
import numpy as np
from safetensors.numpy import save_file
rng = np.random.default_rng(5)
base = {"w\\x": rng.standard_normal((8, 4)).astype(np.float32), "b": np.zeros(3, np.float32)}
ft = {k: v + np.float32(0.01) for k, v in base.items()}
save_file(base, "base.safetensors")
save_file(ft, "a\\b.safetensors")
"#,
    );
    let ft = d.join("a\\b.safetensors");
    assert!(ft.exists());
    let delta = d.join("a\\b.wdelta");
    ok(&create(&d.join("base.safetensors"), &ft, &delta, &[]));
    let out = run(&["delta", "inspect", s(&delta)]);
    ok(&out);
    common::assert_contains(&stdout(&out), &["tensor w\\\\x: changed"]);
    let rebuilt = d.join("rebuilt.safetensors");
    ok(&apply(&d.join("base.safetensors"), &delta, &rebuilt));
    same_bytes(&rebuilt, &ft);
    // store and restore (beside the model, named after it).
    ok(&run(&[
        "delta",
        "store",
        s(&ft),
        "--parent",
        s(&d.join("base.safetensors")),
    ]));
    let stored = d.join("a\\b.safetensors.wdelta");
    let copy = d.join("kept.safetensors");
    std::fs::rename(&ft, &copy).unwrap();
    ok(&run(&[
        "delta",
        "restore",
        s(&stored),
        "--parent",
        s(&d.join("base.safetensors")),
    ]));
    same_bytes(&ft, &copy);
}

/// A fine-tune named by `REV:path` is recorded in the lossless header by its name in the
/// repository, not by the temporary copy or LFS object its bytes were read from.
#[test]
fn a_rev_path_fine_tune_is_recorded_by_its_own_name() {
    let repo = Repo::with_lfs(&["*.safetensors"]);
    let work = repo.tmp.path().join("work");
    make("safetensors", &work, &[]);
    std::fs::copy(work.join("base.safetensors"), repo.path("base.safetensors")).unwrap();
    std::fs::copy(work.join("ft.safetensors"), repo.path("tuned.safetensors")).unwrap();
    repo.commit_all("models");
    for (ft, name) in [
        ("HEAD:tuned.safetensors", "tuned.safetensors"),
        ("tuned.safetensors", "tuned.safetensors"),
    ] {
        let out = repo.wi(&[
            "delta",
            "create",
            "--base",
            "HEAD:base.safetensors",
            ft,
            "-o",
            "x.wdelta",
        ]);
        ok(&out);
        let json: serde_json::Value = serde_json::from_str(&stdout(
            &repo.wi(&["delta", "inspect", "--json", "x.wdelta"]),
        ))
        .unwrap();
        assert_eq!(json["files"][0]["name"], name, "{ft}: {json}");
        let out = repo.wi(&[
            "delta",
            "apply",
            "--base",
            "base.safetensors",
            "x.wdelta",
            "-o",
            "r.safetensors",
        ]);
        ok(&out);
        same_bytes(&repo.path("r.safetensors"), &work.join("ft.safetensors"));
    }
}

/// Runs Python `source` in `dir`.
fn run_python_source_in(dir: &Path, source: &str) {
    let out = std::process::Command::new(common::python())
        .current_dir(dir)
        .args(["-c", source])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
