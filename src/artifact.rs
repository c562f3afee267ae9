//! The format-independent model of a model file: what every command works on.
//!
//! An [`Artifact`] holds exactly what the structural identity covers (format, GGUF version,
//! metadata, tensor descriptors) plus a [`Layout`] of physical facts (sizes, offsets, truncation)
//! that are reported but never hashed.

use crate::dtype::Dtype;
use std::collections::BTreeMap;

/// Which container a file is, detected from its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// A GGUF file (llama.cpp).
    Gguf,
    /// A safetensors file, or a model sharded over several.
    Safetensors,
    /// A `torch.save` checkpoint (zip or legacy layout).
    Pytorch,
}

impl Format {
    /// The lowercase name the identity and the outputs use (`"gguf"`).
    pub fn name(self) -> &'static str {
        match self {
            Format::Gguf => "gguf",
            Format::Safetensors => "safetensors",
            Format::Pytorch => "pytorch",
        }
    }
}

/// A 32-bit float kept as its bit pattern, so that equality, hashing and the canonical
/// form never depend on float semantics (NaN payloads, -0.0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct F32Bits(pub u32);

/// A 64-bit float kept as its bit pattern (see [`F32Bits`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct F64Bits(pub u64);

impl F32Bits {
    pub fn value(self) -> f32 {
        f32::from_bits(self.0)
    }
}

impl F64Bits {
    pub fn value(self) -> f64 {
        f64::from_bits(self.0)
    }
}

/// A metadata value. GGUF uses every variant; safetensors metadata is always `String`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// GGUF `UINT8`.
    U8(u8),
    /// GGUF `INT8`.
    I8(i8),
    /// GGUF `UINT16`.
    U16(u16),
    /// GGUF `INT16`.
    I16(i16),
    /// GGUF `UINT32`.
    U32(u32),
    /// GGUF `INT32`.
    I32(i32),
    /// GGUF `UINT64`.
    U64(u64),
    /// GGUF `INT64`.
    I64(i64),
    /// GGUF `FLOAT32`, kept as its bits (NaN payloads and -0.0 stay distinct).
    F32(F32Bits),
    /// GGUF `FLOAT64`, kept as its bits.
    F64(F64Bits),
    /// GGUF `BOOL`.
    Bool(bool),
    /// A string (every safetensors `__metadata__` value is one).
    String(String),
    /// GGUF `ARRAY`: values of one type.
    Array(Array),
}

/// A homogeneous array, stored by element type so that a 262,144-entry vocabulary costs one
/// allocation per string rather than one enum per element.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Array {
    U8(Vec<u8>),
    I8(Vec<i8>),
    U16(Vec<u16>),
    I16(Vec<i16>),
    U32(Vec<u32>),
    I32(Vec<i32>),
    U64(Vec<u64>),
    I64(Vec<i64>),
    F32(Vec<F32Bits>),
    F64(Vec<F64Bits>),
    Bool(Vec<bool>),
    String(StringArray),
    /// Arrays of arrays; each inner array carries its own element type (GGUF's type name).
    #[allow(clippy::enum_variant_names)]
    Array(Vec<Array>),
}

impl Value {
    /// The GGUF type name of the value ("u32", "f32", "string", "array", ...).
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::U8(_) => "u8",
            Value::I8(_) => "i8",
            Value::U16(_) => "u16",
            Value::I16(_) => "i16",
            Value::U32(_) => "u32",
            Value::I32(_) => "i32",
            Value::U64(_) => "u64",
            Value::I64(_) => "i64",
            Value::F32(_) => "f32",
            Value::F64(_) => "f64",
            Value::Bool(_) => "bool",
            Value::String(_) => "string",
            Value::Array(_) => "array",
        }
    }

    /// The string, when the value is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }
}

