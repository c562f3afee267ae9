//! Headers of LFS objects that a clone does not have, read from a real LFS server on loopback:
//! giftless (whole objects, Range ignored: the 200 path) and a purpose-built server that
//! honors Range (206) and produces faults. Objects are pushed with the real `git lfs`, the
//! clone is made with `GIT_LFS_SKIP_SMUDGE=1`, and every test counts the bytes the server sent.

mod common;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use common::git::{MODEL_PATTERNS, Repo};
use common::lfs_server::LfsServer;
use common::{assert_contains, assert_lacks, assert_success, code, combined, stderr, stdout};
use serde_json::{Value, json};

/// Float32 elements of the big tensor of each model: 8 MiB of data behind small headers.
const BIG: usize = 2 * 1024 * 1024;

fn vocabulary(n: usize, tag: &str) -> Vec<String> {
    (0..n).map(|i| format!("{tag}-token-{i:06}")).collect()
}

/// A GGUF whose header (a 20,000-token vocabulary, ~500 KB) is larger than the first window,
/// so reading it takes more than one range.
fn gguf(version: u32) -> Value {
    json!({
        "kind": "gguf",
        "metadata": {
            "general.name": format!("remote v{version}"),
            "tokenizer.ggml.tokens": vocabulary(20_000, if version == 1 { "a" } else { "b" }),
        },
        "tensors": [
            {"name": "big.weight", "dtype": "float32", "shape": [BIG / 1024, 1024]},
            {"name": format!("v{version}.weight"), "dtype": "float32", "shape": [4]},
        ],
    })
}

fn safetensors(version: u32) -> Value {
    let dtype = if version == 1 { "float32" } else { "float16" };
    json!({
        "kind": "safetensors",
        "metadata": {"note": format!("v{version}")},
        "tensors": [
            {"name": "big", "dtype": dtype, "shape": [BIG / 1024, 1024]},
            {"name": "small", "dtype": "float32", "shape": [3]},
        ],
    })
}

/// A bare repository with two commits of two LFS models, whose objects are in a giftless
/// storage directory (`storage/org/repo/OID`), pushed there by `git push` with the real git-lfs.
/// Shared by the tests of this process; it lives in a directory named by the process id, and
/// the directories of processes that have ended are removed (a static is never dropped).
struct Published {
    bare: PathBuf,
    storage: PathBuf,
}

fn published() -> &'static Published {
    static PUBLISHED: OnceLock<Published> = OnceLock::new();
    PUBLISHED.get_or_init(|| {
        let parent = std::env::temp_dir().join("weight-inspect-remote-lfs");
        for entry in std::fs::read_dir(&parent).into_iter().flatten().flatten() {
            let pid = entry.file_name().to_string_lossy().into_owned();
            if !Path::new("/proc").join(&pid).exists() {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
        let dir = parent.join(std::process::id().to_string());
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let storage = dir.join("lfs-storage");
        let bare = dir.join("bare.git");

        let source = Repo::with_lfs(MODEL_PATTERNS);
        source.fixtures(json!({"m/model.gguf": gguf(1), "m/weights.safetensors": safetensors(1)}));
        source.commit_all("v1");
        source.fixtures(json!({"m/model.gguf": gguf(2), "m/weights.safetensors": safetensors(2)}));
        source.commit_all("v2");
        source.ok(&["init", "-q", "--bare", "-b", "main", bare.to_str().unwrap()]);
        let server = LfsServer::giftless(&storage, true);
        source.git(&["remote", "add", "origin", bare.to_str().unwrap()]);
        // The token as the password of giftless's `_jwt` user: git-lfs sends it to the batch
        // endpoint and the transfer's own headers to each upload.
        let with_token = server.lfs_url().replacen(
            "http://",
            &format!("http://_jwt:{}@", server.token("write")),
            1,
        );
        source.git(&["config", "lfs.url", &with_token]);
        source.git(&["push", "-q", "origin", "main"]);
        let pushed = std::fs::read_dir(storage.join("org/repo")).unwrap().count();
        assert_eq!(pushed, 4, "git lfs pushed every object to giftless");
        Published { bare, storage }
    })
}

/// A clone of the published repository without LFS content (its own HOME), whose LFS
/// server is to be configured by the test.
fn clone() -> Repo {
    let repo = Repo::new();
    std::fs::remove_dir_all(&repo.dir).unwrap();
    let out = repo
        .git_cmd_in(
            repo.tmp.path(),
            &[
                "clone",
                "-q",
                published().bare.to_str().unwrap(),
                repo.dir.to_str().unwrap(),
            ],
        )
        .env("GIT_LFS_SKIP_SMUDGE", "1")
        .output()
        .unwrap();
    assert_success("git clone", &out);
    assert!(
        repo.read("m/model.gguf")
            .starts_with("version https://git-lfs"),
        "the clone has pointers, not content"
    );
    repo
}

fn object_size(repo: &Repo, rev: &str, path: &str) -> u64 {
    let pointer = repo.ok(&["cat-file", "-p", &format!("{rev}:{path}")]);
    pointer
        .lines()
        .find_map(|l| l.strip_prefix("size "))
        .unwrap()
        .parse()
        .unwrap()
}

fn cache_dir(repo: &Repo) -> PathBuf {
    repo.dir.join(".git/weight-inspect/lfs-headers-v2")
}

fn cached_files(repo: &Repo) -> usize {
    walk(&cache_dir(repo))
}

fn walk(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .map(|e| {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                walk(&e.path())
            } else {
                1
            }
        })
        .sum()
}

