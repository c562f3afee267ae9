//! One compared model file — a changed file, or the changed files of one multi-file model — with
//! both sides, their structural diff and, when asked, their value diff. Built in one place
//! ([`compare_each`]) for `weight-inspect git diff` and `ci`, and rendered by each of their outputs:
//! text, JSON ([`ComparedFile::json`]), Markdown and SARIF.

use std::fmt::Write;

use serde::Serialize;

use super::changes::FileChange;
use super::error::GitError;
use super::lfs::Pointer;
use super::models::{ModelGroup, Snapshot};
use super::reader::SideReader;
use super::side::{ModelSide, SideJson};
use super::values::ValuesOutcome;
use crate::cmp::BytesOutcome;
use crate::diff::{DiffCounts, StructuralDiff};
use crate::read::Content;

/// One compared model file.
pub(crate) struct ComparedFile {
    /// For a multi-file model: a change of the model's name (`dir/x.safetensors.index.json` or
    /// `dir/NAME-*-of-0000N.gguf`) without blob ids.
    pub change: FileChange,
    pub old: Option<ModelSide>,
    pub new: Option<ModelSide>,
    /// Set for a multi-file model: its changed files and where its parts are.
    pub model: Option<ModelGroup>,
    /// When both sides are parsed models.
    pub diff: Option<StructuralDiff>,
    /// When values were asked for and both sides are models: their value diff, or why it was
    /// not computed.
    pub values: Option<ValuesOutcome>,
    /// With a reference model (its path): this GGUF compared with it as a conversion, or why
    /// not.
    pub conversion: Option<(String, super::values::ConversionOutcome)>,
    /// How the two sides' bytes compare, when both are models of one file (set by
    /// [`compare_each`]).
    pub bytes: Option<BytesOutcome>,
}

/// Reads both sides of `changes` (grouping the shards of each multi-file model into one file)
/// and compares them (with `values`, also their weight values where both sides are local),
/// handed to `sink` a window of files at a time in path order, each window
/// dropped before the next is read: a report written from here holds a bounded number of
/// models, however many files changed.
pub(crate) fn compare_each(
    reader: &SideReader<'_>,
    old: Snapshot<'_>,
    new: Snapshot<'_>,
    changes: Vec<FileChange>,
    values: bool,
    reference: Option<&str>,
    mut sink: impl FnMut(Vec<ComparedFile>) -> Result<(), GitError>,
) -> Result<(), GitError> {
    // The reference model, loaded at the first GGUF compared with it.
    let mut reference_model = None;
    super::models::each_window(
        reader,
        old,
        new,
        changes,
        |(change, old, new, model)| ComparedFile::new(change, old, new, model),
        |mut files| {
            for file in &mut files {
                file.bytes = file.compare_bytes(reader.repo());
            }
            if values && let Some(repo) = reader.repo() {
                for file in &mut files {
                    file.values = super::values::compare_change(
                        repo,
                        &file.change,
                        file.model.as_ref(),
                        file.old.as_ref(),
                        file.new.as_ref(),
                    );
                }
                if let Some(path) = reference {
                    conversions(repo, new, path, &mut reference_model, &mut files);
                }
            }
            sink(files)
        },
    )
}

/// Compares every changed GGUF in the reference's directory with the reference, as a
/// conversion of it.
fn conversions(
    repo: &gix::Repository,
    new: Snapshot<'_>,
    path: &str,
    reference: &mut Option<ReferenceModel>,
    files: &mut [ComparedFile],
) {
    let dir = |p: &str| p.rsplit_once('/').map_or("", |(d, _)| d).to_owned();
    let reference_dir = dir(path);
    for file in files.iter_mut() {
        let Some(new_side) = &file.new else { continue };
        let is_gguf = match new_side.artifact() {
            Some(a) => a.format == crate::artifact::Format::Gguf,
            None => file.change.path().ends_with(".gguf"),
        };
        if !is_gguf || file.model.is_some() || dir(file.change.path()) != reference_dir {
            continue;
        }
        let loaded =
            reference.get_or_insert_with(|| super::values::reference_model(repo, new, path));
        file.conversion = Some((
            path.to_owned(),
            match loaded {
                Ok(model) => {
                    super::values::compare_conversion(repo, &file.change, new_side, model, path)
                }
                Err(why) => Err(super::values::ValuesSkipped::Reference(why.to_string())),
            },
        ));
    }
}

