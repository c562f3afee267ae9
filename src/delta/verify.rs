//! Verifying a lineage (every link's parent hash is the model before it) and measuring how
//! far a delta's reconstruction is from the fine-tuned model it was made from.

use std::borrow::Cow;

use sha2::{Digest, Sha256};

use super::error::DeltaError;
use super::model::{CHUNK_ELEMS, Elem, Model};
use super::open::{OpenDelta, check_against_base};
use super::pipeline::{RunOptions, ordered_parallel};

type Result<T, E = DeltaError> = std::result::Result<T, E>;

/// Result of verifying a lineage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Verified {
    pub(crate) base_hash: String,
    /// For each link, the hash of its float32 reconstruction (what a next link must name).
    pub(crate) link_hashes: Vec<String>,
}

/// Verifies that `links` apply in order to `base`: the first link's parent hash is the base's,
/// and every later link's is the float32 reconstruction of the one before.
/// The reconstruction hashes are computed (one decoding pass) when there is more than one link
/// or `hash_last` asks for the last one.
pub(crate) fn verify_lineage(
    base: &Model,
    links: &[OpenDelta],
    hash_last: bool,
    run: &RunOptions,
) -> Result<Verified> {
    for l in links {
        check_against_base(l, base)?;
    }
    base.check_elems()?;
    let bar = run.bar(base.data_bytes(), "hashing");
    let base_hash = super::base_hash::parent_hash(base, run, |n| bar.inc(n))?;
    bar.finish();
    let Some(first) = links.first() else {
        return Ok(Verified {
            base_hash,
            link_hashes: Vec::new(),
        });
    };
    if first.parent_hash() != base_hash {
        return Err(wrong_parent(
            first,
            base.path.display().to_string(),
            &base_hash,
        ));
    }
    if links.len() == 1 && !hash_last {
        first.check_unchanged()?;
        return Ok(Verified {
            base_hash,
            link_hashes: Vec::new(),
        });
    }
    // Every link's reconstruction is hashed, in name order.
    let names: Vec<&String> = base.tensors.keys().collect();
    let mut hashers: Vec<Sha256> = links.iter().map(|_| Sha256::new()).collect();
    let bar = run.bar(base.data_bytes(), "verifying");
    ordered_parallel::<_, DeltaError>(
        names.len(),
        run.threads(),
        |i| {
            let name = names[i];
            let t = &base.tensors[name.as_str()];
            if t.n_elements() >= STREAMED_MIN {
                // Large: streamed by the consumer, chunk by chunk (see `hash_streamed`).
                return Ok((t.len as u64, None));
            }
            // The stages go to the consumer, which hashes them in name order.
            let mut v = base.load_f32(name, t)?;
            let mut out = Vec::with_capacity(links.len());
            for link in links {
                let d = link.decode(name, v.len())?;
                for (a, b) in v.iter_mut().zip(&d) {
                    *a += *b;
                }
                out.push(v.clone());
            }
            Ok((t.len as u64, Some(out)))
        },
        |i, (len, stages)| {
            match stages {
                Some(stages) => {
                    for (h, v) in hashers.iter_mut().zip(&stages) {
                        h.update(names[i].as_bytes());
                        h.update(f32_bytes(v));
                    }
                }
                None => hash_streamed(base, links, names[i], &mut hashers)?,
            }
            bar.inc(len);
            Ok(())
        },
    )?;
    bar.finish();
    let link_hashes: Vec<String> = hashers
        .into_iter()
        .map(|h| crate::digest::hex(&h.finalize()))
        .collect();
    // The links' bytes were read again after their checksums were verified.
    for l in links {
        l.check_unchanged()?;
    }
    for j in 1..links.len() {
        if links[j].parent_hash() != link_hashes[j - 1] {
            return Err(wrong_parent(
                &links[j],
                format!("the reconstruction through {}", links[j - 1].path.display()),
                &link_hashes[j - 1],
            ));
        }
    }
    Ok(Verified {
        base_hash,
        link_hashes,
    })
}

/// Tensors of at least this many elements are hashed by [`verify_lineage`]'s consumer chunk by
/// chunk (the threshold of `create`'s blocks).
const STREAMED_MIN: usize = 1 << 22;

