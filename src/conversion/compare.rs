//! The values of planned pairs: each converted tensor is streamed in pieces in its own order,
//! dequantized, and compared with the source elements its row map points at (decoded from the
//! source's bytes, or gathered from a PyTorch view), in parallel. Pages read are released
//! behind each piece, so the resident set stays bounded whatever the models' size.

use rayon::prelude::*;

use super::layout::{Part, RowMap};
use super::pairing::{Plan, PlannedPair};
use crate::values::dequant::{self, Codec};
use crate::values::{
    ModelBytes, Side, Sums, TensorBytes, ValueStats, ValuesError, byte_range, tensor_bytes,
};

/// Target elements per piece of work (a multiple of every block size).
const PIECE: u64 = 1 << 18;
/// Elements decoded at a time inside a piece.
const STRIDE: u64 = 1 << 12;

/// What the comparison found for a planned pair.
#[derive(Debug, Clone)]
pub(super) enum Outcome {
    Compared {
        stats: ValueStats,
        /// Undoing the other Q/K layout matches better: the converter (or the file) permuted
        /// the rows differently from what the architecture calls for.
        other_layout: Option<ValueStats>,
    },
    NotCompared(String),
}

/// A tensor's bytes and how to decode them.
struct Operand<'a> {
    bytes: TensorBytes<'a>,
    file: &'a ModelBytes,
    codec: Codec,
}

struct Work<'a> {
    target: Operand<'a>,
    sources: Vec<Operand<'a>>,
    rows: RowMap,
    /// Added to each source value, rounded as the source's dtype rounds (the converter adds in
    /// the source's dtype).
    plus: f64,
    round: fn(f64) -> f64,
}

/// Rounding to a source dtype, for values the converter computed in that dtype.
fn rounding(dtype: &str) -> fn(f64) -> f64 {
    match dtype {
        "f32" => |v| f64::from(v as f32),
        "f16" => |v| half::f16::from_f64(v).to_f64(),
        "bf16" => |v| half::bf16::from_f64(v).to_f64(),
        _ => |v| v,
    }
}

/// Compares every planned pair; `Outcome`s are in the plan's order.
pub(super) fn compare(
    plan: &Plan,
    source: &Side<'_>,
    target: &Side<'_>,
) -> Result<Vec<Outcome>, ValuesError> {
    let mut outcomes: Vec<Option<Outcome>> = vec![None; plan.pairs.len()];
    let mut works: Vec<(usize, Work)> = Vec::new();
    for (index, pair) in plan.pairs.iter().enumerate() {
        match prepare(pair, &pair.rows, pair.plus, source, target)? {
            Ok(work) => works.push((index, work)),
            Err(why) => outcomes[index] = Some(Outcome::NotCompared(why.to_string())),
        }
    }
    let sums = run(&works);
    // A Q/K tensor far from its source: try the other layout, to name a wrong permutation.
    let mut retry = Vec::new();
    for ((index, _), total) in works.iter().zip(&sums) {
        let stats = ValueStats::from_sums(total);
        let pair = &plan.pairs[*index];
        if pair.heads.is_some() && stats.rel_l2.is_none_or(|r| r > RETRY_ABOVE) {
            let other = other_layout(&pair.rows);
            if let Ok(work) = prepare(pair, &other, pair.plus, source, target)? {
                retry.push((*index, work));
            }
        }
        outcomes[*index] = Some(Outcome::Compared {
            stats,
            other_layout: None,
        });
    }
    let retried = run(&retry);
    for ((index, _), total) in retry.iter().zip(&retried) {
        let other = ValueStats::from_sums(total);
        if let Some(Outcome::Compared {
            stats,
            other_layout,
        }) = &mut outcomes[*index]
        {
            let better = match (stats.rel_l2, other.rel_l2) {
                (_, None) => false,
                (None, Some(_)) => true,
                (Some(planned), Some(alternative)) => alternative < planned / 4.0,
            };
            if better {
                *other_layout = Some(other);
            }
        }
    }
    Ok(outcomes
        .into_iter()
        .map(|o| o.expect("every pair has an outcome"))
        .collect())
}

