//! Human-readable text: the layouts of `inspect`, `id` and `diff`.

use std::fmt::Write;

use super::palette::Palette;
use crate::artifact::{Array, Artifact, Format, TensorInfo, Value};
use crate::diff::{Change, StructuralDiff};
use crate::escape::{quoted, shown};
use crate::identity::{model_identity, structural_hash, value_digest};
use crate::render::enums::enum_note;
use crate::render::order::{self, TensorOrder};

/// Tensors listed by `inspect` unless `--all`.
const INSPECT_TENSORS: usize = 5;
/// Strings longer than this are shortened in one-line summaries.
const MAX_STRING_CHARS: usize = 60;
/// Arrays longer than this are summarized as `[N × type] first, second, …`.
const MAX_ARRAY_ITEMS: usize = 8;
/// Items shown at the head of a summarized array.
const ARRAY_HEAD_ITEMS: usize = 3;

/// A training checkpoint's model identity and what it holds (docs/SPEC.md §5d), one line.
fn write_model_identity(out: &mut String, artifact: &Artifact) {
    if let (Some(training), Some(hash)) = (artifact.layout.training(), model_identity(artifact)) {
        let _ = writeln!(out, "model_identity: {hash} ({})", training.describe());
    }
}

pub(crate) fn id(artifact: &Artifact) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "format: {}", artifact.format.name());
    if let Some(v) = artifact.gguf_version {
        let _ = writeln!(out, "gguf_version: {v}");
    }
    let _ = writeln!(out, "structural_hash: {}", structural_hash(artifact));
    write_model_identity(&mut out, artifact);
    let _ = writeln!(out, "tensor_count: {}", artifact.tensors.len());
    let _ = writeln!(out, "metadata_count: {}", artifact.metadata.len());
    if let Some(incomplete) = artifact.layout.incomplete() {
        let _ = writeln!(out, "incomplete: {incomplete}");
    }
    let groups = artifact.groups();
    if !groups.is_empty() {
        let listed: Vec<String> = groups
            .iter()
            .map(|(name, tensors, _)| format!("{name} {}", crate::diff::plural(*tensors, "tensor")))
            .collect();
        let _ = writeln!(out, "groups: {}", listed.join(", "));
    }
    if !artifact.layout.findings.is_empty() {
        let mut tiers: Vec<(&str, usize)> = Vec::new();
        for f in &artifact.layout.findings {
            match tiers.iter_mut().find(|(t, _)| *t == f.tier) {
                Some(entry) => entry.1 += 1,
                None => tiers.push((f.tier, 1)),
            }
        }
        let listed: Vec<String> = tiers.iter().map(|(t, n)| format!("{n} {t}")).collect();
        let _ = writeln!(out, "findings: {} (inspect lists them)", listed.join(", "));
    }
    out
}

/// A pickle's findings, dangerous ones first and red: what the file would import and call if
/// it were unpickled (weight-inspect read it without doing either).
fn findings(out: &mut String, findings: &[crate::artifact::Finding], palette: &Palette) {
    if findings.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "{}",
        palette.heading("Findings (globals the pickle names; none was imported or called):")
    );
    for f in findings {
        let did = if f.actions.is_empty() {
            String::new()
        } else {
            format!(", {}", f.actions.join(" "))
        };
        let line = format!(
            "  {}: {} at offset {}{did}",
            f.tier,
            shown(&f.global),
            f.offset
        );
        let line = if f.tier == "dangerous" {
            palette.removed(&line)
        } else {
            line
        };
        let _ = writeln!(out, "{line}");
    }
}

/// One line per side that is cut short (none when both are complete).
fn write_incomplete_sides(
    out: &mut String,
    diff: &StructuralDiff,
    palette: &Palette,
    indent: &str,
) {
    for (side, incomplete) in [("old", &diff.old_incomplete), ("new", &diff.new_incomplete)] {
        if let Some(incomplete) = incomplete {
            let line = format!("{indent}{side} incomplete: {incomplete}");
            let _ = writeln!(out, "{}", palette.changed(&line));
        }
    }
}

