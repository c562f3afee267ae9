"""A Sigstore instance of the test's own, offline: a Fulcio-like CA (root and intermediate), a
Rekor-like log key, the trusted_root.json naming them, and a keyless bundle made from a bundle
signed the certificate way with the leaf's key (the DSSE envelope kept, the material turned into
a Fulcio certificate and a dsse 0.0.1 log entry with its signed entry timestamp and a one-leaf
inclusion proof under a signed checkpoint). Written with `cryptography`.

usage: fake_sigstore.py certs OUT_DIR IDENTITY ISSUER
       fake_sigstore.py bundle OUT_DIR CERT_BUNDLE KEYLESS_BUNDLE
"""

import base64
import datetime
import hashlib
import json
import sys

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID, ObjectIdentifier

b64 = lambda b: base64.b64encode(b).decode()
now = datetime.datetime.now(datetime.timezone.utc)


def pem_key(key):
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


def name(cn):
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "test.invalid"), x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def ca_cert(subject, key, issuer, issuer_key):
    return (
        x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .sign(issuer_key, hashes.SHA384())
    )


def der_utf8(text):
    raw = text.encode()
    assert len(raw) < 128
    return bytes([0x0C, len(raw)]) + raw


def certs(out, identity, issuer):
    root_key = ec.generate_private_key(ec.SECP384R1())
    int_key = ec.generate_private_key(ec.SECP384R1())
    leaf_key = ec.generate_private_key(ec.SECP256R1())
    log_key = ec.generate_private_key(ec.SECP256R1())
    root = ca_cert(name("fake-fulcio-root"), root_key, name("fake-fulcio-root"), root_key)
    inter = ca_cert(name("fake-fulcio-intermediate"), int_key, root.subject, root_key)
    leaf = (
        x509.CertificateBuilder().subject_name(x509.Name([])).issuer_name(inter.subject)
        .public_key(leaf_key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(minutes=10))
        .add_extension(x509.KeyUsage(True, False, False, False, False, False, False, False, False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CODE_SIGNING]), critical=False)
        .add_extension(x509.SubjectAlternativeName([x509.RFC822Name(identity)]), critical=True)
        .add_extension(x509.UnrecognizedExtension(ObjectIdentifier("1.3.6.1.4.1.57264.1.1"), issuer.encode()), critical=False)
        .add_extension(x509.UnrecognizedExtension(ObjectIdentifier("1.3.6.1.4.1.57264.1.8"), der_utf8(issuer)), critical=False)
        .sign(int_key, hashes.SHA384())
    )
    open(f"{out}/leaf.key", "wb").write(pem_key(leaf_key))
    open(f"{out}/log.key", "wb").write(pem_key(log_key))
    open(f"{out}/leaf.pem", "wb").write(leaf.public_bytes(serialization.Encoding.PEM))
    log_der = log_key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    start = (now - datetime.timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    root_json = {
        "mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
        "tlogs": [{
            "baseUrl": "https://log.test.invalid",
            "hashAlgorithm": "SHA2_256",
            "publicKey": {"rawBytes": b64(log_der), "keyDetails": "PKIX_ECDSA_P256_SHA_256", "validFor": {"start": start}},
            "logId": {"keyId": b64(hashlib.sha256(log_der).digest())},
        }],
        "certificateAuthorities": [{
            "subject": {"organization": "test.invalid", "commonName": "fake-fulcio"},
            "uri": "https://fulcio.test.invalid",
            "certChain": {"certificates": [{"rawBytes": b64(c.public_bytes(serialization.Encoding.DER))} for c in (inter, root)]},
            "validFor": {"start": start},
        }],
        "ctlogs": [],
        "timestampAuthorities": [],
    }
    json.dump(root_json, open(f"{out}/trusted_root.json", "w"))
    json.dump({"mediaType": "application/vnd.dev.sigstore.clienttrustconfig.v0.1+json", "trustedRoot": root_json},
              open(f"{out}/trust_config.json", "w"))


def sign(key, data):
    return key.sign(data, ec.ECDSA(hashes.SHA256()))


def bundle(out, cert_bundle, keyless_bundle):
    log_key = serialization.load_pem_private_key(open(f"{out}/log.key", "rb").read(), None)
    leaf_pem = open(f"{out}/leaf.pem", "rb").read()
    leaf_der = x509.load_pem_x509_certificate(leaf_pem).public_bytes(serialization.Encoding.DER)
    b = json.load(open(cert_bundle))
    env = b["dsseEnvelope"]
    payload = base64.b64decode(env["payload"])
    log_der = log_key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    log_id = hashlib.sha256(log_der).digest()
    body = json.dumps({
        "apiVersion": "0.0.1", "kind": "dsse",
        "spec": {
            "envelopeHash": {"algorithm": "sha256", "value": hashlib.sha256(json.dumps(env).encode()).hexdigest()},
            "payloadHash": {"algorithm": "sha256", "value": hashlib.sha256(payload).hexdigest()},
            "signatures": [{"signature": env["signatures"][0]["sig"], "verifier": b64(leaf_pem)}],
        },
    }, separators=(",", ":")).encode()
    integrated = int(now.timestamp())
    log_index = 7
    set_payload = json.dumps({"body": b64(body), "integratedTime": integrated, "logID": log_id.hex(), "logIndex": log_index},
                             separators=(",", ":"), sort_keys=True).encode()
    root_hash = hashlib.sha256(b"\x00" + body).digest()
    note = f"log.test.invalid - 42\n1\n{b64(root_hash)}\n"
    checkpoint = note + "\n\u2014 log.test.invalid " + b64(log_id[:4] + sign(log_key, note.encode())) + "\n"
    b["verificationMaterial"] = {
        "certificate": {"rawBytes": b64(leaf_der)},
        "tlogEntries": [{
            "logIndex": str(log_index),
            "logId": {"keyId": b64(log_id)},
            "kindVersion": {"kind": "dsse", "version": "0.0.1"},
            "integratedTime": str(integrated),
            "inclusionPromise": {"signedEntryTimestamp": b64(sign(log_key, set_payload))},
            "inclusionProof": {"logIndex": "0", "rootHash": b64(root_hash), "treeSize": "1", "hashes": [],
                               "checkpoint": {"envelope": checkpoint}},
            "canonicalizedBody": b64(body),
        }],
        "timestampVerificationData": {},
    }
    json.dump(b, open(keyless_bundle, "w"))


if __name__ == "__main__":
    if sys.argv[1] == "certs":
        certs(*sys.argv[2:5])
    else:
        bundle(*sys.argv[2:5])
