//! The structural identity (schema 1): SHA-256 of the artifact's canonical JSON.
//!
//! The canonical JSON is one object without whitespace whose keys are sorted by their UTF-8
//! bytes at every level: `format`, `gguf_version` (GGUF only), `metadata`, `tensors` (each
//! `{"byte_length","dtype","shape"}`). Integers are JSON integers; an f64 is
//! the JSON integer of its bit pattern; an f32 is the string `"f32:<bits as u32>"`. Strings
//! escape `"` `\`, \b \f \n \r \t short and other control characters as lowercase \u00xx;
//! everything else is raw. docs/SPEC.md is the full statement.
//!
//! A PyTorch training checkpoint has a second, stated identity beside it, its model identity
//! (SPEC §5d): the same writer with a `groups` key, keeping only its model weights.
//!
//! The writer is our own rather than serde_json's because the hash of a 262,144-token
//! vocabulary is on the hot path and most strings need no escaping at all; the tests check that
//! it writes exactly what serde_json's compact output writes.

/// Version of the JSON outputs and of the canonical form behind the structural hash.
pub const SCHEMA_VERSION: u32 = 1;

use sha2::{Digest, Sha256};

use crate::artifact::{Array, Artifact, StringArray, TrainingCheckpoint, Value};

/// Lowercase hex SHA-256 of the canonical JSON.
pub fn structural_hash(artifact: &Artifact) -> String {
    hash_of(artifact, None)
}

/// A training checkpoint's model identity (docs/SPEC.md §5d): lowercase hex SHA-256 of its
/// model weights' canonical JSON with its groups. None for every other file.
pub fn model_identity(artifact: &Artifact) -> Option<String> {
    let training = artifact.layout.training()?;
    Some(hash_of(artifact, Some(training)))
}

/// The canonical JSON whose SHA-256 is the model identity; None for every file that is not a
/// training checkpoint.
pub fn model_identity_json(artifact: &Artifact) -> Option<Vec<u8>> {
    let training = artifact.layout.training()?;
    let mut out = Writer::new(Vec::new(), 1 << 16);
    write_artifact(&mut out, artifact, Some(training));
    Some(out.finish())
}

fn hash_of(artifact: &Artifact, training: Option<&TrainingCheckpoint>) -> String {
    if metadata_items(artifact) < PIPELINE_MIN_ITEMS {
        let mut out = Writer::new(Sha256::new(), SMALL_CHUNK);
        write_artifact(&mut out, artifact, training);
        return crate::digest::hex(&out.finish().finalize());
    }
    // Large vocabularies: write the JSON on this thread while another hashes finished chunks,
    // so SHA-256 overlaps with the writing instead of following it.
    std::thread::scope(|scope| {
        let (chunks, received) = std::sync::mpsc::sync_channel::<(Vec<u8>, usize)>(4);
        // Hashed buffers come back for reuse: fresh buffers would each be new pages.
        let (recycle, recycled) = std::sync::mpsc::channel::<Vec<u8>>();
        let hashing = scope.spawn(move || {
            let mut hasher = Sha256::new();
            for (chunk, len) in received {
                hasher.update(&chunk[..len]);
                let _ = recycle.send(chunk);
            }
            hasher.finalize()
        });
        let mut out = Writer::new(
            HashingThread {
                chunks,
                recycled,
                chunk_bytes: PIPELINE_CHUNK + SLACK,
            },
            PIPELINE_CHUNK,
        );
        write_artifact(&mut out, artifact, training);
        // Dropping the sender ends the hashing thread's loop. A send fails only if the hashing
        // thread died, which join() reports below.
        drop(out.finish());
        crate::digest::hex(&hashing.join().expect("the hashing thread does not panic"))
    })
}

/// Metadata array items from which hashing runs on a second thread.
const PIPELINE_MIN_ITEMS: usize = 50_000;

/// Chunk handed to the hashing thread: large enough that the two threads rarely synchronise
/// (a vocabulary's JSON is about 35 of them), small enough that hashing starts early.
const PIPELINE_CHUNK: usize = 1 << 18;

/// Chunk of the single-threaded paths (small artifacts, value digests).
const SMALL_CHUNK: usize = 1 << 13;

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
    let mut out = Writer::new(Vec::new(), 1 << 16);
    write_artifact(&mut out, artifact, None);
    out.finish()
}

