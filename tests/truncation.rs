//! A model file truncated by another process while a command reads it: every command ends with
//! an error naming the file and the bytes that went missing (exit 2), or finishes first; never
//! a signal. The readers map files, and a mapped page that the truncation removed raises
//! SIGBUS, which kills a process that does not handle it.
#![cfg(unix)]

mod common;

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{bin, stderr};

fn s(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// A float32 safetensors file of one `elements`-value tensor, values from `seed`.
fn safetensors(path: &Path, elements: usize, seed: u32) {
    let header = format!(
        r#"{{"w":{{"dtype":"F32","shape":[{elements}],"data_offsets":[0,{}]}}}}"#,
        elements * 4
    );
    let mut bytes = Vec::with_capacity(8 + header.len() + elements * 4);
    bytes.extend_from_slice(&(header.len() as u64).to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    let mut x = seed;
    for _ in 0..elements {
        x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        bytes.extend_from_slice(&((x >> 8) as f32 / (1 << 24) as f32).to_le_bytes());
    }
    std::fs::write(path, bytes).unwrap();
}

/// Runs `cmd` against a fresh copy of `original` at `victim`, truncating the copy to `keep`
/// bytes partway through the run, round after round: at fractions of the time an undisturbed
/// run takes (measured first, so the race adapts to the machine's load) or, when `fixed_ms` is
/// given, after those delays. Stops early once `least` rounds ended with the error of a file
/// truncated mid-read. Asserts that no round ended by a signal and that every error names the
/// file; returns how many rounds were caught mid-read.
fn race(
    mut cmd: impl FnMut() -> Command,
    original: &Path,
    victim: &Path,
    keep: u64,
    fixed_ms: Option<&[u64]>,
    least: usize,
) -> usize {
    let delays: Vec<Duration> = match fixed_ms {
        Some(ms) => ms.iter().map(|&m| Duration::from_millis(m)).collect(),
        None => {
            std::fs::copy(original, victim).unwrap();
            let start = std::time::Instant::now();
            let out = cmd().output().unwrap();
            assert!(out.status.code().is_some_and(|c| c < 2), "{}", stderr(&out));
            let whole = start.elapsed();
            [
                0.3, 0.5, 0.7, 0.85, 0.4, 0.6, 0.8, 0.9, 0.45, 0.65, 0.75, 0.95,
            ]
            .iter()
            .map(|f| whole.mul_f64(*f))
            .collect()
        }
    };
    let mut caught = 0;
    let mut errors = Vec::new();
    for (round, delay) in delays.into_iter().enumerate() {
        std::fs::copy(original, victim).unwrap();
        let child = cmd()
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(delay);
        std::fs::OpenOptions::new()
            .write(true)
            .open(victim)
            .unwrap()
            .set_len(keep)
            .unwrap();
        let out = child.wait_with_output().unwrap();
        let err = stderr(&out);
        assert_eq!(
            out.status.signal(),
            None,
            "round {round} ({delay:?}) was killed by signal {:?}; stderr: {err}",
            out.status.signal()
        );
        if out.status.code() == Some(2) {
            common::assert_contains(&err, &[victim.file_name().unwrap().to_str().unwrap()]);
            if err.contains("changed while it was read") {
                common::assert_contains(&err, &["bytes ", "it had when opened are gone"]);
                caught += 1;
            }
        }
        errors.push(err);
        if least > 0 && caught >= least {
            break;
        }
    }
    assert!(
        caught >= least,
        "only {caught} rounds were truncated mid-read: {errors:?}"
    );
    caught
}

fn files(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let (a, b) = (dir.join("a.safetensors"), dir.join("b.safetensors"));
    // 48 MiB each: long enough to compare that a truncation lands mid-read.
    safetensors(&a, 12 << 20, 1);
    safetensors(&b, 12 << 20, 2);
    (a, b, dir.join("victim.safetensors"))
}

#[test]
fn diff_values_of_a_file_truncated_mid_read_is_an_error_not_sigbus() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b, victim) = files(tmp.path());
    race(
        || {
            let mut cmd = Command::new(bin());
            cmd.args(["diff", "--values", s(&a), s(&victim)]);
            cmd
        },
        &b,
        &victim,
        4096,
        None,
        1,
    );
}

#[test]
fn reading_a_header_truncated_mid_read_is_an_error_not_sigbus() {
    let tmp = tempfile::tempdir().unwrap();
    // A GGUF whose 7 MB header takes a while to read (a 262,144-token vocabulary).
    common::run_python(
        "make_fixtures.py",
        &[s(tmp.path()), "--only", "vocab262k.gguf"],
    );
    let original = tmp.path().join("vocab262k.gguf");
    let victim = tmp.path().join("victim.gguf");
    for command in ["id", "inspect"] {
        // How far a header read gets in a few milliseconds depends on the machine: only
        // that no round dies by a signal is certain.
        race(
            || {
                let mut cmd = Command::new(bin());
                cmd.args([command, s(&victim)]);
                cmd
            },
            &original,
            &victim,
            1 << 20,
            Some(&[1, 2, 3, 4, 6, 8, 10, 15, 20, 30]),
            0,
        );
    }
}

#[test]
fn git_diff_values_of_a_work_tree_file_truncated_mid_read_is_an_error_not_sigbus() {
    let repo = common::git::Repo::new();
    let tmp = tempfile::tempdir().unwrap();
    let (a, b, _) = files(tmp.path());
    std::fs::copy(&a, repo.path("model.safetensors")).unwrap();
    repo.commit_all("model");
    let victim = repo.path("model.safetensors");
    race(
        || {
            let mut cmd = repo.command(bin());
            cmd.args(["git", "diff", "--values"]);
            cmd
        },
        &b,
        &victim,
        4096,
        None,
        1,
    );
}
