//! Evaluating the policy: one [`Subject`] (a path and where its bytes come from) in, the
//! [`Violation`]s of the rules that match its path out.
//!
//! Reading is lazy and bounded: the LFS check looks at the stored blob's header, the size
//! check at a pointer or file length, and the model bytes are read only when a rule needs the
//! structure or the format; model files are mmapped and only their header pages touched.

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use gix::ObjectId;
use serde::Serialize;

use super::config::{Effective, Expected, FormatName, Policy, Rule, Sourced};
use crate::artifact::{Artifact, Value};
use crate::error::{Error, Result};
use crate::formats::pickle::{self, PickleReport};
use crate::git::lfs::{self, Pointer};

/// Blobs larger than this (model bytes committed without LFS) are not inflated whole: a
/// prefix is streamed from `git cat-file`, growing through [`BLOB_PREFIXES`] until the model
/// header parses.
const MAX_BLOB_IN_MEMORY: u64 = 16 << 20;
const BLOB_PREFIXES: [u64; 3] = [4 << 20, 64 << 20, 256 << 20];

/// One broken rule for one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    /// Repository-relative path, `/`-separated.
    pub path: String,
    /// The policy key that is violated (`allowed_dtypes`, `require_lfs`, ...), or `format`
    /// when a structural key applies to a file that is not a readable GGUF/safetensors file.
    pub rule: &'static str,
    pub expected: String,
    pub found: String,
    /// The `[[rules]]` entry (1-based) the key came from, and its line in the policy file.
    pub policy_rule: usize,
    pub policy_line: usize,
}

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
        }
    }
}

/// A file to judge: its repository-relative path and where its bytes come from.
#[derive(Debug, Clone)]
pub struct Subject<'r> {
    pub path: String,
    pub origin: Origin<'r>,
}

/// Where a subject's bytes come from.
#[derive(Debug, Clone)]
pub enum Origin<'r> {
    /// A blob in the object database (an index entry, or a file of a commit).
    Blob {
        repo: &'r gix::Repository,
        id: ObjectId,
    },
    /// A blob already in memory (e.g. the head side of a pull request).
    BlobBytes {
        repo: Option<&'r gix::Repository>,
        bytes: Cow<'r, [u8]>,
    },
    /// A file in the work tree. `repo` and `index_id` (its stage-0 index entry) decide how
    /// git stores it, for `require_lfs`.
    Worktree {
        repo: Option<&'r gix::Repository>,
        file: PathBuf,
        index_id: Option<ObjectId>,
    },
}

/// How git stores (or will store, once added) a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Storage {
    /// An LFS pointer.
    Lfs(Pointer),
    /// Not yet in the index, but `.gitattributes` routes it through the LFS filter.
    LfsByAttributes,
    /// The bytes themselves, in git's object database; `why` says how we know.
    Git { why: String },
}

/// The model bytes of a subject.
enum Body<'a> {
    Map(memmap2::Mmap),
    Bytes(Vec<u8>),
    Borrowed(&'a [u8]),
    Empty,
}

impl Body<'_> {
    fn bytes(&self) -> &[u8] {
        match self {
            Body::Map(m) => m,
            Body::Bytes(b) => b,
            Body::Borrowed(b) => b,
            Body::Empty => &[],
        }
    }
}

/// What the model bytes turned out to be.
enum Content {
    Model(Box<Artifact>),
    /// GGUF or safetensors magic, but unreadable.
    Invalid {
        format: &'static str,
        error: String,
    },
    Pickle(PickleReport),
    Other {
        first_bytes: String,
    },
}

impl Content {
    fn format(&self) -> Option<FormatName> {
        match self {
            Content::Model(a) => Some(format_name(a.format.name())),
            Content::Invalid { format, .. } => Some(format_name(format)),
            Content::Pickle(_) => Some(FormatName::Pickle),
            Content::Other { .. } => None,
        }
    }

    fn describe(&self) -> String {
        match self {
            Content::Model(a) => a.format.name().to_string(),
            Content::Invalid { format, error } => format!("an unreadable {format} file ({error})"),
            Content::Pickle(report) => report.describe(),
            Content::Other { first_bytes } => {
                format!("neither GGUF, safetensors nor pickle (first bytes {first_bytes})")
            }
        }
    }
}

