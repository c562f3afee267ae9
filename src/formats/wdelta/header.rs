//! The JSON header, parsed as a stream: each tensor entry becomes a [`TensorEntry`] as soon as it
//! is read, and no value of the document is held as a generic JSON tree (a tree of a million
//! small objects takes gigabytes). Entries are compact ([`Tensors`]: one sorted table of
//! inline names, packed shapes, inline dtype names). Strings are the only allocations sized by
//! the input, and the header is capped before parsing, the tensor count as it is read and the
//! dimensions of a shape at [`MAX_DIMS`], so memory stays proportional to the header's size.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::error::WdeltaError;
use super::types::{
    DtypeName, Header, LossFigures, PackedShape, Params, Strategy, TensorEntry, Tensors,
};
use crate::artifact::TensorName;
use crate::digest::is_sha256_hex;

/// The most dimensions a tensor's shape may have (numpy's own limit is 64).
pub(super) const MAX_DIMS: usize = 64;

/// Bytes of header limit per tensor allowed: with the default header limit of 100 MB, 100,000
/// tensors (the largest real checkpoints have fewer). Parsed, a tensor takes 128 bytes besides a
/// name longer than 24 bytes (held once) and a shape longer than 16 packed bytes, and 64 a
/// record, which with the file's own bytes stays within 3 x (file less its raw array bytes) +
/// 64 MiB (`tests/delta_hardening.rs`, `scripts/wdelta_header_rss.sh`).
pub(super) const HEADER_BYTES_PER_TENSOR: u64 = 1000;

/// The most tensors a header may declare, given the header limit.
pub(crate) fn max_tensors(max_header_bytes: u64) -> u64 {
    (max_header_bytes / HEADER_BYTES_PER_TENSOR).max(1)
}

/// Parses and validates the JSON header of a file of format `version`.
pub fn parse_header(bytes: &[u8], version: u32, max_tensors: u64) -> Result<Header, WdeltaError> {
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
    if first != Some(&b'{') {
        // Phrase a syntax error as such; valid JSON that is not an object is a field error.
        return Err(match serde_json::from_slice::<IgnoredAny>(bytes) {
            Err(e) => WdeltaError::HeaderJson {
                message: e.to_string(),
            },
            Ok(_) => field("(top level)", "a JSON object"),
        });
    }
    let state = State {
        version,
        max_tensors,
        error: RefCell::new(None),
        context: RefCell::new(String::from("(top level)")),
    };
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let parsed = de::Deserializer::deserialize_map(&mut de, TopVisitor { state: &state })
        .and_then(|top| de.end().map(|()| top));
    let top = match parsed {
        Ok(top) => top,
        Err(e) => {
            if let Some(err) = state.error.into_inner() {
                return Err(err);
            }
            return Err(match e.classify() {
                serde_json::error::Category::Data => {
                    field(&state.context.into_inner(), "a value of the expected type")
                }
                _ => WdeltaError::HeaderJson {
                    message: e.to_string(),
                },
            });
        }
    };
    let parent_hash = match top.parent_hash {
        Some(Scalar::Str(s)) => s,
        _ => {
            return Err(field(
                "parent_hash",
                "a string (SHA-256 hex of the parent model)",
            ));
        }
    };
    if !is_sha256_hex(&parent_hash) {
        return Err(WdeltaError::ParentHashNotHex {
            found: shorten(&parent_hash),
        });
    }
    let strategy = match &top.strategy {
        Some(Scalar::Str(s)) => Strategy::parse(s),
        _ => None,
    }
    .ok_or_else(|| field("strategy", "\"sparse\", \"quantized\" or \"int4\""))?;
    let tensors = top
        .tensors
        .ok_or_else(|| field("tensors", "an object mapping tensor names to entries"))?;
    Ok(Header {
        parent_hash,
        strategy,
        metadata: top.metadata,
        loss: top.loss,
        tensors,
    })
}

/// At most 80 characters of a bad value, for a message (printed with `{:?}`, so control
/// characters are escaped and cannot forge lines).
fn shorten(s: &str) -> String {
    s.chars().take(80).collect()
}

