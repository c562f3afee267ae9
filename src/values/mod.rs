//! Weight-value diffs: for each tensor on both sides with the same element count, whether its
//! values changed and by how much (max |b − a|, ‖b − a‖ / ‖a‖, cosine, changed elements).
//!
//! The work streams over the tensors' bytes: tensors of the same dtype are first compared byte
//! for byte (identical ones cost a memcmp and no arithmetic); the others are cut into pieces
//! that are dequantized ([`dequant`]) into small per-piece buffers and compared in parallel
//! ([`compare`]), a piece whose bytes are equal on both sides only adding to the norms. Pages
//! are released behind the work, so memory stays bounded whatever the model's size.

mod bits;
pub mod compare;
pub(crate) mod dequant;
mod error;
pub(crate) mod groups;
mod source;

use rayon::prelude::*;

use crate::artifact::{Artifact, TensorInfo};
use crate::dtype::Dtype;
pub(crate) use bits::BitsDiffer;
pub(crate) use compare::{Sums, ValueStats};
pub use dequant::DECODED_GGUF_TYPES;
pub(crate) use dequant::NotDecoded;
pub(crate) use error::ValuesError;
pub use source::ModelBytes;

/// How a tensor pair was compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// Dequantized and compared value by value.
    Values,
    /// Same dtype, not decodable: only whether the bytes changed is known.
    Bytes(NotDecoded),
}

/// One compared tensor.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorValues {
    pub name: String,
    pub old_dtype: &'static str,
    pub new_dtype: &'static str,
    pub elements: u64,
    /// The bytes differ (same dtype) or the dtype changed.
    pub changed: bool,
    pub method: Method,
    /// None when compared by bytes.
    pub stats: Option<ValueStats>,
    /// The bytes differ but every value is equal (signed zeros, NaN payloads): then not
    /// `changed`, and this says what differs.
    pub bits_differ: Option<BitsDiffer>,
    /// The sums its figures come from, so that figures over several tensors (a training
    /// checkpoint's group, [`ValueDiff::by_group`]) can be taken; None when compared by bytes
    /// or found identical by its bytes without arithmetic.
    pub sums: Option<Sums>,
}

impl TensorValues {
    /// A dtype change compared by value: the figures are the quantization (or conversion)
    /// error.
    pub fn dtype_changed(&self) -> bool {
        self.old_dtype != self.new_dtype
    }

    pub fn rel_l2(&self) -> Option<f64> {
        self.stats.and_then(|s| s.rel_l2)
    }

    /// A changed F32 tensor compared by value, with these figures (for tests).
    #[cfg(test)]
    pub(crate) fn changed_f32(name: String, elements: u64, stats: ValueStats) -> TensorValues {
        TensorValues {
            name,
            old_dtype: "F32",
            new_dtype: "F32",
            elements,
            changed: true,
            method: Method::Values,
            bits_differ: None,
            stats: Some(stats),
            sums: None,
        }
    }
}

/// A tensor on both sides that was not compared, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    pub name: String,
    pub reason: String,
}

/// The value diff of two models.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ValueDiff {
    /// In name order.
    pub tensors: Vec<TensorValues>,
    pub skipped: Vec<Skipped>,
}

impl ValueDiff {
    pub fn changed_count(&self) -> usize {
        self.tensors.iter().filter(|t| t.changed).count()
    }

    /// Tensors whose values are equal and whose bits are not.
    pub fn bits_differ(&self) -> impl Iterator<Item = (&TensorValues, &BitsDiffer)> {
        self.tensors
            .iter()
            .filter_map(|t| Some((t, t.bits_differ.as_ref()?)))
    }

    /// Changed tensors, largest rel_l2 first (infinite ones — a zero old norm — first of all,
    /// byte-compared ones last), then by name.
    pub fn changed_by_rel_l2(&self) -> Vec<&TensorValues> {
        let mut changed: Vec<&TensorValues> = self.tensors.iter().filter(|t| t.changed).collect();
        let key = |t: &TensorValues| match (t.method, t.rel_l2()) {
            (Method::Bytes(_), _) => -1.0,
            (_, None) => f64::INFINITY,
            (_, Some(r)) => r,
        };
        changed.sort_by(|a, b| key(b).total_cmp(&key(a)).then_with(|| a.name.cmp(&b.name)));
        changed
    }

