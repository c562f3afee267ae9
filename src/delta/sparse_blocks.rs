//! sparse `create` of a large tensor in blocks (see `blocks.rs`). The `k` largest magnitudes
//! over the whole tensor are found by radix selection on their keys ([`codec::magnitude_key`])
//! without holding the delta: a first pass counts the keys' high 16 bits, which settles every
//! value above the threshold's bucket; a second collects the values of that bucket (or, when
//! it holds too many, counts their low 16 bits, which gives the exact threshold, and — when
//! only some of the values at the threshold are kept — counts them per block), and a last pass
//! collects the kept values and (against a plain base) measures the loss. Ties at the
//! threshold go to the lowest indices, as [`codec::encode`] keeps them: the arrays are byte for
//! byte the same.

use std::path::Path;

use rayon::prelude::*;

use super::blocks::{Encoded, Inputs, group_len};
use super::codec::{self, EncodeOptions, magnitude_key};
use super::error::DeltaError;
use super::spool::{Array, Spool};
use super::verify::{LossSums, loss_chunk};
use crate::formats::wdelta::ArrayDtype;

type Result<T, E = DeltaError> = std::result::Result<T, E>;

const BUCKETS: usize = 1 << 16;

/// The threshold's bucket is collected when it holds at most this many values (16 bytes each
/// held), else selected in it by counting.
const MAX_CANDIDATES: u64 = 1 << 20;

/// Bytes of records the last pass holds at once, at the tensor's average density.
const RECORDS_HELD: usize = 32 << 20;

/// Which values of a block are kept.
enum Rule {
    /// Keys whose high bits are above `bucket`, and the elements `kept` (ascending) of it.
    Bucket { bucket: u32, kept: Vec<usize> },
    /// Keys above `threshold`, and of those equal to it the first `budget[block]` of each
    /// block (all of them when None).
    Threshold {
        threshold: u32,
        budget: Option<Vec<u64>>,
    },
}

/// The sparse arrays of the tensor and, against a plain base, its loss sums.
pub(super) fn encode(inputs: &Inputs<'_>, enc: &EncodeOptions, spool_dir: &Path) -> Encoded {
    let n = inputs.len();
    let k = codec::sparse_k(n as u64, enc.sparsity);
    let (starts, block_of) = inputs.blocks();
    let high = histogram(inputs, &starts, &block_of, |key| Some((key >> 16) as usize))?;
    let (bucket, above) = select(&high, k);
    let need = k - above;
    let rule = if high[bucket] <= MAX_CANDIDATES {
        let bucket = bucket as u32;
        let candidates: Vec<(usize, u32)> = starts
            .par_iter()
            .map(|&s| {
                let mut found = Vec::new();
                inputs.with_delta(block_of(s), |d, _, _, _, at| {
                    for (i, &x) in d.iter().enumerate() {
                        let key = magnitude_key(x);
                        if key >> 16 == bucket {
                            found.push((at + i, key));
                        }
                    }
                })?;
                Ok(found)
            })
            .collect::<Result<Vec<_>>>()?
            .into_iter()
            .flatten()
            .collect();
        let need = need as usize;
        if candidates.len() < need {
            return Err(inputs.changed());
        }
        let mut keys: Vec<u32> = candidates.iter().map(|&(_, key)| key).collect();
        let (_, &mut threshold, _) = keys.select_nth_unstable_by(need - 1, |a, b| b.cmp(a));
        let mut ties = need - candidates.iter().filter(|c| c.1 > threshold).count();
        let mut kept = Vec::with_capacity(need);
        for &(i, key) in &candidates {
            if key > threshold || (key == threshold && ties > 0) {
                if key == threshold {
                    ties -= 1;
                }
                kept.push(i);
            }
        }
        Rule::Bucket { bucket, kept }
    } else {
        let b = bucket as u32;
        let low = histogram(inputs, &starts, &block_of, |key| {
            (key >> 16 == b).then_some((key & 0xffff) as usize)
        })?;
        let (lo, above_in_bucket) = select(&low, need);
        let threshold = (b << 16) | lo as u32;
        let ties = need - above_in_bucket;
        let budget = if ties == low[lo] {
            None
        } else {
            // Only the first `ties` values at the threshold are kept: how many each block has.
            let counts = starts
                .par_iter()
                .map(|&s| {
                    let mut count = 0u64;
                    inputs.with_delta(block_of(s), |d, _, _, _, _| {
                        count +=
                            d.iter().filter(|&&x| magnitude_key(x) == threshold).count() as u64;
                    })?;
                    Ok(count)
                })
                .collect::<Result<Vec<_>>>()?;
            let mut left = ties;
            Some(
                counts
                    .into_iter()
                    .map(|c| {
                        let take = c.min(left);
                        left -= take;
                        take
                    })
                    .collect(),
            )
        };
        Rule::Threshold { threshold, budget }
    };
    let measured = inputs.measured();
    let elem = inputs.elem()?;
    // The records go to spools group by group: beyond a few MiB, not held.
    let mut indices = Spool::new(spool_dir);
    let mut values = Spool::new(spool_dir);
    let mut sums = LossSums::default();
    let all_starts: Vec<(usize, usize)> = starts.iter().copied().enumerate().collect();
    // A group's records are held until they go to the spools: as many blocks as keep about
    // RECORDS_HELD bytes at the tensor's density (at least two a worker).
    let per_block = (12 * k as usize).div_ceil(starts.len().max(1)).max(1);
    let group = (RECORDS_HELD / per_block).clamp(
        2 * rayon::current_num_threads(),
        group_len().max(2 * rayon::current_num_threads()),
    );
    for group in all_starts.chunks(group) {
        let blocks = group
            .par_iter()
            .map(|&(block, s)| {
                let (mut idx, mut vals) = (Vec::new(), Vec::new());
                let mut sums = LossSums::starting_at(s);
                let mut raw = Vec::new();
                let mut keeper = Keeper::new(&rule, block, s);
                inputs.with_delta(block_of(s), |d, b, f, r, at| {
                    for (i, x) in d.iter_mut().enumerate() {
                        if keeper.keeps(at + i, *x) {
                            idx.extend_from_slice(&((at + i) as i64).to_le_bytes());
                            vals.extend_from_slice(&x.to_le_bytes());
                        } else {
                            // What `apply` decodes there.
                            *x = 0.0;
                        }
                    }
                    if measured {
                        loss_chunk(elem, b, d, r, f, &mut raw, &mut sums);
                    }
                })?;
                Ok((idx, vals, sums))
            })
            .collect::<Result<Vec<_>>>()?;
        for (idx, vals, block_sums) in blocks {
            indices.push(&idx)?;
            values.push(&vals)?;
            sums.absorb(&block_sums);
        }
    }
    let kept = values.len() / 4;
    if kept != k {
        // The counts of the first passes do not hold for the last one.
        return Err(inputs.changed());
    }
    let arrays = vec![
        Array::Spooled {
            field: "indices",
            dtype: ArrayDtype::Int64,
            shape: vec![kept],
            data: indices,
        },
        Array::Spooled {
            field: "values",
            dtype: ArrayDtype::Float32,
            shape: vec![kept],
            data: values,
        },
    ];
    Ok((arrays, measured.then_some(sums)))
}

