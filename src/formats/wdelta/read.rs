//! Reading a `.wdelta` file: the checksum is checked before anything else, then the header is
//! validated against the rules of each strategy and the records are indexed by (tensor, field),
//! so records may come in any order. Nothing is allocated from a count read in the file: lengths
//! are checked against the bytes that are actually there first.

use std::ops::Range;

use super::error::WdeltaError;
use super::header::{max_tensors, parse_header};
use super::types::{
    ArrayDtype, ArrayRef, CHECKSUM_LEN, Header, MAGIC, PREAMBLE_LEN, Params, Record, RecordIndex,
    RecordShape, SUPPORTED_VERSIONS, Strategy, TensorArrays, TensorEntry, Tensors, quantized_cols,
    quantized_rows,
};
use crate::digest::sha256;

/// A validated `.wdelta` file: its header and the index of its records. It does not hold the
/// bytes (often a memory map owned beside it); methods that read arrays take them again.
#[derive(Debug, Clone)]
pub struct WdeltaFile {
    /// The format version (1 or 2; 3 is [`crate::formats::wdelta::lossless`]).
    pub version: u32,
    /// The parsed JSON header.
    pub header: Header,
    /// Bytes of the JSON header.
    pub header_len: usize,
    /// Where each tensor's records lie.
    pub records: RecordIndex,
    /// Bytes of the file.
    pub file_len: usize,
}

impl WdeltaFile {
    /// Parses and validates a whole file: checksum first, then header and record framing, then
    /// each tensor's arrays against its strategy.
    pub fn parse(bytes: &[u8]) -> Result<WdeltaFile, WdeltaError> {
        check_preamble(bytes)?;
        verify_checksum(bytes)?;
        Self::parse_verified(bytes)
    }

    /// Like [`WdeltaFile::parse`] for bytes whose checksum the caller has already verified.
    pub fn parse_verified(bytes: &[u8]) -> Result<WdeltaFile, WdeltaError> {
        Self::parse_verified_reading(bytes, |_| {})
    }

    /// [`WdeltaFile::parse_verified`], telling `read` each range of `bytes` whose validation is
    /// done (index arrays, read in pieces of [`INDEX_STEP`] bytes): a caller reading a mapped
    /// file releases their pages there, so that a large file is not all resident at once.
    pub fn parse_verified_reading(
        bytes: &[u8],
        mut read: impl FnMut(Range<usize>),
    ) -> Result<WdeltaFile, WdeltaError> {
        check_preamble(bytes)?;
        let version = read_version(bytes)?;
        let body_end = bytes.len() - CHECKSUM_LEN;
        let header_len = u32_at(bytes, 11) as usize;
        let available = body_end - PREAMBLE_LEN;
        if header_len > available {
            return Err(WdeltaError::HeaderTooLong {
                declared: header_len,
                available,
            });
        }
        let limit = crate::formats::limits::max_header_bytes();
        if header_len as u64 > limit {
            return Err(WdeltaError::HeaderOverLimit {
                declared: header_len as u64,
                limit,
            });
        }
        let header_bytes = &bytes[PREAMBLE_LEN..PREAMBLE_LEN + header_len];
        let header = parse_header(header_bytes, version, max_tensors(limit))?;
        let records = index_records(bytes, PREAMBLE_LEN + header_len, body_end, &header)?;
        let file = WdeltaFile {
            version,
            header,
            header_len,
            records,
            file_len: bytes.len(),
        };
        file.validate(bytes, &mut read)?;
        Ok(file)
    }

