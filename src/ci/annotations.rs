//! GitHub workflow-command annotations (`::error file=…,title=…::message`).
//!
//! GitHub shows at most 10 error and 10 warning annotations per step and drops the rest
//! silently, so beyond that the last shown annotation of each level groups the remaining ones
//! and says how many there are. The commands themselves are built and escaped by
//! [`crate::render::github`].

use super::record::{SideCell, SideState};
use super::report::{CiReport, FailOn};
use crate::escape::shown;
use crate::git::counts_text;
use crate::policy::violation_annotation;
use crate::render::github::{Annotation, Level};

/// A side's short hash, `-` for no side.
fn short_hash(side: Option<&SideCell>) -> &str {
    side.map_or("-", |s| s.short_hash.as_str())
}

/// Annotations GitHub shows per level and step.
const MAX_PER_LEVEL: usize = 10;

/// Lines of a grouped annotation's message before it, too, is cut short.
const MAX_GROUPED_LINES: usize = 50;

/// "errors", "warnings": what a grouped annotation counts.
fn plural(level: Level) -> &'static str {
    match level {
        Level::Error => "errors",
        Level::Warning => "warnings",
    }
}

/// An annotation as one line of a grouped message (its file shown escaped, as
/// [`Annotation::command`] shows it).
fn grouped_line(a: &Annotation) -> String {
    let message = a.message.replace(['\r', '\n'], " ");
    match &a.file {
        Some(file) => format!("{}: {}: {message}", shown(file), a.title),
        None => format!("{}: {message}", a.title),
    }
}

/// The training-checkpoint label of the changed file at `path`, if it is one.
fn training_of<'r>(report: &'r CiReport, path: &str) -> Option<&'r str> {
    report
        .files
        .iter()
        .find(|f| f.path() == path || f.anchor == path)?
        .training
        .as_deref()
}

/// Every annotation the report calls for, errors first.
fn collect(report: &CiReport) -> Vec<Annotation> {
    // With --fail-on never nothing fails the job, so nothing is shown as an error.
    let policy_level = if report.fail_on == FailOn::Never {
        Level::Warning
    } else {
        Level::Error
    };
    let policy = report.policy.as_deref().unwrap_or_default();
    let mut all = Vec::new();
    for (v, standing) in report.judged() {
        // A violation the base already had does not fail the job (unless --fail-on
        // violation-any): a warning that says so.
        let pre_existing = !standing.baseline.brought() && report.fail_on != FailOn::ViolationAny;
        let level = if pre_existing {
            Level::Warning
        } else {
            policy_level
        };
        let mut annotation = violation_annotation(v, policy, level);
        annotation
            .message
            .push_str(&super::report::standing_note(standing, &report.base));
        if let Some(training) = training_of(report, &v.path) {
            annotation
                .message
                .push_str(&format!(" (training checkpoint: {training})"));
        }
        all.push(annotation);
    }
    for e in &report.unchecked {
        all.push(Annotation {
            level: policy_level,
            file: Some(e.path.clone()),
            title: "weight-inspect: cannot check".into(),
            message: e.shown_reason().into_owned(),
        });
    }
    if report.fail_on == FailOn::Change {
        for f in &report.files {
            all.push(Annotation {
                level: Level::Error,
                file: Some(f.anchor.clone()),
                title: format!("weight-inspect: model {}", f.change.status.name()),
                message: format!(
                    "{}: {} -> {} ({}){}; --fail-on change fails on any changed model file",
                    f.format,
                    short_hash(f.old.as_ref()),
                    short_hash(f.new.as_ref()),
                    counts_text(f.counts),
                    f.training
                        .as_deref()
                        .map(|t| format!("; training checkpoint: {t}"))
                        .unwrap_or_default()
                ),
            });
        }
    }
    for f in &report.files {
        let absent: Vec<&str> = [("old", &f.old), ("new", &f.new)]
            .into_iter()
            .filter(|(_, s)| s.as_ref().is_some_and(|s| s.state == SideState::Absent))
            .map(|(label, _)| label)
            .collect();
        if !absent.is_empty() {
            all.push(Annotation {
                level: Level::Warning,
                file: Some(f.anchor.clone()),
                title: "weight-inspect: structure not compared".into(),
                message: format!(
                    "the LFS object of the {} is not present locally; the summary shows \
                     the LFS oid and size only (check out with `lfs: true`, and `git lfs \
                     fetch` the base commit's objects, to compare structures)",
                    if absent.len() == 2 {
                        "old and new sides"
                    } else if absent[0] == "old" {
                        "old side"
                    } else {
                        "new side"
                    }
                ),
            });
        }
    }
    if report.policy_changed {
        all.push(Annotation {
            level: Level::Warning,
            file: Some(policy.to_owned()),
            title: "weight-inspect: policy changed".into(),
            message: "this change modifies the policy file itself; its new version was applied"
                .into(),
        });
    }
    all.sort_by_key(|a| a.level != Level::Error);
    all
}