fn format_name(name: &str) -> FormatName {
    if name == "gguf" {
        FormatName::Gguf
    } else {
        FormatName::Safetensors
    }
}

/// The subject's blob as git stores it, read just enough to tell a pointer from content.
struct Stored {
    pointer: Option<Pointer>,
    size: u64,
    /// The whole blob, when it was small enough to read.
    bytes: Option<Vec<u8>>,
}

fn stored_blob(repo: &gix::Repository, id: ObjectId) -> Result<Stored> {
    let size = repo
        .find_header(id)
        .map_err(|e| Error::Other(format!("blob {id}: cannot read git object ({e})")))?
        .size();
    if size >= lfs::MAX_POINTER_SIZE as u64 {
        return Ok(Stored {
            pointer: None,
            size,
            bytes: None,
        });
    }
    let bytes = crate::git::objects::blob_bytes(repo, id)?;
    Ok(Stored {
        pointer: Pointer::parse(&bytes),
        size,
        bytes: Some(bytes),
    })
}

/// Evaluates `subject` against `policy`. None when no rule covers its path; otherwise the
/// violations (empty when clean). Errors are conditions that prevent judging the file: an
/// LFS object missing from the local store, an unreadable file or object.
pub fn evaluate(policy: &Policy, subject: &Subject<'_>) -> Result<Option<Vec<Violation>>> {
    let Some(eff) = policy.effective(&subject.path) else {
        return Ok(None);
    };
    let mut ev = Evaluation {
        subject,
        stored: None,
        violations: Vec::new(),
    };
    ev.run(&eff)?;
    Ok(Some(ev.violations))
}

/// The violations of a blob of a commit or the index, given as bytes (an LFS pointer is
/// resolved through `repo`'s local store): what `weight-inspect ci` runs on the head side.
pub fn check_blob(
    policy: &Policy,
    repo: Option<&gix::Repository>,
    path: &str,
    blob: &[u8],
) -> Result<Vec<Violation>> {
    let subject = Subject {
        path: path.to_string(),
        origin: Origin::BlobBytes {
            repo,
            bytes: Cow::Borrowed(blob),
        },
    };
    Ok(evaluate(policy, &subject)?.unwrap_or_default())
}

/// The parsed model behind a subject (following an LFS pointer): for `policy pin`.
pub fn read_artifact(subject: &Subject<'_>) -> Result<Artifact> {
    let mut ev = Evaluation {
        subject,
        stored: None,
        violations: Vec::new(),
    };
    let body = ev.body()?;
    match classify(Path::new(&subject.path), body.bytes()) {
        Content::Model(a) => Ok(*a),
        other => Err(Error::Other(format!(
            "{}: not a readable GGUF or safetensors file: {}",
            subject.path,
            other.describe()
        ))),
    }
}

/// Whether a subject is a GGUF or safetensors file by its first bytes (an LFS pointer counts
/// by its object, when present).
pub fn is_model(subject: &Subject<'_>) -> Result<bool> {
    let mut ev = Evaluation {
        subject,
        stored: None,
        violations: Vec::new(),
    };
    let body = ev.body()?;
    Ok(crate::formats::detect(body.bytes()).is_some())
}

/// Like [`check_blob`] for a blob named by id: a large blob is not loaded into memory (its
/// header tells a pointer from content, and only a prefix is read for the structure).
pub fn check_blob_id(
    policy: &Policy,
    repo: &gix::Repository,
    path: &str,
    id: ObjectId,
) -> Result<Vec<Violation>> {
    let subject = Subject {
        path: path.to_string(),
        origin: Origin::Blob { repo, id },
    };
    Ok(evaluate(policy, &subject)?.unwrap_or_default())
}

struct Evaluation<'s, 'r> {
    subject: &'s Subject<'r>,
    stored: Option<Stored>,
    violations: Vec<Violation>,
}

impl<'s, 'r> Evaluation<'s, 'r> {
    fn path(&self) -> &str {
        &self.subject.path
    }

