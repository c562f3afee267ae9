//! A PyTorch zip read remotely from its first bytes is judged by the central directory torch
//! reads (issue 32, item 10): the last bytes of the object are read too (a second range, or the
//! rest of giftless's whole-object stream), and a local entry the directory does not list (a
//! benign data.pkl in front of one that calls posix.system) is refused, never shown clean.
//! Real git, git-lfs and giftless; checkpoints from tests/common/zip_directory_cases.py.

mod common;

use std::path::Path;

use common::git::Repo;
use common::lfs_server::LfsServer;
use common::{assert_contains, assert_lacks, assert_success, python, repo_root, stdout};

/// A bare repository with `m/model.pt` (v1, then v2), `m/hidden.pt` and `m/big-directory.pt`
/// (in v2) pushed to giftless's storage under `dir`, and a clone of it without LFS content.
fn published_clone(dir: &Path) -> Repo {
    let cases = dir.join("cases");
    std::fs::create_dir_all(&cases).unwrap();
    let out = std::process::Command::new(python())
        .arg(repo_root().join("tests/common/zip_directory_cases.py"))
        .arg(&cases)
        .output()
        .unwrap();
    assert_success("zip_directory_cases.py", &out);
    let read = |name: &str| std::fs::read(cases.join(name)).unwrap();

    let storage = dir.join("lfs-storage");
    let bare = dir.join("bare.git");
    let source = Repo::with_lfs(&["*.pt"]);
    source.write("m/model.pt", read("good-v1.pt"));
    source.commit_all("v1");
    source.write("m/model.pt", read("good-v2.pt"));
    source.write("m/hidden.pt", read("hidden.pt"));
    source.write("m/big-directory.pt", read("big-directory.pt"));
    source.commit_all("v2");
    source.ok(&["init", "-q", "--bare", "-b", "main", bare.to_str().unwrap()]);
    let server = LfsServer::giftless(&storage, true);
    source.git(&["remote", "add", "origin", bare.to_str().unwrap()]);
    let with_token = server.lfs_url().replacen(
        "http://",
        &format!("http://_jwt:{}@", server.token("write")),
        1,
    );
    source.git(&["config", "lfs.url", &with_token]);
    source.git(&["push", "-q", "origin", "main"]);
    drop(server);

    let repo = Repo::new();
    std::fs::remove_dir_all(&repo.dir).unwrap();
    let out = repo
        .git_cmd_in(
            repo.tmp.path(),
            &[
                "clone",
                "-q",
                bare.to_str().unwrap(),
                repo.dir.to_str().unwrap(),
            ],
        )
        .env("GIT_LFS_SKIP_SMUDGE", "1")
        .output()
        .unwrap();
    assert_success("git clone", &out);
    assert!(
        repo.read("m/hidden.pt")
            .starts_with("version https://git-lfs"),
        "the clone has pointers, not content"
    );
    repo
}

const REFUSAL: &str = "member \"archive/data.pkl\" at offset 0, read from the first bytes of the \
                       file, is not the member the zip directory lists there";

/// git's drivers read a local file's header in growing windows: the directory at its end is
/// read too, and the hidden entry refused (git is not failed: exit 0).
#[test]
fn local_header_reads_are_judged_by_the_central_directory() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(python())
        .arg(repo_root().join("tests/common/zip_directory_cases.py"))
        .arg(dir.path())
        .output()
        .unwrap();
    assert_success("zip_directory_cases.py", &out);
    let repo = Repo::new();
    let textconv = |name: &str| {
        let path = dir.path().join(name);
        let out = repo.wi(&["textconv", path.to_str().unwrap()]);
        assert_success("weight-inspect textconv", &out);
        stdout(&out)
    };
    let hidden = textconv("hidden.pt");
    assert_contains(&hidden, &["content: unreadable model file", REFUSAL]);
    assert_lacks(&hidden, &["structural-hash"]);
    assert_contains(
        &textconv("good-v1.pt"),
        &["format: pytorch", "structural-hash"],
    );
}

