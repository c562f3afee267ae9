//! Why an `expected_hash` violation: what differs structurally between the file and the one
//! whose hash was pinned, when that file can be found in the repository, else the exact
//! commands that show it.
//!
//! Where the pinned file is looked for, in order: the revisions the command knows (HEAD for
//! `check`, the base commit for `ci`), then the history of the policy file — the commits that
//! added or removed the hash (`git log -S`), whose version of the file is the one pinned then.
//! A version counts only when its structural hash is the pinned one.

use std::fmt::Write as _;

use super::check::Violation;
use super::subject::{Origin, Subject, read_artifact};
use crate::artifact::Artifact;
use crate::diff::{Change, StructuralDiff};
use crate::escape::shown;
use crate::git::{Entry, RemoteOptions};

/// The commits of the policy's history looked at, newest first.
const MAX_HISTORY: usize = 20;
/// Changes named in an explanation before "and N more".
const MAX_NAMED: usize = 3;

/// Where to look for pinned files.
pub(crate) struct PinSearch<'a> {
    pub repo: &'a gix::Repository,
    pub remote: &'a RemoteOptions,
    /// Revisions to look at first, with how to name them (`HEAD`, `the base main`).
    pub revs: Vec<String>,
    /// The policy file's path in the repository, for its history.
    pub policy_path: Option<String>,
}

impl PinSearch<'_> {
    /// Sets the explanation of every `expected_hash` violation of `found`; `current` is the
    /// file as judged (None when it is not a single readable model, e.g. a model directory).
    pub(crate) fn explain(&self, found: &mut [Violation], current: Option<&Artifact>) {
        for v in found.iter_mut().filter(|v| v.rule == "expected_hash") {
            v.explanation = Some(self.explanation(&v.path, &v.expected, current));
        }
    }

    fn explanation(&self, path: &str, pinned: &str, current: Option<&Artifact>) -> String {
        let history = self.policy_history(pinned);
        let candidates = self.revs.iter().chain(&history);
        let mut seen_rev = None;
        for rev in candidates {
            let Some(artifact) = self.artifact_at(rev, path) else {
                continue;
            };
            if crate::identity::structural_hash(&artifact) != pinned {
                continue;
            }
            seen_rev = Some(rev.clone());
            if let Some(current) = current {
                return format!(
                    "the pinned file is {}: {}",
                    shown(&format!("{rev}:{path}")),
                    describe(&StructuralDiff::between(&artifact, current))
                );
            }
            break;
        }
        let shown_path = shown(path);
        match (seen_rev, history.first()) {
            (Some(rev), _) => format!(
                "the pinned file is {}; see what differs with `weight-inspect diff {} {shown_path}`",
                shown(&format!("{rev}:{path}")),
                shown(&format!("{rev}:{path}"))
            ),
            (None, Some(commit)) => format!(
                "no version of {shown_path} with the pinned hash found; the pin was last changed \
                 in {commit}: see it with `git show {commit} -- {policy}` and compare with \
                 `weight-inspect diff {commit}:{shown_path} {shown_path}` (after `git lfs fetch` \
                 for an LFS file)",
                commit = short(commit),
                policy = shown(self.policy_path.as_deref().unwrap_or_default()),
            ),
            (None, None) => format!(
                "no version of {shown_path} with the pinned hash found in {}; find the commit \
                 that pinned it with `git log -S {pinned} -- {policy}`, then compare with \
                 `weight-inspect diff REV:{shown_path} {shown_path}`",
                if self.revs.is_empty() {
                    "the repository".to_owned()
                } else {
                    self.revs.join(", ")
                },
                policy = shown(
                    self.policy_path
                        .as_deref()
                        .unwrap_or(super::config::POLICY_FILE)
                ),
            ),
        }
    }

    /// The model file at `rev:path`, when it is a readable single-file model there.
    fn artifact_at(&self, rev: &str, path: &str) -> Option<Artifact> {
        let Ok(Some(Entry::File(id))) = crate::git::tree_entry(self.repo, rev, path) else {
            return None;
        };
        let subject = Subject {
            path: path.to_owned(),
            origin: Origin::Blob {
                repo: self.repo,
                id,
                tree: Some(rev.to_owned()),
            },
            remote: self.remote,
        };
        read_artifact(&subject).ok()
    }

    /// The commits, newest first, in which the policy file gained or lost `hash`.
    fn policy_history(&self, hash: &str) -> Vec<String> {
        let (Some(policy), Some(dir)) = (self.policy_path.as_deref(), self.repo.workdir()) else {
            return Vec::new();
        };
        let max = format!("--max-count={MAX_HISTORY}");
        let pickaxe = format!("-S{hash}");
        let args = ["log", &max, "--format=%H", &pickaxe, "--", policy];
        match crate::git::git_output(dir, &args) {
            Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout)
                .lines()
                .map(str::to_owned)
                .collect(),
            _ => Vec::new(),
        }
    }
}

fn short(commit: &str) -> &str {
    &commit[..commit.len().min(12)]
}

/// "tensors +1 −0 ~1, metadata +0 −0 ~1: blk.0.weight f16 [2, 256] → q8_0 [2, 256], ...".
fn describe(diff: &StructuralDiff) -> String {
    let c = diff.counts();
    let mut out = String::new();
    if diff.format_changed() {
        let _ = write!(
            out,
            "format {} → {}, ",
            diff.old_format.name(),
            diff.new_format.name()
        );
    }
    let _ = write!(out, "{c}");
    let tensor = |t: &crate::artifact::TensorInfo| {
        format!("{} {}", t.dtype, crate::render::text::shape_text(&t.shape))
    };
    let value =
        |v: &crate::artifact::Value| shown(&crate::render::text::value_summary(v)).into_owned();
    let mut named: Vec<String> = diff
        .tensors
        .iter()
        .map(|t| {
            let name = shown(&t.name);
            match &t.change {
                Change::Added(new) => format!("+{name} {}", tensor(new)),
                Change::Removed(old) => format!("−{name} {}", tensor(old)),
                Change::Changed(old, new) => format!("{name} {} → {}", tensor(old), tensor(new)),
            }
        })
        .chain(diff.metadata.iter().map(|m| {
            let key = shown(&m.key);
            match &m.change {
                Change::Added(new) => format!("+{key} = {}", value(new)),
                Change::Removed(_) => format!("−{key}"),
                Change::Changed(old, new) => format!("{key} {} → {}", value(old), value(new)),
            }
        }))
        .collect();
    let more = named.len().saturating_sub(MAX_NAMED);
    named.truncate(MAX_NAMED);
    if !named.is_empty() {
        let _ = write!(out, ": {}", named.join(", "));
        if more > 0 {
            let _ = write!(out, ", and {more} more");
        }
    }
    out
}
