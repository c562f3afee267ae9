//! The description of a `.wdelta` file (for `inspect`, `id`, `delta inspect` and git
//! textconv): version, strategy, parent hash, sizes, then one line per tensor in name order.

use serde::Serialize;

use crate::escape::shown;
use crate::formats::wdelta::lossless::{self, LosslessContainer, SegmentKind};
use crate::formats::wdelta::{self, AnyWdelta, DeltaSummary, Params, WdeltaFile};

/// A `.wdelta` read whole: the line every reader shows for it ([`summary_line`]), then its
/// description.
pub(crate) fn summary_and_description(delta: &AnyWdelta) -> String {
    let head = format!("delta: {}\n", summary_line(&delta.summary()));
    match delta {
        AnyWdelta::Lossy(file) => describe_after(head, file),
        AnyWdelta::Lossless(c) => describe_lossless_after(head, c),
    }
}

/// The description of a delta of any version as JSON (`"schema": 1` first), one line.
pub(crate) fn describe_any_json(delta: &AnyWdelta) -> String {
    match delta {
        AnyWdelta::Lossy(file) => describe_json(file),
        AnyWdelta::Lossless(c) => describe_lossless_json(c),
    }
}

/// The one line every reader of a repository shows for a `.wdelta` (git's fast path and
/// driver, textconv's `delta:` line, `ci`, `inspect REV:path`): version and strategy, whether it
/// is exact, parent hash, tensors changed, size, and for a lossy delta what it loses.
pub(crate) fn summary_line(d: &DeltaSummary) -> String {
    let exact = if d.is_lossless() {
        "exact"
    } else {
        "approximate"
    };
    let mut s = format!(
        ".wdelta version {}, {} ({exact}): parent hash {}, ",
        d.version,
        d.strategy,
        shown(&d.parent_hash)
    );
    if d.is_lossless() {
        s.push_str(&format!(
            "{} of {} tensors changed",
            d.tensors_changed, d.tensors
        ));
    } else {
        s.push_str(&format!("{} tensors changed", d.tensors_changed));
    }
    if let Some(format) = &d.model_format {
        s.push_str(&format!(", {} model", shown(format)));
    }
    s.push_str(&format!(", {} bytes", d.file_size));
    if let Some(loss) = &d.loss {
        s.push_str(", ");
        s.push_str(&loss_summary(loss));
    }
    s
}

#[derive(Serialize)]
struct SummaryJson<'a> {
    schema: u32,
    format: &'static str,
    version: u32,
    strategy: &'static str,
    lossless: bool,
    parent_hash: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    model_format: Option<&'a str>,
    tensors: u64,
    tensors_changed: u64,
    file_size: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    loss: Option<&'a wdelta::LossFigures>,
}

/// [`summary_line`] as JSON (`"schema": 1` first), for a delta whose header alone was read.
pub(crate) fn summary_json(d: &DeltaSummary) -> String {
    let j = SummaryJson {
        schema: crate::identity::SCHEMA_VERSION,
        format: "wdelta",
        version: d.version,
        strategy: d.strategy,
        lossless: d.is_lossless(),
        parent_hash: &d.parent_hash,
        model_format: d.model_format.as_deref(),
        tensors: d.tensors,
        tensors_changed: d.tensors_changed,
        file_size: d.file_size,
        loss: d.loss.as_ref(),
    };
    serde_json::to_string(&j).expect("the summary serializes")
}

/// The loss figures in one clause: the model's, then the tensors that lost most.
fn loss_summary(loss: &wdelta::LossFigures) -> String {
    let figure = |v: Option<f64>, places: usize| match v {
        Some(v) => format!("{v:.places$}"),
        None => "infinite".to_string(),
    };
    let mut s = format!(
        "update lost {} (rel_l2 {}) as measured by create",
        figure(loss.update_lost, 4),
        figure(loss.rel_l2, 6)
    );
    if let Some(name) = &loss.worst_tensor {
        s.push_str(&format!(
            "; most update lost: {} ({})",
            shown(name),
            figure(loss.worst_update_lost, 4)
        ));
    }
    if let Some(name) = &loss.largest_rel_l2_tensor {
        s.push_str(&format!(
            "; largest rel_l2: {} ({})",
            shown(name),
            figure(loss.largest_rel_l2, 6)
        ));
    }
    s
}

