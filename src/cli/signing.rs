//! `verify` and `sign`: OpenSSF model signatures (OMS `model.sig`).

use std::path::PathBuf;

use crate::formats::oms::HashAlgorithm;
use crate::output::{ColorChoice, Exit, Format, Output};
use crate::signing::{
    self, ListOptions, SignReport, SignRequest, Trust, VerifyReport, VerifyRequest,
};

use super::error::Result;

const VERIFY_ABOUT: &str = "\
Trust is one of: --public-key (the signer's key), --certificate-chain (the CA certificates the \
signing certificate must chain to, valid now), or --identity with --identity-provider (Sigstore \
keyless: the Fulcio certificate must chain to the trusted root at the time Rekor logged it, the \
log's signed entry timestamp and inclusion proof must verify, and the certificate must name \
that identity and OIDC issuer). Everything is checked offline.

Keyless verification uses --trust-root (a trusted_root.json) or --trust-config (a \
ClientTrustConfig), else the Sigstore public-good trusted root embedded in this binary: the one \
shipped with the sigstore Python package 4.5.1 (its newest keys valid from 2025-07-04). When \
Sigstore rotates its keys, pass a newer trusted_root.json with --trust-root (the sigstore \
Python package keeps it under sigstore/_store/; `cosign trusted-root` and sigstore's TUF \
repository publish it).

Inside a git repository an LFS pointer stands for its object: with the files serialization and \
sha256 its oid is the file's digest, so a clone made with GIT_LFS_SKIP_SMUDGE=1 verifies; a \
smudged file is hashed. Exit status: 0 verified, 1 not verified, 2 the signature or the model \
could not be read.";

#[derive(Debug, clap::Args)]
#[command(after_long_help = VERIFY_ABOUT)]
pub(crate) struct VerifyArgs {
    /// The model directory (or single model file).
    #[arg(default_value = ".")]
    pub model: PathBuf,
    /// The signature file (default: MODEL/model.sig; with --rev, REV:MODEL/model.sig).
    #[arg(long, value_name = "PATH")]
    pub signature: Option<PathBuf>,
    /// Trust this public key (PEM; ECDSA P-256, P-384 or P-521).
    #[arg(long, value_name = "PEM", group = "trust")]
    pub public_key: Option<PathBuf>,
    /// Trust these CA certificates (PEM files, each may hold several); the signing certificate
    /// must chain to one of them.
    #[arg(long, value_name = "PEM", num_args = 1.., group = "trust")]
    pub certificate_chain: Vec<PathBuf>,
    /// Sigstore keyless: the identity the certificate must name (an email or a workflow URI).
    #[arg(
        long,
        value_name = "ID",
        group = "trust",
        requires = "identity_provider"
    )]
    pub identity: Option<String>,
    /// Sigstore keyless: the OIDC issuer that must have vouched for the identity.
    #[arg(long, value_name = "URL", requires = "identity")]
    pub identity_provider: Option<String>,
    /// Sigstore keyless: a ClientTrustConfig JSON (model_signing's --trust_config).
    #[arg(
        long,
        value_name = "JSON",
        requires = "identity",
        conflicts_with = "trust_root"
    )]
    pub trust_config: Option<PathBuf>,
    /// Sigstore keyless: a trusted_root.json (default: the embedded public-good root).
    #[arg(long, value_name = "JSON", requires = "identity")]
    pub trust_root: Option<PathBuf>,
    /// Verify what this revision holds (LFS pointers and blobs, through git) rather than the
    /// work tree.
    #[arg(long, value_name = "REV")]
    pub rev: Option<String>,
    #[command(flatten)]
    pub listing: ListingArgs,
    /// Look only at the files the signature lists (others are not reported as not covered).
    #[arg(long)]
    pub ignore_unsigned_files: bool,
    /// Machine-readable output (schema 1).
    #[arg(long)]
    pub json: bool,
}

