//! `apply`: the model at the end of a lineage, rebuilt from the base into a safetensors file.
//! Every tensor's place in the output is known beforehand, so workers write there directly.

use std::collections::BTreeMap;
use std::path::Path;

use super::error::DeltaError;
use super::model::{CHUNK_ELEMS, Elem, Model};
use super::open::{OpenDelta, check_against_base};
use super::outputs::refuse_output_among_inputs;
use super::pipeline::{RunOptions, ordered_parallel};
use super::reconstruct::{IntReconstructor, Reconstructor};
use super::safetensors_out::{self, OutTensor};
use super::verify::{verify_lineage, wrong_parent};
use crate::error::Error;

type Result<T, E = DeltaError> = std::result::Result<T, E>;

/// Dtype of reconstructed tensors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum OutDtype {
    /// The base tensor's dtype.
    #[default]
    Base,
    Fixed(Elem),
}

impl OutDtype {
    /// The output dtype of a tensor whose base has `base`: integer and boolean tensors keep
    /// their dtype whatever is asked (they are rebuilt exactly).
    pub(crate) fn resolve(self, base: Elem) -> Elem {
        match self {
            OutDtype::Fixed(e) if base.is_float() => e,
            _ => base,
        }
    }
}

/// The output of `apply`: the base's tensors in name order, their dtypes and byte lengths
/// in the output, and where each lies in it.
pub(crate) struct OutputPlan<'a> {
    pub(crate) names: Vec<&'a String>,
    pub(crate) elems: Vec<Elem>,
    pub(crate) tensors: Vec<OutTensor>,
    pub(crate) layout: safetensors_out::Layout,
}

/// Plans the output safetensors file: the base's tensors in `dtype`, with `metadata` (the
/// fine-tune's, when the delta recorded it) or else the base's.
pub(crate) fn plan_output<'a>(
    base: &'a Model,
    dtype: OutDtype,
    metadata: Option<&BTreeMap<String, String>>,
) -> Result<OutputPlan<'a>> {
    let names: Vec<&String> = base.tensors.keys().collect();
    let elems: Vec<Elem> = names
        .iter()
        .map(|n| Ok(dtype.resolve(base.elem(n, &base.tensors[n.as_str()])?)))
        .collect::<Result<_>>()?;
    let tensors: Vec<OutTensor> = names
        .iter()
        .zip(&elems)
        .map(|(n, e)| {
            let t = &base.tensors[n.as_str()];
            OutTensor {
                name: (*n).clone(),
                dtype: e.safetensors_name(),
                shape: t.shape.clone(),
                byte_len: (t.n_elements() * e.size()) as u64,
            }
        })
        .collect();
    let layout = safetensors_out::layout(metadata.unwrap_or(&base.metadata), &tensors);
    Ok(OutputPlan {
        names,
        elems,
        tensors,
        layout,
    })
}

/// What `apply` wrote.
#[derive(Debug, Clone)]
pub(crate) struct Applied {
    pub(crate) base_hash: String,
    pub(crate) tensors: usize,
    pub(crate) file_bytes: u64,
    /// The lossy strategy of each link applied, in order: the result is approximate.
    pub(crate) strategies: Vec<&'static str>,
}

