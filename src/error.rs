//! Errors that reach the user. Format errors carry the offset or key; [`Error`] adds the file.

use std::path::PathBuf;

use crate::formats::gguf::GgufError;
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
    #[error("{path}: invalid .wdelta: {source}")]
    Wdelta {
        path: PathBuf,
        #[source]
        source: Box<WdeltaError>,
    },
    #[error(
        "{path}: not a GGUF or safetensors file (first bytes {first_bytes}); expected the magic \
         \"GGUF\" or an 8-byte little-endian header length followed by '{{'"
    )]
    UnknownFormat { path: PathBuf, first_bytes: String },
}

impl Error {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
