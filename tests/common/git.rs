//! Temporary git repositories driven by the real `git` and `git-lfs`, isolated from the
//! developer's configuration, and the one environment every git, hook and weight-inspect
//! process of the tests runs with.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use super::{assert_success, bin, models, require_tool, stdout};

/// The patterns of both model formats, for `git lfs track`.
pub const MODEL_PATTERNS: &[&str] = &["*.gguf", "*.safetensors"];

/// Environment every git (and hook, and weight-inspect) invocation of the tests gets: `home` as
/// HOME and XDG_CONFIG_HOME's parent, no system or global config, none of the variables that
/// would point git elsewhere or change what it does, a fixed identity, no prompts, no pager, no
/// colors, the C locale, and the test binary's directory first on PATH (hooks and installed
/// drivers find `weight-inspect` there, as after `cargo install`).
pub fn isolate(cmd: &mut Command, home: &Path) {
    cmd.env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env_remove("GIT_CONFIG_GLOBAL")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .env_remove("GIT_LFS_SKIP_SMUDGE")
        .env_remove("GIT_SSL_CAINFO")
        .env_remove("GIT_PAGER_IN_USE")
        .env_remove("WEIGHT_INSPECT")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_PAGER", "cat")
        .env("PAGER", "cat")
        .env("NO_COLOR", "1")
        .env("LC_ALL", "C");
    let bin_dir = bin().parent().unwrap().to_path_buf();
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs = vec![bin_dir];
    dirs.extend(std::env::split_paths(&path));
    cmd.env("PATH", std::env::join_paths(dirs).unwrap());
}

/// `git ARGS` in `dir`, isolated with `home`, not yet run.
pub fn git_command(home: &Path, dir: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new("git");
    cmd.args(args).current_dir(dir);
    isolate(&mut cmd, home);
    cmd
}

/// A temporary repository (`tmp/repo`, branch `main`) with its own HOME (`tmp/home`), so no
/// user or system config, global attributes or hooks leak in.
pub struct Repo {
    pub tmp: tempfile::TempDir,
    pub dir: PathBuf,
    pub home: PathBuf,
}

impl Repo {
    /// `git init` without LFS.
    pub fn new() -> Repo {
        require_tool("git");
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        let dir = tmp.path().join("repo");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(&dir).unwrap();
        let repo = Repo { tmp, dir, home };
        repo.git(&["init", "-q", "-b", "main"]);
        repo
    }

    /// `git init`, `git lfs install --local`, and `git lfs track PATTERNS` unless there are
    /// none.
    pub fn with_lfs(patterns: &[&str]) -> Repo {
        require_tool("git-lfs");
        let repo = Repo::new();
        repo.git(&["lfs", "install", "--local"]);
        if !patterns.is_empty() {
            let mut args = vec!["lfs", "track"];
            args.extend_from_slice(patterns);
            repo.git(&args);
        }
        repo
    }

    /// A path inside the work tree.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.join(rel)
    }

    /// The isolated environment of this repository's HOME (see [`isolate`]).
    pub fn isolate(&self, cmd: &mut Command) {
        isolate(cmd, &self.home);
    }

    /// `program` in `dir` with the isolated environment, not yet run.
    pub fn command_in(&self, dir: &Path, program: impl AsRef<OsStr>) -> Command {
        let mut cmd = Command::new(program);
        cmd.current_dir(dir);
        self.isolate(&mut cmd);
        cmd
    }

    /// `program` in the work tree with the isolated environment, not yet run.
    pub fn command(&self, program: impl AsRef<OsStr>) -> Command {
        self.command_in(&self.dir, program)
    }

    /// `git ARGS` in `dir`, not yet run.
    pub fn git_cmd_in(&self, dir: &Path, args: &[&str]) -> Command {
        git_command(&self.home, dir, args)
    }

    /// Runs git in `dir`, whatever its outcome.
    pub fn try_git_in(&self, dir: &Path, args: &[&str]) -> Output {
        self.git_cmd_in(dir, args)
            .output()
            .expect("failed to run git")
    }

    /// Runs git in the work tree, whatever its outcome.
    pub fn try_git(&self, args: &[&str]) -> Output {
        self.try_git_in(&self.dir, args)
    }

    /// Runs git; panics with its output unless it succeeds.
    pub fn git(&self, args: &[&str]) -> Output {
        let out = self.try_git(args);
        assert_success(&format!("git {args:?}"), &out);
        out
    }

    /// Runs git and asserts success; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        stdout(&self.git(args))
    }

    pub fn ok_in(&self, dir: &Path, args: &[&str]) -> String {
        let out = self.try_git_in(dir, args);
        assert_success(&format!("git {args:?} in {}", dir.display()), &out);
        stdout(&out)
    }

    /// `git add -A` and a commit of everything.
    pub fn commit_all(&self, message: &str) {
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "-m", message]);
    }

    /// weight-inspect in `dir` with the same environment as git.
    pub fn wi_in(&self, dir: &Path, args: &[&str]) -> Output {
        self.command_in(dir, bin())
            .args(args)
            .output()
            .expect("failed to run weight-inspect")
    }

    /// weight-inspect in the work tree with the same environment as git.
    pub fn wi(&self, args: &[&str]) -> Output {
        self.wi_in(&self.dir, args)
    }

    /// Writes a file of the work tree, creating its directory.
    pub fn write(&self, rel: &str, content: impl AsRef<[u8]>) {
        let path = self.path(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }

    /// Writes a file of the work tree with a modification time a minute back, so that the index
    /// entry `git add` makes for it is not "racily clean" (git, and weight-inspect after it,
    /// distrust an entry whose file may have changed within the index's own timestamp).
    pub fn write_settled(&self, rel: &str, content: impl AsRef<[u8]>) {
        self.write(rel, content);
        let past = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
        std::fs::File::options()
            .write(true)
            .open(self.path(rel))
            .unwrap()
            .set_modified(past)
            .unwrap();
    }

    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path(rel)).unwrap()
    }

    /// Writes model and checkpoint files relative to the work tree (see
    /// [`models::make_models`]).
    pub fn fixtures(&self, specs: serde_json::Value) {
        models::make_models(&self.dir, &specs);
    }

    /// The staged blob of `path`.
    pub fn staged(&self, path: &str) -> Vec<u8> {
        self.git(&["cat-file", "blob", &format!(":{path}")]).stdout
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