/// Short content digest of a value: the first 16 hex digits of the SHA-256 of its canonical
/// JSON. Lets a 262,144-entry vocabulary show as one comparable token.
pub(crate) fn value_digest(value: &Value) -> String {
    let mut out = Writer::new(Sha256::new(), SMALL_CHUNK);
    write_value(&mut out, value);
    let mut digest = crate::digest::hex(&out.finish().finalize());
    digest.truncate(16);
    digest
}

/// Where the writer's full chunks go: memory, SHA-256, or the hashing thread.
trait ChunkOut {
    /// Consumes `buf[..len]`; may swap `buf` for another buffer of the same length.
    fn take(&mut self, buf: &mut Vec<u8>, len: usize);
}

impl ChunkOut for Vec<u8> {
    fn take(&mut self, buf: &mut Vec<u8>, len: usize) {
        self.extend_from_slice(&buf[..len]);
    }
}

impl ChunkOut for Sha256 {
    fn take(&mut self, buf: &mut Vec<u8>, len: usize) {
        self.update(&buf[..len]);
    }
}

/// Hands full chunks to the hashing thread and continues in a hashed one it sent back.
struct HashingThread {
    chunks: std::sync::mpsc::SyncSender<(Vec<u8>, usize)>,
    recycled: std::sync::mpsc::Receiver<Vec<u8>>,
    chunk_bytes: usize,
}

impl ChunkOut for HashingThread {
    fn take(&mut self, buf: &mut Vec<u8>, len: usize) {
        let next = self
            .recycled
            .try_recv()
            .unwrap_or_else(|_| vec![0; self.chunk_bytes]);
        let full = std::mem::replace(buf, next);
        // If the hashing thread is gone, join() in structural_hash reports why.
        let _ = self.chunks.send((full, len));
    }
}

/// Bytes past the chunk that every buffer has: a short piece (up to `SLACK` bytes) is stored
/// with fixed-size copies, which compile to a few moves, where a copy of the exact length is
/// a call to memcpy; a vocabulary is about a million pieces.
const SLACK: usize = 64;

/// Canonical JSON into fixed-size chunks. Writing cannot fail.
struct Writer<O: ChunkOut> {
    /// Always `chunk + SLACK` bytes long; `buf[..pos]` is written.
    buf: Vec<u8>,
    pos: usize,
    chunk: usize,
    out: O,
}

impl<O: ChunkOut> Writer<O> {
    fn new(out: O, chunk: usize) -> Self {
        Writer {
            buf: vec![0; chunk + SLACK],
            pos: 0,
            chunk,
            out,
        }
    }

    /// Hands over what is left and returns the destination.
    fn finish(mut self) -> O {
        if self.pos > 0 {
            self.out.take(&mut self.buf, self.pos);
        }
        self.out
    }

    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        if bytes.len() <= 32 {
            // pos < chunk here, so the 32 bytes after it are in the buffer.
            copy_short(&mut self.buf[self.pos..self.pos + 32], bytes);
            self.pos += bytes.len();
            self.flush_if_full();
        } else {
            self.put_long(bytes);
        }
    }

    /// `,"<string>"` (or `"<string>"` for the first item) for a string of `len` bytes (up to
    /// 32) that needs no escaping, from a window starting with it.
    #[inline]
    fn put_string_item(&mut self, comma: bool, window: &[u8; 32], len: usize) {
        let len = len.min(32);
        let c = usize::from(comma);
        let item = &mut self.buf[self.pos..self.pos + 35];
        item[0] = b',';
        item[c] = b'"';
        item[c + 1..c + 33].copy_from_slice(window);
        item[c + 1 + len] = b'"';
        self.pos += c + 2 + len;
        self.flush_if_full();
    }

    /// `,<n>` (or `<n>` for the first item), `-` first if `negative`.
    #[inline]
    fn put_int_item(&mut self, comma: bool, negative: bool, magnitude: u64) {
        let item = &mut self.buf[self.pos..self.pos + 22];
        item[0] = b',';
        let mut n = usize::from(comma);
        item[n] = b'-';
        n += usize::from(negative);
        n += write_decimal(&mut item[n..], magnitude);
        self.pos += n;
        self.flush_if_full();
    }

    /// `,"f32:<bits>"` (or `"f32:<bits>"` for the first item).
    #[inline]
    fn put_f32_item(&mut self, comma: bool, bits: u32) {
        let item = &mut self.buf[self.pos..self.pos + 18];
        item[0] = b',';
        let mut n = usize::from(comma);
        item[n..n + 5].copy_from_slice(b"\"f32:");
        n += 5;
        n += write_decimal(&mut item[n..], u64::from(bits));
        item[n] = b'"';
        self.pos += n + 1;
        self.flush_if_full();
    }

    #[inline(never)]
    fn put_long(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let room = self.chunk + SLACK - self.pos;
            let (now, rest) = bytes.split_at(bytes.len().min(room));
            self.buf[self.pos..self.pos + now.len()].copy_from_slice(now);
            self.pos += now.len();
            self.flush_if_full();
            bytes = rest;
        }
    }

    #[inline]
    fn flush_if_full(&mut self) {
        if self.pos >= self.chunk {
            self.flush();
        }
    }

    #[inline(never)]
    fn flush(&mut self) {
        self.out.take(&mut self.buf, self.pos);
        self.pos = 0;
    }
}

