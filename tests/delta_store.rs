//! Storing commits' weights as .wdelta files in a git repository (LFS-tracked, base kept once)
//! and restoring them by finding the parent by hash at HEAD and in history.

mod common;

use std::path::Path;
use std::process::Command;

use common::delta::{ok, pair, s, same_tensors};
use common::{require_tool, run_in, stderr, stdout};

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn store_and_restore_through_git_history() {
    require_tool("git");
    require_tool("git-lfs");
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    let work = tmp.path().join("work");
    std::fs::create_dir_all(&repo).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    pair(&work, "32x16,7,3x4x5", "f32", 9, 2);
    git(&repo, &["init", "-q"]);
    git(&repo, &["lfs", "install", "--local"]);
    git(&repo, &["lfs", "track", "*.safetensors", "*.wdelta"]);
    std::fs::write(repo.join(".gitignore"), "model.safetensors\n").unwrap();
    std::fs::copy(work.join("base.safetensors"), repo.join("base.safetensors")).unwrap();
    git(
        &repo,
        &["add", ".gitattributes", ".gitignore", "base.safetensors"],
    );
    git(&repo, &["commit", "-q", "-m", "base"]);

    // Step 1: stored against the base file.
    std::fs::copy(work.join("ft1.safetensors"), repo.join("model.safetensors")).unwrap();
    ok(&run_in(
        Some(&repo),
        &[
            "delta",
            "store",
            "model.safetensors",
            "--parent",
            "base.safetensors",
        ],
    ));
    assert!(repo.join("model.safetensors.wdelta").exists());
    std::fs::copy(
        repo.join("model.safetensors.wdelta"),
        work.join("step1.wdelta"),
    )
    .unwrap();
    git(&repo, &["add", "model.safetensors.wdelta"]);
    git(&repo, &["commit", "-q", "-m", "step 1"]);

    // Step 2: chained on step 1, named by REV:path (an LFS pointer in git).
    std::fs::copy(work.join("ft2.safetensors"), repo.join("model.safetensors")).unwrap();
    ok(&run_in(
        Some(&repo),
        &[
            "delta",
            "store",
            "model.safetensors",
            "--parent",
            "HEAD:model.safetensors.wdelta",
        ],
    ));
    std::fs::copy(
        repo.join("model.safetensors.wdelta"),
        work.join("step2.wdelta"),
    )
    .unwrap();
    git(&repo, &["add", "model.safetensors.wdelta"]);
    git(&repo, &["commit", "-q", "-m", "step 2"]);
    // The base is removed from HEAD: restore must find it in history.
    git(&repo, &["rm", "-q", "base.safetensors"]);
    git(&repo, &["commit", "-q", "-m", "drop base from HEAD"]);

    // What the chain reconstructs, computed with explicit files.
    let expected2 = work.join("expected2.safetensors");
    ok(&run_in(
        None,
        &[
            "delta",
            "apply",
            "--base",
            s(&work.join("base.safetensors")),
            "--chain",
            s(&work.join("step1.wdelta")),
            s(&work.join("step2.wdelta")),
            "-o",
            s(&expected2),
        ],
    ));
    std::fs::remove_file(repo.join("model.safetensors")).unwrap();
    let out = run_in(
        Some(&repo),
        &["delta", "restore", "model.safetensors.wdelta"],
    );
    ok(&out);
    assert!(
        stdout(&out).contains("base.safetensors at "),
        "{}",
        stdout(&out)
    );
    same_tensors(&repo.join("model.safetensors"), &expected2);

    // The wdelta in git diff is shown through the core's recognition; here: inspect works on
    // the committed pointer's object via the CLI on the file.
    let out = run_in(
        Some(&repo),
        &["delta", "inspect", "model.safetensors.wdelta"],
    );
    ok(&out);
    assert!(stdout(&out).contains("format: wdelta version 1"));

    // Step 1 checked out again restores with the base found in history too.
    git(
        &repo,
        &["checkout", "-q", "HEAD~2", "--", "model.safetensors.wdelta"],
    );
    let out1 = work.join("restored1.safetensors");
    ok(&run_in(
        Some(&repo),
        &[
            "delta",
            "restore",
            "model.safetensors.wdelta",
            "-o",
            s(&out1),
        ],
    ));
    let expected1 = work.join("expected1.safetensors");
    ok(&run_in(
        None,
        &[
            "delta",
            "apply",
            "--base",
            s(&work.join("base.safetensors")),
            s(&work.join("step1.wdelta")),
            "-o",
            s(&expected1),
        ],
    ));
    same_tensors(&out1, &expected1);

    // Explicit parent, from history by REV:path.
    let out3 = work.join("restored3.safetensors");
    ok(&run_in(
        Some(&repo),
        &[
            "delta",
            "restore",
            "model.safetensors.wdelta",
            "--parent",
            "HEAD~1:base.safetensors",
            "-o",
            s(&out3),
        ],
    ));
    same_tensors(&out3, &expected1);

    // Outside a repository, without --parent: a clear error.
    let out = run_in(
        Some(&work),
        &[
            "delta",
            "restore",
            s(&work.join("step2.wdelta")),
            "-o",
            s(&work.join("x.safetensors")),
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("no model with the parent hash"),
        "{}",
        stderr(&out)
    );
    assert!(!work.join("x.safetensors").exists());
}
