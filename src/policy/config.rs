//! The policy file (`.weight-inspect.toml`): parsing, validation and per-path rule merging.
//!
//! Every mistake in the file is an error that names the file, line and column: TOML syntax,
//! unknown keys (`deny_unknown_fields`), wrong value types, and semantic errors (bad globs,
//! hashes that are not 64 hex digits, unknown dtypes or formats), which are raised while
//! deserializing so that the toml crate attaches the value's span to them.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};

use super::error::PolicyError;
use crate::artifact::Format;

/// Name of the policy file at the repository root.
pub(crate) const POLICY_FILE: &str = ".weight-inspect.toml";

/// The caps of a policy (a pull request's own policy is applied by `ci`): its size, its rules
/// and its globs (`paths` and `exclude` of every rule together). Parsing is linear in the text,
/// and matching in the rules and globs.
pub(super) const MAX_POLICY_BYTES: u64 = 1 << 20;
pub(super) const MAX_RULES: usize = 4096;
pub(super) const MAX_GLOBS: usize = 4096;

/// A parsed, validated policy.
#[derive(Debug, Clone)]
pub struct Policy {
    /// The file it was read from, as given (used in messages).
    pub source: PathBuf,
    /// The rules in the order the file gives them.
    pub rules: Vec<Rule>,
}

/// One `[[rules]]` entry.
#[derive(Debug, Clone)]
pub struct Rule {
    /// 1-based position among the rules.
    pub number: usize,
    /// Line of the rule's first key in the policy file.
    pub line: usize,
    pub paths: Vec<String>,
    pub exclude: Vec<String>,
    matcher: GlobSet,
    excluder: GlobSet,
    pub settings: Settings,
}

impl Rule {
    pub fn matches(&self, path: &str) -> bool {
        self.matcher.is_match(path) && !self.excluder.is_match(path)
    }
}

/// How a policy names a format: `gguf`, `safetensors`, and `pickle` for PyTorch checkpoints and
/// every other pickle (`pytorch` is accepted too).
pub(crate) fn format_policy_name(format: Format) -> &'static str {
    match format {
        Format::Pytorch => "pickle",
        other => other.name(),
    }
}

fn format_list<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<Format>>, D::Error> {
    let names = Vec::<String>::deserialize(d)?;
    names
        .iter()
        .map(|name| match name.as_str() {
            "gguf" => Ok(Format::Gguf),
            "safetensors" => Ok(Format::Safetensors),
            "pickle" | "pytorch" => Ok(Format::Pytorch),
            other => Err(de::Error::custom(format!(
                "unknown format {other:?}; expected one of gguf, safetensors, pickle"
            ))),
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

fn tier_list<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<String>>, D::Error> {
    let names = Vec::<String>::deserialize(d)?;
    for name in &names {
        if !matches!(name.as_str(), "dangerous" | "unknown" | "benign") {
            return Err(de::Error::custom(format!(
                "unknown tier {name:?}; expected one of dangerous, unknown, benign"
            )));
        }
    }
    Ok(Some(names))
}

/// A metadata value required by `required_metadata`, as written in the policy.
#[derive(Debug, Clone, PartialEq)]
pub enum Expected {
    /// The key must exist, with any value.
    Present,
    /// The key must exist with this value.
    Equals(toml::Value),
}

/// The checks of one rule. Every key is optional; when several rules match a path, each key
/// takes its value from the last matching rule that sets it.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    pub allowed_dtypes: Option<Vec<String>>,
    pub denied_dtypes: Option<Vec<String>>,
    pub expected_hash: Option<String>,
    /// A PyTorch training checkpoint's model identity (docs/SPEC.md §5d): its model weights
    /// and groups pinned, whatever step of the run it is.
    pub expected_model_identity: Option<String>,
    pub required_metadata: Option<BTreeMap<String, Expected>>,
    pub forbidden_metadata: Option<Vec<String>>,
    pub max_tensors: Option<u64>,
    pub max_parameters: Option<u64>,
    pub max_file_size: Option<u64>,
    pub require_lfs: Option<bool>,
    pub forbid_formats: Option<Vec<Format>>,
    /// A pickle's globals: tiers that fail (`dangerous`, `unknown`, `benign`; dangerous when
    /// unset), globals that fail whatever their tier, globals that pass whatever their tier.
    pub forbid_tiers: Option<Vec<String>>,
    pub forbid_globals: Option<Vec<String>>,
    pub allow_globals: Option<Vec<String>>,
    /// A GGUF's conversion source, relative to the GGUF's directory, and the largest rel_l2
    /// any tensor may have against it (set together).
    pub conversion: Option<ConversionBound>,
    /// Whether a model file must hold all the tensor data its header declares; None means
    /// true (a policy turns it off for files kept partial on purpose).
    pub complete: Option<bool>,
    /// A `.wdelta` file's share of the update lost (‖rebuilt − ft‖ / ‖ft − base‖, over the
    /// whole model), as its header records it; a lossless delta loses nothing.
    pub max_update_loss: Option<f64>,
    /// A `.wdelta` file's reconstruction error (‖rebuilt − ft‖ / ‖ft‖, over the whole model).
    pub max_delta_rel_l2: Option<f64>,
    /// `relation` with `reference`: how the file must relate to the reference model
    /// (`relate`'s relations or the Hub's spellings).
    pub relation: Option<RelationRule>,
    /// `signature`: the file must be listed, unchanged, by an OpenSSF model signature
    /// (`model.sig`) in its folder or one above, signed by whom the rule trusts.
    pub signature: Option<SignatureRule>,
}

/// `signature = { public_key = "…" }` (or `certificate_chain = […]`, or `identity` with
/// `identity_provider` and an optional `trust_root`): whom a model's signature must come from.
/// Paths are relative to the repository's root and read from the work tree, like the policy.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignatureRule {
    /// A PEM public key (ECDSA P-256, P-384 or P-521).
    pub public_key: Option<String>,
    /// PEM certificates trusted as anchors of the signing certificate's chain.
    #[serde(default)]
    pub certificate_chain: Vec<String>,
    /// Sigstore keyless: the signer's identity (certificate SAN) and OIDC issuer.
    pub identity: Option<String>,
    pub identity_provider: Option<String>,
    /// A Sigstore `trusted_root.json` (default: the public-good root embedded in the binary).
    pub trust_root: Option<String>,
    /// The signature file's name (default `model.sig`), looked for in the judged file's folder
    /// and then in each folder above it.
    #[serde(default = "default_signature_file")]
    pub file: String,
}

fn default_signature_file() -> String {
    "model.sig".to_owned()
}

/// `relation` + `reference`: the relations a file may have to the reference beside it.
#[derive(Debug, Clone, PartialEq)]
pub struct RelationRule {
    pub reference: String,
    pub allowed: Vec<String>,
}

/// `reference` and `max_rel_l2`: a GGUF compared with the model it was converted from.
#[derive(Debug, Clone, PartialEq)]
pub struct ConversionBound {
    pub reference: String,
    pub max_rel_l2: f64,
}

/// A setting together with the rule it came from.
#[derive(Debug)]
pub struct Sourced<'a, T> {
    pub value: &'a T,
    pub rule: &'a Rule,
}

