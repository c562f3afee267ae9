//! create, apply and verify: streaming over tensors in name order, parallel across tensors,
//! with output bytes that do not depend on the number of threads.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};

use indicatif::{ProgressBar, ProgressStyle};
use memmap2::Mmap;
use sha2::{Digest, Sha256};

use super::codec::{self, EncodeOptions};
use super::model::{CHUNK_ELEMS, Elem, Model, structure_differences};
use super::pipeline::ordered_parallel;
use super::safetensors_out::{self, OutTensor};
use crate::error::{Error, Result};
use crate::formats::wdelta::{
    self as format, Header, OwnedArray, WdeltaError, WdeltaFile, WdeltaWriter,
};

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
    /// Opened with [`OpenDelta::open_deferred`]: the checksum is still to be verified.
    pub checksum_pending: bool,
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
pub fn format_error(path: &Path, e: WdeltaError) -> Error {
    Error::Other(format!("{}: {e}", path.display()))
}

impl OpenDelta {
    pub fn open(path: &Path) -> Result<OpenDelta> {
        Self::open_with(path, false)
    }

    /// Opens with the structure validated but the checksum left to
    /// [`OpenDelta::verify_checksum`], which `apply` runs alongside its work (the output is
    /// renamed into place only after it passed). A structure error is reported as a checksum
    /// mismatch when the checksum does not match either.
    pub fn open_deferred(path: &Path) -> Result<OpenDelta> {
        Self::open_with(path, true)
    }

    fn open_with(path: &Path, defer: bool) -> Result<OpenDelta> {
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
        if len == 0 {
            return Self::from_bytes(path, Vec::new());
        }
        // SAFETY: read-only map; the checksum catches a file changing under us.
        let map = unsafe { Mmap::map(&file) }.map_err(|e| Error::io(path, e))?;
        let parsed = if defer {
            match WdeltaFile::parse_verified(&map) {
                Ok(p) => p,
                Err(e) => {
                    format::verify_checksum(&map).map_err(|c| format_error(path, c))?;
                    return Err(format_error(path, e));
                }
            }
        } else {
            Self::verify_and_parse(path, &map)?
        };
        // Checksumming touched every page; tensors are read again one at a time.
        // SAFETY: read-only file-backed map: released pages are read again if touched.
        let _ = unsafe { map.unchecked_advise(memmap2::UncheckedAdvice::DontNeed) };
        Ok(OpenDelta {
            path: path.to_path_buf(),
            file: parsed,
            bytes: Bytes::Map(map),
            checksum_pending: defer,
        })
    }

    /// Verifies the SHA-256 trailer, releasing the pages read behind.
    pub fn verify_checksum(&self) -> Result<()> {
        let bytes = self.bytes();
        let (body, stored) = bytes.split_at(bytes.len() - format::CHECKSUM_LEN);
        let mut h = Sha256::new();
        const STEP: usize = 8 << 20;
        for (i, chunk) in body.chunks(STEP).enumerate() {
            h.update(chunk);
            if let Bytes::Map(m) = &self.bytes {
                // SAFETY: read-only file-backed map: released pages are read again if touched.
                let _ = unsafe {
                    m.unchecked_advise_range(
                        memmap2::UncheckedAdvice::DontNeed,
                        i * STEP,
                        chunk.len(),
                    )
                };
            }
        }
        let actual = h.finalize();
        if actual.as_slice() != stored {
            return Err(format_error(
                &self.path,
                WdeltaError::ChecksumMismatch {
                    stored: crate::digest::hex(stored),
                    actual: crate::digest::hex(&actual),
                },
            ));
        }
        Ok(())
    }

