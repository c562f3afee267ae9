//! Conversions are diffs too: a GGUF (or any model) compared by value with the model it was
//! made from, although the two name, shape and lay out the same weights differently.
//!
//! [`pairing`] plans which converted tensor holds which source tensors and how (gguf-py's name
//! table, the converter's transforms, `--map` rules); [`compare`] streams each pair in the
//! converted tensor's order, undoing the transform on the source side; [`metadata`] compares
//! what the source's config.json says with the GGUF's keys. The result is a [`Conversion`].

mod compare;
#[rustfmt::skip]
mod converter_table;
mod diagnose;
mod error;
mod layout;
mod map_file;
mod metadata;
mod names;
#[rustfmt::skip]
mod names_table;
mod pairing;
mod transforms;

use std::path::Path;

pub(crate) use diagnose::{Mistake, Named};
pub(crate) use error::{ConversionError, MapError};
pub(crate) use map_file::MapFile;
pub(crate) use metadata::MetadataChecks;
pub(crate) use pairing::{Dropped, NotCompared, PairedBy, Transform};

use crate::artifact::{Artifact, Format};
use crate::values::{Side, ValueStats};

/// One compared pair.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ComparedPair {
    pub target: String,
    pub sources: Vec<String>,
    pub transform: Transform,
    /// The source dtypes, in source order, without repeats.
    pub source_dtypes: Vec<&'static str>,
    pub target_dtype: &'static str,
    pub elements: u64,
    pub stats: ValueStats,
    pub suspect: Option<Suspect>,
}

/// Why a pair is not what a faithful conversion gives.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Suspect {
    /// The other Q/K layout matches: the head permutation is wrong (applied where it should not
    /// be, or missing).
    Permutation { other: ValueStats },
    /// More error than the target dtype loses on its own.
    Error { bound: f64 },
    /// Infinite relative error: the source is all zeros and the target is not.
    FromZero,
    /// More error than the target dtype loses, explained by a named mistake.
    Mistake { named: Named, bound: f64 },
}

impl ComparedPair {
    pub(crate) fn rel_l2(&self) -> Option<f64> {
        self.stats.rel_l2
    }

    pub(crate) fn identical(&self) -> bool {
        self.stats.changed_elements == 0 && self.stats.nonfinite_elements == 0
    }
}

/// A conversion compared.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Conversion {
    pub paired_by: PairedBy,
    pub map: Option<std::path::PathBuf>,
    pub source_tensors: usize,
    pub target_tensors: usize,
    /// In target name order.
    pub pairs: Vec<ComparedPair>,
    pub dropped: Vec<Dropped>,
    pub added: Vec<String>,
    pub not_compared: Vec<NotCompared>,
    pub metadata: MetadataChecks,
    /// The converter function the architecture's transforms mirror (none: renames only).
    pub cite: Option<&'static str>,
}

/// The two models of a conversion.
pub(crate) struct Models<'a> {
    pub source: Side<'a>,
    /// Where the source was read from (its config.json is looked for beside it).
    pub source_path: &'a Path,
    pub target: Side<'a>,
    /// The converted model's name in messages.
    pub target_name: &'a str,
}

impl<'a> Models<'a> {
    /// The two models of a conversion given in either order (`diff --values A B`): the source
    /// is the side that is not GGUF. Returns them and the source's name as given.
    pub(crate) fn oriented(
        a: (Side<'a>, &'a str),
        b: (Side<'a>, &'a str),
    ) -> (Models<'a>, &'a str) {
        let swap = a.0.artifact.format == Format::Gguf && b.0.artifact.format != Format::Gguf;
        let ((source, source_name), (target, target_name)) = if swap { (b, a) } else { (a, b) };
        let models = Models {
            source,
            source_path: Path::new(source_name),
            target,
            target_name,
        };
        (models, source_name)
    }
}

