//! The GitHub Action's shell, run locally in a simulated runner environment: the install
//! script (given binary, cache, PATH, prebuilt download from a file:// URL, the `cargo
//! install` fallback checked as a dry run), the base-commit fetch in shallow clones (a local
//! "remote" over file://), and the whole action.yml run step by step by
//! tests/action_support/run_action.py. No network: only file:// URLs and local paths.

mod common;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::git::{Repo, git_command};
use common::models::gguf;
use serde_json::{Value, json};

const VERSION: &str = env!("CARGO_PKG_VERSION");

fn script(name: &str) -> PathBuf {
    common::repo_root().join("scripts/action").join(name)
}

/// PATH without any directory holding a `weight-inspect` (so that only the tests put one
/// there).
fn clean_path() -> OsString {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs: Vec<PathBuf> = std::env::split_paths(&path)
        .filter(|d| !d.join("weight-inspect").exists())
        .collect();
    std::env::join_paths(dirs).unwrap()
}

fn text(out: &Output) -> String {
    format!("{}{}", common::stdout(out), common::stderr(out))
}

/// A simulated runner: a clean environment with its own HOME, temp dirs and output files.
struct Runner {
    tmp: tempfile::TempDir,
}

impl Runner {
    fn new() -> Runner {
        common::require_tool("git");
        common::require_tool("curl");
        let runner = Runner {
            tmp: tempfile::tempdir().unwrap(),
        };
        for dir in ["home", "temp", "tools"] {
            std::fs::create_dir_all(runner.tmp.path().join(dir)).unwrap();
        }
        runner
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.tmp.path().join(rel)
    }

    fn command(&self, program: impl AsRef<std::ffi::OsStr>, dir: &Path) -> Command {
        let mut cmd = Command::new(program);
        cmd.current_dir(dir)
            .env_clear()
            .env("PATH", clean_path())
            .env("HOME", self.path("home"))
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@t")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@t")
            .env("RUNNER_TEMP", self.path("temp"))
            .env("RUNNER_TOOL_CACHE", self.path("tools"))
            .env("GITHUB_OUTPUT", self.path("output"))
            .env("GITHUB_PATH", self.path("path"));
        cmd
    }

    /// Runs an action script with the simulated environment plus `env`.
    fn script(&self, name: &str, dir: &Path, env: &[(&str, &str)]) -> Output {
        let _ = std::fs::remove_file(self.path("output"));
        let _ = std::fs::remove_file(self.path("path"));
        let mut cmd = self.command(script(name), dir);
        cmd.env("GITHUB_ACTION_PATH", common::repo_root());
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().expect("script runs")
    }

    fn outputs(&self) -> String {
        std::fs::read_to_string(self.path("output")).unwrap_or_default()
    }

    /// Runs git in `dir` with the tests' isolated environment and the runner's HOME.
    fn git(&self, dir: &Path, args: &[&str]) -> String {
        let out = git_command(&self.path("home"), dir, args).output().unwrap();
        assert!(out.status.success(), "git {args:?}: {}", text(&out));
        common::stdout(&out).trim().to_owned()
    }
}

// ---------------------------------------------------------------- install.sh

/// A release asset packed as the release workflow does. Its `weight-inspect` is a small
/// wrapper around the test binary (the debug binary is too large to compress in a test).
fn make_asset(runner: &Runner) -> PathBuf {
    let pkg = runner.path("pkg");
    std::fs::create_dir_all(&pkg).unwrap();
    let wrapper = pkg.join("weight-inspect");
    std::fs::write(
        &wrapper,
        format!("#!/bin/sh\nexec '{}' \"$@\"\n", common::bin().display()),
    )
    .unwrap();
    let mut perms = std::fs::metadata(&wrapper).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&wrapper, perms).unwrap();
    let asset = runner.path("release/weight-inspect-x86_64-unknown-linux-musl.tar.gz");
    std::fs::create_dir_all(asset.parent().unwrap()).unwrap();
    let tar = Command::new("tar")
        .arg("-C")
        .arg(&pkg)
        .arg("-czf")
        .arg(&asset)
        .arg("weight-inspect")
        .output()
        .unwrap();
    assert!(tar.status.success(), "{}", text(&tar));
    let sum = Command::new("sha256sum")
        .arg(asset.file_name().unwrap())
        .current_dir(asset.parent().unwrap())
        .output()
        .unwrap();
    assert!(sum.status.success());
    std::fs::write(asset.with_extension("gz.sha256"), &sum.stdout).unwrap();
    asset
}

