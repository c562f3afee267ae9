//! The HTML report of a run (`ci --html`): the files table of the job summary, then one section
//! per changed model in the same order, each with its structural diff and, with `--values`,
//! its heatmap and changed tensors, or its conversion report. The page and its parts are the
//! renderer's ([`crate::render::html`]); this only lays out the run.

use std::io::Write;

use super::error::CiError;
use super::report::CiReport;
use super::sections::file_name;
use crate::escape::{html_name, html_text, shown_message};
use crate::git::counts_text;
use crate::render::html as page;

/// Where the files' sections go in the page.
const SECTIONS: &str = "\u{1}weight-inspect sections\u{1}";

/// The whole page, written to `out`; the files' sections copied from their spool.
pub(super) fn render(report: &CiReport, out: &mut dyn Write) -> Result<(), CiError> {
    let title = format!(
        "model changes <code>{}</code> → <code>{}</code>",
        html_name(report.base.short()),
        html_name(report.head.short())
    );
    // The page around the sections is small (a row per file); the sections are copied from
    // their spool where the marker stands.
    let mut page = String::new();
    page::write_document(&mut page, &title, &mut |body| {
        files(body, report);
        let _ = body.write_str(SECTIONS);
    });
    let (before, after) = page
        .split_once(SECTIONS)
        .expect("the page holds its body once");
    let io = |e| CiError::from(crate::error::Error::io("<HTML report>", e));
    out.write_all(before.as_bytes()).map_err(io)?;
    if let Some(sections) = &report.html_sections {
        sections.copy_to(out).map_err(io)?;
    }
    out.write_all(after.as_bytes()).map_err(io)?;
    Ok(())
}

/// The summary line, the files table and a section per file.
fn files(body: &mut dyn std::fmt::Write, report: &CiReport) {
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
        let _ = body.write_str(
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
                file_name(&f.change),
                html_text(&f.format),
                html_text(&counts_text(f.counts)),
                html_text(&shown_message(f.weights.as_deref().unwrap_or("—")))
            );
        }
        let _ = body.write_str("</tbody></table>\n");
    }
}