/// How `diff --values` pairs the tensors of two models.
pub(crate) enum Pairing {
    /// By equal names (a value diff).
    Names,
    /// By llama.cpp's converter table (a conversion report).
    Table,
    /// By the rules of a `--map` file first, then the table (a conversion report).
    Map(MapFile),
}

impl Pairing {
    /// The pairing `--map` asks for: `none` pairs by equal names, a file by its rules; without
    /// it, a GGUF against a safetensors or PyTorch model (either way round) is a conversion,
    /// paired by llama.cpp's table, and anything else pairs by names.
    pub(crate) fn choose(
        map: Option<&str>,
        a: &Artifact,
        b: &Artifact,
    ) -> Result<Pairing, MapError> {
        Ok(match map {
            Some("none") => Pairing::Names,
            Some(path) => Pairing::Map(MapFile::read(Path::new(path))?),
            None if gguf_against_source(a, b) => Pairing::Table,
            None => Pairing::Names,
        })
    }

    /// Whether the models are compared as a conversion (anything but equal names).
    pub(crate) fn is_conversion(&self) -> bool {
        !matches!(self, Pairing::Names)
    }

    /// The `--map` rules, if any.
    pub(crate) fn map_file(&self) -> Option<&MapFile> {
        match self {
            Pairing::Map(file) => Some(file),
            _ => None,
        }
    }
}

/// A GGUF on one side and a safetensors or PyTorch model on the other.
fn gguf_against_source(a: &Artifact, b: &Artifact) -> bool {
    matches!(
        (a.format, b.format),
        (Format::Gguf, Format::Safetensors | Format::Pytorch)
            | (Format::Safetensors | Format::Pytorch, Format::Gguf)
    )
}

/// Compares a converted model with its source.
pub(crate) fn compare(
    models: &Models<'_>,
    map: Option<&MapFile>,
) -> Result<Conversion, ConversionError> {
    let plan = pairing::plan(
        models.source.artifact,
        models.target.artifact,
        models.target_name,
        map,
    )?;
    let outcomes = compare::compare(&plan, &models.source, &models.target)?;
    let mut pairs = Vec::new();
    let mut not_compared = plan.not_compared.clone();
    for (planned, outcome) in plan.pairs.iter().zip(outcomes) {
        match outcome {
            compare::Outcome::NotCompared(why) => not_compared.push(NotCompared {
                target: Some(planned.target.clone()),
                sources: planned.sources.clone(),
                why,
            }),
            compare::Outcome::Compared {
                stats,
                other_layout,
            } => {
                let target_dtype = models
                    .target
                    .artifact
                    .tensors
                    .get(&planned.target)
                    .map_or("?", |t| t.dtype.name);
                let mut source_dtypes: Vec<&'static str> = Vec::new();
                for s in &planned.sources {
                    let dtype = models
                        .source
                        .artifact
                        .tensors
                        .get(s)
                        .map_or("?", |t| t.dtype.name);
                    if !source_dtypes.contains(&dtype) {
                        source_dtypes.push(dtype);
                    }
                }
                let suspect = match other_layout {
                    Some(other) => Some(Suspect::Permutation { other }),
                    None => match suspect(&source_dtypes, target_dtype, &stats) {
                        Some(Suspect::Error { bound }) => {
                            let context = diagnose::Context {
                                blocks: match &plan.paired_by {
                                    PairedBy::Table { blocks, .. } => *blocks,
                                    PairedBy::Names => 0,
                                },
                                head_counts: plan.head_counts,
                            };
                            let error = stats.rel_l2.unwrap_or(f64::INFINITY);
                            match diagnose::name(
                                planned,
                                error,
                                bound,
                                &models.source,
                                &models.target,
                                &context,
                            )? {
                                Some(named) => Some(Suspect::Mistake { named, bound }),
                                None => Some(Suspect::Error { bound }),
                            }
                        }
                        other => other,
                    },
                };
                pairs.push(ComparedPair {
                    target: planned.target.clone(),
                    sources: planned.sources.clone(),
                    transform: planned.transform.clone(),
                    source_dtypes,
                    target_dtype,
                    elements: planned.rows.target_elements(),
                    stats,
                    suspect,
                });
            }
        }
    }
    not_compared.sort_by(|a, b| a.target.cmp(&b.target).then(a.sources.cmp(&b.sources)));
    let metadata = match &plan.paired_by {
        PairedBy::Table { architecture, .. } => {
            metadata::check(models.source_path, models.target.artifact, architecture)
        }
        PairedBy::Names => MetadataChecks::default(),
    };
    Ok(Conversion {
        paired_by: plan.paired_by,
        map: plan.map,
        source_tensors: models.source.artifact.tensors.len(),
        target_tensors: models.target.artifact.tensors.len(),
        pairs,
        dropped: plan.dropped,
        added: plan.added,
        not_compared,
        metadata,
        cite: plan.cite,
    })
}

