//! GGUF versions 1–3, little- and big-endian.
//!
//! Only the header is read: magic, version, counts, metadata, tensor descriptors. Checks follow
//! ggml's `gguf_init_from_file`: known tensor types, at most 4 dimensions, element counts that
//! fit in i64, the first dimension a multiple of the block size, a power-of-two
//! `general.alignment` (u32, default 32), and tensor offsets that are aligned and contiguous.
//! Every count is checked against the bytes that remain before anything is allocated for it.

use std::collections::BTreeMap;

use crate::artifact::{
    Array, Artifact, F32Bits, F64Bits, Format, Layout, Shape, StringArray, TensorInfo, TensorName,
    Tensors, Value,
};
use crate::dtype::Dtype;
use crate::escape::quoted;

pub(crate) const MAGIC: &[u8; 4] = b"GGUF";
pub(crate) const DEFAULT_ALIGNMENT: u64 = 32;
/// ggml's GGML_MAX_DIMS.
pub(crate) const MAX_DIMS: u32 = 4;
/// Arrays of arrays deeper than this are refused (real files nest at most 2 levels).
pub(crate) const MAX_NESTING: usize = 64;

impl GgufError {
    /// For a parse of a prefix of a `file_len`-byte file: the prefix length at which the
    /// failed read would have had its bytes, when the file has them (None for real errors).
    pub fn needs_more(&self, file_len: u64) -> Option<u64> {
        match self {
            GgufError::UnexpectedEof {
                offset,
                needed,
                available,
                ..
            } => {
                let end = offset.checked_add(*needed)?;
                (end <= file_len && *available < *needed).then_some(end)
            }
            _ => None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum GgufError {
    #[error(
        "unable to parse GGUF header: the header runs past the limit of {limit} bytes (at \
         offset {offset}, reading {what}); {how}",
        how = crate::formats::limits::how_to_raise()
    )]
    HeaderTooLarge {
        offset: u64,
        what: String,
        limit: u64,
    },
    #[error(
        "unable to parse GGUF header: {what} at offset {offset} is {count}, more than the limit \
         of {max} (one per {per} bytes of the {limit}-byte header limit); {how}",
        how = crate::formats::limits::how_to_raise()
    )]
    OverLimit {
        offset: u64,
        what: String,
        count: u64,
        max: u64,
        per: u64,
        limit: u64,
    },
    #[error("unable to parse GGUF header: the file starts with {found:?}, expected \"GGUF\"")]
    BadMagic { found: String },
    #[error(
        "unable to parse GGUF header: unsupported version {version} at offset 4, expected 1, 2 or 3"
    )]
    UnsupportedVersion { version: u32 },
    #[error(
        "unable to parse GGUF header: unexpected end of file at offset {offset} reading {what}: \
         need {needed} bytes, {available} present (the file is truncated: cut short inside its \
         header)"
    )]
    UnexpectedEof {
        offset: u64,
        what: String,
        needed: u64,
        available: u64,
    },
    #[error(
        "unable to parse GGUF header: {what} at offset {offset} is {count}, but the {remaining} \
         bytes left in the file hold at most {max} (the file is truncated inside its header, \
         or the count is corrupt)"
    )]
    CountTooLarge {
        offset: u64,
        what: String,
        count: u64,
        remaining: u64,
        max: u64,
    },
    #[error("unable to parse GGUF header: {what} at offset {offset} is not valid UTF-8")]
    InvalidUtf8 { offset: u64, what: String },
    #[error(
        "unable to parse GGUF header: metadata key {}: unknown value type {type_id} at \
         offset {offset}, expected 0-12",
        quoted(.key)
    )]
    UnknownValueType {
        offset: u64,
        key: String,
        type_id: u32,
    },
    #[error(
        "unable to parse GGUF header: metadata key {}: bool byte {byte} at offset {offset}, \
         expected 0 or 1",
        quoted(.key)
    )]
    InvalidBool { offset: u64, key: String, byte: u8 },
    #[error(
        "unable to parse GGUF header: metadata key {}: arrays nested deeper than \
         {MAX_NESTING} levels at offset {offset}",
        quoted(.key)
    )]
    NestingTooDeep { offset: u64, key: String },
    #[error("unable to parse GGUF header: duplicate metadata key {} at offset {offset}", quoted(.key))]
    DuplicateKey { offset: u64, key: String },
    #[error("unable to parse GGUF header: duplicate tensor name {} at offset {offset}", quoted(.name))]
    DuplicateTensor { offset: u64, name: String },
    #[error(
        "unable to parse GGUF header: tensor {}: {n_dims} dimensions at offset {offset}, \
         expected at most {MAX_DIMS}",
        quoted(.name)
    )]
    TooManyDimensions {
        offset: u64,
        name: String,
        n_dims: u32,
    },
    #[error(
        "unable to parse GGUF header: tensor {}: element count of shape {shape:?} exceeds \
         the largest ggml supports (2^63-1)",
        quoted(.name)
    )]
    ElementCountOverflow { name: String, shape: Vec<u64> },
    #[error(
        "unable to parse GGUF header: tensor {}: type {type_id} at offset {offset} was \
         removed from ggml",
        quoted(.name)
    )]
    RemovedTensorType {
        offset: u64,
        name: String,
        type_id: u32,
    },
    #[error(
        "unable to parse GGUF header: tensor {}: unknown type {type_id} at offset \
         {offset}, expected 0-42",
        quoted(.name)
    )]
    UnknownTensorType {
        offset: u64,
        name: String,
        type_id: u32,
    },
    #[error(
        "unable to parse GGUF header: tensor {}: first dimension {ne0} is not a multiple \
         of the {dtype} block size {block_size}",
        quoted(.name)
    )]
    BlockMisaligned {
        name: String,
        ne0: u64,
        dtype: &'static Dtype,
        block_size: u64,
    },
    #[error("unable to parse GGUF header: general.alignment must be of type u32, found {found}")]
    AlignmentType { found: &'static str },
    #[error("unable to parse GGUF header: general.alignment is {value}, expected a power of two")]
    BadAlignment { value: u32 },
    #[error(
        "unable to parse GGUF header: tensor {}: data offset {data_offset} is not a \
         multiple of the alignment {alignment}",
        quoted(.name)
    )]
    MisalignedOffset {
        name: String,
        data_offset: u64,
        alignment: u64,
    },
    #[error(
        "unable to parse GGUF header: tensor {}: data offset {data_offset}, expected \
         {expected} (tensors are stored in order, each padded to the alignment {alignment})",
        quoted(.name)
    )]
    OffsetMismatch {
        name: String,
        data_offset: u64,
        expected: u64,
        alignment: u64,
    },
    #[error("unable to parse GGUF header: the tensor data section size overflows 64 bits")]
    DataSizeOverflow,
}