    /// The raw bytes of one array.
    pub fn data<'a>(&self, bytes: &'a [u8], record: &Record) -> &'a [u8] {
        &bytes[record.data_offset..record.data_offset + record.data_len]
    }

    /// The record `field` of `tensor`, or an error naming both.
    pub fn record(&self, tensor: &str, field: &str) -> Result<&Record, WdeltaError> {
        self.find_record(tensor, field)
            .ok_or_else(|| WdeltaError::MissingRecord {
                tensor: tensor.to_string(),
                field: field.to_string(),
            })
    }

    /// The record of `tensor`'s array `field`, if the header has that tensor, `field` is a
    /// field of its strategy, and the file has the record.
    pub fn find_record(&self, tensor: &str, field: &str) -> Option<&Record> {
        let position = self.header.tensors.position(tensor)?;
        let (_, entry) = self.header.tensors.get_index(position)?;
        self.records
            .get(position, entry.strategy().field_slot(field)?)
    }

    /// The records of the tensor at `position` (in name order), in the order of its
    /// strategy's fields; None where a record is missing.
    fn records_at(&self, position: usize) -> &[Option<Record>] {
        self.records.of_tensor(position)
    }

    /// The arrays of one tensor, ready for the delta codec's decoder.
    pub fn arrays<'a>(
        &self,
        bytes: &'a [u8],
        tensor: &str,
    ) -> Result<TensorArrays<'a>, WdeltaError> {
        let not_found = || WdeltaError::HeaderField {
            key: format!("tensors.{tensor}"),
            expected: "a tensor entry".into(),
        };
        let position = self.header.tensors.position(tensor).ok_or_else(not_found)?;
        let (_, entry) = self
            .header
            .tensors
            .get_index(position)
            .ok_or_else(not_found)?;
        let slots = self.records_at(position);
        let mut fields = Vec::new();
        for (slot, &field) in entry.strategy().fields().iter().enumerate() {
            let r = slots.get(slot).and_then(Option::as_ref).ok_or_else(|| {
                WdeltaError::MissingRecord {
                    tensor: tensor.to_string(),
                    field: field.to_string(),
                }
            })?;
            fields.push(ArrayRef {
                dtype: r.dtype,
                data: self.data(bytes, r),
            });
        }
        Ok(TensorArrays { fields })
    }

    /// Bytes of the records of one tensor, framing included.
    pub fn tensor_bytes(&self, tensor: &str) -> u64 {
        match self.header.tensors.position(tensor) {
            Some(position) => self.tensor_bytes_at(position),
            None => 0,
        }
    }

    /// [`WdeltaFile::tensor_bytes`] of the tensor at `position` in name order (what a walk over
    /// [`Header::tensors`] has at hand, without looking its name up again).
    pub fn tensor_bytes_at(&self, position: usize) -> u64 {
        self.records_at(position)
            .iter()
            .flatten()
            .map(|r| r.record_len as u64)
            .sum()
    }

    /// Every record is referenced by the header (checked as they are indexed); each tensor's
    /// arrays follow its strategy's rules.
    fn validate(
        &self,
        bytes: &[u8],
        read: &mut impl FnMut(Range<usize>),
    ) -> Result<(), WdeltaError> {
        for (position, (name, entry)) in self.header.tensors.iter().enumerate() {
            validate_tensor_reading(
                name,
                entry,
                self.records_at(position),
                |r| self.data(bytes, r),
                |r, done| read(r.data_offset + done.start..r.data_offset + done.end),
            )?;
        }
        Ok(())
    }
}

/// Checks the arrays of one tensor (`slots`: its records in the order of its strategy's
/// fields, as [`RecordIndex::of_tensor`] gives them) against its header entry: every array
/// present, dtypes, lengths, and index arrays in range and strictly ascending. `data` gives a
/// record's bytes; only index arrays are read. A reader streaming a file validates each tensor
/// with it as soon as its records are in.
pub(crate) fn validate_tensor<'a>(
    name: &str,
    entry: &TensorEntry,
    slots: &[Option<Record>],
    data: impl Fn(&Record) -> &'a [u8],
) -> Result<(), WdeltaError> {
    validate_tensor_reading(name, entry, slots, data, |_, _| {})
}

/// Bytes of an index array checked between two calls of [`validate_tensor_reading`]'s `read`.
const INDEX_STEP: usize = 4 << 20;

