//! `reference` + `max_rel_l2`: a GGUF judged as a conversion of the model beside it. Both are
//! read from where the GGUF is judged (the work tree, the index, or the commit under review),
//! their weights compared as `diff --values SOURCE GGUF` does, and every tensor whose rel_l2
//! against the source exceeds the bound is a violation naming the tensor, the figure and, when
//! the comparison names it, the mistake.

use std::path::{Path, PathBuf};

use super::config::ConversionBound;
use super::error::PolicyError;
use super::subject::{Origin, Subject};
use crate::artifact::{Artifact, Format};
use crate::conversion::{Conversion, Models};
use crate::escape::shown;
use crate::git::Pointer;
use crate::values::{ModelBytes, Side};

type Result<T, E = PolicyError> = std::result::Result<T, E>;

/// What breaks a conversion bound: the text of a violation, and the tensor it is about.
pub(crate) struct Finding {
    pub(crate) found: String,
    pub(crate) tensor: Option<String>,
}

/// The reference as the violations name it: `reference` beside the GGUF at `path`.
pub(crate) fn reference_of(path: &str, bound: &ConversionBound) -> String {
    beside(path, &bound.reference)
}

/// What breaks `bound` for a GGUF (nothing for other formats and for multi-file models, which
/// the rule does not cover).
pub(crate) fn check(
    subject: &Subject<'_>,
    artifact: &Artifact,
    bound: &ConversionBound,
) -> Result<Vec<Finding>> {
    if artifact.format != Format::Gguf || matches!(subject.origin, Origin::Model(_)) {
        return Ok(Vec::new());
    }
    let path = &subject.path;
    let reference = reference_of(path, bound);
    let violation = |found: String| Finding {
        found,
        tensor: None,
    };
    let Some(reference_bytes) = reference_bytes(subject, &reference, &bound.reference)? else {
        return Ok(vec![violation(format!(
            "no file {} beside it to compare with",
            shown(&reference)
        ))]);
    };
    let reference_artifact =
        match crate::read::read_bytes(Path::new(&reference), reference_bytes.bytes()) {
            Ok(a) => a,
            Err(e) => {
                return Ok(vec![violation(format!(
                    "{} is not a readable model: {}",
                    shown(&reference),
                    crate::escape::terminal_safe(&e.to_string())
                ))]);
            }
        };
    let gguf_bytes = subject_bytes(subject)?;
    // Its config.json is read from the work tree only (a commit's is not checked).
    let source_path = match &subject.origin {
        Origin::Worktree { file, .. } => file
            .parent()
            .map(|d| d.join(&bound.reference))
            .unwrap_or_default(),
        _ => PathBuf::new(),
    };
    let models = Models {
        source: Side::single(&reference_artifact, &reference_bytes),
        source_path: &source_path,
        target: Side::single(artifact, &gguf_bytes),
        target_name: path,
    };
    let conversion = match crate::conversion::compare(&models, None) {
        Ok(c) => c,
        Err(e) => {
            return Ok(vec![violation(format!(
                "not compared: {}",
                crate::escape::terminal_safe(&e.to_string())
            ))]);
        }
    };
    Ok(violations(&conversion, bound.max_rel_l2, &violation))
}

fn violations(
    conversion: &Conversion,
    max: f64,
    violation: &dyn Fn(String) -> Finding,
) -> Vec<Finding> {
    let mut out = Vec::new();
    if conversion.pairs.is_empty() {
        out.push(violation(
            "no tensor of the reference pairs with a tensor of the GGUF".into(),
        ));
    }
    for p in &conversion.pairs {
        let exceeds = p.stats.rel_l2.is_none_or(|r| r > max);
        if !exceeds {
            continue;
        }
        let figure = p
            .stats
            .rel_l2
            .map_or("inf (the source is all zeros)".into(), |r| {
                format!("{r:.6}")
            });
        // The diagnosis of `diff --values`, when it names the mistake (a +1 missing, a
        // transpose, a wrong permutation): the violation then says what to fix.
        let named =
            crate::render::conversion::named_mistake(p).map_or(String::new(), |m| format!(": {m}"));
        let mut v = violation(format!(
            "{}: rel_l2 {figure} ({}, {} → {}){named}",
            shown(&p.target),
            p.transform.name(),
            p.source_dtypes.join("+"),
            p.target_dtype
        ));
        v.tensor = Some(p.target.clone());
        out.push(v);
    }
    for n in &conversion.not_compared {
        let mut v = violation(format!(
            "{}: not compared: {}",
            n.target.as_deref().map_or("-".into(), shown),
            n.why
        ));
        v.tensor = n.target.clone();
        out.push(v);
    }
    out
}

