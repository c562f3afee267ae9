//! Multi-file models in git, with the real git and git-lfs: `weight-inspect git diff` groups
//! the shards of one model into one entry (a resharding is a layout change, a changed model its
//! structural diff), the external driver names the model a shard belongs to, and `REV:dir`
//! opens a committed model directory.

mod common;

use common::git::{MODEL_PATTERNS, Repo};
use common::lfs_server::LfsServer;
use common::{assert_contains, assert_lacks, assert_success, code, stderr, stdout};
use serde_json::{Value, json};

fn tensors() -> Value {
    json!([
        {"name": "embed.weight", "dtype": "float32", "shape": [16, 8], "fill": {"normal": 1}},
        {"name": "layers.0.weight", "dtype": "float16", "shape": [8, 8], "fill": {"normal": 2}},
        {"name": "layers.1.weight", "dtype": "float32", "shape": [8, 32], "fill": {"normal": 3}},
        {"name": "norm.weight", "dtype": "float32", "shape": [8], "fill": 1.0}
    ])
}

fn gguf(split_max_tensors: u32) -> Value {
    json!({"kind": "gguf", "writer": {"split_max_tensors": split_max_tensors},
    "metadata": {"general.name": "tiny"},
    "tensors": [
        {"name": "token_embd.weight", "dtype": "f32", "shape": [16, 8], "fill": "arange"},
        {"name": "blk.0.attn_q.weight", "dtype": "q8_0", "shape": [2, 64]},
        {"name": "blk.1.attn_q.weight", "dtype": "q8_0", "shape": [2, 64]},
        {"name": "output_norm.weight", "dtype": "f32", "shape": [8]}
    ]})
}

fn sharded(repo: &Repo, max_shard_size: u64, tensors: Value) {
    let _ = std::fs::remove_dir_all(repo.path("models/llm"));
    repo.fixtures(json!({"models/llm": {"kind": "sharded_safetensors",
                                          "max_shard_size": max_shard_size, "tensors": tensors}}));
}

fn split(repo: &Repo, split_max_tensors: u32) {
    let _ = std::fs::remove_dir_all(repo.path("models/gg"));
    repo.fixtures(json!({"models/gg/tiny.gguf": gguf(split_max_tensors)}));
}

/// v1: 3 shards and 4 parts; v2: resharded (2 shards, 2 parts); v3: the safetensors model
/// changed.
fn history() -> Repo {
    let repo = Repo::with_lfs(MODEL_PATTERNS);
    sharded(&repo, 600, tensors());
    split(&repo, 1);
    repo.commit_all("v1");
    sharded(&repo, 1100, tensors());
    split(&repo, 2);
    repo.commit_all("v2 resharded");
    let mut changed = tensors();
    changed[2]["shape"] = json!([8, 16]);
    changed[1]["dtype"] = json!("float32");
    sharded(&repo, 1100, changed);
    repo.commit_all("v3 changed");
    repo
}