/// Dense size of a tensor: its element count times the size of its base dtype (float32 when
/// the file does not record it, as in version 1).
fn dense_bytes(entry: &wdelta::TensorEntry) -> u64 {
    let size = match entry.base_dtype.as_deref() {
        Some("float64") => 8,
        Some("float16" | "bfloat16") => 2,
        _ => 4,
    };
    entry.n_elements().unwrap_or(0).saturating_mul(size)
}

/// A stable multi-line description: version, strategy, parent hash, sizes, then one line per
/// tensor in name order. Names and texts of the file are shown escaped.
pub fn describe(file: &WdeltaFile) -> String {
    describe_after(String::new(), file)
}

/// [`describe`] appended to `s` (a line before it without copying the description again).
pub(crate) fn describe_after(mut s: String, file: &WdeltaFile) -> String {
    use std::fmt::Write as _;
    let h = &file.header;
    let dense: u64 = h.tensors.values().map(dense_bytes).sum();
    // Sized up front: a description of many tensors is as long as their names, and a string
    // grown by doubling would hold up to twice that (and both copies while it grows).
    s.reserve_exact(estimate(file));
    let _ = writeln!(s, "format: wdelta version {}", file.version);
    let _ = writeln!(s, "strategy: {}", h.strategy.name());
    let _ = writeln!(s, "parent hash: {}", shown(&h.parent_hash));
    let _ = writeln!(s, "tensors: {}", h.tensors.len());
    let _ = writeln!(s, "file size: {} bytes", file.file_len);
    let _ = writeln!(s, "dense size: {dense} bytes");
    let _ = writeln!(
        s,
        "compression ratio: {}",
        ratio_text(dense, file.file_len as u64)
    );
    if let Some(loss) = &h.loss {
        s.push_str(&loss_text(loss));
    }
    for (position, (name, e)) in h.tensors.iter().enumerate() {
        let _ = write!(s, "tensor {}: {} [", shown(name), e.strategy().name());
        for (i, d) in e.shape.iter().enumerate() {
            let sep = if i == 0 { "" } else { ", " };
            let _ = write!(s, "{sep}{d}");
        }
        let _ = write!(s, "] {} bytes", file.tensor_bytes_at(position));
        if let Some(b) = &e.base_dtype {
            let _ = write!(s, " base {}", shown(b));
        }
        match e.params {
            Params::Sparse { sparsity } => {
                let _ = write!(s, " sparsity {sparsity}");
            }
            Params::Quantized { .. } => {}
            Params::Int4 {
                outlier_fraction,
                n_outliers,
                layout,
                ..
            } => {
                let _ = write!(
                    s,
                    " outliers {n_outliers} (fraction {outlier_fraction}) layout {layout}"
                );
            }
        }
        s.push('\n');
    }
    s
}

/// The loss figures `create` recorded, as it printed them (a null figure is infinite: a zero
/// update that did not come back exactly).
fn loss_text(loss: &wdelta::LossFigures) -> String {
    let figure = |v: Option<f64>, places: usize| match v {
        Some(v) => format!("{v:.places$}"),
        None => "infinite".to_string(),
    };
    let mut s = format!(
        "lossy: rebuilt vs fine-tune rel_l2 {}, update lost {} over the model (measured by create)\n",
        figure(loss.rel_l2, 6),
        figure(loss.update_lost, 4)
    );
    if let Some(name) = &loss.worst_tensor {
        s.push_str(&format!(
            "most update lost: {} rel_l2 {}, update lost {}\n",
            shown(name),
            figure(loss.worst_rel_l2, 6),
            figure(loss.worst_update_lost, 4)
        ));
    }
    if let Some(name) = &loss.largest_rel_l2_tensor {
        s.push_str(&format!(
            "largest rel_l2: {} rel_l2 {}, update lost {}\n",
            shown(name),
            figure(loss.largest_rel_l2, 6),
            figure(loss.largest_rel_l2_update_lost, 4)
        ));
    }
    s
}

/// Bytes of a description, about: each tensor's name, dtype strings and dimensions and room for
/// the rest of its line or object (capacity never written costs no memory).
fn estimate(file: &WdeltaFile) -> usize {
    file.header
        .tensors
        .iter()
        .map(|(name, e)| {
            name.len()
                + e.dtype.len()
                + e.base_dtype
                    .as_ref()
                    .map_or(0, compact_str::CompactString::len)
                + 22 * e.shape.len()
                + 200
        })
        .fold(1024usize, usize::saturating_add)
}

fn ratio(dense: u64, file: u64) -> f64 {
    if file == 0 {
        0.0
    } else {
        dense as f64 / file as f64
    }
}

