//! One side of a comparison as far as it can be read without smudging: a parsed model, an LFS
//! pointer whose object is not here, a file that is no model, one that does not parse, or a
//! symbolic link (reported with its target, never followed). [`super::reader`] reads them.

use super::lfs::Pointer;
use crate::Artifact;

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
