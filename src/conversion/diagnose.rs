//! Naming what went wrong with a pair whose error no rounding explains: the plausible mistakes
//! of a converter (its +1 missing, doubled or added where it adds none; a transposed matrix;
//! two heads or experts swapped; a tensor from another layer) are tried on the pair's values,
//! and the one that fits is named. Only suspect pairs are read again, whole, and only up to
//! [`LIMIT`] elements.

use super::compare;
use super::layout::{permutable, unpermuted_row};
use super::pairing::{PlannedPair, logical_shape};
use crate::values::{Side, ValuesError};

/// Pairs larger than this are not read whole to name their mistake.
const LIMIT: u64 = 1 << 24;

/// A mistake that explains a suspect pair.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Mistake {
    /// The converter's +1 (Gemma's norms) is not in the converted values.
    PlusOneMissing,
    /// The +1 was applied twice.
    PlusOneDoubled,
    /// 1 was added where the converter adds nothing.
    PlusOneAdded,
    /// The matrix is transposed.
    Transposed,
    /// The Q/K head permutation applied where the converter applies none.
    PermutedWhereNone,
    /// The Q/K head permutation applied twice.
    PermutedTwice,
    /// Two blocks of rows (heads of Q/K/V, or experts) hold each other's values.
    Swapped { what: &'static str, a: u64, b: u64 },
    /// The values are those of another layer's source tensors.
    OtherLayer { layer: u64, sources: Vec<String> },
}

/// What the named mistake leaves: the rel_l2 once it is undone.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Named {
    pub mistake: Mistake,
    pub fit: f64,
}

/// The number of blocks (layers) of the converted model and its Q / KV head counts.
pub(super) struct Context {
    pub blocks: u64,
    pub head_counts: Option<(u64, u64)>,
}

fn rel_l2(expected: &[f64], found: &[f64]) -> f64 {
    let (mut diff, mut norm) = (0.0, 0.0);
    for (e, f) in expected.iter().zip(found) {
        diff += (f - e) * (f - e);
        norm += e * e;
    }
    if norm == 0.0 {
        return if diff == 0.0 { 0.0 } else { f64::INFINITY };
    }
    (diff / norm).sqrt()
}

/// The mistake that explains `pair`'s error (rel_l2 `error`, bound `bound`), if one does.
pub(super) fn name(
    pair: &PlannedPair,
    error: f64,
    bound: f64,
    source: &Side<'_>,
    target: &Side<'_>,
    context: &Context,
) -> Result<Option<Named>, ValuesError> {
    let Some((base, found)) = compare::materialize(pair, &pair.rows, 0.0, source, target, LIMIT)?
    else {
        return Ok(None);
    };
    // Loose enough for the rounding of the converter's own arithmetic, far below the error.
    let tolerance = bound.max(1e-5).min(error / 8.0);
    let fits = |expected: &[f64]| {
        let r = rel_l2(expected, &found);
        (r <= tolerance).then_some(r)
    };
    let named = |mistake, fit| Ok(Some(Named { mistake, fit }));

    if let Some((mistake, fit)) = plus_one_mistake(pair, &base, &fits) {
        return named(mistake, fit);
    }
    let expected: Vec<f64> = base.iter().map(|v| v + pair.plus).collect();
    let shape = target
        .artifact
        .tensors
        .get(&pair.target)
        .map(|t| logical_shape(target.artifact, t))
        .unwrap_or_default();

    if let [rows, cols] = shape[..]
        && rows == cols
        && rows > 1
    {
        let n = rows as usize;
        let transposed: Vec<f64> = (0..n * n).map(|i| expected[(i % n) * n + i / n]).collect();
        if let Some(fit) = fits(&transposed) {
            return named(Mistake::Transposed, fit);
        }
    }

    if let Some(("heads", heads)) = row_blocks(&pair.target, &shape, context)
        && let Some(permuted) = permuted(&expected, shape.first().copied().unwrap_or(0), heads)
        && let Some(fit) = fits(&permuted)
    {
        let mistake = if pair.heads.is_some() {
            Mistake::PermutedTwice
        } else {
            Mistake::PermutedWhereNone
        };
        return named(mistake, fit);
    }

    if let Some((what, blocks)) = row_blocks(&pair.target, &shape, context)
        && let Some((a, b, fit)) = swapped(&expected, &found, blocks, tolerance)
    {
        return named(Mistake::Swapped { what, a, b }, fit);
    }

    if let Some(layer) = block_of(&pair.target)
        && let Some((mistake, fit)) = other_layer(pair, layer, source, target, context, &fits)?
    {
        return named(mistake, fit);
    }
    Ok(None)
}

/// The converter's +1 on norm weights missing, doubled or added where none belongs.
fn plus_one_mistake(
    pair: &PlannedPair,
    base: &[f64],
    fits: &impl Fn(&[f64]) -> Option<f64>,
) -> Option<(Mistake, f64)> {
    let planned_one = pair.plus == 1.0;
    [
        (0.0, Mistake::PlusOneMissing),
        (2.0, Mistake::PlusOneDoubled),
        (1.0, Mistake::PlusOneAdded),
    ]
    .into_iter()
    .filter(|(_, mistake)| match mistake {
        Mistake::PlusOneAdded => !planned_one,
        _ => planned_one,
    })
    .find_map(|(plus, mistake)| {
        let shifted: Vec<f64> = base.iter().map(|v| v + plus).collect();
        fits(&shifted).map(|fit| (mistake, fit))
    })
}