    /// Per layer (`blk.N`, `model.layers.N`, ...): tensors compared and changed, and the
    /// largest rel_l2 among them, in order of depth. Empty for a model without numbered layers.
    pub fn layers(&self) -> Vec<LayerSummary> {
        let mut layers: Vec<LayerSummary> = Vec::new();
        // Each layer's position, so grouping is linear in the number of tensors.
        let mut positions: std::collections::HashMap<(&str, u64), usize> =
            std::collections::HashMap::new();
        for t in &self.tensors {
            let Some((stem, index)) = layer_of(&t.name) else {
                continue;
            };
            let pos = positions.get(&(stem, index)).copied();
            #[cfg(test)]
            tests::LAYER_LOOKUPS.with(|n| n.set(n.get() + 1));
            let layer = match pos {
                Some(p) => &mut layers[p],
                None => {
                    positions.insert((stem, index), layers.len());
                    layers.push(LayerSummary {
                        stem: stem.to_owned(),
                        index,
                        tensors: 0,
                        changed: 0,
                        max_rel_l2: Some(0.0),
                    });
                    layers.last_mut().expect("just pushed")
                }
            };
            layer.tensors += 1;
            if t.changed {
                layer.changed += 1;
                layer.max_rel_l2 = match (layer.max_rel_l2, t.rel_l2(), t.method) {
                    (_, _, Method::Bytes(_)) => layer.max_rel_l2,
                    (Some(m), Some(r), _) => Some(m.max(r)),
                    _ => None,
                };
            }
        }
        layers.sort_by(|a, b| a.stem.cmp(&b.stem).then(a.index.cmp(&b.index)));
        layers
    }
}

impl ValueDiff {
    /// A grouped checkpoint's value changes group by group, by `artifact`'s tensor groups (the
    /// new side's), in the order a diff shows them: tensors compared, changed, identical, and
    /// ‖b − a‖ / ‖a‖ of the group's tensors compared by value taken as one vector. Empty when
    /// `artifact` has no groups.
    pub(crate) fn by_group(&self, artifact: &Artifact) -> Vec<groups::GroupValues> {
        let mut found: Vec<(groups::GroupValues, groups::GroupSums)> = Vec::new();
        for t in &self.tensors {
            let Some(group) = artifact.tensor_group(&t.name) else {
                continue;
            };
            let at = match found.iter().position(|g| g.0.group == group) {
                Some(at) => at,
                None => {
                    found.push((groups::GroupValues::new(group), groups::GroupSums::Empty));
                    found.len() - 1
                }
            };
            let (g, sums) = &mut found[at];
            g.compared += 1;
            if t.changed {
                g.changed += 1;
            } else if t.bits_differ.is_none() {
                g.identical += 1;
            }
            if let Method::Bytes(_) = t.method {
                g.compared_by_bytes += 1;
                continue;
            }
            if t.changed {
                match t.rel_l2() {
                    Some(r) => g.max_rel_l2 = Some(g.max_rel_l2.map_or(r, |m| m.max(r))),
                    None => g.infinite = true,
                }
            }
            sums.add(t.sums.as_ref());
        }
        let mut out: Vec<groups::GroupValues> = found
            .into_iter()
            .map(|(mut g, sums)| {
                g.rel_l2 = sums.total().and_then(|s| ValueStats::from_sums(s).rel_l2);
                g
            })
            .collect();
        out.sort_by_key(|g| crate::diff::GROUP_ORDER.iter().position(|o| *o == g.group));
        out
    }
}

/// One layer of the per-block view.
#[derive(Debug, Clone, PartialEq)]
pub struct LayerSummary {
    /// The name up to the layer number ("blk", "model.layers").
    pub stem: String,
    pub index: u64,
    pub tensors: usize,
    pub changed: usize,
    /// None when a changed tensor's rel_l2 is infinite (zero old norm).
    pub max_rel_l2: Option<f64>,
}

impl LayerSummary {
    pub fn label(&self) -> String {
        format!("{}.{}", self.stem, self.index)
    }
}

