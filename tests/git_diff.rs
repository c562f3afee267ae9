//! The git integration end to end, with the real `git` and `git-lfs` in temporary repositories:
//! the textconv driver (`git log -p`, `git show`, `git diff --no-ext-diff`), the external diff
//! driver (`git diff`, `--ext-diff`), and the standalone fast path (`weight-inspect git diff`,
//! `weight-inspect diff REV:path ...`).

mod common;

use common::git::{MODEL_PATTERNS, Repo};
use common::models::make_model;
use common::{assert_contains, assert_lacks, assert_success, bin, stderr, stdout};
use serde_json::{Value, json};

fn tokens(changed_at: Option<usize>) -> Vec<String> {
    (0..100)
        .map(|i| {
            if Some(i) == changed_at {
                "changed".to_owned()
            } else {
                format!("t{i}")
            }
        })
        .collect()
}

/// A 30-line chat template; v2 edits line 20 only.
fn template(version: u32) -> String {
    (1..=30)
        .map(|i| {
            if i == 20 && version == 2 {
                "{% if n == 20 %}{{ m.author }}: {{ m.content }}{% endif %}\n".to_owned()
            } else {
                format!("{{% if n == {i} %}}{{{{ m.role }}}}: {{{{ m.content }}}}{{% endif %}}\n")
            }
        })
        .collect()
}

fn gguf_v1() -> Value {
    json!({
        "kind": "gguf",
        "metadata": {
            "general.name": "tiny v1",
            "llama.block_count": 2,
            "tokenizer.ggml.tokens": tokens(None),
            "tokenizer.chat_template": template(1),
        },
        "tensors": [
            {"name": "tok_embd.weight", "dtype": "float32", "shape": [4, 8], "fill": 1},
            {"name": "blk.0.attn_q.weight", "dtype": "float32", "shape": [8, 8], "fill": 1},
            {"name": "blk.0.old.weight", "dtype": "float32", "shape": [2], "fill": 1},
        ],
    })
}

/// Metadata change, changed vocabulary entry, edited template line, dtype change, one tensor
/// removed and one added.
fn gguf_v2() -> Value {
    json!({
        "kind": "gguf",
        "metadata": {
            "general.name": "tiny v2",
            "llama.block_count": 2,
            "tokenizer.ggml.tokens": tokens(Some(50)),
            "tokenizer.chat_template": template(2),
        },
        "tensors": [
            {"name": "tok_embd.weight", "dtype": "float16", "shape": [4, 8], "fill": 1},
            {"name": "blk.0.attn_q.weight", "dtype": "float32", "shape": [8, 8], "fill": 1},
            {"name": "blk.0.new.weight", "dtype": "float32", "shape": [3], "fill": 1},
        ],
    })
}

fn st(note: &str, dtype: &str) -> Value {
    json!({
        "kind": "safetensors",
        "metadata": {"format": "pt", "note": note},
        "tensors": [
            {"name": "a", "dtype": dtype, "shape": [2, 2], "fill": 1},
            {"name": "b", "dtype": "float32", "shape": [3], "fill": 1},
        ],
    })
}

/// Two commits of a GGUF and a safetensors model; LFS-tracked unless `lfs` is false. With
/// `install`, `weight-inspect git install ARGS` runs first, so .gitattributes is committed.
fn two_versions(lfs: bool, install_args: Option<&[&str]>) -> Repo {
    let repo = if lfs {
        Repo::with_lfs(MODEL_PATTERNS)
    } else {
        Repo::new()
    };
    if let Some(args) = install_args {
        install(&repo, args);
    }
    make_model(&repo.path("model.gguf"), &gguf_v1());
    make_model(&repo.path("weights.safetensors"), &st("one", "float32"));
    repo.commit_all("v1");
    make_model(&repo.path("model.gguf"), &gguf_v2());
    make_model(&repo.path("weights.safetensors"), &st("two", "float16"));
    repo.commit_all("v2");
    repo
}

fn install(repo: &Repo, args: &[&str]) -> String {
    let mut all = vec!["git", "install"];
    all.extend_from_slice(args);
    let out = repo.wi(&all);
    assert_success("weight-inspect git install", &out);
    stdout(&out)
}

/// The textconv lines of the v1 -> v2 change of model.gguf.
const GGUF_TEXTCONV_CHANGES: &[&str] = &[
    "-meta general.name: string = \"tiny v1\"",
    "+meta general.name: string = \"tiny v2\"",
    "-tensor tok_embd.weight: f32 [8, 4] 128 bytes",
    "+tensor tok_embd.weight: f16 [8, 4] 64 bytes",
    "-tensor blk.0.old.weight: f32 [2] 8 bytes",
    "+tensor blk.0.new.weight: f32 [3] 12 bytes",
    "-meta tokenizer.ggml.tokens: array[string; 100] sha256:",
    "+meta tokenizer.ggml.tokens: array[string; 100] sha256:",
    "-    | {% if n == 20 %}{{ m.role }}: {{ m.content }}{% endif %}",
    "+    | {% if n == 20 %}{{ m.author }}: {{ m.content }}{% endif %}",
    // Unchanged lines are context, and git's default hunk header names the template's key.
    " meta llama.block_count: u32 = 2",
    " @@ meta tokenizer.chat_template: string, long text:",
];

