//! LoRA adapters: a file of low-rank pairs (PEFT's `lora_A`/`lora_B`, kohya's
//! `lora_down`/`lora_up`, llama.cpp's `lora_a`/`lora_b`) fitted to a parent's tensors by the
//! headers alone.

use std::collections::BTreeSet;
use std::path::Path;

use super::relation::{Adapter, Unrelated};
use crate::artifact::{Artifact, Format, Value};

/// Which half of a pair a tensor is, and the module it adapts.
struct Half<'a> {
    module: &'a str,
    down: bool,
}

/// The module and half of a low-rank tensor name, or None for any other name.
fn half(name: &str) -> Option<Half<'_>> {
    // llama.cpp: `blk.0.attn_q.weight.lora_a`, the module being the base tensor's own name.
    if let Some(module) = name.strip_suffix(".lora_a") {
        return Some(Half { module, down: true });
    }
    if let Some(module) = name.strip_suffix(".lora_b") {
        return Some(Half {
            module,
            down: false,
        });
    }
    for (marker, down) in [
        (".lora_A.", true),
        (".lora_B.", false),
        (".lora_down.", true),
        (".lora_up.", false),
    ] {
        if let Some(at) = name.find(marker) {
            return Some(Half {
                module: &name[..at],
                down,
            });
        }
    }
    None
}

/// Whether `artifact` holds low-rank pairs (an adapter, not a model).
pub(super) fn is_adapter(artifact: &Artifact) -> bool {
    artifact.tensors.keys().any(|n| half(n).is_some())
}

/// The parent tensor a PEFT module names: `base_model.model.` dropped, then the module's
/// `.weight`; else the one parent tensor ending in the module path's tail.
fn parent_tensor<'p>(parent: &'p Artifact, module: &str, gguf: bool) -> Option<&'p str> {
    if gguf {
        return parent
            .tensors
            .get_index(parent.tensors.position(module)?)
            .map(|e| e.0);
    }
    let module = module.strip_prefix("base_model.model.").unwrap_or(module);
    let mut rest = module;
    loop {
        let exact = format!("{rest}.weight");
        if let Some(at) = parent.tensors.position(&exact) {
            return parent.tensors.get_index(at).map(|e| e.0);
        }
        let suffix = format!(".{exact}");
        let mut found = parent.tensors.keys().filter(|n| n.ends_with(&suffix));
        if let (Some(one), None) = (found.next(), found.next()) {
            return Some(one);
        }
        rest = rest.split_once('.')?.1;
    }
}

/// What the adapter's own files say: alpha, rank and base model from adapter_config.json
/// beside it, or a GGUF adapter's `adapter.lora.alpha`.
struct Config {
    alpha: Option<f64>,
    source: Option<String>,
    base_model: Option<String>,
}

fn config(adapter: &Artifact, dir: Option<&Path>) -> Config {
    if let Some(alpha) = adapter.metadata.get("adapter.lora.alpha").and_then(number) {
        return Config {
            alpha: Some(alpha),
            source: Some("adapter.lora.alpha".to_owned()),
            base_model: None,
        };
    }
    let Some(path) = dir.map(|d| d.join("adapter_config.json")) else {
        return Config {
            alpha: None,
            source: None,
            base_model: None,
        };
    };
    let json: Option<serde_json::Value> = std::fs::read(&path)
        .ok()
        .filter(|b| b.len() <= 1 << 20)
        .and_then(|b| serde_json::from_slice(&b).ok());
    match json {
        Some(json) => Config {
            alpha: json.get("lora_alpha").and_then(serde_json::Value::as_f64),
            source: Some("adapter_config.json".to_owned()),
            base_model: json
                .get("base_model_name_or_path")
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned),
        },
        None => Config {
            alpha: None,
            source: None,
            base_model: None,
        },
    }
}

fn number(value: &Value) -> Option<f64> {
    match *value {
        Value::F32(v) => Some(f64::from(v.value())),
        Value::F64(v) => Some(v.value()),
        Value::U32(v) => Some(f64::from(v)),
        Value::I32(v) => Some(f64::from(v)),
        Value::U64(v) => Some(v as f64),
        Value::I64(v) => Some(v as f64),
        _ => None,
    }
}

/// One low-rank pair: the shapes of its halves.
#[derive(Default)]
struct Pair<'a> {
    down: Option<&'a [u64]>,
    up: Option<&'a [u64]>,
}

