//! OpenSSF model signatures (OMS): interop both ways with model_signing 1.1.1 from PyPI, for a
//! key and for a certificate chain made with openssl; the tampering that must fail; LFS
//! pointers standing for their objects through the real git and git-lfs.

mod common;

use std::path::Path;

use common::signing::{chain, key_pair, model_dir, model_signing, p};
use common::{assert_contains, assert_success, code, combined, run_in, stdout};

fn wi(dir: &Path, args: &[&str]) -> std::process::Output {
    run_in(Some(dir), args)
}

/// Signed by model_signing, verified here; signed here, verified by model_signing: on each
/// curve model_signing signs with.
#[test]
fn key_signatures_interoperate_with_model_signing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let model = model_dir(dir);
    for curve in ["prime256v1", "secp384r1", "secp521r1"] {
        let (key, public) = key_pair(dir, curve, curve);
        let theirs = dir.join(format!("{curve}-theirs.sig"));
        let out = model_signing(
            dir,
            &[
                "sign",
                "key",
                "--private_key",
                p(&key),
                "--signature",
                p(&theirs),
                p(&model),
            ],
        );
        assert_success("model_signing sign key", &out);
        let out = wi(
            dir,
            &[
                "verify",
                p(&model),
                "--signature",
                p(&theirs),
                "--public-key",
                p(&public),
            ],
        );
        assert_success(
            &format!("verify of model_signing's {curve} signature"),
            &out,
        );
        assert_contains(
            &stdout(&out),
            &["verified:", "files: 3 signed (files, sha256)"],
        );

        let ours = dir.join(format!("{curve}-ours.sig"));
        let out = wi(
            dir,
            &[
                "sign",
                p(&model),
                "--private-key",
                p(&key),
                "--signature",
                p(&ours),
            ],
        );
        assert_success("weight-inspect sign", &out);
        let out = model_signing(
            dir,
            &[
                "verify",
                "key",
                "--public_key",
                p(&public),
                "--signature",
                p(&ours),
                p(&model),
            ],
        );
        assert_success(
            &format!("model_signing verify of our {curve} signature"),
            &out,
        );
        // Byte for byte the format model_signing writes: its payload and ours sign the same
        // statement, so they are equal once decoded.
        let payload = |path: &Path| {
            let bundle: serde_json::Value =
                serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
            bundle["dsseEnvelope"]["payload"]
                .as_str()
                .unwrap()
                .to_owned()
        };
        let decode = |s: String| {
            use base64::Engine;
            let bytes = base64::engine::general_purpose::STANDARD.decode(s).unwrap();
            let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
            let mut v = v;
            // model_signing lists ignore_paths in set order; compare them as a set.
            let ignored = v["predicate"]["serialization"]["ignore_paths"]
                .as_array_mut()
                .unwrap();
            ignored.sort_by_key(|x| x.as_str().unwrap().to_owned());
            v
        };
        assert_eq!(
            decode(payload(&ours)),
            decode(payload(&theirs)),
            "{curve}: same statement"
        );
    }
}

#[test]
fn certificate_signatures_interoperate_with_model_signing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let model = model_dir(dir);
    let c = chain(dir, "publisher");
    let theirs = dir.join("theirs.sig");
    let out = model_signing(
        dir,
        &[
            "sign",
            "certificate",
            "--private_key",
            p(&c.leaf_key),
            "--signing_certificate",
            p(&c.leaf),
            "--certificate_chain",
            p(&c.intermediate),
            "--signature",
            p(&theirs),
            p(&model),
        ],
    );
    assert_success("model_signing sign certificate", &out);
    let out = wi(
        dir,
        &[
            "verify",
            p(&model),
            "--signature",
            p(&theirs),
            "--certificate-chain",
            p(&c.root),
        ],
    );
    assert_success("verify of model_signing's certificate signature", &out);
    assert_contains(
        &stdout(&out),
        &["signer: certificate CN=publisher leaf, issued by CN=publisher int"],
    );

    let ours = dir.join("ours.sig");
    let out = wi(
        dir,
        &[
            "sign",
            p(&model),
            "--private-key",
            p(&c.leaf_key),
            "--signing-certificate",
            p(&c.leaf),
            "--certificate-chain",
            p(&c.intermediate),
            "--signature",
            p(&ours),
        ],
    );
    assert_success("weight-inspect sign with a certificate", &out);
    let out = model_signing(
        dir,
        &[
            "verify",
            "certificate",
            "--certificate_chain",
            p(&c.root),
            "--signature",
            p(&ours),
            p(&model),
        ],
    );
    assert_success("model_signing verify certificate of ours", &out);

    // A chain that does not reach the named CA.
    let other = chain(dir, "stranger");
    let out = wi(
        dir,
        &[
            "verify",
            p(&model),
            "--signature",
            p(&ours),
            "--certificate-chain",
            p(&other.root),
        ],
    );
    assert_eq!(code(&out), 1, "{}", combined(&out));
    assert_contains(
        &stdout(&out),
        &["NOT verified", "no chain to a trusted certificate"],
    );
    // A key given for a certificate signature is refused unless it is the certificate's.
    let (_, stranger_key) = key_pair(dir, "k", "prime256v1");
    let out = wi(
        dir,
        &[
            "verify",
            p(&model),
            "--signature",
            p(&ours),
            "--public-key",
            p(&stranger_key),
        ],
    );
    assert_eq!(code(&out), 1, "{}", combined(&out));
}

