//! Hugging Face tensor names → GGUF tensor names, as llama.cpp's `convert_hf_to_gguf.py` maps
//! them: gguf-py's `TensorNameMap` for the GGUF's architecture and block count (generated into
//! [`super::names_table`]), after the renames the converter makes before mapping.

use std::collections::HashMap;

use super::names_table::{ARCHITECTURES, KINDS, OVERRIDES};

/// A mapped name: the kind and the GGUF name (with the suffix kept, ".weight" / ".bias").
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Mapped {
    pub kind: &'static str,
    pub gguf: String,
}

/// The name map of one architecture and block count.
pub(super) struct NameMap {
    map: HashMap<String, (&'static str, String)>,
}

impl NameMap {
    /// The map gguf-py's `get_tensor_name_map(arch, n_blocks)` builds; None for an
    /// architecture gguf-py does not know. `n_blocks` is capped by the caller (it comes from a
    /// file).
    pub(super) fn new(arch: &str, n_blocks: u64) -> Option<NameMap> {
        let kinds = ARCHITECTURES
            .binary_search_by(|(name, _)| name.cmp(&arch))
            .ok()
            .map(|i| ARCHITECTURES[i].1)?;
        let has = |kind: &str| kinds.binary_search(&kind).is_ok();
        let mut map = HashMap::new();
        let mut insert = |kind: &'static str, gguf: String, hf: &[&str], bid: Option<u64>| {
            let format = |s: &str| match bid {
                Some(b) => s.replace("{bid}", &b.to_string()),
                None => s.to_owned(),
            };
            map.insert(gguf.clone(), (kind, gguf.clone()));
            for key in hf {
                map.insert(format(key), (kind, gguf.clone()));
            }
        };
        for k in KINDS.iter().filter(|k| !k.block && has(k.kind)) {
            insert(k.kind, k.gguf.to_owned(), k.hf, None);
        }
        // gguf-py updates its block table with the architecture's own names: a replaced kind
        // keeps its place, a new one comes last.
        let mut block: Vec<(&'static str, &'static str, &'static [&'static str])> = KINDS
            .iter()
            .filter(|k| k.block)
            .map(|k| (k.kind, k.gguf, k.hf))
            .collect();
        for o in OVERRIDES.iter().filter(|o| o.arch == arch) {
            match block.iter_mut().find(|(kind, _, _)| *kind == o.kind) {
                Some(entry) => entry.2 = o.hf,
                None => block.push((o.kind, o.gguf, o.hf)),
            }
        }
        for bid in 0..n_blocks {
            for &(kind, gguf, hf) in block.iter().filter(|(kind, _, _)| has(kind)) {
                insert(kind, gguf.replace("{bid}", &bid.to_string()), hf, Some(bid));
            }
        }
        Some(NameMap { map })
    }

    /// gguf-py's `get_type_and_name(name, try_suffixes=(".weight", ".bias"))` of the name the
    /// converter maps (after [`converter_name`]).
    pub(super) fn get(&self, hf_name: &str) -> Option<Mapped> {
        let name = converter_name(hf_name);
        if let Some((kind, gguf)) = self.map.get(name.as_str()) {
            return Some(Mapped {
                kind,
                gguf: gguf.clone(),
            });
        }
        for suffix in [".weight", ".bias"] {
            if let Some(stem) = name.strip_suffix(suffix)
                && let Some((kind, gguf)) = self.map.get(stem)
            {
                return Some(Mapped {
                    kind,
                    gguf: format!("{gguf}{suffix}"),
                });
            }
        }
        None
    }

    /// The GGUF name of a kind in a block (gguf-py's `TENSOR_NAMES`), whether or not this
    /// gguf-py lists the kind for the architecture: the converter's own gguf-py may be newer
    /// (llama.cpp's `--fuse-qkv` writes attn_qkv for llama), and the caller checks that the
    /// file has the tensor.
    pub(super) fn gguf_name(kind: &str, bid: Option<u64>) -> Option<String> {
        let k = KINDS.iter().find(|k| k.kind == kind)?;
        Some(match bid {
            Some(b) => k.gguf.replace("{bid}", &b.to_string()),
            None => k.gguf.to_owned(),
        })
    }
}

/// The renames `convert_hf_to_gguf.py` makes before mapping: BERT-family models drop their
/// "bert." / "roberta." prefix, old checkpoints' LayerNorm ".gamma" / ".beta" are
/// ".weight" / ".bias", and a MoE router's "e_score_correction_bias" is
/// "e_score_correction.bias".
fn converter_name(name: &str) -> String {
    let name = ["bert.", "roberta."]
        .iter()
        .find_map(|p| name.strip_prefix(p))
        .unwrap_or(name);
    if let Some(stem) = name.strip_suffix("e_score_correction_bias") {
        // conversion/base.py: the router's bias is mapped as a `.bias` of e_score_correction
        format!("{stem}e_score_correction.bias")
    } else if let Some(stem) = name.strip_suffix(".gamma") {
        format!("{stem}.weight")
    } else if let Some(stem) = name.strip_suffix(".beta") {
        format!("{stem}.bias")
    } else {
        name.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llama_names_map_as_gguf_py_maps_them() {
        let map = NameMap::new("llama", 2).unwrap();
        let q = map.get("model.layers.1.self_attn.q_proj.weight").unwrap();
        assert_eq!((q.kind, q.gguf.as_str()), ("ATTN_Q", "blk.1.attn_q.weight"));
        assert_eq!(
            map.get("model.embed_tokens.weight").unwrap().gguf,
            "token_embd.weight"
        );
        assert_eq!(map.get("model.layers.2.self_attn.q_proj.weight"), None);
        assert!(NameMap::new("no-such-architecture", 2).is_none());
    }

    #[test]
    fn bert_prefixes_and_old_layer_norm_names_are_renamed_first() {
        assert_eq!(
            converter_name("roberta.embeddings.LayerNorm.gamma"),
            "embeddings.LayerNorm.weight"
        );
        assert_eq!(
            converter_name("bert.pooler.dense.beta"),
            "pooler.dense.bias"
        );
    }
}
