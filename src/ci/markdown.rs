//! The job summary: a table of the changed model files, the policy violations, and a
//! collapsible structural diff per file, kept under the size GitHub accepts.
//!
//! GitHub drops a step summary larger than 1 MiB altogether, so every section is appended
//! piece by piece against a byte budget; what does not fit is replaced by a note saying how
//! much was left out and where to find it (the JSON report has everything).

use std::fmt::Write;

use super::record::{CiFile, SideCell, SideState};
use super::report::CiReport;
use crate::escape::{markdown_cell, shown};
use crate::git::Counts;
use crate::policy::{Phrasing, plural};
use crate::render::text::human_bytes;

/// GitHub's limit for one step's summary (`$GITHUB_STEP_SUMMARY`), in bytes.
pub(crate) const SUMMARY_LIMIT: usize = 1024 * 1024;

// The report keeps the diffs of every file a summary can reach.
const _: () = assert!(super::record::DETAILS_KEPT >= SUMMARY_LIMIT);

/// Bytes kept free while appending, for the notes that close truncated sections.
const RESERVE: usize = 2048;

/// The smallest truncated diff worth showing; below this the file's section is left out.
const MIN_PARTIAL: usize = 1024;

const LIMIT_NOTE: &str = "GitHub accepts at most 1 MiB per step summary";

/// The Markdown report, at most `budget` bytes long.
pub(crate) fn render(report: &CiReport, budget: usize) -> String {
    let mut w = Budgeted {
        out: String::new(),
        budget,
    };
    let header = header(report);
    if !w.push(&header) {
        // Not even the header fits: a one-line note if possible, else nothing.
        let line = format!(
            "weight-inspect: {} (summary omitted: {LIMIT_NOTE})\n",
            report.summary_line()
        );
        return if line.len() <= budget {
            line
        } else {
            String::new()
        };
    }
    files_table(&mut w, report);
    signatures_table(&mut w, report);
    training_table(&mut w, report);
    violations_table(&mut w, report);
    details(&mut w, report);
    w.out
}

struct Budgeted {
    out: String,
    budget: usize,
}

impl Budgeted {
    /// Appends `s` if it fits with [`RESERVE`] bytes to spare.
    fn push(&mut self, s: &str) -> bool {
        if self.room() >= s.len() {
            self.out.push_str(s);
            true
        } else {
            false
        }
    }

    /// What may still be appended before the reserve.
    fn room(&self) -> usize {
        self.budget.saturating_sub(self.out.len() + RESERVE)
    }

    /// Appends a closing note from the reserve (dropped if even that is exhausted).
    fn note(&mut self, s: &str) {
        if self.out.len() + s.len() <= self.budget {
            self.out.push_str(s);
        }
    }
}

fn header(report: &CiReport) -> String {
    let mut out = String::from("## weight-inspect: model changes\n\n");
    let rev = |r: &super::report::Rev| {
        if r.rev == r.commit {
            code(r.short())
        } else {
            format!("{} ({})", code(r.short()), code(&r.rev))
        }
    };
    if report.files.is_empty() {
        let _ = writeln!(
            out,
            "No GGUF, safetensors or PyTorch file changed between {} and {}.",
            rev(&report.base),
            rev(&report.head)
        );
    } else {
        let _ = writeln!(
            out,
            "**{}** between {} and {}.",
            plural(
                report.files.len(),
                "model file changed",
                "model files changed"
            ),
            rev(&report.base),
            rev(&report.head)
        );
    }
    out.push('\n');
    match &report.policy {
        None => out.push_str(
            "No policy file (`.weight-inspect.toml`): structural report only, nothing checked.\n",
        ),
        Some(policy) => {
            let _ = writeln!(
                out,
                "Policy {}: {}{}.",
                code(policy),
                report.tally().sentence(Phrasing::Markdown),
                report.standing_sentence()
            );
        }
    }
    if report.failed() {
        let _ = writeln!(
            out,
            "\n**This fails the job** (`fail-on: {}`).",
            report.fail_on.name()
        );
    }
    if report.policy_changed {
        let _ = writeln!(
            out,
            "\n> [!WARNING]\n> This change modifies the policy file {} itself; the new version \
             was applied.",
            code(report.policy.as_deref().unwrap_or_default())
        );
    }
    out
}

