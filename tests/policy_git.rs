//! The policy in real repositories, with real git and git-lfs: the native pre-commit hook,
//! staged versus work-tree content, `require_lfs`, pinned hashes, hook chaining.

mod common;

use common::git::Repo;
use common::models::gguf;
use common::{code, combined};
use serde_json::json;

const POLICY: &str = r#"# Only small, LFS-stored GGUF models.
[[rules]]
paths = ["models/**/*.gguf"]
allowed_dtypes = ["f32", "f16", "q8_0"]
require_lfs = true
"#;

/// A repository with LFS tracking *.gguf, the policy committed, and the hook installed.
fn repo_with_hook() -> Repo {
    let repo = Repo::with_lfs(&["*.gguf"]);
    repo.write(".weight-inspect.toml", POLICY);
    let out = repo.wi(&["hook", "install"]);
    assert_eq!(code(&out), 0, "{}", combined(&out));
    assert_eq!(common::stdout(&out), "installed .git/hooks/pre-commit\n");
    repo.git(&["add", "."]);
    repo.git(&["commit", "-q", "-m", "policy"]);
    repo
}

fn commits(repo: &Repo) -> usize {
    let out = repo.git(&["rev-list", "--count", "HEAD"]);
    common::stdout(&out).trim().parse().unwrap()
}

#[test]
fn native_hook_refuses_a_violating_commit_and_passes_a_clean_one() {
    let repo = repo_with_hook();
    // The installed hook is the script the repository ships.
    let installed = repo.read(".git/hooks/pre-commit");
    let shipped = std::fs::read_to_string(common::repo_root().join("hooks/pre-commit")).unwrap();
    assert_eq!(installed, shipped);

    repo.fixtures(json!({"models/good.gguf": gguf(&["f16", "q8_0"], json!({}))}));
    repo.git(&["add", "models/good.gguf"]);
    let out = repo.try_git(&["commit", "-m", "good model"]);
    assert!(out.status.success(), "{}", combined(&out));
    assert!(combined(&out).contains("1 file checked against .weight-inspect.toml, no violations"));
    assert_eq!(commits(&repo), 2);

    repo.fixtures(json!({"models/sub/bad.gguf": gguf(&["q4_k", "f16"], json!({}))}));
    repo.git(&["add", "models/sub/bad.gguf"]);
    let out = repo.try_git(&["commit", "-m", "bad model"]);
    let text = combined(&out);
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains("models/sub/bad.gguf: allowed_dtypes: expected only f32, f16, q8_0; found q4_k in 1 tensor (blk.0.weight) [.weight-inspect.toml:2]"),
        "{text}"
    );
    assert!(text.contains("weight-inspect: commit refused"), "{text}");
    assert_eq!(commits(&repo), 2);
}

#[test]
fn the_staged_version_is_judged_not_the_work_tree() {
    let repo = repo_with_hook();
    // Stage a bad model, then put a good one in the work tree.
    repo.fixtures(json!({"models/m.gguf": gguf(&["q4_k"], json!({}))}));
    repo.git(&["add", "models/m.gguf"]);
    repo.fixtures(json!({"models/m.gguf": gguf(&["f16"], json!({}))}));
    let out = repo.wi(&["check", "--staged"]);
    assert_eq!(code(&out), 1, "{}", combined(&out));
    assert!(
        common::stdout(&out).contains("models/m.gguf: allowed_dtypes"),
        "{}",
        combined(&out)
    );
    let out = repo.wi(&["check"]);
    assert_eq!(code(&out), 0, "{}", combined(&out));
    let out = repo.try_git(&["commit", "-m", "staged bad"]);
    assert!(!out.status.success(), "{}", combined(&out));

    // The other way round: a good model staged, a bad one in the work tree.
    repo.git(&["add", "models/m.gguf"]);
    repo.fixtures(json!({"models/m.gguf": gguf(&["q4_k"], json!({}))}));
    let out = repo.wi(&["check", "models/m.gguf"]);
    assert_eq!(code(&out), 1, "{}", combined(&out));
    let out = repo.try_git(&["commit", "-m", "staged good"]);
    assert!(out.status.success(), "{}", combined(&out));
    assert_eq!(commits(&repo), 2);

    // `git commit -a` stages into a temporary index (GIT_INDEX_FILE): the hook sees it.
    let out = repo.try_git(&["commit", "-a", "-m", "all"]);
    assert!(!out.status.success(), "{}", combined(&out));
    assert!(
        combined(&out).contains("models/m.gguf: allowed_dtypes"),
        "{}",
        combined(&out)
    );
    assert_eq!(commits(&repo), 2);
}

