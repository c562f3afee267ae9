//! What `relate` found: a relation with the evidence that decided it.

use serde::Serialize;

/// How one model relates to a candidate parent (or, for a merge, to several).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "relation", rename_all = "kebab-case")]
pub(crate) enum Relation {
    /// The same weights: byte for byte the same files, or the same tensors' bytes in files
    /// whose metadata or layout differ.
    Identical(Identical),
    /// The same names and shapes in another float dtype, every value within its band.
    Cast(Cast),
    /// The same names and shapes, some tensors (re-)quantized, every value within its band.
    #[serde(rename = "re-quantized")]
    Requantized(Cast),
    /// Another format, paired as llama.cpp's converter names and lays out the tensors.
    Conversion(ConversionFit),
    /// The same structure with values moved, the moved values still related to the parent's.
    FineTune(FineTune),
    /// A weighted sum of two or more candidates.
    Merge(Merge),
    /// A LoRA adapter whose low-rank pairs fit the parent's tensors.
    Adapter(Adapter),
    /// Vocabulary rows or layers added.
    Extended(Resized),
    /// Vocabulary rows or layers removed.
    Pruned(Resized),
    /// Not made from the candidate.
    Unrelated(Unrelated),
    /// The headers match and the values, which would decide, could not be read.
    Undecided(Undecided),
}

impl Relation {
    /// The relation's name, as `--json` and the policy's `relation` key spell it.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Relation::Identical(_) => "identical",
            Relation::Cast(_) => "cast",
            Relation::Requantized(_) => "re-quantized",
            Relation::Conversion(_) => "conversion",
            Relation::FineTune(_) => "fine-tune",
            Relation::Merge(_) => "merge",
            Relation::Adapter(_) => "adapter",
            Relation::Extended(_) => "extended",
            Relation::Pruned(_) => "pruned",
            Relation::Unrelated(_) => "unrelated",
            Relation::Undecided(_) => "undecided",
        }
    }

    /// The Hugging Face Hub's `base_model_relation` for this relation, spelled as a model
    /// card spells it, or None where the Hub has no word for it (identical, unrelated, an
    /// exact conversion, a pruning).
    pub(crate) fn base_model_relation(&self) -> Option<&'static str> {
        match self {
            Relation::Cast(_) | Relation::Requantized(_) => Some("quantized"),
            Relation::Conversion(c) if c.dtype_changed => Some("quantized"),
            Relation::FineTune(_) => Some("finetune"),
            Relation::Extended(r) | Relation::Pruned(r) if r.values_moved => Some("finetune"),
            Relation::Merge(_) => Some("merge"),
            Relation::Adapter(_) => Some("adapter"),
            _ => None,
        }
    }

    /// How strongly a candidate is this model's parent, for choosing among candidates:
    /// an exact derivation first, unrelated last.
    pub(crate) fn rank(&self) -> u8 {
        match self {
            Relation::Identical(_) => 9,
            Relation::Merge(_) => 8,
            Relation::Cast(_) | Relation::Requantized(_) | Relation::Adapter(_) => 7,
            Relation::Conversion(c) if c.faithful => 7,
            Relation::Conversion(_) => 5,
            Relation::FineTune(_) => 6,
            Relation::Extended(_) | Relation::Pruned(_) => 4,
            Relation::Undecided(_) => 1,
            Relation::Unrelated(_) => 0,
        }
    }

    /// Whether MODEL was made from the candidate (anything but unrelated and undecided).
    pub(crate) fn is_derived(&self) -> bool {
        !matches!(self, Relation::Unrelated(_) | Relation::Undecided(_))
    }
}

/// What decided a relation: the files' bytes, the headers alone, the compared values, or a
/// sample of values (a merge).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum DecidedBy {
    Bytes,
    Headers,
    Values,
    Sample,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Identical {
    /// Every file byte for byte the same (else the tensors' bytes are, the files' metadata or
    /// layout are not).
    pub files_equal: bool,
    pub tensors: usize,
    /// Metadata keys added, removed or changed.
    pub metadata_changed: usize,
}

