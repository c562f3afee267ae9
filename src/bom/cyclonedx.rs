//! The CycloneDX 1.6 JSON document: one `machine-learning-model` component per model, its
//! files as `file` components, its ancestors under `pedigree.ancestors`.

use serde_json::{Map, Value, json};

use super::card::{License, card};
use super::types::{Ancestor, Described, ModelFile, Options};
use crate::artifact::Artifact;

/// Our properties' namespace (CycloneDX's property taxonomy: a tool's own prefix).
const NS: &str = "weight-inspect";

fn property(name: &str, value: impl ToString) -> Value {
    json!({ "name": name, "value": value.to_string() })
}

fn hashes(file: &ModelFile) -> Option<Value> {
    let sha = file.sha256.as_ref()?;
    Some(json!([{ "alg": "SHA-256", "content": sha }]))
}

fn file_component(file: &ModelFile, bom_ref: String) -> Value {
    let mut c = Map::new();
    c.insert("type".into(), "file".into());
    c.insert("bom-ref".into(), bom_ref.into());
    c.insert("name".into(), file.path.clone().into());
    if let Some(h) = hashes(file) {
        c.insert("hashes".into(), h);
    }
    let source = if file.from_lfs_pointer {
        "lfs-pointer-oid"
    } else if file.sha256.is_some() {
        "file-bytes"
    } else {
        "not-hashed"
    };
    c.insert(
        "properties".into(),
        json!([
            property(&format!("{NS}:hash_source"), source),
            property(&format!("{NS}:size"), file.size),
        ]),
    );
    Value::Object(c)
}

/// The properties every model component carries: format, structural hash, parameters by
/// dtype.
fn model_properties(artifact: &Artifact) -> Vec<Value> {
    let (total, by_dtype) = artifact.parameter_counts();
    let mut out = vec![
        property(&format!("{NS}:format"), artifact.format.name()),
        property(&format!("{NS}:parameters"), total),
    ];
    for (dtype, count) in by_dtype {
        out.push(property(&format!("{NS}:parameters:{dtype}"), count));
    }
    out.push(property(
        &format!("{NS}:structural_hash"),
        crate::identity::structural_hash(artifact),
    ));
    out.push(property(&format!("{NS}:tensors"), artifact.tensors.len()));
    out
}

/// The last component of a model's name, as the component's name.
fn short_name(name: &str) -> String {
    let trimmed = name.trim_end_matches('/');
    let tail = trimmed.rsplit(['/', ':']).next().unwrap_or(trimmed);
    if tail.is_empty() {
        name.to_owned()
    } else {
        tail.to_owned()
    }
}

fn files_into(c: &mut Map<String, Value>, files: &[ModelFile], bom_ref: &str) {
    if let [one] = files
        && let Some(h) = hashes(one)
    {
        c.insert("hashes".into(), h);
    }
    if !files.is_empty() {
        let parts: Vec<Value> = files
            .iter()
            .enumerate()
            .map(|(i, f)| file_component(f, format!("{bom_ref}/file-{}", i + 1)))
            .collect();
        c.insert("components".into(), Value::Array(parts));
    }
}

fn ancestor_component(ancestor: &Ancestor<'_>, bom_ref: String) -> Value {
    let mut c = Map::new();
    c.insert("type".into(), "machine-learning-model".into());
    c.insert("bom-ref".into(), bom_ref.clone().into());
    c.insert("name".into(), short_name(&ancestor.name).into());
    let mut properties = ancestor.artifact.map(model_properties).unwrap_or_default();
    properties.push(property(&format!("{NS}:path"), &ancestor.name));
    if let Some(hash) = &ancestor.parent_hash {
        properties.push(property(&format!("{NS}:wdelta:parent_hash"), hash));
    }
    if let Some(d) = &ancestor.derivation {
        properties.push(property(&format!("{NS}:relation"), d.relation));
        if let Some(hub) = d.base_model_relation {
            properties.push(property(&format!("{NS}:base_model_relation"), hub));
        }
        properties.push(property(
            &format!("{NS}:relation:confidence"),
            format!("{:.3}", d.confidence),
        ));
        properties.push(property(&format!("{NS}:relation:summary"), &d.summary));
    }
    sort_properties(&mut properties);
    files_into(&mut c, &ancestor.files, &bom_ref);
    c.insert("properties".into(), Value::Array(properties));
    Value::Object(c)
}

fn sort_properties(properties: &mut [Value]) {
    properties.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
}

