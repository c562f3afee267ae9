//! The Sigstore bundle around an OMS signature (`application/vnd.dev.sigstore.bundle.v0.3+json`,
//! protobuf-specs' JSON form): its verification material, transparency-log entries and DSSE
//! envelope, read into plain values with every base64 field decoded. Nothing here checks a
//! signature; that is the signing adapter's work.

use base64::Engine;
use serde_json::{Map, Value};

use super::error::OmsError;

type Result<T, E = OmsError> = std::result::Result<T, E>;

/// The bundle media types this reader accepts: what model_signing writes (v0.3) and what
/// older Sigstore clients wrote.
pub(crate) const MEDIA_TYPES: [&str; 3] = [
    "application/vnd.dev.sigstore.bundle.v0.3+json",
    "application/vnd.dev.sigstore.bundle+json;version=0.2",
    "application/vnd.dev.sigstore.bundle+json;version=0.1",
];

/// The DSSE payload type of an in-toto statement.
pub(crate) const IN_TOTO_PAYLOAD_TYPE: &str = "application/vnd.in-toto+json";

/// A parsed bundle: who signed (the material), the log's word on it, and the envelope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bundle {
    /// `mediaType`, one of [`MEDIA_TYPES`].
    pub media_type: String,
    /// What identifies the signer.
    pub material: Material,
    /// `verificationMaterial.tlogEntries` (keyless signing has one; key and certificate none).
    pub tlog_entries: Vec<TlogEntry>,
    /// `timestampVerificationData.rfc3161Timestamps`, DER each (shown, not verified).
    pub rfc3161_timestamps: Vec<Vec<u8>>,
    /// `dsseEnvelope`.
    pub envelope: Envelope,
}

/// `verificationMaterial`: how the signer is named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Material {
    /// A key: its hint (SHA-256 hex of the public key's PEM, model_signing 1.x), or, in bundles
    /// of model_signing 0.3 and 1.0, the PEM itself (`rawBytes`) and `keyDetails`.
    PublicKey {
        /// `publicKey.hint`, when present and not empty.
        hint: Option<String>,
        /// `publicKey.rawBytes`, decoded (a PEM public key), when present.
        raw: Option<Vec<u8>>,
        /// `publicKey.keyDetails` ("PKIX_ECDSA_P384_SHA_384"), when present.
        details: Option<String>,
    },
    /// `x509CertificateChain.certificates`: DER, the signing certificate first.
    Chain(Vec<Vec<u8>>),
    /// `certificate`: the one signing certificate (DER) of keyless signing.
    Certificate(Vec<u8>),
}

/// The DSSE envelope: its payload (the statement's JSON bytes) and its one signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    /// `payload`, decoded.
    pub payload: Vec<u8>,
    /// `payloadType`.
    pub payload_type: String,
    /// `signatures[0].sig`, decoded (an ASN.1 DER ECDSA signature).
    pub signature: Vec<u8>,
}

/// One transparency-log entry (Rekor's `TransparencyLogEntry`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlogEntry {
    /// `logIndex`: the entry's index in the whole log.
    pub log_index: u64,
    /// `logId.keyId`: SHA-256 of the log's public key (DER).
    pub log_id: Vec<u8>,
    /// `kindVersion.kind` ("dsse", "hashedrekord").
    pub kind: String,
    /// `kindVersion.version` ("0.0.1").
    pub version: String,
    /// `integratedTime`, seconds since the epoch, when present.
    pub integrated_time: Option<i64>,
    /// `inclusionPromise.signedEntryTimestamp`, decoded, when present.
    pub signed_entry_timestamp: Option<Vec<u8>>,
    /// `inclusionProof`, when present.
    pub inclusion_proof: Option<InclusionProof>,
    /// `canonicalizedBody`, decoded (the entry's JSON as the log holds it).
    pub body: Vec<u8>,
}

