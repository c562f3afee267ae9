//! One reading of a `.wdelta` for every reader: a delta stored with `delta store` and committed
//! to a real git repository with git-lfs reads the same through `weight-inspect git diff` (the
//! gix fast path), git's external diff driver, textconv, `ci`, `inspect`/`id` on a path and on
//! `REV:path`, and a URL: strategy, exact or approximate, parent hash, tensors changed, size, and
//! for a lossy delta its recorded loss. The figures are checked against the safetensors package
//! and the file system, not against weight-inspect.

mod common;

use std::path::Path;

use common::delta::{ok, pair, s};
use common::git::Repo;
use common::lfs_server::LfsServer;
use common::{run, run_python_source, stderr, stdout};

/// The number of tensors of `ft` and how many differ in bytes from `base`, by the safetensors
/// package.
fn tensors_changed(base: &Path, ft: &Path) -> (u64, u64) {
    let out = run_python_source(
        r"
import sys
from safetensors.numpy import load_file
a, b = load_file(sys.argv[1]), load_file(sys.argv[2])
changed = sum(1 for k in b if k not in a or a[k].tobytes() != b[k].tobytes())
print(len(b), changed)
",
        &[s(base), s(ft)],
    );
    let text = stdout(&out);
    let mut it = text.split_whitespace().map(|n| n.parse::<u64>().unwrap());
    (it.next().unwrap(), it.next().unwrap())
}

/// The `delta:` line `inspect` prints for a `.wdelta` file.
fn delta_line(text: &str) -> String {
    text.lines()
        .find_map(|l| l.strip_prefix("delta: "))
        .unwrap_or_else(|| panic!("no delta: line in\n{text}"))
        .to_owned()
}

/// Four tensors: small enough that every reader is fast.
const SMALL: &str = "32x16,7,3x4x5,9";
/// Large enough that a delta's header at its end lies beyond the first window a server is
/// asked for.
const LARGE: &str = "2048x768,7,3x4x5,9";

/// A repository with a base model committed, then its fine-tune stored as a `.wdelta` with
/// `EXTRA` (`--strategy …`) and committed; both LFS-tracked, the git drivers installed.
/// Returns the repository and the parent hash `delta store` printed.
fn stored(shapes: &str, extra: &[&str]) -> (Repo, String) {
    let repo = Repo::with_lfs(&["*.safetensors", "*.wdelta"]);
    ok(&repo.wi(&["git", "install"]));
    let work = repo.tmp.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    pair(&work, shapes, "f32", 4, 1);
    // One tensor left as the base has it, so a delta has unchanged tensors to count.
    run_python_source(
        r"
import sys
from safetensors.numpy import load_file, save_file
base, ft = load_file(sys.argv[1]), load_file(sys.argv[2])
last = sorted(ft)[-1]
ft[last] = base[last]
save_file(ft, sys.argv[2])
",
        &[
            s(&work.join("base.safetensors")),
            s(&work.join("ft1.safetensors")),
        ],
    );
    std::fs::write(repo.path(".gitignore"), "model.safetensors\n").unwrap();
    std::fs::copy(work.join("base.safetensors"), repo.path("base.safetensors")).unwrap();
    repo.commit_all("base");
    std::fs::copy(work.join("ft1.safetensors"), repo.path("model.safetensors")).unwrap();
    let mut args = vec![
        "delta",
        "store",
        "model.safetensors",
        "--parent",
        "base.safetensors",
    ];
    args.extend_from_slice(extra);
    let out = repo.wi(&args);
    ok(&out);
    let parent = stdout(&out)
        .lines()
        .find_map(|l| l.strip_prefix("parent hash: "))
        .unwrap_or_else(|| panic!("no parent hash in\n{}", stdout(&out)))
        .to_owned();
    repo.git(&["add", "model.safetensors.wdelta"]);
    repo.git(&["commit", "-q", "-m", "fine-tune as a delta"]);
    (repo, parent)
}

/// Every reader shows `line` for the committed `model.safetensors.wdelta`.
fn every_reader_shows(repo: &Repo, line: &str) {
    let want = |what: &str, text: &str| {
        assert!(
            text.contains(line),
            "{what} does not show\n  {line}\nit printed:\n{text}"
        );
        assert!(
            !text.contains("not a GGUF, safetensors or PyTorch file"),
            "{what}: {text}"
        );
    };
    let fast = repo.wi(&["git", "diff", "HEAD~1", "HEAD"]);
    want("weight-inspect git diff", &stdout(&fast));
    let json = repo.wi(&["git", "diff", "--json", "HEAD~1", "HEAD"]);
    let report: serde_json::Value = serde_json::from_str(&stdout(&json)).unwrap();
    let files = report["files"].as_array().unwrap();
    let delta = files
        .iter()
        .find(|f| f["new_path"] == "model.safetensors.wdelta")
        .unwrap_or_else(|| panic!("{report}"));
    assert_eq!(delta["new"]["kind"], "wdelta", "{delta}");
    assert_eq!(delta["new"]["note"], line, "{delta}");
    // git itself: the external driver, then textconv (without it) for `git show`.
    want("git's diff driver", &repo.ok(&["diff", "HEAD~1", "HEAD"]));
    want(
        "textconv",
        &repo.ok(&[
            "show",
            "--no-ext-diff",
            "HEAD",
            "--",
            "model.safetensors.wdelta",
        ]),
    );
    let summary = repo.tmp.path().join("summary.md");
    let ci = repo.wi(&[
        "ci",
        "--base",
        "HEAD~1",
        "--head",
        "HEAD",
        "--summary",
        s(&summary),
    ]);
    assert!(ci.status.code().is_some_and(|c| c < 2), "{}", stderr(&ci));
    want("ci's summary", &std::fs::read_to_string(&summary).unwrap());
    for spec in ["model.safetensors.wdelta", "HEAD:model.safetensors.wdelta"] {
        for command in ["inspect", "id"] {
            let out = repo.wi(&[command, spec]);
            ok(&out);
            assert_eq!(delta_line(&stdout(&out)), line, "{command} {spec}");
        }
    }
}