/// The layer of a tensor name: the first dot-separated component that is a number, with the
/// part of the name before it ("blk.12.attn_q.weight" → ("blk", 12)).
pub(crate) fn layer_of(name: &str) -> Option<(&str, u64)> {
    let mut start = 0;
    for part in name.split('.') {
        if start > 0 && !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()) {
            return Some((&name[..start - 1], part.parse().ok()?));
        }
        start += part.len() + 1;
    }
    None
}

/// Values per piece of work (a multiple of every block size): pieces are what runs in
/// parallel and what is released behind the work.
const PIECE: u64 = 1 << 18;
/// Values decoded at a time inside a piece: the buffers stay in the CPU caches.
const STRIDE: u64 = 1 << 12;
/// Bytes compared at a time by the identical-bytes check.
const CHECK: usize = 4 << 20;

/// One side of a comparison: the parsed header and the bytes of its file, or of each file of a
/// multi-file model (in the order of its `ModelFiles::parts`).
pub struct Side<'a> {
    /// The model.
    pub artifact: &'a Artifact,
    /// The bytes of its files, in the order the model names them.
    pub files: &'a [ModelBytes],
}

impl<'a> Side<'a> {
    /// A model of one file.
    pub fn single(artifact: &'a Artifact, bytes: &'a ModelBytes) -> Side<'a> {
        Side {
            artifact,
            files: std::slice::from_ref(bytes),
        }
    }

    /// The strided view of the tensor at `position`, when it has one (PyTorch checkpoints).
    pub(crate) fn view_at(&self, position: usize) -> Option<&'a crate::artifact::StridedView> {
        self.artifact
            .layout
            .views
            .as_ref()?
            .get(position)?
            .as_deref()
    }

    /// The bytes of the file holding the tensor at `position` of the tensor table.
    pub(crate) fn file_at(&self, position: usize) -> Result<&'a ModelBytes, ValuesError> {
        let part = match &self.artifact.layout.files {
            Some(files) => files.tensor_parts.get(position).copied().unwrap_or(0) as usize,
            None => 0,
        };
        self.files.get(part).ok_or(ValuesError::MissingPart {
            part,
            files: self.files.len(),
        })
    }
}

/// A tensor's bytes: one run, or (a strided view of a PyTorch storage) elements spread over
/// its storage.
pub(crate) enum TensorBytes<'a> {
    Run(&'a [u8]),
    Strided {
        storage: &'a [u8],
        /// The storage element of the tensor's first element.
        first: u64,
        shape: &'a [u64],
        stride: &'a [u64],
        elem: usize,
    },
}

impl TensorBytes<'_> {
    /// The bytes of elements [start, end) in row-major order: a slice of the run, or the
    /// strided elements gathered into `scratch`.
    pub(crate) fn elements<'s>(
        &'s self,
        codec: &dequant::Codec,
        start: u64,
        end: u64,
        scratch: &'s mut Vec<u8>,
    ) -> &'s [u8] {
        match self {
            TensorBytes::Run(bytes) => byte_range(bytes, codec, start, end),
            TensorBytes::Strided {
                storage,
                first,
                shape,
                stride,
                elem,
            } => {
                scratch.clear();
                for i in start..end {
                    // Row-major index i to its storage element.
                    let mut rest = i;
                    let mut at = *first;
                    for (&size, &step) in shape.iter().zip(stride.iter()).rev() {
                        at += (rest % size) * step;
                        rest /= size;
                    }
                    let at = at as usize * elem;
                    scratch.extend_from_slice(&storage[at..at + elem]);
                }
                scratch
            }
        }
    }

    /// The elements whose bytes are present: all `elements` of a run, the storage's for a
    /// view (fewer when it repeats them).
    fn backed_elements(&self, elements: u64) -> u64 {
        match self {
            TensorBytes::Run(_) => elements,
            TensorBytes::Strided { storage, elem, .. } => (storage.len() / (*elem).max(1)) as u64,
        }
    }

    fn run(&self) -> Option<&[u8]> {
        match self {
            TensorBytes::Run(bytes) => Some(bytes),
            TensorBytes::Strided { .. } => None,
        }
    }
}

