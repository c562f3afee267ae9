//! Evaluating the policy: one [`Subject`] (a path and where its bytes come from) in, the
//! [`Violation`]s of the rules that match its path out. Reading the subject is
//! [`super::subject`]'s job; this file holds the rules.

use serde::Serialize;

use super::config::{Effective, Expected, Policy, Rule, Sourced, format_policy_name};
use super::error::PolicyError;
use super::subject::{Judged, Origin, Storage, Subject, SubjectReader};
use crate::artifact::{Artifact, Format, Value};
use crate::escape::{shown, shown_message};
use crate::formats::pytorch;
use crate::read::Content;

type Result<T, E = PolicyError> = std::result::Result<T, E>;

/// One broken rule for one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Violation {
    /// Repository-relative path, `/`-separated.
    pub path: String,
    /// The policy key that is violated (`allowed_dtypes`, `require_lfs`, ...), or `format`
    /// when a structural key applies to a file that is not a readable GGUF/safetensors file.
    pub rule: &'static str,
    /// What the rule expects and what the file holds, as text: the names in them (metadata
    /// keys, tensor names, paths, string values) are shown escaped
    /// ([`crate::escape::shown`]), so reports print them as they are.
    pub expected: String,
    pub found: String,
    /// The `[[rules]]` entry (1-based) the key came from, and its line in the policy file.
    pub policy_rule: usize,
    pub policy_line: usize,
    /// Where in the file, and in which version of it: for SARIF. Not in the JSON report.
    #[serde(skip)]
    pub detail: Detail,
    /// For `expected_hash`: what differs structurally from the pinned file, or the command
    /// that shows it (see [`super::explain`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub explanation: Option<String>,
}

/// What a violation is about inside its file, beyond the text of the report: what SARIF
/// shows as logical locations and builds its fingerprints from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Detail {
    /// The one thing inside the file the violation is about, which tells two violations of
    /// one rule in one file apart: a dtype, a metadata key.
    pub key: Option<String>,
    /// Tensors named by the violation (the first [`MAX_NAMED_TENSORS`]), as they are.
    pub tensors: Vec<String>,
    /// Metadata keys named by the violation, as they are.
    pub metadata: Vec<String>,
    /// The structural hash of the file or model, when it was read as one.
    pub structural_hash: Option<String>,
    /// A training checkpoint's model identity and its groups (docs/SPEC.md §5d), so that a
    /// result shows which model of which run it is about.
    pub training: Option<(String, Vec<&'static str>)>,
    /// For a model directory, what stands for it: its index or first part, or the directory
    /// itself as `dir/` when its files do not fit together.
    pub anchor: Option<String>,
}

/// Tensors a violation names as logical locations.
pub(super) const MAX_NAMED_TENSORS: usize = 10;

impl Violation {
    fn new<T>(
        path: &str,
        rule: &'static str,
        from: &Sourced<'_, T>,
        expected: String,
        found: String,
    ) -> Self {
        Violation::at(path, rule, from.rule, expected, found)
    }

    fn at(path: &str, rule: &'static str, source: &Rule, expected: String, found: String) -> Self {
        Violation {
            path: path.to_string(),
            rule,
            expected,
            found,
            policy_rule: source.number,
            policy_line: source.line,
            detail: Detail::default(),
            explanation: None,
        }
    }

    fn with_key(mut self, key: &str) -> Self {
        self.detail.key = Some(key.to_owned());
        self
    }

    fn naming_tensors(mut self, names: &[&str]) -> Self {
        let named = names.iter().take(MAX_NAMED_TENSORS);
        self.detail.tensors = named.map(|n| (*n).to_owned()).collect();
        self
    }

    fn naming_metadata(mut self, key: &str) -> Self {
        self.detail.metadata = vec![key.to_owned()];
        self.with_key(key)
    }
}

