//! The three ways an OMS signature names its signer, and how each is trusted: a public key
//! (the bundle holds its hint), a certificate chain to a CA the verifier names, or Sigstore
//! keyless (a Fulcio certificate for an OIDC identity, logged in Rekor), checked offline
//! against a trusted root.

use std::path::Path;

use super::error::{Result, SigningError, io};
use super::keys::{Hash, PublicKey, pae, pae_compat};
use super::rekor::{LogProof, verify_entry};
use super::trust_root::{TrustedRoot, within};
use super::x509::{Cert, verify_chain};
use crate::formats::oms::{Bundle, Material};

/// What the verifier trusts.
#[derive(Debug, Clone)]
pub(crate) enum Trust {
    /// `--public-key`.
    Key(PublicKey),
    /// `--certificate-chain`: every certificate given is trusted as an anchor.
    Certificates(Vec<Cert>),
    /// `--identity` and `--identity-provider`, against a trusted root.
    Keyless {
        root: Box<TrustedRoot>,
        identity: String,
        issuer: String,
    },
}

impl Trust {
    pub(crate) fn public_key(path: &Path) -> Result<Trust> {
        let text = read_small(path)?;
        PublicKey::from_pem(&text)
            .map(Trust::Key)
            .map_err(|message| material(path, "public key", message))
    }

    pub(crate) fn certificates(paths: &[impl AsRef<Path>]) -> Result<Trust> {
        let mut anchors = Vec::new();
        for path in paths {
            let path = path.as_ref();
            let certs = Cert::from_pem_chain(&read_small(path)?)
                .map_err(|m| material(path, "certificate file", m))?;
            anchors.extend(certs);
        }
        Ok(Trust::Certificates(anchors))
    }

    /// Keyless trust: `root` a `trusted_root.json` or a `ClientTrustConfig`, else the
    /// embedded public-good root.
    pub(crate) fn keyless(identity: String, issuer: String, root: Option<&Path>) -> Result<Trust> {
        let root = match root {
            None => TrustedRoot::public_good(),
            Some(path) => TrustedRoot::parse(
                &read_small(path)?,
                &crate::escape::shown_path(path).to_string(),
            )
            .map_err(|m| material(path, "Sigstore trusted root", m))?,
        };
        Ok(Trust::Keyless {
            root: Box::new(root),
            identity,
            issuer,
        })
    }
}

fn read_small(path: &Path) -> Result<Vec<u8>> {
    crate::fsutil::read_regular(path, 16 << 20, false).map_err(io(path))
}

fn material(path: &Path, what: &'static str, message: String) -> SigningError {
    SigningError::Material {
        path: path.to_owned(),
        what,
        message,
    }
}

/// Who signed, once verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Signer {
    /// A key: its hint and kind.
    Key { hint: String, algorithm: String },
    /// A certificate: its subject, issuer and fingerprint, and the trusted certificate its
    /// chain reached.
    Certificate {
        subject: String,
        issuer: String,
        fingerprint: String,
        anchor: String,
    },
    /// Keyless: the certificate's identities (SAN) and OIDC issuer, and the log's word.
    Keyless {
        identities: Vec<String>,
        issuer: String,
        log: LogProof,
    },
}

impl Signer {
    /// One line: "key 04b79e1d… (ECDSA P-256)", "certificate CN=…", "stefan@… (issuer …)".
    pub(crate) fn describe(&self) -> String {
        match self {
            Signer::Key { hint, algorithm } => format!("key {hint} ({algorithm})"),
            Signer::Certificate {
                subject, issuer, ..
            } => format!("certificate {subject}, issued by {issuer}"),
            Signer::Keyless {
                identities,
                issuer,
                log,
            } => format!(
                "{} via {issuer}, logged at {} in {} (entry {}{})",
                identities.join(", "),
                super::x509::rfc3339(log.integrated_time),
                log.log,
                log.log_index,
                if log.inclusion_proof {
                    ", inclusion proof checked"
                } else {
                    ""
                }
            ),
        }
    }
}

/// Who the bundle says signed it, unverified (for a refusal's message and `inspect`).
pub(crate) fn claimed_signer(bundle: &Bundle) -> String {
    match &bundle.material {
        Material::PublicKey {
            hint: Some(hint), ..
        } => format!("key {hint}"),
        Material::PublicKey { raw: Some(raw), .. } => PublicKey::from_pem(raw).map_or_else(
            |_| "a key (its PEM unreadable)".to_owned(),
            |k| format!("key {} ({})", k.hint(), k.describe()),
        ),
        Material::PublicKey { .. } => "a key (no hint)".to_owned(),
        Material::Chain(certs) => describe_cert(certs.first().map(Vec::as_slice)),
        Material::Certificate(cert) => describe_cert(Some(cert)),
    }
}

