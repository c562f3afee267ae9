//! Self-contained HTML reports of value diffs and conversions: one file with its style, script
//! and pictures inline (it is opened from disk or as a CI artifact, so it loads nothing), with
//! the structural diff, a per-layer [`heatmap`] of rel_l2 and a sortable table of the changed
//! tensors.
//!
//! Every name and string from a model file or a repository reaches the page through
//! [`crate::escape::html_name`] (or, once shown, [`crate::escape::html_text`]); the script
//! writes text into the page with `textContent` only.

mod assets;
mod entry;
pub(crate) mod heatmap;

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::fmt::Write;

use crate::conversion::{ComparedPair, Conversion};
use crate::diff::StructuralDiff;
use crate::escape::{html_name, html_text, shown};
use crate::values::groups::GroupValues;
use crate::values::{Method, ValueDiff};

use super::conversion::{config_check, paired_by_text, sources_text};
use super::values::{cosine_text, figure};
use entry::group;
use entry::{Entry, State};

/// Lines of the structural diff shown at most: a report stays a file one can open and mail
/// (the JSON output has every line).
const DIFF_LINES: usize = 4000;

/// The entries of a value diff: every compared tensor, then those not compared.
pub(crate) fn value_entries(values: &ValueDiff) -> impl Iterator<Item = Entry> + '_ {
    let compared = values.tensors.iter().map(|t| Entry {
        key: t.name.clone(),
        label: shown(&t.name).into_owned(),
        detail: if t.dtype_changed() {
            format!("{} → {}", t.old_dtype, t.new_dtype)
        } else {
            t.old_dtype.to_owned()
        },
        elements: t.elements,
        state: match (t.method, t.changed) {
            (Method::Bytes(_), true) => State::BytesChanged,
            (Method::Bytes(_), false) => State::BytesSame,
            (Method::Values, true) => State::Changed,
            (Method::Values, false) => State::Unchanged,
        },
        stats: t.stats,
        note: match t.method {
            Method::Bytes(why) => Some(format!("compared byte for byte: {}", why.describe())),
            Method::Values if t.dtype_changed() => {
                Some("dtype changed: the figures are the quantization error".into())
            }
            Method::Values => t
                .bits_differ
                .map(|b| format!("values equal, bits differ: {}", b.describe())),
        },
    });
    let skipped = values.skipped.iter().map(|s| Entry {
        key: s.name.clone(),
        label: shown(&s.name).into_owned(),
        detail: String::new(),
        elements: 0,
        state: State::NotCompared(s.reason.clone()),
        stats: None,
        note: None,
    });
    compared.chain(skipped)
}

/// The entries of a conversion: every compared pair (named by the converted tensor), then the
/// converted tensors not compared or that no source tensor maps to.
pub(crate) fn conversion_entries(c: &Conversion) -> impl Iterator<Item = Entry> + '_ {
    let pairs = c.pairs.iter().map(|p| Entry {
        key: p.target.clone(),
        label: format!("{} ← {}", shown(&p.target), sources_text(&p.sources)),
        detail: pair_detail(p),
        elements: p.elements,
        state: if p.suspect.is_some() {
            State::Suspect
        } else if p.identical() {
            State::Unchanged
        } else {
            State::Changed
        },
        stats: Some(p.stats),
        note: super::conversion::suspect_text(p),
    });
    let not_compared = c.not_compared.iter().filter_map(|n| {
        let target = n.target.as_ref()?;
        Some(Entry {
            key: target.clone(),
            label: format!("{} ← {}", shown(target), sources_text(&n.sources)),
            detail: String::new(),
            elements: 0,
            state: State::NotCompared(n.why.clone()),
            stats: None,
            note: None,
        })
    });
    let added = c.added.iter().map(|a| Entry {
        key: a.clone(),
        label: shown(a).into_owned(),
        detail: String::new(),
        elements: 0,
        state: State::NotCompared("no source tensor maps to it".into()),
        stats: None,
        note: None,
    });
    pairs.chain(not_compared).chain(added)
}

