//! ggml's k-quants: super-blocks of 256 values in sub-blocks of 16 or 32, each sub-block with
//! its own 4-, 6- or 8-bit scale (and minimum) under one or two f16 super-scales; iq4_xs shares
//! the 6-bit sub-scales of this family.

use super::bytes::{block_bytes, block_decoder, block_values, each_block, f16_at, u16_at};
use super::legacy::IQ4_LEVELS;

/// Bits `2 * s` and up of byte `l` of each 32-byte half: value `h * 128 + s * 32 + l` of a
/// super-block packed as 2-bit fields (q2_k, q3_k, tq2_0).
#[inline(always)]
pub(crate) fn crumb(qs: &[u8], index: usize) -> u8 {
    let (h, rest) = (index / 128, index % 128);
    let (s, l) = (rest / 32, rest % 32);
    (qs[h * 32 + l] >> (2 * s)) & 3
}

/// Nibble of value `g * 64 + s * 32 + l`: byte `g * 32 + l`, low nibble for s = 0 (q4_k, q5_k).
#[inline(always)]
fn nibble(qs: &[u8], index: usize) -> u8 {
    let (g, rest) = (index / 64, index % 64);
    let (s, l) = (rest / 32, rest % 32);
    (qs[g * 32 + l] >> (4 * s)) & 0x0F
}

block_decoder! {
    /// q2_k: 16 bytes of 4-bit scale / 4-bit minimum per 16 values, 64 bytes of 2-bit values, then
    /// super-scales d and dmin; value = d * scale * q - dmin * min.
    q2_k, |b, v| {
        let (d, dmin) = (f16_at(b, 80), f16_at(b, 82));
        let qs = &b[16..80];
        for (i, v) in v.iter_mut().enumerate() {
            let sc = b[i / 16];
            let dl = d * f32::from(sc & 0x0F);
            let ml = dmin * f32::from(sc >> 4);
            *v = dl * f32::from(crumb(qs, i)) - ml;
        }
    }
}

block_decoder! {
    /// q3_k: 32 bytes of high bits (set means "no -4"), 64 bytes of 2-bit values, 12 bytes of
    /// sixteen 6-bit signed scales, super-scale d; value = d * (scale - 32) * q.
    q3_k, |b, v| {
        let (hmask, qs, packed) = (&b[0..32], &b[32..96], &b[96..108]);
        let d = f16_at(b, 108);
        let mut dl = [0f32; 16];
        for (i, dl) in dl.iter_mut().enumerate() {
            let low = (packed[i % 8] >> (4 * (i / 8))) & 0x0F;
            let high = (packed[8 + i % 4] >> (2 * (i / 4))) & 0x03;
            *dl = d * (i32::from(low | (high << 4)) - 32) as f32;
        }
        for (i, v) in v.iter_mut().enumerate() {
            let high = (hmask[i % 32] >> (i / 32)) & 1;
            let q = i32::from(crumb(qs, i)) - (i32::from(high ^ 1) << 2);
            *v = dl[i / 16] * q as f32;
        }
    }
}

/// The eight 6-bit scales and minimums of q4_k and q5_k, packed in 12 bytes.
#[inline(always)]
pub(super) fn scales_and_mins(packed: &[u8]) -> ([u8; 8], [u8; 8]) {
    let (d, m, md) = (&packed[0..4], &packed[4..8], &packed[8..12]);
    let mut sc = [0u8; 8];
    let mut mn = [0u8; 8];
    for j in 0..4 {
        sc[j] = d[j] & 0x3F;
        mn[j] = m[j] & 0x3F;
        sc[j + 4] = (md[j] & 0x0F) | ((d[j] >> 2) & 0x30);
        mn[j + 4] = (md[j] >> 4) | ((m[j] >> 2) & 0x30);
    }
    (sc, mn)
}

/// The (scale, minimum) of each of the eight 32-value sub-blocks of a q4_k or q5_k block: d
/// times its 6-bit scale and dmin times its 6-bit minimum, in f32.
#[inline(always)]
pub(super) fn sub_scales(b: &[u8]) -> [(f32, f32); 8] {
    let (d, dmin) = (f16_at(b, 0), f16_at(b, 2));
    let (sc, mn) = scales_and_mins(&b[4..16]);
    let mut out = [(0f32, 0f32); 8];
    for (j, out) in out.iter_mut().enumerate() {
        *out = (d * f32::from(sc[j]), dmin * f32::from(mn[j]));
    }
    out
}

