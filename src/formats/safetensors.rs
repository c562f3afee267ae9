//! safetensors: an 8-byte little-endian header length N, N bytes of UTF-8 JSON, then the data.
//!
//! Validation follows the safetensors crate: the header is at most 100,000,000 bytes, starts
//! with `{` (trailing whitespace padding allowed), tensor data is contiguous from offset 0 with
//! no gap or overlap, every tensor spans exactly its computed size, and the data ends exactly
//! where the file ends. Unlike a plain JSON map, duplicate keys are an error.

use std::collections::{BTreeMap, HashSet};
use std::fmt;

use serde::de::{self, Deserializer, MapAccess, Visitor};

use crate::artifact::{Artifact, Format, Layout, TensorInfo, TensorName, Tensors, Value};
use crate::dtype::Dtype;
use crate::escape::quoted;

const METADATA_KEY: &str = "__metadata__";

#[derive(Debug, thiserror::Error)]
pub enum SafetensorsError {
    #[error("file is {file_len} bytes, too short for the 8-byte header length")]
    MissingHeaderLength { file_len: u64 },
    #[error(
        "header length {header_len} (bytes 0-7) exceeds the limit of {limit} bytes; {how}",
        how = crate::formats::limits::how_to_raise()
    )]
    HeaderTooLarge { header_len: u64, limit: u64 },
    #[error(
        "header length {header_len} (bytes 0-7) runs past the end of the file ({file_len} bytes): \
         the header is incomplete"
    )]
    HeaderIncomplete { header_len: u64, file_len: u64 },
    #[error("invalid safetensors JSON header: byte {offset} is not valid UTF-8")]
    InvalidUtf8 { offset: u64 },
    #[error("invalid safetensors JSON header: expected '{{' at offset 8, found {found:?}")]
    InvalidHeaderStart { found: char },
    #[error(
        "invalid safetensors JSON header: {message} (header line {line}, column {column}; the \
         header starts at offset 8)"
    )]
    InvalidJson {
        message: String,
        line: usize,
        column: usize,
    },
    #[error(
        "tensor {}: unknown dtype {}, expected one of BOOL, F4, F6_E2M3, F6_E3M2, \
         U8, I8, F8_E5M2, F8_E4M3, F8_E8M0, F8_E4M3FNUZ, F8_E5M2FNUZ, I16, U16, F16, BF16, I32, \
         U32, F32, C64, F64, I64, U64",
        quoted(.name),
        quoted(.dtype)
    )]
    UnknownDtype { name: String, dtype: String },
    #[error("tensor {}: data_offsets [{begin}, {end}] end before they begin", quoted(.name))]
    ReversedOffsets { name: String, begin: u64, end: u64 },
    #[error(
        "tensor {}: data begins at {begin}, expected {expected} (tensor data must be \
         contiguous from 0, with no gap or overlap)",
        quoted(.name)
    )]
    NonContiguous {
        name: String,
        begin: u64,
        expected: u64,
    },
    #[error("invalid safetensors JSON header: duplicate tensor {}", quoted(.name))]
    DuplicateTensor { name: String },
    #[error("tensor {}: element count of shape {shape:?} overflows 64 bits", quoted(.name))]
    ShapeOverflow { name: String, shape: Vec<u64> },
    #[error("tensor {}: {n_elements} elements of {bits}-bit {dtype} do not fill whole bytes", quoted(.name))]
    MisalignedSlice {
        name: String,
        n_elements: u64,
        bits: u64,
        dtype: &'static Dtype,
    },
    #[error(
        "tensor {}: shape {shape:?} of {dtype} needs {expected} bytes, but data_offsets \
         [{begin}, {end}] span {found}",
        quoted(.name)
    )]
    SizeMismatch {
        name: String,
        shape: Vec<u64>,
        dtype: &'static Dtype,
        expected: u64,
        begin: u64,
        end: u64,
        found: u64,
    },
    #[error(
        "the data section holds {found} bytes but the tensors end at {expected}: {extra} bytes \
         after the last tensor"
    )]
    TrailingBytes {
        found: u64,
        expected: u64,
        extra: u64,
    },
}

/// Parses a safetensors file given as its bytes (or a prefix holding at least the header).
pub fn parse(bytes: &[u8]) -> Result<Artifact, SafetensorsError> {
    parse_prefix(bytes, bytes.len() as u64)
}

/// Whether `bytes` start like a safetensors file: a u64 header length, then `{`.
pub(crate) fn detect(bytes: &[u8]) -> bool {
    bytes.len() > 8 && bytes[8] == b'{'
}

/// Bytes a reader needs to parse the header: the 8-byte length, then the length it declares
/// (None until the first 8 bytes are there).
pub fn header_bytes_needed(prefix: &[u8]) -> Option<u64> {
    let len = u64::from_le_bytes(prefix.get(..8)?.try_into().ok()?);
    // Over the limit: nothing more to read, the parse refuses it at once.
    Some(if len > super::limits::max_header_bytes() {
        8
    } else {
        8 + len
    })
}

