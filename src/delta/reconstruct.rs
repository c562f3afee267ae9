//! Reconstruction, chunk by chunk: float32 base values plus each link's decoded delta, as the
//! reference reconstructs (`base + delta`). Used by `create` (against a chain) and `apply`.

use super::error::DeltaError;
use super::link_decoder::StreamDecoder;
use super::model::{CHUNK_ELEMS, Elem, Model, TensorSource};
use super::open::{OpenDelta, TensorPages};

type Result<T, E = DeltaError> = std::result::Result<T, E>;

/// Reconstructs a tensor chunk by chunk: base values plus each link's decoded delta.
pub(crate) struct Reconstructor<'a> {
    base: &'a Model,
    name: &'a str,
    t: &'a TensorSource,
    decoders: Vec<StreamDecoder<'a>>,
    /// Each link's pages of the tensor's records, released behind the decoders.
    pages: Vec<TensorPages<'a>>,
    pos: usize,
    buf: Vec<f32>,
}

impl<'a> Reconstructor<'a> {
    pub(crate) fn new(base: &'a Model, links: &'a [OpenDelta], name: &'a str) -> Result<Self> {
        let t = &base.tensors[name];
        let decoders = links
            .iter()
            .map(|l| l.stream_decoder(name))
            .collect::<Result<Vec<_>>>()?;
        Ok(Reconstructor {
            base,
            name,
            t,
            decoders,
            pages: pages_of(links, name, t.n_elements()),
            pos: 0,
            buf: Vec::new(),
        })
    }

    /// Writes the next `out.len()` reconstructed values.
    pub(crate) fn next(&mut self, out: &mut [f32]) -> Result<()> {
        self.base.read_f32_into(self.name, self.t, self.pos, out)?;
        self.buf.resize(out.len(), 0.0);
        for d in &mut self.decoders {
            d.fill(&mut self.buf);
            // A zero delta leaves the base's bits (signed zeros, NaN payloads) as they are.
            for (a, b) in out.iter_mut().zip(&self.buf) {
                if *b != 0.0 {
                    *a += *b;
                }
            }
        }
        self.pos += out.len();
        for p in &mut self.pages {
            p.done_through(self.pos);
        }
        Ok(())
    }
}

/// Reconstructs an integer (or boolean) tensor chunk by chunk, exactly: base plus each link's
/// delta rounded half to even, in 128-bit integers, checked against the type's range. The
/// reference takes such tensors through float32 (`base + delta` as float32); for the deltas
/// `create` writes (checked to rebuild the fine-tuned values) both give the same numbers.
pub(crate) struct IntReconstructor<'a> {
    base: &'a Model,
    name: &'a str,
    t: &'a TensorSource,
    elem: Elem,
    decoders: Vec<StreamDecoder<'a>>,
    /// Each link's pages of the tensor's records, released behind the decoders.
    pages: Vec<TensorPages<'a>>,
    pos: usize,
    buf: Vec<f32>,
}

impl<'a> IntReconstructor<'a> {
    pub(crate) fn new(base: &'a Model, links: &'a [OpenDelta], name: &'a str) -> Result<Self> {
        let t = &base.tensors[name];
        let elem = base.elem(name, t)?;
        let decoders = links
            .iter()
            .map(|l| l.stream_decoder(name))
            .collect::<Result<Vec<_>>>()?;
        Ok(IntReconstructor {
            base,
            name,
            t,
            elem,
            decoders,
            pages: pages_of(links, name, t.n_elements()),
            pos: 0,
            buf: Vec::new(),
        })
    }

    /// Writes the next `out.len()` reconstructed values.
    pub(crate) fn next(&mut self, out: &mut [i128]) -> Result<()> {
        self.base.read_ints_into(self.name, self.t, self.pos, out)?;
        self.buf.resize(out.len(), 0.0);
        for d in &mut self.decoders {
            d.fill(&mut self.buf);
            add_rounded(out, &self.buf);
        }
        check_int_range(self.elem, self.name, self.pos, out, &self.buf)?;
        self.pos += out.len();
        for p in &mut self.pages {
            p.done_through(self.pos);
        }
        Ok(())
    }

    pub(crate) fn elem(&self) -> Elem {
        self.elem
    }
}

/// Each link's pages of tensor `name`'s records (`n` elements).
pub(crate) fn pages_of<'a>(
    links: &'a [OpenDelta],
    name: &'a str,
    n: usize,
) -> Vec<TensorPages<'a>> {
    links.iter().map(|l| l.pages_of(name, n)).collect()
}

/// Adds each delta, rounded half to even, to the integers `vals` (elements `pos..` of tensor
/// `name`, of type `elem`), and checks the results against the type's range.
pub(crate) fn add_int_delta(
    elem: Elem,
    name: &str,
    pos: usize,
    vals: &mut [i128],
    deltas: &[f32],
) -> Result<()> {
    add_rounded(vals, deltas);
    check_int_range(elem, name, pos, vals, deltas)
}

fn add_rounded(vals: &mut [i128], deltas: &[f32]) {
    for (a, b) in vals.iter_mut().zip(deltas) {
        // Saturating: a value this far out is refused by the range check.
        *a = a.saturating_add(b.round_ties_even() as i128);
    }
}

/// Every value within the type's range, and no delta (`last`: the last link's) infinite or NaN.
fn check_int_range(elem: Elem, name: &str, pos: usize, vals: &[i128], last: &[f32]) -> Result<()> {
    let (lo, hi) = elem.int_range();
    for (k, (v, d)) in vals.iter().zip(last).enumerate() {
        if !d.is_finite() || *v < lo || *v > hi {
            return Err(DeltaError::IntegerOutOfRange {
                tensor: name.to_string(),
                position: (pos + k) as u64,
                value: if d.is_finite() {
                    v.to_string()
                } else {
                    d.to_string()
                },
                dtype: elem.numpy_name(),
            });
        }
    }
    Ok(())
}

/// base + each link's delta, in float32, as the reference reconstructs (`base + delta`).
pub(crate) fn reconstruct_into(
    base: &Model,
    links: &[OpenDelta],
    name: &str,
    out: &mut [f32],
) -> Result<()> {
    let mut r = Reconstructor::new(base, links, name)?;
    for chunk in out.chunks_mut(CHUNK_ELEMS) {
        r.next(chunk)?;
    }
    Ok(())
}
