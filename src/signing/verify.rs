//! `verify`: an OMS signature against a model, in three steps: the bundle's signature against
//! the verifier's trust (a key, a CA, a trusted root with an identity), the model's files
//! listed and digested as the signer did (the bundle's serialization; LFS pointers standing
//! for their objects), and the two manifests compared, every difference named.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use super::error::{Result, SigningError, io};
use super::hashing::{Digested, Hashed, digest_all};
use super::tree::{GIT_PATHS, Listing, Refused, Rules, list_dir, list_rev, relative_to_model};
use super::trust::{Signer, Trust, check, claimed_signer};
use crate::formats::oms::{
    self, MAX_BUNDLE_BYTES, Manifest, Method, OmsError, ResourceKey, Signature,
};

/// What to verify, and how.
#[derive(Debug, Clone)]
pub(crate) struct VerifyRequest<'a> {
    /// The model directory (or file), as typed.
    pub model: &'a Path,
    /// The signature file; default `MODEL/model.sig` (from the commit, with `rev`).
    pub signature: Option<&'a Path>,
    /// Verify what this revision holds rather than the work tree.
    pub rev: Option<&'a str>,
    pub trust: &'a Trust,
    pub options: ListOptions<'a>,
}

/// The listing options model_signing's command line has.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ListOptions<'a> {
    /// `--ignore-paths`, as typed (relative to the current directory).
    pub ignore_paths: &'a [PathBuf],
    /// Ignore `.git`, `.gitattributes`, `.github`, `.gitignore` (default).
    pub ignore_git_paths: bool,
    pub allow_symlinks: bool,
    /// Only the files the signature lists are looked at.
    pub ignore_unsigned_files: bool,
}

/// The verdict: who signed (or why that is not established), and every file that differs.
#[derive(Debug, Clone)]
pub(crate) struct Verdict {
    /// The model as typed (with `REV:` for a revision).
    pub model: String,
    /// The signature file as typed or found.
    pub signature: String,
    pub predicate_type: &'static str,
    pub serialization: String,
    /// Who the bundle says signed it (unverified).
    pub claimed: String,
    /// Who signed, verified; or why not.
    pub signer: Result<Signer, String>,
    /// Resources the signature lists.
    pub resources: usize,
    /// Files whose digest came from their LFS pointer.
    pub from_pointers: usize,
    /// Files (paths in the model) whose digest differs.
    pub changed: Vec<String>,
    /// Signed files that are not here.
    pub missing: Vec<String>,
    /// Files here that the signature does not list.
    pub not_covered: Vec<String>,
    /// Files with only their LFS pointer here, where the serialization needs the bytes.
    pub needs_object: Vec<String>,
    /// Paths refused (links, special files).
    pub refused: Vec<Refused>,
}

impl Verdict {
    /// Whether the signature is valid and the model is exactly what it signs.
    pub(crate) fn verified(&self) -> bool {
        self.signer.is_ok() && self.files_match()
    }

    /// Whether the model's files are exactly what the manifest lists (whoever signed it).
    pub(crate) fn files_match(&self) -> bool {
        self.changed.is_empty()
            && self.missing.is_empty()
            && self.not_covered.is_empty()
            && self.needs_object.is_empty()
            && self.refused.is_empty()
    }
}

/// Verifies `request`, at the present time.
pub(crate) fn verify(request: &VerifyRequest<'_>) -> Result<Verdict> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    match request.rev {
        None => verify_work_tree(request, now),
        Some(rev) => verify_rev(request, rev, now),
    }
}

fn verify_work_tree(request: &VerifyRequest<'_>, now: u64) -> Result<Verdict> {
    let model = request.model;
    let signature_path = signature_path(model, request.signature)?;
    let signature = read_signature_file(&signature_path)?;
    let repo = crate::git::open_repo(if model.is_dir() {
        model
    } else {
        crate::fsutil::dir_of(model)
    })
    .ok();
    let rules = rules(model, &signature_path, &signature.manifest, request.options);
    let listing = list_dir(model, &rules, repo.as_ref())?;
    judge(
        request,
        &signature,
        listing,
        repo.as_ref(),
        now,
        crate::escape::shown_path(model).to_string(),
        crate::escape::shown_path(&signature_path).to_string(),
    )
}

