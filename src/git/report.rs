//! `weight-inspect git diff`: the model files changed between two revisions (or a revision
//! and the work tree), each rendered as the external driver renders it, or as one JSON report.

use std::path::Path;

use rayon::prelude::*;
use serde::Serialize;

use super::GitError;
use super::changes::{self, PathFilter};
use super::compared::{ComparedFile, FileJson};
use super::models::Snapshot;

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
    /// A conversion's source, relative to the current directory (see [`super::values`]).
    pub reference: Option<&'a str>,
    pub remote: &'a super::RemoteOptions,
}

/// The rendered report and whether any model file changed.
pub struct GitDiffOutput {
    pub text: String,
    pub changed: bool,
}

#[derive(Serialize)]
struct DiffReport<'a> {
    schema: u32,
    base: String,
    /// None: the work tree.
    head: Option<String>,
    files: Vec<FileJson<'a>>,
}

pub fn git_diff(cwd: &Path, args: &GitDiffOptions<'_>) -> Result<GitDiffOutput, GitError> {
    let repo = super::open_repo(cwd)?;
    let (base, head) = match args.revs {
        [] => ("HEAD".to_owned(), None),
        [base] => (base.clone(), None),
        [base, head] => (base.clone(), Some(head.clone())),
        _ => {
            return Err(GitError::TooManyRevisions);
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
    let reference = args
        .reference
        .map(|r| super::resolve::pathspecs_from_cwd(&repo, cwd, &[r.to_owned()]).remove(0));
    let compared = super::compared::compare(
        &reader,
        old_snapshot,
        new_snapshot,
        changes,
        args.values,
        reference.as_deref(),
    )?;
    let text = if args.json {
        let report = DiffReport {
            schema: crate::identity::SCHEMA_VERSION,
            base,
            head,
            files: compared.iter().map(|f| f.json(false)).collect(),
        };
        let mut text =
            serde_json::to_string_pretty(&report).expect("JSON of plain data cannot fail");
        text.push('\n');
        text
    } else {
        let blocks: Vec<String> = compared
            .par_iter()
            .map(|f| text_of(f, args.color))
            .collect();
        blocks.join("\n")
    };
    Ok(GitDiffOutput {
        text,
        changed: compared.iter().any(ComparedFile::counts_as_change),
    })
}

/// A compared file as the external driver renders it, with a multi-file model's changed files
/// and the value diff.
fn text_of(file: &ComparedFile, color: bool) -> String {
    let change = &file.change;
    let blobs_differ = change.old_id.is_none() || change.new_id != change.old_id;
    let rendered = super::driver::render_change(
        color,
        change.old_path.as_deref(),
        change.new_path.as_deref(),
        file.old.as_ref(),
        file.new.as_ref(),
        blobs_differ,
    );
    let mut text = with_model_files(rendered, file.model.as_ref());
    if let Some(values) = &file.values {
        text.push_str(&crate::render::values::text_or_skipped(
            values.as_ref().map_err(|e| e as &dyn std::fmt::Display),
            &crate::render::Palette::new(color),
        ));
    }
    text.push_str(&file.conversion_text(&crate::render::Palette::new(color)));
    text
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
