//! Opening model files: detect the format from the bytes, hand them to that format's parser.

use std::path::Path;

use crate::artifact::{Artifact, Format};
use crate::error::{Error, Result};
use crate::formats;
use crate::formats::wdelta::WdeltaFile;

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

/// What some bytes turned out to be.
#[derive(Debug)]
pub enum Classified {
    Model(Box<Artifact>),
    /// The magic bytes of a model format, but the header does not parse.
    Invalid {
        format: Format,
        error: Error,
    },
    /// Neither GGUF nor safetensors.
    Unknown,
}

/// Detects the format of `bytes` and parses them when they are a model (`path` only names the
/// file in errors).
pub fn classify_bytes(path: &Path, bytes: &[u8]) -> Classified {
    let Some(format) = formats::detect(bytes) else {
        return Classified::Unknown;
    };
    match read_bytes(path, bytes) {
        Ok(artifact) => Classified::Model(Box::new(artifact)),
        Err(error) => Classified::Invalid { format, error },
    }
}

/// [`classify_bytes`] for a file on disk, of which only the header pages are read.
pub fn classify_file(path: &Path) -> Classified {
    match read_file(path) {
        Ok(artifact) => Classified::Model(Box::new(artifact)),
        Err(Error::UnknownFormat { .. }) => Classified::Unknown,
        Err(error) => {
            let format = match &error {
                Error::Safetensors { .. } => Format::Safetensors,
                _ => Format::Gguf,
            };
            Classified::Invalid { format, error }
        }
    }
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

/// A `.wdelta` file (recognized by its magic), parsed and validated: `inspect`, `id` and
/// `textconv` describe deltas rather than parse them as models. None for anything else.
pub fn read_wdelta(path: &Path) -> Result<Option<WdeltaFile>> {
    use std::io::Read;
    let Ok(mut file) = std::fs::File::open(path) else {
        return Ok(None);
    };
    let mut magic = [0u8; 8];
    let n = file.read(&mut magic).map_err(|e| Error::io(path, e))?;
    if !formats::wdelta::is_wdelta(&magic[..n]) {
        return Ok(None);
    }
    // SAFETY: read-only map, dropped before returning.
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io(path, e))?;
    WdeltaFile::parse(&map)
        .map(Some)
        .map_err(|source| Error::Wdelta {
            path: path.to_owned(),
            source: Box::new(source),
        })
}
