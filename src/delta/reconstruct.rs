//! Reconstruction, chunk by chunk: float32 base values plus each link's decoded delta, as the
//! reference reconstructs (`base + delta`). Used by `create` (against a chain) and `apply`.

use super::codec;
use super::error::DeltaError;
use super::model::{CHUNK_ELEMS, Model, TensorSource};
use super::open::OpenDelta;

type Result<T, E = DeltaError> = std::result::Result<T, E>;

/// Reconstructs a tensor chunk by chunk: base values plus each link's decoded delta.
pub(crate) struct Reconstructor<'a> {
    base: &'a Model,
    name: &'a str,
    t: &'a TensorSource,
    decoders: Vec<codec::Decoder<'a>>,
    pos: usize,
    buf: Vec<f32>,
}

impl<'a> Reconstructor<'a> {
    pub(crate) fn new(base: &'a Model, links: &'a [OpenDelta], name: &'a str) -> Result<Self> {
        let t = &base.tensors[name];
        let decoders = links
            .iter()
            .map(|l| l.decoder(name))
            .collect::<Result<Vec<_>>>()?;
        Ok(Reconstructor {
            base,
            name,
            t,
            decoders,
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
            for (a, b) in out.iter_mut().zip(&self.buf) {
                *a += *b;
            }
        }
        self.pos += out.len();
        Ok(())
    }
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
