//! Encoding and decoding of one tensor's delta: pure functions over f32 slices.
//!
//! The numerics follow deltatensors 0.2.0 (numpy 2 semantics) operation by operation, so that
//! files move between the two and decode bit for bit alike:
//! - float32 arithmetic where numpy computes in float32 (arrays combined with Python floats are
//!   float32 under NEP 50), float64 where numpy has Python floats;
//! - round half to even (`np.round`), float16 conversions rounding to nearest even, directly
//!   from float64 where numpy converts a Python float;
//! - row means of the quantized strategy with numpy's pairwise summation.
//!
//! Top-k selection (`argpartition` in the reference) is the one place where the reference is
//! not deterministic on ties; here ties in magnitude go to the lower index.

use half::f16;

use crate::formats::wdelta::{
    ArrayDtype, DtypeName, OwnedArray, PackedShape, Params, Strategy, TensorArrays, TensorEntry,
    index_iter, quantized_cols, quantized_rows,
};

/// What to encode with.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EncodeOptions {
    /// The strategy every tensor is stored with.
    pub strategy: Strategy,
    /// sparse: fraction of entries dropped, in [0, 1).
    pub sparsity: f64,
    /// int4: fraction of entries kept as float16 outliers, in [0, 1].
    pub outlier_fraction: f64,
    /// File format version (1 or 2); changes the int4 layout and index width.
    pub version: u32,
}

impl Default for EncodeOptions {
    fn default() -> Self {
        EncodeOptions {
            strategy: Strategy::Int4,
            sparsity: 0.9,
            outlier_fraction: 0.01,
            version: 1,
        }
    }
}

/// sparse: k = max(1, floor(n (1 - sparsity))), at most n.
pub(super) fn sparse_k(n: u64, sparsity: f64) -> u64 {
    (((n as f64) * (1.0 - sparsity)) as u64).max(1).min(n)
}

/// int4: max(1, floor(n f)), at most n (the reference cannot encode an empty tensor).
pub(super) fn int4_outliers(n: u64, outlier_fraction: f64) -> u64 {
    (((n as f64) * outlier_fraction) as u64).max(1).min(n)
}

/// The header entry of a tensor of `shape`: every size in it follows from the shape and the
/// options alone, which lets the header be written before any data is read.
pub fn entry_for(shape: &[u64], opts: &EncodeOptions, base_dtype: Option<&str>) -> TensorEntry {
    let n = shape.iter().product::<u64>();
    let params = match opts.strategy {
        Strategy::Sparse => Params::Sparse {
            sparsity: opts.sparsity,
        },
        Strategy::Quantized => Params::Quantized {
            n_elements: n,
            n_cols: quantized_cols(shape),
        },
        Strategy::Int4 => Params::Int4 {
            outlier_fraction: opts.outlier_fraction,
            n_elements: n,
            n_outliers: int4_outliers(n, opts.outlier_fraction),
            layout: if opts.version >= 2 { 2 } else { 1 },
        },
    };
    TensorEntry {
        shape: PackedShape::from_slice(shape),
        dtype: "float32".into(),
        base_dtype: if opts.version >= 2 {
            base_dtype.map(DtypeName::from)
        } else {
            None
        },
        params,
    }
}

/// Encodes the delta of one tensor (row-major, `delta.len()` = product of `shape`).
pub fn encode(delta: &[f32], shape: &[u64], opts: &EncodeOptions) -> Vec<OwnedArray> {
    debug_assert_eq!(delta.len() as u64, shape.iter().product::<u64>());
    match opts.strategy {
        Strategy::Sparse => encode_sparse(delta, opts.sparsity),
        Strategy::Quantized => encode_quantized(delta, shape),
        Strategy::Int4 => encode_int4(delta, opts.outlier_fraction, opts.version),
    }
}

fn array(field: &'static str, dtype: ArrayDtype, len: usize, data: Vec<u8>) -> OwnedArray {
    OwnedArray {
        field,
        dtype,
        shape: vec![len as u64],
        data,
    }
}

fn indices_array(field: &'static str, idx: &[usize], wide: bool) -> OwnedArray {
    if wide {
        let data = idx.iter().flat_map(|&i| (i as i64).to_le_bytes()).collect();
        array(field, ArrayDtype::Int64, idx.len(), data)
    } else {
        let data = idx.iter().flat_map(|&i| (i as i32).to_le_bytes()).collect();
        array(field, ArrayDtype::Int32, idx.len(), data)
    }
}

fn f16_array(field: &'static str, vals: impl ExactSizeIterator<Item = f16>) -> OwnedArray {
    let len = vals.len();
    let data = vals.flat_map(|v| v.to_bits().to_le_bytes()).collect();
    array(field, ArrayDtype::Float16, len, data)
}

fn encode_sparse(delta: &[f32], sparsity: f64) -> Vec<OwnedArray> {
    let k = sparse_k(delta.len() as u64, sparsity) as usize;
    let idx = top_k_indices(delta, k);
    let values: Vec<u8> = idx.iter().flat_map(|&i| delta[i].to_le_bytes()).collect();
    vec![
        indices_array("indices", &idx, true),
        array("values", ArrayDtype::Float32, idx.len(), values),
    ]
}

fn encode_quantized(delta: &[f32], shape: &[u64]) -> Vec<OwnedArray> {
    let rows = quantized_rows(shape) as usize;
    let cols = quantized_cols(shape) as usize;
    let mut scales = Vec::with_capacity(rows);
    let mut abs = vec![0f32; cols.min(delta.len())];
    for r in 0..rows {
        if cols == 0 {
            scales.push(f16::ZERO);
            continue;
        }
        let row = &delta[r * cols..(r + 1) * cols];
        for (a, &x) in abs.iter_mut().zip(row) {
            *a = x.abs();
        }
        // np.mean(float32, axis=1): pairwise float32 sum, divided by the count.
        let mean = (f64::from(pairwise_sum(&abs)) / cols as f64) as f32;
        scales.push(f16::from_f32(mean));
    }
    let packed = pack_signs(delta);
    vec![
        f16_array("scales", scales.into_iter()),
        array("packed_signs", ArrayDtype::Uint8, packed.len(), packed),
    ]
}

/// MSB-first bits, 1 for x >= 0 (also for -0.0 and NaN, as `np.sign` then `signs == 0 -> 1`).
pub(super) fn pack_signs(delta: &[f32]) -> Vec<u8> {
    delta
        .chunks(8)
        .map(|c| {
            let mut b = 0u8;
            for (j, &x) in c.iter().enumerate() {
                if x >= 0.0 || x.is_nan() {
                    b |= 0x80 >> j;
                }
            }
            b
        })
        .collect()
}

avx2_twin! {
    /// `d` = `f` − (`prev` or `d`), equal bits giving 0 (NaN − NaN would poison quantized's
    /// row scale and int4's range); compiled for AVX2 too.
    pub(super) fn subtract_chunk(prev: Option<&[f32]>, f: &[f32], d: &mut [f32]) = subtract_chunk_body;
}

#[inline(always)]
fn subtract_chunk_body(prev: Option<&[f32]>, f: &[f32], d: &mut [f32]) {
    let diff = |f: f32, p: f32| {
        if f.to_bits() == p.to_bits() {
            0.0
        } else {
            f - p
        }
    };
    match prev {
        Some(p) => {
            for ((d, &f), &p) in d.iter_mut().zip(f).zip(p) {
                *d = diff(f, p);
            }
        }
        None => {
            for (d, &f) in d.iter_mut().zip(f) {
                *d = diff(f, *d);
            }
        }
    }
}

/// numpy's pairwise summation of float32 (`@TYPE@_pairwise_sum`, blocks of 128, 8 lanes).
pub(super) fn pairwise_sum(a: &[f32]) -> f32 {
    let n = a.len();
    if n < 8 {
        let mut res = 0f32;
        for &x in a {
            res += x;
        }
        res
    } else if n <= 128 {
        let mut r = [0f32; 8];
        r.copy_from_slice(&a[..8]);
        let mut i = 8;
        while i < n - (n % 8) {
            for j in 0..8 {
                r[j] += a[i + j];
            }
            i += 8;
        }
        let mut res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        while i < n {
            res += a[i];
            i += 1;
        }
        res
    } else {
        let mut n2 = n / 2;
        n2 -= n2 % 8;
        pairwise_sum(&a[..n2]) + pairwise_sum(&a[n2..])
    }
}

/// Scale and zero point of the int4 strategy, and the float32 values quantization uses.
struct Int4Params {
    scale: f16,
    zero_point: f16,
    /// v1 quantization: float32(min) and float32(range), range computed in float64.
    min32: f32,
    range32: f32,
    flat: bool,
}

