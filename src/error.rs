//! Errors that reach the user. Format errors carry the offset or key; [`Error`] adds the file.

use std::path::PathBuf;

use crate::escape::{quoted, shown, shown_path};
use crate::formats::gguf::GgufError;
use crate::formats::pytorch::PytorchError;
use crate::formats::safetensors::SafetensorsError;
use crate::formats::wdelta::WdeltaError;

#[allow(
    missing_docs,
    reason = "each variant\'s #[error] message documents it, with the fields it prints"
)]
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{}: {source}", shown_path(.path))]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: {source}", shown_path(.path))]
    Gguf {
        path: PathBuf,
        #[source]
        source: GgufError,
    },
    #[error("{}: {source}", shown_path(.path))]
    Safetensors {
        path: PathBuf,
        #[source]
        source: SafetensorsError,
    },
    #[error("{}: {source}", shown_path(.path))]
    Pytorch {
        path: PathBuf,
        #[source]
        source: Box<PytorchError>,
    },
    #[error("{}: invalid .wdelta: {source}", shown_path(.path))]
    Wdelta {
        path: PathBuf,
        #[source]
        source: Box<WdeltaError>,
    },
    #[error(
        "{}: not a GGUF, safetensors or PyTorch file (first bytes {first_bytes}); expected the \
         magic \"GGUF\", an 8-byte little-endian header length followed by '{{', or a pickle (a \
         zip archive holding data.pkl, or a pickle stream)",
        shown_path(.path)
    )]
    UnknownFormat { path: PathBuf, first_bytes: String },
    /// Bytes that are no readable model but hold a pickle stream naming a dangerous global:
    /// named dangerous, never merely "not a model file", which a reviewer takes as harmless.
    #[error(
        "{}: unreadable, dangerous: it holds a pickle naming {globals}, which unpickling would \
         call (none was imported or called){escaping}; unreadable because: {source}",
        shown_path(.path)
    )]
    UnreadableDangerous {
        path: PathBuf,
        globals: String,
        /// `; path traversal: …` when zip members climb out of the extraction directory.
        escaping: String,
        #[source]
        source: Box<Error>,
    },
    /// A model header read from an LFS server (for the file `name`) that does not parse.
    #[error("{source} (header read from the LFS server for {})", shown(.name))]
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
    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}

/// Multi-file models (`crate::sharded`): one named error per rule their files must follow, each
/// naming the file (and the tensor or key) it is about.
#[allow(
    missing_docs,
    reason = "each variant\'s #[error] message documents it, with the fields it prints"
)]
#[derive(Debug, thiserror::Error)]
pub enum ShardError {
    #[error(
        "{}: no model file in it; expected a GGUF (*.gguf), safetensors (*.safetensors, \
         *.safetensors.index.json) or PyTorch file (pytorch_model.bin, *.bin, *.pt, *.pth, \
         *.ckpt, *.bin.index.json)",
        shown(.dir)
    )]
    NoModel { dir: String },
    #[error(
        "{}: holds {} models ({}); name one of them",
        shown(.dir),
        .candidates.len(),
        shown_list(.candidates)
    )]
    Ambiguous {
        dir: String,
        candidates: Vec<String>,
    },
    #[error("{}: {message}", shown(.file))]
    Unreadable { file: String, message: String },
    #[error("{}: not a safetensors index: {message}", shown(.file))]
    IndexJson { file: String, message: String },
    #[error("{}: tensor {} appears twice in weight_map", shown(.file), quoted(.tensor))]
    IndexDuplicate { file: String, tensor: String },
    #[error(
        "{}: shard name {} is not a plain file name in the index's directory \
         (no '/', '\\\\', '..', or empty names)",
        shown(.index),
        quoted(.name)
    )]
    UnsafeShardName { index: String, name: String },
    #[error(
        "{}: a symbolic link to {}, outside the model's directory (not followed)",
        shown(.file),
        shown(.target)
    )]
    LinkOutside { file: String, target: String },
    #[error(
        "{}: missing; {} names it as a part of the model, which is incomplete without it",
        shown(.file),
        shown(.expected_by)
    )]
    MissingPart { file: String, expected_by: String },
    #[error(
        "{}: declares {count} parts, more than the {cap} a split GGUF may have",
        shown(.model)
    )]
    TooManyParts { model: String, count: u32, cap: u32 },
    #[error(
        "{}: named like a part of {} but not one of its parts ({why}); remove it or \
         fix the model",
        shown(.file),
        shown(.model)
    )]
    ExtraPart {
        file: String,
        model: String,
        why: String,
    },
    #[error("{}: is {found}, expected {expected} like the other parts", shown(.file))]
    FormatMismatch {
        file: String,
        found: &'static str,
        expected: &'static str,
    },
    #[error(
        "{}: tensor {} is missing; {} maps it to this shard",
        shown(.shard),
        quoted(.tensor),
        shown(.index)
    )]
    TensorNotInShard {
        tensor: String,
        shard: String,
        index: String,
    },
    #[error(
        "{}: holds tensor {}, which {} does not name",
        shown(.shard),
        quoted(.tensor),
        shown(.index)
    )]
    TensorNotInIndex {
        tensor: String,
        shard: String,
        index: String,
    },
    #[error(
        "{}: holds tensor {}, which {} maps to {}",
        shown(.shard),
        quoted(.tensor),
        shown(.index),
        shown(.named)
    )]
    TensorInOtherShard {
        tensor: String,
        shard: String,
        named: String,
        index: String,
    },
    #[error(
        "{}: holds tensor {}, already held by {}",
        shown(.second),
        quoted(.tensor),
        shown(.first)
    )]
    TensorInTwoParts {
        tensor: String,
        first: String,
        second: String,
    },
    #[error(
        "{}: metadata.total_size is {declared}, but the shards' tensors hold {actual} bytes",
        shown(.index)
    )]
    TotalSize {
        index: String,
        declared: u64,
        actual: u64,
    },
    #[error(
        "{}: __metadata__ differs from that of {}; shards of one model must agree",
        shown(.file),
        shown(.first)
    )]
    MetadataMismatch { file: String, first: String },
    #[error(
        "{}: GGUF version {found}, but {} is version {expected}",
        shown(.file),
        shown(.first)
    )]
    VersionMismatch {
        file: String,
        first: String,
        found: u32,
        expected: u32,
    },
    #[error("{}: {key} {problem}", shown(.file))]
    SplitKey {
        file: String,
        key: &'static str,
        problem: String,
    },
    #[error(
        "{}: metadata key {} in part {part}; only the first part carries the model's \
         metadata",
        shown(.file),
        quoted(.key)
    )]
    MetadataOutsideFirst {
        file: String,
        key: String,
        part: u32,
    },
    #[error(
        "{}: split.tensors.count is {declared}, but the {parts} parts hold {actual} tensors",
        shown(.first)
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

/// Names as [`shown`] shows them, separated by ", ".
fn shown_list(names: &[String]) -> String {
    names
        .iter()
        .map(|n| shown(n))
        .collect::<Vec<_>>()
        .join(", ")
}

pub(crate) type Result<T, E = Error> = std::result::Result<T, E>;
