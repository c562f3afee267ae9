//! The machine-readable results: the JSON report (schema 1), the SARIF log and the step
//! outputs appended to `$GITHUB_OUTPUT`.

use std::path::{Path, PathBuf};

use std::io::Write;

use serde::Serialize;

use super::error::CiError;
use super::report::{CiReport, FailOn, Rev};
use crate::error::Error;
use crate::policy::{FileError, Violation};

type Result<T, E = CiError> = std::result::Result<T, E>;

/// The report's fields before its files (the files are spooled as they are compared).
#[derive(Serialize)]
struct JsonHead<'a> {
    schema: u32,
    base: &'a Rev,
    head: &'a Rev,
    fail_on: FailOn,
    failed: bool,
    /// None when there is no policy file.
    policy: Option<&'a str>,
    policy_changed: bool,
    changed_files: usize,
    violation_count: usize,
    /// Violations the change brought (new, or worse than at the base).
    new_violation_count: usize,
    /// Violations the base already had, unchanged.
    pre_existing_violation_count: usize,
    /// Files the policy judged.
    checked: usize,
}

/// The report's fields after its files.
#[derive(Serialize)]
struct JsonTail<'a> {
    violations: Vec<JudgedViolation<'a>>,
    unchecked: &'a [FileError],
    /// The model signatures that cover the judged files (their violations are among
    /// `violations`, rule `signature`).
    signatures: Vec<SignatureJson<'a>>,
}

/// A signature: its path, who signed it or why it does not verify, the judged files it covers.
#[derive(Serialize)]
struct SignatureJson<'a> {
    path: &'a str,
    signer: Option<&'a str>,
    refusal: Option<&'a str>,
    files: Vec<&'a str>,
}

/// A violation with its standing against the base: `"baseline": "new" | "worse" |
/// "unchanged"`, and for a worse one `"base_found"`.
#[derive(Serialize)]
struct JudgedViolation<'a> {
    #[serde(flatten)]
    violation: &'a Violation,
    #[serde(flatten)]
    standing: &'a crate::policy::Standing,
}

/// The report as JSON (schema 1), pretty-printed: the same bytes as the whole document
/// pretty-printed at once, its files copied from the spool.
pub(super) fn json(report: &CiReport, out: &mut dyn Write) -> Result<()> {
    let head = JsonHead {
        schema: crate::identity::SCHEMA_VERSION,
        base: &report.base,
        head: &report.head,
        fail_on: report.fail_on,
        failed: report.failed(),
        policy: report.policy.as_deref(),
        policy_changed: report.policy_changed,
        changed_files: report.files.len(),
        violation_count: report.violations.len(),
        new_violation_count: report.brought(),
        pre_existing_violation_count: report.pre_existing(),
        checked: report.checked,
    };
    let tail = JsonTail {
        violations: report
            .judged()
            .map(|(violation, standing)| JudgedViolation {
                violation,
                standing,
            })
            .collect(),
        unchecked: &report.unchecked,
        signatures: report
            .signatures
            .iter()
            .map(|(path, state)| SignatureJson {
                path,
                signer: state.signer.as_deref().ok(),
                refusal: state.signer.as_ref().err().map(String::as_str),
                files: state.files.iter().map(String::as_str).collect(),
            })
            .collect(),
    };
    let head = serde_json::to_string_pretty(&head).map_err(CiError::Serialize)?;
    let tail = serde_json::to_string_pretty(&tail).map_err(CiError::Serialize)?;
    let spool = report.json_files.as_ref().ok_or_else(|| {
        Error::io(
            "<JSON report>",
            std::io::Error::other("the run was collected without its JSON report"),
        )
    })?;
    let io = |e| CiError::from(Error::io("<JSON report>", e));
    out.write_all(head.trim_end_matches("\n}").as_bytes())
        .map_err(io)?;
    out.write_all(b",\n  \"files\": [").map_err(io)?;
    if !spool.is_empty() {
        spool.copy_to(out).map_err(io)?;
        out.write_all(b"\n  ").map_err(io)?;
    }
    out.write_all(b"],").map_err(io)?;
    out.write_all(tail.trim_start_matches('{').as_bytes())
        .map_err(io)?;
    out.write_all(b"\n").map_err(io)?;
    Ok(())
}

/// Writes the JSON report to `path` (atomically; missing directories are created).
pub(crate) fn write_json(path: &Path, report: &CiReport) -> Result<()> {
    write_report_with(path, |out| json(report, out))
}