#[test]
fn remote_zip_headers_are_judged_by_the_central_directory() {
    let dir = tempfile::tempdir().unwrap();
    let repo = published_clone(dir.path());
    let storage = dir.path().join("lfs-storage");
    // giftless streams whole objects (Range ignored); the range server answers 206.
    for range in [false, true] {
        let _ = std::fs::remove_dir_all(repo.dir.join(".git/weight-inspect/lfs-headers-v2"));
        let server = if range {
            LfsServer::range(&storage, "none", None)
        } else {
            LfsServer::giftless(&storage, false)
        };
        repo.git(&["config", "lfs.url", &server.lfs_url()]);
        let out = repo.wi(&["git", "diff", "HEAD~1", "HEAD"]);
        // git is never failed; the hidden entry makes the file unreadable, not clean.
        assert_success("weight-inspect git diff", &out);
        let text = stdout(&out);
        assert_contains(
            &text,
            &[
                "weight-inspect a/m/model.pt b/m/model.pt",
                "step",
                "m/hidden.pt",
                REFUSAL,
            ],
        );
        assert_lacks(&text, &["not present locally"]);
        let big = text
            .split("weight-inspect ")
            .find(|part| part.contains("b/m/big-directory.pt"))
            .unwrap();
        assert_contains(big, &["3001"]);
        assert_lacks(big, &["unreadable", "error"]);
        if range {
            // The headers' windows (two for the big pickle) and the tails (two for the big
            // directory): 1.5 MB of the objects' 4.7 MB.
            let downloads = server.requests_to("/objects/org/repo/");
            assert!(
                downloads.iter().all(|r| r["status"] == 206),
                "{downloads:#?}"
            );
            assert!(server.bytes_sent() < 2_500_000, "{}", server.bytes_sent());
        }
    }
}

/// A checkpoint committed without LFS, too large for a blob to be read whole by the policy
/// (issue 32, hardening round 3): its prefix holds the benign local entry, and the blob's end
/// (streamed from `git cat-file`) the directory that does not list it. `check --staged`, `ci`
/// and `git diff` refuse it; none shows it clean.
#[test]
fn large_blobs_without_lfs_are_judged_by_the_central_directory() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(python())
        .arg(repo_root().join("tests/common/zip_directory_cases.py"))
        .args([dir.path().to_str().unwrap(), "large"])
        .output()
        .unwrap();
    assert_success("zip_directory_cases.py large", &out);
    let hidden = std::fs::read(dir.path().join("hidden-large.pt")).unwrap();
    assert!(hidden.len() > 16 << 20, "larger than a blob read whole");
    let repo = Repo::new();
    repo.write(
        ".weight-inspect.toml",
        "[[rules]]\npaths = [\"**/*.pt\"]\nallowed_dtypes = [\"f32\"]\n",
    );
    repo.commit_all("policy");
    repo.write("m/hidden.pt", &hidden);
    repo.git(&["add", "m/hidden.pt"]);

    let out = repo.wi(&["check", "--staged"]);
    let text = format!("{}{}", stdout(&out), String::from_utf8_lossy(&out.stderr));
    assert_ne!(out.status.code(), Some(0), "{text}");
    assert_contains(&text, &["m/hidden.pt", REFUSAL]);

    repo.git(&["commit", "-qm", "hidden"]);
    let out = repo.wi(&["ci", "--base", "HEAD~1", "--head", "HEAD", "--offline"]);
    let text = format!("{}{}", stdout(&out), String::from_utf8_lossy(&out.stderr));
    assert_ne!(out.status.code(), Some(0), "{text}");
    assert_contains(&text, &["m/hidden.pt", REFUSAL]);

    // git diff reads the blob whole: the directory refuses the bytes of the hidden entry.
    let out = repo.wi(&["git", "diff", "HEAD~1", "HEAD"]);
    assert_success("weight-inspect git diff", &out);
    let text = stdout(&out);
    assert_contains(
        &text,
        &[
            "m/hidden.pt",
            "unreadable model file",
            "belong to no member the zip directory lists",
        ],
    );
    assert_lacks(&text, &["structural-hash"]);
}
