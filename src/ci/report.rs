//! What one `ci` run found: the changed model files with both sides and their structural
//! diff, the policy's verdict on the head side, and whether that fails the job.

use std::fmt::Write;

use gix::ObjectId;

use super::error::CiError;
use super::record::{CiFile, DETAILS_KEPT, Spool, Spooled, hash_text};
use crate::escape::shown;
use crate::git::ComparedFile;
use crate::git::Snapshot;
use crate::git::tree_entry;
use crate::git::{PathFilter, Status};
use crate::policy::follow_committed_link;
use crate::policy::{
    Baseline, Phrasing, PinSearch, Standing, Tally, classify_against_base, plural,
};
use crate::policy::{FileError, FileReason, Origin, Policy, PolicyError, Subject, Violation};

type Result<T, E = CiError> = std::result::Result<T, E>;

/// What makes the run fail (exit 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum FailOn {
    /// A violation the change brings (new, or worse than at the base), or a file the policy
    /// could not judge. Violations already at the base are reported as warnings.
    Violation,
    /// Any policy violation on the head side, whether or not the base already had it, or a
    /// file the policy could not judge.
    ViolationAny,
    /// Any changed model file (and everything `violation` fails on).
    Change,
    /// Nothing: report only (violations become warnings).
    Never,
}

impl FailOn {
    pub(crate) fn name(self) -> &'static str {
        match self {
            FailOn::Violation => "violation",
            FailOn::ViolationAny => "violation-any",
            FailOn::Change => "change",
            FailOn::Never => "never",
        }
    }
}

/// A policy file read for this run.
pub(crate) struct LoadedPolicy {
    pub policy: Policy,
    /// The name to show (as given, or `.weight-inspect.toml`).
    pub shown: String,
    /// Its path in the repository, when it lies inside the work tree.
    pub repo_path: Option<String>,
}

pub(crate) struct Options<'a> {
    /// Also compare weight values where both sides are local.
    pub values: bool,
    /// A conversion's source, relative to the repository root: changed GGUF files in its
    /// directory are compared with it.
    pub reference: Option<&'a str>,
    pub base: &'a str,
    pub head: &'a str,
    pub paths: &'a [String],
    pub fail_on: FailOn,
    pub remote: &'a crate::git::RemoteOptions,
    /// Whether the JSON report and the HTML page are wanted (their parts are kept only then).
    pub json: bool,
    pub html: bool,
}

/// A revision as given and the commit it resolved to.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct Rev {
    pub rev: String,
    pub commit: String,
}

impl Rev {
    pub(crate) fn short(&self) -> &str {
        &self.commit[..self.commit.len().min(12)]
    }
}

/// A file the policy judges on the head side: its path and blob, and whether that is a
/// symbolic link (followed inside the head commit, or refused).
struct HeadFile {
    path: String,
    id: ObjectId,
    link: bool,
    /// The file at the base: the same path, or the rename's source.
    base: Option<BaseFile>,
}

/// The base side of a judged file.
struct BaseFile {
    path: String,
    id: ObjectId,
    link: bool,
}

/// Everything one run found.
pub(crate) struct CiReport {
    pub base: Rev,
    pub head: Rev,
    pub fail_on: FailOn,
    /// The policy's name, when there is one.
    pub policy: Option<String>,
    /// Whether the pull request changes the policy file itself.
    pub policy_changed: bool,
    /// What the outputs show of each compared file, in path order.
    pub files: Vec<CiFile>,
    /// The JSON of each file (`ci --json`), as the report's `files` holds it.
    pub(crate) json_files: Option<Spooled>,
    /// The HTML section of each file (`ci --html`).
    pub(crate) html_sections: Option<Spooled>,
    /// Files the policy judged (model files and other covered files).
    pub checked: usize,
    pub violations: Vec<Violation>,
    /// For each violation (same order): whether the base already had it.
    pub standings: Vec<Standing>,
    /// Files the policy could not judge (e.g. LFS object not present locally).
    pub unchecked: Vec<FileError>,
    /// The signatures (`signature` rules) that cover the judged files, by path.
    pub signatures: std::collections::BTreeMap<String, SignatureState>,
}

