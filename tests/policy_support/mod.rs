//! Helpers of the policy tests: temporary git repositories with git-lfs, isolated from the
//! developer's configuration, and model/pickle fixtures written by the reference libraries.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common;

pub use common::models::gguf;

/// A temporary repository with its own HOME (so no user config or global hooks leak in).
pub struct TestRepo {
    pub dir: tempfile::TempDir,
    pub home: tempfile::TempDir,
}

/// Environment every git (and hook) invocation of the tests gets.
pub fn isolate(cmd: &mut Command, home: &Path) {
    cmd.env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .env("NO_COLOR", "1")
        .env_remove("GIT_DIR")
        .env_remove("GIT_INDEX_FILE")
        .env_remove("GIT_WORK_TREE")
        .env_remove("WEIGHT_INSPECT");
    // Hooks find `weight-inspect` on PATH, as after `cargo install`.
    let bin_dir = common::bin().parent().unwrap().to_path_buf();
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs = vec![bin_dir];
    dirs.extend(std::env::split_paths(&path));
    cmd.env("PATH", std::env::join_paths(dirs).unwrap());
}

impl TestRepo {
    /// `git init`, with `git lfs install --local` when `lfs`.
    pub fn new(lfs: bool) -> TestRepo {
        common::require_tool("git");
        let repo = TestRepo {
            dir: tempfile::tempdir().unwrap(),
            home: tempfile::tempdir().unwrap(),
        };
        repo.git(&["init", "-q", "-b", "main", "."]);
        if lfs {
            common::require_tool("git-lfs");
            repo.git(&["lfs", "install", "--local"]);
        }
        repo
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut cmd = Command::new(program);
        cmd.current_dir(self.path());
        isolate(&mut cmd, self.home.path());
        cmd
    }

    /// Runs git; panics with its output unless it succeeds.
    pub fn git(&self, args: &[&str]) -> Output {
        let out = self.try_git(args);
        assert!(
            out.status.success(),
            "git {args:?} failed:\n{}{}",
            common::stdout(&out),
            common::stderr(&out)
        );
        out
    }

    pub fn try_git(&self, args: &[&str]) -> Output {
        self.command("git").args(args).output().expect("git runs")
    }

    /// Runs weight-inspect in the repository.
    pub fn wi(&self, args: &[&str]) -> Output {
        self.command(common::bin())
            .args(args)
            .output()
            .expect("weight-inspect runs")
    }

    pub fn write(&self, rel: &str, content: impl AsRef<[u8]>) {
        let path = self.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }

    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path().join(rel)).unwrap()
    }

    /// Writes model/pickle fixtures (see tests/common/make_models.py) relative to the repository.
    pub fn fixtures(&self, spec: serde_json::Value) {
        make_fixtures(self.path(), spec);
    }

    /// The staged blob of `path`.
    pub fn staged(&self, path: &str) -> Vec<u8> {
        self.git(&["cat-file", "blob", &format!(":{path}")]).stdout
    }
}

/// Writes model/pickle fixtures (see tests/common/make_models.py) under `dir`.
pub fn make_fixtures(dir: &Path, spec: serde_json::Value) {
    common::models::make_models(dir, &spec);
}

pub fn combined(out: &Output) -> String {
    format!("{}{}", common::stdout(out), common::stderr(out))
}

pub fn code(out: &Output) -> i32 {
    out.status.code().expect("exited normally")
}

/// Where the shared, reusable build outputs of the slow tests live.
pub fn shared_target(name: &str) -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| common::repo_root().join("target"));
    target.join(name)
}