/// A view is expanded value by value when it has at most this many elements per element of
/// storage present on either side (torch's `expand` of a small storage; a view that reads its
/// storage a few times over, such as overlapping windows, is still compared).
const BROADCAST_FACTOR: u64 = 16;

/// A tensor pair to compare by value.
struct Pair<'a> {
    index: usize,
    old_file: &'a ModelBytes,
    new_file: &'a ModelBytes,
    old: TensorBytes<'a>,
    new: TensorBytes<'a>,
    old_codec: dequant::Codec,
    new_codec: dequant::Codec,
    elements: u64,
    same_dtype: bool,
}

/// Compares the values of every tensor present on both sides with the same element count.
pub fn compare(old: Side<'_>, new: Side<'_>) -> Result<ValueDiff, ValuesError> {
    let mut diff = ValueDiff::default();
    let paired = pair_tensors(&old, &new, &mut diff)?;
    // A training checkpoint's groups sum up their figures ([`groups`]): the norms of its
    // identical tensors count too, so they are summed rather than settled by their bytes.
    let grouped = old.artifact.layout.groups.is_some() || new.artifact.layout.groups.is_some();
    let work = settle_by_bytes(&paired, &mut diff, grouped);
    let totals = sum_pieces(&work, diff.tensors.len());
    for (tensor, total) in diff.tensors.iter_mut().zip(totals) {
        if let Some(total) = total {
            let stats = ValueStats::from_sums(&total);
            tensor.changed |= stats.changed_elements > 0;
            tensor.stats = Some(stats);
            tensor.sums = Some(total);
        }
    }
    // Bytes that differ with every value equal: rare, so a second pass says why.
    for pair in &paired.values {
        let tensor = &mut diff.tensors[pair.index];
        if pair.same_dtype
            && tensor.changed
            && tensor.stats.is_some_and(|s| s.changed_elements == 0)
        {
            tensor.bits_differ = Some(bits_differ(pair));
            tensor.changed = false;
        }
    }
    Ok(diff)
}

/// Two tensors of one dtype that has no decoder: compared byte for byte.
struct BytePair<'a> {
    index: usize,
    old_file: &'a ModelBytes,
    new_file: &'a ModelBytes,
    old: &'a [u8],
    new: &'a [u8],
}

/// The tensors both sides have, by how they are compared.
#[derive(Default)]
struct Paired<'a> {
    values: Vec<Pair<'a>>,
    bytes: Vec<BytePair<'a>>,
}

