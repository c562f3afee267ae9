//! A training checkpoint's value diff summed up group by group (model weights apart from
//! optimizer, scheduler, RNG and other state, docs/pytorch.md): tensors compared, changed and
//! identical, and the relative L2 change of each group's tensors taken together.

use super::compare::Sums;

/// The value changes of one group ([`super::ValueDiff::by_group`]).
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

impl GroupValues {
    pub(super) fn new(group: &'static str) -> GroupValues {
        GroupValues {
            group,
            compared: 0,
            changed: 0,
            identical: 0,
            compared_by_bytes: 0,
            rel_l2: None,
            max_rel_l2: None,
            infinite: false,
        }
    }
}

/// A group's sums while its tensors are added.
pub(super) enum GroupSums {
    /// No tensor compared by value yet.
    Empty,
    Sum(Sums),
    /// A tensor compared by value has no sums (identical by its bytes, not summed): its norm,
    /// and so the group's, is unknown.
    Unknown,
}

impl GroupSums {
    pub(super) fn add(&mut self, sums: Option<&Sums>) {
        *self = match (std::mem::replace(self, GroupSums::Unknown), sums) {
            (GroupSums::Empty, Some(s)) => GroupSums::Sum(*s),
            (GroupSums::Sum(mut total), Some(s)) => {
                total.merge(s);
                GroupSums::Sum(total)
            }
            _ => GroupSums::Unknown,
        };
    }

    /// The sums of every tensor added; None when unknown or none was added.
    pub(super) fn total(&self) -> Option<&Sums> {
        match self {
            GroupSums::Sum(s) => Some(s),
            GroupSums::Empty | GroupSums::Unknown => None,
        }
    }
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
