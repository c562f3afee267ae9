//! The bytes of a model file for value comparison: memory-mapped (or held, for a blob read from
//! git), with tensor ranges checked against the real length, and pages released once read.

use std::path::{Path, PathBuf};

use super::ValuesError;

enum Storage {
    Mapped(crate::mapped::GuardedMap),
    Owned(Vec<u8>),
    Empty,
}

/// A whole model file's bytes, named for errors.
pub struct ModelBytes {
    name: PathBuf,
    storage: Storage,
}

impl ModelBytes {
    /// Maps `path` read-only. Only the pages of the tensors that are compared get read.
    pub fn map(path: &Path) -> Result<ModelBytes, ValuesError> {
        let io = |source| ValuesError::Io {
            path: path.to_owned(),
            source,
        };
        // Checked before opening: opening a FIFO named like a model would block.
        if !std::fs::metadata(path).map_err(io)?.is_file() {
            return Err(io(std::io::Error::other(
                "is not a regular file (a directory, device, FIFO or socket), expected a model file",
            )));
        }
        let file = std::fs::File::open(path).map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        let storage = if len == 0 {
            Storage::Empty
        } else {
            Storage::Mapped(crate::mapped::GuardedMap::map(&file, path).map_err(io)?)
        };
        Ok(ModelBytes {
            name: path.to_owned(),
            storage,
        })
    }

    /// Bytes already in memory (a blob), named `name` in errors.
    pub fn owned(name: impl Into<PathBuf>, bytes: Vec<u8>) -> ModelBytes {
        ModelBytes {
            name: name.into(),
            storage: Storage::Owned(bytes),
        }
    }

    pub fn name(&self) -> &Path {
        &self.name
    }

    pub fn bytes(&self) -> &[u8] {
        match &self.storage {
            Storage::Mapped(map) => map,
            Storage::Owned(bytes) => bytes,
            Storage::Empty => &[],
        }
    }

    /// The `length` bytes at `offset` of tensor `tensor`, or an error saying the header points
    /// outside the file.
    pub fn range(&self, tensor: &str, offset: u64, length: u64) -> Result<&[u8], ValuesError> {
        let bytes = self.bytes();
        let end = offset.checked_add(length);
        match end {
            Some(end) if end <= bytes.len() as u64 => Ok(&bytes[offset as usize..end as usize]),
            _ => Err(ValuesError::OutsideFile {
                path: self.name.clone(),
                tensor: tensor.to_owned(),
                begin: offset,
                end: offset.saturating_add(length),
                file_size: bytes.len() as u64,
            }),
        }
    }

    /// Tells the kernel the pages wholly inside `range` (a sub-slice of [`Self::bytes`]) are
    /// no longer needed by this process: they leave its resident set (the page cache keeps
    /// them), so memory stays bounded however large the model.
    pub fn release(&self, range: &[u8]) {
        let Storage::Mapped(map) = &self.storage else {
            return;
        };
        const PAGE: usize = 4096;
        let base = map.as_ptr() as usize;
        let start = range.as_ptr() as usize - base;
        let end = start + range.len();
        let (start, end) = (start.div_ceil(PAGE) * PAGE, end / PAGE * PAGE);
        if end > start {
            map.release(start, end - start);
        }
    }
}
