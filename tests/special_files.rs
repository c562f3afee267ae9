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
        assert!(stdout(&out).starts_with("weight-inspect textconv 4\n"));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let rewrites = writer.join().unwrap();
    assert!(
        rewrites > 10,
        "the file was rewritten only {rewrites} times"
    );
}
