//! The grouped summary of a whole-model change (issue 43, item 4): a MiniLM-like 103-tensor
//! safetensors cast f32 → f16 (written by the safetensors package) and a mixed
//! re-quantization of a 723-tensor GGUF in 80 blocks (written by gguf-py's GGUFWriter), read
//! through `diff`, git's external driver (real git, real git-lfs), `weight-inspect git diff`
//! and the `ci` step summary; `--all`, `--stat` and `--name-only`.

mod common;

use std::path::Path;

use common::git::Repo;
use common::models::make_models;
use common::{assert_success, run, stdout};
use serde_json::{Value, json};

/// MiniLM-L6's 103 tensor names (embeddings, 6 encoder layers of 16, the pooler) at small
/// sizes, in `dtype` (a numpy name).
fn minilm(dtype: &str) -> Value {
    let (hidden, inner) = (8, 16);
    let mut tensors = Vec::new();
    let mut add = |name: String, shape: Vec<u64>| {
        let seed = tensors.len();
        tensors.push(json!({"name": name, "dtype": dtype, "shape": shape,
                            "fill": {"normal": seed}}));
    };
    add("embeddings.word_embeddings.weight".into(), vec![32, hidden]);
    add(
        "embeddings.position_embeddings.weight".into(),
        vec![16, hidden],
    );
    add(
        "embeddings.token_type_embeddings.weight".into(),
        vec![2, hidden],
    );
    add("embeddings.LayerNorm.weight".into(), vec![hidden]);
    add("embeddings.LayerNorm.bias".into(), vec![hidden]);
    for i in 0..6 {
        let l = format!("encoder.layer.{i}");
        for part in [
            "attention.self.query",
            "attention.self.key",
            "attention.self.value",
        ] {
            add(format!("{l}.{part}.weight"), vec![hidden, hidden]);
            add(format!("{l}.{part}.bias"), vec![hidden]);
        }
        add(
            format!("{l}.attention.output.dense.weight"),
            vec![hidden, hidden],
        );
        add(format!("{l}.attention.output.dense.bias"), vec![hidden]);
        add(
            format!("{l}.attention.output.LayerNorm.weight"),
            vec![hidden],
        );
        add(format!("{l}.attention.output.LayerNorm.bias"), vec![hidden]);
        add(
            format!("{l}.intermediate.dense.weight"),
            vec![inner, hidden],
        );
        add(format!("{l}.intermediate.dense.bias"), vec![inner]);
        add(format!("{l}.output.dense.weight"), vec![hidden, inner]);
        add(format!("{l}.output.dense.bias"), vec![hidden]);
        add(format!("{l}.output.LayerNorm.weight"), vec![hidden]);
        add(format!("{l}.output.LayerNorm.bias"), vec![hidden]);
    }
    add("pooler.dense.weight".into(), vec![hidden, hidden]);
    add("pooler.dense.bias".into(), vec![hidden]);
    assert_eq!(tensors.len(), 103);
    json!({"kind": "safetensors", "metadata": {"format": "pt"}, "tensors": tensors})
}

/// The per-block roles of a llama block, in file order.
const ROLES: [&str; 9] = [
    "attn_norm",
    "attn_q",
    "attn_k",
    "attn_v",
    "attn_output",
    "ffn_norm",
    "ffn_gate",
    "ffn_up",
    "ffn_down",
];

/// A 723-tensor llama GGUF of 80 blocks, as a Q4_K_M-like file (`requantized` false) or
/// re-quantized (true): attn_q q4_k → q6_k in blk.0–27 and → q5_k after, attn_k, attn_output,
/// ffn_gate, ffn_up and token_embd q4_k → q5_k, attn_v, ffn_down and output q6_k → q8_0 except
/// blk.40–41, norms f32 throughout.
fn llama(requantized: bool) -> Value {
    let mut tensors = Vec::new();
    let mut add = |name: String, dtype: &str| {
        tensors.push(json!({"name": name, "dtype": dtype, "shape": [256]}));
    };
    let new = |old: &'static str, new: &'static str| if requantized { new } else { old };
    add("token_embd.weight".into(), new("q4_k", "q5_k"));
    for b in 0..80 {
        for role in ROLES {
            let dtype = match role {
                "attn_norm" | "ffn_norm" => "f32",
                "attn_q" if b < 28 => new("q4_k", "q6_k"),
                "attn_v" | "ffn_down" if (40..=41).contains(&b) => "q6_k",
                "attn_v" | "ffn_down" => new("q6_k", "q8_0"),
                _ => new("q4_k", "q5_k"),
            };
            add(format!("blk.{b}.{role}.weight"), dtype);
        }
    }
    add("output_norm.weight".into(), "f32");
    add("output.weight".into(), new("q6_k", "q8_0"));
    assert_eq!(tensors.len(), 723);
    let file_type = if requantized { 17 } else { 15 };
    json!({"kind": "gguf", "metadata": {"general.name": "llama-70b-like",
                                        "general.file_type": file_type},
           "tensors": tensors})
}