/// rel_l2 above which a Q/K pair is compared again in the other layout.
const RETRY_ABOVE: f64 = 0.3;

/// The same rows without the permutation, or permuted where they were not.
fn other_layout(rows: &RowMap) -> RowMap {
    RowMap {
        parts: rows
            .parts
            .iter()
            .map(|p| Part {
                heads: None,
                ..p.clone()
            })
            .collect(),
        ..rows.clone()
    }
}

/// Why a planned pair is not compared (the report's `why`).
#[derive(Debug, thiserror::Error)]
enum Uncomparable {
    #[error("{0} is not in the converted model")]
    TargetMissing(String),
    #[error("{target} has {found} elements, its sources make {expected}")]
    TargetElements {
        target: String,
        found: u64,
        expected: u64,
    },
    #[error(
        "source tensor {0} is block-quantized; only plain numbers are read as a conversion's \
         source"
    )]
    SourceQuantized(String),
    #[error("{0} is not in the source model")]
    SourceMissing(String),
    #[error("{name} has {available} elements, the layout reads {needed}")]
    SourceElements {
        name: String,
        available: u64,
        needed: u64,
    },
    #[error("{name}: {dtype} is not dequantized: {why}")]
    NotDecoded {
        name: String,
        dtype: String,
        why: &'static str,
    },
}

/// The operands of a pair, or why it cannot be compared.
fn prepare<'a>(
    pair: &PlannedPair,
    rows: &RowMap,
    plus: f64,
    source: &Side<'a>,
    target: &Side<'a>,
) -> Result<Result<Work<'a>, Uncomparable>, ValuesError> {
    let Some(target_op) = operand(target, &pair.target)? else {
        return Ok(Err(Uncomparable::TargetMissing(pair.target.clone())));
    };
    let target_op = match target_op {
        Ok(op) => op,
        Err(why) => return Ok(Err(why)),
    };
    let expected = rows.target_elements();
    let target_elements = element_count(target, &pair.target);
    if expected != target_elements {
        return Ok(Err(Uncomparable::TargetElements {
            target: pair.target.clone(),
            found: target_elements,
            expected,
        }));
    }
    let mut sources = Vec::with_capacity(pair.sources.len());
    for name in &pair.sources {
        match operand(source, name)? {
            Some(Ok(op)) if op.codec.block_size == 1 => sources.push(op),
            Some(Ok(_)) => return Ok(Err(Uncomparable::SourceQuantized(name.clone()))),
            Some(Err(why)) => return Ok(Err(why)),
            None => return Ok(Err(Uncomparable::SourceMissing(name.clone()))),
        }
    }
    // Every source row the map reads must be inside its tensor.
    for part in &rows.parts {
        let available = element_count(source, &pair.sources[part.source]);
        let needed = if rows.transposed {
            (part.skip_rows + rows.cols) * part.rows
        } else {
            (part.rows + part.skip_rows) * rows.cols
        };
        if needed > available {
            return Ok(Err(Uncomparable::SourceElements {
                name: pair.sources[part.source].clone(),
                available,
                needed,
            }));
        }
    }
    let source_dtype = source
        .artifact
        .tensors
        .get(&pair.sources[0])
        .map_or("", |t| t.dtype.name);
    Ok(Ok(Work {
        target: target_op,
        sources,
        rows: rows.clone(),
        plus,
        round: rounding(source_dtype),
    }))
}

fn element_count(side: &Side<'_>, name: &str) -> u64 {
    side.artifact
        .tensors
        .get(name)
        .map_or(0, super::super::artifact::TensorInfo::n_elements)
}

