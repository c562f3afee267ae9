//! sparse `create` of a large tensor in blocks (see `blocks.rs`). The `k` largest magnitudes
//! over the whole tensor are found by radix selection on their keys ([`codec::magnitude_key`])
//! without holding the delta: a first pass counts the keys' high 16 bits, which settles every
//! value above the threshold's bucket; a second collects the values of that bucket (or, when
//! it holds too many, counts their low 16 bits, which gives the exact threshold, and — when
//! only some of the values at the threshold are kept — counts them per block), and a last pass
//! collects the kept values and (against a plain base) measures the loss. Ties at the
//! threshold go to the lowest indices, as [`codec::encode`] keeps them: the arrays are byte for
//! byte the same. int4 selects its outliers with the same passes ([`top_k`]), which then also
//! give the min/max of the values not kept and how many each block keeps.

use std::path::Path;

use rayon::prelude::*;

use super::blocks::{BLOCK, Encoded, Inputs, group_len};
use super::codec::{self, EncodeOptions, MinMax, magnitude_key};
use super::error::DeltaError;
use super::spool::{Array, Spool};
use super::verify::{LossSums, loss_chunk};
use crate::formats::wdelta::ArrayDtype;

type Result<T, E = DeltaError> = std::result::Result<T, E>;

const BUCKETS: usize = 1 << 16;

/// The threshold's bucket is collected when it holds at most this many values (16 bytes each
/// held), else selected in it by counting.
pub(super) const MAX_CANDIDATES: u64 = 1 << 20;

#[cfg(test)]
thread_local! {
    /// A smaller [`MAX_CANDIDATES`], for the tests of counting in the threshold's bucket.
    pub(super) static CANDIDATES_CAP: std::cell::Cell<u64> = const { std::cell::Cell::new(MAX_CANDIDATES) };
}

fn max_candidates() -> u64 {
    #[cfg(test)]
    return CANDIDATES_CAP.get().min(MAX_CANDIDATES);
    #[cfg(not(test))]
    MAX_CANDIDATES
}

/// Bytes of records the last pass holds at once, at the tensor's average density.
const RECORDS_HELD: usize = 32 << 20;

/// Which values of a block are kept.
pub(super) enum Rule {
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
    let TopK { rule, .. } = top_k(inputs, &starts, k, false, None)?;
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

/// A tensor's delta read block by block (a block's start, then its pieces in order), by any
/// number of workers at once.
pub(super) trait BlockSource: Sync {
    /// Calls `each(piece, at)` over the block starting at `start`, piece by piece.
    fn block(&self, start: usize, each: &mut dyn FnMut(&[f32], usize)) -> Result<()>;
    /// Calls `each(piece, at)` over the elements `range`, piece by piece.
    fn range(
        &self,
        range: std::ops::Range<usize>,
        each: &mut dyn FnMut(&[f32], usize),
    ) -> Result<()>;
    /// The error of passes that read different values.
    fn changed(&self) -> DeltaError;
}

impl BlockSource for Inputs<'_> {
    fn block(&self, start: usize, each: &mut dyn FnMut(&[f32], usize)) -> Result<()> {
        let end = (start + BLOCK).min(self.len());
        self.with_delta(start..end, |d, _, _, _, at| each(d, at))
    }

    fn range(
        &self,
        range: std::ops::Range<usize>,
        each: &mut dyn FnMut(&[f32], usize),
    ) -> Result<()> {
        self.with_delta(range, |d, _, _, _, at| each(d, at))
    }

    fn changed(&self) -> DeltaError {
        Inputs::changed(self)
    }
}

/// The `k` largest magnitudes of a tensor read in blocks, ties to the lowest indices.
pub(super) struct TopK {
    pub(super) rule: Rule,
    /// With the rest: how many values each block keeps.
    pub(super) kept: Vec<u64>,
    /// With the rest: the min, max and NaN of the values not kept.
    pub(super) rest: Rest,
}

