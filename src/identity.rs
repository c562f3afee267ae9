//! The structural identity (schema 1): SHA-256 of the artifact's canonical JSON.
//!
//! The canonical JSON is one object without whitespace whose keys are sorted by their UTF-8
//! bytes at every level: `format`, `gguf_version` (GGUF only), `metadata`, `tensors` (each
//! `{"byte_length","dtype","shape"}`). Integers are JSON integers; an f64 is the JSON integer
//! of its bit pattern; an f32 is the string `"f32:<bits as u32>"`. Strings escape `"` `\`,
//! \b \f \n \r \t short and other control characters as lowercase \u00xx; everything else is
//! raw. docs/SPEC.md is the full statement.
//!
//! The writer is our own rather than serde_json's because the hash of a 262,144-token
//! vocabulary is on the hot path and most strings need no escaping at all; the tests check that
//! it writes exactly what serde_json's compact output writes.

/// Version of the JSON outputs and of the canonical form behind the structural hash.
pub const SCHEMA_VERSION: u32 = 1;

use sha2::{Digest, Sha256};

use crate::artifact::{Array, Artifact, Value};

/// Lowercase hex SHA-256 of the canonical JSON.
pub fn structural_hash(artifact: &Artifact) -> String {
    if metadata_items(artifact) < PIPELINE_MIN_ITEMS {
        let mut sink = HashSink::new();
        write_artifact(&mut sink, artifact);
        return crate::digest::hex(&sink.finish());
    }
    // Large vocabularies: write the JSON on this thread while another hashes finished chunks,
    // so SHA-256 overlaps with the writing instead of following it.
    std::thread::scope(|scope| {
        let (chunks, received) = std::sync::mpsc::sync_channel::<Vec<u8>>(4);
        // Hashed buffers come back for reuse: fresh 128 KiB buffers would each be new pages.
        let (recycle, recycled) = std::sync::mpsc::channel::<Vec<u8>>();
        let hashing = scope.spawn(move || {
            let mut hasher = Sha256::new();
            for mut chunk in received {
                hasher.update(&chunk);
                chunk.clear();
                let _ = recycle.send(chunk);
            }
            hasher.finalize()
        });
        let mut sink = ChunkSink {
            buf: Vec::with_capacity(HASH_CHUNK * 2),
            chunks,
            recycled,
        };
        write_artifact(&mut sink, artifact);
        let ChunkSink { buf, chunks, .. } = sink;
        // A send fails only if the hashing thread died, which join() reports below.
        let _ = chunks.send(buf);
        drop(chunks);
        crate::digest::hex(&hashing.join().expect("the hashing thread does not panic"))
    })
}

/// Metadata array items from which hashing runs on a second thread.
const PIPELINE_MIN_ITEMS: usize = 50_000;

fn metadata_items(artifact: &Artifact) -> usize {
    artifact
        .metadata
        .values()
        .map(|v| match v {
            Value::Array(a) => a.len(),
            _ => 1,
        })
        .sum()
}

/// The canonical JSON bytes whose SHA-256 is the structural hash.
pub fn canonical_json(artifact: &Artifact) -> Vec<u8> {
    let mut out = Vec::new();
    write_artifact(&mut out, artifact);
    out
}

/// Short content digest of a value: the first 16 hex digits of the SHA-256 of its canonical
/// JSON. Lets a 262,144-entry vocabulary show as one comparable token.
pub fn value_digest(value: &Value) -> String {
    let mut sink = HashSink::new();
    write_value(&mut sink, value);
    let mut digest = crate::digest::hex(&sink.finish());
    digest.truncate(16);
    digest
}

/// Where canonical JSON goes: memory, or SHA-256 through a buffer. Writing cannot fail, and
/// small appends stay inlined (a vocabulary is a million of them).
trait Sink {
    fn put(&mut self, bytes: &[u8]);
}

impl Sink for Vec<u8> {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

struct HashSink {
    buf: Vec<u8>,
    hasher: Sha256,
}

const HASH_CHUNK: usize = 1 << 16;

impl HashSink {
    fn new() -> Self {
        HashSink {
            buf: Vec::with_capacity(HASH_CHUNK * 2),
            hasher: Sha256::new(),
        }
    }

    fn finish(mut self) -> Vec<u8> {
        self.hasher.update(&self.buf);
        self.hasher.finalize().to_vec()
    }
}

impl Sink for HashSink {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
        if self.buf.len() >= HASH_CHUNK {
            self.hash_chunk();
        }
    }
}