// Manual impls: derive would require `T: Copy`, but only references are copied.
impl<T> Clone for Sourced<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Sourced<'_, T> {}

/// The settings in force for one path, merged from every matching rule in file order.
#[derive(Debug, Clone, Default)]
pub struct Effective<'a> {
    pub allowed_dtypes: Option<Sourced<'a, Vec<String>>>,
    pub denied_dtypes: Option<Sourced<'a, Vec<String>>>,
    pub expected_hash: Option<Sourced<'a, String>>,
    pub expected_model_identity: Option<Sourced<'a, String>>,
    pub required_metadata: Option<Sourced<'a, BTreeMap<String, Expected>>>,
    pub forbidden_metadata: Option<Sourced<'a, Vec<String>>>,
    pub max_tensors: Option<Sourced<'a, u64>>,
    pub max_parameters: Option<Sourced<'a, u64>>,
    pub max_file_size: Option<Sourced<'a, u64>>,
    pub require_lfs: Option<Sourced<'a, bool>>,
    pub forbid_formats: Option<Sourced<'a, Vec<Format>>>,
    pub forbid_tiers: Option<Sourced<'a, Vec<String>>>,
    pub forbid_globals: Option<Sourced<'a, Vec<String>>>,
    pub allow_globals: Option<Sourced<'a, Vec<String>>>,
    pub conversion: Option<Sourced<'a, ConversionBound>>,
    pub complete: Option<Sourced<'a, bool>>,
    pub max_update_loss: Option<Sourced<'a, f64>>,
    pub max_delta_rel_l2: Option<Sourced<'a, f64>>,
    pub relation: Option<Sourced<'a, RelationRule>>,
    pub signature: Option<Sourced<'a, SignatureRule>>,
    /// The last rule that matches the path: where a default (`complete`) is reported from.
    pub last_rule: Option<&'a Rule>,
}

impl Effective<'_> {
    /// Whether a check needs the parsed GGUF/safetensors structure.
    pub fn needs_structure(&self) -> bool {
        self.allowed_dtypes.is_some()
            || self.denied_dtypes.is_some()
            || self.expected_hash.is_some()
            || self.expected_model_identity.is_some()
            || self.required_metadata.is_some()
            || self.forbidden_metadata.is_some()
            || self.max_tensors.is_some()
            || self.max_parameters.is_some()
            || self.conversion.is_some()
            || self.relation.is_some()
    }

    /// Whether incomplete model files are violations: unless a rule says `complete = false`.
    pub fn requires_complete(&self) -> bool {
        self.complete.is_none_or(|c| *c.value)
    }

    /// Names of the keys that need the parsed structure (for messages).
    pub fn structural_keys(&self) -> Vec<&'static str> {
        let mut keys = Vec::new();
        for (set, name) in [
            (self.allowed_dtypes.is_some(), "allowed_dtypes"),
            (self.denied_dtypes.is_some(), "denied_dtypes"),
            (self.expected_hash.is_some(), "expected_hash"),
            (
                self.expected_model_identity.is_some(),
                "expected_model_identity",
            ),
            (self.required_metadata.is_some(), "required_metadata"),
            (self.forbidden_metadata.is_some(), "forbidden_metadata"),
            (self.max_tensors.is_some(), "max_tensors"),
            (self.max_parameters.is_some(), "max_parameters"),
            (self.conversion.is_some(), "max_rel_l2"),
            (self.relation.is_some(), "relation"),
        ] {
            if set {
                keys.push(name);
            }
        }
        keys
    }
}

