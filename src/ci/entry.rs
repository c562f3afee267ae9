//! One changed model file of a `ci` run: its two sides, their structural diff, the counts of
//! what changed, and the text shown for it.

use std::fmt::Write;

use crate::diff::{DiffCounts, StructuralDiff};
use crate::git::models::ModelGroup;
use crate::git::{FileChange, ModelSide};

/// One changed model file.
pub struct FileEntry {
    pub change: FileChange,
    pub old: Option<ModelSide>,
    pub new: Option<ModelSide>,
    /// When both sides are parsed models.
    pub diff: Option<StructuralDiff>,
    /// Set when the entry is a multi-file model (its paths are the model's name).
    pub model: Option<ModelGroup>,
    /// With `--values`, when both sides are models: their value diff, or why it was skipped.
    pub values: Option<crate::git::values::ValuesOutcome>,
}

/// Tensor and metadata changes of a file, when known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counts {
    Known(DiffCounts),
    /// A side is not a readable model (LFS object not fetched, unreadable file).
    Unknown,
}

impl FileEntry {
    pub fn path(&self) -> &str {
        self.change.path()
    }

    /// Whether `--fail-on change` counts the entry: any changed file; a multi-file model
    /// unless only its layout changed (see `git::models::ReportEntry::counts_as_change`).
    pub fn counts_as_change(&self) -> bool {
        self.model.is_none() || self.diff.as_ref().is_none_or(|d| !d.only_layout_changed())
    }

    /// The file an annotation about this entry points to: the file, or for a multi-file model
    /// its index or first part.
    pub fn annotation_path(&self) -> &str {
        match &self.model {
            Some(model) => &model.anchor,
            None => self.path(),
        }
    }

    /// The file's format(s): `gguf`, `gguf → safetensors`, `link` for a symbolic link, or
    /// `?` when no side was read.
    pub fn format(&self) -> String {
        let name = |s: &Option<ModelSide>| match s {
            Some(ModelSide::Link { .. }) => Some("link"),
            _ => artifact(s).map(|a| a.format.name()),
        };
        match (name(&self.old), name(&self.new)) {
            (Some(a), Some(b)) if a != b => format!("{a} → {b}"),
            (Some(a), _) | (None, Some(a)) => a.to_owned(),
            (None, None) => "?".to_owned(),
        }
    }

    pub fn counts(&self) -> Counts {
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

    /// The plain-text body of the file's section: the structural diff, a summary of an
    /// added or removed model, or why the structure is not shown.
    pub fn details(&self) -> String {
        let palette = crate::render::Palette::plain();
        let mut out = String::new();
        if let Some(model) = &self.model {
            out.push_str("multi-file model; changed files:\n");
            for file in &model.files {
                let _ = writeln!(out, "  {}", crate::render::escape::shown(file));
            }
        }
        let blobs_differ = self.change.old_id != self.change.new_id;
        if let Some(diff) = &self.diff {
            out.push_str(&crate::render::text::diff_or_identical(
                diff,
                &palette,
                blobs_differ,
            ));
        } else {
            match (&self.old, &self.new) {
                (None, Some(new)) => match new.artifact() {
                    Some(a) => {
                        out.push_str("new file:\n");
                        out.push_str(&crate::render::text::inspect(a, &palette, false, false));
                    }
                    None => push_note(&mut out, "new", new, Side::New),
                },
                (Some(old), None) => match old.artifact() {
                    Some(a) => {
                        out.push_str("deleted file:\n");
                        out.push_str(&crate::render::text::id(a));
                    }
                    None => push_note(&mut out, "old", old, Side::Old),
                },
                (Some(old), Some(new)) => {
                    push_note(&mut out, "old", old, Side::Old);
                    push_note(&mut out, "new", new, Side::New);
                }
                (None, None) => {}
            }
        }
        if let Some(values) = &self.values {
            out.push_str(&crate::render::values::text_or_skipped(
                values.as_ref(),
                &palette,
            ));
        }
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
}

impl FileEntry {
    /// The "weights" cell: how many tensors' values changed and the largest rel_l2, or why the
    /// values were not compared; None without `--values`.
    pub fn weights(&self) -> Option<String> {
        Some(match self.values.as_ref()? {
            Ok(values) => crate::render::values::summary(values),
            Err(_) => "not compared (see details)".to_owned(),
        })
    }
}

fn artifact(side: &Option<ModelSide>) -> Option<&crate::Artifact> {
    side.as_ref().and_then(ModelSide::artifact)
}

fn pointer(side: &Option<ModelSide>) -> Option<&crate::git::lfs::Pointer> {
    side.as_ref().and_then(ModelSide::pointer)
}

#[derive(Clone, Copy)]
enum Side {
    Old,
    New,
}

fn push_note(out: &mut String, label: &str, side: &ModelSide, which: Side) {
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
            let _ = writeln!(out, "{label}: {}", crate::render::escape::shown(&note));
        }
    }
}

/// Why a side has no structure, with what to do about it in a workflow.
fn side_note(side: &ModelSide, which: Side) -> String {
    match side {
        ModelSide::Absent {
            pointer,
            remote: None,
        } => {
            let hint = match which {
                Side::Old => "fetch the base commit's LFS objects (`git lfs fetch origin BASE`)",
                Side::New => "check out with `lfs: true` (or run `git lfs pull`)",
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
        Counts::Known(c) => format!(
            "tensors +{} −{} ~{}, metadata +{} −{} ~{}",
            c.tensors_added,
            c.tensors_removed,
            c.tensors_changed,
            c.metadata_added,
            c.metadata_removed,
            c.metadata_changed
        ),
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