    fn push(&mut self, v: Violation) {
        self.violations.push(v);
    }

    fn run(&mut self, eff: &Effective<'_>) -> Result<()> {
        if let Some(req) = eff.require_lfs
            && *req.value
        {
            self.check_lfs(&req)?;
        }
        if let Some(max) = eff.max_file_size {
            let size = self.file_size()?;
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
        if !eff.needs_structure() && eff.forbid_formats.is_none() {
            return Ok(());
        }
        let body = self.body()?;
        let content = classify(Path::new(self.path()), body.bytes());
        if let (Some(forbid), Some(format)) = (eff.forbid_formats, content.format())
            && forbid.value.contains(&format)
        {
            let expected = format!(
                "none of the formats {}",
                forbid
                    .value
                    .iter()
                    .map(|f| f.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            let v = Violation::new(
                self.path(),
                "forbid_formats",
                &forbid,
                expected,
                content.describe(),
            );
            self.push(v);
        }
        if !eff.needs_structure() {
            return Ok(());
        }
        let artifact = match &content {
            Content::Model(a) => a,
            other => {
                let keys = eff.structural_keys();
                let first_rule = first_structural_rule(eff);
                let v = Violation::at(
                    self.path(),
                    "format",
                    first_rule,
                    format!(
                        "a readable GGUF or safetensors file (for {})",
                        keys.join(", ")
                    ),
                    other.describe(),
                );
                self.push(v);
                return Ok(());
            }
        };
        let found = structural_violations(self.path(), eff, artifact);
        self.violations.extend(found);
        Ok(())
    }

    /// The stored blob for blob origins (cached).
    fn stored(&mut self) -> Result<Option<&Stored>> {
        if self.stored.is_none() {
            let stored = match &self.subject.origin {
                Origin::Blob { repo, id } => Some(stored_blob(repo, *id)?),
                Origin::BlobBytes { bytes, .. } => Some(Stored {
                    pointer: Pointer::parse(bytes),
                    size: bytes.len() as u64,
                    bytes: None,
                }),
                Origin::Worktree { .. } => None,
            };
            self.stored = stored;
        }
        Ok(self.stored.as_ref())
    }

    fn storage(&mut self) -> Result<Storage> {
        if let Some(stored) = self.stored()? {
            return Ok(match &stored.pointer {
                Some(p) => Storage::Lfs(p.clone()),
                None => Storage::Git {
                    why: format!("the blob holds the file's {} bytes", stored.size),
                },
            });
        }
        let Origin::Worktree {
            repo,
            file,
            index_id,
        } = &self.subject.origin
        else {
            unreachable!("blob origins have a stored blob");
        };
        // A pointer text in the work tree is committed as is.
        if let Some(p) = worktree_pointer(file)? {
            return Ok(Storage::Lfs(p));
        }
        let Some(repo) = repo else {
            return Err(Error::Other(format!(
                "{}: cannot evaluate require_lfs outside a git repository",
                self.path()
            )));
        };
        if let Some(id) = index_id {
            let stored = stored_blob(repo, *id)?;
            return Ok(match stored.pointer {
                Some(p) => Storage::Lfs(p),
                None => Storage::Git {
                    why: format!("the index holds the file's {} bytes", stored.size),
                },
            });
        }
        if crate::git::process::lfs_by_attributes(repo, self.path())? {
            Ok(Storage::LfsByAttributes)
        } else {
            Ok(Storage::Git {
                why: "not staged, and .gitattributes does not route it through the LFS filter"
                    .into(),
            })
        }
    }

    fn check_lfs(&mut self, req: &Sourced<'_, bool>) -> Result<()> {
        match self.storage()? {
            Storage::Lfs(_) | Storage::LfsByAttributes => {}
            Storage::Git { why } => {
                let path = self.path().to_string();
                let v = Violation::new(
                    &path,
                    "require_lfs",
                    req,
                    "an LFS pointer in git".into(),
                    format!(
                        "a regular git blob ({why}); fix: git rm --cached '{path}' && \
                         git lfs track '{path}' && git add .gitattributes '{path}'"
                    ),
                );
                self.push(v);
            }
        }
        Ok(())
    }

    /// The size of the file itself (an LFS pointer's promise for pointers).
    fn file_size(&mut self) -> Result<u64> {
        if let Some(stored) = self.stored()? {
            return Ok(stored.pointer.as_ref().map_or(stored.size, |p| p.size));
        }
        let Origin::Worktree { file, .. } = &self.subject.origin else {
            unreachable!("blob origins have a stored blob");
        };
        if let Some(p) = worktree_pointer(file)? {
            return Ok(p.size);
        }
        Ok(std::fs::metadata(file)
            .map_err(|e| Error::io(file, e))?
            .len())
    }

    /// The model bytes: the file, the LFS object a pointer names, or the blob.
    fn body(&mut self) -> Result<Body<'s>> {
        let path = self.path().to_string();
        let stored_pointer = self.stored()?.and_then(|s| s.pointer.clone());
        let subject: &'s Subject<'r> = self.subject;
        match &subject.origin {
            Origin::Blob { repo, id } => match stored_pointer {
                Some(p) => lfs_body(Some(repo), &path, &p),
                None => {
                    let stored = self.stored.as_mut().expect("stored above");
                    if let Some(bytes) = stored.bytes.take() {
                        return Ok(Body::Bytes(bytes));
                    }
                    blob_body(repo, *id, stored.size)
                }
            },
            Origin::BlobBytes { repo, bytes } => match stored_pointer {
                Some(p) => lfs_body(*repo, &path, &p),
                None => Ok(Body::Borrowed(bytes)),
            },
            Origin::Worktree { repo, file, .. } => match worktree_pointer(file)? {
                Some(p) => lfs_body(*repo, &path, &p),
                None => map_file(file),
            },
        }
    }
}

fn first_structural_rule<'a>(eff: &Effective<'a>) -> &'a Rule {
    let candidates = [
        eff.allowed_dtypes.map(|s| s.rule),
        eff.denied_dtypes.map(|s| s.rule),
        eff.expected_hash.map(|s| s.rule),
        eff.required_metadata.map(|s| s.rule),
        eff.forbidden_metadata.map(|s| s.rule),
        eff.max_tensors.map(|s| s.rule),
        eff.max_parameters.map(|s| s.rule),
    ];
    candidates
        .into_iter()
        .flatten()
        .min_by_key(|r| r.number)
        .expect("called only when a structural key is set")
}

