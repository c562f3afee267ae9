//! Errors of the git adapter: what a repository, a revision or a git process refused, phrased
//! for the user.

use std::path::PathBuf;

use crate::escape::{escape_name, quoted, shown, shown_path, terminal_safe};

/// `REV:path` names something that is not a file (`found`: "does not exist", "is a
/// directory", ...). `spec`, `path` and `place` are raw (shown escaped here); `detail` is
/// composed with its names shown escaped.
#[derive(Debug, thiserror::Error)]
#[error(
    "{}: {} {found} in {}{detail}",
    escape_name(.spec),
    escape_name(.path),
    escape_name(.place)
)]
pub struct NotAFile {
    pub spec: String,
    pub path: String,
    pub found: String,
    pub place: String,
    pub detail: String,
}

/// Errors of the git adapter, phrased for the user.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error(
        "{}: not inside a git repository ({})",
        shown_path(.dir),
        escape_name(.message)
    )]
    Open { dir: PathBuf, message: String },
    #[error(
        "{}: cannot resolve revision ({})",
        escape_name(.rev),
        escape_name(.message)
    )]
    Revision { rev: String, message: String },
    #[error(
        "{}: cannot read git object ({})",
        escape_name(.what),
        escape_name(.message)
    )]
    Object { what: String, message: String },
    #[error(
        "{}: cannot read the git index ({})",
        shown_path(.path),
        escape_name(.message)
    )]
    Index { path: PathBuf, message: String },
    #[error("{}: the repository has no work tree", shown_path(.0))]
    Bare(PathBuf),
    #[error("{}: {source}", shown_path(.path))]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("`git {}` failed: {}", escape_name(.args), terminal_safe(.message))]
    Command { args: String, message: String },
    #[error("git diff takes at most two revisions")]
    TooManyRevisions,
    #[error("pathspec {}: {source}", quoted(.spec))]
    Pathspec {
        spec: String,
        #[source]
        source: globset::Error,
    },
    #[error(transparent)]
    NotAFile(Box<NotAFile>),
    #[error("neither HOME nor XDG_CONFIG_HOME is set: cannot locate the global attributes file")]
    NoHome,
    #[error("there is no remote `{}`", escape_name(.name))]
    NoRemote { name: String },
    #[error("cannot read the URL of remote `{}`", escape_name(.name))]
    RemoteUrl { name: String },
    #[error(transparent)]
    Remote(#[from] crate::remote::RemoteError),
    /// Reading a model (or a file) the repository led to.
    #[error(transparent)]
    Core(#[from] crate::error::Error),
    /// Reading, applying or writing a delta of the store.
    #[error(transparent)]
    Delta(Box<crate::delta::DeltaError>),
    #[error(transparent)]
    ParentNotFound(Box<ParentNotFound>),
}

impl From<crate::delta::DeltaError> for GitError {
    fn from(e: crate::delta::DeltaError) -> GitError {
        GitError::Delta(Box::new(e))
    }
}

/// `delta store`/`restore`: no model with the hash a delta names was found.
#[derive(Debug, thiserror::Error)]
#[error(
    "{}: no model with the parent hash {hash} was found ({}); give the parent with \
     --parent FILE|REV:path{}",
    shown_path(.delta),
    searched_phrase(*searched),
    absent_phrase(absent)
)]
pub struct ParentNotFound {
    pub delta: PathBuf,
    pub hash: String,
    /// How many tracked model files were searched; None outside a repository.
    pub searched: Option<usize>,
    /// Tracked files whose LFS object is not present locally.
    pub absent: Vec<String>,
}

fn searched_phrase(searched: Option<usize>) -> String {
    match searched {
        None => "not inside a git repository, so there was nothing to search".to_string(),
        Some(n) => format!("searched {n} tracked model files at HEAD and in its history"),
    }
}

fn absent_phrase(absent: &[String]) -> String {
    if absent.is_empty() {
        String::new()
    } else {
        format!(
            "\nLFS objects not present locally (git lfs fetch --all would get them): {}",
            absent
                .iter()
                .map(|a| shown(a))
                .collect::<Vec<_>>()
                .join(", ")
        )
    }
}

/// Why textconv's `--tensor-hashes` rendering has no tensor digests (its `tensor-hashes: none
/// (…)` line).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NoTensorHashes {
    /// Only the header is here (an absent LFS object, a header from the LFS server).
    #[error("the model's data is not on this machine")]
    NotHere,
    /// The model ends before its tensor data does.
    #[error("the model is incomplete")]
    Incomplete,
    /// Reading the data failed: the message, with git's temporary file name made stable.
    #[error("{0}")]
    Unreadable(String),
}