/// The error band of one dtype change: what rounding to that dtype loses, at most.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Band {
    pub from: &'static str,
    pub to: &'static str,
    /// The band: rel_l2 at most this (0 for an exact cast, an up-cast).
    pub bound: f64,
    pub tensors: usize,
    /// The largest rel_l2 among them and its tensor.
    pub worst_rel_l2: f64,
    pub worst_tensor: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Cast {
    pub bands: Vec<Band>,
    /// Tensors that kept their dtype (and their bytes).
    pub unchanged: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ConversionFit {
    pub source_format: &'static str,
    pub target_format: &'static str,
    /// Every pair within its dtype's band.
    pub faithful: bool,
    pub pairs: usize,
    pub suspect: usize,
    /// Some pair changed dtype (a quantized or lower-precision conversion).
    pub dtype_changed: bool,
    /// The pair with the largest rel_l2, when a pair changed.
    pub worst_tensor: Option<String>,
    pub worst_rel_l2: Option<f64>,
}

/// One layer of a fine-tune.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct LayerMove {
    pub layer: String,
    pub tensors: usize,
    pub moved: usize,
    /// ‖Δ‖ / ‖parent‖ over the layer's moved tensors (None: a moved tensor was all zeros).
    pub rel_l2: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct FineTune {
    pub tensors: usize,
    pub moved: usize,
    /// Tensors whose values did not change.
    pub frozen: usize,
    /// ‖Δ‖ / ‖parent‖ over every moved tensor compared by value.
    pub rel_l2: Option<f64>,
    /// The share of the voting tensors' changed elements whose cosine is at least
    /// [`super::thresholds::RELATED_COSINE`].
    pub related_share: f64,
    /// The smallest cosine of a voting tensor that moved.
    pub min_cosine: Option<f64>,
    /// Layers with a moved tensor, in order of depth; layers with none are frozen.
    pub layers: Vec<LayerMove>,
    /// Layers whose tensors all kept their values.
    pub frozen_layers: Vec<String>,
    /// Moved tensors outside numbered layers (embeddings, the head).
    pub moved_outside_layers: Vec<String>,
    /// Voting tensors whose cosine is below the related one: replaced rather than tuned.
    pub reinitialised: Vec<String>,
    /// Tensors whose dtype changed as well.
    pub dtype_changed: usize,
    /// The comparison was a conversion's pairing (another format).
    pub across_formats: bool,
}

/// One candidate's weight in a merge.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct MergeWeight {
    pub candidate: String,
    pub weight: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Merge {
    pub weights: Vec<MergeWeight>,
    /// ‖M − Σ wᵢ Cᵢ‖ / ‖M‖ on the sample.
    pub residual: f64,
    /// The best single candidate's rel_l2 on the same sample, and its name.
    pub best_single: String,
    pub best_single_rel_l2: f64,
    pub sampled_values: u64,
    pub sampled_tensors: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Adapter {
    /// `peft` (lora_A / lora_B) or `gguf` (llama.cpp's lora_a / lora_b).
    pub layout: &'static str,
    /// The ranks of its pairs, smallest and largest (equal for most adapters).
    pub rank: u64,
    pub max_rank: u64,
    /// The last name component of each targeted module (`q_proj`, `query`), sorted.
    pub target_modules: Vec<String>,
    /// Low-rank pairs that fit a parent tensor, of all pairs.
    pub fitted: usize,
    pub pairs: usize,
    /// lora_alpha, from adapter_config.json beside the file or the GGUF's adapter.lora.alpha.
    pub alpha: Option<f64>,
    /// Where alpha and the rank were read from, when not from the tensors alone.
    pub config: Option<String>,
    /// The base model named by adapter_config.json's base_model_name_or_path.
    pub base_model_name: Option<String>,
    /// Tensors saved in full beside the pairs (PEFT's modules_to_save).
    pub saved_in_full: Vec<String>,
}

/// One tensor whose rows were added or removed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct RowChange {
    pub tensor: String,
    pub parent_rows: u64,
    pub rows: u64,
    /// The rows both have hold the same values (None: not compared).
    pub shared_rows_equal: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Resized {
    pub rows: Vec<RowChange>,
    pub layers_added: Vec<String>,
    pub layers_removed: Vec<String>,
    /// Tensors both have with the same shape.
    pub shared_tensors: usize,
    /// Of them, tensors whose values moved (related to the parent's).
    pub shared_moved: usize,
    pub values_moved: bool,
}

/// What showed the candidate is not the parent.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "by", rename_all = "kebab-case")]
pub(crate) enum Unrelated {
    /// The headers name another architecture.
    Architecture { model: String, parent: String },
    /// No tensor names in common (and no conversion pairing).
    NoCommonTensors {
        model_tensors: usize,
        parent_tensors: usize,
    },
    /// Tensors of the same names with other shapes (another width or depth).
    Shapes {
        differing: usize,
        shared: usize,
        example: String,
        model_shape: Vec<u64>,
        parent_shape: Vec<u64>,
    },
    /// The values are uncorrelated: the related share of the voting tensors' changed
    /// elements is below [`super::thresholds::FINETUNE_MIN_RELATED`].
    Values {
        related_share: f64,
        median_cosine: Option<f64>,
        voting_tensors: usize,
    },
    /// An adapter whose pairs do not fit the candidate's tensors.
    AdapterDoesNotFit {
        pairs: usize,
        fitted: usize,
        example: String,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Undecided {
    pub why: String,
}
