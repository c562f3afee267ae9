//! The errors of a conversion check: planning the pairs, reading a `--map` file, and the two
//! together with the value comparison's.

use std::path::PathBuf;

use crate::values::ValuesError;

/// The caps of a map file: its size, its rules, each rule's pattern (compiled size) and
/// replacement. A replacement repeating `${1}` cannot make a name of megabytes, and many rules
/// cannot take gigabytes of compiled patterns.
pub(super) const MAX_MAP_FILE_BYTES: u64 = 1 << 20;
pub(super) const MAX_MAP_RULES: usize = 1024;
pub(super) const MAX_TO_BYTES: usize = 1024;
pub(super) const MAX_TO_REFERENCES: usize = 16;

/// Block counts above this are refused: the name table is built per block.
pub(super) const MAX_BLOCKS: u64 = 4096;

#[derive(Debug, thiserror::Error)]
pub(crate) enum ConversionError {
    #[error(transparent)]
    Pairing(#[from] PairingError),
    #[error(transparent)]
    Values(#[from] ValuesError),
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum PairingError {
    #[error(
        "{file}: general.architecture is {found}, expected a string naming the model's \
         architecture (the name table is chosen by it)"
    )]
    NoArchitecture { file: String, found: String },
    #[error(
        "{file}: {key} is {found}, expected a block count between 1 and {MAX_BLOCKS} (the name \
         table is built per block)"
    )]
    BlockCount {
        file: String,
        key: String,
        found: String,
    },
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum MapError {
    #[error("{path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Toml { path: PathBuf, message: String },
    #[error("{path}: rule {rule}: `from` is not a regular expression: {message}")]
    Regex {
        path: PathBuf,
        rule: usize,
        message: String,
    },
    #[error("{path}: rule {rule}: `permute_heads` must be at least 1")]
    Heads { path: PathBuf, rule: usize },
    #[error("{path}: {count} rules, more than the {MAX_MAP_RULES} a map file may have")]
    TooManyRules { path: PathBuf, count: usize },
    #[error(
        "{path}: rule {rule}: `to` is {bytes} bytes with {references} group references; at most \
         {MAX_TO_BYTES} bytes and {MAX_TO_REFERENCES} references"
    )]
    ReplacementTooLarge {
        path: PathBuf,
        rule: usize,
        bytes: usize,
        references: usize,
    },
}
