//! Hardening of the delta commands: an output that is one of the inputs is refused, signals
//! remove temporary files, an input that shrinks while it is read is an error (not SIGBUS),
//! hostile .wdelta headers are capped, fixed-form fields are validated, integer tensors are
//! carried, and outputs get the usual permissions.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

use common::delta::{ok, pair, s};
use common::{bin, code, run, stderr};

/// A small pair (base, fine-tuned) and a delta between them, in `dir`.
fn small_setup(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    pair(dir, "16x8,5", "f32", 3, 1);
    let base = dir.join("base.safetensors");
    let ft = dir.join("ft1.safetensors");
    let wd = dir.join("d.wdelta");
    ok(&run(&[
        "delta",
        "create",
        "--base",
        s(&base),
        s(&ft),
        "-o",
        s(&wd),
    ]));
    (base, ft, wd)
}

fn snapshot(paths: &[&Path]) -> Vec<Vec<u8>> {
    paths.iter().map(|p| std::fs::read(p).unwrap()).collect()
}

/// Hidden temporary files left in `dir`.
fn temps_in(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".weight-inspect-"))
        .collect()
}

fn assert_refused(out: &Output, needles: &[&str]) {
    assert_eq!(code(out), 2, "stderr: {}", stderr(out));
    let err = stderr(out);
    common::assert_contains(&err, needles);
    common::assert_contains(&err, &["would replace an input"]);
}

#[test]
fn an_output_that_is_an_input_is_refused_and_nothing_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let (base, ft, wd) = small_setup(d);
    let before = snapshot(&[&base, &ft, &wd]);
    let create = |out: &Path| run(&["delta", "create", "--base", s(&base), s(&ft), "-o", s(out)]);
    assert_refused(&create(&base), &[s(&base), "base model"]);
    assert_refused(&create(&ft), &[s(&ft), "fine-tuned model"]);
    let apply = |out: &Path| run(&["delta", "apply", "--base", s(&base), s(&wd), "-o", s(out)]);
    assert_refused(&apply(&wd), &[s(&wd), "delta"]);
    assert_refused(&apply(&base), &[s(&base), "base model"]);
    let store = run(&[
        "delta",
        "store",
        s(&ft),
        "--parent",
        s(&base),
        "-o",
        s(&base),
    ]);
    assert_refused(&store, &[s(&base)]);
    let restore = run(&[
        "delta",
        "restore",
        s(&wd),
        "--parent",
        s(&base),
        "-o",
        s(&wd),
    ]);
    assert_refused(&restore, &[s(&wd)]);

    // Through a symlink, a hard link, and a path spelled differently.
    #[cfg(unix)]
    {
        let link = d.join("link.safetensors");
        std::os::unix::fs::symlink(&base, &link).unwrap();
        assert_refused(&create(&link), &["base model"]);
        let hard = d.join("hard.wdelta");
        std::fs::hard_link(&wd, &hard).unwrap();
        assert_refused(&apply(&hard), &["delta"]);
        std::fs::create_dir(d.join("sub")).unwrap();
        let roundabout = d.join("sub/../base.safetensors");
        assert_refused(&create(&roundabout), &["base model"]);
    }
    assert_eq!(snapshot(&[&base, &ft, &wd]), before, "an input changed");
    assert!(temps_in(d).is_empty(), "left {:?}", temps_in(d));
}

#[test]
fn an_output_inside_a_sharded_input_directory_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let (base, ft, _) = small_setup(d);
    let shards = d.join("base-sharded");
    common::run_python("delta_ref.py", &["shard", s(&base), s(&shards), "2"]);
    let shard = std::fs::read_dir(&shards)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "safetensors"))
        .unwrap();
    let before = std::fs::read(&shard).unwrap();
    for out in [shard.clone(), shards.join("new.wdelta"), shards.clone()] {
        let r = run(&[
            "delta",
            "create",
            "--base",
            s(&shards),
            s(&ft),
            "-o",
            s(&out),
        ]);
        assert_eq!(code(&r), 2, "{}: {}", out.display(), stderr(&r));
        common::assert_contains(&stderr(&r), &[s(&shards)]);
    }
    assert_eq!(std::fs::read(&shard).unwrap(), before);
    assert!(!shards.join("new.wdelta").exists());
    // Outside the directory, the sharded base works.
    ok(&run(&[
        "delta",
        "create",
        "--base",
        s(&shards),
        s(&ft),
        "-o",
        s(&d.join("fine.wdelta")),
    ]));
}

