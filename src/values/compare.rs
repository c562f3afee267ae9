//! Element-wise comparison of two runs of values, accumulated in f64.
//!
//! Non-finite values (NaN, ±inf) are kept out of the norms, the dot product and the maximum
//! difference; a position holding one on either side counts in `nonfinite`, and as changed
//! unless both sides hold the same thing (NaN and NaN, or the same infinity).

/// Sums over some elements of a tensor pair; merged across pieces.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Sums {
    /// Elements compared.
    pub elements: u64,
    /// Elements whose values differ.
    pub changed: u64,
    /// Elements not finite on a side (NaN or infinite).
    pub nonfinite: u64,
    /// The largest |b − a| over finite elements.
    pub max_abs_diff: f64,
    /// Σ a², Σ b², Σ (b - a)², Σ a b over the positions where both sides are finite.
    pub sum_sq_old: f64,
    /// Σ b².
    pub sum_sq_new: f64,
    /// Σ (b − a)².
    pub sum_sq_diff: f64,
    /// Σ a b.
    pub dot: f64,
    /// Some value did not convert to f64 exactly (a 64-bit integer of magnitude ≥ 2^53): the
    /// norms and max |b - a| are approximate.
    pub inexact: bool,
    /// The four sums are of the values times 2^-scale (0 unless values near the ends of f64's
    /// range, whose squares would overflow or underflow, were scaled first): the figures are
    /// ratios, in which the scale cancels.
    pub scale: i32,
}

/// Runs whose largest magnitude lies outside this range are summed scaled to it: their
/// squares would overflow to infinity or lose their digits below f64's normal range.
const SAFE_MAGNITUDE: std::ops::RangeInclusive<f64> = 1e-140..=1e140;

/// `x` times 2^`exp`, without overflowing on the way (an exponent beyond f64's range in one
/// step).
fn times_pow2(x: f64, exp: i32) -> f64 {
    let half = exp / 2;
    x * 2f64.powi(half) * 2f64.powi(exp - half)
}

/// Lanes of the accumulators: independent sums the compiler keeps in vector registers.
const LANES: usize = 4;

impl Sums {
    /// Adds one pair of finite values, in the order the vector lanes add them.
    #[inline(always)]
    fn add_finite(&mut self, a: f64, b: f64) {
        let d = b - a;
        self.sum_sq_diff += d * d;
        self.sum_sq_old += a * a;
        self.sum_sq_new += b * b;
        self.dot += a * b;
        self.max_abs_diff = self.max_abs_diff.max(d.abs());
        self.changed += u64::from(a != b);
    }

    /// Adds `other`'s sums (of another part of the same tensor).
    pub fn merge(&mut self, other: &Sums) {
        // Sums of squares at two scales: the smaller is brought to the larger. A side with
        // nothing summed yet (`Sums::default()`, a piece of zeros) has no magnitude to keep:
        // it takes the other's scale, else a piece near 1e-200 merged into it would be
        // brought to scale 0 and lost (2^-1330 of its sums).
        let mut other = *other;
        if self.sums_are_zero() {
            self.scale = other.scale;
        } else if other.sums_are_zero() {
            other.scale = self.scale;
        }
        if other.scale > self.scale {
            self.rescale(other.scale);
        } else if other.scale < self.scale {
            other.rescale(self.scale);
        }
        self.elements += other.elements;
        self.changed += other.changed;
        self.nonfinite += other.nonfinite;
        self.max_abs_diff = self.max_abs_diff.max(other.max_abs_diff);
        self.sum_sq_old += other.sum_sq_old;
        self.sum_sq_new += other.sum_sq_new;
        self.sum_sq_diff += other.sum_sq_diff;
        self.dot += other.dot;
        self.inexact |= other.inexact;
    }

    /// Whether the four scaled sums are all zero (true at any scale).
    fn sums_are_zero(&self) -> bool {
        [self.sum_sq_old, self.sum_sq_new, self.sum_sq_diff, self.dot] == [0.0; 4]
    }

