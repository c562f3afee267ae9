//! One parser per format. Each validates its format in one place and yields an [`Artifact`].
//!
//! [`Artifact`]: crate::artifact::Artifact

pub mod gguf;
pub mod limits;
pub mod pickle;
pub mod safetensors;
pub mod wdelta;

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

/// The kinds of file this tool reads, as their names tell (walking a tree must not read every
/// blob; the parsers still detect the actual format by its magic bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    Gguf,
    Safetensors,
    Wdelta,
}

impl FileKind {
    /// The kind `path` names by its extension (any case), or None.
    pub fn from_path(path: &str) -> Option<FileKind> {
        let name = path.rsplit('/').next().unwrap_or(path);
        let (_, ext) = name.rsplit_once('.')?;
        [
            ("gguf", FileKind::Gguf),
            ("safetensors", FileKind::Safetensors),
            ("wdelta", FileKind::Wdelta),
        ]
        .into_iter()
        .find(|(known, _)| ext.eq_ignore_ascii_case(known))
        .map(|(_, kind)| kind)
    }

    /// GGUF or safetensors: a model with a structural identity (a `.wdelta` is described).
    pub fn is_model(self) -> bool {
        matches!(self, FileKind::Gguf | FileKind::Safetensors)
    }
}

#[cfg(test)]
mod tests {
    use super::FileKind;

    #[test]
    fn kinds_by_extension() {
        assert_eq!(FileKind::from_path("models/a.gguf"), Some(FileKind::Gguf));
        assert_eq!(
            FileKind::from_path("A.SafeTensors"),
            Some(FileKind::Safetensors)
        );
        assert_eq!(FileKind::from_path("x.wdelta"), Some(FileKind::Wdelta));
        assert_eq!(FileKind::from_path("gguf"), None);
        assert_eq!(FileKind::from_path("dir.gguf/readme.md"), None);
        assert_eq!(FileKind::from_path("model.gguf.txt"), None);
        assert!(!FileKind::Wdelta.is_model());
    }
}
