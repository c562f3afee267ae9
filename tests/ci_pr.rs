//! `weight-inspect ci` end to end, in temporary repositories with real git and git-lfs: a
//! pull-request-like branch that modifies, adds, removes and renames models; the Markdown
//! summary, annotations parsed back, grouping beyond GitHub's limit, step outputs, the JSON
//! report, the 1 MiB summary limit, LFS objects that are not present locally.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::git::Repo;
use common::models::{gguf, make_model};
use common::{code, combined};
use serde_json::json;

const POLICY: &str = r#"[[rules]]
paths = ["models/**"]
allowed_dtypes = ["f32", "f16"]
"#;

/// main: models/a.gguf, models/old.gguf, models/move.safetensors (LFS for *.gguf) and the
/// policy; branch pr: a.gguf gets a q8_0 tensor, one more tensor and a new name (a violation),
/// `models/v2,rc:50%.gguf` is added (clean, with characters that need escaping), old.gguf
/// removed, move.safetensors renamed.
fn pr_repo() -> Repo {
    let repo = Repo::with_lfs(&["*.gguf"]);
    repo.write(".weight-inspect.toml", POLICY);
    repo.fixtures(json!({
        "models/a.gguf": gguf(&["f16", "f16"], json!({"general.name": "a"})),
        "models/old.gguf": gguf(&["f32"], json!({})),
        "models/move.safetensors": {"kind": "safetensors",
                                    "tensors": [{"name": "w", "dtype": "float32", "shape": [2, 2]}]},
    }));
    repo.git(&["add", "."]);
    repo.git(&["commit", "-q", "-m", "base"]);
    repo.git(&["checkout", "-q", "-b", "pr"]);
    repo.fixtures(json!({
        "models/a.gguf": gguf(&["q8_0", "f16", "f16"], json!({"general.name": "a2"})),
        "models/v2,rc:50%.gguf": gguf(&["f16"], json!({})),
    }));
    repo.git(&["rm", "-q", "models/old.gguf"]);
    repo.git(&["mv", "models/move.safetensors", "models/moved.safetensors"]);
    repo.git(&["add", "."]);
    repo.git(&["commit", "-q", "-m", "pr"]);
    repo
}

fn rev(repo: &Repo, rev: &str) -> String {
    repo.ok(&["rev-parse", rev]).trim().to_owned()
}

/// A parsed workflow command: `::command k=v,k=v::message`, unescaped as the runner does.
#[derive(Debug)]
struct Command {
    command: String,
    props: BTreeMap<String, String>,
    message: String,
}

fn unescape_data(s: &str) -> String {
    s.replace("%0D", "\r")
        .replace("%0A", "\n")
        .replace("%25", "%")
}

fn unescape_property(s: &str) -> String {
    s.replace("%0D", "\r")
        .replace("%0A", "\n")
        .replace("%3A", ":")
        .replace("%2C", ",")
        .replace("%25", "%")
}

/// Parses the workflow commands of a log. Property values must hold no raw `,` or `:` (the
/// split would break them): parsing them back is the check of their escaping.
fn commands(log: &str) -> Vec<Command> {
    log.lines()
        .filter_map(|line| line.strip_prefix("::"))
        .map(|rest| {
            let (head, message) = rest.split_once("::").expect("command ends with ::");
            let (command, props) = head.split_once(' ').unwrap_or((head, ""));
            let props = props
                .split(',')
                .filter(|p| !p.is_empty())
                .map(|p| {
                    let (k, v) = p.split_once('=').expect("property is k=v");
                    (k.to_owned(), unescape_property(v))
                })
                .collect();
            Command {
                command: command.to_owned(),
                props,
                message: unescape_data(message),
            }
        })
        .collect()
}