/// `inspect` with tensors in file order: `all` lists every tensor, `parts` every file of a
/// multi-file model.
pub fn inspect(artifact: &Artifact, palette: &Palette, all: bool, parts: bool) -> String {
    inspect_in(artifact, palette, all, parts, TensorOrder::File)
}

/// [`inspect`] with tensors listed in `order`.
pub(crate) fn inspect_in(
    artifact: &Artifact,
    palette: &Palette,
    all: bool,
    parts: bool,
    order: TensorOrder,
) -> String {
    let mut out = String::new();
    let layout = &artifact.layout;
    findings(&mut out, &layout.findings, palette);
    let _ = writeln!(out, "format: {}", artifact.format.name());
    if let Some(v) = artifact.gguf_version {
        let endian = if layout.big_endian {
            " (big-endian)"
        } else {
            ""
        };
        let _ = writeln!(out, "gguf_version: {v}{endian}");
    }
    let _ = writeln!(out, "tensor_count: {}", artifact.tensors.len());
    let _ = writeln!(out, "metadata_count: {}", artifact.metadata.len());
    let _ = writeln!(out, "structural_hash: {}", structural_hash(artifact));
    write_model_identity(&mut out, artifact);
    let _ = writeln!(
        out,
        "file_size: {} bytes ({})",
        layout.file_size,
        human_bytes(layout.file_size)
    );
    let _ = writeln!(out, "header_size: {} bytes", layout.header_size);
    if let Some(files) = &layout.files {
        let view = crate::diff::FilesView::of(artifact);
        let index = files
            .index
            .as_deref()
            .map(|i| format!(", index {}", shown(i)))
            .unwrap_or_default();
        let _ = writeln!(out, "files: {}{index}", view.describe());
        if parts {
            for part in &files.parts {
                let _ = writeln!(
                    out,
                    "  {}: {}, {} bytes, structural_hash {}",
                    shown(&part.file),
                    crate::diff::plural(part.tensors, "tensor"),
                    part.file_size,
                    part.structural_hash
                );
            }
        } else {
            let _ = writeln!(out, "  (--shards lists each file with its own identity)");
        }
    }
    if layout.is_truncated() {
        let _ = writeln!(
            out,
            "{}",
            palette.changed(&format!(
                "truncated: {} of {} data bytes present",
                layout.data_present, layout.data_expected
            ))
        );
    }
    let (total, by_dtype) = artifact.parameter_counts();
    let _ = writeln!(out, "parameters: {} total", group_digits(total));
    for (dtype, n) in &by_dtype {
        let _ = writeln!(out, "  {dtype}: {}", group_digits(*n));
    }
    let groups = artifact.groups();
    if !groups.is_empty() {
        // A training checkpoint: parameters are its model weights only.
        let _ = writeln!(out, "groups (parameters count the model group only):");
        for (name, tensors, elements) in groups {
            let _ = writeln!(
                out,
                "  {name}: {}, {} elements",
                crate::diff::plural(tensors, "tensor"),
                group_digits(elements)
            );
        }
    }

    if !artifact.metadata.is_empty() {
        let _ = writeln!(out, "\n{}", palette.heading("Metadata:"));
        for (key, value) in &artifact.metadata {
            let _ = writeln!(
                out,
                "  {}: {}{}",
                shown(key),
                value_summary(value),
                enum_note(key, value)
            );
        }
    }

    if !artifact.tensors.is_empty() {
        let listed = if all {
            artifact.tensors.len()
        } else {
            INSPECT_TENSORS.min(artifact.tensors.len())
        };
        let heading = if listed == artifact.tensors.len() {
            format!("Tensors ({}):", order.describe())
        } else {
            format!("First {listed} tensors ({}):", order.describe())
        };
        let _ = writeln!(out, "\n{}", palette.heading(&heading));
        let files = artifact.layout.files.as_deref();
        for (i, position) in order::positions(artifact, order)
            .into_iter()
            .take(listed)
            .enumerate()
        {
            let Some((name, tensor)) = artifact.tensors.get_index(position) else {
                continue;
            };
            let mut place = if artifact.values_in_pickle(name) {
                "(a numpy array: its values are in the pickle)".to_owned()
            } else {
                format!("offset {}", tensor.file_offset)
            };
            if let Some(data) = order::data_offset(artifact, position) {
                let _ = write!(place, " (data +{data})");
            }
            if let Some(part) = files.and_then(|f| f.part_at(position)) {
                let _ = write!(place, " in {}", shown(&part.file));
            }
            let _ = writeln!(
                out,
                "  {}: {} {} {place}",
                i + 1,
                shown(name),
                tensor_summary(tensor)
            );
        }
        if listed < artifact.tensors.len() {
            let _ = writeln!(
                out,
                "  … {} more (--all lists every tensor)",
                artifact.tensors.len() - listed
            );
        }
    }
    out
}

