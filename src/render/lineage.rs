//! `relate`'s verdict as text and as schema-1 JSON, and the one-line sentence the `ci`
//! summary and `git diff --values` give for it.

use serde::Serialize;

use super::palette::Palette;
use crate::escape::shown;
use crate::identity::SCHEMA_VERSION;
use crate::lineage::{Judged, Relation, Unrelated, Verdict};

/// A share as a percentage with two significant digits ("0.83 %", "12 %", "0 %").
pub(crate) fn percent(share: f64) -> String {
    let p = share * 100.0;
    if p == 0.0 || !p.is_finite() {
        return if p.is_finite() {
            "0 %".into()
        } else {
            "inf".into()
        };
    }
    let digits = (1 - p.abs().log10().floor() as i32).max(0) as usize;
    format!("{p:.digits$} %")
}

fn percent_or_inf(share: Option<f64>) -> String {
    share.map_or_else(|| "inf".to_owned(), percent)
}

/// Up to three labels, then how many more.
fn few(labels: &[String]) -> String {
    let shown_labels: Vec<String> = labels
        .iter()
        .take(3)
        .map(|l| shown(l).into_owned())
        .collect();
    match labels.len() {
        0..=3 => shown_labels.join(", "),
        n => format!("{} and {} more", shown_labels.join(", "), n - 3),
    }
}

/// The relation in one line: "fine-tune of base.gguf: 16 of 40 tensors moved in layer blk.5,
/// rel_l2 0.8 %; 24 frozen". `parent` is the candidate's name as given.
pub(crate) fn sentence(judged: &Judged, parent: &str) -> String {
    let p = shown(parent);
    match &judged.relation {
        Relation::Identical(i) if i.files_equal => format!("identical to {p} (byte for byte)"),
        Relation::Identical(i) => format!(
            "identical weights to {p} ({} tensors' bytes equal; {} metadata keys differ)",
            i.tensors, i.metadata_changed
        ),
        Relation::Cast(c) | Relation::Requantized(c) => {
            let verb = if matches!(judged.relation, Relation::Cast(_)) {
                "cast of"
            } else {
                "re-quantized from"
            };
            let bands: Vec<String> = c
                .bands
                .iter()
                .map(|b| {
                    format!(
                        "{} → {} ({} tensors, worst rel_l2 {} within its band of {})",
                        b.from,
                        b.to,
                        b.tensors,
                        percent(b.worst_rel_l2),
                        percent(b.bound)
                    )
                })
                .collect();
            format!("{verb} {p}: {}", bands.join("; "))
        }
        Relation::Conversion(c) => {
            let worst = match (&c.worst_tensor, c.worst_rel_l2) {
                (Some(t), Some(r)) => format!(", worst rel_l2 {} ({})", percent(r), shown(t)),
                _ => String::new(),
            };
            let verdict = if c.faithful {
                format!("faithful: {} pairs within their bands", c.pairs)
            } else {
                format!(
                    "not faithful: {} of {} pairs outside their bands",
                    c.suspect, c.pairs
                )
            };
            format!(
                "conversion of {p} ({} → {}), {verdict}{worst}",
                c.source_format, c.target_format
            )
        }
        Relation::FineTune(f) => fine_tune_sentence(f, &p),
        Relation::Merge(m) => {
            let parts: Vec<String> = m
                .weights
                .iter()
                .map(|w| {
                    format!(
                        "{} × {}",
                        super::values::figure(w.weight),
                        shown(&w.candidate)
                    )
                })
                .collect();
            format!(
                "merge: {} (residual {} on {} sampled values; the closest single candidate is \
                 {} off)",
                parts.join(" + "),
                percent(m.residual),
                m.sampled_values,
                percent(m.best_single_rel_l2)
            )
        }
        Relation::Adapter(a) => {
            let rank = if a.rank == a.max_rank {
                a.rank.to_string()
            } else {
                format!("{}-{}", a.rank, a.max_rank)
            };
            let alpha = a.alpha.map_or(String::new(), |x| {
                format!(", alpha {}", super::values::figure(x))
            });
            format!(
                "LoRA adapter of {p}: rank {rank}{alpha}, modules {} ({} of {} pairs fit)",
                few(&a.target_modules),
                a.fitted,
                a.pairs
            )
        }
        Relation::Extended(r) | Relation::Pruned(r) => {
            let verb = if matches!(judged.relation, Relation::Extended(_)) {
                "extended from"
            } else {
                "pruned from"
            };
            let mut parts = Vec::new();
            for row in &r.rows {
                let kept = match row.shared_rows_equal {
                    Some(true) => ", shared rows equal",
                    Some(false) => ", shared rows moved",
                    None => "",
                };
                parts.push(format!(
                    "{} rows {} → {}{kept}",
                    shown(&row.tensor),
                    row.parent_rows,
                    row.rows
                ));
            }
            if !r.layers_added.is_empty() {
                parts.push(format!("layers added: {}", few(&r.layers_added)));
            }
            if !r.layers_removed.is_empty() {
                parts.push(format!("layers removed: {}", few(&r.layers_removed)));
            }
            parts.push(format!(
                "{} of {} shared tensors moved",
                r.shared_moved, r.shared_tensors
            ));
            format!("{verb} {p}: {}", parts.join("; "))
        }
        Relation::Unrelated(u) => format!("unrelated to {p}: {}", unrelated_reason(u)),
        Relation::Undecided(u) => format!("undecided against {p}: {}", u.why),
    }
}

