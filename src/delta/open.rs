//! Opening a `.wdelta` file: read into memory, checksum verified (now, or alongside the work of
//! `apply`), structure validated by the format's reader; and checking that it fits a base.
//!
//! The file is read with positioned reads, not memory-mapped: a mapped file truncated during
//! the run kills the process with SIGBUS (no message, temporary output left behind), while a
//! short read is an error naming the file. Holding the bytes costs memory the size of the
//! delta (about an eighth of float32 weights with int4), which the work then no longer reads
//! from disk.

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::codec;
use super::error::DeltaError;
use super::model::Model;
use crate::error::Error;
use crate::escape::shown;
use crate::formats::wdelta::{self as format, TensorArrays, TensorEntry, WdeltaError, WdeltaFile};

type Result<T, E = DeltaError> = std::result::Result<T, E>;

/// A `.wdelta` file, checksum verified and validated, with its bytes.
pub struct OpenDelta {
    /// The file, as given.
    pub path: PathBuf,
    /// Its header and the index of its records.
    pub file: WdeltaFile,
    bytes: Vec<u8>,
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
    /// Reads and validates the `.wdelta` at `path`, its checksum verified.
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
        let bytes = read_whole(path)?;
        if bytes.is_empty() || !defer {
            return Self::from_bytes(path, bytes);
        }
        let parsed = match WdeltaFile::parse_verified(&bytes) {
            Ok(p) => p,
            Err(e) => {
                format::verify_checksum(&bytes).map_err(|c| DeltaError::format(path, c))?;
                return Err(DeltaError::format(path, e));
            }
        };
        Ok(OpenDelta {
            path: path.to_path_buf(),
            file: parsed,
            bytes,
            checksum_pending: defer,
        })
    }

    /// Verifies the SHA-256 trailer.
    pub fn verify_checksum(&self) -> Result<()> {
        let bytes = self.bytes();
        let (body, stored) = bytes.split_at(bytes.len() - format::CHECKSUM_LEN);
        let actual = Sha256::digest(body);
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

    /// Validates `bytes`, read from `path`, its checksum verified.
    pub fn from_bytes(path: &Path, bytes: Vec<u8>) -> Result<OpenDelta> {
        let parsed = Self::verify_and_parse(path, &bytes)?;
        Ok(OpenDelta {
            path: path.to_path_buf(),
            file: parsed,
            bytes,
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

    /// The file's bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The structural hash of the base the delta applies to.
    pub fn parent_hash(&self) -> &str {
        &self.file.header.parent_hash
    }

    /// Decodes one tensor's delta (`n` = its element count, checked against the base).
    pub fn decode(&self, name: &str, n: usize) -> Result<Vec<f32>> {
        let (entry, arrays) = self.tensor(name)?;
        let mut out = vec![0f32; n];
        codec::decode(entry, &arrays, &mut out);
        Ok(out)
    }

    /// A streaming decoder of one tensor's delta.
    pub fn decoder(&self, name: &str) -> Result<codec::Decoder<'_>> {
        let (entry, arrays) = self.tensor(name)?;
        Ok(codec::Decoder::new(entry, &arrays))
    }

    /// A decoder of any range of one tensor's delta, and the bytes of its range field (empty
    /// when the strategy has none).
    pub(super) fn range_decoder(&self, name: &str) -> Result<(codec::RangeDecoder, &[u8])> {
        let (entry, arrays) = self.tensor(name)?;
        let field = codec::RangeDecoder::range_field(entry.strategy())
            .map_or(&[][..], |i| arrays.fields[i].data);
        Ok((codec::RangeDecoder::new(entry, &arrays), field))
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
}

/// The whole file, read with positioned reads: a file that ends before the length it had when
/// opened is [`DeltaError::InputShrank`]; memory for it is reserved fallibly.
fn read_whole(path: &Path) -> Result<Vec<u8>> {
    // A FIFO as the base is refused, not waited on.
    let (file, meta) = crate::fsutil::open_regular(path).map_err(|e| Error::io(path, e))?;
    let len = meta.len();
    let mut bytes = Vec::new();
    let size = usize::try_from(len).map_err(|_| too_large(path, len))?;
    bytes
        .try_reserve_exact(size)
        .map_err(|_| too_large(path, len))?;
    bytes.resize(size, 0);
    const STEP: usize = 8 << 20;
    for (i, chunk) in bytes.chunks_mut(STEP).enumerate() {
        let offset = (i * STEP) as u64;
        file.read_exact_at(chunk, offset).map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                DeltaError::InputShrank {
                    path: path.to_path_buf(),
                    offset,
                    end: offset + chunk.len() as u64,
                    now: file.metadata().ok().map(|m| m.len()),
                }
            } else {
                Error::io(path, e).into()
            }
        })?;
    }
    Ok(bytes)
}

fn too_large(path: &Path, len: u64) -> DeltaError {
    Error::io(
        path,
        std::io::Error::new(
            std::io::ErrorKind::OutOfMemory,
            format!("{len} bytes do not fit in memory"),
        ),
    )
    .into()
}

/// Checks that a delta covers exactly the base's tensors with the same shapes.
pub(crate) fn check_against_base(delta: &OpenDelta, base: &Model) -> Result<()> {
    check_header_against_base(&delta.path, &delta.file.header, base)
}

/// [`check_against_base`] for the header of the delta at `path`.
pub(crate) fn check_header_against_base(
    path: &Path,
    header: &crate::formats::wdelta::Header,
    base: &Model,
) -> Result<()> {
    let mut differences = Vec::new();
    for (name, e) in &header.tensors {
        match base.tensors.get(name) {
            None => differences.push(format!("only in the delta: {}", shown(name))),
            Some(t) if !e.shape.iter().eq(t.shape.iter().copied()) => differences.push(format!(
                "shape of {}: {:?} in the delta, {:?} in the base",
                shown(name),
                e.shape,
                t.shape
            )),
            Some(_) => {}
        }
    }
    for name in base.tensors.keys() {
        if !header.tensors.contains_key(name) {
            differences.push(format!("only in the base: {}", shown(name)));
        }
    }
    fits_base(path, base, differences)
}

/// Ok when the delta at `path` showed no `differences` from `base`, else the error listing them.
pub(crate) fn fits_base(path: &Path, base: &Model, differences: Vec<String>) -> Result<()> {
    if differences.is_empty() {
        Ok(())
    } else {
        Err(DeltaError::BaseMismatch {
            delta: path.to_path_buf(),
            base: base.path.clone(),
            differences,
        })
    }
}