const DIFF_LINES: &[&str] = &[
    "weight-inspect a/m/model.gguf b/m/model.gguf",
    "\"remote v1\" -> \"remote v2\"",
    "weight-inspect a/m/weights.safetensors b/m/weights.safetensors",
    "note: \"v1\" -> \"v2\"",
    "header of LFS object sha256:",
    "read from the LFS server, not verified",
];

#[test]
fn git_diff_reads_headers_from_giftless_with_the_checkout_token() {
    let repo = clone();
    let server = LfsServer::giftless(&published().storage, true);
    repo.git(&["config", "lfs.url", &server.lfs_url()]);
    // As actions/checkout writes it for the job token.
    let url_key = format!("http.{}/.extraheader", server.origin());
    let header = format!("Authorization: Bearer {}", server.token("read"));
    repo.git(&["config", &url_key, &header]);

    let out = repo.wi(&["git", "diff", "HEAD~1", "HEAD"]);
    assert_success("weight-inspect git diff", &out);
    let text = stdout(&out);
    assert_contains(&text, DIFF_LINES);
    assert_lacks(&text, &["not present locally", &server.token("read")]);

    // One batch request for all four objects; giftless ignores Range, so each object was
    // streamed from its start and dropped after the header.
    let batches = server.requests_to("/objects/batch");
    assert_eq!(batches.len(), 1, "{batches:#?}");
    let objects_total: u64 = ["HEAD~1", "HEAD"]
        .iter()
        .flat_map(|rev| {
            ["m/model.gguf", "m/weights.safetensors"].map(|p| object_size(&repo, rev, p))
        })
        .sum();
    let sent = server.bytes_sent();
    assert!(
        sent < objects_total / 4,
        "giftless sent {sent} bytes of {objects_total}: more than headers"
    );
    assert_eq!(cached_files(&repo), 4);

    // The second run is served from the cache: the server is gone.
    drop(server);
    let again = repo.wi(&["git", "diff", "HEAD~1", "HEAD"]);
    assert_success("weight-inspect git diff (cached)", &again);
    assert_eq!(stdout(&again), text);

    // JSON says where each header came from.
    let json_out = repo.wi(&["git", "diff", "--json", "HEAD~1", "HEAD"]);
    let report: Value = serde_json::from_slice(&json_out.stdout).unwrap();
    assert_eq!(report["files"][0]["old"]["header_source"], "lfs-server");
    assert_eq!(report["files"][0]["old"]["kind"], "model");
}

/// giftless with its JWT as the password of user `_jwt`, from git's credential store.
#[test]
fn giftless_takes_the_token_from_a_credential_helper() {
    let repo = clone();
    let server = LfsServer::giftless(&published().storage, true);
    repo.git(&["config", "lfs.url", &server.lfs_url()]);
    repo.git(&["config", "credential.helper", "store"]);
    let stored = server
        .origin()
        .replace("http://", &format!("http://_jwt:{}@", server.token("read")));
    std::fs::write(repo.home.join(".git-credentials"), format!("{stored}\n")).unwrap();
    let out = repo.wi(&["git", "diff", "HEAD~1", "HEAD"]);
    assert_success("git diff with a stored credential", &out);
    assert_contains(&stdout(&out), DIFF_LINES);
    assert_lacks(&combined(&out), &[&server.token("read")]);
    // A 401, then the helper's credential: two batch requests, the second accepted.
    let statuses: Vec<Value> = server
        .requests_to("/objects/batch")
        .iter()
        .map(|r| r["status"].clone())
        .collect();
    assert_eq!(statuses, [json!(401), json!(200)]);
}