/// Hands full chunks to the hashing thread.
struct ChunkSink {
    buf: Vec<u8>,
    chunks: std::sync::mpsc::SyncSender<Vec<u8>>,
    recycled: std::sync::mpsc::Receiver<Vec<u8>>,
}

impl Sink for ChunkSink {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
        if self.buf.len() >= HASH_CHUNK {
            self.send_chunk();
        }
    }
}

impl ChunkSink {
    #[inline(never)]
    fn send_chunk(&mut self) {
        let next = self
            .recycled
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(HASH_CHUNK * 2));
        let full = std::mem::replace(&mut self.buf, next);
        // If the hashing thread is gone, join() in structural_hash reports why.
        let _ = self.chunks.send(full);
    }
}

impl HashSink {
    #[inline(never)]
    fn hash_chunk(&mut self) {
        self.hasher.update(&self.buf);
        self.buf.clear();
    }
}

fn write_artifact(out: &mut impl Sink, artifact: &Artifact) {
    // Keys in UTF-8 byte order: format < gguf_version < metadata < tensors.
    out.put(b"{\"format\":");
    write_str(out, artifact.format.name());
    if let Some(version) = artifact.gguf_version {
        out.put(b",\"gguf_version\":");
        write_int(out, version);
    }
    out.put(b",\"metadata\":{");
    // BTreeMap<String, _> iterates in byte order of the keys.
    for (i, (key, value)) in artifact.metadata.iter().enumerate() {
        if i > 0 {
            out.put(b",");
        }
        write_str(out, key);
        out.put(b":");
        write_value(out, value);
    }
    out.put(b"},\"tensors\":{");
    for (i, (name, tensor)) in artifact.tensors.iter().enumerate() {
        if i > 0 {
            out.put(b",");
        }
        write_str(out, name);
        out.put(b":{\"byte_length\":");
        write_int(out, tensor.byte_length);
        out.put(b",\"dtype\":");
        write_str(out, tensor.dtype);
        out.put(b",\"shape\":");
        write_items(out, &tensor.shape, |out, d| write_int(out, *d));
        out.put(b"}");
    }
    out.put(b"}}")
}

fn write_value(out: &mut impl Sink, value: &Value) {
    match value {
        Value::U8(v) => write_int(out, *v),
        Value::I8(v) => write_int(out, *v),
        Value::U16(v) => write_int(out, *v),
        Value::I16(v) => write_int(out, *v),
        Value::U32(v) => write_int(out, *v),
        Value::I32(v) => write_int(out, *v),
        Value::U64(v) => write_int(out, *v),
        Value::I64(v) => write_int(out, *v),
        Value::F32(v) => write_f32_bits(out, v.0),
        Value::F64(v) => write_int(out, v.0),
        Value::Bool(v) => out.put(if *v { b"true" } else { b"false" }),
        Value::String(v) => write_str(out, v),
        Value::Array(a) => write_array(out, a),
    }
}

fn write_array(out: &mut impl Sink, array: &Array) {
    match array {
        Array::U8(v) => write_int_items(out, v, |x| x),
        Array::I8(v) => write_int_items(out, v, |x| x),
        Array::U16(v) => write_int_items(out, v, |x| x),
        Array::I16(v) => write_int_items(out, v, |x| x),
        Array::U32(v) => write_int_items(out, v, |x| x),
        Array::I32(v) => write_int_items(out, v, |x| x),
        Array::U64(v) => write_int_items(out, v, |x| x),
        Array::I64(v) => write_int_items(out, v, |x| x),
        Array::F64(v) => write_int_items(out, v, |x| x.0),
        Array::F32(v) => {
            out.put(b"[");
            let mut digits = itoa::Buffer::new();
            for (i, x) in v.iter().enumerate() {
                // `,"f32:4294967295"` at most: one append per element.
                let mut item = [0u8; 24];
                let prefix: &[u8] = if i > 0 { b",\"f32:" } else { b"\"f32:" };
                let digits = digits.format(x.0).as_bytes();
                let mut n = prefix.len();
                item[..n].copy_from_slice(prefix);
                item[n..n + digits.len()].copy_from_slice(digits);
                n += digits.len();
                item[n] = b'"';
                out.put(&item[..n + 1]);
            }
            out.put(b"]");
        }
        Array::Bool(v) => write_items(out, v, |o, x| o.put(if *x { b"true" } else { b"false" })),
        Array::String(v) => {
            out.put(b"[");
            for (i, item) in v.iter().enumerate() {
                out.put(if i > 0 { b",\"" } else { b"\"" });
                write_str_content(out, item);
                out.put(b"\"");
            }
            out.put(b"]");
        }
        Array::Array(v) => write_items(out, v, |o, x| write_array(o, x)),
    }
}