/// Adds tensor `name`'s stages through `links` to their `hashers` (as [`verify_lineage`]'s
/// workers compute them whole: base + each delta, zeros added too), chunk by chunk, so that a
/// large tensor is never held.
fn hash_streamed(
    base: &Model,
    links: &[OpenDelta],
    name: &str,
    hashers: &mut [Sha256],
) -> Result<()> {
    let t = &base.tensors[name];
    let n = t.n_elements();
    let mut decoders = links
        .iter()
        .map(|l| l.stream_decoder(name))
        .collect::<Result<Vec<_>>>()?;
    let mut pages = super::reconstruct::pages_of(links, name, n);
    for h in hashers.iter_mut() {
        h.update(name.as_bytes());
    }
    let len = CHUNK_ELEMS.min(n);
    let (mut v, mut d) = (vec![0f32; len], vec![0f32; len]);
    let mut at = 0;
    while at < n {
        let len = CHUNK_ELEMS.min(n - at);
        let (v, d) = (&mut v[..len], &mut d[..len]);
        base.read_f32_into(name, t, at, v)?;
        for (h, decoder) in hashers.iter_mut().zip(&mut decoders) {
            decoder.fill(d);
            for (a, b) in v.iter_mut().zip(d.iter()) {
                *a += *b;
            }
            h.update(f32_bytes(v));
        }
        at += len;
        for p in &mut pages {
            p.done_through(at);
        }
    }
    Ok(())
}

/// The error of a delta whose parent hash is not `actual`, the hash of `parent` (named for the
/// message).
pub(crate) fn wrong_parent(delta: &OpenDelta, parent: String, actual: &str) -> DeltaError {
    wrong_parent_of(&delta.path, delta.parent_hash(), parent, actual)
}

/// [`wrong_parent`] of the delta at `delta`, whose header names `expected`.
pub(crate) fn wrong_parent_of(
    delta: &std::path::Path,
    expected: &str,
    parent: String,
    actual: &str,
) -> DeltaError {
    DeltaError::WrongParent {
        delta: delta.to_path_buf(),
        parent,
        expected: expected.to_string(),
        actual: actual.to_string(),
    }
}

/// Per-tensor reconstruction error of a delta: max and RMS of |reconstructed - finetuned|
/// relative to the RMS of the true delta (finetuned - base), all in float32 → float64.
#[derive(Debug, Clone, Default)]
pub struct ErrorStats {
    pub max_abs_error: f64,
    pub rms_error: f64,
    pub rms_delta: f64,
    pub max_abs_delta: f64,
}

/// Reconstruction error of `delta` against `base` and `finetuned` over the whole model.
pub fn reconstruction_error(
    base: &Model,
    delta: &OpenDelta,
    finetuned: &Model,
    run: &RunOptions,
) -> Result<ErrorStats> {
    let mut stats = ErrorStats::default();
    let mut sum_err2 = 0f64;
    let mut sum_d2 = 0f64;
    let mut count = 0f64;
    each_tensor(
        base,
        delta,
        run,
        |name| {
            // The three sides chunk by chunk, in order (the sums as over the whole tensor).
            let (tb, tf) = (&base.tensors[name], ft_tensor(finetuned, name)?);
            let n = tb.n_elements();
            let mut pages = delta.pages_of(name, n);
            let mut decoder = delta.stream_decoder(name)?;
            let len = CHUNK_ELEMS.min(n);
            let (mut b, mut f, mut d) = (vec![0f32; len], vec![0f32; len], vec![0f32; len]);
            let mut s = (0f64, 0f64, 0f64, 0f64);
            for at in (0..n).step_by(CHUNK_ELEMS) {
                let len = CHUNK_ELEMS.min(n - at);
                let (b, f, d) = (&mut b[..len], &mut f[..len], &mut d[..len]);
                base.read_f32_into(name, tb, at, b)?;
                finetuned.read_f32_into(name, tf, at, f)?;
                decoder.fill(d);
                pages.done_through(at + len);
                for ((b, f), d) in b.iter().zip(&*f).zip(&*d) {
                    let truth = f64::from(*f - *b);
                    let err = f64::from((*b + *d) - *f);
                    s.0 = s.0.max(err.abs());
                    s.1 += err * err;
                    s.2 = s.2.max(truth.abs());
                    s.3 += truth * truth;
                }
            }
            Ok((s, n))
        },
        |_, (s, n)| {
            stats.max_abs_error = stats.max_abs_error.max(s.0);
            sum_err2 += s.1;
            stats.max_abs_delta = stats.max_abs_delta.max(s.2);
            sum_d2 += s.3;
            count += n as f64;
        },
    )?;
    delta.check_unchanged()?;
    if count > 0.0 {
        stats.rms_error = (sum_err2 / count).sqrt();
        stats.rms_delta = (sum_d2 / count).sqrt();
    }
    Ok(stats)
}

