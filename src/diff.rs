//! Structural diff of two artifacts: what the identity covers, compared key by key.

use crate::artifact::{Array, Artifact, Format, TensorInfo, Value};
use crate::identity::{model_identity, structural_hash};

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
    /// A training checkpoint's group of the value (`model`, `optimizer`, …); None elsewhere.
    pub group: Option<&'static str>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorChange {
    pub name: String,
    pub change: Change<TensorInfo>,
    /// A grouped checkpoint's group of the tensor (`model`, `optimizer`, …); None elsewhere.
    pub group: Option<&'static str>,
}

/// The groups of a training checkpoint's parts, in the order a diff shows them.
pub(crate) const GROUP_ORDER: [&str; 5] = ["model", "optimizer", "scheduler", "rng", "other"];

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

impl std::fmt::Display for DiffCounts {
    /// `tensors +1 −0 ~2, metadata +0 −0 ~1`: the one wording of the counts in summaries.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "tensors +{} −{} ~{}, metadata +{} −{} ~{}",
            self.tensors_added,
            self.tensors_removed,
            self.tensors_changed,
            self.metadata_added,
            self.metadata_removed,
            self.metadata_changed
        )
    }
}

/// The structural diff of two models: what the identity holds on each side, key by key and
/// tensor by tensor, with the layout and completeness beside it.
#[derive(Debug, Clone)]
pub struct StructuralDiff {
    /// The old side's format.
    pub old_format: Format,
    /// The new side's format.
    pub new_format: Format,
    /// The old side's GGUF version, for GGUF.
    pub old_gguf_version: Option<u32>,
    /// The new side's GGUF version, for GGUF.
    pub new_gguf_version: Option<u32>,
    /// The old side's structural hash (hex).
    pub old_hash: String,
    /// The new side's structural hash (hex).
    pub new_hash: String,
    /// Each side's model identity when it is a training checkpoint (docs/SPEC.md §5d).
    pub old_model_identity: Option<String>,
    /// The new side's model identity, when it is a training checkpoint.
    pub new_model_identity: Option<String>,
    /// Metadata entries on the old side.
    pub old_metadata_count: usize,
    /// Metadata entries on the new side.
    pub new_metadata_count: usize,
    /// Tensors on the old side.
    pub old_tensor_count: usize,
    /// Tensors on the new side.
    pub new_tensor_count: usize,
    /// Sorted by key.
    pub metadata: Vec<MetadataChange>,
    /// Sorted by tensor name.
    pub tensors: Vec<TensorChange>,
    /// How the files holding the model changed (resharding), when a side has several files
    /// or the sides are laid out differently; None when nothing about the files changed.
    pub layout: Option<LayoutChange>,
    /// Each side's missing tensor data, when it is cut short: beside the identity, not in it.
    pub old_incomplete: Option<crate::artifact::Incomplete>,
    /// The new side's missing tensor data, when it is cut short.
    pub new_incomplete: Option<crate::artifact::Incomplete>,
    /// A side is a training checkpoint, with a model identity beside its structural one:
    /// changes of its other groups are listed beside an equal model identity.
    pub training: bool,
}

/// The files of each side, when they differ: layout, outside the identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayoutChange {
    pub old: FilesView,
    pub new: FilesView,
    /// Tensors present on both sides that are held by a differently named file.
    pub tensors_moved: usize,
}

/// The files a model is stored in, as a diff reports them.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FilesView {
    /// "single-file", "safetensors-index" or "gguf-split".
    pub scheme: &'static str,
    /// The part files (empty for a single file).
    pub parts: Vec<String>,
}

impl FilesView {
    pub fn of(artifact: &Artifact) -> FilesView {
        match &artifact.layout.files {
            None => FilesView {
                scheme: "single-file",
                parts: Vec::new(),
            },
            Some(files) => FilesView {
                scheme: files.scheme.name(),
                parts: files.parts.iter().map(|p| p.file.clone()).collect(),
            },
        }
    }

    /// "1 file", "3 safetensors shards", "2 PyTorch shards", "5 GGUF parts".
    pub fn describe(&self) -> String {
        match self.scheme {
            "single-file" => "1 file".to_owned(),
            "gguf-split" => plural(self.parts.len(), "GGUF part"),
            "pytorch-index" => plural(self.parts.len(), "PyTorch shard"),
            _ => plural(self.parts.len(), "safetensors shard"),
        }
    }
}

/// "1 tensor", "3 tensors".
pub(crate) fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

