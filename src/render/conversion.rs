//! A conversion report as text (the summary line, the pairs worst first, what was dropped,
//! added or not compared, configuration checks, the per-layer view) and as schema-1 JSON.

use std::fmt::Write;

use serde::Serialize;

use super::palette::Palette;
use super::values::{FigureRow, LargestFirst, LayerDoc, cosine_text, figure, layer_docs};
use crate::conversion::{ComparedPair, Conversion, MetadataChecks, Mistake, PairedBy, Suspect};
use crate::escape::shown;

fn percent(r: f64) -> String {
    let p = r * 100.0;
    if p == 0.0 {
        "0 %".into()
    } else if p >= 10.0 {
        format!("{p:.1} %")
    } else if p >= 0.01 {
        format!("{} %", figure_sig(p))
    } else {
        format!("{} %", figure(p))
    }
}

/// Two significant digits for the summary's percentages ("0.61", "3.1").
fn figure_sig(x: f64) -> String {
    let digits = (1 - x.abs().log10().floor() as i32).max(0) as usize;
    format!("{x:.digits$}")
}

fn rel_l2_text(p: &ComparedPair) -> String {
    p.rel_l2().map_or("inf".into(), figure)
}

const PERMUTATION_WRONG: &str = "the Q/K head permutation is wrong";

/// What is wrong with a suspect pair, in words.
pub(crate) fn suspect_text(p: &ComparedPair) -> Option<String> {
    Some(match p.suspect.as_ref()? {
        Suspect::Permutation { other } => format!(
            "{PERMUTATION_WRONG}: with the other layout the values match (rel_l2 {}), with the \
             expected one they do not (rel_l2 {})",
            other.rel_l2.map_or("inf".into(), figure),
            rel_l2_text(p)
        ),
        Suspect::Error { bound } if *bound == 0.0 => format!(
            "{} → {} should be exact, but {} elements differ",
            p.source_dtypes.join("+"),
            p.target_dtype,
            p.stats.changed_elements
        ),
        Suspect::Error { bound } => format!(
            "rel_l2 {} is beyond the {} expected of {} (at most {})",
            rel_l2_text(p),
            "error",
            p.target_dtype,
            figure(*bound)
        ),
        Suspect::FromZero => "the source is all zeros and the converted tensor is not".into(),
        Suspect::Mistake { named, bound } => format!(
            "{}: rel_l2 {} (the {} band is {}), {} once that is undone",
            mistake_text(&named.mistake),
            rel_l2_text(p),
            p.target_dtype,
            band_text(*bound),
            figure(named.fit)
        ),
    })
}

/// The mistake a suspect pair's error is named as, and what is left once it is undone — "the
/// converter's +1 on this norm weight is missing (rel_l2 0 once undone)" — for reports that give
/// the figure themselves (the policy's violations). None when the error has no name.
pub(crate) fn named_mistake(p: &ComparedPair) -> Option<String> {
    let (mistake, fit) = match p.suspect.as_ref()? {
        Suspect::Mistake { named, .. } => (mistake_text(&named.mistake), Some(named.fit)),
        Suspect::Permutation { other } => (PERMUTATION_WRONG.to_owned(), other.rel_l2),
        Suspect::Error { .. } | Suspect::FromZero => return None,
    };
    Some(format!(
        "{mistake} (rel_l2 {} once undone)",
        fit.map_or("inf".into(), figure)
    ))
}

fn mistake_text(m: &Mistake) -> String {
    match m {
        Mistake::PlusOneMissing => "the converter's +1 on this norm weight is missing".into(),
        Mistake::PlusOneDoubled => "the converter's +1 on this norm weight is applied twice".into(),
        Mistake::PlusOneAdded => "1 was added where the converter adds nothing".into(),
        Mistake::Transposed => "the matrix is transposed".into(),
        Mistake::PermutedWhereNone => {
            "the Q/K head permutation was applied, but the converter applies none to this \
             architecture"
                .into()
        }
        Mistake::PermutedTwice => "the Q/K head permutation was applied twice".into(),
        Mistake::Swapped { what, a, b } => format!("{what} {a} and {b} are swapped"),
        Mistake::OtherLayer { layer, sources } => format!(
            "it holds layer {layer}'s tensor ({})",
            sources_text(sources)
        ),
    }
}

fn band_text(bound: f64) -> String {
    if bound == 0.0 {
        "exact".into()
    } else {
        format!("rel_l2 ≤ {}", figure(bound))
    }
}