/// The same tensors of another block (layer) than `layer`, when their values fit: the first
/// 256 other blocks are tried.
fn other_layer(
    pair: &PlannedPair,
    layer: u64,
    source: &Side<'_>,
    target: &Side<'_>,
    context: &Context,
    fits: &impl Fn(&[f64]) -> Option<f64>,
) -> Result<Option<(Mistake, f64)>, ValuesError> {
    for other in (0..context.blocks).filter(|&b| b != layer).take(256) {
        let Some(sources) = pair
            .sources
            .iter()
            .map(|s| in_layer(s, layer, other))
            .collect::<Option<Vec<String>>>()
        else {
            continue;
        };
        if !sources
            .iter()
            .all(|s| source.artifact.tensors.get(s).is_some())
        {
            continue;
        }
        let moved = PlannedPair {
            sources: sources.clone(),
            ..pair.clone()
        };
        let Some((elsewhere, _)) =
            compare::materialize(&moved, &pair.rows, pair.plus, source, target, LIMIT)?
        else {
            continue;
        };
        if let Some(fit) = fits(&elsewhere) {
            let mistake = Mistake::OtherLayer {
                layer: other,
                sources,
            };
            return Ok(Some((mistake, fit)));
        }
    }
    Ok(None)
}

/// How a tensor's elements fall into heads or experts, when they do: (what, block count).
fn row_blocks(target: &str, shape: &[u64], context: &Context) -> Option<(&'static str, u64)> {
    if target.contains("_exps.") && shape.len() == 3 {
        return Some(("experts", shape[0]));
    }
    let (q, kv) = context.head_counts?;
    let leaf = target.split('.').rev().nth(1)?;
    match leaf {
        "attn_q" => Some(("heads", q)),
        "attn_k" | "attn_v" => Some(("heads", kv)),
        _ => None,
    }
}

/// `values` (rows of a Q or K tensor) with the converter's Q/K head permutation applied.
fn permuted(values: &[f64], rows: u64, heads: u64) -> Option<Vec<f64>> {
    if rows == 0 || !permutable(rows, heads) || !(values.len() as u64).is_multiple_of(rows) {
        return None;
    }
    let cols = values.len() / rows as usize;
    let mut out = Vec::with_capacity(values.len());
    for row in 0..rows {
        let from = unpermuted_row(row, rows, heads) as usize;
        out.extend_from_slice(&values[from * cols..(from + 1) * cols]);
    }
    Some(out)
}

/// The two blocks that hold each other's values, when exactly two differ and swapping them
/// fits.
fn swapped(
    expected: &[f64],
    found: &[f64],
    blocks: u64,
    tolerance: f64,
) -> Option<(u64, u64, f64)> {
    if blocks < 2 || !(expected.len() as u64).is_multiple_of(blocks) {
        return None;
    }
    let size = expected.len() / blocks as usize;
    let block = |v: &[f64], i: usize| v[i * size..(i + 1) * size].to_vec();
    let differ: Vec<usize> = (0..blocks as usize)
        .filter(|&i| rel_l2(&block(expected, i), &block(found, i)) > tolerance)
        .collect();
    let [a, b] = differ[..] else {
        return None;
    };
    let mut exchanged = expected.to_vec();
    exchanged[a * size..(a + 1) * size].copy_from_slice(&block(expected, b));
    exchanged[b * size..(b + 1) * size].copy_from_slice(&block(expected, a));
    let fit = rel_l2(&exchanged, found);
    (fit <= tolerance).then_some((a as u64, b as u64, fit))
}

/// The block number in a GGUF name ("blk.3.attn_q.weight" → 3).
fn block_of(name: &str) -> Option<u64> {
    let mut parts = name.split('.');
    (parts.next()? == "blk").then_some(())?;
    parts.next()?.parse().ok()
}

/// A source name with its layer number `from` replaced by `to`
/// ("model.layers.1.mlp.up_proj.weight" → "model.layers.0.mlp.up_proj.weight").
fn in_layer(name: &str, from: u64, to: u64) -> Option<String> {
    let from = from.to_string();
    let mut parts: Vec<&str> = name.split('.').collect();
    let at = parts.iter().position(|p| *p == from)?;
    let to = to.to_string();
    parts[at] = &to;
    Some(parts.join("."))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_swapped_blocks_are_found() {
        let expected: Vec<f64> = (0..12).map(f64::from).collect();
        let mut found = expected.clone();
        found[0..3].copy_from_slice(&expected[6..9]);
        found[6..9].copy_from_slice(&expected[0..3]);
        let (a, b, fit) = swapped(&expected, &found, 4, 1e-6).unwrap();
        assert_eq!((a, b, fit), (0, 2, 0.0));
        found[11] += 1.0;
        assert_eq!(swapped(&expected, &found, 4, 1e-6), None);
    }

    /// numpy: w.reshape(heads, 2, rows // heads // 2, cols).swapaxes(1, 2).reshape(w.shape)
    #[test]
    fn the_permutation_is_applied_as_the_converter_applies_it() {
        let values: Vec<f64> = (0..8).map(f64::from).collect();
        // 8 rows of one column, 2 heads: [0 1 2 3 | 4 5 6 7] → [0 2 1 3 | 4 6 5 7]
        assert_eq!(
            permuted(&values, 8, 2).unwrap(),
            [0.0, 2.0, 1.0, 3.0, 4.0, 6.0, 5.0, 7.0]
        );
        assert_eq!(permuted(&values, 6, 2), None);
    }

    #[test]
    fn layer_numbers_move() {
        assert_eq!(
            in_layer("model.layers.1.mlp.up_proj.weight", 1, 0).as_deref(),
            Some("model.layers.0.mlp.up_proj.weight")
        );
        assert_eq!(in_layer("lm_head.weight", 1, 0), None);
        assert_eq!(block_of("blk.12.attn_q.weight"), Some(12));
        assert_eq!(block_of("output.weight"), None);
    }
}