impl LayoutChange {
    fn between(old: &Artifact, new: &Artifact) -> Option<LayoutChange> {
        if old.layout.files.is_none() && new.layout.files.is_none() {
            return None;
        }
        let (old_view, new_view) = (FilesView::of(old), FilesView::of(new));
        fn holder<'a>(a: &'a Artifact, name: &str) -> Option<&'a str> {
            a.part_of(name).map(|p| p.file.as_str())
        }
        let tensors_moved = old
            .tensors
            .keys()
            .filter(|name| {
                new.tensors.get(name).is_some() && holder(old, name) != holder(new, name)
            })
            .count();
        if old_view == new_view && tensors_moved == 0 {
            return None;
        }
        Some(LayoutChange {
            old: old_view,
            new: new_view,
            tensors_moved,
        })
    }

    /// "3 safetensors shards -> 2 safetensors shards, 40 tensors moved between files".
    pub fn describe(&self) -> String {
        let mut text = format!("{} -> {}", self.old.describe(), self.new.describe());
        if self.old.parts != self.new.parts && self.old.parts.len() == self.new.parts.len() {
            text.push_str(" (renamed)");
        }
        if self.tensors_moved > 0 {
            text.push_str(&format!(
                ", {} moved between files",
                plural(self.tensors_moved, "tensor")
            ));
        }
        text
    }
}

impl StructuralDiff {
    /// The diff from `old` to `new`.
    pub fn between(old: &Artifact, new: &Artifact) -> Self {
        StructuralDiff {
            old_format: old.format,
            new_format: new.format,
            old_gguf_version: old.gguf_version,
            new_gguf_version: new.gguf_version,
            old_hash: structural_hash(old),
            new_hash: structural_hash(new),
            old_model_identity: model_identity(old),
            new_model_identity: model_identity(new),
            old_metadata_count: old.metadata.len(),
            new_metadata_count: new.metadata.len(),
            old_tensor_count: old.tensors.len(),
            new_tensor_count: new.tensors.len(),
            metadata: diff_sorted(
                old.metadata.iter().map(|(k, v)| (k.as_str(), v)),
                new.metadata.iter().map(|(k, v)| (k.as_str(), v)),
                |a, b| a == b,
            )
            .map(|(key, change)| {
                let group = new
                    .metadata_group(&key)
                    .or_else(|| old.metadata_group(&key));
                MetadataChange { key, change, group }
            })
            .collect(),
            tensors: diff_sorted(old.tensors.iter(), new.tensors.iter(), same_structure)
                .map(|(name, change)| {
                    let group = new.tensor_group(&name).or_else(|| old.tensor_group(&name));
                    TensorChange {
                        name,
                        change,
                        group,
                    }
                })
                .collect(),
            training: old.layout.training().is_some() || new.layout.training().is_some(),
            layout: LayoutChange::between(old, new),
            old_incomplete: old.layout.incomplete(),
            new_incomplete: new.layout.incomplete(),
        }
    }

    /// Identical structural identities (equal hashes).
    pub fn is_identical(&self) -> bool {
        self.old_hash == self.new_hash
    }

    /// Both sides are training checkpoints with equal model identities (§5d): the same model
    /// at another step, whatever changed beside it.
    pub fn same_model_identity(&self) -> bool {
        self.old_model_identity.is_some() && self.old_model_identity == self.new_model_identity
    }

    /// Anything differs: the identity, or what is read beside it.
    pub fn differs(&self) -> bool {
        !self.is_identical() || !self.metadata.is_empty() || !self.tensors.is_empty()
    }

    /// One side is cut short and the other is not, or they miss different data: a difference
    /// outside the identity (an interrupted download against the model).
    pub fn completeness_differs(&self) -> bool {
        self.old_incomplete != self.new_incomplete
    }

    /// Whether any change belongs to a group (a grouped checkpoint on a side).
    pub fn is_grouped(&self) -> bool {
        self.metadata.iter().any(|m| m.group.is_some())
            || self.tensors.iter().any(|t| t.group.is_some())
    }

    /// The same structure held by other files: a resharding.
    pub fn only_layout_changed(&self) -> bool {
        self.is_identical() && self.layout.is_some()
    }

    /// The two sides are of different formats.
    pub fn format_changed(&self) -> bool {
        self.old_format != self.new_format
    }

    /// How many entries were added, removed and changed.
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

/// Where two arrays of one element type first differ: a changed vocabulary is found, not just
/// flagged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ArrayDifference {
    pub old_length: usize,
    pub new_length: usize,
    /// The first index whose elements differ, or that only one side has.
    pub index: usize,
    /// The elements at `index`; None on the side the index is past the end of.
    pub old: Option<Value>,
    pub new: Option<Value>,
}

impl ArrayDifference {
    /// None when the arrays are equal or their element types differ.
    pub(crate) fn between(a: &Array, b: &Array) -> Option<ArrayDifference> {
        if a.element_type_name() != b.element_type_name() {
            return None;
        }
        let common = a.len().min(b.len());
        let index = match (a, b) {
            // Compared in place: a 262,144-token vocabulary is not copied string by string.
            (Array::String(x), Array::String(y)) => (0..common).find(|&i| x.get(i) != y.get(i)),
            _ => (0..common).find(|&i| a.get(i) != b.get(i)),
        };
        let index = match index {
            Some(i) => i,
            None if a.len() != b.len() => common,
            None => return None,
        };
        Some(ArrayDifference {
            old_length: a.len(),
            new_length: b.len(),
            index,
            old: a.get(index),
            new: b.get(index),
        })
    }
}

/// Tensors are equal when their identity fields are: a tensor that only moved is unchanged.
pub(crate) fn same_structure(a: &TensorInfo, b: &TensorInfo) -> bool {
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
