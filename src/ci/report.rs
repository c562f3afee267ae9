//! What one `ci` run found: the changed model files with both sides and their structural
//! diff, the policy's verdict on the head side, and whether that fails the job.

use std::fmt::Write;

use gix::ObjectId;

use crate::diff::{DiffCounts, StructuralDiff};
use crate::error::{Error, Result};
use crate::formats::FileKind;
use crate::git::objects::blob_id;
use crate::git::{FileChange, ModelSide, PathFilter, Status};
use crate::policy::check::{Origin, Subject};
use crate::policy::{FileError, Policy, Violation};

/// What makes the run fail (exit 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FailOn {
    /// A policy violation, or a file the policy could not judge.
    Violation,
    /// Any changed model file (and everything `violation` fails on).
    Change,
    /// Nothing: report only (violations become warnings).
    Never,
}

impl FailOn {
    pub fn name(self) -> &'static str {
        match self {
            FailOn::Violation => "violation",
            FailOn::Change => "change",
            FailOn::Never => "never",
        }
    }
}

/// A policy file read for this run.
pub struct LoadedPolicy {
    pub policy: Policy,
    /// The name to show (as given, or `.weight-inspect.toml`).
    pub shown: String,
    /// Its path in the repository, when it lies inside the work tree.
    pub repo_path: Option<String>,
}

pub struct Options<'a> {
    pub base: &'a str,
    pub head: &'a str,
    pub paths: &'a [String],
    pub fail_on: FailOn,
}

/// A revision as given and the commit it resolved to.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Rev {
    pub rev: String,
    pub commit: String,
}

impl Rev {
    pub fn short(&self) -> &str {
        &self.commit[..self.commit.len().min(12)]
    }
}

/// One changed model file.
pub struct FileEntry {
    pub change: FileChange,
    pub old: Option<ModelSide>,
    pub new: Option<ModelSide>,
    /// When both sides are parsed models.
    pub diff: Option<StructuralDiff>,
}

/// Tensor and metadata changes of a file, when known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counts {
    Known(DiffCounts),
    /// A side is not a readable model (LFS object not fetched, unreadable file).
    Unknown,
}

impl FileEntry {
    pub fn path(&self) -> &str {
        self.change.path()
    }

    /// The file's format(s): `gguf`, `gguf → safetensors`, or `?` when no side was read.
    pub fn format(&self) -> String {
        let name = |s: &Option<ModelSide>| artifact(s).map(|a| a.format.name());
        match (name(&self.old), name(&self.new)) {
            (Some(a), Some(b)) if a != b => format!("{a} → {b}"),
            (Some(a), _) | (None, Some(a)) => a.to_owned(),
            (None, None) => "?".to_owned(),
        }
    }

    pub fn counts(&self) -> Counts {
        if let Some(diff) = &self.diff {
            return Counts::Known(diff.counts());
        }
        match (&self.old, &self.new) {
            (None, Some(_)) => match artifact(&self.new) {
                Some(a) => Counts::Known(DiffCounts {
                    tensors_added: a.tensors.len(),
                    metadata_added: a.metadata.len(),
                    ..DiffCounts::default()
                }),
                None => Counts::Unknown,
            },
            (Some(_), None) => match artifact(&self.old) {
                Some(a) => Counts::Known(DiffCounts {
                    tensors_removed: a.tensors.len(),
                    metadata_removed: a.metadata.len(),
                    ..DiffCounts::default()
                }),
                None => Counts::Unknown,
            },
            _ => Counts::Unknown,
        }
    }

    /// Whether the structure could not be compared (a side is not a parsed model).
    pub fn structure_unknown(&self) -> bool {
        [&self.old, &self.new]
            .into_iter()
            .flatten()
            .any(|s| s.artifact().is_none())
    }

