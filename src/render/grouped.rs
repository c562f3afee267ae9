//! The grouped view of a diff's tensors: changes that repeat read as one line
//! ("103 tensors: f32 → f16", "blk.0–27 attn_q.weight: q4_k → q6_k"), with the exceptions
//! named, so that a whole-model change reads in a few lines (`--all` lists each tensor).

use std::collections::{BTreeMap, BTreeSet};

use crate::artifact::{Artifact, TensorInfo};
use crate::diff::{Change, TensorChange};
use crate::escape::shown;

/// Fewer changed tensors than this are listed one by one: grouping would hide nothing.
const GROUP_FROM: usize = 8;
/// A kind of change that would need more lines than this is one line ("103 tensors: …").
const LINES_PER_KIND: usize = 3;
/// Lines of the grouped view at most; the rest is summed up in one line.
const MAX_LINES: usize = 16;
/// Names listed in one line's braces (`{attn_k, attn_v}.weight`) before "…".
const NAMES_LISTED: usize = 6;
/// Unchanged exceptions listed under a collapsed kind, as lines of their own.
const EXCEPTION_LINES: usize = 2;

/// One line of the grouped view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GroupLine {
    /// `+`, `-` or `~`.
    pub sign: char,
    /// What the line says after the sign.
    pub text: String,
    /// Indented lines under it (a collapsed kind's unchanged exceptions).
    pub notes: Vec<String>,
    tensors: usize,
    first: String,
    /// Sums up the lines left out (sorted after the others).
    summed: bool,
}

/// What a tensor change is, apart from its name: added, removed, or what of it changed.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Kind {
    sign: char,
    /// `f32 → f16`, `shape [4] → [8]`; empty for an added or removed tensor.
    text: String,
}

fn kind_of(change: &Change<TensorInfo>) -> Kind {
    match change {
        Change::Added(_) => Kind {
            sign: '+',
            text: String::new(),
        },
        Change::Removed(_) => Kind {
            sign: '-',
            text: String::new(),
        },
        Change::Changed(a, b) => Kind {
            sign: '~',
            text: change_text(a, b),
        },
    }
}

/// `q4_k → q6_k`, `shape [4] → [8]`, both joined by ", ", or the byte length alone.
fn change_text(a: &TensorInfo, b: &TensorInfo) -> String {
    let mut parts = Vec::new();
    if a.dtype != b.dtype {
        parts.push(format!("{} → {}", a.dtype, b.dtype));
    }
    if a.shape != b.shape {
        parts.push(format!("shape {} → {}", dims(&a.shape), dims(&b.shape)));
    }
    if parts.is_empty() {
        parts.push(format!("byte_length {} → {}", a.byte_length, b.byte_length));
    }
    parts.join(", ")
}

/// `[4096, 32000]`, as the text view writes a shape (`text` uses this module, so this one
/// does not reach back for its helper).
fn dims(shape: &[u64]) -> String {
    format!("{shape:?}")
}

/// Whether a dot-separated component is a block number, zero-padded (`blk.007`) or not.
fn is_block_number(part: &str) -> bool {
    !part.is_empty() && part.len() < 20 && part.bytes().all(|b| b.is_ascii_digit())
}

/// The width a block number is padded to (`007` → 3), 0 for one written without leading
/// zeros (`7`, `0`): `blk.00`…`blk.27` group as one run written `00–27`, apart from `blk.0`…
fn padded_width(part: &str) -> usize {
    if part.len() > 1 && part.starts_with('0') {
        part.len()
    } else {
        0
    }
}

/// The name with every block number blanked: names of one template differ only by numbers.
fn template(name: &str) -> String {
    let parts: Vec<&str> = name
        .split('.')
        .enumerate()
        .map(|(i, p)| if i > 0 && is_block_number(p) { "#" } else { p })
        .collect();
    parts.join(".")
}

/// A name split at its block number: the stem before it, the number, its digits as written,
/// and the rest after it.
type Split<'a> = (&'a str, u64, &'a str, &'a str);