fn textconv_changes() -> Vec<&'static str> {
    [GGUF_TEXTCONV_CHANGES, ST_TEXTCONV_CHANGES].concat()
}

/// The textconv lines of the v1 -> v2 change of weights.safetensors.
const ST_TEXTCONV_CHANGES: &[&str] = &[
    "-meta note: string = \"one\"",
    "+meta note: string = \"two\"",
    "-tensor a: f32 [2, 2] 16 bytes",
    "+tensor a: f16 [2, 2] 8 bytes",
];

#[test]
fn external_driver_shows_the_structural_diff_of_lfs_files() {
    let repo = two_versions(true, Some(&[]));
    let out = repo.ok(&["diff", "HEAD~1", "HEAD"]);
    assert_contains(
        &out,
        &[
            "weight-inspect a/model.gguf b/model.gguf",
            "general.name: \"tiny v1\" -> \"tiny v2\"",
            "dtype: f32 -> f16",
            "blk.0.new.weight",
            "blk.0.old.weight",
            "tokenizer.ggml.tokens",
            "first difference at index 50",
            "{{ m.author }}",
            "weight-inspect a/weights.safetensors b/weights.safetensors",
            "note: \"one\" -> \"two\"",
        ],
    );
    // Neither LFS pointer texts nor "Binary files differ".
    assert_lacks(&out, &["version https://git-lfs", "Binary files"]);
    // git log/show use the external driver only when asked.
    let log = repo.ok(&["log", "-p", "--ext-diff", "-1"]);
    assert_contains(
        &log,
        &[
            "weight-inspect a/model.gguf b/model.gguf",
            "dtype: f32 -> f16",
        ],
    );
    let show = repo.ok(&["show", "--ext-diff", "HEAD"]);
    assert_contains(
        &show,
        &["weight-inspect a/weights.safetensors b/weights.safetensors"],
    );
}

#[test]
fn textconv_drives_git_log_show_and_diff() {
    let repo = two_versions(true, Some(&["--textconv"]));
    let log = repo.ok(&["log", "-p", "-1"]);
    assert_contains(&log, &textconv_changes());
    assert_lacks(&log, &["version https://git-lfs", "Binary files"]);
    let show = repo.ok(&["show", "HEAD"]);
    assert_contains(&show, &textconv_changes());
    let diff = repo.ok(&["diff", "HEAD~1", "HEAD"]);
    assert_contains(&diff, &textconv_changes());
    // `--ext-diff` with only textconv installed changes nothing.
    assert_eq!(repo.ok(&["diff", "--ext-diff", "HEAD~1", "HEAD"]), diff);
    // The first commit shows the whole rendering as added lines.
    let first = repo.ok(&["show", "HEAD~1"]);
    assert_contains(
        &first,
        &[
            "+weight-inspect textconv 5",
            "+format: gguf v3",
            "+format: safetensors",
            "+tensor blk.0.old.weight: f32 [2] 8 bytes",
        ],
    );
    // Word diff works on the same lines.
    let words = repo.ok(&["diff", "--word-diff", "HEAD~1", "HEAD", "--", "model.gguf"]);
    assert_contains(&words, &["[-v1\"-]{+v2\"+}", "[-f32-]{+f16+}"]);
}

#[test]
fn both_drivers_installed_git_diff_uses_the_external_one_log_the_textconv() {
    let repo = two_versions(true, Some(&[]));
    let diff = repo.ok(&["diff", "HEAD~1", "HEAD"]);
    assert_contains(&diff, &["weight-inspect a/model.gguf b/model.gguf"]);
    let plain = repo.ok(&["diff", "--no-ext-diff", "HEAD~1", "HEAD"]);
    assert_contains(&plain, &textconv_changes());
    let log = repo.ok(&["log", "-p", "-1"]);
    assert_contains(&log, &textconv_changes());
}