fn fine_tune_sentence(f: &crate::lineage::FineTune, p: &str) -> String {
    let labels: Vec<String> = f.layers.iter().map(|l| l.layer.clone()).collect();
    let mut place = match labels.len() {
        0 => String::new(),
        1 => format!(" in layer {}", few(&labels)),
        n if n <= 3 => format!(" in layers {}", few(&labels)),
        n => format!(" in {n} layers"),
    };
    let outside = &f.moved_outside_layers;
    if !outside.is_empty() {
        let joiner = if place.is_empty() { " in" } else { " and" };
        if outside.len() <= 2 {
            place.push_str(&format!("{joiner} {}", few(outside)));
        } else {
            place.push_str(&format!("{joiner} {} tensors outside them", outside.len()));
        }
    }
    let frozen = match f.frozen {
        0 => String::new(),
        n => format!("; {n} frozen"),
    };
    let across = if f.across_formats {
        " (paired across formats)"
    } else {
        ""
    };
    format!(
        "fine-tune of {p}{across}: {} of {} tensors moved{place}, rel_l2 {}{frozen}",
        f.moved,
        f.tensors,
        percent_or_inf(f.rel_l2)
    )
}

fn unrelated_reason(u: &Unrelated) -> String {
    match u {
        Unrelated::Architecture { model, parent } => format!(
            "another architecture ({} here, {} in the candidate)",
            shown(model),
            shown(parent)
        ),
        Unrelated::NoCommonTensors {
            model_tensors,
            parent_tensors,
        } => format!(
            "no tensor names in common ({model_tensors} tensors here, {parent_tensors} in the \
             candidate)"
        ),
        Unrelated::Shapes {
            differing,
            shared,
            example,
            model_shape,
            parent_shape,
        } => format!(
            "other shapes: {} is {model_shape:?} here and {parent_shape:?} in the candidate \
             ({differing} of {shared} shared tensors differ)",
            shown(example)
        ),
        Unrelated::Values {
            related_share,
            median_cosine,
            voting_tensors,
        } => format!(
            "values uncorrelated: median cosine {} over {voting_tensors} weight tensors, {} of \
             the changed weights related (a fine-tune needs {})",
            median_cosine.map_or("undefined".to_owned(), super::values::figure),
            percent(*related_share),
            percent(crate::lineage::FINETUNE_MIN_RELATED)
        ),
        Unrelated::AdapterDoesNotFit {
            pairs,
            fitted,
            example,
        } => format!(
            "an adapter whose pairs do not fit the candidate's tensors ({fitted} of {pairs} \
             fit; {} does not)",
            shown(example)
        ),
    }
}

/// The name the verdict's sentence gives the parent: the chosen one, the only candidate, or
/// "the candidates".
fn chosen<'a>(names: &[&'a str], verdict: &Verdict) -> &'a str {
    match (verdict.parent, names) {
        (Some(i), _) => names[i],
        (None, [one]) => one,
        _ => "the candidates",
    }
}