impl Policy {
    /// Parses policy text; `path` is only used in messages.
    pub fn parse(path: &Path, text: &str) -> Result<Policy, PolicyError> {
        let raw: RawPolicy = toml::from_str(text).map_err(|e| {
            let message = e.message().trim_end().to_string();
            match e.span() {
                Some(span) => invalid(path, text, span.start, message),
                None => PolicyError::InvalidNoSpan {
                    path: path.display().to_string(),
                    message,
                },
            }
        })?;
        if let Some(rule) = raw.rules.get(MAX_RULES) {
            return Err(invalid(
                path,
                text,
                rule.span().start,
                format!(
                    "{} rules, more than the {MAX_RULES} a policy may have",
                    raw.rules.len()
                ),
            ));
        }
        let mut globs = 0usize;
        for rule in &raw.rules {
            let rule = rule.get_ref();
            globs +=
                rule.paths.get_ref().len() + rule.exclude.as_ref().map_or(0, |e| e.get_ref().len());
            if globs > MAX_GLOBS {
                return Err(invalid(
                    path,
                    text,
                    rule.paths.span().start,
                    format!(
                        "more than the {MAX_GLOBS} globs a policy may have (all rules together)"
                    ),
                ));
            }
        }
        let mut rules = Vec::with_capacity(raw.rules.len());
        // Lines counted from one rule to the next (rules come in text order): linear in the
        // text, where counting from the start for every rule was quadratic.
        let mut counted = (0usize, 1usize);
        for (i, raw_rule) in raw.rules.into_iter().enumerate() {
            let span = raw_rule.span();
            let raw_rule = raw_rule.into_inner();
            let line = lines_to(text, &mut counted, span.start);
            if raw_rule.paths.get_ref().is_empty() {
                return Err(invalid(
                    path,
                    text,
                    raw_rule.paths.span().start,
                    "`paths` must list at least one glob".into(),
                ));
            }
            raw_rule.check_conversion(path, text)?;
            raw_rule.check_loss_bounds(path, text)?;
            raw_rule.check_signature(path, text)?;
            let (paths, matcher) = glob_set(path, text, &raw_rule.paths)?;
            let (exclude, excluder) = match &raw_rule.exclude {
                Some(ex) => glob_set(path, text, ex)?,
                None => (Vec::new(), GlobSet::empty()),
            };
            rules.push(Rule {
                number: i + 1,
                line,
                paths,
                exclude,
                matcher,
                excluder,
                settings: raw_rule.settings(),
            });
        }
        Ok(Policy {
            source: path.to_path_buf(),
            rules,
        })
    }

    /// Whether any rule covers `path` (repository-relative, `/`-separated).
    pub fn covers(&self, path: &str) -> bool {
        self.rules.iter().any(|r| r.matches(path))
    }

    /// The merged settings for `path`, or None when no rule matches it.
    pub fn effective(&self, path: &str) -> Option<Effective<'_>> {
        let mut eff = Effective::default();
        let mut matched = false;
        for rule in self.rules.iter().filter(|r| r.matches(path)) {
            matched = true;
            eff.last_rule = Some(rule);
            let s = &rule.settings;
            macro_rules! take {
                ($($field:ident),*) => {$(
                    if let Some(value) = &s.$field {
                        eff.$field = Some(Sourced { value, rule });
                    }
                )*};
            }
            take!(
                allowed_dtypes,
                denied_dtypes,
                expected_hash,
                expected_model_identity,
                required_metadata,
                forbidden_metadata,
                max_tensors,
                max_parameters,
                max_file_size,
                require_lfs,
                forbid_formats,
                forbid_tiers,
                forbid_globals,
                allow_globals,
                conversion,
                complete,
                max_update_loss,
                max_delta_rel_l2,
                relation,
                signature
            );
        }
        matched.then_some(eff)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPolicy {
    #[serde(default)]
    rules: Vec<toml::Spanned<RawRule>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    paths: toml::Spanned<Vec<toml::Spanned<String>>>,
    #[serde(default)]
    exclude: Option<toml::Spanned<Vec<toml::Spanned<String>>>>,
    #[serde(default, deserialize_with = "dtype_list")]
    allowed_dtypes: Option<Vec<String>>,
    #[serde(default, deserialize_with = "dtype_list")]
    denied_dtypes: Option<Vec<String>>,
    #[serde(default, deserialize_with = "hash_hex")]
    expected_hash: Option<String>,
    #[serde(default, deserialize_with = "model_identity_hex")]
    expected_model_identity: Option<String>,
    #[serde(default, deserialize_with = "metadata_requirements")]
    required_metadata: Option<BTreeMap<String, Expected>>,
    #[serde(default)]
    forbidden_metadata: Option<Vec<String>>,
    #[serde(default)]
    max_tensors: Option<u64>,
    #[serde(default)]
    max_parameters: Option<u64>,
    #[serde(default, deserialize_with = "byte_size")]
    max_file_size: Option<u64>,
    #[serde(default)]
    require_lfs: Option<bool>,
    #[serde(default, deserialize_with = "format_list")]
    forbid_formats: Option<Vec<Format>>,
    #[serde(default, deserialize_with = "tier_list")]
    forbid_tiers: Option<Vec<String>>,
    #[serde(default)]
    forbid_globals: Option<Vec<String>>,
    #[serde(default)]
    allow_globals: Option<Vec<String>>,
    #[serde(default)]
    reference: Option<toml::Spanned<String>>,
    #[serde(default)]
    max_rel_l2: Option<toml::Spanned<f64>>,
    #[serde(default)]
    complete: Option<bool>,
    #[serde(default)]
    max_update_loss: Option<toml::Spanned<f64>>,
    #[serde(default)]
    max_delta_rel_l2: Option<toml::Spanned<f64>>,
    #[serde(default)]
    relation: Option<toml::Spanned<Vec<String>>>,
    #[serde(default)]
    signature: Option<toml::Spanned<SignatureRule>>,
}

impl RawRule {
    fn settings(&self) -> Settings {
        Settings {
            allowed_dtypes: self.allowed_dtypes.clone(),
            denied_dtypes: self.denied_dtypes.clone(),
            expected_hash: self.expected_hash.clone(),
            expected_model_identity: self.expected_model_identity.clone(),
            required_metadata: self.required_metadata.clone(),
            forbidden_metadata: self.forbidden_metadata.clone(),
            max_tensors: self.max_tensors,
            max_parameters: self.max_parameters,
            max_file_size: self.max_file_size,
            require_lfs: self.require_lfs,
            forbid_formats: self.forbid_formats.clone(),
            forbid_tiers: self.forbid_tiers.clone(),
            forbid_globals: self.forbid_globals.clone(),
            allow_globals: self.allow_globals.clone(),
            conversion: match (&self.reference, &self.max_rel_l2) {
                (Some(reference), Some(max)) => Some(ConversionBound {
                    reference: reference.get_ref().clone(),
                    max_rel_l2: *max.get_ref(),
                }),
                _ => None,
            },
            complete: self.complete,
            max_update_loss: self.max_update_loss.as_ref().map(|b| *b.get_ref()),
            max_delta_rel_l2: self.max_delta_rel_l2.as_ref().map(|b| *b.get_ref()),
            relation: match (&self.reference, &self.relation) {
                (Some(reference), Some(allowed)) => Some(RelationRule {
                    reference: reference.get_ref().clone(),
                    allowed: allowed.get_ref().clone(),
                }),
                _ => None,
            },
            signature: self.signature.as_ref().map(|s| s.get_ref().clone()),
        }
    }

