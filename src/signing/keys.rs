//! ECDSA keys on the curves model_signing signs with (NIST P-256, P-384, P-521, each with the
//! hash of its size, as Sigstore's key details name them), and RSA keys for CA certificates;
//! DSSE's pre-authentication encoding (PAE), and the one of model_signing 0.2. RustCrypto does
//! the cryptography; this file only chooses the curve and the hash.

use der::{Decode, Encode};
use p256::pkcs8::{DecodePrivateKey, DecodePublicKey, EncodePublicKey};
use sha2::{Digest, Sha256, Sha384, Sha512};

use crate::formats::oms::IN_TOTO_PAYLOAD_TYPE;

/// A hash a signature is made over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hash {
    Sha256,
    Sha384,
    Sha512,
}

impl Hash {
    pub(crate) fn digest(self, message: &[u8]) -> Vec<u8> {
        match self {
            Hash::Sha256 => Sha256::digest(message).to_vec(),
            Hash::Sha384 => Sha384::digest(message).to_vec(),
            Hash::Sha512 => Sha512::digest(message).to_vec(),
        }
    }
}

/// A public key that can check a signature: ECDSA on a NIST curve, or RSA (certificates only).
#[derive(Debug, Clone)]
pub(crate) enum PublicKey {
    P256(p256::ecdsa::VerifyingKey),
    P384(p384::ecdsa::VerifyingKey),
    P521(p521::ecdsa::VerifyingKey),
    Rsa(Box<rsa::PublicKey>),
}

impl PublicKey {
    /// A key from a PEM `PUBLIC KEY` (SubjectPublicKeyInfo) file's text.
    pub(crate) fn from_pem(text: &[u8]) -> Result<PublicKey, String> {
        let (label, der) = der::pem::decode_vec(text).map_err(|e| format!("not PEM ({e})"))?;
        if label != "PUBLIC KEY" {
            return Err(format!(
                "a PEM {label:?}, expected a \"PUBLIC KEY\" (openssl pkey -pubout writes one)"
            ));
        }
        PublicKey::from_spki_der(&der)
    }

    /// A key from its DER SubjectPublicKeyInfo.
    pub(crate) fn from_spki_der(der: &[u8]) -> Result<PublicKey, String> {
        if let Ok(k) = p256::PublicKey::from_public_key_der(der) {
            return Ok(PublicKey::P256(k.into()));
        }
        if let Ok(k) = p384::PublicKey::from_public_key_der(der) {
            return Ok(PublicKey::P384(k.into()));
        }
        if let Ok(k) = p521::PublicKey::from_public_key_der(der) {
            return Ok(PublicKey::P521(k.into()));
        }
        if let Ok(k) = rsa::PublicKey::from_public_key_der(der) {
            return Ok(PublicKey::Rsa(Box::new(k)));
        }
        let algorithm = spki::SubjectPublicKeyInfoRef::from_der(der).map_or_else(
            |_| "an unreadable algorithm".to_owned(),
            |s| s.algorithm.oid.to_string(),
        );
        Err(format!(
            "a key of {algorithm}; supported: ECDSA on P-256, P-384 or P-521, and RSA for CA \
             certificates"
        ))
    }

    /// The hash ECDSA uses with this curve (Sigstore's PKIX_ECDSA_P256_SHA_256 and so on).
    pub(crate) fn curve_hash(&self) -> Option<Hash> {
        match self {
            PublicKey::P256(_) => Some(Hash::Sha256),
            PublicKey::P384(_) => Some(Hash::Sha384),
            PublicKey::P521(_) => Some(Hash::Sha512),
            PublicKey::Rsa(_) => None,
        }
    }

    /// What the key is, for messages.
    pub(crate) fn describe(&self) -> String {
        match self {
            PublicKey::P256(_) => "ECDSA P-256".to_owned(),
            PublicKey::P384(_) => "ECDSA P-384".to_owned(),
            PublicKey::P521(_) => "ECDSA P-521".to_owned(),
            PublicKey::Rsa(k) => {
                use rsa::traits::PublicKeyParts;
                format!("RSA {}", k.size() * 8)
            }
        }
    }

    /// The DER SubjectPublicKeyInfo, as `cryptography` writes it (an uncompressed point).
    pub(crate) fn spki_der(&self) -> Vec<u8> {
        let der = match self {
            PublicKey::P256(k) => p256::PublicKey::from(k).to_public_key_der(),
            PublicKey::P384(k) => p384::PublicKey::from(k).to_public_key_der(),
            PublicKey::P521(k) => p521::PublicKey::from(k).to_public_key_der(),
            PublicKey::Rsa(k) => k.to_public_key_der(),
        };
        der.expect("a parsed key encodes").into_vec()
    }

    /// model_signing's key hint: SHA-256 (hex) of the key's PEM as `cryptography` writes it.
    pub(crate) fn hint(&self) -> String {
        crate::digest::sha256_hex(self.pem().as_bytes())
    }

