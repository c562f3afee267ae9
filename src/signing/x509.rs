//! X.509 for the certificate and keyless ways: certificates read with x509-cert, a chain built
//! from the signing certificate up to a trusted certificate and checked at one moment (every
//! signature, validity period, CA constraints and key usages on the way), and what a
//! certificate says of its holder (subject, SAN, Fulcio's OIDC issuer extension).

use der::{Decode, Encode};
use x509_cert::Certificate;
use x509_cert::ext::pkix::name::GeneralName;
use x509_cert::ext::pkix::{BasicConstraints, ExtendedKeyUsage, KeyUsage, SubjectAltName};

use super::keys::{Hash, PublicKey, tbs_der};

/// id-kp-codeSigning.
const CODE_SIGNING: der::asn1::ObjectIdentifier =
    der::asn1::ObjectIdentifier::new_unwrap("1.3.6.1.5.5.7.3.3");
/// Fulcio's OIDC issuer (v2, a DER UTF8String) and its first form (raw text).
const FULCIO_ISSUER_V2: &str = "1.3.6.1.4.1.57264.1.8";
const FULCIO_ISSUER_V1: &str = "1.3.6.1.4.1.57264.1.1";
/// Critical extensions this checker handles; a certificate with any other critical one is
/// refused, as RFC 5280 asks.
const HANDLED_CRITICAL: [&str; 6] = [
    "2.5.29.19", // basicConstraints
    "2.5.29.15", // keyUsage
    "2.5.29.37", // extKeyUsage
    "2.5.29.17", // subjectAltName
    "2.5.29.32", // certificatePolicies
    "2.5.29.14", // subjectKeyIdentifier
];
/// The longest chain followed (leaf, intermediates, anchor).
const MAX_DEPTH: usize = 8;

/// A certificate with its DER.
#[derive(Debug, Clone)]
pub(crate) struct Cert {
    pub der: Vec<u8>,
    pub cert: Certificate,
}

impl Cert {
    pub(crate) fn from_der(der: &[u8]) -> Result<Cert, String> {
        let cert =
            Certificate::from_der(der).map_err(|e| format!("not a DER X.509 certificate ({e})"))?;
        Ok(Cert {
            der: der.to_owned(),
            cert,
        })
    }

    /// Every certificate of a PEM file's text (`CERTIFICATE` blocks), in order.
    pub(crate) fn from_pem_chain(text: &[u8]) -> Result<Vec<Cert>, String> {
        let certs =
            Certificate::load_pem_chain(text).map_err(|e| format!("not PEM certificates ({e})"))?;
        if certs.is_empty() {
            return Err("no PEM CERTIFICATE in it".to_owned());
        }
        Ok(certs
            .into_iter()
            .map(|cert| Cert {
                der: cert.to_der().expect("a parsed certificate encodes"),
                cert,
            })
            .collect())
    }

    pub(crate) fn public_key(&self) -> Result<PublicKey, String> {
        let spki = self
            .cert
            .tbs_certificate()
            .subject_public_key_info()
            .to_der()
            .map_err(|e| e.to_string())?;
        PublicKey::from_spki_der(&spki)
    }

    /// The subject as RFC 4514 text ("CN=root-ca"), or "(empty subject)".
    pub(crate) fn subject(&self) -> String {
        let s = self.cert.tbs_certificate().subject().to_string();
        if s.is_empty() {
            "(empty subject)".to_owned()
        } else {
            s
        }
    }

    pub(crate) fn issuer_name(&self) -> String {
        self.cert.tbs_certificate().issuer().to_string()
    }

    /// SHA-256 of the DER, hex: how `openssl x509 -fingerprint -sha256` names it.
    pub(crate) fn fingerprint(&self) -> String {
        crate::digest::sha256_hex(&self.der)
    }

    /// `[notBefore, notAfter]` in seconds since 1970.
    pub(crate) fn validity(&self) -> (u64, u64) {
        let v = self.cert.tbs_certificate().validity();
        (
            v.not_before.to_unix_duration().as_secs(),
            v.not_after.to_unix_duration().as_secs(),
        )
    }

    fn basic_constraints(&self) -> Option<BasicConstraints> {
        self.cert
            .tbs_certificate()
            .get_extension::<BasicConstraints>()
            .ok()
            .flatten()
            .map(|(_, bc)| bc)
    }

