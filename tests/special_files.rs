//! Files that are not what their names say, or that change while they are read: devices behind
//! model names are refused at once, and a model rewritten under textconv never makes it fail.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{bin, repo_root, stdout};

/// Runs weight-inspect and kills it after `limit`: a read of /dev/zero would never end.
fn run_bounded(dir: &Path, args: &[&str], limit: Duration) -> Output {
    let mut child = Command::new(bin())
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("weight-inspect starts");
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            child.kill().unwrap();
            let out = child.wait_with_output().unwrap();
            panic!(
                "weight-inspect {args:?} still ran after {limit:?}; it printed:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

#[cfg(unix)]
fn device_links(dir: &Path) -> Vec<(PathBuf, &'static str)> {
    let links = [
        ("zero.gguf", "/dev/zero"),
        ("random.safetensors", "/dev/urandom"),
    ];
    links
        .iter()
        .map(|(name, target)| {
            let link = dir.join(name);
            std::os::unix::fs::symlink(target, &link).unwrap();
            (link, *target)
        })
        .collect()
}

#[cfg(unix)]
#[test]
fn devices_named_like_models_are_refused_by_every_reader() {
    let dir = tempfile::tempdir().unwrap();
    let limit = Duration::from_secs(20);
    for (link, target) in device_links(dir.path()) {
        let name = link.file_name().unwrap().to_str().unwrap();
        for command in ["inspect", "id"] {
            let out = run_bounded(dir.path(), &[command, name], limit);
            assert_eq!(out.status.code(), Some(2), "{command} {name} ({target})");
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                err.contains(name) && err.contains("not a regular file"),
                "{err}"
            );
        }
        let out = run_bounded(dir.path(), &["diff", name, name], limit);
        assert_eq!(out.status.code(), Some(2), "diff {name}");

        // git's integrations always exit 0 and say what happened.
        let out = run_bounded(dir.path(), &["textconv", name], limit);
        assert_eq!(out.status.code(), Some(0));
        assert!(
            stdout(&out).contains("not a regular file"),
            "{}",
            stdout(&out)
        );
        let example = repo_root().join("examples/tiny-llama-f16.gguf");
        let out = run_bounded(
            dir.path(),
            &[
                "git-diff-driver",
                name,
                example.to_str().unwrap(),
                &"1".repeat(40),
                "100644",
                name,
                &"2".repeat(40),
                "100644",
            ],
            limit,
        );
        assert_eq!(out.status.code(), Some(0));
        assert!(
            stdout(&out).contains("not a regular file"),
            "{}",
            stdout(&out)
        );
    }
}

#[test]
fn textconv_of_a_file_rewritten_while_it_is_read_always_exits_0() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("moving.gguf");
    let big = std::fs::read(repo_root().join("examples/tiny-llama-f16.gguf")).unwrap();
    let small = std::fs::read(repo_root().join("examples/tiny-llama-q8_0.gguf")).unwrap();
    std::fs::write(&path, &big).unwrap();

    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (stop, path) = (stop.clone(), path.clone());
        std::thread::spawn(move || {
            use std::io::Write;
            let mut rewrites = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                for content in [&big, &small] {
                    // In place (truncate, then write in pieces), as an editor or a copy does:
                    // readers see the file shrink and grow under them.
                    let mut f = std::fs::File::create(&path).unwrap();
                    for piece in content.chunks(4096) {
                        f.write_all(piece).unwrap();
                    }
                    rewrites += 1;
                }
            }
            rewrites
        })
    };
    for run in 0..500 {
        let out = Command::new(bin())
            .args(["textconv", "moving.gguf"])
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "run {run}: textconv ended with {:?}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(stdout(&out).starts_with("weight-inspect textconv 5\n"));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let rewrites = writer.join().unwrap();
    assert!(
        rewrites > 10,
        "the file was rewritten only {rewrites} times"
    );
}

/// A FIFO at `dir/name` (nothing ever writes to it: opening it for reading would block).
#[cfg(unix)]
fn fifo(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    let status = Command::new("mkfifo").arg(&path).status().unwrap();
    assert!(status.success(), "mkfifo {}", path.display());
    path
}

