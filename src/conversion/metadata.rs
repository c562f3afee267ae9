//! What a conversion kept of the model's configuration. A safetensors or PyTorch file holds
//! no configuration; its directory's config.json does, and the converter writes most of it
//! into GGUF keys: those are compared. Everything else (tokenizer contents, chat template,
//! special tokens) is not checked, and the report says so.

use std::path::{Path, PathBuf};

use crate::artifact::{Artifact, Value};

/// One configuration value on both sides.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Check {
    /// The config.json key ("num_attention_heads").
    pub config_key: &'static str,
    /// The GGUF key ("llama.attention.head_count").
    pub gguf_key: String,
    pub source: String,
    /// None when the GGUF does not have the key.
    pub target: Option<String>,
    pub equal: bool,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct MetadataChecks {
    /// The config.json read, when the source's directory has one.
    pub config: Option<PathBuf>,
    pub checks: Vec<Check>,
}

/// config.json keys and the GGUF key (after "{arch}.") the converter writes them to.
const KEYS: &[(&str, &str)] = &[
    ("num_hidden_layers", "block_count"),
    ("hidden_size", "embedding_length"),
    ("intermediate_size", "feed_forward_length"),
    ("num_attention_heads", "attention.head_count"),
    ("num_key_value_heads", "attention.head_count_kv"),
    ("max_position_embeddings", "context_length"),
    ("rms_norm_eps", "attention.layer_norm_rms_epsilon"),
    ("layer_norm_eps", "attention.layer_norm_epsilon"),
    ("rope_theta", "rope.freq_base"),
    ("num_local_experts", "expert_count"),
    ("num_experts", "expert_count"),
    ("num_experts_per_tok", "expert_used_count"),
    // GPT-2 / Bloom / Falcon spellings (GPT2Model, BloomModel, FalconModel.set_gguf_parameters)
    ("n_layer", "block_count"),
    ("n_embd", "embedding_length"),
    ("n_inner", "feed_forward_length"),
    ("n_head", "attention.head_count"),
    ("num_kv_heads", "attention.head_count_kv"),
    ("n_ctx", "context_length"),
    ("layer_norm_epsilon", "attention.layer_norm_epsilon"),
];

/// GGUF keys (after "{arch}.") llama.cpp reads with a default when absent
/// (src/llama-model.cpp `load_hparams`: `rope_freq_base_train = 10000.0f` unless the key
/// is there).
const DEFAULTS: &[(&str, f64)] = &[("rope.freq_base", 10000.0)];

/// Biggest config.json read (a configuration is a few KB).
const MAX_CONFIG: u64 = 1 << 20;

/// Compares the config.json beside `source_path` (a file or a directory) with the GGUF's keys.
pub(super) fn check(source_path: &Path, target: &Artifact, architecture: &str) -> MetadataChecks {
    let dir = if source_path.is_dir() {
        source_path
    } else {
        source_path.parent().unwrap_or(Path::new("."))
    };
    let path = dir.join("config.json");
    let Some(config) = read_config(&path) else {
        return MetadataChecks::default();
    };
    let mut checks = Vec::new();
    for &(config_key, suffix) in KEYS {
        let Some(value) = config.get(config_key).filter(|v| v.is_number()) else {
            continue;
        };
        let gguf_key = format!("{architecture}.{suffix}");
        let target_value = target.metadata.get(&gguf_key).and_then(number);
        let source = value.as_f64().unwrap_or(f64::NAN);
        // A key the converter leaves out holds llama.cpp's default when the model loads.
        let default = DEFAULTS
            .iter()
            .find(|(key, _)| *key == suffix)
            .map(|(_, v)| *v);
        let (equal, shown) = match (target_value, default) {
            (Some(t), _) => (same_number(source, t), Some(format_number(t))),
            (None, Some(d)) if same_number(source, d) => (
                true,
                Some(format!(
                    "missing (llama.cpp's default {})",
                    format_number(d)
                )),
            ),
            (None, _) => (false, None),
        };
        checks.push(Check {
            config_key,
            gguf_key,
            source: value.to_string(),
            target: shown,
            equal,
        });
    }
    if let Some(vocab) = config.get("vocab_size").and_then(serde_json::Value::as_u64) {
        let tokens = match target.metadata.get("tokenizer.ggml.tokens") {
            Some(Value::Array(a)) => Some(a.len() as u64),
            _ => None,
        };
        checks.push(Check {
            config_key: "vocab_size",
            gguf_key: "tokenizer.ggml.tokens (count)".into(),
            source: vocab.to_string(),
            target: tokens.map(|t| t.to_string()),
            equal: tokens == Some(vocab),
        });
    }
    MetadataChecks {
        config: Some(path),
        checks,
    }
}

fn read_config(path: &Path) -> Option<serde_json::Map<String, serde_json::Value>> {
    use std::io::Read;
    let (file, _) = crate::fsutil::open_regular(path).ok()?;
    let mut text = String::new();
    file.take(MAX_CONFIG).read_to_string(&mut text).ok()?;
    match serde_json::from_str(&text).ok()? {
        serde_json::Value::Object(map) => Some(map),
        _ => None,
    }
}

fn number(value: &Value) -> Option<f64> {
    Some(match value {
        Value::U8(v) => f64::from(*v),
        Value::I8(v) => f64::from(*v),
        Value::U16(v) => f64::from(*v),
        Value::I16(v) => f64::from(*v),
        Value::U32(v) => f64::from(*v),
        Value::I32(v) => f64::from(*v),
        Value::U64(v) => *v as f64,
        Value::I64(v) => *v as f64,
        Value::F32(v) => f64::from(v.value()),
        Value::F64(v) => v.value(),
        _ => return None,
    })
}

/// Equal as the converter writes them: epsilons and rope bases become f32 in GGUF.
fn same_number(a: f64, b: f64) -> bool {
    a == b || f64::from(a as f32) == b || (a - b).abs() <= 1e-6 * a.abs().max(b.abs())
}

fn format_number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        // f32 values widened: print the shortest f32 that round-trips.
        let f = v as f32;
        if f64::from(f) == v {
            format!("{f}")
        } else {
            format!("{v}")
        }
    }
}