/// A leaf certificate made with `cryptography` (in the test venv) signed by the chain's
/// intermediate, valid from `start` to `end` days from now.
fn leaf_valid(
    dir: &Path,
    c: &common::signing::Chain,
    name: &str,
    start: i64,
    end: i64,
) -> std::path::PathBuf {
    let out_path = dir.join(format!("{name}.pem"));
    let source = r#"
import sys, datetime
from cryptography import x509
from cryptography.x509.oid import NameOID, ExtendedKeyUsageOID
from cryptography.hazmat.primitives import hashes, serialization
key = serialization.load_pem_private_key(open(sys.argv[1], "rb").read(), None)
ca = x509.load_pem_x509_certificate(open(sys.argv[2], "rb").read())
ca_key = serialization.load_pem_private_key(open(sys.argv[3], "rb").read(), None)
now = datetime.datetime.now(datetime.timezone.utc)
cert = (x509.CertificateBuilder()
    .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, sys.argv[6])]))
    .issuer_name(ca.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
    .not_valid_before(now + datetime.timedelta(days=int(sys.argv[4])))
    .not_valid_after(now + datetime.timedelta(days=int(sys.argv[5])))
    .add_extension(x509.KeyUsage(True, False, False, False, False, False, False, False, False), critical=True)
    .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CODE_SIGNING]), critical=False)
    .sign(ca_key, hashes.SHA256()))
open(sys.argv[7], "wb").write(cert.public_bytes(serialization.Encoding.PEM))
"#;
    common::run_python_source(
        source,
        &[
            p(&c.leaf_key),
            p(&c.intermediate),
            p(&c.intermediate_key),
            &start.to_string(),
            &end.to_string(),
            name,
            p(&out_path),
        ],
    );
    out_path
}

#[test]
fn expired_and_not_yet_valid_certificates_fail() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let model = model_dir(dir);
    let c = chain(dir, "timed");
    for (name, start, end, word) in [
        ("expired", -20, -10, "expired"),
        ("future", 10, 20, "not yet valid"),
    ] {
        let leaf = leaf_valid(dir, &c, name, start, end);
        let sig = dir.join(format!("{name}.sig"));
        let out = wi(
            dir,
            &[
                "sign",
                p(&model),
                "--private-key",
                p(&c.leaf_key),
                "--signing-certificate",
                p(&leaf),
                "--certificate-chain",
                p(&c.intermediate),
                "--signature",
                p(&sig),
            ],
        );
        assert_success("sign", &out);
        let out = wi(
            dir,
            &[
                "verify",
                p(&model),
                "--signature",
                p(&sig),
                "--certificate-chain",
                p(&c.root),
            ],
        );
        assert_eq!(code(&out), 1, "{}", combined(&out));
        assert_contains(
            &stdout(&out),
            &[&format!("certificate CN={name} was {word} at")],
        );
    }
}

fn signed_model(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf) {
    let model = model_dir(dir);
    let (key, public) = key_pair(dir, "signer", "prime256v1");
    let out = model_signing(
        dir,
        &[
            "sign",
            "key",
            "--private_key",
            p(&key),
            "--signature",
            p(&model.join("model.sig")),
            p(&model),
        ],
    );
    assert_success("model_signing sign key", &out);
    (model, key, public)
}

#[test]
fn changed_added_and_removed_files_are_named() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (model, _, public) = signed_model(dir);
    let verify = |extra: &[&str]| {
        let mut args = vec!["verify", p(&model), "--public-key", p(&public)];
        args.extend_from_slice(extra);
        wi(dir, &args)
    };
    assert_success("verify", &verify(&[]));
    // One byte changed.
    let mut bytes = std::fs::read(model.join("weights.bin")).unwrap();
    bytes[1234] ^= 1;
    std::fs::write(model.join("weights.bin"), &bytes).unwrap();
    // A file added, a file removed.
    std::fs::write(model.join("extra.bin"), b"new").unwrap();
    std::fs::remove_file(model.join("sub/more.bin")).unwrap();
    let out = verify(&[]);
    assert_eq!(code(&out), 1, "{}", combined(&out));
    let text = stdout(&out);
    assert_contains(
        &text,
        &[
            "NOT verified",
            "changed since signed (1):\n    weights.bin",
            "missing (1):\n    sub/more.bin",
            "not covered by the signature (1):\n    extra.bin",
        ],
    );
    let json: serde_json::Value = serde_json::from_slice(&verify(&["--json"]).stdout).unwrap();
    assert_eq!(json["schema"], 1);
    assert_eq!(json["verified"], false);
    assert_eq!(json["changed"], serde_json::json!(["weights.bin"]));
    assert_eq!(json["missing"], serde_json::json!(["sub/more.bin"]));
    assert_eq!(json["not_covered"], serde_json::json!(["extra.bin"]));
    // --ignore-unsigned-files and --ignore-paths leave the new file out.
    let out = verify(&["--ignore-unsigned-files"]);
    assert_lacks_not_covered(&stdout(&out));
    let out = verify(&["--ignore-paths", p(&model.join("extra.bin"))]);
    assert_lacks_not_covered(&stdout(&out));
}

fn assert_lacks_not_covered(text: &str) {
    common::assert_lacks(text, &["not covered"]);
}

#[test]
fn the_wrong_key_and_a_changed_payload_fail() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (model, _, public) = signed_model(dir);
    let (_, other) = key_pair(dir, "other", "prime256v1");
    let out = wi(dir, &["verify", p(&model), "--public-key", p(&other)]);
    assert_eq!(code(&out), 1, "{}", combined(&out));
    assert_contains(&stdout(&out), &["signed by another key (hint"]);

    // The payload changed under the valid signature: a resource's digest replaced, the root
    // digest made consistent again, the signature left as it was.
    let sig_path = model.join("model.sig");
    let mut bundle: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&sig_path).unwrap()).unwrap();
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut statement: serde_json::Value = serde_json::from_slice(
        &b64.decode(bundle["dsseEnvelope"]["payload"].as_str().unwrap())
            .unwrap(),
    )
    .unwrap();
    let weights = std::fs::read(model.join("weights.bin")).unwrap();
    let mut changed = weights.clone();
    changed[0] ^= 1;
    std::fs::write(model.join("weights.bin"), &changed).unwrap();
    use sha2::Digest;
    let mut root = sha2::Sha256::new();
    for r in statement["predicate"]["resources"].as_array_mut().unwrap() {
        if r["name"] == "weights.bin" {
            r["digest"] = hex::encode(sha2::Sha256::digest(&changed)).into();
        }
        root.update(hex::decode(r["digest"].as_str().unwrap()).unwrap());
    }
    statement["subject"][0]["digest"]["sha256"] = hex::encode(root.finalize()).into();
    bundle["dsseEnvelope"]["payload"] = b64.encode(serde_json::to_vec(&statement).unwrap()).into();
    std::fs::write(&sig_path, serde_json::to_vec(&bundle).unwrap()).unwrap();
    let out = wi(dir, &["verify", p(&model), "--public-key", p(&public)]);
    assert_eq!(code(&out), 1, "{}", combined(&out));
    assert_contains(&stdout(&out), &["the signature is not the given key's"]);
}