    /// The sums expressed at the larger scale `scale`.
    fn rescale(&mut self, scale: i32) {
        let by = 2 * (self.scale - scale);
        for sum in [
            &mut self.sum_sq_old,
            &mut self.sum_sq_new,
            &mut self.sum_sq_diff,
            &mut self.dot,
        ] {
            *sum = times_pow2(*sum, by);
        }
        self.scale = scale;
    }

    /// The sums of `old` against `new` (equal lengths).
    pub fn of(old: &[f64], new: &[f64]) -> Sums {
        debug_assert_eq!(old.len(), new.len());
        // A non-finite input makes some sum non-finite: then take the careful path.
        Self::all_finite(old, new).or_careful((old, new))
    }

    /// [`Sums::of`] of two runs at once, for values whose products are exact in f64 (each has
    /// at most 26 significant bits: every float of 32 bits or less, every quantized value,
    /// integers below 2^26). Then `s + a * b` and a fused multiply-add round the same exact
    /// sum once, so the FMA units can take the products off the adders, and the two runs'
    /// chains of additions interleave; each run's sums are bit for bit those of
    /// [`Sums::of`]. The difference `b - a` may not be exact: its square is added as there.
    pub fn of_two_exact(first: (&[f64], &[f64]), second: (&[f64], &[f64])) -> (Sums, Sums) {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            // Twelve accumulators and their operands need more than AVX2's 16 registers; with
            // AVX-512VL's 32 none is spilled to the stack.
            let (a, b) = if std::arch::is_x86_feature_detected!("avx512vl") {
                // SAFETY: the CPU has AVX2, FMA, AVX-512F and AVX-512VL.
                unsafe { two_exact_avx512vl(first, second) }
            } else {
                // SAFETY: the CPU has AVX2 and FMA.
                unsafe { two_exact_avx2_fma(first, second) }
            };
            return (a.or_careful(first), b.or_careful(second));
        }
        (Sums::of(first.0, first.1), Sums::of(second.0, second.1))
    }

    /// These sums, unless some value was not finite: then the careful sums of `run`.
    /// Sums below f64's normal range may have lost digits (or all of them, at 1e-200): those
    /// are taken again too, scaled.
    fn or_careful(self, run: (&[f64], &[f64])) -> Sums {
        let tiny = |x: f64| x != 0.0 && x < 1e-250;
        let lost = (self.sum_sq_diff == 0.0 && self.changed > 0)
            || tiny(self.sum_sq_old)
            || tiny(self.sum_sq_new)
            || tiny(self.sum_sq_diff);
        if self.sum_sq_old.is_finite()
            && self.sum_sq_new.is_finite()
            && self.dot.is_finite()
            && self.sum_sq_diff.is_finite()
            && !lost
        {
            self
        } else {
            Self::careful(run.0, run.1)
        }
    }

    /// The sums of a run of values that is the same on both sides.
    pub fn unchanged(values: &[f64]) -> Sums {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2.
            return unsafe { unchanged_avx2(values) };
        }
        unchanged_body(values)
    }

    /// The sums of two runs that are each the same on both sides, as [`Sums::unchanged`] of
    /// each: their sums of squares are two independent chains of additions interleaved in one
    /// loop, where one run alone waits on the adder's latency.
    pub fn unchanged_two(first: &[f64], second: &[f64]) -> (Sums, Sums) {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2.
            return unsafe { unchanged_two_avx2(first, second) };
        }
        unchanged_two_body(first, second)
    }

    /// Assumes every value is finite (the result shows it when one is not). Compiled twice:
    /// for the baseline CPU and, chosen at run time, for AVX2 (no FMA: the same results).
    fn all_finite(old: &[f64], new: &[f64]) -> Sums {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2.
            return unsafe { all_finite_avx2(old, new) };
        }
        all_finite_body(old, new)
    }

    /// Element by element, keeping non-finite values out of the sums.
    fn careful(old: &[f64], new: &[f64]) -> Sums {
        let largest = old
            .iter()
            .chain(new)
            .filter(|x| x.is_finite())
            .fold(0f64, |m, x| m.max(x.abs()));
        // Scaled by a power of two (exact) when the squares would leave f64's normal range.
        let scale = if largest == 0.0 || SAFE_MAGNITUDE.contains(&largest) {
            0
        } else {
            largest.log2().floor() as i32
        };
        let mut s = Sums {
            elements: old.len() as u64,
            scale,
            ..Sums::default()
        };
        for (&a, &b) in old.iter().zip(new) {
            if a.is_finite() && b.is_finite() {
                if scale == 0 {
                    s.add_finite(a, b);
                } else {
                    let max_abs_diff = s.max_abs_diff.max((b - a).abs());
                    s.add_finite(times_pow2(a, -scale), times_pow2(b, -scale));
                    s.max_abs_diff = max_abs_diff;
                }
            } else {
                s.nonfinite += 1;
                let same = (a.is_nan() && b.is_nan()) || a == b;
                s.changed += u64::from(!same);
            }
        }
        s
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn unchanged_avx2(values: &[f64]) -> Sums {
    unchanged_body(values)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn unchanged_two_avx2(first: &[f64], second: &[f64]) -> (Sums, Sums) {
    unchanged_two_body(first, second)
}

#[inline(always)]
fn unchanged_body(values: &[f64]) -> Sums {
    let mut sq = [0f64; LANES];
    for x in values.chunks_exact(LANES) {
        add_squares(&mut sq, x);
    }
    unchanged_from_lanes(values, sq)
}

/// [`unchanged_body`] of two runs, the lanes of each added in the same order as there.
#[inline(always)]
fn unchanged_two_body(first: &[f64], second: &[f64]) -> (Sums, Sums) {
    let (mut sq1, mut sq2) = ([0f64; LANES], [0f64; LANES]);
    let (mut c1, mut c2) = (first.chunks_exact(LANES), second.chunks_exact(LANES));
    // Not a bare `zip`: it would take (and drop) a chunk of the first run past the second's end.
    for (x, y) in c1.by_ref().take(c2.len()).zip(c2.by_ref()) {
        add_squares(&mut sq1, x);
        add_squares(&mut sq2, y);
    }
    // The longer run's remaining chunks.
    for x in c1 {
        add_squares(&mut sq1, x);
    }
    for y in c2 {
        add_squares(&mut sq2, y);
    }
    (
        unchanged_from_lanes(first, sq1),
        unchanged_from_lanes(second, sq2),
    )
}

#[inline(always)]
fn add_squares(sq: &mut [f64; LANES], x: &[f64]) {
    for i in 0..LANES {
        sq[i] += x[i] * x[i];
    }
}

/// The sums of a run that is the same on both sides, from its lanes of squares (the tail past
/// the last whole chunk added here).
#[inline(always)]
fn unchanged_from_lanes(values: &[f64], sq: [f64; LANES]) -> Sums {
    let rest = values.chunks_exact(LANES).remainder();
    let sum: f64 = sq.iter().sum::<f64>() + rest.iter().map(|x| x * x).sum::<f64>();
    if !sum.is_finite() {
        // Non-finite values: the careful path keeps them out of the sums.
        return Sums::careful(values, values);
    }
    Sums {
        elements: values.len() as u64,
        changed: 0,
        nonfinite: 0,
        max_abs_diff: 0.0,
        sum_sq_old: sum,
        sum_sq_new: sum,
        sum_sq_diff: 0.0,
        dot: sum,
        inexact: false,
        scale: 0,
    }
}

/// [`all_finite_body`] with AVX2 intrinsics: the same lanes, the same order of operations
/// and the same final reduction, so the results are identical bit for bit.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn all_finite_avx2(old: &[f64], new: &[f64]) -> Sums {
    use std::arch::x86_64::*;
    const _: () = assert!(LANES == 4);
    let n = old.len().min(new.len()) / LANES * LANES;
    let zero = _mm256_setzero_pd();
    let (mut dd, mut aa, mut bb, mut ab, mut mx, mut ch) = (zero, zero, zero, zero, zero, zero);
    let one = _mm256_set1_pd(1.0);
    let abs_mask = _mm256_castsi256_pd(_mm256_set1_epi64x(i64::MAX));
    let mut i = 0;
    while i < n {
        // SAFETY: i + 4 <= n <= both lengths.
        let (a, b) = unsafe {
            (
                _mm256_loadu_pd(old.as_ptr().add(i)),
                _mm256_loadu_pd(new.as_ptr().add(i)),
            )
        };
        let d = _mm256_sub_pd(b, a);
        dd = _mm256_add_pd(dd, _mm256_mul_pd(d, d));
        aa = _mm256_add_pd(aa, _mm256_mul_pd(a, a));
        bb = _mm256_add_pd(bb, _mm256_mul_pd(b, b));
        ab = _mm256_add_pd(ab, _mm256_mul_pd(a, b));
        mx = _mm256_max_pd(_mm256_and_pd(d, abs_mask), mx);
        ch = _mm256_add_pd(ch, _mm256_and_pd(_mm256_cmp_pd::<_CMP_NEQ_UQ>(a, b), one));
        i += LANES;
    }
    let lanes = |v: __m256d| {
        let mut out = [0f64; LANES];
        // SAFETY: out holds 4 f64.
        unsafe { _mm256_storeu_pd(out.as_mut_ptr(), v) };
        out
    };
    finish(
        [
            lanes(dd),
            lanes(aa),
            lanes(bb),
            lanes(ab),
            lanes(mx),
            lanes(ch),
        ],
        &old[n..],
        &new[n..],
        old.len(),
    )
}

/// [`all_finite_avx2`] of two runs in one loop for values whose products are exact (see
/// [`Sums::of_two_exact`]): Σa², Σb² and Σab by fused multiply-add, `changed` counted in
/// integer lanes, the runs' chains interleaved; each run gets exactly its own sums.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn two_exact_avx2_fma(first: (&[f64], &[f64]), second: (&[f64], &[f64])) -> (Sums, Sums) {
    two_exact_body(first, second)
}