    /// `signature` names exactly one way to trust a signer, and a plain file name.
    fn check_signature(&self, path: &Path, text: &str) -> Result<(), PolicyError> {
        let Some(sig) = &self.signature else {
            return Ok(());
        };
        let rule = sig.get_ref();
        let keyless = rule.identity.is_some() || rule.identity_provider.is_some();
        let ways = usize::from(rule.public_key.is_some())
            + usize::from(!rule.certificate_chain.is_empty())
            + usize::from(keyless);
        let message = if ways != 1 {
            Some(
                "`signature` needs exactly one of `public_key`, `certificate_chain`, or                  `identity` with `identity_provider`"
                    .to_owned(),
            )
        } else if keyless && (rule.identity.is_none() || rule.identity_provider.is_none()) {
            Some("`signature`: `identity` and `identity_provider` come together".to_owned())
        } else if rule.trust_root.is_some() && !keyless {
            Some("`signature`: `trust_root` is for `identity` (Sigstore keyless)".to_owned())
        } else if rule.file.is_empty() || rule.file.contains('/') || rule.file == ".." {
            Some(format!(
                "`signature`: `file` is a file name (looked for in each folder), found {:?}",
                rule.file
            ))
        } else {
            None
        };
        match message {
            Some(message) => Err(invalid(path, text, sig.span().start, message)),
            None => Ok(()),
        }
    }

    /// The bounds on a `.wdelta` file's loss are finite numbers at least 0.
    fn check_loss_bounds(&self, path: &Path, text: &str) -> Result<(), PolicyError> {
        for (key, bound) in [
            ("max_update_loss", &self.max_update_loss),
            ("max_delta_rel_l2", &self.max_delta_rel_l2),
        ] {
            if let Some(b) = bound
                && !(b.get_ref().is_finite() && *b.get_ref() >= 0.0)
            {
                return Err(invalid(
                    path,
                    text,
                    b.span().start,
                    format!("`{key}` must be a number at least 0, found {}", b.get_ref()),
                ));
            }
        }
        Ok(())
    }

    /// `reference` and `max_rel_l2` come together; the bound is a finite non-negative number
    /// and the reference a relative path.
    fn check_conversion(&self, path: &Path, text: &str) -> Result<(), PolicyError> {
        if let Some(relation) = &self.relation {
            self.check_relation(path, text, relation)?;
        }
        match (&self.reference, &self.max_rel_l2) {
            (None, None) => Ok(()),
            (Some(r), None) if self.relation.is_some() => check_reference(path, text, r),
            (Some(r), None) => Err(invalid(
                path,
                text,
                r.span().start,
                "`reference` needs `max_rel_l2` in the same rule (the bound on each tensor's \
                 rel_l2 against the reference)"
                    .into(),
            )),
            (None, Some(m)) => Err(invalid(
                path,
                text,
                m.span().start,
                "`max_rel_l2` needs `reference` in the same rule (the model the GGUF was \
                 converted from, relative to the GGUF's directory)"
                    .into(),
            )),
            (Some(r), Some(m)) => {
                let bound = *m.get_ref();
                if !(bound.is_finite() && bound >= 0.0) {
                    return Err(invalid(
                        path,
                        text,
                        m.span().start,
                        format!("`max_rel_l2` must be a number at least 0, found {bound}"),
                    ));
                }
                check_reference(path, text, r)
            }
        }
    }

