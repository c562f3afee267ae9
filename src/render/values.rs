//! Weight-value diffs as text (a summary, the changed tensors by rel_l2, a per-layer view) and
//! as schema-1 JSON (the structural diff's document plus a `values` section).

use std::fmt::Write;

use serde::Serialize;

use super::palette::Palette;
use crate::diff::StructuralDiff;
use crate::escape::shown;
use crate::values::groups::GroupValues;
use crate::values::{Method, TensorValues, ValueDiff};

/// Changed tensors listed in the text; the JSON lists all.
const LISTED: usize = 40;
/// Width of the per-layer bars.
const BAR: usize = 8;
/// The one fixed log scale of the per-layer bars and the HTML heatmap, so that two reports
/// compare: one cell (palest) at this rel_l2 or less...
pub(super) const SCALE_LOW: f64 = 1e-6;
/// ...the full bar (darkest) at this or more.
pub(super) const SCALE_HIGH: f64 = 1.0;

/// A figure in 3 significant digits ("1.23e-4", "0.0123").
pub(super) fn figure(x: f64) -> String {
    if x == 0.0 {
        "0".into()
    } else if (1e-3..1e4).contains(&x.abs()) {
        format!("{x:.4}")
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_owned()
    } else {
        format!("{x:.2e}")
    }
}

/// A cosine: 6 decimals, or `1-2.3e-8` when it is within 1e-4 of 1 (a small change's cosine
/// would otherwise print as 1.000000).
pub(super) fn cosine_text(c: f64) -> String {
    if c != 1.0 && (1.0 - c).abs() < 1e-4 {
        format!("1-{:.1e}", 1.0 - c)
    } else {
        format!("{c:.6}")
    }
}

fn rel_l2_text(t: &TensorValues) -> String {
    match (t.method, t.stats) {
        (Method::Bytes(_), _) => "bytes".into(),
        (_, Some(s)) => s.rel_l2.map_or("inf".into(), figure),
        (_, None) => "-".into(),
    }
}

/// The summary line.
pub(crate) fn summary(values: &ValueDiff) -> String {
    let compared = values.tensors.len();
    let changed = values.changed_count();
    let bits = values.bits_differ().count();
    if changed == 0 && bits > 0 {
        return format!(
            "values equal in all {compared} compared tensors; bits differ in {bits} ({})",
            bits_total(values).describe()
        );
    }
    if changed == 0 {
        return format!("values identical in all {compared} compared tensors");
    }
    let mut line = format!("values changed in {changed} of {compared} tensors");
    if let Some(top) = values
        .changed_by_rel_l2()
        .into_iter()
        .find(|t| t.method == Method::Values)
    {
        let _ = write!(
            line,
            "; largest rel_l2 {} ({})",
            rel_l2_text(top),
            shown(&top.name)
        );
    }
    line
}