/// Runs `ci` with every output into `out` (summary.md, outputs.txt, report.json).
fn run_ci(repo: &Repo, out: &Path, extra: &[&str]) -> std::process::Output {
    let summary = out.join("summary.md");
    let outputs = out.join("outputs.txt");
    let json = out.join("report.json");
    let mut args = vec![
        "ci",
        "--summary",
        summary.to_str().unwrap(),
        "--outputs",
        outputs.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    repo.wi(&args)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

const EXPECTED_SUMMARY: &str = r"## weight-inspect: model changes

**4 model files changed** between `BASE` (`main`) and `HEAD` (`pr`).

Policy `.weight-inspect.toml`: **1 violation** in 1 of 3 files checked (1 brought by the change, 0 already at the base).

**This fails the job** (`fail-on: violation`).

| Status | File | Format | Structural hash (old → new) | Tensors +/−/~ | Metadata +/−/~ | Bytes | Size (old → new) |
| --- | --- | --- | --- | --- | --- | --- | --- |
| modified | `models/a.gguf` | gguf | `ba51f27b83d7` → `cf889b95ea66` | +1 −0 ~1 | +0 −0 ~1 | differ | 2.2 KiB → 2.8 KiB |
| renamed | `models/move.safetensors` → `models/moved.safetensors` | safetensors | `50b1b837fb2f` → `50b1b837fb2f` | +0 −0 ~0 | +0 −0 ~0 | identical | 88 B → 88 B |
| removed | `models/old.gguf` | gguf | `3fae55a215e3` → — | +0 −1 ~0 | +0 −1 ~0 | — | 2.1 KiB → — |
| added | `models/v2,rc:50%.gguf` | gguf | — → `f4c25edd1213` | +1 −0 ~0 | +1 −0 ~0 | — | — → 1.1 KiB |

### Policy violations

| File | Rule | Expected | Found | Policy |
| --- | --- | --- | --- | --- |
| `models/a.gguf` | `allowed_dtypes` | only f32, f16 | q8\_0 in 1 tensor (blk.0.weight) | `.weight-inspect.toml:1` |
";

#[test]
fn pull_request_report_end_to_end() {
    let repo = pr_repo();
    let out = tempfile::tempdir().unwrap();
    let run = run_ci(
        &repo,
        out.path(),
        &["--base", "main", "--head", "pr", "--annotations"],
    );
    let log = combined(&run);
    assert_eq!(code(&run), 1, "{log}");

    // The Markdown: the table and violations exactly, then one collapsible diff per file.
    let (base, head) = (rev(&repo, "main"), rev(&repo, "pr"));
    let summary = read(&out.path().join("summary.md"))
        .replace(&base[..12], "BASE")
        .replace(&head[..12], "HEAD");
    assert!(summary.starts_with(EXPECTED_SUMMARY), "{summary}");
    let details = &summary[EXPECTED_SUMMARY.len()..];
    assert!(details.starts_with("\n### Structural diffs\n"), "{details}");
    assert_eq!(details.matches("<details>").count(), 4, "{details}");
    assert_eq!(details.matches("</details>").count(), 4, "{details}");
    assert!(
        details.contains(
            "<summary><code>models/a.gguf</code>: modified, tensors +1 −0 ~1, metadata +0 −0 ~1</summary>\n\n```text\nStructural Identity:\n"
        ),
        "{details}"
    );
    for line in [
        "  ~ general.name: \"a\" -> \"a2\"",
        "  ~ blk.0.weight:\n      dtype: f16 -> q8_0",
        "  + blk.2.weight [256, 2] (f16)",
        "<summary><code>models/moved.safetensors</code>: renamed, tensors +0 −0 ~0, metadata +0 −0 ~0</summary>\n\n```text\nstructure identical (structural hash 50b1b837fb2f",
        "<summary><code>models/old.gguf</code>: removed, tensors +0 −1 ~0, metadata +0 −1 ~0</summary>\n\n```text\ndeleted file:\nformat: gguf\n",
        "<summary><code>models/v2,rc:50%.gguf</code>: added, tensors +1 −0 ~0, metadata +1 −0 ~0</summary>\n\n```text\nnew file:\nformat: gguf\n",
    ] {
        assert!(details.contains(line), "missing {line:?} in\n{details}");
    }

    // The annotation, parsed back.
    let stdout = common::stdout(&run);
    let cmds = commands(&stdout);
    assert_eq!(cmds.len(), 1, "{stdout}");
    assert_eq!(cmds[0].command, "error");
    assert_eq!(cmds[0].props["file"], "models/a.gguf");
    assert_eq!(cmds[0].props["title"], "weight-inspect: allowed_dtypes");
    assert_eq!(
        cmds[0].message,
        "expected only f32, f16; found q8_0 in 1 tensor (blk.0.weight) (.weight-inspect.toml:1)"
    );
    assert!(
        stdout.contains("\nweight-inspect: 4 model files changed between "),
        "{stdout}"
    );

    // Step outputs and the JSON report.
    let report_path = out.path().join("report.json");
    assert_eq!(
        read(&out.path().join("outputs.txt")),
        format!(
            "changed-files=4\nviolations=1\nnew-violations=1\npre-existing-violations=0\n\
             failed=true\nreport={}\n",
            report_path.display()
        )
    );
    let text = read(&report_path);
    assert!(text.starts_with("{\n  \"schema\": 1,"), "{text}");
    let report: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(report["base"]["commit"], base.as_str());
    assert_eq!(report["head"]["commit"], head.as_str());
    assert_eq!(report["changed_files"], 4);
    assert_eq!(report["violation_count"], 1);
    assert_eq!(report["failed"], true);
    let files = report["files"].as_array().unwrap();
    let statuses: Vec<&str> = files
        .iter()
        .map(|f| f["status"].as_str().unwrap())
        .collect();
    assert_eq!(
        statuses,
        ["modified", "renamed", "removed", "added"],
        "{text}"
    );
    assert_eq!(files[0]["old"]["kind"], "model");
    assert_eq!(files[0]["counts"]["tensors_added"], 1);
    assert_eq!(files[0]["diff"]["counts"]["tensors_changed"], 1);
    assert!(
        files[0]["old"]["lfs_oid"].is_string(),
        "LFS-tracked: {text}"
    );
    assert_eq!(files[1]["old_path"], "models/move.safetensors");
    assert_eq!(files[1]["new_path"], "models/moved.safetensors");
    assert_eq!(report["violations"][0]["rule"], "allowed_dtypes");
}

#[test]
fn annotations_escape_paths_and_group_beyond_ten() {
    let repo = Repo::new();
    repo.write(".weight-inspect.toml", POLICY);
    repo.fixtures(json!({"models/keep.gguf": gguf(&["f16"], json!({}))}));
    repo.git(&["add", "."]);
    repo.git(&["commit", "-q", "-m", "base"]);
    // 13 violating files, the first one with every character a property must escape.
    let mut spec = serde_json::Map::new();
    spec.insert("models/00,a:b%c.gguf".into(), gguf(&["q4_k"], json!({})));
    for i in 1..13 {
        spec.insert(format!("models/{i:02}.gguf"), gguf(&["q4_k"], json!({})));
    }
    repo.fixtures(serde_json::Value::Object(spec));
    repo.git(&["add", "."]);
    repo.git(&["commit", "-q", "-m", "pr"]);

    let out = tempfile::tempdir().unwrap();
    let run = run_ci(&repo, out.path(), &["--base", "HEAD^", "--annotations"]);
    let stdout = common::stdout(&run);
    assert_eq!(code(&run), 1, "{}", combined(&run));
    let cmds = commands(&stdout);
    assert_eq!(cmds.len(), 10, "GitHub shows 10 errors per step:\n{stdout}");
    assert!(cmds.iter().all(|c| c.command == "error"), "{stdout}");
    assert!(
        stdout.contains(
            "::error file=models/00%2Ca%3Ab%25c.gguf,title=weight-inspect%3A allowed_dtypes::"
        ),
        "{stdout}"
    );
    assert_eq!(cmds[0].props["file"], "models/00,a:b%c.gguf");
    for (i, c) in cmds[1..9].iter().enumerate() {
        assert_eq!(c.props["file"], format!("models/{:02}.gguf", i + 1));
    }
    let grouped = &cmds[9];
    assert!(!grouped.props.contains_key("file"), "{grouped:?}");
    assert_eq!(grouped.props["title"], "weight-inspect: 4 more errors");
    let lines: Vec<&str> = grouped.message.lines().collect();
    assert_eq!(
        lines[0], "GitHub shows 10 errors per step; the other 4:",
        "{grouped:?}"
    );
    assert_eq!(lines.len(), 5, "{grouped:?}");
    for (line, i) in lines[1..].iter().zip(9..13) {
        assert!(
            line.starts_with(&format!(
                "models/{i:02}.gguf: weight-inspect: allowed_dtypes: expected only f32, f16; found q4_k"
            )),
            "{line}"
        );
    }
    // The summary lists every violation.
    let summary = read(&out.path().join("summary.md"));
    assert_eq!(
        summary.matches("| `allowed_dtypes` |").count(),
        13,
        "{summary}"
    );
    assert!(
        summary.contains("| added | `models/00,a:b%c.gguf` |"),
        "{summary}"
    );
    assert!(read(&out.path().join("outputs.txt")).contains("violations=13\n"));

    // With --fail-on never the same findings are warnings and the run passes.
    let run = repo.wi(&[
        "ci",
        "--base",
        "HEAD^",
        "--annotations",
        "--fail-on",
        "never",
    ]);
    assert_eq!(code(&run), 0, "{}", combined(&run));
    let cmds = commands(&common::stdout(&run));
    assert_eq!(cmds.len(), 10);
    assert!(cmds.iter().all(|c| c.command == "warning"));
    assert_eq!(cmds[9].props["title"], "weight-inspect: 4 more warnings");
}

/// Writes a safetensors file with `n` one-element tensors with long names.
fn many_tensors(path: &Path, n: usize, prefix: &str) {
    let tensors: Vec<serde_json::Value> = (0..n)
        .map(|i| {
            json!({
                "name": format!("{prefix}.layers.{i:06}.self_attn.q_proj.lora_adapter.weight"),
                "dtype": "float32",
                "shape": [1],
            })
        })
        .collect();
    make_model(path, &json!({"kind": "safetensors", "tensors": tensors}));
}

#[test]
fn a_summary_over_one_mib_is_truncated() {
    const LIMIT: usize = 1024 * 1024;
    let repo = Repo::new();
    many_tensors(&repo.path("models/big.safetensors"), 1, "model");
    repo.git(&["add", "."]);
    repo.git(&["commit", "-q", "-m", "base"]);
    // 30,000 added tensors: about 2 MB of structural diff for big.safetensors alone.
    many_tensors(&repo.path("models/big.safetensors"), 30_000, "model");
    many_tensors(&repo.path("models/next.safetensors"), 3, "other");
    repo.git(&["add", "."]);
    repo.git(&["commit", "-q", "-m", "pr"]);

    let out = tempfile::tempdir().unwrap();
    // The step's summary file may already hold another tool's report.
    let earlier = format!("# Earlier step output\n\n{}\n", "x".repeat(100_000));
    std::fs::write(out.path().join("summary.md"), &earlier).unwrap();
    let run = run_ci(&repo, out.path(), &["--base", "HEAD^"]);
    assert_eq!(code(&run), 0, "{}", combined(&run));
    let whole = read(&out.path().join("summary.md"));
    assert!(whole.len() <= LIMIT, "{} bytes", whole.len());
    assert!(
        whole.len() > LIMIT - 8 * 1024,
        "uses the room: {} bytes",
        whole.len()
    );
    let summary = whole.strip_prefix(&earlier).expect("appended");
    // Both files are in the table; the first diff is cut at a line, the second left out.
    assert!(
        summary.contains("| modified | `models/big.safetensors` | safetensors |"),
        "{}",
        &summary[..2000]
    );
    assert!(summary.contains("| added | `models/next.safetensors` | safetensors |"));
    assert!(summary.contains("<summary><code>models/big.safetensors</code>: modified, tensors +29999 −0 ~0, metadata +0 −0 ~0</summary>"));
    assert!(!summary.contains("<summary><code>models/next.safetensors</code>"));
    let tail = &summary[summary.len() - 600..];
    assert!(
        tail.contains("+ model.layers.0")
            && tail.contains(
                "```\n\n_Truncated: GitHub accepts at most 1 MiB per step summary. The JSON report has the whole diff._\n\n</details>\n"
            )
            && tail.ends_with(
                "\n_The structural diffs of 1 more file are left out: GitHub accepts at most 1 MiB per step summary. The JSON report (step output `report`) has every diff; `weight-inspect diff BASE:path HEAD:path` prints one._\n"
            ),
        "{tail}"
    );
    // The grouped diff is open (the zero-padded layers as one run, as written), the list of
    // every change folded under it and cut.
    assert!(
        summary.contains(
            "\n  + model.layers.000001–029999 self_attn.q_proj.lora_adapter.weight (29999 tensors)\n"
        ),
        "{}",
        &summary[..4000]
    );
    assert_eq!(summary.matches("<details open>").count(), 1);
    assert_eq!(summary.matches("<details>").count(), 1);
    assert_eq!(summary.matches("</details>").count(), 2);
    // The cut falls between lines: the last diff line is whole.
    let code_end = summary.rfind("\n```\n").unwrap();
    let last_line = summary[..code_end].rsplit('\n').next().unwrap();
    assert!(
        last_line.ends_with(".self_attn.q_proj.lora_adapter.weight [1] (f32)"),
        "{last_line}"
    );
    // The JSON report is not limited.
    let report: serde_json::Value =
        serde_json::from_str(&read(&out.path().join("report.json"))).unwrap();
    let added = report["files"][0]["diff"]["tensors"]["added"]
        .as_object()
        .unwrap();
    assert_eq!(added.len(), 29_999);
}

#[test]
fn absent_lfs_objects_show_oid_and_size_changes() {
    let origin = pr_repo();
    // A clone that skipped LFS downloads: every pointer's object is absent.
    let clone = Repo::with_lfs(&[]);
    let mut cmd = clone.command("git");
    cmd.env("GIT_LFS_SKIP_SMUDGE", "1").args([
        "fetch",
        "-q",
        origin.dir.to_str().unwrap(),
        "main:refs/remotes/o/main",
        "pr:refs/remotes/o/pr",
    ]);
    let fetched = cmd.output().unwrap();
    assert!(fetched.status.success(), "{}", combined(&fetched));
    assert!(!clone.path(".git/lfs/objects").exists());

    let out = tempfile::tempdir().unwrap();
    let run = run_ci(
        &clone,
        out.path(),
        &["--base", "o/main", "--head", "o/pr", "--annotations"],
    );
    let stdout = common::stdout(&run);
    // allowed_dtypes needs the structure of a.gguf: the policy cannot judge it, which fails.
    assert_eq!(code(&run), 1, "{}", combined(&run));
    let summary = read(&out.path().join("summary.md"));
    let a_old = origin.lfs_oid("main", "models/a.gguf");
    let a_new = origin.lfs_oid("pr", "models/a.gguf");
    assert!(
        summary.contains(&format!(
            "| modified | `models/a.gguf` | ? | `lfs:{}` (not fetched) → `lfs:{}` (not fetched) | ? | ? | — | 2.2 KiB → 2.8 KiB |",
            &a_old[..8],
            &a_new[..8]
        )),
        "{summary}"
    );
    assert!(
        summary.contains(&format!(
            "LFS object: sha256:{a_old} (2272 bytes) -> sha256:{a_new} (2880 bytes)"
        )),
        "{summary}"
    );
    assert!(
        summary
            .contains("is not present locally; to compare structures, check out with `lfs: true`")
    );
    assert!(
        summary.contains("### Files the policy could not check"),
        "{summary}"
    );
    // Safetensors files are not in LFS here: their structure is still compared.
    assert!(summary.contains("| renamed | `models/move.safetensors` → `models/moved.safetensors` | safetensors | `50b1b837fb2f` → `50b1b837fb2f` |"));

    let cmds = commands(&stdout);
    let titles: Vec<(&str, &str, &str)> = cmds
        .iter()
        .map(|c| {
            (
                c.command.as_str(),
                c.props["title"].as_str(),
                c.props["file"].as_str(),
            )
        })
        .collect();
    assert_eq!(
        titles,
        [
            ("error", "weight-inspect: cannot check", "models/a.gguf"),
            (
                "error",
                "weight-inspect: cannot check",
                "models/v2,rc:50%.gguf"
            ),
            (
                "warning",
                "weight-inspect: structure not compared",
                "models/a.gguf"
            ),
            (
                "warning",
                "weight-inspect: structure not compared",
                "models/old.gguf"
            ),
            (
                "warning",
                "weight-inspect: structure not compared",
                "models/v2,rc:50%.gguf"
            ),
        ],
        "{stdout}"
    );
    assert!(
        cmds[2]
            .message
            .starts_with("the LFS object of the old and new sides is not present locally")
    );
    assert!(
        cmds[3]
            .message
            .starts_with("the LFS object of the old side is")
    );
}

#[test]
fn fail_on_modes_and_paths() {
    // No policy file: only --fail-on change fails, and only for files within PATHS.
    let repo = Repo::new();
    repo.fixtures(json!({
        "models/a.gguf": gguf(&["f16"], json!({})),
        "other/b.gguf": gguf(&["f16"], json!({})),
    }));
    repo.git(&["add", "."]);
    repo.git(&["commit", "-q", "-m", "base"]);
    repo.fixtures(json!({"other/b.gguf": gguf(&["f32"], json!({}))}));
    repo.git(&["commit", "-q", "-am", "change b"]);

    let run = repo.wi(&["ci", "--annotations"]);
    assert_eq!(code(&run), 0, "{}", combined(&run));
    let stdout = common::stdout(&run);
    assert!(
        stdout.starts_with("modified  other/b.gguf  gguf  "),
        "{stdout}"
    );
    assert!(stdout.contains("; no policy file\n"), "{stdout}");
    assert!(commands(&stdout).is_empty(), "{stdout}");

    let run = repo.wi(&["ci", "--annotations", "--fail-on", "change"]);
    assert_eq!(code(&run), 1, "{}", combined(&run));
    let cmds = commands(&common::stdout(&run));
    assert_eq!(cmds.len(), 1);
    assert_eq!(cmds[0].props["title"], "weight-inspect: model modified");
    assert_eq!(cmds[0].props["file"], "other/b.gguf");
    assert!(cmds[0].message.contains("tensors +0 −0 ~1"), "{cmds:?}");

    let run = repo.wi(&["ci", "--fail-on", "change", "--", "models"]);
    assert_eq!(code(&run), 0, "{}", combined(&run));
    assert!(common::stdout(&run).starts_with("weight-inspect: 0 model files changed"));

    // Nothing changed: a short summary.
    let run = repo.wi(&["ci", "--base", "HEAD", "--summary", "-"]);
    assert_eq!(code(&run), 0);
    assert!(common::stdout(&run).contains("No GGUF, safetensors or PyTorch file changed between "));

    // A revision that is not there: an error naming it, with the shallow-clone hint.
    let run = repo.wi(&["ci", "--base", "0123456789abcdef0123456789abcdef01234567"]);
    assert_eq!(code(&run), 2);
    assert!(
        common::stderr(&run).contains(
            "fetch it first (`git fetch --depth=1 origin 0123456789abcdef0123456789abcdef01234567`)"
        ),
        "{}",
        combined(&run)
    );
}

#[test]
fn the_policy_covers_other_files_and_its_own_changes() {
    let repo = Repo::new();
    repo.write(".weight-inspect.toml", POLICY);
    repo.git(&["add", "."]);
    repo.git(&["commit", "-q", "-m", "base"]);
    // The pull request adds a pickle and relaxes nothing but touches the policy.
    repo.write(
        ".weight-inspect.toml",
        format!("{POLICY}\n[[rules]]\npaths = [\"**/*.bin\"]\nforbid_formats = [\"pickle\"]\n"),
    );
    repo.fixtures(json!({"weights/evil.bin": {"kind": "os_system"}}));
    repo.git(&["add", "."]);
    repo.git(&["commit", "-q", "-m", "pr"]);

    let run = repo.wi(&["ci", "--annotations"]);
    assert_eq!(code(&run), 1, "{}", combined(&run));
    let cmds = commands(&common::stdout(&run));
    assert_eq!(cmds.len(), 3, "{}", combined(&run));
    assert_eq!(cmds[0].command, "error");
    assert_eq!(cmds[0].props["file"], "weights/evil.bin");
    assert_eq!(cmds[0].props["title"], "weight-inspect: forbid_formats");
    assert!(cmds[0].message.contains("os.system"), "{cmds:?}");
    // Its global is dangerous (pickle_globals, on by default): the annotation names the tier.
    assert_eq!(cmds[1].command, "error");
    assert_eq!(cmds[1].props["title"], "weight-inspect: pickle_globals");
    assert!(cmds[1].message.contains("dangerous: os.system"), "{cmds:?}");
    assert_eq!(cmds[2].command, "warning");
    assert_eq!(cmds[2].props["file"], ".weight-inspect.toml");
    assert_eq!(cmds[2].props["title"], "weight-inspect: policy changed");

    let run = repo.wi(&["ci", "--summary", "-"]);
    let summary = common::stdout(&run);
    // The pickle is a plain pickle, read as one: an added model whose global is a dangerous
    // finding.
    assert!(
        summary.contains("| added | `weights/evil.bin` | pytorch | — → `bb0cdd1dd055` |"),
        "{summary}"
    );
    assert!(
        summary.contains("dangerous: os.system at offset 2, REDUCE"),
        "{summary}"
    );
    assert!(
        summary.contains("**2 violations** in 1 of 1 file checked"),
        "{summary}"
    );
    assert!(
        summary.contains("| `weights/evil.bin` | `forbid_formats` |"),
        "{summary}"
    );
    assert!(
        summary.contains(
            "> [!WARNING]\n> This change modifies the policy file `.weight-inspect.toml` itself"
        ),
        "{summary}"
    );
}

/// A GGUF with `quantized` q4_k tensors and one f16 tensor whose values come from `seed`: a
/// new seed re-trains the weights and keeps the structure.
fn half_quantized(quantized: usize, seed: u32) -> serde_json::Value {
    let mut tensors: Vec<serde_json::Value> = (0..quantized)
        .map(|i| json!({"name": format!("blk.{i}.q"), "dtype": "q4_k", "shape": [2, 256]}))
        .collect();
    tensors.push(
        json!({"name": "out.weight", "dtype": "f16", "shape": [2, 256],
                        "fill": {"normal": seed}}),
    );
    json!({"kind": "gguf", "metadata": {}, "tensors": tensors})
}

/// Validates a SARIF log against the official 2.1.0 schema (as tests/sarif.rs does).
fn assert_valid_sarif(sarif: &str) {
    let schema = common::repo_root().join("tests/fixtures/sarif/sarif-schema-2.1.0.json");
    let script = r#"
import json, sys
import jsonschema
schema = json.load(open(sys.argv[1]))
errors = list(jsonschema.Draft7Validator(schema).iter_errors(json.load(open(sys.argv[2]))))
for e in errors:
    print("/".join(map(str, e.absolute_path)), e.message)
sys.exit(1 if errors else 0)
"#;
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), sarif).unwrap();
    let out = std::process::Command::new(common::python())
        .args(["-c", script])
        .arg(&schema)
        .arg(file.path())
        .output()
        .unwrap();
    common::assert_success("SARIF schema validation", &out);
}