fn describe_cert(der: Option<&[u8]>) -> String {
    let Some(cert) = der.and_then(|d| Cert::from_der(d).ok()) else {
        return "an unreadable certificate".to_owned();
    };
    let identities = cert.san_values();
    match cert.oidc_issuer() {
        Some(issuer) => format!("{} via {issuer}", identities.join(", ")),
        None => format!(
            "certificate {}, issued by {}",
            cert.subject(),
            cert.issuer_name()
        ),
    }
}

/// Whether `signature` is `key`'s over the payload: DSSE's encoding with the curve's `hash`, or
/// model_signing 0.2's own encoding, which 0.2 signed with SHA-256 whatever the curve (its key
/// signer hard-codes `ECDSA(SHA256())`, so a P-384 key's 0.2 bundle is SHA-256 over P-384).
fn signs_payload(key: &PublicKey, payload: &[u8], signature: &[u8], hash: Hash) -> bool {
    key.verify(&pae(payload), signature, hash)
        || key.verify(&pae_compat(payload), signature, Hash::Sha256)
}

/// Checks the bundle's signature against `trust` at `now` (seconds since 1970; the certificate
/// way's chain must be valid now, the keyless one's at the log's integrated time). Err is
/// the reason it is not verified.
pub(crate) fn check(trust: &Trust, bundle: &Bundle, now: u64) -> Result<Signer, String> {
    let payload = &bundle.envelope.payload;
    let signature = &bundle.envelope.signature;
    match trust {
        Trust::Key(key) => {
            if let Material::PublicKey {
                hint: Some(hint), ..
            } = &bundle.material
                && *hint != key.hint()
            {
                return Err(format!(
                    "signed by another key (hint {hint}; the given key's is {})",
                    key.hint()
                ));
            }
            let hash = key
                .curve_hash()
                .ok_or("an RSA key; model signatures use ECDSA")?;
            if !signs_payload(key, payload, signature, hash) {
                return Err(format!(
                    "the signature is not the given key's ({}, hint {})",
                    key.describe(),
                    key.hint()
                ));
            }
            Ok(Signer::Key {
                hint: key.hint(),
                algorithm: key.describe(),
            })
        }
        Trust::Certificates(anchors) => {
            let certs = match &bundle.material {
                Material::Chain(certs) => certs.clone(),
                Material::Certificate(cert) => vec![cert.clone()],
                Material::PublicKey { .. } => {
                    return Err("signed with a key, not a certificate".to_owned());
                }
            };
            let certs = certs
                .iter()
                .map(|c| Cert::from_der(c))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("the bundle's certificate: {e}"))?;
            let (leaf, rest) = certs.split_first().expect("a chain is never empty");
            let anchor = verify_chain(leaf, rest, anchors, now).map_err(|e| e.to_string())?;
            if !leaf.may_sign() {
                return Err(format!(
                    "certificate {} may not sign (no digitalSignature or codeSigning usage)",
                    leaf.subject()
                ));
            }
            let key = leaf.public_key()?;
            let hash = key
                .curve_hash()
                .ok_or("an RSA signing key; model signatures use ECDSA")?;
            if !signs_payload(&key, payload, signature, hash) {
                return Err(format!(
                    "the signature is not the key of certificate {}",
                    leaf.subject()
                ));
            }
            Ok(Signer::Certificate {
                subject: leaf.subject(),
                issuer: leaf.issuer_name(),
                fingerprint: leaf.fingerprint(),
                anchor: anchor.subject(),
            })
        }
        Trust::Keyless {
            root,
            identity,
            issuer,
        } => keyless(bundle, root, identity, issuer),
    }
}

