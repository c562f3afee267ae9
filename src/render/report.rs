//! The reports the commands print, each renderable as text or as schema-1 JSON (and `check`'s
//! also as GitHub workflow commands or SARIF): one trait, so
//! that the form is chosen once where the arguments are parsed and one place
//! ([`crate::output::Output::print`]) writes whichever report in it.

use std::path::Path;

use super::order::TensorOrder;
use super::palette::Palette;
use super::text::TensorView;
use crate::artifact::Artifact;
use crate::conversion::Conversion;
use crate::diff::StructuralDiff;
use crate::escape::shown_path;
use crate::formats::wdelta::lossless::LosslessContainer;
use crate::formats::wdelta::{AnyWdelta, DeltaSummary, WdeltaFile};
use crate::values::ValueDiff;

/// A result a command prints, in either form.
pub(crate) trait Report {
    /// The human text (colored through `palette`).
    fn text(&self, palette: &Palette) -> String;
    /// The JSON document (`"schema": 1` first).
    fn json(&self) -> String;
    /// GitHub workflow commands, for a report that has them (`check`).
    fn github(&self) -> Option<String> {
        None
    }
    /// A SARIF 2.1.0 log, for a report that has one (`check`).
    fn sarif(&self) -> Option<String> {
        None
    }
}

/// `inspect`: a model's format, metadata, tensors and structural hash.
pub(crate) struct Inspect<'a> {
    pub artifact: &'a Artifact,
    pub order: TensorOrder,
    /// Text: every tensor rather than the first few.
    pub all: bool,
    /// Text: each shard or part with its own hash.
    pub shards: bool,
    /// JSON: arrays in full rather than summarized.
    pub full_arrays: bool,
}

impl Report for Inspect<'_> {
    fn text(&self, palette: &Palette) -> String {
        super::text::inspect_in(self.artifact, palette, self.all, self.shards, self.order)
    }
    fn json(&self) -> String {
        super::json::inspect_in(self.artifact, self.full_arrays, self.order)
    }
}

/// `id`: a model's structural identity.
pub(crate) struct Id<'a>(pub &'a Artifact);

impl Report for Id<'_> {
    fn text(&self, _: &Palette) -> String {
        super::text::id(self.0)
    }
    fn json(&self) -> String {
        super::json::id(self.0)
    }
}

/// `diff`: the structural diff of two models, in the text form the flags chose.
pub(crate) struct Structural<'a> {
    pub diff: &'a StructuralDiff,
    pub old: &'a Artifact,
    pub new: &'a Artifact,
    pub form: DiffForm,
}

/// The text forms of a diff (its JSON is one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DiffForm {
    /// Changes that repeat as one line (the default).
    Grouped,
    /// Every change on lines of its own (`--all`).
    All,
    /// Counts, bytes and parameters (`--stat`).
    Stat,
    /// The changed tensors' names (`--name-only`).
    NameOnly,
}

/// The hint a grouped diff gives, where `--all` is the flag.
pub(crate) const ALL_HINT: &str = "--all lists each";

impl DiffForm {
    /// The form `--stat`, `--name-only` and `--all` choose, in that order of precedence.
    pub(crate) fn from_flags(stat: bool, name_only: bool, all: bool) -> DiffForm {
        match (stat, name_only, all) {
            (true, _, _) => DiffForm::Stat,
            (_, true, _) => DiffForm::NameOnly,
            (_, _, true) => DiffForm::All,
            _ => DiffForm::Grouped,
        }
    }

    /// How the full diff lists its tensors in this form (`Stat` and `NameOnly` print none).
    pub(crate) fn view(self, old: &Artifact) -> TensorView<'_> {
        match self {
            DiffForm::Grouped => TensorView::Grouped {
                old: Some(old),
                hint: ALL_HINT,
            },
            _ => TensorView::All,
        }
    }
}

impl Report for Structural<'_> {
    fn text(&self, palette: &Palette) -> String {
        match self.form {
            DiffForm::Stat => super::stat::stat(self.diff, self.old, self.new, ""),
            DiffForm::NameOnly => super::stat::name_only(self.diff, ""),
            form => super::text::diff_in(self.diff, palette, form.view(self.old)),
        }
    }
    fn json(&self) -> String {
        super::json::diff(self.diff)
    }
}

/// `diff`: the structural diff, then how the bytes compare (the bytes line of
/// [`super::bytes`]; the JSON's `"bytes"` key).
pub(crate) struct StructuralAndBytes<'a> {
    pub structural: Structural<'a>,
    pub bytes: &'a crate::cmp::BytesOutcome,
}

