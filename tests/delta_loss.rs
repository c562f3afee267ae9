//! What the lossy strategies lose, and what they must keep: `create` and `verify --against`
//! report rel_l2 against the fine-tune and the fraction of the update lost, checked here
//! against numpy on the model `apply` rebuilds; tensors the fine-tune left unchanged (signed
//! zeros and NaN payloads included) come back bit-identical under every strategy, and so does
//! the fine-tune's metadata (the rebuilt file's structural hash is the fine-tune's).

mod common;

use std::path::Path;
use std::process::Command;

use common::delta::{ok, s};
use common::{python, run, stdout};

/// A pair written by the safetensors package: three tensors updated by small noise (one, `x`,
/// over the 2^22 elements from which create works in blocks), one unchanged holding -0.0,
/// +0.0 and a NaN with a payload.
fn pair(dir: &Path) {
    let script = r#"
import sys, numpy as np
from safetensors.numpy import save_file
d = sys.argv[1]
rng = np.random.default_rng(5)
b = {"w": rng.standard_normal((64, 48)).astype(np.float32),
     "v": rng.standard_normal(33).astype(np.float32),
     "x": rng.standard_normal((2048, 2049)).astype(np.float32),
     "z": np.array([0x80000000, 0, 0x7fc00123, 0x3f800000], dtype=np.uint32).view(np.float32)}
f = {k: v.copy() for k, v in b.items()}
f["w"] += (rng.standard_normal((64, 48)) * 1e-2).astype(np.float32)
f["v"] += (rng.standard_normal(33) * 1e-2).astype(np.float32)
f["x"] += (rng.standard_normal((2048, 2049)) * 1e-2).astype(np.float32)
save_file(b, d + "/base.safetensors", metadata={"format": "pt", "step": "0"})
save_file(f, d + "/ft.safetensors", metadata={"format": "pt", "step": "300"})
"#;
    let out = Command::new(python())
        .args(["-c", script, s(dir)])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// rel_l2 and update lost over the model and per tensor, computed by numpy in float64 from the
/// three files: "model REL LOST" then "NAME REL LOST" lines.
fn numpy_figures(dir: &Path, rebuilt: &Path) -> Vec<(String, f64, f64)> {
    let script = r#"
import sys, numpy as np
from safetensors.numpy import load_file
d, r = sys.argv[1], load_file(sys.argv[2])
b, f = load_file(d + "/base.safetensors"), load_file(d + "/ft.safetensors")
tot = np.zeros(3)
rows = []
for k in sorted(b):
    rr, ff, bb = (x[k].astype(np.float64) for x in (r, f, b))
    m = np.isfinite(rr) & np.isfinite(ff) & np.isfinite(bb)
    rr, ff, bb = rr[m], ff[m], bb[m]
    s = np.array([((rr - ff) ** 2).sum(), (ff ** 2).sum(), ((ff - bb) ** 2).sum()])
    tot += s
    e = np.sqrt(s)
    rows.append((k, e[0] / e[1] if e[0] else 0.0, e[0] / e[2] if e[0] else 0.0))
e = np.sqrt(tot)
print("model", e[0] / e[1], e[0] / e[2])
for k, a, c in rows:
    print(k, a, c)
"#;
    let out = Command::new(python())
        .args(["-c", script, s(dir), s(rebuilt)])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let p: Vec<&str> = l.split_whitespace().collect();
            (
                p[0].to_string(),
                p[1].parse().unwrap(),
                p[2].parse().unwrap(),
            )
        })
        .collect()
}

/// The two numbers after "rel_l2 " and "update lost " in `line`.
fn figures(line: &str) -> (f64, f64) {
    let after = |key: &str| -> f64 {
        let rest = &line[line.find(key).unwrap() + key.len()..];
        let num: String = rest
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .collect();
        num.parse().unwrap()
    };
    (after("rel_l2 "), after("update lost "))
}

fn raw_tensor(path: &Path, name: &str) -> Vec<u8> {
    let m = weight_inspect::deltas::Model::open(path).unwrap();
    m.read_raw(&m.tensors[name]).unwrap()
}

