//! Model weights as the delta commands read them: a safetensors file or a sharded directory
//! (`model.safetensors.index.json`), parsed by the core parser. Tensor data is read chunk by
//! chunk with positioned reads into reused buffers and converted to float32, so the resident
//! memory stays near the tensors being worked on, never the whole model.
//!
//! Positioned reads, not a memory map: a file truncated while it is mapped kills the process
//! with SIGBUS at the next touch of a page past the new end (no message, temporary output
//! left behind), whereas a short read is an ordinary error that names the file and the bytes
//! missing, and unwinds through the atomic write. The copy from the page cache costs about
//! what the page faults and `MADV_DONTNEED` releases of a map cost (docs/wdelta.md has figures).

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::error::DeltaError;
use crate::artifact::{Format, Value};
use crate::error::Error;

type Result<T, E = DeltaError> = std::result::Result<T, E>;

/// Element types a delta can be computed over: floats, and integers and booleans, which the
/// reference (deltatensors 0.2.0) takes through float32 like any tensor. Integer tensors are
/// rebuilt exactly: base + the rounded delta, checked against the type's range (see
/// [`crate::delta`]'s create and apply).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Elem {
    F64,
    F32,
    F16,
    BF16,
    I64,
    I32,
    I16,
    I8,
    U64,
    U32,
    U16,
    U8,
    Bool,
}

impl Elem {
    const ALL: [Elem; 13] = [
        Elem::F64,
        Elem::F32,
        Elem::F16,
        Elem::BF16,
        Elem::I64,
        Elem::I32,
        Elem::I16,
        Elem::I8,
        Elem::U64,
        Elem::U32,
        Elem::U16,
        Elem::U8,
        Elem::Bool,
    ];

