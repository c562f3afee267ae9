//! `.wdelta` compressed weight deltas: a fine-tuned model stored as a compressed delta against
//! its parent, identified by the parent's hash. Files move freely between this implementation
//! and the Python package deltatensors (format version 1); version 2 adds the base dtype and a
//! more accurate int4 layout. See docs/wdelta.md.
//!
//! [`crate::formats::wdelta`] reads and writes the container, [`codec`] encodes and decodes one tensor,
//! [`model`] reads safetensors weights, [`ops`] runs create/apply/verify over whole models and
//! [`store`] keeps commits' weights as deltas in a git repository.

pub mod codec;
pub mod model;
pub mod ops;
pub mod pipeline;
pub mod safetensors_out;
pub mod store;
