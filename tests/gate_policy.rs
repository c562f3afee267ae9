//! The gate judges every pickle a rule matches: a catch-all rule with no key fails a
//! checkpoint whose pickle reaches `os.system` (issue 44), in `check`, the native hook, `ci`
//! and its SARIF. The hostile files are written by tests/common/gate_cases.py.

mod common;

use std::path::Path;

use common::git::Repo;
use common::{code, combined, stdout};

/// Writes `cases` of gate_cases.py into `dir`.
fn write_cases(dir: &Path, cases: &[&str]) {
    let script = common::repo_root().join("tests/common/gate_cases.py");
    let mut args = vec![dir.to_str().unwrap()];
    args.extend_from_slice(cases);
    let out = std::process::Command::new(common::python())
        .arg(script)
        .args(&args)
        .output()
        .expect("python runs");
    common::assert_success("gate_cases.py", &out);
}

fn dir_with(policy: &str, cases: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(".weight-inspect.toml"), policy).unwrap();
    write_cases(dir.path(), cases);
    dir
}

const CATCH_ALL: &str = "[[rules]]\npaths = [\"**\"]\n";

fn line_of<'t>(text: &'t str, file: &str) -> Option<&'t str> {
    text.lines().find(|l| l.starts_with(&format!("{file}: ")))
}

#[test]
fn a_rule_without_keys_fails_a_dangerous_pickle() {
    let dir = dir_with(
        CATCH_ALL,
        &["evil.pt", "benign.pt", "global:zipimport:zipimporter"],
    );
    // The same payload under a name no scanner would look at: the bytes decide.
    std::fs::copy(dir.path().join("evil.pt"), dir.path().join("weights.data")).unwrap();
    std::fs::write(dir.path().join("notes.txt"), "not a model\n").unwrap();
    let out = common::run_in(Some(dir.path()), &["check", "."]);
    let text = stdout(&out);
    assert_eq!(code(&out), 1, "{}", combined(&out));
    for file in ["evil.pt", "weights.data"] {
        let line = line_of(&text, file).unwrap_or_else(|| panic!("no line for {file}:\n{text}"));
        assert_eq!(
            line,
            format!(
                "{file}: pickle_globals: expected no pickle global of the tiers dangerous or in \
                 forbid_globals (allow_globals lets one through); found dangerous: posix.system \
                 [.weight-inspect.toml:1]"
            ),
        );
    }
    let zipimport = line_of(&text, "zipimport.zipimporter.pt").expect(&text);
    assert!(
        zipimport.contains("found dangerous: zipimport.zipimporter"),
        "{zipimport}"
    );
    assert!(line_of(&text, "benign.pt").is_none(), "{text}");
    assert!(line_of(&text, "notes.txt").is_none(), "{text}");
}

#[test]
fn allow_globals_lets_one_through_and_forbid_tiers_tightens() {
    let dir = dir_with(
        "[[rules]]\npaths = [\"**\"]\n\n[[rules]]\npaths = [\"ok/**\"]\nallow_globals = [\"posix.system\"]\n",
        &[],
    );
    write_cases(&dir.path().join("ok"), &["evil.pt"]);
    write_cases(&dir.path().join("bad"), &["evil.pt"]);
    let out = common::run_in(Some(dir.path()), &["check", "."]);
    let text = stdout(&out);
    assert_eq!(code(&out), 1, "{}", combined(&out));
    assert!(line_of(&text, "bad/evil.pt").is_some(), "{text}");
    assert!(line_of(&text, "ok/evil.pt").is_none(), "{text}");

    // forbid_tiers adds the unknown tier: a library's class fails, a benign type does not.
    let dir = dir_with(
        "[[rules]]\npaths = [\"**\"]\nforbid_tiers = [\"dangerous\", \"unknown\"]\n",
        &["global:mypkg.models:Net", "global:argparse:Namespace"],
    );
    let out = common::run_in(Some(dir.path()), &["check", "."]);
    let text = stdout(&out);
    assert_eq!(code(&out), 1, "{}", combined(&out));
    let net = line_of(&text, "mypkg.models.Net.pt").expect(&text);
    assert!(net.contains("found unknown: mypkg.models.Net"), "{net}");
    assert!(line_of(&text, "argparse.Namespace.pt").is_none(), "{text}");
}

#[test]
fn the_hook_ci_and_sarif_follow_check() {
    let repo = Repo::new();
    repo.write(".weight-inspect.toml", CATCH_ALL);
    write_cases(&repo.path("models"), &["benign.pt"]);
    repo.commit_all("a clean checkpoint");
    let out = repo.wi(&["hook", "install"]);
    common::assert_success("hook install", &out);

    write_cases(&repo.path("models"), &["evil.pt"]);
    repo.git(&["add", "models/evil.pt"]);
    let commit = repo.try_git(&["commit", "-q", "-m", "evil"]);
    let text = combined(&commit);
    assert!(!commit.status.success(), "the hook let it in:\n{text}");
    assert!(
        text.contains("models/evil.pt: pickle_globals:")
            && text.contains("dangerous: posix.system"),
        "{text}"
    );
    repo.git(&["commit", "-q", "--no-verify", "-m", "evil"]);

    let sarif_path = repo.path("out/report.sarif");
    let out = repo.wi(&[
        "ci",
        "--base",
        "HEAD^",
        "--sarif",
        sarif_path.to_str().unwrap(),
    ]);
    let text = combined(&out);
    assert_eq!(code(&out), 1, "{text}");
    assert!(text.contains("models/evil.pt"), "{text}");
    let sarif: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&sarif_path).unwrap()).unwrap();
    let results = sarif["runs"][0]["results"].as_array().unwrap();
    let result = results
        .iter()
        .find(|r| r["ruleId"] == "pickle_globals")
        .unwrap_or_else(|| panic!("no pickle_globals result: {sarif:#}"));
    assert_eq!(
        result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
        "models/evil.pt"
    );
    assert!(
        result["message"]["text"]
            .as_str()
            .unwrap()
            .contains("found dangerous: posix.system"),
        "{result:#}"
    );
    assert_eq!(
        result["properties"]["pickleTier"], "dangerous",
        "{result:#}"
    );
    // The clean checkpoint of the base is no result.
    assert!(
        results.iter().all(|r| !r.to_string().contains("benign.pt")),
        "{sarif:#}"
    );
}