fn pair_detail(p: &ComparedPair) -> String {
    format!(
        "{}, {} → {}",
        p.transform.name(),
        p.source_dtypes.join("+"),
        p.target_dtype
    )
}

/// A whole page written to `out` as it is made: `title` (already HTML) as its heading, then
/// what `body` writes.
pub(crate) fn write_document(
    out: &mut dyn Write,
    title: &str,
    body: &mut dyn FnMut(&mut dyn Write),
) {
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; \
         style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">\n\
         <title>weight-inspect: {}</title>\n<style>{}</style>\n</head>\n<body>\n\
         <h1>weight-inspect: {title}</h1>\n",
        strip_tags(title),
        assets::STYLE,
    );
    body(out);
    let _ = write!(
        out,
        "\n<footer>weight-inspect {} · rel_l2 = \
         ‖b − a‖ / ‖a‖ per tensor · max |Δ| over finite elements · cosine of the two tensors \
         · a self-contained file: nothing is loaded from the network</footer>\n\
         <script>{}</script>\n</body>\n</html>\n",
        env!("CARGO_PKG_VERSION"),
        assets::SCRIPT
    );
}

/// The text of a heading for the `<title>` (markup dropped; the text stays escaped).
fn strip_tags(html: &str) -> String {
    let mut out = String::with_capacity(html.len());
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out
}

/// A structural diff as the text report prints it, in a block whose added, removed and
/// changed lines are coloured; cut after [`DIFF_LINES`] lines.
pub(crate) fn write_diff_block(out: &mut dyn Write, text: &str) {
    let _ = out.write_str("<pre class=\"diff\">");
    let total = text.lines().count();
    for line in text.lines().take(DIFF_LINES) {
        let trimmed = line.trim_start();
        let class = if !line.starts_with(' ') && line.ends_with(':') {
            Some("head")
        } else if trimmed.starts_with("+ ") {
            Some("add")
        } else if trimmed.starts_with("- ") {
            Some("rem")
        } else if trimmed.starts_with("~ ") {
            Some("chg")
        } else {
            None
        };
        // The text report already shows every name escaped; here it only becomes HTML text.
        let line = html_text(line);
        let _ = match class {
            Some(c) => writeln!(out, "<span class=\"{c}\">{line}</span>"),
            None => writeln!(out, "{line}"),
        };
    }
    if total > DIFF_LINES {
        let _ = writeln!(
            out,
            "<span class=\"dim\">… {} more lines (--json has the whole diff)</span>",
            total - DIFF_LINES
        );
    }
    let _ = out.write_str("</pre>\n");
}

/// The values part of a section: the summary line, what was not compared, the heatmap and the
/// table of changed tensors. `id` keeps the element ids of several sections apart.
pub(crate) fn write_values_part(out: &mut dyn Write, id: &str, values: &ValueDiff) {
    let class = if values.changed_count() > 0 {
        "summary bad"
    } else {
        "summary good"
    };
    let _ = writeln!(
        out,
        "<p class=\"{class}\">{}</p>",
        html_text(&super::values::summary(values))
    );
    let count = values.tensors.len() + values.skipped.len();
    entries_part(out, id, &|| value_entries(values), count, "dtype");
}