    /// `relation` names known relations and comes with `reference`.
    fn check_relation(
        &self,
        path: &Path,
        text: &str,
        relation: &toml::Spanned<Vec<String>>,
    ) -> Result<(), PolicyError> {
        if self.reference.is_none() {
            return Err(invalid(
                path,
                text,
                relation.span().start,
                "`relation` needs `reference` in the same rule (the model the file must be \
                 made from, relative to its directory)"
                    .into(),
            ));
        }
        for name in relation.get_ref() {
            if !crate::lineage::RELATION_NAMES.contains(&name.as_str()) {
                return Err(invalid(
                    path,
                    text,
                    relation.span().start,
                    format!(
                        "`relation`: unknown relation {name:?} (expected one of {})",
                        crate::lineage::RELATION_NAMES.join(", ")
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// `reference` is a path relative to the file's directory.
fn check_reference(path: &Path, text: &str, r: &toml::Spanned<String>) -> Result<(), PolicyError> {
    let reference = r.get_ref();
    if reference.is_empty()
        || reference.starts_with('/')
        || reference.split('/').any(|c| c.is_empty() || c == ".")
    {
        return Err(invalid(
            path,
            text,
            r.span().start,
            format!(
                "`reference` must be a path relative to the GGUF's directory, found \
                 {reference:?}"
            ),
        ));
    }
    Ok(())
}

fn glob_set(
    path: &Path,
    text: &str,
    globs: &toml::Spanned<Vec<toml::Spanned<String>>>,
) -> Result<(Vec<String>, GlobSet), PolicyError> {
    let mut builder = GlobSetBuilder::new();
    let mut patterns = Vec::new();
    for glob in globs.get_ref() {
        let pattern = glob.get_ref();
        let compiled = compile_glob(pattern)
            .map_err(|problem| invalid(path, text, glob.span().start, problem.to_string()))?;
        builder.add(compiled);
        patterns.push(pattern.clone());
    }
    let set = builder
        .build()
        .map_err(|e| invalid(path, text, globs.span().start, format!("bad glob set: {e}")))?;
    Ok((patterns, set))
}

/// Globs match repository-relative paths with `/` separators; `*` stays within one directory
/// and `**` crosses directories, as in .gitignore. A glob that no such path can match (one
/// leaving the root, with `.` or `..` components, or an empty one) is refused rather than
/// silently matching nothing.
fn compile_glob(pattern: &str) -> std::result::Result<globset::Glob, GlobProblem> {
    if pattern.is_empty() {
        return Err(GlobProblem::Empty);
    }
    if pattern.starts_with('/') || pattern.starts_with("./") {
        return Err(GlobProblem::NotRelative(pattern.to_owned()));
    }
    if let Some(component) = pattern.split('/').find(|c| matches!(*c, "." | ".." | "")) {
        let what = match component {
            "" => "an empty path component (\"//\", or a trailing \"/\")".to_owned(),
            other => format!("a {other:?} component"),
        };
        return Err(GlobProblem::NeverMatches {
            pattern: pattern.to_owned(),
            what,
        });
    }
    GlobBuilder::new(pattern)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map_err(|e| GlobProblem::Syntax {
            pattern: pattern.to_owned(),
            kind: e.kind().clone(),
        })
}

/// Why a glob of the policy is refused.
#[derive(Debug, thiserror::Error)]
enum GlobProblem {
    #[error("empty glob")]
    Empty,
    #[error(
        "glob {0:?} must be relative to the repository root, without a leading \"/\" or \"./\""
    )]
    NotRelative(String),
    #[error(
        "glob {pattern:?} can never match: it has {what}, and the paths it is matched against \
         are relative to the repository root, without \".\", \"..\" or empty components \
         (write \"dir/**\" for everything below dir)"
    )]
    NeverMatches { pattern: String, what: String },
    #[error("bad glob {pattern:?}: {kind}")]
    Syntax {
        pattern: String,
        kind: globset::ErrorKind,
    },
}

/// Escapes glob metacharacters so that `path` matches only itself.
pub(crate) fn escape_glob(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for c in path.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '{' | '}' | '\\' | '!') {
            out.push('[');
            out.push(c);
            out.push(']');
        } else {
            out.push(c);
        }
    }
    out
}

fn invalid(path: &Path, text: &str, offset: usize, message: String) -> PolicyError {
    let (line, column) = line_column(text, offset);
    let content = text
        .split('\n')
        .nth(line - 1)
        .unwrap_or("")
        .trim_end_matches('\r');
    let gutter = line.to_string().len();
    let caret_pad = content
        .char_indices()
        .take_while(|(i, _)| *i < column - 1)
        .map(|(_, c)| if c == '\t' { '\t' } else { ' ' })
        .collect::<String>();
    let snippet = format!(
        "{:gutter$} |\n{line} | {content}\n{:gutter$} | {caret_pad}^",
        "", ""
    );
    PolicyError::Invalid {
        path: path.display().to_string(),
        line,
        column,
        message,
        snippet,
    }
}

/// 1-based line and column (in characters) of a byte offset.
/// The line of `offset`, counting on from `counted` (an offset and its line), which is moved
/// there; an offset before it is counted from the start.
fn lines_to(text: &str, counted: &mut (usize, usize), offset: usize) -> usize {
    let offset = offset.min(text.len());
    #[cfg(test)]
    tests::BYTES_COUNTED.with(|n| n.set(n.get() + offset.saturating_sub(counted.0)));
    if offset < counted.0 || !text.is_char_boundary(offset) {
        return line_column(text, offset).0;
    }
    let newlines = text.as_bytes()[counted.0..offset]
        .iter()
        .filter(|&&b| b == b'\n')
        .count();
    *counted = (offset, counted.1 + newlines);
    counted.1
}

fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    #[cfg(test)]
    tests::BYTES_COUNTED.with(|n| n.set(n.get() + offset));
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

/// Whether `name` is a tensor type name of the structural identity: a GGUF ggml type or a
/// safetensors dtype, lowercased (the core's tables decide).
fn known_dtype(name: &str) -> bool {
    crate::dtype::by_name(name).is_some_and(|d| d.ggml.is_some() || d.safetensors.is_some())
}

fn dtype_list<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<String>>, D::Error> {
    let names = Vec::<String>::deserialize(d)?;
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        let lower = name.to_ascii_lowercase();
        if !known_dtype(&lower) {
            let ggml: Vec<&str> = crate::dtype::ggml_types().map(|t| t.name).collect();
            return Err(de::Error::custom(format!(
                "unknown dtype {name:?}; expected a GGUF type ({}) or a safetensors dtype \
                 (bf16, f8_e4m3, u8, ...), as `weight-inspect inspect` prints them",
                ggml.join(", ")
            )));
        }
        out.push(lower);
    }
    Ok(Some(out))
}

fn hash_hex<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let s = String::deserialize(d)?;
    if s.len() != 64 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(de::Error::custom(format!(
            "expected_hash must be a structural hash of 64 hex digits (as printed by \
             `weight-inspect id`), found {s:?}"
        )));
    }
    Ok(Some(s.to_ascii_lowercase()))
}

