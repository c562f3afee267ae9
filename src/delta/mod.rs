//! `.wdelta` compressed weight deltas: a fine-tuned model stored as a compressed delta against
//! its parent, identified by the parent's hash. Files move freely between this implementation
//! and the Python package deltatensors (format version 1); version 2 adds the base dtype and a
//! more accurate int4 layout. See docs/wdelta.md.
//!
//! [`crate::formats::wdelta`] reads and writes the container, [`codec`] encodes and decodes one
//! tensor and [`model`] reads safetensors weights. Over whole models: `open.rs` opens a
//! `.wdelta` and checks it against a base, `create.rs` makes a delta, `apply.rs` rebuilds a
//! model, `verify.rs` checks a lineage of hashes and measures the reconstruction error, and
//! `reconstruct.rs` is the float32 reconstruction `create` and `apply` share, all over the
//! ordered parallel map of `pipeline.rs`; `apply_stream.rs` applies one file in a single pass
//! over each input, reading the `.wdelta` front to back with `stream.rs`; `outputs.rs` refuses
//! an output that is an input; `base_hash.rs` remembers a base's hash between runs. `store.rs`
//! keeps commits' weights as deltas in a git repository. `lossless/` is the byte-exact strategy
//! (format version 3) over safetensors, GGUF and PyTorch files. Every failure is a
//! [`DeltaError`].

mod apply;
mod apply_stream;
mod base_hash;
mod codec;
mod create;
mod error;
mod int4_blocks;
mod lossless;
mod model;
mod open;
mod outputs;
mod pipeline;
mod reconstruct;
mod safetensors_out;
mod store;
mod stream;
mod verify;

// The face of the delta adapter: what the command line (and the tests) use.
pub(crate) use apply::{OutDtype, apply};
pub(crate) use apply_stream::apply_file;
pub use codec::{EncodeOptions, decode, encode, entry_for};
pub(crate) use create::{Created, create};
pub use error::DeltaError;
pub use lossless::{ChunkError as LosslessChunkError, decode_chunk as decode_lossless_chunk};
pub(crate) use lossless::{
    LosslessCreated, apply_lossless, create_lossless, is_lossless_file, open_container,
    verify_checksum as verify_lossless_checksum,
};
pub(crate) use model::Elem;
pub use model::Model;
pub use open::OpenDelta;
pub use pipeline::RunOptions;
pub(crate) use store::{
    restore as restore_stored, restore_lossless, store as store_as_delta, store_lossless,
};
pub use verify::reconstruction_error;
pub(crate) use verify::verify_lineage;
pub(crate) use verify::{UpdateLoss, update_loss};