/// A conversion's reference model as loaded (or why it could not be).
type ReferenceModel =
    Result<(crate::artifact::Artifact, crate::values::ModelBytes), super::values::ValuesSkipped>;

/// Tensor and metadata changes of a file, when known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Counts {
    Known(DiffCounts),
    /// A side is not a readable model (LFS object not fetched, unreadable file).
    Unknown,
}

/// The JSON of a compared file (schema 1) in `git diff --json` and, with the format and counts
/// of its row, in `ci --json`.
#[derive(Serialize)]
pub(crate) struct FileJson<'a> {
    /// For a multi-file model (whose paths are the model's name): the changed files.
    #[serde(skip_serializing_if = "Option::is_none")]
    model_files: Option<&'a [String]>,
    status: &'static str,
    old_path: Option<&'a str>,
    new_path: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    format: Option<String>,
    old: Option<SideJson>,
    new: Option<SideJson>,
    /// None inside when a side is not a readable model.
    #[serde(skip_serializing_if = "Option::is_none")]
    counts: Option<Option<DiffCounts>>,
    /// The core's structural diff (schema 1) when both sides are models.
    diff: Option<serde_json::Value>,
    /// With values: the value diff, or `{"skipped": why}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    values: Option<serde_json::Value>,
    /// With a reference: the conversion report, or `{"skipped": why}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    conversion: Option<serde_json::Value>,
    /// With values: how the new side relates to the old (`relate`'s relation).
    #[serde(skip_serializing_if = "Option::is_none")]
    relation: Option<serde_json::Value>,
    /// How the sides' bytes compare, when both are models of one file.
    #[serde(skip_serializing_if = "Option::is_none")]
    bytes: Option<serde_json::Value>,
}

impl ComparedFile {
    /// A compared file with its structural diff (values are added by [`compare_each`]).
    pub(crate) fn new(
        change: FileChange,
        old: Option<ModelSide>,
        new: Option<ModelSide>,
        model: Option<ModelGroup>,
    ) -> ComparedFile {
        let diff = match (
            old.as_ref().and_then(ModelSide::artifact),
            new.as_ref().and_then(ModelSide::artifact),
        ) {
            (Some(a), Some(b)) => Some(StructuralDiff::between(a, b)),
            _ => None,
        };
        ComparedFile {
            change,
            old,
            new,
            model,
            diff,
            values: None,
            conversion: None,
            bytes: None,
        }
    }

    /// The bytes line(s) of the file (see [`super::bytes::text`]); empty without a bytes
    /// outcome.
    pub(crate) fn bytes_text(&self) -> String {
        match (&self.bytes, &self.old, &self.new) {
            (Some(bytes), Some(old), Some(new)) => {
                super::bytes::text(bytes, old.pointer(), new.pointer())
            }
            _ => String::new(),
        }
    }

    /// How the sides' bytes compare (see [`super::bytes`]); None for a multi-file model or
    /// when a side is not a model.
    fn compare_bytes(&self, repo: Option<&gix::Repository>) -> Option<BytesOutcome> {
        use super::bytes::{At, Located};
        let (diff, old, new) = (self.diff.as_ref()?, self.old.as_ref()?, self.new.as_ref()?);
        if self.model.is_some() {
            return None;
        }
        let change = &self.change;
        let old = Located {
            side: old,
            at: change.old_id.map(At::Blob),
            id: change.old_id,
        };
        let new = Located {
            side: new,
            at: match &change.new_worktree {
                Some(path) => Some(At::File(path)),
                None => change.new_id.map(At::Blob),
            },
            id: change.new_id.filter(|_| change.new_worktree.is_none()),
        };
        Some(super::bytes::compare_sides(repo, diff, old, new))
    }

