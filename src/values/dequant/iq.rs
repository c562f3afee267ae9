//! ggml's codebook ("iq") types: indices into fixed grids of 4 or 8 values, per-group signs and
//! small per-group scales. The grids are data generated from gguf-py ([`super::iq_tables`]).

use super::bytes::{block_bytes, block_decoder, block_values, each_block, f16_at, u16_at, u32_at};
use super::iq_tables::{
    IQ1S_GRID, IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID, IQ3S_GRID, IQ3XXS_GRID, KSIGNS,
};

/// +1 or -1 for bit `k` of `signs`.
#[inline(always)]
fn sign(signs: u8, k: usize) -> f32 {
    if (signs >> k) & 1 == 0 { 1.0 } else { -1.0 }
}

block_decoder! {
    /// iq2_xxs: d, then 8 groups of 32 values as two u32: four grid indices (bytes of the first)
    /// and, in the second, four 7-bit sign indices and a 4-bit scale in the top bits.
    iq2_xxs, |b, v| {
        let d = f16_at(b, 0);
        for ib in 0..8 {
            let indices = &b[2 + ib * 8..2 + ib * 8 + 4];
            let aux = u32_at(b, 2 + ib * 8 + 4);
            let db = d * (0.5 + (aux >> 28) as f32) * 0.25;
            for j in 0..4 {
                let signs = KSIGNS[((aux >> (7 * j)) & 0x7F) as usize];
                let row = &IQ2XXS_GRID[indices[j] as usize];
                for k in 0..8 {
                    v[ib * 32 + j * 8 + k] = db * f32::from(row[k]) * sign(signs, k);
                }
            }
        }
    }
}

/// The 4-bit scales of 16 groups (iq2_xs, iq2_s): `d * (0.5 + s) * 0.25`.
fn quarter_scales(d: f32, packed: &[u8]) -> [f32; 16] {
    let mut db = [0f32; 16];
    for (i, db) in db.iter_mut().enumerate() {
        let s = (packed[i / 2] >> (4 * (i % 2))) & 0x0F;
        *db = d * (0.5 + f32::from(s)) * 0.25;
    }
    db
}

block_decoder! {
    /// iq2_xs: d, 32 u16 (9-bit grid index, 7-bit sign index), 8 bytes of 4-bit scales.
    iq2_xs, |b, v| {
        let d = f16_at(b, 0);
        let db = quarter_scales(d, &b[66..74]);
        for m in 0..32 {
            let q = u16_at(b, 2 + 2 * m);
            let signs = KSIGNS[(q >> 9) as usize];
            let row = &IQ2XS_GRID[(q & 511) as usize];
            for k in 0..8 {
                v[m * 8 + k] = db[m / 2] * f32::from(row[k]) * sign(signs, k);
            }
        }
    }
}

block_decoder! {
    /// iq2_s: d, 32 low bytes of 10-bit grid indices, 32 sign bytes, 8 bytes of 2-bit index highs,
    /// 8 bytes of 4-bit scales.
    iq2_s, |b, v| {
        let d = f16_at(b, 0);
        let (qs, signs, qh) = (&b[2..34], &b[34..66], &b[66..74]);
        let db = quarter_scales(d, &b[74..82]);
        for m in 0..32 {
            let high = ((qh[m / 4] >> (2 * (m % 4))) & 0x03) as usize;
            let row = &IQ2S_GRID[qs[m] as usize | (high << 8)];
            for k in 0..8 {
                v[m * 8 + k] = db[m / 2] * f32::from(row[k]) * sign(signs[m], k);
            }
        }
    }
}