/// A Merkle inclusion proof with the log's signed checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InclusionProof {
    /// `logIndex` in the log's current shard (tree).
    pub log_index: u64,
    /// `rootHash`, decoded.
    pub root_hash: Vec<u8>,
    /// `treeSize`.
    pub tree_size: u64,
    /// `hashes`, decoded, from the leaf upwards.
    pub hashes: Vec<Vec<u8>>,
    /// `checkpoint.envelope`: the signed note, as text.
    pub checkpoint: Option<String>,
}

/// Reads a bundle from its JSON text (already bounded by the caller's size limit).
pub(crate) fn parse(bytes: &[u8]) -> Result<Bundle> {
    let value: Value = serde_json::from_slice(bytes).map_err(|e| OmsError::NotJson {
        message: e.to_string(),
    })?;
    let root = object(&value, "(the bundle)")?;
    let media_type = string(root, "mediaType", "mediaType")?.to_owned();
    if !MEDIA_TYPES.contains(&media_type.as_str()) {
        return Err(OmsError::MediaType { found: media_type });
    }
    if root.get("dsseEnvelope").is_none() && root.get("messageSignature").is_some() {
        return Err(OmsError::NotDsse);
    }
    let material_value = object(
        required(root, "verificationMaterial")?,
        "verificationMaterial",
    )?;
    let material = material(material_value)?;
    let tlog_entries = match material_value.get("tlogEntries") {
        None | Some(Value::Null) => Vec::new(),
        Some(v) => array(v, "verificationMaterial.tlogEntries")?
            .iter()
            .enumerate()
            .map(|(i, e)| tlog_entry(e, &format!("verificationMaterial.tlogEntries[{i}]")))
            .collect::<Result<_>>()?,
    };
    let rfc3161_timestamps = timestamps(material_value)?;
    let envelope = envelope(object(required(root, "dsseEnvelope")?, "dsseEnvelope")?)?;
    Ok(Bundle {
        media_type,
        material,
        tlog_entries,
        rfc3161_timestamps,
        envelope,
    })
}

fn material(m: &Map<String, Value>) -> Result<Material> {
    let present: Vec<&str> = ["publicKey", "x509CertificateChain", "certificate"]
        .into_iter()
        .filter(|k| m.get(*k).is_some_and(|v| !v.is_null()))
        .collect();
    if present.len() != 1 {
        let found = if present.is_empty() {
            "none".to_owned()
        } else {
            present.join(" and ")
        };
        return Err(OmsError::Material { found });
    }
    match present[0] {
        "publicKey" => {
            let key = object(&m["publicKey"], "verificationMaterial.publicKey")?;
            let hint = optional_string(key, "hint", "verificationMaterial.publicKey.hint")?
                .filter(|h| !h.is_empty())
                .map(str::to_owned);
            let raw = optional_string(key, "rawBytes", "verificationMaterial.publicKey.rawBytes")?
                .map(|s| base64_field(s, "verificationMaterial.publicKey.rawBytes"))
                .transpose()?;
            let details = optional_string(
                key,
                "keyDetails",
                "verificationMaterial.publicKey.keyDetails",
            )?
            .map(str::to_owned);
            Ok(Material::PublicKey { hint, raw, details })
        }
        "x509CertificateChain" => {
            let key = "verificationMaterial.x509CertificateChain.certificates";
            let chain = object(
                &m["x509CertificateChain"],
                "verificationMaterial.x509CertificateChain",
            )?;
            let certs = array(required_at(chain, "certificates", key)?, key)?;
            if certs.is_empty() {
                return Err(field(key, "at least the signing certificate"));
            }
            let certs = certs
                .iter()
                .enumerate()
                .map(|(i, c)| raw_bytes(c, &format!("{key}[{i}]")))
                .collect::<Result<_>>()?;
            Ok(Material::Chain(certs))
        }
        _ => Ok(Material::Certificate(raw_bytes(
            &m["certificate"],
            "verificationMaterial.certificate",
        )?)),
    }
}