/// Rewrites the statement of `sig` with `edit`, keeping the root digest consistent.
fn edit_statement(sig: &Path, edit: impl FnOnce(&mut Vec<serde_json::Value>)) {
    use base64::Engine;
    use sha2::Digest;
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut bundle: serde_json::Value =
        serde_json::from_slice(&std::fs::read(sig).unwrap()).unwrap();
    let mut statement: serde_json::Value = serde_json::from_slice(
        &b64.decode(bundle["dsseEnvelope"]["payload"].as_str().unwrap())
            .unwrap(),
    )
    .unwrap();
    let resources = statement["predicate"]["resources"].as_array_mut().unwrap();
    edit(resources);
    let mut root = sha2::Sha256::new();
    for r in resources.iter() {
        root.update(hex::decode(r["digest"].as_str().unwrap()).unwrap());
    }
    statement["subject"][0]["digest"]["sha256"] = hex::encode(root.finalize()).into();
    bundle["dsseEnvelope"]["payload"] = b64.encode(serde_json::to_vec(&statement).unwrap()).into();
    std::fs::write(sig, serde_json::to_vec(&bundle).unwrap()).unwrap();
}

#[test]
fn unsafe_or_duplicate_resources_and_huge_bundles_are_unreadable() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (model, _, public) = signed_model(dir);
    let sig = model.join("model.sig");
    let original = std::fs::read(&sig).unwrap();
    type Edit = Box<dyn Fn(&mut Vec<serde_json::Value>)>;
    let cases: [(&str, Edit, &str); 3] = [
        (
            "twice",
            Box::new(|r| r.push(r[0].clone())),
            "is listed twice",
        ),
        (
            "dotdot",
            Box::new(|r| r[0]["name"] = "../outside.bin".into()),
            "a `..` component leaves the model",
        ),
        (
            "absolute",
            Box::new(|r| r[0]["name"] = "/etc/passwd".into()),
            "an absolute path",
        ),
    ];
    for (what, edit, message) in cases {
        std::fs::write(&sig, &original).unwrap();
        edit_statement(&sig, edit);
        let out = wi(dir, &["verify", p(&model), "--public-key", p(&public)]);
        assert_eq!(code(&out), 2, "{what}: {}", combined(&out));
        assert_contains(
            &common::stderr(&out),
            &["not a readable OMS signature", message],
        );
    }
    // 100 MB: refused by its size before it is read.
    let huge = std::fs::File::create(&sig).unwrap();
    huge.set_len(100 << 20).unwrap();
    let out = wi(dir, &["verify", p(&model), "--public-key", p(&public)]);
    assert_eq!(code(&out), 2, "{}", combined(&out));
    assert_contains(
        &common::stderr(&out),
        &["104857600 bytes, over the limit of 67108864 bytes"],
    );
}

#[test]
fn symbolic_links_are_refused_unless_allowed() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (model, key, public) = signed_model(dir);
    std::os::unix::fs::symlink("weights.bin", model.join("link.bin")).unwrap();
    let out = wi(dir, &["verify", p(&model), "--public-key", p(&public)]);
    assert_eq!(code(&out), 1, "{}", combined(&out));
    assert_contains(
        &stdout(&out),
        &["refused: link.bin: a symbolic link (refused without --allow-symlinks)"],
    );
    let out = wi(dir, &["sign", p(&model), "--private-key", p(&key)]);
    assert_eq!(code(&out), 2, "{}", combined(&out));
    assert_contains(
        &common::stderr(&out),
        &["link.bin: a symbolic link; give --allow-symlinks"],
    );
    let out = wi(
        dir,
        &[
            "sign",
            p(&model),
            "--private-key",
            p(&key),
            "--allow-symlinks",
        ],
    );
    assert_success("sign --allow-symlinks", &out);
    let out = wi(
        dir,
        &[
            "verify",
            p(&model),
            "--public-key",
            p(&public),
            "--allow-symlinks",
        ],
    );
    assert_success("verify --allow-symlinks", &out);
    let out = model_signing(
        dir,
        &[
            "verify",
            "key",
            "--public_key",
            p(&public),
            "--signature",
            p(&model.join("model.sig")),
            "--allow_symlinks",
            p(&model),
        ],
    );
    assert_success("model_signing verify --allow_symlinks", &out);
}

/// blake2, blake3 and shards, signed here and verified here (model_signing's command line signs
/// only files with sha256).
#[test]
fn other_serializations_verify_and_name_what_changed() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let model = model_dir(dir);
    let (key, public) = key_pair(dir, "k", "secp384r1");
    for extra in [
        &["--hash", "blake2"][..],
        &["--hash", "blake3"],
        &["--shard-size", "1000"],
        &["--shard-size", "1000", "--hash", "blake2"],
    ] {
        let mut args = vec!["sign", p(&model), "--private-key", p(&key)];
        args.extend_from_slice(extra);
        assert_success("sign", &wi(dir, &args));
        assert_success(
            "verify",
            &wi(dir, &["verify", p(&model), "--public-key", p(&public)]),
        );
    }
    // A shard changed: the file is named once.
    let mut bytes = std::fs::read(model.join("weights.bin")).unwrap();
    bytes[2500] ^= 1;
    std::fs::write(model.join("weights.bin"), &bytes).unwrap();
    let out = wi(dir, &["verify", p(&model), "--public-key", p(&public)]);
    assert_eq!(code(&out), 1, "{}", combined(&out));
    assert_contains(
        &stdout(&out),
        &[
            "shards of 1000 bytes, blake2b",
            "changed since signed (1):\n    weights.bin\n",
        ],
    );
}