    /// The plain-text body of the file's section: the structural diff, a summary of an
    /// added or removed model, or why the structure is not shown.
    pub fn details(&self) -> String {
        let palette = crate::render::Palette::plain();
        let mut out = String::new();
        let blobs_differ = self.change.old_id != self.change.new_id;
        if let Some(diff) = &self.diff {
            out.push_str(&crate::render::text::diff_or_identical(
                diff,
                &palette,
                blobs_differ,
            ));
        } else {
            match (&self.old, &self.new) {
                (None, Some(new)) => match new.artifact() {
                    Some(a) => {
                        out.push_str("new file:\n");
                        out.push_str(&crate::render::text::inspect(a, &palette, false));
                    }
                    None => push_note(&mut out, "new", new, Side::New),
                },
                (Some(old), None) => match old.artifact() {
                    Some(a) => {
                        out.push_str("deleted file:\n");
                        out.push_str(&crate::render::text::id(a));
                    }
                    None => push_note(&mut out, "old", old, Side::Old),
                },
                (Some(old), Some(new)) => {
                    push_note(&mut out, "old", old, Side::Old);
                    push_note(&mut out, "new", new, Side::New);
                }
                (None, None) => {}
            }
        }
        // Without both structures, the LFS pointers still tell whether the content changed.
        if self.diff.is_none()
            && let (Some(a), Some(b)) = (pointer(&self.old), pointer(&self.new))
        {
            if a == b {
                let _ = writeln!(out, "LFS object unchanged: {a}");
            } else {
                let _ = writeln!(out, "LFS object: {a} -> {b}");
            }
        }
        out
    }
}

fn artifact(side: &Option<ModelSide>) -> Option<&crate::Artifact> {
    side.as_ref().and_then(ModelSide::artifact)
}

fn pointer(side: &Option<ModelSide>) -> Option<&crate::git::lfs::Pointer> {
    side.as_ref().and_then(ModelSide::pointer)
}

#[derive(Clone, Copy)]
enum Side {
    Old,
    New,
}

fn push_note(out: &mut String, label: &str, side: &ModelSide, which: Side) {
    match side.artifact() {
        Some(a) => {
            let _ = writeln!(
                out,
                "{label}: {} model, structural hash {}",
                a.format.name(),
                crate::identity::structural_hash(a)
            );
        }
        None => {
            let _ = writeln!(out, "{label}: {}", side_note(side, which));
        }
    }
}

/// Why a side has no structure, with what to do about it in a workflow.
fn side_note(side: &ModelSide, which: Side) -> String {
    match side {
        ModelSide::Absent { pointer } => {
            let hint = match which {
                Side::Old => "fetch the base commit's LFS objects (`git lfs fetch origin BASE`)",
                Side::New => "check out with `lfs: true` (or run `git lfs pull`)",
            };
            format!("LFS object {pointer} is not present locally; to compare structures, {hint}")
        }
        other => other.note().unwrap_or_default(),
    }
}

/// A file outside the structural report (not GGUF/safetensors by name) that the policy covers
/// and the head side adds or changes, e.g. a pickle checkpoint.
pub struct OtherFile {
    pub path: String,
    pub id: ObjectId,
}

/// Everything one run found.
pub struct CiReport {
    pub base: Rev,
    pub head: Rev,
    pub fail_on: FailOn,
    /// The policy's name, when there is one.
    pub policy: Option<String>,
    /// Whether the pull request changes the policy file itself.
    pub policy_changed: bool,
    pub files: Vec<FileEntry>,
    /// Files the policy judged (model files and other covered files).
    pub checked: usize,
    pub violations: Vec<Violation>,
    /// Files the policy could not judge (e.g. LFS object not present locally).
    pub unchecked: Vec<FileError>,
}

/// Model files of the structural report: GGUF and safetensors by extension.
pub fn is_reported_path(path: &str) -> bool {
    FileKind::from_path(path).is_some_and(FileKind::is_model)
}

fn resolve_commit(repo: &gix::Repository, rev: &str) -> Result<Rev> {
    let missing = |message: String| {
        Error::Other(format!(
            "{rev}: cannot resolve revision ({message}); in a shallow clone, fetch it first \
             (`git fetch --depth=1 origin {rev}`) or check out with `fetch-depth: 0`"
        ))
    };
    let commit = repo
        .rev_parse_single(rev)
        .map_err(|e| missing(e.to_string()))?
        .object()
        .map_err(|e| missing(e.to_string()))?
        .peel_to_commit()
        .map_err(|e| missing(e.to_string()))?;
    Ok(Rev {
        rev: rev.to_owned(),
        commit: commit.id.to_string(),
    })
}

