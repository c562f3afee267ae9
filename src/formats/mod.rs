//! One parser per format. Each validates its format in one place and yields an [`Artifact`].
//!
//! [`Artifact`]: crate::artifact::Artifact

pub mod gguf;
pub(crate) mod limits;
pub mod pytorch;
pub mod safetensors;
pub mod wdelta;

