//! The error every command can end with: the union of the library's errors.

/// Any error a command can end with; each adapter's own error keeps its structure up to here
/// (boxed: errors are rare, results are everywhere).
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub(super) struct Error(Box<ErrorKind>);

impl<E: Into<ErrorKind>> From<E> for Error {
    fn from(err: E) -> Self {
        Error(Box::new(err.into()))
    }
}

#[derive(Debug, thiserror::Error)]
pub(super) enum ErrorKind {
    #[error(transparent)]
    Core(#[from] crate::error::Error),
    #[error(transparent)]
    Git(#[from] crate::git::GitError),
    #[error(transparent)]
    Policy(#[from] crate::policy::PolicyError),
    #[error(transparent)]
    Ci(#[from] crate::ci::CiError),
    #[error(transparent)]
    Input(#[from] crate::input::InputError),
    #[error(transparent)]
    Delta(#[from] crate::delta::DeltaError),
    #[error(transparent)]
    Remote(#[from] crate::remote::RemoteError),
    #[error(transparent)]
    Lineage(#[from] crate::lineage::LineageError),
    #[error(transparent)]
    Signing(#[from] crate::signing::SigningError),
}

pub(super) type Result<T, E = Error> = std::result::Result<T, E>;
