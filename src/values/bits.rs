//! Tensors whose bytes differ while their values are equal: zeros of opposite signs, NaNs with
//! other payloads, or another encoding of the same values in a quantized block. Reported as
//! such rather than as a change of rel_l2 0.

use super::dequant::Codec;

/// What differs in the bits of a tensor whose values are all equal.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct BitsDiffer {
    /// Positions holding +0 on one side and -0 on the other.
    pub signed_zeros: u64,
    /// Positions holding NaN on both sides with other bits (payload, sign, quiet bit).
    pub nan_payloads: u64,
    /// Blocks (of a quantized dtype) whose bytes differ while every value decodes the same
    /// and no zero or NaN explains it: another scale or encoding of the same values.
    pub other_encodings: u64,
}

impl BitsDiffer {
    pub fn merge(&mut self, other: &BitsDiffer) {
        self.signed_zeros += other.signed_zeros;
        self.nan_payloads += other.nan_payloads;
        self.other_encodings += other.other_encodings;
    }

    /// "3 signed zeros, 1 NaN payload".
    pub fn describe(&self) -> String {
        let count = |n: u64, one: &str, many: &str| match n {
            0 => None,
            1 => Some(format!("1 {one}")),
            n => Some(format!("{n} {many}")),
        };
        let parts: Vec<String> = [
            count(self.signed_zeros, "signed zero", "signed zeros"),
            count(self.nan_payloads, "NaN payload", "NaN payloads"),
            count(
                self.other_encodings,
                "block encoded differently",
                "blocks encoded differently",
            ),
        ]
        .into_iter()
        .flatten()
        .collect();
        if parts.is_empty() {
            "no position found".into()
        } else {
            parts.join(", ")
        }
    }
}

/// Counts, in two runs of whole blocks of one dtype holding equal values, what makes their
/// bytes differ. `scratch` holds the decoded values of one block per side.
pub(super) fn count(
    old: &[u8],
    new: &[u8],
    codec: &Codec,
    scratch: &mut [Vec<f64>; 2],
) -> BitsDiffer {
    let (block, size) = (codec.block_size as usize, codec.type_size as usize);
    let mut found = BitsDiffer::default();
    if size == 0 {
        return found;
    }
    let [a, b] = scratch;
    a.resize(block, 0.0);
    b.resize(block, 0.0);
    for (raw_a, raw_b) in old.chunks_exact(size).zip(new.chunks_exact(size)) {
        if raw_a == raw_b {
            continue;
        }
        (codec.decode)(raw_a, a);
        (codec.decode)(raw_b, b);
        let mut explained = 0;
        for (&x, &y) in a.iter().zip(b.iter()) {
            if x == 0.0 && y == 0.0 && x.is_sign_negative() != y.is_sign_negative() {
                found.signed_zeros += 1;
                explained += 1;
            } else if x.is_nan() && y.is_nan() && (block == 1 || x.to_bits() != y.to_bits()) {
                // One value per element: the raw bits differ, whatever the decoder kept.
                found.nan_payloads += 1;
                explained += 1;
            }
        }
        if explained == 0 {
            found.other_encodings += 1;
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q8_0_block(scale: half::f16, quant: i8) -> Vec<u8> {
        let mut block = scale.to_le_bytes().to_vec();
        block.extend(std::iter::repeat_n(quant as u8, 32));
        block
    }

    #[test]
    fn signed_zeros_nan_payloads_and_other_encodings_are_told_apart() {
        let f32s = |v: &[u32]| v.iter().flat_map(|b| b.to_le_bytes()).collect::<Vec<u8>>();
        let codec =
            crate::values::dequant::codec(crate::dtype::by_name("f32").unwrap(), false).unwrap();
        let mut scratch = [Vec::new(), Vec::new()];
        let old = f32s(&[0x0000_0000, 0x7fc0_0000, 0x3f80_0000, 0x8000_0000]);
        let new = f32s(&[0x8000_0000, 0x7fc0_0001, 0x3f80_0000, 0x0000_0000]);
        let found = count(&old, &new, &codec, &mut scratch);
        assert_eq!(
            found,
            BitsDiffer {
                signed_zeros: 2,
                nan_payloads: 1,
                other_encodings: 0
            }
        );
        assert_eq!(found.describe(), "2 signed zeros, 1 NaN payload");

        // q8_0: all-zero quants under another positive scale decode to the same +0s; under a
        // negative scale to -0s.
        let codec =
            crate::values::dequant::codec(crate::dtype::by_name("q8_0").unwrap(), false).unwrap();
        let one = q8_0_block(half::f16::from_f32(1.0), 0);
        let two = q8_0_block(half::f16::from_f32(2.0), 0);
        let minus = q8_0_block(half::f16::from_f32(-1.0), 0);
        let found = count(&one, &two, &codec, &mut scratch);
        assert_eq!(found.other_encodings, 1);
        assert_eq!(found.describe(), "1 block encoded differently");
        assert_eq!(count(&one, &minus, &codec, &mut scratch).signed_zeros, 32);
        assert_eq!(
            count(&one, &one, &codec, &mut scratch),
            BitsDiffer::default()
        );
    }
}
