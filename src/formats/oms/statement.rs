//! The in-toto statement an OMS signature signs: one subject (the model's name and the
//! "root digest", SHA-256 over every resource's digest in the order listed) and a predicate
//! listing the serialization and every resource `{name, algorithm, digest}`. Also the
//! statement of model_signing 0.2 (`https://model_signing/Digests/v0.1`), whose subjects are the
//! files themselves.

use serde_json::{Map, Value};
use sha2::{Digest as _, Sha256};

use super::bundle::{array, field, object, required_at, string};
use super::error::OmsError;

type Result<T, E = OmsError> = std::result::Result<T, E>;

/// The statement type.
pub(crate) const STATEMENT_TYPE: &str = "https://in-toto.io/Statement/v1";
/// The predicate type of model_signing 0.3 and later.
pub(crate) const PREDICATE_V1: &str = "https://model_signing/signature/v1.0";
/// The predicate type of model_signing 0.2.
pub(crate) const PREDICATE_DIGESTS_V01: &str = "https://model_signing/Digests/v0.1";
/// model_signing's name for a model whose 0.2 statement has none.
const COMPAT_MODEL_NAME: &str = "compat-undefined-not-present";

/// A hash a serialization uses for every resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HashAlgorithm {
    /// SHA-256 (what model_signing's command line always uses).
    Sha256,
    /// BLAKE2b with its 64-byte digest (Python's `hashlib.blake2b()`).
    Blake2b,
    /// BLAKE3 with its 32-byte digest.
    Blake3,
}

impl HashAlgorithm {
    /// The name model_signing records as a resource's algorithm for whole files.
    pub fn name(self) -> &'static str {
        match self {
            HashAlgorithm::Sha256 => "sha256",
            HashAlgorithm::Blake2b => "blake2b",
            HashAlgorithm::Blake3 => "blake3",
        }
    }

    /// Bytes of a digest.
    pub fn digest_len(self) -> usize {
        match self {
            HashAlgorithm::Blake2b => 64,
            HashAlgorithm::Sha256 | HashAlgorithm::Blake3 => 32,
        }
    }

    fn from_hash_type(s: &str) -> Option<HashAlgorithm> {
        match s {
            "sha256" => Some(HashAlgorithm::Sha256),
            "blake2" | "blake2b" => Some(HashAlgorithm::Blake2b),
            "blake3" => Some(HashAlgorithm::Blake3),
            _ => None,
        }
    }
}

/// How the model was cut into resources.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// One resource per file.
    Files,
    /// One resource per `shard_size` bytes of each file (`path:start:end`); empty files have none.
    Shards {
        /// Bytes of every shard but each file's last.
        shard_size: u64,
    },
}

/// `predicate.serialization`: what a verifier must redo to get the same resources.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Serialization {
    /// `method`, with `shard_size` for shards.
    pub method: Method,
    /// `hash_type`.
    pub hash: HashAlgorithm,
    /// `allow_symlinks`.
    pub allow_symlinks: bool,
    /// `ignore_paths`, relative to the model, as written (sorted when this tool signs).
    pub ignore_paths: Vec<String>,
}

impl Serialization {
    /// The algorithm name each resource carries: `sha256`, or `sha256-sharded-1000000000`.
    pub fn resource_algorithm(&self) -> String {
        match self.method {
            Method::Files => self.hash.name().to_owned(),
            Method::Shards { shard_size } => format!("{}-sharded-{shard_size}", self.hash.name()),
        }
    }
}

/// A resource: a file (relative path, `/`-separated, normalized as model_signing's
/// `PurePosixPath` does: no `.` components, no empty ones; `.` alone is a single-file model), or
/// a shard of one.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResourceKey {
    /// The file's path in the model.
    pub path: String,
    /// `[start, end)` for a shard.
    pub range: Option<(u64, u64)>,
}

impl ResourceKey {
    /// The name as the manifest writes it (`path` or `path:start:end`).
    pub fn name(&self) -> String {
        match self.range {
            None => self.path.clone(),
            Some((start, end)) => format!("{}:{start}:{end}", self.path),
        }
    }
}

/// One resource and its digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resource {
    /// What it covers.
    pub key: ResourceKey,
    /// The digest (its algorithm is the serialization's).
    pub digest: Vec<u8>,
}

/// The statement's content: what the signer says the model is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// `predicateType`.
    pub predicate_type: &'static str,
    /// The subject's name (the model directory's name when it was signed).
    pub model_name: String,
    /// The subject's SHA-256 root digest (checked against the resources); None for 0.2.
    pub root_digest: Option<Vec<u8>>,
    /// How the resources were made.
    pub serialization: Serialization,
    /// Every resource, in the order listed.
    pub resources: Vec<Resource>,
}

