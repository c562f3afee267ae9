//! The base-hash cache: a base left alone for a while has its hash remembered by `create` and
//! `apply` and trusted while its files' stamps stay the same; `--verify-base` and `delta
//! verify` hash it anew, and a base that changed is hashed again.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::delta::{ok, pair, s};

/// weight-inspect with its cache in `cache`, run as if long enough after the last write for
/// the base to be settled.
fn wi(cache: &Path, args: &[&str]) -> Output {
    wi_ahead(cache, SETTLED_MS, args)
}

/// weight-inspect with its cache in `cache`, hashing as if `ahead_ms` later than now (the
/// test build's `WEIGHT_INSPECT_CLOCK_AHEAD_MS`, docs/TESTING.md): what a run that much later
/// would do, without sleeping until then (a file's change time cannot be set back).
fn wi_ahead(cache: &Path, ahead_ms: u64, args: &[&str]) -> Output {
    Command::new(common::bin())
        .args(args)
        .env("WEIGHT_INSPECT_CACHE_DIR", cache)
        .env("WEIGHT_INSPECT_CLOCK_AHEAD_MS", ahead_ms.to_string())
        .env("NO_COLOR", "1")
        .output()
        .expect("failed to start weight-inspect")
}

/// Long enough after a write for the base to be settled (more than the one second the
/// cache waits for).
const SETTLED_MS: u64 = 1300;

fn entries(cache: &Path) -> Vec<PathBuf> {
    let root = cache.join("base-hashes");
    let Ok(dirs) = std::fs::read_dir(&root) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = dirs
        .flat_map(|d| std::fs::read_dir(d.unwrap().path()).unwrap())
        .map(|e| e.unwrap().path())
        .collect();
    out.sort();
    out
}

fn parent_hash_of(delta: &Path) -> String {
    let out = common::run(&["delta", "inspect", "--json", s(delta)]);
    ok(&out);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    json["parent_hash"].as_str().unwrap().to_string()
}

/// `delta apply [EXTRA] --base BASE DELTA -o OUT` with the cache in `cache`.
fn apply(cache: &Path, extra: &[&str], base: &Path, delta: &Path, out: &Path) -> Output {
    let mut args = vec!["delta", "apply"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--base", s(base), s(delta), "-o", s(out)]);
    wi(cache, &args)
}

/// `delta create --base BASE FINETUNED -o OUT` with the cache in `cache`.
fn create(cache: &Path, base: &Path, finetuned: &Path, out: &Path) -> Output {
    wi(
        cache,
        &common::delta::create_args(base, finetuned, out, &[]),
    )
}

/// Puts `hash` in place of the hash an entry holds.
fn tamper(entry: &Path, hash: &str) {
    let text = std::fs::read_to_string(entry).unwrap();
    let (head, _) = text.trim_end().rsplit_once('\n').unwrap();
    std::fs::write(entry, format!("{head}\n{hash}\n")).unwrap();
}

#[test]
fn a_settled_base_hash_is_remembered_and_trusted_until_the_base_changes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    pair(d, "64x48,48", "f32", 7, 1);
    let (base, ft) = (d.join("base.safetensors"), d.join("ft1.safetensors"));
    let cache = d.join("cache");

    // Written a moment ago: hashed, but not remembered (a write in the same clock tick
    // would not show in the stamps). Every other run is as if 1.3 s later (`wi`).
    let fresh_delta = d.join("fresh.wdelta");
    let fresh = common::delta::create_args(&base, &ft, &fresh_delta, &[]);
    ok(&wi_ahead(&cache, 0, &fresh));
    assert!(entries(&cache).is_empty(), "{:?}", entries(&cache));

    let wd = d.join("d.wdelta");
    ok(&create(&cache, &base, &ft, &wd));
    let parent = parent_hash_of(&wd);
    let remembered = entries(&cache);
    assert_eq!(remembered.len(), 1, "{remembered:?}");
    let entry = &remembered[0];
    let text = std::fs::read_to_string(entry).unwrap();
    assert!(text.trim_end().ends_with(&parent), "{text}");

    // Trusted: the same reconstruction as when the base is hashed.
    let (out_cached, out_hashed) = (d.join("cached.safetensors"), d.join("hashed.safetensors"));
    ok(&apply(&cache, &[], &base, &wd, &out_cached));
    ok(&apply(&cache, &["--verify-base"], &base, &wd, &out_hashed));
    let same_output = || {
        assert_eq!(
            std::fs::read(&out_cached).unwrap(),
            std::fs::read(&out_hashed).unwrap()
        );
    };
    same_output();
    common::delta::rebuilt_as_defined(&base, &out_hashed, &[&wd]);

    // Trusted indeed: a remembered hash that is not the delta's parent refuses the base, and
    // says how to hash it anew; nothing is written.
    let wrong = "0".repeat(64);
    tamper(entry, &wrong);
    let refused_out = d.join("refused.safetensors");
    let refused = apply(&cache, &[], &base, &wd, &refused_out);
    let stderr = common::stderr(&refused);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    common::assert_contains(&stderr, &["wrong parent", &wrong, "--verify-base"]);
    assert!(!refused_out.exists());

    // `delta verify` hashes: it is its job.
    ok(&wi(
        &cache,
        &["delta", "verify", "--base", s(&base), s(&wd)],
    ));
    // --verify-base hashes and renews the entry.
    ok(&apply(&cache, &["--verify-base"], &base, &wd, &out_hashed));
    let renewed = std::fs::read_to_string(entry).unwrap();
    assert!(renewed.trim_end().ends_with(&parent), "{renewed}");

    // A base written again (the same bytes) has new stamps: the tampered entry no longer
    // applies to it, and the fresh write is not remembered yet.
    tamper(entry, &wrong);
    let bytes = std::fs::read(&base).unwrap();
    std::fs::write(&base, &bytes).unwrap();
    let fresh = [
        "delta",
        "apply",
        "--base",
        s(&base),
        s(&wd),
        "-o",
        s(&out_cached),
    ];
    ok(&wi_ahead(&cache, 0, &fresh));
    same_output();
    assert_eq!(entries(&cache).len(), 1);

    // A base that changed for real is refused by its hash, not by the cache.
    let mut changed = bytes.clone();
    let last = changed.len() - 1;
    changed[last] ^= 1;
    std::fs::write(&base, &changed).unwrap();
    let out = apply(&cache, &[], &base, &wd, &refused_out);
    assert_eq!(out.status.code(), Some(2), "{}", common::stderr(&out));
    common::assert_lacks(&common::stderr(&out), &["remembered"]);
    // Its hash is remembered now, and still refuses it on the next run.
    assert_eq!(entries(&cache).len(), 2);
    let again = apply(&cache, &[], &base, &wd, &refused_out);
    common::assert_contains(&common::stderr(&again), &["wrong parent", "remembered"]);
}
