//! Where a multi-file model's files come from: the file system, or a git tree.

use crate::artifact::Artifact;
use crate::error::ShardError;

/// A directory that holds a model's files.
pub(crate) trait Directory {
    /// How a file of the directory is named in messages (a path, or `REV:path`).
    fn label(&self, file: &str) -> String;
    /// The names of the regular files in the directory.
    fn file_names(&self) -> Result<Vec<String>, ShardError>;
    /// The bytes of a small file (an index), at most `limit` of them.
    fn read_small(&self, file: &str, limit: u64) -> Result<Vec<u8>, ShardError>;
    /// The header of one model file.
    fn read_model(&self, file: &str) -> Result<Artifact, ShardError>;
}