fn model_card(artifact: &Artifact, described: &Described<'_>) -> (Option<Value>, Option<Value>) {
    let card = card(
        artifact,
        described.config.as_ref(),
        described.card_license.as_deref(),
    );
    let mut parameters = Map::new();
    if let Some(family) = &card.family {
        parameters.insert("architectureFamily".into(), family.clone().into());
    }
    if let Some(arch) = &card.architecture {
        parameters.insert("modelArchitecture".into(), arch.clone().into());
    }
    let mut properties = Vec::new();
    if let Some(length) = card.context_length {
        properties.push(property("context_length", length));
    }
    if let Some(q) = &card.quantization {
        properties.push(property("quantization", q));
    }
    let mut model_card = Map::new();
    if !parameters.is_empty() {
        model_card.insert("modelParameters".into(), Value::Object(parameters));
    }
    if !properties.is_empty() {
        model_card.insert("properties".into(), Value::Array(properties));
    }
    let license = card.license.map(|l| match l {
        License::Id(id) => json!([{ "license": { "id": id } }]),
        License::Expression(e) => json!([{ "expression": e }]),
    });
    (
        (!model_card.is_empty()).then_some(Value::Object(model_card)),
        license,
    )
}

fn model_component(described: &Described<'_>, index: usize) -> Value {
    let bom_ref = format!("model-{}", index + 1);
    let mut c = Map::new();
    c.insert("type".into(), "machine-learning-model".into());
    c.insert("bom-ref".into(), bom_ref.clone().into());
    c.insert("name".into(), short_name(&described.name).into());
    let mut properties = described.artifact.map(model_properties).unwrap_or_default();
    properties.push(property(&format!("{NS}:path"), &described.name));
    if let Some((strategy, parent)) = &described.wdelta {
        properties.push(property(&format!("{NS}:wdelta:strategy"), strategy));
        properties.push(property(&format!("{NS}:wdelta:parent_hash"), parent));
    }
    sort_properties(&mut properties);
    files_into(&mut c, &described.files, &bom_ref);
    if let Some(artifact) = described.artifact {
        let (card, license) = model_card(artifact, described);
        if let Some(license) = license {
            c.insert("licenses".into(), license);
        }
        if let Some(card) = card {
            c.insert("modelCard".into(), card);
        }
    }
    c.insert("properties".into(), Value::Array(properties));
    if !described.ancestors.is_empty() {
        let ancestors: Vec<Value> = described
            .ancestors
            .iter()
            .enumerate()
            .map(|(i, a)| ancestor_component(a, format!("{bom_ref}/ancestor-{}", i + 1)))
            .collect();
        c.insert("pedigree".into(), json!({ "ancestors": ancestors }));
    }
    Value::Object(c)
}

/// A UUID of RFC 9562's version 8 (custom) from the first 16 bytes of the SHA-256 of
/// `content`: the same content, the same serial number.
fn serial_number(content: &[u8]) -> String {
    let digest = crate::digest::hex(&<sha2::Sha256 as sha2::Digest>::digest(content));
    let mut hex: Vec<char> = digest[..32].chars().collect();
    hex[12] = '8';
    let variant = u8::from_str_radix(&hex[16].to_string(), 16).unwrap_or(0);
    hex[16] = char::from_digit(u32::from(0x8 | (variant & 0x3)), 16).unwrap_or('8');
    let s: String = hex.into_iter().collect();
    format!(
        "urn:uuid:{}-{}-{}-{}-{}",
        &s[..8],
        &s[8..12],
        &s[12..16],
        &s[16..20],
        &s[20..32]
    )
}

/// The BOM of `models` as CycloneDX 1.6 JSON, ending in a newline.
pub(crate) fn document(models: &[Described<'_>], options: &Options) -> Vec<u8> {
    let components: Vec<Value> = models
        .iter()
        .enumerate()
        .map(|(i, m)| model_component(m, i))
        .collect();
    let mut metadata = Map::new();
    if let Some(timestamp) = &options.timestamp {
        metadata.insert("timestamp".into(), timestamp.clone().into());
    }
    metadata.insert(
        "tools".into(),
        json!({ "components": [{
            "type": "application",
            "name": "weight-inspect",
            "version": env!("CARGO_PKG_VERSION"),
        }]}),
    );
    let mut doc = json!({
        "bomFormat": "CycloneDX",
        "specVersion": "1.6",
        "version": 1,
        "metadata": Value::Object(metadata),
        "components": components,
    });
    // The serial number hashes everything but the timestamp: one content, one number.
    let mut untimed = doc.clone();
    if let Some(meta) = untimed["metadata"].as_object_mut() {
        meta.remove("timestamp");
    }
    let serial = serial_number(&serde_json::to_vec(&untimed).expect("serializable"));
    doc["serialNumber"] = serial.into();
    let mut out = serde_json::to_vec_pretty(&doc).expect("serializable");
    out.push(b'\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serial_numbers_are_uuids_of_the_content() {
        let a = serial_number(b"one");
        assert_eq!(a, serial_number(b"one"));
        assert_ne!(a, serial_number(b"two"));
        let re = regex::Regex::new(
            "^urn:uuid:[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$",
        )
        .unwrap();
        assert!(re.is_match(&a), "{a}");
    }

    #[test]
    fn names_are_the_last_component() {
        assert_eq!(short_name("models/base.gguf"), "base.gguf");
        assert_eq!(short_name("HEAD:model.gguf"), "model.gguf");
        assert_eq!(short_name("dir/"), "dir");
    }
}