/// `dst[..src.len()] = src` for `src` of at most 32 bytes, with two overlapping fixed-size
/// copies instead of a memcpy call.
#[inline(always)]
fn copy_short(dst: &mut [u8], src: &[u8]) {
    let n = src.len();
    if n >= 16 {
        dst[..16].copy_from_slice(&src[..16]);
        dst[n - 16..n].copy_from_slice(&src[n - 16..]);
    } else if n >= 8 {
        dst[..8].copy_from_slice(&src[..8]);
        dst[n - 8..n].copy_from_slice(&src[n - 8..]);
    } else if n >= 4 {
        dst[..4].copy_from_slice(&src[..4]);
        dst[n - 4..n].copy_from_slice(&src[n - 4..]);
    } else if n > 0 {
        dst[0] = src[0];
        dst[n / 2] = src[n / 2];
        dst[n - 1] = src[n - 1];
    }
}

/// The canonical JSON of `artifact`; with `training`, that of its model identity (§5d).
fn write_artifact(
    out: &mut Writer<impl ChunkOut>,
    artifact: &Artifact,
    training: Option<&TrainingCheckpoint>,
) {
    // Keys in UTF-8 byte order: format < gguf_version < groups < metadata < tensors.
    out.put(b"{\"format\":");
    write_str(out, artifact.format.name());
    if let Some(version) = artifact.gguf_version {
        out.put(b",\"gguf_version\":");
        write_int(out, version);
    }
    // A model identity: the model weights under their state-dict names, and the groups
    // (docs/SPEC.md §5d). Stripping one key keeps the names in byte order.
    if let Some(training) = training {
        out.put(b",\"groups\":");
        write_items(out, &training.groups, |out, g| write_str(out, g));
    }
    out.put(b",\"metadata\":{");
    // BTreeMap<String, _> iterates in byte order of the keys.
    let metadata = artifact
        .metadata
        .iter()
        .filter_map(|(key, value)| match training {
            Some(t) => t.model_name(key).map(|key| (key, value)),
            None => Some((key.as_str(), value)),
        });
    for (i, (key, value)) in metadata.enumerate() {
        if i > 0 {
            out.put(b",");
        }
        write_str(out, key);
        out.put(b":");
        write_value(out, value);
    }
    out.put(b"},\"tensors\":{");
    let tensors = artifact
        .tensors
        .iter()
        .filter_map(|(name, tensor)| match training {
            Some(t) => t.model_name(name).map(|name| (name, tensor)),
            None => Some((name, tensor)),
        });
    for (i, (name, tensor)) in tensors.enumerate() {
        if i > 0 {
            out.put(b",");
        }
        write_str(out, name);
        out.put(b":{\"byte_length\":");
        write_int(out, tensor.byte_length);
        out.put(b",\"dtype\":");
        write_str(out, tensor.dtype.name);
        out.put(b",\"shape\":");
        write_items(out, &tensor.shape, |out, d| write_int(out, *d));
        out.put(b"}");
    }
    out.put(b"}}");
}

