//! Helpers of the signature tests: keys and certificate chains made with the real `openssl`,
//! model_signing 1.1.1 (the reference signer and verifier, from the test venv), and small model
//! directories.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use super::{assert_success, python};

/// `python -m model_signing ARGS` in `dir`.
pub fn model_signing(dir: &Path, args: &[&str]) -> Output {
    Command::new(python())
        .args(["-m", "model_signing"])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("failed to start python -m model_signing")
}

/// `openssl ARGS` in `dir`, which must succeed.
pub fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("`openssl` is required by this test: run the tests with scripts/test, which installs it");
    assert_success(&format!("openssl {args:?}"), &out);
}

/// An ECDSA key pair on `curve` (an openssl name: prime256v1, secp384r1, secp521r1) in `dir`:
/// `NAME.key` (SEC1 PEM, as `openssl ecparam -genkey` writes it) and `NAME.pub` (SPKI PEM).
pub fn key_pair(dir: &Path, name: &str, curve: &str) -> (PathBuf, PathBuf) {
    let key = format!("{name}.key");
    let public = format!("{name}.pub");
    openssl(
        dir,
        &["ecparam", "-name", curve, "-genkey", "-noout", "-out", &key],
    );
    openssl(dir, &["ec", "-in", &key, "-pubout", "-out", &public]);
    (dir.join(key), dir.join(public))
}

/// A chain made with openssl in `dir`: `NAME-root.pem` (self-signed CA, P-384),
/// `NAME-int.pem` (intermediate CA, P-256) and `NAME-leaf.pem` with its key `NAME-leaf.key`
/// (P-256, digitalSignature and codeSigning), each valid for `days` from now.
pub struct Chain {
    pub root: PathBuf,
    pub root_key: PathBuf,
    pub intermediate: PathBuf,
    pub intermediate_key: PathBuf,
    pub leaf: PathBuf,
    pub leaf_key: PathBuf,
}

pub fn chain(dir: &Path, name: &str) -> Chain {
    let f = |suffix: &str| format!("{name}-{suffix}");
    std::fs::write(
        dir.join(f("ca.ext")),
        "basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n",
    )
    .unwrap();
    std::fs::write(
        dir.join(f("leaf.ext")),
        "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=codeSigning\n",
    )
    .unwrap();
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-384",
            "-nodes",
            "-keyout",
            &f("root.key"),
            "-out",
            &f("root.pem"),
            "-subj",
            &format!("/CN={name} root"),
            "-days",
            "30",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ],
    );
    for (who, issuer, ext, curve) in [
        ("int", "root", "ca.ext", "P-256"),
        ("leaf", "int", "leaf.ext", "P-256"),
    ] {
        openssl(
            dir,
            &[
                "req",
                "-newkey",
                "ec",
                "-pkeyopt",
                &format!("ec_paramgen_curve:{curve}"),
                "-nodes",
                "-keyout",
                &f(&format!("{who}.key")),
                "-out",
                &f(&format!("{who}.csr")),
                "-subj",
                &format!("/CN={name} {who}"),
            ],
        );
        openssl(
            dir,
            &[
                "x509",
                "-req",
                "-in",
                &f(&format!("{who}.csr")),
                "-CA",
                &f(&format!("{issuer}.pem")),
                "-CAkey",
                &f(&format!("{issuer}.key")),
                "-CAcreateserial",
                "-out",
                &f(&format!("{who}.pem")),
                "-days",
                "30",
                "-extfile",
                &f(ext),
            ],
        );
    }
    Chain {
        root: dir.join(f("root.pem")),
        root_key: dir.join(f("root.key")),
        intermediate: dir.join(f("int.pem")),
        intermediate_key: dir.join(f("int.key")),
        leaf: dir.join(f("leaf.pem")),
        leaf_key: dir.join(f("leaf.key")),
    }
}

/// A small model directory: two weight files (one in a subdirectory), a config, and a
/// `.gitattributes` (ignored by default).
pub fn model_dir(dir: &Path) -> PathBuf {
    let model = dir.join("model");
    std::fs::create_dir_all(model.join("sub")).unwrap();
    std::fs::write(model.join("weights.bin"), vec![7u8; 3000]).unwrap();
    std::fs::write(model.join("sub/more.bin"), b"more weights").unwrap();
    std::fs::write(model.join("config.json"), b"{\"layers\": 2}\n").unwrap();
    std::fs::write(model.join(".gitattributes"), b"*.bin filter=lfs\n").unwrap();
    model
}

pub fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}
