//! One chunk of a lossless `.wdelta`: its size, its zstd level, and how it is decoded against
//! the base; and opening the container.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use super::planes::{self, Transform};
use crate::delta::error::DeltaError;
use crate::delta::pipeline::sized;
use crate::formats::wdelta::lossless::{Codec, LosslessContainer, version_of};
use zstd::zstd_safe::zstd_sys;

/// Raw bytes per chunk (rounded down to whole elements or blocks).
pub(crate) const CHUNK_BYTES: u64 = 4 << 20;
/// zstd level of float, integer and byte planes (and of the `auto` codecs' zstd planes): level 1 compressed them as well as 3 (within
/// ±2 %) at twice the speed, and 6 to 9 gained 0.5 to 3 % at 2 to 8 times the time
/// (docs/wdelta.md has the figures).
pub(crate) const ZSTD_LEVEL: i32 = 1;
/// q8_0's subtracted quants in the `q8_0` and `q8_0z` codecs (no longer written: `auto_q8_0`
/// codes them as Huffman literals, smaller and faster): 2.75 MB at level 3, 2.55 at 6, 2.42 at 9 in about the time of 6,
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
    /// An `auto` frame's first byte is not a transform of its codec.
    #[error("transform {0} at the frame's start is not one of its codec's")]
    BadTransform(u8),
    /// An `auto` frame ends inside a plane.
    #[error("the frame ends inside plane {0}")]
    Truncated(usize),
    /// An `auto` frame's plane has an unknown coding.
    #[error("plane {plane}: coding {coding} is not 0 (raw), 1 (zstd) or 2 (zstd of bit planes)")]
    BadCoding {
        /// Which plane.
        plane: usize,
        /// The coding byte found.
        coding: u8,
    },
    /// An `auto` frame has bytes after its last plane.
    #[error("{0} bytes after the last plane")]
    Trailing(usize),
    /// The frame decompresses to another size than the chunk's.
    #[error("the frame decompresses to {decoded} bytes, the chunk has {expected}")]
    WrongSize {
        /// Bytes the frame gave.
        decoded: usize,
        /// Bytes the chunk has.
        expected: usize,
    },
}

/// How one plane of an `auto` frame is stored: its first byte.
const RAW: u8 = 0;
const ZSTD: u8 = 1;
const ZSTD_BITS: u8 = 2;

/// A plane's coding is chosen on this many slices of this many bytes spread over it (the whole
/// plane when it is smaller): about 1.6 % of a 2 MiB plane, coded three ways. Four slices
/// took 18 % of `create`'s CPU time; two gave the same sizes on every float pair (a tie
/// between two codings changes some bytes of the partly frozen one) and cost q8_0 0.11 %.
const SAMPLE_SLICES: usize = 2;
const SAMPLE_SLICE: usize = 16 << 10;

/// The ways the encoder tries a plane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Coding {
    /// Stored as it is: no coding shrank the sample by 0.1 %.
    Raw,
    /// zstd at [`ZSTD_LEVEL`]: planes with repeats (a fine-tune's mostly-zero high bytes).
    Zstd,
    /// zstd of the plane's bit planes: small differences whose high bits are zero (f16
    /// GGUF's planes).
    ZstdBits,
    /// Huffman-coded literals only, no match search: near the entropy of a byte plane whose
    /// bytes do not repeat in runs (a float's exponents, q8_0's quant steps), where zstd's
    /// matches cost more than they save. Decoded as any zstd frame.
    Literals,
}

/// Turns chunks into frames, reusing its zstd contexts and buffers from one chunk to the
/// next: one per worker thread.
pub(crate) struct ChunkEncoder {
    zstd: zstd::bulk::Compressor<'static>,
    level: i32,
    literals: LiteralCoder,
    planes: Vec<u8>,
    bits: Vec<u8>,
    sample: Vec<u8>,
    packed: Vec<u8>,
}

