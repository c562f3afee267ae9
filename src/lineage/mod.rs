//! Lineage: how a model was made from a candidate parent (or several), decided from what the
//! rest of the core measures — the files' bytes, the headers ([`headers`], [`adapter`]), the
//! value diff ([`crate::values`], streamed with bounded memory), the conversion pairing
//! ([`crate::conversion`]) — and, for merges, a least-squares fit on a sample of values
//! ([`merge`]). The headers are read first; values only when the headers cannot decide.
//! The thresholds are documented constants ([`thresholds`], docs/lineage.md).

mod adapter;
mod candidate;
mod classify;
mod error;
mod headers;
mod merge;
mod relation;
mod thresholds;

pub(crate) use candidate::Candidate;
pub(crate) use error::LineageError;
pub(crate) use relation::{
    ConversionFit, DecidedBy, FineTune, Identical, Relation, Resized, RowChange, Undecided,
    Unrelated,
};
pub(crate) use thresholds::{
    CONFIDENCE_HIGH, CONFIDENCE_MEDIUM, FINETUNE_MIN_RELATED, MERGE_MIN_WEIGHT,
};

/// Every name a policy's `relation` key may give: the relations, and the Hub's
/// `base_model_relation` spellings (`quantized` matches a cast, a re-quantization and a
/// conversion that changed dtypes).
pub(crate) const RELATION_NAMES: [&str; 13] = [
    "identical",
    "cast",
    "re-quantized",
    "conversion",
    "fine-tune",
    "merge",
    "adapter",
    "extended",
    "pruned",
    "unrelated",
    "undecided",
    "quantized",
    "finetune",
];

/// Whether `judged` is one of `allowed` (relation names or Hub spellings).
pub(crate) fn allows(allowed: &[String], judged: &Judged) -> bool {
    allowed.iter().any(|a| {
        a == judged.relation.name() || Some(a.as_str()) == judged.relation.base_model_relation()
    })
}

/// One relation with its confidence (0 to 1) and what decided it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Judged {
    pub relation: Relation,
    pub confidence: f64,
    pub decided_by: DecidedBy,
}

impl Judged {
    fn new(relation: Relation, confidence: f64, decided_by: DecidedBy) -> Judged {
        Judged {
            relation,
            confidence: confidence.clamp(0.0, 1.0),
            decided_by,
        }
    }

    /// The confidence as a word: high, medium or low (see the thresholds).
    pub(crate) fn level(&self) -> &'static str {
        if self.confidence >= CONFIDENCE_HIGH {
            "high"
        } else if self.confidence >= CONFIDENCE_MEDIUM {
            "medium"
        } else {
            "low"
        }
    }
}

/// `relate`'s answer: the relation to the parent it chose (or the merge of several), and how
/// the model relates to each candidate alone.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Verdict {
    pub judged: Judged,
    /// The candidate chosen as the parent (None for a merge, or when none is related).
    pub parent: Option<usize>,
    /// Each candidate alone, in the order given.
    pub candidates: Vec<Judged>,
}