#[test]
fn working_tree_changes() {
    let repo = two_versions(true, Some(&[]));
    let mut v3 = gguf_v2();
    v3["metadata"]["llama.block_count"] = json!(3);
    make_model(&repo.path("model.gguf"), &v3);
    // Only touched, same content: not a change.
    let st_path = repo.path("weights.safetensors");
    let bytes = std::fs::read(&st_path).unwrap();
    let was = std::fs::metadata(&st_path).unwrap().modified().unwrap();
    std::fs::write(&st_path, bytes).unwrap();
    // A modification time that surely differs from the one git saw (no sleep for the clock).
    std::fs::File::options()
        .write(true)
        .open(&st_path)
        .unwrap()
        .set_modified(was + std::time::Duration::from_secs(2))
        .unwrap();

    let driver = repo.ok(&["diff"]);
    assert_contains(
        &driver,
        &[
            "weight-inspect a/model.gguf b/model.gguf",
            "llama.block_count: 2 -> 3",
        ],
    );
    let textconv = repo.ok(&["diff", "--no-ext-diff"]);
    assert_contains(
        &textconv,
        &[
            "-meta llama.block_count: u32 = 2",
            "+meta llama.block_count: u32 = 3",
        ],
    );

    let fast = repo.wi(&["git", "diff"]);
    assert_success("weight-inspect git diff", &fast);
    let text = stdout(&fast);
    assert_contains(
        &text,
        &[
            "weight-inspect a/model.gguf b/model.gguf",
            "llama.block_count: 2 -> 3",
        ],
    );
    assert_lacks(&text, &["weights.safetensors"]);

    // Staged changes are still HEAD vs work tree; `REV` alone compares REV with the work tree.
    repo.ok(&["add", "model.gguf"]);
    let staged = stdout(&repo.wi(&["git", "diff", "--json"]));
    let report: Value = serde_json::from_str(&staged).unwrap();
    assert_eq!(report["schema"], 1);
    assert_eq!(report["head"], Value::Null);
    let files = report["files"].as_array().unwrap();
    assert_eq!(files.len(), 1, "{staged}");
    assert_eq!(files[0]["status"], "modified");
    assert_eq!(files[0]["new_path"], "model.gguf");
    assert_eq!(files[0]["old"]["kind"], "model");
    assert!(files[0]["old"]["lfs_oid"].is_string());
    assert!(files[0]["diff"].is_object());
    let against_first = stdout(&repo.wi(&["git", "diff", "HEAD~1"]));
    assert_contains(
        &against_first,
        &[
            "general.name: \"tiny v1\" -> \"tiny v2\"",
            "weights.safetensors",
        ],
    );
    // --exit-code like git's.
    assert_eq!(
        repo.wi(&["git", "diff", "--exit-code"]).status.code(),
        Some(1)
    );
    repo.commit_all("v3");
    let clean = repo.wi(&["git", "diff", "--exit-code"]);
    assert_eq!(clean.status.code(), Some(0), "{}", stdout(&clean));
    assert_eq!(stdout(&clean), "");
}

#[test]
fn added_deleted_and_renamed_files() {
    let repo = two_versions(true, Some(&[]));
    make_model(&repo.path("extra/new.gguf"), &gguf_v1());
    std::fs::remove_file(repo.path("weights.safetensors")).unwrap();
    repo.commit_all("add and delete");

    let driver = repo.ok(&["diff", "HEAD~1", "HEAD"]);
    assert_contains(
        &driver,
        &[
            "weight-inspect /dev/null b/extra/new.gguf\nnew file:",
            "weight-inspect a/weights.safetensors /dev/null\ndeleted file:",
            "format: safetensors",
        ],
    );
    let textconv = repo.ok(&["diff", "--no-ext-diff", "HEAD~1", "HEAD"]);
    assert_contains(
        &textconv,
        &[
            "+++ b/extra/new.gguf",
            "+tensor blk.0.old.weight: f32 [2] 8 bytes",
            "--- a/weights.safetensors",
            "-meta note: string = \"two\"",
        ],
    );
    let fast = stdout(&repo.wi(&["git", "diff", "HEAD~1", "HEAD", "--json"]));
    let report: Value = serde_json::from_str(&fast).unwrap();
    let statuses: Vec<(&str, &str)> = report["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let path = f["new_path"].as_str().or(f["old_path"].as_str()).unwrap();
            (path, f["status"].as_str().unwrap())
        })
        .collect();
    assert_eq!(
        statuses,
        [
            ("extra/new.gguf", "added"),
            ("weights.safetensors", "removed")
        ]
    );

    // A committed rename: git passes 9 arguments to the driver.
    repo.ok(&["mv", "model.gguf", "renamed.gguf"]);
    // Before committing, the fast path pairs the work-tree file with the removed blob.
    let pending = stdout(&repo.wi(&["git", "diff"]));
    assert_contains(
        &pending,
        &[
            "weight-inspect a/model.gguf b/renamed.gguf (renamed)",
            "structure identical",
        ],
    );
    repo.commit_all("rename");
    let renamed = repo.ok(&["diff", "-M", "HEAD~1", "HEAD"]);
    assert_contains(
        &renamed,
        &[
            "weight-inspect a/model.gguf b/renamed.gguf (renamed)",
            "structure identical (structural hash",
        ],
    );
    let fast = stdout(&repo.wi(&["git", "diff", "HEAD~1", "HEAD"]));
    assert_contains(
        &fast,
        &["weight-inspect a/model.gguf b/renamed.gguf (renamed)"],
    );
    assert_lacks(&fast, &["differ only in tensor data"]);
}