fn int4_params(min: f64, max: f64) -> Int4Params {
    let range = max - min;
    if range < 1e-8 {
        Int4Params {
            scale: f16::ONE,
            zero_point: f16_from_f64(min),
            min32: min as f32,
            range32: range as f32,
            flat: true,
        }
    } else {
        Int4Params {
            scale: f16_from_f64(range / 15.0),
            zero_point: f16_from_f64(min),
            min32: min as f32,
            range32: range as f32,
            flat: false,
        }
    }
}

#[inline]
// `clamp` would keep a NaN; `max`/`min` drop it, which is what makes the cast below sound.
#[allow(clippy::manual_clamp)]
fn quantize(x: f32, offset: f32, range: f32) -> u8 {
    // (x - min) / range * 15, rounded half to even, clipped to [0, 15]; NaN gives 0 (numpy's
    // cast of NaN on x86). `max` and `min` drop a NaN operand, so the result is finite.
    let v = round_half_even_small(((x - offset) / range * 15.0).max(-1.0).min(16.0));
    let v = v.max(0.0).min(15.0);
    // SAFETY: v is finite and in [0, 15], representable as i32.
    unsafe { v.to_int_unchecked::<i32>() as u8 }
}

/// min, max and whether a NaN was seen, over 8 lanes so that the loop vectorizes.
#[derive(Clone, Copy)]
pub(super) struct MinMax {
    lo: [f32; 8],
    hi: [f32; 8],
    nan: [bool; 8],
}

impl MinMax {
    pub(super) const EMPTY: MinMax = MinMax {
        lo: [f32::INFINITY; 8],
        hi: [f32::NEG_INFINITY; 8],
        nan: [false; 8],
    };

    fn new() -> Self {
        Self::EMPTY
    }

    // Lane-wise indexing is what lets the compiler keep 8 independent min/max lanes.
    #[allow(clippy::needless_range_loop)]
    #[inline(always)]
    fn update(&mut self, seg: &[f32]) {
        let mut chunks = seg.chunks_exact(8);
        for c in &mut chunks {
            for j in 0..8 {
                let x = c[j];
                self.lo[j] = if x < self.lo[j] { x } else { self.lo[j] };
                self.hi[j] = if x > self.hi[j] { x } else { self.hi[j] };
                self.nan[j] |= x.is_nan();
            }
        }
        for (j, &x) in chunks.remainder().iter().enumerate() {
            self.lo[j] = if x < self.lo[j] { x } else { self.lo[j] };
            self.hi[j] = if x > self.hi[j] { x } else { self.hi[j] };
            self.nan[j] |= x.is_nan();
        }
    }

    /// [`MinMax::update`] with the values of `block` whose magnitude key is below `lower`;
    /// true when some value reached it.
    #[allow(clippy::needless_range_loop)]
    #[inline(always)]
    pub(super) fn update_below(&mut self, block: &[f32; 8], lower: u32) -> bool {
        let mut reached = false;
        for j in 0..8 {
            let x = block[j];
            let below = magnitude_key(x) < lower;
            reached |= !below;
            let (l, h) = if below {
                (x, x)
            } else {
                (f32::INFINITY, f32::NEG_INFINITY)
            };
            self.lo[j] = if l < self.lo[j] { l } else { self.lo[j] };
            self.hi[j] = if h > self.hi[j] { h } else { self.hi[j] };
            self.nan[j] |= below & x.is_nan();
        }
        reached
    }

    /// [`MinMax::update_below`] over any number of values (value `j` of a last run of fewer
    /// than eight goes to lane `j`).
    #[inline(always)]
    pub(super) fn update_below_all(&mut self, d: &[f32], lower: u32) {
        let mut chunks = d.chunks_exact(8);
        for c in &mut chunks {
            self.update_below(c.try_into().expect("8 values"), lower);
        }
        for (j, &x) in chunks.remainder().iter().enumerate() {
            if magnitude_key(x) < lower {
                self.lo[j] = if x < self.lo[j] { x } else { self.lo[j] };
                self.hi[j] = if x > self.hi[j] { x } else { self.hi[j] };
                self.nan[j] |= x.is_nan();
            }
        }
    }

    /// Each lane's min, max and whether it saw a NaN.
    pub(super) fn lanes(&self) -> impl Iterator<Item = (f32, f32, bool)> + '_ {
        (0..8).map(|j| (self.lo[j], self.hi[j], self.nan[j]))
    }

    fn finish(&self) -> (f32, f32, bool) {
        let lo = self
            .lo
            .iter()
            .fold(f32::INFINITY, |a, &b| if b < a { b } else { a });
        let hi = self
            .hi
            .iter()
            .fold(f32::NEG_INFINITY, |a, &b| if b > a { b } else { a });
        (lo, hi, self.nan.iter().any(|&b| b))
    }
}

/// Round half to even for |x| < 2^22, by adding and removing 1.5 x 2^23 (the addition rounds
/// in the default mode, to nearest even); two additions where `round_ties_even` may call libm.
/// Clipping to [-1, 16] before rounding does not change the result clipped to [0, 15].
#[inline]
fn round_half_even_small(x: f32) -> f32 {
    const MAGIC: f32 = 12_582_912.0;
    (x + MAGIC) - MAGIC
}

/// Packs 4-bit values two per byte, high nibble first, as they come.
struct NibblePacker {
    out: Vec<u8>,
    /// A high nibble waiting for its low one.
    pending: Option<u8>,
}

impl NibblePacker {
    fn with_capacity(values: usize) -> Self {
        NibblePacker {
            out: Vec::with_capacity(values.div_ceil(2)),
            pending: None,
        }
    }

    fn push(&mut self, q: u8) {
        match self.pending.take() {
            None => self.pending = Some(q << 4),
            Some(h) => self.out.push(h | (q & 0x0f)),
        }
    }

    fn zeros(&mut self, count: usize) {
        let mut count = count;
        if count > 0 && self.pending.is_some() {
            self.push(0);
            count -= 1;
        }
        self.out.extend(std::iter::repeat_n(0, count / 2));
        if count % 2 == 1 {
            self.push(0);
        }
    }

    /// Quantizes and packs a run of values (pairs at a time, so that the loop vectorizes).
    #[inline(always)]
    fn quantize(&mut self, seg: &[f32], offset: f32, range: f32) {
        let mut seg = seg;
        if self.pending.is_some()
            && let Some((&x, rest)) = seg.split_first()
        {
            self.push(quantize(x, offset, range));
            seg = rest;
        }
        // Runs of up to 64 values: quantized in a plain loop over contiguous floats (which the
        // compiler vectorizes; a pair-at-a-time loop did not), then packed into an array
        // appended whole (an iterator's `extend` is not always inlined into the AVX2 copy).
        let mut q = [0u8; 64];
        let mut packed = [0u8; 32];
        for run in seg.chunks(64) {
            for (q, &x) in q.iter_mut().zip(run) {
                *q = quantize(x, offset, range);
            }
            let pairs = run.len() / 2;
            for (b, p) in packed.iter_mut().zip(q[..2 * pairs].chunks_exact(2)) {
                *b = (p[0] << 4) | p[1];
            }
            self.out.extend_from_slice(&packed[..pairs]);
            if run.len() % 2 == 1 {
                self.push(q[run.len() - 1]);
            }
        }
    }

    fn finish(mut self) -> Vec<u8> {
        if let Some(h) = self.pending {
            self.out.push(h);
        }
        self.out
    }
}

avx2_twin! {
    /// int4's passes over the delta (top-k, min/max, quantization), compiled for AVX2 too.
    fn encode_int4(delta: &[f32], outlier_fraction: f64, version: u32) -> Vec<OwnedArray> = encode_int4_body;
}

