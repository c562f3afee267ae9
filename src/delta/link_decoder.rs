//! Decoders of a lineage's links that read a sparse tensor's records where they lie in the
//! (mapped) file: the codec's decoders collect its indices (and the range decoder its values)
//! into memory, 8 to 12 bytes a kept value — as much as the link itself at a low sparsity. The
//! values decoded are the codec's, bit for bit (each kept value put at its index, zeros
//! elsewhere); the other strategies go through the codec's decoders.

use super::codec;
use crate::formats::wdelta::{ArrayDtype, ArrayRef};

/// A sparse tensor's arrays, read in place: indices validated in range and strictly ascending
/// when the file was opened.
#[derive(Clone, Copy)]
pub(crate) struct SparseInPlace<'a> {
    indices: &'a [u8],
    /// Bytes of an index (int32 or int64).
    width: usize,
    values: &'a [u8],
}

impl<'a> SparseInPlace<'a> {
    pub(crate) fn new(indices: &ArrayRef<'a>, values: &ArrayRef<'a>) -> SparseInPlace<'a> {
        let width = if indices.dtype == ArrayDtype::Int32 {
            4
        } else {
            8
        };
        SparseInPlace {
            indices: indices.data,
            width,
            values: values.data,
        }
    }

    /// Kept values.
    fn len(&self) -> usize {
        (self.indices.len() / self.width).min(self.values.len() / 4)
    }

    /// The index of kept value `k`.
    fn index(&self, k: usize) -> usize {
        let b = &self.indices[k * self.width..];
        if self.width == 4 {
            i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize
        } else {
            i64::from_le_bytes(b[..8].try_into().expect("8 bytes")) as usize
        }
    }

    fn value(&self, k: usize) -> f32 {
        let b = &self.values[k * 4..];
        f32::from_le_bytes([b[0], b[1], b[2], b[3]])
    }

    /// Writes the kept values from kept value `k` on that fall in `start..start + out.len()`
    /// (zeros elsewhere); returns the first kept value after them.
    fn fill_from(&self, mut k: usize, start: usize, out: &mut [f32]) -> usize {
        out.fill(0.0);
        let (end, len) = (start + out.len(), self.len());
        while k < len {
            let i = self.index(k);
            if i >= end {
                break;
            }
            // Validated when the file was opened; bytes written in place since (which the
            // stamps then report) must not make this panic.
            if let Some(o) = out.get_mut(i.wrapping_sub(start)) {
                *o = self.value(k);
            }
            k += 1;
        }
        k
    }

    /// The first kept value whose index is at least `start`.
    fn first_at(&self, start: usize) -> usize {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.index(mid) < start {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }
}

/// A link's decoder of one tensor, front to back.
pub(crate) enum StreamDecoder<'a> {
    Codec(codec::Decoder<'a>),
    Sparse {
        arrays: SparseInPlace<'a>,
        /// The next kept value.
        next: usize,
        /// The position of the next value.
        pos: usize,
    },
}

impl StreamDecoder<'_> {
    /// Writes the next `out.len()` values.
    pub(crate) fn fill(&mut self, out: &mut [f32]) {
        match self {
            StreamDecoder::Codec(d) => d.fill(out),
            StreamDecoder::Sparse { arrays, next, pos } => {
                *next = arrays.fill_from(*next, *pos, out);
                *pos += out.len();
            }
        }
    }
}

/// A link's decoder of any range of one tensor.
pub(super) enum RangeDecoder<'a> {
    /// The codec's decoder and the bytes of its range field (empty when it has none).
    Codec(codec::RangeDecoder, &'a [u8]),
    Sparse(SparseInPlace<'a>),
}

impl RangeDecoder<'_> {
    /// Writes elements `start..start + out.len()` into `out`.
    pub(super) fn decode(&self, start: usize, out: &mut [f32]) {
        match self {
            RangeDecoder::Codec(d, field) => d.decode(start, field, 0, out),
            RangeDecoder::Sparse(arrays) => {
                arrays.fill_from(arrays.first_at(start), start, out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes_of<T: Copy>(v: &[T], le: impl Fn(T) -> Vec<u8>) -> Vec<u8> {
        v.iter().flat_map(|&x| le(x)).collect()
    }

    /// The codec's decoders and these give the same bits, int32 and int64 indices, any cut.
    #[test]
    fn sparse_in_place_decodes_as_the_codec() {
        use crate::formats::wdelta::{Params, Strategy, TensorArrays, TensorEntry};
        let n = 1000;
        let idx: Vec<i64> = (0..n as i64)
            .filter(|i| i % 7 == 3 || i % 11 == 0)
            .collect();
        let vals: Vec<f32> = idx.iter().map(|&i| (i as f32).sin()).collect();
        let v = bytes_of(&vals, |x| x.to_le_bytes().to_vec());
        for dtype in [ArrayDtype::Int32, ArrayDtype::Int64] {
            let ib = match dtype {
                ArrayDtype::Int32 => bytes_of(&idx, |x| (x as i32).to_le_bytes().to_vec()),
                _ => bytes_of(&idx, |x| x.to_le_bytes().to_vec()),
            };
            let (ia, va) = (
                ArrayRef { dtype, data: &ib },
                ArrayRef {
                    dtype: ArrayDtype::Float32,
                    data: &v,
                },
            );
            let entry = TensorEntry {
                shape: crate::formats::wdelta::PackedShape::from_slice(&[n as u64]),
                dtype: "float32".into(),
                base_dtype: None,
                params: Params::Sparse { sparsity: 0.9 },
            };
            assert_eq!(entry.strategy(), Strategy::Sparse);
            let arrays = TensorArrays {
                fields: vec![ia, va],
            };
            let mut whole = vec![0f32; n];
            codec::Decoder::new(&entry, &arrays).fill(&mut whole);
            let inplace = SparseInPlace::new(&ia, &va);
            for cut in [1, 7, 64, 333, n] {
                let mut d = StreamDecoder::Sparse {
                    arrays: inplace,
                    next: 0,
                    pos: 0,
                };
                let mut got = vec![f32::NAN; n];
                for chunk in got.chunks_mut(cut) {
                    d.fill(chunk);
                }
                assert_eq!(
                    got.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                    whole.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
                );
                let r = RangeDecoder::Sparse(inplace);
                for start in (0..n).step_by(cut.max(50)) {
                    let len = cut.min(n - start);
                    let mut out = vec![f32::NAN; len];
                    r.decode(start, &mut out);
                    assert_eq!(
                        out.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                        whole[start..start + len]
                            .iter()
                            .map(|x| x.to_bits())
                            .collect::<Vec<_>>()
                    );
                }
            }
        }
    }
}