type Result<T> = std::result::Result<T, GgufError>;

/// GGUF metadata value type ids.
mod value_type {
    pub(super) const U8: u32 = 0;
    pub(super) const I8: u32 = 1;
    pub(super) const U16: u32 = 2;
    pub(super) const I16: u32 = 3;
    pub(super) const U32: u32 = 4;
    pub(super) const I32: u32 = 5;
    pub(super) const F32: u32 = 6;
    pub(super) const BOOL: u32 = 7;
    pub(super) const STRING: u32 = 8;
    pub(super) const ARRAY: u32 = 9;
    pub(super) const U64: u32 = 10;
    pub(super) const I64: u32 = 11;
    pub(super) const F64: u32 = 12;
}

/// A bounds-checked reader over the header bytes in the file's byte order.
struct Cursor<'a> {
    bytes: &'a [u8],
    /// Size of the whole file (`bytes` may be a prefix of it): counts are bounded by it.
    file_len: u64,
    /// The header may not run past this offset ([`crate::formats::limits`]).
    limit: u64,
    /// Arrays nested in arrays read so far (each costs more memory than its bytes).
    inner_arrays: u64,
    pos: usize,
    big_endian: bool,
    /// Version 1 stores counts and lengths as u32; later versions as u64.
    wide_counts: bool,
}

macro_rules! read_number {
    ($fn_name:ident, $ty:ty) => {
        fn $fn_name(&mut self, what: &dyn Fn() -> String) -> Result<$ty> {
            let raw = self.take(std::mem::size_of::<$ty>(), what)?;
            let raw = raw.try_into().expect("length checked by take");
            Ok(if self.big_endian {
                <$ty>::from_be_bytes(raw)
            } else {
                <$ty>::from_le_bytes(raw)
            })
        }
    };
}

impl<'a> Cursor<'a> {
    fn offset(&self) -> u64 {
        self.pos as u64
    }

    /// Bytes of the file after the cursor (what counts are checked against).
    fn remaining(&self) -> u64 {
        self.file_len.saturating_sub(self.pos as u64)
    }

