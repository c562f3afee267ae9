//! What `verify`, `sign` and `inspect model.sig` print: text, and JSON of schema 1.

use std::fmt::Write;

use serde::Serialize;

use super::sign::Signed;
use super::trust::{Signer, claimed_signer};
use super::verify::{Verdict, describe_serialization};
use crate::escape::{shown, shown_path};
use crate::formats::oms::Signature;
use crate::render::Palette;
use crate::render::report::Report;

/// `verify`'s report.
pub(crate) struct VerifyReport<'a>(pub &'a Verdict);

/// One list of files; a single-file model's one resource, named `.` in the signature, is
/// shown by the path it was verified at.
fn list_line(out: &mut String, label: &str, names: &[String], model: &str) {
    if names.is_empty() {
        return;
    }
    let _ = writeln!(out, "  {label} ({}):", names.len());
    for name in names {
        if name == "." {
            let _ = writeln!(out, "    {model}");
        } else {
            let _ = writeln!(out, "    {}", shown(name));
        }
    }
}

impl Report for VerifyReport<'_> {
    fn text(&self, palette: &Palette) -> String {
        let v = self.0;
        let mut out = String::new();
        if v.verified() {
            let _ = writeln!(
                out,
                "{} {} ({})",
                palette.added("verified:"),
                v.model,
                v.signature
            );
        } else {
            let _ = writeln!(
                out,
                "{} {} ({})",
                palette.removed("NOT verified:"),
                v.model,
                v.signature
            );
        }
        match &v.signer {
            Ok(signer) => {
                let _ = writeln!(out, "  signer: {}", signer.describe());
            }
            Err(reason) => {
                let _ = writeln!(
                    out,
                    "  signer: {} ({})",
                    v.claimed,
                    palette.removed("not verified")
                );
                let _ = writeln!(out, "  why: {reason}");
            }
        }
        let pointers = if v.from_pointers > 0 {
            format!(", {} verified from their LFS pointers", v.from_pointers)
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "  files: {} signed ({}){pointers}",
            v.resources, v.serialization
        );
        let model = &v.model;
        list_line(&mut out, "changed since signed", &v.changed, model);
        list_line(&mut out, "missing", &v.missing, model);
        list_line(
            &mut out,
            "not covered by the signature",
            &v.not_covered,
            model,
        );
        list_line(
            &mut out,
            "needs its object (only its LFS pointer is here)",
            &v.needs_object,
            model,
        );
        for r in &v.refused {
            let _ = writeln!(out, "  refused: {}: {}", shown(&r.name), r.reason);
        }
        out
    }

    fn json(&self) -> String {
        #[derive(Serialize)]
        struct Refused<'a> {
            path: &'a str,
            reason: &'a str,
        }
        #[derive(Serialize)]
        struct Json<'a> {
            schema: u32,
            verified: bool,
            model: &'a str,
            signature: &'a str,
            predicate_type: &'a str,
            serialization: &'a str,
            signer: Option<SignerJson>,
            claimed_signer: &'a str,
            refusal: Option<&'a str>,
            resources: usize,
            from_pointers: usize,
            changed: &'a [String],
            missing: &'a [String],
            not_covered: &'a [String],
            needs_object: &'a [String],
            refused: Vec<Refused<'a>>,
        }
        let v = self.0;
        let json = Json {
            schema: crate::identity::SCHEMA_VERSION,
            verified: v.verified(),
            model: &v.model,
            signature: &v.signature,
            predicate_type: v.predicate_type,
            serialization: &v.serialization,
            signer: v.signer.as_ref().ok().map(signer_json),
            claimed_signer: &v.claimed,
            refusal: v.signer.as_ref().err().map(String::as_str),
            resources: v.resources,
            from_pointers: v.from_pointers,
            changed: &v.changed,
            missing: &v.missing,
            not_covered: &v.not_covered,
            needs_object: &v.needs_object,
            refused: v
                .refused
                .iter()
                .map(|r| Refused {
                    path: &r.name,
                    reason: r.reason,
                })
                .collect(),
        };
        let mut s = serde_json::to_string_pretty(&json).expect("plain values serialize");
        s.push('\n');
        s
    }
}

#[derive(Serialize)]
struct SignerJson {
    kind: &'static str,
    description: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    key_hint: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    subject: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    fingerprint: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    identities: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    issuer: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    log_time: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    log_index: Option<u64>,
}

fn signer_json(signer: &Signer) -> SignerJson {
    let mut json = SignerJson {
        kind: "key",
        description: signer.describe(),
        key_hint: None,
        subject: None,
        fingerprint: None,
        identities: None,
        issuer: None,
        log_time: None,
        log_index: None,
    };
    match signer {
        Signer::Key { hint, .. } => json.key_hint = Some(hint.clone()),
        Signer::Certificate {
            subject,
            issuer,
            fingerprint,
            ..
        } => {
            json.kind = "certificate";
            json.subject = Some(subject.clone());
            json.issuer = Some(issuer.clone());
            json.fingerprint = Some(fingerprint.clone());
        }
        Signer::Keyless {
            identities,
            issuer,
            log,
        } => {
            json.kind = "keyless";
            json.identities = Some(identities.clone());
            json.issuer = Some(issuer.clone());
            json.log_time = Some(super::x509::rfc3339(log.integrated_time));
            json.log_index = Some(log.log_index);
        }
    }
    json
}

