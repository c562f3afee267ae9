//! `completions SHELL` and the hidden `completions --man DIR`: every script is parsed by its shell
//! (bash, zsh and fish are installed by scripts/test) and bash and fish complete real command
//! lines with it; every man page is rendered by groff without a warning.

mod common;

use std::process::Command;

use common::{assert_contains, code, require_tool, run, stderr, stdout};

fn script(shell: &str) -> String {
    let out = run(&["completions", shell]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("weight-inspect"), "{text}");
    text
}

fn shell(program: &str, args: &[&str]) -> std::process::Output {
    require_tool(program);
    Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program} runs: {e}"))
}

fn written(name: &str, text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    (dir, path)
}

#[test]
fn bash_parses_and_completes_subcommands_options_and_values() {
    let (_dir, path) = written("weight-inspect.bash", &script("bash"));
    let path = path.to_str().unwrap();
    let out = shell("bash", &["-n", path]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    // COMP_WORDS as bash's completion sets them; the function as `complete -p` names it.
    let complete = |words: &[&str]| {
        let cword = words.len() - 1;
        let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
        let program = format!(
            "source '{path}'\nf=$(complete -p weight-inspect | sed -n 's/.*-F \\([^ ]*\\).*/\\1/p')\n\
             COMP_WORDS=({})\nCOMP_CWORD={cword}\n\"$f\" weight-inspect '{}' '{}'\n\
             printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            quoted.join(" "),
            words[cword],
            words[cword - 1]
        );
        let out = shell("bash", &["-c", &program]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        stdout(&out)
    };
    assert_contains(&complete(&["weight-inspect", "ch"]), &["check"]);
    assert_eq!(
        complete(&["weight-inspect", "check", "--format", ""]),
        "text\njson\ngithub\nsarif\n"
    );
    assert_eq!(complete(&["weight-inspect", "ci", "--sa"]), "--sarif\n");
    // The man page writer is an option of `completions`, not a command offered at the top.
    assert_eq!(complete(&["weight-inspect", "m"]).trim(), "");
    assert_contains(
        &complete(&["weight-inspect", "completions", ""]),
        &["bash", "zsh", "fish", "powershell"],
    );
}

#[test]
fn zsh_parses_its_script() {
    let (_dir, path) = written("_weight-inspect", &script("zsh"));
    let out = shell("zsh", &["-n", path.to_str().unwrap()]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
}

#[test]
fn fish_parses_and_completes() {
    let (_dir, path) = written("weight-inspect.fish", &script("fish"));
    let path = path.to_str().unwrap();
    let out = shell("fish", &["--no-execute", path]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let out = shell(
        "fish",
        &[
            "--no-config",
            "-c",
            &format!("source '{path}'; complete -C 'weight-inspect check --format '"),
        ],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_contains(
        &stdout(&out),
        &["text", "json", "github", "sarif\tSARIF 2.1.0"],
    );
}

/// No PowerShell runs here (Debian does not package it): the script is checked for the
/// registration and the commands it completes.
#[test]
fn powershell_registers_a_completer() {
    let text = script("powershell");
    assert_contains(
        &text,
        &[
            "Register-ArgumentCompleter -Native -CommandName 'weight-inspect'",
            "'weight-inspect;check'",
            "[CompletionResult]::new('--sarif'",
        ],
    );
}

#[test]
fn the_man_option_stays_out_of_the_help_and_the_top_level() {
    let out = run(&["--help"]);
    assert!(!stdout(&out).contains("--man"), "{}", stdout(&out));
    let out = run(&["completions", "--help"]);
    assert!(!stdout(&out).contains("--man"), "{}", stdout(&out));
    let out = run(&["completions", "bash", "--man", "x"]);
    assert_eq!(code(&out), 2, "a shell and --man conflict");
    let out = run(&["completions"]);
    assert_eq!(code(&out), 2, "a shell is required");
}

#[test]
fn an_unknown_shell_is_refused() {
    let out = run(&["completions", "tcsh"]);
    assert_eq!(code(&out), 2);
    assert_contains(&stderr(&out), &["invalid value 'tcsh'"]);
}

#[test]
fn man_pages_render_without_warnings() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(&["completions", "--man", dir.path().to_str().unwrap()]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let mut pages: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    pages.sort();
    for page in [
        "weight-inspect.1",
        "weight-inspect-check.1",
        "weight-inspect-ci.1",
        "weight-inspect-git-diff.1",
        "weight-inspect-delta-store.1",
        "weight-inspect-completions.1",
    ] {
        assert!(pages.iter().any(|p| p == page), "{page} in {pages:?}");
    }
    assert_eq!(stdout(&out).lines().count(), pages.len());
    for page in &pages {
        let path = dir.path().join(page);
        let out = shell(
            "groff",
            &["-man", "-ww", "-Tutf8", "-P-cbou", path.to_str().unwrap()],
        );
        assert_eq!(code(&out), 0, "{page}: {}", stderr(&out));
        assert!(stderr(&out).is_empty(), "{page}: {}", stderr(&out));
        assert!(stdout(&out).contains("NAME"), "{page}");
    }
    let check = shell(
        "groff",
        &[
            "-man",
            "-Tutf8",
            "-P-cbou",
            dir.path().join("weight-inspect-check.1").to_str().unwrap(),
        ],
    );
    assert_contains(
        &stdout(&check),
        &["weight-inspect-check", "--format", "sarif"],
    );
}
