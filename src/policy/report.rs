//! Output of `check`: text (one line per violation), JSON (schema 1) and GitHub Actions
//! workflow commands; and what `check` and `ci` share: the files that could not be judged and
//! the sentence that counts what the policy found.

use std::borrow::Cow;
use std::fmt::Write;

use serde::Serialize;
use serde::ser::SerializeStruct;

use super::check::Violation;
use super::error::PolicyError;
use crate::escape::{shown, shown_message};
use crate::render::github::{Annotation, Level};

/// A file that could not be judged (e.g. its LFS object is not in the local store).
/// Serialized as `{"path", "message"}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileError {
    /// Repository-relative path, `/`-separated.
    pub path: String,
    /// Why, without the path: for tables and annotations that show the path already.
    pub reason: String,
    /// Whether the message is `path: reason`. An error that names its own subject (a file by
    /// its absolute path, a git object) is its own message and reason.
    prefixed: bool,
}

impl FileError {
    pub(crate) fn new(path: &str, error: &PolicyError) -> Self {
        match error {
            PolicyError::File { path: own, reason } if own == path => FileError {
                path: path.to_owned(),
                reason: reason.to_string(),
                prefixed: true,
            },
            other => FileError {
                path: path.to_owned(),
                reason: other.to_string(),
                prefixed: false,
            },
        }
    }

    /// The whole message, as the error reads.
    pub(crate) fn message(&self) -> Cow<'_, str> {
        if self.prefixed {
            Cow::Owned(format!("{}: {}", self.path, self.reason))
        } else {
            Cow::Borrowed(&self.reason)
        }
    }

    /// The whole message as text prints it: the path shown escaped, the reason (whose names
    /// its error shows escaped) on the same line.
    pub(crate) fn shown_message(&self) -> String {
        if self.prefixed {
            format!("{}: {}", shown(&self.path), self.shown_reason())
        } else {
            self.shown_reason().into_owned()
        }
    }

    /// The reason as text prints it: its names are shown escaped by the error it comes from,
    /// and nothing else in it starts a line or acts on a terminal ([`shown_message`]).
    pub(crate) fn shown_reason(&self) -> Cow<'_, str> {
        shown_message(&self.reason)
    }
}

impl Serialize for FileError {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("FileError", 2)?;
        s.serialize_field("path", &self.path)?;
        s.serialize_field("message", &self.message())?;
        s.end()
    }
}

/// What a policy run found, in numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tally {
    /// Files judged.
    pub checked: usize,
    /// Of those, files with at least one violation.
    pub failing: usize,
    pub violations: usize,
    /// Files that could not be judged.
    pub unchecked: usize,
}

