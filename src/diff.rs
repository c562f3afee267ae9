//! Structural diff of two artifacts: what the identity covers, compared key by key.

use std::collections::BTreeMap;

use crate::artifact::{Artifact, Format, TensorInfo, Value};
use crate::identity::structural_hash;

/// One side's change of an item that is keyed by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change<T> {
    Added(T),
    Removed(T),
    Changed(T, T),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataChange {
    pub key: String,
    pub change: Change<Value>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorChange {
    pub name: String,
    pub change: Change<TensorInfo>,
}

/// Counts of changes, for summaries and tables.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct DiffCounts {
    pub metadata_added: usize,
    pub metadata_removed: usize,
    pub metadata_changed: usize,
    pub tensors_added: usize,
    pub tensors_removed: usize,
    pub tensors_changed: usize,
}

#[derive(Debug, Clone)]
pub struct StructuralDiff {
    pub old_format: Format,
    pub new_format: Format,
    pub old_gguf_version: Option<u32>,
    pub new_gguf_version: Option<u32>,
    pub old_hash: String,
    pub new_hash: String,
    pub old_metadata_count: usize,
    pub new_metadata_count: usize,
    pub old_tensor_count: usize,
    pub new_tensor_count: usize,
    /// Sorted by key.
    pub metadata: Vec<MetadataChange>,
    /// Sorted by tensor name.
    pub tensors: Vec<TensorChange>,
}

impl StructuralDiff {
    pub fn between(old: &Artifact, new: &Artifact) -> Self {
        StructuralDiff {
            old_format: old.format,
            new_format: new.format,
            old_gguf_version: old.gguf_version,
            new_gguf_version: new.gguf_version,
            old_hash: structural_hash(old),
            new_hash: structural_hash(new),
            old_metadata_count: old.metadata.len(),
            new_metadata_count: new.metadata.len(),
            old_tensor_count: old.tensors.len(),
            new_tensor_count: new.tensors.len(),
            metadata: diff_maps(&old.metadata, &new.metadata, |a, b| a == b)
                .map(|(key, change)| MetadataChange { key, change })
                .collect(),
            tensors: diff_maps(&old.tensors, &new.tensors, same_structure)
                .map(|(name, change)| TensorChange { name, change })
                .collect(),
        }
    }

    /// Identical structural identities (equal hashes).
    pub fn is_identical(&self) -> bool {
        self.old_hash == self.new_hash
    }

    pub fn format_changed(&self) -> bool {
        self.old_format != self.new_format
    }

    pub fn counts(&self) -> DiffCounts {
        let mut counts = DiffCounts::default();
        for m in &self.metadata {
            match m.change {
                Change::Added(_) => counts.metadata_added += 1,
                Change::Removed(_) => counts.metadata_removed += 1,
                Change::Changed(..) => counts.metadata_changed += 1,
            }
        }
        for t in &self.tensors {
            match t.change {
                Change::Added(_) => counts.tensors_added += 1,
                Change::Removed(_) => counts.tensors_removed += 1,
                Change::Changed(..) => counts.tensors_changed += 1,
            }
        }
        counts
    }
}

/// Tensors are equal when their identity fields are: a tensor that only moved is unchanged.
pub fn same_structure(a: &TensorInfo, b: &TensorInfo) -> bool {
    a.dtype == b.dtype && a.shape == b.shape && a.byte_length == b.byte_length
}

/// Walks two maps, yielding additions, removals and changes in key order.
fn diff_maps<'a, T: Clone + 'a>(
    old: &'a BTreeMap<String, T>,
    new: &'a BTreeMap<String, T>,
    same: fn(&T, &T) -> bool,
) -> impl Iterator<Item = (String, Change<T>)> + 'a {
    let removed_or_changed = old.iter().filter_map(move |(k, a)| match new.get(k) {
        None => Some((k.clone(), Change::Removed(a.clone()))),
        Some(b) if !same(a, b) => Some((k.clone(), Change::Changed(a.clone(), b.clone()))),
        Some(_) => None,
    });
    let added = new
        .iter()
        .filter(move |(k, _)| !old.contains_key(*k))
        .map(|(k, b)| (k.clone(), Change::Added(b.clone())));
    let mut all: Vec<_> = removed_or_changed.chain(added).collect();
    all.sort_by(|a, b| a.0.cmp(&b.0));
    all.into_iter()
}