/// [`two_exact_avx2_fma`] with AVX-512VL's 32 vector registers (the same instructions).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,avx512f,avx512vl")]
unsafe fn two_exact_avx512vl(first: (&[f64], &[f64]), second: (&[f64], &[f64])) -> (Sums, Sums) {
    two_exact_body(first, second)
}

/// The loop of [`two_exact_avx2_fma`], compiled into each caller with its target features.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn two_exact_body(first: (&[f64], &[f64]), second: (&[f64], &[f64])) -> (Sums, Sums) {
    use std::arch::x86_64::*;
    const _: () = assert!(LANES == 4);

    /// One run's lanes: Σd², Σa², Σb², Σab, max|d| and the changed count.
    #[derive(Clone, Copy)]
    struct Acc {
        dd: __m256d,
        aa: __m256d,
        bb: __m256d,
        ab: __m256d,
        mx: __m256d,
        ch: __m256i,
    }

    #[inline(always)]
    fn step(acc: &mut Acc, old: &[f64], new: &[f64], i: usize) {
        // SAFETY: the caller keeps i + 4 within both runs; AVX2 and FMA are enabled in the
        // functions this is inlined into.
        unsafe {
            let a = _mm256_loadu_pd(old.as_ptr().add(i));
            let b = _mm256_loadu_pd(new.as_ptr().add(i));
            let d = _mm256_sub_pd(b, a);
            acc.dd = _mm256_add_pd(acc.dd, _mm256_mul_pd(d, d));
            acc.aa = _mm256_fmadd_pd(a, a, acc.aa);
            acc.bb = _mm256_fmadd_pd(b, b, acc.bb);
            acc.ab = _mm256_fmadd_pd(a, b, acc.ab);
            let abs_mask = _mm256_castsi256_pd(_mm256_set1_epi64x(i64::MAX));
            acc.mx = _mm256_max_pd(_mm256_and_pd(d, abs_mask), acc.mx);
            // All ones (-1) where they differ.
            let differ = _mm256_castpd_si256(_mm256_cmp_pd::<_CMP_NEQ_UQ>(a, b));
            acc.ch = _mm256_sub_epi64(acc.ch, differ);
        }
    }

    #[inline(always)]
    fn sums_of(acc: Acc, old: &[f64], new: &[f64], whole: usize) -> Sums {
        let lanes = |v: __m256d| {
            let mut out = [0f64; LANES];
            // SAFETY: out holds 4 f64.
            unsafe { _mm256_storeu_pd(out.as_mut_ptr(), v) };
            out
        };
        let mut counts = [0i64; LANES];
        // SAFETY: counts holds 4 i64.
        unsafe { _mm256_storeu_si256(counts.as_mut_ptr().cast(), acc.ch) };
        // Counts below 2^53 are exact in f64, as the baseline counts them.
        let changed = counts.map(|c| c as f64);
        finish(
            [
                lanes(acc.dd),
                lanes(acc.aa),
                lanes(acc.bb),
                lanes(acc.ab),
                lanes(acc.mx),
                changed,
            ],
            &old[whole..],
            &new[whole..],
            old.len(),
        )
    }

    // SAFETY: inlined only into functions with AVX2 enabled, on CPUs that have it.
    let (zero, zero_counts) = unsafe { (_mm256_setzero_pd(), _mm256_setzero_si256()) };
    let fresh = Acc {
        dd: zero,
        aa: zero,
        bb: zero,
        ab: zero,
        mx: zero,
        ch: zero_counts,
    };
    let (mut one, mut two) = (fresh, fresh);
    let whole = |run: (&[f64], &[f64])| run.0.len().min(run.1.len()) / LANES * LANES;
    let (n1, n2) = (whole(first), whole(second));
    let mut i = 0;
    while i < n1.min(n2) {
        step(&mut one, first.0, first.1, i);
        step(&mut two, second.0, second.1, i);
        i += LANES;
    }
    let mut j = i;
    while i < n1 {
        step(&mut one, first.0, first.1, i);
        i += LANES;
    }
    while j < n2 {
        step(&mut two, second.0, second.1, j);
        j += LANES;
    }
    (
        sums_of(one, first.0, first.1, n1),
        sums_of(two, second.0, second.1, n2),
    )
}

