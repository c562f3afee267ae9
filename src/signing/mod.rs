//! OpenSSF model signatures (OMS, model_signing's `model.sig`): `verify` checks one against a
//! public key, a certificate authority or a Sigstore trusted root with an identity, offline,
//! and names every file that differs; `sign` writes one with a key or a certificate. Inside a
//! git repository an LFS pointer stands for its object (with `files` and `sha256`, its oid is
//! the file's digest), so a clone without LFS objects verifies, and `--rev` verifies a commit
//! through the git adapter. The bytes of the format are `formats::oms`'s.

mod error;
mod file;
mod hashing;
mod keys;
mod rekor;
mod report;
mod sign;
mod tree;
mod trust;
mod trust_root;
mod verify;
mod x509;

pub(crate) use error::SigningError;
pub(crate) use file::{FileState, file_state, pointer_state, signer_of};
pub(crate) use keys::PrivateKey;
pub(crate) use report::{BundleReport, SignReport, VerifyReport, describe as describe_bundle};
pub(crate) use sign::{SignRequest, certificate_material, sign};
pub(crate) use trust::Trust;
pub(crate) use verify::{ListOptions, VerifyRequest, read_signature_file, verify};

/// Reads a private key file (PEM: PKCS #8 or SEC1, ECDSA on P-256, P-384 or P-521).
pub(crate) fn private_key(path: &std::path::Path) -> Result<PrivateKey, SigningError> {
    let text = crate::fsutil::read_regular(path, 1 << 20, false).map_err(error::io(path))?;
    PrivateKey::from_pem(&text).map_err(|message| SigningError::Material {
        path: path.to_owned(),
        what: "private key",
        message,
    })
}