fn files_table(w: &mut Budgeted, report: &CiReport) {
    if report.files.is_empty() {
        return;
    }
    let head = "\n| Status | File | Format | Structural hash (old → new) | Tensors +/−/~ \
                | Metadata +/−/~ | Bytes | Size (old → new) |\n\
                | --- | --- | --- | --- | --- | --- | --- | --- |\n";
    // With --values, a "Weights" column.
    let weights = report.files.iter().any(|f| f.compared_weights);
    let head = if weights {
        head.replace(" |\n|", " | Weights |\n|")
            .replacen("--- |\n", "--- | --- |\n", 1)
    } else {
        head.to_owned()
    };
    if !w.push(&head) {
        w.note(&format!(
            "\n_The table of {} is left out: {LIMIT_NOTE}; see the JSON report._\n",
            plural(report.files.len(), "file", "files")
        ));
        return;
    }
    for (i, f) in report.files.iter().enumerate() {
        let mut row = file_row(f);
        if weights {
            row.pop();
            row.push_str(&format!(
                " {} |\n",
                markdown_cell(f.weights.as_deref().unwrap_or("—"))
            ));
        }
        if !w.push(&row) {
            w.note(&format!(
                "\n_{} not listed: {LIMIT_NOTE}; the JSON report lists every file._\n",
                plural(report.files.len() - i, "more file", "more files")
            ));
            return;
        }
    }
}

/// The model signatures that cover the judged files: who signed each, and whether it still
/// holds, or which file broke it — by this change, or already at the base.
fn signatures_table(w: &mut Budgeted, report: &CiReport) {
    if report.signatures.is_empty() {
        return;
    }
    let head = "\n### Model signatures\n\n| Signature | Signed by | State |\n| --- | --- | --- |\n";
    if !w.push(head) {
        w.note(&format!(
            "\n_The model signatures are left out: {LIMIT_NOTE}; see the JSON report._\n"
        ));
        return;
    }
    for (i, (path, state)) in report.signatures.iter().enumerate() {
        let signer = match &state.signer {
            Ok(signer) => markdown_cell(signer),
            Err(why) => format!("does not verify: {}", markdown_cell(why)),
        };
        let broken = |brought: bool| -> Vec<String> {
            report
                .judged()
                .filter(|(v, s)| {
                    v.rule == "signature"
                        && s.baseline.brought() == brought
                        && (state.files.contains(&v.path) || v.path == *path)
                })
                .map(|(v, _)| format!("{}: {}", cell_code(&v.path), markdown_cell(&v.found)))
                .collect()
        };
        let (new, old) = (broken(true), broken(false));
        let mut parts = Vec::new();
        if !new.is_empty() {
            parts.push(format!("**broken by this change**: {}", new.join("; ")));
        }
        if !old.is_empty() {
            parts.push(format!("broken already at the base: {}", old.join("; ")));
        }
        let text = if parts.is_empty() {
            format!(
                "valid: {} unchanged since signed",
                plural(state.files.len(), "judged file", "judged files")
            )
        } else {
            parts.join("<br>")
        };
        let row = format!("| {} | {signer} | {text} |\n", cell_code(path));
        if !w.push(&row) {
            w.note(&format!(
                "\n_{} not listed: {LIMIT_NOTE}; see the JSON report._\n",
                plural(
                    report.signatures.len() - i,
                    "more signature",
                    "more signatures"
                )
            ));
            return;
        }
    }
}

/// Training checkpoints (a grouped PyTorch checkpoint on a side): the model identity and what
/// changed group by group, so that a new step of the same run reads apart from another model.
fn training_table(w: &mut Budgeted, report: &CiReport) {
    let rows: Vec<&CiFile> = report
        .files
        .iter()
        .filter(|f| f.training.is_some())
        .collect();
    if rows.is_empty() {
        return;
    }
    let head = "\n### Training checkpoints\n\nThe model identity holds the model weights' \
                names, dtypes and shapes and the list of groups (equal across the steps of a \
                run); the groups are told apart.\n\n| File | Model identity and groups |\n\
                | --- | --- |\n";
    if !w.push(head) {
        w.note(&format!(
            "\n_The training checkpoints are left out: {LIMIT_NOTE}; see the JSON report._\n"
        ));
        return;
    }
    for (i, f) in rows.iter().enumerate() {
        let row = format!(
            "| {} | {} |\n",
            cell_code(f.path()),
            markdown_cell(f.training.as_deref().unwrap_or_default())
        );
        if !w.push(&row) {
            w.note(&format!(
                "\n_{} not listed: {LIMIT_NOTE}; see the JSON report._\n",
                plural(rows.len() - i, "more checkpoint", "more checkpoints")
            ));
            return;
        }
    }
}

