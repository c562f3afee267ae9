//! A keyless signature's transparency-log entry (Rekor v1, a `dsse` 0.0.1 entry), checked
//! offline against the trusted root's log keys: the entry's body agrees with the bundle (the
//! payload's hash, the signature and the certificate), the signed entry timestamp (SET) is
//! the log's signature over the entry and its integrated time, and the inclusion proof leads
//! from the entry to a tree root that the log's signed checkpoint names.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::keys::{Hash, PublicKey};
use super::trust_root::{TrustedRoot, within};
use super::x509::Cert;
use crate::formats::oms::{Envelope, InclusionProof, TlogEntry};

/// What a verified entry establishes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LogProof {
    /// The log's base URL.
    pub log: String,
    pub log_index: u64,
    /// The integrated time, signed by the log (seconds since 1970).
    pub integrated_time: u64,
    /// Whether an inclusion proof with a signed checkpoint was checked too.
    pub inclusion_proof: bool,
}

/// Checks `entry` against `root`'s logs, the `envelope` and the signing certificate `leaf`.
pub(crate) fn verify_entry(
    entry: &TlogEntry,
    root: &TrustedRoot,
    envelope: &Envelope,
    leaf: &Cert,
) -> Result<LogProof, String> {
    let tlog = root
        .tlogs
        .iter()
        .find(|t| t.key_id == entry.log_id)
        .ok_or_else(|| {
            format!(
                "log {} is not in {}",
                hex::encode(&entry.log_id),
                root.source
            )
        })?;
    let key = tlog
        .key
        .as_ref()
        .map_err(|e| format!("log {}: {e}", tlog.base_url))?;
    check_body(entry, envelope, leaf)?;
    let (Some(set), Some(time)) = (&entry.signed_entry_timestamp, entry.integrated_time) else {
        return Err(
            "the entry has no signed entry timestamp and integrated time (a Rekor v2 entry, whose time comes from an \
             RFC 3161 timestamp this tool does not verify)"
                .to_owned(),
        );
    };
    let time = u64::try_from(time).map_err(|_| "a negative integrated time".to_owned())?;
    if !key.verify(&set_payload(entry, time), set, Hash::Sha256) {
        return Err(format!(
            "the signed entry timestamp is not log {}'s signature",
            tlog.base_url
        ));
    }
    if !within(time, tlog.valid_from, tlog.valid_until) {
        return Err(format!(
            "log {}'s key was not valid at the integrated time",
            tlog.base_url
        ));
    }
    let inclusion_proof = match &entry.inclusion_proof {
        Some(proof) => {
            check_inclusion(proof, &entry.body)?;
            check_checkpoint(proof, key, &entry.log_id)?;
            true
        }
        None => false,
    };
    Ok(LogProof {
        log: tlog.base_url.clone(),
        log_index: entry.log_index,
        integrated_time: time,
        inclusion_proof,
    })
}

