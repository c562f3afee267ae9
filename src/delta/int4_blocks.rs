//! int4 `create` of a large tensor in blocks of [`BLOCK`] elements, spread over the workers:
//! the memory held is a few blocks per worker whatever the tensor's size, and a tensor larger
//! than the rest keeps every core busy. The delta is computed twice from the inputs (base and
//! fine-tune read block by block): a first pass finds the outliers' candidates and the range of
//! the others, a second quantizes, packs and measures the loss with the base and fine-tune
//! values it just read. The arrays are byte for byte those of [`codec::encode`] over the whole
//! delta (`codec`'s block functions say how), and the loss sums those of
//! [`super::verify::tensor_loss_sums`].

use rayon::prelude::*;

use super::codec::{self, EncodeOptions, Int4Settled, RangeDecoder};
use super::error::DeltaError;
use super::model::{Elem, Model};
use super::verify::{LOSS_BLOCK, LossSums, loss_chunk};
use crate::formats::wdelta::{ArrayDtype, ArrayRef, OwnedArray, TensorArrays};

type Result<T, E = DeltaError> = std::result::Result<T, E>;

/// Elements per block: one block of the loss sums, so that their bits do not depend on the cut.
const BLOCK: usize = LOSS_BLOCK;

/// Tensors of at least this many elements are encoded in blocks.
pub(super) const BLOCKED_MIN: usize = 1 << 22;

thread_local! {
    /// A worker's buffers for one block: base, fine-tune, delta, rebuilt values.
    static BUFFERS: std::cell::RefCell<[Vec<f32>; 4]> = const {
        std::cell::RefCell::new([Vec::new(), Vec::new(), Vec::new(), Vec::new()])
    };
}

/// Whether tensor `name` is encoded here: int4 against a plain base, a float tensor of at least
/// [`BLOCKED_MIN`] elements.
pub(super) fn applies(base: &Model, name: &str, enc: &EncodeOptions) -> bool {
    let t = &base.tensors[name];
    let n = t.n_elements();
    enc.strategy == crate::formats::wdelta::Strategy::Int4
        && t.elem.is_some_and(Elem::is_float)
        && n >= BLOCKED_MIN
        && codec::int4_blocks_apply(n, enc.outlier_fraction)
}