impl Report for StructuralAndBytes<'_> {
    fn text(&self, palette: &Palette) -> String {
        let mut out = self.structural.text(palette);
        // A list of names stays a list.
        if self.structural.form == DiffForm::NameOnly {
            return out;
        }
        let line = super::bytes::text(self.bytes, super::bytes::Hint::Diff, true);
        if !line.is_empty() {
            if !out.is_empty() && !out.ends_with('\n') {
                out.push('\n');
            }
            out.push_str(&line);
        }
        out
    }
    fn json(&self) -> String {
        super::bytes::with_bytes_key(&self.structural.json(), self.bytes)
    }
}

/// `diff --values`: the structural diff, then the value diff.
pub(crate) struct Values<'a> {
    pub diff: &'a StructuralDiff,
    pub values: &'a ValueDiff,
    /// The old side, whose tensors name a grouped change's exceptions.
    pub old: &'a Artifact,
    /// The new side, whose groups (a training checkpoint's) sum the value changes up.
    pub new: &'a Artifact,
    /// Grouped or every change (`--all`).
    pub form: DiffForm,
}

impl Report for Values<'_> {
    fn text(&self, palette: &Palette) -> String {
        let view = self.form.view(self.old);
        let mut out = super::text::diff_or_identical_in(self.diff, palette, false, view);
        out.push('\n');
        out.push_str(&super::values::text(self.values, palette));
        out.push_str(&super::values::by_group(self.values, self.new));
        out
    }
    fn json(&self) -> String {
        super::values::json_grouped(self.diff, self.values, self.new)
    }
}

/// `diff --values` of a conversion: the converted model against its source.
pub(crate) struct ConversionReport<'a> {
    pub conversion: &'a Conversion,
    /// The source and the converted model as the command line named them.
    pub source: &'a str,
    pub target: &'a str,
}

impl Report for ConversionReport<'_> {
    fn text(&self, palette: &Palette) -> String {
        super::conversion::text(self.conversion, self.source, self.target, palette)
    }
    fn json(&self) -> String {
        super::conversion::json(self.conversion, self.source, self.target)
    }
}

/// A `.wdelta` given to `inspect` or `id`: the line every reader shows for it, then its
/// description when the whole file was read (it has no structural identity).
pub(crate) struct Wdelta<'a> {
    pub summary: &'a DeltaSummary,
    pub full: Option<&'a AnyWdelta>,
}

impl Report for Wdelta<'_> {
    fn text(&self, _: &Palette) -> String {
        match self.full {
            Some(delta) => ending_in_newline(super::wdelta::summary_and_description(delta)),
            None => format!("delta: {}\n", super::wdelta::summary_line(self.summary)),
        }
    }
    fn json(&self) -> String {
        ending_in_newline(match self.full {
            Some(delta) => super::wdelta::describe_any_json(delta),
            None => super::wdelta::summary_json(self.summary),
        })
    }
}

/// `delta inspect`: a `.wdelta`'s description, the text headed by the file's name.
pub(crate) struct DeltaFile<'a> {
    pub path: &'a Path,
    pub delta: Delta<'a>,
}

/// A `.wdelta` of either kind, borrowed.
pub(crate) enum Delta<'a> {
    Lossy(&'a WdeltaFile),
    Lossless(&'a LosslessContainer),
}

impl Report for DeltaFile<'_> {
    fn text(&self, _: &Palette) -> String {
        let head = format!("file: {}\n", shown_path(self.path));
        // Appended to the head: the description of a large delta is not copied again.
        match self.delta {
            Delta::Lossy(file) => super::wdelta::describe_after(head, file),
            Delta::Lossless(c) => super::wdelta::describe_lossless_after(head, c),
        }
    }
    fn json(&self) -> String {
        let mut out = match self.delta {
            Delta::Lossy(file) => super::wdelta::describe_json(file),
            Delta::Lossless(c) => super::wdelta::describe_lossless_json(c),
        };
        out.push('\n');
        out
    }
}

fn ending_in_newline(mut text: String) -> String {
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text
}

/// `relate`: how a model was made from its candidate parents.
pub(crate) struct Relate<'a> {
    /// The model and the candidates as the command line named them.
    pub model: &'a str,
    pub candidates: &'a [&'a str],
    pub verdict: &'a crate::lineage::Verdict,
}

impl Report for Relate<'_> {
    fn text(&self, palette: &Palette) -> String {
        super::lineage::text(self.model, self.candidates, self.verdict, palette)
    }
    fn json(&self) -> String {
        super::lineage::json(self.model, self.candidates, self.verdict)
    }
}