/// A signature as the summary shows it: who signed it, and the judged files it covers (by
/// path), whose `signature` violations say whether it still holds.
pub(crate) struct SignatureState {
    /// The signer, or why the signature does not verify.
    pub signer: std::result::Result<String, String>,
    pub files: std::collections::BTreeSet<String>,
}

/// Files of the structural report: models by their format's extension, and `.wdelta` files.
fn is_reported_path(path: &str) -> bool {
    crate::read::is_read_path(path)
}

/// The index of a sharded model, which joins its shards into one entry.
fn is_index_path(path: &str) -> bool {
    crate::sharded::index::is_index_name(path.rsplit('/').next().unwrap_or(path))
}

fn resolve_commit(repo: &gix::Repository, rev: &str) -> Result<Rev> {
    let missing = |e: &dyn std::fmt::Display| CiError::UnresolvedRevision {
        rev: rev.to_owned(),
        message: e.to_string(),
    };
    let commit = repo
        .rev_parse_single(rev)
        .map_err(|e| missing(&e))?
        .object()
        .map_err(|e| missing(&e))?
        .peel_to_commit()
        .map_err(|e| missing(&e))?;
    Ok(Rev {
        rev: rev.to_owned(),
        commit: commit.id.to_string(),
    })
}

impl CiReport {
    pub(crate) fn collect(
        repo: &gix::Repository,
        policy: Option<LoadedPolicy>,
        options: &Options<'_>,
    ) -> Result<CiReport> {
        let base = resolve_commit(repo, options.base)?;
        let head = resolve_commit(repo, options.head)?;
        let filter = PathFilter::new(options.paths)?;
        let changes =
            crate::git::changed_model_files(repo, &base.commit, Some(&head.commit), &filter)?;
        let changes: Vec<_> = changes
            .into_iter()
            .filter(|change| {
                [&change.old_path, &change.new_path]
                    .into_iter()
                    .flatten()
                    .any(|p| is_reported_path(p) || is_index_path(p))
            })
            .collect();
        let reader = crate::git::SideReader::new(repo, options.remote);
        let spool = |wanted: bool| {
            wanted
                .then(Spool::new)
                .transpose()
                .map_err(|e| crate::error::Error::io("<temporary file>", e))
        };
        let mut json_files = spool(options.json)?;
        let mut html_sections = spool(options.html)?;
        let mut files = Vec::new();
        let mut model_verdicts = Vec::new();
        let mut details_bytes = 0usize;
        // A spool that cannot be written (the disk full): reported once the walk is over.
        let mut failure = None;
        crate::git::compare_each(
            &reader,
            Snapshot::Tree {
                rev: &base.commit,
                label: options.base,
            },
            Snapshot::Tree {
                rev: &head.commit,
                label: options.head,
            },
            changes,
            options.values,
            options.reference,
            |window| {
                let reported = window.into_iter().filter(|f| {
                    f.model.is_some()
                        || is_reported_path(f.change.path())
                        || f.change.old_path.as_deref().is_some_and(is_reported_path)
                });
                for f in reported {
                    if let Some(loaded) = &policy {
                        model_verdicts.extend(judge_model(&f, &loaded.policy, options.remote));
                    }
                    if failure.is_none()
                        && let Err(e) =
                            spool_sections(&f, files.len(), &mut json_files, &mut html_sections)
                    {
                        failure = Some(e);
                    }
                    // The summary stops before a diff once those before it fill it.
                    let record = CiFile::of(&f, details_bytes <= DETAILS_KEPT);
                    details_bytes += record.details.as_ref().map_or(0, String::len)
                        + record.details_all.as_ref().map_or(0, String::len);
                    files.push(record);
                }
                Ok(())
            },
        )?;
        if let Some(e) = failure {
            return Err(e);
        }
        let finish = |spool: Option<Spool>| {
            spool
                .map(Spool::finish)
                .transpose()
                .map_err(|e| crate::error::Error::io("<temporary file>", e))
        };

        let mut report = CiReport {
            base,
            head,
            fail_on: options.fail_on,
            policy: policy.as_ref().map(|p| p.shown.clone()),
            policy_changed: false,
            files,
            json_files: finish(json_files)?,
            html_sections: finish(html_sections)?,
            checked: 0,
            violations: Vec::new(),
            standings: Vec::new(),
            unchecked: Vec::new(),
            signatures: std::collections::BTreeMap::new(),
        };
        if let Some(loaded) = &policy {
            report.policy_changed = match &loaded.repo_path {
                Some(path) => {
                    tree_entry(repo, &report.base.commit, path)?
                        != tree_entry(repo, &report.head.commit, path)?
                }
                None => false,
            };
            report.apply_policy(repo, loaded, &filter, options.remote, model_verdicts)?;
        }
        Ok(report)
    }

