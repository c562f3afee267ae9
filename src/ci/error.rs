//! The errors of `ci`. Errors of the core, of git and of the policy keep their structure inside.

/// Why a `ci` run could not report.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CiError {
    /// A base or head revision that is not in the repository, typically because a shallow
    /// clone did not fetch it.
    #[error(
        "{rev}: cannot resolve revision ({message}); in a shallow clone, fetch it first \
         (`git fetch --depth=1 origin {rev}`) or check out with `fetch-depth: 0`",
        rev = crate::escape::escape_name(.rev),
        message = crate::escape::escape_name(.message)
    )]
    UnresolvedRevision { rev: String, message: String },
    #[error("cannot serialize the report: {0}")]
    Serialize(#[source] serde_json::Error),
    #[error(transparent)]
    Core(#[from] crate::error::Error),
    #[error(transparent)]
    Git(#[from] crate::git::GitError),
    /// Boxed: the policy's located errors are large, and errors are rare.
    #[error(transparent)]
    Policy(Box<crate::policy::PolicyError>),
}

impl From<crate::policy::PolicyError> for CiError {
    fn from(err: crate::policy::PolicyError) -> Self {
        CiError::Policy(Box::new(err))
    }
}