/// Every output of one run: exit code, stdout (with annotations), summary, outputs, JSON, SARIF.
struct Run {
    code: i32,
    log: String,
    summary: String,
    outputs: String,
    json: serde_json::Value,
    sarif: serde_json::Value,
}

fn ci_run(repo: &Repo, fail_on: &str) -> Run {
    let out = tempfile::tempdir().unwrap();
    let sarif = out.path().join("report.sarif");
    let run = run_ci(
        repo,
        out.path(),
        &[
            "--base",
            "main",
            "--annotations",
            "--fail-on",
            fail_on,
            "--sarif",
            sarif.to_str().unwrap(),
        ],
    );
    let sarif_text = read(&sarif);
    assert_valid_sarif(&sarif_text);
    Run {
        code: code(&run),
        log: combined(&run),
        summary: read(&out.path().join("summary.md")),
        outputs: read(&out.path().join("outputs.txt")),
        json: serde_json::from_str(&read(&out.path().join("report.json"))).unwrap(),
        sarif: serde_json::from_str(&sarif_text).unwrap(),
    }
}

/// main has models/old.gguf violating the policy; a branch from main, for `ci --base main`.
fn repo_with_old_violation() -> Repo {
    let repo = Repo::with_lfs(&["*.gguf"]);
    repo.write(".weight-inspect.toml", POLICY);
    repo.fixtures(json!({
        "models/old.gguf": half_quantized(1, 1),
        "models/keep.gguf": half_quantized(1, 3),
    }));
    repo.write("README.md", "models\n");
    repo.commit_all("base");
    repo.git(&["checkout", "-q", "-b", "pr"]);
    repo
}