fn ratio_text(dense: u64, file: u64) -> String {
    format!("{:.2}x", ratio(dense, file))
}

#[derive(Serialize)]
struct DescribeJson<'a> {
    schema: u32,
    format: &'static str,
    version: u32,
    strategy: &'static str,
    parent_hash: &'a str,
    file_bytes: u64,
    dense_bytes: u64,
    compression_ratio: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    loss: Option<&'a wdelta::LossFigures>,
    tensors: Vec<TensorJson<'a>>,
}

#[derive(Serialize)]
struct TensorJson<'a> {
    name: &'a str,
    strategy: &'static str,
    shape: &'a wdelta::PackedShape,
    dtype: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    base_dtype: Option<&'a str>,
    n_elements: u64,
    bytes: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    sparsity: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    outlier_fraction: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    n_outliers: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    int4_layout: Option<u32>,
}

/// The description as JSON (`"schema": 1` first), one line.
pub fn describe_json(file: &WdeltaFile) -> String {
    let h = &file.header;
    let dense: u64 = h.tensors.values().map(dense_bytes).sum();
    let tensors = h
        .tensors
        .iter()
        .enumerate()
        .map(|(position, (name, e))| {
            let (sparsity, outlier_fraction, n_outliers, int4_layout) = match e.params {
                Params::Sparse { sparsity } => (Some(sparsity), None, None, None),
                Params::Quantized { .. } => (None, None, None, None),
                Params::Int4 {
                    outlier_fraction,
                    n_outliers,
                    layout,
                    ..
                } => (None, Some(outlier_fraction), Some(n_outliers), Some(layout)),
            };
            TensorJson {
                name,
                strategy: e.strategy().name(),
                shape: &e.shape,
                dtype: &e.dtype,
                base_dtype: e.base_dtype.as_deref(),
                n_elements: e.n_elements().unwrap_or(0),
                bytes: file.tensor_bytes_at(position),
                sparsity,
                outlier_fraction,
                n_outliers,
                int4_layout,
            }
        })
        .collect();
    let out = DescribeJson {
        schema: crate::identity::SCHEMA_VERSION,
        format: "wdelta",
        version: file.version,
        strategy: h.strategy.name(),
        parent_hash: &h.parent_hash,
        file_bytes: file.file_len as u64,
        dense_bytes: dense,
        compression_ratio: (ratio(dense, file.file_len as u64) * 100.0).round() / 100.0,
        loss: h.loss.as_ref(),
        tensors,
    };
    // Sized up front, as in `describe` (JSON escapes may still make it grow).
    let mut buf = Vec::with_capacity(estimate(file));
    serde_json::to_writer(&mut buf, &out).expect("serializable");
    String::from_utf8(buf).expect("serde_json writes UTF-8")
}

/// How many chunks of a lossless delta are stored which way.
#[derive(Debug, Default, Serialize)]
struct ChunkCounts {
    /// Stored as differences from the base's bytes (subtracted or XORed, as the codec does;
    /// the JSON key keeps its first name).
    xor: u64,
    /// Equal to the base's bytes: no frame.
    unchanged: u64,
    /// Tensors the base lacks or has in another dtype or shape.
    whole: u64,
    /// Headers, metadata and padding.
    other: u64,
}

fn chunk_counts(c: &LosslessContainer) -> ChunkCounts {
    let mut n = ChunkCounts::default();
    for k in &c.chunks {
        let kind = c
            .header
            .files
            .get(k.file as usize)
            .and_then(|f| f.segments.get(k.segment as usize))
            .map(|s| s.kind);
        match kind {
            Some(SegmentKind::Delta) if k.frame_len == 0 => n.unchanged += 1,
            Some(SegmentKind::Delta) => n.xor += 1,
            Some(SegmentKind::Whole) => n.whole += 1,
            _ => n.other += 1,
        }
    }
    n
}

