//! Every way an OMS signature file (a Sigstore bundle holding a model's in-toto statement) can
//! be rejected before any key is tried: one variant per rule, each naming the JSON key and
//! what was expected.

/// Every way an OMS bundle can be rejected as unreadable; each names the key and what was
/// expected.
#[allow(
    missing_docs,
    reason = "each variant's #[error] message documents it, with the fields it prints"
)]
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum OmsError {
    #[error(
        "the bundle is {len} bytes, over the limit of {limit} bytes for a signature file (a \
         manifest of a million files fits in far less)"
    )]
    TooLarge { len: u64, limit: u64 },
    #[error("not JSON: {message}")]
    NotJson { message: String },
    #[error("key {key}: expected {expected}")]
    Field { key: String, expected: String },
    #[error(
        "key mediaType: {found:?} is not a Sigstore bundle (expected \
         application/vnd.dev.sigstore.bundle.v0.3+json, or version 0.1 or 0.2)"
    )]
    MediaType { found: String },
    #[error(
        "the bundle holds a messageSignature, not a dsseEnvelope: it signs one file's digest, not \
         a model's in-toto statement"
    )]
    NotDsse,
    #[error(
        "key verificationMaterial: expected exactly one of publicKey, x509CertificateChain or \
         certificate, found {found}"
    )]
    Material { found: String },
    #[error("key {key}: not base64 ({message})")]
    Base64 { key: String, message: String },
    #[error("key dsseEnvelope.payloadType: {found:?}, expected application/vnd.in-toto+json")]
    PayloadType { found: String },
    #[error("key dsseEnvelope.signatures: {count} signatures, expected exactly one")]
    SignatureCount { count: usize },
    #[error("the DSSE payload is not a JSON in-toto statement: {message}")]
    StatementJson { message: String },
    #[error("statement key _type: {found:?}, expected https://in-toto.io/Statement/v1")]
    StatementType { found: String },
    #[error(
        "statement key predicateType: {found:?} is not a model signature (expected \
         https://model_signing/signature/v1.0 or https://model_signing/Digests/v0.1)"
    )]
    PredicateType { found: String },
    #[error("statement key subject: {count} subjects, expected exactly one (the model)")]
    SubjectCount { count: usize },
    #[error("predicate key serialization.method: {found:?}, expected \"files\" or \"shards\"")]
    Method { found: String },
    #[error(
        "predicate key serialization.hash_type: {found:?}, expected sha256, blake2 (blake2b) or \
         blake3"
    )]
    HashType { found: String },
    #[error("predicate key serialization.shard_size: {found}, expected a whole number above 0")]
    ShardSize { found: String },
    #[error("resource {name}: algorithm {found:?}, expected {expected:?} (the serialization's)")]
    Algorithm {
        name: String,
        found: String,
        expected: String,
    },
    #[error("resource {name}: digest {found:?}, expected {expected} lowercase hex digits")]
    Digest {
        name: String,
        found: String,
        expected: usize,
    },
    #[error("resource {name}: {reason}")]
    ResourceName { name: String, reason: &'static str },
    #[error("resource {name} is listed twice")]
    Duplicate { name: String },
    #[error(
        "the subject's root digest is {stated}, but the resources hash to {computed}: the \
         manifest is inconsistent"
    )]
    RootDigest { stated: String, computed: String },
}