impl Array {
    pub fn len(&self) -> usize {
        match self {
            Array::U8(v) => v.len(),
            Array::I8(v) => v.len(),
            Array::U16(v) => v.len(),
            Array::I16(v) => v.len(),
            Array::U32(v) => v.len(),
            Array::I32(v) => v.len(),
            Array::U64(v) => v.len(),
            Array::I64(v) => v.len(),
            Array::F32(v) => v.len(),
            Array::F64(v) => v.len(),
            Array::Bool(v) => v.len(),
            Array::String(v) => v.len(),
            Array::Array(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The element type name ("string", "f32", "array", ...).
    pub fn element_type_name(&self) -> &'static str {
        match self {
            Array::U8(_) => "u8",
            Array::I8(_) => "i8",
            Array::U16(_) => "u16",
            Array::I16(_) => "i16",
            Array::U32(_) => "u32",
            Array::I32(_) => "i32",
            Array::U64(_) => "u64",
            Array::I64(_) => "i64",
            Array::F32(_) => "f32",
            Array::F64(_) => "f64",
            Array::Bool(_) => "bool",
            Array::String(_) => "string",
            Array::Array(_) => "array",
        }
    }

    /// Element `index` as a standalone value (for display of array heads).
    pub fn get(&self, index: usize) -> Option<Value> {
        Some(match self {
            Array::U8(v) => Value::U8(*v.get(index)?),
            Array::I8(v) => Value::I8(*v.get(index)?),
            Array::U16(v) => Value::U16(*v.get(index)?),
            Array::I16(v) => Value::I16(*v.get(index)?),
            Array::U32(v) => Value::U32(*v.get(index)?),
            Array::I32(v) => Value::I32(*v.get(index)?),
            Array::U64(v) => Value::U64(*v.get(index)?),
            Array::I64(v) => Value::I64(*v.get(index)?),
            Array::F32(v) => Value::F32(*v.get(index)?),
            Array::F64(v) => Value::F64(*v.get(index)?),
            Array::Bool(v) => Value::Bool(*v.get(index)?),
            Array::String(v) => Value::String(v.get(index)?.to_owned()),
            Array::Array(v) => Value::Array(v.get(index)?.clone()),
        })
    }
}

/// An array of strings in one buffer: a 262,144-token vocabulary is one allocation, not
/// 262,144. Each string is followed by a NUL separator in `text` (the GGUF reader validates all
/// strings in one UTF-8 pass thanks to it); `ends[i]` is where string `i` ends.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StringArray {
    text: String,
    ends: Vec<usize>,
}

impl StringArray {
    pub fn new() -> Self {
        Self::default()
    }

    /// From text holding each string followed by a NUL, and the end of each string in it.
    pub(crate) fn from_parts(text: String, ends: Vec<usize>) -> Self {
        debug_assert!(ends.iter().all(|&e| text.as_bytes().get(e) == Some(&0)));
        StringArray { text, ends }
    }