/// Pairs the tensors of both sides by name: each becomes an entry of `diff.tensors` (compared
/// by value or by bytes) or of `diff.skipped` (element count or dtype changed, a broadcast).
fn pair_tensors<'a>(
    old: &Side<'a>,
    new: &Side<'a>,
    diff: &mut ValueDiff,
) -> Result<Paired<'a>, ValuesError> {
    let mut paired = Paired::default();
    for (old_position, (name, a)) in old.artifact.tensors.iter().enumerate() {
        let Some(new_position) = new.artifact.tensors.position(name) else {
            continue;
        };
        let b = new
            .artifact
            .tensors
            .get_index(new_position)
            .expect("position found")
            .1;
        // A numpy array's values inside the pickle: protocol 2's latin-1 text decoded, or not
        // read (a Fortran order).
        let (old_decoded, new_decoded) = (
            old.artifact.decoded_values(name),
            new.artifact.decoded_values(name),
        );
        if old.artifact.values_in_pickle(name) && old_decoded.is_none()
            || new.artifact.values_in_pickle(name) && new_decoded.is_none()
        {
            diff.skipped.push(Skipped {
                name: name.to_owned(),
                reason: "a numpy array: its values are inside the pickle, not read".to_owned(),
            });
            continue;
        }
        let (old_file, new_file) = (old.file_at(old_position)?, new.file_at(new_position)?);
        let (n_old, n_new) = (a.n_elements(), b.n_elements());
        if n_old != n_new {
            diff.skipped.push(Skipped {
                name: name.to_owned(),
                reason: format!("element count changed ({n_old} → {n_new})"),
            });
            continue;
        }
        let codec_old = dequant::codec(a.dtype, old.artifact.layout.big_endian);
        let codec_new = dequant::codec(b.dtype, new.artifact.layout.big_endian);
        let index = diff.tensors.len();
        let entry = TensorValues {
            name: name.to_owned(),
            old_dtype: a.dtype.name,
            new_dtype: b.dtype.name,
            elements: n_old,
            changed: a.dtype != b.dtype,
            method: Method::Values,
            stats: None,
            bits_differ: None,
            sums: None,
        };
        match (codec_old, codec_new) {
            (Ok(ca), Ok(cb)) => {
                let old_bytes = match old_decoded {
                    Some(bytes) => TensorBytes::Run(bytes),
                    None => tensor_bytes(old_file, name, a, &ca, old.view_at(old_position))?,
                };
                let new_bytes = match new_decoded {
                    Some(bytes) => TensorBytes::Run(bytes),
                    None => tensor_bytes(new_file, name, b, &cb, new.view_at(new_position))?,
                };
                // The work is bounded by the bytes present: views that repeat their storage's
                // elements (stride 0, a broadcast) on both sides are not expanded.
                let backed = old_bytes
                    .backed_elements(n_old)
                    .max(new_bytes.backed_elements(n_old));
                if n_old > backed.saturating_mul(BROADCAST_FACTOR) {
                    diff.skipped.push(Skipped {
                        name: name.to_owned(),
                        reason: format!(
                            "a view of {n_old} elements over storages of {} and {} elements \
                             (a broadcast): not expanded value by value",
                            old_bytes.backed_elements(n_old),
                            new_bytes.backed_elements(n_old)
                        ),
                    });
                    continue;
                }
                paired.values.push(Pair {
                    index,
                    old_file,
                    new_file,
                    old: old_bytes,
                    new: new_bytes,
                    old_codec: ca,
                    new_codec: cb,
                    elements: n_old,
                    same_dtype: a.dtype == b.dtype,
                });
                diff.tensors.push(entry);
            }
            (Err(why), _) | (_, Err(why)) if a.dtype == b.dtype => {
                paired.bytes.push(BytePair {
                    index,
                    old_file,
                    new_file,
                    old: match old_decoded {
                        Some(bytes) => bytes,
                        None => old_file.range(name, a.file_offset, a.byte_length)?,
                    },
                    new: match new_decoded {
                        Some(bytes) => bytes,
                        None => new_file.range(name, b.file_offset, b.byte_length)?,
                    },
                });
                diff.tensors.push(TensorValues {
                    method: Method::Bytes(why),
                    ..entry
                });
            }
            (Err(why), _) | (_, Err(why)) => diff.skipped.push(Skipped {
                name: name.to_owned(),
                reason: format!(
                    "dtype changed ({} → {}) and {} is not dequantized: {}",
                    a.dtype,
                    b.dtype,
                    if codec_old.is_err() { a.dtype } else { b.dtype },
                    why.describe()
                ),
            }),
        }
    }

    Ok(paired)
}

/// Settles what the bytes decide: pairs whose bytes are the same (identical values, no
/// arithmetic, unless `summed`: then their norms are taken as well) and byte-compared pairs.
/// Returns the pieces of the others to compare by value.
fn settle_by_bytes<'p, 'a>(
    paired: &'p Paired<'a>,
    diff: &mut ValueDiff,
    summed: bool,
) -> Vec<(&'p Pair<'a>, u64, u64)> {
    let identical: Vec<bool> = paired
        .values
        .par_iter()
        .map(|p| match (p.old.run(), p.new.run()) {
            (Some(old), Some(new)) => p.same_dtype && same_bytes(p.old_file, p.new_file, old, new),
            _ => false,
        })
        .collect();
    for b in &paired.bytes {
        diff.tensors[b.index].changed = !same_bytes(b.old_file, b.new_file, b.old, b.new);
    }
    let mut work = Vec::new();
    for (pair, identical) in paired.values.iter().zip(&identical) {
        if *identical && !summed {
            diff.tensors[pair.index].stats = Some(ValueStats::identical());
            continue;
        }
        // A strided view is not compared byte for byte: its values decide.
        diff.tensors[pair.index].changed = !identical
            && (pair.old.run().is_some() && pair.new.run().is_some() || !pair.same_dtype);
        let mut start = 0;
        while start < pair.elements {
            let end = (start + PIECE).min(pair.elements);
            work.push((pair, start, end));
            start = end;
        }
    }
    work
}

