//! Errors of the signing adapter: what could not be read (a bundle, a key, a certificate, a
//! trusted root, the model) or written. A signature that does not verify is not an error but a
//! verdict (see `verify.rs`).

use std::path::PathBuf;

use crate::escape::{escape_name, shown_path};
use crate::formats::oms::OmsError;
use crate::git::GitError;

/// Everything that stops `sign` or `verify` before a verdict.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SigningError {
    #[error("{}: {source}", shown_path(.path))]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: not a readable OMS signature: {error}", shown_path(.path))]
    Bundle { path: PathBuf, error: OmsError },
    #[error("{}: not a usable {what}: {}", shown_path(.path), escape_name(.message))]
    Material {
        path: PathBuf,
        what: &'static str,
        message: String,
    },
    #[error("{}: {}", shown_path(.path), escape_name(.message))]
    Model { path: PathBuf, message: String },
    #[error(
        "{}: the signing certificate's key is not the private key's (give the certificate \
         issued for this key)",
        shown_path(.certificate)
    )]
    KeyMismatch { certificate: PathBuf },
    #[error(
        "{}: {}",
        escape_name(.name),
        "needs its LFS object to be hashed (the serialization is not files with sha256, where \
         the pointer's oid is the digest); fetch it with git lfs pull"
    )]
    NeedsObject { name: String },
    #[error(
        "{}: a symbolic link; give --allow-symlinks to sign what it points to",
        escape_name(.name)
    )]
    Symlink { name: String },
    #[error("{}: {reason}", escape_name(.name))]
    Special { name: String, reason: &'static str },
    #[error(transparent)]
    Git(#[from] GitError),
    #[error(transparent)]
    Core(#[from] crate::error::Error),
}

pub(crate) type Result<T, E = SigningError> = std::result::Result<T, E>;

pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> SigningError {
    let path = path.into();
    move |source| SigningError::Io { path, source }
}