/// Integers with their separating comma in one append each.
fn write_int_items<T: Copy, I: itoa::Integer>(out: &mut impl Sink, items: &[T], int: fn(T) -> I) {
    out.put(b"[");
    let mut digits = itoa::Buffer::new();
    for (i, &x) in items.iter().enumerate() {
        let mut item = [0u8; 24];
        let digits = digits.format(int(x)).as_bytes();
        let start = usize::from(i > 0);
        item[0] = b',';
        item[start..start + digits.len()].copy_from_slice(digits);
        out.put(&item[..start + digits.len()]);
    }
    out.put(b"]");
}

fn write_items<W: Sink, T>(out: &mut W, items: &[T], mut write_item: impl FnMut(&mut W, &T)) {
    out.put(b"[");
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.put(b",");
        }
        write_item(out, item);
    }
    out.put(b"]")
}

fn write_int(out: &mut impl Sink, n: impl itoa::Integer) {
    out.put(itoa::Buffer::new().format(n).as_bytes())
}

/// `"f32:<bits>"`.
fn write_f32_bits(out: &mut impl Sink, bits: u32) {
    out.put(b"\"f32:");
    write_int(out, bits);
    out.put(b"\"")
}

#[inline]
fn needs_escape(b: u8) -> bool {
    b < 0x20 || b == b'"' || b == b'\\'
}

/// A JSON string with the schema-1 escapes. Most strings need none and are copied whole.
fn write_str(out: &mut impl Sink, s: &str) {
    out.put(b"\"");
    write_str_content(out, s);
    out.put(b"\"");
}

/// The escaped content of a JSON string, without its quotes.
fn write_str_content(out: &mut impl Sink, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bytes = s.as_bytes();
    // A non-short-circuiting scan vectorizes; most strings need no escape at all.
    if !bytes.iter().fold(false, |any, &b| any | needs_escape(b)) {
        out.put(bytes);
        return;
    }
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if !needs_escape(b) {
            continue;
        }
        out.put(&bytes[start..i]);
        match b {
            b'"' => out.put(b"\\\""),
            b'\\' => out.put(b"\\\\"),
            0x08 => out.put(b"\\b"),
            0x0c => out.put(b"\\f"),
            b'\n' => out.put(b"\\n"),
            b'\r' => out.put(b"\\r"),
            b'\t' => out.put(b"\\t"),
            _ => out.put(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[(b >> 4) as usize],
                HEX[(b & 15) as usize],
            ]),
        }
        start = i + 1;
    }
    out.put(&bytes[start..]);
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::artifact::{F32Bits, F64Bits, Format, Layout, TensorInfo};
    use crate::digest::hex;

    fn artifact(metadata: Vec<(&str, Value)>) -> Artifact {
        Artifact {
            format: Format::Gguf,
            gguf_version: Some(3),
            metadata: metadata
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect(),
            tensors: crate::artifact::Tensors::from_iter([(
                "w",
                TensorInfo {
                    dtype: "q4_k",
                    shape: [256, 2].into_iter().collect(),
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
                    Array::String(Default::default()),
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

    proptest::proptest! {
        /// The schema-1 string rules are serde_json's compact output, byte for byte.
        #[test]
        fn strings_are_written_as_serde_json_writes_them(s in "\\PC*|[\\x00-\\x7f]*") {
            let mut ours = Vec::new();
            write_str(&mut ours, &s);
            proptest::prop_assert_eq!(ours, serde_json::to_vec(&s).unwrap());
        }
    }

    #[test]
    fn pipelined_hash_equals_hash_of_canonical_json() {
        let tokens: crate::artifact::StringArray = (0..PIPELINE_MIN_ITEMS + 7)
            .map(|i| format!("tok{i}\n"))
            .collect();
        let a = artifact(vec![("tokens", Value::Array(Array::String(tokens)))]);
        assert!(metadata_items(&a) >= PIPELINE_MIN_ITEMS);
        assert_eq!(
            structural_hash(&a),
            hex(&Sha256::digest(canonical_json(&a)))
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