/// Min, max and whether a NaN was seen over some values, as `<` and `>` fold them (a zero
/// bound's sign is left to whoever needs it).
#[derive(Clone, Copy, Debug)]
pub(super) struct Rest {
    pub(super) lo: f32,
    pub(super) hi: f32,
    pub(super) nan: bool,
    /// Whether any value was seen.
    pub(super) any: bool,
}

impl Rest {
    const EMPTY: Rest = Rest {
        lo: f32::INFINITY,
        hi: f32::NEG_INFINITY,
        nan: false,
        any: false,
    };

    #[inline]
    fn add(&mut self, x: f32) {
        self.lo = if x < self.lo { x } else { self.lo };
        self.hi = if x > self.hi { x } else { self.hi };
        self.nan |= x.is_nan();
        self.any = true;
    }

    fn merge(&mut self, o: &Rest) {
        self.lo = if o.lo < self.lo { o.lo } else { self.lo };
        self.hi = if o.hi > self.hi { o.hi } else { self.hi };
        self.nan |= o.nan;
        self.any |= o.any;
    }
}

/// What the lanes of `lanes` saw, as one [`Rest`].
fn rest_of(lanes: &MinMax) -> Rest {
    let mut rest = Rest::EMPTY;
    for (lo, hi, nan) in lanes.lanes() {
        rest.merge(&Rest {
            lo,
            hi,
            nan,
            any: nan || lo <= hi,
        });
    }
    rest
}

/// Selects the `k` largest magnitudes of `src` (block starts `starts`) by radix selection on
/// their keys, as [`codec::encode`] keeps them. `with_rest` (int4) also gives how many values
/// each block keeps and the [`Rest`] of the others. Holds a few histograms, and at most
/// [`MAX_CANDIDATES`] values of the threshold's bucket. A `band` of buckets guessed to hold
/// the threshold's has its values collected by the first pass (while they are at most
/// [`MAX_CANDIDATES`]): when the guess holds, the second pass is not needed. Any band gives
/// the same result.
pub(super) fn top_k(
    src: &impl BlockSource,
    starts: &[usize],
    k: u64,
    with_rest: bool,
    band: Option<(u32, u32)>,
) -> Result<TopK> {
    let (mut high, mut banded) = first_pass(src, starts, with_rest, band)?;
    if band.is_some() && high.iter().sum::<u64>() < k {
        // The threshold is below the band, whose pass counted only what is at or above it.
        high = histogram(src, starts, |key| Some((key >> 16) as usize))?;
        banded = None;
    }
    let (bucket, above) = select(&high, k);
    let need = k - above;
    let b = bucket as u32;
    if high[bucket] <= max_candidates() {
        let (blocks, rest) = bucket_candidates(src, starts, b, with_rest, banded, band)?;
        return keep_in_bucket(src, b, need as usize, with_rest, &blocks, rest);
    }
    threshold_rule(src, starts, b, need, with_rest)
}