/// Through the real git and git-lfs: a model signed in a repository where its weights are LFS
/// files (their digests taken from the index's pointers, not read), cloned without its LFS
/// objects, verifies from the pointers alone, in the work tree and at a revision; model_signing
/// verifies the same signature on the smudged checkout.
#[test]
fn a_signed_lfs_model_verifies_in_a_clone_without_objects() {
    let repo = common::git::Repo::with_lfs(&["*.bin"]);
    let (key, public) = key_pair(repo.tmp.path(), "k", "prime256v1");
    // Settled: an index entry written within its file's timestamp is not trusted for its pointer.
    repo.write_settled("model/weights.bin", vec![5u8; 5000]);
    repo.write_settled("model/sub/more.bin", vec![6u8; 2000]);
    repo.write("model/config.json", "{}\n");
    repo.commit_all("model");
    let out = repo.wi(&["sign", "model", "--private-key", p(&key)]);
    assert_success("sign", &out);
    assert_contains(
        &stdout(&out),
        &["files: 3 (2 from their LFS pointers, not read)"],
    );
    repo.commit_all("signature");
    let out = model_signing(
        &repo.dir,
        &[
            "verify",
            "key",
            "--public_key",
            p(&public),
            "--signature",
            "model/model.sig",
            "model",
        ],
    );
    assert_success("model_signing verify on the smudged checkout", &out);

    let clone = repo.tmp.path().join("clone");
    let out = repo
        .git_cmd_in(repo.tmp.path(), &["clone", "-q", p(&repo.dir), p(&clone)])
        .env("GIT_LFS_SKIP_SMUDGE", "1")
        .output()
        .unwrap();
    assert_success("clone without LFS objects", &out);
    assert!(
        std::fs::read_to_string(clone.join("model/weights.bin"))
            .unwrap()
            .starts_with("version https://git-lfs")
    );
    let out = repo.wi_in(&clone, &["verify", "model", "--public-key", p(&public)]);
    assert_success("verify from pointers", &out);
    assert_contains(
        &stdout(&out),
        &["files: 3 signed (files, sha256), 2 verified from their LFS pointers"],
    );
    let out = repo.wi_in(
        &clone,
        &[
            "verify",
            "model",
            "--rev",
            "HEAD",
            "--public-key",
            p(&public),
        ],
    );
    assert_success("verify --rev HEAD", &out);
    // The commit before the signature has no model.sig; HEAD~ of a changed model fails.
    repo.write("model/weights.bin", vec![9u8; 5000]);
    repo.commit_all("retrained");
    let out = repo.wi(&[
        "verify",
        "model",
        "--rev",
        "HEAD",
        "--public-key",
        p(&public),
    ]);
    assert_eq!(code(&out), 1, "{}", combined(&out));
    assert_contains(
        &stdout(&out),
        &["changed since signed (1):\n    weights.bin"],
    );
    // With blake2 the pointer is not the digest: in the clone the file needs its object.
    let out = repo.wi(&[
        "sign",
        "model",
        "--private-key",
        p(&key),
        "--hash",
        "blake2",
    ]);
    assert_success("sign blake2", &out);
    repo.commit_all("blake2 signature");
    repo.git_cmd_in(&clone, &["pull", "-q"])
        .env("GIT_LFS_SKIP_SMUDGE", "1")
        .output()
        .unwrap();
    let out = repo.wi_in(&clone, &["verify", "model", "--public-key", p(&public)]);
    assert_eq!(code(&out), 1, "{}", combined(&out));
    assert_contains(
        &stdout(&out),
        &[
            "needs its object (only its LFS pointer is here) (2):\n    sub/more.bin\n    weights.bin",
        ],
    );
}

/// model-transparency's own signed test models (scripts/tests of sigstore/model-transparency,
/// v0.2.0 to v1.1.0, every way, vendored in `tests/fixtures/signatures/upstream/` with their
/// licence), verified with the arguments its test scripts use; each with one byte changed, a
/// file added or a file removed fails, naming the file. The keyless bundles verify offline
/// against the Sigstore public-good root embedded in the binary.
#[test]
fn model_transparency_test_models_verify() {
    let source = common::repo_root().join("tests/fixtures/signatures/upstream");
    let tmp = tempfile::tempdir().unwrap();
    let status = std::process::Command::new("cp")
        .args(["-r", p(&source), p(&tmp.path().join("t"))])
        .status()
        .unwrap();
    assert!(status.success());
    let dir = tmp.path().join("t");
    let keys = dir.join("keys/certificate");
    let ca = keys.join("ca-cert.pem");
    let public = keys.join("signing-key-pub.pem");
    let (mut seen, mut tampered) = (0, 0);
    for entry in std::fs::read_dir(&dir).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        let Some((version, way)) = name.split_once('-').filter(|(v, _)| v.starts_with('v')) else {
            continue;
        };
        seen += 1;
        let case = dir.join(&name);
        let sig = case.join("model.sig");
        // v0.3.1 and v1.0.0 key signatures sign the single file signme-1.
        let single = way == "elliptic-key" && (version == "v0.3.1" || version == "v1.0.0");
        let model = if single {
            case.join("signme-1")
        } else {
            case.clone()
        };
        let mut args: Vec<String> = vec![
            "verify".into(),
            p(&model).into(),
            "--signature".into(),
            p(&sig).into(),
        ];
        match way {
            "certificate" => args.extend(["--certificate-chain".into(), p(&ca).into()]),
            "elliptic-key" => args.extend(["--public-key".into(), p(&public).into()]),
            _ => args.extend([
                "--identity".into(),
                "stefanb@us.ibm.com".into(),
                "--identity-provider".into(),
                "https://sigstore.verify.ibm.com/oauth2".into(),
            ]),
        }
        if case.join("ignore-me").exists() {
            args.extend(["--ignore-paths".into(), p(&case.join("ignore-me")).into()]);
        }
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = wi(&dir, &argv);
        assert_success(&name, &out);
        // Tampering: one byte, a file added, a file removed.
        let file = case.join("signme-1");
        let original = std::fs::read(&file).unwrap();
        let mut changed = original.clone();
        changed[0] ^= 1;
        std::fs::write(&file, &changed).unwrap();
        let out = wi(&dir, &argv);
        assert_eq!(code(&out), 1, "{name} changed: {}", combined(&out));
        // A single-file model's one resource is named by the path it was verified at.
        let named = if single { p(&file) } else { "signme-1" };
        assert_contains(
            &stdout(&out),
            &[&format!("changed since signed (1):\n    {named}")],
        );
        std::fs::write(&file, &original).unwrap();
        if single {
            tampered += 1;
            continue;
        }
        std::fs::write(case.join("added"), b"x").unwrap();
        let out = wi(&dir, &argv);
        assert_eq!(code(&out), 1, "{name} added: {}", combined(&out));
        assert_contains(
            &stdout(&out),
            &["not covered by the signature (1):\n    added"],
        );
        std::fs::remove_file(case.join("added")).unwrap();
        std::fs::rename(&file, case.join("moved-away")).unwrap();
        let out = wi(&dir, &argv);
        assert_eq!(code(&out), 1, "{name} removed: {}", combined(&out));
        assert_contains(&stdout(&out), &["missing (1):\n    signme-1"]);
        std::fs::rename(case.join("moved-away"), &file).unwrap();
        tampered += 1;
        if way == "sigstore" {
            // Another identity, another issuer.
            let mut other = argv.clone();
            let i = other
                .iter()
                .position(|a| *a == "stefanb@us.ibm.com")
                .unwrap();
            other[i] = "someone@example.com";
            let out = wi(&dir, &other);
            assert_eq!(code(&out), 1, "{name}: {}", combined(&out));
            assert_contains(
                &stdout(&out),
                &["signed by stefanb@us.ibm.com, not someone@example.com"],
            );
            let mut other = argv.clone();
            other[i + 2] = "https://accounts.google.com";
            let out = wi(&dir, &other);
            assert_eq!(code(&out), 1, "{name}: {}", combined(&out));
            assert_contains(&stdout(&out), &["identity issued by"]);
        }
    }
    assert_eq!(
        (seen, tampered),
        (13, 13),
        "the thirteen signed test models of v0.2.0 to v1.1.0, each verified and tampered with"
    );
}