/// The options model_signing's command line shares between sign and verify.
#[derive(Debug, clap::Args)]
pub(crate) struct ListingArgs {
    /// Paths to leave out (relative to the current directory, as model_signing takes them).
    #[arg(long, value_name = "PATH", num_args = 1..)]
    pub ignore_paths: Vec<PathBuf>,
    /// Include .git, .gitattributes, .github and .gitignore (ignored by default).
    #[arg(long)]
    pub no_ignore_git_paths: bool,
    /// Follow symbolic links to files (refused by default).
    #[arg(long)]
    pub allow_symlinks: bool,
}

const SIGN_ABOUT: &str = "\
Writes an OMS v1.0 signature (a Sigstore bundle v0.3 holding a DSSE envelope over an in-toto \
statement), as model_signing 1.1 writes it, so `model_signing verify key` or `verify \
certificate` accepts it. Files are hashed in parallel; inside a git repository a file that is an \
LFS pointer, or a smudged LFS file that git's index says is unchanged since it was added (its \
stat data matches the index and is not racy), is not read: its pointer's oid is its SHA-256.

Sigstore keyless signing needs Fulcio and Rekor on the network and an OIDC login; this tool \
does not offer it (use `model_signing sign sigstore`; `weight-inspect verify --identity` checks \
the result offline).";

#[derive(Debug, clap::Args)]
#[command(after_long_help = SIGN_ABOUT)]
pub(crate) struct SignArgs {
    /// The model directory (or single model file).
    pub model: PathBuf,
    /// The signature file to write (default: MODEL/model.sig).
    #[arg(long, value_name = "PATH")]
    pub signature: Option<PathBuf>,
    /// The private key (PEM, PKCS #8 or SEC1; ECDSA P-256, P-384 or P-521).
    #[arg(long, value_name = "PEM")]
    pub private_key: PathBuf,
    /// The certificate of the private key's public key (PEM): sign the certificate way.
    #[arg(long, value_name = "PEM")]
    pub signing_certificate: Option<PathBuf>,
    /// The rest of the signing certificate's chain (PEM files), recorded in the bundle.
    #[arg(long, value_name = "PEM", num_args = 1.., requires = "signing_certificate")]
    pub certificate_chain: Vec<PathBuf>,
    #[command(flatten)]
    pub listing: ListingArgs,
    /// The hash of each file or shard.
    #[arg(long, value_enum, default_value_t = HashChoice::Sha256)]
    pub hash: HashChoice,
    /// Sign shards of this many bytes (the shards serialization) rather than whole files.
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1..))]
    pub shard_size: Option<u64>,
    /// Machine-readable output (schema 1).
    #[arg(long)]
    pub json: bool,
}

/// `sign --hash`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum HashChoice {
    Sha256,
    Blake2,
    Blake3,
}

pub(super) fn verify(args: VerifyArgs, color: ColorChoice) -> Result<Exit> {
    let trust = if let Some(key) = &args.public_key {
        Trust::public_key(key)?
    } else if !args.certificate_chain.is_empty() {
        Trust::certificates(&args.certificate_chain)?
    } else if let (Some(identity), Some(issuer)) = (args.identity, args.identity_provider) {
        Trust::keyless(
            identity,
            issuer,
            args.trust_root.as_deref().or(args.trust_config.as_deref()),
        )?
    } else {
        return Err(crate::signing::SigningError::Model {
            path: args.model,
            message: "say whom to trust: --public-key, --certificate-chain, or --identity with \
                      --identity-provider"
                .to_owned(),
        }
        .into());
    };
    let request = VerifyRequest {
        model: &args.model,
        signature: args.signature.as_deref(),
        rev: args.rev.as_deref(),
        trust: &trust,
        options: ListOptions {
            ignore_paths: &args.listing.ignore_paths,
            ignore_git_paths: !args.listing.no_ignore_git_paths,
            allow_symlinks: args.listing.allow_symlinks,
            ignore_unsigned_files: args.ignore_unsigned_files,
        },
    };
    let verdict = signing::verify(&request)?;
    Output::new(Format::json_if(args.json), color).print(&VerifyReport(&verdict))?;
    Ok(Exit::found_if(!verdict.verified()))
}