#[test]
fn absent_lfs_objects_are_reported_not_fatal() {
    let repo = two_versions(true, Some(&[]));
    let old_oid = repo.lfs_oid("HEAD~1", "model.gguf");
    let new_oid = repo.lfs_oid("HEAD", "model.gguf");
    // As after `git lfs prune`, or in a clone that never fetched this version.
    std::fs::remove_file(repo.lfs_object(&old_oid)).unwrap();

    let fast = repo.wi(&["git", "diff", "HEAD~1", "HEAD"]);
    assert_success("weight-inspect git diff", &fast);
    let text = stdout(&fast);
    assert_contains(
        &text,
        &[
            &format!("old: LFS object sha256:{old_oid}"),
            "is not present locally",
            "git lfs fetch",
            "new: gguf model, structural hash",
            // The other file is unaffected.
            "note: \"one\" -> \"two\"",
        ],
    );
    let single = repo.wi(&["diff", "HEAD~1:model.gguf", "HEAD:model.gguf"]);
    assert_eq!(single.status.code(), Some(2));
    assert_contains(
        &stderr(&single),
        &["HEAD~1:model.gguf", "not present locally"],
    );

    // Through git, smudging the absent object fails inside git-lfs before any driver runs,
    // unless smudging is skipped: then the drivers get the pointer and say what is missing.
    let skip = repo
        .git_cmd_in(&repo.dir, &["diff", "--no-ext-diff", "HEAD~1", "HEAD"])
        .env("GIT_LFS_SKIP_SMUDGE", "1")
        .output()
        .unwrap();
    assert_success("GIT_LFS_SKIP_SMUDGE=1 git diff", &skip);
    assert_contains(
        &stdout(&skip),
        &[
            &format!("-bytes: sha256:{old_oid}, "),
            "-content: not present locally",
            &format!("+bytes: sha256:{new_oid}, "),
            "+meta general.name: string = \"tiny v2\"",
        ],
    );
    let external = repo
        .git_cmd_in(&repo.dir, &["diff", "HEAD~1", "HEAD"])
        .env("GIT_LFS_SKIP_SMUDGE", "1")
        .output()
        .unwrap();
    assert_success("GIT_LFS_SKIP_SMUDGE=1 git diff (external)", &external);
    assert_contains(
        &stdout(&external),
        &["old: LFS object sha256:", "not present locally"],
    );
    // git-lfs's own switch for unreachable objects hands over the pointer as well.
    let errors_skipped = repo
        .git_cmd_in(
            &repo.dir,
            &[
                "-c",
                "diff.weight-inspect.cachetextconv=false",
                "log",
                "-p",
                "-1",
                "--",
                "model.gguf",
            ],
        )
        .env("GIT_LFS_SKIP_DOWNLOAD_ERRORS", "1")
        .output()
        .unwrap();
    assert_success("GIT_LFS_SKIP_DOWNLOAD_ERRORS=1 git log -p", &errors_skipped);
    assert_contains(&stdout(&errors_skipped), &["-content: not present locally"]);
}

#[test]
fn skip_smudge_pointers_resolve_to_the_local_store() {
    let repo = two_versions(true, Some(&[]));
    let textconv = repo
        .git_cmd_in(&repo.dir, &["diff", "--no-ext-diff", "HEAD~1", "HEAD"])
        .env("GIT_LFS_SKIP_SMUDGE", "1")
        .output()
        .unwrap();
    assert_success("GIT_LFS_SKIP_SMUDGE=1 git diff --no-ext-diff", &textconv);
    let text = stdout(&textconv);
    assert_contains(&text, &["-bytes: sha256:", "+bytes: sha256:"]);
    assert_contains(&text, &textconv_changes());
    let external = repo
        .git_cmd_in(&repo.dir, &["diff", "HEAD~1", "HEAD"])
        .env("GIT_LFS_SKIP_SMUDGE", "1")
        .output()
        .unwrap();
    assert_success("GIT_LFS_SKIP_SMUDGE=1 git diff", &external);
    assert_contains(&stdout(&external), &["dtype: f32 -> f16", "tiny v1"]);

    // A work tree checked out without smudging holds pointer files.
    std::fs::remove_file(repo.path("model.gguf")).unwrap();
    let checkout = repo
        .git_cmd_in(&repo.dir, &["checkout", "--", "model.gguf"])
        .env("GIT_LFS_SKIP_SMUDGE", "1")
        .output()
        .unwrap();
    assert_success("checkout", &checkout);
    let on_disk = std::fs::read_to_string(repo.path("model.gguf")).unwrap();
    assert!(on_disk.starts_with("version https://git-lfs.github.com/spec/v1\n"));
    let conv = stdout(&repo.wi(&["textconv", "model.gguf"]));
    assert_contains(
        &conv,
        &["bytes: sha256:", "meta general.name: string = \"tiny v2\""],
    );
    let fast = repo.wi(&["git", "diff", "--exit-code"]);
    assert_eq!(fast.status.code(), Some(0), "{}", stdout(&fast));
    // `:path` is the index, whose blob is the pointer: read from the local store.
    let rev = repo.wi(&["diff", "HEAD~1:model.gguf", ":model.gguf"]);
    assert_eq!(rev.status.code(), Some(1), "{}", stderr(&rev));
    assert_contains(&stdout(&rev), &["\"tiny v1\" -> \"tiny v2\""]);
}

