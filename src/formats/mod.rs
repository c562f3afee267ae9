//! One parser per format. Each validates its format in one place and yields an [`Artifact`].
//!
//! [`Artifact`]: crate::artifact::Artifact

pub(crate) mod gguf;
pub(crate) mod limits;
pub(crate) mod oms;
pub(crate) mod pytorch;
pub(crate) mod safetensors;
pub(crate) mod wdelta;