/// A training checkpoint's groups, one row each (model weights apart from optimizer state …):
/// tensors compared, changed and identical, rel_l2 over the group and its largest; nothing for
/// other files.
pub(crate) fn write_groups_part(out: &mut dyn Write, id: &str, groups: &[GroupValues]) {
    if groups.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "<h3>By group</h3>\n<table class=\"groups\" id=\"{id}-groups\">\n<thead><tr>\
         <th class=\"name\">group</th><th>compared</th><th>changed</th><th>identical</th>\
         <th>rel_l2 over the group</th><th>largest rel_l2</th></tr></thead>\n<tbody>"
    );
    for g in groups {
        let class = if g.changed > 0 { "bad" } else { "good" };
        let rel = match (g.rel_l2, g.infinite) {
            (Some(r), _) => figure(r),
            (None, true) => "inf".into(),
            (None, false) => "-".into(),
        };
        let largest = match (g.max_rel_l2, g.infinite) {
            (_, true) => "inf".into(),
            (Some(m), false) => figure(m),
            (None, false) => "-".into(),
        };
        let _ = writeln!(
            out,
            "<tr class=\"{class}\" id=\"{id}-group-{}\"><th class=\"name\">{}</th><td>{}</td>\
             <td>{}</td><td>{}</td><td>{rel}</td><td>{largest}</td></tr>",
            g.group,
            html_text(crate::values::groups::label(g.group)),
            group(g.compared as u64),
            group(g.changed as u64),
            group(g.identical as u64),
        );
    }
    let _ = out.write_str("</tbody></table>\n");
}

/// The conversion part of a section: how the tensors were paired, the summary line, suspect
/// pairs, the heatmap, the table of changed pairs, what was dropped, added or not compared,
/// and the configuration checks.
pub(crate) fn write_conversion_part(
    out: &mut dyn Write,
    id: &str,
    c: &Conversion,
    source: &str,
    target: &str,
) {
    let _ = writeln!(
        out,
        "<p>Converted model <code>{}</code> compared with its source <code>{}</code>: {}.</p>",
        html_name(target),
        html_name(source),
        html_text(&paired_by_text(c))
    );
    let class = if c.summary().faithful {
        "summary good"
    } else {
        "summary bad"
    };
    let _ = writeln!(
        out,
        "<p class=\"{class}\">{}</p>",
        html_text(&super::conversion::summary(c))
    );
    if !c.pairs.is_empty() {
        let _ = writeln!(
            out,
            "<p>Expected error band: {}.<br>Transforms: {}.</p>",
            html_text(&super::conversion::bands_line(c)),
            html_text(&super::conversion::transforms_line(c))
        );
    }
    let suspects: Vec<&ComparedPair> = c.pairs.iter().filter(|p| p.suspect.is_some()).collect();
    if !suspects.is_empty() {
        let _ = out.write_str("<h3>Suspect pairs</h3>\n<ul class=\"plain\">\n");
        for p in suspects {
            let _ = writeln!(
                out,
                "<li>{}: {}</li>",
                html_name(&p.target),
                html_text(&super::conversion::suspect_text(p).unwrap_or_default())
            );
        }
        let _ = out.write_str("</ul>\n");
    }
    let count = c.pairs.len()
        + c.not_compared.iter().filter(|n| n.target.is_some()).count()
        + c.added.len();
    entries_part(
        out,
        id,
        &|| conversion_entries(c),
        count,
        "transform, dtypes",
    );
    let identical: Vec<&ComparedPair> = c.pairs.iter().filter(|p| p.identical()).collect();
    if !identical.is_empty() {
        let _ = writeln!(
            out,
            "<h3>Identical values</h3>\n<details><summary>{} pair(s)</summary>\n\
             <ul class=\"plain\">",
            identical.len()
        );
        for p in identical {
            let _ = writeln!(
                out,
                "<li>{} ← {} ({})</li>",
                html_name(&p.target),
                html_text(&sources_text(&p.sources)),
                html_text(&pair_detail(p))
            );
        }
        let _ = out.write_str("</ul></details>\n");
    }
    let list = |out: &mut dyn Write, heading: &str, items: Vec<String>| {
        if items.is_empty() {
            return;
        }
        let _ = writeln!(out, "<h3>{heading}</h3>\n<ul class=\"plain\">");
        for item in items {
            let _ = writeln!(out, "<li>{item}</li>");
        }
        let _ = out.write_str("</ul>\n");
    };
    list(
        out,
        "Source tensors not in the converted model",
        c.dropped
            .iter()
            .map(|d| format!("{}: {}", html_name(&d.source), html_text(&d.why)))
            .collect(),
    );
    list(
        out,
        "Tensors of the converted model no source tensor maps to",
        c.added.iter().map(|a| html_name(a)).collect(),
    );
    list(
        out,
        "Not compared",
        c.not_compared
            .iter()
            .map(|n| {
                format!(
                    "{} ← {}: {}",
                    n.target.as_deref().map_or("-".into(), html_name),
                    html_text(&sources_text(&n.sources)),
                    html_text(&shown(&n.why))
                )
            })
            .collect(),
    );
    match &c.metadata.config {
        Some(config) => {
            let (checked, equal, differ) = config_check(&c.metadata, html_name);
            let config = crate::escape::shown_path(config).to_string();
            let config = html_text(&config);
            let _ = writeln!(
                out,
                "<h3>Configuration</h3>\n<p><code>{config}</code>: {checked} checked, \
                 {equal} equal.</p>",
            );
            if !differ.is_empty() {
                let _ = out.write_str("<ul class=\"plain\">\n");
                for line in differ {
                    let _ = writeln!(out, "<li>{line}</li>");
                }
                let _ = out.write_str("</ul>\n");
            }
        }
        None => {
            let _ = out.write_str(
                "<h3>Configuration</h3>\n<p>No config.json beside the source: not checked.</p>\n",
            );
        }
    }
}

