//! One side of a comparison as far as it can be read without smudging: a parsed model, an LFS
//! pointer whose object is not here, a file that is no model, one that does not parse, or a
//! symbolic link (reported with its target, never followed). LFS pointers lead to the local
//! object store, of which only the header pages are read.

use std::path::Path;

use super::GitError;
use super::changes::FileChange;
use super::lfs::{self, Pointer};
use super::objects::{blob_bytes, open_repo};
use crate::Artifact;
use crate::digest::{sha256_file, sha256_hex};
use crate::read::Classified;

/// One side of a comparison, as far as it could be read without smudging.
#[derive(Debug, Clone)]
pub enum ModelSide {
    /// A parsed model; `lfs` is the pointer it was reached through, if any. `from_server`:
    /// the header was read from the LFS server (or its cache) rather than a local object, so it
    /// was not verified against the oid, which hashes the whole file.
    Model {
        artifact: Box<Artifact>,
        lfs: Option<Pointer>,
        from_server: bool,
    },
    /// An LFS pointer whose object is not in the local store (not fetched, pruned, or
    /// checked out with `GIT_LFS_SKIP_SMUDGE=1`). `remote`: why its header could not be read
    /// from the LFS server either, when that was tried.
    Absent {
        pointer: Pointer,
        remote: Option<String>,
    },
    /// Not a GGUF or safetensors file.
    NotModel {
        size: u64,
        sha256: String,
        lfs: Option<Pointer>,
    },
    /// Looks like a model (magic bytes) but does not parse.
    Invalid {
        size: u64,
        error: String,
        lfs: Option<Pointer>,
    },
    /// A symbolic link (committed, or in the work tree): not a file, so not read; its target
    /// may lie anywhere.
    Link { target: String },
    /// A multi-file model whose files could not be read as one model (a part missing, absent
    /// or not fitting the others); the error names the file.
    Unassembled { error: String },
}

/// See [`ModelSide::json`].
#[derive(Debug, Clone, serde::Serialize)]
pub struct SideJson {
    pub kind: &'static str,
    pub format: Option<&'static str>,
    pub structural_hash: Option<String>,
    pub lfs_oid: Option<String>,
    pub size: u64,
    pub note: Option<String>,
    /// For a model: "local", or "lfs-server" when its header was read from the LFS server
    /// (not verified against the oid).
    pub header_source: Option<&'static str>,
}

impl ModelSide {
    pub fn artifact(&self) -> Option<&Artifact> {
        match self {
            ModelSide::Model { artifact, .. } => Some(artifact),
            _ => None,
        }
    }

    pub fn pointer(&self) -> Option<&Pointer> {
        match self {
            ModelSide::Model { lfs, .. }
            | ModelSide::NotModel { lfs, .. }
            | ModelSide::Invalid { lfs, .. } => lfs.as_ref(),
            ModelSide::Absent { pointer, .. } => Some(pointer),
            ModelSide::Link { .. } | ModelSide::Unassembled { .. } => None,
        }
    }

    /// The size of the content: the LFS object's size for a pointer, else the file's.
    pub fn size(&self) -> u64 {
        if let Some(p) = self.pointer() {
            return p.size;
        }
        match self {
            ModelSide::Model { artifact, .. } => artifact.layout.file_size,
            ModelSide::NotModel { size, .. } | ModelSide::Invalid { size, .. } => *size,
            ModelSide::Absent { pointer, .. } => pointer.size,
            ModelSide::Link { target } => target.len() as u64,
            ModelSide::Unassembled { .. } => 0,
        }
    }