#[test]
fn repository_without_lfs() {
    let repo = two_versions(false, None);
    assert!(!repo.path(".gitattributes").exists());
    let before = repo.ok(&["diff", "HEAD~1", "HEAD"]);
    assert_contains(
        &before,
        &["Binary files a/model.gguf and b/model.gguf differ"],
    );
    install(&repo, &[]);
    assert_contains(
        &repo.ok(&["diff", "HEAD~1", "HEAD"]),
        &[
            "weight-inspect a/model.gguf b/model.gguf",
            "dtype: f32 -> f16",
        ],
    );
    assert_contains(&repo.ok(&["log", "-p", "-1"]), &textconv_changes());
    let fast = stdout(&repo.wi(&["git", "diff", "HEAD~1", "HEAD"]));
    assert_contains(&fast, &["general.name: \"tiny v1\" -> \"tiny v2\""]);
    let rev = repo.wi(&["diff", "HEAD~1:model.gguf", "HEAD:model.gguf"]);
    assert_eq!(rev.status.code(), Some(1));
    assert_contains(&stdout(&rev), &["dtype: f32 -> f16"]);
    let same = repo.wi(&["diff", "HEAD:model.gguf", "model.gguf"]);
    assert_eq!(same.status.code(), Some(0), "{}", stderr(&same));
    let inspect = repo.wi(&["inspect", "HEAD~1:weights.safetensors"]);
    assert_success("inspect REV:path", &inspect);
    assert_contains(&stdout(&inspect), &["format: safetensors"]);
    let missing = repo.wi(&["diff", "HEAD:nope.gguf", "model.gguf"]);
    assert_eq!(missing.status.code(), Some(2));
    assert_contains(&stderr(&missing), &["nope.gguf does not exist in HEAD"]);
}

#[test]
fn linked_worktree_and_custom_lfs_storage() {
    let repo = Repo::with_lfs(MODEL_PATTERNS);
    // Relative to the git dir, as git-lfs resolves it.
    repo.ok(&["config", "lfs.storage", "lfs-store"]);
    // Before the first commit: the linked worktree checks out a commit, attributes included.
    install(&repo, &[]);
    make_model(&repo.path("model.gguf"), &gguf_v1());
    repo.commit_all("v1");
    make_model(&repo.path("model.gguf"), &gguf_v2());
    repo.commit_all("v2");
    let oid = repo.lfs_oid("HEAD", "model.gguf");
    assert!(
        repo.path(".git/lfs-store/objects")
            .join(&oid[0..2])
            .exists()
    );
    assert!(!repo.lfs_object(&oid).exists());

    let wt = repo.tmp.path().join("wt");
    repo.ok(&[
        "worktree",
        "add",
        "-q",
        "--detach",
        wt.to_str().unwrap(),
        "HEAD~1",
    ]);
    let fast = repo.wi_in(&wt, &["git", "diff", "HEAD", "main"]);
    assert_success("weight-inspect git diff in a linked worktree", &fast);
    assert_contains(
        &stdout(&fast),
        &["general.name: \"tiny v1\" -> \"tiny v2\""],
    );
    let textconv = repo
        .git_cmd_in(&wt, &["diff", "--no-ext-diff", "HEAD", "main"])
        .env("GIT_LFS_SKIP_SMUDGE", "1")
        .output()
        .unwrap();
    assert_success("git diff in a linked worktree", &textconv);
    assert_contains(&stdout(&textconv), GGUF_TEXTCONV_CHANGES);
    assert_lacks(&stdout(&textconv), &["not present locally"]);

    let mut v3 = gguf_v1();
    v3["metadata"]["general.name"] = json!("tiny wt");
    make_model(&wt.join("model.gguf"), &v3);
    let worktree = stdout(&repo.wi_in(&wt, &["git", "diff"]));
    assert_contains(&worktree, &["general.name: \"tiny v1\" -> \"tiny wt\""]);
    assert_contains(
        &repo.ok_in(&wt, &["diff"]),
        &["general.name: \"tiny v1\" -> \"tiny wt\""],
    );
    // The main work tree is unchanged.
    assert_eq!(stdout(&repo.wi(&["git", "diff"])), "");
}

#[test]
fn cached_textconv_is_used_the_second_time() {
    let repo = two_versions(true, Some(&["--textconv"]));
    // Count conversions through a wrapper around the real command.
    let log = repo.tmp.path().join("conversions.log");
    let wrapper = repo.tmp.path().join("textconv.sh");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\necho \"$1\" >> '{}'\nexec '{}' textconv \"$1\"\n",
            log.display(),
            bin().display()
        ),
    )
    .unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    repo.ok(&[
        "config",
        "diff.weight-inspect.textconv",
        wrapper.to_str().unwrap(),
    ]);
    assert_eq!(
        repo.ok(&["config", "diff.weight-inspect.cachetextconv"])
            .trim(),
        "true"
    );

    let first = repo.ok(&["log", "-p"]);
    let conversions = std::fs::read_to_string(&log).unwrap().lines().count();
    // Four distinct blobs (v1 and v2 of both files): each converted once, even within the
    // first run, where v1's blobs appear in both commits.
    assert_eq!(conversions, 4);
    assert_contains(&first, &textconv_changes());
    repo.ok(&["show-ref", "--verify", "refs/notes/textconv/weight-inspect"]);

    let second = repo.ok(&["log", "-p"]);
    assert_eq!(second, first);
    let again = std::fs::read_to_string(&log).unwrap().lines().count();
    assert_eq!(again, conversions, "the second run converted blobs again");
}