#[test]
fn git_diff_shows_one_entry_per_model() {
    let repo = history();
    let files = |rev: &str| repo.ok(&["ls-tree", "-r", "--name-only", rev, "models"]);
    assert_eq!(
        files("HEAD~2")
            .lines()
            .filter(|l| l.ends_with(".safetensors"))
            .count(),
        3
    );
    assert_eq!(
        files("HEAD~1")
            .lines()
            .filter(|l| l.ends_with(".safetensors"))
            .count(),
        2
    );

    let out = repo.wi(&["git", "diff", "--exit-code", "HEAD~2", "HEAD~1"]);
    let text = stdout(&out);
    assert_eq!(
        code(&out),
        0,
        "a resharding is not a change of the model:\n{text}{}",
        stderr(&out)
    );
    assert_contains(
        &text,
        &[
            "weight-inspect a/models/llm/model.safetensors.index.json b/models/llm/model.safetensors.index.json",
            "multi-file model; changed files:",
            "  models/llm/model-00001-of-00003.safetensors",
            "  models/llm/model-00002-of-00002.safetensors",
            "layout changed, structure identical",
            "3 safetensors shards -> 2 safetensors shards",
            "weight-inspect a/models/gg/tiny-*-of-00004.gguf b/models/gg/tiny-*-of-00002.gguf (renamed)",
            "4 GGUF parts -> 2 GGUF parts",
        ],
    );
    // One entry per model, none per shard.
    assert_eq!(text.matches("weight-inspect a/").count(), 2, "{text}");

    let out = repo.wi(&["git", "diff", "--json", "HEAD~2", "HEAD~1"]);
    let doc: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(doc["schema"], 1);
    let entries = doc["files"].as_array().unwrap();
    assert_eq!(entries.len(), 2);
    let llm = &entries[1];
    assert_eq!(llm["new_path"], "models/llm/model.safetensors.index.json");
    assert_eq!(llm["model_files"].as_array().unwrap().len(), 6, "{llm}");
    assert_eq!(llm["diff"]["identical"], true);
    assert_eq!(
        llm["diff"]["layout"]["new"]["parts"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    assert_eq!(llm["old"]["structural_hash"], llm["new"]["structural_hash"]);

    // Values, from the shards' local LFS objects: a resharding moves them unchanged.
    let out = repo.wi(&[
        "git",
        "diff",
        "--values",
        "HEAD~2",
        "HEAD~1",
        "--",
        "models/llm",
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_contains(
        &stdout(&out),
        &["values identical in all 4 compared tensors"],
    );

    let out = repo.wi(&["git", "diff", "--exit-code", "HEAD~1", "HEAD"]);
    let text = stdout(&out);
    assert_eq!(code(&out), 1, "{text}{}", stderr(&out));
    assert_contains(
        &text,
        &[
            "layers.0.weight",
            "dtype: f16 -> f32",
            "layers.1.weight",
            "shape: [8, 32] -> [8, 16]",
        ],
    );
    assert_lacks(&text, &["tiny-*-of"]);
}

#[test]
fn the_work_tree_side_and_missing_parts() {
    let repo = history();
    // Work tree: one shard deleted.
    std::fs::remove_file(repo.path("models/llm/model-00001-of-00002.safetensors")).unwrap();
    let out = repo.wi(&["git", "diff"]);
    let text = stdout(&out);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_contains(
        &text,
        &[
            "b/models/llm/model.safetensors.index.json",
            "models/llm/model-00001-of-00002.safetensors: missing; models/llm/model.safetensors.index.json names it",
        ],
    );
}

#[test]
fn absent_lfs_objects_are_named_and_rev_dir_opens_a_model() {
    let repo = history();
    // The committed model directory at a revision is the model.
    let out = repo.wi(&["id", "HEAD~2:models/llm"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let v1 = stdout(&out);
    let out = repo.wi(&["id", "HEAD~1:models/llm/model.safetensors.index.json"]);
    assert_eq!(stdout(&out), v1, "resharding keeps the identity");
    let out = repo.wi(&[
        "diff",
        "HEAD~2:models/gg",
        "HEAD~1:models/gg/tiny-00002-of-00002.gguf",
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_contains(&stdout(&out), &["layout: 4 GGUF parts -> 2 GGUF parts"]);

    // A clone without LFS content: the parts are absent, and the entry says which.
    let clone = repo.tmp.path().join("clone");
    let out = repo
        .git_cmd_in(
            repo.tmp.path(),
            &["clone", "-q", repo.dir.to_str().unwrap(), "clone"],
        )
        .env("GIT_LFS_SKIP_SMUDGE", "1")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let out = repo.wi_in(&clone, &["git", "diff", "HEAD~1", "HEAD"]);
    let text = stdout(&out);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_contains(
        &text,
        &[
            "its files do not read as one model",
            "is not present locally",
        ],
    );
    // The work tree's pointer texts, with no LFS server to ask: an error naming the part.
    let out = repo.wi_in(&clone, &["inspect", "models/llm"]);
    assert_eq!(code(&out), 2);
    assert_contains(
        &stderr(&out),
        &["models/llm/model-0000", "not present locally"],
    );
}

#[test]
fn the_external_driver_names_the_model_of_a_shard() {
    let repo = history();
    let out = repo.wi(&["git", "install"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = repo.ok(&["diff", "HEAD~2", "HEAD~1", "--", "models/gg"]);
    assert_contains(
        &text,
        &[
            "weight-inspect /dev/null b/models/gg/tiny-00002-of-00002.gguf",
            "part 2 of 2 of the split model tiny-*-of-00002.gguf",
        ],
    );
    let text = repo.ok(&["diff", "HEAD~1", "HEAD", "--", "models/llm"]);
    assert_contains(&text, &["shard 1 of 2 of a sharded safetensors model"]);
    // textconv: a GGUF part says which part it is.
    let text = repo.ok(&[
        "log",
        "-p",
        "--no-ext-diff",
        "-1",
        "HEAD~1",
        "--",
        "models/gg",
    ]);
    assert_contains(&text, &["+split-part: 2 of 2"]);
}

#[test]
fn ci_reports_one_entry_per_model() {
    let repo = history();
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.json");
    let summary = dir.path().join("summary.md");
    let run = |base: &str, head: &str| {
        repo.wi(&[
            "ci",
            "--base",
            base,
            "--head",
            head,
            "--fail-on",
            "change",
            "--annotations",
            "--json",
            report.to_str().unwrap(),
            "--summary",
            summary.to_str().unwrap(),
        ])
    };
    let out = run("HEAD~2", "HEAD~1");
    assert_eq!(
        code(&out),
        0,
        "a resharding does not fail --fail-on change: {}",
        stdout(&out)
    );
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let files = doc["files"].as_array().unwrap();
    assert_eq!(files.len(), 2, "{doc}");
    assert_eq!(
        files[1]["new_path"],
        "models/llm/model.safetensors.index.json"
    );
    assert!(files[1]["model_files"].as_array().unwrap().len() > 2);
    assert_eq!(files[1]["diff"]["identical"], true);
    let md = std::fs::read_to_string(&summary).unwrap();
    assert_contains(
        &md,
        &[
            "layout changed, structure identical",
            "multi-file model; changed files:",
        ],
    );

    let out = run("HEAD~1", "HEAD");
    assert_eq!(code(&out), 1, "{}", stdout(&out));
    // The annotation points at a real file of the model: its index.
    assert_contains(
        &stdout(&out),
        &["::error file=models/llm/model.safetensors.index.json,"],
    );

    // A policy rule for the model's directory judges the head side as one model.
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        "[[rules]]\npaths = [\"models/llm\"]\nallowed_dtypes = [\"f16\"]\n",
    )
    .unwrap();
    let out = repo.wi(&[
        "ci",
        "--base",
        "HEAD~1",
        "--head",
        "HEAD",
        "--policy",
        policy.to_str().unwrap(),
        "--json",
        report.to_str().unwrap(),
    ]);
    assert_eq!(code(&out), 1, "{}", stdout(&out));
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let violations = doc["violations"].as_array().unwrap();
    assert_eq!(violations.len(), 1, "{doc}");
    assert_eq!(violations[0]["path"], "models/llm");
    assert_eq!(violations[0]["rule"], "allowed_dtypes");
}

#[test]
fn policy_judges_a_model_directory_as_one_model() {
    let repo = Repo::with_lfs(MODEL_PATTERNS);
    sharded(&repo, 600, tensors());
    repo.write(
        ".weight-inspect.toml",
        "[[rules]]\npaths = [\"models/llm\"]\nallowed_dtypes = [\"f32\"]\nmax_parameters = 300\n",
    );
    repo.commit_all("v1");
    let out = repo.wi(&["check"]);
    let text = stdout(&out);
    assert_eq!(code(&out), 1, "{text}{}", stderr(&out));
    assert_contains(
        &text,
        &[
            "models/llm: allowed_dtypes: expected only f32; found f16 in 1 tensor (layers.0.weight)",
            "models/llm: max_parameters: expected at most 300 parameters; found 456 parameters",
        ],
    );

    // Pin the model, not its files; resharding keeps the pin, a change breaks it.
    repo.write(
        ".weight-inspect.toml",
        "[[rules]]\npaths = [\"models/**\"]\nexclude = [\"**/*.json\"]\nrequire_lfs = true\n",
    );
    let out = repo.wi(&["policy", "pin", "models/llm"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_contains(&stdout(&out), &["models/llm: pinned "]);
    assert_contains(
        &repo.read(".weight-inspect.toml"),
        &["paths = [\"models/llm\"]", "expected_hash = "],
    );
    sharded(&repo, 1100, tensors());
    let out = repo.wi(&["check"]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    let mut changed = tensors();
    changed[0]["shape"] = json!([16, 4]);
    sharded(&repo, 1100, changed);
    let out = repo.wi(&["check"]);
    assert_eq!(code(&out), 1);
    assert_contains(&stdout(&out), &["models/llm: expected_hash: "]);

    // Staged: new shards without the index that names them.
    sharded(&repo, 1100, tensors());
    repo.git(&[
        "add",
        "models/llm/model-00001-of-00002.safetensors",
        "models/llm/model-00002-of-00002.safetensors",
    ]);
    let out = repo.wi(&["check", "--staged"]);
    let text = stdout(&out);
    assert_eq!(code(&out), 1, "{text}{}", stderr(&out));
    assert_contains(
        &text,
        &[
            "models/llm: model_files: expected the files of one model",
            "not one of its parts",
        ],
    );
    repo.git(&["add", "-A"]);
    let out = repo.wi(&["check", "--staged"]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
}

#[test]
fn shards_not_fetched_are_read_from_the_lfs_server() {
    // A repository with a sharded model in two versions, its LFS objects pushed to giftless.
    let source = Repo::with_lfs(MODEL_PATTERNS);
    sharded(&source, 600, tensors());
    source.commit_all("v1");
    let mut changed = tensors();
    changed[3]["shape"] = json!([16]);
    sharded(&source, 1100, changed);
    source.commit_all("v2");
    let storage = source.tmp.path().join("lfs-storage");
    let bare = source.tmp.path().join("bare.git");
    source.ok(&["init", "-q", "--bare", "-b", "main", bare.to_str().unwrap()]);
    let server = LfsServer::giftless(&storage, true);
    let with_token = server.lfs_url().replacen(
        "http://",
        &format!("http://_jwt:{}@", server.token("write")),
        1,
    );
    source.git(&["remote", "add", "origin", bare.to_str().unwrap()]);
    source.git(&["config", "lfs.url", &with_token]);
    source.git(&["push", "-q", "origin", "main"]);

    // A clone without LFS content reads each shard's header from the server.
    let clone = source.tmp.path().join("clone");
    let out = source
        .git_cmd_in(
            source.tmp.path(),
            &["clone", "-q", bare.to_str().unwrap(), "clone"],
        )
        .env("GIT_LFS_SKIP_SMUDGE", "1")
        .output()
        .unwrap();
    assert_success("git clone", &out);
    source.ok_in(&clone, &["config", "lfs.url", &server.lfs_url()]);
    let header = format!("Authorization: Bearer {}", server.token("read"));
    source.ok_in(
        &clone,
        &[
            "config",
            &format!("http.{}/.extraheader", server.origin()),
            &header,
        ],
    );
    let out = source.wi_in(&clone, &["git", "diff", "HEAD~1", "HEAD"]);
    let text = stdout(&out);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_contains(
        &text,
        &[
            "b/models/llm/model.safetensors.index.json",
            "norm.weight",
            "shape: [8] -> [16]",
            "3 safetensors shards -> 2 safetensors shards",
            "headers of some of its files read from the LFS server, not verified",
        ],
    );
    assert_lacks(&text, &["not present locally"]);
    // The five shards of both sides were asked for in one batch request (the others are
    // git-lfs's, from the push).
    let ours: Vec<_> = server
        .requests_to("/objects/batch")
        .into_iter()
        .filter(|r| {
            !r["headers"]["user-agent"]
                .as_str()
                .unwrap_or("")
                .starts_with("git-lfs")
        })
        .collect();
    assert_eq!(ours.len(), 1, "{ours:#?}");

    // The work tree's pointer texts: the directory is the model, read the same way.
    let out = source.wi_in(&clone, &["id", "models/llm"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let in_clone = stdout(&out);
    let out = source.wi(&["id", "models/llm"]);
    assert_eq!(
        stdout(&out),
        in_clone,
        "the same identity as the model's files"
    );
    assert_contains(
        &stderr(&source.wi_in(&clone, &["inspect", "models/llm"])),
        &["read from the LFS server"],
    );
}

/// More changed files than one window of the streamed `git diff` (256), with a sharded model
/// among them in the same directory: every file once, in path order, the model where its name
/// sorts (between the windows' files), and the JSON laid out as the whole report
/// pretty-printed.
#[test]
fn many_changed_files_stream_in_path_order() {
    let repo = Repo::new();
    for version in [1, 2] {
        let mut specs = serde_json::Map::new();
        for i in 0..300 {
            let spec = json!({"kind": "safetensors", "metadata": {"v": format!("{version} {i}")},
                              "tensors": [{"name": "w", "dtype": "float32", "shape": [2]}]});
            specs.insert(format!("m/a-{i:03}.safetensors"), spec);
        }
        let mut model = tensors();
        model[0]["shape"] = json!([16, 8 * version]);
        specs.insert(
            "m".to_owned(),
            json!({"kind": "sharded_safetensors", "max_shard_size": 600, "tensors": model}),
        );
        specs.insert(
            "m/z.safetensors".to_owned(),
            json!({"kind": "safetensors", "metadata": {"v": version.to_string()},
                   "tensors": [{"name": "w", "dtype": "float32", "shape": [2]}]}),
        );
        repo.fixtures(Value::Object(specs));
        repo.commit_all(&format!("v{version}"));
    }
    let mut expected: Vec<String> = (0..300)
        .map(|i| format!("m/a-{i:03}.safetensors"))
        .collect();
    expected.push("m/model.safetensors.index.json".to_owned());
    expected.push("m/z.safetensors".to_owned());

    let out = repo.wi(&["git", "diff", "--json", "HEAD~1", "HEAD"]);
    assert_success("git diff --json", &out);
    let text = stdout(&out);
    let report: Value = serde_json::from_str(&text).unwrap();
    let paths: Vec<&str> = report["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["new_path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, expected);
    let model = &report["files"][300];
    assert!(
        model["model_files"].as_array().unwrap().len() >= 2,
        "{model:#}"
    );
    assert!(
        text.starts_with(
            "{\n  \"schema\": 1,\n  \"base\": \"HEAD~1\",\n  \"head\": \"HEAD\",\n  \"files\": [\n    {\n      \""
        ),
        "{}",
        &text[..200]
    );
    assert!(text.ends_with("\n    }\n  ]\n}\n"));
    assert!(text.contains("\n    },\n    {\n"));

    let out = repo.wi(&["git", "diff", "HEAD~1", "HEAD"]);
    assert_success("git diff", &out);
    let text = stdout(&out);
    let headers: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("weight-inspect a/"))
        .map(|l| l.split(' ').next().unwrap())
        .collect();
    assert_eq!(headers, expected);
}