/// Parses the first bytes of a file of `file_len` bytes: sizes and offsets are checked against
/// the whole file, and the header must lie within `prefix`.
pub(crate) fn parse_prefix(prefix: &[u8], file_len: u64) -> Result<Artifact, SafetensorsError> {
    let (raw, data_start) = read_header(prefix, file_len)?;
    let mut entries = raw.tensors;
    let data_expected = place_tensors(&mut entries, data_start)?;
    // The JSON reader has already refused duplicate keys.
    let tensors = Tensors::from_unique(entries)
        .map_err(|name| SafetensorsError::DuplicateTensor { name: name.into() })?;

    let data_present = file_len - data_start;
    if data_present > data_expected {
        return Err(SafetensorsError::TrailingBytes {
            found: data_present,
            expected: data_expected,
            extra: data_present - data_expected,
        });
    }
    let metadata = raw
        .metadata
        .into_iter()
        .map(|(k, v)| (k, Value::String(v)))
        .collect();
    Ok(Artifact {
        format: Format::Safetensors,
        gguf_version: None,
        metadata,
        tensors,
        layout: Layout::single_file(file_len, data_start, data_expected),
    })
}

/// The header: its length (within the limit, the file and `bytes`), UTF-8, a JSON object, and
/// the first problem its entries have. Returns it with the offset where data starts.
fn read_header(bytes: &[u8], file_len: u64) -> Result<(RawHeader, u64), SafetensorsError> {
    let Some(len_bytes) = bytes.get(..8) else {
        return Err(SafetensorsError::MissingHeaderLength { file_len });
    };
    let header_len = u64::from_le_bytes(len_bytes.try_into().expect("8 bytes"));
    let limit = super::limits::max_header_bytes();
    if header_len > limit {
        return Err(SafetensorsError::HeaderTooLarge { header_len, limit });
    }
    let data_start = 8 + header_len;
    if data_start > file_len || data_start > bytes.len() as u64 {
        return Err(SafetensorsError::HeaderIncomplete {
            header_len,
            file_len: file_len.min(bytes.len() as u64),
        });
    }
    let header_bytes = &bytes[8..data_start as usize];
    let header = std::str::from_utf8(header_bytes).map_err(|e| SafetensorsError::InvalidUtf8 {
        offset: 8 + e.valid_up_to() as u64,
    })?;
    match header.chars().next() {
        Some('{') => {}
        found => {
            return Err(SafetensorsError::InvalidHeaderStart {
                found: found.unwrap_or('\0'),
            });
        }
    }
    let raw: RawHeader =
        serde_json::from_str(header).map_err(|e| SafetensorsError::InvalidJson {
            message: strip_position(&e.to_string()),
            line: e.line(),
            column: e.column(),
        })?;
    match raw.first_problem {
        Some(problem) => Err(problem),
        None => Ok((raw, data_start)),
    }
}

/// Checks that the tensors, in physical order, fill the data contiguously with the bytes their
/// dtype and shape take, and turns each entry's begin and end offsets (as the JSON has them)
/// into its offset in the file and byte length. Returns where the last tensor ends.
fn place_tensors(
    entries: &mut [(TensorName, TensorInfo)],
    data_start: u64,
) -> Result<u64, SafetensorsError> {
    // Physical order decides contiguity; the identity itself is keyed by name.
    entries.sort_unstable_by(|a, b| {
        (a.1.file_offset, a.1.byte_length, &a.0).cmp(&(b.1.file_offset, b.1.byte_length, &b.0))
    });
    let mut expected_begin = 0u64;
    for (name, info) in entries.iter_mut() {
        let (begin, end) = (info.file_offset, info.byte_length);
        if begin != expected_begin {
            return Err(SafetensorsError::NonContiguous {
                name: name.to_string(),
                begin,
                expected: expected_begin,
            });
        }
        let byte_length = byte_length_of(name, info)?;
        if end - begin != byte_length {
            return Err(SafetensorsError::SizeMismatch {
                name: name.to_string(),
                shape: info.shape.to_vec(),
                dtype: info.dtype,
                expected: byte_length,
                begin,
                end,
                found: end - begin,
            });
        }
        expected_begin = end;
        info.byte_length = byte_length;
        info.file_offset = data_start + begin;
    }
    Ok(expected_begin)
}

/// The bytes a tensor's shape of its dtype takes: whole bytes, without overflow.
fn byte_length_of(name: &str, info: &TensorInfo) -> Result<u64, SafetensorsError> {
    let overflow = || SafetensorsError::ShapeOverflow {
        name: name.to_string(),
        shape: info.shape.to_vec(),
    };
    let n_elements = info
        .shape
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(d))
        .ok_or_else(overflow)?;
    let bits = info.dtype.block_bits;
    let n_bits = n_elements.checked_mul(bits).ok_or_else(overflow)?;
    if !n_bits.is_multiple_of(8) {
        return Err(SafetensorsError::MisalignedSlice {
            name: name.to_string(),
            n_elements,
            bits,
            dtype: info.dtype,
        });
    }
    Ok(n_bits / 8)
}

