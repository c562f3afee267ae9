//! What llama.cpp's `convert_hf_to_gguf.py` does to an architecture's tensors beyond renaming
//! them, as data keyed by GGUF architecture. The converter computes these in code (each
//! `modify_tensors`), so the table is written by hand; every row cites the converter function
//! it mirrors (llama.cpp as vendored in llama-cpp-python 0.3.36, whose converter lives in
//! `conversion/*.py`). An architecture the table
//! does not list gets only the renames of the name table: a tensor whose shape they do not
//! explain is "not compared" with its shapes, never an error.

/// How a fused QKV tensor's rows are grouped in the source and regrouped by the converter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum QkvRegroup {
    /// Per head, q, k and v rows interleaved ([heads, 3, head_dim] rows): the converter writes
    /// all q rows, then all k, then all v (Bloom, GPT-NeoX).
    PerHead,
    /// Per kv group, the group's q heads then one k and one v head ([kv, q/kv + 2, head_dim]
    /// rows): the converter writes all q, then all k, then all v (Falcon).
    PerKvGroup,
}

use super::converter_table::CONVERTERS;

/// One source tensor the converter cuts into several GGUF tensors: its rows viewed as
/// [groups, sum of the parts' rows, cols] (groups: heads or experts, from the GGUF's shapes),
/// each part taking its slice of every group, in order.
#[derive(Debug, Clone, Copy)]
pub(super) struct Split {
    /// Source names ending so are split.
    pub suffix: &'static str,
    /// The parts' GGUF kinds (gguf-py `MODEL_TENSOR` names), in source row order, each with
    /// whether the converter transposes its slice within each group.
    pub into: &'static [(&'static str, bool)],
}

/// One architecture's deliberate transforms.
#[derive(Debug, Clone, Copy)]
pub(super) struct ArchTransforms {
    /// The GGUF architecture (`general.architecture`).
    pub arch: &'static str,
    /// Q and K rows permuted with `LlamaModel.permute` (head_count / head_count_kv heads).
    pub permute_qk: bool,
    /// Source names ending so get 1 added (the model computes `x * (1 + w)`; ggml `x * w`).
    pub plus_one_suffix: Option<&'static str>,
    /// Source names ending so are Conv1D weights ([in, out]): the converter transposes them.
    pub transposed_suffixes: &'static [&'static str],
    /// Source names ending so hold a fused QKV the converter regroups.
    pub qkv_regroup: Option<(&'static [&'static str], QkvRegroup)>,
    /// Prefixes the converter removes from source names before mapping them.
    pub dropped_prefixes: &'static [&'static str],
    /// Source tensors cut into several GGUF tensors.
    pub splits: &'static [Split],
    /// The converter function this row mirrors.
    pub cite: &'static str,
}

const NONE: ArchTransforms = ArchTransforms {
    arch: "",
    permute_qk: false,
    plus_one_suffix: None,
    transposed_suffixes: &[],
    qkv_regroup: None,
    dropped_prefixes: &[],
    splits: &[],
    cite: "",
};