fn field(key: &str, expected: &str) -> WdeltaError {
    WdeltaError::HeaderField {
        key: key.to_string(),
        expected: expected.to_string(),
    }
}

/// The methods of a visitor whose value is `None` for any JSON scalar (the caller reports what
/// it expected); `none_for_arrays_and_scalars!` also skips over an array.
macro_rules! none_for_scalars {
    () => {
        fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
    };
}

macro_rules! none_for_arrays_and_scalars {
    () => {
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok(None)
        }
        none_for_scalars!();
    };
}

struct State {
    version: u32,
    max_tensors: u64,
    /// The first error of this format's rules (serde's own errors carry no structure).
    error: RefCell<Option<WdeltaError>>,
    /// The key being read, for serde's type errors.
    context: RefCell<String>,
}

impl State {
    fn fail<E: de::Error>(&self, err: WdeltaError) -> E {
        let message = err.to_string();
        self.error.borrow_mut().get_or_insert(err);
        E::custom(message)
    }

    fn set_context(&self, key: String) {
        *self.context.borrow_mut() = key;
    }
}

/// A JSON value reduced to what a header field can be; arrays and objects are skipped
/// without allocating.
#[derive(Debug, Clone, PartialEq)]
enum Scalar {
    Str(String),
    U64(u64),
    I64(i64),
    F64(f64),
    Other,
}

impl Scalar {
    fn as_u64(&self) -> Option<u64> {
        match self {
            Scalar::U64(n) => Some(*n),
            _ => None,
        }
    }

    fn as_f64(&self) -> Option<f64> {
        match self {
            Scalar::U64(n) => Some(*n as f64),
            Scalar::I64(n) => Some(*n as f64),
            Scalar::F64(x) => Some(*x),
            _ => None,
        }
    }
}

struct ScalarVisitor;