fn write_value(out: &mut Writer<impl ChunkOut>, value: &Value) {
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

fn write_array(out: &mut Writer<impl ChunkOut>, array: &Array) {
    match array {
        Array::U8(v) => write_int_items(out, v, |x| (false, u64::from(x))),
        Array::I8(v) => write_int_items(out, v, |x| (x < 0, u64::from(x.unsigned_abs()))),
        Array::U16(v) => write_int_items(out, v, |x| (false, u64::from(x))),
        Array::I16(v) => write_int_items(out, v, |x| (x < 0, u64::from(x.unsigned_abs()))),
        Array::U32(v) => write_int_items(out, v, |x| (false, u64::from(x))),
        Array::I32(v) => write_int_items(out, v, |x| (x < 0, u64::from(x.unsigned_abs()))),
        Array::U64(v) => write_int_items(out, v, |x| (false, x)),
        Array::I64(v) => write_int_items(out, v, |x| (x < 0, x.unsigned_abs())),
        Array::F64(v) => write_int_items(out, v, |x| (false, x.0)),
        Array::F32(v) => {
            out.put(b"[");
            for (i, x) in v.iter().enumerate() {
                out.put_f32_item(i > 0, x.0);
            }
            out.put(b"]");
        }
        Array::Bool(v) => write_items(out, v, |o, x| o.put(if *x { b"true" } else { b"false" })),
        Array::String(v) => write_string_array(out, v),
        Array::Array(v) => write_items(out, v, |o, x| write_array(o, x)),
    }
}

/// Integers, each given as (negative, magnitude), with their separating commas.
fn write_int_items<T: Copy>(
    out: &mut Writer<impl ChunkOut>,
    items: &[T],
    int: fn(T) -> (bool, u64),
) {
    out.put(b"[");
    for (i, &x) in items.iter().enumerate() {
        let (negative, magnitude) = int(x);
        out.put_int_item(i > 0, negative, magnitude);
    }
    out.put(b"]");
}

/// Writes `n` in decimal at the start of `dst` (20 bytes at least) and returns its length.
///
/// itoa formats into its own buffer, and copying the digits out of it right after they were
/// stored stalls on store forwarding; a vocabulary's scores and token types are half a million
/// numbers, so they are written where they go.
#[inline]
fn write_decimal(dst: &mut [u8], mut n: u64) -> usize {
    const PAIRS: &[u8; 200] = b"\
        0001020304050607080910111213141516171819\
        2021222324252627282930313233343536373839\
        4041424344454647484950515253545556575859\
        6061626364656667686970717273747576777879\
        8081828384858687888990919293949596979899";
    let len = n.checked_ilog10().unwrap_or(0) as usize + 1;
    let mut end = len;
    while n >= 100 {
        let pair = (n % 100) as usize * 2;
        n /= 100;
        end -= 2;
        dst[end..end + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
    }
    if n >= 10 {
        let pair = n as usize * 2;
        dst[..2].copy_from_slice(&PAIRS[pair..pair + 2]);
    } else {
        dst[0] = b'0' + n as u8;
    }
    len
}

/// `["a","b",...]`. A vocabulary is hundreds of thousands of short strings that nearly never
/// need escaping: then each goes out with its quotes and comma in fixed-size stores, read
/// from the array's joined text.
fn write_string_array(out: &mut Writer<impl ChunkOut>, array: &StringArray) {
    let (joined, ends) = array.joined();
    let text = joined.as_bytes();
    // Each string is followed by one NUL, itself a byte to escape: no string needs escaping
    // exactly when the count equals the number of strings. Counted in byte-sized lanes per
    // 255 bytes (a u8 cannot overflow there): counting in usize lanes was four times slower.
    let escapes: usize = text
        .chunks(255)
        .map(|block| {
            let n = block
                .iter()
                .fold(0u8, |n, &b| n + u8::from(needs_escape(b)));
            usize::from(n)
        })
        .sum();
    out.put(b"[");
    let mut start = 0;
    for (i, &end) in ends.iter().enumerate() {
        let item = &text[start..end];
        match text.get(start..start + 32) {
            Some(window) if escapes == ends.len() && item.len() <= 32 => {
                let window = window.try_into().expect("a 32-byte slice");
                out.put_string_item(i > 0, window, item.len());
            }
            _ => {
                out.put(if i > 0 { b",\"" } else { b"\"" });
                write_str_content(out, &joined[start..end]);
                out.put(b"\"");
            }
        }
        start = end + 1;
    }
    out.put(b"]");
}

fn write_items<O: ChunkOut, T>(
    out: &mut Writer<O>,
    items: &[T],
    mut write_item: impl FnMut(&mut Writer<O>, &T),
) {
    out.put(b"[");
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.put(b",");
        }
        write_item(out, item);
    }
    out.put(b"]");
}

fn write_int(out: &mut Writer<impl ChunkOut>, n: impl itoa::Integer) {
    out.put(itoa::Buffer::new().format(n).as_bytes());
}

