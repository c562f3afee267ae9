//! Helpers for the git integration tests: isolated temporary repositories driven by the real
//! `git` and `git-lfs`.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

#[path = "../common/mod.rs"]
pub mod common;

pub use common::{bin, require_tool, stderr, stdout};

/// A temporary repository with its own HOME, so no user or system config leaks in.
pub struct Repo {
    pub tmp: tempfile::TempDir,
    pub dir: PathBuf,
    pub home: PathBuf,
}

impl Repo {
    /// `git init` (branch `main`) without LFS.
    pub fn new() -> Repo {
        require_tool("git");
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        let dir = tmp.path().join("repo");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(&dir).unwrap();
        let repo = Repo { tmp, dir, home };
        repo.ok(&["init", "-q", "-b", "main"]);
        repo
    }

    /// `git init` plus `git lfs install --local` and `git lfs track` of both model patterns.
    pub fn with_lfs() -> Repo {
        require_tool("git-lfs");
        let repo = Repo::new();
        repo.ok(&["lfs", "install", "--local"]);
        repo.ok(&["lfs", "track", "*.gguf", "*.safetensors"]);
        repo
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.join(rel)
    }

    /// A `git` command in `dir` with the isolated environment.
    pub fn git_cmd_in(&self, dir: &Path, args: &[&str]) -> Command {
        let mut cmd = Command::new("git");
        cmd.args(args).current_dir(dir);
        self.isolate(&mut cmd);
        cmd
    }

    pub fn isolate(&self, cmd: &mut Command) {
        cmd.env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", self.home.join(".config"))
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env_remove("GIT_CONFIG_GLOBAL")
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .env_remove("GIT_INDEX_FILE")
            .env_remove("GIT_LFS_SKIP_SMUDGE")
            .env_remove("GIT_PAGER_IN_USE")
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@t")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@t")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_PAGER", "cat")
            .env("PAGER", "cat")
            .env("NO_COLOR", "1")
            .env("LC_ALL", "C");
    }

    pub fn git_in(&self, dir: &Path, args: &[&str]) -> Output {
        self.git_cmd_in(dir, args)
            .output()
            .expect("failed to run git")
    }

    pub fn git(&self, args: &[&str]) -> Output {
        self.git_in(&self.dir, args)
    }

    /// Runs git and asserts success; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.git(args);
        assert_success(&format!("git {args:?}"), &out);
        stdout(&out)
    }

    pub fn ok_in(&self, dir: &Path, args: &[&str]) -> String {
        let out = self.git_in(dir, args);
        assert_success(&format!("git {args:?} in {}", dir.display()), &out);
        stdout(&out)
    }

    pub fn commit_all(&self, message: &str) {
        self.ok(&["add", "-A"]);
        self.ok(&["commit", "-q", "-m", message]);
    }

    /// weight-inspect in `dir` with the same environment as git.
    pub fn wi_in(&self, dir: &Path, args: &[&str]) -> Output {
        let mut cmd = Command::new(bin());
        cmd.args(args).current_dir(dir);
        self.isolate(&mut cmd);
        cmd.output().expect("failed to run weight-inspect")
    }

    pub fn wi(&self, args: &[&str]) -> Output {
        self.wi_in(&self.dir, args)
    }

    /// The LFS object id (sha256) of `rev:path`, read from its pointer blob.
    pub fn lfs_oid(&self, rev: &str, path: &str) -> String {
        let pointer = self.ok(&["cat-file", "-p", &format!("{rev}:{path}")]);
        let line = pointer
            .lines()
            .find_map(|l| l.strip_prefix("oid sha256:"))
            .unwrap_or_else(|| panic!("{rev}:{path} is not an LFS pointer:\n{pointer}"));
        line.to_owned()
    }

    /// The local object of an LFS oid in the default store.
    pub fn lfs_object(&self, oid: &str) -> PathBuf {
        self.dir
            .join(".git/lfs/objects")
            .join(&oid[0..2])
            .join(&oid[2..4])
            .join(oid)
    }
}

pub fn assert_success(what: &str, out: &Output) {
    assert!(
        out.status.success(),
        "{what} failed with {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        stdout(out),
        stderr(out)
    );
}

/// Asserts `text` contains every needle, showing the whole text otherwise.
pub fn assert_contains(text: &str, needles: &[&str]) {
    for needle in needles {
        assert!(
            text.contains(needle),
            "expected {needle:?} in:\n-----\n{text}\n-----"
        );
    }
}

pub fn assert_lacks(text: &str, needles: &[&str]) {
    for needle in needles {
        assert!(
            !text.contains(needle),
            "did not expect {needle:?} in:\n-----\n{text}\n-----"
        );
    }
}