/// The error a target dtype loses on its own, as a bound on rel_l2: beyond it a pair is
/// suspect (a wrong tensor, layout or scale rather than rounding). Bounds are loose on purpose
/// — a few times what the type gives on Gaussian weights.
pub(crate) fn error_bound(source_dtypes: &[&str], target: &str) -> f64 {
    let precision = |d: &str| match d {
        "f64" | "i64" | "u64" => 3,
        "f32" | "i32" | "u32" => 2,
        "f16" | "bf16" | "i16" | "u16" => 1,
        _ => 0,
    };
    let source = source_dtypes
        .iter()
        .map(|d| precision(d))
        .max()
        .unwrap_or(0);
    match target {
        "f64" | "f32" if source <= 2 => 0.0,
        "f64" | "f32" => 1e-6,
        "f16" if source <= 1 && source_dtypes.iter().all(|d| *d == "f16") => 0.0,
        "f16" => 1e-3,
        "bf16" if source_dtypes.iter().all(|d| *d == "bf16") => 0.0,
        "bf16" => 1e-2,
        "q8_0" | "q8_1" | "q8_k" => 0.02,
        "q6_k" => 0.05,
        "q5_0" | "q5_1" | "q5_k" => 0.08,
        "q4_0" | "q4_1" | "q4_k" | "iq4_nl" | "iq4_xs" | "mxfp4" => 0.15,
        "q3_k" | "iq3_xxs" | "iq3_s" => 0.3,
        _ => 0.8,
    }
}

fn suspect(source_dtypes: &[&str], target: &str, stats: &ValueStats) -> Option<Suspect> {
    let bound = error_bound(source_dtypes, target);
    match stats.rel_l2 {
        None => Some(Suspect::FromZero),
        Some(r) if r > bound => Some(Suspect::Error { bound }),
        Some(_) => None,
    }
}

/// The error band of one target dtype: its bound and block size, how many pairs fall outside.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Band {
    pub target_dtype: &'static str,
    pub bound: f64,
    pub block: u64,
    pub pairs: usize,
    pub outside: usize,
}

/// The figures the summary line gives.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Summary {
    pub faithful: bool,
    /// Source tensors that are in a compared pair.
    pub paired_sources: usize,
    pub identical: usize,
    pub suspect: usize,
    /// Median rel_l2 of the changed pairs.
    pub median_rel_l2: Option<f64>,
    /// The changed pair with the largest rel_l2.
    pub worst: Option<usize>,
}

