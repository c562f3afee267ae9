//! `weight-inspect git diff`: the model files changed between two revisions (or a revision
//! and the work tree), each rendered as the external driver renders it, or as one JSON report.

use std::path::Path;

use rayon::prelude::*;
use serde::Serialize;

use super::changes::{self, PathFilter};
use super::compared::{ComparedFile, FileJson};
use super::error::GitError;
use super::models::Snapshot;
use crate::output::Format;
use crate::render::report::{ALL_HINT, DiffForm};

/// What to compare and how to show it.
pub(crate) struct GitDiffOptions<'a> {
    /// Zero revisions: HEAD against the work tree; one: REV against the work tree; two: REV
    /// against REV.
    pub revs: &'a [String],
    /// Pathspecs relative to the current directory.
    pub paths: &'a [String],
    /// One JSON report, or else text (the external driver's rendering per file).
    pub format: Format,
    pub color: bool,
    /// Also compare weight values where both sides are local (see [`super::values`]).
    pub values: bool,
    /// A conversion's source, relative to the current directory (see [`super::values`]).
    pub reference: Option<&'a str>,
    pub remote: &'a super::reader::RemoteOptions,
    /// The text form: grouped (the default), every change, `--stat` or `--name-only`.
    pub form: DiffForm,
}

/// The JSON report's fields before its files (the files are written one window at a time).
#[derive(Serialize)]
struct DiffReportHead<'a> {
    schema: u32,
    base: &'a str,
    /// None: the work tree.
    head: Option<&'a str>,
}

/// Compares and writes the report through `write` as it goes (a window of files at a time, so
/// memory does not grow with the number of changed files); returns whether any model file
/// changed.
pub(crate) fn git_diff(
    cwd: &Path,
    args: &GitDiffOptions<'_>,
    write: &mut dyn FnMut(&str) -> std::io::Result<()>,
) -> Result<bool, GitError> {
    let repo = super::objects::open_repo(cwd)?;
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
    let reader = super::reader::SideReader::new(&repo, args.remote);
    let reference = args
        .reference
        .map(|r| super::resolve::pathspecs_from_cwd(&repo, cwd, &[r.to_owned()]).remove(0));
    let stdout_error = |source| GitError::Io {
        path: "<stdout>".into(),
        source,
    };
    let mut write = |text: &str| write(text).map_err(stdout_error);
    let json = args.format == Format::Json;
    if json {
        // The same bytes as the whole report pretty-printed at once: each file at depth 2.
        let head_json = serde_json::to_string_pretty(&DiffReportHead {
            schema: crate::identity::SCHEMA_VERSION,
            base: &base,
            head: head.as_deref(),
        })
        .expect("JSON of plain data cannot fail");
        write(head_json.trim_end_matches("\n}"))?;
        write(",\n  \"files\": [")?;
    }
    let mut changed = false;
    let mut first = true;
    super::compared::compare_each(
        &reader,
        old_snapshot,
        new_snapshot,
        changes,
        args.values,
        reference.as_deref(),
        |files| {
            changed |= files.iter().any(ComparedFile::counts_as_change);
            let blocks: Vec<String> = files
                .par_iter()
                .map(|f| {
                    if json {
                        indented_json(&f.json(false))
                    } else {
                        text_in(f, args.color, args.form)
                    }
                })
                .collect();
            for block in blocks {
                // --name-only's lines follow each other as one list.
                let separator = match (json, first) {
                    (true, true) => "\n",
                    (true, false) => ",\n",
                    (false, true) => "",
                    (false, false) if args.form == DiffForm::NameOnly => "",
                    (false, false) => "\n",
                };
                first = false;
                write(separator)?;
                write(&block)?;
            }
            Ok(())
        },
    )?;
    if json {
        write(if first { "]\n}\n" } else { "\n  ]\n}\n" })?;
    }
    Ok(changed)
}

