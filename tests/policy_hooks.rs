//! The hooks judge what a commit brings: the native hook (installed with `hook install`, run
//! by the real `git commit`) and the hook of the real pre-commit framework (this repository's
//! `.pre-commit-hooks.yaml` definition, run by `pre-commit run` on the staged files) give the
//! same verdicts on the same commits, while an old violation sits in the repository.

mod common;

use std::path::Path;
use std::process::Output;

use common::git::Repo;
use common::models::gguf;
use common::{code, combined, repo_root};
use serde_json::{Value, json};

const POLICY: &str = r#"
[[rules]]
paths = ["models/*.gguf"]
allowed_dtypes = ["f16", "f32"]

[[rules]]
paths = ["models/llm"]          # the sharded model as a whole
allowed_dtypes = ["f32"]
"#;

/// A sharded safetensors model (two shards and an index) in f16, whose last tensor holds
/// `seed`'s values: a new seed changes the second shard only.
fn sharded(seed: u32) -> Value {
    let tensor = |name: &str, fill: Value| json!({"name": name, "dtype": "float16", "shape": [16, 16], "fill": fill});
    json!({
        "kind": "sharded_safetensors",
        "max_shard_size": 600,
        "tensors": [
            tensor("a.weight", json!("arange")),
            tensor("b.weight", json!({"normal": seed})),
        ],
    })
}

/// The pre-commit framework's configuration: this repository's hook as `.pre-commit-hooks.yaml`
/// defines it (entry, files, types), as a local `system` hook, so that the framework runs the
/// binary under test rather than building one with cargo (tests/policy_precommit.rs covers that
/// build).
fn framework_config(repo: &Repo) {
    framework_config_of(repo, "weight-inspect");
}

/// [`framework_config`] with the hook `id` of `.pre-commit-hooks.yaml`.
fn framework_config_of(repo: &Repo, id: &str) {
    let script = r#"
import sys, yaml
hooks = yaml.safe_load(open(sys.argv[1]))
hook = next(h for h in hooks if h["id"] == sys.argv[3])
hook["language"] = "system"
config = {"repos": [{"repo": "local", "hooks": [hook]}]}
open(sys.argv[2], "w").write(yaml.safe_dump(config, sort_keys=False))
"#;
    let out = std::process::Command::new(common::python())
        .args(["-c", script])
        .arg(repo_root().join(".pre-commit-hooks.yaml"))
        .arg(repo.path(".pre-commit-config.yaml"))
        .arg(id)
        .output()
        .expect("python runs");
    common::assert_success("writing .pre-commit-config.yaml", &out);
}

/// `pre-commit run` on what is staged: what the framework's git hook does on `git commit`.
fn framework_run(repo: &Repo) -> Output {
    repo.command(common::python())
        .args(["-m", "pre_commit", "run", "--color", "never"])
        .env("PRE_COMMIT_HOME", repo.tmp.path().join("pre-commit-home"))
        .output()
        .expect("pre-commit runs")
}

/// Both verdicts on what is staged: the framework's (`pre-commit run`), then the native
/// hook's, through a real `git commit`. Returns whether each passed and both outputs.
fn verdicts(repo: &Repo, message: &str) -> (bool, bool, String, String) {
    let framework = framework_run(repo);
    let native = repo.try_git(&["commit", "-q", "-m", message]);
    (
        code(&framework) == 0,
        native.status.success(),
        combined(&framework),
        combined(&native),
    )
}

fn setup() -> Repo {
    let repo = Repo::new();
    repo.write(".weight-inspect.toml", POLICY);
    framework_config(&repo);
    repo.fixtures(json!({
        "models/old.gguf": gguf(&["q4_k"], json!({})),
        "models/llm": sharded(1),
    }));
    repo.write("README.md", "models\n");
    // The old violations land before the hook exists.
    repo.commit_all("old models");
    assert!(
        Path::new(&repo.path("models/llm/model.safetensors.index.json")).exists(),
        "the fixture is sharded"
    );
    let out = repo.wi(&["hook", "install"]);
    common::assert_success("hook install", &out);
    repo
}