/// Writes the HTML report to `path` (atomically; missing directories are created).
pub(crate) fn write_html(path: &Path, report: &CiReport) -> Result<()> {
    write_report_with(path, |out| super::html::render(report, out))
}

/// The policy's findings on the head side as SARIF 2.1.0, for code scanning. With
/// `--fail-on never` violations are warnings, as in the annotations.
pub(crate) fn write_sarif(path: &Path, report: &CiReport) -> Result<()> {
    use crate::policy::{SarifInput, SarifLevel, render_sarif};
    let level = if report.fail_on == FailOn::Never {
        SarifLevel::Warning
    } else {
        SarifLevel::Error
    };
    let text = render_sarif(&SarifInput {
        violations: &report.violations,
        baseline: Some(&report.standings),
        fail_on_any: report.fail_on == FailOn::ViolationAny,
        errors: &report.unchecked,
        policy: report.policy.as_deref().unwrap_or_default(),
        level,
    });
    write_report(path, &text)
}

/// Writes a report file whole (its directory created), never half.
fn write_report(path: &Path, text: &str) -> Result<()> {
    write_report_with(path, |out| {
        out.write_all(text.as_bytes())
            .map_err(|e| Error::io(path, e).into())
    })
}

/// Writes a report file whole (its directory created), never half, through `fill`.
fn write_report_with(path: &Path, fill: impl FnOnce(&mut dyn Write) -> Result<()>) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    }
    crate::fsutil::write_atomically_with(path, true, |file| {
        let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
        fill(&mut out)?;
        out.flush().map_err(|e| Error::io(path, e))?;
        Ok(())
    })
}

/// The step outputs as `$GITHUB_OUTPUT` lines: `changed-files`, `violations`, `failed`,
/// with a JSON report `report` (its absolute path) and with an HTML report `html` (its path).
pub(super) fn output_lines(
    report: &CiReport,
    json_path: Option<&Path>,
    html_path: Option<&Path>,
) -> Result<String> {
    let mut out = String::new();
    push_output(&mut out, "changed-files", &report.files.len().to_string());
    push_output(&mut out, "violations", &report.violations.len().to_string());
    push_output(&mut out, "new-violations", &report.brought().to_string());
    push_output(
        &mut out,
        "pre-existing-violations",
        &report.pre_existing().to_string(),
    );
    push_output(
        &mut out,
        "failed",
        if report.failed() { "true" } else { "false" },
    );
    if let Some(path) = json_path {
        let abs = absolute(path)?;
        push_output(&mut out, "report", &abs.to_string_lossy());
    }
    if let Some(path) = html_path {
        let abs = absolute(path)?;
        push_output(&mut out, "html", &abs.to_string_lossy());
    }
    Ok(out)
}

/// Appends the step outputs to `path` (the file GitHub gives each step; appending is its
/// protocol, so other outputs of the step are kept).
pub(crate) fn append_outputs(
    path: &Path,
    report: &CiReport,
    json_path: Option<&Path>,
    html_path: Option<&Path>,
) -> Result<()> {
    crate::fsutil::append(path, &output_lines(report, json_path, html_path)?)?;
    Ok(())
}

/// `name=value`, or the multi-line form `name<<DELIMITER` when the value holds a line break.
fn push_output(out: &mut String, name: &str, value: &str) {
    if !value.contains(['\n', '\r']) {
        out.push_str(&format!("{name}={value}\n"));
        return;
    }
    let mut delimiter = String::from("WEIGHT_INSPECT_EOF");
    while value.contains(&delimiter) {
        delimiter.push('_');
    }
    out.push_str(&format!("{name}<<{delimiter}\n{value}\n{delimiter}\n"));
}

fn absolute(path: &Path) -> Result<PathBuf> {
    if path.is_absolute() {
        return Ok(path.to_owned());
    }
    let cwd = std::env::current_dir().map_err(|e| Error::io(".", e))?;
    Ok(cwd.join(path))
}

#[cfg(test)]
mod tests {
    #[test]
    fn multi_line_values_use_a_delimiter_not_in_the_value() {
        let mut out = String::new();
        super::push_output(&mut out, "a", "1");
        super::push_output(&mut out, "b", "x\nWEIGHT_INSPECT_EOF");
        assert_eq!(
            out,
            "a=1\nb<<WEIGHT_INSPECT_EOF_\nx\nWEIGHT_INSPECT_EOF\nWEIGHT_INSPECT_EOF_\n"
        );
    }
}