#[test]
fn range_reads_download_only_the_headers() {
    let repo = clone();
    let server = LfsServer::range(&published().storage, "none", None);
    repo.git(&["config", "remote.origin.lfsurl", &server.lfs_url()]);
    let out = repo.wi(&["git", "diff", "HEAD~1", "HEAD"]);
    assert_success("weight-inspect git diff", &out);
    assert_contains(&stdout(&out), DIFF_LINES);

    let downloads = server.requests_to("/objects/org/repo/");
    assert!(
        downloads.iter().all(|r| r["status"] == 206),
        "{downloads:#?}"
    );
    // The GGUF headers (~500 KB) take more than the first 256 KiB window.
    assert!(downloads.len() > 4, "{downloads:#?}");
    let sent = server.bytes_sent();
    // Four headers: two GGUF vocabularies of ~500 KB and two small safetensors headers, each
    // read past its end by less than 1 MiB.
    assert!(sent < 4 << 20, "sent {sent} bytes");
    assert!(sent > 2 * 400_000, "sent {sent} bytes");
}

/// git itself, smudging skipped, hands both drivers pointers: they read the headers remotely.
#[test]
fn git_drivers_read_absent_objects_from_the_server() {
    let repo = clone();
    let server = LfsServer::range(&published().storage, "none", None);
    // The server as the committed .lfsconfig names it (git-lfs reads HEAD's when the work
    // tree has none).
    repo.write(
        ".lfsconfig",
        format!("[lfs]\n\turl = {}\n", server.lfs_url()),
    );
    repo.commit_all("lfsconfig");
    std::fs::remove_file(repo.path(".lfsconfig")).unwrap();
    let install = repo.wi(&["git", "install"]);
    assert_success("weight-inspect git install", &install);

    let skip = |args: &[&str]| {
        let out = repo
            .git_cmd_in(&repo.dir, args)
            .env("GIT_LFS_SKIP_SMUDGE", "1")
            .output()
            .unwrap();
        assert_success(&format!("git {args:?}"), &out);
        stdout(&out)
    };
    let external = skip(&["diff", "HEAD~2", "HEAD~1"]);
    assert_contains(&external, DIFF_LINES);
    let textconv = skip(&[
        "-c",
        "diff.weight-inspect.cachetextconv=false",
        "diff",
        "--no-ext-diff",
        "HEAD~2",
        "HEAD~1",
        "--",
        "m/model.gguf",
    ]);
    assert_contains(
        &textconv,
        &[
            "header-source: LFS server (not verified against the oid)",
            "-meta general.name: string = \"remote v1\"",
            "+meta general.name: string = \"remote v2\"",
            "-bytes: sha256:",
            "+bytes: sha256:",
        ],
    );
    // A header read from the server is judged complete by the pointer's size.
    assert_lacks(&textconv, &["not present locally", "incomplete"]);
    // Tensor data digests need the model's bytes, which are not here.
    let hashes = skip(&[
        "-c",
        "diff.weight-inspect.cachetextconv=false",
        "-c",
        "diff.weight-inspect.textconv=weight-inspect textconv --tensor-hashes",
        "diff",
        "--no-ext-diff",
        "HEAD~2",
        "HEAD~1",
        "--",
        "m/model.gguf",
    ]);
    assert_contains(
        &hashes,
        &[" tensor-hashes: none (the model's data is not on this machine)"],
    );
    assert_lacks(&hashes, &["data sha256:"]);
}

/// `inspect`, `id` and `diff` on `REV:path` and on a work-tree pointer; the server derived
/// from the remote's URL; `--offline` and `weight-inspect.remote = false` keep to the machine.
#[test]
fn core_commands_read_revisions_and_pointer_files_remotely() {
    let repo = clone();
    let server = LfsServer::range(&published().storage, "none", None);
    repo.git(&[
        "remote",
        "set-url",
        "origin",
        &format!("{}/org/repo", server.origin()),
    ]);

    let offline = repo.wi(&["--offline", "inspect", "HEAD:m/model.gguf"]);
    assert_eq!(code(&offline), 2, "{}", combined(&offline));
    assert_contains(
        &stderr(&offline),
        &["HEAD:m/model.gguf", "not present locally"],
    );
    let off = repo.wi(&["id", "m/weights.safetensors"]);
    assert_eq!(code(&off), 0, "{}", combined(&off));
    let mut disabled = repo.command(common::bin());
    disabled
        .args(["id", "HEAD~1:m/model.gguf"])
        .env("GIT_CONFIG_COUNT", "1")
        .env("GIT_CONFIG_KEY_0", "weight-inspect.remote")
        .env("GIT_CONFIG_VALUE_0", "false");
    let disabled = disabled.output().unwrap();
    assert_eq!(code(&disabled), 2, "{}", combined(&disabled));
    assert_contains(&stderr(&disabled), &["not present locally"]);
    assert_eq!(
        cached_files(&repo),
        1,
        "only the pointer file's header was read"
    );

    let inspect = repo.wi(&["inspect", "HEAD~1:m/model.gguf"]);
    assert_success("inspect REV:path", &inspect);
    assert_contains(&stdout(&inspect), &["format: gguf", "remote v1"]);
    assert_contains(
        &stderr(&inspect),
        &["read from the LFS server, not verified"],
    );

    let diff = repo.wi(&[
        "diff",
        "HEAD~1:m/weights.safetensors",
        "m/weights.safetensors",
    ]);
    assert_eq!(code(&diff), 1, "{}", combined(&diff));
    assert_contains(&stdout(&diff), &["\"v1\" -> \"v2\""]);

    // The identity equals the one of the full object, fetched the way git-lfs fetches it.
    let remote_id = stdout(&repo.wi(&["id", "HEAD:m/model.gguf"]));
    let fetch = repo
        .git_cmd_in(
            &repo.dir,
            &[
                "-c",
                &format!("lfs.url={}", server.lfs_url()),
                "lfs",
                "pull",
            ],
        )
        .output()
        .unwrap();
    assert_success("git lfs pull", &fetch);
    let local_id = repo.wi(&["id", "HEAD:m/model.gguf"]);
    assert_eq!(stdout(&local_id), remote_id);
    assert_lacks(&stderr(&local_id), &["LFS server"]);
}

