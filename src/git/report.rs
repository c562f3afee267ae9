//! `weight-inspect git diff`: the model files changed between two revisions (or a revision
//! and the work tree), each rendered as the external driver renders it, or as one JSON report.

use std::path::Path;

use serde::Serialize;

use super::GitError;
use super::changes::{self, PathFilter};
use super::side::{ModelSide, SideJson};

/// What to compare and how to show it.
pub struct GitDiffOptions<'a> {
    /// Zero revisions: HEAD against the work tree; one: REV against the work tree; two: REV
    /// against REV.
    pub revs: &'a [String],
    /// Pathspecs relative to the current directory.
    pub paths: &'a [String],
    pub json: bool,
    pub color: bool,
}

/// The rendered report and whether any model file changed.
pub struct GitDiffOutput {
    pub text: String,
    pub changed: bool,
}

#[derive(Serialize)]
struct DiffReport {
    schema: u32,
    base: String,
    /// None: the work tree.
    head: Option<String>,
    files: Vec<FileReport>,
}

#[derive(Serialize)]
struct FileReport {
    status: &'static str,
    old_path: Option<String>,
    new_path: Option<String>,
    old: Option<SideJson>,
    new: Option<SideJson>,
    /// The core's structural diff (schema 1) when both sides are models.
    diff: Option<serde_json::Value>,
}

pub fn git_diff(cwd: &Path, args: &GitDiffOptions<'_>) -> Result<GitDiffOutput, GitError> {
    let repo = super::open_repo(cwd)?;
    let (base, head) = match args.revs {
        [] => ("HEAD".to_owned(), None),
        [base] => (base.clone(), None),
        [base, head] => (base.clone(), Some(head.clone())),
        _ => {
            return Err(GitError::Usage(
                "git diff takes at most two revisions".to_owned(),
            ));
        }
    };
    let specs = super::resolve::pathspecs_from_cwd(&repo, cwd, args.paths);
    let filter = PathFilter::new(&specs)?;
    let changes = changes::changed_model_files(&repo, &base, head.as_deref(), &filter)?;
    let head_label = head.clone().unwrap_or_else(|| "worktree".to_owned());
    let color = args.color;
    let mut text = String::new();
    let mut files = Vec::new();
    let mut sides = Vec::with_capacity(changes.len());
    for change in &changes {
        sides.push((
            change.old_side(&repo, &base)?,
            change.new_side(&repo, &head_label)?,
        ));
    }
    super::remote::complete_absent(&repo, side_names(&changes, &mut sides));
    for (change, (old, new)) in changes.iter().zip(sides) {
        let blobs_differ = change.old_id.is_none() || change.new_id != change.old_id;
        if args.json {
            let diff = match (
                old.as_ref().and_then(ModelSide::artifact),
                new.as_ref().and_then(ModelSide::artifact),
            ) {
                (Some(a), Some(b)) => Some(crate::render::json::diff_value(
                    &crate::diff::StructuralDiff::between(a, b),
                )),
                _ => None,
            };
            files.push(FileReport {
                status: change.status.name(),
                old_path: change.old_path.clone(),
                new_path: change.new_path.clone(),
                old: old.as_ref().map(ModelSide::json),
                new: new.as_ref().map(ModelSide::json),
                diff,
            });
        } else {
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(&super::driver::render_change(
                color,
                change.old_path.as_deref(),
                change.new_path.as_deref(),
                old.as_ref(),
                new.as_ref(),
                blobs_differ,
            ));
        }
    }
    if args.json {
        let report = DiffReport {
            schema: crate::SCHEMA_VERSION,
            base,
            head,
            files,
        };
        text = serde_json::to_string_pretty(&report).expect("JSON of plain data cannot fail");
        text.push('\n');
    }
    Ok(GitDiffOutput {
        text,
        changed: !changes.is_empty(),
    })
}

/// Each side with the path messages name it by, for reading absent LFS objects remotely.
pub(crate) fn side_names<'a>(
    changes: &[changes::FileChange],
    sides: &'a mut [(Option<ModelSide>, Option<ModelSide>)],
) -> Vec<(String, &'a mut ModelSide)> {
    let mut named = Vec::new();
    for (change, (old, new)) in changes.iter().zip(sides.iter_mut()) {
        if let (Some(side), Some(path)) = (old.as_mut(), &change.old_path) {
            named.push((path.clone(), side));
        }
        if let (Some(side), Some(path)) = (new.as_mut(), &change.new_path) {
            named.push((path.clone(), side));
        }
    }
    named
}
