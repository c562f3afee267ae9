//! Opening a `.wdelta` file: memory-mapped, checksum verified (now, or alongside the work of
//! `apply`), structure validated by the format's reader; and checking that it fits a base.

use std::fs::File;
use std::path::{Path, PathBuf};

use memmap2::Mmap;
use sha2::{Digest, Sha256};

use super::codec;
use super::error::DeltaError;
use super::model::Model;
use crate::error::Error;
use crate::formats::wdelta::{self as format, TensorArrays, TensorEntry, WdeltaError, WdeltaFile};

type Result<T, E = DeltaError> = std::result::Result<T, E>;

enum Bytes {
    Map(Mmap),
    Owned(Vec<u8>),
}

/// A `.wdelta` file, checksum verified and validated, with its bytes.
pub struct OpenDelta {
    pub path: PathBuf,
    pub file: WdeltaFile,
    bytes: Bytes,
    /// Opened with [`OpenDelta::open_deferred`]: the checksum is still to be verified.
    pub checksum_pending: bool,
}

impl std::fmt::Debug for OpenDelta {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenDelta")
            .field("path", &self.path)
            .field("file", &self.file)
            .finish()
    }
}

impl OpenDelta {
    pub fn open(path: &Path) -> Result<OpenDelta> {
        Self::open_with(path, false)
    }

    /// Opens with the structure validated but the checksum left to
    /// [`OpenDelta::verify_checksum`], which `apply` runs alongside its work (the output is
    /// renamed into place only after it passed). A structure error is reported as a checksum
    /// mismatch when the checksum does not match either.
    pub fn open_deferred(path: &Path) -> Result<OpenDelta> {
        Self::open_with(path, true)
    }

    fn open_with(path: &Path, defer: bool) -> Result<OpenDelta> {
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
        if len == 0 {
            return Self::from_bytes(path, Vec::new());
        }
        // SAFETY: read-only map; the checksum catches a file changing under us.
        let map = unsafe { Mmap::map(&file) }.map_err(|e| Error::io(path, e))?;
        let parsed = if defer {
            match WdeltaFile::parse_verified(&map) {
                Ok(p) => p,
                Err(e) => {
                    format::verify_checksum(&map).map_err(|c| DeltaError::format(path, c))?;
                    return Err(DeltaError::format(path, e));
                }
            }
        } else {
            Self::verify_and_parse(path, &map)?
        };
        // Checksumming touched every page; tensors are read again one at a time.
        // SAFETY: read-only file-backed map: released pages are read again if touched.
        let _ = unsafe { map.unchecked_advise(memmap2::UncheckedAdvice::DontNeed) };
        Ok(OpenDelta {
            path: path.to_path_buf(),
            file: parsed,
            bytes: Bytes::Map(map),
            checksum_pending: defer,
        })
    }

    /// Verifies the SHA-256 trailer, releasing the pages read behind.
    pub fn verify_checksum(&self) -> Result<()> {
        let bytes = self.bytes();
        let (body, stored) = bytes.split_at(bytes.len() - format::CHECKSUM_LEN);
        let mut h = Sha256::new();
        const STEP: usize = 8 << 20;
        for (i, chunk) in body.chunks(STEP).enumerate() {
            h.update(chunk);
            if let Bytes::Map(m) = &self.bytes {
                // SAFETY: read-only file-backed map: released pages are read again if touched.
                let _ = unsafe {
                    m.unchecked_advise_range(
                        memmap2::UncheckedAdvice::DontNeed,
                        i * STEP,
                        chunk.len(),
                    )
                };
            }
        }
        let actual = h.finalize();
        if actual.as_slice() != stored {
            return Err(DeltaError::format(
                &self.path,
                WdeltaError::ChecksumMismatch {
                    stored: crate::digest::hex(stored),
                    actual: crate::digest::hex(&actual),
                },
            ));
        }
        Ok(())
    }

    pub fn from_bytes(path: &Path, bytes: Vec<u8>) -> Result<OpenDelta> {
        let parsed = Self::verify_and_parse(path, &bytes)?;
        Ok(OpenDelta {
            path: path.to_path_buf(),
            file: parsed,
            bytes: Bytes::Owned(bytes),
            checksum_pending: false,
        })
    }

    fn verify_and_parse(path: &Path, bytes: &[u8]) -> Result<WdeltaFile> {
        if !format::is_wdelta(bytes) || bytes.len() < format::PREAMBLE_LEN + format::CHECKSUM_LEN {
            // Let the parser phrase the error (bad magic, too short).
            return WdeltaFile::parse(bytes).map_err(|e| DeltaError::format(path, e));
        }
        format::verify_checksum(bytes).map_err(|e| DeltaError::format(path, e))?;
        WdeltaFile::parse_verified(bytes).map_err(|e| DeltaError::format(path, e))
    }

    pub fn bytes(&self) -> &[u8] {
        match &self.bytes {
            Bytes::Map(m) => m,
            Bytes::Owned(v) => v,
        }
    }

    pub fn parent_hash(&self) -> &str {
        &self.file.header.parent_hash
    }

    /// Decodes one tensor's delta (`n` = its element count, checked against the base).
    pub fn decode(&self, name: &str, n: usize) -> Result<Vec<f32>> {
        let (entry, arrays) = self.tensor(name)?;
        let mut out = vec![0f32; n];
        codec::decode(entry, &arrays, &mut out);
        self.release(name);
        Ok(out)
    }

    /// A streaming decoder of one tensor's delta.
    pub fn decoder(&self, name: &str) -> Result<codec::Decoder<'_>> {
        let (entry, arrays) = self.tensor(name)?;
        Ok(codec::Decoder::new(entry, &arrays))
    }

    /// One tensor's header entry and its array records.
    fn tensor(&self, name: &str) -> Result<(&TensorEntry, TensorArrays<'_>)> {
        let entry =
            self.file
                .header
                .tensors
                .get(name)
                .ok_or_else(|| DeltaError::TensorNotInDelta {
                    path: self.path.clone(),
                    tensor: name.to_string(),
                })?;
        let arrays = self
            .file
            .arrays(self.bytes(), name)
            .map_err(|e| DeltaError::format(&self.path, e))?;
        Ok((entry, arrays))
    }

    fn release(&self, name: &str) {
        if let (Bytes::Map(m), Some((start, len))) = (&self.bytes, self.file.tensor_span(name)) {
            // SAFETY: read-only file-backed map: released pages are read again if touched.
            let _ =
                unsafe { m.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start, len) };
        }
    }
}

/// Checks that a delta covers exactly the base's tensors with the same shapes.
pub(crate) fn check_against_base(delta: &OpenDelta, base: &Model) -> Result<()> {
    let mut differences = Vec::new();
    for (name, e) in &delta.file.header.tensors {
        match base.tensors.get(name) {
            None => differences.push(format!("only in the delta: {name}")),
            Some(t) if t.shape != e.shape => differences.push(format!(
                "shape of {name}: {:?} in the delta, {:?} in the base",
                e.shape, t.shape
            )),
            Some(_) => {}
        }
    }
    for name in base.tensors.keys() {
        if !delta.file.header.tensors.contains_key(name) {
            differences.push(format!("only in the base: {name}"));
        }
    }
    if differences.is_empty() {
        Ok(())
    } else {
        Err(DeltaError::BaseMismatch {
            delta: delta.path.clone(),
            base: base.path.clone(),
            differences,
        })
    }
}
