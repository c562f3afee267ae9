//! `signature`: a file judged by the OpenSSF model signature (`model.sig`) that covers it —
//! the nearest one in its folder or a folder above, read from the same place as the file (a
//! commit, the index, the work tree). The signature must verify against whom the rule trusts,
//! and list the file with the digest it has: a file changed since it was signed, one the
//! signature does not list, or one no signature covers is a violation. An LFS pointer stands
//! for its object (with `files` and `sha256`, its oid is the digest signed), so the check reads
//! no weights where git-lfs did not fetch them.

use std::path::{Path, PathBuf};

use super::config::{Rule, SignatureRule};
use super::conversion::{reference_bytes, subject_bytes};
use super::error::{FileReason, PolicyError};
use super::subject::{Origin, Subject};
use crate::escape::shown;
use crate::git::Pointer;
use crate::signing::{FileState, Trust, file_state, pointer_state, signer_of};

type Result<T, E = PolicyError> = std::result::Result<T, E>;

/// What the rule expects, as a violation says it.
pub(crate) fn expected(rule: &SignatureRule) -> String {
    let whom = if let Some(key) = &rule.public_key {
        format!("the key in {}", shown(key))
    } else if !rule.certificate_chain.is_empty() {
        format!(
            "a certificate issued under {}",
            shown(&rule.certificate_chain.join(", "))
        )
    } else {
        format!(
            "{} (issuer {})",
            shown(rule.identity.as_deref().unwrap_or_default()),
            shown(rule.identity_provider.as_deref().unwrap_or_default())
        )
    };
    format!("signed, as it is, in a {} by {whom}", rule.file)
}

/// What breaks `rule` for the judged file: None when a signature by whom the rule trusts
/// lists it unchanged, else the text of the violation. The signature file itself is judged
/// by its signer only. Multi-file models are judged file by file, as subjects of their own.
pub(crate) fn check(
    policy: &Path,
    source: &Rule,
    subject: &Subject<'_>,
    rule: &SignatureRule,
) -> Result<Option<String>> {
    if matches!(subject.origin, Origin::Model(_) | Origin::Refused(_)) {
        return Ok(None);
    }
    let (dir, name) = match subject.path.rsplit_once('/') {
        Some((dir, name)) => (dir, name),
        None => ("", subject.path.as_str()),
    };
    let Some((signed_dir, sig_path, bytes)) = find_signature(subject, dir, &rule.file)? else {
        return Ok(Some(format!(
            "unsigned: no {} in its folder or any folder above",
            rule.file
        )));
    };
    let signature = match crate::formats::oms::parse(bytes.bytes()) {
        Ok(s) => s,
        Err(e) => {
            return Ok(Some(format!(
                "{} is not a readable model signature: {}",
                shown(&sig_path),
                crate::escape::terminal_safe(&e.to_string())
            )));
        }
    };
    let trust = trust(policy, source, subject, rule)?;
    let signer = match signer_of(&trust, &signature) {
        Ok(signer) => signer.describe(),
        Err(why) => {
            return Ok(Some(format!(
                "{} does not verify: {}",
                shown(&sig_path),
                crate::escape::terminal_safe(&why)
            )));
        }
    };
    // The signature file itself is judged by whom it is from (a commit that re-signs a model
    // with another key brings only it), and by the files it lists: one deleted without
    // re-signing breaks it, though no file of the change is left to say so.
    if name == rule.file {
        let deleted = deleted_resources(subject, &signed_dir, &signature)?;
        return Ok(deleted_text(&deleted, &rule.file, &signer));
    }
    let relative = match signed_dir.as_str() {
        "" => subject.path.clone(),
        d => subject.path[d.len() + 1..].to_owned(),
    };
    let state = match pointer_state(&signature, &relative, stored_pointer(subject)?.as_ref()) {
        Some(state) => state,
        None => match subject_bytes(subject) {
            Ok(bytes) => file_state(&signature, &relative, bytes.bytes()),
            Err(PolicyError::File {
                reason: FileReason::LfsObjectAbsent { .. },
                ..
            }) => FileState::NeedsObject,
            Err(e) => return Err(e),
        },
    };
    let sig = shown(&sig_path);
    Ok(match state {
        FileState::Unchanged => None,
        FileState::Changed => Some(format!("changed since {sig} was signed (by {signer})")),
        FileState::NotCovered => Some(format!("not covered by {sig} (signed by {signer})")),
        FileState::NeedsObject => Some(format!(
            "its LFS object is not here, and {sig} signs its bytes, not its pointer's oid"
        )),
    })
}