#[inline(always)]
fn encode_int4_body(delta: &[f32], outlier_fraction: f64, version: u32) -> Vec<OwnedArray> {
    let n = delta.len();
    let k = int4_outliers(n as u64, outlier_fraction) as usize;
    // min and max of the non-outliers, as numpy's min/max (NaN propagates): gathered in the
    // pass that collects the outlier candidates when it runs, else a pass of its own. A zero
    // bound is found again by that pass, whose order decides between -0 and +0.
    let mut fused = MinMax::new();
    let (idx, fused) = match (k > 0 && k < n)
        .then(|| top_k_by_sample(delta, k, Some(&mut fused)))
        .flatten()
    {
        Some(idx) => (idx, Some(fused.finish())),
        None => (top_k_indices(delta, k), None),
    };
    let (lo, hi, nan) = match fused {
        Some((lo, hi, nan)) if nan || (lo != 0.0 && hi != 0.0) => (lo, hi, nan),
        _ => {
            let mut mm = MinMax::new();
            for_each_segment(delta, &idx, |seg| mm.update(seg));
            mm.finish()
        }
    };
    let (min, max) = if idx.len() == n {
        (0.0, 0.0)
    } else if nan {
        (f64::NAN, f64::NAN)
    } else {
        (f64::from(lo), f64::from(hi))
    };
    let p = int4_params(min, max);

    let packed = if version >= 2 {
        // All n positions against the stored float16 scale and zero point; outliers get 0.
        let (offset, range) = v2_quant_params(p.scale, p.zero_point);
        let mut w = NibblePacker::with_capacity(n);
        let mut first = true;
        for_each_segment(delta, &idx, |seg| {
            if !first {
                w.push(0);
            }
            first = false;
            if p.flat {
                w.zeros(seg.len());
            } else {
                w.quantize(seg, offset, range);
            }
        });
        w.finish()
    } else {
        let mut w = NibblePacker::with_capacity(n - idx.len());
        for_each_segment(delta, &idx, |seg| {
            if p.flat {
                w.zeros(seg.len());
            } else {
                w.quantize(seg, p.min32, p.range32);
            }
        });
        w.finish()
    };

    let wide = version < 2 || n > i32::MAX as usize;
    vec![
        indices_array("outlier_idx", &idx, wide),
        f16_array("outlier_vals", idx.iter().map(|&i| f16::from_f32(delta[i]))),
        f16_array("scale", std::iter::once(p.scale)),
        f16_array("zero_point", std::iter::once(p.zero_point)),
        array("packed", ArrayDtype::Uint8, packed.len(), packed),
    ]
}

// ---- int4 over a large tensor in blocks ------------------------------------------------------
//
// A large tensor is not held whole: its delta is computed block by block, in several passes.
// The outliers are selected by radix counting (`sparse_blocks::top_k`, which also gives the
// min/max of the other values and how many outliers each block has), then each block is
// quantized and packed, its outliers found again as it is read. The arrays are byte for byte
// those of [`encode`] over the whole delta.

/// The min/max of the non-outliers with the lanes [`encode`]'s own pass gives them (each run
/// between outliers starts at lane 0), fed piece by piece in order: what decides the sign of a
/// zero bound.
pub(super) struct Int4ExactBounds {
    mm: MinMax,
    /// Offset in the current run between outliers.
    run: usize,
}

impl Int4ExactBounds {
    pub(super) fn new() -> Self {
        Int4ExactBounds {
            mm: MinMax::new(),
            run: 0,
        }
    }

    /// Adds the piece starting at element `start` (pieces come in order); `outlier(i, x)`
    /// says whether element `i`, of value `x`, is an outlier (asked in order, once each).
    pub(super) fn add(
        &mut self,
        piece: &[f32],
        start: usize,
        mut outlier: impl FnMut(usize, f32) -> bool,
    ) {
        for (i, &x) in piece.iter().enumerate() {
            if outlier(start + i, x) {
                self.run = 0;
                continue;
            }
            let j = self.run % 8;
            let mm = &mut self.mm;
            mm.lo[j] = if x < mm.lo[j] { x } else { mm.lo[j] };
            mm.hi[j] = if x > mm.hi[j] { x } else { mm.hi[j] };
            mm.nan[j] |= x.is_nan();
            self.run += 1;
        }
    }

    pub(super) fn finish(&self) -> (f32, f32, bool) {
        self.mm.finish()
    }
}

/// What the selection settles: the quantization parameters.
pub(super) struct Int4Settled {
    params: Int4Params,
    version: u32,
}

impl Int4Settled {
    /// From the min/max of the non-outliers (None when every value is an outlier), as
    /// [`encode`] settles them.
    pub(super) fn new(bounds: Option<(f32, f32, bool)>, version: u32) -> Self {
        let (min, max) = match bounds {
            None => (0.0, 0.0),
            Some((_, _, true)) => (f64::NAN, f64::NAN),
            Some((lo, hi, false)) => (f64::from(lo), f64::from(hi)),
        };
        Int4Settled {
            params: int4_params(min, max),
            version,
        }
    }

    /// The `scale` and `zero_point` arrays.
    pub(super) fn params_arrays(&self) -> Vec<OwnedArray> {
        vec![
            f16_array("scale", std::iter::once(self.params.scale)),
            f16_array("zero_point", std::iter::once(self.params.zero_point)),
        ]
    }

    /// Whether the outlier indices are stored as int64, for a tensor of `n` values.
    pub(super) fn wide(&self, n: usize) -> bool {
        self.version < 2 || n > i32::MAX as usize
    }

    /// The nibble of element `start` in `packed` (of the first non-outlier from it on, in
    /// layout 1), `before` outliers being below it.
    pub(super) fn first_nibble(&self, start: usize, before: usize) -> usize {
        if self.version >= 2 {
            start
        } else {
            start - before
        }
    }

    /// Quantizes and packs the piece of the delta starting at `start` onto `out`, which holds
    /// `packed`'s bytes up to this piece (from any byte on; empty at the start of a block);
    /// `first_nibble` is the piece's ([`Int4Settled::first_nibble`]) and `outliers` the
    /// piece's outliers (ascending). An odd first nibble with `out` empty has a zero high
    /// nibble before it, and an odd last one a zero low nibble after it (to be OR-ed with the
    /// neighbours' bytes).
    pub(super) fn pack_append(
        &self,
        piece: &[f32],
        start: usize,
        first_nibble: usize,
        outliers: &[usize],
        out: &mut Vec<u8>,
    ) {
        int4_pack(self, piece, start, first_nibble, outliers, out);
    }

    /// The dequantized value of each byte's two nibbles, high first (as the file decodes).
    pub(super) fn pairs(&self) -> Box<[[f32; 2]; 256]> {
        let lut = dequant_table(self.params.scale, self.params.zero_point);
        let mut pairs = Box::new([[0f32; 2]; 256]);
        for (b, p) in pairs.iter_mut().enumerate() {
            *p = [lut[b >> 4], lut[b & 0x0f]];
        }
        pairs
    }

    /// Whether `packed` holds every position (layout 2).
    pub(super) fn all_positions(&self) -> bool {
        self.version >= 2
    }
}

avx2_twin! {
    /// [`Int4Settled::pack_append`], compiled for AVX2 too.
    fn int4_pack(settled: &Int4Settled, piece: &[f32], start: usize, first_nibble: usize, outliers: &[usize], out: &mut Vec<u8>) = int4_pack_body;
}

#[inline(always)]
fn int4_pack_body(
    settled: &Int4Settled,
    block: &[f32],
    start: usize,
    first_nibble: usize,
    inner: &[usize],
    out: &mut Vec<u8>,
) {
    let p = &settled.params;
    let end = start + block.len();
    let mut w = NibblePacker {
        out: std::mem::take(out),
        pending: None,
    };
    if first_nibble % 2 == 1 {
        // The high nibble before, waiting for this piece's first.
        w.pending = Some(w.out.pop().unwrap_or(0));
    }
    w.out.reserve(block.len().div_ceil(2) + 1);
    let (offset, range) = if settled.version >= 2 {
        v2_quant_params(p.scale, p.zero_point)
    } else {
        (p.min32, p.range32)
    };
    let mut from = start;
    for &o in inner.iter().chain(std::iter::once(&end)) {
        let seg = &block[from - start..o - start];
        if p.flat {
            w.zeros(seg.len());
        } else {
            w.quantize(seg, offset, range);
        }
        if o < end && settled.version >= 2 {
            w.push(0);
        }
        from = o + 1;
    }
    *out = w.finish();
}

/// Appends a block's packed bytes ([`Int4Settled::pack_append`] from an empty buffer) to the
/// bytes of the blocks before it; `odd` when the block's first nibble is odd (its first byte
/// shares the last one's).
pub(super) fn int4_join(packed: &mut Vec<u8>, bytes: &[u8], odd: bool) {
    let mut bytes = bytes;
    if odd && let (Some(last), Some((&first, rest))) = (packed.last_mut(), bytes.split_first()) {
        *last |= first;
        bytes = rest;
    }
    packed.extend_from_slice(bytes);
}

/// Version 2 quantizes against what decoding uses: zero point float32(zp) and a range of
/// float32(float64(scale) * 15).
fn v2_quant_params(scale: f16, zero_point: f16) -> (f32, f32) {
    (zero_point.to_f32(), (scale.to_f64() * 15.0) as f32)
}

/// Calls `f` with the runs of values between the ascending `outliers` (one run more than
/// there are outliers; runs may be empty).
#[inline(always)]
fn for_each_segment(delta: &[f32], outliers: &[usize], mut f: impl FnMut(&[f32])) {
    let mut start = 0;
    for &o in outliers.iter().chain(std::iter::once(&delta.len())) {
        f(&delta[start..o]);
        start = o + 1;
    }
}