/// The page's caps: the changed-tensor table lists the [`MAX_TABLE_ROWS`] most changed
/// tensors, and the per-layer heatmap is drawn for models of at most [`MAX_HEATMAP_ENTRIES`]
/// tensors; beyond them the page says how many it left out (`--json` has them all), so a
/// model of a million tensors makes a page of a few megabytes, not hundreds.
pub(crate) const MAX_TABLE_ROWS: usize = 5_000;
pub(crate) const MAX_HEATMAP_ENTRIES: usize = 20_000;

/// The heatmap and the table of the changed entries, of the `count` entries `entries` makes.
/// The entries are made as they are written, not kept: the heatmap holds at most
/// [`MAX_HEATMAP_ENTRIES`] of them, and the table the [`MAX_TABLE_ROWS`] most changed.
fn entries_part<I: Iterator<Item = Entry>>(
    out: &mut dyn Write,
    id: &str,
    entries: &dyn Fn() -> I,
    count: usize,
    detail_heading: &str,
) {
    if count > MAX_HEATMAP_ENTRIES {
        let _ = writeln!(
            out,
            "<h3>Per layer</h3>\n<p class=\"dim\">No heatmap: {} tensors, more than the {} \
             this page draws one for (--json has every figure).</p>",
            group(count as u64),
            group(MAX_HEATMAP_ENTRIES as u64)
        );
    } else {
        let all: Vec<Entry> = entries().collect();
        let map = heatmap::render(&all, id);
        if !map.is_empty() {
            let _ = out.write_str("<h3>Per layer</h3>\n");
            let _ = out.write_str(&map);
        }
    }
    let mut has_figure = false;
    let mut changed = 0usize;
    let mut most_changed = MostChanged::new(MAX_TABLE_ROWS);
    for e in entries() {
        has_figure |= heatmap::Scale::has_figure(&e);
        if e.changed() {
            changed += 1;
            most_changed.offer(e);
        }
    }
    if changed == 0 {
        return;
    }
    let scale = heatmap::Scale::when(has_figure);
    let _ = writeln!(
        out,
        "<h3>Changed tensors ({})</h3>\n<p class=\"dim\">Click a heading to sort; the address keeps the order (#sort=COLUMN-asc or -desc).</p>\n\
         <div class=\"scroll\"><table class=\"changes\" id=\"{id}-changes\">\n<thead><tr>\
         <th class=\"name\">name</th><th class=\"kind\">{}</th><th>rel_l2</th><th>max |Δ|</th>\
         <th>cosine</th><th>changed elements</th></tr></thead>\n<tbody>",
        changed,
        html_text(detail_heading)
    );
    let left_out = changed.saturating_sub(MAX_TABLE_ROWS);
    let sorted = most_changed.into_sorted();
    for e in sorted {
        let row_class = if e.state == State::Suspect {
            " class=\"suspect\""
        } else {
            ""
        };
        let (rel, max, cos, count) = match e.stats {
            Some(s) if e.state != State::BytesChanged => (
                (
                    s.rel_l2.map_or("inf".into(), |r| format!("{r:e}")),
                    s.rel_l2.map_or("inf".into(), figure),
                ),
                (format!("{:e}", s.max_abs_diff), figure(s.max_abs_diff)),
                (
                    s.cosine.map_or("-1e999".into(), |c| format!("{c:e}")),
                    s.cosine.map_or("-".into(), cosine_text),
                ),
                (
                    s.changed_elements.to_string(),
                    format!("{}/{}", group(s.changed_elements), group(e.elements)),
                ),
            ),
            _ => (
                ("-1".into(), "bytes".into()),
                ("-1".into(), "-".into()),
                ("-1e999".into(), "-".into()),
                ("-1".into(), "-".into()),
            ),
        };
        let bar = match (e.rel_l2(), scale) {
            (Some(r), Some(scale)) if e.state != State::BytesChanged => {
                format!(
                    "<span class=\"bar\" style=\"width:12px;background:{}\"></span>",
                    heatmap::colour_of(r, scale)
                )
            }
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "<tr{row_class} data-tensor><td class=\"name\" title=\"{}\">{}</td>\
             <td class=\"kind\">{}</td><td data-v=\"{}\">{bar}{}</td><td data-v=\"{}\">{}</td>\
             <td data-v=\"{}\">{}</td><td data-v=\"{}\">{}</td></tr>",
            html_text(&e.figures_text()),
            html_text(&e.label),
            html_text(&e.detail),
            rel.0,
            rel.1,
            max.0,
            max.1,
            cos.0,
            cos.1,
            count.0,
            count.1
        );
    }
    let _ = out.write_str("</tbody></table></div>\n");
    if left_out > 0 {
        let _ = writeln!(
            out,
            "<p class=\"dim\">… and {} more changed tensors, less changed than those listed \
             (the table lists the {} most changed; --json has them all).</p>",
            group(left_out as u64),
            group(MAX_TABLE_ROWS as u64)
        );
    }
}