fn file_row(f: &CiFile) -> String {
    let file = match (&f.change.old_path, &f.change.new_path) {
        (Some(a), Some(b)) if a != b => format!("{} → {}", cell_code(a), cell_code(b)),
        _ => cell_code(f.path()),
    };
    let hash = |s: Option<&SideCell>| match s {
        None => "—".to_owned(),
        Some(s) => match s.state {
            SideState::Absent => format!("{} (not fetched)", cell_code(&s.short_hash)),
            SideState::Link => "? (a symbolic link)".to_owned(),
            SideState::Unreadable => "? (not a readable model)".to_owned(),
            // Cut short: an interrupted download or copy.
            SideState::Truncated => format!("{} (incomplete)", cell_code(&s.short_hash)),
            // The header came from the LFS server: not verified against the oid.
            SideState::FromServer => format!("{} (LFS server)", cell_code(&s.short_hash)),
            SideState::Model => cell_code(&s.short_hash),
        },
    };
    let size = |s: Option<&SideCell>| s.map_or("—".to_owned(), |s| human_bytes(s.size));
    let (tensors, metadata) = match f.counts {
        Counts::Known(c) => (
            format!(
                "+{} −{} ~{}",
                c.tensors_added, c.tensors_removed, c.tensors_changed
            ),
            format!(
                "+{} −{} ~{}",
                c.metadata_added, c.metadata_removed, c.metadata_changed
            ),
        ),
        Counts::Unknown => ("?".to_owned(), "?".to_owned()),
    };
    // The bytes have a column of their own: a weight-only change (equal structures, other
    // bytes) shows there, not as "+0 −0 ~0" alone.
    format!(
        "| {} | {file} | {} | {} → {} | {tensors} | {metadata} | {} | {} → {} |\n",
        f.change.status.name(),
        markdown_cell(&f.format),
        hash(f.old.as_ref()),
        hash(f.new.as_ref()),
        f.bytes,
        size(f.old.as_ref()),
        size(f.new.as_ref()),
    )
}

fn violations_table(w: &mut Budgeted, report: &CiReport) {
    let Some(policy) = &report.policy else { return };
    // What the change brought first, then what the base already had.
    let brought: Vec<_> = report
        .judged()
        .filter(|(_, s)| s.baseline.brought())
        .collect();
    let kept: Vec<_> = report
        .judged()
        .filter(|(_, s)| !s.baseline.brought())
        .collect();
    let base = report.base.short();
    let sections = [
        ("\n### Policy violations\n\n".to_owned(), brought),
        (
            format!(
                "\n### Policy violations already at the base\n\nThe base ({base}) has these \
                 too; they {} the job.\n\n",
                if report.fail_on == super::report::FailOn::ViolationAny {
                    "fail (`--fail-on violation-any`)"
                } else {
                    "do not fail"
                }
            ),
            kept,
        ),
    ];
    for (title, rows) in sections {
        if rows.is_empty() {
            continue;
        }
        let head = format!(
            "{title}| File | Rule | Expected | Found | Policy |\n| --- | --- | --- | --- | --- |\n"
        );
        if !w.push(&head) {
            w.note(&format!(
                "\n_{} not listed: {LIMIT_NOTE}; see the annotations and the JSON report._\n",
                plural(rows.len(), "violation", "violations")
            ));
            return;
        }
        for (i, (v, standing)) in rows.iter().enumerate() {
            let mut found = markdown_cell(&v.found);
            if let Some(why) = &v.explanation {
                found.push_str(&format!(" — {}", markdown_cell(why)));
            }
            if let Some(was) = &standing.base_found {
                found.push_str(&format!(" (worse: the base found {})", markdown_cell(was)));
            }
            let row = format!(
                "| {} | {} | {} | {} | {} |\n",
                cell_code(&v.path),
                cell_code(v.rule),
                markdown_cell(&v.expected),
                found,
                cell_code(&format!("{policy}:{}", v.policy_line))
            );
            if !w.push(&row) {
                w.note(&format!(
                    "\n_{} not listed: {LIMIT_NOTE}; see the JSON report._\n",
                    plural(rows.len() - i, "more violation", "more violations")
                ));
                return;
            }
        }
    }
    if !report.unchecked.is_empty() {
        let head = "\n### Files the policy could not check\n\n| File | Reason |\n| --- | --- |\n";
        if !w.push(head) {
            return;
        }
        for e in &report.unchecked {
            let row = format!(
                "| {} | {} |\n",
                cell_code(&e.path),
                markdown_cell(&e.shown_reason())
            );
            if !w.push(&row) {
                w.note(&format!("\n_More files not listed: {LIMIT_NOTE}._\n"));
                return;
            }
        }
    }
}