impl<'de> Visitor<'de> for ScalarVisitor {
    type Value = Scalar;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Scalar, E> {
        Ok(Scalar::Other)
    }
    fn visit_u64<E>(self, v: u64) -> Result<Scalar, E> {
        Ok(Scalar::U64(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Scalar, E> {
        Ok(if v >= 0 {
            Scalar::U64(v as u64)
        } else {
            Scalar::I64(v)
        })
    }
    fn visit_f64<E>(self, v: f64) -> Result<Scalar, E> {
        Ok(Scalar::F64(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Scalar, E> {
        Ok(Scalar::Str(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Scalar, E> {
        Ok(Scalar::Str(v))
    }
    fn visit_unit<E>(self) -> Result<Scalar, E> {
        Ok(Scalar::Other)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Scalar, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Scalar::Other)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Scalar, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Scalar::Other)
    }
}

impl<'de> de::Deserialize<'de> for Scalar {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Scalar, D::Error> {
        d.deserialize_any(ScalarVisitor)
    }
}

/// A shape: Some(dims) for a list of at most [`MAX_DIMS`] non-negative integers, else None (the
/// rest of the list is skipped).
struct ShapeVisitor;

impl<'de> Visitor<'de> for ShapeVisitor {
    type Value = Option<PackedShape>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of non-negative integers")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut dims = PackedShape::new();
        let mut count = 0;
        let mut ok = true;
        while let Some(v) = seq.next_element::<Scalar>()? {
            match v.as_u64() {
                Some(d) if ok && count < MAX_DIMS => {
                    dims.push(d);
                    count += 1;
                }
                _ => ok = false,
            }
        }
        Ok(ok.then_some(dims))
    }
    none_for_scalars!();
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(None)
    }
}

struct ShapeValue(Option<PackedShape>);

impl<'de> de::Deserialize<'de> for ShapeValue {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<ShapeValue, D::Error> {
        d.deserialize_any(ShapeVisitor).map(ShapeValue)
    }
}

/// A tensor name, read straight into its inline-when-short form.
struct Name(TensorName);

impl<'de> de::Deserialize<'de> for Name {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Name, D::Error> {
        d.deserialize_str(NameVisitor).map(Name)
    }
}

struct NameVisitor;

impl Visitor<'_> for NameVisitor {
    type Value = TensorName;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string")
    }
    fn visit_str<E>(self, v: &str) -> Result<TensorName, E> {
        Ok(TensorName::new(v))
    }
}

/// An array reference `{"_ref": "<field>"}`: the string under `_ref`, other keys ignored.
struct RefVisitor;

impl<'de> Visitor<'de> for RefVisitor {
    type Value = Option<String>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object {\"_ref\": field}")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut found = None;
        while let Some(k) = map.next_key::<String>()? {
            if k == "_ref" {
                found = match map.next_value::<Scalar>()? {
                    Scalar::Str(s) => Some(s),
                    _ => None,
                };
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }
    none_for_arrays_and_scalars!();
}

struct Ref(Option<String>);

impl<'de> de::Deserialize<'de> for Ref {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Ref, D::Error> {
        d.deserialize_any(RefVisitor).map(Ref)
    }
}

struct Top {
    parent_hash: Option<Scalar>,
    strategy: Option<Scalar>,
    metadata: Option<std::collections::BTreeMap<String, String>>,
    loss: Option<LossFigures>,
    tensors: Option<Tensors>,
}

struct TopVisitor<'s> {
    state: &'s State,
}

impl<'de> Visitor<'de> for TopVisitor<'_> {
    type Value = Top;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Top, A::Error> {
        let mut top = Top {
            parent_hash: None,
            strategy: None,
            metadata: None,
            loss: None,
            tensors: None,
        };
        // As with a JSON tree, a key given twice keeps its last value.
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "parent_hash" => top.parent_hash = Some(map.next_value()?),
                "strategy" => top.strategy = Some(map.next_value()?),
                "metadata" => {
                    self.state.set_context("metadata".into());
                    top.metadata = Some(map.next_value()?);
                }
                "loss" => {
                    self.state.set_context("loss".into());
                    top.loss = Some(map.next_value()?);
                }
                "tensors" => {
                    self.state.set_context("tensors".into());
                    top.tensors = map.next_value_seed(TensorsSeed { state: self.state })?;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(top)
    }
}

/// The `tensors` object: Some(entries), or None when the value is not an object.
struct TensorsSeed<'s> {
    state: &'s State,
}

impl<'de> DeserializeSeed<'de> for TensorsSeed<'_> {
    type Value = Option<Tensors>;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for TensorsSeed<'_> {
    type Value = Option<Tensors>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object mapping tensor names to entries")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let state = self.state;
        let mut tensors = Vec::new();
        let mut count = 0u64;
        while let Some(Name(name)) = map.next_key::<Name>()? {
            count += 1;
            if count > state.max_tensors {
                return Err(state.fail(WdeltaError::TooManyTensors {
                    limit: state.max_tensors,
                    bytes_per_tensor: HEADER_BYTES_PER_TENSOR,
                }));
            }
            state.set_context(format!("tensors.{name}"));
            let raw = map.next_value_seed(EntrySeed)?;
            let entry = build_entry(&name, raw, state.version).map_err(|e| state.fail(e))?;
            tensors.push((name, entry));
        }
        Ok(Some(Tensors::from_unsorted(tensors)))
    }
    none_for_arrays_and_scalars!();
}

/// One entry as read: None when it is not an object.
#[derive(Default)]
struct RawEntry {
    strategy: Option<Scalar>,
    shape: Option<Option<PackedShape>>,
    dtype: Option<Scalar>,
    base_dtype: Option<Scalar>,
    /// Numbers and other scalars by key (sparsity, n_elements, ...).
    scalars: BTreeMap<&'static str, Scalar>,
    /// Array references by field.
    refs: BTreeMap<&'static str, Option<String>>,
}

const SCALAR_KEYS: [&str; 6] = [
    "sparsity",
    "n_elements",
    "n_cols",
    "outlier_fraction",
    "n_outliers",
    "int4_layout",
];

const REF_KEYS: [&str; 9] = [
    "indices",
    "values",
    "scales",
    "packed_signs",
    "outlier_idx",
    "outlier_vals",
    "scale",
    "zero_point",
    "packed",
];

struct EntrySeed;