fn all_finite_body(old: &[f64], new: &[f64]) -> Sums {
    let mut acc = [[0f64; LANES]; 6];
    let (ca, cb) = (old.chunks_exact(LANES), new.chunks_exact(LANES));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (a, b) in ca.zip(cb) {
        for i in 0..LANES {
            let d = b[i] - a[i];
            acc[0][i] += d * d;
            acc[1][i] += a[i] * a[i];
            acc[2][i] += b[i] * b[i];
            acc[3][i] += a[i] * b[i];
            let ad = d.abs();
            acc[4][i] = if ad > acc[4][i] { ad } else { acc[4][i] };
            // Counted in f64 lanes (exact far beyond a piece's length), as the AVX2 path.
            acc[5][i] += if a[i] != b[i] { 1.0 } else { 0.0 };
        }
    }
    finish(acc, ra, rb, old.len())
}

/// Reduces the lanes [Σd², Σa², Σb², Σab, max|d|, changed] in lane order and adds the tail.
fn finish(acc: [[f64; LANES]; 6], tail_old: &[f64], tail_new: &[f64], len: usize) -> Sums {
    let sum = |lanes: [f64; LANES]| lanes.iter().fold(0.0, |s, x| s + x);
    let mut s = Sums {
        elements: len as u64,
        changed: sum(acc[5]) as u64,
        nonfinite: 0,
        max_abs_diff: acc[4].iter().fold(0f64, |m, &x| m.max(x)),
        sum_sq_old: sum(acc[1]),
        sum_sq_new: sum(acc[2]),
        sum_sq_diff: sum(acc[0]),
        dot: sum(acc[3]),
        inexact: false,
        scale: 0,
    };
    for (&a, &b) in tail_old.iter().zip(tail_new) {
        s.add_finite(a, b);
    }
    s
}

