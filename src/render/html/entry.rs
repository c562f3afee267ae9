//! One row of an HTML report (a tensor of a value diff, or a converted pair) and what became of
//! it: the table and the heatmap both read it.

use std::fmt::Write;

use crate::render::values::{cosine_text, figure};
use crate::values::ValueStats;

/// What became of one tensor (or converted pair).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum State {
    Unchanged,
    Changed,
    /// A converted pair with more error than its dtype explains.
    Suspect,
    /// Compared byte for byte (a dtype without a decoder): changed, no figures.
    BytesChanged,
    BytesSame,
    /// On both sides (or in the converted model) but not compared, and why.
    NotCompared(String),
}

/// One row of the report: a tensor of a value diff, or a pair of a conversion.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    /// The tensor's name as the file gives it: its layer and kind are found from it; never
    /// written into the page as is.
    pub(super) key: String,
    /// The name as shown (escaped as every name is), with a conversion's sources.
    pub(super) label: String,
    /// dtype, `old → new`, or a conversion's transform and dtypes.
    pub(super) detail: String,
    pub(super) elements: u64,
    pub(super) state: State,
    pub(super) stats: Option<ValueStats>,
    pub(super) note: Option<String>,
}

impl Entry {
    pub(super) fn rel_l2(&self) -> Option<f64> {
        self.stats.and_then(|s| s.rel_l2)
    }

    pub(super) fn changed(&self) -> bool {
        matches!(
            self.state,
            State::Changed | State::Suspect | State::BytesChanged
        )
    }

    /// Order of concern inside a heatmap cell: infinite, then larger rel_l2, then bytes
    /// changed, identical, not compared.
    pub(super) fn severity(&self) -> f64 {
        match self.state {
            State::NotCompared(_) => 0.0,
            State::Unchanged | State::BytesSame => 1.0,
            State::BytesChanged => 2.0,
            State::Changed | State::Suspect => match self.rel_l2() {
                None => 5.0,
                Some(r) => 3.0 + r / (1.0 + r),
            },
        }
    }

    /// The tensor's figures in plain text (a cell's title; the page escapes it).
    pub(super) fn figures_text(&self) -> String {
        let mut out = format!("{}\n{}", self.label, self.detail);
        match (&self.state, self.stats) {
            (State::NotCompared(why), _) => {
                let _ = write!(out, "\nnot compared: {why}");
            }
            (State::BytesChanged, _) => out.push_str("\nbytes changed (not decoded: no figures)"),
            (State::BytesSame, _) => out.push_str("\nbytes identical"),
            (State::Unchanged, _) => out.push_str("\nidentical"),
            (_, Some(s)) => {
                let _ = write!(
                    out,
                    "\nrel_l2 {} · max |Δ| {} · cosine {}\nchanged elements {}/{}",
                    s.rel_l2.map_or("inf".into(), figure),
                    figure(s.max_abs_diff),
                    s.cosine.map_or("-".into(), cosine_text),
                    group(s.changed_elements),
                    group(self.elements)
                );
            }
            (_, None) => {}
        }
        if let Some(note) = &self.note {
            let _ = write!(out, "\n{note}");
        }
        out
    }
}

pub(super) fn group(n: u64) -> String {
    crate::render::text::group_digits(n)
}