/// The error each target type of the pairs may bring: "f32 exact; q8_0 rel_l2 ≤ 0.02
/// (blocks of 32)".
pub(crate) fn bands_line(c: &Conversion) -> String {
    c.bands()
        .iter()
        .map(|b| {
            let block = if b.block > 1 {
                format!(" (blocks of {})", b.block)
            } else {
                String::new()
            };
            format!(
                "{} {}{block}: {} outside",
                b.target_dtype,
                band_text(b.bound),
                b.outside
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The transforms applied, with how many pairs each: "permute_qk 4, identity 15".
pub(crate) fn transforms_line(c: &Conversion) -> String {
    let mut counts: std::collections::BTreeMap<String, usize> = Default::default();
    for p in &c.pairs {
        *counts.entry(p.transform.name()).or_default() += 1;
    }
    let mut line = counts
        .into_iter()
        .map(|(t, n)| format!("{t} {n}"))
        .collect::<Vec<_>>()
        .join(", ");
    if let Some(cite) = c.cite {
        let _ = write!(line, " — {cite}");
    }
    line
}

/// The summary line: "faithful: 21/21 source tensors paired, …".
pub(crate) fn summary(c: &Conversion) -> String {
    let s = c.summary();
    let mut line = String::new();
    if c.pairs.is_empty() {
        line.push_str(
            "nothing compared: no tensor of the source was paired with the converted model",
        );
        return line;
    }
    line.push_str(if s.faithful {
        "faithful"
    } else {
        "NOT faithful"
    });
    let _ = write!(
        line,
        ": {}/{} source tensors paired",
        s.paired_sources, c.source_tensors
    );
    if s.suspect > 0 {
        let _ = write!(line, ", {} suspect", s.suspect);
    }
    let _ = write!(line, ", identical in {}", s.identical);
    if let Some(median) = s.median_rel_l2 {
        let _ = write!(line, ", error rel_l2 median {}", percent(median));
    }
    if let Some(worst) = s.worst {
        let p = &c.pairs[worst];
        let _ = write!(
            line,
            ", worst {} {} ({})",
            p.rel_l2().map_or("inf".into(), percent),
            shown(&p.target),
            p.target_dtype
        );
    }
    if !c.not_compared.is_empty() {
        let _ = write!(line, "; {} not compared", c.not_compared.len());
    }
    line
}

/// How the pairs were made, in words (the text and the HTML report).
pub(super) fn paired_by_text(c: &Conversion) -> String {
    let mut text = match &c.paired_by {
        PairedBy::Table {
            architecture,
            blocks,
        } => format!(
            "paired by llama.cpp's name table (gguf-py) for {} with {blocks} blocks",
            shown(architecture)
        ),
        PairedBy::Names => "paired by equal names".into(),
    };
    if let Some(map) = &c.map {
        let _ = write!(
            text,
            ", after the rules of {}",
            crate::escape::shown_path(map)
        );
    }
    text
}

pub(crate) fn text(c: &Conversion, source: &str, target: &str, palette: &Palette) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} {} → {}",
        palette.heading("Conversion:"),
        shown(source),
        shown(target)
    );
    let _ = writeln!(out, "  {}", paired_by_text(c));
    let _ = writeln!(out, "  {}", summary(c));
    if !c.pairs.is_empty() {
        let _ = writeln!(out, "  expected error band: {}", bands_line(c));
        let _ = writeln!(out, "  transforms: {}", transforms_line(c));
    }

    let suspects: Vec<&ComparedPair> = c.pairs.iter().filter(|p| p.suspect.is_some()).collect();
    if !suspects.is_empty() {
        let _ = writeln!(out);
        let _ = writeln!(out, "  Suspect pairs:");
        for p in &suspects {
            let line = format!(
                "  {}: {}",
                shown(&p.target),
                suspect_text(p).unwrap_or_default()
            );
            let _ = writeln!(out, "{}", palette.removed(&line));
        }
    }

    let changed = c.worst_first();
    let rows = changed.iter().map(|p| {
        let s = p.stats;
        FigureRow {
            rel_l2: rel_l2_text(p),
            max_abs_diff: figure(s.max_abs_diff),
            cosine: s.cosine.map_or("-".into(), cosine_text),
            changed_elements: format!(
                "{}/{}",
                super::text::group_digits(s.changed_elements),
                super::text::group_digits(p.elements)
            ),
            label: format!(
                "{} ← {} ({}, {} → {})",
                shown(&p.target),
                sources_text(&p.sources),
                p.transform.name(),
                p.source_dtypes.join("+"),
                p.target_dtype
            ),
            suspect: p.suspect.is_some(),
        }
    });
    let table = LargestFirst {
        what: ("pairs", "pair"),
        label_heading: "converted ← source (transform, dtypes)",
    };
    table.write(&mut out, rows, changed.len(), palette);
    let identical: Vec<&ComparedPair> = c.pairs.iter().filter(|p| p.identical()).collect();
    if !identical.is_empty() {
        let _ = writeln!(out);
        let transforms: std::collections::BTreeSet<String> =
            identical.iter().map(|p| p.transform.name()).collect();
        let _ = writeln!(
            out,
            "  Identical values: {} pair(s) ({})",
            identical.len(),
            transforms.into_iter().collect::<Vec<_>>().join(", ")
        );
    }
    if !c.dropped.is_empty() {
        let _ = writeln!(out);
        let _ = writeln!(out, "  Source tensors not in the converted model:");
        for d in &c.dropped {
            let _ = writeln!(out, "    {}: {}", shown(&d.source), d.why);
        }
    }
    if !c.added.is_empty() {
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "  Tensors of the converted model no source tensor maps to:"
        );
        for a in &c.added {
            let _ = writeln!(out, "    {}", shown(a));
        }
    }
    if !c.not_compared.is_empty() {
        let _ = writeln!(out);
        let _ = writeln!(out, "  Not compared:");
        for n in &c.not_compared {
            let target = n.target.as_deref().map_or("-".into(), shown);
            let _ = writeln!(
                out,
                "    {target} ← {}: {}",
                sources_text(&n.sources),
                n.why
            );
        }
    }
    let _ = writeln!(out);
    match &c.metadata.config {
        Some(config) => {
            let (checked, equal, differ) = config_check(&c.metadata, |s| shown(s).into_owned());
            let config = crate::escape::shown_path(config);
            let _ = writeln!(
                out,
                "  Configuration ({config}): {checked} checked, {equal} equal"
            );
            for line in differ {
                let _ = writeln!(out, "    {line}");
            }
        }
        None => {
            let _ = writeln!(
                out,
                "  Configuration: no config.json beside the source, not checked"
            );
        }
    }
    let _ = writeln!(out, "  Not checked: {NOT_CHECKED}");
    if c.pairs.iter().any(|p| !p.identical()) {
        out.push_str(&super::values::layers_text(&c.as_value_diff().layers()));
    }
    out
}