/// The name split at its `component`th dot-separated part, when that is a block number
/// ("blk.12.attn_q.weight", 1 → ("blk", 12, "12", "attn_q.weight")).
fn split_at(name: &str, component: usize) -> Option<Split<'_>> {
    if component == 0 {
        return None;
    }
    let mut start = 0;
    for (i, part) in name.split('.').enumerate() {
        if i == component {
            if !is_block_number(part) {
                return None;
            }
            let rest = name.get(start + part.len()..).unwrap_or("");
            let stem = name.get(..start - 1)?;
            return Some((
                stem,
                part.parse().ok()?,
                part,
                rest.strip_prefix('.').unwrap_or(rest),
            ));
        }
        start += part.len() + 1;
    }
    None
}

/// For each template, the numbered component its names vary by most (the block: layer 3
/// of `model.layers.3.mlp`, optimizer state 10 of `optimizer_states.0.state.10.exp_avg`).
fn block_components<'a>(names: &[&'a str]) -> std::collections::HashMap<String, usize> {
    let mut seen: std::collections::HashMap<String, BTreeMap<usize, BTreeSet<&'a str>>> =
        std::collections::HashMap::new();
    for name in names {
        let by_component = seen.entry(template(name)).or_default();
        for (i, part) in name.split('.').enumerate() {
            if i > 0 && is_block_number(part) {
                by_component.entry(i).or_default().insert(part);
            }
        }
    }
    seen.into_iter()
        .filter_map(|(template, by_component)| {
            // The most distinct values; the first such component on a tie.
            let best = by_component
                .iter()
                .max_by(|a, b| a.1.len().cmp(&b.1.len()).then(b.0.cmp(a.0)))?;
            Some((template, *best.0))
        })
        .collect()
}

/// Names gathered into lines: the same role (`attn_q.weight`) in several blocks is one
/// line, and roles of the same blocks share it.
#[derive(Debug, Clone)]
struct RoleLine {
    what: String,
    tensors: usize,
    first: String,
}

/// The roles of one line and its first name.
type SharedLine<'a> = (Vec<&'a str>, &'a str);

fn role_lines<'a>(names: impl Iterator<Item = &'a str>) -> Vec<RoleLine> {
    // (stem, padding, role) → blocks; names without a block stand alone.
    let mut roles: BTreeMap<(&str, usize, &str), (BTreeSet<u64>, &str)> = BTreeMap::new();
    let names: Vec<&str> = names.collect();
    let components = block_components(&names);
    let splits: Vec<(&str, Option<Split<'_>>)> = names
        .iter()
        .map(|&name| {
            let split = components
                .get(&template(name))
                .and_then(|&component| split_at(name, component));
            (name, split)
        })
        .collect();
    // The widths each (stem, role) is zero-padded to: `blk.10` of `blk.00`…`blk.27` is one of
    // that run, as its width says, not a number of its own.
    let mut padded: BTreeSet<(&str, &str, usize)> = BTreeSet::new();
    for (_, split) in &splits {
        if let Some((stem, _, digits, rest)) = split
            && padded_width(digits) > 0
        {
            padded.insert((stem, rest, digits.len()));
        }
    }
    let mut lines = Vec::new();
    for (name, split) in splits {
        match split {
            Some((stem, index, digits, rest)) => {
                let width = if padded.contains(&(stem, rest, digits.len())) {
                    digits.len()
                } else {
                    0
                };
                let entry = roles
                    .entry((stem, width, rest))
                    .or_insert((BTreeSet::new(), name));
                entry.0.insert(index);
                entry.1 = entry.1.min(name);
            }
            None => lines.push(RoleLine {
                what: shown(name).into_owned(),
                tensors: 1,
                first: name.to_owned(),
            }),
        }
    }
    // Roles of one stem over the same blocks share a line.
    let mut shared: BTreeMap<(&str, usize, Vec<u64>), SharedLine<'_>> = BTreeMap::new();
    for ((stem, width, rest), (blocks, first)) in roles {
        let entry = shared
            .entry((stem, width, blocks.into_iter().collect()))
            .or_insert((Vec::new(), first));
        entry.0.push(rest);
        entry.1 = entry.1.min(first);
    }
    for ((stem, width, blocks), (rests, first)) in shared {
        let ranges = ranges_text(&blocks, width);
        let what = match rests_text(&rests) {
            r if r.is_empty() => format!("{}.{ranges}", shown(stem)),
            r => format!("{}.{ranges} {r}", shown(stem)),
        };
        lines.push(RoleLine {
            what,
            tensors: blocks.len() * rests.len(),
            first: first.to_owned(),
        });
    }
    lines
}

/// `attn_q.weight`, or `{attn_k, attn_v}.weight` for several roles sharing a suffix.
fn rests_text(rests: &[&str]) -> String {
    if let [one] = rests {
        return shown(one).into_owned();
    }
    let suffix = common_suffix(rests);
    let heads: Vec<String> = rests
        .iter()
        .take(NAMES_LISTED)
        .map(|r| shown(&r[..r.len() - suffix.len()]).into_owned())
        .collect();
    let more = if rests.len() > NAMES_LISTED {
        format!(", … {} more", rests.len() - NAMES_LISTED)
    } else {
        String::new()
    };
    format!("{{{}{more}}}{}", heads.join(", "), shown(suffix))
}

/// The longest suffix, starting at a '.', that every role ends with and none is only.
fn common_suffix<'a>(rests: &[&'a str]) -> &'a str {
    let Some(first) = rests.first() else {
        return "";
    };
    let mut best = "";
    for (i, _) in first.match_indices('.') {
        let suffix = &first[i..];
        if rests
            .iter()
            .all(|r| r.ends_with(suffix) && r.len() > suffix.len())
        {
            best = suffix;
            break;
        }
    }
    best
}