/// Checks `delta` against `base`, then runs `measure` on every tensor in parallel and hands
/// the results to `gather` in name order.
fn each_tensor<R: Send>(
    base: &Model,
    delta: &OpenDelta,
    run: &RunOptions,
    measure: impl Fn(&str) -> Result<R> + Sync,
    mut gather: impl FnMut(&str, R),
) -> Result<()> {
    check_against_base(delta, base)?;
    let names: Vec<&String> = base.tensors.keys().collect();
    ordered_parallel::<_, DeltaError>(
        names.len(),
        run.threads(),
        |i| measure(names[i]),
        |i, r| {
            gather(names[i], r);
            Ok(())
        },
    )
}

/// float32 values as little-endian bytes without copying on little-endian machines.
fn f32_bytes(v: &[f32]) -> Cow<'_, [u8]> {
    #[cfg(target_endian = "little")]
    {
        // SAFETY: f32 has no padding and any byte pattern is a valid u8; the length is exact.
        Cow::Borrowed(unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), v.len() * 4) })
    }
    #[cfg(not(target_endian = "little"))]
    {
        Cow::Owned(v.iter().flat_map(|x| x.to_le_bytes()).collect())
    }
}

/// What a lossy delta loses, measured on the model `apply` rebuilds (base + decoded delta, in
/// the base's dtype) against the fine-tune: rel_l2 = ‖rebuilt − ft‖ / ‖ft‖ and the fraction of
/// the update lost = ‖rebuilt − ft‖ / ‖ft − base‖, per tensor and over the whole model (sums of
/// squares in float64, over the elements where all three are finite).
#[derive(Debug, Clone, Default)]
pub(crate) struct UpdateLoss {
    pub rel_l2: f64,
    pub update_lost: f64,
    /// Per tensor in name order: (name, rel_l2, update_lost).
    pub tensors: Vec<(String, f64, f64)>,
}

impl UpdateLoss {
    /// The tensor that lost the largest fraction of its update (a tensor whose update is zero
    /// and comes back exactly loses nothing).
    pub(crate) fn worst(&self) -> Option<&(String, f64, f64)> {
        self.tensors
            .iter()
            .max_by(|a, b| a.2.partial_cmp(&b.2).unwrap_or(std::cmp::Ordering::Equal))
    }

    /// The tensor farthest from the fine-tune: the largest rel_l2.
    pub(crate) fn largest_rel_l2(&self) -> Option<&(String, f64, f64)> {
        self.tensors
            .iter()
            .max_by(|a, b| a.1.partial_cmp(&b.1).unwrap_or(std::cmp::Ordering::Equal))
    }
}

/// A fraction `err / of`: 0 when both are 0, infinite when only `of` is.
fn ratio(err: f64, of: f64) -> f64 {
    if err == 0.0 { 0.0 } else { err / of }
}

impl UpdateLoss {
    /// The figures as the header key `loss` holds them (infinite ones as null).
    pub(crate) fn figures(&self) -> crate::formats::wdelta::LossFigures {
        let finite = |v: f64| v.is_finite().then_some(v);
        let worst = self.worst();
        let farthest = self.largest_rel_l2();
        crate::formats::wdelta::LossFigures {
            rel_l2: finite(self.rel_l2),
            update_lost: finite(self.update_lost),
            worst_tensor: worst.map(|w| w.0.clone()),
            worst_rel_l2: worst.and_then(|w| finite(w.1)),
            worst_update_lost: worst.and_then(|w| finite(w.2)),
            largest_rel_l2_tensor: farthest.map(|w| w.0.clone()),
            largest_rel_l2: farthest.and_then(|w| finite(w.1)),
            largest_rel_l2_update_lost: farthest.and_then(|w| finite(w.2)),
        }
    }
}