/// Evaluates `subject` against `policy`. None when no rule covers its path; otherwise the
/// violations (empty when clean). Errors are conditions that prevent judging the file: an
/// LFS object missing from the local store, an unreadable file or object.
pub(crate) fn evaluate(policy: &Policy, subject: &Subject<'_>) -> Result<Option<Vec<Violation>>> {
    let Some(eff) = policy.effective(&subject.path) else {
        return Ok(None);
    };
    if let Origin::Refused(reason) = &subject.origin {
        return Err(PolicyError::file(&subject.path, reason.clone()));
    }
    let mut ev = Evaluation {
        reader: SubjectReader::new(subject),
        violations: Vec::new(),
    };
    ev.run(&eff)?;
    if let Some(rule) = eff.signature {
        let found = super::signature::check(&policy.source, rule.rule, subject, rule.value)?;
        if let Some(found) = found {
            let expected = super::signature::expected(rule.value);
            let v = Violation::new(&subject.path, "signature", &rule, expected, found);
            ev.violations.push(v);
        }
    }
    if let Origin::Model(artifact) = &subject.origin
        && let Some(files) = &artifact.layout.files
    {
        let file = files
            .index
            .as_ref()
            .or(files.parts.first().map(|p| &p.file));
        if let Some(file) = file {
            let anchor = format!("{}/{file}", subject.path);
            for v in &mut ev.violations {
                v.detail.anchor = Some(anchor.clone());
            }
        }
    }
    Ok(Some(ev.violations))
}

/// The violation of a model directory whose files do not read as one model (a shard staged
/// without the index that names it, a part missing): a model that cannot be judged as a whole
/// is itself against the policy that covers it.
pub(super) fn unassembled(policy: &Policy, dir: &str, why: &dyn std::fmt::Display) -> Violation {
    let rule = policy
        .rules
        .iter()
        .rev()
        .find(|r| r.matches(dir))
        .expect("the caller checked that a rule covers the directory");
    let mut v = Violation::at(
        dir,
        "model_files",
        rule,
        "the files of one model that fit together (an index and its shards, or parts 1..N)"
            .to_owned(),
        shown_message(&why.to_string()).into_owned(),
    );
    v.detail.anchor = Some(format!("{dir}/"));
    v
}

struct Evaluation<'s, 'r> {
    reader: SubjectReader<'s, 'r>,
    violations: Vec<Violation>,
}

impl Evaluation<'_, '_> {
    fn path(&self) -> &str {
        self.reader.path()
    }

    fn push(&mut self, v: Violation) {
        self.violations.push(v);
    }