#[test]
fn corrupt_and_foreign_blobs_never_fail_git() {
    let repo = Repo::with_lfs(MODEL_PATTERNS);
    install(&repo, &[]);
    make_model(&repo.path("model.gguf"), &gguf_v1());
    std::fs::write(repo.path("notes.safetensors"), "just text, not a model\n").unwrap();
    repo.commit_all("v1");
    // Cut inside the metadata: the magic is there, the header is not.
    let bytes = std::fs::read(repo.path("model.gguf")).unwrap();
    std::fs::write(repo.path("model.gguf"), &bytes[..60]).unwrap();
    // A header that promises an absurd number of tensors.
    let mut hostile = b"GGUF\x03\x00\x00\x00".to_vec();
    hostile.extend_from_slice(&u64::MAX.to_le_bytes());
    hostile.extend_from_slice(&u64::MAX.to_le_bytes());
    std::fs::write(repo.path("hostile.gguf"), &hostile).unwrap();
    std::fs::write(repo.path("notes.safetensors"), "other text\n").unwrap();
    repo.commit_all("corrupt");

    let driver = repo.ok(&["diff", "HEAD~1", "HEAD"]);
    assert_contains(
        &driver,
        &[
            "weight-inspect a/model.gguf b/model.gguf",
            "new: unreadable model file (60 bytes)",
            "weight-inspect /dev/null b/hostile.gguf",
            "old: not a GGUF, safetensors or PyTorch file (23 bytes, sha256:",
        ],
    );
    let textconv = repo.ok(&["log", "-p", "-1"]);
    assert_contains(
        &textconv,
        &[
            "+content: unreadable model file, 60 bytes",
            "+error: ",
            "-content: not a GGUF, safetensors or PyTorch file, 23 bytes, sha256:",
            "+content: not a GGUF, safetensors or PyTorch file, 11 bytes, sha256:",
        ],
    );
    // Error messages do not carry git's temporary file names (they would differ every run).
    assert_lacks(&textconv, &["/tmp/", "git-blob-"]);
    let fast = repo.wi(&["git", "diff", "HEAD~1", "HEAD"]);
    assert_success("weight-inspect git diff", &fast);
    assert_contains(&stdout(&fast), &["unreadable model file", "hostile.gguf"]);
}

#[test]
fn unmerged_paths_and_index_stages() {
    let repo = two_versions(true, Some(&[]));
    repo.ok(&["checkout", "-q", "-b", "other", "HEAD~1"]);
    let mut theirs = gguf_v1();
    theirs["metadata"]["general.name"] = json!("tiny other");
    make_model(&repo.path("model.gguf"), &theirs);
    repo.commit_all("other");
    repo.ok(&["checkout", "-q", "main"]);
    let merge = repo.try_git(&["merge", "other"]);
    assert!(!merge.status.success(), "the merge should conflict");

    // git hands an unmerged path to the external driver alone (one argument).
    let diff = repo.try_git(&["diff", "--cached"]);
    assert_success("git diff --cached during a conflict", &diff);
    assert_contains(
        &stdout(&diff),
        &[
            "unmerged: resolve the conflict first",
            ":2:model.gguf :3:model.gguf",
        ],
    );
    // The combined diff of the work tree (conflict markers in a binary) still succeeds.
    let combined = repo.try_git(&["diff"]);
    assert_success("git diff during a conflict", &combined);
    let sides = repo.wi(&["diff", ":2:model.gguf", ":3:model.gguf"]);
    assert_eq!(sides.status.code(), Some(1), "{}", stderr(&sides));
    assert_contains(&stdout(&sides), &["\"tiny v2\" -> \"tiny other\""]);
}

#[test]
fn driver_colors_for_terminals_and_pagers_and_honors_no_color() {
    let repo = Repo::new();
    make_model(&repo.path("a.gguf"), &gguf_v1());
    make_model(&repo.path("b.gguf"), &gguf_v2());
    let args = [
        "git-diff-driver",
        "model.gguf",
        "a.gguf",
        "1111111111111111111111111111111111111111",
        "100644",
        "b.gguf",
        "2222222222222222222222222222222222222222",
        "100644",
    ];
    let run = |pager: bool, no_color: bool| {
        let mut cmd = std::process::Command::new(bin());
        cmd.args(args).current_dir(&repo.dir);
        repo.isolate(&mut cmd);
        cmd.env_remove("NO_COLOR");
        if pager {
            cmd.env("GIT_PAGER_IN_USE", "true");
        }
        if no_color {
            cmd.env("NO_COLOR", "1");
        }
        let out = cmd.output().unwrap();
        assert_success("git-diff-driver", &out);
        stdout(&out)
    };
    assert!(run(true, false).contains("\x1b["));
    assert!(!run(false, false).contains("\x1b["));
    assert!(!run(true, true).contains("\x1b["));
    assert_contains(
        &run(false, false),
        &["weight-inspect a/model.gguf b/model.gguf"],
    );
    // Wrong argument counts are reported, still without failing git.
    let odd = repo.wi(&["git-diff-driver", "a", "b"]);
    assert_success("git-diff-driver with 2 arguments", &odd);
    assert_contains(
        &stdout(&odd),
        &["expected git's 1, 7 or 9 arguments, got 2"],
    );
}