impl ChunkEncoder {
    pub(crate) fn new() -> std::io::Result<ChunkEncoder> {
        Ok(ChunkEncoder {
            zstd: zstd::bulk::Compressor::new(ZSTD_LEVEL)?,
            level: ZSTD_LEVEL,
            literals: LiteralCoder::new()?,
            planes: Vec::new(),
            bits: Vec::new(),
            sample: Vec::new(),
            packed: Vec::new(),
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
        if !codec.is_auto() {
            // The codecs before `auto`: one zstd frame of the planes (kept for the tests that
            // pin what older files hold).
            planes::encode(codec, ft, base, &mut self.planes);
            self.set_level(zstd_level(codec))?;
            out.reserve(zstd::zstd_safe::compress_bound(self.planes.len()));
            self.zstd.compress_to_buffer(&self.planes, out)?;
            return Ok(());
        }
        self.set_level(ZSTD_LEVEL)?;
        let transform = Transform::for_chunk(codec, base);
        planes::auto_encode(codec, transform, ft, base, &mut self.planes);
        out.reserve(ft.len() / 2 + 64);
        out.push(transform as u8);
        let (lens, count) = planes::auto_plane_lens(codec, ft.len());
        let planes = std::mem::take(&mut self.planes);
        let mut at = 0;
        for len in &lens[..count] {
            let plane = &planes[at..at + len];
            at += len;
            self.put_plane(plane, out)?;
        }
        self.planes = planes;
        Ok(())
    }

    fn set_level(&mut self, level: i32) -> std::io::Result<()> {
        if level != self.level {
            self.zstd.set_compression_level(level)?;
            self.level = level;
        }
        Ok(())
    }

    /// Appends one plane: its coding byte, and unless raw its length and zstd frame.
    fn put_plane(&mut self, plane: &[u8], out: &mut Vec<u8>) -> std::io::Result<()> {
        let coding = self.choose(plane)?;
        if coding != Coding::Raw {
            self.code(coding, plane)?;
            if self.packed.len() < plane.len() {
                out.push(if coding == Coding::ZstdBits {
                    ZSTD_BITS
                } else {
                    ZSTD
                });
                out.extend_from_slice(&(self.packed.len() as u32).to_le_bytes());
                out.extend_from_slice(&self.packed);
                return Ok(());
            }
        }
        out.push(RAW);
        out.extend_from_slice(plane);
        Ok(())
    }

    /// `plane` coded as `coding` into `self.packed`.
    fn code(&mut self, coding: Coding, plane: &[u8]) -> std::io::Result<()> {
        self.packed.clear();
        match coding {
            Coding::Raw => self.packed.extend_from_slice(plane),
            Coding::Zstd => {
                self.packed
                    .reserve(zstd::zstd_safe::compress_bound(plane.len()));
                self.zstd.compress_to_buffer(plane, &mut self.packed)?;
            }
            Coding::ZstdBits => {
                planes::bit_transpose_into(plane, &mut self.bits);
                self.packed
                    .reserve(zstd::zstd_safe::compress_bound(plane.len()));
                self.zstd.compress_to_buffer(&self.bits, &mut self.packed)?;
            }
            Coding::Literals => self.literals.compress(plane, &mut self.packed)?,
        }
        Ok(())
    }

    /// The coding that makes the smallest sample of `plane`, or raw if none shrinks it by
    /// 0.1 % (the bit planes of a bf16 model's sign and mantissa bytes save 0.2 %, which is what
    /// keeps it under ZipNN without a base).
    fn choose(&mut self, plane: &[u8]) -> std::io::Result<Coding> {
        let mut sample = std::mem::take(&mut self.sample);
        sample.clear();
        if plane.len() <= SAMPLE_SLICES * SAMPLE_SLICE {
            sample.extend_from_slice(plane);
        } else {
            let step = (plane.len() - SAMPLE_SLICE) / (SAMPLE_SLICES - 1);
            for k in 0..SAMPLE_SLICES {
                sample.extend_from_slice(&plane[k * step..k * step + SAMPLE_SLICE]);
            }
        }
        let mut best = (sample.len() - sample.len() / 1024, Coding::Raw);
        for coding in [Coding::Zstd, Coding::ZstdBits, Coding::Literals] {
            self.code(coding, &sample)?;
            if self.packed.len() < best.0 {
                best = (self.packed.len(), coding);
            }
        }
        self.sample = sample;
        Ok(best.1)
    }
}

/// zstd frames whose blocks hold only Huffman-coded literals: `ZSTD_compressSequences` given no
/// sequence, which the zstd crate does not wrap. The frames are ordinary zstd frames.
struct LiteralCoder(std::ptr::NonNull<zstd_sys::ZSTD_CCtx>);

// SAFETY: a ZSTD_CCtx has no tie to the thread that made it; `&mut self` keeps it to one user.
unsafe impl Send for LiteralCoder {}

impl LiteralCoder {
    fn new() -> std::io::Result<LiteralCoder> {
        let failed = || std::io::Error::other("zstd: cannot create a compression context");
        // SAFETY: plain constructor; a null result is handled.
        let ctx =
            std::ptr::NonNull::new(unsafe { zstd_sys::ZSTD_createCCtx() }).ok_or_else(failed)?;
        let coder = LiteralCoder(ctx);
        for (param, value) in [
            (
                zstd_sys::ZSTD_cParameter::ZSTD_c_compressionLevel,
                ZSTD_LEVEL,
            ),
            // ZSTD_c_literalCompressionMode: always Huffman-code the literals.
            (
                zstd_sys::ZSTD_cParameter::ZSTD_c_experimentalParam5,
                zstd_sys::ZSTD_ParamSwitch_e::ZSTD_ps_enable as i32,
            ),
        ] {
            // SAFETY: the context is live; parameters are checked by zstd.
            let code = unsafe { zstd_sys::ZSTD_CCtx_setParameter(ctx.as_ptr(), param, value) };
            check(code)?;
        }
        Ok(coder)
    }

    /// `src` as one frame into `out` (cleared first).
    fn compress(&mut self, src: &[u8], out: &mut Vec<u8>) -> std::io::Result<()> {
        out.clear();
        let cap = zstd::zstd_safe::compress_bound(src.len());
        out.reserve(cap);
        // SAFETY: `out` has room for `cap` bytes, zstd writes at most that and returns how
        // many; no sequences are passed (a null array of length 0): all of `src` is literals.
        let written = unsafe {
            zstd_sys::ZSTD_compressSequences(
                self.0.as_ptr(),
                out.as_mut_ptr().cast(),
                cap,
                std::ptr::null(),
                0,
                src.as_ptr().cast(),
                src.len(),
            )
        };
        let written = check(written)?;
        // SAFETY: zstd initialised the first `written` bytes.
        unsafe { out.set_len(written) };
        Ok(())
    }
}

impl Drop for LiteralCoder {
    fn drop(&mut self) {
        // SAFETY: the context was made by ZSTD_createCCtx and is freed once.
        unsafe { zstd_sys::ZSTD_freeCCtx(self.0.as_ptr()) };
    }
}

/// A zstd return code as a size or an error.
fn check(code: usize) -> std::io::Result<usize> {
    // SAFETY: pure functions on a return code.
    if unsafe { zstd_sys::ZSTD_isError(code) } != 0 {
        let name = unsafe { std::ffi::CStr::from_ptr(zstd_sys::ZSTD_getErrorName(code)) };
        return Err(std::io::Error::other(format!(
            "zstd: {}",
            name.to_string_lossy()
        )));
    }
    Ok(code)
}

type Error = ChunkError;

/// Turns frames back into chunks, reusing its zstd context and plane buffer: one per worker
/// thread.
pub(crate) struct ChunkDecoder {
    zstd: zstd::bulk::Decompressor<'static>,
    planes: Vec<u8>,
    bits: Vec<u8>,
}

impl ChunkDecoder {
    pub(crate) fn new() -> std::io::Result<ChunkDecoder> {
        Ok(ChunkDecoder {
            zstd: zstd::bulk::Decompressor::new()?,
            planes: Vec::new(),
            bits: Vec::new(),
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
        match base {
            Some(b) if b.len() == out.len() => out.copy_from_slice(b),
            Some(_) if frame.is_empty() => return Err(ChunkError::NoBase),
            Some(_) => return Err(ChunkError::LengthMismatch),
            None => {}
        }
        self.decode_onto(codec, frame, base.is_some(), out)
    }

    /// [`ChunkDecoder::decode`] in place: `out` holds the base's bytes when `against_base`
    /// (read into it, saving a buffer and, for a chunk equal to the base, a copy).
    pub(crate) fn decode_onto(
        &mut self,
        codec: Codec,
        frame: &[u8],
        against_base: bool,
        out: &mut [u8],
    ) -> Result<(), ChunkError> {
        if frame.is_empty() {
            return if against_base {
                Ok(())
            } else {
                Err(ChunkError::NoBase)
            };
        }
        if !(out.len() as u64).is_multiple_of(codec.unit()) {
            return Err(ChunkError::LengthMismatch);
        }
        if codec.is_auto() {
            let transform = self.unframe(codec, frame, out.len())?;
            planes::auto_decode(codec, transform, &self.planes, against_base, out);
            return Ok(());
        }
        // The codecs before `auto` (read only, from older files) decode from a base apart.
        let base = against_base.then(|| out.to_vec());
        let base = base.as_deref();
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

    /// The planes of an `auto` frame of a `len`-byte chunk into `self.planes`, and its
    /// transform.
    fn unframe(&mut self, codec: Codec, frame: &[u8], len: usize) -> Result<Transform, Error> {
        let (&t, mut rest) = frame.split_first().ok_or(ChunkError::Truncated(0))?;
        let transform = Transform::from_byte(t)
            .filter(|t| codec != Codec::AutoQ8_0 || *t == Transform::Sub)
            .ok_or(ChunkError::BadTransform(t))?;
        // Every byte of the planes is written below (a raw copy, a frame, or the bit planes).
        sized(&mut self.planes, len);
        let (lens, count) = planes::auto_plane_lens(codec, len);
        let mut at = 0;
        for (k, len) in lens[..count].iter().enumerate() {
            let plane = &mut self.planes[at..at + len];
            at += len;
            let (&coding, after) = rest.split_first().ok_or(ChunkError::Truncated(k))?;
            rest = after;
            if coding == RAW {
                if rest.len() < *len {
                    return Err(ChunkError::Truncated(k));
                }
                plane.copy_from_slice(&rest[..*len]);
                rest = &rest[*len..];
                continue;
            }
            if coding != ZSTD && coding != ZSTD_BITS {
                return Err(ChunkError::BadCoding { plane: k, coding });
            }
            let n = rest
                .get(..4)
                .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize)
                .filter(|n| *n <= rest.len() - 4)
                .ok_or(ChunkError::Truncated(k))?;
            let packed = &rest[4..4 + n];
            rest = &rest[4 + n..];
            let decoded = if coding == ZSTD {
                self.zstd.decompress_to_buffer(packed, plane)
            } else {
                self.bits.clear();
                self.bits.reserve(*len);
                self.zstd.decompress_to_buffer(packed, &mut self.bits)
            }
            .map_err(ChunkError::Zstd)?;
            if decoded != *len {
                return Err(ChunkError::WrongSize {
                    decoded,
                    expected: *len,
                });
            }
            if coding == ZSTD_BITS {
                planes::bit_untranspose_into(&self.bits, plane);
            }
        }
        if !rest.is_empty() {
            return Err(ChunkError::Trailing(rest.len()));
        }
        Ok(transform)
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