/// Indices of the `k` largest magnitudes, ascending (NaN counts as largest, as in numpy's
/// sort order); ties at the threshold go to the lowest indices. The order is that of the bit
/// pattern of |x| ([`magnitude_key`]), which is monotonic in the magnitude.
#[inline(always)]
pub(super) fn top_k_indices(x: &[f32], k: usize) -> Vec<usize> {
    let n = x.len();
    if k == 0 {
        return Vec::new();
    }
    if k >= n {
        return (0..n).collect();
    }
    top_k_by_sample(x, k, None).unwrap_or_else(|| top_k_radix(x, k))
}

/// The order of magnitudes: |x|'s bit pattern (NaN above infinity).
#[inline]
pub(super) fn magnitude_key(v: f32) -> u32 {
    v.to_bits() & 0x7fff_ffff
}

/// Values sampled (at a fixed stride) to guess a lower bound of the threshold.
const TOP_K_SAMPLES: usize = 4096;

/// [`top_k_indices`] in one pass over `x` for the common case: a strided sample guesses a key
/// that at least `k` values reach, with a wide margin; the values that reach it (a few times
/// `k`) are collected in index order, and the exact threshold and ties are found among them.
/// The result is exact whatever the guess; None when fewer than `k` values reached it (the
/// caller then selects over everything).
#[inline(always)]
fn top_k_by_sample(x: &[f32], k: usize, mut rest: Option<&mut MinMax>) -> Option<Vec<usize>> {
    let n = x.len();
    if n < 4 * TOP_K_SAMPLES || k > n / 32 {
        // Small tensors, or a large share kept: the radix passes cost about as much.
        return None;
    }
    let step = n / TOP_K_SAMPLES;
    let mut sample: Vec<u32> = (0..TOP_K_SAMPLES)
        .map(|i| magnitude_key(x[i * step]))
        .collect();
    // The sample's expected count above the threshold is k / n of it; twice that and 16 more
    // (several standard deviations) makes a guess above the threshold rare.
    let expected = k as f64 / n as f64 * TOP_K_SAMPLES as f64;
    let rank = ((2.0 * expected) as usize + 16).min(TOP_K_SAMPLES - 1);
    let (_, &mut lower, _) = sample.select_nth_unstable_by(rank, |a, b| b.cmp(a));
    // The candidates' keys are kept beside them: reading them from `x` again would be two
    // more passes over memory (the candidates are spread over all of it).
    let mut candidates = Vec::with_capacity(4 * k);
    let mut keys: Vec<u32> = Vec::with_capacity(4 * k);
    let mut collect = |i: usize, v: f32| {
        let c = magnitude_key(v);
        if c >= lower {
            candidates.push(i);
            keys.push(c);
        }
    };
    match rest.as_deref_mut() {
        None => x.iter().enumerate().for_each(|(i, &v)| collect(i, v)),
        Some(mm) => {
            let mut blocks = x.chunks_exact(8);
            for (b, block) in (&mut blocks).enumerate() {
                let block: &[f32; 8] = block.try_into().expect("8 values");
                if mm.update_below(block, lower) {
                    for (j, &v) in block.iter().enumerate() {
                        collect(b * 8 + j, v);
                    }
                }
            }
            let start = n - blocks.remainder().len();
            for (i, &v) in blocks.remainder().iter().enumerate() {
                if magnitude_key(v) < lower {
                    mm.update(&[v]);
                } else {
                    collect(start + i, v);
                }
            }
        }
    }
    if candidates.len() < k {
        return None;
    }
    // Every value at or above the k-th largest key reached `lower`: all are candidates.
    let mut order = keys.clone();
    let (_, &mut threshold, _) = order.select_nth_unstable_by(k - 1, |a, b| b.cmp(a));
    let above = order.iter().filter(|&&c| c > threshold).count();
    let mut ties = k - above;
    let mut kept = Vec::with_capacity(k);
    for (&i, &c) in candidates.iter().zip(&keys) {
        if c > threshold || (c == threshold && ties > 0) {
            if c == threshold {
                ties -= 1;
            }
            kept.push(i);
        } else if let Some(mm) = rest.as_deref_mut() {
            mm.update(&x[i..=i]);
        }
    }
    Some(kept)
}

/// [`top_k_indices`] by radix selection on the keys: two histogram passes and one collecting
/// pass, whatever the values.
#[inline(always)]
fn top_k_radix(x: &[f32], k: usize) -> Vec<usize> {
    let mut hist = vec![0u64; 1 << 16];
    for &v in x {
        hist[(magnitude_key(v) >> 16) as usize] += 1;
    }
    let mut above = 0u64;
    let mut bucket = 0usize;
    for b in (0..1usize << 16).rev() {
        if above + hist[b] >= k as u64 {
            bucket = b;
            break;
        }
        above += hist[b];
    }
    hist.iter_mut().for_each(|h| *h = 0);
    for &v in x {
        let kk = magnitude_key(v);
        if (kk >> 16) as usize == bucket {
            hist[(kk & 0xffff) as usize] += 1;
        }
    }
    let mut threshold = 0u32;
    let mut ties = 0u64;
    for lo in (0..1usize << 16).rev() {
        if above + hist[lo] >= k as u64 {
            threshold = ((bucket as u32) << 16) | lo as u32;
            ties = k as u64 - above;
            break;
        }
        above += hist[lo];
    }
    let mut out = Vec::with_capacity(k);
    for (i, &v) in x.iter().enumerate() {
        let kk = magnitude_key(v);
        if kk > threshold {
            out.push(i);
        } else if kk == threshold && ties > 0 {
            out.push(i);
            ties -= 1;
        }
    }
    out
}

/// float64 to float16 with a single rounding to nearest even, as numpy's
/// `npy_double_to_half` (converting through float32 could round twice). Rounding to float32
/// "to odd" first keeps the sticky information, and float32 has enough spare bits.
pub(super) fn f16_from_f64(x: f64) -> f16 {
    let t = x as f32;
    if !t.is_finite() || f64::from(t) == x {
        return f16::from_f32(t);
    }
    let mut bits = t.to_bits();
    // Truncate toward zero, then mark inexactness in the lowest bit.
    if f64::from(t).abs() > x.abs() {
        bits -= 1;
    }
    bits |= 1;
    f16::from_f32(f32::from_bits(bits))
}

/// Decodes the delta of one tensor into `out` (length = product of the entry's shape, which
/// the caller has checked against the base). The file was validated on read: lengths, dtypes
/// and ascending in-range indices.
pub fn decode(entry: &TensorEntry, arrays: &TensorArrays<'_>, out: &mut [f32]) {
    Decoder::new(entry, arrays).fill(out);
}

/// Whether `idx` is what the format's reader accepts of indices into `n` values: strictly
/// ascending, each below `n`. Asked of a decoder's own copy, so bytes of a mapped file written
/// after they were validated cannot make the decoder index out of bounds.
fn indices_fit(idx: &[usize], n: usize) -> bool {
    idx.windows(2).all(|w| w[0] < w[1]) && idx.last().is_none_or(|&last| last < n)
}

/// Streaming decoder: [`Decoder::fill`] writes the next values of the delta, so a tensor can be
/// decoded chunk by chunk without holding it whole.
pub struct Decoder<'a> {
    kind: DecoderKind<'a>,
    /// Position of the next value.
    pos: usize,
}

enum DecoderKind<'a> {
    Sparse {
        idx: Vec<usize>,
        vals: &'a [u8],
        next: usize,
    },
    Quantized {
        cols: usize,
        scales: &'a [u8],
        signs: &'a [u8],
    },
    Int4 {
        lut: [f32; 16],
        packed: &'a [u8],
        outliers: Vec<usize>,
        vals: &'a [u8],
        /// Next outlier.
        next: usize,
        /// Layout 1: nibble index of the next non-outlier.
        nibble: usize,
        all_positions: bool,
    },
}

