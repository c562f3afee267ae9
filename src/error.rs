//! Errors that reach the user. Format errors carry the offset or key; [`Error`] adds the file.

use std::path::PathBuf;

use crate::formats::gguf::GgufError;
use crate::formats::pytorch::PytorchError;
use crate::formats::safetensors::SafetensorsError;
use crate::formats::wdelta::WdeltaError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Gguf {
        path: PathBuf,
        #[source]
        source: GgufError,
    },
    #[error("{path}: {source}")]
    Safetensors {
        path: PathBuf,
        #[source]
        source: SafetensorsError,
    },
    #[error("{path}: {source}")]
    Pytorch {
        path: PathBuf,
        #[source]
        source: Box<PytorchError>,
    },
    #[error("{path}: invalid .wdelta: {source}")]
    Wdelta {
        path: PathBuf,
        #[source]
        source: Box<WdeltaError>,
    },
    #[error(
        "{path}: not a GGUF, safetensors or PyTorch file (first bytes {first_bytes}); expected the \
         magic \"GGUF\", an 8-byte little-endian header length followed by '{{', or a pickle (a \
         zip archive holding data.pkl, or a pickle stream)"
    )]
    UnknownFormat { path: PathBuf, first_bytes: String },
    /// A model header read from an LFS server (for the file `name`) that does not parse.
    #[error("{source} (header read from the LFS server for {name})")]
    ServerHeader {
        name: String,
        #[source]
        source: Box<Error>,
    },
    /// A multi-file model whose files do not fit together.
    #[error(transparent)]
    Sharded(#[from] ShardError),
}

impl Error {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}

/// Multi-file models (`crate::sharded`): one named error per rule their files must follow, each
/// naming the file (and the tensor or key) it is about.
#[derive(Debug, thiserror::Error)]
pub enum ShardError {
    #[error("{dir}: no model file (*.gguf, *.safetensors or *.safetensors.index.json) in it")]
    NoModel { dir: String },
    #[error("{dir}: holds {} models ({}); name one of them", .candidates.len(), .candidates.join(", "))]
    Ambiguous {
        dir: String,
        candidates: Vec<String>,
    },
    #[error("{file}: {message}")]
    Unreadable { file: String, message: String },
    #[error("{file}: not a safetensors index: {message}")]
    IndexJson { file: String, message: String },
    #[error("{file}: tensor \"{tensor}\" appears twice in weight_map")]
    IndexDuplicate { file: String, tensor: String },
    #[error(
        "{index}: shard name \"{name}\" is not a plain file name in the index's directory \
         (no '/', '\\\\', '..', or empty names)"
    )]
    UnsafeShardName { index: String, name: String },
    #[error("{file}: a symbolic link to {target}, outside the model's directory (not followed)")]
    LinkOutside { file: String, target: String },
    #[error("{file}: missing; {expected_by} names it as a part of the model")]
    MissingPart { file: String, expected_by: String },
    #[error(
        "{file}: named like a part of {model} but not one of its parts ({why}); remove it or \
         fix the model"
    )]
    ExtraPart {
        file: String,
        model: String,
        why: String,
    },
    #[error("{file}: is {found}, expected {expected} like the other parts")]
    FormatMismatch {
        file: String,
        found: &'static str,
        expected: &'static str,
    },
    #[error("{shard}: tensor \"{tensor}\" is missing; {index} maps it to this shard")]
    TensorNotInShard {
        tensor: String,
        shard: String,
        index: String,
    },
    #[error("{shard}: holds tensor \"{tensor}\", which {index} does not name")]
    TensorNotInIndex {
        tensor: String,
        shard: String,
        index: String,
    },
    #[error("{shard}: holds tensor \"{tensor}\", which {index} maps to {named}")]
    TensorInOtherShard {
        tensor: String,
        shard: String,
        named: String,
        index: String,
    },
    #[error("{second}: holds tensor \"{tensor}\", already held by {first}")]
    TensorInTwoParts {
        tensor: String,
        first: String,
        second: String,
    },
    #[error(
        "{index}: metadata.total_size is {declared}, but the shards' tensors hold {actual} bytes"
    )]
    TotalSize {
        index: String,
        declared: u64,
        actual: u64,
    },
    #[error("{file}: __metadata__ differs from that of {first}; shards of one model must agree")]
    MetadataMismatch { file: String, first: String },
    #[error("{file}: GGUF version {found}, but {first} is version {expected}")]
    VersionMismatch {
        file: String,
        first: String,
        found: u32,
        expected: u32,
    },
    #[error("{file}: {key} {problem}")]
    SplitKey {
        file: String,
        key: &'static str,
        problem: String,
    },
    #[error(
        "{file}: metadata key \"{key}\" in part {part}; only the first part carries the model's \
         metadata"
    )]
    MetadataOutsideFirst {
        file: String,
        key: String,
        part: u32,
    },
    #[error(
        "{first}: split.tensors.count is {declared}, but the {parts} parts hold {actual} tensors"
    )]
    TensorsCount {
        first: String,
        declared: u64,
        actual: u64,
        parts: usize,
    },
    #[error(transparent)]
    Part(#[from] Box<Error>),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