/// Compares the pieces on every core; the sums of each of `n_tensors` tensors (None for one
/// with no piece).
fn sum_pieces(work: &[(&Pair<'_>, u64, u64)], n_tensors: usize) -> Vec<Option<Sums>> {
    let progress =
        crate::progress::Progress::new(work.len() as u64, crate::progress::Unit::Items, "values");
    let pieces: Vec<(usize, Sums)> = work
        .par_iter()
        .map_init(
            || Buffers {
                old: std::array::from_fn(|_| vec![0f64; STRIDE as usize]),
                new: std::array::from_fn(|_| vec![0f64; STRIDE as usize]),
                old_bytes: Vec::new(),
                new_bytes: Vec::new(),
                read: source::ReleaseBehind::new(),
            },
            |buffers, &(pair, start, end)| {
                let sums = compare_piece(pair, start, end, buffers);
                progress.inc(1);
                if let Some(old) = pair.old.run() {
                    let range = byte_range(old, &pair.old_codec, start, end);
                    buffers.read.add(pair.old_file, range);
                }
                if let Some(new) = pair.new.run() {
                    let range = byte_range(new, &pair.new_codec, start, end);
                    buffers.read.add(pair.new_file, range);
                }
                (pair.index, sums)
            },
        )
        .collect();
    let mut totals: Vec<Option<Sums>> = vec![None; n_tensors];
    for (index, sums) in pieces {
        totals[index].get_or_insert_with(Sums::default).merge(&sums);
    }
    totals
}

/// What differs in the bytes of a pair of one dtype whose values are all equal.
fn bits_differ(pair: &Pair) -> BitsDiffer {
    let mut found = BitsDiffer::default();
    let (mut old_bytes, mut new_bytes) = (Vec::new(), Vec::new());
    let mut scratch = [Vec::new(), Vec::new()];
    let mut at = 0;
    while at < pair.elements {
        let to = (at + STRIDE).min(pair.elements);
        let old = pair.old.elements(&pair.old_codec, at, to, &mut old_bytes);
        let new = pair.new.elements(&pair.new_codec, at, to, &mut new_bytes);
        found.merge(&bits::count(old, new, &pair.old_codec, &mut scratch));
        at = to;
    }
    found
}

/// A tensor's bytes: its run, checked as [`checked_range`] does, or for a strided view its
/// storage, checked to lie inside the file.
pub(crate) fn tensor_bytes<'a>(
    bytes: &'a ModelBytes,
    name: &str,
    info: &'a TensorInfo,
    codec: &dequant::Codec,
    view: Option<&'a crate::artifact::StridedView>,
) -> Result<TensorBytes<'a>, ValuesError> {
    let Some(view) = view else {
        return Ok(TensorBytes::Run(checked_range(bytes, name, info, codec)?));
    };
    let storage = bytes.range(name, view.storage_start, view.storage_bytes)?;
    let elem = codec.type_size;
    Ok(TensorBytes::Strided {
        storage,
        first: info.file_offset.saturating_sub(view.storage_start) / elem.max(1),
        shape: &info.shape,
        stride: &view.stride,
        elem: elem as usize,
    })
}

/// A worker's buffers: decoded values (of a group of strides), gathered bytes of strided
/// views, and the bytes read whose pages wait to be released.
struct Buffers<'a> {
    old: [Vec<f64>; GROUP],
    new: [Vec<f64>; GROUP],
    old_bytes: Vec<u8>,
    new_bytes: Vec<u8>,
    read: source::ReleaseBehind<'a>,
}