/// [`validate_tensor`], telling `read` each range of a record's data it is done reading
/// (pieces of [`INDEX_STEP`] bytes of an index array).
fn validate_tensor_reading<'a>(
    name: &str,
    entry: &TensorEntry,
    slots: &[Option<Record>],
    data: impl Fn(&Record) -> &'a [u8],
    mut read: impl FnMut(&Record, Range<usize>),
) -> Result<(), WdeltaError> {
    let n = entry.n_elements().ok_or_else(|| WdeltaError::HeaderField {
        key: format!("tensors.{name}.shape"),
        expected: "dimensions whose product fits in 64 bits".into(),
    })?;
    let arrays = Arrays {
        name,
        strategy: entry.strategy(),
        slots,
    };
    match entry.params {
        Params::Sparse { .. } => {
            let idx = validate_sparse(&arrays, n)?;
            check_indices(name, "indices", idx.dtype, data(idx), n, |done| {
                read(idx, done);
            })
        }
        Params::Quantized { n_elements, n_cols } => {
            validate_quantized(&arrays, entry, n, n_elements, n_cols)
        }
        Params::Int4 {
            n_elements,
            n_outliers,
            layout,
            ..
        } => {
            let idx = validate_int4(&arrays, n, n_elements, n_outliers, layout)?;
            check_indices(name, "outlier_idx", idx.dtype, data(idx), n, |done| {
                read(idx, done);
            })
        }
    }
}

/// One tensor's records by field name, and the errors that name the tensor and the field.
struct Arrays<'a> {
    name: &'a str,
    strategy: Strategy,
    /// In the order of the strategy's fields.
    slots: &'a [Option<Record>],
}

impl<'a> Arrays<'a> {
    fn get(&self, field: &str) -> Result<&'a Record, WdeltaError> {
        self.strategy
            .field_slot(field)
            .and_then(|slot| self.slots.get(slot)?.as_ref())
            .ok_or_else(|| WdeltaError::MissingRecord {
                tensor: self.name.to_string(),
                field: field.to_string(),
            })
    }

    /// `r` (the record of `field`) has one of the dtypes `allowed` (`expected` in words).
    fn dtype(
        &self,
        field: &str,
        r: &Record,
        allowed: &[ArrayDtype],
        expected: &str,
    ) -> Result<(), WdeltaError> {
        if allowed.contains(&r.dtype) {
            return Ok(());
        }
        Err(WdeltaError::ArrayDtype {
            tensor: self.name.to_string(),
            field: field.to_string(),
            found: r.dtype.name(),
            expected: expected.to_string(),
        })
    }

    /// `r` (the record of `field`) has `want` elements (`expected` in words).
    fn len(&self, field: &str, r: &Record, want: u64, expected: String) -> Result<(), WdeltaError> {
        if r.len() as u64 == want {
            return Ok(());
        }
        Err(self.len_error(field, r, expected))
    }

    fn len_error(&self, field: &str, r: &Record, expected: String) -> WdeltaError {
        WdeltaError::ArrayLength {
            tensor: self.name.to_string(),
            field: field.to_string(),
            found: r.len() as u64,
            expected,
        }
    }

    /// The header's `n_elements` is the product of the shape, `n`.
    fn n_elements(&self, n: u64, n_elements: u64) -> Result<(), WdeltaError> {
        if n_elements == n {
            return Ok(());
        }
        Err(WdeltaError::HeaderField {
            key: format!("tensors.{}.n_elements", self.name),
            expected: format!("{n} (the product of the shape), found {n_elements}"),
        })
    }
}

const INDEX_DTYPES: &[ArrayDtype] = &[ArrayDtype::Int64, ArrayDtype::Int32];

/// A sparse tensor: at most `n` indices and as many float32 values. Returns the indices.
fn validate_sparse<'a>(arrays: &Arrays<'a>, n: u64) -> Result<&'a Record, WdeltaError> {
    let idx = arrays.get("indices")?;
    let vals = arrays.get("values")?;
    arrays.dtype("indices", idx, INDEX_DTYPES, "int64 or int32")?;
    arrays.dtype("values", vals, &[ArrayDtype::Float32], "float32")?;
    if idx.len() as u64 > n {
        return Err(arrays.len_error("indices", idx, format!("at most {n}")));
    }
    let expected = format!("{} (as many as indices)", idx.len());
    arrays.len("values", vals, idx.len() as u64, expected)?;
    Ok(idx)
}