    pub(crate) fn path(&self) -> &str {
        self.change.path()
    }

    /// Whether the file counts as a change for `--exit-code` and `ci --fail-on change`: any
    /// single file that changed; a multi-file model unless only its layout changed (the same
    /// structure in other files: a resharding).
    pub(crate) fn counts_as_change(&self) -> bool {
        self.model.is_none() || self.diff.as_ref().is_none_or(|d| !d.only_layout_changed())
    }

    /// The file an annotation about this file points to: the file, or for a multi-file model
    /// its index or first part.
    pub(crate) fn annotation_path(&self) -> &str {
        match &self.model {
            Some(model) => &model.anchor,
            None => self.path(),
        }
    }

    /// The file's format(s): `gguf`, `gguf → safetensors`, `link` for a symbolic link, or
    /// `?` when no side was read. A side with a format's magic whose header does not parse
    /// (a refused pickle) still names its format.
    pub(crate) fn format(&self) -> String {
        let name = |s: &Option<ModelSide>| match s.as_ref().map(|s| (s, s.content())) {
            Some((ModelSide::Link { .. }, _)) => Some("link"),
            Some((_, Some(Content::Invalid { format, .. }))) => Some(format.name()),
            Some((_, Some(Content::Delta(_) | Content::BadDelta { .. }))) => Some("wdelta"),
            _ => artifact(s).map(|a| a.format.name()),
        };
        match (name(&self.old), name(&self.new)) {
            (Some(a), Some(b)) if a != b => format!("{a} → {b}"),
            (Some(a), _) | (None, Some(a)) => a.to_owned(),
            (None, None) => "?".to_owned(),
        }
    }

    pub(crate) fn counts(&self) -> Counts {
        if let Some(diff) = &self.diff {
            return Counts::Known(diff.counts());
        }
        match (&self.old, &self.new) {
            (None, Some(_)) => match artifact(&self.new) {
                Some(a) => Counts::Known(DiffCounts {
                    tensors_added: a.tensors.len(),
                    metadata_added: a.metadata.len(),
                    ..DiffCounts::default()
                }),
                None => Counts::Unknown,
            },
            (Some(_), None) => match artifact(&self.old) {
                Some(a) => Counts::Known(DiffCounts {
                    tensors_removed: a.tensors.len(),
                    metadata_removed: a.metadata.len(),
                    ..DiffCounts::default()
                }),
                None => Counts::Unknown,
            },
            _ => Counts::Unknown,
        }
    }