/// serde_json appends " at line L column C"; we report those as fields of our own.
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_string(),
        None => message.to_string(),
    }
}

#[derive(serde::Deserialize)]
struct RawTensor<'a> {
    #[serde(borrow)]
    dtype: std::borrow::Cow<'a, str>,
    shape: crate::artifact::Shape,
    data_offsets: (u64, u64),
}

/// The header object: `__metadata__` plus tensors, rejecting duplicate keys at every level.
/// Tensors are read straight into the table the artifact keeps (one entry each, names and
/// shapes inline): a 100 MB header of small entries must not cost many times its size.
struct RawHeader {
    metadata: BTreeMap<String, String>,
    /// `file_offset` and `byte_length` hold the JSON's begin and end offsets.
    tensors: Vec<(TensorName, TensorInfo)>,
    /// The first entry (in file order) with an unknown dtype or reversed offsets.
    first_problem: Option<SafetensorsError>,
}

impl<'de> de::Deserialize<'de> for RawHeader {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct HeaderVisitor;
        impl<'de> Visitor<'de> for HeaderVisitor {
            type Value = RawHeader;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object of tensors and an optional __metadata__ object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawHeader, A::Error> {
                // Hashes of the names seen; a repeated hash is confirmed against the names.
                let mut seen = HashSet::new();
                let mut metadata = None;
                let mut tensors: Vec<(TensorName, TensorInfo)> = Vec::new();
                let mut first_problem = None;
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    let repeated = if key == METADATA_KEY {
                        metadata.is_some()
                    } else {
                        !seen.insert(name_hash(&key))
                            && tensors.iter().any(|(n, _)| n.as_str() == key.as_ref())
                    };
                    if repeated {
                        return Err(de::Error::custom(format_args!(
                            "duplicate key {} (a tensor or __metadata__ may appear only once)",
                            crate::escape::quoted(&key)
                        )));
                    }
                    if key == METADATA_KEY {
                        metadata = Some(map.next_value::<UniqueStringMap>()?.0);
                        continue;
                    }
                    let tensor: RawTensor = map.next_value().map_err(|e| {
                        de::Error::custom(format_args!(
                            "tensor {}: {e}",
                            crate::escape::quoted(&key)
                        ))
                    })?;
                    let (begin, end) = tensor.data_offsets;
                    let dtype = match crate::dtype::by_safetensors_name(&tensor.dtype) {
                        Some(dtype) => dtype,
                        None => {
                            first_problem.get_or_insert(SafetensorsError::UnknownDtype {
                                name: key.to_string(),
                                dtype: tensor.dtype.into_owned(),
                            });
                            continue;
                        }
                    };
                    if end < begin {
                        first_problem.get_or_insert(SafetensorsError::ReversedOffsets {
                            name: key.to_string(),
                            begin,
                            end,
                        });
                        continue;
                    }
                    tensors.push((
                        TensorName::from(key.as_ref()),
                        TensorInfo {
                            dtype,
                            shape: tensor.shape,
                            byte_length: end,
                            file_offset: begin,
                        },
                    ));
                }
                Ok(RawHeader {
                    metadata: metadata.unwrap_or_default(),
                    tensors,
                    first_problem,
                })
            }
        }
        deserializer.deserialize_map(HeaderVisitor)
    }
}

fn name_hash(name: &str) -> u64 {
    use std::hash::BuildHasher;
    static STATE: std::sync::OnceLock<std::collections::hash_map::RandomState> =
        std::sync::OnceLock::new();
    STATE.get_or_init(Default::default).hash_one(name)
}

/// `__metadata__`: a string→string map whose keys must be unique.
struct UniqueStringMap(BTreeMap<String, String>);

impl<'de> de::Deserialize<'de> for UniqueStringMap {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MapVisitor;
        impl<'de> Visitor<'de> for MapVisitor {
            type Value = UniqueStringMap;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("__metadata__ as an object of string values")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<UniqueStringMap, A::Error> {
                let mut out = BTreeMap::new();
                while let Some(key) = map.next_key::<String>()? {
                    let value: String = map.next_value().map_err(|e| {
                        de::Error::custom(format_args!(
                            "__metadata__ value of {key:?} must be a string: {e}"
                        ))
                    })?;
                    if out.contains_key(&key) {
                        return Err(de::Error::custom(format_args!(
                            "duplicate key {key:?} in __metadata__"
                        )));
                    }
                    out.insert(key, value);
                }
                Ok(UniqueStringMap(out))
            }
        }
        deserializer.deserialize_map(MapVisitor)
    }
}