    /// "model", "absent" (LFS object not present locally), "not-model", "invalid" (including a
    /// multi-file model whose files do not fit together) or "link" (a symbolic link).
    pub fn kind(&self) -> &'static str {
        match self {
            ModelSide::Model { .. } => "model",
            ModelSide::Absent { .. } => "absent",
            ModelSide::NotModel { .. } => "not-model",
            ModelSide::Invalid { .. } | ModelSide::Unassembled { .. } => "invalid",
            ModelSide::Link { .. } => "link",
        }
    }

    /// The JSON view of a side in the reports of `git diff --json` and `ci --json`.
    pub fn json(&self) -> SideJson {
        let artifact = self.artifact();
        SideJson {
            kind: self.kind(),
            format: artifact.map(|a| a.format.name()),
            structural_hash: artifact.map(crate::identity::structural_hash),
            lfs_oid: self.pointer().map(|p| p.oid.clone()),
            size: self.size(),
            note: self.note(),
            header_source: match self {
                ModelSide::Model {
                    from_server: true, ..
                } => Some("lfs-server"),
                ModelSide::Model { .. } => Some("local"),
                _ => None,
            },
        }
    }

    /// For a model whose header came from the LFS server: the line that says so.
    pub fn origin_note(&self) -> Option<String> {
        match self {
            ModelSide::Model {
                from_server: true,
                lfs: Some(pointer),
                ..
            } => Some(format!(
                "header of LFS object sha256:{} read from the LFS server, not verified \
                 against its oid",
                pointer.oid
            )),
            ModelSide::Model {
                from_server: true,
                lfs: None,
                ..
            } => Some(
                "headers of some of its files read from the LFS server, not verified against \
                 their oids"
                    .to_owned(),
            ),
            _ => None,
        }
    }

    /// One line describing a side that is not a parsed model (None for a model).
    pub fn note(&self) -> Option<String> {
        match self {
            ModelSide::Model { .. } => None,
            ModelSide::Absent {
                pointer,
                remote: None,
            } => Some(format!(
                "LFS object sha256:{} ({} bytes) is not present locally; run `git lfs fetch` \
                 (or `git lfs pull`) to compare its structure",
                pointer.oid, pointer.size
            )),
            ModelSide::Absent {
                pointer,
                remote: Some(why),
            } => Some(format!(
                "LFS object sha256:{} ({} bytes) is not present locally and its header could \
                 not be read from the LFS server: {why}",
                pointer.oid, pointer.size
            )),
            ModelSide::NotModel { size, sha256, .. } => Some(format!(
                "not a GGUF or safetensors file ({size} bytes, sha256:{sha256})"
            )),
            ModelSide::Invalid { size, error, .. } => {
                Some(format!("unreadable model file ({size} bytes): {error}"))
            }
            ModelSide::Link { target } => Some(format!(
                "a symbolic link to {target}, not a file (links are not followed)"
            )),
            ModelSide::Unassembled { error } => {
                Some(format!("its files do not read as one model: {error}"))
            }
        }
    }
}

impl FileChange {
    /// The old side as a model, or None for an added file.
    pub fn old_side(
        &self,
        repo: &gix::Repository,
        old_rev: &str,
    ) -> Result<Option<ModelSide>, GitError> {
        if self.old_link {
            return link_side(repo, self.old_id);
        }
        blob_side(repo, self.old_id, self.old_path.as_deref(), old_rev)
    }

    /// The new side as a model, or None for a removed file.
    pub fn new_side(
        &self,
        repo: &gix::Repository,
        new_rev: &str,
    ) -> Result<Option<ModelSide>, GitError> {
        if self.new_link {
            if let Some(file) = &self.new_worktree {
                let target = std::fs::read_link(file).map_err(|source| GitError::Io {
                    path: file.clone(),
                    source,
                })?;
                return Ok(Some(ModelSide::Link {
                    target: target.to_string_lossy().into_owned(),
                }));
            }
            return link_side(repo, self.new_id);
        }
        if let Some(file) = &self.new_worktree {
            return Ok(Some(model_side_from_file(Some(repo), file)));
        }
        blob_side(repo, self.new_id, self.new_path.as_deref(), new_rev)
    }
}

/// The side of a committed symbolic link whose blob is `id`.
fn link_side(
    repo: &gix::Repository,
    id: Option<gix::ObjectId>,
) -> Result<Option<ModelSide>, GitError> {
    let Some(id) = id else {
        return Ok(None);
    };
    Ok(Some(ModelSide::Link {
        target: super::objects::link_target(repo, id)?,
    }))
}

/// The side of blob `id` at `path` in `rev` (named `REV:path` in messages), if there is one.
fn blob_side(
    repo: &gix::Repository,
    id: Option<gix::ObjectId>,
    path: Option<&str>,
    rev: &str,
) -> Result<Option<ModelSide>, GitError> {
    let (Some(id), Some(path)) = (id, path) else {
        return Ok(None);
    };
    let bytes = blob_bytes(repo, id)?;
    Ok(Some(model_artifact_from_blob(
        repo,
        &bytes,
        &format!("{rev}:{path}"),
    )))
}

