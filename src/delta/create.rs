//! `create`: the delta of a fine-tuned model against its base (or against the reconstruction of
//! a chain of deltas on the base), encoded tensor by tensor in parallel and written in name
//! order, so the bytes do not depend on the number of threads.

use std::io::{BufWriter, Write};
use std::path::Path;

use super::codec::{self, EncodeOptions};
use super::error::DeltaError;
use super::model::{CHUNK_ELEMS, Elem, Model, structure_differences};
use super::open::OpenDelta;
use super::outputs::refuse_output_among_inputs;
use super::pipeline::{RunOptions, ordered_parallel};
use super::reconstruct::{IntReconstructor, reconstruct_into};
use super::spool::{Array, held};
use super::verify::{
    BaseValues, LossSums, LossTally, UpdateLoss, tensor_loss_sums, verify_lineage,
};
use crate::error::Error;
use crate::formats::wdelta::{
    ArrayRef, Header, OwnedArray, PREAMBLE_LEN, SUPPORTED_VERSIONS, Strategy, TensorArrays,
    WdeltaWriter, header_json, header_json_in_room, widest_loss,
};

type Result<T, E = DeltaError> = std::result::Result<T, E>;

thread_local! {
    /// Per-worker buffer for a tensor's delta in `create`.
    static DELTA_SCRATCH: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
    /// Per-worker buffer for a tensor's base values, kept while the loss is measured.
    static BASE_SCRATCH: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Fine-tune bytes encoded between two starts of the delta's writeback.
const WRITEBACK_EVERY: u64 = 64 << 20;

/// What `create` wrote.
#[derive(Debug, Clone)]
pub(crate) struct Created {
    pub(crate) parent_hash: String,
    pub(crate) tensors: usize,
    pub(crate) file_bytes: u64,
    /// Bytes the finetuned tensors take as stored.
    pub(crate) dense_bytes: u64,
    /// What the delta loses against the fine-tune (measured against a plain base; a chain's
    /// loss is not), as recorded in its header.
    pub(crate) loss: Option<UpdateLoss>,
}

/// Writes the delta of `finetuned` against `base` (or against the float32 reconstruction of
/// `base` through `chain`) to `out`.
pub(crate) fn create(
    base: &Model,
    links: &[OpenDelta],
    ft: &Model,
    out: &Path,
    enc: &EncodeOptions,
    run: &RunOptions,
) -> Result<Created> {
    validate_encode_options(enc)?;
    refuse_output_among_inputs(out, base, links.iter().map(|l| l.path.as_path()), Some(ft))?;
    let differences = structure_differences(base, ft);
    if !differences.is_empty() {
        return Err(DeltaError::ModelsDiffer {
            base: base.path.clone(),
            finetuned: ft.path.clone(),
            differences,
        });
    }
    base.check_elems()?;
    ft.check_elems()?;
    check_integer_dtypes(base, ft)?;
    // Without a chain, the base is hashed on its own thread while the deltas are computed;
    // records wait in memory until the hash, which the header starts with, is known.
    let known = if links.is_empty() {
        None
    } else {
        let v = verify_lineage(base, links, true, run)?;
        Some(v.link_hashes.last().cloned().unwrap_or_default())
    };
    // Against a plain base, the loss is measured in the encoding pass; the header is written
    // with room for the figures and filled in once they are known.
    let measure = links.is_empty();
    let header_for = |parent_hash: String| Header {
        parent_hash,
        strategy: enc.strategy,
        metadata: (ft.metadata != base.metadata).then(|| ft.metadata.clone()),
        loss: measure.then(|| widest_loss(base.tensors.keys().map(String::as_str))),
        tensors: base
            .tensors
            .iter()
            .map(|(name, t)| {
                let base_dtype = t.elem.map(Elem::numpy_name);
                (name.clone(), codec::entry_for(&t.shape, enc, base_dtype))
            })
            .collect(),
    };
    let names: Vec<&String> = base.tensors.keys().collect();
    // Beside the output, where there is room for it (the output's temporary file goes there).
    let spool_dir = crate::fsutil::dir_of(out);
    let bar = run.bar(ft.data_bytes(), "creating");
    let mut file_bytes = 0;
    let mut loss = None;
    let mut parent_hash = known.clone().unwrap_or_default();
    std::thread::scope(|s| {
        let mut hasher = known
            .is_none()
            .then(|| s.spawn(|| super::base_hash::parent_hash(base, run, |_| {})));
        crate::fsutil::write_atomically_with::<DeltaError>(out, true, |file| {
            let mut buffered = BufWriter::with_capacity(1 << 20, file);
            let w = &mut buffered;
            // Bytes of records given to the writer since its pages were last sent to disk.
            let mut unsent = 0u64;
            let mut parent = known.clone();
            let mut late = LateWriter {
                out: Some(w),
                writer: None,
                hashed: !measure,
                pending: Vec::new(),
            };
            let mut tally = LossTally::default();
            ordered_parallel::<_, DeltaError>(
                names.len(),
                run.threads(),
                |i| encode_tensor(base, links, ft, names[i], enc, measure, spool_dir),
                |i, (len, arrays, sums): (u64, Vec<Array>, Option<LossSums>)| {
                    if let Some(sums) = sums {
                        tally.push(names[i], sums);
                    }
                    if parent.is_none()
                        && hasher
                            .as_ref()
                            .is_some_and(std::thread::ScopedJoinHandle::is_finished)
                    {
                        parent = hasher
                            .take()
                            .map(|h| h.join().expect("hashing thread"))
                            .transpose()?;
                    }
                    late.pending.push((i, arrays));
                    let header = match late.writer {
                        None => parent.clone().map(&header_for),
                        Some(_) => None,
                    };
                    late.flush(header.as_ref(), enc.version, &names, out)?;
                    // The final fsync then waits for the last pages only.
                    unsent += len;
                    if late.writer.is_some() && unsent >= WRITEBACK_EVERY {
                        crate::fsutil::start_writeback(file, 0, None);
                        unsent = 0;
                    }
                    bar.inc(len);
                    Ok(())
                },
            )?;
            if parent.is_none() {
                parent = hasher
                    .take()
                    .map(|h| h.join().expect("hashing thread"))
                    .transpose()?;
            }
            let mut header = header_for(parent.clone().unwrap_or_default());
            late.flush(Some(&header), enc.version, &names, out)?;
            let writer = late
                .writer
                .expect("the header is written once the hash is known");
            file_bytes = if measure {
                let (_, written) = writer.finish_unhashed();
                buffered.flush().map_err(|e| Error::io(out, e))?;
                drop(buffered);
                let measured = tally.finish();
                let room = header_json(&header, enc.version).len();
                header.loss = Some(measured.figures());
                let json = header_json_in_room(&header, enc.version, room)
                    .expect("the reserved room holds any loss figures of these tensors");
                loss = Some(measured);
                seal_with_header(file, out, &json, written)?
            } else {
                let (_, total) = writer.finish().map_err(|e| Error::io(out, e))?;
                buffered.flush().map_err(|e| Error::io(out, e))?;
                total
            };
            parent_hash = parent.unwrap_or_default();
            // The chain's bytes were read again after their checksums were verified.
            for l in links {
                l.check_unchanged()?;
            }
            Ok(())
        })
    })?;
    bar.finish();
    Ok(Created {
        parent_hash,
        tensors: names.len(),
        file_bytes,
        dense_bytes: ft.data_bytes(),
        loss,
    })
}

/// One tensor's records, its length in the fine-tune, and (`measure`, against a plain base)
/// the sums of its loss: in blocks over the workers when it is large, else whole.
fn encode_tensor(
    base: &Model,
    links: &[OpenDelta],
    ft: &Model,
    name: &str,
    enc: &EncodeOptions,
    measure: bool,
    spool_dir: &Path,
) -> Result<(u64, Vec<Array>, Option<LossSums>)> {
    let tf = &ft.tensors[name];
    if super::blocks::applies(base, name) {
        // Large: in blocks over the workers, memory bounded by the block size.
        let inputs = super::blocks::Inputs::new(base, links, ft, name)?;
        let (arrays, sums) = match enc.strategy {
            Strategy::Int4 => super::int4_blocks::encode(&inputs, enc, spool_dir)?,
            Strategy::Sparse => super::sparse_blocks::encode(&inputs, enc, spool_dir)?,
            Strategy::Quantized => super::quantized_blocks::encode(&inputs, enc, spool_dir)?,
        };
        return Ok((tf.len as u64, arrays, sums));
    }
    let n = tf.n_elements();
    // The delta buffer is reused across tensors: fresh gigabyte allocations
    // cost a page fault per 4 KiB.
    let mut scratch = DELTA_SCRATCH.with(|s| std::mem::take(&mut *s.borrow_mut()));
    if scratch.len() < n {
        scratch.resize(n, 0.0);
    }
    let d = &mut scratch[..n];
    // Against a plain base its values are kept for the loss: read where they
    // are kept, the delta computed beside them. Through a chain, the delta is
    // computed in place over the reconstruction.
    let kept = if measure {
        let mut b = BASE_SCRATCH.with(|s| std::mem::take(&mut *s.borrow_mut()));
        if b.len() < n {
            b.resize(n, 0.0);
        }
        reconstruct_into(base, links, name, &mut b[..n])?;
        subtract_from_finetuned(ft, name, Some(&b[..n]), d)?;
        Some(b)
    } else {
        reconstruct_into(base, links, name, d)?;
        subtract_from_finetuned(ft, name, None, d)?;
        None
    };
    let t = &base.tensors[name];
    let arrays = codec::encode(d, &t.shape, enc);
    DELTA_SCRATCH.with(|s| *s.borrow_mut() = scratch);
    if t.elem.is_some_and(|e| !e.is_float()) {
        check_integers_exact(base, links, ft, name, &t.shape, enc, &arrays)?;
    }
    let sums = match kept {
        Some(b) => {
            let mut decoder = decoder_of(&t.shape, enc, &arrays);
            let sums = tensor_loss_sums(base, ft, name, BaseValues::Held(&b[..n]), |d| {
                decoder.fill(d);
            });
            BASE_SCRATCH.with(|s| *s.borrow_mut() = b);
            Some(sums?)
        }
        None => None,
    };
    Ok((tf.len as u64, held(arrays), sums))
}

/// `d` = the fine-tuned values of tensor `name` − the previous ones (`prev`, or `d` itself
/// when None), read chunk by chunk. Equal bits are no change (NaN − NaN would poison
/// quantized's row scale and int4's range).
fn subtract_from_finetuned(
    ft: &Model,
    name: &str,
    prev: Option<&[f32]>,
    d: &mut [f32],
) -> Result<()> {
    let tf = &ft.tensors[name];
    let mut buf = vec![0f32; CHUNK_ELEMS.min(d.len())];
    for (ci, chunk) in d.chunks_mut(CHUNK_ELEMS).enumerate() {
        let start = ci * CHUNK_ELEMS;
        let f = &mut buf[..chunk.len()];
        ft.read_f32_into(name, tf, start, f)?;
        let p = prev.map(|p| &p[start..start + chunk.len()]);
        codec::subtract_chunk(p, f, chunk);
    }
    Ok(())
}

/// A decoder of the arrays just encoded for a tensor of `shape`, as `apply` decodes them.
fn decoder_of<'a>(
    shape: &[u64],
    enc: &EncodeOptions,
    arrays: &'a [OwnedArray],
) -> codec::Decoder<'a> {
    let entry = codec::entry_for(shape, enc, None);
    codec::Decoder::new(&entry, &array_refs(arrays))
}