/// What every reader must say, from the figures the safetensors package and the file system
/// give.
fn expected_parts(repo: &Repo, parent: &str) -> Vec<String> {
    let work = repo.tmp.path().join("work");
    let (total, changed) = tensors_changed(
        &work.join("base.safetensors"),
        &work.join("ft1.safetensors"),
    );
    let size = std::fs::metadata(repo.path("model.safetensors.wdelta"))
        .unwrap()
        .len();
    assert!(changed > 0 && changed <= total);
    vec![
        format!("parent hash {parent}"),
        format!("{size} bytes"),
        format!("{changed} of {total} tensors changed"),
    ]
}

#[test]
fn a_lossless_delta_reads_the_same_in_every_reader() {
    let (repo, parent) = stored(SMALL, &[]);
    let line = delta_line(&stdout(&repo.wi(&["inspect", "model.safetensors.wdelta"])));
    assert!(
        line.starts_with(".wdelta version 3, lossless (exact): "),
        "{line}"
    );
    let parts = expected_parts(&repo, &parent);
    let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
    common::assert_contains(&line, &parts);
    every_reader_shows(&repo, &line);
}

#[test]
fn a_lossy_delta_reads_the_same_in_every_reader_with_its_loss() {
    let (repo, parent) = stored(SMALL, &["--strategy", "int4"]);
    let line = delta_line(&stdout(&repo.wi(&["inspect", "model.safetensors.wdelta"])));
    assert!(
        line.starts_with(".wdelta version 1, int4 (approximate): "),
        "{line}"
    );
    let work = repo.tmp.path().join("work");
    let (total, _) = tensors_changed(
        &work.join("base.safetensors"),
        &work.join("ft1.safetensors"),
    );
    let size = std::fs::metadata(repo.path("model.safetensors.wdelta"))
        .unwrap()
        .len();
    common::assert_contains(
        &line,
        &[
            &format!("parent hash {parent}"),
            &format!("{total} tensors changed"),
            &format!("{size} bytes"),
            "update lost ",
            "most update lost: ",
            "largest rel_l2: ",
        ],
    );
    every_reader_shows(&repo, &line);
}

/// A URL's `.wdelta`, from a server that honors Range: only its header is downloaded (a
/// lossless one's from the end of the file), and it is described as the file is.
#[test]
fn a_delta_at_a_url_is_described_from_its_header() {
    for extra in [&[][..], &["--strategy", "int4"][..]] {
        let (repo, _) = stored(LARGE, extra);
        let storage = repo.tmp.path().join("served");
        std::fs::create_dir_all(storage.join("org")).unwrap();
        let file = repo.path("model.safetensors.wdelta");
        std::fs::copy(&file, storage.join("org/x.wdelta")).unwrap();
        let size = std::fs::metadata(&file).unwrap().len();
        assert!(
            size > 512 << 10,
            "{size} bytes: more than two first windows"
        );
        let server = LfsServer::range(&storage, "none", None);
        let url = format!("{}/objects/org/x.wdelta", server.origin());
        let local = delta_line(&stdout(&run(&["inspect", s(&file)])));
        let out = run(&["inspect", &url]);
        ok(&out);
        assert_eq!(delta_line(&stdout(&out)), local, "{extra:?}");
        assert!(
            stderr(&out).contains("read from the server"),
            "{}",
            stderr(&out)
        );
        let sent = server.bytes_sent();
        assert!(sent < size / 2, "{sent} of {size} bytes sent: {extra:?}");
    }
}