#[test]
fn pathspecs_limit_the_fast_path() {
    let repo = two_versions(true, None);
    std::fs::create_dir_all(repo.path("sub")).unwrap();
    make_model(&repo.path("sub/deep.safetensors"), &st("x", "float32"));
    repo.commit_all("sub");
    make_model(&repo.path("sub/deep.safetensors"), &st("y", "float32"));
    repo.commit_all("sub2");
    let only = stdout(&repo.wi(&["git", "diff", "HEAD~3", "HEAD", "--", "weights.safetensors"]));
    assert_contains(&only, &["weights.safetensors"]);
    assert_lacks(&only, &["model.gguf", "deep"]);
    let glob = stdout(&repo.wi(&["git", "diff", "HEAD~3", "HEAD", "--", "*.gguf"]));
    assert_contains(&glob, &["model.gguf"]);
    assert_lacks(&glob, &["safetensors"]);
    // Relative to the current directory, as in git.
    let sub = stdout(&repo.wi_in(
        &repo.path("sub"),
        &["git", "diff", "HEAD~1", "HEAD", "--", "."],
    ));
    assert_contains(&sub, &["sub/deep.safetensors", "note: \"x\" -> \"y\""]);
    let outside = stdout(&repo.wi_in(
        &repo.path("sub"),
        &["git", "diff", "HEAD~3", "HEAD", "--", "../model.gguf"],
    ));
    assert_contains(&outside, &["a/model.gguf"]);
    assert_lacks(&outside, &["deep"]);
}

#[test]
fn before_the_first_commit_the_index_is_compared_with_nothing() {
    let repo = Repo::with_lfs(MODEL_PATTERNS);
    make_model(&repo.path("model.gguf"), &gguf_v1());
    repo.ok(&["add", "model.gguf"]);
    let out = repo.wi(&["git", "diff"]);
    assert_success("weight-inspect git diff without commits", &out);
    assert_contains(
        &stdout(&out),
        &["weight-inspect /dev/null b/model.gguf", "new file:"],
    );
    // A revision that does not exist is still an error.
    let bad = repo.wi(&["git", "diff", "nope"]);
    assert_eq!(bad.status.code(), Some(2));
    assert_contains(&stderr(&bad), &["nope: cannot resolve revision"]);
}

/// A GGUF of two tensors; `a` holds `fill`, `b` always 1: two values of `fill` give a
/// weight-only change (the same structure, other bytes).
fn weights(fill: i64) -> Value {
    json!({
        "kind": "gguf",
        "metadata": {"general.name": "tiny"},
        "tensors": [
            {"name": "a", "dtype": "float32", "shape": [4, 8], "fill": fill},
            {"name": "b", "dtype": "float32", "shape": [8], "fill": 1},
        ],
    })
}

/// model.gguf committed twice, the second time with other weights only.
fn weight_only_commit(lfs: bool, install_args: &[&str]) -> Repo {
    let repo = if lfs {
        Repo::with_lfs(MODEL_PATTERNS)
    } else {
        Repo::new()
    };
    install(&repo, install_args);
    make_model(&repo.path("model.gguf"), &weights(1));
    repo.commit_all("v1");
    make_model(&repo.path("model.gguf"), &weights(2));
    repo.commit_all("v2: fine-tuned");
    repo
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

/// The digest and size of `rev:model.gguf`'s bytes: the LFS object's, or the blob's.
fn content_of(repo: &Repo, rev: &str, lfs: bool) -> (String, usize) {
    if lfs {
        let oid = repo.lfs_oid(rev, "model.gguf");
        let size = std::fs::metadata(repo.lfs_object(&oid)).unwrap().len() as usize;
        return (oid, size);
    }
    let blob = repo
        .git(&["cat-file", "blob", &format!("{rev}:model.gguf")])
        .stdout;
    (sha256_hex(&blob), blob.len())
}

/// The `-`/`+` lines of a patch that start with `prefix` after the sign.
fn changed_lines<'a>(patch: &'a str, prefix: &str) -> Vec<&'a str> {
    patch
        .lines()
        .filter(|l| {
            (l.starts_with('-') || l.starts_with('+'))
                && !l.starts_with("---")
                && !l.starts_with("+++")
                && l[1..].starts_with(prefix)
        })
        .collect()
}

#[test]
fn weight_only_commits_are_visible_in_git_log_p_for_lfs_objects_and_plain_blobs() {
    for lfs in [true, false] {
        let repo = weight_only_commit(lfs, &["--textconv"]);
        let (old, size) = content_of(&repo, "HEAD~1", lfs);
        let (new, _) = content_of(&repo, "HEAD", lfs);
        assert_ne!(old, new);
        let expected = [
            format!("-bytes: sha256:{old}, {size} bytes"),
            format!("+bytes: sha256:{new}, {size} bytes"),
        ];
        for args in [
            &["log", "-p", "-1"][..],
            &["show", "HEAD"],
            &["diff", "--no-ext-diff", "HEAD~1", "HEAD"],
        ] {
            let patch = repo.ok(args);
            assert!(
                patch.contains("diff --git a/model.gguf b/model.gguf"),
                "lfs {lfs}, {args:?}:\n{patch}"
            );
            assert_eq!(
                changed_lines(&patch, "bytes: "),
                expected,
                "lfs {lfs}, {args:?}:\n{patch}"
            );
            // Only the bytes changed: the structure is context.
            assert!(patch.contains("\n structural-hash: "), "{patch}");
            assert!(patch.contains("\n weight-inspect textconv 5\n"), "{patch}");
            assert_eq!(changed_lines(&patch, "tensor "), Vec::<&str>::new());
        }
    }
}