/// The text section printed after the structural diff.
pub(crate) fn text(values: &ValueDiff, palette: &Palette) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", palette.heading("Values:"));
    let _ = writeln!(out, "  {}", summary(values));
    let bytes_only: Vec<&TensorValues> = values
        .tensors
        .iter()
        .filter(|t| matches!(t.method, Method::Bytes(_)))
        .collect();
    if let Some(first) = bytes_only.first()
        && let Method::Bytes(why) = first.method
    {
        let _ = writeln!(
            out,
            "  compared byte for byte (changed or not, no figures): {} tensor(s), e.g. {} ({}: {})",
            bytes_only.len(),
            shown(&first.name),
            first.old_dtype,
            why.describe()
        );
    }
    for s in &values.skipped {
        let _ = writeln!(out, "  not compared: {}: {}", shown(&s.name), s.reason);
    }
    for (t, bits) in values.bits_differ() {
        let _ = writeln!(
            out,
            "  {}: values equal, bits differ: {}",
            shown(&t.name),
            bits.describe()
        );
    }
    let changed = values.changed_by_rel_l2();
    let rows = changed.iter().take(LISTED).map(|t| {
        let (max_abs_diff, cosine, changed_elements) = match t.stats {
            Some(s) => (
                figure(s.max_abs_diff),
                s.cosine.map_or("-".into(), cosine_text),
                format!(
                    "{}/{}",
                    super::text::group_digits(s.changed_elements),
                    super::text::group_digits(t.elements)
                ),
            ),
            None => ("-".into(), "-".into(), "-".into()),
        };
        let mut label = shown(&t.name).into_owned();
        if t.dtype_changed() {
            let _ = write!(
                label,
                " ({} → {}: quantization error)",
                t.old_dtype, t.new_dtype
            );
        }
        if t.stats.is_some_and(|s| s.approximate) {
            let _ = write!(label, " ({APPROXIMATE})");
        }
        FigureRow {
            rel_l2: rel_l2_text(t),
            max_abs_diff,
            cosine,
            changed_elements,
            label,
            suspect: false,
        }
    });
    let table = LargestFirst {
        what: ("tensors", "tensor"),
        label_heading: "name",
    };
    table.write(&mut out, rows, changed.len(), palette);
    if values.changed_count() > 0 {
        out.push_str(&layers_text(&values.layers()));
    }
    out
}

/// One row of a "largest rel_l2 first" table, its figures already written.
pub(super) struct FigureRow {
    pub rel_l2: String,
    pub max_abs_diff: String,
    pub cosine: String,
    pub changed_elements: String,
    pub label: String,
    /// Shown as a removal (red) rather than a change.
    pub suspect: bool,
}

/// The text table of changed tensors (or converted pairs), largest rel_l2 first: the first
/// [`LISTED`] rows, then how many more the JSON lists.
pub(super) struct LargestFirst {
    /// What the rows are, plural and singular ("pairs", "pair").
    pub what: (&'static str, &'static str),
    /// The heading of the last column.
    pub label_heading: &'static str,
}

impl LargestFirst {
    /// Writes the table of `total` changed things, of which `rows` gives the first (at most
    /// [`LISTED`] are shown).
    pub(super) fn write(
        &self,
        out: &mut String,
        rows: impl Iterator<Item = FigureRow>,
        total: usize,
        palette: &Palette,
    ) {
        if total == 0 {
            return;
        }
        let (plural, singular) = self.what;
        let _ = writeln!(out);
        let _ = writeln!(out, "  Changed {plural}, largest rel_l2 first:");
        let _ = writeln!(
            out,
            "  {:>9}  {:>12}  {:>9}  {:>21}  {}",
            "rel_l2", "max_abs_diff", "cosine", "changed elements", self.label_heading
        );
        for row in rows.take(LISTED) {
            let line = format!(
                "  {:>9}  {:>12}  {:>9}  {:>21}  {}",
                row.rel_l2, row.max_abs_diff, row.cosine, row.changed_elements, row.label
            );
            let line = if row.suspect {
                palette.removed(&line)
            } else {
                palette.changed(&line)
            };
            let _ = writeln!(out, "{line}");
        }
        if total > LISTED {
            let _ = writeln!(
                out,
                "  … {} more changed {plural} (--json lists every {singular})",
                total - LISTED
            );
        }
    }
}

