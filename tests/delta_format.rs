//! The .wdelta container's safety rules (checksum, truncation, versions, hostile records),
//! wrong bases, atomic outputs, determinism across thread counts, sharded models, inspect.

mod common;

use std::collections::BTreeMap;
use std::process::Command;

use common::delta::{create, encoded_as_defined, ok, pair, rebuilt_as_defined, s};
use common::{bin, run, run_python, stderr, stdout};
use weight_inspect::deltas::Model;
use weight_inspect::deltas::{self as codec, EncodeOptions};
use weight_inspect::readers::wdelta::{
    self as format, Header, OwnedArray, Strategy, WdeltaError as FormatError, WdeltaFile,
    write_to_vec,
};

/// A small file holding one tensor per strategy (version 1 or 2), built with the library.
fn small_file(version: u32) -> Vec<u8> {
    let mut tensors = BTreeMap::new();
    let mut arrays: BTreeMap<String, Vec<OwnedArray>> = BTreeMap::new();
    for (i, strategy) in [Strategy::Int4, Strategy::Quantized, Strategy::Sparse]
        .into_iter()
        .enumerate()
    {
        let opts = EncodeOptions {
            strategy,
            version,
            outlier_fraction: 0.1,
            ..Default::default()
        };
        let shape = [3u64, 5];
        let delta: Vec<f32> = (0..15)
            .map(|k| ((k * 7 + i) % 11) as f32 * 1e-3 - 4e-3)
            .collect();
        let name = format!("t{i}");
        tensors.insert(
            name.clone(),
            codec::entry_for(&shape, &opts, Some("float32")),
        );
        arrays.insert(name, codec::encode(&delta, &shape, &opts));
    }
    let header = Header {
        parent_hash: "ab".repeat(32),
        strategy: Strategy::Int4,
        metadata: None,
        loss: None,
        tensors: tensors.into(),
    };
    write_to_vec(&header, version, &arrays)
}

