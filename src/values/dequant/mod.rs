//! Dequantization: the bytes of a tensor of any dtype weight-inspect can decode, as f64 values
//! in storage order. GGUF types follow ggml's block layouts and reproduce gguf-py's
//! `gguf.quants.dequantize` bit for bit (the values are computed in f32 as there, then
//! widened); safetensors types are decoded as numbers.

// Block layouts are indexed the way ggml describes them: value i, byte j.
#![allow(clippy::needless_range_loop)]

use crate::dtype::Dtype;

mod bytes;
pub(crate) mod iq;
#[rustfmt::skip]
mod iq_tables;
pub(crate) mod kquants;
mod kquants_avx2;
pub(crate) mod legacy;
pub(crate) mod plain;

/// Decodes whole blocks: `bytes.len() / type_size * block_size == out.len()`.
pub(crate) type DecodeFn = fn(&[u8], &mut [f64]);

/// How one dtype's bytes become values.
#[derive(Clone, Copy)]
pub(crate) struct Codec {
    /// Values per block (1 for plain numbers).
    pub block_size: u64,
    /// Bytes per block.
    pub type_size: u64,
    pub decode: DecodeFn,
    /// 64-bit integers: values of magnitude 2^53 and more do not all fit an f64, so changes
    /// are counted on the raw values and the norms are approximate.
    pub wide_integer: bool,
    /// Every value has at most 26 significant bits, so the product of two is exact in f64
    /// (see [`crate::values::compare::Sums::of_two_exact`]): all but f64 and 32- and 64-bit
    /// integers.
    pub exact_products: bool,
}

impl std::fmt::Debug for Codec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Codec")
            .field("block_size", &self.block_size)
            .field("type_size", &self.type_size)
            .finish()
    }
}

/// A decoder as a [`DecodeFn`] that runs a copy compiled for AVX2 when the CPU has it. The
/// decoder is called directly (not through a generic `Fn`), so its `#[inline(always)]` body is
/// compiled into the AVX2 copy; passed as a generic `Fn`, the body stayed in a baseline-compiled
/// call shim. Without FMA contraction, which Rust never does implicitly, both copies compute
/// the same values bit for bit.
macro_rules! v {
    ($f:expr) => {{
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2")]
        fn with_avx2(bytes: &[u8], out: &mut [f64]) {
            $f(bytes, out)
        }
        fn decode(bytes: &[u8], out: &mut [f64]) {
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: the CPU has AVX2.
                unsafe { with_avx2(bytes, out) };
                return;
            }
            $f(bytes, out)
        }
        decode as DecodeFn
    }};
}

/// Why a dtype is compared byte for byte rather than by value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotDecoded {
    /// A type with no decoder here (q8_1, q8_k, q1_0, q2_0, sub-byte floats, complex numbers).
    UnsupportedType,
    /// A quantized type in a big-endian GGUF file, whose block layout is not standardized.
    BigEndianBlocks,
}

impl NotDecoded {
    pub fn describe(self) -> &'static str {
        match self {
            NotDecoded::UnsupportedType => "no dequantizer for this type",
            NotDecoded::BigEndianBlocks => "quantized blocks of a big-endian file",
        }
    }
}

/// The codec of `dtype` in a file of the given byte order. Its block size and bytes per block
/// come from the dtype table; the decoder is chosen by the dtype's name.
pub(crate) fn codec(dtype: &'static Dtype, big_endian: bool) -> Result<Codec, NotDecoded> {
    let type_size = dtype.block_bytes().ok_or(NotDecoded::UnsupportedType)?;
    let decode = match plain_decoder(dtype.name, big_endian) {
        Some(decode) => decode?,
        None => {
            let decode = quantized_decoder(dtype.name).ok_or(NotDecoded::UnsupportedType)?;
            if big_endian {
                return Err(NotDecoded::BigEndianBlocks);
            }
            decode
        }
    };
    Ok(Codec {
        block_size: dtype.block_size,
        type_size,
        decode,
        wide_integer: matches!(dtype.name, "i64" | "u64"),
        exact_products: !matches!(dtype.name, "f64" | "i32" | "u32" | "i64" | "u64"),
    })
}

/// The decoder of a plain number type (one value per block) in the given byte order; None for
/// a type that is not one, Err for a safetensors-only type asked for big-endian.
fn plain_decoder(name: &str, big_endian: bool) -> Option<Result<DecodeFn, NotDecoded>> {
    use plain::*;
    let (le, be): (DecodeFn, Option<DecodeFn>) = match name {
        "f32" => (v!(f32_le), Some(v!(f32_be))),
        "f64" => (v!(f64_le), Some(v!(f64_be))),
        "f16" => (v!(f16_le), Some(v!(f16_be))),
        "bf16" => (v!(bf16_le), Some(v!(bf16_be))),
        "i8" => (v!(i8), Some(v!(i8))),
        "u8" => (v!(u8), Some(v!(u8))),
        "bool" => (v!(bool), None),
        "i16" => (v!(i16_le), Some(v!(i16_be))),
        "i32" => (v!(i32_le), Some(v!(i32_be))),
        "i64" => (v!(i64_le), Some(v!(i64_be))),
        "u16" => (v!(u16_le), Some(v!(u16_be))),
        "u32" => (v!(u32_le), Some(v!(u32_be))),
        "u64" => (v!(u64_le), Some(v!(u64_be))),
        "f8_e4m3" => (v!(f8_e4m3), None),
        "f8_e5m2" => (v!(f8_e5m2), None),
        "f8_e4m3fnuz" => (v!(f8_e4m3fnuz), None),
        "f8_e5m2fnuz" => (v!(f8_e5m2fnuz), None),
        "f8_e8m0" => (v!(f8_e8m0), None),
        _ => return None,
    };
    Some(match (big_endian, be) {
        (false, _) => Ok(le),
        (true, Some(be)) => Ok(be),
        // Only GGUF files are big-endian, and these are safetensors-only names.
        (true, None) => Err(NotDecoded::UnsupportedType),
    })
}