/// Counts of `slot(key)` over the delta's keys, block by block over the workers.
fn histogram(
    inputs: &Inputs<'_>,
    starts: &[usize],
    block_of: &(impl Fn(usize) -> std::ops::Range<usize> + Sync),
    slot: impl Fn(u32) -> Option<usize> + Sync,
) -> Result<Vec<u64>> {
    starts
        .par_iter()
        .try_fold(
            || vec![0u64; BUCKETS],
            |mut hist, &s| {
                inputs.with_delta(block_of(s), |d, _, _, _, _| {
                    for &x in d.iter() {
                        if let Some(b) = slot(magnitude_key(x)) {
                            hist[b] += 1;
                        }
                    }
                })?;
                Ok(hist)
            },
        )
        .try_reduce(
            || vec![0u64; BUCKETS],
            |mut a, b| {
                a.iter_mut().zip(&b).for_each(|(a, b)| *a += b);
                Ok(a)
            },
        )
}

/// The slot the `k`-th largest key falls in (from the top) and how many keys are above it.
fn select(hist: &[u64], k: u64) -> (usize, u64) {
    let mut above = 0u64;
    for b in (0..hist.len()).rev() {
        if above + hist[b] >= k {
            return (b, above);
        }
        above += hist[b];
    }
    (0, above)
}

/// Walks one block's elements in order, saying which are kept.
struct Keeper<'r> {
    rule: &'r Rule,
    /// Rule::Bucket: the next kept element of the bucket.
    next: usize,
    /// Rule::Threshold: values at the threshold this block may still keep.
    budget: u64,
}

impl<'r> Keeper<'r> {
    fn new(rule: &'r Rule, block: usize, start: usize) -> Keeper<'r> {
        match rule {
            Rule::Bucket { kept, .. } => Keeper {
                rule,
                next: kept.partition_point(|&i| i < start),
                budget: 0,
            },
            Rule::Threshold { budget, .. } => Keeper {
                rule,
                next: 0,
                budget: budget.as_ref().map_or(u64::MAX, |b| b[block]),
            },
        }
    }

    #[inline]
    fn keeps(&mut self, i: usize, x: f32) -> bool {
        let key = magnitude_key(x);
        match self.rule {
            Rule::Bucket { bucket, kept } => {
                let high = key >> 16;
                if high != *bucket {
                    return high > *bucket;
                }
                if kept.get(self.next) == Some(&i) {
                    self.next += 1;
                    true
                } else {
                    false
                }
            }
            Rule::Threshold { threshold, .. } => {
                if key != *threshold {
                    return key > *threshold;
                }
                if self.budget > 0 {
                    self.budget -= 1;
                    true
                } else {
                    false
                }
            }
        }
    }
}