/// The `capacity` most changed entries of those offered, kept as they come: the table's rows
/// in its order (more severe first, then by name, then as offered), without holding the rest.
struct MostChanged {
    capacity: usize,
    offered: usize,
    /// The greatest is the least changed kept, dropped first.
    heap: BinaryHeap<Ranked>,
}

struct Ranked {
    entry: Entry,
    offered: usize,
}

impl Ranked {
    /// `Less` when `self` comes first in the table.
    fn table_order(&self, other: &Ranked) -> Ordering {
        other
            .entry
            .severity()
            .total_cmp(&self.entry.severity())
            .then_with(|| self.entry.key.cmp(&other.entry.key))
            .then_with(|| self.offered.cmp(&other.offered))
    }
}

impl PartialEq for Ranked {
    fn eq(&self, other: &Ranked) -> bool {
        self.table_order(other) == Ordering::Equal
    }
}

impl Eq for Ranked {}

impl PartialOrd for Ranked {
    fn partial_cmp(&self, other: &Ranked) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Ranked {
    fn cmp(&self, other: &Ranked) -> Ordering {
        self.table_order(other)
    }
}

impl MostChanged {
    fn new(capacity: usize) -> MostChanged {
        MostChanged {
            capacity,
            offered: 0,
            heap: BinaryHeap::new(),
        }
    }

