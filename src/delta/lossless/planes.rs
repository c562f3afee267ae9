//! The byte planes of one chunk: the fine-tuned bytes against the base's (XOR, or subtraction
//! mod 256 for q8_0's quants), regrouped so that bytes of the same role sit together, which is
//! what zstd compresses well (ZipNN's byte grouping over BitX's XOR). Every step is a bijection
//! on bytes, so decoding gives back any bit pattern exactly: NaN payloads, signed zeros,
//! subnormals. Without a base the base is taken as zeros.

use crate::delta::pipeline::sized;
use crate::formats::wdelta::lossless::Codec;

/// Q8_0 block: a float16 scale, then 32 int8 quants.
const Q8_0_BLOCK: usize = 34;
const Q8_0_SCALE: usize = 2;

/// The codec for a tensor of the core's dtype `dtype` holding `len` bytes. The `auto` codecs
/// choose each chunk's transform and each plane's coding themselves (see [`Transform`] and the
/// chunk encoder), so a tensor stored whole and one stored against a base get the same codec
/// (`_against_base` is kept for the caller's sake).
pub(crate) fn codec_for(dtype: &str, len: u64, _against_base: bool) -> Codec {
    let codec = match crate::dtype::by_name(dtype) {
        Some(_) if dtype == "q8_0" => Codec::AutoQ8_0,
        Some(d) if d.block_size == 1 => match d.block_bits {
            16 => Codec::Auto2,
            32 => Codec::Auto4,
            64 => Codec::Auto8,
            _ => Codec::Bytes,
        },
        _ => Codec::Bytes,
    };
    if len.is_multiple_of(codec.unit()) {
        codec
    } else {
        Codec::Bytes
    }
}

fn base_byte(base: Option<&[u8]>, i: usize) -> u8 {
    base.map_or(0, |b| b[i])
}

/// The planes of `ft` (a whole number of the codec's units) against `base` (same length) into
/// `out` (cleared first).
pub(crate) fn encode(codec: Codec, ft: &[u8], base: Option<&[u8]>, out: &mut Vec<u8>) {
    debug_assert!(base.is_none_or(|b| b.len() == ft.len()));
    out.clear();
    out.resize(ft.len(), 0);
    match codec {
        Codec::Bytes => match base {
            Some(b) => {
                for ((o, f), b) in out.iter_mut().zip(ft).zip(b) {
                    *o = f ^ b;
                }
            }
            None => out.copy_from_slice(ft),
        },
        Codec::Planes2 => split::<2>(ft, base, out),
        Codec::Planes4 => split::<4>(ft, base, out),
        Codec::Planes8 => split::<8>(ft, base, out),
        Codec::Sub2 => {
            sub_split::<2>(ft, base, out);
            let n = ft.len() / 2;
            let (lo, hi) = out.split_at_mut(n);
            bit_transpose(lo);
            bit_transpose(hi);
        }
        Codec::Q8_0Z => {
            let n = ft.len() / Q8_0_BLOCK;
            let (scales, quants) = out.split_at_mut(n * Q8_0_SCALE);
            let mut ft_scales = Vec::with_capacity(n * Q8_0_SCALE);
            let mut base_scales = Vec::with_capacity(base.map_or(0, |_| n * Q8_0_SCALE));
            for i in 0..n {
                let at = i * Q8_0_BLOCK;
                ft_scales.extend_from_slice(&ft[at..at + Q8_0_SCALE]);
                if let Some(b) = base {
                    base_scales.extend_from_slice(&b[at..at + Q8_0_SCALE]);
                }
                for j in 0..32 {
                    let p = at + Q8_0_SCALE + j;
                    quants[i * 32 + j] = zigzag8(ft[p].wrapping_sub(base_byte(base, p)));
                }
            }
            sub_split::<2>(&ft_scales, base.map(|_| base_scales.as_slice()), scales);
            bit_transpose(quants);
        }
        Codec::Sub4 => sub_split::<4>(ft, base, out),
        Codec::Sub8 => sub_split::<8>(ft, base, out),
        Codec::Auto2 | Codec::Auto4 | Codec::Auto8 | Codec::AutoQ8_0 => {
            unreachable!("the auto codecs are coded by auto_encode")
        }
        Codec::Q8_0 => {
            let n = ft.len() / Q8_0_BLOCK;
            let (scales, quants) = out.split_at_mut(n * Q8_0_SCALE);
            for i in 0..n {
                let at = i * Q8_0_BLOCK;
                for k in 0..Q8_0_SCALE {
                    scales[k * n + i] = ft[at + k] ^ base_byte(base, at + k);
                }
                let q = &mut quants[i * 32..i * 32 + 32];
                for (j, o) in q.iter_mut().enumerate() {
                    let p = at + Q8_0_SCALE + j;
                    *o = ft[p].wrapping_sub(base_byte(base, p));
                }
            }
        }
    }
}