pub(super) fn sign(args: SignArgs, color: ColorChoice) -> Result<Exit> {
    let key = signing::private_key(&args.private_key)?;
    let certificates = match &args.signing_certificate {
        Some(cert) => Some(signing::certificate_material(
            &key,
            cert,
            &args.certificate_chain,
        )?),
        None => None,
    };
    let request = SignRequest {
        model: &args.model,
        signature: args.signature.as_deref(),
        key: &key,
        certificates,
        ignore_paths: &args.listing.ignore_paths,
        ignore_git_paths: !args.listing.no_ignore_git_paths,
        allow_symlinks: args.listing.allow_symlinks,
        hash: match args.hash {
            HashChoice::Sha256 => HashAlgorithm::Sha256,
            HashChoice::Blake2 => HashAlgorithm::Blake2b,
            HashChoice::Blake3 => HashAlgorithm::Blake3,
        },
        shard_size: args.shard_size,
    };
    let signed = signing::sign(&request)?;
    Output::new(Format::json_if(args.json), color).print(&SignReport(&signed))?;
    Ok(Exit::Clean)
}

/// `inspect model.sig`: an existing file that looks like a Sigstore bundle is shown as an OMS
/// signature (None for anything else, which `inspect` reads as a model).
pub(super) fn inspect_signature(file: &str, output: Output) -> Result<Option<Exit>> {
    let path = std::path::Path::new(file);
    if !path.is_file() || !looks_like_signature(path) {
        return Ok(None);
    }
    let signature = signing::read_signature_file(path)?;
    output.print(&signing::BundleReport {
        path,
        signature: &signature,
    })?;
    Ok(Some(Exit::Clean))
}

fn looks_like_signature(path: &std::path::Path) -> bool {
    use std::io::Read;
    let mut head = Vec::with_capacity(4096);
    std::fs::File::open(path)
        .and_then(|f| f.take(4096).read_to_end(&mut head))
        .is_ok_and(|_| crate::formats::oms::looks_like_bundle(&head))
}

/// The largest `model.sig` that is no OMS bundle diffed as text by the driver; a larger one
/// goes to the model driver, which names what it is.
const MAX_PLAIN_SIGNATURE: u64 = 1 << 20;

/// git's external diff of a `model.sig` (`path old-file old-hex old-mode new-file …`): the
/// unified diff of the two sides' textconv, `/dev/null` for a side that is not there. None when
/// the path is another file, or a side is neither an OMS bundle nor text.
pub(super) fn signature_diff(args: &[std::ffi::OsString]) -> Option<String> {
    let (path, old, new) = match args {
        [path, old, _, _, new, _, _, ..] => (path, old, new),
        _ => return None,
    };
    let name = std::path::Path::new(path).file_name()?;
    if name != "model.sig" {
        return None;
    }
    // A side that is no OMS bundle (a GPG signature) is diffed as the text it is.
    let side = |file: &std::ffi::OsString| -> Option<String> {
        if file == "/dev/null" {
            return Some(String::new());
        }
        let file = std::path::Path::new(file);
        textconv_signature(file).or_else(|| {
            let bytes = crate::fsutil::read_regular(file, MAX_PLAIN_SIGNATURE, false).ok()?;
            String::from_utf8(bytes).ok()
        })
    };
    let (old_text, new_text) = (side(old)?, side(new)?);
    let shown = crate::escape::shown(&path.to_string_lossy()).into_owned();
    let name_of = |file: &std::ffi::OsString, prefix: &str| {
        if file == "/dev/null" {
            "/dev/null".to_owned()
        } else {
            format!("{prefix}/{shown}")
        }
    };
    let hunks = similar::TextDiff::from_lines(&old_text, &new_text)
        .unified_diff()
        .to_string();
    Some(format!(
        "weight-inspect {} {}\n{hunks}",
        name_of(old, "a"),
        name_of(new, "b")
    ))
}

/// The textconv of an OMS signature (`model.sig`): its manifest in lines, one resource with its
/// digest a line, so `git diff` shows the signer, the serialization, and the files added,
/// removed or whose digest changed. None for any other file (a GPG `.sig` is left to git).
pub(super) fn textconv_signature(file: &std::path::Path) -> Option<String> {
    if !file.is_file() || !looks_like_signature(file) {
        return None;
    }
    let signature = signing::read_signature_file(file).ok()?;
    Some(signing::describe_bundle(&signature, "", true))
}
