//! Version 3 of `.wdelta`: the container of the lossless strategy, which rebuilds every byte of
//! the fine-tuned file(s).
//!
//! Layout (integers little-endian): `b"wdelta\0"`, u32 version 3, the zstd frames, the chunk
//! index (a u64 frame length per chunk, 0 for a chunk equal to the base's bytes), the JSON
//! header, u64 header length, and the SHA-256 of every byte before it. The header comes last so
//! `create` writes the file in one pass; a version 1 or 2 reader stops at the version.
//!
//! Each fine-tuned file is a list of segments that cover it exactly, in order: `bytes` (anything
//! that is not tensor data: headers, metadata, alignment padding), `whole` (a tensor the base
//! lacks, or has with another dtype or shape) and `delta` (a tensor of the same name, dtype and
//! shape in the base, stored as its difference). Segments are cut into chunks of at most
//! `chunk_bytes` (rounded down to whole elements or blocks); each chunk is one zstd frame of the
//! chunk's byte planes (see `crate::delta`'s lossless planes).

use serde::{Deserialize, Serialize};

use super::types::MAGIC;
use crate::digest::{is_sha256_hex, sha256};

pub(crate) const LOSSLESS_VERSION: u32 = 3;
pub(crate) const LOSSLESS_STRATEGY: &str = "lossless";
/// Magic and version.
pub(crate) const LOSSLESS_PREAMBLE: u64 = 7 + 4;
/// Header length and checksum.
const FOOTER: u64 = 8 + 32;
/// Chunks are decoded whole in memory: their size is bounded.
pub(crate) const MAX_CHUNK_BYTES: u64 = 64 << 20;
pub(crate) const MIN_CHUNK_BYTES: u64 = 64;

/// Every way a lossless `.wdelta` can be rejected; each names where and what was expected.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum LosslessError {
    #[error("file is {len} bytes, shorter than the smallest lossless .wdelta (51 bytes)")]
    TooShort { len: u64 },
    #[error("not a .wdelta file: the first 7 bytes are not the magic \"wdelta\\0\"")]
    BadMagic,
    #[error("version {version} at offset 7: not a lossless .wdelta (version 3)")]
    NotVersion3 { version: u32 },
    #[error("header length {declared} at offset {at} exceeds the {available} bytes before it")]
    HeaderTooLong {
        declared: u64,
        at: u64,
        available: u64,
    },
    #[error(
        "header length {declared} at offset {at} exceeds the limit of {limit} bytes ({})",
        crate::formats::limits::how_to_raise()
    )]
    HeaderOverLimit { declared: u64, at: u64, limit: u64 },
    #[error("JSON header at offset {at}: {reason}")]
    Json { at: u64, reason: String },
    #[error(
        "header key strategy: {found:?} is not a strategy this reader knows in a version 3 file \
         (it knows \"lossless\")"
    )]
    UnknownStrategy { found: String },
    #[error("header key parent_hash: expected 64 lowercase hexadecimal digits, found {found:?}")]
    BadParentHash { found: String },
    #[error("header key chunk_bytes: {found} is outside {MIN_CHUNK_BYTES}..={MAX_CHUNK_BYTES}")]
    BadChunkBytes { found: u64 },
    #[error("files[{file}].name {name:?}: expected a plain file name (no directory)")]
    BadFileName { file: usize, name: String },
    #[error("files[{file}].sha256: expected 64 lowercase hexadecimal digits, found {found:?}")]
    BadFileHash { file: usize, found: String },
    #[error("files[{file}]: the segments cover {covered} bytes, the file has {size}")]
    SegmentsDoNotCover {
        file: usize,
        covered: u128,
        size: u64,
    },
    #[error(
        "files[{file}].segments[{segment}]: {len} bytes is not a whole number of {unit}-byte \
         elements of codec {codec}"
    )]
    PartialElement {
        file: usize,
        segment: usize,
        len: u64,
        unit: u64,
        codec: &'static str,
    },
    #[error("files[{file}].segments[{segment}]: a {kind} segment needs key tensor")]
    MissingTensor {
        file: usize,
        segment: usize,
        kind: &'static str,
    },
    #[error(
        "the header declares {chunks} chunks, whose index ({index_bytes} bytes) does not fit in \
         the {available} bytes between the version and the header"
    )]
    IndexOverrun {
        chunks: u64,
        index_bytes: u128,
        available: u64,
    },
    #[error(
        "the chunk index (at offset {at}) gives frames of {declared} bytes in all, but \
         {actual} bytes lie between the version and the index"
    )]
    FramesDoNotFit {
        at: u64,
        declared: u128,
        actual: u64,
    },
    #[error(
        "chunk {chunk} (index offset {at}) has no frame (equal to the base), but it is not part \
         of a delta segment"
    )]
    EmptyFrameWithoutBase { chunk: u64, at: u64 },
    #[error("chunk {chunk} (frame at offset {at}): {reason}")]
    Frame { chunk: u64, at: u64, reason: String },
    #[error(
        "checksum mismatch: the last 32 bytes say SHA-256 {stored}, the content hashes to \
         {actual}; the file is corrupted or truncated"
    )]
    ChecksumMismatch { stored: String, actual: String },
    #[error("reading bytes {at}..{end}: {reason}")]
    Read { at: u64, end: u64, reason: String },
}

