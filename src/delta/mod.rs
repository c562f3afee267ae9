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
//! ordered parallel map of `pipeline.rs`; `outputs.rs` refuses an output that is an input. `store.rs` keeps commits' weights as deltas in a git
//! repository. Every failure is a [`DeltaError`].

pub(crate) mod apply;
pub mod codec;
pub(crate) mod create;
mod error;
pub mod model;
pub(crate) mod open;
pub(crate) mod outputs;
pub(crate) mod pipeline;
pub(crate) mod reconstruct;
pub(crate) mod safetensors_out;
pub(crate) mod store;
pub(crate) mod verify;

pub use error::DeltaError;
pub use open::OpenDelta;
pub use pipeline::RunOptions;
pub use verify::{ErrorStats, reconstruction_error};
