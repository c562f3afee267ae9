//! What a model card says of a model, from its header and the config.json beside it:
//! architecture, quantization, context length, licence.

use crate::artifact::{Artifact, Format, Value};

/// The model card's facts; each None when neither the header nor config.json holds it.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Card {
    /// GGUF's `general.architecture`, else config.json's `model_type`.
    pub family: Option<String>,
    /// config.json's `architectures[0]`, else GGUF's `general.architecture`.
    pub architecture: Option<String>,
    /// GGUF's `general.file_type` by name (`MOSTLY_Q4_K_M`), else config.json's
    /// `quantization_config.quant_method`.
    pub quantization: Option<String>,
    pub context_length: Option<u64>,
    /// A valid SPDX licence: an id, or an expression of ids.
    pub license: Option<License>,
}

/// A licence as CycloneDX writes it.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum License {
    Id(String),
    Expression(String),
}

fn integer(value: &Value) -> Option<u64> {
    match *value {
        Value::U8(v) => Some(v.into()),
        Value::U16(v) => Some(v.into()),
        Value::U32(v) => Some(v.into()),
        Value::U64(v) => Some(v),
        Value::I32(v) => u64::try_from(v).ok(),
        Value::I64(v) => u64::try_from(v).ok(),
        _ => None,
    }
}

/// The card of `artifact`, with `config` (config.json) and the licence a README's front
/// matter declares.
pub(super) fn card(
    artifact: &Artifact,
    config: Option<&serde_json::Value>,
    card_license: Option<&str>,
) -> Card {
    let meta = |key: &str| artifact.metadata.get(key);
    let meta_str = |key: &str| meta(key).and_then(Value::as_str).map(str::to_owned);
    let config_str = |key: &str| {
        config
            .and_then(|c| c.get(key))
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned)
    };
    let gguf_arch = (artifact.format == Format::Gguf)
        .then(|| meta_str("general.architecture"))
        .flatten();
    let config_arch = config
        .and_then(|c| c.get("architectures")?.get(0)?.as_str())
        .map(str::to_owned);
    let quantization = meta("general.file_type")
        .and_then(|v| crate::render::enums::enum_name("general.file_type", v))
        .map(str::to_owned)
        .or_else(|| {
            config
                .and_then(|c| c.get("quantization_config")?.get("quant_method")?.as_str())
                .map(str::to_owned)
        });
    let context_length = gguf_arch
        .as_ref()
        .and_then(|arch| meta(&format!("{arch}.context_length")))
        .and_then(integer)
        .or_else(|| {
            [
                "max_position_embeddings",
                "n_positions",
                "max_seq_len",
                "seq_length",
            ]
            .iter()
            .find_map(|k| config?.get(*k)?.as_u64())
        });
    let license = [
        meta_str("general.license"),
        meta_str("license"),
        card_license.map(str::to_owned),
        config_str("license"),
    ]
    .into_iter()
    .flatten()
    .find_map(|text| spdx(&text));
    Card {
        family: gguf_arch.clone().or_else(|| config_str("model_type")),
        architecture: config_arch.or(gguf_arch),
        quantization,
        context_length,
        license,
    }
}

/// `text` as a valid SPDX licence: one id (any case, as the Hub writes `apache-2.0`) or an
/// expression of ids; None for anything else (`other`, `llama3`, free text): a BOM never
/// says "unknown". Deprecated ids are left out too (CycloneDX's list may not have them).
pub(super) fn spdx(text: &str) -> Option<License> {
    let text = text.trim();
    if text.is_empty() || text.len() > 512 {
        return None;
    }
    // Each id in its canonical spelling, the operators in capitals, then a strict parse.
    let spaced = text.replace('(', " ( ").replace(')', " ) ");
    let mut words = Vec::new();
    for word in spaced.split_whitespace() {
        let upper = word.to_ascii_uppercase();
        if matches!(upper.as_str(), "AND" | "OR" | "WITH" | "(" | ")") {
            words.push(upper);
            continue;
        }
        let (bare, plus) = match word.strip_suffix('+') {
            Some(bare) => (bare, "+"),
            None => (word, ""),
        };
        let id = spdx::identifiers::LICENSES
            .iter()
            .find(|l| l.name.eq_ignore_ascii_case(bare))
            .map(|l| l.name)
            .or_else(|| {
                spdx::identifiers::EXCEPTIONS
                    .iter()
                    .find(|e| e.name.eq_ignore_ascii_case(bare))
                    .map(|e| e.name)
            })?;
        words.push(format!("{id}{plus}"));
    }
    let canonical = words.join(" ").replace("( ", "(").replace(" )", ")");
    let expression = spdx::Expression::parse(&canonical).ok()?;
    let mut ids = 0;
    for req in expression.requirements() {
        match &req.req.license {
            spdx::LicenseItem::Spdx { id, .. } if !id.is_deprecated() => ids += 1,
            _ => return None,
        }
    }
    match (ids, words.len()) {
        (0, _) => None,
        (1, 1) => Some(License::Id(canonical)),
        _ => Some(License::Expression(canonical)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn licences_are_spdx_or_left_out() {
        assert_eq!(spdx("apache-2.0"), Some(License::Id("Apache-2.0".into())));
        assert_eq!(spdx("MIT"), Some(License::Id("MIT".into())));
        assert_eq!(spdx("llama3"), None);
        assert_eq!(spdx("other"), None);
        assert_eq!(spdx("unknown"), None);
        assert_eq!(spdx(""), None);
        assert!(matches!(
            spdx("MIT OR Apache-2.0"),
            Some(License::Expression(_))
        ));
    }
}