    fn run(&mut self, eff: &Effective<'_>) -> Result<()> {
        // How git stores a file is judged for each file; a model directory's files are
        // subjects of their own.
        if let Some(req) = eff.require_lfs
            && *req.value
            && !matches!(self.reader.origin(), Origin::Model(_))
        {
            self.check_lfs(&req)?;
        }
        if let Some(max) = eff.max_file_size {
            let size = self.reader.file_size()?;
            if size > *max.value {
                let v = Violation::new(
                    self.path(),
                    "max_file_size",
                    &max,
                    format!("at most {}", human_size(*max.value)),
                    human_size(size),
                );
                self.push(v);
            }
        }
        self.check_delta_loss(eff)?;
        let globals_rule = eff
            .forbid_tiers
            .map(|s| s.rule)
            .or(eff.forbid_globals.map(|s| s.rule))
            .or(eff.allow_globals.map(|s| s.rule));
        if !eff.needs_structure() && eff.forbid_formats.is_none() && globals_rule.is_none() {
            return self.judge_without_content_keys(eff);
        }
        let content = self.reader.content()?;
        if let (Some(forbid), Some(format)) = (eff.forbid_formats, format_of(&content))
            && forbid.value.contains(&format)
        {
            let expected = format!(
                "none of the formats {}",
                forbid
                    .value
                    .iter()
                    .map(|f| format_policy_name(*f))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            let v = Violation::new(
                self.path(),
                "forbid_formats",
                &forbid,
                expected,
                shown(&content.describe()).into_owned(),
            );
            self.push(v);
        }
        // A pickle's globals are judged wherever its content is read: dangerous ones fail by
        // default.
        let source = globals_rule
            .or(eff.forbid_formats.map(|s| s.rule))
            .unwrap_or_else(|| first_structural_rule(eff));
        for v in pickle_globals(self.path(), eff, source, &content) {
            self.push(v);
        }
        if !eff.needs_structure() {
            self.check_complete(eff, &content);
            self.stamp_hash(&content);
            return Ok(());
        }
        let artifact = match content.artifact() {
            Some(a) => a,
            None => {
                let keys = eff.structural_keys();
                let first_rule = first_structural_rule(eff);
                let v = Violation::at(
                    self.path(),
                    "format",
                    first_rule,
                    format!(
                        "a readable GGUF, safetensors or PyTorch file (for {})",
                        keys.join(", ")
                    ),
                    shown(&content.describe()).into_owned(),
                );
                self.push(v);
                return Ok(());
            }
        };
        let found = structural_violations(self.path(), eff, artifact);
        self.violations.extend(found);
        self.check_complete(eff, &content);
        if let Some(bound) = eff.conversion {
            let subject = self.reader.subject();
            let expected = format!(
                "every tensor within rel_l2 {} of {}",
                bound.value.max_rel_l2,
                shown(&super::conversion::reference_of(&subject.path, bound.value))
            );
            for finding in super::conversion::check(subject, artifact, bound.value)? {
                let mut v = Violation::new(
                    self.path(),
                    "max_rel_l2",
                    &bound,
                    expected.clone(),
                    finding.found,
                );
                v.detail.tensors = finding.tensor.iter().cloned().collect();
                v.detail.key = finding.tensor;
                self.push(v);
            }
        }
        if let Some(rule) = eff.relation {
            let subject = self.reader.subject();
            let expected = format!(
                "a {} of {}",
                rule.value.allowed.join(" or "),
                shown(&super::relation::reference_of(&subject.path, rule.value))
            );
            if let Some(found) = super::relation::check(subject, artifact, rule.value)? {
                let v = Violation::new(self.path(), "relation", &rule, expected, found);
                self.push(v);
            }
        }
        self.stamp_hash(&content);
        Ok(())
    }

    /// `max_update_loss` and `max_delta_rel_l2` on a `.wdelta` file: the figures its header
    /// records (measured by `delta create`). A lossless delta loses nothing; a lossy one
    /// without figures cannot prove its bound and is a violation. Other files are not judged
    /// by these keys.
    fn check_delta_loss(&mut self, eff: &Effective<'_>) -> Result<()> {
        use crate::formats::wdelta::AnyWdelta;
        let bounds = [
            (
                eff.max_update_loss,
                "max_update_loss",
                "share of the update lost",
            ),
            (
                eff.max_delta_rel_l2,
                "max_delta_rel_l2",
                "rel_l2 against the fine-tune",
            ),
        ];
        if bounds.iter().all(|(b, ..)| b.is_none()) {
            return Ok(());
        }
        let Some(parsed) = self.reader.wdelta()? else {
            return Ok(());
        };
        for (bound, key, what) in bounds {
            let Some(bound) = bound else { continue };
            let expected = format!("a .wdelta whose {what} is at most {}", bound.value);
            let found = match &parsed {
                Err(why) => Some(format!(
                    "an unreadable .wdelta ({})",
                    shown_message(&why.to_string())
                )),
                Ok(AnyWdelta::Lossless(_)) => None,
                Ok(AnyWdelta::Lossy(file)) => {
                    let strategy = file.header.strategy.name();
                    match &file.header.loss {
                        None => Some(format!(
                            "a lossy delta ({strategy}) that records no loss figures, so its loss \
                             is unknown; make it again with `weight-inspect delta create` (not \
                             against a --chain), or store it lossless"
                        )),
                        Some(loss) => {
                            let (model, worst) = if key == "max_update_loss" {
                                (loss.update_lost, loss.worst_update_lost)
                            } else {
                                (loss.rel_l2, loss.worst_rel_l2)
                            };
                            let over = model.is_none_or(|m| m > *bound.value);
                            over.then(|| {
                                let figure = model.map_or(
                                    "infinite (a zero update that does \
                                     not come back exactly)"
                                        .to_owned(),
                                    |m| format!("{m:.6}"),
                                );
                                let mut found = format!("{strategy}: {figure} over the model");
                                if let Some(name) = &loss.worst_tensor {
                                    let w =
                                        worst.map_or("infinite".to_owned(), |w| format!("{w:.6}"));
                                    found.push_str(&format!("; worst tensor {}: {w}", shown(name)));
                                }
                                found
                            })
                        }
                    }
                }
            };
            if let Some(found) = found {
                let mut v = Violation::new(self.path(), key, &bound, expected, found);
                if let Ok(AnyWdelta::Lossy(file)) = &parsed
                    && let Some(name) = file
                        .header
                        .loss
                        .as_ref()
                        .and_then(|l| l.worst_tensor.clone())
                {
                    v.detail.tensors = vec![name];
                }
                self.push(v);
            }
        }
        Ok(())
    }

    /// A file that no content key reads. Its pickles are judged all the same (a rule that
    /// matches a checkpoint reaching `os.system` must fail it, whatever its keys), and
    /// `complete` set to true reads it like any structural key; left to its default,
    /// `complete` judges model files (by name, or a model directory). A file whose bytes are
    /// not at hand (an LFS object neither here nor on the server) is judged by neither,
    /// unless `complete = true` asks for it.
    fn judge_without_content_keys(&mut self, eff: &Effective<'_>) -> Result<()> {
        let explicit = eff.complete.is_some();
        let model_by_name = matches!(self.reader.origin(), Origin::Model(_))
            || Format::from_path(self.path()).is_some();
        let judge_complete = eff.requires_complete() && (explicit || model_by_name);
        let content = match self.reader.content() {
            Ok(content) => content,
            Err(e) if judge_complete && explicit => return Err(e),
            Err(_) => return Ok(()),
        };
        if let Some(rule) = eff.last_rule {
            for v in pickle_globals(self.path(), eff, rule, &content) {
                self.push(v);
            }
        }
        if judge_complete {
            self.check_complete(eff, &content);
            self.check_unreadable_pickle(eff, &content);
        }
        self.stamp_hash(&content);
        Ok(())
    }

    /// A pickle file that does not read to its end (a zip without its directory, a stream
    /// that breaks off) cannot be called complete: what its scan did not reach is not known.
    fn check_unreadable_pickle(&mut self, eff: &Effective<'_>, content: &Judged) {
        let (Content::Invalid { error, .. }, Some(report)) = (&content.content, &content.pickle)
        else {
            return;
        };
        if report.incomplete.is_none() {
            return;
        }
        let found = shown_message(&format!("unreadable: {error}")).into_owned();
        self.push_incomplete(eff, found);
    }

    /// A model cut short (an interrupted download or copy) violates `complete` unless a rule
    /// turns it off.
    fn check_complete(&mut self, eff: &Effective<'_>, content: &Judged) {
        let Some(incomplete) = content.artifact().and_then(|a| a.layout.incomplete()) else {
            return;
        };
        if !eff.requires_complete() {
            return;
        }
        self.push_incomplete(
            eff,
            format!("incomplete: {incomplete}; fetch or copy the file again"),
        );
    }

    /// A `complete` violation, from the rule that sets `complete` or else the last that
    /// matches.
    fn push_incomplete(&mut self, eff: &Effective<'_>, found: String) {
        let Some(rule) = eff.complete.map(|c| c.rule).or(eff.last_rule) else {
            return;
        };
        let v = Violation::at(
            self.path(),
            "complete",
            rule,
            "a complete file: every byte of tensor data its header declares".to_owned(),
            found,
        );
        self.push(v);
    }

    /// Records the structural hash of a model on its violations (computed only when there
    /// are some).
    fn stamp_hash(&mut self, content: &Judged) {
        let Some(artifact) = content.artifact() else {
            return;
        };
        if self.violations.is_empty() {
            return;
        }
        let hash = crate::identity::structural_hash(artifact);
        let training = artifact
            .layout
            .training()
            .and_then(|t| Some((crate::identity::model_identity(artifact)?, t.groups.clone())));
        for v in &mut self.violations {
            v.detail.structural_hash = Some(hash.clone());
            v.detail.training.clone_from(&training);
        }
    }

    fn check_lfs(&mut self, req: &Sourced<'_, bool>) -> Result<()> {
        match self.reader.storage()? {
            Storage::Lfs(_) | Storage::LfsByAttributes => {}
            Storage::Git { why } => {
                let path = self.path().to_string();
                let p = shown(&path);
                let v = Violation::new(
                    &path,
                    "require_lfs",
                    req,
                    "an LFS pointer in git".into(),
                    format!(
                        "a regular git blob ({why}); fix: git rm --cached '{p}' && \
                         git lfs track '{p}' && git add .gitattributes '{p}'"
                    ),
                );
                self.push(v);
            }
        }
        Ok(())
    }
}

/// `forbid_tiers` (dangerous when unset), `forbid_globals` and `allow_globals` on what a
/// pickle imports: one violation per global that fails, naming its tier.
fn pickle_globals(
    path: &str,
    eff: &Effective<'_>,
    source: &Rule,
    content: &Judged,
) -> Vec<Violation> {
    let Some(report) = &content.pickle else {
        return Vec::new();
    };
    let default_tiers = vec!["dangerous".to_owned()];
    let tiers = eff.forbid_tiers.map_or(&default_tiers, |s| s.value);
    let listed = |list: Option<Sourced<'_, Vec<String>>>, g: &str| {
        list.is_some_and(|l| l.value.iter().any(|x| x == g))
    };
    // Members that climb out of the extraction directory are named beside each global.
    let escaping = report
        .escaping_note()
        .map(|note| format!("; {note}"))
        .unwrap_or_default();
    let mut out = Vec::new();
    for global in &report.imports {
        if pytorch::is_expected_import(global) {
            continue;
        }
        let tier = pytorch::tier(global).name();
        let forbidden = listed(eff.forbid_globals, global)
            || (tiers.iter().any(|t| t == tier) && !listed(eff.allow_globals, global));
        if forbidden {
            out.push(
                Violation::at(
                    path,
                    "pickle_globals",
                    source,
                    format!(
                        "no pickle global of the tiers {} or in forbid_globals (allow_globals \
                         lets one through)",
                        tiers.join(", ")
                    ),
                    format!("{tier}: {}{escaping}", shown(global)),
                )
                .with_key(global),
            );
        }
    }
    out
}