/// Inverts [`encode`]: the fine-tuned bytes from `planes` and `base` into `out` (the planes'
/// length).
pub(crate) fn decode(codec: Codec, planes: &[u8], base: Option<&[u8]>, out: &mut [u8]) {
    debug_assert_eq!(planes.len(), out.len());
    match codec {
        Codec::Bytes => match base {
            Some(b) => {
                for ((o, p), b) in out.iter_mut().zip(planes).zip(b) {
                    *o = p ^ b;
                }
            }
            None => out.copy_from_slice(planes),
        },
        Codec::Planes2 => join::<2>(planes, base, out),
        Codec::Planes4 => join::<4>(planes, base, out),
        Codec::Planes8 => join::<8>(planes, base, out),
        Codec::Sub2 => {
            let n = planes.len() / 2;
            let mut p = planes.to_vec();
            let (lo, hi) = p.split_at_mut(n);
            bit_untranspose(lo);
            bit_untranspose(hi);
            sub_join::<2>(&p, base, out);
        }
        Codec::Q8_0Z => {
            let n = out.len() / Q8_0_BLOCK;
            let (scales, quants) = planes.split_at(n * Q8_0_SCALE);
            let mut q = quants.to_vec();
            bit_untranspose(&mut q);
            let mut base_scales = Vec::with_capacity(base.map_or(0, |_| n * Q8_0_SCALE));
            if let Some(b) = base {
                for i in 0..n {
                    let at = i * Q8_0_BLOCK;
                    base_scales.extend_from_slice(&b[at..at + Q8_0_SCALE]);
                }
            }
            let mut ft_scales = vec![0u8; n * Q8_0_SCALE];
            sub_join::<2>(scales, base.map(|_| base_scales.as_slice()), &mut ft_scales);
            for i in 0..n {
                let at = i * Q8_0_BLOCK;
                out[at..at + Q8_0_SCALE].copy_from_slice(&ft_scales[i * 2..i * 2 + 2]);
                for j in 0..32 {
                    let p = at + Q8_0_SCALE + j;
                    out[p] = unzigzag8(q[i * 32 + j]).wrapping_add(base_byte(base, p));
                }
            }
        }
        Codec::Sub4 => sub_join::<4>(planes, base, out),
        Codec::Sub8 => sub_join::<8>(planes, base, out),
        Codec::Auto2 | Codec::Auto4 | Codec::Auto8 | Codec::AutoQ8_0 => {
            unreachable!("the auto codecs are decoded by auto_decode")
        }
        Codec::Q8_0 => {
            let n = out.len() / Q8_0_BLOCK;
            let (scales, quants) = planes.split_at(n * Q8_0_SCALE);
            for i in 0..n {
                let at = i * Q8_0_BLOCK;
                for k in 0..Q8_0_SCALE {
                    out[at + k] = scales[k * n + i] ^ base_byte(base, at + k);
                }
                for j in 0..32 {
                    let p = at + Q8_0_SCALE + j;
                    out[p] = quants[i * 32 + j].wrapping_add(base_byte(base, p));
                }
            }
        }
    }
}

/// How an `auto` codec's chunk turns elements into planes: its frame's first byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Transform {
    /// (fine-tune - base) mod 2^bits, zigzagged: a fine-tune's small steps become small numbers
    /// (on the pairs of scripts/bench-lossless.sh it beat XOR on every float pair).
    Sub = 0,
    /// fine-tune XOR base, the top (sign) bit rotated to bit 0: a float's top byte then holds
    /// only exponent bits, which a Huffman coder takes to their entropy (no base: a bf16 model
    /// 18.0 MB with `Sub`, 16.5 MB with this).
    XorRotate = 1,
}

impl Transform {
    pub(crate) fn from_byte(b: u8) -> Option<Transform> {
        match b {
            0 => Some(Transform::Sub),
            1 => Some(Transform::XorRotate),
            _ => None,
        }
    }

    /// The transform of a chunk: against a real base the difference, else (no base, or an
    /// all-zero one) the rotated bits. q8_0 has only the difference.
    pub(crate) fn for_chunk(codec: Codec, base: Option<&[u8]>) -> Transform {
        let no_base = base.is_none_or(|b| b.iter().all(|x| *x == 0));
        if no_base && codec != Codec::AutoQ8_0 {
            Transform::XorRotate
        } else {
            Transform::Sub
        }
    }
}

