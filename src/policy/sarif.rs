//! SARIF 2.1.0 (OASIS Static Analysis Results Interchange Format), what GitHub code scanning
//! and other security dashboards read: `check --format sarif` and `ci --sarif FILE`.
//!
//! One run of one tool. Every policy key is a rule with its help text; every violation is one
//! result on the model file (for a model directory: its index or first part), with the tensors
//! or metadata keys it names as logical locations. Files that could not be judged are tool
//! notifications, and make the run unsuccessful. `partialFingerprints` hash the path, the rule,
//! what inside the file the violation is about (a dtype, a metadata key) and the file's
//! structural hash, so that re-running on the same models de-duplicates alerts and a
//! structural change opens a new one.
//!
//! GitHub accepts at most 25,000 results per run and 10 MB of gzipped SARIF: beyond either
//! bound (sizes counted before compression, which only makes them smaller) the results are cut
//! and a notification says how many were left out.

use serde::Serialize;
use sha2::{Digest, Sha256};

use super::check::Violation;
use super::report::{CheckReport, FileError};

/// The SARIF version written, and its schema.
const VERSION: &str = "2.1.0";
const SCHEMA_URI: &str = "https://json.schemastore.org/sarif-2.1.0.json";

/// The name of this tool's fingerprint in `partialFingerprints`.
const FINGERPRINT_KEY: &str = "weightInspect/v1";

/// How a violation is shown: as an error, or a warning when nothing fails on it
/// (`ci --fail-on never`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Level {
    Error,
    Warning,
}

/// What one SARIF log reports.
pub(crate) struct Input<'a> {
    pub violations: &'a [Violation],
    /// Files that could not be judged.
    pub errors: &'a [FileError],
    /// The policy's name, for messages.
    pub policy: &'a str,
    pub level: Level,
    /// `ci`: each violation's standing against the base (same order), given as
    /// `baselineState`; a violation the base already had is a warning unless `fail_on_any`.
    pub baseline: Option<&'a [super::baseline::Standing]>,
    pub fail_on_any: bool,
}