/// The body must be a dsse 0.0.1 entry of this envelope: the payload's SHA-256, and the one
/// signature with the signing certificate as its verifier.
fn check_body(entry: &TlogEntry, envelope: &Envelope, leaf: &Cert) -> Result<(), String> {
    if entry.kind != "dsse" || entry.version != "0.0.1" {
        return Err(format!(
            "a {} {} log entry; a DSSE signature is checked against dsse 0.0.1 entries",
            entry.kind, entry.version
        ));
    }
    let body: Value = serde_json::from_slice(&entry.body)
        .map_err(|e| format!("the log entry's body is not JSON ({e})"))?;
    let spec = &body["spec"];
    let hash = &spec["payloadHash"];
    if hash["algorithm"] != "sha256"
        || hash["value"].as_str() != Some(&crate::digest::sha256_hex(&envelope.payload))
    {
        return Err(
            "the log entry's payload hash is not the SHA-256 of the bundle's payload".to_owned(),
        );
    }
    let signatures = spec["signatures"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let [signature] = signatures else {
        return Err(format!(
            "the log entry holds {} signatures, the bundle one",
            signatures.len()
        ));
    };
    let sig = signature["signature"]
        .as_str()
        .and_then(|s| STANDARD.decode(s).ok());
    if sig.as_deref() != Some(envelope.signature.as_slice()) {
        return Err("the log entry's signature is not the bundle's".to_owned());
    }
    let verifier = signature["verifier"]
        .as_str()
        .and_then(|s| STANDARD.decode(s).ok())
        .and_then(|pem| Cert::from_pem_chain(&pem).ok())
        .and_then(|mut certs| certs.pop());
    if verifier.is_none_or(|c| c.der != leaf.der) {
        return Err("the log entry's verifier is not the bundle's signing certificate".to_owned());
    }
    Ok(())
}

/// The SET signs the RFC 8785 canonical JSON of these four keys (in this, their sorted order).
#[derive(Serialize)]
struct SetPayload {
    body: String,
    #[serde(rename = "integratedTime")]
    integrated_time: u64,
    #[serde(rename = "logID")]
    log_id: String,
    #[serde(rename = "logIndex")]
    log_index: u64,
}

fn set_payload(entry: &TlogEntry, time: u64) -> Vec<u8> {
    serde_json::to_vec(&SetPayload {
        body: STANDARD.encode(&entry.body),
        integrated_time: time,
        log_id: hex::encode(&entry.log_id),
        log_index: entry.log_index,
    })
    .expect("plain values serialize")
}

fn node(left: &[u8], right: &[u8]) -> Vec<u8> {
    let mut h = Sha256::new();
    h.update([1u8]);
    h.update(left);
    h.update(right);
    h.finalize().to_vec()
}

/// RFC 9162 §2.1.3.2: from the leaf up the proof's hashes to the root.
fn check_inclusion(proof: &InclusionProof, body: &[u8]) -> Result<(), String> {
    let (index, size) = (proof.log_index, proof.tree_size);
    if index >= size {
        return Err(format!(
            "inclusion proof: index {index} is not inside a tree of {size}"
        ));
    }
    let inner = (64 - (index ^ (size - 1)).leading_zeros()) as usize;
    let border = (index >> inner).count_ones() as usize;
    if proof.hashes.len() != inner + border {
        return Err(format!(
            "inclusion proof: {} hashes, a tree of {size} needs {}",
            proof.hashes.len(),
            inner + border
        ));
    }
    let mut hash = {
        let mut h = Sha256::new();
        h.update([0u8]);
        h.update(body);
        h.finalize().to_vec()
    };
    for (i, sibling) in proof.hashes[..inner].iter().enumerate() {
        hash = if (index >> i) & 1 == 0 {
            node(&hash, sibling)
        } else {
            node(sibling, &hash)
        };
    }
    for sibling in &proof.hashes[inner..] {
        hash = node(sibling, &hash);
    }
    if hash != proof.root_hash {
        return Err("inclusion proof: the entry does not hash to the proof's root".to_owned());
    }
    Ok(())
}

/// The checkpoint is a signed note: `origin\nsize\nbase64(root)\n[other lines]\n\n— name
/// base64(key hint ‖ signature)\n`; the log's signature covers the text up to the blank line.
fn check_checkpoint(proof: &InclusionProof, key: &PublicKey, log_id: &[u8]) -> Result<(), String> {
    let note = proof
        .checkpoint
        .as_deref()
        .ok_or("inclusion proof: no checkpoint")?;
    let split = note
        .find("\n\n")
        .ok_or("checkpoint: no blank line before its signatures")?;
    if note[split + 2..].contains("\n\n") {
        return Err("checkpoint: more than one blank line".to_owned());
    }
    let text = &note[..=split];
    let mut lines = text.lines();
    let (_origin, size, root) = (lines.next(), lines.next(), lines.next());
    let size: Option<u64> = size.and_then(|s| s.parse().ok());
    let root = root.and_then(|r| STANDARD.decode(r).ok());
    if size != Some(proof.tree_size) || root.as_deref() != Some(proof.root_hash.as_slice()) {
        return Err("checkpoint: its tree size and root are not the inclusion proof's".to_owned());
    }
    let signed = note[split + 2..].lines().filter_map(|line| {
        let rest = line.strip_prefix("\u{2014} ")?;
        let (_, sig) = rest.split_once(' ')?;
        STANDARD.decode(sig).ok()
    });
    for sig in signed {
        if sig.len() > 4 && sig[..4] == log_id[..4.min(log_id.len())] {
            return if key.verify(text.as_bytes(), &sig[4..], Hash::Sha256) {
                Ok(())
            } else {
                Err("checkpoint: the log's signature does not verify".to_owned())
            };
        }
    }
    Err("checkpoint: no signature by the entry's log".to_owned())
}