impl<'a> Decoder<'a> {
    pub fn new(entry: &TensorEntry, arrays: &TensorArrays<'a>) -> Decoder<'a> {
        let f = &arrays.fields;
        let kind = match entry.params {
            Params::Sparse { .. } => DecoderKind::Sparse {
                idx: index_iter(f[0].dtype, f[0].data)
                    .map(|i| i as usize)
                    .collect(),
                vals: f[1].data,
                next: 0,
            },
            Params::Quantized { n_cols, .. } => DecoderKind::Quantized {
                cols: n_cols as usize,
                scales: f[0].data,
                signs: f[1].data,
            },
            Params::Int4 { layout, .. } => DecoderKind::Int4 {
                lut: dequant_table(f16_le(f[2].data), f16_le(f[3].data)),
                packed: f[4].data,
                outliers: index_iter(f[0].dtype, f[0].data)
                    .map(|i| i as usize)
                    .collect(),
                vals: f[1].data,
                next: 0,
                nibble: 0,
                all_positions: layout >= 2,
            },
        };
        Decoder { kind, pos: 0 }
    }

    /// Whether its copy of the tensor's indices (sparse's, int4's outliers') still holds what
    /// validation found, for a tensor of `n` values.
    pub(super) fn indices_fit(&self, n: usize) -> bool {
        match &self.kind {
            DecoderKind::Sparse { idx, .. } => indices_fit(idx, n),
            DecoderKind::Int4 { outliers, .. } => indices_fit(outliers, n),
            DecoderKind::Quantized { .. } => true,
        }
    }

    /// Writes the next `out.len()` values.
    pub fn fill(&mut self, out: &mut [f32]) {
        let start = self.pos;
        let end = start + out.len();
        match &mut self.kind {
            DecoderKind::Sparse { idx, vals, next } => {
                out.fill(0.0);
                while *next < idx.len() && idx[*next] < end {
                    out[idx[*next] - start] = f32_le(&vals[*next * 4..]);
                    *next += 1;
                }
            }
            DecoderKind::Quantized {
                cols,
                scales,
                signs,
            } => {
                if *cols == 0 {
                    return;
                }
                for (i, o) in (start..).zip(out.iter_mut()) {
                    let s = f16_le(&scales[(i / *cols) * 2..]).to_f32();
                    let bit = signs[i >> 3] & (0x80 >> (i & 7));
                    // signs (+-1.0) * scale: -1.0 * s flips the sign bit only.
                    *o = if bit != 0 { s } else { -s };
                }
            }
            DecoderKind::Int4 {
                lut,
                packed,
                outliers,
                vals,
                next,
                nibble,
                all_positions,
            } => {
                if *all_positions {
                    unpack_run(lut, packed, start, out);
                    while *next < outliers.len() && outliers[*next] < end {
                        out[outliers[*next] - start] = f16_le(&vals[*next * 2..]).to_f32();
                        *next += 1;
                    }
                } else {
                    let mut i = start;
                    while i < end {
                        let stop = if *next < outliers.len() {
                            outliers[*next].min(end)
                        } else {
                            end
                        };
                        unpack_run(lut, packed, *nibble, &mut out[i - start..stop - start]);
                        *nibble += stop - i;
                        i = stop;
                        if i < end {
                            out[i - start] = f16_le(&vals[*next * 2..]).to_f32();
                            *next += 1;
                            i += 1;
                        }
                    }
                }
            }
        }
        self.pos = end;
    }
}

/// One tensor's delta, ready to decode any range of its elements: the small arrays (outliers,
/// indices, scales) are decoded once, and the array indexed by position — int4's `packed`,
/// quantized's `packed_signs`, its "range field" — is given per range, so a reader streaming
/// the file holds only the bytes of the range at hand. Decodes the same values as [`Decoder`].
pub(super) struct RangeDecoder {
    kind: RangeKind,
}

enum RangeKind {
    Sparse {
        idx: Vec<usize>,
        vals: Vec<f32>,
    },
    Quantized {
        cols: usize,
        scales: Vec<f32>,
    },
    Int4 {
        /// The dequantized value of each byte's two nibbles, high first.
        pairs: Box<[[f32; 2]; 256]>,
        outliers: Vec<usize>,
        vals: Vec<f32>,
        all_positions: bool,
    },
}

impl RangeDecoder {
    /// The slot (in the order of the strategy's fields) of the array indexed by position.
    pub(super) fn range_field(strategy: Strategy) -> Option<usize> {
        match strategy {
            Strategy::Int4 => Some(4),
            Strategy::Quantized => Some(1),
            Strategy::Sparse => None,
        }
    }

    /// From a tensor's arrays, validated as the format's reader does; the range field's data
    /// is not read (it may be empty here).
    pub(super) fn new(entry: &TensorEntry, arrays: &TensorArrays<'_>) -> RangeDecoder {
        let f = &arrays.fields;
        let f16s = |data: &[u8]| -> Vec<f32> {
            data.chunks_exact(2).map(|c| f16_le(c).to_f32()).collect()
        };
        let indices = |a: &crate::formats::wdelta::ArrayRef<'_>| -> Vec<usize> {
            index_iter(a.dtype, a.data).map(|i| i as usize).collect()
        };
        let kind = match entry.params {
            Params::Sparse { .. } => RangeKind::Sparse {
                idx: indices(&f[0]),
                vals: f[1].data.chunks_exact(4).map(f32_le).collect(),
            },
            Params::Quantized { n_cols, .. } => RangeKind::Quantized {
                cols: n_cols as usize,
                scales: f16s(f[0].data),
            },
            Params::Int4 { layout, .. } => {
                let lut = dequant_table(f16_le(f[2].data), f16_le(f[3].data));
                let mut pairs = Box::new([[0f32; 2]; 256]);
                for (b, p) in pairs.iter_mut().enumerate() {
                    *p = [lut[b >> 4], lut[b & 0x0f]];
                }
                RangeKind::Int4 {
                    pairs,
                    outliers: indices(&f[0]),
                    vals: f16s(f[1].data),
                    all_positions: layout >= 2,
                }
            }
        };
        RangeDecoder { kind }
    }

    /// The bytes `from..to` of the range field that elements `start..end` need (consecutive
    /// ranges share at most one byte).
    pub(super) fn range_bytes(&self, start: usize, end: usize) -> (usize, usize) {
        match &self.kind {
            RangeKind::Sparse { .. } => (0, 0),
            RangeKind::Quantized { .. } => (start / 8, end.div_ceil(8)),
            RangeKind::Int4 {
                outliers,
                all_positions,
                ..
            } => {
                let (a, b) = if *all_positions {
                    (start, end)
                } else {
                    (nibble_of(outliers, start), nibble_of(outliers, end))
                };
                (a / 2, b.div_ceil(2))
            }
        }
    }

    /// [`RangeDecoder::range_bytes`] of an int4 tensor whose outliers are not in the decoder
    /// (read beside it in order): `before_start` and `before_end` outliers are below `start`
    /// and `end`.
    pub(super) fn int4_range_bytes(
        &self,
        start: usize,
        end: usize,
        before_start: usize,
        before_end: usize,
    ) -> (usize, usize) {
        let all = matches!(
            self.kind,
            RangeKind::Int4 {
                all_positions: true,
                ..
            }
        );
        let (a, b) = if all {
            (start, end)
        } else {
            (start - before_start, end - before_end)
        };
        (a / 2, b.div_ceil(2))
    }

    /// [`RangeDecoder::decode`] of an int4 tensor whose outliers are not in the decoder:
    /// `outliers` (ascending) and `vals` those of the range, `before` below `start`. The
    /// outliers' records as they are in the file: `dtype` indices, float16 values.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn decode_int4_with(
        &self,
        start: usize,
        window: &[u8],
        window_from: usize,
        (dtype, indices, values): (ArrayDtype, &[u8], &[u8]),
        before: usize,
        scratch: &mut (Vec<usize>, Vec<f32>),
        out: &mut [f32],
    ) {
        let RangeKind::Int4 {
            pairs,
            all_positions,
            ..
        } = &self.kind
        else {
            unreachable!("an int4 tensor's decoder")
        };
        let (outliers, vals) = scratch;
        outliers.clear();
        outliers.extend(index_iter(dtype, indices).map(|i| i as usize));
        vals.clear();
        vals.extend(values.chunks_exact(2).map(|c| f16_le(c).to_f32()));
        let nibble = if *all_positions {
            start
        } else {
            start - before
        };
        int4_decode_range(
            pairs,
            *all_positions,
            outliers,
            vals,
            start,
            nibble - 2 * window_from,
            window,
            out,
        );
    }

    /// Writes elements `start..start + out.len()` into `out`; `window` holds the range field's
    /// bytes from `window_from` on, at least those [`RangeDecoder::range_bytes`] names.
    pub(super) fn decode(&self, start: usize, window: &[u8], window_from: usize, out: &mut [f32]) {
        let end = start + out.len();
        match &self.kind {
            RangeKind::Sparse { idx, vals } => {
                out.fill(0.0);
                let first = idx.partition_point(|&i| i < start);
                for (&i, &v) in idx[first..].iter().zip(&vals[first..]) {
                    if i >= end {
                        break;
                    }
                    out[i - start] = v;
                }
            }
            RangeKind::Quantized { cols, scales } => {
                if *cols == 0 {
                    return;
                }
                for (i, o) in (start..).zip(out.iter_mut()) {
                    let s = scales[i / *cols];
                    let bit = window[(i >> 3) - window_from] & (0x80 >> (i & 7));
                    *o = if bit != 0 { s } else { -s };
                }
            }
            RangeKind::Int4 {
                pairs,
                outliers,
                vals,
                all_positions,
            } => {
                let next = outliers.partition_point(|&o| o < start);
                let nibble = if *all_positions { start } else { start - next };
                int4_decode_range(
                    pairs,
                    *all_positions,
                    &outliers[next..],
                    &vals[next..],
                    start,
                    nibble - 2 * window_from,
                    window,
                    out,
                );
            }
        }
    }
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
    let end = start + out.len();
    let mut next = 0;
    if all_positions {
        unpack_pairs(pairs, window, nibble, out);
        while next < outliers.len() && outliers[next] < end {
            out[outliers[next] - start] = vals[next];
            next += 1;
        }
    } else {
        let mut nibble = nibble;
        let mut i = start;
        while i < end {
            let stop = if next < outliers.len() {
                outliers[next].min(end)
            } else {
                end
            };
            unpack_pairs(pairs, window, nibble, &mut out[i - start..stop - start]);
            nibble += stop - i;
            i = stop;
            if i < end {
                out[i - start] = vals[next];
                next += 1;
                i += 1;
            }
        }
    }
}