    /// Judges the head side of every changed file the policy covers: the model files of the
    /// report and any other added or modified file (pickles, `.bin`, ...). A symbolic link is
    /// judged as the file it leads to in the head commit, or reported as not checked when it
    /// leads out of the repository or to no file.
    fn apply_policy(
        &mut self,
        repo: &gix::Repository,
        loaded: &LoadedPolicy,
        filter: &PathFilter,
        remote: &crate::git::RemoteOptions,
        model_verdicts: Vec<ModelVerdict>,
    ) -> Result<()> {
        let mut subjects: Vec<HeadFile> = self
            .files
            .iter()
            .filter_map(|f| {
                Some(HeadFile {
                    path: f.change.new_path.clone()?,
                    id: f.change.new_id?,
                    link: f.change.new_link,
                    base: base_file(
                        f.change.old_path.as_ref(),
                        f.change.old_id,
                        f.change.old_link,
                    ),
                })
            })
            .collect();
        let wanted = |path: &str| {
            !is_reported_path(path) && filter.matches(path) && loaded.policy.covers(path)
        };
        let others =
            crate::git::changed_files(repo, &self.base.commit, Some(&self.head.commit), &wanted)?
                .into_iter()
                .filter(|c| c.status != Status::Removed)
                .filter_map(|c| {
                    Some(HeadFile {
                        base: base_file(c.old_path.as_ref(), c.old_id, c.old_link),
                        path: c.new_path?,
                        id: c.new_id?,
                        link: c.new_link,
                    })
                });
        subjects.extend(others);
        self.deleted_signed(repo, loaded, filter, &mut subjects)?;
        subjects.sort_by(|a, b| a.path.cmp(&b.path));
        let head = self.head.commit.clone();
        let lookup = |p: &str| crate::git::tree_entry(repo, &head, p);
        for HeadFile {
            path,
            id,
            link,
            base,
        } in subjects
        {
            let origin = if link {
                if !loaded.policy.covers(&path) {
                    continue;
                }
                follow_committed_link(
                    repo,
                    &path,
                    id,
                    &self.head.rev,
                    Some(&self.head.commit),
                    &lookup,
                )?
            } else {
                Origin::Blob {
                    repo,
                    id,
                    tree: Some(self.head.commit.clone()),
                }
            };
            let subject = Subject {
                path: path.clone(),
                origin,
                remote,
            };
            // A signature that cannot be read is the violation's to say.
            if let Ok(Some((sig, signer))) =
                crate::policy::signature_state(&loaded.policy, &subject)
            {
                self.signatures
                    .entry(sig)
                    .or_insert_with(|| SignatureState {
                        signer,
                        files: std::collections::BTreeSet::new(),
                    })
                    .files
                    .insert(path.clone());
            }
            match crate::policy::evaluate(&loaded.policy, &subject) {
                Ok(Some(mut found)) => {
                    self.checked += 1;
                    if found.iter().any(|v| v.rule == "expected_hash") {
                        let pins = PinSearch {
                            repo,
                            remote,
                            revs: vec![self.base.commit.clone()],
                            policy_path: loaded.repo_path.clone(),
                        };
                        let current = crate::policy::read_artifact(&subject).ok();
                        pins.explain(&mut found, current.as_ref());
                    }
                    let at_base = if found.is_empty() {
                        Vec::new()
                    } else {
                        self.base_violations(repo, &loaded.policy, &path, base, remote)
                    };
                    self.push_judged(found, &at_base);
                }
                Ok(None) => {}
                Err(e) => self.unchecked.push(FileError::new(&path, &e)),
            }
        }
        // The models' verdicts, reached while they were compared, after the files'.
        let mut judged = Vec::new();
        for verdict in model_verdicts {
            match verdict {
                ModelVerdict::Unchecked(error) => self.unchecked.push(error),
                ModelVerdict::Judged { found, at_base } => {
                    self.checked += 1;
                    judged.push((found, at_base));
                }
                ModelVerdict::Unjudged(error) => {
                    self.checked += 1;
                    self.unchecked.push(error);
                }
            }
        }
        for (found, at_base) in judged {
            self.push_judged(found, &at_base);
        }
        Ok(())
    }

