//! One file judged against a signature, for the policy's `signature` key: whether the
//! signature's manifest lists it and whether its digest is the one signed. The bytes come
//! from wherever the policy reads the file (a blob, the index, the work tree); an LFS pointer
//! stands for its object exactly as in `verify`.

use super::hashing::digest_bytes;
use super::trust::{Signer, Trust, check};
use crate::formats::oms::{HashAlgorithm, Method, Signature};
use crate::git::Pointer;

/// How one file stands against a signature's manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FileState {
    /// Listed, with the digest signed.
    Unchanged,
    /// Listed, with another digest.
    Changed,
    /// Not listed.
    NotCovered,
    /// Only its LFS pointer is here, and the serialization needs the bytes.
    NeedsObject,
}

/// Who signed `signature`, verified against `trust` at the present time; or why not.
pub(crate) fn signer_of(trust: &Trust, signature: &Signature) -> Result<Signer, String> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    check(trust, &signature.bundle, now)
}

/// How the file `name` (relative to the signed directory, `/`-separated) stands against
/// `signature` by its LFS `pointer` alone: None when the file is listed but the serialization's
/// digest is not the oid (then [`file_state`] needs its bytes).
pub(crate) fn pointer_state(
    signature: &Signature,
    name: &str,
    pointer: Option<&Pointer>,
) -> Option<FileState> {
    let manifest = &signature.manifest;
    let Some(first) = manifest.resources.iter().find(|r| r.key.path == name) else {
        return Some(FileState::NotCovered);
    };
    let serialization = &manifest.serialization;
    let oid_is_digest =
        serialization.method == Method::Files && serialization.hash == HashAlgorithm::Sha256;
    let pointer = pointer.filter(|_| oid_is_digest)?;
    let same = hex::decode(&pointer.oid).is_ok_and(|oid| first.digest == oid);
    Some(if same {
        FileState::Unchanged
    } else {
        FileState::Changed
    })
}

/// How the file `name` stands against `signature`, from its bytes.
pub(crate) fn file_state(signature: &Signature, name: &str, bytes: &[u8]) -> FileState {
    let manifest = &signature.manifest;
    let mut expected: Vec<_> = manifest
        .resources
        .iter()
        .filter(|r| r.key.path == name)
        .map(|r| (r.key.clone(), r.digest.clone()))
        .collect();
    if expected.is_empty() {
        return FileState::NotCovered;
    }
    let mut actual = digest_bytes(name, bytes, &manifest.serialization);
    actual.sort();
    expected.sort();
    if actual == expected {
        FileState::Unchanged
    } else {
        FileState::Changed
    }
}
