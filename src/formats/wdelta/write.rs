//! Writing a `.wdelta` file: the JSON header as the reference writes it, record framing, and a
//! streaming writer that appends the checksum.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write;

use sha2::{Digest, Sha256};

use super::types::{ArrayDtype, CHECKSUM_LEN, Header, LossFigures, MAGIC, Params};

/// One array to write.
#[derive(Debug, Clone, PartialEq)]
pub struct OwnedArray {
    /// The record's field name (`values`, `indices`, `scales`, ...).
    pub field: &'static str,
    /// The element type of `data`.
    pub dtype: ArrayDtype,
    /// The array's shape.
    pub shape: Vec<u64>,
    /// The elements, little-endian.
    pub data: Vec<u8>,
}

/// Serializes the JSON header. Keys come in the order the reference writes them (strategy,
/// shape, dtype, scalars, array references), tensors sorted by name; version 2 adds
/// `base_dtype` and, for int4, `int4_layout`.
pub fn header_json(header: &Header, version: u32) -> Vec<u8> {
    header_json_padded(header, version, 0)
}

/// The header as [`header_json`] writes it, made exactly `room` bytes long by spaces after the
/// `loss` value (JSON whitespace), or `None` when it has no `loss` or does not fit. `create`
/// writes the header with the room [`widest_loss`] takes before the figures are known, and
/// this one over it once they are.
pub(crate) fn header_json_in_room(header: &Header, version: u32, room: usize) -> Option<Vec<u8>> {
    let len = header_json(header, version).len();
    (header.loss.is_some() && len <= room).then(|| header_json_padded(header, version, room - len))
}

/// Loss figures that serialize at least as long as any a header of these tensor names can hold:
/// the longest name, and every figure at the longest a float64 prints.
pub(crate) fn widest_loss<'a>(names: impl IntoIterator<Item = &'a str>) -> LossFigures {
    let worst = names.into_iter().max_by_key(|n| json_str(n).len());
    // 17 significant digits, a sign and a three-digit exponent: the longest float64 in JSON.
    let widest = Some(-2.2250738585072014e-308);
    LossFigures {
        rel_l2: widest,
        update_lost: widest,
        worst_tensor: worst.map(str::to_string),
        worst_rel_l2: widest,
        worst_update_lost: widest,
        largest_rel_l2_tensor: worst.map(str::to_string),
        largest_rel_l2: widest,
        largest_rel_l2_update_lost: widest,
    }
}

fn header_json_padded(header: &Header, version: u32, pad: usize) -> Vec<u8> {
    let mut s = String::new();
    s.push_str("{\"parent_hash\":");
    s.push_str(&json_str(&header.parent_hash));
    s.push_str(",\"strategy\":");
    s.push_str(&json_str(header.strategy.name()));
    if let Some(metadata) = &header.metadata {
        s.push_str(",\"metadata\":{");
        for (i, (k, v)) in metadata.iter().enumerate() {
            if i > 0 {
                s.push(',');
            }
            s.push_str(&json_str(k));
            s.push(':');
            s.push_str(&json_str(v));
        }
        s.push('}');
    }
    if let Some(loss) = &header.loss {
        s.push_str(",\"loss\":");
        s.push_str(&serde_json::to_string(loss).expect("loss figures serialize"));
        s.extend(std::iter::repeat_n(' ', pad));
    }
    s.push_str(",\"tensors\":{");
    for (i, (name, e)) in header.tensors.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&json_str(name));
        s.push_str(":{\"strategy\":");
        s.push_str(&json_str(e.strategy().name()));
        s.push_str(",\"shape\":[");
        let dims: Vec<String> = e.shape.iter().map(|d| d.to_string()).collect();
        s.push_str(&dims.join(","));
        s.push_str("],\"dtype\":");
        s.push_str(&json_str(&e.dtype));
        if version >= 2
            && let Some(b) = &e.base_dtype
        {
            s.push_str(",\"base_dtype\":");
            s.push_str(&json_str(b));
        }
        match &e.params {
            Params::Sparse { sparsity } => {
                let _ = write!(s, ",\"sparsity\":{}", json_f64(*sparsity));
            }
            Params::Quantized { n_elements, n_cols } => {
                let _ = write!(s, ",\"n_elements\":{n_elements},\"n_cols\":{n_cols}");
            }
            Params::Int4 {
                outlier_fraction,
                n_elements,
                n_outliers,
                layout,
            } => {
                let _ = write!(
                    s,
                    ",\"outlier_fraction\":{},\"n_elements\":{n_elements},\"n_outliers\":{n_outliers}",
                    json_f64(*outlier_fraction)
                );
                if version >= 2 {
                    let _ = write!(s, ",\"int4_layout\":{layout}");
                }
            }
        }
        for f in e.strategy().fields() {
            let _ = write!(s, ",\"{f}\":{{\"_ref\":\"{f}\"}}");
        }
        s.push('}');
    }
    s.push_str("}}");
    s.into_bytes()
}

