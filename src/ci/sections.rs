//! The parts of the reports made per file while its models are at hand: its element of the
//! JSON report's `files` and its section of the HTML page (both spooled by the report).

use std::fmt::Write as _;

use super::error::CiError;
use crate::escape::{html_name, html_text, shown, shown_message};
use crate::git::{ComparedFile, FileChange, counts_text};
use crate::render::html as page;

/// A file's JSON as an element of the report's `files`, pretty-printed four spaces deep
/// (strings hold no raw line break, so every line is indented alike).
pub(crate) fn file_json(file: &ComparedFile) -> Result<String, CiError> {
    let text = serde_json::to_string_pretty(&file.json(true)).map_err(CiError::Serialize)?;
    Ok(crate::git::indented_json(&text))
}

/// A file's name as the page shows it (a rename as `old → new`).
pub(crate) fn file_name(change: &FileChange) -> String {
    match (&change.old_path, &change.new_path) {
        (Some(a), Some(b)) if a != b => format!("{} → {}", html_name(a), html_name(b)),
        _ => html_name(change.path()),
    }
}

/// The section of the `i`th file: its structural diff, values and conversion.
pub(crate) fn html_section(i: usize, f: &ComparedFile) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "<h2 id=\"file-{i}\"><code>{}</code></h2>\n<p class=\"dim\">{}, {}, {}</p>",
        file_name(&f.change),
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
            page::write_diff_block(&mut out, &text);
        }
        // Added, deleted or unreadable: the job summary's text says what is known.
        None => page::write_diff_block(&mut out, &f.details(None)),
    }
    let id = format!("file-{i}");
    match &f.values {
        Some(Ok(values)) => {
            out.push_str("<h3>Values</h3>\n");
            page::write_values_part(&mut out, &id, values);
            if let Some(new) = f.new.as_ref().and_then(|s| s.artifact()) {
                page::write_groups_part(&mut out, &id, &values.by_group(new));
            }
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
            Ok(c) => page::write_conversion_part(
                &mut out,
                &format!("{id}-conversion"),
                c,
                reference,
                f.path(),
            ),
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