#[test]
fn hooks_judge_the_change_and_agree() {
    let repo = setup();

    // A README-only commit passes both hooks although old violations exist.
    repo.write("README.md", "models, documented\n");
    repo.git(&["add", "README.md"]);
    let (framework, native, f_out, n_out) = verdicts(&repo, "readme");
    assert!(
        framework,
        "framework refused a README-only commit:\n{f_out}"
    );
    assert!(native, "native hook refused a README-only commit:\n{n_out}");

    // A compliant model passes both.
    repo.fixtures(json!({"models/good.gguf": gguf(&["f16"], json!({}))}));
    repo.git(&["add", "models/good.gguf"]);
    let (framework, native, f_out, n_out) = verdicts(&repo, "good model");
    assert!(framework, "framework refused a compliant model:\n{f_out}");
    assert!(native, "native hook refused a compliant model:\n{n_out}");
    for out in [&f_out, &n_out] {
        assert!(!out.contains("models/old.gguf:"), "{out}");
    }

    // A new violation is refused by both, naming it and not the old one.
    repo.fixtures(json!({"models/bad.gguf": gguf(&["q4_k"], json!({}))}));
    repo.git(&["add", "models/bad.gguf"]);
    let (framework, native, f_out, n_out) = verdicts(&repo, "bad model");
    assert!(!framework, "framework passed a new violation:\n{f_out}");
    assert!(!native, "native hook passed a new violation:\n{n_out}");
    for out in [&f_out, &n_out] {
        assert!(
            out.contains("models/bad.gguf: allowed_dtypes: expected only f16, f32; found q4_k"),
            "{out}"
        );
        assert!(!out.contains("models/old.gguf:"), "{out}");
        assert!(!out.contains("models/llm:"), "{out}");
    }
    assert!(n_out.contains("commit refused"), "{n_out}");
    repo.git(&["reset", "-q", "--hard", "HEAD"]);

    // Re-training one shard of the old sharded model brings the whole model: both refuse it.
    repo.fixtures(json!({"models/llm": sharded(2)}));
    let staged = repo.ok(&["status", "--porcelain"]);
    assert_eq!(
        staged.trim(),
        "M models/llm/model-00002-of-00002.safetensors",
        "one shard changed"
    );
    repo.git(&["add", "models/llm"]);
    let (framework, native, f_out, n_out) = verdicts(&repo, "retrained shard");
    assert!(!framework, "framework passed the sharded model:\n{f_out}");
    assert!(!native, "native hook passed the sharded model:\n{n_out}");
    for out in [&f_out, &n_out] {
        assert!(
            out.contains("models/llm: allowed_dtypes: expected only f32; found f16"),
            "{out}"
        );
        assert!(!out.contains("models/old.gguf:"), "{out}");
    }
    repo.git(&["reset", "-q", "--hard", "HEAD"]);

    // A rename brings the file under its new name.
    repo.git(&["mv", "models/old.gguf", "models/renamed.gguf"]);
    let (framework, native, f_out, n_out) = verdicts(&repo, "rename");
    assert!(!framework, "framework passed a renamed violation:\n{f_out}");
    assert!(!native, "native hook passed a renamed violation:\n{n_out}");
    for out in [&f_out, &n_out] {
        assert!(out.contains("models/renamed.gguf: allowed_dtypes"), "{out}");
    }
    repo.git(&["reset", "-q", "--hard", "HEAD"]);

    // `check --staged --all` still judges everything.
    let out = repo.wi(&["check", "--staged", "--all"]);
    let text = combined(&out);
    assert_eq!(code(&out), 1, "{text}");
    assert!(text.contains("models/old.gguf: allowed_dtypes"), "{text}");
    assert!(text.contains("models/llm: allowed_dtypes"), "{text}");
    assert!(!text.contains("models/good.gguf:"), "{text}");
    // And `check --staged` on a clean index judges nothing.
    let out = repo.wi(&["check", "--staged"]);
    assert_eq!(code(&out), 0, "{}", combined(&out));
}

