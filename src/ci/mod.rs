//! `weight-inspect ci`: pull-request reports for GitHub Actions.
//!
//! One run compares two commits: the model files that changed ([`crate::git::repo`]), the
//! structural diff of each, and the policy ([`crate::policy`]) applied to the head side. The
//! results go to a Markdown job summary ([`markdown`]), workflow-command annotations
//! ([`annotations`]), step outputs and a JSON report ([`outputs`]). The action's shell
//! (`action.yml`, `scripts/action/`) only installs the binary, fetches the base commit and
//! calls this command.

pub mod annotations;
pub mod markdown;
pub mod outputs;
pub mod report;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::cli::{Context, write_stdout};
use crate::error::{Error, Result};

pub use report::{CiReport, FailOn};

/// Report structural changes and policy violations between two commits (exit 0 pass,
/// 1 failed per --fail-on, 2 error).
#[derive(Debug, clap::Args)]
pub struct CiArgs {
    /// Base revision [default: origin/$GITHUB_BASE_REF when that is set, else HEAD^].
    #[arg(long, value_name = "REV")]
    pub base: Option<String>,
    /// Head revision.
    #[arg(long, value_name = "REV", default_value = "HEAD")]
    pub head: String,
    /// Policy file applied to the head side [default: .weight-inspect.toml as committed in
    /// the head revision, if it has one].
    #[arg(long, value_name = "FILE")]
    pub policy: Option<PathBuf>,
    /// Append the Markdown report to FILE (in Actions: $GITHUB_STEP_SUMMARY); `-` prints it.
    #[arg(long, value_name = "FILE")]
    pub summary: Option<PathBuf>,
    /// Print GitHub workflow-command annotations (::error, ::warning) instead of plain
    /// violation lines.
    #[arg(long)]
    pub annotations: bool,
    /// What fails the run (exit 1): policy violations, any changed model file, or nothing.
    #[arg(long, value_enum, default_value_t = FailOn::Violation)]
    pub fail_on: FailOn,
    /// Append step outputs to FILE (in Actions: $GITHUB_OUTPUT): changed-files, violations,
    /// failed, report.
    #[arg(long, value_name = "FILE")]
    pub outputs: Option<PathBuf>,
    /// Write the full report as JSON (schema 1) to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Only these paths: files, directories or globs, relative to the repository root.
    #[arg(value_name = "PATHS")]
    pub paths: Vec<String>,
}

impl CiArgs {
    pub fn run(self, _ctx: &Context) -> Result<ExitCode> {
        let cwd = std::env::current_dir().map_err(|e| Error::io(".", e))?;
        let repo = crate::git::repo::open_repo(&cwd)?;
        let base = match self.base {
            Some(base) => base,
            None => default_base(std::env::var("GITHUB_BASE_REF").ok().as_deref()),
        };
        let policy = load_policy(&repo, &cwd, self.policy.as_deref(), &self.head)?;
        let options = report::Options {
            base: &base,
            head: &self.head,
            paths: &self.paths,
            fail_on: self.fail_on,
        };
        let report = CiReport::collect(&repo, policy, &options)?;

        if let Some(path) = &self.json {
            outputs::write_json(path, &report)?;
        }
        let summary_to_stdout = self.summary.as_deref() == Some(Path::new("-"));
        match &self.summary {
            Some(_) if summary_to_stdout => {
                write_stdout(markdown::render(&report, markdown::SUMMARY_LIMIT).as_bytes())?;
            }
            Some(path) => append_summary(path, &report)?,
            None => {}
        }
        if let Some(path) = &self.outputs {
            outputs::append_outputs(path, &report, self.json.as_deref())?;
        }
        if !summary_to_stdout {
            let mut out = report.text_lines(!self.annotations);
            if self.annotations {
                out.push_str(&annotations::render(&report));
            }
            out.push_str(&format!("weight-inspect: {}\n", report.summary_line()));
            write_stdout(out.as_bytes())?;
        }
        Ok(if report.failed() {
            ExitCode::from(1)
        } else {
            ExitCode::SUCCESS
        })
    }
}

/// The base when none is given: the pull request's target branch as fetched by
/// `actions/checkout`, else the first parent (the commit before a push, or the base side of a
/// merge commit).
pub fn default_base(github_base_ref: Option<&str>) -> String {
    match github_base_ref.filter(|r| !r.is_empty()) {
        Some(branch) => format!("origin/{branch}"),
        None => "HEAD^".to_owned(),
    }
}

/// The policy named by `--policy` (a file; an error if missing), else `.weight-inspect.toml`
/// as committed in `head` when it has one (the work tree may be another commit, or none).
fn load_policy(
    repo: &gix::Repository,
    cwd: &Path,
    arg: Option<&Path>,
    head: &str,
) -> Result<Option<report::LoadedPolicy>> {
    const POLICY_FILE: &str = crate::policy::config::POLICY_FILE;
    let Some(arg) = arg else {
        let Some(bytes) = crate::git::repo::read_blob(repo, head, POLICY_FILE)? else {
            return Ok(None);
        };
        let shown = format!("{head}:{POLICY_FILE}");
        let text = String::from_utf8(bytes)
            .map_err(|_| Error::Other(format!("{shown}: not UTF-8 text")))?;
        let policy = crate::policy::Policy::parse(Path::new(POLICY_FILE), &text)?;
        return Ok(Some(report::LoadedPolicy {
            policy,
            shown: POLICY_FILE.to_owned(),
            repo_path: Some(POLICY_FILE.to_owned()),
        }));
    };
    let shown = arg.display().to_string();
    let path = cwd.join(arg);
    let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&shown, e))?;
    let policy = crate::policy::Policy::parse(arg, &text)?;
    // The policy's path in the repository, to tell whether the change touches it.
    let repo_path = repo.workdir().and_then(|root| {
        let root = root.canonicalize().ok()?;
        let abs = path.canonicalize().ok()?;
        let rel = abs.strip_prefix(&root).ok()?;
        let parts: Option<Vec<&str>> = rel.components().map(|c| c.as_os_str().to_str()).collect();
        Some(parts?.join("/"))
    });
    Ok(Some(report::LoadedPolicy {
        policy,
        shown,
        repo_path,
    }))
}

/// Appends the Markdown to the summary file, within what GitHub accepts for one step
/// (the file may already hold another tool's summary of the same step).
fn append_summary(path: &Path, report: &CiReport) -> Result<()> {
    let existing = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let budget =
        markdown::SUMMARY_LIMIT.saturating_sub(usize::try_from(existing).unwrap_or(usize::MAX));
    let text = markdown::render(report, budget);
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| Error::io(path, e))?;
    file.write_all(text.as_bytes())
        .and_then(|_| file.flush())
        .map_err(|e| Error::io(path, e))
}

#[cfg(test)]
mod tests {
    #[test]
    fn default_base_follows_the_pull_request_target() {
        assert_eq!(super::default_base(Some("main")), "origin/main");
        assert_eq!(super::default_base(Some("")), "HEAD^");
        assert_eq!(super::default_base(None), "HEAD^");
    }
}
