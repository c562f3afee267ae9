//! `weight-inspect ci`: pull-request reports for GitHub Actions.
//!
//! One run compares two commits: the model files that changed ([`crate::git::changes`]), the
//! structural diff of each, and the policy ([`crate::policy`]) applied to the head side: a
//! [`report`] of [`entry`]s, one per changed file. The results go to a Markdown job summary
//! ([`markdown`]), workflow-command annotations ([`annotations`]), step outputs and a JSON
//! report ([`outputs`]), a self-contained HTML page ([`html`]); what can go wrong is a [`CiError`]. The action's shell
//! (`action.yml`, `scripts/action/`) only installs the binary, fetches the base commit and
//! calls this command.

mod annotations;
mod error;
mod html;
mod markdown;
mod outputs;
mod record;
mod report;
mod sections;
mod training;

use std::path::Path;

use crate::policy::follow_committed_link;
use crate::policy::{Origin, PolicyError, PolicySource};

// The face of the ci adapter, for the command line.
pub(crate) use annotations::render as render_annotations;
pub(crate) use error::CiError;
pub(crate) use markdown::{SUMMARY_LIMIT, render as render_markdown};
pub(crate) use outputs::{append_outputs, write_html, write_json, write_sarif};
pub(crate) use report::{CiReport, FailOn, Options};

type Result<T, E = CiError> = std::result::Result<T, E>;

/// The base when none is given: the pull request's target branch as fetched by
/// `actions/checkout`, else the first parent (the commit before a push, or the base side of a
/// merge commit).
pub(crate) fn default_base(github_base_ref: Option<&str>) -> String {
    match github_base_ref.filter(|r| !r.is_empty()) {
        Some(branch) => format!("origin/{branch}"),
        None => "HEAD^".to_owned(),
    }
}

/// The policy named by `--policy` (a file; an error if missing), else `.weight-inspect.toml`
/// as committed in `head` when it has one (the work tree may be another commit, or none).
pub(crate) fn load_policy(
    repo: &gix::Repository,
    cwd: &Path,
    arg: Option<&Path>,
    head: &str,
) -> Result<Option<report::LoadedPolicy>> {
    const POLICY_FILE: &str = crate::policy::POLICY_FILE;
    let Some(arg) = arg else {
        let Some(id) = committed_policy(repo, head, POLICY_FILE)? else {
            return Ok(None);
        };
        let bytes = crate::git::blob_bytes(repo, id)?;
        let blob = format!("{head}:{POLICY_FILE}");
        let policy = PolicySource::blob(bytes, &blob, POLICY_FILE.to_owned())?.parse()?;
        return Ok(Some(report::LoadedPolicy {
            policy,
            shown: POLICY_FILE.to_owned(),
            repo_path: Some(POLICY_FILE.to_owned()),
        }));
    };
    let path = cwd.join(arg);
    let source = PolicySource::file(&path, arg.display().to_string())?;
    let policy = source.parse()?;
    let shown = source.shown;
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

/// The blob of the policy committed at `path` in `head`: the file, or the file a symbolic link
/// there leads to inside the commit. A link that leads elsewhere is an error, not "no policy":
/// a policy that cannot be read must not pass for none.
fn committed_policy(
    repo: &gix::Repository,
    head: &str,
    path: &str,
) -> Result<Option<gix::ObjectId>> {
    use crate::git::{Entry, tree_entry};
    match tree_entry(repo, head, path)? {
        Some(Entry::File(id)) => Ok(Some(id)),
        Some(Entry::Link(link)) => {
            let lookup = |p: &str| tree_entry(repo, head, p);
            match follow_committed_link(repo, path, link, head, Some(head), &lookup)? {
                Origin::Blob { id, .. } => Ok(Some(id)),
                Origin::Refused(reason) => Err(PolicyError::file(path, reason).into()),
                _ => unreachable!("a committed link leads to a blob or is refused"),
            }
        }
        Some(Entry::Dir | Entry::Submodule) | None => Ok(None),
    }
}

/// Appends the Markdown to the summary file, within what GitHub accepts for one step
/// (the file may already hold another tool's summary of the same step).
pub(crate) fn append_summary(path: &Path, report: &CiReport) -> Result<()> {
    let existing = std::fs::metadata(path).map_or(0, |m| m.len());
    let budget =
        markdown::SUMMARY_LIMIT.saturating_sub(usize::try_from(existing).unwrap_or(usize::MAX));
    crate::fsutil::append(path, &markdown::render(report, budget))?;
    Ok(())
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