    /// The PEM `PUBLIC KEY`, 64 base64 characters a line, LF endings.
    pub(crate) fn pem(&self) -> String {
        let mut pem =
            der::pem::encode_string("PUBLIC KEY", der::pem::LineEnding::LF, &self.spki_der())
                .expect("PEM of a key");
        if !pem.ends_with('\n') {
            pem.push('\n');
        }
        pem
    }

    /// Whether `signature` (ECDSA: ASN.1 DER; RSA: PKCS #1 v1.5) is this key's over the
    /// `hash` of `message`.
    pub(crate) fn verify(&self, message: &[u8], signature: &[u8], hash: Hash) -> bool {
        self.verify_prehash(&hash.digest(message), signature, hash)
    }

    fn verify_prehash(&self, prehash: &[u8], signature: &[u8], hash: Hash) -> bool {
        use ecdsa::signature::hazmat::PrehashVerifier;
        match self {
            PublicKey::P256(k) => p256::ecdsa::DerSignature::from_bytes(signature)
                .is_ok_and(|s| k.verify_prehash(prehash, &s).is_ok()),
            PublicKey::P384(k) => p384::ecdsa::DerSignature::from_bytes(signature)
                .is_ok_and(|s| k.verify_prehash(prehash, &s).is_ok()),
            PublicKey::P521(k) => p521::ecdsa::DerSignature::from_bytes(signature)
                .is_ok_and(|s| k.verify_prehash(prehash, &s).is_ok()),
            PublicKey::Rsa(k) => {
                let scheme = match hash {
                    Hash::Sha256 => rsa::Pkcs1v15Sign::new::<Sha256>(),
                    Hash::Sha384 => rsa::Pkcs1v15Sign::new::<Sha384>(),
                    Hash::Sha512 => rsa::Pkcs1v15Sign::new::<Sha512>(),
                };
                k.verify(scheme, prehash, signature).is_ok()
            }
        }
    }
}

impl PartialEq for PublicKey {
    fn eq(&self, other: &Self) -> bool {
        self.spki_der() == other.spki_der()
    }
}

/// An ECDSA private key to sign with.
pub(crate) enum PrivateKey {
    P256(p256::ecdsa::SigningKey),
    P384(p384::ecdsa::SigningKey),
    P521(p521::ecdsa::SigningKey),
}

impl PrivateKey {
    /// A key from a PEM `PRIVATE KEY` (PKCS #8) or `EC PRIVATE KEY` (SEC1) file's text; an
    /// `EC PARAMETERS` block before it (`openssl ecparam -genkey`) is skipped.
    pub(crate) fn from_pem(text: &[u8]) -> Result<PrivateKey, String> {
        let text = std::str::from_utf8(text).map_err(|_| "not PEM text".to_owned())?;
        let start = [
            "-----BEGIN PRIVATE KEY-----",
            "-----BEGIN EC PRIVATE KEY-----",
            "-----BEGIN ENCRYPTED PRIVATE KEY-----",
        ]
        .iter()
        .filter_map(|m| text.find(m))
        .min()
        .ok_or_else(|| {
            "no PEM private key (BEGIN PRIVATE KEY or BEGIN EC PRIVATE KEY)".to_owned()
        })?;
        let (label, der) = der::pem::decode_vec(&text.as_bytes()[start..])
            .map_err(|e| format!("not PEM ({e})"))?;
        match label {
            "PRIVATE KEY" => PrivateKey::from_pkcs8(&der),
            "EC PRIVATE KEY" => PrivateKey::from_sec1(&der),
            "ENCRYPTED PRIVATE KEY" => Err(
                "an encrypted private key; decrypt it first (openssl pkey -in KEY -out PLAIN)"
                    .to_owned(),
            ),
            other => Err(format!("a PEM {other:?}, expected a private key")),
        }
    }

    fn from_pkcs8(der: &[u8]) -> Result<PrivateKey, String> {
        if let Ok(k) = p256::SecretKey::from_pkcs8_der(der) {
            return Ok(PrivateKey::P256(k.into()));
        }
        if let Ok(k) = p384::SecretKey::from_pkcs8_der(der) {
            return Ok(PrivateKey::P384(k.into()));
        }
        if let Ok(k) = p521::SecretKey::from_pkcs8_der(der) {
            return Ok(PrivateKey::P521(k.into()));
        }
        Err("not an ECDSA key on P-256, P-384 or P-521".to_owned())
    }

    fn from_sec1(der: &[u8]) -> Result<PrivateKey, String> {
        if let Ok(k) = p256::SecretKey::from_sec1_der(der) {
            return Ok(PrivateKey::P256(k.into()));
        }
        if let Ok(k) = p384::SecretKey::from_sec1_der(der) {
            return Ok(PrivateKey::P384(k.into()));
        }
        if let Ok(k) = p521::SecretKey::from_sec1_der(der) {
            return Ok(PrivateKey::P521(k.into()));
        }
        Err("not an ECDSA key on P-256, P-384 or P-521".to_owned())
    }