#[test]
fn a_pull_request_that_keeps_an_old_violation_passes() {
    let repo = repo_with_old_violation();
    // Re-trained weights, same structure: the violation is the base's.
    repo.fixtures(json!({"models/old.gguf": half_quantized(1, 2)}));
    repo.write("README.md", "models, re-trained\n");
    repo.commit_all("re-train");

    let run = ci_run(&repo, "violation");
    assert_eq!(run.code, 0, "{}", run.log);
    let line = "models/old.gguf: allowed_dtypes: expected only f32, f16; found q4_k in 1 tensor";
    assert!(
        run.log
            .contains("(0 brought by the change, 1 already at the base)"),
        "{}",
        run.log
    );
    let cmds = commands(&run.log);
    assert_eq!(cmds.len(), 1, "{cmds:?}");
    assert_eq!(cmds[0].command, "warning");
    assert_eq!(cmds[0].props["file"], "models/old.gguf");
    assert!(cmds[0].message.contains("already at the base"), "{cmds:?}");
    assert!(!run.log.contains("fails with"), "{}", run.log);
    // The summary lists it in its own section, and does not fail the job.
    assert!(
        run.summary
            .contains("### Policy violations already at the base"),
        "{}",
        run.summary
    );
    assert!(
        !run.summary.contains("### Policy violations\n"),
        "{}",
        run.summary
    );
    assert!(
        !run.summary.contains("This fails the job"),
        "{}",
        run.summary
    );
    // JSON and step outputs.
    assert_eq!(run.json["failed"], false);
    assert_eq!(run.json["violation_count"], 1);
    assert_eq!(run.json["new_violation_count"], 0);
    assert_eq!(run.json["pre_existing_violation_count"], 1);
    assert_eq!(run.json["violations"][0]["baseline"], "unchanged");
    assert_eq!(run.json["violations"][0]["path"], "models/old.gguf");
    for output in [
        "violations=1",
        "new-violations=0",
        "pre-existing-violations=1",
        "failed=false",
    ] {
        assert!(
            run.outputs.lines().any(|l| l == output),
            "{output}: {}",
            run.outputs
        );
    }
    // SARIF: an unchanged warning.
    let result = &run.sarif["runs"][0]["results"][0];
    assert_eq!(result["baselineState"], "unchanged");
    assert_eq!(result["level"], "warning");

    // `violation-any` keeps the old behaviour: every violation fails.
    let run = ci_run(&repo, "violation-any");
    assert_eq!(run.code, 1, "{}", run.log);
    let cmds = commands(&run.log);
    assert_eq!(cmds[0].command, "error", "{cmds:?}");
    assert!(cmds[0].message.starts_with(&line[33..]), "{cmds:?}");
    assert_eq!(run.json["failed"], true);
    assert_eq!(run.json["fail_on"], "violation-any");
    assert!(
        run.outputs.lines().any(|l| l == "failed=true"),
        "{}",
        run.outputs
    );
    assert_eq!(run.sarif["runs"][0]["results"][0]["level"], "error");
    assert!(
        run.summary.contains("This fails the job"),
        "{}",
        run.summary
    );
}