/// The files `signature` (in `dir`) lists that are not where it was read from (the commit,
/// the index or the work tree), repository-relative, in the order listed.
fn deleted_resources(
    subject: &Subject<'_>,
    dir: &str,
    signature: &crate::formats::oms::Signature,
) -> Result<Vec<String>> {
    let mut deleted: Vec<String> = Vec::new();
    // Shards list a file once per range.
    let mut seen = std::collections::BTreeSet::new();
    for resource in &signature.manifest.resources {
        let name = resource.key.path.as_str();
        // A single-file model's one resource is the file the signature was made for.
        if name == "." || !seen.insert(name) {
            continue;
        }
        let path = if dir.is_empty() {
            name.to_owned()
        } else {
            format!("{dir}/{name}")
        };
        let present = match &subject.origin {
            Origin::Worktree { repo, file, .. } => {
                let on_disk = match repo.and_then(|r| r.workdir()) {
                    Some(root) => root.join(&path),
                    None => file.parent().map(|d| d.join(name)).unwrap_or_default(),
                };
                std::fs::symlink_metadata(on_disk).is_ok()
            }
            Origin::Blob { repo, tree, .. } => match tree {
                Some(rev) => crate::git::tree_entry(repo, rev, &path)?.is_some(),
                None => {
                    crate::git::index_entry(repo, &path, gix::index::entry::Stage::Unconflicted)?
                        .is_some()
                }
            },
            Origin::Refused(_) | Origin::Model(_) => true,
        };
        if !present {
            deleted.push(path);
        }
    }
    Ok(deleted)
}

/// The violation of a signature whose listed files were deleted, the first few named.
pub(crate) fn deleted_text(deleted: &[String], file: &str, signer: &str) -> Option<String> {
    const NAMED: usize = 5;
    if deleted.is_empty() {
        return None;
    }
    let mut names: Vec<String> = deleted
        .iter()
        .take(NAMED)
        .map(|d| shown(d).into_owned())
        .collect();
    if deleted.len() > NAMED {
        names.push(format!("… {} more", deleted.len() - NAMED));
    }
    Some(format!(
        "{} listed by {file} but deleted (signed by {signer}): re-sign the model",
        names.join(", ")
    ))
}

/// The signature that covers a judged file under its `signature` rule: the signature file's
/// path and who signed it (or why it does not verify). None when no `signature` rule covers
/// the file or no signature file is at or above it. `ci` shows these per model.
pub(crate) fn signature_state(
    policy: &super::config::Policy,
    subject: &Subject<'_>,
) -> Result<Option<(String, std::result::Result<String, String>)>> {
    let Some(eff) = policy.effective(&subject.path) else {
        return Ok(None);
    };
    let Some(rule) = eff.signature else {
        return Ok(None);
    };
    if matches!(subject.origin, Origin::Model(_) | Origin::Refused(_)) {
        return Ok(None);
    }
    let dir = subject.path.rsplit_once('/').map_or("", |(d, _)| d);
    let Some((_, sig_path, bytes)) = find_signature(subject, dir, &rule.value.file)? else {
        return Ok(None);
    };
    let signer = match crate::formats::oms::parse(bytes.bytes()) {
        Ok(signature) => {
            let trust = trust(&policy.source, rule.rule, subject, rule.value)?;
            signer_of(&trust, &signature).map(|s| s.describe())
        }
        Err(e) => Err(e.to_string()),
    };
    Ok(Some((sig_path, signer)))
}

