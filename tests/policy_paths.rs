//! Paths that are not what their names say: symbolic links named `*.gguf` (committed or in the
//! work tree, leading inside the repository, out of it, or to a device), FIFOs, and policy
//! globs that no repository path can match.
//!
//! A committed link is reported as a link (`inspect REV:link`, `git diff`, `ci`), never as a
//! missing file. The policy follows a link to the regular file it leads to inside the
//! repository and refuses, at once, one that leads out of it or to anything but a regular file.

mod common;

use std::io::Read;
use std::os::unix::fs::symlink;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use common::git::Repo;
use common::models::{gguf, make_model};
use common::{assert_contains, assert_lacks, code, stderr, stdout};

/// Runs `cmd`, failing the test if it has not ended within 30 seconds (a read of /dev/zero or
/// a FIFO never ends).
fn run_with_timeout(what: &str, mut cmd: Command) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starts");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(status) = child.try_wait().expect("waits") {
            let mut out = Output {
                status,
                stdout: Vec::new(),
                stderr: Vec::new(),
            };
            child
                .stdout
                .take()
                .unwrap()
                .read_to_end(&mut out.stdout)
                .unwrap();
            child
                .stderr
                .take()
                .unwrap()
                .read_to_end(&mut out.stderr)
                .unwrap();
            return out;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not end within 30 s (it reads something that never ends)");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// weight-inspect ARGS in the repository, under [`run_with_timeout`].
fn wi(repo: &Repo, args: &[&str]) -> Output {
    let mut cmd = repo.command(common::bin());
    cmd.args(args);
    run_with_timeout(&format!("weight-inspect {args:?}"), cmd)
}

const POLICY: &str = "[[rules]]\npaths = [\"**/*.gguf\"]\nallowed_dtypes = [\"f16\"]\n";

/// A repository whose first commit holds the policy and `models/real.gguf` (f32 tensors,
/// which the policy refuses), and whose second adds links: `link.gguf` to it, `out.gguf` out
/// of the repository, `zero.gguf` to /dev/zero, `dangling.gguf` to nothing, and `dir.gguf`
/// to a directory.
fn repo_with_links() -> Repo {
    let repo = Repo::new();
    repo.write(".weight-inspect.toml", POLICY);
    make_model(&repo.path("models/real.gguf"), &gguf(&["f32"], json!({})));
    repo.commit_all("v1");
    let link = |target: &str, name: &str| symlink(target, repo.path(name)).unwrap();
    link("real.gguf", "models/link.gguf");
    link("../../outside.gguf", "models/out.gguf");
    link("/dev/zero", "zero.gguf");
    link("missing.gguf", "dangling.gguf");
    link("models", "dir.gguf");
    repo.commit_all("links");
    repo
}

fn leaves(name: &str, target: &str) -> String {
    format!("{name}: a symbolic link to {target}, which leads out of the repository")
}

