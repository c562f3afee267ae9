//! quantized `create` of a large tensor in blocks (see `blocks.rs`): a first pass computes the
//! rows' scales over groups of whole rows (a row longer than a block is summed in halves, as
//! numpy's pairwise summation splits it), a second packs the signs block by block and
//! (against a plain base) measures the loss. The arrays are byte for byte those of
//! [`codec::encode`] over the whole delta.

use std::path::Path;

use half::f16;
use rayon::prelude::*;

use super::blocks::{BLOCK, Encoded, Inputs, group_len};
use super::codec::{self, EncodeOptions, RangeDecoder};
use super::error::DeltaError;
use super::spool::{Array, Spool};
use super::verify::{LossSums, loss_chunk};
use crate::formats::wdelta::{
    ArrayDtype, ArrayRef, OwnedArray, TensorArrays, quantized_cols, quantized_rows,
};

type Result<T, E = DeltaError> = std::result::Result<T, E>;

thread_local! {
    /// A worker's magnitudes of the delta over a group of rows (at most a block).
    static MAGNITUDES: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The quantized arrays of the tensor and, against a plain base, its loss sums.
pub(super) fn encode(inputs: &Inputs<'_>, enc: &EncodeOptions, spool_dir: &Path) -> Encoded {
    let shape = &inputs.base.tensors[inputs.name].shape;
    let (rows, cols) = (
        quantized_rows(shape) as usize,
        quantized_cols(shape) as usize,
    );
    let scales = row_scales(inputs, rows, cols)?;
    let scales: Vec<u8> = scales
        .iter()
        .flat_map(|s| s.to_bits().to_le_bytes())
        .collect();
    let entry = codec::entry_for(shape, enc, None);
    let decoder = RangeDecoder::new(
        &entry,
        &TensorArrays {
            fields: vec![
                ArrayRef {
                    dtype: ArrayDtype::Float16,
                    data: &scales,
                },
                ArrayRef {
                    dtype: ArrayDtype::Uint8,
                    data: &[],
                },
            ],
        },
    );
    let measured = inputs.measured();
    let elem = inputs.elem()?;
    let (starts, block_of) = inputs.blocks();
    let mut packed = Spool::new(spool_dir);
    let mut sums = LossSums::default();
    for group in starts.chunks(group_len()) {
        let blocks = group
            .par_iter()
            .map(|&s| {
                let mut bytes = Vec::with_capacity(BLOCK / 8);
                let mut sums = LossSums::starting_at(s);
                let mut raw = Vec::new();
                inputs.with_delta(block_of(s), |d, b, f, r, at| {
                    // Pieces start at multiples of 8: their bytes are whole.
                    let from = bytes.len();
                    bytes.extend_from_slice(&codec::pack_signs(d));
                    if measured {
                        decoder.decode(at, &bytes[from..], at / 8, d);
                        loss_chunk(elem, b, d, r, f, &mut raw, &mut sums);
                    }
                })?;
                Ok((bytes, sums))
            })
            .collect::<Result<Vec<_>>>()?;
        for (bytes, block_sums) in blocks {
            packed.push(&bytes)?;
            sums.absorb(&block_sums);
        }
    }
    let arrays = vec![
        Array::Held(OwnedArray {
            field: "scales",
            dtype: ArrayDtype::Float16,
            shape: vec![rows as u64],
            data: scales,
        }),
        Array::Spooled {
            field: "packed_signs",
            dtype: ArrayDtype::Uint8,
            shape: vec![packed.len()],
            data: packed,
        },
    ];
    Ok((arrays, measured.then_some(sums)))
}

/// Each row's scale: the float16 mean of its magnitudes, the sum numpy's pairwise summation.
fn row_scales(inputs: &Inputs<'_>, rows: usize, cols: usize) -> Result<Vec<f16>> {
    let scale = |sum: f32| f16::from_f32((f64::from(sum) / cols as f64) as f32);
    if cols > BLOCK {
        // Rows longer than a block: each summed in halves down to a block.
        return (0..rows)
            .map(|r| Ok(scale(pairwise_sum_of(inputs, r * cols, cols)?)))
            .collect();
    }
    let per_group = BLOCK / cols;
    let groups: Vec<usize> = (0..rows).step_by(per_group).collect();
    let sums = groups
        .par_iter()
        .map(|&first| {
            let last = (first + per_group).min(rows);
            MAGNITUDES.with(|cell| {
                let mut abs = cell.borrow_mut();
                abs.clear();
                inputs.with_delta(first * cols..last * cols, |d, _, _, _, _| {
                    abs.extend(d.iter().map(|x| x.abs()));
                })?;
                Ok(abs.chunks_exact(cols).map(codec::pairwise_sum).collect())
            })
        })
        .collect::<Result<Vec<Vec<f32>>>>()?;
    Ok(sums.into_iter().flatten().map(scale).collect())
}

/// [`codec::pairwise_sum`] of the magnitudes of the delta's elements `start..start + len`,
/// split as it splits them, the parts of at most a block read and summed whole.
fn pairwise_sum_of(inputs: &Inputs<'_>, start: usize, len: usize) -> Result<f32> {
    if len <= BLOCK {
        return MAGNITUDES.with(|cell| {
            let mut abs = cell.borrow_mut();
            abs.clear();
            inputs.with_delta(start..start + len, |d, _, _, _, _| {
                abs.extend(d.iter().map(|x| x.abs()));
            })?;
            Ok(codec::pairwise_sum(&abs))
        });
    }
    let mut half = len / 2;
    half -= half % 8;
    let (a, b) = rayon::join(
        || pairwise_sum_of(inputs, start, half),
        || pairwise_sum_of(inputs, start + half, len - half),
    );
    Ok(a? + b?)
}
