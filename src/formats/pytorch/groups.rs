//! The parts of a training checkpoint: model weights apart from optimizer, scheduler, RNG and
//! other state, told by the keys of the checkpoint's root dict as the libraries write them.

/// Root keys of model weights: Lightning's `state_dict`, fairseq's and most scripts' `model`,
/// DeepSpeed's `module`, the common `model_state_dict`.
use crate::artifact::TrainingCheckpoint;

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

/// The model identity rule of a training checkpoint (docs/SPEC.md §5d): a root dict with
/// model weights beside optimizer, scheduler or RNG state. A dict of model weights and plain
/// values (`{"model": …, "epoch": 7}`) is not one and has no model identity.
pub(super) fn training(keys: &[String]) -> Option<TrainingCheckpoint> {
    let group_of = |key: &str| -> &'static str {
        [
            (MODEL, "model"),
            (OPTIMIZER, "optimizer"),
            (SCHEDULER, "scheduler"),
            (RNG, "rng"),
        ]
        .iter()
        .find(|(list, _)| list.contains(&key))
        .map_or("other", |(_, group)| group)
    };
    let mut groups: Vec<&'static str> = keys.iter().map(|k| group_of(k)).collect();
    groups.sort_unstable();
    groups.dedup();
    let training_state = ["optimizer", "scheduler", "rng"];
    if !groups.contains(&"model") || !groups.iter().any(|g| training_state.contains(g)) {
        return None;
    }
    let mut model_keys: Vec<String> = keys
        .iter()
        .filter(|k| group_of(k) == "model")
        .cloned()
        .collect();
    model_keys.sort_unstable();
    let mut root_groups: Vec<(String, &'static str)> =
        keys.iter().map(|k| (k.clone(), group_of(k))).collect();
    root_groups.sort_unstable();
    Some(TrainingCheckpoint {
        model_keys,
        groups,
        root_groups,
    })
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

    #[test]
    fn a_training_checkpoint_is_model_weights_beside_training_state() {
        let lightning = training(&keys(&[
            "epoch",
            "state_dict",
            "optimizer_states",
            "lr_schedulers",
            "hyper_parameters",
        ]))
        .unwrap();
        assert_eq!(lightning.model_keys, ["state_dict"]);
        assert_eq!(
            lightning.groups,
            ["model", "optimizer", "other", "scheduler"]
        );
        assert_eq!(
            lightning.model_name("state_dict.layer.weight"),
            Some("layer.weight")
        );
        assert_eq!(lightning.model_name("state_dict"), Some(""));
        assert_eq!(lightning.group_of("hyper_parameters.lr"), "other");
        assert_eq!(lightning.group_of("lr_schedulers.0.interval"), "scheduler");
        assert_eq!(lightning.model_name("state_dicts.x"), None);
        assert_eq!(
            lightning.model_name("optimizer_states.0.state.0.exp_avg"),
            None
        );
        // Two model keys keep their names whole.
        let two = training(&keys(&["model", "module", "optimizer"])).unwrap();
        assert_eq!(two.model_name("module.w"), Some("module.w"));
        // Model weights with plain values, training state without weights: not one.
        assert!(training(&keys(&["model", "epoch"])).is_none());
        assert!(training(&keys(&["weight", "numpy_rng"])).is_none());
        assert!(training(&keys(&["state", "param_groups"])).is_none());
    }
}
