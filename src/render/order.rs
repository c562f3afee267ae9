//! The order `inspect` lists tensors in, and where each one's data lies. The identity and the
//! diff keep their canonical (name) order; this is presentation only.

use crate::artifact::{Artifact, Format};

/// How `inspect` orders tensors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum TensorOrder {
    /// As their data lies in the file (by part, then offset): the order of gguf-dump and of
    /// the safetensors header's `data_offsets`.
    #[default]
    File,
    /// By name, the order of the structural identity.
    Name,
}

impl TensorOrder {
    pub(crate) fn describe(self) -> &'static str {
        match self {
            TensorOrder::File => "file order",
            TensorOrder::Name => "by name",
        }
    }
}

/// Positions in the artifact's tensor table, in `order`. Ties (empty tensors sharing an
/// offset) keep name order, so the listing is deterministic.
pub(crate) fn positions(artifact: &Artifact, order: TensorOrder) -> Vec<usize> {
    let mut positions: Vec<usize> = (0..artifact.tensors.len()).collect();
    if order == TensorOrder::File {
        let parts = artifact.layout.files.as_ref().map(|f| &f.tensor_parts);
        let part = |p: usize| parts.and_then(|t| t.get(p)).copied().unwrap_or(0);
        let offset = |p: usize| {
            artifact
                .tensors
                .get_index(p)
                .map_or(0, |(_, t)| t.file_offset)
        };
        positions.sort_by_key(|&p| (part(p), offset(p), p));
    }
    positions
}

/// Where the tensor at `position` begins in its data section, as the header records it: the
/// GGUF tensor info's offset, the start of safetensors' `data_offsets`. None for PyTorch
/// checkpoints, whose storages lie in a zip archive or after the pickle.
pub(crate) fn data_offset(artifact: &Artifact, position: usize) -> Option<u64> {
    if !matches!(artifact.format, Format::Gguf | Format::Safetensors) {
        return None;
    }
    let (_, tensor) = artifact.tensors.get_index(position)?;
    let header_size = match &artifact.layout.files {
        Some(files) => files.part_at(position)?.header_size,
        None => artifact.layout.header_size,
    };
    tensor.file_offset.checked_sub(header_size)
}
