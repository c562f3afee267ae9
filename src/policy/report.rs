//! Output of `check`: text (one line per violation), JSON (schema 1) and GitHub Actions
//! workflow commands.

use serde::Serialize;

use super::check::Violation;
use crate::render::github::{Annotation, Level};

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
        out.push_str(&violation_annotation(v, &report.policy, Level::Error).command());
    }
    for e in &report.errors {
        let annotation = Annotation {
            level: Level::Error,
            file: Some(e.path.clone()),
            title: "weight-inspect: cannot check".into(),
            message: e.message.clone(),
        };
        out.push_str(&annotation.command());
    }
    out.push_str(&format!("weight-inspect: {}\n", report.summary()));
    out
}

/// The annotation of one violation, on its file (`check --format github`, `ci --annotations`).
pub fn violation_annotation(v: &Violation, policy: &str, level: Level) -> Annotation {
    Annotation {
        level,
        file: Some(v.path.clone()),
        title: format!("weight-inspect: {}", v.rule),
        message: format!(
            "expected {}; found {} ({policy}:{})",
            v.expected, v.found, v.policy_line
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