/// The rules, in `driver.rules` order: id, short description, help.
const RULES: &[(&str, &str, &str)] = &[
    (
        "allowed_dtypes",
        "Only the allowed tensor dtypes",
        "Every tensor must have one of the dtypes the policy lists (allowed_dtypes). One result \
         per other dtype found, naming its tensors. Convert or re-quantize the tensors, or widen \
         the rule.",
    ),
    (
        "denied_dtypes",
        "No denied tensor dtype",
        "No tensor may have a dtype the policy denies (denied_dtypes). One result per denied \
         dtype found, naming its tensors.",
    ),
    (
        "expected_hash",
        "The pinned structural identity",
        "The structural hash (format, metadata, tensor names, dtypes and shapes; never the \
         weights) must equal the pinned one (expected_hash), and the file must be complete: a \
         truncated copy's header still names the whole model, so a pinned hash alone would let \
         it through. If the change is intended, re-pin with `weight-inspect policy pin PATH`.",
    ),
    (
        "required_metadata",
        "Required metadata present",
        "The metadata keys the policy requires (required_metadata) must exist, with the \
         required value when one is given.",
    ),
    (
        "forbidden_metadata",
        "No forbidden metadata",
        "The metadata keys the policy forbids (forbidden_metadata) must not exist.",
    ),
    (
        "max_tensors",
        "At most so many tensors",
        "The number of tensors must not exceed the policy's bound (max_tensors).",
    ),
    (
        "max_parameters",
        "At most so many parameters",
        "The total number of parameters (tensor elements) must not exceed the policy's bound \
         (max_parameters).",
    ),
    (
        "max_rel_l2",
        "A faithful conversion",
        "Every tensor of the GGUF must be within the policy's bound of the model it was \
         converted from (reference, max_rel_l2): ‖GGUF − source‖ / ‖source‖ per tensor, after \
         undoing the converter's renaming and layout changes. One result per tensor beyond the \
         bound, naming it and its figure.",
    ),
    (
        "max_update_loss",
        "A delta that keeps its update",
        "A .wdelta file must lose at most the policy's share of the fine-tune's update \
         (max_update_loss): ‖rebuilt − fine-tune‖ / ‖fine-tune − base‖ over the model, as \
         `delta create` measured it and wrote it into the delta's header. A lossless delta \
         loses nothing; a lossy one that records no figures (made against a chain, or by another \
         tool) cannot prove its bound. The result names the tensor that lost the most. Store \
         the model with --strategy lossless, or widen the bound.",
    ),
    (
        "max_delta_rel_l2",
        "A delta close to its fine-tune",
        "A .wdelta file's reconstruction must be within the policy's bound of the fine-tune it \
         was made from (max_delta_rel_l2): ‖rebuilt − fine-tune‖ / ‖fine-tune‖ over the model, \
         as recorded in the delta's header by `delta create`. A lossless delta is exact; a \
         lossy one without figures cannot prove its bound.",
    ),
    (
        "relation",
        "Made from its reference as the policy says",
        "The file must relate to the reference model beside it in one of the ways the policy \
         allows (reference, relation), as `weight-inspect relate FILE REFERENCE` finds it: a \
         quantization, a fine-tune, an adapter. An unrelated model swapped in fails, naming \
         what decided it.",
    ),
    (
        "signature",
        "Signed by whom the policy trusts",
        "The file must be listed, with the digest it has, by an OpenSSF model signature \
         (model.sig, model_signing's format) in its folder or a folder above, and that \
         signature must verify against the key, certificate authority or Sigstore identity the \
         policy names (signature). A file changed since it was signed, one the signature does \
         not list, or one no signature covers fails. Re-sign with `weight-inspect sign DIR`.",
    ),
    (
        "max_file_size",
        "At most so many bytes",
        "The file (for a Git LFS pointer: the size it records; for a multi-file model: the sum \
         of its files) must not exceed the policy's bound (max_file_size).",
    ),
    (
        "require_lfs",
        "Stored in Git LFS",
        "The file must be stored as a Git LFS pointer, not as its bytes in git objects \
         (require_lfs). Fix: git rm --cached PATH && git lfs track PATH && git add \
         .gitattributes PATH.",
    ),
    (
        "forbid_formats",
        "No forbidden file format",
        "The file must not be in a format the policy forbids (forbid_formats), such as pickle \
         checkpoints, which run code when loaded. The result lists what the pickle imports.",
    ),
    (
        "pickle_globals",
        "No dangerous pickle global",
        "A pickle checkpoint must not name a global of a forbidden tier (forbid_tiers; \
         dangerous by default: what runs code, imports, opens files or sockets) or one the policy \
         forbids (forbid_globals), unless allow_globals lets it through. The result names the \
         global and its tier (dangerous, unknown or benign). weight-inspect reads such files \
         without importing or calling anything; torch.load(weights_only=False) would run them.",
    ),
    (
        "format",
        "A readable model file",
        "A rule with structural checks applies to the file, so it must be a readable GGUF, \
         safetensors or PyTorch file (format).",
    ),
    (
        "complete",
        "A complete model file",
        "A model file must hold every byte of tensor data its header declares; a shorter file \
         is an interrupted download or copy (complete, on by default for model files; \
         `complete = false` allows partial files). Fetch or copy the file again.",
    ),
    (
        "model_files",
        "The files of one model fit together",
        "A directory a rule covers holds a multi-file model whose files must fit together: an \
         index and the shards it names, or split-GGUF parts 1..N (model_files).",
    ),
    (
        "expected_model_identity",
        "The pinned model identity of a training checkpoint",
        "A PyTorch training checkpoint's model identity (its model weights' names, dtypes and \
         shapes plus its groups, docs/SPEC.md §5d; never the weights, the step or the optimizer \
         state) must equal the pinned one (expected_model_identity), and the file must be \
         complete. Every step of one run passes; another model, or a file that is not a \
         training checkpoint, does not.",
    ),
];