/// The table, sorted by architecture.
pub(super) const TABLE: &[ArchTransforms] = &[
    ArchTransforms {
        arch: "arcee",
        permute_qk: true,
        cite: "ArceeModel(LlamaModel).modify_tensors: LlamaModel.permute",
        ..NONE
    },
    ArchTransforms {
        arch: "arctic",
        permute_qk: true,
        cite: "ArcticModel.modify_tensors: LlamaModel.permute",
        ..NONE
    },
    ArchTransforms {
        arch: "bloom",
        qkv_regroup: Some((&[".self_attention.query_key_value"], QkvRegroup::PerHead)),
        dropped_prefixes: &["transformer."],
        cite: "conversion/bloom.py BloomModel.modify_tensors: `transformer.` removed from names; \
               query_key_value reshaped (n_head, 3, head_dim, n_embd) and concatenated q, k, v",
        ..NONE
    },
    ArchTransforms {
        arch: "chameleon",
        permute_qk: true,
        cite: "ChameleonModel.modify_tensors: LlamaModel.permute",
        ..NONE
    },
    ArchTransforms {
        arch: "deepseek",
        permute_qk: true,
        cite: "conversion/deepseek.py DeepseekModel.modify_tensors: DeepseekModel.permute",
        ..NONE
    },
    ArchTransforms {
        arch: "deepseek2",
        splits: &[Split {
            suffix: ".self_attn.kv_b_proj.weight",
            into: &[("ATTN_K_B", true), ("ATTN_V_B", false)],
        }],
        cite: "conversion/deepseek.py DeepseekV2Model.modify_tensors: kv_b_proj viewed (n_head_kv, \
               qk_nope_head_dim + v_head_dim, kv_lora_rank), split into k_b (transposed per head) \
               and v_b (DeepSeek-V2, V3)",
        ..NONE
    },
    ArchTransforms {
        arch: "falcon",
        qkv_regroup: Some((&[".self_attention.query_key_value"], QkvRegroup::PerKvGroup)),
        cite: "conversion/falcon.py FalconModel.modify_tensors: query_key_value viewed (n_head_kv, n_head // \
               n_head_kv + 2, head_dim, n_embd) and concatenated q, k, v",
        ..NONE
    },
    ArchTransforms {
        arch: "gemma",
        plus_one_suffix: Some("norm.weight"),
        cite: "conversion/gemma.py GemmaModel.modify_tensors: `if name.endswith(\"norm.weight\"): data_torch = \
               data_torch + 1`",
        ..NONE
    },
    ArchTransforms {
        arch: "gemma2",
        plus_one_suffix: Some("norm.weight"),
        cite: "conversion/gemma.py Gemma2Model.modify_tensors: `if name.endswith(\"norm.weight\"): data_torch = \
               data_torch + 1`",
        ..NONE
    },
    ArchTransforms {
        arch: "gemma3",
        plus_one_suffix: Some("norm.weight"),
        cite: "conversion/gemma.py Gemma3Model.modify_tensors: `if name.endswith(\"norm.weight\"): data_torch = \
               data_torch + self.norm_shift` (1.0)",
        ..NONE
    },
    ArchTransforms {
        arch: "gpt2",
        transposed_suffixes: &[
            ".attn.c_attn.weight",
            ".attn.c_proj.weight",
            ".mlp.c_fc.weight",
            ".mlp.c_proj.weight",
        ],
        cite: "conversion/gpt2.py GPT2Model.modify_tensors: Conv1D c_attn / c_proj / c_fc weights \
               transposed",
        ..NONE
    },
    ArchTransforms {
        arch: "gptneox",
        qkv_regroup: Some((&[".attention.query_key_value"], QkvRegroup::PerHead)),
        cite: "conversion/gptneox.py GPTNeoXModel.modify_tensors: query_key_value reshaped (n_head, 3, head_dim, \
               n_embd) and concatenated q, k, v",
        ..NONE
    },
    ArchTransforms {
        arch: "granite",
        permute_qk: true,
        cite: "conversion/granite.py GraniteModel(LlamaModel).modify_tensors: LlamaModel.permute",
        ..NONE
    },
    ArchTransforms {
        arch: "granitemoe",
        permute_qk: true,
        splits: &[Split {
            suffix: ".block_sparse_moe.input_linear.weight",
            into: &[("FFN_GATE_EXP", false), ("FFN_UP_EXP", false)],
        }],
        cite: "conversion/granite.py GraniteMoeModel(GraniteModel).modify_tensors: input_linear \
               split into gate and up experts; LlamaModel.permute",
        ..NONE
    },
    ArchTransforms {
        arch: "llada",
        permute_qk: true,
        cite: "LLaDAModel.modify_tensors: LlamaModel.permute",
        ..NONE
    },
    ArchTransforms {
        arch: "llama",
        permute_qk: true,
        cite: "conversion/llama.py LlamaModel.modify_tensors: LlamaModel.permute (Llama, Mistral, \
               Mixtral)",
        ..NONE
    },
    ArchTransforms {
        arch: "minicpm",
        permute_qk: true,
        cite: "MiniCPMModel.modify_tensors: MiniCPMModel.permute",
        ..NONE
    },
    ArchTransforms {
        arch: "nanbeige",
        permute_qk: true,
        cite: "NanbeigeModel(LlamaModel).modify_tensors: LlamaModel.permute",
        ..NONE
    },
    ArchTransforms {
        arch: "olmo",
        permute_qk: true,
        cite: "OlmoModel.modify_tensors: LlamaModel.permute",
        ..NONE
    },
    ArchTransforms {
        arch: "smollm3",
        permute_qk: true,
        cite: "conversion/llama.py SmolLM3Model(LlamaModel).modify_tensors: LlamaModel.permute",
        ..NONE
    },
];

/// What the converter's modify_tensors chains show that the planner follows without a row:
/// renames (the name table) and expert stacking.
const FOLLOWED: &[&str] = &["rename", "stack"];

/// The transforms of `arch`: its row; else, when every converter class of it permutes Q/K
/// and does nothing the planner does not follow (read from the converter,
/// [`CONVERTERS`]), a Q/K permutation row citing the class; else the empty row (renames only).
pub(super) fn of(arch: &str) -> ArchTransforms {
    if let Ok(i) = TABLE.binary_search_by(|t| t.arch.cmp(arch)) {
        return TABLE[i];
    }
    let mut classes = CONVERTERS.iter().filter(|c| c.arch == arch).peekable();
    let first = classes.peek().copied();
    if let Some(first) = first
        && classes.all(|c| {
            c.transforms.contains(&"permute_qk")
                && c.transforms
                    .iter()
                    .all(|t| *t == "permute_qk" || FOLLOWED.contains(t))
        })
    {
        return ArchTransforms {
            arch: first.arch,
            permute_qk: true,
            cite: first.cite,
            ..NONE
        };
    }
    ArchTransforms { arch: "", ..NONE }
}