/// `0–27`; `0–79 (not 40–41)` for a few holes; `0–2, 4–9, 11–20` otherwise; each number
/// zero-padded to `width` as the names write it (`00–27`; 0 for no padding).
fn ranges_text(blocks: &[u64], width: usize) -> String {
    let runs = runs(blocks);
    let text = |&(a, b): &(u64, u64)| {
        if a == b {
            format!("{a:0width$}")
        } else {
            format!("{a:0width$}–{b:0width$}")
        }
    };
    let (Some(first), Some(last)) = (runs.first(), runs.last()) else {
        return String::new();
    };
    if runs.len() == 1 {
        return text(first);
    }
    let holes: Vec<(u64, u64)> = runs.windows(2).map(|w| (w[0].1 + 1, w[1].0 - 1)).collect();
    let covered = blocks.len() as u64;
    let span = last.1 - first.0 + 1;
    if holes.len() <= 2 && covered * 2 > span {
        let holes: Vec<String> = holes.iter().map(text).collect();
        return format!("{} (not {})", text(&(first.0, last.1)), holes.join(", "));
    }
    let listed: Vec<String> = runs.iter().take(4).map(text).collect();
    let more = if runs.len() > 4 { ", …" } else { "" };
    format!("{}{more}", listed.join(", "))
}

/// Sorted, distinct numbers as runs of consecutive ones.
fn runs(sorted: &[u64]) -> Vec<(u64, u64)> {
    let mut runs: Vec<(u64, u64)> = Vec::new();
    for &n in sorted {
        match runs.last_mut() {
            Some(run) if run.1 + 1 == n => run.1 = n,
            _ => runs.push((n, n)),
        }
    }
    runs
}

/// The grouped lines of `changes`, or None when listing each change reads as well (fewer
/// than [`GROUP_FROM`], or grouping would not halve the lines). `old` names the exceptions of a kind that covers a dtype
/// almost everywhere: the tensors of that dtype left as they were.
pub(crate) fn group(changes: &[&TensorChange], old: Option<&Artifact>) -> Option<Vec<GroupLine>> {
    if changes.len() < GROUP_FROM {
        return None;
    }
    let mut kinds: BTreeMap<Kind, Vec<&TensorChange>> = BTreeMap::new();
    for change in changes {
        kinds
            .entry(kind_of(&change.change))
            .or_default()
            .push(change);
    }
    let mut lines = Vec::new();
    for (kind, members) in &kinds {
        lines.extend(kind_lines(kind, members, old));
    }
    // Worth it only when it at least halves what a reader reads.
    let grouped: usize = lines.iter().map(|l| 1 + l.notes.len()).sum();
    let listed: usize = changes.iter().map(|t| listed_lines(&t.change)).sum();
    if grouped * 2 > listed {
        return None;
    }
    // The largest groups first; a line summing up the rest of a kind after every group.
    lines.sort_by(|a, b| (a.summed, b.tensors, &a.first).cmp(&(b.summed, a.tensors, &b.first)));
    if lines.len() > MAX_LINES {
        let rest = lines.split_off(MAX_LINES - 1);
        let tensors = rest.iter().map(|l| l.tensors).sum();
        lines.push(GroupLine {
            sign: ' ',
            text: format!("… {} more groups of {tensors} tensors", rest.len()),
            notes: Vec::new(),
            tensors,
            first: String::new(),
            summed: true,
        });
    }
    Some(lines)
}

