//! Writing an OMS v1.0 signature as model_signing 1.1 writes it: the statement as protobuf's
//! `MessageToJson` prints it (two-space indent, non-ASCII escaped), and the bundle as one
//! line of compact JSON with model_signing's keys in its order.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::Serialize;

use super::bundle::{IN_TOTO_PAYLOAD_TYPE, MEDIA_TYPES};
use super::statement::{Manifest, Method, PREDICATE_V1, STATEMENT_TYPE};

/// The signer's material as the bundle records it.
#[derive(Debug, Clone)]
pub(crate) enum SignerMaterial {
    /// A key, named by its hint (SHA-256 hex of its PEM).
    KeyHint(String),
    /// A certificate chain: the signing certificate first, then the rest of the chain (DER).
    Chain(Vec<Vec<u8>>),
}

#[derive(Serialize)]
struct Statement<'a> {
    #[serde(rename = "_type")]
    kind: &'a str,
    subject: [Subject<'a>; 1],
    #[serde(rename = "predicateType")]
    predicate_type: &'a str,
    predicate: Predicate<'a>,
}

#[derive(Serialize)]
struct Subject<'a> {
    name: &'a str,
    digest: Sha256Digest,
}

#[derive(Serialize)]
struct Sha256Digest {
    sha256: String,
}

#[derive(Serialize)]
struct Predicate<'a> {
    serialization: SerializationJson<'a>,
    resources: Vec<ResourceJson<'a>>,
}

#[derive(Serialize)]
struct SerializationJson<'a> {
    method: &'a str,
    hash_type: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    shard_size: Option<u64>,
    allow_symlinks: bool,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    ignore_paths: &'a [String],
}

#[derive(Serialize)]
struct ResourceJson<'a> {
    algorithm: &'a str,
    digest: String,
    name: String,
}

/// The statement's bytes (the DSSE payload) for a v1.0 manifest whose root digest is set.
pub(crate) fn statement_json(manifest: &Manifest) -> Vec<u8> {
    let algorithm = manifest.serialization.resource_algorithm();
    let (method, shard_size) = match manifest.serialization.method {
        Method::Files => ("files", None),
        Method::Shards { shard_size } => ("shards", Some(shard_size)),
    };
    let root = super::statement::root_digest(&manifest.resources);
    let statement = Statement {
        kind: STATEMENT_TYPE,
        subject: [Subject {
            name: &manifest.model_name,
            digest: Sha256Digest {
                sha256: hex::encode(root),
            },
        }],
        predicate_type: PREDICATE_V1,
        predicate: Predicate {
            serialization: SerializationJson {
                method,
                hash_type: manifest.serialization.hash.name(),
                shard_size,
                allow_symlinks: manifest.serialization.allow_symlinks,
                ignore_paths: &manifest.serialization.ignore_paths,
            },
            resources: manifest
                .resources
                .iter()
                .map(|r| ResourceJson {
                    algorithm: &algorithm,
                    digest: hex::encode(&r.digest),
                    name: r.key.name(),
                })
                .collect(),
        },
    };
    let pretty = serde_json::to_string_pretty(&statement).expect("plain values serialize");
    ascii_escaped(&pretty).into_bytes()
}

/// Python's `json.dumps(ensure_ascii=True)`: every non-ASCII character as `\uXXXX` (two for
/// one beyond the BMP). In JSON text they only occur inside strings, so this is safe.
fn ascii_escaped(text: &str) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                let _ = write!(out, "\\u{unit:04x}");
            }
        }
    }
    out
}

#[derive(Serialize)]
struct BundleJson<'a> {
    #[serde(rename = "mediaType")]
    media_type: &'a str,
    #[serde(rename = "verificationMaterial")]
    material: MaterialJson,
    #[serde(rename = "dsseEnvelope")]
    envelope: EnvelopeJson<'a>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum MaterialJson {
    Key {
        #[serde(rename = "publicKey")]
        public_key: HintJson,
        #[serde(rename = "tlogEntries")]
        tlog_entries: [(); 0],
    },
    Chain {
        #[serde(rename = "x509CertificateChain")]
        chain: ChainJson,
        #[serde(rename = "tlogEntries")]
        tlog_entries: [(); 0],
    },
}

#[derive(Serialize)]
struct HintJson {
    hint: String,
}

#[derive(Serialize)]
struct ChainJson {
    certificates: Vec<RawBytes>,
}

#[derive(Serialize)]
struct RawBytes {
    #[serde(rename = "rawBytes")]
    raw_bytes: String,
}

#[derive(Serialize)]
struct EnvelopeJson<'a> {
    payload: String,
    #[serde(rename = "payloadType")]
    payload_type: &'a str,
    signatures: [SignatureJson; 1],
}

#[derive(Serialize)]
struct SignatureJson {
    sig: String,
    keyid: &'static str,
}

/// The bundle's bytes: `payload` signed with `signature` (DER) by `material`.
pub(crate) fn bundle_json(payload: &[u8], signature: &[u8], material: &SignerMaterial) -> Vec<u8> {
    let material = match material {
        SignerMaterial::KeyHint(hint) => MaterialJson::Key {
            public_key: HintJson { hint: hint.clone() },
            tlog_entries: [],
        },
        SignerMaterial::Chain(certs) => MaterialJson::Chain {
            chain: ChainJson {
                certificates: certs
                    .iter()
                    .map(|c| RawBytes {
                        raw_bytes: STANDARD.encode(c),
                    })
                    .collect(),
            },
            tlog_entries: [],
        },
    };
    let bundle = BundleJson {
        media_type: MEDIA_TYPES[0],
        material,
        envelope: EnvelopeJson {
            payload: STANDARD.encode(payload),
            payload_type: IN_TOTO_PAYLOAD_TYPE,
            signatures: [SignatureJson {
                sig: STANDARD.encode(signature),
                keyid: "",
            }],
        },
    };
    serde_json::to_vec(&bundle).expect("plain values serialize")
}