/// Tensor `name` of the fine-tuned model, or an error naming the model.
fn ft_tensor<'m>(finetuned: &'m Model, name: &str) -> Result<&'m super::model::TensorSource> {
    finetuned
        .tensors
        .get(name)
        .ok_or_else(|| DeltaError::TensorNotInModel {
            model: finetuned.path.clone(),
            tensor: name.to_owned(),
        })
}

/// Measures [`UpdateLoss`] of a lossy `delta` (applied to `base` alone) against `finetuned`:
/// tensor by tensor, the base's values held, the delta decoded and the fine-tune read chunk by
/// chunk (as `create` measures it in its encoding pass).
pub(crate) fn update_loss(
    base: &Model,
    delta: &OpenDelta,
    finetuned: &Model,
    run: &RunOptions,
) -> Result<UpdateLoss> {
    let mut tally = LossTally::default();
    each_tensor(
        base,
        delta,
        run,
        |name| {
            // The base read chunk by chunk beside the fine-tune: nothing held follows the
            // tensor.
            let n = base.tensors[name].n_elements();
            let mut pages = delta.pages_of(name, n);
            let b = BaseValues::Read(n);
            let mut decoder = delta.stream_decoder(name)?;
            let mut done = 0;
            tensor_loss_sums(base, finetuned, name, b, |d| {
                decoder.fill(d);
                done += d.len();
                pages.done_through(done);
            })
        },
        |name, s| tally.push(name, s),
    )?;
    delta.check_unchanged()?;
    Ok(tally.finish())
}

/// What `apply` writes for base values `base` and decoded delta values `delta`, as float32:
/// base + delta (a zero delta keeps the base), rounded to the base's dtype (`raw` is scratch).
#[inline(always)]
pub(crate) fn rebuild_as_applied(
    elem: Elem,
    base: &[f32],
    delta: &[f32],
    out: &mut [f32],
    raw: &mut Vec<u8>,
) {
    for ((r, b), d) in out.iter_mut().zip(base).zip(delta) {
        *r = if *d != 0.0 { *b + *d } else { *b };
    }
    if elem.is_float() && elem != Elem::F32 {
        raw.resize(out.len() * elem.size(), 0);
        elem.write_f32(out, raw);
        elem.to_f32(raw, out);
    } else if !elem.is_float() {
        for r in out.iter_mut() {
            *r = r.round_ties_even();
        }
    }
}

/// Lanes of [`LossSums`]: element `i` of a tensor goes to lane `i % LOSS_LANES`, so that the
/// sums vectorize and their bits do not depend on how the tensor is cut into chunks.
const LOSS_LANES: usize = 8;

/// Elements per block of [`LossSums`]: each block is summed in lanes from zero and added to
/// the tensor's sums at its end, so that blocks summed apart (by different workers) give the
/// same bits as the tensor summed in one go.
pub(super) const LOSS_BLOCK: usize = 1 << 20;

/// ‖rebuilt − ft‖², ‖ft‖² and ‖ft − base‖², in [`LOSS_LANES`] lanes each.
#[derive(Debug, Clone, Copy, Default)]
struct Lanes {
    err2: [f64; LOSS_LANES],
    ft2: [f64; LOSS_LANES],
    upd2: [f64; LOSS_LANES],
}

impl Lanes {
    fn add(&mut self, other: &Lanes) {
        for j in 0..LOSS_LANES {
            self.err2[j] += other.err2[j];
            self.ft2[j] += other.ft2[j];
            self.upd2[j] += other.upd2[j];
        }
    }
}

/// One tensor's sums of squares (float64) behind [`UpdateLoss`]: ‖rebuilt − ft‖², ‖ft‖² and
/// ‖ft − base‖², over the elements where all three are finite. Each is summed in
/// [`LOSS_LANES`] lanes in element order within blocks of [`LOSS_BLOCK`] elements, the blocks'
/// lanes added in order, the lanes added in order at the end.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct LossSums {
    /// The whole blocks so far.
    done: Lanes,
    /// The block being summed.
    block: Lanes,
    /// Elements added so far (the lane of the next one).
    seen: usize,
}

impl LossSums {
    /// Sums of a tensor's elements from `start` (a multiple of [`LOSS_BLOCK`]) on, to be added
    /// to the sums before them with [`LossSums::absorb`].
    pub(super) fn starting_at(start: usize) -> LossSums {
        debug_assert!(start.is_multiple_of(LOSS_BLOCK));
        LossSums {
            seen: start,
            ..LossSums::default()
        }
    }