fn file_url(path: &Path) -> String {
    format!("file://{}", path.display())
}

#[test]
fn install_uses_a_given_binary() {
    let runner = Runner::new();
    let bin = common::bin();
    let dir = runner.path("install");
    let out = runner.script(
        "install.sh",
        runner.tmp.path(),
        &[
            ("WEIGHT_INSPECT_BIN", bin.to_str().unwrap()),
            ("WEIGHT_INSPECT_INSTALL_DIR", dir.to_str().unwrap()),
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(common::stdout(&out), format!("{}\n", bin.display()));
    assert_eq!(
        runner.outputs(),
        format!("bin={}\nversion={VERSION}\nsource=given\n", bin.display())
    );
    // Later steps find it on PATH.
    assert_eq!(
        std::fs::read_to_string(runner.path("path")).unwrap(),
        format!("{}\n", bin.parent().unwrap().display())
    );
}

#[test]
fn install_finds_the_wanted_version_on_path() {
    let runner = Runner::new();
    let bin_dir = common::bin().parent().unwrap().to_path_buf();
    let mut cmd = runner.command(script("install.sh"), runner.tmp.path());
    let path = std::env::join_paths(
        std::iter::once(bin_dir.clone()).chain(std::env::split_paths(&clean_path())),
    )
    .unwrap();
    cmd.env("PATH", path)
        .env("GITHUB_ACTION_PATH", common::repo_root())
        .env("WEIGHT_INSPECT_INSTALL_DIR", runner.path("install"));
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        runner.outputs().ends_with("source=path\n"),
        "{}",
        runner.outputs()
    );

    // Another version on PATH is not taken: with no release URL, the build would follow.
    let mut cmd = runner.command(script("install.sh"), runner.tmp.path());
    cmd.env(
        "PATH",
        std::env::join_paths(std::iter::once(bin_dir).chain(std::env::split_paths(&clean_path())))
            .unwrap(),
    )
    .env("GITHUB_ACTION_PATH", common::repo_root())
    .env("WEIGHT_INSPECT_INSTALL_DIR", runner.path("install"))
    .env("WI_VERSION", "v0.0.1");
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        common::stderr(&out).contains(&format!(
            "no prebuilt binary of version 0.0.1, and the action's sources are version {VERSION}"
        )),
        "{}",
        text(&out)
    );
}

