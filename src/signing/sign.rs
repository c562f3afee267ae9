//! `sign`: an OMS v1.0 signature of a model directory, as model_signing 1.1 writes it, with a
//! private key (the bundle holds the key's hint) or a certificate and its chain. Keyless
//! signing needs Fulcio and Rekor on the network and is not offered.

use std::path::{Path, PathBuf};

use super::error::{Result, SigningError, io};
use super::hashing::{Digested, digest_all};
use super::keys::{PrivateKey, pae};
use super::tree::{GIT_PATHS, Rules, list_dir, relative_to_model};
use super::x509::Cert;
use crate::formats::oms::{
    HashAlgorithm, Manifest, Method, PREDICATE_V1, Resource, Serialization, SignerMaterial,
    bundle_json, manifest_order, statement_json,
};

/// What to sign, with what.
pub(crate) struct SignRequest<'a> {
    pub model: &'a Path,
    /// Default `MODEL/model.sig`.
    pub signature: Option<&'a Path>,
    pub key: &'a PrivateKey,
    /// The signing certificate and the rest of its chain (the certificate way).
    pub certificates: Option<Vec<Cert>>,
    pub ignore_paths: &'a [PathBuf],
    pub ignore_git_paths: bool,
    pub allow_symlinks: bool,
    pub hash: HashAlgorithm,
    /// `shards` of this many bytes, else `files`.
    pub shard_size: Option<u64>,
}

/// What was signed.
#[derive(Debug, Clone)]
pub(crate) struct Signed {
    pub signature: PathBuf,
    pub files: usize,
    pub resources: usize,
    /// Files whose digest was their LFS pointer's (unchanged since added, or not smudged).
    pub from_pointers: usize,
    pub signer: String,
}

/// Loads the certificate way's material: the signing certificate (its key must be the private
/// key's) first, then the chain files' certificates.
pub(crate) fn certificate_material(
    key: &PrivateKey,
    signing: &Path,
    chain: &[PathBuf],
) -> Result<Vec<Cert>> {
    let read = |p: &Path| -> Result<Vec<Cert>> {
        let text = crate::fsutil::read_regular(p, 16 << 20, false).map_err(io(p))?;
        Cert::from_pem_chain(&text).map_err(|message| SigningError::Material {
            path: p.to_owned(),
            what: "certificate file",
            message,
        })
    };
    let mut certs = read(signing)?;
    certs.truncate(1);
    let leaf_key = certs[0]
        .public_key()
        .map_err(|message| SigningError::Material {
            path: signing.to_owned(),
            what: "signing certificate",
            message,
        })?;
    if leaf_key != key.public() {
        return Err(SigningError::KeyMismatch {
            certificate: signing.to_owned(),
        });
    }
    for p in chain {
        certs.extend(read(p)?);
    }
    Ok(certs)
}

pub(crate) fn sign(request: &SignRequest<'_>) -> Result<Signed> {
    let model = request.model;
    let signature = match request.signature {
        Some(p) => p.to_owned(),
        None if model.is_dir() => model.join("model.sig"),
        None => {
            return Err(SigningError::Model {
                path: model.to_owned(),
                message: "a single-file model: name its signature with --signature".to_owned(),
            });
        }
    };
    let mut rules = Rules {
        ignore: Vec::new(),
        allow_symlinks: request.allow_symlinks,
    };
    for p in request
        .ignore_paths
        .iter()
        .map(PathBuf::as_path)
        .chain([signature.as_path()])
    {
        if let Some(rel) = relative_to_model(model, p) {
            rules.add(&rel);
        }
    }
    let mut recorded = rules.ignore.clone();
    if request.ignore_git_paths {
        for p in GIT_PATHS {
            rules.add(p);
            recorded.push(p.to_owned());
        }
    }
    recorded.sort();
    recorded.dedup();
    let repo = crate::git::open_repo(if model.is_dir() {
        model
    } else {
        crate::fsutil::dir_of(model)
    })
    .ok();
    let mut listing = list_dir(model, &rules, repo.as_ref())?;
    if let Some(refused) = listing.refused.first() {
        return Err(if refused.reason.starts_with("a symbolic link") {
            SigningError::Symlink {
                name: refused.name.clone(),
            }
        } else {
            SigningError::Special {
                name: refused.name.clone(),
                reason: refused.reason,
            }
        });
    }
    let serialization = Serialization {
        method: request
            .shard_size
            .map_or(Method::Files, |shard_size| Method::Shards { shard_size }),
        hash: request.hash,
        allow_symlinks: request.allow_symlinks,
        ignore_paths: recorded,
    };
    if let Some(repo) = &repo
        && serialization.method == Method::Files
        && serialization.hash == HashAlgorithm::Sha256
        && model.is_dir()
    {
        let dir = super::tree::repo_path(repo, model)?;
        let unchanged = crate::git::unchanged_lfs_files(repo, &dir)?;
        for file in listing.files.iter_mut().filter(|f| f.pointer.is_none()) {
            if let Some(pointer) = unchanged.get(&file.name) {
                file.pointer = Some(pointer.clone());
            }
        }
    }
    let hashed = digest_all(repo.as_ref(), &listing.files, &serialization)?;
    let from_pointers = hashed.iter().filter(|h| h.from_pointer).count();
    let mut resources = Vec::with_capacity(hashed.len());
    for h in hashed {
        match h.digest {
            Digested::Digest(digest) => resources.push(Resource { key: h.key, digest }),
            Digested::NeedsObject => return Err(SigningError::NeedsObject { name: h.key.path }),
        }
    }
    resources.sort_by(|a, b| manifest_order(&a.key, &b.key));
    let manifest = Manifest {
        predicate_type: PREDICATE_V1,
        model_name: model_name(model),
        root_digest: None,
        serialization,
        resources,
    };
    let payload = statement_json(&manifest);
    let sig = request.key.sign(&pae(&payload));
    let (material, signer) = match &request.certificates {
        None => {
            let public = request.key.public();
            (
                SignerMaterial::KeyHint(public.hint()),
                format!("key {} ({})", public.hint(), public.describe()),
            )
        }
        Some(certs) => (
            SignerMaterial::Chain(certs.iter().map(|c| c.der.clone()).collect()),
            format!(
                "certificate {}, issued by {}",
                certs[0].subject(),
                certs[0].issuer_name()
            ),
        ),
    };
    let bytes = bundle_json(&payload, &sig, &material);
    crate::fsutil::write_bytes_atomically(&signature, &bytes)?;
    Ok(Signed {
        signature,
        files: listing.files.len(),
        resources: manifest.resources.len(),
        from_pointers,
        signer,
    })
}

/// The model's name as model_signing records it: the path's last component (the directory's
/// own name for `.`).
fn model_name(model: &Path) -> String {
    let name = model
        .file_name()
        .and_then(|n| n.to_str())
        .filter(|n| *n != "..");
    match name {
        Some(n) => n.to_owned(),
        None => std::fs::canonicalize(model)
            .ok()
            .and_then(|p| p.file_name().and_then(|n| n.to_str()).map(str::to_owned))
            .unwrap_or_else(|| "model".to_owned()),
    }
}
