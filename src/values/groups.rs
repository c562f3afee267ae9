//! A training checkpoint's value diff summed up group by group (model weights apart from
//! optimizer, scheduler, RNG and other state, docs/pytorch.md): tensors compared, changed and
//! identical, and the relative L2 change of each group's tensors taken together.

use super::{Method, Sums, ValueDiff, ValueStats};
use crate::artifact::Artifact;

/// The value changes of one group.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct GroupValues {
    /// `model`, `optimizer`, `scheduler`, `rng` or `other`.
    pub group: &'static str,
    /// Tensors of the group compared (by value or by bytes).
    pub compared: usize,
    /// Of those, changed.
    pub changed: usize,
    /// Of those, identical (neither changed nor differing in bits only).
    pub identical: usize,
    /// Of those, compared byte for byte (no figures): left out of `rel_l2`.
    pub compared_by_bytes: usize,
    /// ‖b − a‖ / ‖a‖ over the group's tensors compared by value, as one vector; None when
    /// infinite (their old norm is 0 and something changed) or when none was compared by value.
    pub rel_l2: Option<f64>,
    /// The largest rel_l2 of a changed tensor of the group compared by value (None: none,
    /// or an infinite one).
    pub max_rel_l2: Option<f64>,
    /// Whether a changed tensor's rel_l2 is infinite (a zero old norm).
    pub infinite: bool,
}

/// The groups of `values` by `artifact`'s tensor groups (the new side's), in the order a diff
/// shows them; empty when `artifact` has no groups.
pub(crate) fn by_group(values: &ValueDiff, artifact: &Artifact) -> Vec<GroupValues> {
    // (the group's figures, its sums, whether every tensor compared by value has sums)
    let mut groups: Vec<(GroupValues, Option<Sums>, bool)> = Vec::new();
    for t in &values.tensors {
        let Some(group) = artifact.tensor_group(&t.name) else {
            continue;
        };
        let at = match groups.iter().position(|g| g.0.group == group) {
            Some(at) => at,
            None => {
                groups.push((
                    GroupValues {
                        group,
                        compared: 0,
                        changed: 0,
                        identical: 0,
                        compared_by_bytes: 0,
                        rel_l2: None,
                        max_rel_l2: None,
                        infinite: false,
                    },
                    None,
                    true,
                ));
                groups.len() - 1
            }
        };
        let (g, sums, complete) = &mut groups[at];
        g.compared += 1;
        if t.changed {
            g.changed += 1;
        } else if t.bits_differ.is_none() {
            g.identical += 1;
        }
        if let Method::Bytes(_) = t.method {
            g.compared_by_bytes += 1;
            continue;
        }
        if t.changed {
            match t.rel_l2() {
                Some(r) => g.max_rel_l2 = Some(g.max_rel_l2.map_or(r, |m| m.max(r))),
                None => g.infinite = true,
            }
        }
        match t.stats.and_then(|s| s.sums) {
            Some(s) => match sums {
                Some(total) => total.merge(&s),
                None => *sums = Some(s),
            },
            // Identical by its bytes, not summed: its norm is unknown, so is the group's.
            None => *complete = false,
        }
    }
    let mut out: Vec<GroupValues> = groups
        .into_iter()
        .map(|(mut g, sums, complete)| {
            g.rel_l2 = sums
                .filter(|_| complete)
                .and_then(|s| ValueStats::from_sums(&s).rel_l2);
            g
        })
        .collect();
    out.sort_by_key(|g| crate::diff::GROUP_ORDER.iter().position(|o| *o == g.group));
    out
}

/// How a group is named to a reader: `model weights`, `optimizer state`, `scheduler state`,
/// `RNG state`, `other`.
pub(crate) fn label(group: &str) -> &'static str {
    match group {
        "model" => "model weights",
        "optimizer" => "optimizer state",
        "scheduler" => "scheduler state",
        "rng" => "RNG state",
        _ => "other",
    }
}