#[test]
fn a_clone_without_the_lfs_objects_shows_the_same_weight_only_change() {
    let repo = weight_only_commit(true, &["--textconv"]);
    let with_objects = repo.ok(&["log", "-p", "-1"]);
    let clone = repo.tmp.path().join("clone");
    let out = repo
        .git_cmd_in(
            repo.tmp.path(),
            &[
                "clone",
                "-q",
                repo.dir.to_str().unwrap(),
                clone.to_str().unwrap(),
            ],
        )
        .env("GIT_LFS_SKIP_SMUDGE", "1")
        .output()
        .unwrap();
    assert_success("git clone (skip smudge)", &out);
    let oid = repo.lfs_oid("HEAD", "model.gguf");
    assert!(!clone.join(".git/lfs/objects").join(&oid[0..2]).exists());
    assert_success(
        "install in the clone",
        &repo.wi_in(&clone, &["git", "install", "--textconv"]),
    );
    let out = repo
        .git_cmd_in(&clone, &["log", "-p", "-1"])
        .env("GIT_LFS_SKIP_SMUDGE", "1")
        .output()
        .unwrap();
    assert_success("git log -p in the clone", &out);
    let without_objects = stdout(&out);
    // The objects are not here (a local remote has no LFS server)...
    assert_contains(&without_objects, &[" content: not present locally"]);
    // ...and the change shows, with the very lines the repository with the objects shows.
    let lines = changed_lines(&without_objects, "bytes: ");
    assert_eq!(lines.len(), 2, "{without_objects}");
    assert_eq!(lines, changed_lines(&with_objects, "bytes: "));
    assert!(lines[1].contains(&oid), "{lines:?}");
}

#[test]
fn tensor_hashes_name_the_tensors_a_weight_only_commit_changed() {
    let repo = weight_only_commit(true, &["--textconv", "--tensor-hashes"]);
    let command = repo.ok(&["config", "diff.weight-inspect.textconv"]);
    assert!(
        command.trim_end().ends_with(" textconv --tensor-hashes"),
        "{command}"
    );
    let patch = repo.ok(&["log", "-p", "-1"]);
    let changed = changed_lines(&patch, "tensor ");
    assert_eq!(changed.len(), 2, "{patch}");
    assert!(changed[0].starts_with("-tensor a: f32 [8, 4] 128 bytes, data sha256:"));
    assert!(changed[1].starts_with("+tensor a: f32 [8, 4] 128 bytes, data sha256:"));
    assert_ne!(changed[0][1..], changed[1][1..]);
    // The unchanged tensor is context, with its digest: the SHA-256 of its 8 ones.
    let ones: Vec<u8> = (0..8).flat_map(|_| 1f32.to_le_bytes()).collect();
    let b = format!(
        "\n tensor b: f32 [8] 32 bytes, data sha256:{}\n",
        &sha256_hex(&ones)[..16]
    );
    assert!(patch.contains(&b), "{patch}");

    // A pointer whose object is in the local store renders exactly as the smudged file.
    let pointer = repo.git(&["cat-file", "blob", "HEAD:model.gguf"]).stdout;
    std::fs::write(repo.path("pointer.gguf"), pointer).unwrap();
    let from_pointer = stdout(&repo.wi(&["textconv", "--tensor-hashes", "pointer.gguf"]));
    let from_file = stdout(&repo.wi(&["textconv", "--tensor-hashes", "model.gguf"]));
    assert_eq!(from_pointer, from_file);
    assert!(from_file.contains(&b[2..]), "{from_file}");
    let plain_pointer = stdout(&repo.wi(&["textconv", "pointer.gguf"]));
    let plain_file = stdout(&repo.wi(&["textconv", "model.gguf"]));
    assert_eq!(plain_pointer, plain_file);
    assert!(!plain_file.contains("data sha256:"), "{plain_file}");

    // Installing without the flag switches back (and git's cache, keyed by the command,
    // follows).
    install(&repo, &["--textconv"]);
    let patch = repo.ok(&["log", "-p", "-1"]);
    assert_eq!(changed_lines(&patch, "tensor "), Vec::<&str>::new());
}

#[test]
fn textconv_names_enumerated_values() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("q.gguf");
    make_model(
        &path,
        &json!({"kind": "gguf", "metadata": {"general.file_type": 3, "bert.pooling_type": 2},
                "tensors": [{"name": "a", "dtype": "q4_1", "shape": [32]}]}),
    );
    let out = common::run(&["textconv", path.to_str().unwrap()]);
    assert_eq!(common::code(&out), 0);
    let text = stdout(&out);
    assert!(text.starts_with("weight-inspect textconv 5\n"), "{text}");
    assert_contains(
        &text,
        &[
            "\nmeta general.file_type: u32 = 3 (MOSTLY_Q4_1)\n",
            "\nmeta bert.pooling_type: u32 = 2 (CLS)\n",
        ],
    );
}
