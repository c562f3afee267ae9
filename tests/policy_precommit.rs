//! The real pre-commit framework runs this repository's hook (`.pre-commit-hooks.yaml`,
//! `language: rust`) through `pre-commit try-repo` on a repository with good and bad files.
//!
//! pre-commit builds the hook with `cargo install --path .` in a fresh store for every
//! try-repo run (try-repo ignores PRE_COMMIT_HOME's cache). That build would compile every
//! dependency again in the release profile, the longest step of the whole suite; so the real
//! cargo is reached through a two-line wrapper that adds `--debug --locked` to `install`, and
//! CARGO_TARGET_DIR is the build's own: the dev profile that scripts/test-packaging's maturin
//! builds have already compiled, the same locked versions. Only the speed of the build differs.
//!
//! The install rewrites target/debug/weight-inspect, which the other test binaries execute, so
//! this test is ignored in the main run and run by scripts/test-packaging, one test at a time.

mod common;

use std::path::PathBuf;

use common::git::Repo;
use common::models::gguf;
use common::{code, combined, shared_target};
use serde_json::json;

/// CARGO_HOME/RUSTUP_HOME as the outer cargo sees them (the test repo has its own HOME).
fn toolchain_homes() -> Vec<(&'static str, PathBuf)> {
    let home = PathBuf::from(std::env::var_os("HOME").expect("HOME is set"));
    let dir = |var: &str, default: &str| {
        std::env::var_os(var).map_or_else(|| home.join(default), PathBuf::from)
    };
    vec![
        ("CARGO_HOME", dir("CARGO_HOME", ".cargo")),
        ("RUSTUP_HOME", dir("RUSTUP_HOME", ".rustup")),
    ]
}

/// A `cargo` that runs the real one (the cargo of this build), with `--debug --locked` added
/// to `install`; in `dir`, to be put first on PATH.
fn cargo_wrapper(dir: &std::path::Path) {
    use std::os::unix::fs::PermissionsExt;
    let script = format!(
        "#!/bin/sh\nif [ \"$1\" = install ]; then shift; exec '{cargo}' install --debug --locked \"$@\"; fi\nexec '{cargo}' \"$@\"\n",
        cargo = env!("CARGO")
    );
    let path = dir.join("cargo");
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
#[ignore = "rebuilds the binary the other tests run: scripts/test-packaging runs it"]
fn pre_commit_try_repo_runs_the_hook() {
    let python = common::python();
    let version = std::process::Command::new(&python)
        .args(["-m", "pre_commit", "--version"])
        .output()
        .expect("python runs");
    assert!(
        version.status.success(),
        "the pre-commit framework is required (scripts/test installs it)"
    );
    let root = common::repo_root();
    assert!(
        root.join(".git").exists(),
        "{}: try-repo needs this repository as a git checkout",
        root.display()
    );

    let repo = Repo::new();
    repo.write(
        ".weight-inspect.toml",
        r#"
[[rules]]
paths = ["models/*.gguf"]
allowed_dtypes = ["f16", "f32"]

[[rules]]
paths = ["**/*.{bin,pt,pth,ckpt}"]
forbid_formats = ["pickle"]
"#,
    );
    repo.fixtures(json!({
        "models/good.gguf": gguf(&["f16"], json!({})),
        "models/bad.gguf": gguf(&["q4_k"], json!({})),
        "weights/evil.pt": {"kind": "torch_zip", "evil": true},
        "weights/clean.bin": gguf(&["f16"], json!({})),
    }));
    repo.write("notes.txt", "not a model\n");
    repo.git(&["add", "."]);

    let wrapper = repo.tmp.path().join("cargo-wrapper");
    std::fs::create_dir_all(&wrapper).unwrap();
    cargo_wrapper(&wrapper);
    let path = std::env::join_paths(
        std::iter::once(wrapper.clone()).chain(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        )),
    )
    .unwrap();
    let mut cmd = repo.command(&python);
    cmd.args(["-m", "pre_commit", "try-repo"])
        .arg(&root)
        .args([
            "weight-inspect",
            "--all-files",
            "--verbose",
            "--color",
            "never",
        ])
        .env("CARGO_TARGET_DIR", shared_target(""))
        .env("PRE_COMMIT_HOME", shared_target("policy-pre-commit-home"))
        // The wrapper first; then only the binary pre-commit builds, not the one of this run.
        .env("PATH", path);
    for (var, dir) in toolchain_homes() {
        cmd.env(var, dir);
    }
    let out = cmd.output().expect("pre-commit runs");
    let text = combined(&out);
    assert_eq!(code(&out), 1, "{text}");
    assert!(text.contains("weight-inspect policy check"), "{text}");
    assert!(text.contains("Failed"), "{text}");
    assert!(
        text.contains("models/bad.gguf: allowed_dtypes: expected only f16, f32; found q4_k"),
        "{text}"
    );
    assert!(text.contains("weights/evil.pt: forbid_formats"), "{text}");
    assert!(text.contains("posix.system (os.system)"), "{text}");
    assert!(!text.contains("models/good.gguf:"), "{text}");
    assert!(!text.contains("weights/clean.bin:"), "{text}");
    // Its global is dangerous too (pickle_globals, on by default).
    assert!(
        text.contains("weights/evil.pt: pickle_globals")
            && text.contains("dangerous: posix.system"),
        "{text}"
    );
    // notes.txt does not match the hook's `files` pattern; the four models do.
    assert!(
        text.contains("3 violations in 2 of 4 files checked against .weight-inspect.toml"),
        "{text}"
    );
}