/// Each block's values in the high-bits bucket `b` (in order) and how many of its values lie
/// above it, with the [`Rest`] of those below (`with_rest`). From the first pass's band when
/// the band holds `b`, else by a pass over the blocks.
fn bucket_candidates(
    src: &impl BlockSource,
    starts: &[usize],
    b: u32,
    with_rest: bool,
    banded: Option<BandPass>,
    band: Option<(u32, u32)>,
) -> Result<(Vec<Banded>, Rest)> {
    let in_band = |(lo, hi): (u32, u32)| lo <= b && b <= hi;
    if let (Some((banded, below)), Some(band)) = (banded, band)
        && in_band(band)
    {
        // The band's values of each block, and how many were above it; the values below
        // the band are not outliers.
        let mut rest = below;
        let blocks = banded
            .into_iter()
            .map(|(found, above_band)| {
                let mut higher = above_band;
                let mut kept = Vec::new();
                for c in found {
                    match (c.1 >> 16).cmp(&b) {
                        std::cmp::Ordering::Greater => higher += 1,
                        std::cmp::Ordering::Equal => kept.push(c),
                        std::cmp::Ordering::Less => rest.add(c.2),
                    }
                }
                (kept, higher)
            })
            .collect();
        return Ok((blocks, rest));
    }
    let blocks = starts
        .par_iter()
        .map(|&s| {
            let (mut found, mut higher) = (Vec::new(), 0u64);
            let mut lanes = MinMax::EMPTY;
            src.block(s, &mut |d, at| {
                for (i, &x) in d.iter().enumerate() {
                    let key = magnitude_key(x);
                    if key >> 16 == b {
                        found.push((at + i, key, x));
                    }
                    higher += u64::from(key >> 16 > b);
                }
                if with_rest {
                    lanes.update_below_all(d, b << 16);
                }
            })?;
            Ok((found, higher, rest_of(&lanes)))
        })
        .collect::<Result<Vec<_>>>()?;
    let mut rest = Rest::EMPTY;
    let blocks = blocks
        .into_iter()
        .map(|(found, higher, below)| {
            rest.merge(&below);
            (found, higher)
        })
        .collect();
    Ok((blocks, rest))
}

/// The `need` largest of the bucket's candidates (ties kept in index order): the kept indices
/// and how many each block keeps.
fn keep_in_bucket(
    src: &impl BlockSource,
    b: u32,
    need: usize,
    with_rest: bool,
    blocks: &[Banded],
    mut rest: Rest,
) -> Result<TopK> {
    let total: usize = blocks.iter().map(|b| b.0.len()).sum();
    if total < need {
        return Err(src.changed());
    }
    let mut keys: Vec<u32> = blocks
        .iter()
        .flat_map(|b| b.0.iter().map(|&(_, key, _)| key))
        .collect();
    let (_, &mut threshold, _) = keys.select_nth_unstable_by(need - 1, |a, b| b.cmp(a));
    drop(keys);
    let above_threshold: usize = blocks
        .iter()
        .map(|b| b.0.iter().filter(|c| c.1 > threshold).count())
        .sum();
    let mut ties = need - above_threshold;
    let mut kept = Vec::with_capacity(need);
    let mut kept_per_block = Vec::with_capacity(blocks.len());
    for (found, higher) in blocks {
        let before = kept.len();
        for &(i, key, x) in found {
            if key > threshold || (key == threshold && ties > 0) {
                if key == threshold {
                    ties -= 1;
                }
                kept.push(i);
            } else if with_rest {
                rest.add(x);
            }
        }
        kept_per_block.push(higher + (kept.len() - before) as u64);
    }
    Ok(TopK {
        rule: Rule::Bucket { bucket: b, kept },
        kept: kept_per_block,
        rest,
    })
}