/// `expected_model_identity`: 64 hex digits, as `id` prints a training checkpoint's
/// `model_identity`.
fn model_identity_hex<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let s = String::deserialize(d)?;
    if s.len() != 64 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(de::Error::custom(format!(
            "expected_model_identity must be a model identity of 64 hex digits (as \
             `weight-inspect id` prints a training checkpoint's model_identity), found {s:?}"
        )));
    }
    Ok(Some(s.to_ascii_lowercase()))
}

/// `max_file_size`: bytes as an integer, or a string with a unit ("5 GB", "512MiB", "1.5GiB").
fn byte_size<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    struct V;
    impl Visitor<'_> for V {
        type Value = u64;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a size in bytes (integer) or a string like \"5 GB\" or \"512 MiB\"")
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<u64, E> {
            u64::try_from(v).map_err(|_| E::custom(format!("a size cannot be negative ({v})")))
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<u64, E> {
            Ok(v)
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<u64, E> {
            parse_size(v).ok_or_else(|| {
                E::custom(format!(
                    "bad size {v:?}: expected a number and a unit among B, KB, MB, GB, TB \
                     (powers of 1000) and KiB, MiB, GiB, TiB (powers of 1024)"
                ))
            })
        }
    }
    d.deserialize_any(V).map(Some)
}

fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, unit) = (s[..split].trim(), s[split..].trim());
    let multiplier: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kb" => 1000,
        "mb" => 1000_u64.pow(2),
        "gb" => 1000_u64.pow(3),
        "tb" => 1000_u64.pow(4),
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        "tib" => 1 << 40,
        _ => return None,
    };
    if number.is_empty() || number.matches('.').count() > 1 {
        return None;
    }
    if let Ok(n) = number.parse::<u64>() {
        return n.checked_mul(multiplier);
    }
    let value = number.parse::<f64>().ok()? * multiplier as f64;
    (value.is_finite() && value >= 0.0 && value < u64::MAX as f64).then(|| value.round() as u64)
}

/// `required_metadata`: an array of keys that must exist, or a table of key = required value.
/// Dotted keys (`general.architecture = "llama"`) are TOML nested tables; they are flattened
/// back into the dotted metadata key.
fn metadata_requirements<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<BTreeMap<String, Expected>>, D::Error> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = BTreeMap<String, Expected>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("an array of metadata keys, or a table of metadata key = required value")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut out = BTreeMap::new();
            while let Some(key) = seq.next_element::<String>()? {
                out.insert(key, Expected::Present);
            }
            Ok(out)
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut out = BTreeMap::new();
            while let Some((key, value)) = map.next_entry::<String, toml::Value>()? {
                flatten(key, value, &mut out).map_err(de::Error::custom)?;
            }
            Ok(out)
        }
    }
    d.deserialize_any(V).map(Some)
}

fn flatten(
    key: String,
    value: toml::Value,
    out: &mut BTreeMap<String, Expected>,
) -> std::result::Result<(), RequiredProblem> {
    match value {
        toml::Value::Table(table) => {
            if table.is_empty() {
                return Err(RequiredProblem::EmptyTable(key));
            }
            for (k, v) in table {
                flatten(format!("{key}.{k}"), v, out)?;
            }
            Ok(())
        }
        toml::Value::Datetime(_) => Err(RequiredProblem::DateTime(key)),
        other => {
            out.insert(key, Expected::Equals(other));
            Ok(())
        }
    }
}