#[test]
fn the_loss_key_round_trips_and_a_wrong_one_is_named() {
    let plain = WdeltaFile::parse(&small_file(2)).unwrap();
    assert_eq!(plain.header.loss, None);
    let mut header = plain.header.clone();
    let loss = format::LossFigures {
        rel_l2: Some(0.000983),
        update_lost: None,
        worst_tensor: Some("w \"quoted\"".to_string()),
        worst_rel_l2: Some(1e-300),
        worst_update_lost: Some(0.0986),
        largest_rel_l2_tensor: Some("v".to_string()),
        largest_rel_l2: Some(0.03),
        largest_rel_l2_update_lost: Some(0.01),
    };
    header.loss = Some(loss.clone());
    let json = format::header_json(&header, 2);
    let text = String::from_utf8(json).unwrap();
    assert!(text.contains(r#""update_lost":null"#), "{text}");
    let parsed = format::parse_header(text.as_bytes(), 2, 1000).unwrap();
    assert_eq!(parsed.loss, Some(loss));
    let bad = text.replace(r#""rel_l2":0.000983"#, r#""rel_l2":"small""#);
    let err = format::parse_header(bad.as_bytes(), 2, 1000)
        .unwrap_err()
        .to_string();
    assert!(err.contains("loss"), "{err}");
}

fn reseal(bytes: &mut [u8]) {
    let n = bytes.len() - 32;
    let digest = format::sha256(&bytes[..n]);
    bytes[n..].copy_from_slice(&digest);
}

#[test]
fn every_single_byte_flip_is_rejected() {
    for version in [1, 2] {
        let good = small_file(version);
        WdeltaFile::parse(&good).unwrap();
        for at in 0..good.len() {
            for mask in [0x01u8, 0x80, 0xff] {
                let mut bad = good.clone();
                bad[at] ^= mask;
                let err = WdeltaFile::parse(&bad).expect_err("a flipped byte must be rejected");
                if at >= 7 {
                    assert!(
                        matches!(err, FormatError::ChecksumMismatch { .. }),
                        "flip at {at}: {err}"
                    );
                } else {
                    assert!(
                        matches!(err, FormatError::BadMagic { .. }),
                        "flip at {at}: {err}"
                    );
                }
            }
        }
    }
}

#[test]
fn every_truncation_is_rejected() {
    let good = small_file(1);
    for len in 0..good.len() {
        assert!(
            WdeltaFile::parse(&good[..len]).is_err(),
            "prefix of {len} bytes accepted"
        );
    }
}

#[test]
fn unsupported_versions_are_named() {
    let tmp = tempfile::tempdir().unwrap();
    let mut bytes = small_file(1);
    bytes[7..11].copy_from_slice(&4u32.to_le_bytes());
    reseal(&mut bytes);
    assert_eq!(
        WdeltaFile::parse(&bytes).unwrap_err(),
        FormatError::UnsupportedVersion { version: 4 }
    );
    let path = tmp.path().join("v4.wdelta");
    std::fs::write(&path, &bytes).unwrap();
    let out = run(&["delta", "inspect", s(&path)]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("unsupported .wdelta version 4"),
        "{}",
        stderr(&out)
    );
    assert!(stderr(&out).contains("v4.wdelta"), "{}", stderr(&out));
}

#[test]
fn hostile_records_fail_cleanly() {
    let good = small_file(1);
    let h = u32::from_le_bytes(good[11..15].try_into().unwrap()) as usize;
    let records = 15 + h;
    // A record claiming 2^32-1 dimensions, or a huge byte count, with a valid checksum.
    let mut bad = good.clone();
    let name_len = u32::from_le_bytes(bad[records..records + 4].try_into().unwrap()) as usize;
    let mut p = records + 4 + name_len;
    let field_len = u32::from_le_bytes(bad[p..p + 4].try_into().unwrap()) as usize;
    p += 4 + field_len;
    let dtype_len = u32::from_le_bytes(bad[p..p + 4].try_into().unwrap()) as usize;
    p += 4 + dtype_len;
    bad[p..p + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    reseal(&mut bad);
    assert!(matches!(
        WdeltaFile::parse(&bad),
        Err(FormatError::RecordTruncated { .. })
    ));
    // A header length beyond the file.
    let mut bad = good.clone();
    bad[11..15].copy_from_slice(&u32::MAX.to_le_bytes());
    reseal(&mut bad);
    assert!(matches!(
        WdeltaFile::parse(&bad),
        Err(FormatError::HeaderTooLong { .. })
    ));
    // Duplicate records: the file with its records written twice.
    let mut dup = good[..good.len() - 32].to_vec();
    dup.extend_from_slice(&good[records..good.len() - 32]);
    dup.extend_from_slice(&[0; 32]);
    reseal(&mut dup);
    assert!(matches!(
        WdeltaFile::parse(&dup),
        Err(FormatError::DuplicateRecord { .. })
    ));
}

#[test]
fn records_may_come_in_any_order() {
    let good = small_file(2);
    let parsed = WdeltaFile::parse(&good).unwrap();
    // Rebuild the record section in reverse order.
    let mut recs: Vec<_> = parsed.records.values().cloned().collect();
    recs.sort_by_key(|r| std::cmp::Reverse(r.record_offset));
    let records_start = 15 + parsed.header_len;
    let mut shuffled = good[..records_start].to_vec();
    for r in &recs {
        shuffled.extend_from_slice(&good[r.record_offset..r.record_offset + r.record_len]);
    }
    shuffled.extend_from_slice(&[0; 32]);
    reseal(&mut shuffled);
    let other = WdeltaFile::parse(&shuffled).unwrap();
    for (name, e) in &parsed.header.tensors {
        let n = e.n_elements().unwrap() as usize;
        let mut a = vec![0f32; n];
        let mut b = vec![0f32; n];
        codec::decode(e, &parsed.arrays(&good, name).unwrap(), &mut a);
        codec::decode(e, &other.arrays(&shuffled, name).unwrap(), &mut b);
        assert_eq!(a, b, "{name}");
    }
}

/// `delta apply --base BASE DELTA -o OUT`.
fn apply(
    base: &std::path::Path,
    delta: &std::path::Path,
    out: &std::path::Path,
) -> std::process::Output {
    run(&["delta", "apply", "--base", s(base), s(delta), "-o", s(out)])
}

/// The file with its records in reverse order (resealed): valid, but not grouped by tensor in
/// name order, so `apply` reads it whole instead of streaming it.
fn records_reversed(good: &[u8]) -> Vec<u8> {
    let parsed = WdeltaFile::parse(good).unwrap();
    let mut recs: Vec<_> = parsed.records.values().cloned().collect();
    recs.sort_by_key(|r| std::cmp::Reverse(r.record_offset));
    let records_start = 15 + parsed.header_len;
    let mut out = good[..records_start].to_vec();
    for r in &recs {
        out.extend_from_slice(&good[r.record_offset..r.record_offset + r.record_len]);
    }
    out.extend_from_slice(&[0; 32]);
    reseal(&mut out);
    out
}

#[test]
fn streamed_apply_matches_the_whole_file_reading_and_rejects_every_corruption() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    // A tensor of more than one piece (2^20 elements), odd sizes, a scalar-like tensor.
    pair(d, "1100x1000,33,1,3x5x7,7x9,17", "f32", 5, 1);
    let base = d.join("base.safetensors");
    let ft = d.join("ft1.safetensors");
    // int4 at outlier fraction 0.5: 550k outliers, whose records `apply` spools and streams.
    for (strategy, version, fraction) in [
        ("int4", "1", "0.01"),
        ("int4", "2", "0.01"),
        ("int4", "1", "0.5"),
        ("int4", "2", "0.5"),
        ("quantized", "1", "0.01"),
        ("sparse", "2", "0.01"),
    ] {
        let wd = d.join(format!("{strategy}{version}.wdelta"));
        ok(&create(
            &base,
            &ft,
            &wd,
            &[
                "--strategy",
                strategy,
                "--format-version",
                version,
                "--outlier-fraction",
                fraction,
            ],
        ));
        let streamed = d.join("streamed.safetensors");
        ok(&apply(&base, &wd, &streamed));
        let good = std::fs::read(&wd).unwrap();
        let reversed = d.join("reversed.wdelta");
        std::fs::write(&reversed, records_reversed(&good)).unwrap();
        let whole = d.join("whole.safetensors");
        ok(&apply(&base, &reversed, &whole));
        assert!(
            std::fs::read(&streamed).unwrap() == std::fs::read(&whole).unwrap(),
            "{strategy} v{version} {fraction}: streamed and whole-file apply differ"
        );
        // Both readings are the reference's reconstruction.
        rebuilt_as_defined(&base, &whole, &[&wd]);
        // A flipped byte anywhere after the magic (header, framing, outliers, packed data,
        // checksum): a checksum mismatch, and no output.
        let out = d.join("never.safetensors");
        let step = good.len() / 23;
        for at in (7..good.len()).step_by(step).chain([good.len() - 1]) {
            let mut bad = good.clone();
            bad[at] ^= 0x41;
            let corrupt = d.join("corrupt.wdelta");
            std::fs::write(&corrupt, &bad).unwrap();
            let r = apply(&base, &corrupt, &out);
            assert_eq!(r.status.code(), Some(2), "flip at {at}");
            assert!(
                stderr(&r).contains("checksum mismatch"),
                "{strategy} v{version}, flip at {at}: {}",
                stderr(&r)
            );
            assert!(!out.exists(), "flip at {at}: an output was written");
        }
        // Cut short: an error, and no output.
        for len in [good.len() / 2, good.len() - 33] {
            let cut = d.join("cut.wdelta");
            std::fs::write(&cut, &good[..len]).unwrap();
            let r = apply(&base, &cut, &out);
            assert_eq!(r.status.code(), Some(2), "cut to {len}");
            assert!(!out.exists(), "cut to {len}: an output was written");
        }
    }
}

/// The file with each sparse tensor's two records swapped (values before indices), tensors
/// still in name order (resealed): valid, and still streamed.
fn sparse_records_swapped(good: &[u8]) -> Vec<u8> {
    let parsed = WdeltaFile::parse(good).unwrap();
    let recs: Vec<_> = parsed.records.values().cloned().collect();
    let records_start = 15 + parsed.header_len;
    let mut out = good[..records_start].to_vec();
    for pair in recs.chunks(2) {
        for r in pair.iter().rev() {
            out.extend_from_slice(&good[r.record_offset..r.record_offset + r.record_len]);
        }
    }
    out.extend_from_slice(&[0; 32]);
    reseal(&mut out);
    out
}

/// Nothing but models and deltas in `d`: the spools were unlinked temporary files.
fn nothing_left_beside_the_models(d: &std::path::Path) {
    let mut left: Vec<_> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| !n.ends_with(".safetensors") && !n.ends_with(".wdelta"))
        .collect();
    left.sort();
    assert!(left.is_empty(), "left beside the output: {left:?}");
}

/// The setup of the streamed-records tests: a pair whose 2.2M-element tensor, under
/// `strategy`, has a first record (int64 indices) over 8 MiB; the delta as written and as
/// `reordered` (another valid order of the records) applies as the whole-file reading does (a
/// delta whose records are all reversed), leaving nothing beside the models. Gives the base
/// and the delta's bytes.
fn streamed_as_whole(
    d: &std::path::Path,
    strategy: &[&str],
    reordering: &str,
    reordered: fn(&[u8]) -> Vec<u8>,
) -> (std::path::PathBuf, Vec<u8>) {
    pair(d, "2200x1000,7x9", "f32", 7, 1);
    let base = d.join("base.safetensors");
    let wd = d.join("streamed.wdelta");
    ok(&create(&base, &d.join("ft1.safetensors"), &wd, strategy));
    let good = std::fs::read(&wd).unwrap();
    let parsed = WdeltaFile::parse(&good).unwrap();
    let indices = parsed.records.values().next().unwrap().clone();
    assert!(indices.data_len > 8 << 20, "{} bytes", indices.data_len);
    let whole = d.join("whole.safetensors");
    let reversed = d.join("reversed.wdelta");
    std::fs::write(&reversed, records_reversed(&good)).unwrap();
    ok(&apply(&base, &reversed, &whole));
    rebuilt_as_defined(&base, &whole, &[&wd]);
    let whole = std::fs::read(&whole).unwrap();
    let other = d.join("reordered.wdelta");
    std::fs::write(&other, reordered(&good)).unwrap();
    for (what, delta) in [("as written", &wd), (reordering, &other)] {
        let streamed = d.join("streamed.safetensors");
        ok(&apply(&base, delta, &streamed));
        assert!(
            std::fs::read(&streamed).unwrap() == whole,
            "{what}: streamed and whole-file apply differ"
        );
    }
    // The spools were unlinked temporary files.
    nothing_left_beside_the_models(d);
    (base, good)
}

/// `file` (the delta of [`streamed_as_whole`]) with its first record's int64 indices (into the
/// 2.2M elements) made invalid two ways: an index late in the tensor repeated (pieces were
/// already written when it is met), and the last one out of range; each with its position and
/// the reader's words.
fn bad_indices(file: &[u8]) -> Vec<(Vec<u8>, usize, &'static str)> {
    let n: i64 = 2200 * 1000;
    let parsed = WdeltaFile::parse(file).unwrap();
    let indices = parsed.records.values().next().unwrap().clone();
    let kept = indices.data_len / 8;
    let at = |j: usize| indices.data_offset + 8 * j;
    let index = |j: usize| i64::from_le_bytes(file[at(j)..at(j) + 8].try_into().unwrap());
    let mut repeated = file.to_vec();
    let j = kept * 3 / 4;
    repeated[at(j)..at(j) + 8].copy_from_slice(&index(j - 1).to_le_bytes());
    let mut outside = file.to_vec();
    outside[at(kept - 1)..at(kept)].copy_from_slice(&n.to_le_bytes());
    vec![
        (repeated, j, "strictly ascending"),
        (outside, kept - 1, "outside 0..2200000"),
    ]
}

/// `apply` of the delta `bad` against `base` exits 2, its error holding each of `expected`'s
/// words (the problem, the field, the position), and writes no output.
fn refused_with_no_output(
    d: &std::path::Path,
    base: &std::path::Path,
    bad: &[u8],
    (problem, field, position): (&str, &str, String),
    context: &str,
) {
    let corrupt = d.join("corrupt.wdelta");
    let out = d.join("never.safetensors");
    std::fs::write(&corrupt, bad).unwrap();
    let r = apply(base, &corrupt, &out);
    let err = stderr(&r);
    assert_eq!(r.status.code(), Some(2), "{context}, {problem}: {err}");
    assert!(
        err.contains(problem) && err.contains(field) && err.contains(&position),
        "{context}, {problem} {field} at {position}: {err}"
    );
    assert!(!out.exists(), "{context}, {problem}: an output was written");
}

/// A sparse tensor whose records are larger than `apply` holds (a few MiB) is streamed: its
/// first record spooled to a temporary file, its second read from the delta, both in order
/// piece by piece. The output is the whole-file reading's, whichever record comes first, and
/// an index out of order or out of range is named as the format's reader names it, with no
/// output.
#[test]
fn streamed_sparse_records_larger_than_held_match_and_are_checked() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    // 2.2M elements at sparsity 0.5: 8.8 MB of int64 indices.
    let strategy = ["--strategy", "sparse", "--sparsity", "0.5"];
    let (base, good) = streamed_as_whole(d, &strategy, "values first", sparse_records_swapped);
    // With the indices spooled (first) and read from the delta (second).
    let swapped = sparse_records_swapped(&good);
    for (order, file) in [("indices first", &good), ("values first", &swapped)] {
        for (mut bad, position, problem) in bad_indices(file) {
            for unsealed in [false, true] {
                if !unsealed {
                    reseal(&mut bad);
                } else {
                    let last = bad.len() - 1;
                    bad[last] ^= 1;
                }
                let expected = if unsealed {
                    ("checksum mismatch", "", String::new())
                } else {
                    (problem, "indices", position.to_string())
                };
                refused_with_no_output(d, &base, &bad, expected, order);
            }
        }
    }
}

#[test]
fn wrong_base_is_rejected_with_both_hashes() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::create_dir_all(d.join("a")).unwrap();
    std::fs::create_dir_all(d.join("b")).unwrap();
    pair(&d.join("a"), "16x8,5", "f32", 1, 1);
    pair(&d.join("b"), "16x8,5", "f32", 2, 1);
    let base = d.join("a/base.safetensors");
    let other = d.join("b/base.safetensors");
    let wd = d.join("x.wdelta");
    ok(&create(&base, &d.join("a/ft1.safetensors"), &wd, &[]));
    let good_hash = Model::open(&base).unwrap().parent_hash(|_| {}).unwrap();
    let bad_hash = Model::open(&other).unwrap().parent_hash(|_| {}).unwrap();
    let out_path = d.join("out.safetensors");
    let out = run(&[
        "delta",
        "apply",
        "--base",
        s(&other),
        s(&wd),
        "-o",
        s(&out_path),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains(&good_hash) && err.contains(&bad_hash), "{err}");
    assert!(!out_path.exists());
    // A corrupted delta: apply (which checks the checksum alongside its work) writes nothing.
    let mut bytes = std::fs::read(&wd).unwrap();
    let at = bytes.len() - 40;
    bytes[at] ^= 0x10;
    let corrupt = d.join("corrupt.wdelta");
    std::fs::write(&corrupt, &bytes).unwrap();
    let out = run(&[
        "delta",
        "apply",
        "--base",
        s(&base),
        s(&corrupt),
        "-o",
        s(&out_path),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("checksum mismatch"),
        "{}",
        stderr(&out)
    );
    assert!(!out_path.exists());
    let out = run(&["delta", "verify", "--base", s(&other), s(&wd)]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains(&bad_hash));
    let out = run(&["delta", "verify", "--base", s(&base), s(&wd)]);
    ok(&out);
    assert!(stdout(&out).contains(&good_hash));
}

#[test]
fn mismatched_models_list_the_differences() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::create_dir_all(d.join("a")).unwrap();
    std::fs::create_dir_all(d.join("b")).unwrap();
    pair(&d.join("a"), "16x8,5,3", "f32", 1, 1);
    pair(&d.join("b"), "16x4,5", "f32", 2, 1);
    let out = create(
        &d.join("a/base.safetensors"),
        &d.join("b/ft1.safetensors"),
        &d.join("x.wdelta"),
        &[],
    );
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("shape of layer0.weight: [16, 8]"), "{err}");
    assert!(err.contains("layer2.weight"), "{err}");
    assert!(!d.join("x.wdelta").exists());
}