/// Writes elements `start..start + out.len()` of a sparse delta into `out`, read from its raw
/// `indices` (of `index_dtype`, validated: ascending, in range) and `values` records as they
/// are in the file: the tensor's kept values are not held a second time, decoded. Decodes the
/// same values as [`RangeDecoder`].
pub(super) fn decode_sparse_range(
    index_dtype: ArrayDtype,
    indices: &[u8],
    values: &[u8],
    start: usize,
    out: &mut [f32],
) {
    let width = if index_dtype == ArrayDtype::Int32 {
        4
    } else {
        8
    };
    let index = |j: usize| -> usize {
        let c = &indices[j * width..(j + 1) * width];
        if width == 4 {
            i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as usize
        } else {
            i64::from_le_bytes(c.try_into().expect("8 bytes")) as usize
        }
    };
    let kept = indices.len() / width;
    // The first kept index at or after `start`, by bisection over the raw records.
    let (mut lo, mut hi) = (0, kept);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if index(mid) < start {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    out.fill(0.0);
    let end = start + out.len();
    for j in lo..kept {
        let i = index(j);
        if i >= end {
            break;
        }
        out[i - start] = f32_le(&values[j * 4..]);
    }
}

/// Layout 1: the nibble of element `p` (or of the first non-outlier after it) is `p` less the
/// outliers before it.
fn nibble_of(outliers: &[usize], p: usize) -> usize {
    p - outliers.partition_point(|&o| o < p)
}

/// [`unpack_run`] through a table of both nibbles of each byte: one 8-byte copy per byte.
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

/// Dequantizes the nibbles `first..first + out.len()` of `packed` into `out`, a byte (two
/// values) at a time.
fn unpack_run(lut: &[f32; 16], packed: &[u8], first: usize, out: &mut [f32]) {
    let mut j = first;
    let mut o = 0;
    if j & 1 == 1 && !out.is_empty() {
        out[0] = lut[(packed[j >> 1] & 0x0f) as usize];
        j += 1;
        o = 1;
    }
    let pairs = (out.len() - o) / 2;
    let bytes = &packed[j >> 1..(j >> 1) + pairs];
    for (pair, &b) in out[o..o + 2 * pairs].chunks_exact_mut(2).zip(bytes) {
        pair[0] = lut[(b >> 4) as usize];
        pair[1] = lut[(b & 0x0f) as usize];
    }
    o += 2 * pairs;
    j += 2 * pairs;
    if o < out.len() {
        out[o] = lut[(packed[j >> 1] >> 4) as usize];
    }
}

/// q / 15 * float32(float64(scale) * 15) + float32(zero_point), all in float32, for q in 0..16:
/// `quantized / 15.0 * (scale * 15.0) + zero_point` in the reference.
pub(super) fn dequant_table(scale: f16, zero_point: f16) -> [f32; 16] {
    let s15 = (scale.to_f64() * 15.0) as f32;
    let zp = zero_point.to_f32();
    let mut t = [0f32; 16];
    for (q, v) in t.iter_mut().enumerate() {
        *v = (q as f32 / 15.0f32) * s15 + zp;
    }
    t
}

fn f32_le(c: &[u8]) -> f32 {
    f32::from_le_bytes([c[0], c[1], c[2], c[3]])
}

fn f16_le(c: &[u8]) -> f16 {
    f16::from_bits(u16::from_le_bytes([c[0], c[1]]))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The arrays an encoder wrote, as a decoder reads them.
    fn refs_of(arrays: &[OwnedArray]) -> TensorArrays<'_> {
        TensorArrays {
            fields: arrays
                .iter()
                .map(|a| crate::formats::wdelta::ArrayRef {
                    dtype: a.dtype,
                    data: &a.data,
                })
                .collect(),
        }
    }

    /// A decoder's copy of its indices is checked as the file's reader checks them: a mapped
    /// file written after validation must not make a decoder index out of bounds.
    #[test]
    fn a_decoders_indices_are_checked_on_its_copy() {
        let n = 1000usize;
        let delta: Vec<f32> = (0..n).map(|i| ((i * 7919) % 997) as f32 * 1e-5).collect();
        for strategy in [Strategy::Sparse, Strategy::Int4] {
            let opts = EncodeOptions {
                strategy,
                outlier_fraction: 0.02,
                ..Default::default()
            };
            let shape = [n as u64];
            let entry = entry_for(&shape, &opts, Some("float32"));
            let mut arrays = encode(&delta, &shape, &opts);
            let refs = refs_of(&arrays);
            assert!(Decoder::new(&entry, &refs).indices_fit(n), "{strategy:?}");
            assert!(
                !Decoder::new(&entry, &refs).indices_fit(n - 500),
                "{strategy:?}"
            );
            // The first two indices swapped: no longer strictly ascending.
            let width = arrays[0].dtype.size() as usize;
            let (a, b) = arrays[0].data.split_at_mut(width);
            a.swap_with_slice(&mut b[..width]);
            let refs = refs_of(&arrays);
            assert!(!Decoder::new(&entry, &refs).indices_fit(n), "{strategy:?}");
        }
    }

    /// Deltas of `n` values: noise, the noise with large values on the sample's stride only
    /// (the sample overrates them, the guess fails), and the noise with NaNs, infinities and
    /// negative zeros.
    fn test_deltas(n: usize, seed: u64) -> [Vec<f32>; 3] {
        let mut state = seed;
        let noise: Vec<f32> = (0..n)
            .map(|_| {
                // xorshift64
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                ((state % 20_001) as f32 - 10_000.0) * 1e-6
            })
            .collect();
        let striped = (0..n)
            .map(|i| if i % 48 == 0 { 5.0 } else { noise[i] })
            .collect();
        let mut special = noise.clone();
        for i in (0..n).step_by(997) {
            special[i] = [f32::NAN, f32::INFINITY, -f32::INFINITY, -0.0][i % 4];
        }
        [noise, striped, special]
    }

    #[test]
    fn top_k_breaks_ties_by_index() {
        let x = [1.0, -3.0, 3.0, 0.5, 3.0, f32::NAN];
        assert_eq!(top_k_indices(&x, 1), vec![5]);
        assert_eq!(top_k_indices(&x, 3), vec![1, 2, 5]);
        assert_eq!(top_k_indices(&x, 4), vec![1, 2, 4, 5]);
        assert_eq!(top_k_indices(&x, 6), (0..6).collect::<Vec<_>>());
        assert!(top_k_indices(&x, 0).is_empty());
    }

    #[test]
    fn top_k_by_sample_is_the_radix_selection() {
        // Noise, large values on the sample's stride only (the sample overrates them, the guess
        // fails and the radix selection answers), plateaus of ties, NaNs and infinities.
        let n = 100_003usize;
        let [noise, striped, special] = test_deltas(n, 0x2545_f491_4f6c_dd1d);
        let plateaus: Vec<f32> = (0..n).map(|i| ((i * 7919) % 5) as f32).collect();
        for x in [&noise, &striped, &plateaus, &special] {
            for k in [1, 10, 1000, n / 100, 3000, n / 20] {
                let radix = top_k_radix(x, k);
                assert_eq!(radix.len(), k);
                assert_eq!(top_k_indices(x, k), radix, "k {k}");
                // The min/max gathered in the collecting pass is that of the non-outliers.
                let mut fused = MinMax::new();
                if let Some(idx) = top_k_by_sample(x, k, Some(&mut fused)) {
                    assert_eq!(idx, radix, "k {k}");
                    let mut apart = MinMax::new();
                    for_each_segment(x, &idx, |seg| apart.update(seg));
                    let ((lo, hi, nan), (lo2, hi2, nan2)) = (fused.finish(), apart.finish());
                    assert_eq!(nan, nan2, "k {k}");
                    if !nan {
                        // Equal values (-0 and +0 compare equal: encode_int4 redoes those).
                        assert!(
                            lo == lo2 && hi == hi2,
                            "k {k}: {lo} {hi} against {lo2} {hi2}"
                        );
                    }
                }
            }
        }
        // Non-negative values with both zeros among them: the min is a zero of either sign.
        let non_negative: Vec<f32> = noise.iter().map(|v| v.abs()).collect();
        let (mut zeros_a, mut zeros_b) = (non_negative.clone(), non_negative);
        (zeros_a[77], zeros_a[78]) = (-0.0, 0.0);
        (zeros_b[77], zeros_b[78]) = (0.0, -0.0);
        for x in [&zeros_a, &zeros_b] {
            let e = encode(x, &[n as u64], &EncodeOptions::default());
            let k = int4_outliers(n as u64, 0.01) as usize;
            let idx = top_k_radix(x, k);
            let mut apart = MinMax::new();
            for_each_segment(x, &idx, |seg| apart.update(seg));
            let (lo, _, _) = apart.finish();
            // The zero point is the min with the sign the segment pass gives.
            assert_eq!(
                e[3].data,
                f16_from_f64(f64::from(lo)).to_le_bytes().to_vec()
            );
        }
        assert!(
            top_k_by_sample(&noise, n / 100, None).is_some(),
            "the guess serves noise"
        );
        assert!(
            top_k_by_sample(&striped, 3000, None).is_none(),
            "a wrong guess falls back"
        );
    }

    /// A delta held in memory, read in blocks of `block` values, pieces of `piece`.
    struct InMemory<'a> {
        x: &'a [f32],
        block: usize,
        piece: usize,
    }

    impl crate::delta::sparse_blocks::BlockSource for InMemory<'_> {
        fn block(
            &self,
            start: usize,
            each: &mut dyn FnMut(&[f32], usize),
        ) -> Result<(), crate::delta::error::DeltaError> {
            let end = (start + self.block).min(self.x.len());
            for a in (start..end).step_by(self.piece) {
                each(&self.x[a..(a + self.piece).min(end)], a);
            }
            Ok(())
        }

        fn range(
            &self,
            range: std::ops::Range<usize>,
            each: &mut dyn FnMut(&[f32], usize),
        ) -> Result<(), crate::delta::error::DeltaError> {
            each(&self.x[range.clone()], range.start);
            Ok(())
        }

        fn changed(&self) -> crate::delta::error::DeltaError {
            unreachable!("the values do not change")
        }
    }

    /// int4 over blocks of `block` values worked on in pieces of `piece`, as
    /// `int4_blocks::encode` drives it over a file.
    fn encode_in_blocks(
        x: &[f32],
        block: usize,
        piece: usize,
        opts: &EncodeOptions,
    ) -> Vec<OwnedArray> {
        use crate::delta::int4_blocks::{BlockPacker, settle};
        let n = x.len();
        let src = InMemory { x, block, piece };
        let starts: Vec<usize> = (0..n).step_by(block).collect();
        let (top, settled) = settle(&src, &starts, n, opts).expect("in memory");
        let before: Vec<usize> = top
            .kept
            .iter()
            .scan(0, |seen, &k| {
                *seen += k as usize;
                Some(*seen - k as usize)
            })
            .collect();
        let (pairs, wide) = (settled.pairs(), settled.wide(n));
        let (mut idx, mut vals, mut packed) = (Vec::new(), Vec::new(), Vec::new());
        let mut decoded = x.to_vec();
        for (b, &s) in starts.iter().enumerate() {
            let mut packer = BlockPacker::new(&top, &settled, &pairs, wide, b, s, &before);
            let end = (s + block).min(n);
            for a in (s..end).step_by(piece) {
                packer.piece(&mut decoded[a..(a + piece).min(end)], a, true);
            }
            idx.extend_from_slice(&packer.out.idx);
            vals.extend_from_slice(&packer.out.vals);
            let odd = settled.first_nibble(s, before[b]) % 2 == 1;
            int4_join(&mut packed, &packer.out.packed, odd);
        }
        let count = vals.len() / 2;
        let mut arrays = vec![
            array(
                "outlier_idx",
                if wide {
                    ArrayDtype::Int64
                } else {
                    ArrayDtype::Int32
                },
                count,
                idx,
            ),
            array("outlier_vals", ArrayDtype::Float16, count, vals),
        ];
        arrays.extend(settled.params_arrays());
        arrays.push(array("packed", ArrayDtype::Uint8, packed.len(), packed));
        // The pieces decode as the whole file decodes.
        let entry = entry_for(&[n as u64], opts, None);
        let mut whole = vec![0f32; n];
        decode(&entry, &refs_of(&arrays), &mut whole);
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&decoded), bits(&whole));
        arrays
    }

    #[test]
    fn int4_in_blocks_is_int4_of_the_whole() {
        let n = 100_003usize;
        let [noise, striped, special] = test_deltas(n, 0x9e37_79b9_7f4a_7c15);
        // Zero bounds, whose sign the lanes' order decides; a frozen tensor.
        let non_negative: Vec<f32> = noise.iter().map(|v| v.abs()).collect();
        let (mut zeros_a, mut zeros_b) = (non_negative.clone(), non_negative);
        (zeros_a[77], zeros_a[78]) = (-0.0, 0.0);
        (zeros_b[9000], zeros_b[9001], zeros_b[9005]) = (0.0, -0.0, 0.0);
        let mut frozen = vec![0f32; n];
        frozen[40_000] = -0.0;
        // Few distinct magnitudes of both signs: many ties at the threshold, some kept.
        let tied: Vec<f32> = noise.iter().map(|v| (v * 2e3).round() * 5e-4).collect();
        // NaNs beyond the outliers' count, and a sign-mixed threshold of zeros.
        let mut nans = noise.clone();
        for i in (0..n).step_by(3) {
            nans[i] = if i % 2 == 0 { f32::NAN } else { -f32::NAN };
        }
        let mut sparse_signs = vec![0f32; n];
        for i in (0..n).step_by(101) {
            sparse_signs[i] = if i % 2 == 0 { -1.5 } else { 1.5 };
            sparse_signs[i + 1] = -0.0;
        }
        // Exactly the outliers of fraction 0.01 far above the others: the values left are
        // below the threshold's bucket (in the band of the first pass, or below it).
        let mut gap = noise.clone();
        for i in 0..1000 {
            gap[i * 100 + 7] = if i % 2 == 0 { 5.0 } else { -5.0 } + i as f32 * 1e-5;
        }
        // One-signed: the values' min is far below the threshold's bucket.
        let positive: Vec<f32> = noise.iter().map(|v| v.abs() + 1e-3).collect();
        // The runs the band is guessed from (`int4_blocks::band_guess`) above the others, or
        // zero: the threshold is below or above the band.
        let (mut misled_high, mut misled_low) = (noise.clone(), noise.clone());
        for r in 0..256 {
            for j in r * (n / 256)..r * (n / 256) + 64 {
                misled_high[j] = 5.0 + j as f32 * 1e-6;
                misled_low[j] = 0.0;
            }
        }
        let tensors = [
            &misled_high,
            &misled_low,
            &gap,
            &positive,
            &noise,
            &striped,
            &special,
            &zeros_a,
            &zeros_b,
            &frozen,
            &tied,
            &nans,
            &sparse_signs,
        ];
        for x in tensors {
            for version in [1, 2] {
                for outlier_fraction in [0.01, 0.001, 0.05, 0.2, 1.0] {
                    let opts = EncodeOptions {
                        version,
                        outlier_fraction,
                        ..EncodeOptions::default()
                    };
                    let whole = encode(x, &[n as u64], &opts);
                    // The threshold's bucket collected by the first pass (a band guessed
                    // around it) or the second, or counted (a small cap).
                    for (cap, band) in [(u64::MAX, true), (u64::MAX, false), (64, true)] {
                        crate::delta::sparse_blocks::CANDIDATES_CAP.set(cap);
                        crate::delta::int4_blocks::BAND_GUESS.set(band);
                        for (block, piece) in [(8192, 1024), (16_384, 333)] {
                            let blocks = encode_in_blocks(x, block, piece, &opts);
                            for (a, b) in whole.iter().zip(&blocks) {
                                assert_eq!(a.field, b.field);
                                assert!(
                                    a.dtype == b.dtype && a.shape == b.shape && a.data == b.data,
                                    "{} differs (v{version}, {outlier_fraction}, cap {cap}, \
                                     band {band}, {block}/{piece})",
                                    a.field
                                );
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn f16_from_f64_rounds_once() {
        // Halfway between two f16 values in f32, but above it in f64: must round up.
        let lo = f16::from_f32(1.0).to_f64();
        let ulp = 2f64.powi(-10);
        let x = lo + ulp / 2.0 + 1e-12;
        assert_eq!(f16_from_f64(x), f16::from_f64(lo + ulp));
        assert_eq!(f16_from_f64(lo + ulp / 2.0), f16::from_f32(1.0));
        assert_eq!(f16_from_f64(0.1).to_bits(), 0x2e66);
        assert_eq!(f16_from_f64(-1e9), f16::NEG_INFINITY);
    }

    #[test]
    fn sparse_ranges_from_the_raw_records_match_whole_decoding() {
        let n = 10_007usize;
        let delta: Vec<f32> = (0..n)
            .map(|i| ((i * 7919) % 997) as f32 * 1e-5 - 5e-3)
            .collect();
        for (sparsity, wide) in [(0.9, true), (0.5, false), (0.999, true)] {
            let opts = EncodeOptions {
                strategy: Strategy::Sparse,
                sparsity,
                ..EncodeOptions::default()
            };
            let arrays = encode(&delta, &[n as u64], &opts);
            let entry = entry_for(&[n as u64], &opts, None);
            let mut whole = vec![0f32; n];
            decode(&entry, &refs_of(&arrays), &mut whole);
            // Int32 indices as version 1 files from elsewhere may hold them.
            let (dtype, indices) = if wide {
                (ArrayDtype::Int64, arrays[0].data.clone())
            } else {
                let narrow = arrays[0]
                    .data
                    .chunks_exact(8)
                    .flat_map(|c| (i64::from_le_bytes(c.try_into().unwrap()) as i32).to_le_bytes())
                    .collect();
                (ArrayDtype::Int32, narrow)
            };
            for piece in [1usize, 7, 1000, 4096, n] {
                let mut got = vec![f32::NAN; n];
                for start in (0..n).step_by(piece) {
                    let end = (start + piece).min(n);
                    decode_sparse_range(
                        dtype,
                        &indices,
                        &arrays[1].data,
                        start,
                        &mut got[start..end],
                    );
                }
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(
                    bits(&got),
                    bits(&whole),
                    "sparsity {sparsity}, pieces of {piece}"
                );
            }
        }
    }

    #[test]
    fn range_decoding_matches_whole_decoding_for_any_split() {
        // Outliers at the start, the end and side by side; sizes odd and even.
        for n in [1usize, 2, 7, 1000, 1001] {
            let mut delta: Vec<f32> = (0..n)
                .map(|i| ((i * 7919) % 997) as f32 * 1e-5 - 5e-3)
                .collect();
            delta[0] = 1.0;
            delta[n - 1] = -1.0;
            if n > 10 {
                delta[5] = 0.5;
                delta[6] = -0.5;
            }
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
                    let arrays = encode(&delta, &shape, &opts);
                    let refs = refs_of(&arrays);
                    let mut whole = vec![0f32; n];
                    decode(&entry, &refs, &mut whole);
                    let ranged = RangeDecoder::new(&entry, &refs);
                    let field = RangeDecoder::range_field(strategy);
                    for step in [1usize, 2, 3, 64, 333, n] {
                        let mut got = vec![0f32; n];
                        for start in (0..n).step_by(step) {
                            let end = (start + step).min(n);
                            let (from, to) = ranged.range_bytes(start, end);
                            let window = match field {
                                Some(f) => &arrays[f].data[from..to],
                                None => &[][..],
                            };
                            ranged.decode(start, window, from, &mut got[start..end]);
                        }
                        let same = got
                            .iter()
                            .zip(&whole)
                            .all(|(a, b)| a.to_bits() == b.to_bits());
                        assert!(same, "{strategy:?} v{version} n={n} step={step}");
                    }
                }
            }
        }
    }

    /// 10 rows of 100 whose magnitudes are all distinct (so top-k has one answer) and grow by
    /// row (so a row's scale is its own), signs mixed.
    fn distinct_deltas() -> Vec<f32> {
        (0..1000usize)
            .map(|i| {
                let magnitude = ((i * 7919) % 1000 + 1) as f64 * 1e-5 + (i / 100) as f64 * 1e-2;
                let sign = if (i * 31) % 3 == 0 { -1.0 } else { 1.0 };
                (sign * magnitude) as f32
            })
            .collect()
    }

    /// The positions of the `k` largest magnitudes by a full sort (ties would make the answer
    /// ambiguous; [`distinct_deltas`] has none).
    fn top_k_by_sorting(delta: &[f32], k: usize) -> Vec<bool> {
        let mut order: Vec<usize> = (0..delta.len()).collect();
        order.sort_by(|&a, &b| delta[b].abs().total_cmp(&delta[a].abs()));
        let mut kept = vec![false; delta.len()];
        for &i in &order[..k] {
            kept[i] = true;
        }
        kept
    }

    /// Each strategy decodes what its definition (docs/wdelta.md, "Strategies") says, checked
    /// against values computed here in float64 from the delta alone: sparse the top-k values
    /// exactly and zeros elsewhere; quantized each row's mean magnitude (to float16's
    /// precision) with the delta's sign; int4 the outliers as float16 and the rest within half
    /// a quantization step of the delta, from a scale and zero point that are float16 of the
    /// non-outliers' range / 15 and minimum. A decoder returning zeros, or one dropping a term
    /// of a sum, fails every strategy.
    #[test]
    fn roundtrips_are_close() {
        let delta = distinct_deltas();
        let shape = [10u64, 100];
        let (rows, cols) = (10, 100);
        let mut checked = 0;
        for version in [1, 2] {
            for strategy in [Strategy::Sparse, Strategy::Quantized, Strategy::Int4] {
                let opts = EncodeOptions {
                    strategy,
                    version,
                    ..Default::default()
                };
                let entry = entry_for(&shape, &opts, Some("float32"));
                let arrays = encode(&delta, &shape, &opts);
                let refs = refs_of(&arrays);
                let mut out = vec![f32::NAN; delta.len()];
                decode(&entry, &refs, &mut out);
                let context = format!("{strategy:?} v{version}");
                match strategy {
                    Strategy::Sparse => {
                        // k = floor(n (1 - sparsity)) in float64: 99, as 1 - 0.9 is just
                        // below 0.1.
                        let k = (1000.0 * (1.0 - opts.sparsity)).floor() as usize;
                        assert_eq!(k, 99);
                        let kept = top_k_by_sorting(&delta, k);
                        for (i, (&d, &o)) in delta.iter().zip(&out).enumerate() {
                            let want = if kept[i] { d } else { 0.0 };
                            assert_eq!(o.to_bits(), want.to_bits(), "{context}: element {i}");
                        }
                    }
                    Strategy::Quantized => {
                        for r in 0..rows {
                            let row = &delta[r * cols..(r + 1) * cols];
                            let mean =
                                row.iter().map(|&x| f64::from(x.abs())).sum::<f64>() / cols as f64;
                            // float16 rounds to within 2^-11 of the value; float32's pairwise
                            // sum adds far less.
                            let tolerance = mean * 2f64.powi(-11) * 1.001;
                            for (c, &d) in row.iter().enumerate() {
                                let o = out[r * cols + c];
                                assert_eq!(o > 0.0, d >= 0.0, "{context}: sign at {r},{c}");
                                let off = (f64::from(o.abs()) - mean).abs();
                                assert!(
                                    off <= tolerance,
                                    "{context}: row {r} decodes |{o}|, its mean |delta| is {mean}"
                                );
                            }
                        }
                    }
                    Strategy::Int4 => {
                        // m = floor(n f) in float64: 10 outliers.
                        let m = (1000.0 * opts.outlier_fraction).floor() as usize;
                        assert_eq!(m, 10);
                        let outlier = top_k_by_sorting(&delta, m);
                        let rest = || delta.iter().zip(&outlier).filter(|(_, o)| !**o);
                        let min = rest().map(|(&x, _)| f64::from(x)).fold(f64::MAX, f64::min);
                        let max = rest().map(|(&x, _)| f64::from(x)).fold(f64::MIN, f64::max);
                        let scale = f16::from_f64((max - min) / 15.0);
                        let zero_point = f16::from_f64(min);
                        assert_eq!(f16_le(&arrays[2].data), scale, "{context}: scale");
                        assert_eq!(f16_le(&arrays[3].data), zero_point, "{context}: zero point");
                        // Half a step, and what rounding the scale and zero point to float16
                        // moves the grid (at most 2^-11 of each, the scale 15 times over, and
                        // of the half step itself).
                        let step = scale.to_f64();
                        let grid = (min.abs() + 16.0 * step) * 2f64.powi(-11);
                        let bound = step / 2.0 + grid;
                        for (i, (&d, &o)) in delta.iter().zip(&out).enumerate() {
                            if outlier[i] {
                                let want = f16::from_f64(f64::from(d)).to_f32();
                                assert_eq!(o, want, "{context}: outlier {i}");
                            } else {
                                let off = (f64::from(o) - f64::from(d)).abs();
                                assert!(
                                    off <= bound,
                                    "{context}: element {i} decodes {o} for {d}, off by {off} > {bound}"
                                );
                            }
                        }
                    }
                }
                checked += 1;
            }
        }
        assert_eq!(checked, 6, "two versions of three strategies");
    }
}
