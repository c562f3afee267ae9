//! Bounded memory and time for hostile inputs (issue 32): pickles that amplify their own size,
//! shared structures reached by many paths, split-GGUF part counts, broadcast views, names
//! that forge workflow commands, and zip members that hide from review. Inputs come from
//! tests/common/hostile_budgets.py (gguf-py, numpy, and hostile_pytorch.py's torch stand-ins);
//! peak memory is the child's getrusage, never assumed; nothing asserts wall-clock time.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use common::{bin, python, repo_root};

const MB: u64 = 1_000_000;
const MIB: u64 = 1 << 20;

/// The cases, written once for every test of this binary.
fn cases() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        // In the target's scratch directory, rewritten by each run (about 200 MB).
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("hostile_budgets");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let out = Command::new(python())
            .arg(repo_root().join("tests/common/hostile_budgets.py"))
            .arg(&dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "hostile_budgets.py: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        dir
    })
}

fn case(name: &str) -> String {
    cases().join(name).to_str().unwrap().to_owned()
}

/// Runs weight-inspect under Python's getrusage: exit code, stdout, stderr, peak RSS in bytes.
fn run_measured(args: &[&str]) -> (Option<i32>, String, String, u64) {
    const MEASURE: &str = r"
import resource, subprocess, sys
r = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
sys.stderr.buffer.write(r.stderr)
sys.stdout.buffer.write(r.stdout)
print()
print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
";
    let out = Command::new(python())
        .arg("-c")
        .arg(MEASURE)
        .arg(bin())
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (stdout, last) = text.trim_end().rsplit_once('\n').unwrap_or(("", &text));
    let mut fields = last.split_whitespace();
    let code = fields.next().and_then(|c| c.parse().ok());
    let kib: u64 = fields.next().unwrap().parse().unwrap();
    (
        code,
        stdout.to_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        kib * 1024,
    )
}

/// A pickle's budget (docs/pytorch.md): 32 bytes per byte of pickle + 64 MiB, at most
/// 512 MiB, plus the file's own pages and the process (64 MiB).
fn pickle_bound(pickle_bytes: u64) -> u64 {
    (32 * pickle_bytes + 64 * MIB).min(512 * MIB) + pickle_bytes + 64 * MIB
}

/// Hostile pickles of each kind the symbolic machine allocates for: 2 million memo entries
/// (distinct strings), string counts claiming 2^62 and 2^32 - 1 bytes, 10 million levels of
/// nesting. Each stays within its bounded budget; the ones past it are refused by name.
#[test]
fn memo_strings_counts_and_nesting_are_bounded() {
    let mut ran = 0;
    for (file, refused) in [
        ("hostile-memo-strings.pt", None),
        ("hostile-unicode-count.pt", Some("runs past the end")),
        ("hostile-unicode-count32.pt", Some("runs past the end")),
        ("hostile-deep.pt", Some("WEIGHT_INSPECT_MAX_PICKLE_MEMORY")),
        ("amplify-list.pt", Some("at most 536870912 bytes")),
    ] {
        let (code, _, err, rss) = run_measured(&["inspect", &case(file)]);
        let bound = pickle_bound(20 * MB);
        assert!(rss <= bound, "{file}: peak RSS {rss} > {bound}; {err}");
        match refused {
            None => assert_eq!(code, Some(0), "{file}: {err}"),
            Some(why) => {
                assert_eq!(code, Some(2), "{file}: {err}");
                assert!(err.contains(file) && err.contains(why), "{file}: {err}");
            }
        }
        ran += 1;
    }
    assert_eq!(ran, 5);
}

#[test]
fn a_pickle_cannot_amplify_its_size_in_memory() {
    for file in [
        "amplify-dict.pt",
        "amplify-memo.pt",
        "amplify-list.pt",
        "amplify-none.pt",
    ] {
        let (code, _, err, rss) = run_measured(&["inspect", &case(file)]);
        let bound = pickle_bound(20 * MB);
        assert!(rss <= bound, "{file}: peak RSS {rss} > {bound}; {err}");
        assert_eq!(code, Some(2), "{file}: {err}");
        assert!(
            err.contains(file) && err.contains("bytes per byte of pickle"),
            "{file}: {err}"
        );
    }
}

/// A heavy part shared by many paths is walked once: the file is read, the later paths are
/// aliases of the first, and memory stays far below a copy per path (4.8 GB and 3 GB).
#[test]
fn shared_structures_are_walked_once_and_read() {
    for (file, last_key) in [("shared-list.pt", "k9999"), ("shared-text.pt", "k2999")] {
        let (code, out, err, rss) = run_measured(&["inspect", &case(file)]);
        assert_eq!(code, Some(0), "{file}: {err}");
        assert!(
            out.contains(&format!("{last_key}.__alias__: \"k0\"")),
            "{file}: {out}"
        );
        let size = std::fs::metadata(case(file)).unwrap().len();
        let bound = pickle_bound(size).min(192 * MIB);
        assert!(rss <= bound, "{file}: peak RSS {rss} > {bound}");
    }
}