    /// The core's dtype name.
    fn name(self) -> &'static str {
        match self {
            Elem::F64 => "f64",
            Elem::F32 => "f32",
            Elem::F16 => "f16",
            Elem::BF16 => "bf16",
            Elem::I64 => "i64",
            Elem::I32 => "i32",
            Elem::I16 => "i16",
            Elem::I8 => "i8",
            Elem::U64 => "u64",
            Elem::U32 => "u32",
            Elem::U16 => "u16",
            Elem::U8 => "u8",
            Elem::Bool => "bool",
        }
    }

    /// The row of the core's dtype table: every element type is a safetensors and numpy dtype.
    fn dtype(self) -> &'static crate::dtype::Dtype {
        crate::dtype::by_name(self.name()).expect("every element type is in the dtype table")
    }

    /// From the core's lowercased safetensors dtype.
    pub fn from_safetensors(dtype: &str) -> Option<Elem> {
        Elem::ALL.into_iter().find(|e| e.name() == dtype)
    }

    /// numpy's name, as `base_dtype` records it.
    pub fn numpy_name(self) -> &'static str {
        self.dtype()
            .numpy
            .expect("every element type has a numpy name")
    }

    pub fn from_numpy_name(s: &str) -> Option<Elem> {
        let dtype = crate::dtype::by_numpy_name(s)?;
        Elem::from_safetensors(dtype.name)
    }

    /// The safetensors header name.
    pub fn safetensors_name(self) -> &'static str {
        self.dtype()
            .safetensors
            .expect("every element type is a safetensors dtype")
    }

    pub fn size(self) -> usize {
        (self.dtype().block_bits / 8) as usize
    }

    /// A floating-point type (else an integer or boolean one).
    pub fn is_float(self) -> bool {
        matches!(self, Elem::F64 | Elem::F32 | Elem::F16 | Elem::BF16)
    }

    /// The smallest and largest value of an integer type (bool: 0 and 1).
    pub fn int_range(self) -> (i128, i128) {
        match self {
            Elem::I64 => (i128::from(i64::MIN), i128::from(i64::MAX)),
            Elem::I32 => (i128::from(i32::MIN), i128::from(i32::MAX)),
            Elem::I16 => (i128::from(i16::MIN), i128::from(i16::MAX)),
            Elem::I8 => (i128::from(i8::MIN), i128::from(i8::MAX)),
            Elem::U64 => (0, i128::from(u64::MAX)),
            Elem::U32 => (0, i128::from(u32::MAX)),
            Elem::U16 => (0, i128::from(u16::MAX)),
            Elem::U8 => (0, i128::from(u8::MAX)),
            Elem::Bool => (0, 1),
            Elem::F64 | Elem::F32 | Elem::F16 | Elem::BF16 => (0, 0),
        }
    }

    /// Little-endian integers (or booleans) to i128; floats are not integers (debug-checked).
    pub fn to_i128(self, raw: &[u8], out: &mut [i128]) {
        debug_assert!(!self.is_float());
        let size = self.size();
        for (o, c) in out.iter_mut().zip(raw.chunks_exact(size)) {
            let mut b = [0u8; 8];
            b[..size].copy_from_slice(c);
            let u = u64::from_le_bytes(b);
            *o = match self {
                Elem::I64 => i128::from(u as i64),
                Elem::I32 => i128::from(u as u32 as i32),
                Elem::I16 => i128::from(u as u16 as i16),
                Elem::I8 => i128::from(u as u8 as i8),
                Elem::Bool => i128::from(u != 0),
                _ => i128::from(u),
            };
        }
    }

    /// i128 values, each within [`Elem::int_range`], as little-endian bytes into `out`.
    pub fn write_i128(self, vals: &[i128], out: &mut [u8]) {
        let size = self.size();
        for (o, v) in out.chunks_exact_mut(size).zip(vals) {
            o.copy_from_slice(&(*v as u64).to_le_bytes()[..size]);
        }
    }

    /// Converts little-endian elements to float32 (float64 and wide integers round to nearest,
    /// as numpy's `astype(float32)`; the others are exact).
    pub fn to_f32(self, raw: &[u8], out: &mut [f32]) {
        debug_assert_eq!(raw.len(), out.len() * self.size());
        match self {
            Elem::F32 => {
                for (o, c) in out.iter_mut().zip(raw.chunks_exact(4)) {
                    *o = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                }
            }
            Elem::BF16 => {
                for (o, c) in out.iter_mut().zip(raw.chunks_exact(2)) {
                    *o = f32::from_bits(u32::from(u16::from_le_bytes([c[0], c[1]])) << 16);
                }
            }
            Elem::F16 => {
                for (o, c) in out.iter_mut().zip(raw.chunks_exact(2)) {
                    *o = half::f16::from_bits(u16::from_le_bytes([c[0], c[1]])).to_f32();
                }
            }
            Elem::F64 => {
                for (o, c) in out.iter_mut().zip(raw.chunks_exact(8)) {
                    *o = f64::from_le_bytes(c.try_into().expect("8 bytes")) as f32;
                }
            }
            _ => {
                let mut ints = vec![0i128; out.len()];
                self.to_i128(raw, &mut ints);
                for (o, v) in out.iter_mut().zip(&ints) {
                    *o = *v as f32;
                }
            }
        }
    }

    /// Converts float32 to this type (rounding to nearest even; integers round half to even
    /// and saturate) as little-endian bytes into `out`, which holds exactly
    /// `vals.len() * self.size()` bytes.
    pub fn write_f32(self, vals: &[f32], out: &mut [u8]) {
        debug_assert_eq!(out.len(), vals.len() * self.size());
        match self {
            Elem::F32 => {
                for (o, v) in out.chunks_exact_mut(4).zip(vals) {
                    o.copy_from_slice(&v.to_le_bytes());
                }
            }
            Elem::BF16 => {
                for (o, v) in out.chunks_exact_mut(2).zip(vals) {
                    o.copy_from_slice(&half::bf16::from_f32(*v).to_bits().to_le_bytes());
                }
            }
            Elem::F16 => {
                for (o, v) in out.chunks_exact_mut(2).zip(vals) {
                    o.copy_from_slice(&half::f16::from_f32(*v).to_bits().to_le_bytes());
                }
            }
            Elem::F64 => {
                for (o, v) in out.chunks_exact_mut(8).zip(vals) {
                    o.copy_from_slice(&f64::from(*v).to_le_bytes());
                }
            }
            _ => {
                let (lo, hi) = self.int_range();
                let ints: Vec<i128> = vals
                    .iter()
                    .map(|v| (f64::from(v.round_ties_even()) as i128).clamp(lo, hi))
                    .collect();
                self.write_i128(&ints, out);
            }
        }
    }
}