/// The token as each credential source gives it; without one, a clear 401 (exit 2 for a
/// command, a note inside `git diff`); no secret is ever printed or sent to another host.
#[test]
fn credentials_come_from_extra_headers_helpers_and_urls() {
    let repo = clone();
    let server = LfsServer::range(&published().storage, "auth", None);
    let token = server.token("read");
    repo.git(&["config", "lfs.url", &server.lfs_url()]);

    let refused = repo.wi(&["inspect", "HEAD:m/model.gguf"]);
    assert_eq!(code(&refused), 2, "{}", combined(&refused));
    assert_contains(
        &stderr(&refused),
        &["HEAD:m/model.gguf", "HTTP 401", "no valid credentials"],
    );
    let noted = repo.wi(&["git", "diff", "HEAD~1", "HEAD"]);
    assert_success("git diff without credentials", &noted);
    assert_contains(
        &stdout(&noted),
        &["could not be read from the LFS server", "HTTP 401"],
    );
    assert_eq!(cached_files(&repo), 0);

    // git's credential store: a wrong password is rejected (and erased), a right one works.
    repo.git(&["config", "credential.helper", "store"]);
    let store = repo.home.join(".git-credentials");
    std::fs::write(
        &store,
        format!(
            "{}\n",
            server.origin().replace("http://", "http://_jwt:wrong@")
        ),
    )
    .unwrap();
    let wrong = repo.wi(&["id", "HEAD:m/model.gguf"]);
    assert_eq!(code(&wrong), 2, "{}", combined(&wrong));
    assert_eq!(
        std::fs::read_to_string(&store).unwrap().trim(),
        "",
        "rejected credentials are erased"
    );
    let stored = server
        .origin()
        .replace("http://", &format!("http://_jwt:{token}@"));
    std::fs::write(&store, format!("{stored}\n")).unwrap();
    let helped = repo.wi(&["id", "HEAD:m/model.gguf"]);
    assert_success("id with a stored credential", &helped);
    assert_lacks(&combined(&helped), &[&token]);
    // With lfs.<url>.access = basic the helper is asked before the first request: no 401.
    let access_key = format!("lfs.{}.access", server.lfs_url());
    repo.git(&["config", &access_key, "basic"]);
    let before = server.requests_to("/objects/batch").len();
    let eager = repo.wi(&["id", "HEAD:m/weights.safetensors"]);
    assert_success("id with lfs.<url>.access = basic", &eager);
    let batches = server.requests_to("/objects/batch");
    assert_eq!(batches.len(), before + 1, "{batches:#?}");
    assert_eq!(batches.last().unwrap()["status"], 200);
    repo.git(&["config", "--unset", &access_key]);
    repo.git(&["config", "--unset", "credential.helper"]);

    // http.<url>.extraHeader, as actions/checkout writes it; credentials in lfs.url.
    repo.git(&[
        "config",
        &format!("http.{}/.extraheader", server.origin()),
        &format!("Authorization: Bearer {token}"),
    ]);
    let headed = repo.wi(&["id", "HEAD~1:m/model.gguf"]);
    assert_success("id with an extra header", &headed);
    repo.git(&[
        "config",
        "--unset",
        &format!("http.{}/.extraheader", server.origin()),
    ]);
    let in_url = server
        .lfs_url()
        .replace("http://", &format!("http://_jwt:{token}@"));
    repo.git(&["config", "lfs.url", &in_url]);
    let url_out = repo.wi(&["id", "HEAD~1:m/weights.safetensors"]);
    assert_success("id with credentials in lfs.url", &url_out);
    assert_lacks(&combined(&url_out), &[&token]);

    // Object downloads carry only the headers the batch answer gave for them.
    for request in server.requests_to("/objects/org/repo/") {
        let auth = request["headers"]["authorization"]
            .as_str()
            .unwrap_or_default();
        assert_eq!(
            auth,
            format!("Bearer {}", server.token("href")),
            "{request:#}"
        );
    }
}