    fn take(&mut self, n: usize, what: &dyn Fn() -> String) -> Result<&'a [u8]> {
        if (self.pos as u64).saturating_add(n as u64) > self.limit {
            return Err(GgufError::HeaderTooLarge {
                offset: self.offset(),
                what: what(),
                limit: self.limit,
            });
        }
        if self.bytes.len() - self.pos < n {
            return Err(GgufError::UnexpectedEof {
                offset: self.offset(),
                what: what(),
                needed: n as u64,
                available: (self.bytes.len() - self.pos) as u64,
            });
        }
        let out = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    read_number!(u8, u8);
    read_number!(i8, i8);
    read_number!(u16, u16);
    read_number!(i16, i16);
    read_number!(u32, u32);
    read_number!(i32, i32);
    read_number!(u64, u64);
    read_number!(i64, i64);

    /// A count or length: u32 in version 1, u64 after.
    fn count(&mut self, what: &dyn Fn() -> String) -> Result<u64> {
        if self.wide_counts {
            self.u64(what)
        } else {
            self.u32(what).map(u64::from)
        }
    }

    /// A count of items that each take at least `min_item_size` bytes: refused when the rest
    /// of the header cannot hold that many, so no allocation is ever sized by a lie.
    fn bounded_count(&mut self, min_item_size: u64, what: &dyn Fn() -> String) -> Result<usize> {
        let offset = self.offset();
        let count = self.count(what)?;
        let remaining = self.remaining();
        let max = remaining / min_item_size.max(1);
        if count > max {
            return Err(GgufError::CountTooLarge {
                offset,
                what: what(),
                count,
                remaining,
                max,
            });
        }
        if count.saturating_mul(min_item_size) > self.limit.saturating_sub(self.offset()) {
            return Err(GgufError::HeaderTooLarge {
                offset,
                what: what(),
                limit: self.limit,
            });
        }
        Ok(count as usize)
    }

    fn string(&mut self, what: &dyn Fn() -> String) -> Result<String> {
        let len = self.bounded_count(1, &|| format!("the length of {}", what()))?;
        let offset = self.offset();
        let raw = self.take(len, what)?;
        match std::str::from_utf8(raw) {
            Ok(s) => Ok(s.to_owned()),
            Err(_) => Err(GgufError::InvalidUtf8 {
                offset,
                what: what(),
            }),
        }
    }

    fn string_len_size(&self) -> u64 {
        if self.wide_counts { 8 } else { 4 }
    }
}

/// Parses a GGUF file given as its bytes (or a prefix holding at least the whole header).
pub fn parse(bytes: &[u8]) -> Result<Artifact> {
    parse_prefix(bytes, bytes.len() as u64)
}

/// Whether `bytes` start with the GGUF magic.
pub(crate) fn detect(bytes: &[u8]) -> bool {
    bytes.starts_with(MAGIC)
}

/// Parses the first bytes of a file of `file_len` bytes: counts are bounded by the whole file,
/// and the header must lie within `prefix`. A header that runs past the prefix (but not past
/// the file) ends in [`GgufError::UnexpectedEof`]; [`GgufError::needs_more`] tells a reader
/// to read further and try again.
pub fn parse_prefix(prefix: &[u8], file_len: u64) -> Result<Artifact> {
    parse_limited(prefix, file_len, crate::formats::limits::max_header_bytes())
}

/// Metadata keys cost more memory than their bytes: one key is allowed per this many bytes of
/// the header limit (97,656 keys at the default 100 MB; real models have a few dozen).
pub(crate) const BYTES_PER_METADATA_KEY: u64 = 1024;
/// Likewise for arrays nested in arrays (1.5 M at the default limit).
pub(crate) const BYTES_PER_INNER_ARRAY: u64 = 64;
/// Those caps never go below this, however small the header limit.
const MIN_CAPPED_COUNT: u64 = 1024;