/// A tensor's operand: None when the model has no such tensor, Err(why) when it cannot be
/// decoded.
fn operand<'a>(
    side: &Side<'a>,
    name: &str,
) -> Result<Option<Result<Operand<'a>, Uncomparable>>, ValuesError> {
    let Some(position) = side.artifact.tensors.position(name) else {
        return Ok(None);
    };
    let (name, info) = side
        .artifact
        .tensors
        .get_index(position)
        .expect("position found");
    let codec = match dequant::codec(info.dtype, side.artifact.layout.big_endian) {
        Ok(codec) => codec,
        Err(why) => {
            return Ok(Some(Err(Uncomparable::NotDecoded {
                name: name.to_owned(),
                dtype: info.dtype.to_string(),
                why: why.describe(),
            })));
        }
    };
    let file = side.file_at(position)?;
    let bytes = tensor_bytes(file, name, info, &codec, side.view_at(position))?;
    Ok(Some(Ok(Operand { bytes, file, codec })))
}

/// The sums of each work, in parallel over pieces of all of them.
fn run(works: &[(usize, Work)]) -> Vec<Sums> {
    let mut pieces = Vec::new();
    for (w, (_, work)) in works.iter().enumerate() {
        let elements = work.rows.target_elements();
        let mut start = 0;
        while start < elements {
            let end = (start + PIECE).min(elements);
            pieces.push((w, start, end));
            start = end;
        }
    }
    let results: Vec<(usize, Sums)> = pieces
        .par_iter()
        .map_init(Buffers::new, |buffers, &(w, start, end)| {
            (w, compare_piece(&works[w].1, start, end, buffers))
        })
        .collect();
    let mut totals = vec![Sums::default(); works.len()];
    for (w, sums) in results {
        totals[w].merge(&sums);
    }
    totals
}

struct Buffers {
    source: Vec<f64>,
    target: Vec<f64>,
    source_bytes: Vec<u8>,
    target_bytes: Vec<u8>,
    /// Per source tensor, the elements a piece read: [first, end).
    source_spans: Vec<Option<(u64, u64)>>,
}

impl Buffers {
    fn new() -> Buffers {
        Buffers {
            source: vec![0.0; STRIDE as usize],
            target: vec![0.0; STRIDE as usize],
            source_bytes: Vec::new(),
            target_bytes: Vec::new(),
            source_spans: Vec::new(),
        }
    }
}

fn compare_piece(work: &Work, start: u64, end: u64, buffers: &mut Buffers) -> Sums {
    let mut sums = Sums::default();
    buffers.source_spans.clear();
    buffers.source_spans.resize(work.sources.len(), None);
    let mut at = start;
    while at < end {
        let to = (at + STRIDE).min(end);
        let n = (to - at) as usize;
        let raw = work
            .target
            .bytes
            .elements(&work.target.codec, at, to, &mut buffers.target_bytes);
        (work.target.codec.decode)(raw, &mut buffers.target[..n]);
        fill_source(
            work,
            at,
            to,
            &mut buffers.source[..n],
            &mut buffers.source_bytes,
            &mut buffers.source_spans,
        );
        add(work, &mut buffers.source[..n]);
        sums.merge(&Sums::of(&buffers.source[..n], &buffers.target[..n]));
        at = to;
    }
    release(&work.target, start, end);
    for (source, span) in work.sources.iter().zip(&buffers.source_spans) {
        if let Some((first, end)) = span {
            release(source, *first, *end);
        }
    }
    sums
}

fn add(work: &Work, values: &mut [f64]) {
    if work.plus != 0.0 {
        for v in values {
            *v = (work.round)(*v + work.plus);
        }
    }
}

/// A pair's values, whole: the expected (from the sources) and the found (the converted).
pub(super) type Values = (Vec<f64>, Vec<f64>);

