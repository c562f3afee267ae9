//! `ci` holds a bounded window of models, however many files a change touches (issue 32,
//! item 4; issue 33): its reports are made from compact per-file records and spools, not from
//! every compared model kept to the end. Peak memory is the child's getrusage, measured by
//! Python; nothing asserts time.

mod common;

use std::process::Command;

use common::git::Repo;
use common::{bin, python};

const MIB: u64 = 1 << 20;

/// Writes N safetensors files (with the safetensors package) as LFS pointers under `models/`,
/// their objects straight into the repository's LFS store: each with 48 KB of metadata, which
/// the second version changes, so both sides of every file are models with a diff to report.
const MAKE: &str = r#"
import hashlib, os, sys
import numpy as np
from safetensors.numpy import save

n, version = int(sys.argv[1]), int(sys.argv[2])
os.makedirs("models", exist_ok=True)
for i in range(n):
    data = save({"w": np.full((2, 2), i, np.float32)},
                metadata={"notes": f"v{version} {i} " + "x" * 48_000})
    oid = hashlib.sha256(data).hexdigest()
    store = os.path.join(".git", "lfs", "objects", oid[:2], oid[2:4])
    os.makedirs(store, exist_ok=True)
    with open(os.path.join(store, oid), "wb") as f:
        f.write(data)
    with open(f"models/m-{i:05d}.safetensors", "w") as f:
        f.write(f"version https://git-lfs.github.com/spec/v1\noid sha256:{oid}\nsize {len(data)}\n")
"#;

/// Peak RSS in bytes of `weight-inspect ARGS` run in `repo`, with its exit code.
fn peak_rss(repo: &Repo, args: &[&str]) -> (Option<i32>, u64) {
    const MEASURE: &str = r"
import resource, subprocess, sys
r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
sys.stderr.buffer.write(r.stderr)
print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
";
    let mut cmd = repo.command(python());
    cmd.arg("-c").arg(MEASURE).arg(bin()).args(args);
    let out = cmd.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let mut fields = text.split_whitespace();
    let code = fields.next().and_then(|c| c.parse().ok());
    let kib: u64 = fields.next().unwrap().parse().unwrap();
    assert!(
        out.stderr.is_empty() || code.is_some(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (code, kib * 1024)
}

fn make_version(repo: &Repo, n: usize, version: u32) {
    let out = Command::new(python())
        .current_dir(&repo.dir)
        .args(["-c", MAKE, &n.to_string(), &version.to_string()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    repo.git(&["add", "-A"]);
    repo.git(&["commit", "-qm", &format!("v{version}")]);
}

/// 1,200 changed files of about 48 KB of header each: about 115 MB of headers on the two
/// sides. Holding every compared model until the reports are written (as `ci` did) peaked at
/// 469 MiB here; a window of them, with the JSON and HTML written through spools, at 75 MiB
/// (debug build).
#[test]
fn ci_memory_stays_bounded_as_changed_files_grow() {
    let repo = Repo::new();
    repo.write(
        ".gitattributes",
        "*.safetensors filter=lfs diff=lfs merge=lfs -text\n",
    );
    const N: usize = 1200;
    make_version(&repo, N, 1);
    make_version(&repo, N, 2);
    let out = repo.path("out");
    std::fs::create_dir_all(&out).unwrap();
    let file = |name: &str| out.join(name).to_str().unwrap().to_owned();
    let (summary, json, html) = (file("summary.md"), file("report.json"), file("report.html"));
    let (code, rss) = peak_rss(
        &repo,
        &[
            "ci",
            "--offline",
            "--base",
            "HEAD~1",
            "--head",
            "HEAD",
            "--summary",
            &summary,
            "--json",
            &json,
            "--html",
            &html,
        ],
    );
    eprintln!("ci peak RSS for {N} files: {} MiB", rss / MIB);
    assert_eq!(code, Some(0));
    // The reports are whole: every file in the JSON, its diff with both sides' metadata.
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(report["schema"], 1);
    assert_eq!(report["changed_files"], N);
    let files = report["files"].as_array().unwrap();
    assert_eq!(files.len(), N);
    assert_eq!(files[N - 1]["new_path"], "models/m-01199.safetensors");
    assert!(
        files[N - 1]["counts"]["metadata_changed"] == 1,
        "{}",
        files[N - 1]
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("id=\"file-1199\""));
    assert!(page.trim_end().ends_with("</html>"));
    assert!(
        rss < 100 * MIB,
        "ci peak RSS {} MiB for {N} files",
        rss / MIB
    );
}
