//! What every reader says about a `.wdelta` (git's fast path and driver, textconv, `ci`,
//! `inspect` of a `REV:path`): read from its header alone, never its arrays or frames, so a
//! multi-gigabyte delta in a commit costs a few reads. Lossy files (versions 1 and 2) keep their
//! header at the start, lossless ones (version 3) at the end: both are read through `read_at`.

use super::error::WdeltaError;
use super::header::{max_tensors, parse_header};
use super::lossless::{self, LosslessContainer, SegmentKind};
use super::types::{CHECKSUM_LEN, Header, LossFigures, MAGIC, PREAMBLE_LEN, SUPPORTED_VERSIONS};

/// A `.wdelta`'s header as the readers of a repository describe it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct DeltaSummary {
    pub version: u32,
    /// `lossless`, `int4`, `sparse` or `quantized`.
    pub strategy: &'static str,
    pub parent_hash: String,
    /// The fine-tune's format (`safetensors`, `gguf`, `pytorch`), when the delta records it.
    pub model_format: Option<String>,
    pub tensors: u64,
    /// Tensors whose bytes differ from the base's (a lossy delta stores only those).
    pub tensors_changed: u64,
    /// Bytes of the `.wdelta` itself.
    pub file_size: u64,
    /// What a lossy delta loses, as `create` recorded it.
    pub loss: Option<LossFigures>,
}

impl DeltaSummary {
    /// Whether the delta rebuilds its fine-tune byte for byte.
    pub(crate) fn is_lossless(&self) -> bool {
        self.version == lossless::LOSSLESS_VERSION
    }

    /// Reads the summary of a `file_len`-byte `.wdelta` through `read_at` (offset, buffer to
    /// fill). Only the header (and a lossless file's chunk index) is read; the checksum is not
    /// verified, which `delta verify` and `apply` do.
    pub(crate) fn read(
        file_len: u64,
        mut read_at: impl FnMut(u64, &mut [u8]) -> std::io::Result<()>,
    ) -> Result<DeltaSummary, WdeltaError> {
        let mut start = [0u8; lossless::LOSSLESS_PREAMBLE as usize];
        if file_len < start.len() as u64 {
            return Err(WdeltaError::TooShort {
                len: usize::try_from(file_len).unwrap_or(usize::MAX),
                min: PREAMBLE_LEN + CHECKSUM_LEN,
            });
        }
        read_at(0, &mut start).map_err(unread)?;
        if !start.starts_with(MAGIC) {
            return Err(WdeltaError::BadMagic {
                found: String::from_utf8_lossy(&start[..7]).into_owned(),
            });
        }
        if lossless::version_of(&start) == Some(lossless::LOSSLESS_VERSION) {
            let container =
                LosslessContainer::parse(file_len, read_at).map_err(WdeltaError::Lossless)?;
            return Ok(of_lossless(&container));
        }
        lossy(file_len, read_at)
    }

    /// [`DeltaSummary::read`] over bytes in memory: the whole file, or a prefix of a
    /// `file_len`-byte file (enough for a lossy header; a lossless one needs its end).
    pub(crate) fn read_bytes(bytes: &[u8], file_len: u64) -> Result<DeltaSummary, WdeltaError> {
        DeltaSummary::read(file_len, |at, buf| {
            let start = usize::try_from(at).unwrap_or(usize::MAX);
            match start
                .checked_add(buf.len())
                .and_then(|end| bytes.get(start..end))
            {
                Some(part) => {
                    buf.copy_from_slice(part);
                    Ok(())
                }
                None => Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    format!(
                        "bytes {at}..{} were not read (only the first {} are at hand)",
                        at + buf.len() as u64,
                        bytes.len()
                    ),
                )),
            }
        })
    }
}