#[cfg(unix)]
#[test]
fn apply_and_restore_outputs_get_the_usual_permissions() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let (base, _, wd) = small_setup(d);
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let out = d.join("out.safetensors");
    let apply = || {
        ok(&run(&[
            "delta",
            "apply",
            "--base",
            s(&base),
            s(&wd),
            "-o",
            s(&out),
        ]))
    };
    apply();
    assert_eq!(mode(&out), 0o644, "a new output is 0644");
    std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o600)).unwrap();
    apply();
    assert_eq!(mode(&out), 0o600, "a replaced output keeps its mode");
    std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o640)).unwrap();
    ok(&run(&[
        "delta",
        "restore",
        s(&wd),
        "--parent",
        s(&base),
        "-o",
        s(&out),
    ]));
    assert_eq!(mode(&out), 0o640, "restore keeps the replaced file's mode");
    let restored = d.join("restored.safetensors");
    ok(&run(&[
        "delta",
        "restore",
        s(&wd),
        "--parent",
        s(&base),
        "-o",
        s(&restored),
    ]));
    assert_eq!(mode(&restored), 0o644);
}

/// A pair large enough that `apply` runs for a while in a debug build, and its delta.
fn big_setup(dir: &Path, shapes: &str) -> (PathBuf, PathBuf) {
    pair(dir, shapes, "f32", 11, 1);
    let base = dir.join("base.safetensors");
    let wd = dir.join("big.wdelta");
    ok(&run(&[
        "delta",
        "create",
        "--base",
        s(&base),
        s(&dir.join("ft1.safetensors")),
        "-o",
        s(&wd),
        "--strategy",
        "sparse",
    ]));
    (base, wd)
}

/// Starts `delta apply` into `outdir/model.safetensors` and waits until its temporary file
/// exists (None if it finished first).
fn apply_until_temp_exists(base: &Path, wd: &Path, outdir: &Path) -> Option<Child> {
    let out_path = outdir.join("model.safetensors");
    let mut child = Command::new(bin())
        .args([
            "delta",
            "apply",
            "--base",
            s(base),
            s(wd),
            "-o",
            s(&out_path),
            "--threads",
            "1",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(60) {
        if !temps_in(outdir).is_empty() {
            return Some(child);
        }
        if child.try_wait().unwrap().is_some() {
            return None;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    None
}

#[cfg(unix)]
#[test]
fn signals_remove_temporary_files_and_keep_the_old_output() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let (base, wd) = big_setup(d, "2048x2048,2048x2048,2048x2048,2048x2048");
    let outdir = d.join("out");
    std::fs::create_dir_all(&outdir).unwrap();
    let old = b"the previous output".to_vec();
    for (signal, number) in [("INT", 2), ("TERM", 15), ("HUP", 1)] {
        let out_path = outdir.join("model.safetensors");
        std::fs::write(&out_path, &old).unwrap();
        let child = apply_until_temp_exists(&base, &wd, &outdir)
            .expect("apply finished before it could be interrupted");
        let killed = Command::new("kill")
            .args([format!("-{signal}"), child.id().to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
        let out = child.wait_with_output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(128 + number),
            "SIG{signal}: {:?} {}",
            out.status,
            stderr(&out)
        );
        let err = stderr(&out);
        common::assert_contains(
            &err,
            &[&format!("stopped by SIG{signal}"), "temporary file"],
        );
        assert_eq!(
            err.trim().lines().count(),
            1,
            "one line on stderr, got {err:?}"
        );
        assert!(
            temps_in(&outdir).is_empty(),
            "SIG{signal} left {:?}",
            temps_in(&outdir)
        );
        assert_eq!(
            std::fs::read(&out_path).unwrap(),
            old,
            "the old output changed"
        );
    }
}

#[cfg(unix)]
#[test]
fn an_input_truncated_during_apply_is_an_error_not_sigbus() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    // Two models of 134 MB (numpy), and their delta.
    let (base, wd) = big_setup(d, "4096x4096,4096x4096");
    let outdir = d.join("out");
    std::fs::create_dir_all(&outdir).unwrap();
    for round in 0..3 {
        let victim = d.join(format!("victim{round}.safetensors"));
        std::fs::copy(&base, &victim).unwrap();
        let child = apply_until_temp_exists(&victim, &wd, &outdir)
            .expect("apply finished before the base could be truncated");
        // Truncate the base to its first kilobyte (its header stays readable).
        std::fs::OpenOptions::new()
            .write(true)
            .open(&victim)
            .unwrap()
            .set_len(1024)
            .unwrap();
        let out = child.wait_with_output().unwrap();
        let err = stderr(&out);
        assert_eq!(
            out.status.code(),
            Some(2),
            "round {round}: {:?} {err}",
            out.status
        );
        common::assert_contains(&err, &[s(&victim), "changed while it was read"]);
        assert!(temps_in(&outdir).is_empty(), "left {:?}", temps_in(&outdir));
        assert!(!outdir.join("model.safetensors").exists());
    }
}