/// The workflow commands, at most `MAX_PER_LEVEL` (10) per level.
pub(crate) fn render(report: &CiReport) -> String {
    let all = collect(report);
    let mut out = String::new();
    for level in [Level::Error, Level::Warning] {
        let of_level: Vec<&Annotation> = all.iter().filter(|a| a.level == level).collect();
        for a in limit(&of_level, level) {
            out.push_str(&a.command());
        }
    }
    out
}

/// The annotations of one level as GitHub will show them: all of them up to the limit, else
/// the first ones and one that groups the rest.
fn limit(of_level: &[&Annotation], level: Level) -> Vec<Annotation> {
    if of_level.len() <= MAX_PER_LEVEL {
        return of_level.iter().map(|a| (*a).clone()).collect();
    }
    let (shown, rest) = of_level.split_at(MAX_PER_LEVEL - 1);
    let mut out: Vec<Annotation> = shown.iter().map(|a| (*a).clone()).collect();
    let mut lines: Vec<String> = rest
        .iter()
        .take(MAX_GROUPED_LINES)
        .map(|a| grouped_line(a))
        .collect();
    if rest.len() > MAX_GROUPED_LINES {
        lines.push(format!(
            "… and {} more (see the job summary)",
            rest.len() - MAX_GROUPED_LINES
        ));
    }
    out.push(Annotation {
        level,
        file: None,
        title: format!("weight-inspect: {} more {}", rest.len(), plural(level)),
        message: format!(
            "GitHub shows {MAX_PER_LEVEL} {} per step; the other {}:\n{}",
            plural(level),
            rest.len(),
            lines.join("\n")
        ),
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ann(i: usize) -> Annotation {
        Annotation {
            level: Level::Error,
            file: Some(format!("m/{i}.gguf")),
            title: "weight-inspect: allowed_dtypes".into(),
            message: format!("found q4_k {i}"),
        }
    }

    #[test]
    fn more_than_ten_are_grouped() {
        let all: Vec<Annotation> = (0..13).map(ann).collect();
        let refs: Vec<&Annotation> = all.iter().collect();
        let shown = limit(&refs, Level::Error);
        assert_eq!(shown.len(), 10);
        assert_eq!(shown[8], all[8]);
        assert_eq!(shown[9].title, "weight-inspect: 4 more errors");
        assert!(shown[9].message.ends_with(
            "\nm/9.gguf: weight-inspect: allowed_dtypes: found q4_k 9\nm/10.gguf: weight-inspect: allowed_dtypes: found q4_k 10\nm/11.gguf: weight-inspect: allowed_dtypes: found q4_k 11\nm/12.gguf: weight-inspect: allowed_dtypes: found q4_k 12"
        ));
        let ten: Vec<&Annotation> = refs[..10].to_vec();
        assert_eq!(limit(&ten, Level::Error).len(), 10);
    }
}