    pub fn from_bytes(path: &Path, bytes: Vec<u8>) -> Result<OpenDelta> {
        let parsed = Self::verify_and_parse(path, &bytes)?;
        Ok(OpenDelta {
            path: path.to_path_buf(),
            file: parsed,
            bytes: Bytes::Owned(bytes),
            checksum_pending: false,
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
        let (entry, arrays) = self.tensor(name)?;
        let mut out = vec![0f32; n];
        codec::decode(entry, &arrays, &mut out);
        self.release(name);
        Ok(out)
    }

    /// A streaming decoder of one tensor's delta.
    pub fn decoder(&self, name: &str) -> Result<codec::Decoder<'_>> {
        let (entry, arrays) = self.tensor(name)?;
        Ok(codec::Decoder::new(entry, &arrays))
    }

    /// One tensor's header entry and its array records.
    fn tensor(&self, name: &str) -> Result<(&format::TensorEntry, format::TensorArrays<'_>)> {
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
        Ok((entry, arrays))
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
fn reconstruct_into(base: &Model, links: &[OpenDelta], name: &str, out: &mut [f32]) -> Result<()> {
    let mut r = Reconstructor::new(base, links, name)?;
    for chunk in out.chunks_mut(CHUNK_ELEMS) {
        r.next(chunk)?;
    }
    Ok(())
}

thread_local! {
    /// Per-worker buffer for a tensor's delta in `create`.
    static DELTA_SCRATCH: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Reconstructs a tensor chunk by chunk: base values plus each link's decoded delta.
struct Reconstructor<'a> {
    base: &'a Model,
    name: &'a str,
    t: &'a super::model::TensorSource,
    decoders: Vec<codec::Decoder<'a>>,
    pos: usize,
    buf: Vec<f32>,
}

impl<'a> Reconstructor<'a> {
    fn new(base: &'a Model, links: &'a [OpenDelta], name: &'a str) -> Result<Self> {
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
    fn next(&mut self, out: &mut [f32]) -> Result<()> {
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
        .map(|h| crate::digest::hex(&h.finalize()))
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
    // Without a chain, the base is hashed on its own thread while the deltas are computed;
    // records wait in memory until the hash, which the header starts with, is known.
    let known = if links.is_empty() {
        None
    } else {
        let v = verify_lineage(base, links, true, run)?;
        Some(v.link_hashes.last().cloned().unwrap_or_default())
    };
    let header_for = |parent_hash: String| Header {
        parent_hash,
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
    let mut parent_hash = known.clone().unwrap_or_default();
    std::thread::scope(|s| {
        let mut hasher = known
            .is_none()
            .then(|| s.spawn(|| base.parent_hash(|_| {})));
        write_with(out, |w| {
            let mut parent = known.clone();
            let mut late = LateWriter {
                out: Some(w),
                writer: None,
                pending: Vec::new(),
            };
            ordered_parallel(
                names.len(),
                run.threads(),
                |i| {
                    let name = names[i];
                    let tf = &ft.tensors[name.as_str()];
                    let n = tf.n_elements();
                    // The delta buffer is reused across tensors: fresh gigabyte allocations
                    // cost a page fault per 4 KiB.
                    let mut scratch = DELTA_SCRATCH.with(|s| std::mem::take(&mut *s.borrow_mut()));
                    if scratch.len() < n {
                        scratch.resize(n, 0.0);
                    }
                    let d = &mut scratch[..n];
                    reconstruct_into(base, links, name, d)?;
                    let mut buf = vec![0f32; CHUNK_ELEMS.min(d.len())];
                    for (ci, chunk) in d.chunks_mut(CHUNK_ELEMS).enumerate() {
                        let f = &mut buf[..chunk.len()];
                        ft.read_f32_into(name, tf, ci * CHUNK_ELEMS, f)?;
                        for (p, f) in chunk.iter_mut().zip(f.iter()) {
                            *p = *f - *p;
                        }
                    }
                    let t = &base.tensors[name.as_str()];
                    let arrays = codec::encode(d, &t.shape, enc);
                    DELTA_SCRATCH.with(|s| *s.borrow_mut() = scratch);
                    Ok((tf.len as u64, arrays))
                },
                |i, (len, arrays): (u64, Vec<OwnedArray>)| {
                    if parent.is_none() && hasher.as_ref().is_some_and(|h| h.is_finished()) {
                        parent = hasher.take().map(|h| h.join().expect("hashing thread"));
                    }
                    late.pending.push((i, arrays));
                    let header = match late.writer {
                        None => parent.clone().map(&header_for),
                        Some(_) => None,
                    };
                    late.flush(header.as_ref(), enc.version, &names, out)?;
                    bar.inc(len);
                    Ok(())
                },
            )?;
            if parent.is_none() {
                parent = hasher.take().map(|h| h.join().expect("hashing thread"));
            }
            let header = header_for(parent.clone().unwrap_or_default());
            late.flush(Some(&header), enc.version, &names, out)?;
            let writer = late.writer;
            let (_, total) = writer
                .expect("the header is written once the hash is known")
                .finish()
                .map_err(|e| Error::io(out, e))?;
            file_bytes = total;
            parent_hash = parent.unwrap_or_default();
            Ok(())
        })
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

/// Holds records until the header can be written (it starts with the parent hash).
struct LateWriter<W: std::io::Write> {
    out: Option<W>,
    writer: Option<WdeltaWriter<W>>,
    pending: Vec<(usize, Vec<OwnedArray>)>,
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
            self.writer = Some(WdeltaWriter::new(w, h, version).map_err(|e| Error::io(out, e))?);
        }
        if let Some(wr) = &mut self.writer {
            for (i, arrays) in self.pending.drain(..) {
                for a in &arrays {
                    wr.record(names[i], a).map_err(|e| Error::io(out, e))?;
                }
            }
        }
        Ok(())
    }
}

/// Writes `out` through a temporary file in its directory, renamed into place only when `fill`
/// succeeds: an interrupted run leaves no partial output. Unlike
/// [`crate::fsutil::write_atomically`] this lets `fill` write at offsets from several threads,
/// and flushing to disk first (`sync`) is optional: a reconstruction can be made again, and
/// waiting for gigabytes to reach the disk would dominate the run.
fn write_output(out: &Path, sync: bool, fill: impl FnOnce(&File) -> Result<()>) -> Result<()> {
    let dir = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let tmp = tempfile::Builder::new()
        .prefix(".weight-inspect-")
        .suffix(".tmp")
        .tempfile_in(dir)
        .map_err(|e| Error::io(dir, e))?;
    fill(tmp.as_file())?;
    if sync {
        tmp.as_file().sync_all().map_err(|e| Error::io(out, e))?;
    }
    tmp.persist(out).map_err(|e| Error::io(out, e.error))?;
    Ok(())
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
/// `sync` flushes the output to disk before renaming it into place.
pub fn apply(
    base: &Model,
    links: &[OpenDelta],
    out: &Path,
    dtype: OutDtype,
    sync: bool,
    run: &RunOptions,
) -> Result<Applied> {
    if links.is_empty() {
        return Err(Error::Other("no .wdelta file to apply".into()));
    }
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
        check_elems(base)?;
    } else {
        base_hash = verify_lineage(base, links, false, run)?.base_hash;
    }
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
    std::thread::scope(|s| {
        let hasher = single.then(|| s.spawn(|| base.parent_hash(|_| {})));
        let checksum =
            (single && links[0].checksum_pending).then(|| s.spawn(|| links[0].verify_checksum()));
        write_output(out, sync, |file| {
            use std::os::unix::fs::FileExt;
            file.write_all_at(&layout.header, 0)
                .map_err(|e| Error::io(out, e))?;
            // Every tensor's place in the output is known: workers write there directly, so no
            // tensor is ever held whole and the order of completion does not matter.
            ordered_parallel(
                names.len(),
                run.threads(),
                |i| {
                    let name = names[i].as_str();
                    let elem = elems[i];
                    let mut r = Reconstructor::new(base, links, name)?;
                    let n = base.tensors[name].n_elements();
                    let mut vals = vec![0f32; CHUNK_ELEMS.min(n)];
                    let mut bytes = vec![0u8; vals.len() * elem.size()];
                    let mut at = layout.offsets[i];
                    let mut done = 0;
                    while done < n {
                        let len = CHUNK_ELEMS.min(n - done);
                        r.next(&mut vals[..len])?;
                        let b = &mut bytes[..len * elem.size()];
                        elem.from_f32(&vals[..len], b);
                        file.write_all_at(b, at).map_err(|e| Error::io(out, e))?;
                        at += b.len() as u64;
                        done += len;
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
                base_hash = h.join().expect("hashing thread");
                if base_hash != links[0].parent_hash() {
                    return Err(hash_mismatch(
                        &links[0].path,
                        &base.path.display().to_string(),
                        links[0].parent_hash(),
                        &base_hash,
                    ));
                }
            }
            Ok(())
        })
    })?;
    bar.finish_and_clear();
    Ok(Applied {
        base_hash,
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
