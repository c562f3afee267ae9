//! The short forms of a diff: `--stat` (a few lines of counts, bytes and parameters) and
//! `--name-only` (the changed tensors' names), for `diff` and `git diff`.

use std::fmt::Write;

use super::text::{group_digits, human_bytes};
use crate::artifact::Artifact;
use crate::diff::{Change, StructuralDiff};
use crate::escape::shown;

/// Counts by kind of change, then the bytes and parameters of each side: four lines, each
/// starting with `indent`.
pub(crate) fn stat(diff: &StructuralDiff, old: &Artifact, new: &Artifact, indent: &str) -> String {
    let c = diff.counts();
    let (mut dtype, mut shape) = (0usize, 0usize);
    for t in &diff.tensors {
        if let Change::Changed(a, b) = &t.change {
            dtype += usize::from(a.dtype != b.dtype);
            shape += usize::from(a.shape != b.shape);
        }
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{indent}tensors: {} changed ({dtype} dtype, {shape} shape), {} added, {} removed",
        c.tensors_changed, c.tensors_added, c.tensors_removed
    );
    let _ = writeln!(
        out,
        "{indent}metadata: {} changed, {} added, {} removed",
        c.metadata_changed, c.metadata_added, c.metadata_removed
    );
    let (a, b) = (old.layout.file_size, new.layout.file_size);
    let _ = writeln!(
        out,
        "{indent}bytes: {} → {} ({})",
        human_bytes(a),
        human_bytes(b),
        signed(a, b, human_bytes)
    );
    let (a, b) = (old.parameter_counts().0, new.parameter_counts().0);
    let _ = writeln!(
        out,
        "{indent}parameters: {} → {} ({})",
        group_digits(a),
        group_digits(b),
        signed(a, b, group_digits)
    );
    out
}

/// `+1.5 KiB`, `−3`, `±0`: the change from `a` to `b` written by `text`.
fn signed(a: u64, b: u64, text: impl Fn(u64) -> String) -> String {
    match b.cmp(&a) {
        std::cmp::Ordering::Greater => format!("+{}", text(b - a)),
        std::cmp::Ordering::Less => format!("−{}", text(a - b)),
        std::cmp::Ordering::Equal => "±0".to_owned(),
    }
}

/// The names of the tensors added, removed or changed, one a line (shown escaped, so a line
/// is one name), each after `prefix`.
pub(crate) fn name_only(diff: &StructuralDiff, prefix: &str) -> String {
    let mut out = String::new();
    for t in &diff.tensors {
        let _ = writeln!(out, "{prefix}{}", shown(&t.name));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_carry_their_sign() {
        assert_eq!(signed(2, 5, |n| n.to_string()), "+3");
        assert_eq!(signed(5, 2, |n| n.to_string()), "−3");
        assert_eq!(signed(4, 4, |n| n.to_string()), "±0");
    }
}