/// The format `forbid_formats` names the content by, if it is one of them.
fn format_of(judged: &Judged) -> Option<Format> {
    match &judged.content {
        Content::Model(a) => Some(a.format),
        Content::Invalid { format, .. } => Some(*format),
        Content::Other { .. } | Content::Delta(_) | Content::BadDelta { .. } => None,
    }
}

fn first_structural_rule<'a>(eff: &Effective<'a>) -> &'a Rule {
    let candidates = [
        eff.allowed_dtypes.map(|s| s.rule),
        eff.denied_dtypes.map(|s| s.rule),
        eff.expected_hash.map(|s| s.rule),
        eff.expected_model_identity.map(|s| s.rule),
        eff.required_metadata.map(|s| s.rule),
        eff.forbidden_metadata.map(|s| s.rule),
        eff.max_tensors.map(|s| s.rule),
        eff.max_parameters.map(|s| s.rule),
        eff.conversion.map(|s| s.rule),
        eff.relation.map(|s| s.rule),
    ];
    candidates
        .into_iter()
        .flatten()
        .min_by_key(|r| r.number)
        .expect("called only when a structural key is set")
}

fn structural_violations(path: &str, eff: &Effective<'_>, a: &Artifact) -> Vec<Violation> {
    let mut out = dtype_violations(path, eff, a);
    out.extend(pin_violations(path, eff, a));
    out.extend(metadata_violations(path, eff, a));
    out.extend(count_violations(path, eff, a));
    out
}