/// The pointer a work-tree file holds, if it is a pointer text (smudging skipped).
fn worktree_pointer(file: &Path) -> Result<Option<Pointer>> {
    let meta = std::fs::metadata(file).map_err(|e| Error::io(file, e))?;
    if meta.len() >= lfs::MAX_POINTER_SIZE as u64 {
        return Ok(None);
    }
    let bytes = std::fs::read(file).map_err(|e| Error::io(file, e))?;
    Ok(Pointer::parse(&bytes))
}

fn lfs_body(
    repo: Option<&gix::Repository>,
    path: &str,
    pointer: &Pointer,
) -> Result<Body<'static>> {
    let object = repo.and_then(|r| lfs::present_object(r, pointer));
    match object {
        Some(object) => map_file(&object),
        None => Err(Error::Other(format!(
            "{path}: the LFS object sha256:{} ({} bytes) is not in the local LFS store; run \
             `git lfs fetch` (or check out with LFS) so its structure can be checked",
            pointer.oid, pointer.size
        ))),
    }
}

fn map_file(file: &Path) -> Result<Body<'static>> {
    let f = std::fs::File::open(file).map_err(|e| Error::io(file, e))?;
    let len = f.metadata().map_err(|e| Error::io(file, e))?.len();
    if len == 0 {
        return Ok(Body::Empty);
    }
    // SAFETY: the mapping is read-only and lives only for this check; a concurrent truncation
    // of a model file being committed is not a case we defend against (git itself doesn't).
    let map = unsafe { memmap2::Mmap::map(&f) }.map_err(|e| Error::io(file, e))?;
    Ok(Body::Map(map))
}