/// The adapter fitted to `parent`, or why it does not fit.
pub(super) fn fit(
    adapter: &Artifact,
    parent: &Artifact,
    dir: Option<&Path>,
) -> Result<Adapter, Unrelated> {
    let gguf = adapter.format == Format::Gguf;
    let mut pairs: std::collections::BTreeMap<&str, Pair<'_>> = Default::default();
    let mut saved_in_full = Vec::new();
    for (name, info) in &adapter.tensors {
        match half(name) {
            Some(h) => {
                let pair = pairs.entry(h.module).or_default();
                if h.down {
                    pair.down = Some(&info.shape);
                } else {
                    pair.up = Some(&info.shape);
                }
            }
            None => saved_in_full.push(name.to_owned()),
        }
    }
    let (mut fitted, mut ranks, mut modules) = (0, Vec::new(), BTreeSet::new());
    let mut misfit = None;
    for (module, pair) in &pairs {
        let fits = match (pair.down, pair.up, parent_tensor(parent, module, gguf)) {
            (Some(down), Some(up), Some(base)) => {
                let base = &parent.tensors.get(base).expect("found by name").shape;
                fits(down, up, base, gguf)
            }
            _ => None,
        };
        match fits {
            Some(rank) => {
                fitted += 1;
                ranks.push(rank);
                let short = module.trim_end_matches(".weight");
                modules.insert(short.rsplit('.').next().unwrap_or(short).to_owned());
            }
            None => misfit = misfit.or(Some(*module)),
        }
    }
    // Most pairs must fit: an adapter for another model of the same family fits none.
    if pairs.is_empty() || fitted * 10 < pairs.len() * 9 {
        return Err(Unrelated::AdapterDoesNotFit {
            pairs: pairs.len(),
            fitted,
            example: misfit.unwrap_or_default().to_owned(),
        });
    }
    let config = config(adapter, dir);
    Ok(Adapter {
        layout: if gguf { "gguf" } else { "peft" },
        rank: ranks.iter().copied().min().unwrap_or(0),
        max_rank: ranks.iter().copied().max().unwrap_or(0),
        target_modules: modules.into_iter().collect(),
        fitted,
        pairs: pairs.len(),
        alpha: config.alpha,
        config: config.source,
        base_model_name: config.base_model,
        saved_in_full,
    })
}

/// The rank of a pair that fits `base`: PEFT's A is [r, in] and B [out, r] against a base of
/// [out, in] (or [in, out], GPT-2's Conv1D); llama.cpp's a is [in, r] and b [r, out] in
/// ggml's order against [in, out].
fn fits(down: &[u64], up: &[u64], base: &[u64], gguf: bool) -> Option<u64> {
    let ([d0, d1], [u0, u1], [b0, b1]) = (down, up, base) else {
        return None;
    };
    if gguf {
        return (d1 == u0 && d0 == b0 && u1 == b1).then_some(*d1);
    }
    let rank = *d0;
    let (out, inp) = (*u0, *d1);
    (*u1 == rank && ((out, inp) == (*b0, *b1) || (out, inp) == (*b1, *b0))).then_some(rank)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn halves_of_every_layout() {
        let h = half("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight").unwrap();
        assert_eq!(
            (h.module, h.down),
            ("base_model.model.model.layers.0.self_attn.q_proj", true)
        );
        let h = half("blk.3.attn_v.weight.lora_b").unwrap();
        assert_eq!((h.module, h.down), ("blk.3.attn_v.weight", false));
        let h = half("text.layers.1.mlp.lora_up.weight").unwrap();
        assert_eq!((h.module, h.down), ("text.layers.1.mlp", false));
        assert!(half("model.layers.0.self_attn.q_proj.weight").is_none());
    }

    #[test]
    fn pairs_fit_by_shape() {
        // PEFT: A [8, 64], B [32, 8] on a [32, 64] weight; GPT-2's Conv1D [64, 32] too.
        assert_eq!(fits(&[8, 64], &[32, 8], &[32, 64], false), Some(8));
        assert_eq!(fits(&[8, 64], &[32, 8], &[64, 32], false), Some(8));
        assert_eq!(fits(&[8, 64], &[32, 4], &[32, 64], false), None);
        assert_eq!(fits(&[8, 64], &[32, 8], &[32, 65], false), None);
        // llama.cpp: a ne [64, 8], b ne [8, 32] on ne [64, 32].
        assert_eq!(fits(&[64, 8], &[8, 32], &[64, 32], true), Some(8));
        assert_eq!(fits(&[64, 8], &[8, 32], &[32, 64], true), None);
    }
}