/// [`parse_prefix`] with the header limit given rather than read from the environment.
pub(crate) fn parse_limited(prefix: &[u8], file_len: u64, limit: u64) -> Result<Artifact> {
    let file_len = file_len.max(prefix.len() as u64);
    let mut cur = Cursor {
        bytes: prefix,
        file_len,
        limit,
        inner_arrays: 0,
        pos: 0,
        big_endian: false,
        wide_counts: true,
    };
    let version = read_preamble(&mut cur)?;
    let tensor_count_offset = cur.offset();
    let tensor_count = cur.count(&|| "the tensor count".into())?;
    let metadata = read_metadata(&mut cur)?;
    let alignment = alignment_of(&metadata)?;
    check_tensor_count(&cur, tensor_count, tensor_count_offset)?;

    // As ggml: offsets are aligned and each tensor starts where the previous one, padded, ends.
    // Checked as the records stream by; the first offset error is reported only after every
    // record has been read and the names checked, so a malformed record is named first.
    let tensors_start = cur.pos;
    let mut entries = Vec::with_capacity(tensor_count as usize);
    let mut offsets = DataOffsets::new(alignment);
    for index in 0..tensor_count {
        let record = read_tensor_record(&mut cur, index)?;
        let byte_length = tensor_byte_length(&record.name, &record.shape, record.dtype)?;
        offsets.check(&record.name, record.data_offset, byte_length)?;
        entries.push((
            TensorName::from(record.name),
            TensorInfo {
                dtype: record.dtype,
                shape: record.shape,
                byte_length,
                file_offset: record.data_offset,
            },
        ));
    }
    let header_end = cur.offset();
    let mut tensors = match Tensors::from_unique(entries) {
        Ok(tensors) => tensors,
        Err(name) => {
            return Err(GgufError::DuplicateTensor {
                offset: second_name_offset(&cur, tensors_start, &name),
                name: name.into(),
            });
        }
    };
    if let Some(e) = offsets.first_error {
        return Err(e);
    }

    let data_start = align_up(header_end, alignment).ok_or(GgufError::DataSizeOverflow)?;
    for tensor in tensors.values_mut() {
        tensor.file_offset = tensor.file_offset.saturating_add(data_start);
    }
    Ok(Artifact {
        format: Format::Gguf,
        gguf_version: Some(version),
        metadata,
        tensors,
        layout: Layout {
            alignment: Some(alignment),
            big_endian: cur.big_endian,
            ..Layout::single_file(file_len, data_start, offsets.data_end)
        },
    })
}

/// The magic and the version; sets the cursor's byte order and count width. Returns the version.
fn read_preamble(cur: &mut Cursor) -> Result<u32> {
    let magic = cur.take(4, &|| "the magic".into())?;
    if magic != MAGIC {
        return Err(GgufError::BadMagic {
            found: String::from_utf8_lossy(magic).into_owned(),
        });
    }
    let mut version = cur.u32(&|| "the version".into())?;
    // A big-endian file read as little-endian shows its version in the high 16 bits.
    if version != 0 && version & 0xFFFF == 0 {
        cur.big_endian = true;
        version = version.swap_bytes();
    }
    if !(1..=3).contains(&version) {
        return Err(GgufError::UnsupportedVersion { version });
    }
    cur.wide_counts = version >= 2;
    Ok(version)
}

/// The metadata key-value pairs: their count, capped by the header limit, then each pair.
fn read_metadata(cur: &mut Cursor) -> Result<BTreeMap<String, Value>> {
    let kv_count_offset = cur.offset();
    let kv_count = cur.bounded_count(cur.string_len_size() + 4 + 1, &|| {
        "the metadata key-value count".into()
    })?;
    let limit = cur.limit;
    let max_keys = (limit / BYTES_PER_METADATA_KEY).max(MIN_CAPPED_COUNT);
    if kv_count as u64 > max_keys {
        return Err(GgufError::OverLimit {
            offset: kv_count_offset,
            what: "the metadata key-value count".into(),
            count: kv_count as u64,
            max: max_keys,
            per: BYTES_PER_METADATA_KEY,
            limit,
        });
    }
    let mut metadata = BTreeMap::new();
    for index in 0..kv_count {
        let key_offset = cur.offset();
        let key = cur.string(&|| format!("metadata key #{index}"))?;
        let type_id = cur.u32(&|| format!("the value type of metadata key {}", quoted(&key)))?;
        let value = read_value(cur, &key, type_id, 0)?;
        if metadata.contains_key(&key) {
            return Err(GgufError::DuplicateKey {
                offset: key_offset,
                key,
            });
        }
        metadata.insert(key, value);
    }
    Ok(metadata)
}

/// `general.alignment`: a power of two stored as u32, 32 when absent.
fn alignment_of(metadata: &BTreeMap<String, Value>) -> Result<u64> {
    match metadata.get("general.alignment") {
        None => Ok(DEFAULT_ALIGNMENT),
        Some(Value::U32(a)) if a.is_power_of_two() => Ok(u64::from(*a)),
        Some(Value::U32(a)) => Err(GgufError::BadAlignment { value: *a }),
        Some(other) => Err(GgufError::AlignmentType {
            found: other.type_name(),
        }),
    }
}

