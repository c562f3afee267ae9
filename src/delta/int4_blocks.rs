//! int4 `create` of a large tensor in blocks (see `blocks.rs`). The outliers are the `k`
//! largest magnitudes, selected by radix counting as sparse selects its kept values
//! ([`sparse_blocks::top_k`], which also gives the min/max of the other values and how many
//! outliers each block has; a band of buckets guessed from a sample usually saves its second
//! pass); a last pass finds each block's outliers again as it reads it,
//! quantizes and packs the others and (against a plain base) measures the loss with the values
//! it just read. The outliers' records and `packed` go to spools as they are produced, so what
//! is held does not follow the tensor, whatever the outlier fraction. The arrays are byte for
//! byte those of [`codec::encode`] over the whole delta, and the loss sums those of
//! [`super::verify::tensor_loss_sums`].

use std::path::Path;

use half::f16;
use rayon::prelude::*;

use super::blocks::{BLOCK, Encoded, Inputs, group_len};
use super::codec::{self, EncodeOptions, Int4ExactBounds, Int4Settled};
use super::error::DeltaError;
use super::sparse_blocks::{self, BlockSource, Keeper, TopK, top_k};
use super::spool::{Array, Spool, held};
use super::verify::{LossSums, loss_chunk};
use crate::formats::wdelta::ArrayDtype;

type Result<T, E = DeltaError> = std::result::Result<T, E>;

/// The int4 arrays of the tensor and, against a plain base, its loss sums.
pub(super) fn encode(inputs: &Inputs<'_>, enc: &EncodeOptions, spool_dir: &Path) -> Encoded {
    let n = inputs.len();
    let (starts, _) = inputs.blocks();
    let (top, settled) = settle(inputs, &starts, n, enc)?;
    let measured = inputs.measured();
    let elem = inputs.elem()?;
    let pairs = settled.pairs();
    let wide = settled.wide(n);
    // Outliers before each block.
    let before = outliers_before(&top.kept);
    let mut spools = Spools::new(spool_dir);
    let mut sums = LossSums::default();
    let numbered: Vec<(usize, usize)> = starts.iter().copied().enumerate().collect();
    // A group's records are held until they go to the spools: as many blocks as keep about
    // RECORDS_HELD bytes (at least two a worker).
    let k = codec::int4_outliers(n as u64, enc.outlier_fraction) as usize;
    let per_block = BLOCK / 2 + (10 * k).div_ceil(starts.len().max(1));
    let workers = 2 * rayon::current_num_threads();
    let group = (RECORDS_HELD / per_block).clamp(workers, group_len().max(workers));
    for group in numbered.chunks(group) {
        let blocks = group
            .par_iter()
            .map(|&(block, s)| {
                let mut packer = BlockPacker::new(&top, &settled, &pairs, wide, block, s, &before);
                let mut sums = LossSums::starting_at(s);
                let mut raw = Vec::new();
                inputs.with_delta(s..(s + BLOCK).min(n), |d, b, f, r, at| {
                    packer.piece(d, at, measured);
                    if measured {
                        loss_chunk(elem, b, d, r, f, &mut raw, &mut sums);
                    }
                })?;
                Ok((packer.out, sums))
            })
            .collect::<Result<Vec<_>>>()?;
        for (&(block, s), (out, block_sums)) in group.iter().zip(blocks) {
            sums.absorb(&block_sums);
            let odd = settled.first_nibble(s, before[block]) % 2 == 1;
            spools.absorb(out, odd)?;
        }
    }
    let (arrays, written) = spools.finish(&settled, wide)?;
    if written != k {
        // The counts of the first passes do not hold for the last one.
        return Err(inputs.changed());
    }
    Ok((arrays, measured.then_some(sums)))
}