/// The tensor's bytes, after checking that its byte length is what its dtype and element count
/// take and that it lies inside the file.
fn checked_range<'a>(
    bytes: &'a ModelBytes,
    name: &str,
    info: &TensorInfo,
    codec: &dequant::Codec,
) -> Result<&'a [u8], ValuesError> {
    let elements = info.n_elements();
    let expected = (elements / codec.block_size).saturating_mul(codec.type_size);
    if !elements.is_multiple_of(codec.block_size) || expected != info.byte_length {
        return Err(ValuesError::ByteLength {
            path: bytes.name().to_owned(),
            tensor: name.to_owned(),
            dtype: info.dtype.name,
            elements,
            expected,
            found: info.byte_length,
        });
    }
    bytes.range(name, info.file_offset, info.byte_length)
}

/// The bytes holding values [start, end) of a tensor (block-aligned: pieces start at
/// multiples of [`STRIDE`], every block size divides it).
pub(crate) fn byte_range<'a>(
    bytes: &'a [u8],
    codec: &dequant::Codec,
    start: u64,
    end: u64,
) -> &'a [u8] {
    let at = |i: u64| (i / codec.block_size * codec.type_size) as usize;
    &bytes[at(start)..at(end)]
}

/// Whether two byte runs are equal, compared a few MiB at a time with pages released behind.
fn same_bytes(old_file: &ModelBytes, new_file: &ModelBytes, old: &[u8], new: &[u8]) -> bool {
    if old.len() != new.len() {
        return false;
    }
    for (a, b) in old.chunks(CHECK).zip(new.chunks(CHECK)) {
        let equal = a == b;
        old_file.release(a);
        new_file.release(b);
        if !equal {
            return false;
        }
    }
    true
}

/// Strides decoded before their sums are taken: the changed ones are summed two at a time,
/// and so are the unchanged ones, whatever lies between them (a tensor changed in places
/// alternates the two), and the sums are merged in stride order.
const GROUP: usize = 4;

fn compare_piece(pair: &Pair, start: u64, end: u64, buffers: &mut Buffers) -> Sums {
    let Buffers {
        old: bufs_old,
        new: bufs_new,
        old_bytes,
        new_bytes,
        read: _,
    } = buffers;
    let wide = pair.old_codec.wide_integer || pair.new_codec.wide_integer;
    let exact = pair.old_codec.exact_products && pair.new_codec.exact_products;
    let mut sums = Sums::default();
    let mut at = start;
    while at < end {
        // Each stride of the group: its length, whether it is the same on both sides, and
        // its sums once taken.
        let mut strides = [(0usize, false); GROUP];
        let mut parts: [Option<Sums>; GROUP] = [None; GROUP];
        let mut count = 0;
        while count < GROUP && at < end {
            let to = (at + STRIDE).min(end);
            let n = (to - at) as usize;
            let raw_old = pair.old.elements(&pair.old_codec, at, to, old_bytes);
            let raw_new = pair.new.elements(&pair.new_codec, at, to, new_bytes);
            let unchanged = pair.same_dtype && raw_old == raw_new;
            let (buf_old, buf_new) = (&mut bufs_old[count][..n], &mut bufs_new[count][..n]);
            (pair.old_codec.decode)(raw_old, buf_old);
            if !unchanged {
                (pair.new_codec.decode)(raw_new, buf_new);
            }
            if wide {
                let mut part = if unchanged {
                    Sums::unchanged(buf_old)
                } else {
                    Sums::of(buf_old, buf_new)
                };
                part.inexact = beyond_f64(buf_old) || !unchanged && beyond_f64(buf_new);
                if pair.same_dtype && !unchanged {
                    // Two integers that round to the same f64 may still differ.
                    let width = pair.old_codec.type_size as usize;
                    part.changed = raw_old
                        .chunks_exact(width)
                        .zip(raw_new.chunks_exact(width))
                        .filter(|(a, b)| a != b)
                        .count() as u64;
                }
                parts[count] = Some(part);
            }
            strides[count] = (n, unchanged);
            count += 1;
            at = to;
        }
        let old = |i: usize| &bufs_old[i][..strides[i].0];
        let new = |i: usize| &bufs_new[i][..strides[i].0];
        // Unchanged strides in pairs, then changed ones.
        for same in [true, false] {
            let (mut todo, mut k) = ([0usize; GROUP], 0);
            for i in (0..count).filter(|&i| parts[i].is_none() && strides[i].1 == same) {
                todo[k] = i;
                k += 1;
            }
            let mut waiting: Option<usize> = None;
            for &i in &todo[..k] {
                let Some(first) = waiting.take() else {
                    waiting = Some(i);
                    continue;
                };
                let (a, b) = match (same, exact) {
                    (true, _) => Sums::unchanged_two(old(first), old(i)),
                    (false, true) => Sums::of_two_exact((old(first), new(first)), (old(i), new(i))),
                    (false, false) => (Sums::of(old(first), new(first)), Sums::of(old(i), new(i))),
                };
                (parts[first], parts[i]) = (Some(a), Some(b));
            }
            if let Some(i) = waiting {
                parts[i] = Some(if same {
                    Sums::unchanged(old(i))
                } else {
                    Sums::of(old(i), new(i))
                });
            }
        }
        for part in &parts[..count] {
            sums.merge(part.as_ref().expect("every stride summed"));
        }
    }
    sums
}

