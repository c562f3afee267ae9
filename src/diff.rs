//! Structural diff of two artifacts: what the identity covers, compared key by key.

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
            metadata: diff_sorted(
                old.metadata.iter().map(|(k, v)| (k.as_str(), v)),
                new.metadata.iter().map(|(k, v)| (k.as_str(), v)),
                |a, b| a == b,
            )
            .map(|(key, change)| MetadataChange { key, change })
            .collect(),
            tensors: diff_sorted(old.tensors.iter(), new.tensors.iter(), same_structure)
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
/// Merges two sequences sorted by key into the sorted list of keys removed, added or changed.
fn diff_sorted<'a, T: Clone + 'a>(
    old: impl Iterator<Item = (&'a str, &'a T)>,
    new: impl Iterator<Item = (&'a str, &'a T)>,
    same: fn(&T, &T) -> bool,
) -> impl Iterator<Item = (String, Change<T>)> {
    use std::cmp::Ordering;
    let mut old = old.peekable();
    let mut new = new.peekable();
    let mut out = Vec::new();
    loop {
        let order = match (old.peek(), new.peek()) {
            (None, None) => break,
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (Some((a, _)), Some((b, _))) => a.cmp(b),
        };
        match order {
            Ordering::Less => {
                let (k, a) = old.next().expect("peeked");
                out.push((k.to_owned(), Change::Removed(a.clone())));
            }
            Ordering::Greater => {
                let (k, b) = new.next().expect("peeked");
                out.push((k.to_owned(), Change::Added(b.clone())));
            }
            Ordering::Equal => {
                let ((k, a), (_, b)) = (old.next().expect("peeked"), new.next().expect("peeked"));
                if !same(a, b) {
                    out.push((k.to_owned(), Change::Changed(a.clone(), b.clone())));
                }
            }
        }
    }
    out.into_iter()
}