/// Why a `required_metadata` entry is refused.
#[derive(Debug, thiserror::Error)]
enum RequiredProblem {
    #[error("required_metadata: `{0}` has an empty table")]
    EmptyTable(String),
    #[error(
        "required_metadata: `{0}` is a date-time; metadata values are strings, numbers, \
         booleans or arrays"
    )]
    DateTime(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Policy, PolicyError> {
        Policy::parse(Path::new("p.toml"), text)
    }

    fn err(text: &str) -> (usize, usize, String) {
        match parse(text).unwrap_err() {
            PolicyError::Invalid {
                line,
                column,
                message,
                ..
            } => (line, column, message),
            other => panic!("no location: {other}"),
        }
    }

    const EXAMPLE: &str = r#"
[[rules]]
paths = ["models/**/*.gguf"]
allowed_dtypes = ["f32", "f16", "q8_0"]
require_lfs = true

[[rules]]
paths = ["models/base.safetensors"]
expected_hash = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
required_metadata = { format = "pt" }
forbid_formats = ["pickle"]
"#;

    #[test]
    fn issue_example_parses() {
        let p = parse(EXAMPLE).unwrap();
        assert_eq!(p.rules.len(), 2);
        assert_eq!(p.rules[0].line, 2);
        assert_eq!(p.rules[1].line, 7);
        let e = p.effective("models/a/b.gguf").unwrap();
        assert_eq!(e.allowed_dtypes.unwrap().value, &vec!["f32", "f16", "q8_0"]);
        assert!(*e.require_lfs.unwrap().value);
        assert!(p.effective("models/base.gguf").is_some());
        assert!(p.effective("other/base.gguf").is_none());
        let e = p.effective("models/base.safetensors").unwrap();
        assert_eq!(
            e.required_metadata.unwrap().value.get("format"),
            Some(&Expected::Equals(toml::Value::String("pt".into())))
        );
        assert_eq!(e.forbid_formats.unwrap().value, &vec![Format::Pytorch]);
    }

    #[test]
    fn star_does_not_cross_directories() {
        let p = parse("[[rules]]\npaths = [\"models/*.gguf\"]\n").unwrap();
        assert!(p.covers("models/a.gguf"));
        assert!(!p.covers("models/x/a.gguf"));
        let p = parse("[[rules]]\npaths = [\"**/*.gguf\"]\n").unwrap();
        assert!(p.covers("a.gguf"));
        assert!(p.covers("x/y/a.gguf"));
    }

    #[test]
    fn later_rules_win_per_key() {
        let p = parse(
            r#"
[[rules]]
paths = ["**/*.gguf"]
require_lfs = true
max_tensors = 10
[[rules]]
paths = ["small/*.gguf"]
require_lfs = false
"#,
        )
        .unwrap();
        let e = p.effective("small/a.gguf").unwrap();
        assert!(!*e.require_lfs.unwrap().value);
        assert_eq!(e.require_lfs.unwrap().rule.number, 2);
        assert_eq!(*e.max_tensors.unwrap().value, 10);
        assert_eq!(e.max_tensors.unwrap().rule.number, 1);
    }

    #[test]
    fn exclude() {
        let p = parse("[[rules]]\npaths = [\"**\"]\nexclude = [\"tmp/**\"]\n").unwrap();
        assert!(p.covers("a/b"));
        assert!(!p.covers("tmp/b"));
    }

    #[test]
    fn dotted_metadata_keys_flatten() {
        let p = parse(
            r#"
[[rules]]
paths = ["*.gguf"]
required_metadata = { general.architecture = "llama", "general.name" = "x", n = 3 }
"#,
        )
        .unwrap();
        let e = p.effective("a.gguf").unwrap();
        let keys: Vec<_> = e.required_metadata.unwrap().value.keys().cloned().collect();
        assert_eq!(keys, ["general.architecture", "general.name", "n"]);
        let p = parse("[[rules]]\npaths = [\"*\"]\nrequired_metadata = [\"a.b\"]\n").unwrap();
        assert_eq!(
            p.rules[0].settings.required_metadata.as_ref().unwrap()["a.b"],
            Expected::Present
        );
    }

    #[test]
    fn errors_have_line_and_column() {
        assert_eq!(err("[[rules]]\npaths = [\"a\"\n").0, 2);
        let (l, c, m) = err("[[rules]]\npaths = [\"a\"]\nalowed_dtypes = [\"f16\"]\n");
        assert_eq!((l, c), (3, 1));
        assert!(m.contains("alowed_dtypes"), "{m}");
        let (l, c, m) = err("[[rules]]\npaths = [\"a\", \"b[\"]\n");
        assert_eq!((l, c), (2, 15));
        assert!(m.contains("b["), "{m}");
        let (l, _, m) = err("[[rules]]\npaths = [\"a\"]\nmax_tensors = \"ten\"\n");
        assert_eq!(l, 3);
        assert!(m.contains("u64") || m.contains("integer"), "{m}");
        let (l, c, m) = err("[[rules]]\npaths = [\"a\"]\nexpected_hash = \"abc\"\n");
        assert_eq!((l, c), (3, 17));
        assert!(m.contains("64 hex"), "{m}");
        let (l, _, m) = err("[[rules]]\npaths = [\"a\"]\nallowed_dtypes = [\"q4k\"]\n");
        assert_eq!(l, 3);
        assert!(m.contains("q4k"), "{m}");
        let (l, _, m) = err("[[rules]]\npaths = [\"a\"]\nforbid_formats = [\"onnx\"]\n");
        assert_eq!(l, 3);
        assert!(m.contains("onnx"), "{m}");
        let (l, _, _) = err("[rules]\npaths = [\"a\"]\n");
        assert_eq!(l, 1);
        let (l, _, m) = err("[[rules]]\nallowed_dtypes = [\"f16\"]\n");
        assert_eq!(l, 1);
        assert!(m.contains("paths"), "{m}");
        let (l, _, m) = err("[[rules]]\npaths = []\n");
        assert_eq!(l, 2);
        assert!(m.contains("at least one"), "{m}");
        let (l, _, _) = err("unknown = 1\n");
        assert_eq!(l, 1);
        let (l, _, m) = err("[[rules]]\npaths = [\"a\"]\nmax_file_size = \"5 parsecs\"\n");
        assert_eq!(l, 3);
        assert!(m.contains("parsecs"), "{m}");
    }

    #[test]
    fn globs_that_can_never_match_are_located_errors() {
        for (glob, needle) in [
            ("../**", "\"..\" component"),
            ("models/../x.gguf", "\"..\" component"),
            ("**/..", "\"..\" component"),
            ("models/./x.gguf", "\".\" component"),
            (".", "\".\" component"),
            ("models//x.gguf", "empty path component"),
            ("models/", "empty path component"),
            ("./a.gguf", "leading"),
            ("/a.gguf", "leading"),
        ] {
            let text =
                format!("[[rules]]\npaths = [\"**/*.gguf\"]\nexclude = [\"a\", \"{glob}\"]\n");
            let (l, c, m) = err(&text);
            assert_eq!((l, c), (3, 17), "{glob}: {m}");
            assert!(m.contains(needle) && m.contains(glob), "{glob}: {m}");
        }
        // Dots inside names are ordinary.
        for glob in [
            "..a/*.gguf",
            "a../b",
            ".hidden/**",
            "**/.cache/*.gguf",
            "x/...",
            "v1..2/*",
        ] {
            parse(&format!("[[rules]]\npaths = [\"{glob}\"]\n")).expect(glob);
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("5 GB"), Some(5_000_000_000));
        assert_eq!(parse_size("512MiB"), Some(512 << 20));
        assert_eq!(parse_size("1.5 GiB"), Some(3 << 29));
        assert_eq!(parse_size("100"), Some(100));
        assert_eq!(parse_size("x"), None);
        assert_eq!(parse_size("1.2.3 GB"), None);
        assert_eq!(parse_size("99999999999 TiB"), None);
        let p = parse("[[rules]]\npaths = [\"a\"]\nmax_file_size = \"2 KiB\"\n").unwrap();
        assert_eq!(p.rules[0].settings.max_file_size, Some(2048));
        let p = parse("[[rules]]\npaths = [\"a\"]\nmax_file_size = 7\n").unwrap();
        assert_eq!(p.rules[0].settings.max_file_size, Some(7));
    }

    #[test]
    fn escaped_paths_match_only_themselves() {
        let literal = "weird/[a]*?{b}.gguf";
        let glob = compile_glob(&escape_glob(literal))
            .unwrap()
            .compile_matcher();
        assert!(glob.is_match(literal));
        assert!(!glob.is_match("weird/a.gguf"));
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_text_never_panics(text in "\\PC{0,200}") {
            let in_a_rule = format!("[[rules]]\npaths = [\"{}\"]\n", text.replace(['"', '\\', '\n'], ""));
            for text in [text.as_str(), in_a_rule.as_str()] {
                let outcome = parse(text);
                assert_parse_outcome_is_sound(text, &outcome);
                // Deterministic: a second parse gives the same policy or the same error.
                proptest::prop_assert_eq!(format!("{outcome:?}"), format!("{:?}", parse(text)));
            }
        }
    }

    /// A parse ends in a policy with no more rules than `[[rules]]` headers, or in an error
    /// that names the file and a line and column inside the text, in a bounded message.
    fn assert_parse_outcome_is_sound(text: &str, outcome: &Result<Policy, PolicyError>) {
        match outcome {
            Ok(policy) => assert!(policy.rules.len() <= text.matches("[[rules]]").count()),
            Err(error) => {
                let shown = error.to_string();
                assert!(shown.starts_with("p.toml:"), "{shown}");
                assert!(
                    shown.len() <= 4 * text.len() + 4096,
                    "{} bytes: {shown}",
                    shown.len()
                );
                if let PolicyError::Invalid {
                    line,
                    column,
                    message,
                    ..
                } = error
                {
                    let lines: Vec<&str> = text.split('\n').collect();
                    assert!(
                        (1..=lines.len()).contains(line),
                        "line {line} of {}",
                        lines.len()
                    );
                    assert!(*column >= 1 && *column <= lines[line - 1].chars().count() + 1);
                    assert!(!message.is_empty());
                } else {
                    assert!(
                        matches!(error, PolicyError::InvalidNoSpan { .. }),
                        "{error:?}"
                    );
                }
            }
        }
    }

    fn rules(n: usize, globs_per_rule: usize) -> String {
        let globs = vec!["\"m/*.gguf\""; globs_per_rule].join(", ");
        (0..n)
            .map(|_| format!("[[rules]]\npaths = [{globs}]\nmax_tensors = 10\n"))
            .collect()
    }

    thread_local! {
        /// Bytes of policy text scanned for newlines to give rules and errors their line
        /// (counted by `lines_to` and `line_column`; each test runs on its own thread).
        pub(super) static BYTES_COUNTED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    /// Parsing is linear in the rules: the lines of 4000 rules are found scanning the text
    /// once (counting lines from the start for each rule scanned it 2000 times over). An
    /// operation count, not a time: it holds on a loaded machine and fails on a fast one.
    #[test]
    fn parsing_grows_linearly_with_the_rules() {
        let large = rules(4000, 1);
        BYTES_COUNTED.with(|n| n.set(0));
        let policy = parse(&large).unwrap();
        let scanned = BYTES_COUNTED.with(std::cell::Cell::get);
        assert!(
            scanned <= large.len(),
            "{scanned} bytes scanned for the lines of a {}-byte policy",
            large.len()
        );
        let lines: Vec<usize> = policy.rules.iter().map(|r| r.line).collect();
        assert_eq!(lines.len(), 4000);
        assert!(
            lines.windows(2).all(|w| w[1] == w[0] + 3),
            "{:?}",
            &lines[..4]
        );
    }

    #[test]
    fn rules_and_globs_are_capped() {
        let (_, _, message) = err(&rules(MAX_RULES + 1, 1));
        assert!(
            message.contains("4097 rules, more than the 4096"),
            "{message}"
        );
        let (_, _, message) = err(&rules(2, MAX_GLOBS / 2 + 1));
        assert!(message.contains("more than the 4096 globs"), "{message}");
        parse(&rules(1, MAX_GLOBS)).unwrap();
    }
}