/// When bucket `b` holds more than [`MAX_CANDIDATES`] values: the exact threshold from a
/// histogram of its low 16 bits, and per block how many values at it are kept.
fn threshold_rule(
    src: &impl BlockSource,
    starts: &[usize],
    b: u32,
    need: u64,
    with_rest: bool,
) -> Result<TopK> {
    let low = histogram(src, starts, |key| {
        (key >> 16 == b).then_some((key & 0xffff) as usize)
    })?;
    let (lo, above_in_bucket) = select(&low, need);
    let threshold = (b << 16) | lo as u32;
    let ties = need - above_in_bucket;
    if ties == low[lo] && !with_rest {
        return Ok(TopK {
            rule: Rule::Threshold {
                threshold,
                budget: None,
            },
            kept: Vec::new(),
            rest: Rest::EMPTY,
        });
    }
    // Per block: its values above the threshold and at it, the rank among the block's values
    // at the threshold of its last positive and last negative one, and the values below it.
    let counts = starts
        .par_iter()
        .map(|&s| {
            let mut c = TieCount::default();
            let mut lanes = MinMax::EMPTY;
            src.block(s, &mut |d, _| {
                for &x in d {
                    let key = magnitude_key(x);
                    if key == threshold {
                        if x.is_sign_negative() {
                            c.last_negative = Some(c.at);
                        } else {
                            c.last_positive = Some(c.at);
                        }
                        c.at += 1;
                    } else {
                        c.above += u64::from(key > threshold);
                    }
                }
                if with_rest {
                    lanes.update_below_all(d, threshold);
                }
            })?;
            Ok((c, rest_of(&lanes)))
        })
        .collect::<Result<Vec<_>>>()?;
    if counts.iter().map(|c| c.0.at).sum::<u64>() != low[lo] {
        return Err(src.changed());
    }
    // Only the first `ties` values at the threshold are kept (in index order).
    let mut left = ties;
    let mut seen = 0u64;
    let mut budget = Vec::with_capacity(counts.len());
    let mut kept = Vec::with_capacity(counts.len());
    let mut rest = Rest::EMPTY;
    let at_threshold = f32::from_bits(threshold);
    for (c, below) in &counts {
        let take = c.at.min(left);
        left -= take;
        budget.push(take);
        kept.push(c.above + take);
        rest.merge(below);
        // A value at the threshold left out: its rank over the tensor is `ties` or more.
        if c.last_positive.is_some_and(|r| seen + r >= ties) {
            rest.add(at_threshold);
        }
        if c.last_negative.is_some_and(|r| seen + r >= ties) {
            rest.add(-at_threshold);
        }
        seen += c.at;
    }
    Ok(TopK {
        rule: Rule::Threshold {
            threshold,
            budget: (ties != low[lo]).then_some(budget),
        },
        kept,
        rest,
    })
}

/// A value of the threshold's bucket: its index, key and value.
type Candidate = (usize, u32, f32);

/// One block's values relative to the threshold (see [`top_k`]).
#[derive(Default)]
struct TieCount {
    above: u64,
    /// Values at the threshold seen so far.
    at: u64,
    last_positive: Option<u64>,
    last_negative: Option<u64>,
}

/// A block's values in the band (in order) and how many were above it.
type Banded = (Vec<Candidate>, u64);

/// What the first pass gives of a band: each block's values in it, and the [`Rest`] of those
/// below it.
type BandPass = (Vec<Banded>, Rest);