/// A sign-quantized tensor: a float16 scale per row and a sign bit per element.
fn validate_quantized(
    arrays: &Arrays<'_>,
    entry: &TensorEntry,
    n: u64,
    n_elements: u64,
    n_cols: u64,
) -> Result<(), WdeltaError> {
    arrays.n_elements(n, n_elements)?;
    let shape = entry.shape.unpack();
    let want_cols = quantized_cols(&shape);
    if n_cols != want_cols {
        return Err(WdeltaError::HeaderField {
            key: format!("tensors.{}.n_cols", arrays.name),
            expected: format!("{want_cols} (the product of shape[1:]), found {n_cols}"),
        });
    }
    let scales = arrays.get("scales")?;
    let signs = arrays.get("packed_signs")?;
    arrays.dtype("scales", scales, &[ArrayDtype::Float16], "float16")?;
    arrays.dtype("packed_signs", signs, &[ArrayDtype::Uint8], "uint8")?;
    let rows = quantized_rows(&shape);
    arrays.len("scales", scales, rows, format!("{rows} (one per row)"))?;
    let want = n.div_ceil(8);
    arrays.len("packed_signs", signs, want, format!("{want}"))
}

/// An int4 tensor: float16 outliers with their indices, one float16 scale and zero point, and
/// two 4-bit values per byte. Returns the outliers' indices.
fn validate_int4<'a>(
    arrays: &Arrays<'a>,
    n: u64,
    n_elements: u64,
    n_outliers: u64,
    layout: u32,
) -> Result<&'a Record, WdeltaError> {
    arrays.n_elements(n, n_elements)?;
    if n_outliers > n {
        return Err(WdeltaError::HeaderField {
            key: format!("tensors.{}.n_outliers", arrays.name),
            expected: format!("at most n_elements ({n}), found {n_outliers}"),
        });
    }
    let idx = arrays.get("outlier_idx")?;
    let vals = arrays.get("outlier_vals")?;
    let scale = arrays.get("scale")?;
    let zero = arrays.get("zero_point")?;
    let packed = arrays.get("packed")?;
    arrays.dtype("outlier_idx", idx, INDEX_DTYPES, "int64 or int32")?;
    for (field, r) in [
        ("outlier_vals", vals),
        ("scale", scale),
        ("zero_point", zero),
    ] {
        arrays.dtype(field, r, &[ArrayDtype::Float16], "float16")?;
    }
    arrays.dtype("packed", packed, &[ArrayDtype::Uint8], "uint8")?;
    let outliers = format!("{n_outliers} (n_outliers)");
    arrays.len("outlier_idx", idx, n_outliers, outliers.clone())?;
    arrays.len("outlier_vals", vals, n_outliers, outliers)?;
    arrays.len("scale", scale, 1, "1".into())?;
    arrays.len("zero_point", zero, 1, "1".into())?;
    let quantized = if layout == 1 { n - n_outliers } else { n };
    let want = quantized.div_ceil(2);
    let expected = format!("{want} (two 4-bit values per byte for {quantized} values)");
    arrays.len("packed", packed, want, expected)?;
    Ok(idx)
}