impl CiReport {
    pub fn collect(
        repo: &gix::Repository,
        policy: Option<LoadedPolicy>,
        options: &Options<'_>,
    ) -> Result<CiReport> {
        let base = resolve_commit(repo, options.base)?;
        let head = resolve_commit(repo, options.head)?;
        let filter = PathFilter::new(options.paths)?;
        let changes = crate::git::changes::changed_model_files(
            repo,
            &base.commit,
            Some(&head.commit),
            &filter,
        )?;
        let mut files = Vec::new();
        for change in changes {
            let reported = [&change.old_path, &change.new_path]
                .into_iter()
                .flatten()
                .any(|p| is_reported_path(p));
            if !reported {
                continue;
            }
            let old = change.old_side(repo, options.base)?;
            let new = change.new_side(repo, options.head)?;
            let diff = match (
                old.as_ref().and_then(ModelSide::artifact),
                new.as_ref().and_then(ModelSide::artifact),
            ) {
                (Some(a), Some(b)) => Some(StructuralDiff::between(a, b)),
                _ => None,
            };
            files.push(FileEntry {
                change,
                old,
                new,
                diff,
            });
        }

        let mut report = CiReport {
            base,
            head,
            fail_on: options.fail_on,
            policy: policy.as_ref().map(|p| p.shown.clone()),
            policy_changed: false,
            files,
            checked: 0,
            violations: Vec::new(),
            unchecked: Vec::new(),
        };
        if let Some(loaded) = &policy {
            report.policy_changed = match &loaded.repo_path {
                Some(path) => {
                    blob_id(repo, &report.base.commit, path)?
                        != blob_id(repo, &report.head.commit, path)?
                }
                None => false,
            };
            report.apply_policy(repo, loaded, &filter)?;
        }
        Ok(report)
    }

    /// Judges the head side of every changed file the policy covers: the model files of the
    /// report and any other added or modified file (pickles, `.bin`, ...).
    fn apply_policy(
        &mut self,
        repo: &gix::Repository,
        loaded: &LoadedPolicy,
        filter: &PathFilter,
    ) -> Result<()> {
        let mut subjects: Vec<(String, ObjectId)> = self
            .files
            .iter()
            .filter_map(|f| Some((f.change.new_path.clone()?, f.change.new_id?)))
            .collect();
        let wanted = |path: &str| {
            !is_reported_path(path) && filter.matches(path) && loaded.policy.covers(path)
        };
        let others = crate::git::changes::changed_files(
            repo,
            &self.base.commit,
            Some(&self.head.commit),
            &wanted,
        )?
        .into_iter()
        .filter(|c| c.status != Status::Removed)
        .filter_map(|c| {
            Some(OtherFile {
                path: c.new_path?,
                id: c.new_id?,
            })
        });
        subjects.extend(others.into_iter().map(|o| (o.path, o.id)));
        subjects.sort();
        for (path, id) in subjects {
            let subject = Subject {
                path: path.clone(),
                origin: Origin::Blob { repo, id },
            };
            match crate::policy::evaluate(&loaded.policy, &subject) {
                Ok(Some(found)) => {
                    self.checked += 1;
                    self.violations.extend(found);
                }
                Ok(None) => {}
                Err(e) => self.unchecked.push(FileError {
                    path,
                    message: e.to_string(),
                }),
            }
        }
        Ok(())
    }

    /// Whether the run fails the job under `--fail-on`.
    pub fn failed(&self) -> bool {
        let policy_failed = !self.violations.is_empty() || !self.unchecked.is_empty();
        match self.fail_on {
            FailOn::Violation => policy_failed,
            FailOn::Change => policy_failed || !self.files.is_empty(),
            FailOn::Never => false,
        }
    }

    /// Files with at least one violation.
    pub fn failing_files(&self) -> usize {
        let paths: std::collections::BTreeSet<&str> =
            self.violations.iter().map(|v| v.path.as_str()).collect();
        paths.len()
    }

