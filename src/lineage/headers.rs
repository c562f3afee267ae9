//! What the headers alone decide: another architecture, no tensors in common, other widths,
//! or vocabulary rows and layers added or removed.

use std::collections::BTreeSet;

use super::relation::{RowChange, Unrelated};
use crate::artifact::{Artifact, Format, TensorInfo};
use crate::values::{ModelBytes, layer_of};

/// The headers' finding for two models paired by name.
pub(super) enum Structure {
    /// The same tensor names and shapes (dtypes may differ): the values decide.
    Same,
    /// Rows or layers added or removed; the shared tensors' values decide the rest.
    Resized {
        rows: Vec<RowChange>,
        layers_added: Vec<String>,
        layers_removed: Vec<String>,
    },
    Unrelated(Unrelated),
}

/// A GGUF's `general.architecture`.
fn architecture(a: &Artifact) -> Option<&str> {
    (a.format == Format::Gguf)
        .then(|| a.metadata.get("general.architecture")?.as_str())
        .flatten()
}

/// The layers (`blk.3`) of the tensors named.
fn layers<'a>(names: impl Iterator<Item = &'a str>) -> BTreeSet<(String, u64)> {
    names
        .filter_map(layer_of)
        .map(|(stem, index)| (stem.to_owned(), index))
        .collect()
}

/// Compares the headers of `model` and `parent`, paired by tensor name.
pub(super) fn compare(model: &Artifact, parent: &Artifact) -> Structure {
    if let (Some(m), Some(p)) = (architecture(model), architecture(parent))
        && m != p
    {
        return Structure::Unrelated(Unrelated::Architecture {
            model: m.to_owned(),
            parent: p.to_owned(),
        });
    }
    let shared: Vec<(&str, &TensorInfo, &TensorInfo)> = model
        .tensors
        .iter()
        .filter_map(|(name, m)| Some((name, m, parent.tensors.get(name)?)))
        .collect();
    if shared.is_empty() {
        return Structure::Unrelated(Unrelated::NoCommonTensors {
            model_tensors: model.tensors.len(),
            parent_tensors: parent.tensors.len(),
        });
    }
    let mut rows = Vec::new();
    let mut other: Option<(&str, &TensorInfo, &TensorInfo)> = None;
    let mut differing = 0;
    for &(name, m, p) in &shared {
        if m.shape == p.shape {
            continue;
        }
        differing += 1;
        match row_change(name, m, p, model.format) {
            Some(change) => rows.push(change),
            None => other = other.or(Some((name, m, p))),
        }
    }
    // Rows change in one direction and by one count (a vocabulary resized); anything else
    // is another width.
    let one_resize = rows
        .windows(2)
        .all(|w| (w[0].parent_rows, w[0].rows) == (w[1].parent_rows, w[1].rows));
    let mismatch = other.or_else(|| {
        let first = rows.first().filter(|_| !one_resize)?;
        shared.iter().find(|s| s.0 == first.tensor).copied()
    });
    if let Some((name, m, p)) = mismatch {
        return Structure::Unrelated(Unrelated::Shapes {
            differing,
            shared: shared.len(),
            example: name.to_owned(),
            model_shape: m.shape.to_vec(),
            parent_shape: p.shape.to_vec(),
        });
    }
    let model_layers = layers(model.tensors.keys());
    let parent_layers = layers(parent.tensors.keys());
    let label = |(stem, index): &(String, u64)| format!("{stem}.{index}");
    let layers_added: Vec<String> = model_layers.difference(&parent_layers).map(label).collect();
    let layers_removed: Vec<String> = parent_layers.difference(&model_layers).map(label).collect();
    if rows.is_empty() && layers_added.is_empty() && layers_removed.is_empty() {
        return Structure::Same;
    }
    Structure::Resized {
        rows,
        layers_added,
        layers_removed,
    }
}

/// A tensor whose shape differs from the parent's in one dimension only: rows added or
/// removed, when that dimension is the outermost (the first of a safetensors or PyTorch
/// shape, the last of GGUF's ggml order), so the shared rows lie first in both.
fn row_change(name: &str, m: &TensorInfo, p: &TensorInfo, format: Format) -> Option<RowChange> {
    if m.shape.len() != p.shape.len() || m.shape.is_empty() {
        return None;
    }
    let outer = match format {
        Format::Gguf => m.shape.len() - 1,
        _ => 0,
    };
    let differs: Vec<usize> = (0..m.shape.len())
        .filter(|&i| m.shape[i] != p.shape[i])
        .collect();
    (differs == [outer]).then(|| RowChange {
        tensor: name.to_owned(),
        parent_rows: p.shape[outer],
        rows: m.shape[outer],
        shared_rows_equal: None,
    })
}

/// Whether the rows both tensors have hold the same bytes (same dtype only), compared in
/// pieces with pages released behind; None when the dtypes differ or the bytes are not here.
pub(super) fn shared_rows_equal(
    change: &RowChange,
    (model, model_files): (&Artifact, &[ModelBytes]),
    (parent, parent_files): (&Artifact, &[ModelBytes]),
) -> Option<bool> {
    let (m, p) = (
        model.tensors.get(&change.tensor)?,
        parent.tensors.get(&change.tensor)?,
    );
    if m.dtype != p.dtype || change.rows == 0 || change.parent_rows == 0 {
        return None;
    }
    let row_bytes = |info: &TensorInfo, rows: u64| info.byte_length / rows;
    let shared = change.rows.min(change.parent_rows);
    let length = row_bytes(m, change.rows) * shared;
    if row_bytes(p, change.parent_rows) * shared != length {
        return None;
    }
    let mf = file_of(model, model_files, &change.tensor)?;
    let pf = file_of(parent, parent_files, &change.tensor)?;
    let a = mf.range(&change.tensor, m.file_offset, length).ok()?;
    let b = pf.range(&change.tensor, p.file_offset, length).ok()?;
    const PIECE: usize = 4 << 20;
    for (x, y) in a.chunks(PIECE).zip(b.chunks(PIECE)) {
        let equal = x == y;
        mf.release(x);
        pf.release(y);
        if !equal {
            return Some(false);
        }
    }
    Some(true)
}

/// The file holding tensor `name` of `artifact`.
fn file_of<'f>(artifact: &Artifact, files: &'f [ModelBytes], name: &str) -> Option<&'f ModelBytes> {
    let position = artifact.tensors.position(name)?;
    let part = artifact.layout.files.as_ref().map_or(0, |f| {
        f.tensor_parts.get(position).copied().unwrap_or(0) as usize
    });
    files.get(part)
}