/// Indices must be strictly ascending and below `n`: decoding relies on it. `read` is told
/// each piece of `data` checked.
fn check_indices(
    tensor: &str,
    field: &str,
    dtype: ArrayDtype,
    data: &[u8],
    n: u64,
    mut read: impl FnMut(Range<usize>),
) -> Result<(), WdeltaError> {
    let mut prev: i64 = -1;
    let bad = |position: usize, value: i64, problem: String| WdeltaError::BadIndex {
        tensor: tensor.to_string(),
        field: field.to_string(),
        position,
        value,
        problem,
    };
    // INDEX_STEP is a multiple of either width, so the positions run on across pieces.
    let mut position = 0;
    for (step, piece) in data.chunks(INDEX_STEP).enumerate() {
        for value in index_iter(dtype, piece) {
            if value < 0 || value as u64 >= n {
                return Err(bad(position, value, format!("outside 0..{n}")));
            }
            if value <= prev {
                return Err(bad(
                    position,
                    value,
                    format!(
                        "not above the previous index {prev} (indices must be strictly ascending)"
                    ),
                ));
            }
            prev = value;
            position += 1;
        }
        let from = step * INDEX_STEP;
        read(from..from + piece.len());
    }
    Ok(())
}

/// Iterates an int64 or int32 index array.
pub(crate) fn index_iter(dtype: ArrayDtype, data: &[u8]) -> Box<dyn Iterator<Item = i64> + '_> {
    match dtype {
        ArrayDtype::Int32 => Box::new(
            data.chunks_exact(4)
                .map(|c| i64::from(i32::from_le_bytes([c[0], c[1], c[2], c[3]]))),
        ),
        _ => Box::new(
            data.chunks_exact(8)
                .map(|c| i64::from_le_bytes(c.try_into().expect("chunk of 8"))),
        ),
    }
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

fn check_preamble(bytes: &[u8]) -> Result<(), WdeltaError> {
    let min = PREAMBLE_LEN + CHECKSUM_LEN;
    if !bytes.starts_with(MAGIC) {
        let head = &bytes[..bytes.len().min(7)];
        return Err(WdeltaError::BadMagic {
            found: String::from_utf8_lossy(head).into_owned(),
        });
    }
    if bytes.len() < min {
        return Err(WdeltaError::TooShort {
            len: bytes.len(),
            min,
        });
    }
    Ok(())
}

fn read_version(bytes: &[u8]) -> Result<u32, WdeltaError> {
    let version = u32_at(bytes, 7);
    if !SUPPORTED_VERSIONS.contains(&version) {
        return Err(WdeltaError::UnsupportedVersion { version });
    }
    Ok(version)
}

/// Checks the SHA-256 trailer of a whole file.
pub(crate) fn verify_checksum(bytes: &[u8]) -> Result<(), WdeltaError> {
    check_preamble(bytes)?;
    let (body, stored) = bytes.split_at(bytes.len() - CHECKSUM_LEN);
    let actual = sha256(body);
    if actual.as_slice() != stored {
        return Err(WdeltaError::ChecksumMismatch {
            stored: crate::digest::hex(stored),
            actual: crate::digest::hex(&actual),
        });
    }
    Ok(())
}

/// Indexes the records between `start` and `end`. Each must be an array the header references,
/// and none may come twice, so the index never holds more entries than the header has array
/// references (the header is capped, the record section is not). Records are found by their
/// tensor's position in the header, so the index holds no name.
fn index_records(
    bytes: &[u8],
    start: usize,
    end: usize,
    header: &Header,
) -> Result<RecordIndex, WdeltaError> {
    let mut records = RecordIndex::for_tensors(&header.tensors);
    // Writers put a tensor's records together and tensors in order: try the tensor of the last
    // record and the next one before searching.
    let mut last: Option<usize> = None;
    let mut pos = start;
    while pos < end {
        let record_offset = pos;
        let mut cur = Cursor {
            bytes,
            pos,
            end,
            record: record_offset,
        };
        let tensor = cur.string("tensor name")?;
        let field = cur.string("field name")?;
        let dtype_name = cur.string("dtype")?;
        let dtype = ArrayDtype::parse(dtype_name).ok_or_else(|| WdeltaError::RecordDtype {
            offset: record_offset,
            tensor: tensor.to_string(),
            field: field.to_string(),
            dtype: dtype_name.to_string(),
        })?;
        let ndim = u64::from(cur.u32("ndim")?);
        // Each dimension takes 8 bytes, so a hostile ndim fails here before any allocation.
        cur.need(ndim.saturating_mul(8), "dimensions")?;
        let shape: RecordShape = (0..ndim).map(|_| cur.u64_unchecked()).collect();
        let byte_count = cur.u64("byte count")?;
        check_record_size(record_offset, tensor, field, dtype, &shape, byte_count)?;
        cur.need(byte_count, "array data")?;
        let data_offset = cur.pos;
        let data_len = byte_count as usize;
        pos = data_offset + data_len;
        let position = find_tensor(&header.tensors, tensor, last);
        let slot = position.and_then(|p| {
            let (_, entry) = header.tensors.get_index(p)?;
            entry.strategy().field_slot(field)
        });
        let (Some(position), Some(slot)) = (position, slot) else {
            return Err(WdeltaError::UnreferencedRecord {
                offset: record_offset,
                tensor: tensor.to_string(),
                field: field.to_string(),
            });
        };
        last = Some(position);
        let record = Record {
            dtype,
            shape,
            data_offset,
            data_len,
            record_offset,
            record_len: pos - record_offset,
        };
        if !records.insert(position, slot, record) {
            return Err(WdeltaError::DuplicateRecord {
                offset: record_offset,
                tensor: tensor.to_string(),
                field: field.to_string(),
            });
        }
    }
    Ok(records)
}

