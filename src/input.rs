//! The one input seam: what a user names on the command line — a file, `REV:path`, or a
//! work-tree LFS pointer — opened as the model (or `.wdelta`) it stands for. Every command that
//! takes a model argument opens it here; new kinds of input plug in here and nowhere else.
//!
//! The core only reads bytes; git provides the resolver for revisions and LFS pointers
//! ([`crate::git::resolve`], [`crate::git::side`]).

use std::path::{Path, PathBuf};

use crate::Artifact;
use crate::formats::wdelta::WdeltaFile;
use crate::git::{GitError, ModelSide};

/// What an argument names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// A file on disk (a model, an LFS pointer file, or a `.wdelta`).
    File(PathBuf),
    /// A blob of the repository around the current directory.
    Revision(crate::git::resolve::RevPath),
}

impl Input {
    /// An existing file wins over the `REV:path` reading of the same text (a file name may
    /// contain a colon).
    pub fn parse(spec: &str) -> Input {
        let path = Path::new(spec);
        if !path.exists()
            && let Some(rev_path) = crate::git::resolve::RevPath::parse(spec)
        {
            return Input::Revision(rev_path);
        }
        Input::File(path.to_owned())
    }
}

/// What an input turned out to be.
#[derive(Debug)]
pub enum Opened {
    Model(Artifact),
    Wdelta(OpenedWdelta),
}

/// A validated `.wdelta` file, described rather than identified.
#[derive(Debug)]
pub struct OpenedWdelta {
    pub file: WdeltaFile,
}

#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error(transparent)]
    Core(#[from] crate::Error),
    #[error(transparent)]
    Git(#[from] GitError),
    /// The input was found but holds no readable model (an absent LFS object, a file of
    /// another kind); the message says which and what to do.
    #[error("{name}: {message}")]
    NoModel { name: String, message: String },
    /// The input looks like a model but does not parse; the message names it.
    #[error("{0}")]
    Unreadable(String),
    #[error(transparent)]
    Values(#[from] crate::values::ValuesError),
}

/// Opens what `spec` names: a model, or a `.wdelta` (files only).
pub fn open(spec: &str) -> Result<Opened, InputError> {
    match Input::parse(spec) {
        Input::File(path) => {
            if !path.is_dir()
                && let Some(file) = crate::read::read_wdelta(&path)?
            {
                return Ok(Opened::Wdelta(OpenedWdelta { file }));
            }
            open_file(&path).map(Opened::Model)
        }
        Input::Revision(rev_path) => open_revision(&rev_path).map(Opened::Model),
    }
}

/// Opens what `spec` names as a model (a `.wdelta` is not one).
pub fn open_model(spec: &str) -> Result<Artifact, InputError> {
    match Input::parse(spec) {
        Input::File(path) => open_file(&path),
        Input::Revision(rev_path) => open_revision(&rev_path),
    }
}

/// A model file, or a work-tree LFS pointer (a checkout with `GIT_LFS_SKIP_SMUDGE=1`) read as
/// the model it points to, from the local LFS store.
fn open_file(path: &Path) -> Result<Artifact, InputError> {
    if crate::git::side::read_pointer_file(path).is_some() {
        let name = path.display().to_string();
        return model_of(crate::git::side::model_side_of_file(path), name);
    }
    Ok(crate::read::open_model_path(path)?)
}

/// `REV:path` through the repository around the current directory; LFS pointers are followed
/// to the local object store and only the model's header is read.
fn open_revision(rev_path: &crate::git::resolve::RevPath) -> Result<Artifact, InputError> {
    let cwd = std::env::current_dir().map_err(|e| crate::Error::io(".", e))?;
    let repo = crate::git::open_repo(&cwd)?;
    if !rev_path.is_index() {
        let path = rev_path.repo_path(&repo, &cwd);
        if let Some(side) = crate::git::models::open_at(&repo, &rev_path.rev, &path)? {
            return model_of(side, rev_path.spec.clone());
        }
    }
    let id = rev_path.blob(&repo, &cwd)?;
    let bytes = crate::git::objects::blob_bytes(&repo, id)?;
    let side = crate::git::side::model_artifact_from_blob(&repo, &bytes, &rev_path.spec);
    model_of(side, rev_path.spec.clone())
}

fn model_of(side: ModelSide, name: String) -> Result<Artifact, InputError> {
    match side {
        ModelSide::Model { artifact, .. } => Ok(*artifact),
        ModelSide::Invalid { error, .. } | ModelSide::Unassembled { error } => {
            Err(InputError::Unreadable(error))
        }
        other => Err(InputError::NoModel {
            name,
            message: other.note().unwrap_or_default(),
        }),
    }
}

/// What `spec` names as a model together with all its bytes, for comparing weight values: a
/// file (memory-mapped), a work-tree LFS pointer's object in the local store, or `REV:path`
/// (an LFS object in the local store, or the blob itself). Never downloads anything: an LFS
/// object that is not present locally is an error saying so.
pub fn open_model_with_bytes(
    spec: &str,
) -> Result<(Artifact, crate::values::ModelBytes), InputError> {
    let absent = |pointer: &crate::git::lfs::Pointer| InputError::NoModel {
        name: spec.to_owned(),
        message: format!(
            "LFS object {} is not in the local store; weight values are only read from local \
             objects (fetch it with `git lfs fetch`)",
            pointer.oid
        ),
    };
    match Input::parse(spec) {
        Input::File(path) => match crate::git::side::read_pointer_file(&path) {
            Some(pointer) => {
                let dir = match path.parent() {
                    Some(dir) if !dir.as_os_str().is_empty() => dir,
                    _ => Path::new("."),
                };
                let object = crate::git::open_repo(dir)
                    .ok()
                    .and_then(|repo| crate::git::lfs::present_object(&repo, &pointer))
                    .ok_or_else(|| absent(&pointer))?;
                map_model(&object)
            }
            None => map_model(&path),
        },
        Input::Revision(rev_path) => {
            let cwd = std::env::current_dir().map_err(|e| crate::Error::io(".", e))?;
            let repo = crate::git::open_repo(&cwd)?;
            let id = rev_path.blob(&repo, &cwd)?;
            let bytes = crate::git::objects::blob_bytes(&repo, id)?;
            if let Some(pointer) = crate::git::lfs::Pointer::parse(&bytes) {
                let object = crate::git::lfs::present_object(&repo, &pointer)
                    .ok_or_else(|| absent(&pointer))?;
                return map_model(&object);
            }
            let artifact = crate::read::read_bytes(Path::new(&rev_path.spec), &bytes)?;
            Ok((
                artifact,
                crate::values::ModelBytes::owned(&rev_path.spec, bytes),
            ))
        }
    }
}

/// A model file memory-mapped once: the header is parsed from the same bytes the values are
/// read from.
fn map_model(path: &Path) -> Result<(Artifact, crate::values::ModelBytes), InputError> {
    let bytes = crate::values::ModelBytes::map(path)?;
    let artifact = crate::read::read_bytes(path, bytes.bytes())?;
    Ok((artifact, bytes))
}