impl<'de> DeserializeSeed<'de> for EntrySeed {
    type Value = Option<RawEntry>;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for EntrySeed {
    type Value = Option<RawEntry>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut e = RawEntry::default();
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "strategy" => e.strategy = Some(map.next_value()?),
                "shape" => e.shape = Some(map.next_value::<ShapeValue>()?.0),
                "dtype" => e.dtype = Some(map.next_value()?),
                "base_dtype" => e.base_dtype = Some(map.next_value()?),
                k => {
                    if let Some(known) = SCALAR_KEYS.iter().find(|s| **s == k) {
                        e.scalars.insert(known, map.next_value()?);
                    } else if let Some(known) = REF_KEYS.iter().find(|s| **s == k) {
                        e.refs.insert(known, map.next_value::<Ref>()?.0);
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
            }
        }
        Ok(Some(e))
    }
    none_for_arrays_and_scalars!();
}

/// One entry's rules, as [`TensorEntry`] states them.
fn build_entry(
    name: &str,
    raw: Option<RawEntry>,
    version: u32,
) -> Result<TensorEntry, WdeltaError> {
    let key = |k: &str| format!("tensors.{name}.{k}");
    let bad = |k: &str, expected: &str| WdeltaError::HeaderField {
        key: key(k),
        expected: expected.to_string(),
    };
    let Some(raw) = raw else {
        return Err(WdeltaError::HeaderField {
            key: format!("tensors.{name}"),
            expected: "an object".into(),
        });
    };
    let strategy = match &raw.strategy {
        Some(Scalar::Str(s)) => Strategy::parse(s),
        _ => None,
    }
    .ok_or_else(|| bad("strategy", "\"sparse\", \"quantized\" or \"int4\""))?;
    let shape = match raw.shape {
        Some(Some(dims)) => dims,
        _ => {
            return Err(bad(
                "shape",
                &format!("a list of at most {MAX_DIMS} non-negative integers"),
            ));
        }
    };
    if shape.iter().try_fold(1u64, u64::checked_mul).is_none() {
        return Err(bad("shape", "dimensions whose product fits in 64 bits"));
    }
    let dtype = match raw.dtype {
        Some(Scalar::Str(s)) => DtypeName::from(s),
        _ => return Err(bad("dtype", "a string")),
    };
    let base_dtype = match raw.base_dtype {
        None => None,
        Some(Scalar::Str(s)) => Some(DtypeName::from(s)),
        Some(_) => return Err(bad("base_dtype", "a string")),
    };
    let uint = |k: &str| {
        raw.scalars
            .get(k)
            .and_then(Scalar::as_u64)
            .ok_or_else(|| bad(k, "a non-negative integer"))
    };
    let float = |k: &str, default: f64| match raw.scalars.get(k) {
        None => Ok(default),
        Some(v) => v.as_f64().ok_or_else(|| bad(k, "a number")),
    };
    for &f in strategy.fields() {
        if raw.refs.get(f).and_then(|r| r.as_deref()) != Some(f) {
            return Err(bad(f, &format!("{{\"_ref\": \"{f}\"}}")));
        }
    }
    let params = match strategy {
        Strategy::Sparse => Params::Sparse {
            sparsity: float("sparsity", 0.9)?,
        },
        Strategy::Quantized => Params::Quantized {
            n_elements: uint("n_elements")?,
            n_cols: uint("n_cols")?,
        },
        Strategy::Int4 => {
            let layout = match raw.scalars.get("int4_layout") {
                None => version,
                Some(v) => match v.as_u64() {
                    Some(1) => 1,
                    Some(2) => 2,
                    _ => return Err(bad("int4_layout", "1 or 2")),
                },
            };
            Params::Int4 {
                outlier_fraction: float("outlier_fraction", 0.01)?,
                n_elements: uint("n_elements")?,
                n_outliers: uint("n_outliers")?,
                layout,
            }
        }
    };
    Ok(TensorEntry {
        shape,
        dtype,
        base_dtype,
        params,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const HASH: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn parse(json: &str) -> Result<Header, WdeltaError> {
        parse_header(json.as_bytes(), 1, 10)
    }

    fn sparse_entry(shape: &str) -> String {
        format!(
            r#"{{"strategy":"sparse","shape":{shape},"dtype":"float32","indices":{{"_ref":"indices"}},"values":{{"_ref":"values"}}}}"#
        )
    }

    #[test]
    fn a_valid_header() {
        let h = parse(&format!(
            r#"{{"parent_hash":"{HASH}","strategy":"sparse","extra":[1,{{"a":2}}],"tensors":{{"a":{}}}}}"#,
            sparse_entry("[2,3]")
        ))
        .unwrap();
        assert_eq!(h.parent_hash, HASH);
        assert_eq!(h.tensors["a"].shape.to_vec(), [2, 3]);
    }

    #[test]
    fn parent_hash_must_be_lowercase_hex() {
        for bad in [
            HASH.to_uppercase(),
            HASH[..63].to_string(),
            format!("{}\\nparent hash: forged", &HASH[..40]),
            format!("{}g", &HASH[..63]),
        ] {
            let err = parse(&format!(
                r#"{{"parent_hash":"{bad}","strategy":"sparse","tensors":{{}}}}"#
            ))
            .unwrap_err();
            assert!(
                matches!(err, WdeltaError::ParentHashNotHex { .. }),
                "{bad}: {err}"
            );
            assert!(!err.to_string().contains('\n'), "{err}");
        }
    }

    #[test]
    fn errors_name_the_key() {
        let err = parse("[1]").unwrap_err();
        assert!(matches!(err, WdeltaError::HeaderField { ref key, .. } if key == "(top level)"));
        let err = parse("{").unwrap_err();
        assert!(matches!(err, WdeltaError::HeaderJson { .. }));
        let err = parse(&format!(
            r#"{{"parent_hash":"{HASH}","strategy":"sparse","tensors":[]}}"#
        ))
        .unwrap_err();
        assert!(matches!(err, WdeltaError::HeaderField { ref key, .. } if key == "tensors"));
        let err = parse(&format!(
            r#"{{"parent_hash":"{HASH}","strategy":"sparse","tensors":{{"a":{}}}}}"#,
            sparse_entry("[-1]")
        ))
        .unwrap_err();
        assert!(
            matches!(err, WdeltaError::HeaderField { ref key, .. } if key == "tensors.a.shape")
        );
        let dims = vec!["1"; MAX_DIMS + 1].join(",");
        let err = parse(&format!(
            r#"{{"parent_hash":"{HASH}","strategy":"sparse","tensors":{{"a":{}}}}}"#,
            sparse_entry(&format!("[{dims}]"))
        ))
        .unwrap_err();
        assert!(
            matches!(err, WdeltaError::HeaderField { ref key, .. } if key == "tensors.a.shape")
        );
    }

    #[test]
    fn tensors_come_out_sorted_and_a_repeated_name_keeps_its_last_entry() {
        let h = parse(&format!(
            r#"{{"parent_hash":"{HASH}","strategy":"sparse","tensors":{{"b":{},"a":{},"b":{}}}}}"#,
            sparse_entry("[1]"),
            sparse_entry("[2]"),
            sparse_entry("[3]"),
        ))
        .unwrap();
        let got: Vec<(&str, Vec<u64>)> = h
            .tensors
            .iter()
            .map(|(n, e)| (n, e.shape.to_vec()))
            .collect();
        assert_eq!(got, [("a", vec![2]), ("b", vec![3])]);
        assert_eq!(h.tensors["a"].dtype, "float32");
    }

    #[test]
    fn the_tensor_count_is_capped() {
        let entries: Vec<String> = (0..11)
            .map(|i| format!("\"t{i}\":{}", sparse_entry("[1]")))
            .collect();
        let err = parse(&format!(
            r#"{{"parent_hash":"{HASH}","strategy":"sparse","tensors":{{{}}}}}"#,
            entries.join(",")
        ))
        .unwrap_err();
        assert!(
            matches!(err, WdeltaError::TooManyTensors { limit: 10, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("WEIGHT_INSPECT_MAX_HEADER_BYTES"));
    }
}
