//! The byte planes of one chunk: the fine-tuned bytes against the base's (XOR, or subtraction
//! mod 256 for q8_0's quants), regrouped so that bytes of the same role sit together, which is
//! what zstd compresses well (ZipNN's byte grouping over BitX's XOR). Every step is a bijection
//! on bytes, so decoding gives back any bit pattern exactly: NaN payloads, signed zeros,
//! subnormals. Without a base the base is taken as zeros.

use crate::formats::wdelta::lossless::Codec;

/// Q8_0 block: a float16 scale, then 32 int8 quants.
const Q8_0_BLOCK: usize = 34;
const Q8_0_SCALE: usize = 2;

/// The codec for a tensor of the core's dtype `dtype` holding `len` bytes, stored against a
/// base's tensor (`against_base`) or whole. Against a base, elements are subtracted and
/// zigzagged (on the generated pairs of scripts/bench-lossless.sh: bf16 planes 2.53 -> 2.27 MB,
/// float32 7.38 -> 7.08 MB); whole, the sign and exponent stay together in the top plane.
pub(crate) fn codec_for(dtype: &str, len: u64, against_base: bool) -> Codec {
    let codec = match crate::dtype::by_name(dtype) {
        Some(_) if dtype == "q8_0" => Codec::Q8_0,
        Some(d) if d.block_size == 1 => match (d.block_bits, against_base) {
            (16, false) => Codec::Planes2,
            (32, false) => Codec::Planes4,
            (64, false) => Codec::Planes8,
            (16, true) => Codec::Sub2,
            (32, true) => Codec::Sub4,
            (64, true) => Codec::Sub8,
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
        Codec::Sub2 => sub_split::<2>(ft, base, out),
        Codec::Sub4 => sub_split::<4>(ft, base, out),
        Codec::Sub8 => sub_split::<8>(ft, base, out),
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
        Codec::Sub2 => sub_join::<2>(planes, base, out),
        Codec::Sub4 => sub_join::<4>(planes, base, out),
        Codec::Sub8 => sub_join::<8>(planes, base, out),
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
            z |= (planes[k * n + i] as u64) << (8 * k);
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
        for codec in [
            Codec::Bytes,
            Codec::Planes2,
            Codec::Planes4,
            Codec::Planes8,
            Codec::Q8_0,
            Codec::Sub2,
            Codec::Sub4,
            Codec::Sub8,
        ] {
            for b in [None, Some(base.as_slice())] {
                let mut planes = Vec::new();
                encode(codec, &ft, b, &mut planes);
                let mut back = vec![0u8; len];
                decode(codec, &planes, b, &mut back);
                assert_eq!(back, ft, "{codec:?} base {}", b.is_some());
            }
        }
    }

    #[test]
    fn equal_bytes_give_zero_planes() {
        let ft: Vec<u8> = (0..340).map(|i| i as u8).collect();
        let mut planes = Vec::new();
        encode(Codec::Q8_0, &ft, Some(&ft), &mut planes);
        assert!(planes.iter().all(|b| *b == 0));
    }
}