/// The lengths of the planes of an `auto` codec's chunk of `len` bytes (whole units), in
/// frame order.
pub(crate) fn auto_plane_lens(codec: Codec, len: usize) -> ([usize; 8], usize) {
    let mut lens = [0usize; 8];
    match codec {
        Codec::AutoQ8_0 => {
            let n = len / Q8_0_BLOCK;
            lens[..3].copy_from_slice(&[n, n, 32 * n]);
            (lens, 3)
        }
        _ => {
            let s = codec.unit() as usize;
            let n = len / s;
            lens[..s].fill(n);
            (lens, s)
        }
    }
}

/// The planes of an `auto` codec's chunk (see [`auto_plane_lens`]) into `out` (cleared
/// first). `transform` must be [`Transform::Sub`] for q8_0.
pub(crate) fn auto_encode(
    codec: Codec,
    transform: Transform,
    ft: &[u8],
    base: Option<&[u8]>,
    out: &mut Vec<u8>,
) {
    debug_assert!(base.is_none_or(|b| b.len() == ft.len()));
    // Every byte is written below: not zeroed first.
    sized(out, ft.len());
    match (codec, transform) {
        (Codec::AutoQ8_0, _) => {
            let n = ft.len() / Q8_0_BLOCK;
            let (scales, quants) = out.split_at_mut(n * Q8_0_SCALE);
            let ft_scales = q8_0_scales(ft);
            let base_scales = base.map(q8_0_scales);
            for i in 0..n {
                let at = i * Q8_0_BLOCK;
                let q = &mut quants[i * 32..i * 32 + 32];
                let f = &ft[at + Q8_0_SCALE..at + Q8_0_BLOCK];
                match base {
                    Some(b) => {
                        let b = &b[at + Q8_0_SCALE..at + Q8_0_BLOCK];
                        for ((o, f), b) in q.iter_mut().zip(f).zip(b) {
                            *o = zigzag8(f.wrapping_sub(*b));
                        }
                    }
                    None => {
                        for (o, f) in q.iter_mut().zip(f) {
                            *o = zigzag8(*f);
                        }
                    }
                }
            }
            sub_split::<2>(&ft_scales, base_scales.as_deref(), scales);
        }
        (c, t) => transpose(c, t, Job::Split { ft, base, out }),
    }
}

/// The float16 scales of q8_0 blocks, in order.
fn q8_0_scales(blocks: &[u8]) -> Vec<u8> {
    let mut scales = Vec::with_capacity(blocks.len() / Q8_0_BLOCK * Q8_0_SCALE);
    for b in blocks.chunks_exact(Q8_0_BLOCK) {
        scales.extend_from_slice(&b[..Q8_0_SCALE]);
    }
    scales
}

/// Inverts [`auto_encode`] in place: `out` holds the base's bytes when `against_base` (else
/// the base is zeros and `out`'s bytes are not read) and is given the fine-tune's from
/// `planes` (the same length).
pub(crate) fn auto_decode(
    codec: Codec,
    transform: Transform,
    planes: &[u8],
    against_base: bool,
    out: &mut [u8],
) {
    debug_assert_eq!(planes.len(), out.len());
    match (codec, transform) {
        (Codec::AutoQ8_0, _) => {
            let n = out.len() / Q8_0_BLOCK;
            let (scales, quants) = planes.split_at(n * Q8_0_SCALE);
            let base_scales = against_base.then(|| q8_0_scales(out));
            let mut ft_scales = vec![0u8; n * Q8_0_SCALE];
            sub_join::<2>(scales, base_scales.as_deref(), &mut ft_scales);
            let keep = if against_base { 0xff } else { 0 };
            for ((o, q), s) in out
                .chunks_exact_mut(Q8_0_BLOCK)
                .zip(quants.chunks_exact(32))
                .zip(ft_scales.chunks_exact(Q8_0_SCALE))
            {
                o[..Q8_0_SCALE].copy_from_slice(s);
                for (o, q) in o[Q8_0_SCALE..].iter_mut().zip(q) {
                    *o = unzigzag8(*q).wrapping_add(*o & keep);
                }
            }
        }
        (c, t) => transpose(
            c,
            t,
            Job::Join {
                planes,
                against_base,
                out,
            },
        ),
    }
}

/// Elements coded a block at a time, so that each plane is written (and read) as a run of
/// bytes rather than one byte every `n` (twice as fast as [`sub_split`] on bf16).
const BLOCK: usize = 256;

