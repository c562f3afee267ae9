//! A value diff read as a relation: identical, a cast or re-quantization within its dtypes'
//! bands, a fine-tune, or unrelated values.

use super::relation::{Band, Cast, FineTune, Identical, LayerMove, Relation, Unrelated};
use super::thresholds::{FINETUNE_MIN_RELATED, RELATED_COSINE, VOTING_MIN_ELEMENTS};
use crate::artifact::Artifact;
use crate::values::{Method, Sums, TensorValues, ValueDiff, ValueStats, layer_of};

/// The relation a value diff shows, with its confidence. `parent` and `model` give the
/// tensors' shapes (a conversion's diff is named by the converted model's tensors).
pub(super) fn classify(
    diff: &ValueDiff,
    parent: &Artifact,
    model: &Artifact,
    across_formats: bool,
) -> (Relation, f64) {
    let changed: Vec<&TensorValues> = diff.tensors.iter().filter(|t| t.changed).collect();
    if changed.is_empty() && !across_formats {
        return (
            Relation::Identical(Identical {
                files_equal: false,
                tensors: diff.tensors.len(),
                metadata_changed: 0,
            }),
            1.0,
        );
    }
    if let Some(found) = cast(diff) {
        return found;
    }
    let dims = |name: &str| {
        model
            .tensors
            .get(name)
            .or_else(|| parent.tensors.get(name))
            .map_or(0, |t| t.shape.len())
    };
    let vote = vote(&changed, dims);
    if vote.share < FINETUNE_MIN_RELATED {
        return (
            Relation::Unrelated(Unrelated::Values {
                related_share: vote.share,
                median_cosine: vote.median_cosine,
                voting_tensors: vote.voting,
            }),
            1.0 - vote.share,
        );
    }
    let tune = fine_tune(diff, &vote, across_formats);
    (Relation::FineTune(tune), vote.share)
}

/// Whether every dtype change stays within its band and every other tensor kept its values:
/// a cast (floats) or a re-quantization (a block-quantized dtype on either side).
fn cast(diff: &ValueDiff) -> Option<(Relation, f64)> {
    let mut bands: Vec<Band> = Vec::new();
    let mut sums: Vec<(&str, &str, Sums)> = Vec::new();
    let mut unchanged = 0;
    let mut worst_ratio: f64 = 0.0;
    for t in &diff.tensors {
        if !t.dtype_changed() {
            if t.changed {
                return None;
            }
            unchanged += 1;
            continue;
        }
        let rel = t.rel_l2()?;
        let bound = crate::conversion::error_bound(&[t.old_dtype], t.new_dtype);
        // A tensor of a few elements (a bias trained up from zero, whose values fall among
        // the dtype's subnormals) may lose more than the band alone: it counts in its band's
        // figure over all its tensors, not on its own.
        let small = t.elements < VOTING_MIN_ELEMENTS;
        if rel > bound && !small {
            return None;
        }
        if !small {
            worst_ratio = worst_ratio.max(if bound > 0.0 { rel / bound } else { 0.0 });
        }
        let at = match sums
            .iter()
            .position(|(from, to, _)| *from == t.old_dtype && *to == t.new_dtype)
        {
            Some(at) => at,
            None => {
                sums.push((t.old_dtype, t.new_dtype, Sums::default()));
                bands.push(Band {
                    from: t.old_dtype,
                    to: t.new_dtype,
                    bound,
                    tensors: 0,
                    worst_rel_l2: 0.0,
                    worst_tensor: String::new(),
                });
                bands.len() - 1
            }
        };
        if let Some(s) = &t.sums {
            sums[at].2.merge(s);
        }
        let band = &mut bands[at];
        band.tensors += 1;
        if !small && (rel > band.worst_rel_l2 || band.worst_tensor.is_empty()) {
            band.worst_rel_l2 = rel;
            band.worst_tensor.clone_from(&t.name);
        }
    }
    for (band, (_, _, total)) in bands.iter().zip(&sums) {
        let rel = ValueStats::from_sums(total).rel_l2?;
        if rel > band.bound {
            return None;
        }
    }
    if bands.is_empty() {
        return None;
    }
    bands.sort_by(|a, b| a.from.cmp(b.from).then(a.to.cmp(b.to)));
    let quantized = bands
        .iter()
        .any(|b| is_block_quantized(b.from) || is_block_quantized(b.to));
    let cast = Cast { bands, unchanged };
    // A value near its band's edge could as well be a small change on top of the rounding.
    let confidence = 1.0 - worst_ratio / 2.0;
    Some(if quantized {
        (Relation::Requantized(cast), confidence)
    } else {
        (Relation::Cast(cast), confidence)
    })
}