#[test]
fn outputs_do_not_depend_on_the_thread_count() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    pair(d, "64x48,33,1,3x5x7,7x9,200x10,17,300", "f32", 3, 1);
    let base = d.join("base.safetensors");
    let ft = d.join("ft1.safetensors");
    for strategy in ["int4", "sparse", "quantized"] {
        for version in ["1", "2"] {
            let mut files = Vec::new();
            for threads in ["1", "2", "3", "8"] {
                let wd = d.join(format!("{strategy}{version}-{threads}.wdelta"));
                ok(&create(
                    &base,
                    &ft,
                    &wd,
                    &[
                        "--strategy",
                        strategy,
                        "--format-version",
                        version,
                        "--threads",
                        threads,
                    ],
                ));
                let out = d.join(format!("{strategy}{version}-{threads}.safetensors"));
                ok(&run(&[
                    "delta",
                    "apply",
                    "--base",
                    s(&base),
                    s(&wd),
                    "-o",
                    s(&out),
                    "--threads",
                    threads,
                ]));
                files.push((std::fs::read(&wd).unwrap(), std::fs::read(&out).unwrap()));
            }
            for f in &files[1..] {
                assert!(
                    f == &files[0],
                    "{strategy} v{version}: outputs differ by thread count"
                );
            }
            // The same, and right: the records as defined, the rebuilt model the reference's.
            let one = |ext: &str| d.join(format!("{strategy}{version}-1.{ext}"));
            encoded_as_defined(&base, &[], &ft, &one("wdelta"));
            rebuilt_as_defined(&base, &one("safetensors"), &[&one("wdelta")]);
        }
    }
}

