//! Weight values of a changed model file, for `git diff --values` and `ci --values`: both sides
//! are read only from what is on this machine — blobs, work-tree files, LFS objects in the local
//! store. Nothing is ever downloaded; a side that is not local is reported as skipped, and why.

use std::path::Path;

use super::changes::FileChange;
use super::error::GitError;
use super::lfs::{self, Pointer};
use super::models::{ModelGroup, PartSource};
use super::side::ModelSide;
use crate::values::{ModelBytes, Side, ValueDiff, ValuesError};

/// The value diff of one changed file, or why it was not computed.
pub(super) type ValuesOutcome = Result<ValueDiff, ValuesSkipped>;

/// Why the values of a changed file were not compared.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ValuesSkipped {
    #[error(
        "the {side} side's LFS object sha256:{oid} is not in the local store; weight values are \
         never downloaded (run `git lfs fetch` to compare them)"
    )]
    NotLocal { side: &'static str, oid: String },
    #[error("the {side} side has no blob")]
    NoBlob { side: &'static str },
    #[error(transparent)]
    Git(#[from] GitError),
    #[error(transparent)]
    Values(#[from] ValuesError),
    #[error(transparent)]
    Conversion(#[from] crate::conversion::ConversionError),
    /// The reference could not be read (said once per file it was to be compared with).
    #[error("{0}")]
    Reference(String),
    #[error("the reference {path} is not a file in {snapshot}")]
    NoReference { path: String, snapshot: String },
    #[error("the reference {path} in {snapshot} is not a model: {error}")]
    ReferenceNotModel {
        path: String,
        snapshot: String,
        error: Box<crate::error::Error>,
    },
}

/// A conversion's report, or why it was not made.
pub(super) type ConversionOutcome = Result<Box<crate::conversion::Conversion>, ValuesSkipped>;

/// The reference model (the source a GGUF was converted from) as `snapshot` has it: its LFS
/// object in the local store, its work-tree file, or its blob.
pub(super) fn reference_model(
    repo: &gix::Repository,
    snapshot: super::models::Snapshot<'_>,
    path: &str,
) -> Result<(crate::artifact::Artifact, ModelBytes), ValuesSkipped> {
    use super::models::Snapshot;
    let label = match snapshot {
        Snapshot::Tree { label, .. } => label.to_owned(),
        Snapshot::WorkTree => "the work tree".to_owned(),
        Snapshot::Index => "the index".to_owned(),
    };
    let missing = || ValuesSkipped::NoReference {
        path: path.to_owned(),
        snapshot: label.clone(),
    };
    let bytes = match snapshot {
        Snapshot::Tree { rev, .. } => {
            let Some(super::objects::Entry::File(id)) =
                super::objects::tree_entry(repo, rev, path)?
            else {
                return Err(missing());
            };
            let blob = super::objects::blob_bytes(repo, id)?;
            match Pointer::parse(&blob) {
                Some(pointer) => local_object(repo, &pointer, "reference")?,
                None => ModelBytes::owned(format!("{rev}:{path}"), blob),
            }
        }
        Snapshot::WorkTree | Snapshot::Index => {
            let file = repo.workdir().ok_or_else(missing)?.join(path);
            if !file.is_file() {
                return Err(missing());
            }
            match super::reader::read_pointer_file(&file) {
                Some(pointer) => local_object(repo, &pointer, "reference")?,
                None => ModelBytes::map(&file)?,
            }
        }
    };
    let artifact = crate::read::read_bytes(Path::new(path), bytes.bytes()).map_err(|error| {
        ValuesSkipped::ReferenceNotModel {
            path: path.to_owned(),
            snapshot: label.clone(),
            error: Box::new(error),
        }
    })?;
    Ok((artifact, bytes))
}

/// The conversion report of a changed GGUF against the reference model it was made from.
pub(super) fn compare_conversion(
    repo: &gix::Repository,
    change: &FileChange,
    new: &ModelSide,
    reference: &(crate::artifact::Artifact, ModelBytes),
    reference_path: &str,
) -> ConversionOutcome {
    if let ModelSide::Absent { pointer, .. } = new {
        return Err(not_local(pointer, "new"));
    }
    let artifact = new
        .artifact()
        .ok_or(ValuesSkipped::NoBlob { side: "new" })?;
    let bytes = side_bytes(
        repo,
        new,
        change.new_id,
        change.new_worktree.as_deref(),
        "new",
    )?;
    let target_name = change.path().to_owned();
    let source_path = repo.workdir().map_or_else(
        || Path::new(reference_path).to_owned(),
        |root| root.join(reference_path),
    );
    let models = crate::conversion::Models {
        source: Side::single(&reference.0, &reference.1),
        source_path: &source_path,
        target: Side::single(artifact, &bytes),
        target_name: &target_name,
    };
    Ok(Box::new(crate::conversion::compare(&models, None)?))
}

/// Compares the values of a changed file whose two sides are models; None when a side is not a
/// model (added, removed, not parsed): there are no values to compare.
pub(super) fn compare_change(
    repo: &gix::Repository,
    change: &FileChange,
    group: Option<&ModelGroup>,
    old: Option<&ModelSide>,
    new: Option<&ModelSide>,
) -> Option<ValuesOutcome> {
    for (side, label) in [(old?, "old"), (new?, "new")] {
        if let ModelSide::Absent { pointer, .. } = side {
            return Some(Err(not_local(pointer, label)));
        }
    }
    let (old_artifact, new_artifact) = (old?.artifact()?, new?.artifact()?);
    if let Some(group) = group {
        return Some(compare_model(repo, group, old_artifact, new_artifact));
    }
    let old_bytes = side_bytes(repo, old?, change.old_id, None, "old");
    let new_bytes = side_bytes(
        repo,
        new?,
        change.new_id,
        change.new_worktree.as_deref(),
        "new",
    );
    let (old_bytes, new_bytes) = match (old_bytes, new_bytes) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(why), _) | (_, Err(why)) => return Some(Err(why)),
    };
    let side = Side::single;
    Some(
        crate::values::compare(
            side(old_artifact, &old_bytes),
            side(new_artifact, &new_bytes),
        )
        .map_err(ValuesSkipped::from),
    )
}

/// The value diff of a multi-file model: each part's bytes from its blob, LFS object or
/// work-tree file, as for single files.
fn compare_model(
    repo: &gix::Repository,
    group: &ModelGroup,
    old: &crate::artifact::Artifact,
    new: &crate::artifact::Artifact,
) -> ValuesOutcome {
    let bytes = |parts: &[PartSource], label: &'static str| -> ValuesOutcomeOf<Vec<ModelBytes>> {
        parts
            .iter()
            .map(|part| match part {
                PartSource::File(path) => match super::reader::read_pointer_file(path) {
                    Some(pointer) => local_object(repo, &pointer, label),
                    None => Ok(ModelBytes::map(path)?),
                },
                PartSource::Blob(id) => {
                    let blob = super::objects::blob_bytes(repo, *id)?;
                    match Pointer::parse(&blob) {
                        Some(pointer) => local_object(repo, &pointer, label),
                        None => Ok(ModelBytes::owned(format!("{label} blob {id}"), blob)),
                    }
                }
            })
            .collect()
    };
    let (old_files, new_files) = (
        bytes(&group.old_parts, "old")?,
        bytes(&group.new_parts, "new")?,
    );
    Ok(crate::values::compare(
        Side {
            artifact: old,
            files: &old_files,
        },
        Side {
            artifact: new,
            files: &new_files,
        },
    )?)
}

type ValuesOutcomeOf<T> = Result<T, ValuesSkipped>;

/// The bytes of one side: its LFS object in the local store, its work-tree file, or its blob.
fn side_bytes(
    repo: &gix::Repository,
    side: &ModelSide,
    blob: Option<gix::ObjectId>,
    worktree: Option<&Path>,
    label: &'static str,
) -> ValuesOutcomeOf<ModelBytes> {
    if let (Some(_), Some(pointer)) = (side.artifact(), side.pointer()) {
        return local_object(repo, pointer, label);
    }
    if let Some(file) = worktree {
        return Ok(ModelBytes::map(file)?);
    }
    let id = blob.ok_or(ValuesSkipped::NoBlob { side: label })?;
    let bytes = super::objects::blob_bytes(repo, id)?;
    Ok(ModelBytes::owned(format!("{label} blob {id}"), bytes))
}

fn local_object(
    repo: &gix::Repository,
    pointer: &Pointer,
    label: &'static str,
) -> ValuesOutcomeOf<ModelBytes> {
    match lfs::present_object(repo, pointer) {
        Some(path) => Ok(ModelBytes::map(&path)?),
        None => Err(not_local(pointer, label)),
    }
}

fn not_local(pointer: &Pointer, side: &'static str) -> ValuesSkipped {
    ValuesSkipped::NotLocal {
        side,
        oid: pointer.oid.clone(),
    }
}
