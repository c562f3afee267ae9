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
    tmp.as_file().sync_all().map_err(|e| Error::io(path, e))?;
    tmp.persist(path).map_err(|e| Error::io(path, e.error))?;
    Ok(())
}

/// Writes `bytes` to `path` atomically.
pub fn write_bytes_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomically(path, |out| out.write_all(bytes))
}
