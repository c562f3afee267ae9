//! OMS, the OpenSSF Model Signing format (model_signing, sigstore/model-transparency): a
//! detached `model.sig` holding a Sigstore bundle whose DSSE envelope signs an in-toto
//! statement listing every file (or shard) of a model with its digest. This module reads and
//! writes the bytes, bounded and with one named error per rule; it verifies no signature
//! (the signing adapter does, against a key, a CA or a Sigstore trusted root).

mod bundle;
mod error;
mod statement;
mod write;

pub(crate) use bundle::IN_TOTO_PAYLOAD_TYPE;
pub use bundle::{Bundle, Envelope, InclusionProof, Material, TlogEntry};
pub use error::OmsError;
pub use statement::{HashAlgorithm, Manifest, Method, Resource, ResourceKey, Serialization};
pub(crate) use statement::{PREDICATE_V1, manifest_order, normalized_path};
pub(crate) use write::{SignerMaterial, bundle_json, statement_json};

/// The largest signature file read: 64 MiB holds the manifest of several hundred thousand
/// files; anything larger is refused before it is read whole.
pub const MAX_BUNDLE_BYTES: u64 = 64 << 20;

/// A bundle read: the envelope and its statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signature {
    /// The Sigstore bundle.
    pub bundle: Bundle,
    /// The statement it signs (not yet verified: nothing here checks the signature).
    pub manifest: Manifest,
}

/// Reads a signature file's bytes: the bundle, then the statement in its envelope.
pub fn parse(bytes: &[u8]) -> Result<Signature, OmsError> {
    if bytes.len() as u64 > MAX_BUNDLE_BYTES {
        return Err(OmsError::TooLarge {
            len: bytes.len() as u64,
            limit: MAX_BUNDLE_BYTES,
        });
    }
    let bundle = bundle::parse(bytes)?;
    let manifest = statement::parse(&bundle.envelope.payload)?;
    Ok(Signature { bundle, manifest })
}

/// Whether `bytes` look like a Sigstore bundle (a JSON object naming a bundle media type near
/// its start), without parsing it: how `inspect` and the textconv tell a `model.sig` from a GPG
/// signature or any other file.
pub(crate) fn looks_like_bundle(bytes: &[u8]) -> bool {
    let start = bytes.iter().position(|b| !b.is_ascii_whitespace());
    let Some(start) = start else { return false };
    if bytes[start] != b'{' {
        return false;
    }
    let window = &bytes[start..bytes.len().min(start + 4096)];
    let needle = b"application/vnd.dev.sigstore.bundle";
    window.windows(needle.len()).any(|w| w == needle)
}
