//! The HTML report of a run (`ci --html`): the files table of the job summary, then one section
//! per changed model in the same order, each with its structural diff and, with `--values`,
//! its heatmap and changed tensors, or its conversion report. The page and its parts are the
//! renderer's ([`crate::render::html`]); this only lays out the run.

use std::fmt::Write;

use super::report::CiReport;
use crate::escape::{html_name, html_text, shown, shown_message};
use crate::git::{ComparedFile, counts_text};
use crate::render::html as page;

/// The whole page.
pub(super) fn render(report: &CiReport) -> String {
    let title = format!(
        "model changes <code>{}</code> → <code>{}</code>",
        html_name(report.base.short()),
        html_name(report.head.short())
    );
    let mut body = String::new();
    let class = if report.failed() {
        "summary bad"
    } else {
        "summary"
    };
    let _ = writeln!(
        body,
        "<p class=\"{class}\">{}</p>",
        html_text(&shown_message(&report.summary_line()))
    );
    if !report.files.is_empty() {
        body.push_str(
            "<table class=\"changes files\" id=\"files\"><thead><tr><th class=\"kind\">status</th>\
             <th class=\"name\">file</th><th class=\"kind\">format</th><th class=\"kind\">tensors \
             +/−/~, metadata +/−/~</th><th class=\"kind\">weights</th></tr></thead>\n<tbody>\n",
        );
        for (i, f) in report.files.iter().enumerate() {
            let _ = writeln!(
                body,
                "<tr><td class=\"kind\">{}</td><td class=\"name\"><a href=\"#file-{i}\">{}</a>\
                 </td><td class=\"kind\">{}</td><td class=\"kind\">{}</td><td class=\"kind\">{}\
                 </td></tr>",
                f.change.status.name(),
                file_name(f),
                html_text(&f.format()),
                html_text(&counts_text(f.counts())),
                html_text(&shown_message(f.weights().as_deref().unwrap_or("—")))
            );
        }
        body.push_str("</tbody></table>\n");
    }
    for (i, f) in report.files.iter().enumerate() {
        body.push_str(&section(i, f));
    }
    page::document(&title, &body)
}

/// A file's name as the page shows it (a rename as `old → new`).
fn file_name(f: &ComparedFile) -> String {
    match (&f.change.old_path, &f.change.new_path) {
        (Some(a), Some(b)) if a != b => format!("{} → {}", html_name(a), html_name(b)),
        _ => html_name(f.path()),
    }
}

fn section(i: usize, f: &ComparedFile) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "<h2 id=\"file-{i}\"><code>{}</code></h2>\n<p class=\"dim\">{}, {}, {}</p>",
        file_name(f),
        f.change.status.name(),
        html_text(&f.format()),
        html_text(&counts_text(f.counts()))
    );
    let palette = crate::render::Palette::plain();
    match &f.diff {
        Some(diff) => {
            let mut text = String::new();
            if let Some(model) = &f.model {
                text.push_str("multi-file model; changed files:\n");
                for file in &model.files {
                    let _ = writeln!(text, "  {}", shown(file));
                }
            }
            let blobs_differ = f.change.old_id != f.change.new_id;
            text.push_str(&crate::render::text::diff_or_identical(
                diff,
                &palette,
                blobs_differ,
            ));
            out.push_str(&page::diff_block(&text));
        }
        // Added, deleted or unreadable: the job summary's text says what is known.
        None => out.push_str(&page::diff_block(&f.details())),
    }
    let id = format!("file-{i}");
    match &f.values {
        Some(Ok(values)) => {
            out.push_str("<h3>Values</h3>\n");
            out.push_str(&page::values_part(&id, values));
        }
        Some(Err(why)) if f.diff.is_some() => {
            let _ = writeln!(
                out,
                "<p class=\"summary\">values not compared: {}</p>",
                html_text(&shown_message(&why.to_string()))
            );
        }
        _ => {}
    }
    if let Some((reference, outcome)) = &f.conversion {
        let _ = writeln!(
            out,
            "<h3>Conversion of <code>{}</code></h3>",
            html_name(reference)
        );
        match outcome {
            Ok(c) => out.push_str(&page::conversion_part(
                &format!("{id}-conversion"),
                c,
                reference,
                f.path(),
            )),
            Err(why) => {
                let _ = writeln!(
                    out,
                    "<p class=\"summary\">not compared with the reference: {}</p>",
                    html_text(&shown_message(&why.to_string()))
                );
            }
        }
    }
    out
}
