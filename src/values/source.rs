//! The bytes of a model file for value comparison: memory-mapped (or held, for a blob read from
//! git), with tensor ranges checked against the real length, and pages released once read.

use std::path::{Path, PathBuf};

use super::error::ValuesError;

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
        // Opened without blocking on a FIFO, and refused unless a regular file (a check before
        // opening would race with a rename).
        let (file, meta) = crate::fsutil::open_regular(path).map_err(io)?;
        let len = meta.len();
        let storage = if len == 0 {
            Storage::Empty
        } else {
            let map = crate::mapped::GuardedMap::map(&file, path).map_err(io)?;
            crate::mapped::pause_point("values-mapped", path);
            Storage::Mapped(map)
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

    /// The file's path.
    pub fn name(&self) -> &Path {
        &self.name
    }

    /// The file's bytes.
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

    /// Where `range` lies in the file's bytes (start, end); None when it is not a sub-slice of
    /// them.
    fn offsets_of(&self, range: &[u8]) -> Option<(usize, usize)> {
        let bytes = self.bytes();
        let start = (range.as_ptr() as usize).checked_sub(bytes.as_ptr() as usize)?;
        let end = start.checked_add(range.len())?;
        (end <= bytes.len()).then_some((start, end))
    }

    /// Tells the kernel the pages wholly inside `range` (a sub-slice of [`Self::bytes`]) are
    /// no longer needed by this process: they leave its resident set (the page cache keeps
    /// them), so memory stays bounded however large the model.
    pub fn release(&self, range: &[u8]) {
        let Storage::Mapped(map) = &self.storage else {
            return;
        };
        // Bytes held elsewhere (a numpy array decoded from the pickle's text) have no pages here.
        if let Some((start, end)) = self.offsets_of(range) {
            map.release(start, end - start);
        }
    }
}

/// Bytes read and not yet released, gathered so that their pages go in a few large releases:
/// each release of a mapping that several threads use interrupts the others to flush their
/// address translations (inter-processor interrupts were a tenth of a value diff's CPU time
/// when every piece was released on its own). What is held stays bounded: released at
/// [`RELEASE_BATCH`] bytes, and the rest when dropped.
pub(super) struct ReleaseBehind<'a> {
    /// (file, start, end): byte offsets in the file's bytes, adjacent ranges merged.
    pending: Vec<(&'a ModelBytes, usize, usize)>,
    held: usize,
}

/// Bytes gathered before they are released.
const RELEASE_BATCH: usize = 16 << 20;

/// Ranges this close are released as one (the padding between two tensors).
const MERGE_GAP: usize = 4096;

impl<'a> ReleaseBehind<'a> {
    pub(super) fn new() -> Self {
        ReleaseBehind {
            pending: Vec::new(),
            held: 0,
        }
    }

    /// Notes that `range`, a sub-slice of `file`'s bytes, has been read.
    pub(super) fn add(&mut self, file: &'a ModelBytes, range: &[u8]) {
        let Some((start, end)) = file.offsets_of(range) else {
            return;
        };
        // The two files of a pair alternate: look for this file's latest range.
        let latest = self
            .pending
            .iter_mut()
            .rev()
            .take(2)
            .find(|p| std::ptr::eq(p.0, file));
        match latest {
            Some((_, _, e)) if start >= *e && start - *e <= MERGE_GAP => *e = end,
            _ => self.pending.push((file, start, end)),
        }
        self.held += range.len();
        if self.held >= RELEASE_BATCH {
            self.flush();
        }
    }

    fn flush(&mut self) {
        for (file, start, end) in self.pending.drain(..) {
            file.release(&file.bytes()[start..end]);
        }
        self.held = 0;
    }
}

impl Drop for ReleaseBehind<'_> {
    fn drop(&mut self) {
        self.flush();
    }
}