/// Source tensors the converter drops on purpose (buffers, derived values), with why. Names
/// the table does not know stay "no GGUF name in the converter's table".
pub(super) fn dropped_on_purpose(source: &str) -> Option<&'static str> {
    const RULES: &[(&str, &str)] = &[
        (
            "rotary_emb.inv_freq",
            "rotary frequencies, derived from rope_theta at load (conversion/base.py \
             ModelBase skips .rotary_emb.inv_freq)",
        ),
        (
            ".attn.masked_bias",
            "an attention mask buffer (conversion/base.py ModelBase and GPT2Model.modify_tensors \
             drop it)",
        ),
        (
            ".attn.bias",
            "a causal mask buffer (conversion/gpt2.py GPT2Model.modify_tensors drops it)",
        ),
        (
            ".attention.masked_bias",
            "an attention mask buffer (conversion/base.py ModelBase drops it)",
        ),
        (
            ".attention.bias",
            "a causal mask buffer (conversion/base.py ModelBase drops it)",
        ),
        (
            "position_ids",
            "position ids buffer, 0..n (derived at load)",
        ),
    ];
    RULES
        .iter()
        .find(|(suffix, _)| source.ends_with(suffix))
        .map(|(_, why)| *why)
}

/// The source rows, in target order, of a regrouped QKV: (source row offset, rows) runs.
/// `rows` is the source's row count; `heads` and `kv` the GGUF's head counts.
pub(super) fn qkv_runs(
    regroup: QkvRegroup,
    rows: u64,
    heads: u64,
    kv: u64,
) -> Option<Vec<(u64, u64)>> {
    let (groups, q_per_group) = match regroup {
        QkvRegroup::PerHead => (heads, 1),
        QkvRegroup::PerKvGroup => {
            if kv == 0 || !heads.is_multiple_of(kv) {
                return None;
            }
            (kv, heads / kv)
        }
    };
    let slots = q_per_group + 2;
    if groups == 0 || !rows.is_multiple_of(groups * slots) {
        return None;
    }
    let head_dim = rows / groups / slots;
    let mut runs = Vec::with_capacity((groups * slots) as usize);
    // all q heads, group after group
    for g in 0..groups {
        for s in 0..q_per_group {
            runs.push(((g * slots + s) * head_dim, head_dim));
        }
    }
    for slot in [q_per_group, q_per_group + 1] {
        for g in 0..groups {
            runs.push(((g * slots + slot) * head_dim, head_dim));
        }
    }
    Some(runs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_sorted_and_lookups_find_rows() {
        assert!(TABLE.windows(2).all(|w| w[0].arch < w[1].arch));
        assert!(of("gemma2").plus_one_suffix.is_some());
        assert!(of("llama").permute_qk);
        assert_eq!(of("qwen2").arch, "");
    }

    /// Every hand-written row is backed by what the extractor read from the converter: the
    /// architecture's classes show the transform the row undoes.
    #[test]
    fn the_table_agrees_with_the_converter() {
        let mut checked = 0;
        for row in TABLE {
            let shown = |kind: &str| {
                CONVERTERS
                    .iter()
                    .any(|c| c.arch == row.arch && c.transforms.contains(&kind))
            };
            let wanted = [
                (row.permute_qk, "permute_qk"),
                (row.plus_one_suffix.is_some(), "norm_offset"),
                (!row.transposed_suffixes.is_empty(), "transpose"),
                (row.qkv_regroup.is_some(), "reshape"),
                (!row.splits.is_empty(), "split"),
            ];
            for (needed, kind) in wanted {
                if needed {
                    assert!(shown(kind), "{}: the converter shows no {kind}", row.arch);
                    checked += 1;
                }
            }
        }
        assert!(checked >= TABLE.len(), "{checked}");
        // Read from the converter alone: Llama's derivatives permute.
        assert!(of("smollm3").permute_qk && of("granite").permute_qk);
        assert!(
            CONVERTERS
                .iter()
                .any(|c| c.arch == "deepseek2" && c.transforms.contains(&"split"))
        );
    }

    /// numpy, Falcon: qkv.view(kv, q/kv + 2, hd, n) → cat(q, k, v); Bloom the same with kv = heads.
    #[test]
    fn regrouped_rows_follow_the_converter() {
        // 4 heads, 2 kv, head_dim 1: source rows [q0 q1 k0 v0 | q2 q3 k1 v1]
        let runs = qkv_runs(QkvRegroup::PerKvGroup, 8, 4, 2).unwrap();
        let rows: Vec<u64> = runs.iter().map(|r| r.0).collect();
        assert_eq!(rows, [0, 1, 4, 5, 2, 6, 3, 7]);
        // per head [q0 k0 v0 | q1 k1 v1], head_dim 2
        let runs = qkv_runs(QkvRegroup::PerHead, 12, 2, 2).unwrap();
        assert_eq!(runs, [(0, 2), (6, 2), (2, 2), (8, 2), (4, 2), (10, 2)]);
        assert_eq!(qkv_runs(QkvRegroup::PerKvGroup, 8, 3, 2), None);
    }
}
