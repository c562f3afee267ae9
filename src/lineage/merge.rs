//! Merges: whether a model is a weighted sum of two or more candidates, by least squares on a
//! sample of values read at the same places from every model.

use super::candidate::Candidate;
use super::relation::{Merge, MergeWeight};
use super::thresholds::{
    MERGE_MAX_GAIN, MERGE_MAX_RESIDUAL, MERGE_MIN_WEIGHT, MERGE_SAMPLE, VOTING_MIN_ELEMENTS,
};
use crate::artifact::TensorInfo;
use crate::values::{Side, ValuesError, dequant};

/// Values per sampled run: a multiple of every block size, so a run starts and ends on
/// block boundaries.
const RUN: u64 = 256;

/// The tensors sampled: in the model and every candidate with the same element count, at
/// least two dimensions and [`VOTING_MIN_ELEMENTS`], decodable on every side.
fn sampled_tensors<'a>(model: &Candidate<'a>, candidates: &[Candidate<'a>]) -> Vec<&'a str> {
    let decodable = |c: &Candidate<'_>, info: &TensorInfo| {
        dequant::codec(info.dtype, c.artifact.layout.big_endian).is_ok()
    };
    model
        .artifact
        .tensors
        .iter()
        .filter(|(name, info)| {
            info.shape.len() >= 2
                && info.n_elements() >= VOTING_MIN_ELEMENTS
                && decodable(model, info)
                && candidates.iter().all(|c| {
                    c.artifact.tensors.get(name).is_some_and(|other| {
                        other.n_elements() == info.n_elements() && decodable(c, other)
                    })
                })
        })
        .map(|(name, _)| name)
        .collect()
}

/// The runs sampled from a tensor of `elements` values, given `runs` of them: evenly spaced.
fn run_starts(elements: u64, runs: u64) -> impl Iterator<Item = u64> {
    let available = elements.div_ceil(RUN);
    let runs = runs.clamp(1, available);
    (0..runs).map(move |j| j * available / runs * RUN)
}

/// The values of `names` at the sampled runs, in order, from one model.
fn sample(
    side: &Candidate<'_>,
    names: &[&str],
    runs: &[u64],
) -> Result<Option<Vec<f64>>, ValuesError> {
    let Some(files) = side.files else {
        return Ok(None);
    };
    let view = Side {
        artifact: side.artifact,
        files,
    };
    let mut out = Vec::new();
    let (mut raw, mut decoded) = (Vec::new(), vec![0f64; RUN as usize]);
    for (name, &count) in names.iter().zip(runs) {
        let position = side
            .artifact
            .tensors
            .position(name)
            .expect("sampled by name");
        let info = side.artifact.tensors.get(name).expect("sampled by name");
        let codec = dequant::codec(info.dtype, side.artifact.layout.big_endian)
            .expect("decodable: sampled");
        let file = view.file_at(position)?;
        let bytes = crate::values::tensor_bytes(file, name, info, &codec, view.view_at(position))?;
        let n = info.n_elements();
        for start in run_starts(n, count) {
            let end = (start + RUN).min(n);
            let run = bytes.elements(&codec, start, end, &mut raw);
            let values = &mut decoded[..(end - start) as usize];
            (codec.decode)(run, values);
            out.extend_from_slice(values);
        }
    }
    Ok(Some(out))
}

/// Least squares of `y` on the columns `x` by modified Gram-Schmidt: the weights, or None when
/// the columns are dependent (a candidate repeated).
fn least_squares(y: &[f64], x: &[Vec<f64>]) -> Option<Vec<f64>> {
    let k = x.len();
    let mut q: Vec<Vec<f64>> = x.to_vec();
    let mut r = vec![vec![0f64; k]; k];
    for j in 0..k {
        for i in 0..j {
            let dot: f64 = q[i].iter().zip(&q[j]).map(|(a, b)| a * b).sum();
            r[i][j] = dot;
            let (left, right) = q.split_at_mut(j);
            let (qi, qj) = (&left[i], &mut right[0]);
            for (b, a) in qj.iter_mut().zip(qi) {
                *b -= dot * a;
            }
        }
        let norm = q[j].iter().map(|v| v * v).sum::<f64>().sqrt();
        let scale = x[j].iter().map(|v| v * v).sum::<f64>().sqrt();
        if norm <= scale * 1e-12 || norm == 0.0 {
            return None;
        }
        r[j][j] = norm;
        for v in &mut q[j] {
            *v /= norm;
        }
    }
    let qty: Vec<f64> = q
        .iter()
        .map(|col| col.iter().zip(y).map(|(a, b)| a * b).sum())
        .collect();
    let mut w = vec![0f64; k];
    for j in (0..k).rev() {
        let tail: f64 = (j + 1..k).map(|i| r[j][i] * w[i]).sum();
        w[j] = (qty[j] - tail) / r[j][j];
    }
    Some(w)
}

