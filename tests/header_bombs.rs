//! GGUF header bombs at and above the caps (WEIGHT_INSPECT_MAX_HEADER_BYTES, default 100 MB):
//! below the cap a header parses in at most 3x its size + 64 MB of memory; above it (refused when
//! the parse reaches the cap), or past the metadata-key and nested-array caps (refused at once),
//! the error names the cap and how to raise it. Peak memory is measured (getrusage of the child), not assumed.

mod common;

use std::io::Write;
use std::path::Path;
use std::process::Command;

use common::{bin, python};

const MB: u64 = 1_000_000;
const ENV: &str = "WEIGHT_INSPECT_MAX_HEADER_BYTES";

/// A GGUF v3 header of `n` minimal tensor records (8-byte names, one dimension, f32, packed
/// offsets): 40 bytes a record, no tensor data (the file reads as truncated, which is allowed).
fn tensor_bomb(path: &Path, n: u64) -> u64 {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    out.write_all(b"GGUF").unwrap();
    out.write_all(&3u32.to_le_bytes()).unwrap();
    out.write_all(&n.to_le_bytes()).unwrap();
    out.write_all(&0u64.to_le_bytes()).unwrap();
    for i in 0..n {
        let name = format!("t{i:07}");
        out.write_all(&(name.len() as u64).to_le_bytes()).unwrap();
        out.write_all(name.as_bytes()).unwrap();
        out.write_all(&1u32.to_le_bytes()).unwrap();
        out.write_all(&8u64.to_le_bytes()).unwrap(); // 8 elements
        out.write_all(&0u32.to_le_bytes()).unwrap(); // f32
        out.write_all(&(i * 32).to_le_bytes()).unwrap(); // 32 bytes each, aligned
    }
    out.flush().unwrap();
    std::fs::metadata(path).unwrap().len()
}

/// A GGUF v3 header of `n` metadata keys holding one u8 each.
fn key_bomb(path: &Path, n: u64) {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    out.write_all(b"GGUF").unwrap();
    out.write_all(&3u32.to_le_bytes()).unwrap();
    out.write_all(&0u64.to_le_bytes()).unwrap();
    out.write_all(&n.to_le_bytes()).unwrap();
    for i in 0..n {
        let key = format!("k{i:07}");
        out.write_all(&(key.len() as u64).to_le_bytes()).unwrap();
        out.write_all(key.as_bytes()).unwrap();
        out.write_all(&0u32.to_le_bytes()).unwrap(); // u8
        out.write_all(&[1]).unwrap();
    }
    out.flush().unwrap();
}

/// One metadata key holding an array of `n` empty u8 arrays (12 bytes each in the file).
fn nested_bomb(path: &Path, n: u64) {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    out.write_all(b"GGUF").unwrap();
    out.write_all(&3u32.to_le_bytes()).unwrap();
    out.write_all(&0u64.to_le_bytes()).unwrap();
    out.write_all(&1u64.to_le_bytes()).unwrap();
    out.write_all(&1u64.to_le_bytes()).unwrap();
    out.write_all(b"n").unwrap();
    out.write_all(&9u32.to_le_bytes()).unwrap(); // array
    out.write_all(&9u32.to_le_bytes()).unwrap(); // of arrays
    out.write_all(&n.to_le_bytes()).unwrap();
    for _ in 0..n {
        out.write_all(&0u32.to_le_bytes()).unwrap(); // of u8
        out.write_all(&0u64.to_le_bytes()).unwrap(); // empty
    }
    out.flush().unwrap();
}

/// Runs weight-inspect under Python's getrusage: exit code, stderr, peak RSS in bytes.
fn run_measured(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String, u64) {
    const MEASURE: &str = r"
import resource, subprocess, sys
r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
sys.stderr.buffer.write(r.stderr)
print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
";
    let mut cmd = Command::new(python());
    cmd.arg("-c").arg(MEASURE).arg(bin()).args(args);
    cmd.env_remove(ENV);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let mut fields = text.split_whitespace();
    let code = fields.next().and_then(|c| c.parse().ok());
    let kib: u64 = fields.next().unwrap().parse().unwrap();
    (
        code,
        String::from_utf8_lossy(&out.stderr).into_owned(),
        kib * 1024,
    )
}

#[test]
fn a_header_just_below_the_cap_parses_within_three_times_its_size() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tensors.gguf");
    // 2,490,000 records of 40 bytes: 99.6 MB of header.
    let size = tensor_bomb(&path, 2_490_000);
    assert!(size < 100 * MB && size > 99 * MB, "{size}");
    for command in ["id", "inspect"] {
        let (code, err, rss) = run_measured(&[command, path.to_str().unwrap()], &[]);
        assert_eq!(code, Some(0), "{command}: {err}");
        let bound = 3 * size + 64 * (1 << 20);
        assert!(
            rss <= bound,
            "{command}: peak RSS {rss} bytes exceeds 3 x {size} + 64 MiB = {bound}"
        );
    }
}