/// What a lossless (version 3) delta holds, per segment kind and per tensor.
fn lossless_summary(c: &LosslessContainer) -> (u64, Vec<(String, &'static str, u64, u64)>) {
    // (tensor, how it is stored, bytes, stored frame bytes)
    let mut tensors = Vec::new();
    let mut other_frames = 0u64;
    for (s, frames) in c.segment_frames() {
        let how = match s.kind {
            SegmentKind::Bytes => {
                other_frames += frames;
                continue;
            }
            SegmentKind::Whole => "whole",
            SegmentKind::Delta if frames == 0 => "unchanged",
            SegmentKind::Delta => "changed",
        };
        tensors.push((s.tensor.clone().unwrap_or_default(), how, s.len, frames));
    }
    tensors.sort_by(|a, b| a.0.cmp(&b.0));
    (other_frames, tensors)
}

/// The description of a lossless delta (`delta inspect`), appended to `s`.
pub(crate) fn describe_lossless_after(mut s: String, c: &LosslessContainer) -> String {
    use std::fmt::Write as _;
    let h = &c.header;
    let (other, tensors) = lossless_summary(c);
    let model: u64 = h.files.iter().map(|f| f.size).sum();
    let _ = writeln!(s, "format: wdelta version {}", lossless::LOSSLESS_VERSION);
    let _ = writeln!(
        s,
        "strategy: lossless (rebuilds the fine-tuned files byte for byte)"
    );
    let _ = writeln!(s, "parent hash: {}", shown(&h.parent_hash));
    if let Some(format) = &h.format {
        let _ = writeln!(s, "model format: {}", shown(format));
    }
    let _ = writeln!(s, "file size: {} bytes", c.file_len);
    let _ = writeln!(s, "model size: {model} bytes");
    if c.file_len > 0 {
        let _ = writeln!(
            s,
            "compression ratio: {:.2}x",
            model as f64 / c.file_len as f64
        );
    }
    let count = |how: &str| tensors.iter().filter(|t| t.1 == how).count();
    let _ = writeln!(
        s,
        "tensors: {} ({} unchanged, {} changed, {} stored whole)",
        tensors.len(),
        count("unchanged"),
        count("changed"),
        count("whole")
    );
    let n = chunk_counts(c);
    let _ = writeln!(
        s,
        "chunks: {} ({} stored as differences from the base, {} unchanged, {} stored whole, {} other)",
        c.chunks.len(),
        n.xor,
        n.unchanged,
        n.whole,
        n.other
    );
    let _ = writeln!(
        s,
        "other bytes (headers, metadata, padding): {other} bytes stored"
    );
    for f in &h.files {
        let _ = writeln!(
            s,
            "file {}: {} bytes sha256 {}",
            shown(&f.name),
            f.size,
            f.sha256
        );
    }
    for (name, how, len, frames) in &tensors {
        let _ = writeln!(
            s,
            "tensor {}: {how} {len} bytes, {frames} stored",
            shown(name)
        );
    }
    s
}

#[derive(Serialize)]
struct LosslessTensorJson<'a> {
    name: &'a str,
    stored: &'a str,
    bytes: u64,
    stored_bytes: u64,
}

#[derive(Serialize)]
struct LosslessJson<'a> {
    schema: u32,
    format: &'static str,
    version: u32,
    strategy: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    model_format: Option<&'a str>,
    chunks: ChunkCounts,
    lossless: bool,
    parent_hash: &'a str,
    file_size: u64,
    model_size: u64,
    other_stored_bytes: u64,
    files: Vec<LosslessFileJson<'a>>,
    tensors: Vec<LosslessTensorJson<'a>>,
}

#[derive(Serialize)]
struct LosslessFileJson<'a> {
    name: &'a str,
    size: u64,
    sha256: &'a str,
}

/// [`describe_lossless_after`] as one JSON object, `"schema": 1` first.
pub(crate) fn describe_lossless_json(c: &LosslessContainer) -> String {
    let (other, tensors) = lossless_summary(c);
    let j = LosslessJson {
        schema: crate::identity::SCHEMA_VERSION,
        format: "wdelta",
        version: lossless::LOSSLESS_VERSION,
        strategy: lossless::LOSSLESS_STRATEGY,
        model_format: c.header.format.as_deref(),
        chunks: chunk_counts(c),
        lossless: true,
        parent_hash: &c.header.parent_hash,
        file_size: c.file_len,
        model_size: c.header.files.iter().map(|f| f.size).sum(),
        other_stored_bytes: other,
        files: c
            .header
            .files
            .iter()
            .map(|f| LosslessFileJson {
                name: &f.name,
                size: f.size,
                sha256: &f.sha256,
            })
            .collect(),
        tensors: tensors
            .iter()
            .map(|(name, how, len, frames)| LosslessTensorJson {
                name,
                stored: how,
                bytes: *len,
                stored_bytes: *frames,
            })
            .collect(),
    };
    serde_json::to_string(&j).expect("the description serializes")
}