/// `[4096, 32000] (q4_k)`.
pub(crate) fn tensor_summary(tensor: &TensorInfo) -> String {
    format!("{} ({})", shape_text(&tensor.shape), tensor.dtype)
}

pub(crate) fn shape_text(shape: &[u64]) -> String {
    let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
    format!("[{}]", dims.join(", "))
}

/// One short line for a value: strings quoted and shortened, long arrays summarized with
/// their length, element type and first items.
pub(crate) fn value_summary(value: &Value) -> String {
    match value {
        Value::String(s) => quote_short(s),
        Value::Array(a) => array_summary(a),
        scalar => scalar_text(scalar),
    }
}

/// A scalar's value; floats in the shortest form that round-trips, NaNs with their bits
/// (payloads differ in the structural hash, so they must differ here too).
pub(crate) fn scalar_text(value: &Value) -> String {
    match value {
        Value::U8(v) => v.to_string(),
        Value::I8(v) => v.to_string(),
        Value::U16(v) => v.to_string(),
        Value::I16(v) => v.to_string(),
        Value::U32(v) => v.to_string(),
        Value::I32(v) => v.to_string(),
        Value::U64(v) => v.to_string(),
        Value::I64(v) => v.to_string(),
        Value::F32(v) if v.value().is_nan() => format!("NaN(0x{:08x})", v.0),
        Value::F64(v) if v.value().is_nan() => format!("NaN(0x{:016x})", v.0),
        Value::F32(v) => format!("{:?}", v.value()),
        Value::F64(v) => format!("{:?}", v.value()),
        Value::Bool(v) => v.to_string(),
        Value::String(s) => quote_short(s),
        Value::Array(a) => array_summary(a),
    }
}

fn array_summary(array: &Array) -> String {
    let len = array.len();
    let nested = matches!(array, Array::Array(_));
    if len <= MAX_ARRAY_ITEMS && !nested {
        let items: Vec<String> = (0..len)
            .filter_map(|i| array.get(i))
            .map(|v| scalar_text(&v))
            .collect();
        return format!("[{}]", items.join(", "));
    }
    let head: Vec<String> = (0..len.min(ARRAY_HEAD_ITEMS))
        .filter_map(|i| array.get(i))
        .map(|v| scalar_text(&v))
        .collect();
    let more = if len > ARRAY_HEAD_ITEMS { ", …" } else { "" };
    format!(
        "[{len} × {}] {}{more}",
        array.element_type_name(),
        head.join(", ")
    )
}

/// Quoted with escapes ([`quoted`]), shortened to a readable length with the full size noted.
pub(crate) fn quote_short(s: &str) -> String {
    let count = s.chars().count();
    if count <= MAX_STRING_CHARS {
        return quoted(s);
    }
    let head: String = s.chars().take(MAX_STRING_CHARS).collect();
    format!("{}… ({} chars)", quoted(&head), count)
}

/// A value as one diff line: arrays also carry a content digest, so two arrays whose first
/// items agree still read as different.
pub(crate) fn value_line(value: &Value) -> String {
    match value {
        Value::Array(a) if a.len() > MAX_ARRAY_ITEMS || matches!(a, Array::Array(_)) => {
            format!("{} sha256:{}", array_summary(a), value_digest(value))
        }
        other => value_summary(other),
    }
}

