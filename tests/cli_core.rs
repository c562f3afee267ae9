//! Behaviour of the core commands (inspect, id, diff) on the committed fixtures: exit codes,
//! schema-1 JSON, color switches, and what inspect reports. Assertions are on content, not on
//! cosmetic spacing.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{bin, fixture, run, stderr, stdout};

fn f(name: &str) -> String {
    fixture(name).to_str().unwrap().to_owned()
}

fn code(out: &Output) -> Option<i32> {
    out.status.code()
}

/// Runs with the given environment, NO_COLOR removed unless set here.
fn run_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(bin());
    cmd.args(args).env_remove("NO_COLOR");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

/// `{"schema": 1, ...` with any whitespace.
fn starts_with_schema_1(text: &str) -> bool {
    let compact: String = text
        .chars()
        .take(64)
        .filter(|c| !c.is_whitespace())
        .collect();
    compact.starts_with("{\"schema\":1,")
}

fn json(out: &Output) -> serde_json::Value {
    let text = stdout(out);
    assert!(
        starts_with_schema_1(&text),
        "JSON output must start with {{\"schema\": 1: {text}"
    );
    serde_json::from_str(&text).unwrap()
}

/// A safetensors file from header text and data.
fn st(dir: &Path, name: &str, header: &str, data: &[u8]) -> PathBuf {
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend_from_slice(data);
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

// ---------------------------------------------------------------------------------------------
// diff

#[test]
fn diff_of_a_file_with_itself_exits_0() {
    let out = run(&["diff", &f("all-types.gguf"), &f("all-types.gguf")]);
    assert_eq!(code(&out), Some(0), "{}", stderr(&out));
    let out = run(&[
        "diff",
        "--json",
        &f("all-dtypes.safetensors"),
        &f("all-dtypes.safetensors"),
    ]);
    assert_eq!(code(&out), Some(0), "{}", stderr(&out));
    let doc = json(&out);
    assert_eq!(doc["identical"], true);
}

#[test]
fn diff_structure_ignores_byte_order_of_json_keys_padding_and_data() {
    let dir = tempfile::tempdir().unwrap();
    let a = st(
        dir.path(),
        "a.safetensors",
        r#"{"__metadata__":{"x":"1","y":"2"},"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"U8","shape":[1],"data_offsets":[8,9]}}"#,
        &[1; 9],
    );
    let b = st(
        dir.path(),
        "b.safetensors",
        r#"{"b":{"data_offsets":[8,9],"shape":[1],"dtype":"U8"},"w":{"shape":[2],"dtype":"F32","data_offsets":[0,8]},"__metadata__":{"y":"2","x":"1"}}        "#,
        &[2; 9],
    );
    // One structure: the structural diff finds nothing, with or without the bytes...
    let out = run(&[
        "diff",
        "--structure-only",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
    ]);
    assert_eq!(code(&out), Some(0), "{}{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains("No structural differences."));
    // ...but the files differ, so `diff` exits 1 as diff(1) does, and says how.
    let out = run(&["diff", a.to_str().unwrap(), b.to_str().unwrap()]);
    assert_eq!(code(&out), Some(1), "{}{}", stdout(&out), stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("No structural differences."), "{text}");
    assert!(text.contains("bytes differ: "), "{text}");
    // Identical by the structural hash the independent reference gives both files
    // (scripts/reference_identity.py), with no change of any kind listed.
    let reference = common::run_python("reference_identity.py", &[s(&a), s(&b)]);
    let hashes: Vec<String> = stdout(&reference)
        .lines()
        .map(|l| {
            let line: serde_json::Value = serde_json::from_str(l).unwrap();
            line["structural_hash"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(hashes.len(), 2);
    assert_eq!(hashes[0], hashes[1], "the reference tells the files apart");
    let doc = json(&run(&["diff", "--json", s(&a), s(&b)]));
    assert_eq!(doc["identical"], true, "{doc}");
    for side in ["old", "new"] {
        assert_eq!(
            doc[side]["structural_hash"],
            hashes[0].as_str(),
            "{side}: {doc}"
        );
        assert_eq!(doc[side]["tensor_count"], 2, "{side}: {doc}");
        assert_eq!(doc[side]["metadata_count"], 2, "{side}: {doc}");
    }
    for counted in doc["counts"].as_object().unwrap().values() {
        assert_eq!(counted, 0, "{doc}");
    }
    // And a real change beside them (a shape) is seen: the comparison is not blind.
    let c = st(
        dir.path(),
        "c.safetensors",
        r#"{"__metadata__":{"x":"1","y":"2"},"w":{"dtype":"F32","shape":[2,1],"data_offsets":[0,8]},"b":{"dtype":"U8","shape":[1],"data_offsets":[8,9]}}"#,
        &[1; 9],
    );
    let doc = json(&run(&["diff", "--json", s(&a), s(&c)]));
    assert_eq!(doc["identical"], false, "{doc}");
    assert_eq!(doc["counts"]["tensors_changed"], 1, "{doc}");
    assert!(doc["tensors"]["changed"].get("w").is_some(), "{doc}");
}

fn s(path: &Path) -> &str {
    path.to_str().unwrap()
}

#[test]
fn diff_of_different_files_exits_1_and_names_the_changes() {
    let out = run(&["diff", &f("golden-minimal.gguf"), &f("golden-types.gguf")]);
    assert_eq!(code(&out), Some(1), "{}", stderr(&out));
    let text = stdout(&out);
    for needle in ["u8", "string", "array", "q4_k"] {
        assert!(
            text.contains(needle),
            "diff should mention {needle}:\n{text}"
        );
    }
    // Tensor w removed, n and q added.
    assert!(
        text.lines().any(|l| l.contains('-') && l.contains(" w ")),
        "{text}"
    );

    let out = run(&[
        "diff",
        "--json",
        &f("golden-minimal.gguf"),
        &f("golden-types.gguf"),
    ]);
    assert_eq!(code(&out), Some(1));
    let doc = json(&out);
    assert_eq!(doc["identical"], false);
    assert_eq!(doc["format_equal"], true);
}

/// Little- and big-endian renderings of the same content differ only by general.alignment
/// (the big-endian fixture sets it to 64).
#[test]
fn diff_across_byte_order_shows_only_the_alignment_key() {
    let out = run(&[
        "diff",
        "--json",
        &f("all-types.gguf"),
        &f("big-endian.gguf"),
    ]);
    assert_eq!(code(&out), Some(1), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("general.alignment"), "{text}");
    let out = run(&["diff", &f("all-types.gguf"), &f("big-endian.gguf")]);
    let text = stdout(&out);
    let changes: Vec<&str> = text
        .lines()
        .filter(|l| l.trim_start().starts_with(['+', '-', '~']))
        .collect();
    assert_eq!(
        changes.len(),
        1,
        "expected one change (general.alignment):\n{text}"
    );
    assert!(
        changes[0].contains("general.alignment") && changes[0].contains("64"),
        "{text}"
    );
}

#[test]
fn diff_of_gguf_and_safetensors_says_the_formats_differ() {
    let out = run(&["diff", &f("golden-minimal.gguf"), &f("golden.safetensors")]);
    assert_eq!(code(&out), Some(1), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("gguf -> safetensors"), "{text}");
    let out = run(&[
        "diff",
        "--json",
        &f("golden-minimal.gguf"),
        &f("golden.safetensors"),
    ]);
    assert_eq!(code(&out), Some(1));
    let doc = json(&out);
    assert_eq!(doc["format_equal"], false);
    assert_eq!(doc["identical"], false);
}

#[test]
fn diff_errors_exit_2_and_name_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.gguf");
    let out = run(&["diff", &f("golden-minimal.gguf"), missing.to_str().unwrap()]);
    assert_eq!(code(&out), Some(2));
    assert!(stderr(&out).contains("missing.gguf"), "{}", stderr(&out));
    assert!(stdout(&out).is_empty());

    let broken = dir.path().join("broken.gguf");
    std::fs::write(&broken, b"GGUF\x03\x00\x00\x00\x01").unwrap();
    let out = run(&["diff", broken.to_str().unwrap(), &f("golden-minimal.gguf")]);
    assert_eq!(code(&out), Some(2));
    assert!(stderr(&out).contains("broken.gguf"), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("unable to parse GGUF header"),
        "{}",
        stderr(&out)
    );

    let out = run(&[
        "diff",
        "--json",
        missing.to_str().unwrap(),
        missing.to_str().unwrap(),
    ]);
    assert_eq!(code(&out), Some(2));
}

// ---------------------------------------------------------------------------------------------
// JSON outputs

#[test]
fn every_json_output_starts_with_schema_1() {
    for args in [
        vec!["id", "--json", "GOLDEN"],
        vec!["inspect", "--json", "GOLDEN"],
        vec!["inspect", "--json", "--full-arrays", "GOLDEN"],
        vec!["diff", "--json", "GOLDEN", "GOLDEN"],
    ] {
        for file in [
            "golden-types.gguf",
            "golden.safetensors",
            "v1.gguf",
            "big-endian.gguf",
        ] {
            let path = f(file);
            let args: Vec<&str> = args
                .iter()
                .map(|a| if *a == "GOLDEN" { path.as_str() } else { a })
                .collect();
            let out = run(&args);
            assert!(out.status.success(), "{args:?}: {}", stderr(&out));
            json(&out);
        }
    }
}

#[test]
fn id_text_and_json_agree() {
    let out = run(&["id", &f("golden-types.gguf")]);
    assert!(out.status.success());
    let text = stdout(&out);
    let doc = json(&run(&["id", "--json", &f("golden-types.gguf")]));
    let hash = doc["structural_hash"].as_str().unwrap();
    assert_eq!(hash.len(), 64);
    assert!(text.contains(hash), "{text}");
    assert_eq!(doc["format"], "gguf");
    assert_eq!(doc["gguf_version"], 3);
    let st = json(&run(&["id", "--json", &f("golden.safetensors")]));
    assert_eq!(st["format"], "safetensors");
    assert!(st.get("gguf_version").is_none(), "{st}");
}

// ---------------------------------------------------------------------------------------------
// Color

fn has_ansi(out: &Output) -> bool {
    stdout(out).contains('\x1b')
}

#[test]
fn color_always_colors_and_never_or_no_color_does_not() {
    let diff_args = ["diff", &f("golden-minimal.gguf"), &f("golden-types.gguf")];
    let inspect_args = ["inspect", &f("truncated.gguf")];
    for args in [&diff_args[..], &inspect_args[..]] {
        let always: Vec<&str> = ["--color", "always"]
            .iter()
            .copied()
            .chain(args.iter().copied())
            .collect();
        let never: Vec<&str> = ["--color", "never"]
            .iter()
            .copied()
            .chain(args.iter().copied())
            .collect();
        assert!(has_ansi(&run_env(&always, &[])), "--color always: {args:?}");
        // An explicit --color always wins over NO_COLOR.
        assert!(
            has_ansi(&run_env(&always, &[("NO_COLOR", "1")])),
            "--color always with NO_COLOR: {args:?}"
        );
        assert!(!has_ansi(&run_env(&never, &[])), "--color never: {args:?}");
        // Not a terminal (a pipe): auto means no color, with or without NO_COLOR.
        assert!(!has_ansi(&run_env(args, &[])), "auto on a pipe: {args:?}");
        assert!(
            !has_ansi(&run_env(args, &[("NO_COLOR", "1")])),
            "NO_COLOR: {args:?}"
        );
    }
    // JSON is never colored.
    let out = run_env(
        &[
            "--color",
            "always",
            "diff",
            "--json",
            &f("golden-minimal.gguf"),
            &f("golden-types.gguf"),
        ],
        &[],
    );
    assert!(!has_ansi(&out));
    let out = run_env(
        &[
            "--color",
            "always",
            "id",
            "--canonical",
            &f("golden-types.gguf"),
        ],
        &[],
    );
    assert!(!has_ansi(&out));
}

// ---------------------------------------------------------------------------------------------
// inspect

fn line_with<'a>(text: &'a str, needles: &[&str]) -> Option<&'a str> {
    text.lines().find(|l| needles.iter().all(|n| l.contains(n)))
}

#[test]
fn inspect_reports_parameters_per_dtype_and_total_and_file_size() {
    let out = run(&["inspect", &f("golden-types.gguf")]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    // q: 256 q4_k parameters; n: 6 f32 parameters.
    assert!(line_with(&text, &["262", "total"]).is_some(), "{text}");
    assert!(line_with(&text, &["q4_k", "256"]).is_some(), "{text}");
    assert!(line_with(&text, &["f32", "6"]).is_some(), "{text}");
    assert!(
        line_with(&text, &["672"]).is_some(),
        "file size 672 bytes:\n{text}"
    );
    assert!(text.contains("gguf"), "{text}");

    let doc = json(&run(&["inspect", "--json", &f("golden-types.gguf")]));
    assert_eq!(doc["parameters"]["total"], 262);
    assert_eq!(doc["parameters"]["by_dtype"]["q4_k"], 256);
    assert_eq!(doc["parameters"]["by_dtype"]["f32"], 6);
    assert_eq!(doc["file_size"], 672);
    assert_eq!(doc["truncated"], false);

    let doc = json(&run(&["inspect", "--json", &f("no-metadata.safetensors")]));
    // 24 f32 + 0 f32 + 4 f16 + 1 i64 (a scalar) + 3 u8.
    assert_eq!(doc["parameters"]["total"], 32);
    assert_eq!(doc["parameters"]["by_dtype"]["f32"], 24);
    assert_eq!(doc["parameters"]["by_dtype"]["i64"], 1);
}

#[test]
fn inspect_summarizes_long_arrays() {
    let out = run(&["inspect", &f("all-types.gguf")]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let line = line_with(&text, &["test.arr.string:"]).unwrap_or_else(|| panic!("{text}"));
    assert!(line.contains("[9 × string]"), "{line}");
    // Short arrays in full.
    let line = line_with(&text, &["test.arr.uint8:"]).unwrap();
    assert!(line.contains("255"), "{line}");
    // No line runs away with a long value.
    assert!(text.lines().all(|l| l.chars().count() < 200), "{text}");
}

#[test]
fn inspect_notes_truncated_files() {
    for file in ["truncated.gguf", "truncated.safetensors"] {
        let out = run(&["inspect", &f(file)]);
        assert_eq!(code(&out), Some(0), "{}", stderr(&out));
        let text = stdout(&out);
        // Two 256-byte tensors, the last 100 bytes cut.
        assert!(
            text.contains("truncated: 412 of 512 data bytes present"),
            "{file}:\n{text}"
        );
        let doc = json(&run(&["inspect", "--json", &f(file)]));
        assert_eq!(doc["truncated"], true);
        assert_eq!(doc["data_bytes_present"], 412);
        assert_eq!(doc["data_bytes_expected"], 512);
    }
    let text = stdout(&run(&["inspect", &f("golden-types.gguf")]));
    assert!(!text.contains("truncated"), "{text}");
}

#[test]
fn inspect_lists_first_tensors_unless_all() {
    let short = stdout(&run(&["inspect", &f("quant-types.gguf")]));
    let all = stdout(&run(&["inspect", "--all", &f("quant-types.gguf")]));
    let tensor_lines = |t: &str| t.lines().filter(|l| l.contains(" t.")).count();
    assert_eq!(tensor_lines(&all), 35, "{all}");
    assert!(tensor_lines(&short) < 35, "{short}");
    assert!(
        short.contains("--all"),
        "a shortened listing should say how to see all:\n{short}"
    );
}

#[test]
fn inspect_shows_versions_and_byte_order() {
    let v1 = stdout(&run(&["inspect", &f("v1.gguf")]));
    assert!(line_with(&v1, &["version", "1"]).is_some(), "{v1}");
    let be = stdout(&run(&["inspect", &f("big-endian.gguf")]));
    assert!(be.contains("big-endian"), "{be}");
    let doc = json(&run(&["inspect", "--json", &f("big-endian.gguf")]));
    assert_eq!(doc["big_endian"], true);
    assert_eq!(doc["alignment"], 64);
    let doc = json(&run(&["inspect", "--json", &f("v2.gguf")]));
    assert_eq!(doc["gguf_version"], 2);
}

/// Runs `code` with the test venv's Python and `args`; its stdout parsed as JSON.
fn python_json(code: &str, args: &[&str]) -> serde_json::Value {
    let out = Command::new(common::python())
        .args(["-c", code])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "python: {}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// (name, offset from the start of the file, offset in the data section) of each tensor, in
/// `inspect --json`'s order.
fn listed(doc: &serde_json::Value) -> Vec<(String, u64, u64)> {
    doc["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap().to_owned(),
                t["offset"].as_u64().unwrap(),
                t["data_offset"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn tensor_lines(text: &str) -> Vec<&str> {
    text.lines()
        .skip_while(|l| !l.starts_with("Tensors"))
        .skip(1)
        .collect()
}

#[test]
fn inspect_lists_gguf_tensors_in_file_order_with_the_offsets_gguf_py_reads() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.gguf");
    // Written in this order by gguf-py: not name order (blk.10 before blk.2, output first).
    let tensors: Vec<serde_json::Value> = [
        "output_norm.weight",
        "token_embd.weight",
        "blk.10.attn_q.weight",
        "blk.2.attn_q.weight",
    ]
    .iter()
    .map(|n| serde_json::json!({"name": n, "dtype": "f32", "shape": [3, 5]}))
    .collect();
    common::models::make_model(
        &path,
        &serde_json::json!({"kind": "gguf", "metadata": {}, "tensors": tensors}),
    );
    let p = path.to_str().unwrap();
    let reference = python_json(
        "import gguf, json, sys\n\
         r = gguf.GGUFReader(sys.argv[1])\n\
         start = r.data_offset\n\
         print(json.dumps([[t.name, int(t.data_offset), int(t.data_offset) - start] for t in r.tensors]))",
        &[p],
    );
    let expected: Vec<(String, u64, u64)> = serde_json::from_value(reference).unwrap();
    assert_eq!(expected[0].0, "output_norm.weight");
    let doc = json(&run(&["inspect", "--json", p]));
    assert_eq!(doc["tensor_order"], "file");
    assert_eq!(listed(&doc), expected);

    let text = stdout(&run(&["inspect", p]));
    let lines = tensor_lines(&text);
    assert_eq!(lines.len(), 4, "{text}");
    for (line, (name, offset, data)) in lines.iter().zip(&expected) {
        assert!(
            line.contains(&format!(" {name} "))
                && line.ends_with(&format!("offset {offset} (data +{data})")),
            "{line} should list {name} at {offset}:\n{text}"
        );
    }

    // --sort name: the identity's order; the identity itself does not change.
    let by_name = json(&run(&["inspect", "--json", "--sort", "name", p]));
    assert_eq!(by_name["tensor_order"], "name");
    let names: Vec<String> = listed(&by_name).into_iter().map(|t| t.0).collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);
    assert_eq!(by_name["structural_hash"], doc["structural_hash"]);
    let text = stdout(&run(&["inspect", "--sort", "name", p]));
    assert!(
        tensor_lines(&text)[0].contains("blk.10.attn_q.weight"),
        "{text}"
    );
}

#[test]
fn inspect_lists_safetensors_tensors_in_the_order_of_their_data_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.safetensors");
    // The safetensors package lays out wider dtypes first: data order is not name order.
    common::models::make_model(
        &path,
        &serde_json::json!({"kind": "safetensors", "tensors": [
            {"name": "a.bytes", "dtype": "uint8", "shape": [3]},
            {"name": "m.half", "dtype": "float16", "shape": [2, 3]},
            {"name": "z.double", "dtype": "float64", "shape": [4]},
            {"name": "b.float", "dtype": "float32", "shape": [5]},
        ]}),
    );
    let p = path.to_str().unwrap();
    let reference = python_json(
        "import json, struct, sys\n\
         f = open(sys.argv[1], 'rb')\n\
         n = struct.unpack('<Q', f.read(8))[0]\n\
         h = json.loads(f.read(n))\n\
         h.pop('__metadata__', None)\n\
         ts = sorted(h.items(), key=lambda kv: kv[1]['data_offsets'][0])\n\
         print(json.dumps([[k, 8 + n + v['data_offsets'][0], v['data_offsets'][0]] for k, v in ts]))",
        &[p],
    );
    let expected: Vec<(String, u64, u64)> = serde_json::from_value(reference).unwrap();
    assert_eq!(expected[0].0, "z.double", "{expected:?}");
    let doc = json(&run(&["inspect", "--json", p]));
    assert_eq!(listed(&doc), expected);
    let text = stdout(&run(&["inspect", p]));
    let first = tensor_lines(&text)[0];
    assert!(
        first.contains("z.double") && first.contains(&format!("offset {}", expected[0].1)),
        "{text}"
    );
}

#[test]
fn enumerated_metadata_is_named_in_inspect_and_diff_but_not_in_the_identity() {
    let dir = tempfile::tempdir().unwrap();
    let tensors = serde_json::json!([{"name": "t", "dtype": "f32", "shape": [4]}]);
    let spec = |file_type: u32, pooling: u32| {
        serde_json::json!({"kind": "gguf", "tensors": tensors, "metadata": {
            "general.file_type": file_type,
            "llama.pooling_type": pooling,
            "llama.context_length": 15,
        }})
    };
    let (a, b) = (dir.path().join("a.gguf"), dir.path().join("b.gguf"));
    common::models::make_model(&a, &spec(1, 1));
    common::models::make_model(&b, &spec(15, 2));
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());

    let text = stdout(&run(&["inspect", b]));
    assert!(
        text.contains("  general.file_type: 15 (MOSTLY_Q4_K_M)\n"),
        "{text}"
    );
    assert!(text.contains("  llama.pooling_type: 2 (CLS)\n"), "{text}");
    assert!(text.contains("  llama.context_length: 15\n"), "{text}");
    let doc = json(&run(&["inspect", "--json", b]));
    assert_eq!(
        doc["metadata"]["general.file_type"],
        serde_json::json!({"type": "u32", "value": 15, "name": "MOSTLY_Q4_K_M"})
    );
    assert!(
        doc["metadata"]["llama.context_length"]
            .get("name")
            .is_none()
    );

    let out = run(&["diff", a, b]);
    assert_eq!(code(&out), Some(1));
    let text = stdout(&out);
    assert!(
        text.contains("~ general.file_type: 1 (MOSTLY_F16) -> 15 (MOSTLY_Q4_K_M)"),
        "{text}"
    );
    assert!(
        text.contains("~ llama.pooling_type: 1 (MEAN) -> 2 (CLS)"),
        "{text}"
    );
    let doc = json(&run(&["diff", "--json", a, b]));
    let changed = &doc["metadata"]["changed"]["general.file_type"];
    assert_eq!(changed["old"]["name"], "MOSTLY_F16");
    assert_eq!(changed["new"]["name"], "MOSTLY_Q4_K_M");

    let canonical = stdout(&run(&["id", "--canonical", b]));
    assert!(!canonical.contains("MOSTLY"), "{canonical}");
}

#[test]
fn the_metadata_enum_names_are_what_the_generator_writes_from_gguf_py() {
    let out = common::run_python("gen_metadata_enums.py", &[]);
    let committed =
        std::fs::read_to_string(common::repo_root().join("src/render/enums_table.rs")).unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout) == committed,
        "src/render/enums_table.rs differs from scripts/gen_metadata_enums.py's output"
    );
    assert!(committed.contains("from gguf-py 0.19.0"), "{committed}");
}

#[test]
fn a_changed_array_names_its_first_differing_index_and_both_values() {
    let dir = tempfile::tempdir().unwrap();
    let tensors = serde_json::json!([{"name": "t", "dtype": "f32", "shape": [4]}]);
    let old: Vec<String> = (0..512).map(|i| format!("tok{i}")).collect();
    let mut new = old.clone();
    new[511] = "<changed>".into();
    new.push("<added>".into());
    let spec = |tokens: &[String], n_ctx: u32| {
        serde_json::json!({"kind": "gguf", "tensors": tensors, "metadata": {
            "tokenizer.ggml.tokens": tokens,
            "llama.context_length": n_ctx,
        }})
    };
    let (a, b, c) = (
        dir.path().join("a.gguf"),
        dir.path().join("b.gguf"),
        dir.path().join("c.gguf"),
    );
    common::models::make_model(&a, &spec(&old, 1));
    common::models::make_model(&b, &spec(&new, 1));
    let mut appended = old.clone();
    appended.push("<added>".into());
    common::models::make_model(&c, &spec(&appended, 1));
    let (a, b, c) = (
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        c.to_str().unwrap(),
    );

    let text = stdout(&run(&["diff", a, b]));
    assert!(
        text.contains(
            "      length: 512 -> 513, first difference at index 511: \"tok511\" -> \"<changed>\"\n"
        ),
        "{text}"
    );
    let doc = json(&run(&["diff", "--json", a, b]));
    assert_eq!(
        doc["metadata"]["changed"]["tokenizer.ggml.tokens"]["first_difference"],
        serde_json::json!({"index": 511, "old": "tok511", "new": "<changed>"})
    );
    // Only appended: the first difference is past the old end.
    let text = stdout(&run(&["diff", a, c]));
    assert!(
        text.contains("length: 512 -> 513, first difference at index 512: (none) -> \"<added>\""),
        "{text}"
    );
    let doc = json(&run(&["diff", "--json", a, c]));
    assert_eq!(
        doc["metadata"]["changed"]["tokenizer.ggml.tokens"]["first_difference"],
        serde_json::json!({"index": 512, "old": null, "new": "<added>"})
    );
}

#[test]
fn help_and_the_directory_error_name_all_three_formats() {
    let help = stdout(&run(&["--help"]));
    assert!(help.contains("GGUF, safetensors and PyTorch"), "{help}");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("README.md"), "no model here\n").unwrap();
    let out = run(&["inspect", dir.path().to_str().unwrap()]);
    assert_eq!(code(&out), Some(2));
    let err = stderr(&out);
    for needle in ["GGUF", "safetensors", "PyTorch", "pytorch_model.bin", ".pt"] {
        assert!(err.contains(needle), "{needle} missing: {err}");
    }
}

#[test]
fn the_hooks_install_hint_is_what_the_readme_says() {
    let hook = common::repo_root().join("hooks/pre-commit");
    let dir = tempfile::tempdir().unwrap();
    // Without weight-inspect on PATH: the hook refuses and says how to install it.
    let out = Command::new("sh")
        .arg(&hook)
        .current_dir(dir.path())
        .env("PATH", "/usr/bin:/bin")
        .env_remove("WEIGHT_INSPECT")
        .output()
        .unwrap();
    assert_eq!(code(&out), Some(1));
    let hint = stderr(&out);
    let readme = std::fs::read_to_string(common::repo_root().join("README.md")).unwrap();
    for command in ["cargo install --locked --path .", "pip install ."] {
        assert!(hint.contains(&format!("'{command}'")), "{hint}");
        assert!(readme.contains(command), "README.md lacks {command}");
    }
    assert!(!hint.contains("pip install weight-inspect"), "{hint}");
}