    pub fn push(&mut self, s: &str) {
        self.text.push_str(s);
        self.ends.push(self.text.len());
        self.text.push('\0');
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    pub fn get(&self, index: usize) -> Option<&str> {
        let end = *self.ends.get(index)?;
        let start = match index {
            0 => 0,
            i => self.ends[i - 1] + 1,
        };
        Some(&self.text[start..end])
    }

    /// The joined text (each string followed by a NUL) and where each string ends in it.
    pub(crate) fn joined(&self) -> (&str, &[usize]) {
        (&self.text, &self.ends)
    }

    pub fn iter(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        (0..self.len()).map(|i| self.get(i).expect("index below len"))
    }
}

impl<S: AsRef<str>> FromIterator<S> for StringArray {
    fn from_iter<I: IntoIterator<Item = S>>(iter: I) -> Self {
        let mut out = StringArray::new();
        for s in iter {
            out.push(s.as_ref());
        }
        out
    }
}

impl From<Vec<String>> for StringArray {
    fn from(strings: Vec<String>) -> Self {
        strings.into_iter().collect()
    }
}

/// Dimensions of a tensor: up to four stored inline (GGUF has at most four), more on the heap.
pub(crate) type Shape = smallvec::SmallVec<[u64; 4]>;

/// A tensor name: up to 24 bytes stored inline.
pub(crate) type TensorName = crate::table::Name;

/// One tensor as the structural identity sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorInfo {
    /// The dtype, from the one table ([`crate::dtype::DTYPES`]); its `name` is what the
    /// identity writes (GGUF: ggml's type name "q4_k"; safetensors: lowercased "f8_e4m3").
    pub dtype: &'static Dtype,
    /// Dimensions exactly as stored (GGUF: ne[0] first; safetensors: row-major order).
    pub shape: Shape,
    /// Bytes of the tensor's data (whole bytes of its shape in its dtype).
    pub byte_length: u64,
    /// Offset of the tensor's data from the start of the file. Not part of the identity.
    pub file_offset: u64,
}

impl TensorInfo {
    /// Number of elements (parameters); saturates instead of overflowing on hostile shapes,
    /// which the parsers have already rejected.
    pub fn n_elements(&self) -> u64 {
        self.shape
            .iter()
            .fold(1u64, |acc, &d| acc.saturating_mul(d))
    }
}

/// The tensors of a model by name ([`crate::table::NameTable`]).
pub(crate) type Tensors = crate::table::NameTable<TensorInfo>;

/// Physical facts about the file, reported by `inspect` but excluded from the identity.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Layout {
    /// Size of the file (or of the bytes we were given) in bytes.
    pub file_size: u64,
    /// Bytes of header, including padding up to the start of tensor data.
    pub header_size: u64,
    /// Bytes of tensor data the header declares.
    pub data_expected: u64,
    /// Bytes of tensor data actually present (less than expected for a partial file).
    pub data_present: u64,
    /// GGUF alignment (`general.alignment`, default 32); None for safetensors.
    pub alignment: Option<u64>,
    /// GGUF only: true when the file is big-endian.
    pub big_endian: bool,
    /// The files of a multi-file model (sharded safetensors, split GGUF); None for one file.
    /// The sizes above are then sums over the parts.
    pub files: Option<Box<ModelFiles>>,
    /// PyTorch checkpoints: for the tensor at each position of the tensor table, its strided
    /// view when it does not read its storage in order (a transpose, an expand); None when
    /// every tensor does. Kept apart from [`TensorInfo`] like the parts of a multi-file model.
    pub views: Option<Vec<Option<Box<StridedView>>>>,
    /// PyTorch checkpoints: the globals the pickle names beyond those of tensors, each read as
    /// an inert stand-in (nothing imported or called), most dangerous first.
    pub findings: Vec<Finding>,
    /// PyTorch training checkpoints: the group of the tensor at each position of the tensor
    /// table (`model`, `optimizer`, `scheduler`, `rng`, `other`); None for a plain state dict
    /// and the other formats, whose tensors are all model weights.
    pub groups: Option<Vec<&'static str>>,
    /// PyTorch checkpoints: what the pickle holds beyond plain tensors; None for other files
    /// and plain state dicts (boxed: most files have none).
    pub pickle: Option<Box<PickleParts>>,
}

/// What a PyTorch checkpoint's pickle holds beyond plain tensors.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PickleParts {
    /// A training checkpoint (model weights beside optimizer, scheduler or RNG state): what
    /// its model identity holds (docs/SPEC.md §5d).
    pub training: Option<TrainingCheckpoint>,
    /// The tensors (numpy arrays) whose values lie inside the pickle, not at an offset of the
    /// file; sorted. Value diffs leave them out and say so, unless their bytes are decoded.
    pub values_in_pickle: Vec<String>,
    /// The bytes of those whose values protocol 2 wrote as latin-1 text, decoded (one byte per
    /// character, nothing called), by name; sorted. Value diffs compare them.
    pub decoded: Vec<(String, Vec<u8>)>,
}

impl Layout {
    /// A training checkpoint's model identity rule; None for every other file.
    pub fn training(&self) -> Option<&TrainingCheckpoint> {
        self.pickle.as_ref()?.training.as_ref()
    }
}

/// A training checkpoint's model identity rule (docs/SPEC.md §5d), a second identity beside
/// its structural one (which holds everything): that of its model weights — the tensors and
/// plain values under the model keys, named as in a plain state dict of them — plus the stated
/// list of the groups its root keys belong to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrainingCheckpoint {
    /// The root keys holding model weights (`state_dict`, `model`, …), sorted.
    pub model_keys: Vec<String>,
    /// The groups of the root keys (`model`, `optimizer`, `other`, `rng`, `scheduler`), sorted,
    /// each once.
    pub groups: Vec<&'static str>,
    /// Each root key and its group, sorted by key: the group of a metadata value.
    pub root_groups: Vec<(String, &'static str)>,
}