/// Reads the statement (the DSSE payload) into a manifest, checking every rule of the format:
/// one subject, a known predicate, consistent algorithms and digest lengths, safe and unique
/// names, and a root digest that matches the resources.
pub(crate) fn parse(payload: &[u8]) -> Result<Manifest> {
    let value: Value = serde_json::from_slice(payload).map_err(|e| OmsError::StatementJson {
        message: e.to_string(),
    })?;
    let statement = object(&value, "(the statement)")?;
    let kind = string(statement, "_type", "_type")?;
    if kind != STATEMENT_TYPE {
        return Err(OmsError::StatementType {
            found: kind.to_owned(),
        });
    }
    let predicate_type = string(statement, "predicateType", "predicateType")?;
    let subjects = array(required_at(statement, "subject", "subject")?, "subject")?;
    match predicate_type {
        PREDICATE_V1 => v1(statement, subjects),
        PREDICATE_DIGESTS_V01 => digests_v01(subjects),
        other => Err(OmsError::PredicateType {
            found: other.to_owned(),
        }),
    }
}

fn v1(statement: &Map<String, Value>, subjects: &[Value]) -> Result<Manifest> {
    if subjects.len() != 1 {
        return Err(OmsError::SubjectCount {
            count: subjects.len(),
        });
    }
    let subject = object(&subjects[0], "subject[0]")?;
    let model_name = string(subject, "name", "subject[0].name")?.to_owned();
    let digests = object(
        required_at(subject, "digest", "subject[0].digest")?,
        "subject[0].digest",
    )?;
    let stated = hex_digest(
        string(digests, "sha256", "subject[0].digest.sha256")?,
        32,
        "subject[0]",
    )?;
    let predicate = object(
        required_at(statement, "predicate", "predicate")?,
        "predicate",
    )?;
    let serialization = serialization(object(
        required_at(predicate, "serialization", "predicate.serialization")?,
        "predicate.serialization",
    )?)?;
    let expected_algorithm = serialization.resource_algorithm();
    let list = array(
        required_at(predicate, "resources", "predicate.resources")?,
        "predicate.resources",
    )?;
    let mut resources = Vec::with_capacity(list.len());
    for (i, r) in list.iter().enumerate() {
        let at = format!("predicate.resources[{i}]");
        let r = object(r, &at)?;
        let name = string(r, "name", &format!("{at}.name"))?;
        let algorithm = string(r, "algorithm", &format!("{at}.algorithm"))?;
        if algorithm != expected_algorithm {
            return Err(OmsError::Algorithm {
                name: crate::escape::quoted(name),
                found: algorithm.to_owned(),
                expected: expected_algorithm,
            });
        }
        let digest = hex_digest(
            string(r, "digest", &format!("{at}.digest"))?,
            serialization.hash.digest_len(),
            name,
        )?;
        let key = resource_key(name, serialization.method)?;
        resources.push(Resource { key, digest });
    }
    refuse_duplicates(&resources)?;
    let computed = root_digest(&resources);
    if computed != stated {
        return Err(OmsError::RootDigest {
            stated: hex::encode(stated),
            computed: hex::encode(computed),
        });
    }
    Ok(Manifest {
        predicate_type: PREDICATE_V1,
        model_name,
        root_digest: Some(stated),
        serialization,
        resources,
    })
}

/// model_signing 0.2's statement: every file a subject, SHA-256, no root digest.
fn digests_v01(subjects: &[Value]) -> Result<Manifest> {
    let mut resources = Vec::with_capacity(subjects.len());
    for (i, s) in subjects.iter().enumerate() {
        let at = format!("subject[{i}]");
        let s = object(s, &at)?;
        let name = string(s, "name", &format!("{at}.name"))?;
        let digests = object(required_at(s, "digest", &format!("{at}.digest"))?, &at)?;
        let digest = hex_digest(
            string(digests, "sha256", &format!("{at}.digest.sha256"))?,
            32,
            name,
        )?;
        resources.push(Resource {
            key: resource_key(name, Method::Files)?,
            digest,
        });
    }
    refuse_duplicates(&resources)?;
    Ok(Manifest {
        predicate_type: PREDICATE_DIGESTS_V01,
        model_name: COMPAT_MODEL_NAME.to_owned(),
        root_digest: None,
        serialization: Serialization {
            method: Method::Files,
            hash: HashAlgorithm::Sha256,
            allow_symlinks: false,
            ignore_paths: Vec::new(),
        },
        resources,
    })
}