/// `allowed_dtypes` and `denied_dtypes`: one violation per dtype, naming its tensors.
fn dtype_violations(path: &str, eff: &Effective<'_>, a: &Artifact) -> Vec<Violation> {
    let mut out = Vec::new();
    if let Some(allowed) = eff.allowed_dtypes {
        for (dtype, names) in dtype_usage(a) {
            if !allowed.value.iter().any(|d| d == dtype) {
                out.push(
                    Violation::new(
                        path,
                        "allowed_dtypes",
                        &allowed,
                        format!("only {}", allowed.value.join(", ")),
                        tensors_of(dtype, &names),
                    )
                    .with_key(dtype)
                    .naming_tensors(&names),
                );
            }
        }
    }
    if let Some(denied) = eff.denied_dtypes {
        for (dtype, names) in dtype_usage(a) {
            if denied.value.iter().any(|d| d == dtype) {
                out.push(
                    Violation::new(
                        path,
                        "denied_dtypes",
                        &denied,
                        format!("none of {}", denied.value.join(", ")),
                        tensors_of(dtype, &names),
                    )
                    .with_key(dtype)
                    .naming_tensors(&names),
                );
            }
        }
    }
    out
}

/// `expected_hash` and `expected_model_identity`: pinned identities, of complete files only.
fn pin_violations(path: &str, eff: &Effective<'_>, a: &Artifact) -> Vec<Violation> {
    let mut out = Vec::new();
    if let Some(expected) = eff.expected_hash {
        // A truncated copy's header still names the whole model: a pinned identity holds only
        // for the complete file, whatever `complete` says.
        let actual = crate::identity::structural_hash(a);
        let incomplete = a.layout.incomplete();
        if &actual != expected.value || incomplete.is_some() {
            let found = match &incomplete {
                Some(incomplete) => format!("{actual}, but the file is incomplete: {incomplete}"),
                None => actual,
            };
            out.push(Violation::new(
                path,
                "expected_hash",
                &expected,
                expected.value.clone(),
                found,
            ));
        }
    }
    if let Some(expected) = eff.expected_model_identity {
        // Pinned like `expected_hash`: for the complete file only.
        let actual = crate::identity::model_identity(a);
        let incomplete = a.layout.incomplete();
        if actual.as_ref() != Some(expected.value) || incomplete.is_some() {
            let found = match (actual, &incomplete) {
                (Some(actual), Some(incomplete)) => {
                    format!("{actual}, but the file is incomplete: {incomplete}")
                }
                (Some(actual), None) => actual,
                (None, _) => "no model identity: not a training checkpoint (model weights \
                              beside optimizer, scheduler or RNG state)"
                    .to_owned(),
            };
            out.push(Violation::new(
                path,
                "expected_model_identity",
                &expected,
                expected.value.clone(),
                found,
            ));
        }
    }
    out
}