/// Faults a real server cannot be made to produce: each ends in a message naming the file
/// and what went wrong, never a hang, and nothing wrong is cached.
#[test]
fn server_faults_are_clear_errors_and_nothing_is_cached() {
    let repo = clone();
    repo.git(&["config", "lfs.activitytimeout", "1"]);
    let file = "HEAD:m/weights.safetensors";
    let cases: &[(&str, &[&str])] = &[
        ("missing", &["not on the LFS server (error 404"]),
        ("garbage", &["not a GGUF, safetensors or PyTorch file"]),
        (
            "truncated",
            &["reading the body after 131072 of 262144 bytes"],
        ),
        ("wrong-range", &["Content-Range bytes 1-"]),
        ("416", &["HTTP 416"]),
        ("expired", &["HTTP 403", "Request has expired"]),
        (
            "huge-length",
            &["the server says the file has 1000000000000000 bytes"],
        ),
        ("stall", &["timed out"]),
    ];
    for (fault, needles) in cases {
        let server = LfsServer::range(&published().storage, fault, None);
        repo.git(&["config", "lfs.url", &server.lfs_url()]);
        // Each fault ends the read with its own error (a stall with "timed out"): the error,
        // not a duration, shows that nothing waited for the server to finish.
        let out = repo.wi(&["inspect", file]);
        assert_eq!(code(&out), 2, "{fault}: {}", combined(&out));
        let err = stderr(&out);
        assert_contains(&err, &[file]);
        assert_contains(&err, needles);
        assert_lacks(&err, &["panicked", server.token("href").as_str()]);
        assert_eq!(cached_files(&repo), 0, "{fault}: something was cached");
        // Inside git diff the same is a note, and the command succeeds.
        if *fault == "missing" {
            let diff = repo.wi(&["git", "diff", "HEAD~1", "HEAD"]);
            assert_success("git diff with objects missing on the server", &diff);
            assert_contains(&stdout(&diff), &["not on the LFS server"]);
        }
    }

    // 500 on the batch and 503 on the first download, then success: retried.
    let flaky = LfsServer::range(&published().storage, "flaky", None);
    repo.git(&["config", "lfs.url", &flaky.lfs_url()]);
    let out = repo.wi(&["inspect", file]);
    assert_success("inspect through retries", &out);
    assert_eq!(flaky.requests_to("/objects/batch").len(), 2);
    assert_eq!(cached_files(&repo), 1);
}

/// A redirect or an href to another origin gets none of the endpoint's credentials.
#[test]
fn credentials_never_reach_another_host() {
    let other = LfsServer::range(&published().storage, "none", None);
    for fault in ["redirect", "other-href"] {
        let repo = clone();
        let server = LfsServer::range(&published().storage, fault, Some(&other.origin()));
        repo.git(&["config", "lfs.url", &server.lfs_url()]);
        repo.git(&[
            "config",
            &format!("http.{}/.extraheader", server.origin()),
            "X-Endpoint-Secret: endpoint-secret-3141",
        ]);
        let out = repo.wi(&["id", "HEAD:m/model.gguf"]);
        assert_success(fault, &out);
        let batch = &server.requests_to("/objects/batch")[0];
        assert_eq!(
            batch["headers"]["x-endpoint-secret"],
            "endpoint-secret-3141"
        );
        let at_other = other.stats()["requests"].to_string();
        assert!(
            at_other.contains("/objects/org/repo/"),
            "{fault}: {at_other}"
        );
        assert!(
            !at_other.contains("endpoint-secret-3141"),
            "{fault}: {at_other}"
        );
        if fault == "redirect" {
            // The href's own token was for the server that redirected, not for the other.
            assert!(!at_other.contains(&other.token("href")), "{at_other}");
        }
    }
}

