//! `weight-inspect git diff`: the model files changed between two revisions (or a revision
//! and the work tree), each rendered as the external driver renders it, or as one JSON report.

use std::path::Path;

use serde::Serialize;

use super::GitError;
use super::changes::{self, PathFilter};
use super::models::Snapshot;
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
    /// Also compare weight values where both sides are local (see [`super::values`]).
    pub values: bool,
    pub remote: &'a super::RemoteOptions,
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
    /// For a multi-file model (whose paths are the model's name): the changed files.
    #[serde(skip_serializing_if = "Option::is_none")]
    model_files: Option<Vec<String>>,
    status: &'static str,
    old_path: Option<String>,
    new_path: Option<String>,
    old: Option<SideJson>,
    new: Option<SideJson>,
    /// The core's structural diff (schema 1) when both sides are models.
    diff: Option<serde_json::Value>,
    /// With --values: the value diff, or `{"skipped": why}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    values: Option<serde_json::Value>,
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
    let new_snapshot = match &head {
        Some(rev) => Snapshot::Tree {
            rev,
            label: &head_label,
        },
        None => Snapshot::WorkTree,
    };
    let old_snapshot = Snapshot::Tree {
        rev: &base,
        label: &base,
    };
    let reader = super::SideReader::new(&repo, args.remote);
    let entries = super::models::entries(&reader, old_snapshot, new_snapshot, changes)?;
    let color = args.color;
    let mut text = String::new();
    let mut files = Vec::new();
    for entry in &entries {
        let (change, old, new) = (&entry.change, &entry.old, &entry.new);
        let blobs_differ = change.old_id.is_none() || change.new_id != change.old_id;
        let values = args
            .values
            .then(|| {
                super::values::compare_change(
                    &repo,
                    change,
                    entry.model.as_ref(),
                    old.as_ref(),
                    new.as_ref(),
                )
            })
            .flatten();
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
                model_files: entry.model.as_ref().map(|m| m.files.clone()),
                status: change.status.name(),
                old_path: change.old_path.clone(),
                new_path: change.new_path.clone(),
                old: old.as_ref().map(ModelSide::json),
                new: new.as_ref().map(ModelSide::json),
                diff,
                values: values.map(|v| match v {
                    Ok(values) => crate::render::values::json_value(&values),
                    Err(why) => serde_json::json!({ "skipped": why }),
                }),
            });
        } else {
            if !text.is_empty() {
                text.push('\n');
            }
            let rendered = super::driver::render_change(
                color,
                change.old_path.as_deref(),
                change.new_path.as_deref(),
                old.as_ref(),
                new.as_ref(),
                blobs_differ,
            );
            text.push_str(&with_model_files(rendered, entry.model.as_ref()));
            if let Some(values) = values {
                text.push_str(&crate::render::values::text_or_skipped(
                    values.as_ref(),
                    &crate::render::Palette::new(color),
                ));
            }
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
        changed: entries
            .iter()
            .any(super::models::ReportEntry::counts_as_change),
    })
}

/// Adds the list of a multi-file model's changed files under the header line.
fn with_model_files(rendered: String, model: Option<&super::models::ModelGroup>) -> String {
    let Some(model) = model else {
        return rendered;
    };
    let (header, body) = rendered.split_once('\n').unwrap_or((&rendered, ""));
    let mut out = format!("{header}\nmulti-file model; changed files:\n");
    for file in &model.files {
        out.push_str(&format!("  {}\n", crate::render::escape::shown(file)));
    }
    out.push_str(body);
    out
}
