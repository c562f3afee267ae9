//! Element-wise comparison of two runs of values, accumulated in f64.
//!
//! Non-finite values (NaN, ±inf) are kept out of the norms, the dot product and the maximum
//! difference; a position holding one on either side counts in `nonfinite`, and as changed
//! unless both sides hold the same thing (NaN and NaN, or the same infinity).

/// Sums over some elements of a tensor pair; merged across pieces.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Sums {
    pub elements: u64,
    pub changed: u64,
    pub nonfinite: u64,
    pub max_abs_diff: f64,
    /// Σ a², Σ b², Σ (b - a)², Σ a b over the positions where both sides are finite.
    pub sum_sq_old: f64,
    pub sum_sq_new: f64,
    pub sum_sq_diff: f64,
    pub dot: f64,
}

/// Lanes of the accumulators: independent sums the compiler keeps in vector registers.
const LANES: usize = 8;

impl Sums {
    pub fn merge(&mut self, other: &Sums) {
        self.elements += other.elements;
        self.changed += other.changed;
        self.nonfinite += other.nonfinite;
        self.max_abs_diff = self.max_abs_diff.max(other.max_abs_diff);
        self.sum_sq_old += other.sum_sq_old;
        self.sum_sq_new += other.sum_sq_new;
        self.sum_sq_diff += other.sum_sq_diff;
        self.dot += other.dot;
    }

    /// The sums of `old` against `new` (equal lengths).
    pub fn of(old: &[f64], new: &[f64]) -> Sums {
        debug_assert_eq!(old.len(), new.len());
        let sums = Self::all_finite(old, new);
        // A non-finite input makes some sum non-finite: then take the careful path.
        if sums.sum_sq_old.is_finite() && sums.sum_sq_new.is_finite() && sums.dot.is_finite() {
            sums
        } else {
            Self::careful(old, new)
        }
    }

    /// The sums of a run of values that is the same on both sides.
    pub fn unchanged(values: &[f64]) -> Sums {
        let mut sq = [0f64; LANES];
        let mut nonfinite = [0u64; LANES];
        let chunks = values.chunks_exact(LANES);
        let rest = chunks.remainder();
        for x in chunks {
            for i in 0..LANES {
                let finite = x[i].is_finite();
                nonfinite[i] += !finite as u64;
                sq[i] += if finite { x[i] * x[i] } else { 0.0 };
            }
        }
        let mut sum: f64 = sq.iter().sum();
        let mut bad: u64 = nonfinite.iter().sum();
        for &x in rest {
            if x.is_finite() {
                sum += x * x;
            } else {
                bad += 1;
            }
        }
        Sums {
            elements: values.len() as u64,
            changed: 0,
            nonfinite: bad,
            max_abs_diff: 0.0,
            sum_sq_old: sum,
            sum_sq_new: sum,
            sum_sq_diff: 0.0,
            dot: sum,
        }
    }

    /// Assumes every value is finite (the result shows it when one is not).
    fn all_finite(old: &[f64], new: &[f64]) -> Sums {
        let mut dd = [0f64; LANES];
        let mut aa = [0f64; LANES];
        let mut bb = [0f64; LANES];
        let mut ab = [0f64; LANES];
        let mut mx = [0f64; LANES];
        let mut ch = [0u64; LANES];
        let (ca, cb) = (old.chunks_exact(LANES), new.chunks_exact(LANES));
        let (ra, rb) = (ca.remainder(), cb.remainder());
        for (a, b) in ca.zip(cb) {
            for i in 0..LANES {
                let d = b[i] - a[i];
                dd[i] += d * d;
                aa[i] += a[i] * a[i];
                bb[i] += b[i] * b[i];
                ab[i] += a[i] * b[i];
                let ad = d.abs();
                mx[i] = if ad > mx[i] { ad } else { mx[i] };
                ch[i] += (a[i] != b[i]) as u64;
            }
        }
        let mut s = Sums {
            elements: old.len() as u64,
            changed: ch.iter().sum(),
            nonfinite: 0,
            max_abs_diff: mx.iter().fold(0f64, |m, &x| m.max(x)),
            sum_sq_old: aa.iter().sum(),
            sum_sq_new: bb.iter().sum(),
            sum_sq_diff: dd.iter().sum(),
            dot: ab.iter().sum(),
        };
        for (&a, &b) in ra.iter().zip(rb) {
            let d = b - a;
            s.sum_sq_diff += d * d;
            s.sum_sq_old += a * a;
            s.sum_sq_new += b * b;
            s.dot += a * b;
            s.max_abs_diff = s.max_abs_diff.max(d.abs());
            s.changed += (a != b) as u64;
        }
        s
    }

    /// Element by element, keeping non-finite values out of the sums.
    fn careful(old: &[f64], new: &[f64]) -> Sums {
        let mut s = Sums {
            elements: old.len() as u64,
            ..Sums::default()
        };
        for (&a, &b) in old.iter().zip(new) {
            if a.is_finite() && b.is_finite() {
                let d = b - a;
                s.sum_sq_diff += d * d;
                s.sum_sq_old += a * a;
                s.sum_sq_new += b * b;
                s.dot += a * b;
                s.max_abs_diff = s.max_abs_diff.max(d.abs());
                s.changed += (a != b) as u64;
            } else {
                s.nonfinite += 1;
                let same = (a.is_nan() && b.is_nan()) || a == b;
                s.changed += !same as u64;
            }
        }
        s
    }
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
        }
    }

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
            Some(s.dot / (norm_old * norm_new))
        } else {
            None
        };
        ValueStats {
            changed_elements: s.changed,
            nonfinite_elements: s.nonfinite,
            max_abs_diff: s.max_abs_diff,
            rel_l2,
            cosine,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiny_deltas_keep_their_size_in_f64() {
        let old: Vec<f64> = (0..1000).map(|i| 1.0 + i as f64).collect();
        let new: Vec<f64> = old.iter().map(|x| x + 1e-7).collect();
        let stats = ValueStats::from_sums(&Sums::of(&old, &new));
        assert_eq!(stats.changed_elements, 1000);
        let expected = (1000.0 * 1e-14f64).sqrt() / old.iter().map(|x| x * x).sum::<f64>().sqrt();
        assert!((stats.rel_l2.unwrap() / expected - 1.0).abs() < 1e-6);
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
}