/// ggml's block types (and the plain integer codes they stand for in a converter's output).
pub(super) fn is_block_quantized(dtype: &str) -> bool {
    crate::dtype::by_name(dtype).is_some_and(|d| d.block_size > 1)
}

/// How related the changed values are, by the voting tensors' cosines.
pub(super) struct Vote {
    /// The share of the voting tensors' changed elements whose cosine is related.
    pub share: f64,
    pub median_cosine: Option<f64>,
    pub min_cosine: Option<f64>,
    pub voting: usize,
    /// Voting tensors whose cosine is not related.
    pub unrelated: Vec<String>,
}

/// The vote of the changed tensors compared by value that have at least two dimensions and
/// [`VOTING_MIN_ELEMENTS`] (all changed ones compared by value when none has).
pub(super) fn vote(changed: &[&TensorValues], dims: impl Fn(&str) -> usize) -> Vote {
    let by_value: Vec<&&TensorValues> = changed
        .iter()
        .filter(|t| t.method == Method::Values && t.stats.is_some())
        .collect();
    let large: Vec<&&TensorValues> = by_value
        .iter()
        .copied()
        .filter(|t| t.elements >= VOTING_MIN_ELEMENTS && dims(&t.name) >= 2)
        .collect();
    let voters = if large.is_empty() { by_value } else { large };
    let cosine = |t: &TensorValues| t.stats.and_then(|s| s.cosine);
    let (mut related, mut total) = (0u64, 0u64);
    let mut cosines: Vec<f64> = Vec::new();
    let mut unrelated = Vec::new();
    for t in &voters {
        total += t.elements;
        match cosine(t) {
            Some(c) if c >= RELATED_COSINE => related += t.elements,
            _ => unrelated.push(t.name.clone()),
        }
        cosines.push(cosine(t).unwrap_or(0.0));
    }
    cosines.sort_by(f64::total_cmp);
    Vote {
        share: if total == 0 {
            1.0
        } else {
            related as f64 / total as f64
        },
        median_cosine: cosines.get(cosines.len() / 2).copied(),
        min_cosine: cosines.first().copied(),
        voting: voters.len(),
        unrelated,
    }
}

/// A fine-tune's evidence: which tensors and layers moved, by how much, which are frozen.
fn fine_tune(diff: &ValueDiff, vote: &Vote, across_formats: bool) -> FineTune {
    let mut layers: Vec<(String, usize, usize, Option<Sums>, bool)> = Vec::new();
    let mut positions: std::collections::HashMap<String, usize> = Default::default();
    let mut outside = Vec::new();
    let mut total: Option<Sums> = None;
    let mut infinite = false;
    for t in &diff.tensors {
        let moved = t.changed;
        if moved {
            match t.sums {
                Some(s) => total.get_or_insert_with(Sums::default).merge(&s),
                None => infinite |= t.rel_l2().is_none() && t.method == Method::Values,
            }
        }
        let Some((stem, index)) = layer_of(&t.name) else {
            if moved {
                outside.push(t.name.clone());
            }
            continue;
        };
        let label = format!("{stem}.{index}");
        let at = *positions.entry(label.clone()).or_insert_with(|| {
            layers.push((label, 0, 0, None, false));
            layers.len() - 1
        });
        let layer = &mut layers[at];
        layer.1 += 1;
        if moved {
            layer.2 += 1;
            match t.sums {
                Some(s) => layer.3.get_or_insert_with(Sums::default).merge(&s),
                None => layer.4 |= t.rel_l2().is_none(),
            }
        }
    }
    let depth =
        |label: &str| layer_of(&format!("{label}.x")).map(|(stem, index)| (stem.to_owned(), index));
    layers.sort_by_key(|l| depth(&l.0));
    let rel = |sums: Option<Sums>, infinite: bool| {
        if infinite {
            return None;
        }
        sums.map_or(Some(0.0), |s| ValueStats::from_sums(&s).rel_l2)
    };
    let moved = diff.changed_count();
    FineTune {
        tensors: diff.tensors.len(),
        moved,
        frozen: diff.tensors.len() - moved,
        rel_l2: rel(total, infinite),
        related_share: vote.share,
        min_cosine: vote.min_cosine,
        frozen_layers: layers
            .iter()
            .filter(|l| l.2 == 0)
            .map(|l| l.0.clone())
            .collect(),
        layers: layers
            .into_iter()
            .filter(|l| l.2 > 0)
            .map(|(layer, tensors, moved, sums, infinite)| LayerMove {
                layer,
                tensors,
                moved,
                rel_l2: rel(sums, infinite),
            })
            .collect(),
        moved_outside_layers: outside,
        reinitialised: vote.unrelated.clone(),
        dtype_changed: diff.tensors.iter().filter(|t| t.dtype_changed()).count(),
        across_formats,
    }
}