/// The first pass: the counts of the keys' high 16 bits (with a band, of those at or above
/// it only) and, with a band, each block's [`Banded`] values and (`with_rest`) the [`Rest`] of
/// the values below the band (None when the band held more than [`MAX_CANDIDATES`]).
fn first_pass(
    src: &impl BlockSource,
    starts: &[usize],
    with_rest: bool,
    band: Option<(u32, u32)>,
) -> Result<(Vec<u64>, Option<BandPass>)> {
    let Some((lo, hi)) = band else {
        let hist = histogram(src, starts, |key| Some((key >> 16) as usize))?;
        return Ok((hist, None));
    };
    let collected = std::sync::atomic::AtomicU64::new(0);
    let cap = max_candidates();
    let over = || collected.load(std::sync::atomic::Ordering::Relaxed) > cap;
    let limit = lo << 16;
    let (hist, mut blocks, lanes) = starts
        .par_iter()
        .enumerate()
        .try_fold(
            || (vec![0u64; BUCKETS], Vec::new(), MinMax::EMPTY),
            |(mut hist, mut blocks, mut lanes), (block, &s)| {
                let (mut found, mut above_band) = (Vec::new(), 0u64);
                let collect = !over();
                // A value at or above the band: counted, and collected when in it.
                let mut take = |i: usize, x: f32| {
                    let key = magnitude_key(x);
                    let b = key >> 16;
                    if b >= lo {
                        hist[b as usize] += 1;
                        if b > hi {
                            above_band += 1;
                        } else if collect {
                            found.push((i, key, x));
                        }
                    }
                };
                let mut reached = Vec::new();
                src.block(s, &mut |d, at| {
                    // Most values are below the band: eight at a time, in a pass compiled for
                    // AVX2, then those eights that reached it one by one.
                    scan_eights(d, limit, with_rest, &mut lanes, &mut reached);
                    for &c in &reached {
                        let c = c as usize * 8;
                        for (j, &x) in d[c..c + 8].iter().enumerate() {
                            take(at + c + j, x);
                        }
                    }
                    let tail = d.len() - d.len() % 8;
                    if with_rest {
                        lanes.update_below_all(&d[tail..], limit);
                    }
                    for (j, &x) in d[tail..].iter().enumerate() {
                        take(at + tail + j, x);
                    }
                })?;
                if collect {
                    let len = found.len() as u64;
                    collected.fetch_add(len, std::sync::atomic::Ordering::Relaxed);
                    blocks.push((block, found, above_band));
                }
                Ok::<_, DeltaError>((hist, blocks, lanes))
            },
        )
        .map(|r| r.map(|(h, b, l)| (h, b, rest_of(&l))))
        .try_reduce(
            || (vec![0u64; BUCKETS], Vec::new(), Rest::EMPTY),
            |(mut a, mut x, mut r), (b, y, s)| {
                a.iter_mut().zip(&b).for_each(|(a, b)| *a += b);
                x.extend(y);
                r.merge(&s);
                Ok((a, x, r))
            },
        )?;
    if over() || blocks.len() != starts.len() {
        return Ok((hist, None));
    }
    blocks.sort_unstable_by_key(|b| b.0);
    let banded = blocks.into_iter().map(|(_, f, a)| (f, a)).collect();
    Ok((hist, Some((banded, lanes))))
}

avx2_twin! {
    /// The first pass's scan of a piece, eight values at a time (the tail of fewer is the
    /// caller's): with `with_rest`, the values below `limit` go to `lanes`; `reached` is set to
    /// the eights (their index in the piece / 8) where some value's key reached `limit`.
    fn scan_eights(d: &[f32], limit: u32, with_rest: bool, lanes: &mut MinMax, reached: &mut Vec<u32>) {
        reached.clear();
        for (c, eight) in d.chunks_exact(8).enumerate() {
            let eight: &[f32; 8] = eight.try_into().expect("8 values");
            let hit = if with_rest {
                lanes.update_below(eight, limit)
            } else {
                eight
                    .iter()
                    .fold(false, |r, &x| r | (magnitude_key(x) >= limit))
            };
            if hit {
                reached.push(c as u32);
            }
        }
    }
}

/// Counts of `slot(key)` over the delta's keys, block by block over the workers.
fn histogram(
    src: &impl BlockSource,
    starts: &[usize],
    slot: impl Fn(u32) -> Option<usize> + Sync,
) -> Result<Vec<u64>> {
    starts
        .par_iter()
        .try_fold(
            || vec![0u64; BUCKETS],
            |mut hist, &s| {
                src.block(s, &mut |d, _| {
                    for &x in d {
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
pub(super) struct Keeper<'r> {
    rule: &'r Rule,
    /// Rule::Bucket: the next kept element of the bucket.
    next: usize,
    /// Rule::Threshold: values at the threshold this block may still keep.
    budget: u64,
}

impl<'r> Keeper<'r> {
    pub(super) fn new(rule: &'r Rule, block: usize, start: usize) -> Keeper<'r> {
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

    /// No value whose key is below this one is kept.
    pub(super) fn lowest_kept_key(&self) -> u32 {
        match self.rule {
            Rule::Bucket { bucket, .. } => bucket << 16,
            Rule::Threshold { threshold, .. } => *threshold,
        }
    }

    #[inline]
    pub(super) fn keeps(&mut self, i: usize, x: f32) -> bool {
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