fn verify_rev(request: &VerifyRequest<'_>, rev: &str, now: u64) -> Result<Verdict> {
    let model = request.model;
    let repo = crate::git::open_repo(&std::env::current_dir().map_err(io("."))?)?;
    let dir = super::tree::repo_path(&repo, model)?;
    let (signature, shown) = match request.signature {
        Some(path) => (
            read_signature_file(path)?,
            crate::escape::shown_path(path).to_string(),
        ),
        None => {
            let path = if dir.is_empty() {
                "model.sig".to_owned()
            } else {
                format!("{dir}/model.sig")
            };
            let spec = format!("{rev}:{path}");
            let bytes = read_signature_blob(&repo, rev, &path)?;
            let sig = oms::parse(&bytes).map_err(|error| SigningError::Bundle {
                path: PathBuf::from(&spec),
                error,
            })?;
            (sig, crate::escape::shown(&spec).into_owned())
        }
    };
    let mut rules = rules(model, Path::new(""), &signature.manifest, request.options);
    if request.signature.is_none() {
        rules.add("model.sig");
    }
    let listing = list_rev(&repo, rev, &dir, &rules)?;
    let model_shown = crate::escape::shown(&format!("{rev}:{dir}")).into_owned();
    judge(
        request,
        &signature,
        listing,
        Some(&repo),
        now,
        model_shown,
        shown,
    )
}

fn judge(
    request: &VerifyRequest<'_>,
    signature: &Signature,
    listing: Listing,
    repo: Option<&gix::Repository>,
    now: u64,
    model: String,
    signature_shown: String,
) -> Result<Verdict> {
    let manifest = &signature.manifest;
    let signer = check(request.trust, &signature.bundle, now);
    let files = if request.options.ignore_unsigned_files {
        let signed: BTreeSet<&str> = manifest
            .resources
            .iter()
            .map(|r| r.key.path.as_str())
            .collect();
        listing
            .files
            .into_iter()
            .filter(|f| signed.contains(f.name.as_str()))
            .collect()
    } else {
        listing.files
    };
    let actual = digest_all(repo, &files, &manifest.serialization)?;
    let mut verdict = Verdict {
        model,
        signature: signature_shown,
        predicate_type: manifest.predicate_type,
        serialization: describe_serialization(manifest),
        claimed: claimed_signer(&signature.bundle),
        signer,
        resources: manifest.resources.len(),
        from_pointers: actual.iter().filter(|h| h.from_pointer).count(),
        changed: Vec::new(),
        missing: Vec::new(),
        not_covered: Vec::new(),
        needs_object: Vec::new(),
        refused: listing.refused,
    };
    compare(manifest, actual, &mut verdict);
    Ok(verdict)
}

