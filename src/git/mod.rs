//! Git integration: textconv, external diff driver, installer, and the gix fast path.
//!
//! git hands textconv and external diff drivers the *smudged* content of a side, so for an LFS
//! file it first writes the whole model to a temporary file. The fast path ([`repo`]) avoids
//! that: it reads each side's blob with gix, follows LFS pointers ([`lfs`]) to the local object
//! store and parses only the header bytes.

pub mod cli;
pub mod driver;
pub mod install;
pub mod lfs;
pub mod repo;
pub mod textconv;

use std::path::PathBuf;

/// Errors of the git adapter, phrased for the user.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("{dir}: not inside a git repository ({message})")]
    Open { dir: PathBuf, message: String },
    #[error("{rev}: cannot resolve revision ({message})")]
    Revision { rev: String, message: String },
    #[error("{what}: cannot read git object ({message})")]
    Object { what: String, message: String },
    #[error("{path}: cannot read the git index ({message})")]
    Index { path: PathBuf, message: String },
    #[error("{0}: the repository has no work tree")]
    Bare(PathBuf),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("`git {args}` failed: {message}")]
    Command { args: String, message: String },
    #[error("{0}")]
    Usage(String),
}

impl From<GitError> for crate::Error {
    fn from(err: GitError) -> Self {
        match err {
            GitError::Io { path, source } => crate::Error::Io { path, source },
            other => crate::Error::Other(other.to_string()),
        }
    }
}

/// Whether `path` names a model file by its extension (walking trees must not read every blob;
/// the parsers detect the actual format by magic bytes).
pub fn is_model_path(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    let Some((_, ext)) = name.rsplit_once('.') else {
        return false;
    };
    ["gguf", "safetensors", "wdelta"]
        .iter()
        .any(|known| ext.eq_ignore_ascii_case(known))
}

#[cfg(test)]
mod tests {
    #[test]
    fn model_paths_by_extension() {
        assert!(super::is_model_path("models/a.gguf"));
        assert!(super::is_model_path("A.SafeTensors"));
        assert!(super::is_model_path("x.wdelta"));
        assert!(!super::is_model_path("gguf"));
        assert!(!super::is_model_path("dir.gguf/readme.md"));
        assert!(!super::is_model_path("model.gguf.txt"));
    }
}