/// An element of an `auto` codec as the unsigned integer of its width, so that the element
/// loops work on 16, 32 or 64-bit lanes (a bf16 plane's loop then fills a vector register
/// with 16 elements, not 4 as on `u64`).
trait Word: Copy + Default + std::ops::BitAnd<Output = Self> {
    const BYTES: usize;
    fn load(bytes: &[u8]) -> Self;
    fn store(self, out: &mut [u8]);
    /// All ones if `yes`, else zero.
    fn ones(yes: bool) -> Self;
    /// Byte `k` (little-endian).
    fn byte(self, k: usize) -> u8;
    /// `self` with byte `k` ORed in.
    fn or_byte(self, k: usize, b: u8) -> Self;
    /// (fine-tune - base), zigzagged: 0, -1, 1, -2, ... become 0, 1, 2, 3, ...
    fn forward_sub(f: Self, b: Self) -> Self;
    /// fine-tune XOR base, the top (sign) bit rotated to bit 0.
    fn forward_rotate(f: Self, b: Self) -> Self;
    /// The inverses: the fine-tune's element from the coded one `z` and the base's `b`.
    fn backward_sub(z: Self, b: Self) -> Self;
    fn backward_rotate(z: Self, b: Self) -> Self;
}

macro_rules! word {
    ($u:ty, $i:ty) => {
        impl Word for $u {
            const BYTES: usize = std::mem::size_of::<$u>();
            #[inline(always)]
            fn load(bytes: &[u8]) -> $u {
                <$u>::from_le_bytes(bytes.try_into().expect("one element"))
            }
            #[inline(always)]
            fn store(self, out: &mut [u8]) {
                out.copy_from_slice(&self.to_le_bytes());
            }
            #[inline(always)]
            fn ones(yes: bool) -> $u {
                if yes { <$u>::MAX } else { 0 }
            }
            #[inline(always)]
            fn byte(self, k: usize) -> u8 {
                (self >> (8 * k)) as u8
            }
            #[inline(always)]
            fn or_byte(self, k: usize, b: u8) -> $u {
                self | <$u>::from(b) << (8 * k)
            }
            #[inline(always)]
            fn forward_sub(f: $u, b: $u) -> $u {
                let d = f.wrapping_sub(b);
                (d << 1) ^ ((d as $i) >> (<$u>::BITS - 1)) as $u
            }
            #[inline(always)]
            fn forward_rotate(f: $u, b: $u) -> $u {
                (f ^ b).rotate_left(1)
            }
            #[inline(always)]
            fn backward_sub(z: $u, b: $u) -> $u {
                b.wrapping_add((z >> 1) ^ (z & 1).wrapping_neg())
            }
            #[inline(always)]
            fn backward_rotate(z: $u, b: $u) -> $u {
                z.rotate_right(1) ^ b
            }
        }
    };
}
word!(u16, i16);
word!(u32, i32);
word!(u64, i64);

/// What [`transpose`] does: plane k holds byte k of every transformed element.
enum Job<'a> {
    /// The planes of the fine-tune's elements `ft` against `base` (zeros when None), for
    /// `create`.
    Split {
        ft: &'a [u8],
        base: Option<&'a [u8]>,
        out: &'a mut [u8],
    },
    /// The fine-tune's elements from `planes`, in place over the base's in `out` (see
    /// [`auto_decode`]), for `apply`.
    Join {
        planes: &'a [u8],
        against_base: bool,
        out: &'a mut [u8],
    },
}

/// Runs `job`, compiled for AVX2 too, which runs when the CPU has it: the same integer
/// operations, so the same bytes.
fn transpose(codec: Codec, t: Transform, job: Job) {
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn with_avx2(codec: Codec, t: Transform, job: Job) {
        by_width(codec, t, job);
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2.
        unsafe { with_avx2(codec, t, job) };
        return;
    }
    by_width(codec, t, job);
}

#[inline(always)]
fn by_width(codec: Codec, t: Transform, job: Job) {
    match codec {
        Codec::Auto2 => by_transform::<u16>(t, job),
        Codec::Auto4 => by_transform::<u32>(t, job),
        Codec::Auto8 => by_transform::<u64>(t, job),
        _ => unreachable!("only the auto codecs of 2, 4 and 8 bytes transpose elements"),
    }
}