#[test]
fn a_model_committed_without_lfs_trips_require_lfs() {
    // LFS is installed but *.gguf is not tracked: git would store the model bytes.
    let repo = Repo::with_lfs(&[]);
    repo.write(".weight-inspect.toml", POLICY);
    repo.fixtures(json!({"models/m.gguf": gguf(&["f16"], json!({}))}));
    let out = repo.wi(&["hook", "install"]);
    assert_eq!(code(&out), 0, "{}", combined(&out));
    // Not staged yet: judged by .gitattributes.
    let out = repo.wi(&["check", "models/m.gguf"]);
    assert_eq!(code(&out), 1, "{}", combined(&out));
    assert!(
        common::stdout(&out)
            .contains("not staged, and .gitattributes does not route it through the LFS filter")
    );

    repo.git(&["add", "."]);
    let size = std::fs::metadata(repo.path("models/m.gguf")).unwrap().len();
    let out = repo.try_git(&["commit", "-m", "oops"]);
    let text = combined(&out);
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains(&format!("models/m.gguf: require_lfs: expected an LFS pointer in git; found a regular git blob (the blob holds the file's {size} bytes); fix: git rm --cached 'models/m.gguf'")),
        "{text}"
    );

    // The fix the message suggests works.
    repo.git(&["rm", "-q", "--cached", "models/m.gguf"]);
    repo.git(&["lfs", "track", "models/m.gguf"]);
    repo.git(&["add", ".gitattributes", "models/m.gguf"]);
    assert!(
        repo.staged("models/m.gguf")
            .starts_with(b"version https://git-lfs.github.com/spec/v1\n")
    );
    let out = repo.try_git(&["commit", "-m", "with lfs"]);
    assert!(out.status.success(), "{}", combined(&out));
}

