//! Blocks of 32 values with one scale (ggml's first quantization family), and the
//! non-linear 4-bit codebooks that share their nibble layout: q4_0, q4_1, q5_0, q5_1, q8_0,
//! iq4_nl, mxfp4, nvfp4.
//!
//! In every nibble layout here the low nibble of byte `j` is value `j` and the high nibble is
//! value `j + 16` of the block (for nvfp4: of its 16-value sub-block).

use super::bytes::{block_bytes, block_decoder, block_values, each_block, f16_at, u32_at};

/// iq4_nl's (and iq4_xs's) 16 levels.
pub(crate) const IQ4_LEVELS: [i8; 16] = [
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
];

/// The e2m1 (fp4) values, doubled: mxfp4 and nvfp4 scales carry the factor 1/2.
const E2M1_DOUBLED: [i8; 16] = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];

/// The nibble layout of this family: of the `N` bytes at the start of `qs`, the low nibble of
/// byte `j` gives value `j` and the high nibble value `j + N` of `out`, each through `value`.
#[inline(always)]
fn nibble_halves<const N: usize>(qs: &[u8], out: &mut [f32], value: impl Fn(u8) -> f32) {
    let (lo, hi) = out[..2 * N].split_at_mut(N);
    for (j, &q) in qs[..N].iter().enumerate() {
        lo[j] = value(q & 0x0F);
        hi[j] = value(q >> 4);
    }
}

block_decoder! {
    /// q4_0: f16 scale d, 16 bytes of nibbles q; value = d * (q - 8).
    q4_0, |b, v| {
        let d = f16_at(b, 0);
        nibble_halves::<16>(&b[2..], v, |q| d * (i32::from(q) - 8) as f32);
    }
}

block_decoder! {
    /// q4_1: scale d, minimum m, 16 bytes of nibbles; value = d * q + m.
    q4_1, |b, v| {
        let (d, m) = (f16_at(b, 0), f16_at(b, 2));
        nibble_halves::<16>(&b[4..], v, |q| d * f32::from(q) + m);
    }
}

/// The 32 5-bit values of a block: low nibbles from `qs` (value j and j + 16 in byte j), the
/// fifth bits from the 32-bit mask `qh` (bit j for value j).
#[inline(always)]
fn five_bits(qs: &[u8; 16], qh: u32) -> [u8; 32] {
    // Plain loops over fixed-size arrays: `array::from_fn` was left as an out-of-line call.
    let mut q = [0u8; 32];
    for j in 0..16 {
        q[j] = (qs[j] & 0x0F) | ((((qh >> j) & 1) as u8) << 4);
        q[j + 16] = (qs[j] >> 4) | ((((qh >> (j + 16)) & 1) as u8) << 4);
    }
    q
}

block_decoder! {
    /// q5_0: scale d, 32 high bits, 16 bytes of nibbles; value = d * (q - 16).
    q5_0, |b, v| {
        let d = f16_at(b, 0);
        let q = five_bits(b[6..22].try_into().expect("16 bytes"), u32_at(b, 2));
        for j in 0..32 {
            v[j] = d * (i32::from(q[j]) - 16) as f32;
        }
    }
}

block_decoder! {
    /// q5_1: scale d, minimum m, 32 high bits, 16 bytes of nibbles; value = d * q + m.
    q5_1, |b, v| {
        let (d, m) = (f16_at(b, 0), f16_at(b, 2));
        let q = five_bits(b[8..24].try_into().expect("16 bytes"), u32_at(b, 4));
        for j in 0..32 {
            v[j] = d * f32::from(q[j]) + m;
        }
    }
}

block_decoder! {
    /// q8_0: scale d, 32 signed bytes; value = q * d.
    q8_0, |b, v| {
        let d = f16_at(b, 0);
        for (j, v) in v.iter_mut().enumerate() {
            *v = f32::from(b[2 + j] as i8) * d;
        }
    }
}

block_decoder! {
    /// iq4_nl: scale d, 16 bytes of nibbles indexing [`IQ4_LEVELS`]; value = d * level.
    iq4_nl, |b, v| {
        let d = f16_at(b, 0);
        nibble_halves::<16>(&b[2..], v, |q| d * f32::from(IQ4_LEVELS[usize::from(q)]));
    }
}

/// An e8m0 exponent byte as the f32 2^(e - 127) / 2 (ggml's `e8m0_to_fp32_half`).
fn e8m0_half(e: u8) -> f32 {
    let bits = if e < 2 {
        0x0020_0000u32 << e
    } else {
        u32::from(e - 1) << 23
    };
    f32::from_bits(bits)
}

block_decoder! {
    /// mxfp4: one e8m0 scale byte, 16 bytes of e2m1 nibbles; value = scale * e2m1.
    mxfp4, |b, v| {
        let d = e8m0_half(b[0]);
        nibble_halves::<16>(&b[1..], v, |q| d * f32::from(E2M1_DOUBLED[usize::from(q)]));
    }
}

/// An unsigned e4m3 scale byte (bias 7) as f32, halved for the doubled e2m1 values; 0 and 0x7f
/// (NaN in e4m3) give 0, as in ggml. The top bit is ignored.
fn ue4m3_half(x: u8) -> f32 {
    if x == 0 || x == 0x7F {
        return 0.0;
    }
    let exp = i32::from((x >> 3) & 0x0F);
    let man = f32::from(x & 0x07);
    let raw = if exp == 0 {
        man * (1.0 / 512.0)
    } else {
        (1.0 + man / 8.0) * 2f32.powi(exp - 7)
    };
    raw * 0.5
}

block_decoder! {
    /// nvfp4: 64 values as four sub-blocks of 16, each with its ue4m3 scale byte (4 bytes first),
    /// then 4 x 8 bytes of e2m1 nibbles; value = scale * e2m1.
    nvfp4, |b, v| {
        for s in 0..4 {
            let d = ue4m3_half(b[s]);
            let value = |q: u8| d * f32::from(E2M1_DOUBLED[usize::from(q)]);
            nibble_halves::<8>(&b[4 + s * 8..], &mut v[s * 16..], value);
        }
    }
}