/// Both pairs in `dir`: minilm-{f32,f16}.safetensors and llama-{old,new}.gguf.
fn write_pairs(dir: &Path) {
    make_models(
        dir,
        &json!({
            "minilm-f32.safetensors": minilm("float32"),
            "minilm-f16.safetensors": minilm("float16"),
            "llama-old.gguf": llama(false),
            "llama-new.gguf": llama(true),
        }),
    );
}

fn diff(dir: &Path, old: &str, new: &str, extra: &[&str]) -> String {
    let (a, b) = (dir.join(old), dir.join(new));
    let mut args = vec!["diff", a.to_str().unwrap(), b.to_str().unwrap()];
    args.extend_from_slice(extra);
    let out = run(&args);
    assert_eq!(out.status.code(), Some(1), "diff {extra:?}: {out:?}");
    stdout(&out)
}

fn lines(text: &str) -> usize {
    text.lines().count()
}

const CAST_TENSORS: &str = "
Tensors (103 changes, grouped; --all lists each):
  ~ 103 tensors: f32 → f16 (every tensor)
";

const REQUANT_TENSORS: &str = "
Tensors (558 changes, grouped; --all lists each):
  ~ blk.0–79 {attn_k, attn_output, ffn_gate, ffn_up}.weight: q4_k → q5_k (320 tensors)
  ~ blk.0–79 (not 40–41) {attn_v, ffn_down}.weight: q6_k → q8_0 (156 tensors)
  ~ blk.28–79 attn_q.weight: q4_k → q5_k (52 tensors)
  ~ blk.0–27 attn_q.weight: q4_k → q6_k (28 tensors)
  ~ output.weight: q6_k → q8_0
  ~ token_embd.weight: q4_k → q5_k
";

/// `diff`'s whole output on the cast (the golden of the grouped summary).
const CAST_DIFF: &str = "Structural Identity:
  format equal: true
  hash equal: false
  tensor count equal: true
  metadata count equal: true
  old: 9cf3f62d8e6efd6d744cfaf5180eb44eda2caeabcb52e0a75e925e41a8ae4c61
  new: ef350f5d85ad1e7375b8a47666f8c5f0d9d1ed5df39d4f51d1d46b15b16fc99e

Tensors (103 changes, grouped; --all lists each):
  ~ 103 tensors: f32 → f16 (every tensor)

Summary: metadata +0 -0 ~0, tensors +0 -0 ~103
";

/// `diff`'s whole output on the re-quantization.
const REQUANT_DIFF: &str = "Structural Identity:
  format equal: true
  hash equal: false
  tensor count equal: true
  metadata count equal: true
  old: c656385bbfaa229410690b7ed7ac54082f9866446d5fbf0a7b6ce20fea1913e1
  new: 529e12824f844788e900307bfa26e76dc3e2fe246fd7ac6b39cf20ecab408112

Metadata:
  ~ general.file_type: 15 (MOSTLY_Q4_K_M) -> 17 (MOSTLY_Q5_K_M)

Tensors (558 changes, grouped; --all lists each):
  ~ blk.0–79 {attn_k, attn_output, ffn_gate, ffn_up}.weight: q4_k → q5_k (320 tensors)
  ~ blk.0–79 (not 40–41) {attn_v, ffn_down}.weight: q6_k → q8_0 (156 tensors)
  ~ blk.28–79 attn_q.weight: q4_k → q5_k (52 tensors)
  ~ blk.0–27 attn_q.weight: q4_k → q6_k (28 tensors)
  ~ output.weight: q6_k → q8_0
  ~ token_embd.weight: q4_k → q5_k