    /// A file the change deletes is judged through the signature files above it in the head
    /// commit (which may still list it): they are judged with the files, when the change does
    /// not already bring them.
    fn deleted_signed(
        &self,
        repo: &gix::Repository,
        loaded: &LoadedPolicy,
        filter: &PathFilter,
        subjects: &mut Vec<HeadFile>,
    ) -> Result<()> {
        let names = crate::policy::signature_files(&loaded.policy);
        if names.is_empty() {
            return Ok(());
        }
        let wanted = |path: &str| filter.matches(path) && loaded.policy.covers(path);
        let removed =
            crate::git::changed_files(repo, &self.base.commit, Some(&self.head.commit), &wanted)?
                .into_iter()
                .filter(|c| c.status == Status::Removed)
                .filter_map(|c| c.old_path);
        let mut candidates = std::collections::BTreeSet::new();
        for path in removed {
            candidates.extend(crate::policy::signature_paths_above(&path, &names));
        }
        for path in candidates {
            if subjects.iter().any(|s| s.path == path) || !loaded.policy.covers(&path) {
                continue;
            }
            let Some(crate::git::Entry::File(id)) = tree_entry(repo, &self.head.commit, &path)?
            else {
                continue;
            };
            let base = match tree_entry(repo, &self.base.commit, &path)? {
                Some(crate::git::Entry::File(old)) => Some(BaseFile {
                    path: path.clone(),
                    id: old,
                    link: false,
                }),
                _ => None,
            };
            subjects.push(HeadFile {
                path,
                id,
                link: false,
                base,
            });
        }
        Ok(())
    }

    /// Adds the head side's violations of one file with their standing against the base's.
    fn push_judged(&mut self, found: Vec<Violation>, at_base: &[Violation]) {
        for v in found {
            self.standings.push(classify_against_base(&v, at_base));
            self.violations.push(v);
        }
    }

    /// The violations the head policy finds in the base side of a file, under the head path
    /// (so that the same rules apply). A base side that cannot be judged has none: the head's
    /// violations then count as new.
    fn base_violations(
        &self,
        repo: &gix::Repository,
        policy: &Policy,
        path: &str,
        base: Option<BaseFile>,
        remote: &crate::git::RemoteOptions,
    ) -> Vec<Violation> {
        let Some(base) = base else {
            return Vec::new();
        };
        let commit = self.base.commit.clone();
        let lookup = |p: &str| crate::git::tree_entry(repo, &commit, p);
        let origin = if base.link {
            match follow_committed_link(
                repo,
                &base.path,
                base.id,
                &self.base.rev,
                Some(&self.base.commit),
                &lookup,
            ) {
                Ok(origin) => origin,
                Err(_) => return Vec::new(),
            }
        } else {
            Origin::Blob {
                repo,
                id: base.id,
                tree: Some(self.base.commit.clone()),
            }
        };
        let subject = Subject {
            path: path.to_owned(),
            origin,
            remote,
        };
        crate::policy::evaluate(policy, &subject)
            .ok()
            .flatten()
            .unwrap_or_default()
    }