/// Sorts every difference into its list, by file (a shard names its file).
fn compare(manifest: &Manifest, actual: Vec<Hashed>, verdict: &mut Verdict) {
    let mut expected: HashMap<&ResourceKey, &[u8]> = manifest
        .resources
        .iter()
        .map(|r| (&r.key, r.digest.as_slice()))
        .collect();
    let (mut changed, mut not_covered, mut needs_object) =
        (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
    for hashed in &actual {
        match expected.remove(&hashed.key) {
            None => {
                not_covered.insert(hashed.key.path.clone());
            }
            Some(_) if hashed.digest == Digested::NeedsObject => {
                needs_object.insert(hashed.key.path.clone());
            }
            Some(digest) => {
                if hashed.digest != Digested::Digest(digest.to_vec()) {
                    changed.insert(hashed.key.path.clone());
                }
            }
        }
    }
    let here: BTreeSet<&str> = actual.iter().map(|h| h.key.path.as_str()).collect();
    let mut missing = BTreeSet::new();
    for key in expected.keys() {
        // A shard missing from a file that is here means the file changed length.
        if here.contains(key.path.as_str()) {
            changed.insert(key.path.clone());
        } else {
            missing.insert(key.path.clone());
        }
    }
    // A file whose length changed has shards only one side lists: it is changed, not new.
    if matches!(manifest.serialization.method, Method::Shards { .. }) {
        let signed: BTreeSet<&str> = manifest
            .resources
            .iter()
            .map(|r| r.key.path.as_str())
            .collect();
        not_covered.retain(|p: &String| {
            if signed.contains(p.as_str()) {
                changed.insert(p.clone());
                false
            } else {
                true
            }
        });
    }
    verdict.changed = changed.into_iter().collect();
    verdict.missing = missing.into_iter().collect();
    verdict.not_covered = not_covered.into_iter().collect();
    verdict.needs_object = needs_object.into_iter().collect();
}

/// "files, sha256" or "shards of 1000000000 bytes, blake2b".
pub(crate) fn describe_serialization(manifest: &Manifest) -> String {
    let s = &manifest.serialization;
    match s.method {
        Method::Files => format!("files, {}", s.hash.name()),
        Method::Shards { shard_size } => format!("shards of {shard_size} bytes, {}", s.hash.name()),
    }
}

/// The ignore rules of a verification: the git paths, the options' paths, the signature file,
/// and the paths the signature itself lists as ignored.
fn rules(model: &Path, signature: &Path, manifest: &Manifest, options: ListOptions<'_>) -> Rules {
    let mut rules = Rules {
        ignore: Vec::new(),
        allow_symlinks: options.allow_symlinks,
    };
    if options.ignore_git_paths {
        for p in GIT_PATHS {
            rules.add(p);
        }
    }
    for p in options.ignore_paths {
        if let Some(rel) = relative_to_model(model, p) {
            rules.add(&rel);
        }
    }
    if !signature.as_os_str().is_empty()
        && let Some(rel) = relative_to_model(model, signature)
    {
        rules.add(&rel);
    }
    for p in &manifest.serialization.ignore_paths {
        rules.add(p);
    }
    rules
}

fn signature_path(model: &Path, given: Option<&Path>) -> Result<PathBuf> {
    match given {
        Some(p) => Ok(p.to_owned()),
        None if model.is_dir() => Ok(model.join("model.sig")),
        None => Err(SigningError::Model {
            path: model.to_owned(),
            message: "a single-file model: name its signature with --signature".to_owned(),
        }),
    }
}

/// Reads and parses a signature file, refusing one over the limit before reading it.
pub(crate) fn read_signature_file(path: &Path) -> Result<Signature> {
    let meta = std::fs::metadata(path).map_err(io(path))?;
    if meta.len() > MAX_BUNDLE_BYTES {
        return Err(SigningError::Bundle {
            path: path.to_owned(),
            error: OmsError::TooLarge {
                len: meta.len(),
                limit: MAX_BUNDLE_BYTES,
            },
        });
    }
    let bytes = crate::fsutil::read_regular(path, MAX_BUNDLE_BYTES, false).map_err(io(path))?;
    oms::parse(&bytes).map_err(|error| SigningError::Bundle {
        path: path.to_owned(),
        error,
    })
}

fn read_signature_blob(repo: &gix::Repository, rev: &str, path: &str) -> Result<Vec<u8>> {
    let spec = PathBuf::from(format!("{rev}:{path}"));
    let Some(id) = crate::git::tree_entry(repo, rev, path)?.and_then(crate::git::Entry::file)
    else {
        return Err(SigningError::Model {
            path: spec,
            message: "no signature file there (give --signature)".to_owned(),
        });
    };
    let len = repo
        .find_header(id)
        .map_err(|e| crate::git::object_error(id, e))?
        .size();
    if len > MAX_BUNDLE_BYTES {
        return Err(SigningError::Bundle {
            path: spec,
            error: OmsError::TooLarge {
                len,
                limit: MAX_BUNDLE_BYTES,
            },
        });
    }
    Ok(crate::git::blob_bytes(repo, id)?)
}
