#!/usr/bin/env python3
"""OMS signature fixtures: a tiny model directory signed by the model_signing release installed in
the running venv with a P-256 key, a P-384 key and a certificate chain, for tests/signatures.rs.

Usage (in a venv holding one model_signing release; scripts/make_signature_fixtures.sh makes one
per release and runs this in each):

    ms-venv/bin/python scripts/make_signature_fixtures.py tests/fixtures/signatures

It writes OUTDIR/vVERSION/WAY/ (WAY is `key` and `key-p384`, an EC key on P-256 and on P-384,
or `certificate`; VERSION the installed model_signing's), emptied first:
  model/             config.json, weights.bin (2,048 bytes) and sub/vocab.txt, byte for byte the
                     same on every run
  model.sig          the signature model_signing wrote (beside the model, not in it)
  signing-key.pub    the key way's public key (PEM); the private key is not kept
  ca.pem             the certificate way's root CA (P-384, self-signed); the bundle holds the
                     leaf (P-256, digitalSignature, codeSigning) and the intermediate (P-256)
  args.json          how to verify it with weight-inspect and what the verification names

Keys are new on every run; the certificates are valid from 2025-01-01 to 2125-01-01, so the
fixtures verify for a century (weight-inspect checks a chain at the present time).

model_signing 0.2.0 has no command line (its sign.py lived outside the package): the key and
the chain are signed through its library the way that script did (`model.sign` with
`in_toto_signature.IntotoSigner` over `key.ECKeySigner` or `pki.PKISigner`, a
`serialize_by_file.ManifestSerializer` with SHA-256, `in_toto.DigestsIntotoPayload`). Later
releases run their command line (`model_signing._cli.main`, what `python -m model_signing`
runs: `sign key|certificate`; see CLI below for the one change up to 1.0.1). Each signature is
then verified by the same release (library, or its `verify`) before it is kept. 0.3.1 cannot
sign with a certificate (CANNOT below), so it has no certificate way.
"""

import datetime
import hashlib
import importlib.metadata
import json
import pathlib
import shutil
import subprocess
import sys
import tempfile

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

NOT_BEFORE = datetime.datetime(2025, 1, 1, tzinfo=datetime.timezone.utc)
NOT_AFTER = datetime.datetime(2125, 1, 1, tzinfo=datetime.timezone.utc)


def write_model(model: pathlib.Path) -> int:
    """The tiny model, deterministic: returns how many files it has."""
    (model / "sub").mkdir(parents=True)
    (model / "config.json").write_bytes(b'{"layers": 2, "hidden": 16}\n')
    (model / "weights.bin").write_bytes(bytes((i * 7 + 3) % 251 for i in range(2048)))
    (model / "sub" / "vocab.txt").write_bytes(b"<s>\n</s>\nhello\nworld\n")
    return 3


def pem_private(key) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def pem_public(key) -> bytes:
    return key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def certificate(subject, issuer, public_key, issuer_key, ca: bool):
    name = lambda cn: x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    builder = (
        x509.CertificateBuilder()
        .subject_name(name(subject))
        .issuer_name(name(issuer))
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(NOT_BEFORE)
        .not_valid_after(NOT_AFTER)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        usage = x509.KeyUsage(False, False, False, False, False, True, True, False, False)
    else:
        usage = x509.KeyUsage(True, False, False, False, False, False, False, False, False)
        builder = builder.add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CODE_SIGNING]), critical=False
        )
    builder = builder.add_extension(usage, critical=True)
    return builder.sign(issuer_key, hashes.SHA256())


def make_chain(scratch: pathlib.Path, label: str) -> dict:
    """Root (P-384) → intermediate (P-256) → leaf (P-256), as PEM files in `scratch`."""
    root_key = ec.generate_private_key(ec.SECP384R1())
    int_key = ec.generate_private_key(ec.SECP256R1())
    leaf_key = ec.generate_private_key(ec.SECP256R1())
    root_cn, int_cn, leaf_cn = (f"{label} {who}" for who in ("root", "intermediate", "leaf"))
    root = certificate(root_cn, root_cn, root_key.public_key(), root_key, ca=True)
    inter = certificate(int_cn, root_cn, int_key.public_key(), root_key, ca=True)
    leaf = certificate(leaf_cn, int_cn, leaf_key.public_key(), int_key, ca=False)
    files = {
        "root": root.public_bytes(serialization.Encoding.PEM),
        "intermediate": inter.public_bytes(serialization.Encoding.PEM),
        "leaf": leaf.public_bytes(serialization.Encoding.PEM),
        "leaf_key": pem_private(leaf_key),
    }
    paths = {}
    for name, data in files.items():
        paths[name] = scratch / f"{name}.pem"
        paths[name].write_bytes(data)
    paths["signer"] = f"certificate CN={leaf_cn}, issued by CN={int_cn}"
    return paths


# model_signing up to 1.0.1 builds a Sigstore signer in `signing.Config()` before the command
# line replaces it with the key or certificate signer, and that fetches Sigstore's TUF metadata
# (the network). 1.1.0 made it lazy ("to avoid network calls"); for the older releases the
# command line is run with that one change, and nothing else of theirs altered.
CLI = """
import sys
from model_signing import hashing, signing
if "use_sigstore_signer()" in open(signing.__file__).read().split("def __init__", 1)[1][:400]:
    def offline_init(self):
        self._hashing_config = hashing.Config()
        self._signer = None
    signing.Config.__init__ = offline_init
from model_signing._cli import main
sys.argv[0] = "model_signing"
main()
"""


