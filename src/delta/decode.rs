//! The decoder of one tensor's delta: any range of its elements, read where the records lie
//! (a mapped file's, or those held in memory) or, for the array indexed by position — int4's
//! `packed`, quantized's `packed_signs`, its "range field" — from a window buffer holding only
//! the bytes of the range at hand. Sparse indices and values, and int4's outliers, are read in
//! place, never collected: as much memory as the link itself at a low sparsity otherwise.
//!
//! The file was validated on read: lengths, dtypes, ascending in-range indices. A mapped file
//! written in place since (which its stamps then report) must not make a decoder panic: what is
//! decoded from indices that no longer fit is zeros.

use half::f16;

use super::codec::dequant_table;

use crate::formats::wdelta::{ArrayDtype, ArrayRef, Params, Strategy, TensorArrays, TensorEntry};

/// Kept values as they are in the file: a sparse tensor's indices and float32 values, or an
/// int4 tensor's outliers' indices and float16 values.
#[derive(Clone, Copy)]
pub(super) struct Kept<'a> {
    indices: &'a [u8],
    /// Bytes of an index (int32 or int64).
    width: usize,
    values: &'a [u8],
    /// Bytes of a value (4: float32, 2: float16).
    value_width: usize,
}

impl<'a> Kept<'a> {
    fn of(indices: &ArrayRef<'a>, values: &ArrayRef<'a>) -> Kept<'a> {
        Kept::raw(
            indices.dtype,
            indices.data,
            values.data,
            values.dtype.size() as usize,
        )
    }

    /// `indices` of `dtype` and values of `value_width` bytes.
    pub(super) fn raw(
        dtype: ArrayDtype,
        indices: &'a [u8],
        values: &'a [u8],
        value_width: usize,
    ) -> Kept<'a> {
        let width = if dtype == ArrayDtype::Int32 { 4 } else { 8 };
        Kept {
            indices,
            width,
            values,
            value_width,
        }
    }

    fn len(&self) -> usize {
        (self.indices.len() / self.width).min(self.values.len() / self.value_width)
    }

    fn index(&self, k: usize) -> usize {
        let b = &self.indices[k * self.width..];
        if self.width == 4 {
            i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize
        } else {
            i64::from_le_bytes(b[..8].try_into().expect("8 bytes")) as usize
        }
    }

    fn value(&self, k: usize) -> f32 {
        let b = &self.values[k * self.value_width..];
        if self.value_width == 2 {
            f16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32()
        } else {
            f32::from_le_bytes([b[0], b[1], b[2], b[3]])
        }
    }

    /// The first kept value whose index is at least `start`.
    fn first_at(&self, start: usize) -> usize {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.index(mid) < start {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Whether kept values `a..b` have strictly ascending indices within `start..end`.
    fn fit(&self, a: usize, b: usize, start: usize, end: usize) -> bool {
        let mut prev = None;
        (a..b).all(|k| {
            let i = self.index(k);
            let fits = (start..end).contains(&i) && prev.is_none_or(|p| p < i);
            prev = Some(i);
            fits
        })
    }
}

/// One tensor's delta, ready to decode any range of its elements.
pub(super) struct RangeDecoder<'a> {
    kind: Kind<'a>,
}

enum Kind<'a> {
    Sparse(Kept<'a>),
    Quantized {
        cols: usize,
        /// float16, one a row.
        scales: &'a [u8],
    },
    Int4 {
        /// The dequantized value of each byte's two nibbles, high first.
        pairs: Box<[[f32; 2]; 256]>,
        outliers: Kept<'a>,
        all_positions: bool,
    },
}

impl<'a> RangeDecoder<'a> {
    /// The slot (in the order of the strategy's fields) of the array indexed by position.
    pub(super) fn range_field(strategy: Strategy) -> Option<usize> {
        match strategy {
            Strategy::Int4 => Some(4),
            Strategy::Quantized => Some(1),
            Strategy::Sparse => None,
        }
    }