/// `sign`'s report.
pub(crate) struct SignReport<'a>(pub &'a Signed);

impl Report for SignReport<'_> {
    fn text(&self, palette: &Palette) -> String {
        let s = self.0;
        let pointers = if s.from_pointers > 0 {
            format!(" ({} from their LFS pointers, not read)", s.from_pointers)
        } else {
            String::new()
        };
        format!(
            "{} {}\n  signer: {}\n  files: {}{pointers}\n",
            palette.added("signed:"),
            shown_path(&s.signature),
            s.signer,
            s.files
        )
    }

    fn json(&self) -> String {
        let s = self.0;
        let json = serde_json::json!({
            "schema": crate::identity::SCHEMA_VERSION,
            "signature": shown_path(&s.signature).to_string(),
            "signer": s.signer,
            "files": s.files,
            "resources": s.resources,
            "from_pointers": s.from_pointers,
        });
        let mut out = serde_json::to_string_pretty(&json).expect("plain values serialize");
        out.push('\n');
        out
    }
}

/// `inspect model.sig`: the bundle, unverified.
pub(crate) struct BundleReport<'a> {
    pub path: &'a std::path::Path,
    pub signature: &'a Signature,
}

impl Report for BundleReport<'_> {
    fn text(&self, _palette: &Palette) -> String {
        describe(self.signature, &shown_path(self.path).to_string(), true)
    }

    fn json(&self) -> String {
        let sig = self.signature;
        let m = &sig.manifest;
        let resources: Vec<_> = m
            .resources
            .iter()
            .map(|r| serde_json::json!({"name": r.key.name(), "digest": hex::encode(&r.digest)}))
            .collect();
        let json = serde_json::json!({
            "schema": crate::identity::SCHEMA_VERSION,
            "format": "oms",
            "file": shown_path(self.path).to_string(),
            "media_type": sig.bundle.media_type,
            "predicate_type": m.predicate_type,
            "model_name": m.model_name,
            "signer": claimed_signer(&sig.bundle),
            "log_entries": sig.bundle.tlog_entries.len(),
            "log_time": sig.bundle.tlog_entries.first().and_then(|e| e.integrated_time).map(|t| super::x509::rfc3339(t.max(0) as u64)),
            "serialization": describe_serialization(m),
            "ignore_paths": m.serialization.ignore_paths,
            "allow_symlinks": m.serialization.allow_symlinks,
            "resources": resources,
        });
        let mut out = serde_json::to_string_pretty(&json).expect("plain values serialize");
        out.push('\n');
        out
    }
}

/// The bundle in lines: what `inspect` prints and what the textconv shows `git diff`
/// (`with_digests`: each resource's digest beside its name, so a changed file is a changed line).
pub(crate) fn describe(sig: &Signature, name: &str, with_digests: bool) -> String {
    let m = &sig.manifest;
    let mut out = String::new();
    if name.is_empty() {
        let _ = writeln!(out, "OMS model signature");
    } else {
        let _ = writeln!(out, "OMS model signature {name}");
    }
    let _ = writeln!(out, "  predicate: {}", m.predicate_type);
    let _ = writeln!(out, "  model: {}", shown(&m.model_name));
    let _ = writeln!(
        out,
        "  signer: {} (unverified)",
        claimed_signer(&sig.bundle)
    );
    if let Some(t) = sig
        .bundle
        .tlog_entries
        .first()
        .and_then(|e| e.integrated_time)
    {
        let _ = writeln!(out, "  logged: {}", super::x509::rfc3339(t.max(0) as u64));
    }
    let _ = writeln!(out, "  serialization: {}", describe_serialization(m));
    if !m.serialization.ignore_paths.is_empty() {
        let mut ignored = m.serialization.ignore_paths.clone();
        ignored.sort();
        let shown_list: Vec<String> = ignored.iter().map(|p| shown(p).into_owned()).collect();
        let _ = writeln!(out, "  ignored: {}", shown_list.join(", "));
    }
    let _ = writeln!(out, "  resources: {}", m.resources.len());
    let mut resources: Vec<_> = m.resources.iter().collect();
    resources.sort_by(|a, b| crate::formats::oms::manifest_order(&a.key, &b.key));
    for r in resources {
        if with_digests {
            let _ = writeln!(
                out,
                "    {}  {}",
                hex::encode(&r.digest),
                shown(&r.key.name())
            );
        } else {
            let _ = writeln!(out, "    {}", shown(&r.key.name()));
        }
    }
    out
}
