//! Sigstore's trusted root (`trusted_root.json`, protobuf-specs' `TrustedRoot`), or a
//! model_signing / sigstore `ClientTrustConfig` that holds one: the Fulcio CAs and the Rekor
//! logs a keyless signature is checked against, each with its validity period. Without one
//! given, the public-good root embedded in the binary (from the sigstore Python package) is
//! used.

use serde_json::Value;

use super::keys::PublicKey;
use super::x509::{Cert, parse_rfc3339};

/// The public-good trusted root shipped with sigstore 4.5.1 (Python), unchanged; its newest
/// key (a timestamp authority's) is valid from 2025-07-04.
const PUBLIC_GOOD: &str = include_str!("data/trusted_root.json");
/// What the embedded root is, for reports.
const PUBLIC_GOOD_SOURCE: &str = "the embedded Sigstore public-good trusted root (sigstore 4.5.1, keys valid from 2025-07-04 and earlier)";

/// A transparency log (Rekor) the root trusts.
#[derive(Debug, Clone)]
pub(crate) struct Tlog {
    pub base_url: String,
    /// `logId.keyId`: SHA-256 of the key's DER.
    pub key_id: Vec<u8>,
    /// The key, or why it cannot be used here (an Ed25519 key of a Rekor v2 log).
    pub key: Result<PublicKey, String>,
    pub valid_from: Option<u64>,
    pub valid_until: Option<u64>,
}

/// A certificate authority (Fulcio) the root trusts: its chain, the root last.
#[derive(Debug, Clone)]
pub(crate) struct CertAuthority {
    pub uri: String,
    pub chain: Vec<Cert>,
    pub valid_from: Option<u64>,
    pub valid_until: Option<u64>,
}

/// The keys and certificates keyless verification trusts.
#[derive(Debug, Clone)]
pub(crate) struct TrustedRoot {
    /// Where it came from, for reports.
    pub source: String,
    pub tlogs: Vec<Tlog>,
    pub authorities: Vec<CertAuthority>,
}

impl TrustedRoot {
    pub(crate) fn public_good() -> TrustedRoot {
        TrustedRoot::parse(PUBLIC_GOOD.as_bytes(), PUBLIC_GOOD_SOURCE)
            .expect("the embedded root parses")
    }

    /// Reads a `trusted_root.json`, or a `ClientTrustConfig` (its `trustedRoot`).
    pub(crate) fn parse(bytes: &[u8], source: &str) -> Result<TrustedRoot, String> {
        let value: Value = serde_json::from_slice(bytes).map_err(|e| format!("not JSON ({e})"))?;
        let root = match value.get("trustedRoot") {
            Some(inner) => inner,
            None => &value,
        };
        let media = root.get("mediaType").and_then(Value::as_str).unwrap_or("");
        if !media.starts_with("application/vnd.dev.sigstore.trustedroot") {
            return Err(format!(
                "mediaType {media:?}: not a Sigstore trusted root (application/vnd.dev.sigstore.trustedroot+json) \
                 or a ClientTrustConfig holding one"
            ));
        }
        let tlogs = list(root, "tlogs")?
            .iter()
            .enumerate()
            .map(|(i, t)| tlog(t).map_err(|e| format!("tlogs[{i}]: {e}")))
            .collect::<Result<_, _>>()?;
        let authorities = list(root, "certificateAuthorities")?
            .iter()
            .enumerate()
            .map(|(i, c)| authority(c).map_err(|e| format!("certificateAuthorities[{i}]: {e}")))
            .collect::<Result<_, _>>()?;
        Ok(TrustedRoot {
            source: source.to_owned(),
            tlogs,
            authorities,
        })
    }
}

fn list<'a>(root: &'a Value, key: &str) -> Result<&'a [Value], String> {
    match root.get(key) {
        None | Some(Value::Null) => Ok(&[]),
        Some(Value::Array(a)) => Ok(a),
        Some(_) => Err(format!("{key}: expected an array")),
    }
}

fn b64(value: Option<&Value>, key: &str) -> Result<Vec<u8>, String> {
    use base64::Engine;
    let text = value
        .and_then(Value::as_str)
        .ok_or_else(|| format!("{key}: expected a base64 string"))?;
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|e| format!("{key}: not base64 ({e})"))
}

fn period(v: &Value, key: &str) -> Result<(Option<u64>, Option<u64>), String> {
    let Some(p) = v.get(key) else {
        return Ok((None, None));
    };
    let time = |k: &str| -> Result<Option<u64>, String> {
        match p.get(k).and_then(Value::as_str) {
            None => Ok(None),
            Some(t) => parse_rfc3339(t)
                .map(Some)
                .ok_or_else(|| format!("{key}.{k}: {t:?} is not an RFC 3339 time")),
        }
    };
    Ok((time("start")?, time("end")?))
}

fn tlog(t: &Value) -> Result<Tlog, String> {
    let key = t.get("publicKey").ok_or("publicKey: missing")?;
    let der = b64(key.get("rawBytes"), "publicKey.rawBytes")?;
    let details = key.get("keyDetails").and_then(Value::as_str).unwrap_or("");
    let parsed = if details.contains("ED25519") {
        Err(format!(
            "its key is {details}, which this tool does not verify (Rekor v2 logs; their entries need RFC 3161 timestamps)"
        ))
    } else {
        PublicKey::from_spki_der(&der)
    };
    let (valid_from, valid_until) = period(key, "validFor")?;
    Ok(Tlog {
        base_url: t
            .get("baseUrl")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned(),
        key_id: b64(t.get("logId").and_then(|l| l.get("keyId")), "logId.keyId")?,
        key: parsed,
        valid_from,
        valid_until,
    })
}

fn authority(c: &Value) -> Result<CertAuthority, String> {
    let certs = c
        .get("certChain")
        .and_then(|ch| ch.get("certificates"))
        .and_then(Value::as_array)
        .ok_or("certChain.certificates: expected an array")?;
    let chain = certs
        .iter()
        .enumerate()
        .map(|(i, cert)| {
            let key = format!("certChain.certificates[{i}].rawBytes");
            Cert::from_der(&b64(cert.get("rawBytes"), &key)?).map_err(|e| format!("{key}: {e}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let (valid_from, valid_until) = period(c, "validFor")?;
    Ok(CertAuthority {
        uri: c
            .get("uri")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned(),
        chain,
        valid_from,
        valid_until,
    })
}

/// Whether `at` is inside `[from, until]` (an open end is unbounded).
pub(crate) fn within(at: u64, from: Option<u64>, until: Option<u64>) -> bool {
    from.is_none_or(|f| at >= f) && until.is_none_or(|u| at <= u)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_root_has_the_public_good_instance() {
        let root = TrustedRoot::public_good();
        assert_eq!(root.authorities.len(), 2);
        assert!(
            root.authorities
                .iter()
                .all(|a| a.uri == "https://fulcio.sigstore.dev")
        );
        assert!(
            root.tlogs
                .iter()
                .any(|t| t.base_url == "https://rekor.sigstore.dev" && t.key.is_ok())
        );
    }
}