/// Lines the ungrouped view takes for a change: one for an added or removed tensor, one more
/// per field of a changed one.
fn listed_lines(change: &Change<TensorInfo>) -> usize {
    match change {
        Change::Added(_) | Change::Removed(_) => 1,
        Change::Changed(a, b) => {
            1 + usize::from(a.dtype != b.dtype)
                + usize::from(a.shape != b.shape)
                + usize::from(a.byte_length != b.byte_length)
        }
    }
}

/// The lines of one kind of change: one per role and blocks. A change of dtype or shape that
/// would take more than [`LINES_PER_KIND`] is one line for the whole kind; added or removed
/// tensors keep their names (what a reader needs of them), cut after [`MAX_LINES`].
fn kind_lines(kind: &Kind, members: &[&TensorChange], old: Option<&Artifact>) -> Vec<GroupLine> {
    let mut roles = role_lines(members.iter().map(|t| t.name.as_str()));
    if kind.sign == '~' && roles.len() > LINES_PER_KIND {
        return vec![collapsed(kind, members, old)];
    }
    roles.sort_by(|a, b| a.first.cmp(&b.first));
    // At most MAX_LINES lines with the one that sums up the rest.
    let kept = if roles.len() > MAX_LINES {
        MAX_LINES - 1
    } else {
        roles.len()
    };
    let rest = roles.split_off(kept);
    let mut lines: Vec<GroupLine> = roles
        .into_iter()
        .map(|r| role_line(kind, r, members))
        .collect();
    if !rest.is_empty() {
        let tensors = rest.iter().map(|r| r.tensors).sum();
        lines.push(GroupLine {
            sign: kind.sign,
            text: format!("… {tensors} more"),
            notes: Vec::new(),
            tensors,
            first: String::new(),
            summed: true,
        });
    }
    lines
}

/// A change of dtype or shape as one line for all its tensors, with its exceptions.
fn collapsed(kind: &Kind, members: &[&TensorChange], old: Option<&Artifact>) -> GroupLine {
    let n = members.len();
    let (scope, notes) = old.map(|old| exceptions(members, old)).unwrap_or_default();
    GroupLine {
        sign: kind.sign,
        text: format!("{}: {}{scope}", crate::diff::plural(n, "tensor"), kind.text),
        notes,
        tensors: n,
        first: members.first().map(|t| t.name.clone()).unwrap_or_default(),
        summed: false,
    }
}

/// One role line; a line of one tensor reads as the ungrouped view reads it.
fn role_line(kind: &Kind, role: RoleLine, members: &[&TensorChange]) -> GroupLine {
    let count = if role.tensors > 1 {
        format!(" ({} tensors)", role.tensors)
    } else {
        String::new()
    };
    let text = if kind.text.is_empty() {
        let single = members
            .iter()
            .find(|t| t.name == role.first)
            .filter(|_| role.tensors == 1);
        match single.map(|t| &t.change) {
            Some(Change::Added(t) | Change::Removed(t)) => {
                format!("{} {} ({})", role.what, dims(&t.shape), t.dtype)
            }
            _ => format!("{}{count}", role.what),
        }
    } else {
        format!("{}: {}{count}", role.what, kind.text)
    };
    GroupLine {
        sign: kind.sign,
        text,
        notes: Vec::new(),
        tensors: role.tensors,
        first: role.first,
        summed: false,
    }
}