/// The signature files the policy's rules name (`model.sig` by default).
pub(crate) fn signature_files(
    policy: &super::config::Policy,
) -> std::collections::BTreeSet<String> {
    policy
        .rules
        .iter()
        .filter_map(|r| r.settings.signature.as_ref().map(|s| s.file.clone()))
        .collect()
}

/// Where a signature of `path` may be: each of `files` in its folder and every folder above,
/// nearest first. A deleted file is judged through these: the signature that still lists it.
pub(crate) fn signature_paths_above(
    path: &str,
    files: &std::collections::BTreeSet<String>,
) -> Vec<String> {
    let mut out = Vec::new();
    let mut folder = path.rsplit_once('/').map_or("", |(d, _)| d);
    loop {
        for file in files {
            out.push(if folder.is_empty() {
                file.clone()
            } else {
                format!("{folder}/{file}")
            });
        }
        if folder.is_empty() {
            return out;
        }
        folder = folder.rsplit_once('/').map_or("", |(d, _)| d);
    }
}

/// The nearest signature file at or above `dir`: the folder it signs, its path, its bytes.
fn find_signature(
    subject: &Subject<'_>,
    dir: &str,
    file: &str,
) -> Result<Option<(String, String, crate::values::ModelBytes)>> {
    let mut folder = dir.to_owned();
    let mut up = String::new();
    loop {
        let path = if folder.is_empty() {
            file.to_owned()
        } else {
            format!("{folder}/{file}")
        };
        if let Some(bytes) = reference_bytes(subject, &path, &format!("{up}{file}"))? {
            return Ok(Some((folder, path, bytes)));
        }
        if folder.is_empty() {
            return Ok(None);
        }
        folder = folder.rsplit_once('/').map_or("", |(d, _)| d).to_owned();
        up.push_str("../");
    }
}

/// The LFS pointer git stores for the file, when it is one (the blob, or the work-tree file
/// when it is still a pointer).
fn stored_pointer(subject: &Subject<'_>) -> Result<Option<Pointer>> {
    Ok(match &subject.origin {
        Origin::Blob { repo, id, .. } => crate::git::blob_pointer(repo, *id)?,
        Origin::Worktree { file, .. } => std::fs::metadata(file)
            .ok()
            .filter(|m| m.len() < crate::git::MAX_POINTER_SIZE as u64)
            .and_then(|_| std::fs::read(file).ok())
            .and_then(|b| Pointer::parse(&b)),
        Origin::Refused(_) | Origin::Model(_) => None,
    })
}

/// Whom the rule trusts, its files read relative to the repository's root (the current
/// directory outside a repository).
fn trust(
    policy: &Path,
    source: &Rule,
    subject: &Subject<'_>,
    rule: &SignatureRule,
) -> Result<Trust> {
    let root: PathBuf = match &subject.origin {
        Origin::Blob { repo, .. }
        | Origin::Worktree {
            repo: Some(repo), ..
        } => repo.workdir().map(Path::to_path_buf).unwrap_or_default(),
        _ => PathBuf::new(),
    };
    let made = if let Some(key) = &rule.public_key {
        Trust::public_key(&root.join(key))
    } else if !rule.certificate_chain.is_empty() {
        let paths: Vec<PathBuf> = rule
            .certificate_chain
            .iter()
            .map(|c| root.join(c))
            .collect();
        Trust::certificates(&paths)
    } else {
        let trust_root = rule.trust_root.as_ref().map(|r| root.join(r));
        Trust::keyless(
            rule.identity.clone().unwrap_or_default(),
            rule.identity_provider.clone().unwrap_or_default(),
            trust_root.as_deref(),
        )
    };
    made.map_err(|e| PolicyError::SignatureTrust {
        policy: policy.display().to_string(),
        rule: source.number,
        message: e.to_string(),
    })
}
