//! Policy checks for model files: a TOML policy (`.weight-inspect.toml`) of rules matched by
//! globs, evaluated on work-tree files or staged blobs, for the pre-commit hook, the
//! pre-commit framework and CI.
//!
//! - [`config`]: the policy file (parsing, located errors, per-path merging of rules);
//!   [`source`]: reading it, from a file or a committed blob;
//! - [`subject`]: what a file is and where its bytes come from; [`check`]: the rules;
//!   [`workspace`]: which files, from the index or work tree;
//! - [`report`]: text, JSON and GitHub outputs; [`pin`]: `policy pin`; [`hook`]: `hook install`;
//! - [`error`]: what can go wrong, with the core's and git's errors inside.

pub mod check;
pub mod config;
pub mod error;
pub mod hook;
pub mod pin;
pub mod report;
pub mod source;
pub mod subject;
pub mod workspace;

use std::path::{Path, PathBuf};

pub use check::{Violation, check_blob, check_blob_id, evaluate};
pub use config::Policy;
pub use error::{FileReason, PolicyError};
pub use report::{CheckReport, FileError};
pub use source::{Missing, PolicySource};
pub use subject::{Origin, Subject};

use workspace::{Target, Workspace};

type Result<T, E = PolicyError> = std::result::Result<T, E>;

/// Evaluates `policy` on the files `paths` names (or every staged/tracked file), staged blobs
/// or work-tree files. Files no rule covers are skipped; files that cannot be judged are
/// reported as errors, not skipped.
pub fn run_check(
    ws: &Workspace,
    policy: &Policy,
    policy_shown: &str,
    staged: bool,
    paths: &[PathBuf],
) -> Result<CheckReport> {
    let targets = ws.targets(staged, paths)?;
    let mut report = CheckReport::new(policy_shown.to_string(), staged);
    for target in targets.iter().filter(|t| policy.covers(t.path())) {
        let subject = target.subject(ws.repo.as_ref());
        match evaluate(policy, &subject) {
            Ok(Some(found)) => {
                report.checked += 1;
                if !found.is_empty() {
                    report.failing += 1;
                }
                report.violations.extend(found);
            }
            Ok(None) => {}
            Err(e) => report.errors.push(FileError::new(target.path(), &e)),
        }
    }
    Ok(report)
}

/// `policy pin`: records the structural hashes of `paths` (default: the paths already
/// pinned) in the policy file and returns a line per path.
pub fn pin_paths(
    ws: &Workspace,
    policy_arg: Option<&Path>,
    staged: bool,
    paths: &[PathBuf],
) -> Result<String> {
    let policy_path = ws.policy_path(policy_arg);
    let source = PolicySource::in_workspace(ws, policy_arg, Missing::Empty)?;
    let policy = source.parse()?;
    let PolicySource { shown, text } = source;
    let mut targets: Vec<Target> = Vec::new();
    if paths.is_empty() {
        let pinned = config_paths_to_args(ws, &pin::pinned_paths(&policy));
        if pinned.is_empty() {
            return Err(PolicyError::NothingPinned { shown });
        }
        targets = ws.targets(staged, &pinned)?;
    } else {
        for arg in paths {
            let found = ws.targets(staged, std::slice::from_ref(arg))?;
            let from_dir = ws.root.join(ws.relative(arg)?).is_dir();
            for t in found {
                // Directories may hold other files; named files must be models.
                if from_dir && !is_model(ws, &t)? {
                    continue;
                }
                targets.push(t);
            }
        }
    }
    let mut pins = Vec::new();
    for t in &targets {
        let artifact = subject::read_artifact(&t.subject(ws.repo.as_ref()))?;
        pins.push((
            t.path().to_string(),
            crate::identity::structural_hash(&artifact),
        ));
    }
    if pins.is_empty() {
        return Err(PolicyError::NoModelToPin);
    }
    let (new_text, pinned) = pin::apply(Path::new(&shown), &text, &pins)?;
    if new_text != text {
        crate::fsutil::write_bytes_atomically(&policy_path, new_text.as_bytes())?;
    }
    let mut out = String::new();
    for p in pinned {
        let what = match p.change {
            pin::PinChange::Added => "pinned".to_string(),
            pin::PinChange::Updated { old } => format!("re-pinned (was {old})"),
            pin::PinChange::Unchanged => "unchanged".to_string(),
        };
        out.push_str(&format!(
            "{}: {what} {} [{shown}, rule {}]\n",
            crate::render::escape::shown(&p.path),
            p.hash,
            p.rule
        ));
    }
    Ok(out)
}

/// Root-relative paths as command-line arguments (absolute, so the current directory does
/// not matter).
fn config_paths_to_args(ws: &Workspace, paths: &[String]) -> Vec<PathBuf> {
    paths.iter().map(|p| ws.root.join(p)).collect()
}

fn is_model(ws: &Workspace, t: &Target) -> Result<bool> {
    subject::is_model(&t.subject(ws.repo.as_ref()))
}