#[test]
fn first_commit_is_judged_whole() {
    let repo = Repo::new();
    repo.write(".weight-inspect.toml", POLICY);
    repo.fixtures(json!({
        "models/bad.gguf": gguf(&["q4_k"], json!({})),
        "models/good.gguf": gguf(&["f16"], json!({})),
    }));
    repo.git(&["add", "."]);
    let out = repo.wi(&["hook", "install"]);
    common::assert_success("hook install", &out);
    let out = repo.try_git(&["commit", "-q", "-m", "first"]);
    let text = combined(&out);
    assert!(!out.status.success(), "{text}");
    assert!(text.contains("models/bad.gguf: allowed_dtypes"), "{text}");
    assert!(text.contains("1 violation in 1 of 2 files"), "{text}");
}

/// What the hooks say when the repository has no policy file.
const NO_POLICY: &str = "weight-inspect: no policy file (.weight-inspect.toml), so nothing was \
                         checked and the commit may go on; to add a policy, `weight-inspect \
                         policy pin MODEL...`";

#[test]
fn hooks_installed_before_a_policy_pass_and_say_how_to_add_one() {
    let repo = Repo::new();
    // The `language: system` hook as .pre-commit-hooks.yaml defines it, unchanged.
    framework_config_of(&repo, "weight-inspect-system");
    let out = repo.wi(&["hook", "install"]);
    common::assert_success("hook install", &out);

    // A README commit and a model commit: both hooks pass, each saying once how to add a policy.
    repo.write("README.md", "models\n");
    repo.git(&["add", "README.md"]);
    let (framework, native, f_out, n_out) = verdicts(&repo, "readme");
    assert!(framework, "{f_out}");
    assert!(native, "{n_out}");
    assert_eq!(n_out.matches(NO_POLICY).count(), 1, "{n_out}");
    repo.fixtures(json!({"models/q.gguf": gguf(&["q4_k"], json!({}))}));
    repo.git(&["add", "models/q.gguf"]);
    let verbose = repo
        .command(common::python())
        .args(["-m", "pre_commit", "run", "--verbose", "--color", "never"])
        .env("PRE_COMMIT_HOME", repo.tmp.path().join("pre-commit-home"))
        .output()
        .expect("pre-commit runs");
    let v_out = combined(&verbose);
    assert_eq!(code(&verbose), 0, "{v_out}");
    assert_eq!(v_out.matches(NO_POLICY).count(), 1, "{v_out}");
    assert!(
        v_out.contains("weight-inspect policy check (installed binary)"),
        "{v_out}"
    );
    let native = repo.try_git(&["commit", "-q", "-m", "a model"]);
    let n_out = combined(&native);
    assert!(native.status.success(), "{n_out}");
    assert_eq!(n_out.matches(NO_POLICY).count(), 1, "{n_out}");

    // A check asked for by hand still refuses without a policy.
    let out = repo.wi(&["check", "--staged"]);
    assert_eq!(code(&out), 2, "{}", combined(&out));
    assert!(
        combined(&out).contains("no policy file"),
        "{}",
        combined(&out)
    );

    // Once a policy exists, a change that breaks it is refused, and the note is gone.
    repo.write(".weight-inspect.toml", POLICY);
    repo.git(&["add", ".weight-inspect.toml"]);
    repo.git(&["commit", "-q", "--no-verify", "-m", "policy"]);
    repo.fixtures(json!({"models/r.gguf": gguf(&["q4_k"], json!({}))}));
    repo.git(&["add", "models/r.gguf"]);
    let (framework, native, f_out, n_out) = verdicts(&repo, "another q4_k model");
    assert!(!framework, "{f_out}");
    assert!(!native, "{n_out}");
    for out in [&f_out, &n_out] {
        assert!(out.contains("models/r.gguf: allowed_dtypes"), "{out}");
        assert!(!out.contains("no policy file"), "{out}");
    }
}