/// A lossy (version 1 or 2) file: its JSON header, right after the preamble.
fn lossy(
    file_len: u64,
    mut read_at: impl FnMut(u64, &mut [u8]) -> std::io::Result<()>,
) -> Result<DeltaSummary, WdeltaError> {
    let min = PREAMBLE_LEN + CHECKSUM_LEN;
    if file_len < min as u64 {
        return Err(WdeltaError::TooShort {
            len: usize::try_from(file_len).unwrap_or(usize::MAX),
            min,
        });
    }
    let mut preamble = [0u8; PREAMBLE_LEN];
    read_at(0, &mut preamble).map_err(unread)?;
    let version = u32::from_le_bytes(preamble[7..11].try_into().expect("4 bytes"));
    if !SUPPORTED_VERSIONS.contains(&version) {
        return Err(WdeltaError::UnsupportedVersion { version });
    }
    let declared = u32::from_le_bytes(preamble[11..15].try_into().expect("4 bytes"));
    let available = file_len - min as u64;
    if u64::from(declared) > available {
        return Err(WdeltaError::HeaderTooLong {
            declared: declared as usize,
            available: usize::try_from(available).unwrap_or(usize::MAX),
        });
    }
    let limit = crate::formats::limits::max_header_bytes();
    if u64::from(declared) > limit {
        return Err(WdeltaError::HeaderOverLimit {
            declared: u64::from(declared),
            limit,
        });
    }
    // Bounded by the header limit and by the file's own length, checked above.
    let mut json = vec![0u8; declared as usize];
    read_at(PREAMBLE_LEN as u64, &mut json).map_err(unread)?;
    let header = parse_header(&json, version, max_tensors(limit))?;
    Ok(of_lossy(version, &header, file_len))
}

/// A lossy delta stores an update for each tensor it names.
pub(super) fn of_lossy(version: u32, header: &Header, file_len: u64) -> DeltaSummary {
    let tensors = header.tensors.len() as u64;
    DeltaSummary {
        version,
        strategy: header.strategy.name(),
        parent_hash: header.parent_hash.clone(),
        model_format: None,
        tensors,
        tensors_changed: tensors,
        file_size: file_len,
        loss: header.loss.clone(),
    }
}

fn unread(e: std::io::Error) -> WdeltaError {
    WdeltaError::HeaderJson {
        message: format!("the header could not be read: {e}"),
    }
}

/// A lossless container: its tensors' segments, changed when a chunk of theirs has a frame.
pub(super) fn of_lossless(c: &LosslessContainer) -> DeltaSummary {
    let mut tensors = 0u64;
    let mut changed = 0u64;
    for (s, frames) in c.segment_frames() {
        match s.kind {
            SegmentKind::Bytes => {}
            SegmentKind::Whole => {
                tensors += 1;
                changed += 1;
            }
            SegmentKind::Delta => {
                tensors += 1;
                changed += u64::from(frames > 0);
            }
        }
    }
    DeltaSummary {
        version: lossless::LOSSLESS_VERSION,
        strategy: lossless::LOSSLESS_STRATEGY,
        parent_hash: c.header.parent_hash.clone(),
        model_format: c.header.format.clone(),
        tensors,
        tensors_changed: changed,
        file_size: c.file_len,
        loss: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A version 1 preamble declaring a header of `declared` bytes, then `body`.
    fn lossy_file(declared: u32, body: &[u8]) -> Vec<u8> {
        let mut b = MAGIC.to_vec();
        b.extend_from_slice(&1u32.to_le_bytes());
        b.extend_from_slice(&declared.to_le_bytes());
        b.extend_from_slice(body);
        b.extend_from_slice(&[0u8; CHECKSUM_LEN]);
        b
    }

    #[test]
    fn a_header_longer_than_the_file_is_refused_before_anything_is_allocated() {
        let bytes = lossy_file(u32::MAX, b"{}");
        let err = DeltaSummary::read_bytes(&bytes, bytes.len() as u64).unwrap_err();
        assert!(
            matches!(err, WdeltaError::HeaderTooLong { declared, .. } if declared == u32::MAX as usize),
            "{err}"
        );
    }

    #[test]
    fn a_prefix_without_the_header_says_which_bytes_it_lacks() {
        let header = br#"{"parent_hash":"x","strategy":"int4","tensors":{}}"#;
        let bytes = lossy_file(header.len() as u32, header);
        let err = DeltaSummary::read_bytes(&bytes[..20], bytes.len() as u64).unwrap_err();
        assert!(err.to_string().contains("bytes 15.."), "{err}");
        let err = DeltaSummary::read_bytes(b"wdelta\0", 7).unwrap_err();
        assert!(matches!(err, WdeltaError::TooShort { .. }), "{err}");
    }

    #[test]
    fn another_magic_is_no_delta() {
        let err = DeltaSummary::read_bytes(b"GGUF\x03\0\0\0\0\0\0\0\0\0\0", 15).unwrap_err();
        assert!(matches!(err, WdeltaError::BadMagic { .. }), "{err}");
    }
}