/// Turns git's blob for `path` (`REV:path`, used in messages) into a model side: an LFS
/// pointer is resolved to the local object (mmapped, only its header read), anything else is
/// parsed from the blob bytes.
pub fn model_artifact_from_blob(repo: &gix::Repository, bytes: &[u8], path: &str) -> ModelSide {
    if let Some(pointer) = Pointer::parse(bytes) {
        return from_pointer(Some(repo), pointer);
    }
    from_bytes(Path::new(path), bytes, None)
}

/// Reads a file that may be a model, or an LFS pointer to one (a work tree checked out with
/// `GIT_LFS_SKIP_SMUDGE=1`, or the pointer git hands a textconv when smudging is skipped).
/// Without a repository, pointers cannot be resolved and are reported as absent.
pub fn model_side_from_file(repo: Option<&gix::Repository>, file: &Path) -> ModelSide {
    let meta = match std::fs::metadata(file) {
        Ok(meta) => meta,
        Err(e) => {
            return ModelSide::Invalid {
                size: 0,
                error: format!("{}: {e}", file.display()),
                lfs: None,
            };
        }
    };
    if !meta.is_file() {
        return ModelSide::Invalid {
            size: 0,
            error: format!(
                "{}: is not a regular file (a device, FIFO or socket), expected a model file",
                file.display()
            ),
            lfs: None,
        };
    }
    if meta.len() < lfs::MAX_POINTER_SIZE as u64
        && let Ok(bytes) = std::fs::read(file)
    {
        if let Some(pointer) = Pointer::parse(&bytes) {
            return from_pointer(repo, pointer);
        }
        return from_bytes(file, &bytes, None);
    }
    from_path(file, meta.len(), None, None)
}

/// Like [`model_side_from_file`], opening a repository only when `file` is an LFS pointer:
/// the one of the current directory (where git runs drivers), else the one holding `file`.
pub fn model_side_of_file(file: &Path) -> ModelSide {
    let Some(pointer) = read_pointer_file(file) else {
        return model_side_from_file(None, file);
    };
    let dirs = [Some(Path::new(".")), file.parent()];
    for dir in dirs.into_iter().flatten() {
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        if let Ok(repo) = open_repo(dir)
            && lfs::present_object(&repo, &pointer).is_some()
        {
            return from_pointer(Some(&repo), pointer);
        }
    }
    ModelSide::Absent {
        pointer,
        remote: None,
    }
}

/// The LFS pointer in `file`, if it holds one (only small files are read).
pub fn read_pointer_file(file: &Path) -> Option<Pointer> {
    let meta = std::fs::metadata(file).ok()?;
    if !meta.is_file() || meta.len() >= lfs::MAX_POINTER_SIZE as u64 {
        return None;
    }
    Pointer::parse(&std::fs::read(file).ok()?)
}

fn from_pointer(repo: Option<&gix::Repository>, pointer: Pointer) -> ModelSide {
    match repo.and_then(|r| lfs::present_object(r, &pointer)) {
        Some(object) => {
            let size = pointer.size;
            let sha = pointer.oid.clone();
            from_path(&object, size, Some(sha), Some(pointer))
        }
        None => ModelSide::Absent {
            pointer,
            remote: None,
        },
    }
}

fn from_bytes(path: &Path, bytes: &[u8], lfs: Option<Pointer>) -> ModelSide {
    let size = bytes.len() as u64;
    match crate::read::classify_bytes(path, bytes) {
        Classified::Model(artifact) => ModelSide::Model {
            artifact,
            lfs,
            from_server: false,
        },
        Classified::Invalid { error, .. } => ModelSide::Invalid {
            size,
            error: error.to_string(),
            lfs,
        },
        Classified::Unknown => ModelSide::NotModel {
            size,
            sha256: sha256_hex(bytes),
            lfs,
        },
    }
}

/// Parses a file on disk (mmapped by the core, header pages only). `sha256` is known for LFS
/// objects; otherwise it is computed only when the file turns out not to be a model.
fn from_path(path: &Path, size: u64, sha256: Option<String>, lfs: Option<Pointer>) -> ModelSide {
    match crate::read::classify_file(path) {
        Classified::Model(artifact) => ModelSide::Model {
            artifact,
            lfs,
            from_server: false,
        },
        Classified::Invalid { error, .. } => ModelSide::Invalid {
            size,
            error: error.to_string(),
            lfs,
        },
        Classified::Unknown => {
            let sha256 = match sha256 {
                Some(s) => s,
                None => sha256_file(path).unwrap_or_else(|e| format!("<{}: {e}>", path.display())),
            };
            ModelSide::NotModel { size, sha256, lfs }
        }
    }
}