fn raw_bytes(v: &Value, key: &str) -> Result<Vec<u8>> {
    let o = object(v, key)?;
    let text = string(o, "rawBytes", &format!("{key}.rawBytes"))?;
    base64_field(text, &format!("{key}.rawBytes"))
}

fn timestamps(m: &Map<String, Value>) -> Result<Vec<Vec<u8>>> {
    let key = "verificationMaterial.timestampVerificationData";
    let Some(data) = m.get("timestampVerificationData").filter(|v| !v.is_null()) else {
        return Ok(Vec::new());
    };
    let data = object(data, key)?;
    let Some(list) = data.get("rfc3161Timestamps").filter(|v| !v.is_null()) else {
        return Ok(Vec::new());
    };
    let list_key = format!("{key}.rfc3161Timestamps");
    array(list, &list_key)?
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let k = format!("{list_key}[{i}]");
            let o = object(t, &k)?;
            base64_field(
                string(o, "signedTimestamp", &format!("{k}.signedTimestamp"))?,
                &k,
            )
        })
        .collect()
}

fn envelope(e: &Map<String, Value>) -> Result<Envelope> {
    let payload_type = string(e, "payloadType", "dsseEnvelope.payloadType")?.to_owned();
    if payload_type != IN_TOTO_PAYLOAD_TYPE {
        return Err(OmsError::PayloadType {
            found: payload_type,
        });
    }
    let payload = base64_field(
        string(e, "payload", "dsseEnvelope.payload")?,
        "dsseEnvelope.payload",
    )?;
    let signatures = array(
        required_at(e, "signatures", "dsseEnvelope.signatures")?,
        "dsseEnvelope.signatures",
    )?;
    if signatures.len() != 1 {
        return Err(OmsError::SignatureCount {
            count: signatures.len(),
        });
    }
    let sig = object(&signatures[0], "dsseEnvelope.signatures[0]")?;
    let signature = base64_field(
        string(sig, "sig", "dsseEnvelope.signatures[0].sig")?,
        "dsseEnvelope.signatures[0].sig",
    )?;
    Ok(Envelope {
        payload,
        payload_type,
        signature,
    })
}

fn tlog_entry(v: &Value, key: &str) -> Result<TlogEntry> {
    let e = object(v, key)?;
    let at = |k: &str| format!("{key}.{k}");
    let log_id = object(required_at(e, "logId", &at("logId"))?, &at("logId"))?;
    let kind_version = object(
        required_at(e, "kindVersion", &at("kindVersion"))?,
        &at("kindVersion"),
    )?;
    let signed_entry_timestamp = match e.get("inclusionPromise").filter(|v| !v.is_null()) {
        None => None,
        Some(p) => {
            let k = at("inclusionPromise.signedEntryTimestamp");
            let p = object(p, &at("inclusionPromise"))?;
            Some(base64_field(string(p, "signedEntryTimestamp", &k)?, &k)?)
        }
    };
    let inclusion_proof = match e.get("inclusionProof").filter(|v| !v.is_null()) {
        None => None,
        Some(p) => Some(inclusion_proof(
            object(p, &at("inclusionProof"))?,
            &at("inclusionProof"),
        )?),
    };
    Ok(TlogEntry {
        log_index: integer(
            required_at(e, "logIndex", &at("logIndex"))?,
            &at("logIndex"),
        )?,
        log_id: base64_field(
            string(log_id, "keyId", &at("logId.keyId"))?,
            &at("logId.keyId"),
        )?,
        kind: string(kind_version, "kind", &at("kindVersion.kind"))?.to_owned(),
        version: string(kind_version, "version", &at("kindVersion.version"))?.to_owned(),
        integrated_time: match e.get("integratedTime").filter(|v| !v.is_null()) {
            None => None,
            Some(t) => Some(
                i64::try_from(integer(t, &at("integratedTime"))?)
                    .map_err(|_| field(&at("integratedTime"), "seconds since 1970"))?,
            ),
        },
        signed_entry_timestamp,
        inclusion_proof,
        body: base64_field(
            string(e, "canonicalizedBody", &at("canonicalizedBody"))?,
            &at("canonicalizedBody"),
        )?,
    })
}