/// The per-layer view: one line per layer with a bar on the fixed log scale (empty for fewer
/// than two layers).
pub(crate) fn layers_text(layers: &[crate::values::LayerSummary]) -> String {
    let mut out = String::new();
    if layers.len() < 2 {
        return out;
    }
    // A run of unchanged layers is one row (`blk.3–17`): the view shows where the change is.
    let mut rows: Vec<(String, Result<&crate::values::LayerSummary, usize>)> = Vec::new();
    let mut rest = layers;
    while let Some(l) = rest.first() {
        let run = unchanged_run(rest);
        if run > 1 {
            let label = format!("{}.{}–{}", l.stem, l.index, rest[run - 1].index);
            rows.push((label, Err(run)));
            rest = &rest[run..];
        } else {
            rows.push((l.label(), Ok(l)));
            rest = &rest[1..];
        }
    }
    let width = rows
        .iter()
        .map(|(label, _)| label.chars().count())
        .max()
        .unwrap_or(0);
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "  Per layer (changed/compared tensors, largest rel_l2; bars on a fixed log scale, \
         the same in every report:\n  {BAR} cells at rel_l2 1 or more, one less per 3/4 of \
         a decade, one at 1e-6 or less):"
    );
    for (label, row) in rows {
        let line = match row {
            Err(run) => format!("  {:<width$}  unchanged ({run} layers)", shown(&label)),
            Ok(l) => layer_row(&label, l, width),
        };
        let _ = writeln!(out, "{}", line.trim_end());
    }
    out
}

/// One layer's row: changed/compared tensors, the largest rel_l2 and its bar.
fn layer_row(label: &str, l: &crate::values::LayerSummary, width: usize) -> String {
    let (figure_text, bar) = if l.changed == 0 {
        (String::new(), String::new())
    } else {
        match l.max_rel_l2 {
            None => ("inf".into(), "█".repeat(BAR)),
            Some(r) => (figure(r), "█".repeat(bar_width(r))),
        }
    };
    format!(
        "  {:<width$}  {:>3}/{:<3} {:>9}  {}",
        shown(label),
        l.changed,
        l.tensors,
        figure_text,
        bar
    )
}

/// How many layers from the first are unchanged and numbered one after another in one stem.
fn unchanged_run(layers: &[crate::values::LayerSummary]) -> usize {
    let Some(first) = layers.first() else {
        return 0;
    };
    layers
        .iter()
        .enumerate()
        .take_while(|(i, l)| {
            l.changed == 0 && l.stem == first.stem && l.index == first.index + *i as u64
        })
        .count()
}

/// Bar cells for `r` on the fixed scale: the full bar at [`SCALE_HIGH`] or more, one cell less
/// per 3/4 of a decade below it, at least one cell for any change.
fn bar_width(r: f64) -> usize {
    if r <= 0.0 {
        return 1;
    }
    let span = (SCALE_HIGH / SCALE_LOW).log10();
    let decades = (SCALE_HIGH / r).log10();
    let cells = BAR as f64 - decades * BAR as f64 / span;
    (cells.round().max(1.0) as usize).clamp(1, BAR)
}

/// What differs in the bits of every tensor whose values are equal.
fn bits_total(values: &ValueDiff) -> crate::values::BitsDiffer {
    let mut total = crate::values::BitsDiffer::default();
    for (_, bits) in values.bits_differ() {
        total.merge(bits);
    }
    total
}

#[derive(Serialize)]
struct TensorDoc<'a> {
    name: &'a str,
    old_dtype: &'static str,
    new_dtype: &'static str,
    elements: u64,
    /// "values" or "bytes".
    compared: &'static str,
    changed: bool,
    max_abs_diff: Option<f64>,
    rel_l2: Option<f64>,
    cosine: Option<f64>,
    changed_elements: Option<u64>,
    nonfinite_elements: Option<u64>,
    /// Values equal, bits not: what differs (then `changed` is false).
    #[serde(skip_serializing_if = "Option::is_none")]
    bits_differ: Option<crate::values::BitsDiffer>,
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<String>,
}

/// A layer of a value diff in JSON (a conversion's report has the same).
#[derive(Serialize)]
pub(super) struct LayerDoc {
    layer: String,
    tensors: usize,
    changed: usize,
    max_rel_l2: Option<f64>,
}