fn json_str(s: &str) -> String {
    serde_json::to_string(s).expect("strings serialize")
}

/// Floats as JSON numbers; integral values keep a ".0" as Python writes them.
fn json_f64(v: f64) -> String {
    if !v.is_finite() {
        return "null".into();
    }
    let s = serde_json::to_string(&v).expect("finite floats serialize");
    if s.contains(['.', 'e', 'E']) {
        s
    } else {
        format!("{s}.0")
    }
}

/// Bytes of one record's framing before its data.
pub(super) fn record_prefix(tensor: &str, array: &OwnedArray) -> Vec<u8> {
    framing(
        tensor,
        array.field,
        array.dtype,
        &array.shape,
        array.data.len() as u64,
    )
}

/// A record's framing for `data_len` bytes of data.
fn framing(tensor: &str, field: &str, dtype: ArrayDtype, shape: &[u64], data_len: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + tensor.len());
    for s in [tensor, field, dtype.name()] {
        out.extend_from_slice(&(s.len() as u32).to_le_bytes());
        out.extend_from_slice(s.as_bytes());
    }
    out.extend_from_slice(&(shape.len() as u32).to_le_bytes());
    for d in shape {
        out.extend_from_slice(&d.to_le_bytes());
    }
    out.extend_from_slice(&data_len.to_le_bytes());
    out
}

/// Streams a `.wdelta` file: the preamble and header first, then records as they come; every
/// byte also feeds the checksum, which [`WdeltaWriter::finish`] appends.
pub(crate) struct WdeltaWriter<W: Write> {
    out: W,
    /// `None` when the caller computes the checksum ([`WdeltaWriter::new_unhashed`]).
    hasher: Option<Sha256>,
    written: u64,
}

impl<W: Write> WdeltaWriter<W> {
    pub(crate) fn new(out: W, header: &Header, version: u32) -> std::io::Result<Self> {
        Self::start(out, header, version, Some(Sha256::new()))
    }

    /// A writer that leaves the checksum out: for a header rewritten in place after the
    /// records, the caller hashes the finished bytes and appends it
    /// ([`WdeltaWriter::finish_unhashed`]).
    pub(crate) fn new_unhashed(out: W, header: &Header, version: u32) -> std::io::Result<Self> {
        Self::start(out, header, version, None)
    }

    fn start(
        out: W,
        header: &Header,
        version: u32,
        hasher: Option<Sha256>,
    ) -> std::io::Result<Self> {
        let json = header_json(header, version);
        let mut w = WdeltaWriter {
            out,
            hasher,
            written: 0,
        };
        w.put(MAGIC)?;
        w.put(&version.to_le_bytes())?;
        let len = u32::try_from(json.len()).map_err(|_| {
            std::io::Error::other(format!(
                "JSON header of {} bytes does not fit the u32 length field",
                json.len()
            ))
        })?;
        w.put(&len.to_le_bytes())?;
        w.put(&json)?;
        Ok(w)
    }

    fn put(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        if let Some(h) = &mut self.hasher {
            h.update(bytes);
        }
        self.written += bytes.len() as u64;
        self.out.write_all(bytes)
    }

    pub(crate) fn record(&mut self, tensor: &str, array: &OwnedArray) -> std::io::Result<()> {
        self.put(&record_prefix(tensor, array))?;
        self.put(&array.data)
    }

    /// A record whose data is given after it, in pieces, by [`WdeltaWriter::record_data`]
    /// (`data_len` bytes in all): the same bytes as [`WdeltaWriter::record`].
    pub(crate) fn record_framing(
        &mut self,
        tensor: &str,
        field: &str,
        dtype: ArrayDtype,
        shape: &[u64],
        data_len: u64,
    ) -> std::io::Result<()> {
        self.put(&framing(tensor, field, dtype, shape, data_len))
    }

    /// A piece of the data of the record [`WdeltaWriter::record_framing`] began.
    pub(crate) fn record_data(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.put(bytes)
    }

    /// Appends the checksum; returns the total file length.
    pub(crate) fn finish(mut self) -> std::io::Result<(W, u64)> {
        let hasher = self
            .hasher
            .take()
            .expect("finish is for a hashing writer; finish_unhashed for the other");
        self.out.write_all(&hasher.finalize())?;
        Ok((self.out, self.written + CHECKSUM_LEN as u64))
    }

    /// Without the checksum: the bytes written so far (preamble, header and records).
    pub(crate) fn finish_unhashed(self) -> (W, u64) {
        (self.out, self.written)
    }
}

/// Writes a whole file into memory (for small deltas and tests).
pub fn write_to_vec(
    header: &Header,
    version: u32,
    arrays: &BTreeMap<String, Vec<OwnedArray>>,
) -> Vec<u8> {
    let mut w = WdeltaWriter::new(Vec::new(), header, version).expect("writing to a Vec");
    for (name, list) in arrays {
        for a in list {
            w.record(name, a).expect("writing to a Vec");
        }
    }
    w.finish().expect("writing to a Vec").0
}