/// Any http(s) URL of a model file is a side: only its header is downloaded.
#[test]
fn urls_are_inputs() {
    let repo = clone();
    let server = LfsServer::range(&published().storage, "none", None);
    let oid = repo.lfs_oid("HEAD", "m/model.gguf");
    let url = format!("{}/objects/org/repo/{oid}", server.origin());
    let out = repo.wi(&["inspect", &url, "--header", "X-Test: yes"]);
    assert_success("inspect URL", &out);
    assert_contains(&stdout(&out), &["format: gguf", "remote v2"]);
    assert_contains(&stderr(&out), &["read from the server"]);
    let requests = server.requests_to(&oid);
    assert!(requests.iter().all(|r| r["headers"]["x-test"] == "yes"));
    assert!(
        requests
            .iter()
            .all(|r| r["headers"]["authorization"].is_null())
    );
    assert!(server.bytes_sent() < 2 << 20);

    let old_oid = repo.lfs_oid("HEAD~1", "m/model.gguf");
    let old_url = format!("{}/objects/org/repo/{old_oid}", server.origin());
    let diff = repo.wi(&["diff", &old_url, &url]);
    assert_eq!(code(&diff), 1, "{}", combined(&diff));
    assert_contains(&stdout(&diff), &["\"remote v1\" -> \"remote v2\""]);

    let missing = repo.wi(&[
        "id",
        &format!("{}/objects/org/repo/{}", server.origin(), "0".repeat(64)),
    ]);
    assert_eq!(code(&missing), 2);
    assert_contains(&stderr(&missing), &["HTTP 404"]);
}

/// The Action's run step on a checkout without LFS content (`lfs: false`, the default): the
/// token input reaches the LFS server, the summary shows structural diffs, and the policy
/// judges the head side's structure.
#[test]
fn the_action_and_the_policy_work_without_lfs_content() {
    let repo = clone();
    let server = LfsServer::range(&published().storage, "auth", None);
    repo.git(&[
        "remote",
        "set-url",
        "origin",
        &format!("{}/org/repo", server.origin()),
    ]);
    repo.write(
        ".weight-inspect.toml",
        "[[rules]]\npaths = [\"m/*.safetensors\"]\nallowed_dtypes = [\"F32\"]\n",
    );
    let temp = repo.tmp.path().join("runner-temp");
    std::fs::create_dir_all(&temp).unwrap();
    let summary = temp.join("summary.md");
    let out = repo
        .command(common::repo_root().join("scripts/action/run.sh"))
        .env("WI_BIN", common::bin())
        .env("WI_BASE", "HEAD~1")
        .env("WI_HEAD", "HEAD")
        .env("WI_POLICY", ".weight-inspect.toml")
        .env("WI_FAIL_ON", "never")
        .env("WI_TOKEN", server.token("read"))
        .env("WI_SERVER_URL", server.origin())
        .env("RUNNER_TEMP", &temp)
        .env("GITHUB_STEP_SUMMARY", &summary)
        .output()
        .unwrap();
    assert_success("scripts/action/run.sh", &out);
    let text = std::fs::read_to_string(&summary).unwrap();
    assert_contains(
        &text,
        &[
            "m/model.gguf",
            "m/weights.safetensors",
            "allowed_dtypes",
            "(LFS server)",
        ],
    );
    assert_lacks(
        &text,
        &[
            "structure not compared",
            "not fetched",
            &server.token("read"),
        ],
    );
    assert_lacks(&combined(&out), &[&server.token("read")]);

    // `check` on the work tree's pointer files, with the token as actions/checkout leaves it.
    repo.git(&[
        "config",
        &format!("http.{}/.extraheader", server.origin()),
        &format!("Authorization: Bearer {}", server.token("read")),
    ]);
    let check = repo.wi(&["check", "m/weights.safetensors"]);
    assert_eq!(code(&check), 1, "{}", combined(&check));
    assert_contains(
        &stdout(&check),
        &[
            "m/weights.safetensors: allowed_dtypes",
            "found f16 in 1 tensor (big)",
        ],
    );
}