fn is_long_text(value: &Value) -> bool {
    matches!(value, Value::String(s) if s.contains('\n') || s.chars().count() > MAX_STRING_CHARS)
}

/// How a diff lists its changed tensors.
#[derive(Debug, Clone, Copy)]
pub(crate) enum TensorView<'a> {
    /// Every change on lines of its own.
    All,
    /// Changes that repeat as one line ([`super::grouped`]); `hint` says where the full list
    /// is (`--all lists each`), `old` is the old side, for the exceptions of a collapsed kind.
    Grouped {
        old: Option<&'a Artifact>,
        hint: &'a str,
    },
}

/// Changed tensors under `heading`, grouped when `view` asks and grouping shortens the list.
fn write_tensors(
    out: &mut String,
    heading: &str,
    tensors: &[&crate::diff::TensorChange],
    palette: &Palette,
    view: TensorView<'_>,
) {
    let grouped = match view {
        TensorView::All => None,
        TensorView::Grouped { old, hint } => {
            super::grouped::group(tensors, old).map(|lines| (lines, hint))
        }
    };
    let Some((lines, hint)) = grouped else {
        let _ = writeln!(out, "\n{}", palette.heading(heading));
        for t in tensors {
            write_tensor_change(out, &t.name, &t.change, palette);
        }
        return;
    };
    // "Tensors (N changes, …):", or inside a heading's own parenthesis when it has one.
    let note = format!("{} changes, grouped; {hint}", tensors.len());
    let heading = match heading.strip_suffix("):") {
        Some(head) => format!("{head}; {note}):"),
        None => format!("{} ({note}):", heading.trim_end_matches(':')),
    };
    let _ = writeln!(out, "\n{}", palette.heading(&heading));
    for line in lines {
        let text = format!("  {} {}", line.sign, line.text);
        let text = match line.sign {
            '+' => palette.added(&text),
            '-' => palette.removed(&text),
            _ => palette.changed(&text),
        };
        let _ = writeln!(out, "{text}");
        for note in &line.notes {
            let _ = writeln!(out, "      {note}");
        }
    }
}