#[test]
fn a_pull_request_that_adds_or_worsens_a_violation_fails() {
    let repo = repo_with_old_violation();
    // The old file with one more q4_k tensor (worse); a new violating file; and an old
    // violation renamed as it was (the rename's source had it: unchanged).
    repo.fixtures(json!({
        "models/old.gguf": half_quantized(2, 1),
        "models/new.gguf": gguf(&["q8_0"], json!({})),
    }));
    repo.git(&["mv", "models/keep.gguf", "models/kept.gguf"]);
    repo.commit_all("worse and new");

    let run = ci_run(&repo, "violation");
    assert_eq!(run.code, 1, "{}", run.log);
    assert!(
        run.log
            .contains("(2 brought by the change, 1 already at the base)"),
        "{}",
        run.log
    );
    let cmds = commands(&run.log);
    let level_of = |file: &str| {
        cmds.iter()
            .find(|c| c.props["file"] == file)
            .map_or_else(|| panic!("{file}: {cmds:?}"), |c| c.command.clone())
    };
    assert_eq!(level_of("models/old.gguf"), "error");
    assert_eq!(level_of("models/new.gguf"), "error");
    assert_eq!(level_of("models/kept.gguf"), "warning");
    assert!(
        run.log
            .contains("found q4_k in 2 tensors (blk.0.q, blk.1.q)"),
        "{}",
        run.log
    );
    assert!(
        run.log.contains("worse than at the base")
            && run.log.contains("which found q4_k in 1 tensor"),
        "{}",
        run.log
    );
    let by_path = |path: &str| {
        run.json["violations"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["path"] == path)
            .unwrap_or_else(|| panic!("{path}: {}", run.json))
            .clone()
    };
    let worse = by_path("models/old.gguf");
    assert_eq!(worse["baseline"], "worse");
    assert!(
        worse["base_found"]
            .as_str()
            .unwrap()
            .starts_with("q4_k in 1 tensor"),
        "{worse}"
    );
    assert_eq!(by_path("models/new.gguf")["baseline"], "new");
    assert_eq!(by_path("models/kept.gguf")["baseline"], "unchanged");
    assert_eq!(run.json["new_violation_count"], 2);
    assert_eq!(run.json["failed"], true);
    for output in [
        "new-violations=2",
        "pre-existing-violations=1",
        "failed=true",
    ] {
        assert!(
            run.outputs.lines().any(|l| l == output),
            "{output}: {}",
            run.outputs
        );
    }
    let states: Vec<(String, String)> = run.sarif["runs"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["properties"]["path"].as_str().unwrap().to_owned(),
                format!(
                    "{} {}",
                    r["baselineState"].as_str().unwrap(),
                    r["level"].as_str().unwrap()
                ),
            )
        })
        .collect();
    assert!(
        states.contains(&("models/new.gguf".into(), "new error".into())),
        "{states:?}"
    );
    assert!(
        states.contains(&("models/old.gguf".into(), "updated error".into())),
        "{states:?}"
    );
    assert!(
        states.contains(&("models/kept.gguf".into(), "unchanged warning".into())),
        "{states:?}"
    );
    assert!(
        run.summary
            .contains("(worse: the base found q4\\_k in 1 tensor"),
        "{}",
        run.summary
    );
}