block_decoder! {
    /// q4_k: d, dmin, 12 bytes of 6-bit scales and minimums per 32 values, 128 bytes of nibbles;
    /// value = d * scale * q - dmin * min.
    q4_k, |b, v| {
        let sub = sub_scales(b);
        // Byte g * 32 + l holds value g * 64 + l (low nibble) and g * 64 + 32 + l (high).
        for g in 0..4 {
            let qs = &b[16 + g * 32..][..32];
            let ((d0, m0), (d1, m1)) = (sub[2 * g], sub[2 * g + 1]);
            let (lo, hi) = v[g * 64..][..64].split_at_mut(32);
            for l in 0..32 {
                lo[l] = d0 * f32::from(qs[l] & 0x0F) - m0;
                hi[l] = d1 * f32::from(qs[l] >> 4) - m1;
            }
        }
    }
}

block_decoder! {
    /// q5_k: q4_k plus 32 bytes holding a fifth bit per value (bit `i / 32` of byte `i % 32`).
    q5_k, |b, v| {
        let sub = sub_scales(b);
        let (qh, qs) = (&b[16..48], &b[48..176]);
        for (j, &(dl, ml)) in sub.iter().enumerate() {
            for l in 0..32 {
                let i = j * 32 + l;
                let q = nibble(qs, i) | (((qh[l] >> j) & 1) << 4);
                v[i] = dl * f32::from(q) - ml;
            }
        }
    }
}

block_decoder! {
    /// q6_k: 128 bytes of low nibbles, 64 bytes of 2-bit highs, 16 signed 8-bit scales, d;
    /// value = d * scale * (q - 32).
    q6_k, |b, v| {
        let (ql, qh, scales) = (&b[0..128], &b[128..192], &b[192..208]);
        let d = f16_at(b, 208);
        // Value h * 128 + s * 32 + l: low nibble of byte h * 64 + (s % 2) * 32 + l (high
        // nibble for s >= 2), 2 high bits at 2 s of byte h * 32 + l of qh.
        for h in 0..2 {
            for s in 0..4 {
                let low_bytes = &ql[h * 64 + (s % 2) * 32..][..32];
                let high_bytes = &qh[h * 32..][..32];
                let dl = [0, 1].map(|k| d * f32::from(scales[h * 8 + s * 2 + k] as i8));
                let dst = &mut v[h * 128 + s * 32..][..32];
                for l in 0..32 {
                    let low = (low_bytes[l] >> (4 * (s / 2))) & 0x0F;
                    let high = (high_bytes[l] >> (2 * s)) & 3;
                    let q = i32::from(low | (high << 4)) - 32;
                    dst[l] = dl[l / 16] * q as f32;
                }
            }
        }
    }
}

block_decoder! {
    /// iq4_xs: d, 16 bits of 2-bit scale highs, 4 bytes of 4-bit scale lows (eight 6-bit signed
    /// scales per 32 values), 128 bytes of nibbles indexing [`IQ4_LEVELS`]; value = d * scale *
    /// level, the 16 low nibbles of a 16-byte run first.
    iq4_xs, |b, v| {
        let d = f16_at(b, 0);
        let scales_h = u16_at(b, 2);
        let (scales_l, qs) = (&b[4..8], &b[8..136]);
        for j in 0..8 {
            let low = (scales_l[j / 2] >> (4 * (j % 2))) & 0x0F;
            let high = ((scales_h >> (2 * j)) & 0x03) as u8;
            let dl = d * (i32::from(low | (high << 4)) - 32) as f32;
            for l in 0..32 {
                let q = (qs[j * 16 + l % 16] >> (4 * (l / 16))) & 0x0F;
                v[j * 32 + l] = dl * f32::from(IQ4_LEVELS[q as usize]);
            }
        }
    }
}

block_decoder! {
    /// tq1_0: 48 bytes of five base-3 digits each and 4 bytes of four, as fixed-point fractions of
    /// 3^5 (digit p of byte x is `(x * 3^p mod 256) * 3 >> 8`), then d; value = d * (digit - 1).
    tq1_0, |b, v| {
        const POW3: [u8; 5] = [1, 3, 9, 27, 81];
        let trit = |x: u8, p: usize| -> f32 {
            let shifted = x.wrapping_mul(POW3[p]);
            (i32::from((u16::from(shifted) * 3) >> 8) - 1) as f32
        };
        let d = f16_at(b, 52);
        for p in 0..5 {
            for l in 0..32 {
                v[p * 32 + l] = d * trit(b[l], p);
            }
            for l in 0..16 {
                v[160 + p * 16 + l] = d * trit(b[32 + l], p);
            }
        }
        for p in 0..4 {
            for l in 0..4 {
                v[240 + p * 4 + l] = d * trit(b[48 + l], p);
            }
        }
    }
}

block_decoder! {
    /// tq2_0: 64 bytes of 2-bit values (as q2_k's), then d; value = d * (q - 1).
    tq2_0, |b, v| {
        let d = f16_at(b, 64);
        for (i, v) in v.iter_mut().enumerate() {
            *v = d * (i32::from(crumb(&b[..64], i)) - 1) as f32;
        }
    }
}
