//! int4 `create` of a large tensor in blocks (see `blocks.rs`): a first pass finds the
//! outliers' candidates and the range of the others, a second quantizes, packs and (against a
//! plain base) measures the loss with the values it just read. The arrays are byte for byte
//! those of [`codec::encode`] over the whole delta (`codec`'s block functions say how), and
//! the loss sums those of [`super::verify::tensor_loss_sums`].

use std::path::Path;

use rayon::prelude::*;

use super::blocks::{BLOCK, Encoded, Inputs, group_len};
use super::codec::{self, EncodeOptions, Int4Settled, RangeDecoder};
use super::error::DeltaError;
use super::spool::{Array, Spool, held};
use super::verify::{LossSums, loss_chunk};
use crate::formats::wdelta::{ArrayDtype, ArrayRef, TensorArrays};

type Result<T, E = DeltaError> = std::result::Result<T, E>;

/// The int4 arrays of the tensor and, against a plain base, its loss sums.
pub(super) fn encode(inputs: &Inputs<'_>, enc: &EncodeOptions, spool_dir: &Path) -> Encoded {
    let n = inputs.len();
    let (starts, block_of) = inputs.blocks();
    // The guess of the outliers' key, from runs of values sampled across the tensor.
    let mut sample = Vec::new();
    for run in codec::int4_sample_runs(n) {
        inputs.with_delta(run, |d, _, _, _, _| sample.extend_from_slice(d))?;
    }
    let lower = codec::int4_guess(&sample, n, enc.outlier_fraction);
    let scans = starts
        .par_iter()
        .map(|&s| {
            let mut scan = codec::Int4Scan::new();
            inputs.with_delta(block_of(s), |d, _, _, _, at| {
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
                    inputs.with_delta(block_of(s), |d, _, _, _, at| radix.add(d, at))?;
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
                inputs.with_delta(block_of(s), |d, _, _, _, at| {
                    exact.add(d, at, &outliers);
                })?;
            }
            exact.finish()
        }
    };
    let settled = Int4Settled::new(outliers, values, bounds, enc.version);
    let arrays = settled.head_arrays(n);
    let entry = codec::entry_for(&inputs.base.tensors[inputs.name].shape, enc, None);
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
    let measured = inputs.measured();
    let elem = inputs.elem()?;
    // Joined group by group, then spooled but for the last byte (the next block's first
    // nibble may go in it).
    let mut packed: Vec<u8> = Vec::new();
    let mut spool = Spool::new(spool_dir);
    let mut sums = LossSums::default();
    for group in starts.chunks(group_len()) {
        let blocks = group
            .par_iter()
            .map(|&s| {
                let mut bytes = Vec::with_capacity(BLOCK / 2 + 1);
                let mut sums = LossSums::starting_at(s);
                let mut raw = Vec::new();
                let from = settled.first_nibble(s) / 2;
                inputs.with_delta(block_of(s), |d, b, f, r, at| {
                    settled.pack_append(d, at, &mut bytes);
                    if measured {
                        // What `apply` rebuilds from these bytes, against the fine-tune.
                        let window = settled.first_nibble(at) / 2;
                        decoder.decode(at, &bytes[window - from..], window, d);
                        loss_chunk(elem, b, d, r, f, &mut raw, &mut sums);
                    }
                })?;
                Ok((bytes, sums))
            })
            .collect::<Result<Vec<_>>>()?;
        for (&s, (bytes, block_sums)) in group.iter().zip(blocks) {
            codec::int4_join(&mut packed, &bytes, settled.first_nibble(s) % 2 == 1);
            sums.absorb(&block_sums);
        }
        if let Some(done) = packed.len().checked_sub(1) {
            spool.push(&packed[..done])?;
            packed.drain(..done);
        }
    }
    spool.push(&packed)?;
    let mut arrays = held(arrays);
    arrays.push(Array::Spooled {
        field: "packed",
        dtype: ArrayDtype::Uint8,
        shape: vec![spool.len()],
        data: spool,
    });
    Ok((arrays, measured.then_some(sums)))
}