    fn offer(&mut self, entry: Entry) {
        let ranked = Ranked {
            entry,
            offered: self.offered,
        };
        self.offered += 1;
        if self.heap.len() < self.capacity {
            self.heap.push(ranked);
        } else if let Some(mut last) = self.heap.peek_mut()
            && ranked < *last
        {
            *last = ranked;
        }
    }

    /// The entries kept, in the table's order.
    fn into_sorted(self) -> impl Iterator<Item = Entry> {
        self.heap.into_sorted_vec().into_iter().map(|r| r.entry)
    }
}

/// `diff --values --html`: the report of two models compared by value.
fn diff_page(
    out: &mut dyn Write,
    old: &str,
    new: &str,
    diff: &StructuralDiff,
    values: &ValueDiff,
    groups: &[GroupValues],
) {
    let title = format!(
        "<code>{}</code> → <code>{}</code>",
        html_name(old),
        html_name(new)
    );
    write_document(out, &title, &mut |out| {
        let _ = out.write_str("<h2>Structure</h2>\n");
        let palette = super::palette::Palette::plain();
        let text = super::text::diff_or_identical(diff, &palette, values.changed_count() > 0);
        write_diff_block(out, &text);
        drop(text);
        let _ = out.write_str("<h2>Values</h2>\n");
        write_values_part(out, "values", values);
        write_groups_part(out, "values", groups);
    });
}

/// `diff --html` without `--values`: the structural diff and how the bytes compare, with a
/// word on what `--values` adds.
fn structure_page(
    out: &mut dyn Write,
    old: &str,
    new: &str,
    diff: &StructuralDiff,
    bytes: &crate::cmp::BytesOutcome,
) {
    let title = format!(
        "<code>{}</code> → <code>{}</code>",
        html_name(old),
        html_name(new)
    );
    write_document(out, &title, &mut |out| {
        let _ = out.write_str("<h2>Structure</h2>\n");
        let palette = super::palette::Palette::plain();
        let mut text = super::text::diff_or_identical(diff, &palette, false);
        text.push_str(&super::bytes::text(bytes, super::bytes::Hint::Diff, true));
        write_diff_block(out, &text);
        let _ = out.write_str(
            "<p>Weight values were not compared: <code>diff --values --html</code> adds the \
             per-layer heatmap of rel_l2 and the table of changed tensors.</p>\n",
        );
    });
}

/// Writes the structural page of `diff --html` (no `--values`) to `path`.
pub(crate) fn write_structure_report(
    path: &std::path::Path,
    old: &str,
    new: &str,
    diff: &StructuralDiff,
    bytes: &crate::cmp::BytesOutcome,
) -> crate::error::Result<()> {
    stream_to(path, &mut |out| structure_page(out, old, new, diff, bytes))
}

/// `diff --values --html` of a conversion: the converted model against its source.
fn conversion_page(out: &mut dyn Write, c: &Conversion, source: &str, target: &str) {
    let title = format!(
        "conversion <code>{}</code> → <code>{}</code>",
        html_name(source),
        html_name(target)
    );
    write_document(out, &title, &mut |out| {
        let _ = out.write_str("<h2>Conversion</h2>\n");
        write_conversion_part(out, "conversion", c, source, target);
    });
}

/// Writes the `diff --values --html` page to `path` as it is made (memory bounded by the page's
/// caps, not by the model), through a temporary file renamed over it.
pub(crate) fn write_diff_report(
    path: &std::path::Path,
    old: &str,
    new: &str,
    diff: &StructuralDiff,
    values: &ValueDiff,
    groups: &[GroupValues],
) -> crate::error::Result<()> {
    stream_to(path, &mut |out| {
        diff_page(out, old, new, diff, values, groups);
    })
}

/// Writes the `diff --values --html` page of a conversion to `path` as it is made.
pub(crate) fn write_conversion_report(
    path: &std::path::Path,
    c: &Conversion,
    source: &str,
    target: &str,
) -> crate::error::Result<()> {
    stream_to(path, &mut |out| conversion_page(out, c, source, target))
}

/// Writes `path` through a temporary file renamed over it; `page` writes the text.
pub(crate) fn stream_to(
    path: &std::path::Path,
    page: &mut dyn FnMut(&mut dyn Write),
) -> crate::error::Result<()> {
    crate::fsutil::write_atomically(path, |file| {
        let mut sink = IoSink { file, error: None };
        page(&mut sink);
        sink.error.map_or(Ok(()), Err)
    })
}

/// Text written to a file; the first error is kept (and nothing more written) for the caller,
/// as `fmt::Write` carries none.
struct IoSink<'w, W: std::io::Write> {
    file: &'w mut W,
    error: Option<std::io::Error>,
}

