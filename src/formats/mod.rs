//! One parser per format. Each validates its format in one place and yields an [`Artifact`].
//!
//! [`Artifact`]: crate::artifact::Artifact

pub mod gguf;
pub mod safetensors;

use crate::artifact::Format;

/// Detects the format from the first bytes; never from the file name.
pub fn detect(bytes: &[u8]) -> Option<Format> {
    if bytes.starts_with(gguf::MAGIC) {
        return Some(Format::Gguf);
    }
    // safetensors: u64 header length, then the JSON object.
    if bytes.len() > 8 && bytes[8] == b'{' {
        return Some(Format::Safetensors);
    }
    None
}