/// Sigstore keyless, offline, against a Sigstore instance of the test's own
/// (`tests/common/fake_sigstore.py`): the certificate chains to the trusted root at the log's
/// integrated time, the signed entry timestamp and the inclusion proof's checkpoint are the
/// log's, and the identity and issuer are the ones asked for; any other fails.
#[test]
fn keyless_signatures_verify_against_a_trusted_root() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let model = model_dir(dir);
    let script = common::repo_root().join("tests/common/fake_sigstore.py");
    let run = |args: &[&str]| {
        let out = std::process::Command::new(common::python())
            .arg(&script)
            .args(args)
            .output()
            .unwrap();
        assert_success("fake_sigstore.py", &out);
    };
    run(&[
        "certs",
        p(dir),
        "signer@example.com",
        "https://issuer.example",
    ]);
    let cert_sig = dir.join("cert.sig");
    let out = wi(
        dir,
        &[
            "sign",
            p(&model),
            "--private-key",
            p(&dir.join("leaf.key")),
            "--signing-certificate",
            p(&dir.join("leaf.pem")),
            "--signature",
            p(&cert_sig),
        ],
    );
    assert_success("sign", &out);
    let sig = model.join("model.sig");
    run(&["bundle", p(dir), p(&cert_sig), p(&sig)]);
    let root = dir.join("trusted_root.json");
    let verify = |identity: &str, issuer: &str, trust: &[&str]| {
        let mut args = vec![
            "verify",
            p(&model),
            "--identity",
            identity,
            "--identity-provider",
            issuer,
        ];
        args.extend_from_slice(trust);
        wi(dir, &args)
    };
    let out = verify(
        "signer@example.com",
        "https://issuer.example",
        &["--trust-root", p(&root)],
    );
    assert_success("keyless verify", &out);
    assert_contains(
        &stdout(&out),
        &[
            "signer: signer@example.com via https://issuer.example, logged at",
            "in https://log.test.invalid (entry 7, inclusion proof checked)",
        ],
    );
    let config = dir.join("trust_config.json");
    assert_success(
        "--trust-config",
        &verify(
            "signer@example.com",
            "https://issuer.example",
            &["--trust-config", p(&config)],
        ),
    );
    for (identity, issuer, trust, why) in [
        (
            "other@example.com",
            "https://issuer.example",
            p(&root),
            "signed by signer@example.com, not other@example.com",
        ),
        (
            "signer@example.com",
            "https://other.example",
            p(&root),
            "identity issued by \"https://issuer.example\"",
        ),
    ] {
        let out = verify(identity, issuer, &["--trust-root", trust]);
        assert_eq!(code(&out), 1, "{}", combined(&out));
        assert_contains(&stdout(&out), &[why]);
    }
    // The public-good root does not know this log.
    let out = verify("signer@example.com", "https://issuer.example", &[]);
    assert_eq!(code(&out), 1, "{}", combined(&out));
    assert_contains(
        &stdout(&out),
        &["is not in the embedded Sigstore public-good trusted root"],
    );
    // An integrated time the log did not sign.
    let mut bundle: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&sig).unwrap()).unwrap();
    let entry = &mut bundle["verificationMaterial"]["tlogEntries"][0];
    let t: u64 = entry["integratedTime"].as_str().unwrap().parse().unwrap();
    entry["integratedTime"] = (t - 60).to_string().into();
    std::fs::write(&sig, serde_json::to_vec(&bundle).unwrap()).unwrap();
    let out = verify(
        "signer@example.com",
        "https://issuer.example",
        &["--trust-root", p(&root)],
    );
    assert_eq!(code(&out), 1, "{}", combined(&out));
    assert_contains(
        &stdout(&out),
        &["the signed entry timestamp is not log https://log.test.invalid's signature"],
    );
}

