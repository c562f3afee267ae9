//! The current directory, for commands that work on the repository around it.

use super::error::Result;

/// The current directory.
pub(super) fn cwd() -> Result<std::path::PathBuf> {
    std::env::current_dir().map_err(|e| crate::error::Error::io(".", e).into())
}