    /// From a tensor's arrays; the range field's data is not read (it may be empty here), nor
    /// are the kept values when they are given per range ([`RangeDecoder::decode_kept`]).
    pub(super) fn new(entry: &TensorEntry, arrays: &TensorArrays<'a>) -> RangeDecoder<'a> {
        let f = &arrays.fields;
        let kind = match entry.params {
            Params::Sparse { .. } => Kind::Sparse(Kept::of(&f[0], &f[1])),
            Params::Quantized { n_cols, .. } => Kind::Quantized {
                cols: n_cols as usize,
                scales: f[0].data,
            },
            Params::Int4 { layout, .. } => {
                let lut = dequant_table(f16_le(f[2].data), f16_le(f[3].data));
                let mut pairs = Box::new([[0f32; 2]; 256]);
                for (b, p) in pairs.iter_mut().enumerate() {
                    *p = [lut[b >> 4], lut[b & 0x0f]];
                }
                Kind::Int4 {
                    pairs,
                    outliers: Kept::of(&f[0], &f[1]),
                    all_positions: layout >= 2,
                }
            }
        };
        RangeDecoder { kind }
    }

    /// Whether the kept values' indices are what the format's reader accepts of a tensor of
    /// `n` values: strictly ascending, each below `n`.
    pub(super) fn indices_fit(&self, n: usize) -> bool {
        match &self.kind {
            Kind::Sparse(kept) | Kind::Int4 { outliers: kept, .. } => kept.fit(0, kept.len(), 0, n),
            Kind::Quantized { .. } => true,
        }
    }

    /// The bytes `from..to` of the range field that elements `start..end` need (consecutive
    /// ranges share at most one byte).
    pub(super) fn range_bytes(&self, start: usize, end: usize) -> (usize, usize) {
        match &self.kind {
            Kind::Sparse(_) => (0, 0),
            Kind::Quantized { .. } => (start / 8, end.div_ceil(8)),
            Kind::Int4 { outliers, .. } => {
                self.int4_range_bytes(start, end, outliers.first_at(start), outliers.first_at(end))
            }
        }
    }

    /// [`RangeDecoder::range_bytes`] of an int4 tensor whose outliers are given per range:
    /// `before_start` and `before_end` outliers are below `start` and `end`.
    pub(super) fn int4_range_bytes(
        &self,
        start: usize,
        end: usize,
        before_start: usize,
        before_end: usize,
    ) -> (usize, usize) {
        let (a, b) = match self.kind {
            Kind::Int4 {
                all_positions: false,
                ..
            } => (start - before_start, end - before_end),
            _ => (start, end),
        };
        (a / 2, b.div_ceil(2))
    }

    /// Writes elements `start..start + out.len()` into `out`; `window` holds the range field's
    /// bytes from `window_from` on, at least those [`RangeDecoder::range_bytes`] names.
    pub(super) fn decode(&self, start: usize, window: &[u8], window_from: usize, out: &mut [f32]) {
        match &self.kind {
            Kind::Sparse(kept) | Kind::Int4 { outliers: kept, .. } => {
                self.decode_kept(start, *kept, 0, window, window_from, out);
            }
            Kind::Quantized { cols, scales } => {
                if *cols == 0 {
                    return;
                }
                let end = start + out.len();
                let mut i = start;
                while i < end {
                    let row_end = ((i / cols + 1) * cols).min(end);
                    let s = f16_le(&scales[(i / cols) * 2..]).to_f32();
                    for (i, o) in (i..row_end).zip(&mut out[i - start..row_end - start]) {
                        let bit = window[(i >> 3) - window_from] & (0x80 >> (i & 7));
                        // signs (+-1.0) * scale: -1.0 * s flips the sign bit only.
                        *o = if bit != 0 { s } else { -s };
                    }
                    i = row_end;
                }
            }
        }
    }

    /// [`RangeDecoder::decode`] of a sparse or int4 tensor with its kept values (int4's
    /// outliers) `kept`, which has at least those of the range, and `before` kept values below
    /// its first.
    pub(super) fn decode_kept(
        &self,
        start: usize,
        kept: Kept<'_>,
        before: usize,
        window: &[u8],
        window_from: usize,
        out: &mut [f32],
    ) {
        let end = start + out.len();
        let a = kept.first_at(start);
        match &self.kind {
            Kind::Sparse(_) => {
                out.fill(0.0);
                for k in a..kept.len() {
                    let i = kept.index(k);
                    if i >= end {
                        break;
                    }
                    if let Some(o) = out.get_mut(i.wrapping_sub(start)) {
                        *o = kept.value(k);
                    }
                }
            }
            Kind::Int4 {
                pairs,
                all_positions,
                ..
            } => {
                let b = kept.first_at(end);
                let (from, to) = self.int4_range_bytes(start, end, before + a, before + b);
                if !kept.fit(a, b, start, end)
                    || from < window_from
                    || to - window_from > window.len()
                {
                    out.fill(0.0);
                    return;
                }
                let nibble = if *all_positions {
                    start
                } else {
                    start - before - a
                };
                int4_fill(
                    pairs,
                    *all_positions,
                    (b - a, |k| kept.index(a + k), |k| kept.value(a + k)),
                    start,
                    nibble - 2 * window_from,
                    window,
                    out,
                );
            }
            Kind::Quantized { .. } => self.decode(start, window, window_from, out),
        }
    }
}

/// A tensor's decoder with its arrays in place: any range ([`Decoder::decode`]), or front to
/// back ([`Decoder::fill`]).
pub struct Decoder<'a> {
    range: RangeDecoder<'a>,
    /// The range field's data (empty when the strategy has none).
    field: &'a [u8],
    /// Position of the next value [`Decoder::fill`] writes.
    pos: usize,
}