Summary: metadata +0 -0 ~1, tensors +0 -0 ~558
";

/// The tensor section of a diff's text: from the tensors' heading to the summary line.
fn tensor_section(text: &str) -> &str {
    let start = text.find("\nTensors").expect("a tensor section");
    let end = text[start..].find("\nSummary:").expect("a summary line") + start;
    &text[start..end]
}

#[test]
fn diff_groups_a_whole_model_cast_and_a_mixed_requantization() {
    let tmp = tempfile::tempdir().unwrap();
    write_pairs(tmp.path());

    let cast = diff(
        tmp.path(),
        "minilm-f32.safetensors",
        "minilm-f16.safetensors",
        &[],
    );
    assert_eq!(cast, CAST_DIFF);
    assert_eq!(tensor_section(&cast), CAST_TENSORS);
    assert!(lines(&cast) <= 30, "{} lines:\n{cast}", lines(&cast));

    let requant = diff(tmp.path(), "llama-old.gguf", "llama-new.gguf", &[]);
    assert_eq!(requant, REQUANT_DIFF);
    assert_eq!(tensor_section(&requant), REQUANT_TENSORS);
    assert!(
        lines(&requant) <= 30,
        "{} lines:\n{requant}",
        lines(&requant)
    );

    // --all: the ungrouped detail, three lines per changed tensor as before.
    let all = diff(tmp.path(), "llama-old.gguf", "llama-new.gguf", &["--all"]);
    assert_eq!(all.matches("\n  ~ blk.").count(), 556, "{all}");
    assert!(
        all.contains("  ~ blk.40.attn_q.weight:\n      dtype: q4_k -> q5_k\n"),
        "{all}"
    );
    assert!(
        !all.contains("blk.40.attn_v.weight"),
        "unchanged tensor listed"
    );
}

#[test]
fn stat_and_name_only_are_short() {
    let tmp = tempfile::tempdir().unwrap();
    write_pairs(tmp.path());
    let stat = diff(tmp.path(), "llama-old.gguf", "llama-new.gguf", &["--stat"]);
    let size = |name: &str| std::fs::metadata(tmp.path().join(name)).unwrap().len();
    let (old, new) = (size("llama-old.gguf"), size("llama-new.gguf"));
    assert!(new > old);
    let human = |n: u64| format!("{:.1} KiB", n as f64 / 1024.0);
    assert_eq!(
        stat,
        format!(
            "tensors: 558 changed (558 dtype, 0 shape), 0 added, 0 removed\n\
             metadata: 1 changed, 0 added, 0 removed\n\
             bytes: {} → {} (+{})\n\
             parameters: 185,088 → 185,088 (±0)\n",
            human(old),
            human(new),
            human(new - old)
        )
    );

    let names = diff(
        tmp.path(),
        "minilm-f32.safetensors",
        "minilm-f16.safetensors",
        &["--name-only"],
    );
    let listed: Vec<&str> = names.lines().collect();
    assert_eq!(listed.len(), 103, "{names}");
    assert!(listed.contains(&"encoder.layer.5.output.LayerNorm.bias"));
    let mut sorted = listed.clone();
    sorted.sort_unstable();
    assert_eq!(listed, sorted, "names in the diff's (sorted) order");

    // The short forms exclude the long ones.
    let out = run(&["diff", "--stat", "--all", "a", "b"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}

/// A repository with LFS for the models and both drivers installed: main holds the old sides,
/// branch `pr` the new.
fn repo_with_both_changes() -> Repo {
    let repo = Repo::with_lfs(&["*.gguf", "*.safetensors"]);
    assert_success("git install", &repo.wi(&["git", "install"]));
    write_pairs(&repo.dir);
    let rename = |from: &str, to: &str| {
        std::fs::rename(repo.path(from), repo.path(to)).unwrap();
    };
    std::fs::create_dir_all(repo.path("models")).unwrap();
    std::fs::create_dir_all(repo.path("next")).unwrap();
    rename("minilm-f32.safetensors", "models/minilm.safetensors");
    rename("llama-old.gguf", "models/llama.gguf");
    rename("minilm-f16.safetensors", "next/minilm.safetensors");
    rename("llama-new.gguf", "next/llama.gguf");
    repo.git(&["add", ".gitattributes", "models"]);
    repo.git(&["commit", "-q", "-m", "base"]);
    repo.git(&["checkout", "-q", "-b", "pr"]);
    rename("next/minilm.safetensors", "models/minilm.safetensors");
    rename("next/llama.gguf", "models/llama.gguf");
    repo.git(&["add", "models"]);
    repo.git(&["commit", "-q", "-m", "requantize"]);
    repo
}

/// The driver's output for one file, from its header line to the next.
fn file_block<'a>(text: &'a str, path: &str) -> &'a str {
    let head = format!("weight-inspect a/{path} b/{path}\n");
    let start = text
        .find(&head)
        .unwrap_or_else(|| panic!("{path} in:\n{text}"));
    let end = text[start + 1..]
        .find("\nweight-inspect a/")
        .map_or(text.len(), |e| start + 1 + e + 1);
    &text[start..end]
}