/// `required_metadata` and `forbidden_metadata`.
fn metadata_violations(path: &str, eff: &Effective<'_>, a: &Artifact) -> Vec<Violation> {
    let mut out = Vec::new();
    if let Some(required) = eff.required_metadata {
        for (key, want) in required.value {
            let shown_key = shown(key);
            let expected = match want {
                Expected::Present => format!("metadata key {shown_key}"),
                Expected::Equals(v) => format!("{shown_key} = {}", shown(&v.to_string())),
            };
            match (a.metadata.get(key), want) {
                (None, _) => out.push(
                    Violation::new(
                        path,
                        "required_metadata",
                        &required,
                        expected,
                        format!("no metadata key {shown_key}"),
                    )
                    .naming_metadata(key),
                ),
                (Some(actual), Expected::Equals(v)) if !value_matches(v, actual) => out.push(
                    Violation::new(
                        path,
                        "required_metadata",
                        &required,
                        expected,
                        format!(
                            "{shown_key} = {}",
                            crate::render::text::value_summary(actual)
                        ),
                    )
                    .naming_metadata(key),
                ),
                _ => {}
            }
        }
    }
    if let Some(forbidden) = eff.forbidden_metadata {
        for key in forbidden.value {
            if let Some(actual) = a.metadata.get(key) {
                let shown_key = shown(key);
                out.push(
                    Violation::new(
                        path,
                        "forbidden_metadata",
                        &forbidden,
                        format!("no metadata key {shown_key}"),
                        format!(
                            "{shown_key} = {}",
                            crate::render::text::value_summary(actual)
                        ),
                    )
                    .naming_metadata(key),
                );
            }
        }
    }
    out
}

/// `max_tensors` and `max_parameters`.
fn count_violations(path: &str, eff: &Effective<'_>, a: &Artifact) -> Vec<Violation> {
    let mut out = Vec::new();
    if let Some(max) = eff.max_tensors {
        let n = a.tensors.len() as u64;
        if n > *max.value {
            out.push(Violation::new(
                path,
                "max_tensors",
                &max,
                format!("at most {} tensors", max.value),
                format!("{n} tensors"),
            ));
        }
    }
    if let Some(max) = eff.max_parameters {
        let (n, _) = a.parameter_counts();
        if n > *max.value {
            out.push(Violation::new(
                path,
                "max_parameters",
                &max,
                format!("at most {} parameters", max.value),
                format!("{n} parameters"),
            ));
        }
    }
    out
}

/// Tensor names by dtype, dtypes sorted by name.
fn dtype_usage(a: &Artifact) -> std::collections::BTreeMap<&'static str, Vec<&str>> {
    let mut by = std::collections::BTreeMap::<&'static str, Vec<&str>>::new();
    for (name, t) in &a.tensors {
        by.entry(t.dtype.name).or_default().push(name);
    }
    by
}

fn tensors_of(dtype: &str, names: &[&str]) -> String {
    const SHOWN: usize = 3;
    let listed = names
        .iter()
        .take(SHOWN)
        .map(|n| shown(n))
        .collect::<Vec<_>>()
        .join(", ");
    let more = if names.len() > SHOWN { ", ..." } else { "" };
    let noun = if names.len() == 1 {
        "tensor"
    } else {
        "tensors"
    };
    format!("{dtype} in {} {noun} ({listed}{more})", names.len())
}

