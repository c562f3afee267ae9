//! Output of `check`: text (one line per violation), JSON (schema 1) and GitHub Actions
//! workflow commands.

use serde::Serialize;

use super::check::Violation;

/// Output formats of `check`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    Text,
    Json,
    Github,
}

/// A file that could not be judged (e.g. its LFS object is not in the local store).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileError {
    pub path: String,
    pub message: String,
}

/// Everything a `check` run found.
#[derive(Debug, Clone, Serialize)]
pub struct CheckReport {
    pub schema: u32,
    /// The policy file, as given or found.
    pub policy: String,
    /// "staged" (index blobs) or "worktree".
    pub source: &'static str,
    /// Files covered by at least one rule and judged (with or without violations).
    pub checked: usize,
    /// Of those, files with at least one violation.
    pub failing: usize,
    pub violations: Vec<Violation>,
    pub errors: Vec<FileError>,
}

impl CheckReport {
    pub fn new(policy: String, staged: bool) -> Self {
        CheckReport {
            schema: crate::SCHEMA_VERSION,
            policy,
            source: if staged { "staged" } else { "worktree" },
            checked: 0,
            failing: 0,
            violations: Vec::new(),
            errors: Vec::new(),
        }
    }

    /// Clean, violations found, or an error when some file could not be judged.
    pub fn exit(&self) -> crate::output::Exit {
        use crate::output::Exit;
        if !self.errors.is_empty() {
            Exit::Error
        } else {
            Exit::found_if(!self.violations.is_empty())
        }
    }

    pub fn summary(&self) -> String {
        let files = |n: usize| if n == 1 { "file" } else { "files" };
        let mut out = if self.violations.is_empty() {
            format!(
                "{} {} checked against {}, no violations",
                self.checked,
                files(self.checked),
                self.policy
            )
        } else {
            format!(
                "{} {} in {} of {} {} checked against {}",
                self.violations.len(),
                if self.violations.len() == 1 {
                    "violation"
                } else {
                    "violations"
                },
                self.failing,
                self.checked,
                files(self.checked),
                self.policy
            )
        };
        if !self.errors.is_empty() {
            out.push_str(&format!(
                "; {} {} could not be checked",
                self.errors.len(),
                files(self.errors.len())
            ));
        }
        out
    }
}

/// One line per violation, then the summary. Errors go to stderr (returned separately).
pub fn text(report: &CheckReport) -> (String, String) {
    let mut out = String::new();
    for v in &report.violations {
        out.push_str(&violation_line(v, &report.policy));
        out.push('\n');
    }
    out.push_str(&format!("weight-inspect: {}\n", report.summary()));
    let mut err = String::new();
    for e in &report.errors {
        err.push_str(&format!("weight-inspect: {}\n", e.message));
    }
    (out, err)
}

/// `path: rule: expected ...; found ... [policy:line]`
pub fn violation_line(v: &Violation, policy: &str) -> String {
    format!(
        "{}: {}: expected {}; found {} [{}:{}]",
        v.path, v.rule, v.expected, v.found, policy, v.policy_line
    )
}

/// JSON (schema 1).
pub fn json(report: &CheckReport) -> String {
    let mut s = serde_json::to_string_pretty(report).expect("report serializes");
    s.push('\n');
    s
}

/// GitHub Actions workflow commands: one `::error` annotation per violation and per file
/// that could not be checked, then the summary as a plain log line.
pub fn github(report: &CheckReport) -> String {
    let mut out = String::new();
    for v in &report.violations {
        out.push_str(&format!(
            "::error file={},title={}::{}\n",
            escape_property(&v.path),
            escape_property(&format!("weight-inspect: {}", v.rule)),
            escape_data(&format!(
                "expected {}; found {} ({}:{})",
                v.expected, v.found, report.policy, v.policy_line
            ))
        ));
    }
    for e in &report.errors {
        out.push_str(&format!(
            "::error file={},title={}::{}\n",
            escape_property(&e.path),
            escape_property("weight-inspect: cannot check"),
            escape_data(&e.message)
        ));
    }
    out.push_str(&format!("weight-inspect: {}\n", report.summary()));
    out
}

/// Escapes a workflow command's message (the part after `::`), as the Actions toolkit's
/// `escapeData` does: `%`, CR and LF.
pub fn escape_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// Escapes a workflow command property value (`file=`, `title=`), as the toolkit's
/// `escapeProperty` does: [`escape_data`] plus `:` and `,`.
pub fn escape_property(s: &str) -> String {
    escape_data(s).replace(':', "%3A").replace(',', "%2C")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_follows_the_actions_toolkit() {
        assert_eq!(escape_data("a%b\r\nc:d,e"), "a%25b%0D%0Ac:d,e");
        assert_eq!(escape_property("a%b\r\nc:d,e"), "a%25b%0D%0Ac%3Ad%2Ce");
        // `%` first, so escapes are not escaped twice.
        assert_eq!(escape_data("%0A"), "%250A");
    }

    #[test]
    fn github_annotations() {
        let mut r = CheckReport::new(".weight-inspect.toml".into(), true);
        r.checked = 1;
        r.failing = 1;
        r.violations.push(Violation {
            path: "m/a,b:c.gguf".into(),
            rule: "allowed_dtypes",
            expected: "only f16".into(),
            found: "q4_k in 1 tensor (x)\nsecond line".into(),
            policy_rule: 1,
            policy_line: 2,
        });
        let out = github(&r);
        assert!(out.starts_with(
            "::error file=m/a%2Cb%3Ac.gguf,title=weight-inspect%3A allowed_dtypes::expected only f16; found q4_k in 1 tensor (x)%0Asecond line (.weight-inspect.toml:2)\n"
        ), "{out}");
        assert_eq!(r.exit(), crate::output::Exit::Found);
    }

    #[test]
    fn json_starts_with_schema() {
        let r = CheckReport::new("p".into(), false);
        assert!(json(&r).starts_with("{\n  \"schema\": 1,"));
        assert_eq!(r.exit(), crate::output::Exit::Clean);
    }
}