/// The decoder of a quantized type: q4_k and q6_k have hand-vectorized ones.
fn quantized_decoder(name: &str) -> Option<DecodeFn> {
    match name {
        "q4_k" => Some(kquants_avx2::q4_k_dispatched),
        "q6_k" => Some(kquants_avx2::q6_k_dispatched),
        _ => listed_decoder(name),
    }
}

/// The quantized types with a decoder; each decoder has its type's name (block sizes are in
/// [`crate::dtype::DTYPES`]). Expands to the decoder lookup and, for tests, the same decoders
/// without the CPU dispatch.
macro_rules! quantized {
    ($($name:ident),* $(,)?) => {
        fn listed_decoder(dtype: &str) -> Option<DecodeFn> {
            use iq::*;
            use kquants::*;
            use legacy::*;
            Some(match dtype {
                $(stringify!($name) => v!($name),)*
                _ => return None,
            })
        }

        /// The decoders compiled for the baseline CPU only.
        #[cfg(test)]
        fn baseline_decoder(dtype: &str) -> Option<DecodeFn> {
            use iq::*;
            use kquants::*;
            use legacy::*;
            Some(match dtype {
                $(stringify!($name) => $name,)*
                _ => return None,
            })
        }
    };
}

quantized! {
    q4_0, q4_1, q5_0, q5_1, q8_0,
    q2_k, q3_k, q4_k, q5_k, q6_k,
    iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s, iq1_s, iq1_m, iq4_nl, iq4_xs,
    tq1_0, tq2_0, mxfp4, nvfp4,
}

/// Every dtype with a decoder, for tests and documentation.
pub const DECODED_GGUF_TYPES: &[&str] = &[
    "f32", "f16", "bf16", "f64", "i8", "i16", "i32", "i64", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0",
    "q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s",
    "iq1_s", "iq1_m", "iq4_nl", "iq4_xs", "tq1_0", "tq2_0", "mxfp4", "nvfp4",
];

#[cfg(test)]
mod tests {
    use super::*;

    /// The dispatched decoders (AVX2 on this machine, when it has it) and the baseline ones
    /// give the same values bit for bit; the dispatched ones are checked against gguf-py in
    /// tests/values.rs.
    /// A reproducible stream of pseudo-random bytes (xorshift) from `seed`.
    pub(super) fn random_bytes(seed: u64) -> impl FnMut() -> u8 {
        let mut state = seed;
        move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        }
    }

    #[test]
    fn dispatched_and_baseline_decoders_agree() {
        let mut byte = random_bytes(0x9E37_79B9_7F4A_7C15);
        for name in DECODED_GGUF_TYPES {
            let Some(baseline) = baseline_decoder(name) else {
                continue;
            };
            let codec = codec(crate::dtype::by_name(name).unwrap(), false).unwrap();
            let blocks = 16;
            let bytes: Vec<u8> = (0..blocks * codec.type_size).map(|_| byte()).collect();
            let n = (blocks * codec.block_size) as usize;
            let (mut a, mut b) = (vec![0f64; n], vec![0f64; n]);
            (codec.decode)(&bytes, &mut a);
            baseline(&bytes, &mut b);
            for (i, (x, y)) in a.iter().zip(&b).enumerate() {
                assert!(
                    x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()),
                    "{name} {i}"
                );
            }
        }
    }

    #[test]
    fn float8_formats_decode_their_landmarks() {
        let one = |f: DecodeFn, b: u8| {
            let mut out = [0f64];
            f(&[b], &mut out);
            out[0]
        };
        assert_eq!(one(plain::f8_e4m3, 0x7E), 448.0);
        assert_eq!(one(plain::f8_e4m3, 0x01), 2f64.powi(-9));
        assert!(one(plain::f8_e4m3, 0xFF).is_nan());
        assert_eq!(one(plain::f8_e5m2, 0x7B), 57344.0);
        assert_eq!(one(plain::f8_e5m2, 0x7C), f64::INFINITY);
        assert_eq!(one(plain::f8_e4m3fnuz, 0x7F), 240.0);
        assert!(one(plain::f8_e4m3fnuz, 0x80).is_nan());
        assert_eq!(one(plain::f8_e5m2fnuz, 0x7F), 57344.0);
        assert_eq!(one(plain::f8_e8m0, 127), 1.0);
        assert!(one(plain::f8_e8m0, 255).is_nan());
    }
}