#[test]
fn sharded_directories_work_like_single_files() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    pair(d, "64x48,33,1,3x5x7,7x9", "f32", 4, 1);
    let base = d.join("base.safetensors");
    let ft = d.join("ft1.safetensors");
    run_python(
        "delta_ref.py",
        &["shard", s(&base), s(&d.join("base-sharded")), "3"],
    );
    run_python(
        "delta_ref.py",
        &["shard", s(&ft), s(&d.join("ft-sharded")), "2"],
    );
    let single = Model::open(&base).unwrap().parent_hash(|_| {}).unwrap();
    let sharded = Model::open(&d.join("base-sharded"))
        .unwrap()
        .parent_hash(|_| {})
        .unwrap();
    assert_eq!(single, sharded);
    let a = d.join("a.wdelta");
    let b = d.join("b.wdelta");
    ok(&create(&base, &ft, &a, &[]));
    ok(&create(
        &d.join("base-sharded"),
        &d.join("ft-sharded"),
        &b,
        &[],
    ));
    // The same records; the headers differ only in the fine-tune's metadata, which the single
    // files (step base / ft1) carry and the shards (format pt on both sides) do not.
    let records = |bytes: &[u8]| {
        let h = u32::from_le_bytes(bytes[11..15].try_into().unwrap()) as usize;
        bytes[15 + h..bytes.len() - 32].to_vec()
    };
    let (fa, fb) = (std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
    assert_eq!(records(&fa), records(&fb));
    let header = |bytes: &[u8]| String::from_utf8_lossy(&bytes[15..200]).into_owned();
    assert!(
        header(&fa).contains(r#""metadata":{"step":"ft1"}"#),
        "{}",
        header(&fa)
    );
    assert!(!header(&fb).contains("metadata"), "{}", header(&fb));
    let o1 = d.join("o1.safetensors");
    let o2 = d.join("o2.safetensors");
    ok(&run(&[
        "delta",
        "apply",
        "--base",
        s(&base),
        s(&a),
        "-o",
        s(&o1),
    ]));
    ok(&run(&[
        "delta",
        "apply",
        "--base",
        s(&d.join("base-sharded")),
        s(&a),
        "-o",
        s(&o2),
    ]));
    rebuilt_as_defined(&base, &o1, &[&a]);
    let m1 = Model::open(&o1).unwrap();
    let m2 = Model::open(&o2).unwrap();
    for (name, t) in &m1.tensors {
        assert_eq!(
            m1.read_raw(t).unwrap(),
            m2.read_raw(&m2.tensors[name]).unwrap(),
            "{name}"
        );
    }
}

#[test]
fn inspect_text_and_json() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    pair(d, "64x48,33", "f32", 5, 1);
    let wd = d.join("x.wdelta");
    ok(&create(
        &d.join("base.safetensors"),
        &d.join("ft1.safetensors"),
        &wd,
        &["--format-version", "2"],
    ));
    let out = run(&["delta", "inspect", s(&wd)]);
    ok(&out);
    let text = stdout(&out);
    assert!(text.contains("format: wdelta version 2"), "{text}");
    assert!(text.contains("strategy: int4"), "{text}");
    assert!(
        text.contains("tensor layer0.weight: int4 [64, 48]"),
        "{text}"
    );
    assert!(text.contains("compression ratio: "), "{text}");
    let out = run(&["delta", "inspect", "--json", s(&wd)]);
    ok(&out);
    let json = stdout(&out);
    assert!(json.starts_with("{\"schema\":1,"), "{json}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["version"], 2);
    assert_eq!(v["tensors"][1]["shape"], serde_json::json!([33]));
    assert_eq!(v["tensors"][1]["base_dtype"], "float32");
    // describe() is what the core's inspect/textconv show for a .wdelta.
    let bytes = std::fs::read(&wd).unwrap();
    assert!(weight_inspect::readers::wdelta::is_wdelta(&bytes));
    let described = weight_inspect::describe_wdelta(&WdeltaFile::parse(&bytes).unwrap());
    assert!(text.ends_with(&described));
}

#[test]
fn killing_apply_mid_write_leaves_no_output() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    // Small: the pause point, not the size, makes the kill land while it writes.
    pair(d, "256x256,256x256", "f32", 6, 1);
    let base = d.join("base.safetensors");
    let wd = d.join("x.wdelta");
    ok(&create(
        &base,
        &d.join("ft1.safetensors"),
        &wd,
        &["--strategy", "sparse"],
    ));
    let outdir = d.join("out");
    std::fs::create_dir_all(&outdir).unwrap();
    let out_path = outdir.join("model.safetensors");
    let mut cmd = Command::new(bin());
    cmd.args([
        "delta",
        "apply",
        "--base",
        s(&base),
        s(&wd),
        "-o",
        s(&out_path),
        "--threads",
        "1",
    ]);
    // Stopped at the test build's pause point once its temporary output exists, then killed
    // there (SIGKILL: nothing runs to clean up).
    let mut paused = common::pause::start_paused(cmd, "output-temp-created");
    let temps = || {
        std::fs::read_dir(&outdir)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .ends_with(".tmp")
            })
            .count()
    };
    assert_eq!(temps(), 1, "no temporary output while it writes");
    paused.child.kill().unwrap();
    paused.child.wait().unwrap();
    assert!(
        !out_path.exists(),
        "an interrupted apply left {}",
        out_path.display()
    );
}

