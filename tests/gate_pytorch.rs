//! Reading checkpoints as torch reads them and naming what runs (issue 44): the globals of
//! published scanner bypasses are dangerous, a zip without its directory is not a complete
//! checkpoint, and an archive of two folders is read from the folder torch reads. The hostile
//! files are written by tests/common/gate_cases.py; nothing is ever unpickled.

mod common;

use std::path::Path;

use common::{code, combined, stderr, stdout};
use serde_json::Value;

fn write_cases(dir: &Path, cases: &[&str]) {
    let script = common::repo_root().join("tests/common/gate_cases.py");
    let mut args = vec![dir.to_str().unwrap()];
    args.extend_from_slice(cases);
    let out = std::process::Command::new(common::python())
        .arg(script)
        .args(&args)
        .output()
        .expect("python runs");
    common::assert_success("gate_cases.py", &out);
}

fn json_of(dir: &Path, args: &[&str]) -> Value {
    let out = common::run_in(Some(dir), args);
    assert_eq!(code(&out), 0, "{args:?}: {}", combined(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Globals each of which some scanner missed (the list), and the dotted name that
/// reaches os.system through torch.serialization's `os` attribute.
const BYPASSES: &[(&str, &str)] = &[
    ("zipimport", "zipimporter"),
    ("linecache", "getline"),
    ("logging.config", "listen"),
    ("_thread", "start_new_thread"),
    ("dill._dill", "_create_function"),
    ("dill._dill", "_create_code"),
    ("cProfile", "run"),
    ("ctypes", "CDLL"),
    ("torch.utils.cpp_extension", "load_inline"),
    ("torch.hub", "load"),
    ("numpy.testing._private.utils", "runstring"),
    ("torch.jit", "load"),
    ("torch.serialization", "os.system"),
];

#[test]
fn published_bypasses_are_dangerous_in_inspect_and_check() {
    let dir = tempfile::tempdir().unwrap();
    let cases: Vec<String> = BYPASSES
        .iter()
        .map(|(m, n)| format!("global:{m}:{n}"))
        .chain(["global:argparse:Namespace".to_owned()])
        .collect();
    let cases: Vec<&str> = cases.iter().map(String::as_str).collect();
    write_cases(dir.path(), &cases);
    for (module, name) in BYPASSES {
        let global = format!("{module}.{name}");
        let doc = json_of(dir.path(), &["inspect", "--json", &format!("{global}.pt")]);
        let findings = doc["findings"].as_array().expect("findings");
        let finding = findings
            .iter()
            .find(|f| f["global"] == global.as_str())
            .unwrap_or_else(|| panic!("{global} is no finding: {findings:?}"));
        assert_eq!(finding["tier"], "dangerous", "{global}");
    }
    let doc = json_of(dir.path(), &["inspect", "--json", "argparse.Namespace.pt"]);
    assert_eq!(doc["findings"][0]["tier"], "benign", "{doc:#}");

    std::fs::write(
        dir.path().join(".weight-inspect.toml"),
        "[[rules]]\npaths = [\"**\"]\n",
    )
    .unwrap();
    let out = common::run_in(Some(dir.path()), &["check", "."]);
    let text = stdout(&out);
    assert_eq!(code(&out), 1, "{}", combined(&out));
    for (module, name) in BYPASSES {
        let global = format!("{module}.{name}");
        assert!(
            text.contains(&format!(
                "{global}.pt: pickle_globals: expected no pickle global of the tiers dangerous"
            )) && text.contains(&format!("found dangerous: {global} [")),
            "{global}: {text}"
        );
    }
    assert!(!text.contains("argparse.Namespace.pt:"), "{text}");
}

#[test]
fn a_zip_without_its_directory_is_not_a_complete_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    write_cases(dir.path(), &["prefix-1mib.pt", "benign.pt"]);
    // Its first megabyte holds the benign model's members whole, but torch finds members
    // through the zip directory alone, and refuses the file: it is a file cut short.
    let doc = json_of(dir.path(), &["id", "--json", "prefix-1mib.pt"]);
    let benign = json_of(dir.path(), &["id", "--json", "benign.pt"]);
    assert_eq!(doc["complete"], false, "{doc:#}");
    assert_eq!(benign["complete"], true, "{benign:#}");
    // The header it holds names the benign model: its identity is that one's, as for any
    // file cut short.
    assert_eq!(doc["structural_hash"], benign["structural_hash"]);

    // The default `complete` of a catch-all rule fails it.
    std::fs::write(
        dir.path().join(".weight-inspect.toml"),
        "[[rules]]\npaths = [\"**\"]\n",
    )
    .unwrap();
    let out = common::run_in(Some(dir.path()), &["check", "."]);
    let text = stdout(&out);
    assert_eq!(code(&out), 1, "{}", combined(&out));
    assert!(
        text.contains("prefix-1mib.pt: complete: expected a complete file")
            && text.contains("found incomplete: 0 of 16 bytes of tensor data present"),
        "{text}"
    );
    assert!(!text.contains("benign.pt:"), "{text}");
}

#[test]
fn an_archive_of_two_folders_reads_the_folder_torch_reads() {
    let dir = tempfile::tempdir().unwrap();
    write_cases(dir.path(), &["two-folders.pt", "benign.pt"]);
    // The first entry is b/'s: b/data.pkl, which calls posix.system, is the pickle torch loads
    // (a/data.pkl, met first, is the clean model).
    let doc = json_of(dir.path(), &["inspect", "--json", "two-folders.pt"]);
    let findings = doc["findings"].as_array().expect("findings");
    assert!(
        findings
            .iter()
            .any(|f| f["global"] == "posix.system" && f["tier"] == "dangerous"),
        "{doc:#}"
    );
    let clean = json_of(dir.path(), &["id", "--json", "benign.pt"]);
    let two = json_of(dir.path(), &["id", "--json", "two-folders.pt"]);
    assert_ne!(clean["structural_hash"], two["structural_hash"]);
    assert_eq!(two["tensor_count"], 0, "{two:#}");
    let diff = common::run_in(Some(dir.path()), &["diff", "benign.pt", "two-folders.pt"]);
    assert_eq!(code(&diff), 1, "{}", combined(&diff));
}

#[test]
fn plain_pickles_read_as_pickles_every_stream_scanned() {
    let dir = tempfile::tempdir().unwrap();
    write_cases(
        dir.path(),
        &[
            "plain-dict.pkl",
            "two-streams.pkl",
            "broken-evil.pkl",
            "pickles.zip",
        ],
    );
    // pickle.dump of a dict, no torch framing: read, its plain values metadata, exit 0.
    let doc = json_of(dir.path(), &["inspect", "--json", "plain-dict.pkl"]);
    assert_eq!(doc["format"], "pytorch", "{doc:#}");
    let inspect = common::run_in(Some(dir.path()), &["inspect", "plain-dict.pkl"]);
    assert_eq!(code(&inspect), 0, "{}", combined(&inspect));
    assert!(
        stdout(&inspect).contains("lr: 0.001"),
        "{}",
        stdout(&inspect)
    );
    assert!(
        doc["findings"].as_array().is_none_or(Vec::is_empty),
        "{doc:#}"
    );

    // A second stream behind the benign one calls posix.system: a dangerous finding.
    let doc = json_of(dir.path(), &["inspect", "--json", "two-streams.pkl"]);
    let findings = doc["findings"].as_array().expect("findings");
    assert!(
        findings
            .iter()
            .any(|f| f["global"] == "posix.system" && f["tier"] == "dangerous"),
        "{doc:#}"
    );

    // No readable model, but a stream that reaches builtins.exec before it breaks off:
    // named dangerous, never "not a model file".
    let out = common::run_in(Some(dir.path()), &["inspect", "broken-evil.pkl"]);
    let text = combined(&out);
    assert_eq!(code(&out), 2, "{text}");
    assert!(
        text.contains(
            "broken-evil.pkl: unreadable, dangerous: it holds a pickle naming builtins.exec"
        ),
        "{text}"
    );
    assert!(
        !text.starts_with("weight-inspect: broken-evil.pkl: not a GGUF"),
        "{text}"
    );
    // textconv (git never fails) says the same.
    let out = common::run_in(Some(dir.path()), &["textconv", "broken-evil.pkl"]);
    assert_eq!(code(&out), 0, "{}", combined(&out));
    assert!(
        stdout(&out).contains("unreadable, dangerous: it holds a pickle naming builtins.exec"),
        "{}",
        stdout(&out)
    );

    // check under a catch-all rule fails the two dangerous ones, passes the plain dict.
    std::fs::write(
        dir.path().join(".weight-inspect.toml"),
        "[[rules]]\npaths = [\"**\"]\n",
    )
    .unwrap();
    let out = common::run_in(Some(dir.path()), &["check", "."]);
    let text = stdout(&out);
    assert_eq!(code(&out), 1, "{}", combined(&out));
    assert!(
        text.contains("two-streams.pkl: pickle_globals:")
            && text.contains("broken-evil.pkl: pickle_globals:")
            && text.contains("pickles.zip: pickle_globals:")
            && text.contains("found dangerous: builtins.exec"),
        "{text}"
    );
    assert!(!text.contains("plain-dict.pkl:"), "{text}");
    // The zip's member that climbs out of the extraction directory is named, in check's
    // finding and in inspect's error.
    let traversal = "path traversal: the archive's member \"../../evil.txt\" names a path outside";
    assert!(
        text.contains(&format!("found dangerous: posix.system; {traversal}")),
        "{text}"
    );
    let out = common::run_in(Some(dir.path()), &["inspect", "pickles.zip"]);
    assert_eq!(code(&out), 2, "{}", combined(&out));
    assert!(
        stderr(&out).contains("naming posix.system (os.system)")
            && stderr(&out).contains(traversal),
        "{}",
        combined(&out)
    );
}

#[test]
fn an_omegaconf_cycle_is_walked_once_not_refused() {
    let dir = tempfile::tempdir().unwrap();
    write_cases(dir.path(), &["omegaconf.ckpt"]);
    // Each omegaconf node points back at its parent: a cycle through pickle's memo.
    let doc = json_of(dir.path(), &["inspect", "--json", "omegaconf.ckpt"]);
    let findings = doc["findings"].as_array().expect("findings");
    for global in [
        "omegaconf.dictconfig.DictConfig",
        "omegaconf.nodes.FloatNode",
    ] {
        let finding = findings
            .iter()
            .find(|f| f["global"] == global)
            .unwrap_or_else(|| panic!("{global}: {doc:#}"));
        assert_eq!(finding["tier"], "unknown", "{global}");
    }
    let text = stdout(&common::run_in(
        Some(dir.path()),
        &["inspect", "omegaconf.ckpt"],
    ));
    assert!(
        text.contains("hyper_parameters._content.lr._val: 0.001")
            && text
                .contains("hyper_parameters._content.lr._parent.__alias__: \"hyper_parameters\""),
        "{text}"
    );
}

#[test]
fn zip_flags_and_renamed_members_never_hide_a_payload() {
    let dir = tempfile::tempdir().unwrap();
    write_cases(
        dir.path(),
        &["flag-1.pt", "flag-20.pt", "flag-40.pt", "renamed.pt"],
    );
    // General-purpose flags change nothing the members hold: read, the payload a finding.
    for file in ["flag-1.pt", "flag-20.pt", "flag-40.pt"] {
        let doc = json_of(dir.path(), &["inspect", "--json", file]);
        assert!(
            doc["findings"].as_array().is_some_and(|f| f
                .iter()
                .any(|f| f["global"] == "posix.system" && f["tier"] == "dangerous")),
            "{file}: {doc:#}"
        );
    }
    // A directory that names data.pkl otherwise than its local header: refused as torch
    // would, and named dangerous by what its local header's pickle holds.
    let out = common::run_in(Some(dir.path()), &["inspect", "renamed.pt"]);
    let text = combined(&out);
    assert_eq!(code(&out), 2, "{text}");
    assert!(
        text.contains("renamed.pt: unreadable, dangerous: it holds a pickle naming posix.system"),
        "{text}"
    );
    std::fs::write(
        dir.path().join(".weight-inspect.toml"),
        "[[rules]]\npaths = [\"**\"]\n",
    )
    .unwrap();
    let out = common::run_in(Some(dir.path()), &["check", "."]);
    let text = stdout(&out);
    assert_eq!(code(&out), 1, "{}", combined(&out));
    for file in ["flag-1.pt", "flag-20.pt", "flag-40.pt", "renamed.pt"] {
        assert!(
            text.contains(&format!("{file}: pickle_globals:")),
            "{file}: {text}"
        );
    }
}

/// picklescan's own test corpus (tests/fixtures/pytorch/picklescan: picklescan 1.0.5's
/// tests/data and tests/data2, MIT, with its LICENSE), judged by picklescan itself (PyPI) and
/// by weight-inspect: every file picklescan rates dangerous is named dangerous by `inspect`
/// (a finding, or "unreadable, dangerous") and fails `check` under a rule with no keys; no
/// file picklescan rates clean is called dangerous. The one 7z archive is compared by neither
/// (picklescan needs py7zr for it; weight-inspect reads no 7z).
#[test]
fn picklescan_corpus_dangerous_is_dangerous_here_and_fails_a_catch_all_rule() {
    let corpus = common::repo_root().join("tests/fixtures/pytorch/picklescan");
    assert!(corpus.join("LICENSE").is_file());
    let tmp = tempfile::tempdir().unwrap();
    let here = tmp.path();
    let mut files = Vec::new();
    for folder in ["data", "data2"] {
        std::fs::create_dir_all(here.join(folder)).unwrap();
        for entry in std::fs::read_dir(corpus.join(folder)).unwrap() {
            let name = entry.unwrap().file_name().into_string().unwrap();
            std::fs::copy(
                corpus.join(folder).join(&name),
                here.join(folder).join(&name),
            )
            .unwrap();
            if !name.ends_with(".7z") {
                files.push(format!("{folder}/{name}"));
            }
        }
    }
    files.sort();
    assert_eq!(files.len(), 108, "{files:?}");
    let paths: Vec<String> = files
        .iter()
        .map(|f| here.join(f).to_str().unwrap().to_owned())
        .collect();
    let args: Vec<&str> = paths.iter().map(String::as_str).collect();
    let scan = common::run_python_source(
        "import json, sys\n\
         from picklescan.scanner import scan_file_path\n\
         print(json.dumps({p: scan_file_path(p).infected_files > 0 for p in sys.argv[1:]}))\n",
        &args,
    );
    common::assert_success("picklescan", &scan);
    let verdicts: std::collections::BTreeMap<String, bool> =
        serde_json::from_slice(&scan.stdout).expect("picklescan's verdicts");
    assert_eq!(verdicts.len(), files.len());

    std::fs::write(
        here.join(".weight-inspect.toml"),
        "[[rules]]\npaths = [\"**\"]\n",
    )
    .unwrap();
    let check = common::run_in(Some(here), &["check", "."]);
    assert_eq!(code(&check), 1, "{}", combined(&check));
    let check_text = stdout(&check);

    let (mut dangerous, mut benign) = (0, 0);
    for file in &files {
        let rated = verdicts[here.join(file).to_str().unwrap()];
        let out = common::run_in(Some(here), &["inspect", "--json", file]);
        let named = match code(&out) {
            0 => {
                let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
                doc["findings"]
                    .as_array()
                    .is_some_and(|f| f.iter().any(|f| f["tier"] == "dangerous"))
            }
            2 => stderr(&out).contains(": unreadable, dangerous: it holds a pickle naming"),
            other => panic!("{file}: exit {other}: {}", combined(&out)),
        };
        let failed = check_text.contains(&format!("{file}: pickle_globals:"));
        if rated {
            dangerous += 1;
            assert!(
                named,
                "{file}: picklescan: dangerous; inspect: {}",
                combined(&out)
            );
            assert!(failed, "{file}: passes a catch-all rule:\n{check_text}");
        } else {
            benign += 1;
            assert!(
                !named && !failed,
                "{file}: benign, called dangerous: {}",
                combined(&out)
            );
        }
    }
    assert_eq!((dangerous, benign), (94, 14));

    // modelscan (PyPI) on the same corpus: every file it flags is one picklescan rates
    // dangerous, so named dangerous here (above).
    let models = common::run_python_source(
        "import json, sys\n\
         from modelscan.modelscan import ModelScan\n\
         scan = ModelScan()\n\
         scan.scan(sys.argv[1])\n\
         print(json.dumps(sorted({str(i.details.source).split(':')[0]\n\
         \x20   for i in scan.issues.all_issues})))\n",
        &[here.to_str().unwrap()],
    );
    let flagged: Vec<String> =
        serde_json::from_slice(&models.stdout).expect("modelscan's verdicts");
    for path in &flagged {
        assert!(
            verdicts.get(path) == Some(&true),
            "{path}: modelscan flags it; picklescan and weight-inspect do not"
        );
    }
    assert_eq!(flagged.len(), 28, "{flagged:?}");
    assert!(!here.join("weight-inspect-canary").exists());
}