/// https: the system's roots do not know a self-signed server; `http.sslCAInfo` or
/// `GIT_SSL_CAINFO` names the one certificate to trust.
#[test]
fn https_servers_are_trusted_through_git_ca_settings() {
    let repo = clone();
    let dir = repo.tmp.path();
    let (ca, cert, key) = (
        dir.join("ca.pem"),
        dir.join("cert.pem"),
        dir.join("key.pem"),
    );
    let openssl = |args: &[&str]| {
        let out = std::process::Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("openssl is required by this test: run the tests with scripts/test");
        assert_success(&format!("openssl {args:?}"), &out);
    };
    // A certificate authority, and a server certificate it signs for 127.0.0.1.
    openssl(
        &[
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        ]
        .into_iter()
        .chain([
            "-subj",
            "/CN=test CA",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
        ])
        .collect::<Vec<_>>(),
    );
    openssl(
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=127.0.0.1",
        ]
        .into_iter()
        .chain(["-keyout", "key.pem", "-out", "server.csr"])
        .collect::<Vec<_>>(),
    );
    std::fs::write(
        dir.join("server.ext"),
        "basicConstraints=CA:FALSE\nsubjectAltName=IP:127.0.0.1\n",
    )
    .unwrap();
    openssl(
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
        ]
        .into_iter()
        .chain([
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "server.ext",
            "-out",
            "cert.pem",
        ])
        .collect::<Vec<_>>(),
    );
    let server = LfsServer::range_tls(&published().storage, &cert, &key);
    repo.git(&["config", "lfs.url", &server.lfs_url()]);
    assert!(server.lfs_url().starts_with("https://"));

    let untrusted = repo.wi(&["id", "HEAD:m/model.gguf"]);
    assert_eq!(code(&untrusted), 2, "{}", combined(&untrusted));
    assert_contains(
        &stderr(&untrusted),
        &["HEAD:m/model.gguf", "TLS: ", "http.sslCAInfo"],
    );

    let mut with_env = repo.command(common::bin());
    with_env
        .args(["id", "HEAD:m/model.gguf"])
        .env("GIT_SSL_CAINFO", &ca);
    assert_success("id with GIT_SSL_CAINFO", &with_env.output().unwrap());
    std::fs::remove_dir_all(cache_dir(&repo)).unwrap();
    repo.git(&["config", "http.sslCAInfo", ca.to_str().unwrap()]);
    let trusted = repo.wi(&["id", "HEAD:m/model.gguf"]);
    assert_success("id with http.sslCAInfo", &trusted);
}

/// SSH remotes: the server and its header come from `git-lfs-authenticate` over the ssh
/// command git uses (here `GIT_SSH_COMMAND`, a stand-in for ssh that answers as an LFS host's
/// `git-lfs-authenticate` does and records how it was called).
#[test]
fn ssh_remotes_authenticate_with_git_lfs_authenticate() {
    let repo = clone();
    let server = LfsServer::range(&published().storage, "auth", None);
    let dir = repo.tmp.path();
    let script = dir.join("fake-ssh");
    let answer = json!({
        "href": server.lfs_url(),
        "header": {"Authorization": format!("Bearer {}", server.token("read"))},
        "expires_in": 600,
    });
    std::fs::write(dir.join("answer.json"), answer.to_string()).unwrap();
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$@\" > '{args}'\ncat '{answer}'\n",
            args = dir.join("args").display(),
            answer = dir.join("answer.json").display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    // The https URL derived from this remote does not exist: only the ssh answer can work.
    repo.git(&[
        "remote",
        "set-url",
        "origin",
        "ssh://git@lfs.invalid:2222/org/repo.git",
    ]);

    let mut id = repo.command(common::bin());
    id.args(["id", "HEAD:m/model.gguf"])
        .env("GIT_SSH_COMMAND", &script);
    let out = id.output().unwrap();
    assert_success("id over an SSH remote", &out);
    let args = std::fs::read_to_string(dir.join("args")).unwrap();
    assert_eq!(
        args.lines().collect::<Vec<_>>(),
        [
            "-p",
            "2222",
            "git@lfs.invalid",
            "git-lfs-authenticate '/org/repo.git' download"
        ]
    );
    assert_lacks(&combined(&out), &[&server.token("read")]);
}

/// Proxies: `http.proxy`, and `HTTPS_PROXY`/`HTTP_PROXY` with `NO_PROXY`. The server's name
/// does not resolve; only the proxy (which tunnels it to loopback) reaches it.
#[test]
fn proxies_from_git_config_and_the_environment() {
    let repo = clone();
    let server = LfsServer::range(&published().storage, "none", None);
    let proxy = LfsServer::proxy();
    let unresolvable = format!("http://lfs.invalid:{}/org/repo.git/info/lfs", server.port);
    repo.git(&["config", "lfs.url", &unresolvable]);

    let direct = repo.wi(&["id", "HEAD:m/model.gguf"]);
    assert_eq!(code(&direct), 2, "{}", combined(&direct));
    assert_contains(&stderr(&direct), &["http://lfs.invalid:"]);

    repo.git(&["config", "http.proxy", &proxy.origin()]);
    let through = repo.wi(&["id", "HEAD:m/model.gguf"]);
    assert_success("id through http.proxy", &through);
    let tunnels = proxy.stats()["requests"].to_string();
    assert!(
        tunnels.contains(&format!("lfs.invalid:{}", server.port)),
        "{tunnels}"
    );
    repo.git(&["config", "--unset", "http.proxy"]);
    std::fs::remove_dir_all(cache_dir(&repo)).unwrap();

    let mut env_proxy = repo.command(common::bin());
    env_proxy
        .args(["id", "HEAD:m/weights.safetensors"])
        .env("HTTP_PROXY", proxy.origin());
    assert_success("id through HTTP_PROXY", &env_proxy.output().unwrap());

    // NO_PROXY sends the request direct, where the name does not resolve.
    let mut bypassed = repo.command(common::bin());
    bypassed
        .args(["id", "HEAD~1:m/weights.safetensors"])
        .env("HTTP_PROXY", proxy.origin())
        .env("NO_PROXY", "lfs.invalid");
    let bypassed = bypassed.output().unwrap();
    assert_eq!(code(&bypassed), 2, "{}", combined(&bypassed));
}

