//! Errors of reading a model's tensor bytes for a value diff.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ValuesError {
    /// A multi-file model's tensor names a part whose bytes were not given.
    #[error("tensor data in part {part} of a model given with {files} file(s)")]
    MissingPart { part: usize, files: usize },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{path}: tensor {tensor:?}: data at bytes [{begin}, {end}) lies outside the file \
         ({file_size} bytes): the file is truncated or its header is wrong"
    )]
    OutsideFile {
        path: PathBuf,
        tensor: String,
        begin: u64,
        end: u64,
        file_size: u64,
    },
    #[error(
        "{path}: tensor {tensor:?}: {elements} elements of {dtype} take {expected} bytes, but \
         the header gives {found}"
    )]
    ByteLength {
        path: PathBuf,
        tensor: String,
        dtype: &'static str,
        elements: u64,
        expected: u64,
        found: u64,
    },
}
