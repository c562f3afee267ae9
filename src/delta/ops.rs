//! create, apply and verify: streaming over tensors in name order, parallel across tensors,
//! with output bytes that do not depend on the number of threads.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use indicatif::{ProgressBar, ProgressStyle};
use memmap2::Mmap;
use sha2::{Digest, Sha256};

use super::codec::{self, EncodeOptions};
use super::format::{self, FormatError, Header, OwnedArray, WdeltaFile, WdeltaWriter};
use super::model::{Elem, Model, structure_differences};
use super::pipeline::ordered_parallel;
use super::safetensors_out::{self, OutTensor};
use crate::error::{Error, Result};

/// How to run: threads (0 = one per core) and whether to draw a progress bar.
#[derive(Debug, Clone, Copy, Default)]
pub struct RunOptions {
    pub threads: usize,
    pub progress: bool,
}

impl RunOptions {
    pub fn threads(&self) -> usize {
        if self.threads > 0 {
            self.threads
        } else {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        }
    }

    fn bar(&self, len: u64, what: &str) -> ProgressBar {
        if !self.progress {
            return ProgressBar::hidden();
        }
        let bar = ProgressBar::new(len);
        bar.set_style(
            ProgressStyle::with_template(
                "{msg:>10} [{bar:40}] {binary_bytes}/{binary_total_bytes} {elapsed}<{eta}",
            )
            .expect("valid template")
            .progress_chars("=> "),
        );
        bar.set_message(what.to_string());
        bar
    }
}

/// Dtype of reconstructed tensors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OutDtype {
    /// The base tensor's dtype.
    #[default]
    Base,
    Fixed(Elem),
}

