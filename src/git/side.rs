//! One side of a comparison as far as it can be read without smudging: a parsed model, an LFS
//! pointer whose object is not here, a file that is no model, one that does not parse, or a
//! symbolic link (reported with its target, never followed). [`super::reader`] reads them.

use std::sync::Arc;

use super::error::GitError;
use super::lfs::Pointer;
use crate::artifact::Artifact;
use crate::error::ShardError;
use crate::read::Content;

/// One side of a comparison, as far as it could be read without smudging.
#[derive(Debug)]
pub(crate) enum ModelSide {
    /// Bytes that were read — a blob, a file, a local LFS object, or an object's header read
    /// from the LFS server — and what they are.
    Read {
        content: Content,
        /// The size of the file (of the LFS object, for a pointer).
        size: u64,
        /// The SHA-256 of content that is not a model (for an LFS object, its oid).
        sha256: Option<String>,
        /// The LFS pointer the content was reached through, if any.
        lfs: Option<Pointer>,
        /// The header was read from the LFS server (or its cache) rather than a local object,
        /// so it was not verified against the oid, which hashes the whole file.
        from_server: bool,
    },
    /// An LFS pointer whose object is not in the local store (not fetched, pruned, or
    /// checked out with `GIT_LFS_SKIP_SMUDGE=1`). `remote`: why its header could not be read
    /// from the LFS server either, when that was tried.
    Absent {
        pointer: Pointer,
        remote: Option<RemoteMiss>,
    },
    /// A file that could not be read at all (gone, or not a regular file).
    Unreadable { error: Box<crate::error::Error> },
    /// A symbolic link (committed, or in the work tree): not a file, so not read; its target
    /// may lie anywhere.
    Link { target: String },
    /// A multi-file model whose files could not be read as one model (a part missing, absent
    /// or not fitting the others); the error names the file.
    Unassembled { error: Box<ShardError> },
}

/// See [`ModelSide::json`].
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct SideJson {
    pub kind: &'static str,
    pub format: Option<&'static str>,
    pub structural_hash: Option<String>,
    pub lfs_oid: Option<String>,
    pub size: u64,
    pub note: Option<String>,
    /// For a model: "local", or "lfs-server" when its header was read from the LFS server
    /// (not verified against the oid).
    pub header_source: Option<&'static str>,
    /// For a model: false when it ends before the tensor data its header declares.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub complete: Option<bool>,
    /// What is missing, when not complete.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub incomplete: Option<String>,
}

impl ModelSide {
    /// A model read from bytes on this machine (a file, a blob, a local LFS object).
    pub(crate) fn model(artifact: Artifact, lfs: Option<Pointer>) -> ModelSide {
        let size = lfs.as_ref().map_or(artifact.layout.file_size, |p| p.size);
        ModelSide::local(Content::Model(Box::new(artifact)), size, None, lfs)
    }

    /// Content read from bytes on this machine.
    pub(crate) fn local(
        content: Content,
        size: u64,
        sha256: Option<String>,
        lfs: Option<Pointer>,
    ) -> ModelSide {
        ModelSide::Read {
            content,
            size,
            sha256,
            lfs,
            from_server: false,
        }
    }

    pub(crate) fn content(&self) -> Option<&Content> {
        match self {
            ModelSide::Read { content, .. } => Some(content),
            _ => None,
        }
    }

    pub(crate) fn artifact(&self) -> Option<&Artifact> {
        self.content().and_then(Content::artifact)
    }

    /// The model, taken out of the side.
    pub(crate) fn into_artifact(self) -> Option<Box<Artifact>> {
        match self {
            ModelSide::Read {
                content: Content::Model(artifact),
                ..
            } => Some(artifact),
            _ => None,
        }
    }

    pub(crate) fn pointer(&self) -> Option<&Pointer> {
        match self {
            ModelSide::Read { lfs, .. } => lfs.as_ref(),
            ModelSide::Absent { pointer, .. } => Some(pointer),
            ModelSide::Unreadable { .. }
            | ModelSide::Link { .. }
            | ModelSide::Unassembled { .. } => None,
        }
    }

    /// Whether the model's header came from the LFS server rather than a local object.
    pub(crate) fn header_from_server(&self) -> bool {
        matches!(
            self,
            ModelSide::Read {
                from_server: true,
                ..
            }
        )
    }

    /// The size of the content: the LFS object's size for a pointer, else the file's.
    pub(crate) fn size(&self) -> u64 {
        match self {
            ModelSide::Read { size, .. } => *size,
            ModelSide::Absent { pointer, .. } => pointer.size,
            ModelSide::Link { target } => target.len() as u64,
            ModelSide::Unreadable { .. } | ModelSide::Unassembled { .. } => 0,
        }
    }

