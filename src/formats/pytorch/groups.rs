//! The parts of a training checkpoint: model weights apart from optimizer, scheduler, RNG and
//! other state, told by the keys of the checkpoint's root dict as the libraries write them.

/// Root keys of model weights: Lightning's `state_dict`, fairseq's and most scripts' `model`,
/// DeepSpeed's `module`, the common `model_state_dict`.
const MODEL: &[&str] = &["state_dict", "model", "module", "model_state_dict"];
/// Root keys of optimizer state: Lightning's `optimizer_states`, fairseq's
/// `optimizer_history` and `last_optimizer_state`, the common `optimizer(_state_dict)`.
const OPTIMIZER: &[&str] = &[
    "optimizer_states",
    "optimizer",
    "optimizer_state_dict",
    "optimizer_history",
    "last_optimizer_state",
];
const SCHEDULER: &[&str] = &["lr_schedulers", "scheduler", "lr_scheduler"];
const RNG: &[&str] = &["rng_state", "rng_states", "numpy_rng", "torch_rng_state"];

/// How a checkpoint's tensors are grouped.
pub(super) enum Rule {
    /// A checkpoint with some of the keys above: each tensor by its first name segment.
    ByRootKey,
    /// A file that is one part as a whole: an optimizer's `state_dict()` (`state` and
    /// `param_groups`, the Trainer's optimizer.pt), RNG states (the Trainer's rng_state.pth).
    Whole(&'static str),
}

/// The rule for a root dict with `keys`; None for a plain state dict (all model weights).
pub(super) fn of(keys: &[String]) -> Option<Rule> {
    let has = |list: &[&str]| keys.iter().any(|k| list.contains(&k.as_str()));
    if has(MODEL) || has(OPTIMIZER) || has(SCHEDULER) || has(RNG) {
        return Some(Rule::ByRootKey);
    }
    let only = |list: &[&str]| !keys.is_empty() && keys.iter().all(|k| list.contains(&k.as_str()));
    if only(&["state", "param_groups"]) && keys.iter().any(|k| k == "param_groups") {
        return Some(Rule::Whole("optimizer"));
    }
    if only(&[
        "python", "numpy", "cpu", "cuda", "mps", "xpu", "npu", "hpu", "mlu", "musa",
    ]) && keys.iter().any(|k| k == "cpu")
    {
        return Some(Rule::Whole("rng"));
    }
    None
}

impl Rule {
    /// The group of the tensor named `name`.
    pub(super) fn group(&self, name: &str) -> &'static str {
        match self {
            Rule::Whole(group) => group,
            Rule::ByRootKey => {
                let first = name.split('.').next().unwrap_or(name);
                if MODEL.contains(&first) {
                    "model"
                } else if OPTIMIZER.contains(&first) {
                    "optimizer"
                } else if SCHEDULER.contains(&first) {
                    "scheduler"
                } else if RNG.contains(&first) {
                    "rng"
                } else {
                    "other"
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(list: &[&str]) -> Vec<String> {
        list.iter().map(std::string::ToString::to_string).collect()
    }

    #[test]
    fn training_checkpoints_are_grouped_state_dicts_are_not() {
        assert!(of(&keys(&["layer.weight", "layer.bias"])).is_none());
        let lightning = of(&keys(&["epoch", "state_dict", "optimizer_states"])).unwrap();
        assert_eq!(lightning.group("state_dict.layer.weight"), "model");
        assert_eq!(
            lightning.group("optimizer_states.0.state.0.exp_avg"),
            "optimizer"
        );
        assert_eq!(lightning.group("loops.x"), "other");
        let optimizer = of(&keys(&["state", "param_groups"])).unwrap();
        assert_eq!(optimizer.group("state.0.exp_avg"), "optimizer");
        let rng = of(&keys(&["python", "numpy", "cpu"])).unwrap();
        assert_eq!(rng.group("cpu"), "rng");
    }
}