/// The tensor count fits the bytes left and the header limit, so the table allocated up front
/// is sized by what the header can hold, never by what a multi-gigabyte file could.
fn check_tensor_count(cur: &Cursor, tensor_count: u64, count_offset: u64) -> Result<()> {
    // Each tensor descriptor takes at least: name length, n_dims, type, offset.
    let min_tensor_size = cur.string_len_size() + 4 + 4 + 8;
    let remaining = cur.remaining();
    if tensor_count > remaining / min_tensor_size {
        return Err(GgufError::CountTooLarge {
            offset: count_offset,
            what: "the tensor count".into(),
            count: tensor_count,
            remaining,
            max: remaining / min_tensor_size,
        });
    }
    if tensor_count.saturating_mul(min_tensor_size) > cur.limit.saturating_sub(cur.offset()) {
        return Err(GgufError::HeaderTooLarge {
            offset: count_offset,
            what: "the tensor records".into(),
            limit: cur.limit,
        });
    }
    Ok(())
}

/// One record of the tensor table as stored.
struct TensorRecord {
    name: String,
    shape: Shape,
    dtype: &'static Dtype,
    /// Relative to the start of the data section.
    data_offset: u64,
}

/// Reads tensor record `index`: name, dimensions, type and data offset.
fn read_tensor_record(cur: &mut Cursor, index: u64) -> Result<TensorRecord> {
    let name = cur.string(&|| format!("the name of tensor #{index}"))?;
    let dims_offset = cur.offset();
    let n_dims = cur.u32(&|| format!("the dimension count of tensor {}", quoted(&name)))?;
    if n_dims > MAX_DIMS {
        return Err(GgufError::TooManyDimensions {
            offset: dims_offset,
            name,
            n_dims,
        });
    }
    let mut shape = Shape::with_capacity(n_dims as usize);
    for d in 0..n_dims {
        shape.push(cur.count(&|| format!("dimension {d} of tensor {}", quoted(&name)))?);
    }
    let type_offset = cur.offset();
    let type_id = cur.u32(&|| format!("the type of tensor {}", quoted(&name)))?;
    let dtype = match crate::dtype::by_ggml_id(type_id) {
        Some(t) => t,
        None if type_id < crate::dtype::GGML_ID_END => {
            return Err(GgufError::RemovedTensorType {
                offset: type_offset,
                name,
                type_id,
            });
        }
        None => {
            return Err(GgufError::UnknownTensorType {
                offset: type_offset,
                name,
                type_id,
            });
        }
    };
    let data_offset = cur.u64(&|| format!("the data offset of tensor {}", quoted(&name)))?;
    Ok(TensorRecord {
        name,
        shape,
        dtype,
        data_offset,
    })
}

/// ggml's rule for data offsets, checked record by record: each is aligned and starts where
/// the previous tensor, padded, ends. The first break is kept, not returned at once.
struct DataOffsets {
    alignment: u64,
    /// Where the next tensor must start.
    next: u64,
    /// The end of the last tensor's bytes (the last tensor's padding is optional in practice).
    data_end: u64,
    first_error: Option<GgufError>,
}

impl DataOffsets {
    fn new(alignment: u64) -> Self {
        DataOffsets {
            alignment,
            next: 0,
            data_end: 0,
            first_error: None,
        }
    }

    /// Takes the next tensor; only overflow is returned at once.
    fn check(&mut self, name: &str, data_offset: u64, byte_length: u64) -> Result<()> {
        if self.first_error.is_some() {
            return Ok(());
        }
        let alignment = self.alignment;
        if !data_offset.is_multiple_of(alignment) {
            self.first_error = Some(GgufError::MisalignedOffset {
                name: name.to_owned(),
                data_offset,
                alignment,
            });
        } else if data_offset != self.next {
            self.first_error = Some(GgufError::OffsetMismatch {
                name: name.to_owned(),
                data_offset,
                expected: self.next,
                alignment,
            });
        } else {
            self.data_end = self
                .next
                .checked_add(byte_length)
                .ok_or(GgufError::DataSizeOverflow)?;
            self.next = align_up(self.data_end, alignment).ok_or(GgufError::DataSizeOverflow)?;
        }
        Ok(())
    }
}

fn align_up(offset: u64, alignment: u64) -> Option<u64> {
    Some(offset.checked_add(alignment - 1)? / alignment * alignment)
}

/// Bytes of a tensor as ggml computes them: n_elements / block_size * type_size.
fn tensor_byte_length(name: &str, shape: &[u64], ggml_type: &'static Dtype) -> Result<u64> {
    let overflow = || GgufError::ElementCountOverflow {
        name: name.to_owned(),
        shape: shape.to_vec(),
    };
    let n_elements = shape
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(d))
        .filter(|&n| i64::try_from(n).is_ok())
        .ok_or_else(overflow)?;
    let ne0 = shape.first().copied().unwrap_or(1);
    if ne0 % ggml_type.block_size != 0 {
        return Err(GgufError::BlockMisaligned {
            name: name.to_owned(),
            ne0,
            dtype: ggml_type,
            block_size: ggml_type.block_size,
        });
    }
    (n_elements / ggml_type.block_size)
        .checked_mul(ggml_type.block_bits / 8)
        .ok_or_else(overflow)
}