    /// One sentence: what changed and what the policy found.
    pub fn summary_line(&self) -> String {
        let mut out = format!(
            "{} between {} and {}",
            plural(
                self.files.len(),
                "model file changed",
                "model files changed"
            ),
            self.base.short(),
            self.head.short()
        );
        match &self.policy {
            None => out.push_str("; no policy file"),
            Some(policy) => {
                let _ = write!(
                    out,
                    "; {} in {} of {} checked against {policy}",
                    plural(self.violations.len(), "violation", "violations"),
                    self.failing_files(),
                    plural(self.checked, "file", "files")
                );
                if !self.unchecked.is_empty() {
                    let _ = write!(
                        out,
                        "; {} could not be checked",
                        plural(self.unchecked.len(), "file", "files")
                    );
                }
            }
        }
        if self.failed() {
            let _ = write!(out, " (fails with --fail-on {})", self.fail_on.name());
        }
        out
    }

    /// One line per changed file, then (when `violations`) one per violation and per file
    /// the policy could not judge: the log of a run without annotations.
    pub fn text_lines(&self, violations: bool) -> String {
        let mut out = String::new();
        for f in &self.files {
            let path = match (&f.change.old_path, &f.change.new_path) {
                (Some(a), Some(b)) if a != b => format!("{a} -> {b}"),
                _ => f.path().to_owned(),
            };
            let _ = writeln!(
                out,
                "{:<8}  {path}  {}  {} -> {}  {}",
                f.change.status.name(),
                f.format(),
                short_hash(f.old.as_ref()),
                short_hash(f.new.as_ref()),
                counts_text(f.counts())
            );
        }
        if violations {
            let policy = self.policy.as_deref().unwrap_or_default();
            for v in &self.violations {
                out.push_str(&crate::policy::report::violation_line(v, policy));
                out.push('\n');
            }
            for e in &self.unchecked {
                let _ = writeln!(out, "{}: cannot check: {}", e.path, reason(e));
            }
        }
        out
    }
}

/// Why the policy could not judge a file, without the path its message starts with.
pub fn reason(e: &FileError) -> &str {
    e.message
        .strip_prefix(e.path.as_str())
        .and_then(|m| m.strip_prefix(": "))
        .unwrap_or(&e.message)
}

pub fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The first 12 hex digits of a side's structural hash, `lfs:XXXXXXXX` for an LFS object
/// that is not present, `-` for no side, `?` for a side that is not a readable model.
pub fn short_hash(side: Option<&ModelSide>) -> String {
    match side {
        None => "-".to_owned(),
        Some(ModelSide::Model { artifact, .. }) => {
            crate::identity::structural_hash(artifact)[..12].to_owned()
        }
        Some(ModelSide::Absent { pointer }) => format!("lfs:{}", &pointer.oid[..8]),
        Some(_) => "?".to_owned(),
    }
}

/// `tensors +1 −0 ~2, metadata +0 −0 ~1`, or `structure not compared`.
pub fn counts_text(counts: Counts) -> String {
    match counts {
        Counts::Known(c) => format!(
            "tensors +{} −{} ~{}, metadata +{} −{} ~{}",
            c.tensors_added,
            c.tensors_removed,
            c.tensors_changed,
            c.metadata_added,
            c.metadata_removed,
            c.metadata_changed
        ),
        Counts::Unknown => "structure not compared".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reported_paths_are_gguf_and_safetensors() {
        assert!(is_reported_path("m/a.gguf"));
        assert!(is_reported_path("A.SAFETENSORS"));
        assert!(!is_reported_path("d.wdelta"));
        assert!(!is_reported_path("gguf"));
    }

    #[test]
    fn counts_text_uses_signs() {
        let c = DiffCounts {
            tensors_added: 1,
            metadata_changed: 2,
            ..DiffCounts::default()
        };
        assert_eq!(
            counts_text(Counts::Known(c)),
            "tensors +1 −0 ~0, metadata +0 −0 ~2"
        );
    }
}