#[test]
fn an_expected_hash_violation_names_what_differs_from_the_base() {
    let repo = Repo::new();
    repo.fixtures(json!({"models/base.gguf": gguf(&["f16"], json!({}))}));
    let out = repo.wi(&["policy", "pin", "models/base.gguf"]);
    assert_eq!(code(&out), 0, "{}", combined(&out));
    repo.commit_all("pinned");
    let base = rev(&repo, "HEAD");
    repo.git(&["checkout", "-q", "-b", "pr"]);
    repo.fixtures(json!({"models/base.gguf": gguf(&["f16", "f16"], json!({}))}));
    repo.commit_all("one more tensor");

    let out = tempfile::tempdir().unwrap();
    let run = run_ci(&repo, out.path(), &["--base", "main"]);
    assert_eq!(code(&run), 1, "{}", combined(&run));
    let explanation = format!(
        "the pinned file is {base}:models/base.gguf: tensors +1 −0 ~0, metadata +0 −0 ~0: \
         +blk.1.weight f16 [256, 2]"
    );
    assert!(
        combined(&run).contains(&format!("\n  {explanation}\n")),
        "{}",
        combined(&run)
    );
    let json: serde_json::Value =
        serde_json::from_str(&read(&out.path().join("report.json"))).unwrap();
    assert_eq!(json["violations"][0]["rule"], "expected_hash");
    assert_eq!(json["violations"][0]["explanation"], explanation.as_str());
    assert_eq!(json["violations"][0]["baseline"], "new");
    let summary = read(&out.path().join("summary.md"));
    assert!(summary.contains(" — the pinned file is "), "{summary}");
}