#[test]
fn huge_split_counts_are_bounded_by_the_files_present() {
    // A part declaring 99999 parts: the first missing one is named at once.
    let (code, _, err, rss) = run_measured(&["inspect", &case("m-00001-of-99999.gguf")]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("m-00002-of-99999.gguf: missing"), "{err}");
    assert!(rss < 64 * MIB, "peak RSS {rss}");
    // Beyond the cap, named before any part name is built; the same for a directory holding
    // only 5 bytes of junk named as part 1 of 999999999.
    for (command, file, name) in [
        (
            "inspect",
            "big-00001-of-999999999.gguf",
            "big-*-of-999999999.gguf",
        ),
        ("inspect", "junk", "x-*-of-999999999.gguf"),
        ("id", "junk", "x-*-of-999999999.gguf"),
    ] {
        let args = [command, &case(file)];
        let (code, _, err, rss) = run_measured(&args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(
            err.contains(name) && err.contains("declares 999999999 parts, more than the 99999"),
            "{args:?}: {err}"
        );
        assert!(rss < 64 * MIB, "{args:?}: peak RSS {rss}");
    }
}

#[test]
fn broadcast_views_are_not_expanded() {
    for (a, b) in [
        ("broadcast-a.pt", "broadcast-b.pt"),
        ("broadcast-huge-a.pt", "broadcast-huge-b.pt"),
    ] {
        let (code, out, err, rss) = run_measured(&["diff", "--values", &case(a), &case(b)]);
        assert!(matches!(code, Some(0 | 1)), "{a}: {code:?} {err}");
        assert!(out.contains("a broadcast"), "{a}: {out}");
        assert!(rss < 128 * MIB, "{a}: peak RSS {rss}");
    }
}

/// No line of the output starts a workflow command, and `##[` never appears raw.
fn assert_no_command(text: &str) {
    for line in text.lines() {
        assert!(
            !line.trim_start().starts_with("::"),
            "a command line: {line:?}"
        );
        assert!(!line.contains("##["), "a legacy command: {line:?}");
    }
}

#[test]
fn names_in_pytorch_errors_cannot_forge_workflow_commands() {
    // The global is an inert stand-in: the file is read, the name printed escaped.
    for command in ["inspect", "id"] {
        let (code, out, err, _) = run_measured(&[command, &case("forged-global.pt")]);
        assert_eq!(code, Some(0), "{err}");
        if command == "inspect" {
            assert!(
                out.contains(r"dangerous: os.system\r\n::error::FORGED"),
                "{out}"
            );
        }
        assert_no_command(&err);
        assert_no_command(&out);
    }
    let (code, out, err, _) =
        run_measured(&["diff", &case("forged-global.pt"), &case("command-name.pt")]);
    assert_eq!(code, Some(2), "{err}");
    assert_no_command(&err);
    assert_no_command(&out);
    let (code, _, err, _) = run_measured(&["inspect", &case("command-name.pt")]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(r#""\x23#[error]X.y": two entries of the checkpoint have this name"#),
        "{err}"
    );
    assert_no_command(&err);
}

#[test]
fn names_in_gguf_and_safetensors_errors_cannot_forge_workflow_commands() {
    for file in ["command-name.gguf", "command-name.safetensors"] {
        let (code, out, err, _) = run_measured(&["inspect", &case(file)]);
        assert_eq!(code, Some(2), "{file}: {err}");
        assert!(err.contains(r#""\x23#[error]X"#), "{file}: {err}");
        assert_no_command(&err);
        assert_no_command(&out);
    }
}

#[test]
fn zip_members_that_torch_would_read_differently_are_refused() {
    let (code, _, err, _) = run_measured(&["inspect", &case("duplicate-member.pt")]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(r#"member "archive/data/0" appears twice in the zip directory"#),
        "{err}"
    );
    let (code, _, err, _) = run_measured(&["inspect", &case("local-sizes.pt")]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(r#"member "archive/data.pkl": its local header says"#),
        "{err}"
    );
    let (code, _, err, _) = run_measured(&["inspect", &case("unlisted-entry.pt")]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("bytes 0..") && err.contains("belong to no member the zip directory lists"),
        "{err}"
    );
}

#[test]
fn a_large_state_dict_is_within_its_budget() {
    let (code, out, err, rss) = run_measured(&["id", &case("large-state-dict.pt")]);
    assert_eq!(code, Some(0), "{err}");
    assert!(!out.trim().is_empty());
    let size = std::fs::metadata(case("large-state-dict.pt"))
        .unwrap()
        .len();
    assert!(rss <= pickle_bound(size), "peak RSS {rss} for {size} bytes");
}

#[test]
fn huge_head_counts_are_a_reason_not_a_panic() {
    let source = repo_root().join("tests/fixtures/conversions/llama");
    let (code, out, err, _) = run_measured(&[
        "diff",
        "--values",
        source.to_str().unwrap(),
        &case("huge-heads.gguf"),
    ]);
    assert!(matches!(code, Some(0 | 1)), "{code:?}: {err}");
    assert!(
        out.contains("rows cannot be permuted with 9223372036854775809 heads"),
        "{out}"
    );
}