impl Conversion {
    pub(crate) fn summary(&self) -> Summary {
        // A split source is in several pairs: counted once.
        let paired_sources = self
            .pairs
            .iter()
            .flat_map(|p| &p.sources)
            .collect::<std::collections::BTreeSet<_>>()
            .len();
        let identical = self.pairs.iter().filter(|p| p.identical()).count();
        let suspect = self.pairs.iter().filter(|p| p.suspect.is_some()).count();
        let mut changed: Vec<f64> = self
            .pairs
            .iter()
            .filter(|p| !p.identical())
            .map(|p| p.rel_l2().unwrap_or(f64::INFINITY))
            .collect();
        changed.sort_by(f64::total_cmp);
        let median_rel_l2 = (!changed.is_empty()).then(|| {
            let mid = changed.len() / 2;
            if changed.len() % 2 == 1 {
                changed[mid]
            } else {
                f64::midpoint(changed[mid - 1], changed[mid])
            }
        });
        let worst = self
            .pairs
            .iter()
            .enumerate()
            .filter(|(_, p)| !p.identical())
            .max_by(|(_, a), (_, b)| {
                let key = |p: &ComparedPair| p.rel_l2().unwrap_or(f64::INFINITY);
                key(a)
                    .total_cmp(&key(b))
                    .then_with(|| b.target.cmp(&a.target))
            })
            .map(|(i, _)| i);
        Summary {
            faithful: suspect == 0 && !self.pairs.is_empty(),
            paired_sources,
            identical,
            suspect,
            median_rel_l2,
            worst,
        }
    }

    /// The band of each target dtype among the pairs (the loosest bound of its pairs).
    pub(crate) fn bands(&self) -> Vec<Band> {
        let mut bands: Vec<Band> = Vec::new();
        for p in &self.pairs {
            let bound = error_bound(&p.source_dtypes, p.target_dtype);
            let outside = usize::from(p.suspect.is_some());
            match bands.iter_mut().find(|b| b.target_dtype == p.target_dtype) {
                Some(b) => {
                    b.bound = b.bound.max(bound);
                    b.pairs += 1;
                    b.outside += outside;
                }
                None => bands.push(Band {
                    target_dtype: p.target_dtype,
                    bound,
                    block: crate::dtype::by_name(p.target_dtype)
                        .and_then(|d| crate::values::dequant::codec(d, false).ok())
                        .map_or(1, |c| c.block_size),
                    pairs: 1,
                    outside,
                }),
            }
        }
        bands.sort_by(|a, b| {
            a.bound
                .total_cmp(&b.bound)
                .then(a.target_dtype.cmp(b.target_dtype))
        });
        bands
    }

    /// Changed pairs, largest rel_l2 first (suspect ones first of all), then by name.
    pub(crate) fn worst_first(&self) -> Vec<&ComparedPair> {
        let mut changed: Vec<&ComparedPair> =
            self.pairs.iter().filter(|p| !p.identical()).collect();
        changed.sort_by(|a, b| {
            let key = |p: &ComparedPair| p.rel_l2().unwrap_or(f64::INFINITY);
            b.suspect
                .is_some()
                .cmp(&a.suspect.is_some())
                .then(key(b).total_cmp(&key(a)))
                .then_with(|| a.target.cmp(&b.target))
        });
        changed
    }

    /// Whether the two models hold different values or tensors (the exit status follows it).
    pub(crate) fn differs(&self) -> bool {
        self.pairs.iter().any(|p| !p.identical())
            || !self.dropped.is_empty()
            || !self.added.is_empty()
            || !self.not_compared.is_empty()
    }
}

impl Conversion {
    /// The pairs as a value diff named by the converted model's tensors (source dtype → target
    /// dtype), for the views value diffs have (per layer, heatmap).
    pub(crate) fn as_value_diff(&self) -> crate::values::ValueDiff {
        crate::values::ValueDiff {
            tensors: self
                .pairs
                .iter()
                .map(|p| crate::values::TensorValues {
                    name: p.target.clone(),
                    old_dtype: p.source_dtypes.first().copied().unwrap_or("?"),
                    new_dtype: p.target_dtype,
                    elements: p.elements,
                    changed: !p.identical(),
                    method: crate::values::Method::Values,
                    stats: Some(p.stats),
                    bits_differ: None,
                    sums: None,
                })
                .collect(),
            skipped: self
                .not_compared
                .iter()
                .filter_map(|n| {
                    Some(crate::values::Skipped {
                        name: n.target.clone()?,
                        reason: n.why.clone(),
                    })
                })
                .collect(),
        }
    }
}