/// Reconstructs the model at the end of `links` from `base` into the safetensors file `out`,
/// after verifying every link.
/// `sync` flushes the output to disk before renaming it into place.
pub(crate) fn apply(
    base: &Model,
    links: &[OpenDelta],
    out: &Path,
    dtype: OutDtype,
    sync: bool,
    run: &RunOptions,
) -> Result<Applied> {
    if links.is_empty() {
        return Err(DeltaError::NothingToApply);
    }
    refuse_output_among_inputs(out, base, links.iter().map(|l| l.path.as_path()), None)?;
    // A single delta: the base is hashed on its own thread while the output is computed, and
    // the output is renamed into place only if the hash matched. A lineage is verified first.
    let single = links.len() == 1;
    let mut base_hash = String::new();
    if !single {
        for l in links.iter().filter(|l| l.checksum_pending) {
            l.verify_checksum()?;
        }
    }
    if single {
        check_against_base(&links[0], base)?;
        base.check_elems()?;
    } else {
        base_hash = verify_lineage(base, links, false, run)?.base_hash;
    }
    let OutputPlan {
        names,
        elems,
        tensors,
        layout,
    } = plan_output(
        base,
        dtype,
        links
            .iter()
            .rev()
            .find_map(|l| l.file.header.metadata.as_ref()),
    )?;
    let bar = run.bar(layout.total_len, "applying");
    std::thread::scope(|s| {
        let remembered = single
            .then(|| super::base_hash::remembered(base, run))
            .flatten();
        let hasher = single.then(|| s.spawn(|| super::base_hash::parent_hash(base, run, |_| {})));
        let checksum =
            (single && links[0].checksum_pending).then(|| s.spawn(|| links[0].verify_checksum()));
        crate::fsutil::write_atomically_with::<DeltaError>(out, sync, |file| {
            use std::os::unix::fs::FileExt;
            crate::fsutil::reserve(file, out, layout.total_len)?;
            file.write_all_at(&layout.header, 0)
                .map_err(|e| Error::io(out, e))?;
            // Every tensor's place in the output is known: workers write there directly, so no
            // tensor is ever held whole and the order of completion does not matter.
            ordered_parallel::<_, DeltaError>(
                names.len(),
                run.threads(),
                |i| {
                    let name = names[i].as_str();
                    let elem = elems[i];
                    let n = base.tensors[name].n_elements();
                    let at = layout.offsets[i];
                    let write = |offset: u64, b: &[u8]| {
                        file.write_all_at(b, offset)
                            .map_err(|e| DeltaError::from(Error::io(out, e)))
                    };
                    if elem.is_float() {
                        let mut r = Reconstructor::new(base, links, name)?;
                        write_chunks::<f32>(
                            n,
                            elem.size(),
                            at,
                            |vals, b| {
                                r.next(vals)?;
                                elem.write_f32(vals, b);
                                Ok(())
                            },
                            write,
                        )?;
                    } else {
                        let mut r = IntReconstructor::new(base, links, name)?;
                        let out_elem = r.elem();
                        write_chunks::<i128>(
                            n,
                            elem.size(),
                            at,
                            |vals, b| {
                                r.next(vals)?;
                                out_elem.write_i128(vals, b);
                                Ok(())
                            },
                            write,
                        )?;
                    }
                    Ok(tensors[i].byte_len)
                },
                |_, len| {
                    bar.inc(len);
                    Ok(())
                },
            )?;
            if let Some(c) = checksum {
                c.join().expect("checksum thread")?;
            }
            if let Some(h) = hasher {
                base_hash = h.join().expect("hashing thread")?;
                if remembered.as_ref() == Some(&base_hash) {
                    // Taken from the cache, not from these reads: still as remembered?
                    super::base_hash::recheck_remembered(base, &base_hash)?;
                }
                if base_hash != links[0].parent_hash() {
                    return Err(wrong_parent(
                        &links[0],
                        base.path.display().to_string(),
                        &base_hash,
                    ));
                }
            }
            // The links' bytes were read after their checksums were verified.
            for l in links {
                l.check_unchanged()?;
            }
            Ok(())
        })
    })?;
    bar.finish();
    Ok(Applied {
        base_hash,
        tensors: names.len(),
        file_bytes: layout.total_len,
        strategies: links
            .iter()
            .map(|l| l.file.header.strategy.name())
            .collect(),
    })
}

/// Writes `n` elements of `elem_size` bytes from `at` on, `CHUNK_ELEMS` at a time: `fill` puts
/// the next chunk's values and their encoding into the two buffers, `write` stores the bytes.
fn write_chunks<T: Copy + Default>(
    n: usize,
    elem_size: usize,
    mut at: u64,
    mut fill: impl FnMut(&mut [T], &mut [u8]) -> Result<()>,
    write: impl Fn(u64, &[u8]) -> Result<()>,
) -> Result<()> {
    let mut vals = vec![T::default(); CHUNK_ELEMS.min(n)];
    let mut bytes = vec![0u8; vals.len() * elem_size];
    let mut done = 0;
    while done < n {
        let len = CHUNK_ELEMS.min(n - done);
        let b = &mut bytes[..len * elem_size];
        fill(&mut vals[..len], b)?;
        write(at, b)?;
        at += b.len() as u64;
        done += len;
    }
    Ok(())
}
