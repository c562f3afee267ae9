//! The thresholds `relate` decides by, each with its reason (docs/lineage.md lists them).

/// A weight tensor of a model derived from another keeps pointing the same way: its cosine
/// against the parent's tensor stays near 1 (a fine-tune that moves a tensor by rel_l2 r keeps
/// a cosine of about 1 − r²/2; 0.5 means a change as large as the tensor itself). Two
/// independently initialised tensors of n elements have a cosine of about ±1/√n, below 0.1
/// for any tensor of 100 elements or more. 0.5 lies far from both.
pub(crate) const RELATED_COSINE: f64 = 0.5;

/// The share of the changed weight elements (of the voting tensors) that must be related by
/// [`RELATED_COSINE`] for a fine-tune. Below it most of the model was replaced: a classifier
/// head re-initialised on top of a fine-tuned body is still a fine-tune (its few elements are
/// named as re-initialised), a model whose matrices are all new is not.
pub(crate) const FINETUNE_MIN_RELATED: f64 = 0.5;

/// Tensors that vote on whether two models' values are related: at least two dimensions and
/// this many elements. Norm weights (initialised to ones) and biases (to zeros) agree between
/// two models trained apart, and a tensor of a few elements has a large cosine by chance.
pub(crate) const VOTING_MIN_ELEMENTS: u64 = 256;

/// A merge explains the model far better than its best single candidate: the least-squares
/// residual is at most this share of the best candidate's own rel_l2. A fine-tune of one
/// candidate fitted by the others keeps a residual of about its own rel_l2 (ratio near 1); a
/// linear merge written in f32 leaves only rounding (ratio 1e-3 and below).
pub(crate) const MERGE_MAX_GAIN: f64 = 0.1;

/// A merge's residual, ‖M − Σ wᵢ Cᵢ‖ / ‖M‖ on the sample, is at most this: what bf16 rounding
/// of the merged model leaves (2⁻⁹ relative per value, about 0.2 % as a norm) with room.
pub(crate) const MERGE_MAX_RESIDUAL: f64 = 0.01;

/// A candidate takes part in a merge when its weight is at least this: smaller weights are
/// noise of the fit between nearly collinear candidates.
pub(crate) const MERGE_MIN_WEIGHT: f64 = 0.02;

/// Values sampled per model for the merge fit: 256-value runs spread over every voting
/// tensor, in proportion to its size. 2^18 values (2 MiB of f64 per model) estimate the
/// residual to well below [`MERGE_MAX_RESIDUAL`].
pub(crate) const MERGE_SAMPLE: u64 = 1 << 18;

/// Confidence levels as words: at or above `HIGH` "high", at or above `MEDIUM` "medium".
pub(crate) const CONFIDENCE_HIGH: f64 = 0.9;
/// See [`CONFIDENCE_HIGH`].
pub(crate) const CONFIDENCE_MEDIUM: f64 = 0.6;