/// `git diff` of a `model.sig` as `git install` routes it, through the textconv and git's
/// external driver: one line a resource, so a re-signed model shows the file whose digest
/// changed; a GPG `model.sig` is diffed as its text; `inspect` shows the same bundle.
#[test]
fn git_diff_of_a_signature_is_a_manifest_diff() {
    let repo = common::git::Repo::new();
    let (key, _) = key_pair(repo.tmp.path(), "k", "prime256v1");
    assert_success("git install", &repo.wi(&["git", "install"]));
    repo.write("model/a.bin", "one");
    repo.write("model/b.bin", "two");
    assert_success(
        "sign",
        &repo.wi(&["sign", "model", "--private-key", p(&key)]),
    );
    repo.commit_all("signed");
    repo.write("model/b.bin", "three");
    repo.write("model/c.bin", "four");
    assert_success(
        "sign",
        &repo.wi(&["sign", "model", "--private-key", p(&key)]),
    );
    use sha2::Digest;
    let line = |digest_of: &str, name: &str| {
        format!("{}  {name}", hex::encode(sha2::Sha256::digest(digest_of)))
    };
    // Through the textconv and through git's external driver, both set up by `git install`.
    for mode in ["--no-ext-diff", "--ext-diff"] {
        let diff = repo.ok(&["diff", mode, "--", "model/model.sig"]);
        assert_contains(
            &diff,
            &[
                &format!("-    {}", line("two", "b.bin")),
                &format!("+    {}", line("three", "b.bin")),
                &format!("+    {}", line("four", "c.bin")),
                "-  resources: 2",
                "+  resources: 3",
            ],
        );
        common::assert_lacks(&diff, &[&format!("-    {}", line("one", "a.bin"))]);
    }
    let driver = repo.ok(&["diff", "--ext-diff", "--", "model/model.sig"]);
    assert!(
        driver.starts_with("weight-inspect a/model/model.sig b/model/model.sig\n"),
        "{driver}"
    );
    // A `model.sig` that is a GPG signature, not an OMS bundle, is diffed as the text it is.
    repo.commit_all("re-signed");
    repo.write("other/model.sig", "-----BEGIN PGP SIGNATURE-----\none\n");
    repo.commit_all("a gpg signature");
    repo.write("other/model.sig", "-----BEGIN PGP SIGNATURE-----\ntwo\n");
    for mode in ["--no-ext-diff", "--ext-diff"] {
        let diff = repo.ok(&["diff", mode, "--", "other/model.sig"]);
        assert_contains(&diff, &["-one\n", "+two\n"]);
    }
    let out = repo.wi(&["inspect", "model/model.sig"]);
    assert_success("inspect", &out);
    assert_contains(
        &stdout(&out),
        &[
            "OMS model signature model/model.sig",
            "signer: key ",
            "serialization: files, sha256",
        ],
    );
    let json: serde_json::Value =
        serde_json::from_slice(&repo.wi(&["inspect", "model/model.sig", "--json"]).stdout).unwrap();
    assert_eq!(json["schema"], 1);
    assert_eq!(json["resources"].as_array().unwrap().len(), 3);
}

/// A safetensors model of one float32 tensor filled with `fill`.
fn weights(fill: f64) -> serde_json::Value {
    serde_json::json!({"kind": "safetensors",
                       "tensors": [{"name": "w", "dtype": "float32", "shape": [64, 64], "fill": fill}]})
}