/// A sharded safetensors model in f16 whose second tensor holds `seed`'s values.
fn sharded_f16(seed: u32) -> serde_json::Value {
    json!({
        "kind": "sharded_safetensors",
        "max_shard_size": 600,
        "tensors": [
            {"name": "a.weight", "dtype": "float16", "shape": [16, 16], "fill": "arange"},
            {"name": "b.weight", "dtype": "float16", "shape": [16, 16], "fill": {"normal": seed}},
        ],
    })
}

#[test]
fn a_multi_file_model_keeps_its_old_violation_across_a_retrained_shard() {
    let repo = Repo::new();
    repo.write(
        ".weight-inspect.toml",
        "[[rules]]\npaths = [\"models/llm\"]\nallowed_dtypes = [\"f32\"]\n",
    );
    repo.fixtures(json!({"models/llm": sharded_f16(1)}));
    repo.commit_all("base");
    repo.git(&["checkout", "-q", "-b", "pr"]);
    repo.fixtures(json!({"models/llm": sharded_f16(2)}));
    repo.commit_all("re-trained");

    let out = tempfile::tempdir().unwrap();
    let run = run_ci(&repo, out.path(), &["--base", "main"]);
    assert_eq!(code(&run), 0, "{}", combined(&run));
    let json: serde_json::Value =
        serde_json::from_str(&read(&out.path().join("report.json"))).unwrap();
    assert_eq!(json["violations"][0]["path"], "models/llm", "{json}");
    assert_eq!(json["violations"][0]["baseline"], "unchanged", "{json}");

    // One more f16 tensor in the model: the same rule, a larger finding.
    std::fs::remove_dir_all(repo.path("models/llm")).unwrap();
    repo.fixtures(json!({"models/llm": {
        "kind": "sharded_safetensors",
        "max_shard_size": 600,
        "tensors": [
            {"name": "a.weight", "dtype": "float16", "shape": [16, 16], "fill": "arange"},
            {"name": "b.weight", "dtype": "float16", "shape": [16, 16], "fill": {"normal": 2}},
            {"name": "c.weight", "dtype": "float16", "shape": [16, 16]},
        ],
    }}));
    repo.commit_all("one more tensor");
    let run = run_ci(&repo, out.path(), &["--base", "main"]);
    assert_eq!(code(&run), 1, "{}", combined(&run));
    let json: serde_json::Value =
        serde_json::from_str(&read(&out.path().join("report.json"))).unwrap();
    assert_eq!(json["violations"][0]["baseline"], "worse", "{json}");
}

