//! One chunk of a lossless `.wdelta`: its size, its zstd level, and how it is decoded against
//! the base; and opening the container.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use super::planes;
use crate::delta::error::DeltaError;
use crate::formats::wdelta::lossless::{Codec, LosslessContainer, version_of};

/// Raw bytes per chunk (rounded down to whole elements or blocks).
pub(crate) const CHUNK_BYTES: u64 = 4 << 20;
/// zstd level of float, integer and byte planes: level 1 compressed them as well as 3 (within
/// ±2 %) at twice the speed, and 6 to 9 gained 0.5 to 3 % at 2 to 8 times the time
/// (docs/wdelta.md has the figures).
pub(crate) const ZSTD_LEVEL: i32 = 1;
/// q8_0's subtracted quants: 2.75 MB at level 3, 2.55 at 6, 2.42 at 9 in about the time of 6,
/// 2.15 at 15 at six times it (a 31 MB noise pair; docs/wdelta.md).
pub(crate) const ZSTD_LEVEL_Q8_0: i32 = 9;

/// The zstd level of a codec's frames.
pub(crate) fn zstd_level(codec: Codec) -> i32 {
    match codec {
        Codec::Q8_0 | Codec::Q8_0Z => ZSTD_LEVEL_Q8_0,
        _ => ZSTD_LEVEL,
    }
}

/// Whether the file at `path` is a lossless (version 3) `.wdelta`.
pub(crate) fn is_lossless_file(path: &Path) -> bool {
    let mut head = [0u8; 11];
    File::open(path)
        .and_then(|f| f.read_exact_at(&mut head, 0))
        .is_ok()
        && version_of(&head) == Some(crate::formats::wdelta::lossless::LOSSLESS_VERSION)
}

/// Opens and parses a lossless `.wdelta` (not its checksum).
pub(crate) fn open_container(path: &Path) -> Result<(File, LosslessContainer), DeltaError> {
    let file = File::open(path).map_err(|e| crate::error::Error::io(path, e))?;
    let len = file
        .metadata()
        .map_err(|e| crate::error::Error::io(path, e))?
        .len();
    let c =
        LosslessContainer::parse(len, |at, buf| file.read_exact_at(buf, at)).map_err(|source| {
            DeltaError::Lossless {
                path: path.to_path_buf(),
                source,
            }
        })?;
    Ok((file, c))
}

/// Why a chunk's frame does not decode (the container names the chunk and its offset).
#[derive(Debug, thiserror::Error)]
pub enum ChunkError {
    /// A chunk stored as "equal to the base" was decoded without the base.
    #[error("a chunk without a frame needs the base's bytes")]
    NoBase,
    /// The chunk's length is not whole elements of its codec, or not the base's length.
    #[error("the chunk's length does not fit its codec or its base")]
    LengthMismatch,
    /// The zstd frame is corrupt.
    #[error("zstd: {0}")]
    Zstd(#[source] std::io::Error),
    /// The frame decompresses to another size than the chunk's.
    #[error("the frame decompresses to {decoded} bytes, the chunk has {expected}")]
    WrongSize {
        /// Bytes the frame gave.
        decoded: usize,
        /// Bytes the chunk has.
        expected: usize,
    },
}

/// Turns chunks into frames, reusing its zstd context and plane buffer from one chunk to the
/// next: one per worker thread.
pub(crate) struct ChunkEncoder {
    zstd: zstd::bulk::Compressor<'static>,
    level: i32,
    planes: Vec<u8>,
}

impl ChunkEncoder {
    pub(crate) fn new() -> std::io::Result<ChunkEncoder> {
        Ok(ChunkEncoder {
            zstd: zstd::bulk::Compressor::new(ZSTD_LEVEL)?,
            level: ZSTD_LEVEL,
            planes: Vec::new(),
        })
    }

    /// The frame of the fine-tuned bytes `ft` against `base` (same length; `None` for a chunk
    /// stored whole) into `out` (cleared first): left empty when `ft` equals the base.
    pub(crate) fn encode(
        &mut self,
        codec: Codec,
        base: Option<&[u8]>,
        ft: &[u8],
        out: &mut Vec<u8>,
    ) -> std::io::Result<()> {
        out.clear();
        if base == Some(ft) {
            return Ok(());
        }
        planes::encode(codec, ft, base, &mut self.planes);
        let level = zstd_level(codec);
        if level != self.level {
            self.zstd.set_compression_level(level)?;
            self.level = level;
        }
        out.reserve(zstd::zstd_safe::compress_bound(self.planes.len()));
        self.zstd.compress_to_buffer(&self.planes, out)?;
        Ok(())
    }
}

/// Turns frames back into chunks, reusing its zstd context and plane buffer: one per worker
/// thread.
pub(crate) struct ChunkDecoder {
    zstd: zstd::bulk::Decompressor<'static>,
    planes: Vec<u8>,
}

impl ChunkDecoder {
    pub(crate) fn new() -> std::io::Result<ChunkDecoder> {
        Ok(ChunkDecoder {
            zstd: zstd::bulk::Decompressor::new()?,
            planes: Vec::new(),
        })
    }

    /// Decodes one chunk's frame against the base's bytes (`None` for a chunk stored whole,
    /// and for a chunk with no frame: equal to the base) into `out` (the chunk's length). The
    /// decompressed size must be exactly the chunk's: a frame never makes more than that.
    pub(crate) fn decode(
        &mut self,
        codec: Codec,
        frame: &[u8],
        base: Option<&[u8]>,
        out: &mut [u8],
    ) -> Result<(), ChunkError> {
        if frame.is_empty() {
            match base {
                Some(b) if b.len() == out.len() => {
                    out.copy_from_slice(b);
                    return Ok(());
                }
                _ => return Err(ChunkError::NoBase),
            }
        }
        if base.is_some_and(|b| b.len() != out.len())
            || !(out.len() as u64).is_multiple_of(codec.unit())
        {
            return Err(ChunkError::LengthMismatch);
        }
        self.planes.clear();
        self.planes.reserve(out.len());
        let decoded = self
            .zstd
            .decompress_to_buffer(frame, &mut self.planes)
            .map_err(ChunkError::Zstd)?;
        if decoded != out.len() {
            return Err(ChunkError::WrongSize {
                decoded,
                expected: out.len(),
            });
        }
        planes::decode(codec, &self.planes, base, out);
        Ok(())
    }
}

/// [`ChunkDecoder::decode`] with a decoder made for the call.
pub fn decode_chunk(
    codec: Codec,
    frame: &[u8],
    base: Option<&[u8]>,
    out: &mut [u8],
) -> Result<(), ChunkError> {
    ChunkDecoder::new()
        .map_err(ChunkError::Zstd)?
        .decode(codec, frame, base, out)
}
