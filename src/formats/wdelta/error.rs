//! Every way a `.wdelta` file can be rejected: one variant per rule, each naming the offset or
//! the key and what was expected.

use super::lossless::LosslessError;
use super::types::PREAMBLE_LEN;

/// Every way a `.wdelta` file can be rejected; each names where and what was expected.
#[allow(
    missing_docs,
    reason = "each variant\'s #[error] message documents it, with the fields it prints"
)]
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum WdeltaError {
    /// A version 3 (lossless) file that breaks a rule of its container.
    #[error("lossless .wdelta (version 3): {0}")]
    Lossless(LosslessError),
    #[error(
        "file is {len} bytes, shorter than the smallest .wdelta ({min} bytes: magic, version, \
         header length, checksum)"
    )]
    TooShort { len: usize, min: usize },
    #[error("not a .wdelta file: first bytes {found:?}, expected the magic \"wdelta\\0\"")]
    BadMagic { found: String },
    #[error(
        "checksum mismatch: the last 32 bytes say SHA-256 {stored}, the content hashes to \
         {actual}; the file is corrupted or truncated"
    )]
    ChecksumMismatch { stored: String, actual: String },
    #[error(
        "unsupported .wdelta version {version} at offset 7 (supported: 1, 2; version 3 holds \
         the lossless strategy, read by `delta apply`, `restore`, `verify` and `inspect` on its \
         own, not in a chain: to build on it, rebuild its model with `weight-inspect delta \
         restore` or `delta apply` and use that file as the parent)"
    )]
    UnsupportedVersion { version: u32 },
    #[error(
        "header length {declared} at offset 11 exceeds the {available} bytes before the checksum"
    )]
    HeaderTooLong { declared: usize, available: usize },
    #[error(
        "header length {declared} at offset 11 exceeds the limit of {limit} bytes ({})",
        crate::formats::limits::how_to_raise()
    )]
    HeaderOverLimit { declared: u64, limit: u64 },
    #[error(
        "header declares more than {limit} tensors, the limit for this header size (one tensor \
         per {bytes_per_tensor} bytes of the header limit; {})",
        crate::formats::limits::how_to_raise()
    )]
    TooManyTensors { limit: u64, bytes_per_tensor: u64 },
    #[error(
        "header key parent_hash: expected 64 lowercase hexadecimal digits (a SHA-256), found \
         {found:?}"
    )]
    ParentHashNotHex { found: String },
    #[error("header (offset {PREAMBLE_LEN}) is not valid UTF-8 JSON: {message}")]
    HeaderJson { message: String },
    #[error("header key {key}: {expected}")]
    HeaderField { key: String, expected: String },
    #[error("record at offset {offset}: {what} needs {needed} bytes, only {available} remain")]
    RecordTruncated {
        offset: usize,
        what: &'static str,
        needed: u64,
        available: usize,
    },
    #[error("record at offset {offset}: {what} is not valid UTF-8")]
    RecordUtf8 { offset: usize, what: &'static str },
    #[error("record at offset {offset} ({tensor}/{field}): unknown dtype {dtype:?}")]
    RecordDtype {
        offset: usize,
        tensor: String,
        field: String,
        dtype: String,
    },
    #[error(
        "record at offset {offset} ({array}): byte count {byte_count} does not match shape \
         {shape} of {dtype} ({expected} bytes)"
    )]
    RecordSize {
        offset: usize,
        /// "tensor/field"
        array: String,
        dtype: &'static str,
        shape: String,
        byte_count: u64,
        expected: String,
    },
    #[error("record at offset {offset}: duplicate array {tensor}/{field}")]
    DuplicateRecord {
        offset: usize,
        tensor: String,
        field: String,
    },
    #[error("record at offset {offset}: array {tensor}/{field} is not referenced by the header")]
    UnreferencedRecord {
        offset: usize,
        tensor: String,
        field: String,
    },
    #[error("tensor {tensor}: array {field} referenced by the header has no record")]
    MissingRecord { tensor: String, field: String },
    #[error("tensor {tensor}: array {field} has dtype {found}, expected {expected}")]
    ArrayDtype {
        tensor: String,
        field: String,
        found: &'static str,
        expected: String,
    },
    #[error("tensor {tensor}: array {field} has {found} elements, expected {expected}")]
    ArrayLength {
        tensor: String,
        field: String,
        found: u64,
        expected: String,
    },
    #[error("tensor {tensor}: {field}[{position}] = {value} is {problem}")]
    BadIndex {
        tensor: String,
        field: String,
        position: usize,
        value: i64,
        problem: String,
    },
}
