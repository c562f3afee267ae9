//! Storing commits' weights as .wdelta files in a git repository (LFS-tracked, base kept once)
//! and restoring them by finding the parent by hash at HEAD and in history.

mod common;

use common::delta::{encoded_as_defined, ok, pair, rebuilt_as_defined, s, same_tensors};
use common::git::Repo;
use std::path::Path;

use common::{run, run_in, stderr, stdout};

#[test]
fn store_and_restore_through_git_history() {
    let repo = Repo::with_lfs(&["*.safetensors", "*.wdelta"]);
    let work = repo.tmp.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    pair(&work, "32x16,7,3x4x5", "f32", 9, 2);
    std::fs::write(repo.path(".gitignore"), "model.safetensors\n").unwrap();
    std::fs::copy(work.join("base.safetensors"), repo.path("base.safetensors")).unwrap();
    repo.git(&["add", ".gitattributes", ".gitignore", "base.safetensors"]);
    repo.git(&["commit", "-q", "-m", "base"]);

    // Step 1: stored against the base file.
    std::fs::copy(work.join("ft1.safetensors"), repo.path("model.safetensors")).unwrap();
    ok(&repo.wi(&[
        "delta",
        "store",
        "--strategy",
        "int4",
        "model.safetensors",
        "--parent",
        "base.safetensors",
    ]));
    assert!(repo.path("model.safetensors.wdelta").exists());
    std::fs::copy(
        repo.path("model.safetensors.wdelta"),
        work.join("step1.wdelta"),
    )
    .unwrap();
    repo.git(&["add", "model.safetensors.wdelta"]);
    repo.git(&["commit", "-q", "-m", "step 1"]);

    // Step 2: chained on step 1, named by REV:path (an LFS pointer in git).
    std::fs::copy(work.join("ft2.safetensors"), repo.path("model.safetensors")).unwrap();
    ok(&repo.wi(&[
        "delta",
        "store",
        "--strategy",
        "int4",
        "model.safetensors",
        "--parent",
        "HEAD:model.safetensors.wdelta",
    ]));
    std::fs::copy(
        repo.path("model.safetensors.wdelta"),
        work.join("step2.wdelta"),
    )
    .unwrap();
    repo.git(&["add", "model.safetensors.wdelta"]);
    repo.git(&["commit", "-q", "-m", "step 2"]);
    // The base is removed from HEAD: restore must find it in history.
    repo.git(&["rm", "-q", "base.safetensors"]);
    repo.git(&["commit", "-q", "-m", "drop base from HEAD"]);

    // What the chain reconstructs, computed with explicit files.
    let expected2 = work.join("expected2.safetensors");
    ok(&run(&[
        "delta",
        "apply",
        "--base",
        s(&work.join("base.safetensors")),
        "--chain",
        s(&work.join("step1.wdelta")),
        s(&work.join("step2.wdelta")),
        "-o",
        s(&expected2),
    ]));
    std::fs::remove_file(repo.path("model.safetensors")).unwrap();
    let out = repo.wi(&["delta", "restore", "model.safetensors.wdelta"]);
    ok(&out);
    assert!(
        stdout(&out).contains("base.safetensors at "),
        "{}",
        stdout(&out)
    );
    same_tensors(&repo.path("model.safetensors"), &expected2);
    // And that is the reference's reconstruction, of links encoded as defined.
    let (base, step1, step2) = (
        work.join("base.safetensors"),
        work.join("step1.wdelta"),
        work.join("step2.wdelta"),
    );
    rebuilt_as_defined(&base, &expected2, &[&step1, &step2]);
    encoded_as_defined(&base, &[], &work.join("ft1.safetensors"), &step1);
    encoded_as_defined(&base, &[&step1], &work.join("ft2.safetensors"), &step2);

    // The wdelta in git diff is shown through the core's recognition; here: inspect works on
    // the committed pointer's object via the CLI on the file.
    let out = repo.wi(&["delta", "inspect", "model.safetensors.wdelta"]);
    ok(&out);
    assert!(stdout(&out).contains("format: wdelta version 1"));

    // Step 1 checked out again restores with the base found in history too.
    repo.git(&["checkout", "-q", "HEAD~2", "--", "model.safetensors.wdelta"]);
    let out1 = work.join("restored1.safetensors");
    ok(&repo.wi(&[
        "delta",
        "restore",
        "model.safetensors.wdelta",
        "-o",
        s(&out1),
    ]));
    let expected1 = work.join("expected1.safetensors");
    ok(&run(&[
        "delta",
        "apply",
        "--base",
        s(&work.join("base.safetensors")),
        s(&work.join("step1.wdelta")),
        "-o",
        s(&expected1),
    ]));
    same_tensors(&out1, &expected1);
    rebuilt_as_defined(&work.join("base.safetensors"), &expected1, &[&step1]);

    // Explicit parent, from history by REV:path.
    let out3 = work.join("restored3.safetensors");
    ok(&repo.wi(&[
        "delta",
        "restore",
        "model.safetensors.wdelta",
        "--parent",
        "HEAD~1:base.safetensors",
        "-o",
        s(&out3),
    ]));
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

/// Every model argument of the delta commands goes through the input seam: `REV:path` names a
/// committed model (a plain blob here, copied to a temporary file that is gone afterwards)
/// for the fine-tuned side of `store` and the base of `create`, `apply` and `verify`.
#[test]
fn delta_commands_take_committed_models_by_rev_path() {
    let repo = Repo::new();
    let work = repo.tmp.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    pair(&work, "16x8,5", "f32", 3, 1);
    std::fs::copy(work.join("base.safetensors"), repo.path("base.safetensors")).unwrap();
    std::fs::copy(work.join("ft1.safetensors"), repo.path("model.safetensors")).unwrap();
    repo.git(&["add", "base.safetensors", "model.safetensors"]);
    repo.git(&["commit", "-q", "-m", "models"]);
    std::fs::remove_file(repo.path("model.safetensors")).unwrap();
    let tmp = repo.tmp.path().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let with_tmp = |args: &[&str]| {
        let mut cmd = repo.command_in(&repo.dir, common::bin());
        cmd.args(args).env("TMPDIR", &tmp);
        cmd.output().unwrap()
    };

    ok(&with_tmp(&[
        "delta",
        "store",
        "--strategy",
        "int4",
        "HEAD:model.safetensors",
        "--parent",
        "HEAD:base.safetensors",
    ]));
    // Named after the committed file, in the current directory.
    assert!(repo.path("model.safetensors.wdelta").exists());
    ok(&with_tmp(&[
        "delta",
        "verify",
        "--base",
        "HEAD:base.safetensors",
        "model.safetensors.wdelta",
    ]));
    let out = repo.path("restored.safetensors");
    ok(&with_tmp(&[
        "delta",
        "apply",
        "--base",
        "HEAD:base.safetensors",
        "model.safetensors.wdelta",
        "-o",
        s(&out),
    ]));
    let direct = work.join("direct.wdelta");
    ok(&with_tmp(&[
        "delta",
        "create",
        "--strategy",
        "int4",
        "--base",
        "HEAD:base.safetensors",
        "HEAD:model.safetensors",
        "-o",
        s(&direct),
    ]));
    assert_eq!(
        std::fs::read(&direct).unwrap(),
        std::fs::read(repo.path("model.safetensors.wdelta")).unwrap(),
        "the same delta whether the models are named as files or by REV:path"
    );
    let left: Vec<_> = std::fs::read_dir(&tmp).unwrap().flatten().collect();
    assert!(left.is_empty(), "temporary copies left behind: {left:?}");

    // A revision that does not hold the file is an error naming it.
    let missing = with_tmp(&["delta", "verify", "--base", "HEAD:nope.safetensors", "x"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(
        stderr(&missing).contains("nope.safetensors"),
        "{}",
        stderr(&missing)
    );
}

/// `delta store` and `delta restore` copy a parent named by `REV:path` (a git blob) to a
/// temporary file; SIGINT, SIGTERM or SIGHUP while they run removes it, and the command
/// writes nothing.
#[cfg(unix)]
#[test]
fn a_signal_during_store_or_restore_leaves_no_temporary_copy() {
    let repo = Repo::new();
    let work = repo.tmp.path().join("work");
    let tmpdir = repo.tmp.path().join("tmp");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::create_dir_all(&tmpdir).unwrap();
    // Small: the pause point, not the size, makes the signal land mid-run.
    pair(&work, "256x256", "f32", 3, 1);
    std::fs::write(repo.path(".gitignore"), "model.safetensors\n").unwrap();
    std::fs::copy(work.join("base.safetensors"), repo.path("base.safetensors")).unwrap();
    repo.git(&["add", ".gitignore", "base.safetensors"]);
    repo.git(&["commit", "-q", "-m", "base"]);
    std::fs::copy(work.join("ft1.safetensors"), repo.path("model.safetensors")).unwrap();
    let blob_copies = || -> Vec<String> {
        std::fs::read_dir(&tmpdir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(".weight-inspect-"))
            .collect()
    };
    // Runs `args` to the test build's pause point just after its temporary copy of the blob
    // was written (docs/TESTING.md), then sends `signal` there.
    let interrupt = |args: &[&str], signal: i32| {
        let mut cmd = repo.command(common::bin());
        cmd.args(args).env("TMPDIR", &tmpdir);
        let paused = common::pause::start_paused(cmd, "blob-copied");
        assert_eq!(blob_copies().len(), 1, "{args:?}: {:?}", blob_copies());
        let (status, err) = paused.signal(signal);
        assert_eq!(status.code(), Some(128 + signal), "{err}");
        assert!(blob_copies().is_empty(), "left {:?}", blob_copies());
    };
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        interrupt(
            &[
                "delta",
                "store",
                "--strategy",
                "int4",
                "model.safetensors",
                "--parent",
                "HEAD:base.safetensors",
            ],
            signal,
        );
        assert!(!repo.path("model.safetensors.wdelta").exists());
    }

    // A stored delta whose parent is found in git: restore copies the base blob.
    ok(&repo.wi(&[
        "delta",
        "store",
        "--strategy",
        "int4",
        "model.safetensors",
        "--parent",
        "HEAD:base.safetensors",
    ]));
    std::fs::remove_file(repo.path("model.safetensors")).unwrap();
    interrupt(
        &["delta", "restore", "model.safetensors.wdelta"],
        libc::SIGINT,
    );
    assert!(!repo.path("model.safetensors").exists());
}

/// A lineage of lossless and lossy links in either order, each stored with `delta store
/// --parent HEAD:model.safetensors.wdelta` and committed, pushed through a real LFS server
/// (giftless) and cloned: every commit's model is restored in the clone, bit-exact where its
/// link is lossless, and within the loss `store` recorded where it is lossy.
#[test]
fn a_mixed_lineage_is_stored_cloned_and_restored() {
    let repo = Repo::with_lfs(&["*.safetensors", "*.wdelta"]);
    let work = repo.tmp.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    pair(&work, "32x16,7,3x4x5", "f32", 13, 3);
    std::fs::write(repo.path(".gitignore"), "model.safetensors\n").unwrap();
    std::fs::copy(work.join("base.safetensors"), repo.path("base.safetensors")).unwrap();
    repo.git(&["add", ".gitattributes", ".gitignore", "base.safetensors"]);
    repo.git(&["commit", "-q", "-m", "base"]);
    // lossless onto the base, int4 onto the lossless delta, lossless onto the int4 one.
    let steps: [(&str, &[&str]); 3] = [
        ("base.safetensors", &[]),
        ("HEAD:model.safetensors.wdelta", &["--strategy", "int4"]),
        ("HEAD:model.safetensors.wdelta", &[]),
    ];
    let mut reports = Vec::new();
    for (i, (parent, extra)) in steps.iter().enumerate() {
        let ft = work.join(format!("ft{}.safetensors", i + 1));
        std::fs::copy(&ft, repo.path("model.safetensors")).unwrap();
        let mut args = vec!["delta", "store", "model.safetensors", "--parent", parent];
        args.extend_from_slice(extra);
        let out = repo.wi(&args);
        ok(&out);
        assert!(!stdout(&out).contains(".git/"), "{}", stdout(&out));
        reports.push(stdout(&out));
        repo.git(&["add", "model.safetensors.wdelta"]);
        repo.git(&["commit", "-q", "-m", &format!("step {}", i + 1)]);
    }
    assert_eq!(reports.len(), 3);
    assert!(reports[0].contains("strategy: lossless"), "{}", reports[0]);
    assert!(reports[1].contains("approximate, int4"), "{}", reports[1]);
    assert!(reports[2].contains("strategy: lossless"), "{}", reports[2]);
    // The int4 link is made against the lossless link's rebuilt model, plain weights: its
    // loss is measured and recorded.
    let recorded: f64 = reports[1]
        .lines()
        .find_map(|l| l.strip_prefix("lossy: rebuilt vs fine-tune rel_l2 "))
        .and_then(|rest| rest.split(',').next())
        .expect("store reports the loss")
        .parse()
        .unwrap();

    // Pushed to a bare repository and giftless; cloned, with every LFS object fetched.
    let storage = repo.tmp.path().join("lfs-storage");
    let bare = repo.tmp.path().join("bare.git");
    repo.git(&["init", "-q", "--bare", "-b", "main", s(&bare)]);
    let server = common::lfs_server::LfsServer::giftless(&storage, false);
    repo.git(&["remote", "add", "origin", s(&bare)]);
    repo.git(&["config", "lfs.url", &server.lfs_url()]);
    repo.git(&["push", "-q", "origin", "main"]);
    let clone = repo.tmp.path().join("clone");
    let out = repo
        .git_cmd_in(repo.tmp.path(), &["clone", "-q", s(&bare), "clone"])
        .env("GIT_LFS_SKIP_SMUDGE", "1")
        .output()
        .unwrap();
    ok(&out);
    repo.ok_in(&clone, &["config", "lfs.url", &server.lfs_url()]);
    repo.ok_in(&clone, &["lfs", "install", "--local"]);
    repo.ok_in(&clone, &["lfs", "fetch", "--all"]);
    repo.ok_in(&clone, &["lfs", "checkout"]);
    assert!(!clone.join("model.safetensors").exists());

    // Step 3 (lossless on int4 on lossless): ft3's bytes, the lineage found in history.
    let out = repo.wi_in(&clone, &["delta", "restore", "model.safetensors.wdelta"]);
    ok(&out);
    let text = stdout(&out);
    assert!(text.contains("identical to the stored model"), "{text}");
    assert_eq!(text.matches(" -> ").count(), 3, "{text}");
    let same = |a: &Path, b: &Path| {
        assert!(
            std::fs::read(a).unwrap() == std::fs::read(b).unwrap(),
            "{} vs {}",
            a.display(),
            b.display()
        );
    };
    same(
        &clone.join("model.safetensors"),
        &work.join("ft3.safetensors"),
    );
    // Step 2 (int4): approximate, and as close to ft2 as store said.
    repo.ok_in(
        &clone,
        &["checkout", "-q", "HEAD~1", "--", "model.safetensors.wdelta"],
    );
    repo.ok_in(&clone, &["lfs", "checkout"]);
    let out = repo.wi_in(
        &clone,
        &[
            "delta",
            "restore",
            "model.safetensors.wdelta",
            "-o",
            "step2.safetensors",
        ],
    );
    ok(&out);
    assert!(
        stdout(&out).contains(": approximate, int4, 3 tensors"),
        "{}",
        stdout(&out)
    );
    let measured = common::run_python_source(
        r"
import sys
import numpy as np
from safetensors.numpy import load_file
r, ft = load_file(sys.argv[1]), load_file(sys.argv[2])
err = sum(float(np.sum((r[k].astype(np.float64) - ft[k]) ** 2)) for k in ft)
norm = sum(float(np.sum(ft[k].astype(np.float64) ** 2)) for k in ft)
print(np.sqrt(err / norm))
",
        &[
            s(&clone.join("step2.safetensors")),
            s(&work.join("ft2.safetensors")),
        ],
    );
    let measured: f64 = stdout(&measured).trim().parse().unwrap();
    assert!(recorded > 0.0, "{recorded}");
    assert!(
        (measured - recorded).abs() <= 5e-7 + recorded * 1e-3,
        "rebuilt rel_l2 {measured}, recorded {recorded}"
    );
    // Step 1 (lossless on the base): ft1's bytes.
    repo.ok_in(
        &clone,
        &["checkout", "-q", "HEAD~2", "--", "model.safetensors.wdelta"],
    );
    repo.ok_in(&clone, &["lfs", "checkout"]);
    let out = repo.wi_in(
        &clone,
        &[
            "delta",
            "restore",
            "model.safetensors.wdelta",
            "-o",
            "step1.safetensors",
        ],
    );
    ok(&out);
    same(
        &clone.join("step1.safetensors"),
        &work.join("ft1.safetensors"),
    );
}