impl TrainingCheckpoint {
    /// "the model weights (state_dict) and the groups model, optimizer, other, scheduler".
    pub fn describe(&self) -> String {
        let keys: Vec<String> = self
            .model_keys
            .iter()
            .map(|k| crate::escape::shown(k).into_owned())
            .collect();
        format!(
            "the model weights ({}) and the groups {}",
            keys.join(", "),
            self.groups.join(", ")
        )
    }

    /// The group of the entry named `name` (a tensor or a metadata value): its root key's,
    /// the longest key it is under.
    pub fn group_of(&self, name: &str) -> &'static str {
        self.root_groups
            .iter()
            .filter(|(key, _)| {
                name == key
                    || name
                        .strip_prefix(key.as_str())
                        .is_some_and(|rest| rest.starts_with('.'))
            })
            .max_by_key(|(key, _)| key.len())
            .map_or("other", |(_, group)| group)
    }

    /// The name `name` has in the model identity when it is under a model key: without the key when
    /// there is one model key (`state_dict.layer.weight` -> `layer.weight`), whole otherwise.
    pub fn model_name<'a>(&self, name: &'a str) -> Option<&'a str> {
        let under = |key: &str| {
            name == key
                || name
                    .strip_prefix(key)
                    .is_some_and(|rest| rest.starts_with('.'))
        };
        match self.model_keys.as_slice() {
            [key] if under(key) => {
                let rest = &name[key.len()..];
                Some(rest.strip_prefix('.').unwrap_or(rest))
            }
            keys if keys.iter().any(|k| under(k)) => Some(name),
            _ => None,
        }
    }
}

/// A global a pickle names beyond those of tensors (`argparse.Namespace`, `posix.system`): its
/// tier (`dangerous`, `unknown`, `benign`), the offset in the pickle that first names it, and
/// what the pickle did with it (`REDUCE`, `NEWOBJ`, `BUILD`, `SETITEM`, `APPEND`, `INST`, `OBJ`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub global: String,
    pub tier: &'static str,
    pub offset: u64,
    pub actions: Vec<&'static str>,
}

/// A tensor that reads its storage's elements out of order: element `(i, j, …)` is at
/// `file_offset + (i * stride[0] + j * stride[1] + …) * element size`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StridedView {
    /// In elements, one per dimension of the shape.
    pub stride: Shape,
    /// The file offset of the storage's first byte, and its size: the bytes the view may read.
    pub storage_start: u64,
    pub storage_bytes: u64,
}

/// How the files of a multi-file model are tied together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// Safetensors shards named by a `*.safetensors.index.json`.
    SafetensorsIndex,
    /// PyTorch shards named by a `*.bin.index.json`.
    PytorchIndex,
    /// GGUF parts `NAME-00001-of-0000N.gguf` carrying `split.*` keys.
    GgufSplit,
}

impl Scheme {
    pub fn name(self) -> &'static str {
        match self {
            Scheme::SafetensorsIndex => "safetensors-index",
            Scheme::PytorchIndex => "pytorch-index",
            Scheme::GgufSplit => "gguf-split",
        }
    }
}

/// The layout of a multi-file model: which files hold it. Reported, never hashed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelFiles {
    pub scheme: Scheme,
    /// The index file (safetensors) or None (GGUF).
    pub index: Option<String>,
    /// The parts in order (by file name for safetensors shards, by number for GGUF parts).
    pub parts: Vec<PartLayout>,
    /// For the tensor at each position of the model's tensor table, the index of its part in
    /// `parts`. Kept apart from [`TensorInfo`], which a million-tensor header holds a million of.
    pub tensor_parts: Vec<u32>,
}

impl ModelFiles {
    /// The part holding the tensor at `position` of the model's tensor table.
    pub fn part_at(&self, position: usize) -> Option<&PartLayout> {
        self.parts.get(*self.tensor_parts.get(position)? as usize)
    }
}

impl Artifact {
    /// The file of a multi-file model that holds tensor `name`; None for a single file.
    pub fn part_of(&self, name: &str) -> Option<&PartLayout> {
        let files = self.layout.files.as_ref()?;
        files.part_at(self.tensors.position(name)?)
    }
}