/// The values of a pair, whole: the converted tensor's and its sources' in the converted
/// order (with `rows` and `plus` in place of the plan's), for naming what went wrong with a
/// suspect pair. None when the pair cannot be read so or has more than `limit` elements.
pub(super) fn materialize(
    pair: &PlannedPair,
    rows: &RowMap,
    plus: f64,
    source: &Side<'_>,
    target: &Side<'_>,
    limit: u64,
) -> Result<Option<Values>, ValuesError> {
    if rows.target_elements() > limit {
        return Ok(None);
    }
    let Ok(work) = prepare(pair, rows, plus, source, target)? else {
        return Ok(None);
    };
    let total = rows.target_elements();
    let mut expected = vec![0.0; total as usize];
    let mut found = vec![0.0; total as usize];
    let (mut scratch, mut spans) = (Vec::new(), vec![None; work.sources.len()]);
    let mut at = 0;
    while at < total {
        let to = (at + STRIDE).min(total);
        let (a, b) = (at as usize, to as usize);
        let raw = work
            .target
            .bytes
            .elements(&work.target.codec, at, to, &mut scratch);
        (work.target.codec.decode)(raw, &mut found[a..b]);
        fill_source(&work, at, to, &mut expected[a..b], &mut scratch, &mut spans);
        add(&work, &mut expected[a..b]);
        at = to;
    }
    Ok(Some((expected, found)))
}

/// Lets the kernel drop the pages of elements [start, end) from this process's resident set.
/// A page another piece still needs (a row shared at a boundary, a permuted head) is read back
/// from the page cache when touched: releasing early costs a fault, never a wrong value.
fn release(operand: &Operand, start: u64, end: u64) {
    if let TensorBytes::Run(bytes) = operand.bytes {
        operand
            .file
            .release(byte_range(bytes, &operand.codec, start, end));
    }
}

/// The source values of target elements [at, to), in target order; `spans` grows to cover the
/// source elements read (transposed sources are not tracked: they are read by columns).
fn fill_source(
    work: &Work,
    at: u64,
    to: u64,
    out: &mut [f64],
    scratch: &mut Vec<u8>,
    spans: &mut [Option<(u64, u64)>],
) {
    let cols = work.rows.cols;
    if work.rows.transposed {
        for i in at..to {
            let (s, element) = work.rows.transposed_element(i);
            let source = &work.sources[s];
            let raw = source
                .bytes
                .elements(&source.codec, element, element + 1, scratch);
            let k = (i - at) as usize;
            (source.codec.decode)(raw, &mut out[k..=k]);
        }
        return;
    }
    let mut i = at;
    while i < to {
        let (row, in_row) = (i / cols, i % cols);
        let len = (cols - in_row).min(to - i);
        let (s, source_row) = work.rows.source_row(row);
        let source = &work.sources[s];
        let first = source_row * cols + in_row;
        let span = &mut spans[s];
        *span = Some(match *span {
            Some((lo, hi)) => (lo.min(first), hi.max(first + len)),
            None => (first, first + len),
        });
        let raw = source
            .bytes
            .elements(&source.codec, first, first + len, scratch);
        let k = (i - at) as usize;
        (source.codec.decode)(raw, &mut out[k..k + len as usize]);
        i += len;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uncomparable_pairs_say_why() {
        let name = || "blk.0.attn_q.weight".to_owned();
        let cases = [
            (
                Uncomparable::TargetMissing(name()),
                "blk.0.attn_q.weight is not in the converted model",
            ),
            (
                Uncomparable::TargetElements {
                    target: name(),
                    found: 12,
                    expected: 16,
                },
                "blk.0.attn_q.weight has 12 elements, its sources make 16",
            ),
            (
                Uncomparable::SourceQuantized(name()),
                "source tensor blk.0.attn_q.weight is block-quantized; only plain numbers are \
                 read as a conversion's source",
            ),
            (
                Uncomparable::SourceMissing(name()),
                "blk.0.attn_q.weight is not in the source model",
            ),
            (
                Uncomparable::SourceElements {
                    name: name(),
                    available: 8,
                    needed: 9,
                },
                "blk.0.attn_q.weight has 8 elements, the layout reads 9",
            ),
            (
                Uncomparable::NotDecoded {
                    name: name(),
                    dtype: "IQ1_M".to_owned(),
                    why: dequant::NotDecoded::UnsupportedType.describe(),
                },
                "blk.0.attn_q.weight: IQ1_M is not dequantized: no dequantizer for this type",
            ),
        ];
        for (why, message) in cases {
            assert_eq!(why.to_string(), message);
        }
    }
}