#[test]
fn install_downloads_the_prebuilt_binary_then_reuses_the_cache() {
    let runner = Runner::new();
    let asset = make_asset(&runner);
    let dir = runner.path("install");
    let url = file_url(&asset);
    let out = runner.script(
        "install.sh",
        runner.tmp.path(),
        &[
            ("WEIGHT_INSPECT_DOWNLOAD_URL", &url),
            ("WEIGHT_INSPECT_INSTALL_DIR", dir.to_str().unwrap()),
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let installed = dir.join("bin/weight-inspect");
    assert_eq!(common::stdout(&out), format!("{}\n", installed.display()));
    assert!(
        runner.outputs().ends_with("source=prebuilt\n"),
        "{}",
        runner.outputs()
    );
    let version = Command::new(&installed).arg("--version").output().unwrap();
    assert_eq!(
        common::stdout(&version),
        format!("weight-inspect {VERSION}\n")
    );

    // Restored from the cache: no download (the URL is gone now).
    let out = runner.script(
        "install.sh",
        runner.tmp.path(),
        &[
            (
                "WEIGHT_INSPECT_DOWNLOAD_URL",
                "file:///nonexistent/asset.tar.gz",
            ),
            ("WEIGHT_INSPECT_INSTALL_DIR", dir.to_str().unwrap()),
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        runner.outputs().ends_with("source=cache\n"),
        "{}",
        runner.outputs()
    );
}

#[test]
fn install_rejects_a_download_with_the_wrong_checksum() {
    let runner = Runner::new();
    let asset = make_asset(&runner);
    std::fs::write(
        asset.with_extension("gz.sha256"),
        format!("{}  x.tar.gz\n", "0".repeat(64)),
    )
    .unwrap();
    let out = runner.script(
        "install.sh",
        runner.tmp.path(),
        &[
            ("WEIGHT_INSPECT_DOWNLOAD_URL", &file_url(&asset)),
            (
                "WEIGHT_INSPECT_INSTALL_DIR",
                runner.path("install").to_str().unwrap(),
            ),
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        common::stderr(&out).contains("checksum mismatch for file://"),
        "{}",
        text(&out)
    );
    assert!(!runner.path("install/bin/weight-inspect").exists());
}

#[test]
fn install_falls_back_to_cargo_install() {
    let runner = Runner::new();
    let dir = runner.path("install");
    let expected = format!(
        "would run: cargo install --locked --path {} --root {}\n",
        common::repo_root().display(),
        dir.display()
    );
    // A release without the asset: the download fails, the sources are built.
    let out = runner.script(
        "install.sh",
        runner.tmp.path(),
        &[
            (
                "WEIGHT_INSPECT_DOWNLOAD_URL",
                "file:///nonexistent/weight-inspect.tar.gz",
            ),
            ("WEIGHT_INSPECT_INSTALL_DIR", dir.to_str().unwrap()),
            ("WEIGHT_INSPECT_INSTALL_DRY_RUN", "1"),
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(common::stdout(&out), expected);
    assert!(
        common::stderr(&out)
            .contains("no prebuilt binary at file:///nonexistent/weight-inspect.tar.gz"),
        "{}",
        text(&out)
    );
    // No repository to download from (the action used from a local path, `uses: ./`).
    let out = runner.script(
        "install.sh",
        runner.tmp.path(),
        &[
            ("WEIGHT_INSPECT_INSTALL_DIR", dir.to_str().unwrap()),
            ("WEIGHT_INSPECT_INSTALL_DRY_RUN", "1"),
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(common::stdout(&out), expected);
    assert_eq!(common::stderr(&out), "");
}

#[test]
fn install_plan_names_the_cache() {
    let runner = Runner::new();
    let out = Command::new(script("install.sh"))
        .arg("plan")
        .env_clear()
        .env("PATH", clean_path())
        .env("GITHUB_ACTION_PATH", common::repo_root())
        .env("GITHUB_OUTPUT", runner.path("output"))
        .env("RUNNER_TOOL_CACHE", runner.path("tools"))
        .env("RUNNER_OS", "Linux")
        .env("RUNNER_ARCH", "X64")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let outputs = runner.outputs();
    let get = |name: &str| {
        outputs
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name}=")))
            .unwrap_or_else(|| panic!("no {name} in {outputs}"))
            .to_owned()
    };
    let key = get("cache-key");
    let prefix = format!("weight-inspect-Linux-X64-{VERSION}-");
    assert!(key.starts_with(&prefix), "{key}");
    let hash = &key[prefix.len()..];
    assert!(
        hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()),
        "{key}"
    );
    assert_eq!(
        get("dir"),
        format!(
            "{}/weight-inspect/{VERSION}-{hash}",
            runner.path("tools").display()
        )
    );
    assert_eq!(get("version"), VERSION);
}

// ---------------------------------------------------------------- ensure-base.sh

/// A "remote" repository: main c1 -> c2 -> c4, pr branches from c2 with c3. c2 holds a model
/// and the policy; c3 turns the model's first tensor into q8_0 (a violation). As on GitHub,
/// refs/pull/1/merge is the merge of pr into the current main (parents c4, c3).
struct Remote {
    repo: Repo,
    c2: String,
    c3: String,
    c4: String,
    merge: String,
}

fn remote() -> Remote {
    let repo = Repo::new();
    repo.write("README", "one\n");
    repo.git(&["add", "."]);
    repo.git(&["commit", "-q", "-m", "c1"]);
    repo.write(
        ".weight-inspect.toml",
        "[[rules]]\npaths = [\"models/**\"]\nallowed_dtypes = [\"f16\"]\n",
    );
    repo.fixtures(json!({"models/m.gguf": gguf(&["f16"], json!({}))}));
    repo.git(&["add", "."]);
    repo.git(&["commit", "-q", "-m", "c2"]);
    let c2 = rev_parse(&repo);
    repo.git(&["checkout", "-q", "-b", "pr"]);
    repo.fixtures(json!({"models/m.gguf": gguf(&["q8_0"], json!({}))}));
    repo.git(&["commit", "-q", "-am", "c3"]);
    let c3 = rev_parse(&repo);
    repo.git(&["checkout", "-q", "main"]);
    repo.write("README", "two\n");
    repo.git(&["commit", "-q", "-am", "c4"]);
    let c4 = rev_parse(&repo);
    repo.git(&["checkout", "-q", "--detach", &c4]);
    repo.git(&["merge", "-q", "--no-ff", "-m", "Merge pr", "pr"]);
    let merge = rev_parse(&repo);
    repo.git(&["update-ref", "refs/pull/1/merge", &merge]);
    repo.git(&["checkout", "-q", "main"]);
    Remote {
        repo,
        c2,
        c3,
        c4,
        merge,
    }
}

fn rev_parse(repo: &Repo) -> String {
    repo.ok(&["rev-parse", "HEAD"]).trim().to_owned()
}

/// What actions/checkout does on a pull_request event: fetch the merge ref one commit deep
/// and check it out detached.
fn merge_checkout(runner: &Runner, remote: &Remote, name: &str) -> PathBuf {
    let work = runner.path(name);
    std::fs::create_dir_all(&work).unwrap();
    runner.git(&work, &["init", "-q", "."]);
    runner.git(
        &work,
        &["remote", "add", "origin", &file_url(&remote.repo.dir)],
    );
    runner.git(
        &work,
        &[
            "fetch",
            "-q",
            "--no-tags",
            "--depth=1",
            "origin",
            "+refs/pull/1/merge:refs/remotes/pull/1/merge",
        ],
    );
    runner.git(
        &work,
        &["checkout", "-q", "--detach", "refs/remotes/pull/1/merge"],
    );
    assert_eq!(runner.git(&work, &["rev-parse", "HEAD"]), remote.merge);
    work
}

/// `actions/checkout` with its default fetch-depth 1: a shallow clone of the pr branch.
fn shallow_clone(runner: &Runner, remote: &Remote, name: &str) -> PathBuf {
    let work = runner.path(name);
    let url = file_url(&remote.repo.dir);
    runner.git(
        runner.tmp.path(),
        &[
            "clone",
            "-q",
            "--depth=1",
            "--branch",
            "pr",
            &url,
            work.to_str().unwrap(),
        ],
    );
    assert_eq!(
        runner.git(&work, &["rev-parse", "--is-shallow-repository"]),
        "true"
    );
    work
}

fn has_commit(runner: &Runner, work: &Path, sha: &str) -> bool {
    git_command(
        &runner.path("home"),
        work,
        &["cat-file", "-e", &format!("{sha}^{{commit}}")],
    )
    .output()
    .unwrap()
    .status
    .success()
}

#[test]
fn ensure_base_fetches_the_pull_request_base_into_a_shallow_clone() {
    let runner = Runner::new();
    let remote = remote();
    let work = shallow_clone(&runner, &remote, "work");
    assert!(!has_commit(&runner, &work, &remote.c4));

    let out = runner.script("ensure-base.sh", &work, &[("WI_PR_BASE_SHA", &remote.c4)]);
    assert!(out.status.success(), "{}", text(&out));
    let expected = format!("base={}\nhead={}\n", remote.c4, remote.c3);
    assert_eq!(common::stdout(&out), expected);
    assert_eq!(runner.outputs(), expected);
    assert!(common::stderr(&out).contains(&format!(
        "fetching: git fetch --no-tags --no-recurse-submodules --depth=1 origin {}",
        remote.c4
    )));
    assert!(has_commit(&runner, &work, &remote.c4));
    // Only the commit was fetched, not the history between.
    assert_eq!(
        runner.git(&work, &["rev-parse", "--is-shallow-repository"]),
        "true"
    );
    assert!(!has_commit(&runner, &work, &remote.c2));

    // Present now: no fetch, even with the remote gone.
    runner.git(
        &work,
        &["remote", "set-url", "origin", "file:///nonexistent"],
    );
    let out = runner.script("ensure-base.sh", &work, &[("WI_PR_BASE_SHA", &remote.c4)]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(common::stdout(&out), expected);
    assert!(!common::stderr(&out).contains("fetching"), "{}", text(&out));
}

#[test]
fn ensure_base_takes_the_first_parent_of_the_pull_request_merge_commit() {
    let runner = Runner::new();
    let remote = remote();
    let work = merge_checkout(&runner, &remote, "merge");
    // The event's base.sha is stale (main moved on to c4 since): the merge commit knows better.
    let out = runner.script(
        "ensure-base.sh",
        &work,
        &[
            ("WI_PR_BASE_SHA", &remote.c2),
            ("WI_PR_HEAD_SHA", &remote.c3),
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        common::stdout(&out),
        format!("base={}\nhead={}\n", remote.c4, remote.merge)
    );
    assert!(has_commit(&runner, &work, &remote.c4));

    // The pull request's head checked out instead (ref: head.sha): base.sha it is.
    let work = shallow_clone(&runner, &remote, "head");
    let out = runner.script(
        "ensure-base.sh",
        &work,
        &[
            ("WI_PR_BASE_SHA", &remote.c2),
            ("WI_PR_HEAD_SHA", &remote.c3),
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        common::stdout(&out),
        format!("base={}\nhead={}\n", remote.c2, remote.c3)
    );
}

#[test]
fn ensure_base_follows_the_base_branch_an_input_ref_or_the_parent() {
    let runner = Runner::new();
    let remote = remote();

    // GITHUB_BASE_REF only: the branch is fetched as origin/main.
    let work = shallow_clone(&runner, &remote, "by-ref");
    let out = runner.script("ensure-base.sh", &work, &[("GITHUB_BASE_REF", "main")]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        common::stdout(&out),
        format!("base={}\nhead={}\n", remote.c4, remote.c3)
    );
    assert_eq!(runner.git(&work, &["rev-parse", "origin/main"]), remote.c4);

    // The `base` input wins over the event, and may be a ref name.
    let work = shallow_clone(&runner, &remote, "by-input");
    let out = runner.script(
        "ensure-base.sh",
        &work,
        &[("WI_BASE_INPUT", "main"), ("WI_PR_BASE_SHA", &remote.c2)],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(common::stdout(&out).starts_with(&format!("base={}\n", remote.c4)));

    // A push that created the branch (before = zeros): the head's parent.
    let work = shallow_clone(&runner, &remote, "by-parent");
    let out = runner.script(
        "ensure-base.sh",
        &work,
        &[("WI_PUSH_BEFORE", "0000000000000000000000000000000000000000")],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        common::stdout(&out),
        format!("base={}\nhead={}\n", remote.c2, remote.c3)
    );

    // A push: the commit before it.
    let out = runner.script("ensure-base.sh", &work, &[("WI_PUSH_BEFORE", &remote.c4)]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(common::stdout(&out).starts_with(&format!("base={}\n", remote.c4)));
}

#[test]
fn ensure_base_fails_clearly() {
    let runner = Runner::new();
    let remote = remote();
    let work = shallow_clone(&runner, &remote, "work");
    let missing = "0123456789abcdef0123456789abcdef01234567";
    let out = runner.script("ensure-base.sh", &work, &[("WI_PR_BASE_SHA", missing)]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        common::stderr(&out).contains(&format!(
            "weight-inspect base: error: cannot fetch commit {missing} from origin"
        )),
        "{}",
        text(&out)
    );
    assert_eq!(runner.outputs(), "");

    let out = runner.script("ensure-base.sh", runner.path("temp").as_path(), &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        common::stderr(&out).contains("is not a git repository"),
        "{}",
        text(&out)
    );
}

// ---------------------------------------------------------------- action.yml, simulated

fn run_action(
    runner: &Runner,
    work: &Path,
    inputs: Value,
    env: &[(&str, &str)],
    event: Value,
) -> Value {
    let mut base_env = serde_json::Map::new();
    for (k, v) in [
        ("PATH", clean_path().to_str().unwrap().to_owned()),
        ("HOME", runner.path("home").display().to_string()),
        ("GIT_CONFIG_NOSYSTEM", "1".into()),
        ("RUNNER_TEMP", runner.path("temp").display().to_string()),
        (
            "RUNNER_TOOL_CACHE",
            runner.path("tools").display().to_string(),
        ),
        ("RUNNER_OS", "Linux".into()),
        ("RUNNER_ARCH", "X64".into()),
        // Should the install ever reach `cargo install`, it only says so (no build in tests).
        ("WEIGHT_INSPECT_INSTALL_DRY_RUN", "1".into()),
    ] {
        base_env.insert(k.into(), Value::String(v));
    }
    for (k, v) in env {
        base_env.insert((*k).into(), Value::String((*v).into()));
    }
    let config = json!({
        "inputs": inputs,
        "github": {"event": event, "action_repository": ""},
        "runner": {"os": "Linux", "temp": runner.path("temp")},
        "env": base_env,
        "workdir": work,
    });
    let mut child = Command::new(common::python())
        .arg(common::repo_root().join("tests/action_support/run_action.py"))
        .arg(common::repo_root())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(config.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "run_action.py: {}", text(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn step<'a>(result: &'a Value, id: &str) -> &'a Value {
    result["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == id)
        .unwrap_or_else(|| panic!("no step {id}: {result:#}"))
}

#[test]
fn the_action_runs_on_a_shallow_pull_request_checkout() {
    let runner = Runner::new();
    let remote = remote();
    let work = merge_checkout(&runner, &remote, "work");
    let bin = common::bin();
    let event = json!({"pull_request": {"base": {"sha": remote.c2}, "head": {"sha": remote.c3}}});
    let result = run_action(
        &runner,
        &work,
        json!({"paths": "  models  \n\n", "sarif": "out/weight-inspect.sarif",
               "html": "out/weight-inspect.html"}),
        &[("WEIGHT_INSPECT_BIN", bin.to_str().unwrap())],
        event.clone(),
    );
    let all = format!("{result:#}");

    let plan = step(&result, "plan");
    assert_eq!(plan["exit_code"], 0, "{all}");
    // actions/cache is given the plan's directory and key.
    let cache = &result["steps"][1];
    assert_eq!(cache["uses"], "actions/cache@v4");
    assert_eq!(cache["with"]["path"], plan["outputs"]["dir"]);
    assert_eq!(cache["with"]["key"], plan["outputs"]["cache-key"]);
    assert_eq!(
        step(&result, "install")["outputs"]["source"],
        "given",
        "{all}"
    );
    let base = step(&result, "base");
    assert_eq!(base["outputs"]["base"], remote.c4.as_str(), "{all}");
    assert_eq!(base["outputs"]["head"], remote.merge.as_str(), "{all}");

    // The violation fails the step, after the summary and outputs are written.
    let report = step(&result, "report");
    assert_eq!(report["exit_code"], 1, "{all}");
    assert_eq!(result["failed_step"], "report");
    let stdout = report["stdout"].as_str().unwrap();
    assert!(
        stdout.contains("::error file=models/m.gguf,title=weight-inspect%3A allowed_dtypes::expected only f16; found q8_0"),
        "{all}"
    );
    let summary = report["summary"].as_str().unwrap();
    assert!(
        summary.starts_with("## weight-inspect: model changes\n"),
        "{all}"
    );
    assert!(
        summary.contains("| modified | `models/m.gguf` | gguf |"),
        "{all}"
    );
    let report_path = runner.path("temp/weight-inspect-report.json");
    assert_eq!(
        result["outputs"],
        json!({
            "changed-files": "1",
            "violations": "1",
            "new-violations": "1",
            "pre-existing-violations": "0",
            "failed": "true",
            "report": report_path.display().to_string(),
            "sarif": "out/weight-inspect.sarif",
            "html": work.join("out/weight-inspect.html").display().to_string(),
            "bom": "",
            "base": remote.c4,
        }),
        "{all}"
    );
    // The HTML report, in the workspace, and the summary's pointer to the run's artifacts.
    let html = std::fs::read_to_string(work.join("out/weight-inspect.html")).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"), "{html}");
    assert!(html.contains("models/m.gguf"), "{html}");
    assert!(
        summary.contains(
            "**HTML report** (per-layer heatmap, sortable table): weight-inspect.html, in the \
             run's artifacts once the workflow uploads it with `actions/upload-artifact`."
        ),
        "{all}"
    );
    // The SARIF file, for code scanning, in the workspace.
    let sarif: Value = serde_json::from_str(
        &std::fs::read_to_string(work.join("out/weight-inspect.sarif")).unwrap(),
    )
    .unwrap();
    let results = sarif["runs"][0]["results"].as_array().unwrap();
    assert_eq!(results.len(), 1, "{sarif:#}");
    assert_eq!(results[0]["ruleId"], "allowed_dtypes");
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(&report_path).unwrap()).unwrap();
    assert_eq!(json["changed_files"], 1);

    // A path filter that excludes the model: nothing to report, the step passes.
    let result = run_action(
        &runner,
        &work,
        json!({"paths": "other/\n*.safetensors"}),
        &[("WEIGHT_INSPECT_BIN", bin.to_str().unwrap())],
        event,
    );
    assert_eq!(result["failed_step"], Value::Null, "{result:#}");
    assert_eq!(result["outputs"]["changed-files"], "0");
}

#[test]
fn the_action_installs_the_prebuilt_binary_and_honours_fail_on() {
    let runner = Runner::new();
    let remote = remote();
    let work = shallow_clone(&runner, &remote, "work");
    let asset = make_asset(&runner);
    let url = file_url(&asset);
    // A push to the pr branch whose previous tip was c2.
    let result = run_action(
        &runner,
        &work,
        json!({"fail-on": "never"}),
        &[("WEIGHT_INSPECT_DOWNLOAD_URL", &url)],
        json!({"before": remote.c2}),
    );
    let all = format!("{result:#}");
    assert_eq!(result["failed_step"], Value::Null, "{all}");
    let install = step(&result, "install");
    assert_eq!(install["outputs"]["source"], "prebuilt", "{all}");
    let plan_dir = step(&result, "plan")["outputs"]["dir"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        install["outputs"]["bin"],
        format!("{plan_dir}/bin/weight-inspect"),
        "{all}"
    );
    assert_eq!(result["path_added"], json!([format!("{plan_dir}/bin")]));
    assert_eq!(step(&result, "base")["outputs"]["base"], remote.c2.as_str());
    let report = step(&result, "report");
    assert_eq!(report["exit_code"], 0, "{all}");
    assert!(
        report["stdout"]
            .as_str()
            .unwrap()
            .contains("::warning file=models/m.gguf,title=weight-inspect%3A allowed_dtypes::"),
        "{all}"
    );
    assert_eq!(result["outputs"]["failed"], "false");
    assert_eq!(result["outputs"]["violations"], "1");
}

// ---------------------------------------------------------------- static checks

/// A YAML file as JSON, parsed by PyYAML (from the test venv, via pre-commit).
fn yaml(path: &Path) -> Value {
    let out = Command::new(common::python())
        .arg("-c")
        .arg("import json, sys, yaml; print(json.dumps(yaml.safe_load(open(sys.argv[1], encoding='utf-8'))))")
        .arg(path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}: {}", path.display(), text(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn action_yml_is_valid_and_uses_every_input() {
    let root = common::repo_root();
    let action = yaml(&root.join("action.yml"));
    for key in ["name", "description", "author"] {
        assert!(action[key].as_str().is_some_and(|s| !s.is_empty()), "{key}");
    }
    assert_eq!(action["runs"]["using"], "composite");
    let inputs = action["inputs"].as_object().unwrap();
    let names: Vec<&str> = inputs.keys().map(String::as_str).collect();
    for required in ["policy", "base", "head", "fail-on", "paths", "version"] {
        assert!(
            names.contains(&required),
            "input {required} missing: {names:?}"
        );
    }
    assert_eq!(inputs["fail-on"]["default"], "violation");
    let steps = action["runs"]["steps"].as_array().unwrap();
    let steps_text = serde_json::to_string(steps).unwrap();
    for (name, spec) in inputs {
        assert!(
            spec["description"].as_str().is_some_and(|d| !d.is_empty()),
            "input {name} has no description"
        );
        assert!(spec.get("default").is_some(), "input {name} has no default");
        assert!(
            steps_text.contains(&format!("${{{{ inputs.{name} }}}}")),
            "input {name} is not used by any step"
        );
    }
    let mut ids: Vec<&str> = Vec::new();
    for step in steps {
        let context = format!("{step}");
        if let Some(run) = step["run"].as_str() {
            assert_eq!(step["shell"], "bash", "{context}");
            // Inputs go through env, never into the shell code (script injection).
            assert!(!run.contains("${{"), "expression in run: {context}");
            let script = run
                .trim()
                .strip_prefix("\"$GITHUB_ACTION_PATH/")
                .and_then(|r| r.split_once('"'))
                .map_or_else(
                    || panic!("a step runs a script of the action: {context}"),
                    |(s, _)| root.join(s),
                );
            let mode = std::os::unix::fs::PermissionsExt::mode(
                &std::fs::metadata(&script).unwrap().permissions(),
            );
            assert!(mode & 0o111 != 0, "{} is not executable", script.display());
        } else {
            assert!(step["uses"].as_str().is_some(), "{context}");
        }
        // Step outputs are referenced only after the step that sets them.
        for (i, _) in context.match_indices("steps.") {
            let id = context[i + 6..].split('.').next().unwrap();
            assert!(
                ids.contains(&id),
                "{id} referenced before it runs: {context}"
            );
        }
        if let Some(id) = step["id"].as_str() {
            ids.push(id);
        }
    }
    for (name, spec) in action["outputs"].as_object().unwrap() {
        let value = spec["value"].as_str().unwrap();
        let id = value
            .strip_prefix("${{ steps.")
            .and_then(|r| r.split('.').next())
            .unwrap_or_else(|| panic!("output {name}: {value}"));
        assert!(ids.contains(&id), "output {name} from unknown step {id}");
    }
}

#[test]
fn workflows_run_the_tests_and_build_the_release_asset() {
    let root = common::repo_root();
    let ci = yaml(&root.join(".github/workflows/ci.yml"));
    let ci_text = serde_json::to_string(&ci).unwrap();
    // PyYAML reads the `on:` key as the boolean true.
    assert!(ci.get("on").or(ci.get("true")).is_some(), "{ci_text}");
    let test_steps = ci["jobs"]["test"]["steps"].as_array().unwrap();
    assert!(
        test_steps.iter().any(|s| s["run"] == ".ci/run"),
        "the test job runs the CI entry point: {ci_text}"
    );
    let ci_run = std::fs::read_to_string(root.join(".ci/run")).unwrap();
    assert!(ci_run.contains("scripts/test"), "{ci_run}");
    let action_job = ci["jobs"]["action"]["steps"].as_array().unwrap();
    assert!(action_job.iter().any(|s| s["uses"] == "./"), "{ci_text}");

    let release = yaml(&root.join(".github/workflows/release.yml"));
    let release_text = serde_json::to_string(&release).unwrap();
    let install = std::fs::read_to_string(script("install.sh")).unwrap();
    let asset = "weight-inspect-x86_64-unknown-linux-musl.tar.gz";
    assert!(
        install.contains(&format!("asset={asset}")),
        "install.sh downloads {asset}"
    );
    assert!(release_text.contains(asset), "release.yml builds {asset}");
    assert!(release_text.contains("$ASSET.sha256"), "{release_text}");
    assert!(install.contains("releases/download/v$wanted/$asset"));

    // Wheels for every platform of the Python package, the sdist, trusted publishing, and the
    // man pages the hidden `completions --man` writes.
    let jobs = release["jobs"].as_object().unwrap();
    let wheels: Vec<String> = jobs["wheels"]["strategy"]["matrix"]["include"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            format!(
                "{}-{}",
                m["platform"].as_str().unwrap(),
                m["target"].as_str().unwrap()
            )
        })
        .collect();
    for platform in [
        "manylinux-x86_64",
        "manylinux-aarch64",
        "musllinux-x86_64",
        "musllinux-aarch64",
        "macos-x86_64",
        "macos-aarch64",
        "windows-x64",
    ] {
        assert!(
            wheels.iter().any(|w| w == platform),
            "{platform} in {wheels:?}"
        );
    }
    assert!(jobs.contains_key("sdist"), "{release_text}");
    let pypi = &jobs["pypi"];
    assert_eq!(pypi["permissions"]["id-token"], "write");
    assert!(
        serde_json::to_string(pypi)
            .unwrap()
            .contains("pypa/gh-action-pypi-publish"),
        "{pypi}"
    );
    assert!(release_text.contains("completions --man"), "{release_text}");
}
