//! Policy checks for model files: a TOML policy (`.weight-inspect.toml`) of rules matched by
//! globs, evaluated on work-tree files or staged blobs, for the pre-commit hook, the
//! pre-commit framework and CI.
//!
//! - [`config`]: the policy file (parsing, located errors, per-path merging of rules);
//!   [`source`]: reading it, from a file or a committed blob;
//! - [`subject`]: what a file is and where its bytes come from; [`check`]: the rules;
//!   [`workspace`]: which files, from the index or work tree;
//! - [`report`]: text, JSON and GitHub outputs; [`sarif`]: SARIF for code scanning;
//!   [`pin`]: `policy pin`; [`hook`]: `hook install`;
//! - [`error`]: what can go wrong, with the core's and git's errors inside.

mod baseline;
mod check;
mod config;
mod conversion;
mod error;
mod explain;
mod hook;
mod pin;
mod relation;
mod report;
mod sarif;
mod signature;
mod source;
mod subject;
mod workspace;

// The face of the policy adapter: what `ci` and the command line use.
pub(crate) use baseline::{Baseline, Standing, classify as classify_against_base};
pub(crate) use check::{Violation, evaluate};
pub(crate) use config::POLICY_FILE;
pub(crate) use error::{FileReason, PolicyError};
pub(crate) use explain::PinSearch;
pub(crate) use hook::{
    Installed, install as install_hook, missing_policy_note, uninstall as uninstall_hook,
};
pub(crate) use report::{
    CheckReport, FileError, Phrasing, Tally, plural, violation_annotation, violation_line,
};
pub(crate) use sarif::{Input as SarifInput, Level as SarifLevel, render as render_sarif};
pub(crate) use signature::{signature_files, signature_paths_above, signature_state};
pub(crate) use source::{Missing, PolicySource};
pub(crate) use subject::{Origin, Subject, follow_committed_link, read_artifact};
pub(crate) use workspace::Workspace;

use std::path::{Path, PathBuf};

pub use config::Policy;

use workspace::Target;

type Result<T, E = PolicyError> = std::result::Result<T, E>;

/// Which staged files `check --staged` judges when no paths are named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    /// What the commit brings: files added, modified or renamed against HEAD (and the whole
    /// multi-file model one of whose files is among them). What the hooks judge.
    Change,
    /// Every staged file (`--all`).
    Everything,
}

/// Evaluates `policy` on the files `paths` names (or the staged change, or every
/// staged/tracked file: see [`Scope`]), staged blobs or work-tree files. Files no rule covers
/// are skipped; files that cannot be judged are reported as errors, not skipped. A named file
/// of a multi-file model brings the model with it.
pub(crate) fn run_check(
    ws: &Workspace,
    policy: &Policy,
    policy_shown: &str,
    staged: bool,
    scope: Scope,
    paths: &[PathBuf],
    policy_in_repo: Option<String>,
) -> Result<CheckReport> {
    let targets = if staged && paths.is_empty() && scope == Scope::Change {
        ws.staged_change_targets(&signature::signature_files(policy))?
    } else {
        ws.targets(staged, paths)?
    };
    let mut report = CheckReport::new(policy_shown.to_string(), staged);
    report.selection = match (paths.is_empty(), staged && scope == Scope::Change) {
        (false, _) => "paths",
        (true, true) => "change",
        (true, false) => "all",
    };
    // Where the files pinned by `expected_hash` may be found: HEAD, the policy's history.
    let pins = ws.repo.as_ref().map(|repo| PinSearch {
        repo,
        remote: &ws.remote,
        revs: if repo.head_id().is_ok() {
            vec!["HEAD".to_owned()]
        } else {
            Vec::new()
        },
        policy_path: policy_in_repo,
    });
    for target in targets.iter().filter(|t| policy.covers(t.path())) {
        let subject = target.subject(ws);
        match evaluate(policy, &subject) {
            Ok(Some(mut found)) => {
                report.checked += 1;
                if !found.is_empty() {
                    report.failing += 1;
                }
                if let Some(search) = &pins
                    && found.iter().any(|v| v.rule == "expected_hash")
                {
                    let current = subject::read_artifact(&subject).ok();
                    search.explain(&mut found, current.as_ref());
                }
                report.violations.extend(found);
            }
            Ok(None) => {}
            Err(e) => report.errors.push(FileError::new(target.path(), &e)),
        }
    }
    let mut dirs = model_dirs(&targets);
    if !paths.is_empty() {
        // A named shard or part brings its model (as the hooks judge it when one is staged).
        let named: std::collections::BTreeSet<&str> = targets
            .iter()
            .map(|t| t.path().rsplit_once('/').map_or("", |(d, _)| d))
            .collect();
        dirs.extend(ws.multi_file_model_dirs(staged, &named)?);
        dirs.sort();
        dirs.dedup();
    }
    for dir in dirs {
        if !policy.covers(&dir) {
            continue;
        }
        report.checked += 1;
        let found = match open_model_dir(ws, staged, &dir) {
            Ok(Some(artifact)) => {
                let subject = Subject {
                    path: dir.clone(),
                    origin: Origin::Model(Box::new(artifact)),
                    remote: &ws.remote,
                };
                evaluate(policy, &subject)
            }
            Ok(None) => continue,
            Err(unassembled) => Ok(Some(vec![check::unassembled(policy, &dir, &unassembled)])),
        };
        match found {
            Ok(found) => {
                let found = found.unwrap_or_default();
                if !found.is_empty() {
                    report.failing += 1;
                }
                report.violations.extend(found);
            }
            Err(e) => report.errors.push(FileError::new(&dir, &e)),
        }
    }
    Ok(report)
}