    /// Violations the change brought (new, or worse than at the base).
    pub(crate) fn brought(&self) -> usize {
        self.standings
            .iter()
            .filter(|s| s.baseline.brought())
            .count()
    }

    /// Violations already at the base, unchanged.
    pub(crate) fn pre_existing(&self) -> usize {
        self.violations.len() - self.brought()
    }

    /// "; 1 brought by the change, 2 already at the base" (nothing without violations).
    pub(crate) fn standing_sentence(&self) -> String {
        if self.violations.is_empty() {
            return String::new();
        }
        format!(
            " ({} brought by the change, {} already at the base)",
            self.brought(),
            self.pre_existing()
        )
    }

    /// The violations with their standing.
    pub(crate) fn judged(&self) -> impl Iterator<Item = (&Violation, &Standing)> {
        self.violations.iter().zip(&self.standings)
    }

    /// Whether the run fails the job under `--fail-on`.
    pub(crate) fn failed(&self) -> bool {
        let brought = self.brought() > 0 || !self.unchecked.is_empty();
        let policy_failed = !self.violations.is_empty() || !self.unchecked.is_empty();
        match self.fail_on {
            FailOn::Violation => brought,
            FailOn::ViolationAny => policy_failed,
            FailOn::Change => brought || self.files.iter().any(|f| f.counts_as_change),
            FailOn::Never => false,
        }
    }

    /// Files with at least one violation.
    pub(crate) fn failing_files(&self) -> usize {
        let paths: std::collections::BTreeSet<&str> =
            self.violations.iter().map(|v| v.path.as_str()).collect();
        paths.len()
    }

    /// What the policy found, in numbers.
    pub(crate) fn tally(&self) -> Tally {
        Tally {
            checked: self.checked,
            failing: self.failing_files(),
            violations: self.violations.len(),
            unchecked: self.unchecked.len(),
        }
    }

    /// One sentence: what changed and what the policy found.
    pub(crate) fn summary_line(&self) -> String {
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
                out.push_str("; ");
                out.push_str(&self.tally().sentence(Phrasing::Ci { policy }));
                out.push_str(&self.standing_sentence());
            }
        }
        if self.failed() {
            let _ = write!(out, " (fails with --fail-on {})", self.fail_on.name());
        }
        out
    }

    /// One line per changed file, then (when `violations`) one per violation and per file
    /// the policy could not judge: the log of a run without annotations. Paths and reasons are
    /// shown escaped, so none of them starts a line of the log.
    pub(crate) fn text_lines(&self, violations: bool) -> String {
        let mut out = String::new();
        for f in &self.files {
            let path = match (&f.change.old_path, &f.change.new_path) {
                (Some(a), Some(b)) if a != b => format!("{} -> {}", shown(a), shown(b)),
                _ => shown(f.path()).into_owned(),
            };
            let _ = writeln!(
                out,
                "{:<8}  {path}  {}  {} -> {}  {}",
                f.change.status.name(),
                f.format,
                hash_text(f.old.as_ref()),
                hash_text(f.new.as_ref()),
                f.counts_text()
            );
            if let Some(training) = &f.training {
                let _ = writeln!(out, "          training checkpoint: {training}");
            }
        }
        if violations {
            let policy = self.policy.as_deref().unwrap_or_default();
            for (v, standing) in self.judged() {
                out.push_str(&crate::policy::violation_line(v, policy));
                out.push_str(&standing_note(standing, &self.base));
                out.push('\n');
            }
            for e in &self.unchecked {
                let _ = writeln!(
                    out,
                    "{}: cannot check: {}",
                    shown(&e.path),
                    e.shown_reason()
                );
            }
        }
        out
    }
}