impl OutDtype {
    pub fn resolve(self, base: Elem) -> Elem {
        match self {
            OutDtype::Base => base,
            OutDtype::Fixed(e) => e,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Opening .wdelta files
// ---------------------------------------------------------------------------------------------

enum Bytes {
    Map(Mmap),
    Owned(Vec<u8>),
}

/// A `.wdelta` file, checksum verified and validated, with its bytes.
pub struct OpenDelta {
    pub path: PathBuf,
    pub file: WdeltaFile,
    bytes: Bytes,
}

impl std::fmt::Debug for OpenDelta {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenDelta")
            .field("path", &self.path)
            .field("file", &self.file)
            .finish()
    }
}

/// Turns a format error into the user error, naming the file.
pub fn format_error(path: &Path, e: FormatError) -> Error {
    Error::Other(format!("{}: {e}", path.display()))
}

impl OpenDelta {
    pub fn open(path: &Path) -> Result<OpenDelta> {
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
        if len == 0 {
            return Self::from_bytes(path, Vec::new());
        }
        // SAFETY: read-only map; the checksum catches a file changing under us.
        let map = unsafe { Mmap::map(&file) }.map_err(|e| Error::io(path, e))?;
        let parsed = Self::verify_and_parse(path, &map)?;
        Ok(OpenDelta {
            path: path.to_path_buf(),
            file: parsed,
            bytes: Bytes::Map(map),
        })
    }

    pub fn from_bytes(path: &Path, bytes: Vec<u8>) -> Result<OpenDelta> {
        let parsed = Self::verify_and_parse(path, &bytes)?;
        Ok(OpenDelta {
            path: path.to_path_buf(),
            file: parsed,
            bytes: Bytes::Owned(bytes),
        })
    }

    fn verify_and_parse(path: &Path, bytes: &[u8]) -> Result<WdeltaFile> {
        if !format::is_wdelta(bytes) || bytes.len() < format::PREAMBLE_LEN + format::CHECKSUM_LEN {
            // Let the parser phrase the error (bad magic, too short).
            return WdeltaFile::parse(bytes).map_err(|e| format_error(path, e));
        }
        format::verify_checksum(bytes).map_err(|e| format_error(path, e))?;
        WdeltaFile::parse_verified(bytes).map_err(|e| format_error(path, e))
    }

    pub fn bytes(&self) -> &[u8] {
        match &self.bytes {
            Bytes::Map(m) => m,
            Bytes::Owned(v) => v,
        }
    }

    pub fn parent_hash(&self) -> &str {
        &self.file.header.parent_hash
    }

    /// Decodes one tensor's delta (`n` = its element count, checked against the base).
    pub fn decode(&self, name: &str, n: usize) -> Result<Vec<f32>> {
        let entry = self.file.header.tensors.get(name).ok_or_else(|| {
            Error::Other(format!(
                "{}: no tensor {name} in the delta",
                self.path.display()
            ))
        })?;
        let arrays = self
            .file
            .arrays(self.bytes(), name)
            .map_err(|e| format_error(&self.path, e))?;
        let mut out = vec![0f32; n];
        codec::decode(entry, &arrays, &mut out);
        self.release(name);
        Ok(out)
    }

    fn release(&self, name: &str) {
        if let (Bytes::Map(m), Some((start, len))) = (&self.bytes, self.file.tensor_span(name)) {
            // SAFETY: read-only file-backed map: released pages are read again if touched.
            let _ =
                unsafe { m.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start, len) };
        }
    }
}

/// Checks that a delta covers exactly the base's tensors with the same shapes.
pub fn check_against_base(delta: &OpenDelta, base: &Model) -> Result<()> {
    let mut diffs = Vec::new();
    for (name, e) in &delta.file.header.tensors {
        match base.tensors.get(name) {
            None => diffs.push(format!("only in the delta: {name}")),
            Some(t) if t.shape != e.shape => diffs.push(format!(
                "shape of {name}: {:?} in the delta, {:?} in the base",
                e.shape, t.shape
            )),
            Some(_) => {}
        }
    }
    for name in base.tensors.keys() {
        if !delta.file.header.tensors.contains_key(name) {
            diffs.push(format!("only in the base: {name}"));
        }
    }
    if diffs.is_empty() {
        Ok(())
    } else {
        Err(Error::Other(format!(
            "{} does not fit the base {}:\n  {}",
            delta.path.display(),
            base.path.display(),
            diffs.join("\n  ")
        )))
    }
}

fn check_elems(model: &Model) -> Result<()> {
    for (name, t) in &model.tensors {
        model.elem(name, t)?;
    }
    Ok(())
}

/// The hash mismatch message, with both hashes.
pub fn hash_mismatch(delta: &Path, parent: &str, expected: &str, actual: &str) -> Error {
    Error::Other(format!(
        "{}: wrong parent: the delta was made against a model with hash\n  expected {expected}\n  \
         but {parent} hashes to\n  actual   {actual}",
        delta.display()
    ))
}

/// float32 values as little-endian bytes without copying on little-endian machines.
pub fn f32_bytes(v: &[f32]) -> Cow<'_, [u8]> {
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

/// base + each link's delta, in float32, as the reference reconstructs (`base + delta`).
fn reconstruct(base: &Model, links: &[OpenDelta], name: &str) -> Result<Vec<f32>> {
    let t = &base.tensors[name];
    let mut v = base.load_f32(name, t)?;
    for link in links {
        let d = link.decode(name, v.len())?;
        for (a, b) in v.iter_mut().zip(&d) {
            *a += *b;
        }
    }
    Ok(v)
}

// ---------------------------------------------------------------------------------------------
// verify
// ---------------------------------------------------------------------------------------------

/// Result of verifying a lineage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    pub base_hash: String,
    /// For each link, the hash of its float32 reconstruction (what a next link must name).
    pub link_hashes: Vec<String>,
}

/// Verifies that `links` apply in order to `base`: the first link's parent hash is the base's,
/// and every later link's is the float32 reconstruction of the one before.
/// The reconstruction hashes are computed (one decoding pass) when there is more than one link
/// or `hash_last` asks for the last one.
pub fn verify_lineage(
    base: &Model,
    links: &[OpenDelta],
    hash_last: bool,
    run: &RunOptions,
) -> Result<Verified> {
    for l in links {
        check_against_base(l, base)?;
    }
    check_elems(base)?;
    let bar = run.bar(base.data_bytes(), "hashing");
    let base_hash = base.parent_hash(|n| bar.inc(n));
    bar.finish_and_clear();
    let Some(first) = links.first() else {
        return Ok(Verified {
            base_hash,
            link_hashes: Vec::new(),
        });
    };
    if first.parent_hash() != base_hash {
        return Err(hash_mismatch(
            &first.path,
            &base.path.display().to_string(),
            first.parent_hash(),
            &base_hash,
        ));
    }
    if links.len() == 1 && !hash_last {
        return Ok(Verified {
            base_hash,
            link_hashes: Vec::new(),
        });
    }
    // Every link's reconstruction is hashed, in name order.
    let names: Vec<&String> = base.tensors.keys().collect();
    let mut hashers: Vec<Sha256> = links.iter().map(|_| Sha256::new()).collect();
    let bar = run.bar(base.data_bytes(), "verifying");
    ordered_parallel(
        names.len(),
        run.threads(),
        |i| {
            let name = names[i];
            let t = &base.tensors[name.as_str()];
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
            Ok((t.len as u64, out))
        },
        |i, (len, stages)| {
            for (h, v) in hashers.iter_mut().zip(&stages) {
                h.update(names[i].as_bytes());
                h.update(f32_bytes(v));
            }
            bar.inc(len);
            Ok(())
        },
    )?;
    bar.finish_and_clear();
    let link_hashes: Vec<String> = hashers
        .into_iter()
        .map(|h| format::hex(&h.finalize()))
        .collect();
    for j in 1..links.len() {
        if links[j].parent_hash() != link_hashes[j - 1] {
            return Err(hash_mismatch(
                &links[j].path,
                &format!("the reconstruction through {}", links[j - 1].path.display()),
                links[j].parent_hash(),
                &link_hashes[j - 1],
            ));
        }
    }
    Ok(Verified {
        base_hash,
        link_hashes,
    })
}