#[test]
fn lossy_strategies_report_what_they_lose_as_numpy_measures_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    pair(dir);
    let (base, ft) = (dir.join("base.safetensors"), dir.join("ft.safetensors"));
    for strategy in ["int4", "sparse", "quantized"] {
        let delta = dir.join(format!("{strategy}.wdelta"));
        let out = run(&[
            "delta",
            "create",
            "--strategy",
            strategy,
            "--base",
            s(&base),
            s(&ft),
            "-o",
            s(&delta),
        ]);
        ok(&out);
        let text = stdout(&out);
        let rebuilt = dir.join(format!("{strategy}.safetensors"));
        let applied = run(&[
            "delta",
            "apply",
            "--base",
            s(&base),
            s(&delta),
            "-o",
            s(&rebuilt),
        ]);
        ok(&applied);
        assert!(
            stdout(&applied)
                .starts_with(&format!("wrote {}: approximate, {strategy}, ", s(&rebuilt))),
            "{}",
            stdout(&applied)
        );
        // The figures below are of this model: the reference's reconstruction of a delta
        // whose records are as the strategy defines them.
        common::delta::encoded_as_defined(&base, &[], &ft, &delta);
        common::delta::rebuilt_as_defined(&base, &rebuilt, &[&delta]);
        let expected = numpy_figures(dir, &rebuilt);
        let model = text.lines().find(|l| l.starts_with("lossy:")).unwrap();
        let (rel, lost) = figures(model);
        assert!(
            (rel - expected[0].1).abs() < 2e-6,
            "{strategy}: {model} vs {expected:?}"
        );
        assert!(
            (lost - expected[0].2).abs() < 2e-4,
            "{strategy}: {model} vs {expected:?}"
        );
        // Something is lost, and the worst tensor is named.
        assert!(lost > 0.01, "{strategy}: {model}");
        let worst = text
            .lines()
            .find(|l| l.starts_with("most update lost: "))
            .unwrap();
        let max = expected[1..]
            .iter()
            .max_by(|a, b| a.2.total_cmp(&b.2))
            .unwrap();
        assert!(
            worst.contains(&format!("most update lost: {} ", max.0)),
            "{worst}"
        );
        // And the tensor farthest from the fine-tune, by numpy's rel_l2.
        let farthest = expected[1..]
            .iter()
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .unwrap();
        let named = text
            .lines()
            .find(|l| l.starts_with("largest rel_l2: "))
            .unwrap();
        assert!(
            named.contains(&format!("largest rel_l2: {} ", farthest.0)),
            "{named}"
        );
        // Written and applied, the result says it is approximate.
        assert!(
            text.starts_with(&format!("wrote {}: approximate, {strategy}, ", s(&delta))),
            "{text}"
        );

        // The header records the figures (key `loss`), `delta inspect` shows them, and
        // deltatensors, which does not know the key, still reads the file.
        let out = run(&["delta", "inspect", "--json", s(&delta)]);
        ok(&out);
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let loss = &json["loss"];
        let close = |key: &str, want: f64| {
            let got = loss[key].as_f64().unwrap();
            assert!(
                (got - want).abs() <= 1e-9 * want.abs().max(1e-9),
                "{strategy}: {key} {got} vs numpy {want}"
            );
        };
        close("rel_l2", expected[0].1);
        close("update_lost", expected[0].2);
        close("worst_update_lost", max.2);
        assert_eq!(loss["worst_tensor"], max.0.as_str(), "{strategy}");
        close("largest_rel_l2", farthest.1);
        assert_eq!(
            loss["largest_rel_l2_tensor"],
            farthest.0.as_str(),
            "{strategy}"
        );
        let out = run(&["delta", "inspect", s(&delta)]);
        ok(&out);
        let shown = stdout(&out);
        let line = shown.lines().find(|l| l.starts_with("lossy:")).unwrap();
        assert_eq!(figures(line), (rel, lost), "{strategy}: {line}");
        let read = Command::new(python())
            .args([
                "-c",
                "import sys; from deltatensors.format import read_wdelta; \
                 h = read_wdelta(open(sys.argv[1], 'rb')); print(h[1], sorted(h[2]))",
                s(&delta),
            ])
            .output()
            .unwrap();
        assert!(
            read.status.success(),
            "{}",
            String::from_utf8_lossy(&read.stderr)
        );
        assert_eq!(
            String::from_utf8_lossy(&read.stdout).trim(),
            format!("{strategy} ['v', 'w', 'x', 'z']")
        );

        // verify --against measures the same per tensor.
        let out = run(&[
            "delta",
            "verify",
            "--base",
            s(&base),
            s(&delta),
            "--against",
            s(&ft),
        ]);
        ok(&out);
        let text = stdout(&out);
        let mut all = vec!["delta", "verify", "--base", s(&base), s(&delta)];
        all.extend(["--against", s(&ft), "--all"]);
        let every = stdout(&run(&all));
        let mut folded = 0;
        for (name, rel, lost) in &expected[1..] {
            let line = |text: &str| {
                text.lines()
                    .find(|l| l.starts_with(&format!("tensor {name}: ")))
                    .map(str::to_owned)
            };
            // A tensor that lost nothing is counted, not listed, unless --all.
            let listed = line(&text);
            if *rel == 0.0 && *lost == 0.0 {
                assert_eq!(listed, None, "{strategy}: {text}");
                folded += 1;
            }
            let line = line(&every).unwrap_or_else(|| panic!("{name}: {every}"));
            let (r, l) = figures(&line);
            assert!((r - rel).abs() < 2e-6 && (l - lost).abs() < 2e-4, "{line}");
        }
        if folded > 0 {
            let plural = if folded == 1 { "" } else { "s" };
            assert!(
                text.contains(&format!("{folded} other tensor{plural} lost nothing")),
                "{strategy}: {text}"
            );
        }

        // The unchanged tensor comes back bit for bit: -0.0, +0.0, the NaN's payload.
        assert_eq!(
            raw_tensor(&rebuilt, "z"),
            raw_tensor(&ft, "z"),
            "{strategy}"
        );
    }
}