    /// Adds the sums of the elements that follow these ([`LossSums::starting_at`] the end of
    /// these, which is the end of a block).
    pub(super) fn absorb(&mut self, next: &LossSums) {
        debug_assert!(self.seen.is_multiple_of(LOSS_BLOCK));
        self.done.add(&next.done);
        self.block.add(&next.block);
        self.seen = next.seen;
    }

    /// Adds the next elements of the tensor.
    #[inline(always)]
    pub(crate) fn add(&mut self, rebuilt: &[f32], ft: &[f32], base: &[f32]) {
        let n = rebuilt.len().min(ft.len()).min(base.len());
        let (mut r, mut f, mut b) = (&rebuilt[..n], &ft[..n], &base[..n]);
        while !r.is_empty() {
            let take = r.len().min(LOSS_BLOCK - self.seen % LOSS_BLOCK);
            self.add_in_block(&r[..take], &f[..take], &b[..take]);
            (r, f, b) = (&r[take..], &f[take..], &b[take..]);
            if self.seen.is_multiple_of(LOSS_BLOCK) {
                self.done.add(&self.block);
                self.block = Lanes::default();
            }
        }
    }

    #[inline(always)]
    fn add_in_block(&mut self, r: &[f32], f: &[f32], b: &[f32]) {
        let (mut r, mut f, mut b) = (r, f, b);
        // Up to the next lane 0 one at a time, then whole rows of lanes.
        while !r.is_empty() && !self.seen.is_multiple_of(LOSS_LANES) {
            self.lane(self.seen % LOSS_LANES, r[0], f[0], b[0]);
            (r, f, b) = (&r[1..], &f[1..], &b[1..]);
            self.seen += 1;
        }
        let rows = r.len() / LOSS_LANES * LOSS_LANES;
        for ((r, f), b) in r[..rows]
            .chunks_exact(LOSS_LANES)
            .zip(f[..rows].chunks_exact(LOSS_LANES))
            .zip(b[..rows].chunks_exact(LOSS_LANES))
        {
            for j in 0..LOSS_LANES {
                self.lane(j, r[j], f[j], b[j]);
            }
        }
        self.seen += rows;
        for ((r, f), b) in r[rows..].iter().zip(&f[rows..]).zip(&b[rows..]) {
            self.lane(self.seen % LOSS_LANES, *r, *f, *b);
            self.seen += 1;
        }
    }

    #[inline(always)]
    fn lane(&mut self, j: usize, r: f32, f: f32, b: f32) {
        let (r, f, b) = (f64::from(r), f64::from(f), f64::from(b));
        // Non-finite values (NaN, infinities) are left out: they have no distance. Adding
        // zero instead of branching keeps the loop vectorized (the sums start at +0).
        let finite = r.is_finite() & f.is_finite() & b.is_finite();
        let keep = |x: f64| if finite { x } else { 0.0 };
        let s = &mut self.block;
        s.err2[j] += keep((r - f) * (r - f));
        s.ft2[j] += keep(f * f);
        s.upd2[j] += keep((f - b) * (f - b));
    }

    /// ‖rebuilt − ft‖², ‖ft‖² and ‖ft − base‖².
    fn totals(&self) -> [f64; 3] {
        let mut all = self.done;
        all.add(&self.block);
        let sum = |lanes: &[f64; LOSS_LANES]| lanes.iter().fold(0.0, |a, x| a + x);
        [sum(&all.err2), sum(&all.ft2), sum(&all.upd2)]
    }
}

/// A tensor's base values for [`tensor_loss_sums`]: held, or read chunk by chunk.
pub(crate) enum BaseValues<'a> {
    Held(&'a [f32]),
    /// Read from the base, the tensor's element count.
    Read(usize),
}

