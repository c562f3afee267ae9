//! Helpers shared by the integration tests: the built binary, the Python interpreter with the
//! reference packages (gguf, safetensors, numpy, deltatensors, pre-commit), output checks; in
//! submodules, isolated git repositories ([`git`]), model files written by the reference
//! libraries ([`models`]) and the helpers of the .wdelta tests ([`delta`]).
#![allow(dead_code)]
// Test helpers shared between the test binaries, not a library face: `pub` is how they reach
// each test file.
#![allow(unreachable_pub)]

pub mod delta;
pub mod git;
pub mod lfs_server;
pub mod models;
pub mod pause;
pub mod signing;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The `weight-inspect` binary built for these tests.
pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_weight-inspect"))
}

/// Root of the repository (for fixtures and scripts).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn fixture(name: &str) -> PathBuf {
    repo_root().join("tests/fixtures").join(name)
}

/// The Python interpreter of the test venv. Fails loudly, never skips: run the tests through
/// `scripts/test`, which creates the venv, or set WEIGHT_INSPECT_PYTHON.
pub fn python() -> PathBuf {
    let path = std::env::var_os("WEIGHT_INSPECT_PYTHON")
        .map_or_else(|| repo_root().join(".venv/bin/python"), PathBuf::from);
    assert!(
        path.exists(),
        "Python with gguf/safetensors/deltatensors not found at {}: run the tests with scripts/test",
        path.display()
    );
    path
}

/// Runs a Python script from scripts/ with the test venv; panics with its stderr on failure.
pub fn run_python(script: &str, args: &[&str]) -> Output {
    let out = Command::new(python())
        .arg(repo_root().join("scripts").join(script))
        .args(args)
        .output()
        .expect("failed to start python");
    assert!(
        out.status.success(),
        "python {script} {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Runs Python `source` (`python -c`) with `args` in the test venv; panics with its stderr on
/// failure.
pub fn run_python_source(source: &str, args: &[&str]) -> Output {
    let out = Command::new(python())
        .arg("-c")
        .arg(source)
        .args(args)
        .output()
        .expect("failed to start python");
    assert!(
        out.status.success(),
        "python -c failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Runs weight-inspect with `args` in `dir` (or the current dir) and returns its output.
pub fn run_in(dir: Option<&Path>, args: &[&str]) -> Output {
    let mut cmd = Command::new(bin());
    cmd.args(args).env("NO_COLOR", "1");
    if let Some(dir) = dir {
        cmd.current_dir(dir);
    }
    cmd.output().expect("failed to start weight-inspect")
}

pub fn run(args: &[&str]) -> Output {
    run_in(None, args)
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Asserts that a tool the tests need is installed; fails loudly instead of skipping.
pub fn require_tool(name: &str) {
    let ok = Command::new(name)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "`{name}` is required by this test: run the tests with scripts/test, which installs it"
    );
}

/// stdout then stderr, for failure messages and searches across both.
pub fn combined(out: &Output) -> String {
    format!("{}{}", stdout(out), stderr(out))
}

/// The exit code; panics if the process was killed by a signal.
pub fn code(out: &Output) -> i32 {
    out.status.code().expect("exited normally")
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

/// Where the shared, reusable build outputs of the slow tests live.
pub fn shared_target(name: &str) -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| repo_root().join("target"), PathBuf::from);
    target.join(name)
}