/// One file of a multi-file model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartLayout {
    /// Its plain file name, inside the model's directory.
    pub file: String,
    pub tensors: usize,
    pub file_size: u64,
    pub header_size: u64,
    pub data_expected: u64,
    pub data_present: u64,
    /// The structural hash of this file read on its own.
    pub structural_hash: String,
}

impl Layout {
    /// The layout of one file of `file_size` bytes whose tensor data starts at `header_size`
    /// and should take `data_expected` bytes: a file cut short holds what lies past the header,
    /// up to what is expected.
    pub(crate) fn single_file(file_size: u64, header_size: u64, data_expected: u64) -> Self {
        Layout {
            file_size,
            header_size,
            data_expected,
            data_present: file_size.saturating_sub(header_size).min(data_expected),
            ..Layout::default()
        }
    }

    pub fn is_truncated(&self) -> bool {
        self.data_present < self.data_expected
    }

    /// Whether the file lacks tensor data its header declares (an interrupted download or
    /// copy), and how much. Reported beside the structural identity, never inside it: the
    /// header of a truncated file still names the whole model.
    pub fn incomplete(&self) -> Option<Incomplete> {
        if !self.is_truncated() {
            return None;
        }
        let parts = self.files.as_ref().map_or_else(Vec::new, |files| {
            files
                .parts
                .iter()
                .filter(|p| p.data_present < p.data_expected)
                .map(|p| p.file.clone())
                .collect()
        });
        Some(Incomplete {
            data_present: self.data_present,
            data_expected: self.data_expected,
            truncated_parts: parts,
        })
    }
}

/// A model whose files end before the tensor data their headers declare.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Incomplete {
    pub data_present: u64,
    pub data_expected: u64,
    /// For a multi-file model, the plain names of the parts that are cut short.
    pub truncated_parts: Vec<String>,
}

impl std::fmt::Display for Incomplete {
    /// `62914560 of 252000000 bytes of tensor data present (truncated)`, naming the parts
    /// of a multi-file model that are cut short (escaped: the names come from the index).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} of {} bytes of tensor data present",
            self.data_present, self.data_expected
        )?;
        match self.truncated_parts.as_slice() {
            [] => write!(f, " (truncated)"),
            parts => {
                let names: Vec<String> = parts
                    .iter()
                    .map(|p| crate::escape::shown(p).into_owned())
                    .collect();
                write!(f, " (truncated: {})", names.join(", "))
            }
        }
    }
}

/// A parsed model file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Artifact {
    /// Which format the file is.
    pub format: Format,
    /// GGUF version (1, 2 or 3); None for safetensors.
    pub gguf_version: Option<u32>,
    /// The metadata by key: GGUF key-values, safetensors `__metadata__`, PyTorch plain values.
    pub metadata: BTreeMap<String, Value>,
    /// The tensors by name.
    pub tensors: Tensors,
    /// Where things lie in the file(s): sizes, alignment, views, findings; not part of the identity.
    pub layout: Layout,
}

impl Artifact {
    /// Total parameter count and per-dtype counts, sorted by dtype name.
    /// Only model weights count: a training checkpoint's optimizer state (AdamW's `exp_avg`,
    /// `exp_avg_sq`), scheduler, RNG and other tensors are not parameters ([`Self::groups`]).
    pub fn parameter_counts(&self) -> (u64, BTreeMap<&'static str, u64>) {
        let mut by_dtype = BTreeMap::new();
        let mut total = 0u64;
        for (position, tensor) in self.tensors.values().enumerate() {
            if let Some(groups) = &self.layout.groups
                && groups.get(position) != Some(&"model")
            {
                continue;
            }
            let n = tensor.n_elements();
            *by_dtype.entry(tensor.dtype.name).or_insert(0u64) += n;
            total = total.saturating_add(n);
        }
        (total, by_dtype)
    }