/// The outliers' selection and the quantization parameters of a tensor of `n` values, from
/// passes over its blocks.
pub(super) fn settle(
    src: &impl BlockSource,
    starts: &[usize],
    n: usize,
    enc: &EncodeOptions,
) -> Result<(TopK, Int4Settled)> {
    let k = codec::int4_outliers(n as u64, enc.outlier_fraction);
    let top = top_k(src, starts, k, true, band_guess(src, n, k)?)?;
    let rest = top.rest;
    let bounds = if !rest.any {
        None
    } else if rest.nan || (rest.lo != 0.0 && rest.hi != 0.0) {
        Some((rest.lo, rest.hi, rest.nan))
    } else {
        // A zero bound: its sign is that of encode's own pass, whose lanes restart after
        // each outlier (a pass in order).
        let mut exact = Int4ExactBounds::new();
        for (block, &s) in starts.iter().enumerate() {
            let mut keeper = Keeper::new(&top.rule, block, s);
            src.block(s, &mut |d, at| exact.add(d, at, |i, x| keeper.keeps(i, x)))?;
        }
        Some(exact.finish())
    };
    Ok((top, Int4Settled::new(bounds, enc.version)))
}

#[cfg(test)]
thread_local! {
    /// Whether the band is guessed (the tests select without it too).
    pub(super) static BAND_GUESS: std::cell::Cell<bool> = const { std::cell::Cell::new(true) };
}

/// Values sampled to guess the threshold's bucket: runs of 64 spread evenly (a few reads,
/// where single values would be a read each).
const SAMPLES: usize = 1 << 14;

/// The buckets of the keys (their high 16 bits) that hold the `k`-th largest of `n` with a wide
/// margin, guessed from a sample; None when the band would hold too many values to save a pass.
fn band_guess(src: &impl BlockSource, n: usize, k: u64) -> Result<Option<(u32, u32)>> {
    const RUN: usize = 64;
    #[cfg(test)]
    if !BAND_GUESS.get() {
        return Ok(None);
    }
    if n < 4 * SAMPLES {
        return Ok(None);
    }
    let runs = SAMPLES / RUN;
    let step = n / runs;
    let mut keys = Vec::with_capacity(SAMPLES);
    for r in 0..runs {
        src.range(r * step..r * step + RUN, &mut |d, _| {
            keys.extend(d.iter().map(|&x| codec::magnitude_key(x)));
        })?;
    }
    keys.sort_unstable_by(|a, b| b.cmp(a));
    // The threshold's expected rank in the sample, and 4 standard deviations and 2 more
    // either side.
    let p = k as f64 / n as f64;
    let rank = p * SAMPLES as f64;
    let margin = 4.0 * (rank * (1.0 - p)).sqrt() + 2.0;
    let top = (rank - margin).max(0.0) as usize;
    let bottom = ((rank + margin) as usize).min(SAMPLES - 1);
    // The band's share of the tensor, at most: its values are held.
    let share = (bottom - top + 1) as f64 / SAMPLES as f64;
    if share * n as f64 > sparse_blocks::MAX_CANDIDATES as f64 {
        return Ok(None);
    }
    Ok(Some((keys[bottom] >> 16, keys[top] >> 16)))
}

/// How many outliers are before each block.
fn outliers_before(kept: &[u64]) -> Vec<usize> {
    kept.iter()
        .scan(0usize, |seen, &k| {
            let before = *seen;
            *seen += k as usize;
            Some(before)
        })
        .collect()
}

/// One block's share of the records.
#[derive(Default)]
pub(super) struct BlockOut {
    /// The outliers' indices (int64 or int32) and float16 values, as in the file.
    pub(super) idx: Vec<u8>,
    pub(super) vals: Vec<u8>,
    /// `packed`'s bytes from the one holding the block's first nibble.
    pub(super) packed: Vec<u8>,
}

/// Packs one block, piece by piece in order, finding its outliers as it goes.
pub(super) struct BlockPacker<'a> {
    settled: &'a Int4Settled,
    pairs: &'a [[f32; 2]; 256],
    keeper: Keeper<'a>,
    wide: bool,
    /// Outliers before the next piece, and `packed`'s first byte of the block.
    seen: usize,
    from: usize,
    inner: Vec<usize>,
    vals: Vec<f32>,
    pub(super) out: BlockOut,
}