    /// The JSON of the file; `row`: with its format and counts, as `ci` reports them.
    pub(crate) fn json(&self, row: bool) -> FileJson<'_> {
        FileJson {
            model_files: self.model.as_ref().map(|m| m.files.as_slice()),
            status: self.change.status.name(),
            old_path: self.change.old_path.as_deref(),
            new_path: self.change.new_path.as_deref(),
            format: row.then(|| self.format()),
            old: self.old.as_ref().map(ModelSide::json),
            new: self.new.as_ref().map(ModelSide::json),
            counts: row.then(|| match self.counts() {
                Counts::Known(c) => Some(c),
                Counts::Unknown => None,
            }),
            diff: self.diff.as_ref().map(crate::render::json::diff_value),
            values: self.values.as_ref().map(|v| match v {
                Ok(values) => match artifact(&self.new) {
                    Some(new) => crate::render::values::json_value_grouped(values, new),
                    None => crate::render::values::json_value(values),
                },
                Err(why) => serde_json::json!({ "skipped": why.to_string() }),
            }),
            bytes: self.bytes.as_ref().map(crate::render::bytes::json),
            relation: self
                .relation()
                .map(|r| crate::render::lineage::relation_json(&r, "the old side")),
            conversion: self.conversion.as_ref().map(|(reference, c)| match c {
                Ok(c) => crate::render::conversion::json_value(c, reference, self.change.path()),
                Err(why) => {
                    serde_json::json!({ "reference": reference, "skipped": why.to_string() })
                }
            }),
        }
    }

    /// The conversion section: the report against the reference, or why there is none; empty
    /// without a reference.
    pub(crate) fn conversion_text(&self, palette: &crate::render::Palette) -> String {
        let Some((reference, outcome)) = &self.conversion else {
            return String::new();
        };
        match outcome {
            Ok(conversion) => format!(
                "\n{}",
                crate::render::conversion::text(conversion, reference, self.change.path(), palette)
            ),
            Err(why) => format!(
                "\n{}\n  not compared with the reference: {}\n",
                palette.heading("Conversion:"),
                crate::escape::terminal_safe(&why.to_string())
            ),
        }
    }

    /// The plain-text body of the file's section in a pull-request report: the structural
    /// diff, a summary of an added or removed model, or why the structure is not shown.
    /// Changes that repeat are grouped when `grouped_hint` is given (it says where each is).
    pub(crate) fn details(&self, grouped_hint: Option<&str>) -> String {
        let palette = crate::render::Palette::plain();
        let mut out = String::new();
        if let Some(model) = &self.model {
            out.push_str("multi-file model; changed files:\n");
            for file in &model.files {
                let _ = writeln!(out, "  {}", crate::escape::shown(file));
            }
        }
        let blobs_differ = self.change.old_id != self.change.new_id && self.bytes.is_none();
        if let Some(diff) = &self.diff {
            let view = match grouped_hint {
                Some(hint) => crate::render::text::TensorView::Grouped {
                    old: artifact(&self.old),
                    hint,
                },
                None => crate::render::text::TensorView::All,
            };
            out.push_str(&crate::render::text::diff_or_identical_in(
                diff,
                &palette,
                blobs_differ,
                view,
            ));
            out.push_str(&self.bytes_text());
        } else {
            match (&self.old, &self.new) {
                (None, Some(new)) => match new.artifact() {
                    Some(a) => {
                        out.push_str("new file:\n");
                        out.push_str(&crate::render::text::inspect(a, &palette, false, false));
                    }
                    None => push_note(&mut out, "new", new, Which::New),
                },
                (Some(old), None) => match old.artifact() {
                    Some(a) => {
                        out.push_str("deleted file:\n");
                        out.push_str(&crate::render::text::id(a));
                    }
                    None => push_note(&mut out, "old", old, Which::Old),
                },
                (Some(old), Some(new)) => {
                    push_note(&mut out, "old", old, Which::Old);
                    push_note(&mut out, "new", new, Which::New);
                }
                (None, None) => {}
            }
        }
        if let Some(relation) = self.relation() {
            let _ = writeln!(
                out,
                "relation: {}",
                crate::render::lineage::sentence(&relation, "the old side")
            );
        }
        if let Some(values) = &self.values {
            out.push_str(&crate::render::values::text_or_skipped(
                values.as_ref().map_err(|e| e as &dyn std::fmt::Display),
                &palette,
            ));
            if let (Ok(values), Some(new)) = (values, artifact(&self.new)) {
                out.push_str(&crate::render::values::by_group(values, new));
            }
        }
        out.push_str(&self.conversion_text(&palette));
        // Without both structures, the LFS pointers still tell whether the content changed.
        if self.diff.is_none()
            && let (Some(a), Some(b)) = (pointer(&self.old), pointer(&self.new))
        {
            if a == b {
                let _ = writeln!(out, "LFS object unchanged: {a}");
            } else {
                let _ = writeln!(out, "LFS object: {a} -> {b}");
            }
        }
        out
    }

    /// How the new side relates to the old, from the value diff already made (None without
    /// values, or when a side is not a model).
    pub(crate) fn relation(&self) -> Option<crate::lineage::Judged> {
        let Some(Ok(values)) = &self.values else {
            return None;
        };
        Some(crate::lineage::from_value_diff(
            artifact(&self.old)?,
            artifact(&self.new)?,
            values,
        ))
    }

    /// The "weights" cell: how many tensors' values changed and the largest rel_l2, or why the
    /// values were not compared; None without values.
    pub(crate) fn weights(&self) -> Option<String> {
        let values = self.values.as_ref().map(|v| match v {
            Ok(values) => {
                let summary = crate::render::values::summary(values);
                match self.relation() {
                    Some(r) => format!(
                        "{summary}; {}",
                        crate::render::lineage::sentence(&r, "the base")
                    ),
                    None => summary,
                }
            }
            Err(_) => "not compared (see details)".to_owned(),
        });
        let conversion = self.conversion.as_ref().map(|(reference, c)| match c {
            Ok(c) => format!(
                "conversion of {}: {}",
                crate::escape::shown(reference),
                crate::render::conversion::summary(c)
            ),
            Err(_) => format!(
                "conversion of {}: not compared (see details)",
                crate::escape::shown(reference)
            ),
        });
        match (values, conversion) {
            (Some(v), Some(c)) => Some(format!("{v}; {c}")),
            (v, c) => v.or(c),
        }
    }
}