#[test]
fn gits_driver_and_git_diff_group_the_same_way() {
    let repo = repo_with_both_changes();
    let out = repo.git(&["diff", "main", "pr"]);
    let text = stdout(&out);
    for (path, expected, max) in [
        ("models/llama.gguf", REQUANT_TENSORS, 40),
        ("models/minilm.safetensors", CAST_TENSORS, 40),
    ] {
        let block = file_block(&text, path);
        let hinted = expected.replace(
            "--all lists each",
            "`weight-inspect git diff --all` lists each",
        );
        assert_eq!(tensor_section(block), hinted, "{block}");
        assert!(
            lines(block) <= max,
            "{} lines through git:\n{block}",
            lines(block)
        );
    }
    // As docs/git.md says: 21 lines for the re-quantization.
    assert_eq!(lines(file_block(&text, "models/llama.gguf")), 21, "{text}");

    let ours = stdout(&repo.wi(&["git", "diff", "main", "pr"]));
    assert!(ours.contains(REQUANT_TENSORS), "{ours}");
    assert!(ours.contains(CAST_TENSORS), "{ours}");
    let all = stdout(&repo.wi(&["git", "diff", "--all", "main", "pr"]));
    assert_eq!(all.matches("\n  ~ blk.").count(), 556, "{all}");
    assert!(lines(&all) > 1600, "{} lines", lines(&all));

    let stat = stdout(&repo.wi(&["git", "diff", "--stat", "main", "pr"]));
    assert_eq!(lines(&stat), 11, "{stat}");
    assert!(stat.starts_with("models/llama.gguf (modified)\n  tensors: 558 changed (558 dtype, 0 shape), 0 added, 0 removed\n"), "{stat}");
    assert!(
        stat.contains(
            "\nmodels/minilm.safetensors (modified)\n  tensors: 103 changed (103 dtype, 0 shape)"
        ),
        "{stat}"
    );

    let names = stdout(&repo.wi(&["git", "diff", "--name-only", "main", "pr"]));
    assert_eq!(lines(&names), 558 + 103, "{names}");
    assert!(
        names.contains("models/llama.gguf\tblk.0.attn_q.weight\n"),
        "{names}"
    );
    assert!(!names.contains("blk.40.attn_v.weight"), "{names}");
    assert!(
        names.contains("models/minilm.safetensors\tpooler.dense.bias\n"),
        "{names}"
    );
}

/// The lines of a step summary a reader sees: all but the collapsed lists of every change.
fn on_screen(summary: &str) -> String {
    let mut visible = String::new();
    let mut rest = summary;
    while let Some(start) = rest.find("\n<details>\n<summary>Every change, ungrouped</summary>") {
        visible.push_str(&rest[..start]);
        let end = rest[start..].find("</details>").expect("closed") + start;
        rest = &rest[end + "</details>".len()..];
    }
    visible.push_str(rest);
    visible
}

fn step_summary(repo: &Repo, paths: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let summary = dir.path().join("summary.md");
    let mut args = vec![
        "ci",
        "--base",
        "main",
        "--summary",
        summary.to_str().unwrap(),
    ];
    if !paths.is_empty() {
        args.push("--");
        args.extend_from_slice(paths);
    }
    assert_success("ci", &repo.wi(&args));
    std::fs::read_to_string(&summary).unwrap()
}

