//! The `.wdelta` container: magic, version, JSON header, array records, SHA-256 trailer.
//!
//! Layout (every integer little-endian):
//! `b"wdelta\0"`, u32 version, u32 header length H, H bytes of JSON, array records, and the
//! SHA-256 of everything before the last 32 bytes. A record is: u32 + tensor name, u32 + field
//! name, u32 + numpy dtype name, u32 ndim, ndim x u64 dims, u64 byte count, raw bytes.
//!
//! This module holds the constants and types; `error.rs` names every rule a file can break
//! ([`WdeltaError`]), `header.rs` parses the JSON header as a stream (capped by
//! [`crate::formats::limits`]), `read.rs` parses and validates a file ([`WdeltaFile`]) and
//! `write.rs` writes one ([`WdeltaWriter`]).

mod error;
mod header;
mod read;
mod write;

use std::collections::{BTreeMap, HashMap};

pub use error::WdeltaError;
pub use header::{HEADER_BYTES_PER_TENSOR, MAX_DIMS, is_sha256_hex, max_tensors};
pub use read::{WdeltaFile, index_iter, sha256, verify_checksum};
pub use write::{OwnedArray, WdeltaWriter, header_json, record_prefix, write_to_vec};

pub const MAGIC: &[u8; 7] = b"wdelta\0";
/// Bytes before the JSON header: magic, version, header length.
pub const PREAMBLE_LEN: usize = 7 + 4 + 4;
pub const CHECKSUM_LEN: usize = 32;
/// Versions this implementation reads and writes.
pub const SUPPORTED_VERSIONS: [u32; 2] = [1, 2];

/// Whether `bytes` start like a `.wdelta` file (magic only; nothing is validated).
pub fn is_wdelta(bytes: &[u8]) -> bool {
    bytes.starts_with(MAGIC)
}

/// Compression strategy of one tensor (and the default of a file).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Strategy {
    Sparse,
    Quantized,
    Int4,
}

impl Strategy {
    pub fn name(self) -> &'static str {
        match self {
            Strategy::Sparse => "sparse",
            Strategy::Quantized => "quantized",
            Strategy::Int4 => "int4",
        }
    }

    pub fn parse(s: &str) -> Option<Strategy> {
        match s {
            "sparse" => Some(Strategy::Sparse),
            "quantized" => Some(Strategy::Quantized),
            "int4" => Some(Strategy::Int4),
            _ => None,
        }
    }

    /// The array fields of the strategy, in the order the reference writes them.
    pub fn fields(self) -> &'static [&'static str] {
        match self {
            Strategy::Sparse => &["indices", "values"],
            Strategy::Quantized => &["scales", "packed_signs"],
            Strategy::Int4 => &[
                "outlier_idx",
                "outlier_vals",
                "scale",
                "zero_point",
                "packed",
            ],
        }
    }
}

/// Element type of an array record, named as numpy names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArrayDtype {
    Int64,
    Int32,
    Float32,
    Float16,
    Uint8,
}

impl ArrayDtype {
    pub fn name(self) -> &'static str {
        match self {
            ArrayDtype::Int64 => "int64",
            ArrayDtype::Int32 => "int32",
            ArrayDtype::Float32 => "float32",
            ArrayDtype::Float16 => "float16",
            ArrayDtype::Uint8 => "uint8",
        }
    }

    pub fn parse(s: &str) -> Option<ArrayDtype> {
        match s {
            "int64" => Some(ArrayDtype::Int64),
            "int32" => Some(ArrayDtype::Int32),
            "float32" => Some(ArrayDtype::Float32),
            "float16" => Some(ArrayDtype::Float16),
            "uint8" => Some(ArrayDtype::Uint8),
            _ => None,
        }
    }

    pub fn size(self) -> u64 {
        match self {
            ArrayDtype::Int64 => 8,
            ArrayDtype::Int32 | ArrayDtype::Float32 => 4,
            ArrayDtype::Float16 => 2,
            ArrayDtype::Uint8 => 1,
        }
    }
}

/// Strategy-specific scalars of a tensor entry.
#[derive(Debug, Clone, PartialEq)]
pub enum Params {
    Sparse {
        sparsity: f64,
    },
    Quantized {
        n_elements: u64,
        n_cols: u64,
    },
    Int4 {
        outlier_fraction: f64,
        n_elements: u64,
        n_outliers: u64,
        /// 1: `packed` holds the non-outliers only; 2: all elements.
        layout: u32,
    },
}

impl Params {
    pub fn strategy(&self) -> Strategy {
        match self {
            Params::Sparse { .. } => Strategy::Sparse,
            Params::Quantized { .. } => Strategy::Quantized,
            Params::Int4 { .. } => Strategy::Int4,
        }
    }
}