/// One loop per transform and direction, so that the element loop has no branch.
#[inline(always)]
fn by_transform<W: Word>(t: Transform, job: Job) {
    match (job, t) {
        (Job::Split { ft, base, out }, Transform::Sub) => split_by(ft, base, out, W::forward_sub),
        (Job::Split { ft, base, out }, Transform::XorRotate) => {
            split_by(ft, base, out, W::forward_rotate);
        }
        (
            Job::Join {
                planes,
                against_base,
                out,
            },
            Transform::Sub,
        ) => {
            join_by(planes, against_base, out, W::backward_sub);
        }
        (
            Job::Join {
                planes,
                against_base,
                out,
            },
            Transform::XorRotate,
        ) => {
            join_by(planes, against_base, out, W::backward_rotate);
        }
    }
}

#[inline(always)]
fn split_by<W: Word>(ft: &[u8], base: Option<&[u8]>, out: &mut [u8], forward: impl Fn(W, W) -> W) {
    let s = W::BYTES;
    let n = ft.len() / s;
    let mut z = [W::default(); BLOCK];
    for i in (0..n).step_by(BLOCK) {
        let len = BLOCK.min(n - i);
        let f = ft[i * s..(i + len) * s].chunks_exact(s);
        match base {
            Some(b) => {
                let b = b[i * s..(i + len) * s].chunks_exact(s);
                for ((z, f), b) in z.iter_mut().zip(f).zip(b) {
                    *z = forward(W::load(f), W::load(b));
                }
            }
            None => {
                for (z, f) in z.iter_mut().zip(f) {
                    *z = forward(W::load(f), W::default());
                }
            }
        }
        for k in 0..s {
            for (o, z) in out[k * n + i..k * n + i + len].iter_mut().zip(&z) {
                *o = z.byte(k);
            }
        }
    }
}

/// The inverse of [`split_by`], in place over the base's elements in `out` (zeros unless
/// `against_base`).
#[inline(always)]
fn join_by<W: Word>(
    planes: &[u8],
    against_base: bool,
    out: &mut [u8],
    backward: impl Fn(W, W) -> W,
) {
    let s = W::BYTES;
    let n = out.len() / s;
    let keep = W::ones(against_base);
    let mut z = [W::default(); BLOCK];
    for i in (0..n).step_by(BLOCK) {
        let len = BLOCK.min(n - i);
        z[..len].fill(W::default());
        for k in 0..s {
            for (z, p) in z.iter_mut().zip(&planes[k * n + i..k * n + i + len]) {
                *z = z.or_byte(k, *p);
            }
        }
        for (o, z) in out[i * s..(i + len) * s].chunks_exact_mut(s).zip(&z) {
            backward(*z, W::load(o) & keep).store(o);
        }
    }
}

/// [`bit_transpose`] of `src` into `dst` (cleared first).
pub(crate) fn bit_transpose_into(src: &[u8], dst: &mut Vec<u8>) {
    let blocks = src.len() / 8;
    sized(dst, src.len())[blocks * 8..].copy_from_slice(&src[blocks * 8..]);
    #[cfg(target_arch = "x86_64")]
    let done = if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2.
        unsafe { bit_transpose_avx2(src, dst, blocks) }
    } else {
        0
    };
    #[cfg(not(target_arch = "x86_64"))]
    let done = 0;
    for (j, c) in src.chunks_exact(8).enumerate().skip(done) {
        let x = transpose8(u64::from_le_bytes(c.try_into().expect("8 bytes"))).to_le_bytes();
        for k in 0..8 {
            dst[k * blocks + j] = x[k];
        }
    }
}

/// [`bit_transpose_into`]'s blocks of 8 bytes four at a time: bit k of 32 bytes is one
/// `movemask` once the bytes are shifted left by 7 - k, which is 4 bytes of plane k. Returns
/// the blocks done (a multiple of 4; the caller does the rest).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn bit_transpose_avx2(src: &[u8], dst: &mut [u8], blocks: usize) -> usize {
    use std::arch::x86_64::{__m256i, _mm256_add_epi8, _mm256_loadu_si256, _mm256_movemask_epi8};
    let mut j = 0;
    while j + 4 <= blocks {
        let bytes = &src[j * 8..j * 8 + 32];
        // SAFETY: `bytes` holds the 32 bytes read (an unaligned load).
        let mut v = unsafe { _mm256_loadu_si256(bytes.as_ptr().cast::<__m256i>()) };
        for k in (0..8).rev() {
            let bits = _mm256_movemask_epi8(v) as u32;
            dst[k * blocks + j..k * blocks + j + 4].copy_from_slice(&bits.to_le_bytes());
            // Each byte shifted left by one (no carry between bytes): the next bit on top.
            v = _mm256_add_epi8(v, v);
        }
        j += 4;
    }
    j
}