/// The position of `name` in `tensors`, trying the tensor at `hint` and the one after it first.
fn find_tensor(tensors: &Tensors, name: &str, hint: Option<usize>) -> Option<usize> {
    if let Some(h) = hint {
        for p in [h, h + 1] {
            if tensors.get_index(p).is_some_and(|(n, _)| n == name) {
                return Some(p);
            }
        }
    }
    tensors.position(name)
}

struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
    end: usize,
    record: usize,
}

impl<'a> Cursor<'a> {
    fn need(&self, n: u64, what: &'static str) -> Result<(), WdeltaError> {
        let available = self.end - self.pos;
        if n > available as u64 {
            return Err(WdeltaError::RecordTruncated {
                offset: self.record,
                what,
                needed: n,
                available,
            });
        }
        Ok(())
    }

    fn u32(&mut self, what: &'static str) -> Result<u32, WdeltaError> {
        self.need(4, what)?;
        let v = u32_at(self.bytes, self.pos);
        self.pos += 4;
        Ok(v)
    }

    fn u64(&mut self, what: &'static str) -> Result<u64, WdeltaError> {
        self.need(8, what)?;
        Ok(self.u64_unchecked())
    }

    fn u64_unchecked(&mut self) -> u64 {
        let v = u64::from_le_bytes(self.bytes[self.pos..self.pos + 8].try_into().expect("8"));
        self.pos += 8;
        v
    }

    fn string(&mut self, what: &'static str) -> Result<&'a str, WdeltaError> {
        let len = u64::from(self.u32(what)?);
        self.need(len, what)?;
        let s = &self.bytes[self.pos..self.pos + len as usize];
        self.pos += len as usize;
        std::str::from_utf8(s).map_err(|_| WdeltaError::RecordUtf8 {
            offset: self.record,
            what,
        })
    }
}

/// The rule on a record's size: its byte count is its dtype's size times its shape's elements
/// (the whole-file reader and `apply`'s streaming reader both hold records to it).
pub(crate) fn check_record_size(
    record_offset: usize,
    tensor: &str,
    field: &str,
    dtype: ArrayDtype,
    shape: &[u64],
    byte_count: u64,
) -> Result<(), WdeltaError> {
    let expected = shape
        .iter()
        .try_fold(dtype.size(), |acc, &d| acc.checked_mul(d));
    if expected == Some(byte_count) {
        return Ok(());
    }
    Err(WdeltaError::RecordSize {
        offset: record_offset,
        array: format!("{tensor}/{field}"),
        dtype: dtype.name(),
        shape: format!("{shape:?}"),
        byte_count,
        expected: expected.map_or("overflow".into(), |e| e.to_string()),
    })
}
