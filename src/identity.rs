//! The structural identity (schema 1): SHA-256 of the artifact's canonical JSON.
//!
//! The canonical JSON is one object without whitespace whose keys are sorted by their UTF-8
//! bytes at every level: `format`, `gguf_version` (GGUF only), `metadata`, `tensors` (each
//! `{"byte_length","dtype","shape"}`). Integers are JSON integers; an f64 is the JSON integer
//! of its bit pattern; an f32 is the string `"f32:<bits as u32>"`. Strings use serde_json's
//! escaping, which is exactly the contract: `"` `\` and \b \f \n \r \t short, other control
//! characters as lowercase \u00xx, everything else raw. docs/SPEC.md is the full statement.

use std::io::{self, Write};

use serde::Serialize;
use serde::ser::{SerializeMap, SerializeSeq, Serializer};
use sha2::{Digest, Sha256};

use crate::artifact::{Array, Artifact, TensorInfo, Value};

/// Lowercase hex SHA-256 of the canonical JSON.
pub fn structural_hash(artifact: &Artifact) -> String {
    let mut hasher = HashWriter(Sha256::new());
    {
        // Buffered so SHA-256 sees large blocks rather than one call per token.
        let mut out = io::BufWriter::with_capacity(1 << 16, &mut hasher);
        serde_json::to_writer(&mut out, &Canonical(artifact)).expect("hashing cannot fail");
        out.flush().expect("hashing cannot fail");
    }
    hex(&hasher.0.finalize())
}

/// The canonical JSON bytes whose SHA-256 is the structural hash.
pub fn canonical_json(artifact: &Artifact) -> Vec<u8> {
    serde_json::to_vec(&Canonical(artifact)).expect("canonical JSON cannot fail")
}

/// The canonical JSON of a single metadata value (as it appears inside the artifact's).
pub fn canonical_value_json(value: &Value) -> Vec<u8> {
    serde_json::to_vec(&CanonicalValue(value)).expect("canonical JSON cannot fail")
}

/// Short content digest of a value: the first 16 hex digits of the SHA-256 of its canonical
/// JSON. Lets a 262,144-entry vocabulary show as one comparable token.
pub fn value_digest(value: &Value) -> String {
    let mut hasher = HashWriter(Sha256::new());
    serde_json::to_writer(io::BufWriter::new(&mut hasher), &CanonicalValue(value))
        .expect("hashing cannot fail");
    let mut digest = hex(&hasher.0.finalize());
    digest.truncate(16);
    digest
}

pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[(b >> 4) as usize] as char);
        out.push(DIGITS[(b & 15) as usize] as char);
    }
    out
}

struct HashWriter(Sha256);

impl Write for HashWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

struct Canonical<'a>(&'a Artifact);

impl Serialize for Canonical<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let artifact = self.0;
        let mut map = serializer.serialize_map(None)?;
        // Keys in UTF-8 byte order.
        map.serialize_entry("format", artifact.format.name())?;
        if let Some(version) = artifact.gguf_version {
            map.serialize_entry("gguf_version", &version)?;
        }
        map.serialize_entry("metadata", &CanonicalMetadata(artifact))?;
        map.serialize_entry("tensors", &CanonicalTensors(artifact))?;
        map.end()
    }
}

struct CanonicalMetadata<'a>(&'a Artifact);

impl Serialize for CanonicalMetadata<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // BTreeMap<String, _> iterates in byte order of the keys.
        let mut map = serializer.serialize_map(Some(self.0.metadata.len()))?;
        for (key, value) in &self.0.metadata {
            map.serialize_entry(key, &CanonicalValue(value))?;
        }
        map.end()
    }
}

struct CanonicalTensors<'a>(&'a Artifact);

impl Serialize for CanonicalTensors<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.tensors.len()))?;
        for (name, tensor) in &self.0.tensors {
            map.serialize_entry(name, &CanonicalTensor(tensor))?;
        }
        map.end()
    }
}

struct CanonicalTensor<'a>(&'a TensorInfo);

impl Serialize for CanonicalTensor<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(3))?;
        map.serialize_entry("byte_length", &self.0.byte_length)?;
        map.serialize_entry("dtype", self.0.dtype)?;
        map.serialize_entry("shape", &self.0.shape)?;
        map.end()
    }
}

struct CanonicalValue<'a>(&'a Value);

impl Serialize for CanonicalValue<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Value::U8(v) => s.serialize_u8(*v),
            Value::I8(v) => s.serialize_i8(*v),
            Value::U16(v) => s.serialize_u16(*v),
            Value::I16(v) => s.serialize_i16(*v),
            Value::U32(v) => s.serialize_u32(*v),
            Value::I32(v) => s.serialize_i32(*v),
            Value::U64(v) => s.serialize_u64(*v),
            Value::I64(v) => s.serialize_i64(*v),
            Value::F32(v) => serialize_f32_bits(v.0, s),
            Value::F64(v) => s.serialize_u64(v.0),
            Value::Bool(v) => s.serialize_bool(*v),
            Value::String(v) => s.serialize_str(v),
            Value::Array(a) => CanonicalArray(a).serialize(s),
        }
    }
}