/// Whether a metadata value equals the value written in the policy. Numbers compare by value
/// across widths; safetensors metadata (always strings) also matches a number or boolean
/// written without quotes.
fn value_matches(expected: &toml::Value, actual: &Value) -> bool {
    use toml::Value as T;
    match (expected, actual) {
        (T::String(e), Value::String(a)) => e == a,
        (T::Integer(e), Value::String(a)) => a.trim() == e.to_string(),
        (T::Boolean(e), Value::String(a)) => a.trim() == e.to_string(),
        (T::Float(e), Value::String(a)) => a.trim().parse::<f64>().ok() == Some(*e),
        (T::Boolean(e), Value::Bool(a)) => e == a,
        (T::Integer(e), actual) => {
            integer_of(actual).is_some_and(|a| a == i128::from(*e))
                || float_of(actual).is_some_and(|a| a == *e as f64)
        }
        (T::Float(e), actual) => float_of(actual).is_some_and(|a| a == *e || a as f32 == *e as f32),
        (T::Array(es), Value::Array(arr)) => {
            es.len() == arr.len()
                && es
                    .iter()
                    .enumerate()
                    .all(|(i, e)| arr.get(i).is_some_and(|a| value_matches(e, &a)))
        }
        _ => false,
    }
}

fn integer_of(v: &Value) -> Option<i128> {
    Some(match v {
        Value::U8(x) => (*x).into(),
        Value::I8(x) => (*x).into(),
        Value::U16(x) => (*x).into(),
        Value::I16(x) => (*x).into(),
        Value::U32(x) => (*x).into(),
        Value::I32(x) => (*x).into(),
        Value::U64(x) => (*x).into(),
        Value::I64(x) => (*x).into(),
        _ => return None,
    })
}

fn float_of(v: &Value) -> Option<f64> {
    match v {
        Value::F32(x) => Some(f64::from(x.value())),
        Value::F64(x) => Some(x.value()),
        _ => None,
    }
}

/// "5.00 GB (5000000000 bytes)".
fn human_size(bytes: u64) -> String {
    const UNITS: [(&str, u64); 4] = [
        ("TB", 1_000_000_000_000),
        ("GB", 1_000_000_000),
        ("MB", 1_000_000),
        ("kB", 1_000),
    ];
    for (unit, size) in UNITS {
        if bytes >= size {
            return format!("{:.2} {unit} ({bytes} bytes)", bytes as f64 / size as f64);
        }
    }
    format!("{bytes} bytes")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::artifact::{Array, F32Bits};

    #[test]
    fn values_compare_by_meaning() {
        let t = |s: &str| -> toml::Value {
            toml::from_str::<toml::Table>(&format!("v = {s}")).unwrap()["v"].clone()
        };
        assert!(value_matches(
            &t("\"llama\""),
            &Value::String("llama".into())
        ));
        assert!(!value_matches(
            &t("\"llama\""),
            &Value::String("qwen2".into())
        ));
        assert!(value_matches(&t("32"), &Value::U32(32)));
        assert!(value_matches(&t("32"), &Value::U64(32)));
        assert!(!value_matches(&t("-1"), &Value::U64(u64::MAX)));
        assert!(value_matches(
            &t("10000"),
            &Value::F32(F32Bits(10000f32.to_bits()))
        ));
        assert!(value_matches(
            &t("0.1"),
            &Value::F32(F32Bits(0.1f32.to_bits()))
        ));
        assert!(value_matches(&t("true"), &Value::Bool(true)));
        assert!(value_matches(&t("3"), &Value::String("3".into())));
        assert!(value_matches(
            &t("[1, 2]"),
            &Value::Array(Array::I32(vec![1, 2]))
        ));
        assert!(!value_matches(
            &t("[1, 2]"),
            &Value::Array(Array::I32(vec![1, 2, 3]))
        ));
        assert!(!value_matches(&t("\"1\""), &Value::U32(1)));
    }

    #[test]
    fn sizes_read_well() {
        assert_eq!(human_size(999), "999 bytes");
        assert_eq!(human_size(5_000_000_000), "5.00 GB (5000000000 bytes)");
    }
}