/// Finishes a delta written without its checksum ([`WdeltaWriter::new_unhashed`]): writes
/// `header` over the one of the same length at the start, then hashes the `written` bytes (read
/// back from the page cache) and appends the checksum. Returns the file's length.
fn seal_with_header(file: &std::fs::File, out: &Path, header: &[u8], written: u64) -> Result<u64> {
    use sha2::{Digest, Sha256};
    use std::os::unix::fs::FileExt;
    let io = |e| Error::io(out, e);
    file.write_all_at(header, PREAMBLE_LEN as u64).map_err(io)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; (1 << 20).min(written as usize)];
    let mut at = 0;
    while at < written {
        let n = buf.len().min((written - at) as usize);
        file.read_exact_at(&mut buf[..n], at).map_err(io)?;
        hasher.update(&buf[..n]);
        at += n as u64;
    }
    file.write_all_at(&hasher.finalize(), written).map_err(io)?;
    Ok(written + crate::formats::wdelta::CHECKSUM_LEN as u64)
}

/// An integer (or boolean) tensor of the base has the same dtype in the fine-tuned model.
fn check_integer_dtypes(base: &Model, ft: &Model) -> Result<()> {
    for (name, t) in &base.tensors {
        let Some(e) = t.elem.filter(|e| !e.is_float()) else {
            continue;
        };
        let f = &ft.tensors[name.as_str()];
        if f.elem != Some(e) {
            return Err(DeltaError::IntegerDtypeChanged {
                tensor: name.clone(),
                base: base.shard_path(t).to_path_buf(),
                base_dtype: t.dtype,
                finetuned: ft.shard_path(f).to_path_buf(),
                finetuned_dtype: f.dtype,
            });
        }
    }
    Ok(())
}