    /// A training checkpoint's model weights as a model of their own, named as its model
    /// identity names them (`state_dict.layer.weight` -> `layer.weight`); None for other files. The
    /// tensors keep their places in the file, so their values read as before: a conversion
    /// check or a value diff takes a Lightning checkpoint's weights as the model.
    pub fn model_weights(&self) -> Option<Artifact> {
        let training = self.layout.training()?;
        let views = self.layout.views.as_ref();
        type Kept = (TensorInfo, Option<Box<StridedView>>);
        let mut kept: Vec<(crate::table::Name, Kept)> = Vec::new();
        for (position, (name, tensor)) in self.tensors.iter().enumerate() {
            if let Some(model_name) = training.model_name(name) {
                let view = views.and_then(|v| v.get(position).cloned().flatten());
                kept.push((model_name.into(), (tensor.clone(), view)));
            }
        }
        // Model names are unique: one model key is stripped, several are kept whole.
        let table = crate::table::NameTable::from_unsorted(kept);
        let views: Vec<Option<Box<StridedView>>> = table.values().map(|(_, v)| v.clone()).collect();
        let tensors: Tensors = table
            .iter()
            .map(|(name, (tensor, _))| (TensorName::from(name), tensor.clone()))
            .collect();
        Some(Artifact {
            format: self.format,
            gguf_version: self.gguf_version,
            metadata: self
                .metadata
                .iter()
                .filter_map(|(k, v)| Some((training.model_name(k)?.to_owned(), v.clone())))
                .collect(),
            tensors,
            layout: Layout {
                views: views.iter().any(Option::is_some).then_some(views),
                groups: None,
                pickle: self.layout.pickle.as_ref().and_then(|pickle| {
                    let names: Vec<String> = pickle
                        .values_in_pickle
                        .iter()
                        .filter_map(|name| Some(training.model_name(name)?.to_owned()))
                        .collect();
                    let mut decoded: Vec<(String, Vec<u8>)> = pickle
                        .decoded
                        .iter()
                        .filter_map(|(name, bytes)| {
                            Some((training.model_name(name)?.to_owned(), bytes.clone()))
                        })
                        .collect();
                    decoded.sort_unstable_by(|a, b| a.0.cmp(&b.0));
                    (!names.is_empty()).then(|| {
                        Box::new(PickleParts {
                            training: None,
                            values_in_pickle: names,
                            decoded,
                        })
                    })
                }),
                ..self.layout.clone()
            },
        })
    }

    /// Whether the tensor named `name` holds its values inside the pickle (a numpy array),
    /// not at its `file_offset`.
    pub fn values_in_pickle(&self, name: &str) -> bool {
        self.layout.pickle.as_ref().is_some_and(|pickle| {
            pickle
                .values_in_pickle
                .binary_search_by(|n| n.as_str().cmp(name))
                .is_ok()
        })
    }

    /// The decoded bytes of the tensor named `name` when its values lie inside the pickle as
    /// protocol 2's latin-1 text (a numpy array); None otherwise.
    pub fn decoded_values(&self, name: &str) -> Option<&[u8]> {
        let decoded = &self.layout.pickle.as_ref()?.decoded;
        let at = decoded
            .binary_search_by(|(n, _)| n.as_str().cmp(name))
            .ok()?;
        Some(&decoded[at].1)
    }

    /// The group of the tensor named `name` (None when the file has no groups).
    pub fn tensor_group(&self, name: &str) -> Option<&'static str> {
        let groups = self.layout.groups.as_ref()?;
        groups.get(self.tensors.position(name)?).copied()
    }

    /// The group of the metadata value named `name`: a training checkpoint's are grouped by
    /// their root key; None for other files.
    pub fn metadata_group(&self, name: &str) -> Option<&'static str> {
        Some(self.layout.training()?.group_of(name))
    }

    /// A training checkpoint's groups in the order first met: name, tensors, elements.
    pub fn groups(&self) -> Vec<(&'static str, usize, u64)> {
        let mut out: Vec<(&'static str, usize, u64)> = Vec::new();
        let Some(groups) = &self.layout.groups else {
            return out;
        };
        for (tensor, group) in self.tensors.values().zip(groups) {
            match out.iter_mut().find(|(name, ..)| name == group) {
                Some(entry) => {
                    entry.1 += 1;
                    entry.2 = entry.2.saturating_add(tensor.n_elements());
                }
                None => out.push((group, 1, tensor.n_elements())),
            }
        }
        const ORDER: [&str; 5] = ["model", "optimizer", "scheduler", "rng", "other"];
        out.sort_by_key(|(name, ..)| ORDER.iter().position(|o| o == name));
        out
    }
}