/// One entry of the header's `tensors` map.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorEntry {
    pub shape: Vec<u64>,
    /// dtype of the delta as the reference records it (always "float32" when written here).
    pub dtype: String,
    /// Version 2: dtype of the base tensor ("float32", "bfloat16", "float16", "float64").
    pub base_dtype: Option<String>,
    pub params: Params,
}

impl TensorEntry {
    pub fn strategy(&self) -> Strategy {
        self.params.strategy()
    }

    /// Number of elements of the shape (1 for a scalar); None on overflow.
    pub fn n_elements(&self) -> Option<u64> {
        self.shape
            .iter()
            .try_fold(1u64, |acc, &d| acc.checked_mul(d))
    }
}

/// The parsed JSON header.
#[derive(Debug, Clone, PartialEq)]
pub struct Header {
    pub parent_hash: String,
    pub strategy: Strategy,
    /// Sorted by name.
    pub tensors: BTreeMap<String, TensorEntry>,
}

/// Where one array record lies and what it declares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub dtype: ArrayDtype,
    pub shape: Vec<u64>,
    /// Offset of the raw bytes in the file.
    pub data_offset: usize,
    pub data_len: usize,
    /// Offset of the record (its tensor-name length) in the file.
    pub record_offset: usize,
    /// Bytes of the whole record, framing included.
    pub record_len: usize,
}

impl Record {
    pub fn len(&self) -> usize {
        self.data_len / self.dtype.size() as usize
    }

    pub fn is_empty(&self) -> bool {
        self.data_len == 0
    }
}

/// The records of a file, by tensor and field. A tensor's name is held once, with a slot per
/// field of its strategy, so the index of a file with many small tensors stays small.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecordIndex {
    by_tensor: HashMap<String, [Option<(&'static str, Record)>; 5]>,
    len: usize,
}

/// The field `field` names, as a static string, and its position among its strategy's fields.
fn field_slot(field: &str) -> Option<(&'static str, usize)> {
    [Strategy::Sparse, Strategy::Quantized, Strategy::Int4]
        .into_iter()
        .find_map(|s| {
            s.fields()
                .iter()
                .position(|f| *f == field)
                .map(|i| (s.fields()[i], i))
        })
}

impl RecordIndex {
    pub fn get(&self, tensor: &str, field: &str) -> Option<&Record> {
        let (name, slot) = field_slot(field)?;
        match &self.by_tensor.get(tensor)?[slot] {
            Some((f, r)) if *f == name => Some(r),
            _ => None,
        }
    }

    pub fn contains(&self, tensor: &str, field: &str) -> bool {
        self.get(tensor, field).is_some()
    }

    /// Adds a record; false (and nothing changed) when `field` is no strategy's field or the
    /// slot is taken.
    pub fn insert(&mut self, tensor: String, field: &str, record: Record) -> bool {
        let Some((name, slot)) = field_slot(field) else {
            return false;
        };
        let slots = self.by_tensor.entry(tensor).or_default();
        if slots[slot].is_some() {
            return false;
        }
        slots[slot] = Some((name, record));
        self.len += 1;
        true
    }

    /// Every record with its tensor and field, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &'static str, &Record)> {
        self.by_tensor.iter().flat_map(|(t, slots)| {
            slots
                .iter()
                .flatten()
                .map(move |(f, r)| (t.as_str(), *f, r))
        })
    }

    pub fn values(&self) -> impl Iterator<Item = &Record> {
        self.iter().map(|(_, _, r)| r)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Rows of the quantized strategy: shape[0] for 2-D and up, else 1.
pub fn quantized_rows(shape: &[u64]) -> u64 {
    if shape.len() > 1 { shape[0] } else { 1 }
}

/// Columns of the quantized strategy: the product of shape[1:], or n for 0-D and 1-D.
pub fn quantized_cols(shape: &[u64]) -> u64 {
    if shape.len() > 1 {
        shape[1..].iter().fold(1u64, |a, &d| a.saturating_mul(d))
    } else {
        shape.iter().fold(1u64, |a, &d| a.saturating_mul(d))
    }
}

/// Borrowed raw bytes of one array.
#[derive(Debug, Clone, Copy)]
pub struct ArrayRef<'a> {
    pub dtype: ArrayDtype,
    pub data: &'a [u8],
}

/// The arrays of one tensor in the order of [`Strategy::fields`].
#[derive(Debug, Clone)]
pub struct TensorArrays<'a> {
    pub fields: Vec<ArrayRef<'a>>,
}