/// A server that trickles the body, each byte well within the activity timeout: the deadline
/// per object, then the one per command, ends the reads. The file is reported unreadable,
/// `git diff` and git's external driver succeed, and nothing is cached.
#[test]
fn trickling_servers_meet_the_deadlines() {
    let repo = clone();
    let server = LfsServer::range(&published().storage, "trickle", None);
    repo.git(&["config", "lfs.url", &server.lfs_url()]);
    repo.git(&["config", "lfs.activitytimeout", "30"]);
    // (config key, a deadline long enough to get past the batch request, the other one)
    for (key, other) in [
        (
            "weight-inspect.lfsObjectDeadline",
            "weight-inspect.lfsDeadline",
        ),
        (
            "weight-inspect.lfsDeadline",
            "weight-inspect.lfsObjectDeadline",
        ),
    ] {
        repo.git(&["config", key, "2"]);
        repo.git(&["config", other, "600"]);
        let id = repo.wi(&["id", "HEAD:m/model.gguf"]);
        assert_eq!(code(&id), 2, "{key}: {}", combined(&id));
        assert_contains(
            &stderr(&id),
            &[
                "HEAD:m/model.gguf",
                "deadline",
                "weight-inspect.lfsDeadline",
            ],
        );
        let diff = repo.wi(&["git", "diff", "HEAD~1", "HEAD"]);
        assert_success(&format!("git diff past {key}"), &diff);
        assert_contains(
            &stdout(&diff),
            &["could not be read from the LFS server", "deadline"],
        );
        let external = repo
            .git_cmd_in(&repo.dir, &["diff", "HEAD~1", "HEAD"])
            .env("GIT_LFS_SKIP_SMUDGE", "1")
            .output()
            .unwrap();
        assert_success(&format!("git's external driver past {key}"), &external);
        // Every read above ended by the 2 s deadline, as each names it: a read of the whole
        // trickle (256 KiB at 20 bytes a second) would take hours and time the test out.
        assert_eq!(cached_files(&repo), 0, "{key}: something was cached");
        repo.git(&["config", "--unset", key]);
        repo.git(&["config", "--unset", other]);
    }
}

/// A 401 from another origin after a redirect is not the endpoint's verdict on the
/// credential it was given: the stored credential is kept (`git credential reject` would
/// erase it), and the other origin never sees it.
#[test]
fn a_refusal_from_another_origin_keeps_the_credential() {
    let other = LfsServer::range(&published().storage, "deny", None);
    let server = LfsServer::range(&published().storage, "auth-redirect", Some(&other.origin()));
    let repo = clone();
    repo.git(&["config", "lfs.url", &server.lfs_url()]);
    repo.git(&["config", "credential.helper", "store"]);
    let token = server.token("read");
    let store = repo.home.join(".git-credentials");
    let stored = server
        .origin()
        .replace("http://", &format!("http://_jwt:{token}@"));
    std::fs::write(&store, format!("{stored}\n")).unwrap();

    let out = repo.wi(&["id", "HEAD:m/model.gguf"]);
    assert_eq!(code(&out), 2, "{}", combined(&out));
    assert_contains(&stderr(&out), &["HEAD:m/model.gguf", "HTTP 401"]);
    assert_lacks(&combined(&out), &[&token]);
    let batches = server.requests_to("/objects/batch");
    assert_eq!(
        batches
            .iter()
            .map(|r| r["status"].clone())
            .collect::<Vec<_>>(),
        [json!(401), json!(307)],
        "{batches:#?}"
    );
    let at_other = other.requests_to("/objects/batch");
    assert_eq!(at_other.len(), 1, "{at_other:#?}");
    assert!(!at_other[0].to_string().contains(&token), "{at_other:#?}");
    assert_eq!(
        std::fs::read_to_string(&store).unwrap().trim(),
        stored,
        "a refusal from another origin erased the endpoint's credential"
    );
}