/// Smallest encoding of one element of each value type, for bounding counts.
fn min_value_size(type_id: u32, cur: &Cursor) -> u64 {
    match type_id {
        value_type::U8 | value_type::I8 | value_type::BOOL => 1,
        value_type::U16 | value_type::I16 => 2,
        value_type::U32 | value_type::I32 | value_type::F32 => 4,
        value_type::U64 | value_type::I64 | value_type::F64 => 8,
        value_type::STRING => cur.string_len_size(),
        // element type + count
        _ => 4 + cur.string_len_size(),
    }
}

fn read_value(cur: &mut Cursor, key: &str, type_id: u32, depth: usize) -> Result<Value> {
    let what = || format!("the value of metadata key {}", quoted(key));
    Ok(match type_id {
        value_type::U8 => Value::U8(cur.u8(&what)?),
        value_type::I8 => Value::I8(cur.i8(&what)?),
        value_type::U16 => Value::U16(cur.u16(&what)?),
        value_type::I16 => Value::I16(cur.i16(&what)?),
        value_type::U32 => Value::U32(cur.u32(&what)?),
        value_type::I32 => Value::I32(cur.i32(&what)?),
        value_type::U64 => Value::U64(cur.u64(&what)?),
        value_type::I64 => Value::I64(cur.i64(&what)?),
        value_type::F32 => Value::F32(F32Bits(cur.u32(&what)?)),
        value_type::F64 => Value::F64(F64Bits(cur.u64(&what)?)),
        value_type::BOOL => Value::Bool(read_bool(cur, key)?),
        value_type::STRING => Value::String(cur.string(&what)?),
        value_type::ARRAY => Value::Array(read_array(cur, key, depth)?),
        _ => {
            return Err(GgufError::UnknownValueType {
                offset: cur.offset().saturating_sub(4),
                key: key.to_owned(),
                type_id,
            });
        }
    })
}

fn read_bool(cur: &mut Cursor, key: &str) -> Result<bool> {
    let offset = cur.offset();
    match cur.u8(&|| format!("a bool of metadata key {}", quoted(key)))? {
        0 => Ok(false),
        1 => Ok(true),
        byte => Err(GgufError::InvalidBool {
            offset,
            key: key.to_owned(),
            byte,
        }),
    }
}

fn read_array(cur: &mut Cursor, key: &str, depth: usize) -> Result<Array> {
    if depth >= MAX_NESTING {
        return Err(GgufError::NestingTooDeep {
            offset: cur.offset(),
            key: key.to_owned(),
        });
    }
    let type_offset = cur.offset();
    let elem_type = cur.u32(&|| format!("the element type of array {}", quoted(key)))?;
    if elem_type > value_type::F64 {
        return Err(GgufError::UnknownValueType {
            offset: type_offset,
            key: key.to_owned(),
            type_id: elem_type,
        });
    }
    let what = || format!("the length of array {}", quoted(key));
    let len = cur.bounded_count(min_value_size(elem_type, cur), &what)?;
    let item = || format!("an element of array {}", quoted(key));

    // Numbers are decoded from one slice: a vocabulary's scores and token types are hundreds
    // of thousands of elements. bounded_count guaranteed that `len` of them fit.
    macro_rules! numbers {
        ($variant:ident, $ty:ty, $wrap:expr) => {{
            const N: usize = std::mem::size_of::<$ty>();
            let raw = cur.take(len * N, &item)?;
            let big_endian = cur.big_endian;
            let mut out = crate::hugepages::vec_with_capacity(len);
            out.extend(raw.chunks_exact(N).map(|chunk| {
                let bytes: [u8; N] = chunk.try_into().expect("chunks of N bytes");
                $wrap(if big_endian {
                    <$ty>::from_be_bytes(bytes)
                } else {
                    <$ty>::from_le_bytes(bytes)
                })
            }));
            Array::$variant(out)
        }};
    }
    Ok(match elem_type {
        value_type::U8 => numbers!(U8, u8, |x| x),
        value_type::I8 => numbers!(I8, i8, |x| x),
        value_type::U16 => numbers!(U16, u16, |x| x),
        value_type::I16 => numbers!(I16, i16, |x| x),
        value_type::U32 => numbers!(U32, u32, |x| x),
        value_type::I32 => numbers!(I32, i32, |x| x),
        value_type::U64 => numbers!(U64, u64, |x| x),
        value_type::I64 => numbers!(I64, i64, |x| x),
        value_type::F32 => numbers!(F32, u32, F32Bits),
        value_type::F64 => numbers!(F64, u64, F64Bits),
        value_type::BOOL => {
            let mut out = Vec::with_capacity(len);
            for _ in 0..len {
                out.push(read_bool(cur, key)?);
            }
            Array::Bool(out)
        }
        value_type::STRING => Array::String(read_string_array(cur, key, len)?),
        _ => {
            let max = (cur.limit / BYTES_PER_INNER_ARRAY).max(MIN_CAPPED_COUNT);
            if cur.inner_arrays.saturating_add(len as u64) > max {
                return Err(GgufError::OverLimit {
                    offset: type_offset,
                    what: format!(
                        "the count of arrays nested in arrays (at array {})",
                        quoted(key)
                    ),
                    count: cur.inner_arrays.saturating_add(len as u64),
                    max,
                    per: BYTES_PER_INNER_ARRAY,
                    limit: cur.limit,
                });
            }
            cur.inner_arrays += len as u64;
            let mut out = Vec::with_capacity(len);
            for _ in 0..len {
                out.push(read_array(cur, key, depth + 1)?);
            }
            Array::Array(out)
        }
    })
}