/// Writes the JSON and HTML sections of the `i`th file to their spools, when wanted.
fn spool_sections(
    f: &ComparedFile,
    i: usize,
    json: &mut Option<Spool>,
    html: &mut Option<Spool>,
) -> Result<()> {
    let io = |e| CiError::from(crate::error::Error::io("<temporary file>", e));
    if let Some(spool) = json {
        let separator = if spool.is_empty() { "\n" } else { ",\n" };
        spool.push(separator).map_err(io)?;
        spool.push(&super::sections::file_json(f)?).map_err(io)?;
    }
    if let Some(spool) = html {
        spool
            .push(&super::sections::html_section(i, f))
            .map_err(io)?;
    }
    Ok(())
}

/// The policy's verdict on a changed multi-file model, reached while the model is at hand.
pub(crate) enum ModelVerdict {
    /// Its files could not be read together: not judged.
    Unchecked(FileError),
    /// Judged, with the base's violations of the same rules.
    Judged {
        found: Vec<Violation>,
        at_base: Vec<Violation>,
    },
    /// Counted as judged, but the policy failed on it.
    Unjudged(FileError),
}

/// Judges the head side of a changed multi-file model whose directory a rule covers, as one
/// model (see docs/policy.md, "Multi-file models"); None for any other file.
fn judge_model(
    f: &ComparedFile,
    policy: &Policy,
    remote: &crate::git::RemoteOptions,
) -> Option<ModelVerdict> {
    let (Some(_), Some(new_path), Some(side)) = (&f.model, &f.change.new_path, &f.new) else {
        return None;
    };
    let dir = new_path.rsplit_once('/').map_or("", |(d, _)| d);
    if dir.is_empty() || !policy.covers(dir) {
        return None;
    }
    // A model whose files could not be read together (a shard missing, an LFS object not
    // available) cannot be judged: reported as not checked, which fails the run.
    let Some(artifact) = side.artifact() else {
        let why = side.note().unwrap_or_default();
        let error = PolicyError::file(dir, FileReason::Unassembled { why });
        return Some(ModelVerdict::Unchecked(FileError::new(dir, &error)));
    };
    let subject = Subject {
        path: dir.to_owned(),
        origin: Origin::Model(Box::new(artifact.clone())),
        remote,
    };
    let found = match crate::policy::evaluate(policy, &subject) {
        Ok(found) => found.unwrap_or_default(),
        Err(e) => return Some(ModelVerdict::Unjudged(FileError::new(dir, &e))),
    };
    // The model at the base, judged the same way (a model that did not read as one there had
    // no violation to keep).
    let at_base = match f.old.as_ref().and_then(|old| old.artifact()) {
        Some(old) if !found.is_empty() => {
            let subject = Subject {
                path: dir.to_owned(),
                origin: Origin::Model(Box::new(old.clone())),
                remote,
            };
            crate::policy::evaluate(policy, &subject)
                .ok()
                .flatten()
                .unwrap_or_default()
        }
        _ => Vec::new(),
    };
    Some(ModelVerdict::Judged { found, at_base })
}

/// The base side of a change, when it had one.
fn base_file(path: Option<&String>, id: Option<ObjectId>, link: bool) -> Option<BaseFile> {
    Some(BaseFile {
        path: path?.clone(),
        id: id?,
        link,
    })
}

/// What a violation line says of its standing: nothing for a new one.
pub(crate) fn standing_note(standing: &Standing, base: &Rev) -> String {
    match standing.baseline {
        Baseline::New => String::new(),
        Baseline::Unchanged => format!(" (already at the base {})", base.short()),
        Baseline::Worse => format!(
            " (worse than at the base {}, which found {})",
            base.short(),
            standing.base_found.as_deref().unwrap_or_default()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reported_paths_are_models_and_deltas() {
        assert!(is_reported_path("m/a.gguf"));
        assert!(is_reported_path("A.SAFETENSORS"));
        // A stored .wdelta is reported as every reader shows it.
        assert!(is_reported_path("d.wdelta"));
        assert!(!is_reported_path("gguf"));
    }
}