/// `"f32:<bits>"`.
fn write_f32_bits(out: &mut Writer<impl ChunkOut>, bits: u32) {
    out.put(b"\"f32:");
    write_int(out, bits);
    out.put(b"\"");
}

#[inline]
fn needs_escape(b: u8) -> bool {
    b < 0x20 || b == b'"' || b == b'\\'
}

/// A JSON string with the schema-1 escapes. Most strings need none and are copied whole.
fn write_str(out: &mut Writer<impl ChunkOut>, s: &str) {
    out.put(b"\"");
    write_str_content(out, s);
    out.put(b"\"");
}

/// The escaped content of a JSON string, without its quotes.
fn write_str_content(out: &mut Writer<impl ChunkOut>, s: &str) {
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
                    dtype: crate::dtype::by_name("q4_k").unwrap(),
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
            let mut ours = Writer::new(Vec::new(), 16);
            write_str(&mut ours, &s);
            proptest::prop_assert_eq!(ours.finish(), serde_json::to_vec(&s).unwrap());
        }

        /// String arrays (short, long, escaped, at the end of the joined text), written through
        /// chunks small enough to split items, are serde_json's output too.
        #[test]
        fn string_arrays_are_written_as_serde_json_writes_them(
            strings in proptest::collection::vec("[a-z]{0,40}|\\PC{0,40}|[\\x00-\\x7f]{0,3}", 0..40),
            chunk in 1usize..100,
        ) {
            let array = Array::String(strings.iter().collect());
            let mut ours = Writer::new(Vec::new(), chunk);
            write_array(&mut ours, &array);
            proptest::prop_assert_eq!(ours.finish(), serde_json::to_vec(&strings).unwrap());
        }

        /// Integers of every width, written straight into the chunk, are serde_json's output.
        #[test]
        fn integer_arrays_are_written_as_serde_json_writes_them(
            u in proptest::collection::vec(proptest::num::u64::ANY, 0..20),
            i in proptest::collection::vec(proptest::num::i64::ANY, 0..20),
            small in proptest::collection::vec(proptest::num::i8::ANY, 0..20),
            chunk in 1usize..100,
        ) {
            let mut ours = Writer::new(Vec::new(), chunk);
            write_array(&mut ours, &Array::U64(u.clone()));
            write_array(&mut ours, &Array::I64(i.clone()));
            write_array(&mut ours, &Array::I8(small.clone()));
            write_array(&mut ours, &Array::U32(u.iter().map(|&x| x as u32).collect()));
            let mut expected = serde_json::to_vec(&u).unwrap();
            expected.extend(serde_json::to_vec(&i).unwrap());
            expected.extend(serde_json::to_vec(&small).unwrap());
            expected.extend(serde_json::to_vec(&u.iter().map(|&x| x as u32).collect::<Vec<_>>()).unwrap());
            proptest::prop_assert_eq!(ours.finish(), expected);
        }
    }

    #[test]
    fn decimals_at_every_length_match_to_string() {
        let mut edges = vec![0u64, u64::MAX];
        for k in 1..20 {
            let p = 10u64.pow(k);
            edges.extend([p - 1, p, p + 1]);
        }
        for n in edges {
            let mut digits = [0u8; 20];
            let len = write_decimal(&mut digits, n);
            assert_eq!(&digits[..len], n.to_string().as_bytes());
        }
        let a = artifact(vec![(
            "f",
            Value::Array(Array::F32(vec![F32Bits(0), F32Bits(u32::MAX), F32Bits(7)])),
        )]);
        let json = String::from_utf8(canonical_json(&a)).unwrap();
        assert!(
            json.contains(r#""f":["f32:0","f32:4294967295","f32:7"]"#),
            "{json}"
        );
    }

    #[test]
    fn pipelined_hash_equals_hash_of_canonical_json() {
        let tokens: crate::artifact::StringArray = (0..PIPELINE_MIN_ITEMS + 7)
            .map(|i| format!("tok{i}\n"))
            .collect();
        // Without escapes too: the fast path of string arrays.
        let plain: crate::artifact::StringArray = (0..PIPELINE_MIN_ITEMS + 7)
            .map(|i| "x".repeat(i % 50))
            .collect();
        let a = artifact(vec![
            ("plain", Value::Array(Array::String(plain))),
            ("tokens", Value::Array(Array::String(tokens))),
        ]);
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
