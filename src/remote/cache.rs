//! Headers read from a server, kept by content: a file per LFS oid holding the prefix of the
//! object that holds its header, so a second look at the same object needs no network. The
//! directory is the caller's (the git adapter puts it in the repository's git directory, never
//! inside `lfs/objects`, where git-lfs would take a prefix for a whole object).

use std::path::PathBuf;

/// A cache directory of header prefixes, by oid.
#[derive(Debug, Clone)]
pub struct HeaderCache {
    dir: PathBuf,
}

impl HeaderCache {
    pub fn new(dir: PathBuf) -> HeaderCache {
        HeaderCache { dir }
    }

    /// Where the header of `oid` (64 lowercase hex digits) is kept.
    pub fn path(&self, oid: &str) -> PathBuf {
        self.dir.join(&oid[..2]).join(oid)
    }

    /// The cached prefix of object `oid` of `size` bytes, if there is one that fits it.
    pub fn get(&self, oid: &str, size: u64) -> Option<Vec<u8>> {
        let bytes = std::fs::read(self.path(oid)).ok()?;
        (bytes.len() as u64 <= size).then_some(bytes)
    }

    /// Keeps `prefix` for `oid`, atomically (a reader never sees half a file). Failing to
    /// cache is not an error for the caller: the header was read all the same.
    pub fn put(&self, oid: &str, prefix: &[u8]) -> Result<(), crate::error::Error> {
        let path = self.path(oid);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| crate::error::Error::io(parent, e))?;
        }
        crate::fsutil::write_bytes_atomically(&path, prefix)
    }
}
