//! `max_update_loss` and `max_delta_rel_l2`: `check` bounds what a `.wdelta` loses, by the
//! figures `delta create` recorded in its header, on deltas made by `delta create` from a real
//! fine-tune (tests/fixtures/finetune, scripts/make_finetune_pairs.py).

mod common;

use std::path::Path;

use common::delta::{ok, s};
use common::{code, run, run_in, stdout};

fn create(dir: &Path, name: &str, extra: &[&str]) {
    let pair = common::fixture("finetune/f32-full");
    let (base, ft) = (pair.join("base.safetensors"), pair.join("ft.safetensors"));
    let out = dir.join("deltas").join(name);
    let mut args = vec!["delta", "create", "--base", s(&base), s(&ft), "-o", s(&out)];
    args.extend_from_slice(extra);
    ok(&run(&args));
}

/// The loss figures `delta inspect --json` shows.
fn recorded(dir: &Path, name: &str) -> serde_json::Value {
    let path = dir.join("deltas").join(name);
    let out = run(&["delta", "inspect", "--json", s(&path)]);
    ok(&out);
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    json["loss"].clone()
}

fn check(dir: &Path, policy: &str) -> (i32, serde_json::Value) {
    std::fs::write(dir.join(".weight-inspect.toml"), policy).unwrap();
    let out = run_in(Some(dir), &["check", "--format", "json", "deltas"]);
    let json = serde_json::from_str(&stdout(&out))
        .unwrap_or_else(|e| panic!("{e}: {}", common::combined(&out)));
    (code(&out), json)
}

/// The violations of one file: (rule, found).
fn of(report: &serde_json::Value, file: &str) -> Vec<(String, String)> {
    report["violations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["path"] == format!("deltas/{file}"))
        .map(|v| {
            (
                v["rule"].as_str().unwrap().to_owned(),
                v["found"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn the_policy_bounds_what_a_delta_loses_by_its_recorded_figures() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::create_dir(dir.join("deltas")).unwrap();
    create(dir, "lossless.wdelta", &["--strategy", "lossless"]);
    create(dir, "int4.wdelta", &["--strategy", "int4"]);
    create(dir, "sparse.wdelta", &["--strategy", "sparse"]);
    // Made against base + int4: a chained delta records no figures.
    let int4 = dir.join("deltas/int4.wdelta");
    create(
        dir,
        "chained.wdelta",
        &["--strategy", "int4", "--chain", s(&int4)],
    );
    let bytes = std::fs::read(&int4).unwrap();
    std::fs::write(dir.join("deltas/cut.wdelta"), &bytes[..bytes.len() - 100]).unwrap();
    // Covered by the rule but no delta: not judged by these keys.
    std::fs::write(dir.join("deltas/notes.txt"), "fine-tune of 27 November\n").unwrap();

    let sparse = recorded(dir, "sparse.wdelta");
    let int4_loss = recorded(dir, "int4.wdelta");
    let sparse_lost = sparse["update_lost"].as_f64().unwrap();
    let int4_lost = int4_loss["update_lost"].as_f64().unwrap();
    assert!(int4_lost < sparse_lost, "{int4_loss} {sparse}");
    assert!(recorded(dir, "chained.wdelta").is_null());

    // A bound between the two figures: int4 passes, sparse does not.
    let bound = f64::midpoint(int4_lost, sparse_lost);
    let (exit, report) = check(
        dir,
        &format!("[[rules]]\npaths = [\"deltas/*\"]\nmax_update_loss = {bound}\n"),
    );
    assert_eq!(exit, 1, "{report}");
    assert_eq!(of(&report, "lossless.wdelta"), vec![]);
    assert_eq!(of(&report, "int4.wdelta"), vec![]);
    assert_eq!(of(&report, "notes.txt"), vec![]);
    let found = of(&report, "sparse.wdelta");
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].0, "max_update_loss");
    let worst = sparse["worst_tensor"].as_str().unwrap();
    assert!(
        found[0]
            .1
            .starts_with(&format!("sparse: {sparse_lost:.6} over the model"))
            && found[0].1.contains(&format!("worst tensor {worst}: ")),
        "{found:?}"
    );
    let chained = of(&report, "chained.wdelta");
    assert_eq!(chained.len(), 1);
    assert!(
        chained[0].1.contains("records no loss figures"),
        "{chained:?}"
    );
    let cut = of(&report, "cut.wdelta");
    assert_eq!(cut.len(), 1);
    assert!(cut[0].1.starts_with("an unreadable .wdelta"), "{cut:?}");
    assert_eq!(report["violations"].as_array().unwrap().len(), 3);

    // The bound is inclusive of the recorded figure; a bound of 0 fails every lossy delta and
    // lets the lossless one through; max_delta_rel_l2 judges the other figure.
    let (exit, report) = check(
        dir,
        &format!(
            "[[rules]]\npaths = [\"deltas/sparse.wdelta\"]\nmax_update_loss = {sparse_lost:?}\n"
        ),
    );
    assert_eq!(
        (exit, report["violations"].clone()),
        (0, serde_json::json!([]))
    );
    let (exit, report) = check(
        dir,
        "[[rules]]\npaths = [\"deltas/*\"]\nmax_update_loss = 0\nmax_delta_rel_l2 = 0.0\n",
    );
    assert_eq!(exit, 1);
    assert_eq!(of(&report, "lossless.wdelta"), vec![]);
    let rules: Vec<String> = of(&report, "int4.wdelta")
        .into_iter()
        .map(|v| v.0)
        .collect();
    assert_eq!(rules, ["max_update_loss", "max_delta_rel_l2"]);

    // SARIF names the rule with its help.
    std::fs::write(
        dir.join(".weight-inspect.toml"),
        "[[rules]]\npaths = [\"deltas/*\"]\nmax_update_loss = 0.0\n",
    )
    .unwrap();
    let out = run_in(Some(dir), &["check", "--format", "sarif", "deltas"]);
    let sarif: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let rules = &sarif["runs"][0]["tool"]["driver"]["rules"];
    assert!(
        rules
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["id"] == "max_update_loss"),
        "{rules}"
    );
    let results = sarif["runs"][0]["results"].as_array().unwrap();
    assert!(results.iter().any(|r| r["ruleId"] == "max_update_loss"));
}

#[test]
fn a_loss_bound_must_be_a_number_at_least_zero() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join(".weight-inspect.toml"),
        "[[rules]]\npaths = [\"*.wdelta\"]\nmax_update_loss = -0.1\n",
    )
    .unwrap();
    let out = run_in(Some(dir.path()), &["check", "x.wdelta"]);
    assert_eq!(code(&out), 2, "{}", common::combined(&out));
    assert!(
        common::combined(&out).contains(
            ".weight-inspect.toml:3:19: `max_update_loss` must be a number at least 0, found -0.1"
        ),
        "{}",
        common::combined(&out)
    );
}