/// The layers of a value diff, as the JSON reports list them.
pub(super) fn layer_docs(values: &ValueDiff) -> Vec<LayerDoc> {
    values
        .layers()
        .into_iter()
        .map(|l| LayerDoc {
            layer: l.label(),
            tensors: l.tensors,
            changed: l.changed,
            max_rel_l2: l.max_rel_l2,
        })
        .collect()
}

#[derive(Serialize)]
struct SkippedDoc<'a> {
    name: &'a str,
    reason: &'a str,
}

#[derive(Serialize)]
struct ValuesDoc<'a> {
    compared: usize,
    changed: usize,
    /// Tensors whose values are equal and whose bits are not (not counted in `changed`).
    bits_differ: usize,
    summary: String,
    tensors: Vec<TensorDoc<'a>>,
    layers: Vec<LayerDoc>,
    skipped: Vec<SkippedDoc<'a>>,
}

/// Said of a tensor whose figures were computed from rounded values.
const APPROXIMATE: &str = "64-bit integers of magnitude 2^53 or more: changed elements counted \
     exactly, the other figures computed from values rounded to f64";

fn tensor_doc(t: &TensorValues) -> TensorDoc<'_> {
    let note = match t.method {
        Method::Bytes(why) => Some(format!("compared byte for byte: {}", why.describe())),
        Method::Values if t.dtype_changed() => Some(format!(
            "dtype changed ({} → {}): the figures are the quantization error",
            t.old_dtype, t.new_dtype
        )),
        Method::Values => None,
    };
    let note = match (note, &t.bits_differ) {
        (None, Some(bits)) => Some(format!("values equal, bits differ: {}", bits.describe())),
        (note, _) => note,
    };
    let note = match (note, t.stats.is_some_and(|s| s.approximate)) {
        (note, false) => note,
        (None, true) => Some(APPROXIMATE.to_owned()),
        (Some(note), true) => Some(format!("{note}; {APPROXIMATE}")),
    };
    TensorDoc {
        name: &t.name,
        old_dtype: t.old_dtype,
        new_dtype: t.new_dtype,
        elements: t.elements,
        compared: match t.method {
            Method::Values => "values",
            Method::Bytes(_) => "bytes",
        },
        changed: t.changed,
        max_abs_diff: t.stats.map(|s| s.max_abs_diff),
        rel_l2: t.stats.and_then(|s| s.rel_l2),
        cosine: t.stats.and_then(|s| s.cosine),
        changed_elements: t.stats.map(|s| s.changed_elements),
        nonfinite_elements: t.stats.map(|s| s.nonfinite_elements),
        bits_differ: t.bits_differ,
        note,
    }
}

fn values_doc(values: &ValueDiff) -> ValuesDoc<'_> {
    ValuesDoc {
        compared: values.tensors.len(),
        changed: values.changed_count(),
        bits_differ: values.bits_differ().count(),
        summary: summary(values),
        tensors: values.tensors.iter().map(tensor_doc).collect(),
        layers: layer_docs(values),
        skipped: values
            .skipped
            .iter()
            .map(|s| SkippedDoc {
                name: &s.name,
                reason: &s.reason,
            })
            .collect(),
    }
}

/// The `values` section as a JSON value, for the reports of `git diff --json` and `ci`.
pub(crate) fn json_value(values: &ValueDiff) -> serde_json::Value {
    serde_json::to_value(values_doc(values)).expect("JSON of plain data cannot fail")
}

/// The text section, or a line saying why the values were not compared.
pub(crate) fn text_or_skipped(
    values: Result<&ValueDiff, &dyn std::fmt::Display>,
    palette: &Palette,
) -> String {
    match values {
        Ok(values) => format!("\n{}", text(values, palette)),
        Err(why) => format!(
            "\n{}\n  values not compared: {why}\n",
            palette.heading("Values:")
        ),
    }
}