/// What the configuration check leaves out.
const NOT_CHECKED: &str = "tokenizer contents, chat template, special tokens and config.json \
     keys the converter does not write";

/// A pair's source tensors as shown: one, a few joined by +, or the first and last of many.
pub(super) fn sources_text(sources: &[String]) -> String {
    match sources {
        [] => "-".into(),
        [one] => shown(one).into_owned(),
        [first, .., last] if sources.len() > 3 => format!(
            "{} … {} ({} tensors)",
            shown(first),
            shown(last),
            sources.len()
        ),
        many => many
            .iter()
            .map(|s| shown(s).into_owned())
            .collect::<Vec<_>>()
            .join(" + "),
    }
}

#[derive(Serialize)]
struct PairDoc<'a> {
    target: &'a str,
    sources: &'a [String],
    transform: String,
    source_dtypes: &'a [&'static str],
    target_dtype: &'static str,
    elements: u64,
    identical: bool,
    changed_elements: u64,
    nonfinite_elements: u64,
    max_abs_diff: f64,
    rel_l2: Option<f64>,
    cosine: Option<f64>,
    suspect: Option<String>,
}

#[derive(Serialize)]
struct BandDoc {
    target_dtype: &'static str,
    bound: f64,
    block: u64,
    pairs: usize,
    outside: usize,
}

#[derive(Serialize)]
struct DroppedDoc<'a> {
    source: &'a str,
    why: &'a str,
}

#[derive(Serialize)]
struct NotComparedDoc<'a> {
    target: Option<&'a str>,
    sources: &'a [String],
    why: &'a str,
}

#[derive(Serialize)]
struct CheckDoc<'a> {
    config_key: &'a str,
    gguf_key: &'a str,
    source: &'a str,
    target: Option<&'a str>,
    equal: bool,
}

#[derive(Serialize)]
struct MetadataDoc<'a> {
    config: Option<String>,
    checks: Vec<CheckDoc<'a>>,
    not_checked: &'static str,
}

#[derive(Serialize)]
struct PairedByDoc<'a> {
    method: &'static str,
    architecture: Option<&'a str>,
    blocks: Option<u64>,
    map: Option<String>,
}

#[derive(Serialize)]
struct ConversionDoc<'a> {
    source: &'a str,
    target: &'a str,
    paired_by: PairedByDoc<'a>,
    summary: String,
    faithful: bool,
    bands: Vec<BandDoc>,
    transforms: String,
    transforms_cite: Option<&'static str>,
    source_tensors: usize,
    target_tensors: usize,
    paired_sources: usize,
    compared: usize,
    identical: usize,
    suspect: usize,
    median_rel_l2: Option<f64>,
    worst: Option<&'a str>,
    pairs: Vec<PairDoc<'a>>,
    dropped: Vec<DroppedDoc<'a>>,
    added: &'a [String],
    not_compared: Vec<NotComparedDoc<'a>>,
    metadata: MetadataDoc<'a>,
    layers: Vec<LayerDoc>,
}