fn details(w: &mut Budgeted, report: &CiReport) {
    if report.files.is_empty() || !w.push("\n### Structural diffs\n") {
        return;
    }
    for (i, f) in report.files.iter().enumerate() {
        let section = Section::of(f);
        if w.push(&section.whole()) {
            continue;
        }
        // Show the head of this diff if a useful part of it fits, then stop.
        let mut left = report.files.len() - i;
        if let Some(partial) = section.partial(w.room()) {
            w.push(&partial);
            left -= 1;
        }
        if left > 0 {
            w.note(&format!(
                "\n_The structural diffs of {} are left out: {LIMIT_NOTE}. The JSON report \
                 (step output `report`) has every diff; `weight-inspect diff BASE:path \
                 HEAD:path` prints one._\n",
                plural(left, "more file", "more files")
            ));
        }
        return;
    }
}

/// A file's section of the summary: its diff, and for a grouped diff every change folded
/// under it.
struct Section<'a> {
    /// `<details>` and its `<summary>` line.
    head: String,
    body: &'a str,
    fence: String,
    /// Every change, when `body` groups them.
    every: Option<&'a str>,
}

const TRUNCATED: &str = "_Truncated: GitHub accepts at most 1 MiB per step summary. The JSON \
                         report has the whole diff._";

