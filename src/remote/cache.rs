//! Headers read from a server, kept by content: a file per LFS oid holding the prefix of the
//! object that holds its header, so a second look at the same object needs no network. The
//! directory is the caller's (the git adapter puts it in the repository's git directory, never
//! inside `lfs/objects`, where git-lfs would take a prefix for a whole object).

use std::path::PathBuf;

/// A cache directory of header prefixes, by oid.
#[derive(Debug, Clone)]
pub(crate) struct HeaderCache {
    dir: PathBuf,
}

impl HeaderCache {
    pub(crate) fn new(dir: PathBuf) -> HeaderCache {
        HeaderCache { dir }
    }

    /// Where the header of `oid` (64 lowercase hex digits) is kept.
    pub(crate) fn path(&self, oid: &str) -> PathBuf {
        self.dir.join(&oid[..2]).join(oid)
    }

    /// The cached prefix of object `oid` of `size` bytes, if there is one that fits it. An
    /// entry is only ever written as a regular file no larger than a header: a symbolic link
    /// (to `/dev/zero`, to a file outside the cache), a FIFO, or a file larger than the object
    /// or the header cap (with a window's read-ahead) is not an entry, and is not read (its
    /// size is checked before reading, and the read stops at the cap).
    pub(crate) fn get(&self, oid: &str, size: u64) -> Option<Vec<u8>> {
        // A prefix holds the header and what the last window read past it (at most 1 MiB).
        let limit = size.min(crate::formats::limits::max_header_bytes().saturating_add(2 << 20));
        crate::fsutil::read_regular(&self.path(oid), limit, true).ok()
    }

    /// Keeps `prefix` for `oid`, atomically (a reader never sees half a file). Failing to
    /// cache is not an error for the caller: the header was read all the same.
    pub(crate) fn put(&self, oid: &str, prefix: &[u8]) -> Result<(), crate::error::Error> {
        let path = self.path(oid);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| crate::error::Error::io(parent, e))?;
        }
        crate::fsutil::write_bytes_atomically(&path, prefix)
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::HeaderCache;

    const OID: &str = "ab00000000000000000000000000000000000000000000000000000000000000";

    /// Only a regular file no larger than the object and the header cap is an entry: links
    /// (to a device, or out of the cache), FIFOs and oversized files are misses, found
    /// without reading them.
    #[test]
    fn entries_are_small_regular_files() {
        let dir = tempfile::tempdir().unwrap();
        let cache = HeaderCache::new(dir.path().to_owned());
        let path = cache.path(OID);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();

        std::fs::write(&path, b"header").unwrap();
        assert_eq!(cache.get(OID, 100).as_deref(), Some(&b"header"[..]));
        assert_eq!(cache.get(OID, 3), None, "larger than the object");

        let outside = dir.path().join("outside");
        std::fs::write(&outside, b"header").unwrap();
        for target in [std::path::Path::new("/dev/zero"), outside.as_path()] {
            std::fs::remove_file(&path).unwrap();
            std::os::unix::fs::symlink(target, &path).unwrap();
            assert_eq!(cache.get(OID, 1 << 40), None, "{}", target.display());
        }

        std::fs::remove_file(&path).unwrap();
        let fifo = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        assert_eq!(cache.get(OID, 1 << 40), None, "a FIFO");

        std::fs::remove_file(&path).unwrap();
        let sparse = std::fs::File::create(&path).unwrap();
        sparse.set_len(4 << 30).unwrap();
        assert_eq!(
            cache.get(OID, 8 << 30),
            None,
            "4 GiB, beyond the header cap"
        );
    }
}