    fn key_usage(&self) -> Option<KeyUsage> {
        self.cert
            .tbs_certificate()
            .get_extension::<KeyUsage>()
            .ok()
            .flatten()
            .map(|(_, ku)| ku)
    }

    /// Whether the key may sign code: the digitalSignature key usage, or the codeSigning
    /// extended key usage (model_signing's rule for the certificate way).
    pub(crate) fn may_sign(&self) -> bool {
        self.key_usage().is_some_and(|k| k.digital_signature()) || self.code_signing()
    }

    /// Both digitalSignature and codeSigning (Sigstore's rule for a Fulcio certificate).
    pub(crate) fn fulcio_usage(&self) -> bool {
        self.key_usage().is_some_and(|k| k.digital_signature()) && self.code_signing()
    }

    fn code_signing(&self) -> bool {
        self.cert
            .tbs_certificate()
            .get_extension::<ExtendedKeyUsage>()
            .ok()
            .flatten()
            .is_some_and(|(_, eku)| eku.0.contains(&CODE_SIGNING))
    }

    /// The SAN's email addresses, URIs and DNS names.
    pub(crate) fn san_values(&self) -> Vec<String> {
        let Ok(Some((_, san))) = self
            .cert
            .tbs_certificate()
            .get_extension::<SubjectAltName>()
        else {
            return Vec::new();
        };
        san.0
            .iter()
            .filter_map(|name| match name {
                GeneralName::Rfc822Name(s)
                | GeneralName::DnsName(s)
                | GeneralName::UniformResourceIdentifier(s) => Some(s.to_string()),
                _ => None,
            })
            .collect()
    }

    /// Fulcio's OIDC issuer extension (its v2 form, else v1).
    pub(crate) fn oidc_issuer(&self) -> Option<String> {
        let extensions = self.cert.tbs_certificate().extensions()?;
        let find = |oid: &str| {
            extensions
                .iter()
                .find(|e| e.extn_id.to_string() == oid)
                .map(|e| e.extn_value.as_bytes().to_vec())
        };
        if let Some(value) = find(FULCIO_ISSUER_V2) {
            return der::asn1::Utf8StringRef::from_der(&value)
                .ok()
                .map(|s| s.as_str().to_owned());
        }
        find(FULCIO_ISSUER_V1).and_then(|v| String::from_utf8(v).ok())
    }

    fn unhandled_critical(&self) -> Option<String> {
        self.cert
            .tbs_certificate()
            .extensions()?
            .iter()
            .find(|e| e.critical && !HANDLED_CRITICAL.contains(&e.extn_id.to_string().as_str()))
            .map(|e| e.extn_id.to_string())
    }

    /// Whether `issuer`'s key made this certificate's signature.
    fn signed_by(&self, issuer: &PublicKey) -> Result<bool, String> {
        let oid = self.cert.signature_algorithm().oid.to_string();
        let hash = match oid.as_str() {
            "1.2.840.10045.4.3.2" | "1.2.840.113549.1.1.11" => Hash::Sha256,
            "1.2.840.10045.4.3.3" | "1.2.840.113549.1.1.12" => Hash::Sha384,
            "1.2.840.10045.4.3.4" | "1.2.840.113549.1.1.13" => Hash::Sha512,
            other => {
                return Err(format!(
                    "signature algorithm {other} is not supported (ECDSA or RSA PKCS #1 v1.5 with \
                     SHA-256, SHA-384 or SHA-512 are)"
                ));
            }
        };
        let is_ecdsa = oid.starts_with("1.2.840.10045.");
        if is_ecdsa == matches!(issuer, PublicKey::Rsa(_)) {
            return Ok(false);
        }
        let Some(signature) = self.cert.signature().as_bytes() else {
            return Ok(false);
        };
        Ok(issuer.verify(&tbs_der(&self.cert), signature, hash))
    }
}

/// Why a chain was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ChainError {
    /// No path from the certificate to a trusted one.
    NoPath { detail: String },
    /// A certificate on the only path was not valid at the time.
    Time {
        subject: String,
        at: u64,
        not_before: u64,
        not_after: u64,
    },
}

