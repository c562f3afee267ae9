//! Opening model files: detect the format from the bytes, hand them to that format's parser.

use std::path::Path;

use crate::artifact::{Artifact, Format};
use crate::error::{Error, Result};
use crate::formats;

/// Reads a model file. The file is memory-mapped, so only the pages of the header are read
/// even for a multi-gigabyte model.
pub fn read_file(path: &Path) -> Result<Artifact> {
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let meta = file.metadata().map_err(|e| Error::io(path, e))?;
    if meta.is_dir() {
        return Err(Error::io(
            path,
            std::io::Error::other("is a directory, expected a model file"),
        ));
    }
    if meta.len() == 0 {
        return read_bytes(path, &[]);
    }
    // SAFETY: the map is read-only and dropped before returning; a file truncated underneath
    // us is the one hazard, as with every mmap-based reader (ggml's included).
    match unsafe { memmap2::Mmap::map(&file) } {
        Ok(map) => read_bytes(path, &map),
        // Pipes and special files cannot be mapped: read them whole.
        Err(_) => {
            let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
            read_bytes(path, &bytes)
        }
    }
}

/// Parses a model file given as bytes: the whole file, or a prefix holding its header (missing
/// tensor data is reported as truncated). `path` only names the file in errors.
pub fn read_bytes(path: &Path, bytes: &[u8]) -> Result<Artifact> {
    match formats::detect(bytes) {
        Some(Format::Gguf) => formats::gguf::parse(bytes).map_err(|source| Error::Gguf {
            path: path.to_owned(),
            source,
        }),
        Some(Format::Safetensors) => {
            formats::safetensors::parse(bytes).map_err(|source| Error::Safetensors {
                path: path.to_owned(),
                source,
            })
        }
        None => Err(Error::UnknownFormat {
            path: path.to_owned(),
            first_bytes: describe_start(bytes),
        }),
    }
}

/// A file path, or `REV:path` resolved through git when no such file exists. A work-tree file
/// that is an LFS pointer (a checkout with `GIT_LFS_SKIP_SMUDGE=1`) reads as the model it
/// points to, from the local LFS store.
pub fn load(spec: &str) -> Result<Artifact> {
    let path = Path::new(spec);
    if !path.exists() {
        if let Some(result) = crate::git::cli::read_rev_path(spec) {
            return result;
        }
    } else if let Some(result) = crate::git::cli::read_lfs_pointer_file(path) {
        return result;
    }
    read_file(path)
}

fn describe_start(bytes: &[u8]) -> String {
    if bytes.is_empty() {
        return "none: the file is empty".into();
    }
    let head = &bytes[..bytes.len().min(8)];
    head.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A `.wdelta` file (recognized by its magic), mapped whole: `inspect`, `id` and `textconv`
/// describe deltas rather than parse them as models. None for anything else.
pub fn map_if_wdelta(path: &Path) -> Result<Option<memmap2::Mmap>> {
    use std::io::Read;
    let Ok(mut file) = std::fs::File::open(path) else {
        return Ok(None);
    };
    let mut magic = [0u8; 8];
    let n = file.read(&mut magic).map_err(|e| Error::io(path, e))?;
    if !crate::delta::format::is_wdelta(&magic[..n]) {
        return Ok(None);
    }
    // SAFETY: read-only map, dropped by the caller after describing the file.
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io(path, e))?;
    Ok(Some(map))
}