fn artifact(side: &Option<ModelSide>) -> Option<&crate::artifact::Artifact> {
    side.as_ref().and_then(ModelSide::artifact)
}

fn pointer(side: &Option<ModelSide>) -> Option<&Pointer> {
    side.as_ref().and_then(ModelSide::pointer)
}

#[derive(Clone, Copy)]
enum Which {
    Old,
    New,
}

fn push_note(out: &mut String, label: &str, side: &ModelSide, which: Which) {
    match side.artifact() {
        Some(a) => {
            let _ = writeln!(
                out,
                "{label}: {} model, structural hash {}",
                a.format.name(),
                crate::identity::structural_hash(a)
            );
        }
        None => {
            let note = side_note(side, which);
            // Its names are shown escaped by the errors it holds; the rest escaped here.
            let _ = writeln!(out, "{label}: {}", crate::escape::shown_message(&note));
        }
    }
}

/// Why a side has no structure, with what to do about it in a workflow.
fn side_note(side: &ModelSide, which: Which) -> String {
    match side {
        ModelSide::Absent {
            pointer,
            remote: None,
        } => {
            let hint = match which {
                Which::Old => "fetch the base commit's LFS objects (`git lfs fetch origin BASE`)",
                Which::New => "check out with `lfs: true` (or run `git lfs pull`)",
            };
            format!("LFS object {pointer} is not present locally; to compare structures, {hint}")
        }
        other => other.note().unwrap_or_default(),
    }
}

/// The first 12 hex digits of a side's structural hash, `lfs:XXXXXXXX` for an LFS object
/// that is not present, `-` for no side, `?` for a side that is not a readable model.
pub(crate) fn short_hash(side: Option<&ModelSide>) -> String {
    match side {
        None => "-".to_owned(),
        Some(ModelSide::Absent { pointer, .. }) => format!("lfs:{}", &pointer.oid[..8]),
        Some(side) => match side.artifact() {
            Some(artifact) => crate::identity::structural_hash(artifact)[..12].to_owned(),
            None => "?".to_owned(),
        },
    }
}

/// `tensors +1 −0 ~2, metadata +0 −0 ~1`, or `structure not compared`.
pub(crate) fn counts_text(counts: Counts) -> String {
    match counts {
        Counts::Known(c) => c.to_string(),
        Counts::Unknown => "structure not compared".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_text_uses_signs() {
        let c = DiffCounts {
            tensors_added: 1,
            metadata_changed: 2,
            ..DiffCounts::default()
        };
        assert_eq!(
            counts_text(Counts::Known(c)),
            "tensors +1 −0 ~0, metadata +0 −0 ~2"
        );
    }
}