/// The structural diff, its tensors listed as `view` says.
pub(crate) fn diff_in(diff: &StructuralDiff, palette: &Palette, view: TensorView<'_>) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", palette.heading("Structural Identity:"));
    let _ = writeln!(out, "  format equal: {}", !diff.format_changed());
    let _ = writeln!(out, "  hash equal: {}", diff.is_identical());
    let _ = writeln!(
        out,
        "  tensor count equal: {}",
        diff.old_tensor_count == diff.new_tensor_count
    );
    let _ = writeln!(
        out,
        "  metadata count equal: {}",
        diff.old_metadata_count == diff.new_metadata_count
    );
    if diff.format_changed() {
        // PyTorch and safetensors files of one model share Hugging Face's tensor names; GGUF
        // has its own names and metadata keys.
        let note = if diff.old_format == Format::Gguf || diff.new_format == Format::Gguf {
            "metadata keys and tensor names follow different conventions"
        } else {
            "the same tensor names; metadata differs by format"
        };
        let _ = writeln!(
            out,
            "  format: {} -> {} (different formats: {note})",
            diff.old_format.name(),
            diff.new_format.name()
        );
    }
    if diff.old_gguf_version != diff.new_gguf_version
        && diff.old_gguf_version.is_some()
        && diff.new_gguf_version.is_some()
    {
        let v = |v: Option<u32>| v.map_or("-".into(), |v| v.to_string());
        let _ = writeln!(
            out,
            "  gguf_version: {} -> {}",
            v(diff.old_gguf_version),
            v(diff.new_gguf_version)
        );
    }
    let _ = writeln!(out, "  old: {}", diff.old_hash);
    let _ = writeln!(out, "  new: {}", diff.new_hash);
    if diff.training {
        let shown = |m: &Option<String>| m.clone().unwrap_or_else(|| "-".to_owned());
        let _ = writeln!(
            out,
            "  model identity equal: {}",
            diff.same_model_identity()
        );
        let _ = writeln!(
            out,
            "  old model identity: {}",
            shown(&diff.old_model_identity)
        );
        let _ = writeln!(
            out,
            "  new model identity: {}",
            shown(&diff.new_model_identity)
        );
    }
    if let Some(layout) = &diff.layout {
        let _ = writeln!(out, "  layout: {}", layout.describe());
    }
    write_incomplete_sides(&mut out, diff, palette, "  ");

    if !diff.differs() {
        let _ = writeln!(out, "\nNo structural differences.");
        return out;
    }
    if diff.same_model_identity() {
        let _ = writeln!(
            out,
            "\nSame model identity (the model weights and groups of a training checkpoint); what changed beside it:"
        );
    }
    // A grouped checkpoint's changes group by group, ungrouped ones first.
    let groups: Vec<Option<&'static str>> = if diff.is_grouped() {
        std::iter::once(None)
            .chain(crate::diff::GROUP_ORDER.iter().map(|g| Some(*g)))
            .collect()
    } else {
        vec![None]
    };
    for group in groups {
        let metadata: Vec<_> = diff.metadata.iter().filter(|m| m.group == group).collect();
        if !metadata.is_empty() {
            let heading = group_heading("Metadata", group, diff.training);
            let _ = writeln!(out, "\n{}", palette.heading(&heading));
            for m in metadata {
                write_metadata_change(&mut out, &m.key, &m.change, palette);
            }
        }
        let tensors: Vec<_> = diff.tensors.iter().filter(|t| t.group == group).collect();
        if !tensors.is_empty() {
            let heading = group_heading("Tensors", group, diff.training);
            write_tensors(&mut out, &heading, &tensors, palette, view);
        }
    }
    let c = diff.counts();
    let _ = writeln!(
        out,
        "\nSummary: metadata +{} -{} ~{}, tensors +{} -{} ~{}",
        c.metadata_added,
        c.metadata_removed,
        c.metadata_changed,
        c.tensors_added,
        c.tensors_removed,
        c.tensors_changed
    );
    out
}

/// "Tensors:", "Tensors, model weights:", "Metadata, optimizer state (outside the model identity):".
fn group_heading(what: &str, group: Option<&str>, training: bool) -> String {
    let Some(group) = group else {
        return format!("{what}:");
    };
    let part = crate::values::groups::label(group);
    let outside = if training && group != "model" {
        " (outside the model identity)"
    } else {
        ""
    };
    format!("{what}, {part}{outside}:")
}

/// The diff of two versions of a file: the structural diff, or one line saying the structure
/// is identical (and, when the bytes differ, that only tensor data or layout changed).
pub(crate) fn diff_or_identical(
    diff: &StructuralDiff,
    palette: &Palette,
    bytes_differ: bool,
) -> String {
    diff_or_identical_in(diff, palette, bytes_differ, TensorView::All)
}

/// [`diff_or_identical`], its tensors listed as `view` says.
pub(crate) fn diff_or_identical_in(
    diff: &StructuralDiff,
    palette: &Palette,
    bytes_differ: bool,
    view: TensorView<'_>,
) -> String {
    if diff.differs() {
        return self::diff_in(diff, palette, view);
    }
    let mut out = if let Some(layout) = &diff.layout {
        format!(
            "layout changed, structure identical (structural hash {}): {}\n",
            diff.old_hash,
            layout.describe()
        )
    } else {
        format!(
            "structure identical (structural hash {}){}\n",
            diff.old_hash,
            if bytes_differ {
                "; the files differ only in tensor data or layout"
            } else {
                ""
            }
        )
    };
    write_incomplete_sides(&mut out, diff, palette, "");
    out
}