/// `relate` as text: the verdict, then each candidate alone when there are several.
pub(crate) fn text(model: &str, names: &[&str], verdict: &Verdict, palette: &Palette) -> String {
    let mut out = format!("model: {}\n", shown(model));
    let parent = chosen(names, verdict);
    out.push_str(&format!(
        "{}: {}\n",
        palette.heading("relation"),
        verdict.judged.relation.name()
    ));
    if let Some(hub) = verdict.judged.relation.base_model_relation() {
        out.push_str(&format!("base_model_relation: {hub}\n"));
    }
    out.push_str(&format!(
        "confidence: {} ({:.2}), decided by the {}\n",
        verdict.judged.level(),
        verdict.judged.confidence,
        decided_by_words(&verdict.judged)
    ));
    out.push_str(&sentence(&verdict.judged, parent));
    out.push('\n');
    if let Relation::FineTune(f) = &verdict.judged.relation {
        for layer in &f.layers {
            out.push_str(&format!(
                "  {}: {} of {} tensors moved, rel_l2 {}\n",
                shown(&layer.layer),
                layer.moved,
                layer.tensors,
                percent_or_inf(layer.rel_l2)
            ));
        }
        if !f.frozen_layers.is_empty() {
            out.push_str(&format!("  frozen layers: {}\n", few(&f.frozen_layers)));
        }
        if !f.reinitialised.is_empty() {
            out.push_str(&format!("  re-initialised: {}\n", few(&f.reinitialised)));
        }
    }
    if names.len() > 1 {
        out.push_str("candidates:\n");
        for (name, judged) in names.iter().zip(&verdict.candidates) {
            out.push_str(&format!(
                "  {} ({}, {:.2}): {}\n",
                judged.relation.name(),
                judged.level(),
                judged.confidence,
                sentence(judged, name)
            ));
        }
    }
    out
}

fn decided_by_words(judged: &Judged) -> &'static str {
    match judged.decided_by {
        crate::lineage::DecidedBy::Bytes => "files' bytes",
        crate::lineage::DecidedBy::Headers => "headers",
        crate::lineage::DecidedBy::Values => "values",
        crate::lineage::DecidedBy::Sample => "sampled values",
    }
}

#[derive(Serialize)]
struct JudgedJson<'a> {
    relation: &'static str,
    base_model_relation: Option<&'static str>,
    confidence: f64,
    confidence_level: &'static str,
    decided_by: crate::lineage::DecidedBy,
    summary: String,
    evidence: serde_json::Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    candidate: Option<&'a str>,
}

fn judged_json<'a>(judged: &Judged, parent: &str, candidate: Option<&'a str>) -> JudgedJson<'a> {
    let mut evidence = serde_json::to_value(&judged.relation).unwrap_or_default();
    if let Some(map) = evidence.as_object_mut() {
        map.remove("relation");
    }
    JudgedJson {
        relation: judged.relation.name(),
        base_model_relation: judged.relation.base_model_relation(),
        confidence: judged.confidence,
        confidence_level: judged.level(),
        decided_by: judged.decided_by,
        summary: sentence(judged, parent),
        evidence,
        candidate,
    }
}

/// One relation as JSON (`relation`, `base_model_relation`, confidence, summary, evidence),
/// for the reports that carry it beside their own (`git diff --values --json`, `ci`).
pub(crate) fn relation_json(judged: &Judged, parent: &str) -> serde_json::Value {
    serde_json::to_value(judged_json(judged, parent, None)).unwrap_or_default()
}

#[derive(Serialize)]
struct RelateJson<'a> {
    schema: u32,
    model: &'a str,
    /// The parent chosen (None for a merge or when none is related).
    parent: Option<&'a str>,
    /// The models it was made from: the parent, or a merge's candidates.
    parents: Vec<&'a str>,
    #[serde(flatten)]
    verdict: JudgedJson<'a>,
    candidates: Vec<JudgedJson<'a>>,
}

/// `relate --json` (schema 1).
pub(crate) fn json(model: &str, names: &[&str], verdict: &Verdict) -> String {
    let parent = verdict.parent.map(|i| names[i]);
    let parents = match &verdict.judged.relation {
        Relation::Merge(m) => names
            .iter()
            .zip(&m.weights)
            .filter(|(_, w)| w.weight.abs() >= crate::lineage::MERGE_MIN_WEIGHT)
            .map(|(n, _)| *n)
            .collect(),
        _ => parent.into_iter().collect(),
    };
    let doc = RelateJson {
        schema: SCHEMA_VERSION,
        model,
        parent,
        parents,
        verdict: judged_json(&verdict.judged, chosen(names, verdict), None),
        candidates: names
            .iter()
            .zip(&verdict.candidates)
            .map(|(name, judged)| judged_json(judged, name, Some(name)))
            .collect(),
    };
    let mut out = serde_json::to_string_pretty(&doc).expect("serializable");
    out.push('\n');
    out
}
