//! Decoders of a lineage's links that read a sparse tensor's records, and an int4 tensor's
//! outliers, where they lie in the (mapped) file: the codec's decoders collect them into
//! memory, 8 to 12 bytes a kept value or outlier — as much as the link itself at a low
//! sparsity, and 0.12 bytes an element of a large int4 tensor. The values decoded are the
//! codec's, bit for bit; quantized tensors (whose small arrays are a scale per row) go through
//! the codec's decoders.

use super::codec;
use crate::formats::wdelta::{ArrayDtype, ArrayRef, Strategy, TensorArrays, TensorEntry};

/// A sparse tensor's arrays (or an int4 tensor's outliers), read in place: indices validated
/// in range and strictly ascending when the file was opened.
#[derive(Clone, Copy)]
pub(crate) struct SparseInPlace<'a> {
    indices: &'a [u8],
    /// Bytes of an index (int32 or int64).
    width: usize,
    values: &'a [u8],
    /// Bytes of a value (float32 for sparse, float16 for int4's outliers).
    value_width: usize,
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
            value_width: values.dtype.size() as usize,
        }
    }

    /// Kept values.
    fn len(&self) -> usize {
        (self.indices.len() / self.width).min(self.values.len() / self.value_width)
    }

    fn index_dtype(&self) -> ArrayDtype {
        if self.width == 4 {
            ArrayDtype::Int32
        } else {
            ArrayDtype::Int64
        }
    }

    /// Whether kept values `a..b` have strictly ascending indices within `start..end`, as
    /// validation found them (a file written in place since may say otherwise).
    fn fit(&self, a: usize, b: usize, start: usize, end: usize) -> bool {
        let mut prev = None;
        (a..b).all(|k| {
            let i = self.index(k);
            let fits = (start..end).contains(&i) && prev.is_none_or(|p| p < i);
            prev = Some(i);
            fits
        })
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

/// An int4 tensor's decoder with its outliers read in place: the codec's range decoder built
/// without them, the outliers, and `packed`.
pub(crate) struct Int4InPlace<'a> {
    decoder: codec::RangeDecoder,
    outliers: SparseInPlace<'a>,
    packed: &'a [u8],
}

impl<'a> Int4InPlace<'a> {
    /// From an int4 tensor's arrays (validated): the codec's range decoder is built with the
    /// outliers' arrays left empty, and reads them from here.
    pub(crate) fn new(entry: &TensorEntry, arrays: &TensorArrays<'a>) -> Int4InPlace<'a> {
        let f = &arrays.fields;
        let without_outliers = TensorArrays {
            fields: f
                .iter()
                .enumerate()
                .map(|(slot, a)| ArrayRef {
                    dtype: a.dtype,
                    data: if slot < 2 { &[] } else { a.data },
                })
                .collect(),
        };
        let packed =
            codec::RangeDecoder::range_field(Strategy::Int4).map_or(&[][..], |i| f[i].data);
        Int4InPlace {
            decoder: codec::RangeDecoder::new(entry, &without_outliers),
            outliers: SparseInPlace::new(&f[0], &f[1]),
            packed,
        }
    }

    /// Writes elements `start..start + out.len()` into `out`. Should the file have been written
    /// in place since its indices were validated (the stamps then report it), what is written is
    /// zeros, never a panic.
    fn decode(&self, start: usize, out: &mut [f32]) {
        let end = start + out.len();
        let o = &self.outliers;
        let (a, b) = (o.first_at(start), o.first_at(end));
        let (from, to) = self.decoder.int4_range_bytes(start, end, a, b);
        if !o.fit(a, b, start, end) || to > self.packed.len() || from > to {
            out.fill(0.0);
            return;
        }
        let records = (
            o.index_dtype(),
            &o.indices[a * o.width..b * o.width],
            &o.values[a * o.value_width..b * o.value_width],
        );
        self.decoder.decode_int4_with(
            start,
            &self.packed[from..to],
            from,
            records,
            a,
            &mut (Vec::new(), Vec::new()),
            out,
        );
    }
}

/// A link's decoder of one tensor, front to back.
pub(crate) enum StreamDecoder<'a> {
    Codec(codec::Decoder<'a>),
    Int4 {
        decoder: Int4InPlace<'a>,
        /// The position of the next value.
        pos: usize,
    },
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
            StreamDecoder::Int4 { decoder, pos } => {
                decoder.decode(*pos, out);
                *pos += out.len();
            }
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
    Int4(Int4InPlace<'a>),
    Sparse(SparseInPlace<'a>),
}

impl RangeDecoder<'_> {
    /// Writes elements `start..start + out.len()` into `out`.
    pub(super) fn decode(&self, start: usize, out: &mut [f32]) {
        match self {
            RangeDecoder::Codec(d, field) => d.decode(start, field, 0, out),
            RangeDecoder::Int4(d) => d.decode(start, out),
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

    /// The arrays an encoder wrote, as a decoder reads them.
    fn arrays_of(owned: &[crate::formats::wdelta::OwnedArray]) -> TensorArrays<'_> {
        TensorArrays {
            fields: owned
                .iter()
                .map(|a| ArrayRef {
                    dtype: a.dtype,
                    data: &a.data,
                })
                .collect(),
        }
    }

    /// An int4 tensor's outliers read in place decode as the codec's decoders, layouts 1 and 2,
    /// front to back and at any range, at any cut.
    #[test]
    fn int4_in_place_decodes_as_the_codec() {
        use codec::{EncodeOptions, encode, entry_for};
        let n = 3001;
        let delta: Vec<f32> = (0..n)
            .map(|i| ((i * 7919) % 997) as f32 * 1e-4 - 0.05 + if i % 97 == 5 { 3.0 } else { 0.0 })
            .collect();
        for version in [1, 2] {
            let opts = EncodeOptions {
                strategy: Strategy::Int4,
                version,
                outlier_fraction: 0.03,
                ..Default::default()
            };
            let shape = [n as u64];
            let entry = entry_for(&shape, &opts, Some("float32"));
            let owned = encode(&delta, &shape, &opts);
            let arrays = arrays_of(&owned);
            let mut whole = vec![0f32; n];
            codec::Decoder::new(&entry, &arrays).fill(&mut whole);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            for cut in [1, 2, 7, 64, 333, n] {
                let mut d = StreamDecoder::Int4 {
                    decoder: Int4InPlace::new(&entry, &arrays),
                    pos: 0,
                };
                let mut got = vec![f32::NAN; n];
                for chunk in got.chunks_mut(cut) {
                    d.fill(chunk);
                }
                assert_eq!(bits(&got), bits(&whole), "v{version} cut {cut}");
                let r = RangeDecoder::Int4(Int4InPlace::new(&entry, &arrays));
                for start in (0..n).step_by(cut.max(41)) {
                    let len = cut.min(n - start);
                    let mut out = vec![f32::NAN; len];
                    r.decode(start, &mut out);
                    assert_eq!(
                        bits(&out),
                        bits(&whole[start..start + len]),
                        "v{version} at {start}"
                    );
                }
            }
            // Indices no longer ascending (a file written in place): zeros, no panic.
            let mut bad = owned.clone();
            let width = bad[0].dtype.size() as usize;
            let (a, b) = bad[0].data.split_at_mut(width);
            a.swap_with_slice(&mut b[..width]);
            let arrays = arrays_of(&bad);
            let mut out = vec![f32::NAN; n];
            RangeDecoder::Int4(Int4InPlace::new(&entry, &arrays)).decode(0, &mut out);
            assert!(out.iter().all(|&x| x == 0.0));
        }
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