/// How [`Tally::sentence`] says it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Phrasing<'a> {
    /// `check`: "2 violations in 1 of 3 files checked against P".
    Check { policy: &'a str },
    /// The `ci` log line, worded as `check`'s.
    Ci { policy: &'a str },
    /// The job summary, which names the policy before: "**2 violations** in 1 of 3 files
    /// checked".
    Markdown,
}

impl Tally {
    /// The one sentence of `check` and `ci`: "N violations in M of K files checked against
    /// P" — or, with none, "K files checked against P, no violations" (never "0 violations in
    /// 0 of …") — then "; U files could not be checked" when some could not be.
    pub(crate) fn sentence(&self, phrasing: Phrasing<'_>) -> String {
        let (policy, bold) = match phrasing {
            Phrasing::Check { policy } | Phrasing::Ci { policy } => (Some(policy), false),
            Phrasing::Markdown => (None, true),
        };
        let strong = |s: String| if bold { format!("**{s}**") } else { s };
        let against = policy
            .map(|p| format!(" against {}", shown(p)))
            .unwrap_or_default();
        let files = plural(self.checked, "file", "files");
        let mut out = if self.violations == 0 {
            format!("{files} checked{against}, no violations")
        } else {
            format!(
                "{} in {} of {files} checked{against}",
                strong(plural(self.violations, "violation", "violations")),
                self.failing
            )
        };
        if self.unchecked > 0 {
            let _ = write!(
                out,
                "; {} could not be checked",
                strong(plural(self.unchecked, "file", "files"))
            );
        }
        out
    }
}

/// "1 file", "2 files".
pub(crate) fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Everything a `check` run found.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct CheckReport {
    pub schema: u32,
    /// The policy file, as given or found.
    pub policy: String,
    /// "staged" (index blobs) or "worktree".
    pub source: &'static str,
    /// Which files were judged: "change" (what the commit brings: `--staged`), "all" (every
    /// staged or tracked file) or "paths" (the PATHS given).
    pub selection: &'static str,
    /// Files covered by at least one rule and judged (with or without violations).
    pub checked: usize,
    /// Of those, files with at least one violation.
    pub failing: usize,
    pub violations: Vec<Violation>,
    pub errors: Vec<FileError>,
}

impl CheckReport {
    pub(crate) fn new(policy: String, staged: bool) -> Self {
        CheckReport {
            schema: crate::identity::SCHEMA_VERSION,
            policy,
            source: if staged { "staged" } else { "worktree" },
            selection: "all",
            checked: 0,
            failing: 0,
            violations: Vec::new(),
            errors: Vec::new(),
        }
    }

    /// Clean, violations found, or an error when some file could not be judged.
    pub(crate) fn exit(&self) -> crate::output::Exit {
        use crate::output::Exit;
        if !self.errors.is_empty() {
            Exit::Error
        } else {
            Exit::found_if(!self.violations.is_empty())
        }
    }

    pub(crate) fn tally(&self) -> Tally {
        Tally {
            checked: self.checked,
            failing: self.failing,
            violations: self.violations.len(),
            unchecked: self.errors.len(),
        }
    }

    pub(crate) fn summary(&self) -> String {
        self.tally().sentence(Phrasing::Check {
            policy: &self.policy,
        })
    }
}

/// `check`'s report in the form its `--format` chose (its text's errors go to stderr, apart).
impl crate::render::report::Report for CheckReport {
    fn text(&self, _: &crate::render::Palette) -> String {
        CheckReport::text(self).0
    }
    fn json(&self) -> String {
        CheckReport::json(self)
    }
    fn github(&self) -> Option<String> {
        Some(CheckReport::github(self))
    }
    fn sarif(&self) -> Option<String> {
        Some(CheckReport::sarif(self))
    }
}

impl CheckReport {
    /// One line per violation, then the summary. Errors go to stderr (returned separately).
    pub(crate) fn text(&self) -> (String, String) {
        let mut out = String::new();
        for v in &self.violations {
            out.push_str(&violation_line(v, &self.policy));
            out.push('\n');
        }
        out.push_str(&format!("weight-inspect: {}\n", self.summary()));
        let mut err = String::new();
        for e in &self.errors {
            err.push_str(&format!("weight-inspect: {}\n", e.shown_message()));
        }
        (out, err)
    }

    /// JSON (schema 1).
    pub(crate) fn json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).expect("report serializes");
        s.push('\n');
        s
    }

    /// GitHub Actions workflow commands: one `::error` annotation per violation and per file
    /// that could not be checked, then the summary as a plain log line.
    pub(crate) fn github(&self) -> String {
        let report = self;
        let mut out = String::new();
        for v in &report.violations {
            out.push_str(&violation_annotation(v, &report.policy, Level::Error).command());
        }
        for e in &report.errors {
            let annotation = Annotation {
                level: Level::Error,
                file: Some(e.path.clone()),
                title: "weight-inspect: cannot check".into(),
                message: e.shown_message(),
            };
            out.push_str(&annotation.command());
        }
        out.push_str(&format!("weight-inspect: {}\n", report.summary()));
        out
    }
}

/// `path: rule: expected ...; found ... [policy:line]`, the path shown escaped.
pub(crate) fn violation_line(v: &Violation, policy: &str) -> String {
    let mut line = format!(
        "{}: {}: expected {}; found {} [{}:{}]",
        shown(&v.path),
        v.rule,
        v.expected,
        v.found,
        shown(policy),
        v.policy_line
    );
    // Its own indented line: what differs from the pinned file, or how to see it.
    if let Some(why) = &v.explanation {
        line.push_str("\n  ");
        line.push_str(why);
    }
    if let Some(hint) = pin_hint(v) {
        line.push_str("\n  ");
        line.push_str(&hint);
    }
    line
}

/// For a pinned hash that no longer holds: how to pin the new structure when the change is
/// meant (`policy pin` rewrites the `expected_hash`, keeping the file's comments).
fn pin_hint(v: &Violation) -> Option<String> {
    (v.rule == "expected_hash").then(|| {
        format!(
            "if the change is intended, pin the new structure: `weight-inspect policy pin {}` \
             (`--staged` for the staged version)",
            shown(&v.path)
        )
    })
}

/// The annotation of one violation, on its file (`check --format github`, `ci --annotations`).
pub(crate) fn violation_annotation(v: &Violation, policy: &str, level: Level) -> Annotation {
    Annotation {
        level,
        file: Some(v.path.clone()),
        title: format!("weight-inspect: {}", v.rule),
        message: format!(
            "expected {}; found {} ({}:{}){}",
            v.expected,
            v.found,
            shown(policy),
            v.policy_line,
            v.explanation
                .as_deref()
                .into_iter()
                .map(str::to_owned)
                .chain(pin_hint(v))
                .map(|line| format!("\n{line}"))
                .collect::<String>()
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
            detail: Default::default(),
            explanation: None,
        });
        let out = r.github();
        assert!(out.starts_with(
            "::error file=m/a%2Cb%3Ac.gguf,title=weight-inspect%3A allowed_dtypes::expected only f16; found q4_k in 1 tensor (x)%0Asecond line (.weight-inspect.toml:2)\n"
        ), "{out}");
        assert_eq!(r.exit(), crate::output::Exit::Found);
    }

    #[test]
    fn json_starts_with_schema() {
        let r = CheckReport::new("p".into(), false);
        assert!(r.json().starts_with("{\n  \"schema\": 1,"));
        assert_eq!(r.exit(), crate::output::Exit::Clean);
    }
}