fn keyless(
    bundle: &Bundle,
    root: &TrustedRoot,
    identity: &str,
    issuer: &str,
) -> Result<Signer, String> {
    let (leaf, rest) = match &bundle.material {
        Material::Certificate(cert) => (cert.clone(), Vec::new()),
        Material::Chain(certs) => (certs[0].clone(), certs[1..].to_vec()),
        Material::PublicKey { .. } => {
            return Err(
                "signed with a key, not with Sigstore keyless signing (give --public-key)"
                    .to_owned(),
            );
        }
    };
    let leaf = Cert::from_der(&leaf).map_err(|e| format!("the bundle's certificate: {e}"))?;
    let [entry] = bundle.tlog_entries.as_slice() else {
        return Err(format!(
            "{} transparency-log entries; keyless signatures carry exactly one",
            bundle.tlog_entries.len()
        ));
    };
    let log = verify_entry(entry, root, &bundle.envelope, &leaf)?;
    let at = log.integrated_time;
    let (not_before, not_after) = leaf.validity();
    if at < not_before || at > not_after {
        return Err(format!(
            "logged at {}, outside the certificate's validity ({} to {})",
            super::x509::rfc3339(at),
            super::x509::rfc3339(not_before),
            super::x509::rfc3339(not_after)
        ));
    }
    let mut last_error = format!(
        "no certificate authority in {} was valid at {}",
        root.source,
        super::x509::rfc3339(at)
    );
    let mut chained = false;
    for ca in root
        .authorities
        .iter()
        .filter(|ca| within(at, ca.valid_from, ca.valid_until))
    {
        let Some((anchor, intermediates)) = ca.chain.split_last() else {
            continue;
        };
        let mut pool: Vec<Cert> = intermediates.to_vec();
        for c in &rest {
            pool.push(Cert::from_der(c).map_err(|e| format!("the bundle's chain: {e}"))?);
        }
        match verify_chain(&leaf, &pool, std::slice::from_ref(anchor), at) {
            Ok(_) => {
                chained = true;
                break;
            }
            Err(e) => last_error = format!("certificate authority {}: {e}", ca.uri),
        }
    }
    if !chained {
        return Err(last_error);
    }
    if !leaf.fulcio_usage() {
        return Err("the certificate lacks the digitalSignature and codeSigning usages of a Fulcio certificate".to_owned());
    }
    let identities = leaf.san_values();
    if !identities.iter().any(|i| i == identity) {
        return Err(format!(
            "signed by {}, not {identity}",
            identities.join(", ")
        ));
    }
    let found_issuer = leaf.oidc_issuer().unwrap_or_default();
    if found_issuer != issuer {
        return Err(format!(
            "identity issued by {found_issuer:?}, not {issuer:?}"
        ));
    }
    let key = leaf.public_key()?;
    let hash = key.curve_hash().ok_or("an RSA signing key")?;
    if !key.verify(
        &pae(&bundle.envelope.payload),
        &bundle.envelope.signature,
        hash,
    ) {
        return Err("the signature is not the certificate's key's".to_owned());
    }
    Ok(Signer::Keyless {
        identities,
        issuer: found_issuer,
        log,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::oms::Envelope;

    fn key_bundle(payload: &[u8], signature: Vec<u8>) -> Bundle {
        Bundle {
            media_type: "application/vnd.dev.sigstore.bundle.v0.3+json".to_owned(),
            material: Material::PublicKey {
                hint: None,
                raw: None,
                details: None,
            },
            tlog_entries: Vec::new(),
            rfc3161_timestamps: Vec::new(),
            envelope: Envelope {
                payload: payload.to_vec(),
                payload_type: crate::formats::oms::IN_TOTO_PAYLOAD_TYPE.to_owned(),
                signature,
            },
        }
    }

    /// model_signing 0.2.0 with a P-384 key: SHA-256 over its own encoding verifies; the
    /// same SHA-256 signature over DSSE's encoding does not (there the curve's hash rules).
    #[test]
    fn a_p384_key_verifies_model_signing_0_2s_sha256_signature() {
        use ecdsa::signature::hazmat::PrehashSigner;
        use sha2::Digest as _;
        let secret = p384::ecdsa::SigningKey::from_slice(&[9u8; 48]).unwrap();
        let trust = Trust::Key(PublicKey::P384(*secret.verifying_key()));
        let payload = br#"{"_type": "https://in-toto.io/Statement/v1"}"#;
        let sha256_sig = |message: &[u8]| {
            let prehash = sha2::Sha256::digest(message);
            let sig: p384::ecdsa::Signature = secret.sign_prehash(&prehash).unwrap();
            sig.to_der().to_bytes().into_vec()
        };
        let compat = key_bundle(payload, sha256_sig(&pae_compat(payload)));
        assert!(check(&trust, &compat, 0).is_ok());
        let dsse = key_bundle(payload, sha256_sig(&pae(payload)));
        assert!(check(&trust, &dsse, 0).is_err());
        let mut tampered = compat.clone();
        tampered.envelope.payload.push(b' ');
        assert!(check(&trust, &tampered, 0).is_err());
    }
}