/// Where one tensor's bytes are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorSource {
    pub shard: usize,
    /// The core's lowercased safetensors dtype ("f32", "bf16", "i64", ...).
    pub dtype: &'static str,
    pub elem: Option<Elem>,
    pub shape: Vec<u64>,
    pub offset: usize,
    pub len: usize,
}

impl TensorSource {
    pub fn n_elements(&self) -> usize {
        self.shape.iter().product::<u64>() as usize
    }
}

#[derive(Debug)]
struct Shard {
    path: PathBuf,
    file: File,
}

/// A safetensors model: one file or the shards of a directory.
#[derive(Debug)]
pub struct Model {
    /// The file, or the directory of the shards.
    pub path: PathBuf,
    /// Every tensor by name, with where its bytes lie.
    pub tensors: BTreeMap<String, TensorSource>,
    /// `__metadata__` of the file (of the first shard for a directory).
    pub metadata: BTreeMap<String, String>,
    /// The container: safetensors, or GGUF (opened by the lossless strategy only).
    pub format: Format,
    /// The index file of a sharded safetensors model.
    pub index_file: Option<PathBuf>,
    /// The file's own name where `path` does not carry it (a `REV:path`'s blob copied to a
    /// temporary file, or its LFS object): what a lossless delta records for it.
    pub name: Option<String>,
    shards: Vec<Shard>,
}

/// The one safetensors file of a directory that holds no multi-file model (the core's reader
/// accepted it as that file).
fn single_file_in(dir: &Path) -> Result<PathBuf> {
    let names: Vec<String> =
        crate::sharded::Directory::file_names(&crate::read::FsDirectory::new(dir))
            .map_err(crate::error::Error::from)?;
    let singles: Vec<String> = crate::sharded::candidates(&names)
        .into_iter()
        .filter_map(|c| match c {
            crate::sharded::Candidate::Single(file) => Some(file),
            _ => None,
        })
        .collect();
    match singles.as_slice() {
        [one] => Ok(dir.join(one)),
        _ => Err(DeltaError::NoShards(dir.to_path_buf())),
    }
}

/// Bytes read per step when hashing.
const CHUNK_BYTES: usize = 8 << 20;
/// Elements converted per step.
pub(crate) const CHUNK_ELEMS: usize = 1 << 16;