/// What a collapsed change of dtype leaves out: " (every tensor)" when it covers the model,
/// else the tensors of its old dtype left unchanged, grouped as the changes are.
fn exceptions(members: &[&TensorChange], old: &Artifact) -> (String, Vec<String>) {
    let Some(Change::Changed(first, _)) = members.first().map(|t| &t.change) else {
        return (String::new(), Vec::new());
    };
    if members.len() == old.tensors.len() {
        return (" (every tensor)".to_owned(), Vec::new());
    }
    let dtype = first.dtype;
    let names: BTreeSet<&str> = members.iter().map(|t| t.name.as_str()).collect();
    let unchanged: Vec<&str> = old
        .tensors
        .iter()
        .filter(|(name, t)| t.dtype == dtype && !names.contains(&**name))
        .map(|(name, _)| name)
        .collect();
    if unchanged.is_empty() {
        return (format!(" (every {dtype} tensor)"), Vec::new());
    }
    let mut roles = role_lines(unchanged.iter().copied());
    roles.sort_by(|a, b| {
        b.tensors
            .cmp(&a.tensors)
            .then_with(|| a.first.cmp(&b.first))
    });
    let mut notes: Vec<String> = roles
        .iter()
        .take(EXCEPTION_LINES)
        .map(|r| match r.tensors {
            1 => r.what.clone(),
            n => format!("{} ({n} tensors)", r.what),
        })
        .collect();
    if roles.len() > EXCEPTION_LINES {
        let rest: usize = roles[EXCEPTION_LINES..].iter().map(|r| r.tensors).sum();
        notes.push(format!("… {rest} more"));
    }
    let count = crate::diff::plural(unchanged.len(), &format!("{dtype} tensor"));
    (format!("; {count} unchanged:"), notes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_split_at_the_number_they_vary_by() {
        assert_eq!(
            split_at("blk.12.attn_q.weight", 1),
            Some(("blk", 12, "12", "attn_q.weight"))
        );
        assert_eq!(split_at("layers.7", 1), Some(("layers", 7, "7", "")));
        assert_eq!(
            split_at("blk.007.attn_q.weight", 1),
            Some(("blk", 7, "007", "attn_q.weight"))
        );
        assert_eq!(split_at("token_embd.weight", 1), None);
        let names = [
            "optimizer_states.0.state.1.exp_avg",
            "optimizer_states.0.state.2.exp_avg",
            "model.layers.0.experts.0.w1",
            "model.layers.1.experts.0.w1",
        ];
        let components = block_components(&names);
        assert_eq!(components[&template(names[0])], 3);
        assert_eq!(components[&template(names[2])], 2);
    }

    #[test]
    fn ranges_read_as_runs_with_their_holes() {
        assert_eq!(ranges_text(&[0, 1, 2, 3], 0), "0–3");
        assert_eq!(ranges_text(&[5], 0), "5");
        let most: Vec<u64> = (0..80).filter(|n| !(40..=41).contains(n)).collect();
        assert_eq!(ranges_text(&most, 0), "0–79 (not 40–41)");
        assert_eq!(ranges_text(&[0, 2, 4, 6, 8, 10], 0), "0, 2, 4, 6, …");
        assert_eq!(ranges_text(&[0, 1, 2, 27], 2), "00–02, 27");
        assert_eq!(ranges_text(&[7], 3), "007");
    }

    /// Zero-padded block numbers group as one run, shown as written; the same numbers
    /// written unpadded are another run.
    #[test]
    fn zero_padded_blocks_group_as_written() {
        let padded: Vec<String> = (0..28)
            .map(|i| format!("blk.{i:02}.attn_q.weight"))
            .collect();
        let lines = role_lines(padded.iter().map(String::as_str));
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert_eq!(lines[0].what, "blk.00–27 attn_q.weight");
        assert_eq!(lines[0].tensors, 28);
        let layers: Vec<String> = (0..12).map(|i| format!("layers.{i:03}")).collect();
        let lines = role_lines(layers.iter().map(String::as_str));
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert_eq!(lines[0].what, "layers.000–011");
        let mixed: Vec<String> = (0..4)
            .map(|i| format!("blk.{i}.ffn.weight"))
            .chain((0..4).map(|i| format!("blk.{i:02}.ffn.weight")))
            .collect();
        let mut whats: Vec<String> = role_lines(mixed.iter().map(String::as_str))
            .into_iter()
            .map(|l| l.what)
            .collect();
        whats.sort();
        assert_eq!(whats, ["blk.00–03 ffn.weight", "blk.0–3 ffn.weight"]);
    }

    #[test]
    fn shapes_read_as_the_text_view_writes_them() {
        let shape: crate::artifact::Shape = [4096, 32000].into_iter().collect();
        assert_eq!(dims(&shape), super::super::text::shape_text(&shape));
    }

    #[test]
    fn roles_share_a_suffix_in_braces() {
        assert_eq!(
            rests_text(&["attn_k.weight", "attn_v.weight"]),
            "{attn_k, attn_v}.weight"
        );
        assert_eq!(rests_text(&["a.weight", "b.bias"]), "{a.weight, b.bias}");
    }
}