/// How a segment's bytes are turned into planes (see the delta adapter's planes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Codec {
    /// One plane of bytes.
    #[serde(rename = "bytes")]
    Bytes,
    /// Elements of 2, 4 or 8 bytes, XORed, one plane per byte position (sign and exponent
    /// apart from the mantissa).
    #[serde(rename = "planes2")]
    Planes2,
    #[serde(rename = "planes4")]
    Planes4,
    #[serde(rename = "planes8")]
    Planes8,
    /// ggml q8_0 blocks (f16 scale, 32 int8): the scale's two bytes XORed in two planes, the
    /// quants subtracted (mod 256) in a third.
    #[serde(rename = "q8_0")]
    Q8_0,
    /// Elements of 2, 4 or 8 bytes read as little-endian integers, the base's subtracted (mod
    /// 2^bits) and zigzagged (small changes either way become small numbers, where XOR spreads
    /// a carry over the low bits), one plane per byte position; `sub2`'s two planes are also
    /// bit-transposed (see `q8_0z`). Written since the codec was
    /// added; files written before use the planes codecs, which every reader still decodes.
    #[serde(rename = "sub2")]
    Sub2,
    #[serde(rename = "sub4")]
    Sub4,
    #[serde(rename = "sub8")]
    Sub8,
    /// ggml q8_0 blocks against a base: the scales subtracted and zigzagged as `sub2` (two
    /// planes), the quants subtracted (mod 256), zigzagged and bit-transposed (eight planes of
    /// one bit of every quant: the mostly-zero changes of a fine-tune become runs of zeros).
    #[serde(rename = "q8_0z")]
    Q8_0Z,
    /// Elements of 2, 4 or 8 bytes, each chunk coded its own way, written since these codecs
    /// were added (a reader without them refuses the file by the codec's name). The frame's
    /// first byte is the chunk's transform: 0 subtracts the base as `sub2`..`sub8` do, 1 XORs
    /// it and rotates the sign bit to the bottom, so that the top plane of a float holds only
    /// exponent bits (ZipNN's byte grouping; used without a base or against zeros). One plane
    /// per byte position follows, each as a byte saying how it is stored (0 raw, 1 a zstd frame,
    /// 2 a zstd frame of its bit planes as `q8_0z`'s quants) and, unless raw, a u32 length;
    /// the encoder picks each plane's coding on a sample of it.
    #[serde(rename = "auto2")]
    Auto2,
    #[serde(rename = "auto4")]
    Auto4,
    #[serde(rename = "auto8")]
    Auto8,
    /// ggml q8_0 blocks the same way: transform 0 only, planes as `q8_0z`'s (two of the scales,
    /// one of the quants), each stored as the `auto` codecs' planes.
    #[serde(rename = "auto_q8_0")]
    AutoQ8_0,
}

