//! The models a BOM describes: their files, card sources and ancestors.

use crate::artifact::Artifact;

/// One file of a model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ModelFile {
    /// Its path as the model argument reaches it (`model/part-00001.safetensors`,
    /// `HEAD:model.gguf`).
    pub path: String,
    pub size: u64,
    /// SHA-256 of its bytes; None when they are not here to hash (a URL).
    pub sha256: Option<String>,
    /// The SHA-256 is a Git LFS pointer's oid (the object was not read).
    pub from_lfs_pointer: bool,
}

/// How a model was made from an ancestor, as `relate` found it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Derivation {
    pub relation: &'static str,
    pub base_model_relation: Option<&'static str>,
    pub confidence: f64,
    pub summary: String,
}

/// A model the described one was made from.
#[derive(Debug, Clone)]
pub(crate) struct Ancestor<'a> {
    pub name: String,
    /// Its header, when it was read (a `.wdelta`'s parent is known by its hash alone).
    pub artifact: Option<&'a Artifact>,
    pub files: Vec<ModelFile>,
    pub derivation: Option<Derivation>,
    /// The structural hash a `.wdelta` names as its parent's.
    pub parent_hash: Option<String>,
}

/// A model the BOM describes.
#[derive(Debug, Clone)]
pub(crate) struct Described<'a> {
    pub name: String,
    /// None for a `.wdelta`, which has no structural identity.
    pub artifact: Option<&'a Artifact>,
    pub files: Vec<ModelFile>,
    /// config.json beside the model (architectures, context length), when there is one.
    pub config: Option<serde_json::Value>,
    /// The licence the model card's front matter (README.md beside the model) declares.
    pub card_license: Option<String>,
    /// A `.wdelta`'s strategy and parent hash.
    pub wdelta: Option<(String, String)>,
    pub ancestors: Vec<Ancestor<'a>>,
}

/// What a BOM carries besides the models.
#[derive(Debug, Clone, Default)]
pub(crate) struct Options {
    /// `metadata.timestamp` (RFC 3339), only when asked for.
    pub timestamp: Option<String>,
}