/// The policy's `signature` key, through real git and git-lfs: `check` in the work tree, the
/// native hook on real commits, and `ci` between two commits. A model no signature covers, a
/// file changed since it was signed, a file the signature does not list and a signature by
/// another key are violations naming the file; a re-signed change passes.
#[test]
fn a_policy_signature_rule_gates_commits_and_ci() {
    let repo = common::git::Repo::with_lfs(&["*.safetensors"]);
    let (key, public) = key_pair(repo.tmp.path(), "publisher", "prime256v1");
    let (stranger, _) = key_pair(repo.tmp.path(), "stranger", "prime256v1");
    std::fs::create_dir_all(repo.path("keys")).unwrap();
    std::fs::copy(&public, repo.path("keys/publisher.pem")).unwrap();
    repo.write(
        ".weight-inspect.toml",
        "[[rules]]\npaths = [\"model/**\"]\nsignature = { public_key = \"keys/publisher.pem\" }\n",
    );
    repo.fixtures(serde_json::json!({"model/model.safetensors": weights(1.0)}));
    repo.write("model/config.json", "{\"hidden_size\": 64}\n");
    repo.commit_all("an unsigned model");

    let out = repo.wi(&["check"]);
    assert_eq!(code(&out), 1, "{}", combined(&out));
    assert_contains(
        &stdout(&out),
        &[
            "model/model.safetensors: signature: expected signed, as it is, in a model.sig by \
             the key in keys/publisher.pem; found unsigned: no model.sig in its folder or any \
             folder above",
            "model/config.json: signature:",
        ],
    );

    assert_success(
        "sign",
        &repo.wi(&["sign", "model", "--private-key", p(&key)]),
    );
    let out = repo.wi(&["check"]);
    assert_success("check of the signed model", &out);
    repo.commit_all("signed");
    let out = repo.wi(&["hook", "install"]);
    assert_success("hook install", &out);
    framework_config(&repo);

    // A weight changed and committed without a new signature: the hook refuses it.
    repo.fixtures(serde_json::json!({"model/model.safetensors": weights(2.0)}));
    repo.git(&["add", "model/model.safetensors"]);
    let out = repo.wi(&["check", "--staged"]);
    assert_eq!(code(&out), 1, "{}", combined(&out));
    assert_contains(
        &stdout(&out),
        &[
            "model/model.safetensors: signature: expected signed, as it is, in a model.sig by the \
           key in keys/publisher.pem; found changed since model/model.sig was signed (by key ",
        ],
    );
    assert!(!stdout(&out).contains("config.json"), "{}", stdout(&out));
    let framework = framework_run(&repo);
    assert_eq!(
        code(&framework),
        1,
        "pre-commit passed an unsigned change:\n{}",
        combined(&framework)
    );
    assert!(
        combined(&framework).contains("changed since model/model.sig was signed"),
        "{}",
        combined(&framework)
    );
    let refused = repo.try_git(&["commit", "-q", "-m", "unsigned change"]);
    assert!(!refused.status.success(), "{}", combined(&refused));

    // Re-signed: the same change passes the hook.
    assert_success(
        "re-sign",
        &repo.wi(&["sign", "model", "--private-key", p(&key)]),
    );
    repo.git(&["add", "model"]);
    assert_success(
        "check --staged of the re-signed change",
        &repo.wi(&["check", "--staged"]),
    );
    assert_success("pre-commit on the re-signed change", &framework_run(&repo));
    let committed = repo.try_git(&["commit", "-q", "-m", "re-signed change"]);
    assert!(committed.status.success(), "{}", combined(&committed));

    // A file the signature does not list.
    repo.write("model/extra.json", "{}\n");
    repo.git(&["add", "model/extra.json"]);
    let out = repo.wi(&["check", "--staged"]);
    assert_eq!(code(&out), 1, "{}", combined(&out));
    assert_contains(
        &stdout(&out),
        &[
            "model/extra.json: signature: expected signed, as it is, in a model.sig by the key in \
           keys/publisher.pem; found not covered by model/model.sig (signed by key ",
        ],
    );
    repo.git(&["rm", "-q", "--cached", "model/extra.json"]);
    std::fs::remove_file(repo.path("model/extra.json")).unwrap();

    // A signed file deleted without re-signing: the signature still lists it. `check
    // --staged` (the native hook) and `check` of the work tree refuse it.
    repo.git(&["rm", "-q", "model/config.json"]);
    let deleted = "model/model.sig: signature: expected signed, as it is, in a model.sig by the \
                   key in keys/publisher.pem; found model/config.json listed by model.sig but \
                   deleted (signed by key ";
    let out = repo.wi(&["check", "--staged"]);
    assert_eq!(code(&out), 1, "{}", combined(&out));
    assert_contains(&stdout(&out), &[deleted]);
    let out = repo.wi(&["check"]);
    assert_eq!(code(&out), 1, "{}", combined(&out));
    assert_contains(&stdout(&out), &[deleted]);
    let refused = repo.try_git(&["commit", "-q", "-m", "a signed file deleted"]);
    assert!(!refused.status.success(), "{}", combined(&refused));
    // Re-signed without it: the deletion passes.
    assert_success(
        "re-sign without config.json",
        &repo.wi(&["sign", "model", "--private-key", p(&key)]),
    );
    repo.git(&["add", "model"]);
    assert_success(
        "check --staged of the re-signed deletion",
        &repo.wi(&["check", "--staged"]),
    );
    repo.git(&["reset", "-q", "--hard"]);

    // Signed by someone else: the signature does not verify against the policy's key.
    assert_success(
        "sign with another key",
        &repo.wi(&["sign", "model", "--private-key", p(&stranger)]),
    );
    repo.git(&["add", "model/model.sig"]);
    let out = repo.wi(&["check", "--staged"]);
    assert_eq!(code(&out), 1, "{}", combined(&out));
    assert_contains(
        &stdout(&out),
        &["found model/model.sig does not verify: signed by another key"],
    );
    let framework = framework_run(&repo);
    assert_eq!(
        code(&framework),
        1,
        "pre-commit passed a signature by another key:\n{}",
        combined(&framework)
    );
    repo.git(&["reset", "-q", "--hard"]);

    // ci between the last commit and one that changes the weights without re-signing: the
    // violation is brought by the change.
    repo.fixtures(serde_json::json!({"model/model.safetensors": weights(3.0)}));
    repo.git(&[
        "commit",
        "-q",
        "--no-verify",
        "-am",
        "a change the hook would refuse",
    ]);
    let json = repo.tmp.path().join("ci.json");
    let out = repo.wi(&["ci", "--json", p(&json)]);
    let text = std::fs::read_to_string(&json)
        .unwrap_or_else(|e| panic!("ci --json: {e}\n{}", combined(&out)));
    let report: serde_json::Value = serde_json::from_str(&text).unwrap();
    let text = report.to_string();
    assert!(text.contains("\"rule\":\"signature\""), "{text}");
    assert!(
        text.contains("changed since model/model.sig was signed"),
        "{text}"
    );
    // The next commit re-signs it (it brings only model.sig): ci between the two finds the
    // head clean.
    assert_success(
        "re-sign",
        &repo.wi(&["sign", "model", "--private-key", p(&key)]),
    );
    repo.git(&["add", "model"]);
    repo.git(&["commit", "-q", "-m", "re-signed"]);
    let out = repo.wi(&["ci", "--json", p(&json)]);
    let text = std::fs::read_to_string(&json)
        .unwrap_or_else(|e| panic!("ci --json: {e}\n{}", combined(&out)));
    assert!(!text.contains("\"rule\": \"signature\""), "{text}");
    assert!(!text.contains("\"rule\":\"signature\""), "{text}");
    assert_eq!(code(&out), 0, "{}", combined(&out));
}

/// The pre-commit framework's configuration: this repository's `weight-inspect-system` hook
/// (`language: system`), which runs the binary under test.
fn framework_config(repo: &common::git::Repo) {
    let script = r#"
import sys, yaml
hooks = yaml.safe_load(open(sys.argv[1]))
hook = next(h for h in hooks if h["id"] == "weight-inspect-system")
config = {"repos": [{"repo": "local", "hooks": [hook]}]}
open(sys.argv[2], "w").write(yaml.safe_dump(config, sort_keys=False))
"#;
    let out = std::process::Command::new(common::python())
        .args(["-c", script])
        .arg(common::repo_root().join(".pre-commit-hooks.yaml"))
        .arg(repo.path(".pre-commit-config.yaml"))
        .output()
        .expect("python runs");
    assert_success("writing .pre-commit-config.yaml", &out);
}

