//! weight-inspect: structural identity and structural diffs of GGUF, safetensors and PyTorch
//! files.
//!
//! The data flows read ([`formats`], `read`) → model (`artifact`) → identity, diff and values →
//! render. The git driver (`git`), policy checks (`policy`), CI reporting (`ci`) and weight
//! deltas (`delta`) are adapters around that core; `cli` only parses arguments. The modules are
//! private: what the binary, the tests and the fuzz targets use is re-exported here.

mod artifact;
mod bom;
mod ci;
mod cli;
mod cmp;
mod conversion;
mod delta;
mod diff;
mod digest;
mod dtype;
mod error;
mod escape;
mod formats;
mod fsutil;
mod git;
mod hugepages;
mod identity;
mod input;
mod lineage;
mod mapped;
mod output;
mod policy;
mod progress;
mod read;
mod remote;
mod render;
mod sharded;
mod signing;
mod table;
mod values;

/// The format readers' entry points on whole files held in memory, for the tests and the fuzz
/// targets; everything else reads through [`read_file`] and [`read_bytes`].
pub mod readers {
    /// GGUF (docs/SPEC.md §4).
    pub mod gguf {
        pub use crate::formats::gguf::{parse, parse_prefix};
    }
    /// safetensors (docs/SPEC.md §5).
    pub mod safetensors {
        pub use crate::formats::safetensors::{header_bytes_needed, parse};
    }
    /// PyTorch checkpoints, read without running them (docs/pytorch.md).
    pub mod pytorch {
        pub use crate::formats::pytorch::{fuzzing, parse, parse_prefix, sniff};
    }
    /// OpenSSF model signatures: the Sigstore bundle and its in-toto statement
    /// (docs/signatures.md).
    pub mod oms {
        pub use crate::formats::oms::{
            Bundle, Envelope, HashAlgorithm, InclusionProof, MAX_BUNDLE_BYTES, Manifest, Material,
            Method, OmsError, Resource, ResourceKey, Serialization, Signature, TlogEntry, parse,
        };
    }
    /// `.wdelta` files (docs/wdelta.md).
    pub mod wdelta {
        pub use crate::formats::wdelta::{
            Header, LossFigures, OwnedArray, Strategy, WdeltaError, WdeltaFile, header_json,
            is_wdelta, parse_header, sha256, write_to_vec,
        };
        /// The lossless container (version 3).
        pub mod lossless {
            pub use crate::formats::wdelta::lossless::{LosslessContainer, SegmentKind};
        }
    }
}

pub use artifact::{Artifact, Format, TensorInfo, Value};
pub use cli::main;
pub use dtype::Dtype;
/// Weight deltas (`.wdelta`): the weights reader, the tensor codec and the lineage checks.
pub mod deltas {
    pub use crate::delta::{
        DeltaError, EncodeOptions, LosslessChunkError, Model, OpenDelta, RunOptions, decode,
        decode_lossless_chunk, encode, entry_for, reconstruction_error,
    };
}
/// What HTTP servers hand the remote reader, parsed as it parses them (for the fuzz targets).
pub mod network {
    pub use crate::remote::{
        LfsObject, ObjectOutcome, RemoteError, origin, parse_batch_response, parse_content_range,
        status_detail,
    };
}
pub use diff::StructuralDiff;
pub use digest::hex;
pub use error::Error;
pub use git::Pointer as LfsPointer;
pub use identity::{
    SCHEMA_VERSION, canonical_json, model_identity, model_identity_json, structural_hash,
};
pub use policy::Policy;
pub use read::{read_bytes, read_file};
pub use render::{Palette, describe_wdelta, describe_wdelta_json, inspect_json, inspect_text};
pub use sharded::{is_plain_file_name, parse_index};
pub use values::{DECODED_GGUF_TYPES, ModelBytes, Side, compare as compare_values, dequantize};