impl<'a> BlockPacker<'a> {
    /// For block number `block`, starting at element `start`; `before` the outliers before
    /// each block.
    pub(super) fn new(
        top: &'a TopK,
        settled: &'a Int4Settled,
        pairs: &'a [[f32; 2]; 256],
        wide: bool,
        block: usize,
        start: usize,
        before: &[usize],
    ) -> BlockPacker<'a> {
        let seen = before[block];
        BlockPacker {
            settled,
            pairs,
            keeper: Keeper::new(&top.rule, block, start),
            wide,
            seen,
            from: settled.first_nibble(start, seen) / 2,
            inner: Vec::new(),
            vals: Vec::new(),
            out: BlockOut {
                packed: Vec::with_capacity(BLOCK / 2 + 1),
                ..BlockOut::default()
            },
        }
    }

    /// Keeps element `i` of value `x` as an outlier if it is one.
    #[inline]
    fn consider(&mut self, i: usize, x: f32) {
        if !self.keeper.keeps(i, x) {
            return;
        }
        self.inner.push(i);
        let v = f16::from_f32(x);
        self.vals.push(v.to_f32());
        if self.wide {
            self.out.idx.extend_from_slice(&(i as i64).to_le_bytes());
        } else {
            self.out.idx.extend_from_slice(&(i as i32).to_le_bytes());
        }
        self.out.vals.extend_from_slice(&v.to_bits().to_le_bytes());
    }

    /// Packs the next piece, starting at element `at`, and its outliers; with `decode`, then
    /// writes into `d` what `apply` rebuilds from these bytes.
    pub(super) fn piece(&mut self, d: &mut [f32], at: usize, decode: bool) {
        let nibble = self.settled.first_nibble(at, self.seen);
        self.inner.clear();
        self.vals.clear();
        // Most values are below any kept one: eight at a time.
        let lowest = self.keeper.lowest_kept_key();
        let mut from = 0;
        for eight in d.chunks(8) {
            let reached = eight
                .iter()
                .fold(false, |r, &x| r | (codec::magnitude_key(x) >= lowest));
            if reached {
                for (j, &x) in eight.iter().enumerate() {
                    self.consider(at + from + j, x);
                }
            }
            from += eight.len();
        }
        self.seen += self.inner.len();
        self.settled
            .pack_append(d, at, nibble, &self.inner, &mut self.out.packed);
        if decode {
            let window = nibble / 2;
            codec::int4_decode_range(
                self.pairs,
                self.settled.all_positions(),
                &self.inner,
                &self.vals,
                at,
                nibble - 2 * window,
                &self.out.packed[window - self.from..],
                d,
            );
        }
    }
}

/// The records of the tensor as they are produced: beyond a few MiB, not held.
struct Spools {
    idx: Spool,
    vals: Spool,
    packed: Spool,
    /// `packed`'s last byte, which the next block's first nibble may share.
    last: Vec<u8>,
}

impl Spools {
    fn new(dir: &Path) -> Spools {
        Spools {
            idx: Spool::new(dir),
            vals: Spool::new(dir),
            packed: Spool::new(dir),
            last: Vec::new(),
        }
    }

    /// Appends the next block's records; `odd` when its first nibble is odd.
    fn absorb(&mut self, out: BlockOut, odd: bool) -> Result<()> {
        self.idx.push(&out.idx)?;
        self.vals.push(&out.vals)?;
        codec::int4_join(&mut self.last, &out.packed, odd);
        if let Some(done) = self.last.len().checked_sub(1) {
            self.packed.push(&self.last[..done])?;
            self.last.drain(..done);
        }
        Ok(())
    }

    /// The tensor's arrays, and how many outliers they hold.
    fn finish(mut self, settled: &Int4Settled, wide: bool) -> Result<(Vec<Array>, usize)> {
        self.packed.push(&self.last)?;
        let (width, dtype) = if wide {
            (8, ArrayDtype::Int64)
        } else {
            (4, ArrayDtype::Int32)
        };
        let count = self.idx.len() / width;
        let mut arrays = vec![
            Array::Spooled {
                field: "outlier_idx",
                dtype,
                shape: vec![count],
                data: self.idx,
            },
            Array::Spooled {
                field: "outlier_vals",
                dtype: ArrayDtype::Float16,
                shape: vec![count],
                data: self.vals,
            },
        ];
        arrays.extend(held(settled.params_arrays()));
        arrays.push(Array::Spooled {
            field: "packed",
            dtype: ArrayDtype::Uint8,
            shape: vec![self.packed.len()],
            data: self.packed,
        });
        Ok((arrays, count as usize))
    }
}

/// Bytes of records the last pass holds at once.
const RECORDS_HELD: usize = 32 << 20;