/// The inverse of [`bit_transpose_into`]: `src` into `dst` (the same length).
pub(crate) fn bit_untranspose_into(src: &[u8], dst: &mut [u8]) {
    let blocks = src.len() / 8;
    #[cfg(target_arch = "x86_64")]
    let done = if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2.
        unsafe { bit_untranspose_avx2(src, dst, blocks) }
    } else {
        0
    };
    #[cfg(not(target_arch = "x86_64"))]
    let done = 0;
    for (j, o) in dst.chunks_exact_mut(8).enumerate().skip(done) {
        let mut x = [0u8; 8];
        for k in 0..8 {
            x[k] = src[k * blocks + j];
        }
        o.copy_from_slice(&transpose8(u64::from_le_bytes(x)).to_le_bytes());
    }
    dst[blocks * 8..].copy_from_slice(&src[blocks * 8..]);
}

/// [`bit_untranspose_into`]'s blocks four at a time: 4 bytes of plane k hold bit k of 32
/// bytes; each is spread to its byte (byte i takes bit i % 8 of the plane's byte i / 8).
/// Returns the blocks done (a multiple of 4).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn bit_untranspose_avx2(src: &[u8], dst: &mut [u8], blocks: usize) -> usize {
    use std::arch::x86_64::{
        __m256i, _mm256_and_si256, _mm256_cmpeq_epi8, _mm256_or_si256, _mm256_set1_epi8,
        _mm256_set1_epi32, _mm256_setr_epi8, _mm256_setzero_si256, _mm256_shuffle_epi8,
        _mm256_storeu_si256,
    };
    #[rustfmt::skip]
    let which = _mm256_setr_epi8(
        0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
        2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3,
    );
    #[rustfmt::skip]
    let bit = _mm256_setr_epi8(
        1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32, 64, -128,
        1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32, 64, -128,
    );
    let mut j = 0;
    while j + 4 <= blocks {
        let mut acc = _mm256_setzero_si256();
        for k in 0..8 {
            let at = k * blocks + j;
            let m = u32::from_le_bytes(src[at..at + 4].try_into().expect("4 bytes"));
            let spread = _mm256_shuffle_epi8(_mm256_set1_epi32(m as i32), which);
            let set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
            acc = _mm256_or_si256(acc, _mm256_and_si256(set, _mm256_set1_epi8(1 << k)));
        }
        let out = &mut dst[j * 8..j * 8 + 32];
        // SAFETY: `out` has room for the 32 bytes stored (an unaligned store).
        unsafe { _mm256_storeu_si256(out.as_mut_ptr().cast::<__m256i>(), acc) };
        j += 4;
    }
    j
}

/// Plane k holds byte k of every element.
fn split<const S: usize>(ft: &[u8], base: Option<&[u8]>, out: &mut [u8]) {
    let n = ft.len() / S;
    let mut x = [0u8; S];
    for i in 0..n {
        let e = &ft[i * S..i * S + S];
        match base {
            Some(b) => {
                let b = &b[i * S..i * S + S];
                for k in 0..S {
                    x[k] = e[k] ^ b[k];
                }
            }
            None => x.copy_from_slice(e),
        }
        for k in 0..S {
            out[k * n + i] = x[k];
        }
    }
}

fn join<const S: usize>(planes: &[u8], base: Option<&[u8]>, out: &mut [u8]) {
    let n = out.len() / S;
    for i in 0..n {
        for k in 0..S {
            let p = planes[k * n + i];
            out[i * S + k] = match base {
                Some(b) => p ^ b[i * S + k],
                None => p,
            };
        }
    }
}

fn zigzag8(d: u8) -> u8 {
    (d << 1) ^ ((d as i8) >> 7) as u8
}

fn unzigzag8(z: u8) -> u8 {
    (z >> 1) ^ (z & 1).wrapping_neg()
}

/// The 8 x 8 bit transpose of a little-endian u64 (its own inverse): byte k of the result holds
/// bit k of each byte.
fn transpose8(mut x: u64) -> u64 {
    let t = (x ^ (x >> 7)) & 0x00AA_00AA_00AA_00AA;
    x ^= t ^ (t << 7);
    let t = (x ^ (x >> 14)) & 0x0000_CCCC_0000_CCCC;
    x ^= t ^ (t << 14);
    let t = (x ^ (x >> 28)) & 0x0000_0000_F0F0_F0F0;
    x ^= t ^ (t << 28);
    x
}