impl<W: std::io::Write> Write for IoSink<'_, W> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        if self.error.is_some() {
            return Err(std::fmt::Error);
        }
        self.file.write_all(s.as_bytes()).map_err(|e| {
            self.error = Some(e);
            std::fmt::Error
        })
    }
}

#[cfg(test)]
mod cap_tests {
    use super::*;
    use crate::values::{TensorValues, ValueStats};

    /// A model of many changed tensors makes a page of bounded size: the table stops at its
    /// cap and says how many it left out, and no heatmap is drawn past its cap.
    #[test]
    fn the_page_is_capped() {
        let values = ValueDiff {
            tensors: (0..=MAX_HEATMAP_ENTRIES)
                .map(|i| {
                    let stats = ValueStats {
                        changed_elements: 1,
                        rel_l2: Some(1e-3),
                        cosine: Some(0.99),
                        max_abs_diff: 0.5,
                        ..ValueStats::identical()
                    };
                    TensorValues::changed_f32(format!("blk.{i}.attn_q.weight"), 4, stats)
                })
                .collect(),
            ..ValueDiff::default()
        };
        let mut page = String::new();
        write_values_part(&mut page, "values", &values);
        assert_eq!(
            page.matches("<tr class").count() + page.matches("<tr data-tensor").count(),
            MAX_TABLE_ROWS
        );
        assert!(
            page.contains("… and 15,001 more changed tensors"),
            "{}",
            &page[page.len() - 400..]
        );
        assert!(page.contains("No heatmap: 20,001 tensors"));
        assert!(page.len() < 4 << 20, "{} bytes", page.len());
    }

    /// The table kept as entries come lists what sorting every changed entry listed: the
    /// most changed first, ties by name, then as given.
    #[test]
    fn the_most_changed_are_kept_in_the_table_order() {
        let entry = |key: &str, rel_l2: f64, note: &str| Entry {
            key: key.into(),
            label: key.into(),
            detail: String::new(),
            elements: 1,
            state: State::Changed,
            stats: Some(ValueStats {
                rel_l2: Some(rel_l2),
                ..ValueStats::identical()
            }),
            note: Some(note.into()),
        };
        let entries: Vec<Entry> = (0..200)
            .map(|i| {
                entry(
                    &format!("t{}", i % 17),
                    f64::from((i * 7) % 5),
                    &i.to_string(),
                )
            })
            .collect();
        let mut sorted = entries.clone();
        sorted.sort_by(|a, b| {
            b.severity()
                .total_cmp(&a.severity())
                .then_with(|| a.key.cmp(&b.key))
        });
        sorted.truncate(30);
        let mut kept = MostChanged::new(30);
        for e in entries {
            kept.offer(e);
        }
        let kept: Vec<Option<String>> = kept.into_sorted().map(|e| e.note).collect();
        let expected: Vec<Option<String>> = sorted.into_iter().map(|e| e.note).collect();
        assert_eq!(kept, expected);
    }
}