#[test]
fn a_header_above_the_cap_is_refused_at_once_naming_the_cap() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tensors.gguf");
    let size = tensor_bomb(&path, 2_550_000); // 102 MB
    assert!(size > 100 * MB);
    let (code, err, rss) = run_measured(&["id", path.to_str().unwrap()], &[]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("tensors.gguf"), "{err}");
    assert!(err.contains("limit of 100000000 bytes"), "{err}");
    assert!(err.contains(ENV), "{err}");
    // Refused when the parse reaches the limit: never more memory than a header at the cap.
    assert!(rss <= 3 * 100 * MB + 64 * (1 << 20), "peak RSS {rss} bytes");

    // The same file parses once the cap is raised.
    let (code, err, _) = run_measured(&["id", path.to_str().unwrap()], &[(ENV, "200000000")]);
    assert_eq!(code, Some(0), "{err}");

    // And a lowered cap applies to ordinary files too.
    let example = common::repo_root().join("examples/tiny-llama-f16.gguf");
    let (code, err, _) = run_measured(&["id", example.to_str().unwrap()], &[(ENV, "1000")]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("limit of 1000 bytes"), "{err}");
}

#[test]
fn key_and_nested_array_bombs_stop_at_their_caps() {
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys.gguf");
    key_bomb(&keys, 4_000_000);
    let (code, err, rss) = run_measured(&["id", keys.to_str().unwrap()], &[]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("metadata key-value count"), "{err}");
    assert!(err.contains("limit of 97656") && err.contains(ENV), "{err}");
    assert!(rss < 64 * (1 << 20), "peak RSS {rss}");

    // Just below the key cap: parses, within the bound.
    key_bomb(&keys, 97_656);
    let size = std::fs::metadata(&keys).unwrap().len();
    let (code, err, rss) = run_measured(&["id", keys.to_str().unwrap()], &[]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        rss <= 3 * size + 64 * (1 << 20),
        "peak RSS {rss} for {size} bytes"
    );

    let nested = dir.path().join("nested.gguf");
    nested_bomb(&nested, 2_000_000);
    let (code, err, rss) = run_measured(&["id", nested.to_str().unwrap()], &[]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("arrays nested in arrays") && err.contains(ENV),
        "{err}"
    );
    assert!(rss < 64 * (1 << 20), "peak RSS {rss}");
}

/// A safetensors file whose JSON header holds `n` one-element f32 tensors (about 72 bytes each).
fn safetensors_bomb(path: &Path, n: u64) -> u64 {
    let mut header = String::from("{");
    for i in 0..n {
        if i > 0 {
            header.push(',');
        }
        let (begin, end) = (i * 4, i * 4 + 4);
        header.push_str(&format!(
            r#""t{i:07}":{{"dtype":"F32","shape":[1],"data_offsets":[{begin},{end}]}}"#
        ));
    }
    header.push('}');
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    out.write_all(&(header.len() as u64).to_le_bytes()).unwrap();
    out.write_all(header.as_bytes()).unwrap();
    out.write_all(&vec![0u8; (n * 4) as usize]).unwrap();
    out.flush().unwrap();
    header.len() as u64
}

#[test]
fn a_safetensors_header_at_its_limit_parses_within_three_times_its_size() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("many.safetensors");
    let size = safetensors_bomb(&path, 1_380_000);
    assert!(size > 98 * MB && size < 100 * MB, "{size}");
    let (code, err, rss) = run_measured(&["id", path.to_str().unwrap()], &[]);
    assert_eq!(code, Some(0), "{err}");
    let bound = 3 * size + 64 * (1 << 20);
    assert!(
        rss <= bound,
        "peak RSS {rss} bytes exceeds 3 x {size} + 64 MiB = {bound}"
    );
}

#[test]
fn textconv_notes_a_bomb_and_exits_0() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("keys.gguf");
    key_bomb(&path, 200_000);
    let out = Command::new(bin())
        .args(["textconv", path.to_str().unwrap()])
        .env_remove(ENV)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("more than the limit of 97656"), "{text}");
}

#[test]
fn the_safetensors_header_limit_follows_the_environment() {
    let example = common::repo_root().join("examples/tiny-base.safetensors");
    let example = example.to_str().unwrap();
    let header_len = u64::from_le_bytes(std::fs::read(example).unwrap()[..8].try_into().unwrap());
    // A cap below the example's header refuses it, naming the cap and how to raise it.
    let below = (header_len - 1).to_string();
    let (code, err, _) = run_measured(&["id", example], &[(ENV, below.as_str())]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("tiny-base.safetensors"), "{err}");
    assert!(
        err.contains(&format!("exceeds the limit of {below} bytes")),
        "{err}"
    );
    assert!(err.contains(ENV), "{err}");
    let at = header_len.to_string();
    let (code, err, _) = run_measured(&["id", example], &[(ENV, at.as_str())]);
    assert_eq!(code, Some(0), "{err}");

    // A declared length above the default cap is refused without reading on; raised, the cap
    // lets the reader see that the header runs past the end of the file.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("declares-150mb.safetensors");
    let mut bytes = 150_000_000u64.to_le_bytes().to_vec();
    bytes.extend_from_slice(b"{\"a\":1}");
    std::fs::write(&path, bytes).unwrap();
    let path = path.to_str().unwrap();
    let (code, err, _) = run_measured(&["id", path], &[]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("exceeds the limit of 100000000 bytes"),
        "{err}"
    );
    let (code, err, _) = run_measured(&["id", path], &[(ENV, "200000000")]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("runs past the end of the file"), "{err}");
}