fn serialization(s: &Map<String, Value>) -> Result<Serialization> {
    let method = string(s, "method", "predicate.serialization.method")?;
    let hash_type = string(s, "hash_type", "predicate.serialization.hash_type")?;
    let hash = HashAlgorithm::from_hash_type(hash_type).ok_or_else(|| OmsError::HashType {
        found: hash_type.to_owned(),
    })?;
    let method = match method {
        "files" => Method::Files,
        "shards" => {
            let size = required_at(s, "shard_size", "predicate.serialization.shard_size")?;
            match size.as_u64().filter(|n| *n > 0) {
                Some(shard_size) => Method::Shards { shard_size },
                None => {
                    return Err(OmsError::ShardSize {
                        found: size.to_string(),
                    });
                }
            }
        }
        other => {
            return Err(OmsError::Method {
                found: other.to_owned(),
            });
        }
    };
    let allow_symlinks = match s.get("allow_symlinks") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(Value::String(t)) if t == "true" || t == "false" => t == "true",
        Some(_) => {
            return Err(field(
                "predicate.serialization.allow_symlinks",
                "true or false",
            ));
        }
    };
    let ignore_paths = match s.get("ignore_paths") {
        None | Some(Value::Null) => Vec::new(),
        Some(v) => array(v, "predicate.serialization.ignore_paths")?
            .iter()
            .map(|p| {
                p.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| field("predicate.serialization.ignore_paths", "strings"))
            })
            .collect::<Result<_>>()?,
    };
    Ok(Serialization {
        method,
        hash,
        allow_symlinks,
        ignore_paths,
    })
}

fn hex_digest(text: &str, len: usize, name: &str) -> Result<Vec<u8>> {
    let valid = text.len() == 2 * len
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if !valid {
        return Err(OmsError::Digest {
            name: crate::escape::quoted(name),
            found: text.chars().take(140).collect(),
            expected: 2 * len,
        });
    }
    Ok(hex::decode(text).expect("checked hex"))
}

fn resource_key(name: &str, method: Method) -> Result<ResourceKey> {
    match method {
        Method::Files => Ok(ResourceKey {
            path: normalized_path(name)?,
            range: None,
        }),
        Method::Shards { shard_size } => {
            let bad = |reason| OmsError::ResourceName {
                name: crate::escape::quoted(name),
                reason,
            };
            let mut parts = name.split(':');
            let (Some(path), Some(start), Some(end), None) =
                (parts.next(), parts.next(), parts.next(), parts.next())
            else {
                return Err(bad("a shard is named PATH:START:END"));
            };
            let number = |s: &str| {
                (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
                    .then(|| s.parse::<u64>().ok())
                    .flatten()
            };
            let (Some(start), Some(end)) = (number(start), number(end)) else {
                return Err(bad("a shard's START and END are whole numbers"));
            };
            if start >= end || end - start > shard_size {
                return Err(bad(
                    "a shard covers 1 to shard_size bytes, START before END",
                ));
            }
            Ok(ResourceKey {
                path: normalized_path(path)?,
                range: Some((start, end)),
            })
        }
    }
}

/// A resource's path as model_signing compares it (`PurePosixPath`): empty and `.` components
/// dropped. A `..` component, an absolute path, a NUL or an empty name is refused: a verifier
/// never looks outside the model.
pub(crate) fn normalized_path(name: &str) -> Result<String> {
    let bad = |reason| OmsError::ResourceName {
        name: crate::escape::quoted(name),
        reason,
    };
    if name.is_empty() {
        return Err(bad("an empty name"));
    }
    if name.starts_with('/') {
        return Err(bad("an absolute path; resources are relative to the model"));
    }
    if name.contains('\0') {
        return Err(bad("a name with a NUL byte"));
    }
    let mut parts = Vec::new();
    for part in name.split('/') {
        match part {
            "" | "." => {}
            ".." => return Err(bad("a path with a `..` component leaves the model")),
            p => parts.push(p),
        }
    }
    Ok(if parts.is_empty() {
        ".".to_owned()
    } else {
        parts.join("/")
    })
}

fn refuse_duplicates(resources: &[Resource]) -> Result<()> {
    let mut keys: Vec<&ResourceKey> = resources.iter().map(|r| &r.key).collect();
    keys.sort_unstable();
    match keys.windows(2).find(|w| w[0] == w[1]) {
        Some(w) => Err(OmsError::Duplicate {
            name: crate::escape::quoted(&w[0].name()),
        }),
        None => Ok(()),
    }
}

/// SHA-256 over the digests, in order: the subject's digest.
pub(crate) fn root_digest(resources: &[Resource]) -> Vec<u8> {
    let mut hasher = Sha256::new();
    for r in resources {
        hasher.update(&r.digest);
    }
    hasher.finalize().to_vec()
}

/// The order model_signing lists resources in: by path component, then shard start (Python
/// sorts `PurePosixPath`s by their parts, so `a/b` comes before `a.b`).
pub(crate) fn manifest_order(a: &ResourceKey, b: &ResourceKey) -> std::cmp::Ordering {
    a.path
        .split('/')
        .cmp(b.path.split('/'))
        .then(a.range.cmp(&b.range))
}