/// Every place a file is opened refuses a FIFO without waiting for a writer: a model, a
/// shard index, a shard it names, a split GGUF's part, the only model of a directory,
/// `--map`, `check --policy` and `delta create`'s base (issue 32, item 7; cache entries that
/// are FIFOs are misses: below, and src/remote/cache.rs).
#[cfg(unix)]
#[test]
fn fifos_never_block_a_command() {
    let dir = tempfile::tempdir().unwrap();
    let limit = Duration::from_secs(60);
    let example = repo_root().join("examples/tiny-llama-f16.gguf");
    let example = example.to_str().unwrap();
    let refused = |args: &[&str], expected_code: i32| {
        let out = run_bounded(dir.path(), args, limit);
        let text = format!("{}{}", stdout(&out), String::from_utf8_lossy(&out.stderr));
        assert_eq!(out.status.code(), Some(expected_code), "{args:?}: {text}");
        assert!(text.contains("not a regular file"), "{args:?}: {text}");
    };

    fifo(dir.path(), "model.gguf");
    refused(&["inspect", "model.gguf"], 2);
    refused(&["id", "model.gguf"], 2);
    refused(&["diff", "model.gguf", example], 2);
    refused(&["diff", "--values", example, "model.gguf"], 2);

    let only = dir.path().join("only");
    std::fs::create_dir(&only).unwrap();
    fifo(&only, "model.safetensors");
    refused(&["inspect", "only"], 2);

    let indexed = dir.path().join("indexed");
    std::fs::create_dir(&indexed).unwrap();
    fifo(&indexed, "model.safetensors.index.json");
    refused(&["inspect", "indexed/model.safetensors.index.json"], 2);

    // A shard an index names, and the second part of a split GGUF.
    let sharded = dir.path().join("sharded");
    std::fs::create_dir(&sharded).unwrap();
    std::fs::write(
        sharded.join("model.safetensors.index.json"),
        r#"{"weight_map": {"w": "model-00001-of-00001.safetensors"}}"#,
    )
    .unwrap();
    fifo(&sharded, "model-00001-of-00001.safetensors");
    refused(&["inspect", "sharded/model.safetensors.index.json"], 2);
    let split = dir.path().join("split");
    std::fs::create_dir(&split).unwrap();
    std::fs::copy(
        repo_root().join("tests/fixtures/golden-split/golden-types-00001-of-00002.gguf"),
        split.join("golden-types-00001-of-00002.gguf"),
    )
    .unwrap();
    fifo(&split, "golden-types-00002-of-00002.gguf");
    refused(&["inspect", "split/golden-types-00001-of-00002.gguf"], 2);

    fifo(dir.path(), "map.toml");
    refused(
        &["diff", "--values", "--map", "map.toml", example, example],
        2,
    );

    fifo(dir.path(), "policy.toml");
    let out = run_bounded(
        dir.path(),
        &["check", "--policy", "policy.toml", example],
        limit,
    );
    let text = format!("{}{}", stdout(&out), String::from_utf8_lossy(&out.stderr));
    assert_ne!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("not a regular file"), "{text}");

    fifo(dir.path(), "base.safetensors");
    let tuned = repo_root().join("examples/tiny-tuned.safetensors");
    refused(
        &[
            "delta",
            "create",
            "--base",
            "base.safetensors",
            "--output",
            "out.wdelta",
            tuned.to_str().unwrap(),
        ],
        2,
    );
}

/// Runs weight-inspect in `dir` with its own base-hash cache, hashing as if three seconds
/// later (so that files just written are settled, docs/TESTING.md), killed after a minute.
#[cfg(unix)]
fn run_with_cache(dir: &Path, cache: &Path, args: &[&str]) -> Output {
    let mut child = Command::new(bin())
        .args(args)
        .current_dir(dir)
        .env("WEIGHT_INSPECT_CACHE_DIR", cache)
        .env("WEIGHT_INSPECT_CLOCK_AHEAD_MS", "3000")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(60) {
            child.kill().unwrap();
            panic!("weight-inspect {args:?} still ran after a minute");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// The files under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// A base-hash cache entry replaced by a FIFO (or by a link to /dev/zero) is a miss: `apply`
/// hashes the base and finishes.
#[cfg(unix)]
#[test]
fn base_hash_cache_entries_that_are_not_files_are_misses() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    // A base and a fine-tuned model, written by the safetensors package.
    let written = Command::new(common::python())
        .arg("-c")
        .arg(
            "import sys, numpy as np; from safetensors.numpy import save_file\n\
             w = np.arange(4096, dtype=np.float32)\n\
             save_file({'w': w}, sys.argv[1] + '/tiny-base.safetensors')\n\
             save_file({'w': w + 0.5}, sys.argv[1] + '/tiny-tuned.safetensors')",
        )
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(written.success());
    // Old enough for its hash to be remembered: `run_with_cache` runs the commands with the
    // test build's clock a few seconds ahead, as if the base had been written long before.
    let create = [
        "delta",
        "create",
        "--base",
        "tiny-base.safetensors",
        "tiny-tuned.safetensors",
        "-o",
        "d.wdelta",
    ];
    let out = run_with_cache(dir.path(), &cache, &create);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let entries = files_under(&cache);
    assert!(!entries.is_empty(), "no base hash was remembered");
    for (round, replace) in ["fifo", "link"].iter().enumerate() {
        for entry in &entries {
            std::fs::remove_file(entry).ok();
            if *replace == "fifo" {
                let status = Command::new("mkfifo").arg(entry).status().unwrap();
                assert!(status.success());
            } else {
                std::os::unix::fs::symlink("/dev/zero", entry).unwrap();
            }
        }
        let output = format!("out{round}.safetensors");
        let apply = [
            "delta",
            "apply",
            "--base",
            "tiny-base.safetensors",
            "--output",
            &output,
            "d.wdelta",
        ];
        let out = run_with_cache(dir.path(), &cache, &apply);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{replace}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