fn inclusion_proof(p: &Map<String, Value>, key: &str) -> Result<InclusionProof> {
    let at = |k: &str| format!("{key}.{k}");
    let hashes = array(required_at(p, "hashes", &at("hashes"))?, &at("hashes"))?
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let k = format!("{key}.hashes[{i}]");
            base64_field(h.as_str().ok_or_else(|| field(&k, "a base64 string"))?, &k)
        })
        .collect::<Result<_>>()?;
    let checkpoint = match p.get("checkpoint").filter(|v| !v.is_null()) {
        None => None,
        Some(c) => {
            let c = object(c, &at("checkpoint"))?;
            Some(string(c, "envelope", &at("checkpoint.envelope"))?.to_owned())
        }
    };
    Ok(InclusionProof {
        log_index: integer(
            required_at(p, "logIndex", &at("logIndex"))?,
            &at("logIndex"),
        )?,
        root_hash: base64_field(string(p, "rootHash", &at("rootHash"))?, &at("rootHash"))?,
        tree_size: integer(
            required_at(p, "treeSize", &at("treeSize"))?,
            &at("treeSize"),
        )?,
        hashes,
        checkpoint,
    })
}

// The JSON accessors, each naming the key it was asked for.

pub(super) fn field(key: &str, expected: &str) -> OmsError {
    OmsError::Field {
        key: key.to_owned(),
        expected: expected.to_owned(),
    }
}

pub(super) fn object<'a>(v: &'a Value, key: &str) -> Result<&'a Map<String, Value>> {
    v.as_object().ok_or_else(|| field(key, "an object"))
}

pub(super) fn array<'a>(v: &'a Value, key: &str) -> Result<&'a Vec<Value>> {
    v.as_array().ok_or_else(|| field(key, "an array"))
}

fn required<'a>(o: &'a Map<String, Value>, name: &str) -> Result<&'a Value> {
    required_at(o, name, name)
}

pub(super) fn required_at<'a>(
    o: &'a Map<String, Value>,
    name: &str,
    key: &str,
) -> Result<&'a Value> {
    o.get(name)
        .filter(|v| !v.is_null())
        .ok_or_else(|| field(key, "present"))
}

pub(super) fn string<'a>(o: &'a Map<String, Value>, name: &str, key: &str) -> Result<&'a str> {
    required_at(o, name, key)?
        .as_str()
        .ok_or_else(|| field(key, "a string"))
}

fn optional_string<'a>(
    o: &'a Map<String, Value>,
    name: &str,
    key: &str,
) -> Result<Option<&'a str>> {
    match o.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_str().map(Some).ok_or_else(|| field(key, "a string")),
    }
}

/// protobuf's JSON writes 64-bit integers as strings; a number is read too.
fn integer(v: &Value, key: &str) -> Result<u64> {
    match v {
        Value::String(s) if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => s
            .parse()
            .map_err(|_| field(key, "a whole number below 2^64")),
        Value::Number(n) => n.as_u64().ok_or_else(|| field(key, "a whole number")),
        _ => Err(field(key, "a whole number (as a string or a number)")),
    }
}

/// Standard base64 with padding, as protobuf's JSON writes bytes (URL-safe accepted, as
/// protobuf's readers accept it).
pub(super) fn base64_field(text: &str, key: &str) -> Result<Vec<u8>> {
    use base64::engine::general_purpose::{STANDARD, URL_SAFE};
    STANDARD
        .decode(text)
        .or_else(|_| URL_SAFE.decode(text))
        .map_err(|e| OmsError::Base64 {
            key: key.to_owned(),
            message: e.to_string(),
        })
}