/// How `model` was made from `parents`: each candidate judged alone, then a merge of all of
/// them tried when there are two or more, and the closest relation chosen.
pub(crate) fn relate(
    model: &Candidate<'_>,
    parents: &[Candidate<'_>],
) -> Result<Verdict, LineageError> {
    let mut candidates = Vec::with_capacity(parents.len());
    for parent in parents {
        candidates.push(judge(model, parent)?);
    }
    let best = candidates
        .iter()
        .enumerate()
        .max_by(|(i, a), (j, b)| {
            a.relation
                .rank()
                .cmp(&b.relation.rank())
                .then(a.confidence.total_cmp(&b.confidence))
                .then(closeness(b).total_cmp(&closeness(a)))
                .then(j.cmp(i))
        })
        .map(|(i, _)| i);
    let exact = best.is_some_and(|b| {
        matches!(
            candidates[b].relation,
            Relation::Identical(_) | Relation::Adapter(_)
        )
    });
    if !exact && let Some(merge) = merge::find(model, parents)? {
        let gain = merge.residual / (thresholds::MERGE_MAX_GAIN * merge.best_single_rel_l2);
        return Ok(Verdict {
            judged: Judged::new(Relation::Merge(merge), 1.0 - gain, DecidedBy::Sample),
            parent: None,
            candidates,
        });
    }
    let Some(best) = best else {
        return Err(LineageError::NoCandidate);
    };
    Ok(Verdict {
        judged: candidates[best].clone(),
        parent: candidates[best].relation.is_derived().then_some(best),
        candidates,
    })
}

/// How far a related candidate is (lower is closer): a fine-tune's rel_l2.
fn closeness(judged: &Judged) -> f64 {
    match &judged.relation {
        Relation::FineTune(f) => f.rel_l2.unwrap_or(f64::INFINITY),
        _ => 0.0,
    }
}

/// How `model` relates to one candidate.
fn judge(model: &Candidate<'_>, parent: &Candidate<'_>) -> Result<Judged, LineageError> {
    if let Some(judged) = identical_files(model, parent) {
        return Ok(judged);
    }
    if adapter::is_adapter(model.artifact) {
        return Ok(
            match adapter::fit(model.artifact, parent.artifact, model.dir) {
                Ok(found) => {
                    let share = found.fitted as f64 / found.pairs.max(1) as f64;
                    Judged::new(Relation::Adapter(found), share, DecidedBy::Headers)
                }
                Err(why) => Judged::new(Relation::Unrelated(why), 1.0, DecidedBy::Headers),
            },
        );
    }
    let pairing = crate::conversion::Pairing::choose(None, parent.artifact, model.artifact)?;
    if pairing.is_conversion() {
        return conversion(model, parent);
    }
    match headers::compare(model.artifact, parent.artifact) {
        headers::Structure::Unrelated(why) => Ok(Judged::new(
            Relation::Unrelated(why),
            1.0,
            DecidedBy::Headers,
        )),
        headers::Structure::Same => by_values(model, parent),
        headers::Structure::Resized {
            rows,
            layers_added,
            layers_removed,
        } => resized(model, parent, rows, layers_added, layers_removed),
    }
}

/// Identical files: the same structural hash, and every file byte for byte the same.
fn identical_files(model: &Candidate<'_>, parent: &Candidate<'_>) -> Option<Judged> {
    let (Some(a), Some(b)) = (model.files, parent.files) else {
        return None;
    };
    let hash = crate::identity::structural_hash;
    if a.len() != b.len() || hash(model.artifact) != hash(parent.artifact) {
        return None;
    }
    let same = a.iter().zip(b).all(|(x, y)| {
        x.bytes().len() == y.bytes().len()
            && x.bytes()
                .chunks(4 << 20)
                .zip(y.bytes().chunks(4 << 20))
                .all(|(p, q)| {
                    let equal = p == q;
                    x.release(p);
                    y.release(q);
                    equal
                })
    });
    same.then(|| {
        Judged::new(
            Relation::Identical(Identical {
                files_equal: true,
                tensors: model.artifact.tensors.len(),
                metadata_changed: 0,
            }),
            1.0,
            DecidedBy::Bytes,
        )
    })
}

fn undecided(why: &str) -> Judged {
    Judged::new(
        Relation::Undecided(Undecided {
            why: why.to_owned(),
        }),
        0.0,
        DecidedBy::Headers,
    )
}

const NO_BYTES: &str = "the headers match; the weights, which would decide, are not on this \
                        machine (an absent LFS object or a remote header)";

/// Same names and shapes: the value diff decides.
fn by_values(model: &Candidate<'_>, parent: &Candidate<'_>) -> Result<Judged, LineageError> {
    let (Some(old), Some(new)) = (parent.side(), model.side()) else {
        return Ok(undecided(NO_BYTES));
    };
    let diff = crate::values::compare(old, new)?;
    let (mut relation, confidence) =
        classify::classify(&diff, parent.artifact, model.artifact, false);
    if let Relation::Identical(identical) = &mut relation {
        identical.metadata_changed =
            crate::diff::StructuralDiff::between(parent.artifact, model.artifact)
                .metadata
                .len();
    }
    Ok(Judged::new(relation, confidence, DecidedBy::Values))
}

/// Another format: the conversion pairing, then (when not faithful) whether the paired values
/// are still related (a conversion of a fine-tune) or not.
fn conversion(model: &Candidate<'_>, parent: &Candidate<'_>) -> Result<Judged, LineageError> {
    let (Some(old), Some(new)) = (parent.side(), model.side()) else {
        return Ok(undecided(NO_BYTES));
    };
    let (models, _) = crate::conversion::Models::oriented((old, parent.name), (new, model.name));
    let found = crate::conversion::compare(&models, None)?;
    let summary = found.summary();
    if found.pairs.is_empty() {
        return Ok(Judged::new(
            Relation::Unrelated(Unrelated::NoCommonTensors {
                model_tensors: model.artifact.tensors.len(),
                parent_tensors: parent.artifact.tensors.len(),
            }),
            1.0,
            DecidedBy::Headers,
        ));
    }
    // Most of the weights within their bands: a conversion, faithful or flawed (a tensor
    // laid out wrongly); else the values decide between a converted fine-tune and unrelated.
    let elements = |suspect: bool| -> u64 {
        found
            .pairs
            .iter()
            .filter(|p| p.suspect.is_some() == suspect)
            .map(|p| p.elements)
            .sum()
    };
    let (within, outside) = (elements(false), elements(true));
    let within_share = within as f64 / (within + outside).max(1) as f64;
    if summary.faithful || within_share >= thresholds::FINETUNE_MIN_RELATED {
        let worst = summary.worst.map(|i| &found.pairs[i]);
        let fit = ConversionFit {
            source_format: models.source.artifact.format.name(),
            target_format: models.target.artifact.format.name(),
            faithful: summary.faithful,
            pairs: found.pairs.len(),
            suspect: summary.suspect,
            dtype_changed: found
                .pairs
                .iter()
                .any(|p| p.source_dtypes.iter().any(|d| *d != p.target_dtype)),
            worst_tensor: worst.map(|p| p.target.clone()),
            worst_rel_l2: worst.and_then(|p| p.stats.rel_l2),
        };
        return Ok(Judged::new(
            Relation::Conversion(fit),
            within_share,
            DecidedBy::Values,
        ));
    }
    let diff = found.as_value_diff();
    let (relation, confidence) =
        classify::classify(&diff, models.source.artifact, models.target.artifact, true);
    Ok(Judged::new(relation, confidence, DecidedBy::Values))
}

/// Rows or layers added or removed: the shared tensors' values say whether the rest was kept,
/// tuned, or replaced.
fn resized(
    model: &Candidate<'_>,
    parent: &Candidate<'_>,
    mut rows: Vec<RowChange>,
    layers_added: Vec<String>,
    layers_removed: Vec<String>,
) -> Result<Judged, LineageError> {
    let (Some(old), Some(new)) = (parent.side(), model.side()) else {
        return Ok(undecided(NO_BYTES));
    };
    for change in &mut rows {
        change.shared_rows_equal = headers::shared_rows_equal(
            change,
            (model.artifact, new.files),
            (parent.artifact, old.files),
        );
    }
    let diff = crate::values::compare(old, new)?;
    let (class, confidence) = classify::classify(&diff, parent.artifact, model.artifact, false);
    if let Relation::Unrelated(_) = class {
        return Ok(Judged::new(class, confidence, DecidedBy::Values));
    }
    let grown = rows.iter().any(|r| r.rows > r.parent_rows) || !layers_added.is_empty();
    let resized = Resized {
        shared_tensors: diff.tensors.len(),
        shared_moved: diff.changed_count(),
        values_moved: diff.changed_count() > 0,
        rows,
        layers_added,
        layers_removed,
    };
    let relation = if grown {
        Relation::Extended(resized)
    } else {
        Relation::Pruned(resized)
    };
    Ok(Judged::new(relation, confidence, DecidedBy::Values))
}

/// The relation a value diff already made shows (`git diff --values`, `ci --values`): the
/// headers first, then the diff's figures; nothing more is read. Rows added or removed are
/// named without comparing the shared rows.
pub(crate) fn from_value_diff(
    old: &crate::artifact::Artifact,
    new: &crate::artifact::Artifact,
    diff: &crate::values::ValueDiff,
) -> Judged {
    if adapter::is_adapter(new) {
        return match adapter::fit(new, old, None) {
            Ok(found) => {
                let share = found.fitted as f64 / found.pairs.max(1) as f64;
                Judged::new(Relation::Adapter(found), share, DecidedBy::Headers)
            }
            Err(why) => Judged::new(Relation::Unrelated(why), 1.0, DecidedBy::Headers),
        };
    }
    let structure = headers::compare(new, old);
    if let headers::Structure::Unrelated(why) = structure {
        return Judged::new(Relation::Unrelated(why), 1.0, DecidedBy::Headers);
    }
    let (mut relation, confidence) = classify::classify(diff, old, new, false);
    if let Relation::Identical(identical) = &mut relation {
        identical.metadata_changed = crate::diff::StructuralDiff::between(old, new)
            .metadata
            .len();
    }
    if let (
        headers::Structure::Resized {
            rows,
            layers_added,
            layers_removed,
        },
        false,
    ) = (structure, matches!(relation, Relation::Unrelated(_)))
    {
        let grown = rows.iter().any(|r| r.rows > r.parent_rows) || !layers_added.is_empty();
        let resized = Resized {
            shared_tensors: diff.tensors.len(),
            shared_moved: diff.changed_count(),
            values_moved: diff.changed_count() > 0,
            rows,
            layers_added,
            layers_removed,
        };
        relation = if grown {
            Relation::Extended(resized)
        } else {
            Relation::Pruned(resized)
        };
    }
    Judged::new(relation, confidence, DecidedBy::Values)
}
