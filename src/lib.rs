//! weight-inspect: structural identity and structural diffs of GGUF and safetensors files.
//!
//! The data flows read ([`formats`]) → model ([`artifact`]) → [`identity`] & [`diff`] →
//! [`render`]. The git driver ([`git`]), policy checks ([`policy`]), CI reporting ([`ci`]) and
//! weight deltas ([`delta`]) are adapters around that core; [`cli`] only parses arguments.

pub mod artifact;
pub mod ci;
pub mod cli;
pub mod delta;
pub mod diff;
pub mod digest;
pub mod dtype;
pub mod error;
pub mod formats;
pub mod fsutil;
pub mod git;
pub mod identity;
pub mod input;
pub mod output;
pub mod policy;
pub mod progress;
pub mod read;
pub mod remote;
pub mod render;
pub mod sharded;
pub mod table;
pub mod values;

pub use artifact::{Artifact, Format, TensorInfo, Value};
pub use error::Error;

/// Version of the JSON outputs and of the canonical form behind the structural hash.
pub const SCHEMA_VERSION: u32 = 1;