#[test]
fn the_step_summary_shows_the_groups_and_folds_every_change() {
    let repo = repo_with_both_changes();
    let text = step_summary(&repo, &[]);
    let visible = on_screen(&text);
    assert_eq!(text.matches("Every change, ungrouped").count(), 2, "{text}");
    let hinted = |s: &str| s.replace("--all lists each", "every change is listed below");
    assert!(visible.contains(&hinted(REQUANT_TENSORS)), "{visible}");
    assert!(visible.contains(&hinted(CAST_TENSORS)), "{visible}");
    assert_eq!(
        visible.matches("<details open>").count(),
        2,
        "grouped diffs are open: {visible}"
    );
    // The folded lists hold every change, as `diff --all` prints them.
    let folded = text.matches("\n  ~ blk.").count() - visible.matches("\n  ~ blk.").count();
    assert_eq!(folded, 556, "{text}");
    assert!(text.contains("  ~ encoder.layer.5.output.LayerNorm.bias:\n      dtype: f32 -> f16\n"));

    // The 723-tensor re-quantization alone: one screen.
    let requant = on_screen(&step_summary(&repo, &["models/llama.gguf"]));
    assert!(
        lines(&requant) <= 50,
        "{} lines on screen:\n{requant}",
        lines(&requant)
    );
    assert!(requant.contains(&hinted(REQUANT_TENSORS)), "{requant}");
}

/// Issue 43, item 6: the per-layer view folds runs of unchanged layers into one row.
#[test]
fn the_per_layer_view_folds_unchanged_layers() {
    let tmp = tempfile::tempdir().unwrap();
    let model = |changed: &[u64]| {
        let tensors: Vec<Value> = (0..12u64)
            .flat_map(|b| {
                let plus = if changed.contains(&b) { 0.5 } else { 0.0 };
                ["attn_q", "ffn_up"].map(|role| {
                    json!({"name": format!("blk.{b}.{role}.weight"), "dtype": "f32",
                           "shape": [4, 32], "fill": {"normal": b, "plus": plus}})
                })
            })
            .collect();
        json!({"kind": "gguf", "metadata": {}, "tensors": tensors})
    };
    make_models(
        tmp.path(),
        &json!({"old.gguf": model(&[]), "new.gguf": model(&[5, 10])}),
    );
    let (a, b) = (tmp.path().join("old.gguf"), tmp.path().join("new.gguf"));
    let out = run(&["diff", "--values", a.to_str().unwrap(), b.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let text = stdout(&out);
    let view: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.contains("Per layer"))
        .skip(2)
        .take_while(|l| !l.is_empty())
        .collect();
    let labels: Vec<&str> = view
        .iter()
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(
        labels,
        ["blk.0–4", "blk.5", "blk.6–9", "blk.10", "blk.11"],
        "{text}"
    );
    assert!(view[0].ends_with("  unchanged (5 layers)"), "{text}");
    assert!(view[1].contains("  2/2 "), "{text}");
    // A single unchanged layer stays a row of its own.
    assert!(view[4].trim_end().ends_with("0/2"), "{text}");
}

/// A cast that leaves the LayerNorms in f32: the collapsed line names what it left out.
#[test]
fn a_collapsed_cast_names_the_tensors_it_left_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let mut mixed = minilm("float16");
    for t in mixed["tensors"].as_array_mut().unwrap() {
        if t["name"].as_str().unwrap().contains("LayerNorm") {
            t["dtype"] = json!("float32");
        }
    }
    make_models(
        tmp.path(),
        &json!({"minilm-f32.safetensors": minilm("float32"), "mixed.safetensors": mixed}),
    );
    let text = diff(
        tmp.path(),
        "minilm-f32.safetensors",
        "mixed.safetensors",
        &[],
    );
    assert_eq!(
        tensor_section(&text),
        "
Tensors (77 changes, grouped; --all lists each):
  ~ 77 tensors: f32 → f16; 26 f32 tensors unchanged:
      encoder.layer.0–5 {attention.output.LayerNorm.bias, attention.output.LayerNorm.weight, output.LayerNorm.bias, output.LayerNorm.weight} (24 tensors)
      embeddings.LayerNorm.bias
      … 1 more
",
        "{text}"
    );
}
