//! Hostile and malformed inputs: every one must end in a clean error (exit 2, a message on stderr
//! that names the file and says what was wrong, never a panic), except the few that are valid
//! despite looking odd, which must parse. The byte strings are built here, written to temp dirs.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::{fixture, run, stderr, stdout};

// ---------------------------------------------------------------------------------------------
// Little builders.

/// GGUF value type ids.
mod vt {
    pub(crate) const U8: u32 = 0;
    pub(crate) const U32: u32 = 4;
    pub(crate) const BOOL: u32 = 7;
    pub(crate) const STRING: u32 = 8;
    pub(crate) const ARRAY: u32 = 9;
    pub(crate) const U64: u32 = 10;
}

/// A little-endian GGUF byte string, written field by field.
#[derive(Default)]
struct G(Vec<u8>);

impl G {
    /// Magic, version 3 and the two counts.
    fn header(n_tensors: u64, n_kv: u64) -> G {
        let mut g = G::default();
        g.raw(b"GGUF").u32(3).u64(n_tensors).u64(n_kv);
        g
    }
    fn raw(&mut self, b: &[u8]) -> &mut Self {
        self.0.extend_from_slice(b);
        self
    }
    fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }
    fn u32(&mut self, v: u32) -> &mut Self {
        self.raw(&v.to_le_bytes())
    }
    fn u64(&mut self, v: u64) -> &mut Self {
        self.raw(&v.to_le_bytes())
    }
    fn str(&mut self, s: &[u8]) -> &mut Self {
        self.u64(s.len() as u64).raw(s)
    }
    fn kv_u32(&mut self, key: &str, v: u32) -> &mut Self {
        self.str(key.as_bytes()).u32(vt::U32).u32(v)
    }
    fn kv_str(&mut self, key: &[u8], v: &[u8]) -> &mut Self {
        self.str(key).u32(vt::STRING).str(v)
    }
    fn tensor(&mut self, name: &[u8], dims: &[u64], ggml_type: u32, offset: u64) -> &mut Self {
        self.str(name).u32(dims.len() as u32);
        for &d in dims {
            self.u64(d);
        }
        self.u32(ggml_type).u64(offset)
    }
    fn pad_to(&mut self, alignment: usize) -> &mut Self {
        let len = self.0.len().div_ceil(alignment) * alignment;
        self.0.resize(len, 0);
        self
    }
    fn zeros(&mut self, n: usize) -> &mut Self {
        self.0.resize(self.0.len() + n, 0);
        self
    }
    fn bytes(&self) -> Vec<u8> {
        self.0.clone()
    }
}

/// A safetensors file: u64 LE header length, the header text, then the data.
fn st(header: &[u8], data: &[u8]) -> Vec<u8> {
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(header);
    out.extend_from_slice(data);
    out
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

fn cli(args: &[&str]) -> Output {
    run(args)
}

/// Runs `id` on the bytes and asserts a clean error whose message contains every `expected`.
fn assert_rejected(name: &str, bytes: &[u8], expected: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), name, bytes);
    let out = cli(&["id", path.to_str().unwrap()]);
    let err = stderr(&out);
    // SHOW_ERRORS=1 cargo test --test hostile_inputs -- --nocapture: review every message.
    if std::env::var_os("SHOW_ERRORS").is_some() {
        eprintln!("{err}");
    }
    assert_eq!(
        out.status.code(),
        Some(2),
        "{name}: expected exit 2, got {:?}\nstdout: {}\nstderr: {err}",
        out.status,
        stdout(&out)
    );
    assert!(!err.contains("panicked"), "{name}: panicked:\n{err}");
    assert!(
        err.contains(name),
        "{name}: the error does not name the file:\n{err}"
    );
    for e in expected {
        assert!(
            err.contains(e),
            "{name}: expected {e:?} in the error:\n{err}"
        );
    }
    assert!(
        stdout(&out).is_empty(),
        "{name}: printed to stdout on error"
    );
}