/// A clone without the LFS objects: `weight-inspect git diff`, textconv and `inspect REV:path`
/// read a lossless delta's header from the LFS server (its end, by Range) and show the line a
/// clone with the objects shows.
#[test]
fn a_delta_in_a_clone_without_lfs_objects_is_read_from_the_lfs_server() {
    let (source, _) = stored(LARGE, &[]);
    let line = delta_line(&stdout(
        &source.wi(&["inspect", "HEAD:model.safetensors.wdelta"]),
    ));
    let oid = source.lfs_oid("HEAD", "model.safetensors.wdelta");
    let storage = source.tmp.path().join("lfs-storage");
    std::fs::create_dir_all(storage.join("org/repo")).unwrap();
    std::fs::copy(source.lfs_object(&oid), storage.join("org/repo").join(&oid)).unwrap();
    let size = std::fs::metadata(source.lfs_object(&oid)).unwrap().len();

    let repo = Repo::new();
    std::fs::remove_dir_all(&repo.dir).unwrap();
    let out = repo
        .git_cmd_in(
            repo.tmp.path(),
            &["clone", "-q", s(&source.dir), s(&repo.dir)],
        )
        .env("GIT_LFS_SKIP_SMUDGE", "1")
        .output()
        .unwrap();
    ok(&out);
    assert!(
        repo.read("model.safetensors.wdelta")
            .starts_with("version https://git-lfs")
    );
    let server = LfsServer::range(&storage, "none", None);
    repo.git(&["config", "remote.origin.lfsurl", &server.lfs_url()]);

    let fast = repo.wi(&["git", "diff", "HEAD~1", "HEAD"]);
    ok(&fast);
    assert!(stdout(&fast).contains(&line), "{}", stdout(&fast));
    let out = repo.wi(&["inspect", "HEAD:model.safetensors.wdelta"]);
    ok(&out);
    assert_eq!(delta_line(&stdout(&out)), line);
    assert!(stderr(&out).contains("LFS server"), "{}", stderr(&out));
    let textconv = repo.wi(&["textconv", "model.safetensors.wdelta"]);
    ok(&textconv);
    common::assert_contains(
        &stdout(&textconv),
        &[
            &format!("delta: {line}\n"),
            "header-source: LFS server (not verified against the oid)",
        ],
    );
    let sent = server.bytes_sent();
    assert!(sent < size / 2, "{sent} of {size} bytes sent");
}

/// A `.wdelta` named where something else is needed: the error names the argument as typed
/// (`HEAD:model.safetensors.wdelta`), never the LFS object inside `.git`, and says what to do;
/// where a delta is a parent, it is one.
#[test]
fn errors_about_a_committed_delta_name_the_argument_and_what_to_do() {
    let (repo, _) = stored(SMALL, &[]);
    let arg = "HEAD:model.safetensors.wdelta";
    let refused = |args: &[&str], needles: &[&str]| {
        let out = repo.wi(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        let mut all = vec![arg];
        all.extend_from_slice(needles);
        common::assert_contains(&err, &all);
        common::assert_lacks(&err, &[".git/", "/tmp", "lfs/objects"]);
    };
    // A stored model onto a lossless delta, either strategy, is a chained delta now; its
    // report names no path inside .git.
    for extra in [&[][..], &["--strategy", "int4"][..]] {
        let mut args = vec![
            "delta",
            "store",
            "model.safetensors",
            "--parent",
            arg,
            "-o",
            "next.wdelta",
        ];
        args.extend_from_slice(extra);
        let out = repo.wi(&args);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
        common::assert_lacks(&stdout(&out), &[".git/", "lfs/objects"]);
    }
    // A delta given as a base, or where a model is compared.
    refused(
        &[
            "delta",
            "apply",
            "--base",
            arg,
            "model.safetensors.wdelta",
            "-o",
            "x.safetensors",
        ],
        &["a .wdelta, not a model", "delta restore"],
    );
    refused(
        &["diff", arg, "base.safetensors"],
        &["a weight delta, not a model", "delta apply"],
    );
}

/// `apply` on the wrong base: one line naming the first few differences and how many more;
/// `--all` lists every one.
#[test]
fn a_delta_on_the_wrong_base_is_summed_up_in_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::create_dir_all(d.join("a")).unwrap();
    std::fs::create_dir_all(d.join("b")).unwrap();
    pair(&d.join("a"), "16x8,5,3,4,6,7", "f32", 1, 1);
    pair(&d.join("b"), "16x4,5,2,3,5,6", "f32", 2, 1);
    let delta = d.join("b.wdelta");
    ok(&run(&[
        "delta",
        "create",
        "--base",
        s(&d.join("b/base.safetensors")),
        s(&d.join("b/ft1.safetensors")),
        "-o",
        s(&delta),
    ]));
    let wrong = d.join("a/base.safetensors");
    let out_file = d.join("out.safetensors");
    let apply = |extra: &[&str]| {
        let mut args = vec!["delta", "apply", "--base", s(&wrong), s(&delta), "-o"];
        args.push(s(&out_file));
        args.extend_from_slice(extra);
        run(&args)
    };
    let out = apply(&[]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    common::assert_contains(
        &err,
        &["5 differences: ", "; and 2 more (`--all` lists every one)"],
    );
    let all = apply(&["--all"]);
    assert_eq!(all.status.code(), Some(2));
    let every = stderr(&all);
    let listed = every.lines().filter(|l| l.starts_with("  tensor ")).count();
    assert_eq!(listed, 5, "{every}");
    assert!(!out_file.exists());
}