impl std::fmt::Display for ChainError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ChainError::NoPath { detail } => {
                write!(f, "no chain to a trusted certificate: {detail}")
            }
            ChainError::Time {
                subject,
                at,
                not_before,
                not_after,
            } => {
                let when = if at < not_before {
                    "not yet valid"
                } else {
                    "expired"
                };
                write!(
                    f,
                    "certificate {subject} was {when} at {} (valid {} to {})",
                    rfc3339(*at),
                    rfc3339(*not_before),
                    rfc3339(*not_after)
                )
            }
        }
    }
}

/// Checks that `leaf` chains, through `intermediates` (from the bundle), to one of `anchors`
/// (trusted), every certificate on the path valid at `at`; returns the path's anchor.
pub(crate) fn verify_chain<'a>(
    leaf: &Cert,
    intermediates: &[Cert],
    anchors: &'a [Cert],
    at: u64,
) -> Result<&'a Cert, ChainError> {
    check_time(leaf, at)?;
    if let Some(oid) = leaf.unhandled_critical() {
        return Err(ChainError::NoPath {
            detail: format!(
                "{} has an unhandled critical extension {oid}",
                leaf.subject()
            ),
        });
    }
    // A certificate the verifier names as trusted is trusted itself (a self-signed signer).
    if let Some(anchor) = anchors.iter().find(|a| a.der == leaf.der) {
        return Ok(anchor);
    }
    let mut reasons = Vec::new();
    match walk(
        leaf,
        intermediates,
        anchors,
        at,
        0,
        &mut Vec::new(),
        &mut reasons,
    ) {
        Some(anchor) => Ok(anchor),
        None => Err(reasons
            .iter()
            .find_map(|r| match r {
                Reason::Time(e) => Some(e.clone()),
                Reason::Other(_) => None,
            })
            .unwrap_or_else(|| ChainError::NoPath {
                detail: reasons
                    .iter()
                    .filter_map(|r| match r {
                        Reason::Other(s) => Some(s.as_str()),
                        Reason::Time(_) => None,
                    })
                    .next()
                    .unwrap_or("no issuer of it is trusted or in the bundle")
                    .to_owned(),
            })),
    }
}

enum Reason {
    Time(ChainError),
    Other(String),
}

fn walk<'a>(
    cert: &Cert,
    intermediates: &[Cert],
    anchors: &'a [Cert],
    at: u64,
    depth: usize,
    seen: &mut Vec<Vec<u8>>,
    reasons: &mut Vec<Reason>,
) -> Option<&'a Cert> {
    if depth >= MAX_DEPTH {
        reasons.push(Reason::Other(format!(
            "longer than {MAX_DEPTH} certificates"
        )));
        return None;
    }
    let issuer = cert.cert.tbs_certificate().issuer();
    for anchor in anchors {
        if anchor.cert.tbs_certificate().subject() != issuer || !issued(cert, anchor, reasons) {
            continue;
        }
        match check_issuer(anchor, at, depth) {
            Ok(()) => return Some(anchor),
            Err(r) => reasons.push(r),
        }
    }
    for candidate in intermediates {
        if candidate.der == cert.der
            || seen.contains(&candidate.der)
            || candidate.cert.tbs_certificate().subject() != issuer
            || !issued(cert, candidate, reasons)
        {
            continue;
        }
        if let Err(r) = check_issuer(candidate, at, depth) {
            reasons.push(r);
            continue;
        }
        seen.push(candidate.der.clone());
        if let Some(anchor) = walk(
            candidate,
            intermediates,
            anchors,
            at,
            depth + 1,
            seen,
            reasons,
        ) {
            return Some(anchor);
        }
        seen.pop();
    }
    reasons.push(Reason::Other(format!(
        "no trusted certificate or certificate in the bundle issued {} (issuer {})",
        cert.subject(),
        cert.issuer_name()
    )));
    None
}

fn issued(cert: &Cert, issuer: &Cert, reasons: &mut Vec<Reason>) -> bool {
    let key = match issuer.public_key() {
        Ok(k) => k,
        Err(e) => {
            reasons.push(Reason::Other(format!("{}: {e}", issuer.subject())));
            return false;
        }
    };
    match cert.signed_by(&key) {
        Ok(true) => true,
        Ok(false) => {
            reasons.push(Reason::Other(format!(
                "the signature on {} is not {}'s",
                cert.subject(),
                issuer.subject()
            )));
            false
        }
        Err(e) => {
            reasons.push(Reason::Other(format!("{}: {e}", cert.subject())));
            false
        }
    }
}

