//! Progress bars: on a terminal only (here a pseudo-terminal made by script(1)), never when
//! stderr is a pipe; shown by `delta restore` while it searches the history for a parent.

mod common;

use common::delta::{ok, pair};
use common::git::Repo;
use common::{require_tool, stderr, stdout};

/// A repository whose HEAD holds a delta whose parent is only in history.
fn repo() -> Repo {
    let repo = Repo::with_lfs(&["*.safetensors", "*.wdelta"]);
    let work = repo.tmp.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    pair(&work, "32x16,7", "f32", 9, 1);
    std::fs::write(repo.path(".gitignore"), "model.safetensors\n").unwrap();
    std::fs::copy(work.join("base.safetensors"), repo.path("base.safetensors")).unwrap();
    repo.git(&["add", ".gitattributes", ".gitignore", "base.safetensors"]);
    repo.git(&["commit", "-q", "-m", "base"]);
    std::fs::copy(work.join("ft1.safetensors"), repo.path("model.safetensors")).unwrap();
    ok(&repo.wi(&[
        "delta",
        "store",
        "model.safetensors",
        "--parent",
        "base.safetensors",
    ]));
    repo.git(&["add", "model.safetensors.wdelta"]);
    repo.git(&["rm", "-q", "base.safetensors"]);
    repo.git(&["commit", "-q", "-m", "delta only"]);
    std::fs::remove_file(repo.path("model.safetensors")).unwrap();
    repo
}

#[test]
fn the_history_search_shows_a_bar_on_a_terminal_only() {
    require_tool("script");
    let repo = repo();
    let bin = common::bin();

    // stderr a pipe: no bar, whatever the delay.
    let mut cmd = repo.command(&bin);
    cmd.args(["delta", "restore", "model.safetensors.wdelta"])
        .env("WEIGHT_INSPECT_PROGRESS_DELAY_MS", "0");
    let out = cmd.output().unwrap();
    ok(&out);
    assert!(!stderr(&out).contains("history"), "{}", stderr(&out));
    assert!(!stderr(&out).contains('\x1b'), "{:?}", stderr(&out));
    assert!(stdout(&out).starts_with("wrote "), "{}", stdout(&out));

    // On a terminal (script(1) runs the command on a pseudo-terminal and copies what it
    // printed): the bar of the history search, then the one of the reconstruction.
    std::fs::remove_file(repo.path("model.safetensors")).unwrap();
    let command = format!("'{}' delta restore model.safetensors.wdelta", bin.display());
    let mut cmd = repo.command("script");
    cmd.args(["-qec", &command, "/dev/null"])
        .env("WEIGHT_INSPECT_PROGRESS_DELAY_MS", "0")
        .env("TERM", "xterm")
        .env("COLUMNS", "120");
    let out = cmd.output().unwrap();
    let terminal = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{terminal}{}", stderr(&out));
    // Two candidates (the base in history, the delta at HEAD); the base matched first.
    assert!(terminal.contains("history ["), "{terminal:?}");
    assert!(terminal.contains("] 1/2 "), "{terminal:?}");
    let applying = terminal
        .find("applying [")
        .expect("the reconstruction's bar");
    assert!(
        terminal.find("history [").unwrap() < applying,
        "{terminal:?}"
    );
    assert!(terminal.contains("wrote "), "{terminal:?}");
    assert!(repo.path("model.safetensors").exists());
}

#[test]
fn value_diffs_show_a_bar_on_a_terminal_only() {
    require_tool("script");
    let dir = tempfile::tempdir().unwrap();
    pair(dir.path(), "512x256,64", "f32", 3, 1);
    let (a, b) = (
        dir.path().join("base.safetensors"),
        dir.path().join("ft1.safetensors"),
    );
    let bin = common::bin();
    let out = std::process::Command::new(&bin)
        .args(["diff", "--values", a.to_str().unwrap(), b.to_str().unwrap()])
        .env("WEIGHT_INSPECT_PROGRESS_DELAY_MS", "0")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(!stderr(&out).contains("values ["), "{}", stderr(&out));

    let command = format!(
        "'{}' diff --values '{}' '{}'",
        bin.display(),
        a.display(),
        b.display()
    );
    let out = std::process::Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .env("WEIGHT_INSPECT_PROGRESS_DELAY_MS", "0")
        .env("TERM", "xterm")
        .env("COLUMNS", "120")
        .output()
        .unwrap();
    let terminal = stdout(&out);
    assert!(terminal.contains("values ["), "{terminal:?}");
    assert!(terminal.contains("Values:"), "{terminal:?}");
}
