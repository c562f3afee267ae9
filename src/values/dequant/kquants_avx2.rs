//! q4_k and q6_k, the bulk of a Q4_K_M model, written with AVX2 intrinsics: the same f32
//! multiplications and subtractions as [`super::kquants`], eight values at a time, widened
//! to f64 straight into the output. With AVX-512, q4_k computes the 16 values a sub-block's
//! nibbles can take once (the same f32 operations) and looks each nibble up in them. The
//! results are those of the portable decoders bit for bit (unit tests compare every variant
//! the CPU runs on random blocks).

use super::bytes::{block_bytes, block_values, blocks, f16_at};
use super::kquants::{q4_k, q6_k, sub_scales};

/// q4_k, with AVX-512 or AVX2 when the CPU has them.
pub(super) fn q4_k_dispatched(bytes: &[u8], out: &mut [f64]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512f") {
        // SAFETY: the CPU has AVX-512F (and so AVX2).
        return unsafe { avx512::q4_k(bytes, out) };
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2.
        return unsafe { avx2::q4_k(bytes, out) };
    }
    q4_k(bytes, out);
}

/// q6_k, with AVX2 when the CPU has it.
pub(super) fn q6_k_dispatched(bytes: &[u8], out: &mut [f64]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2.
        return unsafe { avx2::q6_k(bytes, out) };
    }
    q6_k(bytes, out);
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;

    use super::avx2::q4_k_nibbles;
    use super::{block_bytes, block_values, blocks, sub_scales};

    #[target_feature(enable = "avx512f,avx2")]
    pub(super) fn q4_k(bytes: &[u8], out: &mut [f64]) {
        let nibble_values = _mm512_cvtepi32_ps(_mm512_set_epi32(
            15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0,
        ));
        for (b, v) in blocks::<{ block_bytes("q4_k") }, { block_values("q4_k") }>(bytes, out) {
            let sub = sub_scales(b);
            for g in 0..4 {
                let (lo, hi) = q4_k_nibbles(b, g);
                for (half, nibbles) in [lo, hi].into_iter().enumerate() {
                    let (scale, min) = sub[2 * g + half];
                    // value(q) = scale * q - min for q = 0..=15, in f32 as the portable decoder.
                    let table = _mm512_sub_ps(
                        _mm512_mul_ps(nibble_values, _mm512_set1_ps(scale)),
                        _mm512_set1_ps(min),
                    );
                    let table = _mm512_castps_pd(table);
                    let first = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_castpd512_pd256(table)));
                    let second =
                        _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(table)));
                    let dst = &mut v[g * 64 + half * 32..][..32];
                    let quarters = [
                        _mm256_castsi256_si128(nibbles),
                        _mm256_extracti128_si256::<1>(nibbles),
                    ];
                    for (h, sixteen) in quarters.into_iter().enumerate() {
                        for (k, eight) in [sixteen, _mm_srli_si128::<8>(sixteen)]
                            .into_iter()
                            .enumerate()
                        {
                            // Index bit 3 picks the second half of the table.
                            let values =
                                _mm512_permutex2var_pd(first, _mm512_cvtepu8_epi64(eight), second);
                            // SAFETY: dst holds 32 values; h * 16 + k * 8 + 8 <= 32.
                            unsafe {
                                _mm512_storeu_pd(dst.as_mut_ptr().add(h * 16 + k * 8), values);
                            };
                        }
                    }
                }
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    use super::{block_bytes, block_values, blocks, f16_at, sub_scales};

    /// Writes `scale * q - min` of 32 small integers `q` (bytes of `q8`) as f64 to `out`,
    /// computed in f32 as the portable decoders do (a product, then a difference).
    #[inline(always)]
    fn scaled_32(q8: __m256i, scale: f32, min: f32, out: &mut [f64]) {
        debug_assert!(out.len() >= 32);
        // SAFETY: inlined only into functions with AVX2 enabled; out holds 32 values.
        unsafe {
            let (scale, min) = (_mm256_set1_ps(scale), _mm256_set1_ps(min));
            let halves = [
                _mm256_castsi256_si128(q8),
                _mm256_extracti128_si256::<1>(q8),
            ];
            for (h, half) in halves.into_iter().enumerate() {
                for (k, eight) in [half, _mm_srli_si128::<8>(half)].into_iter().enumerate() {
                    let q = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(eight));
                    let v = _mm256_sub_ps(_mm256_mul_ps(q, scale), min);
                    let at = out.as_mut_ptr().add(h * 16 + k * 8);
                    _mm256_storeu_pd(at, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
                    _mm256_storeu_pd(at.add(4), _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(v)));
                }
            }
        }
    }

    /// Loads 32 bytes.
    #[inline(always)]
    fn load_32(bytes: &[u8]) -> __m256i {
        assert!(bytes.len() >= 32);
        // SAFETY: 32 readable bytes (checked above); AVX2 is enabled where this is inlined.
        unsafe { _mm256_loadu_si256(bytes.as_ptr().cast()) }
    }

    /// The low and the high nibbles of the 32 bytes of group `g` of a q4_k block: values
    /// g * 64 + l and g * 64 + 32 + l.
    #[inline(always)]
    pub(super) fn q4_k_nibbles(b: &[u8], g: usize) -> (__m256i, __m256i) {
        let qs = load_32(&b[16 + g * 32..]);
        // SAFETY: inlined only into functions with AVX2 enabled.
        unsafe {
            let low_nibbles = _mm256_set1_epi8(0x0F);
            let lo = _mm256_and_si256(qs, low_nibbles);
            let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(qs), low_nibbles);
            (lo, hi)
        }
    }

    #[target_feature(enable = "avx2")]
    pub(super) fn q4_k(bytes: &[u8], out: &mut [f64]) {
        for (b, v) in blocks::<{ block_bytes("q4_k") }, { block_values("q4_k") }>(bytes, out) {
            let sub = sub_scales(b);
            for g in 0..4 {
                let (lo, hi) = q4_k_nibbles(b, g);
                let ((d0, m0), (d1, m1)) = (sub[2 * g], sub[2 * g + 1]);
                scaled_32(lo, d0, m0, &mut v[g * 64..]);
                scaled_32(hi, d1, m1, &mut v[g * 64 + 32..]);
            }
        }
    }

    #[target_feature(enable = "avx2")]
    pub(super) fn q6_k(bytes: &[u8], out: &mut [f64]) {
        let (low_nibbles, two_bits) = (_mm256_set1_epi8(0x0F), _mm256_set1_epi8(3));
        for (b, v) in blocks::<{ block_bytes("q6_k") }, { block_values("q6_k") }>(bytes, out) {
            let (ql, qh, scales) = (&b[0..128], &b[128..192], &b[192..208]);
            let d = f16_at(b, 208);
            for h in 0..2 {
                let high_bytes = load_32(&qh[h * 32..]);
                for s in 0..4 {
                    let low_bytes = load_32(&ql[h * 64 + (s % 2) * 32..]);
                    let low = match s / 2 {
                        0 => _mm256_and_si256(low_bytes, low_nibbles),
                        _ => _mm256_and_si256(_mm256_srli_epi16::<4>(low_bytes), low_nibbles),
                    };
                    let high = _mm256_and_si256(
                        _mm256_srl_epi16(high_bytes, _mm_cvtsi32_si128(2 * s as i32)),
                        two_bits,
                    );
                    // 6-bit values 0..=63: the high bits stay inside their byte.
                    let q = _mm256_or_si256(low, _mm256_slli_epi16::<4>(high));
                    let dst = &mut v[h * 128 + s * 32..][..32];
                    // value = scale * (q - 32): q - 32 is exact in f32, so subtracting 32 from
                    // the integer first is the same; "min" is 0 here (x - 0 = x exactly).
                    let dl = [0, 1].map(|k| d * f32::from(scales[h * 8 + s * 2 + k] as i8));
                    let shifted = _mm256_sub_epi8(q, _mm256_set1_epi8(32));
                    scaled_signed_16(shifted, dl[0], &mut dst[..16], false);
                    scaled_signed_16(shifted, dl[1], &mut dst[16..], true);
                }
            }
        }
    }

    /// Writes `scale * q` of 16 signed bytes of `q8` (its upper 16 when `upper`) as f64.
    #[inline(always)]
    fn scaled_signed_16(q8: __m256i, scale: f32, out: &mut [f64], upper: bool) {
        debug_assert!(out.len() >= 16);
        // SAFETY: inlined only into functions with AVX2 enabled; out holds 16 values.
        unsafe {
            let scale = _mm256_set1_ps(scale);
            let half = if upper {
                _mm256_extracti128_si256::<1>(q8)
            } else {
                _mm256_castsi256_si128(q8)
            };
            for (k, eight) in [half, _mm_srli_si128::<8>(half)].into_iter().enumerate() {
                let q = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(eight));
                let v = _mm256_mul_ps(q, scale);
                let at = out.as_mut_ptr().add(k * 8);
                _mm256_storeu_pd(at, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
                _mm256_storeu_pd(at.add(4), _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(v)));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every variant this CPU runs gives the portable decoder's values bit for bit.
    #[test]
    fn every_variant_agrees_with_the_portable_decoder() {
        let mut byte = super::super::tests::random_bytes(0x2545_F491_4F6C_DD1D);
        let blocks = 64;
        type Decoder = fn(&[u8], &mut [f64]);
        let mut cases: Vec<(&str, usize, Decoder, Decoder)> = vec![
            ("q4_k", 144, q4_k, q4_k_dispatched),
            ("q6_k", 210, q6_k, q6_k_dispatched),
        ];
        let avx2 =
            crate::values::tests::avx2_or_note("every_variant_agrees_with_the_portable_decoder");
        #[cfg(not(target_arch = "x86_64"))]
        let _ = avx2;
        #[cfg(target_arch = "x86_64")]
        if avx2 {
            // SAFETY (of the calls through these): the CPU has AVX2.
            cases.push(("q4_k avx2", 144, q4_k, |b, o| unsafe { avx2::q4_k(b, o) }));
            cases.push(("q6_k avx2", 210, q6_k, |b, o| unsafe { avx2::q6_k(b, o) }));
        }
        for (name, type_size, portable, variant) in cases {
            let bytes: Vec<u8> = (0..blocks * type_size).map(|_| byte()).collect();
            let (mut a, mut b) = (vec![0f64; blocks * 256], vec![0f64; blocks * 256]);
            portable(&bytes, &mut a);
            variant(&bytes, &mut b);
            for (i, (x, y)) in a.iter().zip(&b).enumerate() {
                assert!(
                    x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()),
                    "{name} value {i}: {x} vs {y}"
                );
            }
        }
    }
}