/// Integer tensors are stored exactly or not at all: the encoded delta, rounded and added to
/// the base (through the chain) as `apply` does, must give the fine-tuned values. An unchanged
/// tensor has a zero delta, which every strategy encodes exactly.
fn check_integers_exact(
    base: &Model,
    links: &[OpenDelta],
    ft: &Model,
    name: &str,
    shape: &[u64],
    enc: &EncodeOptions,
    arrays: &[OwnedArray],
) -> Result<()> {
    let mut decoder = decoder_of(shape, enc, arrays);
    let mut prev = IntReconstructor::new(base, links, name)?;
    let tf = &ft.tensors[name];
    let n = tf.n_elements();
    let len = CHUNK_ELEMS.min(n);
    let (mut p, mut f, mut d) = (vec![0i128; len], vec![0i128; len], vec![0f32; len]);
    let mut done = 0;
    while done < n {
        let len = CHUNK_ELEMS.min(n - done);
        prev.next(&mut p[..len])?;
        ft.read_ints_into(name, tf, done, &mut f[..len])?;
        decoder.fill(&mut d[..len]);
        for k in 0..len {
            let got = p[k].saturating_add(d[k].round_ties_even() as i128);
            if !d[k].is_finite() || got != f[k] {
                return Err(DeltaError::IntegerNotExact {
                    finetuned: ft.shard_path(tf).to_path_buf(),
                    tensor: name.to_string(),
                    position: (done + k) as u64,
                    expected: f[k].to_string(),
                    actual: if d[k].is_finite() {
                        got.to_string()
                    } else {
                        d[k].to_string()
                    },
                    strategy: enc.strategy.name(),
                });
            }
        }
        done += len;
    }
    Ok(())
}

