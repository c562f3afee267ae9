//! Whether a violation found on the head side of a change was already at its base: what `ci`
//! fails on by default (see docs/policy.md, "What each command judges").
//!
//! Both sides are judged by the same (head) policy, under the head path, so that the two
//! lists compare rule by rule. A head violation is *unchanged* when the base side (the file at
//! the same path, or the rename's source) has the same violation: same rule, same thing in the
//! file (dtype, metadata key), same expectation and same finding. It is *worse* when the base
//! had a violation of that rule about that thing with another finding (more tensors of a denied
//! dtype, another hash, a larger size). Anything else is *new*.

use serde::Serialize;

use super::check::Violation;

/// A head violation against the base.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Baseline {
    New,
    Worse,
    Unchanged,
}

impl Baseline {
    /// SARIF's `baselineState`: `updated` is its word for a result that is present at the base
    /// but changed.
    pub(crate) fn sarif_state(self) -> &'static str {
        match self {
            Baseline::New => "new",
            Baseline::Worse => "updated",
            Baseline::Unchanged => "unchanged",
        }
    }

    /// Whether the change brought it (a new or a worse violation).
    pub(crate) fn brought(self) -> bool {
        self != Baseline::Unchanged
    }
}

/// A head violation's standing, and for a worse one what the base found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Standing {
    pub baseline: Baseline,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_found: Option<String>,
}

/// The standing of `head` against the violations of the same subject at the base.
pub(crate) fn classify(head: &Violation, base: &[Violation]) -> Standing {
    let same_subject = |b: &&Violation| b.rule == head.rule && b.detail.key == head.detail.key;
    let mut earlier = base.iter().filter(same_subject).peekable();
    if earlier.peek().is_none() {
        return Standing {
            baseline: Baseline::New,
            base_found: None,
        };
    }
    let mut first = None;
    for b in earlier {
        if b.expected == head.expected && b.found == head.found {
            return Standing {
                baseline: Baseline::Unchanged,
                base_found: None,
            };
        }
        first.get_or_insert_with(|| b.found.clone());
    }
    Standing {
        baseline: Baseline::Worse,
        base_found: first,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(rule: &'static str, key: Option<&str>, found: &str) -> Violation {
        Violation {
            path: "m.gguf".into(),
            rule,
            expected: "only f16".into(),
            found: found.into(),
            policy_rule: 1,
            policy_line: 2,
            detail: super::super::check::Detail {
                key: key.map(str::to_owned),
                ..Default::default()
            },
            explanation: None,
        }
    }

    #[test]
    fn same_finding_is_unchanged_another_is_worse_another_rule_is_new() {
        let base = [v("allowed_dtypes", Some("q4_k"), "q4_k in 2 tensors")];
        let same = v("allowed_dtypes", Some("q4_k"), "q4_k in 2 tensors");
        assert_eq!(classify(&same, &base).baseline, Baseline::Unchanged);
        let more = v("allowed_dtypes", Some("q4_k"), "q4_k in 3 tensors");
        let standing = classify(&more, &base);
        assert_eq!(standing.baseline, Baseline::Worse);
        assert_eq!(standing.base_found.as_deref(), Some("q4_k in 2 tensors"));
        let other_dtype = v("allowed_dtypes", Some("q5_k"), "q5_k in 1 tensor");
        assert_eq!(classify(&other_dtype, &base).baseline, Baseline::New);
        assert_eq!(classify(&same, &[]).baseline, Baseline::New);
    }
}