    /// "model", "absent" (LFS object not present locally), "not-model", "wdelta" (a weight
    /// delta, described by its header), "invalid" (including a multi-file model whose files do
    /// not fit together, and a `.wdelta` whose header does not read) or "link" (a symbolic
    /// link).
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            ModelSide::Read { content, .. } => match content {
                Content::Model(_) => "model",
                Content::Invalid { .. } => "invalid",
                Content::Other { .. } => "not-model",
                Content::Delta(_) => "wdelta",
                Content::BadDelta { .. } => "invalid",
            },
            ModelSide::Absent { .. } => "absent",
            ModelSide::Unreadable { .. } | ModelSide::Unassembled { .. } => "invalid",
            ModelSide::Link { .. } => "link",
        }
    }

    /// The JSON view of a side in the reports of `git diff --json` and `ci --json`.
    pub(crate) fn json(&self) -> SideJson {
        let artifact = self.artifact();
        SideJson {
            kind: self.kind(),
            format: artifact.map(|a| a.format.name()),
            structural_hash: artifact.map(crate::identity::structural_hash),
            lfs_oid: self.pointer().map(|p| p.oid.clone()),
            size: self.size(),
            note: self.note(),
            header_source: artifact.map(|_| {
                if self.header_from_server() {
                    "lfs-server"
                } else {
                    "local"
                }
            }),
            complete: artifact.map(|a| !a.layout.is_truncated()),
            incomplete: artifact
                .and_then(|a| a.layout.incomplete())
                .map(|i| i.to_string()),
        }
    }

    /// For a model (or a `.wdelta`) whose header came from the LFS server: the line that says
    /// so.
    pub(crate) fn origin_note(&self) -> Option<String> {
        let described =
            self.artifact().is_some() || matches!(self.content(), Some(Content::Delta(_)));
        if !described || !self.header_from_server() {
            return None;
        }
        Some(match self.pointer() {
            Some(pointer) => format!(
                "header of LFS object sha256:{} read from the LFS server, not verified \
                 against its oid",
                pointer.oid
            ),
            None => "headers of some of its files read from the LFS server, not verified \
                     against their oids"
                .to_owned(),
        })
    }

    /// One line describing a side that is not a parsed model (None for a model).
    pub(crate) fn note(&self) -> Option<String> {
        match self {
            ModelSide::Read {
                content,
                size,
                sha256,
                ..
            } => match content {
                Content::Model(_) => None,
                Content::Other { .. } => Some(format!(
                    "not a GGUF, safetensors or PyTorch file ({size} bytes, sha256:{})",
                    sha256.as_deref().unwrap_or_default()
                )),
                Content::Invalid { error, .. } => {
                    Some(format!("unreadable model file ({size} bytes): {error}"))
                }
                Content::Delta(summary) => Some(crate::render::wdelta::summary_line(summary)),
                Content::BadDelta { error } => {
                    Some(format!("unreadable .wdelta file ({size} bytes): {error}"))
                }
            },
            ModelSide::Unreadable { error } => {
                Some(format!("unreadable model file (0 bytes): {error}"))
            }
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
            ModelSide::Link { target } => Some(format!(
                "a symbolic link to {target}, not a file (links are not followed)"
            )),
            ModelSide::Unassembled { error } => {
                Some(format!("its files do not read as one model: {error}"))
            }
        }
    }
}

/// Why the LFS server did not give an object's header.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum RemoteMiss {
    /// The server could not be found, or git's settings for it not read.
    #[error(transparent)]
    Server(Arc<GitError>),
    /// The batch request for the objects failed.
    #[error(transparent)]
    Batch(Arc<crate::remote::RemoteError>),
    /// The server gave no download for the object.
    #[error("{}", object_failure(*code, message))]
    Object { code: u32, message: String },
    /// Reading the header failed.
    #[error(transparent)]
    Header(Arc<crate::remote::RemoteError>),
}

fn object_failure(code: u32, message: &str) -> String {
    let what = match code {
        404 => "the object is not on the LFS server",
        410 => "the object was removed from the LFS server",
        422 => "the LFS server refused the object as invalid",
        401 | 403 => "the LFS server refused access to the object",
        0 => "the LFS server gave no download for the object",
        _ => "the LFS server could not provide the object",
    };
    let message = crate::escape::shown(message);
    match code {
        0 => format!("{what}: {message}"),
        _ if message.is_empty() => format!("{what} (error {code})"),
        _ => format!("{what} (error {code}: {message})"),
    }
}