fn validate_encode_options(enc: &EncodeOptions) -> Result<()> {
    if !(0.0..1.0).contains(&enc.sparsity) {
        return Err(DeltaError::Sparsity(enc.sparsity));
    }
    if !(0.0..=1.0).contains(&enc.outlier_fraction) {
        return Err(DeltaError::OutlierFraction(enc.outlier_fraction));
    }
    if !SUPPORTED_VERSIONS.contains(&enc.version) {
        return Err(DeltaError::FormatVersion(enc.version));
    }
    Ok(())
}

/// Holds records until the header can be written (it starts with the parent hash).
struct LateWriter<W: std::io::Write> {
    out: Option<W>,
    writer: Option<WdeltaWriter<W>>,
    /// Whether the writer computes the checksum (not when the header is rewritten after).
    hashed: bool,
    pending: Vec<(usize, Vec<Array>)>,
}

impl<W: std::io::Write> LateWriter<W> {
    /// With a header, writes it (once) and every pending record.
    fn flush(
        &mut self,
        header: Option<&Header>,
        version: u32,
        names: &[&String],
        out: &Path,
    ) -> Result<()> {
        if self.writer.is_none()
            && let Some(h) = header
            && let Some(w) = self.out.take()
        {
            let writer = if self.hashed {
                WdeltaWriter::new(w, h, version)
            } else {
                WdeltaWriter::new_unhashed(w, h, version)
            };
            self.writer = Some(writer.map_err(|e| Error::io(out, e))?);
        }
        if let Some(wr) = &mut self.writer {
            for (i, arrays) in self.pending.drain(..) {
                for a in &arrays {
                    a.write(wr, names[i], out)?;
                }
            }
        }
        Ok(())
    }
}

/// The arrays just encoded, as the decoder reads them from a file.
fn array_refs(arrays: &[OwnedArray]) -> TensorArrays<'_> {
    TensorArrays {
        fields: arrays
            .iter()
            .map(|a| ArrayRef {
                dtype: a.dtype,
                data: &a.data,
            })
            .collect(),
    }
}