#[derive(Serialize)]
struct Document<'a> {
    schema: u32,
    conversion: ConversionDoc<'a>,
}

/// The conversion document as a JSON value (for the reports of `git diff --json` and `ci`).
pub(crate) fn json_value(c: &Conversion, source: &str, target: &str) -> serde_json::Value {
    serde_json::to_value(conversion_doc(c, source, target)).expect("JSON of plain data cannot fail")
}

fn conversion_doc<'a>(c: &'a Conversion, source: &'a str, target: &'a str) -> ConversionDoc<'a> {
    let s = c.summary();
    let (method, architecture, blocks) = match &c.paired_by {
        PairedBy::Table {
            architecture,
            blocks,
        } => ("table", Some(architecture.as_str()), Some(*blocks)),
        PairedBy::Names => ("names", None, None),
    };
    ConversionDoc {
        source,
        target,
        paired_by: PairedByDoc {
            method,
            architecture,
            blocks,
            map: c.map.as_ref().map(|m| m.display().to_string()),
        },
        summary: summary(c),
        faithful: s.faithful,
        bands: c
            .bands()
            .into_iter()
            .map(|b| BandDoc {
                target_dtype: b.target_dtype,
                bound: b.bound,
                block: b.block,
                pairs: b.pairs,
                outside: b.outside,
            })
            .collect(),
        transforms: transforms_line(c),
        transforms_cite: c.cite,
        source_tensors: c.source_tensors,
        target_tensors: c.target_tensors,
        paired_sources: s.paired_sources,
        compared: c.pairs.len(),
        identical: s.identical,
        suspect: s.suspect,
        median_rel_l2: s.median_rel_l2,
        worst: s.worst.map(|w| c.pairs[w].target.as_str()),
        pairs: c
            .pairs
            .iter()
            .map(|p| PairDoc {
                target: &p.target,
                sources: &p.sources,
                transform: p.transform.name(),
                source_dtypes: &p.source_dtypes,
                target_dtype: p.target_dtype,
                elements: p.elements,
                identical: p.identical(),
                changed_elements: p.stats.changed_elements,
                nonfinite_elements: p.stats.nonfinite_elements,
                max_abs_diff: p.stats.max_abs_diff,
                rel_l2: p.stats.rel_l2,
                cosine: p.stats.cosine,
                suspect: suspect_text(p),
            })
            .collect(),
        dropped: c
            .dropped
            .iter()
            .map(|d| DroppedDoc {
                source: &d.source,
                why: &d.why,
            })
            .collect(),
        added: &c.added,
        not_compared: c
            .not_compared
            .iter()
            .map(|n| NotComparedDoc {
                target: n.target.as_deref(),
                sources: &n.sources,
                why: &n.why,
            })
            .collect(),
        metadata: MetadataDoc {
            config: c.metadata.config.as_ref().map(|p| p.display().to_string()),
            checks: c
                .metadata
                .checks
                .iter()
                .map(|k| CheckDoc {
                    config_key: k.config_key,
                    gguf_key: &k.gguf_key,
                    source: &k.source,
                    target: k.target.as_deref(),
                    equal: k.equal,
                })
                .collect(),
            not_checked: NOT_CHECKED,
        },
        layers: layer_docs(&c.as_value_diff()),
    }
}

/// `diff --values --json` of a conversion.
pub(crate) fn json(c: &Conversion, source: &str, target: &str) -> String {
    super::json::to_string(&Document {
        schema: crate::identity::SCHEMA_VERSION,
        conversion: conversion_doc(c, source, target),
    })
}

/// The config.json check as the reports give it: keys checked, keys equal, and each key that
/// differs as `config_key source → gguf_key target` (`missing` where the GGUF lacks the key),
/// names through `name` (shown as text, or as HTML).
pub(super) fn config_check(
    metadata: &MetadataChecks,
    name: impl Fn(&str) -> String,
) -> (usize, usize, Vec<String>) {
    let checks = &metadata.checks;
    let differ: Vec<String> = checks
        .iter()
        .filter(|k| !k.equal)
        .map(|k| {
            let target = k
                .target
                .as_deref()
                .map_or_else(|| "missing".to_owned(), &name);
            let (source, gguf_key) = (name(&k.source), name(&k.gguf_key));
            format!("{} {source} → {gguf_key} {target}", k.config_key)
        })
        .collect();
    (checks.len(), checks.len() - differ.len(), differ)
}