/// A grouped checkpoint's value changes group by group (model weights apart from optimizer
/// state): `  by group: model 2 of 2 changed (rel_l2 0.0201 over the group; largest 0.0269),
/// optimizer …`; empty when `artifact` has no groups.
pub(crate) fn by_group(values: &ValueDiff, artifact: &crate::artifact::Artifact) -> String {
    let groups = values.by_group(artifact);
    if groups.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = groups.iter().map(group_text).collect();
    format!("  by group: {}\n", parts.join(", "))
}

/// One group's part of the line: `model 2 of 2 changed (rel_l2 0.0201 over the group; largest
/// 0.0269)`, `rng 0 of 2 changed`.
pub(super) fn group_text(g: &GroupValues) -> String {
    let mut part = format!("{} {} of {} changed", g.group, g.changed, g.compared);
    if g.changed == 0 {
        return part;
    }
    let mut figures = Vec::new();
    match (g.rel_l2, g.infinite) {
        (Some(r), _) => figures.push(format!("rel_l2 {} over the group", figure(r))),
        (None, true) => figures.push("rel_l2 inf over the group".to_owned()),
        (None, false) => {}
    }
    if g.infinite {
        figures.push("largest inf".to_owned());
    } else if let Some(m) = g.max_rel_l2 {
        figures.push(format!("largest {}", figure(m)));
    }
    if g.compared_by_bytes > 0 {
        figures.push(format!("{} compared byte for byte", g.compared_by_bytes));
    }
    if !figures.is_empty() {
        let _ = write!(part, " ({})", figures.join("; "));
    }
    part
}

#[derive(Serialize)]
struct GroupDoc {
    group: &'static str,
    compared: usize,
    changed: usize,
    identical: usize,
    compared_by_bytes: usize,
    /// ‖b − a‖ / ‖a‖ over the group's tensors compared by value; null when infinite or none.
    rel_l2: Option<f64>,
    /// The largest rel_l2 of a changed tensor of the group; null when none changed or one is
    /// infinite.
    max_rel_l2: Option<f64>,
}

fn group_docs(groups: &[GroupValues]) -> Vec<GroupDoc> {
    groups
        .iter()
        .map(|g| GroupDoc {
            group: g.group,
            compared: g.compared,
            changed: g.changed,
            identical: g.identical,
            compared_by_bytes: g.compared_by_bytes,
            rel_l2: g.rel_l2,
            max_rel_l2: if g.infinite { None } else { g.max_rel_l2 },
        })
        .collect()
}

#[derive(Serialize)]
struct GroupedValuesDoc<'a> {
    #[serde(flatten)]
    values: ValuesDoc<'a>,
    /// A training checkpoint's groups (model, optimizer, …), each summed up; left out for
    /// other files.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    groups: Vec<GroupDoc>,
}

#[derive(Serialize)]
struct DiffWithGroupedValues<'a> {
    #[serde(flatten)]
    diff: super::json::DiffDoc<'a>,
    values: GroupedValuesDoc<'a>,
}

/// `diff --values --json` of models whose new side may be a grouped checkpoint: the `values`
/// section gains `groups`, each group summed up (compared, changed, identical, rel_l2).
pub(crate) fn json_grouped(
    diff: &StructuralDiff,
    values: &ValueDiff,
    new: &crate::artifact::Artifact,
) -> String {
    let doc = DiffWithGroupedValues {
        diff: super::json::diff_doc(diff),
        values: GroupedValuesDoc {
            values: values_doc(values),
            groups: group_docs(&values.by_group(new)),
        },
    };
    super::json::to_string(&doc)
}

/// The `values` section as a JSON value with its `groups` (a grouped new side), for the
/// reports of `git diff --json` and `ci`.
pub(crate) fn json_value_grouped(
    values: &ValueDiff,
    new: &crate::artifact::Artifact,
) -> serde_json::Value {
    let doc = GroupedValuesDoc {
        values: values_doc(values),
        groups: group_docs(&values.by_group(new)),
    };
    serde_json::to_value(doc).expect("JSON of plain data cannot fail")
}