/// A model signed with the policy's key on main, three pull requests: one changes a weight
/// without re-signing (the signature is broken by that file, new, annotated there), one
/// deletes a signed file without re-signing (listed by model.sig but deleted), one changes
/// the weight and re-signs (valid, clean). The Model signatures section says each.
#[test]
fn signatures_are_reported_per_model_and_judged_against_the_base() {
    use common::signing::{key_pair, p};
    let repo = Repo::with_lfs(&["*.safetensors"]);
    let (key, public) = key_pair(repo.tmp.path(), "publisher", "prime256v1");
    std::fs::create_dir_all(repo.path("keys")).unwrap();
    std::fs::copy(&public, repo.path("keys/publisher.pem")).unwrap();
    repo.write(
        ".weight-inspect.toml",
        "[[rules]]\npaths = [\"model/**\"]\nsignature = { public_key = \"keys/publisher.pem\" }\n",
    );
    let weights = |fill: f64| {
        json!({"model/model.safetensors": {"kind": "safetensors",
            "tensors": [{"name": "w", "dtype": "float32", "shape": [8, 8], "fill": fill}]}})
    };
    repo.fixtures(weights(1.0));
    repo.write("model/config.json", "{\"hidden_size\": 8}\n");
    let signed = repo.wi(&["sign", "model", "--private-key", p(&key)]);
    assert_eq!(code(&signed), 0, "{}", combined(&signed));
    repo.commit_all("a signed model");
    repo.git(&["branch", "-q", "-M", "main"]);

    let section = |summary: &str| -> String {
        let start = summary
            .find("### Model signatures")
            .unwrap_or_else(|| panic!("no signature section:\n{summary}"));
        let rest = &summary[start..];
        let end = rest[3..].find("\n### ").map_or(rest.len(), |i| i + 3);
        rest[..end].to_owned()
    };
    let mut runs = 0;

    // A weight changed, not re-signed.
    repo.git(&["checkout", "-q", "-b", "broken", "main"]);
    repo.fixtures(weights(2.0));
    repo.commit_all("a weight changed, not re-signed");
    let out = tempfile::tempdir().unwrap();
    let run = run_ci(&repo, out.path(), &["--base", "main", "--annotations"]);
    runs += 1;
    assert_eq!(code(&run), 1, "{}", combined(&run));
    let summary = read(&out.path().join("summary.md"));
    let signatures = section(&summary);
    assert!(
        signatures.contains("| `model/model.sig` | key ")
            && signatures.contains(
                "(ECDSA P-256) | **broken by this change**: `model/model.safetensors`: changed since model/model.sig was signed"
            ),
        "{signatures}"
    );
    assert!(
        summary.contains("**1 violation** in 1 of 1 file checked (1 brought by the change, 0 already at the base)")
            || summary.contains("(1 brought by the change, 0 already at the base)"),
        "{summary}"
    );
    let log = String::from_utf8_lossy(&run.stdout).into_owned();
    assert!(
        log.contains("::error file=model/model.safetensors,"),
        "no annotation on the file that broke it:\n{log}"
    );

    // A signed file deleted, not re-signed.
    repo.git(&["checkout", "-q", "-b", "deleted", "main"]);
    repo.git(&["rm", "-q", "model/config.json"]);
    repo.git(&["commit", "-q", "-m", "a signed file deleted, not re-signed"]);
    let out = tempfile::tempdir().unwrap();
    let run = run_ci(&repo, out.path(), &["--base", "main"]);
    runs += 1;
    assert_eq!(code(&run), 1, "{}", combined(&run));
    let summary = read(&out.path().join("summary.md"));
    let signatures = section(&summary);
    assert!(
        signatures.contains(
            "**broken by this change**: `model/model.sig`: model/config.json listed by model.sig but deleted (signed by key "
        ),
        "{signatures}"
    );
    assert!(
        summary.contains("(1 brought by the change, 0 already at the base)"),
        "{summary}"
    );

    // The weight changed and re-signed: valid, clean.
    repo.git(&["checkout", "-q", "-b", "resigned", "main"]);
    repo.fixtures(weights(2.0));
    let signed = repo.wi(&["sign", "model", "--private-key", p(&key)]);
    assert_eq!(code(&signed), 0, "{}", combined(&signed));
    repo.commit_all("a weight changed and re-signed");
    let out = tempfile::tempdir().unwrap();
    let run = run_ci(&repo, out.path(), &["--base", "main"]);
    runs += 1;
    assert_eq!(code(&run), 0, "{}", combined(&run));
    let summary = read(&out.path().join("summary.md"));
    let signatures = section(&summary);
    assert!(
        signatures.contains("(ECDSA P-256) | valid: 2 judged files unchanged since signed |"),
        "{signatures}"
    );
    assert!(summary.contains("no violations"), "{summary}");
    let report: serde_json::Value =
        serde_json::from_str(&read(&out.path().join("report.json"))).unwrap();
    assert_eq!(report["schema"], 1);
    let signatures = &report["signatures"];
    assert_eq!(signatures[0]["path"], "model/model.sig", "{signatures}");
    assert!(
        signatures[0]["signer"]
            .as_str()
            .unwrap()
            .ends_with("(ECDSA P-256)"),
        "{signatures}"
    );
    assert_eq!(
        signatures[0]["files"],
        json!(["model/model.safetensors", "model/model.sig"])
    );
    assert_eq!(runs, 3);
}