// ---------------------------------------------------------------------------------------------
// create
// ---------------------------------------------------------------------------------------------

/// What `create` wrote.
#[derive(Debug, Clone)]
pub struct Created {
    pub parent_hash: String,
    pub tensors: usize,
    pub file_bytes: u64,
    /// Bytes the finetuned tensors take as stored.
    pub dense_bytes: u64,
}

/// Writes the delta of `finetuned` against `base` (or against the float32 reconstruction of
/// `base` through `chain`) to `out`.
pub fn create(
    base: &Model,
    links: &[OpenDelta],
    ft: &Model,
    out: &Path,
    enc: &EncodeOptions,
    run: &RunOptions,
) -> Result<Created> {
    validate_encode_options(enc)?;
    let diffs = structure_differences(base, ft);
    if !diffs.is_empty() {
        return Err(Error::Other(format!(
            "tensor names and shapes of {} and {} differ:\n  {}",
            base.path.display(),
            ft.path.display(),
            diffs.join("\n  ")
        )));
    }
    check_elems(base)?;
    check_elems(ft)?;
    let parent_hash = if links.is_empty() {
        let bar = run.bar(base.data_bytes(), "hashing");
        let h = base.parent_hash(|n| bar.inc(n));
        bar.finish_and_clear();
        h
    } else {
        let v = verify_lineage(base, links, true, run)?;
        v.link_hashes.last().cloned().unwrap_or_default()
    };
    let header = Header {
        parent_hash: parent_hash.clone(),
        strategy: enc.strategy,
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
    let bar = run.bar(ft.data_bytes(), "creating");
    let mut file_bytes = 0;
    write_with(out, |w| {
        let mut writer =
            WdeltaWriter::new(w, &header, enc.version).map_err(|e| Error::io(out, e))?;
        ordered_parallel(
            names.len(),
            run.threads(),
            |i| {
                let name = names[i];
                let tf = &ft.tensors[name.as_str()];
                let mut d = reconstruct(base, links, name)?;
                ft.for_each_f32_chunk(name, tf, |start, vals| {
                    for (p, f) in d[start..start + vals.len()].iter_mut().zip(vals) {
                        *p = *f - *p;
                    }
                })?;
                let t = &base.tensors[name.as_str()];
                Ok((tf.len as u64, codec::encode(&d, &t.shape, enc)))
            },
            |i, (len, arrays): (u64, Vec<OwnedArray>)| {
                for a in &arrays {
                    writer.record(names[i], a).map_err(|e| Error::io(out, e))?;
                }
                bar.inc(len);
                Ok(())
            },
        )?;
        let (_, total) = writer.finish().map_err(|e| Error::io(out, e))?;
        file_bytes = total;
        Ok(())
    })?;
    bar.finish_and_clear();
    Ok(Created {
        parent_hash,
        tensors: names.len(),
        file_bytes,
        dense_bytes: ft.data_bytes(),
    })
}

pub fn validate_encode_options(enc: &EncodeOptions) -> Result<()> {
    if !(0.0..1.0).contains(&enc.sparsity) {
        return Err(Error::Other(format!(
            "--sparsity {} is outside [0, 1)",
            enc.sparsity
        )));
    }
    if !(0.0..=1.0).contains(&enc.outlier_fraction) {
        return Err(Error::Other(format!(
            "--outlier-fraction {} is outside [0, 1]",
            enc.outlier_fraction
        )));
    }
    if !format::SUPPORTED_VERSIONS.contains(&enc.version) {
        return Err(Error::Other(format!(
            "--format-version {} is not 1 or 2",
            enc.version
        )));
    }
    Ok(())
}

/// Writes `out` atomically with a fill function returning our errors.
fn write_with(
    out: &Path,
    fill: impl FnOnce(&mut std::io::BufWriter<&File>) -> Result<()>,
) -> Result<()> {
    let mut failure = None;
    let r = crate::fsutil::write_atomically(out, |w| {
        fill(w).map_err(|e| {
            let msg = e.to_string();
            failure = Some(e);
            std::io::Error::other(msg)
        })
    });
    match (r, failure) {
        (_, Some(e)) => Err(e),
        (r, None) => r,
    }
}

// ---------------------------------------------------------------------------------------------
// apply
// ---------------------------------------------------------------------------------------------

/// What `apply` wrote.
#[derive(Debug, Clone)]
pub struct Applied {
    pub base_hash: String,
    pub tensors: usize,
    pub file_bytes: u64,
}

/// Reconstructs the model at the end of `links` from `base` into the safetensors file `out`,
/// after verifying every link.
pub fn apply(
    base: &Model,
    links: &[OpenDelta],
    out: &Path,
    dtype: OutDtype,
    run: &RunOptions,
) -> Result<Applied> {
    if links.is_empty() {
        return Err(Error::Other("no .wdelta file to apply".into()));
    }
    let verified = verify_lineage(base, links, false, run)?;
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
                name: n.to_string(),
                dtype: e.safetensors_name(),
                shape: t.shape.clone(),
                byte_len: (t.n_elements() * e.size()) as u64,
            }
        })
        .collect();
    let layout = safetensors_out::layout(&base.metadata, &tensors);
    let bar = run.bar(layout.total_len, "applying");
    write_with(out, |w| {
        w.write_all(&layout.header).map_err(|e| Error::io(out, e))?;
        ordered_parallel(
            names.len(),
            run.threads(),
            |i| {
                let v = reconstruct(base, links, names[i])?;
                let mut bytes = Vec::new();
                elems[i].from_f32(&v, &mut bytes);
                Ok(bytes)
            },
            |_, bytes: Vec<u8>| {
                w.write_all(&bytes).map_err(|e| Error::io(out, e))?;
                bar.inc(bytes.len() as u64);
                Ok(())
            },
        )
    })?;
    bar.finish_and_clear();
    Ok(Applied {
        base_hash: verified.base_hash,
        tensors: names.len(),
        file_bytes: layout.total_len,
    })
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
    check_against_base(delta, base)?;
    let names: Vec<&String> = base.tensors.keys().collect();
    let mut stats = ErrorStats::default();
    let mut sum_err2 = 0f64;
    let mut sum_d2 = 0f64;
    let mut count = 0f64;
    ordered_parallel(
        names.len(),
        run.threads(),
        |i| {
            let name = names[i];
            let t = &base.tensors[name.as_str()];
            let b = base.load_f32(name, t)?;
            let ft_t = finetuned.tensors.get(name.as_str()).ok_or_else(|| {
                Error::Other(format!("{}: no tensor {name}", finetuned.path.display()))
            })?;
            let f = finetuned.load_f32(name, ft_t)?;
            let d = delta.decode(name, b.len())?;
            let mut s = (0f64, 0f64, 0f64, 0f64);
            for ((b, f), d) in b.iter().zip(&f).zip(&d) {
                let truth = (*f - *b) as f64;
                let err = ((*b + *d) - *f) as f64;
                s.0 = s.0.max(err.abs());
                s.1 += err * err;
                s.2 = s.2.max(truth.abs());
                s.3 += truth * truth;
            }
            Ok((s, b.len()))
        },
        |_, (s, n)| {
            stats.max_abs_error = stats.max_abs_error.max(s.0);
            sum_err2 += s.1;
            stats.max_abs_delta = stats.max_abs_delta.max(s.2);
            sum_d2 += s.3;
            count += n as f64;
            Ok(())
        },
    )?;
    if count > 0.0 {
        stats.rms_error = (sum_err2 / count).sqrt();
        stats.rms_delta = (sum_d2 / count).sqrt();
    }
    Ok(stats)
}

/// Sizes for `inspect`: per tensor, the bytes of its records.
pub fn tensor_sizes(delta: &OpenDelta) -> BTreeMap<String, u64> {
    delta
        .file
        .header
        .tensors
        .keys()
        .map(|n| (n.clone(), delta.file.tensor_bytes(n)))
        .collect()
}
