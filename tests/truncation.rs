//! A model file truncated by another process while a command reads it: every command ends with
//! an error naming the file and the bytes that went missing (exit 2), never a signal. The
//! truncation happens at a pause point of the test build, once the file is mapped. The readers map files, and a mapped page that the truncation removed raises
//! SIGBUS, which kills a process that does not handle it.
#![cfg(unix)]

mod common;

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::bin;

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

/// Runs `cmd` against a fresh copy of `original` at `victim`, stopped at the pause point `at`
/// (docs/TESTING.md) once the file is mapped, truncates the copy to `keep` bytes there and lets
/// it go on. Asserts the one outcome that is right: no signal, exit status 2, and the error of
/// a file truncated mid-read naming the file, the bytes that went missing and the byte that
/// was being read.
fn truncated_while_mapped(cmd: Command, at: &str, original: &Path, victim: &Path, keep: u64) {
    std::fs::copy(original, victim).unwrap();
    let len = std::fs::metadata(victim).unwrap().len();
    assert!(keep < len);
    let paused = common::pause::start_paused(cmd, at);
    std::fs::OpenOptions::new()
        .write(true)
        .open(victim)
        .unwrap()
        .set_len(keep)
        .unwrap();
    let (status, err) = paused.resume();
    assert_eq!(
        status.signal(),
        None,
        "{at}: killed by a signal; stderr: {err}"
    );
    assert_eq!(status.code(), Some(2), "{at}: {err}");
    let name = victim.file_name().unwrap().to_str().unwrap();
    let line = err
        .lines()
        .find(|l| l.contains("changed while it was read"))
        .unwrap_or_else(|| panic!("{at}: not the error of a truncated file: {err}"));
    let expected_cut = format!(
        "{name}: the file changed while it was read (truncated by another process): bytes \
         {keep}..{len} it had when opened are gone (byte "
    );
    let (head, rest) = line
        .split_once(&expected_cut)
        .unwrap_or_else(|| panic!("{at}: expected `{expected_cut}` in: {line}"));
    assert!(head.starts_with("weight-inspect: "), "{line}");
    let (byte, tail) = rest.split_once(' ').unwrap();
    let byte: u64 = byte.parse().unwrap_or_else(|_| panic!("{line}"));
    assert!((keep..len).contains(&byte), "{line}");
    assert_eq!(
        tail,
        format!("was being read; it now has {keep} bytes)"),
        "{line}"
    );
}

fn files(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let (a, b) = (dir.join("a.safetensors"), dir.join("b.safetensors"));
    // 1 MiB each: the truncation happens at a pause point, so no length is needed to make
    // it land mid-read.
    safetensors(&a, 1 << 18, 1);
    safetensors(&b, 1 << 18, 2);
    (a, b, dir.join("victim.safetensors"))
}

#[test]
fn diff_values_of_a_file_truncated_mid_read_is_an_error_not_sigbus() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b, victim) = files(tmp.path());
    let mut cmd = Command::new(bin());
    cmd.args(["diff", "--values", s(&a), s(&victim)]);
    truncated_while_mapped(cmd, "values-mapped:victim.safetensors", &b, &victim, 4096);
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
        // Cut to its first MiB once mapped: the vocabulary beyond is gone when it is read.
        let mut cmd = Command::new(bin());
        cmd.args([command, s(&victim)]);
        truncated_while_mapped(
            cmd,
            "header-mapped:victim.gguf",
            &original,
            &victim,
            1 << 20,
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
    let mut cmd = repo.command(bin());
    cmd.args(["git", "diff", "--values"]);
    truncated_while_mapped(cmd, "values-mapped:model.safetensors", &b, &victim, 4096);
}