def run(argv: list, success: str) -> None:
    """Runs a model_signing command; before 1.0.1 a failure still exits 0, so its word is read."""
    done = subprocess.run([sys.executable, "-c", CLI] + argv, capture_output=True, text=True)
    if done.returncode != 0 or success not in done.stdout:
        sys.exit(f"failed: {' '.join(map(str, argv))}\n{done.stdout}{done.stderr}")


def sign_0_2(way: str, model: pathlib.Path, sig: pathlib.Path, material: dict) -> None:
    """model_signing 0.2.0's library, as its sign.py and verify.py used it."""
    from model_signing import model as ms_model
    from model_signing.hashing import file as ms_file, memory
    from model_signing.serialization import serialize_by_file
    from model_signing.signature import key as ms_key, pki
    from model_signing.signing import in_toto, in_toto_signature

    def serializer():
        factory = lambda path: ms_file.SimpleFileHasher(path, memory.SHA256())
        return serialize_by_file.ManifestSerializer(file_hasher_factory=factory)

    if way != "certificate":
        signer = ms_key.ECKeySigner.from_path(str(material["private"]))
        verifier = ms_key.ECKeyVerifier.from_path(str(material["public"]))
    else:
        signer = pki.PKISigner.from_path(
            str(material["leaf_key"]), str(material["leaf"]), [str(material["intermediate"])]
        )
        # 0.2.0's PKIVerifier verifies nothing: it hands the certificate's `public_key` method,
        # not the key, to the key verifier, which then fails. Its key verifier on the leaf's
        # key checks the signature instead (the chain is checked by weight-inspect's tests).
        leaf = x509.load_pem_x509_certificate(material["leaf"].read_bytes())
        verifier = ms_key.ECKeyVerifier(leaf.public_key())
    signature = ms_model.sign(
        model_path=model,
        signer=in_toto_signature.IntotoSigner(signer),
        payload_generator=in_toto.DigestsIntotoPayload.from_manifest,
        serializer=serializer(),
    )
    signature.write(sig)
    ms_model.verify(
        sig=in_toto_signature.IntotoSignature.read(sig),
        verifier=in_toto_signature.IntotoVerifier(verifier),
        model_path=model,
        serializer=serializer(),
    )


def sign_cli(way: str, model: pathlib.Path, sig: pathlib.Path, material: dict) -> None:
    """model_signing's command line: `sign key|certificate`, then its `verify`."""
    if way != "certificate":
        run(["sign", "key", "--private_key", material["private"], "--signature", sig, model],
            "Signing succeeded")
        run(["verify", "key", "--public_key", material["public"], "--signature", sig, model],
            "Verification succeeded")
    else:
        run(
            ["sign", "certificate", "--private_key", material["leaf_key"]]
            + ["--signing_certificate", material["leaf"]]
            + ["--certificate_chain", material["intermediate"], "--signature", sig, model],
            "Signing succeeded",
        )
        run(
            ["verify", "certificate", "--certificate_chain", material["root"]]
            + ["--signature", sig, model],
            "Verification succeeded",
        )


# Each way: the curve of its key (the certificate way's leaf is P-256).
WAYS = {"key": ec.SECP256R1(), "key-p384": ec.SECP384R1(), "certificate": None}
CURVE_NAMES = {"secp256r1": "P-256", "secp384r1": "P-384"}


def key_material(scratch: pathlib.Path, curve) -> dict:
    key = ec.generate_private_key(curve)
    private, public = scratch / "signing-key.pem", scratch / "signing-key.pub"
    private.write_bytes(pem_private(key))
    public.write_bytes(pem_public(key))
    # weight-inspect names a key by its hint: SHA-256 of its SPKI PEM (64-column lines).
    hint = hashlib.sha256(pem_public(key)).hexdigest()
    shown = CURVE_NAMES[curve.name]
    return {"private": private, "public": public, "signer": f"key {hint} (ECDSA {shown})"}


def make_way(version: str, way: str, out: pathlib.Path, scratch: pathlib.Path) -> None:
    case = out / f"v{version}" / way
    if case.exists():
        shutil.rmtree(case)
    case.mkdir(parents=True)
    files = write_model(case / "model")
    sig = case / "model.sig"
    if way != "certificate":
        material = key_material(scratch, WAYS[way])
        shutil.copy(material["public"], case / "signing-key.pub")
        trust = ["--public-key", "signing-key.pub"]
    else:
        material = make_chain(scratch, f"model_signing {version} fixture")
        shutil.copy(material["root"], case / "ca.pem")
        trust = ["--certificate-chain", "ca.pem"]
    signer = sign_0_2 if version == "0.2.0" else sign_cli
    signer(way, case / "model", sig, material)
    args = {
        "model_signing": version,
        "way": way,
        "model": "model",
        "signature": "model.sig",
        "trust": trust,
        "signer": material["signer"],
        "files": files,
    }
    (case / "args.json").write_text(json.dumps(args, indent=2) + "\n")


# Ways a release cannot sign at all, with why: nothing is written for them.
CANNOT = {
    ("0.3.1", "certificate"): "its certificate signer fails on every call "
    "(`X509Certificate(raw_byutes=...)`, a typo fixed in 1.0.0)",
}


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = pathlib.Path(sys.argv[1])
    version = importlib.metadata.version("model-signing")
    for way in WAYS:
        if (version, way) in CANNOT:
            print(f"model_signing {version} cannot sign with a {way}: {CANNOT[version, way]}")
            shutil.rmtree(out / f"v{version}" / way, ignore_errors=True)
            continue
        with tempfile.TemporaryDirectory() as scratch:
            make_way(version, way, out, pathlib.Path(scratch))
    print(f"model_signing {version}: {out / ('v' + version)}")


if __name__ == "__main__":
    main()