impl<'a> Section<'a> {
    fn of(f: &'a CiFile) -> Section<'a> {
        // A grouped diff is open: it is short, and every change is folded under it.
        let open = if f.details_all.is_some() { " open" } else { "" };
        let head = format!(
            "\n<details{open}>\n<summary><code>{}</code>: {}, {}</summary>\n\n",
            html(&shown(f.path())),
            f.change.status.name(),
            f.counts_text()
        );
        // Kept for every file the summary can reach (see `CiFile::details`).
        let body = f.details.as_deref().unwrap_or_default();
        Section {
            head,
            body,
            fence: fence_for(body),
            every: f.details_all.as_deref(),
        }
    }

    /// The diff in its fence, after the head.
    fn diff(&self) -> String {
        format!(
            "{}{}text\n{}{}\n",
            self.head, self.fence, self.body, self.fence
        )
    }

    fn whole(&self) -> String {
        let every = self.every.map(every_change).unwrap_or_default();
        format!("{}{every}\n</details>\n", self.diff())
    }

    /// What fits of the section in `room` bytes: a grouped diff with the head of every
    /// change (or without it), else the head of the diff; None when too little fits.
    fn partial(&self, room: usize) -> Option<String> {
        let Some(every) = self.every else {
            let tail = format!("{}\n\n{TRUNCATED}\n\n</details>\n", self.fence);
            let overhead = self.head.len() + self.fence.len() + "text\n".len() + tail.len();
            let shown = cut_at_line(
                self.body,
                room.checked_sub(overhead + MIN_PARTIAL)? + MIN_PARTIAL,
            );
            return Some(format!("{}{}text\n{shown}{tail}", self.head, self.fence));
        };
        let diff = self.diff();
        let fence = fence_for(every);
        let nested = format!("\n<details>\n<summary>{EVERY_CHANGE}</summary>\n\n{fence}text\n");
        let tail = format!("{fence}\n\n{TRUNCATED}\n\n</details>\n\n</details>\n");
        let overhead = diff.len() + nested.len() + tail.len();
        if let Some(left) = room.checked_sub(overhead + MIN_PARTIAL) {
            let shown = cut_at_line(every, left + MIN_PARTIAL);
            return Some(format!("{diff}{nested}{shown}{tail}"));
        }
        let without = format!(
            "{diff}\n_Every change: left out, {LIMIT_NOTE}. The JSON report has them._\n\n</details>\n"
        );
        (without.len() <= room).then_some(without)
    }
}

/// The summary line of the collapsed list of every change under a grouped diff.
const EVERY_CHANGE: &str = "Every change, ungrouped";

/// The collapsed section under a grouped diff: every change on lines of its own.
fn every_change(all: &str) -> String {
    let fence = fence_for(all);
    format!(
        "\n<details>\n<summary>{EVERY_CHANGE}</summary>\n\n{fence}text\n{all}{fence}\n\n</details>\n"
    )
}

/// The longest prefix of `text` of at most `max` bytes that ends at a line end (or at a
/// character boundary when the first line alone is longer).
fn cut_at_line(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    match text[..end].rfind('\n') {
        Some(nl) => &text[..=nl],
        None => &text[..end],
    }
}

/// A code fence longer than any backtick run in `body` (model metadata may hold Markdown,
/// e.g. a chat template with ``` in it).
fn fence_for(body: &str) -> String {
    let longest = body.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    "`".repeat(longest.max(2) + 1)
}

/// An inline code span holding `s` literally, safe inside a table cell.
fn cell_code(s: &str) -> String {
    code(s).replace('|', "\\|")
}

/// An inline code span holding `s` as every name is shown (line breaks and other control
/// characters as `\n`, `\x1b`, ...: a code span cannot hold them): the delimiter is longer
/// than any backtick run inside.
fn code(s: &str) -> String {
    let s = shown(s);
    let longest = s.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let ticks = "`".repeat(longest + 1);
    let pad = if s.starts_with('`') || s.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{ticks}{pad}{s}{pad}{ticks}")
}

/// Text inside HTML (the `<summary>` of a section), of names already shown escaped (so
/// without line breaks): the one HTML escaping rule of the crate.
fn html(s: &str) -> std::borrow::Cow<'_, str> {
    crate::escape::html_text(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_spans_hold_backticks_and_pipes() {
        assert_eq!(code("a.gguf"), "`a.gguf`");
        assert_eq!(code("a`b"), "``a`b``");
        assert_eq!(code("`x"), "`` `x ``");
        assert_eq!(cell_code("a|b"), "`a\\|b`");
        assert_eq!(code("a\nb"), "`a\\nb`");
    }

    #[test]
    fn fences_outgrow_the_content() {
        assert_eq!(fence_for("plain"), "```");
        assert_eq!(fence_for("a ```` b"), "`````");
    }

    fn report(files: usize) -> CiReport {
        use crate::git::{FileChange, Status};
        let rev = |r: &str| super::super::report::Rev {
            rev: r.into(),
            commit: "0123456789abcdef0123456789abcdef01234567".into(),
        };
        let id = gix::ObjectId::from_bytes_or_panic(&[7; 20]);
        CiReport {
            base: rev("main"),
            head: rev("HEAD"),
            fail_on: super::super::report::FailOn::Violation,
            policy: None,
            policy_changed: false,
            files: (0..files)
                .map(|i| {
                    let file = crate::git::ComparedFile::new(
                        FileChange {
                            status: Status::Added,
                            old_path: None,
                            new_path: Some(format!("models/{i:04}|x`.gguf")),
                            old_id: None,
                            new_id: Some(id),
                            new_worktree: None,
                            old_link: false,
                            new_link: false,
                        },
                        None,
                        Some(crate::git::ModelSide::Read {
                            content: crate::read::Content::Other {
                                first_bytes: "00".into(),
                            },
                            size: 10,
                            sha256: Some("ab".repeat(32)),
                            lfs: None,
                            from_server: false,
                        }),
                        None,
                    );
                    CiFile::of(&file, true)
                })
                .collect(),
            json_files: None,
            html_sections: None,
            checked: 0,
            violations: Vec::new(),
            standings: Vec::new(),
            unchecked: Vec::new(),
            signatures: std::collections::BTreeMap::new(),
        }
    }

    #[test]
    fn never_exceeds_the_budget() {
        let r = report(200);
        let whole = render(&r, SUMMARY_LIMIT);
        assert_eq!(whole.matches("<details>").count(), 200);
        assert!(
            whole.contains("| added | ``models/0007\\|x`.gguf`` | ? |"),
            "{whole}"
        );
        for budget in [0, 10, 100, 300, 2500, 4000, 10_000, 40_000, 60_000] {
            let text = render(&r, budget);
            assert!(text.len() <= budget, "{budget}: {} bytes", text.len());
            assert_eq!(
                text.matches("<details>").count(),
                text.matches("</details>").count(),
                "{budget}"
            );
        }
        let cut = render(&r, 10_000);
        assert!(
            cut.contains(" more files not listed: GitHub accepts at most 1 MiB"),
            "{cut}"
        );
        let cut = render(&r, 60_000);
        assert!(cut.contains("_The structural diffs of "), "{cut}");
        assert!(render(&r, 300).starts_with("weight-inspect: 200 model files changed"));
    }

    #[test]
    fn cuts_at_line_ends_and_char_boundaries() {
        assert_eq!(cut_at_line("ab\ncd\nef\n", 7), "ab\ncd\n");
        assert_eq!(cut_at_line("ab\n", 10), "ab\n");
        assert_eq!(cut_at_line("éé", 3), "é");
    }
}