/// Whether some decoded 64-bit integer may have been rounded: f64 holds every integer of
/// magnitude below 2^53 exactly, and not all of those above.
fn beyond_f64(values: &[f64]) -> bool {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
    values.iter().any(|v| v.abs() >= EXACT)
}

/// Decodes a whole tensor's bytes of `dtype` (tests and the dequantization check).
pub fn dequantize(dtype: &'static Dtype, bytes: &[u8]) -> Result<Vec<f64>, NotDecoded> {
    let codec = dequant::codec(dtype, false)?;
    let n = bytes.len() as u64 / codec.type_size * codec.block_size;
    let mut out = vec![0f64; n as usize];
    let whole = (n / codec.block_size * codec.type_size) as usize;
    (codec.decode)(&bytes[..whole], &mut out);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether this CPU runs AVX2, for the tests of the AVX2 paths. Without it a test says on
    /// stderr that only the portable path ran, and fails when `REQUIRE_SIMD=1` (`.ci/run` sets
    /// it where /proc/cpuinfo lists avx2), so a CI machine with AVX2 never skips them.
    pub(crate) fn avx2_or_note(test: &str) -> bool {
        #[cfg(target_arch = "x86_64")]
        let present = std::arch::is_x86_feature_detected!("avx2");
        #[cfg(not(target_arch = "x86_64"))]
        let present = false;
        if !present {
            assert!(
                std::env::var("REQUIRE_SIMD").as_deref() != Ok("1"),
                "{test}: REQUIRE_SIMD=1, but this CPU lacks AVX2: the AVX2 path is untested"
            );
            eprintln!("note: {test}: this CPU lacks AVX2, so only the portable path was tested");
        }
        present
    }

    #[test]
    fn layers_are_the_first_numbered_component() {
        assert_eq!(layer_of("blk.12.attn_q.weight"), Some(("blk", 12)));
        assert_eq!(
            layer_of("model.layers.3.mlp.weight"),
            Some(("model.layers", 3))
        );
        assert_eq!(layer_of("token_embd.weight"), None);
        assert_eq!(layer_of("7.weight"), None);
    }

    thread_local! {
        /// Lookups `layers` made to find the layers of tensors (one hash lookup per tensor;
        /// each test runs on its own thread).
        pub(super) static LAYER_LOOKUPS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    /// Grouping by layer is linear: one lookup per tensor finds its layer, whatever the
    /// number of layers (a linear search per tensor made one per layer so far). An operation
    /// count, not a time, and the layers come out one per tensor, in order.
    #[test]
    fn layer_grouping_grows_linearly() {
        let layers = 80_000;
        let diff = ValueDiff {
            tensors: (0..layers)
                .rev()
                .map(|i| {
                    TensorValues::changed_f32(format!("blk.{i}.w"), 1, ValueStats::identical())
                })
                .collect(),
            ..ValueDiff::default()
        };
        LAYER_LOOKUPS.with(|n| n.set(0));
        let grouped = diff.layers();
        assert_eq!(LAYER_LOOKUPS.with(std::cell::Cell::get), layers as usize);
        assert_eq!(grouped.len(), layers as usize);
        assert!(
            grouped
                .iter()
                .enumerate()
                .all(|(i, l)| l.index == i as u64 && l.tensors == 1)
        );
    }
}