/// `pre-commit run` on what is staged: what the framework's git hook does on `git commit`.
fn framework_run(repo: &common::git::Repo) -> std::process::Output {
    repo.command(common::python())
        .args(["-m", "pre_commit", "run", "--color", "never"])
        .env("PRE_COMMIT_HOME", repo.tmp.path().join("pre-commit-home"))
        .output()
        .expect("pre-commit runs")
}

/// One committed fixture of tests/fixtures/signatures: a model directory that one
/// model_signing release signed one way, and how to verify it (its args.json).
struct ReleaseFixture {
    /// `vVERSION/WAY`.
    name: String,
    dir: std::path::PathBuf,
    /// `--public-key signing-key.pub` or `--certificate-chain ca.pem`, relative to `dir`.
    trust: Vec<String>,
    /// The signer line verify must print.
    signer: String,
    files: u64,
}

fn release_fixtures() -> Vec<ReleaseFixture> {
    let root = common::repo_root().join("tests/fixtures/signatures");
    let mut found = Vec::new();
    let sorted = |dir: &Path| {
        let mut names: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_dir())
            .collect();
        names.sort();
        names
    };
    // `upstream/` holds model-transparency's own test models, not a release's fixtures.
    for version in sorted(&root)
        .into_iter()
        .filter(|d| !d.ends_with("upstream"))
    {
        for way in sorted(&version) {
            let args: serde_json::Value =
                serde_json::from_slice(&std::fs::read(way.join("args.json")).unwrap()).unwrap();
            let name = format!(
                "{}/{}",
                version.file_name().unwrap().to_str().unwrap(),
                way.file_name().unwrap().to_str().unwrap()
            );
            assert_eq!(
                format!(
                    "v{}/{}",
                    args["model_signing"].as_str().unwrap(),
                    args["way"].as_str().unwrap()
                ),
                name,
                "args.json names its own release and way"
            );
            found.push(ReleaseFixture {
                name,
                dir: way,
                trust: args["trust"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|a| a.as_str().unwrap().to_owned())
                    .collect(),
                signer: args["signer"].as_str().unwrap().to_owned(),
                files: args["files"].as_u64().unwrap(),
            });
        }
    }
    found
}

/// Bundles written by every model_signing release from 0.2.0 to 1.1.1 (the generator,
/// scripts/make_signature_fixtures.py, ran each release from PyPI; 0.2.0 through its library),
/// with a P-256 key, a P-384 key (0.2.0 signs it with SHA-256) and a certificate chain, verify
/// here with the trust the signer used, naming
/// the signer; another fixture's key or CA does not verify them; one byte changed, a file added
/// and a file removed each fail, naming the file.
#[test]
fn every_model_signing_release_verifies() {
    let fixtures = release_fixtures();
    let tmp = tempfile::tempdir().unwrap();
    let mut per_version = std::collections::BTreeMap::<String, usize>::new();
    for (i, fixture) in fixtures.iter().enumerate() {
        let name = &fixture.name;
        let case = tmp.path().join(name);
        std::fs::create_dir_all(case.parent().unwrap()).unwrap();
        let status = std::process::Command::new("cp")
            .args(["-r", p(&fixture.dir), p(&case)])
            .status()
            .unwrap();
        assert!(status.success());
        let verify = |trust: &[String]| {
            let mut args = vec!["verify", "model", "--signature", "model.sig"];
            args.extend(trust.iter().map(String::as_str));
            wi(&case, &args)
        };
        let out = verify(&fixture.trust);
        assert_success(name, &out);
        assert_contains(
            &stdout(&out),
            &[
                "verified: model (model.sig)",
                &format!("signer: {}", fixture.signer),
                &format!("files: {} signed (files, sha256)", fixture.files),
            ],
        );

        // The same way's trust from another release's fixture: another key, another CA.
        let other = fixtures
            .iter()
            .cycle()
            .skip(i + 1)
            .find(|f| f.trust[0] == fixture.trust[0] && f.name != *name)
            .expect("two fixtures of each way");
        let mut stranger = fixture.trust.clone();
        stranger[1] = p(&other.dir.join(&other.trust[1])).to_owned();
        let out = verify(&stranger);
        assert_eq!(
            code(&out),
            1,
            "{name} with {}'s trust: {}",
            other.name,
            combined(&out)
        );
        assert_contains(&stdout(&out), &["NOT verified"]);

        let model = case.join("model");
        let weights = model.join("weights.bin");
        let original = std::fs::read(&weights).unwrap();
        let mut changed = original.clone();
        changed[1000] ^= 0x40;
        std::fs::write(&weights, &changed).unwrap();
        let out = verify(&fixture.trust);
        assert_eq!(code(&out), 1, "{name} changed: {}", combined(&out));
        assert_contains(
            &stdout(&out),
            &["changed since signed (1):\n    weights.bin"],
        );
        std::fs::write(&weights, &original).unwrap();

        std::fs::write(model.join("sub/added.bin"), b"not signed").unwrap();
        let out = verify(&fixture.trust);
        assert_eq!(code(&out), 1, "{name} added: {}", combined(&out));
        assert_contains(
            &stdout(&out),
            &["not covered by the signature (1):\n    sub/added.bin"],
        );
        std::fs::remove_file(model.join("sub/added.bin")).unwrap();

        std::fs::remove_file(model.join("sub/vocab.txt")).unwrap();
        let out = verify(&fixture.trust);
        assert_eq!(code(&out), 1, "{name} removed: {}", combined(&out));
        assert_contains(&stdout(&out), &["missing (1):\n    sub/vocab.txt"]);

        let version = name.split('/').next().unwrap().to_owned();
        *per_version.entry(version).or_default() += 1;
    }
    // Every release, every way (a P-256 key, a P-384 key, a certificate chain), but 0.3.1's
    // certificate signer, which fails on every call.
    assert_eq!(
        per_version.into_iter().collect::<Vec<_>>(),
        [
            ("v0.2.0", 3),
            ("v0.3.1", 2),
            ("v1.0.0", 3),
            ("v1.0.1", 3),
            ("v1.1.0", 3),
            ("v1.1.1", 3),
        ]
        .map(|(v, n)| (v.to_owned(), n)),
        "fixtures verified per release"
    );
}