/// Reads `len` strings into one buffer, validating their UTF-8 in one pass: vocabularies hold
/// hundreds of thousands of short strings, and one validation over all of them is several times
/// faster than one per string. The NUL after each string keeps the check exact: no multi-byte
/// sequence can run across it, so the joined text is valid exactly when every string is.
fn read_string_array(cur: &mut Cursor, key: &str, len: usize) -> Result<StringArray> {
    let item = || format!("an element of array {}", quoted(key));
    let array_start = cur.pos;
    let mut ends = crate::hugepages::vec_with_capacity(len);
    // Reserved once: every string is preceded by its length in the header, so the joined text
    // (strings and NULs) is at most the bytes left less what the lengths take. Pages are only
    // touched as the text fills them; grown by doubling, the text was copied several times.
    // The bytes are the whole mapped file, weights included: the header limit bounds them.
    let header_end = cur
        .bytes
        .len()
        .min(usize::try_from(cur.limit).unwrap_or(usize::MAX));
    let most = header_end
        .saturating_sub(cur.pos)
        .saturating_sub(len.saturating_mul(cur.string_len_size() as usize - 1));
    // Vocabulary tokens average a few bytes: a small array does not reserve the whole header,
    // and an array of long strings grows as it must.
    let likely = len.saturating_mul(16).saturating_add(4096);
    let mut joined = crate::hugepages::vec_with_capacity(most.min(likely) + SHORT_STRING);
    for _ in 0..len {
        let str_len = cur.bounded_count(1, &|| format!("the length of {}", item()))?;
        let start = cur.pos;
        let raw = cur.take(str_len, &item)?;
        // Most tokens are a few bytes: a fixed-size copy of the header bytes from the string on
        // is a couple of moves where a copy of the exact length is a memcpy call. The bytes
        // past the string are cut off again.
        match cur.bytes[start..].first_chunk::<SHORT_STRING>() {
            Some(window) if raw.len() <= SHORT_STRING => {
                let at = joined.len();
                joined.extend_from_slice(window);
                joined.truncate(at + raw.len());
            }
            _ => joined.extend_from_slice(raw),
        }
        ends.push(joined.len());
        joined.push(0);
    }
    if let Err(e) = simdutf8::compat::from_utf8(&joined) {
        let bad = ends.partition_point(|&end| end < e.valid_up_to());
        return Err(GgufError::InvalidUtf8 {
            offset: string_offset(cur, array_start, bad),
            what: format!("element {bad} of array {}", quoted(key)),
        });
    }
    // SAFETY: simdutf8 has just validated exactly these bytes as UTF-8.
    let text = unsafe { String::from_utf8_unchecked(joined) };
    Ok(StringArray::from_parts(text, ends))
}

/// Strings up to this length are copied as one fixed-size block.
const SHORT_STRING: usize = 32;

