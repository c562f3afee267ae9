//! File helpers shared by every command that writes: outputs are written to a temporary file in
//! the destination directory and renamed into place, so an interrupted run never leaves a
//! half-written file.

use std::io::Write;
use std::path::Path;

use crate::error::{Error, Result};

/// Writes `path` atomically: `fill` writes the content into a temporary file beside it, which
/// is synced and renamed over `path` only when `fill` succeeds.
pub fn write_atomically<F>(path: &Path, fill: F) -> Result<()>
where
    F: FnOnce(&mut std::io::BufWriter<&std::fs::File>) -> std::io::Result<()>,
{
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let tmp = tempfile::Builder::new()
        .prefix(".weight-inspect-")
        .suffix(".tmp")
        .tempfile_in(dir)
        .map_err(|e| Error::io(dir, e))?;
    {
        let mut out = std::io::BufWriter::with_capacity(1 << 20, tmp.as_file());
        fill(&mut out).map_err(|e| Error::io(path, e))?;
        out.flush().map_err(|e| Error::io(path, e))?;
    }
    // Temporary files are created private (0600); the result gets the permissions of the file
    // it replaces, or those of an ordinary new file.
    let permissions = match std::fs::metadata(path) {
        Ok(existing) => existing.permissions(),
        Err(_) => default_permissions(tmp.as_file()).map_err(|e| Error::io(path, e))?,
    };
    tmp.as_file()
        .set_permissions(permissions)
        .map_err(|e| Error::io(path, e))?;
    tmp.as_file().sync_all().map_err(|e| Error::io(path, e))?;
    tmp.persist(path).map_err(|e| Error::io(path, e.error))?;
    Ok(())
}

/// Writes `bytes` to `path` atomically.
pub fn write_bytes_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomically(path, |out| out.write_all(bytes))
}

#[cfg(unix)]
fn default_permissions(file: &std::fs::File) -> std::io::Result<std::fs::Permissions> {
    use std::os::unix::fs::PermissionsExt;
    let mut permissions = file.metadata()?.permissions();
    permissions.set_mode(0o644);
    Ok(permissions)
}

#[cfg(not(unix))]
fn default_permissions(file: &std::fs::File) -> std::io::Result<std::fs::Permissions> {
    Ok(file.metadata()?.permissions())
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn new_files_are_readable_and_replaced_files_keep_their_mode() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.txt");
        write_bytes_atomically(&path, b"one").unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o644);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        write_bytes_atomically(&path, b"two").unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        let leftovers: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no temporary file left behind");
    }
}
