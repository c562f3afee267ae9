//! Little helpers shared by the block decoders: reading packed fields, walking blocks.

use half::f16;

/// The f16 at `bytes[at..at + 2]`, little-endian, as f32 (exact).
#[inline(always)]
pub(super) fn f16_at(bytes: &[u8], at: usize) -> f32 {
    f16::from_bits(u16::from_le_bytes([bytes[at], bytes[at + 1]])).to_f32()
}

#[inline(always)]
pub(super) fn u16_at(bytes: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([bytes[at], bytes[at + 1]])
}

#[inline(always)]
pub(super) fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

/// Bytes per block of the dtype named `name`, from the dtype table.
pub(super) const fn block_bytes(name: &str) -> usize {
    (crate::dtype::named(name).block_bits / 8) as usize
}

/// Values per block of the dtype named `name`, from the dtype table.
pub(super) const fn block_values(name: &str) -> usize {
    crate::dtype::named(name).block_size as usize
}

/// The blocks of `bytes` (`TS` bytes each) beside their `BS` values in `out`.
#[inline(always)]
pub(super) fn blocks<'a, const TS: usize, const BS: usize>(
    bytes: &'a [u8],
    out: &'a mut [f64],
) -> impl Iterator<Item = (&'a [u8], &'a mut [f64])> {
    bytes.chunks_exact(TS).zip(out.chunks_exact_mut(BS))
}

/// Decodes whole blocks: `bytes` holds `n` blocks of `TS` bytes, `out` their `n * BS` values.
/// `block` writes one block's values as f32, ggml's arithmetic type. Callers mark it
/// `#[inline(always)]`: a closure left out of line keeps the baseline code generation even when
/// called from the decoder's AVX2 copy.
#[inline(always)]
pub(super) fn each_block<const TS: usize, const BS: usize>(
    bytes: &[u8],
    out: &mut [f64],
    block: impl Fn(&[u8; TS], &mut [f32; BS]),
) {
    debug_assert_eq!(bytes.len() / TS * BS, out.len());
    let mut values = [0f32; BS];
    for (raw, dst) in bytes.chunks_exact(TS).zip(out.chunks_exact_mut(BS)) {
        block(raw.try_into().expect("chunk of TS bytes"), &mut values);
        for (d, v) in dst.iter_mut().zip(values) {
            *d = f64::from(v);
        }
    }
}

/// Defines the block decoder `pub(crate) fn NAME(bytes: &[u8], out: &mut [f64])` of the dtype of
/// the same name, over whole blocks with [`each_block`] and the block sizes of the dtype table:
/// `|b, v| { ... }` writes the values of one block `b` into `v`. The decoder's file imports
/// `each_block`, `block_bytes` and `block_values`.
macro_rules! block_decoder {
    ($(#[$doc:meta])* $name:ident, |$b:ident, $v:ident| $body:block) => {
        $(#[$doc])*
        #[inline(always)]
        pub(crate) fn $name(bytes: &[u8], out: &mut [f64]) {
            each_block::<{ block_bytes(stringify!($name)) }, { block_values(stringify!($name)) }>(
                bytes,
                out,
                #[inline(always)]
                |$b, $v| $body,
            );
        }
    };
}
pub(super) use block_decoder;