/// File offset of the second tensor record named `name`: the records (already validated) are
/// walked again only to report the duplicate, so the happy path keeps no per-record offsets.
fn second_name_offset(cur: &Cursor, tensors_start: usize, name: &str) -> u64 {
    let mut walk = Cursor {
        bytes: cur.bytes,
        file_len: cur.file_len,
        limit: cur.limit,
        inner_arrays: 0,
        pos: tensors_start,
        big_endian: cur.big_endian,
        wide_counts: cur.wide_counts,
    };
    let mut seen = false;
    loop {
        let offset = walk.offset();
        let Ok(record_name) = walk.string(&String::new) else {
            return offset;
        };
        if record_name == name {
            if seen {
                return offset;
            }
            seen = true;
        }
        let Ok(n_dims) = walk.u32(&String::new) else {
            return offset;
        };
        let skip = u64::from(n_dims) * walk.string_len_size() + 4 + 8;
        walk.pos = walk.pos.saturating_add(skip as usize);
    }
}

/// File offset of string `index` of an array whose strings start at `array_start`: walked
/// again only to report an error, so the happy path keeps no per-string offsets.
fn string_offset(cur: &Cursor, array_start: usize, index: usize) -> u64 {
    let mut walk = Cursor {
        bytes: cur.bytes,
        file_len: cur.file_len,
        limit: cur.limit,
        inner_arrays: 0,
        pos: array_start,
        big_endian: cur.big_endian,
        wide_counts: cur.wide_counts,
    };
    for _ in 0..index {
        let Ok(len) = walk.count(&String::new) else {
            break;
        };
        walk.pos = walk.pos.saturating_add(len as usize);
    }
    walk.pos as u64 + walk.string_len_size()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn string_array_file(items: &[&[u8]]) -> (Vec<u8>, Vec<u64>) {
        let mut f = Vec::new();
        f.extend_from_slice(MAGIC);
        f.extend_from_slice(&3u32.to_le_bytes());
        f.extend_from_slice(&0u64.to_le_bytes()); // tensors
        f.extend_from_slice(&1u64.to_le_bytes()); // metadata
        f.extend_from_slice(&(4u64).to_le_bytes());
        f.extend_from_slice(b"toks");
        f.extend_from_slice(&value_type::ARRAY.to_le_bytes());
        f.extend_from_slice(&value_type::STRING.to_le_bytes());
        f.extend_from_slice(&(items.len() as u64).to_le_bytes());
        let mut offsets = Vec::new();
        for item in items {
            f.extend_from_slice(&(item.len() as u64).to_le_bytes());
            offsets.push(f.len() as u64);
            f.extend_from_slice(item);
        }
        (f, offsets)
    }

    #[test]
    fn string_arrays_keep_every_length_around_the_block_copy() {
        // Short strings are copied as fixed-size blocks read from the header; the last ones end
        // at the end of the bytes, where no full block is left.
        let long = "é".repeat(40);
        let items: Vec<String> = [0, 1, 31, 32, 33, 7, 64, 0, 3, 32, 31]
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                if n == 64 {
                    long.clone()
                } else {
                    "abcdefghijklmnopqrstuvwxyz0123456789"
                        .chars()
                        .cycle()
                        .skip(i)
                        .take(n)
                        .collect()
                }
            })
            .collect();
        let bytes: Vec<&[u8]> = items.iter().map(std::string::String::as_bytes).collect();
        let (file, _) = string_array_file(&bytes);
        let artifact = parse(&file).unwrap();
        match &artifact.metadata["toks"] {
            Value::Array(Array::String(parsed)) => {
                assert_eq!(parsed.iter().collect::<Vec<_>>(), items);
            }
            other => panic!("expected a string array, got {other:?}"),
        }
    }

    #[test]
    fn invalid_utf8_in_a_string_array_names_the_element_and_its_offset() {
        let (file, offsets) = string_array_file(&[b"ok", b"\xe2\x96", b"x\xff", b"fine"]);
        match parse(&file) {
            Err(GgufError::InvalidUtf8 { offset, what }) => {
                assert_eq!(offset, offsets[1]);
                assert!(what.contains("element 1"), "{what}");
            }
            other => panic!("expected InvalidUtf8, got {other:?}"),
        }
        let (file, offsets) = string_array_file(&[b"ok", b"", b"x\xff"]);
        match parse(&file) {
            Err(GgufError::InvalidUtf8 { offset, .. }) => assert_eq!(offset, offsets[2]),
            other => panic!("expected InvalidUtf8, got {other:?}"),
        }
    }

    #[test]
    fn string_arrays_keep_embedded_nuls_and_empty_strings() {
        let (file, _) = string_array_file(&[b"a\0b", b"", "é".as_bytes()]);
        let artifact = parse(&file).unwrap();
        let Some(Value::Array(Array::String(tokens))) = artifact.metadata.get("toks") else {
            panic!("no string array");
        };
        assert_eq!(tokens.iter().collect::<Vec<_>>(), ["a\0b", "", "é"]);
    }
}