/// `"f32:<bits>"`, formatted on the stack: vocabularies carry hundreds of thousands of scores.
fn serialize_f32_bits<S: Serializer>(bits: u32, s: S) -> Result<S::Ok, S::Error> {
    let mut buf = [0u8; 16];
    let mut cursor = io::Cursor::new(&mut buf[..]);
    write!(cursor, "f32:{bits}").expect("16 bytes hold f32:4294967295");
    let len = cursor.position() as usize;
    s.serialize_str(std::str::from_utf8(&buf[..len]).expect("ASCII"))
}

struct F32Item(u32);

impl Serialize for F32Item {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serialize_f32_bits(self.0, s)
    }
}

struct CanonicalArray<'a>(&'a Array);

impl Serialize for CanonicalArray<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        fn seq<S: Serializer, T: Serialize>(
            s: S,
            items: impl ExactSizeIterator<Item = T>,
        ) -> Result<S::Ok, S::Error> {
            let mut out = s.serialize_seq(Some(items.len()))?;
            for item in items {
                out.serialize_element(&item)?;
            }
            out.end()
        }
        match self.0 {
            Array::U8(v) => seq(s, v.iter()),
            Array::I8(v) => seq(s, v.iter()),
            Array::U16(v) => seq(s, v.iter()),
            Array::I16(v) => seq(s, v.iter()),
            Array::U32(v) => seq(s, v.iter()),
            Array::I32(v) => seq(s, v.iter()),
            Array::U64(v) => seq(s, v.iter()),
            Array::I64(v) => seq(s, v.iter()),
            Array::F32(v) => seq(s, v.iter().map(|x| F32Item(x.0))),
            Array::F64(v) => seq(s, v.iter().map(|x| x.0)),
            Array::Bool(v) => seq(s, v.iter()),
            Array::String(v) => seq(s, v.iter()),
            Array::Array(v) => seq(s, v.iter().map(CanonicalArray)),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::artifact::{F32Bits, F64Bits, Format, Layout};

    fn artifact(metadata: Vec<(&str, Value)>) -> Artifact {
        Artifact {
            format: Format::Gguf,
            gguf_version: Some(3),
            metadata: metadata
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect(),
            tensors: BTreeMap::from([(
                "w".to_owned(),
                TensorInfo {
                    dtype: "q4_k",
                    shape: vec![256, 2],
                    byte_length: 288,
                    file_offset: 4096,
                },
            )]),
            layout: Layout::default(),
        }
    }

    #[test]
    fn floats_are_encoded_by_bit_pattern() {
        let a = artifact(vec![
            ("d", Value::F64(F64Bits(2.0f64.to_bits()))),
            ("f", Value::F32(F32Bits(3.0f32.to_bits()))),
        ]);
        assert_eq!(
            String::from_utf8(canonical_json(&a)).unwrap(),
            r#"{"format":"gguf","gguf_version":3,"metadata":{"d":4611686018427387904,"f":"f32:1077936128"},"tensors":{"w":{"byte_length":288,"dtype":"q4_k","shape":[256,2]}}}"#
        );
    }

    #[test]
    fn strings_escape_exactly_the_control_characters() {
        let a = artifact(vec![(
            "s",
            Value::String("\"\\\u{8}\u{c}\n\r\t\u{1}\u{1f}\u{7f}/é😀".into()),
        )]);
        let json = String::from_utf8(canonical_json(&a)).unwrap();
        assert!(
            json.contains(r#""s":"\"\\\b\f\n\r\t\u0001\u001f"#),
            "{json}"
        );
        assert!(json.contains("\u{7f}/é😀\""), "{json}");
    }

    #[test]
    fn keys_sort_by_utf8_bytes_and_integers_keep_full_range() {
        let a = artifact(vec![
            ("b", Value::U64(u64::MAX)),
            ("a.z", Value::I64(i64::MIN)),
            ("B", Value::Bool(true)),
            (
                "é",
                Value::Array(Array::Array(vec![
                    Array::U8(vec![1]),
                    Array::String(vec![]),
                ])),
            ),
        ]);
        let json = String::from_utf8(canonical_json(&a)).unwrap();
        assert!(
            json.contains(
                r#"{"B":true,"a.z":-9223372036854775808,"b":18446744073709551615,"é":[[1],[]]}"#
            ),
            "{json}"
        );
    }

    #[test]
    fn hash_is_sha256_of_canonical_json() {
        let a = artifact(vec![("k", Value::String("v".into()))]);
        let expected = hex(&Sha256::digest(canonical_json(&a)));
        assert_eq!(structural_hash(&a), expected);
        assert_eq!(expected.len(), 64);
    }
}