#[derive(Serialize)]
struct Log<'a> {
    #[serde(rename = "$schema")]
    schema_uri: &'static str,
    version: &'static str,
    runs: [Run<'a>; 1],
    /// This tool's own output schema number, which every JSON output of it carries; SARIF's
    /// top level admits no other key.
    properties: LogProperties,
}

#[derive(Serialize)]
struct LogProperties {
    schema: u32,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Run<'a> {
    tool: Tool,
    results: Vec<SarifResult<'a>>,
    invocations: [Invocation; 1],
    column_kind: &'static str,
    properties: RunProperties<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RunProperties<'a> {
    policy: &'a str,
    violations: usize,
    omitted_results: usize,
}

#[derive(Serialize)]
struct Tool {
    driver: Driver,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Driver {
    name: &'static str,
    version: &'static str,
    semantic_version: &'static str,
    rules: Vec<Rule>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Rule {
    id: &'static str,
    name: &'static str,
    short_description: Text,
    full_description: Text,
    help: Help,
    default_configuration: Configuration,
    properties: RuleProperties,
}

#[derive(Serialize)]
struct RuleProperties {
    tags: [&'static str; 2],
}

#[derive(Serialize)]
struct Text {
    text: String,
}

#[derive(Serialize)]
struct Help {
    text: String,
    markdown: String,
}

#[derive(Serialize)]
struct Configuration {
    level: Level,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SarifResult<'a> {
    rule_id: &'a str,
    rule_index: usize,
    level: Level,
    message: Text,
    locations: [Location<'a>; 1],
    partial_fingerprints: Fingerprints,
    /// `ci` only: `new`, `updated` (worse than at the base) or `unchanged`.
    #[serde(skip_serializing_if = "Option::is_none")]
    baseline_state: Option<&'static str>,
    properties: ResultProperties<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ResultProperties<'a> {
    /// The path the report names (a model directory for a multi-file model).
    path: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    structural_hash: Option<&'a str>,
    /// A training checkpoint's model identity (docs/SPEC.md §5d).
    #[serde(skip_serializing_if = "Option::is_none")]
    model_identity: Option<&'a str>,
    /// A training checkpoint's groups: model, optimizer, scheduler, rng, other.
    #[serde(skip_serializing_if = "Option::is_none")]
    training_groups: Option<&'a [&'static str]>,
    /// A `pickle_globals` result: the tier of the global it names (dangerous, unknown,
    /// benign), for code-scanning filters.
    #[serde(skip_serializing_if = "Option::is_none")]
    pickle_tier: Option<&'static str>,
    policy_line: usize,
}

#[derive(Serialize)]
struct Fingerprints {
    #[serde(rename = "weightInspect/v1")]
    own: String,
    /// GitHub's upload action computes this one from the lines of a text file when it is
    /// missing; a model file has no lines, so it is the tool's own fingerprint too.
    #[serde(rename = "primaryLocationLineHash")]
    line_hash: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Location<'a> {
    physical_location: PhysicalLocation,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    logical_locations: Vec<LogicalLocation<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PhysicalLocation {
    artifact_location: ArtifactLocation,
    /// Code scanning places an alert on a line; a model file's is its first.
    #[serde(skip_serializing_if = "Option::is_none")]
    region: Option<Region>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ArtifactLocation {
    uri: String,
    uri_base_id: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Region {
    start_line: u32,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct LogicalLocation<'a> {
    name: &'a str,
    kind: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Invocation {
    execution_successful: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_execution_notifications: Vec<Notification>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Notification {
    level: Level,
    message: Text,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    locations: Vec<NotificationLocation>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct NotificationLocation {
    physical_location: PhysicalLocation,
}

impl CheckReport {
    /// The SARIF log of a `check` run.
    pub(crate) fn sarif(&self) -> String {
        render(&Input {
            violations: &self.violations,
            errors: &self.errors,
            policy: &self.policy,
            level: Level::Error,
            baseline: None,
            fail_on_any: false,
        })
    }
}

/// The bounds a log is cut to.
#[derive(Debug, Clone, Copy)]
struct Limits {
    results: usize,
    bytes: usize,
}

/// GitHub's bounds: 25,000 results; 10 MB gzipped, which a log of at most that many bytes
/// before compression always meets.
const GITHUB: Limits = Limits {
    results: 25_000,
    bytes: 10_000_000,
};

/// The SARIF log (pretty JSON, newline-terminated), cut to GitHub's bounds.
pub(crate) fn render(input: &Input<'_>) -> String {
    render_within(input, GITHUB)
}

fn render_within(input: &Input<'_>, limits: Limits) -> String {
    let mut kept = input.violations.len().min(limits.results);
    loop {
        let out = render_first(input, kept);
        if out.len() <= limits.bytes || kept == 0 {
            return out;
        }
        // Scale down by the overshoot, with a margin, and try again (once or twice).
        let fitting = (kept as u128 * limits.bytes as u128 / out.len() as u128) as usize;
        kept = (fitting * 95 / 100).min(kept - 1);
    }
}

/// The log with the first `kept` violations as results.
fn render_first(input: &Input<'_>, kept: usize) -> String {
    let results: Vec<SarifResult<'_>> = input.violations[..kept]
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let mut result = result_of(v, input.policy, input.level);
            if let Some(standing) = input.baseline.and_then(|b| b.get(i)) {
                result.baseline_state = Some(standing.baseline.sarif_state());
                if !standing.baseline.brought() && !input.fail_on_any {
                    result.level = Level::Warning;
                }
            }
            result
        })
        .collect();
    let omitted = input.violations.len() - kept;
    let mut notifications: Vec<Notification> = input
        .errors
        .iter()
        .map(|e| Notification {
            level: Level::Error,
            message: Text {
                text: format!("cannot check: {}", e.message()),
            },
            locations: vec![NotificationLocation {
                physical_location: physical(&e.path, None),
            }],
        })
        .collect();
    if omitted > 0 {
        notifications.push(Notification {
            level: Level::Warning,
            message: Text {
                text: format!(
                    "{omitted} of {} violations left out: code scanning accepts at most \
                     25,000 results and 10 MB per upload; the text or JSON report lists them \
                     all",
                    input.violations.len()
                ),
            },
            locations: Vec::new(),
        });
    }
    let log = Log {
        schema_uri: SCHEMA_URI,
        version: VERSION,
        runs: [Run {
            tool: Tool {
                driver: Driver {
                    name: "weight-inspect",
                    version: env!("CARGO_PKG_VERSION"),
                    semantic_version: env!("CARGO_PKG_VERSION"),
                    rules: RULES.iter().map(|r| rule(r, input.level)).collect(),
                },
            },
            results,
            invocations: [Invocation {
                execution_successful: input.errors.is_empty(),
                tool_execution_notifications: notifications,
            }],
            column_kind: "unicodeCodePoints",
            properties: RunProperties {
                policy: input.policy,
                violations: input.violations.len(),
                omitted_results: omitted,
            },
        }],
        properties: LogProperties {
            schema: crate::identity::SCHEMA_VERSION,
        },
    };
    let mut out = serde_json::to_string_pretty(&log).expect("the SARIF log serializes");
    out.push('\n');
    out
}

fn rule(&(id, short, help): &(&'static str, &'static str, &'static str), level: Level) -> Rule {
    Rule {
        id,
        name: id,
        short_description: Text { text: short.into() },
        full_description: Text { text: help.into() },
        help: Help {
            text: help.into(),
            markdown: format!("{help}\n\nSee the policy documentation (docs/policy.md)."),
        },
        default_configuration: Configuration { level },
        properties: RuleProperties {
            tags: ["model-files", "weight-inspect"],
        },
    }
}

fn result_of<'a>(v: &'a Violation, policy: &str, level: Level) -> SarifResult<'a> {
    let rule_index = RULES
        .iter()
        .position(|(id, ..)| *id == v.rule)
        .expect("every rule a violation names is in RULES");
    let file = v.detail.anchor.as_deref().unwrap_or(&v.path);
    let mut logical: Vec<LogicalLocation<'a>> = v
        .detail
        .tensors
        .iter()
        .map(|name| LogicalLocation {
            name,
            kind: "tensor",
        })
        .collect();
    logical.extend(v.detail.metadata.iter().map(|name| LogicalLocation {
        name,
        kind: "metadata",
    }));
    let fingerprint = fingerprint(v);
    SarifResult {
        rule_id: v.rule,
        rule_index,
        level,
        message: Text {
            text: format!(
                "{}: expected {}; found {} ({policy}:{}){}",
                v.rule,
                v.expected,
                v.found,
                v.policy_line,
                v.explanation
                    .as_deref()
                    .map(|why| format!(". {why}"))
                    .unwrap_or_default()
            ) + &v
                .detail
                .training
                .as_ref()
                .map(|(identity, groups)| {
                    format!(
                        " [a training checkpoint: model identity {}, groups {}]",
                        identity.get(..12).unwrap_or(identity),
                        groups.join(", ")
                    )
                })
                .unwrap_or_default(),
        },
        locations: [Location {
            physical_location: physical(file, Some(Region { start_line: 1 })),
            logical_locations: logical,
        }],
        partial_fingerprints: Fingerprints {
            own: fingerprint.clone(),
            line_hash: fingerprint,
        },
        baseline_state: None,
        properties: ResultProperties {
            path: &v.path,
            structural_hash: v.detail.structural_hash.as_deref(),
            model_identity: v.detail.training.as_ref().map(|(id, _)| id.as_str()),
            training_groups: v.detail.training.as_ref().map(|(_, g)| g.as_slice()),
            pickle_tier: (v.rule == "pickle_globals")
                .then_some(v.detail.key.as_deref())
                .flatten()
                .map(|global| crate::formats::pytorch::tier(global).name()),
            policy_line: v.policy_line,
        },
    }
}

/// The file a location points at; a directory (a model whose files do not fit together) is
/// a directory URI, without a line.
fn physical(path: &str, region: Option<Region>) -> PhysicalLocation {
    let is_file = !path.ends_with('/') && !path.is_empty();
    PhysicalLocation {
        artifact_location: ArtifactLocation {
            uri: uri_of(path),
            uri_base_id: "%SRCROOT%",
        },
        region: region.filter(|_| is_file),
    }
}

/// `path/rule/key/state`, hashed: `state` is the structural hash when the file was read as a
/// model, else what was found (a size, a storage, a format).
fn fingerprint(v: &Violation) -> String {
    let state = v.detail.structural_hash.as_deref().unwrap_or(&v.found);
    let mut hasher = Sha256::new();
    for part in [
        FINGERPRINT_KEY,
        &v.path,
        v.rule,
        v.detail.key.as_deref().unwrap_or(""),
        state,
    ] {
        hasher.update(part.as_bytes());
        hasher.update([0]);
    }
    hex::encode(hasher.finalize())
}

/// A repository-relative path as a relative URI reference: every byte but unreserved
/// characters and `/` percent-encoded (RFC 3986), so `:`, `%`, `#`, spaces and non-ASCII
/// names cannot change what it points at.
fn uri_of(path: &str) -> String {
    use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
    const ENCODED: &AsciiSet = &NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'.')
        .remove(b'_')
        .remove(b'~')
        .remove(b'/');
    utf8_percent_encode(path, ENCODED).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::check::Detail;

    fn violation(path: &str, rule: &'static str, hash: &str) -> Violation {
        Violation {
            path: path.into(),
            rule,
            expected: "only f16".into(),
            found: "q4_k in 1 tensor (x)".into(),
            policy_rule: 1,
            policy_line: 2,
            detail: Detail {
                key: Some("q4_k".into()),
                tensors: vec!["x".into()],
                structural_hash: Some(hash.into()),
                ..Detail::default()
            },
            explanation: None,
        }
    }

    #[test]
    fn uris_are_percent_encoded() {
        assert_eq!(uri_of("models/a b:c#%.gguf"), "models/a%20b%3Ac%23%25.gguf");
        assert_eq!(uri_of("m/é.gguf"), "m/%C3%A9.gguf");
        assert_eq!(uri_of("models/llama/"), "models/llama/");
        // Every ASCII byte but the unreserved ones and `/`, and every byte beyond ASCII.
        let all: String = (1..=0x7f_u8)
            .map(char::from)
            .chain(['\u{80}', '\u{10ffff}'])
            .collect();
        let expected: String = all
            .bytes()
            .map(|b| match b {
                b'0'..=b'9' | b'a'..=b'z' | b'A'..=b'Z' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                    char::from(b).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect();
        assert_eq!(uri_of(&all), expected);
    }

    #[test]
    fn fingerprints_follow_path_rule_key_and_structure() {
        let a = violation("m/a.gguf", "allowed_dtypes", "h1");
        assert_eq!(fingerprint(&a), fingerprint(&a.clone()));
        let other_hash = violation("m/a.gguf", "allowed_dtypes", "h2");
        let other_path = violation("m/b.gguf", "allowed_dtypes", "h1");
        let other_rule = violation("m/a.gguf", "denied_dtypes", "h1");
        let mut other_key = a.clone();
        other_key.detail.key = Some("q8_0".into());
        for b in [other_hash, other_path, other_rule, other_key] {
            assert_ne!(fingerprint(&a), fingerprint(&b));
        }
    }

    #[test]
    fn every_rule_of_the_policy_has_help() {
        for rule in [
            "allowed_dtypes",
            "denied_dtypes",
            "expected_hash",
            "expected_model_identity",
            "required_metadata",
            "forbidden_metadata",
            "max_tensors",
            "max_parameters",
            "max_rel_l2",
            "max_update_loss",
            "max_delta_rel_l2",
            "relation",
            "signature",
            "max_file_size",
            "require_lfs",
            "forbid_formats",
            "pickle_globals",
            "format",
            "complete",
            "model_files",
        ] {
            assert!(RULES.iter().any(|(id, ..)| *id == rule), "{rule}");
        }
    }

    #[test]
    fn results_beyond_the_limits_are_cut_with_a_note() {
        let violations: Vec<Violation> = (0..40)
            .map(|i| violation(&format!("m/{i}.gguf"), "allowed_dtypes", "h"))
            .collect();
        let input = Input {
            violations: &violations,
            errors: &[],
            policy: "p.toml",
            level: Level::Error,
            baseline: None,
            fail_on_any: false,
        };
        let kept = |limits: Limits| {
            let out = render_within(&input, limits);
            assert!(
                out.len() <= limits.bytes,
                "{} > {}",
                out.len(),
                limits.bytes
            );
            let log: serde_json::Value = serde_json::from_str(&out).unwrap();
            let run = &log["runs"][0];
            let n = run["results"].as_array().unwrap().len();
            assert_eq!(run["properties"]["omittedResults"], 40 - n);
            let notes = &run["invocations"][0]["toolExecutionNotifications"];
            let note = notes[0]["message"]["text"].as_str().unwrap_or_default();
            assert!(
                note.starts_with(&format!("{} of 40 violations left out", 40 - n)),
                "{note}"
            );
            n
        };
        assert_eq!(
            kept(Limits {
                results: 25,
                bytes: usize::MAX
            }),
            25
        );
        // Half the bytes of the results (the rules' help and the rest of the log apart).
        let whole = render_first(&input, 40).len();
        let empty = render_first(&input, 0).len();
        let n = kept(Limits {
            results: 40,
            bytes: empty + (whole - empty) / 2,
        });
        assert!((12..21).contains(&n), "{n}");
    }
}