fn norm(v: impl Iterator<Item = f64>) -> f64 {
    v.map(|x| x * x).sum::<f64>().sqrt()
}

/// The merge `model` is of `candidates`, when the sample shows one (see the thresholds).
pub(super) fn find(
    model: &Candidate<'_>,
    candidates: &[Candidate<'_>],
) -> Result<Option<Merge>, ValuesError> {
    if candidates.len() < 2 {
        return Ok(None);
    }
    let names = sampled_tensors(model, candidates);
    let sizes: Vec<u64> = names
        .iter()
        .map(|n| {
            model
                .artifact
                .tensors
                .get(n)
                .map_or(0, TensorInfo::n_elements)
        })
        .collect();
    let total: u64 = sizes.iter().sum();
    if total == 0 {
        return Ok(None);
    }
    let runs: Vec<u64> = sizes
        .iter()
        .map(|&n| ((MERGE_SAMPLE / RUN) as f64 * n as f64 / total as f64).round() as u64)
        .collect();
    let Some(y) = sample(model, &names, &runs)? else {
        return Ok(None);
    };
    let mut x = Vec::with_capacity(candidates.len());
    for c in candidates {
        let Some(column) = sample(c, &names, &runs)? else {
            return Ok(None);
        };
        x.push(column);
    }
    // Non-finite values say nothing of a weighted sum: those rows are left out.
    let keep: Vec<bool> = (0..y.len())
        .map(|i| y[i].is_finite() && x.iter().all(|c| c[i].is_finite()))
        .collect();
    let filter = |v: &[f64]| -> Vec<f64> {
        v.iter()
            .zip(&keep)
            .filter(|(_, k)| **k)
            .map(|(v, _)| *v)
            .collect()
    };
    let y = filter(&y);
    let x: Vec<Vec<f64>> = x.iter().map(|c| filter(c)).collect();
    let y_norm = norm(y.iter().copied());
    if y_norm == 0.0 {
        return Ok(None);
    }
    let Some(weights) = least_squares(&y, &x) else {
        return Ok(None);
    };
    let residual = norm(
        (0..y.len()).map(|i| y[i] - weights.iter().zip(&x).map(|(w, c)| w * c[i]).sum::<f64>()),
    ) / y_norm;
    let (best, best_rel) = x
        .iter()
        .enumerate()
        .map(|(i, c)| (i, norm(y.iter().zip(c).map(|(a, b)| a - b)) / y_norm))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .expect("two candidates or more");
    let taking_part = weights
        .iter()
        .filter(|w| w.abs() >= MERGE_MIN_WEIGHT)
        .count();
    if taking_part < 2 || residual > MERGE_MAX_RESIDUAL || residual > MERGE_MAX_GAIN * best_rel {
        return Ok(None);
    }
    Ok(Some(Merge {
        weights: candidates
            .iter()
            .zip(&weights)
            .map(|(c, w)| MergeWeight {
                candidate: c.name.to_owned(),
                weight: *w,
            })
            .collect(),
        residual,
        best_single: candidates[best].name.to_owned(),
        best_single_rel_l2: best_rel,
        sampled_values: y.len() as u64,
        sampled_tensors: names.len(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn least_squares_recovers_the_weights_of_a_sum() {
        let a: Vec<f64> = (0..1000)
            .map(|i| f64::from((i * 37) % 101) - 50.0)
            .collect();
        let b: Vec<f64> = (0..1000).map(|i| f64::from((i * 53) % 97) - 48.0).collect();
        let y: Vec<f64> = a.iter().zip(&b).map(|(a, b)| 0.3 * a + 0.7 * b).collect();
        let w = least_squares(&y, &[a.clone(), b]).unwrap();
        assert!(
            (w[0] - 0.3).abs() < 1e-9 && (w[1] - 0.7).abs() < 1e-9,
            "{w:?}"
        );
        assert!(least_squares(&y, &[a.clone(), a]).is_none());
    }

    #[test]
    fn runs_are_spread_and_block_aligned() {
        let starts: Vec<u64> = run_starts(4096, 4).collect();
        assert_eq!(starts, [0, 1024, 2048, 3072]);
        assert_eq!(run_starts(300, 10).collect::<Vec<_>>(), [0, 256]);
    }
}