impl<'a> Decoder<'a> {
    pub fn new(entry: &TensorEntry, arrays: &TensorArrays<'a>) -> Decoder<'a> {
        let field =
            RangeDecoder::range_field(entry.strategy()).map_or(&[][..], |i| arrays.fields[i].data);
        Decoder {
            range: RangeDecoder::new(entry, arrays),
            field,
            pos: 0,
        }
    }

    /// Writes the next `out.len()` values.
    pub fn fill(&mut self, out: &mut [f32]) {
        self.decode(self.pos, out);
        self.pos += out.len();
    }

    /// Writes elements `start..start + out.len()` into `out`.
    pub(super) fn decode(&self, start: usize, out: &mut [f32]) {
        let (from, to) = self.range.range_bytes(start, start + out.len());
        match self.field.get(from..to) {
            Some(window) => self.range.decode(start, window, from, out),
            // Not what validation found (the file was written in place since).
            None => out.fill(0.0),
        }
    }

    /// See [`RangeDecoder::indices_fit`].
    pub(super) fn indices_fit(&self, n: usize) -> bool {
        self.range.indices_fit(n)
    }
}

/// Decodes the delta of one tensor into `out` (length = product of the entry's shape, which
/// the caller has checked against the base). The file was validated on read: lengths, dtypes
/// and ascending in-range indices.
pub fn decode(entry: &TensorEntry, arrays: &TensorArrays<'_>, out: &mut [f32]) {
    Decoder::new(entry, arrays).fill(out);
}

/// Writes elements `start..start + out.len()` of an int4 delta into `out`: `outliers` and
/// `vals` from the first outlier at or after `start` on (any after the range are not read),
/// `window` the bytes of `packed` from the one holding nibble `nibble`, the first element's
/// (of the first non-outlier from it on, in layout 1) on.
#[allow(clippy::too_many_arguments)]
pub(super) fn int4_decode_range(
    pairs: &[[f32; 2]; 256],
    all_positions: bool,
    outliers: &[usize],
    vals: &[f32],
    start: usize,
    nibble: usize,
    window: &[u8],
    out: &mut [f32],
) {
    let count = outliers.len().min(vals.len());
    let outliers = (count, |k: usize| outliers[k], |k: usize| vals[k]);
    int4_fill(pairs, all_positions, outliers, start, nibble, window, out);
}

/// [`int4_decode_range`] over the outliers given as their count, index and value of each.
fn int4_fill(
    pairs: &[[f32; 2]; 256],
    all_positions: bool,
    (count, index, value): (usize, impl Fn(usize) -> usize, impl Fn(usize) -> f32),
    start: usize,
    nibble: usize,
    window: &[u8],
    out: &mut [f32],
) {
    let end = start + out.len();
    let mut next = 0;
    if all_positions {
        unpack_pairs(pairs, window, nibble, out);
        while next < count && index(next) < end {
            out[index(next) - start] = value(next);
            next += 1;
        }
    } else {
        let mut nibble = nibble;
        let mut i = start;
        while i < end {
            let stop = if next < count {
                index(next).min(end)
            } else {
                end
            };
            unpack_pairs(pairs, window, nibble, &mut out[i - start..stop - start]);
            nibble += stop - i;
            i = stop;
            if i < end {
                out[i - start] = value(next);
                next += 1;
                i += 1;
            }
        }
    }
}

/// Dequantizes nibbles `first..first + out.len()` of `packed` through a table of both nibbles
/// of each byte: one 8-byte copy per byte.
fn unpack_pairs(pairs: &[[f32; 2]; 256], packed: &[u8], first: usize, out: &mut [f32]) {
    let mut j = first;
    let mut o = 0;
    if j & 1 == 1 && !out.is_empty() {
        out[0] = pairs[packed[j >> 1] as usize][1];
        j += 1;
        o = 1;
    }
    let n_pairs = (out.len() - o) / 2;
    let bytes = &packed[j >> 1..(j >> 1) + n_pairs];
    for (pair, &b) in out[o..o + 2 * n_pairs].chunks_exact_mut(2).zip(bytes) {
        pair.copy_from_slice(&pairs[b as usize]);
    }
    o += 2 * n_pairs;
    j += 2 * n_pairs;
    if o < out.len() {
        out[o] = pairs[packed[j >> 1] as usize][0];
    }
}

pub(super) fn f16_le(c: &[u8]) -> f16 {
    f16::from_bits(u16::from_le_bytes([c[0], c[1]]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::delta::codec::{EncodeOptions, encode, entry_for};
    use crate::formats::wdelta::OwnedArray;

    /// The arrays an encoder wrote, as a decoder reads them.
    fn refs_of(arrays: &[OwnedArray]) -> TensorArrays<'_> {
        TensorArrays {
            fields: arrays
                .iter()
                .map(|a| ArrayRef {
                    dtype: a.dtype,
                    data: &a.data,
                })
                .collect(),
        }
    }

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    /// Deltas of `n` values with outliers at the start, the end and side by side.
    fn deltas(n: usize) -> Vec<f32> {
        let mut delta: Vec<f32> = (0..n)
            .map(|i| ((i * 7919) % 997) as f32 * 1e-5 - 5e-3)
            .collect();
        delta[0] = 1.0;
        delta[n - 1] = -1.0;
        if n > 10 {
            delta[5] = 0.5;
            delta[6] = -0.5;
        }
        delta
    }

    /// A sparse delta decodes to its kept values at their indices and zeros elsewhere, whole,
    /// int32 and int64 indices.
    #[test]
    fn sparse_decodes_its_kept_values_in_place() {
        let n = 1000;
        let idx: Vec<i64> = (0..n as i64)
            .filter(|i| i % 7 == 3 || i % 11 == 0)
            .collect();
        let vals: Vec<f32> = idx.iter().map(|&i| (i as f32).sin()).collect();
        let v: Vec<u8> = vals.iter().flat_map(|x| x.to_le_bytes()).collect();
        let mut expected = vec![0f32; n];
        for (&i, &x) in idx.iter().zip(&vals) {
            expected[i as usize] = x;
        }
        let mut cases = 0;
        for dtype in [ArrayDtype::Int32, ArrayDtype::Int64] {
            let ib: Vec<u8> = match dtype {
                ArrayDtype::Int32 => idx.iter().flat_map(|&x| (x as i32).to_le_bytes()).collect(),
                _ => idx.iter().flat_map(|&x| x.to_le_bytes()).collect(),
            };
            let entry = TensorEntry {
                shape: crate::formats::wdelta::PackedShape::from_slice(&[n as u64]),
                dtype: "float32".into(),
                base_dtype: None,
                params: Params::Sparse { sparsity: 0.9 },
            };
            let arrays = TensorArrays {
                fields: vec![
                    ArrayRef { dtype, data: &ib },
                    ArrayRef {
                        dtype: ArrayDtype::Float32,
                        data: &v,
                    },
                ],
            };
            let mut got = vec![f32::NAN; n];
            decode(&entry, &arrays, &mut got);
            assert_eq!(bits(&got), bits(&expected), "{dtype:?}");
            cases += 1;
        }
        assert_eq!(cases, 2);
    }

    /// Every way of reading a delta gives the bits of decoding it whole: front to back, any
    /// range in place, from windows of the range field, and with the range's kept values given
    /// (as `apply` streams them); every strategy, versions 1 and 2, int32 indices too.
    #[test]
    fn any_range_decodes_as_the_whole() {
        let mut cases = 0;
        for n in [1usize, 2, 7, 1000, 1001] {
            let delta = deltas(n);
            for version in [1, 2] {
                for strategy in [Strategy::Sparse, Strategy::Quantized, Strategy::Int4] {
                    let opts = EncodeOptions {
                        strategy,
                        version,
                        outlier_fraction: 0.02,
                        ..Default::default()
                    };
                    let shape = [n as u64];
                    let entry = entry_for(&shape, &opts, Some("float32"));
                    let mut arrays = encode(&delta, &shape, &opts);
                    for narrow in [false, true] {
                        if narrow && strategy == Strategy::Quantized {
                            continue;
                        }
                        if narrow {
                            arrays[0] = narrowed(&arrays[0]);
                        }
                        let context = format!("{strategy:?} v{version} n={n} narrow={narrow}");
                        check_ranges(&entry, &arrays, n, &context);
                        cases += 1;
                    }
                }
            }
        }
        assert_eq!(cases, 5 * 2 * 5);
    }

    /// Int64 indices as int32 (as version 1 files from elsewhere may hold them).
    fn narrowed(a: &OwnedArray) -> OwnedArray {
        let mut a = a.clone();
        if a.dtype == ArrayDtype::Int64 {
            a.data = a
                .data
                .chunks_exact(8)
                .flat_map(|c| (i64::from_le_bytes(c.try_into().unwrap()) as i32).to_le_bytes())
                .collect();
            a.dtype = ArrayDtype::Int32;
        }
        a
    }

    fn check_ranges(entry: &TensorEntry, arrays: &[OwnedArray], n: usize, context: &str) {
        let refs = refs_of(arrays);
        let mut whole = vec![f32::NAN; n];
        decode(entry, &refs, &mut whole);
        let strategy = entry.strategy();
        let ranged = RangeDecoder::new(entry, &refs);
        let field = RangeDecoder::range_field(strategy).map_or(&[][..], |f| &arrays[f].data[..]);
        for step in [1usize, 2, 3, 64, 333, n] {
            let mut front = Decoder::new(entry, &refs);
            let (mut filled, mut at, mut windowed, mut given) = (
                vec![f32::NAN; n],
                vec![f32::NAN; n],
                vec![f32::NAN; n],
                vec![f32::NAN; n],
            );
            for start in (0..n).step_by(step) {
                let end = (start + step).min(n);
                front.fill(&mut filled[start..end]);
                front.decode(start, &mut at[start..end]);
                let (from, to) = ranged.range_bytes(start, end);
                ranged.decode(start, &field[from..to], from, &mut windowed[start..end]);
                if strategy != Strategy::Quantized {
                    // The range's kept values only, and how many come before them.
                    let all = Kept::of(&refs.fields[0], &refs.fields[1]);
                    let (a, b) = (all.first_at(start), all.first_at(end));
                    let piece = Kept {
                        indices: &all.indices[a * all.width..b * all.width],
                        values: &all.values[a * all.value_width..b * all.value_width],
                        ..all
                    };
                    let (from, to) = ranged.int4_range_bytes(start, end, a, b);
                    let window = field.get(from..to).unwrap_or(&[]);
                    ranged.decode_kept(start, piece, a, window, from, &mut given[start..end]);
                } else {
                    given[start..end].copy_from_slice(&windowed[start..end]);
                }
            }
            for (how, got) in [
                ("fill", &filled),
                ("at", &at),
                ("window", &windowed),
                ("given", &given),
            ] {
                assert_eq!(bits(got), bits(&whole), "{context} step={step} {how}");
            }
        }
    }

    /// Indices written in place after validation (no longer ascending, or beyond the tensor)
    /// decode to zeros, never a panic, and `indices_fit` says so.
    #[test]
    fn indices_that_no_longer_fit_decode_to_zeros() {
        let n = 1000usize;
        let delta: Vec<f32> = (0..n).map(|i| ((i * 7919) % 997) as f32 * 1e-5).collect();
        let mut cases = 0;
        for strategy in [Strategy::Sparse, Strategy::Int4] {
            let opts = EncodeOptions {
                strategy,
                outlier_fraction: 0.02,
                ..Default::default()
            };
            let shape = [n as u64];
            let entry = entry_for(&shape, &opts, Some("float32"));
            let mut arrays = encode(&delta, &shape, &opts);
            let decoder = Decoder::new(&entry, &refs_of(&arrays)).indices_fit(n);
            assert!(decoder, "{strategy:?}");
            let short = Decoder::new(&entry, &refs_of(&arrays)).indices_fit(n - 500);
            assert!(!short, "{strategy:?}");
            // The first two indices swapped: no longer strictly ascending.
            let width = arrays[0].dtype.size() as usize;
            let (a, b) = arrays[0].data.split_at_mut(width);
            a.swap_with_slice(&mut b[..width]);
            let refs = refs_of(&arrays);
            assert!(!Decoder::new(&entry, &refs).indices_fit(n), "{strategy:?}");
            let mut out = vec![f32::NAN; n];
            decode(&entry, &refs, &mut out);
            if strategy == Strategy::Int4 {
                assert!(out.iter().all(|&x| x == 0.0));
            } else {
                assert!(out.iter().all(|x| x.is_finite()));
            }
            cases += 1;
        }
        assert_eq!(cases, 2);
    }
}