/// `reference` relative to the directory of `path` (repository-relative, `/`-separated).
pub(super) fn beside(path: &str, reference: &str) -> String {
    let mut parts: Vec<&str> = path.split('/').collect();
    parts.pop();
    for part in reference.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            other => parts.push(other),
        }
    }
    parts.join("/")
}

/// Every byte of the judged GGUF: the work-tree file, the blob, or their LFS object in the
/// local store (weights are never downloaded).
pub(super) fn subject_bytes(subject: &Subject<'_>) -> Result<ModelBytes> {
    match &subject.origin {
        Origin::Worktree { repo, file, .. } => worktree_bytes(*repo, &subject.path, file),
        Origin::Blob { repo, id, .. } => blob_bytes(repo, &subject.path, *id),
        Origin::Refused(reason) => Err(PolicyError::file(&subject.path, reason.clone())),
        Origin::Model(_) => unreachable!("multi-file models are not checked"),
    }
}

/// The reference's bytes from the same place as the subject's; None when it has no such file.
/// `reference` is repository-relative, `relative` as the policy gives it (to the GGUF's
/// directory).
pub(super) fn reference_bytes(
    subject: &Subject<'_>,
    reference: &str,
    relative: &str,
) -> Result<Option<ModelBytes>> {
    match &subject.origin {
        Origin::Worktree { repo, file, .. } => {
            let on_disk = match (repo.and_then(|r| r.workdir()), file.parent()) {
                (Some(root), _) => root.join(reference),
                (None, Some(dir)) => dir.join(relative),
                (None, None) => return Ok(None),
            };
            if !on_disk.is_file() {
                return Ok(None);
            }
            worktree_bytes(*repo, reference, &on_disk).map(Some)
        }
        Origin::Blob { repo, tree, .. } => {
            let entry = match tree {
                Some(rev) => crate::git::tree_entry(repo, rev, reference)?,
                None => crate::git::index_entry(
                    repo,
                    reference,
                    gix::index::entry::Stage::Unconflicted,
                )?,
            };
            match entry {
                Some(crate::git::Entry::File(id)) => blob_bytes(repo, reference, id).map(Some),
                _ => Ok(None),
            }
        }
        Origin::Refused(_) | Origin::Model(_) => Ok(None),
    }
}

fn worktree_bytes(repo: Option<&gix::Repository>, path: &str, file: &Path) -> Result<ModelBytes> {
    let head = std::fs::read(file)
        .ok()
        .filter(|b| b.len() < crate::git::MAX_POINTER_SIZE)
        .and_then(|b| Pointer::parse(&b));
    match head {
        Some(pointer) => local_object(repo, path, &pointer),
        None => ModelBytes::map(file).map_err(|e| values_error(path, e)),
    }
}

fn blob_bytes(repo: &gix::Repository, path: &str, id: gix::ObjectId) -> Result<ModelBytes> {
    let bytes = crate::git::blob_bytes(repo, id)?;
    match Pointer::parse(&bytes) {
        Some(pointer) => local_object(Some(repo), path, &pointer),
        None => Ok(ModelBytes::owned(path, bytes)),
    }
}

fn local_object(
    repo: Option<&gix::Repository>,
    path: &str,
    pointer: &Pointer,
) -> Result<ModelBytes> {
    let object = repo.and_then(|r| crate::git::present_object(r, pointer));
    match object {
        Some(object) => ModelBytes::map(&object).map_err(|e| values_error(path, e)),
        None => Err(PolicyError::file(
            path,
            super::error::FileReason::LfsObjectAbsent {
                oid: pointer.oid.clone(),
                size: pointer.size,
            },
        )),
    }
}

fn values_error(path: &str, e: crate::values::ValuesError) -> PolicyError {
    PolicyError::file(
        path,
        super::error::FileReason::WeightsUnreadable { why: e.to_string() },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_is_beside_the_gguf() {
        assert_eq!(
            beside("models/m.gguf", "model.safetensors"),
            "models/model.safetensors"
        );
        assert_eq!(
            beside("m.gguf", "src/model.safetensors"),
            "src/model.safetensors"
        );
        assert_eq!(
            beside("a/b/m.gguf", "../hf/model.safetensors"),
            "a/hf/model.safetensors"
        );
    }
}