/// The int4 arrays of tensor `name` and its loss sums.
pub(super) fn encode_measured(
    base: &Model,
    ft: &Model,
    name: &str,
    enc: &EncodeOptions,
) -> Result<(Vec<OwnedArray>, LossSums)> {
    let n = base.tensors[name].n_elements();
    let starts: Vec<usize> = (0..n).step_by(BLOCK).collect();
    let block_of = |s: usize| s..(s + BLOCK).min(n);
    // The guess of the outliers' key, from runs of values sampled across the tensor.
    let mut sample = Vec::new();
    for run in codec::int4_sample_runs(n) {
        with_delta(base, ft, name, run, |d, _, _, _, _| {
            sample.extend_from_slice(d);
        })?;
    }
    let lower = codec::int4_guess(&sample, n, enc.outlier_fraction);
    let scans = starts
        .par_iter()
        .map(|&s| {
            let mut scan = codec::Int4Scan::new();
            with_delta(base, ft, name, block_of(s), |d, _, _, _, at| {
                codec::int4_scan(&mut scan, d, at, lower);
            })?;
            Ok(scan)
        })
        .collect::<Result<Vec<_>>>()?;
    let (outliers, values, bounds) = match codec::int4_select(scans, n, enc.outlier_fraction) {
        Some(selected) => selected,
        None => {
            // The guess was too high: select over everything, pass by pass.
            let mut radix = codec::Int4Radix::new(n, enc.outlier_fraction);
            loop {
                for &s in &starts {
                    with_delta(base, ft, name, block_of(s), |d, _, _, _, at| {
                        radix.add(d, at);
                    })?;
                }
                if !radix.end_pass() {
                    break;
                }
            }
            (radix.outliers, radix.outlier_values, None)
        }
    };
    let bounds = match bounds {
        Some(b) => b,
        None => {
            let mut exact = codec::Int4ExactBounds::new();
            for &s in &starts {
                with_delta(base, ft, name, block_of(s), |d, _, _, _, at| {
                    exact.add(d, at, &outliers);
                })?;
            }
            exact.finish()
        }
    };
    let settled = Int4Settled::new(outliers, values, bounds, enc.version);
    let mut arrays = settled.head_arrays(n);
    let entry = codec::entry_for(&base.tensors[name].shape, enc, None);
    let mut fields: Vec<ArrayRef<'_>> = arrays
        .iter()
        .map(|a| ArrayRef {
            dtype: a.dtype,
            data: &a.data,
        })
        .collect();
    fields.push(ArrayRef {
        dtype: ArrayDtype::Uint8,
        data: &[],
    });
    let decoder = RangeDecoder::new(&entry, &TensorArrays { fields });
    let elem = base.elem(name, &base.tensors[name])?;
    let blocks = starts
        .par_iter()
        .map(|&s| {
            let mut bytes = Vec::with_capacity(BLOCK / 2 + 1);
            let mut sums = LossSums::starting_at(s);
            let mut raw = Vec::new();
            let from = settled.first_nibble(s) / 2;
            with_delta(base, ft, name, block_of(s), |d, b, f, r, at| {
                settled.pack_append(d, at, &mut bytes);
                // What `apply` rebuilds from these bytes, against the fine-tune.
                let window = settled.first_nibble(at) / 2;
                decoder.decode(at, &bytes[window - from..], window, d);
                loss_chunk(elem, b, d, r, f, &mut raw, &mut sums);
            })?;
            Ok((bytes, sums))
        })
        .collect::<Result<Vec<_>>>()?;
    let mut packed: Vec<u8> = Vec::with_capacity(n.div_ceil(2));
    let mut sums = LossSums::default();
    for (&s, (bytes, block_sums)) in starts.iter().zip(blocks) {
        codec::int4_join(&mut packed, &bytes, settled.first_nibble(s) % 2 == 1);
        sums.absorb(&block_sums);
    }
    arrays.push(OwnedArray {
        field: "packed",
        dtype: ArrayDtype::Uint8,
        shape: vec![packed.len() as u64],
        data: packed,
    });
    Ok((arrays, sums))
}

/// Reads elements `at..at + b.len()` of tensor `name` from the base into `b` and the
/// fine-tune into `f`.
fn read_pair(
    base: &Model,
    ft: &Model,
    name: &str,
    at: usize,
    b: &mut [f32],
    f: &mut [f32],
) -> Result<()> {
    base.read_f32_into(name, &base.tensors[name], at, b)?;
    let tf = ft
        .tensors
        .get(name)
        .ok_or_else(|| DeltaError::TensorNotInModel {
            model: ft.path.clone(),
            tensor: name.to_owned(),
        })?;
    ft.read_f32_into(name, tf, at, f)
}

/// Elements read and worked on per step: the buffers of a step stay in the core's cache
/// between the passes over them.
const PIECE: usize = 1 << 15;

/// Calls `work(delta, base, fine-tune, scratch, start)` with the values of elements `range` of
/// tensor `name`, piece by piece from `start`, in this worker's buffers.
fn with_delta(
    base: &Model,
    ft: &Model,
    name: &str,
    range: std::ops::Range<usize>,
    mut work: impl FnMut(&mut [f32], &[f32], &[f32], &mut [f32], usize),
) -> Result<()> {
    BUFFERS.with(|cell| {
        let mut bufs = cell.borrow_mut();
        for v in bufs.iter_mut() {
            v.resize(PIECE, 0.0);
        }
        let [b, f, d, r] = &mut *bufs;
        for at in range.clone().step_by(PIECE) {
            let len = PIECE.min(range.end - at);
            let (b, f, d, r) = (&mut b[..len], &mut f[..len], &mut d[..len], &mut r[..len]);
            read_pair(base, ft, name, at, b, f)?;
            codec::subtract_chunk(Some(b), f, d);
            work(d, b, f, r, at);
        }
        Ok(())
    })
}