/// A file's JSON pretty-printed as an element of the report's `files` (four spaces deeper;
/// strings hold no raw line break, so every line is indented alike).
fn indented_json(file: &FileJson<'_>) -> String {
    indented(&serde_json::to_string_pretty(file).expect("JSON of plain data cannot fail"))
}

/// Pretty-printed JSON four spaces deeper, as an element of a report's `files` (`git diff
/// --json` and `ci --json` nest them alike).
pub(crate) fn indented(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.lines().count() * 4);
    for (i, line) in text.lines().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str("    ");
        out.push_str(line);
    }
    out
}

/// A compared file in the text form `form` names.
fn text_in(file: &ComparedFile, color: bool, form: DiffForm) -> String {
    match form {
        DiffForm::Stat => stat_of(file),
        DiffForm::NameOnly => names_of(file),
        DiffForm::Grouped => text_of(file, color, Some(ALL_HINT)),
        DiffForm::All => text_of(file, color, None),
    }
}

/// `--stat`: the file's path and status, then the diff's counts, bytes and parameters (or,
/// for an added or deleted model, its size).
fn stat_of(file: &ComparedFile) -> String {
    let old = file.old.as_ref().and_then(super::side::ModelSide::artifact);
    let new = file.new.as_ref().and_then(super::side::ModelSide::artifact);
    let path = crate::escape::shown(file.change.path()).into_owned();
    let status = file.change.status.name();
    match (&file.diff, old, new) {
        (Some(diff), Some(old), Some(new)) => format!(
            "{path} ({status})\n{}",
            crate::render::stat::stat(diff, old, new, "  ")
        ),
        (_, None, Some(model)) | (_, Some(model), None) => format!(
            "{path} ({status})\n  {}, {}, {} parameters\n",
            crate::diff::plural(model.tensors.len(), "tensor"),
            crate::render::text::human_bytes(model.layout.file_size),
            crate::render::text::group_digits(model.parameter_counts().0)
        ),
        _ => format!("{path} ({status}): not compared as models\n"),
    }
}

/// `--name-only`: `PATH<TAB>TENSOR` for each tensor added, removed or changed (every tensor
/// of an added or deleted model).
fn names_of(file: &ComparedFile) -> String {
    let prefix = format!("{}\t", crate::escape::shown(file.change.path()));
    if let Some(diff) = &file.diff {
        return crate::render::stat::name_only(diff, &prefix);
    }
    let side = match (&file.old, &file.new) {
        (None, Some(side)) | (Some(side), None) => side.artifact(),
        _ => None,
    };
    let mut out = String::new();
    for name in side.iter().flat_map(|a| a.tensors.keys()) {
        out.push_str(&prefix);
        out.push_str(&crate::escape::shown(name));
        out.push('\n');
    }
    out
}

/// A compared file as the external driver renders it, with a multi-file model's changed files
/// and the value diff; grouped when `all_hint` is given.
fn text_of(file: &ComparedFile, color: bool, all_hint: Option<&str>) -> String {
    let change = &file.change;
    let rendered = super::driver::render_change(
        color,
        change.old_path.as_deref(),
        change.new_path.as_deref(),
        file.old.as_ref(),
        file.new.as_ref(),
        |_| file.bytes.is_some().then(|| file.bytes_text()),
        all_hint,
    );
    let mut text = with_model_files(rendered, file.model.as_ref());
    if let Some(relation) = file.relation() {
        text.push_str(&format!(
            "relation: {}\n",
            crate::render::lineage::sentence(&relation, "the old side")
        ));
    }
    if let Some(values) = &file.values {
        text.push_str(&crate::render::values::text_or_skipped(
            values.as_ref().map_err(|e| e as &dyn std::fmt::Display),
            &crate::render::Palette::new(color),
        ));
        if let (Ok(values), Some(new)) = (values, file.new.as_ref().and_then(|s| s.artifact())) {
            text.push_str(&crate::render::values::by_group(values, new));
        }
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
        out.push_str(&format!("  {}\n", crate::escape::shown(file)));
    }
    out.push_str(body);
    out
}