block_decoder! {
    /// iq3_xxs: d, 64 grid indices (4 values each), then 8 u32: four 7-bit sign indices and a
    /// 4-bit scale per group of 32.
    iq3_xxs, |b, v| {
        let d = f16_at(b, 0);
        let qs = &b[2..66];
        for ib in 0..8 {
            let aux = u32_at(b, 66 + ib * 4);
            let db = d * (0.5 + (aux >> 28) as f32) * 0.5;
            for j in 0..4 {
                let signs = KSIGNS[((aux >> (7 * j)) & 0x7F) as usize];
                for k in 0..8 {
                    let row = &IQ3XXS_GRID[qs[ib * 8 + j * 2 + k / 4] as usize];
                    v[ib * 32 + j * 8 + k] = db * f32::from(row[k % 4]) * sign(signs, k);
                }
            }
        }
    }
}

block_decoder! {
    /// iq3_s: d, 64 low bytes of 9-bit grid indices, 8 bytes of index high bits, 32 sign bytes,
    /// 4 bytes of 4-bit scales (`d * (1 + 2 s)` per 32 values).
    iq3_s, |b, v| {
        let d = f16_at(b, 0);
        let (qs, qh, signs, scales) = (&b[2..66], &b[66..74], &b[74..106], &b[106..110]);
        for (e, v) in v.iter_mut().enumerate() {
            let ib = e / 32;
            let s = (scales[ib / 2] >> (4 * (ib % 2))) & 0x0F;
            let db = d * f32::from(1 + 2 * s);
            let m = e / 4;
            let high = ((qh[m / 8] >> (m % 8)) & 1) as usize;
            let row = &IQ3S_GRID[qs[m] as usize | (high << 8)];
            *v = db * f32::from(row[e % 4]) * sign(signs[e / 8], e % 8);
        }
    }
}

block_decoder! {
    /// iq1_s: d, 32 low bytes of 11-bit grid indices, 8 u16 per 32 values: four 3-bit index highs,
    /// a 3-bit scale and the sign of a ±1/8 shift; value = d * (2 s + 1) * (grid ± 1/8).
    iq1_s, |b, v| {
        let d = f16_at(b, 0);
        let qs = &b[2..34];
        for ib in 0..8 {
            let qh = u16_at(b, 34 + 2 * ib);
            let dl = d * f32::from(2 * ((qh >> 12) & 7) + 1);
            let delta = if qh & 0x8000 == 0 { 0.125f32 } else { -0.125 };
            for j in 0..4 {
                let index = qs[ib * 4 + j] as usize | ((((qh >> (3 * j)) & 7) as usize) << 8);
                let row = &IQ1S_GRID[index];
                for k in 0..8 {
                    v[ib * 32 + j * 8 + k] = dl * (f32::from(row[k]) + delta);
                }
            }
        }
    }
}

block_decoder! {
    /// iq1_m: 32 low bytes of 11-bit grid indices, 16 bytes of (3-bit high, shift sign) nibbles,
    /// then 4 u16 of 3-bit scales whose top nibbles together hold the f16 super-scale d.
    iq1_m, |b, v| {
        let (qs, qh) = (&b[0..32], &b[32..48]);
        let s: [u16; 4] = std::array::from_fn(|i| u16_at(b, 48 + 2 * i));
        let d_bits = ((s[0] & 0xF000) >> 12)
            | ((s[1] & 0xF000) >> 8)
            | ((s[2] & 0xF000) >> 4)
            | (s[3] & 0xF000);
        let d = half::f16::from_bits(d_bits).to_f32();
        for m in 0..32 {
            let nib = (qh[m / 2] >> (4 * (m % 2))) & 0x0F;
            let index = qs[m] as usize | (((nib & 7) as usize) << 8);
            let delta = if nib & 0x08 == 0 { 0.125f32 } else { -0.125 };
            // Scale 2 ib + h covers values [64 ib + 32 h, +32): group m / 4 half (m / 2) % 2.
            let scale_index = m / 2;
            let sc = (s[scale_index / 4] >> (3 * (scale_index % 4))) & 7;
            let dl = d * f32::from(2 * sc + 1);
            let row = &IQ1S_GRID[index];
            for k in 0..8 {
                v[m * 8 + k] = dl * (f32::from(row[k]) + delta);
            }
        }
    }
}