#[test]
fn a_missing_lfs_object_is_an_error_not_a_pass() {
    let repo = repo_with_hook();
    let oid = "4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393";
    let pointer =
        format!("version https://git-lfs.github.com/spec/v1\noid sha256:{oid}\nsize 12345\n");
    repo.write("models/absent.gguf", &pointer);
    repo.git(&["add", "models/absent.gguf"]);
    assert_eq!(repo.staged("models/absent.gguf"), pointer.as_bytes());
    let out = repo.wi(&["check", "--staged"]);
    assert_eq!(code(&out), 2, "{}", combined(&out));
    assert!(common::stderr(&out).contains(&format!(
        "models/absent.gguf: the LFS object sha256:{oid} (12345 bytes) is not in the local LFS store"
    )), "{}", combined(&out));
    assert!(
        common::stdout(&out).contains("1 file could not be checked"),
        "{}",
        combined(&out)
    );
    let out = repo.wi(&["check", "--staged", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["source"], "staged");
    assert_eq!(v["selection"], "change");
    assert_eq!(v["errors"][0]["path"], "models/absent.gguf");
    let out = repo.try_git(&["commit", "-m", "absent"]);
    assert!(!out.status.success(), "{}", combined(&out));
}

#[test]
fn pinned_hash_mismatch_after_an_edit() {
    let repo = repo_with_hook();
    repo.fixtures(json!({
        "models/base.gguf": gguf(&["f16"], json!({"general.name": "base"})),
        "models/other.gguf": gguf(&["f32"], json!({})),
    }));
    let out = repo.wi(&["policy", "pin", "models/base.gguf"]);
    assert_eq!(code(&out), 0, "{}", combined(&out));
    let id = repo.wi(&["id", "--json", "models/base.gguf"]);
    let id: serde_json::Value = serde_json::from_slice(&id.stdout).unwrap();
    let hash = id["structural_hash"].as_str().unwrap().to_string();
    assert_eq!(
        common::stdout(&out),
        format!("models/base.gguf: pinned {hash} [.weight-inspect.toml, rule 2]\n")
    );
    // The rest of the file is untouched; the pin is a new rule at the end.
    let policy = repo.read(".weight-inspect.toml");
    assert!(policy.starts_with(POLICY), "{policy}");
    assert!(policy.ends_with(&format!(
        "\n# Pinned with `weight-inspect policy pin`.\n[[rules]]\npaths = [\"models/base.gguf\"]\nexpected_hash = \"{hash}\"\n"
    )), "{policy}");
    repo.git(&["add", "."]);
    let out = repo.try_git(&["commit", "-m", "pinned"]);
    assert!(out.status.success(), "{}", combined(&out));

    // Edit the model's metadata: same tensors, another structural identity.
    repo.fixtures(json!({"models/base.gguf": gguf(&["f16"], json!({"general.name": "edited"}))}));
    let new_hash = {
        let id = repo.wi(&["id", "--json", "models/base.gguf"]);
        let id: serde_json::Value = serde_json::from_slice(&id.stdout).unwrap();
        id["structural_hash"].as_str().unwrap().to_string()
    };
    assert_ne!(hash, new_hash);
    let out = repo.wi(&["check"]);
    assert_eq!(code(&out), 1, "{}", combined(&out));
    assert!(common::stdout(&out).starts_with(&format!(
        "models/base.gguf: expected_hash: expected {hash}; found {new_hash} [.weight-inspect.toml:8]\n  \
         the pinned file is HEAD:models/base.gguf: tensors +0 −0 ~0, metadata +0 −0 ~1: \
         general.name \"base\" → \"edited\"\n  \
         if the change is intended, pin the new structure: `weight-inspect policy pin \
         models/base.gguf` (`--staged` for the staged version)\n"
    )), "{}", combined(&out));
    repo.git(&["add", "models/base.gguf"]);
    let out = repo.try_git(&["commit", "-m", "edited"]);
    assert!(!out.status.success(), "{}", combined(&out));
    assert!(
        combined(&out).contains("models/base.gguf: expected_hash"),
        "{}",
        combined(&out)
    );

    // A deliberate change: re-pin every pinned path, from the staged version.
    let out = repo.wi(&["policy", "pin", "--staged"]);
    assert_eq!(code(&out), 0, "{}", combined(&out));
    assert_eq!(
        common::stdout(&out),
        format!(
            "models/base.gguf: re-pinned (was {hash}) {new_hash} [.weight-inspect.toml, rule 2]\n"
        )
    );
    assert_eq!(
        repo.read(".weight-inspect.toml")
            .matches("expected_hash")
            .count(),
        1
    );
    repo.git(&["add", ".weight-inspect.toml"]);
    let out = repo.try_git(&["commit", "-m", "re-pinned"]);
    assert!(out.status.success(), "{}", combined(&out));
}

#[test]
fn hook_install_chains_or_refuses_a_foreign_hook() {
    let repo = Repo::new();
    repo.write(
        ".weight-inspect.toml",
        "[[rules]]\npaths = [\"*.gguf\"]\nallowed_dtypes = [\"f16\"]\n",
    );
    repo.write(
        ".git/hooks/pre-commit",
        "#!/bin/sh\necho foreign hook ran >> \"$(git rev-parse --git-dir)/foreign.log\"\n",
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let hook = repo.path(".git/hooks/pre-commit");
        std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let out = repo.wi(&["hook", "install"]);
    assert_eq!(code(&out), 2, "{}", combined(&out));
    assert!(
        common::stderr(&out).contains("rerun with --chain"),
        "{}",
        combined(&out)
    );
    assert!(
        repo.read(".git/hooks/pre-commit")
            .contains("foreign hook ran")
    );

    let out = repo.wi(&["hook", "install", "--chain"]);
    assert_eq!(code(&out), 0, "{}", combined(&out));
    assert!(
        common::stdout(&out)
            .contains("the previous hook now runs first from .git/hooks/pre-commit.chained")
    );
    repo.fixtures(json!({"bad.gguf": gguf(&["q8_0"], json!({}))}));
    repo.git(&["add", "."]);
    let out = repo.try_git(&["commit", "-m", "bad"]);
    assert!(!out.status.success(), "{}", combined(&out));
    assert!(
        combined(&out).contains("bad.gguf: allowed_dtypes"),
        "{}",
        combined(&out)
    );
    assert_eq!(repo.read(".git/foreign.log"), "foreign hook ran\n");

    let out = repo.wi(&["hook", "uninstall"]);
    assert_eq!(code(&out), 0, "{}", combined(&out));
    assert!(
        repo.read(".git/hooks/pre-commit")
            .contains("foreign hook ran")
    );
    let out = repo.try_git(&["commit", "-q", "-m", "without our hook"]);
    assert!(out.status.success(), "{}", combined(&out));
}

#[test]
fn check_without_paths_covers_tracked_files_only() {
    let repo = Repo::new();
    repo.write(
        ".weight-inspect.toml",
        "[[rules]]\npaths = [\"**/*.gguf\"]\nallowed_dtypes = [\"f16\"]\n",
    );
    repo.fixtures(json!({
        "a/tracked.gguf": gguf(&["q8_0"], json!({})),
        "a/untracked.gguf": gguf(&["q8_0"], json!({})),
    }));
    repo.git(&["add", ".weight-inspect.toml", "a/tracked.gguf"]);
    // From a subdirectory: paths are still reported relative to the root.
    let out = repo
        .command(common::bin())
        .current_dir(repo.path("a"))
        .args(["check"])
        .output()
        .unwrap();
    let text = common::stdout(&out);
    assert_eq!(code(&out), 1, "{}", combined(&out));
    assert!(text.contains("a/tracked.gguf: allowed_dtypes"), "{text}");
    assert!(!text.contains("untracked"), "{text}");
    assert!(
        text.contains("checked against ../.weight-inspect.toml"),
        "{text}"
    );
    // Named explicitly, the untracked file is checked too.
    let out = repo.wi(&["check", "a"]);
    assert!(
        common::stdout(&out).contains("a/untracked.gguf: allowed_dtypes"),
        "{}",
        combined(&out)
    );
    // --staged with a path that is not staged is an error.
    let out = repo.wi(&["check", "--staged", "a/untracked.gguf"]);
    assert_eq!(code(&out), 2, "{}", combined(&out));
    assert!(
        common::stderr(&out).contains("a/untracked.gguf: not staged"),
        "{}",
        combined(&out)
    );
}

#[test]
fn a_large_model_blob_without_lfs_is_judged_from_a_prefix() {
    // 32 MiB of model bytes in git objects: read through a prefix, not inflated whole.
    let repo = Repo::with_lfs(&[]);
    repo.write(".weight-inspect.toml", POLICY);
    repo.fixtures(json!({"models/big.gguf": {
        "kind": "gguf", "metadata": {"general.name": "big"},
        "tensors": [
            {"name": "token_embd.weight", "dtype": "f16", "shape": [4096, 4096], "fill": "arange"},
            {"name": "output.weight", "dtype": "q4_k", "shape": [2, 256]},
        ],
    }}));
    repo.git(&["add", "."]);
    let out = repo.wi(&["check", "--staged"]);
    let text = common::stdout(&out);
    assert_eq!(code(&out), 1, "{}", combined(&out));
    assert!(text.contains("models/big.gguf: require_lfs: expected an LFS pointer in git; found a regular git blob (the blob holds the file's 3355"), "{text}");
    assert!(text.contains("models/big.gguf: allowed_dtypes: expected only f32, f16, q8_0; found q4_k in 1 tensor (output.weight)"), "{text}");
    assert!(
        text.contains("2 violations in 1 of 1 file checked"),
        "{text}"
    );
}

/// An `expected_hash` violation names what differs from the pinned file: found in HEAD, else
/// in the commit of the policy's history that set the pin; else it gives the commands.
#[test]
fn expected_hash_names_what_differs_from_the_pinned_file() {
    let repo = Repo::new();
    repo.write(".weight-inspect.toml", POLICY);
    repo.fixtures(json!({"models/base.gguf": gguf(&["f16", "f16"], json!({}))}));
    let out = repo.wi(&["policy", "pin", "models/base.gguf"]);
    assert_eq!(code(&out), 0, "{}", combined(&out));
    repo.commit_all("pinned");
    // A later commit (past the hook) changes the model: HEAD no longer holds the pinned file,
    // the commit that set the pin does.
    repo.fixtures(json!({"models/base.gguf": gguf(&["f16", "f32"], json!({}))}));
    repo.commit_all("changed");
    let pinned_at = repo.ok(&["rev-parse", "HEAD~1"]).trim().to_owned();
    repo.fixtures(json!({"models/base.gguf": gguf(&["f16", "f32", "f32"], json!({}))}));
    let out = repo.wi(&["check"]);
    assert_eq!(code(&out), 1, "{}", combined(&out));
    let text = common::stdout(&out);
    assert!(
        text.contains(&format!(
            "\n  the pinned file is {pinned_at}:models/base.gguf: tensors +1 −0 ~1, metadata +0 −0 ~0: \
             blk.1.weight f16 [256, 2] → f32 [256, 2], +blk.2.weight f32 [256, 2]\n"
        )),
        "{text}"
    );
    let json = repo.wi(&["check", "--format", "json"]);
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let pinned = json["violations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["rule"] == "expected_hash")
        .unwrap_or_else(|| panic!("{json}"));
    assert!(
        pinned["explanation"]
            .as_str()
            .unwrap()
            .starts_with("the pinned file is "),
        "{json}"
    );

    // A pin whose file is nowhere in the history: the exact commands to find and see it.
    let made_up = "ab".repeat(32);
    let policy = repo.read(".weight-inspect.toml");
    let start = policy.find("expected_hash = \"").unwrap() + "expected_hash = \"".len();
    let policy = format!("{}{made_up}{}", &policy[..start], &policy[start + 64..]);
    repo.write(".weight-inspect.toml", &policy);
    let out = repo.wi(&["check"]);
    let text = common::stdout(&out);
    assert!(
        text.contains(&format!(
            "  no version of models/base.gguf with the pinned hash found in HEAD; find the commit \
             that pinned it with `git log -S {made_up} -- .weight-inspect.toml`, then compare \
             with `weight-inspect diff REV:models/base.gguf models/base.gguf`\n"
        )),
        "{text}"
    );
}
