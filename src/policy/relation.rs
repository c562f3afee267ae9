//! `relation` + `reference`: a model judged by how it was made from the reference beside it
//! (`relate`'s verdict), for a folder of quantizations or fine-tunes of one model: a file that
//! is not one of the allowed relations (an unrelated model swapped in) is a violation.

use std::path::Path;

use super::config::RelationRule;
use super::conversion::{beside, reference_bytes, subject_bytes};
use super::error::PolicyError;
use super::subject::{Origin, Subject};
use crate::artifact::Artifact;
use crate::escape::shown;
use crate::lineage::Candidate;

/// The reference as violations name it: `reference` beside the file at `path`.
pub(crate) fn reference_of(path: &str, rule: &RelationRule) -> String {
    beside(path, &rule.reference)
}

/// What breaks `rule` for the judged file: None when its relation is allowed, else the text
/// of the violation. Multi-file models are not covered (as for conversions).
pub(crate) fn check(
    subject: &Subject<'_>,
    artifact: &Artifact,
    rule: &RelationRule,
) -> Result<Option<String>, PolicyError> {
    if matches!(subject.origin, Origin::Model(_)) {
        return Ok(None);
    }
    let reference = reference_of(&subject.path, rule);
    let Some(reference_bytes) = reference_bytes(subject, &reference, &rule.reference)? else {
        return Ok(Some(format!(
            "no file {} beside it to relate it to",
            shown(&reference)
        )));
    };
    let reference_artifact =
        match crate::read::read_bytes(Path::new(&reference), reference_bytes.bytes()) {
            Ok(a) => a,
            Err(e) => {
                return Ok(Some(format!(
                    "{} is not a readable model: {}",
                    shown(&reference),
                    crate::escape::terminal_safe(&e.to_string())
                )));
            }
        };
    let bytes = subject_bytes(subject)?;
    let model = Candidate {
        name: &subject.path,
        artifact,
        files: Some(std::slice::from_ref(&bytes)),
        dir: None,
    };
    let parent = Candidate {
        name: &reference,
        artifact: &reference_artifact,
        files: Some(std::slice::from_ref(&reference_bytes)),
        dir: None,
    };
    let verdict = match crate::lineage::relate(&model, &[parent]) {
        Ok(v) => v,
        Err(e) => {
            return Ok(Some(format!(
                "not related: {}",
                crate::escape::terminal_safe(&e.to_string())
            )));
        }
    };
    if crate::lineage::allows(&rule.allowed, &verdict.judged) {
        return Ok(None);
    }
    Ok(Some(crate::render::lineage::sentence(
        &verdict.judged,
        &reference,
    )))
}