impl Codec {
    /// Every codec, for the tests that run each one.
    #[cfg(test)]
    pub(crate) const ALL: [Codec; 13] = [
        Codec::Bytes,
        Codec::Planes2,
        Codec::Planes4,
        Codec::Planes8,
        Codec::Q8_0,
        Codec::Sub2,
        Codec::Sub4,
        Codec::Sub8,
        Codec::Q8_0Z,
        Codec::Auto2,
        Codec::Auto4,
        Codec::Auto8,
        Codec::AutoQ8_0,
    ];

    /// Whether the codec is one of the `auto` ones (per-chunk transform, per-plane coding).
    pub fn is_auto(self) -> bool {
        matches!(
            self,
            Codec::Auto2 | Codec::Auto4 | Codec::Auto8 | Codec::AutoQ8_0
        )
    }

    /// Bytes per element or block.
    pub fn unit(self) -> u64 {
        match self {
            Codec::Bytes => 1,
            Codec::Planes2 | Codec::Sub2 | Codec::Auto2 => 2,
            Codec::Planes4 | Codec::Sub4 | Codec::Auto4 => 4,
            Codec::Planes8 | Codec::Sub8 | Codec::Auto8 => 8,
            Codec::Q8_0 | Codec::Q8_0Z | Codec::AutoQ8_0 => 34,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Codec::Bytes => "bytes",
            Codec::Planes2 => "planes2",
            Codec::Planes4 => "planes4",
            Codec::Planes8 => "planes8",
            Codec::Q8_0 => "q8_0",
            Codec::Sub2 => "sub2",
            Codec::Sub4 => "sub4",
            Codec::Sub8 => "sub8",
            Codec::Q8_0Z => "q8_0z",
            Codec::Auto2 => "auto2",
            Codec::Auto4 => "auto4",
            Codec::Auto8 => "auto8",
            Codec::AutoQ8_0 => "auto_q8_0",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
/// What a segment of a lossless `.wdelta` holds.
pub enum SegmentKind {
    /// Bytes that are not tensor data.
    Bytes,
    /// A tensor stored without a base.
    Whole,
    /// A tensor stored against the base's tensor of the same name (same dtype and size).
    Delta,
}

impl SegmentKind {
    /// The name the header and `delta inspect` use.
    pub fn name(self) -> &'static str {
        match self {
            SegmentKind::Bytes => "bytes",
            SegmentKind::Whole => "whole",
            SegmentKind::Delta => "delta",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Segment {
    pub kind: SegmentKind,
    pub len: u64,
    pub codec: Codec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tensor: Option<String>,
    /// The tensor's dtype as the core names it (shown by `delta inspect`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dtype: Option<String>,
}

/// One rebuilt file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LosslessFile {
    /// Plain file name: the output itself for a single file, a file inside the output
    /// directory for a sharded model.
    pub name: String,
    pub size: u64,
    /// SHA-256 of the file's bytes, checked before a rebuilt file is renamed into place.
    pub sha256: String,
    pub segments: Vec<Segment>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LosslessHeader {
    pub parent_hash: String,
    pub strategy: String,
    /// The fine-tune's format as the core names it (`safetensors`, `gguf`, `pytorch`): shown by
    /// the descriptions; absent in files written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    /// Sharded (a directory of files) rather than one file.
    pub sharded: bool,
    pub chunk_bytes: u64,
    /// The zstd level of the float, integer and byte planes (q8_0's use their own); decoding
    /// does not need it.
    pub zstd_level: i32,
    pub files: Vec<LosslessFile>,
}

impl LosslessHeader {
    /// Chunk length of a segment: `chunk_bytes` rounded down to whole units.
    pub fn chunk_len(&self, codec: Codec) -> u64 {
        (self.chunk_bytes / codec.unit()) * codec.unit()
    }
}

/// One chunk: where its bytes go and where its frame is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chunk {
    pub file: u32,
    pub segment: u32,
    /// Offset in the rebuilt file, and in the segment.
    pub out_offset: u64,
    pub segment_offset: u64,
    pub len: u64,
    pub frame_offset: u64,
    /// 0: equal to the base's bytes.
    pub frame_len: u64,
}

/// A parsed lossless `.wdelta` (the checksum is checked apart: [`verify_lossless_checksum`]).
#[derive(Debug, Clone)]
pub struct LosslessContainer {
    /// The JSON header.
    pub header: LosslessHeader,
    /// The compressed chunks, in file order.
    pub chunks: Vec<Chunk>,
    /// Bytes of the file.
    pub file_len: u64,
    /// Bytes of the header, from the start of the file.
    pub header_len: u64,
}

/// The version at offset 7 of a file starting with the magic, if the file is that long.
pub(crate) fn version_of(prefix: &[u8]) -> Option<u32> {
    if !prefix.starts_with(MAGIC) || prefix.len() < 11 {
        return None;
    }
    Some(u32::from_le_bytes(
        prefix[7..11].try_into().expect("4 bytes"),
    ))
}

/// Fills `buf` from offset `at`, naming the range when the read fails.
fn read_exact_at(
    read_at: &mut impl FnMut(u64, &mut [u8]) -> std::io::Result<()>,
    at: u64,
    buf: &mut [u8],
) -> Result<(), LosslessError> {
    read_at(at, buf).map_err(|e| LosslessError::Read {
        at,
        end: at + buf.len() as u64,
        reason: e.to_string(),
    })
}

fn read_u64(
    read_at: &mut impl FnMut(u64, &mut [u8]) -> std::io::Result<()>,
    at: u64,
) -> Result<u64, LosslessError> {
    let mut b = [0u8; 8];
    read_exact_at(read_at, at, &mut b)?;
    Ok(u64::from_le_bytes(b))
}

impl LosslessContainer {
    /// Every segment of every file, in file order, with the bytes of its chunks' frames (0: a
    /// delta segment whose chunks all match the base).
    pub(crate) fn segment_frames(&self) -> Vec<(&Segment, u64)> {
        let mut out = Vec::new();
        let mut first = 0usize;
        for (fi, f) in self.header.files.iter().enumerate() {
            for (si, s) in f.segments.iter().enumerate() {
                let (mut frames, mut n) = (0u64, 0usize);
                for k in self.chunks[first..]
                    .iter()
                    .take_while(|k| k.file as usize == fi && k.segment as usize == si)
                {
                    frames += k.frame_len;
                    n += 1;
                }
                first += n;
                out.push((s, frames));
            }
        }
        out
    }

    /// Parses and validates a file of `file_len` bytes read through `read_at` (offset, buffer):
    /// everything but the checksum and the frames' content. Memory is bounded by the header
    /// limit and the file's own size.
    pub fn parse(
        file_len: u64,
        mut read_at: impl FnMut(u64, &mut [u8]) -> std::io::Result<()>,
    ) -> Result<LosslessContainer, LosslessError> {
        if file_len < LOSSLESS_PREAMBLE + FOOTER {
            return Err(LosslessError::TooShort { len: file_len });
        }
        let mut pre = [0u8; 11];
        read_exact_at(&mut read_at, 0, &mut pre)?;
        if !pre.starts_with(MAGIC) {
            return Err(LosslessError::BadMagic);
        }
        let version = version_of(&pre).expect("11 bytes with the magic");
        if version != LOSSLESS_VERSION {
            return Err(LosslessError::NotVersion3 { version });
        }
        let len_at = file_len - FOOTER;
        let header_len = read_u64(&mut read_at, len_at)?;
        let available = len_at - LOSSLESS_PREAMBLE;
        if header_len > available {
            return Err(LosslessError::HeaderTooLong {
                declared: header_len,
                at: len_at,
                available,
            });
        }
        let limit = crate::formats::limits::max_header_bytes();
        if header_len > limit {
            return Err(LosslessError::HeaderOverLimit {
                declared: header_len,
                at: len_at,
                limit,
            });
        }
        let header_at = len_at - header_len;
        let mut json = vec![0u8; header_len as usize];
        read_exact_at(&mut read_at, header_at, &mut json)?;
        let header: LosslessHeader =
            serde_json::from_slice(&json).map_err(|e| LosslessError::Json {
                at: header_at,
                reason: e.to_string(),
            })?;
        drop(json);
        validate_header(&header)?;
        // Chunks per segment, bounded by the room the index has before allocating anything.
        let mut n_chunks: u128 = 0;
        for f in &header.files {
            for s in &f.segments {
                let c = u128::from(header.chunk_len(s.codec));
                n_chunks += u128::from(s.len).div_ceil(c);
            }
        }
        let room = header_at - LOSSLESS_PREAMBLE;
        let index_bytes = n_chunks * 8;
        if index_bytes > u128::from(room) {
            return Err(LosslessError::IndexOverrun {
                chunks: n_chunks as u64,
                index_bytes,
                available: room,
            });
        }
        let index_at = header_at - index_bytes as u64;
        let mut index = vec![0u8; index_bytes as usize];
        read_exact_at(&mut read_at, index_at, &mut index)?;
        let frames_room = index_at - LOSSLESS_PREAMBLE;
        let mut chunks = Vec::with_capacity(n_chunks as usize);
        let mut frame_offset = LOSSLESS_PREAMBLE;
        let mut declared: u128 = 0;
        let mut k = 0usize;
        for (fi, f) in header.files.iter().enumerate() {
            let mut out_offset = 0u64;
            for (si, s) in f.segments.iter().enumerate() {
                let c = header.chunk_len(s.codec);
                let mut done = 0u64;
                while done < s.len {
                    let len = c.min(s.len - done);
                    let frame_len =
                        u64::from_le_bytes(index[k * 8..k * 8 + 8].try_into().expect("8 bytes"));
                    if frame_len == 0 && s.kind != SegmentKind::Delta {
                        return Err(LosslessError::EmptyFrameWithoutBase {
                            chunk: k as u64,
                            at: index_at + 8 * k as u64,
                        });
                    }
                    declared += u128::from(frame_len);
                    if declared > u128::from(frames_room) {
                        return Err(LosslessError::FramesDoNotFit {
                            at: index_at,
                            declared,
                            actual: frames_room,
                        });
                    }
                    chunks.push(Chunk {
                        file: fi as u32,
                        segment: si as u32,
                        out_offset: out_offset + done,
                        segment_offset: done,
                        len,
                        frame_offset,
                        frame_len,
                    });
                    frame_offset += frame_len;
                    done += len;
                    k += 1;
                }
                out_offset += s.len;
            }
        }
        if declared != u128::from(frames_room) {
            return Err(LosslessError::FramesDoNotFit {
                at: index_at,
                declared,
                actual: frames_room,
            });
        }
        Ok(LosslessContainer {
            header,
            chunks,
            file_len,
            header_len,
        })
    }

    /// [`LosslessContainer::parse`] over bytes in memory.
    pub fn parse_bytes(bytes: &[u8]) -> Result<LosslessContainer, LosslessError> {
        LosslessContainer::parse(bytes.len() as u64, |at, buf| {
            let past_the_end = || {
                std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "past the end of the file",
                )
            };
            let start = usize::try_from(at).map_err(|_| {
                std::io::Error::new(std::io::ErrorKind::InvalidInput, "offset out of range")
            })?;
            let end = start
                .checked_add(buf.len())
                .filter(|e| *e <= bytes.len())
                .ok_or_else(past_the_end)?;
            buf.copy_from_slice(&bytes[start..end]);
            Ok(())
        })
    }
}

fn validate_header(h: &LosslessHeader) -> Result<(), LosslessError> {
    if h.strategy != LOSSLESS_STRATEGY {
        return Err(LosslessError::UnknownStrategy {
            found: h.strategy.clone(),
        });
    }
    if !is_sha256_hex(&h.parent_hash) {
        return Err(LosslessError::BadParentHash {
            found: h.parent_hash.clone(),
        });
    }
    if !(MIN_CHUNK_BYTES..=MAX_CHUNK_BYTES).contains(&h.chunk_bytes) {
        return Err(LosslessError::BadChunkBytes {
            found: h.chunk_bytes,
        });
    }
    for (fi, f) in h.files.iter().enumerate() {
        if !is_plain_name(&f.name) {
            return Err(LosslessError::BadFileName {
                file: fi,
                name: f.name.clone(),
            });
        }
        if !is_sha256_hex(&f.sha256) {
            return Err(LosslessError::BadFileHash {
                file: fi,
                found: f.sha256.clone(),
            });
        }
        let covered: u128 = f.segments.iter().map(|s| u128::from(s.len)).sum();
        if covered != u128::from(f.size) {
            return Err(LosslessError::SegmentsDoNotCover {
                file: fi,
                covered,
                size: f.size,
            });
        }
        for (si, s) in f.segments.iter().enumerate() {
            if s.len % s.codec.unit() != 0 {
                return Err(LosslessError::PartialElement {
                    file: fi,
                    segment: si,
                    len: s.len,
                    unit: s.codec.unit(),
                    codec: s.codec.name(),
                });
            }
            if s.kind == SegmentKind::Delta && s.tensor.is_none() {
                return Err(LosslessError::MissingTensor {
                    file: fi,
                    segment: si,
                    kind: s.kind.name(),
                });
            }
        }
    }
    Ok(())
}

/// A file name without a directory: not empty, `.` or `..`, no separator of this platform
/// or NUL (a backslash is a name's own character on Unix, as git and safetensors take it).
fn is_plain_name(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && !name
            .chars()
            .any(|c| std::path::is_separator(c) || c == '\0')
}

/// Writes the container's tail: the chunk index, the header and its length. (The checksum is
/// the writer's: it hashes every byte it writes.)
pub(crate) fn lossless_tail(header: &LosslessHeader, frame_lens: &[u64]) -> Vec<u8> {
    let json = serde_json::to_vec(header).expect("the header serializes");
    let mut out = Vec::with_capacity(frame_lens.len() * 8 + json.len() + 8);
    for l in frame_lens {
        out.extend_from_slice(&l.to_le_bytes());
    }
    out.extend_from_slice(&json);
    out.extend_from_slice(&(json.len() as u64).to_le_bytes());
    out
}

/// Checks the SHA-256 in a lossless `.wdelta`'s last 32 bytes against everything before it.
pub(crate) fn verify_checksum_bytes(bytes: &[u8]) -> Result<(), LosslessError> {
    if (bytes.len() as u64) < LOSSLESS_PREAMBLE + FOOTER {
        return Err(LosslessError::TooShort {
            len: bytes.len() as u64,
        });
    }
    let (body, stored) = bytes.split_at(bytes.len() - 32);
    let actual = sha256(body);
    if actual.as_slice() != stored {
        return Err(LosslessError::ChecksumMismatch {
            stored: crate::digest::hex(stored),
            actual: crate::digest::hex(&actual),
        });
    }
    Ok(())
}

/// The preamble: magic and version 3.
pub(crate) fn lossless_preamble() -> [u8; 11] {
    let mut p = [0u8; 11];
    p[..7].copy_from_slice(MAGIC);
    p[7..].copy_from_slice(&LOSSLESS_VERSION.to_le_bytes());
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(strategy: &str, segments: Vec<Segment>, size: u64) -> LosslessHeader {
        LosslessHeader {
            parent_hash: "ab".repeat(32),
            strategy: strategy.to_string(),
            format: None,
            sharded: false,
            chunk_bytes: 64,
            zstd_level: 3,
            files: vec![LosslessFile {
                name: "m.safetensors".to_string(),
                size,
                sha256: "cd".repeat(32),
                segments,
            }],
        }
    }

    fn seg(kind: SegmentKind, len: u64, codec: Codec) -> Segment {
        Segment {
            kind,
            len,
            codec,
            tensor: (kind != SegmentKind::Bytes).then(|| "t".to_string()),
            dtype: None,
        }
    }

    /// A container with the given frames (their content is not looked at by the parser).
    fn file(h: &LosslessHeader, frames: &[&[u8]]) -> Vec<u8> {
        let mut out = lossless_preamble().to_vec();
        for f in frames {
            out.extend_from_slice(f);
        }
        let lens: Vec<u64> = frames.iter().map(|f| f.len() as u64).collect();
        out.extend_from_slice(&lossless_tail(h, &lens));
        let digest = <sha2::Sha256 as sha2::Digest>::digest(&out);
        out.extend_from_slice(&digest);
        out
    }

    #[test]
    fn chunks_are_laid_out_from_the_index() {
        // 10 bytes, then 128 bytes of f32 in two chunks of 64, the second equal to the base.
        let h = header(
            LOSSLESS_STRATEGY,
            vec![
                seg(SegmentKind::Bytes, 10, Codec::Bytes),
                seg(SegmentKind::Delta, 128, Codec::Planes4),
            ],
            138,
        );
        let bytes = file(&h, &[b"abc", b"defgh", b""]);
        let c = LosslessContainer::parse_bytes(&bytes).unwrap();
        assert_eq!(c.chunks.len(), 3);
        assert_eq!((c.chunks[1].out_offset, c.chunks[1].len), (10, 64));
        assert_eq!((c.chunks[1].frame_offset, c.chunks[1].frame_len), (14, 5));
        assert_eq!((c.chunks[2].out_offset, c.chunks[2].frame_len), (74, 0));
        // A frameless chunk outside a delta segment is refused.
        let bytes = file(&h, &[b"", b"defgh", b""]);
        assert!(matches!(
            LosslessContainer::parse_bytes(&bytes),
            Err(LosslessError::EmptyFrameWithoutBase { chunk: 0, .. })
        ));
    }

    #[test]
    fn an_unknown_strategy_is_refused_by_name() {
        let h = header("wavelet", vec![], 0);
        let e = LosslessContainer::parse_bytes(&file(&h, &[])).unwrap_err();
        assert_eq!(
            e,
            LosslessError::UnknownStrategy {
                found: "wavelet".to_string()
            }
        );
        assert!(e.to_string().contains("\"wavelet\""));
    }

    #[test]
    fn a_codec_this_reader_does_not_know_is_refused_by_name() {
        let h = header(
            LOSSLESS_STRATEGY,
            vec![seg(SegmentKind::Delta, 64, Codec::Auto2)],
            64,
        );
        let ok = file(&h, &[b"x"]);
        assert!(LosslessContainer::parse_bytes(&ok).is_ok());
        // A later codec, as an older reader would see "auto2": same length, so only the name
        // differs.
        let mut later = ok.clone();
        let at = ok
            .windows(7)
            .position(|w| w == b"\"auto2\"")
            .expect("the codec's name");
        later[at + 5] = b'9';
        let e = LosslessContainer::parse_bytes(&later).unwrap_err();
        assert!(matches!(e, LosslessError::Json { .. }), "{e}");
        assert!(e.to_string().contains("unknown variant `auto9`"), "{e}");
    }

    #[test]
    fn segments_must_cover_the_file_in_whole_elements() {
        let h = header(
            LOSSLESS_STRATEGY,
            vec![seg(SegmentKind::Whole, 6, Codec::Planes4)],
            6,
        );
        assert!(matches!(
            LosslessContainer::parse_bytes(&file(&h, &[b"x"])),
            Err(LosslessError::PartialElement { .. })
        ));
        let h = header(
            LOSSLESS_STRATEGY,
            vec![seg(SegmentKind::Whole, 8, Codec::Planes4)],
            9,
        );
        assert!(matches!(
            LosslessContainer::parse_bytes(&file(&h, &[b"x"])),
            Err(LosslessError::SegmentsDoNotCover { .. })
        ));
    }

    #[test]
    fn every_truncation_is_an_error_never_a_panic() {
        let h = header(
            LOSSLESS_STRATEGY,
            vec![seg(SegmentKind::Bytes, 200, Codec::Bytes)],
            200,
        );
        let bytes = file(&h, &[b"aaaa", b"bbbb", b"cccc", b"dd"]);
        assert!(LosslessContainer::parse_bytes(&bytes).is_ok());
        for keep in 0..bytes.len() {
            assert!(
                LosslessContainer::parse_bytes(&bytes[..keep]).is_err(),
                "kept {keep}"
            );
        }
    }
}
