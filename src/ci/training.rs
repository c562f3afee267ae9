//! A grouped PyTorch checkpoint (a training checkpoint: model weights beside optimizer,
//! scheduler or RNG state) as the pull-request report labels it: its model identity and, group
//! by group, what changed — `model identity b24ba64b64f8 (unchanged); model weights changed
//! (values 2 of 2); optimizer state changed (values 6 of 6); other changed (metadata ~2)` — so
//! that a reviewer tells a step of the same run from another model where they look (the files
//! table, the annotations).

use crate::diff::{Change, GROUP_ORDER};
use crate::git::ComparedFile;
use crate::values::groups::label;

/// The label of `file` when a side is a training checkpoint or holds training state (the
/// Trainer's optimizer.pt); None for every other file.
pub(super) fn training_label(file: &ComparedFile) -> Option<String> {
    let old = file.old.as_ref().and_then(|s| s.artifact());
    let new = file.new.as_ref().and_then(|s| s.artifact());
    // Grouped with something beside model weights (a `{"model": …}` dict is a state dict).
    let training = |a: Option<&crate::artifact::Artifact>| {
        a.is_some_and(|a| {
            a.layout.training().is_some()
                || a.layout
                    .groups
                    .as_ref()
                    .is_some_and(|g| g.iter().any(|g| *g != "model"))
        })
    };
    if !training(old) && !training(new) {
        return None;
    }
    let identity =
        |a: Option<&crate::artifact::Artifact>| a.and_then(crate::identity::model_identity);
    let (old_identity, new_identity) = (identity(old), identity(new));
    let short = |h: &str| h.chars().take(12).collect::<String>();
    let mut parts = Vec::new();
    match (&old_identity, &new_identity) {
        (Some(a), Some(b)) if a == b => {
            parts.push(format!("model identity {} (unchanged)", short(a)));
        }
        (Some(a), Some(b)) => parts.push(format!(
            "model identity {} → {} (another model)",
            short(a),
            short(b)
        )),
        (None, Some(b)) => parts.push(format!("model identity {}", short(b))),
        (Some(a), None) if new.is_some() => {
            parts.push(format!("model identity {} → none", short(a)));
        }
        (Some(a), None) => parts.push(format!("model identity {} (removed)", short(a))),
        (None, None) => {}
    }
    // Every group of either side: of its tensors, and (a training checkpoint's) of its root keys.
    let mut groups: Vec<&'static str> = Vec::new();
    for a in [old, new].into_iter().flatten() {
        groups.extend(a.groups().into_iter().map(|(g, ..)| g));
        if let Some(t) = a.layout.training() {
            groups.extend(t.groups.iter().copied());
        }
    }
    groups.sort_by_key(|g| GROUP_ORDER.iter().position(|o| o == g));
    groups.dedup();
    let values = match &file.values {
        Some(Ok(values)) => new.map(|new| values.by_group(new)),
        _ => None,
    };
    if file.diff.is_none() && values.is_none() {
        // One side only (added, removed) or not compared: what it holds.
        let labels: Vec<&str> = groups.iter().map(|g| label(g)).collect();
        parts.push(format!("groups: {}", labels.join(", ")));
    } else {
        for group in groups {
            parts.push(group_part(file, group, values.as_deref()));
        }
    }
    Some(parts.join("; "))
}

/// `model weights changed (values 2 of 2, tensors +1 −0 ~0)`, `RNG state unchanged`,
/// `other: structure unchanged` (values not compared).
fn group_part(
    file: &ComparedFile,
    group: &'static str,
    values: Option<&[crate::values::groups::GroupValues]>,
) -> String {
    let mut what = Vec::new();
    if let Some(values) = values
        && let Some(g) = values.iter().find(|g| g.group == group)
        && g.changed > 0
    {
        what.push(format!("values {} of {}", g.changed, g.compared));
    }
    if let Some(diff) = &file.diff {
        let mut tensors = [0usize; 3];
        for t in diff.tensors.iter().filter(|t| t.group == Some(group)) {
            tensors[kind(&t.change)] += 1;
        }
        let mut metadata = [0usize; 3];
        for m in diff.metadata.iter().filter(|m| m.group == Some(group)) {
            metadata[kind(&m.change)] += 1;
        }
        for (name, [added, removed, changed]) in [("tensors", tensors), ("metadata", metadata)] {
            if added + removed + changed > 0 {
                what.push(format!("{name} +{added} −{removed} ~{changed}"));
            }
        }
    }
    let label = label(group);
    if !what.is_empty() {
        format!("{label} changed ({})", what.join(", "))
    } else if values.is_some() {
        format!("{label} unchanged")
    } else {
        format!("{label}: structure unchanged")
    }
}

/// 0 added, 1 removed, 2 changed.
fn kind<T>(change: &Change<T>) -> usize {
    match change {
        Change::Added(_) => 0,
        Change::Removed(_) => 1,
        Change::Changed(..) => 2,
    }
}