thread_local! {
    /// Per-thread buffer for the raw bytes of one chunk.
    static RAW_SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Whether `path` is a regular file that starts with the `.wdelta` magic (read from its first
/// bytes only).
fn starts_like_a_delta(path: &Path) -> bool {
    use std::io::Read;
    let Ok((file, _)) = crate::fsutil::open_regular(path) else {
        return false;
    };
    let mut magic = Vec::with_capacity(8);
    file.take(8).read_to_end(&mut magic).is_ok() && crate::formats::wdelta::is_wdelta(&magic)
}

impl Model {
    /// Opens a safetensors file, or a sharded model (a directory or its index) through the
    /// core's multi-file reader, which checks the shards against the index and each other.
    pub fn open(path: &Path) -> Result<Model> {
        Model::open_formats(path, &[Format::Safetensors])
    }

    /// Opens a safetensors or GGUF model (single or split) as raw bytes for the lossless
    /// strategy, which never converts elements. PyTorch checkpoints are refused by name.
    pub fn open_lossless(path: &Path) -> Result<Model> {
        Model::open_formats(path, &[Format::Safetensors, Format::Gguf, Format::Pytorch])
    }

    fn open_formats(path: &Path, formats: &[Format]) -> Result<Model> {
        if starts_like_a_delta(path) {
            return Err(DeltaError::DeltaGivenAsModel {
                path: path.to_path_buf(),
            });
        }
        let artifact = crate::read::open_model_path(path)?;
        if !formats.contains(&artifact.format) && formats.len() > 1 {
            return Err(DeltaError::NotLosslessFormat {
                path: path.to_path_buf(),
                format: artifact.format.name(),
            });
        }
        if !formats.contains(&artifact.format) {
            return Err(DeltaError::NotSafetensors {
                path: path.to_path_buf(),
                format: artifact.format.name(),
            });
        }
        if artifact.layout.is_truncated() {
            return Err(DeltaError::Truncated {
                path: path.to_path_buf(),
                present: artifact.layout.data_present,
                declared: artifact.layout.data_expected,
            });
        }
        // The files holding the data: the shards, or the one file (which a directory may hold).
        let files: Vec<PathBuf> = match &artifact.layout.files {
            Some(files) => {
                let dir = if path.is_dir() {
                    path
                } else {
                    path.parent().unwrap_or(Path::new("."))
                };
                files.parts.iter().map(|p| dir.join(&p.file)).collect()
            }
            None if path.is_dir() => vec![single_file_in(path)?],
            None => vec![path.to_path_buf()],
        };
        let index_file = artifact.layout.files.as_ref().and_then(|f| {
            let index = f.index.as_ref()?;
            let dir = if path.is_dir() {
                path
            } else {
                path.parent().unwrap_or(Path::new("."))
            };
            Some(dir.join(index))
        });
        let mut shards = Vec::with_capacity(files.len());
        for file in files {
            // A FIFO is refused, not waited on.
            let (handle, _) =
                crate::fsutil::open_regular(&file).map_err(|e| Error::io(&file, e))?;
            shards.push(Shard {
                path: file,
                file: handle,
            });
        }
        let part_of = |position: usize| {
            artifact
                .layout
                .files
                .as_ref()
                .map_or(0, |f| f.tensor_parts[position] as usize)
        };
        // A numpy array's values are in the pickle, which is carried as it is, not at an
        // offset of their own: not a tensor of the delta.
        let tensors = artifact
            .tensors
            .iter()
            .enumerate()
            .filter(|(_, (name, _))| !artifact.values_in_pickle(name))
            .map(|(position, (name, info))| {
                (
                    name.to_owned(),
                    TensorSource {
                        shard: part_of(position),
                        dtype: info.dtype.name,
                        elem: Elem::from_safetensors(info.dtype.name),
                        shape: info.shape.to_vec(),
                        offset: info.file_offset as usize,
                        len: info.byte_length as usize,
                    },
                )
            })
            .collect();
        let metadata = artifact
            .metadata
            .iter()
            .filter_map(|(k, v)| match v {
                Value::String(s) => Some((k.clone(), s.clone())),
                _ => None,
            })
            .collect();
        Ok(Model {
            path: path.to_path_buf(),
            tensors,
            metadata,
            format: artifact.format,
            index_file,
            name: None,
            shards,
        })
    }

    /// The files the model is read from (one, or each shard of a directory).
    pub fn files(&self) -> impl Iterator<Item = &Path> {
        self.shards.iter().map(|s| s.path.as_path())
    }

    /// What the kernel says of each file the model is read from, through the open handles.
    pub(crate) fn file_metadata(
        &self,
    ) -> impl Iterator<Item = std::io::Result<std::fs::Metadata>> + '_ {
        self.shards.iter().map(|s| s.file.metadata())
    }

    /// The number of data files (one, or the shards).
    pub fn shard_count(&self) -> usize {
        self.shards.len()
    }

    /// The path and current length of data file `shard`.
    pub(crate) fn shard_file(&self, shard: usize) -> Result<(&Path, u64)> {
        let s = &self.shards[shard];
        let len = s.file.metadata().map_err(|e| Error::io(&s.path, e))?.len();
        Ok((&s.path, len))
    }

    /// A read-only map of data file `shard`, guarded against the file shrinking underneath it
    /// ([`crate::mapped`]); None for an empty file, which has nothing to map.
    pub(crate) fn map_shard(&self, shard: usize) -> Result<Option<crate::mapped::GuardedMap>> {
        let s = &self.shards[shard];
        let len = s.file.metadata().map_err(|e| Error::io(&s.path, e))?.len();
        if len == 0 {
            return Ok(None);
        }
        crate::mapped::GuardedMap::map(&s.file, &s.path)
            .map(Some)
            .map_err(|e| Error::io(&s.path, e).into())
    }

    /// Reads bytes at `offset` of data file `shard` into `buf` (an early end is
    /// [`DeltaError::InputShrank`]).
    pub(crate) fn read_shard_at(&self, shard: usize, offset: u64, buf: &mut [u8]) -> Result<()> {
        let s = &self.shards[shard];
        s.file.read_exact_at(buf, offset).map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                DeltaError::InputShrank {
                    path: s.path.clone(),
                    offset,
                    end: offset + buf.len() as u64,
                    now: s.file.metadata().ok().map(|m| m.len()),
                }
            } else {
                Error::io(&s.path, e).into()
            }
        })
    }

    /// The file that holds tensor `t`.
    pub fn shard_path(&self, t: &TensorSource) -> &Path {
        &self.shards[t.shard].path
    }

    /// Reads bytes `start..start + buf.len()` of a tensor's stored data into `buf`. A file
    /// that ends early (it shrank since it was opened) is [`DeltaError::InputShrank`].
    pub fn read_raw_into(&self, t: &TensorSource, start: usize, buf: &mut [u8]) -> Result<()> {
        let shard = &self.shards[t.shard];
        let offset = (t.offset + start) as u64;
        shard.file.read_exact_at(buf, offset).map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                DeltaError::InputShrank {
                    path: shard.path.clone(),
                    offset,
                    end: offset + buf.len() as u64,
                    now: shard.file.metadata().ok().map(|m| m.len()),
                }
            } else {
                Error::io(&shard.path, e).into()
            }
        })
    }

    /// The raw stored bytes of a tensor.
    pub fn read_raw(&self, t: &TensorSource) -> Result<Vec<u8>> {
        let mut out = vec![0u8; t.len];
        self.read_raw_into(t, 0, &mut out)?;
        Ok(out)
    }

    /// Element type of a tensor, or an error naming it.
    pub fn elem(&self, name: &str, t: &TensorSource) -> Result<Elem> {
        t.elem.ok_or_else(|| DeltaError::UnsupportedDtype {
            path: self.shard_path(t).to_path_buf(),
            tensor: name.to_string(),
            dtype: t.dtype,
        })
    }

    /// Checks that every tensor has an element type deltas are computed over.
    pub(crate) fn check_elems(&self) -> Result<()> {
        for (name, t) in &self.tensors {
            self.elem(name, t)?;
        }
        Ok(())
    }

    /// Converts elements `start..start + out.len()` of a tensor to float32 into `out`, then
    /// releases the pages read.
    pub fn read_f32_into(
        &self,
        name: &str,
        t: &TensorSource,
        start: usize,
        out: &mut [f32],
    ) -> Result<()> {
        let elem = self.elem(name, t)?;
        #[cfg(target_endian = "little")]
        if elem == Elem::F32 {
            // Read straight into `out`: little-endian float32 is already its bytes.
            // SAFETY: `out`'s memory seen as its 4 × len bytes; any bytes are a valid f32.
            let bytes = unsafe {
                std::slice::from_raw_parts_mut(out.as_mut_ptr().cast::<u8>(), out.len() * 4)
            };
            return self.read_raw_into(t, start * 4, bytes);
        }
        self.with_raw(t, elem, start, out.len(), |raw| elem.to_f32(raw, out))
    }

    /// Reads elements `start..start + out.len()` of an integer (or boolean) tensor into `out`.
    pub fn read_ints_into(
        &self,
        name: &str,
        t: &TensorSource,
        start: usize,
        out: &mut [i128],
    ) -> Result<()> {
        let elem = self.elem(name, t)?;
        self.with_raw(t, elem, start, out.len(), |raw| elem.to_i128(raw, out))
    }

    /// Reads the raw bytes of elements `start..start + n` into this thread's scratch buffer and
    /// hands them to `convert`.
    fn with_raw(
        &self,
        t: &TensorSource,
        elem: Elem,
        start: usize,
        n: usize,
        convert: impl FnOnce(&[u8]),
    ) -> Result<()> {
        let size = elem.size();
        RAW_SCRATCH.with(|scratch| {
            let mut raw = scratch.borrow_mut();
            if raw.len() < n * size {
                raw.resize(n * size, 0);
            }
            let raw = &mut raw[..n * size];
            self.read_raw_into(t, start * size, raw)?;
            convert(raw);
            Ok(())
        })
    }

    /// A whole tensor as float32.
    pub fn load_f32(&self, name: &str, t: &TensorSource) -> Result<Vec<f32>> {
        let mut out = vec![0f32; t.n_elements()];
        for (ci, chunk) in out.chunks_mut(CHUNK_ELEMS).enumerate() {
            self.read_f32_into(name, t, ci * CHUNK_ELEMS, chunk)?;
        }
        Ok(out)
    }

    /// Feeds name and raw bytes of a tensor to `hasher` (the parent hash's unit), read through
    /// `buf`.
    fn hash_tensor(
        &self,
        name: &str,
        t: &TensorSource,
        hasher: &mut Sha256,
        buf: &mut [u8],
    ) -> Result<()> {
        hasher.update(name.as_bytes());
        let mut done = 0;
        while done < t.len {
            let n = buf.len().min(t.len - done);
            self.read_raw_into(t, done, &mut buf[..n])?;
            hasher.update(&buf[..n]);
            done += n;
        }
        Ok(())
    }

    /// The parent hash of this model: SHA-256 over each tensor's name and raw stored bytes, in
    /// name order (the reference's `hash_state_dict` over the stored arrays; bfloat16 is hashed
    /// as its 16-bit patterns). `tick` is called with the bytes hashed so far.
    pub fn parent_hash(&self, mut tick: impl FnMut(u64)) -> Result<String> {
        let hash = self.parent_hash_while(|n| {
            tick(n);
            true
        })?;
        Ok(hash.expect("never stopped"))
    }

    /// [`Model::parent_hash`], stopped (`None`) after any tensor for which `go_on`, called with
    /// the bytes hashed, says false.
    pub(crate) fn parent_hash_while(
        &self,
        mut go_on: impl FnMut(u64) -> bool,
    ) -> Result<Option<String>> {
        let mut h = Sha256::new();
        let mut buf = vec![0u8; CHUNK_BYTES.min(self.data_bytes() as usize).max(1)];
        for (name, t) in &self.tensors {
            self.hash_tensor(name, t, &mut h, &mut buf)?;
            if !go_on(t.len as u64) {
                return Ok(None);
            }
        }
        Ok(Some(crate::digest::hex(&h.finalize())))
    }

    /// Total bytes of tensor data.
    pub fn data_bytes(&self) -> u64 {
        self.tensors.values().map(|t| t.len as u64).sum()
    }
}

/// Describes how two models' tensor lists differ (names, shapes); empty when they match.
pub(crate) fn structure_differences(a: &Model, b: &Model) -> Vec<String> {
    use crate::escape::{shown, shown_path};
    let mut out = Vec::new();
    for (name, t) in &a.tensors {
        match b.tensors.get(name) {
            None => out.push(format!("only in {}: {}", shown_path(&a.path), shown(name))),
            Some(u) if u.shape != t.shape => out.push(format!(
                "shape of {}: {:?} in {}, {:?} in {}",
                shown(name),
                t.shape,
                shown_path(&a.path),
                u.shape,
                shown_path(&b.path)
            )),
            Some(_) => {}
        }
    }
    for name in b.tensors.keys() {
        if !a.tensors.contains_key(name) {
            out.push(format!("only in {}: {}", shown_path(&b.path), shown(name)));
        }
    }
    out
}