/// The figures reported for one tensor pair.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ValueStats {
    /// Positions whose values differ (see the module comment for non-finite ones).
    pub changed_elements: u64,
    /// Positions holding NaN or ±inf on either side (0 for tensors found identical by bytes,
    /// which are not decoded).
    pub nonfinite_elements: u64,
    /// max |b - a| over positions finite on both sides.
    pub max_abs_diff: f64,
    /// ‖b - a‖ / ‖a‖; None when ‖a‖ = 0 and b differs (infinite).
    pub rel_l2: Option<f64>,
    /// a·b / (‖a‖ ‖b‖); None when either norm is 0 (undefined).
    pub cosine: Option<f64>,
    /// The norms, cosine and max |b - a| are approximate: 64-bit integers of magnitude ≥ 2^53
    /// were rounded to f64 (changed elements are counted exactly all the same).
    pub approximate: bool,
}

impl ValueStats {
    /// Identical values: nothing changed, cosine 1 by definition.
    pub fn identical() -> ValueStats {
        ValueStats {
            changed_elements: 0,
            nonfinite_elements: 0,
            max_abs_diff: 0.0,
            rel_l2: Some(0.0),
            cosine: Some(1.0),
            approximate: false,
        }
    }

    /// The figures of a tensor from its sums.
    pub fn from_sums(s: &Sums) -> ValueStats {
        let norm_old = s.sum_sq_old.sqrt();
        let norm_new = s.sum_sq_new.sqrt();
        let rel_l2 = if s.sum_sq_diff == 0.0 {
            Some(0.0)
        } else if norm_old > 0.0 {
            Some(s.sum_sq_diff.sqrt() / norm_old)
        } else {
            None
        };
        let cosine = if s.sum_sq_diff == 0.0 && s.changed == 0 {
            Some(1.0)
        } else if norm_old > 0.0 && norm_new > 0.0 {
            // Rounding can take the ratio a hair past ±1.
            Some((s.dot / (norm_old * norm_new)).clamp(-1.0, 1.0))
        } else {
            None
        };
        ValueStats {
            changed_elements: s.changed,
            nonfinite_elements: s.nonfinite,
            max_abs_diff: s.max_abs_diff,
            rel_l2,
            cosine,
            approximate: s.inexact,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiny_deltas_keep_their_size_in_f64() {
        let old: Vec<f64> = (0..1000).map(|i| 1.0 + f64::from(i)).collect();
        let new: Vec<f64> = old.iter().map(|x| x + 1e-7).collect();
        let stats = ValueStats::from_sums(&Sums::of(&old, &new));
        assert_eq!(stats.changed_elements, 1000);
        let expected = (1000.0 * 1e-14f64).sqrt() / old.iter().map(|x| x * x).sum::<f64>().sqrt();
        assert!((stats.rel_l2.unwrap() / expected - 1.0).abs() < 1e-6);
    }

    #[test]
    fn the_avx2_path_gives_the_baseline_figures_bit_for_bit() {
        let avx2 = crate::values::tests::avx2_or_note(
            "the_avx2_path_gives_the_baseline_figures_bit_for_bit",
        );
        #[cfg(not(target_arch = "x86_64"))]
        let _ = avx2;
        // Uneven lengths exercise the tails; values of many magnitudes exercise rounding.
        for n in [0usize, 3, 4, 1001, 4096] {
            let old: Vec<f64> = (0..n)
                .map(|i| ((i * 7919) % 1000) as f64 * 1.37e-3 - 0.5)
                .collect();
            let new: Vec<f64> = old
                .iter()
                .enumerate()
                .map(|(i, x)| x * (1.0 + 1e-4 * (i % 3) as f64))
                .collect();
            let baseline = all_finite_body(&old, &new);
            #[cfg(target_arch = "x86_64")]
            if avx2 {
                // SAFETY: the CPU has AVX2.
                assert_eq!(unsafe { all_finite_avx2(&old, &new) }, baseline, "n = {n}");
                assert_eq!(
                    unsafe { unchanged_avx2(&old) },
                    unchanged_body(&old),
                    "n = {n}"
                );
            }
            assert_eq!(Sums::of(&old, &new), baseline);
        }
    }

    #[test]
    fn two_runs_of_exact_products_give_the_sums_of_each_bit_for_bit() {
        // f32 values of many magnitudes (their products are exact in f64), uneven lengths,
        // a NaN and an infinity.
        let run = |n: usize, seed: u32| -> Vec<f64> {
            (0..n as u32)
                .map(|i| {
                    let x = (i.wrapping_add(seed).wrapping_mul(2_654_435_761) >> 8) as f32;
                    f64::from(x * 1.37e-7 - 0.9) * f64::from(1u32 << (i % 7))
                })
                .collect()
        };
        let changed = |v: &[f64]| -> Vec<f64> {
            v.iter()
                .enumerate()
                .map(|(i, x)| {
                    if i % 3 == 0 {
                        *x
                    } else {
                        f64::from(*x as f32 * 1.0001)
                    }
                })
                .collect()
        };
        let mut with_nan = run(37, 5);
        with_nan[9] = f64::NAN;
        let mut with_inf = run(64, 6);
        with_inf[17] = f64::INFINITY;
        let runs = [
            run(0, 1),
            run(3, 2),
            run(4096, 3),
            run(1001, 4),
            with_nan,
            with_inf,
        ];
        for a in &runs {
            for b in &runs {
                let (a2, b2) = (changed(a), changed(b));
                let expected = (Sums::of(a, &a2), Sums::of(b, &b2));
                let pair = Sums::of_two_exact((a, &a2), (b, &b2));
                assert_eq!(format!("{pair:?}"), format!("{expected:?}"));
                assert_eq!(
                    format!("{:?}", all_finite_body(a, &a2).or_careful((a, &a2))),
                    format!("{:?}", expected.0)
                );
            }
        }
    }

    #[test]
    fn two_unchanged_runs_give_the_sums_of_each_bit_for_bit() {
        let run = |n: usize, seed: usize| -> Vec<f64> {
            (0..n)
                .map(|i| (((i + seed) * 7919) % 1000) as f64 * 1.37e-3 - 0.5)
                .collect()
        };
        let mut with_nan = run(37, 5);
        with_nan[9] = f64::NAN;
        let runs = [run(0, 1), run(3, 2), run(4096, 3), run(1001, 4), with_nan];
        for a in &runs {
            for b in &runs {
                let expected = (Sums::unchanged(a), Sums::unchanged(b));
                let pair = Sums::unchanged_two(a, b);
                assert_eq!(format!("{pair:?}"), format!("{expected:?}"));
                assert_eq!(unchanged_two_body(a, b), pair);
                assert_eq!(unchanged_body(a), expected.0);
            }
        }
    }

    #[test]
    fn nan_and_inf_stay_out_of_the_sums() {
        let old = [1.0, f64::NAN, f64::INFINITY, 2.0, f64::NAN];
        let new = [1.0, f64::NAN, f64::INFINITY, 3.0, 0.0];
        let s = Sums::of(&old, &new);
        assert_eq!((s.changed, s.nonfinite), (2, 3));
        assert_eq!(s.max_abs_diff, 1.0);
        assert_eq!(s.sum_sq_old, 5.0);
    }

    #[test]
    fn zero_norms_give_none_not_a_division_by_zero() {
        let stats = ValueStats::from_sums(&Sums::of(&[0.0; 4], &[0.0, 1.0, 0.0, 0.0]));
        assert_eq!((stats.rel_l2, stats.cosine), (None, None));
        let same = ValueStats::from_sums(&Sums::of(&[0.0; 4], &[0.0; 4]));
        assert_eq!((same.rel_l2, same.cosine), (Some(0.0), Some(1.0)));
    }

    /// Values near the ends of f64's range give the figures values of ordinary size give.
    #[test]
    fn extreme_magnitudes_are_scaled_before_squaring() {
        let old = [1.0, 2.0, 3.0, 4.0, 5.0];
        let new = [1.0, 2.5, 3.0, 4.0, 5.5];
        let reference = ValueStats::from_sums(&Sums::of(&old, &new));
        for factor in [1e200, 1e-200, 1e300, 1e-300] {
            let scaled = |v: &[f64]| v.iter().map(|x| x * factor).collect::<Vec<_>>();
            let stats = ValueStats::from_sums(&Sums::of(&scaled(&old), &scaled(&new)));
            let (r, c) = (stats.rel_l2.unwrap(), stats.cosine.unwrap());
            let (r0, c0) = (reference.rel_l2.unwrap(), reference.cosine.unwrap());
            assert!((r - r0).abs() < 1e-9 * r0, "{factor}: rel_l2 {r} vs {r0}");
            assert!((c - c0).abs() < 1e-12, "{factor}: cosine {c} vs {c0}");
        }
        let max = [f64::MAX, f64::MAX / 2.0];
        let near = [f64::MAX / 1.5, f64::MAX / 2.0];
        let stats = ValueStats::from_sums(&Sums::of(&max, &near));
        assert!(
            stats.rel_l2.is_some_and(|r| r > 0.0 && r.is_finite()),
            "{stats:?}"
        );
        assert!(stats.cosine.is_some_and(|c| c <= 1.0), "{stats:?}");
        // Merged with a piece of ordinary values, the large piece dominates.
        let mut merged = Sums::of(&[1.0], &[2.0]);
        merged.merge(&Sums::of(&max, &near));
        let stats = ValueStats::from_sums(&merged);
        assert!(
            stats.rel_l2.is_some_and(|r| r > 0.0 && r.is_finite()),
            "{stats:?}"
        );
    }

    /// Pieces merged as `diff --values` merges them, into `Sums::default()` and beside a
    /// piece of zeros: values near 1e-200 keep their figures.
    #[test]
    fn tiny_pieces_survive_the_merge() {
        let old = [1.0, 2.0, 3.0, 4.0, 5.0];
        let new = [1.0, 2.5, 3.0, 4.0, 5.5];
        let reference = ValueStats::from_sums(&Sums::of(&old, &new));
        let tiny = |v: &[f64]| v.iter().map(|x| x * 1e-200).collect::<Vec<_>>();
        let piece = Sums::of(&tiny(&old), &tiny(&new));
        let zeros = Sums::of(&[0.0; 3], &[0.0; 3]);
        for merged in [
            [Sums::default(), piece, Sums::default()],
            [zeros, piece, zeros],
            [Sums::default(), zeros, piece],
        ] {
            let mut total = Sums::default();
            for part in &merged {
                total.merge(part);
            }
            let stats = ValueStats::from_sums(&total);
            let (r, c) = (stats.rel_l2.unwrap(), stats.cosine.unwrap());
            let (r0, c0) = (reference.rel_l2.unwrap(), reference.cosine.unwrap());
            assert!((r - r0).abs() < 1e-9 * r0, "rel_l2 {r} vs {r0}");
            assert!((c - c0).abs() < 1e-12, "cosine {c} vs {c0}");
        }
    }

    #[test]
    fn cosine_is_clamped_to_one() {
        let v = [0.1, 0.2, 0.3, 0.7, 1e-17];
        let w = [0.1, 0.2, 0.3, 0.7, 2e-17];
        for pair in [(&v, &w), (&w, &v)] {
            let c = ValueStats::from_sums(&Sums::of(pair.0, pair.1))
                .cosine
                .unwrap();
            assert!((-1.0..=1.0).contains(&c), "{c}");
        }
    }
}