/// A blob's content: whole when it fits [`MAX_BLOB_IN_MEMORY`], else a prefix long enough
/// for the model header (gix would inflate the whole object into memory).
fn blob_body(repo: &gix::Repository, id: ObjectId, size: u64) -> Result<Body<'static>> {
    if size <= MAX_BLOB_IN_MEMORY {
        return Ok(Body::Bytes(crate::git::objects::blob_bytes(repo, id)?));
    }
    let mut prefix = Vec::new();
    for limit in BLOB_PREFIXES {
        prefix = crate::git::process::blob_prefix(repo, id, limit)?;
        let header_complete = crate::formats::detect(&prefix).is_none()
            || crate::read::read_bytes(Path::new(""), &prefix).is_ok();
        if header_complete || prefix.len() as u64 >= size {
            break;
        }
    }
    Ok(Body::Bytes(prefix))
}

fn classify(path: &Path, bytes: &[u8]) -> Content {
    if let Some(format) = crate::formats::detect(bytes) {
        return match crate::read::read_bytes(path, bytes) {
            Ok(artifact) => Content::Model(Box::new(artifact)),
            Err(e) => Content::Invalid {
                format: format.name(),
                error: e.to_string(),
            },
        };
    }
    if let Some(report) = pickle::sniff(bytes) {
        return Content::Pickle(report);
    }
    let first_bytes = bytes
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(" ");
    Content::Other {
        first_bytes: if first_bytes.is_empty() {
            "none: the file is empty".into()
        } else {
            first_bytes
        },
    }
}

fn structural_violations(path: &str, eff: &Effective<'_>, a: &Artifact) -> Vec<Violation> {
    let mut out = Vec::new();
    if let Some(allowed) = eff.allowed_dtypes {
        for (dtype, names) in dtype_usage(a) {
            if !allowed.value.iter().any(|d| d == dtype) {
                out.push(Violation::new(
                    path,
                    "allowed_dtypes",
                    &allowed,
                    format!("only {}", allowed.value.join(", ")),
                    tensors_of(dtype, &names),
                ));
            }
        }
    }
    if let Some(denied) = eff.denied_dtypes {
        for (dtype, names) in dtype_usage(a) {
            if denied.value.iter().any(|d| d == dtype) {
                out.push(Violation::new(
                    path,
                    "denied_dtypes",
                    &denied,
                    format!("none of {}", denied.value.join(", ")),
                    tensors_of(dtype, &names),
                ));
            }
        }
    }
    if let Some(expected) = eff.expected_hash {
        let actual = crate::identity::structural_hash(a);
        if &actual != expected.value {
            out.push(Violation::new(
                path,
                "expected_hash",
                &expected,
                expected.value.clone(),
                actual,
            ));
        }
    }
    if let Some(required) = eff.required_metadata {
        for (key, want) in required.value {
            let expected = match want {
                Expected::Present => format!("metadata key {key}"),
                Expected::Equals(v) => format!("{key} = {v}"),
            };
            match (a.metadata.get(key), want) {
                (None, _) => out.push(Violation::new(
                    path,
                    "required_metadata",
                    &required,
                    expected,
                    format!("no metadata key {key}"),
                )),
                (Some(actual), Expected::Equals(v)) if !value_matches(v, actual) => {
                    out.push(Violation::new(
                        path,
                        "required_metadata",
                        &required,
                        expected,
                        format!("{key} = {}", crate::render::text::value_summary(actual)),
                    ))
                }
                _ => {}
            }
        }
    }
    if let Some(forbidden) = eff.forbidden_metadata {
        for key in forbidden.value {
            if let Some(actual) = a.metadata.get(key) {
                out.push(Violation::new(
                    path,
                    "forbidden_metadata",
                    &forbidden,
                    format!("no metadata key {key}"),
                    format!("{key} = {}", crate::render::text::value_summary(actual)),
                ));
            }
        }
    }
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
        by.entry(t.dtype).or_default().push(name);
    }
    by
}

fn tensors_of(dtype: &str, names: &[&str]) -> String {
    const SHOWN: usize = 3;
    let listed = names
        .iter()
        .take(SHOWN)
        .copied()
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
pub fn value_matches(expected: &toml::Value, actual: &Value) -> bool {
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
pub fn human_size(bytes: u64) -> String {
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