/// Runs `id --canonical` on the bytes and asserts success; returns the canonical JSON.
fn assert_accepted(name: &str, bytes: &[u8]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), name, bytes);
    let out = cli(&["id", "--canonical", path.to_str().unwrap()]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{name}: expected success, stderr:\n{}",
        stderr(&out)
    );
    stdout(&out)
}

const GGUF_ERR: &str = "unable to parse GGUF header";
const ST_JSON_ERR: &str = "invalid safetensors JSON header";
const HUGE: u64 = 1 << 63;

// ---------------------------------------------------------------------------------------------
// Truncation at every offset.

fn inspect_json(path: &Path) -> (Output, Option<serde_json::Value>) {
    let out = cli(&["inspect", "--json", path.to_str().unwrap()]);
    let doc = serde_json::from_slice(&out.stdout).ok();
    (out, doc)
}

/// Header end, data start and data end of a GGUF as gguf-py sees them.
fn gguf_py_layout(path: &Path) -> (usize, usize, usize) {
    let script = "import sys\n\
        from gguf import GGUFReader\n\
        r = GGUFReader(sys.argv[1])\n\
        infos = [t.field for t in r.tensors]\n\
        header_end = max(f.offset + sum(int(p.nbytes) for p in f.parts) for f in infos)\n\
        data_end = max(t.data_offset + t.n_bytes for t in r.tensors)\n\
        print(header_end, r.data_offset, data_end)\n";
    let out = std::process::Command::new(common::python())
        .args(["-c", script, path.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let nums: Vec<usize> = stdout(&out)
        .split_whitespace()
        .map(|n| n.parse().unwrap())
        .collect();
    (nums[0], nums[1], nums[2])
}

#[test]
fn gguf_truncated_at_every_offset() {
    let full = std::fs::read(fixture("golden-types.gguf")).unwrap();
    let (header_end, data_start, data_end) = gguf_py_layout(&fixture("golden-types.gguf"));
    assert!(header_end < data_start && data_start < data_end && data_end <= full.len());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cut.gguf");
    for cut in 0..full.len() {
        std::fs::write(&path, &full[..cut]).unwrap();
        let (out, doc) = inspect_json(&path);
        let err = stderr(&out);
        assert!(!err.contains("panicked"), "cut at {cut}: panicked:\n{err}");
        if cut < header_end {
            // Header cut: an error naming the file.
            assert_eq!(
                out.status.code(),
                Some(2),
                "cut at {cut} (header ends at {header_end}): {err}"
            );
            assert!(
                err.contains("cut.gguf"),
                "cut at {cut}: error does not name the file: {err}"
            );
            if cut >= 4 {
                assert!(err.contains(GGUF_ERR), "cut at {cut}: {err}");
            }
        } else {
            // Data cut (or padding only): parses, and says whether data is missing.
            assert_eq!(
                out.status.code(),
                Some(0),
                "cut at {cut} (header ends at {header_end}): {err}"
            );
            let doc = doc.expect("inspect --json prints JSON");
            let missing = cut < data_end;
            assert_eq!(doc["truncated"], serde_json::json!(missing), "cut at {cut}");
            assert_eq!(
                doc["data_bytes_present"].as_u64().unwrap() as usize,
                cut.saturating_sub(data_start).min(data_end - data_start),
                "cut at {cut}"
            );
        }
    }
}

#[test]
fn safetensors_truncated_at_every_offset() {
    let full = std::fs::read(fixture("golden.safetensors")).unwrap();
    let header_len = u64::from_le_bytes(full[..8].try_into().unwrap()) as usize;
    let data_start = 8 + header_len;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cut.safetensors");
    for cut in 0..full.len() {
        std::fs::write(&path, &full[..cut]).unwrap();
        let (out, doc) = inspect_json(&path);
        let err = stderr(&out);
        assert!(!err.contains("panicked"), "cut at {cut}: panicked:\n{err}");
        if cut < data_start {
            assert_eq!(out.status.code(), Some(2), "cut at {cut}: {err}");
            assert!(
                err.contains("cut.safetensors"),
                "cut at {cut}: error does not name the file: {err}"
            );
        } else {
            assert_eq!(out.status.code(), Some(0), "cut at {cut}: {err}");
            let doc = doc.expect("inspect --json prints JSON");
            assert_eq!(doc["truncated"], serde_json::json!(true), "cut at {cut}");
            assert_eq!(
                doc["data_bytes_present"].as_u64().unwrap() as usize,
                cut - data_start
            );
        }
    }
}

/// Every prefix of every committed fixture, in process: never a panic; once a prefix parses,
/// every longer prefix parses too, with the identity of the whole file.
#[test]
fn prefixes_of_every_fixture_never_panic_and_keep_the_identity() {
    use weight_inspect::read_bytes;
    use weight_inspect::structural_hash;
    let mut checked = 0;
    for entry in std::fs::read_dir(common::repo_root().join("tests/fixtures")).unwrap() {
        let path = entry.unwrap().path();
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
        if ext != "gguf" && ext != "safetensors" {
            continue;
        }
        let bytes = std::fs::read(&path).unwrap();
        let whole = structural_hash(&read_bytes(&path, &bytes).unwrap());
        let mut parsed_from = None;
        for cut in 0..=bytes.len() {
            match read_bytes(&path, &bytes[..cut]) {
                Ok(artifact) => {
                    parsed_from.get_or_insert(cut);
                    assert_eq!(
                        structural_hash(&artifact),
                        whole,
                        "{}: prefix {cut}",
                        path.display()
                    );
                }
                Err(e) => {
                    assert!(
                        parsed_from.is_none(),
                        "{}: prefix {cut} fails ({e}) after a shorter one parsed",
                        path.display()
                    );
                    assert!(
                        e.to_string().contains(path.to_str().unwrap()),
                        "error does not name the file: {e}"
                    );
                }
            }
        }
        checked += 1;
    }
    assert!(
        checked >= 15,
        "expected the committed fixtures, found {checked}"
    );
}

// ---------------------------------------------------------------------------------------------
// GGUF: counts, strings, nesting.

#[test]
fn gguf_huge_tensor_count_fails_fast() {
    let bytes = G::header(HUGE, 0).zeros(16).bytes();
    assert_eq!(bytes.len(), 40);
    assert_rejected("huge-tensors.gguf", &bytes, &[GGUF_ERR, &HUGE.to_string()]);
}

#[test]
fn gguf_huge_kv_count_fails_fast() {
    let bytes = G::header(0, HUGE).zeros(16).bytes();
    assert_eq!(bytes.len(), 40);
    assert_rejected("huge-kv.gguf", &bytes, &[GGUF_ERR, &HUGE.to_string()]);
    let bytes = G::header(0, u64::MAX).zeros(16).bytes();
    assert_rejected("max-kv.gguf", &bytes, &[GGUF_ERR, &u64::MAX.to_string()]);
}

#[test]
fn gguf_huge_arrays_and_strings_fail_fast() {
    // An array of 2^63 strings.
    let bytes = G::header(0, 1)
        .str(b"tokenizer.ggml.tokens")
        .u32(vt::ARRAY)
        .u32(vt::STRING)
        .u64(HUGE)
        .str(b"a")
        .bytes();
    assert_rejected(
        "huge-string-array.gguf",
        &bytes,
        &[GGUF_ERR, &HUGE.to_string()],
    );
    // An array of 2^63 u64 (fixed-size elements).
    let bytes = G::header(0, 1)
        .str(b"a")
        .u32(vt::ARRAY)
        .u32(vt::U64)
        .u64(HUGE)
        .zeros(16)
        .bytes();
    assert_rejected(
        "huge-u64-array.gguf",
        &bytes,
        &[GGUF_ERR, &HUGE.to_string()],
    );
    // An array of 2^63 empty arrays: each element is at least 12 bytes, still not allocated.
    let bytes = G::header(0, 1)
        .str(b"a")
        .u32(vt::ARRAY)
        .u32(vt::ARRAY)
        .u64(HUGE)
        .zeros(24)
        .bytes();
    assert_rejected(
        "huge-nested-array.gguf",
        &bytes,
        &[GGUF_ERR, &HUGE.to_string()],
    );
    // A key of 2^63 bytes, a string value of 2^63 bytes, a tensor name of 2^63 bytes.
    let bytes = G::header(0, 1).u64(HUGE).raw(b"abc").zeros(64).bytes();
    assert_rejected("huge-key.gguf", &bytes, &[GGUF_ERR, &HUGE.to_string()]);
    let bytes = G::header(0, 1)
        .str(b"k")
        .u32(vt::STRING)
        .u64(HUGE)
        .raw(b"abc")
        .zeros(64)
        .bytes();
    assert_rejected("huge-string.gguf", &bytes, &[GGUF_ERR, &HUGE.to_string()]);
    let bytes = G::header(1, 0).u64(HUGE).raw(b"abc").zeros(64).bytes();
    assert_rejected("huge-name.gguf", &bytes, &[GGUF_ERR, &HUGE.to_string()]);
}

#[test]
fn gguf_deeply_nested_arrays_are_a_clean_error() {
    let mut g = G::header(0, 1);
    g.str(b"deep").u32(vt::ARRAY);
    for _ in 0..10_000 {
        g.u32(vt::ARRAY).u64(1);
    }
    g.u32(vt::U8).u64(0);
    assert_rejected("deep.gguf", &g.bytes(), &[GGUF_ERR, "deep"]);
}

#[test]
fn gguf_bad_utf8_is_rejected() {
    let bytes = G::header(0, 1).kv_str(b"bad\xffkey", b"v").bytes();
    assert_rejected("bad-utf8-key.gguf", &bytes, &[GGUF_ERR, "UTF-8"]);
    let bytes = G::header(0, 1).kv_str(b"k", b"\xc3\x28").bytes();
    assert_rejected("bad-utf8-value.gguf", &bytes, &[GGUF_ERR, "UTF-8"]);
    let bytes = G::header(0, 1)
        .str(b"k")
        .u32(vt::ARRAY)
        .u32(vt::STRING)
        .u64(2)
        .str(b"ok")
        .str(b"\xed\xa0\x80")
        .bytes();
    assert_rejected("bad-utf8-array.gguf", &bytes, &[GGUF_ERR, "UTF-8"]);
    let bytes = G::header(1, 0)
        .tensor(b"w\xfe", &[4], 0, 0)
        .pad_to(32)
        .zeros(16)
        .bytes();
    assert_rejected("bad-utf8-tensor.gguf", &bytes, &[GGUF_ERR, "UTF-8"]);
}

#[test]
fn gguf_duplicates_are_rejected() {
    let bytes = G::header(0, 2)
        .kv_u32("a.key", 1)
        .kv_u32("a.key", 2)
        .bytes();
    assert_rejected("dup-key.gguf", &bytes, &[GGUF_ERR, "duplicate", "a.key"]);
    let bytes = G::header(2, 0)
        .tensor(b"w", &[4], 0, 0)
        .tensor(b"w", &[4], 0, 32)
        .pad_to(32)
        .zeros(64)
        .bytes();
    assert_rejected("dup-tensor.gguf", &bytes, &[GGUF_ERR, "duplicate", "w"]);
}

#[test]
fn gguf_unknown_and_removed_types_are_rejected() {
    for type_id in [4u32, 5, 31, 32, 33, 36, 37, 38, 43, 1000, u32::MAX] {
        let bytes = G::header(1, 0)
            .tensor(b"w", &[256], type_id, 0)
            .pad_to(32)
            .zeros(1024)
            .bytes();
        let name = format!("type-{type_id}.gguf");
        assert_rejected(&name, &bytes, &[GGUF_ERR, &type_id.to_string(), "\"w\""]);
    }
    let bytes = G::header(0, 1).str(b"k").u32(13).u32(0).bytes();
    assert_rejected("value-type-13.gguf", &bytes, &[GGUF_ERR, "13"]);
    let bytes = G::header(0, 1)
        .str(b"k")
        .u32(vt::ARRAY)
        .u32(99)
        .u64(1)
        .u32(0)
        .bytes();
    assert_rejected("element-type-99.gguf", &bytes, &[GGUF_ERR, "99"]);
}

#[test]
fn gguf_bad_shapes_are_rejected() {
    // q4_0 has blocks of 32: ne[0] = 33 is not whole blocks.
    let bytes = G::header(1, 0)
        .tensor(b"w", &[33, 2], 2, 0)
        .pad_to(32)
        .zeros(128)
        .bytes();
    assert_rejected("ne0-not-blocks.gguf", &bytes, &[GGUF_ERR, "33", "\"w\""]);
    // q4_k's block is 256 along ne[0]; 256 elements split as ne = [128, 2] is still invalid.
    let bytes = G::header(1, 0)
        .tensor(b"w", &[128, 2], 12, 0)
        .pad_to(32)
        .zeros(256)
        .bytes();
    assert_rejected("ne0-half-block.gguf", &bytes, &[GGUF_ERR, "128"]);
    let bytes = G::header(1, 0)
        .tensor(b"w", &[1, 1, 1, 1, 1], 0, 0)
        .pad_to(32)
        .zeros(32)
        .bytes();
    assert_rejected("five-dims.gguf", &bytes, &[GGUF_ERR, "5"]);
    let bytes = G::header(1, 0)
        .tensor(b"w", &[1 << 40, 1 << 40], 0, 0)
        .pad_to(32)
        .zeros(32)
        .bytes();
    assert_rejected("element-overflow.gguf", &bytes, &[GGUF_ERR, "\"w\""]);
    let bytes = G::header(1, 0)
        .u64(1)
        .raw(b"w")
        .u32(u32::MAX)
        .zeros(64)
        .bytes();
    assert_rejected(
        "huge-n-dims.gguf",
        &bytes,
        &[GGUF_ERR, &u32::MAX.to_string()],
    );
}

#[test]
fn gguf_bad_alignment_is_rejected() {
    for (name, value) in [
        ("align-0.gguf", 0u32),
        ("align-3.gguf", 3),
        ("align-48.gguf", 48),
    ] {
        let bytes = G::header(0, 1)
            .kv_u32("general.alignment", value)
            .pad_to(64)
            .bytes();
        assert_rejected(
            name,
            &bytes,
            &[GGUF_ERR, "general.alignment", &value.to_string()],
        );
    }
    let bytes = G::header(0, 1)
        .str(b"general.alignment")
        .u32(vt::U64)
        .u64(32)
        .pad_to(32)
        .bytes();
    assert_rejected(
        "align-u64.gguf",
        &bytes,
        &[GGUF_ERR, "general.alignment", "u64"],
    );
    let bytes = G::header(0, 1)
        .kv_str(b"general.alignment", b"32")
        .pad_to(32)
        .bytes();
    assert_rejected(
        "align-string.gguf",
        &bytes,
        &[GGUF_ERR, "general.alignment", "string"],
    );
    // A valid custom alignment is honoured: data starts at 64, not 32.
    let bytes = G::header(1, 1)
        .kv_u32("general.alignment", 64)
        .tensor(b"w", &[4], 0, 0)
        .pad_to(64)
        .zeros(16)
        .bytes();
    assert_accepted("align-64.gguf", &bytes);
}

#[test]
fn gguf_misaligned_or_misplaced_offsets_are_rejected() {
    let bytes = G::header(1, 0)
        .tensor(b"w", &[4], 0, 1)
        .pad_to(32)
        .zeros(64)
        .bytes();
    assert_rejected("offset-1.gguf", &bytes, &[GGUF_ERR, "\"w\"", "1"]);
    // Aligned, but leaving a gap after the first tensor.
    let bytes = G::header(2, 0)
        .tensor(b"a", &[4], 0, 0)
        .tensor(b"b", &[4], 0, 64)
        .pad_to(32)
        .zeros(96)
        .bytes();
    assert_rejected("offset-gap.gguf", &bytes, &[GGUF_ERR, "\"b\""]);
    // Both tensors at offset 0.
    let bytes = G::header(2, 0)
        .tensor(b"a", &[4], 0, 0)
        .tensor(b"b", &[4], 0, 0)
        .pad_to(32)
        .zeros(64)
        .bytes();
    assert_rejected("offset-overlap.gguf", &bytes, &[GGUF_ERR, "\"b\""]);
}

#[test]
fn gguf_bad_magic_version_and_bool() {
    let bytes = G::header(0, 0).bytes();
    let mut v0 = bytes.clone();
    v0[4..8].copy_from_slice(&0u32.to_le_bytes());
    assert_rejected("version-0.gguf", &v0, &[GGUF_ERR, "version"]);
    let mut v4 = bytes.clone();
    v4[4..8].copy_from_slice(&4u32.to_le_bytes());
    assert_rejected("version-4.gguf", &v4, &[GGUF_ERR, "version"]);
    let bytes = G::header(0, 1)
        .str(b"flag")
        .u32(vt::BOOL)
        .u8(2)
        .pad_to(32)
        .bytes();
    assert_rejected("bool-2.gguf", &bytes, &[GGUF_ERR, "flag"]);
    assert_rejected("empty.bin", b"", &[]);
    assert_rejected("random.bin", b"\x89PNG\r\n\x1a\n not a model", &[]);
}

/// A big-endian file claiming huge counts fails the same way (the counts are byte-swapped).
#[test]
fn gguf_big_endian_huge_counts_fail_fast() {
    let mut bytes = b"GGUF".to_vec();
    bytes.extend(3u32.to_be_bytes());
    bytes.extend(HUGE.to_be_bytes());
    bytes.extend(0u64.to_be_bytes());
    bytes.extend([0u8; 16]);
    assert_rejected(
        "huge-tensors-be.gguf",
        &bytes,
        &[GGUF_ERR, &HUGE.to_string()],
    );
}

// ---------------------------------------------------------------------------------------------
// safetensors

fn f32_tensor(begin: u64, end: u64) -> String {
    format!(
        r#"{{"dtype":"F32","shape":[{}],"data_offsets":[{begin},{end}]}}"#,
        (end - begin) / 4
    )
}

#[test]
fn safetensors_duplicate_json_keys_are_rejected() {
    let header = format!(r#"{{"a":{},"a":{}}}"#, f32_tensor(0, 4), f32_tensor(4, 8));
    assert_rejected(
        "dup-tensor.safetensors",
        &st(header.as_bytes(), &[0; 8]),
        &[ST_JSON_ERR, "duplicate", "a"],
    );
    let header = format!(
        r#"{{"__metadata__":{{"k":"1","k":"2"}},"a":{}}}"#,
        f32_tensor(0, 4)
    );
    assert_rejected(
        "dup-metadata.safetensors",
        &st(header.as_bytes(), &[0; 4]),
        &[ST_JSON_ERR, "duplicate", "k"],
    );
    let header = format!(
        r#"{{"__metadata__":{{}},"__metadata__":{{}},"a":{}}}"#,
        f32_tensor(0, 4)
    );
    assert_rejected(
        "dup-metadata-key.safetensors",
        &st(header.as_bytes(), &[0; 4]),
        &[ST_JSON_ERR, "duplicate"],
    );
    let header = r#"{"a":{"dtype":"F32","dtype":"F16","shape":[1],"data_offsets":[0,4]}}"#;
    assert_rejected(
        "dup-field.safetensors",
        &st(header.as_bytes(), &[0; 4]),
        &[ST_JSON_ERR, "duplicate"],
    );
}

#[test]
fn safetensors_offsets_must_tile_the_data() {
    // Overlap: b starts inside a.
    let header = format!(r#"{{"a":{},"b":{}}}"#, f32_tensor(0, 8), f32_tensor(4, 12));
    assert_rejected(
        "overlap.safetensors",
        &st(header.as_bytes(), &[0; 12]),
        &["\"b\""],
    );
    // Gap: 4 unused bytes between a and b.
    let header = format!(r#"{{"a":{},"b":{}}}"#, f32_tensor(0, 4), f32_tensor(8, 12));
    assert_rejected(
        "gap.safetensors",
        &st(header.as_bytes(), &[0; 12]),
        &["\"b\""],
    );
    // end - begin disagrees with dtype x shape.
    let header = r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}"#;
    assert_rejected(
        "size-mismatch.safetensors",
        &st(header.as_bytes(), &[0; 4]),
        &["\"a\""],
    );
    // end before begin.
    let header = r#"{"a":{"dtype":"U8","shape":[0],"data_offsets":[4,0]}}"#;
    assert_rejected(
        "reversed.safetensors",
        &st(header.as_bytes(), &[0; 4]),
        &["\"a\""],
    );
    // More data than the tensors declare.
    let header = format!(r#"{{"a":{}}}"#, f32_tensor(0, 4));
    assert_rejected(
        "trailing-data.safetensors",
        &st(header.as_bytes(), &[0; 5]),
        &["1 bytes after"],
    );
    // F4 packs two per byte: 3 elements do not fill whole bytes.
    let header = r#"{"a":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}}"#;
    assert_rejected(
        "f4-odd.safetensors",
        &st(header.as_bytes(), &[0; 2]),
        &["\"a\""],
    );
    // Shape whose element count overflows.
    let header = r#"{"a":{"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,0]}}"#;
    assert_rejected(
        "shape-overflow.safetensors",
        &st(header.as_bytes(), &[]),
        &["\"a\""],
    );
}

#[test]
fn safetensors_out_of_order_but_contiguous_offsets_are_valid() {
    // The header lists b first though its data comes second: valid, as the format allows.
    let header = format!(r#"{{"b":{},"a":{}}}"#, f32_tensor(8, 12), f32_tensor(0, 8));
    let canonical = assert_accepted("out-of-order.safetensors", &st(header.as_bytes(), &[0; 12]));
    assert_eq!(
        canonical,
        concat!(
            r#"{"format":"safetensors","metadata":{},"tensors":{"a":{"byte_length":8,"dtype":"f32","shape":[2]},"#,
            r#""b":{"byte_length":4,"dtype":"f32","shape":[1]}}}"#,
            "\n"
        )
    );
}

#[test]
fn safetensors_bad_headers_are_rejected() {
    // Header length above the 100,000,000-byte limit (the file itself is tiny).
    let mut bytes = 100_000_001u64.to_le_bytes().to_vec();
    bytes.extend_from_slice(b"{}");
    assert_rejected("header-too-large.safetensors", &bytes, &["100000001"]);
    let mut bytes = u64::MAX.to_le_bytes().to_vec();
    bytes.extend_from_slice(b"{}");
    assert_rejected("header-max.safetensors", &bytes, &[&u64::MAX.to_string()]);
    // Header length past the end of the file.
    let mut bytes = 1000u64.to_le_bytes().to_vec();
    bytes.extend_from_slice(b"{}");
    assert_rejected("header-past-end.safetensors", &bytes, &["1000"]);
    assert_rejected(
        "bad-utf8.safetensors",
        &st(b"{\"a\xff\":{}}", &[]),
        &[ST_JSON_ERR, "UTF-8"],
    );
    assert_rejected(
        "not-json.safetensors",
        &st(b"{not json}", &[]),
        &[ST_JSON_ERR],
    );
    assert_rejected(
        "metadata-not-string.safetensors",
        &st(br#"{"__metadata__":{"k":1}}"#, &[]),
        &[ST_JSON_ERR],
    );
    assert_rejected(
        "metadata-nested.safetensors",
        &st(br#"{"__metadata__":{"k":{"x":"y"}}}"#, &[]),
        &[ST_JSON_ERR],
    );
    assert_rejected(
        "tensor-not-object.safetensors",
        &st(br#"{"a":[1,2]}"#, &[]),
        &[ST_JSON_ERR],
    );
    assert_rejected(
        "missing-field.safetensors",
        &st(br#"{"a":{"dtype":"F32","shape":[0]}}"#, &[]),
        &[ST_JSON_ERR],
    );
    assert_rejected(
        "negative-dim.safetensors",
        &st(
            br#"{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}}"#,
            &[],
        ),
        &[ST_JSON_ERR],
    );
    assert_rejected(
        "unknown-dtype.safetensors",
        &st(
            br#"{"a":{"dtype":"F7","shape":[1],"data_offsets":[0,1]}}"#,
            &[0],
        ),
        &["\"a\"", "F7"],
    );
}

fn nested(depth: usize) -> Vec<u8> {
    let mut v = vec![b'['; depth];
    v.extend(std::iter::repeat_n(b']', depth));
    v
}

/// Deeply nested JSON never overflows the stack: where the schema expects a string map or a
/// list of dims it is a clean error.
#[test]
fn safetensors_deeply_nested_json_is_handled() {
    let mut header = br#"{"__metadata__":"#.to_vec();
    header.extend(nested(100_000));
    header.push(b'}');
    assert_rejected(
        "deep-metadata.safetensors",
        &st(&header, &[]),
        &[ST_JSON_ERR],
    );
    let mut header = br#"{"a":{"dtype":"U8","data_offsets":[0,0],"shape":"#.to_vec();
    header.extend(nested(100_000));
    header.extend(b"}}");
    assert_rejected(
        "deep-shape.safetensors",
        &st(&header, &[]),
        &[ST_JSON_ERR, "\"a\""],
    );
    // Inside a field the format does not define (ignored, as the safetensors crate ignores
    // unknown fields). The safetensors package stops at serde_json's recursion limit here and
    // refuses the file; weight-inspect skips the value without recursing. Either is safe: the
    // requirement is no crash.
    let mut header = br#"{"a":{"dtype":"U8","shape":[0],"data_offsets":[0,0],"x":"#.to_vec();
    header.extend(nested(100_000));
    header.extend(b"}}");
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "deep-unknown-field.safetensors",
        &st(&header, &[]),
    );
    let out = cli(&["id", path.to_str().unwrap()]);
    assert!(matches!(out.status.code(), Some(0 | 2)), "{out:?}");
    assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));
}

#[test]
fn safetensors_padding_and_empty_cases_are_valid() {
    // Trailing spaces pad the header (what the writers do for 8-byte alignment).
    let header = format!(r#"{{"a":{}}}     "#, f32_tensor(0, 4));
    assert_accepted("padded.safetensors", &st(header.as_bytes(), &[0; 4]));
    assert_accepted("empty-object.safetensors", &st(b"{}", &[]));
    let canonical = assert_accepted(
        "empty-metadata.safetensors",
        &st(br#"{"__metadata__":{}}"#, &[]),
    );
    assert_eq!(
        canonical,
        "{\"format\":\"safetensors\",\"metadata\":{},\"tensors\":{}}\n"
    );
}