/// The directories that hold a multi-file model among `targets`: those with an index file or
/// split-GGUF parts.
fn model_dirs(targets: &[Target]) -> Vec<String> {
    let mut dirs: Vec<String> = targets
        .iter()
        .filter_map(|t| {
            let (dir, file) = t.path().rsplit_once('/').unwrap_or(("", t.path()));
            let multi = crate::sharded::index::is_index_name(file)
                || crate::sharded::SplitName::parse(file).is_some();
            (multi && !dir.is_empty()).then(|| dir.to_owned())
        })
        .collect();
    dirs.sort();
    dirs.dedup();
    dirs
}

/// The model of a directory as staged or in the work tree: Ok(None) when it holds no
/// multi-file model, Err(why) when its files do not read as one model (a half-staged shard
/// set, a missing part).
fn open_model_dir(
    ws: &Workspace,
    staged: bool,
    dir: &str,
) -> Result<Option<crate::artifact::Artifact>, NotOneModel> {
    let Some(repo) = ws.repo.as_ref() else {
        return Ok(Some(crate::read::open_model_path(&ws.root.join(dir))?));
    };
    let snapshot = if staged {
        crate::git::Snapshot::Index
    } else {
        crate::git::Snapshot::WorkTree
    };
    let reader = crate::git::SideReader::new(repo, &ws.remote);
    match crate::git::open_directory(&reader, snapshot, dir)? {
        Some(side) if side.artifact().is_some() => Ok(side.into_artifact().map(|a| *a)),
        Some(side) => Err(NotOneModel::Side(Box::new(side))),
        None => Ok(None),
    }
}

/// Why a directory's files do not read as one model.
#[derive(Debug, thiserror::Error)]
enum NotOneModel {
    #[error(transparent)]
    Core(#[from] crate::error::Error),
    #[error(transparent)]
    Git(#[from] crate::git::GitError),
    #[error("{}", .0.note().unwrap_or_default())]
    Side(Box<crate::git::ModelSide>),
}

/// `policy pin`: records the structural hashes of `paths` (default: the paths already
/// pinned) in the policy file and returns a line per path.
pub(crate) fn pin_paths(
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
    let mut pins = Vec::new();
    if paths.is_empty() {
        let pinned = config_paths_to_args(ws, &pin::pinned_paths(&policy));
        if pinned.is_empty() {
            return Err(PolicyError::NothingPinned { shown });
        }
        for arg in &pinned {
            match model_pin(ws, staged, arg)? {
                Some(pin) => pins.push(pin),
                None => targets.extend(ws.targets(staged, std::slice::from_ref(arg))?),
            }
        }
    } else {
        for arg in paths {
            // A directory holding a multi-file model pins the model.
            if let Some(pin) = model_pin(ws, staged, arg)? {
                pins.push(pin);
                continue;
            }
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
    for t in &targets {
        let artifact = subject::read_artifact(&t.subject(ws))?;
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
            "{}: {what} {} [{}, rule {}]\n",
            crate::escape::shown(&p.path),
            p.hash,
            crate::escape::shown(&shown),
            p.rule
        ));
    }
    Ok(out)
}

/// The pin of a directory holding a multi-file model: its path and the model's structural
/// hash. None for anything else.
fn model_pin(ws: &Workspace, staged: bool, arg: &Path) -> Result<Option<(String, String)>> {
    let rel = ws.relative(arg)?;
    if rel.is_empty() || !ws.root.join(&rel).is_dir() {
        return Ok(None);
    }
    match open_model_dir(ws, staged, &rel) {
        Ok(Some(artifact)) => Ok(Some((rel, crate::identity::structural_hash(&artifact)))),
        Ok(None) => Ok(None),
        Err(why) => Err(PolicyError::file(
            &rel,
            FileReason::NotAModel {
                found: why.to_string(),
            },
        )),
    }
}

/// Root-relative paths as command-line arguments (absolute, so the current directory does
/// not matter).
fn config_paths_to_args(ws: &Workspace, paths: &[String]) -> Vec<PathBuf> {
    paths.iter().map(|p| ws.root.join(p)).collect()
}

fn is_model(ws: &Workspace, t: &Target) -> Result<bool> {
    subject::is_model(&t.subject(ws))
}
