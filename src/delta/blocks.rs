//! What the encoders of a large tensor in blocks share (`int4_blocks.rs`, `sparse_blocks.rs`,
//! `quantized_blocks.rs`): a float tensor of at least [`BLOCKED_MIN`] elements is cut into
//! blocks of [`BLOCK`] elements that all workers share, and its delta is computed again from
//! the inputs in each pass that needs it (the previous values — the base, or its reconstruction
//! through a chain of deltas — and the fine-tune, read piece by piece), so the memory held is
//! a few pieces per worker and the records, whatever the tensor's size.

use super::codec;
use super::error::DeltaError;
use super::link_decoder::RangeDecoder;
use super::model::{Elem, Model, TensorSource};
use super::open::{OpenDelta, TensorPages};
use super::spool::Array;
use super::verify::{LOSS_BLOCK, LossSums};

type Result<T, E = DeltaError> = std::result::Result<T, E>;

/// Elements per block: one block of the loss sums, so that their bits do not depend on the cut.
pub(super) const BLOCK: usize = LOSS_BLOCK;

/// Tensors of at least this many elements are encoded in blocks.
pub(super) const BLOCKED_MIN: usize = 1 << 22;

/// Elements read and worked on per step: the buffers of a step stay in the core's cache
/// between the passes over them. A multiple of 8 (quantized packs 8 signs a byte).
pub(super) const PIECE: usize = 1 << 15;

thread_local! {
    /// A worker's buffers for one piece: previous values, fine-tune, delta, scratch.
    static BUFFERS: std::cell::RefCell<[Vec<f32>; 4]> = const {
        std::cell::RefCell::new([Vec::new(), Vec::new(), Vec::new(), Vec::new()])
    };
}

/// Whether tensor `name` is encoded in blocks: a float tensor of at least [`BLOCKED_MIN`]
/// elements, with every strategy and option (what the passes hold does not grow with it).
pub(super) fn applies(base: &Model, name: &str) -> bool {
    let t = &base.tensors[name];
    t.elem.is_some_and(Elem::is_float) && t.n_elements() >= BLOCKED_MIN
}

/// The inputs of one tensor's delta, readable at any range.
pub(super) struct Inputs<'a> {
    pub(super) base: &'a Model,
    pub(super) ft: &'a Model,
    pub(super) name: &'a str,
    base_t: &'a TensorSource,
    ft_t: &'a TensorSource,
    /// Each link of the chain's decoder.
    links: Vec<RangeDecoder<'a>>,
    /// Each link's pages of the tensor's records: those of a block are released when a pass
    /// is done with it, all of them when the inputs are dropped.
    pages: Vec<TensorPages<'a>>,
}

impl<'a> Inputs<'a> {
    pub(super) fn new(
        base: &'a Model,
        links: &'a [OpenDelta],
        ft: &'a Model,
        name: &'a str,
    ) -> Result<Inputs<'a>> {
        let ft_t = ft
            .tensors
            .get(name)
            .ok_or_else(|| DeltaError::TensorNotInModel {
                model: ft.path.clone(),
                tensor: name.to_owned(),
            })?;
        let base_t = &base.tensors[name];
        let pages = super::reconstruct::pages_of(links, name, base_t.n_elements());
        let links = links
            .iter()
            .map(|l| l.range_decoder(name))
            .collect::<Result<Vec<_>>>()?;
        Ok(Inputs {
            base,
            ft,
            name,
            base_t,
            ft_t,
            links,
            pages,
        })
    }

    /// Elements of the tensor.
    pub(super) fn len(&self) -> usize {
        self.base_t.n_elements()
    }

    /// Against a plain base (the loss is measured), not a chain.
    pub(super) fn measured(&self) -> bool {
        self.links.is_empty()
    }

    /// The error of passes over these inputs that read different values.
    pub(super) fn changed(&self) -> DeltaError {
        DeltaError::InputsChanged {
            base: self.base.shard_path(self.base_t).to_path_buf(),
            finetuned: self.ft.shard_path(self.ft_t).to_path_buf(),
            tensor: self.name.to_owned(),
        }
    }

    /// The base tensor's element type.
    pub(super) fn elem(&self) -> Result<Elem> {
        self.base.elem(self.name, self.base_t)
    }

    /// The block starts of the tensor and the range of the block at a start.
    pub(super) fn blocks(&self) -> (Vec<usize>, impl Fn(usize) -> std::ops::Range<usize> + Sync) {
        let n = self.len();
        ((0..n).step_by(BLOCK).collect(), move |s| {
            s..(s + BLOCK).min(n)
        })
    }

    /// Reads elements `at..at + p.len()` of the previous values into `p` (`scratch` of the
    /// same length is used for the chain's deltas) and of the fine-tune into `f`.
    fn read(&self, at: usize, p: &mut [f32], f: &mut [f32], scratch: &mut [f32]) -> Result<()> {
        self.base.read_f32_into(self.name, self.base_t, at, p)?;
        for decoder in &self.links {
            decoder.decode(at, scratch);
            // As `Reconstructor`: a zero delta leaves the base's bits as they are.
            for (a, &d) in p.iter_mut().zip(scratch.iter()) {
                if d != 0.0 {
                    *a += d;
                }
            }
        }
        self.ft.read_f32_into(self.name, self.ft_t, at, f)
    }

    /// Calls `work(delta, previous, fine-tune, scratch, start)` with the values of elements
    /// `range`, piece by piece from `start`, in this worker's buffers.
    pub(super) fn with_delta(
        &self,
        range: std::ops::Range<usize>,
        mut work: impl FnMut(&mut [f32], &[f32], &[f32], &mut [f32], usize),
    ) -> Result<()> {
        BUFFERS.with(|cell| {
            let mut bufs = cell.borrow_mut();
            for v in bufs.iter_mut() {
                v.resize(PIECE, 0.0);
            }
            let [p, f, d, r] = &mut *bufs;
            for at in range.clone().step_by(PIECE) {
                let len = PIECE.min(range.end - at);
                let (p, f, d, r) = (&mut p[..len], &mut f[..len], &mut d[..len], &mut r[..len]);
                self.read(at, p, f, r)?;
                codec::subtract_chunk(Some(p), f, d);
                work(d, p, f, r, at);
            }
            Ok::<_, DeltaError>(())
        })?;
        for pages in &self.pages {
            pages.done_with(range.clone());
        }
        Ok(())
    }
}

/// What the blocked encoders (int4, sparse, quantized) make of a tensor: its arrays, held or
/// spooled, and, against a plain base, its loss sums.
pub(super) type Encoded = Result<(Vec<Array>, Option<LossSums>)>;

/// Blocks worked on at once by the workers before their results are joined: the results of
/// the blocks are not all held beside the joined arrays, and the workers seldom wait for a
/// join (groups of 2 x threads blocks made int4's create about 40 % slower on 2 cores).
pub(super) fn group_len() -> usize {
    (2 * rayon::current_num_threads()).max(32)
}