/// An issuing certificate: valid at `at`, a CA (basicConstraints cA, when it has the
/// extension; a version 1 root has none), allowed to sign certificates by its key usage when it
/// has one, within its path length, and without unhandled critical extensions.
fn check_issuer(issuer: &Cert, at: u64, below: usize) -> Result<(), Reason> {
    check_time(issuer, at).map_err(Reason::Time)?;
    let subject = issuer.subject();
    if let Some(oid) = issuer.unhandled_critical() {
        return Err(Reason::Other(format!(
            "{subject} has an unhandled critical extension {oid}"
        )));
    }
    let v3 = issuer.cert.tbs_certificate().version() != x509_cert::certificate::Version::V1;
    match issuer.basic_constraints() {
        Some(bc) if !bc.ca => return Err(Reason::Other(format!("{subject} is not a CA"))),
        Some(bc)
            if bc
                .path_len_constraint
                .is_some_and(|n| usize::from(n) < below) =>
        {
            return Err(Reason::Other(format!(
                "{subject}'s path length constraint is exceeded"
            )));
        }
        None if v3 => {
            return Err(Reason::Other(format!(
                "{subject} is not a CA (no basicConstraints)"
            )));
        }
        _ => {}
    }
    if issuer.key_usage().is_some_and(|k| !k.key_cert_sign()) {
        return Err(Reason::Other(format!(
            "{subject}'s key usage does not allow signing certificates"
        )));
    }
    Ok(())
}

fn check_time(cert: &Cert, at: u64) -> Result<(), ChainError> {
    let (not_before, not_after) = cert.validity();
    if at < not_before || at > not_after {
        return Err(ChainError::Time {
            subject: cert.subject(),
            at,
            not_before,
            not_after,
        });
    }
    Ok(())
}

/// Seconds since 1970 as RFC 3339 UTC ("2025-10-10T02:12:19Z").
pub(crate) fn rfc3339(secs: u64) -> String {
    match der::DateTime::from_unix_duration(std::time::Duration::from_secs(secs)) {
        Ok(t) => format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
            t.year(),
            t.month(),
            t.day(),
            t.hour(),
            t.minutes(),
            t.seconds()
        ),
        Err(_) => format!("{secs} s after 1970"),
    }
}

/// An RFC 3339 time ("2021-03-07T03:20:29Z", fractions and offsets allowed) in seconds since
/// 1970, as trusted roots write their validity periods.
pub(crate) fn parse_rfc3339(text: &str) -> Option<u64> {
    let b = text.as_bytes();
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't' | b' ')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let num = |r: std::ops::Range<usize>| text.get(r)?.parse::<u16>().ok();
    let t = der::DateTime::new(
        num(0..4)?,
        num(5..7)?.try_into().ok()?,
        num(8..10)?.try_into().ok()?,
        num(11..13)?.try_into().ok()?,
        num(14..16)?.try_into().ok()?,
        num(17..19)?.try_into().ok()?,
    )
    .ok()?;
    let mut rest = &text[19..];
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        rest = &frac[digits..];
    }
    let secs = t.unix_duration().as_secs() as i64;
    let offset = match rest {
        "Z" | "z" => 0,
        _ if rest.len() == 6 && (rest.starts_with('+') || rest.starts_with('-')) => {
            let h: i64 = rest[1..3].parse().ok()?;
            let m: i64 = rest[4..6].parse().ok()?;
            let o = h * 3600 + m * 60;
            if rest.starts_with('+') { o } else { -o }
        }
        _ => return None,
    };
    u64::try_from(secs - offset).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_both_ways() {
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            parse_rfc3339("2022-12-31T23:59:59.999Z"),
            Some(1_672_531_199)
        );
        assert_eq!(
            parse_rfc3339("2022-04-13T22:06:15+02:00"),
            Some(1_649_880_375)
        );
        assert_eq!(rfc3339(1_672_531_199), "2022-12-31T23:59:59Z");
        assert_eq!(parse_rfc3339("2022-13-01T00:00:00Z"), None);
        assert_eq!(parse_rfc3339("yesterday"), None);
    }
}