/// Bit planes of `bytes` in place: of the first whole multiple of 8 bytes, plane k (an eighth
/// of them) holds bit k of every byte, 8 bytes per plane byte. The tail stays as it is.
fn bit_transpose(bytes: &mut [u8]) {
    let blocks = bytes.len() / 8;
    let mut out = vec![0u8; blocks * 8];
    for (j, c) in bytes.chunks_exact(8).enumerate() {
        let x = transpose8(u64::from_le_bytes(c.try_into().expect("8 bytes"))).to_le_bytes();
        for k in 0..8 {
            out[k * blocks + j] = x[k];
        }
    }
    bytes[..blocks * 8].copy_from_slice(&out);
}

/// The inverse of [`bit_transpose`].
fn bit_untranspose(bytes: &mut [u8]) {
    let blocks = bytes.len() / 8;
    let mut out = vec![0u8; blocks * 8];
    for (j, o) in out.chunks_exact_mut(8).enumerate() {
        let mut x = [0u8; 8];
        for k in 0..8 {
            x[k] = bytes[k * blocks + j];
        }
        o.copy_from_slice(&transpose8(u64::from_le_bytes(x)).to_le_bytes());
    }
    bytes[..blocks * 8].copy_from_slice(&out);
}

/// Element `i` of `bytes` (elements of `S` bytes) as a little-endian integer.
fn element<const S: usize>(bytes: &[u8], i: usize) -> u64 {
    let mut v = [0u8; 8];
    v[..S].copy_from_slice(&bytes[i * S..i * S + S]);
    u64::from_le_bytes(v)
}

/// All ones in the low `S` bytes.
const fn mask<const S: usize>() -> u64 {
    if S == 8 { u64::MAX } else { (1 << (8 * S)) - 1 }
}

/// (ft - base) mod 2^bits, zigzagged: 0, -1, 1, -2, ... become 0, 1, 2, 3, ...
fn sub_split<const S: usize>(ft: &[u8], base: Option<&[u8]>, out: &mut [u8]) {
    let n = ft.len() / S;
    let m = mask::<S>();
    for i in 0..n {
        let b = base.map_or(0, |b| element::<S>(b, i));
        let d = element::<S>(ft, i).wrapping_sub(b) & m;
        let negative = (d >> (8 * S - 1)) & 1;
        let z = ((d << 1) & m) ^ negative.wrapping_neg() & m;
        for k in 0..S {
            out[k * n + i] = (z >> (8 * k)) as u8;
        }
    }
}