    pub(crate) fn public(&self) -> PublicKey {
        match self {
            PrivateKey::P256(k) => PublicKey::P256(*k.verifying_key()),
            PrivateKey::P384(k) => PublicKey::P384(*k.verifying_key()),
            PrivateKey::P521(k) => PublicKey::P521(*k.verifying_key()),
        }
    }

    /// An ASN.1 DER ECDSA signature over `message` with the curve's hash (RFC 6979, so the
    /// same key and message give the same signature).
    pub(crate) fn sign(&self, message: &[u8]) -> Vec<u8> {
        use ecdsa::signature::Signer;
        match self {
            PrivateKey::P256(k) => {
                let s: p256::ecdsa::DerSignature = k.sign(message);
                s.to_bytes().into_vec()
            }
            PrivateKey::P384(k) => {
                let s: p384::ecdsa::DerSignature = k.sign(message);
                s.to_bytes().into_vec()
            }
            PrivateKey::P521(k) => {
                let s: p521::ecdsa::DerSignature = k.sign(message);
                s.to_bytes().into_vec()
            }
        }
    }
}

/// DSSE's pre-authentication encoding of an in-toto payload: what is signed.
pub(crate) fn pae(payload: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "DSSEv1 {} {IN_TOTO_PAYLOAD_TYPE} {} ",
        IN_TOTO_PAYLOAD_TYPE.len(),
        payload.len()
    )
    .into_bytes();
    out.extend_from_slice(payload);
    out
}

/// model_signing 0.2's encoding, which its signatures were made over: `DSSEV1` and the payload
/// as Python's `repr` of a bytes object (`b'...'`, escapes and all).
pub(crate) fn pae_compat(payload: &[u8]) -> Vec<u8> {
    format!(
        "DSSEV1 {} {IN_TOTO_PAYLOAD_TYPE} {} {}",
        IN_TOTO_PAYLOAD_TYPE.len(),
        payload.len(),
        python_bytes_repr(payload)
    )
    .into_bytes()
}

/// Python's `repr(bytes)`: single quotes unless the bytes hold a `'` and no `"`.
fn python_bytes_repr(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let quote = if bytes.contains(&b'\'') && !bytes.contains(&b'"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(bytes.len() + 3);
    out.push('b');
    out.push(quote);
    for &b in bytes {
        match b {
            b'\\' => out.push_str("\\\\"),
            b'\t' => out.push_str("\\t"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            _ if char::from(b) == quote => {
                out.push('\\');
                out.push(quote);
            }
            0x20..0x7f => out.push(char::from(b)),
            _ => {
                let _ = write!(out, "\\x{b:02x}");
            }
        }
    }
    out.push(quote);
    out
}

/// The DER of a certificate's to-be-signed part as it was signed: x509-cert reads strict DER,
/// so encoding it again gives the same bytes.
pub(crate) fn tbs_der(cert: &x509_cert::Certificate) -> Vec<u8> {
    cert.tbs_certificate()
        .to_der()
        .expect("a parsed certificate encodes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pae_is_dsse_v1() {
        assert_eq!(
            pae(b"{}"),
            b"DSSEv1 28 application/vnd.in-toto+json 2 {}".to_vec()
        );
    }

    #[test]
    fn compat_pae_is_python_repr() {
        assert_eq!(
            String::from_utf8(pae_compat(b"{\"a\": 'b'\n}\\")).unwrap(),
            "DSSEV1 28 application/vnd.in-toto+json 12 b'{\"a\": \\'b\\'\\n}\\\\'"
        );
        assert_eq!(python_bytes_repr(b"it's"), "b\"it's\"");
        assert_eq!(python_bytes_repr(&[0, 0xff]), "b'\\x00\\xff'");
    }

    #[test]
    fn signs_and_verifies_on_each_curve() {
        let p256 = PrivateKey::P256(p256::ecdsa::SigningKey::from_slice(&[7u8; 32]).unwrap());
        let p384 = PrivateKey::P384(p384::ecdsa::SigningKey::from_slice(&[7u8; 48]).unwrap());
        let mut k521 = [7u8; 66];
        k521[0] = 1;
        let p521 = PrivateKey::P521(p521::ecdsa::SigningKey::from_slice(&k521).unwrap());
        for key in [p256, p384, p521] {
            let public = key.public();
            let hash = public.curve_hash().unwrap();
            let sig = key.sign(b"message");
            assert!(public.verify(b"message", &sig, hash));
            assert!(!public.verify(b"messagf", &sig, hash));
            let again = PublicKey::from_pem(public.pem().as_bytes()).unwrap();
            assert_eq!(again, public);
        }
    }
}