#[test]
fn committed_links_are_reported_as_links() {
    let repo = repo_with_links();
    for (spec, place) in [("HEAD:zero.gguf", "HEAD"), (":zero.gguf", "the index")] {
        let out = wi(&repo, &["inspect", spec]);
        assert_eq!(code(&out), 2);
        assert_contains(
            &stderr(&out),
            &[&format!(
                "{spec}: zero.gguf is a symbolic link in {place} (to /dev/zero), not a file"
            )],
        );
        assert_lacks(&stderr(&out), &["does not exist"]);
    }
    let out = wi(
        &repo,
        &["diff", "HEAD:models/real.gguf", "HEAD:models/link.gguf"],
    );
    assert_contains(
        &stderr(&out),
        &["models/link.gguf is a symbolic link in HEAD (to real.gguf), not a file"],
    );
    // A directory opens as the one model it holds; this one holds several (the link counts by
    // its name, and is refused when named).
    let out = wi(&repo, &["inspect", "HEAD:models"]);
    assert_eq!(code(&out), 2);
    assert_contains(
        &stderr(&out),
        &["HEAD:models: holds 3 models (link.gguf, out.gguf, real.gguf); name one of them"],
    );

    // weight-inspect git diff, between commits and against the work tree.
    let out = wi(&repo, &["git", "diff", "HEAD~1", "HEAD"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_contains(
        &stdout(&out),
        &[
            "weight-inspect /dev/null b/models/link.gguf\nnew file: a symbolic link to real.gguf, \
             not a file",
            "weight-inspect /dev/null b/zero.gguf\nnew file: a symbolic link to /dev/zero, not a \
             file",
            "weight-inspect /dev/null b/dir.gguf\nnew file: a symbolic link to models",
        ],
    );
    let json: serde_json::Value =
        serde_json::from_slice(&wi(&repo, &["git", "diff", "--json", "HEAD~1", "HEAD"]).stdout)
            .unwrap();
    let link = json["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["new_path"] == "models/link.gguf")
        .expect("the link is listed");
    assert_eq!(link["new"]["kind"], "link");
    assert_eq!(link["status"], "added");

    // An unchanged link is no change; a retargeted one and a file turned link are.
    let out = wi(&repo, &["git", "diff"]);
    assert_eq!(stdout(&out), "", "{}", stderr(&out));
    std::fs::remove_file(repo.path("models/link.gguf")).unwrap();
    symlink("other.gguf", repo.path("models/link.gguf")).unwrap();
    std::fs::remove_file(repo.path("models/real.gguf")).unwrap();
    symlink("/dev/zero", repo.path("models/real.gguf")).unwrap();
    let out = wi(&repo, &["git", "diff"]);
    assert_contains(
        &stdout(&out),
        &[
            "weight-inspect a/models/link.gguf b/models/link.gguf\nold: a symbolic link to \
             real.gguf, not a file (links are not followed)\nnew: a symbolic link to other.gguf",
            "weight-inspect a/models/real.gguf b/models/real.gguf\nold: gguf model, structural \
             hash",
            "new: a symbolic link to /dev/zero, not a file",
        ],
    );
    assert_lacks(&stdout(&out), &["zero.gguf", "dir.gguf"]);

    // git's external diff driver is handed a link's target with mode 120000.
    let out = repo.wi(&["git", "install", "--external"]);
    common::assert_success("git install", &out);
    let diff = repo.ok(&["diff", "HEAD~1", "HEAD"]);
    assert_contains(
        &diff,
        &["weight-inspect /dev/null b/models/link.gguf\nnew file: a symbolic link to real.gguf"],
    );
}

#[test]
fn ci_follows_links_inside_the_head_commit_and_refuses_the_others() {
    let repo = repo_with_links();
    let out = wi(&repo, &["ci", "--base", "HEAD~1", "--head", "HEAD"]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let log = stdout(&out);
    assert_contains(
        &log,
        &[
            "added     models/link.gguf  link  - -> ?",
            "added     zero.gguf  link",
            // The link inside is judged as the file it leads to.
            "models/link.gguf: allowed_dtypes: expected only f16; found f32 in 1 tensor",
            &format!("zero.gguf: cannot check: {}", &leaves("", "/dev/zero")[2..]),
            &format!(
                "models/out.gguf: cannot check: {}",
                &leaves("", "../../outside.gguf")[2..]
            ),
            "dangling.gguf: cannot check: a symbolic link to missing.gguf, which leads to nothing \
             (missing.gguf is not in HEAD)",
            "dir.gguf: cannot check: a symbolic link to models, which leads to a directory \
             (models in HEAD), not a regular file",
            "1 violation in 1 of 1 file checked against .weight-inspect.toml; 4 files could not \
             be checked",
        ],
    );
}

#[test]
fn check_follows_work_tree_links_inside_and_refuses_the_others_at_once() {
    let repo = repo_with_links();
    // Tracked files, the index, named files, a walked directory: a link out of the
    // repository (here to /dev/zero, which never ends) is reported, not read.
    for args in [
        vec!["check"],
        vec!["check", "--staged", "--all"],
        vec!["check", "zero.gguf", "models"],
        vec!["check", "."],
    ] {
        let out = wi(&repo, &args);
        assert_eq!(code(&out), 2, "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert_contains(
            &err,
            &[
                &format!("weight-inspect: {}", leaves("zero.gguf", "/dev/zero")),
                &format!(
                    "weight-inspect: {}",
                    leaves("models/out.gguf", "../../outside.gguf")
                ),
            ],
        );
        assert_contains(
            &stdout(&out),
            &["models/link.gguf: allowed_dtypes: expected only f16; found f32 in 1 tensor"],
        );
    }
    let err = stderr(&wi(&repo, &["check"]));
    assert_contains(
        &err,
        &[
            "dangling.gguf: a symbolic link to missing.gguf, which leads to nothing it can reach",
            "dir.gguf: a symbolic link to models, which leads to a directory, not a regular file",
        ],
    );
    let err = stderr(&wi(&repo, &["check", "--staged", "--all"]));
    assert_contains(
        &err,
        &[
            "dangling.gguf: a symbolic link to missing.gguf, which leads to nothing (missing.gguf \
           is not in the index)",
        ],
    );

    // A FIFO (or a device) behind a model name is refused, not opened.
    let fifo = repo.path("pipe.gguf");
    let status = Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo runs");
    assert!(status.success());
    let out = wi(&repo, &["check", "pipe.gguf"]);
    assert_eq!(code(&out), 2);
    assert_contains(
        &stderr(&out),
        &["pipe.gguf: a device, FIFO or socket, not a regular file; not read"],
    );
    // A link inside the repository to such a file is refused too.
    symlink("pipe.gguf", repo.path("to-pipe.gguf")).unwrap();
    let out = wi(&repo, &["check", "to-pipe.gguf"]);
    assert_contains(
        &stderr(&out),
        &["to-pipe.gguf: a symbolic link to pipe.gguf, which leads to a device, FIFO or socket"],
    );
    assert!(Path::new(&fifo).exists());
}

#[test]
fn ci_reads_a_policy_link_only_inside_the_head_commit() {
    let repo = Repo::new();
    repo.write("policies/models.toml", POLICY);
    symlink("policies/models.toml", repo.path(".weight-inspect.toml")).unwrap();
    repo.commit_all("policy");
    make_model(&repo.path("m.gguf"), &gguf(&["f32"], json!({})));
    repo.commit_all("model");
    let out = wi(&repo, &["ci", "--base", "HEAD~1"]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert_contains(
        &stdout(&out),
        &["m.gguf: allowed_dtypes: expected only f16; found f32 in 1 tensor"],
    );

    // A policy that leads out of the repository is an error, not "no policy".
    std::fs::remove_file(repo.path(".weight-inspect.toml")).unwrap();
    symlink("/etc/passwd", repo.path(".weight-inspect.toml")).unwrap();
    repo.commit_all("policy out");
    let out = wi(&repo, &["ci", "--base", "HEAD~1"]);
    assert_eq!(code(&out), 2, "{}", stdout(&out));
    assert_contains(
        &stderr(&out),
        &[&leaves(".weight-inspect.toml", "/etc/passwd")],
    );
}

#[test]
fn globs_that_can_never_match_are_located_errors() {
    let repo = Repo::new();
    make_model(&repo.path("a.gguf"), &gguf(&["f32"], json!({})));
    for (glob, column) in [("../**", 12), ("models/../*.gguf", 12), ("./a.gguf", 12)] {
        repo.write(
            ".weight-inspect.toml",
            format!("[[rules]]\npaths = [\"*.gguf\"]\nexclude = [\"{glob}\"]\nmax_tensors = 1\n"),
        );
        for args in [vec!["check", "a.gguf"], vec!["policy", "validate"]] {
            let out = wi(&repo, &args);
            assert_eq!(code(&out), 2, "{glob} {args:?}: {}", stdout(&out));
            assert_contains(
                &stderr(&out),
                &[&format!(".weight-inspect.toml:3:{column}: glob \"{glob}\"")],
            );
        }
    }
    repo.write(
        ".weight-inspect.toml",
        "[[rules]]\npaths = [\"../**\"]\nmax_tensors = 1\n",
    );
    let err = stderr(&wi(&repo, &["policy", "validate"]));
    assert_contains(
        &err,
        &[
            ".weight-inspect.toml:2:10: glob \"../**\" can never match: it has a \"..\" component",
            "2 | paths = [\"../**\"]",
        ],
    );
    // The same policy committed and read by `ci`.
    repo.commit_all("policy");
    make_model(&repo.path("b.gguf"), &gguf(&["f32"], json!({})));
    repo.commit_all("b");
    let out = wi(&repo, &["ci", "--base", "HEAD~1"]);
    assert_eq!(code(&out), 2);
    assert_contains(
        &stderr(&out),
        &[".weight-inspect.toml:2:10: glob \"../**\" can never match"],
    );
}
