//! The Python package (pyproject.toml, maturin `bindings = "bin"`): the wheel and the sdist
//! install into fresh virtual environments and put a working `weight-inspect` on PATH, and the
//! pre-commit framework runs the `language: python` hook on a repository with a good and a bad
//! model.
//!
//! These tests build with maturin from PyPI (pinned in scripts/requirements-test.txt; pip
//! fetches it again for the PEP 517 builds) and rebuild the crate, so they run after the main
//! test run, from scripts/test-packaging, never alongside the tests that execute the binary
//! cargo built. The builds use the dev profile and the shared target directory, so only the
//! crate itself is compiled again.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::git::Repo;
use common::models::gguf;
use common::{assert_contains, code, combined, python, repo_root, shared_target, stdout};
use serde_json::json;

/// `CARGO_PKG_VERSION` as pip names it in files.
const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The target directory the package builds share with the main test run: dependencies are
/// compiled once.
fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| repo_root().join("target"), PathBuf::from)
}

fn ok(mut cmd: Command, what: &str) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot start: {e}"));
    assert!(out.status.success(), "{what} failed:\n{}", combined(&out));
    out
}

/// A PEP 517 build by pip: maturin from PyPI, the dev profile, the shared target directory.
fn with_build_env(cmd: &mut Command) -> &mut Command {
    cmd.env("MATURIN_PEP517_ARGS", "--profile dev")
        .env("CARGO_TARGET_DIR", target_dir())
        .env("PIP_CACHE_DIR", shared_target("pip-cache"))
        .env("PIP_DISABLE_PIP_VERSION_CHECK", "1")
}

/// A fresh virtual environment in `dir`; returns its bin directory.
fn venv(dir: &Path) -> PathBuf {
    let mut cmd = Command::new(python());
    cmd.args(["-m", "venv"]).arg(dir);
    ok(cmd, "python -m venv");
    let bin = dir.join("bin");
    assert!(
        !bin.join("weight-inspect").exists(),
        "a fresh venv has no weight-inspect"
    );
    bin
}

/// The installed binary answers with the crate's version and diffs the bundled examples.
fn assert_installed_binary_works(bin: &Path) {
    let exe = bin.join("weight-inspect");
    let mut cmd = Command::new(&exe);
    cmd.arg("--version");
    let out = ok(cmd, "weight-inspect --version");
    assert_eq!(stdout(&out), format!("weight-inspect {VERSION}\n"));

    let examples = repo_root().join("examples");
    let out = Command::new(&exe)
        .arg("diff")
        .arg(examples.join("tiny-llama-f16.gguf"))
        .arg(examples.join("tiny-llama-q8_0.gguf"))
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert_eq!(code(&out), 1, "{}", combined(&out));
    assert_contains(
        &stdout(&out),
        &[
            "hash equal: false",
            "old: baf69cd8c133baf37aef535825a5c8481a02767fb335aa40954c5510c21ff6cc",
        ],
    );
}

#[test]
#[ignore = "packaging: scripts/test-packaging runs it after the main test run"]
fn the_wheel_installs_the_binary_into_a_fresh_venv() {
    let tmp = tempfile::tempdir().unwrap();
    let wheels = tmp.path().join("wheels");
    let mut build = Command::new(python());
    build
        .args(["-m", "maturin", "build", "--profile", "dev", "--out"])
        .arg(&wheels)
        .current_dir(repo_root())
        .env("CARGO_TARGET_DIR", target_dir());
    ok(build, "maturin build");
    let wheel: Vec<PathBuf> = std::fs::read_dir(&wheels)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(wheel.len(), 1, "{wheel:?}");
    let wheel = &wheel[0];
    let name = wheel.file_name().unwrap().to_str().unwrap();
    // The version is Cargo.toml's; the binary needs no particular Python.
    assert!(
        name.starts_with(&format!("weight_inspect-{VERSION}-py3-none-")),
        "{name}"
    );

    let bin = venv(&tmp.path().join("venv"));
    let mut install = Command::new(bin.join("python"));
    install
        .args(["-m", "pip", "install", "--no-index", "--quiet"])
        .arg(wheel)
        .env("PIP_DISABLE_PIP_VERSION_CHECK", "1");
    ok(install, "pip install WHEEL");
    assert_installed_binary_works(&bin);
}

#[test]
#[ignore = "packaging: scripts/test-packaging runs it after the main test run"]
fn the_sdist_builds_and_installs() {
    let tmp = tempfile::tempdir().unwrap();
    let dist = tmp.path().join("dist");
    let mut sdist = Command::new(python());
    sdist
        .args(["-m", "maturin", "sdist", "--out"])
        .arg(&dist)
        .current_dir(repo_root());
    ok(sdist, "maturin sdist");
    let archive = dist.join(format!("weight_inspect-{VERSION}.tar.gz"));
    assert!(archive.exists(), "{}", archive.display());

    let bin = venv(&tmp.path().join("venv"));
    let mut install = Command::new(bin.join("python"));
    install
        .args(["-m", "pip", "install", "--quiet"])
        .arg(&archive);
    with_build_env(&mut install);
    ok(install, "pip install SDIST");
    assert_installed_binary_works(&bin);
}

/// The hook as docs/policy.md gives it (a local hook that pip-installs weight-inspect), with
/// this repository's source in place of the version from PyPI.
#[test]
#[ignore = "packaging: scripts/test-packaging runs it after the main test run"]
fn pre_commit_runs_the_python_hook() {
    let python = python();
    let repo = Repo::new();
    repo.write(
        ".weight-inspect.toml",
        "[[rules]]\npaths = [\"models/*.gguf\"]\nallowed_dtypes = [\"f16\", \"f32\"]\n",
    );
    let source = repo_root();
    let config = std::fs::read_to_string(repo_root().join("docs/pre-commit-python.yaml"))
        .expect("the documented configuration");
    let config = config.replace(
        &format!("weight-inspect=={VERSION}"),
        source.to_str().unwrap(),
    );
    assert!(config.contains(source.to_str().unwrap()), "{config}");
    repo.write(".pre-commit-config.yaml", &config);
    repo.fixtures(json!({
        "models/good.gguf": gguf(&["f16"], json!({})),
        "models/bad.gguf": gguf(&["q4_k"], json!({})),
    }));
    repo.git(&["add", "."]);

    let home = tempfile::tempdir().unwrap();
    let mut cmd = repo.command(&python);
    cmd.args([
        "-m",
        "pre_commit",
        "run",
        "--all-files",
        "--verbose",
        "--color",
        "never",
    ])
    .env("PRE_COMMIT_HOME", home.path())
    // The hook's own environment, not the binary of this test run.
    .env("PATH", std::env::var_os("PATH").unwrap_or_default());
    with_build_env(&mut cmd);
    let out = cmd.output().expect("pre-commit runs");
    let text = combined(&out);
    assert_eq!(code(&out), 1, "{text}");
    assert_contains(
        &text,
        &[
            "weight-inspect policy check",
            "Failed",
            "models/bad.gguf: allowed_dtypes: expected only f16, f32; found q4_k",
            "1 violation in 1 of 2 files checked against .weight-inspect.toml",
        ],
    );
    assert!(!text.contains("models/good.gguf:"), "{text}");
    // The binary pre-commit ran is the one pip installed into the hook's environment.
    let installed = walk(home.path())
        .into_iter()
        .filter(|p| p.ends_with("bin/weight-inspect"))
        .count();
    assert_eq!(installed, 1, "weight-inspect in {}", home.path().display());
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}