/// An int4 tensor whose outliers' records are larger than `apply` holds (a few MiB) is
/// streamed: its outlier indices and values spooled to temporary files, read back in order
/// piece by piece beside `packed`. The output is the whole-file reading's, and an outlier
/// index out of order or out of range is named as the format's reader names it, with no output.
#[test]
fn streamed_int4_outliers_larger_than_held_match_and_are_checked() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    // 2.2M elements at outlier fraction 0.5: 8.8 MB of int64 indices (format version 1).
    let strategy = ["--strategy", "int4", "--outlier-fraction", "0.5"];
    // As written, and with each tensor's `packed` before its scale and zero point (a valid
    // order whose spooled outliers apply reads whole instead).
    let (base, good) = streamed_as_whole(d, &strategy, "packed third", int4_packed_third);
    for (mut bad, position, problem) in bad_indices(&good) {
        reseal(&mut bad);
        let expected = (problem, "outlier_idx", position.to_string());
        refused_with_no_output(d, &base, &bad, expected, "as written");
    }
}

/// The file with each int4 tensor's records in the order outlier indices, outlier values,
/// packed, scale, zero point (resealed): valid, tensors still in name order.
fn int4_packed_third(good: &[u8]) -> Vec<u8> {
    let parsed = WdeltaFile::parse(good).unwrap();
    let recs: Vec<_> = parsed.records.values().cloned().collect();
    let records_start = 15 + parsed.header_len;
    let mut out = good[..records_start].to_vec();
    for five in recs.chunks(5) {
        for i in [0, 1, 4, 2, 3] {
            let r = &five[i];
            out.extend_from_slice(&good[r.record_offset..r.record_offset + r.record_len]);
        }
    }
    out.extend_from_slice(&[0; 32]);
    reseal(&mut out);
    out
}
