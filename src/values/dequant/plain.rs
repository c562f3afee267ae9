//! One value per element: IEEE floats, bfloat16, the 8-bit float formats of safetensors, and
//! integers (compared as numbers; 64-bit integers above 2^53 lose their low bits).

use half::f16;

/// Decodes `N`-byte elements with `f` (given the element's bytes).
#[inline(always)]
fn each<const N: usize>(bytes: &[u8], out: &mut [f64], f: impl Fn([u8; N]) -> f64) {
    for (raw, o) in bytes.chunks_exact(N).zip(out.iter_mut()) {
        *o = f(raw.try_into().expect("chunk of N bytes"));
    }
}

macro_rules! numbers {
    ($($le:ident, $be:ident, $ty:ty, $n:literal, $conv:expr;)*) => {$(
        #[inline(always)]
        pub(crate) fn $le(bytes: &[u8], out: &mut [f64]) {
            each::<$n>(bytes, out, #[inline(always)] |b| $conv(<$ty>::from_le_bytes(b)));
        }
        #[inline(always)]
        pub(crate) fn $be(bytes: &[u8], out: &mut [f64]) {
            each::<$n>(bytes, out, #[inline(always)] |b| $conv(<$ty>::from_be_bytes(b)));
        }
    )*};
}

numbers! {
    f32_le, f32_be, f32, 4, |x: f32| f64::from(x);
    f64_le, f64_be, f64, 8, |x: f64| x;
    bf16_le, bf16_be, u16, 2, |x: u16| f64::from(f32::from_bits(u32::from(x) << 16));
    i16_le, i16_be, i16, 2, |x: i16| f64::from(x);
    i32_le, i32_be, i32, 4, |x: i32| f64::from(x);
    i64_le, i64_be, i64, 8, |x: i64| x as f64;
    u16_le, u16_be, u16, 2, |x: u16| f64::from(x);
    u32_le, u32_be, u32, 4, |x: u32| f64::from(x);
    u64_le, u64_be, u64, 8, |x: u64| x as f64;
}

/// f16 runs through `half`'s slice conversion (F16C instructions when the CPU has them, chosen
/// once per run rather than per value).
macro_rules! halves {
    ($($name:ident, $from:ident;)*) => {$(
        #[inline(always)]
        pub(crate) fn $name(bytes: &[u8], out: &mut [f64]) {
            use half::slice::{HalfBitsSliceExt, HalfFloatSliceExt};
            const RUN: usize = 256;
            let mut bits = [0u16; RUN];
            for (raw, out) in bytes.chunks(2 * RUN).zip(out.chunks_mut(RUN)) {
                let n = raw.len() / 2;
                for (b, c) in bits.iter_mut().zip(raw.chunks_exact(2)) {
                    *b = u16::$from([c[0], c[1]]);
                }
                let halves: &[f16] = bits[..n].reinterpret_cast();
                halves.convert_to_f64_slice(&mut out[..n]);
            }
        }
    )*};
}

halves! {
    f16_le, from_le_bytes;
    f16_be, from_be_bytes;
}

#[inline(always)]
pub(crate) fn i8(bytes: &[u8], out: &mut [f64]) {
    each::<1>(bytes, out, |[b]| f64::from(b as i8));
}

#[inline(always)]
pub(crate) fn u8(bytes: &[u8], out: &mut [f64]) {
    each::<1>(bytes, out, |[b]| f64::from(b));
}

/// safetensors BOOL: one byte, 0 false, anything else true (as numpy reads it).
#[inline(always)]
pub(crate) fn bool(bytes: &[u8], out: &mut [f64]) {
    each::<1>(bytes, out, |[b]| if b == 0 { 0.0 } else { 1.0 });
}

/// A minifloat with `e` exponent bits of bias `bias` and `m` mantissa bits (no sign handled
/// here): subnormals below exponent 1.
fn minifloat(exp: u32, man: u32, m: u32, bias: i32) -> f64 {
    let frac = f64::from(man) / f64::from(1u32 << m);
    if exp == 0 {
        frac * 2f64.powi(1 - bias)
    } else {
        (1.0 + frac) * 2f64.powi(exp as i32 - bias)
    }
}

/// float8 e4m3fn (OCP): bias 7, no infinities, S.1111.111 is NaN.
#[inline(always)]
pub(crate) fn f8_e4m3(bytes: &[u8], out: &mut [f64]) {
    each::<1>(bytes, out, |[b]| {
        let sign = if b & 0x80 != 0 { -1.0 } else { 1.0 };
        if b & 0x7F == 0x7F {
            return f64::NAN;
        }
        sign * minifloat(u32::from((b >> 3) & 0x0F), u32::from(b & 7), 3, 7)
    });
}

/// float8 e5m2 (OCP): bias 15, IEEE-like infinities and NaNs.
#[inline(always)]
pub(crate) fn f8_e5m2(bytes: &[u8], out: &mut [f64]) {
    each::<1>(bytes, out, |[b]| {
        // The upper byte of an f16.
        f16::from_bits(u16::from(b) << 8).to_f64()
    });
}

/// float8 e4m3fnuz: bias 8, 0x80 is the only NaN, no negative zero.
#[inline(always)]
pub(crate) fn f8_e4m3fnuz(bytes: &[u8], out: &mut [f64]) {
    each::<1>(bytes, out, |[b]| {
        if b == 0x80 {
            return f64::NAN;
        }
        let sign = if b & 0x80 != 0 { -1.0 } else { 1.0 };
        sign * minifloat(u32::from((b >> 3) & 0x0F), u32::from(b & 7), 3, 8)
    });
}

/// float8 e5m2fnuz: bias 16, 0x80 is the only NaN, no infinities.
#[inline(always)]
pub(crate) fn f8_e5m2fnuz(bytes: &[u8], out: &mut [f64]) {
    each::<1>(bytes, out, |[b]| {
        if b == 0x80 {
            return f64::NAN;
        }
        let sign = if b & 0x80 != 0 { -1.0 } else { 1.0 };
        sign * minifloat(u32::from((b >> 2) & 0x1F), u32::from(b & 3), 2, 16)
    });
}

/// float8 e8m0 (the MX scale type): 2^(b - 127), 0xFF is NaN.
#[inline(always)]
pub(crate) fn f8_e8m0(bytes: &[u8], out: &mut [f64]) {
    each::<1>(bytes, out, |[b]| {
        if b == 0xFF {
            f64::NAN
        } else {
            2f64.powi(i32::from(b) - 127)
        }
    });
}