/// One tensor's [`LossSums`]: `delta` (the decoded delta, chunk by chunk) added to the base
/// values `b` as `apply` adds them, against the fine-tuned values read chunk by chunk.
pub(crate) fn tensor_loss_sums(
    base: &Model,
    ft: &Model,
    name: &str,
    b: BaseValues<'_>,
    mut delta: impl FnMut(&mut [f32]),
) -> Result<LossSums> {
    let tb = &base.tensors[name];
    let elem = base.elem(name, tb)?;
    let tf = ft_tensor(ft, name)?;
    let n = match b {
        BaseValues::Held(b) => b.len(),
        BaseValues::Read(n) => n,
    };
    let len = CHUNK_ELEMS.min(n);
    let (mut f, mut d, mut r) = (vec![0f32; len], vec![0f32; len], vec![0f32; len]);
    let mut read = match b {
        BaseValues::Held(_) => Vec::new(),
        BaseValues::Read(_) => vec![0f32; len],
    };
    let mut raw = Vec::new();
    let mut sums = LossSums::default();
    for at in (0..n).step_by(CHUNK_ELEMS) {
        let len = CHUNK_ELEMS.min(n - at);
        let b = match b {
            BaseValues::Held(b) => &b[at..at + len],
            BaseValues::Read(_) => {
                base.read_f32_into(name, tb, at, &mut read[..len])?;
                &read[..len]
            }
        };
        ft.read_f32_into(name, tf, at, &mut f[..len])?;
        delta(&mut d[..len]);
        loss_chunk(
            elem,
            b,
            &d[..len],
            &mut r[..len],
            &f[..len],
            &mut raw,
            &mut sums,
        );
    }
    Ok(sums)
}

avx2_twin! {
    /// One chunk of [`tensor_loss_sums`] (base `b`, decoded delta `d`, fine-tune `f`; `r` and
    /// `raw` are scratch), compiled for AVX2 too (the float64 lanes fit its registers).
    pub(super) fn loss_chunk(
        elem: Elem,
        b: &[f32],
        d: &[f32],
        r: &mut [f32],
        f: &[f32],
        raw: &mut Vec<u8>,
        sums: &mut LossSums,
    ) {
        rebuild_as_applied(elem, b, d, r, raw);
        sums.add(r, f, b);
    }
}

/// Gathers [`LossSums`] tensor by tensor, in name order, into an [`UpdateLoss`].
#[derive(Debug, Default)]
pub(crate) struct LossTally {
    /// ‖rebuilt − ft‖², ‖ft‖² and ‖ft − base‖² over the tensors so far.
    total: [f64; 3],
    loss: UpdateLoss,
}

impl LossTally {
    pub(crate) fn push(&mut self, name: &str, s: LossSums) {
        let [err2, ft2, upd2] = s.totals();
        for (t, x) in self.total.iter_mut().zip([err2, ft2, upd2]) {
            *t += x;
        }
        self.loss.tensors.push((
            name.to_string(),
            ratio(err2.sqrt(), ft2.sqrt()),
            ratio(err2.sqrt(), upd2.sqrt()),
        ));
    }

    pub(crate) fn finish(mut self) -> UpdateLoss {
        let [err2, ft2, upd2] = self.total;
        self.loss.rel_l2 = ratio(err2.sqrt(), ft2.sqrt());
        self.loss.update_lost = ratio(err2.sqrt(), upd2.sqrt());
        self.loss
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loss_sums_do_not_depend_on_the_cut() {
        // Two and a half blocks: summed in one go, in odd chunks, and block by block apart
        // (as create's workers sum a large tensor) give the same bits.
        let n = 2 * LOSS_BLOCK + LOSS_BLOCK / 2 + 3;
        let wave = |k: f32| (0..n).map(move |i| ((i as f32) * k).sin() * 0.01);
        let (r, f, b): (Vec<f32>, Vec<f32>, Vec<f32>) = (
            wave(0.37).collect(),
            wave(0.41).collect(),
            wave(0.43).collect(),
        );
        let mut whole = LossSums::default();
        whole.add(&r, &f, &b);
        let mut chunked = LossSums::default();
        for at in (0..n).step_by(65_537) {
            let end = (at + 65_537).min(n);
            chunked.add(&r[at..end], &f[at..end], &b[at..end]);
        }
        let mut apart = LossSums::default();
        for at in (0..n).step_by(LOSS_BLOCK) {
            let end = (at + LOSS_BLOCK).min(n);
            let mut block = LossSums::starting_at(at);
            block.add(&r[at..end], &f[at..end], &b[at..end]);
            apart.absorb(&block);
        }
        let bits = |s: &LossSums| s.totals().map(f64::to_bits);
        assert_eq!(bits(&whole), bits(&chunked));
        assert_eq!(bits(&whole), bits(&apart));
        assert!(whole.totals()[0] > 0.0);
    }
}