fn write_metadata_change(
    out: &mut String,
    raw_key: &str,
    change: &Change<Value>,
    palette: &Palette,
) {
    let key = shown(raw_key);
    let line = |v: &Value| format!("{}{}", value_line(v), enum_note(raw_key, v));
    match change {
        Change::Added(v) => {
            let _ = writeln!(out, "{}", palette.added(&format!("  + {key}: {}", line(v))));
        }
        Change::Removed(v) => {
            let _ = writeln!(
                out,
                "{}",
                palette.removed(&format!("  - {key}: {}", line(v)))
            );
        }
        Change::Changed(a, b) if is_long_text(a) || is_long_text(b) => {
            let _ = writeln!(out, "{}", palette.changed(&format!("  ~ {key}:")));
            write_text_diff(
                out,
                a.as_str().unwrap_or(""),
                b.as_str().unwrap_or(""),
                palette,
            );
        }
        Change::Changed(a, b) => {
            let _ = writeln!(
                out,
                "{}",
                palette.changed(&format!("  ~ {key}: {} -> {}", line(a), line(b)))
            );
            if let (Value::Array(x), Value::Array(y)) = (a, b)
                && let Some(note) = first_array_difference(x, y)
            {
                let _ = writeln!(out, "      {note}");
            }
        }
    }
}

/// Where two arrays first differ: `length: 512 -> 513, first difference at index 511: "a" -> "b"`.
fn first_array_difference(a: &Array, b: &Array) -> Option<String> {
    if a.element_type_name() != b.element_type_name() {
        return Some(format!(
            "element type: {} -> {}",
            a.element_type_name(),
            b.element_type_name()
        ));
    }
    let d = crate::diff::ArrayDifference::between(a, b)?;
    let element = |v: &Option<Value>| v.as_ref().map_or("(none)".into(), value_summary);
    let length = if d.old_length == d.new_length {
        String::new()
    } else {
        format!("length: {} -> {}, ", d.old_length, d.new_length)
    };
    Some(format!(
        "{length}first difference at index {}: {} -> {}",
        d.index,
        element(&d.old),
        element(&d.new)
    ))
}

/// Line diff of a long string (e.g. `tokenizer.chat_template`), two lines of context.
fn write_text_diff(out: &mut String, old: &str, new: &str, palette: &Palette) {
    let text_diff = similar::TextDiff::from_lines(old, new);
    for group in text_diff.grouped_ops(2) {
        let _ = writeln!(out, "{}", palette.dim("      @@"));
        for op in group {
            for change in text_diff.iter_changes(&op) {
                let line = shown(change.value().trim_end_matches(['\n', '\r']));
                let text = match change.tag() {
                    similar::ChangeTag::Delete => palette.removed(&format!("      -{line}")),
                    similar::ChangeTag::Insert => palette.added(&format!("      +{line}")),
                    similar::ChangeTag::Equal => format!("       {line}"),
                };
                let _ = writeln!(out, "{text}");
            }
        }
    }
}

fn write_tensor_change(
    out: &mut String,
    name: &str,
    change: &Change<TensorInfo>,
    palette: &Palette,
) {
    let name = shown(name);
    match change {
        Change::Added(t) => {
            let _ = writeln!(
                out,
                "{}",
                palette.added(&format!("  + {name} {}", tensor_summary(t)))
            );
        }
        Change::Removed(t) => {
            let _ = writeln!(
                out,
                "{}",
                palette.removed(&format!("  - {name} {}", tensor_summary(t)))
            );
        }
        Change::Changed(a, b) => {
            let _ = writeln!(out, "{}", palette.changed(&format!("  ~ {name}:")));
            if a.dtype != b.dtype {
                let _ = writeln!(out, "      dtype: {} -> {}", a.dtype, b.dtype);
            }
            if a.shape != b.shape {
                let _ = writeln!(
                    out,
                    "      shape: {} -> {}",
                    shape_text(&a.shape),
                    shape_text(&b.shape)
                );
            }
            if a.byte_length != b.byte_length {
                let _ = writeln!(
                    out,
                    "      byte_length: {} -> {}",
                    a.byte_length, b.byte_length
                );
            }
        }
    }
}

/// 1234567 -> "1,234,567".
pub(crate) fn group_digits(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// 1536 -> "1.5 KiB".
pub(crate) fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}