fn sub_join<const S: usize>(planes: &[u8], base: Option<&[u8]>, out: &mut [u8]) {
    let n = out.len() / S;
    let m = mask::<S>();
    for i in 0..n {
        let mut z = 0u64;
        for k in 0..S {
            z |= u64::from(planes[k * n + i]) << (8 * k);
        }
        let d = (z >> 1) ^ (z & 1).wrapping_neg() & m;
        let b = base.map_or(0, |b| element::<S>(b, i));
        let v = b.wrapping_add(d) & m;
        out[i * S..i * S + S].copy_from_slice(&v.to_le_bytes()[..S]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_codec_inverts_on_every_byte_value() {
        let len = 34 * 8 * 3;
        let ft: Vec<u8> = (0..len).map(|i| (i * 97 + 13) as u8).collect();
        let base: Vec<u8> = (0..len).map(|i| (i * 31 + 7) as u8).collect();
        for codec in Codec::ALL.into_iter().filter(|c| !c.is_auto()) {
            for b in [None, Some(base.as_slice())] {
                let mut planes = Vec::new();
                encode(codec, &ft, b, &mut planes);
                let mut back = vec![0u8; len];
                decode(codec, &planes, b, &mut back);
                assert_eq!(back, ft, "{codec:?} base {}", b.is_some());
            }
        }
    }

    /// The planes the codecs written before the `auto` ones make, frozen: files already written
    /// decode only while these stay as they are.
    #[test]
    fn the_older_codecs_planes_do_not_change() {
        let len = 34 * 8 * 3;
        let ft: Vec<u8> = (0..len).map(|i| (i * 97 + 13) as u8).collect();
        let base: Vec<u8> = (0..len).map(|i| (i * 31 + 7) as u8).collect();
        let mut all = Vec::new();
        for codec in Codec::ALL.into_iter().filter(|c| !c.is_auto()) {
            for b in [None, Some(base.as_slice())] {
                let mut planes = Vec::new();
                encode(codec, &ft, b, &mut planes);
                all.extend_from_slice(&planes);
            }
        }
        let digest = crate::digest::hex(&<sha2::Sha256 as sha2::Digest>::digest(&all));
        assert_eq!(
            digest,
            "0cab2c58e0287b22bb17e2b1ba96226fffd44d9554f6f190834910a97cdd68c5"
        );
    }

    #[test]
    fn every_auto_transform_inverts_on_every_byte_value() {
        let len = 34 * 8 * 3;
        let ft: Vec<u8> = (0..len).map(|i| (i * 97 + 13) as u8).collect();
        let base: Vec<u8> = (0..len).map(|i| (i * 31 + 7) as u8).collect();
        for codec in Codec::ALL.into_iter().filter(|c| c.is_auto()) {
            for t in [Transform::Sub, Transform::XorRotate] {
                if codec == Codec::AutoQ8_0 && t == Transform::XorRotate {
                    continue;
                }
                for b in [None, Some(base.as_slice())] {
                    let mut planes = Vec::new();
                    auto_encode(codec, t, &ft, b, &mut planes);
                    let mut back = b.map_or_else(|| vec![0xa5u8; len], <[u8]>::to_vec);
                    auto_decode(codec, t, &planes, b.is_some(), &mut back);
                    assert_eq!(back, ft, "{codec:?} {t:?} base {}", b.is_some());
                }
            }
        }
    }

    #[test]
    fn the_auto_subtraction_is_the_sub_codecs() {
        let ft: Vec<u8> = (0..8 * 700).map(|i| (i * 97 + 13) as u8).collect();
        let base: Vec<u8> = (0..8 * 700).map(|i| (i * 31 + 7) as u8).collect();
        for b in [None, Some(base.as_slice())] {
            let (mut old, mut new) = (Vec::new(), Vec::new());
            encode(Codec::Sub4, &ft, b, &mut old);
            auto_encode(Codec::Auto4, Transform::Sub, &ft, b, &mut new);
            assert_eq!(old, new);
            encode(Codec::Sub8, &ft, b, &mut old);
            auto_encode(Codec::Auto8, Transform::Sub, &ft, b, &mut new);
            assert_eq!(old, new);
        }
    }

    #[test]
    fn the_rotation_puts_a_float_s_exponent_alone_in_its_top_plane() {
        // bf16 -1.5: sign 1, exponent 127, mantissa 0b1000000.
        let ft = 0xbfc0u16.to_le_bytes();
        let mut planes = Vec::new();
        auto_encode(Codec::Auto2, Transform::XorRotate, &ft, None, &mut planes);
        assert_eq!(planes, [0b1000_0001, 127]);
        let mut t = Vec::new();
        let input: Vec<u8> = (0..19u32).map(|i| (i * 37 + 11) as u8).collect();
        bit_transpose_into(&input, &mut t);
        let mut back = vec![0u8; input.len()];
        bit_untranspose_into(&t, &mut back);
        assert_eq!(back, input);
    }

    #[test]
    fn the_bit_transposes_into_are_the_scalar_ones_at_every_length() {
        let input: Vec<u8> = (0..1000u32).map(|i| (i * 37 + i / 7 + 11) as u8).collect();
        for len in [0, 7, 8, 31, 32, 33, 40, 64, 95, 96, 200, 1000] {
            let src = &input[..len];
            let mut fast = Vec::new();
            bit_transpose_into(src, &mut fast);
            let mut scalar = src.to_vec();
            bit_transpose(&mut scalar);
            assert_eq!(fast, scalar, "{len} bytes");
            let mut back = vec![0u8; len];
            bit_untranspose_into(&fast, &mut back);
            assert_eq!(back, src, "{len} bytes back");
            bit_untranspose(&mut scalar);
            assert_eq!(scalar, src, "{len} bytes back, scalar");
        }
    }

    #[test]
    fn the_bit_transpose_groups_bit_k_of_every_byte_in_plane_k() {
        let input: Vec<u8> = (0..19u32).map(|i| (i * 37 + 11) as u8).collect();
        let mut t = input.clone();
        bit_transpose(&mut t);
        for k in 0..8 {
            for i in 0..16 {
                let got = (t[k * 2 + i / 8] >> (i % 8)) & 1;
                assert_eq!(got, (input[i] >> k) & 1, "bit {k} of byte {i}");
            }
        }
        assert_eq!(t[16..], input[16..], "the tail stays");
        bit_untranspose(&mut t);
        assert_eq!(t, input);
    }

    #[test]
    fn equal_bytes_give_zero_planes() {
        let ft: Vec<u8> = (0..340).map(|i| i as u8).collect();
        let mut planes = Vec::new();
        encode(Codec::Q8_0, &ft, Some(&ft), &mut planes);
        assert!(planes.iter().all(|b| *b == 0));
    }
}
